/*
 * The host simulator's fast mode (issue 23): kernels run through their
 * block functions, a loop over the block's threads, and fall back to a
 * fiber per thread from the first thread that waits at a barrier or wave
 * operation (src/backends/host/host_exec.c, host_rt.c's hk_loop_sync).  The
 * cases where the loop and the runtime meet, each run in a fast and a
 * checked context and compared with each other and with a reference
 * computed here: a block whose first runtime call comes from a thread in
 * the middle (the threads before it ended inside the loop), barriers in
 * odd 3-D blocks (a new runner starts mid-row and mid-plane), a divergent
 * barrier after early returns (the same report in both modes), a fault
 * inside the loop (block named; the thread as the mode can know it), and
 * kernels the kernel layer cannot name the arguments of (no block
 * function: fast mode calls them per thread).
 */
#include "common.h"

static char g_cache_dir[256];

static dv_context *mode_ctx(const char *mode) {
  char opt[32];
  snprintf(opt, sizeof opt, "host_mode=%s", mode);
  dv_context *c = NULL;
  assert_ok(test_context(&c, opt, NULL));
  char got[32];
  assert_ok(dv_context_option(c, "host_mode", got, sizeof got, NULL));
  assert_string_equal(got, mode);
  return c;
}

static const char *const modes[2] = {"fast", "checked"};

/* ---- the options a context runs with ------------------------------------------ */

/* dv_context_option gives the values the context runs with: what follows
 * host_mode where it was left at auto (review of issue 23: it said "auto"
 * and ""), and what was set explicitly as it was set. */
static void test_options_resolved(void **state) {
  (void)state;
  const char *want[2][3] = {{"off", "off", "-O3 -march=native"}, {"on", "on", "-O2"}};
  const char *names[3] = {"host_guard", "kernel_check", "host_cflags"};
  for (int mi = 0; mi < 2; mi++) {
    dv_context *c = mode_ctx(modes[mi]);
    for (int i = 0; i < 3; i++) {
      char got[128];
      dv_option_source src;
      assert_ok(dv_context_option(c, names[i], got, sizeof got, &src));
      if (strcmp(got, want[mi][i])) fail_msg("%s mode: %s = \"%s\", expected \"%s\"", modes[mi], names[i], got, want[mi][i]);
    }
    assert_ok(dv_context_destroy(c));
  }
  dv_context *c = NULL;
  assert_ok(test_context(&c, "host_mode=fast", "host_guard=on", "host_cflags=-O1", NULL));
  char got[128];
  assert_ok(dv_context_option(c, "host_guard", got, sizeof got, NULL));
  assert_string_equal(got, "on");
  assert_ok(dv_context_option(c, "kernel_check", got, sizeof got, NULL));
  assert_string_equal(got, "off");
  assert_ok(dv_context_option(c, "host_cflags", got, sizeof got, NULL));
  assert_string_equal(got, "-O1");
  assert_ok(dv_context_destroy(c));
}

/* ---- a block's first runtime call from a thread in its middle ---------- */

static const char *k_late =
    "DV_KERNEL(late, DV_ARRAY(int, out), int n) {\n"
    "  DV_BIND(int, out);\n"
    "  int t = dv_thread_idx(0);\n"
    "  dv_i64 g = dv_global_id(0);\n"
    "  int v = t;\n"
    "  if (t >= n) v += 1000 * (int)__builtin_popcountll(dv_wave_ballot(t % 3 == 0));\n"
    "  out[g] = v;\n"
    "}\n";

