/*
 * The host simulator's kernels (src/backends/host/host_kernel.c and its files): kernels
 * really run, blocks in parallel, threads of a block as fibers with real
 * barriers; and the checks a GPU does not make: divergent barriers, shared
 * memory redzones, dynamic shared memory bounds, local and global
 * out-of-bounds writes, faults that do not take the process down.
 *
 * Through the public API (dv_program_*, dv_kernel_launch), plus a few
 * white-box checks through the backend table.  Each test names what would
 * break it.
 *
 * CTest runs the suite in both of the simulator's modes (host_kernels with
 * DV_HOST_MODE=checked, host_kernels.host-fast with fast).  Tests of checked
 * mode's checks (divergence, redzones, bounds and guards, faults and stack
 * overflows named by thread) make their contexts with host_mode=checked.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <pthread.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common.h"
#include "array/array.h"
#include "backends/backend.h"
#include "backends/host/exec/exec_internal.h" /* hk_test_fault */
#include "core/core.h"

#if defined(__SANITIZE_ADDRESS__)
#define HK_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HK_TEST_ASAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define HK_TEST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define HK_TEST_TSAN 1
#endif
#endif

/* ---- helpers ------------------------------------------------------------- */

static dv_kernel *kernel_of(dv_module *m, const char *name) {
  dv_kernel *k = NULL;
  assert_ok(dv_module_kernel(m, name, &k));
  return k;
}

static dv_array *dev_from(dv_context *c, const void *host, int64_t n, dv_type_id t) {
  dv_array *h = NULL, *d = NULL;
  assert_ok(dv_host_array_wrap(c, (void *)host, 1, &n, dv_dtype_get(t), NULL, &h));
  assert_ok(dv_to_device(c, h, NULL, 1, NULL, &d));
  dv_array_release(h);
  return d;
}

static dv_array *dev_new(dv_context *c, int64_t n, dv_type_id t) {
  dv_array *d = NULL;
  assert_ok(dv_device_array(c, 1, &n, dv_dtype_get(t), NULL, 'C', NULL, &d));
  return d;
}

static void to_host(const dv_array *d, void *host, int64_t n, dv_type_id t) {
  dv_array *h = NULL;
  assert_ok(dv_host_array_wrap(d->alloc->ctx, host, 1, &n, dv_dtype_get(t), NULL, &h));
  assert_ok(dv_copy_to_host(d, h, NULL, NULL));
  dv_array_release(h);
}

static dv_launch_config cfg1(uint32_t grid, uint32_t block, size_t dyn, dv_stream *s) {
  dv_launch_config c;
  memset(&c, 0, sizeof c);
  c.grid.x = grid;
  c.block.x = block;
  c.dynamic_shared = dyn;
  c.stream = s;
  return c;
}

static void assert_contains(const char *hay, const char *needle) {
  if (!strstr(hay, needle)) fail_msg("expected \"%s\" in: %s", needle, hay);
}

static void finish(dv_context *c, dv_module *m) {
  dv_module_release(m);
  assert_ok(dv_context_check_memory(c));
  assert_ok(dv_context_destroy(c));
}

/* ---- elementwise (no barrier: threads run one after the other) ---------- */

static const char *src_saxpy =
    "DV_KERNEL(saxpy, DV_ARRAY(float, y), DV_ARRAY(const float, x), float a, int n) {\n"
    "  DV_BIND(float, y); DV_BIND(const float, x);\n"
    "  dv_i64 i = dv_global_id(0);\n"
    "  if (i < n) y[i] = a * x[i] + y[i];\n"
    "}\n";

static void test_saxpy_many_blocks(void **state) {
  (void)state;
  dv_context *c = test_context_or_fail("kernel_cache=off", NULL);
  dv_module *m = test_build(c, "saxpy.dvk", src_saxpy, NULL, NULL);
  dv_kernel *k = kernel_of(m, "saxpy");
  enum { N = 10000 };
  static float x[N], y[N], r[N];
  for (int i = 0; i < N; i++) x[i] = (float)i, y[i] = 1.0f;
  dv_array *dx = dev_from(c, x, N, DV_FLOAT32), *dy = dev_from(c, y, N, DV_FLOAT32);
  dv_launch_config lc = cfg1((N + 127) / 128, 128, 0, NULL);
  dv_arg args[] = {DV_ARG_ARRAY(dy), DV_ARG_ARRAY(dx), DV_ARG_F32(2.0f), DV_ARG_I32(N)};
  assert_ok(dv_kernel_launch(k, &lc, 4, args));
  to_host(dy, r, N, DV_FLOAT32);
  for (int i = 0; i < N; i++)
    if (r[i] != 2.0f * (float)i + 1.0f) fail_msg("y[%d] = %g", i, (double)r[i]);
  dv_array_release(dx);
  dv_array_release(dy);
  finish(c, m);
}

/* ---- barriers: the tiled matrix multiply (Numba's fast_matmul) ----------- */

/* tests/kernels/matmul.dvk: matmul_tiled, 16 x 16 tiles. */

static void run_matmul(dv_context *c, dv_kernel *k, int n) {
  size_t nn = (size_t)n * (size_t)n;
  float *a = malloc(nn * 4), *b = malloc(nn * 4), *r = malloc(nn * 4);
  assert_non_null(a);
  assert_non_null(b);
  assert_non_null(r);
  for (size_t i = 0; i < nn; i++) a[i] = (float)(i % 7) - 3.0f, b[i] = (float)(i % 5) * 0.5f;
  dv_array *da = dev_from(c, a, (int64_t)nn, DV_FLOAT32), *db = dev_from(c, b, (int64_t)nn, DV_FLOAT32);
  dv_array *dc = dev_new(c, (int64_t)nn, DV_FLOAT32);
  dv_launch_config lc;
  memset(&lc, 0, sizeof lc);
  lc.grid = (dv_dim3){(uint32_t)(n + 15) / 16, (uint32_t)(n + 15) / 16, 1};
  lc.block = (dv_dim3){16, 16, 1};
  dv_arg args[] = {DV_ARG_ARRAY(da), DV_ARG_ARRAY(db), DV_ARG_ARRAY(dc), DV_ARG_I32(n)};
  assert_ok(dv_kernel_launch(k, &lc, 4, args));
  to_host(dc, r, (int64_t)nn, DV_FLOAT32);
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) {
      double s = 0;
      for (int q = 0; q < n; q++) s += (double)a[i * n + q] * b[q * n + j];
      if (fabs(s - r[i * n + j]) > 1e-3 * (1 + fabs(s)))
        fail_msg("n=%d C[%d][%d] = %g, expected %g", n, i, j, (double)r[i * n + j], s);
    }
  dv_array_release(da);
  dv_array_release(db);
  dv_array_release(dc);
  free(a), free(b), free(r);
}

static void test_matmul_tiled(void **state) {
  (void)state;
  dv_context *c = test_context_or_fail("kernel_cache=off", NULL);
  dv_module *m = test_build(c, "matmul.dvk", NULL, NULL, NULL);
  dv_kernel *k = kernel_of(m, "matmul_tiled");
  run_matmul(c, k, 16);
  run_matmul(c, k, 70); /* not a multiple of the tile */
#if !defined(HK_TEST_ASAN) && !defined(HK_TEST_TSAN)
  run_matmul(c, k, 128);
#endif
  finish(c, m);
}

/* A barrier is needed: without it the reversal reads poison (0xDF). */
static const char *src_reverse =
    "DV_KERNEL(reverse, DV_ARRAY(int, a)) {\n"
    "  DV_BIND(int, a);\n"
    "  DV_SHARED(int, s, 256);\n"
    "  int t = dv_thread_idx(0), n = dv_block_dim(0);\n"
    "  dv_i64 base = (dv_i64)dv_block_idx(0) * n;\n"
    "  s[t] = a[base + t];\n"
    "#ifndef NO_SYNC\n"
    "  dv_syncthreads();\n"
    "#endif\n"
    "  a[base + t] = s[n - 1 - t];\n"
    "}\n";

static int reverse_wrong(dv_context *c, const char *opts) {
  dv_module *m = test_build(c, "reverse.dvk", src_reverse, opts, NULL);
  dv_kernel *k = kernel_of(m, "reverse");
  enum { B = 3, T = 256 };
  int h[B * T], r[B * T];
  for (int i = 0; i < B * T; i++) h[i] = i * 3 + 1;
  dv_array *d = dev_from(c, h, B * T, DV_INT32);
  dv_launch_config lc = cfg1(B, T, 0, NULL);
  dv_arg args[] = {DV_ARG_ARRAY(d)};
  assert_ok(dv_kernel_launch(k, &lc, 1, args));
  to_host(d, r, B * T, DV_INT32);
  int wrong = 0;
  for (int b = 0; b < B; b++)
    for (int t = 0; t < T; t++) wrong += r[b * T + t] != h[b * T + (T - 1 - t)];
  dv_array_release(d);
  dv_module_release(m);
  return wrong;
}

static void test_barrier_is_needed(void **state) {
  (void)state;
  dv_context *c = test_context_or_fail("kernel_cache=off", "kernel_check=bounds", NULL);
  assert_int_equal(reverse_wrong(c, NULL), 0);
  /* The same kernel without its barrier must give wrong results here... */
  assert_true(reverse_wrong(c, "-DNO_SYNC") > 0);
  finish(c, NULL);
  /* ...and with the access checks it is reported at the first read. */
  c = test_context_or_fail("kernel_cache=off", "kernel_check=on", NULL);
  dv_module *m = test_build(c, "reverse.dvk", src_reverse, "-DNO_SYNC", NULL);
  int h[256] = {0};
  dv_array *d = dev_from(c, h, 256, DV_INT32);
  dv_launch_config lc = cfg1(1, 256, 0, NULL);
  dv_arg args[] = {DV_ARG_ARRAY(d)};
  assert_status(dv_kernel_launch(kernel_of(m, "reverse"), &lc, 1, args), DV_ERR_KERNEL_FAULT);
  /* thread 127 read s[128] before thread 128 wrote it, no barrier between */
  assert_contains(dv_last_error(), "kernel reverse: read-write race on shared array 's' element "
                                   "128: thread (128,0,0) of block (0,0,0) wrote it at reverse.dvk:");
  assert_contains(dv_last_error(), "thread (127,0,0) of block (0,0,0) read it at reverse.dvk:");
  dv_array_release(d);
  finish(c, m);
}

