/*
 * The copy team (src/core/copyteam.c) against one thread's memcpy of the
 * same bytes (issue 13: the host copies of the CUDA staging path).  Every
 * figure is a ratio to memcpy timed in the same run, median of interleaved
 * batches: for each batch and each thread count, the team's copies and then
 * memcpy's, each over the same buffers.
 *
 *   bench_copyteam [--quick] [--threads N] [--rows W] [--cached] [--gap-us G]
 *       sizes 256 KiB .. 64 MiB, teams of 1 .. N threads (default 4; a team
 *       of 1 is the caller's memcpy through the team's entry), the team's
 *       threshold 0 (every copy split).  The copies go through a ring of
 *       source and destination buffers of 256 MiB or more each, so that
 *       every copy reads and writes memory that is not in the caches (as a
 *       staged piece of a large pageable copy does); --cached copies one
 *       buffer into one other, again and again.  --rows W copies rows of W
 *       bytes from rows W + 64 bytes apart (a 2-D host view) instead of
 *       one contiguous range.  --gap-us G sleeps G microseconds after each
 *       copy (only the copies are timed), as the staging path waits for a
 *       DMA between pieces: with G above the team's 200 us spin, every copy
 *       wakes sleeping workers.
 *
 * Columns: bytes, memcpy's rate, then per thread count the team's time over
 * memcpy's (below 1: the team is faster).  Where a team of N beats memcpy
 * is where the option staging_thread_min should sit.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"
#include "core/copyteam.h"

enum { MAXT = 16, MAXB = 31 };

typedef struct ring {
  char **src, **dst;
  int n, at;
  size_t width, height, spitch, bytes;
} ring;

static void copy_memcpy(ring *r) {
  char *d = r->dst[r->at], *s = r->src[r->at];
  if (r->height == 1) memcpy(d, s, r->width);
  else
    for (size_t y = 0; y < r->height; y++) memcpy(d + y * r->width, s + y * r->spitch, r->width);
  __asm__ volatile("" ::"r"(d) : "memory");
  r->at = (r->at + 1) % r->n;
}

static void copy_team(ring *r, dv_copy_team *t) {
  char *d = r->dst[r->at], *s = r->src[r->at];
  dv__copy_team_rows(t, d, r->width, s, r->spitch, r->width, r->height);
  __asm__ volatile("" ::"r"(d) : "memory");
  r->at = (r->at + 1) % r->n;
}

/* Only the copies are timed; each is followed by gap_us asleep. */
static double gapped(ring *r, dv_copy_team *t, int reps, long gap_us) {
  double sum = 0;
  struct timespec ts = {gap_us / 1000000, gap_us % 1000000 * 1000};
  for (int i = 0; i < reps; i++) {
    double t0 = bench_now();
    if (t) copy_team(r, t);
    else copy_memcpy(r);
    sum += bench_now() - t0;
    nanosleep(&ts, NULL);
  }
  return sum;
}

