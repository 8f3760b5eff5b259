/*
 * Kernel benchmarks, one backend per run:
 *  1. launch overhead of an empty kernel: devarray's dv_kernel_launch against
 *     the raw driver call on the same device and queue in the same run
 *     (OpenCL: clSetKernelArg + clEnqueueNDRangeKernel; CUDA: cuLaunchKernel),
 *     queued back to back (throughput) and one at a time with a wait
 *     (latency).  Goal: devarray / raw <= 1.1.
 *  2. matrix multiply GFLOP/s, tiled (shared memory, barriers) and naive;
 *     on the host simulator also against a plain C triple loop compiled with
 *     this program's flags (-O2).  Goal (host): tiled or naive >= 0.5 x.
 *  3. module build time: compiled (cache off) against loaded from the cache.
 *   bench_kernels [--backend host|opencl|cuda] [--n N] [--reps R]
 * Medians of R batches; ratios printed.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_util.h"
#include "devarray.h"

#ifdef DV_BENCH_HAVE_OPENCL
#define CL_TARGET_OPENCL_VERSION 120
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#include <CL/cl.h>
#endif
#ifdef DV_BENCH_HAVE_CUDA
#include <cuda.h> /* types only: libcuda is loaded at run time, as the library does */
#include <dlfcn.h>
#endif

/* The kernels: bench/kernels/bench.dvk (saxpy, naive, tiled, block_sum, empty). */
static char *k_src;

static int reps = 7;

/* Per-launch microseconds of one batch: `count` launches queued back to back
 * on s then a wait, or (sync_each) each synchronous (the NULL stream). */
static double dv_launch_us_once(dv_kernel *k, dv_stream *s, int count, int sync_each) {
  dv_arg a[] = {DV_ARG_I32(0)};
  dv_launch_config c = {{1, 1, 1}, {1, 1, 1}, 0, sync_each ? NULL : s};
  double t0 = bench_now();
  for (int i = 0; i < count; i++) DV(dv_kernel_launch(k, &c, 1, a));
  if (!sync_each) DV(dv_stream_synchronize(s));
  return (bench_now() - t0) / count * 1e6;
}

/* The median over reps batches. */
static double dv_launch_us(dv_kernel *k, dv_stream *s, int count, int sync_each) {
  double t[64];
  for (int r = 0; r < reps; r++) t[r] = dv_launch_us_once(k, s, count, sync_each);
  return bench_median(t, reps);
}

#ifdef DV_BENCH_HAVE_OPENCL
static void raw_opencl(dv_context *ctx, dv_stream *s, dv_kernel *k) {
  void *cctx, *cdev, *cq;
  DV(dv_context_native(ctx, &cctx, &cdev));
  DV(dv_stream_native(s, &cq));
  cl_int e;
  const char *src = "__kernel void empty(int x) { (void)x; }";
  cl_program p = clCreateProgramWithSource((cl_context)cctx, 1, &src, NULL, &e);
  cl_device_id dev = (cl_device_id)cdev;
  if (e || clBuildProgram(p, 1, &dev, "", NULL, NULL)) {
    printf("raw OpenCL build failed\n");
    return;
  }
  cl_kernel rk = clCreateKernel(p, "empty", &e);
  cl_command_queue q = (cl_command_queue)cq;
  size_t one = 1;
  const int N = 2000;
  double async_raw[64], sync_raw[64], async_dv[64], sync_dv[64];
  /* Batches interleaved (raw, devarray, raw, ...) so drift on a noisy
   * machine hits both sides alike. */
  for (int r = 0; r < reps; r++) {
    double t0 = bench_now();
    for (int i = 0; i < N; i++) {
      int x = 0;
      clSetKernelArg(rk, 0, sizeof x, &x);
      clEnqueueNDRangeKernel(q, rk, 1, NULL, &one, &one, 0, NULL, NULL);
    }
    clFinish(q);
    async_raw[r] = (bench_now() - t0) / N * 1e6;
    async_dv[r] = dv_launch_us_once(k, s, N, 0);
    t0 = bench_now();
    for (int i = 0; i < N / 10; i++) {
      int x = 0;
      cl_event ev;
      clSetKernelArg(rk, 0, sizeof x, &x);
      clEnqueueNDRangeKernel(q, rk, 1, NULL, &one, &one, 0, NULL, &ev);
      clWaitForEvents(1, &ev);
      clReleaseEvent(ev);
    }
    sync_raw[r] = (bench_now() - t0) / (N / 10) * 1e6;
    sync_dv[r] = dv_launch_us_once(k, s, N / 10, 1);
  }
  double ra = bench_median(async_raw, reps), rs = bench_median(sync_raw, reps);
  double da = bench_median(async_dv, reps), ds = bench_median(sync_dv, reps);
  printf("launch, queued:      devarray %8.2f us   raw clEnqueueNDRangeKernel %8.2f us   ratio %.2f\n",
         da, ra, da / ra);
  printf("launch + wait:       devarray %8.2f us   raw enqueue + wait          %8.2f us   ratio %.2f\n",
         ds, rs, ds / rs);
  clReleaseKernel(rk);
  clReleaseProgram(p);
}
#endif

