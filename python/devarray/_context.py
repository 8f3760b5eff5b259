"""The process's current context, backend selection, streams, events, deferred cleanup."""

import contextlib
import ctypes
import json
import threading
from collections import namedtuple

from . import _lib
from ._lib import lib, check

_lock = threading.RLock()
_ctx = None          # the current Context
_backend = None      # backend asked for by select_backend (None: DV_BACKEND / auto)
_device = None       # device index asked for by select_device


MemoryInfo = namedtuple("MemoryInfo", ["free", "total"])


class _Deallocations:
    """Numba's ``context.deallocations``: the pending-deallocation queue."""

    def __init__(self, ctx):
        self._ctx = ctx

    def clear(self):
        """Flush the queue now (a no-op inside defer_cleanup, as in Numba)."""
        check(lib.dv_context_flush_deallocs(self._ctx.handle), "deallocations.clear")

    def __len__(self):
        n = ctypes.c_size_t()
        check(lib.dv_context_pending_deallocs(self._ctx.handle, ctypes.byref(n), None))
        return n.value

    @property
    def pending_bytes(self):
        """Bytes the queued frees will release."""
        b = ctypes.c_size_t()
        check(lib.dv_context_pending_deallocs(self._ctx.handle, None, ctypes.byref(b)))
        return b.value

    @contextlib.contextmanager
    def disable(self):
        """Numba's ``deallocations.disable()``: no flush inside (defer_cleanup)."""
        with self._ctx.defer_cleanup():
            yield


class Context:
    """A devarray context (Numba's ``current_context()``): one device of one backend."""

    def __init__(self, backend=None, device=None):
        cfg = ctypes.c_void_p()
        check(lib.dv_config_create(ctypes.byref(cfg)), "dv_config_create")
        try:
            if backend:
                check(lib.dv_config_set(cfg, b"backend", backend.encode()), "select_backend")
            if device is not None:
                # `device` names the device of whichever backend opens (the host
                # simulator refuses all but its one device, 0); the OpenCL and CUDA
                # options, which win over it, are set too, over the environment's
                check(lib.dv_config_set(cfg, b"device", str(int(device)).encode()),
                      "select_device")
                be = backend or ""
                for opt in ("opencl_device", "cuda_device"):
                    if be in ("", "auto", opt.split("_")[0]):
                        check(lib.dv_config_set(cfg, opt.encode(), str(int(device)).encode()),
                              "select_device")
            h = ctypes.c_void_p()
            check(lib.dv_context_create(cfg, ctypes.byref(h)), "dv_context_create")
        finally:
            lib.dv_config_destroy(cfg)
        self.handle = h.value
        self.backend = lib.dv_context_backend(self.handle).decode()
        self.device_id = int(device or 0)
        self.deallocations = _Deallocations(self)
        self._default_stream = None

    def __repr__(self):
        return "<devarray.Context backend=%s>" % self.backend

    def get_memory_info(self):
        """(free, total) device memory in bytes."""
        f, t = ctypes.c_size_t(), ctypes.c_size_t()
        check(lib.dv_context_memory_info(self.handle, ctypes.byref(f), ctypes.byref(t)))
        return MemoryInfo(f.value, t.value)

    def synchronize(self):
        """Wait for all work of every stream of the context."""
        check(lib.dv_context_synchronize(self.handle), "synchronize")

    @contextlib.contextmanager
    def defer_cleanup(self):
        check(lib.dv_defer_cleanup_begin(self.handle), "defer_cleanup")
        try:
            yield
        finally:
            check(lib.dv_defer_cleanup_end(self.handle), "defer_cleanup")

    def stats(self):
        """The context's counters (dv_context_stats_json) as a dict."""
        need = ctypes.c_size_t()
        check(lib.dv_context_stats_json(self.handle, None, 0, ctypes.byref(need)))
        buf = ctypes.create_string_buffer(need.value + 1)
        check(lib.dv_context_stats_json(self.handle, buf, len(buf), ctypes.byref(need)))
        return json.loads(buf.value.decode())

    def raw_stats(self):
        """dv_context_stats as a ctypes struct (fields as in devarray.h)."""
        st = _lib.dv_stats()
        st.size = ctypes.sizeof(st)
        check(lib.dv_context_stats(self.handle, ctypes.byref(st)))
        return st

    @property
    def memory_manager(self):
        return lib.dv_context_memory_manager(self.handle).decode()

    def option(self, name):
        """The resolved value of option `name` for this context, as text."""
        buf = ctypes.create_string_buffer(4096)
        check(lib.dv_context_option(self.handle, name.encode(), buf, len(buf), None), "option")
        return buf.value.decode()

    def reset(self):
        """Flush deferred deallocations (Numba's reset also drops every allocation; see
        docs/semantics.md: arrays stay valid here)."""
        self.synchronize()
        self.deallocations.clear()


def current_context():
    """The current context, created on first use (backend from select_backend, else DV_BACKEND)."""
    global _ctx
    c = _ctx
    if c is not None:
        return c
    with _lock:
        if _ctx is None:
            _ctx = Context(_backend, _device)
        return _ctx


