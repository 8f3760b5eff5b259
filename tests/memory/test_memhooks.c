/* Memory hooks, scoped statistics and the out-of-memory handler (issue 38
 * item 3: memory/events.c), on every backend. */
#include <string.h>

#include "common.h"

#define MAX_EV 64
typedef struct recorder {
  int n;
  dv_memory_event ev[MAX_EV];
  char manager[MAX_EV][32];
} recorder;

static void record(dv_context *ctx, const dv_memory_event *e, void *user) {
  (void)ctx;
  recorder *r = user;
  if (r->n < MAX_EV) {
    r->ev[r->n] = *e;
    snprintf(r->manager[r->n], sizeof r->manager[0], "%s", e->manager ? e->manager : "(null)");
    r->ev[r->n].manager = NULL;
  }
  r->n++;
}

static dv_array *dev_f32(int64_t n) {
  dv_array *a = NULL;
  assert_ok(dv_device_array(g_ctx, 1, &n, dv_dtype_get(DV_FLOAT32), NULL, 'C', NULL, &a));
  return a;
}

static void test_hook_device_events(void **state) {
  (void)state;
  recorder r = {0};
  int id = 0;
  assert_ok(dv_memory_hook_add(g_ctx, record, &r, &id));
  assert_true(id > 0);
  dv_array *a = dev_f32(1000);
  assert_int_equal(r.n, 1);
  assert_int_equal(r.ev[0].event, DV_MEMORY_ALLOC);
  assert_int_equal(r.ev[0].memory, DV_MEM_DEVICE);
  assert_int_equal(r.ev[0].bytes, 4000);
  assert_non_null(r.ev[0].address);
  assert_string_equal(r.manager[0], dv_context_memory_manager(g_ctx));
  /* a view and a wrap of host memory make no event */
  dv_array *v = NULL, *h = NULL;
  dv_index idx = DV_SLICE(0, 10, 1);
  assert_ok(dv_array_slice(a, 1, &idx, &v));
  float host[8];
  int64_t n8 = 8;
  assert_ok(dv_host_array_wrap(g_ctx, host, 1, &n8, dv_dtype_get(DV_FLOAT32), NULL, &h));
  assert_int_equal(r.n, 1);
  /* the free comes with the last array of the memory, with the same address */
  dv_array_release(a);
  assert_int_equal(r.n, 1);
  dv_array_release(v);
  assert_int_equal(r.n, 2);
  assert_int_equal(r.ev[1].event, DV_MEMORY_FREE);
  assert_int_equal(r.ev[1].bytes, 4000);
  assert_ptr_equal(r.ev[1].address, r.ev[0].address);
  assert_int_equal(r.ev[1].offset, r.ev[0].offset);
  dv_array_release(h);
  /* removed: no more calls; removing again is refused */
  assert_ok(dv_memory_hook_remove(g_ctx, id));
  dv_array_release(dev_f32(10));
  assert_int_equal(r.n, 2);
  assert_status(dv_memory_hook_remove(g_ctx, id), DV_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(dv_last_error(), "no memory hook"));
  /* bad arguments change nothing */
  assert_status(dv_memory_hook_add(g_ctx, NULL, &r, &id), DV_ERR_NULL_ARGUMENT);
  assert_status(dv_memory_hook_add(NULL, record, &r, &id), DV_ERR_NULL_ARGUMENT);
  assert_status(dv_memory_hook_add(g_ctx, record, &r, NULL), DV_ERR_NULL_ARGUMENT);
  dv_array_release(dev_f32(10));
  assert_int_equal(r.n, 2);
}

