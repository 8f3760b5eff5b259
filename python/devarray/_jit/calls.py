"""The calls a kernel makes, lowered to the dialect: thread indexing, shared, local and
constant arrays, barriers and their reductions, atomics, warp functions, ROC's names, bit
functions, builtins (range, len, min, max, abs, casts, round, slice, complex), math and cmath,
and device functions (specialized per argument types, their known arguments folded away)."""

import builtins
import math
import operator  # noqa: F401

import numpy as np
from numba.core import ir, types

from . import stubs
from .values import (S, K, Tup, Rng, Arr, Rec, NONE, LoweringError, ctype, elem_ctype,  # noqa
                     is_scalar, unlit, literal, paren as _p)
from .ops import (cast, truth, zero, constant, element, _items, _const_int, _c_strides,  # noqa
                  _b_slice, _chelper)

_nb = stubs.NUMBA
_atomic = _nb["atomic"]

_PURE_CALLS = None


def pure(fl, value):
    """Whether evaluating `value` has no effect (so its temporary may fold into its use)."""
    if isinstance(value, (ir.Const, ir.Global, ir.FreeVar, ir.Var, ir.Arg)):
        return True
    if not isinstance(value, ir.Expr):
        return False
    op = value.op
    if op in ("binop", "inplace_binop", "unary", "getattr", "static_getitem", "getitem",
              "build_tuple", "exhaust_iter", "cast", "typed_getitem"):
        if op == "binop" and value.fn in (operator.truediv, operator.floordiv, operator.mod,
                                          operator.pow):
            return True
        return True
    if op == "call":
        ft = fl.typemap.get(value.func.name)
        if isinstance(ft, types.NumberClass):
            return True
        if isinstance(ft, types.Function):
            key = ft.templates[0].key if ft.templates else None
            return key in pure_keys()
    return False


def pure_keys():
    """The functions whose calls have no effect (their temporaries may fold)."""
    global _PURE_CALLS
    if _PURE_CALLS is None:
        ks = set(v for v in _MATH.keys())
        ks.update([builtins.abs, builtins.min, builtins.max, builtins.int, builtins.float,
                   builtins.bool, builtins.len, builtins.round, _nb["grid"], _nb["gridsize"],
                   _nb["selp"], _nb["fma"], _nb["cbrt"], _nb["popc"], _nb["brev"], _nb["clz"],
                   _nb["ffs"]])
        for n in ("get_local_id", "get_global_id", "get_group_id", "get_local_size",
                  "get_global_size", "get_num_groups", "get_work_dim"):
            ks.add(stubs.ROC[n])
        _PURE_CALLS = ks
    return _PURE_CALLS




def call(fl, e, ty, loc, target):
    ft = unlit(fl.typemap[e.func.name])
    sig = fl.calltypes.get(e)
    args = [fl.value(a, loc) for a in e.args]
    kws = {k: fl.value(v, loc) for k, v in e.kws}
    if e.vararg is not None:
        raise fl.error("a call with *args in a kernel", loc)
    if isinstance(ft, types.BoundFunction):
        fv = fl.value(e.func, loc)
        if isinstance(fv, K) and isinstance(fv.value, tuple) and fv.value[0] == "conjugate":
            z = fv.value[1]
            if isinstance(z.ty, types.Complex):
                c = ctype(z.ty)
                return S("%s_make((%s).re, -(%s).im)" % (c, z.c, z.c), z.ty)
            return z
        raise fl.error("the method %s in a kernel" % ft.typing_key, loc)
    if isinstance(ft, types.NumberClass):
        t = unlit(ft.instance_type)
        if len(args) != 1:
            raise fl.error("%s() takes one value" % t, loc)
        return S(cast(fl, args[0], t, loc), t, nonneg=_nonneg_cast(args[0], t))
    if isinstance(ft, types.Function):
        key = ft.templates[0].key if ft.templates else ft.typing_key
        fn = _CALLS.get(key)
        if fn is not None:
            return fn(fl, args, kws, sig, ty, loc, target)
        if key in _MATH:
            return _math(fl, key, args, sig, loc)
        dev = getattr(key, "_dv_device_function", None)
        if dev is not None:
            return _device_call(fl, dev, args, sig, loc)
        raise fl.error("the function %s in a kernel" % getattr(key, "__name__", key), loc)
    dev = getattr(ft, "_dv_device_function", None)
    if dev is not None:
        return _device_call(fl, dev, args, sig, loc)
    if isinstance(ft, types.NumberClass):
        t = unlit(ft.instance_type)
        return S(cast(fl, args[0], t, loc), t)
    raise fl.error("calling a %s in a kernel" % ft, loc)


