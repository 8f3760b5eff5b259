/* Backend-independent API: statuses, options and configs, backends, log. */
#include "common.h"

static void test_status_table(void **state) {
  (void)state;
  dv_status all[] = {
#define X(name, value, desc) DV_##name,
      DV_STATUS_MAP(X)
#undef X
  };
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
    const char *n = dv_status_name(all[i]);
    assert_true(strncmp(n, "DV_", 3) == 0);
    assert_string_not_equal(n, "DV_UNKNOWN");
    assert_true(strlen(dv_status_str(all[i])) > 3);
    for (size_t j = 0; j < i; j++) assert_int_not_equal(all[i], all[j]);
  }
  assert_string_equal(dv_status_name(DV_ERR_SHAPE_MISMATCH), "DV_ERR_SHAPE_MISMATCH");
  assert_string_equal(dv_status_name((dv_status)12345), "DV_UNKNOWN");
  assert_string_equal(dv_status_str((dv_status)12345), "unknown status");
  /* grouped by hundreds */
  assert_int_equal(DV_ERR_INVALID_ARGUMENT / 100, 1);
  assert_int_equal(DV_ERR_OUT_OF_MEMORY / 100, 2);
  assert_int_equal(DV_ERR_NOT_SUPPORTED / 100, 3);
  assert_int_equal(DV_ERR_DRIVER / 100, 4);
  assert_int_equal(DV_ERR_LIBRARY_LOAD / 100, 5);
  assert_int_equal(DV_ERR_MISUSE / 100, 6);
  assert_string_equal(dv_version(), "0.2.0");
}

static void test_options(void **state) {
  (void)state;
  assert_true(dv_option_count() >= 10);
  dv_option_info oi;
  for (size_t i = 0; i < dv_option_count(); i++) {
    assert_ok(dv_option_describe(i, &oi));
    assert_true(strncmp(oi.env, "DV_", 3) == 0);
    char buf[128];
    dv_option_source src;
    assert_ok(dv_option_get(oi.name, buf, sizeof buf, &src));
  }
  assert_status(dv_option_describe(dv_option_count(), &oi), DV_ERR_INDEX);
  char buf[64];
  assert_status(dv_option_get("nope", buf, sizeof buf, NULL), DV_ERR_BAD_OPTION);
  dv_config *cfg;
  assert_ok(dv_config_create(&cfg));
  assert_status(dv_config_set(cfg, "nope", "1"), DV_ERR_BAD_OPTION);
  assert_status(dv_config_set(cfg, "max_pending_deallocs_count", "ten"), DV_ERR_BAD_OPTION);
  assert_status(dv_config_set(cfg, "max_pending_deallocs_ratio", "1.5"), DV_ERR_BAD_OPTION);
  assert_non_null(strstr(dv_last_error(), "out of range"));
  assert_status(dv_config_set(cfg, "host_memory", "12Q"), DV_ERR_BAD_OPTION);
  assert_status(dv_config_set(cfg, "host_guard", "maybe"), DV_ERR_BAD_OPTION);
  assert_status(dv_config_set(cfg, "backend", "vulkan"), DV_ERR_BAD_OPTION);
  assert_status(dv_config_set(cfg, "log_level", "loud"), DV_ERR_BAD_OPTION);
  /* string options hold DV_OPTION_STRING_MAX characters; a longer value is
   * refused, saying so, and the config keeps its earlier value */
  char longest[DV_OPTION_STRING_MAX + 2], got[DV_OPTION_STRING_MAX + 2];
  memset(longest, 'x', sizeof longest - 1);
  longest[sizeof longest - 1] = 0; /* DV_OPTION_STRING_MAX + 1 characters */
  assert_ok(dv_config_set(cfg, "host_cflags", "-O1"));
  assert_status(dv_config_set(cfg, "host_cflags", longest), DV_ERR_BAD_OPTION);
  assert_non_null(strstr(dv_last_error(), "511"));
  assert_non_null(strstr(dv_last_error(), "host_cflags"));
  assert_status(dv_config_set(cfg, "kernel_cache_dir", longest), DV_ERR_BAD_OPTION);
  longest[DV_OPTION_STRING_MAX] = 0; /* the most a string option holds */
  assert_ok(dv_config_set(cfg, "kernel_cache_dir", longest));
  assert_ok(dv_config_set(cfg, "host_memory", "64M"));
  assert_ok(dv_config_set(cfg, "host_guard", "off"));
  assert_ok(dv_config_set(cfg, "max_pending_deallocs_count", "3"));
  assert_ok(dv_config_set(cfg, "backend", "host"));
  dv_context *c;
  assert_ok(dv_context_create(cfg, &c));
  dv_config_destroy(cfg); /* the context keeps its values */
  dv_option_source src;
  assert_ok(dv_context_option(c, "host_memory", buf, sizeof buf, &src));
  assert_string_equal(buf, "67108864");
  assert_int_equal(src, DV_SOURCE_API);
  assert_ok(dv_context_option(c, "host_cflags", got, sizeof got, &src));
  assert_string_equal(got, "-O1");
  assert_ok(dv_context_option(c, "kernel_cache_dir", got, sizeof got, &src));
  assert_string_equal(got, longest); /* all 511 characters */
  assert_ok(dv_context_option(c, "max_pending_deallocs_ratio", buf, sizeof buf, &src));
  assert_string_equal(buf, "0.2");
  assert_int_equal(src, DV_SOURCE_DEFAULT);
  size_t f, t;
  assert_ok(dv_context_memory_info(c, &f, &t));
  assert_int_equal(t, 64 << 20);
  /* The successors of the deprecated names (issue 35) answer the same. */
  size_t f2 = 1, t2 = 1;
  assert_ok(dv_memory_info(c, &f2, &t2));
  assert_int_equal(t2, t);
  assert_ok(dv_memory_info(c, NULL, NULL));
  assert_status(dv_memory_info(NULL, &f2, &t2), DV_ERR_NULL_ARGUMENT);
  assert_int_equal(f2, 0);
  assert_int_equal(t2, 0);
  assert_string_equal(dv_memory_manager_name(c), dv_context_memory_manager(c));
  assert_string_equal(dv_memory_manager_name(NULL), dv_context_memory_manager(NULL));
  assert_string_equal(dv_context_backend(c), "host");
  dv_device_info di;
  assert_ok(dv_context_device_info(c, &di));
  assert_string_equal(di.backend, "host");
  assert_int_equal(di.total_memory, 64 << 20);
  assert_ok(dv_context_destroy(c));
}

