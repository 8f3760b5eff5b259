/* The pool: stream-ordered reuse, cross-stream reuse only after the fence,
 * split/coalesce, trim, out-of-memory release-and-retry, statistics, the
 * snapshot and CSV log, a third-party manager, and a randomized model test. */
#define _DEFAULT_SOURCE
#include <pthread.h>
#include <unistd.h>

#include "common.h"

static dv_context *pool_ctx(const char *extra) {
  dv_context *c;
  assert_ok(test_context(&c, "memory_manager=pool", extra, NULL));
  assert_string_equal(dv_context_memory_manager(c), "pool");
  return c;
}

static dv_array *bytes_on(dv_context *c, int64_t n, dv_stream *s) {
  dv_array *a;
  assert_ok(dv_device_array(c, 1, &n, dv_dtype_get(DV_UINT8), NULL, 'C', s, &a));
  return a;
}

/* The device address of an array's first element (white-box: block identity). */
#include "array/array.h"
static uintptr_t addr_of(dv_array *a) { return (uintptr_t)a->alloc->buf + a->alloc->buf_offset + (uintptr_t)a->offset; }

static void release_now(dv_context *c, dv_array *a) {
  dv_array_release(a);
  assert_ok(dv_context_flush_deallocs(c));
}

static void test_same_stream_reuse(void **state) {
  (void)state;
  dv_context *c = pool_ctx(NULL);
  dv_stream *s;
  assert_ok(dv_stream_create(c, 0, &s));
  for (int64_t n = 1000; n <= (int64_t)8 << 20; n *= 7) {
    dv_array *a = bytes_on(c, n, s);
    uintptr_t x = addr_of(a);
    assert_ok(dv_array_memset(a, 1, s)); /* work still queued when freed is fine */
    release_now(c, a);
    dv_array *b = bytes_on(c, n, s);
    assert_int_equal(addr_of(b), x); /* at once, on the same stream */
    release_now(c, b);
  }
  dv_mm_stats st;
  assert_ok(dv_memory_stats(c, &st));
  assert_true(st.hits >= 5);
  assert_int_equal(st.allocated.current, 0);
  dv_stream_release(s);
  assert_ok(dv_context_destroy(c));
}

typedef struct gate {
  pthread_mutex_t m;
  pthread_cond_t cv;
  int open;
} gate;
static void gate_cb(dv_stream *s, dv_status st, void *u) {
  (void)s, (void)st;
  gate *g = u;
  pthread_mutex_lock(&g->m);
  while (!g->open) pthread_cond_wait(&g->cv, &g->m);
  pthread_mutex_unlock(&g->m);
}

/* A block freed on stream A while A's work on it is still queued must not be
 * given to stream B until A has passed the free; the simulator's real
 * asynchrony makes a wrong early reuse visible as corrupted data. */