#ifdef DV_BENCH_HAVE_CUDA
/* An empty kernel in PTX, loaded with the driver alone. */
static const char *empty_ptx =
    ".version 7.0\n.target sm_50\n.address_size 64\n"
    ".visible .entry empty(.param .u32 x)\n{\n  ret;\n}\n";

static void raw_cuda(dv_context *ctx, dv_stream *s, dv_kernel *k) {
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    printf("raw CUDA: %s\n", dlerror());
    return;
  }
  CUresult (*cuCtxSetCurrent)(CUcontext) = (CUresult(*)(CUcontext))dlsym(lib, "cuCtxSetCurrent");
  CUresult (*cuModuleLoadData)(CUmodule *, const void *) =
      (CUresult(*)(CUmodule *, const void *))dlsym(lib, "cuModuleLoadData");
  CUresult (*cuModuleGetFunction)(CUfunction *, CUmodule, const char *) =
      (CUresult(*)(CUfunction *, CUmodule, const char *))dlsym(lib, "cuModuleGetFunction");
  CUresult (*cuModuleUnload)(CUmodule) = (CUresult(*)(CUmodule))dlsym(lib, "cuModuleUnload");
  CUresult (*cuStreamSynchronize)(CUstream) = (CUresult(*)(CUstream))dlsym(lib, "cuStreamSynchronize");
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, CUstream, void **, void **) =
      (CUresult(*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                   CUstream, void **, void **))dlsym(lib, "cuLaunchKernel");
  if (!cuCtxSetCurrent || !cuModuleLoadData || !cuModuleGetFunction || !cuModuleUnload ||
      !cuStreamSynchronize || !cuLaunchKernel) {
    printf("raw CUDA: missing entry points\n");
    return;
  }
  void *cctx, *cdev, *cs;
  DV(dv_context_native(ctx, &cctx, &cdev));
  DV(dv_stream_native(s, &cs));
  cuCtxSetCurrent((CUcontext)cctx);
  CUmodule mod;
  CUfunction f;
  if (cuModuleLoadData(&mod, empty_ptx) || cuModuleGetFunction(&f, mod, "empty")) {
    printf("raw CUDA module failed\n");
    return;
  }
  CUstream st = (CUstream)cs;
  const int N = 20000;
  double async_raw[64], sync_raw[64], async_dv[64], sync_dv[64];
  for (int r = 0; r < reps; r++) {
    int x = 0;
    void *params[] = {&x};
    double t0 = bench_now();
    for (int i = 0; i < N; i++) cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, st, params, NULL);
    cuStreamSynchronize(st);
    async_raw[r] = (bench_now() - t0) / N * 1e6;
    async_dv[r] = dv_launch_us_once(k, s, N, 0);
    t0 = bench_now();
    for (int i = 0; i < N / 10; i++) {
      cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, st, params, NULL);
      cuStreamSynchronize(st);
    }
    sync_raw[r] = (bench_now() - t0) / (N / 10) * 1e6;
    sync_dv[r] = dv_launch_us_once(k, s, N / 10, 1);
  }
  double ra = bench_median(async_raw, reps), rs = bench_median(sync_raw, reps);
  double da = bench_median(async_dv, reps), ds = bench_median(sync_dv, reps);
  printf("launch, queued:      devarray %8.2f us   raw cuLaunchKernel          %8.2f us   ratio %.2f\n",
         da, ra, da / ra);
  printf("launch + wait:       devarray %8.2f us   raw launch + sync           %8.2f us   ratio %.2f\n",
         ds, rs, ds / rs);
  cuModuleUnload(mod);
  dlclose(lib);
}
#endif

