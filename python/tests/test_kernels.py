"""Kernels: Module, get, launch syntax, argument kinds; smart arrays."""
import os
import re

import numpy as np
import pytest

import devarray as cuda

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")

SCALE = """
DV_KERNEL(scale, DV_ARRAY(float, a), float f, int n) {
  DV_BIND(float, a);
  int i = (int)dv_global_id(0);
  if (i < n) a[i] = a[i] * f;
}
DV_KERNEL(fill64, DV_ARRAY(dv_i64, a), dv_i64 v, int n) {
  DV_BIND(dv_i64, a);
  int i = (int)dv_global_id(0);
  if (i < n) a[i] = v + i;
}
DV_KERNEL(empty, int n) { (void)n; }
"""


@pytest.fixture(scope="module")
def mod():
    return cuda.Module(SCALE, name="scale.dvk")


def test_numpy_args_auto_transfer(mod):
    a = np.arange(100, dtype=np.float32)
    mod.get("scale")[4, 32](a, np.float32(2), 100)
    np.testing.assert_array_equal(a, np.arange(100, dtype=np.float32) * 2)
    b = np.arange(10, dtype=np.float32)
    mod.get("scale")[1, 32](cuda.In(b), 3.0, 10)  # read only: never copied back
    np.testing.assert_array_equal(b, np.arange(10, dtype=np.float32))


def test_device_args_and_streams(mod, no_leak):
    a = np.arange(64, dtype=np.float32)
    d = cuda.to_device(a)
    s = cuda.stream()
    with s.auto_synchronize():
        mod.get("scale")[2, 32, s](d, np.float32(0.5), np.int32(64))
    np.testing.assert_array_equal(d.copy_to_host(), a * 0.5)
    e = cuda.device_array(5, np.int64)
    mod.get("fill64")[1, 8, 0, 0](e, np.int64(1 << 40), 5)
    np.testing.assert_array_equal(e.copy_to_host(), (1 << 40) + np.arange(5))
    mod.get("empty").forall(10)(1)
    del d, e


def test_launch_errors(mod):
    k = mod.get("scale")
    with pytest.raises(cuda.ArgumentError) as e:
        k[1, 1 << 20](np.zeros(4, np.float32), 1.0, 4)
    assert e.value.name == "DV_ERR_LAUNCH_CONFIG"
    with pytest.raises(ValueError):
        k[1](np.zeros(4, np.float32))
    with pytest.raises(ValueError):
        k[0, 1](np.zeros(4, np.float32), 1.0, 4)
    with pytest.raises(OverflowError):
        k[1, 1](np.zeros(4, np.float32), 1.0, 1 << 40)
    with pytest.raises(TypeError):
        k[1, 1](object(), 1.0, 4)
    with pytest.raises(cuda.ArgumentError) as e:
        mod.get("missing")
    assert "missing" in e.value.detail
    with pytest.raises(cuda.CompileError) as e:
        cuda.Module("DV_KERNEL(bad, int n) { this is not C }", name="bad.dvk")
    assert e.value.name == "DV_ERR_COMPILE" and e.value.log


def test_launchers_reused_only_for_plain_configurations(mod, no_leak):
    """kernel[grid, block] of plain ints without a stream is built once and reused (issue
    39); a float, a bool, a stream or an invalid extent is never served from that cache."""
    k = mod.get("fill64")
    assert k[2, 8] is k[2, 8] and k[(2, 1), (8,)] is k[(2, 1), (8,)]
    assert k[2, 8, 0] is k[2, 8, 0] and k[2, 8, None, 0] is k[2, 8, None, 0]
    s = cuda.stream()
    assert k[2, 8, s] is not k[2, 8, s]
    with pytest.raises(TypeError):
        k[2.0, 8]  # equal to 2 as a key, but not an extent
    with pytest.raises(ValueError):
        k[-2, 8]
    with pytest.raises(ValueError):
        k[-2, 8]  # the failure is not cached either
    assert k[True, 8] is not k[1, 8]
    e = cuda.device_array(16, np.int64)
    for v in (3, 4):  # a reused launcher passes each call's own arguments
        k[2, 8](e, np.int64(v), 16)
        np.testing.assert_array_equal(e.copy_to_host(), v + np.arange(16))
    del e


