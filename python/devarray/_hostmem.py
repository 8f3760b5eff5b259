"""Host memory: pinned, mapped, managed and registered NumPy arrays, and the wrapping of
NumPy arrays as C host arrays."""

import contextlib
import ctypes
import threading

import numpy as np

from . import _abi, _context, _current
from ._abi import dv_pinned_stats as _dv_pinned_stats
from ._context import current_context
from ._convert import (_P, _dv_dtype, _dtype_cache, _shape_tuple, _i64, _out,
                       _pack_shape)
from ._lib import lib, check, error, lean
from ._stream import _stream_handle
from ._words import _shape_words

# ---- host memory ----------------------------------------------------------

# (address, shape, strides, dtype) -> C handle of pinned, mapped, managed or registered host
# memory, so that transfers and launches use what the library knows of that memory.
_registry = {}
_registry_lock = threading.Lock()


def _key(arr):
    return (arr.__array_interface__["data"][0], arr.shape, arr.strides, arr.dtype)


class _HostOwner:
    """Owns one reference to a C host-side array (pinned, mapped, managed, a smart array's
    host copy) and exposes it to NumPy; NumPy arrays over it keep it as their base."""

    def __init__(self, handle, dtype, keep=None, register=True):
        self.handle = handle
        self._keep = keep
        self.dtype = dtype
        nd = lib.dv_array_ndim(handle)
        shp, strd = lib.dv_array_shape(handle), lib.dv_array_strides(handle)
        self.shape = tuple(shp[i] for i in range(nd))
        self.strides = tuple(strd[i] for i in range(nd))
        ptr = _P()
        check(lib.dv_array_host_data(handle, ctypes.byref(ptr)))
        self.__array_interface__ = {"shape": self.shape, "strides": self.strides or None,
                                    "typestr": dtype.str if dtype.names is None else "|V%d"
                                    % dtype.itemsize,
                                    "descr": dtype.descr if dtype.names else [("", dtype.str)],
                                    "data": (ptr.value or 0, False), "version": 3}
        self._registered = None
        if register:
            self._registered = (ptr.value or 0, self.shape, self.strides, dtype)
            with _registry_lock:
                _registry[self._registered] = handle

    def array(self, dtype):
        a = np.asarray(self)
        if a.dtype != dtype:
            a = a.view(dtype)
        return a

    def __del__(self):
        if self._registered is not None:
            with _registry_lock:
                _registry.pop(self._registered, None)
        if self.handle and lib is not None:
            lib.dv_array_release(self.handle)
            self.handle = None


def _host_array(arr):
    """(C handle with one reference, numpy array it describes) for a host array."""
    if type(arr) is not np.ndarray and not isinstance(arr, np.ndarray):
        arr = np.asarray(arr)  # (a subclass, such as MappedNDArray, is used as it is)
    flags = arr.flags
    if not flags.aligned or not arr.dtype.isnative:
        arr = np.require(arr, arr.dtype.newbyteorder("="), ["A"])
        flags = arr.flags
    # the address: the array's own struct interface is a capsule (cheap) where
    # __array_interface__ builds a dict (~10,000 instructions)
    data = _capsule_ptr(arr.__array_struct__, None)[0].data
    if _registry:
        h = _registry.get((data or 0, arr.shape, arr.strides, arr.dtype))
        if h is not None:
            return lib.dv_array_retain(h), arr
    out = _out
    shape = arr.shape
    dt = arr.dtype
    cdt = _dtype_cache.get(dt)
    if cdt is None:
        cdt = _dv_dtype(dt)
    c = _current.ctx
    st = _wrap_fn((c if c is not None else current_context()).handle, data, len(shape),
                  _pack_shape(shape), cdt, None if flags.c_contiguous else _pack_shape(arr.strides),
                  out.ref)
    if st:
        check(st, "host array")
    return out.p.value, arr


class _PyArrayInterface(ctypes.Structure):
    """NumPy's PyArrayInterface (the __array_struct__ capsule's pointer)."""
    _fields_ = [("two", ctypes.c_int), ("nd", ctypes.c_int), ("typekind", ctypes.c_char),
                ("itemsize", ctypes.c_int), ("flags", ctypes.c_int),
                ("shape", ctypes.c_void_p), ("strides", ctypes.c_void_p),
                ("data", ctypes.c_void_p), ("descr", ctypes.c_void_p)]


