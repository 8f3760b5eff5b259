#define _DEFAULT_SOURCE /* setenv */
/* Options from the environment (CTest sets the variables): Numba's names
 * as fallbacks, DV_ names first, bad values warned about and defaulted. */
#include "common.h"

static int g_warnings, g_too_long;
static char g_last[512];
static void log_cb(dv_log_level level, const char *msg, void *user) {
  (void)user;
  if (level == DV_LOG_WARN) g_warnings++, snprintf(g_last, sizeof g_last, "%s", msg);
  /* the warning for DV_HOST_CFLAGS (set by main) names the limit */
  if (level == DV_LOG_WARN && strstr(msg, "DV_HOST_CFLAGS") && strstr(msg, "511")) g_too_long++;
}

static void expect(const char *name, const char *value, dv_option_source source) {
  char buf[128];
  dv_option_source src;
  assert_ok(dv_option_get(name, buf, sizeof buf, &src));
  if (strcmp(buf, value) != 0 || src != source)
    fail_msg("%s = %s (source %d), expected %s (source %d)", name, buf, (int)src, value, (int)source);
}

static void test_numba_fallback(void **state) {
  (void)state;
  /* NUMBA_CUDA_MAX_PENDING_DEALLOCS_COUNT=3, DV_ unset */
  expect("max_pending_deallocs_count", "3", DV_SOURCE_ENV_NUMBA);
  /* both set: DV_MAX_PENDING_DEALLOCS_RATIO=0.5 wins over NUMBA's 0.9 */
  expect("max_pending_deallocs_ratio", "0.5", DV_SOURCE_ENV);
  /* DV_HOST_MEMORY=lots is invalid: warned, default kept */
  expect("host_memory", "1073741824", DV_SOURCE_DEFAULT);
  /* DV_MAX... clamped: DV_HOST_DELAY_US=-5 is below 0 */
  expect("host_delay_us", "0", DV_SOURCE_ENV);
  assert_true(g_warnings >= 2);
  /* a string longer than DV_OPTION_STRING_MAX: warned about with the limit,
   * the default kept (not a value cut short) */
  expect("host_cflags", "", DV_SOURCE_DEFAULT);
  assert_int_equal(g_too_long, 1);
  /* the context takes these values, and the count limit really is 3 */
  dv_context *c;
  assert_ok(dv_context_create(NULL, &c));
  dv_array *a[4];
  int64_t n = 16;
  for (int i = 0; i < 4; i++) assert_ok(dv_device_array(c, 1, &n, dv_dtype_get(DV_INT8), NULL, 'C', NULL, &a[i]));
  for (int i = 0; i < 3; i++) dv_array_release(a[i]);
  size_t cnt;
  assert_ok(dv_context_pending_deallocs(c, &cnt, NULL));
  assert_int_equal(cnt, 3);
  dv_array_release(a[3]);
  assert_ok(dv_context_pending_deallocs(c, &cnt, NULL));
  assert_int_equal(cnt, 0);
  assert_ok(dv_context_destroy(c));
}

/* The staging options' former names (issue 35): the option and its
 * environment variable answer to both; the new variable wins. */
static void test_former_names(void **state) {
  (void)state;
  /* DV_CUDA_STAGING_CHUNK=64K alone */
  expect("staging_chunk", "65536", DV_SOURCE_ENV);
  expect("cuda_staging_chunk", "65536", DV_SOURCE_ENV);
  /* DV_STAGING_LIMIT=8M and DV_CUDA_STAGING_LIMIT=1M */
  expect("staging_limit", "8388608", DV_SOURCE_ENV);
  expect("cuda_staging_limit", "8388608", DV_SOURCE_ENV);
  expect("staging_threads", "0", DV_SOURCE_DEFAULT);
  dv_config *cfg;
  assert_ok(dv_config_create(&cfg));
  assert_ok(dv_config_set(cfg, "cuda_staging_threads", "3"));
  assert_ok(dv_config_set(cfg, "staging_thread_min", "64K"));
  assert_status(dv_config_set(cfg, "cuda_staging_nope", "1"), DV_ERR_BAD_OPTION);
  dv_context *c;
  assert_ok(dv_context_create(cfg, &c));
  char buf[64];
  dv_option_source src;
  assert_ok(dv_context_option(c, "staging_threads", buf, sizeof buf, &src));
  assert_string_equal(buf, "3");
  assert_int_equal(src, DV_SOURCE_API);
  assert_ok(dv_context_option(c, "cuda_staging_thread_min", buf, sizeof buf, &src));
  assert_string_equal(buf, "65536");
  assert_ok(dv_context_destroy(c));
  dv_config_destroy(cfg);
}

int main(void) {
  dv_set_log_callback(log_cb, NULL); /* before anything reads the options */
  static char flags[DV_OPTION_STRING_MAX + 90];
  memset(flags, ' ', sizeof flags - 1);
  memcpy(flags, "-O3", 3);
  setenv("DV_HOST_CFLAGS", flags, 1);
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_numba_fallback), cmocka_unit_test(test_former_names)};
  return cmocka_run_group_tests_name("env", tests, NULL, NULL);
}
