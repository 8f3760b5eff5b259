"""devarray._speedups, the compiled per-call paths (issue 23): loaded where the tests expect
it, the same results and the same errors (class and words) as the ctypes paths, compared in
one process; the C base's GC, weak references, subclasses and its deferred release on a
stream callback's thread."""
import copy
import gc
import os
import pickle
import subprocess
import sys
import threading
import weakref

import numpy as np
import pytest

import devarray as cuda
from devarray import _create, _lib, _stream
from devarray._array import DeviceNDArray, DeviceRecord, _ArrayBase

sp = _lib.speedups
needs_speedups = pytest.mark.skipif(sp is None, reason="devarray._speedups is not loaded "
                                    "(DEVARRAY_SPEEDUPS=off, or not built)")
BACKEND = os.environ.get("DV_BACKEND", "host")
REC = np.dtype([("x", np.float64), ("n", np.int32)])


def test_loaded_as_the_run_expects():
    """CTest sets DEVARRAY_EXPECT_SPEEDUPS=1 where it built the module: a silent fallback to
    ctypes fails here; python.host-ctypes sets DEVARRAY_SPEEDUPS=off."""
    if os.environ.get("DEVARRAY_EXPECT_SPEEDUPS") == "1":
        assert sp is not None, "devarray._speedups was expected but not loaded"
        assert _ArrayBase is sp._ArrayBase and issubclass(DeviceNDArray, sp._ArrayBase)
        assert _create._fast_device_array is sp.device_array
        assert type(cuda.device_array(3)).__mro__[1] is sp._ArrayBase
    elif os.environ.get("DEVARRAY_SPEEDUPS", "").lower() == "off":
        assert sp is None and _create._fast_device_array is None
        assert _ArrayBase.__module__ == "devarray._array"
    else:
        pytest.skip("neither DEVARRAY_EXPECT_SPEEDUPS=1 nor DEVARRAY_SPEEDUPS=off is set")


def outcome(fn):
    """What fn() gives: ('ok', the array) or ('raise', class, message, status details)."""
    try:
        return ("ok", fn())
    except Exception as e:  # noqa: BLE001 -- compared below, whatever it is
        return ("raise", type(e), str(e), getattr(e, "name", None),
                getattr(e, "detail", None), type(e.__cause__))


def assert_same_array(a, b):
    assert type(a) is type(b)
    assert a.shape == b.shape and all(type(n) is int for n in a.shape)
    assert a.dtype == b.dtype and a.strides == b.strides and a.stream == b.stream
    assert a._base is None and b._base is None


BAD_SHAPES = [-1, (2, -3), np.int64(-4), [3, -1], (1 << 70,), (2, 1 << 63), (1 << 62,),
              (1 << 40, 1 << 40), "x", (2, "x"), None, 2.5, (2.0, 3), (1,) * 33, (1,) * 40,
              (0, -1), (1 << 40,)]
BAD_DTYPES = ["nonsense", object, "U4", "M8[ns]", ">f8", (np.float64, 3)]


@needs_speedups
@pytest.mark.parametrize("shape", BAD_SHAPES, ids=repr)
def test_device_array_errors_match_ctypes(no_leak, shape):
    got = outcome(lambda: sp.device_array(DeviceNDArray, shape, np.float32))
    want = outcome(lambda: _create._device_array_ctypes(shape, np.float32))
    if want[0] == "ok":  # int() accepts it (2.5 -> 2): both paths accept it the same
        assert got[0] == "ok"
        assert_same_array(got[1], want[1])
    else:
        assert got == want


@needs_speedups
@pytest.mark.parametrize("dtype", BAD_DTYPES, ids=repr)
def test_device_array_dtype_errors_match_ctypes(no_leak, dtype):
    got = outcome(lambda: sp.device_array(DeviceNDArray, 4, dtype))
    want = outcome(lambda: _create._device_array_ctypes(4, dtype))
    assert want[0] == "raise" and got == want
    # a bad shape and a bad dtype: the shape is refused first on both paths
    assert outcome(lambda: sp.device_array(DeviceNDArray, (2, "x"), dtype)) == \
        outcome(lambda: _create._device_array_ctypes((2, "x"), dtype))


