"""Numba names that were missing (issue 34, item 3): register() as a context manager,
mapped_array's MappedNDArray, as_cuda_array / from_cuda_array_interface / is_cuda_array,
the exported stream of __cuda_array_interface__, detect(), get_current_device(), close()
while arrays live, and the synchronization of an item assignment without a stream."""
import gc
import weakref
from unittest import mock

import numpy as np
import pytest

import devarray as cuda
from devarray import _array, _context, _current


# ---- register(*arrays): ROC's form ---------------------------------------------------------

def test_register_as_context_manager(ctx):
    a, b = np.zeros(5), np.ones(3)
    with cuda.register(a, b) as r:
        assert cuda.is_pinned(a) and cuda.is_pinned(b)
        assert "2 array" in repr(r)
    assert not cuda.is_pinned(a) and not cuda.is_pinned(b)
    with pytest.raises(KeyError):
        with cuda.register(a):
            raise KeyError("inside")
    assert not cuda.is_pinned(a)  # deregistered after an exception too


def test_register_plain_call_and_early_deregister(ctx):
    a = np.zeros(4)
    cuda.register(a)  # the plain form: registered until deregister
    assert cuda.is_pinned(a)
    cuda.deregister(a)
    assert not cuda.is_pinned(a)
    with pytest.raises(cuda.MisuseError):
        cuda.deregister(a)  # not registered
    with cuda.register(a):
        cuda.deregister(a)  # deregistered inside the block: the exit leaves it alone
    assert not cuda.is_pinned(a)


def test_register_refuses_before_registering(ctx):
    a = np.zeros(4)
    with pytest.raises(TypeError, match="NumPy arrays"):
        cuda.register(a, [1, 2])
    assert not cuda.is_pinned(a)


# ---- mapped_array: MappedNDArray -----------------------------------------------------------

def test_mapped_array_is_a_device_array(ctx, no_leak):
    m = cuda.mapped_array(10, np.float32)
    assert isinstance(m, cuda.MappedNDArray) and isinstance(m, np.ndarray)
    assert m.__cuda_memory__ and m.__cuda_ndarray__ and m.stream == 0
    m[:] = np.arange(10)
    np.testing.assert_array_equal(m.copy_to_host(), np.arange(10))
    m.copy_to_device(cuda.to_device(np.full(10, 2, np.float32)))
    np.testing.assert_array_equal(m, 2)  # written in place, seen by NumPy
    m.copy_to_device(np.arange(10, dtype=np.float32))
    np.testing.assert_array_equal(m, np.arange(10))
    parts = m.split(4)
    assert [p.shape for p in parts] == [(4,), (4,), (2,)]
    np.testing.assert_array_equal(parts[2].copy_to_host(), [8, 9])
    assert m.gpu_data.size == 40 and m.alloc_size == 40
    assert cuda.to_device(m) is m  # device memory already, as Numba's auto_device
    del parts


def test_mapped_array_views_and_bind(ctx, no_leak):
    m = cuda.mapped_array((4, 3), np.int32)
    m[:] = np.arange(12).reshape(4, 3)
    row = m[1]
    assert isinstance(row, cuda.MappedNDArray)
    np.testing.assert_array_equal(row.copy_to_host(), [3, 4, 5])
    itemsize = m.dtype.itemsize
    assert row.device_ctypes_pointer.value - m.device_ctypes_pointer.value == 3 * itemsize
    col = m[:, 2]
    np.testing.assert_array_equal(col.copy_to_host(), [2, 5, 8, 11])
    col.copy_to_device(np.array([-1, -2, -3, -4], np.int32))
    np.testing.assert_array_equal(m[:, 2], [-1, -2, -3, -4])
    s = cuda.stream()
    b = m.bind(s)
    assert isinstance(b, cuda.MappedNDArray) and b.stream is s and m.stream == 0
    out = b.copy_to_host()  # on the bound stream
    s.synchronize()
    np.testing.assert_array_equal(out, m)
    with pytest.raises(cuda.ArgumentError):
        m.copy_to_device(np.zeros(5, np.int32))  # shape mismatch, nothing written
    np.testing.assert_array_equal(m[:, 2], [-1, -2, -3, -4])
    del row, col, b, s


def test_mapped_array_keeps_memory_alive():
    m = cuda.mapped_array(4)
    m[:] = 7
    d = cuda.as_cuda_array(m)
    del m
    gc.collect()
    np.testing.assert_array_equal(d.copy_to_host(), 7)


def test_mapped_ndarray_without_mapped_memory():
    v = np.zeros(3).view(cuda.MappedNDArray)
    with pytest.raises(TypeError, match="not made by mapped_array"):
        v.copy_to_host()


# ---- as_cuda_array, from_cuda_array_interface, is_cuda_array ----------------------------------

class Foreign:
    """An object with a __cuda_array_interface__ (as CuPy's, PyTorch's arrays)."""

    def __init__(self, **cai):
        self.__cuda_array_interface__ = dict({"version": 3}, **cai)


