/*
 * The host simulator at CPU speed (issue 23, item 4): four kernels on the
 * host simulator in fast and/or checked mode (option host_mode), each against
 * a plain C baseline measured in the same run, batches interleaved (baseline,
 * fast, checked, ...) so that drift on a busy machine hits every side alike:
 *  1. saxpy over 16M float32 (no barriers, one thread per element) against a
 *     plain C loop.  Goal (fast): >= 0.8 x the loop's speed.
 *  2. naive matmul, n = 512 (one thread per output) against plain C i-k-j.
 *     Goal: >= 0.9 x.
 *  3. Numba's tiled matmul, n = 512 (16 x 16 tiles in shared memory, two
 *     dv_syncthreads per tile) against plain C i-k-j and against the SAME
 *     devarray kernel on PoCL (a second context, backend=opencl), and raw
 *     OpenCL (the same kernel in OpenCL C, the same queue) where the OpenCL
 *     headers were found at build time.  Goal: >= 0.5 x C and >= PoCL.
 *  4. block reduction over 4M float32 (256 threads a block, shared memory,
 *     the classic tree: 8 barriers a block, one partial sum per block; the
 *     partials copied back and summed on the host, inside the timing)
 *     against a plain C sum loop.  Goal: <= 3 x the loop's time.
 * The baselines are compiled at -O2 (bench/CMakeLists.txt), and their results
 * are checked against the kernels' (max error printed).  A kernel's time is
 * its launch plus a synchronize, after one warm-up launch (module built, the
 * cache filled); medians of R batches.  ratio = baseline time / devarray time
 * (speed relative to the baseline; above 1: devarray is faster).
 *   bench_sim [--mode fast|checked|both] [--reps R] [--n N] [--saxpy N]
 *             [--reduce N] [--no-opencl]
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "devarray.h"

#ifdef DV_BENCH_HAVE_OPENCL
#define CL_TARGET_OPENCL_VERSION 120
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#include <CL/cl.h>
#endif

#define RB 256 /* threads a block in the reduction */

/* The kernels: bench/kernels/bench.dvk (saxpy, naive, tiled, block_sum, empty). */
static char *k_src;

static int reps = 7;

/* ---- the plain C baselines (-O2; their results are used, so they stay) ---- */

static void c_saxpy(float a, const float *x, float *y, size_t n) {
  for (size_t i = 0; i < n; i++) y[i] = a * x[i] + y[i];
}

static void c_matmul_ikj(const float *A, const float *B, float *C, int n) {
  for (int i = 0; i < n; i++) {
    float *c = C + (size_t)i * n;
    for (int j = 0; j < n; j++) c[j] = 0.0f;
    for (int k = 0; k < n; k++) {
      float a = A[(size_t)i * n + k];
      const float *b = B + (size_t)k * n;
      for (int j = 0; j < n; j++) c[j] += a * b[j];
    }
  }
}

static float c_sum(const float *x, size_t n) {
  float s = 0.0f;
  for (size_t i = 0; i < n; i++) s += x[i];
  return s;
}

static double max_err(const float *a, const float *b, size_t n) {
  double e = 0;
  for (size_t i = 0; i < n; i++) e = fmax(e, fabs((double)a[i] - (double)b[i]));
  return e;
}

/* ---- one devarray context: its kernels and the arrays of the rows ---- */

typedef struct {
  const char *label; /* "fast", "checked", "PoCL" */
  dv_context *ctx;
  dv_stream *s;
  dv_program *p;
  dv_module *m;
  dv_kernel *saxpy, *naive, *tiled, *block_sum;
  double t[64]; /* this row's batches, seconds */
  double med;   /* this row's median, seconds */
  double err;
} side;

/* A context on `backend` (host_mode = mode when not NULL) with the module
 * built; returns 0 (and prints why) where the backend is absent. */
