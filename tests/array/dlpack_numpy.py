"""A real DLPack consumer and producer: NumPy (the system's python3).

NumPy reads a host-simulator device array through DLPack without a copy,
and devarray imports NumPy arrays (strided, negative strides, 0-d, size 0)
without a copy, calling NumPy's deleter exactly once, when the last view
goes.  devarray is reached through ctypes (PyDLL: calls keep the GIL, which
NumPy's deleter needs).  Usage: dlpack_numpy.py path/to/libdevarray.so
Exit 77 (skipped) without NumPy or without np.from_dlpack.
"""
import ctypes
import sys

try:
    import numpy as np
except ImportError:
    print("SKIPPED: NumPy is not installed for", sys.executable)
    sys.exit(77)
if not hasattr(np, "from_dlpack"):
    print("SKIPPED: NumPy", np.__version__, "has no from_dlpack")
    sys.exit(77)

lib = ctypes.PyDLL(sys.argv[1])
P = ctypes.c_void_p
I64 = ctypes.c_int64
lib.dv_last_error.restype = ctypes.c_char_p
lib.dv_status_name.restype = ctypes.c_char_p
lib.dv_dtype_get.restype = P
lib.dv_dtype_get.argtypes = [ctypes.c_int]
for name, args in {
    "dv_config_create": [ctypes.POINTER(P)],
    "dv_config_set": [P, ctypes.c_char_p, ctypes.c_char_p],
    "dv_context_create": [P, ctypes.POINTER(P)],
    "dv_context_destroy": [P],
    "dv_context_flush_deallocs": [P],
    "dv_host_array_wrap": [P, P, ctypes.c_int, ctypes.POINTER(I64), P, ctypes.POINTER(I64), ctypes.POINTER(P)],
    "dv_to_device": [P, P, P, ctypes.c_int, P, ctypes.POINTER(P)],
    "dv_array_to_dlpack": [P, P, P, ctypes.POINTER(P)],
    "dv_array_from_dlpack": [P, P, ctypes.POINTER(P)],
    "dv_array_native": [P, ctypes.POINTER(P), ctypes.POINTER(ctypes.c_size_t)],
    "dv_array_get_item": [P, ctypes.POINTER(I64), P, ctypes.c_size_t, P],
    "dv_array_set_item": [P, ctypes.POINTER(I64), P, ctypes.c_size_t, P],
    "dv_array_slice": [P, ctypes.c_int, P, ctypes.POINTER(P)],
}.items():
    getattr(lib, name).argtypes = args
    getattr(lib, name).restype = ctypes.c_int
lib.dv_array_release.argtypes = [P]
lib.dv_array_release.restype = None
lib.dv_config_destroy.argtypes = [P]
lib.dv_config_destroy.restype = None
lib.dv_array_size.argtypes = [P]
lib.dv_array_size.restype = I64

api = ctypes.pythonapi
api.PyCapsule_New.restype = ctypes.py_object
api.PyCapsule_New.argtypes = [P, ctypes.c_char_p, P]
api.PyCapsule_GetPointer.restype = P
api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
api.PyCapsule_SetName.restype = ctypes.c_int
api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]

DV_FLOAT64, DV_INT32 = 11, 3  # dv_type_id


def ok(rc, what):
    if rc != 0:
        raise AssertionError("%s: %s: %s" % (what, lib.dv_status_name(rc).decode(), lib.dv_last_error().decode()))


def shape_of(t):
    return (I64 * max(1, len(t)))(*t)


cfg = P()
ok(lib.dv_config_create(ctypes.byref(cfg)), "config")
ok(lib.dv_config_set(cfg, b"backend", b"host"), "backend")
ctx = P()
ok(lib.dv_context_create(cfg, ctypes.byref(ctx)), "context")
lib.dv_config_destroy(cfg)


class Exported:
    """What np.from_dlpack consumes: __dlpack__ gives a "dltensor" capsule."""

    def __init__(self, arr):
        self.arr = arr

    def __dlpack_device__(self):
        return (1, 0)  # kDLCPU: the host simulator's device memory is host memory

    def __dlpack__(self, stream=None):
        assert stream is None
        t = P()
        ok(lib.dv_array_to_dlpack(self.arr, None, None, ctypes.byref(t)), "to_dlpack")
        # NumPy renames a capsule it consumed and calls the tensor's deleter
        # itself; a capsule nobody consumed would leak the tensor (no
        # destructor here: this is a test harness, not the binding).
        return api.PyCapsule_New(t, b"dltensor", None)


