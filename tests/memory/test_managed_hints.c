/* Managed memory's hints (issue 40 item 3): dv_array_prefetch and
 * dv_array_advise on every backend.  Where managed memory exists (the CUDA
 * and HIP doubles, a lent GPU) the calls reach the driver: the doubles
 * record each allocation's hints, which the tests read back
 * (dvdouble_managed_hints, dvdouble_managed_range); elsewhere (the host
 * simulator, OpenCL) there are no managed arrays and every array is refused
 * for its kind.  A fault sweep fails each host allocation and each driver
 * call of the paths in turn. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "common.h"

typedef int (*hints_fn)(uint64_t addr, int *last_prefetch, int *preferred, int *read_mostly,
                        unsigned *accessed_by, long *prefetches);
typedef int (*range_fn)(uint64_t addr, uint64_t *start, size_t *bytes);
typedef void (*int_fn)(int on);
typedef void (*fail_fn)(const char *name, long k, int result);
typedef long (*calls_fn)(const char *name);
typedef long (*count_fn)(void);

/* The driver double the backend loaded (CUDA's libcuda.so.1 or HIP's
 * libamdhip64), or NULL on a real driver and on backends without one. */
static void *double_lib(void) {
  static const char *const names[] = {"libcuda.so.1", "libamdhip64.so", "libamdhip64.so.6",
                                      "libamdhip64.so.5"};
  bool cuda = strncmp(g_backend, "cuda", 4) == 0, hip = strncmp(g_backend, "hip", 3) == 0;
  if (!cuda && !hip) return NULL;
  for (size_t i = cuda ? 0 : 1; i < (cuda ? 1 : 4); i++) {
    void *h = dlopen(names[i], RTLD_NOW | RTLD_NOLOAD);
    if (h && dlsym(h, "dvdouble_is_double")) return h; /* the loader's reference keeps it open */
    if (h) dlclose(h);
  }
  return NULL;
}
static void *dsym(const char *name) {
  void *h = double_lib();
  return h ? dlsym(h, name) : NULL;
}

static bool has_managed(dv_context *ctx) {
  dv_device_info di;
  assert_ok(dv_context_device_info(ctx, &di));
  return di.managed_memory != 0;
}

/* A context whose device has concurrent managed access (on), or not: the
 * doubles are told before it opens (contexts read the attribute then, the
 * driver at each call); on a real driver the device's own (NULL for off:
 * it cannot be changed).  The double keeps the setting until teardown. */
static dv_context *ctx_concurrent(int on) {
  int_fn set = (int_fn)dsym("dvdouble_set_concurrent_managed");
  if (!set && !on) return NULL;
  if (set) set(on);
  return test_context_or_fail(NULL);
}

/* After each test, failed or not: the double's streams run again and its
 * device is its own. */
static int teardown(void **state) {
  int_fn hold = (int_fn)dsym("dvdouble_hold"),
         set = (int_fn)dsym("dvdouble_set_concurrent_managed");
  if (hold) hold(0);
  if (set) set(-1);
  return ctx_teardown(state);
}

static dv_array *managed(dv_context *ctx, int64_t n) {
  dv_array *m = NULL;
  assert_ok(dv_managed_array(ctx, 1, &n, dv_dtype_get(DV_INT32), NULL, 'C', 1, &m));
  return m;
}

static uint64_t addr_of(const dv_array *a) {
  void *p = NULL;
  assert_ok(dv_array_host_data(a, &p));
  return (uint64_t)(uintptr_t)p;
}

typedef struct hints {
  int last_prefetch, preferred, read_mostly;
  unsigned accessed_by;
  long prefetches;
} hints;

static hints read_hints(const dv_array *a) {
  hints h = {0};
  hints_fn f = (hints_fn)dsym("dvdouble_managed_hints");
  assert_non_null(f);
  assert_int_equal(
      f(addr_of(a), &h.last_prefetch, &h.preferred, &h.read_mostly, &h.accessed_by, &h.prefetches),
      0);
  return h;
}

