"""External memory managers (Numba's EMM plugin interface) and the built-in manager object.

``set_memory_manager(cls)`` (or ``NUMBA_CUDA_MEMORY_MANAGER=module``, whose
``_numba_memory_manager`` is the class, read when a context is made and no class was set)
makes the contexts created afterwards allocate their device memory through an instance of
``cls``: devarray hands the library a ``dv_memory_manager`` table whose alloc, free and
mem_info entries are ctypes callbacks into the plugin:

- alloc -> ``plugin.memalloc(size)``; the returned MemoryPointer's ``device_pointer`` becomes
  the block's buffer (offset 0) and the object is kept, under a key that is the block's
  handle, until the library frees the block;
- free -> that reference is dropped (the pointer's finalizer runs, as in Numba);
- mem_info -> ``plugin.get_memory_info()``.

An exception raised inside a callback becomes a status (MemoryError: DV_ERR_OUT_OF_MEMORY,
NotImplementedError: DV_ERR_NOT_SUPPORTED, any other: DV_ERR_DRIVER) and is kept for the
calling thread: the binding call that gets that status raises the plugin's exception itself
(_lib.check). A free has no caller to raise in (it runs when an array goes): its exception goes
to ``sys.unraisablehook``, as an exception in a finalizer does. Kept exceptions that no call
raises (an allocation the library retried or did without, such as a packing temporary) are
dropped when the next callback on that thread fails, MemoryError silently, others through
``sys.unraisablehook``.

Locks: the library calls the plugin with none of its context-wide locks held (allocation:
dv__device_alloc and the planner's packing temporaries; frees: the pending-deallocation queue
runs its entries after releasing the context lock; mem_info: dv_context_memory_info), so a
plugin may call back into devarray, including allocating or releasing arrays (a free may flush
the queue again; that is re-entrant). One exception: a smart array holds its own lock while
it makes its device copy, so a plugin must not use that same smart array from memalloc.
ctypes takes the GIL for each callback, on whatever thread the library calls from.
"""

import abc
import contextlib
import ctypes
import importlib
import itertools
import os
import sys
import threading
from collections import deque, namedtuple

from . import _abi, _lib, _memory
from ._config import limits
from ._memory import MemoryInfo, _decode
from ._lib import lib, check
from ._abi import (DV_OK, DV_ERR_INVALID_ARGUMENT, DV_ERR_OUT_OF_MEMORY,  # noqa: F401
                   DV_ERR_NOT_SUPPORTED, DV_ERR_DRIVER)


_SUPPORTED_EMM_INTERFACE_VERSION = 1
_memory_manager = None  # the plugin class in force (None: the library's own manager)


# ---- the plugin interface (Numba's) --------------------------------------------------------

class BaseCUDAMemoryManager(metaclass=abc.ABCMeta):
    """Abstract base class of External Memory Management (EMM) plugins (Numba's).

    A plugin is instantiated per context with ``context=`` the devarray Context."""

    def __init__(self, *args, **kwargs):
        if "context" not in kwargs:
            raise RuntimeError("Memory manager requires a context")
        self.context = kwargs.pop("context")

    @abc.abstractmethod
    def memalloc(self, size):
        """Allocate `size` bytes of device memory; return a MemoryPointer owning it."""

    @abc.abstractmethod
    def memhostalloc(self, size, mapped, portable, wc):
        """Allocate pinned host memory (MappedMemory when `mapped`, else PinnedMemory)."""

    @abc.abstractmethod
    def mempin(self, owner, pointer, size, mapped):
        """Pin `size` bytes of host memory at `pointer`, owned by `owner`."""

    @abc.abstractmethod
    def initialize(self):
        """Get ready for use; called once the context exists, before any allocation."""

    @abc.abstractmethod
    def get_ipc_handle(self, memory):
        """An IPC handle for the device memory `memory`."""

    @abc.abstractmethod
    def get_memory_info(self):
        """MemoryInfo(free, total) in bytes; may raise NotImplementedError."""

    @abc.abstractmethod
    def reset(self):
        """Release every allocation of the context."""

    @abc.abstractmethod
    def defer_cleanup(self):
        """A context manager inside which no deferred cleanup runs."""

    @property
    @abc.abstractmethod
    def interface_version(self):
        """The EMM interface version the plugin implements (1)."""


