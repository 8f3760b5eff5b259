#define _DEFAULT_SOURCE
/* Streams, events and callbacks; proof that asynchronous work is really
 * asynchronous (a gate holds the stream; a forgotten synchronize sees old
 * data on the host simulator). */
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include "common.h"

typedef struct gate {
  pthread_mutex_t m;
  pthread_cond_t cv;
  int open;
} gate;

static void gate_cb(dv_stream *s, dv_status st, void *user) {
  (void)s, (void)st;
  gate *g = user;
  pthread_mutex_lock(&g->m);
  while (!g->open) pthread_cond_wait(&g->cv, &g->m);
  pthread_mutex_unlock(&g->m);
}

static void gate_open(gate *g) {
  pthread_mutex_lock(&g->m);
  g->open = 1;
  pthread_cond_broadcast(&g->cv);
  pthread_mutex_unlock(&g->m);
}

static void test_async_is_async(void **state) {
  (void)state;
  enum { N = 4096 };
  int32_t *src = malloc(N * 4), *dst = malloc(N * 4);
  for (int i = 0; i < N; i++) src[i] = i + 1, dst[i] = -1;
  int64_t n = N;
  dv_array *hs, *hd, *d;
  assert_ok(dv_host_array_wrap(g_ctx, src, 1, &n, dv_dtype_get(DV_INT32), NULL, &hs));
  assert_ok(dv_host_array_wrap(g_ctx, dst, 1, &n, dv_dtype_get(DV_INT32), NULL, &hd));
  assert_ok(dv_to_device(g_ctx, hs, NULL, 1, NULL, &d));
  dv_stream *s;
  assert_ok(dv_stream_create(g_ctx, 0, &s));
  gate g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
  assert_ok(dv_stream_add_callback(s, gate_cb, &g));
  assert_ok(dv_copy_to_host(d, hd, s, NULL));
  /* the call returned; the copy has not happened */
  assert_status(dv_stream_query(s), DV_ERR_NOT_READY);
  assert_int_equal(dst[0], -1);
  assert_int_equal(dst[N - 1], -1);
  gate_open(&g);
  assert_ok(dv_stream_synchronize(s));
  assert_int_equal(dst[0], 1);
  assert_int_equal(dst[N - 1], N);
  dv_array_release(hs), dv_array_release(hd), dv_array_release(d);
  dv_stream_release(s);
  free(src), free(dst);
}

/* The simulator's point: forgetting to synchronize shows. */
static void test_forgotten_sync_sees_old_data(void **state) {
  (void)state;
  if (strncmp(g_backend, "host", 4) != 0) skip();
#if defined(__SANITIZE_THREAD__)
  /* This test reads a buffer that an asynchronous copy writes, without
   * synchronizing, on purpose: under ThreadSanitizer that is (rightly) a
   * data race.  It runs in the ASan/UBSan build. */
  skip();
#endif
  dv_context *c;
  assert_ok(test_context(&c, "host_delay_us=50000", NULL));
  int64_t v[64], out[64];
  for (int i = 0; i < 64; i++) v[i] = i, out[i] = 0;
  int64_t n = 64;
  dv_array *hv, *ho, *d;
  assert_ok(dv_host_array_wrap(c, v, 1, &n, dv_dtype_get(DV_INT64), NULL, &hv));
  assert_ok(dv_host_array_wrap(c, out, 1, &n, dv_dtype_get(DV_INT64), NULL, &ho));
  assert_ok(dv_to_device(c, hv, NULL, 1, NULL, &d));
  dv_stream *s;
  assert_ok(dv_stream_create(c, 0, &s));
  assert_ok(dv_copy_to_host(d, ho, s, NULL));
  int64_t seen = out[63]; /* no synchronize: old data */
  assert_int_equal(seen, 0);
  assert_ok(dv_stream_synchronize(s));
  assert_int_equal(out[63], 63); /* with synchronize: new data */
  dv_array_release(hv), dv_array_release(ho), dv_array_release(d);
  dv_stream_release(s);
  assert_ok(dv_context_destroy(c));
}

