"""DLPack (issue 14): __dlpack__ / __dlpack_device__ on device arrays, and from_dlpack.

The capsule protocol is done with ctypes.pythonapi: __dlpack__ returns a PyCapsule named
"dltensor" holding the DLManagedTensor* that dv_array_to_dlpack made; a consumer renames
it "used_dltensor" and calls the tensor's deleter itself; a capsule never consumed calls
the deleter when it is destroyed."""

import ctypes

from ._lib import lib, check, has, speedups

_api = ctypes.pythonapi
_api.PyCapsule_New.restype = ctypes.py_object
_api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_api.PyCapsule_IsValid.restype = ctypes.c_int
_api.PyCapsule_IsValid.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
_api.PyCapsule_SetName.restype = ctypes.c_int
_api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]
KDL_CPU, KDL_CUDA, KDL_CUDA_HOST, KDL_OPENCL, KDL_CUDA_MANAGED = 1, 2, 3, 4, 13

_DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
# DLManagedTensor: DLTensor (data 8, device 8, ndim 4, dtype 4, shape 8, strides 8,
# byte_offset 8 = 48 bytes), manager_ctx 8, deleter 8.
_DELETER_OFFSET = 56



def _call_deleter(tensor):
    fn = ctypes.c_void_p.from_address(tensor + _DELETER_OFFSET).value
    if fn:
        _DELETER(fn)(tensor)


# The destructor may run while an exception is pending: NumPy 1.24's from_dlpack destroys
# the capsule of a device it refuses with its own error set. The compiled one
# (_speedups.CAPSULE_DESTRUCTOR) never looks at the error indicator; this ctypes one, used
# without _speedups, cannot help it (ctypes checks for a pending error when it converts the
# capsule's address), so there that consumer's exception becomes SystemError and this one
# is printed as "Exception ignored" -- and that export's array stays alive. Its two calls
# go through a plain CDLL, which does not look at the indicator; neither sets an error for
# a capsule that IsValid accepted.
_raw = ctypes.CDLL(None)
_is_valid = _raw.PyCapsule_IsValid
_is_valid.restype = ctypes.c_int
_is_valid.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
_get_pointer = _raw.PyCapsule_GetPointer
_get_pointer.restype = ctypes.c_void_p
_get_pointer.argtypes = [ctypes.c_void_p, ctypes.c_char_p]


@ctypes.CFUNCTYPE(None, ctypes.c_void_p)
def _capsule_destructor(capsule):
    # Only a capsule nobody consumed still has the name "dltensor".
    if _is_valid(capsule, b"dltensor"):
        p = _get_pointer(capsule, b"dltensor")
        if p:
            _call_deleter(p)


_DESTRUCTOR = getattr(speedups, "CAPSULE_DESTRUCTOR", None) or \
    ctypes.cast(_capsule_destructor, ctypes.c_void_p).value


def to_capsule(array_handle, stream_handle, consumer_stream):
    if not has("dv_array_to_dlpack"):
        raise NotImplementedError("this libdevarray has no DLPack functions")
    out = ctypes.c_void_p()
    check(lib.dv_array_to_dlpack(array_handle, stream_handle, consumer_stream,
                                 ctypes.byref(out)), "__dlpack__")
    try:
        return _api.PyCapsule_New(out.value, b"dltensor", _DESTRUCTOR)
    except BaseException:
        _call_deleter(out.value)
        raise


def from_capsule(ctx_handle, capsule):
    """A C array handle over the capsule's tensor; the capsule is marked used."""
    if not _api.PyCapsule_IsValid(id(capsule), b"dltensor"):
        raise ValueError("from_dlpack: not an unconsumed 'dltensor' capsule")
    p = _api.PyCapsule_GetPointer(id(capsule), b"dltensor")
    out = ctypes.c_void_p()
    check(lib.dv_array_from_dlpack(ctx_handle, p, ctypes.byref(out)), "from_dlpack")
    _api.PyCapsule_SetName(capsule, b"used_dltensor")
    return out.value
