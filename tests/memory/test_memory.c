/* Deferred deallocation exactly as Numba does it (strict > on count 10 and
 * ratio 0.2, one flush-and-retry on out-of-memory, nestable defer_cleanup
 * that never flushes on exit), plus devarray's rule that one failing free
 * never strands the others.  Statistics stay consistent throughout. */
#include <pthread.h>

#include "common.h"

static size_t pending(dv_context *c) {
  size_t n = 0;
  assert_ok(dv_context_pending_deallocs(c, &n, NULL));
  return n;
}

static dv_array *bytes_array(dv_context *c, int64_t n) {
  dv_array *a = NULL;
  assert_ok(dv_device_array(c, 1, &n, dv_dtype_get(DV_UINT8), NULL, 'C', NULL, &a));
  return a;
}

static void test_count_limit(void **state) {
  (void)state;
  dv_array *a[11];
  for (int i = 0; i < 11; i++) a[i] = bytes_array(g_ctx, 1000);
  for (int i = 0; i < 10; i++) {
    dv_array_release(a[i]);
    assert_int_equal(pending(g_ctx), (size_t)i + 1);
  }
  dv_array_release(a[10]); /* the 11th: strictly greater than 10 flushes all 11 */
  assert_int_equal(pending(g_ctx), 0);
  dv_stats st = {.size = sizeof st};
  assert_ok(dv_context_stats(g_ctx, &st));
  assert_int_equal(st.device.current, 0);
  assert_int_equal(st.device.total, 11000);
  assert_int_equal(st.device.peak, 11000);
  assert_int_equal(st.flushes, 1);
  assert_int_equal(st.pending_peak, 11);
}

static void test_views_are_references(void **state) {
  (void)state;
  dv_array *a = bytes_array(g_ctx, 64), *v;
  dv_index idx[1] = {DV_SLICE(8, 16, 1)};
  assert_ok(dv_array_slice(a, 1, idx, &v));
  dv_array_release(a);
  assert_int_equal(pending(g_ctx), 0); /* the view holds the memory */
  dv_array_release(v);
  assert_int_equal(pending(g_ctx), 1);
}

static void test_byte_limit(void **state) {
  (void)state;
  dv_context *c;
  assert_ok(test_context(&c, "host_memory=16M", NULL));
  if (strncmp(dv_context_backend(c), "host", 4) != 0) {
    dv_context_destroy(c);
    skip();
  }
  int64_t limit = (int64_t)(16777216 * 0.2); /* int(total * ratio) = 3355443 */
  dv_array *a = bytes_array(c, limit), *b = bytes_array(c, 1);
  size_t bytes = 0;
  dv_array_release(a);
  assert_ok(dv_context_pending_deallocs(c, NULL, &bytes));
  assert_int_equal(bytes, (size_t)limit); /* exactly the limit: no flush */
  dv_array_release(b);                     /* one byte more: flush */
  assert_int_equal(pending(c), 0);
  assert_ok(dv_context_destroy(c));
}

static void test_defer_cleanup_nesting(void **state) {
  (void)state;
  dv_array *a[16];
  for (int i = 0; i < 16; i++) a[i] = bytes_array(g_ctx, 10);
  assert_ok(dv_defer_cleanup_begin(g_ctx));
  assert_ok(dv_defer_cleanup_begin(g_ctx));
  for (int i = 0; i < 15; i++) dv_array_release(a[i]);
  assert_int_equal(pending(g_ctx), 15); /* past the limit, nothing flushed */
  assert_ok(dv_context_flush_deallocs(g_ctx)); /* explicit flush is a no-op too */
  assert_int_equal(pending(g_ctx), 15);
  assert_ok(dv_defer_cleanup_end(g_ctx));
  assert_int_equal(pending(g_ctx), 15);
  assert_ok(dv_defer_cleanup_end(g_ctx)); /* leaving the outermost does not flush */
  assert_int_equal(pending(g_ctx), 15);
  assert_status(dv_defer_cleanup_end(g_ctx), DV_ERR_MISUSE);
  dv_array_release(a[15]); /* the next enqueue flushes */
  assert_int_equal(pending(g_ctx), 0);
}