def static_arg(t):
    """The value a device function's parameter of type t has when known from its type
    alone (a literal, a function, a number class), else None."""
    if isinstance(t, types.Literal) and not isinstance(t, types.StringLiteral):
        v = t.literal_value
        if isinstance(v, (bool, int, float)):
            return S(literal(v, unlit(t)), unlit(t), v)
    if isinstance(t, types.Function) and t.templates:
        return K(t.templates[0].key)
    if isinstance(t, types.NumberClass):
        return K(t.instance_type)
    if isinstance(t, types.BaseTuple) and t.types and all(
            isinstance(x, types.IntegerLiteral) for x in t.types):
        return Tup([S(literal(x.literal_value, types.intp), types.intp, x.literal_value)
                    for x in t.types])
    if isinstance(t, (types.Omitted, types.NoneType)):
        return NONE
    return None


def shared_pointer(fl, key, et, total):
    """The C name of the shared array `key` (a device function's declaration) in function
    fl: declared by a kernel, received as a parameter by a device function."""
    cn = fl.shared_names.get(key)
    if cn is None:
        cn = fl._fresh("shared")
        fl.shared_names[key] = cn
        if fl.kind == "kernel":
            fl.hoisted.append("  DV_SHARED(%s, %s, %d);" % (et, cn, total))
        else:
            fl.shared_params.append((key, et, total, cn))
    return cn


def _device_call(fl, dev, args, sig, loc):
    name, spaces, needs = dev.lower_into(fl.p, sig, args)
    cargs = []

    def flat(v, t, nested):
        t = unlit(t)
        if isinstance(t, types.Array):
            if not isinstance(v, Arr):
                raise fl.error("an array argument that is not an array", loc)
            if nested and v.space != "global":
                raise fl.error("a tuple holding a %s array passed to a device function "
                               "(global arrays only)" % v.space, loc)
            cargs.append(v.ptr)
            cargs.extend(v.shape)
            cargs.extend(v.strides)
        elif isinstance(t, types.BaseTuple):
            for x, xt in zip(v.items, t.types):
                flat(x, xt, True)
        elif isinstance(t, types.Record):
            cargs.append(v.ptr if not v.ptr.startswith("(&") else
                         "(DV_GLOBAL_MEM unsigned char *)%s" % v.ptr)
        else:
            cargs.append(cast(fl, v, t, loc))

    for v, t in zip(args, sig.args):
        if static_arg(t) is not None:
            continue
        flat(v, t, False)
    for key, et, total, _ in needs:
        cargs.append(shared_pointer(fl, key, et, total))
    rt = unlit(sig.return_type)
    c = "%s(%s)" % (name, ", ".join(cargs))
    if rt in (types.none, types.void):
        fl.emit(c + ";", loc)
        return NONE
    if not is_scalar(rt):
        raise fl.error("a device function returning %s (numbers and bools only)" % rt, loc)
    return S(c, rt)


def _stmt(fl, text, loc):
    fl.emit(text + ";", loc)
    return NONE


def _dims(fl, args, what, loc):
    n = _const_int(args[0]) if args else None
    if n not in (1, 2, 3):
        raise fl.error("%s(ndim) takes 1, 2 or 3" % what, loc)
    return n


def _grid(fl, args, kws, sig, ty, loc, target):
    n = _dims(fl, args, "grid", loc)
    # Numba types these int32; the C expression stays the dialect's 64-bit id (a launch's
    # threads per dimension fit an int32, so the values are the same), which the simulator's
    # fast mode vectorizes where an int made from it would not (docs/kernels.md)
    items = [S("dv_global_id(%d)" % d, types.int32, nonneg=True) for d in range(n)]
    return items[0] if n == 1 else Tup(items)


def _gridsize(fl, args, kws, sig, ty, loc, target):
    n = _dims(fl, args, "gridsize", loc)
    items = [S("((dv_i32)dv_global_size(%d))" % d, types.int32, nonneg=True)
             for d in range(n)]
    return items[0] if n == 1 else Tup(items)