@needs_speedups
def test_errors_through_the_public_function(no_leak):
    with pytest.raises(ValueError, match="negative dimensions are not allowed"):
        cuda.device_array((3, -1))
    with pytest.raises(OverflowError, match="do not fit int64"):
        cuda.device_array(1 << 64)
    with pytest.raises(cuda.ArgumentError, match="DV_ERR_BAD_SHAPE"):
        cuda.device_array((1,) * 33)


@needs_speedups
@pytest.mark.skipif(BACKEND != "host", reason="the host simulator's known capacity")
def test_out_of_memory_matches_ctypes(ctx, no_leak):
    total = ctx.get_memory_info().total
    want = outcome(lambda: _create._device_array_ctypes(total + 1, np.uint8))
    got = outcome(lambda: sp.device_array(DeviceNDArray, total + 1, np.uint8))
    assert want[:2] == ("raise", cuda.OutOfMemoryError) and got == want
    a = np.zeros(total // 8 + 1024)  # calloc'd: no memory touched
    want = outcome(lambda: _create._to_device_ctypes(a, 0, True))
    got = outcome(lambda: sp.to_device(DeviceNDArray, a, 0))
    assert want[:2] == ("raise", cuda.OutOfMemoryError) and got == want


@needs_speedups
@pytest.mark.parametrize("dtype", ["U4", "M8[ns]", object, "c16"], ids=str)
def test_to_device_errors_match_ctypes(no_leak, dtype):
    a = np.zeros(3, dtype)
    got = outcome(lambda: sp.to_device(DeviceNDArray, a, 0))
    want = outcome(lambda: _create._to_device_ctypes(a, 0, True))
    if want[0] == "ok":
        assert got[0] == "ok"
        assert_same_array(got[1], want[1])
    else:
        assert got == want


SHAPES = [5, np.int64(5), np.uint8(7), (), (0,), (3, 0), (2, 3), (np.int32(2), 3), [4, 2],
          range(1, 4), (1,) * 32, True]


@needs_speedups
@pytest.mark.parametrize("shape", SHAPES, ids=repr)
def test_device_array_shapes_match_ctypes(no_leak, shape):
    a = sp.device_array(DeviceNDArray, shape, np.int16)
    b = _create._device_array_ctypes(shape, np.int16)
    assert_same_array(a, b)
    assert a.shape == cuda.device_array(shape, np.int16).shape
    nd = _lib.lib.dv_array_ndim(a.handle)
    assert tuple(_lib.lib.dv_array_shape(a.handle)[:nd]) == a.shape


def host_arrays():
    base = np.arange(60, dtype=np.float64).reshape(3, 4, 5)
    rec = np.zeros(4, np.dtype(REC.descr, align=True))
    rec["x"] = [1, 2, 3, 4]
    buf = np.zeros(8 * 5 + 1, np.uint8)
    return {
        "contiguous": base,
        "slice": base[:, 1:3],
        "negative": base[::-1, :, ::-2],
        "transposed": base.T,
        "0-d": np.array(3.5),
        "empty": np.zeros((0, 3), np.float32),
        "records": rec,
        "packed records": np.zeros(3, REC),  # itemsize 12: not aligned for NumPy
        "record 0-d": np.zeros((), rec.dtype),
        "byte-swapped": np.arange(6, dtype=">i4"),
        "misaligned": buf[1:].view(np.float64),
        "read-only": np.frombuffer(b"abcdefgh", np.uint8),
        "f16": np.arange(8, dtype=np.float16),
    }


@needs_speedups
@pytest.mark.parametrize("name", list(host_arrays()))
def test_to_device_matches_ctypes(no_leak, name):
    a = host_arrays()[name]
    d = sp.to_device(DeviceNDArray, a, 0)
    want = _create._to_device_ctypes(a, 0, True)
    if name in ("records", "record 0-d", "byte-swapped", "misaligned", "packed records"):
        # left to the ctypes path, which the public function then takes (NumPy 1.24's
        # __array_struct__ reports no flags for record dtypes, so records are all left)
        assert d is None
        d = cuda.to_device(a)
        assert type(d) is (DeviceRecord if name == "record 0-d" else DeviceNDArray)
    else:
        assert d is not None
    assert_same_array(d, want)
    got = d.copy_to_host()
    assert got.shape == a.shape and (got == a).all()


@needs_speedups
def test_to_device_keeps_the_given_stream_object(no_leak):
    d = sp.to_device(DeviceNDArray, np.ones(3), False)
    assert d.stream is False  # what the ctypes path stores too (stream falsy: no stream)


def test_gc_frees_cycles_through_base_and_stream(ctx):
    gc.collect()
    before = ctx.raw_stats().arrays.current
    gc.disable()
    try:
        a = cuda.device_array(100)
        v = a[10:]          # v._base is a
        a._base = v         # a cycle: a -> v -> a
        w = cuda.to_device(np.ones(4))
        s = cuda.stream()
        w.stream = s
        s._hold(w)          # a cycle through the stream: w -> s -> w
        u = cuda.device_array(2)
        u._base = u         # a cycle of one
        refs = [weakref.ref(x) for x in (a, v, w, u)]
        del a, v, w, s, u
        assert ctx.raw_stats().arrays.current == before + 4  # the cycles hold them
        assert all(r() is not None for r in refs)
    finally:
        gc.enable()
    gc.collect()
    assert all(r() is None for r in refs)
    ctx.synchronize()
    assert ctx.raw_stats().arrays.current == before


def test_weakref_and_its_callback(ctx):
    d = cuda.device_array(8)
    called = []
    r = weakref.ref(d, lambda ref: called.append(ref))
    assert r() is d
    before = ctx.raw_stats().arrays.current
    del d
    assert r() is None and called == [r]
    assert ctx.raw_stats().arrays.current == before - 1


def test_weakref_callback_sees_the_release(ctx):
    """A weak reference's callback runs after the array's release on both paths (the Python
    base's __del__ runs before its weak references are cleared; the C base releases first
    too): the callback sees the queued deallocation."""
    ctx.deallocations.clear()
    x = cuda.device_array(8)
    del x  # one entry queued (the count limit is 10)
    n0 = len(ctx.deallocations)
    assert n0 == 1
    d = cuda.device_array(1 << 16, dtype=np.uint8)
    seen = []
    r = weakref.ref(d, lambda ref: seen.append(len(ctx.deallocations)))
    del d
    assert r() is None
    assert seen == [n0 + 1]


def test_package_imported_again(no_leak):
    """The package's modules dropped from sys.modules and imported again: the compiled paths
    use the new import's error classes and context (init_binding replaces its references)."""
    code = ("import sys, devarray as d1\n"
            "d1.device_array(2)\n"
            "for k in [k for k in sys.modules if k == 'devarray' or k.startswith('devarray.')]:\n"
            "    del sys.modules[k]\n"
            "import devarray as d2\n"
            "assert d2 is not d1 and d2.ArgumentError is not d1.ArgumentError\n"
            "try:\n"
            "    d2.device_array(-1)\n"
            "except d2.ArgumentError:\n"
            "    pass\n"
            "a = d2.device_array(4)\n"
            "assert d2._current.ctx is not None and a.shape == (4,)\n"
            "print('ok')\n")
    env = dict(os.environ,
               PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(cuda.__file__))))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stderr