static void test_events(void **state) {
  (void)state;
  dv_stream *a, *b;
  assert_ok(dv_stream_create(g_ctx, 0, &a));
  assert_ok(dv_stream_create(g_ctx, DV_STREAM_NON_BLOCKING, &b));
  dv_event *start, *stop, *plain;
  assert_ok(dv_event_create(g_ctx, DV_EVENT_TIMING, &start));
  assert_ok(dv_event_create(g_ctx, DV_EVENT_TIMING, &stop));
  assert_ok(dv_event_create(g_ctx, 0, &plain));
  assert_ok(dv_event_query(plain)); /* never recorded: complete */
  float ms = -1;
  assert_status(dv_event_elapsed_ms(start, stop, &ms), DV_ERR_MISUSE);
  gate g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
  assert_ok(dv_event_record(start, a));
  assert_ok(dv_stream_add_callback(a, gate_cb, &g));
  assert_ok(dv_event_record(stop, a));
  assert_status(dv_event_query(stop), DV_ERR_NOT_READY);
  /* b waits for a's event on the device side: b's later work waits too */
  int32_t x = 5, y = 0;
  dv_array *hx, *hy, *d;
  assert_ok(dv_host_array_wrap(g_ctx, &x, 0, NULL, dv_dtype_get(DV_INT32), NULL, &hx));
  assert_ok(dv_host_array_wrap(g_ctx, &y, 0, NULL, dv_dtype_get(DV_INT32), NULL, &hy));
  assert_ok(dv_to_device(g_ctx, hx, NULL, 1, NULL, &d));
  assert_ok(dv_stream_wait_event(b, stop));
  assert_ok(dv_copy_to_host(d, hy, b, NULL));
  usleep(20000);
  assert_status(dv_stream_query(b), DV_ERR_NOT_READY);
  assert_int_equal(y, 0);
  gate_open(&g);
  assert_ok(dv_stream_synchronize(b));
  assert_int_equal(y, 5);
  assert_ok(dv_event_synchronize(stop));
  assert_ok(dv_event_query(stop));
  assert_ok(dv_event_elapsed_ms(start, stop, &ms));
  assert_true(ms >= 0.0f);
  assert_ok(dv_event_record(plain, NULL));
  assert_ok(dv_event_synchronize(plain));
  assert_status(dv_event_elapsed_ms(start, plain, &ms), DV_ERR_INVALID_ARGUMENT);
  dv_array_release(hx), dv_array_release(hy), dv_array_release(d);
  dv_event_release(start), dv_event_release(stop), dv_event_release(plain);
  dv_stream_release(a), dv_stream_release(b);
}

typedef struct order_log {
  pthread_mutex_t m;
  int n, seq[8];
} order_log;
static order_log g_log = {PTHREAD_MUTEX_INITIALIZER, 0, {0}};
static int g_tags[3] = {1, 2, 3};
static void log_cb(dv_stream *s, dv_status st, void *user) {
  (void)s;
  assert_int_equal(st, DV_OK);
  pthread_mutex_lock(&g_log.m);
  g_log.seq[g_log.n++] = *(int *)user;
  pthread_mutex_unlock(&g_log.m);
}

static void test_callbacks_and_auto_sync(void **state) {
  (void)state;
  dv_stream *s;
  assert_ok(dv_stream_create(g_ctx, 0, &s));
  dv_stream *bad = (dv_stream *)1;
  assert_status(dv_stream_create(g_ctx, 0x100, &bad), DV_ERR_INVALID_ARGUMENT);
  assert_null(bad);
  g_log.n = 0;
  assert_ok(dv_stream_auto_sync_begin(s));
  for (int i = 0; i < 3; i++) assert_ok(dv_stream_add_callback(s, log_cb, &g_tags[i]));
  assert_ok(dv_stream_auto_sync_end(s)); /* synchronizes */
  assert_int_equal(g_log.n, 3);
  for (int i = 0; i < 3; i++) assert_int_equal(g_log.seq[i], i + 1);
  assert_status(dv_stream_auto_sync_end(s), DV_ERR_MISUSE);
  assert_status(dv_stream_add_callback(s, NULL, NULL), DV_ERR_NULL_ARGUMENT);
  /* the default stream is borrowed: releasing it does nothing */
  dv_stream *def = dv_context_default_stream(g_ctx);
  dv_stream_release(def);
  assert_ok(dv_stream_synchronize(def));
  assert_ok(dv_context_synchronize(g_ctx));
  dv_stream_release(s);
}

static void test_busy_context(void **state) {
  (void)state;
  dv_context *c;
  assert_ok(test_context(&c, NULL));
  dv_stream *s;
  assert_ok(dv_stream_create(c, 0, &s));
  assert_status(dv_context_destroy(c), DV_ERR_BUSY);
  dv_stream_release(s);
  int64_t n = 4;
  dv_array *a;
  assert_ok(dv_device_array(c, 1, &n, dv_dtype_get(DV_INT8), NULL, 'C', NULL, &a));
  assert_status(dv_context_destroy(c), DV_ERR_BUSY);
  assert_non_null(strstr(dv_last_error(), "1 array"));
  dv_array_release(a);
  assert_ok(dv_context_destroy(c));
  assert_ok(dv_context_destroy(NULL));
}

/* dv_event_retain (issue 35): each reference is released once; the last
 * release destroys the event, and until then it keeps the context busy and
 * stays usable. */
