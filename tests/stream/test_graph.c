#define _DEFAULT_SOURCE
/*
 * Graphs (issue 40 item 1): capture a stream's work, instantiate, launch it
 * again and again, on every backend (the host simulator and OpenCL through
 * the shared recorder; CUDA and HIP through the drivers' stream capture, on
 * their test doubles).  What is captured runs at each launch with the
 * memory's contents then, not at capture; the graph keeps what it uses
 * alive; what cannot be captured is refused before anything is recorded and
 * the capture goes on; a fault sweep fails every host allocation in turn
 * (and, on the doubles, every graph entry point of the driver).
 */
#include <dlfcn.h>
#include <string.h>

#include "common.h"

static char g_cache_dir[256];

static dv_array *dev_f32(int64_t n) {
  dv_array *d = NULL;
  assert_ok(dv_device_array(g_ctx, 1, &n, dv_dtype_get(DV_FLOAT32), NULL, 'C', NULL, &d));
  return d;
}

static dv_array *pinned_f32(int64_t n) {
  dv_array *p = NULL;
  assert_ok(dv_pinned_array(g_ctx, 1, &n, dv_dtype_get(DV_FLOAT32), NULL, 'C', &p));
  return p;
}

static float *host_of(dv_array *p) {
  void *h = NULL;
  assert_ok(dv_array_host_data(p, &h));
  return h;
}

static void set_all(dv_array *p, int64_t n, float base) {
  float *h = host_of(p);
  for (int64_t i = 0; i < n; i++) h[i] = base + (float)i;
}

/* The work every launch redoes: zero B, copy A (device) into B, copy every
 * other element of B into the first half of C (a strided copy: the copy
 * kernel on CUDA and HIP), C into pinned memory P. */
enum { N = 64 };
typedef struct work {
  dv_array *in, *a, *b, *c, *out, *b2, *c2;
} work;

static void work_make(work *w) {
  w->in = pinned_f32(N);
  w->out = pinned_f32(N / 2);
  w->a = dev_f32(N);
  w->b = dev_f32(N);
  w->c = dev_f32(N / 2);
  dv_index every_other = DV_SLICE(DV_NONE, DV_NONE, 2);
  assert_ok(dv_array_slice(w->b, 1, &every_other, &w->b2));
  w->c2 = dv_array_retain(w->c);
}

static void work_queue(work *w, dv_stream *s) {
  assert_ok(dv_copy_to_device(w->a, w->in, s));
  assert_ok(dv_array_memset(w->b, 0, s));
  assert_ok(dv_array_copy(w->b, w->a, s));
  assert_ok(dv_array_copy(w->c2, w->b2, s));
  assert_ok(dv_copy_to_host(w->c, w->out, s, NULL));
}

static void work_expect(work *w, float base) {
  const float *o = host_of(w->out);
  for (int i = 0; i < N / 2; i++)
    if (o[i] != base + (float)(2 * i)) fail_msg("out[%d] = %g, expected %g", i, o[i], base + 2 * i);
}

static void work_free(work *w) {
  dv_array *all[] = {w->in, w->a, w->b, w->c, w->out, w->b2, w->c2};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) dv_array_release(all[i]);
}

/* Captured work does not run at capture; each launch runs it with the
 * memory's contents then; on a stream, on another stream, synchronously. */
static void test_replay_copies(void **state) {
  (void)state;
  work w;
  work_make(&w);
  set_all(w.in, N, 1000);
  set_all(w.out, N / 2, -1);
  dv_stream *s = NULL, *t = NULL;
  assert_ok(dv_stream_create(g_ctx, 0, &s));
  assert_ok(dv_stream_create(g_ctx, 0, &t));
  assert_ok(dv_graph_capture_begin(s));
  work_queue(&w, s);
  dv_graph *g = NULL;
  assert_ok(dv_graph_capture_end(s, &g));
  size_t n = 0;
  assert_ok(dv_graph_work_count(g, &n));
  assert_int_equal(n, 5);
  assert_ok(dv_stream_synchronize(s));
  assert_true(host_of(w.out)[0] == -1.0f); /* nothing ran */
  dv_graph_exec *e = NULL;
  assert_ok(dv_graph_instantiate(g, &e));
  assert_ok(dv_graph_release(g)); /* the executable holds the graph */
  assert_status(dv_context_destroy(g_ctx), DV_ERR_BUSY); /* while it lives */
  assert_true(strstr(dv_last_error(), "1 graph(s)") != NULL);
  for (int round = 0; round < 3; round++) {
    set_all(w.in, N, (float)(10 * round));
    assert_ok(dv_graph_launch(e, round == 1 ? t : s));
    assert_ok(dv_stream_synchronize(round == 1 ? t : s));
    work_expect(&w, (float)(10 * round));
  }
  set_all(w.in, N, 77);
  assert_ok(dv_graph_launch(e, NULL)); /* synchronous */
  work_expect(&w, 77);
  /* the stream works as before after the capture */
  set_all(w.in, N, 5);
  work_queue(&w, s);
  assert_ok(dv_stream_synchronize(s));
  work_expect(&w, 5);
  assert_ok(dv_graph_exec_destroy(e));
  dv_stream_release(s);
  dv_stream_release(t);
  work_free(&w);
}