static void test_hook_stream_and_order(void **state) {
  (void)state;
  recorder r1 = {0}, r2 = {0};
  int id1, id2;
  assert_ok(dv_memory_hook_add(g_ctx, record, &r1, &id1));
  assert_ok(dv_memory_hook_add(g_ctx, record, &r2, &id2));
  assert_int_not_equal(id1, id2);
  dv_stream *s = NULL;
  assert_ok(dv_stream_create(g_ctx, 0, &s));
  int64_t n = 256;
  dv_array *a = NULL;
  assert_ok(dv_device_array(g_ctx, 1, &n, dv_dtype_get(DV_INT64), NULL, 'C', s, &a));
  assert_int_equal(r1.n, 1);
  assert_int_equal(r2.n, 1);
  assert_ptr_equal(r1.ev[0].stream, s);
  dv_array_release(a);
  assert_ptr_equal(r1.ev[1].stream, s);
  assert_ok(dv_memory_hook_remove(g_ctx, id1));
  dv_array_release(dev_f32(4));
  assert_int_equal(r1.n, 2);
  assert_int_equal(r2.n, 4);
  assert_ok(dv_memory_hook_remove(g_ctx, id2));
  assert_ok(dv_stream_synchronize(s));
  dv_stream_release(s);
}

static void test_hook_host_memory(void **state) {
  (void)state;
  recorder r = {0};
  int id;
  assert_ok(dv_memory_hook_add(g_ctx, record, &r, &id));
  int64_t n = 64;
  dv_array *p = NULL;
  assert_ok(dv_pinned_array(g_ctx, 1, &n, dv_dtype_get(DV_INT32), NULL, 'C', &p));
  void *host = NULL;
  assert_ok(dv_array_host_data(p, &host));
  assert_int_equal(r.n, 1);
  assert_int_equal(r.ev[0].memory, DV_MEM_PINNED);
  assert_int_equal(r.ev[0].bytes, 256);
  assert_ptr_equal(r.ev[0].address, host);
  assert_string_equal(r.manager[0], "driver");
  assert_null(r.ev[0].stream);
  dv_array_release(p);
  assert_int_equal(r.n, 2);
  assert_int_equal(r.ev[1].event, DV_MEMORY_FREE);
  assert_ptr_equal(r.ev[1].address, host);
  dv_device_info info;
  assert_ok(dv_context_device_info(g_ctx, &info));
  if (info.can_map_host_memory) {
    dv_array *m = NULL;
    assert_ok(dv_mapped_array(g_ctx, 1, &n, dv_dtype_get(DV_INT32), NULL, 'C', 0, &m));
    assert_int_equal(r.ev[2].memory, DV_MEM_MAPPED);
    dv_array_release(m);
    assert_int_equal(r.ev[3].memory, DV_MEM_MAPPED);
    assert_int_equal(r.n, 4);
  }
  assert_ok(dv_memory_hook_remove(g_ctx, id));
}

/* A hook that tries to change the hooks, and one that allocates. */
static dv_status g_inner;
static void meddle(dv_context *ctx, const dv_memory_event *e, void *user) {
  (void)e;
  int *calls = user;
  (*calls)++;
  g_inner = dv_memory_hook_remove(ctx, 1);
  if (g_inner == DV_ERR_MISUSE) g_inner = dv_memory_scope_push(ctx) == DV_ERR_MISUSE ? DV_ERR_MISUSE : DV_OK;
  int64_t n = 4;
  dv_array *x = NULL;
  if (dv_device_array(ctx, 1, &n, dv_dtype_get(DV_UINT8), NULL, 'C', NULL, &x) == DV_OK) dv_array_release(x);
}

static void test_hook_reentry(void **state) {
  (void)state;
  int calls = 0, id;
  assert_ok(dv_memory_hook_add(g_ctx, meddle, &calls, &id));
  dv_array *a = dev_f32(16);
  /* its own allocation made no call: one call, not a recursion */
  assert_int_equal(calls, 1);
  assert_int_equal(g_inner, DV_ERR_MISUSE);
  dv_array_release(a);
  assert_int_equal(calls, 2);
  assert_ok(dv_memory_hook_remove(g_ctx, id));
}

