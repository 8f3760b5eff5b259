"""Kernels from the dialect of <devarray/kernel.h>: Module, Kernel, launches; SmartArray."""

import ctypes
import numbers
import operator

import numpy as np

from ._array import DeviceNDArray, _hold, MEM_HOST
from ._stream import _stream_handle
from ._convert import _dv_dtype, _i64, _shape_tuple
from ._hostmem import _HostOwner, _host_array
from ._context import current_context
from . import _abi
from ._lib import lib, check, error, CompileError, dv_arg, dv_launch_config, dv_kernel_param

_P = ctypes.c_void_p

ARG_SCALAR, ARG_ARRAY, ARG_VIEW, ARG_SMART, ARG_SMART_VIEW = (
    _abi.DV_ARG_SCALAR, _abi.DV_ARG_ARRAY, _abi.DV_ARG_VIEW, _abi.DV_ARG_SMART,
    _abi.DV_ARG_SMART_VIEW)
DIR_DEFAULT, DIR_IN, DIR_OUT, DIR_INOUT = (_abi.DV_DIR_DEFAULT, _abi.DV_DIR_IN, _abi.DV_DIR_OUT,
                                           _abi.DV_DIR_INOUT)

_DTYPES = [np.dtype(n) for n in _abi.TYPE_NAMES]  # in dv_type_id order
_TYPE_IDS = {d: i for i, d in enumerate(_DTYPES)}
_I32 = np.dtype(np.int32)


class Arg:
    """How to pass an array argument: ``Arg(a, view=True)`` for a DV_VIEW(T, name)
    parameter (shape and strides too), ``dir="in" | "out" | "inout"`` for what the kernel
    does with a host or smart array (what a launch copies). ``In(a)``, ``Out(a)``,
    ``InOut(a)`` and ``View(a)`` are shorthands."""

    __slots__ = ("obj", "view", "dir")

    def __init__(self, obj, view=False, dir="inout"):
        self.obj = obj
        self.view = bool(view)
        try:
            self.dir = {"inout": DIR_INOUT, "in": DIR_IN, "out": DIR_OUT}[dir]
        except KeyError:
            raise ValueError("dir must be 'in', 'out' or 'inout', not %r" % (dir,)) from None


def In(a, view=False):
    return Arg(a, view, "in")


def Out(a, view=False):
    return Arg(a, view, "out")


def InOut(a, view=False):
    return Arg(a, view, "inout")


def View(a, dir="inout"):
    return Arg(a, True, dir)


