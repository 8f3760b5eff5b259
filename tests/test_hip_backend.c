/*
 * The HIP backend as far as it goes (issue 26, phase 1): libamdhip64 loaded
 * with dlopen through the shared loader (src/backends/dynlib.c), a probe
 * that says what it found or why nothing, an open that refuses until the
 * backend's operations exist, and automatic selection that never tries it.
 *
 *   test_hip_backend double   against tests/hipdouble (LD_LIBRARY_PATH set
 *                             by CTest; HIP_DOUBLE_DEVICES=2): a runtime
 *                             with devices, which the backend still refuses;
 *   test_hip_backend system   whatever this machine has (no ROCm, ROCm
 *                             without a GPU, or an AMD GPU): never opened.
 */
#define _GNU_SOURCE
#include <dlfcn.h>

#include "common.h"
#include "backends/dynlib.h"

static bool g_double;

/* Automatic selection never loads the HIP runtime, let alone opens it.  Runs
 * first: nothing in this process has touched HIP yet. */
static void test_auto_never_tries_hip(void **state) {
  (void)state;
  dv_context *c = NULL;
  assert_ok(dv_context_create(NULL, &c));
  assert_string_not_equal(dv_context_backend(c), "hip");
  assert_ok(dv_context_destroy(c));
  void *h = dlopen("libamdhip64.so", RTLD_NOW | RTLD_NOLOAD);
  if (!h) h = dlopen("libamdhip64.so.6", RTLD_NOW | RTLD_NOLOAD);
  if (!h) h = dlopen("libamdhip64.so.5", RTLD_NOW | RTLD_NOLOAD);
  if (h) {
    dlclose(h);
    fail_msg("automatic selection loaded the HIP runtime");
  }
}

/* The probe: never DV_OK while the backend is incomplete; always a reason. */
static void test_probe(void **state) {
  (void)state;
  char reason[1024];
  dv_status rc = dv_backend_probe("hip", reason, sizeof reason);
  print_message("[ info ] hip: %s (%s)\n", reason, dv_status_name(rc));
  assert_int_not_equal(rc, DV_OK);
  assert_true(reason[0] != 0);
  if (g_double) {
    /* The runtime and its devices are found and named, and refused. */
    assert_status(rc, DV_ERR_BACKEND_UNAVAILABLE);
    /* The double plays ROCm 5.2 unless HIP_DOUBLE_ROCM=6. */
    assert_non_null(strstr(reason, "HIP runtime 5.2 (libamdhip64.so), 2 device(s)"));
    assert_non_null(strstr(reason, "0: HIP test double 0 (gfx90a), 1: HIP test double 1 (gfx90a)"));
    assert_non_null(strstr(reason, "not complete yet"));
    int (*calls)(void) = NULL;
    void *h = dlopen("libamdhip64.so", RTLD_NOW | RTLD_NOLOAD);
    assert_non_null(h);
    *(void **)&calls = dlsym(h, "hip_double_init_calls");
    assert_non_null(calls);
    assert_int_equal(calls(), 1); /* once per process */
    assert_status(dv_backend_probe("hip", NULL, 0), DV_ERR_BACKEND_UNAVAILABLE);
    assert_int_equal(calls(), 1);
    dlclose(h);
  } else {
    /* No runtime, a runtime without a GPU, or a GPU the backend cannot use yet. */
    assert_true(rc == DV_ERR_LIBRARY_LOAD || rc == DV_ERR_SYMBOL_LOAD || rc == DV_ERR_BACKEND_UNAVAILABLE ||
                rc == DV_ERR_DRIVER);
    if (rc == DV_ERR_LIBRARY_LOAD) assert_non_null(strstr(reason, "libamdhip64.so"));
    if (rc == DV_ERR_BACKEND_UNAVAILABLE)
      assert_true(strstr(reason, "no AMD GPU") || strstr(reason, "no device") ||
                  strstr(reason, "not complete yet"));
  }
}

/* Asked for by name, the backend refuses to open: no context, a reason. */
static void test_open_refused(void **state) {
  (void)state;
  dv_config *cfg = NULL;
  assert_ok(dv_config_create(&cfg));
  assert_ok(dv_config_set(cfg, "backend", "hip"));
  dv_context *c = (dv_context *)1;
  dv_status rc = dv_context_create(cfg, &c);
  dv_config_destroy(cfg);
  assert_int_not_equal(rc, DV_OK);
  assert_null(c);
  if (g_double) {
    assert_status(rc, DV_ERR_BACKEND_UNAVAILABLE);
    assert_non_null(strstr(dv_last_error(), "the HIP backend is not complete yet"));
  }
  /* backend=hip is a known value (a misspelling is not). */
  assert_ok(dv_config_create(&cfg));
  assert_status(dv_config_set(cfg, "backend", "hipp"), DV_ERR_BAD_OPTION);
  dv_config_destroy(cfg);
}

/* The shared loader (dynlib.c): the names tried, a missing entry point
 * named, another name with the same prototype, an optional entry point. */
static void test_dynlib(void **state) {
  (void)state;
  char msg[512] = "";
  void *lib = (void *)1, *slot = NULL, *slot2 = NULL, *slot3 = (void *)1;
  const char *which = "x";
  const char *const none[] = {"libdv_no_such_a.so.1", "libdv_no_such_b.so"};
  dv_dynsym one = {"malloc", NULL, &slot, 0};
  assert_int_equal(dv__dynlib_open("test library", none, 2, &one, 1, &lib, &which, msg, sizeof msg),
                   DV_ERR_LIBRARY_LOAD);
  assert_null(lib);
  assert_null(which);
  assert_non_null(strstr(msg, "no test library: libdv_no_such_a.so.1 or libdv_no_such_b.so could not be loaded"));
  assert_non_null(strstr(msg, "libdv_no_such_a.so.1: cannot open"));
  const char *const libc[] = {"libdv_no_such_a.so.1", "libc.so.6"};
  dv_dynsym syms[] = {{"malloc", NULL, &slot, 0},
                      {"dv_no_such_function", "free", &slot2, 0},
                      {"dv_no_such_optional", NULL, &slot3, 1}};
  assert_int_equal(dv__dynlib_open("C library", libc, 2, syms, 3, &lib, &which, msg, sizeof msg), DV_OK);
  assert_non_null(lib);
  assert_string_equal(which, "libc.so.6");
  assert_ptr_equal(slot, dlsym(lib, "malloc"));
  assert_ptr_equal(slot2, dlsym(lib, "free"));
  assert_null(slot3);
  dlclose(lib);
  dv_dynsym missing[] = {{"malloc", NULL, &slot, 0}, {"dv_no_such_function", NULL, &slot2, 0}};
  assert_int_equal(dv__dynlib_open("C library", libc, 2, missing, 2, &lib, &which, msg, sizeof msg),
                   DV_ERR_SYMBOL_LOAD);
  assert_string_equal(msg, "libc.so.6 lacks the entry point dv_no_such_function (C library too old?)");
  assert_null(slot2);
  dlclose(lib);
}

int main(int argc, char **argv) {
  g_double = argc > 1 && strcmp(argv[1], "double") == 0;
  g_backend = "host";
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_auto_never_tries_hip),
      cmocka_unit_test(test_probe),
      cmocka_unit_test(test_open_refused),
      cmocka_unit_test(test_dynlib),
  };
  return cmocka_run_group_tests_name(g_double ? "hip_backend.double" : "hip_backend.system", tests, NULL,
                                     NULL);
}