/* ---- dynamic shared memory ------------------------------------------------ */

static const char *src_dyn =
    "DV_KERNEL(dynrev, DV_ARRAY(int, a), int count) {\n"
    "  DV_BIND(int, a);\n"
    "  DV_DYN_SHARED_BEGIN();\n"
    "  DV_DYN_SHARED_TAKE(int, buf, count);\n"
    "  int t = dv_thread_idx(0), n = dv_block_dim(0);\n"
    "  if (count == 0) { a[t] = -1; return; }\n"
    "  buf[t] = a[t];\n"
    "  dv_syncthreads();\n"
    "  a[t] = buf[n - 1 - t];\n"
    "}\n";

static void test_dynamic_shared_sizes(void **state) {
  (void)state;
  dv_context *c = test_context_or_fail("kernel_cache=off", NULL);
  dv_module *m = test_build(c, "dyn.dvk", src_dyn, NULL, NULL);
  dv_kernel *k = kernel_of(m, "dynrev");
  static int h[1024], r[1024];
  dv_array *d = dev_new(c, 1024, DV_INT32);
  /* 0, 16 and 4096 bytes: the same module, launches of different sizes. */
  const int threads[] = {1, 4, 1024};
  for (int q = 0; q < 3; q++) {
    int n = threads[q];
    int count = q == 0 ? 0 : n;
    for (int i = 0; i < n; i++) h[i] = 7 * i + 2;
    dv_array *hv = NULL;
    int64_t nn = n;
    assert_ok(dv_host_array_wrap(c, h, 1, &nn, dv_dtype_get(DV_INT32), NULL, &hv));
    dv_array *view = NULL;
    dv_index ix = DV_SLICE(0, n, 1);
    assert_ok(dv_array_slice(d, 1, &ix, &view));
    assert_ok(dv_copy_to_device(view, hv, NULL));
    dv_launch_config lc = cfg1(1, (uint32_t)n, (size_t)count * 4, NULL);
    dv_arg args[] = {DV_ARG_ARRAY(view), DV_ARG_I32(count)};
    assert_ok(dv_kernel_launch(k, &lc, 2, args));
    to_host(view, r, n, DV_INT32);
    for (int i = 0; i < n; i++)
      assert_int_equal(r[i], count ? h[n - 1 - i] : -1);
    dv_array_release(view);
    dv_array_release(hv);
  }
  /* Taking more than the launch gave is a fault naming the array. */
  dv_launch_config lc = cfg1(1, 64, 64 * 4 - 4, NULL);
  dv_arg args[] = {DV_ARG_ARRAY(d), DV_ARG_I32(64)};
  assert_status(dv_kernel_launch(k, &lc, 2, args), DV_ERR_KERNEL_FAULT);
  assert_contains(dv_last_error(), "kernel dynrev, block (0,0,0), thread (0,0,0)");
  assert_contains(dv_last_error(), "dynamic shared array buf (dyn.dvk:4)");
  assert_contains(dv_last_error(), "the launch gave 252 bytes");
  /* The stream goes on. */
  lc = cfg1(1, 64, 64 * 4, NULL);
  assert_ok(dv_kernel_launch(k, &lc, 2, args));
  dv_array_release(d);
  finish(c, m);
}

/* ---- local arrays ------------------------------------------------------------ */

static const char *src_local =
    "DV_KERNEL(local, DV_ARRAY(dv_i64, out)) {\n"
    "  DV_BIND(dv_i64, out);\n"
    "  int t = dv_thread_idx(0);\n"
    "  DV_LOCAL_ARRAY(dv_i64, v, 16);\n"
    "  for (int i = 0; i < 16; i++) v[i] = (dv_i64)t * 1000 + i;\n"
    "  dv_syncthreads(); /* every other thread runs in between */\n"
    "  dv_i64 s = 0;\n"
    "  for (int i = 0; i < 16; i++) s += v[i];\n"
    "  out[dv_global_id(0)] = s;\n"
    "}\n";

static void test_local_arrays_private(void **state) {
  (void)state;
  dv_context *c = test_context_or_fail("kernel_cache=off", NULL);
  dv_module *m = test_build(c, "local.dvk", src_local, NULL, NULL);
  dv_kernel *k = kernel_of(m, "local");
  enum { B = 2, T = 128 };
  int64_t r[B * T];
  dv_array *d = dev_new(c, B * T, DV_INT64);
  dv_launch_config lc = cfg1(B, T, 0, NULL);
  dv_arg args[] = {DV_ARG_ARRAY(d)};
  assert_ok(dv_kernel_launch(k, &lc, 1, args));
  to_host(d, r, B * T, DV_INT64);
  for (int g = 0; g < B * T; g++) assert_int_equal(r[g], (int64_t)(g % T) * 16000 + 120);
  dv_array_release(d);
  finish(c, m);
}

/* ---- divergent barriers --------------------------------------------------- */

static const char *src_div =
    "DV_KERNEL(early, DV_ARRAY(int, a)) {\n"
    "  DV_BIND(int, a);\n"
    "  int t = dv_thread_idx(0);\n"
    "  if (t >= 200) return;\n"
    "  dv_syncthreads();\n"
    "  a[t] = t;\n"
    "}\n"
    "DV_KERNEL(ifelse, DV_ARRAY(int, a)) {\n"
    "  DV_BIND(int, a);\n"
    "  int t = dv_thread_idx(0);\n"
    "  if (t < 128) dv_syncthreads(); else dv_syncthreads();\n"
    "  a[t] = t;\n"
    "}\n"
    "DV_KERNEL(loop, DV_ARRAY(int, a)) {\n"
    "  DV_BIND(int, a);\n"
    "  int t = dv_thread_idx(0);\n"
    "  for (int i = 0; i < 1 + (t & 1); i++)\n"
    "    dv_syncthreads();\n"
    "  a[t] = t;\n"
    "}\n"
    "DV_KERNEL(oneblock, DV_ARRAY(int, a)) {\n"
    "  DV_BIND(int, a);\n"
    "  int t = dv_thread_idx(0);\n"
    "  if (dv_block_idx(0) == 2 && t == 5) return;\n"
    "  dv_syncthreads();\n"
    "  a[dv_global_id(0)] = t;\n"
    "}\n";

static void launch_expect_fault(dv_kernel *k, dv_array *a, uint32_t grid, uint32_t block) {
  dv_launch_config lc = cfg1(grid, block, 0, NULL);
  dv_arg args[] = {DV_ARG_ARRAY(a)};
  assert_status(dv_kernel_launch(k, &lc, 1, args), DV_ERR_KERNEL_FAULT);
}

static void test_divergent_barriers(void **state) {
  (void)state;
  dv_context *c = test_context_or_fail("kernel_cache=off", "host_mode=checked", NULL);
  dv_module *m = test_build(c, "div.dvk", src_div, NULL, NULL);
  dv_array *a = dev_new(c, 4 * 256, DV_INT32);

  launch_expect_fault(kernel_of(m, "early"), a, 1, 256);
  const char *e = dv_last_error();
  assert_contains(e, "kernel early, block (0,0,0): divergent barrier: ");
  assert_contains(e, "200 threads wait at the barrier at div.dvk:5 (first: thread (0,0,0))");
  assert_contains(e, "56 threads exited (first: thread (200,0,0))");

  launch_expect_fault(kernel_of(m, "ifelse"), a, 1, 256);
  e = dv_last_error();
  assert_contains(e, "kernel ifelse, block (0,0,0): divergent barrier: ");
  assert_contains(e, "128 threads wait at the barrier at div.dvk:11 (first: thread (0,0,0))");
  assert_contains(e, "128 threads wait at another barrier at div.dvk:11 (first: thread (128,0,0))");

  launch_expect_fault(kernel_of(m, "loop"), a, 1, 256);
  e = dv_last_error();
  assert_contains(e, "kernel loop, block (0,0,0): divergent barrier: ");
  assert_contains(e, "128 threads wait at the barrier at div.dvk:18 (first: thread (1,0,0))");
  assert_contains(e, "128 threads exited (first: thread (0,0,0))");

  launch_expect_fault(kernel_of(m, "oneblock"), a, 4, 256);
  e = dv_last_error();
  assert_contains(e, "kernel oneblock, block (2,0,0): divergent barrier: ");
  assert_contains(e, "1 thread exited (first: thread (5,0,0))");

  /* The same stream runs the next launch normally. */
  dv_launch_config lc = cfg1(1, 200, 0, NULL);
  dv_arg args[] = {DV_ARG_ARRAY(a)};
  assert_ok(dv_kernel_launch(kernel_of(m, "early"), &lc, 1, args));
  dv_array_release(a);
  finish(c, m);
}

/* Asynchronous: the fault is the stream's, returned by its synchronize. */
static void test_fault_on_stream(void **state) {
  (void)state;
  dv_context *c = test_context_or_fail("kernel_cache=off", "host_mode=checked", NULL);
  dv_module *m = test_build(c, "div.dvk", src_div, NULL, NULL);
  dv_array *a = dev_new(c, 256, DV_INT32);
  dv_stream *s = NULL;
  assert_ok(dv_stream_create(c, 0, &s));
  dv_launch_config lc = cfg1(1, 256, 0, s);
  dv_arg args[] = {DV_ARG_ARRAY(a)};
  assert_ok(dv_kernel_launch(kernel_of(m, "early"), &lc, 1, args));
  assert_status(dv_stream_synchronize(s), DV_ERR_KERNEL_FAULT);
  assert_contains(dv_last_error(), "divergent barrier");
  assert_ok(dv_stream_synchronize(s)); /* reported once */
  lc.block.x = 200;
  assert_ok(dv_kernel_launch(kernel_of(m, "early"), &lc, 1, args));
  assert_ok(dv_stream_synchronize(s));
  dv_stream_release(s);
  dv_array_release(a);
  finish(c, m);
}

/* ---- wave barriers --------------------------------------------------------- */

