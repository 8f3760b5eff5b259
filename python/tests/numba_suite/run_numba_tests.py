"""Numba's own memory tests, unchanged, on devarray: run_numba_tests.py BACKEND [-v] [-k TEXT]
[--suggest] [--list FILE].

Loads the test modules MODULES from the installed Numba (numba/cuda/tests/cudadrv) with
unittest, after numba_shim.install() has pointed numba.cuda at devarray, runs them on
BACKEND (host, opencl, cuda: DV_BACKEND) and checks the outcome against the list file
(expected.txt next to this script). A test that fails or errors and is not listed fails the
run; so does a listed test that passes or is skipped, and an entry naming no test (the list
stays exact). Entries of category ``scope`` are not run (kernels compiled by Numba, the CUDA
driver API itself): they are reported as skipped with their reason. Exit status: 0 when the
outcome matches the list, 1 when not, 77 when Numba, NumPy or the backend is absent (the
reason named) or the installed Numba is not the version the list was measured with.

-v prints every test's outcome and the traceback of every failure; -k runs only the tests
whose id contains TEXT (then entries for tests not run are not checked); --suggest prints
draft lines for the list (failures not listed, with their exception) and the lines to remove.
"""
import argparse
import faulthandler
import importlib
import os
import sys
import traceback
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON_DIR = os.path.normpath(os.path.join(HERE, "..", ".."))

PACKAGE = "numba.cuda.tests.cudadrv"
# The memory tests: the modules of numba/cuda/tests/cudadrv that exercise the memory API
# (arrays, transfers, host memory, streams, events, deallocation, contexts, memory managers).
# Left out, as not memory tests: test_cuda_driver (PTX modules and launches), test_linker,
# test_nvvm_driver, test_inline_ptx, test_ir_patch (compilers), test_cuda_libraries,
# test_runtime, test_detect, test_init (CUDA libraries, the runtime, driver detection and
# initialisation in subprocesses), test_profiler, test_ptds (a kernel in a subprocess).
MODULES = [
    "test_array_attr", "test_context_stack", "test_cuda_array_slicing",
    "test_cuda_auto_context", "test_cuda_devicerecord", "test_cuda_memory",
    "test_cuda_ndarray", "test_deallocations", "test_emm_plugins", "test_events",
    "test_host_alloc", "test_managed_alloc", "test_pinned", "test_reset_device",
    "test_select_device", "test_streams",
]
CATEGORIES = ("differs", "needs", "missing", "bug", "scope")
TEST_TIMEOUT_S = 120


class Entry:
    def __init__(self, test_id, category, backends, reason, line):
        self.id, self.category, self.backends, self.reason, self.line = (
            test_id, category, backends, reason, line)

    def applies(self, backend):
        return self.backends == ["*"] or backend in self.backends


def read_list(path):
    """(numba version the list was measured with, {test id: [Entry]}) from the list file.

    A line is ``TEST_ID CATEGORY BACKENDS REASON``: TEST_ID relative to PACKAGE (or a full
    id), BACKENDS ``*`` or a comma-separated list of backend names; ``# numba VERSION`` names
    the Numba the ids come from."""
    version, entries = None, {}
    with open(path) as f:
        for n, raw in enumerate(f, 1):
            line = raw.strip()
            if line.startswith("# numba "):
                version = line.split()[2]
            if not line or line.startswith("#"):
                continue
            parts = line.split(None, 3)
            if len(parts) < 4 or parts[1] not in CATEGORIES:
                raise SystemExit("%s:%d: want 'TEST_ID CATEGORY BACKENDS REASON' with CATEGORY "
                                 "one of %s: %r" % (path, n, ", ".join(CATEGORIES), line))
            tid = parts[0] if parts[0].startswith("numba.") else PACKAGE + "." + parts[0]
            e = Entry(tid, parts[1], parts[2].split(","), parts[3], n)
            entries.setdefault(e.id, []).append(e)
    return version, entries


