/*
 * devarray against the raw OpenCL calls it makes, in the same run, on the
 * same device: synchronous 4 KiB and 64 MiB transfers, host->device and
 * device->host.  Interleaved batches, medians; prints ratios.
 *   bench_opencl [--reps N]
 * Goals (issue 3): devarray/raw time <= 1.10 at 4 KiB; bandwidth >= 0.95 at 64 MiB.
 */
#define _POSIX_C_SOURCE 200809L
#define CL_TARGET_OPENCL_VERSION 120
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"
#include "devarray.h"

#define CL(call)                                                \
  do {                                                          \
    cl_int e_ = (call);                                         \
    if (e_) {                                                   \
      fprintf(stderr, "%s failed: %d\n", #call, (int)e_);       \
      exit(1);                                                  \
    }                                                           \
  } while (0)

int main(int argc, char **argv) {
  int batches = 15;
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "--reps") && i + 1 < argc) batches = atoi(argv[++i]);
  dv_config *cfg;
  dv_context *ctx;
  DV(dv_config_create(&cfg));
  DV(dv_config_set(cfg, "backend", "opencl"));
  dv_status rc = dv_context_create(cfg, &ctx);
  dv_config_destroy(cfg);
  if (rc) {
    printf("SKIPPED: bench_opencl: %s\n", dv_last_error());
    return 0;
  }
  dv_device_info di;
  DV(dv_context_device_info(ctx, &di));
  /* the raw side: the same device, its own context and queue */
  cl_platform_id plat;
  cl_device_id dev;
  CL(clGetPlatformIDs(1, &plat, NULL));
  CL(clGetDeviceIDs(plat, CL_DEVICE_TYPE_ALL, 1, &dev, NULL));
  cl_int e;
  cl_context cctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &e);
  cl_command_queue q = clCreateCommandQueue(cctx, dev, 0, &e);
  size_t sizes[2] = {4096, (size_t)64 << 20};
  printf("device: %s (%s, driver %s)\nsynchronous transfers, median over %d interleaved batches\n\n", di.name, di.vendor,
         di.driver_version, batches);
  printf("%-5s %10s %14s %14s %12s\n", "dir", "bytes", "raw us/op", "devarray us/op", "dv/raw time");
  for (int si = 0; si < 2; si++) {
    size_t bytes = sizes[si];
    int per = bytes <= 65536 ? 400 : 3;
    char *host = malloc(bytes), *host2 = malloc(bytes);
    memset(host, 1, bytes), memset(host2, 2, bytes);
    cl_mem buf = clCreateBuffer(cctx, CL_MEM_READ_WRITE, bytes, NULL, &e);
    int64_t n = (int64_t)bytes;
    dv_array *d, *h, *h2;
    DV(dv_device_array(ctx, 1, &n, dv_dtype_get(DV_UINT8), NULL, 'C', NULL, &d));
    DV(dv_host_array_wrap(ctx, host, 1, &n, dv_dtype_get(DV_UINT8), NULL, &h));
    DV(dv_host_array_wrap(ctx, host2, 1, &n, dv_dtype_get(DV_UINT8), NULL, &h2));
    for (int dir = 0; dir < 2; dir++) {
      double *traw = malloc(sizeof(double) * (size_t)batches), *tdv = malloc(sizeof(double) * (size_t)batches);
      for (int b = -1; b < batches; b++) {
        double t0 = bench_now();
        for (int i = 0; i < per; i++) {
          if (dir == 0) CL(clEnqueueWriteBuffer(q, buf, CL_TRUE, 0, bytes, host, 0, NULL, NULL));
          else CL(clEnqueueReadBuffer(q, buf, CL_TRUE, 0, bytes, host2, 0, NULL, NULL));
        }
        double t1 = bench_now();
        for (int i = 0; i < per; i++) {
          if (dir == 0) DV(dv_copy_to_device(d, h, NULL));
          else DV(dv_copy_to_host(d, h2, NULL, NULL));
        }
        double t2 = bench_now();
        if (b >= 0) traw[b] = (t1 - t0) / per, tdv[b] = (t2 - t1) / per;
      }
      double r = bench_median(traw, batches), v = bench_median(tdv, batches);
      printf("%-5s %10zu %14.2f %14.2f %12.3f   (%.2f vs %.2f GB/s)\n", dir ? "d2h" : "h2d", bytes, r * 1e6, v * 1e6,
             v / r, bytes / r / 1e9, bytes / v / 1e9);
      free(traw), free(tdv);
    }
    dv_array_release(d), dv_array_release(h), dv_array_release(h2);
    clReleaseMemObject(buf);
    free(host), free(host2);
  }
  clReleaseCommandQueue(q);
  clReleaseContext(cctx);
  DV(dv_context_destroy(ctx));
  return 0;
}