def _shape_of(fl, v, loc):
    if isinstance(v, Tup):
        out = [_const_int(x) for x in v.items]
    else:
        out = [_const_int(v)]
    if any(x is None for x in out):
        raise fl.error("an array shape known only at run time (shapes are constants)", loc)
    return out


def _decl_array(fl, args, kws, ty, loc, target, space):
    shape = kws.get("shape", args[0] if args else None)
    t = unlit(ty)
    dims = _shape_of(fl, shape, loc)
    name = fl.cname(target) if target else fl._fresh(space)
    fl.declared.add(target)
    if isinstance(t.dtype, types.Record):
        fl.p.record(t.dtype)
        isz = t.dtype.size
    else:
        isz = np.dtype(str(t.dtype) if not isinstance(t.dtype, types.Boolean) else "u1").itemsize
    et = elem_ctype(t.dtype)
    if space == "shared" and dims == [0]:
        fl.p.uses_dynshared = True
        fl.uses_dynshared = True
        first = not getattr(fl, "_dyn_begun", False)
        fl._dyn_begun = True
        dec = []
        if first:
            dec.append("  DV_DYN_SHARED_BEGIN();")
        else:
            dec.append("  dv__dyn_cur = 0; /* every dynamic shared array starts at 0 */")
        dec.append("  DV_DYN_SHARED_TAKE(%s, %s, dv__dynbytes / %d);" % (et, name, isz))
        fl.hoisted.extend(dec)
        n = "(dv__dynbytes / %d)" % isz
        return Arr(name, t, [n], [str(isz)], "shared", target or name)
    total = 1
    for d in dims:
        if d <= 0:
            raise fl.error("array length <= 0 (%s.array of shape %s)" % (space, tuple(dims)),
                           loc)
        total *= d
    if space == "shared" and fl.kind == "device":
        # OpenCL declares __local arrays in kernels only: the kernel declares it (once per
        # declaration, as Numba's shared arrays are per block) and passes it down
        fl.shared_params.append(((fl.name, name), et, total, name))
    else:
        macro = "DV_SHARED" if space == "shared" else "DV_LOCAL_ARRAY"
        fl.hoisted.append("  %s(%s, %s, %d);" % (macro, et, name, total))
    return Arr(name, t, [str(d) for d in dims], _c_strides(dims, isz), space, target or name)


def _shared_array(fl, args, kws, sig, ty, loc, target):
    return _decl_array(fl, args, kws, ty, loc, target, "shared")


def _local_array(fl, args, kws, sig, ty, loc, target):
    return _decl_array(fl, args, kws, ty, loc, target, "local")


def _const_array_like(fl, args, kws, sig, ty, loc, target):
    v = args[0] if args else kws.get("ndarray")
    if isinstance(v, Arr) and v.space == "constant":
        return v
    raise fl.error("const.array_like of something other than a global NumPy array", loc)


def _sync(fl, args, kws, sig, ty, loc, target):
    return _stmt(fl, "dv_syncthreads()", loc)


def _sync_reduce(kind):
    def f(fl, args, kws, sig, ty, loc, target):
        # a block-wide count of the predicate in shared memory, between barriers
        cnt = "dv__sync_count"
        if not getattr(fl, "_sync_count", False):
            fl._sync_count = True
            fl.hoisted.append("  DV_SHARED(dv_i32, %s, 1);" % cnt)
        p = truth(fl, args[0], loc)
        r = fl._fresh("sync")
        lin = ("(dv_thread_idx(0) + dv_block_dim(0) * (dv_thread_idx(1) + dv_block_dim(1) * "
               "dv_thread_idx(2)))")
        fl.emit("dv_syncthreads();", loc)
        fl.emit("if (%s == 0) %s[0] = 0;" % (lin, cnt), loc)
        fl.emit("dv_syncthreads();", loc)
        fl.emit("if (%s) dv_atomic_add_i32(&%s[0], 1);" % (p, cnt), loc)
        fl.emit("dv_syncthreads();", loc)
        fl.emit("dv_i32 %s = %s[0];" % (r, cnt), loc)
        fl.emit("dv_syncthreads();", loc)
        n = "(dv_i32)(dv_block_dim(0) * dv_block_dim(1) * dv_block_dim(2))"
        if kind == "count":
            return S(r, types.int32)
        if kind == "and":
            return S("((dv_i32)(%s == %s))" % (r, n), types.int32)
        return S("((dv_i32)(%s != 0))" % r, types.int32)
    return f


