/*
 * The "async" memory manager (src/memory/async.c over the backend's
 * DRIVER_POOL group, src/backends/cudafam/fam_mempool.c): device memory from
 * the driver's stream-ordered pool.  On the host simulator and OpenCL it is
 * refused by name (DV_ERR_NOT_SUPPORTED, pointing at memory_manager=pool);
 * on CUDA and HIP (the driver doubles: tests/backends/cuda/cudadouble, whose
 * pools follow the reference's rules) allocation and reuse in stream order,
 * the frees ordered after work of other streams, the release threshold,
 * the default, private and current pools, trim, statistics, the memory
 * limit, the refusal where the device has no pools, and a fault sweep
 * (every host allocation and every pool entry of the driver failed in
 * turn: the right status, nothing leaked).
 */
#include <dlfcn.h>
#include <string.h>

#include "common.h"

static bool on_gpu_backend(void) {
  return !strncmp(g_backend, "cuda", 4) || !strncmp(g_backend, "hip", 3);
}

/* The driver the backend loaded (NULL: none), for the double's controls. */
static void *driver(void) {
  if (!strncmp(g_backend, "cuda", 4)) return dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  void *h = dlopen("libamdhip64.so", RTLD_NOW | RTLD_NOLOAD);
  if (!h) h = dlopen("libamdhip64.so.6", RTLD_NOW | RTLD_NOLOAD);
  if (!h) h = dlopen("libamdhip64.so.5", RTLD_NOW | RTLD_NOLOAD);
  return h;
}

/* A control of the double; NULL with a real driver (the caller skips). */
static void *dbl(const char *name) {
  void *h = driver();
  void *f = h ? dlsym(h, name) : NULL;
  if (h) dlclose(h);
  return f;
}

typedef void (*set_fn)(int on);
typedef void *(*pool_current_fn)(int dev, int fresh);
typedef void *(*pool_default_fn)(int dev);
typedef int (*pool_stats_fn)(void *pool, uint64_t out[4]);
typedef void (*fail_fn)(const char *name, long k, int result);
typedef long (*fail_calls_fn)(const char *name);

#define NEEDS_GPU_BACKEND()                                                                 \
  do {                                                                                      \
    if (!on_gpu_backend()) {                                                                \
      printf("SKIPPED: %s: the async manager needs a CUDA or HIP driver pool\n", __func__); \
      skip();                                                                               \
    }                                                                                       \
  } while (0)
#define NEEDS_DOUBLE(sym)                                                         \
  do {                                                                            \
    if (!(sym)) {                                                                 \
      printf("SKIPPED: %s: needs the driver test double's controls\n", __func__); \
      skip();                                                                     \
    }                                                                             \
  } while (0)

static dv_context *async_ctx(const char *o1, const char *o2) {
  return test_context_or_fail("memory_manager=async", o1 ? o1 : "async_pool=private", o2, NULL);
}

static dv_array *dev_bytes(dv_context *ctx, int64_t n, dv_stream *s) {
  dv_array *a = NULL;
  assert_ok(dv_device_array(ctx, 1, &n, dv_dtype_get(DV_UINT8), NULL, 'C', s, &a));
  return a;
}

static void *addr_of(const dv_array *a) {
  dv_block b;
  size_t off = 0;
  int usable = 0;
  assert_ok(dv_array_block(a, &b, &off, &usable));
  return (char *)b.buf + b.offset;
}

static dv_mm_stats mstats(dv_context *ctx) {
  dv_mm_stats st;
  assert_ok(dv_memory_stats(ctx, &st));
  return st;
}

/* ---- where there is no driver pool: refused by name ---------------------------------- */

static void test_refused_or_named(void **state) {
  (void)state;
  dv_context *ctx = NULL;
  dv_status rc = test_context(&ctx, "memory_manager=async", NULL);
  if (!on_gpu_backend()) {
    assert_int_equal(rc, DV_ERR_NOT_SUPPORTED);
    assert_null(ctx);
    assert_non_null(strstr(dv_last_error(), "memory_manager=pool"));
    assert_non_null(strstr(dv_last_error(), g_backend));
    return;
  }
  assert_ok(rc);
  assert_string_equal(dv_memory_manager_name(ctx), "async");
  assert_ptr_equal(dv_memory_manager_builtin("async")->init,
                   dv_memory_manager_builtin("async")->init);
  assert_ok(dv_context_destroy(ctx));
}

