/* White-box tests of the host simulator's own checks: it must notice
 * out-of-bounds writes (guard bytes) and writes after free (poison). */
#include "common.h"
#include "array/array.h"
#include "backends/host/host_internal.h"

static hb_block *block_of(dv_array *a) { return (hb_block *)a->alloc->buf; }

static void test_guard_overwrite_detected(void **state) {
  (void)state;
  int64_t n = 100;
  dv_array *a;
  assert_ok(dv_device_array(g_ctx, 1, &n, dv_dtype_get(DV_UINT8), NULL, 'C', NULL, &a));
  assert_ok(dv_context_check_memory(g_ctx));
  hb_block *b = block_of(a);
  b->data[b->bytes] ^= 0x5A; /* one byte past the end */
  assert_status(dv_context_check_memory(g_ctx), DV_ERR_CORRUPTION);
  b->data[b->bytes] ^= 0x5A; /* repair, so that teardown passes */
  assert_ok(dv_context_check_memory(g_ctx));
  b->data[-1] ^= 1; /* one byte before the start */
  assert_status(dv_context_check_memory(g_ctx), DV_ERR_CORRUPTION);
  b->data[-1] ^= 1;
  dv_array_release(a);
  assert_ok(dv_context_flush_deallocs(g_ctx));
}

static void test_write_after_free_detected(void **state) {
  (void)state;
  dv_context *c;
  assert_ok(test_context(&c, NULL));
  int64_t n = 64;
  dv_array *a;
  assert_ok(dv_device_array(c, 1, &n, dv_dtype_get(DV_UINT8), NULL, 'C', NULL, &a));
  hb_block *b = block_of(a);
  unsigned char *data = b->data;
  dv_array_release(a);
  assert_ok(dv_context_flush_deallocs(c)); /* freed: poisoned, in quarantine */
  assert_int_equal(data[10], 0xDF);
  assert_ok(dv_context_check_memory(c));
  data[10] = 1; /* a stray write after free */
  assert_status(dv_context_check_memory(c), DV_ERR_CORRUPTION);
  data[10] = 0xDF;
  assert_ok(dv_context_destroy(c));
}

static void test_guarded_free_reports(void **state) {
  (void)state;
  int64_t n = 16;
  dv_array *a;
  assert_ok(dv_device_array(g_ctx, 1, &n, dv_dtype_get(DV_UINT8), NULL, 'C', NULL, &a));
  hb_block *b = block_of(a);
  b->data[b->bytes + 3] = 0;
  assert_ok(dv_defer_cleanup_begin(g_ctx));
  dv_array_release(a);
  assert_ok(dv_defer_cleanup_end(g_ctx));
  assert_status(dv_context_flush_deallocs(g_ctx), DV_ERR_CORRUPTION);
  /* the corruption stays on record for the context's integrity check */
  assert_status(dv_context_check_memory(g_ctx), DV_ERR_CORRUPTION);
  /* teardown would fail on purpose; use a fresh context for the fixture */
  assert_status(dv_context_destroy(g_ctx), DV_OK);
  assert_ok(test_context(&g_ctx, NULL));
}

int main(int argc, char **argv) {
  if (argc > 1 && strncmp(argv[1], "host", 4) != 0) {
    printf("SKIPPED: suite simulator on backend %s: white-box tests of the host simulator\n", argv[1]);
    return 77;
  }
  const struct CMUnitTest tests[] = {T(test_guard_overwrite_detected), T(test_write_after_free_detected),
                                     T(test_guarded_free_reports)};
  return test_main(argc, argv, "simulator", tests, sizeof tests / sizeof tests[0]);
}
