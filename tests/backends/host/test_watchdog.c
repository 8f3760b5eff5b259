/*
 * The host simulator's watchdog (option kernel_timeout, tools/watchdog.c)
 * and the source lines of code addresses it reports (toolchain/lines.c).
 *
 * Each scenario runs in both of the simulator's modes (a context with
 * host_mode=checked, one with host_mode=fast): a kernel that never ends
 * (a spin, a loop around a barrier, a dv_printf loop, one block spinning
 * while the others finish) fails with DV_ERR_KERNEL_TIMEOUT well before a
 * generous bound (the test would hang without the watchdog), its message
 * names the block, the threads and the line; the stream and the context
 * go on (a launch and copies after it work; the context destroys clean).
 * Kernels that end are unaffected, however long the stream runs.
 */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <time.h>
#include <unistd.h>

#include "common.h"
#include "array/array.h"
#include "backends/backend.h"
#include "backends/host/toolchain/toolchain.h" /* hk_line_of, white-box */
#include "core/core.h"
#include "kernel/kernel_internal.h"

#define TIMEOUT "0.3"
#define BOUND_S 60.0 /* a launch stopped by the watchdog returns long before this */

static const char *const modes[] = {"checked", "fast"};

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static dv_context *new_ctx(const char *mode, const char *extra) {
  char m[64];
  snprintf(m, sizeof m, "host_mode=%s", mode);
  dv_context *c = NULL;
  dv_status rc = test_context(&c, "kernel_cache=off", "kernel_timeout=" TIMEOUT, m, extra,
                              (const char *)NULL);
  if (rc) fail_msg("context: %s: %s", dv_status_name(rc), dv_last_error());
  return c;
}

static dv_kernel *kernel_of(dv_module *m, const char *name) {
  dv_kernel *k = NULL;
  assert_ok(dv_module_kernel(m, name, &k));
  return k;
}

static dv_launch_config cfg1(uint32_t grid, uint32_t block, dv_stream *s) {
  dv_launch_config c;
  memset(&c, 0, sizeof c);
  c.grid.x = grid;
  c.block.x = block;
  c.stream = s;
  return c;
}

static void assert_contains(const char *hay, const char *needle) {
  if (!strstr(hay, needle)) fail_msg("expected \"%s\" in: %s", needle, hay);
}

/* A launch that must time out: its status, the time it took, its message
 * (copied into msg). */
static void launch_times_out(dv_kernel *k, const dv_launch_config *lc, size_t nargs,
                             const dv_arg *args, char *msg, size_t cap) {
  double t0 = now_s();
  dv_status rc = dv_kernel_launch(k, lc, nargs, args);
  if (lc->stream && rc == DV_OK) rc = dv_stream_synchronize(lc->stream);
  double dt = now_s() - t0;
  snprintf(msg, cap, "%s", dv_last_error());
  if (rc != DV_ERR_KERNEL_TIMEOUT)
    fail_msg("expected DV_ERR_KERNEL_TIMEOUT, got %s: %s", dv_status_name(rc), msg);
  if (dt > BOUND_S) fail_msg("the timed-out launch took %.1f s", dt);
  if (dt < 0.25) fail_msg("the launch stopped after %.3f s, before its timeout", dt);
  printf("  %s\n", msg);
}

/* The context goes on after a timeout: a launch on the same stream and
 * copies both ways, checked. */
static const char *src_fill =
    "DV_KERNEL(fill, DV_ARRAY(int, out), int v) {\n"
    "  DV_BIND(int, out);\n"
    "  out[dv_global_id(0)] = v + (int)dv_global_id(0);\n"
    "}\n";