static void test_backends(void **state) {
  (void)state;
  assert_int_equal(dv_backend_count(), 4);
  assert_string_equal(dv_backend_name(0), "host");
  assert_string_equal(dv_backend_name(3), "hip");
  assert_null(dv_backend_name(4));
  char reason[256];
  assert_ok(dv_backend_probe("host", reason, sizeof reason));
  assert_status(dv_backend_probe("metal", reason, sizeof reason), DV_ERR_BACKEND_UNAVAILABLE);
  assert_non_null(strstr(reason, "metal"));
  /* asking for a backend by name that is not here fails with its reason */
  for (size_t i = 1; i < dv_backend_count(); i++) {
    const char *name = dv_backend_name(i);
    if (dv_backend_probe(name, reason, sizeof reason) == DV_OK) continue;
    dv_config *cfg;
    dv_context *c = (dv_context *)1;
    assert_ok(dv_config_create(&cfg));
    assert_ok(dv_config_set(cfg, "backend", name));
    dv_status rc = dv_context_create(cfg, &c);
    assert_int_not_equal(rc, DV_OK);
    assert_null(c);
    assert_true(dv_last_error()[0] != 0);
    dv_config_destroy(cfg);
  }
  /* automatic selection always finds something: the host simulator at least */
  dv_context *c;
  assert_ok(dv_context_create(NULL, &c));
  assert_ok(dv_context_destroy(c));
}

/* The host simulator has one device, 0: option `device` names it or nothing;
 * anything else is refused, as OpenCL and CUDA refuse a device they do not
 * have (issue 22 #13; it used to accept 99, -1 and "gpu0"). */
static dv_status host_with_device(const char *backend, const char *device, dv_context **c) {
  dv_config *cfg;
  assert_ok(dv_config_create(&cfg));
  assert_ok(dv_config_set(cfg, "backend", backend));
  assert_ok(dv_config_set(cfg, "device", device));
  assert_ok(dv_config_set(cfg, "log_level", "off"));
  dv_status rc = dv_context_create(cfg, c);
  dv_config_destroy(cfg);
  return rc;
}