# a prototype of its own: other modules (_dlpack) declare ctypes.pythonapi's shared function
# object with other argtypes
_capsule_ptr = ctypes.PYFUNCTYPE(ctypes.POINTER(_PyArrayInterface), ctypes.py_object,
                                 ctypes.c_char_p)(("PyCapsule_GetPointer", ctypes.pythonapi))
_wrap_fn = lean("dv_host_array_wrap")  # every pointer an address (_abi.LEAN)
_release_fn = lib.dv_array_release
_byref = ctypes.byref


def _alloc(fn, shape, dtype, strides, order, *extra, name=""):
    shape = _shape_tuple(shape)
    dtype = np.dtype(dtype)
    if strides is not None:
        strides = _shape_tuple(strides)
        if len(strides) != len(shape):
            raise ValueError("strides not match ndim")  # Numba's words
    if order not in ("C", "F"):
        raise ValueError("must be either C/F order")  # Numba's words
    out = _P()
    st = fn(_context._handle(), len(shape), _i64(shape), _dv_dtype(dtype), _i64(strides),
            order.encode(), *extra, ctypes.byref(out))
    if st:
        raise _shape_words(error(st, name), shape)
    return out.value, dtype


def pinned_array(shape, dtype=np.float64, strides=None, order="C"):
    """A NumPy array over page-locked host memory (Numba's pinned_array)."""
    h, dt = _alloc(lib.dv_pinned_array, shape, dtype, strides, order, name="pinned_array")
    return _HostOwner(h, dt).array(dt)


def _like(ary):
    """shape, dtype, strides and order of a contiguous array laid out like `ary` (Numba's
    *_array_like): `ary`'s own order when it is contiguous, else the dimensions in the order
    of `ary`'s strides (NumPy's empty_like)."""
    if not hasattr(ary, "strides") or not hasattr(ary, "flags"):
        ary = np.asarray(ary)
    c, f = bool(ary.flags["C_CONTIGUOUS"]), bool(ary.flags["F_CONTIGUOUS"])
    order = "F" if f and not c else "C"
    strides = None
    if not (c or f or ary.ndim <= 1):
        perm = sorted(range(ary.ndim), key=lambda d: ary.strides[d])
        out = [0] * ary.ndim
        stride = ary.dtype.itemsize
        for d in perm:
            out[d] = stride
            stride *= ary.shape[d]
        strides = tuple(out)
    return ary.shape, ary.dtype, strides, order


def pinned_array_like(ary):
    """pinned_array of `ary`'s shape and dtype, laid out like it (Numba's pinned_array_like)."""
    shape, dtype, strides, order = _like(ary)
    return pinned_array(shape, dtype, strides=strides, order=order)


def managed_array(shape, dtype=np.float64, strides=None, order="C", stream=0,
                  attach_global=True):
    """A NumPy array over managed memory (Numba's managed_array); NotSupportedError on
    backends and devices without it. Synchronize before reading what kernels wrote."""
    h, dt = _alloc(lib.dv_managed_array, shape, dtype, strides, order,
                   1 if attach_global else 0, name="managed_array")
    return _HostOwner(h, dt).array(dt)


@contextlib.contextmanager
def pinned(*arylist):
    """Page-lock the NumPy arrays' memory for the block (Numba's cuda.pinned)."""
    handles, arrs = _wrap_all(arylist)
    scope = _P()
    try:
        check(lib.dv_pinned_scope_begin(_context._handle(), len(handles),
                                        (_P * len(handles))(*handles), ctypes.byref(scope)),
              "pinned")
        keys = _register(handles, arrs)
        try:
            yield
        finally:
            _unregister(keys)
            check(lib.dv_scope_end(scope), "pinned")
    finally:
        for h in handles:
            lib.dv_array_release(h)


def _wrap_all(arylist):
    handles, arrs = [], []
    try:
        for a in arylist:
            if not isinstance(a, np.ndarray):
                raise TypeError("pinned/mapped/register take NumPy arrays, not %s"
                                % type(a).__name__)
            h, arr = _host_array(a)
            handles.append(h)
            arrs.append(arr)
    except BaseException:
        for h in handles:
            lib.dv_array_release(h)
        raise
    return handles, arrs


def _register(handles, arrs):
    keys = []
    with _registry_lock:
        for h, a in zip(handles, arrs):
            k = _key(a)
            if k not in _registry:
                _registry[k] = h
                keys.append(k)
    return keys


def _unregister(keys):
    with _registry_lock:
        for k in keys:
            _registry.pop(k, None)


_registered = {}  # key -> (handle, array)