def test_release_from_a_callback_thread_is_deferred(ctx):
    """The last reference dropped on the callback's thread: queued, freed by the caller's
    next stream call on its own thread (the C base's flag, set by _stream._run)."""
    s = cuda.stream()
    gc.collect()
    before = ctx.raw_stats().arrays.current
    holder = [cuda.device_array(1000), cuda.to_device(np.arange(5.0))]
    assert all(type(x).__mro__[1] is _ArrayBase for x in holder)
    seen = []

    def drop(stream, status, arg):
        n = len(_stream._deferred)
        holder.clear()  # deallocates both arrays here
        seen.append((threading.get_ident(), len(_stream._deferred) - n,
                     ctx.raw_stats().arrays.current))

    s.add_callback(drop, None)
    s.synchronize()
    assert len(seen) == 1 and seen[0][0] != threading.get_ident()
    assert seen[0][1] == 2 and seen[0][2] == before + 2  # queued, not released there
    assert not _stream._deferred
    assert ctx.raw_stats().arrays.current == before


def test_handle_slot_set_and_cleared(ctx, no_leak):
    d = cuda.device_array(4)
    h = d._h
    assert isinstance(h, int) and h
    d._h = None  # the caller takes the reference over
    assert d._h is None
    with pytest.raises(ValueError, match="released"):
        d.handle
    _lib.lib.dv_array_release(h)
    other = cuda.device_array(2)
    d._h = _lib.lib.dv_array_retain(other.handle)
    assert d.handle == d._h == other.handle
    del other, d  # each releases its reference


