/*
 * The built-in strided-copy kernels (src/kernel/copy_kernels.dvk) and the
 * CUDA backend's plan for them (dv__cu_copy_plan: word size, views in words,
 * count), run without a GPU: the kernel source is compiled here as host C
 * through the dialect's host branch, and every thread of a small grid is
 * run in turn (the kernels have no barriers).  Random layouts (negative,
 * zero and gapped strides, items of 1 to 32 bytes, misaligned starts) are
 * compared with the reference copy of tests/common.c, including the bytes
 * between destination elements, which must stay untouched.  Both index
 * widths: the _i32 kernels the plan picks, and now and then the _i64 ones.
 */
#include "common.h"
#include "backends/cudafam/fam.h"

/* The kernels, with the dialect's host branch.  The simulator's runtime
 * symbols are renamed so that they cannot meet the library's own. */
#define dv__rt dv_test_copy_rt
#define dv__self dv_test_copy_self
#include "dialect/dialect.h"
#include "kernel/copy_kernels.dvk"
const dv__host_rt *dv_test_copy_rt;
_Thread_local dv__hthread *dv_test_copy_self;

/* DV_VIEW(const W, src), DV_VIEW(W, dst), count, as the host branch declares them. */
typedef void (*copy_fn)(const void *src, long long soff, dv_kview sv, void *dst, long long doff,
                        dv_kview dv, dv_i64 count);
static copy_fn kernel_for(int word_index, int wide) {
  static const copy_fn k[5][2] = {
      {(copy_fn)dv_copy_w1_i32, (copy_fn)dv_copy_w1_i64},   {(copy_fn)dv_copy_w2_i32, (copy_fn)dv_copy_w2_i64},
      {(copy_fn)dv_copy_w4_i32, (copy_fn)dv_copy_w4_i64},   {(copy_fn)dv_copy_w8_i32, (copy_fn)dv_copy_w8_i64},
      {(copy_fn)dv_copy_w16_i32, (copy_fn)dv_copy_w16_i64},
  };
  return k[word_index][wide];
}

static dv_kview kview(const dv_bkview *b) {
  dv_kview v;
  _Static_assert(sizeof v == sizeof *b, "dv_kview and dv_bkview differ");
  memcpy(&v, b, sizeof v);
  return v;
}

/* Run the kernel as a grid of `blocks` x `threads` would. */
static void run_grid(const dv_cu_copy_plan *p, int wide, void *dbase, int64_t doff, const void *sbase,
                     int64_t soff, int blocks, int threads) {
  copy_fn f = kernel_for(p->word_index, wide);
  dv__hthread th;
  memset(&th, 0, sizeof th);
  for (int d = 0; d < 3; d++) th.bdim[d] = th.gdim[d] = 1;
  th.bdim[0] = threads;
  th.gdim[0] = blocks;
  dv_test_copy_self = &th;
  for (int b = 0; b < blocks; b++)
    for (int t = 0; t < threads; t++) {
      th.bid[0] = b;
      th.tid[0] = t;
      f(sbase, soff, kview(&p->src), dbase, doff, kview(&p->dst), p->count);
    }
  dv_test_copy_self = NULL;
}

/* A random layout of shape n: a permutation of dims laid out densely with
 * gaps, some dims reversed; broadcast (stride 0) allowed on the source only.
 * Returns the byte offset of element 0 from the buffer start and the span. */
static void random_layout(int nd, const int64_t *n, size_t isz, bool allow_zero, int64_t *st,
                          int64_t *off, int64_t *span) {
  int perm[DV_MAXDIMS];
  for (int i = 0; i < nd; i++) perm[i] = i;
  for (int i = nd - 1; i > 0; i--) {
    int j = (int)rnd_range(0, i), t = perm[i];
    perm[i] = perm[j], perm[j] = t;
  }
  int64_t s = (int64_t)isz + (rnd_range(0, 3) == 0 ? rnd_range(1, 9) : 0); /* item gap */
  for (int k = nd - 1; k >= 0; k--) {
    int i = perm[k];
    st[i] = allow_zero && rnd_range(0, 7) == 0 ? 0 : s;
    if (st[i]) s = s * n[i] + (rnd_range(0, 2) == 0 ? rnd_range(0, 24) : 0);
  }
  int64_t lo = 0, hi = (int64_t)isz;
  for (int i = 0; i < nd; i++) {
    if (rnd_range(0, 2) == 0) st[i] = -st[i];
    if (st[i] < 0) lo += (n[i] - 1) * st[i];
    else hi += (n[i] - 1) * st[i];
  }
  *off = -lo;
  *span = hi - lo;
}

