/*
 * The CUDA backend against rules of the driver API that no other suite
 * reaches (issue 36): graph capture (item 6), stream callbacks (item 4),
 * memory pinned by someone else (item 3).  Run on the driver test double in
 * CI (tests/backends/cuda/cudadouble, which enforces those rules: NOT_PERMITTED for a
 * driver call from a callback, a capture invalidated by what it cannot
 * capture) and on a GPU by bench/gpu/run.sh; tests that need the double's
 * controls skip by name on a real driver.
 */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <unistd.h>
#include <time.h>

#include "common.h"

typedef long (*capture_fn)(void *stream, int on);
typedef long (*calls_fn)(const char *name);

/* The libcuda.so.1 the backend loaded, or NULL. */
static void *driver(void) {
  static void *h;
  if (!h) h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  return h;
}

static void *double_sym(const char *name) {
  void *h = driver();
  if (!h || !dlsym(h, "dvdouble_is_double")) {
    printf("SKIPPED: needs the CUDA test double's %s (a real driver is loaded)\n", name);
    return NULL;
  }
  return dlsym(h, name);
}

/* ---- item 6: graph capture ---------------------------------------------------------------- */

/* The double's count of a driver entry's calls; -1 on a real driver. */
static long count_calls(const char *name) {
  void *h = driver();
  calls_fn calls = h && dlsym(h, "dvdouble_is_double") ? (calls_fn)dlsym(h, "dvdouble_calls") : NULL;
  return calls ? calls(name) : -1;
}


/* Capture on a created stream of ctx, and its end: the double's control
 * (dvdouble_capture: operations captured, -1 if invalidated), else, on a real
 * driver, cuStreamBeginCapture_v2 (global mode) and cuStreamEndCapture (0:
 * a valid graph, dropped; -1: invalidated; -3: the driver refused to begin).
 * NULL (skipped) when neither is there. */
typedef long (*capture_ctl_fn)(dv_context *ctx, void *stream, int on);
static capture_fn g_double_capture;
static long real_capture(dv_context *ctx, void *stream, int on) {
  int (*set)(void *) = (int (*)(void *))dlsym(driver(), "cuCtxSetCurrent");
  int (*begin)(void *, int) = (int (*)(void *, int))dlsym(driver(), "cuStreamBeginCapture_v2");
  int (*end)(void *, void **) = (int (*)(void *, void **))dlsym(driver(), "cuStreamEndCapture");
  int (*destroy)(void *) = (int (*)(void *))dlsym(driver(), "cuGraphDestroy");
  void *native = NULL, *dev = NULL;
  if (!set || !begin || !end || !destroy || dv_context_native(ctx, &native, &dev) || set(native)) return -3;
  if (on) return begin(stream, 0 /* CU_STREAM_CAPTURE_MODE_GLOBAL */) ? -3 : 0;
  void *graph = NULL;
  int r = end(stream, &graph);
  if (graph) destroy(graph);
  return r == 901 /* CUDA_ERROR_STREAM_CAPTURE_INVALIDATED */ ? -1 : r ? -3 : 0;
}
static long double_capture(dv_context *ctx, void *stream, int on) {
  (void)ctx;
  return g_double_capture(stream, on);
}
static capture_ctl_fn capture_control(void) {
  void *h = driver();
  if (h && dlsym(h, "dvdouble_is_double")) {
    g_double_capture = (capture_fn)dlsym(h, "dvdouble_capture");
    return g_double_capture ? double_capture : NULL;
  }
  if (h && dlsym(h, "cuStreamBeginCapture_v2")) return real_capture;
  printf("SKIPPED: no way to capture a graph (no CUDA driver with cuStreamBeginCapture_v2)\n");
  return NULL;
}

/* A free while a blocking stream captures a graph (global mode): the
 * legacy stream, which had work queued since the last fence, reports
 * CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, and a fence recorded there would join
 * (and invalidate) the capture.  It used to be taken as "not capturing": the
 * fence was recorded and the capture invalidated.  Now the free is kept
 * until the legacy stream can be fenced (the next free after the capture,
 * or close), and the capture stays valid. */