static void test_scopes_nested(void **state) {
  (void)state;
  dv_memory_scope_stats st;
  assert_status(dv_memory_scope_pop(g_ctx, &st), DV_ERR_INVALID_ARGUMENT);
  assert_ok(dv_memory_scope_push(g_ctx));
  dv_array *a = dev_f32(250); /* 1000 bytes */
  assert_ok(dv_memory_scope_push(g_ctx));
  dv_array *b = dev_f32(125); /* 500 bytes */
  dv_array_release(a);        /* made before the inner scope */
  assert_ok(dv_memory_scope_pop(g_ctx, &st));
  assert_int_equal(st.device.bytes.current, -500);
  assert_int_equal(st.device.bytes.peak, 500);
  assert_int_equal(st.device.bytes.total, 500);
  assert_int_equal(st.device.allocations.current, 0);
  assert_int_equal(st.device.allocations.total, 1);
  assert_int_equal(st.pinned.bytes.total, 0);
  int64_t n = 10;
  dv_array *p = NULL;
  assert_ok(dv_pinned_array(g_ctx, 1, &n, dv_dtype_get(DV_UINT8), NULL, 'C', &p));
  assert_ok(dv_memory_scope_pop(g_ctx, &st));
  /* the outer scope: its 1000, then the inner's net -500 at a peak of 1000 + 500 */
  assert_int_equal(st.device.bytes.current, 500);
  assert_int_equal(st.device.bytes.peak, 1500);
  assert_int_equal(st.device.bytes.total, 1500);
  assert_int_equal(st.device.allocations.current, 1);
  assert_int_equal(st.device.allocations.peak, 2);
  assert_int_equal(st.pinned.bytes.current, 10);
  assert_int_equal(st.pinned.allocations.total, 1);
  dv_array_release(b);
  dv_array_release(p);
  /* nothing open: nothing counted, pop refused (out cleared) */
  memset(&st, 0x5a, sizeof st);
  assert_status(dv_memory_scope_pop(g_ctx, &st), DV_ERR_INVALID_ARGUMENT);
  assert_int_equal(st.device.bytes.total, 0);
  /* at most 64 deep */
  int pushed = 0;
  while (dv_memory_scope_push(g_ctx) == DV_OK) pushed++;
  assert_int_equal(pushed, 64);
  assert_non_null(strstr(dv_last_error(), "64"));
  while (pushed--) assert_ok(dv_memory_scope_pop(g_ctx, NULL));
  assert_status(dv_memory_scope_pop(g_ctx, NULL), DV_ERR_INVALID_ARGUMENT);
}

/* ---- the out-of-memory handler (the host simulator's capacity) ---- */
typedef struct spill {
  dv_array *held;
  int calls, retry;
} spill;

static int on_oom(dv_context *ctx, size_t bytes, int attempt, void *user) {
  (void)ctx;
  spill *s = user;
  s->calls++;
  assert_int_equal(attempt, s->calls);
  assert_true(bytes >= 10u << 20);
  if (s->held) {
    dv_array_release(s->held); /* spill: the handler lets go of what it holds */
    s->held = NULL;
    return 1;
  }
  return s->retry;
}

