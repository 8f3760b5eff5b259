"""Numba's pointer-level memory API (issue 25, items 6, 7 and 10): MemoryPointer and its kin,
the driver functions, DeviceNDArray.gpu_data / memset / _numba_type_."""
import ctypes
import gc
import os
import sys

import numpy as np
import pytest

import devarray
from devarray import driver
from devarray._convert import _dv_dtype
from devarray._lib import lib, check, NotSupportedError
from devarray._memory import _native

from conftest import live_arrays

U8 = np.dtype(np.uint8)


def _c_bytes(fn, n, *extra):
    out = ctypes.c_void_p()
    check(fn(devarray.current_context().handle, 1, (ctypes.c_int64 * 1)(n), _dv_dtype(U8),
             None, b"C", *extra, ctypes.byref(out)))
    return out.value


def memalloc(n):
    """What context.memalloc returns in Numba: an OwnedPointer of an AutoFreePointer."""
    return driver.AutoFreePointer._from_handle(_c_bytes(lib.dv_device_array, n, None)).own()


def mapped(n):
    return driver.MappedMemory._from_handle(_c_bytes(lib.dv_mapped_array, n, 0)).own()


def pinned(n):
    return driver.PinnedMemory._from_handle(_c_bytes(lib.dv_pinned_array, n))


def read(mem, n=None):
    n = driver.device_memory_size(mem) if n is None else n
    out = np.zeros(n, U8)
    driver.device_to_host(out, mem, n)
    return out


def write(mem, data):
    data = np.ascontiguousarray(data, U8)
    driver.host_to_device(mem, data, data.size)


def hv(m):
    return m.handle.value


# ---- MemoryPointer -----------------------------------------------------------

def test_memory_pointer_is_device_memory(no_leak):
    m = memalloc(1024)
    for obj in (m, m.view(10)):
        assert driver.is_device_memory(obj)
        driver.require_device_memory(obj)
        assert isinstance(obj.device_ctypes_pointer, ctypes.c_size_t)
        assert driver.device_pointer(obj) == obj.device_ctypes_pointer.value
    assert m.size == 1024 and driver.device_memory_size(m) == 1024
    assert m.__cuda_memory__ is True
    assert not driver.is_device_memory(np.zeros(3))
    with pytest.raises(TypeError, match="Not a CUDA memory object"):
        driver.require_device_memory(np.zeros(3))
    assert driver.device_ctypes_pointer(None).value is None


@pytest.mark.parametrize("offset", [0, 1, 7])
def test_view_offsets_and_refct(no_leak, offset):
    m = memalloc(64)
    write(m, np.arange(64))
    v1 = m.view(offset)
    assert hv(v1.owner) == hv(m)
    assert m.refct == 2
    assert hv(v1) - offset == hv(v1.owner)
    assert v1.size == 64 - offset
    v2 = v1.view(offset, offset + 5)  # relative to v1: bytes [2 * offset, 2 * offset + 5)
    assert hv(v2) - 2 * offset == hv(v2.owner) == hv(m)
    assert v2.size == 5
    assert m.refct == 3
    assert list(read(v2)) == list(range(2 * offset, 2 * offset + 5))
    write(v2, [200] * 5)  # writes through the view land in the owner's bytes
    got = read(m)
    assert list(got[2 * offset:2 * offset + 5]) == [200] * 5
    assert got[2 * offset + 5] == 2 * offset + 5
    del v2
    assert m.refct == 2
    del v1
    assert m.refct == 1


def test_view_bounds(no_leak):
    m = memalloc(16)
    assert m.view(16).size == 0
    with pytest.raises(RuntimeError, match="size cannot be negative"):
        m.view(8, 4)
    with pytest.raises(IndexError, match="outside the 16 bytes"):
        m.view(4, 17)
    with pytest.raises(IndexError):
        m.view(-1)
    assert m.refct == 1


