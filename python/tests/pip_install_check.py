"""pip_install_check.py SOURCE WORK (--library PATH | --build): `pip install SOURCE` into a fresh
virtual environment, offline, as README.md says; `import devarray` from another directory and a
to_device / copy_to_host round trip with the installed copy; `pip uninstall devarray`; nothing
of it left in the environment, nothing written into SOURCE.

--library PATH installs that built libdevarray.so into the package (DEVARRAY_PIP_LIBRARY=PATH);
--build makes setup.py build the library with CMake (DEVARRAY_PIP_LIBRARY=build) in
WORK/build/cmake, which persists, so a second run rebuilds only what changed. Exit 77, with
the reason, when venv, pip, setuptools or wheel is missing from /usr/bin/python3.
"""
import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig

ROUND_TRIP = r"""
import os, sys
import numpy as np
import devarray
venv = os.path.realpath(sys.prefix)
assert os.path.realpath(devarray.__file__).startswith(venv + os.sep), devarray.__file__
lib = os.path.realpath(devarray.library_path)
pkg = os.path.dirname(os.path.realpath(devarray.__file__))
assert lib == os.path.join(pkg, "libdevarray.so"), (lib, pkg)
a = np.arange(12, dtype=np.float64).reshape(3, 4)
d = devarray.to_device(a)
assert d.shape == (3, 4) and d.dtype == np.float64
back = d[:, 1].copy_to_host()
assert (back == a[:, 1]).all(), back
# the compiled per-call paths: built and loaded from the package wherever Python.h is there
import sysconfig
from devarray import _lib
if os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")):
    assert _lib.speedups is not None, "devarray._speedups was not built or not loaded"
    assert os.path.dirname(os.path.realpath(_lib.speedups.__file__)) == pkg, _lib.speedups
    d2 = devarray.device_array((2, 3), np.int32)
    assert type(d2).__mro__[1] is _lib.speedups._ArrayBase and d2.shape == (2, 3)
    speed = "compiled per-call paths"
else:
    speed = "ctypes alone (no Python.h)"
print("devarray %s from %s (library %s, %s): round trip ok"
      % (devarray.__version__, pkg, lib, speed))
"""


def skip(why):
    print("SKIPPED: python.pip_install: " + why)
    sys.exit(77)


def run(cmd, env, cwd):
    shown = cmd[:cmd.index("-c") + 1] + ["..."] if "-c" in cmd else cmd
    print("+ " + " ".join(shown), flush=True)
    return subprocess.run(cmd, env=env, cwd=cwd, check=False).returncode


def listing(d):
    return set(os.listdir(d)) if os.path.isdir(d) else set()


def main():
    if len(sys.argv) < 4 or sys.argv[3] not in ("--library", "--build"):
        sys.exit(__doc__.splitlines()[0])
    source, work, mode = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2]), sys.argv[3]
    # Looked for, not imported: pip and setuptools each patch distutils on import.
    for mod in ("venv", "pip", "setuptools", "wheel"):
        if importlib.util.find_spec(mod) is None:
            skip("%s has no %s module (Debian: python3-venv, python3-pip, python3-setuptools, "
                 "python3-wheel)" % (sys.executable, mod))
    try:
        import numpy  # noqa: F401
    except ImportError:
        skip("NumPy is missing (python3-numpy)")

    venv = os.path.join(work, "venv")
    elsewhere = os.path.join(work, "elsewhere")
    shutil.rmtree(venv, ignore_errors=True)
    shutil.rmtree(elsewhere, ignore_errors=True)
    os.makedirs(elsewhere)
    base = {k: v for k, v in os.environ.items()
            if k not in ("DEVARRAY_LIBRARY", "PYTHONPATH", "PYTHONHOME", "LD_PRELOAD",
                         "DEVARRAY_SPEEDUPS", "DEVARRAY_EXPECT_SPEEDUPS")}
    base["DEVARRAY_BUILD_DIR"] = os.path.join(work, "build")
    base["DEVARRAY_PIP_LIBRARY"] = sys.argv[4] if mode == "--library" else "build"
    if mode == "--library" and not os.path.isfile(sys.argv[4]):
        print("FAIL: no library at %s" % sys.argv[4])
        return 1
    # Debian's pip, setuptools and wheel (and NumPy) come from the system site: nothing is
    # downloaded (--no-index, --no-build-isolation).
    import venv as venv_mod
    venv_mod.create(venv, system_site_packages=True, with_pip=False)
    py = os.path.join(venv, "bin", "python")
    site = subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['platlib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    before_site = listing(site)
    before_src = (listing(source), listing(os.path.join(source, "python")))

    failures = []
    pip = [py, "-m", "pip", "--disable-pip-version-check", "--no-cache-dir"]
    if run(pip + ["install", "--no-index", "--no-build-isolation", source], base, elsewhere):
        print("FAIL: pip install")
        return 1
    added = sorted(listing(site) - before_site)
    print("installed into %s: %s" % (site, ", ".join(added)))
    if not any(n == "devarray" for n in added):
        failures.append("no devarray package in site-packages")

    # Import from another directory with the library the package carries: no DEVARRAY_LIBRARY,
    # no PYTHONPATH (LD_PRELOAD stays where a sanitized library needs its runtime).
    env = dict(base)
    if "LD_PRELOAD" in os.environ:
        env["LD_PRELOAD"] = os.environ["LD_PRELOAD"]
    env["DV_BACKEND"] = "host"
    if run([py, "-c", ROUND_TRIP], env, elsewhere):
        failures.append("import devarray / round trip with the installed copy failed")

    if run(pip + ["uninstall", "-y", "devarray"], base, elsewhere):
        failures.append("pip uninstall failed")
    left = sorted(listing(site) - before_site)
    if left:
        failures.append("left in site-packages after uninstall: %s" % ", ".join(left))
    r = subprocess.run([py, "-c", "import devarray"], env=env, cwd=elsewhere,
                       capture_output=True, text=True, check=False)
    if r.returncode == 0:
        failures.append("import devarray still works after uninstall")
    after_src = (listing(source), listing(os.path.join(source, "python")))
    if after_src != before_src:
        new = (after_src[0] - before_src[0]) | (after_src[1] - before_src[1])
        failures.append("pip install wrote into the source tree: %s" % ", ".join(sorted(new)))
    shutil.rmtree(venv, ignore_errors=True)
    for f in failures:
        print("FAIL: " + f)
    if not failures:
        print("pip install (%s), import from %s, uninstall: ok"
              % ("CMake build" if mode == "--build" else "prebuilt library", elsewhere))
    return 1 if failures else 0


if __name__ == "__main__":
    sysconfig.get_paths()  # fail early on a broken interpreter
    sys.exit(main())
