"""Every error path raises the right exception, with the status name and the detail."""
import numpy as np
import pytest

import devarray as cuda


def test_status_in_exception(no_leak):
    d = cuda.to_device(np.zeros(4))
    with pytest.raises(cuda.ArgumentError) as e:
        d.copy_to_host(np.zeros(5))
    assert e.value.name == "DV_ERR_SHAPE_MISMATCH" and e.value.status == 103
    assert e.value.detail  # the library's words; str() has Numba's (test_numpy_errors.py)
    assert isinstance(e.value, ValueError)
    with pytest.raises(cuda.ArgumentError) as e:
        d.copy_to_host(np.zeros(4, np.float32))
    assert e.value.name == "DV_ERR_DTYPE_MISMATCH" and isinstance(e.value, TypeError)
    with pytest.raises(cuda.ArgumentError) as e:
        d.copy_to_device(np.zeros(3))
    assert e.value.name == "DV_ERR_SHAPE_MISMATCH"
    with pytest.raises(cuda.ArgumentError) as e:
        cuda.to_device(np.zeros(3), to=d)
    del d


def test_index_errors(no_leak):
    d = cuda.to_device(np.zeros((3, 4)))
    with pytest.raises(IndexError) as e:
        d[3]
    assert e.value.name == "DV_ERR_INDEX"
    with pytest.raises(IndexError) as e:
        d[1, 2, 3]
    assert e.value.name == "DV_ERR_TOO_MANY_INDICES"
    with pytest.raises(cuda.ArgumentError) as e:
        d[::0]
    assert e.value.name == "DV_ERR_BAD_STEP"
    with pytest.raises(IndexError):
        d[None]
    with pytest.raises(IndexError):
        d[1.5]
    del d


def test_shape_errors(no_leak):
    with pytest.raises(cuda.ArgumentError) as e:
        cuda.device_array((-1, 2))
    assert e.value.name == "DV_ERR_BAD_SHAPE"
    with pytest.raises(ValueError):
        cuda.device_array(3, order="X")
    with pytest.raises(cuda.ArgumentError) as e:
        cuda.device_array(3, np.float64, strides=(3,))
    assert e.value.name == "DV_ERR_BAD_STRIDES"
    with pytest.raises(TypeError):
        cuda.device_array(3, np.dtype(">f8"))
    d = cuda.to_device(np.zeros((3, 4)))
    with pytest.raises(cuda.ArgumentError) as e:
        d.reshape(5, 5)
    assert e.value.name == "DV_ERR_RESHAPE_SIZE"
    with pytest.raises(cuda.ArgumentError) as e:
        d.reshape(3, 4, order="Q")
    assert e.value.name == "DV_ERR_BAD_ORDER"
    with pytest.raises(cuda.ArgumentError):
        d.split(2)  # 2-D: Numba's contract is 1-D
    with pytest.raises(cuda.ArgumentError):
        d.ravel().split(0)
    with pytest.raises(ValueError):
        d.transpose((0, 0))
    with pytest.raises(ValueError):
        d[:, ::2].view(np.float32)
    with pytest.raises(ValueError):
        d[0] = np.zeros(3)
    dt = np.dtype([("x", np.float64)])
    r = cuda.to_device(np.zeros(2, dt))
    with pytest.raises(cuda.ArgumentError) as e:
        r.field("y")
    assert e.value.name == "DV_ERR_UNKNOWN_FIELD"
    with pytest.raises(cuda.ArgumentError) as e:
        d.field("x")
    assert e.value.name == "DV_ERR_BAD_DTYPE"
    del d, r


def test_misuse_errors(ctx):
    with pytest.raises(cuda.MisuseError) as e:  # a defer_cleanup end with no scope open
        cuda._lib.check(cuda._clib.dv_defer_cleanup_end(ctx.handle))
    assert e.value.name == "DV_ERR_MISUSE" and e.value.detail
    s = cuda.stream()
    with pytest.raises(cuda.MisuseError):  # auto_synchronize's end without its begin
        cuda._lib.check(cuda._clib.dv_stream_auto_sync_end(s.handle))
    del s
    d = cuda.to_device(np.zeros(2))
    with pytest.raises(cuda.MisuseError) as e:  # an array is alive (close() retires instead)
        cuda._lib.check(cuda._clib.dv_context_destroy(ctx.handle))
    assert e.value.name == "DV_ERR_BUSY"
    assert cuda.current_context() is ctx
    with pytest.raises(TypeError):
        d.copy_to_host(stream=5)
    del d


def test_backend_errors():
    ok, why = cuda.backend_available("nonexistent")
    assert not ok and why
    assert cuda.error_class(301) is cuda.BackendUnavailableError
    assert issubclass(cuda.OutOfMemoryError, MemoryError)


def test_out_of_memory(ctx):
    with pytest.raises(MemoryError) as e:
        cuda.device_array(1 << 60, np.uint8)
    assert e.value.name in ("DV_ERR_OUT_OF_MEMORY", "DV_ERR_OVERFLOW") or \
        isinstance(e.value, cuda.OutOfMemoryError)
