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

#ifndef DV_BENCH_KERNELS_DIR
#define DV_BENCH_KERNELS_DIR "bench/kernels"
#endif

/* The whole file `name` of bench/kernels (malloc'd, NUL-terminated); the benchmark stops
 * with a message when it cannot be read. */
static inline char *bench_kernel_source(const char *name) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", DV_BENCH_KERNELS_DIR, name);
  FILE *f = fopen(path, "rb");
  char *s = NULL;
  long n = -1;
  if (f && fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
      (s = malloc((size_t)n + 1)) != NULL && fread(s, 1, (size_t)n, f) == (size_t)n) {
    s[n] = 0;
    fclose(f);
    return s;
  }
  fprintf(stderr, "cannot read %s\n", path);
  exit(1);
}

/* The median of v[0..n) (sorts v). */
static inline double bench_median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, bench_cmpd);
  return v[n / 2];
}
#endif