static void test_cross_stream_reuse_waits(void **state) {
  (void)state;
  dv_context *c = pool_ctx(NULL);
  dv_stream *a, *b;
  assert_ok(dv_stream_create(c, 0, &a));
  assert_ok(dv_stream_create(c, 0, &b));
  enum { N = 4096 };
  uint8_t *out = malloc(N), *src = malloc(N);
  memset(src, 7, N);
  memset(out, 0, N);
  int64_t n = N;
  dv_array *hs, *ho;
  assert_ok(dv_host_array_wrap(c, src, 1, &n, dv_dtype_get(DV_UINT8), NULL, &hs));
  assert_ok(dv_host_array_wrap(c, out, 1, &n, dv_dtype_get(DV_UINT8), NULL, &ho));
  dv_array *x = bytes_on(c, N, a);
  assert_ok(dv_copy_to_device(x, hs, NULL)); /* x = 7s */
  uintptr_t xa = addr_of(x);
  gate g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
  assert_ok(dv_stream_add_callback(a, gate_cb, &g));
  assert_ok(dv_copy_to_host(x, ho, a, NULL)); /* queued behind the gate */
  release_now(c, x);                          /* freed on A, A's read still pending */
  dv_array *y = bytes_on(c, N, b);            /* must not be x's block */
  assert_true(addr_of(y) != xa);
  assert_ok(dv_array_memset(y, 0xEE, b)); /* runs at once on B */
  assert_ok(dv_stream_synchronize(b));
  pthread_mutex_lock(&g.m);
  g.open = 1;
  pthread_cond_broadcast(&g.cv);
  pthread_mutex_unlock(&g.m);
  assert_ok(dv_stream_synchronize(a));
  for (int i = 0; i < N; i++) assert_int_equal(out[i], 7); /* A read the data it wrote */
  /* once A has passed the free, B may have the block (found by a query of
   * the fence, never by a host synchronize inside the pool) */
  dv_array *z[50] = {0};
  int reused = 0, k = 0;
  for (; k < 50 && !reused; k++) {
    z[k] = bytes_on(c, N, b); /* kept alive, so that x's block is the candidate */
    reused = addr_of(z[k]) == xa;
  }
  assert_true(reused);
  for (int i = 0; i < k; i++) dv_array_release(z[i]);
  dv_array_release(y);
  dv_array_release(hs), dv_array_release(ho);
  dv_stream_release(a), dv_stream_release(b);
  free(out), free(src);
  assert_ok(dv_context_destroy(c));
}

static void test_split_coalesce_trim(void **state) {
  (void)state;
  dv_context *c = pool_ctx("host_memory=256M");
  dv_array *big = bytes_on(c, 24 << 20, NULL);
  release_now(c, big);
  dv_mm_stats st;
  assert_ok(dv_memory_stats(c, &st));
  assert_int_equal(st.reserved.current, 24 << 20);
  assert_int_equal(st.segments, 1);
  /* three 6 MiB blocks carved from the cached 24 MiB segment: splits */
  dv_array *p[3];
  for (int i = 0; i < 3; i++) p[i] = bytes_on(c, 6 << 20, NULL);
  assert_ok(dv_memory_stats(c, &st));
  assert_int_equal(st.reserved.current, 24 << 20);
  assert_true(st.splits >= 3);
  assert_int_equal(st.largest_free, 6 << 20);
  /* free the middle one, then its neighbours: they coalesce back */
  release_now(c, p[1]);
  release_now(c, p[0]);
  release_now(c, p[2]);
  assert_ok(dv_memory_stats(c, &st));
  assert_true(st.merges >= 2);
  assert_int_equal(st.largest_free, 24 << 20);
  assert_int_equal(st.allocated.current, 0);
  /* the snapshot shows one free segment */
  size_t need = 0;
  assert_ok(dv_memory_snapshot_json(c, NULL, 0, &need));
  char *js = malloc(need + 1);
  assert_ok(dv_memory_snapshot_json(c, js, need + 1, &need));
  assert_non_null(strstr(js, "\"kind\":\"large\""));
  assert_non_null(strstr(js, "\"state\":\"free\""));
  assert_null(strstr(js, "\"state\":\"allocated\""));
  free(js);
  /* trim gives it back */
  assert_ok(dv_memory_trim(c));
  assert_ok(dv_memory_stats(c, &st));
  assert_int_equal(st.reserved.current, 0);
  assert_int_equal(st.segments, 0);
  assert_true(st.releases >= 1);
  size_t f, t;
  assert_ok(dv_backend_memory_info(c, &f, &t));
  assert_int_equal(f, t);
  assert_ok(dv_context_destroy(c));
}

