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
 * 3. Issue 23, `--modes`: the host simulator's dv_device_array and
 *    dv_to_device of 1 MiB (direct manager, the default) in host_mode=fast
 *    and host_mode=checked, against malloc+free of 1 MiB and a memcpy of
 *    1 MiB into a fresh buffer (malloc, memcpy, free) timed in the same
 *    process, interleaved; medians of batches in microseconds per call, the
 *    ratios to the baseline, and checked mode's cost over fast; then fast
 *    mode again with max_pending_deallocs_count=0 (no deferred frees).
 *
 *    Under callgrind, `--modes-count ROW N` runs N calls of one row
 *    (malloc, backend, device_array, to_device) in fast mode inside
 *    modes_count_loop, for --toggle-collect=modes_count_loop.
 *
 *   bench_alloc [--quick] [--backend NAME] [--fastpath-only N] [--modes [--size BYTES]]
 *               [--modes-count ROW N [--size BYTES]]
 */
#define _DEFAULT_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"
#include "backends/backend.h"
#include "core/core.h"
#include "memory/memory.h"


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
      if (c->memory->mm.alloc(c->memory->mm_state, sz, NULL, &live[nlive]) == DV_OK) {
        sizes[nlive++] = sz;
        usage += sz;
        continue;
      }
      (*fails)++;
    }
    if (nlive) {
      int k = (int)(rnd() % (unsigned)nlive);
      c->memory->mm.free(c->memory->mm_state, live[k], sizes[k], NULL);
      usage -= sizes[k];
      live[k] = live[--nlive];
      sizes[k] = sizes[nlive];
    }
  }
  for (int i = 0; i < nlive; i++) c->memory->mm.free(c->memory->mm_state, live[i], sizes[i], NULL);
  c->be->stream_sync(c->bst, NULL);
  double t = bench_now() - t0;
  free(live), free(sizes);
  return t;
}

__attribute__((noinline)) void fastpath_loop(dv_context *c, long n);
__attribute__((noinline)) void fastpath_loop(dv_context *c, long n) {
  dv_block b;
  for (long i = 0; i < n; i++) {
    c->memory->mm.alloc(c->memory->mm_state, 1024, NULL, &b);
    c->memory->mm.free(c->memory->mm_state, b, 1024, NULL);
  }
}

/* ---- 3. issue 23: allocation and transfer in fast and checked mode ---- */

static dv_context *make_mode(const char *mode, const char *pending) {
  dv_config *cfg;
  dv_context *c = NULL;
  dv_config_create(&cfg);
  dv_config_set(cfg, "backend", "host");
  dv_config_set(cfg, "host_mode", mode);
  if (pending) dv_config_set(cfg, "max_pending_deallocs_count", pending);
  dv_config_set(cfg, "log_level", "off");
  if (dv_context_create(cfg, &c)) c = NULL;
  dv_config_destroy(cfg);
  return c;
}

static volatile unsigned char g_sink;

typedef struct {
  dv_context *c;
  size_t n;
  const unsigned char *src;
  dv_array *host; /* src wrapped */
} mode_arg;

static void base_malloc(mode_arg *a, int reps) {
  for (int i = 0; i < reps; i++) {
    unsigned char *p = malloc(a->n);
    if (!p) exit(1);
    g_sink = p[a->n / 2]; /* one read, as a device_array's first use would not count */
    free(p);
  }
}

static void base_memcpy(mode_arg *a, int reps) {
  for (int i = 0; i < reps; i++) {
    unsigned char *p = malloc(a->n);
    if (!p) exit(1);
    memcpy(p, a->src, a->n);
    g_sink = p[a->n - 1];
    free(p);
  }
}

static void dv_alloc_loop(mode_arg *a, int reps) {
  int64_t n = (int64_t)a->n;
  for (int i = 0; i < reps; i++) {
    dv_array *d = NULL;
    DV(dv_device_array(a->c, 1, &n, dv_dtype_get(DV_UINT8), NULL, 'C', NULL, &d));
    dv_array_release(d);
  }
}

static void dv_todev_loop(mode_arg *a, int reps) {
  for (int i = 0; i < reps; i++) {
    dv_array *d = NULL;
    DV(dv_to_device(a->c, a->host, NULL, 1, NULL, &d));
    dv_array_release(d);
  }
}

static void dv_backend_loop(mode_arg *a, int reps) {
  for (int i = 0; i < reps; i++) {
    dv_block blk;
    DV(dv_backend_alloc(a->c, a->n, &blk));
    DV(dv_backend_free(a->c, blk));
  }
}

/* One mode by itself (a program runs in one mode): its rows interleaved with
 * the two baselines, batch by batch; medians into med[5]. */
