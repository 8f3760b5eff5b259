#define _GNU_SOURCE /* exp10, exp10f, exp10l and M_PI from the host's libm */
/*
 * The C math library in kernels, on every backend that runs them
 * (tests/kernels/mathlib.dvk): every function of the dialect's <math.h>,
 * float and double, over a table of inputs (zeros of both signs, subnormal,
 * large, negative, infinite and NaN values, every pair of them for the
 * functions of two arguments, and pseudo-random values), compared with the
 * host's libm with the bound of g_real below, in ULPs.
 *
 * The reference is computed one precision up (a float function against the
 * host's double function rounded to float, a double function against the
 * long double one rounded to double), so the bound measures the kernel's
 * error alone; a function whose bound is 0 is compared with the host's
 * function of the same precision, bit for bit.  NaN must match NaN; a zero
 * must have the reference's sign where the function is exact or the exact
 * result is zero (sin(-0) is -0; a result that only rounded to zero may have
 * either sign); an infinity must match exactly unless the reference only
 * rounded to it (then it is one ULP past the largest value).  Integer abs, min and max (32 and 64
 * bits, signed and unsigned) and the <float.h>/<math.h> constants are exact.
 *
 * Double precision is skipped, by name, on an OpenCL device without
 * cl_khr_fp64.  On the CUDA driver test double the module is built and its
 * kernels looked up; the value checks skip there by name.
 */
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>

#include "common.h"

#ifndef DV_TEST_KERNELS_DIR
#error "DV_TEST_KERNELS_DIR must name tests/kernels"
#endif

static char g_cache_dir[256];

static bool is_backend(const char *name) { return strncmp(g_backend, name, strlen(name)) == 0; }

static dv_module *build_mathlib(void) {
  char path[512];
  snprintf(path, sizeof path, "%s/mathlib.dvk", DV_TEST_KERNELS_DIR);
  char *src = read_text_file(path);
  dv_program *p = NULL;
  dv_module *m = NULL;
  assert_ok(dv_program_create(g_ctx, "mathlib.dvk", src, &p));
  free(src);
  dv_status rc = dv_program_build(p, 0, &m);
  if (rc) {
    char log[4096];
    snprintf(log, sizeof log, "%s", dv_program_log(p));
    dv_program_destroy(p);
    fail_msg("mathlib.dvk: %s: %s\n%s", dv_status_name(rc), dv_last_error(), log);
  }
  dv_program_destroy(p);
  return m;
}

static void launch(dv_module *m, const char *name, int n, int nargs, dv_arg *args) {
  dv_launch_config c = {{(uint32_t)(n + 127) / 128, 1, 1}, {128, 1, 1}, 0, NULL};
  assert_ok(dv_kernel_launch(test_kernel(m, name), &c, nargs, args));
}

/* Whether the device has double precision (math_caps). */
static bool device_has_f64(dv_module *m) {
  int caps[1] = {-1};
  dv_array *d = test_dev_from(g_ctx, caps, 1, DV_INT32);
  dv_arg a[] = {DV_ARG_ARRAY(d)};
  launch(m, "math_caps", 1, 1, a);
  test_to_host(d, caps);
  dv_array_release(d);
  assert_true(caps[0] == 0 || caps[0] == 1);
  return caps[0] == 1;
}

/* ---- ULPs ---------------------------------------------------------------------------- */

/* A non-NaN value of the precision as a point on one integer line: the bit
 * pattern for positive values, its magnitude negated for negative ones, so
 * neighbouring values are 1 apart, +0 and -0 are both 0 and the infinities
 * come one step past the largest finite values. */
static int64_t ordered(double v, bool sp) {
  if (sp) {
    float f = (float)v;
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return (u & 0x80000000u) ? -(int64_t)(u & 0x7fffffffu) : (int64_t)u;
  }
  uint64_t u;
  memcpy(&u, &v, sizeof u);
  return (u >> 63) ? -(int64_t)(u & 0x7fffffffffffffffull) : (int64_t)u;
}

/* How many representable values of the precision lie between a and b
 * (both non-NaN), in either order. */
static uint64_t ulp_distance(double a, double b, bool sp) {
  int64_t ia = ordered(a, sp), ib = ordered(b, sp);
  return ia > ib ? (uint64_t)ia - (uint64_t)ib : (uint64_t)ib - (uint64_t)ia;
}

static void test_ulp_distance(void **state) {
  (void)state;
  for (int sp = 0; sp < 2; sp++) {
    double up = sp ? (double)nextafterf(1.0f, 2.0f) : nextafter(1.0, 2.0);
    double tiny = sp ? (double)FLT_TRUE_MIN : DBL_TRUE_MIN;
    double mn = sp ? (double)FLT_MIN : DBL_MIN, mx = sp ? (double)FLT_MAX : DBL_MAX;
    double below_min = sp ? (double)nextafterf(FLT_MIN, 0.0f) : nextafter(DBL_MIN, 0.0);
    uint64_t one_to_two = sp ? 1ull << 23 : 1ull << 52;
    assert_int_equal(ulp_distance(1.0, up, sp), 1);
    assert_int_equal(ulp_distance(up, 1.0, sp), 1);
    assert_int_equal(ulp_distance(-1.0, -up, sp), 1);
    assert_int_equal(ulp_distance(1.0, 2.0, sp), one_to_two);
    assert_int_equal(ulp_distance(-2.0, -1.0, sp), one_to_two);
    /* Across zero: -tiny, (-0 = +0), +tiny. */
    assert_int_equal(ulp_distance(-0.0, 0.0, sp), 0);
    assert_int_equal(ulp_distance(0.0, tiny, sp), 1);
    assert_int_equal(ulp_distance(-0.0, tiny, sp), 1);
    assert_int_equal(ulp_distance(-tiny, tiny, sp), 2);
    assert_int_equal(ulp_distance(tiny, -tiny, sp), 2);
    assert_int_equal(ulp_distance(-1.0, 1.0, sp), 2 * (uint64_t)ordered(1.0, sp));
    /* The subnormal boundary, the top, the infinities, the whole line. */
    assert_int_equal(ulp_distance(mn, below_min, sp), 1);
    assert_int_equal(ulp_distance(-mn, -below_min, sp), 1);
    assert_int_equal(ulp_distance(mx, INFINITY, sp), 1);
    assert_int_equal(ulp_distance(-INFINITY, -mx, sp), 1);
    assert_int_equal(ulp_distance(-mx, mx, sp),
                     sp ? 2ull * 0x7f7fffffu : 2ull * 0x7fefffffffffffffull);
  }
  /* The float line is not the double line. */
  assert_int_equal(ulp_distance(1.0, 1.0 + 0x1p-23, true), 1);
  assert_int_equal(ulp_distance(1.0, 1.0 + 0x1p-23, false), 1ull << 29);
}

