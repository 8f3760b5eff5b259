"""device_array and to_device of 1 MiB through Python, host simulator, fast and checked mode (issue 23).

    PYTHONPATH=python DEVARRAY_LIBRARY=build-rel/libdevarray.so \
      /usr/bin/python3 bench/python/bench_alloc_modes.py [--reps N] [--bytes B]

Each mode runs in a child process of its own (DV_HOST_MODE=fast / checked, DV_BACKEND=host),
as a program runs in one mode; the row "fast/ctypes" is fast mode with DEVARRAY_SPEEDUPS=off
(the binding without its compiled per-call paths, python/devarray/_speedups.c), the other rows
use the binding as it loads (the compiled module when found: the "binding" column says which).
In that process, batch by batch in turn, it times
devarray.device_array(B bytes) against numpy.empty(B bytes) and devarray.to_device(a) against
a.copy() (a fresh NumPy buffer filled by memcpy). Medians of N batches, microseconds per call;
the ratio is devarray / NumPy from the same process; then checked mode's cost over fast. The
(ctypes) column times dv_device_array + dv_array_release called bare through ctypes: the
library's share of device_array, the rest being the binding's.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

BATCH = 50


def child(reps, nbytes):
    import ctypes
    import devarray as cuda
    from devarray._lib import lib
    a = np.full(nbytes, 7, dtype=np.uint8)
    # the same allocation as two bare ctypes calls: the binding's own share of the row
    ctx = cuda.current_context().handle
    shp = (ctypes.c_int64 * 1)(nbytes)
    dt = lib.dv_dtype_from_name(b"uint8")
    out = ctypes.c_void_p()

    def raw_device_array():
        lib.dv_device_array(ctx, 1, shp, dt, None, b"C", None, ctypes.byref(out))
        lib.dv_array_release(out)

    rows = {
        "numpy.empty": lambda: np.empty(nbytes, dtype=np.uint8),
        "device_array": lambda: cuda.device_array(nbytes, dtype=np.uint8),
        "ctypes": raw_device_array,
        "numpy copy": lambda: a.copy(),
        "to_device": lambda: cuda.to_device(a),
    }
    for fn in rows.values():  # warm: first calls, caches
        for _ in range(BATCH):
            fn()
    times = {k: [] for k in rows}
    for _ in range(reps):  # interleaved: one batch of each row in turn
        for k, fn in rows.items():
            t = time.perf_counter()
            for _ in range(BATCH):
                fn()
            times[k].append((time.perf_counter() - t) / BATCH * 1e6)
    res = {k: statistics.median(v) for k, v in times.items()}
    from devarray import _lib
    res["binding"] = "compiled" if _lib.speedups is not None else "ctypes"
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=41)
    ap.add_argument("--bytes", type=int, default=1 << 20)
    ap.add_argument("--child", action="store_true")
    o = ap.parse_args()
    if o.child:
        print(json.dumps(child(o.reps, o.bytes)))
        return
    res = {}
    for mode in ("fast", "fast/ctypes", "checked"):
        env = dict(os.environ, DV_HOST_MODE=mode.split("/")[0], DV_BACKEND="host")
        if mode.endswith("/ctypes"):
            env["DEVARRAY_SPEEDUPS"] = "off"
        r = subprocess.run([sys.executable, __file__, "--child", "--reps", str(o.reps),
                            "--bytes", str(o.bytes)], env=env, capture_output=True, text=True)
        if r.returncode:
            sys.exit("%s mode: %s" % (mode, (r.stderr.strip().splitlines() or ["failed"])[-1]))
        res[mode] = json.loads(r.stdout.strip().splitlines()[-1])
    print("host simulator through Python, %d bytes: us per call (median of %d batches of %d)"
          % (o.bytes, o.reps, BATCH))
    print("%-12s %-9s %12s %8s %12s %8s %12s %12s %8s"
          % ("mode", "binding", "device_array", "(ctypes)", "numpy.empty", "ratio", "to_device",
             "numpy copy", "ratio"))
    for mode, m in res.items():
        print("%-12s %-9s %12.2f %8.2f %12.2f %7.2fx %12.2f %12.2f %7.2fx"
              % (mode, m["binding"], m["device_array"], m["ctypes"], m["numpy.empty"],
                 m["device_array"] / m["numpy.empty"], m["to_device"], m["numpy copy"],
                 m["to_device"] / m["numpy copy"]))
    f, c = res["fast"], res["checked"]
    print("checked over fast: device_array %.1fx, to_device %.1fx"
          % (c["device_array"] / f["device_array"], c["to_device"] / f["to_device"]))
    print("goal (fast, within 2x of NumPy): device_array %s, to_device %s"
          % ("met" if f["device_array"] <= 2 * f["numpy.empty"] else "not met",
             "met" if f["to_device"] <= 2 * f["numpy copy"] else "not met"))


if __name__ == "__main__":
    main()