static void test_oom_retry(void **state) {
  (void)state;
  dv_context *c;
  assert_ok(test_context(&c, "host_memory=16M", "max_pending_deallocs_ratio=1", NULL));
  if (strncmp(dv_context_backend(c), "host", 4) != 0) {
    dv_context_destroy(c);
    skip();
  }
  dv_array *a = bytes_array(c, 10 << 20), *b = NULL, *x = (dv_array *)1;
  dv_array_release(a);
  assert_int_equal(pending(c), 1);
  int64_t n = 10 << 20;
  /* fails once, flushes the queue, succeeds on the retry */
  assert_ok(dv_device_array(c, 1, &n, dv_dtype_get(DV_UINT8), NULL, 'C', NULL, &b));
  dv_stats st = {.size = sizeof st};
  assert_ok(dv_context_stats(c, &st));
  assert_int_equal(st.oom_retries, 1);
  assert_int_equal(pending(c), 0);
  /* inside defer_cleanup the retry frees nothing: a real out-of-memory */
  dv_array_release(b);
  assert_ok(dv_defer_cleanup_begin(c));
  assert_status(dv_device_array(c, 1, &n, dv_dtype_get(DV_UINT8), NULL, 'C', NULL, &x), DV_ERR_OUT_OF_MEMORY);
  assert_null(x);
  assert_non_null(strstr(dv_last_error(), "10485760"));
  assert_ok(dv_defer_cleanup_end(c));
  assert_int_equal(pending(c), 1);
  /* larger than the device: out of memory after the retry */
  int64_t huge = 64 << 20;
  assert_status(dv_device_array(c, 1, &huge, dv_dtype_get(DV_UINT8), NULL, 'C', NULL, &x), DV_ERR_OUT_OF_MEMORY);
  assert_int_equal(pending(c), 0);
  assert_ok(dv_context_destroy(c));
}

static void test_failing_free_does_not_strand(void **state) {
  (void)state;
  /* about the direct manager, whose frees are driver frees */
  if (strncmp(g_backend, "host", 4) != 0 || strcmp(dv_context_memory_manager(g_ctx), "direct") != 0) skip();
  dv_array *a[3];
  for (int i = 0; i < 3; i++) a[i] = bytes_array(g_ctx, 4096);
  assert_ok(dv_defer_cleanup_begin(g_ctx));
  for (int i = 0; i < 3; i++) dv_array_release(a[i]);
  assert_ok(dv_defer_cleanup_end(g_ctx));
  assert_ok(dv_fault_inject(g_ctx, DV_FAULT_FREE, 2));
  assert_status(dv_context_flush_deallocs(g_ctx), DV_ERR_DRIVER);
  assert_int_equal(pending(g_ctx), 0);
  dv_stats st = {.size = sizeof st};
  assert_ok(dv_context_stats(g_ctx, &st));
  assert_int_equal(st.failed_frees, 1);
  assert_int_equal(st.device.current, 0);
  size_t f, t;
  assert_ok(dv_context_memory_info(g_ctx, &f, &t));
  assert_int_equal(f, t); /* every block went back */
}

/* Numba keeps one queue: device, mapped and pinned memory, streams and
 * events all count toward the one count limit (default 10), pinned memory,
 * streams and events with 0 bytes; the 11th pending entry of any kind
 * flushes all 11. */