static int side_open(side *sd, const char *label, const char *backend, const char *mode) {
  memset(sd, 0, sizeof *sd);
  sd->label = label;
  dv_config *cfg;
  DV(dv_config_create(&cfg));
  DV(dv_config_set(cfg, "backend", backend));
  if (mode) DV(dv_config_set(cfg, "host_mode", mode));
  dv_status rc = dv_context_create(cfg, &sd->ctx);
  dv_config_destroy(cfg);
  if (rc) {
    printf("%s: context on %s: %s: %s\n", label, backend, dv_status_name(rc), dv_last_error());
    sd->ctx = NULL;
    return 0;
  }
  DV(dv_stream_create(sd->ctx, 0, &sd->s));
  DV(dv_program_create(sd->ctx, "bench.dvk", k_src, &sd->p));
  double t0 = bench_now();
  DV(dv_program_build(sd->p, 0, &sd->m));
  double tb = bench_now() - t0;
  DV(dv_module_kernel(sd->m, "saxpy", &sd->saxpy));
  DV(dv_module_kernel(sd->m, "naive", &sd->naive));
  DV(dv_module_kernel(sd->m, "tiled", &sd->tiled));
  DV(dv_module_kernel(sd->m, "block_sum", &sd->block_sum));
  dv_device_info di;
  DV(dv_context_device_info(sd->ctx, &di));
  char hm[32] = "", cf[256] = "", guard[16] = "", kc[16] = "";
  if (!strcmp(backend, "host")) {
    DV(dv_context_option(sd->ctx, "host_mode", hm, sizeof hm, NULL));
    DV(dv_context_option(sd->ctx, "host_cflags", cf, sizeof cf, NULL));
    DV(dv_context_option(sd->ctx, "host_guard", guard, sizeof guard, NULL));
    DV(dv_context_option(sd->ctx, "kernel_check", kc, sizeof kc, NULL));
  }
  printf("%-8s %s (%s): ", label, backend, di.name);
  if (!strcmp(backend, "host"))
    printf("host_mode %s, host_cflags \"%s\"%s, host_guard %s, kernel_check %s; ", hm, cf,
           cf[0] ? "" : " (the mode's default)", guard, kc);
  printf("module %s in %.0f ms\n", dv_module_from_cache(sd->m) ? "from the cache" : "compiled",
         tb * 1e3);
  return 1;
}

static void side_close(side *sd) {
  if (!sd->ctx) return;
  dv_stream_release(sd->s);
  dv_module_release(sd->m);
  dv_program_destroy(sd->p);
  DV(dv_context_flush_deallocs(sd->ctx));
  DV(dv_context_destroy(sd->ctx));
  sd->ctx = NULL;
}

/* A 1-d or 2-d float32 device array holding `data` (NULL: uninitialised). */
static dv_array *dev_f32(side *sd, const float *data, int ndim, const int64_t *shape) {
  const dv_dtype *f32 = dv_dtype_get(DV_FLOAT32);
  dv_array *d;
  if (!data) {
    DV(dv_device_array(sd->ctx, ndim, shape, f32, NULL, 'C', NULL, &d));
    return d;
  }
  dv_array *h;
  DV(dv_host_array_wrap(sd->ctx, (void *)data, ndim, shape, f32, NULL, &h));
  DV(dv_to_device(sd->ctx, h, NULL, 1, NULL, &d));
  dv_array_release(h);
  return d;
}

/* Copy the device array d (float32, this shape) into out. */
static void to_host_f32(side *sd, dv_array *d, float *out, int ndim, const int64_t *shape) {
  dv_array *h;
  DV(dv_host_array_wrap(sd->ctx, out, ndim, shape, dv_dtype_get(DV_FLOAT32), NULL, &h));
  DV(dv_copy_to_host(d, h, NULL, NULL));
  dv_array_release(h);
}

/* One timed launch plus a synchronize, seconds. */
static double timed_launch(side *sd, dv_kernel *k, const dv_launch_config *lc, int nargs,
                           const dv_arg *args) {
  double t0 = bench_now();
  DV(dv_kernel_launch(k, lc, nargs, args));
  DV(dv_stream_synchronize(sd->s));
  return bench_now() - t0;
}

/* ---- printing ---- */

/* "16M" for 16 x 2^20 elements, else the count (one static buffer). */
static const char *size_text(size_t n) {
  static char b[32];
  if (n % (1u << 20) == 0)
    snprintf(b, sizeof b, "%zuM", n >> 20);
  else
    snprintf(b, sizeof b, "%zu", n);
  return b;
}