static const char *src_wave =
    "DV_KERNEL(swap, DV_ARRAY(int, a)) {\n"
    "  DV_BIND(int, a);\n"
    "  DV_SHARED(int, s, 1024);\n"
    "  int t = dv_thread_idx(0);\n"
    "  s[t] = t * 10;\n"
    "  dv_wavebarrier();\n"
    "  a[t] = s[t ^ 1] + 100000 * dv_wave_size();\n"
    "}\n"
    "DV_KERNEL(halfwave, DV_ARRAY(int, a)) {\n"
    "  DV_BIND(int, a);\n"
    "  int t = dv_thread_idx(0);\n"
    "  if (t % 32 < 16) dv_wavebarrier();\n"
    "  a[t] = t;\n"
    "}\n"
    "DV_KERNEL(onewave, DV_ARRAY(int, a)) {\n"
    "  DV_BIND(int, a);\n"
    "  int t = dv_thread_idx(0);\n"
    "  if (t >= 32) { dv_wavebarrier(); dv_wavebarrier(); }\n"
    "  a[t] = t;\n"
    "}\n"
    "DV_KERNEL(wave_vs_block, DV_ARRAY(int, a)) {\n"
    "  DV_BIND(int, a);\n"
    "  int t = dv_thread_idx(0);\n"
    "  if (t < 32) dv_wavebarrier(); else dv_syncthreads();\n"
    "  a[t] = t;\n"
    "}\n";

static void test_wave_barriers(void **state) {
  (void)state;
  dv_context *c = test_context_or_fail("kernel_cache=off", "host_mode=checked", NULL);
  dv_module *m = test_build(c, "wave.dvk", src_wave, NULL, NULL);
  dv_array *a = dev_new(c, 128, DV_INT32);
  int r[128];
  dv_arg args[] = {DV_ARG_ARRAY(a)};
  dv_launch_config lc = cfg1(1, 128, 0, NULL);
  assert_ok(dv_kernel_launch(kernel_of(m, "swap"), &lc, 1, args));
  to_host(a, r, 128, DV_INT32);
  for (int t = 0; t < 128; t++) assert_int_equal(r[t], (t ^ 1) * 10 + 100000 * 32);
  /* Only part of a wave at a wave barrier: a fault naming the wave. */
  assert_status(dv_kernel_launch(kernel_of(m, "halfwave"), &lc, 1, args), DV_ERR_KERNEL_FAULT);
  assert_contains(dv_last_error(), "divergent wave barrier in wave 0 (threads 0-31)");
  assert_contains(dv_last_error(), "16 threads wait at the wave barrier at wave.dvk:12");
  assert_contains(dv_last_error(), "16 threads exited (first: thread (16,0,0))");
  /* Whole waves may use wave barriers on their own. */
  assert_ok(dv_kernel_launch(kernel_of(m, "onewave"), &lc, 1, args));
  /* A wave barrier is not a block barrier. */
  assert_status(dv_kernel_launch(kernel_of(m, "wave_vs_block"), &lc, 1, args),
                DV_ERR_KERNEL_FAULT);
  dv_array_release(a);
  finish(c, m);

  /* The wave size is an option. */
  c = test_context_or_fail("kernel_cache=off", "host_wave_size=16", NULL);
  m = test_build(c, "wave.dvk", src_wave, NULL, NULL);
  a = dev_new(c, 128, DV_INT32);
  dv_arg args2[] = {DV_ARG_ARRAY(a)};
  assert_ok(dv_kernel_launch(kernel_of(m, "swap"), &lc, 1, args2));
  to_host(a, r, 128, DV_INT32);
  assert_int_equal(r[5], 4 * 10 + 100000 * 16);
  dv_kernel_attrs at;
  assert_ok(dv_kernel_attributes(kernel_of(m, "swap"), &at));
  assert_int_equal(at.wave_size, 16);
  dv_array_release(a);
  finish(c, m);
}

/* ---- shared memory redzones ------------------------------------------------- */

static const char *src_oob =
    "DV_KERNEL(oob, DV_ARRAY(int, a)) {\n"
    "  DV_BIND(int, a);\n"
    "  DV_SHARED(int, before, 8);\n"
    "  DV_SHARED(int, tile, 32);\n"
    "  int t = dv_thread_idx(0);\n"
    "  if (t < 8) before[t] = 0;\n"
    "  tile[t] = t;\n"
    "  dv_syncthreads();\n"
    "  a[t] = tile[t % 32];\n"
    "}\n";

static void test_shared_overflow_detected(void **state) {
  (void)state;
  dv_context *c = test_context_or_fail("kernel_cache=off", "kernel_check=bounds", "host_mode=checked", NULL);
  dv_module *m = test_build(c, "oob.dvk", src_oob, NULL, NULL);
  dv_array *a = dev_new(c, 48, DV_INT32);
  dv_arg args[] = {DV_ARG_ARRAY(a)};
  dv_launch_config lc = cfg1(1, 32, 0, NULL);
  assert_ok(dv_kernel_launch(kernel_of(m, "oob"), &lc, 1, args));
  lc.block.x = 48; /* threads 32..47 write into tile's redzone */
  assert_status(dv_kernel_launch(kernel_of(m, "oob"), &lc, 1, args), DV_ERR_KERNEL_FAULT);
  assert_contains(dv_last_error(), "kernel oob, block (0,0,0): shared array tile (oob.dvk:4, "
                                   "128 bytes) was written past its end");
  assert_contains(dv_last_error(), "at the barrier at oob.dvk:8");
  dv_array_release(a);
  finish(c, m);
  /* Without the checks the same launch "works", as on a GPU... */
  c = test_context_or_fail("kernel_cache=off", "kernel_check=off", "host_mode=checked", NULL);
  m = test_build(c, "oob.dvk", src_oob, NULL, NULL);
  a = dev_new(c, 48, DV_INT32);
  dv_arg args2[] = {DV_ARG_ARRAY(a)};
  assert_ok(dv_kernel_launch(kernel_of(m, "oob"), &lc, 1, args2));
  dv_module_release(m);
  /* ...unless the module is built with DV_BUILD_DEBUG. */
  dv_program *p = NULL;
  assert_ok(dv_program_create(c, "oob.dvk", src_oob, &p));
  assert_ok(dv_program_build(p, DV_BUILD_DEBUG, &m));
  dv_program_destroy(p);
  assert_status(dv_kernel_launch(kernel_of(m, "oob"), &lc, 1, args2), DV_ERR_KERNEL_FAULT);
  assert_contains(dv_last_error(), "shared array tile");
  dv_array_release(a);
  finish(c, m);
}

/* Static and dynamic shared memory together are limited like a GPU's. */
static const char *src_big_shared =
    "DV_KERNEL(big, DV_ARRAY(int, a)) {\n"
    "  DV_BIND(int, a);\n"
    "  DV_SHARED(int, first, 8192);   /* 32 KiB */\n"
    "  DV_SHARED(int, second, 2048);  /* 8 KiB */\n"
    "  first[dv_thread_idx(0)] = 1; second[dv_thread_idx(0)] = 2;\n"
    "  dv_syncthreads();\n"
    "  a[dv_thread_idx(0)] = first[0] + second[0];\n"
    "}\n";

static void test_shared_limit(void **state) {
  (void)state;
  dv_context *c = test_context_or_fail("kernel_cache=off", NULL);
  dv_module *m = test_build(c, "big.dvk", src_big_shared, NULL, NULL);
  dv_array *a = dev_new(c, 32, DV_INT32);
  dv_arg args[] = {DV_ARG_ARRAY(a)};
  dv_launch_config lc = cfg1(1, 32, 8192, NULL); /* 40 KiB + 8 KiB = 48 KiB: fits */
  assert_ok(dv_kernel_launch(kernel_of(m, "big"), &lc, 1, args));
  lc.dynamic_shared = 8193;
  assert_status(dv_kernel_launch(kernel_of(m, "big"), &lc, 1, args), DV_ERR_KERNEL_FAULT);
  assert_contains(dv_last_error(), "shared memory exceeds the device's 49152 bytes per block: "
                                   "40960 bytes of static arrays up to second (big.dvk:4) plus "
                                   "8193 bytes of dynamic shared memory");
  dv_array_release(a);
  finish(c, m);
}

/* ---- faults that would kill the process -------------------------------------- */

static const char *src_crash =
    "DV_KERNEL(crash, DV_ARRAY(int, a), int who) {\n"
    "  DV_BIND(int, a);\n"
    "  int t = dv_thread_idx(0);\n"
    "  if (t == who) *(volatile int *)0 = 1;\n"
    "  a[t] = t;\n"
    "}\n"
    "DV_KERNEL(crash_sync, DV_ARRAY(int, a), int who) {\n"
    "  DV_BIND(int, a);\n"
    "  int t = dv_thread_idx(0);\n"
    "  dv_syncthreads();\n"
    "  if (t == who) *(volatile int *)0 = 1;\n"
    "  dv_syncthreads();\n"
    "  a[t] = t;\n"
    "}\n"
    "DV_KERNEL(divide, DV_ARRAY(int, a), int d) {\n"
    "  DV_BIND(int, a);\n"
    "  a[dv_thread_idx(0)] = 7 / d;\n"
    "}\n"
    "DV_KERNEL(deep, DV_ARRAY(int, a), int n) {\n"
    "  DV_BIND(int, a);\n"
    "  DV_LOCAL_ARRAY(char, big, 1 << 20);\n"
    "  for (int i = 0; i < n; i++) big[i] = (char)i;\n"
    "  a[0] = big[n / 2];\n"
    "}\n";

static void test_faults_do_not_kill(void **state) {
  (void)state;
  dv_context *c = test_context_or_fail("kernel_cache=off", "kernel_check=bounds", "host_mode=checked", NULL);
  dv_module *m = test_build(c, "crash.dvk", src_crash, NULL, NULL);
  dv_array *a = dev_new(c, 64, DV_INT32);
  dv_launch_config lc = cfg1(2, 64, 0, NULL);
  dv_arg args[] = {DV_ARG_ARRAY(a), DV_ARG_I32(3)};
  assert_status(dv_kernel_launch(kernel_of(m, "crash"), &lc, 2, args), DV_ERR_KERNEL_FAULT);
  assert_contains(dv_last_error(), "kernel crash, block (0,0,0), thread (3,0,0): SIGSEGV");
  assert_contains(dv_last_error(), "at address (nil)");
  /* Within fibers, after a barrier. */
  assert_status(dv_kernel_launch(kernel_of(m, "crash_sync"), &lc, 2, args), DV_ERR_KERNEL_FAULT);
  assert_contains(dv_last_error(), "kernel crash_sync, block (0,0,0), thread (3,0,0): SIGSEGV");
  /* The process and the stream go on. */
  dv_arg ok_args[] = {DV_ARG_ARRAY(a), DV_ARG_I32(-1)};
  assert_ok(dv_kernel_launch(kernel_of(m, "crash_sync"), &lc, 2, ok_args));
  int r[64];
  to_host(a, r, 64, DV_INT32);
  assert_int_equal(r[63], 63);
  dv_arg div0[] = {DV_ARG_ARRAY(a), DV_ARG_I32(0)};
  assert_status(dv_kernel_launch(kernel_of(m, "divide"), &lc, 2, div0), DV_ERR_KERNEL_FAULT);
  assert_contains(dv_last_error(), "SIGFPE (integer division by zero)");
  /* A 1 MiB local array on a 128 KiB fiber stack: the guard page. */
  lc = cfg1(1, 1, 0, NULL);
  dv_arg deep[] = {DV_ARG_ARRAY(a), DV_ARG_I32(1 << 20)};
  assert_status(dv_kernel_launch(kernel_of(m, "deep"), &lc, 2, deep), DV_ERR_KERNEL_FAULT);
  assert_contains(dv_last_error(), "stack overflow");
  assert_ok(dv_kernel_launch(kernel_of(m, "crash"), &lc, 2, ok_args));
  dv_array_release(a);
  finish(c, m);
}

