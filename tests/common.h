/* Shared test helpers: backend selection, fixtures, a naive reference
 * strided copy (written independently of the library's), fill patterns. */
#ifndef DV_TEST_COMMON_H
#define DV_TEST_COMMON_H
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "devarray.h"

/* The context of the running test (created by the fixture). */
extern dv_context *g_ctx;
/* The backend under test: "host", "host-staged", "opencl", "cuda". */
extern const char *g_backend;

/* assert a status with its message printed on failure */
#define assert_ok(expr)                                                                   \
  do {                                                                                    \
    dv_status s_ = (expr);                                                                \
    if (s_ != DV_OK) fail_msg("%s -> %s: %s", #expr, dv_status_name(s_), dv_last_error()); \
  } while (0)
#define assert_status(expr, want)                                                          \
  do {                                                                                     \
    dv_status s_ = (expr);                                                                 \
    if (s_ != (want))                                                                      \
      fail_msg("%s -> %s (%s), expected %s", #expr, dv_status_name(s_), dv_last_error(),   \
               dv_status_name(want));                                                      \
    if ((want) != DV_OK && (want) != DV_ERR_NOT_READY && dv_last_error()[0] == 0) fail_msg("%s: empty error message", #expr); \
  } while (0)

/* Fixture: a fresh context on the backend under test. */
int ctx_setup(void **state);
/* Fixture: the context must destroy cleanly (nothing leaked, no BUSY). */
int ctx_teardown(void **state);
#define T(f) cmocka_unit_test_setup_teardown(f, ctx_setup, ctx_teardown)

/* Create a context for the backend under test with extra options
 * ("name=value" pairs, NULL-terminated). */
dv_status test_context(dv_context **out, ...);

/* Parse argv (backend name) and run the group; exits 77 if the backend is
 * not available on this machine (CTest reports that as skipped). */
int test_main(int argc, char **argv, const char *suite, const struct CMUnitTest *tests, size_t n);
/* For suites that build kernels, before test_main: a compiled-module cache
 * of their own in a new directory under TMPDIR (its path goes to dir, cap
 * bytes), named by DV_KERNEL_CACHE_DIR as dir/sub (sub NULL: dir itself),
 * and a probe build on the backend argv names.  Returns 0 to go on; 77 when
 * that backend cannot build kernels (said on stdout, the directory removed
 * again); 1 when no directory could be made. */
int kernel_suite_begin(int argc, char **argv, const char *suite, const char *sub, char *dir,
                       size_t cap);
/* Remove the directory kernel_suite_begin made; returns rc. */
int kernel_suite_end(const char *dir, int rc);

/* Helpers the kernel suites share. */
/* Whether ctx runs on a driver test double (tests/backends/cuda/cudadouble, or
 * tests/backends/hip/hipdouble: a device named "HIP test double"), which loads kernels
 * but never runs them: checks of computed values skip there. */
bool test_on_cuda_double(dv_context *ctx);
/* A context for the backend under test with the options ("name=value", NULL-terminated);
 * the running test fails, with the status and message, when it cannot be made. */
dv_context *test_context_or_fail(const char *opt, ...);
/* Build a module on ctx from `src` named `name` (or, with src NULL, from the file `name` of
 * tests/kernels), with host compiler options `host_opts` (NULL: none) and defines
 * "NAME" or "NAME=value" (NULL-terminated); the running test fails, with the status, the
 * message and the build log, when it does not build. */
dv_module *test_build(dv_context *ctx, const char *name, const char *src, const char *host_opts,
                      ...);
/* The whole file `name` of tests/kernels (malloc'd, NUL-terminated; the caller frees). */
char *test_kernel_source(const char *name);
/* Kernel `name` of m; the running test fails when it is missing. */
dv_kernel *test_kernel(dv_module *m, const char *name);
/* A 1-D device array of ctx holding n elements of type t copied from data. */
dv_array *test_dev_from(dv_context *ctx, const void *data, int64_t n, dv_type_id t);
/* Copy all of d (synchronously) into host memory at data, laid out as d. */
void test_to_host(const dv_array *d, void *data);
/* Skip the running test, by name, on the CUDA test double (g_ctx). */
#define NEEDS_EXECUTION()                                                                  \
  do {                                                                                     \
    if (test_on_cuda_double(g_ctx)) {                                                      \
      printf("SKIPPED: %s: the driver test double does not execute kernels\n", __func__); \
      skip();                                                                              \
    }                                                                                      \
  } while (0)

/* Whether ctx runs the host simulator in fast mode (option host_mode). */
bool test_host_fast(dv_context *ctx);
/* Skip the running test, by name, where ctx runs the host simulator in fast
 * mode: the test asserts what only checked mode does (the suite's checked
 * run, NAME.host, makes those assertions). */
#define CHECKED_MODE_ONLY(ctx)                                                              \
  do {                                                                                      \
    if (test_host_fast(ctx)) {                                                              \
      printf("SKIPPED: %s: asserts checked mode's checks (host_mode is fast)\n", __func__); \
      skip();                                                                               \
    }                                                                                       \
  } while (0)

#define TEST_MAIN(suite, tests) \
  int main(int argc, char **argv) { return test_main(argc, argv, suite, tests, sizeof(tests) / sizeof(tests[0])); }

/* Naive reference: copy element by element using multi-indices. */
void ref_copy(void *dst, const int64_t *dst_strides, const void *src, const int64_t *src_strides,
              const int64_t *shape, int nd, size_t itemsize);
/* Fill n bytes with a pattern derived from seed (no zeros). */
void fill_pattern(void *p, size_t n, unsigned seed);
/* The whole file at path, NUL-terminated (malloc'd; the caller frees); fails
 * the running test if it cannot be read. */
char *read_text_file(const char *path);
/* xorshift random */
uint64_t rnd(void);
void rnd_seed(uint64_t s);
int64_t rnd_range(int64_t lo, int64_t hi); /* inclusive */

#endif
