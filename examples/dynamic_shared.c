/* Dynamic shared memory: the same kernel launched with three block sizes,
 * the shared memory sized at each launch (B floats + B ints).
 *   example_dynamic_shared [--backend NAME] [--n N] */
#include "kernel_example.h"

int main(int argc, char **argv) {
  ex_opts o = {NULL, 10000, NULL};
  ex_parse(argc, argv, &o, "Per-block sums with dynamic shared memory sized at launch.");
  int n = (int)o.n;
  float *x = malloc((size_t)n * sizeof *x);
  if (!x) return 1;
  double want_sum = 0;
  int want_neg = 0;
  for (int i = 0; i < n; i++) {
    x[i] = (float)((i * 7) % 13 - 6);
    want_sum += x[i];
    want_neg += x[i] < 0;
  }
  dv_context *ctx = ex_context(&o);
  dv_program *p = ex_program(ctx, &o, "dynamic_shared.dvk");
  dv_module *m = ex_build(p);
  dv_kernel *k;
  TRY(dv_module_kernel(m, "block_sums", &k));
  int64_t len = n;
  dv_array *hx, *dx;
  TRY(dv_host_array_wrap(ctx, x, 1, &len, dv_dtype_get(DV_FLOAT32), NULL, &hx));
  TRY(dv_to_device(ctx, hx, NULL, 1, NULL, &dx));
  int bad = 0;
  const uint32_t sizes[] = {32, 128, 256};
  for (int s = 0; s < 3; s++) {
    uint32_t B = sizes[s], G = (uint32_t)((n + (int)B - 1) / (int)B);
    int64_t g = G;
    float *sums = malloc(G * sizeof *sums);
    int *negs = malloc(G * sizeof *negs);
    dv_array *ds, *dn, *hs, *hn;
    TRY(dv_device_array(ctx, 1, &g, dv_dtype_get(DV_FLOAT32), NULL, 'C', NULL, &ds));
    TRY(dv_device_array(ctx, 1, &g, dv_dtype_get(DV_INT32), NULL, 'C', NULL, &dn));
    dv_launch_config cfg = {{G, 1, 1}, {B, 1, 1}, B * (sizeof(float) + sizeof(int)), NULL};
    dv_arg args[] = {DV_ARG_ARRAY(dx), DV_ARG_ARRAY(ds), DV_ARG_ARRAY(dn), DV_ARG_I32(n)};
    TRY(dv_kernel_launch(k, &cfg, 4, args));
    TRY(dv_host_array_wrap(ctx, sums, 1, &g, dv_dtype_get(DV_FLOAT32), NULL, &hs));
    TRY(dv_host_array_wrap(ctx, negs, 1, &g, dv_dtype_get(DV_INT32), NULL, &hn));
    TRY(dv_copy_to_host(ds, hs, NULL, NULL));
    TRY(dv_copy_to_host(dn, hn, NULL, NULL));
    double sum = 0;
    int neg = 0;
    for (uint32_t b = 0; b < G; b++) sum += sums[b], neg += negs[b];
    printf("%s: block %3u, %5zu bytes of dynamic shared memory: sum %.0f (want %.0f), %d negative "
           "(want %d)\n", dv_context_backend(ctx), B, cfg.dynamic_shared, sum, want_sum, neg, want_neg);
    bad |= sum != want_sum || neg != want_neg;
    dv_array_release(ds), dv_array_release(dn), dv_array_release(hs), dv_array_release(hn);
    free(sums), free(negs);
  }
  dv_array_release(hx), dv_array_release(dx);
  dv_module_release(m);
  dv_program_destroy(p);
  TRY(dv_context_destroy(ctx));
  free(x);
  return bad;
}