_ATOMIC_SUFFIX = {types.int32: "i32", types.uint32: "u32", types.int64: "i64",
                  types.uint64: "u64", types.float32: "f32", types.float64: "f64"}


def _atomic_addr(fl, a, idx, loc):
    if not isinstance(a, Arr):
        raise fl.error("an atomic on something other than an array", loc)
    if a.space == "constant" or a.space == "local" and False:
        raise fl.error("an atomic on a constant array", loc)
    items = _items(idx)
    if len(items) != a.ndim:
        raise fl.error("an atomic needs one index per dimension (%d for this array)" % a.ndim,
                       loc)
    return "&" + element(fl, a, items, loc)


def _index_as(fl, idx, t, loc):
    """An atomic's index converted to the signature's index type (Numba's templates take an
    intp for a 1-d array: a float index is converted, as Numba converts it)."""
    # Numba's atomics cast every index to intp (cudaimpl's _normalize_indices), whatever
    # the typing made of it (a tuple (int32, uint64 - int64) holds a float64)
    def conv(x):
        if isinstance(x, S) and not isinstance(x.ty, types.Integer):
            return S(cast(fl, x, types.intp, loc), types.intp)
        return x
    if isinstance(idx, Tup):
        return Tup([conv(x) for x in idx.items])
    return conv(idx)


def _atomic_op(op):
    def f(fl, args, kws, sig, ty, loc, target):
        a, idx, val = args
        dt = unlit(a.dtype) if isinstance(a, Arr) else None
        suf = _ATOMIC_SUFFIX.get(dt)
        if suf is None:
            raise fl.error("atomic.%s on %s (int32, uint32, int64, uint64, float32, float64)"
                           % (op, dt), loc)
        idx = _index_as(fl, idx, sig.args[1] if sig is not None else None, loc)
        addr = _atomic_addr(fl, a, idx, loc)
        v = cast(fl, val, dt, loc)
        isf = suf.startswith("f")
        if op == "add":
            c = "dv_atomic_add_%s(%s, %s)" % (suf, addr, v)
            if suf == "f64" or suf == "f32" or True:
                pass
        elif op == "sub":
            neg = "(-%s)" % _p(v) if not suf.startswith("u") else "((%s)0 - %s)" % (
                ctype(dt), _p(v))
            c = "dv_atomic_add_%s(%s, %s)" % (suf, addr, neg)
        elif op in ("max", "min", "nanmax", "nanmin"):
            if isf:
                h = fl.p.helper("dv_a%s__%s%s" % (
                    {"max": "max", "min": "min", "nanmax": "nmax", "nanmin": "nmin"}[op],
                    ctype(dt), "__shared" if a.space == "shared" else ""))
                c = "%s(%s, %s)" % (h, addr, v)
            else:
                c = "dv_atomic_%s_%s(%s, %s)" % (op.replace("nan", ""), suf, addr, v)
        elif op in ("and_", "or_", "xor"):
            c = "dv_atomic_%s_%s(%s, %s)" % (op.rstrip("_"), suf, addr, v)
        elif op in ("inc", "dec"):
            c = "dv_atomic_%s_%s(%s, %s)" % (op, suf, addr, v)
        elif op == "exch":
            c = "dv_atomic_xchg_%s(%s, %s)" % (suf, addr, v)
        else:
            raise fl.error("atomic.%s" % op, loc)
        return _effect(fl, c, dt, target, loc)
    return f


def _effect(fl, c, dt, target, loc, force=False):
    """A call with an effect: emitted now, in order; its value in a variable."""
    if not force and (target is None or not fl.uses.get(target)
                      or unlit(fl.typemap.get(target, types.none)) in (types.none,)):
        fl.emit(c + ";", loc)
        return NONE
    r = fl._fresh("r")
    fl.emit("%s %s = %s;" % (ctype(dt), r, c), loc)
    return S(r, dt)


def _cas(fl, args, kws, sig, ty, loc, target):
    a, old, val = args
    dt = unlit(a.dtype)
    suf = _ATOMIC_SUFFIX.get(dt)
    if suf is None or a.ndim != 1:
        raise fl.error("compare_and_swap on %s (1-d int32, uint32, int64, uint64)" % dt, loc)
    c = "dv_atomic_cas_%s(&%s[0], %s, %s)" % (suf, a.ptr, cast(fl, old, dt, loc),
                                               cast(fl, val, dt, loc))
    if a.layout != "C":
        c = "dv_atomic_cas_%s(&%s, %s, %s)" % (suf, element(fl, a, [S("0", types.intp, 0)], loc),
                                               cast(fl, old, dt, loc), cast(fl, val, dt, loc))
    return _effect(fl, c, dt, target, loc)


