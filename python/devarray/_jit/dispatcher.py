"""``devarray.jit``: Python kernels compiled to the dialect and launched through the kernel
layer (so the contract, the compiled-module cache, streams and the simulator's checks apply
as to any dialect kernel).

A ``Dispatcher`` compiles lazily, once per argument types (``overloads``), as Numba does:
the function is typed by Numba's front end (``frontend``), lowered to the dialect
(``lower``), built for the current context as a ``Module`` (whose built code devarray's disk
cache keeps), and launched with ``kernel[grid, block, stream, sharedmem](args)``.
"""

import ctypes
import inspect
import threading
from types import SimpleNamespace

import numpy as np
from numba.core import types, sigutils, typing, errors
from numba.core.typing.templates import AbstractTemplate, signature
from numba.np import numpy_support

from .. import _kernel
from .._array import DeviceNDArray, DeviceRecord
from .._context import current_context
from .._create import from_dlpack, as_cuda_array
from .._lib import lib, check, dv_arg, dv_launch_config, NotSupportedError
from .._stream import _stream_handle
from .._hostmem import _host_array
from . import frontend, lower
from .values import Arr, LoweringError, unlit, is_scalar

_P = ctypes.c_void_p
_lock = threading.RLock()


def _layout(a):
    c, f = a.is_c_contiguous(), a.is_f_contiguous()
    if c:
        return "C"
    if f:
        return "F"
    return "A"


def typeof_arg(a):
    """Numba's type of kernel argument `a` (devarray's arrays typed as Numba types its own
    device arrays)."""
    if isinstance(a, DeviceRecord):
        return numpy_support.from_dtype(a.dtype)
    if isinstance(a, DeviceNDArray):
        return types.Array(numpy_support.from_dtype(a.dtype), a.ndim, _layout(a))
    if isinstance(a, bool):
        return types.boolean
    if isinstance(a, int):
        if -(1 << 63) <= a < (1 << 63):
            return types.int64
        if 0 <= a < (1 << 64):
            return types.uint64
        raise OverflowError("kernel argument %d fits no 64-bit integer" % a)
    if isinstance(a, float):
        return types.float64
    if isinstance(a, complex):
        return types.complex128
    if isinstance(a, np.ndarray):
        if a.ndim == 0:
            return numpy_support.from_dtype(a.dtype)
        return types.Array(numpy_support.from_dtype(a.dtype), a.ndim,
                           numpy_support.map_layout(a), readonly=not a.flags.writeable)
    if isinstance(a, np.generic):
        return numpy_support.from_dtype(a.dtype)
    if isinstance(a, tuple):
        return types.BaseTuple.from_types([typeof_arg(x) for x in a])
    if hasattr(a, "__cuda_array_interface__") or hasattr(a, "__dlpack__"):
        return typeof_arg(_foreign(a))
    raise TypeError("kernel argument of type %s: devarray.jit takes device arrays, NumPy "
                    "arrays, numbers, bools and tuples of them" % type(a).__name__)


def _foreign(a):
    """A foreign array as a device array over its memory (no copy): through
    __cuda_array_interface__ (synchronizing on its stream, as Numba does), else __dlpack__."""
    if hasattr(a, "__cuda_array_interface__"):
        return as_cuda_array(a)
    return from_dlpack(a)


def _parse_sig(sig):
    args, rt = sigutils.normalize_signature(sig)
    return tuple(args), rt


