"""Numba's context object (issue 25 #5): current_context().memory_manager (an object),
deallocations, get_memory_info, create_stream, create_event, device, reset."""
import gc

import numpy as np
import pytest

import devarray as cuda


def _flushed(ctx):
    gc.collect()
    for _ in range(3):
        ctx.deallocations.clear()
    assert len(ctx.deallocations) == 0


def test_memory_manager_is_numbas_object(ctx):
    mm = ctx.memory_manager
    assert not isinstance(mm, str)
    assert isinstance(mm, cuda.BaseCUDAMemoryManager)
    assert isinstance(mm, cuda.NumbaCUDAMemoryManager)
    assert mm.interface_version == 1
    assert mm.name == ctx.option("memory_manager") and mm.name in ("direct", "pool", "async")
    assert mm.context is ctx
    assert mm.deallocations is ctx.deallocations


def test_deallocations_through_the_manager(ctx):
    """Numba's test_max_pending_count, through ctx.memory_manager.deallocations."""
    deallocs = ctx.memory_manager.deallocations
    _flushed(ctx)
    limit = cuda.config.CUDA_DEALLOCS_COUNT
    for i in range(limit):
        cuda.to_device(np.arange(1))
        gc.collect()
        assert len(deallocs) == i + 1
    cuda.to_device(np.arange(1))
    gc.collect()
    assert len(deallocs) == 0
    mi = ctx.get_memory_info()
    assert deallocs.memory_capacity == mi.total
    assert deallocs._max_pending_bytes == int(mi.total * cuda.config.CUDA_DEALLOCS_RATIO)
    cuda.device_array(100, np.uint8)
    gc.collect()
    assert deallocs._size == deallocs.pending_bytes == 100


def test_manager_defer_cleanup_and_reset(ctx):
    mm = ctx.memory_manager
    _flushed(ctx)
    with mm.defer_cleanup():
        arrs = [cuda.device_array(8, np.uint8) for _ in range(cuda.config.CUDA_DEALLOCS_COUNT + 2)]
        del arrs
        gc.collect()
        mm.deallocations.clear()  # a no-op inside
        assert len(mm.deallocations) == cuda.config.CUDA_DEALLOCS_COUNT + 2
    mm.reset()
    assert len(mm.deallocations) == 0
    cuda.device_array(8, np.uint8)
    gc.collect()
    assert len(ctx.deallocations) == 1
    ctx.reset()
    assert len(ctx.deallocations) == 0


def test_get_memory_info(ctx):
    mi = ctx.get_memory_info()
    assert isinstance(mi, cuda.MemoryInfo) and isinstance(mi, tuple)
    assert 0 < mi.free <= mi.total and mi == ctx.memory_manager.get_memory_info()
    d = cuda.device_array(1 << 20, np.uint8)
    if ctx.backend == "host":  # the simulator counts exactly what is allocated
        assert ctx.get_memory_info().free <= mi.free - (1 << 20)
    del d


def test_create_stream_and_event(ctx):
    s = ctx.create_stream()
    assert isinstance(s, cuda.Stream)
    a = np.arange(100.0)
    d = cuda.to_device(a, stream=s)
    e1, e2 = ctx.create_event(), ctx.create_event(timing=True)
    e1.record(s)
    d.copy_to_host(stream=s)
    e2.record(s)
    e2.synchronize()
    assert e1.elapsed_time(e2) >= 0
    plain = ctx.create_event(timing=False)
    plain.record(s)
    plain.synchronize()
    with pytest.raises(cuda.DevarrayError):
        cuda.event_elapsed_time(plain, e2)
    s.synchronize()
    np.testing.assert_array_equal(d.copy_to_host(), a)
    del s, d


def test_device(ctx):
    dev = ctx.device
    assert dev.id == ctx.device_id == 0
    assert isinstance(dev.name, str) and dev.name
    cc = dev.compute_capability
    assert isinstance(cc, tuple) and len(cc) == 2 and all(isinstance(x, int) for x in cc)
    if ctx.backend in ("host", "opencl"):
        assert cc == (0, 0)  # no compute capability outside CUDA
    assert dev.total_memory == ctx.get_memory_info().total
    assert isinstance(dev.CAN_MAP_HOST_MEMORY, bool)


