"""External memory manager plugins (issue 25 #8): Numba's EMM interface; a plugin set with
set_memory_manager (or NUMBA_CUDA_MEMORY_MANAGER) serves devarray's device allocations."""
import ctypes
import gc
import sys
import threading
import weakref

import numpy as np
import pytest

import devarray as cuda
from devarray import _emm


class Ptr:
    """The least a memalloc result needs (Numba's protocol): device_pointer, size; the
    finalizer runs when the object goes."""

    def __init__(self, context, pointer, size, finalizer=None):
        self.context = context
        self.device_pointer = ctypes.c_void_p(pointer)
        self.size = size
        if finalizer is not None:
            weakref.finalize(self, finalizer)


class Counting(cuda.HostOnlyCUDAMemoryManager):
    """Delegates to the driver (dv_backend_alloc) and records every call."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.initialized = False
        self.live = {}          # pointer -> size
        self.allocs, self.frees = [], []
        self.reset_called = self.info_called = False
        self.lock = threading.Lock()

    def initialize(self):
        self.initialized = True

    def memalloc(self, size):
        assert self.initialized, "memalloc before initialize"
        blk = _emm.dv_block()
        h = self.context.handle
        cuda._lib.check(cuda._clib.dv_backend_alloc(h, size, ctypes.byref(blk)))
        ptr = blk.buf
        with self.lock:
            self.live[ptr] = size
            self.allocs.append(size)

        def finalizer():
            with self.lock:
                del self.live[ptr]
                self.frees.append(size)
            cuda._lib.check(cuda._clib.dv_backend_free(h, blk))

        return Ptr(self.context, ptr, size, finalizer)

    def get_memory_info(self):
        self.info_called = True
        return cuda.MemoryInfo(free=32, total=64)

    def get_ipc_handle(self, memory):
        return "ipc %d" % memory.device_pointer.value

    def reset(self):
        self.reset_called = True
        super().reset()

    @property
    def interface_version(self):
        return 1


class BadVersion(Counting):
    @property
    def interface_version(self):
        return 2


@pytest.fixture
def plugin():
    """A fresh context served by the Counting plugin; the library's manager again after."""
    gc.collect()
    cuda.close()
    cuda.set_memory_manager(Counting)
    try:
        yield cuda.current_context().memory_manager
    finally:
        gc.collect()
        cuda.close()
        _emm._memory_manager = None


def _native(d):
    """The device pointer of d's element 0 as the library sees it (the cl_mem on OpenCL,
    where device_ctypes_pointer is a synthetic value)."""
    buf, off = cuda._memory._native(d.handle)
    return buf + off


def test_plugin_serves_allocations(plugin):
    ctx = cuda.current_context()
    assert isinstance(plugin, Counting) and plugin.context is ctx and plugin.initialized
    assert ctx.has_plugin
    a = np.arange(10, dtype=np.int64)
    d1 = cuda.to_device(a)
    assert plugin.allocs == [a.nbytes] and len(plugin.live) == 1
    if ctx.backend != "host":  # the simulator's block handle is not its data's address
        assert _native(d1) in plugin.live
    d2 = cuda.device_array_like(np.arange(5))
    assert plugin.allocs == [80, 40]
    np.testing.assert_array_equal(d1.copy_to_host(), a)
    d2.copy_to_device(d1[:5])
    np.testing.assert_array_equal(d2.copy_to_host(), a[:5])
    # as Numba: the pointer's finalizer runs as soon as the array goes
    del d1
    gc.collect()
    assert plugin.frees == [80] and list(plugin.live.values()) == [40]
    del d2
    gc.collect()
    assert plugin.live == {} and sorted(plugin.frees) == [40, 80]
    assert ctx.deallocations.limits[0] == 0  # the library queues nothing for a plugin


def test_bad_version_rejected():
    before = _emm._memory_manager
    with pytest.raises(RuntimeError, match="version 1 required"):
        cuda.set_memory_manager(BadVersion)
    assert _emm._memory_manager is before


def test_interface_rules():
    with pytest.raises(RuntimeError, match="requires a context"):
        Counting()

    class Incomplete(cuda.HostOnlyCUDAMemoryManager):
        pass

    with pytest.raises(TypeError):
        Incomplete(context=None)
    assert issubclass(cuda.HostOnlyCUDAMemoryManager, cuda.BaseCUDAMemoryManager)
    assert hasattr(cuda.GetIpcHandleMixin, "get_ipc_handle")


def test_memory_info_reset_ipc_route_to_plugin(plugin):
    ctx = cuda.current_context()
    mi = ctx.get_memory_info()
    assert plugin.info_called and mi == (32, 64) and mi.free == 32
    # the library's own query reaches the plugin too (the C table's mem_info)
    f, t = ctypes.c_size_t(), ctypes.c_size_t()
    cuda._lib.check(cuda._clib.dv_context_memory_info(ctx.handle, ctypes.byref(f), ctypes.byref(t)))
    assert (f.value, t.value) == (32, 64)
    ctx.reset()
    assert plugin.reset_called
    assert ctx.get_ipc_handle(Ptr(ctx, 7, 1)) == "ipc 7"