def _simple(text, rt=types.none):
    def f(fl, args, kws, sig, ty, loc, target):
        if rt is types.none:
            return _stmt(fl, text, loc)
        return S(text, rt)
    return f


def _shfl(kind):
    def f(fl, args, kws, sig, ty, loc, target):
        mask, val, lane = args
        t = unlit(sig.args[1])
        suf = _ATOMIC_SUFFIX.get(t)
        return _effect(fl, "dv_wave_shuffle_%s_%s(%s, %s)" % (kind, suf, cast(fl, val, t, loc),
                                                            cast(fl, lane, types.int32, loc)),
                       t, target, loc, True)
    return f


def _vote(kind):
    def f(fl, args, kws, sig, ty, loc, target):
        p = truth(fl, args[1], loc)
        if kind == "ballot":
            return _effect(fl, "(dv_u32)dv_wave_ballot(%s)" % p, types.uint32, target, loc,
                           True)
        if kind == "eq":
            a = _effect(fl, "(bool)dv_wave_all(%s)" % p, types.boolean, None, loc, True)
            b = _effect(fl, "(bool)dv_wave_any(%s)" % p, types.boolean, None, loc, True)
            return S("(%s || !%s)" % (a.c, b.c), types.boolean)
        return _effect(fl, "(bool)dv_wave_%s(%s)" % (kind, p), types.boolean, target, loc,
                       True)
    return f


def _roc_id(fn):
    def f(fl, args, kws, sig, ty, loc, target):
        d = _const_int(args[0])
        if d is None:
            return S("((dv_i64)(%s == 0 ? %s(0) : %s == 1 ? %s(1) : %s(2)))" % (
                _p(args[0].c), fn, _p(args[0].c), fn, fn), types.intp)
        if d not in (0, 1, 2):
            return S("0", types.intp, 0)
        return S("((dv_i64)%s(%d))" % (fn, d), types.intp, nonneg=True)
    return f


def _bitfn(kind):
    def f(fl, args, kws, sig, ty, loc, target):
        t = unlit(sig.args[0])
        h = fl.p.helper("dv_%s__%s" % (kind, ctype(t)))
        rt = unlit(sig.return_type)
        return S("((%s)%s(%s))" % (ctype(rt), h, cast(fl, args[0], t, loc)), rt)
    return f


def _refuse(why):
    def f(fl, args, kws, sig, ty, loc, target):
        raise fl.error(why, loc)
    return f


def _selp(fl, args, kws, sig, ty, loc, target):
    rt = unlit(sig.return_type)
    return S("(%s ? %s : %s)" % (truth(fl, args[0], loc), cast(fl, args[1], rt, loc),
                                 cast(fl, args[2], rt, loc)), rt)


def _fma(fl, args, kws, sig, ty, loc, target):
    rt = unlit(sig.return_type)
    f = "fmaf" if rt == types.float32 else "fma"
    return S("%s(%s)" % (f, ", ".join(cast(fl, a, rt, loc) for a in args)), rt)


def _cbrt(fl, args, kws, sig, ty, loc, target):
    rt = unlit(sig.return_type)
    return S("%s(%s)" % ("cbrtf" if rt == types.float32 else "cbrt",
                         cast(fl, args[0], rt, loc)), rt)


# builtins

def _b_range(fl, args, kws, sig, ty, loc, target):
    t = unlit(ty)
    it = types.int64 if "64" in str(t) or "int64" in str(t) else types.int32
    if "uint64" in str(t):
        it = types.uint64
    vals = [S(cast(fl, a, it, loc), it, _const_int(a),
              nonneg=isinstance(a, S) and a.nonneg) for a in args]
    if len(vals) == 1:
        start, stop, step = S("0", it, 0), vals[0], S("1", it, 1)
    elif len(vals) == 2:
        start, stop, step = vals[0], vals[1], S("1", it, 1)
    else:
        start, stop, step = vals
        if step.const == 0:
            raise fl.error("range() arg 3 must not be zero", loc)
    # evaluated once, as Python does: run-time bounds go into variables of their own (the
    # loop may assign the variables they came from)
    def keep(v, what):
        if v.const is not None or fl.assigned_once(v.c):
            return v
        n = fl._fresh(what)
        fl.emit("%s %s = %s;" % (ctype(it), n, v.c), loc)
        return S(n, it, nonneg=v.nonneg)
    return Rng(keep(start, "start"), keep(stop, "stop"), keep(step, "step"), it)


