/*
 * A kernel's access outside its arrays in the host simulator's default
 * fast mode (issue 37 item 1): device blocks are mappings of their own with
 * PROT_NONE guard pages (src/backends/host/device/mem.c), so the classic
 * missing `if (i < n)` and accesses far past the end or before the start
 * fail the launch with DV_ERR_KERNEL_FAULT naming the kernel (and, where
 * the address is near one, the argument), and never touch the program's
 * own memory: a host buffer malloc'd before keeps its checksum, and the
 * context goes on.  Writes inside a block's slack are caught by its
 * canaries after the launch.
 */
#include "common.h"

static char g_cache_dir[256];

static const char *k_src =
    "DV_KERNEL(fill, DV_ARRAY(float, a)) {\n"
    "  DV_BIND(float, a);\n"
    "  a[dv_global_id(0)] = 1.0f; /* no if (i < n) */\n"
    "}\n"
    "DV_KERNEL(poke, DV_ARRAY(float, a), dv_i64 at) {\n"
    "  DV_BIND(float, a);\n"
    "  if (dv_global_id(0) == 0) a[at] = 2.0f;\n"
    "}\n"
    "DV_KERNEL(peek, DV_ARRAY(float, a), DV_ARRAY(float, out), dv_i64 at) {\n"
    "  DV_BIND(float, a);\n"
    "  DV_BIND(float, out);\n"
    "  if (dv_global_id(0) == 0) out[0] = a[at];\n"
    "}\n";

