"""Memory hooks, scoped statistics, the out-of-memory handler and tracking in the binding (issue
38 item 3): memory_hook(fn), memory_scope(), set_oom_handler(fn), enable_tracking and
live_handles with the Python line of each handle. Runs on every backend run_tests.py is given."""

import gc
import os
import subprocess
import sys

import numpy as np
import pytest

import devarray as cuda

_PKG_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(cuda.__file__)))


def _child(prog, **env):
    """Run prog in a fresh interpreter with this package and the environment's additions."""
    e = dict(os.environ, **env)
    e["PYTHONPATH"] = _PKG_PARENT + os.pathsep + e.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-c", prog], env=e, capture_output=True, text=True)


def test_hook_sees_alloc_and_free():
    seen = []
    with cuda.memory_hook(seen.append):
        d = cuda.to_device(np.arange(100, dtype=np.float32))
        p = cuda.pinned_array(16, dtype=np.int32)
        del d, p
        gc.collect()
    kinds = [(e.event, e.memory, e.nbytes) for e in seen]
    assert ("alloc", "device", 400) in kinds
    assert ("free", "device", 400) in kinds
    assert ("alloc", "pinned", 64) in kinds
    assert ("free", "pinned", 64) in kinds
    alloc = next(e for e in seen if e.event == "alloc" and e.memory == "device")
    free = next(e for e in seen if e.event == "free" and e.memory == "device")
    assert alloc.address == free.address and alloc.address != 0
    assert alloc.manager in ("direct", "pool")
    # removed at the end of the block: no more calls
    n = len(seen)
    cuda.device_array(10)
    gc.collect()
    assert len(seen) == n


def test_hook_exception_is_dropped(capsys):
    def bad(ev):
        raise RuntimeError("hook failed")
    with cuda.memory_hook(bad):
        a = cuda.device_array(8)
    del a
    assert "hook failed" in capsys.readouterr().err


def test_scopes_nest():
    with cuda.memory_scope() as outer:
        a = cuda.device_array(250, dtype=np.float32)
        with cuda.memory_scope() as inner:
            b = cuda.device_array(125, dtype=np.float32)
            del a
            gc.collect()
    assert inner.stats.device.nbytes == (-500, 500, 500)
    assert inner.stats.device.allocations.total == 1
    assert outer.stats.device.nbytes == (500, 1500, 1500)
    del b


def test_oom_handler_spills():
    # a child process on the host simulator, whose capacity is an option: 16 MiB
    prog = r'''
import numpy as np, devarray as cuda
held = [cuda.device_array(10 << 20, dtype=np.uint8)]
calls = []
def spill(nbytes, attempt):
    calls.append((nbytes, attempt))
    if held:
        held.pop()
        import gc; gc.collect()
        return True
    return False
cuda.set_oom_handler(spill, max_retries=2)
b = cuda.device_array(10 << 20, dtype=np.uint8)
assert calls == [(10 << 20, 1)], calls
try:
    cuda.device_array(10 << 20, dtype=np.uint8)
except cuda.DevarrayError as e:
    assert "out-of-memory handler was asked 1 time" in str(e), e
else:
    raise AssertionError("no out-of-memory")
print("ok")
'''
    r = _child(prog, DV_HOST_MEMORY="16M", DV_BACKEND="host")
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stdout + r.stderr


def test_tracking_names_the_python_line():
    prog = r'''
import numpy as np, devarray as cuda
assert cuda.tracking_enabled()
d = cuda.to_device(np.zeros((3, 4), np.float32))  # MADE HERE
live = cuda.live_handles()
mine = [h for h in live if h.get("what") == "float32 (3, 4)"]
assert len(mine) == 1, live
print(mine[0]["origin"])
snap = cuda.memory_snapshot()
assert any(h.get("what") == "float32 (3, 4)" for h in snap["tracking"]["live"]), snap
'''
    r = _child(prog, DV_TRACK="1")
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip().startswith("<string>:4 (<module>)"), r.stdout


def test_tracking_off_by_default():
    if cuda.tracking_enabled():
        pytest.skip("DV_TRACK is set for this run")
    cuda.device_array(4)
    assert cuda.live_handles() == []


def test_memory_pool_limit_cupy_names():
    """CuPy #7678 (512 MiB then 768 MiB under a 1 GiB limit), scaled to 4 and 6 MiB under 8:
    the freed block's memory is given back instead of failing the second request; past the
    limit, an error that says so."""
    pool = cuda.get_default_memory_pool()
    old = pool.get_limit()
    try:
        pool.set_limit(size=8 << 20)
        assert pool.get_limit() == 8 << 20
        a = cuda.device_array(4 << 20, dtype=np.uint8)
        del a
        gc.collect()
        b = cuda.device_array(6 << 20, dtype=np.uint8)
        assert pool.used_bytes() >= 6 << 20
        with pytest.raises(cuda.DevarrayError, match="memory limit of 8388608 bytes"):
            cuda.device_array(4 << 20, dtype=np.uint8)
        del b
        gc.collect()
        pool.free_all_blocks()
        with pytest.raises(ValueError):
            pool.set_limit(size=1, fraction=0.5)
        pool.set_limit(fraction=0.5)
        assert pool.get_limit() > 0
    finally:
        pool.set_limit(size=old)
