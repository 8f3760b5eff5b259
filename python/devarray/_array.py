"""Device arrays (DeviceNDArray, DeviceRecord), host memory and transfers."""

import contextlib
import ctypes
import numbers
import struct
import threading

import numpy as np

from . import _context
from ._context import current_context, _stream_handle, Stream
from ._lib import lib, check, dv_index, dv_field_desc, library_path

_P = ctypes.c_void_p
_I64 = ctypes.c_int64

MEM_DEVICE, MEM_HOST, MEM_PINNED, MEM_MAPPED, MEM_MANAGED = range(5)

# ---- dtypes ---------------------------------------------------------------

_dtype_cache = {}
_dtype_lock = threading.RLock()  # reentrant: record fields are converted recursively


def _dv_dtype(dt):
    """The C dtype (a pointer, owned by the cache) for a NumPy dtype."""
    dt = np.dtype(dt)
    p = _dtype_cache.get(dt)
    if p is not None:
        return p
    with _dtype_lock:
        p = _dtype_cache.get(dt)
        if p is not None:
            return p
        if dt.names is not None:
            p = _record_dtype(dt)
        else:
            if dt.subdtype is not None or dt.byteorder == (">" if np.little_endian else "<"):
                raise TypeError("devarray: unsupported dtype %s (native-order numeric or "
                                "record dtypes only)" % dt)
            p = lib.dv_dtype_from_name(dt.name.encode())
            if not p:
                raise TypeError("devarray: unsupported dtype %s" % dt)
        _dtype_cache[dt] = p
        return p


def _record_dtype(dt):
    n = len(dt.names)
    fields = (dv_field_desc * n)()
    keep = []
    for i, name in enumerate(dt.names):
        fdt, off = dt.fields[name][:2]
        shape = ()
        if fdt.subdtype is not None:
            fdt, shape = fdt.subdtype
        sub = _dv_dtype(fdt) if fdt.names is None else _record_dtype_cached(fdt)
        enc = name.encode()
        shp = (_I64 * max(len(shape), 1))(*shape)
        keep += [enc, shp]
        fields[i].name = enc
        fields[i].dtype = sub
        fields[i].offset = off
        fields[i].ndim = len(shape)
        fields[i].shape = ctypes.cast(shp, ctypes.POINTER(_I64))
    out = _P()
    check(lib.dv_dtype_record_create(fields, n, dt.itemsize, ctypes.byref(out)),
          "record dtype %s" % dt)
    return out.value


def _record_dtype_cached(dt):
    p = _dtype_cache.get(dt)
    if p is None:
        p = _record_dtype(dt)
        _dtype_cache[dt] = p
    return p


def _np_dtype(p):
    """The NumPy dtype of a C dtype."""
    tid = lib.dv_dtype_id(p)
    if tid != 14:
        return np.dtype(lib.dv_dtype_name(p).decode())
    names, formats, offsets = [], [], []
    f = dv_field_desc()
    for i in range(lib.dv_dtype_field_count(p)):
        check(lib.dv_dtype_field(p, i, ctypes.byref(f)))
        sub = _np_dtype(f.dtype)
        if f.ndim:
            sub = np.dtype((sub, tuple(f.shape[j] for j in range(f.ndim))))
        names.append(f.name.decode())
        formats.append(sub)
        offsets.append(f.offset)
    return np.dtype({"names": names, "formats": formats, "offsets": offsets,
                     "itemsize": lib.dv_dtype_itemsize(p)})


def _shape_tuple(shape):
    if isinstance(shape, numbers.Integral):
        return (int(shape),)
    return tuple(int(s) for s in shape)


_I64_ARRAYS = [_I64 * n for n in range(33)]


def _i64(seq):
    return _I64_ARRAYS[len(seq)](*seq) if seq else None


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
    if type(arr) is not np.ndarray:
        arr = np.asarray(arr)
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
    c = _context._ctx
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
_wrap_fn = ctypes.CDLL(library_path).dv_host_array_wrap
_wrap_fn.argtypes = [_P, _P, ctypes.c_int, _P, _P, _P, _P]
_wrap_fn.restype = ctypes.c_int
_release_fn = lib.dv_array_release
_byref = ctypes.byref


