/* DLPack 1.x (issue 38 item 4): dv_array_to_dlpack_versioned and
 * dv_array_from_dlpack_versioned.  The version written and the versions
 * read (a major version other than 1 refused, naming both), the read-only
 * flag both ways (set on export as given; on import refused unless the
 * caller passes DV_DLPACK_IMPORT_READ_ONLY), the producer's deleter called
 * exactly once, refusals that change nothing, and a sweep of failing host
 * allocations over both exports and the versioned import (the right status,
 * *out NULL, nothing leaked: the arrays count, the context's teardown, ASan).
 * Runs on each backend given; without dlpack.h the suite is skipped. */
#include "common.h"

#if !DV_HAVE_DLPACK
int main(void) {
  printf("SKIPPED: dlpack/dlpack.h was not found at build time (libdlpack-dev)\n");
  return 77;
}
#else
#include "devarray_dlpack.h"

static bool on_host_backend(void) { return strncmp(g_backend, "host", 4) == 0; }
static bool on_opencl(void) { return strncmp(g_backend, "opencl", 6) == 0; }
static bool on_hip(void) { return strncmp(g_backend, "hip", 3) == 0; }

static int device_type(void) {
  if (on_host_backend()) return kDLCPU;
  if (on_opencl()) return kDLOpenCL;
  if (on_hip()) return kDLROCM;
  return kDLCUDA;
}

static uint64_t arrays_now(dv_context *c) {
  dv_stats st = {.size = sizeof st};
  assert_ok(dv_context_stats(c, &st));
  return st.arrays.current;
}

/* A 2-D int32 device array holding 0, 1, 2, ... */
static dv_array *dev_iota(int64_t rows, int64_t cols) {
  int64_t shape[2] = {rows, cols};
  dv_array *h = NULL, *d = NULL;
  assert_ok(dv_host_array(g_ctx, 2, shape, dv_dtype_get(DV_INT32), NULL, 'C', &h));
  int32_t *p = NULL;
  assert_ok(dv_array_host_data(h, (void **)&p));
  for (int64_t i = 0; i < rows * cols; i++) p[i] = (int32_t)i;
  assert_ok(dv_to_device(g_ctx, h, NULL, 1, NULL, &d));
  dv_array_release(h);
  return d;
}

static int32_t item(const dv_array *a, int64_t i, int64_t j) {
  int64_t ix[2] = {i, j};
  int32_t v = 0;
  assert_ok(dv_array_get_item(a, ix, &v, sizeof v, NULL));
  return v;
}

/* The versioned export has version 1.0, the flags given and the same DLTensor
 * as the 0.x export, and its deleter gives the array back. */