static int mode_pass(const char *mode, const char *pending, size_t n, const unsigned char *src,
                     int quick, double *med) {
  dv_context *c = make_mode(mode, pending);
  if (!c) {
    fprintf(stderr, "bench_alloc: no host context (%s)\n", dv_last_error());
    return 1;
  }
  int64_t len = (int64_t)n;
  mode_arg arg = {c, n, src, NULL}, base = {NULL, n, src, NULL};
  DV(dv_host_array_wrap(c, (void *)src, 1, &len, dv_dtype_get(DV_UINT8), NULL, &arg.host));
  enum { NROW = 5 };
  struct {
    void (*fn)(mode_arg *, int);
    mode_arg *a;
  } rows[NROW] = {{base_malloc, &base}, {base_memcpy, &base}, {dv_backend_loop, &arg},
                  {dv_alloc_loop, &arg}, {dv_todev_loop, &arg}};
  int nb = quick ? 15 : 61, batch = n > ((size_t)4 << 20) ? 5 : 20;
  double *t = calloc((size_t)NROW * (size_t)nb, sizeof *t);
  if (!t) return 1;
  for (int r = 0; r < NROW; r++) rows[r].fn(rows[r].a, batch); /* warm */
  for (int k = 0; k < nb; k++)
    for (int r = 0; r < NROW; r++) {
      double t0 = bench_now();
      rows[r].fn(rows[r].a, batch);
      t[r * nb + k] = (bench_now() - t0) / batch * 1e6;
    }
  for (int r = 0; r < NROW; r++) med[r] = bench_median(&t[r * nb], nb);
  printf("host_mode=%s%s%s, %zu bytes, direct manager: us per call (median of %d batches of %d)\n",
         mode, pending ? ", max_pending_deallocs_count=" : "", pending ? pending : "", n, nb, batch);
  static const char *names[NROW] = {"malloc+free", "malloc+memcpy+free", "dv_backend_alloc+free",
                                    "device_array+release", "to_device+release"};
  static const int basis[NROW] = {0, 1, 0, 0, 1};
  printf("  %-24s %10s %14s\n", "row", "us", "x baseline");
  for (int r = 0; r < NROW; r++)
    printf("  %-24s %10.2f %10.2fx %s\n", names[r], med[r], med[r] / med[basis[r]],
           r < 2 ? "(baseline)" : basis[r] ? "(of malloc+memcpy+free)" : "(of malloc+free)");
  dv_array_release(arg.host);
  dv_context_destroy(c);
  free(t);
  return 0;
}

__attribute__((noinline)) void modes_count_loop(void (*fn)(mode_arg *, int), mode_arg *a, int n);
__attribute__((noinline)) void modes_count_loop(void (*fn)(mode_arg *, int), mode_arg *a, int n) { fn(a, n); }

/* --modes-count: N calls of one row in fast mode, for callgrind. */
static int modes_count(const char *row, long n, size_t bytes) {
  static const struct {
    const char *name;
    void (*fn)(mode_arg *, int);
  } rows[] = {{"malloc", base_malloc}, {"memcpy", base_memcpy}, {"backend", dv_backend_loop},
              {"device_array", dv_alloc_loop}, {"to_device", dv_todev_loop}};
  void (*fn)(mode_arg *, int) = NULL;
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
    if (!strcmp(row, rows[i].name)) fn = rows[i].fn;
  unsigned char *src = malloc(bytes);
  dv_context *c = make_mode("fast", NULL);
  if (!fn || !src || !c) {
    fprintf(stderr, "bench_alloc: --modes-count needs malloc, memcpy, backend, device_array or to_device\n");
    return 1;
  }
  memset(src, 7, bytes);
  int64_t len = (int64_t)bytes;
  mode_arg arg = {c, bytes, src, NULL};
  DV(dv_host_array_wrap(c, src, 1, &len, dv_dtype_get(DV_UINT8), NULL, &arg.host));
  modes_count_loop(fn, &arg, 100); /* warm */
  modes_count_loop(fn, &arg, (int)n);
  dv_array_release(arg.host);
  dv_context_destroy(c);
  free(src);
  return 0;
}

static int modes_main(size_t n, int quick) {
  unsigned char *src = malloc(n);
  if (!src) return 1;
  memset(src, 7, n);
  double f[5], k[5], z[5];
  if (mode_pass("fast", NULL, n, src, quick, f) || mode_pass("checked", NULL, n, src, quick, k))
    return 1;
  /* The direct manager keeps up to 10 frees pending (Numba's deferred
   * deallocation), so a to_device loop writes into ~11 blocks in turn, more
   * than the L2 cache holds, where malloc hands back the one hot buffer:
   * the same loop without the queue shows that part of the gap. */
  if (mode_pass("fast", "0", n, src, quick, z)) return 1;
  printf("checked over fast (each against its own pass): dv_backend_alloc+free %.0fx, "
         "device_array %.0fx, to_device %.1fx\n", k[2] / f[2], k[3] / f[3], k[4] / f[4]);
  printf("goals (fast): device_array <= 2x malloc+free: %.2fx, %s; to_device <= 1.5x "
         "malloc+memcpy+free: %.2fx, %s\n", f[3] / f[0], f[3] <= 2 * f[0] ? "met" : "not met",
         f[4] / f[1], f[4] <= 1.5 * f[1] ? "met" : "not met");
  printf("fast, no pending-deallocation queue: device_array %.2fx, to_device %.2fx\n", z[3] / z[0],
         z[4] / z[1]);
  free(src);
  return 0;
}

int main(int argc, char **argv) {
  int quick = 0, modes = 0;
  size_t size = (size_t)1 << 20;
  long fast_only = 0;
  const char *only = NULL, *count_row = NULL;
  long count_n = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--quick")) quick = 1;
    else if (!strcmp(argv[i], "--backend") && i + 1 < argc) only = argv[++i];
    else if (!strcmp(argv[i], "--fastpath-only") && i + 1 < argc) fast_only = atol(argv[++i]);
    else if (!strcmp(argv[i], "--modes")) modes = 1;
    else if (!strcmp(argv[i], "--size") && i + 1 < argc) size = (size_t)atoll(argv[++i]);
    else if (!strcmp(argv[i], "--modes-count") && i + 2 < argc) count_row = argv[++i], count_n = atol(argv[++i]);
  }
  if (count_row) return modes_count(count_row, count_n, size);
  if (modes) return modes_main(size, quick);
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