static void still_works(dv_context *c, dv_stream *s) {
  dv_module *m = test_build(c, "fill.dvk", src_fill, NULL, NULL);
  int64_t n = 256;
  dv_array *d = NULL;
  assert_ok(dv_device_array(c, 1, &n, dv_dtype_get(DV_INT32), NULL, 'C', s, &d));
  dv_launch_config lc = cfg1(4, 64, s);
  dv_arg args[] = {DV_ARG_ARRAY(d), DV_ARG_I32(7)};
  assert_ok(dv_kernel_launch(kernel_of(m, "fill"), &lc, 2, args));
  if (s) assert_ok(dv_stream_synchronize(s));
  int h[256];
  test_to_host(d, h);
  for (int i = 0; i < 256; i++) assert_int_equal(h[i], 7 + i);
  dv_array_release(d);
  dv_module_release(m);
}

static void finish(dv_context *c) {
  assert_ok(dv_context_check_memory(c));
  assert_ok(dv_context_destroy(c));
}

/* ---- a loop that never ends ------------------------------------------------ */

static const char *src_spin =
    "DV_KERNEL(spin, DV_ARRAY(int, flag), DV_ARRAY(int, out)) {\n" /* 1 */
    "  DV_BIND(int, flag); DV_BIND(int, out);\n"                    /* 2 */
    "  volatile int *f = flag;\n"                                   /* 3 */
    "  int n = 0;\n"                                                /* 4 */
    "  while (f[0] == 0)\n"                                         /* 5 */
    "    n++;\n"                                                    /* 6 */
    "  out[dv_global_id(0)] = n;\n"                                 /* 7 */
    "}\n";

static void test_infinite_loop(void **state) {
  (void)state;
  for (int q = 0; q < 2; q++) {
    dv_context *c = new_ctx(modes[q], NULL);
    dv_module *m = test_build(c, "spin.dvk", src_spin, NULL, NULL);
    int64_t n = 64 * 32;
    dv_array *flag = NULL, *out = NULL;
    assert_ok(dv_device_array(c, 1, &n, dv_dtype_get(DV_INT32), NULL, 'C', NULL, &flag));
    assert_ok(dv_device_array(c, 1, &n, dv_dtype_get(DV_INT32), NULL, 'C', NULL, &out));
    assert_ok(dv_array_memset(flag, 0, NULL));
    dv_stream *s = NULL;
    assert_ok(dv_stream_create(c, 0, &s));
    /* 128 blocks: a few run at once (the worker and at most 63 helpers,
     * each spinning in its first block), the rest wait. */
    dv_launch_config lc = cfg1(128, 32, s);
    dv_arg args[] = {DV_ARG_ARRAY(flag), DV_ARG_ARRAY(out)};
    char msg[1024];
    launch_times_out(kernel_of(m, "spin"), &lc, 2, args, msg, sizeof msg);
    assert_contains(msg, "kernel spin timed out after 0.3 s");
    assert_contains(msg, "block (0,0,0): 1 thread at spin.dvk:");
    /* The spinning line: the loop's test or its body. */
    if (!strstr(msg, "spin.dvk:5 (running") && !strstr(msg, "spin.dvk:6 (running"))
      fail_msg("expected the loop's line (5 or 6) in: %s", msg);
    if (q == 0) { /* checked mode: thread 0 runs, the others wait their turn */
      assert_contains(msg, "1 thread at spin.dvk:");
      assert_contains(msg, "31 threads not started");
    } else { /* fast mode: the block function runs its threads in turn */
      assert_contains(msg, "thread (0,0,0) or one after it");
    }
    assert_contains(msg, "not started (");
    assert_contains(msg, "blocks (");
    still_works(c, s);
    /* And again: the same kernel times out the same way. */
    launch_times_out(kernel_of(m, "spin"), &lc, 2, args, msg, sizeof msg);
    assert_contains(msg, "block (0,0,0)");
    dv_stream_release(s);
    dv_array_release(flag);
    dv_array_release(out);
    dv_module_release(m);
    finish(c);
  }
}

/* ---- a loop around a barrier ------------------------------------------------ */