static void test_runtime_entered_late(void **state) {
  (void)state;
  enum { B = 128, G = 3, N = B * G };
  int out[2][N];
  for (int mi = 0; mi < 2; mi++) {
    dv_context *c = mode_ctx(modes[mi]);
    dv_module *m = test_build(c, "late", k_late, NULL, NULL);
    dv_kernel *k = test_kernel(m, "late");
    dv_array *d = NULL;
    int64_t n = N;
    assert_ok(dv_device_array(c, 1, &n, dv_dtype_get(DV_INT32), NULL, 'C', NULL, &d));
    /* Waves of 32 (host_wave_size's default): threads 64.. of each block,
     * two whole waves, take a ballot; 0..63 never call the runtime. */
    dv_arg a[] = {DV_ARG_ARRAY(d), DV_ARG_I32(64)};
    dv_launch_config lc = {{G, 1, 1}, {B, 1, 1}, 0, NULL};
    assert_ok(dv_kernel_launch(k, &lc, 2, a));
    test_to_host(d, out[mi]);
    dv_array_release(d);
    dv_module_release(m);
    assert_ok(dv_context_destroy(c));
  }
  for (int g = 0; g < N; g++) {
    int t = g % B, want = t;
    if (t >= 64) {
      int w0 = t - t % 32, ones = 0;
      for (int j = w0; j < w0 + 32; j++) ones += j % 3 == 0;
      want += 1000 * ones;
    }
    if (out[0][g] != want || out[1][g] != want)
      fail_msg("element %d: fast %d, checked %d, expected %d", g, out[0][g], out[1][g], want);
  }
}

/* ---- a runtime call in one late block of many ------------------------------ */

/* Blocks whose threads never call the runtime run one after the other on
 * one runner (host_exec.c's hk_runner_loop); block 37 alone declares a
 * shared array and waits at a barrier (uniform within the block). */
static const char *k_lateblock =
    "DV_KERNEL(lateblock, DV_ARRAY(int, out)) {\n"
    "  DV_BIND(int, out);\n"
    "  int t = dv_thread_idx(0);\n"
    "  dv_i64 g = dv_global_id(0);\n"
    "  if (dv_block_idx(0) == 37) {\n"
    "    DV_SHARED(int, s, 32);\n"
    "    s[t] = t * 3;\n"
    "    dv_syncthreads();\n"
    "    out[g] = s[31 - t];\n"
    "  } else {\n"
    "    out[g] = (int)g;\n"
    "  }\n"
    "}\n";

static void test_runtime_in_a_late_block(void **state) {
  (void)state;
  enum { G = 64, B = 32, N = G * B };
  static int out[2][N];
  for (int mi = 0; mi < 2; mi++) {
    dv_context *c = mode_ctx(modes[mi]);
    dv_module *m = test_build(c, "lateblock", k_lateblock, NULL, NULL);
    dv_kernel *k = test_kernel(m, "lateblock");
    dv_array *d = NULL;
    int64_t n = N;
    assert_ok(dv_device_array(c, 1, &n, dv_dtype_get(DV_INT32), NULL, 'C', NULL, &d));
    dv_arg a[] = {DV_ARG_ARRAY(d)};
    dv_launch_config lc = {{G, 1, 1}, {B, 1, 1}, 0, NULL};
    for (int rep = 0; rep < 3; rep++) assert_ok(dv_kernel_launch(k, &lc, 1, a));
    test_to_host(d, out[mi]);
    dv_array_release(d);
    dv_module_release(m);
    assert_ok(dv_context_destroy(c));
  }
  for (int g = 0; g < N; g++) {
    int want = g / B == 37 ? (31 - g % B) * 3 : g;
    if (out[0][g] != want || out[1][g] != want)
      fail_msg("element %d: fast %d, checked %d, expected %d", g, out[0][g], out[1][g], want);
  }
}

/* ---- barriers in an odd 3-D block --------------------------------------- */

static const char *k_odd =
    "DV_KERNEL(odd, DV_ARRAY(int, out), int rounds) {\n"
    "  DV_BIND(int, out);\n"
    "  DV_SHARED(int, s, 30);\n"
    "  int x = dv_thread_idx(0), y = dv_thread_idx(1), z = dv_thread_idx(2);\n"
    "  int lin = x + 5 * (y + 3 * z);\n"
    "  int b = dv_block_idx(0) + 2 * dv_block_idx(2);\n"
    "  int acc = lin;\n"
    "  for (int r = 0; r < rounds; r++) {\n"
    "    s[lin] = acc + b;\n"
    "    dv_syncthreads();\n"
    "    acc = s[(lin + r + 1) % 30] * 3 + x - y + z;\n"
    "    dv_syncthreads();\n"
    "  }\n"
    "  out[b * 30 + lin] = acc;\n"
    "}\n";

