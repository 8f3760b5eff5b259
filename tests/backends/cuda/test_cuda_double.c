/*
 * The CUDA backend's own checks (issue 13), run on the driver test double
 * in CI (tests/backends/cuda/cudadouble) and on a real GPU by bench/gpu/run.sh.  Tests that
 * need the double's controls (holding the streams, a pinned-memory limit)
 * skip by name on a real driver.  CTest runs this with a 64 KiB staging
 * chunk (DV_CUDA_STAGING_CHUNK) so that small copies take several pieces.
 */
#define _POSIX_C_SOURCE 200809L
#include <ctype.h>
#include <dirent.h>
#include <dlfcn.h>
#include <glob.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common.h"
#include "backends/backend.h"
#include "backends/cuda/nvrtc.h"
#include "core/core.h"

typedef int (*cur_get_fn)(void **ctx);
typedef void (*hold_fn)(int on);
typedef void (*limit_fn)(size_t bytes);

/* The libcuda.so.1 the backend loaded (the same handle), or NULL. */
static void *driver(void) {
  static void *h;
  if (!h) h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  return h;
}

static void *double_sym(const char *name) {
  void *h = driver();
  void *f = h ? dlsym(h, "dvdouble_is_double") : NULL;
  if (!f) {
    printf("SKIPPED: needs the CUDA test double's %s (a real driver is loaded)\n", name);
    return NULL;
  }
  return dlsym(h, name);
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Issue 13 #1: a stream copy with pageable host memory queues and returns,
 * whatever is ahead of it on the stream, while its pieces fit in
 * cuda_staging_limit (beyond it, it waits for buffers to come back: issue
 * 22 #6).  With the streams held (nothing runs), the driver's own pageable
 * copy would wait: the double aborts it after CUDA_DOUBLE_BLOCK_S seconds
 * as the deadlock it is on a GPU. */
static void test_pageable_stream_copies_queue(void **state) {
  (void)state;
  hold_fn hold = (hold_fn)double_sym("dvdouble_hold");
  if (!hold) skip();
  dv_context *c; /* room for every piece queued behind the held streams */
  assert_ok(test_context(&c, "cuda_staging_limit=16M", NULL));
  const size_t n = 100000; /* floats: 400 KB, several 64 KiB pieces */
  float *src = malloc(n * sizeof *src), *out = malloc(n * sizeof *out);
  assert_non_null(src);
  assert_non_null(out);
  for (size_t i = 0; i < n; i++) src[i] = (float)i * 0.5f, out[i] = -1.0f;
  int64_t shape[1] = {(int64_t)n};
  const dv_dtype *dt = dv_dtype_get(DV_FLOAT32);
  dv_array *hs, *ho, *d;
  dv_stream *s;
  assert_ok(dv_host_array_wrap(c, src, 1, shape, dt, NULL, &hs));
  assert_ok(dv_host_array_wrap(c, out, 1, shape, dt, NULL, &ho));
  assert_ok(dv_device_array(c, 1, shape, dt, NULL, 'C', NULL, &d));
  assert_ok(dv_stream_create(c, 0, &s));
  hold(1);
  double t0 = now_s();
  dv_status a = dv_copy_to_device(d, hs, s);
  dv_status b = dv_copy_to_host(d, ho, s, NULL);
  double took = now_s() - t0;
  /* The source may be reused once the call returned?  Not promised for
   * asynchronous copies; the staging path reads it at the call anyway. */
  hold(0);
  assert_ok(a);
  assert_ok(b);
  assert_ok(dv_stream_synchronize(s));
  if (took > 1.0) fail_msg("pageable stream copies took %.2f s to return with the stream held", took);
  assert_memory_equal(out, src, n * sizeof *src);
  dv_stream_release(s);
  dv_array_release(d), dv_array_release(hs), dv_array_release(ho);
  free(src), free(out);
  assert_ok(dv_context_destroy(c));
}

/* Stream order holds for pageable host memory too (SEMANTICS.md: an
 * asynchronous copy uses the host buffer when the stream reaches it): a
 * download into a pageable array followed, on the same stream, by an
 * upload from it uploads what was downloaded.  The staged host-to-device
 * path used to copy the host bytes into its staging buffer at the call,
 * before the download queued ahead of it had written them. */
static void test_pageable_round_trip_in_stream_order(void **state) {
  (void)state;
  hold_fn hold = (hold_fn)double_sym("dvdouble_hold");
  if (!hold) skip();
  dv_context *c; /* room for every piece queued behind the held streams */
  assert_ok(test_context(&c, "cuda_staging_limit=16M", NULL));
  const size_t n = 50000; /* floats: 200 KB, several 64 KiB pieces */
  float *src = malloc(n * sizeof *src), *mid = malloc(n * sizeof *mid), *out = malloc(n * sizeof *out);
  assert_non_null(src);
  assert_non_null(mid);
  assert_non_null(out);
  for (size_t i = 0; i < n; i++) src[i] = (float)i + 0.25f, mid[i] = -1.0f, out[i] = -2.0f;
  int64_t shape[1] = {(int64_t)n};
  const dv_dtype *dt = dv_dtype_get(DV_FLOAT32);
  dv_array *hs, *hm, *ho, *d, *d2;
  dv_stream *s;
  assert_ok(dv_host_array_wrap(c, src, 1, shape, dt, NULL, &hs));
  assert_ok(dv_host_array_wrap(c, mid, 1, shape, dt, NULL, &hm));
  assert_ok(dv_host_array_wrap(c, out, 1, shape, dt, NULL, &ho));
  assert_ok(dv_to_device(c, hs, NULL, 1, NULL, &d));
  assert_ok(dv_device_array(c, 1, shape, dt, NULL, 'C', NULL, &d2));
  assert_ok(dv_stream_create(c, 0, &s));
  hold(1);
  dv_status a = dv_copy_to_host(d, hm, s, NULL); /* mid = d, queued */
  dv_status b = dv_copy_to_device(d2, hm, s);    /* d2 = mid, after it */
  hold(0);
  assert_ok(a);
  assert_ok(b);
  assert_ok(dv_stream_synchronize(s));
  assert_memory_equal(mid, src, n * sizeof *src);
  assert_ok(dv_copy_to_host(d2, ho, NULL, NULL));
  for (size_t i = 0; i < n; i++)
    if (out[i] != src[i])
      fail_msg("element %zu: %g uploaded, want %g (the upload read the host array before the "
               "download queued ahead of it had written it)", i, (double)out[i], (double)src[i]);
  dv_stream_release(s);
  dv_array_release(d), dv_array_release(d2), dv_array_release(hs), dv_array_release(hm), dv_array_release(ho);
  free(src), free(mid), free(out);
  assert_ok(dv_context_destroy(c));
}

/* The same through the driver's legacy default stream, which waits for
 * the work of every blocking stream of the context: an upload from a
 * pageable array queued there runs after a download into that array
 * queued on another blocking stream.  The legacy stream's own query says
 * idle then, so the staging fill must not trust it. */
static void test_pageable_legacy_upload_after_other_stream(void **state) {
  (void)state;
  hold_fn hold = (hold_fn)double_sym("dvdouble_hold");
  if (!hold) skip();
  dv_context *ctx; /* room for every piece queued behind the held streams */
  assert_ok(test_context(&ctx, "cuda_staging_limit=16M", NULL));
  const size_t n = 40000;
  float *src = malloc(n * sizeof *src), *mid = malloc(n * sizeof *mid), *out = malloc(n * sizeof *out);
  assert_non_null(src);
  assert_non_null(mid);
  assert_non_null(out);
  for (size_t i = 0; i < n; i++) src[i] = (float)i * 2.0f + 1.0f, mid[i] = -1.0f, out[i] = -2.0f;
  int64_t shape[1] = {(int64_t)n};
  const dv_dtype *dt = dv_dtype_get(DV_FLOAT32);
  dv_array *hs, *hm, *ho, *d, *d2;
  dv_stream *b;
  assert_ok(dv_host_array_wrap(ctx, src, 1, shape, dt, NULL, &hs));
  assert_ok(dv_host_array_wrap(ctx, mid, 1, shape, dt, NULL, &hm));
  assert_ok(dv_host_array_wrap(ctx, out, 1, shape, dt, NULL, &ho));
  assert_ok(dv_to_device(ctx, hs, NULL, 1, NULL, &d));
  assert_ok(dv_device_array(ctx, 1, shape, dt, NULL, 'C', NULL, &d2));
  assert_ok(dv_stream_create(ctx, 0, &b)); /* a blocking stream */
  dv_stream *legacy = dv_context_legacy_stream(ctx);
  hold(1);
  dv_status a = dv_copy_to_host(d, hm, b, NULL);     /* queued on b */
  dv_status c = dv_copy_to_device(d2, hm, legacy); /* queued on the legacy stream */
  hold(0);
  assert_ok(a);
  assert_ok(c);
  assert_ok(dv_stream_synchronize(legacy));
  assert_ok(dv_stream_synchronize(b));
  assert_ok(dv_copy_to_host(d2, ho, NULL, NULL));
  for (size_t i = 0; i < n; i++)
    if (out[i] != src[i])
      fail_msg("element %zu: %g uploaded, want %g (the upload on the legacy stream read the host "
               "array before the download queued on another blocking stream wrote it)", i, (double)out[i],
               (double)src[i]);
  /* And the other way: a blocking stream waits for the legacy stream. */
  for (size_t i = 0; i < n; i++) mid[i] = -1.0f, out[i] = -2.0f;
  assert_ok(dv_array_memset(d2, 0, NULL));
  hold(1);
  a = dv_copy_to_host(d, hm, legacy, NULL); /* queued on the legacy stream */
  c = dv_copy_to_device(d2, hm, b);         /* queued on b, a blocking stream */
  hold(0);
  assert_ok(a);
  assert_ok(c);
  assert_ok(dv_stream_synchronize(b));
  assert_ok(dv_stream_synchronize(legacy));
  assert_ok(dv_copy_to_host(d2, ho, NULL, NULL));
  for (size_t i = 0; i < n; i++)
    if (out[i] != src[i])
      fail_msg("element %zu: %g uploaded, want %g (the upload on a blocking stream read the host "
               "array before the download queued on the legacy stream wrote it)", i, (double)out[i],
               (double)src[i]);
  dv_stream_release(b);
  dv_array_release(d), dv_array_release(d2), dv_array_release(hs), dv_array_release(hm), dv_array_release(ho);
  free(src), free(mid), free(out);
  assert_ok(dv_context_destroy(ctx));
}

/* A 40 x 3000 float32 host view with rows 3001 floats apart, up to the
 * device and back on a stream of context c: every row arrives and the gap
 * after each row is not written. */
static void round_trip_2d(dv_context *c, unsigned seed) {
  const dv_dtype *dt = dv_dtype_get(DV_FLOAT32);
  int64_t shape[2] = {40, 3000}, strides[2] = {3001 * 4, 4};
  float *big = malloc(40 * 3001 * 4), *back = malloc(40 * 3001 * 4);
  assert_non_null(big), assert_non_null(back);
  fill_pattern(big, 40 * 3001 * 4, seed);
  for (int i = 0; i < 40 * 3001; i++) back[i] = -2.0f;
  dv_array *hv, *bv, *d;
  dv_stream *s;
  assert_ok(dv_host_array_wrap(c, big, 2, shape, dt, strides, &hv));
  assert_ok(dv_host_array_wrap(c, back, 2, shape, dt, strides, &bv));
  assert_ok(dv_device_array(c, 2, shape, dt, NULL, 'C', NULL, &d));
  assert_ok(dv_stream_create(c, 0, &s));
  assert_ok(dv_copy_to_device(d, hv, s));
  assert_ok(dv_copy_to_host(d, bv, s, NULL));
  assert_ok(dv_stream_synchronize(s));
  for (int i = 0; i < 40; i++) {
    if (memcmp(back + i * 3001, big + i * 3001, 3000 * 4)) fail_msg("2-D row %d differs", i);
    assert_true(back[i * 3001 + 3000] == -2.0f); /* the gap is not written */
  }
  dv_stream_release(s);
  dv_array_release(d), dv_array_release(hv), dv_array_release(bv);
  free(big), free(back);
}

/* The pageable pipeline: every size around the chunk, both directions,
 * synchronous and on a stream, contiguous and a 2-D host view with a pitch. */
static void test_pageable_pipeline_sizes(void **state) {
  (void)state;
  const int64_t sizes[] = {1, 4095, 16384, 16385, 3 * 16384 + 7, 200000};
  const dv_dtype *dt = dv_dtype_get(DV_FLOAT32);
  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++)
    for (int on_stream = 0; on_stream < 2; on_stream++) {
      int64_t n = sizes[k];
      float *src = malloc((size_t)n * 4), *out = malloc((size_t)n * 4);
      fill_pattern(src, (size_t)n * 4, (unsigned)(k * 2 + (size_t)on_stream + 1));
      memset(out, 0, (size_t)n * 4);
      dv_array *hs, *ho, *d;
      dv_stream *s = NULL;
      if (on_stream) assert_ok(dv_stream_create(g_ctx, 0, &s));
      assert_ok(dv_host_array_wrap(g_ctx, src, 1, &n, dt, NULL, &hs));
      assert_ok(dv_host_array_wrap(g_ctx, out, 1, &n, dt, NULL, &ho));
      assert_ok(dv_device_array(g_ctx, 1, &n, dt, NULL, 'C', NULL, &d));
      assert_ok(dv_copy_to_device(d, hs, s));
      assert_ok(dv_copy_to_host(d, ho, s, NULL));
      if (s) assert_ok(dv_stream_synchronize(s));
      if (memcmp(out, src, (size_t)n * 4)) fail_msg("%lld floats, %s: round trip differs", (long long)n, s ? "stream" : "sync");
      dv_stream_release(s);
      dv_array_release(d), dv_array_release(hs), dv_array_release(ho);
      free(src), free(out);
    }
  /* 2-D: rows of 3000 floats (12 KB) out of rows of 3001: five rows a piece. */
  round_trip_2d(g_ctx, 77);
}

/* Threads of the copy teams in this process ("dv-copy"), once the count is
 * want or two seconds have passed (a joined thread may be listed a moment
 * longer). */
static int copy_threads(int want) {
  int n = -1;
  for (int tries = 0; tries < 200; tries++) {
    DIR *d = opendir("/proc/self/task");
    if (!d) return -1;
    n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
      char path[300], name[32] = "";
      snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
      FILE *f = e->d_name[0] == '.' ? NULL : fopen(path, "r");
      if (!f) continue;
      if (fgets(name, sizeof name, f) && strncmp(name, "dv-copy", 7) == 0) n++;
      fclose(f);
    }
    closedir(d);
    if (n == want || want < 0) break;
    nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
  }
  return n;
}