int main(int argc, char **argv) {
  int quick = 0, maxt = 4, cached = 0;
  size_t rows = 0;
  long gap_us = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--quick")) quick = 1;
    else if (!strcmp(argv[i], "--cached")) cached = 1;
    else if (!strcmp(argv[i], "--threads") && i + 1 < argc) maxt = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--rows") && i + 1 < argc) rows = (size_t)atol(argv[++i]);
    else if (!strcmp(argv[i], "--gap-us") && i + 1 < argc) gap_us = atol(argv[++i]);
    else {
      fprintf(stderr, "usage: bench_copyteam [--quick] [--threads N] [--rows W] [--cached] [--gap-us G]\n");
      return 2;
    }
  }
  if (maxt < 1 || maxt > MAXT) {
    fprintf(stderr, "bench_copyteam: --threads 1..%d\n", MAXT);
    return 2;
  }
  dv_copy_team *team[MAXT + 1] = {NULL};
  for (int t = 1; t <= maxt; t++)
    if (!(team[t] = dv__copy_team_create(t, 0))) {
      fprintf(stderr, "bench_copyteam: no memory for a team\n");
      return 1;
    }
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  printf("bench_copyteam: copy team / memcpy of the same bytes, median of %d interleaved batches; "
         "%ld online CPUs; %s; %s\n",
         quick ? 5 : 11, ncpu, cached ? "cached (one source, one destination)" : "uncached (a ring of buffers, >= 256 MiB a side)",
         rows ? "rows" : "one contiguous range");
  if (rows) printf("rows of %zu bytes from rows %zu bytes apart into dense rows\n", rows, rows + 64);
  if (gap_us) printf("%ld us asleep after each copy (not timed)\n", gap_us);
  printf("%10s %10s", "bytes", "memcpy");
  for (int t = 1; t <= maxt; t++) printf("  %dT/memcpy", t);
  printf("\n");
  const size_t sizes[] = {256 << 10, 512 << 10, 1 << 20, 2 << 20, 4 << 20, 8 << 20, 16 << 20, 64 << 20};
  for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
    size_t bytes = sizes[k];
    ring r = {0};
    r.width = rows ? rows : bytes;
    r.height = rows ? bytes / rows : 1;
    r.spitch = rows ? rows + 64 : bytes;
    r.bytes = r.width * r.height;
    size_t sspan = (r.height - 1) * r.spitch + r.width;
    size_t ring_bytes = cached ? 0 : (size_t)256 << 20;
    r.n = cached ? 1 : (int)((ring_bytes + bytes - 1) / bytes);
    if (r.n < 1) r.n = 1;
    r.src = calloc((size_t)r.n, sizeof *r.src);
    r.dst = calloc((size_t)r.n, sizeof *r.dst);
    if (!r.src || !r.dst) return 1;
    for (int i = 0; i < r.n; i++) {
      r.src[i] = malloc(sspan), r.dst[i] = malloc(r.bytes);
      if (!r.src[i] || !r.dst[i]) {
        fprintf(stderr, "bench_copyteam: out of memory\n");
        return 1;
      }
      /* Every page written now, so that none faults in while timed (not
       * 0 for the destination: the compiler makes malloc + memset 0 a
       * calloc, which leaves fresh pages untouched). */
      memset(r.src[i], (int)(i + 1), sspan);
      memset(r.dst[i], 0xa5, r.bytes);
    }
    /* About 40 ms of memcpy per measurement at 10 GB/s, whole laps of the ring. */
    int reps = (int)(((size_t)384 << 20) / bytes);
    if (reps < r.n) reps = r.n;
    if (reps % r.n) reps += r.n - reps % r.n;
    if (gap_us) reps = bytes <= ((size_t)4 << 20) ? 50 : 8; /* the ring goes on: every copy cold */
    if (quick) reps = reps / 4 > 0 ? reps / 4 : 1;
    int nb = quick ? 5 : 11;
    double ratio[MAXT + 1][MAXB], tm[MAXB * MAXT];
    int ntm = 0;
    for (int t = 1; t <= maxt; t++) copy_team(&r, team[t]); /* starts the workers */
    for (int b = 0; b < nb; b++)
      for (int t = 1; t <= maxt; t++) {
        double dt, dm;
        if (gap_us) {
          dt = gapped(&r, team[t], reps, gap_us);
          dm = gapped(&r, NULL, reps, gap_us);
        } else {
          r.at = 0;
          double t0 = bench_now();
          for (int i = 0; i < reps; i++) copy_team(&r, team[t]);
          double t1 = bench_now();
          r.at = 0;
          for (int i = 0; i < reps; i++) copy_memcpy(&r);
          double t2 = bench_now();
          dt = t1 - t0, dm = t2 - t1;
        }
        ratio[t][b] = dt / dm;
        tm[ntm++] = dm / reps;
      }
    double m = bench_median(tm, ntm);
    printf("%10zu %6.1f GB/s", r.bytes, (double)r.bytes / m * 1e-9);
    for (int t = 1; t <= maxt; t++) printf(" %10.3f", bench_median(ratio[t], nb));
    printf("\n");
    fflush(stdout);
    for (int i = 0; i < r.n; i++) free(r.src[i]), free(r.dst[i]);
    free(r.src), free(r.dst);
  }
  for (int t = 1; t <= maxt; t++) {
    dv_copy_team_info in;
    dv__copy_team_info(team[t], &in);
    if (in.started != t - 1) printf("note: the team of %d started %d worker(s)\n", t, in.started);
    dv__copy_team_destroy(team[t]);
  }
  return 0;
}
