/* Several threads share one context and two streams: transfers, events,
 * releases that flush the deferred queue concurrently, statistics reads.
 * Run under ThreadSanitizer by the tsan target. */
#include <pthread.h>

#include "common.h"

enum { THREADS = 4, ITERS = 150, N = 257 };
static dv_stream *g_streams[2];

static void *worker(void *arg) {
  int id = (int)(intptr_t)arg;
  int32_t *src = malloc(N * 4), *dst = malloc(N * 4);
  int errors = 0;
  for (int it = 0; it < ITERS; it++) {
    for (int i = 0; i < N; i++) src[i] = id * 100000 + it * 1000 + i, dst[i] = -1;
    int64_t n = N;
    dv_array *hs = NULL, *hd = NULL, *d = NULL, *v = NULL;
    dv_stream *s = (it % 3 == 2) ? NULL : g_streams[(id + it) & 1];
    dv_event *e = NULL;
    if (dv_host_array_wrap(g_ctx, src, 1, &n, dv_dtype_get(DV_INT32), NULL, &hs) ||
        dv_host_array_wrap(g_ctx, dst, 1, &n, dv_dtype_get(DV_INT32), NULL, &hd) ||
        dv_to_device(g_ctx, hs, s, 1, NULL, &d) || dv_event_create(g_ctx, 0, &e)) {
      errors++;
      goto next;
    }
    dv_index rev[1] = {DV_SLICE(DV_NONE, DV_NONE, -1)};
    if (dv_array_slice(d, 1, rev, &v) || dv_copy_to_host(v, hd, s, NULL) || dv_event_record(e, s) ||
        dv_event_synchronize(e)) {
      errors++;
      goto next;
    }
    for (int i = 0; i < N; i++)
      if (dst[i] != src[N - 1 - i]) {
        errors++;
        break;
      }
    if (it % 10 == 0) {
      dv_stats st = {.size = sizeof st};
      if (dv_context_stats(g_ctx, &st)) errors++;
      dv_defer_cleanup_begin(g_ctx);
      dv_defer_cleanup_end(g_ctx);
    }
  next:
    dv_event_release(e);
    dv_array_release(v), dv_array_release(d), dv_array_release(hs), dv_array_release(hd);
  }
  free(src), free(dst);
  return (void *)(intptr_t)errors;
}

static void test_shared_context(void **state) {
  (void)state;
  assert_ok(dv_stream_create(g_ctx, 0, &g_streams[0]));
  assert_ok(dv_stream_create(g_ctx, DV_STREAM_NON_BLOCKING, &g_streams[1]));
  pthread_t t[THREADS];
  for (int i = 0; i < THREADS; i++) assert_int_equal(pthread_create(&t[i], NULL, worker, (void *)(intptr_t)i), 0);
  int errors = 0;
  for (int i = 0; i < THREADS; i++) {
    void *r;
    pthread_join(t[i], &r);
    errors += (int)(intptr_t)r;
  }
  assert_int_equal(errors, 0);
  assert_ok(dv_context_synchronize(g_ctx));
  dv_stream_release(g_streams[0]);
  dv_stream_release(g_streams[1]);
  dv_stats st = {.size = sizeof st};
  assert_ok(dv_context_stats(g_ctx, &st));
  assert_int_equal(st.arrays.current, 0);
  assert_int_equal(st.arrays.total, THREADS * ITERS * 4);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {T(test_shared_context)};
  return test_main(argc, argv, "threads", tests, sizeof tests / sizeof tests[0]);
}
