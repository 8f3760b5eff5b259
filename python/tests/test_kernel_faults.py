"""A kernel's access outside its arrays (issue 37): on the host simulator's default fast mode
the launch raises DV_ERR_KERNEL_FAULT naming the kernel, the interpreter goes on, and other
arrays keep their values (the device memory lies between guard pages, never on the C heap)."""
import os

import numpy as np
import pytest

import devarray as cuda

BACKEND = os.environ.get("DV_BACKEND", "host")
pytestmark = pytest.mark.skipif(not BACKEND.startswith("host"),
                                reason="the simulator's guard pages (a GPU reports its own)")

FILL = """
DV_KERNEL(fill_all, DV_ARRAY(float, a)) {
  DV_BIND(float, a);
  a[dv_global_id(0)] = 1.0f; /* no if (i < n) */
}
DV_KERNEL(poke_at, DV_ARRAY(float, a), dv_i64 at) {
  DV_BIND(float, a);
  if (dv_global_id(0) == 0) a[at] = 2.0f;
}
"""


@pytest.fixture(scope="module")
def mod():
    return cuda.Module(FILL, name="faults.dvk")


def _fault(excinfo, kernel):
    e = excinfo.value
    assert e.name == "DV_ERR_KERNEL_FAULT", str(e)
    assert "kernel %s" % kernel in e.detail, e.detail


def test_missing_bounds_check_raises(mod):
    other = cuda.to_device(np.arange(1000, dtype=np.float32))
    d = cuda.to_device(np.zeros(10, np.float32))
    for _ in range(3):  # the interpreter and the context go on
        with pytest.raises(cuda.DevarrayError) as e:
            mod.get("fill_all")[4, 256](d)
        _fault(e, "fill_all")
    np.testing.assert_array_equal(other.copy_to_host(), np.arange(1000, dtype=np.float32))
    np.testing.assert_array_equal(d.copy_to_host(), np.ones(10, np.float32))


@pytest.mark.parametrize("at", [10, -1, 10 + 64, 10 + 16384, -16384])
def test_single_writes_outside(mod, at):
    other = cuda.to_device(np.arange(1000, dtype=np.float32))
    d = cuda.to_device(np.full(10, 3.0, np.float32))
    with pytest.raises(cuda.DevarrayError) as e:
        mod.get("poke_at")[1, 32](d, np.int64(at))
    _fault(e, "poke_at")
    np.testing.assert_array_equal(d.copy_to_host(), np.full(10, 3.0, np.float32))
    np.testing.assert_array_equal(other.copy_to_host(), np.arange(1000, dtype=np.float32))


def test_numpy_argument_and_asynchronous_launch(mod):
    a = np.zeros(10, np.float32)
    with pytest.raises(cuda.DevarrayError) as e:
        mod.get("fill_all")[4, 256](a)
    _fault(e, "fill_all")
    d = cuda.to_device(np.zeros(10, np.float32))
    s = cuda.stream()
    with pytest.raises(cuda.DevarrayError) as e:
        mod.get("fill_all")[4, 256, s](d)
        s.synchronize()
    _fault(e, "fill_all")
    s.synchronize()  # reported once


def test_jit_kernel_without_bounds_check():
    pytest.importorskip("numba", reason="devarray.jit needs Numba (python3-numba)")

    @cuda.jit
    def fill_jit(a):
        i = cuda.grid(1)
        a[i] = 1.0

    other = cuda.to_device(np.arange(100, dtype=np.float32))
    d = cuda.to_device(np.zeros(10, np.float32))
    with pytest.raises(cuda.DevarrayError) as e:
        fill_jit[4, 256](d)
    assert e.value.name in ("DV_ERR_KERNEL_FAULT", "DV_ERR_INDEX_OUT_OF_BOUNDS"), str(e.value)
    np.testing.assert_array_equal(other.copy_to_host(), np.arange(100, dtype=np.float32))
