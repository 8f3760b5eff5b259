/* Synchronous dense copies claim an idle stream without its lock (issue 13;
 * on the host simulator one compare-and-swap of the stream's claim word):
 * they must still run after work queued on the same stream before them,
 * and threads mixing synchronous copies, queued copies and synchronizes on
 * one stream must see their own data and exact transfer counts. */
#include <pthread.h>
#include <stdbool.h>

#include "common.h"

static dv_array *host1(void *buf, int64_t n) {
  dv_array *a = NULL;
  assert_ok(dv_host_array_wrap(g_ctx, buf, 1, &n, dv_dtype_get(DV_UINT8), NULL, &a));
  return a;
}

static dv_array *dev1(int64_t n) {
  dv_array *a = NULL;
  assert_ok(dv_device_array(g_ctx, 1, &n, dv_dtype_get(DV_UINT8), NULL, 'C', NULL, &a));
  return a;
}

static bool all_equal(const unsigned char *p, size_t n, unsigned char v) {
  for (size_t i = 0; i < n; i++)
    if (p[i] != v) return false;
  return true;
}

/* Work queued on the default stream (a large copy, then a device-to-device
 * one) comes before a synchronous copy issued after it by the same thread. */
static void test_sync_copy_runs_after_queued_work(void **state) {
  (void)state;
  enum { BYTES = 1 << 20, ROUNDS = 8 };
  dv_stream *def = dv_context_default_stream(g_ctx);
  unsigned char *in = malloc(BYTES), *out = malloc(BYTES);
  assert_non_null(in), assert_non_null(out);
  dv_array *hin = host1(in, BYTES), *hout = host1(out, BYTES), *x = dev1(BYTES), *y = dev1(BYTES);
  for (int k = 0; k < ROUNDS; k++) {
    unsigned char v = (unsigned char)(k * 37 + 1);
    memset(in, v, BYTES);
    memset(out, 0, BYTES);
    assert_ok(dv_copy_to_device(x, hin, def)); /* queued */
    assert_ok(dv_array_copy(y, x, def));         /* queued behind it */
    assert_ok(dv_copy_to_host(y, hout, NULL, NULL)); /* synchronous: after both */
    if (!all_equal(out, BYTES, v)) fail_msg("round %d: the synchronous copy overtook queued work", k);
    /* and a synchronous copy in, then a queued one out, then synchronize */
    memset(in, (unsigned char)(v + 1), BYTES);
    assert_ok(dv_copy_to_device(x, hin, NULL));
    assert_ok(dv_copy_to_host(x, hout, def, NULL));
    assert_ok(dv_stream_synchronize(def));
    if (!all_equal(out, BYTES, (unsigned char)(v + 1))) fail_msg("round %d: the queued copy missed the synchronous one", k);
  }
  dv_array_release(hin), dv_array_release(hout), dv_array_release(x), dv_array_release(y);
  free(in), free(out);
}

enum { THREADS = 3, ITERS = 300, SMALL = 4096 };

/* Threads 0 and 1: synchronous round trips; thread 2: round trips queued on
 * the default stream, then a synchronize of that stream. */
static void *worker(void *arg) {
  int id = (int)(intptr_t)arg;
  dv_stream *s = id == 2 ? dv_context_default_stream(g_ctx) : NULL;
  unsigned char *in = malloc(SMALL), *out = malloc(SMALL);
  dv_array *hin = NULL, *hout = NULL, *d = NULL;
  int64_t n = SMALL;
  intptr_t errors = 0;
  if (!in || !out || dv_host_array_wrap(g_ctx, in, 1, &n, dv_dtype_get(DV_UINT8), NULL, &hin) ||
      dv_host_array_wrap(g_ctx, out, 1, &n, dv_dtype_get(DV_UINT8), NULL, &hout) ||
      dv_device_array(g_ctx, 1, &n, dv_dtype_get(DV_UINT8), NULL, 'C', NULL, &d)) {
    errors = ITERS;
    goto done;
  }
  for (int it = 0; it < ITERS; it++) {
    unsigned char v = (unsigned char)(id * 80 + it);
    memset(in, v, SMALL);
    memset(out, 0, SMALL);
    if (dv_copy_to_device(d, hin, s) || dv_copy_to_host(d, hout, s, NULL) || (s && dv_stream_synchronize(s)) ||
        !all_equal(out, SMALL, v))
      errors++;
  }
done:
  dv_array_release(hin), dv_array_release(hout), dv_array_release(d);
  free(in), free(out);
  return (void *)errors;
}