def test_memset_method_and_count(no_leak):
    m = memalloc(32)
    m.memset(0)
    m.memset(0x5a, 10)
    got = read(m)
    assert (got[:10] == 0x5a).all() and (got[10:] == 0).all()
    v = m.view(20)
    v.memset(7, count=4)
    got = read(m)
    assert (got[20:24] == 7).all() and got[19] == 0 and got[24] == 0
    with pytest.raises(ValueError, match="not a byte"):
        m.memset(256)
    with pytest.raises(TypeError):
        m.memset(1.5)
    with pytest.raises(ValueError, match="do not fit"):
        v.memset(1, 13)
    assert (read(m)[:10] == 0x5a).all()


def test_free_and_autofree_lifetimes(ctx, no_leak):
    base = live_arrays(ctx)
    m = memalloc(256)
    assert live_arrays(ctx) == base + 1
    v = m.view(8)
    assert live_arrays(ctx) == base + 2
    del m  # the view's OwnedPointer still holds the memory
    assert v.refct == 1 and live_arrays(ctx) == base + 2
    v.memset(3)
    del v
    assert live_arrays(ctx) == base
    # an explicit free() of a MemoryPointer: once; its memory is gone after
    raw = driver.MemoryPointer._from_handle(_c_bytes(lib.dv_device_array, 64, None))
    assert raw.is_managed and raw.refct == 1
    ctx.deallocations.clear()
    dev = ctx.raw_stats().device.current
    raw.free()
    assert live_arrays(ctx) == base
    ctx.deallocations.clear()
    assert ctx.raw_stats().device.current == dev - 64  # the free reached the device
    with pytest.raises(RuntimeError, match="Freeing dead memory"):
        raw.free()
    with pytest.raises(ValueError, match="freed"):
        raw.memset(0)
    with pytest.raises(ValueError, match="freed"):
        raw.view(4)


def test_foreign_pointer_finalizer_runs_once(ctx):
    calls = []
    fake = ctypes.c_void_p(0xdeadbeef)
    p = driver.MemoryPointer(context=ctx, pointer=fake, size=40,
                             finalizer=lambda: calls.append(1))
    assert p.device_pointer.value == 0xdeadbeef and p.size == 40 and calls == []
    del p
    assert calls == [1]
    p = driver.MemoryPointer(ctx, fake, 40, finalizer=lambda: calls.append(2))
    owned = p.own()
    del owned
    assert calls == [1]
    p.free()
    assert calls == [1, 2]
    del p
    assert calls == [1, 2]
    # AutoFreePointer: the finalizer runs when the last OwnedPointer goes
    a = driver.AutoFreePointer(ctx, ctypes.c_void_p(1), 16, finalizer=lambda: calls.append(3))
    assert a.refct == 0
    o1, o2 = a.own(), a.own()
    del a
    del o1
    assert calls == [1, 2]
    del o2
    assert calls == [1, 2, 3]


def test_foreign_pointer_wrapped_when_used(ctx, no_leak):
    # memory no MemoryPointer describes: a device array's own buffer (dv_array_native)
    d = devarray.to_device(np.arange(64, dtype=np.uint8))
    buf, off = _native(d.handle)
    calls = []
    f = driver.MemoryPointer(ctx, buf + off if ctx.backend != "opencl" else buf, 64,
                             finalizer=lambda: calls.append(1))
    assert f._cell[0] is None  # nothing read or wrapped yet
    assert list(read(f.view(4, 8))) == [4, 5, 6, 7]
    f.view(60).memset(9)
    assert list(d.copy_to_host()[58:]) == [58, 59, 9, 9, 9, 9]
    assert f._array() and lib.dv_array_memory(f._array()) == 0  # wrapped as device memory
    del f
    gc.collect()
    assert calls == [1]


def test_made_up_pointer_is_refused_when_used(ctx, no_leak):
    """Issue 34: a pointer that is no device memory of the backend is refused when first
    used (ArgumentError), not handed to the backend, which would read through it (host
    simulator, OpenCL); on cuda the driver refuses it."""
    p = driver.MemoryPointer(ctx, 0xdeadbeef, 40)
    h = np.zeros(40, np.uint8)
    with pytest.raises(devarray.ArgumentError):
        driver.device_to_host(h, p, 40)
    with pytest.raises(devarray.ArgumentError):
        p.memset(1)
    assert not h.any()
    if ctx.backend != "cuda":
        assert p._cell[0] is None  # nothing made (cuda: wrapped, refused by the driver)
    del p


