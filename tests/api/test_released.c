/* Handles used after release (issue 37, item 3): in checked mode a released
 * array, stream, event, module or context passed to a function is
 * DV_ERR_MISUSE naming the function and the handle's kind, and a second
 * release is reported (dv_last_error) and changes nothing; in fast mode the
 * cases whose memory is still held (a view keeps an array's record, an array
 * keeps its stream, a defer_cleanup scope keeps everything) are caught the
 * same way.  Never a crash: the suite runs under ASan+UBSan+LeakSanitizer. */
#include "common.h"

static char g_cache_dir[256];

static void contains(const char *needle) {
  if (!strstr(dv_last_error(), needle)) fail_msg("expected \"%s\" in: %s", needle, dv_last_error());
}
/* The message names the function and says the kind was released. */
static void released(const char *fn, const char *kind) {
  contains(fn);
  char want[64];
  snprintf(want, sizeof want, "%s was released", kind);
  contains(want);
}
static void clear_error(void) { (void)dv_status_name(DV_OK); }

static dv_context *ctx_mode(const char *mode) {
  return test_context_or_fail(mode, NULL);
}

static dv_array *dev_f32(dv_context *c, int64_t n, dv_stream *s) {
  dv_array *a = NULL;
  assert_ok(dv_device_array(c, 1, &n, dv_dtype_get(DV_FLOAT32), NULL, 'C', s, &a));
  return a;
}

static const dv_launch_config one = {{1, 1, 1}, {1, 1, 1}, 0, NULL};
static const char *src_fill =
    "DV_KERNEL(fill, DV_ARRAY(float, y), float v) {\n"
    "  DV_BIND(float, y);\n"
    "  y[0] = v;\n"
    "}\n";

/* ---- checked mode: every kind ---------------------------------------------------- */

/* Checked mode: a released array passed to a copy, a memset, a slice or an accessor is
 * DV_ERR_MISUSE naming the function and "array"; a second release is reported. */
static void test_array_checked(void **state) {
  (void)state;
  dv_context *c = ctx_mode("host_mode=checked");
  dv_array *a = dev_f32(c, 8, NULL);
  dv_array_release(a);
  assert_status(dv_array_memset(a, 0, NULL), DV_ERR_MISUSE);
  released("dv_array_memset", "array");
  dv_array *out = (dv_array *)1;
  assert_status(dv_copy_to_host(a, NULL, NULL, &out), DV_ERR_MISUSE);
  released("dv_copy_to_host", "array");
  assert_null(out);
  dv_array *b = dev_f32(c, 8, NULL);
  assert_status(dv_array_copy(b, a, NULL), DV_ERR_MISUSE);
  released("dv_array_copy", "array");
  dv_index ix = {.kind = DV_IDX_SLICE, .start = 0, .stop = 4, .step = 1};
  out = (dv_array *)1;
  assert_status(dv_array_slice(a, 1, &ix, &out), DV_ERR_MISUSE);
  released("dv_array_slice", "array");
  assert_null(out);
  /* accessors that cannot fail answer as for NULL, with the message set */
  assert_int_equal(dv_array_ndim(a), 0);
  released("dv_array_ndim", "array");
  assert_int_equal(dv_array_size(a), 0);
  assert_null(dv_array_retain(a));
  released("dv_array_retain", "array");
  /* a double release is reported and changes nothing */
  dv_array_release(a);
  released("dv_array_release", "array");
  dv_array_release(b);
  assert_ok(dv_context_destroy(c));
}

/* Checked mode: a released stream (its memory freed by the flush, but quarantined) is
 * DV_ERR_MISUSE in synchronize, query, a copy or an allocation on it; a second release is reported. */
static void test_stream_checked(void **state) {
  (void)state;
  dv_context *c = ctx_mode("host_mode=checked");
  dv_stream *s = NULL;
  assert_ok(dv_stream_create(c, 0, &s));
  dv_stream_release(s);
  assert_ok(dv_context_flush_deallocs(c)); /* its memory would be gone now */
  assert_status(dv_stream_synchronize(s), DV_ERR_MISUSE);
  released("dv_stream_synchronize", "stream");
  assert_status(dv_stream_query(s), DV_ERR_MISUSE);
  released("dv_stream_query", "stream");
  dv_array *a = dev_f32(c, 4, NULL);
  assert_status(dv_array_memset(a, 0, s), DV_ERR_MISUSE);
  released("dv_array_memset", "stream");
  dv_array *out = (dv_array *)1;
  assert_status(dv_device_array(c, 1, (int64_t[]){4}, dv_dtype_get(DV_FLOAT32), NULL, 'C', s, &out),
                DV_ERR_MISUSE);
  released("stream", "stream");
  assert_null(out);
  assert_null(dv_stream_retain(s));
  released("dv_stream_retain", "stream");
  dv_stream_release(s);
  released("dv_stream_release", "stream");
  dv_array_release(a);
  assert_ok(dv_context_destroy(c));
}

