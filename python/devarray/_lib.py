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
import os

from ctypes import (POINTER, c_char, c_char_p, c_float, c_int, c_int64, c_size_t,
                    c_uint, c_uint32, c_uint64, c_void_p)

__all__ = ["lib", "DevarrayError", "check", "library_path", "speedups"]


def _candidates():
    env = os.environ.get("DEVARRAY_LIBRARY")
    if env:
        yield env
        return
    here = os.path.dirname(os.path.abspath(__file__))
    yield os.path.join(here, "libdevarray.so")  # pip install (setup.py) copies it here
    try:
        from . import _installed  # written by `cmake --install`
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


class dv_counter(ctypes.Structure):
    _fields_ = [("current", c_uint64), ("peak", c_uint64), ("total", c_uint64)]


class dv_stats(ctypes.Structure):
    _fields_ = [("size", c_uint32), ("version", c_uint32), ("device", dv_counter),
                ("pinned", dv_counter), ("mapped", dv_counter), ("registered", dv_counter),
                ("managed", dv_counter), ("arrays", dv_counter),
                ("pending_deallocs", c_uint64), ("pending_bytes", c_uint64),
                ("pending_peak", c_uint64), ("flushes", c_uint64), ("oom_retries", c_uint64),
                ("failed_frees", c_uint64), ("copies", c_uint64), ("staged_copies", c_uint64),
                ("bytes_h2d", c_uint64), ("bytes_d2h", c_uint64), ("bytes_d2d", c_uint64),
                ("staging", dv_counter), ("staging_hits", c_uint64),
                ("staging_misses", c_uint64)]


class dv_field_desc(ctypes.Structure):
    _fields_ = [("name", c_char_p), ("dtype", c_void_p), ("offset", c_size_t), ("ndim", c_int),
                ("shape", POINTER(c_int64))]


class dv_index(ctypes.Structure):
    _fields_ = [("kind", c_int), ("start", c_int64), ("stop", c_int64), ("step", c_int64),
                ("index", c_int64)]


class dv_dim3(ctypes.Structure):
    _fields_ = [("x", c_uint32), ("y", c_uint32), ("z", c_uint32)]


class dv_launch_config(ctypes.Structure):
    _fields_ = [("grid", dv_dim3), ("block", dv_dim3), ("dynamic_shared", c_size_t),
                ("stream", c_void_p)]


class dv_arg(ctypes.Structure):
    _fields_ = [("kind", c_int), ("type", c_int), ("value", c_void_p), ("array", c_void_p),
                ("dir", c_int), ("smart", c_void_p), ("scalar", c_uint64)]


class dv_kernel_param(ctypes.Structure):
    _fields_ = [("kind", c_int), ("type", c_int), ("is_const", c_int), ("name", c_char_p),
                ("decl", c_char_p)]


_P = c_void_p
_S = c_int  # dv_status
_I64P = POINTER(c_int64)