static void plain_matmul(const float *A, const float *B, float *C, int n) {
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) {
      float acc = 0.0f;
      for (int l = 0; l < n; l++) acc += A[i * n + l] * B[l * n + j];
      C[i * n + j] = acc;
    }
}

int main(int argc, char **argv) {
  k_src = bench_kernel_source("bench.dvk");
  const char *backend = NULL;
  int n = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--backend") && i + 1 < argc)
      backend = argv[++i];
    else if (!strcmp(argv[i], "--n") && i + 1 < argc)
      n = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
      reps = atoi(argv[++i]);
    else {
      fprintf(stderr, "usage: %s [--backend NAME] [--n N] [--reps R]\n", argv[0]);
      return 2;
    }
  }
  if (reps < 1 || reps > 64) reps = 7;
  dv_config *cfg;
  dv_context *ctx;
  DV(dv_config_create(&cfg));
  if (backend) DV(dv_config_set(cfg, "backend", backend));
  dv_status rc = dv_context_create(cfg, &ctx);
  dv_config_destroy(cfg);
  if (rc) {
    printf("SKIPPED: bench_kernels %s: %s\n", backend ? backend : "", dv_last_error());
    return 0;
  }
  const char *be = dv_context_backend(ctx);
  if (n <= 0) n = strcmp(be, "host") == 0 ? 256 : 512;
  dv_device_info di;
  DV(dv_context_device_info(ctx, &di));
  printf("bench_kernels: backend %s, device %s, n = %d, medians of %d\n", be, di.name, n, reps);

  /* 3. build time: compiled, then loaded from the cache (a fresh directory). */
  char dir[] = "/tmp/dv-bench-cache-XXXXXX";
  if (!mkdtemp(dir)) return 1;
  dv_program *p;
  DV(dv_program_create(ctx, "bench.dvk", k_src, &p));
  double cold[64], warm[64];
  dv_module *m = NULL;
  for (int r = 0; r < reps; r++) {
    double t0 = bench_now();
    DV(dv_program_build(p, DV_BUILD_NO_CACHE, &m));
    cold[r] = (bench_now() - t0) * 1e3;
    dv_module_release(m);
  }
  dv_config *c2;
  dv_context *ctx2;
  DV(dv_config_create(&c2));
  DV(dv_config_set(c2, "backend", be));
  DV(dv_config_set(c2, "kernel_cache_dir", dir));
  DV(dv_context_create(c2, &ctx2));
  dv_config_destroy(c2);
  dv_program *p2;
  DV(dv_program_create(ctx2, "bench.dvk", k_src, &p2));
  DV(dv_program_build(p2, 0, &m)); /* fills the cache */
  dv_module_release(m);
  for (int r = 0; r < reps; r++) {
    double t0 = bench_now();
    DV(dv_program_build(p2, 0, &m));
    warm[r] = (bench_now() - t0) * 1e3;
    if (!dv_module_from_cache(m)) printf("warning: not served from the cache\n");
    dv_module_release(m);
  }
  dv_program_destroy(p2);
  DV(dv_context_flush_deallocs(ctx2));
  DV(dv_context_destroy(ctx2));
  double mc = bench_median(cold, reps), mw = bench_median(warm, reps);
  printf("module build:        compiled %8.1f ms   from the cache %8.2f ms   ratio %.1f x faster\n",
         mc, mw, mc / mw);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd)) fprintf(stderr, "could not remove %s\n", dir);

  /* 1. launch overhead. */
  DV(dv_program_build(p, 0, &m));
  dv_kernel *ke, *kt, *kn;
  DV(dv_module_kernel(m, "empty", &ke));
  DV(dv_module_kernel(m, "tiled", &kt));
  DV(dv_module_kernel(m, "naive", &kn));
  dv_stream *s;
  DV(dv_stream_create(ctx, 0, &s));
  int raw_done = 0;
