/*
 * The host simulator's access checks (issue 24, kernel_check=on:
 * src/backends/host/tools/: access.c, memcheck.c, initcheck.c,
 * race.c).  For each class of bug a seeded kernel is reported with
 * DV_ERR_KERNEL_FAULT and a message naming the kind, the kernel, the
 * thread(s), the source line(s), the array and the element, and a
 * corrected twin (barrier added, atomic, bound fixed) runs clean; the
 * stream and context stay usable after each report.  Also: the option's
 * levels, and that atomics and memcpy/memset in kernels are checked as
 * what they are.
 */
#define _DEFAULT_SOURCE /* mkdtemp */
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"

static char g_cache_dir[256];

static dv_context *checks_ctx(const char *level) {
  char opt[48];
  snprintf(opt, sizeof opt, "kernel_check=%s", level);
  dv_context *c = NULL;
  dv_status rc = test_context(&c, "host_mode=checked", opt, NULL);
  if (rc) fail_msg("context: %s: %s", dv_status_name(rc), dv_last_error());
  return c;
}

static void assert_contains(const char *hay, const char *needle) {
  if (!strstr(hay, needle)) fail_msg("expected \"%s\" in: %s", needle, hay);
}

static dv_launch_config cfg(uint32_t grid, uint32_t block) {
  dv_launch_config c;
  memset(&c, 0, sizeof c);
  c.grid.x = grid;
  c.block.x = block;
  return c;
}

/* The message of the last run1 that failed. */
static char g_msg[1024];

/* Launch kernel `name` of m (context c) on (grid, block) with one int
 * array of n elements (zeros) and one int scalar; its status (the message
 * in g_msg), and the array's contents into out (n ints, when not NULL). */
static dv_status run1(dv_context *c, dv_module *m, const char *name, uint32_t grid,
                      uint32_t block, int n, int arg, int *out) {
  int *zero = calloc((size_t)n, sizeof *zero);
  assert_non_null(zero);
  dv_array *a = test_dev_from(c, zero, n, DV_INT32);
  free(zero);
  dv_launch_config lc = cfg(grid, block);
  dv_arg args[] = {DV_ARG_ARRAY(a), DV_ARG_I32(arg)};
  dv_status rc = dv_kernel_launch(test_kernel(m, name), &lc, 2, args);
  snprintf(g_msg, sizeof g_msg, "%s", rc ? dv_last_error() : "");
  if (rc && !g_msg[0]) fail_msg("%s: %s without a message", name, dv_status_name(rc));
  if (out) test_to_host(a, out);
  dv_array_release(a);
  return rc;
}

/* ---- the seeded bugs and their twins ---------------------------------------- */

