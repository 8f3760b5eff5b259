/* Tracking (issue 38 item 3(b), core/track.c): every live handle with where
 * it was made, listed by dv_tracking_snapshot_json and the memory
 * snapshot; records that cannot be allocated are counted, never a failure
 * of the caller. */
#include <string.h>

#include "common.h"

static char *listing(dv_context *c) {
  size_t need = 0;
  assert_ok(dv_tracking_snapshot_json(c, NULL, 0, &need));
  char *buf = malloc(need + 1);
  assert_non_null(buf);
  assert_ok(dv_tracking_snapshot_json(c, buf, need + 1, &need));
  assert_int_equal(strlen(buf), need);
  return buf;
}

static int count(const char *hay, const char *needle) {
  int n = 0;
  for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle)) n++;
  return n;
}

static void test_off_by_default(void **state) {
  (void)state;
  assert_int_equal(dv_tracking_enabled(), 0);
  dv_context *c = test_context_or_fail(NULL);
  char *l = listing(c);
  assert_string_equal(l, "{\"enabled\":false,\"untracked\":0,\"live\":[]}");
  free(l);
  assert_ok(dv_context_destroy(c));
}

static void test_lists_live_handles(void **state) {
  (void)state;
  assert_ok(dv_tracking_enable(1));
  assert_int_equal(dv_tracking_enabled(), 1);
  dv_context *c = test_context_or_fail(NULL);
  int64_t shape[2] = {3, 4};
  dv_array *a = NULL, *p = NULL;
  dv_stream *s = NULL;
  dv_event *e = NULL;
  assert_ok(dv_device_array(c, 2, shape, dv_dtype_get(DV_FLOAT32), NULL, 'C', NULL, &a));
  assert_ok(dv_stream_create(c, 0, &s));
  assert_ok(dv_event_create(c, 0, &e));
  dv_tracking_set_origin("prog.py:12");
  assert_ok(dv_pinned_array(c, 1, shape, dv_dtype_get(DV_INT8), NULL, 'C', &p));
  dv_tracking_set_origin(NULL);
  char *l = listing(c);
  /* in creation order: the context, the array, the stream, the event, the pinned array */
  const char *ctx_at = strstr(l, "\"kind\":\"context\""), *arr_at = strstr(l, "\"kind\":\"array\""),
             *str_at = strstr(l, "\"kind\":\"stream\""), *ev_at = strstr(l, "\"kind\":\"event\"");
  assert_true(ctx_at && arr_at && str_at && ev_at);
  assert_true(ctx_at < arr_at && arr_at < str_at && str_at < ev_at);
  assert_non_null(strstr(l, "\"memory\":\"device\",\"bytes\":48,\"what\":\"float32 (3, 4)\""));
  assert_non_null(strstr(l, "\"origin\":\"prog.py:12\",\"memory\":\"pinned\",\"bytes\":3,\"what\":\"int8 (3,)\""));
  /* the others' origin: this program's code, by module and offset */
  assert_true(count(l, "test_tracking+0x") + count(l, "test_tracking (") >= 4);
  free(l);
  /* released: gone from the list */
  dv_array_release(a);
  dv_event_release(e);
  l = listing(c);
  assert_null(strstr(l, "float32 (3, 4)"));
  assert_null(strstr(l, "\"kind\":\"event\""));
  assert_non_null(strstr(l, "\"kind\":\"stream\""));
  free(l);
  /* the memory snapshot carries it, for any manager */
  size_t need = 0;
  assert_ok(dv_memory_snapshot_json(c, NULL, 0, &need));
  char *snap = malloc(need + 1);
  assert_ok(dv_memory_snapshot_json(c, snap, need + 1, &need));
  assert_non_null(strstr(snap, "\"tracking\":{\"enabled\":true"));
  assert_non_null(strstr(snap, "prog.py:12"));
  assert_int_equal(snap[need - 1], '}');
  char small[8];
  assert_status(dv_memory_snapshot_json(c, small, sizeof small, &need), DV_ERR_INVALID_ARGUMENT);
  free(snap);
  dv_stream_release(s);
  dv_array_release(p);
  assert_ok(dv_context_destroy(c));
  /* every context's list (NULL): empty now */
  l = listing(NULL);
  assert_string_equal(l, "{\"enabled\":true,\"untracked\":0,\"live\":[]}");
  free(l);
  assert_ok(dv_tracking_enable(0));
  assert_status(dv_tracking_snapshot_json(NULL, NULL, 0, NULL), DV_ERR_NULL_ARGUMENT);
}

/* A record that cannot be allocated: the call succeeds as it would
 * without tracking, the record is counted as untracked, nothing leaks. */
static void test_fault_sweep(void **state) {
  (void)state;
  dv_context *c = test_context_or_fail(NULL);
  assert_ok(dv_tracking_enable(1));
  int64_t n = 16;
  bool done = false;
  int untracked = 0;
  for (uint64_t k = 1; k < 64 && !done; k++) {
    dv_array *a = NULL;
    dv_fault_inject(NULL, DV_FAULT_HOST_ALLOC, k);
    dv_status rc = dv_device_array(c, 1, &n, dv_dtype_get(DV_FLOAT64), NULL, 'C', NULL, &a);
    int pending = dv_fault_pending(NULL, DV_FAULT_HOST_ALLOC);
    dv_fault_inject(NULL, DV_FAULT_HOST_ALLOC, 0);
    if (rc == DV_OK) {
      char *l = listing(c);
      bool listed = strstr(l, "float64 (16,)") != NULL;
      if (!listed) untracked++;
      free(l);
      dv_array_release(a);
      if (pending) done = true; /* no injected fault was reached: the sweep is over */
    } else {
      assert_int_equal(rc, DV_ERR_HOST_OUT_OF_MEMORY);
      assert_null(a);
    }
  }
  assert_true(done);
  assert_int_equal(untracked, 1); /* exactly one step of the sweep hit the record */
  char *l = listing(c);
  assert_non_null(strstr(l, "\"untracked\":1"));
  free(l);
  assert_ok(dv_tracking_enable(0));
  assert_ok(dv_context_destroy(c));
}

int main(int argc, char **argv) {
  (void)argc;
  (void)argv;
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_off_by_default), cmocka_unit_test(test_lists_live_handles),
                                     cmocka_unit_test(test_fault_sweep)};
  return cmocka_run_group_tests_name("tracking", tests, NULL, NULL);
}