def _alloc(fn, shape, dtype, strides, order, *extra, name=""):
    shape = _shape_tuple(shape)
    dtype = np.dtype(dtype)
    if strides is not None:
        strides = _shape_tuple(strides)
        if len(strides) != len(shape):
            raise ValueError("strides must have one entry per dimension")
    if order not in ("C", "F"):
        raise ValueError("order must be 'C' or 'F', not %r" % (order,))
    out = _P()
    check(fn(_context._handle(), len(shape), _i64(shape), _dv_dtype(dtype), _i64(strides),
             order.encode(), *extra, ctypes.byref(out)), name)
    return out.value, dtype


def pinned_array(shape, dtype=np.float64, strides=None, order="C"):
    """A NumPy array over page-locked host memory (Numba's pinned_array)."""
    h, dt = _alloc(lib.dv_pinned_array, shape, dtype, strides, order, name="pinned_array")
    return _HostOwner(h, dt).array(dt)


def mapped_array(shape, dtype=np.float64, strides=None, order="C", stream=0, portable=False,
                 wc=False):
    """A NumPy array over mapped host memory the device addresses directly (Numba's
    mapped_array). Kernels given it use it in place, with no copy."""
    flags = (1 if portable else 0) | (2 if wc else 0)
    h, dt = _alloc(lib.dv_mapped_array, shape, dtype, strides, order, flags,
                   name="mapped_array")
    return _HostOwner(h, dt).array(dt)


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


@contextlib.contextmanager
def mapped(*arylist, **kws):
    """Map the NumPy arrays into the device's address space for the block (Numba's
    cuda.mapped): yields a device array (a list for several arrays) over the same memory;
    those must not be used after the block."""
    stream = kws.get("stream", 0)
    for a in arylist:
        if isinstance(a, np.ndarray) and not a.flags.writeable:
            # the device view is writable (kernels, copies): refuse, as copy_to_host does
            raise ValueError("mapped: the array is read-only; a device view of it could be "
                             "written (pass a writeable copy)")
    handles, arrs = _wrap_all(arylist)
    n = len(handles)
    views = (_P * n)()
    scope = _P()
    try:
        check(lib.dv_mapped_scope_begin(_context._handle(), n, (_P * n)(*handles), views,
                                        ctypes.byref(scope)), "mapped")
        devs = [DeviceNDArray._from_handle(views[i], a.dtype, keep=a, stream=stream)
                for i, a in enumerate(arrs)]
        try:
            yield devs[0] if n == 1 else devs
        finally:
            for d in devs:
                d._release()
            check(lib.dv_scope_end(scope), "mapped")
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


def register(*arylist):
    """Page-lock (register) host arrays until deregister (Numba's ROC register)."""
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
    for h, a in done:
        k = _key(a)
        _registered[k] = (h, a)
        with _registry_lock:
            _registry.setdefault(k, h)


def deregister(*arylist):
    """Undo register(); MisuseError for an array that is not registered."""
    for a in arylist:
        k = _key(np.asarray(a))
        ent = _registered.get(k)
        if ent is None:
            h, _ = _host_array(a)
            try:
                check(lib.dv_array_deregister(h), "deregister")
            finally:
                lib.dv_array_release(h)
            continue
        del _registered[k]
        with _registry_lock:
            if _registry.get(k) == ent[0]:
                del _registry[k]
        try:
            check(lib.dv_array_deregister(ent[0]), "deregister")
        finally:
            lib.dv_array_release(ent[0])


def is_pinned(arr):
    """Whether the host array's memory is pinned, mapped or registered (as the library knows)."""
    h, _ = _host_array(arr)
    try:
        return bool(lib.dv_array_is_pinned(h))
    finally:
        lib.dv_array_release(h)


# ---- device arrays --------------------------------------------------------

def _hold(stream, obj):
    if stream and isinstance(stream, Stream):
        stream._hold(obj)


