/*
 * The host simulator's data-race engine (issue 24, src/backends/host/
 * host_race.c) on its own: accesses per second and ns per access for the
 * access patterns of a block reduction and a tiled matmul in shared memory,
 * and of a streaming kernel and a naive matmul in global memory, driven
 * through tools/check.h as the checked simulator's dispatcher drives it (no
 * kernel, no fibers: the engine's own cost).  Also the shadow's size: per
 * byte touched, and for a big region touched at a few bytes.
 *
 *   bench_race [repeats]     (default 3; each figure is the median)
 *
 * Times are the thread's CPU time (CLOCK_THREAD_CPUTIME_ID), so a machine
 * shared with other work slows them less than wall time would.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <string.h>

#include "backends/host/tools/check.h"
#include "bench_util.h"
#include "dialect/dialect.h"

static double cpu_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static long g_races; /* races found: none expected (the patterns are correct) */

static void acc_shared(hk_race *r, int t, size_t off, size_t n, bool write) {
  hk_acc a = {
      .block = 0, .thread = t, .pc = (const void *)(uintptr_t)(0x100 + write), .write = write};
  hk_race_hit h;
  g_races += hk_race_shared(r, off, n, &a, &h);
}

static void acc_global(hk_race *r, size_t g, int t, size_t off, size_t n, bool write) {
  hk_acc a = {.block = 0, .thread = t, .pc = (const void *)(uintptr_t)(0x200 + g), .write = write};
  hk_race_hit h;
  g_races += hk_race_global(r, g, off, n, &a, &h);
}

static hk_race *make(size_t nregions, const size_t *bytes, size_t shared, int bt) {
  hk_race *r = hk_race_new(nregions, bytes, shared, bt, 32);
  if (!r) {
    fprintf(stderr, "hk_race_new: no memory\n");
    exit(1);
  }
  return r;
}

/* A block reduction of 256 floats per block: s[t] = x; then w = 128 .. 1:
 * barrier, s[t] += s[t + w] for t < w. */
static long reduce_shared(int blocks) {
  hk_race *r = make(0, NULL, 256 * 4, 256);
  long n = 0;
  for (int b = 0; b < blocks; b++) {
    hk_race_block(r, (uint64_t)b);
    for (int t = 0; t < 256; t++, n++) acc_shared(r, t, (size_t)t * 4, 4, true);
    for (int w = 128; w; w /= 2) {
      hk_race_barrier(r, DV_FENCE_LOCAL);
      for (int t = 0; t < w; t++, n += 3) {
        acc_shared(r, t, (size_t)t * 4, 4, false);
        acc_shared(r, t, (size_t)(t + w) * 4, 4, false);
        acc_shared(r, t, (size_t)t * 4, 4, true);
      }
    }
  }
  hk_race_free(r);
  return n;
}

/* A 16 x 16 tile matmul's shared traffic: per tile each thread stores one
 * element of As and Bs, barrier, reads a row of As and a column of Bs,
 * barrier. */
static long tile_shared(int blocks, int tiles) {
  hk_race *r = make(0, NULL, 2 * 256 * 4, 256);
  long n = 0;
  for (int b = 0; b < blocks; b++) {
    hk_race_block(r, (uint64_t)b);
    for (int k = 0; k < tiles; k++) {
      for (int t = 0; t < 256; t++, n += 2) {
        acc_shared(r, t, (size_t)t * 4, 4, true);
        acc_shared(r, t, 1024 + (size_t)t * 4, 4, true);
      }
      hk_race_barrier(r, DV_FENCE_LOCAL | DV_FENCE_GLOBAL);
      for (int t = 0; t < 256; t++) {
        int ty = t / 16, tx = t % 16;
        for (int j = 0; j < 16; j++, n += 2) {
          acc_shared(r, t, (size_t)(ty * 16 + j) * 4, 4, false);
          acc_shared(r, t, 1024 + (size_t)(j * 16 + tx) * 4, 4, false);
        }
      }
      hk_race_barrier(r, DV_FENCE_LOCAL | DV_FENCE_GLOBAL);
    }
  }
  hk_race_free(r);
  return n;
}

/* c[i] = a[i] + b[i] over `elems` floats, blocks of 256 threads: every
 * access touches fresh shadow (chunks allocated on the way). */
