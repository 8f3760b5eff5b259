/*
 * Per-call overhead of the transfer paths (issue 13), host backend, public
 * API only.  Every figure is a ratio to a reference timed in the same run
 * (memcpy of the same bytes, or NumPy through /usr/bin/python3), median of
 * interleaved batches.
 *
 *   bench_overhead [--quick] [--numpy PYTHON] [--mm direct|pool] [--only SECTION]
 *       contiguous sweep (4 KiB .. 16 MiB) against memcpy, context switches
 *       over 20,000 1 MiB copies, strided copies with short inner runs,
 *       a 4096x4096 float32 transpose both ways (against NumPy's
 *       ascontiguousarray(a.T) when PYTHON has NumPy), allocating dv_to_device with the direct
 *       manager against the pool, and (issue 39) long gathers and
 *       scatters of runs of 2..256 float32 both ways and the transpose
 *       both ways.  SECTION: contiguous, strided, runs, transpose or
 *       todevice (only that one).
 *   bench_overhead --count WHAT N
 *       runs only N calls of WHAT inside a function named count_loop, for
 *       callgrind --toggle-collect=count_loop (bench/callgrind.sh):
 *       copy64 (dv_copy_to_device, 64 B contiguous, NULL stream),
 *       todev64 (dv_to_device, 64 B, pool manager, then release),
 *       todev64-direct (the same with the direct manager),
 *       memcpy64 (memcpy of 64 B, the reference),
 *       async64 (dv_copy_to_device, 64 B, on a stream, into an array
 *       allocated for that stream, pool manager), async64-direct (the same
 *       with the direct manager), async64-other (pool, the array allocated
 *       for another stream: the copy orders that stream after itself).
 */
#define _DEFAULT_SOURCE
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "bench_util.h"
#include "devarray.h"

static dv_context *make(const char *mm) {
  dv_config *cfg;
  dv_context *c = NULL;
  if (dv_config_create(&cfg)) return NULL;
  dv_config_set(cfg, "backend", "host");
  if (mm) dv_config_set(cfg, "memory_manager", mm);
  dv_config_set(cfg, "host_memory", "4G");
  dv_config_set(cfg, "host_guard", "off");
  dv_config_set(cfg, "log_level", "off");
  if (dv_context_create(cfg, &c)) c = NULL;
  dv_config_destroy(cfg);
  return c;
}

static const dv_dtype *f32(void) { return dv_dtype_get(DV_FLOAT32); }
static const dv_dtype *u8(void) { return dv_dtype_get(DV_UINT8); }

static dv_array *dev1(dv_context *c, int64_t n, const dv_dtype *dt) {
  dv_array *a = NULL;
  if (dv_device_array(c, 1, &n, dt, NULL, 'C', NULL, &a)) {
    fprintf(stderr, "bench_overhead: dv_device_array: %s\n", dv_last_error());
    exit(1);
  }
  return a;
}

static dv_array *wrap(dv_context *c, void *p, int nd, const int64_t *shape, const int64_t *st,
                      const dv_dtype *dt) {
  dv_array *a = NULL;
  if (dv_host_array_wrap(c, p, nd, shape, dt, st, &a)) {
    fprintf(stderr, "bench_overhead: dv_host_array_wrap: %s\n", dv_last_error());
    exit(1);
  }
  return a;
}

static void check(dv_status rc, const char *what) {
  if (rc) {
    fprintf(stderr, "bench_overhead: %s: %s\n", what, dv_last_error());
    exit(1);
  }
}

static volatile char sink;

/* ---- callgrind counting mode ---------------------------------------------- */

static char cnt_buf[64], cnt_dst[64];
static dv_stream *cnt_stream; /* the stream of the async64 modes */
__attribute__((noinline)) void count_loop(int what, long n, dv_context *c, dv_array *dst,
                                          dv_array *src);
__attribute__((noinline)) void count_loop(int what, long n, dv_context *c, dv_array *dst,
                                          dv_array *src) {
  for (long i = 0; i < n; i++) {
    if (what == 0) {
      check(dv_copy_to_device(dst, src, NULL), "dv_copy_to_device");
    } else if (what == 3) {
      check(dv_copy_to_device(dst, src, cnt_stream), "dv_copy_to_device");
    } else if (what == 1) {
      dv_array *o = NULL;
      check(dv_to_device(c, src, NULL, 1, NULL, &o), "dv_to_device");
      dv_array_release(o);
    } else {
      memcpy(cnt_dst, cnt_buf, sizeof cnt_buf);
      __asm__ volatile("" ::"r"(cnt_dst) : "memory");
    }
  }
}

