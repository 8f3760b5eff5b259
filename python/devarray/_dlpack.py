"""DLPack (issue 14; 1.x: issue 38): __dlpack__ / __dlpack_device__ on device arrays, and
from_dlpack.

The capsule protocol is done with ctypes.pythonapi. __dlpack__ returns a PyCapsule named
"dltensor_versioned" holding the DLManagedTensorVersioned* dv_array_to_dlpack_versioned made
when the consumer asks for DLPack 1.x (max_version >= (1, 0)), else one named "dltensor"
holding the DLManagedTensor* of dv_array_to_dlpack (DLPack 0.x, for old consumers). A
consumer renames it "used_dltensor" / "used_dltensor_versioned" and calls the tensor's
deleter itself; a capsule never consumed calls the deleter when it is destroyed.

from_dlpack asks the producer for 1.x first (``__dlpack__(max_version=(1, 0))``) and falls
back on ``__dlpack__()`` when the producer raises TypeError (a producer older than the 2023
array API standard); it takes either capsule kind. devarray's arrays are all writable
(kernels may write any argument), so a tensor the producer marked read-only
(DLPACK_FLAG_BITMASK_READ_ONLY, e.g. a NumPy array with writeable=False) is refused with
BufferError and its capsule left unconsumed."""

import ctypes

from ._abi import DV_MEM_HOST as _MEM_HOST
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

LEGACY, VERSIONED = b"dltensor", b"dltensor_versioned"
#: DLPack 1.x's flags (include/devarray_dlpack.h: DV_DLPACK_FLAG_*)
FLAG_READ_ONLY, FLAG_IS_COPIED = 1 << 0, 1 << 1
#: the DLPack version devarray exports and reads (a major version other than 1 is refused)
VERSION = (1, 0)

_DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
# DLManagedTensor: DLTensor (data 8, device 8, ndim 4, dtype 4, shape 8, strides 8,
# byte_offset 8 = 48 bytes), manager_ctx 8, deleter 8.
_DELETER_OFFSET = {LEGACY: 56}
# DLManagedTensorVersioned: version (major 4, minor 4), manager_ctx 8, deleter 8, flags 8,
# then the DLTensor.
_DELETER_OFFSET[VERSIONED] = 16
_VERSION_OFFSET, _FLAGS_OFFSET = 0, 24
_NO_SYNC = (1 << 64) - 1  # DV_DLPACK_NO_SYNC: the protocol's stream -1


def _call_deleter(tensor, name=LEGACY):
    fn = ctypes.c_void_p.from_address(tensor + _DELETER_OFFSET[name]).value
    if fn:
        _DELETER(fn)(tensor)


# The destructor may run while an exception is pending: NumPy 1.24's from_dlpack destroys
# the capsule of a device it refuses with its own error set. The compiled ones
# (_speedups.CAPSULE_DESTRUCTOR and CAPSULE_DESTRUCTOR_VERSIONED) never look at the error
# indicator; these ctypes ones, used without _speedups, cannot help it (ctypes checks for a
# pending error when it converts the capsule's address), so there that consumer's exception
# becomes SystemError and this one is printed as "Exception ignored" -- and that export's
# array stays alive. Their two calls go through a plain CDLL, which does not look at the
# indicator; neither sets an error for a capsule that IsValid accepted.
_raw = ctypes.CDLL(None)
_is_valid = _raw.PyCapsule_IsValid
_is_valid.restype = ctypes.c_int
_is_valid.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
_get_pointer = _raw.PyCapsule_GetPointer
_get_pointer.restype = ctypes.c_void_p
_get_pointer.argtypes = [ctypes.c_void_p, ctypes.c_char_p]


def _destructor_for(name):
    @ctypes.CFUNCTYPE(None, ctypes.c_void_p)
    def destructor(capsule):
        # Only a capsule nobody consumed still has its first name.
        if _is_valid(capsule, name):
            p = _get_pointer(capsule, name)
            if p:
                _call_deleter(p, name)
    return destructor


_capsule_destructor = _destructor_for(LEGACY)
_capsule_destructor_versioned = _destructor_for(VERSIONED)
_DESTRUCTOR = {
    LEGACY: getattr(speedups, "CAPSULE_DESTRUCTOR", None)
    or ctypes.cast(_capsule_destructor, ctypes.c_void_p).value,
    VERSIONED: getattr(speedups, "CAPSULE_DESTRUCTOR_VERSIONED", None)
    or ctypes.cast(_capsule_destructor_versioned, ctypes.c_void_p).value,
}


def wants_versioned(max_version):
    """Whether a consumer's max_version (None, or a (major, minor) tuple) takes DLPack 1.x."""
    if max_version is None:
        return False
    try:
        major = int(max_version[0])
    except (TypeError, ValueError, IndexError):
        raise TypeError("__dlpack__: max_version is a (major, minor) tuple, not %r"
                        % (max_version,)) from None
    return major >= VERSION[0]


