"""Pointer-level memory objects (Numba's cudadrv.driver): MemoryPointer, AutoFreePointer,
MappedMemory, PinnedMemory, ManagedMemory, OwnedPointer and MemoryInfo.

Memory devarray allocated is held as a C byte array (a ``dv_array*`` of dtype uint8 and
shape ``(size,)``), so views are the library's slices and copies and memsets its own calls
(``dv_array_copy``, ``dv_array_memset``). Build such objects with ``Class._from_handle(h)``.

A pointer given to Numba's constructor, ``MemoryPointer(context, pointer, size, owner=None,
finalizer=None)``, is only recorded: nothing reads or registers it until an operation needs
it, which then takes a slice of the live devarray allocation it lies in, if any, else wraps
it (``dv_device_array_wrap``; ``dv_host_array_wrap`` for mapped host memory). A finalizer runs exactly once: at ``free()`` or when the object (and, for
an AutoFreePointer, every OwnedPointer of it) is gone.

What ``device_pointer`` holds on each backend (docs/semantics.md, "Python binding"): CUDA, the
CUdeviceptr (an address); host simulator, the host address of the simulated device memory;
OpenCL, a synthetic value (one non-overlapping range per ``cl_mem``, see ``_address``) plus
the byte offset of the view: an opaque number, not an address, whose differences between
views of one allocation are their byte offsets.
``native`` gives the ``(buffer, offset)`` pair (``dv_array_native``) on every backend.
"""

import ctypes
import threading
import weakref
from collections import namedtuple

import numpy as np

from . import _abi, _current
from ._abi import dv_block as _dv_block
from ._convert import _P, _I64, _dv_dtype
from ._lib import lib, check, dv_index, MisuseError
from ._stream import _stream_handle, _release_later

__all__ = ["MemoryPointer", "AutoFreePointer", "MappedMemory", "PinnedMemory", "ManagedMemory",
           "OwnedPointer", "MappedOwnedPointer", "ManagedOwnedPointer", "MemoryInfo"]

MEM_DEVICE, MEM_HOST, MEM_PINNED, MEM_MAPPED, MEM_MANAGED = (
    _abi.DV_MEM_DEVICE, _abi.DV_MEM_HOST, _abi.DV_MEM_PINNED, _abi.DV_MEM_MAPPED, _abi.DV_MEM_MANAGED)
_release = lib.dv_array_release

MemoryInfo = namedtuple("MemoryInfo", ["free", "total"])
_nbytes = lib.dv_array_nbytes


def _u8():
    return _dv_dtype(np.dtype(np.uint8))


def _ptr_value(pointer):
    """An integer from a ctypes pointer-sized object, an int, or None."""
    if pointer is None:
        return 0
    v = getattr(pointer, "value", pointer)
    if v is None:
        return 0
    try:
        return int(v)
    except TypeError:
        raise TypeError("pointer must be an int or a ctypes pointer value, not %r"
                        % (pointer,)) from None


def _ctx_handle(context):
    """The C context of `context` (a devarray Context, a weakref proxy of one, or None)."""
    h = getattr(context, "handle", None) if context is not None else None
    return h if h else _current_context().handle


def _current_context():
    """The current context (a pointer made with no context: memory of the current one)."""
    c = _current.ctx
    if c is None:
        raise MisuseError(_abi.DV_ERR_MISUSE, "no context is current", "MemoryPointer")
    return c


def _native(h):
    """(buffer, offset) of a device, mapped or managed C array (dv_array_native)."""
    buf, off = _P(), ctypes.c_size_t()
    check(lib.dv_array_native(h, ctypes.byref(buf), ctypes.byref(off)), "device pointer")
    return buf.value or 0, off.value


def _host_data(h):
    p = _P()
    check(lib.dv_array_host_data(h, ctypes.byref(p)), "host pointer")
    return p.value or 0


def _byte_slice(h, start, stop):
    """A new reference to bytes [start, stop) of the C byte array h (a view)."""
    idx = (dv_index * 1)()
    idx[0].kind, idx[0].start, idx[0].stop, idx[0].step = 0, start, stop, 1
    out = _P()
    check(lib.dv_array_slice(h, 1, idx, ctypes.byref(out)), "view")
    return out.value