static void test_one_queue(void **state) {
  (void)state;
  dv_array *dev[4], *pin;
  dv_stream *s[4];
  dv_event *e[2];
  int64_t n = 100;
  for (int i = 0; i < 4; i++) dev[i] = bytes_array(g_ctx, 1000);
  assert_ok(dv_pinned_array(g_ctx, 1, &n, dv_dtype_get(DV_UINT8), NULL, 'C', &pin));
  for (int i = 0; i < 4; i++) assert_ok(dv_stream_create(g_ctx, 0, &s[i]));
  for (int i = 0; i < 2; i++) assert_ok(dv_event_create(g_ctx, 0, &e[i]));
  dv_stats st0 = {.size = sizeof st0};
  assert_ok(dv_context_stats(g_ctx, &st0));
  size_t want = 0, cnt, bytes;
  for (int i = 0; i < 4; i++) dv_array_release(dev[i]), assert_int_equal(pending(g_ctx), ++want);
  dv_array_release(pin); /* pinned: queued at 0 bytes */
  assert_ok(dv_context_pending_deallocs(g_ctx, &cnt, &bytes));
  assert_int_equal(cnt, ++want);
  assert_int_equal(bytes, 4000);
  for (int i = 0; i < 3; i++) dv_stream_release(s[i]), assert_int_equal(pending(g_ctx), ++want);
  for (int i = 0; i < 2; i++) dv_event_release(e[i]), assert_int_equal(pending(g_ctx), ++want);
  assert_int_equal(want, 10); /* exactly the limit: nothing flushed */
  dv_stats st = {.size = sizeof st};
  assert_ok(dv_context_stats(g_ctx, &st));
  assert_int_equal(st.flushes, st0.flushes);
  assert_int_equal(st.pending_deallocs, 10);
  dv_stream_release(s[3]); /* the 11th entry, whatever its kind, flushes all 11 */
  assert_int_equal(pending(g_ctx), 0);
  assert_ok(dv_context_stats(g_ctx, &st));
  assert_int_equal(st.flushes, st0.flushes + 1);
  assert_int_equal(st.pending_peak, 11);
  assert_int_equal(st.device.current, 0);
  assert_int_equal(st.pinned.current, 0);
}

static void test_stats_json(void **state) {
  (void)state;
  dv_array *a = bytes_array(g_ctx, 512);
  size_t need = 0;
  assert_ok(dv_context_stats_json(g_ctx, NULL, 0, &need));
  char *buf = malloc(need + 1);
  assert_status(dv_context_stats_json(g_ctx, buf, need, &need), DV_ERR_INVALID_ARGUMENT);
  assert_ok(dv_context_stats_json(g_ctx, buf, need + 1, &need));
  assert_int_equal(strlen(buf), need);
  assert_non_null(strstr(buf, "\"device\":{\"current\":512,"));
  assert_non_null(strstr(buf, "\"pending_deallocs\":0"));
  free(buf);
  dv_stats small = {.size = 8};
  assert_status(dv_context_stats(g_ctx, &small), DV_ERR_INVALID_ARGUMENT);
  dv_array_release(a);
}

/* dv_stats is versioned by its size: a caller built against the version-1
 * header (the struct ended before `staging`) gets version 1 and nothing
 * written past it; one built against a newer, larger header gets this
 * version and its extra bytes untouched; a size left 0 is an error. */
static void test_stats_versions(void **state) {
  (void)state;
  dv_array *a = bytes_array(g_ctx, 256);
  const size_t v1 = offsetof(dv_stats, staging);
  union {
    dv_stats st;
    unsigned char bytes[sizeof(dv_stats) + 64];
  } buf;
  memset(&buf, 0xAB, sizeof buf);
  buf.st.size = (uint32_t)v1;
  assert_ok(dv_context_stats(g_ctx, &buf.st));
  assert_int_equal(buf.st.version, 1);
  assert_int_equal(buf.st.size, v1);
  assert_int_equal(buf.st.device.current, 256);
  for (size_t i = v1; i < sizeof buf; i++) assert_int_equal(buf.bytes[i], 0xAB);

  memset(&buf, 0xAB, sizeof buf);
  buf.st.size = (uint32_t)sizeof buf; /* a newer header's larger struct */
  assert_ok(dv_context_stats(g_ctx, &buf.st));
  assert_int_equal(buf.st.version, DV_STATS_VERSION);
  assert_int_equal(buf.st.size, sizeof(dv_stats));
  assert_int_equal(buf.st.device.current, 256);
  for (size_t i = sizeof(dv_stats); i < sizeof buf; i++) assert_int_equal(buf.bytes[i], 0xAB);

  dv_stats zero = {0};
  assert_status(dv_context_stats(g_ctx, &zero), DV_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(dv_last_error(), "sizeof(dv_stats)"));
  dv_stats odd = {.size = (uint32_t)v1 + 8}; /* between versions: the older one */
  assert_ok(dv_context_stats(g_ctx, &odd));
  assert_int_equal(odd.version, 1);
  assert_int_equal(odd.size, v1);
  dv_array_release(a);
}