class DeviceNDArray:
    """An array in device memory (Numba's DeviceNDArray).

    Views (slices, reshape, ravel, split, T, view) share memory with their base; the memory
    is freed through the deferred-deallocation queue when the last of them goes.
    """

    # strides are read from the library on first use (_strides None until then): a new array
    # costs no call for them (issue 23)
    __slots__ = ("_h", "shape", "_strides", "dtype", "_base", "stream", "__weakref__")

    def __init__(self, shape, strides, dtype, stream=0, gpu_data=None):
        """Allocate (Numba's constructor): use device_array() instead."""
        h, dt = _alloc(lib.dv_device_array, shape, dtype, strides, "C",
                       _stream_handle(stream), name="DeviceNDArray")
        self._init(h, dt, None, stream)

    def _init(self, h, dtype, base, stream):
        self._h = h
        self.dtype = dtype
        self._base = base
        self.stream = stream
        nd = lib.dv_array_ndim(h)
        self.shape = tuple(lib.dv_array_shape(h)[:nd]) if nd else ()
        self._strides = None

    @property
    def strides(self):
        """Byte strides (a tuple), as the library laid the array out."""
        t = self._strides
        if t is None:
            nd = len(self.shape)
            t = self._strides = tuple(lib.dv_array_strides(self.handle)[:nd]) if nd else ()
        return t

    @classmethod
    def _from_handle(cls, h, dtype=None, keep=None, stream=0):
        if dtype is None:
            dtype = _np_dtype(lib.dv_array_dtype(h))
        if dtype.names is not None and lib.dv_array_ndim(h) == 0 and cls is DeviceNDArray:
            cls = DeviceRecord
        self = object.__new__(cls)
        self._init(h, dtype, keep, stream)
        return self

    def _release(self):
        h, self._h = self._h, None
        if h and lib is not None:
            lib.dv_array_release(h)

    def __del__(self, _release=lib.dv_array_release):
        # the release function is bound at definition, so that it is still there while the
        # interpreter tears the module down
        h = self._h
        if h:
            self._h = None
            _release(h)

    @property
    def handle(self):
        """The C dv_array* (borrowed)."""
        if not self._h:
            raise ValueError("devarray: the array was released (a mapped view after its "
                             "scope?)")
        return self._h

    def __repr__(self):
        return "<devarray.DeviceNDArray shape=%s dtype=%s>" % (self.shape, self.dtype)

    # -- attributes
    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def nbytes(self):
        return self.size * self.dtype.itemsize

    @property
    def alloc_size(self):
        return self.nbytes

    @property
    def memory_kind(self):
        """'device', 'host', 'pinned', 'mapped' or 'managed'."""
        return ("device", "host", "pinned", "mapped", "managed")[lib.dv_array_memory(self.handle)]

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def is_c_contiguous(self):
        return bool(lib.dv_array_is_c_contiguous(self.handle))

    def is_f_contiguous(self):
        return bool(lib.dv_array_is_f_contiguous(self.handle))

    @property
    def flags(self):
        return {"C_CONTIGUOUS": self.is_c_contiguous(), "F_CONTIGUOUS": self.is_f_contiguous()}

    # -- transfers
    def copy_to_host(self, ary=None, stream=0):
        """Copy to `ary` (a writeable NumPy array of the same dtype and shape, any layout) or
        to a new NumPy array with this array's dense layout; returns it. With a stream the
        copy is asynchronous: read the result after stream.synchronize(). ValueError for a
        read-only, misaligned or byte-swapped `ary`."""
        if ary is None:
            order = "F" if (self.is_f_contiguous() and not self.is_c_contiguous()) else "C"
            ary = np.empty(self.shape, self.dtype, order=order)
        elif not isinstance(ary, np.ndarray):
            raise TypeError("copy_to_host: ary must be a NumPy array")
        elif not ary.flags.writeable:
            # read-only memory (a mapping, a bytes object) would crash or be changed
            raise ValueError("copy_to_host: ary is read-only (flags.writeable is False)")
        h, arr = _host_array(ary)
        if arr is not ary:
            lib.dv_array_release(h)
            raise ValueError("copy_to_host: ary must be aligned and in native byte order")
        try:
            check(lib.dv_copy_to_host(self.handle, h, _stream_handle(stream), None),
                  "copy_to_host")
        finally:
            lib.dv_array_release(h)
        _hold(stream, ary)
        return ary

    def copy_to_device(self, ary, stream=0):
        """Copy `ary` (NumPy or device array, same dtype and shape) into this array."""
        if isinstance(ary, DeviceNDArray):
            check(lib.dv_copy_to_device(self.handle, ary.handle, _stream_handle(stream)),
                  "copy_to_device")
            return
        h, arr = _host_array(ary)
        try:
            check(lib.dv_copy_to_device(self.handle, h, _stream_handle(stream)),
                  "copy_to_device")
        finally:
            lib.dv_array_release(h)
        _hold(stream, arr)

    def __array__(self, dtype=None, copy=None):
        a = self.copy_to_host()  # always a new host array, whatever `copy` says
        return a if dtype is None else a.astype(dtype, copy=False)

    def get_item_host(self, index):
        """One element, as a NumPy scalar (full integer index)."""
        idx = _i64(index)
        buf = np.empty((), self.dtype)
        check(lib.dv_array_get_item(self.handle, idx, buf.__array_interface__["data"][0],
                                    self.dtype.itemsize, None), "getitem")
        return buf[()]

    # -- views
    def _wrap(self, h, dtype=None):
        return DeviceNDArray._from_handle(h, self.dtype if dtype is None else dtype, keep=self,
                                          stream=self.stream)

    def _slice(self, key):
        if not isinstance(key, tuple):
            key = (key,)
        if any(k is Ellipsis for k in key):
            i = [j for j, k in enumerate(key) if k is Ellipsis]
            if len(i) > 1:
                raise IndexError("an index can only have a single ellipsis ('...')")
            i = i[0]
            fill = self.ndim - (len(key) - 1)
            key = key[:i] + (slice(None),) * max(fill, 0) + key[i + 1:]
        n = len(key)
        idx = (dv_index * max(n, 1))()
        allint = True
        for j, k in enumerate(key):
            if isinstance(k, slice):
                allint = False
                idx[j].kind = 0
                idx[j].start = _I64_MIN if k.start is None else _index(k.start)
                idx[j].stop = _I64_MIN if k.stop is None else _index(k.stop)
                idx[j].step = 1 if k.step is None else _index(k.step)
            elif k is None:
                raise IndexError("devarray: np.newaxis is not supported in device indexing "
                                 "(reshape instead)")
            else:
                idx[j].kind = 1
                idx[j].index = _index(k)
        out = _P()
        check(lib.dv_array_slice(self.handle, n, idx, ctypes.byref(out)), "index")
        return out.value, allint and n == self.ndim

    def __getitem__(self, key):
        if isinstance(key, str):
            return self.field(key)
        h, scalar = self._slice(key)
        if scalar and self.dtype.names is None:
            try:
                buf = np.empty((), self.dtype)
                check(lib.dv_array_get_item(h, _ZERO, buf.__array_interface__["data"][0],
                                            self.dtype.itemsize, _stream_handle(self.stream)),
                      "getitem")
                if self.stream:
                    self.stream.synchronize()
                return buf[()]
            finally:
                lib.dv_array_release(h)
        return self._wrap(h)

    def __setitem__(self, key, value):
        if isinstance(key, str):
            view = self.field(key)
        else:
            h, _ = self._slice(key)
            view = self._wrap(h)
        try:
            view._assign(value, self.stream)
        finally:
            view._release()

    def _assign(self, value, stream):
        s = _stream_handle(stream)
        if isinstance(value, DeviceNDArray):
            if value.shape != self.shape:
                value = value._broadcast_to(self.shape)
            check(lib.dv_array_copy(self.handle, value.handle, s), "setitem")
            return
        if self.ndim == 0 and self.dtype.names is None:
            buf = np.asarray(value, self.dtype)
            check(lib.dv_array_set_item(self.handle, _ZERO, buf.__array_interface__["data"][0],
                                        self.dtype.itemsize, s), "setitem")
            if stream:
                stream._hold(buf)
            return
        src = np.broadcast_to(np.asarray(value, dtype=self.dtype), self.shape)
        h, arr = _host_array(src)
        try:
            check(lib.dv_array_copy(self.handle, h, s), "setitem")
        finally:
            lib.dv_array_release(h)
        _hold(stream, arr)

    def _broadcast_to(self, shape):
        b = np.broadcast_to(np.empty((), self.dtype), ())  # validates dtype
        del b
        probe = np.lib.stride_tricks.as_strided(np.empty(1, np.int8), self.shape,
                                                self.strides, writeable=False)
        try:
            probe = np.broadcast_to(probe, shape)
        except ValueError as e:
            raise ValueError("could not broadcast device array from shape %s into shape %s"
                             % (self.shape, shape)) from e
        return self._restride(shape, probe.strides, self.dtype)

    def field(self, name):
        """The view of field `name` of a record array (devarray's dv_array_field)."""
        out = _P()
        check(lib.dv_array_field(self.handle, name.encode(), ctypes.byref(out)), "field")
        return DeviceNDArray._from_handle(out.value, None, keep=self, stream=self.stream)

    def reshape(self, *newshape, **kws):
        """A view when NumPy would give one, else a copy on the device (Numba raises
        NotImplementedError there; see docs/semantics.md)."""
        order = kws.pop("order", "C")
        stream = kws.pop("stream", 0)
        if kws:
            raise TypeError("unknown keyword arguments: %s" % ", ".join(kws))
        if len(newshape) == 1 and not isinstance(newshape[0], numbers.Integral):
            newshape = tuple(newshape[0])
        newshape = tuple(int(s) for s in newshape)
        out = _P()
        check(lib.dv_array_reshape(self.handle, len(newshape), _i64(newshape),
                                   _order(order), 0, _stream_handle(stream),
                                   ctypes.byref(out)), "reshape")
        return self._wrap(out.value)

    def ravel(self, order="C", stream=0):
        """A 1-D view when the layout allows it, else a copy on the device."""
        out = _P()
        check(lib.dv_array_ravel(self.handle, _order(order), 0, _stream_handle(stream),
                                 ctypes.byref(out)), "ravel")
        return self._wrap(out.value)

    def split(self, section, stream=0):
        """Views of `section` elements each (the last shorter); 1-D unit-stride arrays only."""
        n = ctypes.c_size_t()
        check(lib.dv_array_split(self.handle, int(section), None, 0, ctypes.byref(n)), "split")
        views = (_P * max(n.value, 1))()
        check(lib.dv_array_split(self.handle, int(section), views, n.value, ctypes.byref(n)),
              "split")
        return [self._wrap(views[i]) for i in range(n.value)]

    def _restride(self, shape, strides, dtype):
        """A view with another layout over the same memory (dv_device_array_wrap)."""
        if self.size == 0 or 0 in shape:
            h, _ = _alloc(lib.dv_device_array, shape, dtype, None, "C", None, name="view")
            return self._wrap(h, dtype)
        buf, off = _P(), ctypes.c_size_t()
        check(lib.dv_array_native(self.handle, ctypes.byref(buf), ctypes.byref(off)), "view")
        hi = sum((s - 1) * t for s, t in zip(shape, strides) if t > 0)
        out = _P()
        check(lib.dv_device_array_wrap(_ctx_of(self), buf, off.value,
                                       off.value + hi + dtype.itemsize, len(shape),
                                       _i64(shape), _dv_dtype(dtype), _i64(strides), None,
                                       None, ctypes.byref(out)), "view")
        return self._wrap(out.value, dtype)

    def view(self, dtype):
        """The same memory read as another dtype (NumPy's rule: the last dimension, which
        must be contiguous, is rescaled)."""
        dtype = np.dtype(dtype)
        probe = np.lib.stride_tricks.as_strided(np.empty(self.dtype.itemsize * 2, np.uint8)
                                                .view(self.dtype)[:1], self.shape,
                                                self.strides)
        try:
            v = probe.view(dtype)
        except ValueError as e:
            raise ValueError("devarray: view(%s): %s" % (dtype, e)) from e
        return self._restride(v.shape, v.strides, dtype)

    def transpose(self, axes=None):
        """A view with the axes permuted (NumPy's transpose; Numba copies, see
        docs/semantics.md)."""
        if axes is None:
            axes = tuple(reversed(range(self.ndim)))
        axes = tuple(int(a) % max(self.ndim, 1) for a in axes)
        if sorted(axes) != list(range(self.ndim)):
            raise ValueError("invalid permutation %s for %d dimensions" % (axes, self.ndim))
        if axes == tuple(range(self.ndim)):
            return self
        return self._restride(tuple(self.shape[a] for a in axes),
                              tuple(self.strides[a] for a in axes), self.dtype)

    @property
    def T(self):
        return self.transpose()

    def bind(self, stream=0):
        """The same array with `stream` as its default stream for item access."""
        return self._wrap(lib.dv_array_retain(self.handle))._with_stream(stream)

    def _with_stream(self, stream):
        self.stream = stream
        return self

    # -- interop
    @property
    def __cuda_array_interface__(self):
        if current_context().backend != "cuda" or lib.dv_array_memory(self.handle) not in (
                MEM_DEVICE, MEM_MANAGED, MEM_MAPPED):
            raise AttributeError("__cuda_array_interface__ exists only for arrays on the "
                                 "cuda backend")
        buf, off = _P(), ctypes.c_size_t()
        check(lib.dv_array_native(self.handle, ctypes.byref(buf), ctypes.byref(off)))
        ptr = (buf.value or 0) + off.value if self.size else 0
        return {"shape": self.shape, "strides": None if self.is_c_contiguous() else
                self.strides, "data": (ptr, False), "typestr": self.dtype.str,
                "descr": self.dtype.descr, "version": 3, "stream": None}

    def __dlpack__(self, stream=None):
        """A DLPack capsule viewing this array (no copy; dv_array_to_dlpack). On the host
        backend the tensor is kDLCPU, so np.from_dlpack(d) reads device memory in place.
        stream: None (the consumer uses the legacy default stream on CUDA; elsewhere the
        call waits for this array's stream), -1 (no ordering), or a native stream handle."""
        from . import _dlpack
        backend = current_context().backend
        if stream is None:
            consumer = ctypes.c_void_p(1) if (backend == "cuda" and
                                              self.__dlpack_device__()[0] != 1) else None
        elif stream == -1:
            consumer = ctypes.c_void_p(-1 & ((1 << 64) - 1))
        else:
            consumer = ctypes.c_void_p(int(stream))
        return _dlpack.to_capsule(self.handle, _stream_handle(self.stream), consumer)

    def __dlpack_device__(self):
        """(device type, device id) as DLPack numbers them: host backend and host memory
        kDLCPU (1); CUDA device kDLCUDA (2), managed kDLCUDAManaged (13), pinned/mapped
        kDLCUDAHost (3); OpenCL device memory kDLOpenCL (4)."""
        ctx = current_context()
        kind = lib.dv_array_memory(self.handle)
        if ctx.backend == "cuda":
            return ({MEM_DEVICE: 2, MEM_MANAGED: 13, MEM_PINNED: 3, MEM_MAPPED: 3}.get(kind, 1),
                    ctx.device_id if kind in (MEM_DEVICE, MEM_MANAGED) else 0)
        if ctx.backend == "opencl" and kind == MEM_DEVICE:
            return (4, 0)
        return (1, 0)

    @property
    def device_ctypes_pointer(self):
        """The native buffer (CUdeviceptr, cl_mem or host pointer) plus the byte offset of
        element 0, as a c_void_p (CUDA, host simulator), or the cl_mem (OpenCL)."""
        buf, off = _P(), ctypes.c_size_t()
        check(lib.dv_array_native(self.handle, ctypes.byref(buf), ctypes.byref(off)))
        if current_context().backend == "opencl":
            return buf
        return _P((buf.value or 0) + off.value if buf.value else None)


