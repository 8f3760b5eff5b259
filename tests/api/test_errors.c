/* Bad input: the right status, a useful message, out-parameters cleared,
 * nothing changed and nothing leaked (the fixture's destroy proves no array
 * survived; statistics are compared before and after). */
#include "common.h"

static dv_stats snap(void) {
  dv_stats s = {.size = sizeof s};
  assert_ok(dv_context_stats(g_ctx, &s));
  return s;
}

static void same_stats(const dv_stats *a, const dv_stats *b) {
  assert_int_equal(a->arrays.current, b->arrays.current);
  assert_int_equal(a->device.current, b->device.current);
  assert_int_equal(a->device.total, b->device.total);
  assert_int_equal(a->pinned.total, b->pinned.total);
  assert_int_equal(a->pending_deallocs, b->pending_deallocs);
}

#define EXPECT(call, status)                \
  do {                                      \
    dv_array *o_ = (dv_array *)1;           \
    dv_array **out = &o_;                   \
    (void)out;                              \
    dv_stats before = snap();               \
    assert_status(call, status);            \
    assert_null(o_);                        \
    dv_stats after = snap();                \
    same_stats(&before, &after);            \
  } while (0)
/* The same for calls without an array out-parameter. */
#define EXPECT_NO_OUT(call, status)         \
  do {                                      \
    dv_stats before = snap();               \
    assert_status(call, status);            \
    dv_stats after = snap();                \
    same_stats(&before, &after);            \
  } while (0)

static void test_creation_errors(void **state) {
  (void)state;
  const dv_dtype *f8 = dv_dtype_get(DV_FLOAT64);
  int64_t ok[2] = {2, 3}, neg[2] = {2, -3}, big[2] = {INT64_MAX / 2, 4};
  int64_t huge[2] = {(int64_t)1 << 40, (int64_t)1 << 21};
  int64_t mis[2] = {24, 3}, ovs[2] = {(INT64_MAX / 16) * 8, 8}, four[2] = {4, 3};
  EXPECT(dv_device_array(NULL, 2, ok, f8, NULL, 'C', NULL, out), DV_ERR_NULL_ARGUMENT);
  EXPECT(dv_device_array(g_ctx, 2, ok, NULL, NULL, 'C', NULL, out), DV_ERR_NULL_ARGUMENT);
  EXPECT(dv_device_array(g_ctx, 2, NULL, f8, NULL, 'C', NULL, out), DV_ERR_NULL_ARGUMENT);
  EXPECT(dv_device_array(g_ctx, -1, ok, f8, NULL, 'C', NULL, out), DV_ERR_BAD_SHAPE);
  EXPECT(dv_device_array(g_ctx, DV_MAXDIMS + 1, ok, f8, NULL, 'C', NULL, out), DV_ERR_BAD_SHAPE);
  EXPECT(dv_device_array(g_ctx, 2, neg, f8, NULL, 'C', NULL, out), DV_ERR_BAD_SHAPE);
  assert_non_null(strstr(dv_last_error(), "-3"));
  EXPECT(dv_device_array(g_ctx, 2, big, f8, NULL, 'C', NULL, out), DV_ERR_OVERFLOW);
  EXPECT(dv_device_array(g_ctx, 2, huge, f8, NULL, 'C', NULL, out), DV_ERR_OVERFLOW);
  EXPECT(dv_device_array(g_ctx, 2, ok, f8, NULL, 'X', NULL, out), DV_ERR_BAD_ORDER);
  EXPECT(dv_device_array(g_ctx, 2, ok, f8, NULL, 'A', NULL, out), DV_ERR_BAD_ORDER);
  EXPECT(dv_device_array(g_ctx, 2, ok, f8, mis, 'C', NULL, out), DV_ERR_BAD_STRIDES);
  EXPECT(dv_device_array(g_ctx, 2, four, f8, ovs, 'C', NULL, out), DV_ERR_OVERFLOW);
  int64_t big8 = ((INT64_MAX / 2) / 8 + 1) * 8; /* each stride fits; the span 2*big8 does not */
  int64_t two[2] = {2, 2}, span[2] = {big8, -big8};
  EXPECT(dv_device_array(g_ctx, 2, two, f8, span, 'C', NULL, out), DV_ERR_OVERFLOW);
  EXPECT(dv_pinned_array(g_ctx, 2, neg, f8, NULL, 'C', out), DV_ERR_BAD_SHAPE);
  EXPECT(dv_mapped_array(g_ctx, 2, ok, f8, NULL, 'Q', 0, out), DV_ERR_BAD_ORDER);
  EXPECT(dv_host_array(g_ctx, 2, ok, f8, NULL, 'Z', out), DV_ERR_BAD_ORDER);
  EXPECT(dv_host_array_wrap(g_ctx, NULL, 2, ok, f8, NULL, out), DV_ERR_NULL_ARGUMENT);
  EXPECT(dv_device_array_like(NULL, NULL, out), DV_ERR_NULL_ARGUMENT);
  /* out NULL is itself an argument error */
  assert_status(dv_device_array(g_ctx, 2, ok, f8, NULL, 'C', NULL, NULL), DV_ERR_NULL_ARGUMENT);
  /* the largest legal request the device cannot satisfy */
  int64_t toolarge = (int64_t)1 << 50;
  EXPECT(dv_device_array(g_ctx, 1, &toolarge, dv_dtype_get(DV_UINT8), NULL, 'C', NULL, out), DV_ERR_OUT_OF_MEMORY);
}

