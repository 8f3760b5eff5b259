"""The process's current context, backend selection, deferred cleanup."""

import atexit as _atexit
import contextlib
import ctypes
import gc as _gc
import json

from . import _current, _emm, _config, _stream
from . import _lib
from ._lib import lib, check
from ._stream import Stream, _settle, _stream_handle, _release_later
from ._abi import dv_device_info as _dv_device_info, dv_stats as _dv_stats, DV_ERR_BUSY as _DV_ERR_BUSY

# which context is current, and every open one: _current (the registry)
_backend = None      # backend asked for by select_backend (None: DV_BACKEND / auto)
_device = None       # device index asked for by select_device




class Device:
    """The context's device (Numba's Device): ``id``, ``name``, ``compute_capability`` (a
    (major, minor) tuple: CUDA's; (0, 0) on the host simulator and OpenCL, which have none),
    ``PCI_BUS_ID`` and ``reset()`` (closes the context if it is current), plus ``backend``,
    ``vendor``, ``total_memory``, ``CAN_MAP_HOST_MEMORY``, ``MANAGED_MEMORY``. No ``uuid``:
    the library does not report one."""

    def __init__(self, ctx, device_id):
        info = _dv_device_info()
        check(lib.dv_context_device_info(ctx.handle, ctypes.byref(info)), "device")
        self.id = device_id
        self.name = info.name.decode(errors="replace")
        self.backend = info.backend.decode()
        self.vendor = info.vendor.decode(errors="replace")
        self.compute_capability = (info.compute_major, info.compute_minor)
        self.total_memory = info.total_memory
        self.CAN_MAP_HOST_MEMORY = bool(info.can_map_host_memory)
        self.MANAGED_MEMORY = bool(info.managed_memory)
        self.pci_bus_id = info.pci_bus_id.decode()

    @property
    def PCI_BUS_ID(self):
        """The PCI bus id string the backend reports ("" where it has none)."""
        return self.pci_bus_id

    def reset(self):
        """Numba's Device.reset(): close the current context if it is this device's
        (close(): a context whose arrays still live is retired, not destroyed)."""
        c = _current.ctx
        if c is not None and c.device is self:
            close()

    def __repr__(self):
        return "<devarray Device %d %r (%s)>" % (self.id, self.name, self.backend)


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

    _size = pending_bytes  # Numba's name

    @property
    def memory_capacity(self):
        """Total device memory, which the ratio limit is a fraction of."""
        return self._ctx._total_memory

    @property
    def _max_pending_bytes(self):
        """The byte limit now: int(memory_capacity x the ratio limit), as Numba's."""
        b = ctypes.c_size_t()
        check(lib.dv_context_dealloc_limits(self._ctx.handle, None, None, ctypes.byref(b)))
        return b.value

    @property
    def limits(self):
        """(count limit, ratio limit) of this context now."""
        n, r = ctypes.c_size_t(), ctypes.c_double()
        check(lib.dv_context_dealloc_limits(self._ctx.handle, ctypes.byref(n), ctypes.byref(r),
                                            None))
        return n.value, r.value

    @contextlib.contextmanager
    def disable(self):
        """Numba's ``deallocations.disable()``: no flush inside (defer_cleanup)."""
        with self._ctx.defer_cleanup():
            yield