def test_slots_subclass_and_attribute_errors(no_leak):
    d = cuda.device_array(3)
    r = DeviceRecord(REC)
    for x in (d, r):
        assert isinstance(x, _ArrayBase) and not hasattr(x, "__dict__")
        with pytest.raises(AttributeError):
            x.not_an_attribute = 1
    assert isinstance(r, DeviceNDArray) and repr(r) == "<devarray.DeviceRecord dtype=%s>" % REC
    assert repr(d) == "<devarray.DeviceNDArray shape=(3,) dtype=float64>"
    e = DeviceNDArray.__new__(DeviceNDArray)  # no slot set
    with pytest.raises(AttributeError, match="shape"):
        e.shape
    seen, hook = [], sys.unraisablehook
    sys.unraisablehook = seen.append  # an exception in the release would be reported here
    try:
        del e  # nothing to release
        gc.collect()
    finally:
        sys.unraisablehook = hook
    assert seen == []
    rec = cuda.to_device(np.zeros((), REC))
    assert type(rec) is DeviceRecord and rec["x"] == 0


def test_pickling_refused(no_leak):
    d = cuda.device_array(3)
    with pytest.raises(TypeError, match="cannot pickle 'DeviceNDArray' object"):
        pickle.dumps(d)
    with pytest.raises(TypeError, match="cannot pickle 'DeviceRecord' object"):
        pickle.dumps(DeviceRecord(REC))
    with pytest.raises(TypeError, match="cannot pickle"):
        copy.copy(d)  # a copy would hold the same handle, released twice


def test_numba_constructor_on_either_base(no_leak):
    d = DeviceNDArray((3, 2), (16, 8), np.float64)
    assert isinstance(d, _ArrayBase) and d.shape == (3, 2) and d.strides == (16, 8)
    d.copy_to_device(np.ones((3, 2)))
    assert (d.copy_to_host() == 1).all()


# ---- copy_to_host, compiled (issue 39) ------------------------------------------------

def test_copy_to_host_is_the_compiled_method():
    """With the module, DeviceNDArray.copy_to_host is _ArrayBase's C method (no Python
    frame); without it, the Python one. Either way _copy_to_host_py is the Python path."""
    if sp is not None:
        assert DeviceNDArray.copy_to_host is sp._ArrayBase.copy_to_host
    else:
        assert DeviceNDArray.copy_to_host is DeviceNDArray._copy_to_host_py


COPY_CASES = {
    "into": lambda d, a: d.copy_to_host(np.empty_like(a)),
    "into-kw": lambda d, a: d.copy_to_host(ary=np.empty_like(a)),
    "new": lambda d, a: d.copy_to_host(),
    "new-stream0": lambda d, a: d.copy_to_host(stream=0),
    "into-F": lambda d, a: d.copy_to_host(np.asfortranarray(np.empty_like(a))),
    "into-strided": lambda d, a: d.copy_to_host(np.empty((a.shape[0], 2 * a.shape[1]), a.dtype)[:, ::2]),
}


@pytest.mark.parametrize("case", sorted(COPY_CASES))
@pytest.mark.parametrize("dtype", ["float64", "int8", "complex64", "bool"])
def test_copy_to_host_matches_ctypes(no_leak, case, dtype):
    """Every way of calling it: the same bytes, the same array layout, the object passed in
    returned, as the Python path gives."""
    a = (np.arange(24).reshape(4, 6) % 7).astype(dtype)
    d = cuda.to_device(a)
    fast = COPY_CASES[case](d, a)
    slow = COPY_CASES[case](d, a) if sp is None else None
    if sp is not None:
        slow = d._copy_to_host_py(*_args_of(case, a))
    assert (fast == a).all() and fast.dtype == a.dtype
    assert (slow == a).all() and fast.strides == slow.strides and fast.flags.c_contiguous == slow.flags.c_contiguous
    if case.startswith("into"):
        out = np.empty_like(a)
        assert d.copy_to_host(out) is out


def _args_of(case, a):
    return {"into": (np.empty_like(a),), "into-kw": (np.empty_like(a),), "new": (), "new-stream0": (),
            "into-F": (np.asfortranarray(np.empty_like(a)),),
            "into-strided": (np.empty((a.shape[0], 2 * a.shape[1]), a.dtype)[:, ::2],)}[case]