/* ---- reference functions ------------------------------------------------------------- */

/* Each returns the reference for one slot of mathlib.dvk: for a bound of 0
 * (exact) the host's function of the same precision; otherwise the one
 * precision up, unrounded (the caller rounds; an infinity it rounded to is
 * told from a pole that way). */
typedef long double (*ref_fn)(bool sp, bool exact, double x, double y, double z, int e);

#define REF1(fn)                                                                          \
  static long double ref_##fn(bool sp, bool exact, double x, double y, double z, int e) { \
    (void)y, (void)z, (void)e;                                                            \
    if (sp) return exact ? fn##f((float)x) : fn(x);                                       \
    return exact ? fn(x) : fn##l((long double)x);                                         \
  }                                                                                       \
  extern int dv_t_semicolon /* takes the ';' after the macro */
#define REF2(fn)                                                                          \
  static long double ref_##fn(bool sp, bool exact, double x, double y, double z, int e) { \
    (void)z, (void)e;                                                                     \
    if (sp) return exact ? fn##f((float)x, (float)y) : fn(x, y);                          \
    return exact ? fn(x, y) : fn##l((long double)x, (long double)y);                      \
  }                                                                                       \
  extern int dv_t_semicolon /* takes the ';' after the macro */
REF1(acos);
REF1(asin);
REF1(atan);
REF1(cos);
REF1(sin);
REF1(tan);
REF1(acosh);
REF1(asinh);
REF1(atanh);
REF1(cosh);
REF1(sinh);
REF1(tanh);
REF1(exp);
REF1(exp2);
REF1(exp10);
REF1(expm1);
REF1(log);
REF1(log2);
REF1(log10);
REF1(log1p);
REF1(logb);
REF1(cbrt);
REF1(sqrt);
REF1(erf);
REF1(erfc);
REF1(tgamma);
REF1(lgamma);
REF1(ceil);
REF1(floor);
REF1(trunc);
REF1(round);
REF1(rint);
REF1(nearbyint);
REF1(fabs);
REF2(atan2);
REF2(pow);
REF2(hypot);
REF2(fmod);
REF2(remainder);
REF2(copysign);
REF2(nextafter);
REF2(fdim);
REF2(fmin);
REF2(fmax);

static long double ref_rsqrt(bool sp, bool exact, double x, double y, double z, int e) {
  (void)exact, (void)y, (void)z, (void)e;
  return sp ? 1.0 / sqrt(x) : 1.0L / sqrtl((long double)x);
}
static long double ref_fma(bool sp, bool exact, double x, double y, double z, int e) {
  (void)exact, (void)e;
  return sp ? fmaf((float)x, (float)y, (float)z) : fma(x, y, z);
}
static long double ref_ldexp(bool sp, bool exact, double x, double y, double z, int e) {
  (void)exact, (void)y, (void)z;
  return sp ? ldexpf((float)x, e) : ldexp(x, e);
}
/* mathlib.dvk's MATHLIB_BIG_EXP. */
static long big_exp(int e) { return e == 100000 ? 10000000000L : (long)e; }
static long double ref_scalbln(bool sp, bool exact, double x, double y, double z, int e) {
  (void)exact, (void)y, (void)z;
  return sp ? scalblnf((float)x, big_exp(e)) : scalbln(x, big_exp(e));
}
static long double ref_frexp(bool sp, bool exact, double x, double y, double z, int e) {
  (void)exact, (void)y, (void)z, (void)e;
  int ex;
  return sp ? frexpf((float)x, &ex) : frexp(x, &ex);
}
static long double ref_modf_frac(bool sp, bool exact, double x, double y, double z, int e) {
  (void)exact, (void)y, (void)z, (void)e;
  float fi;
  double di;
  return sp ? modff((float)x, &fi) : modf(x, &di);
}
static long double ref_modf_int(bool sp, bool exact, double x, double y, double z, int e) {
  (void)exact, (void)y, (void)z, (void)e;
  float fi;
  double di;
  if (sp) return (modff((float)x, &fi), fi);
  return (modf(x, &di), di);
}
static long double ref_remquo(bool sp, bool exact, double x, double y, double z, int e) {
  (void)exact, (void)z, (void)e;
  int q;
  return sp ? remquof((float)x, (float)y, &q) : remquo(x, y, &q);
}
static long double ref_nan(bool sp, bool exact, double x, double y, double z, int e) {
  (void)sp, (void)exact, (void)x, (void)y, (void)z, (void)e;
  return NAN;
}

/* A zero result may have either sign (fmin and fmax of two zeros). */
#define ANY_ZERO_SIGN 1u
/* The exact result is never zero (tgamma): a zero is an underflow, even
 * where the reference underflowed too, and may have either sign (PoCL gives
 * tgamma(-16085.2) = +0). */
#define NEVER_ZERO 4u
/* CUDA documents lgamma's bound outside -10.001..-2.264 (float) and
 * -23.0001..-2.2637 (double) only: inside, CUDA's results are not compared. */
#define CUDA_LGAMMA 2u

typedef struct real_op {
  const char *fname, *dname; /* as mathlib.dvk calls them */
  int ulp_f, ulp_d;          /* the bound in ULPs, float and double; 0: exact */
  int arity;                 /* arguments shown in messages (4: x and e) */
  ref_fn ref;
  unsigned flags;
} real_op;

/* The real-valued slots of mathlib.dvk, in its order.  The bounds are those
 * OpenCL 1.2 sets for full-profile devices (tables 7.1 and 7.2), which CUDA's
 * documented bounds meet too; lgamma, for which OpenCL sets none, is held to
 * CUDA's (6 ULP float, 4 double; see CUDA_LGAMMA). */