class DeviceRecord(DeviceNDArray):
    """A single record in device memory (Numba's DeviceRecord): r['x'] reads a field,
    r['x'] = v writes it."""

    __slots__ = ()

    def __init__(self, dtype, stream=0):
        dtype = np.dtype(dtype)
        out = _P()
        check(lib.dv_device_record(_context._handle(), _dv_dtype(dtype),
                                   _stream_handle(stream), ctypes.byref(out)), "DeviceRecord")
        self._init(out.value, dtype, None, stream)

    def __getitem__(self, name):
        if not isinstance(name, str):
            raise KeyError("DeviceRecord fields are named by strings")
        fdt = self.dtype.fields[name][0] if name in self.dtype.fields else None
        if fdt is None:
            # let the library name the error
            out = _P()
            check(lib.dv_array_field(self.handle, name.encode(), ctypes.byref(out)), "field")
        if fdt.names is not None or fdt.subdtype is not None:
            return self.field(name)
        buf = np.empty((), fdt)
        check(lib.dv_record_get(self.handle, name.encode(), buf.__array_interface__["data"][0],
                                fdt.itemsize, _stream_handle(self.stream)), "record get")
        return buf[()]

    def __setitem__(self, name, value):
        fdt = self.dtype.fields[name][0] if name in self.dtype.fields else None
        if fdt is None or fdt.names is not None or fdt.subdtype is not None:
            return DeviceNDArray.__setitem__(self, name, value)
        buf = np.asarray(value, fdt)
        check(lib.dv_record_set(self.handle, name.encode(), buf.__array_interface__["data"][0],
                                fdt.itemsize, _stream_handle(self.stream)), "record set")

    def copy_to_host(self, ary=None, stream=0):
        if ary is None:
            ary = np.empty((), self.dtype)
        DeviceNDArray.copy_to_host(self, ary, stream)
        return ary

    def __repr__(self):
        return "<devarray.DeviceRecord dtype=%s>" % (self.dtype,)