def test_pointer_inside_an_allocation_is_a_slice_of_it(ctx, no_leak):
    m = memalloc(64)
    write(m, np.arange(64))
    f = driver.MemoryPointer(ctx, m.device_pointer.value + 8, 16)  # OpenCL: cl_mem + 8
    assert list(read(f)) == list(range(8, 24))
    f.memset(0, 4)
    assert list(read(m)[6:14]) == [6, 7, 0, 0, 0, 0, 12, 13]
    del m
    assert list(read(f)[4:6]) == [12, 13]  # the slice holds the memory


def test_mapped_memory_is_a_buffer(no_leak):
    mem = mapped(32)
    assert driver.is_device_memory(mem)
    assert isinstance(mem.device_ctypes_pointer, ctypes.c_size_t)
    assert mem.host_pointer.value == hv(mem)
    ary = np.ndarray(shape=32, dtype=U8, buffer=mem)
    driver.device_memset(mem, 0xab, 32)
    assert (ary == 0xab).all()
    ary.fill(32)
    recv = np.empty_like(ary)
    driver.device_to_host(recv, mem, ary.size)
    assert (recv == 32).all()
    v = mem.view(8)
    v.memset(1, 4)
    assert list(ary[6:14]) == [32, 32, 1, 1, 1, 1, 32, 32]
    del ary, v


def test_pinned_memory_is_host_memory(no_leak):
    p = pinned(40)
    assert not driver.is_device_memory(p)
    assert p.own() is p
    ary = np.ndarray(shape=10, dtype=np.uint32, buffer=p)
    ary[:] = np.arange(10)
    d = memalloc(40)
    driver.host_to_device(d, p, 40)
    assert (read(d).view(np.uint32) == np.arange(10)).all()
    with pytest.raises(TypeError, match="not device memory"):
        driver.device_memset(p, 0, 4)
    del ary


def test_managed_memory(ctx, no_leak):
    try:
        h = _c_bytes(lib.dv_managed_array, 16, 1)
    except NotSupportedError as e:
        pytest.skip("managed memory on %s: %s" % (ctx.backend, e))
    mem = driver.ManagedMemory._from_handle(h).own()
    assert driver.is_device_memory(mem)
    ary = np.ndarray(16, U8, buffer=mem)
    driver.device_memset(mem, 0x11, 16)
    ctx.synchronize()
    assert (ary == 0x11).all()
    del ary


@pytest.mark.parametrize("cls", ["MappedMemory", "PinnedMemory", "ManagedMemory"])
def test_numba_constructors_over_foreign_host_memory(ctx, cls, no_leak):
    backing = np.arange(16, dtype=np.uint8)
    calls = []
    mem = getattr(driver, cls)(ctx, backing.ctypes.data, 16, owner=backing,
                               finalizer=lambda: calls.append(1))
    assert mem.size == 16 and driver.host_memory_extents(mem)[0] == backing.ctypes.data
    view = np.ndarray(16, U8, buffer=mem)  # the buffer is the memory itself
    view[3] = 99
    assert backing[3] == 99
    assert driver.is_device_memory(mem) == (cls != "PinnedMemory")
    if cls == "MappedMemory":  # mapped memory is host memory: the driver writes it in place
        driver.device_memset(mem, 5, 4)
        assert list(backing[:5]) == [5, 5, 5, 5, 4]
    out = np.zeros(16, U8)
    driver.host_to_device(memalloc(16), mem, 16)  # a host source for every kind
    del view
    assert calls == []
    del mem
    gc.collect()
    assert calls == [1]
    del out


# ---- driver functions ---------------------------------------------------------

def test_memcpy_memset_d2d(no_leak):
    hst = np.arange(100, dtype=np.uint32)
    sz = hst.nbytes
    dev1, dev2 = memalloc(sz), memalloc(sz)
    driver.host_to_device(dev1, hst, sz)
    driver.device_to_device(dev2, dev1, sz)
    out = np.empty_like(hst)
    driver.device_to_host(out, dev2, sz)
    assert (out == hst).all()
    driver.device_memset(dev2, 0xab, 40)
    driver.device_to_host(out, dev2, sz)
    assert (out[:10] == 0xabababab).all() and (out[10:] == hst[10:]).all()


