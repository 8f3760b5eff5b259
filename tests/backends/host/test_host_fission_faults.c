/*
 * Region fission (issue 23, src/backends/host/host_fission*.c): faults
 * inside a fission function -- a signal (the report names the block and a
 * thread no later than the faulting one), a fault the runtime raises (the
 * threads' records are made only then), and the ids of a launch with more
 * threads in a dimension than an int holds, which runs without the pass's
 * functions (they compute dv_global_id in int).
 */
#include "fission_common.h"

/* ---- a fault inside a fission function ------------------------------------ */

static const char *k_crash =
    "DV_KERNEL(crash_sync, DV_ARRAY(const float, x), DV_ARRAY(float, out), int who) {\n"
    "  DV_BIND(const float, x); DV_BIND(float, out);\n"
    "  int t = dv_thread_idx(0);\n"
    "  dv_syncthreads();\n"
    "  if (t == who) *(volatile int *)0 = 1;\n"
    "  dv_syncthreads();\n"
    "  out[t] = x[t];\n"
    "}\n";

/* A region that calls nothing after one that calls (the review of issue 23,
 * defect 7): the report's thread is never one after the faulting thread */
static const char *k_crash_call =
    "DV_DEVICE float twice(float a) { return a * 2.0f; }\n"
    "DV_KERNEL(crash_call, DV_ARRAY(const float, x), DV_ARRAY(float, out), int who) {\n"
    "  DV_BIND(const float, x); DV_BIND(float, out);\n"
    "  int t = dv_thread_idx(0);\n"
    "  out[t] = twice(x[t]);\n"
    "  dv_syncthreads();\n"
    "  if (t == who) *(volatile int *)0 = 1;\n"
    "  out[t] += 1.0f;\n"
    "}\n";

static void test_fault_names_no_later_thread(void **state) {
  (void)state;
  float x[32] = {0};
  dv_context *c = mode_ctx("fast");
  dv_module *m = build(c, 0, "crash_call", k_crash_call, "crash_call", "accepted");
  dv_kernel *k = test_kernel(m, "crash_call");
  dv_array *dx = test_dev_from(c, x, 32, DV_FLOAT32);
  dv_array *dout = test_dev_from(c, x, 32, DV_FLOAT32);
  dv_arg a[] = {DV_ARG_ARRAY(dx), DV_ARG_ARRAY(dout), DV_ARG_I32(3)};
  dv_launch_config lc = {{1, 1, 1}, {32, 1, 1}, 0, NULL};
  assert_status(dv_kernel_launch(k, &lc, 3, a), DV_ERR_KERNEL_FAULT);
  const char *e = strstr(dv_last_error(), "thread (");
  int tx = -1;
  if (!e || sscanf(e, "thread (%d", &tx) != 1 || tx < 0 || tx > 3)
    fail_msg("the report names a thread after thread 3: %s", dv_last_error());
  dv_array_release(dx);
  dv_array_release(dout);
  dv_module_release(m);
  assert_ok(dv_context_destroy(c));
}

static void test_fault_in_fission_function(void **state) {
  (void)state;
  float x[32];
  for (int i = 0; i < 32; i++) x[i] = (float)i;
  for (int mi = 0; mi < 2; mi++) {
    /* The signal's report: kernel_check=bounds in checked mode (with on,
     * the access checks report the wild write before it is made). */
    char opt[32];
    snprintf(opt, sizeof opt, "host_mode=%s", modes[mi]);
    dv_context *c = NULL;
    assert_ok(test_context(&c, opt, mi ? "kernel_check=bounds" : "kernel_check=off", NULL));
    dv_module *m = build(c, mi, "crash_sync", k_crash, "crash_sync", "accepted");
    dv_kernel *k = test_kernel(m, "crash_sync");
    dv_array *dx = test_dev_from(c, x, 32, DV_FLOAT32);
    dv_array *dout = test_dev_from(c, x, 32, DV_FLOAT32);
    dv_arg a[] = {DV_ARG_ARRAY(dx), DV_ARG_ARRAY(dout), DV_ARG_I32(3)};
    dv_launch_config lc = {{1, 1, 1}, {32, 1, 1}, 0, NULL};
    assert_status(dv_kernel_launch(k, &lc, 3, a), DV_ERR_KERNEL_FAULT);
    /* fast mode names the thread its record holds, which may lag (host_exec.c) */
    const char *e = dv_last_error();
    if (!strstr(e, "kernel crash_sync, block (0,0,0), thread (") || !strstr(e, "SIGSEGV") ||
        (mi == 1 && !strstr(e, "thread (3,0,0): SIGSEGV")))
      fail_msg("%s mode's report: %s", modes[mi], dv_last_error());
    /* the process and the context go on */
    dv_arg ok[] = {DV_ARG_ARRAY(dx), DV_ARG_ARRAY(dout), DV_ARG_I32(-1)};
    assert_ok(dv_kernel_launch(k, &lc, 3, ok));
    dv_array_release(dx);
    dv_array_release(dout);
    dv_module_release(m);
    assert_ok(dv_context_destroy(c));
  }
}