static long stream_global(size_t elems, size_t *shadow) {
  size_t bytes[] = {elems * 4, elems * 4, elems * 4};
  hk_race *r = make(3, bytes, 0, 256);
  size_t before = hk_race_shadow_bytes(r);
  long n = 0;
  for (size_t b = 0; b < elems / 256; b++) {
    hk_race_block(r, b);
    for (int t = 0; t < 256; t++, n += 3) {
      size_t i = b * 256 + (size_t)t;
      acc_global(r, 0, t, i * 4, 4, false);
      acc_global(r, 1, t, i * 4, 4, false);
      acc_global(r, 2, t, i * 4, 4, true);
    }
  }
  *shadow = hk_race_shadow_bytes(r) - before;
  hk_race_free(r);
  return n;
}

/* C = A * B, n x n floats, 16 x 16 blocks: each thread reads a row of A and
 * a column of B (read by many threads of many blocks) and writes C. */
static long matmul_global(int nn) {
  size_t sz = (size_t)nn * (size_t)nn * 4;
  size_t bytes[] = {sz, sz, sz};
  hk_race *r = make(3, bytes, 0, 256);
  long n = 0;
  int g = nn / 16;
  for (int by = 0; by < g; by++)
    for (int bx = 0; bx < g; bx++) {
      hk_race_block(r, (uint64_t)(by * g + bx));
      for (int t = 0; t < 256; t++) {
        int y = by * 16 + t / 16, x = bx * 16 + t % 16;
        for (int k = 0; k < nn; k++, n += 2) {
          acc_global(r, 0, t, ((size_t)y * (size_t)nn + (size_t)k) * 4, 4, false);
          acc_global(r, 1, t, ((size_t)k * (size_t)nn + (size_t)x) * 4, 4, false);
        }
        acc_global(r, 2, t, ((size_t)y * (size_t)nn + (size_t)x) * 4, 4, true);
        n++;
      }
    }
  hk_race_free(r);
  return n;
}

static void report(const char *name, const double *secs, int reps, long accesses) {
  double v[16];
  memcpy(v, secs, (size_t)reps * sizeof *v);
  double s = bench_median(v, reps);
  printf("%-34s %11ld accesses %8.3f s CPU %7.1f M/s %7.1f ns/access\n", name, accesses, s,
         (double)accesses / s * 1e-6, s / (double)accesses * 1e9);
}

int main(int argc, char **argv) {
  int reps = argc > 1 ? atoi(argv[1]) : 3;
  if (reps < 1 || reps > 16) reps = 3;
  double t[16];
  long n = 0;
  size_t shadow = 0;
  printf("bench_race: the race engine alone (src/backends/host/host_race.c), median of %d\n", reps);

  for (int i = 0; i < reps; i++) {
    double t0 = cpu_now();
    n = reduce_shared(4096);
    t[i] = cpu_now() - t0;
  }
  report("shared: block reduction", t, reps, n);
  for (int i = 0; i < reps; i++) {
    double t0 = cpu_now();
    n = tile_shared(64, 16);
    t[i] = cpu_now() - t0;
  }
  report("shared: 16x16 matmul tiles", t, reps, n);
  size_t elems = (size_t)1 << 18;
  for (int i = 0; i < reps; i++) {
    double t0 = cpu_now();
    n = stream_global(elems, &shadow);
    t[i] = cpu_now() - t0;
  }
  report("global: c = a + b (first touch)", t, reps, n);
  for (int i = 0; i < reps; i++) {
    double t0 = cpu_now();
    n = matmul_global(128);
    t[i] = cpu_now() - t0;
  }
  report("global: naive matmul 128", t, reps, n);
  printf("shadow per byte touched (c = a + b, 3 x %zu KiB): %.2f bytes\n", elems * 4 / 1024,
         (double)shadow / (double)(3 * elems * 4));

  /* a big region touched at 16 bytes far apart */
  size_t big = (size_t)1 << 32;
  hk_race *r = make(1, &big, 0, 256);
  size_t before = hk_race_shadow_bytes(r);
  hk_race_block(r, 0);
  for (int k = 0; k < 16; k++) acc_global(r, 0, k, (big / 16) * (size_t)k + 12345, 1, true);
  printf("a 4 GiB region: %zu KiB at creation, %zu KiB more after 16 one-byte writes far apart\n",
         before / 1024, (hk_race_shadow_bytes(r) - before) / 1024);
  hk_race_free(r);
  if (g_races) {
    fprintf(stderr, "bench_race: %ld races reported on race-free patterns\n", g_races);
    return 1;
  }
  return 0;
}