static void test_cross_context(void **state) {
  (void)state;
  dv_context *other;
  assert_ok(test_context(&other, NULL));
  int64_t n = 4;
  dv_array *a, *b;
  assert_ok(dv_device_array(g_ctx, 1, &n, dv_dtype_get(DV_INT32), NULL, 'C', NULL, &a));
  assert_ok(dv_device_array(other, 1, &n, dv_dtype_get(DV_INT32), NULL, 'C', NULL, &b));
  dv_stream *s;
  assert_ok(dv_stream_create(other, 0, &s));
  assert_status(dv_array_copy(a, a, s), DV_ERR_BACKEND_MISMATCH);
  assert_status(dv_array_copy(a, b, s), DV_ERR_BACKEND_MISMATCH); /* s is not a's context's */
  EXPECT(dv_to_device(g_ctx, b, NULL, 1, b, out), DV_ERR_BACKEND_MISMATCH); /* `to` of another context */
  dv_event *e;
  assert_ok(dv_event_create(g_ctx, 0, &e));
  assert_status(dv_event_record(e, s), DV_ERR_BACKEND_MISMATCH);
  assert_status(dv_stream_wait_event(s, e), DV_ERR_BACKEND_MISMATCH);
  dv_scope *sc = (dv_scope *)1;
  assert_status(dv_pinned_scope_begin(g_ctx, 1, &b, &sc), DV_ERR_BACKEND_MISMATCH);
  assert_null(sc);
  dv_event_release(e);
  dv_stream_release(s);
  dv_array_release(a), dv_array_release(b);
  assert_ok(dv_context_destroy(other));
}

static void test_null_everywhere(void **state) {
  (void)state;
  assert_status(dv_array_copy(NULL, NULL, NULL), DV_ERR_NULL_ARGUMENT);
  assert_status(dv_copy_to_device(NULL, NULL, NULL), DV_ERR_NULL_ARGUMENT);
  assert_status(dv_copy_to_host(NULL, NULL, NULL, NULL), DV_ERR_NULL_ARGUMENT);
  assert_status(dv_array_memset(NULL, 0, NULL), DV_ERR_NULL_ARGUMENT);
  assert_status(dv_stream_synchronize(NULL), DV_ERR_NULL_ARGUMENT);
  assert_status(dv_stream_query(NULL), DV_ERR_NULL_ARGUMENT);
  assert_status(dv_event_query(NULL), DV_ERR_NULL_ARGUMENT);
  assert_status(dv_event_record(NULL, NULL), DV_ERR_NULL_ARGUMENT);
  assert_status(dv_context_memory_info(NULL, NULL, NULL), DV_ERR_NULL_ARGUMENT);
  assert_status(dv_context_stats(g_ctx, NULL), DV_ERR_NULL_ARGUMENT);
  assert_status(dv_defer_cleanup_begin(NULL), DV_ERR_NULL_ARGUMENT);
  assert_status(dv_array_field(NULL, "x", NULL), DV_ERR_NULL_ARGUMENT);
  assert_status(dv_array_split(NULL, 1, NULL, 0, NULL), DV_ERR_NULL_ARGUMENT);
  float ms;
  assert_status(dv_event_elapsed_ms(NULL, NULL, &ms), DV_ERR_NULL_ARGUMENT);
  void *p;
  assert_status(dv_array_host_data(NULL, &p), DV_ERR_NULL_ARGUMENT);
  /* release of NULL is a no-op */
  dv_array_release(NULL);
  dv_stream_release(NULL);
  dv_event_release(NULL);
  dv_dtype_release(NULL);
  dv_config_destroy(NULL);
  assert_null(dv_array_retain(NULL));
  assert_int_equal(dv_array_ndim(NULL), 0);
  assert_int_equal(dv_array_size(NULL), 0);
}

