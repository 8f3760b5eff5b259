"""Sharing a device array with another process (Numba's get_ipc_handle / IpcArrayHandle).

With a Python EMM plugin the plugin's ``get_ipc_handle(memory)`` makes the handle, as in
Numba; otherwise the library's dv_ipc_export does (the host simulator with ``host_ipc=on``
and CUDA; OpenCL has none: NotSupportedError). The handle pickles (its bytes and the array's
layout) and ``open()`` maps it in the other process; the exporting process cannot open its
own handle (the library refuses it, as CUDA does: MisuseError)."""

import ctypes

import numpy as np

from . import _context
from ._lib import check, library_path, NotSupportedError

_IPC_SIZE = 128  # DV_IPC_HANDLE_SIZE
_P = ctypes.c_void_p
_I64 = ctypes.c_int64

_export = ctypes.CDLL(library_path).dv_ipc_export
_export.argtypes = [_P, ctypes.c_char_p]
_export.restype = ctypes.c_int
_open = ctypes.CDLL(library_path).dv_ipc_open
_open.argtypes = [_P, ctypes.c_char_p, ctypes.c_int, _P, _P, _P, _P]
_open.restype = ctypes.c_int
_close = ctypes.CDLL(library_path).dv_ipc_close
_close.argtypes = [_P]
_close.restype = ctypes.c_int


class IpcArrayHandle:
    """A device array's IPC handle (Numba's IpcArrayHandle): ``open()`` gives a device array
    over the exported memory in another process, ``close()`` unmaps it; also a context
    manager (open on entry, close on exit). ``_ipc_handle`` is the plugin's handle, or the
    library's handle bytes."""

    def __init__(self, ipc_handle, array_desc):
        self._ipc_handle = ipc_handle
        self._array_desc = array_desc
        self._opened = None

    def __getstate__(self):
        return {"_ipc_handle": self._ipc_handle, "_array_desc": self._array_desc}

    def __setstate__(self, state):
        self.__init__(state["_ipc_handle"], state["_array_desc"])

    def open(self):
        """Map the memory in this process: a DeviceNDArray of the exported layout."""
        from ._array import DeviceNDArray
        from ._convert import _dv_dtype
        if not isinstance(self._ipc_handle, bytes):
            raise NotSupportedError(300, "the memory manager plug-in's handle opens memory, "
                                    "not arrays, in devarray", "IpcArrayHandle.open")
        if self._opened is not None:
            raise ValueError("IpcArrayHandle.open: the handle is already open")
        shape, strides, dtype = (self._array_desc[k] for k in ("shape", "strides", "dtype"))
        dtype = np.dtype(dtype)
        nd = len(shape)
        sh = (_I64 * max(nd, 1))(*shape)
        st = (_I64 * max(nd, 1))(*strides)
        out = _P()
        check(_open(_context._handle(), self._ipc_handle, nd, sh, _dv_dtype(dtype), st,
                    ctypes.byref(out)), "IpcArrayHandle.open")
        arr = DeviceNDArray._from_handle(out.value, dtype)
        self._opened = arr
        return arr

    def close(self):
        """Unmap what open() mapped (the array it gave must not be used afterwards)."""
        arr, self._opened = self._opened, None
        if arr is None:
            raise ValueError("IpcArrayHandle.close: the handle is not open")
        h, arr._h = arr._h, None
        check(_close(h), "IpcArrayHandle.close")

    def __enter__(self):
        return self.open()

    def __exit__(self, *exc):
        self.close()
        return False


def get_ipc_handle(arr):
    """The IpcArrayHandle of device array `arr` (DeviceNDArray.get_ipc_handle)."""
    desc = {"shape": arr.shape, "strides": arr.strides, "dtype": arr.dtype}
    ctx = _context.current_context()
    if ctx.has_plugin:
        return IpcArrayHandle(ctx.get_ipc_handle(arr.gpu_data), desc)
    buf = ctypes.create_string_buffer(_IPC_SIZE)
    check(_export(arr.handle, buf), "get_ipc_handle")
    return IpcArrayHandle(buf.raw, desc)
