"""Loading libdevarray and declaring its C functions (ctypes).

The library is found, in this order, through the DEVARRAY_LIBRARY
environment variable (a path to libdevarray.so), inside the package (where
``pip install`` puts it), next to an installed copy of this package (the
library directory recorded at install time, then the
``lib`` directory three levels above the package), in a source checkout the
release build (``build-rel/``, which `make run` makes), then the system loader
(``ctypes.util.find_library("devarray")`` and ``libdevarray.so.0``).

Then the compiled per-call paths, ``devarray._speedups``, when found: next to this file, next
to the loaded library, or at DEVARRAY_SPEEDUPS (a path; ``off`` keeps ctypes alone).
``speedups`` is that module, or None.
"""

import ctypes
import ctypes.util
import importlib.machinery
import importlib.util
import os
import sys

from ctypes import c_void_p

# The structs, prototypes and constants the binding mirrors of devarray.h (checked against
# it: see _abi).
from . import _abi
from ._abi import (dv_counter, dv_stats, dv_field_desc, dv_index, dv_dim3,  # noqa: F401
                   dv_launch_config, dv_arg, dv_kernel_param, FUNCTIONS as _PROTOS, LEAN as _LEAN)

__all__ = ["lib", "DevarrayError", "check", "library_path", "speedups"]


def _candidates():
    env = os.environ.get("DEVARRAY_LIBRARY")
    if env:
        yield env
        return
    here = os.path.dirname(os.path.abspath(__file__))
    yield os.path.join(here, "libdevarray.so")  # pip install (setup.py) copies it here
    try:
        from . import _installed  # optional: only `cmake --install` writes this module
        yield os.path.join(_installed.LIBDIR, "libdevarray.so.0")
        yield os.path.join(_installed.LIBDIR, "libdevarray.so")
    except ImportError:
        pass
    for up in ("../../..", "../../../.."):
        d = os.path.normpath(os.path.join(here, up))
        yield os.path.join(d, "libdevarray.so.0")
        yield os.path.join(d, "libdevarray.so")
    # A source checkout (python/devarray): the release build `make run` makes.
    yield os.path.normpath(os.path.join(here, "..", "..", "build-rel", "libdevarray.so.0"))
    found = ctypes.util.find_library("devarray")
    if found:
        yield found
    yield "libdevarray.so.0"


def _load():
    tried = []
    for path in _candidates():
        if os.sep in path and not os.path.exists(path):
            tried.append(path + " (missing)")
            continue
        try:
            return ctypes.CDLL(path), path
        except OSError as e:
            tried.append("%s (%s)" % (path, e))
    raise ImportError("devarray: libdevarray could not be loaded; set DEVARRAY_LIBRARY to its "
                      "path. Tried: " + "; ".join(tried))


lib, library_path = _load()

#: Functions this copy of the library lacks (an older build): calling them raises.
missing = set()
for _name, (_res, _args) in _PROTOS.items():
    try:
        _f = getattr(lib, _name)
    except AttributeError:
        missing.add(_name)
        continue
    _f.restype = _res
    _f.argtypes = _args

del _name, _res, _args


def has(name):
    """Whether the loaded library exports C function `name`."""
    return name not in missing


def lean(name):
    """A function object of its own for C function `name`, with _abi.LEAN's parameter types
    (every pointer an address): the per-call paths' (the one of `lib` keeps the full ones)."""
    res, args = _LEAN[name]
    f = lib[name]  # a new function object, not lib's shared one
    f.restype, f.argtypes = res, args
    return f


# ---- the compiled per-call paths (issue 23) ---------------------------------
#
# devarray._speedups (python/devarray/_speedups.c) runs device_array, to_device and the
# release of a DeviceNDArray without ctypes; it is given the addresses of the functions of
# the library loaded above, so that it uses that very library. It is found next to this
# file (pip install), else next to the loaded libdevarray (the CMake build puts it there),
# or at DEVARRAY_SPEEDUPS=<path>; DEVARRAY_SPEEDUPS=off keeps the binding on ctypes alone.
# A file found but not loadable (another Python, a stale build) leaves the binding on ctypes
# silently, unless DEVARRAY_SPEEDUPS named it: then ImportError.