static void test_threads_share_the_default_stream(void **state) {
  (void)state;
  dv_stats a = {.size = sizeof a}, b = {.size = sizeof b};
  assert_ok(dv_context_stats(g_ctx, &a));
  pthread_t t[THREADS];
  for (int i = 0; i < THREADS; i++) assert_int_equal(pthread_create(&t[i], NULL, worker, (void *)(intptr_t)i), 0);
  intptr_t errors = 0;
  for (int i = 0; i < THREADS; i++) {
    void *r;
    pthread_join(t[i], &r);
    errors += (intptr_t)r;
  }
  assert_int_equal(errors, 0);
  assert_ok(dv_context_synchronize(g_ctx));
  assert_ok(dv_context_stats(g_ctx, &b));
  /* every copy counted once, none lost between threads */
  assert_int_equal(b.transfers_h2d - a.transfers_h2d, THREADS * ITERS);
  assert_int_equal(b.transfers_d2h - a.transfers_d2h, THREADS * ITERS);
  assert_int_equal(b.bytes_h2d - a.bytes_h2d, (uint64_t)THREADS * ITERS * SMALL);
  assert_int_equal(b.bytes_d2h - a.bytes_d2h, (uint64_t)THREADS * ITERS * SMALL);
}

/* Copy counters are kept per thread and per context: a thread alternating
 * between two contexts, and contexts made after others were destroyed (at
 * the same address, possibly), count into the right context, exactly. */
static void copies_on(dv_context *c, int k, unsigned char *buf) {
  int64_t n = 64;
  dv_array *h = NULL, *d = NULL;
  assert_ok(dv_host_array_wrap(c, buf, 1, &n, dv_dtype_get(DV_UINT8), NULL, &h));
  assert_ok(dv_device_array(c, 1, &n, dv_dtype_get(DV_UINT8), NULL, 'C', NULL, &d));
  for (int i = 0; i < k; i++) assert_ok(dv_copy_to_device(d, h, NULL));
  assert_ok(dv_copy_to_host(d, h, NULL, NULL));
  dv_array_release(h), dv_array_release(d);
}

static void test_counts_follow_their_context(void **state) {
  (void)state;
  unsigned char buf[64] = {0};
  for (int round = 0; round < 3; round++) {
    dv_context *other = NULL;
    assert_ok(test_context(&other, NULL));
    dv_stats a0 = {.size = sizeof a0}, b0 = {.size = sizeof b0}, a1 = {.size = sizeof a1}, b1 = {.size = sizeof b1};
    assert_ok(dv_context_stats(g_ctx, &a0));
    assert_ok(dv_context_stats(other, &b0));
    for (int i = 0; i < 5; i++) {
      copies_on(g_ctx, 2, buf);
      copies_on(other, 3, buf);
    }
    assert_ok(dv_context_stats(g_ctx, &a1));
    assert_ok(dv_context_stats(other, &b1));
    assert_int_equal(a1.transfers_h2d - a0.transfers_h2d, 10);
    assert_int_equal(a1.transfers_d2h - a0.transfers_d2h, 5);
    assert_int_equal(a1.bytes_h2d - a0.bytes_h2d, 640);
    assert_int_equal(b1.transfers_h2d - b0.transfers_h2d, 15);
    assert_int_equal(b1.transfers_d2h - b0.transfers_d2h, 5);
    assert_int_equal(b1.copies - b0.copies, 20);
    assert_ok(dv_context_destroy(other));
  }
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {T(test_sync_copy_runs_after_queued_work), T(test_threads_share_the_default_stream),
                                     T(test_counts_follow_their_context)};
  return test_main(argc, argv, "claim", tests, sizeof tests / sizeof tests[0]);
}