def test_copy_to_host_of_views_and_orders(no_leak):
    """The dense layout of a new array: F for an F-ordered device array, C for C, and a
    non-contiguous device view gives a C array; 0-d and empty arrays too."""
    a = np.arange(12.0).reshape(3, 4)
    f = cuda.to_device(np.asfortranarray(a))
    assert f.copy_to_host().flags.f_contiguous and (f.copy_to_host() == a).all()
    c = cuda.to_device(a)
    v = c[:, 1::2]
    assert v.copy_to_host().flags.c_contiguous and (v.copy_to_host() == a[:, 1::2]).all()
    z = cuda.to_device(np.array(3.5))
    assert z.copy_to_host().shape == () and z.copy_to_host()[()] == 3.5
    e = cuda.to_device(np.empty((0, 3)))
    assert e.copy_to_host().shape == (0, 3)


def copy_errors():
    d = cuda.to_device(np.arange(6.0))
    ro = np.empty(6)
    ro.flags.writeable = False
    return {
        "dtype": lambda: d.copy_to_host(np.empty(6, np.float32)),
        "shape": lambda: d.copy_to_host(np.empty(5)),
        "read-only": lambda: d.copy_to_host(ro),
        "not-numpy": lambda: d.copy_to_host([0.0] * 6),
        "swapped": lambda: d.copy_to_host(np.empty(6, ">f8")),
        "too-many": lambda: d.copy_to_host(np.empty(6), 0, 1),
        "bad-kw": lambda: d.copy_to_host(out=np.empty(6)),
        "twice": lambda: d.copy_to_host(np.empty(6), ary=np.empty(6)),
    }


@pytest.mark.parametrize("name", sorted(copy_errors()))
def test_copy_to_host_errors_match_python(no_leak, name):
    """What the compiled method refuses is refused by the Python path, with its class and
    words (the C method hands every error to it)."""
    fast = outcome(copy_errors()[name])
    d = cuda.to_device(np.arange(6.0))
    calls = {"dtype": (np.empty(6, np.float32),), "shape": (np.empty(5),), "not-numpy": ([0.0] * 6,),
             "swapped": (np.empty(6, ">f8"),)}
    assert fast[0] == "raise", name
    if name in calls:
        slow = outcome(lambda: d._copy_to_host_py(*calls[name]))
        assert fast[1:3] == slow[1:3]


def test_copy_to_host_registered_and_stream_take_python(no_leak):
    """A registered host array (the registry is not empty) and a stream take the Python path:
    the copy is still right, and the stream's copy is held until it synchronizes."""
    a = np.arange(8.0)
    d = cuda.to_device(a)
    s = cuda.stream()
    out = np.empty(8)
    assert d.copy_to_host(out, stream=s) is out
    s.synchronize()
    assert (out == a).all()
    p = cuda.pinned_array(8)
    assert (d.copy_to_host(p) == a).all()
    with cuda.pinned(out):
        out[:] = 0
        assert (d.copy_to_host(out) == a).all()


@needs_speedups
def test_init_checks_its_addresses():
    with pytest.raises(ValueError, match="null address"):
        sp.init_library(1, 2, 0, 4, 5, 6, 7, 8)
    v = _lib.ctypes.cast(_lib.lib.dv_version, _lib.c_void_p).value
    with pytest.raises(RuntimeError, match="another libdevarray"):
        sp.init_library(v, v, v, v, v, v, v, v)
    with pytest.raises(TypeError):
        sp.init_host(np.ndarray, 3, {})  # empty must be callable
    with pytest.raises(TypeError):
        sp.device_array(object, 3, np.float64)  # not a subclass of the base


def run_import(env_value):
    env = dict(os.environ, DEVARRAY_SPEEDUPS=env_value,
               PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(cuda.__file__))))
    code = "import devarray._lib as l; print(l.speedups is not None)"
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=120)


def test_loading_named_file_errors_and_off():
    r = run_import("off")
    assert r.returncode == 0 and r.stdout.strip() == "False"
    r = run_import("/nonexistent/_speedups.so")
    assert r.returncode != 0 and "ImportError" in r.stderr and "DEVARRAY_SPEEDUPS" in r.stderr
    r = run_import(_lib.library_path)  # a file, but not the module
    assert r.returncode != 0 and "ImportError" in r.stderr and "could not be loaded" in r.stderr
