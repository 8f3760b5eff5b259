"""devarray.jit: Numba's Python kernels compiled to the dialect, values checked against NumPy
(and against Python's own semantics), on the backend of DV_BACKEND."""
import math
import os
import subprocess
import sys

import numpy as np
import pytest

numba = pytest.importorskip("numba", reason="devarray.jit needs Numba (python3-numba)")
from numba import float32, float64, int32  # noqa: E402

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