class Result(unittest.TestResult):
    """Outcome per test id: (kind, detail), kind one of pass, fail, error, skip."""

    def __init__(self, verbose):
        super().__init__()
        self.buffer = True
        self.outcomes = {}
        self.verbose = verbose

    def _set(self, test, kind, detail=""):
        self.outcomes[test.id()] = (kind, detail)
        if self.verbose:
            print("%-5s %s" % (kind, test.id()), flush=True)

    def startTest(self, test):
        faulthandler.dump_traceback_later(TEST_TIMEOUT_S, exit=True)
        super().startTest(test)

    def stopTest(self, test):
        faulthandler.cancel_dump_traceback_later()
        super().stopTest(test)

    def addSuccess(self, test):
        super().addSuccess(test)
        self._set(test, "pass")

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._set(test, "fail", self.failures[-1][1])

    def addError(self, test, err):
        super().addError(test, err)
        # An error in setUpClass/tearDownModule comes with a holder whose id is the fixture's.
        self._set(test, "error", self.errors[-1][1])

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._set(test, "skip", reason)

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self._set(test, "pass", "expected failure")

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._set(test, "fail", "unexpected success of a test marked expectedFailure")


def flatten(suite):
    for t in suite:
        if isinstance(t, unittest.TestSuite):
            yield from flatten(t)
        else:
            yield t


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("backend")
    ap.add_argument("--list", default=os.path.join(HERE, "expected.txt"))
    ap.add_argument("-v", "--verbose", action="store_true")
    ap.add_argument("-k", dest="only", default=None)
    ap.add_argument("--suggest", action="store_true",
                    help="print draft list lines for unlisted failures (category to choose, "
                         "the exception as reason) and the lines of listed tests that pass")
    args = ap.parse_args()
    faulthandler.enable()  # a crash in a test prints the Python stack (which test it was)
    be = args.backend
    tag = "python.numba.%s" % be

    os.environ["DV_BACKEND"] = be
    if os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0"):
        print("%s: NUMBA_ENABLE_CUDASIM=%s ignored: these tests run on devarray, not on "
              "Numba's simulator" % (tag, os.environ["NUMBA_ENABLE_CUDASIM"]))
    os.environ["NUMBA_ENABLE_CUDASIM"] = "0"
    sys.path.insert(0, PYTHON_DIR)
    sys.path.insert(0, HERE)
    try:
        import numpy  # noqa: F401
        import numba
    except ImportError as e:
        print("SKIP: %s: %s (install python3-numba and python3-numpy)" % (tag, e))
        return 77
    version, entries = read_list(args.list)
    if version and numba.__version__ != version:
        print("SKIP: %s: %s lists the tests of Numba %s; this is Numba %s"
              % (tag, os.path.basename(args.list), version, numba.__version__))
        return 77
    import devarray
    ok, why = devarray.backend_available(be)
    if not ok:
        print("SKIP: %s: backend %s unavailable: %s" % (tag, be, why))
        return 77
    import numba_shim
    numba_shim.install()
    from numba.core import config
    assert not config.ENABLE_CUDASIM

    from devarray import _lib
    if os.environ.get("DEVARRAY_EXPECT_SPEEDUPS") == "1" and _lib.speedups is None:
        print("FAIL: %s: devarray._speedups was expected (DEVARRAY_EXPECT_SPEEDUPS=1) but "
              "the binding runs on ctypes alone" % tag)
        return 1
    print("%s: Numba %s's %s tests on devarray %s (%s), backend %s, %s"
          % (tag, numba.__version__, PACKAGE, devarray.__version__, devarray.library_path, be,
             "compiled per-call paths" if _lib.speedups is not None else "ctypes alone"))
    if not numba_shim.config_tracked():
        print("  note: devarray has no config.track: assignments to numba.core.config's "
              "CUDA_DEALLOCS_* do not reach devarray")

    mine = {i: [e for e in es if e.applies(be)] for i, es in entries.items()}
    mine = {i: es for i, es in mine.items() if es}
    loader = unittest.TestLoader()
    tests, outcomes, broken_modules = [], {}, []
    for m in MODULES:
        name = "%s.%s" % (PACKAGE, m)
        try:
            mod = importlib.import_module(name)
        except Exception:
            outcomes[name] = ("error", traceback.format_exc())
            broken_modules.append(name)
            continue
        tests.extend(flatten(loader.loadTestsFromModule(mod)))
    collected = {t.id() for t in tests}
    if args.only:
        tests = [t for t in tests if args.only in t.id()]
    out_of_scope = {}
    run = []
    for t in tests:
        scope = [e for e in mine.get(t.id(), []) if e.category == "scope"]
        if scope:
            out_of_scope[t.id()] = scope[0].reason
        else:
            run.append(t)

    result = Result(args.verbose)
    unittest.TestSuite(run).run(result)
    outcomes.update(result.outcomes)
    for tid, why in out_of_scope.items():
        outcomes[tid] = ("skip", "out of scope: " + why)

    # Compare with the list.
    mismatches, as_listed = [], 0
    for tid, (kind, detail) in sorted(outcomes.items()):
        es = [e for e in mine.get(tid, []) if e.category != "scope"]
        if es:
            if kind in ("fail", "error"):
                as_listed += 1
            elif kind == "pass":
                mismatches.append("%s: listed (%s, line %d) but passed: shrink the list"
                                  % (tid, es[0].category, es[0].line))
            elif kind == "skip":
                mismatches.append("%s: listed (%s, line %d) but skipped: %s"
                                  % (tid, es[0].category, es[0].line, detail))
        elif kind in ("fail", "error") and tid not in out_of_scope:
            mismatches.append("%s: %s, not in the list:\n%s" % (tid, kind.upper(), detail))
    unchecked = 0
    for tid, es in sorted(mine.items()):
        if tid in outcomes:
            continue
        in_broken = any(tid.startswith(b + ".") for b in broken_modules)
        if in_broken or (args.only and args.only not in tid):
            unchecked += 1
            continue
        if tid in (PACKAGE + "." + m for m in MODULES):
            mismatches.append("%s: listed (line %d) as not importing, but it imports now: list "
                              "its failing tests instead" % (tid, es[0].line))
        elif tid not in collected:
            mismatches.append("%s: listed (line %d) but no such test or module"
                              % (tid, es[0].line))

    counts = {k: sum(1 for v in outcomes.values() if v[0] == k)
              for k in ("pass", "fail", "error", "skip")}
    if args.verbose:
        for tid, (kind, detail) in sorted(outcomes.items()):
            if kind in ("fail", "error"):
                print("---- %s %s\n%s" % (kind.upper(), tid, detail))
    print("modules: %d loaded, %d did not import%s"
          % (len(MODULES) - len(broken_modules), len(broken_modules),
             "".join("\n  %s" % b for b in broken_modules)))
    print("passed: %d" % counts["pass"])
    print("failed: %d" % counts["fail"])
    print("errors: %d (a module that did not import counts as one)" % counts["error"])
    print("skipped: %d" % counts["skip"])
    for tid, (kind, detail) in sorted(outcomes.items()):
        if kind == "skip":
            print("  %s: %s" % (tid, detail or "(no reason given)"))
    by_cat = {c: sum(1 for es in mine.values() if es[0].category == c) for c in CATEGORIES}
    print("listed for %s: %d (%s); failing as listed: %d; not checked (module did not import "
          "or -k): %d" % (be, len(mine), ", ".join("%s %d" % kv for kv in by_cat.items()),
                         as_listed,
                         unchecked))
    if mismatches:
        print("MISMATCHES with %s (%d):" % (os.path.basename(args.list), len(mismatches)))
        for m in mismatches:
            print("  " + m.replace("\n", "\n    "))
    else:
        print("outcome matches %s" % os.path.basename(args.list))
    if args.suggest:
        print("SUGGESTED changes to %s (choose each category, reword each reason):"
              % os.path.basename(args.list))
        for tid, (kind, detail) in sorted(outcomes.items()):
            listed = [e for e in mine.get(tid, []) if e.category != "scope"]
            rel = tid[len(PACKAGE) + 1:] if tid.startswith(PACKAGE + ".") else tid
            if kind in ("fail", "error") and not listed and tid not in out_of_scope:
                last = [ln for ln in detail.strip().splitlines() if ln and not ln[0].isspace()]
                print("  add:    %s ? %s %s" % (rel, be, last[-1] if last else kind))
            elif kind in ("pass", "skip") and listed:
                print("  remove: line %d (%s %s)" % (listed[0].line, rel, kind))
        for m in MODULES:
            es = mine.get(PACKAGE + "." + m)
            if es and PACKAGE + "." + m not in broken_modules:
                print("  remove: line %d (%s imports now)" % (es[0].line, m))
    print("%d passed, %d failed" % (counts["pass"], counts["fail"] + counts["error"]))
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