class _PendingDeallocs:
    """Numba's pending-deallocation queue, in Python (HostOnlyCUDAMemoryManager's own): the
    limits are devarray.config's CUDA_DEALLOCS_COUNT / _RATIO, read at each add_item."""

    def __init__(self, capacity=0):
        self._cons = deque()
        self._disable_count = 0
        self._size = 0
        self.memory_capacity = capacity

    @property
    def _max_pending_bytes(self):
        return int(self.memory_capacity * limits()[1])

    def add_item(self, dtor, handle, size=0):
        """Queue dtor(handle) (`size` bytes); flush when over a limit."""
        self._cons.append((dtor, handle, size))
        self._size += int(size)
        if len(self._cons) > limits()[0] or self._size > self._max_pending_bytes:
            self.clear()

    def clear(self):
        """Run every queued destructor, unless disabled (defer_cleanup)."""
        if not self.is_disabled:
            while self._cons:
                dtor, handle, _ = self._cons.popleft()
                dtor(handle)
            self._size = 0

    @contextlib.contextmanager
    def disable(self):
        """No flush inside (nests)."""
        self._disable_count += 1
        try:
            yield
        finally:
            self._disable_count -= 1

    @property
    def is_disabled(self):
        return self._disable_count > 0

    def __len__(self):
        return len(self._cons)


def _c_bytes(context, fn, size, *extra):
    """A C byte array (uint8, shape (size,)) made by fn (dv_device_array, dv_pinned_array...)."""
    size = int(size)
    if size < 0:
        raise ValueError("negative dimensions are not allowed")
    out = ctypes.c_void_p()
    check(fn(context.handle, 1, (ctypes.c_int64 * 1)(size), _memory._u8(), None, b"C", *extra,
             ctypes.byref(out)), fn.__name__)
    return out.value


def _deferred_release(h, nbytes, deallocations, before=None):
    """A finalizer: release the extra reference h (after before(h), if given) at once
    (deallocations None: the library queues the free itself) or through `deallocations`
    (a HostOnlyCUDAMemoryManager's Python queue, Numba's semantics)."""
    def dtor(h):
        try:
            if before is not None:
                before(h)
        finally:
            lib.dv_array_release(h)
    if deallocations is None:
        fin = lambda: dtor(h)  # noqa: E731
    else:
        fin = lambda: deallocations.add_item(dtor, h, nbytes)  # noqa: E731
    fin.undo = lambda: dtor(h)  # at once, when the object it was made for was not made
    return fin


def _adopt(make, h, fin, **kwargs):
    """make(h, finalizer=fin, **kwargs) (a _from_handle, which takes over h's reference and
    releases it when it fails); on failure fin's own reference (and registration, scope) is
    undone at once, since no object will ever run fin."""
    try:
        return make(h, finalizer=fin, **kwargs)
    except BaseException:
        if fin is not None:
            try:
                fin.undo()
            except Exception as e:  # the first error is the one raised
                _unraisable(e, "undoing a failed host allocation")
        raise


def _memhostalloc(context, size, mapped, portable, wc, deallocations):
    m = _memory
    if mapped:
        flags = (1 if portable else 0) | (2 if wc else 0)  # DV_MAPPED_PORTABLE, _WRITECOMBINED
        h = _c_bytes(context, lib.dv_mapped_array, size, flags)
        cls = m.MappedMemory
    else:
        h = _c_bytes(context, lib.dv_pinned_array, size)
        cls = m.PinnedMemory
    fin = None
    if deallocations is not None:  # the plugin's queue holds the last reference
        fin = _deferred_release(lib.dv_array_retain(h), size if mapped else 0, deallocations)
    mem = _adopt(cls._from_handle, h, fin, context=context)
    return mem.own() if mapped else mem


