"""Creating device arrays: device_array, device_array_like, to_device, from_dlpack."""

import ctypes
from collections.abc import Mapping

import numpy as np

from . import _context, _current, _dlpack, _hostmem, _stream
from ._array import DeviceNDArray, DeviceRecord, _new
from ._context import current_context
from ._driver import is_device_memory
from ._mapped import MappedNDArray
from ._memory import _decode
from ._stream import _stream_handle
from ._convert import _P, _dtype_pair, _dv_dtype, _i64, _out, _pack_shape, _shape_tuple
from ._hostmem import _alloc, _host_array, _release_fn
from ._lib import lib, check, error, lean, speedups, ArgumentError, NotSupportedError
from ._words import _shape_words

# ---- creation and transfers -------------------------------------------------

# ---- the per-call paths of device_array and to_device (issue 23) ----------------------
#
# A ctypes call costs ~1,600 instructions bare and ~1,000 more per argument converted, and
# building ctypes objects (an int64 array for the shape, a c_void_p and its byref for the
# result) costs as much again: these paths make one call each, pass the shape as packed
# bytes, reuse a per-thread result slot, and cache dtypes by the object the caller passed.

_new_device = lean("dv_device_array")  # the same function, leaner argtypes (_abi.LEAN)
_to_device_fn = lean("dv_to_device")

# With devarray._speedups loaded (see _lib), the default-argument path of device_array and
# the plain NumPy-array path of to_device run compiled: one call each, no ctypes; they raise
# exactly what the ctypes paths below raise (they call the same Python error builders).
if speedups is not None:
    speedups.init_binding(error, _shape_words, _shape_tuple, _dtype_pair, _dv_dtype, _current,
                          current_context, _stream._deferred, lib.dv_array_release)
    speedups.init_host(np.ndarray, np.empty, _hostmem._registry)
    _fast_device_array = speedups.device_array
    _fast_to_device = speedups.to_device
else:
    _fast_device_array = _fast_to_device = None
_ndarray = np.ndarray
_registry = _hostmem._registry


def device_array(shape, dtype=np.float64, strides=None, order="C", stream=0):
    """A new uninitialised device array (Numba's device_array)."""
    if strides is not None or order != "C" or stream:
        h, dt = _alloc(lib.dv_device_array, shape, dtype, strides, order,
                       _stream_handle(stream), name="device_array")
        return DeviceNDArray._from_handle(h, dt, stream=stream)
    if _fast_device_array is not None:
        return _fast_device_array(DeviceNDArray, shape, dtype)
    return _device_array_ctypes(shape, dtype)