/* A local array larger than the fiber's stack, in one thread that runs on a
 * fiber of its own (after a barrier) between other threads' stacks, with
 * kernel_check off (the Release default): reported as a stack overflow
 * naming the thread, the stack's size and the option, never as a plain
 * SIGSEGV or by corrupting a neighbour's stack.  With -fno-stack-clash-
 * protection from host_cflags (as from a compiler without the option), the
 * stack pointer below the fiber's stack still names it (not in ASan builds:
 * there the instrumented kernel's first write lands in the neighbouring
 * fiber's stack frames, which ASan reports itself and ends the process). */
static const char *src_deep =
    "__attribute__((noinline)) static int deep_helper(int n) {\n"
    "  DV_LOCAL_ARRAY(char, big, BIG);\n"
    "  for (int i = 0; i < n; i++) big[i] = (char)i;\n"
    "  return big[n / 2];\n"
    "}\n"
    "DV_KERNEL(deep_late, DV_ARRAY(int, a), int who) {\n"
    "  DV_BIND(int, a);\n"
    "  int t = dv_thread_idx(1) * dv_block_dim(0) + dv_thread_idx(0);\n"
    "  a[t] = t;\n"
    "  dv_syncthreads();\n"
    "  if (t == who) a[t] = deep_helper(BIG);\n"
    "}\n";

static void test_stack_overflow_named(void **state) {
  (void)state;
#if defined(HK_TEST_TSAN)
  /* ThreadSanitizer now and then loses the jump buffer when the handler of a
   * stack overflow (on the alternate signal stack, from a fiber) jumps back
   * to the scheduler: "can't find longjmp buf", a CHECK that ends the
   * process (3 runs in 8 at 782264d, before issue 23).  The ASan+UBSan and
   * plain builds check this test; under TSan it is skipped, by name. */
  printf("SKIPPED: %s: ThreadSanitizer's longjmp bookkeeping (see the comment)\n", __func__);
  skip();
#endif
  const char *cflags[2] = {"host_cflags=-O2", "host_cflags=-O2 -fno-stack-clash-protection"};
  for (int v = 0; v < 2; v++) {
#if HK_TEST_ASAN
    if (v == 1) break;
#endif
    dv_context *c = NULL;
    assert_ok(test_context(&c, "kernel_cache=off", "kernel_check=off", "host_mode=checked",
                           "host_fiber_stack=64K", cflags[v], (const char *)NULL));
    /* 80 KiB and 1 MiB arrays on 64 KiB stacks. */
    const char *sizes[2] = {"81920", "1048576"};
    for (int b = 0; b < 2; b++) {
      dv_program *p = NULL;
      dv_module *m = NULL;
      assert_ok(dv_program_create(c, "deep.dvk", src_deep, &p));
      assert_ok(dv_program_define(p, "BIG", sizes[b]));
      assert_ok(dv_program_build(p, 0, &m));
      dv_program_destroy(p);
      dv_array *a = dev_new(c, 8, DV_INT32);
      dv_launch_config lc = cfg1(1, 4, 0, NULL);
      lc.block.y = 2;
      dv_arg args[] = {DV_ARG_ARRAY(a), DV_ARG_I32(6)}; /* thread (2,1,0) */
      assert_status(dv_kernel_launch(kernel_of(m, "deep_late"), &lc, 2, args), DV_ERR_KERNEL_FAULT);
      const char *e = dv_last_error();
      assert_contains(e, "kernel deep_late, block (0,0,0), thread (2,1,0): stack overflow");
      assert_contains(e, "65536 bytes of stack");
      assert_contains(e, "host_fiber_stack");
      /* The context goes on: the same kernel with no thread that overflows. */
      dv_arg fine[] = {DV_ARG_ARRAY(a), DV_ARG_I32(-1)};
      assert_ok(dv_kernel_launch(kernel_of(m, "deep_late"), &lc, 2, fine));
      int r[8];
      to_host(a, r, 8, DV_INT32);
      for (int t = 0; t < 8; t++) assert_int_equal(r[t], t);
      dv_array_release(a);
      dv_module_release(m);
    }
    assert_ok(dv_context_check_memory(c));
    assert_ok(dv_context_destroy(c));
  }
}

/* ---- out-of-bounds local and global writes (kernel_check) ------------------- */

static const char *src_bounds =
    "DV_KERNEL(local_oob, DV_ARRAY(int, a), int n) {\n"
    "  DV_BIND(int, a);\n"
    "  DV_LOCAL_ARRAY(int, v, 8);\n"
    "  int *volatile p = v;\n"
    "  for (int i = 0; i < n; i++) p[i] = i;\n"
    "  a[dv_thread_idx(0)] = v[n % 8];\n"
    "}\n"
    "DV_KERNEL(global_oob, DV_ARRAY(int, a), int n) {\n"
    "  DV_BIND(int, a);\n"
    "  if (dv_thread_idx(0) == 0) a[n] = 1;\n"
    "}\n";

static void test_local_and_global_overflow(void **state) {
  (void)state;
#if HK_TEST_ASAN
  skip(); /* ASan reports these writes itself (kernels are instrumented) */
#endif
  dv_context *c = test_context_or_fail("kernel_cache=off", "kernel_check=bounds", "host_mode=checked", NULL);
  dv_module *m = test_build(c, "bounds.dvk", src_bounds, NULL, NULL);
  dv_array *a = dev_new(c, 100, DV_INT32);
  dv_launch_config lc = cfg1(1, 4, 0, NULL);
  dv_arg in[] = {DV_ARG_ARRAY(a), DV_ARG_I32(8)};
  assert_ok(dv_kernel_launch(kernel_of(m, "local_oob"), &lc, 2, in));
  dv_arg out[] = {DV_ARG_ARRAY(a), DV_ARG_I32(24)};
  assert_status(dv_kernel_launch(kernel_of(m, "local_oob"), &lc, 2, out), DV_ERR_KERNEL_FAULT);
  assert_contains(dv_last_error(), "kernel local_oob, block (0,0,0), thread (0,0,0): a local "
                                   "array was written past its end");
  dv_arg gin[] = {DV_ARG_ARRAY(a), DV_ARG_I32(99)};
  assert_ok(dv_kernel_launch(kernel_of(m, "global_oob"), &lc, 2, gin));
  dv_arg gout[] = {DV_ARG_ARRAY(a), DV_ARG_I32(100)};
  assert_status(dv_kernel_launch(kernel_of(m, "global_oob"), &lc, 2, gout), DV_ERR_KERNEL_FAULT);
  assert_contains(dv_last_error(), "kernel global_oob wrote outside the 400-byte device buffer "
                                   "of argument 0 (`DV_ARRAY(int, a)`)");
  dv_array_release(a);
  finish(c, m); /* the guards were repaired: no corruption left */
}

/* In an ASan build kernels are instrumented and a buffer's guards are
 * poisoned while a kernel runs: ASan itself reports both writes (and ends
 * the process, as ASan does).  Run each in a child process. */
static int child_outside(const char *which);

static int child_scenario(const char *which) {
  if (strncmp(which, "fault-", 6) == 0) return child_outside(which + 6);
  dv_context *c = test_context_or_fail("kernel_cache=off", "kernel_check=bounds", "host_mode=checked", NULL);
  dv_module *m = test_build(c, "bounds.dvk", src_bounds, NULL, NULL);
  dv_array *a = dev_new(c, 100, DV_INT32);
  dv_launch_config lc = cfg1(1, 4, 0, NULL);
  dv_arg args[] = {DV_ARG_ARRAY(a), DV_ARG_I32(strcmp(which, "local") == 0 ? 24 : 100)};
  dv_status rc = dv_kernel_launch(kernel_of(m, strcmp(which, "local") == 0 ? "local_oob" : "global_oob"),
                                  &lc, 2, args);
  printf("child %s: %s: %s\n", which, dv_status_name(rc), dv_last_error());
  dv_array_release(a);
  finish(c, m);
  return 0;
}

/* Run this test binary again as a child with HK_CHILD=which; its wait
 * status, and its stdout and stderr in text (static). */
static const char *run_child(const char *which, int *st) {
  char out[256];
  const char *tmp = getenv("TMPDIR");
  snprintf(out, sizeof out, "%s/hk-child-XXXXXX", tmp ? tmp : "/tmp");
  int fd = mkstemp(out);
  assert_true(fd >= 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    dup2(fd, 1);
    dup2(fd, 2);
    setenv("HK_CHILD", which, 1);
    setenv("ASAN_OPTIONS", "detect_leaks=0", 1);
    execl("/proc/self/exe", "test_host_kernels", "host", (char *)NULL);
    _exit(127);
  }
  close(fd);
  *st = 0;
  assert_int_equal(waitpid(pid, st, 0), pid);
  FILE *f = fopen(out, "r");
  assert_non_null(f);
  static char text[1 << 16];
  size_t n = fread(text, 1, sizeof text - 1, f);
  text[n] = 0;
  fclose(f);
  unlink(out);
  return text;
}

