"""Numba's driver-level memory functions (numba.cuda.cudadrv.driver): raw byte copies between
host and device memory, memset, sizes, extents and pointers.

Device memory (`dst` of host_to_device, `src` of device_to_host, both of device_to_device):
a MemoryPointer (or OwnedPointer, MappedMemory, ManagedMemory), a DeviceNDArray (its
``gpu_data``: the bytes its elements span), a NumPy array over mapped or managed memory
(``mapped_array``), or any object with ``__cuda_memory__`` and ``device_ctypes_pointer``
(wrapped as foreign memory). Host memory: a NumPy array (the bytes its elements span), any
object with the buffer protocol (bytes, bytearray, ctypes objects, MappedMemory, PinnedMemory),
or an int address (its size cannot be checked). Every copy and memset is the library's own
(``dv_array_copy``, ``dv_array_memset``) on byte arrays over that memory; with a stream it is
asynchronous and the stream keeps the host object alive until its next synchronize().

A size larger than either side is ValueError (nothing is copied); a host object where device
memory is needed, or the reverse, TypeError.
"""

import ctypes

import numpy as np

from ._array import DeviceNDArray
from ._convert import _P, _I64
from ._hostmem import _registry, _key
from ._context import current_context
from ._lib import lib, check
from ._memory import (_u8, _byte, _count, _byte_slice, _native, _address, MemoryPointer,
                      MEM_MAPPED, MEM_MANAGED, _release)
from ._stream import _stream_handle, Stream

__all__ = ["host_to_device", "device_to_host", "device_to_device", "device_memset",
           "device_memory_size", "host_memory_extents", "host_memory_size", "host_pointer",
           "is_device_memory", "require_device_memory", "device_pointer",
           "device_ctypes_pointer", "device_extents"]


# ---- device memory ----------------------------------------------------------

def _mapped_handle(obj):
    """The C array behind a NumPy array over mapped or managed memory, else None."""
    if not isinstance(obj, np.ndarray):
        return None
    if not _registry:
        return None
    h = _registry.get(_key(obj))
    if h is not None and lib.dv_array_memory(h) in (MEM_MAPPED, MEM_MANAGED):
        return h
    return None


def is_device_memory(obj):
    """Whether obj is device memory: it has a true ``__cuda_memory__`` (MemoryPointer, device
    arrays, mapped and managed memory), or is a NumPy array over mapped or managed memory."""
    if getattr(obj, "__cuda_memory__", False):
        return True
    return _mapped_handle(obj) is not None


def require_device_memory(obj):
    """TypeError unless is_device_memory(obj)."""
    if not is_device_memory(obj):
        raise TypeError("Not a CUDA memory object: %s is not device memory (a MemoryPointer, "
                        "a device array, or mapped or managed memory)" % type(obj).__name__)


def _memory_of(obj):
    """A MemoryPointer-like object over obj's device memory (obj itself where it is one)."""
    if isinstance(obj, DeviceNDArray):
        return obj.gpu_data
    if getattr(obj, "__cuda_memory__", False) and hasattr(obj, "_array"):
        return obj
    if _mapped_handle(obj) is not None:
        lo, hi = host_memory_extents(obj)
        return MappedMemoryView(obj, lo, hi - lo)
    require_device_memory(obj)
    # someone else's device memory object: its pointer and size, wrapped when used
    return MemoryPointer(None, device_ctypes_pointer(obj), device_memory_size(obj))


class MappedMemoryView:
    """The bytes of a NumPy array over mapped or managed memory, as device memory."""

    __cuda_memory__ = True

    def __init__(self, arr, address, size):
        self._arr = arr
        self.size = size
        h = _mapped_handle(arr)
        buf, off = _native(h)
        self.device_pointer = ctypes.c_size_t(_address(h, buf,
                                                       off + (address - arr.ctypes.data)))
        self._cuda_memsize_ = size
        self._address = address
        self._h = None

    def _array(self):
        if self._h is None:
            out = _P()
            shape = (_I64 * 1)(self.size)
            check(lib.dv_host_array_wrap(current_context().handle, self._address, 1, shape,
                                         _u8(), None, ctypes.byref(out)), "mapped memory")
            self._h = out.value
        return self._h

    def __del__(self, _rel=_release):
        h, self._h = self._h, None
        if h:
            _rel(h)