static void test_capture_free_keeps_capture(void **state) {
  (void)state;
  capture_ctl_fn capture = capture_control();
  if (!capture) skip();
  /* the double counts the driver's frees; a real driver does not */
  calls_fn calls = dlsym(driver(), "dvdouble_is_double") ? (calls_fn)dlsym(driver(), "dvdouble_calls") : NULL;
  int64_t n = 4096;
  const dv_dtype *dt = dv_dtype_get(DV_FLOAT32);
  dv_array *d, *pin, *victim, *second;
  dv_stream *s;
  assert_ok(dv_device_array(g_ctx, 1, &n, dt, NULL, 'C', NULL, &d));
  assert_ok(dv_device_array(g_ctx, 1, &n, dt, NULL, 'C', NULL, &victim));
  assert_ok(dv_device_array(g_ctx, 1, &n, dt, NULL, 'C', NULL, &second));
  assert_ok(dv_pinned_array(g_ctx, 1, &n, dt, NULL, 'C', &pin));
  assert_ok(dv_stream_create(g_ctx, 0, &s)); /* a blocking stream */
  /* work on the legacy stream since the last fence */
  assert_ok(dv_copy_to_device(d, pin, dv_context_legacy_stream(g_ctx)));
  void *native = NULL;
  assert_ok(dv_stream_native(s, &native));
  assert_int_equal(capture(g_ctx, native, 1), 0);
  long frees0 = calls ? calls("cuMemFree_v2") : 0;
  dv_array_release(victim);
  dv_status flushed = dv_context_flush_deallocs(g_ctx);
  long frees1 = calls ? calls("cuMemFree_v2") : 0;
  long captured = capture(g_ctx, native, 0);
  if (captured < 0) fail_msg("the free's fence on the legacy stream invalidated the capture (%ld)", captured);
  assert_ok(flushed);
  assert_int_equal(frees1, frees0); /* kept, not freed unfenced */
  /* After the capture: the next free fences the legacy stream and frees both. */
  dv_array_release(second);
  assert_ok(dv_context_flush_deallocs(g_ctx));
  if (calls) assert_int_equal(calls("cuMemFree_v2"), frees0 + 2);
  dv_stream_release(s);
  dv_array_release(pin), dv_array_release(d);
}

/* The free of a buffer handed out natively (dv_array_native: foreign
 * streams may use it) waits for the whole context with cuCtxSynchronize,
 * which invalidates every capture of the context.  While a stream captures,
 * the free is kept; the next free after the capture synchronizes the context
 * and makes it. */
static void test_capture_native_free_kept(void **state) {
  (void)state;
  capture_ctl_fn capture = capture_control();
  if (!capture) skip();
  int64_t n = 2048;
  const dv_dtype *dt = dv_dtype_get(DV_FLOAT64);
  dv_array *x, *y;
  assert_ok(dv_device_array(g_ctx, 1, &n, dt, NULL, 'C', NULL, &x));
  assert_ok(dv_device_array(g_ctx, 1, &n, dt, NULL, 'C', NULL, &y));
  void *nat = NULL;
  size_t off = 0;
  assert_ok(dv_array_native(x, &nat, &off));
  dv_stream *s;
  assert_ok(dv_stream_create(g_ctx, DV_STREAM_NON_BLOCKING, &s));
  void *native = NULL;
  assert_ok(dv_stream_native(s, &native));
  assert_int_equal(capture(g_ctx, native, 1), 0);
  long frees0 = count_calls("cuMemFree_v2"), syncs0 = count_calls("cuCtxSynchronize");
  dv_array_release(x);
  dv_status flushed = dv_context_flush_deallocs(g_ctx);
  long frees1 = count_calls("cuMemFree_v2"), syncs1 = count_calls("cuCtxSynchronize");
  long captured = capture(g_ctx, native, 0);
  if (captured < 0) fail_msg("freeing a natively handed-out buffer invalidated the capture");
  assert_ok(flushed);
  assert_int_equal(frees1, frees0);
  assert_int_equal(syncs1, syncs0);
  dv_array_release(y);
  assert_ok(dv_context_flush_deallocs(g_ctx));
  if (frees0 >= 0) {
    assert_int_equal(count_calls("cuMemFree_v2"), frees0 + 2);
    assert_true(count_calls("cuCtxSynchronize") > syncs0); /* x waited for the whole context */
  }
  dv_stream_release(s);
}

/* A free kept by a capture that is still on when the context closes is
 * made by close (nothing leaks: the teardown checks the context). */