static void test_asan_reports_overflows(void **state) {
  (void)state;
#if !HK_TEST_ASAN
  skip(); /* the ASan build's behaviour; others: test_local_and_global_overflow */
#else
  const char *which[2] = {"local", "global"};
  const char *expect[2] = {"stack-buffer-overflow", "use-after-poison"};
  for (int i = 0; i < 2; i++) {
    int st = 0;
    const char *text = run_child(which[i], &st);
    if (!(WIFEXITED(st) && WEXITSTATUS(st) != 0) || !strstr(text, expect[i]))
      fail_msg("%s overflow: the child should die with an ASan %s report; status %d, output:\n%s",
               which[i], expect[i], st, text);
  }
#endif
}

/* A kernel that leaves its thread too little stack for the runtime it then
 * calls overflows the stack in the runtime's frames, which are library code
 * (issue 22 #5: not the kernel's window): the runtime checks its headroom
 * on entry and reports the kernel's stack overflow.  Every depth near the
 * stack's end gives DV_OK or that overflow, never a crash. */
static const char *src_edge =
    "DV_KERNEL(edge, DV_ARRAY(int, a), int n, int what) {\n"
    "  DV_BIND(int, a);\n"
    "  volatile char *big = (volatile char *)__builtin_alloca((unsigned long)n);\n"
    "  big[0] = 1;\n"
    "  big[n - 1] = 2;\n"
    "  if (what == 0) dv_syncthreads();\n"
    "  else a[1] = (int)dv_wave_any(big[0]);\n"
    "  a[0] = big[0] + big[n - 1];\n"
    "}\n";

static void test_stack_edge_in_runtime(void **state) {
  (void)state;
  dv_context *c = NULL;
  assert_ok(test_context(&c, "kernel_cache=off", "kernel_check=off", "host_mode=checked",
                         "host_fiber_stack=32K", (const char *)NULL));
  dv_module *m = test_build(c, "edge.dvk", src_edge, NULL, NULL);
  dv_array *a = dev_new(c, 2, DV_INT32);
  dv_launch_config lc = cfg1(1, 2, 0, NULL);
  int ok = 0, overflow = 0;
  for (int what = 0; what < 2; what++)
    for (int n = 32768 - 12288; n <= 32768 + 256; n += 256) {
      dv_arg args[] = {DV_ARG_ARRAY(a), DV_ARG_I32(n), DV_ARG_I32(what)};
      dv_status rc = dv_kernel_launch(kernel_of(m, "edge"), &lc, 3, args);
      if (rc == DV_OK) {
        ok++;
        continue;
      }
      if (rc != DV_ERR_KERNEL_FAULT || !strstr(dv_last_error(), "stack overflow"))
        fail_msg("%d bytes of stack taken, then %s: %s: %s", n,
                 what ? "a wave operation" : "a barrier", dv_status_name(rc), dv_last_error());
      overflow++;
    }
  /* Both outcomes happen in the range. */
  assert_true(ok > 0);
  assert_true(overflow > 0);
  dv_array_release(a);
  finish(c, m);
}

/* ---- a fault outside the kernel body is not the kernel's ---------------------- */

/* Issue 22 #5: the signal handler took any fault on an executor while a
 * block ran for the kernel's, the runner's own code and the barrier
 * runtime included (library code, perhaps holding locks, which the
 * handler's siglongjmp then left held: a hang under TSan).  A debug build's
 * test hook (hk_test_fault, host_kernel_internal.h) faults there: the
 * process must end as on any library bug, killed by SIGSEGV (or ASan's
 * report), never with the launch returning DV_ERR_KERNEL_FAULT; the
 * kernel's own fault stays a DV_ERR_KERNEL_FAULT.  In child processes. */
static const char *src_outside =
    "DV_KERNEL(outside, DV_ARRAY(int, a), int who) {\n"
    "  DV_BIND(int, a);\n"
    "  int t = dv_thread_idx(0);\n"
    "  a[t] = t;\n"
    "  if (t == who) *(volatile int *)0 = 1;\n"
    "  dv_syncthreads();\n"
    "  a[t] += 1;\n"
    "}\n";

static int child_outside(const char *where) {
  alarm(120); /* a hang ends as SIGALRM */
  dv_context *c = test_context_or_fail("kernel_cache=off", "host_mode=checked", "kernel_check=bounds", NULL);
  dv_module *m = test_build(c, "outside.dvk", src_outside, NULL, NULL);
  dv_array *a = dev_new(c, 64, DV_INT32);
  dv_launch_config lc = cfg1(2, 64, 0, NULL);
  dv_arg args[] = {DV_ARG_ARRAY(a), DV_ARG_I32(strcmp(where, "kernel") == 0 ? 5 : -1)};
#ifndef NDEBUG
  if (strcmp(where, "runner") == 0) atomic_store(&hk_test_fault, HK_TEST_FAULT_RUNNER);
  if (strcmp(where, "barrier") == 0) atomic_store(&hk_test_fault, HK_TEST_FAULT_BARRIER);
#endif
  dv_status rc = dv_kernel_launch(kernel_of(m, "outside"), &lc, 2, args);
  printf("child fault-%s: %s: %s\n", where, dv_status_name(rc), dv_last_error());
  fflush(stdout);
#ifndef NDEBUG
  atomic_store(&hk_test_fault, HK_TEST_FAULT_NONE);
#endif
  dv_array_release(a);
  finish(c, m);
  return 0;
}

static void test_fault_outside_kernel(void **state) {
  (void)state;
#ifdef NDEBUG
  skip(); /* the fault hook (hk_test_fault) is in debug builds only */
#else
  const char *where[2] = {"runner", "barrier"};
  for (int i = 0; i < 2; i++) {
    char which[32];
    snprintf(which, sizeof which, "fault-%s", where[i]);
    int st = 0;
    const char *text = run_child(which, &st);
    bool segv = WIFSIGNALED(st) ? WTERMSIG(st) == SIGSEGV
                                : WIFEXITED(st) && WEXITSTATUS(st) != 0 && strstr(text, "SEGV");
    if (!segv || strstr(text, "DV_ERR_KERNEL_FAULT"))
      fail_msg("a fault in the %s's code (not the kernel's) should end the process with SIGSEGV; "
               "status %#x, output:\n%s", where[i], st, text);
  }
  /* The kernel's own fault, the same way. */
  int st = 0;
  const char *text = run_child("fault-kernel", &st);
  if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0) ||
      !strstr(text, "child fault-kernel: DV_ERR_KERNEL_FAULT: kernel outside, block (0,0,0), "
                    "thread (5,0,0): SIGSEGV"))
    fail_msg("the kernel's own fault should be DV_ERR_KERNEL_FAULT; status %#x, output:\n%s", st,
             text);
#endif
}

/* ---- atomics under contention ----------------------------------------------- */

static const char *src_atomics =
    "DV_KERNEL(atomics, DV_ARRAY(dv_i32, i32), DV_ARRAY(float, f32), DV_ARRAY(dv_i64, i64),\n"
    "          DV_ARRAY(dv_u32, u32)) {\n"
    "  DV_BIND(dv_i32, i32); DV_BIND(float, f32); DV_BIND(dv_i64, i64); DV_BIND(dv_u32, u32);\n"
    "  DV_SHARED(dv_i32, local_count, 1);\n"
    "  dv_i64 g = dv_global_id(0);\n"
    "  int t = dv_thread_idx(0);\n"
    "  if (t == 0) local_count[0] = 0;\n"
    "  dv_syncthreads();\n"
    "  dv_atomic_add_i32(&local_count[0], 1);\n"
    "  dv_atomic_add_i32(&i32[0], 1);\n"
    "  dv_atomic_add_f32(&f32[0], 1.0f);\n"
    "  dv_atomic_add_i64(&i64[0], g);\n"
    "  dv_atomic_min_i32(&i32[1], (dv_i32)((g * 7919) % 100003) - 50000);\n"
    "  dv_atomic_max_i32(&i32[2], (dv_i32)((g * 7919) % 100003) - 50000);\n"
    "  dv_atomic_min_f32(&f32[1], (float)g);\n"
    "  dv_atomic_max_f32(&f32[2], (float)g);\n"
    "  if (dv_atomic_cas_i32(&i32[3], 0, (dv_i32)g + 1) == 0) dv_atomic_add_i32(&i32[4], 1);\n"
    "  dv_atomic_max_u32(&u32[0], (dv_u32)g);\n"
    "  dv_atomic_xchg_i32(&i32[5], 1);\n"
    "  dv_syncthreads();\n"
    "  if (t == 0) dv_atomic_add_i32(&i32[6], local_count[0]);\n"
    "}\n";

static void test_atomics_contention(void **state) {
  (void)state;
  dv_context *c = test_context_or_fail("kernel_cache=off", NULL);
  dv_module *m = test_build(c, "atomics.dvk", src_atomics, NULL, NULL);
  enum { B = 64, T = 256, N = B * T };
  int32_t hi[8] = {0, INT32_MAX, INT32_MIN, 0, 0, 0, 0, 0};
  float hf[3] = {0.0f, 1e30f, -1e30f};
  int64_t hl[1] = {0};
  uint32_t hu[1] = {0};
  dv_array *di = dev_from(c, hi, 8, DV_INT32), *df = dev_from(c, hf, 3, DV_FLOAT32);
  dv_array *dl = dev_from(c, hl, 1, DV_INT64), *du = dev_from(c, hu, 1, DV_UINT32);
  dv_launch_config lc = cfg1(B, T, 0, NULL);
  dv_arg args[] = {DV_ARG_ARRAY(di), DV_ARG_ARRAY(df), DV_ARG_ARRAY(dl), DV_ARG_ARRAY(du)};
  assert_ok(dv_kernel_launch(kernel_of(m, "atomics"), &lc, 4, args));
  to_host(di, hi, 8, DV_INT32);
  to_host(df, hf, 3, DV_FLOAT32);
  to_host(dl, hl, 1, DV_INT64);
  to_host(du, hu, 1, DV_UINT32);
  int32_t mn = INT32_MAX, mx = INT32_MIN;
  for (int64_t g = 0; g < N; g++) {
    int32_t v = (int32_t)((g * 7919) % 100003) - 50000;
    mn = v < mn ? v : mn;
    mx = v > mx ? v : mx;
  }
  assert_int_equal(hi[0], N);
  assert_true(hf[0] == (float)N); /* exact: every partial sum is an integer below 2^24 */
  assert_int_equal(hl[0], (int64_t)N * (N - 1) / 2);
  assert_int_equal(hi[1], mn);
  assert_int_equal(hi[2], mx);
  assert_true(hf[1] == 0.0f);
  assert_true(hf[2] == (float)(N - 1));
  assert_true(hi[3] >= 1 && hi[3] <= N);
  assert_int_equal(hi[4], 1); /* exactly one CAS won */
  assert_int_equal(hu[0], N - 1);
  assert_int_equal(hi[5], 1);
  assert_int_equal(hi[6], N); /* shared-memory atomics: T per block */
  dv_array_release(di), dv_array_release(df), dv_array_release(dl), dv_array_release(du);
  finish(c, m);
}