static void assert_range(const dv_array *base, uint64_t start, size_t bytes) {
  range_fn f = (range_fn)dsym("dvdouble_managed_range");
  assert_non_null(f);
  uint64_t s = 0;
  size_t n = 0;
  assert_int_equal(f(addr_of(base), &s, &n), 0);
  assert_int_equal(s, start);
  assert_int_equal(n, bytes);
}

static void assert_msg_has(const char *what) {
  if (!strstr(dv_last_error(), what))
    fail_msg("message \"%s\" does not name \"%s\"", dv_last_error(), what);
}

/* Every backend: arrays that are not managed memory are refused for their
 * kind, and bad arguments are refused before anything else. */
static void test_refusals(void **state) {
  (void)state;
  int64_t n = 64;
  dv_array *d, *p, *h;
  assert_ok(dv_device_array(g_ctx, 1, &n, dv_dtype_get(DV_INT32), NULL, 'C', NULL, &d));
  assert_ok(dv_pinned_array(g_ctx, 1, &n, dv_dtype_get(DV_INT32), NULL, 'C', &p));
  assert_ok(dv_host_array(g_ctx, 1, &n, dv_dtype_get(DV_INT32), NULL, 'C', &h));
  assert_status(dv_array_prefetch(NULL, DV_LOCATION_DEVICE, NULL), DV_ERR_NULL_ARGUMENT);
  assert_status(dv_array_advise(NULL, DV_MEM_ADVISE_SET_READ_MOSTLY, DV_LOCATION_DEVICE),
                DV_ERR_NULL_ARGUMENT);
  assert_status(dv_array_prefetch(d, DV_LOCATION_DEVICE, NULL), DV_ERR_INVALID_ARGUMENT);
  assert_msg_has("device memory, not managed memory");
  assert_status(dv_array_prefetch(p, DV_LOCATION_HOST, NULL), DV_ERR_INVALID_ARGUMENT);
  assert_msg_has("pinned host memory");
  assert_status(dv_array_advise(h, DV_MEM_ADVISE_SET_READ_MOSTLY, DV_LOCATION_HOST),
                DV_ERR_INVALID_ARGUMENT);
  assert_msg_has("pageable host memory");
  assert_status(dv_array_advise(d, DV_MEM_ADVISE_SET_ACCESSED_BY, DV_LOCATION_DEVICE),
                DV_ERR_INVALID_ARGUMENT);
  assert_msg_has("dv_array_advise");
  /* Bad locations and advice, whatever the array. */
  assert_status(dv_array_prefetch(d, (dv_location)1, NULL), DV_ERR_INVALID_ARGUMENT);
  assert_msg_has("DV_LOCATION_HOST");
  assert_status(dv_array_advise(d, (dv_mem_advice)0, DV_LOCATION_DEVICE), DV_ERR_INVALID_ARGUMENT);
  assert_status(dv_array_advise(d, (dv_mem_advice)7, DV_LOCATION_DEVICE), DV_ERR_INVALID_ARGUMENT);
  assert_status(dv_array_advise(d, DV_MEM_ADVISE_SET_READ_MOSTLY, (dv_location)-2),
                DV_ERR_INVALID_ARGUMENT);
  /* A stream of another context. */
  dv_context *other = test_context_or_fail(NULL);
  dv_stream *s;
  assert_ok(dv_stream_create(other, 0, &s));
  assert_status(dv_array_prefetch(d, DV_LOCATION_DEVICE, s), DV_ERR_BACKEND_MISMATCH);
  dv_stream_release(s);
  assert_ok(dv_context_destroy(other));
  /* Backends without managed memory have no managed arrays to take hints. */
  if (!has_managed(g_ctx)) {
    dv_array *m = (dv_array *)1;
    assert_status(dv_managed_array(g_ctx, 1, &n, dv_dtype_get(DV_INT32), NULL, 'C', 1, &m),
                  DV_ERR_NOT_SUPPORTED);
    assert_null(m);
  }
  dv_array_release(d), dv_array_release(p), dv_array_release(h);
}