static void test_capture_free_kept_until_close(void **state) {
  (void)state;
  capture_fn capture = (capture_fn)double_sym("dvdouble_capture");
  calls_fn calls = (calls_fn)double_sym("dvdouble_calls");
  if (!capture || !calls) skip();
  dv_context *c;
  assert_ok(test_context(&c, NULL));
  int64_t n = 1024;
  const dv_dtype *dt = dv_dtype_get(DV_INT32);
  dv_array *d, *pin, *victim;
  dv_stream *s;
  assert_ok(dv_device_array(c, 1, &n, dt, NULL, 'C', NULL, &d));
  assert_ok(dv_device_array(c, 1, &n, dt, NULL, 'C', NULL, &victim));
  assert_ok(dv_pinned_array(c, 1, &n, dt, NULL, 'C', &pin));
  assert_ok(dv_stream_create(c, 0, &s));
  assert_ok(dv_copy_to_device(d, pin, dv_context_legacy_stream(c)));
  void *native = NULL;
  assert_ok(dv_stream_native(s, &native));
  assert_int_equal(capture(native, 1), 0);
  long frees0 = calls("cuMemFree_v2");
  dv_array_release(victim);
  assert_ok(dv_context_flush_deallocs(c));
  assert_int_equal(calls("cuMemFree_v2"), frees0);
  assert_true(capture(native, 0) >= 0);
  dv_stream_release(s);
  dv_array_release(pin), dv_array_release(d);
  assert_ok(dv_context_destroy(c));
  if (calls("cuMemFree_v2") < frees0 + 2) fail_msg("close did not make the kept free");
}

static atomic_int g_cb_runs;
static void count_cb(dv_stream *s, dv_status st, void *user) {
  (void)s, (void)st, (void)user;
  atomic_fetch_add(&g_cb_runs, 1);
}

/* Stream callbacks (the user's, and the ones the planner queues for its own
 * staging: a host-to-host copy on a stream) cannot be captured: the driver
 * refuses cuStreamAddCallback there and invalidates the capture.  Refused
 * before the driver is asked, with DV_ERR_MISUSE and a message that says
 * why; the capture stays valid and nothing was captured. */
static void test_capture_refuses_callbacks(void **state) {
  (void)state;
  capture_ctl_fn capture = capture_control();
  if (!capture) skip();
  int64_t n = 1000;
  const dv_dtype *dt = dv_dtype_get(DV_FLOAT64);
  double *a = calloc((size_t)n, 8), *b = calloc((size_t)n, 8);
  assert_non_null(a), assert_non_null(b);
  dv_array *ha, *hb;
  assert_ok(dv_host_array_wrap(g_ctx, a, 1, &n, dt, NULL, &ha));
  assert_ok(dv_host_array_wrap(g_ctx, b, 1, &n, dt, NULL, &hb));
  dv_stream *s;
  assert_ok(dv_stream_create(g_ctx, DV_STREAM_NON_BLOCKING, &s));
  void *native = NULL;
  assert_ok(dv_stream_native(s, &native));
  atomic_store(&g_cb_runs, 0);
  assert_int_equal(capture(g_ctx, native, 1), 0);
  dv_status cb = dv_stream_add_callback(s, count_cb, NULL);
  char why[1024];
  snprintf(why, sizeof why, "%s", dv_last_error());
  a[0] = 42;
  dv_status h2h = dv_array_copy(hb, ha, s);
  long captured = capture(g_ctx, native, 0);
  assert_status(cb, DV_ERR_MISUSE);
  assert_status(h2h, DV_ERR_MISUSE);
  if (!strstr(why, "capturing a CUDA graph") || !strstr(why, "callback"))
    fail_msg("the refusal does not say why: \"%s\"", why);
  if (captured < 0) fail_msg("the refused callbacks invalidated the capture");
  assert_int_equal(captured, 0); /* nothing captured (a real driver: a valid, empty graph) */
  assert_ok(dv_stream_synchronize(s));
  assert_int_equal(atomic_load(&g_cb_runs), 0);
  assert_true(b[0] == 0); /* the refused copy changed nothing */
  /* Once the capture is over, the same calls work. */
  assert_ok(dv_stream_add_callback(s, count_cb, NULL));
  assert_ok(dv_array_copy(hb, ha, s));
  assert_ok(dv_stream_synchronize(s));
  assert_int_equal(atomic_load(&g_cb_runs), 1);
  assert_true(b[0] == 42);
  dv_stream_release(s);
  dv_array_release(ha), dv_array_release(hb);
  free(a), free(b);
}

/* ---- item 4: stream callbacks on CUDA's rule ---------------------------------------------- */

typedef struct cb_probe {
  dv_stream *other;
  dv_array *d, *pin;
  dv_event *ev;
  dv_status record, copy, query;
  const char *name;
  char why[512];
  atomic_int ran;
} cb_probe;