_I64_MIN = -(1 << 63)
_ZERO = (_I64 * 1)(0)  # the index of a 0-d array (no entries are read)


def _index(v):
    try:
        return int(v.__index__())
    except AttributeError:
        raise IndexError("only integers, slices and ellipsis are valid device indices, not %r"
                         % (v,)) from None


def _order(order):
    if not isinstance(order, str) or len(order) != 1:
        raise ValueError("order must be 'C', 'F' or 'A', not %r" % (order,))
    return order.encode()


def _ctx_of(a):
    return lib.dv_array_context(a.handle)


# ---- creation and transfers -------------------------------------------------

# ---- the per-call paths of device_array and to_device (issue 23) ----------------------
#
# A ctypes call costs ~1,600 instructions bare and ~1,000 more per argument converted, and
# building ctypes objects (an int64 array for the shape, a c_void_p and its byref for the
# result) costs as much again: these paths make one call each, pass the shape as packed
# bytes, reuse a per-thread result slot, and cache dtypes by the object the caller passed.

_new_device = ctypes.CDLL(library_path).dv_device_array  # the same function, leaner argtypes
_new_device.argtypes = [_P, ctypes.c_int, _P, _P, _P, ctypes.c_char, _P, _P]
_new_device.restype = ctypes.c_int
_to_device_fn = ctypes.CDLL(library_path).dv_to_device
_to_device_fn.argtypes = [_P, _P, _P, ctypes.c_int, _P, _P]
_to_device_fn.restype = ctypes.c_int
_PACK = [struct.Struct("=%dq" % n).pack for n in range(33)]
_dtype_by_arg = {}  # what the caller passed as dtype -> (np.dtype, C dtype)