class Context:
    """A devarray context (Numba's ``current_context()``): one device of one backend.

    ``memory_manager`` is an object, never a string: the EMM plugin instance when one was set
    (set_memory_manager, NUMBA_CUDA_MEMORY_MANAGER), else a NumbaCUDAMemoryManager over the
    library's own manager (its ``name``: "direct", "pool" or "async")."""

    def __init__(self, backend=None, device=None):
        plugin_cls = _emm._ensure_memory_manager()
        bridge = _emm.PluginBridge(getattr(plugin_cls, "__name__", "plugin")) if plugin_cls else None
        cfg = ctypes.c_void_p()
        check(lib.dv_config_create(ctypes.byref(cfg)), "dv_config_create")
        try:
            if backend:
                check(lib.dv_config_set(cfg, b"backend", backend.encode()), "select_backend")
            if device is not None:
                # `device` names the device of whichever backend opens (the host
                # simulator refuses all but its one device, 0); the OpenCL, CUDA and
                # HIP options, which win over it, are set too, over the environment's
                check(lib.dv_config_set(cfg, b"device", str(int(device)).encode()),
                      "select_device")
                be = backend or ""
                for opt in ("opencl_device", "cuda_device", "hip_device"):
                    if be in ("", "auto", opt.split("_")[0]):
                        check(lib.dv_config_set(cfg, opt.encode(), str(int(device)).encode()),
                              "select_device")
            if bridge is not None:
                check(lib.dv_config_set_memory_manager(cfg, ctypes.byref(bridge.table)),
                      "set_memory_manager")
            h = ctypes.c_void_p()
            check(lib.dv_context_create(cfg, ctypes.byref(h)), "dv_context_create")
        finally:
            lib.dv_config_destroy(cfg)
        self.handle = h.value
        if _lib.tracking:
            # the binding's own context (Numba's primary context) outlives the program by
            # design: not a leak of the program's (devarray check --leak-check)
            lib.dv_tracking_forget(self.handle)
        self._bridge = bridge
        try:
            self.backend = lib.dv_context_backend(self.handle).decode()
            self.device_id = int(device or 0)
            self.deallocations = _Deallocations(self)
            self._default_stream = None
            t = ctypes.c_size_t()
            check(lib.dv_backend_memory_info(self.handle, None, ctypes.byref(t)), "context")
            self._total_memory = t.value
            self.device = Device(self, self.device_id)
            if plugin_cls is None:
                self.memory_manager = _emm.NumbaCUDAMemoryManager(context=self)
            else:
                self.memory_manager = plugin_cls(context=self)
                bridge.plugin = self.memory_manager
            _config.apply_to(self)
            if plugin_cls is not None:
                self._apply_dealloc_limits(*_config.limits())
        except BaseException:
            lib.dv_context_destroy(self.handle)
            self.handle = None
            raise
        _current.live.add(self)

    def _destroy_after_failed_init(self):
        """Destroy this context after its memory manager's initialize() failed; a context
        still holding memory (DV_ERR_BUSY) is kept open and usable rather than lost."""
        _gc.collect()
        self._clear_plugin_queue()
        if lib.dv_context_destroy(self.handle) == 0:
            self.handle = None
            _current.live.discard(self)

    def _clear_plugin_queue(self):
        """Run a plug-in's own pending frees (Numba's close resets the memory manager)."""
        mm = self.memory_manager if self._bridge is not None else None
        clear = getattr(getattr(mm, "deallocations", None), "clear", None)
        if clear is not None:
            clear()

    @property
    def has_plugin(self):
        """Whether an EMM plugin serves this context's device memory."""
        return self._bridge is not None

    def _apply_dealloc_limits(self, count, ratio):
        """Set the library queue's limits (an EMM context: count 0, so that a device free
        reaches the plugin as soon as the memory's last reference goes, as in Numba)."""
        if self.handle is None:
            return
        if self._bridge is not None:
            count = 0
        check(lib.dv_context_set_dealloc_limits(self.handle, int(count), float(ratio)),
              "dealloc limits")

    def __repr__(self):
        return "<devarray.Context backend=%s>" % self.backend

    def get_memory_info(self):
        """MemoryInfo(free, total) device memory in bytes: the memory manager's
        get_memory_info() (a plugin's own; NotImplementedError when it has none)."""
        return self.memory_manager.get_memory_info()

    def synchronize(self):
        """Wait for all work of every stream of the context."""
        check(lib.dv_context_synchronize(self.handle), "synchronize")

    @contextlib.contextmanager
    def defer_cleanup(self):
        """No deferred deallocation is flushed inside (the library's queue; a plugin's
        own defer_cleanup() too, as Numba enters both)."""
        with contextlib.ExitStack() as stack:
            if self._bridge is not None:
                stack.enter_context(self.memory_manager.defer_cleanup())
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
        st = _dv_stats()
        st.size = ctypes.sizeof(st)
        check(lib.dv_context_stats(self.handle, ctypes.byref(st)))
        return st

    def option(self, name):
        """The resolved value of option `name` for this context, as text."""
        buf = ctypes.create_string_buffer(4096)
        check(lib.dv_context_option(self.handle, name.encode(), buf, len(buf), None), "option")
        return buf.value.decode()

    def reset(self):
        """Numba's Context.reset(): the memory manager's reset(), then flush the queue
        (Numba's reset also drops every allocation; here arrays stay valid: see
        docs/semantics.md)."""
        self.synchronize()
        self.memory_manager.reset()
        self.deallocations.clear()

    # -- Numba's Context methods

    def create_stream(self):
        """A new stream of this context (Numba's Context.create_stream())."""
        h = ctypes.c_void_p()
        check(lib.dv_stream_create(self.handle, 0, ctypes.byref(h)), "create_stream")
        return Stream(h.value, True, self)

    def create_event(self, timing=True):
        """A new event of this context (Numba's Context.create_event(timing=True))."""
        _require_current(self)
        return Event(timing)

    def memalloc(self, bytesize):
        """Device memory (a MemoryPointer) from the memory manager."""
        return self.memory_manager.memalloc(bytesize)

    def memallocmanaged(self, bytesize, attach_global=True):
        """Managed memory (a ManagedMemory) from the memory manager."""
        return self.memory_manager.memallocmanaged(bytesize, attach_global)

    def memhostalloc(self, bytesize, mapped=False, portable=False, wc=False):
        """Pinned host memory (PinnedMemory; MappedMemory when mapped)."""
        return self.memory_manager.memhostalloc(bytesize, mapped, portable, wc)

    def mempin(self, owner, pointer, size, mapped=False):
        """Pin `size` bytes of host memory at `pointer` owned by `owner` (Numba's mempin)."""
        if mapped and not self.device.CAN_MAP_HOST_MEMORY:
            raise NotImplementedError("%r cannot map host memory" % (self.device,))
        return self.memory_manager.mempin(owner, pointer, size, mapped)

    def get_ipc_handle(self, memory):
        """An IPC handle for device memory `memory` (the memory manager's)."""
        return self.memory_manager.get_ipc_handle(memory)

    def prepare_for_use(self):
        """Numba's: nothing left to do (the memory manager was initialized at creation)."""