def test_defer_cleanup_enters_the_plugin(plugin):
    ctx = cuda.current_context()
    d = cuda.device_array(16)
    with cuda.defer_cleanup():
        assert plugin.deallocations.is_disabled
        del d
        gc.collect()
        assert plugin.frees == []          # deferred inside the scope
        assert len(ctx.deallocations) == 1
    assert not plugin.deallocations.is_disabled
    cuda.device_array(1)                   # the next release flushes
    gc.collect()
    assert sorted(plugin.frees) == [8, 128]


def test_memory_error_is_reraised(plugin):
    err = MemoryError("plugin says no")

    def no(size):
        raise err
    plugin.memalloc = no
    with pytest.raises(MemoryError) as e:
        cuda.device_array(100)
    assert e.value is err


def test_other_error_is_reraised(plugin):
    class PluginBug(Exception):
        pass

    def bug(size):
        raise PluginBug("bad")
    plugin.memalloc = bug
    with pytest.raises(PluginBug):
        cuda.to_device(np.ones(3))
    # nothing left over: the next failure is the library's own
    with pytest.raises(cuda.ArgumentError):
        cuda.device_array(-1)


def test_not_implemented_memory_info(plugin):
    def none():
        raise NotImplementedError("a pool cannot say")
    plugin.get_memory_info = none
    ctx = cuda.current_context()
    with pytest.raises(NotImplementedError, match="a pool cannot say"):
        ctx.get_memory_info()
    f, t = ctypes.c_size_t(), ctypes.c_size_t()
    with pytest.raises(NotImplementedError, match="a pool cannot say"):
        cuda._lib.check(cuda._clib.dv_context_memory_info(ctx.handle, ctypes.byref(f),
                                                          ctypes.byref(t)))


def test_free_error_is_reported_not_lost(plugin, monkeypatch):
    seen = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: seen.append(u.exc_value))
    real = plugin.memalloc

    def failing_free(size):
        p = real(size)
        weakref.finalize(p, lambda: (_ for _ in ()).throw(ValueError("free failed")))
        return p
    plugin.memalloc = failing_free
    d = cuda.device_array(4)
    del d
    gc.collect()
    assert any(isinstance(e, ValueError) and "free failed" in str(e) for e in seen)