def test_as_cuda_array_of_devarray_memory(ctx, no_leak):
    d = cuda.to_device(np.arange(6.0))
    f = Foreign(shape=(3,), typestr="<f8", data=(d.device_ctypes_pointer.value + 16, False),
                stream=None)
    assert cuda.is_cuda_array(f)
    v = cuda.as_cuda_array(f)
    assert isinstance(v, cuda.DeviceNDArray) and v.shape == (3,)
    np.testing.assert_array_equal(v.copy_to_host(), [2, 3, 4])
    v.copy_to_device(np.array([20.0, 30.0, 40.0]))  # a view: d sees it
    np.testing.assert_array_equal(d.copy_to_host(), [0, 1, 20, 30, 40, 5])
    # strides given, and the owner kept alive by the view
    f2 = Foreign(shape=(2,), typestr="<f8", strides=(16,),
                 data=(d.device_ctypes_pointer.value, False))
    w = cuda.as_cuda_array(f2)
    ref = weakref.ref(f2)
    del f2
    gc.collect()
    assert ref() is not None
    np.testing.assert_array_equal(w.copy_to_host(), [0, 20])
    del v, w, d
    gc.collect()
    assert ref() is None


def test_as_cuda_array_of_device_arrays(ctx, no_leak):
    d = cuda.to_device(np.arange(4))
    v = cuda.as_cuda_array(d)  # devarray's own arrays on any backend
    assert v is not d and v.stream == 0
    np.testing.assert_array_equal(v.copy_to_host(), np.arange(4))
    s = cuda.stream()
    e = cuda.to_device(np.arange(4), stream=s)
    with mock.patch.object(cuda.Stream, "synchronize") as sync:
        cuda.as_cuda_array(e)
    sync.assert_called_once()
    with mock.patch.object(cuda.Stream, "synchronize") as sync:
        cuda.as_cuda_array(e, sync=False)
    sync.assert_not_called()
    s.synchronize()
    del v, d, e, s


def test_as_cuda_array_refusals(ctx):
    with pytest.raises(TypeError, match="cuda array interface"):
        cuda.as_cuda_array(np.zeros(3))  # Numba's TypeError
    assert not cuda.is_cuda_array(np.zeros(3))
    host = np.zeros(4)
    d = cuda.to_device(np.arange(4.0))
    p = d.device_ctypes_pointer.value
    checked = [] if ctx.backend == "cuda" else [  # (cuda: the driver checks on use)
        (dict(shape=(4,), typestr="<f8", data=(host.ctypes.data, False)),
         cuda.ArgumentError, "not"),
        (dict(shape=(5,), typestr="<f8", data=(p, False)), cuda.ArgumentError, "outside")]
    for cai, exc, words in checked + [
            (dict(shape=(2,), typestr="<f8", data=(p, False), strides=(-8,)),
             cuda.ArgumentError, "not device memory"),
            (dict(shape=(1,), typestr="<f8", data=(0, False)), cuda.ArgumentError,
             "not device memory"),
            (dict(shape=(1,), typestr="<f8", data=(p, False), mask=object()),
             NotImplementedError, "Masked"),
            (dict(shape=(1,), typestr="<f8", data=(p, False), stream=0), ValueError,
             "stream"),
            (dict(shape=(1,), typestr="<f8", data=(p, False), stream=True), ValueError,
             "stream"),
            (dict(shape=(1,), typestr="<f8", data=(p, False), version=9), ValueError,
             "version"),
            (dict(shape=(-1,), typestr="<f8", data=(p, False)), ValueError, "shape"),
            (dict(shape=(2,), typestr="<f8", data=(p, False), strides=(8,) * 2), ValueError,
             "strides"),
            (dict(shape=(1,), typestr="<f8", data=p), ValueError, "data"),
            (dict(typestr="<f8", data=(p, False)), KeyError, "shape"),
            (dict(shape=(1,), data=(p, False)), KeyError, "typestr")]:
        with pytest.raises(exc, match=words):
            cuda.as_cuda_array(Foreign(**cai))
    with pytest.raises(TypeError, match="dict"):
        cuda.from_cuda_array_interface([("shape", (1,))])
    np.testing.assert_array_equal(d.copy_to_host(), np.arange(4.0))  # nothing changed
    assert not host.any()


def test_from_cuda_array_interface_stream_sync(ctx, no_leak, monkeypatch):
    d = cuda.to_device(np.arange(3.0))
    p = d.device_ctypes_pointer.value
    calls = []
    monkeypatch.setattr(cuda.Context, "synchronize", lambda self: calls.append(self))
    for stream, sync, waits in ((None, True, 0), (1, True, 1), (2, True, 1), (12345, True, 1),
                                (12345, False, 0)):
        calls.clear()
        v = cuda.from_cuda_array_interface(
            {"shape": (3,), "typestr": "<f8", "data": (p, False), "version": 3,
             "stream": stream}, owner=d, sync=sync)
        assert len(calls) == waits and v.stream == 0
        del v
    monkeypatch.undo()
    e = cuda.from_cuda_array_interface({"shape": (0,), "typestr": "<i4", "data": (0, False),
                                        "version": 3})
    assert e.shape == (0,) and e.dtype == np.int32  # empty: no memory needed
    del d, e