static int nhost;        /* host sides in this run (1 or 2) */
static side *hosts[2];   /* fast first when both */
static side *fast_side;  /* NULL unless fast mode runs */
static int goals_missed, goals_checked; /* printed at the end */

/* One row per host side: devarray ms, baseline ms, ratio, the goal (fast
 * mode; goal_ratio is the least baseline/devarray ratio that meets it), and
 * the checked/fast cost ratio when both modes run. */
static void print_rows(const char *what, const char *base_name, double base_med, double goal_ratio,
                       const char *goal_text) {
  for (int h = 0; h < nhost; h++) {
    side *sd = hosts[h];
    double ratio = base_med / sd->med;
    char err[32];
    snprintf(err, sizeof err, "%.2g", sd->err);
    printf("%-22s %-7s devarray %9.2f ms   %-10s %9.2f ms   ratio %6.3f   max err ", what,
           sd->label, sd->med * 1e3, base_name, base_med * 1e3, ratio);
    printf(sd == fast_side || fast_side ? "%-7s" : "%s", err);
    if (sd == fast_side) {
      int met = ratio >= goal_ratio;
      goals_missed += !met, goals_checked++;
      printf("   goal %s: %s", goal_text, met ? "met" : "MISSED");
      if (goal_ratio < 1.0) printf(" (%.1fx C's time)", sd->med / base_med);
    } else if (fast_side) {
      printf("   checked/fast cost %.2f x", sd->med / fast_side->med);
    }
    printf("\n");
  }
}

/* ---- the rows ---- */

static void row_saxpy(size_t n) {
  float *x = malloc(n * 4), *y0 = malloc(n * 4), *yc = malloc(n * 4), *yd = malloc(n * 4);
  if (!x || !y0 || !yc || !yd) {
    fprintf(stderr, "out of memory\n");
    exit(1);
  }
  /* Small multiples of 1/4 and a = 2: every y stays exact through 1 + reps
   * applications, so any error is the kernel's, not rounding (or FMA). */
  for (size_t i = 0; i < n; i++) x[i] = (float)(i % 7) * 0.25f, y0[i] = (float)(i % 5);
  memcpy(yc, y0, n * 4);
  const float a = 2.0f;
  int64_t shape[1] = {(int64_t)n};
  dv_array *dx[2], *dy[2];
  uint32_t grid = (uint32_t)((n + 255) / 256);
  for (int h = 0; h < nhost; h++) {
    dx[h] = dev_f32(hosts[h], x, 1, shape);
    dy[h] = dev_f32(hosts[h], y0, 1, shape);
    dv_launch_config lc = {{grid, 1, 1}, {256, 1, 1}, 0, hosts[h]->s};
    dv_arg args[] = {DV_ARG_F32(a), DV_ARG_ARRAY(dx[h]), DV_ARG_ARRAY(dy[h]), DV_ARG_I64((int64_t)n)};
    timed_launch(hosts[h], hosts[h]->saxpy, &lc, 4, args); /* warm-up */
  }
  c_saxpy(a, x, yc, n); /* warm-up, and the same 1 + reps applications */
  double base[64];
  for (int r = 0; r < reps; r++) {
    double t0 = bench_now();
    c_saxpy(a, x, yc, n);
    base[r] = bench_now() - t0;
    for (int h = 0; h < nhost; h++) {
      dv_launch_config lc = {{grid, 1, 1}, {256, 1, 1}, 0, hosts[h]->s};
      dv_arg args[] = {DV_ARG_F32(a), DV_ARG_ARRAY(dx[h]), DV_ARG_ARRAY(dy[h]),
                       DV_ARG_I64((int64_t)n)};
      hosts[h]->t[r] = timed_launch(hosts[h], hosts[h]->saxpy, &lc, 4, args);
    }
  }
  for (int h = 0; h < nhost; h++) {
    to_host_f32(hosts[h], dy[h], yd, 1, shape);
    hosts[h]->err = max_err(yd, yc, n);
    hosts[h]->med = bench_median(hosts[h]->t, reps);
    dv_array_release(dx[h]), dv_array_release(dy[h]);
  }
  char what[64];
  snprintf(what, sizeof what, "saxpy %s", size_text(n));
  print_rows(what, "C loop", bench_median(base, reps), 0.8, ">= 0.8x C");
  free(x), free(y0), free(yc), free(yd);
}