_PROTOS = {
    "dv_version": (c_char_p, []),
    "dv_status_name": (c_char_p, [c_int]),
    "dv_status_str": (c_char_p, [c_int]),
    "dv_last_error": (c_char_p, []),
    "dv_config_create": (_S, [POINTER(_P)]),
    "dv_config_set": (_S, [_P, c_char_p, c_char_p]),
    "dv_config_destroy": (None, [_P]),
    "dv_backend_count": (c_size_t, []),
    "dv_backend_name": (c_char_p, [c_size_t]),
    "dv_backend_probe": (_S, [c_char_p, c_char_p, c_size_t]),
    "dv_context_create": (_S, [_P, POINTER(_P)]),
    "dv_context_destroy": (_S, [_P]),
    "dv_context_backend": (c_char_p, [_P]),
    "dv_context_memory_info": (_S, [_P, POINTER(c_size_t), POINTER(c_size_t)]),
    "dv_context_synchronize": (_S, [_P]),
    "dv_context_default_stream": (_P, [_P]),
    "dv_context_legacy_stream": (_P, [_P]),
    "dv_context_per_thread_stream": (_P, [_P]),
    "dv_context_option": (_S, [_P, c_char_p, c_char_p, c_size_t, _P]),
    "dv_context_stats": (_S, [_P, POINTER(dv_stats)]),
    "dv_context_stats_json": (_S, [_P, c_char_p, c_size_t, POINTER(c_size_t)]),
    "dv_defer_cleanup_begin": (_S, [_P]),
    "dv_defer_cleanup_end": (_S, [_P]),
    "dv_context_flush_deallocs": (_S, [_P]),
    "dv_context_pending_deallocs": (_S, [_P, POINTER(c_size_t), POINTER(c_size_t)]),
    "dv_context_memory_manager": (c_char_p, [_P]),
    "dv_dtype_from_name": (_P, [c_char_p]),
    "dv_dtype_id": (c_int, [_P]),
    "dv_dtype_itemsize": (c_size_t, [_P]),
    "dv_dtype_name": (c_char_p, [_P]),
    "dv_dtype_record_create": (_S, [POINTER(dv_field_desc), c_size_t, c_size_t, POINTER(_P)]),
    "dv_dtype_retain": (_P, [_P]),
    "dv_dtype_release": (None, [_P]),
    "dv_dtype_field_count": (c_size_t, [_P]),
    "dv_dtype_field": (_S, [_P, c_size_t, POINTER(dv_field_desc)]),
    "dv_device_array": (_S, [_P, c_int, _I64P, _P, _I64P, c_char, _P, POINTER(_P)]),
    "dv_device_array_like": (_S, [_P, _P, POINTER(_P)]),
    "dv_device_record": (_S, [_P, _P, _P, POINTER(_P)]),
    "dv_host_array_wrap": (_S, [_P, c_void_p, c_int, _I64P, _P, _I64P, POINTER(_P)]),
    "dv_pinned_array": (_S, [_P, c_int, _I64P, _P, _I64P, c_char, POINTER(_P)]),
    "dv_mapped_array": (_S, [_P, c_int, _I64P, _P, _I64P, c_char, c_uint, POINTER(_P)]),
    "dv_managed_array": (_S, [_P, c_int, _I64P, _P, _I64P, c_char, c_int, POINTER(_P)]),
    "dv_array_retain": (_P, [_P]),
    "dv_array_release": (None, [_P]),
    "dv_array_ndim": (c_int, [_P]),
    "dv_array_shape": (_I64P, [_P]),
    "dv_array_strides": (_I64P, [_P]),
    "dv_array_dtype": (_P, [_P]),
    "dv_array_memory": (c_int, [_P]),
    "dv_array_context": (_P, [_P]),
    "dv_array_is_c_contiguous": (c_int, [_P]),
    "dv_array_is_f_contiguous": (c_int, [_P]),
    "dv_array_host_data": (_S, [_P, POINTER(c_void_p)]),
    "dv_to_device": (_S, [_P, _P, _P, c_int, _P, POINTER(_P)]),
    "dv_copy_to_host": (_S, [_P, _P, _P, POINTER(_P)]),
    "dv_copy_to_device": (_S, [_P, _P, _P]),
    "dv_array_copy": (_S, [_P, _P, _P]),
    "dv_array_memset": (_S, [_P, c_int, _P]),
    "dv_array_slice": (_S, [_P, c_int, POINTER(dv_index), POINTER(_P)]),
    "dv_array_get_item": (_S, [_P, _I64P, c_void_p, c_size_t, _P]),
    "dv_array_set_item": (_S, [_P, _I64P, c_void_p, c_size_t, _P]),
    "dv_array_reshape": (_S, [_P, c_int, _I64P, c_char, c_uint, _P, POINTER(_P)]),
    "dv_array_ravel": (_S, [_P, c_char, c_uint, _P, POINTER(_P)]),
    "dv_array_split": (_S, [_P, c_int64, POINTER(_P), c_size_t, POINTER(c_size_t)]),
    "dv_array_field": (_S, [_P, c_char_p, POINTER(_P)]),
    "dv_record_get": (_S, [_P, c_char_p, c_void_p, c_size_t, _P]),
    "dv_record_set": (_S, [_P, c_char_p, c_void_p, c_size_t, _P]),
    "dv_pinned_scope_begin": (_S, [_P, c_size_t, POINTER(_P), POINTER(_P)]),
    "dv_mapped_scope_begin": (_S, [_P, c_size_t, POINTER(_P), POINTER(_P), POINTER(_P)]),
    "dv_scope_end": (_S, [_P]),
    "dv_array_register": (_S, [_P]),
    "dv_array_deregister": (_S, [_P]),
    "dv_array_is_pinned": (c_int, [_P]),
    "dv_stream_create": (_S, [_P, c_uint, POINTER(_P)]),
    "dv_stream_release": (None, [_P]),
    "dv_stream_synchronize": (_S, [_P]),
    "dv_stream_query": (_S, [_P]),
    "dv_stream_auto_sync_begin": (_S, [_P]),
    "dv_stream_auto_sync_end": (_S, [_P]),
    "dv_event_create": (_S, [_P, c_uint, POINTER(_P)]),
    "dv_event_release": (None, [_P]),
    "dv_event_record": (_S, [_P, _P]),
    "dv_stream_wait_event": (_S, [_P, _P]),
    "dv_event_query": (_S, [_P]),
    "dv_event_synchronize": (_S, [_P]),
    "dv_event_elapsed_ms": (_S, [_P, _P, POINTER(c_float)]),
    "dv_program_create": (_S, [_P, c_char_p, c_char_p, POINTER(_P)]),
    "dv_program_define": (_S, [_P, c_char_p, c_char_p]),
    "dv_program_options": (_S, [_P, c_char_p, c_char_p]),
    "dv_program_constant": (_S, [_P, c_char_p, _P]),
    "dv_program_build": (_S, [_P, c_uint, POINTER(_P)]),
    "dv_program_log": (c_char_p, [_P]),
    "dv_program_destroy": (None, [_P]),
    "dv_module_release": (None, [_P]),
    "dv_module_kernel": (_S, [_P, c_char_p, POINTER(_P)]),
    "dv_module_set_constant": (_S, [_P, c_char_p, _P, _P]),
    "dv_kernel_name": (c_char_p, [_P]),
    "dv_kernel_num_params": (c_int, [_P]),
    "dv_kernel_param_info": (_S, [_P, c_int, POINTER(dv_kernel_param)]),
    "dv_kernel_launch": (_S, [_P, POINTER(dv_launch_config), c_size_t, POINTER(dv_arg)]),
    "dv_array_native": (_S, [_P, POINTER(c_void_p), POINTER(c_size_t)]),
    "dv_device_array_wrap": (_S, [_P, c_void_p, c_size_t, c_size_t, c_int, _I64P, _P, _I64P,
                                  c_void_p, c_void_p, POINTER(_P)]),
    # smart arrays (issue 12)
    "dv_smart_create": (_S, [_P, c_int, _I64P, _P, _I64P, c_char, c_int, _P, POINTER(_P)]),
    "dv_smart_from_array": (_S, [_P, c_uint, _P, POINTER(_P)]),
    "dv_smart_get": (_S, [_P, c_int, _P, POINTER(_P)]),
    "dv_smart_mark_changed": (_S, [_P, c_int]),
    "dv_smart_is_current": (c_int, [_P, c_int]),
    "dv_smart_dtype": (_P, [_P]),
    "dv_smart_ndim": (c_int, [_P]),
    "dv_smart_shape": (_I64P, [_P]),
    "dv_smart_release": (None, [_P]),
}

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


