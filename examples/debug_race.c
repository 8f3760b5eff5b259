/* Debugging a kernel on the host (docs/kernels.md): a block sum whose tree
 * lacks one dv_syncthreads() (examples/debug_race.dvk) run on the host
 * simulator with every kernel check on (host_mode=checked, kernel_check=on,
 * the same as DV_HOST_MODE=checked DV_KERNEL_CHECK=on); the race comes back
 * from the launch as DV_ERR_KERNEL_FAULT, whose message is printed.  Then the
 * corrected kernel runs and its sum is checked against C.
 *   example_debug_race [--backend NAME] [--n BLOCKS]
 * Exit status: 0 when the race was reported and the corrected sum is right
 * (on a backend other than host, which has no race checks: when the
 * corrected sum is right); 1 otherwise. */
#include "kernel_example.h"

#define B 256

/* Launch `name` over x (synchronously: a fault is the launch's status) and
 * sum the block partials on the host into *sum.  Returns the status. */
static dv_status run(dv_module *m, const char *name, dv_array *dx, int G, int64_t n, float *sum) {
  dv_kernel *k;
  TRY(dv_module_kernel(m, name, &k));
  dv_context *ctx = dv_array_context(dx);
  int64_t g = G;
  float *part = calloc((size_t)G, sizeof *part);
  if (!part) exit(1);
  dv_array *dp, *hp;
  TRY(dv_device_array(ctx, 1, &g, dv_dtype_get(DV_FLOAT32), NULL, 'C', NULL, &dp));
  TRY(dv_array_memset(dp, 0, NULL));
  dv_launch_config cfg = {{(uint32_t)G, 1, 1}, {B, 1, 1}, 0, NULL};
  dv_arg args[] = {DV_ARG_ARRAY(dx), DV_ARG_ARRAY(dp), DV_ARG_I64(n)};
  dv_status rc = dv_kernel_launch(k, &cfg, 3, args);
  if (rc == DV_OK) {
    TRY(dv_host_array_wrap(ctx, part, 1, &g, dv_dtype_get(DV_FLOAT32), NULL, &hp));
    TRY(dv_copy_to_host(dp, hp, NULL, NULL));
    dv_array_release(hp);
  }
  *sum = 0;
  for (int b = 0; b < G; b++) *sum += part[b];
  dv_array_release(dp);
  free(part);
  return rc;
}

int main(int argc, char **argv) {
  ex_opts o = {"host", 64, NULL};
  ex_parse(argc, argv, &o, "A reduction missing one barrier, caught by the host simulator's race check.");
  int G = (int)o.n;
  int64_t n = (int64_t)G * B - 7; /* the last block is partial */
  float *x = malloc((size_t)n * sizeof *x), ref = 0;
  if (!x) return 1;
  for (int64_t i = 0; i < n; i++) x[i] = (float)(i % 9) * 0.25f, ref += x[i]; /* exact in float */

  dv_config *cfg;
  dv_context *ctx;
  TRY(dv_config_create(&cfg));
  TRY(dv_config_set(cfg, "backend", o.backend));
  TRY(dv_config_set(cfg, "host_mode", "checked"));
  TRY(dv_config_set(cfg, "kernel_check", "on"));
  (void)dv_config_set(cfg, "kernel_timeout", "60"); /* where this build has the watchdog */
  TRY(dv_context_create(cfg, &ctx));
  dv_config_destroy(cfg);
  int host = !strcmp(dv_context_backend(ctx), "host");
  dv_program *p = ex_program(ctx, &o, "debug_race.dvk");
  dv_module *m = ex_build(p);
  dv_array *hx, *dx;
  TRY(dv_host_array_wrap(ctx, x, 1, &n, dv_dtype_get(DV_FLOAT32), NULL, &hx));
  TRY(dv_to_device(ctx, hx, NULL, 1, NULL, &dx));

  float racy_sum, sum;
  dv_status rc = run(m, "block_sum_racy", dx, G, n, &racy_sum);
  int race = 0;
  printf("%s: block_sum_racy over %lld floats in %d blocks of %d threads:\n", dv_context_backend(ctx),
         (long long)n, G, B);
  if (rc == DV_OK) {
    printf("  no report; sum %g (C: %g)\n", (double)racy_sum, (double)ref);
  } else {
    const char *msg = dv_last_error();
    race = rc == DV_ERR_KERNEL_FAULT && (strstr(msg, "race") || strstr(msg, "read-write") ||
                                         strstr(msg, "write-write"));
    printf("  %s:\n  %s\n", dv_status_name(rc), msg);
  }
  TRY(run(m, "block_sum", dx, G, n, &sum));
  int right = sum == ref;
  printf("block_sum (corrected): sum %g (C: %g): %s\n", (double)sum, (double)ref, right ? "right" : "WRONG");

  dv_array_release(hx), dv_array_release(dx);
  dv_module_release(m);
  dv_program_destroy(p);
  TRY(dv_context_destroy(ctx));
  free(x);
  if (!right) return 1;
  if (!host) {
    printf("(the race checks are the host simulator's: run with --backend host)\n");
    return 0;
  }
  if (race) return 0;
  printf("the race was not reported as a DV_ERR_KERNEL_FAULT naming a race\n");
  return 1;
}
