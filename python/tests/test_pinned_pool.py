"""The pinned pool from Python (docs/pinned_pool.md): pinned_array's memory reused after a
release, CuPy's PinnedMemoryPool names to inspect and configure it, and a released array's
memory that a queued copy still reads not handed out before the copy has run."""
import gc

import numpy as np
import pytest

import devarray
from devarray._lib import NotSupportedError


def _flush(ctx):
    gc.collect()
    ctx.deallocations.clear()  # Numba's name: the queued frees run (blocks back to the pool)


@pytest.fixture
def pool(ctx):
    p = devarray.get_default_pinned_memory_pool()
    if not p.enabled:
        with pytest.raises(NotSupportedError):
            p.set_limit(1 << 20)
        assert p.total_bytes() == 0 and p.n_free_blocks() == 0
        pytest.skip("the pinned pool is off (DV_PINNED_POOL)")
    _flush(ctx)
    return p


def test_names(ctx):
    p = devarray.get_default_pinned_memory_pool()
    assert isinstance(p, devarray.PinnedMemoryPool)
    assert p is devarray.get_default_pinned_memory_pool()
    st = p.stats()
    assert set(st) >= {"enabled", "held", "in_use", "cached", "pending", "free_blocks", "hits",
                       "misses", "uncached", "waits", "releases", "reserve", "limit"}
    assert st["held"]["current"] == p.total_bytes()


def test_reuse(ctx, pool):
    a = devarray.pinned_array(1000, dtype=np.float64)  # 8000 bytes: a block of 8192
    addr = a.ctypes.data
    assert pool.used_bytes() >= 8192
    hits = pool.stats()["hits"]
    del a
    _flush(ctx)
    assert pool.free_bytes() >= 8192
    b = devarray.pinned_array(1010, dtype=np.float64)  # the same class
    assert b.ctypes.data == addr
    assert pool.stats()["hits"] == hits + 1
    del b
    _flush(ctx)
    pool.free_all_blocks()
    assert pool.n_free_blocks() == pool.stats()["free_blocks"]
    if pool.stats()["reserve"] == 0:
        assert pool.n_free_blocks() == 0
        assert pool.total_bytes() == pool.used_bytes()


def test_limit(ctx, pool):
    old = pool.get_limit()
    try:
        pool.set_limit(1 << 20)
        assert pool.get_limit() == 1 << 20
        big = devarray.pinned_array(2 << 20, dtype=np.uint8)  # past the limit: outside the pool
        assert pool.stats()["uncached"] >= 1
        big[:] = 7
        assert int(big[-1]) == 7
        del big
        with pytest.raises(ValueError):
            pool.set_limit(-1)
    finally:
        pool.set_limit(old)
    assert pool.get_limit() == old


def test_order_on_stream(ctx, pool):
    n = 1 << 16
    s = devarray.stream()
    h = devarray.pinned_array(n, dtype=np.uint8)
    h[:] = 0x11
    d = devarray.to_device(h, stream=s)  # queued on s, reading h
    del h
    _flush(ctx)
    h2 = devarray.pinned_array(n, dtype=np.uint8)
    h2[:] = 0x22  # were it h's memory before the copy ran, the copy would read this
    s.synchronize()
    assert (d.copy_to_host() == 0x11).all()
    del h2, d
    _flush(ctx)