/* Calls that reach the driver, and one that does not (dv_status_name). */
static void probe_cb(dv_stream *s, dv_status st, void *user) {
  (void)s, (void)st;
  cb_probe *p = user;
  p->record = dv_event_record(p->ev, p->other);
  snprintf(p->why, sizeof p->why, "%s", dv_last_error());
  p->copy = dv_copy_to_device(p->d, p->pin, p->other); /* pinned: would be queued, asynchronous */
  p->query = dv_stream_query(p->other);
  p->name = dv_status_name(DV_ERR_MISUSE);
  atomic_store(&p->ran, 1);
}

/* CUDA forbids any CUDA call in a stream callback (NOT_PERMITTED; the double
 * enforces it), and every devarray CUDA call reaches the driver: they used
 * to fail there with the driver's DV_ERR_DRIVER.  Now refused before the
 * driver is asked, with DV_ERR_MISUSE and a message saying what to do; calls
 * that do not reach the driver still work, and after the callback the same
 * calls work. */
static void test_callback_driver_calls_refused(void **state) {
  (void)state;
  int64_t n = 2048;
  const dv_dtype *dt = dv_dtype_get(DV_FLOAT32);
  cb_probe p = {0};
  p.record = p.copy = p.query = DV_OK; /* overwritten by the callback */
  dv_stream *s;
  assert_ok(dv_stream_create(g_ctx, DV_STREAM_NON_BLOCKING, &s));
  assert_ok(dv_stream_create(g_ctx, DV_STREAM_NON_BLOCKING, &p.other));
  assert_ok(dv_device_array(g_ctx, 1, &n, dt, NULL, 'C', NULL, &p.d));
  assert_ok(dv_pinned_array(g_ctx, 1, &n, dt, NULL, 'C', &p.pin));
  assert_ok(dv_event_create(g_ctx, 0, &p.ev));
  assert_ok(dv_stream_add_callback(s, probe_cb, &p));
  assert_ok(dv_stream_synchronize(s));
  assert_int_equal(atomic_load(&p.ran), 1);
  if (p.record != DV_ERR_MISUSE || p.copy != DV_ERR_MISUSE || p.query != DV_ERR_MISUSE)
    fail_msg("in a callback: event record %s, copy %s, query %s; want DV_ERR_MISUSE for each (%s)",
             dv_status_name(p.record), dv_status_name(p.copy), dv_status_name(p.query), p.why);
  if (!strstr(p.why, "stream callback") || !strstr(p.why, "another thread"))
    fail_msg("the refusal does not say why and what to do: \"%s\"", p.why);
  assert_string_equal(p.name, "DV_ERR_MISUSE");
  /* Outside the callback, on this thread, the same calls work. */
  assert_ok(dv_event_record(p.ev, p.other));
  assert_ok(dv_copy_to_device(p.d, p.pin, p.other));
  assert_ok(dv_stream_synchronize(p.other));
  dv_event_release(p.ev);
  dv_array_release(p.pin), dv_array_release(p.d);
  dv_stream_release(p.other), dv_stream_release(s);
}

/* Work queued after a callback still waits until it returns. */
typedef struct order_probe {
  atomic_int done;
  int seen_by_next;
} order_probe;

static void slow_cb(dv_stream *s, dv_status st, void *user) {
  (void)s, (void)st;
  order_probe *o = user;
  struct timespec t = {0, 50 * 1000 * 1000};
  nanosleep(&t, NULL);
  atomic_store(&o->done, 1);
}
static void next_cb(dv_stream *s, dv_status st, void *user) {
  (void)s, (void)st;
  order_probe *o = user;
  o->seen_by_next = atomic_load(&o->done);
}

static void test_callback_order_kept(void **state) {
  (void)state;
  order_probe o = {0};
  dv_stream *s;
  assert_ok(dv_stream_create(g_ctx, 0, &s));
  assert_ok(dv_stream_add_callback(s, slow_cb, &o));
  assert_ok(dv_stream_add_callback(s, next_cb, &o));
  assert_ok(dv_stream_synchronize(s));
  assert_int_equal(o.seen_by_next, 1);
  dv_stream_release(s);
}

/* ---- item 3: memory pinned by someone else ------------------------------------------------ */

typedef int (*raw_set_fn)(void *ctx);
typedef int (*raw_hostalloc_fn)(void **p, size_t bytes, unsigned flags);
typedef int (*raw_freehost_fn)(void *p);