static const real_op g_real[] = {
    {"acosf", "acos", 4, 4, 1, ref_acos, 0},
    {"asinf", "asin", 4, 4, 1, ref_asin, 0},
    {"atanf", "atan", 5, 5, 1, ref_atan, 0},
    {"cosf", "cos", 4, 4, 1, ref_cos, 0},
    {"sinf", "sin", 4, 4, 1, ref_sin, 0},
    {"tanf", "tan", 5, 5, 1, ref_tan, 0},
    {"acoshf", "acosh", 4, 4, 1, ref_acosh, 0},
    {"asinhf", "asinh", 4, 4, 1, ref_asinh, 0},
    {"atanhf", "atanh", 5, 5, 1, ref_atanh, 0},
    {"coshf", "cosh", 4, 4, 1, ref_cosh, 0},
    {"sinhf", "sinh", 4, 4, 1, ref_sinh, 0},
    {"tanhf", "tanh", 5, 5, 1, ref_tanh, 0},
    {"expf", "exp", 3, 3, 1, ref_exp, 0},
    {"exp2f", "exp2", 3, 3, 1, ref_exp2, 0},
    {"exp10f", "exp10", 3, 3, 1, ref_exp10, 0},
    {"expm1f", "expm1", 3, 3, 1, ref_expm1, 0},
    {"logf", "log", 3, 3, 1, ref_log, 0},
    {"log2f", "log2", 3, 3, 1, ref_log2, 0},
    {"log10f", "log10", 3, 3, 1, ref_log10, 0},
    {"log1pf", "log1p", 2, 2, 1, ref_log1p, 0},
    {"logbf", "logb", 0, 0, 1, ref_logb, 0},
    {"cbrtf", "cbrt", 2, 2, 1, ref_cbrt, 0},
    {"sqrtf", "sqrt", 3, 0, 1, ref_sqrt, 0},
    {"rsqrtf", "rsqrt", 2, 2, 1, ref_rsqrt, 0},
    {"erff", "erf", 16, 16, 1, ref_erf, 0},
    {"erfcf", "erfc", 16, 16, 1, ref_erfc, 0},
    {"tgammaf", "tgamma", 16, 16, 1, ref_tgamma, NEVER_ZERO},
    {"lgammaf", "lgamma", 6, 4, 1, ref_lgamma, CUDA_LGAMMA},
    {"ceilf", "ceil", 0, 0, 1, ref_ceil, 0},
    {"floorf", "floor", 0, 0, 1, ref_floor, 0},
    {"truncf", "trunc", 0, 0, 1, ref_trunc, 0},
    {"roundf", "round", 0, 0, 1, ref_round, 0},
    {"rintf", "rint", 0, 0, 1, ref_rint, 0},
    {"nearbyintf", "nearbyint", 0, 0, 1, ref_nearbyint, 0},
    {"fabsf", "fabs", 0, 0, 1, ref_fabs, 0},
    {"atan2f", "atan2", 6, 6, 2, ref_atan2, 0},
    {"powf", "pow", 16, 16, 2, ref_pow, 0},
    {"hypotf", "hypot", 4, 4, 2, ref_hypot, 0},
    {"fmodf", "fmod", 0, 0, 2, ref_fmod, 0},
    {"remainderf", "remainder", 0, 0, 2, ref_remainder, 0},
    {"copysignf", "copysign", 0, 0, 2, ref_copysign, 0},
    {"nextafterf", "nextafter", 0, 0, 2, ref_nextafter, 0},
    {"fdimf", "fdim", 0, 0, 2, ref_fdim, 0},
    {"fminf", "fmin", 0, 0, 2, ref_fmin, ANY_ZERO_SIGN},
    {"fmaxf", "fmax", 0, 0, 2, ref_fmax, ANY_ZERO_SIGN},
    {"fmaf", "fma", 0, 0, 3, ref_fma, 0},
    {"ldexpf", "ldexp", 0, 0, 4, ref_ldexp, 0},
    {"scalbnf", "scalbn", 0, 0, 4, ref_ldexp, 0},
    {"scalblnf", "scalbln", 0, 0, 4, ref_scalbln, 0},
    {"frexpf (fraction)", "frexp (fraction)", 0, 0, 1, ref_frexp, 0},
    {"modff (fraction)", "modf (fraction)", 0, 0, 1, ref_modf_frac, 0},
    {"modff (integral part)", "modf (integral part)", 0, 0, 1, ref_modf_int, 0},
    {"remquof (remainder)", "remquo (remainder)", 0, 0, 2, ref_remquo, 0},
    {"sincosf (sine)", "sincos (sine)", 4, 4, 1, ref_sin, 0},
    {"sincosf (cosine)", "sincos (cosine)", 4, 4, 1, ref_cos, 0},
    {"nanf(\"\")", "nan(\"\")", 0, 0, 0, ref_nan, 0},
};
enum { NREAL = sizeof g_real / sizeof g_real[0] };

/* The int slots: how each is checked. */
enum int_kind {
  INT_EXACT,     /* equal to the reference */
  INT_FREXP_EXP, /* frexp's exponent: unspecified for infinities and NaN */
  INT_REMQUO,    /* remquo's quotient: its sign and its magnitude modulo 8 */
  INT_ILOGB,     /* ilogb: FP_ILOGB0 and FP_ILOGBNAN are the backend's own */
};
typedef struct int_op {
  const char *fname, *dname;
  enum int_kind kind;
  int arity;
  int (*ref)(bool sp, double x, double y);
} int_op;

static int ref_frexp_exp(bool sp, double x, double y) {
  (void)y;
  int e;
  if (sp)
    (void)frexpf((float)x, &e);
  else
    (void)frexp(x, &e);
  return e;
}
static int ref_remquo_quo(bool sp, double x, double y) {
  int q;
  if (sp)
    (void)remquof((float)x, (float)y, &q);
  else
    (void)remquo(x, y, &q);
  return q;
}
static int ref_ilogb(bool sp, double x, double y) {
  (void)y;
  return sp ? ilogbf((float)x) : ilogb(x);
}
/* <math.h>'s classification macros: C says nonzero, the dialect says 1. */
#define REFC1(name)                                     \
  static int refc_##name(bool sp, double x, double y) { \
    (void)y;                                            \
    return sp ? name((float)x) != 0 : name(x) != 0;     \
  }                                                     \
  extern int dv_t_semicolon /* takes the ';' after the macro */
#define REFC2(name)                                              \
  static int refc_##name(bool sp, double x, double y) {          \
    return sp ? name((float)x, (float)y) != 0 : name(x, y) != 0; \
  }                                                              \
  extern int dv_t_semicolon /* takes the ';' after the macro */
REFC1(isnan);
REFC1(isinf);
REFC1(isfinite);
REFC1(isnormal);
REFC1(signbit);
REFC2(isgreater);
REFC2(isgreaterequal);
REFC2(isless);
REFC2(islessequal);
REFC2(islessgreater);
REFC2(isunordered);
static int refc_fpclassify(bool sp, double x, double y) {
  (void)y;
  return sp ? fpclassify((float)x) : fpclassify(x);
}