class _Out(threading.local):
    """A result slot per thread: a c_void_p and its byref, made once."""

    def __init__(self):
        self.p = _P()
        self.ref = ctypes.byref(self.p)


_out = _Out()


def _dtype_pair(dtype):
    try:
        ent = _dtype_by_arg.get(dtype)
    except TypeError:  # unhashable
        ent = None
    if ent is None:
        dt = np.dtype(dtype)
        ent = (dt, _dv_dtype(dt))
        try:
            if len(_dtype_by_arg) < 256:
                _dtype_by_arg[dtype] = ent
        except TypeError:
            pass
    return ent


def _pack_shape(shape):
    if len(shape) >= len(_PACK):
        return None  # more dimensions than an array has: the library refuses the count
    try:
        return _PACK[len(shape)](*shape)
    except struct.error:
        raise OverflowError("devarray: shape or strides %r do not fit int64" % (shape,)) from None


def device_array(shape, dtype=np.float64, strides=None, order="C", stream=0):
    """A new uninitialised device array (Numba's device_array)."""
    if strides is not None or order != "C" or stream:
        h, dt = _alloc(lib.dv_device_array, shape, dtype, strides, order,
                       _stream_handle(stream), name="device_array")
        return DeviceNDArray._from_handle(h, dt, stream=stream)
    shape = (shape,) if type(shape) is int else _shape_tuple(shape)
    dt, cdt = _dtype_pair(dtype)
    out = _out
    c = _context._ctx
    st = _new_device((c if c is not None else current_context()).handle, len(shape),
                     _pack_shape(shape), cdt, None, b"C", None, out.ref)
    if st:
        check(st, "device_array")
    self = _new_array(DeviceNDArray)
    self._h = out.p.value
    self.shape = shape
    self._strides = None
    self.dtype = dt
    self._base = None
    self.stream = 0
    return self


