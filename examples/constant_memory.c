/* Constant memory: a polynomial whose coefficients live in a constant array,
 * evaluated, then changed between two launches without rebuilding.
 *   example_constant_memory [--backend NAME] [--n N] */
#include "kernel_example.h"

#define NCOEF 4

static int check(const float *x, const float *y, const float *c, int n) {
  int wrong = 0;
  for (int i = 0; i < n; i++) {
    float acc = 0.0f;
    for (int k = NCOEF - 1; k >= 0; k--) acc = acc * x[i] + c[k];
    wrong += y[i] != acc;
  }
  return wrong;
}

int main(int argc, char **argv) {
  ex_opts o = {NULL, 1000, NULL};
  ex_parse(argc, argv, &o, "Polynomial evaluation with coefficients in constant memory.");
  int n = (int)o.n;
  float *x = malloc((size_t)n * sizeof *x), *y = malloc((size_t)n * sizeof *y);
  float coef[NCOEF] = {1.0f, -2.0f, 0.5f, 0.25f};
  if (!x || !y) return 1;
  for (int i = 0; i < n; i++) x[i] = (float)(i % 16) / 4.0f;
  dv_context *ctx = ex_context(&o);
  int64_t nc = NCOEF, len = n;
  dv_array *hc, *hx, *hy, *dx, *dy;
  TRY(dv_host_array_wrap(ctx, coef, 1, &nc, dv_dtype_get(DV_FLOAT32), NULL, &hc));
  dv_program *p = ex_program(ctx, &o, "constant_memory.dvk");
  TRY(dv_program_constant(p, "coef", hc)); /* copied now: like const.array_like */
  TRY(dv_program_define(p, "NCOEF", "4"));
  dv_module *m = ex_build(p);
  dv_kernel *k;
  TRY(dv_module_kernel(m, "polyval", &k));
  TRY(dv_host_array_wrap(ctx, x, 1, &len, dv_dtype_get(DV_FLOAT32), NULL, &hx));
  TRY(dv_host_array_wrap(ctx, y, 1, &len, dv_dtype_get(DV_FLOAT32), NULL, &hy));
  TRY(dv_to_device(ctx, hx, NULL, 1, NULL, &dx));
  TRY(dv_device_array_like(dx, NULL, &dy));
  dv_launch_config cfg = {{(uint32_t)((n + 63) / 64), 1, 1}, {64, 1, 1}, 0, NULL};
  dv_arg args[] = {DV_ARG_ARRAY(dx), DV_ARG_ARRAY(dy), DV_ARG_I32(n)};
  TRY(dv_kernel_launch(k, &cfg, 3, args));
  TRY(dv_copy_to_host(dy, hy, NULL, NULL));
  int w1 = check(x, y, coef, n);
  /* New coefficients, same module. */
  float coef2[NCOEF] = {0.0f, 1.0f, 0.0f, -1.0f};
  memcpy(coef, coef2, sizeof coef);
  TRY(dv_module_set_constant(m, "coef", hc, NULL));
  TRY(dv_kernel_launch(k, &cfg, 3, args));
  TRY(dv_copy_to_host(dy, hy, NULL, NULL));
  int w2 = check(x, y, coef2, n);
  printf("%s: polynomial with constant coefficients: %d wrong, after the update %d wrong\n",
         dv_context_backend(ctx), w1, w2);
  dv_array_release(hc), dv_array_release(hx), dv_array_release(hy);
  dv_array_release(dx), dv_array_release(dy);
  dv_module_release(m);
  dv_program_destroy(p);
  TRY(dv_context_destroy(ctx));
  free(x), free(y);
  return w1 || w2;
}
