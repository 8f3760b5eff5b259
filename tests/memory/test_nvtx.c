#define _GNU_SOURCE
/*
 * NVTX memory annotations (issue 40 item 4): with a tool listening
 * (NVTX_INJECTION64_PATH names tests/memory/nvtx_tool.c, a stand-in that
 * takes NVTX's injection as compute-sanitizer does and checks every call
 * against NVTX's ABI), a CUDA context's pool tells it of its memory: each
 * segment a heap, each array's bytes a region, unregistered at free and
 * trim; the direct manager, the host simulator and nvtx=off say nothing;
 * nvtx_ranges=on puts copies, memsets, launches and allocations in ranges.
 *
 *   test_nvtx cuda        the suite (the tool named by the environment)
 *   test_nvtx none        no tool listens: nothing loaded, the pool as ever
 *   test_nvtx overrun     bench/gpu/run.sh's planted write: a kernel writes
 *                         one element past a pool array, inside its segment
 *                         (compute-sanitizer's memcheck reports it only
 *                         because the pool annotated its blocks)
 */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

static void *g_tool;
static long (*t_heaps)(void), (*t_regions)(void), (*t_region_size)(const void *),
    (*t_count)(const char *);
static const char *(*t_domain)(void);

static void tool_open(void) {
  const char *path = getenv("NVTX_INJECTION64_PATH");
  if (!path) fail_msg("NVTX_INJECTION64_PATH is not set");
  (void)dv_nvtx_attached(); /* devarray loads the tool at its first use */
  if (!g_tool) g_tool = dlopen(path, RTLD_NOW | RTLD_NOLOAD); /* the library devarray loaded */
  if (!g_tool) fail_msg("the NVTX tool %s is not loaded: %s", path, dlerror());
  t_heaps = (long (*)(void))dlsym(g_tool, "nvtxtool_live_heaps");
  t_regions = (long (*)(void))dlsym(g_tool, "nvtxtool_live_regions");
  t_region_size = (long (*)(const void *))dlsym(g_tool, "nvtxtool_region_size");
  t_count = (long (*)(const char *))dlsym(g_tool, "nvtxtool_count");
  t_domain = (const char *(*)(void))dlsym(g_tool, "nvtxtool_domain");
  assert_non_null(t_heaps);
  assert_non_null(t_count);
}

static dv_array *dev(dv_context *ctx, int64_t bytes) {
  dv_array *a = NULL;
  assert_ok(dv_device_array(ctx, 1, &bytes, dv_dtype_get(DV_UINT8), NULL, 'C', NULL, &a));
  return a;
}

static const void *addr(dv_array *a) {
  void *buf = NULL;
  size_t off = 0;
  assert_ok(dv_array_native(a, &buf, &off));
  return (const char *)buf + off;
}

/* Segments are heaps, arrays regions of exactly their bytes; both go. */
static void test_pool_annotations(void **state) {
  (void)state;
  tool_open();
  assert_int_equal(dv_nvtx_attached() & 1, 1);
  dv_context *ctx = test_context_or_fail("memory_manager=pool", NULL);
  long h0 = t_heaps(), r0 = t_regions();
  dv_array *a = dev(ctx, 1000), *b = dev(ctx, 3000), *big = dev(ctx, 5 << 20);
  assert_true(t_heaps() > h0);
  assert_int_equal(t_regions(), r0 + 3);
  assert_int_equal(t_region_size(addr(a)), 1000); /* the bytes asked for, not the block's class */
  assert_int_equal(t_region_size(addr(b)), 3000);
  assert_int_equal(t_region_size(addr(big)), 5 << 20);
  const void *pa = addr(a);
  dv_array_release(a);
  assert_ok(dv_context_flush_deallocs(ctx));
  assert_int_equal(t_region_size(pa), -1); /* freed: unregistered */
  assert_int_equal(t_regions(), r0 + 2);
  dv_array *again = dev(ctx, 1000); /* the cached block again: registered again */
  assert_int_equal(t_region_size(addr(again)), 1000);
  dv_array_release(again);
  dv_array_release(b);
  dv_array_release(big);
  assert_ok(dv_context_flush_deallocs(ctx));
  assert_int_equal(t_regions(), r0);
  assert_true(t_heaps() > h0); /* cached segments stay heaps */
  assert_ok(dv_memory_trim(ctx));
  assert_int_equal(t_heaps(), h0); /* trimmed: unregistered */
  assert_ok(dv_context_destroy(ctx));
  assert_int_equal(t_count("errors"), 0);
  assert_string_equal(t_domain(), "devarray");
}

/* The direct manager's allocations are the driver's (memcheck sees them),
 * the simulator's buffers are no device addresses, nvtx=off says nothing. */
static void test_silent_where_not_needed(void **state) {
  (void)state;
  tool_open();
  long made = t_count("heaps_made"), regs = t_count("regions_made");
  const char *const cfgs[][2] = {{"memory_manager=direct", NULL},
                                 {"memory_manager=pool", "nvtx=off"}};
  for (size_t i = 0; i < 2; i++) {
    dv_context *ctx = test_context_or_fail(cfgs[i][0], cfgs[i][1], NULL);
    dv_array *a = dev(ctx, 4096);
    dv_array_release(a);
    assert_ok(dv_context_destroy(ctx));
  }
  dv_config *cfg = NULL;
  dv_context *host = NULL;
  assert_ok(dv_config_create(&cfg));
  assert_ok(dv_config_set(cfg, "backend", "host"));
  assert_ok(dv_config_set(cfg, "memory_manager", "pool"));
  assert_ok(dv_context_create(cfg, &host));
  dv_config_destroy(cfg);
  dv_array *a = dev(host, 4096);
  dv_array_release(a);
  assert_ok(dv_context_destroy(host));
  assert_int_equal(t_count("heaps_made"), made);
  assert_int_equal(t_count("regions_made"), regs);
  assert_int_equal(t_count("errors"), 0);
}

