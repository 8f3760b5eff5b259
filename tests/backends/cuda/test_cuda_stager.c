/*
 * Asynchronous pageable copies on the CUDA family without host functions
 * (issue 36 item 5; src/backends/cudafam/fam_stager.c), on the CUDA and HIP
 * driver doubles, which run every process's stream callbacks one at a time
 * as the reference allows: the host side of a staged copy is done by
 * devarray's staging thread for the stream, and the stream waits for it
 * with cuStreamWaitValue64 on a word of mapped pinned memory, so a copy on
 * one stream never waits for a callback on another.  Without the driver's
 * stream memory operations (dvdouble_set_memops(0)) the copies go through
 * callbacks, and wait behind the other stream's.
 *
 * Run as stager.cuda and stager.hip; a real driver (no double) skips.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "common.h"

typedef void (*set_fn)(int on);
typedef long (*calls_fn)(const char *name);
typedef size_t (*pinned_fn)(size_t *peak);

/* The driver the backend loaded (a reference dlclose'd by the caller). */
static void *driver(void) {
  if (strcmp(g_backend, "hip")) return dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  void *h = dlopen("libamdhip64.so", RTLD_NOW | RTLD_NOLOAD);
  if (!h) h = dlopen("libamdhip64.so.6", RTLD_NOW | RTLD_NOLOAD);
  if (!h) h = dlopen("libamdhip64.so.5", RTLD_NOW | RTLD_NOLOAD);
  return h;
}

/* A control of the double, NULL (the test skips) with a real driver. */
static void *double_sym(const char *name) {
  void *h = driver();
  void *f = h ? dlsym(h, name) : NULL;
  if (h) dlclose(h);
  if (!f)
    printf("SKIPPED: needs the %s test double's %s (a real driver is loaded)\n", g_backend, name);
  return f;
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* A stream callback that holds the driver's callback thread until opened,
 * or limit_s seconds have passed. */
typedef struct gate {
  _Atomic int entered, open, timed_out;
  double limit_s;
} gate;

static void gate_cb(dv_stream *s, dv_status st, void *user) {
  (void)s, (void)st;
  gate *g = user;
  atomic_store(&g->entered, 1);
  double t0 = now_s();
  while (!atomic_load(&g->open)) {
    if (now_s() - t0 > g->limit_s) {
      atomic_store(&g->timed_out, 1);
      break;
    }
    nanosleep(&(struct timespec){0, 1000000}, NULL);
  }
}

static void gate_entered(gate *g) {
  for (int i = 0; i < 5000 && !atomic_load(&g->entered); i++)
    nanosleep(&(struct timespec){0, 1000000}, NULL);
  assert_true(atomic_load(&g->entered));
}

static void *open_later(void *arg) {
  nanosleep(&(struct timespec){0, 300000000}, NULL);
  atomic_store(&((gate *)arg)->open, 1);
  return NULL;
}

static void fill(float *p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++) p[i] = (float)((i * 2654435761u + seed) % 100003u);
}

typedef struct pair {
  dv_context *c;
  dv_array *d, *hs, *ho;
  float *src, *out;
  size_t bytes;
} pair;

static void pair_open(pair *p, dv_context *c, int64_t n, unsigned seed) {
  memset(p, 0, sizeof *p);
  p->c = c;
  p->bytes = (size_t)n * 4;
  p->src = malloc(p->bytes), p->out = malloc(p->bytes);
  assert_non_null(p->src), assert_non_null(p->out);
  fill(p->src, (size_t)n, seed);
  memset(p->out, 0, p->bytes);
  const dv_dtype *dt = dv_dtype_get(DV_FLOAT32);
  assert_ok(dv_host_array_wrap(c, p->src, 1, &n, dt, NULL, &p->hs));
  assert_ok(dv_host_array_wrap(c, p->out, 1, &n, dt, NULL, &p->ho));
  assert_ok(dv_device_array(c, 1, &n, dt, NULL, 'C', NULL, &p->d));
}

static void pair_close(pair *p) {
  dv_array_release(p->d), dv_array_release(p->hs), dv_array_release(p->ho);
  free(p->src), free(p->out);
}

/* A 16 MiB asynchronous upload through the legacy stream (its fills by the
 * staging thread: the legacy stream is never filled at the call) and the
 * download on a created stream, each with its synchronize, while a
 * callback on a third, non-blocking stream holds the driver's callback
 * thread.  Returns how long the two took; *cb_calls: cuStreamAddCallback
 * calls the copies made. */
