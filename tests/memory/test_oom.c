/*
 * Fault sweep: for every create path, make the k-th host allocation (and,
 * where the backend injects them, the k-th device allocation or copy) fail,
 * for k = 1, 2, ... until the call succeeds.  Each failure must return an
 * out-of-memory (or driver, for copies) status, clear the out-parameter and
 * change nothing; AddressSanitizer's leak check proves nothing leaked.
 */
#include <dlfcn.h>

#include "common.h"

static dv_array *g_host, *g_dev, *g_strided, *g_fdev;
static dv_dtype *g_rec;
static double g_buf[64];

static void fixtures(void) {
  int64_t shape[2] = {8, 8};
  assert_ok(dv_host_array_wrap(g_ctx, g_buf, 2, shape, dv_dtype_get(DV_FLOAT64), NULL, &g_host));
  assert_ok(dv_to_device(g_ctx, g_host, NULL, 1, NULL, &g_dev));
  assert_ok(dv_device_array(g_ctx, 2, shape, dv_dtype_get(DV_FLOAT64), NULL, 'F', NULL, &g_fdev));
  dv_index idx[2] = {DV_SLICE(DV_NONE, DV_NONE, -2), DV_SLICE(1, 7, 3)};
  assert_ok(dv_array_slice(g_dev, 2, idx, &g_strided));
  dv_field_desc f[2] = {{"a", dv_dtype_get(DV_INT32), 0, 0, NULL}, {"b", dv_dtype_get(DV_FLOAT64), 4, 0, NULL}};
  assert_ok(dv_dtype_record_create(f, 2, 0, &g_rec));
}

static void unfixtures(void) {
  dv_array_release(g_host), dv_array_release(g_dev), dv_array_release(g_strided), dv_array_release(g_fdev);
  dv_dtype_release(g_rec);
}

typedef enum { K_ARRAY, K_STREAM, K_EVENT, K_SCOPE, K_DTYPE, K_CONFIG, K_CONTEXT, K_NONE } okind;
typedef dv_status (*path_fn)(void **out);

static dv_status p_device_array(void **o) {
  int64_t s[3] = {3, 4, 5};
  return dv_device_array(g_ctx, 3, s, dv_dtype_get(DV_INT16), NULL, 'C', NULL, (dv_array **)o);
}
static dv_status p_like(void **o) { return dv_device_array_like(g_strided, NULL, (dv_array **)o); }
static dv_status p_record(void **o) { return dv_device_record(g_ctx, g_rec, NULL, (dv_array **)o); }
static dv_status p_wrap(void **o) {
  int64_t n = 64;
  return dv_host_array_wrap(g_ctx, g_buf, 1, &n, dv_dtype_get(DV_FLOAT64), NULL, (dv_array **)o);
}
static dv_status p_host(void **o) {
  int64_t n = 64;
  return dv_host_array(g_ctx, 1, &n, dv_dtype_get(DV_FLOAT64), NULL, 'C', (dv_array **)o);
}
static dv_status p_pinned(void **o) {
  int64_t n = 64;
  return dv_pinned_array(g_ctx, 1, &n, dv_dtype_get(DV_FLOAT64), NULL, 'C', (dv_array **)o);
}
static dv_status p_mapped(void **o) {
  int64_t n = 64;
  return dv_mapped_array(g_ctx, 1, &n, dv_dtype_get(DV_FLOAT64), NULL, 'C', 0, (dv_array **)o);
}
static dv_status p_to_device(void **o) { return dv_to_device(g_ctx, g_host, NULL, 1, NULL, (dv_array **)o); }
static dv_status p_to_host(void **o) { return dv_copy_to_host(g_strided, NULL, NULL, (dv_array **)o); }
static dv_status p_copy_new(void **o) { return dv_array_copy_new(g_strided, 'F', NULL, (dv_array **)o); }
static dv_status p_slice(void **o) {
  dv_index i[1] = {DV_SLICE(1, 5, 2)};
  return dv_array_slice(g_dev, 1, i, (dv_array **)o);
}
static dv_status p_reshape_copy(void **o) {
  int64_t s = -1;
  return dv_array_reshape(g_strided, 1, &s, 'C', 0, NULL, (dv_array **)o);
}
static dv_status p_ravel_copy(void **o) { return dv_array_ravel(g_fdev, 'C', 0, NULL, (dv_array **)o); }
static dv_status p_field(void **o) {
  dv_array *r = NULL;
  *o = NULL;
  dv_status rc = dv_device_record(g_ctx, g_rec, NULL, &r);
  if (rc) return rc;
  rc = dv_array_field(r, "b", (dv_array **)o);
  dv_array_release(r);
  return rc;
}
static dv_status p_stream(void **o) { return dv_stream_create(g_ctx, 0, (dv_stream **)o); }
static dv_status p_event(void **o) { return dv_event_create(g_ctx, DV_EVENT_TIMING, (dv_event **)o); }
static dv_status p_scope(void **o) { return dv_pinned_scope_begin(g_ctx, 1, &g_host, (dv_scope **)o); }
static dv_status p_mscope(void **o) {
  dv_array *v = NULL;
  dv_status rc = dv_mapped_scope_begin(g_ctx, 1, &g_host, &v, (dv_scope **)o);
  dv_array_release(v);
  return rc;
}
static dv_status p_dtype(void **o) {
  int64_t sub = 3;
  dv_field_desc f[2] = {{"first", dv_dtype_get(DV_INT8), 0, 0, NULL}, {"second", dv_dtype_get(DV_INT8), 1, 1, &sub}};
  return dv_dtype_record_create(f, 2, 0, (dv_dtype **)o);
}
static dv_status p_config(void **o) { return dv_config_create((dv_config **)o); }
static dv_status p_context(void **o) { return test_context((dv_context **)o, NULL); }
/* A context whose pinned pool has a reserve (allocated with it). */
static dv_status p_context_pinned_pool(void **o) {
  return test_context((dv_context **)o, "pinned_pool=on", "pinned_pool_reserve=64K", NULL);
}
/* Operations without an out object: a strided copy (staged on host-staged),
 * a strided memset, a device-side copy. */
