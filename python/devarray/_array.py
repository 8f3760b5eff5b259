"""Device arrays: DeviceNDArray and DeviceRecord (views, indexing, transfers of one array),
and their IPC handles (IpcArrayHandle)."""

import ctypes
import numbers

import numpy as np

from . import _abi, _context, _current, _dlpack, _ipc
from ._context import current_context
from ._stream import _stream_handle, Stream, _release_later
from ._convert import _P, _I64, _dv_dtype, _np_dtype, _i64
from ._hostmem import _host_array, _alloc
from ._lib import lib, check, dv_index, error, DevarrayError, NotSupportedError, speedups
from ._memory import _array_over, _array_pointer, _byte, _gpu_data
from ._words import _as_numpy, _incompatible, _order_words, _probe

MEM_DEVICE, MEM_HOST, MEM_PINNED, MEM_MAPPED, MEM_MANAGED = (
    _abi.DV_MEM_DEVICE, _abi.DV_MEM_HOST, _abi.DV_MEM_PINNED, _abi.DV_MEM_MAPPED, _abi.DV_MEM_MANAGED)

# ---- device arrays --------------------------------------------------------

def _hold(stream, obj):
    if stream and isinstance(stream, Stream):
        stream._hold(obj)


class _PyArrayBase:
    """DeviceNDArray's base when devarray._speedups is not loaded: the slots and the release
    of the handle that _speedups._ArrayBase has in C (the same names, the same behaviour)."""

    # strides are read from the library on first use (_strides None until then): a new array
    # costs no call for them (issue 23)
    __slots__ = ("_h", "shape", "_strides", "dtype", "_base", "stream", "__weakref__")

    def __del__(self, _release=lib.dv_array_release, _release_later=_release_later):
        # the release function is bound at definition, so that it is still there while the
        # interpreter tears the module down
        try:
            h = self._h
        except AttributeError:  # never set (an instance from __new__ alone): nothing held
            return
        if h:
            self._h = None
            if not _release_later(_release, h):
                _release(h)


# The compiled base (python/devarray/_speedups.c) when loaded, else the pure-Python one.
_ArrayBase = speedups._ArrayBase if speedups is not None else _PyArrayBase
_new = _ArrayBase.__new__  # an instance with no slot set (object.__new__ refuses a C base)