/* Bad option values are refused where the options are read. */
static void test_bad_options(void **state) {
  (void)state;
  dv_config *cfg = NULL;
  assert_ok(dv_config_create(&cfg));
  dv_status r1 = dv_config_set(cfg, "async_pool", "shared");
  dv_status r2 = dv_config_set(cfg, "memory_manager", "asynch");
  dv_status r3 = dv_config_set(cfg, "async_release_threshold", "-1");
  dv_status r4 = dv_config_set(cfg, "async_pool", "current");
  dv_status r5 = dv_config_set(cfg, "async_release_threshold", "2G");
  dv_config_destroy(cfg);
  assert_int_equal(r1, DV_ERR_BAD_OPTION);
  assert_int_equal(r2, DV_ERR_BAD_OPTION);
  assert_int_equal(r3, DV_ERR_BAD_OPTION);
  assert_int_equal(r4, DV_OK);
  assert_int_equal(r5, DV_OK);
}

/* A device without memory pools (the double's dvdouble_set_mempools(0)). */
static void test_refused_without_pools(void **state) {
  (void)state;
  NEEDS_GPU_BACKEND();
  set_fn set = (set_fn)dbl("dvdouble_set_mempools");
  NEEDS_DOUBLE(set);
  set(0);
  dv_context *ctx = NULL;
  dv_status rc = test_context(&ctx, "memory_manager=async", NULL);
  set(1);
  assert_int_equal(rc, DV_ERR_NOT_SUPPORTED);
  assert_null(ctx);
  assert_non_null(strstr(dv_last_error(), "does not support memory pools"));
}

/* ---- allocation, reuse and the order of frees -------------------------------------------- */

static void test_roundtrip(void **state) {
  (void)state;
  NEEDS_GPU_BACKEND();
  dv_context *ctx = async_ctx(NULL, NULL);
  dv_stream *s = NULL;
  assert_ok(dv_stream_create(ctx, 0, &s));
  int64_t n = 100000;
  unsigned char *src = malloc((size_t)n), *back = malloc((size_t)n);
  fill_pattern(src, (size_t)n, 7);
  dv_array *h = NULL, *d = NULL, *hb = NULL;
  assert_ok(dv_host_array(ctx, 1, &n, dv_dtype_get(DV_UINT8), NULL, 'C', &h));
  void *hp = NULL;
  assert_ok(dv_array_host_data(h, &hp));
  memcpy(hp, src, (size_t)n);
  assert_ok(dv_to_device(ctx, h, s, 1, NULL, &d));
  assert_ok(dv_copy_to_host(d, NULL, s, &hb));
  assert_ok(dv_stream_synchronize(s));
  void *bp = NULL;
  assert_ok(dv_array_host_data(hb, &bp));
  memcpy(back, bp, (size_t)n);
  assert_memory_equal(src, back, (size_t)n);
  dv_mm_stats st = mstats(ctx);
  assert_int_equal(st.allocated.current, (uint64_t)n);
  assert_true(st.active.current >= (uint64_t)n); /* the driver's used bytes: rounded */
  assert_true(st.reserved.current >= st.active.current);
  dv_array_release(d), dv_array_release(h), dv_array_release(hb);
  assert_ok(dv_context_flush_deallocs(ctx));
  assert_ok(dv_stream_synchronize(s));
  st = mstats(ctx);
  assert_int_equal(st.allocated.current, 0);
  assert_int_equal(st.allocated.peak, (uint64_t)n);
  assert_int_equal(st.active.current, 0);
  assert_true(st.free_cached > 0); /* kept: the default threshold keeps everything */
  dv_stream_release(s);
  free(src), free(back);
  assert_ok(dv_context_destroy(ctx));
}

/* Freed memory comes back at once on its own stream (its free is queued
 * there, the stream's later work runs after it), and on another stream
 * only once the free has run. */