/* Page-locked host memory of other code in the process (a raw
 * cuMemHostAlloc, as bench_cuda, CuPy or PyTorch make it), in ctx's primary
 * context; NULL (skipped) without the raw entry points. */
static void *foreign_pin(dv_context *ctx, size_t bytes, raw_freehost_fn *freehost) {
  raw_set_fn set = driver() ? (raw_set_fn)dlsym(driver(), "cuCtxSetCurrent") : NULL;
  raw_hostalloc_fn alloc = driver() ? (raw_hostalloc_fn)dlsym(driver(), "cuMemHostAlloc") : NULL;
  *freehost = driver() ? (raw_freehost_fn)dlsym(driver(), "cuMemFreeHost") : NULL;
  if (!set || !alloc || !*freehost) return NULL;
  void *native = NULL, *dev = NULL, *p = NULL;
  assert_ok(dv_context_native(ctx, &native, &dev));
  assert_int_equal(set(native), 0);
  assert_int_equal(alloc(&p, bytes, 0), 0);
  return p;
}

static uint64_t staged(dv_context *ctx) {
  dv_stats st = {.size = sizeof st};
  assert_ok(dv_context_stats(ctx, &st));
  return st.staging_hits + st.staging_misses;
}

/* A wrapped host array whose memory other code pinned with cuMemHostAlloc
 * used to be staged through devarray's own pinned buffers (its registry
 * knew only its own pins), so bench_cuda's "pinned" rows measured the staged
 * path.  The backend now asks the driver: copied directly, both ways. */
static void test_foreign_pinned_copied_directly(void **state) {
  (void)state;
  calls_fn calls = count_calls;
  dv_context *c;
  assert_ok(test_context(&c, "cuda_staging_chunk=64K", NULL));
  int64_t n = 1 << 18; /* floats: 1 MiB, 16 staging pieces */
  raw_freehost_fn freehost;
  float *h = foreign_pin(c, (size_t)n * 4, &freehost);
  if (!h) {
    assert_ok(dv_context_destroy(c));
    skip();
  }
  for (int64_t i = 0; i < n; i++) h[i] = (float)i;
  const dv_dtype *dt = dv_dtype_get(DV_FLOAT32);
  dv_array *hv, *d;
  dv_stream *s;
  assert_ok(dv_host_array_wrap(c, h, 1, &n, dt, NULL, &hv));
  assert_ok(dv_device_array(c, 1, &n, dt, NULL, 'C', NULL, &d));
  assert_ok(dv_stream_create(c, DV_STREAM_NON_BLOCKING, &s));
  uint64_t before = staged(c);
  long pins = calls("cuMemHostAlloc");
  assert_ok(dv_copy_to_device(d, hv, s));
  assert_ok(dv_stream_synchronize(s));
  memset(h, 0, (size_t)n * 4);
  assert_ok(dv_copy_to_host(d, hv, s, NULL));
  assert_ok(dv_stream_synchronize(s));
  if (staged(c) != before || calls("cuMemHostAlloc") != pins)
    fail_msg("memory pinned by other code was staged as pageable (%llu staging buffers, %ld new pins)",
             (unsigned long long)(staged(c) - before), calls("cuMemHostAlloc") - pins);
  for (int64_t i = 0; i < n; i += 4099)
    if (h[i] != (float)i) fail_msg("element %lld: %g after the round trip", (long long)i, h[i]);
  /* Partly pinned (the range runs past the foreign block): staged, correct. */
  float *big = calloc((size_t)n + 1024, 4);
  assert_non_null(big);
  dv_array *bv;
  assert_ok(dv_host_array_wrap(c, big, 1, &n, dt, NULL, &bv));
  assert_ok(dv_copy_to_host(d, bv, s, NULL));
  assert_ok(dv_stream_synchronize(s));
  assert_true(big[4099] == 4099.0f);
  assert_true(staged(c) > before); /* pageable memory still takes the staged path */
  dv_array_release(bv);
  free(big);
  dv_stream_release(s);
  dv_array_release(d), dv_array_release(hv);
  assert_ok(dv_context_destroy(c));
  assert_int_equal(freehost(h), 0);
}

/* dv_array_register on memory other code pinned: the driver says
 * ALREADY_REGISTERED, which used to be reported as misuse.  Accepted now
 * (devarray neither pins nor unpins it); a range only partly pinned is still
 * refused, with a message that says so. */