/* A released array or stream passed to either call is DV_ERR_MISUSE naming
 * the function and the kind (the cases whose memory is held, so that every
 * mode catches them: a view keeps its base's record, an array its stream). */
static void test_released_handles(void **state) {
  (void)state;
  int64_t n = 32;
  dv_stream *s;
  assert_ok(dv_stream_create(g_ctx, 0, &s));
  dv_array *a, *v, *keep;
  if (has_managed(g_ctx))
    assert_ok(dv_managed_array(g_ctx, 1, &n, dv_dtype_get(DV_INT32), NULL, 'C', 1, &a));
  else
    assert_ok(dv_device_array(g_ctx, 1, &n, dv_dtype_get(DV_INT32), NULL, 'C', NULL, &a));
  assert_ok(dv_device_array(g_ctx, 1, &n, dv_dtype_get(DV_INT32), NULL, 'C', s, &keep));
  dv_index ix = DV_SLICE(0, 8, 1);
  assert_ok(dv_array_slice(a, 1, &ix, &v));
  dv_array_release(a);
  assert_status(dv_array_prefetch(a, DV_LOCATION_HOST, NULL), DV_ERR_MISUSE);
  assert_msg_has("dv_array_prefetch");
  assert_msg_has("array was released");
  assert_status(dv_array_advise(a, DV_MEM_ADVISE_SET_READ_MOSTLY, DV_LOCATION_HOST), DV_ERR_MISUSE);
  assert_msg_has("dv_array_advise");
  dv_stream_release(s); /* kept by `keep` */
  assert_status(dv_array_prefetch(v, DV_LOCATION_HOST, s), DV_ERR_MISUSE);
  assert_msg_has("stream was released");
  dv_array_release(v), dv_array_release(keep);
}

static void needs_managed(dv_context *ctx, const char *test) {
  if (!has_managed(ctx)) {
    printf("SKIPPED: %s: backend %s has no managed memory (no managed arrays to prefetch)\n", test,
           g_backend);
    skip();
  }
}

/* Prefetches to the device and to the host, on the default stream (done
 * when the call returns) and on a stream (done at its synchronize), over
 * the array's own bytes; size 0 queues nothing. */
