/* An OpenCL simulator (Oclgrind) is never chosen automatically (issue 24).
 * Oclgrind calls itself a GPU (and a CPU and an accelerator); it interprets
 * kernels hundreds of times slower than native code, so only a device named
 * through opencl_device selects it.  The OpenCL ICD loader reads
 * OCL_ICD_VENDORS once per process, so each visibility is its own CTest
 * entry (tests/CMakeLists.txt makes the vendor directories):
 *   test_oclgrind only   OCL_ICD_VENDORS holds oclgrind.icd alone
 *   test_oclgrind both   oclgrind.icd and PoCL's pocl.icd
 *   test_oclgrind env    oclgrind.icd alone, DV_OPENCL_DEVICE=Oclgrind set
 * Exit 77 (skipped, with the reason) when Oclgrind's ICD library or, for
 * "both", PoCL's is missing here. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <unistd.h>

#include "common.h"

static const char *g_scenario;

/* A context with these "name=value" options (NULL-terminated); returns its status. */
static dv_status make_ctx(dv_context **out, ...) {
  dv_config *cfg;
  dv_status rc = dv_config_create(&cfg);
  if (rc) return rc;
  va_list ap;
  va_start(ap, out);
  for (const char *kv; (kv = va_arg(ap, const char *)) != NULL;) {
    char name[64];
    const char *eq = strchr(kv, '=');
    snprintf(name, sizeof name, "%.*s", (int)(eq - kv), kv);
    if ((rc = dv_config_set(cfg, name, eq + 1)) != DV_OK) break;
  }
  va_end(ap);
  if (!rc) rc = dv_context_create(cfg, out);
  dv_config_destroy(cfg);
  return rc;
}

static bool device_is_oclgrind(dv_context *ctx) {
  dv_device_info di;
  assert_ok(dv_context_device_info(ctx, &di));
  return strstr(di.name, "Oclgrind") != NULL;
}

/* Automatic choice with Oclgrind visible: never Oclgrind.  With Oclgrind
 * alone (or beside PoCL, a CPU device, which automatic mode does not prefer
 * to the simulator) the host simulator is chosen. */
static void test_auto_skips_simulator(void **state) {
  (void)state;
  dv_context *ctx = NULL;
  assert_ok(make_ctx(&ctx, "backend=auto", (const char *)NULL));
  assert_string_equal(dv_context_backend(ctx), "host");
  assert_ok(dv_context_destroy(ctx));
}

/* backend=opencl without a device named: Oclgrind alone is refused, the
 * message saying why and how to name it. */
static void test_opencl_default_refuses_simulator(void **state) {
  (void)state;
  dv_context *ctx = NULL;
  assert_status(make_ctx(&ctx, "backend=opencl", (const char *)NULL), DV_ERR_BACKEND_UNAVAILABLE);
  assert_null(ctx);
  assert_non_null(strstr(dv_last_error(), "never chosen automatically"));
  assert_non_null(strstr(dv_last_error(), "Oclgrind"));
}

/* backend=opencl without a device named, PoCL beside Oclgrind (Oclgrind's
 * platform first in the loader's order here): PoCL's device. */
static void test_opencl_default_picks_pocl(void **state) {
  (void)state;
  dv_context *ctx = NULL;
  assert_ok(make_ctx(&ctx, "backend=opencl", (const char *)NULL));
  assert_string_equal(dv_context_backend(ctx), "opencl");
  assert_false(device_is_oclgrind(ctx));
  assert_ok(dv_context_destroy(ctx));
}

/* y[i] = a * x[i] + y[i] on ctx's device, checked against C. */
static void run_saxpy(dv_context *ctx) {
  static const char *src = "DV_KERNEL(saxpy, float a, DV_ARRAY(const float, x), DV_ARRAY(float, y), dv_i64 n) {\n"
                           "  DV_BIND(const float, x); DV_BIND(float, y);\n"
                           "  dv_i64 i = dv_global_id(0);\n"
                           "  if (i < n) y[i] = a * x[i] + y[i];\n"
                           "}\n";
  enum { N = 100 };
  float x[N], y[N];
  for (int i = 0; i < N; i++) x[i] = (float)i * 0.5f, y[i] = (float)(i % 3);
  dv_program *p;
  dv_module *m;
  assert_ok(dv_program_create(ctx, "saxpy.dvk", src, &p));
  assert_ok(dv_program_build(p, 0, &m));
  dv_kernel *k = test_kernel(m, "saxpy");
  dv_array *dx = test_dev_from(ctx, x, N, DV_FLOAT32), *dy = test_dev_from(ctx, y, N, DV_FLOAT32);
  dv_launch_config lc = {{2, 1, 1}, {64, 1, 1}, 0, NULL};
  dv_arg args[] = {DV_ARG_F32(2.0f), DV_ARG_ARRAY(dx), DV_ARG_ARRAY(dy), DV_ARG_I64(N)};
  assert_ok(dv_kernel_launch(k, &lc, 4, args));
  float got[N];
  test_to_host(dy, got);
  for (int i = 0; i < N; i++) assert_true(got[i] == 2.0f * x[i] + y[i]);
  dv_array_release(dx), dv_array_release(dy);
  dv_module_release(m);
  dv_program_destroy(p);
}