class Module:
    """A kernel program built for the current context (dv_program_build).

    ``source``: the kernel source (the dialect of docs/kernels.md). ``options``: extra
    compiler options, a string for the current backend or a dict {backend: options}.
    ``defines``: {name: value or None}. ``constants``: {name: NumPy array} (Numba's
    const.array_like: read-only arrays inside kernels). ``name``: the source's name in
    compiler messages. ``debug``, ``cache``: build flags. CompileError (with ``.log``) on
    a compile error.
    """

    def __init__(self, source, options=None, defines=None, constants=None, name="kernel",
                 debug=False, cache=True):
        ctx = current_context()
        self._ctx = ctx
        self.handle = None
        p = _P()
        check(lib.dv_program_create(ctx.handle, name.encode(), source.encode(),
                                    ctypes.byref(p)), "Module")
        try:
            for k, v in (defines or {}).items():
                check(lib.dv_program_define(p, k.encode(),
                                            None if v is None else str(v).encode()), "define")
            if isinstance(options, str):
                options = {ctx.backend: options}
            for be, opt in (options or {}).items():
                check(lib.dv_program_options(p, be.encode(), opt.encode()), "options")
            for k, arr in (constants or {}).items():
                h, _ = _host_array(np.ascontiguousarray(arr))
                try:
                    check(lib.dv_program_constant(p, k.encode(), h), "constant " + k)
                finally:
                    lib.dv_array_release(h)
            m = _P()
            st = lib.dv_program_build(p, (1 if debug else 0) | (0 if cache else 2),
                                      ctypes.byref(m))
            if st:
                e = error(st, "build " + name)
                if isinstance(e, CompileError):
                    e.log = (lib.dv_program_log(p) or b"").decode(errors="replace")
                raise e
            self.handle = m.value
        finally:
            lib.dv_program_destroy(p)
        self._kernels = {}

    def get(self, name):
        """The kernel `name` (ArgumentError naming it when the module has none)."""
        k = self._kernels.get(name)
        if k is None:
            out = _P()
            check(lib.dv_module_kernel(self.handle, name.encode(), ctypes.byref(out)),
                  "get")
            k = self._kernels[name] = Kernel(self, out.value, name)
        return k

    def set_constant(self, name, ary, stream=0):
        """Replace constant array `name` (ordered on `stream`)."""
        if isinstance(ary, DeviceNDArray):
            check(lib.dv_module_set_constant(self.handle, name.encode(), ary.handle,
                                             _stream_handle(stream)), "set_constant")
            return
        h, arr = _host_array(ary)
        try:
            check(lib.dv_module_set_constant(self.handle, name.encode(), h,
                                             _stream_handle(stream)), "set_constant")
        finally:
            lib.dv_array_release(h)
        _hold(stream, arr)

    def __del__(self):
        if self.handle and lib is not None:
            lib.dv_module_release(self.handle)
            self.handle = None


_UINT32_MAX = (1 << 32) - 1
_SIZE_MAX = (1 << (8 * ctypes.sizeof(ctypes.c_size_t))) - 1


def _dim3(v, what):
    """1 to 3 integer extents, each checked against dv_dim3's uint32_t before the call
    (ctypes would silently keep the low 32 bits: 2**32 + 3 blocks ran 3)."""
    if isinstance(v, numbers.Integral):
        v = (v,)
    try:
        v = tuple(operator.index(x) for x in v)
    except TypeError:
        raise TypeError("%s must be 1 to 3 integer extents, not %r" % (what, v)) from None
    if not 1 <= len(v) <= 3 or min(v) < 1:
        raise ValueError("%s must be 1 to 3 positive extents, not %r" % (what, v))
    if max(v) > _UINT32_MAX:
        raise OverflowError("%s extent %d does not fit the launch configuration's uint32 "
                            "(at most %d)" % (what, max(v), _UINT32_MAX))
    return v + (1,) * (3 - len(v))


