/*
 * Allocation benchmarks (issue 5).
 *
 * 1. A port of RMM's random_allocations: 2*N steps; each step allocates with
 *    probability 73% while fewer than N allocations are live and usage is
 *    under 16000 MiB, otherwise frees a random live allocation; a failed
 *    allocation becomes a free.  Sizes are uniform in [1, max] MiB.  Grid
 *    N in {1k, 10k, 100k} x max in {1, 4, 64} MiB, for the pool and the
 *    direct manager, on every backend found.  Reports ms per run and the
 *    ratio direct/pool.
 * 2. The pool's fast path: one allocate + free pair of 1 KiB on one stream,
 *    through the manager table, in ns (median of batches).  Under callgrind,
 *    `--fastpath-only N` runs just N pairs inside fastpath_loop, so that
 *    --toggle-collect=fastpath_loop counts the pairs' instructions alone.
 *
 *   bench_alloc [--quick] [--backend NAME] [--fastpath-only N]
 */
#define _DEFAULT_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"
#include "backends/backend.h"
#include "core/core.h"


static dv_context *make(const char *backend, const char *mm) {
  dv_config *cfg;
  dv_context *c = NULL;
  dv_config_create(&cfg);
  dv_config_set(cfg, "backend", backend);
  dv_config_set(cfg, "memory_manager", mm);
  dv_config_set(cfg, "host_memory", "20G"); /* simulator: address space, not touched */
  dv_config_set(cfg, "host_guard", "off");
  dv_config_set(cfg, "log_level", "off");
  if (dv_context_create(cfg, &c)) c = NULL;
  dv_config_destroy(cfg);
  return c;
}

static unsigned long long rs = 88172645463325252ull;
static unsigned long long rnd(void) {
  rs ^= rs << 13, rs ^= rs >> 7, rs ^= rs << 17;
  return rs;
}

/* RMM's random_allocations through the context's manager; seconds. */
static double random_allocations(dv_context *c, int n, size_t max_mib, int *fails) {
  dv_block *live = calloc((size_t)n, sizeof *live);
  size_t *sizes = calloc((size_t)n, sizeof *sizes);
  int nlive = 0;
  size_t usage = 0, cap = (size_t)16000 << 20;
  *fails = 0;
  rs = 0x1234567ull + (unsigned long long)n * 31 + max_mib;
  double t0 = bench_now();
  for (int step = 0; step < 2 * n; step++) {
    bool do_alloc = nlive < n && usage < cap && rnd() % 100 < 73;
    if (do_alloc) {
      size_t sz = (size_t)(1 + rnd() % (max_mib << 20));
      if (c->mm.alloc(c->mm_state, sz, NULL, &live[nlive]) == DV_OK) {
        sizes[nlive++] = sz;
        usage += sz;
        continue;
      }
      (*fails)++;
    }
    if (nlive) {
      int k = (int)(rnd() % (unsigned)nlive);
      c->mm.free(c->mm_state, live[k], sizes[k], NULL);
      usage -= sizes[k];
      live[k] = live[--nlive];
      sizes[k] = sizes[nlive];
    }
  }
  for (int i = 0; i < nlive; i++) c->mm.free(c->mm_state, live[i], sizes[i], NULL);
  c->be->stream_sync(c->bst, NULL);
  double t = bench_now() - t0;
  free(live), free(sizes);
  return t;
}

__attribute__((noinline)) void fastpath_loop(dv_context *c, long n);
__attribute__((noinline)) void fastpath_loop(dv_context *c, long n) {
  dv_block b;
  for (long i = 0; i < n; i++) {
    c->mm.alloc(c->mm_state, 1024, NULL, &b);
    c->mm.free(c->mm_state, b, 1024, NULL);
  }
}

int main(int argc, char **argv) {
  int quick = 0;
  long fast_only = 0;
  const char *only = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--quick")) quick = 1;
    else if (!strcmp(argv[i], "--backend") && i + 1 < argc) only = argv[++i];
    else if (!strcmp(argv[i], "--fastpath-only") && i + 1 < argc) fast_only = atol(argv[++i]);
  }
  if (fast_only) {
    dv_context *c = make(only ? only : "host", "pool");
    if (!c) return 1;
    fastpath_loop(c, 1); /* warm: the first pair makes the slab */
    fastpath_loop(c, fast_only);
    dv_context_destroy(c);
    return 0;
  }
  const char *backends[] = {"host", "opencl", "cuda"};
  for (int bi = 0; bi < 3; bi++) {
    if (only && strcmp(only, backends[bi])) continue;
    dv_context *probe = make(backends[bi], "pool");
    if (!probe) {
      printf("backend %s: not available here, skipped\n\n", backends[bi]);
      continue;
    }
    dv_device_info di;
    dv_context_device_info(probe, &di);
    /* fast path */
    enum { BATCH = 100000, NB = 15 };
    double t[NB];
    fastpath_loop(probe, 10);
    for (int k = 0; k < NB; k++) {
      double t0 = bench_now();
      fastpath_loop(probe, BATCH);
      t[k] = (bench_now() - t0) / BATCH;
    }
    qsort(t, NB, sizeof *t, bench_cmpd);
    printf("backend %s (%s): pool fast path, 1 KiB allocate+free pair: %.1f ns (median of %d x %d)\n", backends[bi],
           di.name, t[NB / 2] * 1e9, NB, BATCH);
    dv_context_destroy(probe);
    /* random_allocations */
    printf("%-8s %8s %8s %12s %12s %10s %s\n", "backend", "N", "max MiB", "direct ms", "pool ms", "direct/pool", "failed allocs d/p");
    int ns[3] = {1000, 10000, 100000}, maxes[3] = {1, 4, 64};
    for (int a = 0; a < (quick ? 2 : 3); a++)
      for (int m = 0; m < 3; m++) {
        dv_context *cd = make(backends[bi], "direct"), *cp = make(backends[bi], "pool");
        int fd = 0, fp = 0;
        double td = random_allocations(cd, ns[a], (size_t)maxes[m], &fd);
        double tp = random_allocations(cp, ns[a], (size_t)maxes[m], &fp);
        printf("%-8s %8d %8d %12.2f %12.2f %10.1f %d/%d\n", backends[bi], ns[a], maxes[m], td * 1e3, tp * 1e3, td / tp, fd, fp);
        fflush(stdout);
        dv_context_destroy(cd);
        dv_context_destroy(cp);
      }
    printf("\n");
  }
  return 0;
}