/* ---- the statistics kept under the queue's lock (issue 23) ---------------- */

static dv_stats stats_of(dv_context *c) {
  dv_stats st = {.size = sizeof st};
  assert_ok(dv_context_stats(c, &st));
  return st;
}

/* Arrays with their descriptor inside the record (1-D) and beside it (5-D),
 * a view keeping one alive: `device` and `arrays` exact at every step, the
 * descriptors leaving `arrays` at their release, the memory leaving
 * `device` at the flush. */
static void test_stats_exact_through_views(void **state) {
  (void)state;
  dv_context *c;
  assert_ok(test_context(&c, NULL));
  int64_t sh5[5] = {2, 2, 2, 2, 2};
  dv_array *a = bytes_array(c, 1000), *b = NULL, *v = NULL;
  assert_ok(dv_device_array(c, 5, sh5, dv_dtype_get(DV_UINT8), NULL, 'C', NULL, &b));
  dv_index idx[1] = {DV_SLICE(8, 16, 1)};
  assert_ok(dv_array_slice(a, 1, idx, &v));
  dv_stats st = stats_of(c);
  assert_int_equal(st.device.current, 1032);
  assert_int_equal(st.device.peak, 1032);
  assert_int_equal(st.device.total, 1032);
  assert_int_equal(st.arrays.current, 3);
  assert_int_equal(st.arrays.peak, 3);
  assert_int_equal(st.arrays.total, 3);
  dv_array_release(a); /* the view holds the memory */
  st = stats_of(c);
  assert_int_equal(st.arrays.current, 2);
  assert_int_equal(st.device.current, 1032);
  assert_int_equal(st.pending_deallocs, 0);
  dv_array_release(v); /* the last reference: a's memory is queued */
  dv_array_release(b);
  st = stats_of(c);
  assert_int_equal(st.arrays.current, 0);
  assert_int_equal(st.pending_deallocs, 2);
  assert_int_equal(st.device.current, 1032); /* held until the flush */
  assert_ok(dv_context_flush_deallocs(c));
  st = stats_of(c);
  assert_int_equal(st.device.current, 0);
  assert_int_equal(st.device.peak, 1032);
  assert_int_equal(st.device.total, 1032);
  assert_int_equal(st.arrays.peak, 3);
  assert_int_equal(st.arrays.total, 3);
  assert_ok(dv_context_destroy(c));
}

/* The queue cannot grow (its first array refused): the memory is freed at
 * once, and both counters still drop exactly once. */
static void test_stats_when_queue_cannot_grow(void **state) {
  (void)state;
  dv_context *c;
  assert_ok(test_context(&c, NULL));
  dv_array *a = bytes_array(c, 4096);
  assert_ok(dv_fault_inject(c, DV_FAULT_HOST_ALLOC, 1)); /* the queue's array */
  dv_array_release(a);
  assert_int_equal(dv_fault_pending(c, DV_FAULT_HOST_ALLOC), 0); /* it fired */
  dv_stats st = stats_of(c);
  assert_int_equal(st.pending_deallocs, 0);
  assert_int_equal(st.arrays.current, 0);
  assert_int_equal(st.device.current, 0);
  assert_int_equal(st.device.total, 4096);
  assert_ok(dv_context_destroy(c));
}