#ifdef DV_BENCH_HAVE_OPENCL
static const char *cl_tiled_src =
    "#define TPB 16\n"
    "__kernel void tiled(__global const float *A, __global const float *B, __global float *C,\n"
    "                    int n) {\n"
    "  __local float sA[TPB][TPB], sB[TPB][TPB];\n"
    "  int tx = get_local_id(0), ty = get_local_id(1);\n"
    "  int x = get_group_id(0) * TPB + tx, y = get_group_id(1) * TPB + ty;\n"
    "  float acc = 0.0f;\n"
    "  for (int t = 0; t < (n + TPB - 1) / TPB; t++) {\n"
    "    sA[ty][tx] = (y < n && t * TPB + tx < n) ? A[y * n + t * TPB + tx] : 0.0f;\n"
    "    sB[ty][tx] = (x < n && t * TPB + ty < n) ? B[(t * TPB + ty) * n + x] : 0.0f;\n"
    "    barrier(CLK_LOCAL_MEM_FENCE);\n"
    "    for (int j = 0; j < TPB; j++) acc += sA[ty][j] * sB[j][tx];\n"
    "    barrier(CLK_LOCAL_MEM_FENCE);\n"
    "  }\n"
    "  if (y < n && x < n) C[y * n + x] = acc;\n"
    "}\n";

/* The raw OpenCL side of the tiled row: the same kernel in OpenCL C on the
 * PoCL context's device and queue, its own buffers. */
typedef struct {
  int ok;
  cl_command_queue q;
  cl_program prog;
  cl_kernel k;
  cl_mem a, b, c;
  size_t global[2], local[2];
  double t[64];
} raw_cl;

static void raw_cl_open(raw_cl *rc, side *ocl, const float *A, const float *B, int n) {
  memset(rc, 0, sizeof *rc);
  void *cctx, *cdev, *cq;
  DV(dv_context_native(ocl->ctx, &cctx, &cdev));
  DV(dv_stream_native(ocl->s, &cq));
  cl_int e;
  cl_device_id dev = (cl_device_id)cdev;
  rc->q = (cl_command_queue)cq;
  rc->prog = clCreateProgramWithSource((cl_context)cctx, 1, &cl_tiled_src, NULL, &e);
  if (e || clBuildProgram(rc->prog, 1, &dev, "", NULL, NULL)) {
    printf("raw OpenCL: build failed\n");
    return;
  }
  rc->k = clCreateKernel(rc->prog, "tiled", &e);
  size_t bytes = (size_t)n * (size_t)n * 4;
  cl_int e1, e2, e3;
  rc->a = clCreateBuffer((cl_context)cctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, bytes,
                         (void *)A, &e1);
  rc->b = clCreateBuffer((cl_context)cctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, bytes,
                         (void *)B, &e2);
  rc->c = clCreateBuffer((cl_context)cctx, CL_MEM_WRITE_ONLY, bytes, NULL, &e3);
  if (e || e1 || e2 || e3) {
    printf("raw OpenCL: kernel or buffers failed\n");
    return;
  }
  e = clSetKernelArg(rc->k, 0, sizeof(cl_mem), &rc->a);
  e |= clSetKernelArg(rc->k, 1, sizeof(cl_mem), &rc->b);
  e |= clSetKernelArg(rc->k, 2, sizeof(cl_mem), &rc->c);
  e |= clSetKernelArg(rc->k, 3, sizeof(int), &n);
  size_t g = (size_t)((n + 15) / 16) * 16;
  rc->global[0] = rc->global[1] = g;
  rc->local[0] = rc->local[1] = 16;
  if (e || clEnqueueNDRangeKernel(rc->q, rc->k, 2, NULL, rc->global, rc->local, 0, NULL, NULL) ||
      clFinish(rc->q)) {
    printf("raw OpenCL: arguments or warm-up launch failed\n");
    return;
  }
  rc->ok = 1;
}