def device_memory_size(obj):
    """The size in bytes of device memory obj (a device array: the bytes its elements span)."""
    sz = getattr(obj, "_cuda_memsize_", None)
    if sz is not None:
        return sz
    if isinstance(obj, DeviceNDArray):
        return _span(obj.shape, obj.strides, obj.dtype.itemsize)
    if _mapped_handle(obj) is not None:
        return host_memory_size(obj)
    require_device_memory(obj)
    raise TypeError("device_memory_size: %s has no size (_cuda_memsize_)"
                    % type(obj).__name__)


def device_ctypes_pointer(obj):
    """The device pointer of obj as a ctypes value (c_size_t); c_void_p(0) for None.
    On OpenCL the value is opaque (the cl_mem plus an offset; see _memory)."""
    if obj is None:
        return ctypes.c_void_p(0)
    require_device_memory(obj)
    if _mapped_handle(obj) is not None and not hasattr(obj, "device_ctypes_pointer"):
        lo, hi = host_memory_extents(obj)
        return MappedMemoryView(obj, lo, hi - lo).device_pointer
    return obj.device_ctypes_pointer


def device_pointer(obj):
    """The device pointer of obj as an int (0 for NULL)."""
    return device_ctypes_pointer(obj).value or 0


def device_extents(devmem):
    """(start, end) device pointers of devmem's memory (its own bytes, not the whole
    allocation as CUDA's cuMemGetAddressRange gives)."""
    s = device_pointer(devmem)
    return s, s + device_memory_size(devmem)


# ---- host memory --------------------------------------------------------------

def _span(shape, strides, itemsize):
    if any(n == 0 for n in shape):
        return 0
    lo = sum((n - 1) * s for n, s in zip(shape, strides) if s < 0)
    hi = sum((n - 1) * s for n, s in zip(shape, strides) if s > 0)
    return hi - lo + itemsize


def _extents_of_array(a):
    ai = a.__array_interface__
    data = ai["data"][0] or 0
    strides = a.strides
    lo = data + sum((n - 1) * s for n, s in zip(a.shape, strides) if s < 0)
    return lo, lo + _span(a.shape, strides, a.dtype.itemsize)


def _bytes_view(obj):
    """A uint8 NumPy array over obj's buffer (TypeError when obj has none)."""
    try:
        return np.frombuffer(obj, dtype=np.uint8)
    except (TypeError, ValueError, BufferError) as e:
        raise TypeError("%s is not host memory (a NumPy array, a buffer or an address): %s"
                        % (type(obj).__name__, e)) from None


def host_memory_extents(obj):
    """(start, end) host addresses (half open) of the memory obj's elements span."""
    if isinstance(obj, np.ndarray):
        return _extents_of_array(obj)
    b = _bytes_view(obj)
    p = b.__array_interface__["data"][0] or 0
    return p, p + b.size


def host_memory_size(obj):
    """The size in bytes of host memory obj (the bytes its elements span)."""
    s, e = host_memory_extents(obj)
    return e - s


def host_pointer(obj, readonly=False):
    """The host address of obj's memory (an int is returned as is). ValueError when obj is
    read-only and `readonly` is False."""
    if isinstance(obj, int):
        return obj
    _, addr, _ = _host(obj, not readonly, "host_pointer")
    return addr


def _host(obj, writable, what):
    """(the object to keep alive, address, bytes available or None) of host memory obj."""
    if isinstance(obj, bool) or obj is None:
        raise TypeError("%s: %r is not host memory" % (what, obj))
    if isinstance(obj, int):
        return None, obj, None
    if isinstance(obj, np.ndarray):
        if writable and not obj.flags.writeable:
            raise ValueError("%s: the host array is read-only (flags.writeable is False)"
                             % what)
        lo, hi = _extents_of_array(obj)
        return obj, lo, hi - lo
    if isinstance(obj, DeviceNDArray) or (getattr(obj, "__cuda_memory__", False)
                                          and not hasattr(obj, "_bufptr_")):
        raise TypeError("%s: %s is device memory, not host memory"
                        % (what, type(obj).__name__))
    b = _bytes_view(obj)
    if writable and not b.flags.writeable:
        raise ValueError("%s: the host buffer (%s) is read-only" % (what, type(obj).__name__))
    return b, (b.__array_interface__["data"][0] or 0), b.size


