"""Creating device arrays: device_array, device_array_like, to_device, from_dlpack."""

import ctypes

import numpy as np

from . import _context
from ._array import DeviceNDArray
from ._context import current_context
from ._stream import _stream_handle
from ._convert import _P, _dtype_pair, _out, _pack_shape, _shape_tuple
from ._hostmem import _alloc, _host_array, _release_fn
from ._lib import lib, check, error, library_path
from ._words import _shape_words

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
        raise _shape_words(error(st, "device_array"), shape)
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