# OpenCL device pointer values. A cl_mem is a handle, not an address: handles lie a few
# hundred bytes apart while buffers are larger, so "cl_mem + offset" values of two buffers
# overlap and a value could not tell which buffer it points into. There each cl_mem gets its
# own slot of 2**40 bytes (more than any buffer) in a synthetic address space from 2**56 up,
# so values of different buffers never overlap; the slot of a handle is kept for the
# process (a handle the driver reuses gets its slot again, as a freed address is reused).
_SYN_BASE, _SYN_SHIFT = 1 << 56, 40
_slot_of = {}     # cl_mem value -> slot number
_buffer_of = []   # slot number -> cl_mem value
_slot_lock = threading.Lock()


def _opaque(h):
    """Whether the device pointers of C array h are handles, not addresses (OpenCL)."""
    name = lib.dv_context_backend(lib.dv_array_context(h))
    return name == b"opencl"


def _address(h, buf, off):
    """The device pointer value of byte `off` of native buffer `buf` (of C array h): the
    address (CUDA, host simulator), or the synthetic value (OpenCL; see above)."""
    if not buf:
        return 0
    if not _opaque(h):
        return buf + off
    return _synthetic(buf, off)


def _synthetic(buf, off):
    """The synthetic device pointer value of byte `off` of OpenCL buffer `buf` (a cl_mem)."""
    slot = _slot_of.get(buf)
    if slot is None:
        with _slot_lock:  # two threads' new handles must not get one slot
            slot = _slot_of.get(buf)
            if slot is None:
                slot = _slot_of[buf] = len(_buffer_of)
                _buffer_of.append(buf)
    return _SYN_BASE + (slot << _SYN_SHIFT) + off


def _decode(value):
    """(native buffer, offset) of a device pointer value: the cl_mem and offset of a
    synthetic OpenCL value, else (value, 0)."""
    if value >= _SYN_BASE:
        slot = (value - _SYN_BASE) >> _SYN_SHIFT
        off = (value - _SYN_BASE) & ((1 << _SYN_SHIFT) - 1)
        if slot < len(_buffer_of):
            return _buffer_of[slot], off
    return value, 0


# Memory devarray allocated, alive: a pointer given to MemoryPointer(context, pointer, size)
# that lies inside one of them becomes a slice of it, not a foreign wrap (on OpenCL the
# pointer values are synthetic, which no wrap could take).
_allocations = weakref.WeakSet()


def _containing(value, size):
    """A new reference to bytes [value, value + size) of a live allocation, else None."""
    for m in list(_allocations):
        h = m._cell[0]
        base = m.device_pointer.value
        if h and base and base <= value and value + size <= base + m.size:
            return _byte_slice(h, value - base, value - base + size)
    return None


def _finalize(cell, finalizer):
    """Run once per pointer object: drop its C reference, then the user's finalizer."""
    h, cell[0] = cell[0], None
    try:
        if h and lib is not None and not _release_later(_release, h):
            _release(h)
    finally:
        if finalizer is not None:
            finalizer()


class _Buffer:
    """Mixed into objects that NumPy reads as a buffer (Numba's mviewbuf.MemAlloc):
    ``np.ndarray(shape, dtype, buffer=mem)``. The instance is made of a subclass that is also
    a ctypes byte array placed over the host memory (no copy, nothing owned by ctypes)."""

    __hash__ = object.__hash__

    def __eq__(self, other):
        return self is other

    def __ne__(self, other):
        return self is not other

    def __bool__(self):
        return True

    def __repr__(self):
        return "<devarray.%s size=%d>" % (type(self).__name__, self.size)


_sized = {}


def _new_buffer(cls, address, size):
    """An instance of cls whose buffer is `size` bytes at host `address`."""
    size = int(size)
    if size < 0:
        raise ValueError("size cannot be negative")
    sub = _sized.get((cls, size))
    if sub is None:
        sub = type(cls.__name__, (cls, ctypes.c_ubyte * size),
                   {"__module__": cls.__module__, "__qualname__": cls.__qualname__})
        if len(_sized) < 4096:
            _sized[(cls, size)] = sub
    return sub.from_address(address)