static void test_event_retain(void **state) {
  (void)state;
  dv_context *c;
  assert_ok(test_context(&c, NULL));
  dv_event *e;
  assert_ok(dv_event_create(c, 0, &e));
  assert_ptr_equal(dv_event_retain(e), e);
  assert_null(dv_event_retain(NULL));
  dv_event_release(e); /* one reference left */
  assert_ok(dv_event_record(e, NULL));
  assert_ok(dv_event_synchronize(e));
  assert_ok(dv_event_query(e));
  assert_status(dv_context_destroy(c), DV_ERR_BUSY);
  assert_non_null(strstr(dv_last_error(), "event"));
  dv_event_release(e); /* the last: destroyed */
  dv_event_release(NULL);
  assert_ok(dv_context_destroy(c));
}

/* ---- the callback rule (issue 36, item 4) ------------------------------------------------ */

/* A devarray call that would reach the backend's driver, made from inside a
 * stream callback, is DV_ERR_MISUSE on every backend, before anything
 * changes (CUDA's rule: no driver call in a host function); calls that do
 * not reach it (metadata, views, statuses, messages) work there, and the
 * same calls work outside. */
enum { RULE_CALLS = 20 };
typedef struct rule_probe {
  dv_context *ctx;
  dv_stream *other;
  dv_array *d, *h;
  dv_event *ev;
  int32_t *hbuf;
  dv_status st[RULE_CALLS];
  const char *name[RULE_CALLS];
  char why[RULE_CALLS][512];
  void *made[8]; /* what a refused call must have left NULL */
  /* metadata inside the callback */
  int ndim;
  size_t nbytes;
  int64_t view_len;
  const char *status_name;
  dv_stream *def;
  atomic_int ran;
} rule_probe;

static void noop_cb(dv_stream *s, dv_status st, void *user) { (void)s, (void)st, (void)user; }

/* The calls that reach the driver, each into p->st[i] with its message. */
static int rule_calls(rule_probe *p) {
  int i = 0;
  dv_context *c = p->ctx;
  int64_t n = 16;
  const dv_dtype *dt = dv_dtype_get(DV_INT32);
  int32_t item = 0;
  size_t fb = 0, tb = 0;
#define CALL(expr)                                                 \
  do {                                                             \
    p->name[i] = #expr;                                            \
    p->st[i] = (expr);                                             \
    snprintf(p->why[i], sizeof p->why[i], "%s", dv_last_error()); \
    i++;                                                           \
  } while (0)
  /* the synchronous ones first: outside a callback they would race with
   * the copy and memset queued on the non-blocking stream `other` */
  CALL(dv_copy_to_host(p->d, p->h, NULL, NULL));
  CALL(dv_array_get_item(p->d, (int64_t[]){0}, &item, sizeof item, NULL));
  CALL(dv_copy_to_device(p->d, p->h, p->other));
  CALL(dv_array_memset(p->d, 0x55, p->other));
  CALL(dv_device_array(c, 1, &n, dt, NULL, 'C', NULL, (dv_array **)&p->made[0]));
  CALL(dv_pinned_array(c, 1, &n, dt, NULL, 'C', (dv_array **)&p->made[1]));
  CALL(dv_to_device(c, p->h, p->other, 1, NULL, (dv_array **)&p->made[2]));
  CALL(dv_stream_create(c, 0, (dv_stream **)&p->made[3]));
  CALL(dv_stream_query(p->other));
  CALL(dv_stream_synchronize(p->other));
  CALL(dv_stream_add_callback(p->other, noop_cb, NULL));
  CALL(dv_event_create(c, 0, (dv_event **)&p->made[4]));
  CALL(dv_event_record(p->ev, p->other));
  CALL(dv_event_query(p->ev));
  CALL(dv_stream_wait_event(p->other, p->ev));
  CALL(dv_context_synchronize(c));
  CALL(dv_array_register(p->h));
  CALL(dv_memory_info(c, &fb, &tb));
  CALL(dv_context_create(NULL, (dv_context **)&p->made[5]));
#undef CALL
  return i;
}

static void rule_cb(dv_stream *s, dv_status st, void *user) {
  (void)s, (void)st;
  rule_probe *p = user;
  rule_calls(p);
  p->ndim = dv_array_ndim(p->d);
  p->nbytes = dv_array_nbytes(p->d);
  dv_array *v = NULL;
  dv_index ix = DV_SLICE(2, 10, 2);
  if (dv_array_slice(p->d, 1, &ix, &v) == DV_OK) p->view_len = dv_array_shape(v)[0];
  dv_array_release(v); /* a view: the allocation keeps its other reference */
  p->status_name = dv_status_name(DV_ERR_MISUSE);
  p->def = dv_context_default_stream(p->ctx);
  atomic_store(&p->ran, 1);
}

