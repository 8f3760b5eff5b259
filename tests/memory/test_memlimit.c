/* The memory limit and the pool's reserve (issue 38 item 1: memory/manager.c,
 * memory/pool.c), on every backend and both built-in managers. */
#include <string.h>

#include "common.h"

#define MIB ((size_t)1 << 20)

static dv_array *bytes_array(dv_context *c, size_t n) {
  dv_array *a = NULL;
  int64_t len = (int64_t)n;
  assert_ok(dv_device_array(c, 1, &len, dv_dtype_get(DV_UINT8), NULL, 'C', NULL, &a));
  return a;
}

static bool is_pool(dv_context *c) { return strcmp(dv_context_memory_manager(c), "pool") == 0; }

/* CuPy #7678: under a limit, a freed block's cached memory is given back
 * for a larger request instead of failing it. */
static void test_cached_memory_given_back(void **state) {
  (void)state;
  assert_ok(dv_memory_set_limit(g_ctx, 8 * MIB));
  dv_array *a = bytes_array(g_ctx, 4 * MIB);
  dv_array_release(a);
  dv_array *b = bytes_array(g_ctx, 6 * MIB); /* 4 + 6 > 8: the 4 must go back first */
  size_t limit = 0, held = 0, cached = 0;
  assert_ok(dv_memory_limit(g_ctx, &limit, &held, &cached));
  assert_int_equal(limit, 8 * MIB);
  assert_true(held >= 6 * MIB && held <= 8 * MIB);
  dv_array_release(b);
  assert_ok(dv_context_flush_deallocs(g_ctx));
  assert_ok(dv_memory_limit(g_ctx, NULL, &held, &cached));
  if (is_pool(g_ctx)) assert_int_equal(cached, held); /* all of it cached free */
  else assert_int_equal(held, 0);
}

static void test_past_the_limit_fails_clearly(void **state) {
  (void)state;
  assert_ok(dv_memory_set_limit(g_ctx, 8 * MIB));
  dv_array *a = bytes_array(g_ctx, 6 * MIB), *x = (dv_array *)1;
  dv_stats st = {.size = sizeof st}, st2 = {.size = sizeof st2};
  assert_ok(dv_context_stats(g_ctx, &st));
  int64_t n = 4 * MIB;
  assert_status(dv_device_array(g_ctx, 1, &n, dv_dtype_get(DV_UINT8), NULL, 'C', NULL, &x), DV_ERR_OUT_OF_MEMORY);
  assert_null(x);
  assert_non_null(strstr(dv_last_error(), "the memory limit of 8388608 bytes would be passed"));
  assert_non_null(strstr(dv_last_error(), "holds"));
  assert_ok(dv_context_stats(g_ctx, &st2));
  assert_int_equal(st2.device.current, st.device.current);
  assert_int_equal(st2.arrays.current, st.arrays.current);
  /* raised: the same request succeeds; a limit below what is held is kept */
  assert_ok(dv_memory_set_limit(g_ctx, 16 * MIB));
  assert_ok(dv_device_array(g_ctx, 1, &n, dv_dtype_get(DV_UINT8), NULL, 'C', NULL, &x));
  dv_array_release(x);
  assert_ok(dv_memory_set_limit(g_ctx, 1 * MIB));
  if (is_pool(g_ctx)) { /* served from the block x left cached: nothing more is held */
    assert_ok(dv_device_array(g_ctx, 1, &n, dv_dtype_get(DV_UINT8), NULL, 'C', NULL, &x));
    dv_array_release(x);
  } else {
    assert_status(dv_device_array(g_ctx, 1, &n, dv_dtype_get(DV_UINT8), NULL, 'C', NULL, &x), DV_ERR_OUT_OF_MEMORY);
  }
  dv_array_release(a);
  /* no limit: nothing refused */
  assert_ok(dv_memory_set_limit(g_ctx, 0));
  assert_ok(dv_device_array(g_ctx, 1, &n, dv_dtype_get(DV_UINT8), NULL, 'C', NULL, &x));
  dv_array_release(x);
}

static void test_fraction_and_bad_input(void **state) {
  (void)state;
  dv_device_info info;
  assert_ok(dv_context_device_info(g_ctx, &info));
  assert_ok(dv_memory_set_limit_fraction(g_ctx, 0.5));
  size_t limit = 0;
  assert_ok(dv_memory_limit(g_ctx, &limit, NULL, NULL));
  assert_true(limit > 0);
  assert_true(limit <= info.total_memory / 2 + 1 && limit + 1 >= info.total_memory / 2);
  assert_status(dv_memory_set_limit_fraction(g_ctx, 1.5), DV_ERR_INVALID_ARGUMENT);
  assert_status(dv_memory_set_limit_fraction(g_ctx, -0.1), DV_ERR_INVALID_ARGUMENT);
  assert_ok(dv_memory_limit(g_ctx, &limit, NULL, NULL));
  assert_true(limit > 0); /* unchanged by the refusals */
  assert_status(dv_memory_set_limit(NULL, 1), DV_ERR_NULL_ARGUMENT);
  assert_status(dv_memory_limit(NULL, &limit, NULL, NULL), DV_ERR_NULL_ARGUMENT);
  assert_int_equal(limit, 0); /* cleared on failure */
}