/* Issue 13: the host copies of staged pieces split over several threads
 * (cuda_staging_threads=4; pieces of 64 KiB, split from 16 KiB on) give
 * exactly the bytes, both ways: synchronous copies (filled at the call),
 * a download then an upload of the same pageable array queued on a held
 * stream (the upload's pieces filled by stream callbacks, in stream
 * order, the download's copied out by callbacks), a 2-D host view with a
 * pitch (five rows a piece, rows split between threads), and pieces below
 * the threshold (the tails).  The team's three workers start at the first
 * split and are joined when the context goes. */
static void test_pageable_copy_threads(void **state) {
  (void)state;
  hold_fn hold = driver() ? (hold_fn)dlsym(driver(), "dvdouble_hold") : NULL; /* optional here */
  int before = copy_threads(-1);
  dv_context *c;
  assert_ok(test_context(&c, "cuda_staging_chunk=64K", "cuda_staging_threads=4", "cuda_staging_thread_min=16K",
                         "cuda_staging_limit=16M", NULL));
  const dv_dtype *dt = dv_dtype_get(DV_FLOAT32);
  const int64_t sizes[] = {4096 + 3, 3 * 16384 + 7, 250000}; /* tails below and above 16 KiB */
  for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
    int64_t n = sizes[k];
    size_t bytes = (size_t)n * 4;
    float *src = malloc(bytes), *mid = malloc(bytes), *out = malloc(bytes);
    assert_non_null(src), assert_non_null(mid), assert_non_null(out);
    fill_pattern(src, bytes, (unsigned)k + 11);
    for (int64_t i = 0; i < n; i++) mid[i] = -1.0f, out[i] = -2.0f;
    dv_array *hs, *hm, *ho, *d, *d2;
    dv_stream *s;
    assert_ok(dv_host_array_wrap(c, src, 1, &n, dt, NULL, &hs));
    assert_ok(dv_host_array_wrap(c, mid, 1, &n, dt, NULL, &hm));
    assert_ok(dv_host_array_wrap(c, out, 1, &n, dt, NULL, &ho));
    assert_ok(dv_device_array(c, 1, &n, dt, NULL, 'C', NULL, &d));
    assert_ok(dv_device_array(c, 1, &n, dt, NULL, 'C', NULL, &d2));
    assert_ok(dv_stream_create(c, 0, &s));
    assert_ok(dv_copy_to_device(d, hs, NULL)); /* synchronous: filled at the call */
    if (hold) hold(1);
    dv_status a = dv_copy_to_host(d, hm, s, NULL); /* mid = d, copied out by callbacks */
    dv_status b = dv_copy_to_device(d2, hm, s);    /* d2 = mid: filled by callbacks, after */
    if (hold) hold(0);
    assert_ok(a);
    assert_ok(b);
    assert_ok(dv_stream_synchronize(s));
    assert_ok(dv_copy_to_host(d2, ho, NULL, NULL)); /* synchronous download */
    if (memcmp(mid, src, bytes)) fail_msg("%lld floats: the download on the stream differs", (long long)n);
    for (int64_t i = 0; i < n; i++)
      if (memcmp(&out[i], &src[i], 4))
        fail_msg("%lld floats: element %lld differs after the round trip (the upload read the host array "
                 "before the download queued ahead of it had written it?)", (long long)n, (long long)i);
    dv_stream_release(s);
    dv_array_release(d), dv_array_release(d2), dv_array_release(hs), dv_array_release(hm), dv_array_release(ho);
    free(src), free(mid), free(out);
  }
  /* 2-D: rows of 3000 floats out of rows of 3001, both ways, on a stream. */
  round_trip_2d(c, 78);
  assert_int_equal(copy_threads(before + 3), before + 3); /* the team of this context split pieces */
  assert_ok(dv_context_destroy(c));
  assert_int_equal(copy_threads(before), before); /* and was joined */
}

/* Issue 13 #2: a device-to-device 2-D copy the driver refuses (pitches the
 * double rejects: not multiples of 4 bytes) goes another way. */
static void test_refused_device_rect_falls_back(void **state) {
  (void)state;
  const dv_dtype *dt = dv_dtype_get(DV_UINT8);
  int64_t shape[2] = {9, 15}, sub[2] = {9, 13};
  unsigned char src[9][15], out[9][13];
  fill_pattern(src, sizeof src, 5);
  memset(out, 0, sizeof out);
  dv_array *hs, *d, *dv, *e, *ho;
  assert_ok(dv_host_array_wrap(g_ctx, src, 2, shape, dt, NULL, &hs));
  assert_ok(dv_to_device(g_ctx, hs, NULL, 1, NULL, &d));
  dv_index idx[2] = {DV_SLICE(DV_NONE, DV_NONE, 1), DV_SLICE(1, 14, 1)};
  assert_ok(dv_array_slice(d, 2, idx, &dv)); /* pitch 15 */
  assert_ok(dv_device_array(g_ctx, 2, sub, dt, NULL, 'C', NULL, &e)); /* pitch 13 */
  assert_ok(dv_array_copy(e, dv, NULL));
  assert_ok(dv_host_array_wrap(g_ctx, out, 2, sub, dt, NULL, &ho));
  assert_ok(dv_copy_to_host(e, ho, NULL, NULL));
  for (int i = 0; i < 9; i++) assert_memory_equal(out[i], &src[i][1], 13);
  dv_array_release(ho), dv_array_release(e), dv_array_release(dv), dv_array_release(d), dv_array_release(hs);
}

/* Issue 13 #4: one host buffer registered through two contexts (the same
 * primary context underneath) is registered once with the driver. */
static void test_register_through_two_contexts(void **state) {
  (void)state;
  dv_context *twin;
  assert_ok(test_context(&twin, NULL));
  static float buf[4096];
  int64_t n = 4096;
  const dv_dtype *dt = dv_dtype_get(DV_FLOAT32);
  dv_array *a, *b;
  assert_ok(dv_host_array_wrap(g_ctx, buf, 1, &n, dt, NULL, &a));
  assert_ok(dv_host_array_wrap(twin, buf, 1, &n, dt, NULL, &b));
  assert_ok(dv_array_register(a));
  assert_ok(dv_array_register(b));
  assert_true(dv_array_is_pinned(a) && dv_array_is_pinned(b));
  assert_ok(dv_array_deregister(a));
  /* still registered for the other context: a copy through it works */
  for (int i = 0; i < 4096; i++) buf[i] = (float)i;
  dv_array *d;
  assert_ok(dv_to_device(twin, b, NULL, 1, NULL, &d));
  assert_ok(dv_array_deregister(b));
  dv_array_release(d), dv_array_release(a), dv_array_release(b);
  assert_ok(dv_context_destroy(twin));
}