static const char *src_barrier_loop =
    "DV_KERNEL(barloop, DV_ARRAY(int, out)) {\n"                                  /* 1 */
    "  DV_BIND(int, out);\n"                                                      /* 2 */
    "  DV_SHARED(int, s, 64);\n"                                                  /* 3 */
    "  int t = dv_thread_idx(0); s[t] = 0; dv_syncthreads();\n"                   /* 4 */
    /* race-free and initialized (the tests run with kernel_check=on) */
    "  for (;;) { int v = s[(t + 1) % 64] + 1; dv_syncthreads(); s[t] = v; dv_syncthreads(); out[t] = s[t]; }\n" /* 5 */
    "}\n";

static void test_barrier_loop(void **state) {
  (void)state;
  for (int q = 0; q < 2; q++) {
    dv_context *c = new_ctx(modes[q], NULL);
    dv_module *m = test_build(c, "barloop.dvk", src_barrier_loop, NULL, NULL);
    int64_t n = 64;
    dv_array *out = NULL;
    assert_ok(dv_device_array(c, 1, &n, dv_dtype_get(DV_INT32), NULL, 'C', NULL, &out));
    dv_launch_config lc = cfg1(1, 64, NULL); /* synchronous: the launch returns it */
    dv_arg args[] = {DV_ARG_ARRAY(out)};
    char msg[1024];
    launch_times_out(kernel_of(m, "barloop"), &lc, 1, args, msg, sizeof msg);
    assert_contains(msg, "kernel barloop timed out after 0.3 s (option kernel_timeout): block (0,0,0): ");
    /* Every place in the loop is line 5: the running thread's, the barrier's;
     * in fast mode region fission may run the block (where libclang is). */
    if (!strstr(msg, "barloop.dvk:5") && !(q == 1 && strstr(msg, "region fission")))
      fail_msg("expected barloop.dvk:5 in: %s", msg);
    assert_true(strstr(msg, "thread") != NULL);
    if (q == 0) {
      /* Checked mode names each thread's state; the 64 are all accounted for. */
      int total = 0;
      for (const char *p = strstr(msg, "block (0,0,0): ") + 15; *p;) {
        int k = 0;
        if (sscanf(p, "%d thread", &k) == 1) total += k;
        const char *comma = strstr(p, ", ");
        if (!comma) break;
        p = comma + 2;
      }
      assert_int_equal(total, 64);
    }
    still_works(c, NULL);
    dv_array_release(out);
    dv_module_release(m);
    finish(c);
  }
}

/* ---- one block spins, the others finish -------------------------------------- */

static const char *src_one_block =
    "DV_KERNEL(oneblock, DV_ARRAY(int, flag), DV_ARRAY(int, out)) {\n" /* 1 */
    "  DV_BIND(int, flag); DV_BIND(int, out);\n"                        /* 2 */
    "  volatile int *f = flag;\n"                                       /* 3 */
    "  if (dv_block_idx(0) == 3 && dv_thread_idx(0) == 5)\n"            /* 4 */
    "    while (f[0] == 0) { }\n"                                       /* 5 */
    "  out[dv_global_id(0)] = 1;\n"                                     /* 6 */
    "}\n";