def _require_current(ctx):
    if _current.ctx is not ctx:
        raise NotImplementedError("events are made on the current context only")


def current_context():
    """The current context, created on first use (backend from select_backend, else DV_BACKEND)."""
    c = _current.ctx
    if c is not None:
        return c
    with _current.lock:
        if _current.ctx is None:
            # As Numba: the context is current before its memory manager's initialize(),
            # so a plug-in that uses the public API there gets this context.
            c = Context(_backend, _device)
            _current.ctx = c
            try:
                c.memory_manager.initialize()
            except BaseException:
                _current.ctx = None
                c._destroy_after_failed_init()
                raise
        return _current.ctx


def _handle():
    c = _current.ctx
    return (c if c is not None else current_context()).handle


def select_backend(name):
    """Choose the backend ("host", "opencl", "cuda", "hip", "auto") for the contexts made from
    now on.

    If a context is open it is closed first (close(): retired while arrays, streams or
    modules of it are alive, which keep working on it). Returns the new context.
    """
    global _backend
    with _current.lock:
        close()
        old, _backend = _backend, name
        try:
            return current_context()
        except BaseException:
            _backend = old  # the next context is made as before
            raise


def select_device(device_id):
    """Numba's select_device: open device `device_id` of the backend (OpenCL, CUDA, HIP; the host
    simulator has one device, 0). A device the backend does not have raises DevarrayError
    and the earlier choice stands."""
    global _device
    with _current.lock:
        c = _current.ctx
        if c is not None and c.device_id == int(device_id):
            return c
        close()
        old, _device = _device, int(device_id)
        try:
            return current_context()
        except BaseException:
            _device = old
            raise


_retired = []  # contexts close() left while their arrays, streams, ... live


def close():
    """Numba's close(): the current context is current no more (waits for its work, runs
    its pending frees); the next call that needs a context makes a new one.

    Numba frees the memory of the arrays still alive, which then dangle. devarray frees no
    memory that Python objects still hold: while any array, stream, event or module of the
    context is alive, the context is retired instead of destroyed (those objects keep
    working on it) and destroyed once they are gone, at a later close(), at the next
    garbage collection, or at exit.
    """
    with _current.lock:
        c = _current.ctx
        if c is None:
            _reap_retired()
            return
        _settle(c)
        _gc.collect()
        c._clear_plugin_queue()
        st = lib.dv_context_destroy(c.handle)
        if st == _DV_ERR_BUSY:
            # nothing was destroyed: wait for its work (as a destroy would) and keep it
            lib.dv_context_synchronize(c.handle)
            check(lib.dv_context_flush_deallocs(c.handle), "close")
            _retired.append(c)
        else:
            check(st, "close")
            c.handle = None
            _current.live.discard(c)
        _current.ctx = None
        _reap_retired()


def _reap_retired():
    """Destroy the retired contexts that nothing uses any more (the caller holds _lock)."""
    for c in list(_retired):
        if lib is not None and c.handle and lib.dv_context_destroy(c.handle) == 0:
            c.handle = None
            _current.live.discard(c)
            _retired.remove(c)


def _gc_reap(phase, info):
    # after a collection freed the last arrays of a retired context; never on a stream
    # callback's thread (no destroy there) nor while another thread holds the lock
    if phase != "stop" or not _retired:
        return
    stream_mod = _stream  # None at interpreter teardown
    if stream_mod is None or getattr(stream_mod._in_callback, "active", False):
        return
    if _current.lock.acquire(blocking=False):
        try:
            _reap_retired()
        except Exception:  # a collection is no place to raise; close() or exit retries
            pass
        finally:
            _current.lock.release()


def _reap_at_exit():
    with _current.lock:
        _reap_retired()


_gc.callbacks.append(_gc_reap)
_atexit.register(_reap_at_exit)


def get_current_device():
    """The current context's Device (Numba's get_current_device): ``id``, ``name``,
    ``compute_capability``, ``reset()``, ..."""
    return current_context().device


def synchronize():
    """Wait for every stream of the current context."""
    current_context().synchronize()


@contextlib.contextmanager
def defer_cleanup():
    """Numba's defer_cleanup(): no deferred deallocation is flushed inside."""
    with current_context().defer_cleanup():
        yield


# ---- streams and events of the current context (Numba's cuda.stream(), cuda.event(), ...)

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
            if not _release_later(lib.dv_event_release, self.handle):
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
