/* The per-call fast paths of issue 13 on the host simulator (white-box where
 * the property is internal): synchronous copies that wake no thread,
 * descriptors sized by their ndim, and the planner's device-packing
 * temporary, which must not flush-and-retry nor leave an error message
 * behind when it falls back. */
#include <sys/resource.h>

#include "common.h"
#include "array/array.h"

static dv_context *host_ctx(const char *strided) {
  dv_config *cfg;
  dv_context *c = NULL;
  assert_ok(dv_config_create(&cfg));
  assert_ok(dv_config_set(cfg, "backend", "host"));
  assert_ok(dv_config_set(cfg, "host_strided", strided));
  assert_ok(dv_context_create(cfg, &c));
  dv_config_destroy(cfg);
  return c;
}

static long voluntary_switches(void) {
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return u.ru_nvcsw;
}

/* A synchronous copy on an idle stream runs on the caller's thread; the
 * stream's worker must stay asleep (it used to be signalled per call, and
 * each wake-up is a voluntary context switch when it sleeps again). */
static void test_sync_copies_wake_no_thread(void **state) {
  (void)state;
  enum { N = 2000, BYTES = 4096 };
  int64_t n = BYTES;
  unsigned char *h = malloc(BYTES), *back = malloc(BYTES);
  assert_non_null(h), assert_non_null(back);
  dv_array *d, *hs, *hb;
  assert_ok(dv_device_array(g_ctx, 1, &n, dv_dtype_get(DV_UINT8), NULL, 'C', NULL, &d));
  assert_ok(dv_host_array_wrap(g_ctx, h, 1, &n, dv_dtype_get(DV_UINT8), NULL, &hs));
  assert_ok(dv_host_array_wrap(g_ctx, back, 1, &n, dv_dtype_get(DV_UINT8), NULL, &hb));
  assert_ok(dv_copy_to_device(d, hs, NULL)); /* warm */
  long before = voluntary_switches();
  for (int i = 0; i < N; i++) {
    h[i % BYTES] = (unsigned char)i;
    assert_ok(dv_copy_to_device(d, hs, NULL));
  }
  long woken = voluntary_switches() - before;
  assert_ok(dv_copy_to_host(d, hb, NULL, NULL));
  assert_memory_equal(h, back, BYTES);
  /* Not one per copy: a few may come from the rest of the machine. */
  if (woken > N / 10) fail_msg("%ld voluntary context switches over %d synchronous copies", woken, N);
  dv_array_release(d), dv_array_release(hs), dv_array_release(hb);
  free(h), free(back);
}

/* Descriptors carry shape and strides in their own tail: 48 + 16 * ndim
 * bytes, at most 128 up to ndim 4, and any ndim up to DV_MAXDIMS works. */
static void test_descriptor_sized_by_ndim(void **state) {
  (void)state;
  assert_true(sizeof(struct dv_array) + 2 * 4 * sizeof(int64_t) <= 128);
  int64_t shape[DV_MAXDIMS];
  for (int i = 0; i < DV_MAXDIMS; i++) shape[i] = i < 3 ? 2 : 1;
  int dims[] = {0, 1, 4, DV_MAXDIMS};
  for (size_t k = 0; k < sizeof dims / sizeof *dims; k++) {
    int nd = dims[k];
    dv_array *a, *t;
    assert_ok(dv_device_array(g_ctx, nd, shape, dv_dtype_get(DV_INT32), NULL, 'C', NULL, &a));
    assert_int_equal(dv_array_ndim(a), nd);
    assert_ptr_equal(a->shape, a->dims_);
    assert_ptr_equal(a->strides, a->dims_ + nd);
    for (int i = 0; i < nd; i++) assert_int_equal(dv_array_shape(a)[i], shape[i]);
    assert_int_equal(dv_array_size(a), nd >= 3 ? 8 : nd == 1 ? 2 : 1);
    /* a view made from it (reshaped to its own shape) describes the same */
    assert_ok(dv_array_reshape(a, nd, shape, 'C', DV_VIEW_ONLY, NULL, &t));
    for (int i = 0; i < nd; i++) assert_int_equal(dv_array_strides(t)[i], dv_array_strides(a)[i]);
    dv_array_release(t), dv_array_release(a);
  }
}

/* A device view of more than three levels, copied to the host without the
 * simulator's strided copies, is packed on the device through a
 * temporary.  When that temporary cannot be had the copy falls back to
 * rows: it must succeed, without a flush-and-retry (counted in
 * oom_retries) and with the caller's last error message untouched. */
static void test_packing_temporary_falls_back_quietly(void **state) {
  (void)state;
  dv_context *c = host_ctx("off");
  int64_t shape[4] = {4, 4, 4, 4}, n = 256, sub[4] = {2, 2, 2, 2};
  int32_t src[256], out[16];
  for (int i = 0; i < 256; i++) src[i] = i;
  dv_array *d, *hs, *ho, *v;
  assert_ok(dv_device_array(c, 4, shape, dv_dtype_get(DV_INT32), NULL, 'C', NULL, &d));
  assert_ok(dv_host_array_wrap(c, src, 1, &n, dv_dtype_get(DV_INT32), NULL, &hs));
  dv_array *flat;
  assert_ok(dv_array_reshape(d, 1, &n, 'C', DV_VIEW_ONLY, NULL, &flat));
  assert_ok(dv_copy_to_device(flat, hs, NULL));
  dv_index every2[4] = {DV_SLICE(0, 4, 2), DV_SLICE(0, 4, 2), DV_SLICE(0, 4, 2), DV_SLICE(0, 4, 2)};
  assert_ok(dv_array_slice(d, 4, every2, &v));
  assert_ok(dv_host_array_wrap(c, out, 4, sub, dv_dtype_get(DV_INT32), NULL, &ho));
  dv_stats st0 = {.size = sizeof st0}, st1 = {.size = sizeof st1};
  assert_ok(dv_context_stats(c, &st0));
  assert_ok(dv_fault_inject(c, DV_FAULT_DEVICE_ALLOC, 1)); /* the temporary's allocation */
  assert_status(dv_array_copy(NULL, v, NULL), DV_ERR_NULL_ARGUMENT);
  char msg[256];
  snprintf(msg, sizeof msg, "%s", dv_last_error());
  assert_ok(dv_copy_to_host(v, ho, NULL, NULL));
  assert_string_equal(dv_last_error(), msg);
  assert_int_equal(dv_fault_pending(c, DV_FAULT_DEVICE_ALLOC), 0); /* it was tried */
  assert_ok(dv_context_stats(c, &st1));
  assert_int_equal(st1.oom_retries, st0.oom_retries);
  int k = 0;
  for (int a = 0; a < 4; a += 2)
    for (int b = 0; b < 4; b += 2)
      for (int e = 0; e < 4; e += 2)
        for (int f = 0; f < 4; f += 2) assert_int_equal(out[k++], ((a * 4 + b) * 4 + e) * 4 + f);
  dv_array_release(v), dv_array_release(ho), dv_array_release(flat), dv_array_release(hs),
      dv_array_release(d);
  assert_ok(dv_context_destroy(c));
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      T(test_sync_copies_wake_no_thread),
      T(test_descriptor_sized_by_ndim),
      T(test_packing_temporary_falls_back_quietly),
  };
  return test_main(argc, argv, "fastpath", tests, sizeof tests / sizeof tests[0]);
}