static const int_op g_int[] = {
    {"frexpf (exponent)", "frexp (exponent)", INT_FREXP_EXP, 1, ref_frexp_exp},
    {"remquof (quotient)", "remquo (quotient)", INT_REMQUO, 2, ref_remquo_quo},
    {"ilogbf", "ilogb", INT_ILOGB, 1, ref_ilogb},
    {"isnan", "isnan", INT_EXACT, 1, refc_isnan},
    {"isinf", "isinf", INT_EXACT, 1, refc_isinf},
    {"isfinite", "isfinite", INT_EXACT, 1, refc_isfinite},
    {"isnormal", "isnormal", INT_EXACT, 1, refc_isnormal},
    {"signbit", "signbit", INT_EXACT, 1, refc_signbit},
    {"fpclassify", "fpclassify", INT_EXACT, 1, refc_fpclassify},
    {"isgreater", "isgreater", INT_EXACT, 2, refc_isgreater},
    {"isgreaterequal", "isgreaterequal", INT_EXACT, 2, refc_isgreaterequal},
    {"isless", "isless", INT_EXACT, 2, refc_isless},
    {"islessequal", "islessequal", INT_EXACT, 2, refc_islessequal},
    {"islessgreater", "islessgreater", INT_EXACT, 2, refc_islessgreater},
    {"isunordered", "isunordered", INT_EXACT, 2, refc_isunordered},
};
enum { NINT = sizeof g_int / sizeof g_int[0] };

typedef struct long_op {
  const char *fname, *dname;
  long long (*ref)(bool sp, double x);
} long_op;
static long long ref_lrint(bool sp, double x) { return sp ? lrintf((float)x) : lrint(x); }
static long long ref_llrint(bool sp, double x) { return sp ? llrintf((float)x) : llrint(x); }
static long long ref_lround(bool sp, double x) { return sp ? lroundf((float)x) : lround(x); }
static long long ref_llround(bool sp, double x) { return sp ? llroundf((float)x) : llround(x); }
static const long_op g_long[] = {
    {"lrintf", "lrint", ref_lrint},
    {"llrintf", "llrint", ref_llrint},
    {"lroundf", "lround", ref_lround},
    {"llroundf", "llround", ref_llround},
};
enum { NLONG = sizeof g_long / sizeof g_long[0] };

/* ---- inputs ------------------------------------------------------------------------- */

/* Edge cases; every pair of them is an input of the functions of two
 * arguments. */
static const float k_edge_f[] = {
    0.0f,    -0.0f,   0x1p-149f, -0x1p-149f, 0x1.8p-140f, -0x1.234p-130f, 0x1p-126f, -0x1p-126f,
    1e-10f,  1e-5f,   0.1f,      -0.1f,      0.25f,       0.5f,           -0.5f,     0.75f,
    0.999f,  1.0f,    -1.0f,     1.25f,      1.5f,        -1.5f,          2.0f,      2.5f,
    -2.5f,   3.0f,    -3.0f,     3.5f,       -3.5f,       3.14159265f,    4.5f,      5.5f,
    -7.25f,  10.0f,   -10.0f,    20.5f,      33.0f,       88.5f,          -88.5f,    100.25f,
    -103.0f, 1000.0f, 1e5f,      -1e5f,      12345.678f,  8388609.0f,     1e10f,     -1e10f,
    1e20f,   1e30f,   -1e30f,    1.7e38f,    FLT_MAX,     -FLT_MAX,       INFINITY,  -INFINITY,
    NAN};
static const double k_edge_d[] = {0.0,         -0.0,
                                  0x1p-1074,   -0x1p-1074,
                                  0x1.8p-1060, -0x1.234p-1050,
                                  0x1p-1022,   -0x1p-1022,
                                  1e-300,      1e-45,
                                  1e-10,       1e-5,
                                  0.1,         -0.1,
                                  0.25,        0.5,
                                  -0.5,        0.75,
                                  0.999,       1.0,
                                  -1.0,        1.25,
                                  1.5,         -1.5,
                                  2.0,         2.5,
                                  -2.5,        3.0,
                                  -3.0,        3.5,
                                  -3.5,        3.14159265358979,
                                  4.5,         5.5,
                                  -7.25,       10.0,
                                  -10.0,       20.5,
                                  33.0,        88.5,
                                  -88.5,       100.25,
                                  -103.0,      710.5,
                                  -745.5,      1000.0,
                                  1e5,         -1e5,
                                  12345.678,   4503599627370497.0,
                                  1e20,        1e30,
                                  -1e30,       1e300,
                                  DBL_MAX,     -DBL_MAX,
                                  INFINITY,    -INFINITY,
                                  NAN};
/* Exponents for ldexp and scalbn (100000: 10^10 for scalbln). */
static const int k_exps[] = {0,    1,   -1,   3,     -3,    24,   -24,   127,    -126,
                             -149, 150, 1023, -1022, -1074, 2000, -2000, 100000, -100000};
enum { NEXPS = sizeof k_exps / sizeof k_exps[0], NRANDOM = 384 };

typedef struct inputs {
  int n, ne;         /* inputs; edge cases (the first ne * ne inputs are their pairs) */
  double *x, *y, *z; /* values of the precision under test */
  int *e;
} inputs;

/* A pseudo-random value of the precision: a third in [-1, 1], a third in
 * [-16, 16], a third with any exponent from 2^-40 to 2^40 (double: 2^-600
 * to 2^600), either sign. */
static double random_value(bool sp, int i) {
  double u = (double)(rnd() >> 11) * 0x1p-53; /* [0, 1) */
  double v;
  if (i % 3 == 0)
    v = 2 * u - 1;
  else if (i % 3 == 1)
    v = 32 * u - 16;
  else
    v = ldexp(1 + u, (int)rnd_range(sp ? -40 : -600, sp ? 40 : 600)) * (rnd() & 1 ? -1 : 1);
  return sp ? (double)(float)v : v;
}