def test_copies_on_a_stream(no_leak):
    s = devarray.stream()
    hst = np.arange(50, dtype=np.float64)
    d = memalloc(hst.nbytes)
    out = np.zeros_like(hst)
    driver.host_to_device(d, hst, hst.nbytes, stream=s)
    driver.device_memset(d, 0, 8, stream=s)
    driver.device_to_host(out, d, hst.nbytes, stream=s)
    s.synchronize()
    assert out[0] == 0 and (out[1:] == hst[1:]).all()
    with pytest.raises(TypeError, match="stream"):
        driver.device_memset(d, 0, 8, stream=5)


def test_host_buffers_as_sources_and_destinations(no_leak):
    d = memalloc(16)
    arr = (ctypes.c_int * 4)(1, 2, 3, 4)
    driver.host_to_device(d, arr, ctypes.sizeof(arr))
    assert list(read(d).view(np.int32)) == [1, 2, 3, 4]
    driver.host_to_device(d, b"\x09" * 8, 8)
    ba = bytearray(16)
    driver.device_to_host(ba, d, 16)
    assert list(ba) == [9] * 8 + [3, 0, 0, 0, 4, 0, 0, 0]
    src = np.full(4, 77, np.uint8)
    driver.host_to_device(d, src.ctypes.data, 4)  # an address: Numba's int pointer
    assert list(read(d, 4)) == [77] * 4


def test_wrong_sizes_and_kinds_raise_and_change_nothing(no_leak):
    d = memalloc(16)
    d.memset(1)
    big = np.zeros(32, U8)
    with pytest.raises(ValueError, match="do not fit"):
        driver.host_to_device(d, big, 17)
    with pytest.raises(ValueError, match="do not fit in the 8 bytes of the host memory"):
        driver.host_to_device(d, np.zeros(8, U8), 9)
    with pytest.raises(ValueError, match="do not fit"):
        driver.device_memset(d, 0, 17)
    with pytest.raises(ValueError, match="negative"):
        driver.device_memset(d, 0, -1)
    with pytest.raises(TypeError, match="not device memory"):
        driver.host_to_device(big, big, 4)
    with pytest.raises(TypeError, match="is device memory, not host memory"):
        driver.host_to_device(d, d, 4)
    with pytest.raises(TypeError, match="is device memory, not host memory"):
        driver.device_to_host(devarray.to_device(big), d, 4)
    with pytest.raises(TypeError, match="not host memory"):
        driver.device_to_host(object(), d, 4)
    ro = np.zeros(16, U8)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        driver.device_to_host(ro, d, 4)
    with pytest.raises(ValueError, match="read-only"):
        driver.device_to_host(b"x" * 16, d, 4)
    with pytest.raises(TypeError, match="integer"):
        driver.device_memset(d, 0, 1.5)
    assert (read(d) == 1).all() and (ro == 0).all()
    driver.host_to_device(d, big, 0)  # size 0: nothing, no error
    assert (read(d) == 1).all()


def test_host_memory_extents_and_sizes():
    ary = np.arange(100)
    s, e = driver.host_memory_extents(ary)
    assert s == ary.ctypes.data and e - s == ary.nbytes == driver.host_memory_size(ary)
    f = np.asfortranarray(np.arange(100).reshape(2, 50))
    assert driver.host_memory_extents(f)[0] == f.ctypes.data
    assert driver.host_memory_size(f) == f.nbytes
    one = np.asarray(np.uint32(1234))
    assert driver.host_memory_extents(one)[0] == one.ctypes.data
    assert driver.host_memory_size(one) == 4
    rev = np.arange(10, dtype=np.int16)[::-1]
    assert driver.host_memory_extents(rev) == (rev.ctypes.data - 18, rev.ctypes.data + 2)
    strided = np.arange(10, dtype=np.int64)[::3]  # elements 0, 3, 6, 9
    assert driver.host_memory_size(strided) == 9 * 8 + 8

    class S(ctypes.Structure):
        _fields_ = [("x", ctypes.c_int), ("y", ctypes.c_int)]
    assert driver.host_memory_size(S(1, 2)) == ctypes.sizeof(S)
    assert driver.host_memory_size(ctypes.c_double(1.5)) == 8
    assert driver.host_pointer(7) == 7
    with pytest.raises(TypeError, match="not host memory"):
        driver.host_memory_size(object())