static void test_host_device_option(void **state) {
  (void)state;
  const char *good[] = {"", "0"};
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
    dv_context *c = NULL;
    assert_ok(host_with_device("host", good[i], &c));
    assert_string_equal(dv_context_backend(c), "host");
    assert_ok(dv_context_destroy(c));
  }
  const struct {
    const char *device;
    dv_status want;
  } bad[] = {{"99", DV_ERR_BACKEND_UNAVAILABLE}, {"1", DV_ERR_BACKEND_UNAVAILABLE},
             {"-1", DV_ERR_INVALID_ARGUMENT},    {"gpu0", DV_ERR_INVALID_ARGUMENT},
             {"0x", DV_ERR_INVALID_ARGUMENT}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    dv_context *c = (dv_context *)1;
    dv_status rc = host_with_device("host", bad[i].device, &c);
    if (rc != bad[i].want)
      fail_msg("device \"%s\": %s (%s), expected %s", bad[i].device, dv_status_name(rc),
               dv_last_error(), dv_status_name(bad[i].want));
    assert_null(c);
    assert_non_null(strstr(dv_last_error(), bad[i].device));
    /* automatic selection does not fall back to the host simulator either
     * (an OpenCL device whose name contains the text may take it) */
    c = NULL;
    if (host_with_device("auto", bad[i].device, &c) == DV_OK) {
      assert_string_not_equal(dv_context_backend(c), "host");
      assert_ok(dv_context_destroy(c));
    } else {
      assert_null(c);
    }
  }
}

static int g_logged;
static void log_cb(dv_log_level level, const char *msg, void *user) {
  (void)user;
  if (level == DV_LOG_ERROR && strstr(msg, "injected")) g_logged++;
}

static void test_log_callback(void **state) {
  (void)state;
  dv_set_log_callback(log_cb, NULL);
  dv_context *c;
  assert_ok(test_context(&c, NULL));
  int64_t n = 8;
  dv_array *a;
  assert_ok(dv_device_array(c, 1, &n, dv_dtype_get(DV_INT8), NULL, 'C', NULL, &a));
  assert_ok(dv_defer_cleanup_begin(c));
  dv_array_release(a);
  assert_ok(dv_defer_cleanup_end(c));
  if (dv_fault_inject(c, DV_FAULT_FREE, 1) == DV_OK) {
    assert_status(dv_context_flush_deallocs(c), DV_ERR_DRIVER);
    assert_int_equal(g_logged, 1);
  }
  dv_set_log_callback(NULL, NULL);
  assert_ok(dv_context_destroy(c));
}

/* The fault options work through a config too. */
static void test_fault_options(void **state) {
  (void)state;
  dv_context *c = (dv_context *)1;
  assert_status(test_context(&c, "fault_host_alloc=1", NULL), DV_ERR_HOST_OUT_OF_MEMORY);
  assert_null(c);
  assert_false(dv_fault_pending(NULL, DV_FAULT_HOST_ALLOC));
  assert_ok(test_context(&c, "fault_device_alloc=1", "fault_copy=2", NULL));
  assert_true(dv_fault_pending(c, DV_FAULT_DEVICE_ALLOC));
  int64_t n = 8;
  dv_array *a;
  /* the first attempt fails, the retry after the flush succeeds */
  assert_ok(dv_device_array(c, 1, &n, dv_dtype_get(DV_INT8), NULL, 'C', NULL, &a));
  assert_false(dv_fault_pending(c, DV_FAULT_DEVICE_ALLOC));
  int8_t h[8] = {0};
  dv_array *hh;
  assert_ok(dv_host_array_wrap(c, h, 1, &n, dv_dtype_get(DV_INT8), NULL, &hh));
  assert_ok(dv_copy_to_device(a, hh, NULL));
  assert_status(dv_copy_to_device(a, hh, NULL), DV_ERR_DRIVER); /* the 2nd copy */
  dv_array_release(a), dv_array_release(hh);
  assert_ok(dv_context_destroy(c));
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_fault_options), cmocka_unit_test(test_status_table), cmocka_unit_test(test_options),
                                     cmocka_unit_test(test_backends), cmocka_unit_test(test_log_callback),
                                     cmocka_unit_test(test_host_device_option)};
  return test_main(argc, argv, "api", tests, sizeof tests / sizeof tests[0]);
}