class Kernel:
    """A kernel of a Module; ``kernel[grid, block, stream, dynamic_shared_bytes](args...)``.

    Arguments: device arrays (passed as DV_ARRAY parameters; ``View(a)`` for DV_VIEW),
    NumPy arrays (copied to the device before and back after, by the library, as Numba
    does; In/Out say which way; pinned/mapped/managed arrays from this package are used as
    what they are: mapped and managed memory is not copied), SmartArray, and scalars.
    Scalars: a NumPy scalar passes its own dtype (the library refuses one that does not
    match the parameter: no conversion, as in C). A Python int, float or bool takes the
    type of its parameter as the kernel declares it (``params``), as Numba types
    arguments from the signature: an int fits any integer or floating-point parameter
    (OverflowError when it does not fit), a float any floating-point one (TypeError for an
    integer parameter), a bool a bool or integer one.
    """

    def __init__(self, module, handle, name):
        self._module = module
        self.handle = handle
        self.name = name
        self.params = []
        # per parameter: an array or view the kernel may write (its elements not const)
        self._pwrites = []
        for i in range(max(lib.dv_kernel_num_params(handle), 0)):
            p = dv_kernel_param()
            check(lib.dv_kernel_param_info(handle, i, ctypes.byref(p)), "param_info")
            dt = _DTYPES[p.type] if 0 <= p.type < len(_DTYPES) else None
            self.params.append((("array", "view", "scalar")[p.kind - 1], dt,
                                p.name.decode(), p.decl.decode()))
            self._pwrites.append(p.kind != 3 and not p.is_const)
        # per parameter: the NumPy dtype a Python scalar converts to (None: none known)
        self._ptypes = [dt if kind == "scalar" else None for kind, dt, _, _ in self.params]
        # kernel[grid, block] launchers by configuration (issue 39: building one is ~3 us of
        # ctypes structures); only configurations of plain ints without a stream
        self._launchers = {}

    def __repr__(self):
        return "<devarray.Kernel %s>" % self.name

    def __getitem__(self, config):
        launcher = self._launchers.get(config) if _cacheable(config) else None
        if launcher is not None:
            return launcher
        if not isinstance(config, tuple) or not 2 <= len(config) <= 4:
            raise ValueError("launch configuration must be [grid, block[, stream[, "
                             "dynamic_shared_bytes]]]")
        launcher = _Launcher(self, *config)
        if _cacheable(config):
            if len(self._launchers) >= 32:
                self._launchers.clear()
            self._launchers[config] = launcher
        return launcher

    def configure(self, grid, block, stream=0, sharedmem=0):
        return _Launcher(self, grid, block, stream, sharedmem)

    def forall(self, ntasks, tpb=64, stream=0, sharedmem=0):
        """A 1-D launch covering `ntasks` threads."""
        return _Launcher(self, (int(ntasks) + tpb - 1) // tpb, tpb, stream, sharedmem)


def _cacheable(config):
    """Whether kernel[config]'s launcher may be reused: a tuple of exact ints (or tuples of
    them) for grid and block, no stream (0 or None) and an int of shared bytes -- values
    whose equality is their identity as a configuration (1.0 == 1, but 1.0 is refused)."""
    if type(config) is not tuple or not 2 <= len(config) <= 4:
        return False
    for v in config[:2]:
        if type(v) is not int and not (type(v) is tuple and all(type(x) is int for x in v)):
            return False
    if len(config) > 2 and not (config[2] is None or (type(config[2]) is int and config[2] == 0)):
        return False
    return len(config) < 4 or type(config[3]) is int


class _Launcher:
    __slots__ = ("k", "cfg", "stream", "_cfgref")

    def __init__(self, kernel, grid, block, stream=0, sharedmem=0):
        self.k = kernel
        g, b = _dim3(grid, "grid"), _dim3(block, "block")
        cfg = dv_launch_config()
        cfg.grid.x, cfg.grid.y, cfg.grid.z = g
        cfg.block.x, cfg.block.y, cfg.block.z = b
        sharedmem = operator.index(sharedmem)
        if sharedmem < 0:
            raise ValueError("dynamic shared bytes must be >= 0")
        if sharedmem > _SIZE_MAX:
            raise OverflowError("dynamic shared bytes %d do not fit a size_t" % sharedmem)
        cfg.dynamic_shared = sharedmem
        cfg.stream = _stream_handle(stream)
        self.cfg = cfg
        self._cfgref = ctypes.byref(cfg)
        self.stream = stream

    def __call__(self, *args):
        n = len(args)
        cargs = (dv_arg * max(n, 1))()
        keep = []
        release = []
        try:
            pt = self.k._ptypes
            for i, a in enumerate(args):
                if (isinstance(a, np.ndarray) and not a.flags.writeable and i < len(pt)
                        and self.k._pwrites[i]):
                    _read_only(self.k, i)
                _fill(cargs[i], a, keep, release, pt[i] if i < len(pt) else None)
            st = _launch(self.k.handle, self._cfgref, n, cargs)
            if st:
                raise _in_python_words(error(st, "launch " + self.k.name))
        finally:
            for h in release:
                lib.dv_array_release(h)
        if self.stream:
            self.stream._hold(keep)


_launch = lib.dv_kernel_launch


# The C library's words for what a kernel argument is, and the binding's (the launch's
# error path only): a Python user passes arrays, View(a) and NumPy scalars, not dv_arg kinds.
_C_WORDS = [
    ("(DV_ARG_ARRAY or DV_ARG_SMART)", "(a device or NumPy array, or a SmartArray)"),
    ("(DV_ARG_VIEW or DV_ARG_SMART_VIEW)", "(an array passed as View(a))"),
    ("smart array (DV_ARG_SMART_VIEW)", "SmartArray passed as View(a)"),
    ("smart array (DV_ARG_SMART)", "SmartArray"),
    ("array (DV_ARG_VIEW)", "array passed as View(a)"),
    ("array (DV_ARG_ARRAY)", "array"),
    ("pass it with DV_ARG_VIEW to a DV_VIEW(T, name) parameter, or make a dense copy "
     "(dv_array_copy_new)", "pass it as View(a) to a DV_VIEW(T, name) parameter, or pass a "
     "C-contiguous copy (np.ascontiguousarray on the host)"),
    ("pass it with DV_ARG_SMART_VIEW", "pass it as View(a)"),
    ("dv_program_define", "Module(..., defines={...})"),
    ("dv_module_release", "the module's release"),
    ("dv_kernel_retain", "a reference to the kernel"),
]
_C_SCALARS = {"BOOL": "np.bool_", "I8": "np.int8", "I16": "np.int16", "I32": "np.int32",
              "I64": "np.int64", "U8": "np.uint8", "U16": "np.uint16", "U32": "np.uint32",
              "U64": "np.uint64", "F16": "np.float16", "F32": "np.float32", "F64": "np.float64"}


def _in_python_words(err):
    """err (a launch's failure) with the library's C words for arguments in Python's."""
    if not err.args:
        return err
    msg = err.args[0]
    for c, py in _C_WORDS:
        msg = msg.replace(c, py)
    for c, py in _C_SCALARS.items():
        msg = msg.replace("(DV_ARG_%s)" % c, "(%s(...))" % py)
    err.args = (msg,) + err.args[1:]
    return err


def _read_only(k, i):
    """A read-only NumPy array for a parameter kernel k may write: its writes would be
    lost, so it is refused (In(a) says the writes are to be dropped)."""
    _, _, name, decl = k.params[i]
    raise ValueError("%s: argument %d (%s) is a read-only NumPy array (flags.writeable is "
                     "False) and the kernel may write it (%s is not const): pass a writeable "
                     "array, In(a) to drop the kernel's writes, or declare the elements const"
                     % (k.name, i, name, decl))


def _py_scalar(a, pt):
    """A Python int, float or bool as the NumPy scalar its parameter's dtype pt takes."""
    if isinstance(a, bool):
        if pt.kind not in "biu":
            raise TypeError("kernel argument %r: a bool for a %s parameter" % (a, pt))
        return np.array(int(a), pt)
    if isinstance(a, numbers.Integral):
        if pt.kind in "iu":
            info = np.iinfo(pt)
            if not info.min <= a <= info.max:
                raise OverflowError("kernel argument %d does not fit the parameter's %s"
                                    % (a, pt))
        elif pt.kind == "b":
            if a not in (0, 1):
                raise OverflowError("kernel argument %d for a bool parameter" % a)
        elif pt.kind != "f":
            raise TypeError("kernel argument %d for a %s parameter" % (a, pt))
        elif abs(a) > np.finfo(pt).max:
            raise OverflowError("kernel argument %d overflows the parameter's %s" % (a, pt))
        return np.array(a, pt)
    if isinstance(a, numbers.Real) and pt.kind == "f":
        with np.errstate(over="ignore"):
            v = np.array(a, pt)
        if np.isinf(v) and not np.isinf(a):
            raise OverflowError("kernel argument %r overflows the parameter's %s" % (a, pt))
        return v
    raise TypeError("kernel argument %r (%s) for a %s parameter" % (a, type(a).__name__, pt))


def _fill(c, a, keep, release, pt=None):
    t = type(a)
    if pt is not None and t in (int, float, bool):
        v = _py_scalar(a, pt)
        c.kind = ARG_SCALAR
        c.type = _TYPE_IDS[v.dtype]
        c.value = v.__array_interface__["data"][0]
        keep.append(v)
        return
    if t is int:  # the common case first: a C `int`
        if not -(1 << 31) <= a < (1 << 31):
            raise OverflowError("kernel argument %d does not fit an int (int32): pass "
                                "np.int64(...) for a dv_i64 parameter" % a)
        v = ctypes.c_int32(a)
        c.kind = ARG_SCALAR
        c.type = 3
        c.value = ctypes.addressof(v)
        keep.append(v)
        return
    view, d = False, DIR_DEFAULT
    if t is Arg:
        view, d, a = a.view, a.dir, a.obj
    if isinstance(a, DeviceNDArray):
        c.kind = ARG_VIEW if view else ARG_ARRAY
        c.array = a.handle
        c.dir = d
        keep.append(a)
    elif isinstance(a, SmartArray):
        c.kind = ARG_SMART_VIEW if view else ARG_SMART
        c.smart = a.handle
        c.dir = d
        keep.append(a)
    elif isinstance(a, np.ndarray) and a.ndim > 0 or isinstance(a, (list, tuple)):
        if not isinstance(a, np.ndarray):
            raise TypeError("kernel arguments: pass a NumPy array, not a %s"
                            % type(a).__name__)
        if not a.flags.writeable and d != DIR_IN:
            d = DIR_IN
        h, arr = _host_array(a)
        if arr is not a and d != DIR_IN:
            lib.dv_array_release(h)
            raise ValueError("kernel arguments: a NumPy array must be aligned and in native "
                             "byte order to be written back")
        release.append(h)
        keep.append(arr)
        c.kind = ARG_VIEW if view else ARG_ARRAY
        c.array = h
        c.dir = d
    else:
        if isinstance(a, np.ndarray):  # 0-d
            a = a[()]
        if isinstance(a, np.generic):
            v = np.array(a)
        elif isinstance(a, bool):
            v = np.array(int(a), np.int32)
        elif isinstance(a, numbers.Integral):
            if not -(1 << 31) <= a < (1 << 31):
                raise OverflowError("kernel argument %d does not fit an int (int32): pass "
                                    "np.int64(...) for a dv_i64 parameter" % a)
            v = np.array(a, np.int32)
        elif isinstance(a, numbers.Real):
            v = np.array(a, np.float32)
        elif isinstance(a, numbers.Complex):
            v = np.array(a, np.complex64)
        else:
            raise TypeError("unsupported kernel argument of type %s" % type(a).__name__)
        tid = _TYPE_IDS.get(v.dtype)
        if tid is None:
            raise TypeError("unsupported scalar kernel argument dtype %s" % v.dtype)
        c.kind = ARG_SCALAR
        c.type = tid
        c.value = v.__array_interface__["data"][0]
        keep.append(v)


# ---- smart arrays ---------------------------------------------------------

_WHERE = {"host": 0, "gpu": 1, "device": 1}


def _where(w):
    try:
        return _WHERE[w]
    except KeyError:
        raise ValueError("where must be 'host' or 'gpu' ('device'), not %r" % (w,)) from None


class SmartArray:
    """Numba's SmartArray over devarray's smart arrays (dv_smart_*): one array with a host
    and a device copy, moved only when the copy asked for is stale.

    ``SmartArray(obj=ndarray, copy=True)`` copies obj (copy=False adopts its memory: obj must
    be writeable (ValueError otherwise), stay alive, and writes to it must be announced
    with mark_changed('host')).
    ``SmartArray(shape=..., dtype=..., order=..., where='host'|'gpu')`` allocates one copy.
    ``get('host')`` gives a NumPy array, ``get('gpu')`` a DeviceNDArray; after writing one,
    call ``mark_changed(where)``. Kernel launches mark the device copy changed themselves
    (unless ``In(smart)``).
    """

    def __init__(self, obj=None, copy=True, shape=None, dtype=None, order=None, where="host",
                 stream=0):
        self.handle = None
        self._obj = None
        ctx = current_context()
        out = _P()
        if obj is not None:
            if isinstance(obj, DeviceNDArray):
                h = ctypes.c_void_p(lib.dv_array_retain(obj.handle))
                self._dtype = obj.dtype
                keep = obj
            else:
                if dtype is not None or order is not None:
                    obj = np.asarray(obj, dtype=dtype, order=order)
                h, keep = _host_array(obj)
                if not copy and not keep.flags.writeable:
                    # the smart array writes its host copy (get('host'), a stale copy
                    # refreshed from the device): never into read-only memory
                    lib.dv_array_release(h)
                    raise ValueError("SmartArray(copy=False): obj is read-only "
                                     "(flags.writeable is False); pass copy=True")
                self._dtype = keep.dtype
                h = ctypes.c_void_p(h)
            try:
                check(lib.dv_smart_from_array(h, 1 if copy else 0, _stream_handle(stream),
                                              ctypes.byref(out)), "SmartArray")
            finally:
                lib.dv_array_release(h)
            if not copy:
                self._obj = keep
        else:
            if shape is None:
                raise ValueError("SmartArray needs obj or shape")
            self._dtype = np.dtype(np.float64 if dtype is None else dtype)
            shp = _shape_tuple(shape)
            check(lib.dv_smart_create(ctx.handle, len(shp), _i64(shp), _dv_dtype(self._dtype),
                                      None, (order or "C").encode(), _where(where),
                                      _stream_handle(stream), ctypes.byref(out)), "SmartArray")
        self.handle = out.value

    @property
    def shape(self):
        nd = lib.dv_smart_ndim(self.handle)
        s = lib.dv_smart_shape(self.handle)
        return tuple(s[:nd]) if nd else ()

    @property
    def dtype(self):
        return self._dtype

    @property
    def ndim(self):
        return lib.dv_smart_ndim(self.handle)

    @property
    def size(self):
        return int(np.prod(self.shape, dtype=np.int64))

    def __len__(self):
        return self.shape[0]

    def is_current(self, where):
        return bool(lib.dv_smart_is_current(self.handle, _where(where)))

    def get(self, where="host", stream=0):
        """The copy in `where`, made current (a NumPy array for 'host', a DeviceNDArray for
        'gpu'/'device'). Getting does not mark it changed."""
        w = _where(where)
        out = _P()
        check(lib.dv_smart_get(self.handle, w, _stream_handle(stream), ctypes.byref(out)),
              "SmartArray.get")
        h = lib.dv_array_retain(out.value)
        if w == 1:
            return DeviceNDArray._from_handle(h, self._dtype, keep=self, stream=stream)
        if self._obj is not None and lib.dv_array_memory(h) == MEM_HOST:
            lib.dv_array_release(h)
            return self._obj
        return _HostOwner(h, self._dtype, keep=self, register=False).array(self._dtype)

    def host(self):
        return self.get("host")

    def gpu(self):
        return self.get("gpu")

    def mark_changed(self, where="host"):
        """Record that the copy in `where` was written: the other copy becomes stale.
        MisuseError when that copy is not current (get it first)."""
        check(lib.dv_smart_mark_changed(self.handle, _where(where)), "mark_changed")

    def __array__(self, dtype=None):
        a = np.array(self.get("host"))
        return a if dtype is None else a.astype(dtype)

    def __del__(self):
        if self.handle and lib is not None:
            lib.dv_smart_release(self.handle)
            self.handle = None
