/*
 * The kernel atomics of issue 21 on every backend that runs kernels
 * (tests/kernels/atomics2.dvk): and/or/xor for 32- and 64-bit integers,
 * Numba's wrapping increment and decrement, float64 add and exchange, and
 * compare-and-swap of float32/float64 by bits; under contention from every
 * thread of 16 blocks, on global memory and on shared memory.  Each thread
 * records the old value every atomic returned, and the results are checked
 * exactly against a sequential model: final values, and the old values
 * (permutations, chains of partial sums, bit counts) that only an atomic
 * update order can produce.  On the CUDA driver test double the kernels are
 * built and loaded but not run (those checks skip by name); cuda.nvrtc
 * compiles the source for sm_90.
 */
#include <stdbool.h>

#include "common.h"

#ifndef DV_TEST_KERNELS_DIR
#error "DV_TEST_KERNELS_DIR must name tests/kernels"
#endif

enum { B = 64, G = 16, NT = B * G };

static char g_cache_dir[256];

/* Copy d back and release it. */
static void to_host(dv_array *d, void *data) {
  test_to_host(d, data);
  dv_array_release(d);
}

static void launch(dv_module *m, const char *name, int nargs, dv_arg *args) {
  dv_launch_config c = {{G, 1, 1}, {B, 1, 1}, 0, NULL};
  assert_ok(dv_kernel_launch(test_kernel(m, name), &c, nargs, args));
}

