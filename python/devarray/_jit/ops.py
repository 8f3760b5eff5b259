"""Expressions of the dialect's lowering: constants, casts, operators with Numba's semantics
(complex numbers in complexops), attributes, indexing and slicing, records, printing. The
calls a kernel makes are in ``calls``; the C helpers in ``helpers``."""

import builtins
import math
import operator

import numpy as np
from numba.core import ir, types

from . import stubs
from .complexops import cast_from
from .values import (S, K, Tup, Arr, Rec, NONE, LoweringError, ctype, elem_ctype,
                     is_scalar, unlit, literal, paren as _p)

_nb = stubs.NUMBA
_atomic = _nb["atomic"]


# ---- purity, truth, casts ---------------------------------------------------------------

def zero(ty):
    return literal(0, ty) if is_scalar(ty) else "0"


def truth(fl, v, loc):
    if isinstance(v, K):
        return "true" if v.value else "false"
    if not isinstance(v, S):
        raise fl.error("a truth test of a %s" % type(v).__name__, loc)
    if isinstance(v.ty, types.Boolean):
        return v.c
    if isinstance(v.ty, types.Complex):
        return "((%s).re != 0 || (%s).im != 0)" % (v.c, v.c)
    return "(%s != 0)" % _p(v.c)


def cast(fl, v, ty, loc):
    """C expression of value v converted to Numba scalar type ty."""
    ty = unlit(ty)
    if isinstance(v, K):
        if isinstance(v.value, (bool, int, float, np.number, np.bool_)):
            return literal(v.value, ty)
        raise fl.error("%r where a %s is needed" % (v.value, ty), loc)
    if not isinstance(v, S):
        raise fl.error("a %s where a %s is needed" % (type(v).__name__, ty), loc)
    if v.const is not None and (not isinstance(v.const, complex) or
                                isinstance(ty, types.Complex)):
        try:
            return literal(v.const, ty)
        except (LoweringError, OverflowError, ValueError):
            pass
    if v.ty == ty:
        return v.c
    if isinstance(ty, types.Complex):
        return cast_from(v.c, v.ty, ty)
    if isinstance(v.ty, types.Complex):
        raise fl.error("a complex number where a %s is needed" % ty, loc)
    if isinstance(ty, types.Boolean):
        return "(%s != 0)" % _p(v.c)
    if ty == types.float16 or v.ty == types.float16:
        if v.ty == types.float16 and ty == types.float32:
            return "dv_f16_to_f32(%s)" % v.c
        if v.ty == types.float16:
            return "((%s)dv_f16_to_f32(%s))" % (ctype(ty), v.c)
        if ty == types.float16:
            return "dv_f32_to_f16((float)%s)" % _p(v.c)
    return "((%s)%s)" % (ctype(ty), _p(v.c))


def constant(fl, value, ty, loc):
    if isinstance(value, (bool, np.bool_)):
        return S(literal(bool(value), types.boolean), types.boolean, bool(value))
    if isinstance(value, (int, float, np.integer, np.floating)) and is_scalar(ty):
        return S(literal(value, ty), ty, value)
    if isinstance(value, (int, float)):
        t = types.int64 if isinstance(value, int) else types.float64
        return S(literal(value, t), t, value)
    if isinstance(value, (complex, np.complexfloating)):
        t = unlit(ty) if isinstance(unlit(ty), types.Complex) else types.complex128
        return S(literal(complex(value), t), t, complex(value))
    if value is None:
        return NONE
    if isinstance(value, tuple) and all(isinstance(x, (int, float, bool)) for x in value):
        tys = getattr(ty, "types", [None] * len(value))
        return Tup([constant(fl, x, t if t is not None else types.int64, loc)
                    for x, t in zip(value, tys)])
    if isinstance(value, np.ndarray):
        return _const_array(fl, value, ty, loc)
    return K(value)


def _const_array(fl, arr, ty, loc):
    if arr.dtype.fields is not None or arr.dtype.kind not in "biuf":
        raise fl.error("a global array of dtype %s in a kernel (numbers only)" % arr.dtype, loc)
    name = fl.p.constant(arr)
    a = np.ascontiguousarray(arr)
    t = types.Array(unlit(ty).dtype if isinstance(unlit(ty), types.Array) else
                    types.from_dtype(a.dtype), a.ndim, "C")
    shape = [str(int(s)) for s in a.shape]
    strides = _c_strides(a.shape, a.itemsize)
    return Arr(name, t, shape, strides, "constant", name)