def _b_len(fl, args, kws, sig, ty, loc, target):
    v = args[0]
    if isinstance(v, Arr):
        return S(v.shape[0], types.intp, nonneg=True)
    if isinstance(v, Tup):
        return S(str(len(v.items)), types.intp, len(v.items))
    raise fl.error("len() of a %s" % type(v).__name__, loc)


def _b_minmax(which):
    def f(fl, args, kws, sig, ty, loc, target):
        if len(args) == 1 and isinstance(args[0], Tup):
            args = args[0].items
        rt = unlit(sig.return_type)
        if not is_scalar(rt):
            raise fl.error("%s() of %s" % (which, rt), loc)
        cs = [cast(fl, a, rt, loc) for a in args]
        cmp = ">" if which == "max" else "<"
        acc = cs[0]
        for c in cs[1:]:
            n = fl._fresh(which) if not c.isidentifier() else c
            if n != c:
                fl.emit("%s %s = %s;" % (ctype(rt), n, c), loc)
            if not acc.isidentifier():
                a2 = fl._fresh(which)
                fl.emit("%s %s = %s;" % (ctype(rt), a2, acc), loc)
                acc = a2
            acc = "(%s %s %s ? %s : %s)" % (n, cmp, acc, n, acc)
        return S(acc, rt)
    return f


def _b_complex(fl, args, kws, sig, ty, loc, target):
    rt = unlit(sig.return_type)
    ft = types.float32 if rt == types.complex64 else types.float64
    vals = list(args) + [S("0", ft, 0)] * (2 - len(args))
    if isinstance(vals[0], S) and isinstance(vals[0].ty, types.Complex) and len(args) == 1:
        return S(cast(fl, vals[0], rt, loc), rt)
    return S("%s_make(%s, %s)" % (ctype(rt), cast(fl, vals[0], ft, loc),
                                  cast(fl, vals[1], ft, loc)), rt)


def _cmath(name):
    def f(fl, args, kws, sig, ty, loc, target):
        at = unlit(sig.args[0])
        rt = unlit(sig.return_type)
        ct = at if isinstance(at, types.Complex) else types.complex128
        z = cast(fl, args[0], ct, loc)
        if name == "phase":
            return S("%s((%s).im, (%s).re)" % ("atan2f" if ct == types.complex64 else "atan2",
                                              z, z), rt)
        return S("%s(%s)" % (_chelper(fl, name, ctype(ct)), z), rt)
    return f


def _b_abs(fl, args, kws, sig, ty, loc, target):
    rt = unlit(sig.return_type)
    if isinstance(unlit(sig.args[0]), types.Complex):
        at = unlit(sig.args[0])
        return S("%s(%s)" % (_chelper(fl, "abs", ctype(at)), cast(fl, args[0], at, loc)), rt)
    c = cast(fl, args[0], rt, loc)
    if isinstance(rt, types.Float):
        return S("%s(%s)" % ("fabsf" if rt == types.float32 else "fabs", c), rt)
    if isinstance(rt, types.Integer) and rt.signed:
        r = "(%s < 0 ? -%s : %s)" % (_p(c), _p(c), _p(c))
        if rt.bitwidth < 32:
            r = "((%s)%s)" % (ctype(rt), r)  # abs(-128) of an int8 is -128, as in Numba
        return S(r, rt)
    return S(c, rt)


def _nonneg_cast(v, t):
    return isinstance(v, S) and v.nonneg and isinstance(v.ty, types.Integer) and \
        isinstance(t, types.Integer) and (t.bitwidth > v.ty.bitwidth or
                                          t.bitwidth == v.ty.bitwidth and t.signed == v.ty.signed)


def _b_cast(t):
    def f(fl, args, kws, sig, ty, loc, target):
        rt = unlit(sig.return_type) if sig is not None else t
        if not args:
            return S(literal(0, rt), rt, 0)
        return S(cast(fl, args[0], rt, loc), rt, nonneg=_nonneg_cast(args[0], rt))
    return f