/* Releasing arrays during and after the capture frees nothing the graph
 * uses; the memory goes with the graph. */
static void test_graph_keeps_memory(void **state) {
  (void)state;
  work w;
  work_make(&w);
  dv_stream *s = NULL;
  assert_ok(dv_stream_create(g_ctx, 0, &s));
  dv_stats m0 = {.size = sizeof m0};
  assert_ok(dv_context_flush_deallocs(g_ctx));
  assert_ok(dv_context_stats(g_ctx, &m0));
  assert_ok(dv_graph_capture_begin(s));
  work_queue(&w, s);
  /* every array released while the capture goes on, the host ones too */
  dv_array *out = dv_array_retain(w.out), *in = dv_array_retain(w.in);
  work_free(&w);
  dv_graph *g = NULL;
  assert_ok(dv_graph_capture_end(s, &g));
  assert_ok(dv_context_flush_deallocs(g_ctx));
  dv_stats m1 = {.size = sizeof m1};
  assert_ok(dv_context_stats(g_ctx, &m1));
  assert_true(m1.device.current >= m0.device.current); /* still held */
  dv_graph_exec *e = NULL;
  assert_ok(dv_graph_instantiate(g, &e));
  set_all(in, N, 300);
  assert_ok(dv_graph_launch(e, s));
  assert_ok(dv_stream_synchronize(s));
  w.out = out;
  work_expect(&w, 300);
  assert_ok(dv_graph_exec_destroy(e));
  assert_ok(dv_graph_release(g));
  assert_ok(dv_context_flush_deallocs(g_ctx));
  dv_stats m2 = {.size = sizeof m2};
  assert_ok(dv_context_stats(g_ctx, &m2));
  assert_true(m2.device.current <= m1.device.current);
  dv_array_release(out);
  dv_array_release(in);
  dv_stream_release(s);
}

/* HIP before ROCm 5.3 has no capturable host functions (hipLaunchHostFunc):
 * a callback in a capture is refused there (DV_ERR_NOT_SUPPORTED). */
static bool host_fns_capturable(void) {
  dv_device_info info;
  if (dv_context_device_info(g_ctx, &info) != DV_OK) return true;
  int major = 0, minor = 0;
  if (sscanf(info.driver_version, "HIP runtime %d.%d", &major, &minor) != 2) return true;
  return major > 5 || (major == 5 && minor >= 3);
}

static int g_calls;
static void count_cb(dv_stream *s, dv_status st, void *user) {
  (void)s;
  assert_int_equal(st, DV_OK);
  __atomic_add_fetch((int *)user, 1, __ATOMIC_SEQ_CST);
}

/* Host callbacks become host nodes (run at each launch); event records are
 * replayed; the graph keeps its event. */
static void test_callbacks_and_events(void **state) {
  (void)state;
  work w;
  work_make(&w);
  dv_stream *s = NULL;
  dv_event *ev = NULL;
  assert_ok(dv_stream_create(g_ctx, 0, &s));
  assert_ok(dv_event_create(g_ctx, 0, &ev));
  g_calls = 0;
  bool fns = host_fns_capturable();
  assert_ok(dv_graph_capture_begin(s));
  work_queue(&w, s);
  if (fns)
    assert_ok(dv_stream_add_callback(s, count_cb, &g_calls));
  else /* refused, and the capture goes on */
    assert_status(dv_stream_add_callback(s, count_cb, &g_calls), DV_ERR_NOT_SUPPORTED);
  assert_ok(dv_event_record(ev, s));
  dv_graph *g = NULL;
  assert_ok(dv_graph_capture_end(s, &g));
  size_t n = 0;
  assert_ok(dv_graph_work_count(g, &n));
  assert_int_equal(n, fns ? 7 : 6);
  assert_int_equal(__atomic_load_n(&g_calls, __ATOMIC_SEQ_CST), 0);
  dv_graph_exec *e = NULL;
  assert_ok(dv_graph_instantiate(g, &e));
  for (int i = 0; i < 3; i++) {
    set_all(w.in, N, (float)i); /* the launch before has read it (synchronized below) */
    assert_ok(dv_graph_launch(e, s));
    assert_ok(dv_stream_synchronize(s));
  }
  assert_int_equal(__atomic_load_n(&g_calls, __ATOMIC_SEQ_CST), fns ? 3 : 0);
  assert_ok(dv_event_query(ev)); /* the graph's record of it ran */
  dv_event_release(ev);            /* the graph keeps it for the next launch */
  set_all(w.in, N, 9);
  assert_ok(dv_graph_launch(e, s));
  assert_ok(dv_stream_synchronize(s));
  work_expect(&w, 9);
  assert_ok(dv_graph_exec_destroy(e));
  assert_ok(dv_graph_release(g));
  dv_stream_release(s);
  work_free(&w);
}

