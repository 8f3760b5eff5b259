/* Half precision: y = a*x + y on float16 (DV_FLOAT16) device arrays, computed in float
 * and rounded to half once per element (examples/half_axpy.dvk).  The float32 inputs are
 * converted to half on the device, and the halves read back as float32, so the host needs
 * no float16 code; every result is checked to be the correctly rounded half of the exact
 * a*x + y (within half a unit in the last place, plus float's own rounding).
 *   example_half_axpy [--backend NAME] [--n N] */
#include <math.h>

#include "kernel_example.h"

/* The spacing of halves at |v| (subnormals: 2^-24). */
static double half_ulp(double v) {
  v = fabs(v);
  if (v < ldexp(1, -14)) return ldexp(1, -24);
  int e;
  frexp(v, &e); /* v = m * 2^e, 0.5 <= m < 1 */
  return ldexp(1, e - 11);
}

static void launch(dv_kernel *k, int n, dv_arg *args, int nargs) {
  dv_launch_config cfg = {{(uint32_t)((n + 255) / 256 < 1024 ? (n + 255) / 256 : 1024), 1, 1},
                          {256, 1, 1}, 0, NULL};
  TRY(dv_kernel_launch(k, &cfg, nargs, args));
}

int main(int argc, char **argv) {
  ex_opts o = {NULL, 100000, NULL};
  ex_parse(argc, argv, &o, "Half-precision axpy with float arithmetic, checked element by element.");
  int n = (int)o.n;
  const float a = 1.75f;
  float *xf = malloc((size_t)n * sizeof *xf), *yf = malloc((size_t)n * sizeof *yf);
  float *xh = malloc((size_t)n * sizeof *xh), *yh = malloc((size_t)n * sizeof *yh);
  float *out = malloc((size_t)n * sizeof *out);
  if (!xf || !yf || !xh || !yh || !out) return 1;
  for (int i = 0; i < n; i++) {
    /* Mostly values of a few units; every 97th tiny (half subnormals), with cancellations. */
    float s = i % 97 == 0 ? 1e-6f : 1.0f;
    xf[i] = s * 8.0f * (float)sin(0.37 * i);
    yf[i] = i % 5 == 0 ? -a * xf[i] * 1.001f : s * 4.0f * (float)cos(0.71 * i);
  }

  dv_context *ctx = ex_context(&o);
  dv_program *p = ex_program(ctx, &o, "half_axpy.dvk");
  dv_module *m = ex_build(p);
  dv_kernel *haxpy, *to_half, *to_float;
  TRY(dv_module_kernel(m, "haxpy", &haxpy));
  TRY(dv_module_kernel(m, "to_half", &to_half));
  TRY(dv_module_kernel(m, "to_float", &to_float));

  int64_t len = n;
  const dv_dtype *f32 = dv_dtype_get(DV_FLOAT32), *f16 = dv_dtype_get(DV_FLOAT16);
  dv_array *hxf, *hyf, *hxh, *hyh, *hout, *dxf, *dyf, *dx16, *dy16, *dtmp;
  TRY(dv_host_array_wrap(ctx, xf, 1, &len, f32, NULL, &hxf));
  TRY(dv_host_array_wrap(ctx, yf, 1, &len, f32, NULL, &hyf));
  TRY(dv_host_array_wrap(ctx, xh, 1, &len, f32, NULL, &hxh));
  TRY(dv_host_array_wrap(ctx, yh, 1, &len, f32, NULL, &hyh));
  TRY(dv_host_array_wrap(ctx, out, 1, &len, f32, NULL, &hout));
  TRY(dv_to_device(ctx, hxf, NULL, 1, NULL, &dxf));
  TRY(dv_to_device(ctx, hyf, NULL, 1, NULL, &dyf));
  TRY(dv_device_array(ctx, 1, &len, f16, NULL, 'C', NULL, &dx16)); /* 2 bytes an element */
  TRY(dv_device_array(ctx, 1, &len, f16, NULL, 'C', NULL, &dy16));
  TRY(dv_device_array(ctx, 1, &len, f32, NULL, 'C', NULL, &dtmp));

  /* x, y to half on the device; read the halves back (as float) for the check. */
  dv_arg cx[] = {DV_ARG_ARRAY(dxf), DV_ARG_ARRAY(dx16), DV_ARG_I32(n)};
  dv_arg cy[] = {DV_ARG_ARRAY(dyf), DV_ARG_ARRAY(dy16), DV_ARG_I32(n)};
  launch(to_half, n, cx, 3);
  launch(to_half, n, cy, 3);
  dv_arg bx[] = {DV_ARG_ARRAY(dx16), DV_ARG_ARRAY(dtmp), DV_ARG_I32(n)};
  dv_arg by[] = {DV_ARG_ARRAY(dy16), DV_ARG_ARRAY(dtmp), DV_ARG_I32(n)};
  launch(to_float, n, bx, 3);
  TRY(dv_copy_to_host(dtmp, hxh, NULL, NULL));
  launch(to_float, n, by, 3);
  TRY(dv_copy_to_host(dtmp, hyh, NULL, NULL));

  /* y = a*x + y in half storage. */
  dv_arg args[] = {DV_ARG_F32(a), DV_ARG_ARRAY(dx16), DV_ARG_ARRAY(dy16), DV_ARG_I32(n)};
  launch(haxpy, n, args, 4);
  launch(to_float, n, by, 3);
  TRY(dv_copy_to_host(dtmp, hout, NULL, NULL));

  /* Every result is the exact value (a double holds it: halves times 1.75 plus a half)
   * rounded to a neighbouring half: within half an ulp, and 2^-12 of an ulp more for the
   * float rounding before it. */
  int wrong = 0, subnormal = 0;
  double worst = 0;
  for (int i = 0; i < n; i++) {
    double exact = (double)a * xh[i] + yh[i], r = out[i];
    double ulp = half_ulp(fabs(r) < fabs(exact) ? r : exact), err = fabs(r - exact) / ulp;
    if (!(err <= 0.5 * (1 + ldexp(1, -12)))) {
      if (wrong++ < 5) fprintf(stderr, "y[%d] = %.9g, exact %.9g (%.3f ulp)\n", i, r, exact, err);
    }
    if (err > worst) worst = err;
    subnormal += r != 0 && fabs(r) < ldexp(1, -14);
  }
  printf("%s: half axpy over %d values (%d subnormal results): worst error %.3f ulp, %d wrong\n",
         dv_context_backend(ctx), n, subnormal, worst, wrong);

  dv_array_release(hxf), dv_array_release(hyf), dv_array_release(hxh), dv_array_release(hyh);
  dv_array_release(hout), dv_array_release(dxf), dv_array_release(dyf), dv_array_release(dx16);
  dv_array_release(dy16), dv_array_release(dtmp);
  dv_module_release(m);
  dv_program_destroy(p);
  TRY(dv_context_destroy(ctx));
  free(xf), free(yf), free(xh), free(yh), free(out);
  return wrong != 0;
}