static const char *src_bugs =
    /* 1: two threads write one shared slot with no barrier between */
    "DV_KERNEL(ww, DV_ARRAY(int, out), int fix) {\n"                        /* 1 */
    "  DV_BIND(int, out);\n"                                                 /* 2 */
    "  DV_SHARED(int, slot, 4);\n"                                           /* 3 */
    "  int t = dv_thread_idx(0);\n"                                          /* 4 */
    "  if (t == 0 || fix == 0) slot[t % 2] = t;\n"                           /* 5 */
    "  if (fix) { dv_syncthreads(); if (t == 1) slot[0] = t; }\n"            /* 6 */
    "  dv_syncthreads();\n"                                                  /* 7 */
    "  out[t] = slot[0];\n"                                                  /* 8 */
    "}\n"                                                                    /* 9 */
    /* 2: a tree reduction missing one barrier */
    "DV_KERNEL(tree, DV_ARRAY(int, out), int fix) {\n"                      /* 10 */
    "  DV_BIND(int, out);\n"                                                 /* 11 */
    "  DV_SHARED(int, part, 64);\n"                                          /* 12 */
    "  int t = dv_thread_idx(0);\n"                                          /* 13 */
    "  part[t] = t;\n"                                                       /* 14 */
    "  dv_syncthreads();\n"                                                  /* 15 */
    "  for (int s = 32; s > 0; s /= 2) {\n"                                  /* 16 */
    "    if (t < s) part[t] += part[t + s];\n"                               /* 17 */
    "    if (fix) dv_syncthreads();\n"                                       /* 18 */
    "  }\n"                                                                  /* 19 */
    "  if (t == 0) out[0] = part[0];\n"                                      /* 20 */
    "}\n"                                                                    /* 21 */
    /* 3: a counter shared by every block, without an atomic */
    "DV_KERNEL(count, DV_ARRAY(int, out), int fix) {\n"                     /* 22 */
    "  DV_BIND(int, out);\n"                                                 /* 23 */
    "  if (dv_thread_idx(0) != 0) return;\n"                                 /* 24 */
    "  if (fix) dv_atomic_add_i32(&out[0], 1);\n"                            /* 25 */
    "  else out[0] = out[0] + 1;\n"                                          /* 26 */
    "}\n"                                                                    /* 27 */
    /* 4: a read of shared memory no thread wrote */
    "DV_KERNEL(uninit, DV_ARRAY(int, out), int fix) {\n"                    /* 28 */
    "  DV_BIND(int, out);\n"                                                 /* 29 */
    "  DV_SHARED(int, tile, 32);\n"                                          /* 30 */
    "  int t = dv_thread_idx(0);\n"                                          /* 31 */
    "  if (t != 17 || fix) tile[t] = 2 * t;\n"                               /* 32 */
    "  dv_syncthreads();\n"                                                  /* 33 */
    "  out[t] = tile[31 - t];\n"                                             /* 34 */
    "}\n"                                                                    /* 35 */
    /* 5, 6: shared out of bounds, read and write */
    "DV_KERNEL(sh_oob, DV_ARRAY(int, out), int n) {\n"                      /* 36 */
    "  DV_BIND(int, out);\n"                                                 /* 37 */
    "  DV_SHARED(int, buf, 16);\n"                                           /* 38 */
    "  int t = dv_thread_idx(0);\n"                                          /* 39 */
    "  if (t < n) buf[t] = t;\n"                                             /* 40 */
    "  dv_syncthreads();\n"                                                  /* 41 */
    "  if (t < 16) out[t] = buf[t];\n"                                       /* 42 */
    "}\n"                                                                    /* 43 */
    "DV_KERNEL(sh_oob_read, DV_ARRAY(int, out), int n) {\n"                 /* 44 */
    "  DV_BIND(int, out);\n"                                                 /* 45 */
    "  DV_SHARED(int, buf, 16);\n"                                           /* 46 */
    "  int t = dv_thread_idx(0);\n"                                          /* 47 */
    "  if (t < 16) buf[t] = t;\n"                                            /* 48 */
    "  dv_syncthreads();\n"                                                  /* 49 */
    "  if (t < n) out[t] = buf[t];\n"                                        /* 50 */
    "}\n"                                                                    /* 51 */
    /* 7, 8: global out of bounds, write and read */
    "DV_KERNEL(fill, DV_ARRAY(int, out), int n) {\n"                        /* 52 */
    "  DV_BIND(int, out);\n"                                                 /* 53 */
    "  dv_i64 i = dv_global_id(0);\n"                                        /* 54 */
    "  if (i <= n) out[i] = 7;\n"                                            /* 55 */
    "}\n"                                                                    /* 56 */
    "DV_KERNEL(gread, DV_ARRAY(int, out), int n) {\n"                       /* 57 */
    "  DV_BIND(int, out);\n"                                                 /* 58 */
    "  dv_i64 i = dv_global_id(0);\n"                                        /* 59 */
    "  if (i < 64 && out[i + n] == 12345) out[i] = 1;\n"                     /* 60 */
    "}\n";                                                                   /* 61 */

/* Each report also leaves the stream and context usable: a clean launch after it. */
static void still_usable(dv_context *c, dv_module *m) {
  int out[64];
  assert_ok(run1(c, m, "fill", 1, 64, 64, 63, out));
  for (int i = 0; i < 64; i++) assert_int_equal(out[i], 7);
}