static void test_barriers_odd_3d_block(void **state) {
  (void)state;
  enum { NB = 4, R = 5 };
  int out[2][NB * 30];
  for (int mi = 0; mi < 2; mi++) {
    dv_context *c = mode_ctx(modes[mi]);
    dv_module *m = test_build(c, "odd", k_odd, NULL, NULL);
    dv_kernel *k = test_kernel(m, "odd");
    dv_array *d = NULL;
    int64_t n = NB * 30;
    assert_ok(dv_device_array(c, 1, &n, dv_dtype_get(DV_INT32), NULL, 'C', NULL, &d));
    dv_arg a[] = {DV_ARG_ARRAY(d), DV_ARG_I32(R)};
    dv_launch_config lc = {{2, 1, 2}, {5, 3, 2}, 0, NULL};
    assert_ok(dv_kernel_launch(k, &lc, 2, a));
    test_to_host(d, out[mi]);
    dv_array_release(d);
    dv_module_release(m);
    assert_ok(dv_context_destroy(c));
  }
  /* The reference: the block's threads in lockstep. */
  for (int b = 0; b < NB; b++) {
    int acc[30], s[30];
    for (int l = 0; l < 30; l++) acc[l] = l;
    for (int r = 0; r < R; r++) {
      for (int l = 0; l < 30; l++) s[l] = acc[l] + b;
      for (int l = 0; l < 30; l++) {
        int x = l % 5, y = (l / 5) % 3, z = l / 15;
        acc[l] = s[(l + r + 1) % 30] * 3 + x - y + z;
      }
    }
    for (int l = 0; l < 30; l++) {
      int want = acc[l], f = out[0][b * 30 + l], ch = out[1][b * 30 + l];
      if (f != want || ch != want)
        fail_msg("block %d thread %d: fast %d, checked %d, expected %d", b, l, f, ch, want);
    }
  }
}

/* ---- a divergent barrier after early returns ----------------------------- */

static const char *k_early =
    "DV_KERNEL(early, DV_ARRAY(int, out)) {\n"
    "  DV_BIND(int, out);\n"
    "  int t = dv_thread_idx(0);\n"
    "  out[t] = t;\n"
    "  if (t < 5) return;\n"
    "  dv_syncthreads();\n"
    "}\n";

static void test_divergent_after_early_return(void **state) {
  (void)state;
  char msg[2][700];
  for (int mi = 0; mi < 2; mi++) {
    dv_context *c = mode_ctx(modes[mi]);
    dv_module *m = test_build(c, "early", k_early, NULL, NULL);
    dv_kernel *k = test_kernel(m, "early");
    dv_array *d = NULL;
    int64_t n = 32;
    assert_ok(dv_device_array(c, 1, &n, dv_dtype_get(DV_INT32), NULL, 'C', NULL, &d));
    dv_arg a[] = {DV_ARG_ARRAY(d)};
    dv_launch_config lc = {{1, 1, 1}, {32, 1, 1}, 0, NULL};
    assert_status(dv_kernel_launch(k, &lc, 1, a), DV_ERR_KERNEL_FAULT);
    snprintf(msg[mi], sizeof msg[mi], "%s", dv_last_error());
    dv_array_release(d);
    dv_module_release(m);
    assert_ok(dv_context_destroy(c));
  }
  if (!strstr(msg[0], "divergent barrier") || !strstr(msg[0], "27 threads wait") ||
      !strstr(msg[0], "5 threads exited (first: thread (0,0,0))"))
    fail_msg("fast mode's report: %s", msg[0]);
  assert_string_equal(msg[0], msg[1]);
}

/* ---- a fault inside the loop ---------------------------------------------- */

static const char *k_crash =
    "DV_KERNEL(crash, DV_ARRAY(int, out), int bad) {\n"
    "  DV_BIND(int, out);\n"
    "  dv_i64 g = dv_global_id(0);\n"
    "  int *p = out;\n"
    "  if (g == bad) p = (int *)0;\n"
    "  p[g] = 1;\n"
    "}\n";