static double copies_beside_gate(dv_context *c, pair *p, gate *g, long *cb_calls) {
  calls_fn calls = (calls_fn)double_sym("dvdouble_calls");
  dv_stream *a, *b;
  assert_ok(dv_stream_create(c, DV_STREAM_NON_BLOCKING, &a));
  assert_ok(dv_stream_create(c, 0, &b));
  assert_ok(dv_stream_add_callback(a, gate_cb, g));
  gate_entered(g);
  long before = calls ? calls("cuStreamAddCallback") : 0;
  double t0 = now_s();
  dv_stream *legacy = dv_context_legacy_stream(c);
  assert_ok(dv_copy_to_device(p->d, p->hs, legacy));
  assert_ok(dv_stream_synchronize(legacy));
  assert_ok(dv_copy_to_host(p->d, p->ho, b, NULL));
  assert_ok(dv_stream_synchronize(b));
  double took = now_s() - t0;
  *cb_calls = calls ? calls("cuStreamAddCallback") - before : -1;
  atomic_store(&g->open, 1);
  assert_ok(dv_stream_synchronize(a));
  if (memcmp(p->out, p->src, p->bytes)) fail_msg("the asynchronous 16 MiB round trip differs");
  dv_stream_release(a);
  dv_stream_release(b);
  return took;
}

/* The copies finish while the other stream's callback still holds the
 * callback thread, and queue no callback of their own. */
static void test_async_copy_not_behind_callbacks(void **state) {
  (void)state;
  set_fn memops = (set_fn)double_sym("dvdouble_set_memops");
  if (!memops || !double_sym("dvdouble_calls")) skip();
  memops(1); /* whatever CUDA_DOUBLE_MEMOPS says: the driver this test is about */
  dv_context *c;
  assert_ok(test_context(&c, "staging_chunk=1M", NULL));
  pair p;
  pair_open(&p, c, 4 << 20, 5);
  gate g = {.limit_s = 10};
  long cbs = 0;
  double took = copies_beside_gate(c, &p, &g, &cbs);
  bool timed_out = atomic_load(&g.timed_out);
  if (timed_out)
    fail_msg("asynchronous 16 MiB pageable copies waited %.1f s for a callback on another stream",
             took);
  if (cbs != 0)
    fail_msg("the asynchronous pageable copies queued %ld stream callbacks (expected none)", cbs);
  pair_close(&p);
  assert_ok(dv_context_destroy(c));
}

/* Without stream memory operations the copies use callbacks, which wait
 * behind the other stream's (the open comes from another thread after
 * 0.3 s): still correct, in stream order. */
static void test_without_memops_callbacks(void **state) {
  (void)state;
  set_fn memops = (set_fn)double_sym("dvdouble_set_memops");
  if (!memops || !double_sym("dvdouble_calls")) skip();
  memops(0);
  dv_context *c;
  dv_status rc = test_context(&c, "staging_chunk=1M", NULL);
  memops(1);
  assert_ok(rc);
  pair p;
  pair_open(&p, c, 4 << 20, 6);
  gate g = {.limit_s = 10};
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, open_later, &g), 0);
  long cbs = 0;
  double took = copies_beside_gate(c, &p, &g, &cbs);
  pthread_join(t, NULL);
  if (cbs <= 0) fail_msg("without stream memory operations the copies queued no callback");
  if (took < 0.25)
    fail_msg(
        "without stream memory operations the copies took %.2f s: they did not wait for the "
        "serialized "
        "callbacks (is the double still serializing them?)",
        took);
  pair_close(&p);
  assert_ok(dv_context_destroy(c));
}

typedef struct seen {
  const float *out, *want;
  size_t bytes;
  _Atomic int ok, ran;
} seen;

static void check_cb(dv_stream *s, dv_status st, void *user) {
  (void)s;
  seen *v = user;
  atomic_store(&v->ok, st == DV_OK && !memcmp(v->out, v->want, v->bytes));
  atomic_store(&v->ran, 1);
}

/* Later work on the stream runs after the copy-out: a callback queued
 * right after an asynchronous download sees every byte (the stream waits
 * for the staging thread's drains).  Several pieces, several rounds. */