/* atomics2.dvk's mix64. */
static uint64_t mix64(uint64_t x) {
  x = (x ^ (x >> 31)) * 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 29)) * 0xbf58476d1ce4e5b9ull;
  return x ^ (x >> 32);
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}
static int cmp_f64(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* ---- and / or / xor ------------------------------------------------------------------ */

static void test_bitops_global(void **state) {
  (void)state;
  NEEDS_EXECUTION();
  int32_t w32i[3] = {-1, 0, 0};
  uint32_t w32u[3] = {0xffffffffu, 0, 0};
  int64_t w64i[3] = {-1, 0, 0};
  uint64_t w64u[3] = {~0ull, 0, 0};
  /* The sequential model: the same updates one after another. */
  uint32_t e32i[3] = {0xffffffffu, 0, 0}, e32u[3] = {0xffffffffu, 0, 0};
  uint64_t e64i[3] = {~0ull, 0, 0}, e64u[3] = {~0ull, 0, 0};
  for (uint64_t t = 0; t < NT; t++) {
    uint64_t h = mix64(t);
    uint32_t odd32 = 1u << (2 * (t % 16) + 1), even32 = 1u << (2 * (t % 16));
    uint64_t odd64 = 1ull << (2 * (t % 32) + 1), even64 = 1ull << (2 * (t % 32));
    e32i[0] &= ~odd32, e32i[1] |= odd32, e32i[2] ^= (uint32_t)h;
    e32u[0] &= ~even32, e32u[1] |= even32, e32u[2] ^= (uint32_t)(h >> 32);
    e64i[0] &= ~odd64, e64i[1] |= odd64, e64i[2] ^= h;
    e64u[0] &= ~even64, e64u[1] |= even64, e64u[2] ^= h * 3;
  }
  dv_module *m = test_build(g_ctx, "atomics2.dvk", NULL, NULL, NULL);
  dv_array *a = test_dev_from(g_ctx, w32i, 3, DV_INT32), *b = test_dev_from(g_ctx, w32u, 3, DV_UINT32),
           *c = test_dev_from(g_ctx, w64i, 3, DV_INT64), *d = test_dev_from(g_ctx, w64u, 3, DV_UINT64);
  dv_arg args[] = {DV_ARG_ARRAY(a), DV_ARG_ARRAY(b), DV_ARG_ARRAY(c), DV_ARG_ARRAY(d)};
  launch(m, "bits_global", 4, args);
  to_host(a, w32i), to_host(b, w32u), to_host(c, w64i), to_host(d, w64u);
  for (int k = 0; k < 3; k++) {
    assert_int_equal((uint32_t)w32i[k], e32i[k]);
    assert_int_equal(w32u[k], e32u[k]);
    assert_true((uint64_t)w64i[k] == e64i[k]);
    assert_true(w64u[k] == e64u[k]);
  }
  /* Not vacuous: the patterns are neither the starting values nor each other. */
  assert_true(e32i[0] == 0x55555555u && e32i[1] == 0xaaaaaaaau && e32u[0] == 0xaaaaaaaau);
  assert_true(e64u[1] == 0x5555555555555555ull && e64i[2] != 0 && e32u[2] != 0);
  dv_module_release(m);
}

static int popcount64(uint64_t x) { return __builtin_popcountll(x); }

static void test_bitops_shared(void **state) {
  (void)state;
  NEEDS_EXECUTION();
  dv_module *m = test_build(g_ctx, "atomics2.dvk", NULL, NULL, NULL);
  int64_t no = (int64_t)NT * 12, nf = (int64_t)G * 18;
  dv_array *olds, *finals;
  assert_ok(dv_device_array(g_ctx, 1, &no, dv_dtype_get(DV_UINT64), NULL, 'C', NULL, &olds));
  assert_ok(dv_device_array(g_ctx, 1, &nf, dv_dtype_get(DV_UINT64), NULL, 'C', NULL, &finals));
  dv_arg args[] = {DV_ARG_ARRAY(olds), DV_ARG_ARRAY(finals)};
  launch(m, "bits_shared", 2, args);
  uint64_t *o = malloc((size_t)no * sizeof *o), f[G * 18];
  assert_non_null(o);
  to_host(olds, o), to_host(finals, f);
  for (int blk = 0; blk < G; blk++) {
    for (int j = 0; j < 12; j++) {
      bool wide = j >= 6;
      int op = j % 3, width = wide ? 64 : 32, group = wide ? 64 : 32; /* and, or, xor */
      for (int g0 = 0; g0 < B; g0 += group) {
        /* Each thread changed only its own bit: the old values it saw have
         * distinct bit counts, one per position in the update order. */
        bool seen[65] = {false};
        for (int tid = g0; tid < g0 + group; tid++) {
          uint64_t old = o[((size_t)blk * B + (size_t)tid) * 12 + (size_t)j];
          uint64_t own = 1ull << (tid % width);
          if (!wide) assert_true(old >> 32 == 0);
          assert_true(op == 0 ? (old & own) != 0 : (old & own) == 0);
          int pc = popcount64(old), pos = op == 0 ? width - pc : pc;
          assert_true(pos >= 0 && pos < group && !seen[pos]);
          seen[pos] = true;
        }
      }
    }
    const uint64_t *fb = f + blk * 18;
    for (int i = 0; i < 2; i++) { /* 32-bit words (i32 at 0, u32 at 6): and, and, or, or, xor, xor */
      for (int w = 0; w < 6; w++) assert_true(fb[i * 6 + w] == (w < 2 ? 0 : 0xffffffffull));
      assert_true(fb[12 + i * 3] == 0 && fb[13 + i * 3] == ~0ull && fb[14 + i * 3] == ~0ull);
    }
  }
  free(o);
  dv_module_release(m);
}

/* ---- wrapping increment and decrement -------------------------------------------------- */

static uint64_t step(bool inc, uint64_t old, uint64_t lim) {
  return inc ? (old >= lim ? 0 : old + 1) : (old == 0 || old > lim ? lim : old - 1);
}

/* n updates of one counter from init: the old values (sorted) and the final value. */
static uint64_t model(bool inc, uint64_t init, uint64_t lim, int n, uint64_t *olds) {
  uint64_t v = init;
  for (int i = 0; i < n; i++) olds[i] = v, v = step(inc, v, lim);
  qsort(olds, (size_t)n, sizeof *olds, cmp_u64);
  return v;
}

static void test_inc_dec(void **state) {
  (void)state;
  NEEDS_EXECUTION();
  const uint32_t lim32 = 99;
  const uint64_t lim64 = (1ull << 40) + 7;
  /* inc from 0 and dec from 0 (both wrap), inc and dec from above the limit. */
  uint32_t init32[4] = {0, 0, lim32 + 50, lim32 + 1000};
  uint64_t init64[4] = {1ull << 40, 3, 1ull << 41, 1ull << 41};
  uint32_t c32[4];
  uint64_t c64[4];
  memcpy(c32, init32, sizeof c32);
  memcpy(c64, init64, sizeof c64);
  dv_module *m = test_build(g_ctx, "atomics2.dvk", NULL, NULL, NULL);
  int64_t no = (int64_t)NT * 16, nf = (int64_t)G * 8;
  dv_array *a = test_dev_from(g_ctx, c32, 4, DV_UINT32), *b = test_dev_from(g_ctx, c64, 4, DV_UINT64),
           *i32 = test_dev_from(g_ctx, init32, 4, DV_UINT32), *i64 = test_dev_from(g_ctx, init64, 4, DV_UINT64), *olds,
           *sfinal;
  assert_ok(dv_device_array(g_ctx, 1, &no, dv_dtype_get(DV_UINT64), NULL, 'C', NULL, &olds));
  assert_ok(dv_device_array(g_ctx, 1, &nf, dv_dtype_get(DV_UINT64), NULL, 'C', NULL, &sfinal));
  dv_arg args[] = {DV_ARG_ARRAY(a),    DV_ARG_ARRAY(b),      DV_ARG_ARRAY(i32),
                   DV_ARG_ARRAY(i64),  DV_ARG_ARRAY(olds),   DV_ARG_ARRAY(sfinal),
                   DV_ARG_U32(lim32),  DV_ARG_U64(lim64)};
  launch(m, "incdec", 8, args);
  uint64_t *o = malloc((size_t)no * sizeof *o), sf[G * 8];
  uint64_t *got = malloc(NT * sizeof *got), *want = malloc(NT * sizeof *want);
  assert_true(o && got && want);
  to_host(a, c32), to_host(b, c64), to_host(olds, o), to_host(sfinal, sf);
  dv_array_release(i32), dv_array_release(i64);
  for (int k = 0; k < 4; k++) {
    bool inc = k % 2 == 0;
    /* Global: every thread of the grid, once. */
    uint64_t fin32 = model(inc, init32[k], lim32, NT, want);
    for (int t = 0; t < NT; t++) got[t] = o[(size_t)t * 16 + (size_t)k];
    qsort(got, NT, sizeof *got, cmp_u64);
    assert_memory_equal(got, want, NT * sizeof *got);
    assert_true(c32[k] == fin32);
    uint64_t fin64 = model(inc, init64[k], lim64, NT, want);
    for (int t = 0; t < NT; t++) got[t] = o[(size_t)t * 16 + 4 + (size_t)k];
    qsort(got, NT, sizeof *got, cmp_u64);
    assert_memory_equal(got, want, NT * sizeof *got);
    assert_true(c64[k] == fin64);
    /* Shared: the threads of each block on the block's copy. */
    for (int blk = 0; blk < G; blk++) {
      for (int w = 0; w < 2; w++) {
        uint64_t fin = model(inc, w ? init64[k] : init32[k], w ? lim64 : lim32, B, want);
        for (int t = 0; t < B; t++) got[t] = o[((size_t)blk * B + (size_t)t) * 16 + 8 + 4 * (size_t)w + (size_t)k];
        qsort(got, B, sizeof *got, cmp_u64);
        assert_memory_equal(got, want, B * sizeof *got);
        assert_true(sf[blk * 8 + 4 * w + k] == fin);
      }
    }
  }
  /* The cases wrap: from 0 (inc past the limit, dec to the limit), from above it. */
  assert_true(c32[0] == NT % (lim32 + 1) && c32[1] == (lim32 + 1 - NT % (lim32 + 1)) % (lim32 + 1));
  assert_true(c64[0] == NT - 8 && c64[3] == lim64 - (NT - 1));
  free(o), free(got), free(want);
  dv_module_release(m);
}

/* ---- float64 add and exchange ---------------------------------------------------------- */

static double addend(uint64_t t) { return (double)((t * 7919) % 1000 + 1) * 0.125; }

/* Threads first..first+n-1 added addend(t) to a value starting at init and
 * saw olds[t]: sorted by what they saw, each saw the previous sum. */
static void check_add_chain(const double *olds, size_t stride, int first, int n, double init,
                            double final) {
  int *order = malloc((size_t)n * sizeof *order);
  double *seen = malloc((size_t)n * sizeof *seen);
  assert_true(order && seen);
  for (int i = 0; i < n; i++) seen[i] = olds[(size_t)(first + i) * stride];
  /* (addends are positive: the partial sums increase; a selection sort keeps the thread) */
  for (int i = 0; i < n; i++) order[i] = i;
  for (int i = 0; i < n; i++) {
    int best = i;
    for (int j = i + 1; j < n; j++)
      if (seen[order[j]] < seen[order[best]]) best = j;
    int tmp = order[i];
    order[i] = order[best], order[best] = tmp;
  }
  double sum = init;
  for (int i = 0; i < n; i++) {
    assert_true(seen[order[i]] == sum);
    sum += addend((uint64_t)(first + order[i]));
  }
  assert_true(final == sum);
  free(order), free(seen);
}

/* Exchanges: what the threads saw and what is left are what was there and what they put. */
static void check_xchg(const double *olds, size_t stride, int first, int n, double init,
                       double final) {
  double *got = malloc((size_t)(n + 1) * sizeof *got), *want = malloc((size_t)(n + 1) * sizeof *want);
  assert_true(got && want);
  for (int i = 0; i < n; i++) {
    got[i] = olds[(size_t)(first + i) * stride];
    want[i] = (double)(first + i) + 0.5;
  }
  got[n] = final, want[n] = init;
  qsort(got, (size_t)n + 1, sizeof *got, cmp_f64);
  qsort(want, (size_t)n + 1, sizeof *want, cmp_f64);
  assert_memory_equal(got, want, (size_t)(n + 1) * sizeof *got);
  free(got), free(want);
}

static void test_f64_add_xchg(void **state) {
  (void)state;
  NEEDS_EXECUTION();
  double g[2] = {0.5, -2.0};
  dv_module *m = test_build(g_ctx, "atomics2.dvk", NULL, NULL, NULL);
  int64_t no = (int64_t)NT * 4, nf = (int64_t)G * 2;
  dv_array *dg = test_dev_from(g_ctx, g, 2, DV_FLOAT64), *olds, *sfinal;
  assert_ok(dv_device_array(g_ctx, 1, &no, dv_dtype_get(DV_FLOAT64), NULL, 'C', NULL, &olds));
  assert_ok(dv_device_array(g_ctx, 1, &nf, dv_dtype_get(DV_FLOAT64), NULL, 'C', NULL, &sfinal));
  dv_arg args[] = {DV_ARG_ARRAY(dg), DV_ARG_ARRAY(olds), DV_ARG_ARRAY(sfinal)};
  launch(m, "f64_rmw", 3, args);
  double *o = malloc((size_t)no * sizeof *o), sf[G * 2];
  assert_non_null(o);
  to_host(dg, g), to_host(olds, o), to_host(sfinal, sf);
  check_add_chain(o + 0, 4, 0, NT, 0.5, g[0]);
  check_xchg(o + 1, 4, 0, NT, -2.0, g[1]);
  for (int blk = 0; blk < G; blk++) {
    check_add_chain(o + 2, 4, blk * B, B, 0.25, sf[blk * 2]);
    check_xchg(o + 3, 4, blk * B, B, -1.0, sf[blk * 2 + 1]);
  }
  free(o);
  dv_module_release(m);
}

/* ---- compare-and-swap of float32 / float64 --------------------------------------------- */

static uint32_t f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}
static uint64_t f64_bits(double d) {
  uint64_t u;
  memcpy(&u, &d, sizeof u);
  return u;
}