static void test_reuse_in_stream_order(void **state) {
  (void)state;
  NEEDS_GPU_BACKEND();
  set_fn hold = (set_fn)dbl("dvdouble_hold");
  NEEDS_DOUBLE(hold);
  dv_context *ctx = async_ctx(NULL, NULL);
  dv_stream *s = NULL, *t = NULL;
  assert_ok(dv_stream_create(ctx, 0, &s));
  assert_ok(dv_stream_create(ctx, 0, &t));
  hold(1); /* no queued work runs: the free stays pending */
  dv_array *a = dev_bytes(ctx, 4096, s);
  void *pa = addr_of(a);
  assert_ok(dv_array_memset(a, 1, s));
  dv_array_release(a);
  assert_ok(dv_context_flush_deallocs(ctx)); /* cuMemFreeAsync on s */
  dv_array *on_t = dev_bytes(ctx, 4096, t);
  void *pt = addr_of(on_t);
  dv_array *on_s = dev_bytes(ctx, 4096, s);
  void *ps = addr_of(on_s);
  hold(0); /* before any assertion: a failing one must not leave the streams held */
  assert_ptr_not_equal(pt, pa); /* the free has not run: not for t */
  assert_ptr_equal(ps, pa);     /* in stream order on s */
  dv_array_release(on_s);
  assert_ok(dv_context_flush_deallocs(ctx));
  assert_ok(dv_stream_synchronize(s)); /* the free has run */
  dv_array *later = dev_bytes(ctx, 4096, t);
  assert_ptr_equal(addr_of(later), pa); /* a completed free: for any stream */
  dv_array_release(later), dv_array_release(on_t);
  dv_stream_release(s), dv_stream_release(t);
  assert_ok(dv_context_destroy(ctx));
}

/* Work queued on another stream with memory of stream s: the free, on s,
 * comes after it (the double reports a use after free as an illegal
 * address, sticky, which every later call would return). */
static void test_free_after_other_streams_work(void **state) {
  (void)state;
  NEEDS_GPU_BACKEND();
  set_fn hold = (set_fn)dbl("dvdouble_hold");
  dv_context *ctx = async_ctx(NULL, NULL);
  dv_stream *s = NULL, *t = NULL;
  assert_ok(dv_stream_create(ctx, 0, &s));
  assert_ok(dv_stream_create(ctx, DV_STREAM_NON_BLOCKING, &t));
  for (int round = 0; round < 20; round++) {
    int64_t n = 1 << 16;
    dv_array *h = NULL, *back = NULL;
    assert_ok(dv_pinned_array(ctx, 1, &n, dv_dtype_get(DV_UINT8), NULL, 'C', &h));
    assert_ok(dv_pinned_array(ctx, 1, &n, dv_dtype_get(DV_UINT8), NULL, 'C', &back));
    void *hp = NULL, *bp = NULL;
    assert_ok(dv_array_host_data(h, &hp));
    assert_ok(dv_array_host_data(back, &bp));
    fill_pattern(hp, (size_t)n, (unsigned)round + 1);
    memset(bp, 0, (size_t)n);
    if (hold) hold(1);
    dv_array *d = NULL;
    dv_status r1 = dv_device_array(ctx, 1, &n, dv_dtype_get(DV_UINT8), NULL, 'C', s, &d);
    dv_status r2 = r1 ? r1 : dv_copy_to_device(d, h, t);
    dv_status r3 = r2 ? r2 : dv_copy_to_host(d, back, t, NULL);
    dv_array_release(d);
    dv_status r4 = dv_context_flush_deallocs(ctx);
    if (hold) hold(0); /* before any assertion */
    assert_ok(r1);
    assert_ok(r2);
    assert_ok(r3);
    assert_ok(r4);
    assert_ok(dv_stream_synchronize(t));
    assert_ok(dv_stream_synchronize(s));
    assert_memory_equal(hp, bp, (size_t)n);
    dv_array_release(h), dv_array_release(back);
  }
  assert_ok(dv_context_synchronize(ctx));
  dv_stream_release(s), dv_stream_release(t);
  assert_ok(dv_context_destroy(ctx));
}

