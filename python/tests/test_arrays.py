"""Arrays, transfers, views and host memory, with NumPy as the oracle."""
import os
import subprocess
import sys

import numpy as np
import pytest

import devarray as cuda

rng = np.random.default_rng(15)
DTYPES = [np.bool_, np.int8, np.uint16, np.int32, np.int64, np.float16, np.float32,
          np.float64, np.complex64, np.complex128]


def rand(shape, dtype=np.float64):
    return (rng.standard_normal(shape) * 100).astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_roundtrip_dtypes(dtype, no_leak):
    a = rand((5, 7), dtype)
    d = cuda.to_device(a)
    assert (d.shape, d.strides, d.dtype, d.size, d.nbytes, d.ndim) == \
        (a.shape, a.strides, a.dtype, a.size, a.nbytes, a.ndim)
    np.testing.assert_array_equal(d.copy_to_host(), a)
    del d


@pytest.mark.parametrize("view", [lambda a: a, lambda a: a[::2, ::-1], lambda a: a.T,
                                  lambda a: a[1:, 3], lambda a: a[::-3], lambda a: a[:0]])
def test_strided_sources(view, no_leak):
    a = rand((6, 8))
    v = view(a)
    d = cuda.to_device(v)
    np.testing.assert_array_equal(d.copy_to_host(), v)
    out = np.zeros((v.shape[::-1])).T  # an F-ordered destination
    np.testing.assert_array_equal(d.copy_to_host(out), v)


def test_device_array_layouts(no_leak):
    for order in "CF":
        d = cuda.device_array((3, 4), np.float32, order=order)
        e = np.empty((3, 4), np.float32, order=order)
        assert d.strides == e.strides
        assert d.is_c_contiguous() == e.flags.c_contiguous
        assert d.is_f_contiguous() == e.flags.f_contiguous
    d = cuda.device_array(5)
    assert d.shape == (5,) and d.dtype == np.float64
    d = cuda.device_array((2, 3), strides=(8, 16))
    assert d.strides == (8, 16)
    d = cuda.device_array(())
    assert d.shape == () and d.size == 1


def test_device_array_like(no_leak):
    for a in [np.zeros((3, 4)), np.zeros((3, 4), order="F"), np.zeros((4, 6))[::2, ::2]]:
        d = cuda.device_array_like(a)
        assert d.shape == a.shape and d.dtype == a.dtype
        if a.flags.c_contiguous or a.flags.f_contiguous:
            assert d.strides == a.strides
        d2 = cuda.device_array_like(d)
        assert d2.strides == d.strides


def test_to_device_options(no_leak):
    a = rand(10)
    d = cuda.to_device(a)
    assert cuda.to_device(d) is d
    e = cuda.device_array(10)
    assert cuda.to_device(a * 2, to=e) is e
    np.testing.assert_array_equal(e.copy_to_host(), a * 2)
    f = cuda.to_device(a, copy=False)
    assert f.shape == a.shape
    np.testing.assert_array_equal(cuda.to_device([1, 2, 3]).copy_to_host(), [1, 2, 3])
    d.copy_to_device(a + 1)
    np.testing.assert_array_equal(d.copy_to_host(), a + 1)
    d.copy_to_device(e)
    np.testing.assert_array_equal(d.copy_to_host(), a * 2)
    np.testing.assert_array_equal(np.asarray(d), a * 2)
    assert len(d) == 10