static void test_register_foreign_pinned(void **state) {
  (void)state;
  calls_fn calls = count_calls;
  size_t bytes = 1 << 16;
  raw_freehost_fn freehost;
  char *h = foreign_pin(g_ctx, bytes, &freehost);
  if (!h) skip();
  int64_t n = (int64_t)bytes;
  dv_array *hv;
  assert_ok(dv_host_array_wrap(g_ctx, h, 1, &n, dv_dtype_get(DV_UINT8), NULL, &hv));
  long unreg = calls("cuMemHostUnregister");
  assert_ok(dv_array_register(hv));
  assert_ok(dv_array_deregister(hv));
  assert_int_equal(calls("cuMemHostUnregister"), unreg); /* not devarray's to unpin */
  dv_array_release(hv);
  /* The pinned block and 4 KiB past it (never read: a registration only
   * names the range): the driver refuses the overlap, and so does devarray. */
  int64_t longer = (int64_t)bytes + 4096;
  dv_array *lv;
  assert_ok(dv_host_array_wrap(g_ctx, h, 1, &longer, dv_dtype_get(DV_UINT8), NULL, &lv));
  dv_status rc = dv_array_register(lv);
  if (rc != DV_ERR_MISUSE || !strstr(dv_last_error(), "not the whole range"))
    fail_msg("registering a range only partly pinned: %s (%s)", dv_status_name(rc), dv_last_error());
  dv_array_release(lv);
  assert_int_equal(freehost(h), 0);
}

/* ---- item 7: kernels no other test launches this way ------------------------------------ */

/* Build source on ctx; 1 (skipped, said by name) where the backend has no
 * compiler (no NVRTC). */
static int build_source(dv_context *ctx, const char *name, const char *src, dv_module **m) {
  dv_program *p = NULL;
  assert_ok(dv_program_create(ctx, name, src, &p));
  dv_status rc = dv_program_build(p, 0, m);
  if (rc == DV_ERR_COMPILE) fprintf(stderr, "%s\n", dv_program_log(p));
  dv_program_destroy(p);
  if (rc == DV_ERR_NO_COMPILER) {
    printf("SKIPPED: %s: no kernel compiler here (%s)\n", name, dv_last_error());
    return 1;
  }
  assert_ok(rc);
  return 0;
}

static const char *k_dyn =
    "DV_KERNEL(dyn_reverse, DV_ARRAY(float, a), int n) {\n"
    "  DV_BIND(float, a);\n"
    "  DV_DYN_SHARED_BEGIN();\n"
    "  DV_DYN_SHARED_TAKE(float, fs, n);\n"
    "  int t = dv_thread_idx(0);\n"
    "  if (t < n) fs[t] = a[t];\n"
    "  dv_syncthreads();\n"
    "  if (t < n) a[t] = fs[n - 1 - t];\n"
    "}\n";

/* A launch with 100 KiB of dynamic shared memory: above the 48 KiB a CUDA
 * launch gets without the function's opt-in (cuFuncSetAttribute
 * MAX_DYNAMIC_SHARED_SIZE_BYTES), which no other test reaches (the largest
 * used 2 KiB).  The double checks the opt-in and records the launch; a GPU
 * runs it (the reversal is checked there). */
static void test_dynamic_shared_100k(void **state) {
  (void)state;
  dv_module *m;
  if (build_source(g_ctx, "dyn100k", k_dyn, &m)) skip();
  dv_kernel *k = NULL;
  assert_ok(dv_module_kernel(m, "dyn_reverse", &k));
  int n = 1024;
  float a[1024];
  for (int i = 0; i < n; i++) a[i] = (float)i;
  int64_t len = n;
  dv_array *h, *d;
  assert_ok(dv_host_array_wrap(g_ctx, a, 1, &len, dv_dtype_get(DV_FLOAT32), NULL, &h));
  assert_ok(dv_to_device(g_ctx, h, NULL, 1, NULL, &d));
  dv_launch_config c = {{1, 1, 1}, {(uint32_t)n, 1, 1}, 100 * 1024, NULL};
  dv_arg args[] = {DV_ARG_ARRAY(d), DV_ARG_I32(n)};
  assert_ok(dv_kernel_launch(k, &c, 2, args));
  assert_ok(dv_copy_to_host(d, h, NULL, NULL));
  if (!test_on_cuda_double(g_ctx))
    for (int i = 0; i < n; i++)
      if (a[i] != (float)(n - 1 - i)) fail_msg("a[%d] = %g after the reversal, want %d", i, a[i], n - 1 - i);
  /* Beyond what the device allows at all: refused before the driver. */
  c.dynamic_shared = (size_t)64 << 20;
  assert_status(dv_kernel_launch(k, &c, 2, args), DV_ERR_LAUNCH_CONFIG);
  dv_array_release(d), dv_array_release(h);
  dv_module_release(m);
}

