"""Expressions of the dialect's lowering: constants, operators with Numba's semantics,
attributes, indexing, and the calls a kernel makes (thread indexing, shared/local/constant
arrays, barriers, atomics, warp functions, math, builtins, device functions)."""

import builtins
import math
import operator

import numpy as np
from numba.core import ir, types

from . import stubs
from .values import (S, K, Tup, Rng, Arr, Rec, NONE, LoweringError, ctype, elem_ctype,
                     is_scalar, unlit, literal, paren as _p)

_nb = stubs.NUMBA
_atomic = _nb["atomic"]

# ---- helpers written into the module when used ------------------------------------------

_INT_TYPES = ["dv_i8", "dv_i16", "dv_i32", "dv_i64", "dv_u8", "dv_u16", "dv_u32", "dv_u64"]


def helper_text(name):
    """(C text, helpers it needs) of helper `name`."""
    kind, _, t = name.partition("__")
    kind = kind.replace("dv_", "")
    if kind == "fdiv":  # integer floor division, Python's signs; by zero: 0
        signed = not t.startswith("dv_u")
        body = ("  if (b == 0) return 0;\n  %s q = a / b;\n" % t +
                ("  if ((a % b != 0) && ((a < 0) != (b < 0))) q -= 1;\n" if signed else "") +
                "  return q;\n")
        return "DV_DEVICE %s %s(%s a, %s b) {\n%s}" % (t, name, t, t, body), []
    if kind == "fmod":  # integer modulo, Python's signs; by zero: 0
        signed = not t.startswith("dv_u")
        body = ("  if (b == 0) return 0;\n  %s r = a %% b;\n" % t +
                ("  if (r != 0 && ((r < 0) != (b < 0))) r += b;\n" if signed else "") +
                "  return r;\n")
        return "DV_DEVICE %s %s(%s a, %s b) {\n%s}" % (t, name, t, t, body), []
    if kind in ("ffdiv", "ffmod"):  # float floor division / modulo (Python's float_divmod)
        f = "f" if t == "float" else ""
        text = ("DV_DEVICE %(t)s %(n)s(%(t)s a, %(t)s b) {\n"
                "  if (b == 0) return %(zero)s;\n"
                "  %(t)s mod = fmod%(f)s(a, b);\n"
                "  %(t)s div = (a - mod) / b;\n"
                "  if (mod != 0) {\n"
                "    if ((b < 0) != (mod < 0)) { mod += b; div -= 1; }\n"
                "  } else {\n"
                "    mod = copysign%(f)s((%(t)s)0, b);\n"
                "  }\n"
                "  %(ret)s\n"
                "}") % {"t": t, "n": name, "f": f,
                        "zero": ("a / b" if kind == "ffdiv" else "(%s)NAN" % t),
                        "ret": ("if (div != 0) { %(t)s fl = floor%(f)s(div); "
                                "if (div - fl > (%(t)s)0.5) fl += 1; return fl; } "
                                "return copysign%(f)s((%(t)s)0, a / b);" % {"t": t, "f": f})
                        if kind == "ffdiv" else "return mod;"}
        return text, []
    if kind == "ipow":  # integer power; a negative exponent gives 0 (|base| > 1)
        return ("DV_DEVICE %(t)s %(n)s(%(t)s a, %(t)s b) {\n"
                "  if (b < 0) return a == 1 ? 1 : (a == (%(t)s)-1 ? ((b & 1) ? a : 1) :\n"
                "                   a == 0 ? %(zd)s : 0);\n"
                "  %(t)s r = 1;\n"
                "  while (b) { if (b & 1) r *= a; a *= a; b >>= 1; }\n"
                "  return r;\n"
                "}") % {"t": t, "n": name,
                        "zd": ("(%s)((dv_u64)1 << %d)" % (t, {"dv_i8": 7, "dv_i16": 15,
                                                             "dv_i32": 31}.get(t, 63)))
                        if not t.startswith("dv_u") else "0"}, []
    if kind in ("amax", "amin", "anmax", "anmin"):  # float atomics by CAS (Numba's rules)
        shared = t.endswith("__shared")
        t = t.replace("__shared", "")
        f = "f32" if t == "float" else "f64"
        nan = kind.startswith("an") and kind[2] == "n" or kind in ("anmax", "anmin")
        cmp = "<" if kind.endswith("max") else ">"
        early = "isnan(v)" if nan else "isnan(v) || isnan(old)"
        again = ("(isnan(old) || old %s v)" % cmp) if nan else ("old %s v" % cmp)
        return ("DV_DEVICE %(t)s %(n)s(%(q)s%(t)s *p, %(t)s v) {\n"
                "  %(t)s old = *p, first = old;\n"
                "  if (%(early)s) return old;\n"
                "  while (%(again)s) {\n"
                "    %(t)s seen = dv_atomic_cas_%(f)s(p, old, v);\n"
                "    if (seen == old || (isnan(seen) && isnan(old))) break;\n"
                "    old = seen;\n"
                "  }\n"
                "  return first;\n"
                "}") % {"t": t, "n": name, "f": f, "early": early, "again": again,
                        "q": "DV_SHARED_MEM " if shared else "DV_GLOBAL_MEM "}, []
    if kind == "cplx":  # complex arithmetic: complexops
        from .complexops import helper_text as ctext
        op, _, c = t.partition("__")
        return ctext(op, c), []
    if kind == "roundto":  # round(x, ndigits): Numba's algorithm (cudaimpl round_to_impl)
        return ("DV_DEVICE %(t)s %(n)s(%(t)s x, dv_i64 nd) {\n"
                "  if (isinf(x) || isnan(x)) return x;\n"
                "  double p1, p2 = 1.0, y;\n"
                "  if (nd >= 0) {\n"
                "    if (nd > 22) { p1 = pow(10.0, (double)(nd - 22)); p2 = 1e22; }\n"
                "    else p1 = pow(10.0, (double)nd);\n"
                "    y = ((double)x * p1) * p2;\n"
                "    if (isinf(y)) return x;\n"
                "  } else {\n"
                "    p1 = pow(10.0, (double)-nd);\n"
                "    y = (double)x / p1;\n"
                "  }\n"
                "  double z = rint(y);\n"
                "  if (fabs(y - z) == 0.5) z = 2.0 * rint(y / 2.0);\n"
                "  if (nd >= 0) z = (z / p2) / p1; else z *= p1;\n"
                "  return (%(t)s)z;\n"
                "}") % {"t": t, "n": name}, []
    if kind == "slice":  # Python's slice bounds (PySlice_AdjustIndices) over n elements
        return ("DV_DEVICE dv_i64 dv_slice__bound(dv_i64 n, dv_i64 v, dv_i64 step, int given,\n"
                "                                 int is_start) {\n"
                "  if (!given) return step > 0 ? (is_start ? 0 : n) : (is_start ? n - 1 : -1);\n"
                "  if (v < 0) { v += n; if (v < 0) v = step > 0 ? 0 : -1; }\n"
                "  else if (v >= n) v = step > 0 ? n : n - 1;\n"
                "  return v;\n"
                "}\n"
                "DV_DEVICE dv_i64 dv_slice__len(dv_i64 lo, dv_i64 hi, dv_i64 step) {\n"
                "  if (step > 0) return hi > lo ? (hi - lo + step - 1) / step : 0;\n"
                "  return lo > hi ? (lo - hi - step - 1) / (-step) : 0;\n"
                "}"), []
    if kind in ("popc", "clz", "ffs", "brev"):
        bits = 64 if t.endswith("64") else 32
        ut = "dv_u64" if bits == 64 else "dv_u32"
        body = {
            "popc": "int n = 0; %s u = (%s)x; while (u) { u &= u - 1; n++; } return n;" % (ut, ut),
            "clz": "%s u = (%s)x; int n = 0; if (u == 0) return %d; "
                   "while (!(u & ((%s)1 << %d))) { u <<= 1; n++; } return n;" % (
                       ut, ut, bits, ut, bits - 1),
            "ffs": "%s u = (%s)x; if (u == 0) return 0; int n = 1; "
                   "while (!(u & 1)) { u >>= 1; n++; } return n;" % (ut, ut),
            "brev": "%s u = (%s)x, r = 0; for (int i = 0; i < %d; i++) { r = (r << 1) | (u & 1); "
                    "u >>= 1; } return (%s)r;" % (ut, ut, bits, t),
        }[kind]
        rt = t if kind == "brev" else "dv_i32" if kind != "popc" else "dv_i32"
        return "DV_DEVICE %s %s(%s x) { %s }" % (rt, name, t, body), []
    raise KeyError(name)