static void test_prefetch(void **state) {
  (void)state;
  needs_managed(g_ctx, __func__);
  dv_context *ctx = ctx_concurrent(1);
  dv_array *m = managed(ctx, 1024);
  int32_t *p;
  assert_ok(dv_array_host_data(m, (void **)&p));
  for (int i = 0; i < 1024; i++) p[i] = i;
  bool dbl = dsym("dvdouble_managed_hints") != NULL;
  assert_ok(dv_array_prefetch(m, DV_LOCATION_DEVICE, NULL));
  if (dbl) {
    hints h = read_hints(m);
    assert_int_equal(h.prefetches, 1); /* the NULL stream: done on return */
    assert_int_equal(h.last_prefetch, 0);
    assert_range(m, addr_of(m), 4096);
  }
  dv_stream *s;
  assert_ok(dv_stream_create(ctx, 0, &s));
  assert_ok(dv_array_prefetch(m, DV_LOCATION_HOST, s));
  assert_ok(dv_stream_synchronize(s));
  if (dbl) {
    hints h = read_hints(m);
    assert_int_equal(h.prefetches, 2);
    assert_int_equal(h.last_prefetch, -1);
  }
  /* The data is the data wherever it was moved. */
  for (int i = 0; i < 1024; i++) assert_int_equal(p[i], i);
  /* A view: its bytes from the lowest to the highest it touches. */
  dv_index ix = DV_SLICE(10, 20, 3); /* elements 10, 13, 16, 19 */
  dv_array *v;
  assert_ok(dv_array_slice(m, 1, &ix, &v));
  assert_ok(dv_array_prefetch(v, DV_LOCATION_DEVICE, s));
  assert_ok(dv_stream_synchronize(s));
  if (dbl) assert_range(m, addr_of(m) + 40, 40);
  dv_array_release(v);
  ix = DV_SLICE(900, 100, -100); /* 900, 800, ..., 200: negative strides */
  assert_ok(dv_array_slice(m, 1, &ix, &v));
  assert_ok(dv_array_prefetch(v, DV_LOCATION_HOST, NULL));
  if (dbl) assert_range(m, addr_of(m) + 800, 2804);
  dv_array_release(v);
  /* Size 0: nothing queued. */
  ix = DV_SLICE(5, 5, 1);
  assert_ok(dv_array_slice(m, 1, &ix, &v));
  assert_ok(dv_array_prefetch(v, DV_LOCATION_DEVICE, NULL));
  assert_ok(dv_array_advise(v, DV_MEM_ADVISE_SET_READ_MOSTLY, DV_LOCATION_DEVICE));
  if (dbl) {
    hints h = read_hints(m);
    assert_int_equal(h.prefetches, 4);
    assert_int_equal(h.read_mostly, 0);
  }
  dv_array_release(v);
  dv_stream_release(s);
  dv_array_release(m);
  assert_ok(dv_context_destroy(ctx));
}

/* Every advice, read back from the double. */
static void test_advise(void **state) {
  (void)state;
  needs_managed(g_ctx, __func__);
  dv_context *ctx = ctx_concurrent(1);
  dv_array *m = managed(ctx, 256);
  bool dbl = dsym("dvdouble_managed_hints") != NULL;
  static const struct {
    dv_mem_advice advice;
    dv_location where;
    int read_mostly, preferred;
    unsigned accessed_by;
  } steps[] = {
      {DV_MEM_ADVISE_SET_READ_MOSTLY, DV_LOCATION_DEVICE, 1, -2, 0},
      {DV_MEM_ADVISE_UNSET_READ_MOSTLY, DV_LOCATION_HOST, 0, -2, 0},
      {DV_MEM_ADVISE_SET_PREFERRED_LOCATION, DV_LOCATION_DEVICE, 0, 0, 0},
      {DV_MEM_ADVISE_SET_PREFERRED_LOCATION, DV_LOCATION_HOST, 0, -1, 0},
      {DV_MEM_ADVISE_UNSET_PREFERRED_LOCATION, DV_LOCATION_DEVICE, 0, -2, 0},
      {DV_MEM_ADVISE_SET_ACCESSED_BY, DV_LOCATION_DEVICE, 0, -2, 2},
      {DV_MEM_ADVISE_SET_ACCESSED_BY, DV_LOCATION_HOST, 0, -2, 3},
      {DV_MEM_ADVISE_UNSET_ACCESSED_BY, DV_LOCATION_DEVICE, 0, -2, 1},
      {DV_MEM_ADVISE_UNSET_ACCESSED_BY, DV_LOCATION_HOST, 0, -2, 0},
  };
  for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
    assert_ok(dv_array_advise(m, steps[i].advice, steps[i].where));
    if (!dbl) continue;
    hints h = read_hints(m);
    if (h.read_mostly != steps[i].read_mostly || h.preferred != steps[i].preferred ||
        h.accessed_by != steps[i].accessed_by)
      fail_msg("step %zu: read_mostly %d preferred %d accessed_by %u", i, h.read_mostly,
               h.preferred, h.accessed_by);
    assert_int_equal(h.prefetches, 0);
  }
  /* A view's range (a 2-D column: its first to its last element). */
  int64_t shape[2] = {16, 16};
  dv_array *m2 = NULL, *col;
  assert_ok(dv_managed_array(ctx, 2, shape, dv_dtype_get(DV_FLOAT64), NULL, 'C', 0, &m2));
  dv_index ix[2] = {DV_SLICE(DV_NONE, DV_NONE, 1), {DV_IDX_INT, 0, 0, 0, 3}};
  assert_ok(dv_array_slice(m2, 2, ix, &col));
  assert_ok(dv_array_advise(col, DV_MEM_ADVISE_SET_READ_MOSTLY, DV_LOCATION_HOST));
  if (dbl) {
    assert_range(m2, addr_of(m2) + 24, 15 * 128 + 8);
    assert_int_equal(read_hints(m2).read_mostly, 1);
  }
  dv_array_release(col), dv_array_release(m2), dv_array_release(m);
  assert_ok(dv_context_destroy(ctx));
}