/* Checked mode: a released event is DV_ERR_MISUSE in record, query, synchronize, a stream's
 * wait and elapsed time; a second release is reported. */
static void test_event_checked(void **state) {
  (void)state;
  dv_context *c = ctx_mode("host_mode=checked");
  dv_event *e = NULL, *f = NULL;
  assert_ok(dv_event_create(c, DV_EVENT_TIMING, &e));
  assert_ok(dv_event_create(c, DV_EVENT_TIMING, &f));
  dv_event_release(e);
  assert_ok(dv_context_flush_deallocs(c));
  assert_status(dv_event_record(e, NULL), DV_ERR_MISUSE);
  released("dv_event_record", "event");
  assert_status(dv_event_query(e), DV_ERR_MISUSE);
  released("dv_event_query", "event");
  assert_status(dv_event_synchronize(e), DV_ERR_MISUSE);
  released("dv_event_synchronize", "event");
  assert_status(dv_stream_wait_event(dv_context_default_stream(c), e), DV_ERR_MISUSE);
  released("dv_stream_wait_event", "event");
  float ms = 1;
  assert_status(dv_event_elapsed_ms(f, e, &ms), DV_ERR_MISUSE);
  released("dv_event_elapsed_ms", "event");
  assert_null(dv_event_retain(e));
  dv_event_release(e);
  released("dv_event_release", "event");
  dv_event_release(f);
  assert_ok(dv_context_destroy(c));
}

/* Checked mode: a released module is DV_ERR_MISUSE in dv_module_kernel and retain, its
 * kernels are caught as before, a released array as a launch argument is DV_ERR_MISUSE. */
static void test_module_checked(void **state) {
  (void)state;
  dv_context *c = ctx_mode("host_mode=checked");
  dv_module *m = test_build(c, "fill.dvk", src_fill, NULL, NULL);
  dv_kernel *k = test_kernel(m, "fill");
  dv_array *y = dev_f32(c, 1, NULL);
  dv_arg args[] = {DV_ARG_ARRAY(y), DV_ARG_F32(2.0f)};
  assert_ok(dv_kernel_launch(k, &one, 2, args));
  dv_module_release(m);
  assert_ok(dv_context_flush_deallocs(c));
  dv_kernel *k2 = (dv_kernel *)1;
  assert_status(dv_module_kernel(m, "fill", &k2), DV_ERR_MISUSE);
  released("dv_module_kernel", "module");
  assert_null(k2);
  assert_null(dv_module_retain(m));
  released("dv_module_retain", "module");
  /* its kernel is caught as before (kernel handles: dv_kernel_retain) */
  assert_status(dv_kernel_launch(k, &one, 2, args), DV_ERR_MISUSE);
  dv_module_release(m);
  released("dv_module_release", "module");
  /* a released array as a launch argument */
  dv_module *m2 = test_build(c, "fill.dvk", src_fill, NULL, NULL);
  dv_kernel *k3 = test_kernel(m2, "fill");
  dv_array_release(y);
  assert_status(dv_kernel_launch(k3, &one, 2, args), DV_ERR_MISUSE);
  contains("dv_kernel_launch");
  contains("array was released");
  /* a kernel release with no hold left is reported too (unchanged) */
  dv_module_release(m2);
  assert_ok(dv_context_destroy(c));
}

/* Checked mode: a destroyed context is DV_ERR_MISUSE in a second destroy and every call
 * taking it; the accessors that cannot fail answer as for NULL. */
static void test_context_checked(void **state) {
  (void)state;
  dv_context *c = ctx_mode("host_mode=checked");
  assert_ok(dv_context_destroy(c));
  assert_status(dv_context_destroy(c), DV_ERR_MISUSE);
  released("dv_context_destroy", "context");
  assert_status(dv_context_synchronize(c), DV_ERR_MISUSE);
  released("dv_context_synchronize", "context");
  dv_stream *s = (dv_stream *)1;
  assert_status(dv_stream_create(c, 0, &s), DV_ERR_MISUSE);
  released("dv_stream_create", "context");
  assert_null(s);
  dv_array *a = (dv_array *)1;
  assert_status(dv_device_array(c, 1, (int64_t[]){4}, dv_dtype_get(DV_FLOAT32), NULL, 'C', NULL, &a),
                DV_ERR_MISUSE);
  released("context", "context");
  assert_null(a);
  assert_null(dv_context_default_stream(c));
  released("dv_context_default_stream", "context");
  assert_string_equal(dv_context_backend(c), "none");
}