static void test_export_versioned(void **state) {
  (void)state;
  uint64_t arrays0 = arrays_now(g_ctx);
  dv_array *a = dev_iota(4, 6);
  dv_index idx[2] = {DV_SLICE(DV_NONE, DV_NONE, -1), DV_SLICE(1, 5, 2)};
  dv_array *v = NULL;
  assert_ok(dv_array_slice(a, 2, idx, &v));
  const uint64_t flag_sets[] = {0, DV_DLPACK_FLAG_READ_ONLY, DV_DLPACK_FLAG_IS_COPIED,
                                DV_DLPACK_FLAG_READ_ONLY | DV_DLPACK_FLAG_IS_COPIED};
  for (size_t f = 0; f < sizeof flag_sets / sizeof flag_sets[0]; f++) {
    dv_dlpack_versioned *t = NULL;
    DLManagedTensor *l = NULL;
    assert_ok(dv_array_to_dlpack_versioned(v, NULL, NULL, flag_sets[f], &t));
    assert_ok(dv_array_to_dlpack(v, NULL, NULL, &l));
    assert_int_equal(t->version.major, DV_DLPACK_MAJOR);
    assert_int_equal(t->version.major, 1);
    assert_int_equal(t->version.minor, DV_DLPACK_MINOR);
    assert_true(t->flags == flag_sets[f]);
    assert_non_null(t->deleter);
    const DLTensor *x = &t->dl_tensor, *y = &l->dl_tensor;
    assert_ptr_equal(x->data, y->data);
    assert_int_equal(x->byte_offset, y->byte_offset);
    assert_int_equal(x->device.device_type, device_type());
    assert_int_equal(x->device.device_type, y->device.device_type);
    assert_int_equal(x->device.device_id, y->device.device_id);
    assert_int_equal(x->ndim, 2);
    assert_int_equal(x->dtype.code, kDLInt);
    assert_int_equal(x->dtype.bits, 32);
    assert_int_equal(x->dtype.lanes, 1);
    for (int i = 0; i < 2; i++) {
      assert_int_equal(x->shape[i], y->shape[i]);
      assert_int_equal(x->strides[i], y->strides[i]);
      assert_int_equal(x->strides[i] * 4, dv_array_strides(v)[i]);
    }
    assert_true(x->strides[0] < 0);
    if (x->device.device_type == kDLCPU) /* element (0, 0) of v is a's (3, 1) */
      assert_int_equal(*(int32_t *)((char *)x->data + x->byte_offset), 3 * 6 + 1);
    l->deleter(l);
    t->deleter(t);
  }
  /* The tensor keeps the array alive past its release. */
  dv_dlpack_versioned *t = NULL;
  assert_ok(dv_array_to_dlpack_versioned(a, NULL, NULL, 0, &t));
  dv_array_release(v), dv_array_release(a);
  assert_ok(dv_context_flush_deallocs(g_ctx));
  assert_status(dv_context_destroy(g_ctx), DV_ERR_BUSY);
  assert_int_equal(arrays_now(g_ctx), arrays0 + 1);
  t->deleter(t);
  assert_ok(dv_context_flush_deallocs(g_ctx));
  assert_int_equal(arrays_now(g_ctx), arrays0);
}

/* Refusals leave *out NULL and make nothing. */
static void test_export_versioned_refusals(void **state) {
  (void)state;
  uint64_t arrays0 = arrays_now(g_ctx);
  dv_array *a = dev_iota(2, 3);
  dv_dlpack_versioned *t = (dv_dlpack_versioned *)1;
  /* flags beyond READ_ONLY and IS_COPIED (the 1.1 sub-byte flag included: devarray has no sub-byte dtypes) */
  const uint64_t bad[] = {DV_DLPACK_FLAG_SUBBYTE_PADDED, (uint64_t)1 << 3, (uint64_t)1 << 63,
                          DV_DLPACK_FLAG_READ_ONLY | ((uint64_t)1 << 40)};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    t = (dv_dlpack_versioned *)1;
    assert_status(dv_array_to_dlpack_versioned(a, NULL, NULL, bad[i], &t), DV_ERR_INVALID_ARGUMENT);
    assert_null(t);
    assert_non_null(strstr(dv_last_error(), "flags"));
  }
  t = (dv_dlpack_versioned *)1;
  assert_status(dv_array_to_dlpack_versioned(NULL, NULL, NULL, 0, &t), DV_ERR_NULL_ARGUMENT);
  assert_null(t);
  assert_status(dv_array_to_dlpack_versioned(a, NULL, NULL, 0, NULL), DV_ERR_NULL_ARGUMENT);
  /* the refusals of the 0.x export: a record dtype, a stream of another context */
  dv_field_desc fd[2] = {{"x", dv_dtype_get(DV_FLOAT32), 0, 0, NULL},
                         {"y", dv_dtype_get(DV_INT32), 4, 0, NULL}};
  dv_dtype *rec = NULL;
  assert_ok(dv_dtype_record_create(fd, 2, 0, &rec));
  dv_array *r = NULL;
  int64_t n = 4;
  assert_ok(dv_device_array(g_ctx, 1, &n, rec, NULL, 'C', NULL, &r));
  t = (dv_dlpack_versioned *)1;
  assert_status(dv_array_to_dlpack_versioned(r, NULL, NULL, 0, &t), DV_ERR_BAD_DTYPE);
  assert_null(t);
  dv_array_release(r);
  dv_dtype_release(rec);
  dv_context *other = NULL;
  assert_ok(test_context(&other, NULL));
  dv_stream *s = NULL;
  assert_ok(dv_stream_create(other, 0, &s));
  t = (dv_dlpack_versioned *)1;
  assert_status(dv_array_to_dlpack_versioned(a, s, NULL, 0, &t), DV_ERR_BACKEND_MISMATCH);
  assert_null(t);
  dv_stream_release(s);
  assert_ok(dv_context_destroy(other));
  if (device_type() == kDLCPU) {
    t = (dv_dlpack_versioned *)1;
    assert_status(dv_array_to_dlpack_versioned(a, NULL, (void *)0x2, 0, &t), DV_ERR_INVALID_ARGUMENT);
    assert_null(t);
  }
  assert_ok(dv_array_to_dlpack_versioned(a, NULL, DV_DLPACK_NO_SYNC, 0, &t));
  t->deleter(t);
  dv_array_release(a);
  assert_ok(dv_context_flush_deallocs(g_ctx));
  assert_int_equal(arrays_now(g_ctx), arrays0);
}

