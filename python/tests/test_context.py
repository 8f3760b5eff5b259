"""Backend and device selection, close(), and the library search (in child processes: they
change the process's current context)."""
import os
import subprocess
import sys

import devarray as cuda

HERE = os.path.dirname(os.path.abspath(__file__))


def run(code, **env):
    e = dict(os.environ, PYTHONPATH=os.path.join(HERE, ".."), **env)
    r = subprocess.run([sys.executable, "-c", code], env=e, capture_output=True, text=True,
                       timeout=120)
    return r.returncode, r.stdout.strip(), r.stderr.strip()


def test_select_backend_and_close():
    code = """
import gc, numpy as np, devarray as cuda
c = cuda.select_backend("host")
assert c.backend == "host" and cuda.current_context() is c
d = cuda.to_device(np.arange(3.0))
cuda.close()  # an array lives: the context is retired, not destroyed
assert c.handle is not None and cuda._context._retired == [c]
assert list(d.copy_to_host()) == [0.0, 1.0, 2.0]  # still works on its context
c2 = cuda.current_context()
assert c2 is not c
del d
gc.collect()  # the last array gone: the retired context is destroyed
assert c.handle is None and cuda._context._retired == []
cuda.close()
assert cuda.current_context() is not c2
ok, why = cuda.backend_available("opencl")
if ok:
    assert cuda.select_backend("opencl").backend == "opencl"
    assert cuda.select_device(0).backend == "opencl"
try:
    cuda.select_backend("nosuch")
    raise SystemExit("unknown backend accepted")
except cuda.DevarrayError as e:
    print(e.name)
assert cuda.current_context().backend in ("host", "opencl")  # the earlier choice stands
"""
    rc, out, err = run(code)
    assert rc == 0, err
    assert out.startswith("DV_ERR_")


def test_select_device_host():
    """The host simulator has one device, 0: select_device of another raises (issue 22 #13)."""
    code = """
import devarray as cuda
c = cuda.select_backend("host")
assert cuda.select_device(0).backend == "host"
for bad in (99, 1, -1):
    try:
        cuda.select_device(bad)
        raise SystemExit("select_device(%d) opened a %s context" % (bad, cuda.current_context().backend))
    except cuda.DevarrayError as e:
        assert str(bad) in str(e), str(e)
        print(e.name)
c = cuda.current_context()  # the earlier choice stands
assert c.backend == "host" and c.device_id == 0
"""
    rc, out, err = run(code, DV_LOG_LEVEL="off")
    assert rc == 0, err
    assert out.split() == ["DV_ERR_BACKEND_UNAVAILABLE"] * 2 + ["DV_ERR_INVALID_ARGUMENT"]


def test_library_search():
    rc, out, err = run("import devarray; print(devarray.library_path)")
    assert rc == 0, err
    assert os.path.exists(out)
    rc, out, err = run("import devarray", DEVARRAY_LIBRARY="/nonexistent/libdevarray.so")
    assert rc != 0 and "DEVARRAY_LIBRARY" in err


def test_backend_from_environment(ctx):
    want = os.environ.get("DV_BACKEND", "host")
    if want != "auto":
        assert ctx.backend == want
    assert "host" in cuda.list_backends()


def test_async_manager_refused_on_the_simulator():
    """memory_manager=async (the CUDA/HIP driver's stream-ordered pool, as Numba's
    NUMBA_CUDA_MEMORY_MANAGER picks a manager per process) on the host simulator: the context
    is refused, naming the manager to use instead."""
    code = """
import devarray as cuda
try:
    cuda.select_backend("host")
except Exception as e:
    assert getattr(e, "name", "") == "DV_ERR_NOT_SUPPORTED", e
    assert "memory_manager=pool" in str(e), e
    print("refused")
else:
    raise SystemExit("the async manager was accepted on the host simulator")
"""
    rc, out, err = run(code, DV_MEMORY_MANAGER="async")
    assert rc == 0, err
    assert out.endswith("refused")
