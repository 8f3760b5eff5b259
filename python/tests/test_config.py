"""devarray.config (issue 25 #9): CUDA_DEALLOCS_COUNT / CUDA_DEALLOCS_RATIO change the
pending-deallocation limits of every live context and of later ones; track(module) makes
another module's assignments (Numba's numba.core.config) do the same."""
import ctypes
import gc
import math
import types

import numpy as np
import pytest

import devarray as cuda
from devarray import config


def _option(name):
    buf = ctypes.create_string_buffer(64)
    cuda._lib.check(cuda._clib.dv_option_get(name.encode(), buf, len(buf), None))
    return buf.value.decode()


@pytest.fixture(autouse=True)
def restore_limits():
    count, ratio = config.CUDA_DEALLOCS_COUNT, config.CUDA_DEALLOCS_RATIO
    yield
    config.CUDA_DEALLOCS_COUNT = count
    config.CUDA_DEALLOCS_RATIO = ratio


def _flushed(ctx):
    gc.collect()
    for _ in range(3):  # a flush may release objects whose own frees queue
        ctx.deallocations.clear()
    assert len(ctx.deallocations) == 0


def test_module_and_starting_values(ctx):
    import devarray.config as by_import
    assert by_import is config and isinstance(config, types.ModuleType)
    assert config.CUDA_DEALLOCS_COUNT == int(_option("max_pending_deallocs_count"))
    assert config.CUDA_DEALLOCS_RATIO == float(_option("max_pending_deallocs_ratio"))
    assert ctx.deallocations.limits == (config.CUDA_DEALLOCS_COUNT, config.CUDA_DEALLOCS_RATIO)


def test_count_applies_to_the_live_context(ctx):
    _flushed(ctx)
    config.CUDA_DEALLOCS_COUNT = 3
    assert ctx.deallocations.limits[0] == 3
    assert ctx.option("max_pending_deallocs_count") == "3"
    for i in range(3):  # Numba's test_max_pending_count with the new limit
        cuda.to_device(np.arange(1))
        gc.collect()
        assert len(ctx.deallocations) == i + 1
    cuda.to_device(np.arange(1))
    gc.collect()
    assert len(ctx.deallocations) == 0


def test_lower_count_flushes_at_the_next_release(ctx):
    _flushed(ctx)
    with cuda.defer_cleanup():
        arrs = [cuda.device_array(16, np.uint8) for _ in range(5)]
        del arrs
        gc.collect()
    assert len(ctx.deallocations) == 5
    config.CUDA_DEALLOCS_COUNT = 2
    assert len(ctx.deallocations) == 5  # the assignment alone flushes nothing
    cuda.device_array(16, np.uint8)
    gc.collect()
    assert len(ctx.deallocations) == 0


