"""Per-call overhead of the Python binding vs Numba (issue 15).

    PYTHONPATH=python DEVARRAY_LIBRARY=build-rel/libdevarray.so \
      /usr/bin/python3 bench/python/bench_python.py [--peers sim|gpu|none] [--reps N]

Rows: to_device and copy_to_host (into an existing array, and into a new one) of a 64-byte
array (8 float64) and an empty kernel launch,
through devarray (DV_BACKEND, default host) and, in the same run, through a peer:
``sim`` = Numba's CUDA simulator (NUMBA_ENABLE_CUDASIM=1, set in a child process), ``gpu``
= numba-cuda and CuPy on a real GPU (for bench/gpu). Medians of N batches of calls, in
microseconds per call; the ratio is peer / devarray. Prints one JSON object per row too
(--json), for bench/gpu/peers.py to collect.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

BATCH = 200


def median_us(fn, reps):
    for _ in range(20):
        fn()
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        for _ in range(BATCH):
            fn()
        times.append((time.perf_counter() - t) / BATCH * 1e6)
    return statistics.median(times)


def bench_devarray(reps):
    import devarray as cuda
    a = np.arange(8, dtype=np.float64)
    d = cuda.to_device(a)
    out = np.empty_like(a)
    k = cuda.Module("DV_KERNEL(empty, int n) { (void)n; }", name="empty.dvk").get("empty")
    launch = k[1, 1]
    # The same C calls made directly through ctypes: the library's own share of each row.
    import ctypes
    from devarray._lib import lib, dv_arg, dv_launch_config
    ctx = cuda.current_context().handle
    shp = (ctypes.c_int64 * 1)(8)
    dt = lib.dv_dtype_from_name(b"float64")
    h, o = ctypes.c_void_p(), ctypes.c_void_p()
    pa, po = a.ctypes.data, out.ctypes.data

    def raw_to_device():
        lib.dv_host_array_wrap(ctx, pa, 1, shp, dt, None, ctypes.byref(h))
        lib.dv_to_device(ctx, h, None, 1, None, ctypes.byref(o))
        lib.dv_array_release(h)
        lib.dv_array_release(o)

    def raw_copy_to_host():
        lib.dv_host_array_wrap(ctx, po, 1, shp, dt, None, ctypes.byref(h))
        lib.dv_copy_to_host(d.handle, h, None, None)
        lib.dv_array_release(h)

    cfg = dv_launch_config()
    cfg.grid.x = cfg.block.x = 1
    args = (dv_arg * 1)()
    zero = ctypes.c_int32(0)
    args[0].kind, args[0].type, args[0].value = 1, 3, ctypes.addressof(zero)

    def raw_copy_to_host_new():
        n = np.empty(8, np.float64)
        lib.dv_host_array_wrap(ctx, n.ctypes.data, 1, shp, dt, None, ctypes.byref(h))
        lib.dv_copy_to_host(d.handle, h, None, None)
        lib.dv_array_release(h)

    def raw_launch():
        lib.dv_kernel_launch(k.handle, ctypes.byref(cfg), 1, args)

    raw = {"to_device": median_us(raw_to_device, reps),
           "copy_to_host": median_us(raw_copy_to_host, reps),
           "copy_to_host_new": median_us(raw_copy_to_host_new, reps),
           "launch": median_us(raw_launch, reps)}
    return {"raw": raw, "to_device": median_us(lambda: cuda.to_device(a), reps),
            "copy_to_host": median_us(lambda: d.copy_to_host(out), reps),
            "copy_to_host_new": median_us(lambda: d.copy_to_host(), reps),
            "launch": median_us(lambda: launch(0), reps),
            "backend": cuda.current_context().backend}


def bench_numba(reps):
    from numba import cuda
    if not os.environ.get("NUMBA_ENABLE_CUDASIM") and not cuda.is_available():
        sys.exit("numba-cuda: no usable CUDA GPU and driver on this machine")
    a = np.arange(8, dtype=np.float64)
    d = cuda.to_device(a)
    out = np.empty_like(a)

    @cuda.jit
    def empty(n):
        pass

    launch = empty[1, 1]
    r = {"to_device": median_us(lambda: cuda.to_device(a), reps),
         "copy_to_host": median_us(lambda: d.copy_to_host(out), reps),
         "copy_to_host_new": median_us(lambda: d.copy_to_host(), reps),
         "launch": median_us(lambda: (launch(0), cuda.synchronize()), reps)}
    return r


def bench_cupy(reps):
    import cupy
    a = np.arange(8, dtype=np.float64)
    d = cupy.asarray(a)
    k = cupy.RawKernel('extern "C" __global__ void empty(int n) {}', "empty")
    return {"to_device": median_us(lambda: cupy.asarray(a), reps),
            "copy_to_host_new": median_us(lambda: d.get(), reps),
            "launch": median_us(lambda: (k((1,), (1,), (np.int32(0),)),
                                         cupy.cuda.Device().synchronize()), reps)}


def child(which, reps):
    env = dict(os.environ)
    if which == "numba-sim":
        env["NUMBA_ENABLE_CUDASIM"] = "1"
    r = subprocess.run([sys.executable, __file__, "--child", which, "--reps", str(reps)],
                       env=env, capture_output=True, text=True)
    if r.returncode:
        return {"error": (r.stderr.strip().splitlines() or ["failed"])[-1]}
    return json.loads(r.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--peers", default="sim", choices=["sim", "gpu", "none"])
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--child")
    o = ap.parse_args()
    if o.child:
        fn = {"numba-sim": bench_numba, "numba-cuda": bench_numba, "cupy": bench_cupy}[o.child]
        print(json.dumps(fn(o.reps)))
        return
    dv = bench_devarray(o.reps)
    peers = {"sim": ["numba-sim"], "gpu": ["numba-cuda", "cupy"], "none": []}[o.peers]
    res = {p: child(p, o.reps) for p in peers}
    print("per-call overhead, us (median of %d batches of %d calls); devarray backend %s"
          % (o.reps, BATCH, dv["backend"]))
    print("%-16s %10s %10s" % ("op", "devarray", "C via ctypes")
          + "".join(" %12s %7s" % (p, "ratio") for p in peers))
    for op in ("to_device", "copy_to_host", "copy_to_host_new", "launch"):
        line = "%-16s %10.2f %10.2f" % (op, dv[op], dv["raw"][op])
        for p in peers:
            v = res[p].get(op)
            line += (" %12.2f %6.1fx" % (v, v / dv[op])) if v else " %12s %7s" % ("n/a", "")
        print(line)
        if o.json:
            print(json.dumps({"op": op, "devarray_us": dv[op], "c_us": dv["raw"][op],
                              **{p + "_us": res[p].get(op) for p in peers}}))
    for p in peers:
        if "error" in res[p]:
            print("%s: %s" % (p, res[p]["error"]))


if __name__ == "__main__":
    main()