/* Cached memory of one size is returned when another size runs out. */
static void test_oom_releases_cache(void **state) {
  (void)state;
  if (strncmp(g_backend, "host", 4) != 0) skip(); /* needs a small device */
  dv_context *c = pool_ctx("host_memory=32M");
  dv_array *a = bytes_on(c, 20 << 20, NULL);
  release_now(c, a); /* 20 MiB cached */
  /* 512 KiB blocks come from 2 MiB slabs; 16 of them need 4 slabs = 8 MiB:
   * only 12 MiB are free on the device... then 24 MiB needs the cache back */
  dv_array *b = bytes_on(c, 24 << 20, NULL);
  dv_mm_stats st;
  assert_ok(dv_memory_stats(c, &st));
  assert_true(st.releases >= 1);
  assert_int_equal(st.reserved.current, 24 << 20);
  /* a request no release can satisfy: the message tells the story */
  dv_array *x = (dv_array *)1;
  int64_t n = 16 << 20;
  assert_status(dv_device_array(c, 1, &n, dv_dtype_get(DV_UINT8), NULL, 'C', NULL, &x), DV_ERR_OUT_OF_MEMORY);
  assert_null(x);
  const char *m = dv_last_error();
  assert_non_null(strstr(m, "16777216 bytes requested"));
  assert_non_null(strstr(m, "largest free block"));
  assert_non_null(strstr(m, "fragmentation"));
  dv_array_release(b);
  assert_ok(dv_context_destroy(c));
}

static void test_log_and_release_threshold(void **state) {
  (void)state;
  char path[] = "/tmp/dv_pool_log_XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  remove(path);
  char opt[64];
  snprintf(opt, sizeof opt, "pool_log=%s", path);
  dv_context *c;
  assert_ok(test_context(&c, "memory_manager=pool", opt, "pool_release_threshold=1M", NULL));
  dv_array *a = bytes_on(c, 3 << 20, NULL);
  release_now(c, a); /* 4 MiB cached > 1 MiB threshold: given back at the free */
  dv_mm_stats st;
  assert_ok(dv_memory_stats(c, &st));
  assert_int_equal(st.reserved.current, 0);
  assert_ok(dv_context_destroy(c));
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  char line[256];
  assert_non_null(fgets(line, sizeof line, f));
  assert_string_equal(line, "Thread,Time,Action,Pointer,Size,Stream\n");
  assert_non_null(fgets(line, sizeof line, f));
  assert_non_null(strstr(line, ",allocate,"));
  assert_non_null(strstr(line, ",3145728,"));
  assert_non_null(fgets(line, sizeof line, f));
  assert_non_null(strstr(line, ",free,"));
  fclose(f);
  remove(path);
}

/* A third memory manager, written here: counts calls, delegates to the driver. */
typedef struct counting {
  dv_context *ctx;
  int allocs, frees, inits;
} counting;
static counting g_counting;
static dv_status cnt_init(dv_context *ctx, void *user, void **state) {
  counting *k = user;
  k->ctx = ctx;
  k->inits++;
  *state = k;
  return DV_OK;
}
static void cnt_fini(void *state) { (void)state; }
static dv_status cnt_alloc(void *state, size_t bytes, dv_stream *s, dv_block *out) {
  (void)s;
  counting *k = state;
  k->allocs++;
  return dv_backend_alloc(k->ctx, bytes, out);
}
static dv_status cnt_free(void *state, dv_block b, size_t bytes, dv_stream *s) {
  (void)s, (void)bytes;
  counting *k = state;
  k->frees++;
  return dv_backend_free(k->ctx, b);
}
static dv_status cnt_info(void *state, size_t *f, size_t *t) {
  counting *k = state;
  return dv_backend_memory_info(k->ctx, f, t);
}