/* ---- blocks really run at the same time ------------------------------------- */

static const char *src_meet =
    "DV_KERNEL(meet, DV_ARRAY(dv_i32, flags), DV_ARRAY(dv_i32, saw), dv_i64 spins) {\n"
    "  DV_BIND(dv_i32, flags); DV_BIND(dv_i32, saw);\n"
    "  int b = dv_block_idx(0), other = 1 - b;\n"
    "  __atomic_store_n(&flags[b], 1, __ATOMIC_SEQ_CST);\n"
    "  dv_i64 i = 0;\n"
    "  while (i < spins && __atomic_load_n(&flags[other], __ATOMIC_SEQ_CST) == 0) i++;\n"
    "  saw[b] = __atomic_load_n(&flags[other], __ATOMIC_SEQ_CST);\n"
    "}\n";

static void test_blocks_in_parallel(void **state) {
  (void)state;
  /* The scheduler, not the access checks, is under test: bounds only. */
  dv_context *c = test_context_or_fail("kernel_cache=off", "kernel_check=bounds", NULL);
  dv_module *m = test_build(c, "meet.dvk", src_meet, NULL, NULL);
  int32_t z[2] = {0, 0}, saw[2] = {0, 0};
  dv_array *df = dev_from(c, z, 2, DV_INT32), *ds = dev_from(c, z, 2, DV_INT32);
  dv_launch_config lc = cfg1(2, 1, 0, NULL);
  /* Bounded: at worst a few seconds of spinning, never a hang. */
  dv_arg args[] = {DV_ARG_ARRAY(df), DV_ARG_ARRAY(ds), DV_ARG_I64(2000000000)};
  assert_ok(dv_kernel_launch(kernel_of(m, "meet"), &lc, 3, args));
  to_host(ds, saw, 2, DV_INT32);
  assert_int_equal(saw[0], 1);
  assert_int_equal(saw[1], 1);
  dv_array_release(df);
  dv_array_release(ds);
  finish(c, m);
}

/* ---- building: compiler missing, compile errors ----------------------------- */

static void test_no_compiler(void **state) {
  (void)state;
  dv_context *c = test_context_or_fail("kernel_cache=off", "host_cc=/nonexistent/cc", NULL);
  dv_program *p = NULL;
  assert_ok(dv_program_create(c, "x.dvk", src_saxpy, &p));
  dv_module *m = NULL;
  assert_status(dv_program_build(p, 0, &m), DV_ERR_NO_COMPILER);
  assert_null(m);
  assert_contains(dv_last_error(), "/nonexistent/cc");
  dv_program_destroy(p);
  finish(c, NULL);
}

static void test_compile_error(void **state) {
  (void)state;
  dv_context *c = test_context_or_fail("kernel_cache=off", NULL);
  dv_program *p = NULL;
  assert_ok(dv_program_create(c, "bad.dvk",
                              "DV_KERNEL(bad, DV_ARRAY(int, a)) {\n"
                              "  DV_BIND(int, a);\n"
                              "  a[0] = undeclared_thing + ;\n"
                              "}\n",
                              &p));
  dv_module *m = NULL;
  assert_status(dv_program_build(p, 0, &m), DV_ERR_COMPILE);
  assert_contains(dv_program_log(p), "bad.dvk:3:");
  assert_contains(dv_last_error(), "bad.dvk:3:");
  dv_program_destroy(p);
  finish(c, NULL);
}

/* ---- arguments ---------------------------------------------------------------- */

static void test_argument_checks(void **state) {
  (void)state;
  dv_context *c = test_context_or_fail("kernel_cache=off", NULL);
  dv_module *m = test_build(c, "saxpy.dvk", src_saxpy, NULL, NULL);
  dv_kernel *k = kernel_of(m, "saxpy");
  dv_array *a = dev_new(c, 4, DV_FLOAT32);
  dv_launch_config lc = cfg1(1, 4, 0, NULL);
  dv_arg few[] = {DV_ARG_ARRAY(a), DV_ARG_ARRAY(a), DV_ARG_F32(1)};
  assert_status(dv_kernel_launch(k, &lc, 3, few), DV_ERR_KERNEL_ARGUMENT);
  assert_contains(dv_last_error(), "kernel saxpy takes 4 arguments; the launch passes 3 (the first "
                                   "missing is parameter 4, `int n`)");
  dv_arg type[] = {DV_ARG_ARRAY(a), DV_ARG_ARRAY(a), DV_ARG_I32(1), DV_ARG_I32(4)};
  assert_status(dv_kernel_launch(k, &lc, 4, type), DV_ERR_KERNEL_ARGUMENT);
  assert_contains(dv_last_error(), "parameter 3 of 4 (`float a`): takes a float32 scalar (DV_ARG_F32); "
                                   "given an int32 scalar (DV_ARG_I32)");
  dv_arg wide[] = {DV_ARG_ARRAY(a), DV_ARG_ARRAY(a), DV_ARG_F32(1), DV_ARG_I64(4)};
  assert_status(dv_kernel_launch(k, &lc, 4, wide), DV_ERR_KERNEL_ARGUMENT);
  assert_contains(dv_last_error(), "parameter 4 of 4 (`int n`)");
  dv_arg kind[] = {DV_ARG_F32(1), DV_ARG_ARRAY(a), DV_ARG_F32(1), DV_ARG_I32(4)};
  assert_status(dv_kernel_launch(k, &lc, 4, kind), DV_ERR_KERNEL_ARGUMENT);
  assert_contains(dv_last_error(), "parameter 1 of 4 (`DV_ARRAY(float, y)`): takes a C-contiguous "
                                   "float32 array");
  dv_arg view[] = {DV_ARG_VIEW(a), DV_ARG_ARRAY(a), DV_ARG_F32(1), DV_ARG_I32(4)};
  assert_status(dv_kernel_launch(k, &lc, 4, view), DV_ERR_KERNEL_ARGUMENT);
  dv_arg many[] = {DV_ARG_ARRAY(a), DV_ARG_ARRAY(a), DV_ARG_F32(1), DV_ARG_I32(4), DV_ARG_I32(4)};
  assert_status(dv_kernel_launch(k, &lc, 5, many), DV_ERR_KERNEL_ARGUMENT);
  /* Signedness may differ when the value fits (tests/kernel/test_contract.c has the rest). */
  dv_arg uns[] = {DV_ARG_ARRAY(a), DV_ARG_ARRAY(a), DV_ARG_F32(1), DV_ARG_U32(4)};
  assert_ok(dv_kernel_launch(k, &lc, 4, uns));
  dv_array_release(a);
  finish(c, m);
}

/* DV_VIEW: shape and strides by value; a transposed (strided) view. */
static const char *src_view =
    "DV_KERNEL(rowsum, DV_VIEW(const double, m), DV_ARRAY(double, out)) {\n"
    "  DV_BIND(const double, m); DV_BIND(double, out);\n"
    "  int i = dv_thread_idx(0);\n"
    "  if (i >= DV_SHAPE(m, 0)) return;\n"
    "  double s = 0;\n"
    "  for (dv_i64 j = 0; j < DV_SHAPE(m, 1); j++) s += DV_ITEM2(m, i, j);\n"
    "  out[i] = s + 1000 * DV_NDIM(m);\n"
    "}\n";

static void test_view_argument(void **state) {
  (void)state;
  dv_context *c = test_context_or_fail("kernel_cache=off", NULL);
  dv_module *m = test_build(c, "view.dvk", src_view, NULL, NULL);
  double h[12];
  for (int i = 0; i < 12; i++) h[i] = i;
  dv_array *d = dev_from(c, h, 12, DV_FLOAT64), *t = NULL;
  int64_t shp[2] = {4, 3};
  assert_ok(dv_array_reshape(d, 2, shp, 'F', DV_VIEW_ONLY, NULL, &t)); /* strides (8, 32) */
  assert_int_equal(t->strides[1], 32);
  dv_array *out = dev_new(c, 4, DV_FLOAT64);
  dv_launch_config lc = cfg1(1, 8, 0, NULL);
  dv_arg args[] = {DV_ARG_VIEW(t), DV_ARG_ARRAY(out)};
  assert_ok(dv_kernel_launch(kernel_of(m, "rowsum"), &lc, 2, args));
  double r[4];
  to_host(out, r, 4, DV_FLOAT64);
  for (int i = 0; i < 4; i++) assert_true(r[i] == (double)(i + (i + 4) + (i + 8)) + 2000);
  dv_array_release(out), dv_array_release(t), dv_array_release(d);
  finish(c, m);
}

/* Many arguments of every kind: integer registers run out (the view and
 * what follows go on the stack), float and double registers run out, a
 * view by value in between, narrow and unsigned integers extended. */
static const char *src_many =
    "DV_KERNEL(mix, DV_ARRAY(double, out), dv_i8 a, dv_i16 b, int c, dv_i64 d,\n"
    "          DV_VIEW(const double, v), unsigned e, float f0, double f1, float f2, double f3,\n"
    "          float f4, double f5, float f6, double f7, float f8, double f9, int g, dv_u64 h,\n"
    "          dv_u8 i) {\n"
    "  DV_BIND(double, out); DV_BIND(const double, v);\n"
    "  if (dv_thread_idx(0) != 3) return;\n"
    "  double s = 0;\n"
    "  for (dv_i64 j = 0; j < DV_SHAPE(v, 0); j++) s += DV_ITEM1(v, j);\n"
    "  double r[] = {a, b, c, (double)d, s, (double)DV_SHAPE(v, 0), e, f0, f1, f2, f3, f4, f5,\n"
    "                f6, f7, f8, f9, g, (double)h, i};\n"
    "  for (int k = 0; k < 20; k++) out[k] = r[k];\n"
    "}\n";

