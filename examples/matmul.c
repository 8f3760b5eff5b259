/* Tiled matrix multiply with shared-memory tiles and block barriers (Numba's
 * example), checked against a double-precision host reference.
 *   example_matmul [--backend host|opencl|cuda] [--n N]
 * Prints the max abs error and exits 1 if it is too large. */
#include <math.h>

#include "kernel_example.h"

#define TPB 16

int main(int argc, char **argv) {
  ex_opts o = {NULL, 128, NULL};
  ex_parse(argc, argv, &o, "C = A B for n x n float matrices with a 16 x 16 tiled kernel.");
  int n = (int)o.n;
  size_t nn = (size_t)n * (size_t)n;
  float *A = malloc(nn * sizeof *A), *B = malloc(nn * sizeof *B), *C = malloc(nn * sizeof *C);
  if (!A || !B || !C) return 1;
  srand(1);
  for (size_t i = 0; i < nn; i++) {
    A[i] = (float)(rand() % 200 - 100) / 64.0f;
    B[i] = (float)(rand() % 200 - 100) / 64.0f;
  }
  dv_context *ctx = ex_context(&o);
  dv_program *p = ex_program(ctx, &o, "matmul.dvk");
  TRY(dv_program_define(p, "TPB", "16"));
  dv_module *m = ex_build(p);
  dv_kernel *k;
  TRY(dv_module_kernel(m, "fast_matmul", &k));

  int64_t shape[2] = {n, n};
  dv_array *hA, *hB, *hC, *dA, *dB, *dC;
  const dv_dtype *f32 = dv_dtype_get(DV_FLOAT32);
  TRY(dv_host_array_wrap(ctx, A, 2, shape, f32, NULL, &hA));
  TRY(dv_host_array_wrap(ctx, B, 2, shape, f32, NULL, &hB));
  TRY(dv_host_array_wrap(ctx, C, 2, shape, f32, NULL, &hC));
  TRY(dv_to_device(ctx, hA, NULL, 1, NULL, &dA));
  TRY(dv_to_device(ctx, hB, NULL, 1, NULL, &dB));
  TRY(dv_device_array(ctx, 2, shape, f32, NULL, 'C', NULL, &dC));

  uint32_t blocks = (uint32_t)((n + TPB - 1) / TPB);
  dv_launch_config cfg = {{blocks, blocks, 1}, {TPB, TPB, 1}, 0, NULL};
  dv_arg args[] = {DV_ARG_ARRAY(dA), DV_ARG_ARRAY(dB), DV_ARG_ARRAY(dC), DV_ARG_I32(n)};
  TRY(dv_kernel_launch(k, &cfg, 4, args)); /* NULL stream: returns when done */
  TRY(dv_copy_to_host(dC, hC, NULL, NULL));

  double err = 0;
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) {
      double s = 0;
      for (int l = 0; l < n; l++) s += (double)A[i * n + l] * B[l * n + j];
      err = fmax(err, fabs(s - C[i * n + j]));
    }
  printf("%s: n=%d tiled matmul, max abs error %.3g\n", dv_context_backend(ctx), n, err);

  dv_array_release(hA), dv_array_release(hB), dv_array_release(hC);
  dv_array_release(dA), dv_array_release(dB), dv_array_release(dC);
  dv_module_release(m);
  dv_program_destroy(p);
  TRY(dv_context_destroy(ctx));
  free(A), free(B), free(C);
  return err <= 1e-3 ? 0 : 1; /* inputs are multiples of 1/64: sums are exact below n = 512 */
}