static void test_third_party_manager(void **state) {
  (void)state;
  dv_memory_manager mm = {DV_MEMORY_MANAGER_VERSION, "counting", &g_counting, cnt_init, cnt_fini, cnt_alloc,
                          cnt_free, cnt_info, NULL, NULL, NULL, NULL};
  dv_config *cfg;
  assert_ok(dv_config_create(&cfg));
  dv_memory_manager bad = mm;
  bad.version = 99;
  assert_status(dv_config_set_memory_manager(cfg, &bad), DV_ERR_INVALID_ARGUMENT);
  bad = mm;
  bad.alloc = NULL;
  assert_status(dv_config_set_memory_manager(cfg, &bad), DV_ERR_INVALID_ARGUMENT);
  assert_ok(dv_config_set_memory_manager(cfg, &mm));
  char be[32];
  snprintf(be, sizeof be, "%s", g_backend);
  if (strchr(be, '-')) *strchr(be, '-') = 0;
  assert_ok(dv_config_set(cfg, "backend", be));
  dv_context *c;
  assert_ok(dv_context_create(cfg, &c));
  dv_config_destroy(cfg);
  assert_string_equal(dv_context_memory_manager(c), "counting");
  assert_int_equal(g_counting.inits, 1);
  double v[64];
  for (int i = 0; i < 64; i++) v[i] = i;
  int64_t n = 64;
  dv_array *h, *d;
  assert_ok(dv_host_array_wrap(c, v, 1, &n, dv_dtype_get(DV_FLOAT64), NULL, &h));
  assert_ok(dv_to_device(c, h, NULL, 1, NULL, &d));
  memset(v, 0, sizeof v);
  assert_ok(dv_copy_to_host(d, h, NULL, NULL));
  assert_true(v[63] == 63);
  assert_int_equal(g_counting.allocs, 1);
  dv_array_release(d);
  assert_ok(dv_context_flush_deallocs(c));
  assert_int_equal(g_counting.frees, 1);
  dv_mm_stats st;
  assert_status(dv_memory_stats(c, &st), DV_ERR_NOT_SUPPORTED);
  assert_ok(dv_memory_trim(c)); /* no trim entry: a no-op */
  dv_array_release(h);
  assert_ok(dv_context_destroy(c));
  assert_ptr_equal(dv_memory_manager_builtin("pool")->name, dv_memory_manager_builtin("pool")->name);
  assert_null(dv_memory_manager_builtin("nope"));
}

/*
 * Randomized model test: random allocations (sizes across both the class and
 * the bin allocators), frees and stream switches; every live array is filled
 * with its own byte on its stream; periodically every live array is read
 * back and must still hold its byte (two live arrays sharing memory would
 * fail); statistics must match the model; the simulator checks its guard
 * bytes; at the end everything is freed and trimmed and all counters are 0.
 */
static void test_model(void **state) {
  (void)state;
  dv_context *c = pool_ctx("host_memory=512M");
  enum { LIVE = 256, NS = 3 };
  long ops = getenv("DV_MODEL_OPS") ? atol(getenv("DV_MODEL_OPS")) : 100000;
  dv_stream *streams[NS] = {NULL};
  for (int i = 1; i < NS; i++) assert_ok(dv_stream_create(c, 0, &streams[i]));
  dv_array *live[LIVE] = {0};
  uint8_t val[LIVE];
  int64_t sz[LIVE];
  uint64_t model_bytes = 0;
  rnd_seed(4242);
  uint8_t *buf = malloc((size_t)8 << 20);
  for (long op = 0; op < ops; op++) {
    int k = (int)(rnd() % LIVE);
    if (!live[k]) {
      int64_t n = (rnd() % 10 == 0) ? rnd_range(1 << 20, 6 << 20) : rnd_range(1, 64 << 10);
      dv_stream *s = streams[rnd() % NS];
      dv_status rc = dv_device_array(c, 1, &n, dv_dtype_get(DV_UINT8), NULL, 'C', s, &live[k]);
      if (rc == DV_ERR_OUT_OF_MEMORY) continue;
      assert_ok(rc);
      val[k] = (uint8_t)(op * 31 + 1);
      sz[k] = n;
      model_bytes += (uint64_t)n;
      assert_ok(dv_array_memset(live[k], val[k], s));
    } else {
      dv_array_release(live[k]);
      live[k] = NULL;
      model_bytes -= (uint64_t)sz[k];
    }
    if (op % 5000 == 4999 || op == ops - 1) {
      assert_ok(dv_context_synchronize(c));
      for (int i = 0; i < LIVE; i++) {
        if (!live[i]) continue;
        dv_array *h;
        assert_ok(dv_host_array_wrap(c, buf, 1, &sz[i], dv_dtype_get(DV_UINT8), NULL, &h));
        assert_ok(dv_copy_to_host(live[i], h, NULL, NULL));
        dv_array_release(h);
        for (int64_t j = 0; j < sz[i]; j += 97)
          if (buf[j] != val[i]) fail_msg("op %ld: array %d byte %lld is %u, not %u", op, i, (long long)j, buf[j], val[i]);
        if (buf[sz[i] - 1] != val[i]) fail_msg("op %ld: array %d last byte", op, i);
      }
      assert_ok(dv_context_flush_deallocs(c));
      dv_mm_stats st;
      assert_ok(dv_memory_stats(c, &st));
      assert_int_equal(st.allocated.current, model_bytes); /* zero divergence */
      assert_true(st.allocated.current <= st.active.current);
      assert_true(st.active.current <= st.reserved.current);
      assert_ok(dv_context_check_memory(c));
    }
  }
  for (int i = 0; i < LIVE; i++) dv_array_release(live[i]);
  for (int i = 1; i < NS; i++) dv_stream_release(streams[i]);
  assert_ok(dv_memory_trim(c));
  dv_mm_stats st;
  assert_ok(dv_memory_stats(c, &st));
  assert_int_equal(st.allocated.current, 0);
  assert_int_equal(st.active.current, 0);
  assert_int_equal(st.reserved.current, 0);
  assert_true(st.hits > st.misses);
  free(buf);
  assert_ok(dv_context_destroy(c));
}

