/* Native handles and wrapped memory: refusals that must change nothing (a
 * dead mapped view has no native memory; offsets and sizes beyond int64_t
 * are an overflow, not a misalignment). */
#include "common.h"

static int released;
static void on_release(void *user) { (void)user, released++; }

/* A device view of a mapped scope that has ended has no memory left:
 * dv_array_native refuses it and clears its outputs. */
static void test_native_of_dead_mapped_view(void **state) {
  (void)state;
  int32_t buf[16] = {0};
  int64_t n = 16;
  dv_array *h = NULL, *dv[1] = {NULL};
  assert_ok(dv_host_array_wrap(g_ctx, buf, 1, &n, dv_dtype_get(DV_INT32), NULL, &h));
  dv_scope *sc = NULL;
  dv_status rc = dv_mapped_scope_begin(g_ctx, 1, &h, dv, &sc);
  if (rc == DV_ERR_NOT_SUPPORTED) {
    dv_array_release(h);
    skip();
  }
  assert_ok(rc);
  void *nat = NULL;
  size_t off = 0;
  assert_ok(dv_array_native(dv[0], &nat, &off));
  assert_non_null(nat);
  assert_ok(dv_scope_end(sc));
  nat = (void *)1, off = 7;
  assert_status(dv_array_native(dv[0], &nat, &off), DV_ERR_INVALID_ARGUMENT);
  assert_null(nat);
  assert_int_equal(off, 0);
  dv_array_release(dv[0]);
  dv_array_release(h);
}

/* offset or bytes above INT64_MAX: DV_ERR_OVERFLOW, nothing made, the
 * owner's release never called. */
static void test_wrap_overflow(void **state) {
  (void)state;
  static double mem[8];
  int64_t n = 2;
  const dv_dtype *f8 = dv_dtype_get(DV_FLOAT64);
  dv_array *w = (dv_array *)1;
  released = 0;
  size_t big = (size_t)INT64_MAX + 1u; /* aligned to 8: not a misalignment */
  assert_status(dv_device_array_wrap(g_ctx, mem, big, sizeof mem, 1, &n, f8, NULL, on_release,
                                     NULL, &w),
                DV_ERR_OVERFLOW);
  assert_null(w);
  w = (dv_array *)1;
  assert_status(dv_device_array_wrap(g_ctx, mem, 0, SIZE_MAX, 1, &n, f8, NULL, on_release, NULL, &w),
                DV_ERR_OVERFLOW);
  assert_null(w);
  /* A misaligned offset is still reported as such. */
  assert_status(dv_device_array_wrap(g_ctx, mem, 4, sizeof mem, 1, &n, f8, NULL, on_release, NULL, &w),
                DV_ERR_BAD_STRIDES);
  assert_ok(dv_context_flush_deallocs(g_ctx));
  assert_int_equal(released, 0);
}

static const struct CMUnitTest tests[] = {T(test_native_of_dead_mapped_view), T(test_wrap_overflow)};
TEST_MAIN("foreign", tests)