def test_launch_extents_fit_uint32(mod, no_leak):
    """Grid and block extents are dv_dim3's uint32_t, the dynamic shared size a size_t:
    larger values raise before the call instead of keeping their low bits (issue 22 #3:
    k[2**32 + 3, 1] ran 3 blocks; a block of 2**32 ran one thread)."""
    k = mod.get("scale")
    d = cuda.to_device(np.ones(64, np.float32))
    big = [1 << 32, (1 << 32) + 3, (1 << 32) + 64, 1 << 64]
    for b in big:
        for dims in [(b, 1), ((b,), 1), ((1, b), 1), ((1, 1, b), 1), (1, b), (1, (1, b)),
                     (1, (b, 1, 1)), (np.uint64(b) if b < (1 << 64) else b, 1)]:
            with pytest.raises(OverflowError, match="uint32"):
                k[dims](d, np.float32(2), 64)
    with pytest.raises(OverflowError, match="uint32"):
        k.forall((1 << 32) * 64)(d, np.float32(2), 64)
    with pytest.raises(OverflowError, match="size_t"):
        k[1, 64, 0, 1 << 64](d, np.float32(2), 64)
    for bad in [0, -1, -(1 << 32) + 1]:
        with pytest.raises(ValueError):
            k[bad, 64](d, np.float32(2), 64)
    with pytest.raises(ValueError):
        k[1, 64, 0, -1](d, np.float32(2), 64)
    with pytest.raises(TypeError):
        k[2.5, 64](d, np.float32(2), 64)
    np.testing.assert_array_equal(d.copy_to_host(), 1)  # nothing ran
    k[np.uint32(1), np.int64(64)](d, np.float32(2), 64)  # in range: runs
    np.testing.assert_array_equal(d.copy_to_host(), 2)
    del d


def test_python_scalars_take_the_parameter_type(mod, no_leak):
    # Python scalars take the declared type (as Numba's signature typing does);
    # NumPy scalars keep theirs and are checked against it by the library.
    k = mod.get("fill64")
    assert [p[:3] for p in k.params] == [("array", np.dtype(np.int64), "a"),
                                         ("scalar", np.dtype(np.int64), "v"),
                                         ("scalar", np.dtype(np.int32), "n")]
    e = cuda.device_array(3, np.int64)
    k[1, 4](e, 1 << 40, 3)  # a Python int for dv_i64: no np.int64(...) needed
    np.testing.assert_array_equal(e.copy_to_host(), (1 << 40) + np.arange(3))
    with pytest.raises(TypeError):
        k[1, 4](e, 1.5, 3)  # a float for an integer parameter
    with pytest.raises(OverflowError):
        k[1, 4](e, 1 << 63, 3)
    with pytest.raises(OverflowError):
        mod.get("scale")[1, 4](cuda.to_device(np.zeros(4, np.float32)), 1e39, 4)  # float32 max 3.4e38
    with pytest.raises(cuda.ArgumentError) as err:
        k[1, 4](e, np.int32(5), 3)  # a NumPy scalar keeps its dtype: refused, as in C
    assert "takes an int64 scalar" in err.value.detail
    with pytest.raises(cuda.ArgumentError) as err:
        k[1, 4](e, 5)  # one argument short
    assert "takes 3 arguments" in err.value.detail
    del e


def test_matmul_shared_memory():
    src = open(os.path.join(ROOT, "examples", "matmul.dvk")).read()
    k = cuda.Module(src, name="matmul.dvk").get("fast_matmul")
    n = 37
    rng = np.random.default_rng(1)
    A = rng.random((n, n), np.float32)
    B = rng.random((n, n), np.float32)
    C = cuda.device_array((n, n), np.float32)
    g = (n + 15) // 16
    k[(g, g), (16, 16)](cuda.to_device(A), cuda.to_device(B), C, n)
    np.testing.assert_allclose(C.copy_to_host(), A @ B, rtol=1e-5)