/* Without concurrent managed access the device cannot be a prefetch's
 * destination nor the device an advice names: DV_ERR_NOT_SUPPORTED saying
 * why, nothing asked of the driver; the host and read-mostly still go. */
static void test_no_concurrent_access(void **state) {
  (void)state;
  needs_managed(g_ctx, __func__);
  dv_context *ctx = ctx_concurrent(0);
  if (!ctx) {
    printf("SKIPPED: %s: needs the driver double (a real device's attribute is its own)\n",
           __func__);
    skip();
  }
  dv_array *m = managed(ctx, 256);
  assert_status(dv_array_prefetch(m, DV_LOCATION_DEVICE, NULL), DV_ERR_NOT_SUPPORTED);
  assert_msg_has("concurrent managed access");
  assert_status(dv_array_advise(m, DV_MEM_ADVISE_SET_PREFERRED_LOCATION, DV_LOCATION_DEVICE),
                DV_ERR_NOT_SUPPORTED);
  assert_status(dv_array_advise(m, DV_MEM_ADVISE_SET_ACCESSED_BY, DV_LOCATION_DEVICE),
                DV_ERR_NOT_SUPPORTED);
  assert_status(dv_array_advise(m, DV_MEM_ADVISE_UNSET_ACCESSED_BY, DV_LOCATION_DEVICE),
                DV_ERR_NOT_SUPPORTED);
  hints h = read_hints(m);
  assert_int_equal(h.prefetches, 0);
  assert_int_equal(h.preferred, -2);
  assert_ok(dv_array_prefetch(m, DV_LOCATION_HOST, NULL));
  assert_ok(dv_array_advise(m, DV_MEM_ADVISE_SET_READ_MOSTLY, DV_LOCATION_DEVICE));
  assert_ok(dv_array_advise(m, DV_MEM_ADVISE_UNSET_PREFERRED_LOCATION, DV_LOCATION_DEVICE));
  assert_ok(dv_array_advise(m, DV_MEM_ADVISE_SET_PREFERRED_LOCATION, DV_LOCATION_HOST));
  h = read_hints(m);
  assert_int_equal(h.prefetches, 1);
  assert_int_equal(h.last_prefetch, -1);
  assert_int_equal(h.read_mostly, 1);
  assert_int_equal(h.preferred, -1);
  dv_array_release(m);
  assert_ok(dv_context_destroy(ctx));
}

typedef struct release_later {
  int_fn hold;
  int delay_ms;
} release_later;

static void *unhold_after(void *arg) {
  release_later *r = arg;
  struct timespec t = {0, (long)r->delay_ms * 1000000L};
  nanosleep(&t, NULL);
  r->hold(0);
  return NULL;
}

/* An array released while its prefetch is still queued: the memory is
 * freed after the prefetch, as after a copy (the double faults a queued
 * prefetch whose memory is gone: ILLEGAL_ADDRESS, sticky). */
