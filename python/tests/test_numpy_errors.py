"""What NumPy refuses is refused with NumPy's exception class and words, what Numba's API
refuses with Numba's: each message is compared with the one NumPy (or Numba) itself raises
for the same call on a host array, here, never with a copy of its text. A refused call
changes nothing."""
import os

import numpy as np
import pytest

import devarray as cuda


def refused_alike(dev_op, ref_op):
    """dev_op() raises what ref_op() raises: a subclass of its class, with its message."""
    with pytest.raises(Exception) as want:
        ref_op()
    with pytest.raises(type(want.value)) as got:
        dev_op()
    assert str(got.value) == str(want.value)
    return got.value


def setitem(a, key, value):
    a[key] = value


def numba_module(name):
    import os
    os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")
    try:
        import importlib
        return importlib.import_module(name)
    except Exception as e:  # pragma: no cover - depends on the machine
        pytest.skip("numba unavailable: %s" % e)


# ---- item assignment ------------------------------------------------------------------------

def test_assignment_broadcast_errors(no_leak):
    h = np.arange(35.0)
    d = cuda.to_device(h)
    for value in (np.ones((2, 3)), np.ones(34), [1.0, 2.0], np.ones((2, 35))):
        refused_alike(lambda: setitem(d, slice(None), value),
                      lambda: setitem(h.copy(), slice(None), value))
        # the same value on the device: NumPy's words for the same shapes
        if np.ndim(value):
            dv = cuda.to_device(np.asarray(value))
            refused_alike(lambda: setitem(d, slice(None), dv),
                          lambda: setitem(h.copy(), slice(None), np.asarray(value)))
            del dv
    h2 = np.zeros((3, 4))
    d2 = cuda.to_device(h2)
    refused_alike(lambda: setitem(d2, 0, np.zeros(3)), lambda: setitem(h2.copy(), 0, np.zeros(3)))
    refused_alike(lambda: setitem(d2, (0, 1), [1.0, 2.0]),
                  lambda: setitem(h2.copy(), (0, 1), [1.0, 2.0]))
    np.testing.assert_array_equal(d.copy_to_host(), h)  # nothing was written
    np.testing.assert_array_equal(d2.copy_to_host(), h2)
    del d, d2


def test_assignment_conversion_errors(no_leak):
    h = np.arange(6.0)
    d = cuda.to_device(h)
    for key in (slice(None), 2, slice(1, 3)):
        for value in ("abc", 1j, object()):
            refused_alike(lambda: setitem(d, key, value), lambda: setitem(h.copy(), key, value))
    np.testing.assert_array_equal(d.copy_to_host(), h)
    del d


def test_assignment_drops_leading_ones_as_numpy(no_leak):
    h = np.zeros(5)
    d = cuda.to_device(h)
    v = np.arange(5.0).reshape(1, 1, 5)
    h[:] = v
    d[:] = v
    np.testing.assert_array_equal(d.copy_to_host(), h)
    d[:] = cuda.to_device(v * 3)
    h[:] = v * 3
    np.testing.assert_array_equal(d.copy_to_host(), h)
    del d


def test_index_errors_in_numpys_words(no_leak):
    h = np.zeros((3, 4))
    d = cuda.to_device(h)
    for key in (3, -4, (0, 4), (1, 2, 3), (slice(None), 7), 1.5, (0, 1.5), slice(None, None, 0),
                slice(1.5, None), (Ellipsis, Ellipsis)):
        e = refused_alike(lambda: d[key], lambda: h[key])
        refused_alike(lambda: setitem(d, key, 1.0), lambda: setitem(h.copy(), key, 1.0))
        if isinstance(e, cuda.DevarrayError):
            assert e.name and e.detail  # the library's status is still there
    np.testing.assert_array_equal(d.copy_to_host(), h)
    del d


# ---- views ----------------------------------------------------------------------------------

def test_view_errors_in_numpys_words(no_leak):
    h = np.zeros((3, 4))
    d = cuda.to_device(h)
    refused_alike(lambda: d[:, ::2].view(np.float32), lambda: h[:, ::2].view(np.float32))
    h8 = np.zeros(3, np.int8)
    d8 = cuda.to_device(h8)
    refused_alike(lambda: d8.view(np.float32), lambda: h8.view(np.float32))
    del d, d8