def _mempin(context, owner, pointer, size, mapped, deallocations):
    m = _memory
    ptr = m._ptr_value(pointer)
    size = int(size)
    host = ctypes.c_void_p()
    check(lib.dv_host_array_wrap(context.handle, ctypes.c_void_p(ptr), 1,
                                 (ctypes.c_int64 * 1)(size), m._u8(), None, ctypes.byref(host)),
          "mempin")
    host = host.value
    try:
        if mapped:
            view, scope = ctypes.c_void_p(), ctypes.c_void_p()
            check(lib.dv_mapped_scope_begin(context.handle, 1, (ctypes.c_void_p * 1)(host),
                                            ctypes.byref(view), ctypes.byref(scope)), "mempin")
            scope = scope.value
            keep = lib.dv_array_retain(host)

            def end(h, scope=scope, keep=keep):
                try:
                    check(lib.dv_scope_end(scope), "mempin")
                finally:
                    lib.dv_array_release(keep)
            lib.dv_array_release(host)  # `keep` holds it while the scope lasts
            host = None
            fin = _deferred_release(lib.dv_array_retain(view.value), size, deallocations, end)
            return _adopt(m.MappedMemory._from_handle, view.value, fin, size=size, owner=owner,
                          context=context).own()
        check(lib.dv_array_register(host), "mempin")
        h, host = host, None  # handed over: _from_handle releases it, fin.undo deregisters
        fin = _deferred_release(lib.dv_array_retain(h), 0, deallocations,
                                lambda h: check(lib.dv_array_deregister(h), "mempin"))
        return _adopt(m.PinnedMemory._from_handle, h, fin, size=size, owner=owner,
                      context=context)
    except BaseException:
        if host is not None:
            lib.dv_array_release(host)
        raise


def _memallocmanaged(context, size, attach_global, deallocations):
    h = _c_bytes(context, lib.dv_managed_array, size, 1 if attach_global else 0)
    fin = None
    if deallocations is not None:
        fin = _deferred_release(lib.dv_array_retain(h), size, deallocations)
    return _adopt(_memory.ManagedMemory._from_handle, h, fin, context=context).own()


class HostOnlyCUDAMemoryManager(BaseCUDAMemoryManager):
    """Base class of plugins that implement device allocation only: pinned, mapped and managed
    memory are devarray's own, their frees deferred through ``self.deallocations`` (Numba's
    semantics). Subclasses overriding reset() or defer_cleanup() call super()'s."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.allocations = {}
        self.deallocations = _PendingDeallocs()

    def memhostalloc(self, size, mapped=False, portable=False, wc=False):
        """Pinned host memory (MappedMemory when mapped), freed through self.deallocations."""
        return _memhostalloc(self.context, size, mapped, portable, wc, self.deallocations)

    def mempin(self, owner, pointer, size, mapped=False):
        """Pin existing host memory (MappedMemory when mapped), unpinned through
        self.deallocations."""
        return _mempin(self.context, owner, pointer, size, mapped, self.deallocations)

    def memallocmanaged(self, size, attach_global=True):
        """Managed memory, freed through self.deallocations."""
        return _memallocmanaged(self.context, size, attach_global, self.deallocations)

    def reset(self):
        """Drop the host allocations kept and flush self.deallocations."""
        self.allocations.clear()
        self.deallocations.clear()

    @contextlib.contextmanager
    def defer_cleanup(self):
        """No flush of self.deallocations inside."""
        with self.deallocations.disable():
            yield


class GetIpcHandleMixin:
    """get_ipc_handle() through the memory object's own get_ipc_handle() (none of
    devarray's pointer objects has one yet: NotImplementedError)."""

    def get_ipc_handle(self, memory):
        """An IPC handle for `memory`, from its own get_ipc_handle()."""
        ipc = getattr(memory, "get_ipc_handle", None)
        if ipc is None:
            raise NotImplementedError("get_ipc_handle: %r has no IPC export (pointer-level "
                                      "memory cannot be exported yet)" % (memory,))
        return ipc()