def _handle():
    c = _ctx
    return (c if c is not None else current_context()).handle


def select_backend(name):
    """Choose the backend ("host", "opencl", "cuda", "auto") for the contexts made from now on.

    If a context is open it is closed first (close()), which fails with MisuseError
    (DV_ERR_BUSY) while arrays, streams or modules of it are alive. Returns the new context.
    """
    global _backend
    with _lock:
        close()
        old, _backend = _backend, name
        try:
            return current_context()
        except BaseException:
            _backend = old  # the next context is made as before
            raise


def select_device(device_id):
    """Numba's select_device: open device `device_id` of the backend (OpenCL, CUDA; the host
    simulator has one device, 0). A device the backend does not have raises DevarrayError
    and the earlier choice stands."""
    global _device
    with _lock:
        if _ctx is not None and _ctx.device_id == int(device_id):
            return _ctx
        close()
        old, _device = _device, int(device_id)
        try:
            return current_context()
        except BaseException:
            _device = old
            raise


def close():
    """Numba's close(): destroy the current context (waits for its work, runs pending frees).

    devarray does not free memory that Python objects still hold: while any array, stream,
    event or module of the context is alive this raises MisuseError (DV_ERR_BUSY) and the
    context stays current.
    """
    global _ctx
    with _lock:
        c = _ctx
        if c is None:
            return
        import gc
        gc.collect()
        check(lib.dv_context_destroy(c.handle), "close")
        c.handle = None
        _ctx = None


def get_current_device():
    return current_context()


def synchronize():
    """Wait for every stream of the current context."""
    current_context().synchronize()


@contextlib.contextmanager
def defer_cleanup():
    """Numba's defer_cleanup(): no deferred deallocation is flushed inside."""
    with current_context().defer_cleanup():
        yield


# ---- streams and events ---------------------------------------------------

class Stream:
    """A devarray stream (Numba's cuda.stream()).

    Host arrays used by asynchronous work on the stream (copy_to_host into a NumPy array,
    to_device of one, kernel launches with NumPy arguments) are kept alive by the stream
    until its next synchronize().
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

    def __del__(self):
        if self._owned and self.handle and lib is not None:
            try:
                lib.dv_stream_release(self.handle)
            except Exception:
                pass
            self.handle = None


def stream():
    """A new stream on the current context (Numba's cuda.stream())."""
    ctx = current_context()
    h = ctypes.c_void_p()
    check(lib.dv_stream_create(ctx.handle, 0, ctypes.byref(h)), "stream")
    return Stream(h.value, True, ctx)


def _borrowed(fn):
    ctx = current_context()
    return Stream(fn(ctx.handle), False, ctx)


def default_stream():
    """The context's default stream (work on it is asynchronous, as on any stream)."""
    return _borrowed(lib.dv_context_default_stream)


def legacy_default_stream():
    return _borrowed(lib.dv_context_legacy_stream)


def per_thread_default_stream():
    return _borrowed(lib.dv_context_per_thread_stream)


def _stream_handle(stream):
    """None for 0/None (synchronous on the default stream), else the C handle."""
    if not stream:
        return None
    if isinstance(stream, Stream):
        return stream.handle
    raise TypeError("stream must be 0 or a devarray Stream, not %r" % (stream,))


class Event:
    """An event (Numba's cuda.event())."""

    def __init__(self, timing=True):
        ctx = current_context()
        h = ctypes.c_void_p()
        check(lib.dv_event_create(ctx.handle, 1 if timing else 0, ctypes.byref(h)), "event")
        self.handle = h.value
        self._ctx = ctx

    def record(self, stream=0):
        """Record the event on `stream` (0: the default stream)."""
        check(lib.dv_event_record(self.handle, _stream_handle(stream)), "event.record")

    def wait(self, stream=0):
        """Make `stream` wait for the event's last record (never blocks the host)."""
        s = _stream_handle(stream) or lib.dv_context_default_stream(self._ctx.handle)
        check(lib.dv_stream_wait_event(s, self.handle), "event.wait")

    def query(self):
        """True when the last record completed (or the event was never recorded)."""
        return lib.dv_event_query(self.handle) == 0

    def synchronize(self):
        check(lib.dv_event_synchronize(self.handle), "event.synchronize")

    def elapsed_time(self, evtend):
        """Milliseconds between this event and `evtend` (both timing events, completed)."""
        return event_elapsed_time(self, evtend)

    def __del__(self):
        if getattr(self, "handle", None) and lib is not None:
            lib.dv_event_release(self.handle)
            self.handle = None


def event(timing=True):
    """A new event (Numba's cuda.event(timing=True))."""
    return Event(timing)


def event_elapsed_time(evtstart, evtend):
    ms = ctypes.c_float()
    check(lib.dv_event_elapsed_ms(evtstart.handle, evtend.handle, ctypes.byref(ms)),
          "event_elapsed_time")
    return ms.value