_SPEEDUPS_API = 3  # the _speedups.c API_VERSION this binding speaks


def _speedups_candidates():
    names = ["_speedups" + s for s in importlib.machinery.EXTENSION_SUFFIXES]
    here = os.path.dirname(os.path.abspath(__file__))
    for n in names:
        yield os.path.join(here, n)
    if os.sep in library_path:
        d = os.path.dirname(os.path.realpath(library_path))
        for n in names:
            yield os.path.join(d, n)


def _load_speedups_file(path):
    spec = importlib.util.spec_from_file_location(__package__ + "._speedups", path)
    if spec is None:
        raise ImportError("not an extension module file name")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    if getattr(mod, "API_VERSION", None) != _SPEEDUPS_API:
        raise ImportError("API version %r, this binding needs %d"
                          % (getattr(mod, "API_VERSION", None), _SPEEDUPS_API))
    addr = [ctypes.cast(getattr(lib, n), c_void_p).value or 0 for n in
            ("dv_device_array", "dv_host_array_wrap", "dv_to_device", "dv_array_release",
             "dv_array_ndim", "dv_array_shape", "dv_copy_to_host", "dv_array_is_c_contiguous")]
    mod.init_library(*addr)
    sys.modules[spec.name] = mod
    return mod


def _load_speedups():
    env = os.environ.get("DEVARRAY_SPEEDUPS", "")
    if env.lower() == "off":
        return None
    if env:
        if not os.path.exists(env):
            raise ImportError("devarray: DEVARRAY_SPEEDUPS=%s: no such file (set it to the "
                              "built _speedups module, or to off)" % env)
        try:
            return _load_speedups_file(env)
        except (ImportError, OSError, ValueError, RuntimeError, AttributeError) as e:
            raise ImportError("devarray: DEVARRAY_SPEEDUPS=%s could not be loaded: %s"
                              % (env, e)) from e
    for path in _speedups_candidates():
        if os.path.exists(path):
            try:
                return _load_speedups_file(path)
            except (ImportError, OSError, ValueError, RuntimeError, AttributeError):
                continue
    return None


#: The compiled module devarray._speedups, or None when the binding runs on ctypes alone.
speedups = _load_speedups()


# ---- tracking: each handle's origin is the caller's Python line -------------
#
# With tracking on when the package loads (DV_TRACK=1, or DV_LEAK_CHECK=1 from `devarray
# check --leak-check`), every C function is called with the thread's origin label set to the
# first frame outside this package (dv_tracking_set_origin), so that the handles it makes are
# listed with file.py:line rather than an address inside the interpreter; the compiled
# per-call paths are not used then (they would make handles unlabelled). Off, nothing here
# runs.

_PKG_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
_UNLABELLED = {"dv_last_error", "dv_status_name", "dv_status_str", "dv_tracking_set_origin",
               "dv_tracking_enabled", "dv_tracking_enable", "dv_tracking_snapshot_json",
               "dv_tracking_forget"}


def _caller_line():
    f = sys._getframe(2)
    while f is not None and f.f_code.co_filename.startswith(_PKG_DIR):
        f = f.f_back
    if f is None:
        return b""
    return ("%s:%d (%s)" % (f.f_code.co_filename, f.f_lineno, f.f_code.co_name)).encode()


def _labelled(fn, set_origin=None):
    set_origin = set_origin or lib.dv_tracking_set_origin

    def call(*args):
        set_origin(_caller_line())
        try:
            return fn(*args)
        finally:
            set_origin(None)
    call.__name__ = getattr(fn, "__name__", "call")
    call.__wrapped__ = fn
    return call