static void test_release_while_queued(void **state) {
  (void)state;
  needs_managed(g_ctx, __func__);
  int_fn hold = (int_fn)dsym("dvdouble_hold");
  count_fn faults = (count_fn)dsym("dvdouble_faults");
  if (!hold || !faults) {
    printf("SKIPPED: %s: needs the driver double's dvdouble_hold\n", __func__);
    skip();
  }
  dv_context *ctx = ctx_concurrent(1);
  dv_stream *s;
  assert_ok(dv_stream_create(ctx, DV_STREAM_NON_BLOCKING, &s));
  dv_array *m = managed(ctx, 1 << 16);
  long f0 = faults();
  hold(1);
  assert_ok(dv_array_prefetch(m, DV_LOCATION_DEVICE, s));
  dv_array_release(m);
  release_later r = {hold, 100};
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, unhold_after, &r), 0);
  assert_ok(dv_context_flush_deallocs(ctx)); /* the free waits for the prefetch */
  pthread_join(t, NULL);
  assert_ok(dv_stream_synchronize(s));
  assert_ok(dv_context_synchronize(ctx));
  assert_int_equal(faults(), f0);
  dv_stats st = {.size = sizeof st};
  assert_ok(dv_context_stats(ctx, &st));
  assert_int_equal(st.managed.current, 0);
  dv_stream_release(s);
  assert_ok(dv_context_destroy(ctx));
}

typedef struct sweep_path {
  const char *name;
  int prefetch; /* 1 NULL stream, 2 a stream; 0 an advice */
} sweep_path;

static dv_status run_path(const sweep_path *p, dv_array *m, dv_stream *s) {
  if (p->prefetch) return dv_array_prefetch(m, DV_LOCATION_DEVICE, p->prefetch == 2 ? s : NULL);
  return dv_array_advise(m, DV_MEM_ADVISE_SET_ACCESSED_BY, DV_LOCATION_DEVICE);
}

/* The fault sweep: each host allocation of the paths, then each driver call
 * (the doubles' fail points), failed in turn: the failure's status and a
 * message, nothing changed (arrays, managed bytes, the hints), and the
 * same call succeeding afterwards. */