def test_mapped_array_is_device_memory(no_leak):
    ary = devarray.mapped_array(10, dtype=np.uint32)
    ary.fill(123)
    assert driver.is_device_memory(ary)
    assert driver.device_memory_size(ary) == 40
    driver.device_memset(ary, 0, driver.device_memory_size(ary))
    assert (ary == 0).all()
    pin = devarray.pinned_array(10, dtype=np.uint32)
    assert not driver.is_device_memory(pin)
    del ary, pin


# ---- DeviceNDArray ---------------------------------------------------------------

def test_gpu_data_shares_the_array(no_leak):
    h = np.arange(24, dtype=np.int32).reshape(4, 6)
    d = devarray.to_device(h)
    assert d.__cuda_ndarray__ is True and driver.is_device_memory(d)
    g = d.gpu_data
    assert g.size == h.nbytes == driver.device_memory_size(d)
    assert g.device_pointer.value == d.device_ctypes_pointer.value
    assert isinstance(d.device_ctypes_pointer, ctypes.c_size_t)
    assert (read(g).view(np.int32).reshape(4, 6) == h).all()
    s = d[1:3, 2:4]  # rows 1-2, columns 2-3: bytes from element (1,2) to (2,3)
    gs = s.gpu_data
    assert gs.size == (6 + 2) * 4
    assert gs.device_pointer.value - g.device_pointer.value == (6 + 2) * 4
    assert driver.device_pointer(s) == gs.device_pointer.value
    gs.view(0, 4).memset(0xff)  # writes element (1, 2) of d
    assert d.copy_to_host()[1, 2] == -1
    del d, s  # gpu_data keeps the array alive
    assert read(g).view(np.int32)[8] == -1
    driver.device_memset(gs, 0, 4)
    assert read(g).view(np.int32)[8] == 0
    r = devarray.to_device(np.arange(5, dtype=np.int64))[::-1]
    assert r.gpu_data.size == 40 and list(read(r.gpu_data).view(np.int64)) == list(range(5))
    e = devarray.device_array(0)
    assert e.gpu_data.size == 0 and e.device_ctypes_pointer.value == 0


def test_device_array_memset_and_driver_copies(no_leak):
    d = devarray.to_device(np.arange(12, dtype=np.uint32).reshape(3, 4))
    d[:, 1].memset(0xff)
    out = d.copy_to_host()
    assert (out[:, 1] == 0xffffffff).all() and out[0, 0] == 0 and out[2, 3] == 11
    driver.device_memset(d, 0, 4)
    assert d.copy_to_host()[0, 0] == 0
    driver.host_to_device(d, np.full(12, 5, np.uint32), 48)
    assert (d.copy_to_host() == 5).all()
    s = devarray.stream()
    d.memset(1, stream=s)
    s.synchronize()
    assert (d.copy_to_host() == 0x01010101).all()
    with pytest.raises(ValueError, match="not a byte"):
        d.memset(-1)
    d2 = devarray.device_array_like(d)
    driver.device_to_device(d2, d, d.nbytes)
    assert (d2.copy_to_host() == 0x01010101).all()
    with pytest.raises(ValueError, match="do not fit"):
        driver.device_to_device(d2[:1], d, 48)


# ---- Numba interop -----------------------------------------------------------------

REC = np.dtype([("a", np.int32), ("b", np.float64)], align=True)


@pytest.fixture
def numba():
    # Numba reads its configuration once, at its first import: as test_numba_parity.py does,
    # choose its CUDA simulator (there is no CUDA driver here) before that import
    os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")
    return pytest.importorskip("numba")


def _like(kind):
    base = np.arange(60, dtype=np.float32).reshape(6, 10)
    return {"C": base, "F": np.asfortranarray(base), "strided": base[::2, 1::3],
            "rec": np.zeros(5, REC), "int16-3d": np.zeros((2, 3, 4), np.int16),
            "reversed": base[::-1]}[kind]


