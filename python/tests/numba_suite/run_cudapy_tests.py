"""Numba's own kernel tests (numba/cuda/tests/cudapy), unchanged, on devarray.jit and on
Numba's simulator: run_cudapy_tests.py BACKEND [-v] [-k TEXT] [--modules a,b] [--compare].

BACKEND is host, opencl or cuda (numba.cuda pointed at devarray by numba_shim, kernels
compiled by devarray.jit) or ``sim`` (Numba's own simulator, NUMBA_ENABLE_CUDASIM=1, no
devarray). Each test module runs in a process of its own (a kernel that crashes or hangs
costs its module, not the run). It prints a line per module (passed, failed, errors,
skipped) and the totals, ending with ``N passed, N failed``. --compare also runs the
simulator on the same modules and prints both side by side.

Exit status: 0 when every module passes at least the tests `floors.txt` records for this
backend (the counts measured when the list was last written: a regression fails the run),
1 when one passes fewer, 77 when Numba, NumPy or the backend is absent.
"""
import argparse
import json
import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON_DIR = os.path.normpath(os.path.join(HERE, "..", ".."))
PACKAGE = "numba.cuda.tests.cudapy"
# shared, local and constant memory, barriers, atomics, arrays and records in kernels,
# device functions, math, globals and closures (free variables), and Numba's examples
MODULES = ["test_sm", "test_sm_creation", "test_localmem", "test_constmem", "test_sync",
           "test_atomics", "test_array", "test_array_args", "test_record_dtype",
           "test_device_func", "test_math", "test_globals", "test_freevar", "test_matmul",
           "test_laplace", "test_idiv", "test_powi", "test_minmax", "test_boolean",
           "test_forall", "test_slicing", "test_warp_ops", "test_intrinsics"]
MODULE_TIMEOUT_S = 600


def run_one(module, backend, verbose, pattern):
    """In this process: the module's tests; prints one JSON line of counts."""
    if backend != "sim":
        sys.path.insert(0, HERE)
        sys.path.insert(0, PYTHON_DIR)
        os.environ["DV_BACKEND"] = backend
        import numba_shim
        numba_shim.install()
    import importlib
    try:
        mod = importlib.import_module(PACKAGE + "." + module)
    except Exception as e:  # a module that does not import counts as one error
        print(json.dumps({"module": module, "passed": 0, "failed": 0, "errors": 1,
                          "skipped": 0, "import_error": "%s: %s" % (type(e).__name__, e)}))
        return
    suite = unittest.defaultTestLoader.loadTestsFromModule(mod)
    tests = []

    def flatten(s):
        for t in s:
            if isinstance(t, unittest.TestSuite):
                flatten(t)
            else:
                tests.append(t)
    flatten(suite)
    if pattern:
        tests = [t for t in tests if pattern in t.id()]
    result = unittest.TestResult()
    for t in tests:
        t.run(result)
    n = result.testsRun
    failed = len(result.failures) + len(result.unexpectedSuccesses)
    errors = len(result.errors)
    skipped = len(result.skipped)
    out = {"module": module, "passed": max(0, n - failed - errors - skipped), "failed": failed,
           "errors": errors, "skipped": skipped}
    if verbose:
        for t, tb in result.failures + result.errors:
            lines = tb.strip().splitlines()
            exc = [ln for ln in lines if ln and not ln.startswith(" ") and ":" in ln
                   and not ln.startswith("Traceback")]
            print("--- %s\n%s" % (t.id(), (exc[-1] if exc else lines[-1])[:300]),
                  file=sys.stderr)
            if verbose > 1:
                print(tb, file=sys.stderr)
    print(json.dumps(out))