static void test_shared_write_write(void **state) {
  (void)state;
  dv_context *c = checks_ctx("on");
  dv_module *m = test_build(c, "bugs.dvk", src_bugs, NULL, NULL);
  int out[64];
  assert_int_equal(run1(c, m, "ww", 1, 4, 64, 0, NULL), DV_ERR_KERNEL_FAULT);
  const char *e = g_msg;
  assert_contains(e, "kernel ww: write-write race on shared array 'slot' element 0");
  assert_contains(e, "thread (2,0,0) of block (0,0,0) wrote it at bugs.dvk:5");
  assert_contains(e, "thread (0,0,0) of block (0,0,0) wrote it at bugs.dvk:5");
  assert_contains(e, "no barrier between");
  still_usable(c, m);
  assert_ok(run1(c, m, "ww", 1, 4, 64, 1, out)); /* the twin: a barrier between the writes */
  for (int t = 0; t < 4; t++) assert_int_equal(out[t], 1);
  dv_module_release(m);
  assert_ok(dv_context_destroy(c));
}

static void test_shared_missing_barrier(void **state) {
  (void)state;
  dv_context *c = checks_ctx("on");
  dv_module *m = test_build(c, "bugs.dvk", src_bugs, NULL, NULL);
  int out[64];
  assert_int_equal(run1(c, m, "tree", 1, 64, 64, 0, NULL), DV_ERR_KERNEL_FAULT);
  const char *e = g_msg;
  assert_contains(e, "kernel tree: read-write race on shared array 'part' element ");
  assert_contains(e, "at bugs.dvk:17");
  assert_contains(e, "no barrier between");
  assert_contains(e, "of block (0,0,0) read it at bugs.dvk:17");
  assert_contains(e, "of block (0,0,0) wrote it at bugs.dvk:17");
  assert_ok(run1(c, m, "tree", 1, 64, 64, 1, out));
  assert_int_equal(out[0], 64 * 63 / 2);
  dv_module_release(m);
  assert_ok(dv_context_destroy(c));
}

static void test_global_race_between_blocks(void **state) {
  (void)state;
  dv_context *c = checks_ctx("on");
  dv_module *m = test_build(c, "bugs.dvk", src_bugs, NULL, NULL);
  int out[64];
  assert_int_equal(run1(c, m, "count", 64, 32, 64, 0, NULL), DV_ERR_KERNEL_FAULT);
  const char *e = g_msg;
  assert_contains(e, "kernel count: ");
  assert_contains(e, "race on argument 0 'out' element 0: ");
  /* The blocks run in parallel under the checks: the order of the two
   * accesses decides the race's kind (write-write or read-write) and which
   * blocks race first.  Block 0 always runs (blocks are taken in order) and
   * races with whichever block touched element 0 before or after it -- block
   * 1 on two CPUs, any of the first few executors' blocks on more -- and the
   * launch reports the lowest block's report: block 0 is named, with another
   * block, at the same line, and one of the two wrote. */
  {
    char w[96], r[96];
    snprintf(w, sizeof w, "thread (0,0,0) of block (0,0,0) wrote it at bugs.dvk:26");
    snprintf(r, sizeof r, "thread (0,0,0) of block (0,0,0) read it at bugs.dvk:26");
    if (!strstr(e, w) && !strstr(e, r)) fail_msg("block 0 not named in: %s", e);
    const char *other = strstr(e, "of block (");
    int named = 0;
    for (; other; other = strstr(other + 1, "of block (")) named++;
    if (named != 2) fail_msg("expected two blocks named in: %s", e);
  }
  assert_contains(e, "wrote it at bugs.dvk:26");
  assert_contains(e, "nothing orders the blocks of a launch");
  assert_ok(run1(c, m, "count", 64, 32, 64, 1, out)); /* the atomic twin */
  assert_int_equal(out[0], 64);
  dv_module_release(m);
  assert_ok(dv_context_destroy(c));
}

