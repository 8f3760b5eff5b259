"""Managed memory's hints from Python (issue 40): devarray.prefetch and devarray.advise over the
arrays managed_array returns (dv_array_prefetch, dv_array_advise), CuPy's memPrefetchAsync /
memAdvise in Numba's style; refused clearly for memory that is not managed and on backends
without managed memory (the host simulator, OpenCL)."""
import numpy as np
import pytest

import devarray
from devarray._lib import ArgumentError, NotSupportedError


def _managed(n=64):
    try:
        return devarray.managed_array(n, np.int32)
    except NotSupportedError:
        return None


def test_refused_for_other_memory(ctx):
    """Pinned, pageable and device memory are refused naming their kind; bad arguments too."""
    p = devarray.pinned_array(16, np.int32)
    with pytest.raises(ArgumentError, match="pinned host memory, not managed memory"):
        devarray.prefetch(p)
    h = np.zeros(16, np.int32)
    with pytest.raises(ArgumentError, match="pageable host memory"):
        devarray.advise(h, "read_mostly")
    d = devarray.device_array(16, np.int32)
    with pytest.raises(ArgumentError, match="device memory"):
        devarray.prefetch(d, to="host")
    with pytest.raises(TypeError):
        devarray.prefetch([1, 2, 3])
    with pytest.raises(ValueError, match="location"):
        devarray.prefetch(d, to="gpu1")
    with pytest.raises(ValueError, match="advice"):
        devarray.advise(d, "write_mostly")
    with pytest.raises(ValueError, match="advice"):
        devarray.advise(d, 7)
    with pytest.raises(TypeError):
        devarray.prefetch(d, stream=5)


def test_no_managed_memory_no_hints(ctx):
    """Where the backend has no managed memory there is no managed array to hint."""
    if _managed() is not None:
        pytest.skip("this backend has managed memory")
    with pytest.raises(NotSupportedError):
        devarray.managed_array(8)


def test_prefetch_and_advise(ctx):
    """Both calls on a managed array, on the default stream and a stream; the device's own
    refusal without concurrent managed access; a view of a managed array is refused."""
    m = _managed(1024)
    if m is None:
        pytest.skip("no managed memory on this backend")
    m[:] = np.arange(1024)
    s = devarray.stream()
    try:
        devarray.prefetch(m, to="host")
        devarray.prefetch(m, to="host", stream=s)
        s.synchronize()
        for advice in ("read_mostly", "unset_read_mostly", "unset_preferred_location", 1, 2):
            devarray.advise(m, advice, location="host")
        devarray.advise(m, "preferred_location", "host")
        try:
            devarray.prefetch(m, to="device", stream=s)
            devarray.advise(m, "accessed_by", "device")
            devarray.advise(m, "unset_accessed_by", 0)
        except NotSupportedError as e:  # a device without concurrent managed access
            assert "concurrent managed access" in str(e)
        s.synchronize()
        np.testing.assert_array_equal(m, np.arange(1024))
        with pytest.raises(ValueError, match="not a view of it"):
            devarray.prefetch(m[10:20])
    finally:
        del s