def test_exported_stream(ctx):
    """__cuda_array_interface__'s stream (cuda backend only: elsewhere no interface)."""
    assert _array._cai_stream(0) is None
    assert _array._cai_stream(cuda.legacy_default_stream()) == 1
    assert _array._cai_stream(cuda.per_thread_default_stream()) == 2
    if ctx.backend != "cuda":
        assert not cuda.is_cuda_array(cuda.to_device(np.zeros(2)))
        return
    s = cuda.stream()
    d = cuda.to_device(np.zeros(2), stream=s)
    cai = d.__cuda_array_interface__
    assert isinstance(cai["stream"], int) and cai["stream"] not in (0, 1, 2)
    assert cuda.to_device(np.zeros(2)).__cuda_array_interface__["stream"] is None
    with mock.patch.object(cuda.Context, "synchronize") as sync:
        v = cuda.as_cuda_array(Foreign(**cai))
    sync.assert_called_once()
    s.synchronize()
    np.testing.assert_array_equal(v.copy_to_host(), [0, 0])


# ---- detect, get_current_device, close ---------------------------------------------------

def test_detect(ctx, capsys):
    assert cuda.detect() is True
    out = capsys.readouterr().out
    assert "Found 1 devices" in out or "Found" in out
    assert ctx.device.name in out and "Compute Capability" in out and "Summary:" in out
    assert cuda.list_devices() is cuda.gpus


def test_get_current_device(ctx):
    dev = cuda.get_current_device()
    assert dev is ctx.device
    assert isinstance(dev.name, str) and dev.name and dev.id == ctx.device_id
    assert isinstance(dev.compute_capability, tuple) and len(dev.compute_capability) == 2
    assert dev.PCI_BUS_ID == dev.pci_bus_id


def test_close_while_arrays_live():
    """Numba's close() frees live arrays' memory (they dangle); devarray's retires the
    context: its arrays keep working, the next call gets a new context, and the old one is
    destroyed once its last object goes."""
    gc.collect()
    cuda.close()
    old = cuda.current_context()
    d = cuda.to_device(np.arange(3.0))
    s = cuda.stream()
    d.copy_to_host(stream=s)
    cuda.close()
    assert old in _context._retired and old.handle
    np.testing.assert_array_equal(d.copy_to_host(), [0, 1, 2])  # still works
    d[0] = 5.0  # on its own context's default stream
    assert d[0] == 5.0
    new = cuda.current_context()
    assert new is not old
    del d, s
    gc.collect()  # the last objects gone: the retired context is destroyed
    assert old not in _context._retired and old.handle is None
    cuda.get_current_device().reset()  # Device.reset(): closes the current context
    assert _current.ctx is None
    assert cuda.current_context() is not new


# ---- d[i] = x synchronizes, as Numba's (CudaArraySetting.test_sync) ------------------------

def test_setitem_synchronizes_without_a_stream(ctx):
    d = cuda.to_device(np.arange(5))
    with mock.patch.object(cuda.Stream, "synchronize") as sync:
        d[0] = 10
    sync.assert_called_once()
    assert d[0] == 10
    s = cuda.stream()
    for bound in (d.bind(s), d.bind(cuda.default_stream())):
        with mock.patch.object(cuda.Stream, "synchronize") as sync:
            bound[1] = 11
        sync.assert_not_called()
    with mock.patch.object(cuda.Stream, "synchronize") as sync:
        d.setitem(2, 12, stream=s)
    sync.assert_not_called()
    s.synchronize()
    cuda.synchronize()
    np.testing.assert_array_equal(d.copy_to_host(), [10, 11, 12, 3, 4])
    r = cuda.to_device(np.zeros(1, [("a", np.int32), ("b", np.float64)])[0])
    with mock.patch.object(cuda.Stream, "synchronize") as sync:
        r["a"] = 3
    sync.assert_called_once()
    assert r["a"] == 3


def test_pinned_and_mapped_array_like():
    a = np.zeros((3, 4), dtype=np.float32, order="F")
    p = cuda.pinned_array_like(a)
    assert p.shape == a.shape and p.dtype == a.dtype and p.flags["F_CONTIGUOUS"]
    assert cuda.is_pinned(p)
    m = cuda.mapped_array_like(np.arange(6, dtype=np.int16))
    assert isinstance(m, cuda.MappedNDArray) and m.shape == (6,) and m.dtype == np.int16
    m[:] = 3
    assert (m.copy_to_host() == 3).all()


def test_profiling_switches_do_nothing_and_nest():
    calls = []
    with cuda.profiling():
        cuda.profile_start()
        cuda.profile_stop()
        calls.append(1)
    assert calls == [1]
    from devarray import driver
    assert driver.profiling is cuda.profiling


def test_array_like_of_a_strided_view_follows_its_stride_order():
    view = np.zeros((10, 12), order="F")[::2, ::2]
    want = np.zeros_like(view)
    for f in (cuda.pinned_array_like, cuda.mapped_array_like):
        like = f(view)
        assert like.strides == want.strides and like.flags["F_CONTIGUOUS"], f
