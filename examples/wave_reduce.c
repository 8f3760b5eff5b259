/* Block sums with wave shuffles, then one sum per block checked on the CPU.
 *   example_wave_reduce [--backend NAME] [--n BLOCKS]
 * On the host simulator, DV_HOST_WAVE_SIZE=N runs it with waves of N threads. */
#include "kernel_example.h"

#define B 256

int main(int argc, char **argv) {
  ex_opts o = {NULL, 100, NULL};
  ex_parse(argc, argv, &o, "Block sums with a warp-shuffle reduction.");
  int G = (int)o.n, n = G * B - 37; /* the last block is partly empty */
  float *x = malloc((size_t)n * sizeof *x), *out = malloc((size_t)G * sizeof *out);
  if (!x || !out) return 1;
  /* Whole numbers: every order of addition gives the same sums exactly. */
  for (int i = 0; i < n; i++) x[i] = (float)((i * 7919) % 1000) - 300.0f;
  dv_context *ctx = ex_context(&o);
  dv_program *p = ex_program(ctx, &o, "wave_reduce.dvk");
  dv_module *m = ex_build(p);
  dv_kernel *k;
  TRY(dv_module_kernel(m, "block_sum", &k));
  dv_kernel_attrs at;
  TRY(dv_kernel_attributes(k, &at));
  int64_t len = n, g = G;
  dv_array *hx, *ho, *dx, *dout;
  TRY(dv_host_array_wrap(ctx, x, 1, &len, dv_dtype_get(DV_FLOAT32), NULL, &hx));
  TRY(dv_host_array_wrap(ctx, out, 1, &g, dv_dtype_get(DV_FLOAT32), NULL, &ho));
  TRY(dv_to_device(ctx, hx, NULL, 1, NULL, &dx));
  TRY(dv_device_array(ctx, 1, &g, dv_dtype_get(DV_FLOAT32), NULL, 'C', NULL, &dout));
  dv_launch_config cfg = {{(uint32_t)G, 1, 1}, {B, 1, 1}, 0, NULL};
  dv_arg args[] = {DV_ARG_ARRAY(dx), DV_ARG_ARRAY(dout), DV_ARG_I32(n)};
  TRY(dv_kernel_launch(k, &cfg, 3, args));
  TRY(dv_copy_to_host(dout, ho, NULL, NULL));
  int wrong = 0;
  double total = 0;
  for (int b = 0; b < G; b++) {
    double s = 0;
    for (int t = 0; t < B && b * B + t < n; t++) s += x[b * B + t];
    if ((double)out[b] != s) {
      if (wrong < 5) fprintf(stderr, "block %d: sum %.1f, expected %.1f\n", b, (double)out[b], s);
      wrong++;
    }
    total += out[b];
  }
  printf("%s: wave size %d, %d block sums (total %.0f), %d wrong\n", dv_context_backend(ctx),
         at.wave_size, G, total, wrong);
  dv_array_release(hx), dv_array_release(ho), dv_array_release(dx), dv_array_release(dout);
  dv_module_release(m);
  dv_program_destroy(p);
  TRY(dv_context_destroy(ctx));
  free(x), free(out);
  return wrong != 0;
}