static void test_many_arguments(void **state) {
  (void)state;
  dv_context *c = test_context_or_fail("kernel_cache=off", NULL);
  dv_module *m = test_build(c, "many.dvk", src_many, NULL, NULL);
  double h[6] = {1, 2, 3, 4, 5, 6};
  dv_array *d = dev_from(c, h, 6, DV_FLOAT64), *v = NULL;
  assert_ok(dv_array_slice(d, 1, &DV_SLICE(1, 6, 2), &v)); /* 2, 4, 6 */
  dv_array *out = dev_new(c, 20, DV_FLOAT64);
  dv_launch_config lc = cfg1(1, 8, 0, NULL);
  dv_arg args[] = {DV_ARG_ARRAY(out),
                   {DV_ARG_SCALAR, DV_INT8, &(int8_t){-5}, NULL},
                   {DV_ARG_SCALAR, DV_INT16, &(int16_t){-300}, NULL},
                   DV_ARG_I32(-70000),
                   DV_ARG_I64(-5000000000),
                   DV_ARG_VIEW(v),
                   DV_ARG_U32(4000000000u),
                   DV_ARG_F32(0.5f), DV_ARG_F64(1.25), DV_ARG_F32(2.5f), DV_ARG_F64(3.25),
                   DV_ARG_F32(4.5f), DV_ARG_F64(5.25), DV_ARG_F32(6.5f), DV_ARG_F64(7.25),
                   DV_ARG_F32(8.5f), DV_ARG_F64(9.25),
                   DV_ARG_I32(-11),
                   DV_ARG_U64(1u << 20),
                   {DV_ARG_SCALAR, DV_UINT8, &(uint8_t){200}, NULL}};
  assert_ok(dv_kernel_launch(kernel_of(m, "mix"), &lc, 20, args));
  double r[20];
  to_host(out, r, 20, DV_FLOAT64);
  const double want[20] = {-5,   -300, -70000, -5000000000.0, 12,   3,     4000000000.0,
                           0.5,  1.25, 2.5,    3.25,          4.5,  5.25,  6.5,
                           7.25, 8.5,  9.25,   -11,           1 << 20, 200};
  for (int k = 0; k < 20; k++) assert_true(r[k] == want[k]);
  dv_array_release(out), dv_array_release(v), dv_array_release(d);
  finish(c, m);
}

/* Constants: initial data, then replaced in stream order. */
static const char *src_const =
    "DV_KERNEL(readc, DV_ARRAY(float, out)) {\n"
    "  DV_BIND(float, out);\n"
    "  int t = dv_thread_idx(0);\n"
    "  out[t] = coef[t] + (float)offs[0];\n"
    "}\n";

static void test_constants(void **state) {
  (void)state;
  dv_context *c = test_context_or_fail("kernel_cache=off", NULL);
  float coef[4] = {1, 2, 3, 4};
  int32_t offs[1] = {100};
  dv_array *hc = NULL, *ho = NULL;
  int64_t n4 = 4, n1 = 1;
  assert_ok(dv_host_array_wrap(c, coef, 1, &n4, dv_dtype_get(DV_FLOAT32), NULL, &hc));
  assert_ok(dv_host_array_wrap(c, offs, 1, &n1, dv_dtype_get(DV_INT32), NULL, &ho));
  dv_program *p = NULL;
  assert_ok(dv_program_create(c, "const.dvk", src_const, &p));
  assert_ok(dv_program_constant(p, "coef", hc));
  assert_ok(dv_program_constant(p, "offs", ho));
  dv_module *m = NULL;
  assert_ok(dv_program_build(p, 0, &m));
  dv_program_destroy(p);
  dv_array *out = dev_new(c, 4, DV_FLOAT32);
  dv_launch_config lc = cfg1(1, 4, 0, NULL);
  dv_arg args[] = {DV_ARG_ARRAY(out)};
  assert_ok(dv_kernel_launch(kernel_of(m, "readc"), &lc, 1, args));
  float r[4];
  to_host(out, r, 4, DV_FLOAT32);
  for (int i = 0; i < 4; i++) assert_true(r[i] == (float)(i + 1) + 100.0f);
  float coef2[4] = {10, 20, 30, 40};
  dv_array *hc2 = NULL;
  assert_ok(dv_host_array_wrap(c, coef2, 1, &n4, dv_dtype_get(DV_FLOAT32), NULL, &hc2));
  assert_ok(dv_module_set_constant(m, "coef", hc2, NULL));
  assert_ok(dv_kernel_launch(kernel_of(m, "readc"), &lc, 1, args));
  to_host(out, r, 4, DV_FLOAT32);
  for (int i = 0; i < 4; i++) assert_true(r[i] == (float)(10 * (i + 1)) + 100.0f);
  dv_array_release(out), dv_array_release(hc), dv_array_release(ho), dv_array_release(hc2);
  finish(c, m);
}

/* ---- streams: ordering with copies, early release of arguments --------------- */

static void test_stream_order_and_release(void **state) {
  (void)state;
  dv_context *c = test_context_or_fail("kernel_cache=off", "host_delay_us=2000", NULL);
  dv_module *m = test_build(c, "saxpy.dvk", src_saxpy, NULL, NULL);
  dv_kernel *k = kernel_of(m, "saxpy");
  dv_stream *s = NULL;
  assert_ok(dv_stream_create(c, 0, &s));
  enum { N = 1000 };
  static float x[N], y[N], r[N];
  for (int i = 0; i < N; i++) x[i] = 1.0f, y[i] = (float)i;
  dv_array *dx = dev_from(c, x, N, DV_FLOAT32), *dy = dev_from(c, y, N, DV_FLOAT32);
  dv_launch_config lc = cfg1(8, 128, 0, s);
  dv_arg args[] = {DV_ARG_ARRAY(dy), DV_ARG_ARRAY(dx), DV_ARG_F32(3.0f), DV_ARG_I32(N)};
  for (int rep = 0; rep < 3; rep++) assert_ok(dv_kernel_launch(k, &lc, 4, args));
  dv_array_release(dx); /* still used by the queued launches: reclaimed after them */
  dv_array *hr = NULL;
  int64_t n = N;
  assert_ok(dv_host_array_wrap(c, r, 1, &n, dv_dtype_get(DV_FLOAT32), NULL, &hr));
  assert_ok(dv_copy_to_host(dy, hr, s, NULL));
  assert_ok(dv_stream_synchronize(s));
  for (int i = 0; i < N; i++) assert_true(r[i] == (float)i + 9.0f);
  dv_array_release(hr);
  dv_array_release(dy);
  dv_stream_release(s);
  finish(c, m);
}

/* Several streams launching at once (the ThreadSanitizer target runs this). */
typedef struct par_arg {
  dv_context *c;
  dv_kernel *k;
  int seed;
  int ok;
} par_arg;

static void *par_thread(void *p) {
  par_arg *pa = p;
  dv_stream *s = NULL;
  if (dv_stream_create(pa->c, 0, &s)) return NULL;
  enum { N = 64 * 16 };
  float h[N], r[N];
  dv_array *d = NULL, *hv = NULL, *rv = NULL;
  int64_t n = N;
  int good = 0;
  if (!dv_host_array_wrap(pa->c, h, 1, &n, dv_dtype_get(DV_FLOAT32), NULL, &hv) &&
      !dv_host_array_wrap(pa->c, r, 1, &n, dv_dtype_get(DV_FLOAT32), NULL, &rv) &&
      !dv_device_array(pa->c, 1, &n, dv_dtype_get(DV_FLOAT32), NULL, 'C', s, &d)) {
    good = 1;
    for (int rep = 0; rep < 5 && good; rep++) {
      for (int i = 0; i < N; i++) h[i] = (float)(i + pa->seed + rep);
      dv_launch_config lc = cfg1(N / 64, 64, 0, s);
      dv_arg args[] = {DV_ARG_ARRAY(d)};
      good = !dv_copy_to_device(d, hv, s) && !dv_kernel_launch(pa->k, &lc, 1, args) &&
             !dv_copy_to_host(d, rv, s, NULL) && !dv_stream_synchronize(s);
      for (int b = 0; good && b < N / 64; b++)
        for (int t = 0; t < 64; t++)
          if (r[b * 64 + t] != h[b * 64 + 63 - t]) good = 0;
    }
  }
  dv_array_release(d), dv_array_release(hv), dv_array_release(rv);
  dv_stream_release(s);
  pa->ok = good;
  return NULL;
}

static const char *src_freverse =
    "DV_KERNEL(frev, DV_ARRAY(float, a)) {\n"
    "  DV_BIND(float, a);\n"
    "  DV_SHARED(float, s, 64);\n"
    "  int t = dv_thread_idx(0);\n"
    "  dv_i64 base = (dv_i64)dv_block_idx(0) * 64;\n"
    "  s[t] = a[base + t];\n"
    "  dv_syncthreads();\n"
    "  a[base + t] = s[63 - t];\n"
    "}\n";

static void test_streams_concurrently(void **state) {
  (void)state;
  dv_context *c = test_context_or_fail("kernel_cache=off", NULL);
  dv_module *m = test_build(c, "frev.dvk", src_freverse, NULL, NULL);
  dv_kernel *k = kernel_of(m, "frev");
  pthread_t th[3];
  par_arg pa[3];
  for (int i = 0; i < 3; i++) {
    pa[i] = (par_arg){c, k, i * 1000, 0};
    assert_int_equal(pthread_create(&th[i], NULL, par_thread, &pa[i]), 0);
  }
  for (int i = 0; i < 3; i++) pthread_join(th[i], NULL);
  for (int i = 0; i < 3; i++) assert_int_equal(pa[i].ok, 1);
  finish(c, m);
}

/* ---- native handles, wrapped memory, the module image ------------------------- */

static int released_flag;
static void on_release(void *user) { *(int *)user = 1; }