static void test_oom_handler(void **state) {
  (void)state;
  dv_context *c;
  assert_ok(test_context(&c, "host_memory=16M", NULL));
  if (strncmp(dv_context_backend(c), "host", 4) != 0) { /* needs a device of known, small capacity */
    dv_context_destroy(c);
    skip();
  }
  int64_t n = 10 << 20;
  spill s = {0};
  assert_ok(dv_device_array(c, 1, &n, dv_dtype_get(DV_UINT8), NULL, 'C', NULL, &s.held));
  assert_status(dv_memory_set_oom_handler(c, on_oom, &s, 0), DV_ERR_INVALID_ARGUMENT);
  assert_status(dv_memory_set_oom_handler(c, on_oom, &s, 1001), DV_ERR_INVALID_ARGUMENT);
  assert_ok(dv_memory_set_oom_handler(c, on_oom, &s, 3));
  /* the handler spills what it holds and asks for a retry: it succeeds */
  dv_array *b = NULL;
  assert_ok(dv_device_array(c, 1, &n, dv_dtype_get(DV_UINT8), NULL, 'C', NULL, &b));
  assert_int_equal(s.calls, 1);
  assert_null(s.held);
  /* nothing left to spill, retry asked: at most 3 calls, then the usual status */
  s.calls = 0;
  s.retry = 1;
  dv_array *x = NULL;
  assert_status(dv_device_array(c, 1, &n, dv_dtype_get(DV_UINT8), NULL, 'C', NULL, &x), DV_ERR_OUT_OF_MEMORY);
  assert_null(x);
  assert_int_equal(s.calls, 3);
  assert_non_null(strstr(dv_last_error(), "the out-of-memory handler was asked 3 times"));
  /* giving up at once: one call */
  s.calls = 0;
  s.retry = 0;
  assert_status(dv_device_array(c, 1, &n, dv_dtype_get(DV_UINT8), NULL, 'C', NULL, &x), DV_ERR_OUT_OF_MEMORY);
  assert_int_equal(s.calls, 1);
  assert_non_null(strstr(dv_last_error(), "asked 1 time)"));
  /* removed: no call */
  assert_ok(dv_memory_set_oom_handler(c, NULL, NULL, 0));
  s.calls = 0;
  assert_status(dv_device_array(c, 1, &n, dv_dtype_get(DV_UINT8), NULL, 'C', NULL, &x), DV_ERR_OUT_OF_MEMORY);
  assert_int_equal(s.calls, 0);
  assert_null(strstr(dv_last_error(), "handler"));
  dv_array_release(b);
  assert_ok(dv_context_destroy(c));
}

/* Every host allocation of a hook's installation and a scope's push
 * failed in turn: the right status, nothing installed, nothing leaked. */
static void test_fault_sweep(void **state) {
  (void)state;
  recorder r = {0};
  int done = 0;
  for (uint64_t k = 1; k < 50 && !done; k++) {
    dv_fault_inject(NULL, DV_FAULT_HOST_ALLOC, k);
    int id = 0;
    dv_status rc = dv_memory_hook_add(g_ctx, record, &r, &id);
    dv_fault_inject(NULL, DV_FAULT_HOST_ALLOC, 0);
    if (rc == DV_OK) {
      assert_ok(dv_memory_hook_remove(g_ctx, id));
      done = 1;
    } else {
      assert_int_equal(rc, DV_ERR_HOST_OUT_OF_MEMORY);
      assert_int_equal(id, 0);
      dv_array_release(dev_f32(4));
      assert_int_equal(r.n, 0); /* nothing was installed */
    }
  }
  assert_true(done);
  done = 0;
  for (uint64_t k = 1; k < 50 && !done; k++) {
    dv_fault_inject(NULL, DV_FAULT_HOST_ALLOC, k);
    dv_status rc = dv_memory_scope_push(g_ctx);
    dv_fault_inject(NULL, DV_FAULT_HOST_ALLOC, 0);
    if (rc == DV_OK) {
      assert_ok(dv_memory_scope_pop(g_ctx, NULL));
      done = 1;
    } else {
      assert_int_equal(rc, DV_ERR_HOST_OUT_OF_MEMORY);
      assert_status(dv_memory_scope_pop(g_ctx, NULL), DV_ERR_INVALID_ARGUMENT);
    }
  }
  assert_true(done);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {T(test_hook_device_events), T(test_hook_stream_and_order), T(test_hook_host_memory),
                                     T(test_hook_reentry),       T(test_scopes_nested),         T(test_oom_handler),
                                     T(test_fault_sweep)};
  return test_main(argc, argv, "memhooks", tests, sizeof tests / sizeof tests[0]);
}
