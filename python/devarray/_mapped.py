"""Mapped host memory seen as device arrays: MappedNDArray (a NumPy array over mapped host
memory that is also a device array), mapped_array, mapped_array_like and the mapped() scope.
Above both halves it joins: host memory (_hostmem) and device arrays (_array)."""

import contextlib
import ctypes

import numpy as np

from . import _context
from ._array import DeviceNDArray, _ctx_of_handle
from ._convert import _P, _dv_dtype, _i64
from ._hostmem import _HostOwner, _alloc, _like, _wrap_all
from ._lib import lib, check

__all__ = ["MappedNDArray", "mapped_array", "mapped_array_like", "mapped"]


class MappedNDArray(np.ndarray):
    """A NumPy array over mapped host memory that is also a device array (Numba's
    MappedNDArray, what mapped_array() returns): NumPy reads and writes it in place, and it
    has the device array's methods, which work on the same memory with no copy.

    ``copy_to_host``, ``copy_to_device``, ``split``, ``get_ipc_handle``, ``gpu_data``,
    ``device_ctypes_pointer``, ``__cuda_array_interface__`` (cuda backend) and
    ``_numba_type_`` are DeviceNDArray's, on a device view of exactly this array's elements
    (slices of a MappedNDArray are MappedNDArrays too). ``stream`` is the default stream of
    those methods (mapped_array's `stream`); ``bind(stream)`` gives a view with another.
    ``view``, ``reshape``, ``transpose``/``T`` and indexing are NumPy's (host views), where
    Numba's MappedNDArray takes DeviceNDArray's ``view``/``transpose`` (docs/semantics.md)."""

    __cuda_memory__ = True
    __cuda_ndarray__ = True

    def __array_finalize__(self, obj):
        # the C mapped allocation (a _HostOwner) and the default stream travel to views
        self._mapped = getattr(obj, "_mapped", None)
        self.stream = getattr(obj, "stream", 0)
        self._gpu = None

    def device_setup(self, gpu_data, stream=0):
        """Numba's: set the array's memory object (gpu_data; None: devarray's own, derived
        from the array) and its default stream."""
        self._gpu = gpu_data
        self.stream = stream

    def _device(self):
        """A DeviceNDArray over exactly this array's elements (the mapped memory's device
        buffer, as the library's mapped scopes make device views of it); it keeps the
        memory's owner alive (not this array: gpu_data of it would make a cycle)."""
        owner = self._mapped
        if owner is None:
            raise TypeError("this MappedNDArray was not made by mapped_array (no mapped "
                            "memory behind it)")
        addr = self.__array_interface__["data"][0]
        base = owner.__array_interface__["data"][0]
        if self.size == 0:
            h, dt = _alloc(lib.dv_device_array, self.shape, self.dtype, None, "C", None,
                           name="MappedNDArray")
            return DeviceNDArray._from_handle(h, dt, stream=self.stream)
        buf, off = _P(), ctypes.c_size_t()
        check(lib.dv_array_native(owner.handle, ctypes.byref(buf), ctypes.byref(off)),
              "MappedNDArray")
        delta = off.value + (addr - base)
        hi = sum((n - 1) * t for n, t in zip(self.shape, self.strides) if t > 0)
        out = _P()
        check(lib.dv_device_array_wrap(_ctx_of_handle(owner.handle), buf, delta,
                                       delta + hi + self.dtype.itemsize, self.ndim,
                                       _i64(self.shape), _dv_dtype(self.dtype),
                                       _i64(self.strides), None, None, ctypes.byref(out)),
              "MappedNDArray")
        return DeviceNDArray._from_handle(out.value, self.dtype, keep=owner, stream=self.stream)

    def copy_to_host(self, ary=None, stream=0):
        """DeviceNDArray.copy_to_host of this array's memory (a new NumPy array, or `ary`)."""
        return self._device().copy_to_host(ary, stream=stream or self.stream)

    def copy_to_device(self, ary, stream=0):
        """DeviceNDArray.copy_to_device: copy `ary` (host or device) into this array."""
        d = self._device()
        d.copy_to_device(ary, stream=stream or self.stream)

    def split(self, section, stream=0):
        """DeviceNDArray.split: device views of `section` elements each."""
        return self._device().split(section, stream=stream or self.stream)

    def bind(self, stream=0):
        """This array (a new view of it) with `stream` as its default stream."""
        v = np.ndarray.view(self, type(self))
        v.stream = stream
        return v

    def get_ipc_handle(self):
        """DeviceNDArray.get_ipc_handle of this array's memory."""
        return self._device().get_ipc_handle()

    @property
    def gpu_data(self):
        """A MemoryPointer over this array's bytes (or what device_setup was given)."""
        return self._gpu if self._gpu is not None else self._device().gpu_data

    @property
    def device_ctypes_pointer(self):
        """The device pointer of the lowest byte of the elements (a ctypes.c_size_t)."""
        return self._device().device_ctypes_pointer

    @property
    def __cuda_array_interface__(self):
        """The device view's interface (cuda backend only; AttributeError elsewhere)."""
        return self._device().__cuda_array_interface__

    @property
    def _numba_type_(self):
        """Numba's type of the array (its device view's)."""
        return self._device()._numba_type_

    @property
    def alloc_size(self):
        """The bytes of the elements (nbytes)."""
        return self.nbytes

    def __reduce_ex__(self, protocol):
        # a pickle would be a plain array in other memory: say so, as NumPy subclasses do not
        return np.asarray(self).copy().__reduce_ex__(protocol)


def mapped_array(shape, dtype=np.float64, strides=None, order="C", stream=0, portable=False,
                 wc=False):
    """A MappedNDArray (Numba's mapped_array): a NumPy array over mapped host memory the
    device addresses directly, which is also a device array (copy_to_host, copy_to_device,
    split, gpu_data, ...; `stream` is their default stream). Kernels given it use it in
    place, with no copy. portable and wc are the library's DV_MAPPED_* flags."""
    flags = (1 if portable else 0) | (2 if wc else 0)
    h, dt = _alloc(lib.dv_mapped_array, shape, dtype, strides, order, flags,
                   name="mapped_array")
    owner = _HostOwner(h, dt)
    m = owner.array(dt).view(MappedNDArray)
    m._mapped = owner
    m.stream = stream
    return m


def mapped_array_like(ary, stream=0, portable=False, wc=False):
    """mapped_array of `ary`'s shape and dtype, laid out like it (Numba's mapped_array_like)."""
    shape, dtype, strides, order = _like(ary)
    return mapped_array(shape, dtype, strides=strides, order=order, stream=stream,
                        portable=portable, wc=wc)


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
