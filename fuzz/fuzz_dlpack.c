/*
 * libFuzzer target: arbitrary DLManagedTensors into dv_array_from_dlpack and
 * arbitrary DLManagedTensorVersioneds (DLPack 1.x) into
 * dv_array_from_dlpack_versioned, on the host simulator.  Every tensor must
 * be refused with a status or become an array whose view is exactly what the
 * tensor describes (element 0 at data + byte_offset, the tensor's shape,
 * strides x itemsize) and, when the described bytes lie inside the arena,
 * whose first and last elements read without leaving it (ASan watches).  The
 * producer's deleter runs exactly once for an accepted tensor and never for a
 * refused one.  A versioned tensor (one input byte chooses) with major
 * version other than 1 is DV_ERR_NOT_SUPPORTED, a read-only one imported
 * without DV_DLPACK_IMPORT_READ_ONLY DV_ERR_INVALID_ARGUMENT, unknown import
 * flags DV_ERR_INVALID_ARGUMENT; otherwise its status is the 0.x import's of
 * the same DLTensor.  An accepted array is exported again
 * (dv_array_to_dlpack_versioned, fuzzed flags): version 1.0, the flags
 * given (or DV_ERR_INVALID_ARGUMENT for unknown ones), the same view.
 *   build: cmake -DDV_FUZZ=ON with clang; run: fuzz_dlpack -runs=N
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "devarray.h"

#if DV_HAVE_DLPACK
#include "devarray_dlpack.h"

static dv_context *ctx;
static _Alignas(256) unsigned char arena[1 << 12];
static int deleted;

static void deleter(DLManagedTensor *self) {
  (void)self;
  deleted++;
}

static void deleter_versioned(dv_dlpack_versioned *self) {
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
  /* 1.x: the same DLTensor in a versioned tensor, with a version (mostly 1.x),
   * flags and import flags from the input. */
  uint8_t kind = (uint8_t)take(&p, &n, 1);
  int versioned = kind & 1;
  dv_dlpack_versioned v;
  memset(&v, 0, sizeof v);
  v.version.major = (kind & 2) ? (uint32_t)take(&p, &n, 4) : 1;
  v.version.minor = (uint32_t)take(&p, &n, 1);
  v.flags = (kind & 4) ? take(&p, &n, 8) : (kind & 8) ? DV_DLPACK_FLAG_READ_ONLY : 0;
  unsigned iflags = (kind & 16) ? (unsigned)take(&p, &n, 4) : (kind & 32) ? DV_DLPACK_IMPORT_READ_ONLY : 0;
  uint64_t eflags = (kind & 64) ? take(&p, &n, 8) : (uint64_t)(kind >> 7) * DV_DLPACK_FLAG_IS_COPIED;
  v.dl_tensor = t.dl_tensor;
  v.deleter = deleter_versioned;
  deleted = 0;
  dv_array *a = NULL;
  dv_status rc = dv_array_from_dlpack(ctx, &t, &a);
  if (versioned) {
    if (a) dv_array_release(a);
    dv_context_flush_deallocs(ctx);
    if (deleted != (rc == DV_OK)) __builtin_trap();
    dv_status legacy = rc;
    deleted = 0;
    a = NULL;
    rc = dv_array_from_dlpack_versioned(ctx, &v, iflags, &a);
    dv_status want = legacy;
    if (iflags & ~DV_DLPACK_IMPORT_READ_ONLY) want = DV_ERR_INVALID_ARGUMENT;
    else if (v.version.major != 1) want = DV_ERR_NOT_SUPPORTED;
    else if ((v.flags & DV_DLPACK_FLAG_READ_ONLY) && !iflags) want = DV_ERR_INVALID_ARGUMENT;
    if (rc != want) __builtin_trap();
  }
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
  /* Exported again as 1.x: version 1.0, the flags given, the same view. */
  dv_dlpack_versioned *e = NULL;
  rc = dv_array_to_dlpack_versioned(a, NULL, NULL, eflags, &e);
  if (eflags & ~(DV_DLPACK_FLAG_READ_ONLY | DV_DLPACK_FLAG_IS_COPIED)) {
    if (rc != DV_ERR_INVALID_ARGUMENT || e) __builtin_trap();
  } else {
    if (rc != DV_OK || !e) __builtin_trap(); /* what devarray imported it can export */
    if (e->version.major != 1 || e->version.minor != 0 || e->flags != eflags) __builtin_trap();
    if (e->dl_tensor.ndim != ndim || e->dl_tensor.dtype.bits != t.dl_tensor.dtype.bits) __builtin_trap();
    for (int i = 0; i < ndim; i++)
      if (e->dl_tensor.shape[i] != shape[i] ||
          e->dl_tensor.strides[i] * isz != dv_array_strides(a)[i])
        __builtin_trap();
    if (!empty && (char *)e->dl_tensor.data + e->dl_tensor.byte_offset !=
                      (char *)t.dl_tensor.data + t.dl_tensor.byte_offset)
      __builtin_trap();
    e->deleter(e);
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
