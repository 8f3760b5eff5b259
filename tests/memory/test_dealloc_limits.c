/* The pending-deallocation limits of a live context (issue 25 #9):
 * dv_context_set_dealloc_limits changes the count and ratio limits, the
 * next release that queues a free applies them, bad values are refused and
 * change nothing, other contexts keep their own. */
#include <math.h>

#include "common.h"

static dv_array *dev_bytes(dv_context *ctx, int64_t n) {
  dv_array *a = NULL;
  assert_ok(dv_device_array(ctx, 1, &n, dv_dtype_get(DV_UINT8), NULL, 'C', NULL, &a));
  return a;
}

static size_t queued(dv_context *ctx) {
  size_t n = 99;
  assert_ok(dv_context_pending_deallocs(ctx, &n, NULL));
  return n;
}

static size_t total_memory(dv_context *ctx) {
  size_t t = 0;
  assert_ok(dv_backend_memory_info(ctx, NULL, &t));
  return t;
}

/* The getter says what the options say at creation. */
static void test_limits_start_as_the_options(void **state) {
  (void)state;
  char buf[64];
  size_t count = 0, bytes = 0;
  double ratio = -1;
  assert_ok(dv_context_dealloc_limits(g_ctx, &count, &ratio, &bytes));
  assert_ok(dv_context_option(g_ctx, "max_pending_deallocs_count", buf, sizeof buf, NULL));
  assert_int_equal(count, strtoull(buf, NULL, 10));
  assert_ok(dv_context_option(g_ctx, "max_pending_deallocs_ratio", buf, sizeof buf, NULL));
  assert_true(fabs(ratio - strtod(buf, NULL)) < 1e-12);
  assert_int_equal(bytes, (size_t)((double)total_memory(g_ctx) * ratio));
  /* every pointer may be NULL */
  assert_ok(dv_context_dealloc_limits(g_ctx, NULL, NULL, NULL));
}

/* A lower count limit: nothing is flushed by the call; the next release is. */
static void test_lower_count_flushes_at_next_release(void **state) {
  (void)state;
  assert_ok(dv_context_set_dealloc_limits(g_ctx, 10, 1.0));
  assert_ok(dv_context_flush_deallocs(g_ctx));
  assert_int_equal(queued(g_ctx), 0);
  for (int i = 0; i < 4; i++) dv_array_release(dev_bytes(g_ctx, 64));
  assert_int_equal(queued(g_ctx), 4);
  assert_ok(dv_context_set_dealloc_limits(g_ctx, 2, 1.0));
  assert_int_equal(queued(g_ctx), 4); /* the change alone flushes nothing */
  size_t count = 0;
  assert_ok(dv_context_dealloc_limits(g_ctx, &count, NULL, NULL));
  assert_int_equal(count, 2);
  dv_array_release(dev_bytes(g_ctx, 64));
  assert_int_equal(queued(g_ctx), 0); /* 5 > 2: flushed */
  /* the new limit holds from then on: 2 queue, the third flushes */
  dv_array_release(dev_bytes(g_ctx, 64));
  dv_array_release(dev_bytes(g_ctx, 64));
  assert_int_equal(queued(g_ctx), 2);
  dv_array_release(dev_bytes(g_ctx, 64));
  assert_int_equal(queued(g_ctx), 0);
  /* a higher one lets more queue */
  assert_ok(dv_context_set_dealloc_limits(g_ctx, 5, 1.0));
  for (int i = 0; i < 5; i++) dv_array_release(dev_bytes(g_ctx, 64));
  assert_int_equal(queued(g_ctx), 5);
  dv_array_release(dev_bytes(g_ctx, 64));
  assert_int_equal(queued(g_ctx), 0);
  /* count 0: every release flushes at once */
  assert_ok(dv_context_set_dealloc_limits(g_ctx, 0, 1.0));
  dv_array_release(dev_bytes(g_ctx, 64));
  assert_int_equal(queued(g_ctx), 0);
}

/* The ratio: a byte limit of about 3000 bytes; 2000 queue, 2000 more flush. */
static void test_ratio_limits_bytes(void **state) {
  (void)state;
  size_t total = total_memory(g_ctx);
  double ratio = 3000.5 / (double)total;
  assert_ok(dv_context_set_dealloc_limits(g_ctx, 1000, ratio));
  size_t bytes = 0;
  double got = 0;
  assert_ok(dv_context_dealloc_limits(g_ctx, NULL, &got, &bytes));
  assert_true(got == ratio);
  assert_int_equal(bytes, (size_t)((double)total * ratio));
  assert_true(bytes >= 2999 && bytes <= 3001);
  assert_ok(dv_context_flush_deallocs(g_ctx));
  dv_array_release(dev_bytes(g_ctx, 2000));
  size_t n = 0, b = 0;
  assert_ok(dv_context_pending_deallocs(g_ctx, &n, &b));
  assert_int_equal(n, 1);
  assert_int_equal(b, 2000);
  dv_array_release(dev_bytes(g_ctx, (int64_t)bytes - 2000)); /* exactly at the limit: stays */
  assert_int_equal(queued(g_ctx), 2);
  dv_array_release(dev_bytes(g_ctx, 1)); /* one byte over */
  assert_int_equal(queued(g_ctx), 0);
  /* ratio 0: any release with bytes flushes */
  assert_ok(dv_context_set_dealloc_limits(g_ctx, 1000, 0.0));
  dv_array_release(dev_bytes(g_ctx, 1));
  assert_int_equal(queued(g_ctx), 0);
}