static inputs make_inputs(bool sp) {
  const int ne =
      sp ? (int)(sizeof k_edge_f / sizeof *k_edge_f) : (int)(sizeof k_edge_d / sizeof *k_edge_d);
  inputs in;
  in.n = ne * ne + NRANDOM;
  in.ne = ne;
  in.x = calloc((size_t)in.n, sizeof(double));
  in.y = calloc((size_t)in.n, sizeof(double));
  in.z = calloc((size_t)in.n, sizeof(double));
  in.e = calloc((size_t)in.n, sizeof(int));
  assert_true(in.x && in.y && in.z && in.e);
  rnd_seed(sp ? 2101 : 2102);
  for (int i = 0; i < in.n; i++) {
    if (i < ne * ne) {
      int a = i / ne, b = i % ne, c = (i * 7 + 3) % ne;
      in.x[i] = sp ? (double)k_edge_f[a] : k_edge_d[a];
      in.y[i] = sp ? (double)k_edge_f[b] : k_edge_d[b];
      in.z[i] = sp ? (double)k_edge_f[c] : k_edge_d[c];
    } else {
      in.x[i] = random_value(sp, i);
      in.y[i] = random_value(sp, i + 1);
      in.z[i] = random_value(sp, i + 2);
    }
    in.e[i] = k_exps[i % NEXPS];
  }
  return in;
}

static void free_inputs(inputs *in) {
  free(in->x);
  free(in->y);
  free(in->z);
  free(in->e);
}

/* ---- comparing ---------------------------------------------------------------------- */

/* Whether input i is one a function of x alone has seen already (the pairs
 * repeat every x ne times). */
static bool repeated_x(const inputs *in, int i) { return i < in->ne * in->ne && i % in->ne != 0; }

static bool is_subnormal(double v, bool sp) {
  return v != 0 && fabs(v) < (sp ? (double)FLT_MIN : DBL_MIN);
}

/* got against the reference hi (unrounded unless exact) within bound. */
static bool real_ok(double got, long double hi, bool sp, int bound, unsigned flags,
                    uint64_t *ulps) {
  double want = sp ? (double)(float)hi : (double)hi;
  *ulps = 0;
  if (isnan(want) || isnan(got)) return isnan(want) && isnan(got);
  /* A pole or an exact infinity: exactly; one the reference rounded to: by ULPs. */
  if ((isinf(want) && isinf(hi)) || (isinf(got) && bound == 0)) return got == want;
  if (got == 0 && want == 0)
    return (flags & (ANY_ZERO_SIGN | NEVER_ZERO)) || (bound > 0 && hi != 0) ||
           signbit(got) == signbit(want);
  *ulps = ulp_distance(got, want, sp);
  return *ulps <= (uint64_t)bound;
}

typedef struct tally {
  int failures, shown, skipped_subnormal;
  uint64_t max_ulps[NREAL];
} tally;

static void report(tally *t, const char *fmt, ...) {
  t->failures++;
  if (t->shown >= 40) return;
  t->shown++;
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  print_message("[ FAIL ] %s: %s\n", g_backend, msg);
}

/* What thread 0 of math_f32 and math_f64 writes to ci, in mathlib.dvk's order. */
enum {
  CI_FP_NAN,
  CI_FP_INFINITE,
  CI_FP_ZERO,
  CI_FP_SUBNORMAL,
  CI_FP_NORMAL,
  CI_ILOGB0,
  CI_ILOGBNAN,
  CI_RADIX,
  CI_MANT_DIG,
  CI_DIG,
  CI_MIN_EXP,
  CI_MAX_EXP,
  CI_MIN_10_EXP,
  CI_MAX_10_EXP,
  CI_NREAL,
  CI_NINT,
  CI_NLONG,
  CI_SUBNORMALS,
  CI_COUNT
};
enum { CF_COUNT = 21 };

/* Run math_f32 (sp) or math_f64 and check every result; returns how many
 * were wrong (each reported). */