# ---- purity, truth, casts ---------------------------------------------------------------

_PURE_CALLS = None


def pure(fl, value):
    """Whether evaluating `value` has no effect (so its temporary may fold into its use)."""
    if isinstance(value, (ir.Const, ir.Global, ir.FreeVar, ir.Var, ir.Arg)):
        return True
    if not isinstance(value, ir.Expr):
        return False
    op = value.op
    if op in ("binop", "unary", "getattr", "static_getitem", "getitem", "build_tuple",
              "exhaust_iter", "cast", "typed_getitem"):
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
            return key in _pure_keys()
    return False


def _pure_keys():
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
        from .complexops import cast_from
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


# ---- expressions ------------------------------------------------------------------------

def expr(fl, e, ty, loc, target):
    op = e.op
    if op == "binop":
        return binop(fl, e.fn, e, ty, loc)
    if op == "inplace_binop":
        lt = unlit(fl.typemap[e.lhs.name])
        if isinstance(lt, types.Array):
            raise fl.error("an in-place operation on a whole array (%s): kernels index "
                           "elements" % e.fn.__name__, loc)
        return binop(fl, e.immutable_fn, e, ty, loc)
    if op == "unary":
        return unary(fl, e, ty, loc)
    if op == "call":
        return call(fl, e, ty, loc, target)
    if op == "getattr":
        return getattr_(fl, fl.value(e.value, loc), e.attr, ty, loc)
    if op in ("getitem", "static_getitem", "typed_getitem"):
        base = fl.value(e.value, loc)
        if op == "static_getitem" and static_index_ok(e.index):
            idx = static_index(fl, e.index, loc)
        else:
            idx = fl.value(e.index_var if op == "static_getitem" else e.index, loc)
        return getitem(fl, base, idx, ty, e, loc)
    if op == "build_tuple":
        return Tup([fl.value(v, loc) for v in e.items])
    if op == "exhaust_iter":
        v = fl.value(e.value, loc)
        if isinstance(v, Tup):
            if len(v.items) != e.count:
                raise fl.error("unpacking %d values into %d names" % (len(v.items), e.count),
                               loc)
            return v
        raise fl.error("unpacking a %s (only tuples unpack in a kernel)" % type(v).__name__,
                       loc)
    if op == "getiter":
        v = fl.value(e.value, loc)
        if isinstance(v, Rng):
            return v
        raise fl.error("iterating over a %s (only range(...) is taken)" %
                       unlit(fl.typemap[e.value.name]), loc)
    if op == "cast":
        return fl.value(e.value, loc)
    if op in ("iternext", "pair_first", "pair_second"):
        raise fl.error("this iteration (only `for ... in range(...)` loops)", loc)
    if op == "make_function":
        raise fl.error("a function or lambda defined inside a kernel: define it at module "
                       "level with @devarray.jit(device=True)", loc)
    if op in ("build_list", "build_set", "build_map", "list_comprehension"):
        raise fl.error("a %s inside a kernel (no lists, sets or dicts on a device; use "
                       "local.array or a tuple)" % op.replace("build_", ""), loc)
    raise fl.error("the expression `%s`" % op, loc)


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


# ---- calls ------------------------------------------------------------------------------

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


def _device_call(fl, dev, args, sig, loc):
    name, spaces = dev.lower_into(fl.p, sig, args)
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
        if v.const is not None:
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
