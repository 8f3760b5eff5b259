"""Stream.add_callback and Stream.async_done (Numba's stream callbacks and awaitables)."""
import asyncio
import gc
import sys
import threading
import weakref

import numpy as np
import pytest

import devarray as cuda

N = 1 << 20  # large enough that a copy is still running when add_callback returns


@pytest.fixture(autouse=True)
def collect_after():
    """Leave no stream behind for later tests that count pending deallocations: the records
    of callbacks that ran go at the next synchronize, and futures and loops form cycles."""
    yield
    cuda.stream().synchronize()
    gc.collect()


def _streams():
    return [cuda.stream(), cuda.default_stream(), cuda.legacy_default_stream(),
            cuda.per_thread_default_stream()]


def test_callback_after_queued_work(no_leak):
    """The callback sees the copy queued before it complete, receives the stream, status 0
    and the arg, on a thread that is not the caller's."""
    a = np.random.default_rng(1).random(N)
    for s in _streams():
        out = np.zeros_like(a)
        d = cuda.to_device(a, stream=s)
        d.copy_to_host(out, stream=s)
        seen = []
        arg = object()
        s.add_callback(lambda st, status, x: seen.append(
            (st, status, x, np.array_equal(out, a), threading.get_ident())), arg)
        s.synchronize()
        assert len(seen) == 1
        st, status, x, complete, tid = seen[0]
        assert st is s and status == 0 and x is arg
        assert complete, "the copy queued before the callback had not finished"
        assert tid != threading.get_ident()
        del d, seen


def test_callbacks_run_in_order_and_block_later_work(no_leak):
    s = cuda.stream()
    gate = threading.Event()
    order = []
    s.add_callback(lambda st, status, x: (gate.wait(30), order.append(x)), 0)
    for i in range(1, 4):
        s.add_callback(lambda st, status, x: order.append(x), i)
    d = cuda.to_device(np.arange(8.0), stream=s)  # queued after the callbacks: waits for them
    assert not s.query()
    assert order == []
    gate.set()
    s.synchronize()
    assert order == [0, 1, 2, 3]
    np.testing.assert_array_equal(d.copy_to_host(), np.arange(8.0))
    del d