static void one_case(int nd, const int64_t *n, size_t isz, int blocks, int threads, int wide) {
  dv_strided c;
  memset(&c, 0, sizeof c);
  c.nd = nd;
  c.itemsize = isz;
  memcpy(c.shape, n, (size_t)nd * sizeof *n);
  int64_t soff, sspan, doff, dspan;
  random_layout(nd, n, isz, true, c.src_strides, &soff, &sspan);
  random_layout(nd, n, isz, false, c.dst_strides, &doff, &dspan);
  /* Misalign the starts now and then (the plan must pick narrower words). */
  int64_t smis = rnd_range(0, 3) == 0 ? rnd_range(1, 15) : 0, dmis = rnd_range(0, 3) == 0 ? rnd_range(1, 15) : 0;
  size_t sbytes = (size_t)(sspan + smis), dbytes = (size_t)(dspan + dmis);
  unsigned char *src = aligned_alloc(16, (sbytes + 15) & ~(size_t)15);
  unsigned char *dst = aligned_alloc(16, (dbytes + 15) & ~(size_t)15);
  unsigned char *want = malloc(dbytes);
  assert_non_null(src);
  assert_non_null(dst);
  assert_non_null(want);
  fill_pattern(src, sbytes, (unsigned)rnd());
  fill_pattern(dst, dbytes, (unsigned)rnd());
  memcpy(want, dst, dbytes);
  soff += smis, doff += dmis;
  ref_copy(want + doff, c.dst_strides, src + soff, c.src_strides, n, nd, isz);

  dv_cu_copy_plan p;
  assert_true(dv__cu_copy_plan(&c, (uint64_t)(uintptr_t)(src + soff), (uint64_t)(uintptr_t)(dst + doff), &p));
  /* The word divides the item, both starts and every stride; twice it does not. */
  uint64_t bits = isz | (uint64_t)(uintptr_t)(src + soff) | (uint64_t)(uintptr_t)(dst + doff);
  for (int i = 0; i < nd; i++)
    if (n[i] > 1) bits |= (uint64_t)llabs(c.src_strides[i]) | (uint64_t)llabs(c.dst_strides[i]);
  assert_int_equal(bits % p.word, 0);
  if (p.word < 16) assert_true(bits % (2 * p.word) != 0);
  assert_int_equal((size_t)1 << p.word_index, p.word);
  int64_t count = 1;
  for (int i = 0; i < nd; i++) count *= n[i];
  assert_int_equal(p.count, count * (int64_t)(isz / p.word));
  assert_int_equal(p.wide_index, 0);
  assert_true(p.dst.ndim >= 1 && p.dst.ndim <= DV_BKVIEW_MAXDIMS && p.src.ndim == p.dst.ndim);
  int64_t words = 1;
  for (int i = 0; i < p.dst.ndim; i++) {
    assert_int_equal(p.src.shape[i], p.dst.shape[i]);
    assert_true(p.dst.shape[i] > 1 || p.dst.ndim == 1);
    words *= p.dst.shape[i];
  }
  assert_int_equal(words, p.count);

  run_grid(&p, wide, dst, doff, src, soff, blocks, threads);
  if (memcmp(dst, want, dbytes) != 0) {
    size_t at = 0;
    while (dst[at] == want[at]) at++;
    fail_msg("nd %d itemsize %zu word %zu: byte %zu differs (got %d, want %d)", nd, isz, p.word, at,
             dst[at], want[at]);
  }
  free(src);
  free(dst);
  free(want);
}

