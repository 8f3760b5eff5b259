/* Local arrays: a median-of-5 filter, each thread sorting its own window.
 *   example_local_array [--backend NAME] [--n N] */
#include "kernel_example.h"

static float median5_ref(const float *x, int n, int i) {
  float w[5];
  for (int k = 0; k < 5; k++) {
    int j = i + k - 2;
    w[k] = x[j < 0 ? 0 : j >= n ? n - 1 : j];
  }
  for (int a = 1; a < 5; a++)
    for (int b = a; b > 0 && w[b - 1] > w[b]; b--) {
      float t = w[b];
      w[b] = w[b - 1];
      w[b - 1] = t;
    }
  return w[2];
}

int main(int argc, char **argv) {
  ex_opts o = {NULL, 5000, NULL};
  ex_parse(argc, argv, &o, "A median filter with a per-thread local array.");
  int n = (int)o.n;
  float *x = malloc((size_t)n * sizeof *x), *y = malloc((size_t)n * sizeof *y);
  if (!x || !y) return 1;
  for (int i = 0; i < n; i++) x[i] = (float)((i * 37) % 101) - (i % 7 == 0 ? 500.0f : 0.0f);
  dv_context *ctx = ex_context(&o);
  dv_program *p = ex_program(ctx, &o, "local_array.dvk");
  dv_module *m = ex_build(p);
  dv_kernel *k;
  TRY(dv_module_kernel(m, "median5", &k));
  int64_t len = n;
  dv_array *hx, *hy, *dx, *dy;
  TRY(dv_host_array_wrap(ctx, x, 1, &len, dv_dtype_get(DV_FLOAT32), NULL, &hx));
  TRY(dv_host_array_wrap(ctx, y, 1, &len, dv_dtype_get(DV_FLOAT32), NULL, &hy));
  TRY(dv_to_device(ctx, hx, NULL, 1, NULL, &dx));
  TRY(dv_device_array_like(dx, NULL, &dy));
  dv_launch_config cfg = {{(uint32_t)((n + 127) / 128), 1, 1}, {128, 1, 1}, 0, NULL};
  dv_arg args[] = {DV_ARG_ARRAY(dx), DV_ARG_ARRAY(dy), DV_ARG_I32(n)};
  TRY(dv_kernel_launch(k, &cfg, 3, args));
  TRY(dv_copy_to_host(dy, hy, NULL, NULL));
  int wrong = 0;
  for (int i = 0; i < n; i++) wrong += y[i] != median5_ref(x, n, i);
  printf("%s: median-of-5 over %d values: %d wrong\n", dv_context_backend(ctx), n, wrong);
  dv_array_release(hx), dv_array_release(hy), dv_array_release(dx), dv_array_release(dy);
  dv_module_release(m);
  dv_program_destroy(p);
  TRY(dv_context_destroy(ctx));
  free(x), free(y);
  return wrong != 0;
}