def device_array(host):
    """A devarray device array with host's contents."""
    h = P()
    dt = lib.dv_dtype_get(DV_FLOAT64 if host.dtype == np.float64 else DV_INT32)
    ok(lib.dv_host_array_wrap(ctx, host.ctypes.data, host.ndim, shape_of(host.shape), dt,
                              shape_of(host.strides), ctypes.byref(h)), "wrap")
    d = P()
    ok(lib.dv_to_device(ctx, h, None, 1, None, ctypes.byref(d)), "to_device")
    lib.dv_array_release(h)
    return d


# ---- NumPy reads a devarray array, in place ----
src = np.arange(12, dtype=np.float64).reshape(3, 4) * 1.5
d = device_array(src)
view = np.from_dlpack(Exported(d))
assert view.shape == (3, 4) and view.dtype == np.float64, (view.shape, view.dtype)
assert np.array_equal(view, src), view
buf, off = P(), ctypes.c_size_t()
ok(lib.dv_array_native(d, ctypes.byref(buf), ctypes.byref(off)), "native")
assert view.ctypes.data == buf.value + off.value, "NumPy's array is not devarray's memory"
# A devarray write is seen by NumPy: no copy (NumPy 1.24 makes DLPack
# imports read-only, so the write goes the other way).
new = ctypes.c_double(-7.0)
ok(lib.dv_array_set_item(d, shape_of((2, 3)), ctypes.byref(new), 8, None), "set_item")
assert view[2, 3] == -7.0, view[2, 3]
src[2, 3] = -7.0
lib.dv_array_release(d)  # NumPy's array keeps the memory alive
ok(lib.dv_context_flush_deallocs(ctx), "flush")
assert view[1, 1] == src[1, 1]
# A strided view with a negative step.
d = device_array(np.ascontiguousarray(src))
DV_IDX_SLICE, DV_NONE = 0, -(2 ** 63)


class Index(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_int), ("start", I64), ("stop", I64), ("step", I64), ("index", I64)]


idx = (Index * 2)(Index(DV_IDX_SLICE, DV_NONE, DV_NONE, -1, 0), Index(DV_IDX_SLICE, DV_NONE, DV_NONE, 2, 0))
v = P()
ok(lib.dv_array_slice(d, 2, idx, ctypes.byref(v)), "slice")
nv = np.from_dlpack(Exported(v))
assert np.array_equal(nv, src[::-1, ::2]), nv
assert nv.strides == (-32, 16), nv.strides
lib.dv_array_release(v)
lib.dv_array_release(d)
del view, nv

# ---- devarray imports NumPy arrays, in place ----
def import_numpy(x):
    cap = x.__dlpack__()
    t = api.PyCapsule_GetPointer(cap, b"dltensor")
    a = P()
    ok(lib.dv_array_from_dlpack(ctx, t, ctypes.byref(a)), "from_dlpack")
    api.PyCapsule_SetName(cap, b"used_dltensor")  # devarray owns the tensor now
    return a


base = np.arange(24, dtype=np.float64).reshape(4, 6)
cases = [base, base[::2, 1::2], base[::-1, ::-3], base[1, 2, ...], base[2:2]]
for x in cases:
    refs = sys.getrefcount(x)
    a = import_numpy(x)
    assert sys.getrefcount(x) > refs, "the tensor holds NumPy's array"
    assert lib.dv_array_size(a) == x.size
    for ix in np.ndindex(x.shape):
        got = ctypes.c_double()
        ok(lib.dv_array_get_item(a, shape_of(ix), ctypes.byref(got), 8, None), "get_item")
        assert got.value == x[ix], (ix, got.value, x[ix])
    if x.size:
        ix = (0,) * x.ndim
        new = ctypes.c_double(1000.0 + x.size)
        ok(lib.dv_array_set_item(a, shape_of(ix), ctypes.byref(new), 8, None), "set_item")
        assert x[ix] == 1000.0 + x.size, "devarray's write is not in NumPy's array (a copy?)"
    lib.dv_array_release(a)
    ok(lib.dv_context_flush_deallocs(ctx), "flush")  # the deleter runs here, once
    assert sys.getrefcount(x) == refs, "NumPy's deleter did not run (or ran twice)"
    ok(lib.dv_context_flush_deallocs(ctx), "flush")
    assert sys.getrefcount(x) == refs

# A dtype devarray has no type for is refused and the capsule stays NumPy's.
x = np.zeros(3, dtype=np.bool_)
try:
    cap = x.__dlpack__()
except (BufferError, TypeError):
    pass  # NumPy 1.24 does not export bool
ok(lib.dv_context_destroy(ctx), "destroy")
print("dlpack with NumPy", np.__version__, ": export and import in place, deleter once")
