/*
 * Graphs (issue 40): a captured sequence of 10 small operations replayed
 * with dv_graph_launch, against issuing the same 10 calls, in the same run.
 *
 * The sequence, on one stream: 5 launches of a one-block kernel (x += 1
 * over 256 floats) interleaved with 5 copies of 1 KiB (device to device,
 * pinned host to device, device to pinned host, a memset, device to
 * device); then a synchronize.  "issue" makes the 10 calls each time
 * (argument and contract checks, planning, lowering, submission); "replay"
 * launches the graph captured once from the same calls.  Batches of `reps`
 * sequences, the two interleaved batch by batch; medians of the batches'
 * means in microseconds per sequence, and issue / replay.
 *
 *   bench_graph [--backend NAME] [--batches N] [--reps N]
 *
 * On the host simulator the kernels run on the stream's worker and the
 * copies in it or inline; the ratio is what a replay saves per call.  On a
 * GPU the same rows measure the driver's graph launch (bench/gpu/run.sh).
 */
#define _DEFAULT_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"

static const char *kSource =
    "DV_KERNEL(add1, DV_ARRAY(float, x), int n) {\n"
    "  DV_BIND(float, x);\n"
    "  int i = dv_thread_idx(0);\n"
    "  if (i < n) x[i] += 1.0f;\n"
    "}\n";

typedef struct seq {
  dv_kernel *k;
  dv_array *x, *a, *b, *h_in, *h_out;
  dv_stream *s;
} seq;

enum { N = 256 };

static void issue(seq *q) {
  dv_launch_config cfg = {{1, 1, 1}, {N, 1, 1}, 0, q->s};
  dv_arg args[2] = {DV_ARG_ARRAY(q->x), DV_ARG_I32(N)};
  DV(dv_kernel_launch(q->k, &cfg, 2, args));
  DV(dv_array_copy(q->a, q->x, q->s));
  DV(dv_kernel_launch(q->k, &cfg, 2, args));
  DV(dv_copy_to_device(q->b, q->h_in, q->s));
  DV(dv_kernel_launch(q->k, &cfg, 2, args));
  DV(dv_copy_to_host(q->a, q->h_out, q->s, NULL));
  DV(dv_kernel_launch(q->k, &cfg, 2, args));
  DV(dv_array_memset(q->b, 0, q->s));
  DV(dv_kernel_launch(q->k, &cfg, 2, args));
  DV(dv_array_copy(q->x, q->a, q->s));
}

int main(int argc, char **argv) {
  const char *backend = "host";
  int batches = 15, reps = 200;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--backend") && i + 1 < argc)
      backend = argv[++i];
    else if (!strcmp(argv[i], "--batches") && i + 1 < argc)
      batches = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
      reps = atoi(argv[++i]);
    else {
      fprintf(stderr, "usage: bench_graph [--backend NAME] [--batches N] [--reps N]\n");
      return 2;
    }
  }
  if (batches < 1 || reps < 1) return 2;
  dv_config *cfg;
  dv_context *ctx = NULL;
  DV(dv_config_create(&cfg));
  DV(dv_config_set(cfg, "backend", backend));
  DV(dv_config_set(cfg, "log_level", "off"));
  if (dv_context_create(cfg, &ctx)) {
    printf("SKIPPED: bench_graph: backend %s: %s\n", backend, dv_last_error());
    dv_config_destroy(cfg);
    return 0;
  }
  dv_config_destroy(cfg);
  seq q;
  dv_program *p = NULL;
  dv_module *m = NULL;
  DV(dv_program_create(ctx, "bench_graph", kSource, &p));
  DV(dv_program_build(p, 0, &m));
  dv_program_destroy(p);
  DV(dv_module_kernel(m, "add1", &q.k));
  int64_t n = N;
  const dv_dtype *f4 = dv_dtype_get(DV_FLOAT32);
  DV(dv_device_array(ctx, 1, &n, f4, NULL, 'C', NULL, &q.x));
  DV(dv_device_array(ctx, 1, &n, f4, NULL, 'C', NULL, &q.a));
  DV(dv_device_array(ctx, 1, &n, f4, NULL, 'C', NULL, &q.b));
  DV(dv_pinned_array(ctx, 1, &n, f4, NULL, 'C', &q.h_in));
  DV(dv_pinned_array(ctx, 1, &n, f4, NULL, 'C', &q.h_out));
  DV(dv_array_memset(q.x, 0, NULL));
  DV(dv_stream_create(ctx, 0, &q.s));
  DV(dv_graph_capture_begin(q.s));
  issue(&q);
  dv_graph *g = NULL;
  dv_graph_exec *e = NULL;
  DV(dv_graph_capture_end(q.s, &g));
  DV(dv_graph_instantiate(g, &e));
  size_t items = 0;
  DV(dv_graph_work_count(g, &items));
  for (int w = 0; w < 20; w++) { /* warm both */
    issue(&q);
    DV(dv_graph_launch(e, q.s));
  }
  DV(dv_stream_synchronize(q.s));
  double *ti = malloc(sizeof(double) * (size_t)batches),
         *tr = malloc(sizeof(double) * (size_t)batches);
  if (!ti || !tr) return 1;
  for (int b = 0; b < batches; b++) {
    double t0 = bench_now();
    for (int r = 0; r < reps; r++) {
      issue(&q);
      DV(dv_stream_synchronize(q.s));
    }
    double t1 = bench_now();
    for (int r = 0; r < reps; r++) {
      DV(dv_graph_launch(e, q.s));
      DV(dv_stream_synchronize(q.s));
    }
    double t2 = bench_now();
    ti[b] = (t1 - t0) / reps * 1e6;
    tr[b] = (t2 - t1) / reps * 1e6;
  }
  double mi = bench_median(ti, batches), mr = bench_median(tr, batches);
  printf(
      "bench_graph backend=%s: %zu work items (5 launches, 5 copies/memsets of 1 KiB), %d batches "
      "x %d\n",
      backend, items, batches, reps);
  printf("%-10s %12s\n", "mode", "us/sequence");
  printf("%-10s %12.2f\n", "issue", mi);
  printf("%-10s %12.2f\n", "replay", mr);
  printf("issue/replay %.2f\n", mi / mr);
  free(ti);
  free(tr);
  DV(dv_graph_exec_destroy(e));
  DV(dv_graph_release(g));
  dv_module_release(m);
  dv_array *all[] = {q.x, q.a, q.b, q.h_in, q.h_out};
  for (int i = 0; i < 5; i++) dv_array_release(all[i]);
  dv_stream_release(q.s);
  DV(dv_context_destroy(ctx));
  return 0;
}
