"""Streams and stream callbacks (add_callback, async_done): the Stream object of a context
given to it; the streams and events of the current context (stream(), event(), ...) are
_context's, which makes them."""

import atexit
import contextlib
import ctypes
import itertools
import threading

from . import _abi
from ._lib import lib, check, error_class, speedups, MisuseError


class Stream:
    """A devarray stream (Numba's cuda.stream()).

    Host arrays used by asynchronous work on the stream (copy_to_host into a NumPy array,
    to_device of one, kernel launches with NumPy arguments) are kept alive by the stream
    until its next synchronize(), or until a callback queued after that work (add_callback,
    async_done) has run.
    """

    def __init__(self, handle, owned, ctx):
        self.handle = handle
        self._owned = owned
        self._ctx = ctx
        self._keep = []

    def __repr__(self):
        return "<devarray.Stream %#x on %s>" % (self.handle or 0, self._ctx.backend)

    def __int__(self):
        return self.handle or 0

    def __bool__(self):
        return True

    def synchronize(self):
        """Block until all work queued on the stream is complete."""
        st = lib.dv_stream_synchronize(self.handle)
        self._keep = []
        _reap()
        check(st, "stream.synchronize")

    def query(self):
        """True when all queued work is complete (never blocks)."""
        return lib.dv_stream_query(self.handle) == 0

    @contextlib.contextmanager
    def auto_synchronize(self):
        """A context manager that synchronizes the stream when the block exits."""
        check(lib.dv_stream_auto_sync_begin(self.handle), "auto_synchronize")
        try:
            yield self
        finally:
            st = lib.dv_stream_auto_sync_end(self.handle)
            self._keep = []
            check(st, "auto_synchronize")

    def _hold(self, obj):
        self._keep.append(obj)
        graph = self._capturing
        if graph is not None:  # the graph's work uses it at each launch
            graph._keep.append(obj)

    _capturing = None  # the Graph being captured on this stream, if any

    def begin_capture(self):
        """Start capturing the work queued on this stream into a graph (CuPy's
        Stream.begin_capture; devarray's dv_graph_capture_begin): until end_capture() the
        copies, memsets, kernel launches, event records and callbacks queued on it are
        recorded, not run. Only a stream made by stream() can capture (the default stream
        carries the library's synchronous calls); what cannot be captured (synchronize(),
        query(), NumPy arrays, which are pageable host memory) raises MisuseError and the
        capture goes on."""
        check(lib.dv_graph_capture_begin(self.handle), "stream.begin_capture")
        self._capturing = Graph(self._ctx)

    def end_capture(self):
        """End the capture begun by begin_capture(): the Graph of what was captured (the
        capture ends even when this raises)."""
        graph, self._capturing = self._capturing, None
        out = ctypes.c_void_p()
        st = lib.dv_graph_capture_end(self.handle, ctypes.byref(out))
        if graph is None:
            graph = Graph(self._ctx)
        if st:
            graph._drop_calls()
            check(st, "stream.end_capture")
        graph.handle = out.value
        return graph

    @contextlib.contextmanager
    def capture(self):
        """A context manager around begin_capture() and end_capture(): ``with s.capture()
        as g: ...`` then ``g.launch(s)``. The Graph it gives is ready when the block exits; if
        the block raises, the capture is ended and dropped."""
        self.begin_capture()
        graph = self._capturing
        try:
            yield graph
        except BaseException:
            try:
                self.end_capture()._release()
            except Exception:
                pass
            raise
        self.end_capture()  # fills `graph`, the object the block was given

    def add_callback(self, callback, arg):
        """Call ``callback(stream, status, arg)`` once all work queued on the stream before
        it is complete (Numba's Stream.add_callback); work queued after it waits until it
        returns. `stream` is this Stream, `status` 0, or the number of an error that earlier
        work hit where the backend can tell (host, OpenCL; see dv_stream_add_callback).

        The callback runs on a library thread, holding the GIL. Like a CUDA host function it
        must be short (a backend may run every stream's callbacks on one thread, and the
        stream's later work waits for it). A devarray call in it that reaches the driver
        (a copy, an allocation, a synchronize, a query, ...) raises MisuseError on every
        backend, as CUDA forbids driver calls in host functions (dv_stream_add_callback);
        metadata (shape, dtype, views) works. Releasing the last reference to an array there
        could wait on the very stream that runs it: see below. The binding keeps `callback`, `arg`, the stream and what the
        callback returned alive until it has run, and lets them go later on a Python thread
        (the next synchronize(), add_callback() or async_done() future), never on the
        callback's thread. The host arrays the stream held for work queued before the
        callback go with them (that work is complete once the callback ran).

        An exception the callback raises cannot reach the caller: it is reported through
        ``sys.unraisablehook`` (printed with its traceback by default; the exception gets a
        note naming the callback) while the callback's thread still runs it, and the stream
        goes on; synchronize() does not raise it again (Numba warns and goes on).
        """
        if not callable(callback):
            raise TypeError("callback must be callable, not %r" % (callback,))
        key = next(_keys)
        graph = self._capturing
        if graph is not None:  # a host node of the graph: runs at each launch
            _graph_calls[key] = _Call(self, callback, arg, [])
            try:
                check(_add_callback(self.handle, _TRAMPOLINE, key), "add_callback")
            except BaseException:
                del _graph_calls[key]
                raise
            graph._calls.append(key)
            return
        # what the stream holds for work queued so far is complete when the callback runs:
        # the record takes it over (taken before the callback is queued, so that it never
        # gets a hold of later work)
        held, self._keep = self._keep, []
        _pending[key] = _Call(self, callback, arg, held)
        try:
            check(_add_callback(self.handle, _TRAMPOLINE, key), "add_callback")
        except BaseException:
            del _pending[key]
            self._keep[:0] = held
            raise
        _reap()

    def async_done(self):
        """An asyncio future of the running event loop (``loop.create_future()``) that
        resolves with this stream once the work queued on it so far is complete (Numba's
        Stream.async_done). The library's callback thread hands the result to the loop with
        ``loop.call_soon_threadsafe``; a future cancelled meanwhile stays cancelled. If that
        work failed the future gets the error (a DevarrayError subclass) instead.
        RuntimeError when no event loop runs in this thread."""
        import asyncio  # here: only async_done needs it (slow to import, rarely used)
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        self.add_callback(_done_callback, (loop, fut))
        return fut

    def __del__(self):
        if self._owned and self.handle and lib is not None:
            try:
                if not _release_later(lib.dv_stream_release, self.handle):
                    lib.dv_stream_release(self.handle)
            except Exception:
                pass
            self.handle = None


