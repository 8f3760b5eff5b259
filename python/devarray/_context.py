"""The process's current context, backend selection, deferred cleanup."""

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