def test_smart_array(mod, no_leak):
    a = np.arange(32, dtype=np.float32)
    sa = cuda.SmartArray(a)  # copied
    assert sa.shape == (32,) and sa.dtype == np.float32 and len(sa) == 32
    assert sa.is_current("host") and not sa.is_current("gpu")
    mod.get("scale")[1, 32](sa, np.float32(2), 32)
    assert sa.is_current("gpu") and not sa.is_current("host")
    np.testing.assert_array_equal(sa.get("host"), a * 2)
    np.testing.assert_array_equal(a, np.arange(32, dtype=np.float32))  # copy=True
    h = sa.get("host")
    h[0] = 100
    sa.mark_changed("host")
    np.testing.assert_array_equal(sa.get("gpu").copy_to_host()[:2], [100, 2])
    b = np.ones(8, np.float32)
    sb = cuda.SmartArray(b, copy=False)  # adopted
    mod.get("scale")[1, 8](sb, np.float32(3), 8)
    assert sb.get("host") is b
    np.testing.assert_array_equal(b, 3)
    sc = cuda.SmartArray(shape=(4, 2), dtype=np.float64, where="gpu")
    assert sc.is_current("gpu")
    with pytest.raises(cuda.MisuseError):
        sc.mark_changed("host")
    with pytest.raises(ValueError):
        sc.get("elsewhere")
    del sa, sb, sc, h


def test_smart_array_read_only(mod, no_leak):
    """copy=False adopts obj's memory, which the smart array writes: a read-only obj is
    refused (issue 22 #2: over a bytes object the immutable object was changed); copy=True
    copies it and leaves it alone."""
    buf = bytes(32)
    ro = np.frombuffer(buf, np.float32)
    with pytest.raises(ValueError, match="read-only"):
        cuda.SmartArray(ro, copy=False)
    v = np.ones(8, np.float32)
    v.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        cuda.SmartArray(v, copy=False)
    s = cuda.SmartArray(v)  # a copy
    mod.get("scale")[1, 8](s, np.float32(3), 8)
    np.testing.assert_array_equal(s.get("host"), 3)
    np.testing.assert_array_equal(v, 1)
    t = cuda.SmartArray(ro)
    mod.get("scale")[1, 8](t, np.float32(2), 8)
    t.get("host")
    assert buf == bytes(32)
    del s, t


VIEWK = """
DV_KERNEL(rowsum, DV_VIEW(const double, a), DV_ARRAY(double, out)) {
  DV_BIND(const double, a);
  DV_BIND(double, out);
  int i = (int)dv_global_id(0);
  if (i < DV_SHAPE(a, 0)) {
    double s = 0;
    for (dv_i64 j = 0; j < DV_SHAPE(a, 1); j++) s += DV_ITEM2(a, i, j);
    out[i] = s;
  }
}
"""


def test_view_args_and_directions(mod, no_leak):
    k = cuda.Module(VIEWK, name="rowsum.dvk").get("rowsum")
    a = np.arange(30.0).reshape(5, 6)
    d = cuda.to_device(a)
    out = np.zeros(3)
    k[1, 8](cuda.View(d[::2, 1:]), cuda.Out(out))
    np.testing.assert_array_equal(out, a[::2, 1:].sum(axis=1))
    h = np.zeros(5)
    k[1, 8](cuda.View(a), h)  # a NumPy view argument: copied in with its layout
    np.testing.assert_array_equal(h, a.sum(axis=1))
    with pytest.raises(ValueError):
        cuda.Arg(a, dir="sideways")
    del d


def test_read_only_array_for_a_written_parameter(mod, no_leak):
    """A read-only NumPy array for a parameter the kernel may write (not const) would lose
    the kernel's writes: refused, naming the kernel and the parameter, with nothing run;
    In(a) says the writes are to be dropped; a const parameter takes it as it is."""
    a = np.ones(8, np.float32)
    a.flags.writeable = False
    scale = mod.get("scale")
    with pytest.raises(ValueError, match=r"scale: argument 0 \(a\) is a read-only NumPy array"):
        scale[1, 8](a, np.float32(3), 8)
    np.testing.assert_array_equal(a, 1)
    scale[1, 8](cuda.In(a), np.float32(3), 8)  # asked for: the writes are dropped
    np.testing.assert_array_equal(a, 1)
    k = cuda.Module(VIEWK, name="rowsum.dvk").get("rowsum")
    r = np.arange(12.0).reshape(2, 6)
    r.flags.writeable = False
    out = np.zeros(2)
    k[1, 8](cuda.View(r), out)  # DV_VIEW(const double, a): read-only is fine
    np.testing.assert_array_equal(out, r.sum(axis=1))
    with pytest.raises(ValueError, match=r"rowsum: argument 1 \(out\)"):
        k[1, 8](cuda.View(r), r[:, 0])


