/* Pinned, mapped and registered host memory, and their scopes. */
#include "common.h"

static void test_pinned_array(void **state) {
  (void)state;
  int64_t shape[2] = {8, 8};
  dv_array *p, *d, *back;
  assert_ok(dv_pinned_array(g_ctx, 2, shape, dv_dtype_get(DV_INT32), NULL, 'C', &p));
  assert_int_equal(dv_array_memory(p), DV_MEM_PINNED);
  assert_true(dv_array_is_pinned(p));
  int32_t *h;
  assert_ok(dv_array_host_data(p, (void **)&h));
  for (int i = 0; i < 64; i++) h[i] = i * 3;
  assert_ok(dv_to_device(g_ctx, p, NULL, 1, NULL, &d));
  for (int i = 0; i < 64; i++) h[i] = 0;
  assert_ok(dv_copy_to_host(d, p, NULL, &back));
  assert_ptr_equal(back, p);
  for (int i = 0; i < 64; i++) assert_int_equal(h[i], i * 3);
  dv_stats st = {.size = sizeof st};
  assert_ok(dv_context_stats(g_ctx, &st));
  assert_int_equal(st.pinned.current, 256);
  dv_array_release(back), dv_array_release(d), dv_array_release(p);
  assert_ok(dv_context_flush_deallocs(g_ctx));
  assert_ok(dv_context_stats(g_ctx, &st));
  assert_int_equal(st.pinned.current, 0);
}

static void test_mapped_array(void **state) {
  (void)state;
  dv_device_info info;
  assert_ok(dv_context_device_info(g_ctx, &info));
  int64_t n = 32;
  dv_array *m, *dv[1], *out;
  dv_status rc = dv_mapped_array(g_ctx, 1, &n, dv_dtype_get(DV_FLOAT32), NULL, 'C',
                                 DV_MAPPED_PORTABLE | DV_MAPPED_WRITECOMBINED, &m);
  if (!info.can_map_host_memory) {
    assert_int_equal(rc, DV_ERR_NOT_SUPPORTED);
    return;
  }
  assert_ok(rc);
  assert_status(dv_mapped_array(g_ctx, 1, &n, dv_dtype_get(DV_FLOAT32), NULL, 'C', 0x80, &out),
                DV_ERR_INVALID_ARGUMENT);
  float *h;
  assert_ok(dv_array_host_data(m, (void **)&h));
  for (int i = 0; i < 32; i++) h[i] = (float)i / 2;
  dv_scope *sc;
  assert_ok(dv_mapped_scope_begin(g_ctx, 1, &m, dv, &sc));
  assert_int_equal(dv_array_memory(dv[0]), DV_MEM_DEVICE);
  assert_ok(dv_copy_to_host(dv[0], NULL, NULL, &out));
  float *o;
  assert_ok(dv_array_host_data(out, (void **)&o));
  for (int i = 0; i < 32; i++) assert_true(o[i] == (float)i / 2);
  dv_array_release(dv[0]);
  assert_ok(dv_scope_end(sc));
  dv_array_release(out), dv_array_release(m);
}

static void test_pinned_scope(void **state) {
  (void)state;
  double buf[100];
  int64_t n = 100;
  dv_array *h, *dev;
  assert_ok(dv_host_array_wrap(g_ctx, buf, 1, &n, dv_dtype_get(DV_FLOAT64), NULL, &h));
  assert_false(dv_array_is_pinned(h));
  assert_ok(dv_defer_cleanup_begin(g_ctx));
  dv_scope *sc;
  assert_ok(dv_pinned_scope_begin(g_ctx, 1, &h, &sc));
  assert_true(dv_array_is_pinned(h));
  dv_stats st = {.size = sizeof st};
  assert_ok(dv_context_stats(g_ctx, &st));
  assert_int_equal(st.registered.current, 800);
  assert_ok(dv_scope_end(sc));
  /* unregistered at once, even inside defer_cleanup */
  assert_false(dv_array_is_pinned(h));
  assert_ok(dv_context_stats(g_ctx, &st));
  assert_int_equal(st.registered.current, 0);
  assert_ok(dv_defer_cleanup_end(g_ctx));
  /* a device array cannot be pinned; nothing stays registered */
  assert_ok(dv_device_array(g_ctx, 1, &n, dv_dtype_get(DV_FLOAT64), NULL, 'C', NULL, &dev));
  dv_array *both[2] = {h, dev};
  sc = (dv_scope *)1;
  assert_status(dv_pinned_scope_begin(g_ctx, 2, both, &sc), DV_ERR_INVALID_ARGUMENT);
  assert_null(sc);
  assert_false(dv_array_is_pinned(h));
  dv_array *withnull[2] = {h, NULL};
  assert_status(dv_pinned_scope_begin(g_ctx, 2, withnull, &sc), DV_ERR_NULL_ARGUMENT);
  assert_ok(dv_scope_end(NULL));
  dv_array_release(dev), dv_array_release(h);
}