static int count_mode(const char *what, long n) {
  int w = !strcmp(what, "copy64") ? 0
          : (!strcmp(what, "todev64") || !strcmp(what, "todev64-direct")) ? 1
          : !strcmp(what, "memcpy64") ? 2
          : !strncmp(what, "async64", 7) ? 3 : -1;
  if (w < 0 || (w == 3 && strcmp(what, "async64") && strcmp(what, "async64-direct") &&
                strcmp(what, "async64-other"))) {
    fprintf(stderr, "bench_overhead: --count copy64|todev64|todev64-direct|memcpy64|async64|"
                    "async64-direct|async64-other N\n");
    return 2;
  }
  bool direct = !strcmp(what, "todev64-direct") || !strcmp(what, "async64-direct");
  dv_context *c = make(direct ? "direct" : "pool");
  if (!c) return 1;
  int64_t n64 = 64;
  dv_array *src = wrap(c, cnt_buf, 1, &n64, NULL, u8()), *dst = dev1(c, 64, u8());
  dv_stream *other = NULL;
  if (w == 3) {
    check(dv_stream_create(c, 0, &cnt_stream), "dv_stream_create");
    check(dv_stream_create(c, 0, &other), "dv_stream_create");
    dv_array_release(dst);
    check(dv_device_array(c, 1, &n64, u8(), NULL, 'C', strcmp(what, "async64-other") ? cnt_stream : other, &dst),
          "dv_device_array");
  }
  count_loop(w, 10, c, dst, src); /* warm: first calls set things up */
  count_loop(w, n, c, dst, src);
  if (w == 3) check(dv_context_synchronize(c), "dv_context_synchronize");
  dv_array_release(src);
  dv_array_release(dst);
  dv_stream_release(cnt_stream);
  dv_stream_release(other);
  dv_context_destroy(c);
  return 0;
}

/* ---- timed sections --------------------------------------------------------- */

/* Median over nb batches of (time of f) / (time of g), batches interleaved. */
typedef void (*bench_fn)(void *arg);
static double ratio(bench_fn f, bench_fn g, void *arg, int reps, int nb, double *f_s) {
  double r[64], tf[64];
  f(arg), g(arg);
  for (int b = 0; b < nb; b++) {
    double t0 = bench_now();
    for (int i = 0; i < reps; i++) f(arg);
    double t1 = bench_now();
    for (int i = 0; i < reps; i++) g(arg);
    double t2 = bench_now();
    r[b] = (t1 - t0) / (t2 - t1);
    tf[b] = (t1 - t0) / reps;
  }
  if (f_s) *f_s = bench_median(tf, nb);
  return bench_median(r, nb);
}

typedef struct copy_arg {
  dv_array *dst, *src;
  void *mdst, *msrc;
  size_t bytes;
} copy_arg;

static void f_copy(void *p) {
  copy_arg *a = p;
  check(dv_copy_to_device(a->dst, a->src, NULL), "dv_copy_to_device");
}
static void g_memcpy(void *p) {
  copy_arg *a = p;
  memcpy(a->mdst, a->msrc, a->bytes);
  __asm__ volatile("" ::"r"(a->mdst) : "memory");
}

static long csw(void) {
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return u.ru_nvcsw + u.ru_nivcsw;
}

static void contiguous(dv_context *c, int quick) {
  printf("contiguous synchronous host->device copies (dv_copy_to_device, NULL stream) / memcpy, "
         "median of interleaved batches\n");
  printf("%10s %12s %10s\n", "bytes", "dv time", "dv/memcpy");
  size_t sizes[] = {4096, 16384, 65536, 262144, 1 << 20, 16 << 20};
  for (int k = 0; k < 6; k++) {
    size_t n = sizes[k];
    char *h = malloc(n), *m = malloc(n);
    memset(h, 1, n), memset(m, 2, n);
    int64_t n64 = (int64_t)n;
    copy_arg a = {dev1(c, n64, u8()), wrap(c, h, 1, &n64, NULL, u8()), m, h, n};
    int reps = (int)(((size_t)64 << 20) / n);
    if (reps > 20000) reps = 20000;
    if (reps < 4) reps = 4;
    if (quick) reps = reps / 4 + 1;
    double t, r = ratio(f_copy, g_memcpy, &a, reps, quick ? 5 : 15, &t);
    printf("%10zu %9.2f us %10.3f\n", n, t * 1e6, r);
    fflush(stdout);
    dv_array_release(a.dst), dv_array_release(a.src);
    free(h), free(m);
  }
  /* Context switches over 20,000 1 MiB copies against memcpy. */
  size_t n = 1 << 20;
  int64_t n64 = (int64_t)n;
  char *h = calloc(1, n), *m = calloc(1, n);
  copy_arg a = {dev1(c, n64, u8()), wrap(c, h, 1, &n64, NULL, u8()), m, h, n};
  int cnt = quick ? 2000 : 20000;
  long c0 = csw();
  for (int i = 0; i < cnt; i++) f_copy(&a);
  long c1 = csw();
  for (int i = 0; i < cnt; i++) g_memcpy(&a);
  long c2 = csw();
  printf("context switches over %d 1 MiB copies: devarray %ld, memcpy %ld\n\n", cnt, c1 - c0, c2 - c1);
  dv_array_release(a.dst), dv_array_release(a.src);
  free(h), free(m);
}

