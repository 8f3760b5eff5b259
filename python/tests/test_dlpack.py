"""DLPack 1.x in the binding (issue 38 item 4): DeviceNDArray.__dlpack__(stream, max_version,
dl_device, copy) as the Python array API standard has it, and from_dlpack taking both capsule
kinds ("dltensor_versioned" first, "dltensor" from older producers), renaming what it
consumes, refusing read-only tensors. Runs on every backend run_tests.py is given (host and
opencl under CTest); what only applies elsewhere skips by name."""

import ctypes
import gc

import numpy as np
import pytest

import devarray as cuda
from devarray import _dlpack
from devarray._lib import NotSupportedError, has, lib

KDL_CPU = 1


def _valid(cap, name):
    return bool(_dlpack._api.PyCapsule_IsValid(id(cap), name))


def _tensor(cap):
    """(version, flags, (device type, device id)) of an unconsumed versioned capsule."""
    p = _dlpack._api.PyCapsule_GetPointer(id(cap), _dlpack.VERSIONED)
    major, minor = (ctypes.c_uint32 * 2).from_address(p)
    flags = ctypes.c_uint64.from_address(p + 24).value
    dev = (ctypes.c_int32 * 2).from_address(p + 32 + 8)  # DLTensor: data 8, then the device
    return (major, minor), flags, (dev[0], dev[1])


def _flush(ctx):
    gc.collect()
    for _ in range(3):
        ctx.deallocations.clear()


@pytest.fixture
def dl_ctx(ctx):
    if not has("dv_array_to_dlpack_versioned"):
        pytest.skip("this libdevarray has no DLPack 1.x functions")
    d = cuda.to_device(np.zeros(1))
    try:
        d.__dlpack__(max_version=(1, 0))
    except NotSupportedError as e:  # built without dlpack.h
        pytest.skip(str(e))
    finally:
        del d
    yield ctx
    _flush(ctx)


def test_capsule_kind_follows_max_version(no_leak, dl_ctx):
    """max_version (1, 0) and above gives "dltensor_versioned" (version 1.0, flags 0), None or
    0.x "dltensor"; an unconsumed capsule's destructor calls the deleter; bad arguments are
    TypeError."""
    d = cuda.to_device(np.arange(12, dtype=np.int32).reshape(3, 4))
    for mv in ((1, 0), (1, 3), (2, 0)):  # devarray gives 1.0 to any consumer that takes it
        cap = d.__dlpack__(max_version=mv)
        assert _valid(cap, b"dltensor_versioned") and not _valid(cap, b"dltensor")
        version, flags, dev = _tensor(cap)
        assert version == (1, 0)
        assert flags == 0  # devarray's arrays are writable: never read-only
        assert dev == d.__dlpack_device__()
        del cap  # never consumed: its destructor calls the deleter
    for mv in (None, (0, 8)):
        cap = d.__dlpack__(max_version=mv)
        assert _valid(cap, b"dltensor") and not _valid(cap, b"dltensor_versioned")
        del cap
    assert _valid(d.__dlpack__(), b"dltensor")  # a 0.x consumer's call, unchanged
    with pytest.raises(TypeError):
        d.__dlpack__(max_version=1)
    with pytest.raises(TypeError):
        d.__dlpack__(copy="yes")
    with pytest.raises(TypeError):
        d.__dlpack__(dl_device="cpu")
    del d


def test_numpy_2_1_call_gets_writable(no_leak, dl_ctx):
    """NumPy >= 2.1's from_dlpack asks for 1.x and marks a 0.x import read-only: its call gets
    a versioned tensor without the read-only flag, so the NumPy array is writable."""
    d = cuda.to_device(np.arange(6.0))
    # np.from_dlpack(d): exactly NumPy 2.1's call (no stream argument)
    cap = d.__dlpack__(dl_device=None, copy=None, max_version=(1, 0))
    assert _tensor(cap)[1] & _dlpack.FLAG_READ_ONLY == 0
    del cap
    # np.from_dlpack(d, device="cpu"): a host copy elsewhere, the array itself on the host backend
    cap = d.__dlpack__(dl_device=(KDL_CPU, 0), copy=None, max_version=(1, 0))
    assert _tensor(cap)[1] & _dlpack.FLAG_READ_ONLY == 0
    assert _tensor(cap)[2] == (KDL_CPU, 0)
    assert _tensor(cap)[1] == (0 if dl_ctx.backend == "host" else _dlpack.FLAG_IS_COPIED)
    del cap
    if dl_ctx.backend == "host":
        if tuple(int(x) for x in np.__version__.split(".")[:2]) >= (2, 1):
            h = np.from_dlpack(d)
            assert h.flags.writeable
            h[2] = -1.0
            assert d.copy_to_host()[2] == -1.0  # the same memory
            del h
    del d