static int run_real(dv_module *m, bool sp) {
  inputs in = make_inputs(sp);
  const int n = in.n;
  const size_t rsz = sp ? sizeof(float) : sizeof(double);
  dv_type_id rt = sp ? DV_FLOAT32 : DV_FLOAT64;
  void *xs = malloc(rsz * (size_t)n), *ys = malloc(rsz * (size_t)n), *zs = malloc(rsz * (size_t)n);
  void *r = malloc(rsz * (size_t)n * NREAL);
  int *ir = malloc(sizeof(int) * (size_t)n * NINT);
  int64_t *lr = malloc(sizeof(int64_t) * (size_t)n * NLONG);
  double cf[CF_COUNT];
  float cff[CF_COUNT];
  int ci[CI_COUNT];
  assert_true(xs && ys && zs && r && ir && lr);
  for (int i = 0; i < n; i++) {
    if (sp) {
      ((float *)xs)[i] = (float)in.x[i];
      ((float *)ys)[i] = (float)in.y[i];
      ((float *)zs)[i] = (float)in.z[i];
    } else {
      ((double *)xs)[i] = in.x[i];
      ((double *)ys)[i] = in.y[i];
      ((double *)zs)[i] = in.z[i];
    }
  }
  /* Outputs start as a pattern no slot leaves behind by chance. */
  memset(r, 0x5a, rsz * (size_t)n * NREAL);
  memset(ir, 0x5a, sizeof(int) * (size_t)n * NINT);
  memset(lr, 0x5a, sizeof(int64_t) * (size_t)n * NLONG);
  memset(cf, 0x5a, sizeof cf);
  memset(cff, 0x5a, sizeof cff);
  memset(ci, 0x5a, sizeof ci);
  dv_array *dx = test_dev_from(g_ctx, xs, n, rt), *dy = test_dev_from(g_ctx, ys, n, rt), *dz = test_dev_from(g_ctx, zs, n, rt);
  dv_array *de = test_dev_from(g_ctx, in.e, n, DV_INT32);
  dv_array *dr = test_dev_from(g_ctx, r, (int64_t)n * NREAL, rt);
  dv_array *dir = test_dev_from(g_ctx, ir, (int64_t)n * NINT, DV_INT32);
  dv_array *dlr = test_dev_from(g_ctx, lr, (int64_t)n * NLONG, DV_INT64);
  dv_array *dcf = sp ? test_dev_from(g_ctx, cff, CF_COUNT, rt) : test_dev_from(g_ctx, cf, CF_COUNT, rt);
  dv_array *dci = test_dev_from(g_ctx, ci, CI_COUNT, DV_INT32);
  dv_arg args[] = {DV_ARG_ARRAY(dx),  DV_ARG_ARRAY(dy),
                   DV_ARG_ARRAY(dz),  DV_ARG_ARRAY(de),
                   DV_ARG_ARRAY(dr),  DV_ARG_ARRAY(dir),
                   DV_ARG_ARRAY(dlr), DV_ARG_ARRAY(dcf),
                   DV_ARG_ARRAY(dci), sp ? DV_ARG_F32(FLT_MIN) : DV_ARG_F64(DBL_MIN),
                   DV_ARG_I32(n)};
  launch(m, sp ? "math_f32" : "math_f64", n, 11, args);
  test_to_host(dr, r);
  test_to_host(dir, ir);
  test_to_host(dlr, lr);
  test_to_host(dci, ci);
  if (sp) {
    test_to_host(dcf, cff);
    for (int i = 0; i < CF_COUNT; i++) cf[i] = cff[i];
  } else {
    test_to_host(dcf, cf);
  }
  dv_array *all[] = {dx, dy, dz, de, dr, dir, dlr, dcf, dci};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) dv_array_release(all[i]);

  /* The kernel's slots are this file's tables, one for one. */
  if (ci[CI_NREAL] != NREAL || ci[CI_NINT] != NINT || ci[CI_NLONG] != NLONG)
    fail_msg("mathlib.dvk writes %d/%d/%d real/int/long slots, g_real/g_int/g_long have %d/%d/%d",
             ci[CI_NREAL], ci[CI_NINT], ci[CI_NLONG], NREAL, NINT, NLONG);
  assert_true(ci[CI_SUBNORMALS] == 0 || ci[CI_SUBNORMALS] == 1);
  bool subnormals = ci[CI_SUBNORMALS] == 1;
  if (!subnormals)
    print_message(
        "[ info ] %s: the device flushes %s subnormal numbers: inputs and results "
        "that are subnormal are not compared\n",
        g_backend, sp ? "float" : "double");

  tally t;
  memset(&t, 0, sizeof t);
  for (int s = 0; s < NREAL; s++) {
    const real_op *op = &g_real[s];
    int bound = sp ? op->ulp_f : op->ulp_d;
    const char *name = sp ? op->fname : op->dname;
    for (int i = 0; i < n; i++) {
      double x = in.x[i], y = in.y[i], z = in.z[i];
      int e = in.e[i];
      if (op->arity <= 1 && repeated_x(&in, i)) continue;
      if ((op->flags & CUDA_LGAMMA) && is_backend("cuda") &&
          (sp ? x > -10.001 && x < -2.264 : x > -23.0001 && x < -2.2637))
        continue;
      double got = sp ? (double)((float *)r)[(size_t)s * n + i] : ((double *)r)[(size_t)s * n + i];
      long double hi = op->ref(sp, bound == 0, x, y, z, e);
      double want = sp ? (double)(float)hi : (double)hi;
      if (!subnormals &&
          (is_subnormal(x, sp) || (op->arity >= 2 && op->arity <= 3 && is_subnormal(y, sp)) ||
           (op->arity == 3 && is_subnormal(z, sp)) || is_subnormal(want, sp))) {
        t.skipped_subnormal++;
        continue;
      }
      uint64_t ulps;
      bool ok = real_ok(got, hi, sp, bound, op->flags, &ulps);
      if (ok && ulps > t.max_ulps[s]) t.max_ulps[s] = ulps;
      if (!ok) {
        char args_s[160];
        if (op->arity == 0)
          args_s[0] = 0;
        else if (op->arity == 1)
          snprintf(args_s, sizeof args_s, "%a", x);
        else if (op->arity == 2)
          snprintf(args_s, sizeof args_s, "%a, %a", x, y);
        else if (op->arity == 3)
          snprintf(args_s, sizeof args_s, "%a, %a, %a", x, y, z);
        else
          snprintf(args_s, sizeof args_s, "%a, %d", x, e);
        report(&t, "%s(%s) = %a, want %a (%llu ULP, bound %d)", name, args_s, got, want,
               (unsigned long long)ulps, bound);
      }
    }
  }
  for (int s = 0; s < NINT; s++) {
    const int_op *op = &g_int[s];
    const char *name = sp ? op->fname : op->dname;
    for (int i = 0; i < n; i++) {
      double x = in.x[i], y = in.y[i];
      if (op->arity == 1 && repeated_x(&in, i)) continue;
      int got = ir[(size_t)s * n + i], want = op->ref(sp, x, y);
      bool ok = got == want;
      if (!subnormals && (is_subnormal(x, sp) || (op->arity == 2 && is_subnormal(y, sp)))) {
        t.skipped_subnormal++;
        continue;
      }
      switch (op->kind) {
        case INT_EXACT: break;
        case INT_FREXP_EXP:
          if (!isfinite(x)) ok = true;
          break;
        case INT_REMQUO:
          if (!isfinite(x) || isnan(y) || y == 0) {
            ok = true; /* the quotient is unspecified where the remainder is NaN */
          } else {
            int g7 = abs(got % 8), w7 = abs(want % 8);
            ok = g7 == w7 && (w7 == 0 || (got < 0) == (want < 0));
          }
          break;
        case INT_ILOGB:
          if (x == 0) want = ci[CI_ILOGB0];
          if (isnan(x)) want = ci[CI_ILOGBNAN];
          ok = got == want;
          break;
      }
      if (!ok && op->arity == 1) report(&t, "%s(%a) = %d, want %d", name, x, got, want);
      if (!ok && op->arity == 2) report(&t, "%s(%a, %a) = %d, want %d", name, x, y, got, want);
    }
  }
  for (int s = 0; s < NLONG; s++) {
    const long_op *op = &g_long[s];
    const char *name = sp ? op->fname : op->dname;
    for (int i = 0; i < n; i++) {
      double x = in.x[i];
      if (repeated_x(&in, i)) continue;
      if (!(fabs(x) < 0x1p62)) continue; /* unspecified, and the kernel wrote 0 */
      if (!subnormals && is_subnormal(x, sp)) continue;
      long long got = lr[(size_t)s * n + i], want = op->ref(sp, x);
      if (got != want) report(&t, "%s(%a) = %lld, want %lld", name, x, got, want);
    }
  }

  /* Constants: exactly the host's. */
  const double want_cf_f[CF_COUNT] = {
      INFINITY,        NAN,           HUGE_VALF,     FLT_MAX,           FLT_MIN,
      FLT_TRUE_MIN,    FLT_EPSILON,   FLT_MAX,       (float)M_E,        (float)M_LOG2E,
      (float)M_LOG10E, (float)M_LN2,  (float)M_LN10, (float)M_PI,       (float)M_PI_2,
      (float)M_PI_4,   (float)M_1_PI, (float)M_2_PI, (float)M_2_SQRTPI, (float)M_SQRT2,
      (float)M_SQRT1_2};
  const double want_cf_d[CF_COUNT - 1] = {
      INFINITY, NAN,     HUGE_VAL, DBL_MAX,    DBL_MIN, DBL_TRUE_MIN, DBL_EPSILON,
      M_E,      M_LOG2E, M_LOG10E, M_LN2,      M_LN10,  M_PI,         M_PI_2,
      M_PI_4,   M_1_PI,  M_2_PI,   M_2_SQRTPI, M_SQRT2, M_SQRT1_2};
  static const char *const cf_names_f[CF_COUNT] = {
      "INFINITY",     "NAN",       "HUGE_VALF",  "FLT_MAX",   "FLT_MIN",    "FLT_TRUE_MIN",
      "FLT_EPSILON",  "MAXFLOAT",  "M_E_F",      "M_LOG2E_F", "M_LOG10E_F", "M_LN2_F",
      "M_LN10_F",     "M_PI_F",    "M_PI_2_F",   "M_PI_4_F",  "M_1_PI_F",   "M_2_PI_F",
      "M_2_SQRTPI_F", "M_SQRT2_F", "M_SQRT1_2_F"};
  static const char *const cf_names_d[CF_COUNT - 1] = {
      "INFINITY", "NAN",     "HUGE_VAL", "DBL_MAX",    "DBL_MIN", "DBL_TRUE_MIN", "DBL_EPSILON",
      "M_E",      "M_LOG2E", "M_LOG10E", "M_LN2",      "M_LN10",  "M_PI",         "M_PI_2",
      "M_PI_4",   "M_1_PI",  "M_2_PI",   "M_2_SQRTPI", "M_SQRT2", "M_SQRT1_2"};
  for (int c = 0; c < (sp ? CF_COUNT : CF_COUNT - 1); c++) {
    double w = sp ? want_cf_f[c] : want_cf_d[c];
    bool ok = isnan(w) ? isnan(cf[c]) : cf[c] == w;
    if (!ok) report(&t, "%s = %a, want %a", sp ? cf_names_f[c] : cf_names_d[c], cf[c], w);
  }
  const int want_ci[] = {FP_NAN, FP_INFINITE, FP_ZERO, FP_SUBNORMAL, FP_NORMAL};
  static const char *const ci_names[] = {"FP_NAN", "FP_INFINITE", "FP_ZERO", "FP_SUBNORMAL",
                                         "FP_NORMAL"};
  for (int c = 0; c < 5; c++)
    if (ci[c] != want_ci[c]) report(&t, "%s = %d, want %d", ci_names[c], ci[c], want_ci[c]);
  /* C allows FP_ILOGB0 to be INT_MIN or -INT_MAX, FP_ILOGBNAN INT_MIN or INT_MAX. */
  if (ci[CI_ILOGB0] != INT_MIN && ci[CI_ILOGB0] != -INT_MAX)
    report(&t, "FP_ILOGB0 = %d", ci[CI_ILOGB0]);
  if (ci[CI_ILOGBNAN] != INT_MIN && ci[CI_ILOGBNAN] != INT_MAX)
    report(&t, "FP_ILOGBNAN = %d", ci[CI_ILOGBNAN]);
  const int want_lim_f[] = {FLT_RADIX,   FLT_MANT_DIG,   FLT_DIG,       FLT_MIN_EXP,
                            FLT_MAX_EXP, FLT_MIN_10_EXP, FLT_MAX_10_EXP};
  const int want_lim_d[] = {FLT_RADIX,   DBL_MANT_DIG,   DBL_DIG,       DBL_MIN_EXP,
                            DBL_MAX_EXP, DBL_MIN_10_EXP, DBL_MAX_10_EXP};
  for (int c = 0; c < 7; c++) {
    int w = sp ? want_lim_f[c] : want_lim_d[c];
    if (ci[CI_RADIX + c] != w)
      report(&t, "%s limit %d of <float.h> = %d, want %d", sp ? "float" : "double", c,
             ci[CI_RADIX + c], w);
  }

  /* What was measured, for the record (ctest -V). */
  char line[4096];
  size_t len = 0;
  for (int s = 0; s < NREAL && len < sizeof line; s++) {
    int bound = sp ? g_real[s].ulp_f : g_real[s].ulp_d;
    if (bound > 0)
      len += (size_t)snprintf(line + len, sizeof line - len, " %s %llu/%d",
                              sp ? g_real[s].fname : g_real[s].dname,
                              (unsigned long long)t.max_ulps[s], bound);
  }
  print_message("[ info ] %s %s, %d inputs, largest error/bound in ULPs:%s\n", g_backend,
                sp ? "float" : "double", n, line);
  if (t.skipped_subnormal)
    print_message("[ info ] %d comparisons with subnormal numbers skipped\n", t.skipped_subnormal);
  free(xs);
  free(ys);
  free(zs);
  free(r);
  free(ir);
  free(lr);
  free_inputs(&in);
  if (t.failures)
    print_message(
        "[ FAIL ] %s: %d results of %s math functions outside their bound (the first "
        "%d above)\n",
        g_backend, t.failures, sp ? "float" : "double", t.shown);
  return t.failures;
}