/* A fault the runtime raises inside a fission function (its threads'
 * records are made only then): the report names the block and thread, and
 * the blocks of the next launch start clean */
static const char *k_big_shared =
    "DV_KERNEL(big_sync, DV_ARRAY(int, a)) {\n"
    "  DV_BIND(int, a);\n"
    "  DV_SHARED(int, s, 8192); /* 32 KiB */\n"
    "  int t = dv_thread_idx(0);\n"
    "  s[t] = t + 1;\n"
    "  dv_syncthreads();\n"
    "  a[dv_global_id(0)] = s[(t + 1) % dv_block_dim(0)];\n"
    "}\n";

static void test_runtime_fault_in_fission_function(void **state) {
  (void)state;
  dv_context *c = mode_ctx("fast");
  dv_module *m = build(c, 0, "big_sync", k_big_shared, "big_sync", "accepted");
  dv_kernel *k = test_kernel(m, "big_sync");
  int init[256] = {0};
  dv_array *da = test_dev_from(c, init, 256, DV_INT32);
  dv_arg a[] = {DV_ARG_ARRAY(da)};
  dv_launch_config lc = {{4, 1, 1}, {64, 1, 1}, 20000, NULL}; /* 32 KiB + 20,000 B > 48 KiB */
  assert_status(dv_kernel_launch(k, &lc, 1, a), DV_ERR_KERNEL_FAULT);
  const char *e = dv_last_error();
  if (!strstr(e, "kernel big_sync, block (0,0,0), thread (0,0,0)") ||
      !strstr(e, "shared memory exceeds"))
    fail_msg("the report: %s", e);
  lc.dynamic_shared = 0; /* fits: every block runs, in the same executors */
  assert_ok(dv_kernel_launch(k, &lc, 1, a));
  int got[256];
  test_to_host(da, got);
  for (int i = 0; i < 256; i++)
    if (got[i] != (i % 64 + 1) % 64 + 1) fail_msg("a[%d] = %d", i, got[i]);
  dv_array_release(da);
  dv_module_release(m);
  assert_ok(dv_context_destroy(c));
}

/* dv_global_id past INT_MAX: the pass's functions compute it in int, so a
 * launch with more threads in a dimension than an int holds runs without
 * them (host_fission_gen.c); the last block's ids are exact */
static const char *k_big_grid =
    "DV_KERNEL(big_grid, DV_ARRAY(dv_i64, out)) {\n"
    "  DV_BIND(dv_i64, out);\n"
    "  if (dv_block_idx(0) < dv_grid_dim(0) - 1) return;\n"
    "  int t = dv_thread_idx(0);\n"
    "  out[t] = 0;\n"
    "  dv_syncthreads();\n"
    "  for (int k = 0; k < 2; k++) out[t] += dv_global_id(0);\n"
    "}\n";

static void test_global_id_past_int(void **state) {
  (void)state;
  dv_context *c = mode_ctx("fast");
  dv_module *m = build(c, 0, "big_grid", k_big_grid, "big_grid", "accepted");
  dv_kernel *k = test_kernel(m, "big_grid");
  int64_t init[1024] = {0};
  dv_array *d = test_dev_from(c, init, 1024, DV_INT64);
  dv_arg a[] = {DV_ARG_ARRAY(d)};
  const uint32_t blocks = (1u << 21) + 1; /* 1024 threads each: 2^31 + 1024 threads */
  dv_launch_config lc = {{blocks, 1, 1}, {1024, 1, 1}, 0, NULL};
  assert_ok(dv_kernel_launch(k, &lc, 1, a));
  int64_t got[1024];
  test_to_host(d, got);
  for (int t = 0; t < 1024; t++) {
    int64_t want = 2 * ((int64_t)(blocks - 1) * 1024 + t);
    if (got[t] != want) fail_msg("out[%d] = %lld, not %lld", t, (long long)got[t], (long long)want);
  }
  /* and within an int, the same kernel on the pass's function */
  lc.grid.x = 3;
  assert_ok(dv_kernel_launch(k, &lc, 1, a));
  test_to_host(d, got);
  for (int t = 0; t < 1024; t++)
    if (got[t] != 2 * (2048 + t)) fail_msg("small grid: out[%d] = %lld", t, (long long)got[t]);
  dv_array_release(d);
  dv_module_release(m);
  assert_ok(dv_context_destroy(c));
}

int main(int argc, char **argv) {
  fission_detect_libclang();
  int begin = kernel_suite_begin(argc, argv, "host_fission_faults", NULL, g_cache_dir, sizeof g_cache_dir);
  if (begin) return begin;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fault_in_fission_function),
      cmocka_unit_test(test_fault_names_no_later_thread),
      cmocka_unit_test(test_runtime_fault_in_fission_function),
      cmocka_unit_test(test_global_id_past_int),
  };
  return kernel_suite_end(g_cache_dir, test_main(argc, argv, "host_fission_faults", tests,
                                                 sizeof tests / sizeof tests[0]));
}