class _Registration:
    """What register() returns (Numba's ROC form): ``with register(a, b):`` deregisters the
    arrays at the block's end (those this call registered and nothing deregistered since)."""

    __slots__ = ("_entries",)

    def __init__(self, entries):
        self._entries = entries  # [(key, handle)]

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        entries, self._entries = self._entries, []
        live = [(k, h) for k, h in entries if _registered.get(k, (None,))[0] == h]
        _deregister_entries([k for k, _ in live])
        return False

    def __repr__(self):
        return "<devarray registration of %d array(s)>" % len(self._entries)


def register(*arylist):
    """Page-lock (register) NumPy arrays until deregister() (Numba's ROC register): TypeError
    for anything but a NumPy array, before anything is registered. Returns an object that is
    also a context manager: ``with register(a, b): ...`` deregisters them at the end."""
    handles, arrs = _wrap_all(arylist)
    done = []
    try:
        for h, a in zip(handles, arrs):
            check(lib.dv_array_register(h), "register")
            done.append((h, a))
    except BaseException:
        for h, a in done:
            lib.dv_array_deregister(h)
        for h in handles:
            lib.dv_array_release(h)
        raise
    entries = []
    for h, a in done:
        k = _key(a)
        _registered[k] = (h, a)
        entries.append((k, h))
        with _registry_lock:
            _registry.setdefault(k, h)
    return _Registration(entries)


def deregister(*arylist):
    """Undo register(); MisuseError for an array that is not registered."""
    for a in arylist:
        k = _key(np.asarray(a))
        if k not in _registered:
            h, _ = _host_array(a)
            try:
                check(lib.dv_array_deregister(h), "deregister")
            finally:
                lib.dv_array_release(h)
            continue
        _deregister_entries([k])


def _deregister_entries(keys):
    """Deregister the registered arrays of `keys` (all of them; the first error is raised)."""
    err = None
    for k in keys:
        ent = _registered.pop(k, None)
        if ent is None:
            continue
        with _registry_lock:
            if _registry.get(k) == ent[0]:
                del _registry[k]
        try:
            check(lib.dv_array_deregister(ent[0]), "deregister")
        except Exception as e:
            err = err or e
        finally:
            lib.dv_array_release(ent[0])
    if err is not None:
        raise err


# ---- managed memory's hints (issue 40) ---------------------------------------

_LOCATIONS = {"device": _abi.DV_LOCATION_DEVICE, "host": _abi.DV_LOCATION_HOST,
              "cpu": _abi.DV_LOCATION_HOST}
_ADVICE = {"read_mostly": _abi.DV_MEM_ADVISE_SET_READ_MOSTLY,
           "unset_read_mostly": _abi.DV_MEM_ADVISE_UNSET_READ_MOSTLY,
           "preferred_location": _abi.DV_MEM_ADVISE_SET_PREFERRED_LOCATION,
           "unset_preferred_location": _abi.DV_MEM_ADVISE_UNSET_PREFERRED_LOCATION,
           "accessed_by": _abi.DV_MEM_ADVISE_SET_ACCESSED_BY,
           "unset_accessed_by": _abi.DV_MEM_ADVISE_UNSET_ACCESSED_BY}


def _location(where):
    if isinstance(where, str) and where in _LOCATIONS:
        return _LOCATIONS[where]
    if where in (-1, 0) and not isinstance(where, bool):  # cudaCpuDeviceId, this device
        return int(where)
    raise ValueError("location must be 'device' or 'host' (or 0 / -1), not %r" % (where,))


def _hinted(ary, fn_name):
    """(C handle with one reference) of the array a hint is for: a DeviceNDArray, or the NumPy
    array managed_array returned (a view of one has no handle of its own: give its base)."""
    h = getattr(ary, "handle", None)
    if h is not None and not isinstance(ary, np.ndarray):
        return lib.dv_array_retain(h)
    if not isinstance(ary, np.ndarray):
        raise TypeError("%s takes a managed array (managed_array), not %s"
                        % (fn_name, type(ary).__name__))
    with _registry_lock:
        h = _registry.get(_key(ary))
    if h is None:
        base = ary.base
        while base is not None and not isinstance(base, _HostOwner):
            base = getattr(base, "base", None)
        if isinstance(base, _HostOwner):
            raise ValueError("%s takes the array managed_array returned, not a view of it "
                             "(give the whole array)" % fn_name)
        h, _ = _host_array(ary)  # refused by the library for its kind, with its message
        return h
    return lib.dv_array_retain(h)


