/*
 * The pinned pool (issue 38 item 2): a pinned array's second allocation from
 * the pool (pinned_pool=on: the released block reused) against a direct
 * pinned allocation (pinned_pool=off: the driver's allocation and free), in
 * the same run, with malloc + free of the same size as the raw reference.
 *
 * Per size (4 KiB .. 16 MiB), three cycles, each timed alone:
 *   alloc    dv_pinned_array, then (untimed) release and flush
 *   cycle    dv_pinned_array + dv_array_release + dv_context_flush_deallocs
 *            (the free runs: the driver's free, or the block back to the pool)
 *   touched  cycle with a memset of the whole array after the allocation
 *            (a fresh mapping faults its pages in; a reused block has them)
 * Batches of `reps` calls, the three variants interleaved batch by batch,
 * medians of the batches' means in microseconds per call, and the ratios
 * direct / pool and pool / malloc.
 *
 *   bench_pinned [--backend NAME] [--batches N] [--reps N] [--quick]
 */
#define _DEFAULT_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"

static dv_context *make(const char *backend, const char *pool) {
  dv_config *cfg;
  dv_context *c = NULL;
  DV(dv_config_create(&cfg));
  DV(dv_config_set(cfg, "backend", backend));
  DV(dv_config_set(cfg, "pinned_pool", pool));
  DV(dv_config_set(cfg, "log_level", "off"));
  if (dv_context_create(cfg, &c)) c = NULL;
  dv_config_destroy(cfg);
  return c;
}

enum { ALLOC, CYCLE, TOUCHED, NMODES };
static const char *const kModes[NMODES] = {"alloc", "cycle", "touched"};

/* One batch of `reps` calls of `mode` on ctx (NULL: malloc + free), in µs per call. */
static double batch(dv_context *ctx, int mode, size_t bytes, int reps) {
  int64_t n = (int64_t)bytes;
  double timed = 0;
  for (int r = 0; r < reps; r++) {
    double t0 = bench_now();
    dv_array *a = NULL;
    void *p = NULL;
    if (ctx) {
      DV(dv_pinned_array(ctx, 1, &n, dv_dtype_get(DV_UINT8), NULL, 'C', &a));
      DV(dv_array_host_data(a, &p));
    } else if (!(p = malloc(bytes))) {
      fprintf(stderr, "malloc failed\n");
      exit(1);
    }
    double t1 = bench_now();
    if (mode == TOUCHED) memset(p, r & 0xff, bytes);
    else ((volatile char *)p)[0] = (char)r;
    __asm__ volatile("" : : "r"(p) : "memory"); /* the stores stay, before free too */
    if (ctx) {
      dv_array_release(a);
      DV(dv_context_flush_deallocs(ctx));
    } else {
      free(p);
    }
    double t2 = bench_now();
    timed += mode == ALLOC ? t1 - t0 : t2 - t0;
  }
  return timed / reps * 1e6;
}

int main(int argc, char **argv) {
  const char *backend = "host";
  int batches = 9, reps = 200;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--backend") && i + 1 < argc) backend = argv[++i];
    else if (!strcmp(argv[i], "--batches") && i + 1 < argc) batches = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--quick")) batches = 3, reps = 20;
    else {
      fprintf(stderr, "usage: %s [--backend NAME] [--batches N] [--reps N] [--quick]\n", argv[0]);
      return 2;
    }
  }
  if (batches < 1 || batches > 99 || reps < 1) return 2;
  dv_context *off = make(backend, "off"), *on = make(backend, "on");
  if (!off || !on) {
    printf("backend %s unavailable\n", backend);
    return 0;
  }
  printf("pinned pool, backend %s: medians of %d batches of %d calls, us per call\n", backend, batches, reps);
  printf("%-8s %-8s %10s %10s %10s %13s %13s\n", "size", "mode", "direct", "pool", "malloc", "direct/pool",
         "pool/malloc");
  const size_t sizes[] = {4096, 65536, 1 << 20, 16 << 20};
  for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
    size_t bytes = sizes[s];
    for (int mode = 0; mode < NMODES; mode++) {
      double d[99], p[99], m[99];
      /* warm: the pool's first allocation of the size (a miss) and the code paths */
      batch(off, mode, bytes, 2), batch(on, mode, bytes, 2), batch(NULL, mode, bytes, 2);
      for (int b = 0; b < batches; b++) {
        d[b] = batch(off, mode, bytes, reps);
        p[b] = batch(on, mode, bytes, reps);
        m[b] = batch(NULL, mode, bytes, reps);
      }
      double md = bench_median(d, batches), mp = bench_median(p, batches), mm = bench_median(m, batches);
      char label[32];
      if (bytes >= (1 << 20)) snprintf(label, sizeof label, "%zuM", bytes >> 20);
      else snprintf(label, sizeof label, "%zuK", bytes >> 10);
      printf("%-8s %-8s %10.3f %10.3f %10.3f %12.2fx %12.2fx\n", label, kModes[mode], md, mp, mm, md / mp, mp / mm);
    }
  }
  dv_pinned_stats st;
  DV(dv_pinned_pool_stats(on, &st));
  printf("pool: hits %llu, misses %llu, held %llu bytes (peak %llu)\n", (unsigned long long)st.hits,
         (unsigned long long)st.misses, (unsigned long long)st.held.current, (unsigned long long)st.held.peak);
  DV(dv_context_destroy(off));
  DV(dv_context_destroy(on));
  return 0;
}