/* An unknown fault kind is not pending and reads nothing outside the
 * backend's table (UBSan's bounds check and ASan watch the host's). */
static void test_unknown_fault_kind(void **state) {
  (void)state;
  const unsigned kinds[] = {4, 7, 100, 100000, 0xffffffffu};
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
    assert_int_equal(dv_fault_pending(g_ctx, (dv_fault_kind)kinds[i]), 0);
    assert_int_equal(dv_fault_pending(NULL, (dv_fault_kind)kinds[i]), 0);
    assert_status(dv_fault_inject(g_ctx, (dv_fault_kind)kinds[i], 1), DV_ERR_INVALID_ARGUMENT);
  }
}

/* Every function taking a stream refuses one of another context before it
 * allocates, queues or retains anything: the pending queue, the statistics
 * and the foreign stream are as before, whatever path the call would take
 * (a view or a copy).  A stream retained by a pending free of this context
 * would outlive its own context (ASan sees the use after free at teardown),
 * and with the pool the pool's record would be attached to it. */
static void test_foreign_stream_first(void **state) {
  (void)state;
  dv_context *other;
  assert_ok(test_context(&other, NULL));
  dv_stream *s;
  assert_ok(dv_stream_create(other, 0, &s));
  const dv_dtype *f8 = dv_dtype_get(DV_FLOAT64);
  int64_t sh[2] = {4, 6}, n12 = 12, m1 = -1, idx0[2] = {0, 0};
  dv_array *c, *f, *st, *h;
  double buf[24] = {0};
  assert_ok(dv_device_array(g_ctx, 2, sh, f8, NULL, 'C', NULL, &c));
  assert_ok(dv_device_array(g_ctx, 2, sh, f8, NULL, 'F', NULL, &f));
  assert_ok(dv_host_array_wrap(g_ctx, buf, 2, sh, f8, NULL, &h));
  dv_index half[2] = {DV_ALL, DV_SLICE(0, 3, 1)};
  assert_ok(dv_array_slice(c, 2, half, &st));
  dv_field_desc fd[1] = {{"x", f8, 0, 0, NULL}};
  dv_dtype *rt;
  assert_ok(dv_dtype_record_create(fd, 1, 0, &rt));
  dv_array *rec;
  assert_ok(dv_device_record(g_ctx, rt, NULL, &rec));
  assert_ok(dv_context_synchronize(g_ctx));
  size_t before = 0;
  assert_ok(dv_context_pending_deallocs(g_ctx, &before, NULL));
  double x = 0;
  EXPECT(dv_array_copy_new(c, 'C', s, out), DV_ERR_BACKEND_MISMATCH);
  EXPECT(dv_array_copy_new(h, 'F', s, out), DV_ERR_BACKEND_MISMATCH);
  EXPECT(dv_array_ravel(f, 'C', 0, s, out), DV_ERR_BACKEND_MISMATCH);  /* a copy */
  EXPECT(dv_array_ravel(c, 'C', 0, s, out), DV_ERR_BACKEND_MISMATCH);  /* a view */
  EXPECT(dv_array_reshape(st, 1, &n12, 'C', 0, s, out), DV_ERR_BACKEND_MISMATCH); /* a copy */
  EXPECT(dv_array_reshape(c, 1, &m1, 'C', 0, s, out), DV_ERR_BACKEND_MISMATCH);   /* a view */
  EXPECT(dv_copy_to_host(c, NULL, s, out), DV_ERR_BACKEND_MISMATCH);
  EXPECT(dv_copy_to_host(c, h, s, out), DV_ERR_BACKEND_MISMATCH);
  EXPECT(dv_to_device(g_ctx, h, s, 1, NULL, out), DV_ERR_BACKEND_MISMATCH);
  EXPECT(dv_to_device(g_ctx, h, s, 1, c, out), DV_ERR_BACKEND_MISMATCH);
  EXPECT(dv_device_array_like(st, s, out), DV_ERR_BACKEND_MISMATCH);
  EXPECT(dv_device_record(g_ctx, rt, s, out), DV_ERR_BACKEND_MISMATCH);
  EXPECT_NO_OUT(dv_array_get_item(c, idx0, &x, sizeof x, s), DV_ERR_BACKEND_MISMATCH);
  EXPECT_NO_OUT(dv_array_set_item(c, idx0, &x, sizeof x, s), DV_ERR_BACKEND_MISMATCH);
  EXPECT_NO_OUT(dv_record_get(rec, "x", &x, sizeof x, s), DV_ERR_BACKEND_MISMATCH);
  EXPECT_NO_OUT(dv_record_set(rec, "x", &x, sizeof x, s), DV_ERR_BACKEND_MISMATCH);
  EXPECT_NO_OUT(dv_array_copy(c, h, s), DV_ERR_BACKEND_MISMATCH);
  EXPECT_NO_OUT(dv_copy_to_device(c, h, s), DV_ERR_BACKEND_MISMATCH);
  EXPECT_NO_OUT(dv_array_memset(c, 0, s), DV_ERR_BACKEND_MISMATCH);
  size_t after = 0;
  assert_ok(dv_context_pending_deallocs(g_ctx, &after, NULL));
  assert_int_equal(after, before);
  dv_array_release(rec);
  dv_dtype_release(rt);
  dv_array_release(st), dv_array_release(h), dv_array_release(f), dv_array_release(c);
  dv_stream_release(s);
  assert_ok(dv_context_destroy(other));
  assert_ok(dv_context_flush_deallocs(g_ctx));
}