tracking = has("dv_tracking_enabled") and bool(lib.dv_tracking_enabled())
if tracking:
    speedups = None
    for _name in _PROTOS:
        if _name not in missing and _name not in _UNLABELLED:
            setattr(lib, _name, _labelled(getattr(lib, _name)))
    _plain_lean = lean

    def lean(name):  # noqa: F811 -- the labelled one, while tracking
        return _labelled(_plain_lean(name))
    del _name


# ---- errors ---------------------------------------------------------------

class DevarrayError(RuntimeError):
    """A devarray call failed.

    Attributes: ``status`` (the number), ``name`` (``"DV_ERR_SHAPE_MISMATCH"``),
    ``description`` (the status's one-line text) and ``detail`` (the library's
    message for this failure, dv_last_error()).
    """

    def __init__(self, status, detail="", where=""):
        self.status = status
        self.name = lib.dv_status_name(status).decode()
        self.description = lib.dv_status_str(status).decode()
        self.detail = detail
        self.where = where
        msg = "%s: %s" % (self.name, detail or self.description)
        if where:
            msg = "%s: %s" % (where, msg)
        super().__init__(msg)


class ArgumentError(DevarrayError, ValueError):
    """Bad argument (statuses 1xx)."""


class DevarrayIndexError(ArgumentError, IndexError):
    """Index out of range or too many indices (DV_ERR_INDEX, DV_ERR_TOO_MANY_INDICES)."""


class DtypeMismatchError(ArgumentError, TypeError):
    """Arrays of different dtypes (DV_ERR_DTYPE_MISMATCH; Numba and NumPy raise TypeError)."""


class OutOfMemoryError(DevarrayError, MemoryError):
    """Device or host out of memory (2xx)."""


class NotSupportedError(DevarrayError, NotImplementedError):
    """The backend cannot do this (DV_ERR_NOT_SUPPORTED)."""


class BackendUnavailableError(DevarrayError):
    """The backend asked for is missing (DV_ERR_BACKEND_UNAVAILABLE, 5xx)."""


class DriverError(DevarrayError):
    """The driver or device failed (4xx): compile errors, kernel faults, I/O."""


class CompileError(DriverError):
    """A kernel failed to compile; ``log`` has the compiler's whole log."""
    log = ""


class MisuseError(DevarrayError):
    """API misuse (6xx): busy objects, mixed contexts, wrong order of calls."""


_BY_STATUS = {_abi.DV_ERR_DTYPE_MISMATCH: DtypeMismatchError,
              _abi.DV_ERR_INDEX: DevarrayIndexError, _abi.DV_ERR_TOO_MANY_INDICES: DevarrayIndexError,
              _abi.DV_ERR_NOT_SUPPORTED: NotSupportedError,
              _abi.DV_ERR_BACKEND_UNAVAILABLE: BackendUnavailableError,
              _abi.DV_ERR_COMPILE: CompileError}


def error_class(status):
    """The exception class raised for a status."""
    c = _BY_STATUS.get(status)
    if c is not None:
        return c
    group = status // 100
    return {1: ArgumentError, 2: OutOfMemoryError, 3: NotSupportedError, 4: DriverError,
            5: BackendUnavailableError, 6: MisuseError}.get(group, DevarrayError)


def error(status, where=""):
    """The exception for a non-zero status (reads dv_last_error on this thread); a memory
    manager plug-in's own exception when one of its callbacks caused the failure."""
    if _callback_error is not None:
        exc = _callback_error(status)
        if exc is not None:
            return exc
    detail = lib.dv_last_error()
    detail = detail.decode(errors="replace") if detail else ""
    return error_class(status)(status, detail, where)


# Set by _emm: status -> the exception a memory manager plug-in raised on this thread for the
# call that failed with that status (taken), or None.
_callback_error = None


def check(status, where=""):
    """Raise the exception for a non-zero status (reads dv_last_error on this thread); a
    plug-in's own exception when one of its callbacks caused the failure."""
    if status:
        raise error(status, where)
