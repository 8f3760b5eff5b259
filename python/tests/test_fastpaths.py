"""The per-call paths of device_array and to_device (issue 23): one library call each, shape
passed packed, dtypes cached by the object given, strides read from the library when first
used. Each test compares what those paths report with what the library itself says."""
import ctypes

import numpy as np
import pytest

import devarray as cuda
from devarray._lib import lib


def lib_layout(d):
    """(shape, strides) as the library reports them for d's handle."""
    nd = lib.dv_array_ndim(d.handle)
    if not nd:
        return (), ()
    return (tuple(lib.dv_array_shape(d.handle)[:nd]),
            tuple(lib.dv_array_strides(d.handle)[:nd]))


@pytest.mark.parametrize("shape", [7, (7,), (3, 4), (2, 1, 5), (), (0,), (2, 0, 3),
                                   np.int64(5), [4, 2]])
def test_device_array_layout_matches_library(no_leak, shape):
    d = cuda.device_array(shape, dtype=np.float32)
    want = np.empty(shape, np.float32)
    assert d.shape == want.shape
    assert (d.shape, d.strides) == lib_layout(d)
    if want.size:  # (NumPy words empty arrays' strides its own way)
        assert d.strides == want.strides


@pytest.mark.parametrize("dtype", [np.float32, "float32", "f4", np.dtype("<f4"), float,
                                   np.int16, "complex128"])
def test_device_array_dtype_spellings(no_leak, dtype):
    # the cache is keyed by what the caller passed: every spelling, twice, the same dtype
    for _ in range(2):
        d = cuda.device_array(3, dtype=dtype)
        assert d.dtype == np.dtype(dtype)
        assert lib.dv_dtype_itemsize(lib.dv_array_dtype(d.handle)) == np.dtype(dtype).itemsize
        h = np.arange(3).astype(dtype)
        d.copy_to_device(h)
        assert np.array_equal(d.copy_to_host(), h)


def test_device_array_bad_shapes_raise(no_leak):
    with pytest.raises(cuda.ArgumentError):
        cuda.device_array((-1,), np.float32)
    with pytest.raises((cuda.ArgumentError, OverflowError)):
        cuda.device_array((1 << 40, 1 << 40), np.float32)
    with pytest.raises((cuda.ArgumentError, OverflowError, ValueError)):
        cuda.device_array((1 << 70,), np.float32)  # past int64: not packed silently


def test_device_array_order_f_and_strides_still_honoured(no_leak):
    d = cuda.device_array((3, 4), np.float64, order="F")
    assert d.strides == np.empty((3, 4), order="F").strides == lib_layout(d)[1]
    e = cuda.device_array((3,), np.float64, strides=(16,))
    assert e.strides == (16,) == lib_layout(e)[1]


def test_to_device_relaxed_strides_reports_library_strides(no_leak):
    # C-contiguous by NumPy's relaxed rule, with an odd stride on a size-1 axis: the device
    # array is laid out dense by the library, and reports those strides
    base = np.arange(12.0).reshape(3, 4)
    a = np.lib.stride_tricks.as_strided(base, shape=(1, 3, 4), strides=(8, 32, 8))
    assert a.flags.c_contiguous
    d = cuda.to_device(a)
    assert d.strides == lib_layout(d)[1]
    assert np.array_equal(d.copy_to_host(), a)


def test_to_device_read_only_and_offset_sources(no_leak):
    a = np.arange(20, dtype=np.int32)
    a.flags.writeable = False
    d = cuda.to_device(a[3:11])  # read-only, data pointer inside the buffer
    assert np.array_equal(d.copy_to_host(), a[3:11])
    e = cuda.to_device(np.arange(30.0).reshape(5, 6)[:, ::2])  # strided source
    assert np.array_equal(e.copy_to_host(), np.arange(30.0).reshape(5, 6)[:, ::2])
    z = cuda.to_device(np.empty(0, np.float32))
    assert z.shape == (0,)


def test_to_device_pinned_source_found_by_address(no_leak):
    p = cuda.pinned_array(8, np.float32)
    p[:] = np.arange(8)
    d = cuda.to_device(p)
    assert np.array_equal(d.copy_to_host(), np.arange(8, dtype=np.float32))


def test_result_slot_per_thread(no_leak):
    import threading
    errors = []

    def work(k):
        try:
            for i in range(200):
                d = cuda.device_array(k + 1, np.uint8)
                if d.shape != (k + 1,) or lib.dv_array_ndim(d.handle) != 1 or \
                        lib.dv_array_shape(d.handle)[0] != k + 1:
                    errors.append((k, i))
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    ts = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert errors == []


def test_release_at_del(ctx):
    before = ctx.raw_stats().arrays.current
    d = cuda.device_array(16, np.float32)
    assert ctx.raw_stats().arrays.current == before + 1
    del d
    assert ctx.raw_stats().arrays.current == before
    assert ctypes.sizeof(ctypes.c_void_p) == 8
