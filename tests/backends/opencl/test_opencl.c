/* Tests specific to the OpenCL backend (run on PoCL in CI). */
#include "common.h"
#include "core/core.h"
#include "backends/opencl/opencl.h"

static void test_build_failure_has_log(void **state) {
  (void)state;
  void *prog = (void *)1;
  char *log = NULL;
  dv_status rc = dv__cl_build(g_ctx->bst, "__kernel void broken(__global int *x) { x[0] = undeclared_thing; }", "", &prog,
                              &log);
  assert_int_equal(rc, DV_ERR_DRIVER);
  assert_null(prog);
  assert_non_null(strstr(dv_last_error(), "build log"));
  assert_non_null(strstr(dv_last_error(), "undeclared_thing"));
  assert_non_null(log); /* the whole log, also returned */
  assert_non_null(strstr(log, "undeclared_thing"));
  dv__free(log);
  assert_ok(dv__cl_build(g_ctx->bst, "__kernel void fine(__global int *x) { x[0] = 1; }", "", &prog, NULL));
  dv__cl_program_release(prog);
}

static void test_status_mapping(void **state) {
  (void)state;
  assert_int_equal(dv__cl_status(CL_SUCCESS), DV_OK);
  assert_int_equal(dv__cl_status(CL_INVALID_COMMAND_QUEUE), DV_ERR_DEVICE_LOST);
  assert_int_equal(dv__cl_status(CL_DEVICE_NOT_AVAILABLE), DV_ERR_DEVICE_LOST);
  assert_int_equal(dv__cl_status(CL_MEM_OBJECT_ALLOCATION_FAILURE), DV_ERR_OUT_OF_MEMORY);
  assert_int_equal(dv__cl_status(CL_OUT_OF_HOST_MEMORY), DV_ERR_HOST_OUT_OF_MEMORY);
  assert_int_equal(dv__cl_status(CL_BUILD_PROGRAM_FAILURE), DV_ERR_DRIVER);
  assert_string_equal(dv__cl_error_name(CL_INVALID_COMMAND_QUEUE), "CL_INVALID_COMMAND_QUEUE");
  assert_string_equal(dv__cl_error_name(-12345), "CL_UNKNOWN_ERROR");
}

/* Views whose origins are not multiples of CL_DEVICE_MEM_BASE_ADDR_ALIGN
 * (no sub-buffers are made: kernels and rects take byte offsets). */
static void test_unaligned_views(void **state) {
  (void)state;
  dv_device_info di;
  assert_ok(dv_context_device_info(g_ctx, &di));
  assert_true(di.base_alignment >= 4);
  enum { N = 1000 };
  uint8_t h[N], back[N];
  for (int i = 0; i < N; i++) h[i] = (uint8_t)(i * 7 + 3);
  int64_t n = N;
  dv_array *hh, *a, *b, *av, *bv, *hb;
  assert_ok(dv_host_array_wrap(g_ctx, h, 1, &n, dv_dtype_get(DV_UINT8), NULL, &hh));
  assert_ok(dv_to_device(g_ctx, hh, NULL, 1, NULL, &a));
  assert_ok(dv_device_array(g_ctx, 1, &n, dv_dtype_get(DV_UINT8), NULL, 'C', NULL, &b));
  assert_ok(dv_array_memset(b, 0, NULL));
  dv_index s1[1] = {DV_SLICE(1, 997, 3)}, s2[1] = {DV_SLICE(-1, 3, -3)};
  assert_ok(dv_array_slice(a, 1, s1, &av)); /* offset 1, stride 3 */
  assert_ok(dv_array_slice(b, 1, s2, &bv)); /* offset 999, stride -3 */
  assert_int_equal(dv_array_size(av), dv_array_size(bv));
  assert_ok(dv_array_copy(bv, av, NULL)); /* device to device: the kernel */
  assert_ok(dv_host_array_wrap(g_ctx, back, 1, &n, dv_dtype_get(DV_UINT8), NULL, &hb));
  assert_ok(dv_copy_to_host(b, hb, NULL, NULL));
  int64_t m = dv_array_size(av);
  for (int64_t k = 0; k < m; k++) assert_int_equal(back[999 - 3 * k], h[1 + 3 * k]);
  for (int i = 0; i < N; i++)
    if ((999 - i) % 3 != 0 || i < 6) assert_int_equal(back[i], 0);
  /* an odd-offset contiguous view, to and from the host */
  dv_array *odd;
  dv_index s3[1] = {DV_SLICE(13, 113, 1)};
  assert_ok(dv_array_slice(a, 1, s3, &odd));
  uint8_t part[100];
  int64_t pn = 100;
  dv_array *hp;
  assert_ok(dv_host_array_wrap(g_ctx, part, 1, &pn, dv_dtype_get(DV_UINT8), NULL, &hp));
  assert_ok(dv_copy_to_host(odd, hp, NULL, NULL));
  assert_memory_equal(part, h + 13, 100);
  dv_array_release(hh), dv_array_release(a), dv_array_release(b), dv_array_release(av);
  dv_array_release(bv), dv_array_release(hb), dv_array_release(odd), dv_array_release(hp);
}