_new_array = object.__new__


def device_array_like(ary, stream=0):
    """A new device array shaped like `ary` (NumPy or device): contiguous layouts are kept,
    others get dense strides in the source's stride order."""
    out = _P()
    if isinstance(ary, DeviceNDArray):
        check(lib.dv_device_array_like(ary.handle, _stream_handle(stream), ctypes.byref(out)),
              "device_array_like")
        return DeviceNDArray._from_handle(out.value, ary.dtype, stream=stream)
    h, arr = _host_array(ary)
    try:
        check(lib.dv_device_array_like(h, _stream_handle(stream), ctypes.byref(out)),
              "device_array_like")
    finally:
        lib.dv_array_release(h)
    return DeviceNDArray._from_handle(out.value, arr.dtype, stream=stream)


def to_device(obj, stream=0, copy=True, to=None):
    """Copy `obj` (a NumPy array or anything np.asarray takes; a NumPy record gives a
    DeviceRecord) to the device (Numba's to_device). A device array of the current context
    is returned as it is. With `to`, copies into it and returns it. With copy=False the new
    array is allocated but not filled."""
    if isinstance(obj, DeviceNDArray):
        if to is None:
            return obj
        to.copy_to_device(obj, stream=stream)
        return to
    if to is not None:
        to.copy_to_device(obj, stream=stream)
        return to
    if isinstance(obj, np.void):
        obj = np.array(obj, dtype=obj.dtype)
    h, arr = _host_array(obj)
    out = _out
    c = _context._ctx
    try:
        st = _to_device_fn((c if c is not None else current_context()).handle, h,
                           _stream_handle(stream) if stream else None, 1 if copy else 0, None,
                           out.ref)
    finally:
        _release_fn(h)
    if st:
        check(st, "to_device")
    if stream and copy:
        stream._hold(arr)
    if arr.flags.c_contiguous and arr.ndim and arr.size:
        # dv_to_device gives a C-contiguous source this very layout: no need to ask
        self = _new_array(DeviceNDArray)
        self._h = out.p.value
        self.dtype = arr.dtype
        self._base = None
        self.stream = stream
        self.shape = arr.shape
        self._strides = None  # the library's dense C strides, asked for when read
        return self
    return DeviceNDArray._from_handle(out.p.value, arr.dtype, stream=stream)


def from_dlpack(obj):
    """A device array viewing a DLPack producer's memory (an object with __dlpack__, or a
    'dltensor' capsule), no copy: on the host backend a CPU tensor (a NumPy array) becomes a
    device array kernels use in place. Keep the producer's data unchanged while in use."""
    from . import _dlpack
    cap = obj.__dlpack__() if hasattr(obj, "__dlpack__") else obj
    h = _dlpack.from_capsule(_context._handle(), cap)
    return DeviceNDArray._from_handle(h, None)


def is_cuda_array(obj):
    return hasattr(obj, "__cuda_array_interface__")


def is_device_array(obj):
    return isinstance(obj, DeviceNDArray)