static void test_fault_in_loop(void **state) {
  (void)state;
  for (int mi = 0; mi < 2; mi++) {
    /* The signal's report: kernel_check=bounds (with on, checked mode's
     * default, the access checks report the wild write before it is made). */
    char opt[32];
    snprintf(opt, sizeof opt, "host_mode=%s", modes[mi]);
    dv_context *c = NULL;
    assert_ok(test_context(&c, opt, mi ? "kernel_check=bounds" : NULL, NULL));
    dv_module *m = test_build(c, "crash", k_crash, NULL, NULL);
    dv_kernel *k = test_kernel(m, "crash");
    dv_array *d = NULL;
    int64_t n = 128;
    assert_ok(dv_device_array(c, 1, &n, dv_dtype_get(DV_INT32), NULL, 'C', NULL, &d));
    dv_arg a[] = {DV_ARG_ARRAY(d), DV_ARG_I32(64 + 37)};
    dv_launch_config lc = {{2, 1, 1}, {64, 1, 1}, 0, NULL};
    assert_status(dv_kernel_launch(k, &lc, 2, a), DV_ERR_KERNEL_FAULT);
    const char *e = dv_last_error();
    if (!strstr(e, "kernel crash, block (1,0,0), thread (") || !strstr(e, "SIGSEGV"))
      fail_msg("%s mode: %s", modes[mi], e);
    if (mi == 1 && !strstr(e, "thread (37,0,0): SIGSEGV")) fail_msg("checked mode: %s", e);
    if (mi == 0 && !strstr(e, "host_mode=checked")) fail_msg("fast mode: %s", e);
    /* The context goes on: the same kernel without the bad pointer. */
    dv_arg ok[] = {DV_ARG_ARRAY(d), DV_ARG_I32(-1)};
    assert_ok(dv_kernel_launch(k, &lc, 2, ok));
    int h[128];
    test_to_host(d, h);
    for (int i = 0; i < 128; i++) assert_int_equal(h[i], 1);
    dv_array_release(d);
    dv_module_release(m);
    assert_ok(dv_context_destroy(c));
  }
}

/* ---- kernels without a block function --------------------------------------- */

/* The prelude names a kernel's arguments only where the reader is sure of
 * them (src/kernel/program.c): not for a kernel declared twice under a
 * condition it cannot evaluate (refused at lookup by the contract), and
 * not for one with a parameter name longer than it keeps (63 characters).
 * Such a module still compiles, its other kernels keep their block
 * functions, and the long-named one runs one call per thread in fast mode
 * with the same results. */
static const char *k_twice =
    "#if defined(__SOME_COMPILER_THING)\n"
    "DV_KERNEL(twice, DV_ARRAY(int, out), int a, int b) {\n"
    "  DV_BIND(int, out); out[dv_global_id(0)] = a - b;\n"
    "}\n"
    "#else\n"
    "DV_KERNEL(twice, DV_ARRAY(int, out), int a) {\n"
    "  DV_BIND(int, out); out[dv_global_id(0)] = a;\n"
    "}\n"
    "#endif\n"
    "DV_KERNEL(longname, DV_ARRAY(int, out),\n"
    "          int a_parameter_whose_name_is_longer_than_the_sixty_three_characters_kept) {\n"
    "  DV_BIND(int, out);\n"
    "  dv_i64 g = dv_global_id(0);\n"
    "  out[g] = a_parameter_whose_name_is_longer_than_the_sixty_three_characters_kept + (int)g;\n"
    "}\n"
    "DV_KERNEL(plain, DV_ARRAY(int, out), int a) {\n"
    "  DV_BIND(int, out);\n"
    "  dv_i64 g = dv_global_id(0);\n"
    "  out[g] = a * (int)g;\n"
    "}\n";