static uint64_t checksum(const unsigned char *p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

typedef struct {
  dv_context *c;
  dv_module *m;
  unsigned char *host; /* malloc'd before the device arrays */
  size_t host_n;
  uint64_t sum;
} fx;

static void fx_open(fx *f) {
  f->host_n = 1 << 20;
  f->host = malloc(f->host_n);
  assert_non_null(f->host);
  fill_pattern(f->host, f->host_n, 37);
  f->sum = checksum(f->host, f->host_n);
  f->c = test_context_or_fail("host_mode=fast", NULL);
  f->m = test_build(f->c, "faults", k_src, NULL, NULL);
}

static void fx_close(fx *f) {
  assert_int_equal(checksum(f->host, f->host_n), f->sum);
  dv_module_release(f->m);
  assert_ok(dv_context_check_memory(f->c));
  assert_ok(dv_context_destroy(f->c));
  free(f->host);
}

static dv_array *dev_floats(dv_context *c, int64_t n, float v) {
  float *h = malloc((size_t)n * sizeof *h);
  assert_non_null(h);
  for (int64_t i = 0; i < n; i++) h[i] = v;
  dv_array *d = test_dev_from(c, h, n, DV_FLOAT32);
  free(h);
  return d;
}

static void expect_values(dv_array *d, int64_t n, float v) {
  float *h = malloc((size_t)n * sizeof *h);
  assert_non_null(h);
  test_to_host(d, h);
  for (int64_t i = 0; i < n; i++)
    if (h[i] != v) fail_msg("element %lld is %g, expected %g", (long long)i, h[i], v);
  free(h);
}

static void expect_fault(const char *kernel, const char *also) {
  const char *e = dv_last_error();
  char want[64];
  snprintf(want, sizeof want, "kernel %s", kernel);
  if (!strstr(e, want) || (also && !strstr(e, also))) fail_msg("the report: %s", e);
}

/* The classic: 4 x 256 threads over 10 elements, no bounds test.  Its
 * writes run from the canary through the slack into the guard page. */
static void test_missing_bounds_check(void **state) {
  (void)state;
  fx f;
  fx_open(&f);
  dv_array *other = dev_floats(f.c, 1000, 5.0f); /* an unrelated array */
  dv_array *d = dev_floats(f.c, 10, 0.0f);
  dv_launch_config lc = {{4, 1, 1}, {256, 1, 1}, 0, NULL};
  dv_arg a[] = {DV_ARG_ARRAY(d)};
  for (int rep = 0; rep < 3; rep++) { /* the context goes on, and faults again */
    assert_status(dv_kernel_launch(test_kernel(f.m, "fill"), &lc, 1, a), DV_ERR_KERNEL_FAULT);
    expect_fault("fill", "SIGSEGV");
    expect_fault("fill", "of the 40-byte device buffer of argument 0 (`");
  }
  expect_values(d, 10, 1.0f);
  expect_values(other, 1000, 5.0f);
  /* asynchronous: the stream's next synchronize reports it */
  dv_stream *s = NULL;
  assert_ok(dv_stream_create(f.c, 0, &s));
  dv_launch_config alc = {{4, 1, 1}, {256, 1, 1}, 0, s};
  dv_status rc = dv_kernel_launch(test_kernel(f.m, "fill"), &alc, 1, a);
  if (rc == DV_OK) rc = dv_stream_synchronize(s);
  assert_int_equal(rc, DV_ERR_KERNEL_FAULT);
  expect_fault("fill", NULL);
  dv_stream_release(s);
  dv_array_release(d);
  dv_array_release(other);
  fx_close(&f);
}

/* Single writes and reads at elements `at` of a 10-element array: in the
 * slack (the canaries), just past the slack, 64 KiB past the end, one
 * element and 64 KiB before the start. */
static void test_single_accesses(void **state) {
  (void)state;
  fx f;
  fx_open(&f);
  dv_array *other = dev_floats(f.c, 1000, 5.0f);
  dv_array *out = dev_floats(f.c, 1, 0.0f);
  const struct {
    int64_t at;
    bool write;
    const char *also; /* in the report, besides the kernel's name */
  } cases[] = {
      {10, true, "wrote outside the 40-byte device buffer of argument 0"}, /* the canary */
      {-1, true, "wrote outside the 40-byte device buffer of argument 0"},
      {10 + 64, true, "SIGSEGV"},                     /* 256 bytes past: past the slack */
      {10 + 16384, true, "byte offset 65576 of the 40-byte device buffer of argument 0"},
      {-16384, true, "byte offset -65536 of the 40-byte"},
      {10 + 1024, false, "SIGSEGV"},
      {10 + 16384, false, "past its end"},
      {-1024, false, "before its start"},
      {-16384, false, "byte offset -65536"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    dv_array *d = dev_floats(f.c, 10, 3.0f);
    dv_launch_config lc = {{1, 1, 1}, {32, 1, 1}, 0, NULL};
    dv_status rc;
    if (cases[i].write) {
      dv_arg a[] = {DV_ARG_ARRAY(d), DV_ARG_I64(cases[i].at)};
      rc = dv_kernel_launch(test_kernel(f.m, "poke"), &lc, 2, a);
    } else {
      dv_arg a[] = {DV_ARG_ARRAY(d), DV_ARG_ARRAY(out), DV_ARG_I64(cases[i].at)};
      rc = dv_kernel_launch(test_kernel(f.m, "peek"), &lc, 3, a);
    }
    if (rc != DV_ERR_KERNEL_FAULT)
      fail_msg("%s at %lld: %s (%s)", cases[i].write ? "write" : "read", (long long)cases[i].at,
               dv_status_name(rc), dv_last_error());
    expect_fault(cases[i].write ? "poke" : "peek", cases[i].also);
    expect_values(d, 10, 3.0f);
    dv_array_release(d);
    assert_ok(dv_context_flush_deallocs(f.c)); /* the canaries were repaired after the report */
  }
  expect_values(other, 1000, 5.0f);
  dv_array_release(out);
  dv_array_release(other);
  fx_close(&f);
}

/* Many live arrays: each has guard pages of its own while the budget of
 * memory maps lasts (a third of vm.max_map_count), then the rest are mapped
 * without; all of them work, and the first ones still fault. */
static void test_many_arrays(void **state) {
  (void)state;
  fx f;
  fx_open(&f);
  enum { N = 30000 };
  dv_array **arr = calloc(N, sizeof *arr);
  assert_non_null(arr);
  int64_t n = 10;
  for (int i = 0; i < N; i++)
    assert_ok(dv_device_array(f.c, 1, &n, dv_dtype_get(DV_FLOAT32), NULL, 'C', NULL, &arr[i]));
  dv_launch_config lc = {{4, 1, 1}, {256, 1, 1}, 0, NULL};
  dv_arg a[] = {DV_ARG_ARRAY(arr[0])};
  assert_status(dv_kernel_launch(test_kernel(f.m, "fill"), &lc, 1, a), DV_ERR_KERNEL_FAULT);
  dv_launch_config ok = {{1, 1, 1}, {10, 1, 1}, 0, NULL};
  dv_arg last[] = {DV_ARG_ARRAY(arr[N - 1])};
  assert_ok(dv_kernel_launch(test_kernel(f.m, "fill"), &ok, 1, last));
  expect_values(arr[N - 1], 10, 1.0f);
  for (int i = 0; i < N; i++) dv_array_release(arr[i]);
  free(arr);
  assert_ok(dv_context_flush_deallocs(f.c));
  fx_close(&f);
}

int main(int argc, char **argv) {
  int begin = kernel_suite_begin(argc, argv, "kernel_faults", NULL, g_cache_dir, sizeof g_cache_dir);
  if (begin) return begin;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_missing_bounds_check),
      cmocka_unit_test(test_single_accesses),
      cmocka_unit_test(test_many_arrays),
  };
  return kernel_suite_end(g_cache_dir, test_main(argc, argv, "kernel_faults", tests,
                                                 sizeof tests / sizeof tests[0]));
}
