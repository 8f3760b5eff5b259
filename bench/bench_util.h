/* Timing helpers shared by the benchmark programs. */
#ifndef DV_BENCH_UTIL_H
#define DV_BENCH_UTIL_H
#include <stdlib.h>
#include <time.h>

static inline double bench_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static inline int bench_cmpd(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The median of v[0..n) (sorts v). */
static inline double bench_median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, bench_cmpd);
  return v[n / 2];
}
#endif