/* The default and per-thread streams' memory. */
static void test_default_streams(void **state) {
  (void)state;
  NEEDS_GPU_BACKEND();
  dv_context *ctx = async_ctx(NULL, NULL);
  dv_stream *pt = dv_context_per_thread_stream(ctx);
  assert_non_null(pt);
  dv_array *a = dev_bytes(ctx, 10000, NULL), *b = dev_bytes(ctx, 10000, pt);
  assert_ok(dv_array_memset(a, 3, NULL));
  assert_ok(dv_array_memset(b, 4, pt));
  dv_array_release(a), dv_array_release(b);
  assert_ok(dv_context_flush_deallocs(ctx));
  assert_ok(dv_context_synchronize(ctx));
  assert_int_equal(mstats(ctx).allocated.current, 0);
  assert_int_equal(mstats(ctx).active.current, 0);
  assert_ok(dv_context_destroy(ctx));
}

/* A free while its stream captures a graph (the double's dvdouble_capture):
 * not captured (a cuMemFreeAsync there would be a graph node, not a free)
 * but freed as the direct manager frees (the backend's fenced cuMemFree);
 * the capture stays valid. */
typedef long (*capture_fn)(void *stream, int on);
static void test_free_during_capture(void **state) {
  (void)state;
  NEEDS_GPU_BACKEND();
  capture_fn capture = (capture_fn)dbl("dvdouble_capture");
  pool_stats_fn pst = (pool_stats_fn)dbl("dvdouble_pool_stats");
  NEEDS_DOUBLE(capture && pst);
  dv_context *ctx = async_ctx(NULL, NULL);
  dv_stream *s = NULL;
  assert_ok(dv_stream_create(ctx, DV_STREAM_NON_BLOCKING, &s));
  void *native = NULL;
  assert_ok(dv_stream_native(s, &native));
  uint64_t v0[4], v[4];
  assert_int_equal(pst(NULL, v0), 0);
  dv_array *a = dev_bytes(ctx, 20000, s);
  assert_ok(dv_array_memset(a, 9, s));
  assert_ok(dv_stream_synchronize(s));
  assert_int_equal(capture(native, 1), 0);
  dv_array_release(a);
  dv_status rc = dv_context_flush_deallocs(ctx);
  long captured = capture(native, 0);
  assert_ok(rc);
  assert_int_equal(captured, 0); /* nothing captured, the capture still valid */
  assert_int_equal(pst(NULL, v), 0);
  assert_int_equal(v[1], v0[1]);
  assert_int_equal(mstats(ctx).allocated.current, 0);
  dv_stream_release(s);
  assert_ok(dv_context_destroy(ctx));
}

/* ---- the release threshold, trim, the pools ---------------------------------------------- */

static void test_release_threshold(void **state) {
  (void)state;
  NEEDS_GPU_BACKEND();
  /* 0: all free memory goes back at each synchronization */
  dv_context *ctx = async_ctx("async_release_threshold=0", NULL);
  dv_array *a = dev_bytes(ctx, 1 << 20, NULL);
  assert_true(mstats(ctx).reserved.current >= (1u << 20));
  dv_array_release(a);
  assert_ok(dv_context_flush_deallocs(ctx));
  assert_ok(dv_context_synchronize(ctx));
  dv_mm_stats st = mstats(ctx);
  assert_int_equal(st.reserved.current, 0);
  assert_true(st.reserved.peak >= (1u << 20));
  assert_ok(dv_context_destroy(ctx));
  /* 64K: what is above it goes back; a block of 1 MiB is above it */
  ctx = async_ctx("async_release_threshold=64K", NULL);
  a = dev_bytes(ctx, 8192, NULL);
  dv_array *b = dev_bytes(ctx, 1 << 20, NULL);
  dv_array_release(a), dv_array_release(b);
  assert_ok(dv_context_flush_deallocs(ctx));
  assert_ok(dv_context_synchronize(ctx));
  st = mstats(ctx);
  assert_true(st.reserved.current <= 65536);
  assert_ok(dv_context_destroy(ctx));
  /* the default keeps everything until dv_memory_trim */
  ctx = async_ctx(NULL, NULL);
  a = dev_bytes(ctx, 1 << 20, NULL);
  dv_array_release(a);
  assert_ok(dv_context_flush_deallocs(ctx));
  assert_ok(dv_context_synchronize(ctx));
  assert_true(mstats(ctx).reserved.current >= (1u << 20));
  size_t f0 = 0, f1 = 0, t = 0;
  assert_ok(dv_memory_info(ctx, &f0, &t));
  assert_ok(dv_memory_trim(ctx));
  st = mstats(ctx);
  assert_int_equal(st.reserved.current, 0);
  assert_true(st.releases >= 1);
  assert_ok(dv_memory_info(ctx, &f1, &t));
  assert_true(f0 >= f1); /* the pool's free memory counted as free before, the driver's after */
  assert_ok(dv_context_destroy(ctx));
}