static dv_status p_copy_strided(void **o) {
  (void)o;
  dv_array *h = NULL;
  dv_status rc = dv_copy_to_host(g_strided, NULL, NULL, &h);
  if (!rc) rc = dv_copy_to_device(g_strided, h, NULL);
  dv_array_release(h);
  return rc;
}
static dv_status p_memset(void **o) {
  (void)o;
  return dv_array_memset(g_strided, 7, NULL);
}
static dv_status p_d2d(void **o) {
  (void)o;
  return dv_array_copy(g_fdev, g_dev, NULL);
}

static void release_out(okind k, void *o) {
  switch (k) {
    case K_ARRAY: dv_array_release(o); break;
    case K_STREAM: dv_stream_release(o); break;
    case K_EVENT: dv_event_release(o); break;
    case K_SCOPE: assert_ok(dv_scope_end(o)); break;
    case K_DTYPE: dv_dtype_release(o); break;
    case K_CONFIG: dv_config_destroy(o); break;
    case K_CONTEXT: assert_ok(dv_context_destroy(o)); break;
    case K_NONE: break;
  }
}

/* Paths that need host memory the device can map (dv_device_info's
 * can_map_host_memory): skipped, by name, on a device that cannot. */
static int needs_mapping(path_fn fn) { return fn == p_mapped || fn == p_mscope; }

static const struct {
  const char *name;
  path_fn fn;
  okind kind;
} kPaths[] = {
    {"device_array", p_device_array, K_ARRAY}, {"device_array_like", p_like, K_ARRAY},
    {"device_record", p_record, K_ARRAY},      {"host_array_wrap", p_wrap, K_ARRAY},
    {"host_array", p_host, K_ARRAY},           {"pinned_array", p_pinned, K_ARRAY},
    {"mapped_array", p_mapped, K_ARRAY},       {"to_device", p_to_device, K_ARRAY},
    {"copy_to_host", p_to_host, K_ARRAY},      {"copy_new", p_copy_new, K_ARRAY},
    {"slice", p_slice, K_ARRAY},               {"reshape_copy", p_reshape_copy, K_ARRAY},
    {"ravel_copy", p_ravel_copy, K_ARRAY},     {"field", p_field, K_ARRAY},
    {"stream", p_stream, K_STREAM},            {"event", p_event, K_EVENT},
    {"pinned_scope", p_scope, K_SCOPE},        {"mapped_scope", p_mscope, K_SCOPE},
    {"record_dtype", p_dtype, K_DTYPE},        {"config", p_config, K_CONFIG},
    {"context", p_context, K_CONTEXT},         {"context_pinned_pool", p_context_pinned_pool, K_CONTEXT},
    {"strided_copy", p_copy_strided, K_NONE},
    {"strided_memset", p_memset, K_NONE},      {"d2d", p_d2d, K_NONE},
};

static int acceptable(dv_fault_kind fk, dv_status rc) {
  if (fk == DV_FAULT_COPY) return rc == DV_ERR_DRIVER;
  return rc == DV_ERR_HOST_OUT_OF_MEMORY || rc == DV_ERR_OUT_OF_MEMORY;
}