class NumbaCUDAMemoryManager(GetIpcHandleMixin, BaseCUDAMemoryManager):
    """The library's own manager ("direct", "pool" or "async", the option memory_manager) seen as
    Numba's NumbaCUDAMemoryManager: ``deallocations`` is the context's one queue."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.deallocations = self.context.deallocations

    @property
    def name(self):
        """The library's name of the manager ("direct", "pool", "async")."""
        return lib.dv_context_memory_manager(self.context.handle).decode()

    def __repr__(self):
        return "<devarray.NumbaCUDAMemoryManager %s>" % self.name

    def initialize(self):
        """Nothing to do: the queue's capacity is known when the context is made."""

    def memalloc(self, size):
        m = _memory
        return m.AutoFreePointer._from_handle(_c_bytes(self.context, lib.dv_device_array, size,
                                                       None), context=self.context).own()

    def memhostalloc(self, size, mapped=False, portable=False, wc=False):
        return _memhostalloc(self.context, size, mapped, portable, wc, None)

    def mempin(self, owner, pointer, size, mapped=False):
        return _mempin(self.context, owner, pointer, size, mapped, None)

    def memallocmanaged(self, size, attach_global=True):
        return _memallocmanaged(self.context, size, attach_global, None)

    def get_memory_info(self):
        f, t = ctypes.c_size_t(), ctypes.c_size_t()
        check(lib.dv_context_memory_info(self.context.handle, ctypes.byref(f), ctypes.byref(t)),
              "get_memory_info")
        return MemoryInfo(f.value, t.value)

    def reset(self):
        """Flush the pending-deallocation queue (devarray frees no live memory: see
        docs/semantics.md)."""
        self.deallocations.clear()

    @contextlib.contextmanager
    def defer_cleanup(self):
        check(lib.dv_defer_cleanup_begin(self.context.handle), "defer_cleanup")
        try:
            yield
        finally:
            check(lib.dv_defer_cleanup_end(self.context.handle), "defer_cleanup")

    @property
    def interface_version(self):
        return _SUPPORTED_EMM_INTERFACE_VERSION


def set_memory_manager(mm_plugin):
    """Use the EMM plugin class `mm_plugin` for the contexts made from now on (Numba's
    set_memory_manager); the context open now keeps its manager (close() it first).
    RuntimeError when the plugin implements another interface version. None: the library's
    own manager again (devarray only)."""
    global _memory_manager
    if mm_plugin is None:  # devarray's addition: back to the library's own manager
        _memory_manager = None
        return
    dummy = mm_plugin(context=None)
    iv = dummy.interface_version
    if iv != _SUPPORTED_EMM_INTERFACE_VERSION:
        raise RuntimeError("EMM Plugin interface has version %d - version %d required"
                           % (iv, _SUPPORTED_EMM_INTERFACE_VERSION))
    _memory_manager = mm_plugin


def _ensure_memory_manager():
    """The plugin class for a new context: the one set, else NUMBA_CUDA_MEMORY_MANAGER's
    (a module name; "default" or unset: None, the library's own manager)."""
    if _memory_manager is not None:
        return _memory_manager
    name = os.environ.get("NUMBA_CUDA_MEMORY_MANAGER", "default")
    if not name or name == "default":
        return None
    try:
        set_memory_manager(importlib.import_module(name)._numba_memory_manager)
    except Exception as e:
        raise RuntimeError("Failed to use memory manager from %s" % name) from e
    return _memory_manager


# ---- callback errors -------------------------------------------------------------------------

_tls = threading.local()


def _status_of(exc):
    if isinstance(exc, MemoryError):
        return DV_ERR_OUT_OF_MEMORY
    if isinstance(exc, NotImplementedError):
        return DV_ERR_NOT_SUPPORTED
    return DV_ERR_DRIVER


def _unraisable(exc, what):
    try:
        hook = sys.unraisablehook
        hook(_Unraisable(type(exc), exc, exc.__traceback__, "Exception ignored in " + what, None))
    except Exception:
        pass


_Unraisable = namedtuple("UnraisableHookArgs", "exc_type exc_value exc_traceback err_msg object")


def _keep(exc):
    """Keep a callback's exception for the calling thread; return its status."""
    old = getattr(_tls, "pending", None)
    if old is not None and not isinstance(old[1], MemoryError):
        _unraisable(old[1], "a memory manager plug-in (its error was not reported by a call)")
    st = _status_of(exc)
    _tls.pending = (st, exc)
    return st


def _take(status):
    """The plug-in exception kept for `status` on this thread, or None; either way nothing
    stays kept (an exception not matching the failed call's status is not that call's)."""
    p = getattr(_tls, "pending", None)
    _tls.pending = None
    if p is None or p[0] != status:
        return None
    return p[1]


def _succeeded():
    """The plug-in's memalloc succeeded: an exception kept from an earlier one on this thread
    belonged to a failure the library recovered from (it retried), so it is dropped. (Not on
    get_memory_info's success: the library asks for it to word its own out-of-memory error.)"""
    _tls.pending = None


