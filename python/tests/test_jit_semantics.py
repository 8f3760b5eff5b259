"""devarray.jit: Python's and Numba's semantics kept where review found the lowering computed
something else (range bounds, while conditions, and/or values, shifts, wide integers,
misaligned arrays, names, round, complex numbers, shared arrays in device functions)."""
import cmath

import numpy as np
import pytest

numba = pytest.importorskip("numba", reason="devarray.jit needs Numba (python3-numba)")
from numba import float64, int32  # noqa: E402

import devarray as cuda  # noqa: E402  (the point: only the import changes)


# ---- found by review: each of these computed something else before its fix -------------

@cuda.jit
def range_bounds_once(out, n, s):
    c = 0
    for i in range(n):
        n = n - 1          # the loop's bound was read again on each iteration
        c += 1
    out[0] = c
    d = 0
    for i in range(0, 10, s):
        s = s + 1
        d += 1
    out[1] = d


def test_range_bounds_are_evaluated_once():
    out = np.zeros(2, np.int64)
    range_bounds_once[1, 1](out, 5, 1)
    assert list(out) == [5, 10]


@cuda.jit
def while_condition_with_statements(out, n, cnt):
    i = 0
    c = 0
    while max(i + 1, 0) < n:      # max needs statements: evaluated on each iteration
        i += 1
        c += 1
        if c > 100:
            break
    out[0] = c
    k = 0
    while cuda.atomic.add(cnt, 0, 1) < 5:
        k += 1
        if k > 100:
            break
    out[1] = k


def test_while_conditions_that_need_statements():
    out = np.zeros(2, np.int64)
    cnt = np.zeros(1, np.int64)
    while_condition_with_statements[1, 1](out, 5, cnt)
    assert list(out) == [4, 5] and cnt[0] == 6


@cuda.jit
def and_or_values(out, a, b, c):
    x = a and b
    out[0] = x
    y = (a or c) if b > 0 else -1
    out[1] = y


def test_and_or_give_pythons_values():
    for a, b, c in ((0, 2, 3), (1, 2, 3), (4, 0, 5)):
        out = np.zeros(2, np.int64)
        and_or_values[1, 1](out, a, b, c)
        assert list(out) == [a and b, (a or c) if b > 0 else -1], (a, b, c)


@cuda.jit
def narrow_ops(a, b, out):
    i = cuda.grid(1)
    if i < a.size:
        out[i, 0] = a[i] << 28      # int32 << int64 is an int64 in Numba
        out[i, 1] = abs(b[i])       # abs and - of an int8 stay int8
        out[i, 2] = -b[i]


def test_shifts_and_small_integers_follow_numba():
    a = np.array([16, 3], np.int32)
    b = np.array([-128, -5], np.int8)
    out = np.zeros((2, 3), np.int64)
    narrow_ops[1, 2](a, b, out)
    assert out.tolist() == [[16 << 28, -128, -128], [3 << 28, 5, 5]]


def test_python_ints_beyond_int64_specialize_as_uint64():
    @cuda.jit
    def put(out, v):
        out[0] = v
    out = np.zeros(1, np.uint64)
    put[1, 1](out, 5)
    put[1, 1](out, 2 ** 63 + 7)
    assert out[0] == 2 ** 63 + 7
    with pytest.raises(OverflowError):
        put[1, 1](out, 2 ** 64)


def test_a_misaligned_numpy_array_is_written_back():
    @cuda.jit("void(double[:])")
    def fill(x):
        i = cuda.grid(1)
        if i < x.shape[0]:
            x[i] = i
    raw = np.zeros(10 * 8 + 8, dtype=np.uint8)
    z = np.ndarray(9, buffer=raw[4:-4], dtype=np.double)  # not 8-byte aligned
    fill[1, 16](z)
    np.testing.assert_array_equal(z, np.arange(9))


def test_kernel_named_like_a_c_library_function():
    @cuda.jit
    def div(x):  # `div` is <stdlib.h>'s too
        x[0] /= 2.0
    x = np.ones(1)
    div[1, 1](x)
    assert x[0] == 0.5


def test_round_to_ndigits_is_numbas():
    @cuda.jit
    def r(x, out):
        i = cuda.grid(1)
        if i < x.size:
            out[i] = round(x[i], 2)
    x = np.array([1.005, 2.675, -0.125, 1e300, 0.5])
    out = np.zeros_like(x)
    r[1, 8](x, out)
    np.testing.assert_array_equal(out, [round(v, 2) for v in x])


@cuda.jit
def complex_ops(x, y, out, s):
    i = cuda.grid(1)
    if i < x.size:
        z = x[i] * y[i] + s
        out[i, 0] = z
        out[i, 1] = x[i] / y[i]
        out[i, 2] = x[i] ** y[i]
        out[i, 3] = x[i] ** 3
        out[i, 4] = abs(x[i]) + z.real - z.imag
        out[i, 5] = z.conjugate()
        out[i, 6] = cmath.exp(x[i]) + cmath.sqrt(y[i]) + cmath.log(x[i])
        out[i, 7] = -x[i] + complex(1.0, 2.0)


@pytest.mark.parametrize("dt, tol", [(np.complex128, 1e-12), (np.complex64, 2e-5)])
def test_complex_numbers(dt, tol):
    x = np.array([1 + 2j, -3 + 0.5j, 0.25 - 1j], dt)
    y = np.array([0.5 - 1j, 2 + 2j, -1 - 1j], dt)
    s = dt(2 - 1j)
    out = np.zeros((3, 8), dt)
    complex_ops[1, 4](x, y, out, s)
    xd, yd = x.astype(np.complex128), y.astype(np.complex128)
    z = xd * yd + complex(s)
    ref = np.stack([z, xd / yd, xd ** yd, xd ** 3, abs(xd) + z.real - z.imag, z.conj(),
                    np.exp(xd) + np.sqrt(yd) + np.log(xd), -xd + (1 + 2j)], axis=1)
    np.testing.assert_allclose(out, ref, rtol=tol, atol=tol)


@cuda.jit(device=True)
def block_sum_into(x, out):
    s = cuda.shared.array(32, dtype=float64)  # declared in a device function
    t = cuda.threadIdx.x
    s[t] = x[t]
    cuda.syncthreads()
    if t == 0:
        acc = 0.0
        for k in range(32):
            acc += s[k]
        out[0] = acc


@cuda.jit
def shared_in_device_function(x, out):
    block_sum_into(x, out)


def test_shared_array_declared_in_a_device_function():
    x = np.arange(32, dtype=np.float64)
    out = np.zeros(1)
    shared_in_device_function[1, 32](x, out)
    assert out[0] == x.sum()


def test_kernels_of_no_arguments_and_with_opencl_builtin_names():
    hits = cuda.to_device(np.zeros(1, np.int32))

    @cuda.jit
    def atomic_add(x):  # OpenCL's built-in name
        cuda.atomic.add(x, 0, 1)

    @cuda.jit
    def nothing():
        s = cuda.shared.array(1, dtype=int32)  # noqa: F841
    nothing[1, 1]()
    atomic_add[2, 4](hits)
    assert hits.copy_to_host()[0] == 8
