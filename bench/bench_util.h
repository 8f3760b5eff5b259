/* Helpers shared by the benchmark programs: timing, medians, and DV() for
 * devarray calls that must succeed. */
#ifndef DV_BENCH_UTIL_H
#define DV_BENCH_UTIL_H
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "devarray.h"

/* A devarray call that must succeed: on failure, print the call, its status
 * and detail, and end the benchmark with exit status 1. */
#define DV(call)                                                                   \
  do {                                                                             \
    dv_status s_ = (call);                                                         \
    if (s_) {                                                                      \
      fprintf(stderr, "%s: %s: %s\n", #call, dv_status_name(s_), dv_last_error()); \
      exit(1);                                                                     \
    }                                                                              \
  } while (0)

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