static void test_one_block_spins(void **state) {
  (void)state;
  /* checked and fast mode with kernel_check=bounds, then checked with every
   * access check on: the blocks that finish beside a spinning one, on the
   * other executors (the access checks run a launch's blocks in parallel too) */
  for (int q = 0; q < 3; q++) {
    dv_context *c = new_ctx(modes[q % 2], q < 2 ? "kernel_check=bounds" : "kernel_check=on");
    dv_module *m = test_build(c, "oneblock.dvk", src_one_block, NULL, NULL);
    int64_t n = 8 * 32;
    dv_array *flag = NULL, *out = NULL;
    assert_ok(dv_device_array(c, 1, &n, dv_dtype_get(DV_INT32), NULL, 'C', NULL, &flag));
    assert_ok(dv_device_array(c, 1, &n, dv_dtype_get(DV_INT32), NULL, 'C', NULL, &out));
    assert_ok(dv_array_memset(flag, 0, NULL));
    assert_ok(dv_array_memset(out, 0, NULL));
    dv_launch_config lc = cfg1(8, 32, NULL);
    dv_arg args[] = {DV_ARG_ARRAY(flag), DV_ARG_ARRAY(out)};
    char msg[1024];
    launch_times_out(kernel_of(m, "oneblock"), &lc, 2, args, msg, sizeof msg);
    assert_contains(msg, "kernel oneblock timed out after 0.3 s (option kernel_timeout): block (3,0,0): ");
    assert_contains(msg, "oneblock.dvk:5 (running");
    assert_contains(msg, "7 blocks finished");
    assert_null(strstr(msg, "not started ("));
    if (q != 1) {
      assert_contains(msg, "5 threads finished");
      assert_contains(msg, "26 threads not started");
    } else { /* the block function's record may lag the thread it runs */
      assert_contains(msg, "or one after it, in fast mode's block function");
    }
    /* The other blocks did their work. */
    int h[256];
    test_to_host(out, h);
    for (int i = 0; i < 256; i++)
      if (i / 32 != 3) assert_int_equal(h[i], 1);
    still_works(c, NULL);
    dv_array_release(flag);
    dv_array_release(out);
    dv_module_release(m);
    finish(c);
  }
}

/* ---- stopped in the runtime: a dv_printf loop -------------------------------- */

static const char *src_print_loop =
    "DV_KERNEL(printloop, int n) {\n"           /* 1 */
    "  for (int i = 0; i >= 0; i = (i + 1) % n)\n" /* 2 */
    "    dv_printf(\"%d\\n\", i);\n"             /* 3 */
    "}\n";

static void test_printf_loop(void **state) {
  (void)state;
  for (int q = 0; q < 2; q++) {
    dv_context *c = new_ctx(modes[q], "host_printf_buffer=1024");
    dv_module *m = test_build(c, "printloop.dvk", src_print_loop, NULL, NULL);
    dv_launch_config lc = cfg1(1, 4, NULL);
    dv_arg args[] = {DV_ARG_I32(1000)};
    char msg[1024];
    launch_times_out(kernel_of(m, "printloop"), &lc, 1, args, msg, sizeof msg);
    assert_contains(msg, "kernel printloop timed out after 0.3 s (option kernel_timeout): block (0,0,0): ");
    /* Stopped in the kernel's loop or on its way back from dv_printf. */
    if (!strstr(msg, "printloop.dvk:2 (running") && !strstr(msg, "printloop.dvk:3 (running"))
      fail_msg("expected the loop's line (2 or 3) in: %s", msg);
    still_works(c, NULL);
    dv_module_release(m);
    finish(c);
  }
}

/* ---- launches that end are unaffected ---------------------------------------- */

static const char *src_work =
    "DV_KERNEL(work, DV_ARRAY(float, out), int iters) {\n"
    "  DV_BIND(float, out);\n"
    "  float x = (float)dv_global_id(0);\n"
    "  for (int i = 0; i < iters; i++) x = x * 0.999f + 1.0f;\n"
    "  out[dv_global_id(0)] = x;\n"
    "}\n";

static void test_finishing_kernels_unaffected(void **state) {
  (void)state;
  for (int q = 0; q < 2; q++) {
    dv_context *c = new_ctx(modes[q], NULL);
    dv_module *m = test_build(c, "work.dvk", src_work, NULL, NULL);
    int64_t n = 4096;
    dv_array *out = NULL;
    assert_ok(dv_device_array(c, 1, &n, dv_dtype_get(DV_FLOAT32), NULL, 'C', NULL, &out));
    dv_stream *s = NULL;
    assert_ok(dv_stream_create(c, 0, &s));
    dv_launch_config lc = cfg1(16, 256, s);
    dv_arg args[] = {DV_ARG_ARRAY(out), DV_ARG_I32(200)};
    /* Launches back to back for well over the timeout: each has its own deadline. */
    double t0 = now_s();
    int launches = 0;
    while (now_s() - t0 < 1.0 || launches < 20) {
      assert_ok(dv_kernel_launch(kernel_of(m, "work"), &lc, 2, args));
      launches++;
      if (launches % 10 == 0) assert_ok(dv_stream_synchronize(s));
    }
    assert_ok(dv_stream_synchronize(s));
    float h[4096];
    test_to_host(out, h);
    for (int i = 0; i < 4096; i += 97) {
      float x = (float)i;
      for (int k = 0; k < 200; k++) x = x * 0.999f + 1.0f;
      assert_float_equal(h[i], x, 1e-3 * (x > 1 ? x : 1));
    }
    dv_stream_release(s);
    dv_array_release(out);
    dv_module_release(m);
    finish(c);
  }
}