static void test_which_pool(void **state) {
  (void)state;
  NEEDS_GPU_BACKEND();
  pool_default_fn def = (pool_default_fn)dbl("dvdouble_pool_default");
  pool_current_fn cur = (pool_current_fn)dbl("dvdouble_pool_current");
  pool_stats_fn pst = (pool_stats_fn)dbl("dvdouble_pool_stats");
  NEEDS_DOUBLE(def && cur && pst);
  uint64_t v[4];
  void *dp = def(0);
  assert_int_equal(pst(dp, v), 0);
  uint64_t used0 = v[1], thr0 = v[2];
  /* private: the device's default pool is not touched */
  dv_context *ctx = async_ctx("async_pool=private", NULL);
  dv_array *a = dev_bytes(ctx, 5000, NULL);
  assert_int_equal(pst(dp, v), 0);
  assert_int_equal(v[1], used0);
  dv_array_release(a);
  assert_ok(dv_context_destroy(ctx));
  /* default: its memory comes from the default pool, whose threshold is left alone */
  ctx = async_ctx("async_pool=default", NULL);
  a = dev_bytes(ctx, 5000, NULL);
  assert_int_equal(pst(dp, v), 0);
  assert_true(v[1] >= used0 + 5000);
  assert_int_equal(v[2], thr0);
  dv_array_release(a);
  assert_ok(dv_context_destroy(ctx));
  assert_int_equal(pst(dp, v), 0);
  assert_int_equal(v[1], used0);
  /* ... unless a threshold is given */
  ctx = async_ctx("async_pool=default", "async_release_threshold=12345");
  assert_int_equal(pst(dp, v), 0);
  assert_int_equal(v[2], 12345);
  assert_ok(dv_context_destroy(ctx));
  /* current: the pool another library made the device's current one */
  void *mine = cur(0, 1);
  assert_ptr_not_equal(mine, dp);
  ctx = async_ctx("async_pool=current", NULL);
  a = dev_bytes(ctx, 7000, NULL);
  assert_int_equal(pst(mine, v), 0);
  assert_true(v[1] >= 7000);
  dv_array_release(a);
  assert_ok(dv_context_flush_deallocs(ctx));
  assert_ok(dv_context_synchronize(ctx));
  assert_int_equal(pst(mine, v), 0);
  assert_int_equal(v[1], 0);
  assert_ok(dv_context_destroy(ctx));
  assert_ptr_equal(cur(0, 0), dp); /* the default one is current again */
}

static void test_memory_limit(void **state) {
  (void)state;
  NEEDS_GPU_BACKEND();
  dv_context *ctx = async_ctx("memory_limit=10000", NULL);
  dv_array *a = dev_bytes(ctx, 6000, NULL), *b = NULL;
  int64_t n = 6000;
  assert_status(dv_device_array(ctx, 1, &n, dv_dtype_get(DV_UINT8), NULL, 'C', NULL, &b),
                DV_ERR_OUT_OF_MEMORY);
  assert_non_null(strstr(dv_last_error(), "memory limit"));
  assert_null(b);
  size_t lim = 0, held = 0, cached = 0;
  assert_ok(dv_memory_limit(ctx, &lim, &held, &cached));
  assert_int_equal(lim, 10000);
  assert_int_equal(held, 6000);
  dv_array_release(a);
  assert_ok(dv_context_flush_deallocs(ctx));
  b = dev_bytes(ctx, 6000, NULL);
  dv_array_release(b);
  assert_ok(dv_memory_set_limit(ctx, 0));
  assert_ok(dv_context_destroy(ctx));
}