class DeviceNDArray(_ArrayBase):
    """An array in device memory (Numba's DeviceNDArray).

    Views (slices, reshape, ravel, split, T, view) share memory with their base; the memory
    is freed through the deferred-deallocation queue when the last of them goes.
    """

    __slots__ = ()  # the base's: _h, shape, _strides, dtype, _base, stream, __weakref__

    def __init__(self, shape, strides, dtype, stream=0, gpu_data=None):
        """Allocate (Numba's constructor): use device_array() instead. With `gpu_data` (a
        MemoryPointer) the array is laid over that memory instead, keeping it alive."""
        if gpu_data is not None:
            h, dt = _array_over(gpu_data, shape, strides, dtype)
            self._init(h, dt, gpu_data, stream)
            return
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
        self = _new(cls)
        self._init(h, dtype, keep, stream)
        return self

    def _release(self):
        h, self._h = self._h, None
        if h and lib is not None:
            lib.dv_array_release(h)

    def __reduce_ex__(self, protocol):
        # device memory does not pickle: the handle would be freed twice (copy_to_host first)
        raise TypeError("cannot pickle %r object" % type(self).__name__)

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
    # copy_to_host: compiled in _speedups._ArrayBase where the module is loaded (it calls
    # _copy_to_host_py for what it does not do itself: a stream, a registered host array, an
    # array that is not a plain aligned ndarray, any error); else this method (issue 39).
    def _copy_to_host_py(self, ary=None, stream=0):
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
            # read-only memory (a mapping, a bytes object) would crash or be changed: NumPy
            # refuses to write it, in its words (where=False: it would write nothing anyway)
            raise _as_numpy(ValueError("copy_to_host: ary is read-only"),
                            lambda: np.copyto(ary, 0, where=False))
        h, arr = _host_array(ary)
        if arr is not ary:
            lib.dv_array_release(h)
            raise ValueError("copy_to_host: ary must be aligned and in native byte order")
        try:
            st = lib.dv_copy_to_host(self.handle, h, _stream_handle(stream), None)
        finally:
            lib.dv_array_release(h)
        if st:
            raise _incompatible(error(st, "copy_to_host"), self, ary)
        _hold(stream, ary)
        return ary

    if speedups is None:
        copy_to_host = _copy_to_host_py

    def copy_to_device(self, ary, stream=0):
        """Copy `ary` (NumPy or device array, same dtype and shape) into this array."""
        if isinstance(ary, DeviceNDArray):
            st = lib.dv_copy_to_device(self.handle, ary.handle, _stream_handle(stream))
            if st:
                raise _incompatible(error(st, "copy_to_device"), self, ary)
            return
        h, arr = _host_array(ary)
        try:
            st = lib.dv_copy_to_device(self.handle, h, _stream_handle(stream))
        finally:
            lib.dv_array_release(h)
        if st:
            raise _incompatible(error(st, "copy_to_device"), self, arr)
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
        try:
            return self._slice_c(key)
        except (DevarrayError, IndexError) as e:
            err = e
        raise _as_numpy(err, lambda: _probe(self.shape)[key])

    def _slice_c(self, key):
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
        """``d[key] = value`` on the array's own stream (bound with bind(); 0: synchronous)."""
        self._setitem(key, value, self.stream)

    def setitem(self, key, value, stream=0):
        """``self[key] = value`` queued on `stream` (Numba's asynchronous item assignment;
        0: the array's own stream, as __setitem__). The host copy of `value` is held by the
        stream until its next synchronize()."""
        self._setitem(key, value, stream or self.stream)

    def _setitem(self, key, value, stream):
        # Numba's: without a stream the copy goes on the context's default stream, which is
        # then synchronized (Stream.synchronize), so the assignment is complete on return
        sync = _sync_stream(stream, self)
        if isinstance(key, str):
            view = self.field(key)
        else:
            h, _ = self._slice(key)
            view = self._wrap(h)
        try:
            view._assign(value, sync or stream)
        finally:
            view._release()
        if sync:
            _finish(sync)

    def _assign(self, value, stream):
        """Copy `value` (NumPy's assignment rules: cast, broadcast) into this whole array."""
        s = _stream_handle(stream)
        if isinstance(value, DeviceNDArray):
            if value.shape != self.shape:
                value = value._broadcast_to(self.shape)
            check(lib.dv_array_copy(self.handle, value.handle, s), "setitem")
            _hold(stream, value)
            return
        if self.ndim == 0 and self.dtype.names is None:
            buf = np.empty((), self.dtype)
            buf[()] = value  # NumPy's conversion of an element, and its errors
            check(lib.dv_array_set_item(self.handle, _ZERO, buf.__array_interface__["data"][0],
                                        self.dtype.itemsize, s), "setitem")
            _hold(stream, buf)
            return
        try:
            src = np.asarray(value, dtype=self.dtype)
            extra = src.ndim - self.ndim
            if extra > 0 and not any(n != 1 for n in src.shape[:extra]):
                src = src.reshape(src.shape[extra:])  # NumPy drops leading 1s of a value
            src = np.broadcast_to(src, self.shape)
        except (ValueError, TypeError) as e:
            err = e
        else:
            err = None
        if err is not None:
            raise _as_numpy(err, lambda: _probe(self.shape, self.dtype, True).__setitem__(
                Ellipsis, value))
        h, arr = _host_array(src)
        try:
            check(lib.dv_array_copy(self.handle, h, s), "setitem")
        finally:
            lib.dv_array_release(h)
        _hold(stream, arr)

    def _broadcast_to(self, shape):
        """A zero-stride view of this array broadcast to `shape` (NumPy's words if not)."""
        probe = np.lib.stride_tricks.as_strided(np.empty(1, np.int8), self.shape,
                                                self.strides, writeable=False)
        extra = self.ndim - len(shape)
        if extra > 0 and not any(n != 1 for n in self.shape[:extra]):
            # NumPy drops the leading 1s of an assigned value
            return self._restride(self.shape[extra:], self.strides[extra:],
                                  self.dtype)._broadcast_to(shape)
        try:
            probe = np.broadcast_to(probe, shape)
        except ValueError as e:
            err = e
        else:
            return self._restride(shape, probe.strides, self.dtype)
        raise _as_numpy(err, lambda: _probe(shape, np.int8, True).__setitem__(
            Ellipsis, _probe(self.shape)))

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
            raise TypeError("unknown keyword arguments %s" % kws.keys())  # Numba's words
        if len(newshape) == 1 and not isinstance(newshape[0], numbers.Integral):
            newshape = tuple(newshape[0])
        newshape = tuple(int(s) for s in newshape)
        out = _P()
        st = lib.dv_array_reshape(self.handle, len(newshape), _i64(newshape), _order(order), 0,
                                  _stream_handle(stream), ctypes.byref(out))
        if st:
            # an order is refused in Numba's words (its API), a size in NumPy's (its rule)
            err = error(st, "reshape")
            if err.name == "DV_ERR_BAD_ORDER":
                raise _order_words(err)
            raise _as_numpy(err, lambda: _probe(self.shape).reshape(newshape))
        return self._wrap(out.value)

    def ravel(self, order="C", stream=0):
        """A 1-D view when the layout allows it, else a copy on the device."""
        out = _P()
        st = lib.dv_array_ravel(self.handle, _order(order), 0, _stream_handle(stream),
                                ctypes.byref(out))
        if st:
            raise _order_words(error(st, "ravel"))
        return self._wrap(out.value)

    def split(self, section, stream=0):
        """Views of `section` elements each (the last shorter); 1-D unit-stride arrays only."""
        n = ctypes.c_size_t()
        st = lib.dv_array_split(self.handle, int(section), None, 0, ctypes.byref(n))
        if st:
            err = error(st, "split")
            if self.ndim != 1:
                err.args = ("only support 1d array",)  # Numba's words, as below
            elif self.strides[0] != self.dtype.itemsize:
                err.args = ("only support unit stride",)
            raise err
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
        v = probe.view(dtype)  # NumPy's rule, and NumPy's error when it refuses
        return self._restride(v.shape, v.strides, dtype)

    def transpose(self, axes=None, *more):
        """A view with the axes permuted (NumPy's transpose: ``transpose()``,
        ``transpose((1, 0))`` or ``transpose(1, 0)``; Numba copies, see docs/semantics.md).
        Axes are checked as NumPy checks them, with NumPy's errors: numpy.AxisError for an
        axis out of range, ValueError for a repeated axis or a wrong count. The identity
        permutation returns this array itself, as Numba does."""
        probe = np.lib.stride_tricks.as_strided(np.empty(1, self.dtype), self.shape,
                                                self.strides, writeable=False)
        t = probe.transpose(axes, *more) if more else probe.transpose(axes)
        if t.shape == self.shape and t.strides == self.strides:
            return self
        return self._restride(t.shape, t.strides, self.dtype)

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
                "descr": self.dtype.descr, "version": 3, "stream": _cai_stream(self.stream)}

    def __dlpack__(self, stream=None, *, max_version=None, dl_device=None, copy=None):
        """A DLPack capsule viewing this array (no copy; the Python array API's protocol). On
        the host backend the tensor is kDLCPU, so np.from_dlpack(d) reads device memory in
        place. max_version: a consumer's (major, minor); from (1, 0) on the capsule is
        "dltensor_versioned" (DLPack 1.x, never marked read-only), else "dltensor" (0.x).
        stream: None (the consumer uses the legacy default stream on CUDA; elsewhere the
        call waits for this array's stream), -1 (no ordering), or a native stream handle.
        dl_device: None or __dlpack_device__() exports in place; (1, 0) (kDLCPU) for an
        array elsewhere exports a host copy unless copy is False; any other BufferError.
        copy: True always exports a copy (on the array's device, or the host copy), False
        never (BufferError where one is needed), None when needed. A 1.x copy has
        DLPACK_FLAG_BITMASK_IS_COPIED set."""
        backend = current_context().backend
        own = self.__dlpack_device__()
        if stream is None:
            consumer = ctypes.c_void_p(1) if (backend == "cuda" and own[0] != 1) else None
        elif stream == -1:
            consumer = ctypes.c_void_p(-1 & ((1 << 64) - 1))
        else:
            consumer = ctypes.c_void_p(int(stream))
        return _dlpack.export(self.handle, _stream_handle(self.stream), consumer, own,
                              max_version, dl_device, copy)

    def __dlpack_device__(self):
        """(device type, device id) as DLPack numbers them: host backend and host memory
        kDLCPU (1); CUDA device kDLCUDA (2), managed kDLCUDAManaged (13), pinned/mapped
        kDLCUDAHost (3); HIP device and managed kDLROCM (10), pinned/mapped kDLROCMHost (11);
        OpenCL device memory kDLOpenCL (4)."""
        ctx = current_context()
        kind = lib.dv_array_memory(self.handle)
        if ctx.backend == "cuda":
            return ({MEM_DEVICE: 2, MEM_MANAGED: 13, MEM_PINNED: 3, MEM_MAPPED: 3}.get(kind, 1),
                    ctx.device_id if kind in (MEM_DEVICE, MEM_MANAGED) else 0)
        if ctx.backend == "hip":
            return ({MEM_DEVICE: 10, MEM_MANAGED: 10, MEM_PINNED: 11, MEM_MAPPED: 11}.get(kind, 1),
                    ctx.device_id if kind in (MEM_DEVICE, MEM_MANAGED) else 0)
        if ctx.backend == "opencl" and kind == MEM_DEVICE:
            return (4, 0)
        return (1, 0)

    # -- pointer-level (issue 25)
    __cuda_memory__ = True
    __cuda_ndarray__ = True

    def get_ipc_handle(self):
        """An IpcArrayHandle another process opens to use this array's memory (Numba's):
        the EMM plug-in's handle when one serves the context, else the library's
        (host simulator with host_ipc=on, CUDA; OpenCL: NotSupportedError)."""
        return _get_ipc_handle(self)

    @property
    def gpu_data(self):
        """A MemoryPointer over the bytes this array's elements span (Numba's gpu_data),
        sharing this array's memory and keeping the array alive; a new object each time."""
        return _gpu_data(self)

    @property
    def device_ctypes_pointer(self):
        """The device pointer of the lowest byte of the elements (gpu_data's), a
        ctypes.c_size_t; 0 for an empty array. CUDA: an address; host simulator: a host
        address; OpenCL: the cl_mem's value plus the offset, not an address (docs/semantics.md)."""
        return _array_pointer(self)

    def memset(self, value, stream=0):
        """Set every byte of every element to `value` (0..255; dv_array_memset), on `stream`
        (asynchronous) or synchronously. No Numba method has this name."""
        check(lib.dv_array_memset(self.handle, _byte(value), _stream_handle(stream)), "memset")

    @property
    def _numba_type_(self):
        """Numba's type for this array (numba.types.Array(dtype, ndim, layout), layout "C",
        "F" or "A" as Numba chooses it; a Record for a DeviceRecord). Numba is imported here
        only: without it, AttributeError."""
        try:
            # here, not at the top: Numba is optional (and slow to import)
            from numba.core import types  # optional: needs Numba
            from numba.np import numpy_support  # optional: needs Numba
        except ImportError as e:
            raise AttributeError("_numba_type_ needs Numba, which cannot be imported (%s)"
                                 % e) from None
        if isinstance(self, DeviceRecord):
            return numpy_support.from_dtype(self.dtype)
        broadcast = 0 in self.strides
        if self.is_c_contiguous() and not broadcast:
            layout = "C"
        elif self.is_f_contiguous() and not broadcast:
            layout = "F"
        else:
            layout = "A"
        return types.Array(numpy_support.from_dtype(self.dtype), self.ndim, layout)


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

    def _setitem(self, name, value, stream):
        fdt = self.dtype.fields[name][0] if name in self.dtype.fields else None
        if fdt is None or fdt.names is not None or fdt.subdtype is not None:
            return DeviceNDArray._setitem(self, name, value, stream)
        buf = np.empty((), fdt)
        buf[()] = value  # NumPy's conversion, and its errors
        sync = _sync_stream(stream, self)
        check(lib.dv_record_set(self.handle, name.encode(), buf.__array_interface__["data"][0],
                                fdt.itemsize, _stream_handle(sync or stream)), "record set")
        _hold(sync or stream, buf)
        if sync:
            _finish(sync)

    def copy_to_host(self, ary=None, stream=0):
        """Copy the record to `ary` (a 0-d NumPy array, or a NumPy record (np.void), whose
        memory is written as Numba does) or to a new 0-d array; returns it."""
        if ary is None:
            ary = np.empty((), self.dtype)
        if isinstance(ary, np.void):
            if ary.dtype != self.dtype:
                raise TypeError("incompatible dtype: %s vs. %s" % (self.dtype, ary.dtype))
            # the record's own bytes (a view's are its array's): Numba writes them in place
            addr = ary.__array_interface__["data"][0]
            view = np.frombuffer((ctypes.c_char * ary.dtype.itemsize).from_address(addr),
                                 ary.dtype).reshape(())
            DeviceNDArray.copy_to_host(self, view, stream)
            _hold(stream, ary)
            return ary
        DeviceNDArray.copy_to_host(self, ary, stream)
        return ary

    def __repr__(self):
        return "<devarray.DeviceRecord dtype=%s>" % (self.dtype,)