/* ---- hk_line_of, white-box ---------------------------------------------------- */

static void test_lines_of_addresses(void **state) {
  (void)state;
  dv_context *c = new_ctx("checked", NULL);
  /* The whole kernel on line 3: every instruction of it is that line's. */
  dv_module *m = test_build(c, "lines.dvk", "\n\nDV_KERNEL(here, DV_ARRAY(int, out)) { "
                                       "DV_BIND(int, out); out[0] = 1; }\n", NULL, NULL);
  dv_kernel *k = kernel_of(m, "here");
  const hk_mview *bm = hk_module_view(m->bm);
  void *fn = dlsym(bm->dl, "here");
  assert_non_null(fn);
  char a[200], b[200], d[200];
  /* The function's first instruction. */
  hk_line_of_pc(bm, fn, a, sizeof a);
  assert_string_equal(a, "lines.dvk:3");
  /* A return address just past it names the same place; asked twice, the
   * second answer is the cached one. */
  hk_line_of(bm, (const char *)fn + 1, b, sizeof b);
  assert_string_equal(b, "lines.dvk:3");
  hk_line_of(bm, (const char *)fn + 1, d, sizeof d);
  assert_string_equal(d, b);
  /* An address outside the module: its object and symbol. */
  hk_line_of_pc(bm, (const void *)getpid, a, sizeof a);
  assert_contains(a, "+0x0 in libc");
  uintptr_t lo = 0, hi = 0;
  assert_true(hk_module_text(bm, &lo, &hi));
  assert_true((uintptr_t)fn >= lo && (uintptr_t)fn < hi);
  (void)k;
  dv_module_release(m);
  finish(c);

  /* Without addr2line: the module and the offset, not a guess. */
  const char *path = getenv("PATH");
  char *saved = path ? strdup(path) : NULL;
  c = new_ctx("checked", NULL);
  m = test_build(c, "lines.dvk", "DV_KERNEL(here, DV_ARRAY(int, out)) {\n  DV_BIND(int, out);\n"
                            "  out[0] = 1;\n}\n", NULL, NULL);
  bm = hk_module_view(m->bm);
  fn = dlsym(bm->dl, "here");
  setenv("PATH", "/nonexistent-devarray-test", 1);
  hk_line_of_pc(bm, fn, a, sizeof a);
  if (saved) setenv("PATH", saved, 1); else unsetenv("PATH");
  free(saved);
  assert_contains(a, "lines.dvk+0x");
  dv_module_release(m);
  finish(c);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_lines_of_addresses),
      cmocka_unit_test(test_infinite_loop),
      cmocka_unit_test(test_barrier_loop),
      cmocka_unit_test(test_one_block_spins),
      cmocka_unit_test(test_printf_loop),
      cmocka_unit_test(test_finishing_kernels_unaffected),
  };
  char *host_argv[] = {argv[0], (char *)"host", NULL};
  if (argc < 2) argc = 2, argv = host_argv;
  /* WATCHDOG_TEST=name runs that test alone. */
  const char *only = getenv("WATCHDOG_TEST");
  for (size_t i = 0; only && i < sizeof tests / sizeof tests[0]; i++)
    if (strcmp(tests[i].name, only) == 0) return test_main(argc, argv, "watchdog", &tests[i], 1);
  return test_main(argc, argv, "watchdog", tests, sizeof tests / sizeof tests[0]);
}