static double raw_cl_time(raw_cl *rc) {
  double t0 = bench_now();
  clEnqueueNDRangeKernel(rc->q, rc->k, 2, NULL, rc->global, rc->local, 0, NULL, NULL);
  clFinish(rc->q);
  return bench_now() - t0;
}

static double raw_cl_err(raw_cl *rc, float *out, const float *ref, int n) {
  size_t nn = (size_t)n * (size_t)n;
  if (clEnqueueReadBuffer(rc->q, rc->c, CL_TRUE, 0, nn * 4, out, 0, NULL, NULL)) return NAN;
  return max_err(out, ref, nn);
}

static void raw_cl_close(raw_cl *rc) {
  if (rc->a) clReleaseMemObject(rc->a);
  if (rc->b) clReleaseMemObject(rc->b);
  if (rc->c) clReleaseMemObject(rc->c);
  if (rc->k) clReleaseKernel(rc->k);
  if (rc->prog) clReleaseProgram(rc->prog);
}
#endif

/* Rows 2 and 3: naive (host sides against C) and tiled (also against the
 * PoCL side and raw OpenCL where present). */
static void row_matmul(int n, int tiled, side *ocl) {
  size_t nn = (size_t)n * (size_t)n;
  float *A = malloc(nn * 4), *B = malloc(nn * 4), *R = malloc(nn * 4), *C = malloc(nn * 4);
  if (!A || !B || !R || !C) {
    fprintf(stderr, "out of memory\n");
    exit(1);
  }
  /* Multiples of 1/8 below 2^11: every sum is exact in float, in any order. */
  for (size_t i = 0; i < nn; i++) A[i] = (float)(i % 7) * 0.25f, B[i] = (float)(i % 5) * 0.5f;
  int64_t shape[2] = {n, n};
  side *sides[3];
  int ns = 0;
  for (int h = 0; h < nhost; h++) sides[ns++] = hosts[h];
  if (tiled && ocl && ocl->ctx) sides[ns++] = ocl;
  dv_array *dA[3], *dB[3], *dC[3];
  uint32_t g = (uint32_t)((n + 15) / 16);
  for (int v = 0; v < ns; v++) {
    dA[v] = dev_f32(sides[v], A, 2, shape);
    dB[v] = dev_f32(sides[v], B, 2, shape);
    dC[v] = dev_f32(sides[v], NULL, 2, shape);
    dv_launch_config lc = {{g, g, 1}, {16, 16, 1}, 0, sides[v]->s};
    dv_arg args[] = {DV_ARG_ARRAY(dA[v]), DV_ARG_ARRAY(dB[v]), DV_ARG_ARRAY(dC[v]), DV_ARG_I32(n)};
    timed_launch(sides[v], tiled ? sides[v]->tiled : sides[v]->naive, &lc, 4, args); /* warm-up */
  }
#ifdef DV_BENCH_HAVE_OPENCL
  raw_cl rc = {0};
  if (tiled && ocl && ocl->ctx) raw_cl_open(&rc, ocl, A, B, n);
#endif
  c_matmul_ikj(A, B, R, n); /* warm-up */
  double base[64];
  for (int r = 0; r < reps; r++) {
    double t0 = bench_now();
    c_matmul_ikj(A, B, R, n);
    base[r] = bench_now() - t0;
    for (int v = 0; v < ns; v++) {
      dv_launch_config lc = {{g, g, 1}, {16, 16, 1}, 0, sides[v]->s};
      dv_arg args[] = {DV_ARG_ARRAY(dA[v]), DV_ARG_ARRAY(dB[v]), DV_ARG_ARRAY(dC[v]),
                       DV_ARG_I32(n)};
      sides[v]->t[r] = timed_launch(sides[v], tiled ? sides[v]->tiled : sides[v]->naive, &lc, 4, args);
    }
#ifdef DV_BENCH_HAVE_OPENCL
    if (rc.ok) rc.t[r] = raw_cl_time(&rc);
#endif
  }
  for (int v = 0; v < ns; v++) {
    to_host_f32(sides[v], dC[v], C, 2, shape);
    sides[v]->err = max_err(C, R, nn);
    sides[v]->med = bench_median(sides[v]->t, reps);
    dv_array_release(dA[v]), dv_array_release(dB[v]), dv_array_release(dC[v]);
  }
  double tb = bench_median(base, reps);
  char what[64];
  snprintf(what, sizeof what, "%s matmul n=%d", tiled ? "tiled" : "naive", n);
  print_rows(what, "C i-k-j", tb, tiled ? 0.5 : 0.9, tiled ? ">= 0.5x C" : ">= 0.9x C");
  if (!tiled) goto done;
  if (!ocl || !ocl->ctx) {
    printf("%-22s PoCL    skipped: %s\n", what, ocl ? "no OpenCL" : "--no-opencl");
    goto done;
  }
  printf("%-22s PoCL    devarray %9.2f ms   %-10s %9.2f ms   ratio %6.3f   max err %-7.2g"
         "   (the same devarray kernel, backend=opencl)\n",
         what, ocl->med * 1e3, "C i-k-j", tb * 1e3, tb / ocl->med, ocl->err);
  double traw = NAN;
#ifdef DV_BENCH_HAVE_OPENCL
  if (rc.ok) {
    traw = bench_median(rc.t, reps);
    printf("%-22s raw CL  OpenCL C %9.2f ms   %-10s %9.2f ms   ratio %6.3f   max err %-7.2g"
           "   (clEnqueueNDRangeKernel + clFinish, same queue)\n",
           what, traw * 1e3, "C i-k-j", tb * 1e3, tb / traw, raw_cl_err(&rc, C, R, n));
  }
  raw_cl_close(&rc);
#else
  printf("%-22s raw CL  skipped: built without the OpenCL headers\n", what);
#endif
  for (int h = 0; h < nhost; h++) {
    side *sd = hosts[h];
    double ratio = ocl->med / sd->med;
    printf("%-22s %-7s against PoCL: devarray host %9.2f ms   PoCL %9.2f ms   ratio %6.3f", what,
           sd->label, sd->med * 1e3, ocl->med * 1e3, ratio);
    if (!isnan(traw)) printf("   (raw CL ratio %.3f)", traw / sd->med);
    if (sd == fast_side) {
      goals_missed += ratio < 1.0, goals_checked++;
      printf("   goal >= PoCL: %s", ratio >= 1.0 ? "met" : "MISSED");
    }
    printf("\n");
  }
done:
  free(A), free(B), free(R), free(C);
}