static void test_kernels_without_block_function(void **state) {
  (void)state;
  int out[2][2][40];
  for (int mi = 0; mi < 2; mi++) {
    dv_context *c = mode_ctx(modes[mi]);
    dv_module *m = test_build(c, "twice", k_twice, NULL, NULL);
    dv_kernel *k = NULL;
    assert_status(dv_module_kernel(m, "twice", &k), DV_ERR_KERNEL_ARGUMENT);
    assert_null(k);
    const char *names[2] = {"longname", "plain"};
    dv_array *d = NULL;
    int64_t n = 40;
    assert_ok(dv_device_array(c, 1, &n, dv_dtype_get(DV_INT32), NULL, 'C', NULL, &d));
    for (int q = 0; q < 2; q++) {
      k = test_kernel(m, names[q]);
      dv_arg a[] = {DV_ARG_ARRAY(d), DV_ARG_I32(7)};
      dv_launch_config lc = {{5, 1, 1}, {8, 1, 1}, 0, NULL};
      assert_ok(dv_kernel_launch(k, &lc, 2, a));
      test_to_host(d, out[mi][q]);
    }
    dv_array_release(d);
    dv_module_release(m);
    assert_ok(dv_context_destroy(c));
  }
  for (int i = 0; i < 40; i++) {
    for (int mi = 0; mi < 2; mi++) {
      assert_int_equal(out[mi][0][i], 7 + i);
      assert_int_equal(out[mi][1][i], 7 * i);
    }
  }
}

/* ---- what the prelude must not name (review of issue 23) ------------------- */

/* Sources the block functions once broke (the module no longer compiled):
 * a kernel whose name is a macro, a kernel declared twice with other
 * parameter names under a condition the reader cannot evaluate, an
 * attribute macro after a parameter's name (the reader takes the macro for
 * the name), a body that calls setjmp (cannot be inlined) and one that
 * calls alloca (its memory must not pile up over a block's threads).  Each
 * module must build in both modes and give the same results. */
static const char *k_odd_sources =
    "#include <setjmp.h>\n"
    "#define KN renamed\n"
    "#define MAYBE_UNUSED __attribute__((unused))\n"
    "DV_KERNEL(KN, DV_ARRAY(int, out), int n) {\n"
    "  DV_BIND(int, out); out[dv_global_id(0)] = n;\n"
    "}\n"
    "#ifdef __SOME_COMPILER_THING\n"
    "DV_KERNEL(names, DV_ARRAY(int, out), int n) { DV_BIND(int, out); out[dv_global_id(0)] = n; }\n"
    "#else\n"
    "DV_KERNEL(names, DV_ARRAY(int, out), int m) { DV_BIND(int, out); out[dv_global_id(0)] = 2 * m; }\n"
    "#endif\n"
    "DV_KERNEL(attr, DV_ARRAY(int, out), int n MAYBE_UNUSED) {\n"
    "  DV_BIND(int, out); out[dv_global_id(0)] = 3;\n"
    "}\n"
    "DV_KERNEL(jumps, DV_ARRAY(int, out), int n) {\n"
    "  DV_BIND(int, out);\n"
    "  jmp_buf jb;\n"
    "  volatile int v = (int)dv_global_id(0);\n"
    "  if (setjmp(jb) == 0) { v += n; longjmp(jb, 1); }\n"
    "  out[dv_global_id(0)] = v;\n"
    "}\n"
    "DV_KERNEL(allocs, DV_ARRAY(int, out), int n) {\n"
    "  DV_BIND(int, out);\n"
    "  volatile char *p = (volatile char *)__builtin_alloca(4096);\n"
    "  p[0] = (char)n; p[4095] = 1;\n"
    "  out[dv_global_id(0)] = p[0] + p[4095] + (int)dv_thread_idx(0);\n"
    "}\n";

static void test_sources_the_prelude_must_not_break(void **state) {
  (void)state;
  enum { B = 1024 };
  static int out[2][3][B];
  for (int mi = 0; mi < 2; mi++) {
    dv_context *c = mode_ctx(modes[mi]);
    dv_module *m = test_build(c, "odd_sources", k_odd_sources, NULL, NULL);
    dv_array *d = NULL;
    int64_t n = B;
    assert_ok(dv_device_array(c, 1, &n, dv_dtype_get(DV_INT32), NULL, 'C', NULL, &d));
    /* Declared twice under a condition the reader cannot evaluate, with
     * the same types and other names: one kernel to the contract (debug
     * builds' cross-check once refused it over the names). */
    dv_kernel *k = NULL;
    const char *names[3] = {"jumps", "allocs", "names"};
    for (int q = 0; q < 3; q++) {
      k = test_kernel(m, names[q]);
      dv_arg a[] = {DV_ARG_ARRAY(d), DV_ARG_I32(5)};
      /* 1,024 threads of 4 KiB of alloca each: 4 MiB if it piled up over
       * the block (the fiber's stack is 128 KiB). */
      dv_launch_config lc = {{1, 1, 1}, {B, 1, 1}, 0, NULL};
      assert_ok(dv_kernel_launch(k, &lc, 2, a));
      test_to_host(d, out[mi][q]);
    }
    /* The attribute and macro-named kernels compile; what the reader makes
     * of them (refused or not) is the contract's business. */
    dv_array_release(d);
    dv_module_release(m);
    assert_ok(dv_context_destroy(c));
  }
  for (int i = 0; i < B; i++) {
    for (int mi = 0; mi < 2; mi++) {
      assert_int_equal(out[mi][0][i], i + 5);
      assert_int_equal(out[mi][1][i], 5 + 1 + i);
      assert_int_equal(out[mi][2][i], 10);
    }
  }
}

