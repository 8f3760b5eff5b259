"""devarray.jit: Numba's Python kernels compiled to the dialect, values checked against NumPy
(and against Python's own semantics), on the backend of DV_BACKEND."""
import cmath
import math
import os
import subprocess
import sys

import numpy as np
import pytest

numba = pytest.importorskip("numba", reason="devarray.jit needs Numba (python3-numba)")
from numba import float32, float64, int32, int64, uint32  # noqa: E402

import devarray as cuda  # noqa: E402  (the point: only the import changes)
import devarray.roc as roc  # noqa: E402
from devarray._jit import LoweringError  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


# ---- the memory chapters' kernels ------------------------------------------------------

TPB = 16


@cuda.jit
def fast_matmul(A, B, C):
    # Numba's "fast_matmul" (CUDA chapter, shared memory), unchanged
    sA = cuda.shared.array(shape=(TPB, TPB), dtype=float32)
    sB = cuda.shared.array(shape=(TPB, TPB), dtype=float32)
    x, y = cuda.grid(2)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    bpg = cuda.gridDim.x
    if x >= C.shape[0] and y >= C.shape[1]:
        return
    tmp = 0.
    for i in range(bpg):
        sA[tx, ty] = A[x, ty + i * TPB]
        sB[tx, ty] = B[tx + i * TPB, y]
        cuda.syncthreads()
        for j in range(TPB):
            tmp += sA[tx, j] * sB[j, ty]
        cuda.syncthreads()
    C[x, y] = tmp