def test_transpose_checks_axes_as_numpy(no_leak):
    h = np.arange(6.0).reshape(2, 3)
    d = cuda.to_device(h)
    for axes in ((1, 2), (0, -3), (2, 0), (0, 0), (1, 1), (0,), (0, 1, 2), ()):
        e = refused_alike(lambda: d.transpose(axes), lambda: h.transpose(axes))
        assert not isinstance(e, cuda.DevarrayError)
    refused_alike(lambda: d.transpose(1, 2), lambda: h.transpose(1, 2))
    assert isinstance(refused_alike(lambda: d.transpose((1, 2)), lambda: h.transpose((1, 2))),
                      np.AxisError)
    h3 = np.arange(24.0).reshape(2, 3, 4)
    d3 = cuda.to_device(h3)
    for axes in ((0, 1), (0, 1, 1), (0, 1, 3), (-4, 0, 1)):
        refused_alike(lambda: d3.transpose(axes), lambda: h3.transpose(axes))
    # what NumPy accepts gives NumPy's result
    for axes in ((2, 0, 1), (-1, 0, 1), (1, -3, 2), None):
        np.testing.assert_array_equal(d3.transpose(axes).copy_to_host(), h3.transpose(axes))
    np.testing.assert_array_equal(d3.transpose(2, 0, 1).copy_to_host(), h3.transpose(2, 0, 1))
    np.testing.assert_array_equal(d.transpose(-1, -2).copy_to_host(), h.T)
    assert d.transpose((0, 1)) is d and d.transpose((-2, -1)) is d  # identity: itself
    del d, d3


def test_reshape_errors(no_leak):
    h = np.arange(35.0)
    d = cuda.to_device(h)
    for shape in ((2, 3), (2, -1), (-1, -1), (5, 8), (0, -1)):
        e = refused_alike(lambda: d.reshape(shape), lambda: h.reshape(shape))
    assert isinstance(e, cuda.ArgumentError) and e.name  # the status is kept
    refused_alike(lambda: d.reshape(2, 3), lambda: h.reshape(2, 3))
    dummy = numba_module("numba.misc.dummyarray").Array.from_desc(0, (35,), (8,), 8)
    refused_alike(lambda: d.reshape(5, 7, order="Q"), lambda: dummy.reshape(5, 7, order="Q"))
    refused_alike(lambda: d.reshape(5, 7, foo=1), lambda: dummy.reshape(5, 7, foo=1))
    refused_alike(lambda: d.ravel(order="Q"), lambda: dummy.ravel(order="Q"))
    del d


# ---- creation and copies -------------------------------------------------------------------

def test_creation_errors(no_leak):
    for shape in ((-1, 2), -3, (2, -5, 1)):
        refused_alike(lambda: cuda.device_array(shape), lambda: np.empty(shape))
        refused_alike(lambda: cuda.device_array(shape, np.float32, order="F"),
                      lambda: np.empty(shape, np.float32, order="F"))
        refused_alike(lambda: cuda.pinned_array(shape), lambda: np.empty(shape))
    fill = numba_module("numba.cuda.api_util")._fill_stride_by_order
    refused_alike(lambda: cuda.device_array(3, order="X"),
                  lambda: fill((3,), np.dtype(np.float64), "X"))
    refused_alike(lambda: cuda.pinned_array(3, order="X"),
                  lambda: fill((3,), np.dtype(np.float64), "X"))


def numba_raises(relpath, exc_class, message):
    """Whether Numba's source file raises exc_class(message) itself (with NUMBA_ENABLE_CUDASIM
    set the real DeviceNDArray cannot be imported, so its words are read from its file)."""
    numba = numba_module("numba")
    src = open(os.path.join(os.path.dirname(numba.__file__), relpath)).read()
    return any("raise %s(%s%s%s)" % (exc_class.__name__, q, message, q) in src for q in "'\"")


def test_numba_words_of_its_own_checks(no_leak):
    """split and strides: Numba's DeviceNDArray refuses them itself, in its words."""
    h = np.zeros((3, 4))
    d = cuda.to_device(h)
    for op in (lambda: d.split(1), lambda: d[0, ::2].split(1),
               lambda: cuda.device_array((3, 4), strides=(8,))):
        with pytest.raises(ValueError) as e:
            op()
        assert numba_raises("cuda/cudadrv/devicearray.py", ValueError, str(e.value)), e.value
    del d


def test_read_only_destination_in_numpys_words(no_leak):
    d = cuda.to_device(np.arange(4.0))
    ro = np.zeros(4)
    ro.flags.writeable = False
    refused_alike(lambda: d.copy_to_host(ro), lambda: setitem(ro, Ellipsis, 1.0))
    assert not ro.any()
    del d


def test_copy_errors_in_numbas_words(no_leak):
    compat = numba_module("numba.cuda.cudadrv.devicearray").check_array_compatibility
    h = np.zeros((3, 4))
    d = cuda.to_device(h)
    for other in (np.zeros((4, 3)), np.zeros(12), np.zeros((3, 4), np.float32),
                  np.zeros((2, 4), np.int64)):
        refused_alike(lambda: d.copy_to_host(other.copy()), lambda: compat(h, other))
        refused_alike(lambda: d.copy_to_device(other), lambda: compat(h, other))
        refused_alike(lambda: cuda.to_device(other, to=d), lambda: compat(h, other))
        dother = cuda.to_device(other)
        refused_alike(lambda: d.copy_to_device(dother), lambda: compat(h, other))
        del dother
    # Numba's rule, which devarray shares: shapes equal once size-1 dimensions are dropped
    out = np.ones((3, 1, 4))
    compat(h, out)
    d.copy_to_host(out)
    np.testing.assert_array_equal(out, 0)
    del d
