"""devarray.jit against Numba's simulator and against the same kernels written in the dialect
(issue 34).

    PYTHONPATH=python DEVARRAY_LIBRARY=build-rel/libdevarray.so \\
      /usr/bin/python3 bench/python/bench_jit.py [--reps N] [--no-sim]

Rows, in one run, host backend (DV_HOST_MODE as set; fast in a Release build):

- launch overhead: an empty jitted kernel, 1 thread, with 0, 1 and 2 device-array arguments,
  against the same kernel in the dialect launched through devarray.Module (the binding's own
  path) and against Numba's simulator (NUMBA_ENABLE_CUDASIM=1, a child process: it cannot
  share a process with devarray.jit); microseconds per launch, medians of N batches;
- a launch of 1,024 threads (4 x 256) with 2 array arguments (y[i] = x[i]): jit vs simulator;
- saxpy (4M float32) and Numba's tiled matmul (n=512, TPB=16): jit vs the dialect by hand;
- compile time: the first call's (Numba's typing, the lowering, the C compiler), and the
  first call of a second process, where the built module comes from the disk cache.

Ratios are printed beside each row; nothing is asserted (docs/benchmarks.md has the figures).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))

KERNELS_PY = '''
import numpy as np
from numba import float32
TPB = 16
cuda = None  # the module under test: a global, as kernels name it (Numba's simulator swaps it)


def make(module):
    global cuda
    cuda = module

    @cuda.jit
    def empty0():
        pass

    @cuda.jit
    def empty1(a):
        pass

    @cuda.jit
    def empty2(a, b):
        pass

    @cuda.jit
    def copy(x, y):
        i = cuda.grid(1)
        if i < x.size:
            y[i] = x[i]

    @cuda.jit
    def saxpy(a, x, y, out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = a * x[i] + y[i]

    @cuda.jit
    def fast_matmul(A, B, C):
        sA = cuda.shared.array(shape=(TPB, TPB), dtype=float32)
        sB = cuda.shared.array(shape=(TPB, TPB), dtype=float32)
        x, y = cuda.grid(2)
        tx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        bpg = cuda.gridDim.x
        if x >= C.shape[0] and y >= C.shape[1]:
            return
        tmp = float32(0.)
        for i in range(bpg):
            sA[tx, ty] = A[x, ty + i * TPB]
            sB[tx, ty] = B[tx + i * TPB, y]
            cuda.syncthreads()
            for j in range(TPB):
                tmp += sA[tx, j] * sB[j, ty]
            cuda.syncthreads()
        C[x, y] = tmp
    return {k: v for k, v in locals().items() if k != 'module'}
'''

DIALECT = r'''
DV_KERNEL(empty0_k, int unused) { (void)unused; }
DV_KERNEL(empty1_k, DV_ARRAY(float, a)) { DV_BIND(float, a); (void)a; }
DV_KERNEL(empty2_k, DV_ARRAY(float, a), DV_ARRAY(float, b)) {
  DV_BIND(float, a); DV_BIND(float, b); (void)a; (void)b;
}
DV_KERNEL(saxpy_k, float a, DV_ARRAY(const float, x), DV_ARRAY(const float, y),
          DV_ARRAY(float, out), dv_i64 n) {
  DV_BIND(const float, x); DV_BIND(const float, y); DV_BIND(float, out);
  dv_i64 i = dv_global_id(0);
  if (i < n) out[i] = a * x[i] + y[i];
}
#define TPB 16
DV_KERNEL(fast_matmul_k, DV_ARRAY(const float, A), DV_ARRAY(const float, B),
          DV_ARRAY(float, C), int n) {
  DV_BIND(const float, A); DV_BIND(const float, B); DV_BIND(float, C);
  DV_SHARED2(float, sA, TPB, TPB);
  DV_SHARED2(float, sB, TPB, TPB);
  int tx = dv_thread_idx(0), ty = dv_thread_idx(1);
  int x = dv_block_idx(0) * TPB + tx, y = dv_block_idx(1) * TPB + ty;
  float tmp = 0.0f;
  for (int i = 0; i < (int)dv_grid_dim(0); i++) {
    sA[tx][ty] = A[x * n + ty + i * TPB];
    sB[tx][ty] = B[(tx + i * TPB) * n + y];
    dv_syncthreads();
    for (int j = 0; j < TPB; j++) tmp += sA[tx][j] * sB[j][ty];
    dv_syncthreads();
  }
  C[x * n + y] = tmp;
}
'''


def timeit(fn, reps, batch, sync=None):
    fn()
    if sync:
        sync()
    out = []
    for _ in range(reps):
        t = time.perf_counter()
        for _ in range(batch):
            fn()
        if sync:
            sync()
        out.append((time.perf_counter() - t) / batch * 1e6)
    return statistics.median(out)


def kernels_module():
    d = tempfile.mkdtemp(prefix="devarray-bench-jit-")
    path = os.path.join(d, "bench_jit_kernels.py")
    with open(path, "w") as f:
        f.write(KERNELS_PY)
    sys.path.insert(0, d)
    import bench_jit_kernels
    return bench_jit_kernels


def sim_child(reps):
    """The simulator's rows, in a process of its own."""
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
    from numba import cuda
    k = kernels_module().make(cuda)
    a, b = cuda.to_device(np.zeros(8, np.float32)), cuda.to_device(np.zeros(8, np.float32))
    x, y = cuda.to_device(np.ones(1024, np.float32)), cuda.device_array(1024, np.float32)
    rows = {"empty0": timeit(lambda: k["empty0"][1, 1](), reps, 20),
            "empty1": timeit(lambda: k["empty1"][1, 1](a), reps, 20),
            "empty2": timeit(lambda: k["empty2"][1, 1](a, b), reps, 20),
            "copy1024": timeit(lambda: k["copy"][4, 256](x, y), max(3, reps // 4), 1)}
    print(json.dumps(rows))


def compile_child():
    """First call of the saxpy kernel in a fresh process: seconds."""
    import devarray as cuda
    k = kernels_module().make(cuda)
    x = cuda.to_device(np.ones(16, np.float32))
    o = cuda.device_array(16, np.float32)
    t = time.perf_counter()
    k["saxpy"][1, 16](np.float32(2), x, x, o)
    cuda.synchronize()
    print(json.dumps({"first_call_s": time.perf_counter() - t}))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--no-sim", action="store_true")
    ap.add_argument("--child", default=None)
    a = ap.parse_args()
    if a.child == "sim":
        return sim_child(a.reps)
    if a.child == "compile":
        return compile_child()
    import devarray as cuda
    ctx = cuda.current_context()
    print("devarray.jit benchmark: backend %s, mode %s, kernel_check %s" % (
        ctx.backend, ctx.option("host_mode") if ctx.backend == "host" else "-",
        ctx.option("kernel_check")))
    sim = None
    if not a.no_sim:
        env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
        r = subprocess.run([sys.executable, __file__, "--child", "sim", "--reps", str(a.reps)],
                           capture_output=True, text=True, env=env)
        lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
        sim = json.loads(lines[-1]) if lines else None
        if sim is None:
            print("simulator: not run: %s" % r.stderr.strip()[-300:])
    # compile time: the first process compiles, a second one finds the module cached
    times = []
    for _ in range(2):
        r = subprocess.run([sys.executable, __file__, "--child", "compile"],
                           capture_output=True, text=True, env=dict(os.environ))
        lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
        times.append(json.loads(lines[-1])["first_call_s"] if lines else float("nan"))
    k = kernels_module().make(cuda)
    mod = cuda.Module(DIALECT)
    ka, kb = cuda.to_device(np.zeros(8, np.float32)), cuda.to_device(np.zeros(8, np.float32))
    sync = cuda.synchronize
    rows = []
    for name, jit_fn, dia_fn in (
            ("empty, 0 arrays", lambda: k["empty0"][1, 1](),
             lambda: mod.get("empty0_k")[1, 1](0)),
            ("empty, 1 array", lambda: k["empty1"][1, 1](ka),
             lambda: mod.get("empty1_k")[1, 1](ka)),
            ("empty, 2 arrays", lambda: k["empty2"][1, 1](ka, kb),
             lambda: mod.get("empty2_k")[1, 1](ka, kb))):
        rows.append((name, timeit(jit_fn, a.reps, 200, sync), timeit(dia_fn, a.reps, 200, sync)))
    print("\nlaunch overhead, 1 thread (us per launch; medians of %d batches)" % a.reps)
    print("%-18s %10s %10s %10s   %s" % ("", "jit", "dialect", "simulator", "simulator/jit"))
    for (name, j, d), key in zip(rows, ("empty0", "empty1", "empty2")):
        s = sim.get(key) if sim else None
        print("%-18s %10.2f %10.2f %10s   %s" % (name, j, d, "%.1f" % s if s else "-",
                                                 "%.1fx" % (s / j) if s else "-"))
    x, y = cuda.to_device(np.ones(1024, np.float32)), cuda.device_array(1024, np.float32)
    t1024 = timeit(lambda: k["copy"][4, 256](x, y), a.reps, 20, sync)
    s1024 = sim.get("copy1024") if sim else None
    print("\n1,024 threads, 2 arrays: jit %.1f us, simulator %s us, simulator/jit %s" % (
        t1024, "%.0f" % s1024 if s1024 else "-", "%.0fx" % (s1024 / t1024) if s1024 else "-"))

    n = 1 << 22
    xs = cuda.to_device(np.random.default_rng(0).random(n, dtype=np.float32))
    ys = cuda.to_device(np.ones(n, np.float32))
    out = cuda.device_array(n, np.float32)
    g = (n + 255) // 256
    tj = timeit(lambda: k["saxpy"][g, 256](np.float32(2), xs, ys, out), a.reps, 1, sync)
    td = timeit(lambda: mod.get("saxpy_k")[g, 256](np.float32(2), xs, ys, out, np.int64(n)),
                a.reps, 1, sync)
    m = 512
    A = cuda.to_device(np.random.default_rng(1).random((m, m), dtype=np.float32))
    B = cuda.to_device(np.random.default_rng(2).random((m, m), dtype=np.float32))
    C1, C2 = cuda.device_array((m, m), np.float32), cuda.device_array((m, m), np.float32)
    gm = (m // 16, m // 16)
    mj = timeit(lambda: k["fast_matmul"][gm, (16, 16)](A, B, C1), max(3, a.reps // 3), 1, sync)
    md = timeit(lambda: mod.get("fast_matmul_k")[gm, (16, 16)](A, B, C2, m),
                max(3, a.reps // 3), 1, sync)
    ok = np.allclose(C1.copy_to_host(), C2.copy_to_host(), rtol=1e-4)
    print("\nkernels (ms): jit / dialect by hand")
    print("saxpy 4M float32     %8.2f %8.2f   %.2fx" % (tj / 1e3, td / 1e3, tj / td))
    print("tiled matmul n=512   %8.2f %8.2f   %.2fx   (same results: %s)" % (
        mj / 1e3, md / 1e3, mj / md, ok))
    print("\ncompile: first call %.2f s; first call of a second process (module cached) %.2f s"
          % (times[0], times[1]))


if __name__ == "__main__":
    main()
