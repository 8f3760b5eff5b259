/*
 * Interop costs (issue 14) on the host simulator, medians of repeats, each
 * as a ratio to a reference measured in the same run:
 *   - DLPack export + deleter of a device array, against making and
 *     releasing a view of it (dv_array_slice): both make one descriptor;
 *   - DLPack import + release + flush, against dv_device_array_wrap of the
 *     same memory + release + flush (the same foreign path, minus checks);
 *   - a device allocation + free (+ flush), 256 KiB and 4 KiB, with
 *     host_ipc=on (a memfd per block), against the same with host_ipc=off.
 * Usage: bench_interop [reps]   (times in ns per operation)
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <stdio.h>
#include <string.h>

#include "bench_util.h"
#include "devarray.h"

#if DV_HAVE_DLPACK
#include <dlpack/dlpack.h>
#endif

#define N_INNER 2000

static dv_context *make_ctx(const char *ipc) {
  dv_config *cfg = NULL;
  dv_context *c = NULL;
  dv_config_create(&cfg);
  dv_config_set(cfg, "backend", "host");
  dv_config_set(cfg, "host_ipc", ipc);
  dv_config_set(cfg, "log_level", "off");
  if (dv_context_create(cfg, &c)) {
    fprintf(stderr, "context: %s\n", dv_last_error());
    exit(1);
  }
  dv_config_destroy(cfg);
  return c;
}

static double alloc_free(dv_context *c, int64_t n) {
  double t0 = bench_now();
  for (int i = 0; i < N_INNER; i++) {
    dv_array *a = NULL;
    if (dv_device_array(c, 1, &n, dv_dtype_get(DV_FLOAT32), NULL, 'C', NULL, &a)) exit(1);
    dv_array_release(a);
    dv_context_flush_deallocs(c);
  }
  return (bench_now() - t0) / N_INNER * 1e9;
}

#if DV_HAVE_DLPACK
static void no_delete(DLManagedTensor *t) { (void)t; }
#endif

int main(int argc, char **argv) {
  int reps = argc > 1 ? atoi(argv[1]) : 11;
  if (reps < 1 || reps > 1000) reps = 11;
  dv_context *c = make_ctx("off"), *ci = make_ctx("on");
  double *r[8];
  for (int k = 0; k < 8; k++) r[k] = calloc((size_t)reps, sizeof(double));
  int64_t shape[2] = {64, 64};
  dv_array *a = NULL;
  if (dv_device_array(c, 2, shape, dv_dtype_get(DV_FLOAT32), NULL, 'C', NULL, &a)) return 1;
  static float mem[64 * 64];
  for (int rep = 0; rep < reps; rep++) {
    double t0 = bench_now();
    dv_index idx[1] = {DV_ALL};
    for (int i = 0; i < N_INNER; i++) {
      dv_array *v = NULL;
      dv_array_slice(a, 1, idx, &v);
      dv_array_release(v);
    }
    r[0][rep] = (bench_now() - t0) / N_INNER * 1e9;
#if DV_HAVE_DLPACK
    t0 = bench_now();
    for (int i = 0; i < N_INNER; i++) {
      struct DLManagedTensor *t = NULL;
      if (dv_array_to_dlpack(a, NULL, NULL, &t)) return 1;
      t->deleter(t);
    }
    r[1][rep] = (bench_now() - t0) / N_INNER * 1e9;
    t0 = bench_now();
    for (int i = 0; i < N_INNER; i++) {
      dv_array *w = NULL;
      if (dv_device_array_wrap(c, mem, 0, sizeof mem, 2, shape, dv_dtype_get(DV_FLOAT32), NULL, NULL,
                               NULL, &w))
        return 1;
      dv_array_release(w);
      dv_context_flush_deallocs(c);
    }
    r[2][rep] = (bench_now() - t0) / N_INNER * 1e9;
    int64_t sh[2] = {64, 64};
    DLManagedTensor mt;
    memset(&mt, 0, sizeof mt);
    mt.dl_tensor.data = mem;
    mt.dl_tensor.device.device_type = kDLCPU;
    mt.dl_tensor.ndim = 2;
    mt.dl_tensor.shape = sh;
    mt.dl_tensor.dtype.code = kDLFloat;
    mt.dl_tensor.dtype.bits = 32;
    mt.dl_tensor.dtype.lanes = 1;
    mt.deleter = no_delete;
    t0 = bench_now();
    for (int i = 0; i < N_INNER; i++) {
      dv_array *w = NULL;
      if (dv_array_from_dlpack(c, &mt, &w)) return 1;
      dv_array_release(w);
      dv_context_flush_deallocs(c);
    }
    r[3][rep] = (bench_now() - t0) / N_INNER * 1e9;
#endif
    r[4][rep] = alloc_free(c, 1 << 16);
    r[5][rep] = alloc_free(ci, 1 << 16);
    r[6][rep] = alloc_free(c, 1 << 10);
    r[7][rep] = alloc_free(ci, 1 << 10);
  }
  double m[8];
  for (int k = 0; k < 8; k++) m[k] = bench_median(r[k], reps);
  printf("interop on the host simulator: medians of %d repeats of %d operations (ns/op)\n", reps, N_INNER);
  printf("%-44s %10.0f\n", "view (slice + release) [reference]", m[0]);
#if DV_HAVE_DLPACK
  printf("%-44s %10.0f  ratio %.2f\n", "DLPack export + deleter", m[1], m[1] / m[0]);
  printf("%-44s %10.0f\n", "wrap + release + flush [reference]", m[2]);
  printf("%-44s %10.0f  ratio %.2f\n", "DLPack import + release + flush", m[3], m[3] / m[2]);
#else
  printf("DLPack: not built (no dlpack.h)\n");
#endif
  printf("%-44s %10.0f\n", "256 KiB alloc + free, host_ipc=off [reference]", m[4]);
  printf("%-44s %10.0f  ratio %.2f\n", "256 KiB alloc + free, host_ipc=on (memfd)", m[5], m[5] / m[4]);
  printf("%-44s %10.0f\n", "4 KiB alloc + free, host_ipc=off [reference]", m[6]);
  printf("%-44s %10.0f  ratio %.2f\n", "4 KiB alloc + free, host_ipc=on (memfd)", m[7], m[7] / m[6]);
  dv_array_release(a);
  dv_context_destroy(c);
  dv_context_destroy(ci);
  for (int k = 0; k < 8; k++) free(r[k]);
  return 0;
}