def test_from_dlpack_both_kinds_renamed(no_leak, dl_ctx):
    """from_dlpack takes either capsule kind as a view (no copy) and renames it used_*; a used
    capsule is ValueError."""
    a = np.arange(20, dtype=np.float32).reshape(4, 5)
    d = cuda.to_device(a)
    for mv, used in (((1, 0), b"used_dltensor_versioned"), (None, b"used_dltensor")):
        cap = d.__dlpack__(max_version=mv)
        e = cuda.from_dlpack(cap)
        assert _valid(cap, used)
        np.testing.assert_array_equal(e.copy_to_host(), a)
        d[1, 1] = 99.0  # a view, not a copy
        assert e.copy_to_host()[1, 1] == 99.0
        d[1, 1] = a[1, 1]
        with pytest.raises(ValueError):  # consumed once only
            cuda.from_dlpack(cap)
        del e, cap
        _flush(dl_ctx)
    del d


class _Old:
    """A producer from before DLPack 1.x: __dlpack__ takes stream only."""

    def __init__(self, d):
        self.d, self.calls = d, 0

    def __dlpack__(self, stream=None):
        self.calls += 1
        return self.d.__dlpack__(stream=stream)

    def __dlpack_device__(self):
        return self.d.__dlpack_device__()


class _New(_Old):
    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        self.calls += 1
        self.max_version = max_version
        return self.d.__dlpack__(stream=stream, max_version=max_version)


def test_from_dlpack_asks_for_1x_then_falls_back(no_leak, dl_ctx):
    """from_dlpack calls __dlpack__(max_version=(1, 0)) once, and __dlpack__() once for a
    producer that raises TypeError for max_version."""
    a = np.arange(8, dtype=np.int64)
    d = cuda.to_device(a)
    new = _New(d)
    e = cuda.from_dlpack(new)
    assert new.calls == 1 and new.max_version == (1, 0)
    np.testing.assert_array_equal(e.copy_to_host(), a)
    old = _Old(d)
    f = cuda.from_dlpack(old)  # TypeError for max_version, then the 0.x call
    assert old.calls == 1
    np.testing.assert_array_equal(f.copy_to_host(), a)
    del e, f, new, old, d
    if dl_ctx.backend == "host":  # NumPy (1.24 here: a 0.x producer) into a device array
        g = cuda.from_dlpack(a)
        np.testing.assert_array_equal(g.copy_to_host(), a)
        del g


def test_read_only_tensor_refused(no_leak, dl_ctx):
    """A read-only 1.x tensor: BufferError, and the capsule is left unconsumed (its destructor
    then calls the deleter: nothing leaks)."""
    d = cuda.to_device(np.arange(4.0))
    cap = _dlpack.to_capsule(d.handle, None, None, True, _dlpack.FLAG_READ_ONLY)
    assert _tensor(cap)[1] == _dlpack.FLAG_READ_ONLY
    with pytest.raises(BufferError, match="read-only"):
        cuda.from_dlpack(cap)
    assert _valid(cap, b"dltensor_versioned")

    class ReadOnly:
        def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
            return _dlpack.to_capsule(d.handle, None, None, True, _dlpack.FLAG_READ_ONLY)

    with pytest.raises(BufferError):
        cuda.from_dlpack(ReadOnly())
    del cap, d


def test_copy(no_leak, dl_ctx):
    """copy=True exports a copy on the array's device (1.x: IS_COPIED) that later writes do not
    reach; copy=False on the own device exports the array itself."""
    a = np.arange(10, dtype=np.int32)
    d = cuda.to_device(a)
    cap = d.__dlpack__(max_version=(1, 0), copy=True)
    assert _tensor(cap)[1] == _dlpack.FLAG_IS_COPIED
    assert _tensor(cap)[2] == d.__dlpack_device__()  # the copy stays on the array's device
    c = cuda.from_dlpack(cap)
    d[0] = 42  # the copy does not see it
    assert c.copy_to_host()[0] == 0
    np.testing.assert_array_equal(c.copy_to_host()[1:], a[1:])
    del c, cap
    cap = d.__dlpack__(copy=True)  # 0.x: a copy too, without the flag 0.x lacks
    c = cuda.from_dlpack(cap)
    assert c.copy_to_host()[0] == 42
    d[0] = 0
    assert c.copy_to_host()[0] == 42
    del c, cap
    for mv in (None, (1, 0)):  # copy=False on the array's own device: the view
        v = cuda.from_dlpack(d.__dlpack__(max_version=mv, copy=False,
                                          dl_device=d.__dlpack_device__()))
        d[3] = -3
        assert v.copy_to_host()[3] == -3
        del v
    del d