/* A handle of another kind where one is expected is DV_ERR_MISUSE naming both kinds. */
static void test_wrong_kind(void **state) {
  (void)state;
  dv_context *c = ctx_mode("host_mode=checked");
  dv_event *e = NULL;
  assert_ok(dv_event_create(c, 0, &e));
  assert_status(dv_stream_synchronize((dv_stream *)(void *)e), DV_ERR_MISUSE);
  contains("dv_stream_synchronize: not a stream (a event handle)");
  dv_event_release(e);
  assert_ok(dv_context_destroy(c));
}

/* ---- fast mode: what is caught ------------------------------------------------------ */

/* Fast mode: what is caught — an array a view keeps, a stream an array keeps, and every
 * kind inside a defer_cleanup scope. */
static void test_fast_mode(void **state) {
  (void)state;
  dv_context *c = ctx_mode("host_mode=fast");
  /* An array whose record a view still holds. */
  dv_array *a = dev_f32(c, 8, NULL), *v = NULL;
  dv_index ix = {.kind = DV_IDX_SLICE, .start = 0, .stop = 4, .step = 1};
  assert_ok(dv_array_slice(a, 1, &ix, &v));
  dv_array_release(a);
  assert_status(dv_array_memset(a, 0, NULL), DV_ERR_MISUSE);
  released("dv_array_memset", "array");
  dv_array_release(a);
  released("dv_array_release", "array");
  /* A stream an array allocated on it still holds. */
  dv_stream *s = NULL;
  assert_ok(dv_stream_create(c, 0, &s));
  dv_array *b = dev_f32(c, 8, s);
  dv_stream_release(s);
  assert_status(dv_stream_synchronize(s), DV_ERR_MISUSE);
  released("dv_stream_synchronize", "stream");
  assert_status(dv_array_memset(v, 0, s), DV_ERR_MISUSE);
  released("dv_array_memset", "stream");
  dv_stream_release(s);
  released("dv_stream_release", "stream");
  dv_array_release(b);
  /* Inside a defer_cleanup scope nothing released is freed: every kind. */
  assert_ok(dv_defer_cleanup_begin(c));
  dv_event *e = NULL;
  assert_ok(dv_event_create(c, 0, &e));
  dv_event_release(e);
  assert_status(dv_event_record(e, NULL), DV_ERR_MISUSE);
  released("dv_event_record", "event");
  dv_event_release(e);
  released("dv_event_release", "event");
  dv_stream *s2 = NULL;
  assert_ok(dv_stream_create(c, 0, &s2));
  dv_stream_release(s2);
  assert_status(dv_stream_query(s2), DV_ERR_MISUSE);
  dv_stream_release(s2);
  released("dv_stream_release", "stream");
  dv_module *m = test_build(c, "fill.dvk", src_fill, NULL, NULL);
  dv_module_release(m);
  dv_kernel *k = (dv_kernel *)1;
  assert_status(dv_module_kernel(m, "fill", &k), DV_ERR_MISUSE);
  released("dv_module_kernel", "module");
  dv_module_release(m);
  released("dv_module_release", "module");
  assert_ok(dv_defer_cleanup_end(c));
  dv_array_release(v);
  clear_error();
  assert_ok(dv_context_destroy(c));
}

/* The quarantine is bounded: many released handles in checked mode stay
 * within it (the oldest are freed) and nothing leaks at exit. */
static void test_quarantine_bounded(void **state) {
  (void)state;
  dv_context *c = ctx_mode("host_mode=checked");
  for (int i = 0; i < 5000; i++) {
    dv_array *a = dev_f32(c, 1, NULL);
    dv_array_release(a);
  }
  dv_array *last = dev_f32(c, 1, NULL);
  dv_array_release(last);
  assert_ok(dv_context_flush_deallocs(c));
  assert_status(dv_array_memset(last, 0, NULL), DV_ERR_MISUSE);
  assert_ok(dv_context_destroy(c));
}

int main(int argc, char **argv) {
  int begin = kernel_suite_begin(argc, argv, "released", NULL, g_cache_dir, sizeof g_cache_dir);
  if (begin) return begin;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_array_checked),  cmocka_unit_test(test_stream_checked),
      cmocka_unit_test(test_event_checked),  cmocka_unit_test(test_module_checked),
      cmocka_unit_test(test_context_checked), cmocka_unit_test(test_wrong_kind),
      cmocka_unit_test(test_fast_mode),      cmocka_unit_test(test_quarantine_bounded),
  };
  return kernel_suite_end(g_cache_dir, test_main(argc, argv, "released", tests, sizeof tests / sizeof tests[0]));
}