/* devarray's versioned export imported back views the same memory, a
 * read-only one only with DV_DLPACK_IMPORT_READ_ONLY, and the deleter runs
 * once, at the flush after the last view. */
static void test_round_trip_versioned(void **state) {
  (void)state;
  uint64_t arrays0 = arrays_now(g_ctx);
  dv_array *a = dev_iota(3, 5);
  for (int ro = 0; ro < 2; ro++) {
    dv_dlpack_versioned *t = NULL;
    assert_ok(dv_array_to_dlpack_versioned(a, NULL, NULL, ro ? DV_DLPACK_FLAG_READ_ONLY : 0, &t));
    dv_array *b = (dv_array *)1;
    if (ro) {
      assert_status(dv_array_from_dlpack_versioned(g_ctx, t, 0, &b), DV_ERR_INVALID_ARGUMENT);
      assert_null(b);
      assert_non_null(strstr(dv_last_error(), "read-only"));
      assert_non_null(strstr(dv_last_error(), "DV_DLPACK_IMPORT_READ_ONLY"));
    }
    assert_ok(dv_array_from_dlpack_versioned(g_ctx, t, ro ? DV_DLPACK_IMPORT_READ_ONLY : 0, &b));
    assert_int_equal(dv_array_ndim(b), 2);
    assert_int_equal(dv_array_memory(b), DV_MEM_DEVICE);
    assert_true(dv_dtype_equal(dv_array_dtype(b), dv_dtype_get(DV_INT32)));
    for (int i = 0; i < 2; i++) {
      assert_int_equal(dv_array_shape(b)[i], dv_array_shape(a)[i]);
      assert_int_equal(dv_array_strides(b)[i], dv_array_strides(a)[i]);
    }
    assert_int_equal(item(b, 2, 4), 14);
    void *na = NULL, *nb = NULL;
    size_t oa = 0, ob = 0;
    assert_ok(dv_array_native(a, &na, &oa));
    assert_ok(dv_array_native(b, &nb, &ob));
    if (on_opencl()) assert_ptr_equal(na, nb), assert_int_equal(oa, ob);
    else assert_ptr_equal((char *)na + oa, (char *)nb + ob);
    if (!ro) { /* a write through the import is a write of a (no copy) */
      int64_t ix[2] = {1, 1};
      int32_t w = -7;
      assert_ok(dv_array_set_item(b, ix, &w, sizeof w, NULL));
      assert_int_equal(item(a, 1, 1), -7);
    }
    dv_array_release(b);
    assert_ok(dv_context_flush_deallocs(g_ctx)); /* the tensor's deleter: a's reference back */
  }
  dv_array_release(a);
  assert_ok(dv_context_flush_deallocs(g_ctx));
  assert_int_equal(arrays_now(g_ctx), arrays0);
}

