"""The shim that runs Numba's memory tests on devarray (numba_suite/numba_shim.py): numba.cuda and
its cudadrv modules resolve to devarray's objects, Numba's testing helpers see no simulator, a
name devarray lacks fails clearly, assignments reach devarray. Each case runs in a fresh
interpreter (the shim replaces numba.cuda for the whole process). Skipped without Numba."""
import os
import subprocess
import sys
import textwrap

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SUITE = os.path.join(HERE, "numba_suite")
PYTHON_DIR = os.path.dirname(HERE)


def run(code, **env_extra):
    env = dict(os.environ)
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    env.update(env_extra)
    env["PYTHONPATH"] = os.pathsep.join([SUITE, PYTHON_DIR])
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module", autouse=True)
def needs_numba():
    r = run("import numba")
    if r.returncode != 0:
        pytest.skip("numba unavailable: %s" % r.stderr.strip().splitlines()[-1:])


def check(code, **env):
    r = run(code, **env)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def test_numba_cuda_is_devarray():
    check("""
        import numba_shim, devarray
        cuda = numba_shim.install()
        assert numba_shim.install() is cuda          # idempotent
        from numba import cuda as c2
        import numba.cuda.cudadrv.driver as drv
        from numba.cuda.cudadrv import devicearray, devices
        assert c2 is cuda
        assert cuda.to_device is devarray.to_device
        assert cuda.stream is devarray.stream
        assert cuda.cudadrv.driver is drv
        assert drv.Stream is devarray.Stream
        assert devicearray.DeviceNDArray is devarray.DeviceNDArray
        assert devices.get_context is devarray.current_context   # Numba's own identity
        assert devices.reset is devarray.close
        from numba.core import config
        assert config.ENABLE_CUDASIM == 0
        d = cuda.to_device([1.0, 2.0, 3.0])
        assert list(d.copy_to_host()) == [1.0, 2.0, 3.0]
    """)


def test_testing_helpers_see_no_simulator():
    out = check("""
        import numba_shim
        numba_shim.install()
        from numba.cuda import testing
        @testing.skip_on_cudasim("on the simulator")
        def f():
            pass
        assert not getattr(f, "__unittest_skip__", False)
        @testing.skip_unless_cudasim("needs the simulator")
        def g():
            pass
        assert g.__unittest_skip__
        assert issubclass(testing.ContextResettingTestCase, testing.CUDATestCase)
        print("ok")
    """)
    assert "ok" in out


def test_missing_name_fails_clearly():
    out = check("""
        import numba_shim
        numba_shim.install()
        from numba import cuda
        try:
            cuda.declare_device  # a device function from PTX: devarray has none
        except AttributeError as e:
            print(e)
        else:
            raise SystemExit("cuda.declare_device resolved")
        try:
            from numba.cuda.cudadrv.driver import no_such_name  # noqa: F401
        except ImportError as e:
            print("import:", e)
        else:
            raise SystemExit("no_such_name resolved")
    """)
    assert "numba.cuda.declare_device: devarray has no such name" in out
    assert "looked in devarray" in out
    assert "import: cannot import name 'no_such_name'" in out


def test_assignment_reaches_devarray():
    check("""
        import numba_shim, devarray
        numba_shim.install()
        import numba.cuda.cudadrv.driver as drv
        home, saved = drv._shim_lookup("Stream")  # the devarray module it resolves from
        assert saved is devarray.Stream
        drv.Stream = 42                  # a name devarray has: set on that module
        assert getattr(home, "Stream") == 42 and drv.Stream == 42
        drv.Stream = saved
        assert getattr(home, "Stream") is devarray.Stream
        drv._shim_probe = 1              # a name it has not: stays on the shim
        assert drv._shim_probe == 1 and not hasattr(devarray, "_shim_probe")
    """)


def test_refuses_after_real_numba_cuda_or_with_simulator():
    out = check("""
        import numba_shim
        from numba import cuda            # Numba's simulator (NUMBA_ENABLE_CUDASIM=1)
        try:
            numba_shim.install()
        except RuntimeError as e:
            print(e)
    """, NUMBA_ENABLE_CUDASIM="1")
    assert "numba.cuda was imported before" in out
    out = check("""
        import numba_shim
        try:
            numba_shim.install()
        except RuntimeError as e:
            print(e)
    """, NUMBA_ENABLE_CUDASIM="1")
    assert "NUMBA_ENABLE_CUDASIM is set" in out