/* The JSON writers follow snprintf's contract as the header states it: with
 * a buffer too small they return DV_ERR_INVALID_ARGUMENT, report the length
 * needed, and write nothing at all into the buffer. */
typedef dv_status (*json_fn)(dv_context *, char *, size_t, size_t *);
static void check_json_writer(dv_context *c, json_fn fn, const char *what) {
  size_t need = 0;
  assert_ok(fn(c, NULL, 0, &need));
  assert_true(need > 10);
  char *buf = malloc(need + 2);
  size_t caps[] = {1, 2, need / 2, need - 1, need};
  for (size_t i = 0; i < sizeof caps / sizeof caps[0]; i++) {
    memset(buf, 'Z', need + 2);
    size_t got = 0;
    assert_status(fn(c, buf, caps[i], &got), DV_ERR_INVALID_ARGUMENT);
    assert_int_equal(got, need);
    for (size_t j = 0; j < need + 2; j++)
      if (buf[j] != 'Z') fail_msg("%s wrote byte %zu of a %zu-byte buffer (cap %zu)", what, j, need + 2, caps[i]);
  }
  memset(buf, 'Z', need + 2);
  assert_ok(fn(c, buf, need + 1, &need));
  assert_int_equal(strlen(buf), need);
  assert_int_equal(buf[need + 1], 'Z');
  /* a NULL context or needed changes nothing either */
  memset(buf, 'Z', need + 2);
  assert_status(fn(NULL, buf, need + 1, &need), DV_ERR_NULL_ARGUMENT);
  assert_status(fn(c, buf, need + 1, NULL), DV_ERR_NULL_ARGUMENT);
  assert_int_equal(buf[0], 'Z');
  free(buf);
}

static void test_json_small_buffers(void **state) {
  (void)state;
  dv_context *c = pool_ctx(NULL);
  dv_array *a = bytes_on(c, 1000, NULL), *b = bytes_on(c, 3 << 20, NULL);
  check_json_writer(c, dv_memory_snapshot_json, "dv_memory_snapshot_json");
  check_json_writer(c, dv_context_stats_json, "dv_context_stats_json");
  dv_array_release(a);
  dv_array_release(b);
  assert_ok(dv_context_destroy(c));
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_same_stream_reuse), cmocka_unit_test(test_cross_stream_reuse_waits),
      cmocka_unit_test(test_split_coalesce_trim), cmocka_unit_test(test_oom_releases_cache),
      cmocka_unit_test(test_log_and_release_threshold), cmocka_unit_test(test_third_party_manager),
      cmocka_unit_test(test_model), cmocka_unit_test(test_json_small_buffers),
  };
  return test_main(argc, argv, "pool", tests, sizeof tests / sizeof tests[0]);
}