/* Issue 13 #6: devarray leaves the thread's current CUDA context as it
 * found it, through calls and after destroy. */
static void test_current_context_restored(void **state) {
  (void)state;
  cur_get_fn get = driver() ? (cur_get_fn)dlsym(driver(), "cuCtxGetCurrent") : NULL;
  assert_non_null(get);
  void *cur = (void *)1;
  assert_int_equal(get(&cur), 0);
  if (cur) fail_msg("a devarray context is current on the thread after context creation");
  int64_t n = 64;
  float h[64];
  fill_pattern(h, sizeof h, 3);
  dv_array *hs, *d;
  assert_ok(dv_host_array_wrap(g_ctx, h, 1, &n, dv_dtype_get(DV_FLOAT32), NULL, &hs));
  assert_ok(dv_to_device(g_ctx, hs, NULL, 1, NULL, &d));
  assert_int_equal(get(&cur), 0);
  if (cur) fail_msg("a devarray context is current on the thread after a copy");
  dv_context *other;
  assert_ok(test_context(&other, NULL));
  assert_ok(dv_context_destroy(other));
  assert_int_equal(get(&cur), 0);
  if (cur) fail_msg("a devarray context is current on the thread after destroy");
  dv_array_release(d), dv_array_release(hs);
}

/* Issue 13 #6: out of page-locked memory is the host's out-of-memory. */
static void test_pinned_oom_is_host_oom(void **state) {
  (void)state;
  limit_fn lim = (limit_fn)double_sym("dvdouble_set_pinned_limit");
  if (!lim) skip();
  lim((size_t)1 << 20);
  int64_t n = 1 << 20;
  dv_array *p = NULL;
  dv_status rc = dv_pinned_array(g_ctx, 1, &n, dv_dtype_get(DV_FLOAT32), NULL, 'C', &p);
  lim((size_t)4 << 30);
  assert_status(rc, DV_ERR_HOST_OUT_OF_MEMORY);
  assert_null(p);
}

/* dv_device_array_wrap (and so DLPack import) of a range that runs past
 * its CUDA allocation is refused; a range inside it is taken. */
static void test_wrap_checks_allocation(void **state) {
  (void)state;
  int64_t n = 256;
  const dv_dtype *dt = dv_dtype_get(DV_INT32);
  dv_array *d = NULL, *w = NULL;
  assert_ok(dv_device_array(g_ctx, 1, &n, dt, NULL, 'C', NULL, &d));
  void *buf = NULL;
  size_t off = 0;
  assert_ok(dv_array_native(d, &buf, &off));
  char *p = (char *)buf + off;
  int64_t half = 128;
  assert_ok(dv_device_array_wrap(g_ctx, p + 512, 0, 512, 1, &half, dt, NULL, NULL, NULL, &w));
  dv_array_release(w);
  w = (dv_array *)d;
  int64_t whole = 256;
  assert_status(dv_device_array_wrap(g_ctx, p + 512, 0, 1024, 1, &whole, dt, NULL, NULL, NULL, &w),
                DV_ERR_INVALID_ARGUMENT);
  assert_null(w);
  assert_non_null(strstr(dv_last_error(), "runs past"));
  dv_array_release(d);
  assert_ok(dv_context_flush_deallocs(g_ctx));
}

/* The device of whichever backend is chosen: option `device` (DV_DEVICE);
 * cuda_device wins where it is set; anything but an ordinal is refused. */
static void test_device_option(void **state) {
  (void)state;
  dv_context *c = NULL, *ref = NULL;
  if (test_context(&ref, "cuda_device=1", NULL) == DV_ERR_BACKEND_UNAVAILABLE) {
    printf("SKIPPED: test_device_option: one CUDA device\n");
    skip();
  }
  dv_device_info want, got, first;
  assert_ok(dv_context_device_info(ref, &want));
  assert_ok(test_context(&c, "device=1", NULL));
  assert_ok(dv_context_device_info(c, &got));
  assert_string_equal(got.pci_bus_id, want.pci_bus_id);
  assert_ok(dv_context_destroy(c));
  assert_ok(test_context(&c, "device=1", "cuda_device=0", NULL)); /* the backend's own option wins */
  assert_ok(dv_context_device_info(c, &first));
  assert_string_not_equal(first.pci_bus_id, want.pci_bus_id);
  assert_ok(dv_context_destroy(c));
  assert_ok(dv_context_destroy(ref));
  assert_status(test_context(&c, "device=gpu0", NULL), DV_ERR_INVALID_ARGUMENT);
  assert_null(c);
  assert_non_null(strstr(dv_last_error(), "gpu0"));
  assert_status(test_context(&c, "device=99", NULL), DV_ERR_BACKEND_UNAVAILABLE);
  assert_null(c);
}

/* Several devices: a context per device by index (option cuda_device and
 * its environment variable DV_CUDA_DEVICE), and copies between them. */
static void test_second_device(void **state) {
  (void)state;
  dv_device_info i0, i1;
  assert_ok(dv_context_device_info(g_ctx, &i0));
  dv_context *c1 = NULL;
  dv_status rc = test_context(&c1, "cuda_device=1", NULL);
  if (rc == DV_ERR_BACKEND_UNAVAILABLE) {
    printf("SKIPPED: test_second_device: one CUDA device\n");
    skip();
  }
  assert_ok(rc);
  assert_ok(dv_context_device_info(c1, &i1));
  assert_string_not_equal(i0.pci_bus_id, i1.pci_bus_id);
  int64_t n = 5000;
  const dv_dtype *dt = dv_dtype_get(DV_INT32);
  int32_t *src = malloc((size_t)n * 4), *out = calloc((size_t)n, 4);
  for (int64_t i = 0; i < n; i++) src[i] = (int32_t)(i * 7 - 3);
  dv_array *hs, *ho, *d1, *d0;
  assert_ok(dv_host_array_wrap(c1, src, 1, &n, dt, NULL, &hs));
  assert_ok(dv_to_device(c1, hs, NULL, 1, NULL, &d1));
  assert_ok(dv_device_array(g_ctx, 1, &n, dt, NULL, 'C', NULL, &d0));
  typedef long (*count_fn)(void);
  count_fn peers = driver() && dlsym(driver(), "dvdouble_is_double") ? (count_fn)dlsym(driver(), "dvdouble_peer_copies") : NULL;
  long before = peers ? peers() : 0;
  assert_ok(dv_array_copy(d0, d1, NULL)); /* device 1 -> device 0: dense, a peer copy */
  if (peers && peers() != before + 1) fail_msg("a dense copy between devices did not use cuMemcpyPeerAsync");
  assert_ok(dv_host_array_wrap(g_ctx, out, 1, &n, dt, NULL, &ho));
  assert_ok(dv_copy_to_host(d0, ho, NULL, NULL));
  assert_memory_equal(out, src, (size_t)n * 4);
  /* Strided on both devices: staged through the host, on a stream. */
  dv_array *v0, *v1;
  dv_index ev[1] = {DV_SLICE(0, DV_NONE, 2)}, od[1] = {DV_SLICE(1, DV_NONE, 2)};
  assert_ok(dv_array_slice(d0, 1, od, &v0));
  assert_ok(dv_array_slice(d1, 1, ev, &v1));
  dv_stream *s0;
  assert_ok(dv_stream_create(g_ctx, 0, &s0));
  assert_ok(dv_array_copy(v0, v1, s0)); /* d0[1::2] = d1[0::2] */
  assert_ok(dv_stream_synchronize(s0));
  assert_ok(dv_copy_to_host(d0, ho, NULL, NULL));
  for (int64_t i = 0; i < n; i++) {
    int32_t want = (i % 2) ? src[i - 1] : src[i];
    if (out[i] != want) fail_msg("element %lld: %d, want %d", (long long)i, out[i], want);
  }
  dv_stream_release(s0);
  dv_array_release(v0), dv_array_release(v1);
  dv_array_release(ho), dv_array_release(d0), dv_array_release(d1), dv_array_release(hs);
  assert_ok(dv_context_destroy(c1));
  free(src), free(out);
}

/* Issue 13 #5: with the pool, a block freed on one thread's per-thread
 * default stream while a read of it is still queued there is not handed to
 * another thread's per-thread stream (a different stream underneath). */
typedef struct pt_job {
  dv_context *ctx;
  dv_array *pinned;
  void *buf;
  size_t off;
  dv_status rc;
} pt_job;

static void *pt_reader(void *arg) {
  pt_job *j = arg;
  dv_stream *pt = dv_context_per_thread_stream(j->ctx);
  int64_t n = 4096;
  dv_array *x = NULL;
  j->rc = dv_device_array(j->ctx, 1, &n, dv_dtype_get(DV_FLOAT32), NULL, 'C', pt, &x);
  if (!j->rc) j->rc = dv_array_native(x, &j->buf, &j->off);
  if (!j->rc) j->rc = dv_copy_to_host(x, j->pinned, pt, NULL); /* queued: the streams are held */
  dv_array_release(x);
  if (!j->rc) j->rc = dv_context_flush_deallocs(j->ctx);
  return NULL;
}

static void test_pool_per_thread_streams_distinct(void **state) {
  (void)state;
  hold_fn hold = (hold_fn)double_sym("dvdouble_hold");
  if (!hold) skip();
  dv_context *c;
  assert_ok(test_context(&c, "memory_manager=pool", NULL));
  int64_t n = 4096;
  pt_job j = {.ctx = c};
  assert_ok(dv_pinned_array(c, 1, &n, dv_dtype_get(DV_FLOAT32), NULL, 'C', &j.pinned));
  hold(1);
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, pt_reader, &j), 0);
  pthread_join(t, NULL);
  dv_array *y = NULL;
  void *buf = NULL;
  size_t off = 0;
  dv_status rc = dv_device_array(c, 1, &n, dv_dtype_get(DV_FLOAT32), NULL, 'C', dv_context_per_thread_stream(c), &y);
  if (!rc) rc = dv_array_native(y, &buf, &off);
  hold(0);
  assert_ok(j.rc);
  assert_ok(rc);
  if (buf == j.buf && off == j.off)
    fail_msg("the pool gave a block with a read still queued on another thread's per-thread stream to this thread's");
  assert_ok(dv_stream_synchronize(dv_context_legacy_stream(c)));
  dv_array_release(y);
  dv_array_release(j.pinned);
  assert_ok(dv_context_destroy(c));
}

