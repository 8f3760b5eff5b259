"""Conversions between NumPy and the C library: dtypes, shapes, the per-thread result slot."""

import ctypes
import numbers
import struct
import threading

import numpy as np

from ._lib import lib, check, dv_field_desc

_P = ctypes.c_void_p
_I64 = ctypes.c_int64

# ---- dtypes ---------------------------------------------------------------

_dtype_cache = {}
_dtype_lock = threading.RLock()  # reentrant: record fields are converted recursively


def _dv_dtype(dt):
    """The C dtype (a pointer, owned by the cache) for a NumPy dtype."""
    dt = np.dtype(dt)
    p = _dtype_cache.get(dt)
    if p is not None:
        return p
    with _dtype_lock:
        p = _dtype_cache.get(dt)
        if p is not None:
            return p
        if dt.names is not None:
            p = _record_dtype(dt)
        else:
            if dt.subdtype is not None or dt.byteorder == (">" if np.little_endian else "<"):
                raise TypeError("devarray: unsupported dtype %s (native-order numeric or "
                                "record dtypes only)" % dt)
            p = lib.dv_dtype_from_name(dt.name.encode())
            if not p:
                raise TypeError("devarray: unsupported dtype %s" % dt)
        _dtype_cache[dt] = p
        return p


def _record_dtype(dt):
    n = len(dt.names)
    fields = (dv_field_desc * n)()
    keep = []
    for i, name in enumerate(dt.names):
        fdt, off = dt.fields[name][:2]
        shape = ()
        if fdt.subdtype is not None:
            fdt, shape = fdt.subdtype
        sub = _dv_dtype(fdt) if fdt.names is None else _record_dtype_cached(fdt)
        enc = name.encode()
        shp = (_I64 * max(len(shape), 1))(*shape)
        keep += [enc, shp]
        fields[i].name = enc
        fields[i].dtype = sub
        fields[i].offset = off
        fields[i].ndim = len(shape)
        fields[i].shape = ctypes.cast(shp, ctypes.POINTER(_I64))
    out = _P()
    check(lib.dv_dtype_record_create(fields, n, dt.itemsize, ctypes.byref(out)),
          "record dtype %s" % dt)
    return out.value


def _record_dtype_cached(dt):
    p = _dtype_cache.get(dt)
    if p is None:
        p = _record_dtype(dt)
        _dtype_cache[dt] = p
    return p


def _np_dtype(p):
    """The NumPy dtype of a C dtype."""
    tid = lib.dv_dtype_id(p)
    if tid != 14:
        return np.dtype(lib.dv_dtype_name(p).decode())
    names, formats, offsets = [], [], []
    f = dv_field_desc()
    for i in range(lib.dv_dtype_field_count(p)):
        check(lib.dv_dtype_field(p, i, ctypes.byref(f)))
        sub = _np_dtype(f.dtype)
        if f.ndim:
            sub = np.dtype((sub, tuple(f.shape[j] for j in range(f.ndim))))
        names.append(f.name.decode())
        formats.append(sub)
        offsets.append(f.offset)
    return np.dtype({"names": names, "formats": formats, "offsets": offsets,
                     "itemsize": lib.dv_dtype_itemsize(p)})


def _shape_tuple(shape):
    if isinstance(shape, numbers.Integral):
        return (int(shape),)
    return tuple(int(s) for s in shape)


_I64_ARRAYS = [_I64 * n for n in range(33)]


def _i64(seq):
    return _I64_ARRAYS[len(seq)](*seq) if seq else None


_PACK = [struct.Struct("=%dq" % n).pack for n in range(33)]
_dtype_by_arg = {}  # what the caller passed as dtype -> (np.dtype, C dtype)


class _Out(threading.local):
    """A result slot per thread: a c_void_p and its byref, made once."""

    def __init__(self):
        self.p = _P()
        self.ref = ctypes.byref(self.p)


_out = _Out()


def _dtype_pair(dtype):
    try:
        ent = _dtype_by_arg.get(dtype)
    except TypeError:  # unhashable
        ent = None
    if ent is None:
        dt = np.dtype(dtype)
        ent = (dt, _dv_dtype(dt))
        try:
            if len(_dtype_by_arg) < 256:
                _dtype_by_arg[dtype] = ent
        except TypeError:
            pass
    return ent


def _pack_shape(shape):
    if len(shape) >= len(_PACK):
        return None  # more dimensions than an array has: the library refuses the count
    try:
        return _PACK[len(shape)](*shape)
    except struct.error:
        raise OverflowError("devarray: shape or strides %r do not fit int64" % (shape,)) from None