/* ---- tests -------------------------------------------------------------------------- */

/* Every backend, the CUDA test double included: the whole library compiles
 * and the module has its kernels. */
static void test_mathlib_builds(void **state) {
  (void)state;
  dv_module *m = build_mathlib();
  (void)test_kernel(m, "math_f32");
  (void)test_kernel(m, "math_int");
  (void)test_kernel(m, "math_caps");
  if (!is_backend("opencl")) (void)test_kernel(m, "math_f64"); /* OpenCL: with cl_khr_fp64 only */
  dv_module_release(m);
}

static void test_float_functions(void **state) {
  (void)state;
  NEEDS_EXECUTION();
  dv_module *m = build_mathlib();
  int failures = run_real(m, true);
  dv_module_release(m);
  assert_int_equal(failures, 0);
}

static void test_double_functions(void **state) {
  (void)state;
  NEEDS_EXECUTION();
  dv_module *m = build_mathlib();
  if (!device_has_f64(m)) {
    dv_module_release(m);
    printf("SKIPPED: %s: the device has no double precision (OpenCL without cl_khr_fp64)\n",
           __func__);
    skip();
  }
  (void)test_kernel(m, "math_f64");
  int failures = run_real(m, false);
  dv_module_release(m);
  assert_int_equal(failures, 0);
}