/* Issue 13 #6: a stream callback queued behind work that faulted runs, and
 * receives the fault's status (device 1, so the fixture's context lives on). */
static _Atomic int cb_status = -1;
static void record_status(dv_stream *s, dv_status st, void *user) {
  (void)s, (void)user;
  atomic_store(&cb_status, (int)st);
}

static void test_callback_gets_device_error(void **state) {
  (void)state;
  hold_fn hold = (hold_fn)double_sym("dvdouble_hold");
  void (*fault)(int) = (void (*)(int))double_sym("dvdouble_fault");
  if (!hold || !fault) skip();
  dv_context *c1 = NULL;
  dv_status rc = test_context(&c1, "cuda_device=1", NULL);
  if (rc == DV_ERR_BACKEND_UNAVAILABLE) {
    printf("SKIPPED: test_callback_gets_device_error: one CUDA device\n");
    skip();
  }
  assert_ok(rc);
  dv_stream *s;
  assert_ok(dv_stream_create(c1, 0, &s));
  atomic_store(&cb_status, -1);
  hold(1);
  assert_ok(dv_stream_add_callback(s, record_status, NULL));
  fault(1); /* as if a kernel ahead of the callback faulted */
  hold(0);
  /* The fault is reported at once (a lost device does not wait for its
   * streams); the callback runs when the stream gets to it. */
  assert_status(dv_stream_synchronize(s), DV_ERR_DEVICE_LOST);
  for (int i = 0; i < 500 && atomic_load(&cb_status) == -1; i++) nanosleep(&(struct timespec){0, 10000000}, NULL);
  int got = atomic_load(&cb_status);
  if (got != DV_ERR_DEVICE_LOST)
    fail_msg("the callback %s", got == -1 ? "never ran" : dv_status_name((dv_status)got));
  dv_stream_release(s);
  dv_context_destroy(c1); /* fails: the device is lost; the double frees it at the last release */
}

/* Issue 13 #3: destroying a context whose streams still have work queued
 * on memory it frees waits for that work (the driver does not promise that
 * cuMemFree does). */
static void *unhold_later(void *arg) {
  nanosleep(&(struct timespec){0, 200000000}, NULL);
  ((hold_fn)arg)(0);
  return NULL;
}

static void test_destroy_waits_for_queued_work(void **state) {
  (void)state;
  hold_fn hold = (hold_fn)double_sym("dvdouble_hold");
  long (*faults)(void) = (long (*)(void))double_sym("dvdouble_faults");
  if (!hold || !faults) skip();
  long before = faults();
  dv_context *c;
  assert_ok(test_context(&c, NULL));
  int64_t n = 1 << 16;
  dv_array *p, *d;
  dv_stream *s;
  assert_ok(dv_pinned_array(c, 1, &n, dv_dtype_get(DV_FLOAT32), NULL, 'C', &p));
  assert_ok(dv_device_array(c, 1, &n, dv_dtype_get(DV_FLOAT32), NULL, 'C', NULL, &d));
  assert_ok(dv_stream_create(c, 0, &s));
  hold(1);
  assert_ok(dv_copy_to_device(d, p, s)); /* queued on s, not run */
  assert_ok(dv_copy_to_host(d, p, s, NULL));
  dv_array_release(d);
  dv_stream_release(s);
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, unhold_later, (void *)hold), 0);
  dv_array_release(p);
  dv_status rc = dv_context_destroy(c); /* frees d and p while s still holds copies of them */
  pthread_join(t, NULL);
  assert_ok(rc);
  if (faults() != before) fail_msg("queued work ran on memory the context had freed");
}

/* A copy between two devices is synchronous on the source's side
 * (include/devarray.h, dv_array_copy): once the call returns, the source
 * may be written or freed.  The dense peer path (cuMemcpyPeerAsync on the
 * destination's stream) used to return with the copy still queued, so the
 * source freed right after the call was read by the queued copy (the
 * double reports it as a fault). */
static void test_peer_copy_source_free_after_return(void **state) {
  (void)state;
  hold_fn hold = (hold_fn)double_sym("dvdouble_hold");
  long (*faults)(void) = (long (*)(void))double_sym("dvdouble_faults");
  if (!hold || !faults) skip();
  dv_context *c1 = NULL;
  dv_status rc = test_context(&c1, "cuda_device=1", NULL);
  if (rc == DV_ERR_BACKEND_UNAVAILABLE) {
    printf("SKIPPED: test_peer_copy_source_free_after_return: one CUDA device\n");
    skip();
  }
  assert_ok(rc);
  long before = faults();
  int64_t n = 4096;
  const dv_dtype *dt = dv_dtype_get(DV_INT32);
  int32_t *src = malloc((size_t)n * 4), *out = calloc((size_t)n, 4);
  for (int64_t i = 0; i < n; i++) src[i] = (int32_t)(i * 3 + 1);
  dv_array *hs, *d1, *d0, *ho;
  assert_ok(dv_host_array_wrap(c1, src, 1, &n, dt, NULL, &hs));
  assert_ok(dv_to_device(c1, hs, NULL, 1, NULL, &d1));
  assert_ok(dv_device_array(g_ctx, 1, &n, dt, NULL, 'C', NULL, &d0));
  dv_stream *s0;
  assert_ok(dv_stream_create(g_ctx, 0, &s0));
  hold(1);
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, unhold_later, (void *)hold), 0);
  rc = dv_array_copy(d0, d1, s0); /* device 1 -> device 0 on s0 */
  /* The source side is done: free the source now. */
  dv_array_release(d1);
  dv_status frc = dv_context_flush_deallocs(c1);
  pthread_join(t, NULL);
  assert_ok(rc);
  assert_ok(frc);
  dv_status src_ok = dv_stream_synchronize(s0);
  long got = faults() - before;
  if (got) fail_msg("the peer copy read its source after the call returned and the source was freed "
                    "(%ld fault(s); synchronize: %s)", got, dv_status_name(src_ok));
  assert_ok(src_ok);
  assert_ok(dv_host_array_wrap(g_ctx, out, 1, &n, dt, NULL, &ho));
  assert_ok(dv_copy_to_host(d0, ho, NULL, NULL));
  assert_memory_equal(out, src, (size_t)n * 4);
  dv_stream_release(s0);
  dv_array_release(ho), dv_array_release(d0), dv_array_release(hs);
  assert_ok(dv_context_destroy(c1));
  free(src), free(out);
}

/* Issue 13 #6: a context made before fork() is refused in the child, with
 * a message, instead of calling a driver whose state did not survive. */
static void test_fork_child_refused(void **state) {
  (void)state;
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    int64_t n = 16;
    float h[16] = {0};
    dv_array *hs = NULL, *d = NULL;
    dv_status rc = dv_host_array_wrap(g_ctx, h, 1, &n, dv_dtype_get(DV_FLOAT32), NULL, &hs);
    if (!rc) rc = dv_to_device(g_ctx, hs, NULL, 1, NULL, &d);
    int ok = rc == DV_ERR_MISUSE && strstr(dv_last_error(), "fork") != NULL;
    if (!ok) fprintf(stderr, "child: %s: %s\n", dv_status_name(rc), dv_last_error());
    _exit(ok ? 0 : 1);
  }
  int st = 0;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  assert_true(WIFEXITED(st));
  assert_int_equal(WEXITSTATUS(st), 0);
}

/* ---- the driver version: NVRTC's choice and the parameter limit (issue 21) ---- */

typedef void (*set_version_fn)(int version);
typedef void (*set_cc_fn)(int major, int minor);

/* The double plays its default driver (13.0) and device (99.0) again. */
static int reset_double_teardown(void **state) {
  void *h = driver();
  set_version_fn v = h ? (set_version_fn)dlsym(h, "dvdouble_set_driver_version") : NULL;
  set_cc_fn c = h ? (set_cc_fn)dlsym(h, "dvdouble_set_compute_capability") : NULL;
  if (v) v(0);
  if (c) c(0, 0);
  return ctx_teardown(state);
}

/* An NVRTC of the toolkit, by its path: the first that loads. */
static bool toolkit_nvrtc(char *buf, size_t cap, const dv_nvrtc **nv) {
  glob_t g;
  bool found = false;
  if (glob("/usr/local/cuda*/lib64/libnvrtc.so.*", 0, NULL, &g) != 0) return false;
  for (size_t i = 0; i < g.gl_pathc && !found; i++) {
    const char *v = strstr(g.gl_pathv[i], "libnvrtc.so.") + strlen("libnvrtc.so.");
    if (isdigit((unsigned char)*v) && dv__nvrtc_load(g.gl_pathv[i], 0, nv) == DV_OK) {
      snprintf(buf, cap, "%s", g.gl_pathv[i]);
      found = true;
    }
  }
  globfree(&g);
  return found;
}

/* Build a small kernel on c (never from the module cache); the status, and
 * the message in why. */
static dv_status build_small(dv_context *c, char *why, size_t cap) {
  dv_program *p = NULL;
  const char *src = "DV_KERNEL(k, DV_ARRAY(float, x)) { DV_BIND(float, x); x[0] = 1; }\n";
  assert_ok(dv_program_create(c, "small.dvk", src, &p));
  dv_module *m = NULL;
  dv_status rc = dv_program_build(p, DV_BUILD_NO_CACHE, &m);
  snprintf(why, cap, "%s", rc ? dv_last_error() : "");
  if (!rc) dv_module_release(m);
  dv_program_destroy(p);
  return rc;
}

/* "... nvrtc X.Y driver V ..." of the context's kernel target: the NVRTC
 * major its builds use, or -1. */
static int target_nvrtc_major(dv_context *c, int driver_version) {
  char id[512], want[64];
  assert_ok(c->be->kernel_target_id(c->bst, id, sizeof id));
  const char *at = strstr(id, "nvrtc ");
  snprintf(want, sizeof want, " driver %d ", driver_version);
  if (!at || !strstr(id, want)) fail_msg("kernel target \"%s\": no nvrtc or no%s", id, want);
  return atoi(at + 6);
}

/* Issue 21: NVRTC follows the driver.  A 12.x driver with NVRTC 13 named
 * (or the only one found) refuses to build, naming both versions and the
 * option; a 13.x driver builds with NVRTC 13, named or found. */