_lib._callback_error = _take


# ---- the C table -----------------------------------------------------------------------------

# the structs and entry types: _abi (checked against devarray.h)
dv_block, dv_memory_manager = _abi.dv_block, _abi.dv_memory_manager
_INIT, _FINI, _ALLOC, _FREE, _INFO = (_abi.MM_INIT, _abi.MM_FINI, _abi.MM_ALLOC, _abi.MM_FREE,
                                      _abi.MM_MEM_INFO)


def _pointer_value(mp):
    """The device pointer (CUdeviceptr, cl_mem, host address) a memalloc result holds."""
    p = getattr(mp, "device_pointer", None)
    if p is None:
        raise TypeError("memalloc must return a MemoryPointer, not %s" % type(mp).__name__)
    v = getattr(p, "value", p)
    if v is None:
        return 0
    return int(v)


class PluginBridge:
    """The dv_memory_manager table of one context, its callbacks into `plugin` (set once the
    Python context exists) and the memory it handed to the library, by block handle."""

    def __init__(self, name):
        self.plugin = None
        self.live = {}                  # block handle -> the plugin's MemoryPointer
        self._keys = itertools.count(1)
        self.allocs = self.frees = 0
        # the callbacks stay referenced as long as the bridge (the Context holds it)
        self.table = dv_memory_manager(
            version=1, name=name.encode(), user=None,
            init=_INIT(self._init), fini=_FINI(self._fini), alloc=_ALLOC(self._alloc),
            free=_FREE(self._free), mem_info=_INFO(self._info))

    def _init(self, ctx, user, state):
        state[0] = None
        return DV_OK

    def _fini(self, state):
        pass

    def _alloc(self, state, size, stream, out):
        try:
            if self.plugin is None:
                raise RuntimeError("memalloc called before the plug-in was made")
            mp = self.plugin.memalloc(size)
            ptr = _pointer_value(mp)
            if not ptr:
                raise RuntimeError("memalloc returned a NULL device pointer")
            buf, off = _decode(ptr)  # a devarray pointer's synthetic OpenCL value: its cl_mem
            key = next(self._keys)
            self.live[key] = mp
            out[0].buf, out[0].offset, out[0].handle = buf, off, key
            self.allocs += 1
            _succeeded()
            return DV_OK
        except BaseException as e:  # noqa: B902 (KeyboardInterrupt included: reported, kept)
            return _keep(e)

    def _free(self, state, block, size, stream):
        mp = self.live.pop(block.handle or 0, None)
        if mp is None:
            _unraisable(KeyError("block handle %r" % block.handle), "a plug-in free: unknown block")
            return DV_ERR_INVALID_ARGUMENT
        self.frees += 1
        try:
            del mp  # the last reference: the pointer's finalizer runs
        except BaseException as e:  # noqa: B902
            _unraisable(e, "a memory manager plug-in's free")
            return _status_of(e)
        return DV_OK

    def _info(self, state, free, total):
        try:
            f, t = self.plugin.get_memory_info()
            free[0], total[0] = int(f), int(t)
            return DV_OK
        except BaseException as e:  # noqa: B902
            return _keep(e)


# ---- memory for plug-ins ---------------------------------------------------------------------

def backend_memalloc(context, size):
    """A MemoryPointer over `size` bytes straight from the driver (dv_backend_alloc, which
    bypasses every manager), freed (dv_backend_free) by its finalizer: what a plug-in that
    delegates to devarray's own allocation returns from memalloc.

    Its device_pointer stands for the library's buffer handle, what a plug-in must hand
    back: the CUdeviceptr (CUDA), the cl_mem's synthetic value (OpenCL: docs/semantics.md,
    "Python binding"), the simulator's block handle (host simulator: not the data's address,
    so not for devarray.driver's copies there)."""
    blk = dv_block()
    check(lib.dv_backend_alloc(context.handle, int(size), ctypes.byref(blk)), "memalloc")
    h = context.handle

    def finalizer(blk=blk, h=h):
        check(lib.dv_backend_free(h, blk), "free")

    mod = _memory
    ptr = mod._synthetic(blk.buf, 0) if context.backend == "opencl" else blk.buf
    return mod.MemoryPointer(context, ptr, int(size), finalizer=finalizer)