static const char *k_wild =
    "DV_KERNEL(wild_write, DV_ARRAY(int, out), dv_u64 addr) {\n"
    "  DV_BIND(int, out);\n"
    "  if (dv_thread_idx(0) == 0) { out[0] = 1; *(volatile int *)addr = 7; }\n"
    "}\n";

/* A kernel that writes through a wild pointer (on the double, which runs no
 * kernels, the fault is injected after the launch: dvdouble_fault): the
 * synchronize says DV_ERR_DEVICE_LOST with the driver's ILLEGAL_ADDRESS in
 * its message, the next call on that context says so again (the context is
 * unusable), and a new context, made once the faulted one is destroyed (and
 * with it the last reference to the device's primary context), works.  What
 * each call returned is printed for the GPU run's log. */
static void test_wild_pointer_fault(void **state) {
  (void)state;
  /* No fixture context: the faulted primary context goes back to the driver
   * only once every devarray context of the device is destroyed. */
  dv_context *c;
  assert_ok(test_context(&c, NULL));
  void (*inject)(int) = NULL;
  if (test_on_cuda_double(c)) {
    inject = (void (*)(int))double_sym("dvdouble_fault");
    if (!inject) {
      assert_ok(dv_context_destroy(c));
      skip();
    }
  }
  dv_module *m;
  if (build_source(c, "wild", k_wild, &m)) {
    assert_ok(dv_context_destroy(c));
    skip();
  }
  dv_kernel *k = NULL;
  assert_ok(dv_module_kernel(m, "wild_write", &k));
  int64_t one = 1;
  dv_array *d;
  assert_ok(dv_device_array(c, 1, &one, dv_dtype_get(DV_INT32), NULL, 'C', NULL, &d));
  dv_stream *s;
  assert_ok(dv_stream_create(c, DV_STREAM_NON_BLOCKING, &s));
  dv_launch_config cfg = {{1, 1, 1}, {32, 1, 1}, 0, s};
  dv_arg args[] = {DV_ARG_ARRAY(d), DV_ARG_U64(UINT64_C(0x10))};
  dv_status launched = dv_kernel_launch(k, &cfg, 2, args);
  if (inject) inject(0);
  dv_status synced = dv_stream_synchronize(s);
  char why[1024];
  snprintf(why, sizeof why, "%s", dv_last_error());
  dv_array *more = NULL;
  dv_status next = dv_device_array(c, 1, &one, dv_dtype_get(DV_INT32), NULL, 'C', NULL, &more);
  char why2[1024];
  snprintf(why2, sizeof why2, "%s", dv_last_error());
  printf("wild pointer: launch %s; synchronize %s (%s); next call %s (%s)\n", dv_status_name(launched),
         dv_status_name(synced), why, dv_status_name(next), why2);
  if (launched != DV_OK && launched != DV_ERR_DEVICE_LOST) fail_msg("the launch: %s", dv_status_name(launched));
  if (launched == DV_OK) {
    assert_int_equal(synced, DV_ERR_DEVICE_LOST);
    if (!strstr(why, "ILLEGAL_ADDRESS")) fail_msg("the fault's message does not name it: \"%s\"", why);
  }
  if (next == DV_OK) dv_array_release(more);
  else if (next != DV_ERR_DEVICE_LOST)
    fail_msg("the next call on the faulted context: %s (%s), want DV_ERR_DEVICE_LOST or DV_OK",
             dv_status_name(next), why2);
  dv_stream_release(s);
  dv_array_release(d);
  dv_module_release(m);
  dv_status destroyed = dv_context_destroy(c); /* its status is the fault's, or DV_OK */
  printf("wild pointer: destroy %s\n", dv_status_name(destroyed));
  /* A new context on the same device works. */
  dv_context *c2;
  assert_ok(test_context(&c2, NULL));
  dv_array *fresh;
  int32_t v = 5, back = 0;
  dv_array *hv, *hb;
  assert_ok(dv_host_array_wrap(c2, &v, 1, &one, dv_dtype_get(DV_INT32), NULL, &hv));
  assert_ok(dv_host_array_wrap(c2, &back, 1, &one, dv_dtype_get(DV_INT32), NULL, &hb));
  assert_ok(dv_to_device(c2, hv, NULL, 1, NULL, &fresh));
  assert_ok(dv_copy_to_host(fresh, hb, NULL, NULL));
  assert_int_equal(back, 5);
  dv_array_release(fresh), dv_array_release(hv), dv_array_release(hb);
  assert_ok(dv_context_destroy(c2));
}