def test_mempin_mapped_refused_without_mapping(ctx, monkeypatch):
    monkeypatch.setattr(ctx.device, "CAN_MAP_HOST_MEMORY", False)
    buf = np.zeros(4)
    with pytest.raises(NotImplementedError, match="cannot map host memory"):
        ctx.mempin(buf, buf.ctypes.data, buf.nbytes, mapped=True)


def test_memalloc_roundtrip_and_queued_free(ctx):
    _flushed(ctx)
    m = ctx.memalloc(64)
    assert m.size == 64 and m.device_pointer.value
    src = np.arange(64, dtype=np.uint8)
    cuda.driver.host_to_device(m, src, 64)
    out = np.zeros(64, np.uint8)
    cuda.driver.device_to_host(out, m, 64)
    np.testing.assert_array_equal(out, src)
    del m
    gc.collect()
    assert len(ctx.deallocations) == 1 and ctx.deallocations.pending_bytes == 64
    with pytest.raises(ValueError):
        ctx.memalloc(-1)


def test_memhostalloc_and_mempin(ctx):
    p = ctx.memhostalloc(32)
    assert isinstance(p, cuda.PinnedMemory) and p.size == 32
    mp = ctx.memhostalloc(32, mapped=True, portable=True, wc=False)
    assert mp.size == 32
    view = np.frombuffer(mp, dtype=np.uint8)
    view[:] = 7
    out = np.zeros(32, np.uint8)
    cuda.driver.device_to_host(out, mp, 32)  # the device side of mapped memory
    assert (out == 7).all()
    arr = np.zeros(16)
    pin = ctx.mempin(arr, arr.ctypes.data, arr.nbytes)
    assert isinstance(pin, cuda.PinnedMemory) and pin.size == arr.nbytes
    assert cuda._clib.dv_array_is_pinned(pin._array()) == 1
    mpin = ctx.mempin(arr, arr.ctypes.data, arr.nbytes, mapped=True)
    cuda.driver.device_memset(mpin, 1, arr.nbytes)
    assert (arr.view(np.uint8) == 1).all()  # written through the mapping
    del p, mp, pin, mpin, view
    gc.collect()


def test_memallocmanaged(ctx):
    if ctx.backend in ("host", "opencl"):
        with pytest.raises(NotImplementedError, match="managed memory is not supported"):
            ctx.memallocmanaged(16)
        return
    m = ctx.memallocmanaged(16, attach_global=False)
    assert m.size == 16


def test_ipc_handle_of_memory_without_export(ctx):
    m = ctx.memalloc(8)
    with pytest.raises(NotImplementedError, match="has no IPC export"):
        ctx.get_ipc_handle(m)
    del m


def _with_plugin(cls):
    """Close the current context and make `cls` the memory manager of the next one."""
    from devarray import _emm
    gc.collect()
    cuda.close()
    cuda.set_memory_manager(cls)
    return _emm


def _drop_plugin(_emm):
    gc.collect()
    try:
        cuda.close()
    finally:
        _emm._memory_manager = None


def test_close_clears_the_plugins_own_free_queue():
    """Numba's close() resets the memory manager: pinned memory whose free waits in a
    HostOnlyCUDAMemoryManager's queue does not make close() busy."""
    class Host(cuda.HostOnlyCUDAMemoryManager):
        def memalloc(self, size):
            raise MemoryError("unused")

        def initialize(self):
            pass

        def get_memory_info(self):
            return cuda.MemoryInfo(free=0, total=0)

        def get_ipc_handle(self, memory):
            raise NotImplementedError

        @property
        def interface_version(self):
            return 1

    _emm = _with_plugin(Host)
    try:
        ctx = cuda.current_context()
        m = ctx.memhostalloc(100)
        del m
        gc.collect()
        assert len(ctx.memory_manager.deallocations._cons) == 1
        cuda.close()  # MisuseError (DV_ERR_BUSY) before the fix
        assert cuda._current.ctx is None
        assert ctx.handle is None  # destroyed, not retired (close() retires a busy context)
    finally:
        _drop_plugin(_emm)