/* Integer abs, min and max, 32 and 64 bits. */
static void test_integer_functions(void **state) {
  (void)state;
  NEEDS_EXECUTION();
  /* a and p avoid the most negative value (abs of it is undefined in C). */
  static const int32_t A[] = {
      0,         1,         -1, 2, -2, 7, -7, 100, -100, 65536, -65536, INT32_MAX, INT32_MIN + 1,
      123456789, -123456789};
  static const int32_t B[] = {0,      1,         -1,        3,         -3,         99, -101, 65536,
                              -65537, INT32_MAX, INT32_MIN, 123456789, -123456790, 5,  -5,   2};
  static const int64_t P[] = {0,
                              1,
                              -1,
                              5,
                              -5,
                              INT64_C(1) << 31,
                              -(INT64_C(1) << 31),
                              (INT64_C(1) << 32) + 7,
                              -((INT64_C(1) << 32) + 7),
                              INT64_C(1) << 40,
                              -(INT64_C(1) << 40),
                              INT64_MAX,
                              INT64_MIN + 1,
                              INT64_C(0x123456789abcdef),
                              -INT64_C(0x123456789abcdef)};
  static const int64_t Q[] = {0,
                              1,
                              -1,
                              6,
                              -4,
                              INT64_C(1) << 31,
                              -(INT64_C(1) << 31) - 1,
                              (INT64_C(1) << 32) + 8,
                              -(INT64_C(1) << 40) - 3,
                              INT64_MAX,
                              INT64_MIN,
                              INT64_C(0x123456789abcdee),
                              3,
                              -3,
                              2,
                              -2};
  enum { NA = 15, NB = 16, N = NA * NB, N32 = 6, N64 = 8 };
  _Static_assert(sizeof A / sizeof *A == NA && sizeof B / sizeof *B == NB, "A, B");
  _Static_assert(sizeof P / sizeof *P == NA && sizeof Q / sizeof *Q == NB, "P, Q");
  int32_t a[N], b[N], ri[N * N32];
  int64_t p[N], q[N], rl[N * N64];
  int cnt[2] = {-1, -1};
  for (int i = 0; i < N; i++) {
    a[i] = A[i / NB];
    b[i] = B[i % NB];
    p[i] = P[i / NB];
    q[i] = Q[i % NB];
  }
  memset(ri, 0x5a, sizeof ri);
  memset(rl, 0x5a, sizeof rl);
  dv_module *m = build_mathlib();
  dv_array *da = test_dev_from(g_ctx, a, N, DV_INT32), *db = test_dev_from(g_ctx, b, N, DV_INT32);
  dv_array *dp = test_dev_from(g_ctx, p, N, DV_INT64), *dq = test_dev_from(g_ctx, q, N, DV_INT64);
  dv_array *dri = test_dev_from(g_ctx, ri, N * N32, DV_INT32), *drl = test_dev_from(g_ctx, rl, N * N64, DV_INT64);
  dv_array *dc = test_dev_from(g_ctx, cnt, 2, DV_INT32);
  dv_arg args[] = {DV_ARG_ARRAY(da),  DV_ARG_ARRAY(db),  DV_ARG_ARRAY(dp), DV_ARG_ARRAY(dq),
                   DV_ARG_ARRAY(dri), DV_ARG_ARRAY(drl), DV_ARG_ARRAY(dc), DV_ARG_I32(N)};
  launch(m, "math_int", N, 8, args);
  test_to_host(dri, ri);
  test_to_host(drl, rl);
  test_to_host(dc, cnt);
  dv_array *all[] = {da, db, dp, dq, dri, drl, dc};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) dv_array_release(all[i]);
  dv_module_release(m);
  assert_int_equal(cnt[0], N32);
  assert_int_equal(cnt[1], N64);

  static const char *const n32[N32] = {"abs(a)",    "abs(a) > -1",        "min(a, b)",
                                       "max(a, b)", "min(a, b) unsigned", "max(a, b) unsigned"};
  static const char *const n64[N64] = {
      "abs(p)",    "abs(p) > -1",        "labs(p)",           "llabs(p)", "min(p, q)",
      "max(p, q)", "min(p, q) unsigned", "max(p, q) unsigned"};
  int failures = 0;
  for (int i = 0; i < N; i++) {
    int32_t x = a[i], y = b[i];
    uint32_t ux = (uint32_t)x, uy = (uint32_t)y;
    int32_t w32[N32] = {x < 0 ? -x : x,
                        1,
                        x < y ? x : y,
                        x > y ? x : y,
                        (int32_t)(ux < uy ? ux : uy),
                        (int32_t)(ux > uy ? ux : uy)};
    int64_t u = p[i], v = q[i];
    uint64_t uu = (uint64_t)u, uv = (uint64_t)v;
    int64_t au = u < 0 ? -u : u;
    int64_t w64[N64] = {au,
                        1,
                        au,
                        au,
                        u < v ? u : v,
                        u > v ? u : v,
                        (int64_t)(uu < uv ? uu : uv),
                        (int64_t)(uu > uv ? uu : uv)};
    for (int s = 0; s < N32; s++)
      if (ri[s * N + i] != w32[s] && failures++ < 20)
        print_message("[ FAIL ] %s: 32-bit %s with a = %d, b = %d: %d, want %d\n", g_backend,
                      n32[s], x, y, ri[s * N + i], w32[s]);
    for (int s = 0; s < N64; s++)
      if (rl[s * N + i] != w64[s] && failures++ < 20)
        print_message("[ FAIL ] %s: 64-bit %s with p = %lld, q = %lld: %lld, want %lld\n",
                      g_backend, n64[s], (long long)u, (long long)v, (long long)rl[s * N + i],
                      (long long)w64[s]);
  }
  if (failures) fail_msg("%d integer results wrong", failures);
}

int main(int argc, char **argv) {
  /* Every context of this suite caches into a directory of its own. */
  int begin = kernel_suite_begin(argc, argv, "kmath", NULL, g_cache_dir, sizeof g_cache_dir);
  if (begin) return begin;
  const struct CMUnitTest tests[] = {
      T(test_ulp_distance),     T(test_mathlib_builds),    T(test_float_functions),
      T(test_double_functions), T(test_integer_functions),
  };
  return kernel_suite_end(g_cache_dir,
                          test_main(argc, argv, "kmath", tests, sizeof tests / sizeof tests[0]));
}