def test_dl_device(no_leak, dl_ctx):
    """dl_device other than the array's own is BufferError except kDLCPU (1, 0), which gives
    a host copy (IS_COPIED) that NumPy reads, or BufferError with copy=False."""
    a = np.arange(6.0).reshape(2, 3)
    d = cuda.to_device(a)
    own = d.__dlpack_device__()
    for other in ((4, 0), (2, 0), (10, 0), (1, 1)):
        if other != own:
            with pytest.raises(BufferError):
                d.__dlpack__(max_version=(1, 0), dl_device=other)
    if own == (KDL_CPU, 0):
        cap = d.__dlpack__(max_version=(1, 0), dl_device=(KDL_CPU, 0))
        assert _tensor(cap)[1] == 0  # in place
        del cap
        del d
        return
    # elsewhere (opencl, cuda, hip device arrays): kDLCPU asks for a host copy
    with pytest.raises(BufferError, match="copy=False"):
        d.__dlpack__(max_version=(1, 0), dl_device=(KDL_CPU, 0), copy=False)
    for copy in (None, True):
        cap = d.__dlpack__(max_version=(1, 0), dl_device=(KDL_CPU, 0), copy=copy)
        assert _tensor(cap)[1] == _dlpack.FLAG_IS_COPIED
        assert _tensor(cap)[2] == (KDL_CPU, 0)
        del cap

    class AsHost:  # what a CPU consumer (NumPy 1.24, a 0.x consumer) reads
        def __dlpack__(self, stream=None):
            return d.__dlpack__(stream=stream, dl_device=(KDL_CPU, 0))

        def __dlpack_device__(self):
            return (KDL_CPU, 0)

    h = np.from_dlpack(AsHost())
    np.testing.assert_array_equal(h, a)
    del h, d


def test_copy_of_pinned_memory(no_leak, dl_ctx):
    """A device array over pinned memory (kDLCUDAHost on CUDA) copied for export becomes
    pageable host memory, a kDLCPU tensor, which takes no consumer stream."""
    from devarray._array import DeviceNDArray
    from devarray._hostmem import _alloc
    h, dt = _alloc(lib.dv_pinned_array, (5,), np.int16, None, "C", name="pinned_array")
    ptr = ctypes.c_void_p()
    assert lib.dv_array_host_data(h, ctypes.byref(ptr)) == 0
    ctypes.memmove(ptr.value, np.arange(5, dtype=np.int16).ctypes.data, 10)
    p = DeviceNDArray._from_handle(h, dt)
    for mv in (None, (1, 0)):
        c = cuda.from_dlpack(p.__dlpack__(max_version=mv, copy=True))
        np.testing.assert_array_equal(c.copy_to_host(), np.arange(5))
        del c
    cap = p.__dlpack__(max_version=(1, 0), copy=True)
    assert _tensor(cap)[2] == (KDL_CPU, 0)
    del cap, p


def test_other_major_version_refused(no_leak, dl_ctx):
    """A versioned tensor of another major version is NotSupportedError naming both versions,
    its capsule left unconsumed; a copy exported with stream=-1 is complete all the same."""
    d = cuda.to_device(np.arange(3.0))
    cap = d.__dlpack__(max_version=(1, 0))
    p = _dlpack._api.PyCapsule_GetPointer(id(cap), _dlpack.VERSIONED)
    version = (ctypes.c_uint32 * 2).from_address(p)
    version[0] = 2
    with pytest.raises(NotSupportedError, match=r"DLPack 2\.0.*1\.x"):
        cuda.from_dlpack(cap)
    assert _valid(cap, b"dltensor_versioned")
    version[0] = 1
    del cap, version
    c = cuda.from_dlpack(d.__dlpack__(stream=-1, max_version=(1, 0), copy=True))
    np.testing.assert_array_equal(c.copy_to_host(), np.arange(3.0))
    del c, d
