"""devarray for Python: Numba's GPU memory API (numba.cuda / numba.roc names) over libdevarray.

Code written for ``numba.cuda`` runs with only the import changed::

    import devarray as cuda
    d = cuda.to_device(np.arange(10.0))
    h = d.copy_to_host()

Kernels are Numba's Python kernels, compiled to devarray's C dialect by devarray.jit with
Numba's own front end (docs/python.md; needs Numba)::

    @cuda.jit
    def scale(x, f):
        i = cuda.grid(1)
        if i < x.size:
            x[i] *= f
    scale[blocks, threads](d, 2.0)

or written in the dialect of <devarray/kernel.h> itself (docs/kernels.md)::

    mod = devarray.Module(source)
    mod.get("scale")[blocks, threads](d, np.float32(2))

The backend is the library's ``backend`` option (DV_BACKEND: host, opencl, cuda, auto), or
the one given to select_backend(). Errors raise DevarrayError subclasses carrying the
status name (``e.name``) and the library's detail message (``e.detail``). Where devarray
differs from Numba, see docs/semantics.md ("Python binding").

Only ctypes and NumPy are used, plus an optional compiled module for the per-call paths
(devarray._speedups; DEVARRAY_SPEEDUPS=off leaves it out); the library is found through
DEVARRAY_LIBRARY, next to an installed copy, then the system loader.
"""

import ctypes as _ctypes

from ._lib import (DevarrayError, ArgumentError, DtypeMismatchError, DevarrayIndexError,
                   OutOfMemoryError,
                   NotSupportedError, BackendUnavailableError, DriverError, CompileError,
                   MisuseError, error_class, library_path, lib as _clib)
from ._context import (Context, current_context, select_backend, select_device, close,
                       get_current_device, synchronize, defer_cleanup)
from ._stream import Stream, Graph
from ._context import (stream, default_stream, legacy_default_stream,
                       per_thread_default_stream, Event, event, event_elapsed_time)
from ._array import DeviceNDArray, DeviceRecord
from ._create import (device_array, device_array_like, to_device, from_dlpack, is_cuda_array,
                      is_device_array)
from ._create import as_cuda_array, from_cuda_array_interface
from ._mapped import MappedNDArray, mapped_array, mapped, mapped_array_like
from ._hostmem import (pinned_array, managed_array, pinned, register, deregister, is_pinned,
                       pinned_array_like, PinnedMemoryPool, get_default_pinned_memory_pool)
from ._kernel import Module, Kernel, Arg, In, Out, InOut, View, SmartArray
from ._emm import (BaseCUDAMemoryManager, HostOnlyCUDAMemoryManager, GetIpcHandleMixin,
                   NumbaCUDAMemoryManager, MemoryInfo, set_memory_manager, backend_memalloc)
from ._config import config
from ._memory import (MemoryPointer, AutoFreePointer, MappedMemory, PinnedMemory,
                      ManagedMemory, OwnedPointer, MemoryInfo)
from ._driver import (host_to_device, device_to_host, device_to_device, device_memset,
                      device_memory_size, host_memory_extents, host_memory_size,
                      is_device_memory, require_device_memory, device_pointer,
                      device_ctypes_pointer, profile_start, profile_stop, profiling)
from ._memhooks import (MemoryEvent, memory_hook, memory_scope, set_oom_handler, enable_tracking,
                        tracking_enabled, live_handles, memory_snapshot)
from ._mempool import MemoryPool, get_default_memory_pool
from ._devices import gpus, require_context
from ._devices import detect, list_devices
from . import driver, devicearray

__version__ = _clib.dv_version().decode()


def list_backends():
    """The backends this library was built with (available or not)."""
    return [_clib.dv_backend_name(i).decode() for i in range(_clib.dv_backend_count())]


def backend_available(name):
    """(True, "") when backend `name` can be opened, else (False, the reason)."""
    buf = _ctypes.create_string_buffer(512)
    st = _clib.dv_backend_probe(name.encode(), buf, len(buf))
    return st == 0, buf.value.decode(errors="replace")


def is_available():
    """Numba's is_available(): a context can be opened."""
    try:
        current_context()
        return True
    except DevarrayError:
        return False


# The exceptions are devarray's (their module is the package, as users name them).
for _c in (DevarrayError, ArgumentError, DtypeMismatchError, DevarrayIndexError, OutOfMemoryError,
           NotSupportedError, BackendUnavailableError, DriverError, CompileError, MisuseError):
    _c.__module__ = "devarray"
del _c

__all__ = [n for n in dir() if not n.startswith("_")]


# ---- Python kernels (devarray.jit, docs/python.md) ----------------------------------------
# The kernel language's names (threadIdx, shared, syncthreads, atomic, ...) and jit come
# from devarray._jit, which needs Numba; they are loaded on first use so that `import
# devarray` neither needs Numba nor pays for importing it.
from ._jitnames import JIT_NAMES as _JIT_NAMES, KERNEL_NAMES as _KERNEL_NAMES


def _jit_unavailable(exc):
    return NotSupportedError(300, "devarray.jit and the kernel language need Numba (Debian: "
                             "python3-numba; pip: numba), which could not be imported: %s"
                             % exc, "jit")


def __getattr__(name):
    if name in _JIT_NAMES or name in _KERNEL_NAMES:
        try:
            # here, not at the top: _jit needs Numba (optional, and slow to import)
            if name in _KERNEL_NAMES:  # the stubs alone (Numba's typing imports them)
                from ._jit import stubs  # optional: needs Numba
                return stubs.ALL[name]
            from . import _jit  # optional: needs Numba
        except ImportError as e:  # no Numba: one clear error, the rest keeps working
            if name in _JIT_NAMES:
                err = _jit_unavailable(e)

                def unavailable(*args, **kws):
                    raise err
                unavailable.__name__ = name
                return unavailable
            raise AttributeError("module 'devarray' has no attribute %r (the kernel "
                                 "language needs Numba: %s)" % (name, e)) from None
        return getattr(_jit, name)
    raise AttributeError("module 'devarray' has no attribute %r" % name)