static void test_mapped_scope_on_wrapped(void **state) {
  (void)state;
  int32_t buf[16];
  for (int i = 0; i < 16; i++) buf[i] = i + 100;
  int64_t n = 16;
  dv_array *h, *dv[1] = {NULL}, *out;
  assert_ok(dv_host_array_wrap(g_ctx, buf, 1, &n, dv_dtype_get(DV_INT32), NULL, &h));
  dv_scope *sc;
  dv_status rc = dv_mapped_scope_begin(g_ctx, 1, &h, dv, &sc);
  if (rc == DV_ERR_NOT_SUPPORTED) {
    dv_array_release(h);
    skip();
  }
  assert_ok(rc);
  buf[3] = -7; /* a host write is seen through the device view */
  assert_ok(dv_copy_to_host(dv[0], NULL, NULL, &out));
  int32_t *o;
  assert_ok(dv_array_host_data(out, (void **)&o));
  assert_int_equal(o[3], -7);
  assert_int_equal(o[15], 115);
  assert_ok(dv_scope_end(sc));
  /* after the scope the device view is dead: an error, not a crash */
  dv_array *again = NULL;
  assert_true(dv_copy_to_host(dv[0], NULL, NULL, &again) != DV_OK);
  assert_null(again);
  dv_array_release(dv[0]), dv_array_release(out), dv_array_release(h);
}

static void test_register(void **state) {
  (void)state;
  char buf[256];
  int64_t n = 256;
  dv_array *h, *d;
  assert_ok(dv_host_array_wrap(g_ctx, buf, 1, &n, dv_dtype_get(DV_UINT8), NULL, &h));
  assert_status(dv_array_deregister(h), DV_ERR_MISUSE);
  assert_ok(dv_array_register(h));
  assert_true(dv_array_is_pinned(h));
  assert_status(dv_array_register(h), DV_ERR_MISUSE);
  assert_ok(dv_array_deregister(h));
  assert_false(dv_array_is_pinned(h));
  /* dv_array_unregister, the successor of the deprecated dv_array_deregister (issue 35). */
  assert_status(dv_array_unregister(h), DV_ERR_MISUSE);
  assert_ok(dv_array_register(h));
  assert_ok(dv_array_unregister(h));
  assert_false(dv_array_is_pinned(h));
  assert_status(dv_array_deregister(h), DV_ERR_MISUSE);
  assert_ok(dv_device_array(g_ctx, 1, &n, dv_dtype_get(DV_UINT8), NULL, 'C', NULL, &d));
  assert_status(dv_array_register(d), DV_ERR_INVALID_ARGUMENT);
  /* registered memory released while registered is unregistered at release */
  assert_ok(dv_array_register(h));
  dv_array_release(h);
  dv_stats st = {.size = sizeof st};
  assert_ok(dv_context_stats(g_ctx, &st));
  assert_int_equal(st.registered.current, 0);
  dv_array_release(d);
}

static void test_managed(void **state) {
  (void)state;
  dv_device_info di;
  assert_ok(dv_context_device_info(g_ctx, &di));
  int64_t n = 256;
  dv_array *m = (dv_array *)1, *d;
  dv_status rc = dv_managed_array(g_ctx, 1, &n, dv_dtype_get(DV_INT32), NULL, 'C', 1, &m);
  if (!di.managed_memory) {
    assert_int_equal(rc, DV_ERR_NOT_SUPPORTED);
    assert_null(m);
    return;
  }
  assert_ok(rc);
  assert_int_equal(dv_array_memory(m), DV_MEM_MANAGED);
  int32_t *p;
  assert_ok(dv_array_host_data(m, (void **)&p));
  for (int i = 0; i < 256; i++) p[i] = i * 5;
  assert_ok(dv_to_device(g_ctx, m, NULL, 1, NULL, &d)); /* managed memory is device memory: returned as is */
  assert_ptr_equal(d, m);
  dv_array *copy;
  assert_ok(dv_array_copy_new(m, 'C', NULL, &copy));
  assert_ok(dv_array_memset(m, 0, NULL));
  assert_ok(dv_context_synchronize(g_ctx)); /* before the host reads */
  assert_int_equal(p[255], 0);
  assert_ok(dv_copy_to_device(m, copy, NULL));
  assert_ok(dv_context_synchronize(g_ctx));
  assert_int_equal(p[255], 255 * 5);
  dv_stats st = {.size = sizeof st};
  assert_ok(dv_context_stats(g_ctx, &st));
  assert_int_equal(st.managed.current, 1024);
  dv_array_release(copy), dv_array_release(d), dv_array_release(m);
}

static void test_builtin_streams(void **state) {
  (void)state;
  dv_stream *leg = dv_context_legacy_stream(g_ctx), *pts = dv_context_per_thread_stream(g_ctx);
  assert_non_null(leg);
  assert_non_null(pts);
  int64_t n = 1000;
  float *h = malloc(4000), *o = malloc(4000);
  for (int i = 0; i < 1000; i++) h[i] = (float)i, o[i] = 0;
  dv_array *hh, *ho, *d;
  assert_ok(dv_host_array_wrap(g_ctx, h, 1, &n, dv_dtype_get(DV_FLOAT32), NULL, &hh));
  assert_ok(dv_host_array_wrap(g_ctx, o, 1, &n, dv_dtype_get(DV_FLOAT32), NULL, &ho));
  assert_ok(dv_to_device(g_ctx, hh, leg, 1, NULL, &d));
  assert_ok(dv_stream_synchronize(leg));
  assert_ok(dv_copy_to_host(d, ho, pts, NULL));
  assert_ok(dv_stream_synchronize(pts));
  assert_memory_equal(h, o, 4000);
  dv_stream_release(leg); /* borrowed: a no-op */
  dv_stream_release(pts);
  dv_array_release(hh), dv_array_release(ho), dv_array_release(d);
  free(h), free(o);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {T(test_managed), T(test_builtin_streams), T(test_pinned_array), T(test_mapped_array), T(test_pinned_scope),
                                     T(test_mapped_scope_on_wrapped), T(test_register)};
  return test_main(argc, argv, "hostmem", tests, sizeof tests / sizeof tests[0]);
}