static void test_random_layouts(void **state) {
  (void)state;
  static const size_t sizes[] = {1, 2, 3, 4, 6, 8, 12, 16, 24, 32};
  rnd_seed(2024);
  for (int it = 0; it < 3000; it++) {
    int nd = (int)rnd_range(0, 7);
    int64_t n[DV_MAXDIMS];
    for (int i = 0; i < nd; i++) n[i] = rnd_range(1, nd > 4 ? 3 : 6);
    size_t isz = sizes[rnd_range(0, 9)];
    if (nd == 7 && isz > 1) isz = 16; /* 8 dims with the word dimension */
    one_case(nd, n, isz, (int)rnd_range(1, 3), (int)rnd_range(1, 40), rnd_range(0, 4) == 0);
  }
}

/* What the kernels cannot take: the planner stages instead. */
static void test_plan_limits(void **state) {
  (void)state;
  dv_strided c;
  memset(&c, 0, sizeof c);
  dv_cu_copy_plan p;
  c.itemsize = 12; /* three 4-byte words: a ninth dimension (nothing merges) */
  c.nd = 8;
  for (int i = 0; i < 8; i++) c.shape[i] = 2, c.src_strides[i] = c.dst_strides[i] = 12 << i;
  assert_false(dv__cu_copy_plan(&c, 0, 0, &p));
  c.itemsize = 16; /* one 16-byte word: 8 dims fit */
  for (int i = 0; i < 8; i++) c.src_strides[i] = c.dst_strides[i] = 16 << i;
  assert_true(dv__cu_copy_plan(&c, 0, 0, &p));
  assert_int_equal(p.word, 16);
  assert_int_equal(p.dst.ndim, 8);
  c.nd = 9; /* nine dims that do not merge: too many */
  c.shape[8] = 2, c.src_strides[8] = c.dst_strides[8] = 16 << 8;
  assert_false(dv__cu_copy_plan(&c, 0, 0, &p));
  for (int i = 0; i < 9; i++) /* nine that do (dense, C order): one */
    c.src_strides[i] = c.dst_strides[i] = (int64_t)16 << (8 - i);
  assert_true(dv__cu_copy_plan(&c, 0, 0, &p));
  assert_int_equal(p.dst.ndim, 1);
  assert_int_equal(p.count, 512);
  c.nd = 2;
  c.shape[1] = 0; /* empty: nothing to do */
  assert_true(dv__cu_copy_plan(&c, 0, 0, &p));
  assert_int_equal(p.count, 0);
  c.shape[1] = -1;
  assert_false(dv__cu_copy_plan(&c, 0, 0, &p));
  c.itemsize = 0;
  assert_false(dv__cu_copy_plan(&c, 0, 0, &p));
  /* Alignment: an odd start address means bytes. */
  c.itemsize = 8;
  c.shape[1] = 3;
  assert_true(dv__cu_copy_plan(&c, 1, 0, &p));
  assert_int_equal(p.word, 1);
  assert_int_equal(p.count, 2 * 3 * 8);
  /* Contiguous dims merge (items of 8 bytes in dense 2 x 3: one run of 6
   * words); extents of 1 disappear; 2^31 words need the 64-bit kernels. */
  c.shape[0] = 2, c.shape[1] = 3, c.src_strides[1] = c.dst_strides[1] = 8;
  c.src_strides[0] = c.dst_strides[0] = 24;
  assert_true(dv__cu_copy_plan(&c, 0, 0, &p));
  assert_int_equal(p.word, 8);
  assert_int_equal(p.dst.ndim, 1);
  assert_int_equal(p.dst.shape[0], 6);
  c.nd = 3;
  c.shape[2] = 1, c.src_strides[2] = 4, c.dst_strides[2] = -4; /* ignored: extent 1 */
  assert_true(dv__cu_copy_plan(&c, 0, 0, &p));
  assert_int_equal(p.word, 8);
  assert_int_equal(p.dst.ndim, 1);
  c.nd = 1;
  c.shape[0] = (int64_t)1 << 31, c.itemsize = 1, c.src_strides[0] = 1, c.dst_strides[0] = 2;
  assert_true(dv__cu_copy_plan(&c, 0, 0, &p));
  assert_int_equal(p.wide_index, 1);
  c.shape[0] -= 1;
  assert_true(dv__cu_copy_plan(&c, 0, 0, &p));
  assert_int_equal(p.wide_index, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_random_layouts),
      cmocka_unit_test(test_plan_limits),
  };
  return cmocka_run_group_tests_name("copy_kernels", tests, NULL, NULL);
}