/* Bad input changes nothing: every counter of dv_context_stats (totals and
 * peaks included) and the pending queue are the same after each failing
 * call, because every argument is checked before anything is made, counted
 * or queued, and internal temporaries are never counted. */
#define BAD(call, status)                                                                  \
  do {                                                                                     \
    dv_stats b_ = snap();                                                                  \
    assert_status(call, status);                                                           \
    assert_ok(dv_context_synchronize(g_ctx));                                              \
    dv_stats a_ = snap();                                                                  \
    if (memcmp(&a_, &b_, sizeof a_) != 0) fail_msg("%s changed the statistics", #call);    \
  } while (0)

static void test_bad_input_changes_nothing(void **state) {
  (void)state;
  const dv_dtype *f8 = dv_dtype_get(DV_FLOAT64), *i4 = dv_dtype_get(DV_INT32);
  int64_t sh[2] = {4, 6}, sh3[1] = {3}, n12 = 12, two[2] = {-1, -1}, bad[2] = {5, 5};
  dv_array *c, *f, *h, *h3, *st, *rec, *recs, *o = NULL;
  double buf[24] = {0}, x = 0;
  assert_ok(dv_device_array(g_ctx, 2, sh, f8, NULL, 'C', NULL, &c));
  assert_ok(dv_device_array(g_ctx, 2, sh, f8, NULL, 'F', NULL, &f));
  assert_ok(dv_host_array_wrap(g_ctx, buf, 2, sh, f8, NULL, &h));
  assert_ok(dv_host_array_wrap(g_ctx, buf, 1, sh3, f8, NULL, &h3));
  dv_index half[2] = {DV_ALL, DV_SLICE(0, 3, 1)};
  assert_ok(dv_array_slice(c, 2, half, &st));
  int64_t sub = 3;
  dv_field_desc fd[2] = {{"x", f8, 0, 0, NULL}, {"v", i4, 8, 1, &sub}};
  dv_dtype *rt;
  assert_ok(dv_dtype_record_create(fd, 2, 0, &rt));
  assert_ok(dv_device_record(g_ctx, rt, NULL, &rec));
  assert_ok(dv_device_array(g_ctx, 1, sh3, rt, NULL, 'C', NULL, &recs));
  assert_ok(dv_context_synchronize(g_ctx));
  size_t pend0 = 0, pend1 = 0;
  assert_ok(dv_context_pending_deallocs(g_ctx, &pend0, NULL));
  int32_t v3[3];
  int64_t idx_oob[2] = {4, 0}, idx_neg[2] = {0, -7}, idx0[2] = {0, 0};
  dv_index zero_step[1] = {DV_SLICE(0, 4, 0)}, oob[1] = {DV_AT(9)}, three[3] = {DV_ALL, DV_ALL, DV_ALL};
  dv_index weird[1] = {{(dv_index_kind)7, 0, 0, 1, 0}};
  /* records */
  BAD(dv_record_get(rec, "v", v3, sizeof v3 - 1, NULL), DV_ERR_INVALID_ARGUMENT);
  BAD(dv_record_set(rec, "v", v3, 4, NULL), DV_ERR_INVALID_ARGUMENT);
  BAD(dv_record_get(rec, "nope", &x, sizeof x, NULL), DV_ERR_UNKNOWN_FIELD);
  BAD(dv_record_set(rec, "nope", &x, sizeof x, NULL), DV_ERR_UNKNOWN_FIELD);
  BAD(dv_record_get(recs, "x", &x, sizeof x, NULL), DV_ERR_INVALID_ARGUMENT);
  BAD(dv_record_get(c, "x", &x, sizeof x, NULL), DV_ERR_INVALID_ARGUMENT);
  BAD(dv_record_get(rec, NULL, &x, sizeof x, NULL), DV_ERR_NULL_ARGUMENT);
  BAD(dv_array_field(rec, "nope", &o), DV_ERR_UNKNOWN_FIELD);
  BAD(dv_array_field(c, "x", &o), DV_ERR_BAD_DTYPE);
  /* elements */
  BAD(dv_array_get_item(c, idx_oob, &x, sizeof x, NULL), DV_ERR_INDEX);
  BAD(dv_array_set_item(c, idx_neg, &x, sizeof x, NULL), DV_ERR_INDEX);
  BAD(dv_array_get_item(c, idx0, &x, 4, NULL), DV_ERR_INVALID_ARGUMENT);
  BAD(dv_array_get_item(c, NULL, &x, sizeof x, NULL), DV_ERR_NULL_ARGUMENT);
  /* views */
  BAD(dv_array_slice(c, 1, zero_step, &o), DV_ERR_BAD_STEP);
  BAD(dv_array_slice(c, 1, oob, &o), DV_ERR_INDEX);
  BAD(dv_array_slice(c, 3, three, &o), DV_ERR_TOO_MANY_INDICES);
  BAD(dv_array_slice(c, 1, weird, &o), DV_ERR_INVALID_ARGUMENT);
  BAD(dv_array_reshape(c, 2, two, 'C', 0, NULL, &o), DV_ERR_BAD_SHAPE);
  BAD(dv_array_reshape(c, 2, bad, 'C', 0, NULL, &o), DV_ERR_RESHAPE_SIZE);
  BAD(dv_array_reshape(c, 1, &n12, 'Q', 0, NULL, &o), DV_ERR_BAD_ORDER);
  BAD(dv_array_reshape(st, 1, &n12, 'C', DV_VIEW_ONLY, NULL, &o), DV_ERR_COPY_NEEDED);
  BAD(dv_array_ravel(f, 'C', DV_VIEW_ONLY, NULL, &o), DV_ERR_COPY_NEEDED);
  BAD(dv_array_ravel(c, 'K', 0, NULL, &o), DV_ERR_BAD_ORDER);
  dv_array *parts[4];
  size_t cnt;
  BAD(dv_array_split(c, 2, parts, 4, &cnt), DV_ERR_INVALID_ARGUMENT);
  BAD(dv_array_split(h3, 1, parts, 2, &cnt), DV_ERR_INVALID_ARGUMENT);
  BAD(dv_array_split(h3, 0, parts, 4, &cnt), DV_ERR_INVALID_ARGUMENT);
  /* copies */
  BAD(dv_array_copy(c, h3, NULL), DV_ERR_SHAPE_MISMATCH);
  BAD(dv_array_copy(rec, h3, NULL), DV_ERR_DTYPE_MISMATCH);
  BAD(dv_copy_to_host(c, f, NULL, &o), DV_ERR_INVALID_ARGUMENT);
  BAD(dv_copy_to_device(h, c, NULL), DV_ERR_INVALID_ARGUMENT);
  BAD(dv_to_device(g_ctx, h3, NULL, 1, c, &o), DV_ERR_SHAPE_MISMATCH);
  BAD(dv_to_device(g_ctx, h, NULL, 1, h, &o), DV_ERR_INVALID_ARGUMENT);
  BAD(dv_array_copy_new(c, 'A', NULL, &o), DV_ERR_BAD_ORDER);
  /* creation */
  BAD(dv_device_array(g_ctx, 2, sh, f8, NULL, 'X', NULL, &o), DV_ERR_BAD_ORDER);
  BAD(dv_host_array(g_ctx, -1, sh, f8, NULL, 'C', &o), DV_ERR_BAD_SHAPE);
  BAD(dv_pinned_scope_begin(g_ctx, 1, &c, (dv_scope **)&o), DV_ERR_INVALID_ARGUMENT);
  /* a device view of host memory whose mapped scope has ended is dead:
   * using it is bad input too, refused before any copy is made for it */
  dv_array *dv = NULL;
  dv_scope *sc = NULL;
  if (dv_mapped_scope_begin(g_ctx, 1, &h, &dv, &sc) == DV_OK) {
    assert_ok(dv_scope_end(sc));
    BAD(dv_copy_to_host(dv, NULL, NULL, &o), DV_ERR_INVALID_ARGUMENT);
    BAD(dv_array_copy_new(dv, 'C', NULL, &o), DV_ERR_INVALID_ARGUMENT);
    BAD(dv_array_ravel(dv, 'F', 0, NULL, &o), DV_ERR_INVALID_ARGUMENT);
    int64_t n24 = 24;
    BAD(dv_array_reshape(dv, 1, &n24, 'F', 0, NULL, &o), DV_ERR_INVALID_ARGUMENT);
    BAD(dv_array_get_item(dv, idx0, &x, sizeof x, NULL), DV_ERR_INVALID_ARGUMENT);
    BAD(dv_array_copy(c, dv, NULL), DV_ERR_INVALID_ARGUMENT);
    BAD(dv_array_memset(dv, 0, NULL), DV_ERR_INVALID_ARGUMENT);
    BAD(dv_to_device(g_ctx, dv, NULL, 1, c, &o), DV_ERR_INVALID_ARGUMENT);
    dv_array_release(dv);
  }
  assert_null(o);
  assert_ok(dv_context_pending_deallocs(g_ctx, &pend1, NULL));
  assert_int_equal(pend1, pend0);
  dv_array_release(recs), dv_array_release(rec);
  dv_dtype_release(rt);
  dv_array_release(st), dv_array_release(h3), dv_array_release(h), dv_array_release(f), dv_array_release(c);
}

/* Every out-parameter of every failing call is cleared (NULL/0), as the
 * header's first convention says; each is filled with garbage first.  The
 * exceptions the header states: a too-small JSON buffer and a failing
 * element or field read leave the caller's buffer untouched (nothing is
 * written or copied), the JSON writers still report the length needed, and
 * dv_stats.size stays the caller's. */
#define GARBAGE(x) memset(&(x), 0xA5, sizeof(x))
static int all_zero(const void *p, size_t n) {
  const unsigned char *c = p;
  for (size_t i = 0; i < n; i++)
    if (c[i]) return 0;
  return 1;
}
#define ASSERT_CLEARED(x) \
  do { if (!all_zero(&(x), sizeof(x))) fail_msg("%s is not cleared", #x); } while (0)

static void test_outputs_cleared_on_failure(void **state) {
  (void)state;
  char buf[64];
  size_t sz1, sz2;
  /* options */
  dv_option_info info;
  GARBAGE(info);
  assert_status(dv_option_describe(dv_option_count(), &info), DV_ERR_INDEX);
  ASSERT_CLEARED(info);
  dv_option_source src;
  GARBAGE(buf), GARBAGE(src);
  assert_status(dv_option_get("no_such_option", buf, sizeof buf, &src), DV_ERR_BAD_OPTION);
  assert_int_equal(buf[0], 0);
  ASSERT_CLEARED(src);
  GARBAGE(buf), GARBAGE(src);
  assert_status(dv_context_option(g_ctx, "no_such_option", buf, sizeof buf, &src), DV_ERR_BAD_OPTION);
  assert_int_equal(buf[0], 0);
  ASSERT_CLEARED(src);
  GARBAGE(buf), GARBAGE(src);
  assert_status(dv_context_option(NULL, "backend", buf, sizeof buf, &src), DV_ERR_NULL_ARGUMENT);
  assert_int_equal(buf[0], 0);
  ASSERT_CLEARED(src);
  GARBAGE(buf);
  assert_status(dv_backend_probe(NULL, buf, sizeof buf), DV_ERR_NULL_ARGUMENT);
  assert_int_equal(buf[0], 0);
  /* contexts and statistics */
  dv_device_info di;
  GARBAGE(di);
  assert_status(dv_context_device_info(NULL, &di), DV_ERR_NULL_ARGUMENT);
  ASSERT_CLEARED(di);
  GARBAGE(sz1), GARBAGE(sz2);
  assert_status(dv_context_memory_info(NULL, &sz1, &sz2), DV_ERR_NULL_ARGUMENT);
  ASSERT_CLEARED(sz1); ASSERT_CLEARED(sz2);
  GARBAGE(sz1), GARBAGE(sz2);
  assert_status(dv_context_pending_deallocs(NULL, &sz1, &sz2), DV_ERR_NULL_ARGUMENT);
  ASSERT_CLEARED(sz1); ASSERT_CLEARED(sz2);
  dv_stats st;
  GARBAGE(st);
  st.size = sizeof st;
  assert_status(dv_context_stats(NULL, &st), DV_ERR_NULL_ARGUMENT);
  assert_int_equal(st.size, sizeof st);
  st.size = 0;
  ASSERT_CLEARED(st);
  GARBAGE(st);
  st.size = 16; /* an older, smaller dv_stats: only its 16 bytes are the caller's */
  assert_status(dv_context_stats(g_ctx, &st), DV_ERR_INVALID_ARGUMENT);
  assert_int_equal(st.size, 16);
  assert_true(all_zero((char *)&st + 4, 12));
  assert_int_equal(((unsigned char *)&st)[16], 0xA5);
  GARBAGE(sz1), GARBAGE(buf);
  assert_status(dv_context_stats_json(NULL, buf, sizeof buf, &sz1), DV_ERR_NULL_ARGUMENT);
  ASSERT_CLEARED(sz1);
  assert_int_equal((unsigned char)buf[0], 0xA5);
  GARBAGE(sz1);
  assert_status(dv_memory_snapshot_json(NULL, buf, sizeof buf, &sz1), DV_ERR_NULL_ARGUMENT);
  ASSERT_CLEARED(sz1);
  /* memory managers */
  dv_mm_stats ms;
  GARBAGE(ms);
  assert_status(dv_memory_stats(NULL, &ms), DV_ERR_NULL_ARGUMENT);
  ASSERT_CLEARED(ms);
  dv_block blk;
  GARBAGE(blk);
  assert_status(dv_backend_alloc(NULL, 64, &blk), DV_ERR_NULL_ARGUMENT);
  ASSERT_CLEARED(blk);
  GARBAGE(blk);
  assert_status(dv_backend_alloc(g_ctx, 0, &blk), DV_ERR_INVALID_ARGUMENT);
  ASSERT_CLEARED(blk);
  GARBAGE(sz1), GARBAGE(sz2);
  assert_status(dv_backend_memory_info(NULL, &sz1, &sz2), DV_ERR_NULL_ARGUMENT);
  ASSERT_CLEARED(sz1); ASSERT_CLEARED(sz2);
  /* dtypes */
  dv_field_desc fd;
  GARBAGE(fd);
  assert_status(dv_dtype_field(dv_dtype_get(DV_INT32), 0, &fd), DV_ERR_INDEX);
  ASSERT_CLEARED(fd);
  GARBAGE(fd);
  assert_status(dv_dtype_field(NULL, 0, &fd), DV_ERR_NULL_ARGUMENT);
  ASSERT_CLEARED(fd);
  dv_dtype *dt;
  GARBAGE(dt);
  assert_status(dv_dtype_record_create(NULL, 1, 0, &dt), DV_ERR_NULL_ARGUMENT);
  ASSERT_CLEARED(dt);
  /* arrays, views, scopes, streams, events */
  int64_t sh[2] = {2, 3};
  dv_array *d, *h, *o;
  double hb[6] = {1, 2, 3, 4, 5, 6}, x;
  assert_ok(dv_device_array(g_ctx, 2, sh, dv_dtype_get(DV_FLOAT64), NULL, 'C', NULL, &d));
  assert_ok(dv_host_array_wrap(g_ctx, hb, 2, sh, dv_dtype_get(DV_FLOAT64), NULL, &h));
  GARBAGE(o);
  assert_status(dv_device_array(NULL, 2, sh, dv_dtype_get(DV_FLOAT64), NULL, 'C', NULL, &o), DV_ERR_NULL_ARGUMENT);
  ASSERT_CLEARED(o);
  GARBAGE(o);
  assert_status(dv_array_reshape(d, 1, sh, 'C', 0, NULL, &o), DV_ERR_RESHAPE_SIZE);
  ASSERT_CLEARED(o);
  void *ptr;
  GARBAGE(ptr);
  assert_status(dv_array_host_data(d, &ptr), DV_ERR_MISUSE);
  ASSERT_CLEARED(ptr);
  dv_array *views[4];
  size_t count;
  GARBAGE(views), GARBAGE(count);
  assert_status(dv_array_split(d, 2, views, 4, &count), DV_ERR_INVALID_ARGUMENT);
  ASSERT_CLEARED(views); ASSERT_CLEARED(count);
  dv_scope *sc;
  dv_array *mv[1];
  GARBAGE(sc), GARBAGE(mv);
  assert_status(dv_mapped_scope_begin(NULL, 1, &h, mv, &sc), DV_ERR_NULL_ARGUMENT);
  ASSERT_CLEARED(sc); ASSERT_CLEARED(mv);
  GARBAGE(sc), GARBAGE(mv);
  assert_status(dv_mapped_scope_begin(g_ctx, 1, &d, mv, &sc), DV_ERR_INVALID_ARGUMENT);
  ASSERT_CLEARED(sc); ASSERT_CLEARED(mv);
  dv_stream *s;
  GARBAGE(s);
  assert_status(dv_stream_create(g_ctx, 0x80, &s), DV_ERR_INVALID_ARGUMENT);
  ASSERT_CLEARED(s);
  dv_event *e;
  GARBAGE(e);
  assert_status(dv_event_create(NULL, 0, &e), DV_ERR_NULL_ARGUMENT);
  ASSERT_CLEARED(e);
  float ms_;
  GARBAGE(ms_);
  assert_status(dv_event_elapsed_ms(NULL, NULL, &ms_), DV_ERR_NULL_ARGUMENT);
  ASSERT_CLEARED(ms_);
  /* data destinations: nothing copied */
  int64_t bad_idx[2] = {5, 0};
  GARBAGE(x);
  assert_status(dv_array_get_item(d, bad_idx, &x, sizeof x, NULL), DV_ERR_INDEX);
  assert_true(((unsigned char *)&x)[0] == 0xA5 && ((unsigned char *)&x)[7] == 0xA5);
  /* host allocation failures clear them too */
  dv_config *cfg;
  GARBAGE(cfg);
  assert_ok(dv_fault_inject(NULL, DV_FAULT_HOST_ALLOC, 1));
  assert_status(dv_config_create(&cfg), DV_ERR_HOST_OUT_OF_MEMORY);
  ASSERT_CLEARED(cfg);
  dv_context *ctx2;
  GARBAGE(ctx2);
  assert_ok(dv_fault_inject(NULL, DV_FAULT_HOST_ALLOC, 1));
  assert_status(dv_context_create(NULL, &ctx2), DV_ERR_HOST_OUT_OF_MEMORY);
  ASSERT_CLEARED(ctx2);
  assert_int_equal(dv_fault_pending(NULL, DV_FAULT_HOST_ALLOC), 0);
  dv_array_release(h), dv_array_release(d);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {T(test_creation_errors), T(test_cross_context), T(test_null_everywhere),
                                     T(test_unknown_fault_kind), T(test_foreign_stream_first),
                                     T(test_bad_input_changes_nothing), T(test_outputs_cleared_on_failure)};
  return test_main(argc, argv, "errors", tests, sizeof tests / sizeof tests[0]);
}
