"""Streams, events, deferred cleanup, reference counting and Python threads."""
import gc
import threading
import weakref

import numpy as np
import pytest

import devarray as cuda
from conftest import live_arrays


def test_stream_async_copies(no_leak):
    s = cuda.stream()
    a = np.arange(1000.0)
    out = np.zeros_like(a)
    with s.auto_synchronize():
        d = cuda.to_device(a, stream=s)
        d.copy_to_host(out, stream=s)
    np.testing.assert_array_equal(out, a)
    e1, e2 = cuda.event(), cuda.event()
    e1.record(s)
    d2 = cuda.device_array_like(d, stream=s)
    d2.copy_to_device(d, stream=s)
    e2.record(s)
    e2.wait(cuda.stream())
    e2.synchronize()
    assert e2.query() and s.query()
    assert cuda.event_elapsed_time(e1, e2) >= 0
    assert e1.elapsed_time(e2) >= 0
    s.synchronize()
    np.testing.assert_array_equal(d2.copy_to_host(), a)
    ds = cuda.default_stream()
    d.copy_to_host(out, stream=ds)
    ds.synchronize()
    del d, d2


def test_refcount_no_leak(ctx):
    gc.collect()
    before = live_arrays(ctx)
    d = cuda.to_device(np.zeros((4, 4)))
    v = d[1:, ::2]
    t = v.T
    assert live_arrays(ctx) == before + 3
    del d
    assert live_arrays(ctx) == before + 3  # the views keep their base alive
    np.testing.assert_array_equal(t.copy_to_host(), np.zeros((2, 3)))
    del v, t
    assert live_arrays(ctx) == before


def test_deferred_deallocation_counts(ctx):
    """Numba's rule: frees queue, and the queue flushes when it holds more than
    max_pending_deallocs_count (10) entries; never inside defer_cleanup."""
    limit = int(ctx.option("max_pending_deallocs_count"))
    gc.collect()
    for _ in range(3):  # a flush may release objects whose own frees queue (a view's base)
        ctx.deallocations.clear()
    assert len(ctx.deallocations) == 0
    with cuda.defer_cleanup():
        arrs = [cuda.device_array(256, np.uint8) for _ in range(limit + 3)]
        del arrs
        gc.collect()
        assert len(ctx.deallocations) == limit + 3
        assert ctx.deallocations.pending_bytes == 256 * (limit + 3)
        ctx.deallocations.clear()  # a no-op inside the scope
        assert len(ctx.deallocations) == limit + 3
    ctx.deallocations.clear()
    assert len(ctx.deallocations) == 0
    for i in range(limit):
        cuda.device_array(64, np.uint8)
        gc.collect()
    assert len(ctx.deallocations) == limit
    cuda.device_array(64, np.uint8)  # the release that makes it limit + 1 flushes
    gc.collect()
    assert len(ctx.deallocations) == 0
    free, total = ctx.get_memory_info()
    assert 0 <= free <= total
    with ctx.deallocations.disable():
        cuda.device_array(8)
        gc.collect()
        assert len(ctx.deallocations) >= 1


def test_python_threads(ctx, no_leak):
    errors = []

    def work(seed):
        try:
            s = cuda.stream()
            a = np.random.default_rng(seed).standard_normal((64, 3))
            for _ in range(20):
                d = cuda.to_device(a, stream=s)
                h = d.copy_to_host(stream=s)
                s.synchronize()
                np.testing.assert_array_equal(h, a)
                np.testing.assert_array_equal(d[::2].copy_to_host(), a[::2])
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    ts = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors


def test_errors_are_per_thread():
    msgs = {}

    def fail(n):
        try:
            cuda.device_array((-n, 1))
        except cuda.ArgumentError as e:
            msgs[n] = e.detail

    ts = [threading.Thread(target=fail, args=(n,)) for n in (1, 2, 3)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert len(msgs) == 3 and all(msgs.values())


def test_context_info(ctx):
    assert cuda.current_context() is ctx
    assert ctx.backend in ("host", "opencl", "cuda", "hip")
    st = ctx.stats()
    assert isinstance(st, dict)
    assert cuda.is_available()
    assert cuda.library_path


def test_setitem_on_a_stream(no_leak):
    """d.setitem(key, value, stream): __setitem__'s semantics, queued on the stream, which
    holds the host value until it synchronizes."""
    s = cuda.stream()
    h = np.zeros((4, 256))
    d = cuda.to_device(h)
    row = np.arange(256.0)
    held = weakref.ref(row)
    d.setitem(2, row, stream=s)
    d.setitem((slice(None), 0), 7.0, stream=s)
    d.setitem((3, 5), 9, stream=s)
    drow = cuda.to_device(np.full(256, 4.0))
    d.setitem(1, drow, stream=s)
    del row, drow
    gc.collect()
    assert held() is not None  # the stream holds what it still may read
    out = np.empty_like(h)
    d.copy_to_host(out, stream=s)
    s.synchronize()
    gc.collect()
    assert held() is None
    h[2] = np.arange(256.0)
    h[:, 0] = 7.0
    h[3, 5] = 9
    h[1] = 4.0
    np.testing.assert_array_equal(out, h)
    with pytest.raises(ValueError) as want:
        h[:] = np.ones((2, 3))
    with pytest.raises(ValueError) as got:
        d.setitem(slice(None), np.ones((2, 3)), stream=s)
    assert str(got.value) == str(want.value)
    # stream=0: the array's own stream (bind), as __setitem__
    b = d.bind(s)
    v = np.ones(256)
    held = weakref.ref(v)
    b.setitem(0, v)
    b[3] = np.zeros(256)
    del v
    gc.collect()
    assert held() is not None  # queued on s, held by it
    s.synchronize()
    h[0], h[3] = 1.0, 0.0
    np.testing.assert_array_equal(d.copy_to_host(), h)
    del d, b


def test_record_setitem_on_a_stream(no_leak):
    dt = np.dtype([("x", np.float64), ("n", np.int32)])
    r = cuda.to_device(np.zeros((), dt)[()])
    assert isinstance(r, cuda.DeviceRecord)
    s = cuda.stream()
    r.setitem("x", 2.5, stream=s)
    r.setitem("n", 7, stream=s)
    s.synchronize()
    assert r["x"] == 2.5 and r["n"] == 7
    r["n"] = 8
    assert r.copy_to_host()["n"] == 8
    with pytest.raises(ValueError) as want:
        np.zeros((), dt)["x"] = "abc"
    with pytest.raises(ValueError) as got:
        r.setitem("x", "abc", stream=s)
    assert str(got.value) == str(want.value)
    del r