def test_indexing_and_views(no_leak):
    a = rand((4, 5, 6))
    d = cuda.to_device(a)
    for key in [1, -1, (1, 2), (slice(None), 3), (Ellipsis, 2), (slice(1, 3), slice(None, None, -2)),
                (slice(None), slice(None), slice(5, 0, -2)), (2, Ellipsis)]:
        np.testing.assert_array_equal(d[key].copy_to_host(), a[key])
    assert d[1, 2, 3] == a[1, 2, 3]
    assert d[-1, -2, -3] == a[-1, -2, -3]
    np.testing.assert_array_equal(d.T.copy_to_host(), a.T)
    np.testing.assert_array_equal(d.transpose((1, 0, 2)).copy_to_host(), a.transpose(1, 0, 2))
    np.testing.assert_array_equal(d.reshape(20, 6).copy_to_host(), a.reshape(20, 6))
    np.testing.assert_array_equal(d.reshape((6, -1), order="F").copy_to_host(),
                                  a.reshape((6, -1), order="F"))
    np.testing.assert_array_equal(d[:, ::2].ravel().copy_to_host(), a[:, ::2].ravel())
    np.testing.assert_array_equal(d.ravel(order="F").copy_to_host(), a.ravel(order="F"))
    np.testing.assert_array_equal(d.view(np.int64).copy_to_host(), a.view(np.int64))
    np.testing.assert_array_equal(d.view(np.float32).copy_to_host(), a.view(np.float32))
    parts = d.ravel().split(7)
    for p, q in zip(parts, np.split(a.ravel(), range(7, a.size, 7))):
        np.testing.assert_array_equal(p.copy_to_host(), q)
    del parts


def test_setitem(no_leak):
    a = rand((4, 6))
    d = cuda.to_device(a)
    a[1] = 3.5
    d[1] = 3.5
    a[:, 2] = np.arange(4)
    d[:, 2] = np.arange(4)
    a[2, 3] = -1
    d[2, 3] = -1
    a[::2, ::3] = [[7, 8], [9, 10]]
    d[::2, ::3] = np.array([[7, 8], [9, 10]])
    a[3] = a[0]
    d[3] = d[0]
    np.testing.assert_array_equal(d.copy_to_host(), a)


def test_records(no_leak):
    dt = np.dtype([("x", np.float64), ("n", np.int32), ("v", np.float32, (3,))], align=True)
    a = np.zeros(4, dt)
    a["x"] = [1, 2, 3, 4]
    a["n"] = [5, 6, 7, 8]
    a["v"] = np.arange(12).reshape(4, 3)
    d = cuda.to_device(a)
    assert d.dtype == dt
    np.testing.assert_array_equal(d.copy_to_host(), a)
    np.testing.assert_array_equal(d["x"].copy_to_host(), a["x"])
    np.testing.assert_array_equal(d.field("v").copy_to_host(), a["v"])
    r = d[2]
    assert isinstance(r, cuda.DeviceRecord)
    assert r["x"] == 3 and r["n"] == 7
    r["n"] = 42
    a[2]["n"] = 42
    np.testing.assert_array_equal(d.copy_to_host(), a)
    rec = cuda.to_device(a[1])
    assert isinstance(rec, cuda.DeviceRecord)
    assert rec.copy_to_host()["x"] == 2
    del r, rec


def test_host_memory_kinds(ctx, no_leak):
    p = cuda.pinned_array((3, 4), np.float32)
    assert isinstance(p, np.ndarray) and p.shape == (3, 4) and p.dtype == np.float32
    assert cuda.is_pinned(p)
    p[:] = 1.5
    d = cuda.to_device(p)
    np.testing.assert_array_equal(d.copy_to_host(), p)
    pf = cuda.pinned_array((3, 4), order="F")
    assert pf.flags.f_contiguous
    try:
        m = cuda.mapped_array(8, np.int32, portable=True, wc=False)
    except cuda.NotSupportedError:
        m = None
    if m is not None:
        m[:] = np.arange(8)
        np.testing.assert_array_equal(cuda.to_device(m).copy_to_host(), np.arange(8))
    try:
        g = cuda.managed_array(4)
        g[:] = 2
        assert g.sum() == 8
        del g
    except cuda.NotSupportedError as e:
        assert e.name == "DV_ERR_NOT_SUPPORTED"
    del p, pf, m, d


