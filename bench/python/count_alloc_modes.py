"""Instructions per call of bench_alloc_modes.py's rows, counted by callgrind (issue 23).

    PYTHONPATH=python DEVARRAY_LIBRARY=build-rel/libdevarray.so \
      /usr/bin/python3 bench/python/count_alloc_modes.py [--calls N] [--bytes B]

For each row, valgrind --tool=callgrind runs /usr/bin/python3 making N calls of the row, and
the same program making none (imports, context, warm-up of every row: the same in both); the
difference over N is the row's instructions per call (the Python loop's own ~200 included).
N is --calls (10,000) for the rows that allocate, --copy-calls (1,000) for those that copy.
Host simulator, fast mode (DV_HOST_MODE=fast), 1 MiB. The rows marked "ctypes path" run in a
process with DEVARRAY_SPEEDUPS=off (the binding without its compiled per-call paths); the
others with the binding as it loads (the compiled module when found). Deterministic: load on
the machine does not change the counts.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

ROWS = {  # row -> (expression per call, speedups off?, copies B bytes?)
    "numpy.empty": ("np.empty(B, dtype=np.uint8)", False, False),
    "device_array": ("cuda.device_array(B, dtype=np.uint8)", False, False),
    "device_array, ctypes path": ("cuda.device_array(B, dtype=np.uint8)", True, False),
    "a.copy()": ("a.copy()", False, True),
    "to_device": ("cuda.to_device(a)", False, True),
    "to_device, ctypes path": ("cuda.to_device(a)", True, True),
}

CHILD = r"""
import sys
import numpy as np
import devarray as cuda
from devarray import _lib
B, N, row = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
a = np.full(B, 7, dtype=np.uint8)
fns = {%s}
for f in fns.values():
    for _ in range(20):
        f()
f = fns[row]
for _ in range(N):
    f()
print("speedups" if getattr(_lib, "speedups", None) is not None else "ctypes")
""" % ", ".join("%r: lambda: %s" % (k, v[0]) for k, v in ROWS.items())


def instructions(n, row, nbytes, off, tmp):
    env = dict(os.environ, DV_BACKEND="host", DV_HOST_MODE="fast")
    if off:
        env["DEVARRAY_SPEEDUPS"] = "off"
    out = os.path.join(tmp, "cg.out")
    r = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=" + out,
                        sys.executable, "-c", CHILD, str(nbytes), str(n), row],
                       env=env, capture_output=True, text=True)
    if r.returncode:
        sys.exit("%s: %s" % (row, r.stderr[-2000:]))
    with open(out) as f:
        m = re.search(r"^summary:\s+(\d+)", f.read(), re.M)
    return int(m.group(1)), r.stdout.strip()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=10000)
    ap.add_argument("--copy-calls", type=int, default=1000,
                    help="calls of the rows that copy (valgrind runs a 1 MiB copy slowly)")
    ap.add_argument("--rows", default=",".join(ROWS),
                    help="comma-separated rows to count (default: all; ratios need all)")
    ap.add_argument("--bytes", type=int, default=1 << 20)
    o = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = {}
        print("callgrind, host simulator fast mode, %d bytes: instructions per call "
              "(N calls minus none)" % o.bytes)
        res = {}
        rows = o.rows.split(",")
        for row, (_, off, copies) in ROWS.items():
            if row not in rows:
                continue
            if off not in base:
                base[off] = instructions(0, row, o.bytes, off, tmp)[0]
            n = o.copy_calls if copies else o.calls
            ir, how = instructions(n, row, o.bytes, off, tmp)
            res[row] = (ir - base[off]) / n
            print("%-28s %12.0f   (%s, %d calls)" % (row, res[row], how, n), flush=True)
        if len(res) < len(ROWS):
            return
        for name, num, den in (("device_array / numpy.empty", "device_array", "numpy.empty"),
                               ("  ctypes path", "device_array, ctypes path", "numpy.empty"),
                               ("to_device / a.copy()", "to_device", "a.copy()"),
                               ("  ctypes path", "to_device, ctypes path", "a.copy()")):
            print("%-28s %11.2fx" % (name, res[num] / res[den]))
        print("%-28s %12.0f" % ("to_device - a.copy()", res["to_device"] - res["a.copy()"]))
        print("%-28s %12.0f" % ("  ctypes path", res["to_device, ctypes path"] - res["a.copy()"]))


if __name__ == "__main__":
    main()