static void test_options(void **state) {
  (void)state;
  dv_context *c = test_context_or_fail("memory_limit=8M", NULL);
  size_t limit = 0;
  assert_ok(dv_memory_limit(c, &limit, NULL, NULL));
  assert_int_equal(limit, 8 * MIB);
  int64_t n = 9 * MIB;
  dv_array *x = NULL;
  assert_status(dv_device_array(c, 1, &n, dv_dtype_get(DV_UINT8), NULL, 'C', NULL, &x), DV_ERR_OUT_OF_MEMORY);
  assert_ok(dv_context_destroy(c));
  c = test_context_or_fail("memory_limit=8M", "memory_limit_fraction=0.000001", NULL);
  assert_ok(dv_memory_limit(c, &limit, NULL, NULL));
  assert_true(limit < 8 * MIB); /* the smaller of the two */
  assert_ok(dv_context_destroy(c));
}

/* The pool's reserve: taken at creation, served from, kept by trim. */
static void test_pool_reserve(void **state) {
  (void)state;
  dv_context *c = test_context_or_fail("memory_manager=pool", "pool_reserve=6M", NULL);
  size_t held = 0, cached = 0;
  assert_ok(dv_memory_limit(c, NULL, &held, &cached));
  assert_int_equal(held, 6 * MIB);
  assert_int_equal(cached, 6 * MIB);
  dv_mm_stats ms;
  assert_ok(dv_memory_stats(c, &ms));
  uint64_t misses = ms.misses;
  dv_array *a = bytes_array(c, 3 * MIB); /* from the reserve: no new segment */
  assert_ok(dv_memory_stats(c, &ms));
  assert_int_equal(ms.misses, misses);
  dv_array_release(a);
  assert_ok(dv_memory_trim(c));
  assert_ok(dv_memory_limit(c, NULL, &held, &cached));
  assert_int_equal(held, 6 * MIB); /* trim keeps the reserve */
  assert_ok(dv_context_destroy(c));
  /* a reserve past the limit: the context is refused, nothing left */
  dv_context *d = NULL;
  assert_status(test_context(&d, "memory_manager=pool", "pool_reserve=6M", "memory_limit=4M", NULL),
                DV_ERR_OUT_OF_MEMORY);
  assert_null(d);
  assert_non_null(strstr(dv_last_error(), "cannot reserve"));
  /* the direct manager has no cache: the reserve is ignored there */
  d = test_context_or_fail("memory_manager=direct", "pool_reserve=6M", NULL);
  assert_ok(dv_memory_limit(d, NULL, &held, NULL));
  assert_int_equal(held, 0);
  assert_ok(dv_context_destroy(d));
}

/* A context with a reserve, every host allocation on the way failed in
 * turn: the right status, nothing made, nothing leaked (ASan). */
static void test_reserve_fault_sweep(void **state) {
  (void)state;
  bool done = false;
  for (uint64_t k = 1; k < 400 && !done; k++) {
    dv_context *c = NULL;
    dv_fault_inject(NULL, DV_FAULT_HOST_ALLOC, k);
    dv_status rc = test_context(&c, "memory_manager=pool", "pool_reserve=4M", NULL);
    bool fired = !dv_fault_pending(NULL, DV_FAULT_HOST_ALLOC);
    dv_fault_inject(NULL, DV_FAULT_HOST_ALLOC, 0);
    if (rc == DV_OK) {
      size_t held = 0;
      assert_ok(dv_memory_limit(c, NULL, &held, NULL));
      assert_int_equal(held, 4 * MIB);
      assert_ok(dv_context_destroy(c));
      done = !fired;
    } else {
      assert_int_equal(rc, DV_ERR_HOST_OUT_OF_MEMORY);
      assert_null(c);
    }
  }
  assert_true(done);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {T(test_cached_memory_given_back), T(test_past_the_limit_fails_clearly),
                                     T(test_fraction_and_bad_input), T(test_options), T(test_pool_reserve),
                                     T(test_reserve_fault_sweep)};
  return test_main(argc, argv, "memlimit", tests, sizeof tests / sizeof tests[0]);
}