static void test_callback_rule(void **state) {
  (void)state;
  int64_t n = 16;
  const dv_dtype *dt = dv_dtype_get(DV_INT32);
  rule_probe *p = calloc(1, sizeof *p);
  assert_non_null(p);
  p->ctx = g_ctx;
  p->hbuf = malloc(16 * 4);
  for (int i = 0; i < 16; i++) p->hbuf[i] = i + 1;
  assert_ok(dv_host_array_wrap(g_ctx, p->hbuf, 1, &n, dt, NULL, &p->h));
  assert_ok(dv_device_array(g_ctx, 1, &n, dt, NULL, 'C', NULL, &p->d));
  assert_ok(dv_array_memset(p->d, 0, NULL));
  assert_ok(dv_stream_create(g_ctx, DV_STREAM_NON_BLOCKING, &p->other));
  assert_ok(dv_event_create(g_ctx, 0, &p->ev));
  dv_stream *s;
  assert_ok(dv_stream_create(g_ctx, DV_STREAM_NON_BLOCKING, &s));
  for (int i = 0; i < RULE_CALLS; i++) p->st[i] = DV_OK;
  assert_ok(dv_stream_add_callback(s, rule_cb, p));
  assert_ok(dv_stream_synchronize(s));
  assert_int_equal(atomic_load(&p->ran), 1);
  int ncalls = 0;
  while (ncalls < RULE_CALLS && p->name[ncalls]) ncalls++;
  assert_true(ncalls > 15);
  for (int i = 0; i < ncalls; i++) {
    if (p->st[i] != DV_ERR_MISUSE)
      fail_msg("%s in a stream callback on %s: %s (%s), want DV_ERR_MISUSE", p->name[i], g_backend,
               dv_status_name(p->st[i]), p->why[i]);
    if (!strstr(p->why[i], "stream callback") || !strstr(p->why[i], "another thread"))
      fail_msg("%s: the refusal does not say why and what to do: \"%s\"", p->name[i], p->why[i]);
  }
  assert_non_null(strstr(p->why[8], "dv_stream_query")); /* the function is named */
  for (size_t i = 0; i < sizeof p->made / sizeof p->made[0]; i++) assert_null(p->made[i]);
  /* the metadata calls worked in the callback */
  assert_int_equal(p->ndim, 1);
  assert_int_equal(p->nbytes, 64);
  assert_int_equal(p->view_len, 4);
  assert_string_equal(p->status_name, "DV_ERR_MISUSE");
  assert_ptr_equal(p->def, dv_context_default_stream(g_ctx));
  /* nothing the refused calls would have done happened */
  assert_ok(dv_stream_synchronize(p->other));
  int32_t back[16];
  int64_t bn = 16;
  dv_array *hb;
  assert_ok(dv_host_array_wrap(g_ctx, back, 1, &bn, dt, NULL, &hb));
  assert_ok(dv_copy_to_host(p->d, hb, NULL, NULL));
  for (int i = 0; i < 16; i++) assert_int_equal(back[i], 0); /* neither the copy nor the memset */
  assert_int_equal(dv_array_is_pinned(p->h), 0);
  /* Outside a callback, on this thread, the same calls work. */
  memset(p->st, 0xff, sizeof p->st);
  int again = rule_calls(p);
  assert_int_equal(again, ncalls);
  for (int i = 0; i < ncalls; i++)
    if (p->st[i] != DV_OK && !(p->st[i] == DV_ERR_NOT_READY && strstr(p->name[i], "_query(")))
      fail_msg("%s outside a callback on %s: %s (%s)", p->name[i], g_backend, dv_status_name(p->st[i]),
               p->why[i]);
  assert_ok(dv_stream_synchronize(p->other));
  assert_ok(dv_copy_to_host(p->d, hb, NULL, NULL));
  assert_int_equal(back[0], 0x55555555); /* the memset after the copy, on `other` */
  assert_int_equal(dv_array_is_pinned(p->h), 1);
  assert_ok(dv_array_unregister(p->h));
  dv_array_release((dv_array *)p->made[0]), dv_array_release((dv_array *)p->made[1]);
  dv_array_release((dv_array *)p->made[2]);
  dv_stream_release((dv_stream *)p->made[3]);
  dv_event_release((dv_event *)p->made[4]);
  assert_ok(dv_context_destroy((dv_context *)p->made[5]));
  dv_array_release(hb);
  dv_event_release(p->ev);
  dv_stream_release(p->other), dv_stream_release(s);
  dv_array_release(p->d), dv_array_release(p->h);
  free(p->hbuf);
  free(p);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {T(test_async_is_async), T(test_forgotten_sync_sees_old_data),
                                     T(test_events), T(test_event_retain), T(test_callbacks_and_auto_sync),
                                     T(test_busy_context), T(test_callback_rule)};
  return test_main(argc, argv, "streams", tests, sizeof tests / sizeof tests[0]);
}