static void test_uninitialized_shared_read(void **state) {
  (void)state;
  dv_context *c = checks_ctx("on");
  dv_module *m = test_build(c, "bugs.dvk", src_bugs, NULL, NULL);
  int out[64];
  assert_int_equal(run1(c, m, "uninit", 1, 32, 64, 0, NULL), DV_ERR_KERNEL_FAULT);
  const char *e = g_msg;
  assert_contains(e, "kernel uninit: read of uninitialized shared array 'tile' element 17 by "
                     "thread (14,0,0) of block (0,0,0) at bugs.dvk:34");
  assert_ok(run1(c, m, "uninit", 1, 32, 64, 1, out));
  for (int t = 0; t < 32; t++) assert_int_equal(out[t], 2 * (31 - t));
  dv_module_release(m);
  assert_ok(dv_context_destroy(c));
}

static void test_shared_out_of_bounds(void **state) {
  (void)state;
  dv_context *c = checks_ctx("on");
  dv_module *m = test_build(c, "bugs.dvk", src_bugs, NULL, NULL);
  int out[64];
  /* A write one past the end, at the access (not at the next barrier). */
  assert_int_equal(run1(c, m, "sh_oob", 1, 32, 64, 17, NULL), DV_ERR_KERNEL_FAULT);
  assert_contains(g_msg, "kernel sh_oob: write outside shared array 'buf' (16 elements "
                                   "of 4 bytes, bugs.dvk:38): element 16, by thread (16,0,0) of "
                                   "block (0,0,0) at bugs.dvk:40");
  still_usable(c, m);
  assert_ok(run1(c, m, "sh_oob", 1, 32, 64, 16, out));
  for (int t = 0; t < 16; t++) assert_int_equal(out[t], t);
  /* A read past the end (writes alone were ever caught before). */
  assert_int_equal(run1(c, m, "sh_oob_read", 1, 32, 64, 20, NULL), DV_ERR_KERNEL_FAULT);
  assert_contains(g_msg, "kernel sh_oob_read: read outside shared array 'buf' (16 "
                                   "elements of 4 bytes, bugs.dvk:46): element 16, by thread "
                                   "(16,0,0) of block (0,0,0) at bugs.dvk:50");
  assert_ok(run1(c, m, "sh_oob_read", 1, 32, 64, 16, out));
  dv_module_release(m);
  assert_ok(dv_context_destroy(c));
}

static void test_global_out_of_bounds(void **state) {
  (void)state;
  dv_context *c = checks_ctx("on");
  dv_module *m = test_build(c, "bugs.dvk", src_bugs, NULL, NULL);
  int out[256];
  assert_int_equal(run1(c, m, "fill", 5, 64, 256, 256, NULL), DV_ERR_KERNEL_FAULT);
  assert_contains(g_msg, "kernel fill: write outside argument 0 'out' (256 elements of "
                                   "4 bytes): element 256, by thread (0,0,0) of block (4,0,0) at "
                                   "bugs.dvk:55");
  assert_ok(run1(c, m, "fill", 5, 64, 256, 255, out));
  for (int i = 0; i < 256; i++) assert_int_equal(out[i], 7);
  assert_int_equal(run1(c, m, "gread", 1, 64, 64, 3, NULL), DV_ERR_KERNEL_FAULT);
  assert_contains(g_msg, "kernel gread: read outside argument 0 'out' (64 elements of "
                                   "4 bytes): element 64, by thread (61,0,0) of block (0,0,0) at "
                                   "bugs.dvk:60");
  assert_ok(run1(c, m, "gread", 1, 64, 64, 0, out)); /* reads only: no race */
  for (int i = 0; i < 64; i++) assert_int_equal(out[i], 0);
  still_usable(c, m);
  dv_module_release(m);
  assert_ok(dv_context_check_memory(c));
  assert_ok(dv_context_destroy(c));
}

/* ---- what never reports ------------------------------------------------------- */

