"""Sharing device memory with another process: the library's half (dv_ipc_export,
dv_ipc_open, dv_ipc_close) on C arrays. The device array's side, Numba's get_ipc_handle and
IpcArrayHandle, is _array's (the handle opens as a DeviceNDArray).

With a Python EMM plugin the plugin's ``get_ipc_handle(memory)`` makes the handle, as in
Numba; otherwise the library's dv_ipc_export does (the host simulator with ``host_ipc=on``
and CUDA; OpenCL has none: NotSupportedError). The handle pickles (its bytes and the array's
layout) and ``open()`` maps it in the other process; the exporting process cannot open its
own handle (the library refuses it, as CUDA does: MisuseError)."""

import ctypes

import numpy as np

from . import _abi, _context
from ._convert import _dv_dtype
from ._lib import lib, check

_IPC_SIZE = _abi.DV_IPC_HANDLE_SIZE
_P = ctypes.c_void_p
_I64 = ctypes.c_int64

_export = lib.dv_ipc_export
_open = lib.dv_ipc_open
_close = lib.dv_ipc_close


def export(h):
    """The library's IPC handle (bytes) of C device array h."""
    buf = ctypes.create_string_buffer(_IPC_SIZE)
    check(_export(h, buf), "get_ipc_handle")
    return buf.raw


def open_array(handle, shape, strides, dtype):
    """A new C array over the memory IPC handle `handle` (bytes) exports, laid out as given,
    in the current context."""
    nd = len(shape)
    sh = (_I64 * max(nd, 1))(*shape)
    st = (_I64 * max(nd, 1))(*strides)
    out = _P()
    check(_open(_context._handle(), handle, nd, sh, _dv_dtype(np.dtype(dtype)), st,
                ctypes.byref(out)), "IpcArrayHandle.open")
    return out.value


def close(h):
    """Unmap C array h that open_array gave."""
    check(_close(h), "IpcArrayHandle.close")