# ---- IPC (Numba's get_ipc_handle / IpcArrayHandle): the library's half is _ipc's

class IpcArrayHandle:
    """A device array's IPC handle (Numba's IpcArrayHandle): ``open()`` gives a device array
    over the exported memory in another process, ``close()`` unmaps it; also a context
    manager (open on entry, close on exit). ``_ipc_handle`` is the plugin's handle, or the
    library's handle bytes."""

    def __init__(self, ipc_handle, array_desc):
        self._ipc_handle = ipc_handle
        self._array_desc = array_desc
        self._opened = None

    def __getstate__(self):
        return {"_ipc_handle": self._ipc_handle, "_array_desc": self._array_desc}

    def __setstate__(self, state):
        self.__init__(state["_ipc_handle"], state["_array_desc"])

    def open(self):
        """Map the memory in this process: a DeviceNDArray of the exported layout."""
        if not isinstance(self._ipc_handle, bytes):
            raise NotSupportedError(300, "the memory manager plug-in's handle opens memory, "
                                    "not arrays, in devarray", "IpcArrayHandle.open")
        if self._opened is not None:
            raise ValueError("IpcArrayHandle.open: the handle is already open")
        shape, strides, dtype = (self._array_desc[k] for k in ("shape", "strides", "dtype"))
        dtype = np.dtype(dtype)
        arr = DeviceNDArray._from_handle(_ipc.open_array(self._ipc_handle, shape, strides, dtype),
                                         dtype)
        self._opened = arr
        return arr

    def close(self):
        """Unmap what open() mapped (the array it gave must not be used afterwards)."""
        arr, self._opened = self._opened, None
        if arr is None:
            raise ValueError("IpcArrayHandle.close: the handle is not open")
        h, arr._h = arr._h, None
        _ipc.close(h)

    def __enter__(self):
        return self.open()

    def __exit__(self, *exc):
        self.close()
        return False


