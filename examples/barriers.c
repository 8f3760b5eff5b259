/* ROC-style barriers: a block maximum with dv_barrier(DV_FENCE_LOCAL) for the
 * block steps and dv_wavebarrier() for the steps inside one wave.
 *   example_barriers [--backend NAME] [--n BLOCKS] */
#include "kernel_example.h"

#define B 256

int main(int argc, char **argv) {
  ex_opts o = {NULL, 40, NULL};
  ex_parse(argc, argv, &o, "Block maxima with block and wave barriers.");
  int G = (int)o.n, n = G * B;
  int *x = malloc((size_t)n * sizeof *x), *out = malloc((size_t)G * sizeof *out);
  if (!x || !out) return 1;
  for (int i = 0; i < n; i++) x[i] = (int)((i * 2654435761u) % 100000u);
  dv_context *ctx = ex_context(&o);
  dv_program *p = ex_program(ctx, &o, "barriers.dvk");
  dv_module *m = ex_build(p);
  dv_kernel *k;
  TRY(dv_module_kernel(m, "block_max", &k));
  dv_kernel_attrs at;
  TRY(dv_kernel_attributes(k, &at));
  int64_t len = n, g = G;
  dv_array *hx, *ho, *dx, *dout;
  TRY(dv_host_array_wrap(ctx, x, 1, &len, dv_dtype_get(DV_INT32), NULL, &hx));
  TRY(dv_host_array_wrap(ctx, out, 1, &g, dv_dtype_get(DV_INT32), NULL, &ho));
  TRY(dv_to_device(ctx, hx, NULL, 1, NULL, &dx));
  TRY(dv_device_array(ctx, 1, &g, dv_dtype_get(DV_INT32), NULL, 'C', NULL, &dout));
  dv_launch_config cfg = {{(uint32_t)G, 1, 1}, {B, 1, 1}, 0, NULL};
  dv_arg args[] = {DV_ARG_ARRAY(dx), DV_ARG_ARRAY(dout)};
  TRY(dv_kernel_launch(k, &cfg, 2, args));
  TRY(dv_copy_to_host(dout, ho, NULL, NULL));
  int wrong = 0;
  for (int b = 0; b < G; b++) {
    int mx = x[b * B];
    for (int t = 1; t < B; t++) mx = x[b * B + t] > mx ? x[b * B + t] : mx;
    wrong += out[b] != mx;
  }
  printf("%s: wave size %d, %d block maxima, %d wrong\n", dv_context_backend(ctx), at.wave_size, G,
         wrong);
  dv_array_release(hx), dv_array_release(ho), dv_array_release(dx), dv_array_release(dout);
  dv_module_release(m);
  dv_program_destroy(p);
  TRY(dv_context_destroy(ctx));
  free(x), free(out);
  return wrong != 0;
}