static void test_later_work_after_drains(void **state) {
  (void)state;
  dv_context *c;
  assert_ok(test_context(&c, "staging_chunk=64K", NULL));
  pair p;
  pair_open(&p, c, 1 << 18, 7); /* 1 MiB: 16 pieces */
  dv_stream *s;
  assert_ok(dv_stream_create(c, 0, &s));
  assert_ok(dv_copy_to_device(p.d, p.hs, NULL));
  for (int round = 0; round < 3; round++) {
    memset(p.out, 0, p.bytes);
    seen v = {.out = p.out, .want = p.src, .bytes = p.bytes};
    assert_ok(dv_copy_to_host(p.d, p.ho, s, NULL));
    assert_ok(dv_stream_add_callback(s, check_cb, &v));
    assert_ok(dv_stream_synchronize(s));
    assert_true(atomic_load(&v.ran));
    if (!atomic_load(&v.ok))
      fail_msg("round %d: a callback after the download saw bytes not yet copied out", round);
  }
  dv_stream_release(s);
  pair_close(&p);
  assert_ok(dv_context_destroy(c));
}

/* A download into host memory, then an upload from the same memory on the
 * same stream (the upload's fills wait for the drains), then a download
 * into another buffer: the bytes make the round trip in stream order. */
static void test_fill_after_drain_in_order(void **state) {
  (void)state;
  dv_context *c;
  assert_ok(test_context(&c, "staging_chunk=64K", NULL));
  int64_t n = 1 << 17;
  pair a, b;
  pair_open(&a, c, n, 8);
  pair_open(&b, c, n, 9);
  dv_stream *s;
  assert_ok(dv_stream_create(c, 0, &s));
  assert_ok(dv_copy_to_device(a.d, a.hs, NULL)); /* a.d holds a.src */
  /* a.d -> b.src (host), b.src -> b.d, b.d -> b.out: b.out must be a.src. */
  assert_ok(dv_copy_to_host(a.d, b.hs, s, NULL));
  assert_ok(dv_copy_to_device(b.d, b.hs, s));
  assert_ok(dv_copy_to_host(b.d, b.ho, s, NULL));
  assert_ok(dv_stream_synchronize(s));
  if (memcmp(b.out, a.src, b.bytes))
    fail_msg("the download, upload, download chain on one stream differs");
  dv_stream_release(s);
  pair_close(&a), pair_close(&b);
  assert_ok(dv_context_destroy(c));
}

/* A stream released with staged work queued: the work still completes
 * (the thread finishes its jobs), and its word of pinned memory goes with
 * the context.  Eight streams, two threads each. */
typedef struct job {
  dv_context *c;
  pair *p;
  dv_status rc;
} job;

static void *stream_worker(void *arg) {
  job *j = arg;
  dv_stream *s;
  j->rc = dv_stream_create(j->c, 0, &s);
  if (j->rc) return NULL;
  j->rc = dv_copy_to_host(j->p->d, j->p->ho, s, NULL);
  dv_stream_release(s); /* with the download queued */
  return NULL;
}

static void test_released_streams_finish(void **state) {
  (void)state;
  pinned_fn pinned = (pinned_fn)double_sym("dvdouble_pinned");
  if (!pinned) skip();
  size_t base = pinned(NULL);
  dv_context *c;
  assert_ok(test_context(&c, "staging_chunk=64K", NULL));
  enum { N = 8 };
  pair p[N];
  job j[N];
  pthread_t t[N];
  for (int i = 0; i < N; i++) {
    pair_open(&p[i], c, 1 << 16, 10 + (unsigned)i);
    assert_ok(dv_copy_to_device(p[i].d, p[i].hs, NULL));
    j[i] = (job){c, &p[i], DV_OK};
  }
  for (int i = 0; i < N; i++)
    assert_int_equal(pthread_create(&t[i], NULL, stream_worker, &j[i]), 0);
  for (int i = 0; i < N; i++) pthread_join(t[i], NULL);
  assert_ok(dv_context_synchronize(c));
  for (int i = 0; i < N; i++) {
    assert_ok(j[i].rc);
    if (memcmp(p[i].out, p[i].src, p[i].bytes))
      fail_msg("stream %d: the download queued before its release differs", i);
    pair_close(&p[i]);
  }
  assert_ok(dv_context_destroy(c));
  if (pinned(NULL) != base)
    fail_msg("%zu bytes pinned after the context went", pinned(NULL) - base);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_async_copy_not_behind_callbacks),
      cmocka_unit_test(test_without_memops_callbacks),
      cmocka_unit_test(test_later_work_after_drains),
      cmocka_unit_test(test_fill_after_drain_in_order),
      cmocka_unit_test(test_released_streams_finish),
  };
  return test_main(argc, argv, "cuda_stager", tests, sizeof tests / sizeof tests[0]);
}