def _device_array_ctypes(shape, dtype):
    """device_array's default-argument path through ctypes (without _speedups)."""
    shape = (shape,) if type(shape) is int else _shape_tuple(shape)
    dt, cdt = _dtype_pair(dtype)
    out = _out
    c = _current.ctx
    st = _new_device((c if c is not None else current_context()).handle, len(shape),
                     _pack_shape(shape), cdt, None, b"C", None, out.ref)
    if st:
        raise _shape_words(error(st, "device_array"), shape)
    self = _new(DeviceNDArray)
    self._h = out.p.value
    self.shape = shape
    self._strides = None
    self.dtype = dt
    self._base = None
    self.stream = 0
    return self


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
    DeviceRecord) to the device (Numba's to_device). A device array of the current context,
    or a MappedNDArray (device memory too, as in Numba), is returned as it is. With `to`,
    copies into it and returns it. With copy=False the new array is allocated but not
    filled."""
    if isinstance(obj, DeviceNDArray):
        if to is None:
            return obj
        to.copy_to_device(obj, stream=stream)
        return to
    if to is not None:
        to.copy_to_device(obj, stream=stream)
        return to
    if _fast_to_device is not None and type(obj) is _ndarray and copy and not stream \
            and not _registry:
        d = _fast_to_device(DeviceNDArray, obj, stream)
        if d is not None:
            return d
    return _to_device_ctypes(obj, stream, copy)


def _to_device_ctypes(obj, stream, copy):
    """to_device of a host object through ctypes (without _speedups, or what it leaves)."""
    if isinstance(obj, MappedNDArray):
        return obj  # device memory already (Numba's auto_device returns it as it is)
    if isinstance(obj, np.void):
        obj = np.array(obj, dtype=obj.dtype)
    h, arr = _host_array(obj)
    out = _out
    c = _current.ctx
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
        self = _new(DeviceNDArray)
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
    'dltensor' / 'dltensor_versioned' capsule), no copy: on the host backend a CPU tensor (a
    NumPy array) becomes a device array kernels use in place. Keep the producer's data
    unchanged while in use. DLPack 1.x is asked for first; a read-only tensor is refused
    (BufferError: devarray's arrays are writable)."""
    cap = _dlpack.capsule_of(obj)
    h = _dlpack.from_capsule(_context._handle(), cap)
    return DeviceNDArray._from_handle(h, None)


def is_cuda_array(obj):
    """Numba's is_cuda_array: whether `obj` has a ``__cuda_array_interface__`` attribute
    (the interface itself is not checked). devarray's own arrays have one on the cuda backend
    only (docs/semantics.md, "Python binding")."""
    return hasattr(obj, "__cuda_array_interface__")


def as_cuda_array(obj, sync=True):
    """A DeviceNDArray viewing the memory of `obj` (Numba's as_cuda_array), no copy; the new
    array keeps `obj` alive. `obj` is an object with ``__cuda_array_interface__`` (read with
    from_cuda_array_interface, `obj` as the owner), or one of devarray's own arrays
    (DeviceNDArray, MappedNDArray), on any backend. With `sync` the stream the interface
    exports (or the devarray array's own stream) is synchronized first. TypeError for any
    other object."""
    if isinstance(obj, (DeviceNDArray, MappedNDArray)):
        if sync and obj.stream:
            obj.stream.synchronize()
        if isinstance(obj, MappedNDArray):
            return obj._device()._with_stream(0)  # a new view, holding the mapped memory
        return obj._wrap(lib.dv_array_retain(obj.handle))._with_stream(0)
    if not is_cuda_array(obj):
        raise TypeError("*obj* doesn't implement the cuda array interface.")  # Numba's words
    return from_cuda_array_interface(obj.__cuda_array_interface__, owner=obj, sync=sync)


_check_native = lib.dv_context_check_native


def from_cuda_array_interface(desc, owner=None, sync=True):
    """A DeviceNDArray over the memory a ``__cuda_array_interface__`` dict describes (Numba's
    from_cuda_array_interface), no copy; the array keeps `owner` alive, which must keep the
    memory alive. Versions 0 to 3: ``shape``, ``typestr`` and ``data`` (pointer, read-only
    flag) are required (KeyError names a missing one), ``strides`` (None: C-contiguous),
    ``mask`` (not None: NotImplementedError, as Numba) and ``stream`` optional.

    ``stream``: None needs no synchronization; an int (1: the legacy default stream, 2: the
    per-thread default stream, any other: a stream handle; 0 and non-integers are refused
    with ValueError, as version 3 says) is synchronized when `sync` is true. devarray cannot
    wait on a foreign stream alone: it waits for the whole device (dv_context_synchronize,
    every stream of the context: the exported one among them), and the new array's own
    stream is 0 (synchronous operations), where Numba's is the foreign stream.

    The pointer must be device memory the backend can use: on the cuda backend a device
    pointer (the driver checks it); on the host simulator and OpenCL it must lie in a live
    device allocation of the current context (a pointer devarray gave, such as
    device_ctypes_pointer), else ArgumentError, with nothing made: other memory is never
    read. A read-only interface gives an array devarray does not stop writes to."""
    if not isinstance(desc, Mapping):
        raise TypeError("__cuda_array_interface__ must be a dict, not %s" % type(desc).__name__)
    version = desc.get("version", 0)
    if not isinstance(version, int) or not 0 <= version <= 3:
        raise ValueError("__cuda_array_interface__ version %r is not one devarray reads (0 to 3)"
                         % (version,))
    if version >= 1 and desc.get("mask") is not None:
        raise NotImplementedError("Masked arrays are not supported")  # Numba's words
    shape = desc["shape"]
    dtype = np.dtype(desc["typestr"])
    data = desc["data"]
    if not isinstance(shape, (tuple, list)) or not all(isinstance(n, int) and n >= 0
                                                       for n in shape):
        raise ValueError("__cuda_array_interface__: shape must be a tuple of non-negative "
                         "ints, not %r" % (shape,))
    shape = tuple(shape)
    strides = desc.get("strides")
    if strides is not None:
        if not isinstance(strides, (tuple, list)) or len(strides) != len(shape) or \
                not all(isinstance(t, int) for t in strides):
            raise ValueError("__cuda_array_interface__: strides must be None or a tuple of "
                             "%d ints, not %r" % (len(shape), strides))
        strides = tuple(strides)
    if not isinstance(data, (tuple, list)) or len(data) != 2 or not isinstance(data[0], int):
        raise ValueError("__cuda_array_interface__: data must be (pointer, read-only flag), "
                         "not %r" % (data,))
    stream = desc.get("stream") if version >= 3 else None
    if stream is not None and (not isinstance(stream, int) or isinstance(stream, bool)
                               or stream == 0):
        raise ValueError("__cuda_array_interface__: stream must be None or a non-zero int "
                         "(version 3), not %r" % (stream,))
    ctx = current_context()
    size = 1
    for n in shape:
        size *= n
    if size == 0:
        return device_array(shape, dtype)
    ptr = data[0]
    if strides is None:
        strides, t = [], dtype.itemsize
        for n in reversed(shape):
            strides.insert(0, t)
            t *= n
        strides = tuple(strides)
    lo = sum((n - 1) * t for n, t in zip(shape, strides) if t < 0)
    hi = sum((n - 1) * t for n, t in zip(shape, strides) if t > 0)
    buf, off = _decode(ptr) if ctx.backend == "opencl" else (ptr, 0)
    if not buf or off + lo < 0:
        raise ArgumentError(_INVALID_ARGUMENT, "the pointer %#x is not device memory" % ptr,
                            "from_cuda_array_interface")
    st = _check_native(ctx.handle, buf, off + lo, hi - lo + dtype.itemsize)
    if st and st != _NOT_SUPPORTED:  # (cuda: the driver checks the pointer on use)
        raise error(st, "from_cuda_array_interface (pointer %#x)" % ptr)
    if stream is not None and sync:
        ctx.synchronize()
    out = _P()
    check(lib.dv_device_array_wrap(ctx.handle, buf, off, off + hi + dtype.itemsize, len(shape),
                                   _i64(shape), _dv_dtype(dtype), _i64(strides), None, None,
                                   ctypes.byref(out)), "from_cuda_array_interface")
    return DeviceNDArray._from_handle(out.value, dtype, keep=owner)


_INVALID_ARGUMENT, _NOT_SUPPORTED = 100, 300  # DV_ERR_INVALID_ARGUMENT, DV_ERR_NOT_SUPPORTED


def is_device_array(obj):
    return isinstance(obj, DeviceNDArray)


# ---- Numba's devicearray module functions (numba.cuda.cudadrv.devicearray) ---------------

#: Numba's words for a host buffer it cannot copy as one region (sentry_contiguous).
errmsg_contiguous_buffer = ("Array contains non-contiguous buffer and cannot be transferred "
                            "as a single memory region. Please ensure contiguous buffer with "
                            "numpy .ascontiguousarray()")


def from_record_like(rec, stream=0, gpu_data=None):
    """A new uninitialised DeviceRecord of `rec`'s dtype (a NumPy record or a DeviceRecord).
    gpu_data (memory to place the record in) is not supported: NotSupportedError."""
    if gpu_data is not None:
        raise NotSupportedError(300, "gpu_data is not supported; devarray allocates the "
                                "record's memory itself", "from_record_like")
    return DeviceRecord(rec.dtype, stream=stream)


def array_core(ary):
    """`ary` without its broadcast dimensions (those of stride 0, indexed at 0): the part
    of a broadcast array that is stored. Empty and 0-d arrays are returned as they are."""
    if not ary.strides or not ary.size:
        return ary
    return ary[tuple(0 if s == 0 else slice(None) for s in ary.strides)]


def is_contiguous(ary):
    """True when `ary` is C-contiguous once its broadcast (stride 0) and length-1 dimensions
    are left out."""
    expect = ary.dtype.itemsize
    for n, s in zip(reversed(ary.shape), reversed(ary.strides)):
        if n > 1 and s != 0:
            if s != expect:
                return False
            expect *= n
    return True


def sentry_contiguous(ary):
    """Raise ValueError(errmsg_contiguous_buffer) unless `ary`'s stored core (array_core)
    is C- or F-contiguous."""
    core = array_core(ary)
    if not core.flags["C_CONTIGUOUS"] and not core.flags["F_CONTIGUOUS"]:
        raise ValueError(errmsg_contiguous_buffer)


def verify_cuda_ndarray_interface(obj):
    """Check that `obj` is a device array (its ``__cuda_ndarray__`` is true; else ValueError)
    with a tuple shape and strides, a NumPy dtype and an int size (else AttributeError)."""
    if not getattr(obj, "__cuda_ndarray__", False):
        raise ValueError("require an cuda ndarray object")
    for attr, typ in (("shape", tuple), ("strides", tuple), ("dtype", np.dtype),
                      ("size", int)):
        if not hasattr(obj, attr):
            raise AttributeError(attr)
        if not isinstance(getattr(obj, attr), typ):
            raise AttributeError("%s must be of type %s" % (attr, typ))


def auto_device(obj, stream=0, copy=True, user_explicit=False):
    """(device object, converted): device memory is returned as it is with False; a NumPy
    record gives a new DeviceRecord, anything else np.asarray takes a new device array (its
    stored core must be contiguous: sentry_contiguous), filled from `obj` when `copy`, with
    True. A foreign ``__cuda_array_interface__`` object gives as_cuda_array(obj) (a view,
    no copy) with False, as Numba. user_explicit is accepted for Numba's signature; devarray
    has no implicit-copy warning to silence."""
    if is_device_memory(obj):
        return obj, False
    if hasattr(obj, "__cuda_array_interface__"):
        return as_cuda_array(obj), False
    if isinstance(obj, np.void):
        dev = from_record_like(obj, stream=stream)
    else:
        obj = np.asanyarray(obj)
        sentry_contiguous(obj)
        dev = device_array(obj.shape, obj.dtype, strides=obj.strides if obj.size else None,
                           stream=stream)
    if copy:
        dev.copy_to_device(obj, stream=stream)
    return dev, True