/* ---- clang: no contraction in either mode ---------------------------------- */

static const char *k_fma =
    "DV_KERNEL(fma3, DV_ARRAY(const float, a), DV_ARRAY(float, r)) {\n"
    "  DV_BIND(const float, a); DV_BIND(float, r);\n"
    "  dv_i64 i = dv_global_id(0);\n"
    "  float x = a[i], y = a[i] * 1.000001f;\n"
    "  r[i] = x * y - x * x;\n"
    "}\n";

static void test_same_bits_with_clang(void **state) {
  (void)state;
  if (system("command -v clang >/dev/null 2>&1") != 0) {
    printf("SKIPPED: %s: no clang on PATH\n", __func__);
    skip();
  }
  enum { N = 256 };
  float in[N], out[2][N];
  for (int i = 0; i < N; i++) in[i] = 1.0f + (float)i / 3.0f;
  for (int mi = 0; mi < 2; mi++) {
    char opt[32];
    snprintf(opt, sizeof opt, "host_mode=%s", modes[mi]);
    dv_context *c = NULL;
    assert_ok(test_context(&c, opt, "host_cc=clang", NULL));
    dv_module *m = test_build(c, "fma3", k_fma, NULL, NULL);
    dv_kernel *k = test_kernel(m, "fma3");
    dv_array *a = test_dev_from(c, in, N, DV_FLOAT32), *r = NULL;
    int64_t n = N;
    assert_ok(dv_device_array(c, 1, &n, dv_dtype_get(DV_FLOAT32), NULL, 'C', NULL, &r));
    dv_arg args[] = {DV_ARG_ARRAY(a), DV_ARG_ARRAY(r)};
    dv_launch_config lc = {{N / 64, 1, 1}, {64, 1, 1}, 0, NULL};
    assert_ok(dv_kernel_launch(k, &lc, 2, args));
    test_to_host(r, out[mi]);
    dv_array_release(a);
    dv_array_release(r);
    dv_module_release(m);
    assert_ok(dv_context_destroy(c));
  }
  /* The reference, uncontracted (volatile keeps each product rounded). */
  for (int i = 0; i < N; i++) {
    volatile float x = in[i], y = in[i] * 1.000001f, p = x * y, q = x * x;
    float want = p - q;
    if (memcmp(&out[0][i], &want, sizeof want) || memcmp(&out[1][i], &want, sizeof want))
      fail_msg("element %d: fast %a, checked %a, expected %a", i, (double)out[0][i],
               (double)out[1][i], (double)want);
  }
}

/* ---- every block exactly once -------------------------------------------- */

/* Executors take blocks a chunk at a time (host_exec.c's hk_claim, the
 * chunk from host_kernel.c): every block of a launch runs exactly once for
 * grids that do and do not divide into chunks, with a block function whose
 * runner chains blocks (count) and with a barrier (count_sync: the fission
 * function, or the runtime). */
