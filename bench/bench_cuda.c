/*
 * devarray against the raw CUDA driver calls, in the same run (nvbandwidth's
 * method: a stream, events around `iters` back-to-back copies, median of
 * trials).  Built only where cuda.h and libcuda (or the toolkit's stub) are
 * found; run on a GPU machine by bench/gpu/run.sh.
 *
 *   bench_cuda [--max BYTES] [--trials N]
 *
 * Rows: pinned and pageable host<->device from 4 KiB to 1 GiB; a 2-D strided
 * copy (every other column) against a contiguous copy of the same bytes; the
 * latency of a small synchronous transfer (4 KiB) and of to_device
 * (allocate + copy), each against the raw calls.
 */
#define _POSIX_C_SOURCE 200809L
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"
#include "devarray.h"

#define CK(call)                                                                  \
  do {                                                                            \
    CUresult r_ = (call);                                                         \
    if (r_) {                                                                     \
      const char *n_ = "?";                                                       \
      cuGetErrorName(r_, &n_);                                                    \
      fprintf(stderr, "%s: %s\n", #call, n_);                                     \
      exit(1);                                                                    \
    }                                                                             \
  } while (0)

static dv_context *ctx;
static dv_stream *dvs;
static dv_event *e0, *e1;
static CUstream cs;
static CUevent c0, c1;
static int trials = 7;

/* seconds per copy, median over trials, for a raw H2D/D2H of n bytes */
static double raw_copy(int h2d, CUdeviceptr d, void *h, size_t n, int iters) {
  double t[64];
  for (int k = -1; k < trials; k++) {
    CK(cuEventRecord(c0, cs));
    for (int i = 0; i < iters; i++) {
      if (h2d) CK(cuMemcpyHtoDAsync(d, h, n, cs));
      else CK(cuMemcpyDtoHAsync(h, d, n, cs));
    }
    CK(cuEventRecord(c1, cs));
    CK(cuEventSynchronize(c1));
    float ms;
    CK(cuEventElapsedTime(&ms, c0, c1));
    if (k >= 0) t[k] = ms / 1e3 / iters;
  }
  return bench_median(t, trials);
}

static double dv_copy(int h2d, dv_array *dev, dv_array *host, int iters) {
  double t[64];
  for (int k = -1; k < trials; k++) {
    DV(dv_event_record(e0, dvs));
    for (int i = 0; i < iters; i++) {
      if (h2d) DV(dv_copy_to_device(dev, host, dvs));
      else DV(dv_copy_to_host(dev, host, dvs, NULL));
    }
    DV(dv_event_record(e1, dvs));
    DV(dv_event_synchronize(e1));
    float ms;
    DV(dv_event_elapsed_ms(e0, e1, &ms));
    if (k >= 0) t[k] = ms / 1e3 / iters;
  }
  return bench_median(t, trials);
}

int main(int argc, char **argv) {
  size_t max = (size_t)1 << 30;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--max") && i + 1 < argc) max = (size_t)strtoull(argv[++i], NULL, 0);
    else if (!strcmp(argv[i], "--trials") && i + 1 < argc) trials = atoi(argv[++i]);
  }
  if (trials < 1 || trials > 64) trials = 7;
  dv_config *cfg;
  DV(dv_config_create(&cfg));
  DV(dv_config_set(cfg, "backend", "cuda"));
  DV(dv_context_create(cfg, &ctx));
  dv_config_destroy(cfg);
  dv_device_info di;
  DV(dv_context_device_info(ctx, &di));
  DV(dv_stream_create(ctx, DV_STREAM_NON_BLOCKING, &dvs));
  DV(dv_event_create(ctx, DV_EVENT_TIMING, &e0));
  DV(dv_event_create(ctx, DV_EVENT_TIMING, &e1));
  /* devarray leaves the thread's current context as it found it: make its
   * (primary) context current for the raw calls */
  void *native_ctx = NULL, *native_dev = NULL;
  DV(dv_context_native(ctx, &native_ctx, &native_dev));
  CK(cuCtxSetCurrent((CUcontext)native_ctx));
  CK(cuStreamCreate(&cs, CU_STREAM_NON_BLOCKING));
  CK(cuEventCreate(&c0, 0));
  CK(cuEventCreate(&c1, 0));
  printf("device %s, CC %d.%d, %s, PCI %s; median of %d trials (events)\n\n", di.name, di.compute_major,
         di.compute_minor, di.driver_version, di.pci_bus_id, trials);
  printf("%-18s %12s %12s %12s %8s\n", "transfer", "bytes", "raw GB/s", "devarray GB/s", "dv/raw");
  const dv_dtype *u8 = dv_dtype_get(DV_UINT8);
  for (int pinned = 1; pinned >= 0; pinned--) {
    void *h = NULL;
    if (pinned) CK(cuMemHostAlloc(&h, max, 0));
    else {
      h = malloc(max);
      memset(h, 1, max);
    }
    CUdeviceptr d;
    CK(cuMemAlloc(&d, max));
    for (size_t n = 4096; n <= max; n *= 4) {
      int64_t len = (int64_t)n;
      dv_array *hv, *dev;
      DV(dv_host_array_wrap(ctx, h, 1, &len, u8, NULL, &hv));
      DV(dv_device_array(ctx, 1, &len, u8, NULL, 'C', NULL, &dev));
      int iters = n <= (1 << 20) ? 100 : n <= (64 << 20) ? 10 : 2;
      for (int h2d = 1; h2d >= 0; h2d--) {
        double r = raw_copy(h2d, d, h, n, iters), v = dv_copy(h2d, dev, hv, iters);
        printf("%-18s %12zu %12.2f %12.2f %8.3f\n", h2d ? (pinned ? "h2d pinned" : "h2d pageable") : (pinned ? "d2h pinned" : "d2h pageable"),
               n, n / r / 1e9, n / v / 1e9, r / v);
      }
      dv_array_release(hv), dv_array_release(dev);
    }
    CK(cuMemFree(d));
    if (pinned) CK(cuMemFreeHost(h));
    else free(h);
    fflush(stdout);
  }
  /* 2-D strided: every other column of a pinned (rows, 2*cols) float64 array */
  {
    int64_t rows = 8192, cols = 1024, wide[2] = {rows, 2 * cols}, shape[2] = {rows, cols};
    dv_array *h, *hv, *dev, *hc;
    DV(dv_pinned_array(ctx, 2, wide, dv_dtype_get(DV_FLOAT64), NULL, 'C', &h));
    dv_index idx[2] = {DV_ALL, DV_SLICE(DV_NONE, DV_NONE, 2)};
    DV(dv_array_slice(h, 2, idx, &hv));
    DV(dv_device_array(ctx, 2, shape, dv_dtype_get(DV_FLOAT64), NULL, 'C', NULL, &dev));
    DV(dv_pinned_array(ctx, 2, shape, dv_dtype_get(DV_FLOAT64), NULL, 'C', &hc));
    size_t n = (size_t)(rows * cols * 8);
    double contig = dv_copy(1, dev, hc, 3), strided = dv_copy(1, dev, hv, 3);
    printf("\n2-D strided h2d (every other column, %zu bytes): %.2f GB/s; contiguous same bytes: %.2f GB/s; ratio %.3f\n",
           n, n / strided / 1e9, n / contig / 1e9, contig / strided);
    contig = dv_copy(0, dev, hc, 3), strided = dv_copy(0, dev, hv, 3);
    printf("2-D strided d2h (every other column, %zu bytes): %.2f GB/s; contiguous same bytes: %.2f GB/s; ratio %.3f\n",
           n, n / strided / 1e9, n / contig / 1e9, contig / strided);
    dv_array_release(h), dv_array_release(hv), dv_array_release(dev), dv_array_release(hc);
  }
  /* latency: synchronous 4 KiB copies and to_device, wall clock, median */
  {
    enum { REPS = 2000 };
    static double tr[REPS], tv[REPS], ta[REPS], tb[REPS];
    char host[4096];
    memset(host, 3, sizeof host);
    int64_t len = 4096;
    dv_array *hv, *dev;
    DV(dv_host_array_wrap(ctx, host, 1, &len, u8, NULL, &hv));
    DV(dv_device_array(ctx, 1, &len, u8, NULL, 'C', NULL, &dev));
    CUdeviceptr d;
    CK(cuMemAlloc(&d, 4096));
    for (int i = 0; i < REPS; i++) {
      double t0 = bench_now();
      CK(cuMemcpyHtoD(d, host, 4096));
      double t1 = bench_now();
      DV(dv_copy_to_device(dev, hv, NULL));
      double t2 = bench_now();
      CUdeviceptr x;
      CK(cuMemAlloc(&x, 4096));
      CK(cuMemcpyHtoD(x, host, 4096));
      double t3 = bench_now();
      dv_array *y;
      DV(dv_to_device(ctx, hv, NULL, 1, NULL, &y));
      double t4 = bench_now();
      CK(cuMemFree(x));
      dv_array_release(y);
      tr[i] = t1 - t0, tv[i] = t2 - t1, ta[i] = t3 - t2, tb[i] = t4 - t3;
    }
    double r = bench_median(tr, REPS), v = bench_median(tv, REPS), a = bench_median(ta, REPS), b = bench_median(tb, REPS);
    printf("\n4 KiB synchronous h2d: raw cuMemcpyHtoD %.2f us, devarray %.2f us (ratio %.3f)\n", r * 1e6, v * 1e6, v / r);
    printf("4 KiB to_device (allocate + copy): raw cuMemAlloc+cuMemcpyHtoD %.2f us, devarray %.2f us (ratio %.3f)\n",
           a * 1e6, b * 1e6, b / a);
    CK(cuMemFree(d));
    dv_array_release(hv), dv_array_release(dev);
  }
  cuEventDestroy(c0), cuEventDestroy(c1), cuStreamDestroy(cs);
  dv_event_release(e0), dv_event_release(e1), dv_stream_release(dvs);
  DV(dv_context_destroy(ctx));
  return 0;
}