/* ---- import: hand-made versioned tensors over our own memory --------------------- */

static int deleted;
static void count_deleter(dv_dlpack_versioned *self) {
  (void)self;
  deleted++;
}

static _Alignas(64) float mem[64];
static int64_t t_shape[2], t_strides[2];

static dv_dlpack_versioned good_tensor(void) {
  dv_dlpack_versioned t;
  memset(&t, 0, sizeof t);
  t.version.major = 1;
  t.version.minor = 0;
  t_shape[0] = 4, t_shape[1] = 8;
  t_strides[0] = 8, t_strides[1] = 1;
  t.dl_tensor.data = mem;
  t.dl_tensor.device.device_type = kDLCPU;
  t.dl_tensor.ndim = 2;
  t.dl_tensor.dtype.code = kDLFloat;
  t.dl_tensor.dtype.bits = 32;
  t.dl_tensor.dtype.lanes = 1;
  t.dl_tensor.shape = t_shape;
  t.dl_tensor.strides = t_strides;
  t.deleter = count_deleter;
  return t;
}

/* Import t with flags, read element (3, 7), release; the deleter must run exactly once. */
static void import_ok(dv_dlpack_versioned *t, unsigned flags) {
  deleted = 0;
  dv_array *a = NULL;
  assert_ok(dv_array_from_dlpack_versioned(g_ctx, t, flags, &a));
  assert_int_equal(dv_array_memory(a), on_host_backend() ? DV_MEM_DEVICE : DV_MEM_HOST);
  int64_t ix[2] = {3, 7};
  float got = 0;
  assert_ok(dv_array_get_item(a, ix, &got, sizeof got, NULL));
  assert_true(got == 31.0f);
  assert_ok(dv_context_flush_deallocs(g_ctx));
  assert_int_equal(deleted, 0);
  dv_array_release(a);
  assert_ok(dv_context_flush_deallocs(g_ctx));
  assert_int_equal(deleted, 1);
  assert_ok(dv_context_flush_deallocs(g_ctx));
  assert_int_equal(deleted, 1);
}

/* Any minor version of 1 is read, IS_COPIED, sub-byte and unknown flag bits
 * are ignored, a read-only tensor is imported with DV_DLPACK_IMPORT_READ_ONLY,
 * and each accepted tensor's deleter runs exactly once. */
static void test_import_versions_and_flags(void **state) {
  (void)state;
  for (int i = 0; i < 64; i++) mem[i] = (float)i;
  dv_dlpack_versioned t = good_tensor();
  import_ok(&t, 0);
  /* any minor version of 1 (minor versions only add) */
  t = good_tensor();
  t.version.minor = 1;
  import_ok(&t, 0);
  t = good_tensor();
  t.version.minor = 77;
  import_ok(&t, 0);
  /* IS_COPIED, the 1.1 sub-byte flag and unknown bits are ignored */
  t = good_tensor();
  t.flags = DV_DLPACK_FLAG_IS_COPIED | DV_DLPACK_FLAG_SUBBYTE_PADDED | ((uint64_t)1 << 50);
  import_ok(&t, 0);
  /* read-only: only with DV_DLPACK_IMPORT_READ_ONLY */
  t = good_tensor();
  t.flags = DV_DLPACK_FLAG_READ_ONLY;
  import_ok(&t, DV_DLPACK_IMPORT_READ_ONLY);
  t = good_tensor(); /* the caller's promise is accepted for a writable tensor too */
  import_ok(&t, DV_DLPACK_IMPORT_READ_ONLY);
  /* a NULL deleter is allowed */
  t = good_tensor();
  t.deleter = NULL;
  dv_array *a = NULL;
  assert_ok(dv_array_from_dlpack_versioned(g_ctx, &t, 0, &a));
  dv_array_release(a);
  assert_ok(dv_context_flush_deallocs(g_ctx));
}

/* Versioned import refusals (another major version, read-only, unknown import
 * flags, the 0.x field checks) have their status and a message, leave *out
 * NULL and never call the deleter. */
