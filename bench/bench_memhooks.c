/*
 * What memory hooks, scopes and tracking cost (issue 38 item 3), host
 * backend, pool manager: dv_to_device of 64 B and its release, the
 * allocation-bound per-call path, with nothing installed, with one empty
 * hook, with a scope open, and with tracking on.  Each figure is the
 * median over interleaved batches of its time / the time with nothing
 * installed in the same run.
 *
 *   bench_memhooks [--quick]
 *   bench_memhooks --count none|hook|scope|track N
 *       N calls inside count_loop, for callgrind --toggle-collect=count_loop
 *       (the instruction counts in docs/benchmarks.md).
 */
#define _DEFAULT_SOURCE
#include <stdbool.h>
#include <string.h>

#include "bench_util.h"

static dv_context *make(void) {
  dv_config *cfg;
  dv_context *c = NULL;
  DV(dv_config_create(&cfg));
  DV(dv_config_set(cfg, "backend", "host"));
  DV(dv_config_set(cfg, "memory_manager", "pool"));
  DV(dv_context_create(cfg, &c));
  dv_config_destroy(cfg);
  return c;
}

static void empty_hook(dv_context *ctx, const dv_memory_event *e, void *user) {
  (void)ctx;
  (void)e;
  ++*(long *)user;
}

static unsigned char buf[64];

static __attribute__((noinline)) void count_loop(dv_context *c, dv_array *src, long n) {
  for (long i = 0; i < n; i++) {
    dv_array *o = NULL;
    DV(dv_to_device(c, src, NULL, 1, NULL, &o));
    dv_array_release(o);
  }
}

enum { NONE, HOOK, SCOPE, TRACK, MODES };
static const char *const names[MODES] = {"nothing installed", "one empty hook", "a scope open", "tracking on"};
static long calls;
static int hook_id;

static void install(dv_context *c, int mode, bool on) {
  if (mode == HOOK && on) DV(dv_memory_hook_add(c, empty_hook, &calls, &hook_id));
  if (mode == HOOK && !on) DV(dv_memory_hook_remove(c, hook_id));
  if (mode == SCOPE && on) DV(dv_memory_scope_push(c));
  if (mode == SCOPE && !on) DV(dv_memory_scope_pop(c, NULL));
  if (mode == TRACK) DV(dv_tracking_enable(on));
}

int main(int argc, char **argv) {
  bool quick = argc > 1 && !strcmp(argv[1], "--quick");
  int64_t n64 = 64;
  if (argc == 4 && !strcmp(argv[1], "--count")) {
    int mode = -1;
    for (int m = 0; m < MODES; m++)
      if (!strcmp(argv[2], (const char *[]){"none", "hook", "scope", "track"}[m])) mode = m;
    if (mode < 0) {
      fprintf(stderr, "bench_memhooks: --count none|hook|scope|track N\n");
      return 2;
    }
    if (mode == TRACK) DV(dv_tracking_enable(1)); /* before the context: it is tracked too */
    dv_context *c = make();
    dv_array *src;
    DV(dv_host_array_wrap(c, buf, 1, &n64, dv_dtype_get(DV_UINT8), NULL, &src));
    if (mode != TRACK) install(c, mode, true);
    count_loop(c, src, 10);
    count_loop(c, src, atol(argv[3]));
    if (mode != TRACK) install(c, mode, false);
    dv_array_release(src);
    DV(dv_context_destroy(c));
    return 0;
  }
  dv_context *c = make();
  dv_array *src;
  DV(dv_host_array_wrap(c, buf, 1, &n64, dv_dtype_get(DV_UINT8), NULL, &src));
  int nb = quick ? 5 : 21, reps = quick ? 2000 : 20000;
  double t[MODES][64];
  count_loop(c, src, 1000);
  for (int b = 0; b < nb; b++)
    for (int m = 0; m < MODES; m++) {
      install(c, m, true);
      double t0 = bench_now();
      count_loop(c, src, reps);
      t[m][b] = (bench_now() - t0) / reps;
      install(c, m, false);
    }
  printf("dv_to_device 64 B + release, host backend, pool manager: median of %d interleaved batches of %d calls\n",
         nb, reps);
  printf("%-20s %12s %10s\n", "", "ns/call", "/ nothing");
  double r[64];
  for (int m = 0; m < MODES; m++) {
    for (int b = 0; b < nb; b++) r[b] = t[m][b] / t[NONE][b];
    double tm[64];
    memcpy(tm, t[m], sizeof tm);
    printf("%-20s %12.1f %10.3f\n", names[m], bench_median(tm, nb) * 1e9, bench_median(r, nb));
  }
  printf("(the hook was called %ld times)\n", calls);
  dv_array_release(src);
  DV(dv_context_destroy(c));
  return 0;
}