#ifdef DV_BENCH_HAVE_OPENCL
  if (!strcmp(be, "opencl")) raw_opencl(ctx, s, ke), raw_done = 1;
#endif
#ifdef DV_BENCH_HAVE_CUDA
  if (!strcmp(be, "cuda")) raw_cuda(ctx, s, ke), raw_done = 1;
#endif
  if (!raw_done) {
    int N = strcmp(be, "host") == 0 ? 2000 : 2000;
    printf("launch, queued:      devarray %8.2f us   (no raw driver on %s)\n", dv_launch_us(ke, s, N, 0), be);
    printf("launch + wait:       devarray %8.2f us\n", dv_launch_us(ke, s, N / 10, 1));
  }

  /* 2. matmul. */
  size_t nn = (size_t)n * (size_t)n;
  float *A = malloc(nn * 4), *B = malloc(nn * 4), *C = malloc(nn * 4), *R = malloc(nn * 4);
  for (size_t i = 0; i < nn; i++) A[i] = (float)(i % 7) * 0.25f, B[i] = (float)(i % 5) * 0.5f;
  int64_t shape[2] = {n, n};
  dv_array *hA, *hB, *hC, *dA, *dB, *dC;
  const dv_dtype *f32 = dv_dtype_get(DV_FLOAT32);
  DV(dv_host_array_wrap(ctx, A, 2, shape, f32, NULL, &hA));
  DV(dv_host_array_wrap(ctx, B, 2, shape, f32, NULL, &hB));
  DV(dv_host_array_wrap(ctx, C, 2, shape, f32, NULL, &hC));
  DV(dv_to_device(ctx, hA, NULL, 1, NULL, &dA));
  DV(dv_to_device(ctx, hB, NULL, 1, NULL, &dB));
  DV(dv_device_array(ctx, 2, shape, f32, NULL, 'C', NULL, &dC));
  double flop = 2.0 * n * (double)n * n;
  double plain[64];
  for (int r = 0; r < reps; r++) {
    double t0 = bench_now();
    plain_matmul(A, B, R, n);
    plain[r] = bench_now() - t0;
  }
  double tp = bench_median(plain, reps);
  dv_kernel *ks[2] = {kt, kn};
  const char *names[2] = {"tiled", "naive"};
  for (int v = 0; v < 2; v++) {
    uint32_t g = (uint32_t)((n + 15) / 16);
    dv_launch_config lc = {{g, g, 1}, {16, 16, 1}, 0, s};
    dv_arg args[] = {DV_ARG_ARRAY(dA), DV_ARG_ARRAY(dB), DV_ARG_ARRAY(dC), DV_ARG_I32(n)};
    DV(dv_kernel_launch(ks[v], &lc, 4, args)); /* warm up */
    DV(dv_stream_synchronize(s));
    double t[64];
    for (int r = 0; r < reps; r++) {
      double t0 = bench_now();
      DV(dv_kernel_launch(ks[v], &lc, 4, args));
      DV(dv_stream_synchronize(s));
      t[r] = bench_now() - t0;
    }
    double tm = bench_median(t, reps);
    DV(dv_copy_to_host(dC, hC, NULL, NULL));
    double err = 0;
    for (size_t i = 0; i < nn; i++) err = fmax(err, fabs((double)C[i] - R[i]));
    printf("matmul %-6s n=%d:  %8.2f GFLOP/s (%.2f ms)   plain C -O2 %8.2f GFLOP/s   ratio %.2f   "
           "max err %.2g\n", names[v], n, flop / tm * 1e-9, tm * 1e3, flop / tp * 1e-9, tp / tm,
           err);
  }
  dv_array_release(hA), dv_array_release(hB), dv_array_release(hC);
  dv_array_release(dA), dv_array_release(dB), dv_array_release(dC);
  dv_stream_release(s);
  dv_module_release(m);
  dv_program_destroy(p);
  DV(dv_context_destroy(ctx));
  free(A), free(B), free(C), free(R);
  return 0;
}