def _b_round(fl, args, kws, sig, ty, loc, target):
    if len(args) == 2:
        at = unlit(sig.args[0])
        rt = unlit(sig.return_type)
        if not isinstance(at, types.Float):
            raise fl.error("round(x, ndigits) of a %s" % at, loc)
        h = fl.p.helper("dv_roundto__%s" % ctype(at))
        return S("((%s)%s(%s, %s))" % (ctype(rt), h, cast(fl, args[0], at, loc),
                                      cast(fl, args[1], types.int64, loc)), rt)
    if len(args) != 1:
        raise fl.error("round() with %d arguments" % len(args), loc)
    at = unlit(sig.args[0])
    rt = unlit(sig.return_type)
    f = "rintf" if at == types.float32 else "rint"
    return S("((%s)%s(%s))" % (ctype(rt), f, cast(fl, args[0], at, loc)), rt)


_CALLS = {
    _nb["grid"]: _grid, _nb["gridsize"]: _gridsize,
    _nb["shared"].array: _shared_array, _nb["local"].array: _local_array,
    _nb["const"].array_like: _const_array_like,
    _nb["syncthreads"]: _sync,
    _nb["syncthreads_count"]: _sync_reduce("count"),
    _nb["syncthreads_and"]: _sync_reduce("and"),
    _nb["syncthreads_or"]: _sync_reduce("or"),
    _nb["syncwarp"]: _simple("dv_wavebarrier()"),
    _nb["threadfence"]: _simple("dv_threadfence()"),
    _nb["threadfence_block"]: _simple("dv_threadfence_block()"),
    _nb["threadfence_system"]: _simple("dv_threadfence()"),
    _nb["activemask"]: _refuse("cuda.activemask(): the dialect's wave operations take the "
                               "whole wave (docs/kernels.md), and the lanes active in a "
                               "divergent branch are not known to a kernel"),
    _nb["lanemask_lt"]: _simple("((dv_u32)((1ull << dv_lane_id()) - 1))", types.uint32),
    _nb["selp"]: _selp, _nb["fma"]: _fma, _nb["cbrt"]: _cbrt,
    _nb["popc"]: _bitfn("popc"), _nb["clz"]: _bitfn("clz"), _nb["ffs"]: _bitfn("ffs"),
    _nb["brev"]: _bitfn("brev"),
    _atomic.compare_and_swap: _cas,
    stubs.WARP["shfl_sync"]: _shfl("idx"), stubs.WARP["shfl_up_sync"]: _shfl("up"),
    stubs.WARP["shfl_down_sync"]: _shfl("down"), stubs.WARP["shfl_xor_sync"]: _shfl("xor"),
    stubs.WARP["all_sync"]: _vote("all"), stubs.WARP["any_sync"]: _vote("any"),
    stubs.WARP["eq_sync"]: _vote("eq"), stubs.WARP["ballot_sync"]: _vote("ballot"),
    stubs.ROC["get_local_id"]: _roc_id("dv_local_id"),
    stubs.ROC["get_group_id"]: _roc_id("dv_group_id"),
    stubs.ROC["get_global_id"]: _roc_id("dv_global_id"),
    stubs.ROC["get_local_size"]: _roc_id("dv_local_size"),
    stubs.ROC["get_num_groups"]: _roc_id("dv_num_groups"),
    stubs.ROC["get_global_size"]: _roc_id("dv_global_size"),
    stubs.ROC["get_work_dim"]: _simple("((dv_u32)(dv_grid_dim(2) * dv_block_dim(2) > 1 ? 3 : "
                                       "dv_grid_dim(1) * dv_block_dim(1) > 1 ? 2 : 1))",
                                       types.uint32),
    stubs.ROC["barrier"]: _simple("dv_syncthreads()"),
    stubs.ROC["mem_fence"]: _simple("dv_threadfence()"),
    stubs.ROC["wavebarrier"]: _simple("dv_wavebarrier()"),
    builtins.range: _b_range, builtins.len: _b_len, builtins.min: _b_minmax("min"),
    builtins.max: _b_minmax("max"), builtins.abs: _b_abs, builtins.int: _b_cast(types.int64),
    builtins.float: _b_cast(types.float64), builtins.bool: _b_cast(types.boolean),
    builtins.round: _b_round, builtins.slice: _b_slice, builtins.complex: _b_complex,
}
import cmath as _cm  # noqa: E402
for _n in ("exp", "log", "sqrt", "phase"):
    _CALLS[getattr(_cm, _n)] = _cmath(_n)