/* Out of device memory: the pool's cached memory is given back and the
 * allocation retried before DV_ERR_OUT_OF_MEMORY. */
static void test_out_of_memory(void **state) {
  (void)state;
  NEEDS_GPU_BACKEND();
  NEEDS_DOUBLE(dbl("dvdouble_pool_stats"));
  dv_context *ctx = async_ctx(NULL, NULL);
  size_t f = 0, t = 0;
  assert_ok(dv_backend_memory_info(ctx, &f, &t));
  /* many small cached blocks, then one request that needs all of it */
  int64_t piece = (int64_t)(f / 8);
  dv_array *p[8];
  for (int i = 0; i < 7; i++) p[i] = dev_bytes(ctx, piece, NULL);
  for (int i = 0; i < 7; i++) dv_array_release(p[i]);
  assert_ok(dv_context_flush_deallocs(ctx));
  dv_array *big = dev_bytes(ctx, piece * 7, NULL); /* fits only once the cache is given back */
  dv_array_release(big);
  int64_t too = (int64_t)t + 1;
  dv_array *none = NULL;
  assert_status(dv_device_array(ctx, 1, &too, dv_dtype_get(DV_UINT8), NULL, 'C', NULL, &none),
                DV_ERR_OUT_OF_MEMORY);
  assert_null(none);
  assert_ok(dv_context_destroy(ctx));
}

/* ---- the fault sweep --------------------------------------------------------------------- */

/* One pass through the manager: a context, memory on two streams, copies,
 * frees, statistics, a trim; everything released again whatever failed. */
static dv_status pass(void) {
  dv_context *ctx = NULL;
  dv_status rc = test_context(&ctx, "memory_manager=async", "async_pool=private", NULL);
  if (rc) return rc;
  dv_stream *s = NULL;
  dv_array *a = NULL, *b = NULL, *h = NULL;
  int64_t n = 3000;
  dv_mm_stats st;
  rc = dv_stream_create(ctx, 0, &s);
  if (!rc) rc = dv_device_array(ctx, 1, &n, dv_dtype_get(DV_UINT8), NULL, 'C', s, &a);
  if (!rc) rc = dv_host_array(ctx, 1, &n, dv_dtype_get(DV_UINT8), NULL, 'C', &h);
  if (!rc) rc = dv_copy_to_device(a, h, NULL);
  if (!rc) rc = dv_device_array(ctx, 1, &n, dv_dtype_get(DV_UINT8), NULL, 'C', NULL, &b);
  if (!rc) rc = dv_array_copy(b, a, s);
  dv_array_release(a), dv_array_release(b), dv_array_release(h);
  dv_status r2 = dv_context_flush_deallocs(ctx);
  if (!rc) rc = r2;
  if (!rc) rc = dv_memory_stats(ctx, &st);
  if (!rc) rc = dv_memory_trim(ctx);
  size_t f, t;
  if (!rc) rc = dv_memory_info(ctx, &f, &t);
  if (s) dv_stream_release(s);
  r2 = dv_context_destroy(ctx);
  return rc ? rc : r2;
}

