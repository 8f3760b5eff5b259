"""Numba's devicearray module functions (issue 25): auto_device, from_record_like,
array_core, is_contiguous, sentry_contiguous, verify_cuda_ndarray_interface; and
deallocations.clear() draining what the frees queue."""
import numpy as np
import pytest

import devarray
from devarray import devicearray as dam
from devarray._lib import NotSupportedError

REC = np.dtype([("a", np.int32), ("b", np.float64)])


def test_auto_device_array_copies_and_converts():
    h = np.arange(12, dtype=np.int16).reshape(3, 4)
    d, conv = dam.auto_device(h)
    assert conv is True
    assert isinstance(d, devarray.DeviceNDArray)
    assert d.shape == (3, 4) and d.dtype == h.dtype
    np.testing.assert_array_equal(d.copy_to_host(), h)
    # device memory comes back as it is, unconverted
    same, conv2 = dam.auto_device(d)
    assert same is d and conv2 is False


def test_auto_device_no_copy_and_list_and_stream():
    d, conv = dam.auto_device(np.ones(5), copy=False)
    assert conv and d.shape == (5,)
    s = devarray.stream()
    d2, _ = dam.auto_device([1.5, 2.5], stream=s)
    s.synchronize()
    np.testing.assert_array_equal(d2.copy_to_host(), [1.5, 2.5])
    f = np.asfortranarray(np.arange(6.0).reshape(2, 3))
    d3, _ = dam.auto_device(f)
    np.testing.assert_array_equal(d3.copy_to_host(), f)


def test_auto_device_record():
    h = np.zeros(1, REC)
    h[0] = (7, 2.5)
    d, conv = dam.auto_device(h[0])
    assert conv and isinstance(d, devarray.DeviceRecord)
    back = np.zeros(1, REC)[0]
    assert d.copy_to_host(back) is back
    assert back["a"] == 7 and back["b"] == 2.5


def test_auto_device_refuses_strided_and_foreign():
    with pytest.raises(ValueError, match="non-contiguous buffer"):
        dam.auto_device(np.arange(10)[::2])

    class Foreign:  # a NULL pointer (auto_device takes a valid one: as_cuda_array)
        __cuda_array_interface__ = {"shape": (1,), "typestr": "<f8", "data": (0, False),
                                    "version": 2}
    with pytest.raises(devarray.ArgumentError, match="not device memory"):
        dam.auto_device(Foreign())
    d = devarray.to_device(np.arange(3.0))

    class Valid:
        __cuda_array_interface__ = {"shape": (2,), "typestr": "<f8", "version": 2,
                                    "data": (d.device_ctypes_pointer.value + 8, False)}
    v, conv = dam.auto_device(Valid())
    assert conv is False and list(v.copy_to_host()) == [1.0, 2.0]


def test_from_record_like():
    h = np.zeros(1, REC)[0]
    r = dam.from_record_like(h)
    assert isinstance(r, devarray.DeviceRecord) and r.dtype == REC
    r2 = dam.from_record_like(r)
    assert r2.dtype == REC and r2.device_ctypes_pointer.value != r.device_ctypes_pointer.value
    with pytest.raises(NotSupportedError, match="gpu_data"):
        dam.from_record_like(h, gpu_data=r.gpu_data)


def test_array_core_and_is_contiguous():
    b = np.broadcast_to(np.arange(3.0), (4, 3))
    assert dam.array_core(b).shape == (3,)
    assert dam.is_contiguous(b)
    assert not dam.is_contiguous(np.arange(10)[::2])
    assert dam.is_contiguous(np.zeros((3, 1, 4))[:, :, :])
    assert not dam.is_contiguous(np.zeros((3, 4), order="F"))
    e = np.zeros((0, 3))
    assert dam.array_core(e) is e
    dam.sentry_contiguous(b)  # the stored core is contiguous: no error
    dam.sentry_contiguous(np.zeros((3, 4), order="F"))
    with pytest.raises(ValueError) as ei:
        dam.sentry_contiguous(np.zeros((4, 4))[:, ::2])
    assert str(ei.value) == dam.errmsg_contiguous_buffer


def test_verify_cuda_ndarray_interface():
    dam.verify_cuda_ndarray_interface(devarray.device_array(3))
    with pytest.raises(ValueError, match="require an cuda ndarray object"):
        dam.verify_cuda_ndarray_interface(np.zeros(3))

    class Bad:
        __cuda_ndarray__ = True
        shape = [3]
    with pytest.raises(AttributeError, match="shape must be of type"):
        dam.verify_cuda_ndarray_interface(Bad())


def test_clear_drains_what_frees_queue(ctx):
    ctx.deallocations.clear()
    a = devarray.device_array(4, stream=devarray.stream())
    del a
    ctx.deallocations.clear()
    assert len(ctx.deallocations) == 0