def test_fast_matmul_numpy_arrays():
    n = 48
    rng = np.random.default_rng(1)
    A = rng.random((n, n), dtype=np.float32)
    B = rng.random((n, n), dtype=np.float32)
    C = np.zeros((n, n), np.float32)
    fast_matmul[(n // TPB, n // TPB), (TPB, TPB)](A, B, C)  # copied in and back, as Numba
    np.testing.assert_allclose(C, A @ B, rtol=1e-5)


def test_fast_matmul_device_arrays_and_stream():
    n = 32
    A = np.arange(n * n, dtype=np.float32).reshape(n, n) / 100
    B = np.eye(n, dtype=np.float32) * 2
    s = cuda.stream()
    dA, dB = cuda.to_device(A, stream=s), cuda.to_device(B, stream=s)
    dC = cuda.device_array((n, n), np.float32, stream=s)
    fast_matmul[(n // TPB, n // TPB), (TPB, TPB), s](dA, dB, dC)
    C = dC.copy_to_host(stream=s)
    s.synchronize()
    np.testing.assert_allclose(C, A @ B, rtol=1e-6)


@roc.jit
def roc_matmul(A, B, C):
    # the ROC chapter's shared-memory example, with only the import changed
    sA = roc.shared.array(shape=(TPB, TPB), dtype=float32)
    sB = roc.shared.array(shape=(TPB, TPB), dtype=float32)
    tx = roc.get_local_id(0)
    ty = roc.get_local_id(1)
    bx = roc.get_group_id(0)
    by = roc.get_group_id(1)
    bw = roc.get_local_size(0)
    bh = roc.get_local_size(1)
    x = tx + bx * bw
    y = ty + by * bh
    acc = 0.
    for i in range(roc.get_num_groups(0)):
        sA[tx, ty] = A[x, ty + i * TPB]
        sB[tx, ty] = B[tx + i * TPB, y]
        roc.barrier(roc.CLK_LOCAL_MEM_FENCE | roc.CLK_GLOBAL_MEM_FENCE)
        for j in range(TPB):
            acc += sA[tx, j] * sB[j, ty]
        roc.barrier(roc.CLK_GLOBAL_MEM_FENCE)
    C[x, y] = acc


def test_roc_shared_memory_example():
    n = 32
    rng = np.random.default_rng(2)
    A = rng.random((n, n), dtype=np.float32)
    B = rng.random((n, n), dtype=np.float32)
    dA, dB = roc.to_device(A), roc.to_device(B)
    dC = roc.device_array_like(dA)
    roc_matmul[(n // TPB, n // TPB), (TPB, TPB)](dA, dB, dC)
    np.testing.assert_allclose(dC.copy_to_host(), A @ B, rtol=1e-5)


@cuda.jit
def local_sort(out, data):
    # local memory: each thread sorts its row in a local array
    i = cuda.grid(1)
    if i >= data.shape[0]:
        return
    tmp = cuda.local.array(8, dtype=int32)
    for k in range(8):
        tmp[k] = data[i, k]
    for a in range(8):
        for b in range(7 - a):
            if tmp[b] > tmp[b + 1]:
                t = tmp[b]
                tmp[b] = tmp[b + 1]
                tmp[b + 1] = t
    for k in range(8):
        out[i, k] = tmp[k]


def test_local_array():
    data = np.random.default_rng(3).integers(-50, 50, (37, 8)).astype(np.int32)
    out = cuda.device_array_like(data)
    local_sort[2, 32](out, cuda.to_device(data))
    np.testing.assert_array_equal(out.copy_to_host(), np.sort(data, axis=1))


COEF = np.array([1.5, -2.0, 0.25, 3.0], np.float32)


@cuda.jit
def polyval(x, y):
    # constant memory: Numba's const.array_like of a global array
    c = cuda.const.array_like(COEF)
    i = cuda.grid(1)
    if i < x.size:
        acc = float32(0)
        for k in range(c.shape[0] - 1, -1, -1):
            acc = acc * x[i] + c[k]
        y[i] = acc


def test_constant_memory():
    x = np.linspace(-2, 2, 100, dtype=np.float32)
    y = np.zeros_like(x)
    polyval[4, 32](x, y)
    np.testing.assert_allclose(y, np.polyval(COEF[::-1], x), rtol=1e-5, atol=1e-5)


# ---- the language ------------------------------------------------------------------------

@cuda.jit
def int_ops(a, b, out):
    i = cuda.grid(1)
    if i < a.size:
        out[i, 0] = a[i] // b[i]
        out[i, 1] = a[i] % b[i]
        out[i, 2] = -a[i]
        out[i, 3] = a[i] ** 2
        out[i, 4] = a[i] << 2
        out[i, 5] = abs(a[i])
        out[i, 6] = min(a[i], b[i], 3)
        out[i, 7] = max(a[i], b[i])


def test_integer_semantics_are_pythons():
    a = np.array([7, -7, 7, -7, 0, 5, -9, 100], np.int64)
    b = np.array([2, 2, -2, -2, 3, 0, 4, 7], np.int64)
    out = np.zeros((8, 8), np.int64)
    int_ops[1, 8](a, b, out)
    for i in range(8):
        x, y = int(a[i]), int(b[i])
        want = [x // y if y else 0, x % y if y else 0, -x, x ** 2, x << 2, abs(x),
                min(x, y, 3), max(x, y)]
        assert list(out[i]) == want, (x, y)


@cuda.jit
def float_ops(a, b, out):
    i = cuda.grid(1)
    if i < a.size:
        out[i, 0] = a[i] // b[i]
        out[i, 1] = a[i] % b[i]
        out[i, 2] = a[i] / b[i]
        out[i, 3] = math.sqrt(abs(a[i])) + math.sin(a[i]) * math.exp(b[i] / 10)
        out[i, 4] = math.floor(a[i]) + math.ceil(b[i])
        out[i, 5] = a[i] ** b[i] if a[i] > 0 else 0.0


def test_float_semantics():
    a = np.array([7.5, -7.5, 7.5, -7.5, 0.25, 3.0], np.float64)
    b = np.array([2.0, 2.0, -2.0, -2.0, 0.5, 1.5], np.float64)
    out = np.zeros((6, 6))
    float_ops[1, 6](a, b, out)
    for i in range(6):
        x, y = float(a[i]), float(b[i])
        want = [x // y, x % y, x / y, math.sqrt(abs(x)) + math.sin(x) * math.exp(y / 10),
                math.floor(x) + math.ceil(y), x ** y if x > 0 else 0.0]
        np.testing.assert_allclose(out[i], want, rtol=1e-12)


@cuda.jit
def true_division(a, out):
    i = cuda.grid(1)
    if i < a.size:
        out[i] = a[i] / 4  # int / int is a float64, as in Python


def test_integer_true_division_gives_float():
    a = np.arange(10, dtype=np.int32)
    out = np.zeros(10)
    true_division[1, 16](a, out)
    np.testing.assert_array_equal(out, a / 4)


@cuda.jit
def loops(n, out):
    i = cuda.grid(1)
    if i != 0:
        return
    k = 0
    s = 0
    while k < n:          # Python 3.11 writes this as if + do-while: read back as while
        k += 1
        if k % 3 == 0:
            continue
        if k > 20:
            break
        s += k
    out[0] = s
    out[1] = k
    t = 0
    for j in range(10, 0, -2):
        t = t * 10 + j
    out[2] = t
    u = 0
    for j in range(n):
        if j == 4:
            break
        u += j
    else:
        u = -1
    out[3] = u


def test_control_flow():
    out = np.zeros(4, np.int64)
    loops[1, 1](30, out)

    def ref(n):
        k = s = 0
        while k < n:
            k += 1
            if k % 3 == 0:
                continue
            if k > 20:
                break
            s += k
        t = 0
        for j in range(10, 0, -2):
            t = t * 10 + j
        u = 0
        for j in range(n):
            if j == 4:
                break
            u += j
        else:
            u = -1
        return [s, k, t, u]
    assert list(out) == ref(30)


@cuda.jit
def reduce_block(x, out):
    # a tree reduction: a while loop holding a barrier
    s = cuda.shared.array(64, dtype=float64)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    s[t] = x[i] if i < x.size else 0.0
    cuda.syncthreads()
    w = cuda.blockDim.x // 2
    while w > 0:
        if t < w:
            s[t] += s[t + w]
        cuda.syncthreads()
        w //= 2
    if t == 0:
        out[cuda.blockIdx.x] = s[0]


def test_reduction_with_barriers_in_a_while_loop():
    x = np.random.default_rng(4).random(200)
    out = np.zeros(4)
    reduce_block[4, 64](x, out)
    np.testing.assert_allclose(out, [x[k * 64:(k + 1) * 64].sum() for k in range(4)])


@cuda.jit(device=True)
def clamp(v, lo, hi):
    return min(max(v, lo), hi)


@cuda.jit(device=True)
def scaled(v, f):
    return clamp(v * f, 0.0, 10.0)  # device functions call each other


@cuda.jit
def use_device_functions(x, out):
    i = cuda.grid(1)
    if i < x.shape[0]:
        out[i] = scaled(x[i], 3.0)


def test_device_functions():
    x = np.linspace(-2, 5, 50)
    out = np.zeros(50)
    use_device_functions[2, 32](x, out)
    np.testing.assert_allclose(out, np.clip(x * 3.0, 0, 10))


@cuda.jit(device=True)
def row_sum(a, r):
    s = 0.0
    for j in range(a.shape[1]):
        s += a[r, j]
    return s


@cuda.jit
def sums_of_rows(a, out):
    i = cuda.grid(1)
    if i < a.shape[0]:
        out[i] = row_sum(a, i)


def test_device_function_taking_an_array_and_strided_views():
    a = np.arange(60, dtype=np.float64).reshape(6, 10)
    d = cuda.to_device(a)
    out = np.zeros(6)
    sums_of_rows[1, 8](d, out)
    np.testing.assert_allclose(out, a.sum(axis=1))
    # a strided view of a device array: indexed through its strides (layout 'A')
    v = d[::2, 1::3]
    out2 = np.zeros(3)
    sums_of_rows[1, 8](v, out2)
    np.testing.assert_allclose(out2, a[::2, 1::3].sum(axis=1))


@cuda.jit
def atomics(counts, fmax, fsum, vals, cas_out):
    i = cuda.grid(1)
    if i < vals.size:
        cuda.atomic.add(counts, vals[i] % 4, 1)
        cuda.atomic.max(fmax, 0, float64(vals[i]) * 0.5)
        cuda.atomic.add(fsum, (0, 0), float32(1.0))
        cuda.atomic.sub(counts, 4, 1)
        old = cuda.atomic.compare_and_swap(cas_out, 0, i + 1)
        cuda.atomic.add(counts, 5, 1 if old == 0 else 0)


def test_atomics():
    vals = np.arange(100, dtype=np.int32)
    counts = np.zeros(6, np.int32)
    fmax = np.zeros(1)
    fsum = np.zeros((1, 1), np.float32)
    cas_out = np.zeros(1, np.int32)
    atomics[4, 32](counts, fmax, fsum, vals, cas_out)
    assert list(counts[:4]) == [25, 25, 25, 25]
    assert counts[4] == -100
    assert counts[5] == 1  # exactly one thread found 0
    assert fmax[0] == 49.5 and fsum[0, 0] == 100
    assert 1 <= cas_out[0] <= 100


@cuda.jit
def dyn_shared(x, out):
    s = cuda.shared.array(0, dtype=float32)  # sized by the launch, as in Numba
    t = cuda.threadIdx.x
    s[t] = x[t] * 2
    cuda.syncthreads()
    out[t] = s[cuda.blockDim.x - 1 - t]


def test_dynamic_shared_memory():
    x = np.arange(32, dtype=np.float32)
    out = np.zeros(32, np.float32)
    dyn_shared[1, 32, 0, 32 * 4](x, out)
    np.testing.assert_array_equal(out, (x * 2)[::-1])


@cuda.jit
def sync_count(x, out):
    t = cuda.threadIdx.x
    n = cuda.syncthreads_count(x[t] > 0)
    a = cuda.syncthreads_and(x[t] > -100)
    o = cuda.syncthreads_or(x[t] > 1000)
    if t == 0:
        out[0] = n
        out[1] = a
        out[2] = o


def test_syncthreads_count_and_or():
    x = np.array([1, -1, 2, 0] * 8, np.int32)
    out = np.zeros(3, np.int32)
    sync_count[1, 32](x, out)
    assert list(out) == [16, 1, 0]


@cuda.jit
def negative_and_tuple_indexing(a, out):
    i = cuda.grid(1)
    if i == 0:
        out[0] = a[-1, -2]
        n, m = a.shape
        out[1] = n * 100 + m
        out[2] = a.size + a.ndim


def test_negative_indices_and_shape():
    a = np.arange(12, dtype=np.int64).reshape(3, 4)
    out = np.zeros(3, np.int64)
    negative_and_tuple_indexing[1, 1](a, out)
    assert list(out) == [a[-1, -2], 304, 14]


@cuda.jit("void(float32[:], float32)")
def eager(x, v):
    i = cuda.grid(1)
    if i < x.size:
        x[i] = v


def test_signature_compiles_eagerly_and_inspect_source():
    assert len(eager.overloads) == 1
    src = eager.inspect_source("void(float32[:], float32)")
    assert "DV_KERNEL(eager" in src and "#line" in src and __file__ in src
    x = cuda.device_array(10, np.float32)
    eager[1, 16](x, 2.5)
    assert (x.copy_to_host() == 2.5).all()
    with pytest.raises(TypeError, match="compiled for"):
        eager[1, 16](cuda.device_array(3, np.float64), 1.0)


def test_specialization_per_argument_types_and_forall():
    @cuda.jit
    def fill(x, v):
        i = cuda.grid(1)
        if i < x.size:
            x[i] = v
    a = cuda.device_array(100, np.int32)
    b = cuda.device_array(100, np.float64)
    fill.forall(100)(a, 7)
    fill.forall(100)(b, 0.5)
    fill.forall(100)(b, 1.5)
    assert (a.copy_to_host() == 7).all() and (b.copy_to_host() == 1.5).all()
    assert len(fill.overloads) == 2
    assert any("dv_i32" in s for s in fill.inspect_source().values())
    s = fill.specialize(a, 1)
    s[4, 32](a, 3)
    assert (a.copy_to_host() == 3).all()


def test_kernel_with_a_return_value_is_refused():
    @cuda.jit
    def bad(x):
        return 1
    with pytest.raises(TypeError, match="must return None"):
        bad[1, 1](np.zeros(1))


def test_numba_typing_errors_name_the_python_line():
    @cuda.jit
    def bad(x):
        x[0] = undefined_name  # noqa: F821
    with pytest.raises(numba.core.errors.TypingError) as e:
        bad[1, 1](np.zeros(1))
    assert "undefined_name" in str(e.value)


def test_unlowered_constructs_raise_naming_them():
    @cuda.jit
    def bad(x):
        for v in x:  # iterating over an array
            x[0] = v
    with pytest.raises(LoweringError) as e:
        bad[1, 1](np.zeros(2))
    assert "range" in str(e.value) and "test_jit.py" in str(e.value)


def test_calling_a_kernel_without_a_configuration():
    with pytest.raises(TypeError, match="configuration"):
        eager(np.zeros(1, np.float32), 1.0)
    with pytest.raises(TypeError, match="device function"):
        clamp(1.0, 0.0, 2.0)


def test_compile_error_names_the_python_file():
    # a dialect compile error points back at the Python source through #line
    @cuda.jit
    def ok(x):
        x[0] = 1
    src = ok.inspect_source((numba.types.float64[:],))
    lines = [ln for ln in src.splitlines() if ln.startswith("#line")]
    assert lines and all("test_jit.py" in ln for ln in lines)


def test_without_numba_jit_raises_one_clear_error():
    code = ("import sys; sys.modules['numba'] = None\n"
            "import devarray\n"
            "x = devarray.to_device([1.0, 2.0]).copy_to_host()\n"
            "assert list(x) == [1.0, 2.0]\n"
            "try:\n"
            "    devarray.jit(lambda a: None)\n"
            "except devarray.DevarrayError as e:\n"
            "    print('ERR', e)\n")
    env = dict(os.environ)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       cwd=os.path.join(HERE, ".."))
    assert r.returncode == 0, r.stderr
    assert "ERR" in r.stdout and "python3-numba" in r.stdout


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
    assert "test_jit.py:%d" % line in str(e.value), str(e.value)


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
    assert "test_jit.py:%d" % (first + 4) in msg and "test_jit.py:%d" % (first + 6) in msg, msg


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