def _get_ipc_handle(arr):
    """The IpcArrayHandle of device array `arr` (DeviceNDArray.get_ipc_handle)."""
    desc = {"shape": arr.shape, "strides": arr.strides, "dtype": arr.dtype}
    ctx = current_context()
    if ctx.has_plugin:
        return IpcArrayHandle(ctx.get_ipc_handle(arr.gpu_data), desc)
    return IpcArrayHandle(_ipc.export(arr.handle), desc)


_stream_native = lib.dv_stream_native


def _cai_stream(stream):
    """The ``stream`` entry of __cuda_array_interface__ (version 3) for an array whose
    default stream is `stream`: None for 0 (its work is synchronous: nothing to wait for),
    1 for the legacy default stream, 2 for the per-thread default stream, else the native
    stream's handle (CUstream) as an int (a NULL native handle, the legacy NULL stream, is
    exported as 1: version 3 disallows 0)."""
    if not stream:
        return None
    h = stream.handle
    ch = stream._ctx.handle
    if h == lib.dv_context_legacy_stream(ch):
        return 1
    if h == lib.dv_context_per_thread_stream(ch):
        return 2
    nat = _P()
    check(_stream_native(h, ctypes.byref(nat)), "__cuda_array_interface__")
    return nat.value or 1


def _sync_stream(stream, arr):
    """None when `stream` is a stream (the assignment is queued on it); for 0, the default
    stream of array `arr`'s context, which the caller synchronizes after queueing (Numba's
    synchronous item assignment)."""
    if stream:
        return None
    ch = lib.dv_array_context(arr.handle)
    c = _current.ctx
    if c is None or c.handle != ch:
        c = next((x for x in list(_current.live) if x.handle == ch), None)
    return Stream(lib.dv_context_default_stream(ch), False, c)


def _finish(stream):
    """Synchronize the default stream an item assignment went on (Stream.synchronize, which
    drops the host copies it held). Should that method not have waited (replaced, as
    Numba's test mocks it), the stream is waited for here, before those copies go."""
    stream.synchronize()
    if stream._keep:
        check(lib.dv_stream_synchronize(stream.handle), "setitem")
        stream._keep = []


def _ctx_of_handle(h):
    return lib.dv_array_context(h)


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
        raise ValueError("order not C|F|A")  # Numba's words (its reshape and ravel)
    return order.encode()


def _ctx_of(a):
    return lib.dv_array_context(a.handle)
