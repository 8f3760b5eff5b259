/* A synchronous launch against the same launch queued and waited for.
 *
 * An empty kernel (one block of one thread) on the default backend, launched
 *   - synchronously (no stream: on the host simulator it runs on the calling
 *     thread when the default stream is idle), and
 *   - on a stream, followed by dv_stream_synchronize (the stream's worker
 *     runs it; the caller waits for it),
 * alternating, each the median of R batches of N launches, in microseconds
 * per launch, and their ratio.
 *   bench_launch [--reps R] [--n N] [--backend NAME] */
#define _POSIX_C_SOURCE 200809L
#include <string.h>

#include "bench_util.h"

static const char *src =
    "DV_KERNEL(nop, DV_ARRAY(int, x)) {\n"
    "  DV_BIND(int, x);\n"
    "  if (dv_thread_idx(0) > 1000) x[0] = 1;\n"
    "}\n";

int main(int argc, char **argv) {
  int reps = 11, n = 2000;
  const char *backend = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--reps") && i + 1 < argc)
      reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--n") && i + 1 < argc)
      n = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--backend") && i + 1 < argc)
      backend = argv[++i];
    else {
      fprintf(stderr, "usage: %s [--reps R] [--n N] [--backend NAME]\n", argv[0]);
      return 2;
    }
  }
  if (reps < 1 || reps > 1001 || n < 1) {
    fprintf(stderr, "%s: --reps 1..1001, --n positive\n", argv[0]);
    return 2;
  }
  dv_config *cfg;
  dv_context *ctx;
  DV(dv_config_create(&cfg));
  if (backend) DV(dv_config_set(cfg, "backend", backend));
  DV(dv_context_create(cfg, &ctx));
  dv_config_destroy(cfg);
  dv_program *p;
  dv_module *m;
  dv_kernel *k;
  DV(dv_program_create(ctx, "nop.dvk", src, &p));
  DV(dv_program_build(p, 0, &m));
  DV(dv_module_kernel(m, "nop", &k));
  int64_t len = 1;
  dv_array *d;
  DV(dv_device_array(ctx, 1, &len, dv_dtype_get(DV_INT32), NULL, 'C', NULL, &d));
  dv_stream *s;
  DV(dv_stream_create(ctx, 0, &s));
  dv_arg args[] = {DV_ARG_ARRAY(d)};
  dv_launch_config sync = {{1, 1, 1}, {1, 1, 1}, 0, NULL};
  dv_launch_config queued = {{1, 1, 1}, {1, 1, 1}, 0, s};
  double *ts = malloc(sizeof *ts * (size_t)reps), *tq = malloc(sizeof *tq * (size_t)reps);
  if (!ts || !tq) return 1;
  for (int i = 0; i < 200; i++) { /* warm-up */
    DV(dv_kernel_launch(k, &sync, 1, args));
    DV(dv_kernel_launch(k, &queued, 1, args));
    DV(dv_stream_synchronize(s));
  }
  for (int r = 0; r < reps; r++) {
    double t0 = bench_now();
    for (int i = 0; i < n; i++) DV(dv_kernel_launch(k, &sync, 1, args));
    ts[r] = (bench_now() - t0) / n * 1e6;
    t0 = bench_now();
    for (int i = 0; i < n; i++) {
      DV(dv_kernel_launch(k, &queued, 1, args));
      DV(dv_stream_synchronize(s));
    }
    tq[r] = (bench_now() - t0) / n * 1e6;
  }
  double ms = bench_median(ts, reps), mq = bench_median(tq, reps);
  printf("empty launch, %s backend, us per launch (median of %d batches of %d)\n",
         dv_context_backend(ctx), reps, n);
  printf("synchronous (no stream)          %8.2f\n", ms);
  printf("on a stream + stream synchronize %8.2f\n", mq);
  printf("ratio queued / synchronous       %8.2fx\n", mq / ms);
  free(ts), free(tq);
  dv_stream_release(s);
  dv_array_release(d);
  dv_module_release(m);
  dv_program_destroy(p);
  DV(dv_context_destroy(ctx));
  return 0;
}