class _Compiled:
    """One specialization: its argument types, its C source and its modules by context."""

    def __init__(self, disp, argtypes, tir, program, source, name, uses_dyn):
        self.disp, self.argtypes, self.tir = disp, argtypes, tir
        self.program, self.source, self.name = program, source, name
        self.uses_dyn = uses_dyn
        self.modules = {}
        self.signature = signature(types.void, *argtypes)
        # the launch's arguments in the kernel's parameter order: (argument index, path
        # into nested tuples, kind, type); a tuple's elements are parameters of their own
        self.leaves = []
        self.nparams = 1 if uses_dyn else 0
        for i, t in enumerate(argtypes):
            self._leaves(i, (), unlit(t))
        self.noargs = self.nparams == 0  # lower.py's dv__noargs
        if self.noargs:
            self.nparams = 1

    def _leaves(self, i, path, t):
        if isinstance(t, types.BaseTuple):
            for k, x in enumerate(t.types):
                self._leaves(i, path + (k,), unlit(x))
            return
        if isinstance(t, types.Array) and t.layout == "C" and not isinstance(
                t.dtype, types.Record):
            kind = "carray"  # DV_ARRAY and its extents (lower.py)
            self.nparams += 1 + t.ndim
        elif isinstance(t, types.Array):
            kind = "array"
            self.nparams += 1
        elif isinstance(t, types.Record):
            kind = "record"
            self.nparams += 1
        elif isinstance(t, types.Complex):
            kind = "complex"  # its two parts (lower.py)
            self.nparams += 2
        else:
            kind = "scalar"
            self.nparams += 1
        self.leaves.append((i, path, kind, t))

    @property
    def _type_annotation(self):
        """Numba's typing of this specialization (``typemap``: variable -> Numba type,
        ``calltypes``), as Numba's compile results carry it."""
        return SimpleNamespace(typemap=self.tir.typemap, calltypes=self.tir.calltypes,
                               func_ir=self.tir.func_ir)

    def kernel(self):
        ctx = current_context()
        k = self.modules.get(id(ctx))
        if k is None or k[0] is not ctx:
            opts = self.disp.options
            mod = _kernel.Module(self.source, name=self.disp.py_func.__code__.co_filename,
                                 constants=self.program.constants or None,
                                 debug=bool(opts.get("debug")), cache=opts.get("cache", True))
            k = (ctx, mod, mod.get(self.name))
            self.modules[id(ctx)] = k
        return k[2]


_TYPE_IDS = _kernel._TYPE_IDS