/* Everything that cannot be captured is refused, nothing is recorded, and
 * the capture goes on to a graph of the rest. */
static void test_refusals(void **state) {
  (void)state;
  work w;
  work_make(&w);
  dv_stream *s = NULL, *t = NULL;
  assert_ok(dv_stream_create(g_ctx, 0, &s));
  assert_ok(dv_stream_create(g_ctx, 0, &t));
  int64_t n = N;
  float buf[N];
  dv_array *pageable = NULL;
  assert_ok(dv_host_array_wrap(g_ctx, buf, 1, &n, dv_dtype_get(DV_FLOAT32), NULL, &pageable));
  dv_event *ev = NULL;
  assert_ok(dv_event_create(g_ctx, 0, &ev));
  assert_status(dv_graph_capture_begin(NULL), DV_ERR_NULL_ARGUMENT);
  assert_status(dv_graph_capture_begin(dv_context_legacy_stream(g_ctx)), DV_ERR_INVALID_ARGUMENT);
  assert_status(dv_graph_capture_end(s, &(dv_graph *){NULL}), DV_ERR_MISUSE); /* not capturing */
  assert_ok(dv_graph_capture_begin(s));
  assert_status(dv_graph_capture_begin(s), DV_ERR_MISUSE);
  assert_ok(dv_copy_to_device(w.a, w.in, s));
  assert_status(dv_stream_synchronize(s), DV_ERR_MISUSE);
  assert_status(dv_stream_query(s), DV_ERR_MISUSE);
  assert_status(dv_copy_to_device(w.a, pageable, s), DV_ERR_MISUSE);
  assert_true(strstr(dv_last_error(), "pageable") != NULL);
  assert_status(dv_stream_wait_event(s, ev), DV_ERR_NOT_SUPPORTED);
  float one = 0;
  int64_t idx = 3;
  assert_status(dv_array_get_item(w.a, &idx, &one, sizeof one, s), DV_ERR_MISUSE);
  /* an allocation for the capturing stream: real memory from the pool or the
   * driver, never the graph's; the async manager's would be the graph's */
  dv_array *fresh = NULL;
  int64_t four = 4;
  dv_status ar = dv_device_array(g_ctx, 1, &four, dv_dtype_get(DV_FLOAT32), NULL, 'C', s, &fresh);
  if (!strcmp(dv_memory_manager_name(g_ctx), "async")) {
    assert_int_equal(ar, DV_ERR_MISUSE);
    assert_true(strstr(dv_last_error(), "async manager") != NULL);
  } else {
    assert_ok(ar);
  }
  dv_array_release(fresh);
  /* a graph is not launched into a capture */
  dv_graph *g0 = NULL;
  dv_graph_exec *e0 = NULL;
  assert_ok(dv_graph_capture_begin(t));
  assert_ok(dv_graph_capture_end(t, &g0));
  assert_ok(dv_graph_instantiate(g0, &e0));
  assert_status(dv_graph_launch(e0, s), DV_ERR_MISUSE);
  assert_ok(dv_graph_launch(e0, t)); /* an empty graph launches */
  /* the capture went on: the rest of the work, and a graph of all of it */
  assert_ok(dv_array_memset(w.b, 0, s));
  assert_ok(dv_array_copy(w.b, w.a, s));
  assert_ok(dv_array_copy(w.c2, w.b2, s));
  assert_ok(dv_copy_to_host(w.c, w.out, s, NULL));
  dv_graph *g = NULL;
  assert_ok(dv_graph_capture_end(s, &g));
  size_t count = 0;
  assert_ok(dv_graph_work_count(g, &count));
  assert_int_equal(count, 5);
  dv_graph_exec *e = NULL;
  assert_ok(dv_graph_instantiate(g, &e));
  set_all(w.in, N, 40);
  assert_ok(dv_graph_launch(e, s));
  assert_ok(dv_stream_synchronize(s));
  work_expect(&w, 40);
  /* bad arguments */
  assert_status(dv_graph_launch(NULL, s), DV_ERR_NULL_ARGUMENT);
  dv_graph_exec *none = NULL;
  assert_status(dv_graph_instantiate(NULL, &none), DV_ERR_NULL_ARGUMENT);
  assert_status(dv_graph_work_count(NULL, &count), DV_ERR_NULL_ARGUMENT);
  assert_ok(dv_graph_release(NULL));
  assert_ok(dv_graph_exec_destroy(NULL));
  assert_ok(dv_graph_exec_destroy(e0));
  assert_ok(dv_graph_release(g0));
  assert_ok(dv_graph_exec_destroy(e));
  assert_ok(dv_graph_release(g));
  dv_event_release(ev);
  dv_array_release(pageable);
  dv_stream_release(s);
  dv_stream_release(t);
  work_free(&w);
}