static const char *k_count =
    "DV_KERNEL(count, DV_ARRAY(int, hits)) {\n"
    "  DV_BIND(int, hits);\n"
    "  if (dv_thread_idx(0) == 0 && dv_thread_idx(1) == 0)\n"
    "    dv_atomic_add_i32(&hits[dv_block_idx(0) + dv_grid_dim(0) * dv_block_idx(1)], 1);\n"
    "}\n"
    "DV_KERNEL(count_sync, DV_ARRAY(int, hits)) {\n"
    "  DV_BIND(int, hits);\n"
    "  DV_SHARED(int, s, 1);\n"
    "  if (dv_thread_idx(0) == 0 && dv_thread_idx(1) == 0) s[0] = 1;\n"
    "  dv_syncthreads();\n"
    "  if (dv_thread_idx(0) == 0 && dv_thread_idx(1) == 0)\n"
    "    dv_atomic_add_i32(&hits[dv_block_idx(0) + dv_grid_dim(0) * dv_block_idx(1)], s[0]);\n"
    "}\n";

static void test_every_block_once(void **state) {
  (void)state;
  static const struct { uint32_t gx, gy, bx, by; } shapes[] = {
      {1, 1, 1, 1}, {3, 1, 1024, 1}, {7, 1, 64, 1}, {1000, 1, 32, 1}, {4099, 1, 1, 1},
      {513, 3, 16, 16}, {65537, 1, 8, 1}};
  dv_context *c = mode_ctx("fast");
  dv_module *m = test_build(c, "count", k_count, NULL, NULL);
  const char *names[2] = {"count", "count_sync"};
  for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
    int64_t n = (int64_t)shapes[si].gx * shapes[si].gy;
    int *zero = calloc((size_t)n, sizeof *zero), *got = malloc((size_t)n * sizeof *got);
    assert_non_null(zero);
    assert_non_null(got);
    for (int ki = 0; ki < 2; ki++) {
      dv_array *d = test_dev_from(c, zero, n, DV_INT32);
      dv_arg a[] = {DV_ARG_ARRAY(d)};
      dv_launch_config lc = {{shapes[si].gx, shapes[si].gy, 1}, {shapes[si].bx, shapes[si].by, 1}, 0, NULL};
      for (int rep = 0; rep < 2; rep++) assert_ok(dv_kernel_launch(test_kernel(m, names[ki]), &lc, 1, a));
      test_to_host(d, got);
      for (int64_t b = 0; b < n; b++)
        if (got[b] != 2)
          fail_msg("%s, grid %ux%u of %ux%u: block %lld ran %d times in two launches", names[ki],
                   shapes[si].gx, shapes[si].gy, shapes[si].bx, shapes[si].by, (long long)b, got[b]);
      dv_array_release(d);
    }
    free(zero);
    free(got);
  }
  dv_module_release(m);
  assert_ok(dv_context_destroy(c));
}

/* A block may wait for blocks of lower index (docs/history.md): they are
 * started first, also when executors take blocks in chunks.  Each block's
 * thread 0 waits for the block before it, then lets the next one go. */
static const char *k_chain =
    "DV_KERNEL(chain, DV_ARRAY(int, flag), DV_ARRAY(int, order)) {\n"
    "  DV_BIND(int, flag); DV_BIND(int, order);\n"
    "  int b = dv_block_idx(0);\n"
    "  if (dv_thread_idx(0) != 0) return;\n"
    "  if (b > 0) while (dv_atomic_add_i32(&flag[b - 1], 0) == 0) {}\n"
    "  order[b] = dv_atomic_add_i32(&flag[dv_grid_dim(0)], 1);\n"
    "  dv_atomic_xchg_i32(&flag[b], 1);\n"
    "}\n";

static void test_blocks_wait_for_earlier_ones(void **state) {
  (void)state;
  enum { G = 700 };
  dv_context *c = NULL;
  /* no kernel_timeout: with the watchdog, blocks are taken one at a time (a
   * hang here is the suite's CTest timeout) */
  assert_ok(test_context(&c, "host_mode=fast", NULL));
  dv_module *m = test_build(c, "chain", k_chain, NULL, NULL);
  static int zero[G + 1], got[G];
  dv_array *flag = test_dev_from(c, zero, G + 1, DV_INT32);
  dv_array *order = test_dev_from(c, zero, G, DV_INT32);
  dv_arg a[] = {DV_ARG_ARRAY(flag), DV_ARG_ARRAY(order)};
  dv_launch_config lc = {{G, 1, 1}, {32, 1, 1}, 0, NULL};
  assert_ok(dv_kernel_launch(test_kernel(m, "chain"), &lc, 2, a));
  test_to_host(order, got);
  for (int b = 0; b < G; b++)
    if (got[b] != b) fail_msg("block %d went %dth", b, got[b]);
  dv_array_release(flag);
  dv_array_release(order);
  dv_module_release(m);
  assert_ok(dv_context_destroy(c));
}