# ---- the compiled per-call paths (issue 23) ---------------------------------
#
# devarray._speedups (python/devarray/_speedups.c) runs device_array, to_device and the
# release of a DeviceNDArray without ctypes; it is given the addresses of the functions of
# the library loaded above, so that it uses that very library. It is found next to this
# file (pip install), else next to the loaded libdevarray (the CMake build puts it there),
# or at DEVARRAY_SPEEDUPS=<path>; DEVARRAY_SPEEDUPS=off keeps the binding on ctypes alone.
# A file found but not loadable (another Python, a stale build) leaves the binding on ctypes
# silently, unless DEVARRAY_SPEEDUPS named it: then ImportError.

_SPEEDUPS_API = 1  # the _speedups.c API_VERSION this binding speaks


def _speedups_candidates():
    import importlib.machinery
    names = ["_speedups" + s for s in importlib.machinery.EXTENSION_SUFFIXES]
    here = os.path.dirname(os.path.abspath(__file__))
    for n in names:
        yield os.path.join(here, n)
    if os.sep in library_path:
        d = os.path.dirname(os.path.realpath(library_path))
        for n in names:
            yield os.path.join(d, n)


def _load_speedups_file(path):
    import importlib.util
    import sys
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
             "dv_array_ndim", "dv_array_shape")]
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


_BY_STATUS = {107: DevarrayIndexError, 108: DevarrayIndexError, 300: NotSupportedError,
              301: BackendUnavailableError, 403: CompileError}


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