static void test_import_versioned_refusals(void **state) {
  (void)state;
  deleted = 0;
  uint64_t arrays0 = arrays_now(g_ctx);
  static const struct { uint32_t major, minor; } versions[] = {{0, 0}, {0, 8}, {2, 0}, {2, 3}, {1000, 1}};
  for (size_t i = 0; i < sizeof versions / sizeof versions[0]; i++) {
    dv_dlpack_versioned t = good_tensor();
    t.version.major = versions[i].major;
    t.version.minor = versions[i].minor;
    t.dl_tensor.ndim = -5; /* nothing past the version is read */
    dv_array *a = (dv_array *)1;
    assert_status(dv_array_from_dlpack_versioned(g_ctx, &t, 0, &a), DV_ERR_NOT_SUPPORTED);
    assert_null(a);
    char theirs[32];
    snprintf(theirs, sizeof theirs, "DLPack %u.%u", versions[i].major, versions[i].minor);
    if (!strstr(dv_last_error(), theirs) || !strstr(dv_last_error(), "1.x"))
      fail_msg("version %u.%u: the message names not both versions: %s", versions[i].major,
               versions[i].minor, dv_last_error());
  }
  dv_dlpack_versioned t = good_tensor();
  t.flags = DV_DLPACK_FLAG_READ_ONLY | DV_DLPACK_FLAG_IS_COPIED;
  dv_array *a = (dv_array *)1;
  assert_status(dv_array_from_dlpack_versioned(g_ctx, &t, 0, &a), DV_ERR_INVALID_ARGUMENT);
  assert_null(a);
  assert_non_null(strstr(dv_last_error(), "read-only"));
  /* import flags other than DV_DLPACK_IMPORT_READ_ONLY */
  t = good_tensor();
  a = (dv_array *)1;
  assert_status(dv_array_from_dlpack_versioned(g_ctx, &t, 2, &a), DV_ERR_INVALID_ARGUMENT);
  assert_null(a);
  a = (dv_array *)1;
  assert_status(dv_array_from_dlpack_versioned(g_ctx, &t, DV_DLPACK_IMPORT_READ_ONLY | 0x100u, &a),
                DV_ERR_INVALID_ARGUMENT);
  assert_null(a);
  /* the field checks of the 0.x import, through the versioned reader */
  struct { const char *what; dv_status want; } cases[] = {
      {"ndim 33", DV_ERR_BAD_SHAPE},       {"negative extent", DV_ERR_BAD_SHAPE},
      {"lanes 2", DV_ERR_BAD_DTYPE},       {"bfloat16", DV_ERR_BAD_DTYPE},
      {"Vulkan", DV_ERR_BACKEND_MISMATCH}, {"NULL data", DV_ERR_NULL_ARGUMENT},
      {"misaligned", DV_ERR_BAD_STRIDES},  {"stride overflow", DV_ERR_OVERFLOW},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    t = good_tensor();
    DLTensor *x = &t.dl_tensor;
    switch (k) {
      case 0: x->ndim = DV_MAXDIMS + 1; break;
      case 1: t_shape[1] = -1; break;
      case 2: x->dtype.lanes = 2; break;
      case 3: x->dtype.code = kDLBfloat, x->dtype.bits = 16; break;
      case 4: x->device.device_type = kDLVulkan; break;
      case 5: x->data = NULL; break;
      case 6: x->byte_offset = 2; break;
      default: t_strides[0] = INT64_MAX / 2; break;
    }
    a = (dv_array *)1;
    dv_status rc = dv_array_from_dlpack_versioned(g_ctx, &t, 0, &a);
    if (rc != cases[k].want)
      fail_msg("%s: %s (%s), expected %s", cases[k].what, dv_status_name(rc), dv_last_error(),
               dv_status_name(cases[k].want));
    assert_true(dv_last_error()[0] != 0);
    assert_null(a);
  }
  t = good_tensor();
  a = (dv_array *)1;
  assert_status(dv_array_from_dlpack_versioned(NULL, &t, 0, &a), DV_ERR_NULL_ARGUMENT);
  assert_null(a);
  assert_status(dv_array_from_dlpack_versioned(g_ctx, NULL, 0, &a), DV_ERR_NULL_ARGUMENT);
  assert_status(dv_array_from_dlpack_versioned(g_ctx, &t, 0, NULL), DV_ERR_NULL_ARGUMENT);
  assert_ok(dv_context_flush_deallocs(g_ctx));
  assert_int_equal(deleted, 0); /* a refused tensor stays the caller's */
  assert_int_equal(arrays_now(g_ctx), arrays0);
}