/* ---- item 7: IPC across two processes ----------------------------------------------------- */

/* Export a device array, open it in another process (tests/cuda_ipc_helper,
 * fork + exec), which checks it and writes it; its writes are in our
 * memory.  On the double, which cannot share memory between processes, the
 * other process's open is refused (by the driver's NOT_SUPPORTED) with a
 * status and message, and our array is unchanged.  Opening our own handle
 * in this process is refused before the driver (DV_ERR_MISUSE). */
static void test_ipc_two_processes(void **state) {
  (void)state;
  int64_t n = 1000;
  dv_array *h, *d;
  assert_ok(dv_host_array(g_ctx, 1, &n, dv_dtype_get(DV_INT32), NULL, 'C', &h));
  int32_t *p = NULL;
  assert_ok(dv_array_host_data(h, (void **)&p));
  for (int64_t i = 0; i < n; i++) p[i] = (int32_t)(3 * i + 1);
  assert_ok(dv_to_device(g_ctx, h, NULL, 1, NULL, &d));
  dv_ipc_handle hd;
  assert_ok(dv_ipc_export(d, &hd));
  dv_array *self = NULL;
  assert_status(dv_ipc_open(g_ctx, &hd, 1, &n, dv_dtype_get(DV_INT32), NULL, &self), DV_ERR_MISUSE);
  assert_null(self);
  char hex[2 * DV_IPC_HANDLE_SIZE + 1], nbuf[32], line[1024] = "";
  for (int i = 0; i < DV_IPC_HANDLE_SIZE; i++) snprintf(hex + 2 * i, 3, "%02x", hd.bytes[i]);
  snprintf(nbuf, sizeof nbuf, "%lld", (long long)n);
  int fds[2];
  assert_int_equal(pipe(fds), 0);
  fflush(stdout);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    dup2(fds[1], 1);
    close(fds[0]), close(fds[1]);
    char *argv[] = {(char *)DV_CUDA_IPC_HELPER, "open", hex, nbuf, NULL};
    execv(DV_CUDA_IPC_HELPER, argv);
    _exit(127);
  }
  close(fds[1]);
  FILE *f = fdopen(fds[0], "r");
  assert_non_null(f);
  if (!fgets(line, sizeof line, f)) line[0] = 0;
  fclose(f);
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  printf("ipc: the other process said: %s", line[0] ? line : "(nothing)\n");
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) fail_msg("the other process failed (status %d)", status);
  dv_array *back = NULL;
  assert_ok(dv_copy_to_host(d, NULL, NULL, &back));
  int32_t *q = NULL;
  assert_ok(dv_array_host_data(back, (void **)&q));
  if (test_on_cuda_double(g_ctx)) {
    if (strncmp(line, "refused DV_ERR_", 15) || strlen(line) < 40)
      fail_msg("on the double the other process's open must be refused with a status and a message: %s", line);
    for (int64_t i = 0; i < n; i++) assert_int_equal(q[i], (int32_t)(3 * i + 1)); /* unchanged */
  } else {
    if (strcmp(line, "ok\n")) fail_msg("the other process could not use the handle: %s", line);
    for (int64_t i = 0; i < n; i++) assert_int_equal(q[i], (int32_t)-i); /* its writes */
  }
  dv_array_release(back), dv_array_release(d), dv_array_release(h);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      T(test_capture_free_keeps_capture),
      T(test_capture_free_kept_until_close),
      T(test_capture_native_free_kept),
      T(test_capture_refuses_callbacks),
      T(test_callback_driver_calls_refused),
      T(test_callback_order_kept),
      T(test_foreign_pinned_copied_directly),
      T(test_register_foreign_pinned),
      T(test_dynamic_shared_100k),
      T(test_ipc_two_processes),
      /* last, without the fixture's context: on a GPU the fault may leave the device unusable */
      cmocka_unit_test(test_wild_pointer_fault),
  };
  if (getenv("DV_TEST_FILTER")) cmocka_set_test_filter(getenv("DV_TEST_FILTER"));
  return test_main(argc, argv, "cuda_rules", tests, sizeof tests / sizeof tests[0]);
}