def test_pinned_mapped_register(no_leak):
    a = rand(16)
    b = rand((2, 3))
    assert not cuda.is_pinned(a)
    with cuda.pinned(a, b):
        assert cuda.is_pinned(a) and cuda.is_pinned(b)
        d = cuda.to_device(a)
        np.testing.assert_array_equal(d.copy_to_host(), a)
    assert not cuda.is_pinned(a)
    try:
        with cuda.mapped(a) as da:
            assert isinstance(da, cuda.DeviceNDArray) and da.shape == a.shape
            np.testing.assert_array_equal(da.copy_to_host(), a)
        with cuda.mapped(a, b) as (da, db):
            assert db.shape == b.shape
        del da, db
    except cuda.NotSupportedError:
        pass
    cuda.register(a)
    assert cuda.is_pinned(a)
    cuda.deregister(a)
    assert not cuda.is_pinned(a)
    with pytest.raises(cuda.MisuseError) as e:
        cuda.deregister(a)
    assert e.value.name == "DV_ERR_MISUSE"
    del d


def test_zero_size_and_0d(no_leak):
    d = cuda.to_device(np.zeros((0, 3)))
    assert d.shape == (0, 3) and d.copy_to_host().shape == (0, 3)
    z = cuda.to_device(np.array(4.5))
    assert z.shape == () and z.copy_to_host()[()] == 4.5
    with pytest.raises(TypeError):
        len(z)


def test_dlpack(ctx, no_leak):
    a = np.arange(24.0).reshape(4, 6)
    d = cuda.to_device(a)
    kind = d.__dlpack_device__()
    if ctx.backend == "host":
        assert kind == (1, 0)
        for v in (d, d[:, ::2], d.T, d[::-1]):
            h = np.from_dlpack(v)  # reads device memory in place (the simulator's)
            np.testing.assert_array_equal(h, v.copy_to_host())
            del h
    elif ctx.backend == "opencl":
        assert kind == (4, 0)
    # import: a NumPy array becomes an array of this context over the same memory
    e = cuda.from_dlpack(a)
    np.testing.assert_array_equal(e.copy_to_host(), a)
    f = cuda.from_dlpack(d)
    np.testing.assert_array_equal(f.copy_to_host(), a)
    cap = d.__dlpack__()
    del cap  # never consumed: the capsule's destructor calls the deleter
    b = cuda.to_device(np.zeros(3, np.bool_))
    try:  # kDLBool came with DLPack 0.8: a library built with an older dlpack.h refuses bool
        b.__dlpack__()  # the capsule, never consumed, goes at once
    except cuda.ArgumentError as err:
        assert err.name == "DV_ERR_BAD_DTYPE"
    del d, e, f, b
    import gc
    gc.collect()
    for _ in range(3):
        ctx.deallocations.clear()


def test_dlpack_refused_by_numpy(ctx, no_leak, capfd):
    """np.from_dlpack of a device NumPy cannot read (kDLOpenCL, kDLCUDA) raises NumPy's own
    exception, prints nothing, and the refused export lets go of its array (issue 37: it
    raised SystemError after an "Exception ignored" traceback, and kept the array alive)."""
    from devarray._lib import speedups
    if ctx.backend == "host":
        pytest.skip("host: NumPy reads kDLCPU device arrays")
    if speedups is None:
        pytest.skip("devarray._speedups not loaded: the ctypes capsule destructor cannot "
                    "run cleanly under NumPy's pending error (docs/semantics.md, DLPack)")
    d = cuda.to_device(np.arange(4.0))
    capfd.readouterr()
    with pytest.raises(Exception) as e:
        np.from_dlpack(d)
    assert not isinstance(e.value, SystemError), repr(e.value)
    out, err = capfd.readouterr()
    assert "Exception ignored" not in err and "Traceback" not in err, err
    del d, e