/* ---- failing host allocations ----------------------------------------------------- */

/* Each host allocation of both exports and of the versioned import failing
 * in turn (the k-th, for k from 1 until none is left) gives
 * DV_ERR_HOST_OUT_OF_MEMORY with a message, *out NULL and the deleter not
 * called; a success works; nothing leaks. */
static void test_fault_sweep(void **state) {
  (void)state;
  for (int op = 0; op < 3; op++) {
    int failures = 0;
    for (uint64_t k = 1; k < 64; k++) {
      dv_array *a = dev_iota(2, 4);
      for (int i = 0; i < 64; i++) mem[i] = (float)i;
      uint64_t arrays0 = arrays_now(g_ctx);
      deleted = 0;
      dv_dlpack_versioned src = good_tensor();
      assert_ok(dv_fault_inject(NULL, DV_FAULT_HOST_ALLOC, k));
      dv_status rc;
      void *out = (void *)1;
      if (op == 0) rc = dv_array_to_dlpack_versioned(a, NULL, NULL, DV_DLPACK_FLAG_READ_ONLY,
                                                     (dv_dlpack_versioned **)&out);
      else if (op == 1) rc = dv_array_to_dlpack(a, NULL, NULL, (DLManagedTensor **)&out);
      else rc = dv_array_from_dlpack_versioned(g_ctx, &src, 0, (dv_array **)&out);
      bool fired = !dv_fault_pending(NULL, DV_FAULT_HOST_ALLOC);
      assert_ok(dv_fault_inject(NULL, DV_FAULT_HOST_ALLOC, 0));
      if (rc) {
        failures++;
        assert_true(fired);
        if (rc != DV_ERR_HOST_OUT_OF_MEMORY)
          fail_msg("op %d, allocation %llu: %s (%s), expected DV_ERR_HOST_OUT_OF_MEMORY", op,
                   (unsigned long long)k, dv_status_name(rc), dv_last_error());
        assert_true(dv_last_error()[0] != 0);
        assert_null(out);
        assert_int_equal(arrays_now(g_ctx), arrays0);
      } else if (op == 0) {
        dv_dlpack_versioned *t = out;
        assert_true(t->flags == DV_DLPACK_FLAG_READ_ONLY);
        t->deleter(t);
      } else if (op == 1) {
        DLManagedTensor *t = out;
        t->deleter(t);
      } else {
        dv_array *b = out;
        int64_t ix[2] = {3, 7};
        float got = 0;
        assert_ok(dv_array_get_item(b, ix, &got, sizeof got, NULL));
        assert_true(got == 31.0f);
        dv_array_release(b);
      }
      dv_array_release(a);
      assert_ok(dv_context_flush_deallocs(g_ctx));
      assert_int_equal(deleted, rc || op != 2 ? 0 : 1);
      if (!fired) break; /* past the call's last host allocation */
      assert_true(k < 63);
    }
    if (failures == 0) fail_msg("op %d: no host allocation failed (the sweep saw none)", op);
  }
}

static const struct CMUnitTest tests[] = {
    T(test_export_versioned),          T(test_export_versioned_refusals),
    T(test_round_trip_versioned),      T(test_import_versions_and_flags),
    T(test_import_versioned_refusals), T(test_fault_sweep),
};
TEST_MAIN("dlpack_versioned", tests)
#endif