static void test_native_and_wrap(void **state) {
  (void)state;
  dv_context *c = test_context_or_fail("kernel_cache=off", NULL);
  void *nc = (void *)1, *nd = (void *)1;
  assert_ok(dv_context_native(c, &nc, &nd));
  assert_null(nc);
  assert_null(nd);
  void *h = (void *)1;
  assert_status(dv_stream_native(dv_context_default_stream(c), &h), DV_ERR_NOT_SUPPORTED);
  dv_array *a = dev_new(c, 16, DV_FLOAT32);
  void *buf = NULL;
  size_t off = 1;
  assert_ok(dv_array_native(a, &buf, &off));
  assert_non_null(buf);
  assert_int_equal(off, 0);
  /* Foreign memory: a kernel writes into the caller's buffer. */
  static float mine[32];
  released_flag = 0;
  dv_array *w = NULL;
  int64_t n = 32;
  assert_ok(dv_device_array_wrap(c, mine, 0, sizeof mine, 1, &n, dv_dtype_get(DV_FLOAT32), NULL,
                                 on_release, &released_flag, &w));
  dv_module *m = test_build(c, "saxpy.dvk", src_saxpy, NULL, NULL);
  dv_launch_config lc = cfg1(1, 32, 0, NULL);
  for (int i = 0; i < 32; i++) mine[i] = 1.0f;
  dv_arg args[] = {DV_ARG_ARRAY(w), DV_ARG_ARRAY(w), DV_ARG_F32(2.0f), DV_ARG_I32(32)};
  assert_ok(dv_kernel_launch(kernel_of(m, "saxpy"), &lc, 4, args));
  assert_true(mine[31] == 3.0f);
  dv_array_release(w);
  assert_ok(dv_context_flush_deallocs(c));
  assert_int_equal(released_flag, 1);
  dv_array_release(a);
  finish(c, m);
}

/* White box: the backend's build returns an image that module_load takes back. */
static void test_image_roundtrip(void **state) {
  (void)state;
  dv_context *c = test_context_or_fail("kernel_cache=off", NULL);
  const dv_backend *be = c->be;
  char tid[512];
  assert_ok(be->kernel_target_id(c->bst, tid, sizeof tid));
  assert_contains(tid, "cc=");
  size_t hl = strlen(dv__kernel_header), sl = strlen(src_saxpy);
  char *unit = malloc(hl + sl + 64);
  assert_non_null(unit);
  sprintf(unit, "%s\n#line 1 \"img.dvk\"\n%s", dv__kernel_header, src_saxpy);
  dv_build_req req = {"img.dvk", unit, "", 0, 0, NULL};
  dv_bmodule *bm = NULL, *bm2 = NULL;
  void *image = NULL;
  size_t isz = 0;
  char *log = NULL;
  assert_ok(be->module_build(c->bst, &req, &bm, &image, &isz, &log));
  assert_true(isz > 1000);
  dv__free(log);
  assert_ok(be->module_load(c->bst, &req, image, isz, &bm2, &log));
  dv_bkernel *k2 = NULL;
  assert_ok(be->kernel_get(c->bst, bm2, "saxpy", &k2));
  assert_status(be->kernel_get(c->bst, bm2, "nope", &k2), DV_ERR_INVALID_ARGUMENT);
  assert_ok(be->module_unload(c->bst, bm2));
  /* A damaged image is refused, not loaded. */
  assert_true(be->module_load(c->bst, &req, "garbage", 7, &bm2, &log) != DV_OK);
  dv_klimits lim;
  assert_ok(be->kernel_limits(c->bst, &lim));
  assert_int_equal(lim.max_threads_per_block, 1024);
  assert_int_equal(lim.max_shared_per_block, 48 * 1024);
  assert_ok(be->module_unload(c->bst, bm));
  dv_bmodule *keep = NULL;
  assert_ok(be->module_load(c->bst, &req, image, isz, &keep, &log));
  assert_ok(be->module_unload(c->bst, keep));
  dv__free(image);
  free(unit);
  finish(c, NULL);
}

/* Every host allocation on the way (build, kernel lookup, launch, the
 * executor a stream worker sets up, a shared array's first use) fails in
 * turn: each failure is a clean status and leaks nothing (ASan build). */
static void test_host_alloc_failures(void **state) {
  (void)state;
  bool clean = false;
  int fired = 0;
  for (uint64_t k = 1; k < 2000 && !clean; k++) {
    /* A fresh context each time: its worker and helper threads set up
     * their executors at its first launch. */
    dv_context *c = test_context_or_fail("kernel_cache=off", NULL);
    dv_array *a = dev_new(c, 3 * 256, DV_INT32);
    dv_program *p = NULL;
    assert_ok(dv_program_create(c, "reverse.dvk", src_reverse, &p));
    assert_ok(dv_fault_inject(c, DV_FAULT_HOST_ALLOC, k));
    dv_module *m = NULL;
    dv_kernel *kn = NULL;
    dv_status rc = dv_program_build(p, DV_BUILD_NO_CACHE, &m);
    if (!rc) rc = dv_module_kernel(m, "reverse", &kn);
    if (!rc) {
      dv_launch_config lc = cfg1(3, 256, 0, NULL);
      dv_arg args[] = {DV_ARG_ARRAY(a)};
      rc = dv_kernel_launch(kn, &lc, 1, args);
    }
    bool pending = dv__fault_host_pending();
    assert_ok(dv_fault_inject(c, DV_FAULT_HOST_ALLOC, 0));
    /* A failure is reported, never swallowed. */
    if (rc == DV_OK && !pending) fail_msg("k=%llu: an allocation failed but all succeeded",
                                          (unsigned long long)k);
    clean = rc == DV_OK;
    if (rc != DV_OK && rc != DV_ERR_HOST_OUT_OF_MEMORY && rc != DV_ERR_KERNEL_FAULT)
      fail_msg("k=%llu: %s: %s", (unsigned long long)k, dv_status_name(rc), dv_last_error());
    if (rc == DV_ERR_KERNEL_FAULT) assert_contains(dv_last_error(), "out of host memory");
    fired += rc != DV_OK;
    dv_module_release(m);
    dv_program_destroy(p);
    dv_array_release(a);
    finish(c, NULL);
  }
  assert_true(clean);
  assert_true(fired > 5);
}

/* ---- cost (informational; DV_HK_BENCH=1 prints) -------------------------------- */

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static const char *src_bench =
    "DV_KERNEL(empty, DV_ARRAY(int, a)) { DV_BIND(int, a); (void)a; }\n"
    "DV_KERNEL(bars, DV_ARRAY(int, a), int n) {\n"
    "  DV_BIND(int, a);\n"
    "  for (int i = 0; i < n; i++) dv_syncthreads();\n"
    "  a[dv_thread_idx(0)] = n;\n"
    "}\n";

static void test_costs(void **state) {
  (void)state;
  if (!getenv("DV_HK_BENCH")) skip();
  dv_context *c = test_context_or_fail("kernel_cache=off", NULL);
  dv_module *m = test_build(c, "bench.dvk", src_bench, NULL, NULL);
  dv_array *a = dev_new(c, 1024, DV_INT32);
  dv_launch_config lc = cfg1(1, 1, 0, NULL);
  dv_arg args[] = {DV_ARG_ARRAY(a)};
  dv_kernel *e = kernel_of(m, "empty");
  for (int i = 0; i < 100; i++) assert_ok(dv_kernel_launch(e, &lc, 1, args));
  double t0 = now_s();
  int reps = 2000;
  for (int i = 0; i < reps; i++) assert_ok(dv_kernel_launch(e, &lc, 1, args));
  double sync_us = (now_s() - t0) / reps * 1e6;
  dv_stream *s = NULL;
  assert_ok(dv_stream_create(c, 0, &s));
  lc.stream = s;
  t0 = now_s();
  for (int i = 0; i < reps; i++) assert_ok(dv_kernel_launch(e, &lc, 1, args));
  assert_ok(dv_stream_synchronize(s));
  double async_us = (now_s() - t0) / reps * 1e6;
  lc = cfg1(64, 256, 0, NULL);
  assert_ok(dv_kernel_launch(e, &lc, 1, args)); /* starts the helper threads */
  t0 = now_s();
  for (int i = 0; i < 20; i++) assert_ok(dv_kernel_launch(e, &lc, 1, args));
  double thread_ns = (now_s() - t0) / (20.0 * 64 * 256) * 1e9;
  int nb = 2000;
  lc = cfg1(1, 256, 0, NULL);
  dv_arg bargs[] = {DV_ARG_ARRAY(a), DV_ARG_I32(nb)};
  assert_ok(dv_kernel_launch(kernel_of(m, "bars"), &lc, 2, bargs));
  t0 = now_s();
  assert_ok(dv_kernel_launch(kernel_of(m, "bars"), &lc, 2, bargs));
  double bar_ns = (now_s() - t0) / (256.0 * nb) * 1e9;
  printf("host kernels: launch %.1f us synchronous, %.1f us queued; empty kernel %.1f ns per "
         "thread (64x256); barrier %.1f ns per thread (one block of 256)\n", sync_us, async_us,
         thread_ns, bar_ns);
  dv_stream_release(s);
  dv_array_release(a);
  finish(c, m);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_saxpy_many_blocks),
      cmocka_unit_test(test_matmul_tiled),
      cmocka_unit_test(test_barrier_is_needed),
      cmocka_unit_test(test_dynamic_shared_sizes),
      cmocka_unit_test(test_local_arrays_private),
      cmocka_unit_test(test_divergent_barriers),
      cmocka_unit_test(test_fault_on_stream),
      cmocka_unit_test(test_wave_barriers),
      cmocka_unit_test(test_shared_overflow_detected),
      cmocka_unit_test(test_shared_limit),
      cmocka_unit_test(test_faults_do_not_kill),
      cmocka_unit_test(test_stack_overflow_named),
      cmocka_unit_test(test_stack_edge_in_runtime),
      cmocka_unit_test(test_local_and_global_overflow),
      cmocka_unit_test(test_asan_reports_overflows),
      cmocka_unit_test(test_fault_outside_kernel),
      cmocka_unit_test(test_atomics_contention),
      cmocka_unit_test(test_blocks_in_parallel),
      cmocka_unit_test(test_no_compiler),
      cmocka_unit_test(test_compile_error),
      cmocka_unit_test(test_argument_checks),
      cmocka_unit_test(test_view_argument),
      cmocka_unit_test(test_many_arguments),
      cmocka_unit_test(test_constants),
      cmocka_unit_test(test_stream_order_and_release),
      cmocka_unit_test(test_streams_concurrently),
      cmocka_unit_test(test_native_and_wrap),
      cmocka_unit_test(test_image_roundtrip),
      cmocka_unit_test(test_host_alloc_failures),
      cmocka_unit_test(test_costs),
  };
  if (getenv("HK_CHILD")) return child_scenario(getenv("HK_CHILD"));
  char *host_argv[] = {argv[0], (char *)"host", NULL};
  if (argc < 2) argc = 2, argv = host_argv;
  return test_main(argc, argv, "host_kernels", tests, sizeof tests / sizeof tests[0]);
}