static void strided(dv_context *c, int quick) {
  printf("strided host->device copies: rows of L float32 taken from rows of 2L (a[:, :L]) into a "
         "dense device array / memcpy of the same bytes\n");
  printf("%6s %10s %12s %10s\n", "L", "bytes", "dv time", "dv/memcpy");
  size_t totals[] = {256 << 10, 16 << 20};
  for (int t = 0; t < 2; t++)
    for (int64_t L = 2; L <= 64; L *= 2) {
      size_t bytes = totals[t];
      int64_t rows = (int64_t)(bytes / (size_t)(4 * L));
      float *h = calloc((size_t)(rows * 2 * L), sizeof *h);
      /* Written, so that the source is real pages (calloc's are the shared
       * zero page until written, which reads unrealistically fast). */
      memset(h, 1, (size_t)(rows * 2 * L) * sizeof *h);
      char *m = malloc(bytes), *ms = malloc(bytes);
      memset(ms, 3, bytes);
      int64_t shape[2] = {rows, L}, st[2] = {2 * L * 4, 4};
      copy_arg a = {NULL, wrap(c, h, 2, shape, st, f32()), m, ms, bytes};
      check(dv_device_array(c, 2, shape, f32(), NULL, 'C', NULL, &a.dst), "dv_device_array");
      int reps = (int)(((size_t)64 << 20) / bytes);
      if (quick) reps = reps / 4 + 1;
      double tm, r = ratio(f_copy, g_memcpy, &a, reps, quick ? 5 : 11, &tm);
      printf("%6lld %10zu %9.2f us %10.3f\n", (long long)L, bytes, tm * 1e6, r);
      fflush(stdout);
      dv_array_release(a.dst), dv_array_release(a.src);
      free(h), free(m), free(ms);
    }
  printf("\n");
}

/* Long gathers and scatters (issue 39): a[:, :L] of float32 rows of 2L, 64
 * MiB kept, host->device (gather into a dense device array) and
 * device->host (scatter from one), time / memcpy of the kept bytes. */
static void f_copy_d2h(void *p) {
  copy_arg *a = p;
  check(dv_copy_to_host(a->src, a->dst, NULL, NULL), "dv_copy_to_host");
}

static void runs(dv_context *c, int quick) {
  printf("long strided copies: a[:, :L] of float32 rows of 2L, 64 MiB kept, against memcpy of the "
         "kept bytes, median of interleaved batches\n");
  printf("%6s %10s %12s %10s %12s %10s\n", "L", "bytes", "h2d time", "h2d/memcpy", "d2h time",
         "d2h/memcpy");
  size_t bytes = (size_t)64 << 20;
  int64_t Ls[] = {2, 4, 16, 256};
  for (int k = 0; k < 4; k++) {
    int64_t L = Ls[k], rows = (int64_t)(bytes / (size_t)(4 * L));
    float *h = malloc((size_t)(rows * 2 * L) * sizeof *h);
    char *m = malloc(bytes), *ms = malloc(bytes);
    if (!h || !m || !ms) exit(1);
    memset(h, 1, (size_t)(rows * 2 * L) * sizeof *h), memset(m, 2, bytes), memset(ms, 3, bytes);
    int64_t shape[2] = {rows, L}, st[2] = {2 * L * 4, 4};
    dv_array *hv = wrap(c, h, 2, shape, st, f32()), *dev = NULL;
    check(dv_device_array(c, 2, shape, f32(), NULL, 'C', NULL, &dev), "dv_device_array");
    copy_arg a = {dev, hv, m, ms, bytes}, b = {hv, dev, m, ms, bytes};
    int nb = quick ? 3 : 9, reps = quick ? 1 : 2;
    double th, td, rh = ratio(f_copy, g_memcpy, &a, reps, nb, &th);
    double rd = ratio(f_copy_d2h, g_memcpy, &b, reps, nb, &td);
    printf("%6lld %10zu %9.2f ms %10.3f %9.2f ms %10.3f\n", (long long)L, bytes, th * 1e3, rh, td * 1e3, rd);
    fflush(stdout);
    dv_array_release(dev), dv_array_release(hv);
    free(h), free(m), free(ms);
  }
  printf("\n");
}