def test_threads(plugin):
    errors = []

    def work():
        try:
            for _ in range(20):
                d = cuda.to_device(np.arange(8.0))
                np.testing.assert_array_equal(d.copy_to_host(), np.arange(8.0))
                del d
        except BaseException as e:  # noqa: B902
            errors.append(e)
    ts = [threading.Thread(target=work) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    gc.collect()
    assert errors == []
    assert len(plugin.allocs) == 80 and len(plugin.frees) == 80 and plugin.live == {}


def test_env_variable(tmp_path, monkeypatch):
    mod = tmp_path / "dv_emm_env_plugin.py"
    mod.write_text("from test_emm import Counting\n_numba_memory_manager = Counting\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("NUMBA_CUDA_MEMORY_MANAGER", "dv_emm_env_plugin")
    gc.collect()
    cuda.close()
    try:
        assert type(cuda.current_context().memory_manager).__name__ == "Counting"
        d = cuda.device_array(3)
        assert cuda.current_context().memory_manager.allocs == [24]
        del d
        gc.collect()
        cuda.close()
        _emm._memory_manager = None
        monkeypatch.setenv("NUMBA_CUDA_MEMORY_MANAGER", "no_such_plugin_module_dv")
        with pytest.raises(RuntimeError, match="Failed to use memory manager from "
                                               "no_such_plugin_module_dv"):
            cuda.current_context()
        monkeypatch.setenv("NUMBA_CUDA_MEMORY_MANAGER", "default")
        assert isinstance(cuda.current_context().memory_manager, cuda.NumbaCUDAMemoryManager)
    finally:
        gc.collect()
        cuda.close()
        _emm._memory_manager = None


def test_host_memory_deferred_through_the_plugin(plugin):
    """HostOnlyCUDAMemoryManager keeps Numba's semantics: pinned and mapped frees wait in
    the plugin's own deallocations queue."""
    ctx = cuda.current_context()
    plugin.deallocations.clear()
    # as in Numba, a plugin's queue has no capacity until the plugin gives it one: any bytes
    # (a mapped free) are over the ratio limit and flush
    assert plugin.deallocations.memory_capacity == 0
    p = ctx.memhostalloc(32)
    del p
    gc.collect()
    assert len(plugin.deallocations) == 1      # pinned: 0 bytes, queued
    m = ctx.memhostalloc(48, mapped=True)
    del m
    gc.collect()
    assert len(plugin.deallocations) == 0      # 48 bytes > 0: flushed
    plugin.deallocations.memory_capacity = 1 << 30
    p = ctx.memhostalloc(32)
    m = ctx.memhostalloc(48, mapped=True)
    arr = np.zeros(4)
    pin = ctx.mempin(arr, arr.ctypes.data, arr.nbytes)
    del p, m, pin
    gc.collect()
    assert len(plugin.deallocations) == 3 and plugin.deallocations._size == 48
    before = ctx.raw_stats().pinned.current
    plugin.deallocations.clear()
    assert len(plugin.deallocations) == 0
    assert ctx.raw_stats().pinned.current < before  # now really freed


def test_backend_memalloc_helper(plugin):
    """A plugin returning devarray.backend_memalloc's pointers (what the example does)."""
    seen = []

    def alloc(size):
        mem = cuda.backend_memalloc(plugin.context, size)
        seen.append(mem.device_pointer.value)
        return mem
    plugin.memalloc = alloc
    a = np.arange(6.0)
    d = cuda.to_device(a)
    np.testing.assert_array_equal(d.copy_to_host(), a)
    assert len(seen) == 1 and seen[0]
    if cuda.current_context().backend != "host":
        assert d.device_ctypes_pointer.value == seen[0]
    del d
    gc.collect()


class NumbaStylePlugin(Counting):
    """Numba's own test plugin: fake pointers (1, 2, ...) in AutoFreePointers, never used."""

    def memalloc(self, size):
        assert self.initialized
        self.count = getattr(self, "count", 0) + 1
        n = self.count
        records = self.records = getattr(self, "records", {})
        records[n] = size

        def finalizer():
            del records[n]
        return cuda.AutoFreePointer(weakref.proxy(self.context), ctypes.c_void_p(n), size,
                                    finalizer=finalizer)


def test_numba_test_plugin_with_fake_pointers():
    gc.collect()
    cuda.close()
    cuda.set_memory_manager(NumbaStylePlugin)
    try:
        mgr = cuda.current_context().memory_manager
        d1 = cuda.device_array_like(np.arange(10))
        assert mgr.count == 1 and mgr.records[1] == 80
        d2 = cuda.device_array_like(np.arange(5))
        assert mgr.records[2] == 40
        del d1
        assert 1 not in mgr.records and 2 in mgr.records
        del d2
        assert mgr.records == {}
    finally:
        gc.collect()
        cuda.close()
        cuda.set_memory_manager(None)


def _assert_refused(d, host):
    """Every access to made-up memory is ArgumentError, naming the manager."""
    calls = [lambda: d.copy_to_host(), lambda: d.copy_to_device(host),
             lambda: d.memset(0), lambda: d[0], lambda: d.__setitem__(0, 1)]
    words = "memory manager.*not device memory"
    if cuda.current_context().backend == "cuda":
        words = None  # a CUdeviceptr: the driver refuses it (CUDA_ERROR_INVALID_VALUE)
    else:
        calls.append(lambda: cuda._memory._native(d.handle))
    for call in calls:
        with pytest.raises(cuda.ArgumentError, match=words):
            call()


def test_fake_pointers_are_carried_not_dereferenced():
    """Issue 34: memory a plug-in makes up (Numba's dummy plug-in's allocation counts) is
    carried, never given to the backend: get_ipc_handle reaches the plug-in with the
    plug-in's own pointer object (it crashed the interpreter in dv_array_native), and every
    access is refused with ArgumentError, changing nothing."""
    gc.collect()
    cuda.close()
    cuda.set_memory_manager(NumbaStylePlugin)
    try:
        mgr = cuda.current_context().memory_manager
        d = cuda.device_array_like(np.arange(2))
        h = d.get_ipc_handle()
        assert h._ipc_handle == "ipc 1"
        assert d.gpu_data.device_pointer.value == 1
        assert d.gpu_data.size == 16
        assert d.device_ctypes_pointer.value == 1
        assert d[1:].device_ctypes_pointer.value == 9
        assert d[1:].gpu_data.device_pointer.value == 9
        host = np.array([5, 6])
        _assert_refused(d, host)
        assert list(host) == [5, 6]
        del d, h
        gc.collect()
        assert mgr.records == {}
    finally:
        gc.collect()
        cuda.close()
        cuda.set_memory_manager(None)


def test_array_ipc_handle_routes_to_plugin(plugin):
    """DeviceNDArray.get_ipc_handle asks the plug-in for the array's gpu_data, as Numba."""
    d = cuda.device_array(4, np.int32)
    h = d.get_ipc_handle()
    assert h._ipc_handle == "ipc %d" % d.gpu_data.device_pointer.value
    assert h._array_desc["shape"] == (4,) and h._array_desc["dtype"] == np.int32
    with pytest.raises(cuda.NotSupportedError, match="plug-in's handle"):
        h.open()
    del d, h


def test_recovered_plugin_error_is_not_raised_later(plugin):
    """A memalloc failure the library recovered from (it retried) is not kept: a later,
    unrelated failure raises its own error, not the stale plug-in exception."""
    real = plugin.memalloc
    calls = []

    def first_fails(size):
        calls.append(size)
        if len(calls) == 1:
            raise MemoryError("stale")
        return real(size)
    plugin.memalloc = first_fails
    d = cuda.device_array(10)
    assert len(calls) == 2 and d.shape == (10,)
    assert getattr(_emm._tls, "pending", None) is None  # nothing kept alive
    with pytest.raises(MemoryError) as e:
        cuda.backend_memalloc(cuda.current_context(), 1 << 60)
    assert "stale" not in str(e.value)
