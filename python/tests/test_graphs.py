"""Graphs (issue 40): Stream.capture() / begin_capture() / end_capture() and Graph.launch(),
with CuPy's names; what cannot be captured raises and the capture goes on."""
import numpy as np
import pytest

import devarray as cuda


def _pinned(a):
    p = cuda.pinned_array(a.shape, dtype=a.dtype)
    p[...] = a
    return p


def test_capture_and_replay(no_leak):
    s = cuda.stream()
    src = _pinned(np.arange(16, dtype=np.float32))
    out = _pinned(np.zeros(16, dtype=np.float32))
    d = cuda.device_array(16, dtype=np.float32)
    with s.capture() as g:
        d.copy_to_device(src, stream=s)
        d.copy_to_host(out, stream=s)
    assert len(g) == 2
    s.synchronize()
    assert not out.any()  # captured, not run
    for k in range(3):
        src[...] = np.arange(16, dtype=np.float32) * (k + 1)
        g.launch(s)
        s.synchronize()
        np.testing.assert_array_equal(out, src)
    src[...] = 5
    g.launch()  # no stream: synchronous
    np.testing.assert_array_equal(out, 5)
    del g, d


def test_begin_end_and_callbacks(no_leak):
    s = cuda.stream()
    src = _pinned(np.ones(8, dtype=np.int32))
    d = cuda.device_array(8, dtype=np.int32)
    seen = []
    s.begin_capture()
    d.copy_to_device(src, stream=s)
    s.add_callback(lambda stream, status, arg: seen.append((status, arg)), "tick")
    g = s.end_capture()
    assert seen == []
    g.launch(s)
    g.launch(s)
    s.synchronize()
    assert seen == [(0, "tick"), (0, "tick")]
    del g


def test_refusals_keep_the_capture(no_leak):
    s = cuda.stream()
    d = cuda.device_array(4, dtype=np.float64)
    src = _pinned(np.arange(4.0))
    with s.capture() as g:
        with pytest.raises(cuda.MisuseError, match="capturing a graph"):
            s.synchronize()
        with pytest.raises(cuda.MisuseError, match="pageable"):
            d.copy_to_device(np.arange(4.0), stream=s)  # a NumPy array: pageable memory
        d.copy_to_device(src, stream=s)
    assert len(g) == 1
    with pytest.raises(cuda.ArgumentError):
        cuda.default_stream().begin_capture()  # the default stream carries synchronous calls
    del g


def test_failed_block_drops_the_capture(no_leak):
    s = cuda.stream()
    with pytest.raises(ValueError):
        with s.capture():
            raise ValueError("inside")
    # the stream works as before
    a = np.arange(3.0)
    np.testing.assert_array_equal(cuda.to_device(a, stream=s).copy_to_host(stream=s), a)
    s.synchronize()