static const char *src_clean =
    "#include <string.h>\n"
    "struct pair { int a, b; };\n"
    "DV_KERNEL(clean, DV_ARRAY(int, out), int n) {\n"
    "  DV_BIND(int, out);\n"
    "  DV_SHARED(int, s, 64);\n"
    "  DV_SHARED(int, flag, 1);\n"
    "  int t = dv_thread_idx(0), b = dv_block_idx(0);\n"
    "  if (t == 0) memset(s, 0, sizeof(int) * 64);\n" /* a shared array filled by memset */
    "  if (t == 0) flag[0] = 0;\n"
    "  dv_syncthreads();\n"
    "  dv_atomic_add_i32(&s[0], 1);\n"                /* atomics never race */
    "  dv_atomic_max_i32(&flag[0], t);\n"
    "  dv_atomic_add_i32(&out[n], 1);\n"              /* every block's, atomically */
    "  dv_barrier(DV_FENCE_LOCAL);\n"                 /* orders shared memory */
    "  struct pair p = {t, s[0]}, q;\n"
    "  memcpy(&q, &p, sizeof q);\n"                   /* on the thread's stack */
    "  if (t > 0) s[t] = q.a + flag[0];\n"
    "  dv_syncthreads();\n"
    "  out[b * 64 + t] = s[(t + 1) % 64] + q.b;\n"
    "}\n";

static void test_atomics_and_ordered_accesses_clean(void **state) {
  (void)state;
  dv_context *c = checks_ctx("on");
  dv_module *m = test_build(c, "clean.dvk", src_clean, NULL, NULL);
  int out[256];
  if (run1(c, m, "clean", 2, 64, 256, 255, out)) fail_msg("%s", g_msg);
  for (int b = 0; b < 2; b++)
    for (int t = 0; t < 64; t++) assert_int_equal(out[b * 64 + t], t == 63 ? 128 : t + 128);
  assert_int_equal(out[255], 128);
  dv_module_release(m);
  assert_ok(dv_context_destroy(c));
}

/* A memcpy in a kernel is checked as the ranges it touches. */
static const char *src_memcpy =
    "#include <string.h>\n"
    "DV_KERNEL(cp, DV_ARRAY(int, out), int n) {\n"
    "  DV_BIND(int, out);\n"
    "  int local[8] = {1, 2, 3, 4, 5, 6, 7, 8};\n"
    "  if (dv_thread_idx(0) == 0) memcpy(out + n, local, sizeof local);\n"
    "}\n";

static void test_memcpy_checked(void **state) {
  (void)state;
  dv_context *c = checks_ctx("on");
  dv_module *m = test_build(c, "cp.dvk", src_memcpy, NULL, NULL);
  int out[16];
  assert_ok(run1(c, m, "cp", 1, 4, 16, 8, out));
  assert_int_equal(out[15], 8);
  assert_int_equal(run1(c, m, "cp", 1, 4, 16, 9, NULL), DV_ERR_KERNEL_FAULT);
  assert_contains(g_msg, "kernel cp: write outside argument 0 'out' (16 elements of 4 "
                                   "bytes): element 16 (32 bytes from element 9), by thread (0,0,0) of block (0,0,0) at cp.dvk:5");
  dv_module_release(m);
  assert_ok(dv_context_destroy(c));
}

/* ---- the option ----------------------------------------------------------------- */

static void test_levels(void **state) {
  (void)state;
  const char *set[] = {"off", "bounds", "on", "0", "1", "false", "true", "no", "yes"};
  const char *want[] = {"off", "bounds", "on", "off", "on", "off", "on", "off", "on"};
  for (size_t i = 0; i < sizeof set / sizeof *set; i++) {
    dv_context *c = checks_ctx(set[i]);
    char got[32];
    assert_ok(dv_context_option(c, "kernel_check", got, sizeof got, NULL));
    if (strcmp(got, want[i])) fail_msg("kernel_check=%s reads %s, expected %s", set[i], got, want[i]);
    assert_ok(dv_context_destroy(c));
  }
  dv_config *cfg = NULL;
  assert_ok(dv_config_create(&cfg));
  assert_status(dv_config_set(cfg, "kernel_check", "everything"), DV_ERR_BAD_OPTION);
  dv_config_destroy(cfg);
  /* auto: on in checked mode. */
  dv_context *c = NULL;
  assert_ok(test_context(&c, "host_mode=checked", NULL));
  char got[32];
  assert_ok(dv_context_option(c, "kernel_check", got, sizeof got, NULL));
  assert_string_equal(got, "on");
  assert_ok(dv_context_destroy(c));
  /* bounds: the seeded read past the global array is not seen (in an ASan
   * build, kernels at bounds are compiled with ASan, which would end the
   * process there). */
#if !defined(__SANITIZE_ADDRESS__)
  c = checks_ctx("bounds");
  dv_module *m = test_build(c, "bugs.dvk", src_bugs, NULL, NULL);
  assert_ok(run1(c, m, "gread", 1, 64, 64, 3, NULL));
  dv_module_release(m);
  assert_ok(dv_context_destroy(c));
#endif
}