static void row_reduce(size_t n) {
  float *x = malloc(n * 4);
  size_t nb = (n + RB - 1) / RB;
  float *part = malloc(nb * 4);
  if (!x || !part) {
    fprintf(stderr, "out of memory\n");
    exit(1);
  }
  /* Multiples of 1/4 whose total stays below 2^22: exact in float, any order. */
  for (size_t i = 0; i < n; i++) x[i] = (float)(i % 7) * 0.25f;
  int64_t shape[1] = {(int64_t)n}, pshape[1] = {(int64_t)nb};
  dv_array *dx[2], *dp[2], *hp[2];
  float got[2] = {0, 0};
  for (int h = 0; h < nhost; h++) {
    dx[h] = dev_f32(hosts[h], x, 1, shape);
    dp[h] = dev_f32(hosts[h], NULL, 1, pshape);
    DV(dv_host_array_wrap(hosts[h]->ctx, part, 1, pshape, dv_dtype_get(DV_FLOAT32), NULL, &hp[h]));
  }
  volatile float sink = c_sum(x, n); /* warm-up */
  double base[64];
  for (int r = -1; r < reps; r++) { /* r = -1: the devarray warm-up */
    if (r >= 0) {
      double t0 = bench_now();
      sink = c_sum(x, n);
      base[r] = bench_now() - t0;
    }
    for (int h = 0; h < nhost; h++) {
      side *sd = hosts[h];
      dv_launch_config lc = {{(uint32_t)nb, 1, 1}, {RB, 1, 1}, 0, sd->s};
      dv_arg args[] = {DV_ARG_ARRAY(dx[h]), DV_ARG_ARRAY(dp[h]), DV_ARG_I64((int64_t)n)};
      double t0 = bench_now();
      DV(dv_kernel_launch(sd->block_sum, &lc, 3, args));
      DV(dv_copy_to_host(dp[h], hp[h], sd->s, NULL));
      DV(dv_stream_synchronize(sd->s));
      float s = 0.0f;
      for (size_t b = 0; b < nb; b++) s += part[b];
      double t = bench_now() - t0;
      if (r >= 0) sd->t[r] = t;
      got[h] = s;
    }
  }
  float ref = sink;
  for (int h = 0; h < nhost; h++) {
    hosts[h]->err = fabs((double)got[h] - (double)ref);
    hosts[h]->med = bench_median(hosts[h]->t, reps);
    dv_array_release(dx[h]), dv_array_release(dp[h]), dv_array_release(hp[h]);
  }
  char what[64];
  snprintf(what, sizeof what, "reduce %s", size_text(n));
  print_rows(what, "C sum", bench_median(base, reps), 1.0 / 3.0, "<= 3x C time");
  free(x), free(part);
}