/* nvtx_ranges=on: devarray's work in balanced ranges of its domain (last:
 * ranges stay on in the process from then on). */
static void test_ranges(void **state) {
  (void)state;
  tool_open();
  long p0 = t_count("pushes");
  dv_context *ctx = test_context_or_fail("nvtx_ranges=on", NULL);
  assert_int_equal(dv_nvtx_attached() & 2, 2);
  dv_array *a = dev(ctx, 256), *b = dev(ctx, 256);
  assert_ok(dv_array_memset(a, 1, NULL));
  assert_ok(dv_array_copy(b, a, NULL));
  dv_array_release(a);
  dv_array_release(b);
  assert_ok(dv_context_destroy(ctx));
  assert_true(t_count("pushes") >= p0 + 4); /* two allocations, a memset, a copy */
  assert_int_equal(t_count("pushes"), t_count("pops"));
  assert_int_equal(t_count("errors"), 0);
}

/* No tool: nothing is loaded, the pool works as ever. */
static int run_none(void) {
  if (getenv("NVTX_INJECTION64_PATH")) {
    printf("test_nvtx none: NVTX_INJECTION64_PATH must not be set\n");
    return 1;
  }
  dv_context *ctx = NULL;
  dv_config *cfg = NULL;
  if (dv_config_create(&cfg) || dv_config_set(cfg, "memory_manager", "pool") ||
      dv_context_create(cfg, &ctx)) {
    printf("test_nvtx none: %s\n", dv_last_error());
    return 1;
  }
  dv_config_destroy(cfg);
  int64_t n = 1000;
  dv_array *a = NULL;
  int bad = dv_nvtx_attached() != 0;
  if (dv_device_array(ctx, 1, &n, dv_dtype_get(DV_UINT8), NULL, 'C', NULL, &a)) bad = 1;
  dv_array_release(a);
  if (dv_context_destroy(ctx)) bad = 1;
  printf("test_nvtx none: %s\n", bad ? "FAILED" : "no tool, nothing loaded: passed");
  return bad;
}

/* The planted write: a kernel writes element n of an n-element pool array
 * (inside the pool's segment, outside the array).  Exit 0: the write is
 * for compute-sanitizer to report (bench/gpu/run.sh checks its output). */
static int run_overrun(const char *backend) {
  dv_config *cfg = NULL;
  dv_context *ctx = NULL;
  if (dv_config_create(&cfg) || dv_config_set(cfg, "backend", backend) ||
      dv_config_set(cfg, "memory_manager", "pool") || dv_context_create(cfg, &ctx)) {
    printf("SKIPPED: test_nvtx overrun: %s\n", dv_last_error());
    dv_config_destroy(cfg);
    return 77;
  }
  dv_config_destroy(cfg);
  dv_program *p = NULL;
  dv_module *m = NULL;
  dv_kernel *k = NULL;
  dv_status rc = dv_program_create(ctx, "nvtx_overrun",
                                   "DV_KERNEL(past_end, DV_ARRAY(int, x), int n) {\n"
                                   "  DV_BIND(int, x);\n"
                                   "  if (dv_thread_idx(0) == 0) x[n] = 7; /* one past the end */\n"
                                   "}\n",
                                   &p);
  if (!rc) rc = dv_program_build(p, 0, &m);
  dv_program_destroy(p);
  if (!rc) rc = dv_module_kernel(m, "past_end", &k);
  int64_t n = 64;
  dv_array *x = NULL, *y = NULL;
  if (!rc) rc = dv_device_array(ctx, 1, &n, dv_dtype_get(DV_INT32), NULL, 'C', NULL, &x);
  if (!rc)
    rc = dv_device_array(ctx, 1, &n, dv_dtype_get(DV_INT32), NULL, 'C', NULL,
                         &y); /* the neighbour */
  dv_launch_config lc = {{1, 1, 1}, {32, 1, 1}, 0, NULL};
  dv_arg args[2] = {DV_ARG_ARRAY(x), DV_ARG_I32(64)};
  if (!rc) rc = dv_kernel_launch(k, &lc, 2, args);
  printf("test_nvtx overrun: NVTX tool %s; a write of x[64] of a 64-element pool array: %s\n",
         dv_nvtx_attached() & 1 ? "attached" : "not attached", rc ? dv_last_error() : "launched");
  dv_array_release(x);
  dv_array_release(y);
  dv_module_release(m);
  dv_context_destroy(ctx);
  return rc ? 1 : 0;
}

int main(int argc, char **argv) {
  if (argc > 1 && !strcmp(argv[1], "none")) return run_none();
  if (argc > 1 && !strcmp(argv[1], "overrun")) return run_overrun(argc > 2 ? argv[2] : "cuda");
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pool_annotations),
      cmocka_unit_test(test_silent_where_not_needed),
      cmocka_unit_test(test_ranges),
  };
  return test_main(argc, argv, "nvtx", tests, sizeof tests / sizeof tests[0]);
}