def test_nested_records_and_dtype_roundtrip(no_leak):
    inner = np.dtype([("a", np.int16), ("b", np.float32)])
    dt = np.dtype([("id", np.int64), ("in", inner), ("m", np.float64, (2, 2))])
    a = np.zeros(3, dt)
    a["id"] = [1, 2, 3]
    a["in"]["b"] = [0.5, 1.5, 2.5]
    a["m"] = np.arange(12).reshape(3, 2, 2)
    d = cuda.to_device(a)
    assert d.dtype == dt
    np.testing.assert_array_equal(d.copy_to_host(), a)
    np.testing.assert_array_equal(d["in"]["b"].copy_to_host(), a["in"]["b"])
    np.testing.assert_array_equal(d["m"].copy_to_host(), a["m"])
    e = cuda.device_array(2, dt)
    assert e.dtype == dt and e.strides == (dt.itemsize,)
    np.testing.assert_array_equal(np.asarray(cuda.to_device(np.arange(3)), np.float32),
                                  np.arange(3, dtype=np.float32))
    del d, e


def test_python_layout_matches_library(no_leak):
    """The shape and strides the binding reports (some computed in Python) are the library's."""
    from devarray._lib import lib
    for a in [np.zeros(5), np.zeros((2, 3, 4), np.int16), np.zeros((4, 1)),
              np.zeros((6, 4))[:, :1], np.zeros((3, 4), order="F"), np.zeros((0, 2)),
              np.zeros((4, 6))[::2, ::3]]:
        d = cuda.to_device(a)
        nd = lib.dv_array_ndim(d.handle)
        assert d.shape == tuple(lib.dv_array_shape(d.handle)[:nd])
        assert d.strides == tuple(lib.dv_array_strides(d.handle)[:nd])
        del d


def test_host_memory_of_records(no_leak):
    dt = np.dtype([("x", np.float64), ("n", np.int32)], align=True)
    p = cuda.pinned_array(3, dt)
    assert p.dtype == dt and p.shape == (3,)
    p["x"] = [1, 2, 3]
    p["n"] = [4, 5, 6]
    d = cuda.to_device(p)
    np.testing.assert_array_equal(d.copy_to_host(), p)
    s = cuda.SmartArray(p)
    assert s.get("host").dtype == dt
    r = cuda.DeviceRecord(dt)
    r["n"] = 9
    assert r["n"] == 9 and isinstance(r["x"], np.float64)
    del p, d, s, r


def test_mapped_refuses_read_only():
    a = np.arange(8, dtype=np.int32)
    a.flags.writeable = False
    with pytest.raises(ValueError):
        with cuda.mapped(a):
            pass
    b = np.arange(8, dtype=np.int32)
    with cuda.mapped(b) as d:  # a writeable one still maps
        assert d.shape == (8,)


def test_copy_to_host_refuses_read_only(no_leak):
    """A read-only destination is refused before anything is copied (issue 22 #2): a view
    whose writeable flag is off, an array over a bytes object (immutable: it was changed)."""
    a = np.arange(4, dtype=np.float64) + 1
    d = cuda.to_device(a)
    out = np.zeros(4)
    out.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        d.copy_to_host(out)
    assert not out.any()
    buf = bytes(32)
    ro = np.frombuffer(buf, np.float64)
    for stream in (0, cuda.stream()):
        with pytest.raises(ValueError, match="read-only"):
            d.copy_to_host(ro, stream=stream)
    assert buf == bytes(32)
    rec = cuda.DeviceRecord(np.dtype([("x", np.float64)]))
    r = np.zeros((), rec.dtype)
    r.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        rec.copy_to_host(r)
    del d, rec


def test_copy_to_host_read_only_mapping():
    """Over read-only mapped memory the interpreter died with SIGSEGV (issue 22 #2): in a
    child process, so that a regression fails this test alone."""
    code = """
import mmap, numpy as np, devarray as cuda
m = mmap.mmap(-1, 4096, prot=mmap.PROT_READ)
ro = np.frombuffer(m, np.float64, count=8)
d = cuda.to_device(np.arange(8.0))
try:
    d.copy_to_host(ro)
except ValueError as e:
    print("ValueError", e)
"""
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, PYTHONPATH=os.path.join(here, ".."))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, "exit %d: %s" % (r.returncode, r.stderr[-2000:])
    assert r.stdout.startswith("ValueError"), r.stdout
