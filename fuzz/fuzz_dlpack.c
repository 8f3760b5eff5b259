/*
 * libFuzzer target: arbitrary DLManagedTensors into dv_array_from_dlpack on
 * the host simulator.  Every tensor must be refused with a status or become
 * an array whose view is exactly what the tensor describes (element 0 at
 * data + byte_offset, the tensor's shape, strides x itemsize) and, when the
 * described bytes lie inside the arena, whose first and last elements read
 * without leaving it (ASan watches).  The producer's deleter runs exactly
 * once for an accepted tensor and never for a refused one.
 *   build: cmake -DDV_FUZZ=ON with clang; run: fuzz_dlpack -runs=N
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "devarray.h"

#if DV_HAVE_DLPACK
#include <dlpack/dlpack.h>

static dv_context *ctx;
static _Alignas(256) unsigned char arena[1 << 12];
static int deleted;

static void deleter(DLManagedTensor *self) {
  (void)self;
  deleted++;
}

static uint64_t take(const uint8_t **p, size_t *n, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; i++) {
    v = (v << 8) | (*n ? **p : 0);
    if (*n) (*p)++, (*n)--;
  }
  return v;
}

/* Mostly small values, sometimes anything (extremes included). */
static int64_t value(const uint8_t **p, size_t *n) {
  uint8_t sel = (uint8_t)take(p, n, 1);
  if (sel < 200) return (int64_t)(int8_t)take(p, n, 1);
  if (sel < 230) return (int64_t)(int16_t)take(p, n, 2);
  if (sel < 240) return INT64_MAX - (int64_t)take(p, n, 1);
  if (sel < 250) return INT64_MIN + (int64_t)take(p, n, 1);
  return (int64_t)take(p, n, 8);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!ctx) {
    dv_config *cfg;
    dv_config_create(&cfg);
    dv_config_set(cfg, "backend", "host");
    dv_config_set(cfg, "log_level", "off");
    if (dv_context_create(cfg, &ctx)) return 0;
    dv_config_destroy(cfg);
  }
  const uint8_t *p = data;
  size_t n = size;
  int64_t shape[40], strides[40];
  DLManagedTensor t;
  memset(&t, 0, sizeof t);
  int ndim = (int)(int8_t)take(&p, &n, 1) % 40;
  int nd_used = ndim < 0 ? 0 : ndim;
  for (int i = 0; i < nd_used; i++) {
    shape[i] = value(&p, &n);
    strides[i] = value(&p, &n);
  }
  uint8_t flags = (uint8_t)take(&p, &n, 1);
  t.dl_tensor.ndim = ndim;
  t.dl_tensor.shape = (flags & 1) ? NULL : shape;
  t.dl_tensor.strides = (flags & 2) ? NULL : strides;
  uint64_t where = take(&p, &n, 2) % sizeof arena;
  t.dl_tensor.data = (flags & 4) ? NULL : (flags & 8) ? (void *)(uintptr_t)take(&p, &n, 8) : arena + where;
  t.dl_tensor.byte_offset = (flags & 16) ? take(&p, &n, 8) : take(&p, &n, 1);
  t.dl_tensor.dtype.code = (uint8_t)take(&p, &n, 1) % 8;
  t.dl_tensor.dtype.bits = (uint8_t)(8u << (take(&p, &n, 1) % 6));
  t.dl_tensor.dtype.lanes = (flags & 32) ? (uint16_t)take(&p, &n, 2) : 1;
  t.dl_tensor.device.device_type = (flags & 64) ? (DLDeviceType)take(&p, &n, 1) : kDLCPU;
  t.dl_tensor.device.device_id = (flags & 128) ? (int)take(&p, &n, 1) : 0;
  t.deleter = deleter;
  deleted = 0;
  dv_array *a = NULL;
  dv_status rc = dv_array_from_dlpack(ctx, &t, &a);
  if (rc != DV_OK) {
    if (a || deleted) __builtin_trap();
    return 0;
  }
  /* Accepted: the view is exactly the tensor. */
  static long accepted;
  accepted++;
  if (getenv("FUZZ_DEBUG") && (accepted & (accepted - 1)) == 0)
    fprintf(stderr, "accepted %ld (ndim %d)\n", accepted, ndim);
  int64_t isz = (int64_t)dv_dtype_itemsize(dv_array_dtype(a));
  if (dv_array_ndim(a) != ndim || isz * 8 != t.dl_tensor.dtype.bits) __builtin_trap();
  __int128 lo = 0, hi = isz;
  int empty = 0;
  for (int i = 0; i < ndim; i++) {
    int64_t st = t.dl_tensor.strides ? strides[i] * isz : dv_array_strides(a)[i];
    if (dv_array_shape(a)[i] != shape[i] || dv_array_strides(a)[i] != st) __builtin_trap();
    if (shape[i] == 0) empty = 1;
  }
  for (int i = 0; i < ndim && !empty; i++) { /* accepted and not empty: the extent fits int64 */
    __int128 e = (__int128)(shape[i] - 1) * dv_array_strides(a)[i];
    if (e < 0) lo += e;
    else hi += e;
  }
  if (!empty) {
    void *nat = NULL;
    size_t off = 0;
    if (dv_array_native(a, &nat, &off)) __builtin_trap();
    if ((uintptr_t)nat + off != (uintptr_t)t.dl_tensor.data + t.dl_tensor.byte_offset) __builtin_trap();
    __int128 first = (__int128)(uintptr_t)t.dl_tensor.data + t.dl_tensor.byte_offset + lo;
    __int128 end = (__int128)(uintptr_t)t.dl_tensor.data + t.dl_tensor.byte_offset + hi;
    if (first >= (__int128)(uintptr_t)arena && end <= (__int128)(uintptr_t)(arena + sizeof arena) &&
        ndim <= 8) {
      int64_t idx[8] = {0};
      unsigned char out[16];
      if (dv_array_get_item(a, idx, out, sizeof out, NULL)) __builtin_trap();
      for (int i = 0; i < ndim; i++) idx[i] = shape[i] - 1;
      if (dv_array_get_item(a, idx, out, sizeof out, NULL)) __builtin_trap();
    }
  }
  dv_array_release(a);
  dv_context_flush_deallocs(ctx);
  if (deleted != 1) __builtin_trap();
  return 0;
}
#else
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  (void)data, (void)size;
  return 0; /* built without dlpack.h: nothing to fuzz */
}
#endif