/* NumPy's ascontiguousarray(a.T) on n x n float32, median seconds of reps;
 * < 0 if unavailable. */
static double numpy_transpose(const char *py, int n, int reps) {
  if (!py) return -1;
  char cmd[1024];
  snprintf(cmd, sizeof cmd,
           "%s -c \"import numpy as np,time,statistics as s\n"
           "a=np.ones((%d,%d),np.float32);t=[]\n"
           "for i in range(%d):\n t0=time.perf_counter();b=np.ascontiguousarray(a.T);t.append(time.perf_counter()-t0)\n"
           "print(s.median(t))\" 2>/dev/null",
           py, n, n, reps);
  FILE *f = popen(cmd, "r");
  if (!f) return -1;
  double v = -1;
  if (fscanf(f, "%lf", &v) != 1) v = -1;
  pclose(f);
  return v;
}

/* A 4096 x 4096 float32 transpose both ways: host a.T into a C-order device
 * array (h2d), and a C-order device array into a host a.T view (d2h), against
 * memcpy of 64 MiB and NumPy's ascontiguousarray(a.T), batches interleaved
 * (each batch: the median of reps copies of each, one NumPy run of reps). */
static void transpose(dv_context *c, const char *py, int quick) {
  int n = 4096, reps = 3, nb = quick ? 3 : 7;
  size_t bytes = (size_t)n * n * 4;
  float *h = malloc(bytes);
  char *m = malloc(bytes);
  if (!h || !m) exit(1);
  for (size_t i = 0; i < (size_t)n * n; i++) h[i] = (float)i;
  memset(m, 0, bytes);
  int64_t shape[2] = {n, n}, st[2] = {4, (int64_t)n * 4}; /* a.T of a C-order array */
  dv_array *hv = wrap(c, h, 2, shape, st, f32()), *dev = NULL;
  check(dv_device_array(c, 2, shape, f32(), NULL, 'C', NULL, &dev), "dv_device_array");
  copy_arg a = {dev, hv, m, h, bytes}, b = {hv, dev, m, h, bytes};
  double th[16], td[16], tm[16], tn[16], rh[16], rd[16];
  int have_np = 1;
  f_copy(&a), f_copy_d2h(&b);
  for (int k = 0; k < nb; k++) {
    double x[3][8];
    for (int i = 0; i < reps; i++) {
      double t0 = bench_now();
      f_copy(&a);
      double t1 = bench_now();
      f_copy_d2h(&b);
      double t2 = bench_now();
      g_memcpy(&a);
      double t3 = bench_now();
      x[0][i] = t1 - t0, x[1][i] = t2 - t1, x[2][i] = t3 - t2;
    }
    th[k] = bench_median(x[0], reps), td[k] = bench_median(x[1], reps), tm[k] = bench_median(x[2], reps);
    tn[k] = have_np ? numpy_transpose(py, n, reps) : -1;
    if (tn[k] < 0) have_np = 0;
    rh[k] = tn[k] / th[k], rd[k] = tn[k] / td[k];
    th[k] /= tm[k], td[k] /= tm[k]; /* now time / memcpy */
  }
  double mh = bench_median(th, nb), md = bench_median(td, nb), mm = bench_median(tm, nb);
  printf("transpose 4096x4096 float32, %d interleaved batches; memcpy of 64 MiB %.1f ms\n", nb, mm * 1e3);
  printf("  h2d (host a.T -> C-order device): %.2fx memcpy", mh);
  if (have_np) printf("; NumPy/devarray %.2f", bench_median(rh, nb));
  printf("\n  d2h (C-order device -> host a.T): %.2fx memcpy", md);
  if (have_np)
    printf("; NumPy/devarray %.2f\n  NumPy ascontiguousarray(a.T): %.1f ms\n\n", bench_median(rd, nb),
           bench_median(tn, nb) * 1e3);
  else
    printf("\n  NumPy: not available (%s), skipped\n\n", py ? py : "no --numpy");
  dv_array_release(dev), dv_array_release(hv);
  free(h), free(m);
}

