"""devarray.jit: what kernels are given and call: slices with run-time bounds, tuples, CPU
functions, foreign arrays (CUDA array interface, DLPack) used in place, records, Numba's
types in the annotations."""
import math

import numpy as np
import pytest

numba = pytest.importorskip("numba", reason="devarray.jit needs Numba (python3-numba)")
from numba import int32  # noqa: E402

import devarray as cuda  # noqa: E402  (the point: only the import changes)


# ---- arguments --------------------------------------------------------------------------

@cuda.jit(device=True)
def total(v):
    s = 0
    for k in range(v.shape[0]):
        s += v[k]
    return s


@cuda.jit
def run_time_slices(a, lo, hi, out):
    i = cuda.grid(1)
    if i == 0:
        out[0] = total(a[lo:hi])
        out[1] = total(a[hi:lo:-1])
        out[2] = total(a[-hi:])
        out[3] = total(a[::3])


def test_slices_with_run_time_bounds():
    a = np.arange(20, dtype=np.int64)
    for lo, hi in ((2, 9), (5, 5), (-30, 30), (7, -2)):
        out = np.zeros(4, np.int64)
        run_time_slices[1, 1](a, lo, hi, out)
        want = [a[lo:hi].sum(), a[hi:lo:-1].sum(), a[-hi:].sum(), a[::3].sum()]
        assert list(out) == want, (lo, hi)


@cuda.jit
def tuple_variable(out):
    i = cuda.grid(1)
    if i < out.shape[0]:
        if i % 2 == 0:
            p = (i, 1)
        else:
            p = (0, i)
        out[i, 0] = p[0]
        out[i, 1] = p[1]


def test_a_tuple_given_values_in_two_branches():
    out = np.zeros((6, 2), np.int64)
    tuple_variable[1, 6](out)
    assert out.tolist() == [[i, 1] if i % 2 == 0 else [0, i] for i in range(6)]


def test_cpu_functions_called_from_kernels():
    @numba.njit
    def add(a, b):
        return a + b

    @cuda.jit
    def k(x, out):
        i = cuda.grid(1)
        if i < x.size:
            out[i] = add(x[i], 10)
    x = np.arange(5, dtype=np.int64)
    out = np.zeros(5, np.int64)
    k[1, 8](x, out)
    assert list(out) == list(x + 10)


class _Foreign:
    """Another library's array: only the interchange protocols."""

    def __init__(self, d, protocol):
        self._d = d
        if protocol == "cai":
            self.__cuda_array_interface__ = d.__cuda_array_interface__
        else:
            self.__dlpack__ = d.__dlpack__
            self.__dlpack_device__ = d.__dlpack_device__


@pytest.mark.parametrize("protocol", ["cai", "dlpack"])
def test_foreign_arrays_are_used_in_place(protocol):
    d = cuda.to_device(np.arange(8, dtype=np.float32))
    try:
        f = _Foreign(d, protocol)
    except (AttributeError, cuda.DevarrayError) as e:
        pytest.skip("this backend exports no %s: %s" % (protocol, e))

    @cuda.jit
    def double(x):
        i = cuda.grid(1)
        if i < x.size:
            x[i] *= 2
    double[1, 8](f)
    np.testing.assert_array_equal(d.copy_to_host(), np.arange(8) * 2)


@cuda.jit
def pairs_and_float_index(x, out, cnt):
    i = cuda.grid(1)
    if i < x.size:
        f, ip = math.modf(x[i])
        m, e = math.frexp(x[i])
        out[i, 0] = f
        out[i, 1] = ip
        out[i, 2] = m
        out[i, 3] = e
        out[i, 4] = math.remainder(x[i], 1.5)
        cuda.atomic.add(cnt, 0.0, 1)  # Numba's atomic signature converts the index to intp


def test_modf_frexp_remainder_and_a_float_atomic_index():
    x = np.array([2.75, -1.25, 8.0, 0.1])
    out = np.zeros((4, 5))
    cnt = np.zeros(1, np.int32)
    pairs_and_float_index[1, 4](x, out, cnt)
    ref = [[*math.modf(v), *math.frexp(v), math.remainder(v, 1.5)] for v in x]
    np.testing.assert_allclose(out, ref)
    assert cnt[0] == 4


NESTED = np.dtype([("g", np.int32), ("h", np.float32, (2,)), ("j", np.float64, (3, 2))])


@cuda.jit
def nested_fields(r, out):
    i = cuda.grid(1)
    if i < r.shape[0]:
        r[i].h[1] = r[i].g * 0.5
        r[i].j[2, 1] = r[i].h[0] + i
        out[i] = r[i].j[0, 1] + r[i].h.size + r[i].j.shape[0]


def test_nested_arrays_in_records():
    r = np.zeros(3, NESTED)
    r["g"] = [2, 4, 6]
    r["h"][:, 0] = [1.0, 2.0, 3.0]
    r["j"][:, 0, 1] = [10.0, 20.0, 30.0]
    out = np.zeros(3)
    nested_fields[1, 4](r, out)
    np.testing.assert_array_equal(r["h"][:, 1], [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(r["j"][:, 2, 1], [1.0, 3.0, 5.0])
    np.testing.assert_array_equal(out, [15.0, 25.0, 35.0])


def test_type_annotation_has_numbas_types():
    @cuda.jit("void(int32[::1])")
    def f(x):
        s = cuda.shared.array(10, dtype=int32)
        s[0] = x[0]
        x[0] = s[0]
    ann = next(iter(f.overloads.values()))._type_annotation
    assert ann.typemap["s"].dtype == int32 and ann.typemap["x"].layout == "C"


@cuda.jit
def tuple_of_arrays(t, out):
    i = cuda.grid(1)
    if i < out.size:
        a, (b, s) = t
        out[i] = a[i] * s + b[i, 0]


def test_tuples_of_arrays_and_scalars_as_arguments():
    a = np.arange(5, dtype=np.float64)
    b = cuda.to_device(np.ones((5, 2)) * 10)
    out = np.zeros(5)
    tuple_of_arrays[1, 8]((a, (b, 3.0)), out)
    np.testing.assert_array_equal(out, a * 3 + 10)