def test_plugin_initialize_may_use_the_public_api():
    """As in Numba, the context is current when its memory manager's initialize() runs."""
    class Init(cuda.HostOnlyCUDAMemoryManager):
        def initialize(self):
            self.seen = cuda.current_context()
            self.scratch = cuda.device_array(16)

        def memalloc(self, size):
            return cuda.backend_memalloc(self.context, size)

        def get_memory_info(self):
            return cuda.MemoryInfo(free=0, total=0)

        def get_ipc_handle(self, memory):
            raise NotImplementedError

        @property
        def interface_version(self):
            return 1

    _emm = _with_plugin(Init)
    try:
        ctx = cuda.current_context()  # RecursionError before the fix
        assert ctx.memory_manager.seen is ctx
        assert ctx.memory_manager.scratch.shape == (16,)
        del ctx.memory_manager.scratch, ctx
    finally:
        _drop_plugin(_emm)


def test_failed_initialize_leaves_no_context():
    class Fails(cuda.HostOnlyCUDAMemoryManager):
        def initialize(self):
            raise RuntimeError("plug-in cannot start")

        def memalloc(self, size):
            raise MemoryError

        def get_memory_info(self):
            return cuda.MemoryInfo(free=0, total=0)

        def get_ipc_handle(self, memory):
            raise NotImplementedError

        @property
        def interface_version(self):
            return 1

    _emm = _with_plugin(Fails)
    try:
        with pytest.raises(RuntimeError, match="cannot start"):
            cuda.current_context()
        assert cuda._current.ctx is None
        assert not [c for c in cuda._current.live if c.handle]
    finally:
        _emm._memory_manager = None


class _HostPlugin(cuda.HostOnlyCUDAMemoryManager):
    """Device memory from the driver; pinned, mapped, managed memory devarray's own, their
    frees through the plug-in's queue."""

    def initialize(self):
        pass

    def memalloc(self, size):
        return cuda.backend_memalloc(self.context, size)

    def get_memory_info(self):
        return cuda.MemoryInfo(free=0, total=0)

    def get_ipc_handle(self, memory):
        raise NotImplementedError

    @property
    def interface_version(self):
        return 1


@pytest.mark.parametrize("make", ["memhostalloc", "memhostalloc_mapped", "mempin",
                                  "mempin_mapped", "memallocmanaged"])
def test_host_allocation_failure_leaks_nothing(make, monkeypatch):
    """When the Python object cannot be made over the new C array, its references (and the
    registration of mempin) are undone once each: no leak, no double release."""
    from devarray import _memory
    _emm = _with_plugin(_HostPlugin)
    try:
        ctx = cuda.current_context()
        if make == "memallocmanaged" and ctx.backend != "cuda":
            pytest.skip("managed memory: CUDA only")
        host = np.zeros(256, np.uint8)
        gc.collect()
        before = ctx.raw_stats().arrays.current

        def fail(h):
            raise RuntimeError("made to fail")
        monkeypatch.setattr(_memory, "_host_data", fail)
        monkeypatch.setattr(_memory, "_native", fail)
        with pytest.raises(RuntimeError, match="made to fail"):
            if make.startswith("memhostalloc"):
                ctx.memhostalloc(256, mapped=make.endswith("mapped"))
            elif make.startswith("mempin"):
                ctx.mempin(host, host.ctypes.data, host.nbytes, mapped=make.endswith("mapped"))
            else:
                ctx.memallocmanaged(256)
        monkeypatch.undo()
        gc.collect()
        ctx.memory_manager.deallocations.clear()
        assert ctx.raw_stats().arrays.current == before
        if make.startswith("mempin"):  # not left registered: pinning it again works
            p = ctx.mempin(host, host.ctypes.data, host.nbytes)
            del p
            gc.collect()
    finally:
        _drop_plugin(_emm)