class MemoryPointer:
    """Device memory: a pointer, a size and the owner of the allocation (Numba's MemoryPointer).

    ``MemoryPointer(context, pointer, size, owner=None, finalizer=None)`` records a pointer
    (an int or ctypes value) that devarray did not allocate; ``finalizer`` is called once, at
    ``free()`` or when the object is collected. Memory devarray allocated comes from
    ``current_context().memalloc(size)`` (``MemoryPointer._from_handle`` underneath).

    Attributes as Numba's: ``context``, ``device_pointer`` and ``handle`` (a ctypes.c_size_t,
    see the module's note for OpenCL), ``size``, ``refct``, ``is_managed``, ``owner``.
    """

    __cuda_memory__ = True

    def __init__(self, context, pointer, size, owner=None, finalizer=None):
        size = int(size)
        if size < 0:
            raise ValueError("size cannot be negative")
        self.context = context
        self.device_pointer = ctypes.c_size_t(_ptr_value(pointer))
        self.size = size
        self._cuda_memsize_ = size
        self.is_managed = finalizer is not None
        self.refct = 1
        self.handle = self.device_pointer
        self._owner = owner
        # foreign memory: (native buffer, offset) to wrap lazily; the C array goes in _cell
        self._foreign = _decode(_ptr_value(pointer))
        self._host_side = False
        self._keep = None
        self._cell = [None]
        self._finalizer = weakref.finalize(self, _finalize, self._cell, finalizer)

    @classmethod
    def _from_handle(cls, h, size=None, owner=None, context=None, finalizer=None):
        """An object of cls over C array h (uint8, shape (size,)), taking over one reference.

        The reference is dropped at free() or when the object is collected; `finalizer` (if
        any) runs right after. size defaults to h's byte count. On failure h is released."""
        try:
            if size is None:
                size = _nbytes(h)
            kind = lib.dv_array_memory(h)
            if kind in (MEM_HOST, MEM_PINNED):
                dev = host = _host_data(h)
            else:
                buf, off = _native(h)
                dev = _address(h, buf, off)
                host = _host_data(h) if kind in (MEM_MAPPED, MEM_MANAGED) else None
        except BaseException:
            _release(h)
            raise
        self = cls._allocate(context, dev, host, size)
        self._init_handle(h, dev, host, size, owner, context, finalizer)
        return self

    @classmethod
    def _allocate(cls, context, dev, host, size):
        return object.__new__(cls)

    def _init_handle(self, h, dev, host, size, owner, context, finalizer):
        MemoryPointer.__init__(self, context, dev, size, owner=owner, finalizer=None)
        self._cell[0] = h
        self._foreign = None
        self.is_managed = True
        self._finalizer.detach()
        self._finalizer = weakref.finalize(self, _finalize, self._cell, finalizer)
        if not isinstance(self, _Buffer):
            _allocations.add(self)

    # -- Numba's interface
    @property
    def owner(self):
        return self if self._owner is None else self._owner

    def own(self):
        """An OwnedPointer: one more reference (refct) to this memory."""
        return OwnedPointer(self)

    def free(self):
        """Free the memory now (managed memory only; RuntimeError when already freed)."""
        if self.is_managed:
            if not self._finalizer.alive:
                raise RuntimeError("Freeing dead memory")
            self._finalizer()

    def memset(self, val, count=None, stream=0):
        """Set the first `count` bytes (default: all) to byte `val` (dv_array_memset)."""
        count = self.size if count is None else _count(count, self.size, "memset")
        h = _byte_slice(self._array(), 0, count)
        try:
            check(lib.dv_array_memset(h, _byte(val), _stream_handle(stream)), "memset")
        finally:
            _release(h)

    def view(self, start, stop=None):
        """The bytes [start, stop) (stop default: the end) as a pointer sharing this memory; an
        OwnedPointer (one more refct on the owner) when the owner is a MemoryPointer."""
        if not self._cell[0] and (self._foreign is None or not self._finalizer.alive):
            raise ValueError("devarray: the memory was freed")
        start = int(start)
        size = self.size - start if stop is None else int(stop) - start
        if size < 0:
            raise RuntimeError("size cannot be negative")
        if start < 0 or start + size > self.size:
            raise IndexError("view [%d:%d] is outside the %d bytes of this memory"
                             % (start, start + size, self.size))
        view = MemoryPointer.__new__(MemoryPointer)
        MemoryPointer.__init__(view, self.context, self.device_pointer.value + start, size,
                               owner=self.owner)
        view._host_side = self._host_side
        view._keep = self._keep
        if self._cell[0]:
            view._cell[0] = _byte_slice(self._cell[0], start, start + size)
            view._foreign = None
        else:
            buf, off = self._foreign
            view._foreign = (buf, off + start)
            view._keep = self  # the lazily wrapped C array of a view does not hold its base
        if isinstance(self.owner, (MemoryPointer, OwnedPointer)):
            return OwnedPointer(self.owner, view)
        return view

    @property
    def device_ctypes_pointer(self):
        """The device pointer as a ctypes.c_size_t (Numba's cu_device_ptr)."""
        return self.device_pointer

    @property
    def device_pointer_value(self):
        """The device pointer as an int, None for NULL."""
        return self.device_pointer.value or None

    @property
    def native(self):
        """(buffer, offset): the CUdeviceptr / cl_mem / host pointer of the allocation and
        the byte offset of this memory in it (dv_array_native)."""
        return _native(self._array())

    def _array(self):
        """The C byte array over this memory (borrowed; created on first use for a pointer
        devarray did not allocate)."""
        h = self._cell[0]
        if h:
            return h
        if self._foreign is None or not self._finalizer.alive:
            raise ValueError("devarray: the memory was freed")
        buf, off = self._foreign
        if not self._host_side and self.size:
            inside = _containing(self.device_pointer.value, self.size)
            if inside:
                self._cell[0] = inside
                return inside
        out = _P()
        shape = (_I64 * 1)(self.size)
        if not self._host_side:
            # never hand the backend memory it does not have (the host simulator and OpenCL
            # would read through the value): ArgumentError; cuda's driver checks on use
            st = _check_native(_ctx_handle(self.context), buf, off, self.size)
            if st and st != 300:  # DV_ERR_NOT_SUPPORTED: the backend cannot tell
                check(st, "device pointer %#x" % self.device_pointer.value)
        if self._host_side:
            check(lib.dv_host_array_wrap(_ctx_handle(self.context), buf + off, 1, shape,
                                         _u8(), None, ctypes.byref(out)), "wrap")
        else:
            check(lib.dv_device_array_wrap(_ctx_handle(self.context), buf, off,
                                           off + self.size, 1, shape, _u8(), None, None, None,
                                           ctypes.byref(out)), "wrap")
        self._cell[0] = out.value
        return out.value

    def __repr__(self):
        return "<devarray.%s %#x size=%d>" % (type(self).__name__, self.device_pointer.value,
                                              self.size)