/* Allocating dv_to_device: direct manager against the pool. */
static void to_device(int quick) {
  printf("allocating dv_to_device (then release), time / memcpy of the same bytes; direct and pool managers\n");
  printf("%-28s %10s %12s %12s\n", "source", "bytes", "direct/memcpy", "pool/memcpy");
  size_t sizes[] = {64, 4096, 1 << 20, 64 << 20};
  for (int k = 0; k < 4; k++)
    for (int s = 0; s < 2; s++) {
      size_t n = sizes[k];
      if (s == 1 && n < 4096) continue;
      dv_context *cd = make("direct"), *cp = make("pool");
      if (!cd || !cp) exit(1);
      /* s == 0: contiguous; s == 1: every other float32 of a twice-as-long buffer. */
      size_t hb = s ? 2 * n : n;
      float *h = calloc(1, hb);
      memset(h, 1, hb); /* real pages, not the zero page */
      char *m = malloc(n);
      int64_t cnt = (int64_t)(n / 4), step = 8;
      dv_array *sd = wrap(cd, h, 1, &cnt, s ? &step : NULL, f32());
      dv_array *sp = wrap(cp, h, 1, &cnt, s ? &step : NULL, f32());
      int reps = n >= (1u << 20) ? (quick ? 3 : 9) : (quick ? 2000 : 20000);
      double td[16], tp[16], tm[16];
      int nb = quick ? 5 : 11;
      for (int b = -1; b < nb; b++) {
        double t0 = bench_now();
        for (int i = 0; i < reps; i++) {
          dv_array *o;
          check(dv_to_device(cd, sd, NULL, 1, NULL, &o), "dv_to_device");
          dv_array_release(o);
        }
        double t1 = bench_now();
        for (int i = 0; i < reps; i++) {
          dv_array *o;
          check(dv_to_device(cp, sp, NULL, 1, NULL, &o), "dv_to_device");
          dv_array_release(o);
        }
        double t2 = bench_now();
        for (int i = 0; i < reps; i++) {
          memcpy(m, h, n);
          __asm__ volatile("" ::"r"(m) : "memory");
        }
        double t3 = bench_now();
        if (b >= 0) td[b] = (t1 - t0) / (t3 - t2), tp[b] = (t2 - t1) / (t3 - t2);
      }
      printf("%-28s %10zu %12.2f %12.2f\n", s ? "float32, stride 2 elements" : "contiguous", n,
             bench_median(td, nb), bench_median(tp, nb));
      fflush(stdout);
      dv_array_release(sd), dv_array_release(sp);
      dv_context_destroy(cd), dv_context_destroy(cp);
      free(h), free(m);
    }
  printf("\n");
}

int main(int argc, char **argv) {
  int quick = 0;
  const char *py = NULL, *mm = NULL, *only = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--quick")) quick = 1;
    else if (!strcmp(argv[i], "--numpy") && i + 1 < argc) py = argv[++i];
    else if (!strcmp(argv[i], "--mm") && i + 1 < argc) mm = argv[++i];
    else if (!strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
    else if (!strcmp(argv[i], "--count") && i + 2 < argc) return count_mode(argv[i + 1], atol(argv[i + 2]));
    else {
      fprintf(stderr, "usage: bench_overhead [--quick] [--numpy PYTHON] [--mm direct|pool] [--only SECTION] | --count WHAT N\n");
      return 2;
    }
  }
  dv_context *c = make(mm);
  if (!c) {
    fprintf(stderr, "bench_overhead: no host context: %s\n", dv_last_error());
    return 1;
  }
  printf("bench_overhead: host backend, memory manager %s%s\n\n", dv_context_memory_manager(c),
         quick ? ", --quick" : "");
#define RUN(name) (!only || !strcmp(only, name))
  if (RUN("contiguous")) contiguous(c, quick);
  if (RUN("strided")) strided(c, quick);
  if (RUN("runs")) runs(c, quick);
  if (RUN("transpose")) transpose(c, py, quick);
  dv_context_destroy(c);
  if (RUN("todevice")) to_device(quick);
  (void)sink;
  return 0;
}