static void test_device_selection(void **state) {
  (void)state;
  dv_device_info di;
  assert_ok(dv_context_device_info(g_ctx, &di));
  dv_context *c;
  assert_ok(test_context(&c, "opencl_device=0:0", NULL));
  dv_context_destroy(c);
  char sub[8];
  snprintf(sub, sizeof sub, "%.5s", di.name); /* a substring of the device's name */
  char opt[64];
  snprintf(opt, sizeof opt, "opencl_device=%s", sub);
  assert_ok(test_context(&c, opt, NULL));
  dv_device_info d2;
  assert_ok(dv_context_device_info(c, &d2));
  assert_string_equal(d2.name, di.name);
  dv_context_destroy(c);
  c = (dv_context *)1;
  /* An ordinal (Numba's select_device(0)): 0 is the device the default choice gives. */
  assert_ok(test_context(&c, "opencl_device=0", NULL));
  assert_ok(dv_context_device_info(c, &d2));
  assert_string_equal(d2.name, di.name);
  dv_context_destroy(c);
  c = (dv_context *)1;
  assert_status(test_context(&c, "opencl_device=63", NULL), DV_ERR_BACKEND_UNAVAILABLE);
  assert_null(c);
  assert_non_null(strstr(dv_last_error(), "no OpenCL device 63"));
  c = (dv_context *)1;
  assert_status(test_context(&c, "opencl_device=99999999999999999999999", NULL), DV_ERR_BACKEND_UNAVAILABLE);
  assert_null(c);
  c = (dv_context *)1;
  assert_status(test_context(&c, "opencl_device=9:9", NULL), DV_ERR_BACKEND_UNAVAILABLE);
  assert_null(c);
  assert_status(test_context(&c, "opencl_device=no-such-device-name", NULL), DV_ERR_BACKEND_UNAVAILABLE);
  assert_non_null(strstr(dv_last_error(), "no-such-device-name"));
}

/* OpenCL cannot report free memory; devarray accounts for its buffers, so
 * out-of-memory (after the one flush-and-retry) is real. */
static void test_out_of_memory(void **state) {
  (void)state;
  dv_device_info di;
  assert_ok(dv_context_device_info(g_ctx, &di));
  int64_t big = (int64_t)di.max_allocation;
  dv_array *a[64] = {0};
  int k = 0;
  dv_status rc = DV_OK;
  for (; k < 64; k++) {
    rc = dv_device_array(g_ctx, 1, &big, dv_dtype_get(DV_UINT8), NULL, 'C', NULL, &a[k]);
    if (rc) break;
  }
  assert_int_equal(rc, DV_ERR_OUT_OF_MEMORY);
  assert_true((uint64_t)k * di.max_allocation <= di.total_memory);
  assert_true((uint64_t)(k + 1) * di.max_allocation > di.total_memory);
  size_t f, t;
  assert_ok(dv_context_memory_info(g_ctx, &f, &t));
  assert_int_equal(t, di.total_memory);
  assert_int_equal(f, di.total_memory - (uint64_t)k * di.max_allocation);
  for (int i = 0; i < k; i++) dv_array_release(a[i]);
  assert_ok(dv_context_flush_deallocs(g_ctx));
  assert_ok(dv_context_memory_info(g_ctx, &f, &t));
  assert_int_equal(f, t);
  int64_t toobig = big + 1;
  dv_array *x = (dv_array *)1;
  assert_status(dv_device_array(g_ctx, 1, &toobig, dv_dtype_get(DV_UINT8), NULL, 'C', NULL, &x), DV_ERR_OUT_OF_MEMORY);
  assert_null(x);
  assert_non_null(strstr(dv_last_error(), "CL_DEVICE_MAX_MEM_ALLOC_SIZE"));
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "opencl") != 0) {
    printf("SKIPPED: suite opencl on backend %s: OpenCL-only tests\n", argv[1]);
    return 77;
  }
  const struct CMUnitTest tests[] = {T(test_build_failure_has_log), T(test_status_mapping), T(test_unaligned_views),
                                     T(test_device_selection), T(test_out_of_memory)};
  return test_main(argc, argv, "opencl", tests, sizeof tests / sizeof tests[0]);
}