for _op in ("add", "sub", "max", "min", "nanmax", "nanmin", "and_", "or_", "xor", "inc", "dec",
            "exch"):
    _CALLS[getattr(_atomic, _op)] = _atomic_op(_op)

# math.* -> C's <math.h> (float: the f name)
_MATH = {}
for _n in ("sin cos tan asin acos atan sinh cosh tanh asinh acosh atanh exp expm1 log1p "
           "log10 log2 sqrt erf erfc fabs atan2 hypot copysign fmod pow").split():
    if hasattr(math, _n):
        _MATH[getattr(math, _n)] = _n
_MATH[math.gamma] = "tgamma"
_MATH[math.lgamma] = "lgamma"
if hasattr(math, "remainder"):
    _MATH[math.remainder] = "remainder"
_MATH[math.exp] = "exp"
_MATH[math.log] = "log"
for _n in ("floor", "ceil", "trunc", "isnan", "isinf", "isfinite", "ldexp", "degrees",
           "radians"):
    _MATH[getattr(math, _n)] = _n
if hasattr(math, "exp2"):
    _MATH[math.exp2] = "exp2"
_MATH[math.modf] = "modf"
_MATH[math.frexp] = "frexp"


def _math_pair(fl, name, args, sig, loc):
    """math.modf(x) -> (fraction, integral part), math.frexp(x) -> (mantissa, exponent)."""
    at = unlit(sig.args[0])
    ft = "float" if at == types.float32 else "double"
    f = "f" if at == types.float32 else ""
    x = cast(fl, args[0], at, loc)
    a, b = fl._fresh(name + "_a"), fl._fresh(name + "_b")
    if name == "modf":
        fl.emit("%s %s; %s %s = modf%s(%s, &%s);" % (ft, b, ft, a, f, x, b), loc)
        return Tup([S(a, at), S(b, at)])
    fl.emit("int %s; %s %s = frexp%s(%s, &%s);" % (b, ft, a, f, x, b), loc)
    rt = unlit(sig.return_type)
    return Tup([S(a, at), S("((%s)%s)" % (ctype(rt.types[1]), b), rt.types[1])])


def _math(fl, key, args, sig, loc):
    if key in (math.modf, math.frexp):
        return _math_pair(fl, key.__name__, args, sig, loc)
    name = _MATH[key]
    at = [unlit(t) for t in sig.args]
    rt = unlit(sig.return_type)
    if name not in ("isnan", "isinf", "isfinite", "floor", "ceil", "trunc", "ldexp") and \
            isinstance(rt, types.Float):
        # Numba's (int64) -> float64 cases: the value converted first (OpenCL's overloads
        # take no integers)
        at = [rt if isinstance(t, types.Integer) else t for t in at]
    cs = [cast(fl, a, t, loc) for a, t in zip(args, at)]
    f32 = at and at[0] == types.float32
    fname = name + ("f" if f32 else "")
    if name in ("isnan", "isinf", "isfinite"):
        if isinstance(at[0], types.Integer):
            return S("false" if name != "isfinite" else "true", types.boolean)
        return S("(%s(%s) != 0)" % (name, cs[0]), types.boolean)
    if name in ("floor", "ceil", "trunc"):
        if isinstance(at[0], types.Integer):
            return S(cast(fl, args[0], rt, loc), rt)
        return S("((%s)%s(%s))" % (ctype(rt), fname, cs[0]), rt)
    if name == "degrees":
        return S("(%s * (%s)57.29577951308232)" % (_p(cs[0]), ctype(rt)), rt)
    if name == "radians":
        return S("(%s * (%s)0.017453292519943295)" % (_p(cs[0]), ctype(rt)), rt)
    if name == "log" and len(cs) == 2:
        return S("(%s(%s) / %s(%s))" % (fname, cs[0], fname, cs[1]), rt)
    if name == "ldexp":
        return S("%s(%s, (int)%s)" % ("ldexpf" if f32 else "ldexp", cs[0], _p(cs[1])), rt)
    c = "%s(%s)" % (fname, ", ".join(cs))
    if unlit(rt) != (at[0] if at else rt):
        c = "((%s)%s)" % (ctype(rt), c)
    return S(c, rt)