/* Named (by the option, in automatic mode and with backend=opencl): Oclgrind,
 * and a kernel runs on it. */
static void test_named_picks_oclgrind(void **state) {
  (void)state;
  dv_context *ctx = NULL;
  assert_ok(make_ctx(&ctx, "backend=opencl", "opencl_device=Oclgrind", (const char *)NULL));
  assert_true(device_is_oclgrind(ctx));
  run_saxpy(ctx);
  assert_ok(dv_context_destroy(ctx));
  assert_ok(make_ctx(&ctx, "opencl_device=oclgrind", (const char *)NULL)); /* any case */
  assert_string_equal(dv_context_backend(ctx), "opencl");
  assert_true(device_is_oclgrind(ctx));
  assert_ok(dv_context_destroy(ctx));
}

/* DV_OPENCL_DEVICE=Oclgrind in the environment, no configuration. */
static void test_env_picks_oclgrind(void **state) {
  (void)state;
  dv_context *ctx = NULL;
  assert_ok(dv_context_create(NULL, &ctx));
  assert_string_equal(dv_context_backend(ctx), "opencl");
  assert_true(device_is_oclgrind(ctx));
  run_saxpy(ctx);
  assert_ok(dv_context_destroy(ctx));
}

/* Whether OCL_ICD_VENDORS names a directory holding `icd`, whose one line
 * names a library (a path that exists, or a bare name). */
static bool vendor_present(const char *icd, char *why, size_t cap) {
  const char *dir = getenv("OCL_ICD_VENDORS");
  char path[1024], lib[1024] = "";
  if (!dir || !*dir) return snprintf(why, cap, "OCL_ICD_VENDORS is not set"), false;
  snprintf(path, sizeof path, "%s/%s", dir, icd);
  FILE *f = fopen(path, "r");
  if (!f) return snprintf(why, cap, "no %s in %s (configure found no such ICD)", icd, dir), false;
  bool ok = fgets(lib, sizeof lib, f) != NULL;
  fclose(f);
  lib[strcspn(lib, "\r\n")] = 0;
  /* a bare name is the dynamic loader's to find (PoCL's .icd names its soname) */
  if (!ok || !lib[0] || (strchr(lib, '/') && access(lib, R_OK) != 0)) return snprintf(why, cap, "%s names %s, which is missing", icd, lib), false;
  return true;
}

int main(int argc, char **argv) {
  g_scenario = argc > 1 ? argv[1] : "";
  char why[1200];
  if (!vendor_present("oclgrind.icd", why, sizeof why) ||
      (!strcmp(g_scenario, "both") && !vendor_present("pocl.icd", why, sizeof why))) {
    printf("SKIPPED: oclgrind.%s: %s\n", g_scenario, why);
    return 77;
  }
  if (!strcmp(g_scenario, "only")) {
    const struct CMUnitTest t[] = {cmocka_unit_test(test_auto_skips_simulator),
                                   cmocka_unit_test(test_opencl_default_refuses_simulator),
                                   cmocka_unit_test(test_named_picks_oclgrind)};
    return cmocka_run_group_tests_name("oclgrind.only", t, NULL, NULL);
  }
  if (!strcmp(g_scenario, "both")) {
    const struct CMUnitTest t[] = {cmocka_unit_test(test_auto_skips_simulator),
                                   cmocka_unit_test(test_opencl_default_picks_pocl),
                                   cmocka_unit_test(test_named_picks_oclgrind)};
    return cmocka_run_group_tests_name("oclgrind.both", t, NULL, NULL);
  }
  if (!strcmp(g_scenario, "env")) {
    const struct CMUnitTest t[] = {cmocka_unit_test(test_env_picks_oclgrind)};
    return cmocka_run_group_tests_name("oclgrind.env", t, NULL, NULL);
  }
  fprintf(stderr, "usage: %s only|both|env\n", argv[0]);
  return 2;
}