/* Bad values are refused with a message, and nothing changes. */
static void test_bad_values_change_nothing(void **state) {
  (void)state;
  assert_ok(dv_context_set_dealloc_limits(g_ctx, 7, 0.25));
  assert_status(dv_context_set_dealloc_limits(g_ctx, 3, -0.1), DV_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(dv_last_error(), "ratio"));
  assert_status(dv_context_set_dealloc_limits(g_ctx, 3, 1.5), DV_ERR_INVALID_ARGUMENT);
  assert_status(dv_context_set_dealloc_limits(g_ctx, 3, NAN), DV_ERR_INVALID_ARGUMENT);
  assert_status(dv_context_set_dealloc_limits(g_ctx, 3, INFINITY), DV_ERR_INVALID_ARGUMENT);
  assert_status(dv_context_set_dealloc_limits(g_ctx, 1000000001u, 0.5), DV_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(dv_last_error(), "count"));
  assert_status(dv_context_set_dealloc_limits(g_ctx, (size_t)-1, 0.5), DV_ERR_INVALID_ARGUMENT);
  assert_status(dv_context_set_dealloc_limits(NULL, 3, 0.5), DV_ERR_NULL_ARGUMENT);
  assert_status(dv_context_dealloc_limits(NULL, NULL, NULL, NULL), DV_ERR_NULL_ARGUMENT);
  size_t count = 0;
  double ratio = 0;
  assert_ok(dv_context_dealloc_limits(g_ctx, &count, &ratio, NULL));
  assert_int_equal(count, 7);
  assert_true(ratio == 0.25);
  /* the edges are accepted */
  assert_ok(dv_context_set_dealloc_limits(g_ctx, 1000000000u, 1.0));
  assert_ok(dv_context_set_dealloc_limits(g_ctx, 0, 0.0));
}

/* dv_context_option says the new values, set through the API. */
static void test_option_reports_new_values(void **state) {
  (void)state;
  assert_ok(dv_context_set_dealloc_limits(g_ctx, 12, 0.5));
  char buf[64];
  dv_option_source src = DV_SOURCE_DEFAULT;
  assert_ok(dv_context_option(g_ctx, "max_pending_deallocs_count", buf, sizeof buf, &src));
  assert_string_equal(buf, "12");
  assert_int_equal(src, DV_SOURCE_API);
  assert_ok(dv_context_option(g_ctx, "max_pending_deallocs_ratio", buf, sizeof buf, &src));
  assert_true(fabs(strtod(buf, NULL) - 0.5) < 1e-12);
  assert_int_equal(src, DV_SOURCE_API);
}

/* Another context keeps its own limits. */
static void test_other_context_unaffected(void **state) {
  (void)state;
  dv_context *other = NULL;
  assert_ok(test_context(&other, "max_pending_deallocs_count=4", NULL));
  assert_ok(dv_context_set_dealloc_limits(g_ctx, 1, 0.5));
  size_t count = 0;
  assert_ok(dv_context_dealloc_limits(other, &count, NULL, NULL));
  assert_int_equal(count, 4);
  for (int i = 0; i < 3; i++) dv_array_release(dev_bytes(other, 8));
  assert_int_equal(queued(other), 3);
  assert_ok(dv_context_destroy(other));
}

/* dv_context_flush_deallocs drains what the flush itself queues: the array's
 * free lets go of its stream, whose release queues the stream (issue 25:
 * the Python deallocations.clear() left 1 entry). */
static void test_flush_drains_what_frees_queue(void **state) {
  (void)state;
  assert_ok(dv_context_set_dealloc_limits(g_ctx, 1000, 1.0));
  assert_ok(dv_context_flush_deallocs(g_ctx));
  dv_stream *s = NULL;
  assert_ok(dv_stream_create(g_ctx, 0, &s));
  int64_t n = 4;
  dv_array *a = NULL;
  assert_ok(dv_device_array(g_ctx, 1, &n, dv_dtype_get(DV_UINT8), NULL, 'C', s, &a));
  dv_stream_release(s); /* the array holds the last reference now */
  assert_int_equal(queued(g_ctx), 0);
  dv_array_release(a);
  assert_int_equal(queued(g_ctx), 1); /* the memory; its free releases the stream */
  assert_ok(dv_context_flush_deallocs(g_ctx));
  assert_int_equal(queued(g_ctx), 0);
  assert_ok(dv_context_set_dealloc_limits(g_ctx, 10, 0.2));
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {T(test_limits_start_as_the_options), T(test_lower_count_flushes_at_next_release),
                                     T(test_ratio_limits_bytes), T(test_bad_values_change_nothing),
                                     T(test_option_reports_new_values), T(test_other_context_unaffected),
                                     T(test_flush_drains_what_frees_queue)};
  return test_main(argc, argv, "dealloc_limits", tests, sizeof tests / sizeof tests[0]);
}