def test_callbacks_on_several_streams():
    streams = [cuda.stream() for _ in range(4)]
    hits = {}
    lock = threading.Lock()

    def cb(st, status, i):
        with lock:
            hits[i] = (st, status)
    for i, s in enumerate(streams):
        cuda.to_device(np.full(N // 4, i, np.float64), stream=s)
        s.add_callback(cb, i)
    for s in streams:
        s.synchronize()
    assert sorted(hits) == [0, 1, 2, 3]
    assert all(hits[i] == (streams[i], 0) for i in range(4))


def test_callback_and_arg_kept_alive_until_run(no_leak):
    """Nothing but the stream's record refers to the callback and its arg (a device array
    here) until the callback ran; the record lets them go afterwards, on a Python thread."""
    s = cuda.stream()
    gate = threading.Event()
    s.add_callback(lambda st, status, x: gate.wait(30), None)

    class Arg:
        pass
    arg = Arg()
    arg.dev = cuda.to_device(np.arange(4.0))
    seen = []

    def cb(st, status, x):
        seen.append(x.dev.shape)
    refs = weakref.ref(arg), weakref.ref(cb)
    s.add_callback(cb, arg)
    del arg, cb
    gc.collect()
    assert refs[0]() is not None and refs[1]() is not None
    gate.set()
    s.synchronize()
    gc.collect()
    assert seen == [(4,)]
    assert refs[0]() is None and refs[1]() is None


def test_callback_exception_is_reported(monkeypatch):
    reports = []
    monkeypatch.setattr(sys, "unraisablehook", reports.append)
    raised = []

    def bad(st, status, arg):
        e = ValueError("raised in a stream callback")
        raised.append(e)
        raise e
    s = cuda.stream()
    s.add_callback(bad, None)
    ran = []
    s.add_callback(lambda st, status, arg: ran.append(status), None)
    s.synchronize()  # does not raise: the error was reported on the callback's thread
    assert len(reports) == 1 and len(raised) == 1
    r = reports[0]
    assert r.exc_value is raised[0] and r.exc_type is ValueError
    assert r.exc_traceback is not None
    assert "bad" in repr(r.object) and "stream callback" in repr(r.object)
    assert any("stream callback" in n for n in getattr(r.exc_value, "__notes__", ["stream callback"]))
    assert ran == [0]  # the stream went on


def test_driver_calls_in_a_callback_raise_misuse(no_leak):
    """A devarray call that reaches the driver, made in a callback, raises MisuseError on
    every backend (dv_stream_add_callback: CUDA's rule for host functions); metadata works
    there, and the same calls work afterwards on this thread."""
    d = cuda.to_device(np.arange(8.0))
    other = cuda.stream()
    seen = {}

    def cb(st, status, arg):
        for name, call in (("copy", lambda: d.copy_to_host(stream=other)),
                           ("alloc", lambda: cuda.device_array(4)),
                           ("sync", other.synchronize)):
            try:
                call()
                seen[name] = None
            except cuda.MisuseError as e:
                seen[name] = str(e)
        seen["shape"] = d.shape
    s = cuda.stream()
    s.add_callback(cb, None)
    s.synchronize()
    for name in ("copy", "alloc", "sync"):
        assert seen[name] is not None and "stream callback" in seen[name], (name, seen[name])
    assert seen["shape"] == (8,)
    assert d.copy_to_host(stream=other).shape == (8,)
    cuda.device_array(4)
    other.synchronize()


def test_add_callback_rejects_non_callable():
    with pytest.raises(TypeError):
        cuda.stream().add_callback(42, None)


def test_async_done_gather_several_streams(no_leak):
    a = np.arange(N, dtype=np.float64)

    async def main():
        streams = _streams()
        outs = [np.zeros_like(a) for _ in streams]
        devs = []
        for s, o in zip(streams, outs):
            d = cuda.to_device(a, stream=s)
            d.copy_to_host(o, stream=s)
            devs.append(d)
        res = await asyncio.wait_for(asyncio.gather(*(s.async_done() for s in streams)), 60)
        for o in outs:
            np.testing.assert_array_equal(o, a)
        return res, streams
    res, streams = asyncio.run(main())
    assert all(r is s for r, s in zip(res, streams))
    for s in streams:
        s.synchronize()


def test_async_done_cancel_one_while_another_resolves():
    """A cancelled future stays cancelled when its stream's work completes later (no result
    set on it: the loop reports no error), while another stream's future resolves."""
    a = np.arange(N, dtype=np.float64)

    async def main():
        loop = asyncio.get_running_loop()
        errors = []
        loop.set_exception_handler(lambda lp, context: errors.append(context))
        s1, s2 = cuda.stream(), cuda.stream()
        d = cuda.to_device(a, stream=s1)  # s1 has work queued
        f1, f2 = s1.async_done(), s2.async_done()
        assert f1.cancel()
        assert await asyncio.wait_for(f2, 30) is s2
        f3 = s1.async_done()  # queued after f1's callback: once it resolves, f1's ran too
        assert await asyncio.wait_for(f3, 30) is s1
        for _ in range(3):
            await asyncio.sleep(0)  # let f1's resolution (a no-op) run
        del d
        return f1, errors
    f1, errors = asyncio.run(main())
    assert f1.cancelled() and errors == []


def test_async_done_several_futures_one_stream_and_idle_stream():
    async def main():
        s = cuda.stream()
        idle = await asyncio.wait_for(s.async_done(), 30)  # no work queued
        futs = [s.async_done() for _ in range(5)]
        return idle, s, await asyncio.wait_for(asyncio.gather(*futs), 30)
    idle, s, res = asyncio.run(main())
    assert idle is s and all(r is s for r in res)


def test_async_done_needs_a_running_loop():
    with pytest.raises(RuntimeError):
        cuda.stream().async_done()


def test_callback_takes_over_the_streams_holds(no_leak):
    """A host array the stream holds for a copy queued before a callback is let go once the
    callback has run, with no synchronize of that stream (asyncio code never calls it)."""
    import time
    s = cuda.stream()
    d = cuda.to_device(np.arange(N, dtype=np.float64))
    out = np.zeros(N)
    d.copy_to_host(out, stream=s)
    held = weakref.ref(out)
    ran = threading.Event()
    s.add_callback(lambda st, status, x: ran.set(), None)
    del out
    gc.collect()
    assert ran.wait(30)
    deadline = time.monotonic() + 30
    while held() is not None and time.monotonic() < deadline:
        cuda.stream().synchronize()  # another stream: reaps the records of callbacks that ran
        gc.collect()
        time.sleep(0.01)
    assert held() is None
    del d


KERNEL_OOB = """
DV_KERNEL(past_end, DV_ARRAY(float, a), int n) {
  DV_BIND(float, a);
  a[(int)dv_global_id(0) + n] = 1.0f;
}
"""


def test_error_status_reaches_callback_and_future(ctx):
    """Work that fails on the stream: the callback gets the library's status (as Numba passes
    CUDA's), the future the DevarrayError of that status; synchronize reports it too. Needs
    the host simulator's checked mode, which catches the kernel's write past the end."""
    if ctx.backend != "host" or ctx.option("host_mode") != "checked":
        pytest.skip("needs the host backend in checked mode (a kernel fault it detects)")
    k = cuda.Module(KERNEL_OOB, name="past_end.dvk").get("past_end")
    s = cuda.stream()
    d = cuda.device_array(16, np.float32)
    k[1, 16, s](d, 16)
    seen = []
    s.add_callback(lambda st, status, x: seen.append(status), None)
    with pytest.raises(cuda.DriverError) as e:
        s.synchronize()
    assert seen == [e.value.status] and e.value.status != 0

    async def main():
        k[1, 16, s](d, 16)
        return await asyncio.wait_for(s.async_done(), 30)
    with pytest.raises(cuda.DriverError) as e2:
        asyncio.run(main())
    assert e2.value.status == e.value.status and e2.value.name == e.value.name
    with pytest.raises(cuda.DriverError):
        s.synchronize()
    del d


def test_close_after_async_done_and_pending_callbacks():
    """close() lets callbacks still queued run and drops the records of those that ran: the
    streams they held do not keep the context busy (DV_ERR_BUSY)."""
    ran = []

    async def main():
        s = cuda.stream()
        d = cuda.to_device(np.ones(N, np.float32), stream=s)
        await s.async_done()
        t = cuda.stream()
        d.copy_to_host(stream=t)
        t.add_callback(lambda stream, status, arg: ran.append(arg), "late")
        return d

    d = asyncio.run(main())
    del d
    gc.collect()
    ctx = cuda.current_context()
    cuda.close()  # raised MisuseError (1 stream still alive) before close() settled them
    assert ctx.handle is None  # destroyed, not retired (close() retires a busy context)
    assert ran == ["late"]
    cuda.current_context()  # a new context works


def test_gc_inside_a_callback_defers_releases(ctx):
    """The cyclic GC running on the callback thread frees nothing there (the library forbids
    frees inside a callback): the C handles wait for the Python thread's next stream call."""
    from devarray import _stream

    class Cycle:
        def __init__(self):
            self.me = self
            self.a = cuda.device_array(1000)
            self.s = cuda.stream()
            self.e = cuda.event()
            self.m = ctx.memalloc(64)

    s = cuda.stream()
    gc.collect()
    before = ctx.raw_stats().arrays.current
    cycles = [Cycle() for _ in range(50)]
    assert ctx.raw_stats().arrays.current >= before + 100
    seen = []

    def collect(stream, status, arg):
        gc.collect()
        seen.append((threading.get_ident(), len(_stream._deferred)))

    gc.disable()
    try:
        del cycles
        s.add_callback(collect, None)
        s.synchronize()
    finally:
        gc.enable()
    assert len(seen) == 1 and seen[0][0] != threading.get_ident()
    assert seen[0][1] >= 200  # 50 arrays, pointers, streams and events, all deferred
    assert not _stream._deferred  # drained by synchronize, on this thread
    assert ctx.raw_stats().arrays.current == before