/* A stream released while it captures: the capture and what it kept go. */
static void test_release_while_capturing(void **state) {
  (void)state;
  work w;
  work_make(&w);
  dv_stream *s = NULL;
  assert_ok(dv_stream_create(g_ctx, 0, &s));
  assert_ok(dv_graph_capture_begin(s));
  work_queue(&w, s);
  dv_stream_release(s);
  work_free(&w);
  assert_ok(dv_context_flush_deallocs(g_ctx));
}

/* A kernel launch replayed: each launch adds one (where kernels run). */
static void test_replay_kernel(void **state) {
  (void)state;
  NEEDS_EXECUTION();
  dv_module *m = test_build(g_ctx, "graph_inc",
                            "DV_KERNEL(inc, DV_ARRAY(int, x), int n) {\n"
                            "  DV_BIND(int, x);\n"
                            "  int i = dv_block_idx(0) * dv_block_dim(0) + dv_thread_idx(0);\n"
                            "  if (i < n) x[i] += 1;\n"
                            "}\n",
                            NULL, NULL);
  int64_t n = 100;
  dv_array *x = NULL, *h = NULL;
  assert_ok(dv_device_array(g_ctx, 1, &n, dv_dtype_get(DV_INT32), NULL, 'C', NULL, &x));
  assert_ok(dv_pinned_array(g_ctx, 1, &n, dv_dtype_get(DV_INT32), NULL, 'C', &h));
  assert_ok(dv_array_memset(x, 0, NULL));
  dv_stream *s = NULL;
  assert_ok(dv_stream_create(g_ctx, 0, &s));
  dv_launch_config cfg = {{4, 1, 1}, {32, 1, 1}, 0, s};
  dv_arg args[2] = {DV_ARG_ARRAY(x), DV_ARG_I32(100)};
  assert_ok(dv_graph_capture_begin(s));
  assert_ok(dv_kernel_launch(test_kernel(m, "inc"), &cfg, 2, args));
  assert_ok(dv_kernel_launch(test_kernel(m, "inc"), &cfg, 2, args));
  dv_graph *g = NULL;
  assert_ok(dv_graph_capture_end(s, &g));
  dv_module_release(m); /* the graph keeps the module loaded */
  dv_graph_exec *e = NULL;
  assert_ok(dv_graph_instantiate(g, &e));
  for (int i = 0; i < 5; i++) assert_ok(dv_graph_launch(e, s));
  assert_ok(dv_copy_to_host(x, h, s, NULL));
  assert_ok(dv_stream_synchronize(s));
  void *hp = NULL;
  assert_ok(dv_array_host_data(h, &hp));
  for (int i = 0; i < 100; i++) assert_int_equal(((int *)hp)[i], 10);
  assert_ok(dv_graph_exec_destroy(e));
  assert_ok(dv_graph_release(g));
  dv_array_release(x);
  dv_array_release(h);
  dv_stream_release(s);
}

/* One round of everything, for the fault sweep: any failure is a clean
 * status, and what was made goes. */