static void test_fault_sweep(void **state) {
  (void)state;
  bool man = has_managed(g_ctx);
  dv_context *ctx = man ? ctx_concurrent(1) : test_context_or_fail(NULL);
  dv_stream *s;
  assert_ok(dv_stream_create(ctx, 0, &s));
  int64_t n = 512;
  dv_array *m = NULL;
  if (man)
    assert_ok(dv_managed_array(ctx, 1, &n, dv_dtype_get(DV_INT32), NULL, 'C', 1, &m));
  else
    assert_ok(dv_device_array(ctx, 1, &n, dv_dtype_get(DV_INT32), NULL, 'C', NULL, &m));
  static const sweep_path paths[] = {{"prefetch", 1}, {"prefetch on a stream", 2}, {"advise", 0}};
  dv_status expect_ok = man ? DV_OK : DV_ERR_INVALID_ARGUMENT;
  bool dbl = dsym("dvdouble_managed_hints") != NULL;
  for (size_t pi = 0; pi < sizeof paths / sizeof paths[0]; pi++) {
    const sweep_path *p = &paths[pi];
    /* Host allocations. */
    for (uint64_t k = 1;; k++) {
      assert_ok(dv_context_synchronize(ctx));
      dv_stats before = {.size = sizeof before}, after = {.size = sizeof after};
      assert_ok(dv_context_stats(ctx, &before));
      hints h0 = dbl ? read_hints(m) : (hints){0};
      assert_ok(dv_fault_inject(ctx, DV_FAULT_HOST_ALLOC, k));
      dv_status rc = run_path(p, m, s);
      int fired = !dv_fault_pending(ctx, DV_FAULT_HOST_ALLOC);
      assert_ok(dv_fault_inject(ctx, DV_FAULT_HOST_ALLOC, 0));
      if (!fired) {
        assert_int_equal(rc, expect_ok);
        break;
      }
      if (rc == expect_ok) continue; /* absorbed */
      if (rc != DV_ERR_HOST_OUT_OF_MEMORY)
        fail_msg("%s at k=%llu: %s (%s)", p->name, (unsigned long long)k, dv_status_name(rc),
                 dv_last_error());
      assert_ok(dv_context_synchronize(ctx));
      assert_ok(dv_context_stats(ctx, &after));
      assert_int_equal(after.arrays.current, before.arrays.current);
      assert_int_equal(after.managed.current, before.managed.current);
      if (dbl) assert_int_equal(read_hints(m).prefetches, h0.prefetches);
    }
    /* Driver calls: the entry the backend uses (CUDA 12.2+: the _v2 ones; an older
     * driver, cuda-v1, and HIP's translations: the first ones). */
    fail_fn arm = (fail_fn)dsym("dvdouble_fail");
    calls_fn calls = (calls_fn)dsym("dvdouble_fail_calls");
    if (!man || !arm || !calls) continue;
    bool hip = strncmp(g_backend, "hip", 3) == 0,
         v2 = !hip && dsym("cuMemPrefetchAsync_v2") != NULL;
    const char *entry = p->prefetch ? (v2 ? "cuMemPrefetchAsync_v2" : "cuMemPrefetchAsync")
                                    : (v2 ? "cuMemAdvise_v2" : "cuMemAdvise");
    const char *named = p->prefetch ? (hip ? "hipMemPrefetchAsync" : "cuMemPrefetchAsync")
                                    : (hip ? "hipMemAdvise" : "cuMemAdvise");
    int failures = 0;
    for (long k = 1;; k++) {
      assert_ok(dv_context_synchronize(ctx));
      dv_stats before = {.size = sizeof before}, after = {.size = sizeof after};
      assert_ok(dv_context_stats(ctx, &before));
      hints h0 = read_hints(m);
      long c0 = calls(entry);
      arm(entry, k, 2 /* CUDA_ERROR_OUT_OF_MEMORY, hipErrorOutOfMemory */);
      dv_status rc = run_path(p, m, s);
      long made = calls(entry) - (c0 < 0 ? 0 : c0);
      arm(entry, 0, 0);
      if (made < k) { /* the armed call was never reached: the path is done */
        assert_ok(rc);
        break;
      }
      failures++;
      assert_int_equal(rc, DV_ERR_OUT_OF_MEMORY);
      assert_msg_has(named);
      assert_ok(dv_context_synchronize(ctx));
      assert_ok(dv_context_stats(ctx, &after));
      assert_int_equal(after.arrays.current, before.arrays.current);
      assert_int_equal(after.managed.current, before.managed.current);
      hints h = read_hints(m);
      assert_int_equal(h.prefetches, h0.prefetches);
      assert_int_equal(h.accessed_by, h0.accessed_by);
      /* and the same call goes through afterwards */
      assert_ok(run_path(p, m, s));
      assert_ok(dv_context_synchronize(ctx));
    }
    if (failures == 0) fail_msg("%s: no driver call was ever failed", p->name);
  }
  dv_array_release(m);
  dv_stream_release(s);
  assert_ok(dv_context_flush_deallocs(ctx));
  dv_stats st = {.size = sizeof st};
  assert_ok(dv_context_stats(ctx, &st));
  assert_int_equal(st.managed.current, 0);
  assert_ok(dv_context_destroy(ctx));
}

typedef struct cb_args {
  dv_array *m;
  dv_status prefetch, advise;
} cb_args;
static void in_callback(dv_stream *s, dv_status status, void *user) {
  (void)s, (void)status;
  cb_args *a = user;
  a->prefetch = dv_array_prefetch(a->m, DV_LOCATION_HOST, NULL);
  a->advise = dv_array_advise(a->m, DV_MEM_ADVISE_SET_READ_MOSTLY, DV_LOCATION_HOST);
}