def plan(own, dl_device, copy):
    """What __dlpack__ exports for a consumer's dl_device and copy, the array being on DLPack
    device `own`: "view" (the array itself), "copy" (a copy on its device) or "host" (a copy
    in host memory, kDLCPU). BufferError for a device devarray cannot export to, or for
    copy=False when only a copy could serve."""
    if copy is not None and not isinstance(copy, bool):
        raise TypeError("__dlpack__: copy is True, False or None, not %r" % (copy,))
    if dl_device is not None:
        try:
            want = (int(dl_device[0]), int(dl_device[1]))
        except (TypeError, ValueError, IndexError):
            raise TypeError("__dlpack__: dl_device is a (device type, device id) tuple, not %r"
                            % (dl_device,)) from None
        if want != tuple(own):
            if want != (KDL_CPU, 0):
                raise BufferError("__dlpack__: the array is on DLPack device %r; devarray "
                                  "exports it there or, as a copy, to the host (1, 0), not "
                                  "to %r" % (tuple(own), want))
            if copy is False:
                raise BufferError("__dlpack__: the array is on DLPack device %r, not the host "
                                  "(1, 0), and copy=False forbids the copy" % (tuple(own),))
            return "host"
    return "copy" if copy else "view"


def to_capsule(array_handle, stream_handle, consumer_stream, versioned=False, flags=0):
    """A capsule of a new DLPack tensor over the array (dv_array_to_dlpack[_versioned])."""
    out = ctypes.c_void_p()
    if versioned:
        if not has("dv_array_to_dlpack_versioned"):
            raise NotImplementedError("this libdevarray has no DLPack 1.x functions")
        check(lib.dv_array_to_dlpack_versioned(array_handle, stream_handle, consumer_stream,
                                               flags, ctypes.byref(out)), "__dlpack__")
    else:
        if not has("dv_array_to_dlpack"):
            raise NotImplementedError("this libdevarray has no DLPack functions")
        check(lib.dv_array_to_dlpack(array_handle, stream_handle, consumer_stream,
                                     ctypes.byref(out)), "__dlpack__")
    name = VERSIONED if versioned else LEGACY
    try:
        return _api.PyCapsule_New(out.value, name, _DESTRUCTOR[name])
    except BaseException:
        _call_deleter(out.value, name)
        raise


def export(handle, stream_handle, consumer, own, max_version, dl_device, copy):
    """__dlpack__ for the array `handle` on DLPack device `own`: see DeviceNDArray.__dlpack__.
    A copy is made on the array's stream (stream_handle), which the export then orders."""
    versioned = wants_versioned(max_version)
    what = plan(own, dl_device, copy)
    if what == "view":
        return to_capsule(handle, stream_handle, consumer, versioned)
    made = ctypes.c_void_p()
    if consumer is not None and consumer.value == _NO_SYNC:
        consumer = None  # the consumer cannot order itself after a copy it did not ask for
    if what == "host":
        check(lib.dv_copy_to_host(handle, None, stream_handle, ctypes.byref(made)), "__dlpack__")
        consumer = None  # a kDLCPU tensor: the export waits for the copy
    else:
        check(lib.dv_array_copy_new(handle, b"C", stream_handle, ctypes.byref(made)),
              "__dlpack__")
        if lib.dv_array_memory(made.value) == _MEM_HOST:
            consumer = None  # a copy of pinned or mapped memory is pageable: kDLCPU
    try:  # the tensor holds its own reference to the copy
        return to_capsule(made.value, stream_handle, consumer, versioned,
                          FLAG_IS_COPIED if versioned else 0)
    finally:
        lib.dv_array_release(made.value)


def capsule_of(obj):
    """The capsule from_dlpack consumes: `obj` itself, or what its __dlpack__ gives, asked
    for DLPack 1.x first and, from a producer that does not take max_version, for 0.x."""
    if not hasattr(obj, "__dlpack__"):
        return obj
    try:
        return obj.__dlpack__(max_version=VERSION)
    except TypeError:
        return obj.__dlpack__()


def from_capsule(ctx_handle, capsule):
    """A C array handle over the capsule's tensor ("dltensor" or "dltensor_versioned"); the
    capsule is marked used. A read-only versioned tensor is refused (BufferError), unused."""
    cap = id(capsule)
    out = ctypes.c_void_p()
    if _api.PyCapsule_IsValid(cap, VERSIONED):
        p = _api.PyCapsule_GetPointer(cap, VERSIONED)
        major, minor = (ctypes.c_uint32 * 2).from_address(p + _VERSION_OFFSET)
        flags = ctypes.c_uint64.from_address(p + _FLAGS_OFFSET).value
        if major == VERSION[0] and flags & FLAG_READ_ONLY:
            raise BufferError("from_dlpack: the producer marked the tensor read-only "
                              "(DLPACK_FLAG_BITMASK_READ_ONLY) and devarray's arrays are "
                              "writable (kernels may write any argument): pass a writable "
                              "array, or a copy")
        if not has("dv_array_from_dlpack_versioned"):
            raise NotImplementedError("this libdevarray has no DLPack 1.x functions")
        check(lib.dv_array_from_dlpack_versioned(ctx_handle, p, 0, ctypes.byref(out)),
              "from_dlpack")
        _api.PyCapsule_SetName(capsule, b"used_dltensor_versioned")
        return out.value
    if not _api.PyCapsule_IsValid(cap, LEGACY):
        raise ValueError("from_dlpack: not an unconsumed 'dltensor' or 'dltensor_versioned' "
                         "capsule")
    p = _api.PyCapsule_GetPointer(cap, LEGACY)
    check(lib.dv_array_from_dlpack(ctx_handle, p, ctypes.byref(out)), "from_dlpack")
    _api.PyCapsule_SetName(capsule, b"used_dltensor")
    return out.value
