"""CTest driver: run_tests.py BACKEND [test_x.py ...] [pytest args]: exit 77 (skipped) when the
backend is absent, else pytest's status for python/tests (or the test files named) on it."""
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, ".."))
backend = sys.argv[1]
os.environ["DV_BACKEND"] = backend
try:
    import numpy  # noqa: F401  (only checked for)
    import pytest  # noqa: F401
except ImportError as e:
    print("SKIP: python.%s: %s (install python3-numpy and python3-pytest)" % (backend, e))
    sys.exit(77)
import devarray  # noqa: E402

ok, why = devarray.backend_available(backend)
if not ok:
    print("SKIP: python.%s: backend %s unavailable: %s" % (backend, backend, why))
    sys.exit(77)
# test files named among the arguments (test_x.py) run alone, else all of python/tests
args = sys.argv[2:]
files = [os.path.join(here, a) for a in args if a.endswith(".py") and os.sep not in a]
rest = [a for a in args if not (a.endswith(".py") and os.sep not in a)]
# The checks that need no backend (the header mirrors, the import layers) have CTest entries of
# their own (python.abi, python.imports): the whole-suite runs per backend leave them out.
OWN_ENTRIES = ("test_abi.py", "test_import_layers.py")
skip = [] if files else ["--ignore=" + os.path.join(here, f) for f in OWN_ENTRIES]
sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", "-o", "faulthandler_timeout=120"]
                     + skip + (files or [here]) + rest))