static void test_nvrtc_follows_driver(void **state) {
  (void)state;
  set_version_fn set_version = (set_version_fn)double_sym("dvdouble_set_driver_version");
  if (!set_version) skip();
  char path[1024], opt[1100], why[2048], want[128];
  const dv_nvrtc *nv = NULL;
  if (!toolkit_nvrtc(path, sizeof path, &nv)) {
    printf("SKIPPED: test_nvrtc_follows_driver: no /usr/local/cuda*/lib64/libnvrtc.so.<major> to name\n");
    skip();
  }
  int n = nv->major;
  snprintf(opt, sizeof opt, "nvrtc_library=%s", path);
  /* The driver before NVRTC's major. */
  int older = (n - 1) * 1000 + 40;
  set_version(older);
  dv_context *c = NULL;
  assert_ok(test_context(&c, opt, NULL));
  dv_device_info di;
  assert_ok(dv_context_device_info(c, &di));
  snprintf(want, sizeof want, "%d.4", n - 1);
  if (!strstr(di.driver_version, want))
    fail_msg("the double plays driver \"%s\", not %s", di.driver_version, want);
  assert_status(build_small(c, why, sizeof why), DV_ERR_NO_COMPILER);
  snprintf(want, sizeof want, "NVRTC %d.%d (%s) is newer than the CUDA driver (%d.4)", n, nv->minor,
           path, n - 1);
  if (!strstr(why, want)) fail_msg("no \"%s\" in: %s", want, why);
  assert_non_null(strstr(why, "nvrtc_library"));
  assert_ok(dv_context_destroy(c));
  /* Found, not named: an older NVRTC or a refusal, never NVRTC n. */
  assert_ok(test_context(&c, NULL));
  dv_status rc = build_small(c, why, sizeof why);
  if (rc == DV_OK) {
    int got = target_nvrtc_major(c, older);
    if (got >= n) fail_msg("driver %d.4 builds with NVRTC %d", n - 1, got);
  } else {
    assert_int_equal(rc, DV_ERR_NO_COMPILER);
    if (!strstr(why, "newer than the CUDA driver") && !strstr(why, "NVRTC not found"))
      fail_msg("refused for another reason: %s", why);
    snprintf(want, sizeof want, "libnvrtc.so.%d:", n - 1); /* tried first */
    if (!strstr(why, want)) fail_msg("no \"%s\" in: %s", want, why);
  }
  assert_ok(dv_context_destroy(c));
  /* The driver of NVRTC's own major: it builds, named and found. */
  set_version(n * 1000);
  assert_ok(test_context(&c, opt, NULL));
  rc = build_small(c, why, sizeof why);
  if (rc) fail_msg("driver %d.0, %s: %s: %s", n, opt, dv_status_name(rc), why);
  assert_int_equal(target_nvrtc_major(c, n * 1000), n);
  assert_ok(dv_context_destroy(c));
  assert_ok(test_context(&c, NULL));
  rc = build_small(c, why, sizeof why);
  if (rc) fail_msg("driver %d.0, NVRTC found: %s: %s", n, dv_status_name(rc), why);
  assert_int_equal(target_nvrtc_major(c, n * 1000), n);
  assert_ok(dv_context_destroy(c));
}

/* Issue 21: the kernel-parameter limit a context reports: 4096 bytes before
 * driver 12.1 or before Volta, 32764 from 12.1 on Volta and newer. */
static void test_param_limit_by_driver(void **state) {
  (void)state;
  set_version_fn set_version = (set_version_fn)double_sym("dvdouble_set_driver_version");
  set_cc_fn set_cc = (set_cc_fn)double_sym("dvdouble_set_compute_capability");
  if (!set_version || !set_cc) skip();
  static const struct { int driver, cc_major, cc_minor; size_t want; } cases[] = {
      {11080, 0, 0, 4096}, {12000, 0, 0, 4096}, {12010, 0, 0, 32764}, {12040, 0, 0, 32764},
      {13000, 0, 0, 32764}, {13000, 6, 1, 4096}, {12010, 7, 0, 32764}, {12000, 9, 0, 4096},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    set_version(cases[i].driver);
    set_cc(cases[i].cc_major, cases[i].cc_minor);
    dv_context *c = NULL;
    assert_ok(test_context(&c, NULL));
    dv_klimits lim;
    assert_ok(c->be->kernel_limits(c->bst, &lim));
    if (lim.max_arg_bytes != cases[i].want)
      fail_msg("driver %d, compute capability %d.%d: max_arg_bytes %zu, want %zu", cases[i].driver,
               cases[i].cc_major ? cases[i].cc_major : 99, cases[i].cc_minor, lim.max_arg_bytes,
               cases[i].want);
    assert_ok(dv_context_destroy(c));
  }
}

/* ---- issue 22: staging, callbacks, module loading, frees, 1-D pitch ---- */

typedef size_t (*pinned_fn)(size_t *peak);
typedef void (*void_fn)(void);
typedef long (*calls_fn)(const char *name);

/* A stream callback that blocks the driver's callback thread until opened
 * (a legal raw-CUDA pattern: waiting for the host to produce something), or
 * until limit_s seconds have passed. */
typedef struct gate {
  _Atomic int entered, open, timed_out;
  double limit_s;
} gate;

static void gate_wait(gate *g) {
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
static void gate_cb(dv_stream *s, dv_status st, void *user) {
  (void)s, (void)st;
  gate_wait(user);
}
static void gate_hostfn(void *user) { gate_wait(user); }

/* Until the gate's callback runs (and so holds the callback thread). */
static void gate_entered(gate *g) {
  for (int i = 0; i < 5000 && !atomic_load(&g->entered); i++) nanosleep(&(struct timespec){0, 1000000}, NULL);
  assert_true(atomic_load(&g->entered));
}

/* Still closed: neither opened nor timed out. */
static bool gate_closed(gate *g) { return !atomic_load(&g->open) && !atomic_load(&g->timed_out); }

/* Issue 22 #6: pinned staging memory is bounded per context
 * (cuda_staging_limit).  An asynchronous 8 MiB download into pageable
 * memory, queued while the streams are held, used to pin a new buffer per
 * piece (8 MiB in 128 cuMemHostAlloc calls here) and keep them all; now it
 * waits for buffers to come back at the limit, the statistics show the
 * staging bytes, and later copies trim what is idle to two chunks. */
static void test_staging_bounded(void **state) {
  (void)state;
  hold_fn hold = (hold_fn)double_sym("dvdouble_hold");
  pinned_fn pinned = (pinned_fn)double_sym("dvdouble_pinned");
  void_fn reset_peak = (void_fn)double_sym("dvdouble_pinned_reset_peak");
  if (!hold || !pinned || !reset_peak) skip();
  const size_t chunk = 64 << 10, limit = 256 << 10;
  dv_context *c;
  assert_ok(test_context(&c, "cuda_staging_chunk=64K", "cuda_staging_limit=256K", NULL));
  size_t base = pinned(NULL);
  int64_t n = 2 << 20; /* floats: 8 MiB, 128 pieces */
  size_t bytes = (size_t)n * 4;
  float *src = malloc(bytes), *out = malloc(bytes);
  assert_non_null(src), assert_non_null(out);
  fill_pattern(src, bytes, 22);
  memset(out, 0, bytes);
  const dv_dtype *dt = dv_dtype_get(DV_FLOAT32);
  dv_array *hs, *ho, *d;
  dv_stream *s;
  assert_ok(dv_host_array_wrap(c, src, 1, &n, dt, NULL, &hs));
  assert_ok(dv_host_array_wrap(c, out, 1, &n, dt, NULL, &ho));
  assert_ok(dv_device_array(c, 1, &n, dt, NULL, 'C', NULL, &d));
  assert_ok(dv_stream_create(c, 0, &s));
  assert_ok(dv_copy_to_device(d, hs, NULL));
  reset_peak();
  hold(1);
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, unhold_later, (void *)hold), 0);
  dv_status rc = dv_copy_to_host(d, ho, s, NULL); /* waits for buffers while the streams are held */
  pthread_join(t, NULL);
  hold(0);
  assert_ok(rc);
  assert_ok(dv_stream_synchronize(s));
  size_t peak = 0;
  pinned(&peak);
  /* Beside the staging: the stream's staging thread's word (64 bytes of
   * mapped pinned memory, fam_stager.c), until the stream goes; none where
   * the double plays a driver without stream memory operations. */
  const char *memops = getenv("CUDA_DOUBLE_MEMOPS");
  const size_t word = memops && !strcmp(memops, "0") ? 0 : 64;
  if (peak - base > limit + word)
    fail_msg("an asynchronous 8 MiB copy had %zu bytes of staging pinned at once; cuda_staging_limit is %zu",
             peak - base - word, limit);
  if (memcmp(out, src, bytes)) fail_msg("the bounded asynchronous download differs");
  dv_stats st = {.size = sizeof st};
  assert_ok(dv_context_stats(c, &st));
  if (st.staging.current != pinned(NULL) - base - word || st.staging.current == 0 || st.staging.peak > limit)
    fail_msg("dv_stats staging: %llu bytes now (peak %llu); the driver has %zu pinned for this context's staging",
             (unsigned long long)st.staging.current, (unsigned long long)st.staging.peak, pinned(NULL) - base - word);
  if (st.staging_misses == 0 || st.staging_hits == 0) fail_msg("staging buffers were not counted as made and reused");
  /* Three more copies: what stays pinned is at most two chunks. */
  for (int i = 0; i < 3; i++) assert_ok(dv_copy_to_host(d, ho, NULL, NULL));
  if (pinned(NULL) - base - word > 2 * chunk)
    fail_msg("%zu bytes of staging still pinned after three more copies (at most two chunks, %zu, are kept)",
             pinned(NULL) - base - word, 2 * chunk);
  dv_stream_release(s);
  dv_array_release(d), dv_array_release(hs), dv_array_release(ho);
  free(src), free(out);
  assert_ok(dv_context_destroy(c));
  if (pinned(NULL) != base)
    fail_msg("%zu bytes of staging left pinned after the context was destroyed", pinned(NULL) - base);
}

/* Issue 22 #11: five asynchronous 4 KiB pageable copies took 150 ms on the
 * double: each pinned a new buffer of a whole chunk (4 MiB by default,
 * 20 MiB for 20 KiB of data; the pinned allocations, and under the
 * sanitizers their first touch and free, are where the time went).
 * Buffers are sized to the piece now (64 KiB at least) and reused. */