/* From a stream callback both calls are DV_ERR_MISUSE, as every call that
 * reaches the driver. */
static void test_callback_rule(void **state) {
  (void)state;
  needs_managed(g_ctx, __func__);
  dv_context *ctx = ctx_concurrent(1);
  dv_stream *s;
  assert_ok(dv_stream_create(ctx, 0, &s));
  cb_args a = {managed(ctx, 64), DV_OK, DV_OK};
  assert_ok(dv_stream_add_callback(s, in_callback, &a));
  assert_ok(dv_stream_synchronize(s));
  assert_int_equal(a.prefetch, DV_ERR_MISUSE);
  assert_int_equal(a.advise, DV_ERR_MISUSE);
  dv_array_release(a.m);
  dv_stream_release(s);
  assert_ok(dv_context_destroy(ctx));
}

/* A prefetch on a stream that captures a graph is DV_ERR_MISUSE before
 * anything is queued (a graph has no prefetch node: the driver would
 * refuse it and invalidate the capture); the capture goes on, and an
 * advice (not stream work) is not refused. */
static void test_prefetch_in_capture(void **state) {
  (void)state;
  needs_managed(g_ctx, __func__);
  dv_context *ctx = ctx_concurrent(1);
  dv_stream *s;
  assert_ok(dv_stream_create(ctx, 0, &s));
  dv_array *m = managed(ctx, 256);
  dv_status rc = dv_graph_capture_begin(s);
  if (rc == DV_ERR_NOT_SUPPORTED) {
    printf("SKIPPED: %s: %s\n", __func__, dv_last_error());
    dv_array_release(m), dv_stream_release(s);
    assert_ok(dv_context_destroy(ctx));
    skip();
  }
  assert_ok(rc);
  long before = dsym("dvdouble_managed_hints") ? read_hints(m).prefetches : 0;
  assert_status(dv_array_prefetch(m, DV_LOCATION_DEVICE, s), DV_ERR_MISUSE);
  assert_msg_has("dv_array_prefetch");
  assert_ok(dv_array_advise(m, DV_MEM_ADVISE_SET_READ_MOSTLY, DV_LOCATION_HOST));
  assert_ok(dv_array_memset(m, 0, s)); /* the capture was not invalidated */
  dv_graph *g = NULL;
  assert_ok(dv_graph_capture_end(s, &g));
  size_t n = 0;
  assert_ok(dv_graph_work_count(g, &n));
  assert_int_equal(n, 1);
  assert_ok(dv_graph_release(g));
  if (dsym("dvdouble_managed_hints")) assert_int_equal(read_hints(m).prefetches, before);
  assert_ok(dv_array_prefetch(m, DV_LOCATION_DEVICE, s)); /* after the capture: queued */
  assert_ok(dv_stream_synchronize(s));
  dv_array_release(m);
  dv_stream_release(s);
  assert_ok(dv_context_destroy(ctx));
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_refusals, ctx_setup, teardown),
      cmocka_unit_test_setup_teardown(test_prefetch, ctx_setup, teardown),
      cmocka_unit_test_setup_teardown(test_advise, ctx_setup, teardown),
      cmocka_unit_test_setup_teardown(test_no_concurrent_access, ctx_setup, teardown),
      cmocka_unit_test_setup_teardown(test_release_while_queued, ctx_setup, teardown),
      cmocka_unit_test_setup_teardown(test_fault_sweep, ctx_setup, teardown),
      cmocka_unit_test_setup_teardown(test_callback_rule, ctx_setup, teardown),
      cmocka_unit_test_setup_teardown(test_released_handles, ctx_setup, teardown),
      cmocka_unit_test_setup_teardown(test_prefetch_in_capture, ctx_setup, teardown),
  };
  return test_main(argc, argv, "managed_hints", tests, sizeof tests / sizeof tests[0]);
}