class AutoFreePointer(MemoryPointer):
    """A MemoryPointer freed when its last OwnedPointer goes (refct starts at 0)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.refct -= 1

    def _init_handle(self, *args):
        MemoryPointer._init_handle(self, *args)
        self.refct -= 1


class MappedMemory(_Buffer, AutoFreePointer):
    """Host memory mapped into the device's address space (Numba's MappedMemory): device
    memory for the driver functions, and a buffer NumPy reads (``np.ndarray(..., buffer=m)``).

    ``MappedMemory(context, pointer, size, owner=None, finalizer=None)``: `pointer` is the host
    address; the device address is taken to be the same (CUDA's unified addressing)."""

    __cuda_memory__ = True

    def __new__(cls, context, pointer, size, owner=None, finalizer=None):
        return _new_buffer(cls, _ptr_value(pointer), size)

    def __init__(self, context, pointer, size, owner=None, finalizer=None):
        AutoFreePointer.__init__(self, context, pointer, size, finalizer=finalizer)
        self.owned = owner
        self.host_pointer = ctypes.c_void_p(_ptr_value(pointer) or None)
        self.handle = self.host_pointer
        self._host_side = True
        self._bufptr_ = self.host_pointer.value
        self._buflen_ = self.size

    @classmethod
    def _allocate(cls, context, dev, host, size):
        return _new_buffer(cls, host or 0, size)

    def _init_handle(self, h, dev, host, size, owner, context, finalizer):
        AutoFreePointer._init_handle(self, h, dev, host, size, None, context, finalizer)
        self.owned = owner
        self.host_pointer = ctypes.c_void_p(host or None)
        self.handle = self.host_pointer
        self._bufptr_ = host
        self._buflen_ = size

    def own(self):
        return MappedOwnedPointer(self)


class ManagedMemory(_Buffer, AutoFreePointer):
    """Managed (unified) memory, addressable from host and device (Numba's ManagedMemory);
    a buffer NumPy reads. Only where the backend has managed memory (CUDA; the host
    simulator)."""

    __cuda_memory__ = True

    def __new__(cls, context, pointer, size, owner=None, finalizer=None):
        return _new_buffer(cls, _ptr_value(pointer), size)

    def __init__(self, context, pointer, size, owner=None, finalizer=None):
        AutoFreePointer.__init__(self, context, pointer, size, finalizer=finalizer)
        self.owned = owner
        self._bufptr_ = self.device_pointer.value
        self._buflen_ = self.size

    @classmethod
    def _allocate(cls, context, dev, host, size):
        return _new_buffer(cls, host or 0, size)

    def _init_handle(self, h, dev, host, size, owner, context, finalizer):
        AutoFreePointer._init_handle(self, h, dev, host, size, None, context, finalizer)
        self.owned = owner
        self._bufptr_ = host
        self._buflen_ = size

    def own(self):
        return ManagedOwnedPointer(self)


class PinnedMemory(_Buffer):
    """Page-locked host memory (Numba's PinnedMemory): a buffer NumPy reads; not device
    memory (is_device_memory is False), as in Numba.

    ``PinnedMemory(context, pointer, size, owner=None, finalizer=None)``: `pointer` is the
    host address, `owner` the object whose memory was pinned (mempin)."""

    def __new__(cls, context, pointer, size, owner=None, finalizer=None):
        return _new_buffer(cls, _ptr_value(pointer), size)

    def __init__(self, context, pointer, size, owner=None, finalizer=None):
        self._setup(context, _ptr_value(pointer), size, owner, finalizer, None)

    def _setup(self, context, pointer, size, owner, finalizer, h):
        self.context = context
        self.owned = owner
        self.size = int(size)
        self.host_pointer = ctypes.c_void_p(pointer or None)
        self.is_managed = finalizer is not None or h is not None
        self.handle = self.host_pointer
        self._bufptr_ = pointer
        self._buflen_ = self.size
        self._cell = [h]
        self._finalizer = weakref.finalize(self, _finalize, self._cell, finalizer)

    @classmethod
    def _from_handle(cls, h, size=None, owner=None, context=None, finalizer=None):
        """A PinnedMemory over C host array h (uint8), taking over one reference; `owner` is
        kept alive with it (the pinned object of mempin)."""
        try:
            if size is None:
                size = _nbytes(h)
            host = _host_data(h)
        except BaseException:
            _release(h)
            raise
        self = _new_buffer(cls, host, size)
        self._setup(context, host, size, owner, finalizer, h)
        return self

    def _array(self):
        h = self._cell[0]
        if h:
            return h
        if not self._finalizer.alive:
            raise ValueError("devarray: the memory was freed")
        out = _P()
        shape = (_I64 * 1)(self.size)
        check(lib.dv_host_array_wrap(_ctx_handle(self.context), self._bufptr_, 1, shape,
                                     _u8(), None, ctypes.byref(out)), "wrap")
        self._cell[0] = out.value
        return out.value

    def own(self):
        return self

    def free(self):
        """Unpin / free now (RuntimeError when already freed)."""
        if not self._finalizer.alive:
            raise RuntimeError("Freeing dead memory")
        self._finalizer()


class OwnedPointer:
    """One reference (refct) to a MemoryPointer, optionally seen through a view of it
    (Numba's OwnedPointer): attributes are the view's; the memory is freed when the owner's
    refct drops to 0. devarray's own()/view() pass the MemoryPointer itself, which this then
    keeps alive; Numba passes a weakref.proxy (its allocations dict keeps the memory), which
    works too."""

    def __init__(self, memptr, view=None):
        self._mem = memptr
        if view is None:
            self._view = self._mem
        else:
            assert not view.is_managed
            self._view = view
        mem = self._mem

        def deref():
            try:
                mem.refct -= 1
                assert mem.refct >= 0
                if mem.refct == 0:
                    mem.free()
            except ReferenceError:
                pass

        self._mem.refct += 1
        weakref.finalize(self, deref)

    def __getattr__(self, fname):
        return getattr(self._view, fname)

    def __repr__(self):
        return "<devarray.%s of %r>" % (type(self).__name__, self._view)


class _OwnedBuffer(_Buffer, OwnedPointer):
    def __new__(cls, memptr, view=None):
        v = memptr if view is None else view
        return _new_buffer(cls, v._bufptr_ or 0, v._buflen_)

    def __init__(self, memptr, view=None):
        OwnedPointer.__init__(self, memptr, view)

    def __getattr__(self, fname):
        return getattr(self._view, fname)

    @property
    def size(self):
        return self._view.size


class MappedOwnedPointer(_OwnedBuffer):
    """An OwnedPointer of MappedMemory (a buffer NumPy reads, as the memory is)."""


class ManagedOwnedPointer(_OwnedBuffer):
    """An OwnedPointer of ManagedMemory (a buffer NumPy reads, as the memory is)."""


# ---- argument checks shared with _driver ------------------------------------

def _byte(val):
    try:
        v = val.__index__()
    except AttributeError:
        raise TypeError("memset value must be an integer byte, not %r" % (val,)) from None
    if not 0 <= v <= 255:
        raise ValueError("memset value %d is not a byte (0..255)" % v)
    return v


def _count(count, limit, what):
    try:
        n = count.__index__()
    except AttributeError:
        raise TypeError("%s: size must be an integer, not %r" % (what, count)) from None
    if n < 0:
        raise ValueError("%s: size cannot be negative (%d)" % (what, n))
    if n > limit:
        raise ValueError("%s: %d bytes do not fit in %d bytes of memory" % (what, n, limit))
    return n



# ---- the memory of a device array (DeviceNDArray.gpu_data) -----------------------

def _array_span(a):
    """(lo, nbytes): the offset from element 0 of the lowest byte of array a's elements and
    the number of bytes they span (0 for an empty array)."""
    if a.size == 0:
        return 0, 0
    lo = sum((n - 1) * s for n, s in zip(a.shape, a.strides) if s < 0)
    hi = sum((n - 1) * s for n, s in zip(a.shape, a.strides) if s > 0)
    return lo, hi - lo + a.dtype.itemsize


def _array_address(h, lo):
    """The device pointer value of byte `lo` (relative to element 0) of C array h."""
    if lib.dv_array_memory(h) in (MEM_HOST, MEM_PINNED):
        return _host_data(h) + lo
    buf, off = _native(h)
    return _address(h, buf, off + lo)


def _array_pointer(a):
    """DeviceNDArray.device_ctypes_pointer: a c_size_t, the lowest byte of its elements."""
    lo, n = _array_span(a)
    if not n:
        return ctypes.c_size_t(0)
    carried = _carried_block(a.handle)
    if carried is not None:
        return ctypes.c_size_t(carried[0].device_pointer.value + carried[1] + lo)
    return ctypes.c_size_t(_array_address(a.handle, lo))


_check_native = lib.dv_context_check_native
_block_fn = lib.dv_array_block


def _carried_block(h):
    """(the plug-in's MemoryPointer, byte offset of element 0 in it) when C array h lies in
    memory an EMM plug-in's memalloc returned that is not the backend's own (Numba's dummy
    plug-in hands out an allocation count): the library carries such memory but refuses
    every access, so its pointer is the plug-in's. None for any other array."""
    if lib.dv_array_memory(h) != MEM_DEVICE:
        return None
    c = _current.by_handle(lib.dv_array_context(h))
    bridge = c._bridge if c is not None else None
    if bridge is None:
        return None
    blk, off, usable = _dv_block(), ctypes.c_size_t(), ctypes.c_int()
    if _block_fn(h, ctypes.byref(blk), ctypes.byref(off), ctypes.byref(usable)) or usable.value:
        return None
    mp = bridge.live.get(blk.handle or 0)
    return None if mp is None else (mp, off.value)


def _array_context(h):
    """The Context of C array h (the current one when it is not open any more)."""
    c = _current.by_handle(lib.dv_array_context(h))
    return c if c is not None else _current_context()


def _gpu_data(a):
    """A MemoryPointer over the bytes device array a's elements span, sharing a's memory and
    keeping a alive."""
    h = a.handle
    lo, n = _array_span(a)
    ctx = lib.dv_array_context(h)
    out = _P()
    shape = (_I64 * 1)(n)
    carried = _carried_block(h) if n else None
    if carried is not None:
        # the plug-in's own pointer object, as Numba's gpu_data is memalloc's result
        mp, off = carried
        if off + lo == 0 and n == getattr(mp, "size", None):
            return mp
        # a view of the plug-in's memory (any pointer object: only its value is used)
        return MemoryPointer(_array_context(h), _ptr_value(mp.device_pointer) + off + lo, n,
                             owner=mp)
    if n == 0:
        check(lib.dv_device_array(ctx, 1, shape, _u8(), None, b"C", None, ctypes.byref(out)),
              "gpu_data")
    elif lib.dv_array_memory(h) in (MEM_HOST, MEM_PINNED):
        check(lib.dv_host_array_wrap(ctx, _host_data(h) + lo, 1, shape, _u8(), None,
                                     ctypes.byref(out)), "gpu_data")
    else:
        buf, off = _native(h)
        check(lib.dv_device_array_wrap(ctx, buf, off + lo, off + lo + n, 1, shape, _u8(), None,
                                       None, None, ctypes.byref(out)), "gpu_data")
    mp = MemoryPointer._from_handle(out.value, n, context=_array_context(h))
    mp._keep = a
    return mp


def _array_over(mem, shape, strides, dtype):
    """(C array, NumPy dtype): a new reference laying shape/strides/dtype over the memory of
    MemoryPointer `mem` from its first byte (DeviceNDArray(..., gpu_data=mem))."""
    dt = np.dtype(dtype)
    shape = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(n) for n in shape)
    strides = ((int(strides),) if isinstance(strides, (int, np.integer))
               else tuple(int(t) for t in strides))
    if len(strides) != len(shape):
        raise ValueError("strides, if given, must be the same length as shape")
    if any(n < 0 for n in shape):
        raise ValueError("negative dimensions are not allowed")
    if 0 in shape:
        nbytes = 0
    else:
        if any(t < 0 for t in strides):
            raise ValueError("gpu_data: negative strides would reach before the memory")
        nbytes = sum((n - 1) * t for n, t in zip(shape, strides)) + dt.itemsize
    if nbytes > mem.size:
        raise ValueError("gpu_data has %d bytes; an array of shape %s, strides %s and dtype "
                         "%s needs %d" % (mem.size, shape, strides, dt, nbytes))
    h = mem._array()
    out = _P()
    if nbytes == 0:
        check(lib.dv_device_array(lib.dv_array_context(h), len(shape),
                                  (_I64 * max(len(shape), 1))(*shape), _dv_dtype(dt), None,
                                  b"C", None, ctypes.byref(out)), "DeviceNDArray")
    elif lib.dv_array_memory(h) in (MEM_HOST, MEM_PINNED):
        check(lib.dv_host_array_wrap(lib.dv_array_context(h), _host_data(h), len(shape),
                                     (_I64 * len(shape))(*shape), _dv_dtype(dt),
                                     (_I64 * len(shape))(*strides), ctypes.byref(out)),
              "DeviceNDArray")
    else:
        buf, off = _native(h)
        check(lib.dv_device_array_wrap(lib.dv_array_context(h), buf, off, off + nbytes,
                                       len(shape), (_I64 * len(shape))(*shape), _dv_dtype(dt),
                                       (_I64 * len(shape))(*strides), None, None,
                                       ctypes.byref(out)), "DeviceNDArray")
    return out.value, dt