class Dispatcher:
    """A kernel compiled from Python: ``kernel[grid, block](args)``."""

    def __init__(self, pyfunc, sigs=None, targetoptions=None):
        self.py_func = pyfunc
        self.options = dict(targetoptions or {})
        self.overloads = {}
        self._by_key = {}
        self._last_cfg = None
        self.__name__ = getattr(pyfunc, "__name__", "kernel")
        self.__doc__ = getattr(pyfunc, "__doc__", None)
        self.__wrapped__ = pyfunc
        self.__module__ = getattr(pyfunc, "__module__", None)
        self._specialized = False
        for s in sigs or ():
            args, rt = _parse_sig(s)
            if rt is not None and rt not in (types.none, types.void):
                raise TypeError("a kernel returns nothing: its signature's return type must "
                                "be void, not %s" % rt)
            self.compile(args)
        if sigs:
            self._specialized = len(sigs) == 1

    def __repr__(self):
        return "<devarray.jit kernel %s>" % self.__name__

    # ---- compilation -----------------------------------------------------------------

    def compile(self, argtypes):
        """Compile for `argtypes` (Numba types, or a signature string); returns the
        specialization (cached)."""
        if isinstance(argtypes, str):
            argtypes, rt = _parse_sig(argtypes)
        argtypes = tuple(unlit(t) for t in argtypes)
        with _lock:
            c = self.overloads.get(argtypes)
            if c is not None:
                return c
            if self._specialized:
                raise TypeError("%s was compiled for %s only (a signature was given); "
                                "called with %s" % (self.__name__,
                                                    list(self.overloads)[0], argtypes))
            tir = frontend.typed_ir(self.py_func, argtypes)
            if unlit(tir.return_type) not in (types.none, types.void):
                raise TypeError("kernel %s returns %s: a kernel must return None "
                                "(write results into an array)" % (self.__name__,
                                                                   tir.return_type))
            prog = lower.Program()
            name = _cname(self.__name__)
            fl = lower.FunctionLowering(prog, tir, name, "kernel")
            text = fl.lower()
            src = prog.source("#line %d \"%s\"\n%s" % (
                self.py_func.__code__.co_firstlineno,
                self.py_func.__code__.co_filename.replace("\\", "/"), text))
            c = _Compiled(self, argtypes, tir, prog, src, name, getattr(fl, "uses_dynshared",
                                                                         False))
            self.overloads[argtypes] = c
            return c

    def bind(self):
        """Numba's bind(): build every compiled specialization for the current context now
        (else the first launch does)."""
        for c in self.overloads.values():
            c.kernel()

    def specialize(self, *args):
        """A kernel compiled for the types of `args` only (Numba's specialize)."""
        argtypes = tuple(typeof_arg(a) for a in args)
        d = Dispatcher(self.py_func, None, self.options)
        d.compile(argtypes)
        d._specialized = True
        return d

    @property
    def definitions(self):
        return dict(self.overloads)

    @property
    def specializations(self):
        return dict(self.overloads)

    def inspect_types(self):
        return {k: v.tir.typemap for k, v in self.overloads.items()}

    def inspect_source(self, signature=None):
        """The generated dialect source: of `signature` (argument types or a string), or
        a dict {argument types: source} of every specialization."""
        if signature is None:
            return {k: v.source for k, v in self.overloads.items()}
        if isinstance(signature, str):
            signature = _parse_sig(signature)[0]
        return self.compile(tuple(signature)).source

    # ---- launches --------------------------------------------------------------------

    def __getitem__(self, config):
        if not isinstance(config, tuple) or not 2 <= len(config) <= 4:
            raise ValueError("launch configuration must be [grid, block[, stream[, "
                             "dynamic_shared_bytes]]]")
        last = self._last_cfg
        if last is not None and last[0] == config:
            return last[1]
        cfg = _Configured(self, *config)
        try:
            hash(config)
            self._last_cfg = (config, cfg)
        except TypeError:
            pass
        return cfg

    def configure(self, grid, block, stream=0, sharedmem=0):
        return _Configured(self, grid, block, stream, sharedmem)

    def forall(self, ntasks, tpb=0, stream=0, sharedmem=0):
        """A 1-D launch of `ntasks` threads (tpb: threads per block, 0: 128)."""
        ntasks = int(ntasks)
        if ntasks < 0:
            raise ValueError("Can't create ForAll with negative task count: %d" % ntasks)
        tpb = tpb or 128
        return _Configured(self, max(1, (ntasks + tpb - 1) // tpb), tpb, stream, sharedmem)

    def __call__(self, *args, **kws):
        raise TypeError("a kernel is launched with a configuration: kernel[blocks, "
                        "threads](args...)")

    def _specialization(self, args):
        key = tuple(_fast_key(a) for a in args)
        c = self._by_key.get(key)
        if c is None:
            actual = tuple(typeof_arg(a) for a in args)
            c = self.overloads.get(actual)
            if c is None and self._specialized:
                for sig, cand in self.overloads.items():
                    if len(sig) == len(actual) and all(_converts(a, t) for a, t in
                                                       zip(actual, sig)):
                        c = cand
                        break
            if c is None:
                c = self.compile(actual)
            self._by_key[key] = c
        return c


def _converts(actual, param):
    """Whether an argument of type `actual` may be passed for `param` (an explicit
    signature's): arrays of its dtype and rank in a layout it takes, numbers to numbers."""
    if isinstance(param, types.Array):
        return isinstance(actual, types.Array) and actual.dtype == param.dtype and \
            actual.ndim == param.ndim and (param.layout == "A" or actual.layout == param.layout
                                           or actual.ndim == 1 and param.layout in "CF"
                                           and actual.layout in "CF")
    if isinstance(param, (types.Integer, types.Float, types.Boolean)):
        return isinstance(actual, (types.Integer, types.Float, types.Boolean)) and not (
            isinstance(param, types.Integer) and isinstance(actual, types.Float))
    return actual == param


def _fast_key(a):
    t = type(a)
    if t is DeviceNDArray or isinstance(a, DeviceNDArray):
        return (t, a.dtype, a.ndim, _layout(a))
    if t is np.ndarray:
        return (t, a.dtype, a.ndim, numpy_support.map_layout(a), a.flags.writeable)
    if t is int:
        return int if -(1 << 63) <= a < (1 << 63) else (int, typeof_arg(a))
    if t in (float, bool, complex):
        return t
    if isinstance(a, np.generic):
        return (t, a.dtype)
    if t is tuple:
        return (t,) + tuple(_fast_key(x) for x in a)
    return (t, typeof_arg(a))  # the type itself (an id could be reused by another object)


def _cname(name):
    c = "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in name)
    if not c or c[0].isdigit() or lower.reserved(c):
        c = "py_" + c
    return c


class _Configured:
    __slots__ = ("disp", "cfg", "cfgref", "stream", "sharedmem")

    def __init__(self, disp, grid, block, stream=0, sharedmem=0):
        self.disp = disp
        g, b = _kernel._dim3(grid, "grid"), _kernel._dim3(block, "block")
        cfg = dv_launch_config()
        cfg.grid.x, cfg.grid.y, cfg.grid.z = g
        cfg.block.x, cfg.block.y, cfg.block.z = b
        sharedmem = int(sharedmem)
        if sharedmem < 0:
            raise ValueError("dynamic shared bytes must be >= 0")
        cfg.dynamic_shared = sharedmem
        cfg.stream = _stream_handle(stream)
        self.cfg, self.cfgref = cfg, ctypes.byref(cfg)
        self.stream, self.sharedmem = stream, sharedmem

    def __call__(self, *args):
        spec = self.disp._specialization(args)
        k = spec.kernel()
        if len(args) != len(spec.argtypes):
            raise TypeError("%s takes %d arguments, %d given" % (
                self.disp.__name__, len(spec.argtypes), len(args)))
        n = spec.nparams
        cargs = (dv_arg * max(n, 1))()
        keep, release, after = [], [], []
        try:
            j = 0
            for i, path, kd, t in spec.leaves:
                a = args[i]
                for p in path:
                    a = a[p]
                if kd == "carray":
                    shape = _array_arg(cargs[j], a, keep, release, _kernel.ARG_ARRAY, after,
                                       self.stream)
                    j += 1
                    for s in shape:
                        _shape_arg(cargs[j], s, keep)
                        j += 1
                elif kd == "array":
                    _array_arg(cargs[j], a, keep, release, _kernel.ARG_VIEW, after,
                               self.stream)
                    j += 1
                elif kd == "record":
                    _record_arg(cargs[j], a, keep, release, after)
                    j += 1
                elif kd == "complex":
                    ft = types.float32 if t == types.complex64 else types.float64
                    z = complex(a)
                    _scalar_arg(cargs[j], z.real, ft, keep)
                    _scalar_arg(cargs[j + 1], z.imag, ft, keep)
                    j += 2
                else:
                    _scalar_arg(cargs[j], a, t, keep)
                    j += 1
            if spec.uses_dyn:
                _scalar_arg(cargs[j], self.sharedmem, types.int64, keep)
                j += 1
            if spec.noargs:
                _scalar_arg(cargs[j], 0, types.int32, keep)
                j += 1
            st = _kernel._launch(k.handle, self.cfgref, n, cargs)
            if st:
                check(st, "launch " + self.disp.__name__)
            for f in after:
                f()
        finally:
            for h in release:
                lib.dv_array_release(h)
        if self.stream:
            self.stream._hold(keep)


def _array_arg(c, a, keep, release, kind=_kernel.ARG_VIEW, after=None, stream=0):
    """Fill c for array argument a (a DV_VIEW, or with kind ARG_ARRAY a DV_ARRAY); returns
    the array's shape. A NumPy array the library cannot use in place (misaligned, swapped)
    goes through an aligned copy, written back into it after the launch."""
    if isinstance(a, DeviceNDArray):
        c.kind = kind
        c.array = a.handle
        c.dir = _kernel.DIR_DEFAULT
        keep.append(a)
        return a.shape
    if isinstance(a, np.ndarray):
        d = _kernel.DIR_INOUT if a.flags.writeable else _kernel.DIR_IN
        h, arr = _host_array(a)
        release.append(h)
        keep.append(arr)
        if arr is not a and d != _kernel.DIR_IN:
            if after is None:
                raise ValueError("kernel arguments: a NumPy array must be aligned and in "
                                 "native byte order to be written back")

            def back(a=a, arr=arr):
                if stream:
                    stream.synchronize()
                a[...] = arr
            after.append(back)
        c.kind = kind
        c.array = h
        c.dir = d
        return a.shape
    f = _foreign(a)
    keep.append(a)
    return _array_arg(c, f, keep, release, kind)


def _record_arg(c, a, keep, release, after):
    """A record: a DeviceRecord as it is; a NumPy record copied in, and back after the
    launch (as Numba copies host arguments)."""
    if isinstance(a, DeviceNDArray):
        c.kind = _kernel.ARG_ARRAY
        c.array = a.handle
        c.dir = _kernel.DIR_DEFAULT
        keep.append(a)
        return
    host = np.array(a).reshape(1)
    h, arr = _host_array(host)
    release.append(h)
    keep.append(arr)
    c.kind = _kernel.ARG_ARRAY
    c.array = h
    c.dir = _kernel.DIR_INOUT

    def back():
        if isinstance(a, np.void) and a.dtype.names:
            for name in a.dtype.names:
                try:
                    a[name] = arr[0][name]
                except (TypeError, ValueError):
                    return
    after.append(back)


_CT = {types.int8: ctypes.c_int8, types.int16: ctypes.c_int16, types.int32: ctypes.c_int32,
       types.int64: ctypes.c_int64, types.uint8: ctypes.c_uint8, types.uint16: ctypes.c_uint16,
       types.uint32: ctypes.c_uint32, types.uint64: ctypes.c_uint64,
       types.float32: ctypes.c_float, types.float64: ctypes.c_double,
       types.boolean: ctypes.c_bool}
_SCALAR_IDS = {}
_I64_ID = _TYPE_IDS[np.dtype(np.int64)]
_U8_ID = _TYPE_IDS[np.dtype(np.uint8)]
_c_int64 = ctypes.c_int64
_addressof = ctypes.addressof


def _shape_arg(c, s, keep):
    v = _c_int64(s)
    c.kind = _kernel.ARG_SCALAR
    c.type = _I64_ID
    c.value = _addressof(v)
    keep.append(v)


def _scalar_arg(c, a, t, keep):
    """A scalar of Numba type t, converted as Numba converts a Python value to the
    signature's type."""
    t = unlit(t)
    if isinstance(t, types.Boolean):  # a byte parameter (lower.py: OpenCL has no bool ones)
        v = ctypes.c_uint8(1 if a else 0)
        c.kind = _kernel.ARG_SCALAR
        c.type = _U8_ID
        c.value = _addressof(v)
        keep.append(v)
        return
    ct = _CT.get(t)
    if ct is not None and type(a) in (int, float, bool):
        if isinstance(t, types.Integer) and isinstance(a, float):
            raise TypeError("kernel argument %r for an integer parameter" % (a,))
        v = ct(a)  # an int wraps to the parameter's width, as Numba converts it (ctypes)
        tid = _SCALAR_IDS.get(t)
        if tid is None:
            tid = _SCALAR_IDS[t] = _TYPE_IDS[numpy_support.as_dtype(t)]
        c.kind = _kernel.ARG_SCALAR
        c.type = tid
        c.value = _addressof(v)
        keep.append(v)
        return
    dt = numpy_support.as_dtype(t)
    v = np.array(a, dt)
    c.kind = _kernel.ARG_SCALAR
    c.type = _TYPE_IDS[v.dtype]
    c.value = v.__array_interface__["data"][0]
    keep.append(v)


# ---- device functions -------------------------------------------------------------------

class DeviceFunction:
    """A device function (``jit(device=True)``): called from kernels and from each other,
    compiled for each call's argument types."""

    def __init__(self, pyfunc, sigs=None, targetoptions=None):
        self.py_func = pyfunc
        self.options = dict(targetoptions or {})
        self.__name__ = getattr(pyfunc, "__name__", "device_function")
        self.__doc__ = getattr(pyfunc, "__doc__", None)
        self.__wrapped__ = pyfunc
        self._typed = {}
        self._dv_device_function = self
        dev = self

        class _Template(AbstractTemplate):
            key = self

            def generic(tmpl, args, kws):
                if kws:
                    return None
                # the values' types first; the literal ones (a shape passed down to a
                # shared.array) when the function needs the constant
                plain = tuple(unlit(a) for a in args)
                if dev._declared:
                    # declared signatures: the call converts to the first that takes its
                    # arguments, as Numba casts them (no new specialization)
                    for sig_args, rt in dev._declared:
                        if len(sig_args) == len(plain) and all(
                                _converts(a, t) or isinstance(a, (types.Integer, types.Float))
                                and isinstance(t, (types.Integer, types.Float))
                                for a, t in zip(plain, sig_args)):
                            tir = dev.typed(tuple(sig_args))
                            return signature(rt if rt is not None else
                                             unlit(tir.return_type), *sig_args)
                try:
                    tir = dev.typed(plain)
                    return signature(unlit(tir.return_type), *plain)
                except errors.TypingError:
                    if plain == tuple(args):
                        raise
                tir = dev.typed(tuple(args))
                return signature(unlit(tir.return_type), *args)

        _Template.__name__ = "DeviceFunction_" + self.__name__
        self._template = _Template
        self._numba_type_ = types.Function(_Template)
        self._declared = []
        for s in sigs or ():
            args, rt = _parse_sig(s)
            self.typed(tuple(args))
            self._declared.append((tuple(args), rt))

    def __getitem__(self, config):
        raise RuntimeError("Cannot compile a device function as a kernel: %s was made with "
                           "jit(device=True)" % self.__name__)

    def inspect_sass(self, signature=None):
        raise RuntimeError("Cannot inspect SASS of a device function")

    def __repr__(self):
        return "<devarray.jit device function %s>" % self.__name__

    def __call__(self, *args, **kws):
        raise TypeError("%s is a device function: call it from a kernel (or call "
                        ".py_func from Python)" % self.__name__)

    def typed(self, argtypes):
        with _lock:
            tir = self._typed.get(argtypes)
            if tir is None:
                tir = frontend.typed_ir(self.py_func, argtypes)
                self._typed[argtypes] = tir
            return tir

    def lower_into(self, program, sig, args):
        """The C name of this function for `sig` in `program` (lowered there once)."""
        argtypes = tuple(sig.args)
        spaces = {i: v.space for i, v in enumerate(args) if isinstance(v, Arr)}
        key = (self, argtypes, tuple(sorted(spaces.items())))
        name = program.done.get(key)
        if name is not None:
            return name, spaces, program.dev_needs.get(name, [])
        tir = self.typed(argtypes)
        name = program.unique("py_" + _cname(self.__name__).replace("py_", "", 1))
        program.done[key] = name
        fl = lower.FunctionLowering(program, tir, name, "device", spaces)
        text = fl.lower()
        program.dev_needs[name] = list(fl.shared_params)
        if getattr(fl, "uses_dynshared", False):
            raise LoweringError("dynamic shared memory (shared.array(0, ...)) in a device "
                                "function: declare it in the kernel and pass it")
        program.functions.append("#line %d \"%s\"\n%s" % (
            self.py_func.__code__.co_firstlineno,
            self.py_func.__code__.co_filename.replace("\\", "/"), text))
        return name, spaces, program.dev_needs[name]

    @property
    def overloads(self):
        return dict(self._typed)


_cpu_functions = {}


def device_function_of(disp):
    """The device function made of a Numba CPU dispatcher's Python function (once each)."""
    d = _cpu_functions.get(id(disp))
    if d is None or d[0] is not disp:
        if not getattr(disp, "_can_compile", True):
            raise ValueError("using cpu function on device but its compilation is disabled")
        d = (disp, DeviceFunction(disp.py_func, None, {}))
        _cpu_functions[id(disp)] = d
    return d[1]


# ---- the decorator ----------------------------------------------------------------------

_OPTIONS = {"device", "debug", "inline", "fastmath", "lineinfo", "opt", "cache", "link",
            "max_registers", "boundscheck", "forceinline"}


def jit(func_or_sig=None, device=False, inline=False, link=(), debug=None, opt=True,
        lineinfo=False, cache=False, **kws):
    """Numba's ``cuda.jit``: a Python function as a kernel (or, ``device=True``, a device
    function) of devarray's dialect, on every backend.

    Forms: ``@jit``, ``@jit("void(float32[:], int32)")`` or ``@jit(["sig", ...])``, ``@jit((types,
    ...))``, ``@jit(device=True)``. ``inline``, ``fastmath``, ``lineinfo``, ``opt``,
    ``max_registers`` are accepted (the dialect's compilers decide inlining and the
    floating-point contract is the dialect's: docs/python.md); ``debug=True`` builds the
    module with DV_BUILD_DEBUG (the host simulator's checks always on). ``link`` (PTX or
    CUDA C files) is not supported: NotImplementedError.
    """
    bad = set(kws) - _OPTIONS
    if bad:
        raise TypeError("jit() got unexpected keyword arguments %s" % sorted(bad))
    if link:
        raise NotImplementedError("jit(link=...): devarray kernels are written in Python or in "
                                  "its C dialect (devarray.Module), not linked from PTX")
    opts = {"debug": bool(debug), "inline": inline, "opt": opt, "lineinfo": lineinfo,
            "cache": True}
    opts.update({k: v for k, v in kws.items()})

    def make(fn, sigs):
        if not inspect.isfunction(fn):
            raise TypeError("jit() decorates a Python function, not %r" % (fn,))
        if device:
            return DeviceFunction(fn, sigs, opts)
        return Dispatcher(fn, sigs, opts)

    if func_or_sig is None:
        return lambda fn: make(fn, None)
    if inspect.isfunction(func_or_sig):
        return make(func_or_sig, None)
    sigs = func_or_sig
    if isinstance(sigs, (str, typing.Signature, tuple)):
        sigs = [sigs]
    return lambda fn: make(fn, list(sigs))


def compile_ptx(pyfunc, args, debug=False, lineinfo=False, device=False, fastmath=False,
                cc=None, opt=True):
    """Numba's compile_ptx: devarray makes no PTX of its own (a kernel becomes the dialect's
    source, which each backend's compiler builds): NotSupportedError. The dialect source is
    ``devarray.jit(pyfunc).inspect_source(args)``."""
    raise NotSupportedError(300, "compile_ptx: devarray.jit compiles Python kernels to its C "
                            "dialect, not to PTX; see Dispatcher.inspect_source()",
                            "compile_ptx")


def compile_ptx_for_current_device(pyfunc, args, debug=False, lineinfo=False, device=False,
                                   fastmath=False, opt=True):
    """Numba's compile_ptx_for_current_device: NotSupportedError, as compile_ptx."""
    return compile_ptx(pyfunc, args)