def test_ratio_as_numba_test_max_pending_bytes(ctx):
    _flushed(ctx)
    mi = ctx.get_memory_info()
    max_pending = 10 ** 6
    config.CUDA_DEALLOCS_COUNT = 1000
    config.CUDA_DEALLOCS_RATIO = max_pending / mi.total
    deallocs = ctx.memory_manager.deallocations
    assert abs(deallocs._max_pending_bytes - max_pending) <= 1
    cuda.to_device(np.ones(max_pending // 2, dtype=np.int8))
    gc.collect()
    assert len(deallocs) == 1
    cuda.to_device(np.ones(deallocs._max_pending_bytes - deallocs._size, dtype=np.int8))
    gc.collect()
    assert len(deallocs) == 2
    cuda.to_device(np.ones(1, dtype=np.int8))
    gc.collect()
    assert len(deallocs) == 0


@pytest.mark.parametrize("name,value,exc,words", [
    ("CUDA_DEALLOCS_COUNT", -1, ValueError, "between 0 and"),
    ("CUDA_DEALLOCS_COUNT", 10 ** 9 + 1, ValueError, "between 0 and"),
    ("CUDA_DEALLOCS_COUNT", 2.5, TypeError, "must be an integer"),
    ("CUDA_DEALLOCS_COUNT", "3", TypeError, "must be an integer"),
    ("CUDA_DEALLOCS_COUNT", True, TypeError, "must be an integer"),
    ("CUDA_DEALLOCS_RATIO", -0.1, ValueError, "between 0 and 1"),
    ("CUDA_DEALLOCS_RATIO", 1.5, ValueError, "between 0 and 1"),
    ("CUDA_DEALLOCS_RATIO", math.nan, ValueError, "between 0 and 1"),
    ("CUDA_DEALLOCS_RATIO", "0.1", TypeError, "must be a real number"),
])
def test_bad_values_change_nothing(ctx, name, value, exc, words):
    config.CUDA_DEALLOCS_COUNT = 7
    config.CUDA_DEALLOCS_RATIO = 0.25
    with pytest.raises(exc, match=words):
        setattr(config, name, value)
    assert (config.CUDA_DEALLOCS_COUNT, config.CUDA_DEALLOCS_RATIO) == (7, 0.25)
    assert ctx.deallocations.limits == (7, 0.25)


def test_numpy_scalars_and_edges(ctx):
    config.CUDA_DEALLOCS_COUNT = np.int64(4)
    config.CUDA_DEALLOCS_RATIO = np.float32(0.5)
    assert ctx.deallocations.limits == (4, 0.5)
    assert type(config.CUDA_DEALLOCS_COUNT) is int
    config.CUDA_DEALLOCS_COUNT = 0
    config.CUDA_DEALLOCS_RATIO = 1
    assert ctx.deallocations.limits == (0, 1.0)


def test_future_contexts_get_the_limits(ctx):
    config.CUDA_DEALLOCS_COUNT = 5
    config.CUDA_DEALLOCS_RATIO = 0.125
    gc.collect()
    cuda.close()
    new = cuda.current_context()
    assert new is not ctx
    assert new.deallocations.limits == (5, 0.125)
    other = cuda.Context(new.backend)  # a second live context follows assignments too
    try:
        config.CUDA_DEALLOCS_COUNT = 6
        assert other.deallocations.limits == (6, 0.125)
        assert new.deallocations.limits == (6, 0.125)
    finally:
        cuda._clib.dv_context_destroy(other.handle)
        other.handle = None


def test_track_forwards_another_module(ctx):
    numba_config = types.ModuleType("fake_numba_config")
    numba_config.CUDA_DEALLOCS_COUNT = 99
    numba_config.CUDA_DEALLOCS_RATIO = 0.9
    numba_config.OTHER = 1
    config.CUDA_DEALLOCS_COUNT = 8
    assert config.track(numba_config) is numba_config
    # the module reads what devarray uses
    assert numba_config.CUDA_DEALLOCS_COUNT == 8
    assert numba_config.CUDA_DEALLOCS_RATIO == config.CUDA_DEALLOCS_RATIO
    numba_config.CUDA_DEALLOCS_RATIO = 0.0625
    assert ctx.deallocations.limits == (8, 0.0625)
    assert config.CUDA_DEALLOCS_RATIO == 0.0625
    config.CUDA_DEALLOCS_COUNT = 9  # and devarray's assignments show in the module
    assert numba_config.CUDA_DEALLOCS_COUNT == 9
    numba_config.OTHER = 2  # other names are plain attributes
    assert numba_config.OTHER == 2 and ctx.deallocations.limits == (9, 0.0625)
    with pytest.raises(ValueError):
        numba_config.CUDA_DEALLOCS_RATIO = 2.0
    assert numba_config.CUDA_DEALLOCS_RATIO == 0.0625
    assert ctx.deallocations.limits == (9, 0.0625)
    config.track(numba_config)  # again: no second layer
    assert type(type(numba_config)).__name__ == "type"
    assert type(numba_config).__mro__[1] is types.ModuleType
    with pytest.raises(TypeError):
        config.track(object())