static void test_fault_sweep(void **state) {
  (void)state;
  NEEDS_GPU_BACKEND();
  fail_fn arm = (fail_fn)dbl("dvdouble_fail");
  fail_calls_fn calls = (fail_calls_fn)dbl("dvdouble_fail_calls");
  pool_stats_fn pst = (pool_stats_fn)dbl("dvdouble_pool_stats");
  NEEDS_DOUBLE(arm && calls && pst);
  uint64_t v0[4], v[4];
  assert_int_equal(pst(NULL, v0), 0);
  assert_ok(pass());
  assert_int_equal(pst(NULL, v), 0);
  assert_int_equal(v[1], v0[1]); /* nothing in use is left */
  assert_int_equal(v[3], v0[3]); /* nor a private pool */
  /* every pool entry of the driver failed in turn (CUDA's out of memory and
   * invalid value: HIP's double returns the same numbers) */
  static const char *const entries[] = {
      "cuMemAllocFromPoolAsync", "cuMemFreeAsync",        "cuMemPoolCreate", "cuMemPoolDestroy",
      "cuMemPoolSetAttribute",   "cuMemPoolGetAttribute", "cuMemPoolTrimTo"};
  for (size_t e = 0; e < sizeof entries / sizeof entries[0]; e++) {
    for (int result = 1; result <= 2; result++) {
      int failed = 0;
      for (long k = 1; k < 100; k++) {
        long before = calls(entries[e]);
        arm(entries[e], k, result);
        dv_status rc = pass();
        long made = calls(entries[e]) - (before < 0 ? 0 : before);
        arm(entries[e], 0, 0);
        if (made < k) { /* the armed call was never made: the sweep is through */
          assert_ok(rc);
          break;
        }
        if (rc != DV_OK) {
          failed++;
          if (rc != DV_ERR_OUT_OF_MEMORY && rc != DV_ERR_INVALID_ARGUMENT && rc != DV_ERR_DRIVER)
            fail_msg("%s failing (%d) at call %ld: %s (%s)", entries[e], result, k,
                     dv_status_name(rc), dv_last_error());
          if (!dv_last_error()[0]) fail_msg("%s at call %ld: no message", entries[e], k);
        }
        assert_int_equal(pst(NULL, v), 0);
        if (v[1] != v0[1] || v[3] != v0[3])
          fail_msg("%s failing at call %ld: %llu bytes in use, %llu private pools left", entries[e],
                   k, (unsigned long long)(v[1] - v0[1]), (unsigned long long)(v[3] - v0[3]));
      }
      /* out of memory from an allocation is retried (after the device and a
       * trim; then after a flush); a destroy's failure is logged at close */
      bool absorbed = !strcmp(entries[e], "cuMemPoolDestroy") ||
                      (result == 2 && !strcmp(entries[e], "cuMemAllocFromPoolAsync"));
      if (!failed && !absorbed)
        fail_msg("%s (%d): no failure reached the caller", entries[e], result);
    }
  }
  /* every host allocation of the library failed in turn */
  int host_failures = 0;
  for (uint64_t k = 1; k < 2000; k++) {
    assert_ok(dv_fault_inject(NULL, DV_FAULT_HOST_ALLOC, k));
    dv_status rc = pass();
    int fired = !dv_fault_pending(NULL, DV_FAULT_HOST_ALLOC);
    assert_ok(dv_fault_inject(NULL, DV_FAULT_HOST_ALLOC, 0));
    if (!fired) {
      assert_ok(rc);
      break;
    }
    if (rc) {
      host_failures++;
      if (rc != DV_ERR_HOST_OUT_OF_MEMORY && rc != DV_ERR_OUT_OF_MEMORY)
        fail_msg("host allocation %llu failed: %s (%s)", (unsigned long long)k, dv_status_name(rc),
                 dv_last_error());
    }
    assert_int_equal(pst(NULL, v), 0);
    if (v[1] != v0[1] || v[3] != v0[3])
      fail_msg("host allocation %llu failed: device memory or a pool left", (unsigned long long)k);
  }
  assert_true(host_failures > 0);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {T(test_refused_or_named),
                                     T(test_bad_options),
                                     T(test_refused_without_pools),
                                     T(test_roundtrip),
                                     T(test_reuse_in_stream_order),
                                     T(test_free_after_other_streams_work),
                                     T(test_default_streams),
                                     T(test_free_during_capture),
                                     T(test_release_threshold),
                                     T(test_which_pool),
                                     T(test_memory_limit),
                                     T(test_out_of_memory),
                                     T(test_fault_sweep)};
  return test_main(argc, argv, "async_pool", tests, sizeof tests / sizeof tests[0]);
}