def _c_strides_expr(shape, dtype):
    """Byte strides of a C-contiguous array of extents `shape` (C expressions)."""
    isz = dtype.size if isinstance(dtype, types.Record) else (
        1 if isinstance(dtype, types.Boolean) else dtype.bitwidth // 8)
    out = []
    acc = str(isz)
    for s in reversed(shape):
        out.append(acc)
        acc = "%s * %s" % (_p(acc), _p(s))
    return list(reversed(out))


def _c_strides(shape, itemsize):
    out = []
    acc = itemsize
    for s in reversed(shape):
        out.append(str(acc))
        acc *= int(s)
    return list(reversed(out))


_BINOPS = {operator.add: "+", operator.sub: "-", operator.mul: "*", operator.lt: "<",
           operator.le: "<=", operator.gt: ">", operator.ge: ">=", operator.eq: "==",
           operator.ne: "!=", operator.and_: "&", operator.or_: "|", operator.xor: "^",
           operator.lshift: "<<", operator.rshift: ">>"}


def binop(fl, fn, e, ty, loc):
    a, b = fl.value(e.lhs, loc), fl.value(e.rhs, loc)
    sig = fl.calltypes.get(e)
    if sig is None:
        raise fl.error("an untyped operation %s" % fn.__name__, loc)
    at, bt = [unlit(t) for t in sig.args]
    rt = unlit(sig.return_type)
    if isinstance(at, types.Complex) or isinstance(bt, types.Complex):
        return _complex_binop(fl, fn, a, b, at, bt, rt, loc)
    if not (is_scalar(at) and is_scalar(bt)):
        if fn in (operator.is_, operator.is_not) or isinstance(at, types.NoneType):
            raise fl.error("`is` / None comparisons in a kernel", loc)
        raise fl.error("the operator %s on %s and %s (kernels compute on numbers; index "
                       "arrays element by element)" % (fn.__name__, at, bt), loc)
    folded = _fold(fn, a, b, at, bt, rt)
    if folded is not None:
        return folded
    if fn is operator.truediv:
        if isinstance(at, types.Integer) or isinstance(bt, types.Integer):
            at = bt = rt
        return S("(%s / %s)" % (_p(cast(fl, a, at, loc)), _p(cast(fl, b, bt, loc))), rt)
    ca, cb = cast(fl, a, at, loc), cast(fl, b, bt, loc)
    nn = isinstance(a, S) and isinstance(b, S) and a.nonneg and b.nonneg
    if nn and isinstance(at, types.Integer) and isinstance(bt, types.Integer) and \
            fn in (operator.floordiv, operator.mod) and b.const is not None and b.const > 0:
        return S("(%s %s %s)" % (_p(ca), "/" if fn is operator.floordiv else "%", _p(cb)), rt,
                 nonneg=True)
    if fn is operator.floordiv:
        if isinstance(at, types.Integer):
            return S("%s(%s, %s)" % (fl.p.helper("dv_fdiv__" + ctype(at)), ca, cb), rt)
        return S("%s(%s, %s)" % (fl.p.helper("dv_ffdiv__" + ctype(at)), ca, cb), rt)
    if fn is operator.mod:
        if isinstance(at, types.Integer):
            return S("%s(%s, %s)" % (fl.p.helper("dv_fmod__" + ctype(at)), ca, cb), rt)
        return S("%s(%s, %s)" % (fl.p.helper("dv_ffmod__" + ctype(at)), ca, cb), rt)
    if fn is operator.pow:
        if isinstance(rt, types.Integer):
            return S("%s(%s, %s)" % (fl.p.helper("dv_ipow__" + ctype(rt)), cast(fl, a, rt, loc),
                                     cast(fl, b, rt, loc)), rt)
        f = "powf" if rt == types.float32 else "pow"
        return S("%s(%s, %s)" % (f, cast(fl, a, rt, loc), cast(fl, b, rt, loc)), rt)
    o = _BINOPS.get(fn)
    if o is None:
        raise fl.error("the operator %s" % getattr(fn, "__name__", fn), loc)
    if o in ("<<", ">>") and isinstance(rt, types.Integer):
        ca = cast(fl, a, rt, loc)  # Numba widens before it shifts; C shifts in the left type
    if isinstance(rt, types.Boolean) and o in "&|^" and isinstance(at, types.Boolean):
        return S("(%s %s %s)" % (_p(ca), o, _p(cb)), rt)
    c = "(%s %s %s)" % (_p(ca), o, _p(cb))
    if not isinstance(rt, types.Boolean) and o in "+-*<<" and isinstance(rt, types.Integer) \
            and rt.bitwidth < 32:
        c = "((%s)%s)" % (ctype(rt), c)  # C computes small integers as int
    return S(c, rt, nonneg=nn and o in ("+", "*", "&", "|", ">>") and
             isinstance(rt, types.Integer))


def _chelper(fl, kind, c):
    fl.p.helper("dv_cplx__%s__%s" % (kind, c))
    return "%s_%s" % (c, kind)


_COMPLEX_OPS = {operator.add: "add", operator.sub: "sub", operator.mul: "mul",
                operator.truediv: "div", operator.pow: "pow"}


def _complex_binop(fl, fn, a, b, at, bt, rt, loc):
    if fn in (operator.eq, operator.ne):
        ct = at if isinstance(at, types.Complex) else bt
        x, y = _p(cast(fl, a, ct, loc)), _p(cast(fl, b, ct, loc))
        c = "(%s.re == %s.re && %s.im == %s.im)" % (x, y, x, y)
        return S(c if fn is operator.eq else "(!%s)" % c, types.boolean)
    kind = _COMPLEX_OPS.get(fn)
    if kind is None or not isinstance(rt, types.Complex):
        raise fl.error("the operator %s on complex numbers (Numba has none)" %
                       getattr(fn, "__name__", fn), loc)
    c = ctype(rt)
    return S("%s(%s, %s)" % (_chelper(fl, kind, c), cast(fl, a, rt, loc), cast(fl, b, rt, loc)),
             rt)


def _fold(fn, a, b, at, bt, rt):
    """Constant arithmetic done now, with the types' own arithmetic."""
    def val(v):
        if isinstance(v, S) and v.const is not None:
            return v.const
        if isinstance(v, K) and isinstance(v.value, (int, float, bool)):
            return v.value
        return None
    x, y = val(a), val(b)
    if x is None or y is None or isinstance(x, complex) or isinstance(y, complex):
        return None
    if fn not in _BINOPS and fn not in (operator.floordiv, operator.mod):
        return None
    if fn in (operator.floordiv, operator.mod) and y == 0:
        return None
    if fn in (operator.lshift, operator.rshift):
        return None
    try:
        with np.errstate(all="ignore"):
            nx = np.array(x).astype(types.unliteral(at).key if False else _npdt(at))[()]
            ny = np.array(y).astype(_npdt(bt))[()]
            r = fn(nx, ny)
            r = np.array(r).astype(_npdt(rt))[()]
        py = bool(r) if isinstance(rt, types.Boolean) else (
            int(r) if isinstance(rt, types.Integer) else float(r))
        return S(literal(py, rt), rt, py)
    except Exception:
        return None


def _npdt(t):
    t = unlit(t)
    if isinstance(t, types.Boolean):
        return np.bool_
    return np.dtype(str(t))


def unary(fl, e, ty, loc):
    v = fl.value(e.value, loc)
    sig = fl.calltypes.get(e)
    at = unlit(sig.args[0]) if sig is not None else unlit(fl.typemap[e.value.name])
    rt = unlit(sig.return_type) if sig is not None else ty
    fn = e.fn
    if fn is operator.not_:
        return S("(!%s)" % _p(truth(fl, v, loc)), types.boolean)
    if isinstance(at, types.Complex):
        if fn is operator.pos:
            return S(cast(fl, v, rt, loc), rt)
        if fn is operator.neg:
            return S("%s(%s)" % (_chelper(fl, "neg", ctype(rt)), cast(fl, v, rt, loc)), rt)
        raise fl.error("the unary operator %s on a complex number" % fn.__name__, loc)
    c = cast(fl, v, at, loc)
    if isinstance(v, S) and v.const is not None and fn in (operator.neg, operator.pos):
        val = -v.const if fn is operator.neg else v.const
        try:
            return S(literal(val, rt), rt, val)
        except Exception:
            pass
    if fn is operator.neg:
        if isinstance(at, types.Integer) and isinstance(rt, types.Integer):
            # Numba negates in the operand's type, then widens: -(int8 -128) is -128
            c = "((%s)(-%s))" % (ctype(at), _p(cast(fl, v, at, loc)))
            return S("((%s)%s)" % (ctype(rt), c) if rt != at else c, rt)
        return S("(-%s)" % _p(cast(fl, v, rt, loc)), rt)
    if fn is operator.pos:
        return S(cast(fl, v, rt, loc), rt)
    if fn is operator.invert:
        if isinstance(at, types.Boolean):
            return S("(!%s)" % _p(c), types.boolean)
        return S("((%s)~%s)" % (ctype(rt), _p(c)), rt)
    raise fl.error("the unary operator %s" % fn, loc)


# ---- attributes -------------------------------------------------------------------------

_DIMS = {"x": 0, "y": 1, "z": 2}
_DIM3 = {"threadIdx": "dv_thread_idx", "blockIdx": "dv_block_idx", "blockDim": "dv_block_dim",
         "gridDim": "dv_grid_dim"}


def getattr_(fl, v, attr, ty, loc):
    if isinstance(v, K):
        obj = v.value
        for n, fn in _DIM3.items():
            if obj is _nb[n] and attr in _DIMS:
                return S("((dv_i32)%s(%d))" % (fn, _DIMS[attr]), types.int32, nonneg=True)
        if obj is _nb.get("warpsize"):
            return S("((dv_i32)dv_wave_size())", types.int32, nonneg=True)
        try:
            val = getattr(obj, attr)
        except AttributeError:
            raise fl.error("%r has no attribute %s" % (obj, attr), loc) from None
        if attr == "warpsize" and val is _nb.get("warpsize"):
            return S("((dv_i32)dv_wave_size())", types.int32)
        if attr == "laneid" and val is _nb.get("laneid"):
            return S("((dv_i32)dv_lane_id())", types.int32, nonneg=True)
        return constant(fl, val, ty, loc)
    if isinstance(v, Arr):
        if attr == "shape":
            return Tup([S(s, types.intp, nonneg=True) for s in v.shape])
        if attr == "strides":
            return Tup([S(s, types.intp) for s in v.strides])
        if attr == "ndim":
            return S(str(v.ndim), types.intp, v.ndim)
        if attr == "size":
            if not v.shape:
                return S("1", types.intp, 1)
            return S("(" + " * ".join(_p(s) for s in v.shape) + ")", types.intp, nonneg=True)
        if attr == "itemsize":
            isz = v.dtype.bitwidth // 8 if hasattr(v.dtype, "bitwidth") else v.dtype.size
            return S(str(isz), types.intp, isz)
        if attr == "T":
            t = unlit(ty)
            return Arr(v.ptr, t, list(reversed(v.shape)), list(reversed(v.strides)), v.space,
                       v.name)
        if attr in ("dtype",):
            return K(v.dtype)
        raise fl.error("the array attribute .%s in a kernel (shape, strides, size, ndim, "
                       "itemsize, T)" % attr, loc)
    if isinstance(v, Rec):
        return _field_get(fl, v, attr, loc)
    if isinstance(v, S) and isinstance(v.ty, types.Complex) and attr in ("real", "imag",
                                                                          "conjugate"):
        ft = types.float32 if v.ty == types.complex64 else types.float64
        if attr == "real":
            return S("(%s).re" % v.c, ft)
        if attr == "imag":
            return S("(%s).im" % v.c, ft)
        return K(("conjugate", v))
    if isinstance(v, S) and attr in ("real", "imag", "conjugate"):
        if attr == "real":
            return v
        if attr == "imag":
            return S(literal(0, v.ty), v.ty, 0)
        return K(("conjugate", v))
    if isinstance(v, Tup):
        raise fl.error("the tuple attribute .%s" % attr, loc)
    raise fl.error("the attribute .%s of %s" % (attr, type(v).__name__), loc)


# ---- indexing ---------------------------------------------------------------------------

def static_index_ok(index):
    if isinstance(index, (int, slice)) and not isinstance(index, bool):
        return True
    if isinstance(index, str):
        return True
    if isinstance(index, tuple):
        return all(isinstance(i, (int, slice)) and not isinstance(i, bool) or i is None
                   for i in index)
    return False


def static_index(fl, index, loc):
    if isinstance(index, tuple):
        return Tup([static_index(fl, i, loc) for i in index])
    if isinstance(index, slice):
        return K(index)
    if isinstance(index, str):
        return K(index)
    return S(literal(index, types.intp), types.intp, index)


class Slice:
    """slice(start, stop, step) with bounds known only at run time (values or None)."""
    __slots__ = ("start", "stop", "step")

    def __init__(self, start, stop, step):
        self.start, self.stop, self.step = start, stop, step


def _b_slice(fl, args, kws, sig, ty, loc, target):
    vals = list(args) + [NONE] * (3 - len(args))
    if len(args) == 1:
        vals = [NONE, args[0], NONE]
    consts = []
    for v in vals:
        if v is NONE or isinstance(v, K) and v.value is None:
            consts.append(None)
        elif isinstance(v, S) and v.const is not None:
            consts.append(int(v.const))
        else:
            return Slice(*[None if (x is NONE or isinstance(x, K) and x.value is None) else x
                           for x in vals])
    return K(slice(*consts))


def _items(idx):
    return idx.items if isinstance(idx, Tup) else [idx]


def getitem(fl, base, idx, ty, e, loc):
    if isinstance(base, Tup):
        i = _const_int(idx)
        if i is None:
            raise fl.error("a tuple indexed by a value known only at run time", loc)
        try:
            return base.items[i]
        except IndexError:
            raise fl.error("tuple index %d out of range" % i, loc) from None
    if isinstance(base, Rec):
        if isinstance(idx, K) and isinstance(idx.value, str):
            return _field_get(fl, base, idx.value, loc)
        raise fl.error("a record indexed by something other than a field name", loc)
    if not isinstance(base, Arr):
        raise fl.error("indexing a %s" % type(base).__name__, loc)
    items = _items(idx)
    if isinstance(idx, S) and isinstance(unlit(idx.ty), (types.UniTuple, types.Tuple)):
        raise fl.error("an index tuple known only at run time", loc)
    if any(isinstance(i, K) and isinstance(i.value, slice) or isinstance(i, Slice)
           for i in items) or len(items) < base.ndim:
        return _view(fl, base, items, unlit(ty), loc)
    if len(items) > base.ndim:
        raise fl.error("%d indices for a %d-d array" % (len(items), base.ndim), loc)
    lv = element(fl, base, items, loc)
    if isinstance(base.dtype, types.Record):
        return Rec("(&%s)" % lv, base.dtype, base.space)
    if isinstance(base.dtype, types.Boolean):
        return S("(%s != 0)" % lv, types.boolean)
    return S(lv, base.dtype)


def _const_int(v):
    if isinstance(v, S) and isinstance(v.const, (int, np.integer)) and not isinstance(v.const, bool):
        return int(v.const)
    if isinstance(v, K) and isinstance(v.value, int):
        return v.value
    return None


def _index(fl, i, n, loc):
    """C expression of index value i (wrapped from the end when negative, as Numba does)."""
    if not isinstance(i, S) or not isinstance(i.ty, (types.Integer, types.Boolean)):
        if isinstance(i, S) and isinstance(i.ty, types.Float):
            raise fl.error("a float array index (Numba takes integers only)", loc)
        raise fl.error("an index of %s" % (getattr(i, "ty", type(i).__name__)), loc)
    c = i.const
    if c is not None:
        c = int(c)
        if c >= 0:
            return str(c)
        return "(%s - %d)" % (_p(n), -c)
    if isinstance(i.ty, types.Integer) and i.ty.signed and not i.nonneg:
        ci = _p(i.c)
        return "(%s < 0 ? %s + %s : (dv_i64)%s)" % (ci, ci, _p(n), ci)
    return "(dv_i64)%s" % _p(i.c)


def element(fl, a, items, loc):
    """The C lvalue of element `items` of array a."""
    et = elem_ctype(a.dtype)
    idx = [_index(fl, i, a.shape[d], loc) for d, i in enumerate(items)]
    if not idx:
        return "%s[0]" % a.ptr
    if a.layout == "C":
        off = idx[0]
        for d in range(1, len(idx)):
            off = "%s * %s + %s" % (_p(off), _p(a.shape[d]), idx[d])
        return "%s[%s]" % (a.ptr, off)
    if a.layout == "F" and a.space != "global":
        off = idx[-1]
        for d in range(len(idx) - 2, -1, -1):
            off = "%s * %s + %s" % (_p(off), _p(a.shape[d]), idx[d])
        return "%s[%s]" % (a.ptr, off)
    off = " + ".join("%s * %s" % (_p(x), _p(s)) for x, s in zip(idx, a.strides))
    return "(*(%s%s *)((%schar *)%s + %s))" % (a.qual, et, a.qual, a.ptr, off)


def _view(fl, a, items, ty, loc):
    """a[items] with slices or fewer indices than dimensions: a new descriptor."""
    if not isinstance(ty, types.Array):
        raise fl.error("this indexing of an array", loc)
    shape, strides = [], []
    off_terms = []
    d = 0
    for i in items:
        if d >= a.ndim:
            raise fl.error("too many indices", loc)
        if isinstance(i, K) and isinstance(i.value, slice):
            sl = i.value
            if sl.step is not None and sl.step == 0:
                raise fl.error("slice step cannot be zero", loc)
            start, length, step = _slice_consts(fl, sl, a.shape[d])
            shape.append(length)
            strides.append("%s * %s" % (_p(a.strides[d]), step) if step != "1" else a.strides[d])
            if start != "0":
                off_terms.append("%s * %s" % (_p(start), _p(a.strides[d])))
        elif isinstance(i, Slice):
            fl.p.helper("dv_slice__")
            st = i.step
            if st is not None and not (isinstance(st, S) and st.const is not None):
                stc = fl._fresh("step")
                fl.emit("dv_i64 %s = %s;" % (stc, cast(fl, st, types.int64, loc)), loc)
                # Python's ValueError for a zero step: the thread ends, as Numba's kernels
                # end on an exception without debug
                fl.emit("if (%s == 0) return%s;" % (stc, "" if fl.kind == "kernel" or
                                                     fl.return_type in (types.none, types.void)
                                                     else " " + zero(fl.return_type)), loc)
            else:
                stc = str(int(st.const)) if st is not None else "1"
            n = a.shape[d]
            lo, hi = fl._fresh("lo"), fl._fresh("hi")
            fl.emit("dv_i64 %s = dv_slice__bound(%s, %s, %s, %d, 1);" % (
                lo, n, cast(fl, i.start, types.int64, loc) if i.start is not None else "0",
                stc, i.start is not None), loc)
            fl.emit("dv_i64 %s = dv_slice__bound(%s, %s, %s, %d, 0);" % (
                hi, n, cast(fl, i.stop, types.int64, loc) if i.stop is not None else "0",
                stc, i.stop is not None), loc)
            shape.append("dv_slice__len(%s, %s, %s)" % (lo, hi, stc))
            strides.append("%s * %s" % (_p(a.strides[d]), _p(stc)))
            off_terms.append("%s * %s" % (lo, _p(a.strides[d])))
        else:
            off_terms.append("%s * %s" % (_p(_index(fl, i, a.shape[d], loc)), _p(a.strides[d])))
        d += 1
    while d < a.ndim:
        shape.append(a.shape[d])
        strides.append(a.strides[d])
        d += 1
    name = fl._fresh("view")
    et = elem_ctype(a.dtype)
    ptr = "((%s%s *)((%schar *)%s + %s))" % (a.qual, et, a.qual, a.ptr,
                                            " + ".join(off_terms)) if off_terms else a.ptr
    fl.emit("%s%s *%s = %s;" % (a.qual, et, name, ptr), loc)
    cs, ct = [], []
    for k, (s, t) in enumerate(zip(shape, strides)):
        sn, tn = "%s_s%d" % (name, k), "%s_t%d" % (name, k)
        fl.emit("dv_i64 %s = %s, %s = %s;" % (sn, s, tn, t), loc)
        cs.append(sn)
        ct.append(tn)
    return Arr(name, ty, cs, ct, a.space, name)


def _slice_consts(fl, sl, n):
    """(start, length, step) C expressions of constant slice sl over a dimension of n."""
    step = 1 if sl.step is None else int(sl.step)
    if step > 0:
        lo = "0" if sl.start is None else _clamp(sl.start, n, 0)
        hi = _p(n) if sl.stop is None else _clamp(sl.stop, n, 0)
    else:
        lo = "(%s - 1)" % _p(n) if sl.start is None else _clamp(sl.start, n, -1)
        hi = "(-1)" if sl.stop is None else _clamp(sl.stop, n, -1)
    if step > 0:
        length = "(%s > %s ? (%s - %s + %d) / %d : 0)" % (_p(hi), _p(lo), _p(hi), _p(lo),
                                                          step - 1, step)
    else:
        length = "(%s > %s ? (%s - %s + %d) / %d : 0)" % (_p(lo), _p(hi), _p(lo), _p(hi),
                                                          -step - 1, -step)
    return lo, length, str(step)


def _clamp(v, n, lowest):
    v = int(v)
    if v >= 0:
        return "(%d < %s ? %d : %s)" % (v, _p(n), v, _p(n)) if lowest == 0 else \
            "(%d < %s ? %d : %s - 1)" % (v, _p(n), v, _p(n))
    return "(%s - %d >= 0 ? %s - %d : %d)" % (_p(n), -v, _p(n), -v, lowest)


def setitem(fl, a, idx, val, st, loc):
    if isinstance(a, Rec):
        if isinstance(idx, K) and isinstance(idx.value, str):
            return setattr_(fl, a, idx.value, val, loc)
        raise fl.error("a record indexed by something other than a field name", loc)
    if not isinstance(a, Arr):
        raise fl.error("assigning into a %s" % type(a).__name__, loc)
    items = _items(idx)
    if len(items) != a.ndim or any(isinstance(i, K) and isinstance(i.value, slice)
                                   for i in items):
        raise fl.error("assigning to a slice of an array in a kernel (assign element by "
                       "element)", loc)
    if a.space == "constant":
        raise fl.error("assigning into a constant array (const.array_like is read-only)", loc)
    lv = element(fl, a, items, loc)
    if isinstance(a.dtype, types.Boolean):
        fl.emit("%s = (unsigned char)%s;" % (lv, _p(cast(fl, val, types.boolean, loc))), loc)
    elif isinstance(a.dtype, types.Record):
        if not isinstance(val, Rec):
            raise fl.error("assigning a %s to a record" % type(val).__name__, loc)
        fl.emit("%s = *%s;" % (lv, _p(val.ptr)), loc)
    else:
        fl.emit("%s = %s;" % (lv, cast(fl, val, a.dtype, loc)), loc)


def _field(fl, r, name, loc):
    try:
        ft, off = r.ty.fields[name][:2]
    except KeyError:
        raise fl.error("record %s has no field %r" % (r.ty, name), loc) from None
    if isinstance(ft, types.NestedArray) or not is_scalar(ft):
        raise fl.error("the field %s of type %s (scalar fields only)" % (name, ft), loc)
    q = {"global": "DV_GLOBAL_MEM ", "shared": "DV_SHARED_MEM ", "local": "",
         "constant": "DV_CONSTANT_MEM "}[r.space]
    et = elem_ctype(ft)
    return "(*(%s%s *)(%s + %d))" % (q, et, _p(r.ptr) if not r.ptr.startswith("(&") else
                                     "(%sunsigned char *)%s" % (q, r.ptr), off), ft


def _nested(fl, r, name, loc):
    """A record's nested-array field as an array descriptor over the record's bytes (C order,
    the shape of its dtype), or None when the field is not a nested array."""
    try:
        ft, off = r.ty.fields[name][:2]
    except KeyError:
        raise fl.error("record %s has no field %r" % (r.ty, name), loc) from None
    if not isinstance(ft, types.NestedArray):
        return None
    if not is_scalar(ft.dtype):
        raise fl.error("the field %s: a nested array of %s (numbers only)" % (name, ft.dtype),
                       loc)
    q = {"global": "DV_GLOBAL_MEM ", "shared": "DV_SHARED_MEM ", "local": "",
         "constant": "DV_CONSTANT_MEM "}[r.space]
    et = elem_ctype(ft.dtype)
    base = _p(r.ptr) if not r.ptr.startswith("(&") else "(%sunsigned char *)%s" % (q, r.ptr)
    ptr = "((%s%s *)(%s + %d))" % (q, et, base, off)
    shape = [str(int(x)) for x in ft.shape]
    isz = 1 if isinstance(ft.dtype, types.Boolean) else ft.dtype.bitwidth // 8
    t = types.Array(ft.dtype, len(ft.shape), "C")
    return Arr(ptr, t, shape, _c_strides(ft.shape, isz), r.space, name)


def _field_get(fl, r, name, loc):
    nested = _nested(fl, r, name, loc)
    if nested is not None:
        return nested
    lv, ft = _field(fl, r, name, loc)
    if isinstance(ft, types.Boolean):
        return S("(%s != 0)" % lv, types.boolean)
    return S(lv, ft)


def setattr_(fl, r, name, val, loc):
    if not isinstance(r, Rec):
        raise fl.error("setting attribute %s of a %s" % (name, type(r).__name__), loc)
    nested = _nested(fl, r, name, loc)
    if nested is not None:
        if not isinstance(val, Arr) or val.shape != nested.shape and not all(
                a == b for a, b in zip(val.shape, nested.shape)):
            raise fl.error("assigning to the nested array %s something other than an array "
                           "of its shape" % name, loc)
        # element by element (C order), as Numba copies a nested array
        idx = [0] * nested.ndim
        dims = [int(x) for x in nested.shape]
        total = 1
        for d in dims:
            total *= d
        for k in range(total):
            rem = k
            for d in range(nested.ndim - 1, -1, -1):
                idx[d] = rem % dims[d]
                rem //= dims[d]
            items = [S(str(i), types.intp, i) for i in idx]
            fl.emit("%s = %s;" % (element(fl, nested, items, loc),
                                  cast(fl, S(element(fl, val, items, loc), val.dtype),
                                       nested.dtype, loc)), loc)
        return
    lv, ft = _field(fl, r, name, loc)
    fl.emit("%s = %s;" % (lv, cast(fl, val, ft, loc)), loc)


# ---- printing ---------------------------------------------------------------------------

def print_(fl, vals, loc):
    fmt, args = [], []
    for v in vals:
        if isinstance(v, K) and isinstance(v.value, str):
            fmt.append(v.value.replace("%", "%%").replace("\\", "\\\\").replace('"', '\\"')
                       .replace("\n", "\\n"))
        elif isinstance(v, S) and v.const is not None and isinstance(v.const, str):
            fmt.append(v.const)
        elif isinstance(v, S) and isinstance(v.ty, types.Complex):
            raise fl.error("printing a complex number in a kernel", loc)
        elif isinstance(v, S):
            t = v.ty
            if isinstance(t, types.Boolean):
                fmt.append("%s")
                args.append('(%s ? "True" : "False")' % v.c)
            elif isinstance(t, types.Integer):
                if t.signed:
                    fmt.append("%\" DV_PRId64 \"")
                    args.append("(dv_i64)%s" % _p(v.c))
                else:
                    fmt.append("%\" DV_PRIu64 \"")
                    args.append("(dv_u64)%s" % _p(v.c))
            else:
                fmt.append("%f")
                args.append("(double)%s" % _p(v.c))
        else:
            raise fl.error("printing a %s in a kernel" % type(v).__name__, loc)
    text = '"%s\\n"' % " ".join(fmt)
    fl.emit("dv_printf(%s);" % ", ".join([text] + args), loc)