int main(int argc, char **argv) {
  k_src = bench_kernel_source("bench.dvk");
  const char *mode = "both";
  int n = 512, use_opencl = 1;
  long long nsaxpy = 16ll << 20, nreduce = 4ll << 20;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--mode") && i + 1 < argc)
      mode = argv[++i];
    else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
      reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--n") && i + 1 < argc)
      n = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--saxpy") && i + 1 < argc)
      nsaxpy = atoll(argv[++i]);
    else if (!strcmp(argv[i], "--reduce") && i + 1 < argc)
      nreduce = atoll(argv[++i]);
    else if (!strcmp(argv[i], "--no-opencl"))
      use_opencl = 0;
    else {
      fprintf(stderr,
              "usage: %s [--mode fast|checked|both] [--reps R] [--n N] [--saxpy N] [--reduce N] "
              "[--no-opencl]\n", argv[0]);
      return 2;
    }
  }
  if (strcmp(mode, "fast") && strcmp(mode, "checked") && strcmp(mode, "both")) {
    fprintf(stderr, "--mode: fast, checked or both, not \"%s\"\n", mode);
    return 2;
  }
  if (reps < 1 || reps > 64) reps = 7;
  if (n < 16 || n > 8192 || nsaxpy < 256 || nreduce < RB || nsaxpy > (1ll << 31) ||
      nreduce > (1ll << 31)) {
    fprintf(stderr, "sizes: 16 <= n <= 8192, 256 <= saxpy, 256 <= reduce <= 2^31\n");
    return 2;
  }
  printf("bench_sim: host simulator, mode %s; matmul n = %d, saxpy %lld, reduce %lld; medians of %d;"
         " baselines: %s, -O2\n", mode, n, nsaxpy, nreduce, reps,
#ifdef __clang__
         "clang " __clang_version__
#else
         "gcc " __VERSION__
#endif
  );
  side fast, checked, ocl;
  memset(&ocl, 0, sizeof ocl);
  if (strcmp(mode, "checked")) {
    if (!side_open(&fast, "fast", "host", "fast")) return 1;
    hosts[nhost++] = &fast;
    fast_side = &fast;
  }
  if (strcmp(mode, "fast")) {
    if (!side_open(&checked, "checked", "host", "checked")) return 1;
    hosts[nhost++] = &checked;
  }
  if (use_opencl && !side_open(&ocl, "PoCL", "opencl", NULL)) printf("PoCL: skipped: no OpenCL\n");
  printf("ratio = baseline time / devarray time (speed relative to the baseline); goals are for "
         "fast mode\n");

  row_saxpy((size_t)nsaxpy);
  row_matmul(n, 0, NULL);
  row_matmul(n, 1, use_opencl ? &ocl : NULL);
  row_reduce((size_t)nreduce);
  if (fast_side) printf("goals missed (fast mode): %d of %d\n", goals_missed, goals_checked);

  side_close(&ocl);
  if (strcmp(mode, "fast")) side_close(&checked);
  if (fast_side) side_close(&fast);
  return 0;
}