/* What the checks must not report (review of issue 24): a whole struct read
 * from shared memory reads its padding, which nothing writes; a kernel's
 * own thread-local and the C library's data are not wild pointers. */
static const char *const src_nofalse =
    "typedef struct { char c; int i; } P;\n"
    "static __thread int tl;\n"
    "DV_KERNEL(padcopy, DV_ARRAY(int, out), int fix) {\n"
    "  DV_BIND(int, out);\n"
    "  DV_SHARED(P, s, 64);\n"
    "  int t = dv_thread_idx(0);\n"
    "  s[t].c = 1; s[t].i = t + fix;\n"
    "  dv_syncthreads();\n"
    "  P p = s[(t + 1) % 64];\n"
    "  volatile P q; memcpy((void *)&q, &s[(t + 2) % 64], sizeof q);\n"
    "  tl += 1;\n"
    "  out[t] = p.i + q.i + p.c + (tl > 0);\n"
    "}\n";

static void test_no_false_reports(void **state) {
  (void)state;
  dv_context *c = checks_ctx("on");
  char *src = malloc(strlen(src_nofalse) + 32);
  assert_non_null(src);
  strcpy(src, "#include <string.h>\n");
  strcat(src, src_nofalse);
  dv_module *m = test_build(c, "clean.dvk", src, NULL, NULL);
  free(src);
  int out[64];
  dv_status rc = run1(c, m, "padcopy", 1, 64, 64, 0, out);
  if (rc) fail_msg("%s: %s", dv_status_name(rc), g_msg);
  for (int t = 0; t < 64; t++) assert_int_equal(out[t], (t + 1) % 64 + (t + 2) % 64 + 2);
  dv_module_release(m);
  assert_ok(dv_context_destroy(c));
}

/* ---- the hooks' object ------------------------------------------------------- */

/* The access checks' hooks are compiled once for a compiler identity and
 * linked into every checked module of the process, in any context
 * (toolchain/access_hooks.c): a compiler wrapper counts the
 * compiles of hooks.c, and each module still reports its out-of-bounds
 * write.  A wrapper that fails that compile makes the build DV_ERR_COMPILE,
 * said as the hooks', and nothing is kept: the next build tries again. */
static int count_lines(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  int n = 0, ch;
  while ((ch = fgetc(f)) != EOF) n += ch == '\n';
  fclose(f);
  return n;
}

static void write_wrapper(const char *path, const char *log, bool fail) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fprintf(f, "#!/bin/sh\nfor a in \"$@\"; do case \"$a\" in *hooks.c) echo hooks >> '%s'%s;; esac; done\n"
             "exec cc \"$@\"\n", log, fail ? "; echo 'planted failure' >&2; exit 1" : "");
  assert_int_equal(fclose(f), 0);
  assert_int_equal(chmod(path, 0700), 0);
}

static const char *src_oob_a = "DV_KERNEL(fa, DV_ARRAY(int, out), int n) {\n"
                               "  DV_BIND(int, out);\n"
                               "  if (dv_thread_idx(0) == 0) out[n] = 1;\n"
                               "}\n";
static const char *src_oob_b = "DV_KERNEL(fb, DV_ARRAY(int, out), int n) {\n"
                               "  DV_BIND(int, out);\n"
                               "  if (dv_thread_idx(0) == 0) out[n] = 2;\n"
                               "}\n";

