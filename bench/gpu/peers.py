#!/usr/bin/env python3
"""The same transfers through numba-cuda and CuPy, for side-by-side figures
with bench_cuda (events, medians).  Run on the GPU machine by run.sh."""
import statistics
import time

import numpy as np

SIZES = [4096, 1 << 20, 64 << 20, 1 << 30]
TRIALS = 7


def bandwidth(label, fn, nbytes, iters, event_pair):
    times = []
    for k in range(TRIALS + 1):
        start, stop = event_pair()
        start.record()
        for _ in range(iters):
            fn()
        stop.record()
        stop.synchronize()
        ms = start.elapsed_time(stop)
        if k:
            times.append(ms / 1e3 / iters)
    t = statistics.median(times)
    print(f"{label:34s} {nbytes:12d} {nbytes / t / 1e9:10.2f} GB/s")


def latency(label, fn, reps=2000):
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    print(f"{label:34s} {statistics.median(ts) * 1e6:10.2f} us")


def run_numba():
    from numba import cuda
    s = cuda.stream()

    def events():
        return cuda.event(timing=True), cuda.event(timing=True)

    class Ev:
        def __init__(self, e, st):
            self.e, self.st = e, st

        def record(self):
            self.e.record(self.st)

        def synchronize(self):
            self.e.synchronize()

        def elapsed_time(self, other):
            return cuda.event_elapsed_time(self.e, other.e)

    def pair():
        a, b = events()
        return Ev(a, s), Ev(b, s)

    for pinned in (True, False):
        for n in SIZES:
            h = cuda.pinned_array(n, dtype=np.uint8) if pinned else np.ones(n, dtype=np.uint8)
            d = cuda.device_array(n, dtype=np.uint8)
            iters = 100 if n <= (1 << 20) else 10 if n <= (64 << 20) else 2
            kind = "pinned" if pinned else "pageable"
            bandwidth(f"numba h2d {kind}", lambda: d.copy_to_device(h, stream=s), n, iters, pair)
            bandwidth(f"numba d2h {kind}", lambda: d.copy_to_host(h, stream=s), n, iters, pair)
    small = np.ones(4096, dtype=np.uint8)
    dd = cuda.device_array(4096, dtype=np.uint8)
    latency("numba 4 KiB sync copy_to_device", lambda: dd.copy_to_device(small))
    latency("numba 4 KiB to_device (alloc+copy)", lambda: cuda.to_device(small))


def run_cupy():
    import cupy as cp
    s = cp.cuda.Stream(non_blocking=True)

    class Ev:
        def __init__(self):
            self.e = cp.cuda.Event()

        def record(self):
            self.e.record(s)

        def synchronize(self):
            self.e.synchronize()

        def elapsed_time(self, other):
            return cp.cuda.get_elapsed_time(self.e, other.e)

    for pinned in (True, False):
        for n in SIZES:
            if pinned:
                mem = cp.cuda.alloc_pinned_memory(n)
                h = np.frombuffer(mem, dtype=np.uint8, count=n)
            else:
                h = np.ones(n, dtype=np.uint8)
            d = cp.empty(n, dtype=cp.uint8)
            iters = 100 if n <= (1 << 20) else 10 if n <= (64 << 20) else 2
            kind = "pinned" if pinned else "pageable"
            bandwidth(f"cupy h2d {kind}", lambda: d.set(h, stream=s), n, iters, lambda: (Ev(), Ev()))
            bandwidth(f"cupy d2h {kind}", lambda: d.get(stream=s, out=h), n, iters, lambda: (Ev(), Ev()))
    small = np.ones(4096, dtype=np.uint8)
    dd = cp.empty(4096, dtype=cp.uint8)
    latency("cupy 4 KiB sync set", lambda: dd.set(small))
    latency("cupy 4 KiB asarray (alloc+copy)", lambda: cp.asarray(small))


def run_cupy_pools():
    """RMM's random_allocations (N=10k, max 1 MiB) through CuPy's default pool and
    through cudaMallocAsync (cupy.cuda.MemoryAsyncPool), for bench_alloc's table."""
    import random
    import cupy as cp
    for label, pool in (("cupy pool", cp.cuda.MemoryPool()), ("cudaMallocAsync", cp.cuda.MemoryAsyncPool())):
        cp.cuda.set_allocator(pool.malloc)
        rng = random.Random(1)
        n, live = 10000, []
        cp.cuda.Device().synchronize()
        t0 = time.perf_counter()
        for _ in range(2 * n):
            if len(live) < n and rng.random() < 0.73:
                live.append(cp.cuda.alloc(1 + rng.randrange(1 << 20)))
            elif live:
                live.pop(rng.randrange(len(live)))
        live.clear()
        cp.cuda.Device().synchronize()
        print(f"{label:34s} random_allocations N=10000 max=1MiB: {(time.perf_counter() - t0) * 1e3:.2f} ms")
    cp.cuda.set_allocator(cp.cuda.MemoryPool().malloc)


def run_launch_overhead():
    """Empty-kernel launch overhead through numba-cuda and CuPy, for bench_kernels'
    rows (queued back to back, and launch + synchronize)."""
    n = 20000
    try:
        from numba import cuda

        @cuda.jit
        def empty(x):
            pass

        s = cuda.stream()
        empty[1, 1, s](0)
        s.synchronize()
        ts = []
        for _ in range(TRIALS):
            t0 = time.perf_counter()
            for _ in range(n):
                empty[1, 1, s](0)
            s.synchronize()
            ts.append((time.perf_counter() - t0) / n)
        print(f"{'numba-cuda launch, queued':34s} {statistics.median(ts) * 1e6:10.2f} us")
        latency("numba-cuda launch + sync", lambda: (empty[1, 1, s](0), s.synchronize()), 2000)
    except Exception as exc:
        print(f"numba-cuda launch failed: {exc!r}")
    try:
        import cupy as cp
        k = cp.RawKernel(r'extern "C" __global__ void empty(int x) {}', "empty")
        s = cp.cuda.Stream(non_blocking=True)
        x = np.int32(0)
        with s:
            k((1,), (1,), (x,))
        s.synchronize()
        ts = []
        for _ in range(TRIALS):
            t0 = time.perf_counter()
            with s:
                for _ in range(n):
                    k((1,), (1,), (x,))
            s.synchronize()
            ts.append((time.perf_counter() - t0) / n)
        print(f"{'cupy RawKernel launch, queued':34s} {statistics.median(ts) * 1e6:10.2f} us")

        def once():
            with s:
                k((1,), (1,), (x,))
            s.synchronize()
        latency("cupy RawKernel launch + sync", once, 2000)
    except Exception as exc:
        print(f"CuPy launch failed: {exc!r}")


for name, fn in (("numba-cuda", run_numba), ("CuPy", run_cupy), ("CuPy pools", run_cupy_pools),
                 ("kernel launch overhead", run_launch_overhead)):
    print(f"== {name}")
    try:
        fn()
    except Exception as exc:  # report and go on: one peer missing must not hide the other
        print(f"{name} failed: {exc!r}")