static void test_small_async_copies_pin_little(void **state) {
  (void)state;
  pinned_fn pinned = (pinned_fn)double_sym("dvdouble_pinned");
  void_fn reset_peak = (void_fn)double_sym("dvdouble_pinned_reset_peak");
  if (!pinned || !reset_peak) skip();
  dv_context *c;
  assert_ok(test_context(&c, "cuda_staging_chunk=4M", NULL));
  int64_t n = 1024; /* floats: 4 KiB */
  const dv_dtype *dt = dv_dtype_get(DV_FLOAT32);
  float *h = calloc(5 * (size_t)n, 4);
  assert_non_null(h);
  dv_array *d, *hv[5];
  dv_stream *s;
  assert_ok(dv_device_array(c, 1, &n, dt, NULL, 'C', NULL, &d));
  assert_ok(dv_array_memset(d, 0x3f, NULL));
  for (int i = 0; i < 5; i++) assert_ok(dv_host_array_wrap(c, h + i * n, 1, &n, dt, NULL, &hv[i]));
  assert_ok(dv_stream_create(c, 0, &s));
  size_t base = pinned(NULL), peak = 0;
  reset_peak();
  double t0 = now_s();
  for (int i = 0; i < 5; i++) assert_ok(dv_copy_to_host(d, hv[i], s, NULL));
  double took = now_s() - t0;
  assert_ok(dv_stream_synchronize(s));
  pinned(&peak);
  if (peak - base > 5 * ((size_t)64 << 10) + 64 /* the stream's staging thread's word */)
    fail_msg("five asynchronous 4 KiB copies pinned %zu bytes of staging (%.1f ms to queue)", peak - base, took * 1e3);
  for (size_t i = 0; i < 5 * (size_t)n; i++)
    if (memcmp(&h[i], &h[0], 4) || h[0] == 0) fail_msg("float %zu was not copied", i);
  for (int i = 0; i < 5; i++) dv_array_release(hv[i]);
  dv_array_release(d);
  dv_stream_release(s);
  free(h);
  assert_ok(dv_context_destroy(c));
}

/* Issue 22 #7: a synchronous pageable copy does not depend on host
 * callbacks, which the driver may serialize (the double does): a 16 MiB
 * upload and download on the default stream finish while an unrelated
 * callback on another stream blocks the callback thread.  They used to
 * wait for their buffers to come back through callbacks, 5 s here. */
static void test_sync_copy_not_behind_callbacks(void **state) {
  (void)state;
  dv_context *c;
  assert_ok(test_context(&c, "cuda_staging_chunk=1M", NULL));
  int64_t n = 4 << 20; /* floats: 16 MiB */
  size_t bytes = (size_t)n * 4;
  float *src = malloc(bytes), *out = malloc(bytes);
  assert_non_null(src), assert_non_null(out);
  fill_pattern(src, bytes, 7);
  memset(out, 0, bytes);
  const dv_dtype *dt = dv_dtype_get(DV_FLOAT32);
  dv_array *hs, *ho, *d;
  dv_stream *a;
  assert_ok(dv_host_array_wrap(c, src, 1, &n, dt, NULL, &hs));
  assert_ok(dv_host_array_wrap(c, out, 1, &n, dt, NULL, &ho));
  assert_ok(dv_device_array(c, 1, &n, dt, NULL, 'C', NULL, &d));
  assert_ok(dv_stream_create(c, 0, &a));
  gate g = {.limit_s = 5};
  assert_ok(dv_stream_add_callback(a, gate_cb, &g));
  gate_entered(&g);
  double t0 = now_s();
  dv_status up = dv_copy_to_device(d, hs, NULL);
  dv_status down = dv_copy_to_host(d, ho, NULL, NULL);
  double took = now_s() - t0;
  bool closed = gate_closed(&g);
  atomic_store(&g.open, 1);
  assert_ok(dv_stream_synchronize(a));
  assert_ok(up);
  assert_ok(down);
  if (!closed)
    fail_msg("synchronous 16 MiB pageable copies waited %.1f s for a gated callback on another stream", took);
  if (memcmp(out, src, bytes)) fail_msg("the synchronous round trip differs");
  dv_stream_release(a);
  dv_array_release(d), dv_array_release(hs), dv_array_release(ho);
  free(src), free(out);
  assert_ok(dv_context_destroy(c));
}

/* Issue 22 #11: a synchronous pageable upload on the legacy stream waits
 * for the legacy stream (and so for the blocking streams), not for the
 * whole context: a non-blocking stream held up by a gated callback does
 * not hold it.  It called cuCtxSynchronize.  (Not reachable through the
 * public copies, whose synchronous form uses the default stream: called at
 * the backend.) */
static void test_sync_legacy_upload_not_context_wide(void **state) {
  (void)state;
  calls_fn calls = (calls_fn)double_sym("dvdouble_calls");
  if (!calls) skip();
  dv_context *c;
  assert_ok(test_context(&c, "cuda_staging_chunk=64K", NULL));
  int64_t n = 1 << 18; /* floats: 1 MiB */
  size_t bytes = (size_t)n * 4;
  float *src = malloc(bytes), *out = malloc(bytes);
  assert_non_null(src), assert_non_null(out);
  fill_pattern(src, bytes, 9);
  dv_array *d, *ho;
  assert_ok(dv_device_array(c, 1, &n, dv_dtype_get(DV_FLOAT32), NULL, 'C', NULL, &d));
  void *buf = NULL;
  size_t off = 0;
  assert_ok(dv_array_native(d, &buf, &off));
  dv_stream *nb;
  assert_ok(dv_stream_create(c, DV_STREAM_NON_BLOCKING, &nb));
  gate g = {.limit_s = 5};
  assert_ok(dv_stream_add_callback(nb, gate_cb, &g));
  gate_entered(&g);
  dv_bstream *legacy = NULL;
  assert_ok(c->be->stream_builtin(c->bst, 1, &legacy));
  dv_rect r;
  memset(&r, 0, sizeof r);
  r.src.ptr = src;
  r.dst.buf = buf;
  r.dst.offset = off;
  r.width = bytes;
  r.height = r.depth = 1;
  r.src_pitch = r.dst_pitch = bytes;
  r.flags = DV_COPY_SYNC;
  long before = calls("cuCtxSynchronize");
  dv_status rc = c->be->copy_rect(c->bst, legacy, &r);
  bool closed = gate_closed(&g);
  long ctxsyncs = calls("cuCtxSynchronize") - before;
  atomic_store(&g.open, 1);
  assert_ok(dv_stream_synchronize(nb));
  assert_ok(rc);
  if (!closed || ctxsyncs)
    fail_msg("a synchronous upload on the legacy stream waited for a gated non-blocking stream (%ld cuCtxSynchronize)",
             ctxsyncs);
  assert_ok(dv_host_array_wrap(c, out, 1, &n, dv_dtype_get(DV_FLOAT32), NULL, &ho));
  assert_ok(dv_copy_to_host(d, ho, NULL, NULL));
  if (memcmp(out, src, bytes)) fail_msg("the upload on the legacy stream differs");
  dv_stream_release(nb);
  dv_array_release(d), dv_array_release(ho);
  free(src), free(out);
  assert_ok(dv_context_destroy(c));
}

/* Issue 22 #8: loading a module uploads its constants on a private
 * non-blocking stream: it does not wait behind a blocking stream that a
 * gated callback holds up (on the legacy stream, with the default
 * synchronization, it did; on a GPU that is a deadlock when the gate waits
 * for the loading thread).  Needs NVRTC. */
static void test_module_load_not_behind_blocking_stream(void **state) {
  (void)state;
  dv_context *c;
  assert_ok(test_context(&c, NULL));
  float coef[4] = {1, 2, 3, 4};
  int64_t n4 = 4;
  dv_array *hc;
  assert_ok(dv_host_array_wrap(c, coef, 1, &n4, dv_dtype_get(DV_FLOAT32), NULL, &hc));
  dv_program *p = NULL;
  const char *src = "DV_KERNEL(k, DV_ARRAY(float, x)) { DV_BIND(float, x); x[0] = coef[1] + coef[3]; }\n";
  assert_ok(dv_program_create(c, "constants.dvk", src, &p));
  assert_ok(dv_program_constant(p, "coef", hc));
  dv_stream *a;
  assert_ok(dv_stream_create(c, 0, &a)); /* blocking */
  gate g = {.limit_s = 2}; /* below CUDA_DOUBLE_BLOCK_S: the old upload waited, not aborted */
  assert_ok(dv_stream_add_callback(a, gate_cb, &g));
  gate_entered(&g);
  dv_module *m = NULL;
  double t0 = now_s();
  dv_status rc = dv_program_build(p, DV_BUILD_NO_CACHE, &m);
  double took = now_s() - t0;
  bool closed = gate_closed(&g);
  char why[1024];
  snprintf(why, sizeof why, "%s", rc ? dv_last_error() : "");
  atomic_store(&g.open, 1);
  assert_ok(dv_stream_synchronize(a));
  if (rc == DV_ERR_NO_COMPILER) {
    printf("SKIPPED: test_module_load_not_behind_blocking_stream: no NVRTC: %s\n", why);
  } else {
    if (rc) fail_msg("build: %s: %s", dv_status_name(rc), why);
    if (!closed) fail_msg("loading a module with constants waited %.1f s for a gated blocking stream", took);
    dv_module_release(m);
  }
  dv_program_destroy(p);
  dv_stream_release(a);
  dv_array_release(hc);
  assert_ok(dv_context_destroy(c));
  if (rc == DV_ERR_NO_COMPILER) skip();
}

/* Issue 22 #9: a free waits for the streams of this context that used
 * memory, not for the whole CUDA context: work of other code on a stream
 * of its own (a gated host function here) does not hold up a flush of
 * devarray's frees (each free called cuCtxSynchronize).  Work devarray
 * queued on its own streams (blocking, non-blocking, the legacy one) is
 * still waited for before the memory goes. */
typedef int (*raw_set_fn)(void *ctx);
typedef int (*raw_stream_fn)(void **s, unsigned flags);
typedef int (*raw_hostfn_fn)(void *s, void (*fn)(void *), void *user);
typedef int (*raw_destroy_fn)(void *s);