def _host_bytes(obj, size, writable, what):
    """(new C reference to a uint8 host array of `size` bytes over obj, object to keep)."""
    keep, addr, avail = _host(obj, writable, what)
    if avail is not None and size > avail:
        raise ValueError("%s: %d bytes do not fit in the %d bytes of the host memory"
                         % (what, size, avail))
    if size == 0:
        return None, keep
    out = _P()
    shape = (_I64 * 1)(size)
    check(lib.dv_host_array_wrap(current_context().handle, addr, 1, shape, _u8(), None,
                                 ctypes.byref(out)), what)
    return out.value, keep


def _device_bytes(obj, size, what):
    """(new C reference to the first `size` bytes of device memory obj, object to keep)."""
    if not is_device_memory(obj):
        raise TypeError("%s: %s is not device memory (a MemoryPointer, a device array, or "
                        "mapped or managed memory)" % (what, type(obj).__name__))
    mem = _memory_of(obj)
    _count(size, device_memory_size(mem), what)
    return _byte_slice(mem._array(), 0, size), mem


def _size(size, what):
    try:
        n = size.__index__()
    except AttributeError:
        raise TypeError("%s: size must be an integer, not %r" % (what, size)) from None
    if n < 0:
        raise ValueError("%s: size cannot be negative (%d)" % (what, n))
    return n


def _copy(dst, src, size, stream, what, dst_host, src_host):
    size = _size(size, what)
    s = _stream_handle(stream)
    if dst_host:
        d, dkeep = _host_bytes(dst, size, True, what)
    else:
        d, dkeep = _device_bytes(dst, size, what)
    try:
        if src_host:
            r, skeep = _host_bytes(src, size, False, what)
        else:
            r, skeep = _device_bytes(src, size, what)
        try:
            if size:
                check(lib.dv_array_copy(d, r, s), what)
        finally:
            if r:
                _release(r)
    finally:
        if d:
            _release(d)
    if isinstance(stream, Stream):
        stream._hold((dkeep, skeep))


def host_to_device(dst, src, size, stream=0):
    """Copy `size` bytes from host memory src to device memory dst (Numba's cuMemcpyHtoD)."""
    _copy(dst, src, size, stream, "host_to_device", False, True)


def device_to_host(dst, src, size, stream=0):
    """Copy `size` bytes from device memory src to host memory dst (writeable)."""
    _copy(dst, src, size, stream, "device_to_host", True, False)


def device_to_device(dst, src, size, stream=0):
    """Copy `size` bytes between two device memories (they must not overlap)."""
    _copy(dst, src, size, stream, "device_to_device", False, False)


def device_memset(dst, val, size, stream=0):
    """Set the first `size` bytes of device memory dst to byte `val` (0..255)."""
    v = _byte(val)
    size = _size(size, "device_memset")
    h, keep = _device_bytes(dst, size, "device_memset")
    try:
        check(lib.dv_array_memset(h, v, _stream_handle(stream)), "device_memset")
    finally:
        _release(h)
    if isinstance(stream, Stream):
        stream._hold(keep)



# ---- Numba's profiler switches ------------------------------------------------------------
# numba.cuda.profile_start/profile_stop/profiling start and stop the CUDA profiler's
# collection. devarray drives no profiler: these do nothing, so that programs (and Numba's
# tests) that bracket their work with them run unchanged.

def profile_start():
    """Numba's profile_start: nothing to start (devarray drives no profiler)."""


def profile_stop():
    """Numba's profile_stop: nothing to stop."""


class profiling:
    """Numba's ``with profiling():``: profile_start() on entry, profile_stop() on exit."""

    def __enter__(self):
        profile_start()
        return self

    def __exit__(self, *exc):
        profile_stop()
        return False