static dv_status one_round(work *w, dv_stream *s, int *ok) {
  *ok = 0;
  dv_status rc = dv_graph_capture_begin(s);
  if (rc) return rc;
  dv_status first = DV_OK;
  dv_status r;
  if ((r = dv_copy_to_device(w->a, w->in, s)) && !first) first = r;
  if ((r = dv_array_copy(w->c2, w->b2, s)) && !first) first = r;
  if (host_fns_capturable() && (r = dv_stream_add_callback(s, count_cb, &g_calls)) && !first) first = r;
  if ((r = dv_copy_to_host(w->c, w->out, s, NULL)) && !first) first = r;
  dv_graph *g = NULL;
  rc = dv_graph_capture_end(s, &g);
  if (rc) return rc;
  dv_graph_exec *e = NULL;
  rc = dv_graph_instantiate(g, &e);
  if (!rc) rc = dv_graph_launch(e, s);
  if (!rc) rc = dv_stream_synchronize(s);
  if (e && (r = dv_graph_exec_destroy(e)) && !rc) rc = r;
  if ((r = dv_graph_release(g)) && !rc) rc = r;
  if (!rc && !first) *ok = 1;
  return rc ? rc : first;
}

static void sweep_host_allocs(void) {
  work w;
  work_make(&w);
  dv_stream *s = NULL;
  assert_ok(dv_stream_create(g_ctx, 0, &s));
  int k;
  for (k = 1; k < 400; k++) {
    assert_ok(dv_fault_inject(g_ctx, DV_FAULT_HOST_ALLOC, (uint64_t)k));
    int ok = 0;
    dv_status rc = one_round(&w, s, &ok);
    int fired = !dv_fault_pending(g_ctx, DV_FAULT_HOST_ALLOC);
    assert_ok(dv_fault_inject(g_ctx, DV_FAULT_HOST_ALLOC, 0));
    dv_stream_synchronize(s);
    if (!fired) {
      assert_ok(rc);
      break;
    }
    if (rc && rc != DV_ERR_HOST_OUT_OF_MEMORY && rc != DV_ERR_DRIVER)
      fail_msg("host allocation %d failed: %s (%s)", k, dv_status_name(rc), dv_last_error());
  }
  assert_true(k > 1 && k < 400);
  dv_stream_release(s);
  work_free(&w);
}

/* The driver doubles' fail points (tests/backends/cuda/cudadouble). */
typedef void (*fail_fn)(const char *, long, int);
static fail_fn double_fail(void) {
  if (!test_on_cuda_double(g_ctx)) return NULL;
  void *h = dlopen(NULL, RTLD_NOW);
  fail_fn f = h ? (fail_fn)dlsym(RTLD_DEFAULT, "dvdouble_fail") : NULL;
  if (h) dlclose(h);
  return f;
}

static void test_fault_sweep(void **state) {
  (void)state;
  sweep_host_allocs();
  fail_fn f = double_fail();
  if (!f) return;
  static const char *const points[] = {"cuStreamBeginCapture", "cuStreamEndCapture",
                                       "cuGraphInstantiate",   "cuGraphLaunch",
                                       "cuGraphExecDestroy",   "cuGraphDestroy"};
  work w;
  work_make(&w);
  dv_stream *s = NULL;
  assert_ok(dv_stream_create(g_ctx, 0, &s));
  for (size_t i = 0; i < sizeof points / sizeof points[0]; i++) {
    f(points[i], 1, 999 /* CUDA_ERROR_UNKNOWN */);
    int ok = 1;
    dv_status rc = one_round(&w, s, &ok);
    f(points[i], 0, 0);
    dv_stream_synchronize(s);
    if (rc != DV_ERR_DRIVER)
      fail_msg("%s failed: %s (%s)", points[i], dv_status_name(rc), dv_last_error());
    assert_true(strstr(dv_last_error(), "Graph") || strstr(dv_last_error(), "Capture") ||
                strstr(dv_last_error(), "graph") || strstr(dv_last_error(), "capture"));
  }
  int ok = 0;
  assert_ok(one_round(&w, s, &ok)); /* and then it works */
  assert_true(ok);
  dv_stream_release(s);
  work_free(&w);
}

int main(int argc, char **argv) {
  /* kernels only where they run: a CUDA or HIP double (or a machine without
   * NVRTC) still runs every other test */
  bool doubles = argc > 1 && (!strncmp(argv[1], "cuda", 4) || !strncmp(argv[1], "hip", 3));
  int begin =
      doubles ? 0 : kernel_suite_begin(argc, argv, "graph", NULL, g_cache_dir, sizeof g_cache_dir);
  if (begin) return begin;
  const struct CMUnitTest tests[] = {
      T(test_replay_copies), T(test_graph_keeps_memory),      T(test_callbacks_and_events),
      T(test_refusals),      T(test_release_while_capturing), T(test_replay_kernel),
      T(test_fault_sweep),
  };
  int rc = test_main(argc, argv, "graph", tests, sizeof tests / sizeof tests[0]);
  return doubles ? rc : kernel_suite_end(g_cache_dir, rc);
}