/* Fast mode's canaries (host_mem.c): written by the first launch that uses
 * a block, so a kernel's one-element overrun is reported at the free (and,
 * with kernel_check on, by the launch itself), while allocations no kernel
 * touches cost no write to their memory. */
static const char *k_over =
    "DV_KERNEL(over, DV_ARRAY(int, a), int n) {\n"
    "  DV_BIND(int, a);\n"
    "  if (dv_global_id(0) == 0) a[n] = 7;\n"
    "}\n";

static void test_overrun_caught_by_canaries(void **state) {
  (void)state;
  dv_context *c = mode_ctx("fast");
  dv_module *m = test_build(c, "over", k_over, NULL, NULL);
  dv_launch_config lc = {{2, 1, 1}, {64, 1, 1}, 0, NULL};
  for (int n = 99; n <= 100; n++) { /* the last element, then one past it */
    int64_t len = 100;
    dv_array *d = NULL;
    assert_ok(dv_device_array(c, 1, &len, dv_dtype_get(DV_INT32), NULL, 'C', NULL, &d));
    dv_arg a[] = {DV_ARG_ARRAY(d), DV_ARG_I32(n)};
    /* kernel_check off: fast mode checks the canaries after every launch
     * (O(1); issue 37) */
    assert_status(dv_kernel_launch(test_kernel(m, "over"), &lc, 2, a),
                  n == 100 ? DV_ERR_KERNEL_FAULT : DV_OK);
    if (n == 100) assert_non_null(strstr(dv_last_error(), "kernel over wrote outside the 400-byte"));
    assert_ok(dv_context_synchronize(c));
    dv_array_release(d);
    assert_ok(dv_context_flush_deallocs(c)); /* repaired after the report */
  }
  dv_module_release(m);
  assert_ok(dv_context_destroy(c));

  /* With kernel_check on, the launch that wrote past the end says so. */
  assert_ok(test_context(&c, "host_mode=fast", "kernel_check=bounds", NULL));
  m = test_build(c, "over", k_over, NULL, NULL);
  int64_t len = 100;
  dv_array *d = NULL;
  assert_ok(dv_device_array(c, 1, &len, dv_dtype_get(DV_INT32), NULL, 'C', NULL, &d));
  dv_arg a[] = {DV_ARG_ARRAY(d), DV_ARG_I32(100)};
  assert_status(dv_kernel_launch(test_kernel(m, "over"), &lc, 2, a), DV_ERR_KERNEL_FAULT);
  assert_non_null(strstr(dv_last_error(), "kernel over wrote outside the 400-byte device buffer of argument 0"));
  dv_array_release(d);
  assert_ok(dv_context_flush_deallocs(c)); /* repaired after the report */
  dv_module_release(m);
  assert_ok(dv_context_check_memory(c));
  assert_ok(dv_context_destroy(c));
}

int main(int argc, char **argv) {
  int begin = kernel_suite_begin(argc, argv, "host_fast", NULL, g_cache_dir, sizeof g_cache_dir);
  if (begin) return begin;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_options_resolved),
      cmocka_unit_test(test_runtime_entered_late),
      cmocka_unit_test(test_runtime_in_a_late_block),
      cmocka_unit_test(test_barriers_odd_3d_block),
      cmocka_unit_test(test_divergent_after_early_return),
      cmocka_unit_test(test_fault_in_loop),
      cmocka_unit_test(test_kernels_without_block_function),
      cmocka_unit_test(test_sources_the_prelude_must_not_break),
      cmocka_unit_test(test_same_bits_with_clang),
      cmocka_unit_test(test_every_block_once),
      cmocka_unit_test(test_blocks_wait_for_earlier_ones),
      cmocka_unit_test(test_overrun_caught_by_canaries),
  };
  return kernel_suite_end(g_cache_dir, test_main(argc, argv, "host_fast", tests,
                                                 sizeof tests / sizeof tests[0]));
}