static void test_hooks_compiled_once(void **state) {
  (void)state;
  char dir[] = "/tmp/dv-hooks-XXXXXX";
  assert_non_null(mkdtemp(dir));
  char good[64], bad[64], log[64], opt_good[96], opt_bad[96];
  snprintf(good, sizeof good, "%s/cc-good", dir);
  snprintf(bad, sizeof bad, "%s/cc-bad", dir);
  snprintf(log, sizeof log, "%s/hooks.log", dir);
  write_wrapper(good, log, false);
  write_wrapper(bad, log, true);
  snprintf(opt_good, sizeof opt_good, "host_cc=%s", good);
  snprintf(opt_bad, sizeof opt_bad, "host_cc=%s", bad);
  const char *srcs[] = {src_oob_a, src_oob_b, src_oob_a};
  const char *names[] = {"fa", "fb", "fa"};
  for (int round = 0; round < 3; round++) { /* two contexts; the third build in the second */
    dv_context *c = test_context_or_fail("host_mode=checked", "kernel_check=on", "kernel_cache=off",
                                         opt_good, NULL);
    int upto = round == 0 ? 2 : 1;
    for (int j = 0; j < upto; j++) {
      int i = round == 0 ? j : round;
      dv_module *m = test_build(c, "oob.dvk", srcs[i], NULL, NULL);
      assert_int_equal(run1(c, m, names[i], 1, 4, 8, 8, NULL), DV_ERR_KERNEL_FAULT);
      assert_contains(g_msg, "write outside argument 0 'out' (8 elements of 4 bytes): element 8");
      int out[8];
      assert_ok(run1(c, m, names[i], 1, 4, 8, 7, out));
      assert_int_equal(out[7], i == 1 ? 2 : 1);
      dv_module_release(m);
    }
    assert_ok(dv_context_destroy(c));
    assert_int_equal(count_lines(log), 1); /* one compile of the hooks for all of them */
  }
  /* Another compiler (another identity) whose compile of the hooks fails. */
  dv_context *c = test_context_or_fail("host_mode=checked", "kernel_check=on", "kernel_cache=off",
                                       opt_bad, NULL);
  dv_program *p;
  assert_ok(dv_program_create(c, "oob.dvk", src_oob_b, &p));
  for (int attempt = 0; attempt < 2; attempt++) {
    dv_module *m = NULL;
    assert_int_equal(dv_program_build(p, 0, &m), DV_ERR_COMPILE);
    assert_null(m);
    assert_contains(dv_last_error(), "program oob.dvk failed to compile on host:\n"
                                     "the access checks' hooks failed to compile");
    assert_contains(dv_program_log(p), "the access checks' hooks failed to compile");
    assert_contains(dv_last_error(), "planted failure");
    assert_int_equal(count_lines(log), 2 + attempt); /* tried again: nothing kept */
  }
  dv_program_destroy(p);
  assert_ok(dv_context_destroy(c));
  assert_int_equal(unlink(good), 0);
  assert_int_equal(unlink(bad), 0);
  assert_int_equal(unlink(log), 0);
  assert_int_equal(rmdir(dir), 0);
}

int main(int argc, char **argv) {
  int begin = kernel_suite_begin(argc, argv, "host_checks", NULL, g_cache_dir, sizeof g_cache_dir);
  if (begin) return begin;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_shared_write_write),
      cmocka_unit_test(test_shared_missing_barrier),
      cmocka_unit_test(test_global_race_between_blocks),
      cmocka_unit_test(test_uninitialized_shared_read),
      cmocka_unit_test(test_shared_out_of_bounds),
      cmocka_unit_test(test_global_out_of_bounds),
      cmocka_unit_test(test_atomics_and_ordered_accesses_clean),
      cmocka_unit_test(test_memcpy_checked),
      cmocka_unit_test(test_levels),
      cmocka_unit_test(test_no_false_reports),
      cmocka_unit_test(test_hooks_compiled_once),
  };
  return kernel_suite_end(g_cache_dir, test_main(argc, argv, "host_checks", tests,
                                                 sizeof tests / sizeof tests[0]));
}
