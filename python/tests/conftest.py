"""pytest setup: the package from python/, the backend from DV_BACKEND (default host).

A backend that cannot be opened skips every test with its reason (the CTest entry, through
run_tests.py, reports it as skipped by name)."""
import gc
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import devarray  # noqa: E402

BACKEND = os.environ.get("DV_BACKEND", "host")


def pytest_collection_modifyitems(config, items):
    ok, why = devarray.backend_available(BACKEND) if BACKEND != "auto" else (True, "")
    if not ok:
        mark = pytest.mark.skip(reason="backend %s unavailable: %s" % (BACKEND, why))
        for it in items:
            it.add_marker(mark)


@pytest.fixture
def ctx():
    return devarray.current_context()


def live_arrays(ctx):
    gc.collect()
    return ctx.raw_stats().arrays.current


@pytest.fixture
def no_leak(ctx):
    """Asserts that the test leaves no array descriptor alive."""
    ctx.synchronize()
    before = live_arrays(ctx)
    yield
    ctx.synchronize()
    assert live_arrays(ctx) == before