static void test_free_not_behind_foreign_stream(void **state) {
  (void)state;
  hold_fn hold = (hold_fn)double_sym("dvdouble_hold");
  long (*faults)(void) = (long (*)(void))double_sym("dvdouble_faults");
  calls_fn calls = (calls_fn)double_sym("dvdouble_calls");
  if (!hold || !faults || !calls) skip();
  raw_set_fn set_current = (raw_set_fn)dlsym(driver(), "cuCtxSetCurrent");
  raw_stream_fn stream_create = (raw_stream_fn)dlsym(driver(), "cuStreamCreate");
  raw_hostfn_fn host_fn = (raw_hostfn_fn)dlsym(driver(), "cuLaunchHostFunc");
  raw_destroy_fn stream_destroy = (raw_destroy_fn)dlsym(driver(), "cuStreamDestroy_v2");
  assert_non_null(set_current), assert_non_null(stream_create);
  assert_non_null(host_fn), assert_non_null(stream_destroy);
  dv_context *c;
  assert_ok(test_context(&c, NULL));
  void *native = NULL, *dev = NULL, *foreign = NULL;
  assert_ok(dv_context_native(c, &native, &dev));
  /* Other code's stream in the same primary context, held by a host function. */
  gate g = {.limit_s = 3};
  assert_int_equal(set_current(native), 0);
  assert_int_equal(stream_create(&foreign, 0), 0); /* blocking, as CuPy's are */
  assert_int_equal(host_fn(foreign, gate_hostfn, &g), 0);
  assert_int_equal(set_current(NULL), 0);
  gate_entered(&g);
  int64_t n = 1 << 16;
  dv_array *x;
  assert_ok(dv_device_array(c, 1, &n, dv_dtype_get(DV_FLOAT32), NULL, 'C', NULL, &x));
  assert_ok(dv_array_memset(x, 0, NULL));
  long frees = calls("cuMemFree_v2");
  dv_array_release(x);
  double t0 = now_s();
  dv_status rc = dv_context_flush_deallocs(c);
  double took = now_s() - t0;
  bool closed = gate_closed(&g);
  long freed = calls("cuMemFree_v2") - frees;
  atomic_store(&g.open, 1);
  assert_ok(rc);
  if (!closed) fail_msg("a flush of one free waited %.1f s for another stream of the CUDA context", took);
  assert_int_equal(freed, 1);
  /* devarray's own queued work on the memory is waited for. */
  long before = faults();
  dv_array *p, *d[3];
  dv_stream *sb, *snb;
  assert_ok(dv_pinned_array(c, 1, &n, dv_dtype_get(DV_FLOAT32), NULL, 'C', &p));
  assert_ok(dv_stream_create(c, 0, &sb));
  assert_ok(dv_stream_create(c, DV_STREAM_NON_BLOCKING, &snb));
  dv_stream *on[3] = {sb, snb, dv_context_legacy_stream(c)};
  for (int i = 0; i < 3; i++) assert_ok(dv_device_array(c, 1, &n, dv_dtype_get(DV_FLOAT32), NULL, 'C', NULL, &d[i]));
  hold(1);
  for (int i = 0; i < 3; i++) assert_ok(dv_copy_to_host(d[i], p, on[i], NULL)); /* queued, not run */
  for (int i = 0; i < 3; i++) dv_array_release(d[i]);
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, unhold_later, (void *)hold), 0);
  rc = dv_context_flush_deallocs(c); /* frees d[] while the copies are queued */
  pthread_join(t, NULL);
  assert_ok(rc);
  assert_ok(dv_context_synchronize(c));
  if (faults() != before) fail_msg("queued copies read device memory that a flush had freed");
  dv_stream_release(sb), dv_stream_release(snb);
  dv_array_release(p);
  assert_int_equal(set_current(native), 0);
  assert_int_equal(stream_destroy(foreign), 0);
  assert_int_equal(set_current(NULL), 0);
  assert_ok(dv_context_destroy(c));
}

/* Issue 22 #9: under a device error the frees are still made (a failed
 * wait used to skip them: the memory and registrations stayed with the
 * driver); the error is reported. */
static void test_free_despite_device_error(void **state) {
  (void)state;
  void (*fault)(int) = (void (*)(int))double_sym("dvdouble_fault");
  calls_fn calls = (calls_fn)double_sym("dvdouble_calls");
  if (!fault || !calls) skip();
  dv_context *c1 = NULL;
  /* the driver's own frees: with the pinned pool (on by default) a pinned
   * array's memory would go back to the pool, not to cuMemFreeHost */
  dv_status rc = test_context(&c1, "cuda_device=1", "pinned_pool=off", NULL);
  if (rc == DV_ERR_BACKEND_UNAVAILABLE) {
    printf("SKIPPED: test_free_despite_device_error: one CUDA device\n");
    skip();
  }
  assert_ok(rc);
  int64_t n = 4096;
  dv_array *d, *p;
  assert_ok(dv_device_array(c1, 1, &n, dv_dtype_get(DV_FLOAT32), NULL, 'C', NULL, &d));
  assert_ok(dv_pinned_array(c1, 1, &n, dv_dtype_get(DV_FLOAT32), NULL, 'C', &p));
  long frees = calls("cuMemFree_v2"), host_frees = calls("cuMemFreeHost");
  fault(1);
  dv_array_release(d);
  dv_array_release(p);
  rc = dv_context_flush_deallocs(c1);
  assert_status(rc, DV_ERR_DEVICE_LOST);
  if (calls("cuMemFree_v2") != frees + 1 || calls("cuMemFreeHost") != host_frees + 1)
    fail_msg("after a device error the flush made %ld cuMemFree and %ld cuMemFreeHost calls, want 1 and 1",
             calls("cuMemFree_v2") - frees, calls("cuMemFreeHost") - host_frees);
  dv_context_destroy(c1); /* fails: the device is lost */
}

/* The same with the pinned pool on: the pinned block goes back to the pool
 * (no driver free at the flush), and the context's destruction after the
 * device error still gives everything back to the driver. */
static void test_free_despite_device_error_pooled(void **state) {
  (void)state;
  void (*fault)(int) = (void (*)(int))double_sym("dvdouble_fault");
  calls_fn calls = (calls_fn)double_sym("dvdouble_calls");
  if (!fault || !calls) skip();
  dv_context *c1 = NULL;
  dv_status rc = test_context(&c1, "cuda_device=1", "pinned_pool=on", NULL);
  if (rc == DV_ERR_BACKEND_UNAVAILABLE) {
    printf("SKIPPED: test_free_despite_device_error_pooled: one CUDA device\n");
    skip();
  }
  assert_ok(rc);
  int64_t n = 4096;
  dv_array *d, *p;
  assert_ok(dv_device_array(c1, 1, &n, dv_dtype_get(DV_FLOAT32), NULL, 'C', NULL, &d));
  assert_ok(dv_pinned_array(c1, 1, &n, dv_dtype_get(DV_FLOAT32), NULL, 'C', &p));
  long host_allocs = calls("cuMemHostAlloc"), host_frees = calls("cuMemFreeHost");
  fault(1);
  dv_array_release(d);
  dv_array_release(p);
  rc = dv_context_flush_deallocs(c1);
  assert_status(rc, DV_ERR_DEVICE_LOST);
  assert_status(dv_context_destroy(c1), DV_ERR_DEVICE_LOST); /* the device is lost; everything given back */
  if (calls("cuMemFreeHost") - host_frees != calls("cuMemHostAlloc") - host_allocs + 1)
    fail_msg("after the context went, %ld cuMemFreeHost calls for %ld page-locked allocations",
             calls("cuMemFreeHost") - host_frees, calls("cuMemHostAlloc") - host_allocs + 1);
}

/* Issue 22 #10: a 1-D strided view whose stride is above the device's
 * pitch limit is copied (the planner packs it on the device, or copies
 * element by element) both ways, with pageable and pinned host memory and
 * device to device.  It failed with DV_ERR_NOT_SUPPORTED and no message. */
typedef void (*size_set_fn)(size_t);
typedef void (*int_set_fn)(int);

static int reset_pitch_teardown(void **state) {
  void *h = driver();
  size_set_fn mp = h ? (size_set_fn)dlsym(h, "dvdouble_set_max_pitch") : NULL;
  int_set_fn uva = h ? (int_set_fn)dlsym(h, "dvdouble_set_uva") : NULL;
  if (mp) mp(0);
  if (uva) uva(1);
  return ctx_teardown(state);
}

static void test_1d_stride_above_pitch_limit(void **state) {
  (void)state;
  size_set_fn max_pitch = (size_set_fn)double_sym("dvdouble_set_max_pitch");
  if (!max_pitch) skip();
  max_pitch(4096);
  dv_context *c;
  assert_ok(test_context(&c, NULL));
  const int64_t n = 100, step = 2048; /* int32: rows 8 KiB apart, above a 4 KiB pitch limit */
  int64_t whole = n * step;
  const dv_dtype *dt = dv_dtype_get(DV_INT32);
  int32_t *big = calloc((size_t)whole, 4), *got = calloc((size_t)n, 4), *vals = malloc((size_t)n * 4);
  assert_non_null(big), assert_non_null(got), assert_non_null(vals);
  for (int64_t i = 0; i < whole; i++) big[i] = (int32_t)(i * 3 + 1);
  for (int64_t i = 0; i < n; i++) vals[i] = (int32_t)(-7 * i - 5);
  dv_array *hb, *d, *v, *hg, *hv, *e, *pg;
  assert_ok(dv_host_array_wrap(c, big, 1, &whole, dt, NULL, &hb));
  assert_ok(dv_to_device(c, hb, NULL, 1, NULL, &d));
  dv_index idx[1] = {DV_SLICE(DV_NONE, DV_NONE, step)};
  assert_ok(dv_array_slice(d, 1, idx, &v));
  int64_t nn = n;
  assert_ok(dv_host_array_wrap(c, got, 1, &nn, dt, NULL, &hg));
  dv_status rc = dv_copy_to_host(v, hg, NULL, NULL); /* device view -> pageable */
  if (rc) fail_msg("strided view to host: %s: \"%s\"", dv_status_name(rc), dv_last_error());
  for (int64_t i = 0; i < n; i++)
    if (got[i] != big[i * step]) fail_msg("element %lld: %d, want %d", (long long)i, got[i], big[i * step]);
  assert_ok(dv_pinned_array(c, 1, &nn, dt, NULL, 'C', &pg)); /* device view -> pinned */
  rc = dv_copy_to_host(v, pg, NULL, NULL);
  if (rc) fail_msg("strided view to pinned host memory: %s: \"%s\"", dv_status_name(rc), dv_last_error());
  int32_t *pp = NULL;
  assert_ok(dv_array_host_data(pg, (void **)&pp));
  for (int64_t i = 0; i < n; i++) assert_int_equal(pp[i], big[i * step]);
  assert_ok(dv_device_array(c, 1, &nn, dt, NULL, 'C', NULL, &e)); /* device to device */
  rc = dv_array_copy(e, v, NULL);
  if (rc) fail_msg("strided view to a device array: %s: \"%s\"", dv_status_name(rc), dv_last_error());
  memset(got, 0, (size_t)n * 4);
  assert_ok(dv_copy_to_host(e, hg, NULL, NULL));
  for (int64_t i = 0; i < n; i++) assert_int_equal(got[i], big[i * step]);
  assert_ok(dv_host_array_wrap(c, vals, 1, &nn, dt, NULL, &hv)); /* pageable -> device view */
  rc = dv_copy_to_device(v, hv, NULL);
  if (rc) fail_msg("host to the strided view: %s: \"%s\"", dv_status_name(rc), dv_last_error());
  for (int64_t i = 0; i < n; i++) big[i * step] = vals[i];
  int32_t *back = calloc((size_t)whole, 4);
  assert_non_null(back);
  dv_array *hback;
  assert_ok(dv_host_array_wrap(c, back, 1, &whole, dt, NULL, &hback));
  assert_ok(dv_copy_to_host(d, hback, NULL, NULL));
  if (memcmp(back, big, (size_t)whole * 4)) fail_msg("the strided upload wrote other bytes than its elements");
  max_pitch(0);
  dv_array_release(hback), dv_array_release(hv), dv_array_release(e), dv_array_release(pg);
  dv_array_release(hg), dv_array_release(v), dv_array_release(d), dv_array_release(hb);
  free(big), free(got), free(vals), free(back);
  assert_ok(dv_context_destroy(c));
}