/* tickets[first..first+n-1] (with stride) are 0 .. n-1 in some order. */
static void check_tickets(const double *tickets, size_t stride, int first, int n) {
  bool *seen = calloc((size_t)n, 1);
  assert_non_null(seen);
  for (int i = 0; i < n; i++) {
    double v = tickets[(size_t)(first + i) * stride];
    assert_true(v >= 0 && v < n && v == (double)(int)v && !seen[(int)v]);
    seen[(int)v] = true;
  }
  free(seen);
}

static void test_cas_float(void **state) {
  (void)state;
  NEEDS_EXECUTION();
  const uint32_t nan32 = 0x7fc00123u;
  const uint64_t nan64 = 0xfff8000000000123ull;
  float f[6] = {0.0f, -0.0f, 0, 0, 0, 0};
  double d[6] = {0.0, -0.0, 0, 0, 0, 0};
  memcpy(&f[2], &nan32, 4);
  memcpy(&d[2], &nan64, 8);
  dv_module *m = test_build(g_ctx, "atomics2.dvk", NULL, NULL, NULL);
  int64_t nt = (int64_t)NT * 4, nf = (int64_t)G * 2;
  dv_array *df = test_dev_from(g_ctx, f, 6, DV_FLOAT32), *dd = test_dev_from(g_ctx, d, 6, DV_FLOAT64), *tickets, *sfinal;
  assert_ok(dv_device_array(g_ctx, 1, &nt, dv_dtype_get(DV_FLOAT64), NULL, 'C', NULL, &tickets));
  assert_ok(dv_device_array(g_ctx, 1, &nf, dv_dtype_get(DV_FLOAT64), NULL, 'C', NULL, &sfinal));
  dv_arg args[] = {DV_ARG_ARRAY(df), DV_ARG_ARRAY(dd), DV_ARG_ARRAY(tickets), DV_ARG_ARRAY(sfinal)};
  launch(m, "cas_float", 4, args);
  double *tk = malloc((size_t)nt * sizeof *tk), sf[G * 2];
  assert_non_null(tk);
  to_host(df, f), to_host(dd, d), to_host(tickets, tk), to_host(sfinal, sf);
  check_tickets(tk + 0, 4, 0, NT);
  check_tickets(tk + 1, 4, 0, NT);
  assert_true(f[0] == (float)NT && d[0] == (double)NT);
  for (int blk = 0; blk < G; blk++) {
    check_tickets(tk + 2, 4, blk * B, B);
    check_tickets(tk + 3, 4, blk * B, B);
    assert_true(sf[blk * 2] == B && sf[blk * 2 + 1] == B);
  }
  /* Bits, not values: +0.0 does not match -0.0 (both swaps return -0.0;
   * only the second stored), a NaN matches its own bits. */
  assert_int_equal(f32_bits(f[3]), 0x80000000u);
  assert_int_equal(f32_bits(f[4]), 0x80000000u);
  assert_true(f[1] == 2.0f);
  assert_int_equal(f32_bits(f[5]), nan32);
  assert_true(f[2] == 3.0f);
  assert_true(f64_bits(d[3]) == 0x8000000000000000ull && f64_bits(d[4]) == 0x8000000000000000ull);
  assert_true(d[1] == 2.0);
  assert_true(f64_bits(d[5]) == nan64 && d[2] == 3.0);
  free(tk);
  dv_module_release(m);
}

/* On the CUDA double too: the module builds and loads, every kernel is there. */
static void test_kernels_build(void **state) {
  (void)state;
  dv_module *m = test_build(g_ctx, "atomics2.dvk", NULL, NULL, NULL);
  const char *names[] = {"bits_global", "bits_shared", "incdec", "f64_rmw", "cas_float"};
  for (size_t i = 0; i < sizeof names / sizeof *names; i++) assert_non_null(test_kernel(m, names[i]));
  dv_module_release(m);
}

int main(int argc, char **argv) {
  int begin = kernel_suite_begin(argc, argv, "katomics", NULL, g_cache_dir, sizeof g_cache_dir);
  if (begin) return begin;
  const struct CMUnitTest tests[] = {
      T(test_kernels_build), T(test_bitops_global), T(test_bitops_shared),
      T(test_inc_dec),       T(test_f64_add_xchg),  T(test_cas_float),
  };
  return kernel_suite_end(g_cache_dir,
                          test_main(argc, argv, "katomics", tests, sizeof tests / sizeof tests[0]));
}