# ---- stream callbacks ----------------------------------------------------------------------
#
# One C callback (_TRAMPOLINE) serves every add_callback: it lives as long as the module, so no
# ctypes thunk is freed while the library may still be returning through it. Its user pointer
# is a key into _pending, where (stream, callback, arg) wait until the callback has run. The
# trampoline then moves the record to _finished, and only a Python thread (_reap) drops it:
# dropping the last reference to an array or a stream on the callback's thread could release
# device memory there, which dv_stream_add_callback forbids.

class _Call:
    __slots__ = ("stream", "fn", "arg", "held", "result", "error")

    def __init__(self, stream, fn, arg, held):
        self.stream, self.fn, self.arg, self.held = stream, fn, arg, held
        self.result = self.error = None


_keys = itertools.count(1)
_pending = {}     # key -> _Call, until its callback has run
_graph_calls = {}  # key -> _Call of a graph's host node: runs at each launch, kept with the graph
_finished = []    # _Call records whose callback ran; emptied by _reap on a Python thread
_in_callback = threading.local()  # .active on a thread while it runs a callback


_deferred = []    # (release function, C handle): freed by _reap, never on a callback thread


def _release_later(release, h):
    """Whether C handle h was queued for `release` by _reap, because this thread runs a
    stream callback (the cyclic GC may run a __del__ or finalizer there, and the library
    forbids frees inside a callback: dv_stream_add_callback)."""
    if getattr(_in_callback, "active", False):
        _deferred.append((release, h))
        return True
    return False


def _run(user, status):
    # the flag covers all of this function: a GC pass may start at any allocation here. The
    # compiled array base (_speedups) has its own flag, in C: set first, cleared last
    _set_in_callback(True)
    _in_callback.active = True  # a callback that calls add_callback (another stream) reaps not
    try:
        call = _graph_calls.get(user)
        if call is not None:  # a graph's: it stays for the next launch
            try:
                call.fn(call.stream, status, call.arg)
            except BaseException as e:  # noqa: B036 -- reported, never propagated into C
                if hasattr(e, "add_note"):
                    e.add_note("devarray: raised by the stream callback %r" % (call.fn,))
                _REPORT(_Reporter(e, call.fn))()
            return
        call = _pending[user]
        try:
            call.result = call.fn(call.stream, status, call.arg)
        except BaseException as e:  # noqa: B036 -- reported, never propagated into C
            call.error = e
            if hasattr(e, "add_note"):
                e.add_note("devarray: raised by the stream callback %r" % (call.fn,))
            # ctypes' own report of an exception in a callback (sys.unraisablehook), made
            # here, on this thread, before the record leaves _pending
            _REPORT(_Reporter(e, call.fn))()
        del call
        # one expression: no local of this thread refers to the record once it is in the list
        _finished.append(_pending.pop(user))
    finally:
        _in_callback.active = False
        _set_in_callback(False)


def _no_flag(flag):
    return False


_set_in_callback = speedups.set_in_callback if speedups is not None else _no_flag