def run_all(backend, modules, verbose, pattern):
    env = dict(os.environ)
    if backend == "sim":
        env["NUMBA_ENABLE_CUDASIM"] = "1"
    else:
        env.pop("NUMBA_ENABLE_CUDASIM", None)
    rows = []
    for m in modules:
        cmd = [sys.executable, os.path.abspath(__file__), backend, "--one", m]
        if verbose:
            cmd.append("-" + "v" * verbose)
        if pattern:
            cmd += ["-k", pattern]
        try:
            r = subprocess.run(cmd, env=env, capture_output=True, text=True,
                               timeout=MODULE_TIMEOUT_S)
            line = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
            if verbose and r.stderr:
                sys.stderr.write(r.stderr)
            if line:
                rows.append(json.loads(line[-1]))
            else:
                rows.append({"module": m, "passed": 0, "failed": 0, "errors": 1,
                             "skipped": 0, "import_error": "the process ended with status "
                             "%d: %s" % (r.returncode, r.stderr.strip()[-300:])})
        except subprocess.TimeoutExpired:
            rows.append({"module": m, "passed": 0, "failed": 0, "errors": 1, "skipped": 0,
                         "import_error": "timed out after %d s" % MODULE_TIMEOUT_S})
    return rows


def read_floors(path):
    floors = {}
    if not os.path.exists(path):
        return floors
    for ln in open(path):
        ln = ln.split("#")[0].split()
        if len(ln) == 3:
            floors[(ln[0], ln[1])] = int(ln[2])
    return floors


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("backend")
    ap.add_argument("-v", action="count", default=0)
    ap.add_argument("-k", default=None)
    ap.add_argument("--one", default=None)
    ap.add_argument("--modules", default=None)
    ap.add_argument("--compare", action="store_true")
    a = ap.parse_args()
    try:
        import numba  # noqa: F401
        import numpy  # noqa: F401
    except ImportError as e:
        print("SKIP: numba cudapy tests: %s (install python3-numba)" % e)
        return 77
    if a.one:
        run_one(a.one, a.backend, a.v, a.k)
        return 0
    if a.backend != "sim":
        sys.path.insert(0, PYTHON_DIR)
        import devarray
        ok, why = devarray.backend_available(a.backend)
        if not ok:
            print("SKIP: numba cudapy tests on %s: %s" % (a.backend, why))
            return 77
    modules = a.modules.split(",") if a.modules else MODULES
    rows = run_all(a.backend, modules, a.v, a.k)
    sim = {r["module"]: r for r in run_all("sim", modules, 0, a.k)} if a.compare else {}
    floors = read_floors(os.path.join(HERE, "floors.txt"))
    bad = []
    tot = {"passed": 0, "failed": 0, "errors": 0, "skipped": 0}
    stot = dict(tot)
    print("%-22s %-26s %s" % ("module", "devarray (%s)" % a.backend,
                              "Numba's simulator" if a.compare else ""))
    for r in rows:
        for k in tot:
            tot[k] += r[k]
        s = sim.get(r["module"])
        col = "%3d passed %2d failed %2d errors %2d skipped" % (
            r["passed"], r["failed"], r["errors"], r["skipped"])
        scol = ""
        if s:
            for k in stot:
                stot[k] += s[k]
            scol = "%3d passed %2d failed %2d errors %2d skipped" % (
                s["passed"], s["failed"], s["errors"], s["skipped"])
        print("%-22s %s   %s%s" % (r["module"], col, scol,
                                   ("  (" + r["import_error"][:120] + ")")
                                   if r.get("import_error") else ""))
        fl = floors.get((a.backend, r["module"]))
        if fl is not None and r["passed"] < fl and not a.k:
            bad.append("%s: %d passed, fewer than the %d floors.txt records" % (
                r["module"], r["passed"], fl))
    if a.compare:
        print("simulator: %(passed)d passed, %(failed)d failed, %(errors)d errors, "
              "%(skipped)d skipped" % stot)
    for b in bad:
        print("REGRESSION: " + b)
    print("%d passed, %d failed" % (tot["passed"], tot["failed"] + tot["errors"]))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
