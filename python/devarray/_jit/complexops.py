"""Complex numbers in the dialect's lowering: complex64 and complex128 as structs of two
floats (``dv_c64``, ``dv_c128``) with helper functions written into the module when used.

The arithmetic is Numba's (CPython's algorithms): division scaled by the larger part of the
divisor, powers through the polar form (small integer exponents by repeated products, as
Numba's ``complex ** int``), ``abs`` by ``hypot``. A kernel's complex argument is passed as
two floating-point parameters (``x__re``, ``x__im``); an array of complex numbers has the
struct as its element type (the kernel contract does not check struct element types).
"""

from numba.core import types

PRELUDE = """#if !defined(DV_BACKEND_OPENCL) || defined(cl_khr_fp64)
typedef struct { double re, im; } dv_c128;
DV_DEVICE dv_c128 dv_c128_make(double re, double im) { dv_c128 r; r.re = re; r.im = im; return r; }
#endif
typedef struct { float re, im; } dv_c64;
DV_DEVICE dv_c64 dv_c64_make(float re, float im) { dv_c64 r; r.re = re; r.im = im; return r; }"""


def ctype(t):
    return "dv_c64" if t == types.complex64 else "dv_c128"


def real(t):
    return "float" if t == types.complex64 else "double"


def helper_text(kind, c):
    """C text of helper `kind` for complex C type c (dv_c64 or dv_c128)."""
    f = "float" if c == "dv_c64" else "double"
    sfx = "f" if c == "dv_c64" else ""
    d = {"c": c, "f": f, "s": sfx}
    if kind == "add":
        return "DV_DEVICE %(c)s %(c)s_add(%(c)s a, %(c)s b) { return %(c)s_make(a.re + b.re, a.im + b.im); }" % d
    if kind == "sub":
        return "DV_DEVICE %(c)s %(c)s_sub(%(c)s a, %(c)s b) { return %(c)s_make(a.re - b.re, a.im - b.im); }" % d
    if kind == "mul":
        return ("DV_DEVICE %(c)s %(c)s_mul(%(c)s a, %(c)s b) {\n"
                "  return %(c)s_make(a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re);\n"
                "}") % d
    if kind == "div":  # CPython's complex division (Numba's)
        return ("DV_DEVICE %(c)s %(c)s_div(%(c)s a, %(c)s b) {\n"
                "  %(f)s ar = fabs%(s)s(b.re), ai = fabs%(s)s(b.im);\n"
                "  if (ar >= ai) {\n"
                "    if (ar == 0) return %(c)s_make((%(f)s)NAN, (%(f)s)NAN);\n"
                "    %(f)s ratio = b.im / b.re, den = b.re + b.im * ratio;\n"
                "    return %(c)s_make((a.re + a.im * ratio) / den, (a.im - a.re * ratio) / den);\n"
                "  }\n"
                "  if (ai >= ar) {\n"
                "    %(f)s ratio = b.re / b.im, den = b.re * ratio + b.im;\n"
                "    return %(c)s_make((a.re * ratio + a.im) / den, (a.im * ratio - a.re) / den);\n"
                "  }\n"
                "  return %(c)s_make((%(f)s)NAN, (%(f)s)NAN);\n"
                "}") % d
    if kind == "neg":
        return "DV_DEVICE %(c)s %(c)s_neg(%(c)s a) { return %(c)s_make(-a.re, -a.im); }" % d
    if kind == "abs":
        return "DV_DEVICE %(f)s %(c)s_abs(%(c)s a) { return hypot%(s)s(a.re, a.im); }" % d
    if kind == "pow":  # CPython's complex power: the polar form; integer exponents by products
        return ("DV_DEVICE %(c)s %(c)s_pow(%(c)s a, %(c)s b) {\n"
                "  if (b.im == 0 && b.re == (%(f)s)(int)b.re && fabs%(s)s(b.re) <= 100) {\n"
                "    int n = (int)b.re, m = n < 0 ? -n : n;\n"
                "    %(c)s r = %(c)s_make(1, 0), p = a;\n"
                "    while (m) {\n"
                "      if (m & 1) r = %(c)s_make(r.re * p.re - r.im * p.im, r.re * p.im + r.im * p.re);\n"
                "      p = %(c)s_make(p.re * p.re - p.im * p.im, 2 * p.re * p.im);\n"
                "      m >>= 1;\n"
                "    }\n"
                "    if (n < 0) {\n"
                "      %(f)s den = r.re * r.re + r.im * r.im;\n"
                "      r = %(c)s_make(r.re / den, -r.im / den);\n"
                "    }\n"
                "    return r;\n"
                "  }\n"
                "  if (b.re == 0 && b.im == 0) return %(c)s_make(1, 0);\n"
                "  if (a.re == 0 && a.im == 0) return %(c)s_make(0, 0);\n"
                "  %(f)s vabs = hypot%(s)s(a.re, a.im), len = pow%(s)s(vabs, b.re);\n"
                "  %(f)s at = atan2%(s)s(a.im, a.re), phase = at * b.re;\n"
                "  if (b.im != 0) { len /= exp%(s)s(at * b.im); phase += b.im * log%(s)s(vabs); }\n"
                "  return %(c)s_make(len * cos%(s)s(phase), len * sin%(s)s(phase));\n"
                "}") % d
    if kind == "exp":
        return ("DV_DEVICE %(c)s %(c)s_exp(%(c)s a) {\n"
                "  %(f)s e = exp%(s)s(a.re);\n"
                "  return %(c)s_make(e * cos%(s)s(a.im), e * sin%(s)s(a.im));\n"
                "}") % d
    if kind == "log":
        return ("DV_DEVICE %(c)s %(c)s_log(%(c)s a) {\n"
                "  return %(c)s_make(log%(s)s(hypot%(s)s(a.re, a.im)), atan2%(s)s(a.im, a.re));\n"
                "}") % d
    if kind == "sqrt":  # the principal root, stable for either sign of the real part
        return ("DV_DEVICE %(c)s %(c)s_sqrt(%(c)s a) {\n"
                "  if (a.re == 0 && a.im == 0) return %(c)s_make(0, a.im);\n"
                "  %(f)s t = sqrt%(s)s((fabs%(s)s(a.re) + hypot%(s)s(a.re, a.im)) / 2);\n"
                "  if (a.re >= 0) return %(c)s_make(t, a.im / (2 * t));\n"
                "  return %(c)s_make(fabs%(s)s(a.im) / (2 * t), copysign%(s)s(t, a.im));\n"
                "}") % d
    raise KeyError(kind)


def cast_from(c_expr, from_ty, to_ty):
    """C expression converting a value of Numba type from_ty to complex type to_ty."""
    ct = ctype(to_ty)
    rt = real(to_ty)
    if isinstance(from_ty, types.Complex):
        if from_ty == to_ty:
            return c_expr
        return "%s_make((%s)(%s).re, (%s)(%s).im)" % (ct, rt, c_expr, rt, c_expr)
    return "%s_make((%s)(%s), 0)" % (ct, rt, c_expr)