/* Issue 22 #11: a stream capturing a CUDA graph refuses a copy with
 * pageable host memory clearly, before anything is queued (it used to
 * fail on its staging callback with the driver's code after queueing
 * DMAs into the graph); copies with pinned memory are captured as usual. */
typedef long (*capture_fn)(void *stream, int on);

static void test_capture_refuses_pageable(void **state) {
  (void)state;
  capture_fn capture = (capture_fn)double_sym("dvdouble_capture");
  if (!capture) skip();
  int64_t n = 50000;
  const dv_dtype *dt = dv_dtype_get(DV_FLOAT32);
  float *h = calloc((size_t)n, 4);
  assert_non_null(h);
  dv_array *hh, *d, *pin;
  dv_stream *s;
  assert_ok(dv_host_array_wrap(g_ctx, h, 1, &n, dt, NULL, &hh));
  assert_ok(dv_device_array(g_ctx, 1, &n, dt, NULL, 'C', NULL, &d));
  assert_ok(dv_pinned_array(g_ctx, 1, &n, dt, NULL, 'C', &pin));
  assert_ok(dv_stream_create(g_ctx, 0, &s));
  void *native = NULL;
  assert_ok(dv_stream_native(s, &native));
  assert_int_equal(capture(native, 1), 0);
  dv_status up = dv_copy_to_device(d, hh, s);
  char why[1024];
  snprintf(why, sizeof why, "%s", dv_last_error());
  dv_status down = dv_copy_to_host(d, hh, s, NULL);
  long queued = capture(native, 1);
  dv_status pinned_copy = dv_copy_to_device(d, pin, s);
  long captured = capture(native, 0);
  assert_status(up, DV_ERR_MISUSE);
  assert_status(down, DV_ERR_MISUSE);
  if (!strstr(why, "capturing a CUDA graph") || !strstr(why, "pinned"))
    fail_msg("the refusal does not say why and what to do: \"%s\"", why);
  if (queued != 0) fail_msg("the refused copies queued %ld operation(s) into the graph first", queued);
  assert_ok(pinned_copy);
  if (captured != 1) fail_msg("the pinned copy: %ld operation(s) captured, want 1 (-1: capture invalidated)", captured);
  assert_ok(dv_stream_synchronize(s));
  dv_stream_release(s);
  dv_array_release(pin), dv_array_release(d), dv_array_release(hh);
  free(h);
}

/* Issue 22 #11: a registration shared by contexts on two devices gives each
 * device its own mapped address (without unified addressing they differ;
 * the second context got the first device's). */
static void test_shared_registration_mapped_per_device(void **state) {
  (void)state;
  int_set_fn uva = (int_set_fn)double_sym("dvdouble_set_uva");
  if (!uva) skip();
  uva(0);
  dv_context *c0 = NULL, *c1 = NULL;
  assert_ok(test_context(&c0, NULL));
  dv_status rc = test_context(&c1, "cuda_device=1", NULL);
  if (rc == DV_ERR_BACKEND_UNAVAILABLE) {
    assert_ok(dv_context_destroy(c0));
    printf("SKIPPED: test_shared_registration_mapped_per_device: one CUDA device\n");
    skip();
  }
  assert_ok(rc);
  int64_t n = 4096;
  const dv_dtype *dt = dv_dtype_get(DV_INT32);
  int32_t *buf = NULL, *out = calloc((size_t)n, 4);
  assert_int_equal(posix_memalign((void **)&buf, 4096, (size_t)n * 4), 0);
  for (int64_t i = 0; i < n; i++) buf[i] = (int32_t)(i * 11 - 3);
  dv_array *h0, *h1, *v0 = NULL, *v1 = NULL, *d1, *ho;
  dv_scope *sc0, *sc1;
  assert_ok(dv_host_array_wrap(c0, buf, 1, &n, dt, NULL, &h0));
  assert_ok(dv_host_array_wrap(c1, buf, 1, &n, dt, NULL, &h1));
  assert_ok(dv_mapped_scope_begin(c0, 1, &h0, &v0, &sc0));
  assert_ok(dv_mapped_scope_begin(c1, 1, &h1, &v1, &sc1)); /* the same registration, shared */
  assert_ok(dv_device_array(c1, 1, &n, dt, NULL, 'C', NULL, &d1));
  rc = dv_array_copy(d1, v1, NULL); /* device 1 reads the mapping at its own address */
  if (rc) fail_msg("device 1 reading the shared mapping: %s: %s", dv_status_name(rc), dv_last_error());
  assert_ok(dv_host_array_wrap(c1, out, 1, &n, dt, NULL, &ho));
  assert_ok(dv_copy_to_host(d1, ho, NULL, NULL));
  assert_memory_equal(out, buf, (size_t)n * 4);
  dv_array_release(ho), dv_array_release(d1);
  dv_array_release(v1), dv_array_release(v0);
  assert_ok(dv_scope_end(sc1));
  assert_ok(dv_scope_end(sc0));
  dv_array_release(h1), dv_array_release(h0);
  assert_ok(dv_context_destroy(c1));
  assert_ok(dv_context_destroy(c0));
  uva(1);
  free(buf), free(out);
}

/* Issue 22 #11: a callback of an asynchronous staged copy that runs after
 * the context closed (close's synchronize returns at once after a device
 * error; the streams were held) finds the staging state it uses: it is
 * reference counted, not freed by close. */
static void test_staging_callbacks_outlive_close(void **state) {
  (void)state;
  hold_fn hold = (hold_fn)double_sym("dvdouble_hold");
  void (*fault)(int) = (void (*)(int))double_sym("dvdouble_fault");
  if (!hold || !fault) skip();
  dv_context *c1 = NULL;
  dv_status rc = test_context(&c1, "cuda_device=1", "cuda_staging_chunk=64K", "cuda_staging_limit=4M", NULL);
  if (rc == DV_ERR_BACKEND_UNAVAILABLE) {
    printf("SKIPPED: test_staging_callbacks_outlive_close: one CUDA device\n");
    skip();
  }
  assert_ok(rc);
  int64_t n = 100000;
  float *out = calloc((size_t)n, 4);
  assert_non_null(out);
  dv_array *d, *ho;
  assert_ok(dv_device_array(c1, 1, &n, dv_dtype_get(DV_FLOAT32), NULL, 'C', NULL, &d));
  assert_ok(dv_host_array_wrap(c1, out, 1, &n, dv_dtype_get(DV_FLOAT32), NULL, &ho));
  hold(1);
  /* On the legacy stream (never destroyed): pieces and their callbacks queued. */
  assert_ok(dv_copy_to_host(d, ho, dv_context_legacy_stream(c1), NULL));
  fault(1);
  dv_array_release(d), dv_array_release(ho);
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, unhold_later, (void *)hold), 0);
  dv_context_destroy(c1); /* fails (the device is lost); the callbacks run during the driver's teardown */
  pthread_join(t, NULL);
  free(out);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      T(test_pageable_stream_copies_queue), T(test_pageable_pipeline_sizes), T(test_refused_device_rect_falls_back),
      T(test_register_through_two_contexts), T(test_current_context_restored), T(test_pinned_oom_is_host_oom),
      T(test_wrap_checks_allocation), T(test_device_option), T(test_second_device), T(test_fork_child_refused), T(test_pool_per_thread_streams_distinct),
      T(test_callback_gets_device_error), T(test_destroy_waits_for_queued_work),
      T(test_peer_copy_source_free_after_return), T(test_pageable_round_trip_in_stream_order),
      T(test_pageable_legacy_upload_after_other_stream), T(test_pageable_copy_threads),
      cmocka_unit_test_setup_teardown(test_nvrtc_follows_driver, ctx_setup, reset_double_teardown),
      cmocka_unit_test_setup_teardown(test_param_limit_by_driver, ctx_setup, reset_double_teardown),
      T(test_staging_bounded), T(test_small_async_copies_pin_little),
      T(test_sync_copy_not_behind_callbacks), T(test_sync_legacy_upload_not_context_wide),
      T(test_module_load_not_behind_blocking_stream), T(test_free_not_behind_foreign_stream),
      T(test_free_despite_device_error),
      T(test_free_despite_device_error_pooled),
      cmocka_unit_test_setup_teardown(test_1d_stride_above_pitch_limit, ctx_setup, reset_pitch_teardown),
      T(test_capture_refuses_pageable),
      cmocka_unit_test_setup_teardown(test_shared_registration_mapped_per_device, ctx_setup, reset_pitch_teardown),
      T(test_staging_callbacks_outlive_close),
  };
  /* One test, or a pattern (cmocka's): DV_TEST_FILTER=test_staging_bounded. */
  if (getenv("DV_TEST_FILTER")) cmocka_set_test_filter(getenv("DV_TEST_FILTER"));
  return test_main(argc, argv, "cuda_double", tests, sizeof tests / sizeof tests[0]);
}