class _Reporter:
    """What ctypes reports the exception of: its repr names the stream callback."""

    __slots__ = ("error", "fn")

    def __init__(self, error, fn):
        self.error, self.fn = error, fn

    def __call__(self):
        raise self.error

    def __repr__(self):
        return "<the devarray stream callback %r>" % (self.fn,)


_CALLBACK = _abi.CALLBACK_FN
_TRAMPOLINE = _CALLBACK(lambda handle, status, user: _run(user, status))
_REPORT = ctypes.CFUNCTYPE(None)
_add_callback = lib.dv_stream_add_callback


def _reap():
    """Drop the records of callbacks that ran (on a Python thread, never a callback's)."""
    if getattr(_in_callback, "active", False):
        return
    while _finished:
        try:
            _finished.pop()
        except IndexError:
            break
    while _deferred:
        try:
            release, h = _deferred.pop()
        except IndexError:
            break
        release(h)


def _done_callback(stream, status, arg):
    loop, fut = arg
    try:
        loop.call_soon_threadsafe(_resolve, fut, stream, status)
    except RuntimeError:
        pass  # the loop was closed: nobody can await the future any more


def _resolve(fut, stream, status):
    _reap()
    if fut.done():  # cancelled while the stream worked
        return
    if status == 0:
        fut.set_result(stream)
    else:
        fut.set_exception(error_class(status)(status, "work queued on the stream before "
                                              "async_done() failed", "async_done"))


def _settle(ctx):
    """Before ctx closes: let the callbacks queued on its streams run, then drop the records
    of every callback that ran (they hold their streams)."""
    for call in list(_pending.values()):
        if call.stream._ctx is ctx and call.stream.handle:
            lib.dv_stream_synchronize(call.stream.handle)
    _reap()


@atexit.register
def _finish_pending():
    """At exit, let queued callbacks run while the interpreter can still run them."""
    for call in list(_pending.values()):
        if call.stream.handle and lib is not None:
            lib.dv_stream_synchronize(call.stream.handle)
    _reap()


def _stream_handle(stream):
    """None for 0/None (synchronous on the default stream), else the C handle."""
    if not stream:
        return None
    if isinstance(stream, Stream):
        return stream.handle
    raise TypeError("stream must be 0 or a devarray Stream, not %r" % (stream,))


class Graph:
    """A stream's captured work (Stream.capture(), end_capture()): launch() queues all of it
    on a stream, as often as asked, with the arrays and values it was captured with (their
    contents at the time of each launch). The graph keeps the memory, modules, events and
    callbacks its work uses alive; dropping the last reference to it waits for its launches
    first. CuPy's cupy.cuda.Graph; devarray's dv_graph and dv_graph_exec."""

    def __init__(self, ctx):
        self.handle = None
        self._exec = None
        self._ctx = ctx
        self._keep = []   # Python objects the captured work uses
        self._calls = []  # keys of its callbacks in _graph_calls

    def __repr__(self):
        return "<devarray.Graph %s on %s>" % ("%d work items" % len(self) if self.handle else "(capturing)",
                                              self._ctx.backend)

    def __len__(self):
        """Work items captured (copies, memsets, launches, event records, callbacks)."""
        if not self.handle:
            return 0
        n = ctypes.c_size_t()
        check(lib.dv_graph_work_count(self.handle, ctypes.byref(n)), "graph.__len__")
        return n.value

    def instantiate(self):
        """Make the graph ready to launch (launch() does it the first time)."""
        if not self.handle:
            raise MisuseError(_abi.DV_ERR_MISUSE, "the graph is still being captured", "graph.instantiate")
        if self._exec is None:
            e = ctypes.c_void_p()
            check(lib.dv_graph_instantiate(self.handle, ctypes.byref(e)), "graph.instantiate")
            self._exec = e.value
        return self

    def launch(self, stream=0):
        """Queue the graph's work on `stream` (0 or None: the default stream, and wait for it,
        as every call with no stream does)."""
        self.instantiate()
        h = stream.handle if isinstance(stream, Stream) else None
        if stream not in (0, None) and not isinstance(stream, Stream):
            raise TypeError("stream must be a devarray Stream, 0 or None, not %r" % (stream,))
        check(lib.dv_graph_launch(self._exec, h), "graph.launch")
        if h is None:
            _reap()

    def _drop_calls(self):
        for key in self._calls:
            _graph_calls.pop(key, None)
        self._calls = []

    def _release(self):
        if lib is None:
            return
        if self._exec is not None:
            lib.dv_graph_exec_destroy(self._exec)
            self._exec = None
        if self.handle:
            lib.dv_graph_release(self.handle)
            self.handle = None
        self._drop_calls()
        self._keep = []

    def __del__(self):
        try:
            if getattr(_in_callback, "active", False):
                return  # never released on a callback's thread (it would wait for the device)
            self._release()
        except Exception:
            pass
