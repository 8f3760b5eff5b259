"""C helpers of the dialect's lowering, written into a module only when a kernel uses them:
Python's integer and float floor division and modulo, integer powers, Numba's float atomics
by compare-and-swap, bit counts, round(x, ndigits), slice bounds, complex arithmetic
(complexops). ``helper_text(name)`` gives (C text, names of the helpers it needs)."""

from .complexops import helper_text as ctext
from .values import ctype  # noqa: F401  (helper texts name the dialect's types)


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