static void sweep(dv_fault_kind fk) {
  dv_device_info di;
  assert_ok(dv_context_device_info(g_ctx, &di));
  fixtures();
  for (size_t p = 0; p < sizeof kPaths / sizeof kPaths[0]; p++) {
    int failures = 0;
    if (needs_mapping(kPaths[p].fn) && !di.can_map_host_memory) {
      printf("SKIPPED: oom.%s %s (%s faults): device \"%s\" cannot map host memory\n", g_backend,
             kPaths[p].name, fk == DV_FAULT_HOST_ALLOC ? "host allocation" : fk == DV_FAULT_COPY ? "copy" : "device allocation",
             di.name);
      continue;
    }
    for (uint64_t k = 1; k < 500; k++) {
      assert_ok(dv_context_synchronize(g_ctx));
      dv_stats before = {.size = sizeof before}, after = {.size = sizeof after};
      assert_ok(dv_context_stats(g_ctx, &before));
      if (dv_fault_inject(g_ctx, fk, k) == DV_ERR_NOT_SUPPORTED) {
        unfixtures();
        skip();
      }
      void *out = (void *)1;
      if (kPaths[p].kind == K_NONE) out = NULL;
      dv_status rc = kPaths[p].fn(&out);
      int fired = !dv_fault_pending(g_ctx, fk);
      dv_fault_inject(g_ctx, fk, 0);
      if (rc == DV_OK) {
        release_out(kPaths[p].kind, out);
        if (!fired) break; /* reached success without meeting the fault */
        continue;          /* the fault was absorbed (e.g. the OOM retry) */
      }
      failures++;
      if (!acceptable(fk, rc))
        fail_msg("%s, fault %d at k=%llu: %s (%s)", kPaths[p].name, (int)fk, (unsigned long long)k,
                 dv_status_name(rc), dv_last_error());
      if (dv_last_error()[0] == 0) fail_msg("%s: no message", kPaths[p].name);
      if (kPaths[p].kind != K_NONE && out != NULL) fail_msg("%s: out not cleared at k=%llu", kPaths[p].name, (unsigned long long)k);
      assert_ok(dv_context_synchronize(g_ctx));
      assert_ok(dv_context_stats(g_ctx, &after));
      if (after.arrays.current != before.arrays.current || after.registered.current != before.registered.current)
        fail_msg("%s: state changed by a failed call at k=%llu", kPaths[p].name, (unsigned long long)k);
    }
    if (fk == DV_FAULT_HOST_ALLOC && kPaths[p].kind != K_NONE && failures == 0)
      fail_msg("%s: no host allocation was ever failed", kPaths[p].name);
  }
  unfixtures();
}

static void test_host_alloc_sweep(void **state) {
  (void)state;
  sweep(DV_FAULT_HOST_ALLOC);
}
static void test_device_alloc_sweep(void **state) {
  (void)state;
  sweep(DV_FAULT_DEVICE_ALLOC);
}
static void test_copy_fault_sweep(void **state) {
  (void)state;
  sweep(DV_FAULT_COPY);
}

/* A device that cannot map host memory (CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY
 * 0, played by the CUDA test double): mapped arrays and scopes are refused as
 * not supported, and the sweeps skip those paths by name instead of failing
 * (issue 22 #16).  Needs the double's knob; skipped by name elsewhere. */
typedef void (*set_map_fn)(int can);
static void test_sweeps_without_mapping(void **state) {
  (void)state;
  void *drv = strncmp(g_backend, "cuda", 4) == 0 ? dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD) : NULL;
  set_map_fn set_map = drv ? (set_map_fn)dlsym(drv, "dvdouble_set_can_map_host_memory") : NULL;
  if (!set_map) {
    if (drv) dlclose(drv);
    printf("SKIPPED: oom.%s test_sweeps_without_mapping: needs the CUDA test double\n", g_backend);
    skip();
  }
  set_map(0);
  dv_context *saved = g_ctx, *nomap = NULL;
  dv_status rc = test_context(&nomap, NULL);
  set_map(1);
  dlclose(drv);
  assert_ok(rc);
  dv_device_info di;
  assert_ok(dv_context_device_info(nomap, &di));
  assert_int_equal(di.can_map_host_memory, 0);
  int64_t n = 4;
  dv_array *a = (dv_array *)1;
  assert_status(dv_mapped_array(nomap, 1, &n, dv_dtype_get(DV_FLOAT64), NULL, 'C', 0, &a), DV_ERR_NOT_SUPPORTED);
  assert_null(a);
  g_ctx = nomap;
  sweep(DV_FAULT_HOST_ALLOC);
  /* the faults the backend injects (sweep skips the test on the others) */
  const dv_fault_kind backend_faults[] = {DV_FAULT_DEVICE_ALLOC, DV_FAULT_COPY};
  for (size_t i = 0; i < 2; i++)
    if (dv_fault_inject(nomap, backend_faults[i], 0) == DV_OK) sweep(backend_faults[i]);
  g_ctx = saved;
  assert_ok(dv_context_destroy(nomap));
}

/* Two consecutive device failures defeat the single retry. */
static void test_device_oom_is_reported(void **state) {
  (void)state;
  if (strncmp(g_backend, "host", 4) != 0) skip();
  int64_t n = 16;
  dv_array *a = (dv_array *)1;
  assert_ok(dv_fault_inject(g_ctx, DV_FAULT_DEVICE_ALLOC, 1));
  assert_ok(dv_device_array(g_ctx, 1, &n, dv_dtype_get(DV_INT8), NULL, 'C', NULL, &a)); /* retried */
  dv_array_release(a);
  dv_stats st = {.size = sizeof st};
  assert_ok(dv_context_stats(g_ctx, &st));
  assert_int_equal(st.oom_retries, 1);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {T(test_host_alloc_sweep), T(test_device_alloc_sweep),
                                     T(test_copy_fault_sweep), T(test_device_oom_is_reported),
                                     T(test_sweeps_without_mapping)};
  return test_main(argc, argv, "oom", tests, sizeof tests / sizeof tests[0]);
}