/* A free is subtracted as it is made, not held to the end of its flush: a
 * flush that waits (here in a wrapped array's release, after a device free
 * of 1 MiB) while another thread allocates 1 MiB leaves the peak at 1 MiB,
 * the most ever held (review of issue 23: a batch of the flush's
 * subtractions raised it to 2 MiB). */
typedef struct {
  dv_context *c;
  pthread_mutex_t m;
  pthread_cond_t cv;
  int step; /* 1: the release runs, 2: the other thread has allocated */
  dv_array *made;
  dv_status made_rc, seen_rc; /* checked on the main thread (cmocka asserts there only) */
  dv_stats seen;
} flush_race;

static void *flush_race_alloc(void *arg) {
  flush_race *r = arg;
  pthread_mutex_lock(&r->m);
  while (r->step < 1) pthread_cond_wait(&r->cv, &r->m);
  pthread_mutex_unlock(&r->m);
  int64_t n = 1 << 20;
  r->made_rc = dv_device_array(r->c, 1, &n, dv_dtype_get(DV_UINT8), NULL, 'C', NULL, &r->made);
  r->seen.size = sizeof r->seen;
  r->seen_rc = dv_context_stats(r->c, &r->seen);
  pthread_mutex_lock(&r->m);
  r->step = 2;
  pthread_cond_broadcast(&r->cv);
  pthread_mutex_unlock(&r->m);
  return NULL;
}

static void flush_race_release(void *arg) { /* runs inside the flush */
  flush_race *r = arg;
  pthread_mutex_lock(&r->m);
  r->step = 1;
  pthread_cond_broadcast(&r->cv);
  while (r->step < 2) pthread_cond_wait(&r->cv, &r->m);
  pthread_mutex_unlock(&r->m);
}

static void test_stats_peak_during_a_flush(void **state) {
  (void)state;
  if (strcmp(g_backend, "host") != 0) skip(); /* a host pointer is a buffer only to the simulator */
  dv_context *c;
  assert_ok(test_context(&c, NULL));
  static double mem[8];
  int64_t n = 8;
  dv_array *w = NULL;
  flush_race r = {.c = c, .step = 0};
  pthread_mutex_init(&r.m, NULL);
  pthread_cond_init(&r.cv, NULL);
  assert_ok(dv_device_array_wrap(c, mem, 0, sizeof mem, 1, &n, dv_dtype_get(DV_FLOAT64), NULL,
                                 flush_race_release, &r, &w));
  dv_array *a = bytes_array(c, 1 << 20);
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, flush_race_alloc, &r), 0);
  dv_array_release(a); /* queued first: freed first */
  dv_array_release(w);
  assert_ok(dv_context_flush_deallocs(c));
  assert_int_equal(pthread_join(t, NULL), 0);
  assert_ok(r.made_rc);
  assert_ok(r.seen_rc);
  assert_int_equal(r.seen.device.current, 1 << 20);
  assert_int_equal(r.seen.device.peak, 1 << 20);
  dv_stats st = stats_of(c);
  assert_int_equal(st.device.peak, 1 << 20);
  dv_array_release(r.made);
  pthread_mutex_destroy(&r.m);
  pthread_cond_destroy(&r.cv);
  assert_ok(dv_context_destroy(c));
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      T(test_count_limit),       T(test_views_are_references), T(test_byte_limit),
      T(test_defer_cleanup_nesting), T(test_oom_retry),        T(test_failing_free_does_not_strand),
      T(test_one_queue), T(test_stats_json), T(test_stats_versions),
      T(test_stats_exact_through_views), T(test_stats_when_queue_cannot_grow),
      T(test_stats_peak_during_a_flush),
  };
  return test_main(argc, argv, "memory", tests, sizeof tests / sizeof tests[0]);
}