@pytest.mark.parametrize("kind", ["C", "F", "strided", "rec", "int16-3d", "reversed"])
def test_numba_type_matches_numba_typeof(numba, kind):
    h = _like(kind)
    d = devarray.to_device(h)
    if kind == "strided" or kind == "reversed":
        d = devarray.to_device(np.ascontiguousarray(_like("C")))
        d = d[::2, 1::3] if kind == "strided" else d[::-1]
    assert d._numba_type_ == numba.typeof(h)
    assert numba.typeof(d) == numba.typeof(h)
    assert d._numba_type_.layout == {"C": "C", "F": "F", "rec": "C", "int16-3d": "C"}.get(
        kind, "A")


def test_numba_type_layouts_of_slices_and_broadcasts(numba):
    for order, col, row in (("C", "A", "C"), ("F", "C", "A")):
        d = devarray.to_device(np.zeros((5, 5), order=order))
        assert d[:, 2]._numba_type_.layout == col
        assert d[2, :]._numba_type_.layout == row
    assert devarray.to_device(np.zeros(10, order="F"))._numba_type_.layout == "C"
    # a zero stride (a broadcast view) is "A" even where the flags say contiguous
    b = devarray.to_device(np.arange(3.0))._broadcast_to((4, 3))
    assert 0 in b.strides
    assert b._numba_type_ == numba.types.Array(numba.float64, 2, "A")


def test_numba_type_of_a_record(numba):
    r = devarray.DeviceRecord(REC)
    assert r._numba_type_ == numba.typeof(np.zeros(1, REC)[0])


def test_numba_type_without_numba(monkeypatch):
    d = devarray.to_device(np.zeros(3))
    monkeypatch.setitem(sys.modules, "numba", None)
    monkeypatch.setitem(sys.modules, "numba.core", None)
    monkeypatch.setitem(sys.modules, "numba.np", None)
    with pytest.raises(AttributeError, match="needs Numba"):
        d._numba_type_
    assert not hasattr(d, "_numba_type_")


def test_devicendarray_over_gpu_data(ctx):
    """DeviceNDArray(shape, strides, dtype, gpu_data=mem) lays the array over mem (Numba)."""
    cuda = devarray
    mem = ctx.memalloc(6 * 8)
    src = np.arange(6, dtype=np.float64)
    driver.host_to_device(mem, src, src.nbytes)
    d = cuda.DeviceNDArray((2, 3), (24, 8), np.float64, gpu_data=mem)
    np.testing.assert_array_equal(d.copy_to_host(), src.reshape(2, 3))
    d[0, 0] = 42.0  # the same memory, both ways
    back = np.zeros(6)
    driver.device_to_host(back, mem, back.nbytes)
    assert back[0] == 42.0
    del mem
    gc.collect()
    np.testing.assert_array_equal(d.copy_to_host()[1], [3, 4, 5])  # d keeps mem alive
    with pytest.raises(ValueError, match="needs 64"):
        cuda.DeviceNDArray((8,), (8,), np.float64, gpu_data=ctx.memalloc(48))


def test_pointer_values_of_distinct_allocations_never_overlap(ctx):
    """A pointer value plus an offset reads the allocation it came from on every backend
    (OpenCL: cl_mem handles lie closer together than buffers are large; the values are
    synthetic there, one non-overlapping range per buffer)."""
    mems = [ctx.memalloc(1 << 16) for _ in range(8)]
    for i, m in enumerate(mems):
        m.memset(i)
    for i, m in enumerate(mems):
        assert m.device_pointer.value + m.size <= mems[i + 1].device_pointer.value \
            or mems[i + 1].device_pointer.value + mems[i + 1].size <= m.device_pointer.value \
            if i + 1 < len(mems) else True
        p = driver.MemoryPointer(ctx, m.device_pointer.value + 0x1000, 16)
        h = np.full(16, 255, np.uint8)
        driver.device_to_host(h, p, 16)
        assert (h == i).all(), (i, h)
        d = devarray.DeviceNDArray((16,), (1,), np.uint8, gpu_data=m.view(0x2000, 0x2010))
        assert d.device_ctypes_pointer.value == m.device_pointer.value + 0x2000
        assert (d.copy_to_host() == i).all()
