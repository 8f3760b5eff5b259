"""devarray.jit in checked mode: the simulator's access checks report the kernel's Python file
and lines (an out-of-bounds write, both lines of a race)."""

import numpy as np
import pytest

numba = pytest.importorskip("numba", reason="devarray.jit needs Numba (python3-numba)")
from numba import float32  # noqa: E402

import devarray as cuda  # noqa: E402  (the point: only the import changes)


# ---- checked mode points at Python -------------------------------------------------------

def _checks_on():
    ctx = cuda.current_context()
    return ctx.backend == "host" and ctx.option("kernel_check") == "on"


@cuda.jit
def no_bounds_test(x):
    i = cuda.grid(1)
    x[i] = 1.0  # no `if i < x.size`


@cuda.jit
def missing_barrier(out):
    s = cuda.shared.array(64, dtype=float32)
    t = cuda.threadIdx.x
    s[t] = t
    # a cuda.syncthreads() belongs here
    out[t] = s[(t + 1) % 64]


def test_checked_mode_names_the_python_line_of_an_out_of_bounds_write():
    if not _checks_on():
        pytest.skip("the access checks are off (kernel_check=%s on %s)" % (
            cuda.current_context().option("kernel_check"), cuda.current_context().backend))
    x = cuda.device_array(10, np.float32)
    with pytest.raises(cuda.DevarrayError) as e:
        no_bounds_test[4, 256](x)
    line = no_bounds_test.py_func.__code__.co_firstlineno + 3
    assert "test_jit_checked.py:%d" % line in str(e.value), str(e.value)


def test_checked_mode_names_both_python_lines_of_a_race():
    if not _checks_on():
        pytest.skip("the access checks are off (kernel_check=%s on %s)" % (
            cuda.current_context().option("kernel_check"), cuda.current_context().backend))
    out = cuda.device_array(64, np.float32)
    with pytest.raises(cuda.DevarrayError) as e:
        missing_barrier[1, 64](out)
    first = missing_barrier.py_func.__code__.co_firstlineno
    msg = str(e.value)
    assert "race" in msg, msg
    assert "test_jit_checked.py:%d" % (first + 4) in msg and "test_jit_checked.py:%d" % (first + 6) in msg, msg