def test_argument_errors_in_python_words(mod, no_leak):
    """A refused argument is described in the binding's words (View(a), NumPy scalars), not
    the C API's (dv_arg kinds, constructors, functions); dtype mismatches between arrays
    are DtypeMismatchError, a public class that is also a TypeError."""
    scale = mod.get("scale")
    d = cuda.to_device(np.zeros((4, 4), np.float32))
    cases = [((cuda.View(d), np.float32(1), 4), "passed as View(a)"),
             ((d[:, ::2], np.float32(1), 4), "pass it as View(a) to a DV_VIEW(T, name)"),
             ((d, np.float64(1), 4), "(np.float32(...)); given a float64 scalar (np.float64(...))")]
    for args, words in cases:
        with pytest.raises(cuda.ArgumentError) as e:
            scale[1, 4](*args)
        assert words in str(e.value)
        assert not re.search(r"DV_ARG_|dv_[a-z_]+\b", str(e.value).split(": ", 2)[2]), str(e.value)
    with pytest.raises(cuda.DtypeMismatchError) as e:
        cuda.to_device(np.zeros(4, np.float32)).copy_to_device(np.zeros(4))
    assert isinstance(e.value, TypeError) and type(e.value).__module__ == "devarray"
    assert "incompatible dtype: float32 vs. float64" in str(e.value)
    del d


def test_mapped_array_kernel_in_place(mod):
    try:
        m = cuda.mapped_array(16, np.float32)
    except cuda.NotSupportedError:
        pytest.skip("no mapped memory on this device")
    m[:] = 1
    mod.get("scale")[1, 16](m, np.float32(4), 16)
    cuda.synchronize()
    np.testing.assert_array_equal(m, 4)


def test_cuda_array_interface_only_on_cuda(ctx):
    d = cuda.to_device(np.zeros(3))
    if ctx.backend != "cuda":
        assert not hasattr(d, "__cuda_array_interface__")
        assert not cuda.is_cuda_array(d)
    else:  # pragma: no cover - needs a GPU
        cai = d.__cuda_array_interface__
        assert cai["shape"] == (3,) and cai["typestr"] == "<f8"
    assert cuda.is_device_array(d)


def test_constants_and_defines():
    src = """
    DV_KERNEL(use_const, DV_ARRAY(float, out), int n) {
      DV_BIND(float, out);
      int i = (int)dv_global_id(0);
      if (i < n) out[i] = TABLE[i] * FACTOR;
    }
    """
    m = cuda.Module(src, name="const.dvk", defines={"FACTOR": "2.0f"},
                    constants={"TABLE": np.arange(8, dtype=np.float32)})
    out = np.zeros(8, np.float32)
    m.get("use_const")[1, 8](out, 8)
    np.testing.assert_array_equal(out, np.arange(8) * 2)
    m.set_constant("TABLE", np.ones(8, np.float32))
    m.get("use_const")[1, 8](out, 8)
    np.testing.assert_array_equal(out, 2)


def test_launches_from_python_threads(mod, no_leak):
    import threading
    k = mod.get("scale")
    errors = []

    def work(seed):
        try:
            s = cuda.stream()
            a = np.random.default_rng(seed).random(256).astype(np.float32)
            d = cuda.to_device(a, stream=s)
            for _ in range(5):
                k[2, 128, s](d, np.float32(2), 256)
            h = d.copy_to_host(stream=s)
            s.synchronize()
            np.testing.assert_array_equal(h, a * 32)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    ts = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors
