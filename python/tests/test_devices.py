"""Numba's device list (cuda.gpus), require_context, the driver object (driver.driver) and
DeviceNDArray.get_ipc_handle through the library (issue 25)."""
import ctypes
import gc
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import devarray
from devarray import driver
from devarray._lib import NotSupportedError

from conftest import BACKEND


@pytest.fixture
def closed():
    gc.collect()
    devarray.close()
    yield
    gc.collect()


def test_gpus_len_iter_and_ids(closed):
    n = len(devarray.gpus)
    assert n >= 1
    if BACKEND in ("host", "host-fast"):
        assert n == 1  # the simulator has one device
    ids = [g.id for g in devarray.gpus]
    assert ids == list(range(n))
    assert devarray.gpus[-1].id == n - 1
    with pytest.raises(IndexError, match="device"):
        devarray.gpus[n]


def test_gpus_current_and_context_manager(closed):
    assert devarray.gpus.current is None
    with devarray.gpus[0] as g:
        assert g.id == 0
        cur = devarray.gpus.current
        assert cur is not None and int(cur.id) == 0
        assert devarray.current_context().device_id == 0
    # a context was made by the with; it stays, on device 0
    assert devarray.gpus.current.id == 0


def test_gpus_restores_previous_device(closed):
    if len(devarray.gpus) < 2:
        pytest.skip("one device: nothing to switch to")
    devarray.select_device(1)
    with devarray.gpus[0]:
        assert devarray.gpus.current.id == 0
    assert devarray.gpus.current.id == 1
    devarray.close()


def test_require_context(closed):
    seen = []

    @devarray.require_context
    def f(x):
        """doc"""
        seen.append(devarray.gpus.current)
        return x * 2

    assert f(21) == 42 and f.__doc__ == "doc"
    assert seen[0] is not None


def test_driver_object(ctx):
    d = driver.driver
    assert d.get_device_count() == len(devarray.gpus)
    free, total = ctypes.c_size_t(), ctypes.c_size_t()
    assert d.cuMemGetInfo(ctypes.byref(free), ctypes.byref(total)) is None
    mi = ctx.get_memory_info()
    assert total.value == mi.total and 0 < free.value <= total.value
    p = ctypes.c_size_t()
    d.cuMemGetInfo(ctypes.pointer(p), ctypes.byref(total))
    assert p.value > 0
    with pytest.raises(TypeError, match="byref"):
        d.cuMemGetInfo(object(), ctypes.byref(total))
    with pytest.raises(AttributeError, match="only get_device_count and cuMemGetInfo"):
        d.cuCtxCreate
    assert not hasattr(d, "cuDevicePrimaryCtxRetain")


_CHILD = textwrap.dedent("""
    import multiprocessing as mp, sys
    import numpy as np
    sys.path.insert(0, sys.argv[1])
    import devarray

    def child(h, q):
        try:
            a = h.open()
            q.put(a.copy_to_host().tolist())
            a2 = a[1:]  # a view: closing unmaps once the views are gone
            del a, a2
            h.close()
            try:
                h.close()
            except ValueError as e:
                q.put(str(e))
        except Exception as e:  # report it to the parent
            q.put(repr(e))

    if __name__ == "__main__":
        d = devarray.to_device(np.arange(6.0))
        h = d.get_ipc_handle()
        try:
            h.open()
            print("opened in the exporting process")
        except devarray.MisuseError as e:
            print("refused:", e.name)
        ctx = mp.get_context("spawn")
        q = ctx.Queue()
        p = ctx.Process(target=child, args=(h, q))
        p.start()
        print(q.get())
        print(q.get())
        p.join()
        print("exit", p.exitcode)
""")


def test_ipc_handle_opens_in_another_process(tmp_path, ctx):
    if ctx.backend == "opencl":
        with pytest.raises(NotSupportedError, match="get_ipc_handle"):
            devarray.to_device(np.arange(3)).get_ipc_handle()
        return
    if ctx.backend != "host":
        pytest.skip("the two-process check runs on the host simulator (backend %s)"
                    % ctx.backend)
    script = tmp_path / "ipc_child.py"
    script.write_text(_CHILD)
    pkg = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    env = dict(os.environ, DV_HOST_IPC="on", DV_BACKEND="host")
    r = subprocess.run([sys.executable, str(script), pkg], env=env, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines == ["refused: DV_ERR_MISUSE", "[0.0, 1.0, 2.0, 3.0, 4.0, 5.0]",
                     "IpcArrayHandle.close: the handle is not open", "exit 0"], r.stdout


def test_ipc_without_host_ipc_is_not_supported(ctx):
    if ctx.backend != "host" or ctx.option("host_ipc") in ("on", "1", "true"):
        pytest.skip("the host simulator with host_ipc off only (%s, %r)"
                    % (ctx.backend, ctx.option("host_ipc")))
    with pytest.raises(NotSupportedError):
        devarray.to_device(np.arange(3)).get_ipc_handle()
