"""pip install . : the Python binding (python/devarray) with the library it loads.

Offline, with Debian's pip and setuptools (no download: the build uses the installed setuptools):

    python3 -m pip install --no-build-isolation .

The package's metadata is in pyproject.toml; this file adds the one build step: putting
libdevarray where the installed package loads it. The step is chosen by DEVARRAY_PIP_LIBRARY:

- unset or ``auto``: a libdevarray already installed (``make install``), found by pkg-config
  with this clone's version, is used where it is (its directory is recorded in
  devarray/_installed.py); otherwise the library is built with CMake (Release, the
  ``devarray`` target only) and copied into the package.
- ``build``: always build with CMake and copy it into the package.
- a path to a libdevarray.so: copy that file into the package (the tests use their build's).

CMake builds in DEVARRAY_BUILD_DIR/cmake (default: build-pip/ in the clone, so a second
install rebuilds only what changed); setuptools' own files go to DEVARRAY_BUILD_DIR too.

The binding's compiled per-call paths, devarray._speedups (python/devarray/_speedups.c), are
an optional extension module: built with the C compiler and Python's headers (Debian:
python3-dev) when they are there; when it does not compile, the binding is installed without
it and runs on ctypes alone (the same behaviour, slower per call), and the build says so.
"""
import os
import re
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

ROOT = os.path.dirname(os.path.abspath(__file__))
BUILD_DIR = os.environ.get("DEVARRAY_BUILD_DIR") or os.path.join(ROOT, "build-pip")


def project_version():
    with open(os.path.join(ROOT, "CMakeLists.txt")) as f:
        m = re.search(r"project\(devarray\s+VERSION\s+([0-9.]+)", f.read())
    if not m:
        raise RuntimeError("devarray: no version in CMakeLists.txt's project()")
    return m.group(1)


def installed_libdir(version):
    """The libdir of an installed libdevarray of this version (pkg-config), else None."""
    try:
        out = subprocess.run(["pkg-config", "--modversion", "--variable=libdir", "devarray"],
                             capture_output=True, text=True, check=False)
    except OSError:
        return None
    lines = out.stdout.split()
    if out.returncode != 0 or len(lines) != 2 or lines[0] != version:
        return None
    libdir = lines[1]
    return libdir if os.path.exists(os.path.join(libdir, "libdevarray.so.0")) else None


def cmake_build():
    """Build the shared library (Release) with CMake; returns the built file's path."""
    cmake = shutil.which("cmake")
    if cmake is None:
        raise RuntimeError("devarray: building libdevarray needs cmake (and a C compiler); or "
                           "set DEVARRAY_PIP_LIBRARY to a built libdevarray.so")
    bdir = os.path.join(BUILD_DIR, "cmake")
    jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") or str(os.cpu_count() or 2)
    print("devarray: building libdevarray with CMake in %s" % bdir, flush=True)
    subprocess.run([cmake, "--log-level=ERROR", "-S", ROOT, "-B", bdir,
                    "-DCMAKE_BUILD_TYPE=Release", "-DDV_BUILD_TESTS=OFF"], check=True)
    subprocess.run([cmake, "--build", bdir, "--target", "devarray", "-j", jobs], check=True)
    return os.path.join(bdir, "libdevarray.so")


class BuildWithLibrary(build_py):
    """build_py, then libdevarray into the package (or its installed directory recorded)."""

    def run(self):
        super().run()
        pkg = os.path.join(self.build_lib, "devarray")
        for stale in ("libdevarray.so", "_installed.py"):  # from an earlier build here
            if os.path.exists(os.path.join(pkg, stale)):
                os.remove(os.path.join(pkg, stale))
        choice = os.environ.get("DEVARRAY_PIP_LIBRARY", "auto")
        src = None
        if choice == "auto":
            libdir = installed_libdir(project_version())
            if libdir is not None:
                print("devarray: using the installed libdevarray in %s" % libdir)
                with open(os.path.join(pkg, "_installed.py"), "w") as f:
                    f.write("# Written by pip install: where libdevarray is installed.\n"
                            "LIBDIR = %r\n" % libdir)
                return
            src = cmake_build()
        elif choice == "build":
            src = cmake_build()
        else:
            src = choice
            if not os.path.isfile(src):
                raise RuntimeError("devarray: DEVARRAY_PIP_LIBRARY=%s: no such file" % src)
            print("devarray: using %s" % src)
        shutil.copyfile(os.path.realpath(src), os.path.join(pkg, "libdevarray.so"))


class OptionalBuildExt(build_ext):
    """build_ext where devarray._speedups failing to compile leaves the ctypes binding."""

    def build_extension(self, ext):
        try:
            super().build_extension(ext)
        except Exception as e:  # noqa: BLE001 -- any compiler failure: ctypes stays
            print("devarray: the compiled per-call paths (%s) were not built (%s); the "
                  "binding is installed without them and runs on ctypes alone"
                  % (ext.name, str(e).strip() or type(e).__name__), flush=True)


SPEEDUPS = Extension("devarray._speedups", ["python/devarray/_speedups.c", "python/devarray/_speedups_host.c"],
                     include_dirs=[os.path.join(ROOT, "include")],
                     extra_compile_args=["-std=c11"])


class BinaryDistribution(Distribution):
    """The wheel carries a shared library: platform-specific, installed in platlib."""

    def has_ext_modules(self):
        return True


# setuptools' build files and metadata go to BUILD_DIR too: nothing else is written in the clone.
os.makedirs(BUILD_DIR, exist_ok=True)
options = {"build": {"build_base": os.path.join(BUILD_DIR, "setuptools")},
           "egg_info": {"egg_base": BUILD_DIR}}

if __name__ == "__main__":
    if sys.version_info < (3, 8):
        sys.exit("devarray needs Python 3.8 or later")
    setup(version=project_version(), packages=["devarray"], package_dir={"": "python"},
          ext_modules=[SPEEDUPS],
          cmdclass={"build_py": BuildWithLibrary, "build_ext": OptionalBuildExt},
          distclass=BinaryDistribution,
          options=options)