def prefetch(ary, to="device", stream=0):
    """Prefetch a managed array's memory to the device ('device') or the host ('host'), in
    stream order (dv_array_prefetch; CUDA's cuMemPrefetchAsync, CuPy's
    runtime.memPrefetchAsync; Numba has none). stream=0: done when this returns.
    NotSupportedError where the device has no concurrent managed access; ValueError for
    memory that is not managed."""
    loc = _location(to)
    s = _stream_handle(stream)
    h = _hinted(ary, "prefetch")
    try:
        check(lib.dv_array_prefetch(h, loc, s), "prefetch")
    finally:
        lib.dv_array_release(h)


def advise(ary, advice, location="device"):
    """Advise the driver how a managed array will be used (dv_array_advise; CUDA's
    cuMemAdvise, CuPy's runtime.memAdvise): advice 'read_mostly', 'preferred_location',
    'accessed_by' or their 'unset_' forms (or CUDA's values 1-6); location 'device' or
    'host'. Not stream-ordered."""
    if isinstance(advice, str):
        if advice not in _ADVICE:
            raise ValueError("advice must be one of %s, not %r" % (", ".join(sorted(_ADVICE)),
                                                                   advice))
        code = _ADVICE[advice]
    elif isinstance(advice, int) and not isinstance(advice, bool) and 1 <= advice <= 6:
        code = advice
    else:
        raise ValueError("advice must be a name or 1-6, not %r" % (advice,))
    loc = _location(location)
    h = _hinted(ary, "advise")
    try:
        check(lib.dv_array_advise(h, code, loc), "advise")
    finally:
        lib.dv_array_release(h)


def is_pinned(arr):
    """Whether the host array's memory is pinned, mapped or registered (as the library knows)."""
    h, _ = _host_array(arr)
    try:
        return bool(lib.dv_array_is_pinned(h))
    finally:
        lib.dv_array_release(h)




# ---- the pinned pool ------------------------------------------------------

class PinnedMemoryPool:
    """The pinned pool of the current context (docs/pinned_pool.md): the cache of page-locked
    memory behind pinned_array, mapped_array and memhostalloc, with CuPy's PinnedMemoryPool
    names (Numba has none). It is on or off, with its reserve, per context through the options
    pinned_pool, pinned_pool_reserve and pinned_pool_limit (DV_PINNED_POOL, ...); with it off
    every figure is 0 and set_limit raises NotSupportedError."""

    def _stats(self):
        st = _dv_pinned_stats()
        check(lib.dv_pinned_pool_stats(_context._handle(), ctypes.byref(st)), "PinnedMemoryPool")
        return st

    @property
    def enabled(self):
        """Whether the current context's pinned and mapped arrays come from the pool."""
        return bool(self._stats().enabled)

    def free_all_blocks(self):
        """Give every cached block back to the driver (those of the reserve excepted), after
        the queued frees have run (dv_pinned_pool_trim)."""
        check(lib.dv_pinned_pool_trim(_context._handle()), "free_all_blocks")

    def n_free_blocks(self):
        """Free blocks the pool caches."""
        return self._stats().free_blocks

    def used_bytes(self):
        """Bytes of the blocks handed out to arrays (class sizes)."""
        return self._stats().in_use.current

    def free_bytes(self):
        """Bytes of the cached free blocks."""
        return self._stats().cached

    def total_bytes(self):
        """Bytes the pool holds: in use and cached, the reserve included."""
        return self._stats().held.current

    def get_limit(self):
        """The most bytes the pool holds (option pinned_pool_limit, or set_limit)."""
        return self._stats().limit

    def set_limit(self, size=0):
        """Change the limit (bytes; 0: a quarter of physical memory), freeing cached blocks
        down to it; a request past it is served outside the pool."""
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise ValueError("size must be a non-negative int, got %r" % (size,))
        check(lib.dv_pinned_pool_set_limit(_context._handle(), size), "set_limit")

    def stats(self):
        """Every figure of dv_pinned_pool_stats, as a dict."""
        st = self._stats()
        out = {}
        for name, _ in st._fields_:
            v = getattr(st, name)
            out[name] = {"current": v.current, "peak": v.peak, "total": v.total} if hasattr(v, "peak") else v
        out["enabled"] = bool(out["enabled"])
        return out


_pinned_pool = PinnedMemoryPool()


def get_default_pinned_memory_pool():
    """The pinned pool (of whichever context is current when its methods are called):
    CuPy's get_default_pinned_memory_pool."""
    return _pinned_pool
