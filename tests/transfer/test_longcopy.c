/* Long host copies of strided and transposed views through the public API
 * (issue 39): gathers and scatters of runs of 2..256 float32 long enough
 * for memops' streaming stores (more than 8 MiB kept), at an aligned and a
 * misaligned host address, and transposes of every element size the
 * transpose specialises, both ways, with the bytes between a view's
 * elements left alone. */
#include "common.h"

static unsigned char pat(size_t i, unsigned seed) {
  return (unsigned char)(i * 131u + seed * 7u + (i >> 9));
}

/* a[:, :L] of float32 rows of 2L (rows long enough for > 8 MiB kept), the
 * host buffer starting `skew` bytes past malloc's: host -> device, back to a
 * dense host buffer; then device -> the strided view of a fresh buffer,
 * whose other bytes must stay as they were. */
static void long_runs(int64_t L, size_t skew) {
  int64_t rows = (int64_t)(((size_t)9 << 20) / (size_t)(4 * L)) + 3;
  size_t kept = (size_t)(rows * L * 4), span = 2 * kept + 64;
  unsigned char *raw = malloc(span), *dense = malloc(kept), *back = malloc(kept),
                *raw2 = malloc(span);
  assert_non_null(raw), assert_non_null(dense), assert_non_null(back), assert_non_null(raw2);
  for (size_t i = 0; i < span; i++) raw[i] = pat(i, (unsigned)L), raw2[i] = pat(i, 99);
  unsigned char *h = raw + skew, *h2 = raw2 + skew;
  for (int64_t r = 0; r < rows; r++)
    memcpy(dense + (size_t)(r * L * 4), h + (size_t)(r * 2 * L * 4), (size_t)(L * 4));
  int64_t shape[2] = {rows, L}, st[2] = {2 * L * 4, 4};
  const dv_dtype *f32 = dv_dtype_get(DV_FLOAT32);
  dv_array *view, *view2, *dev, *db;
  assert_ok(dv_host_array_wrap(g_ctx, h, 2, shape, f32, st, &view));
  assert_ok(dv_host_array_wrap(g_ctx, h2, 2, shape, f32, st, &view2));
  assert_ok(dv_host_array_wrap(g_ctx, back, 2, shape, f32, NULL, &db));
  assert_ok(dv_device_array(g_ctx, 2, shape, f32, NULL, 'C', NULL, &dev));
  assert_ok(dv_copy_to_device(dev, view, NULL));
  memset(back, 0, kept);
  assert_ok(dv_copy_to_host(dev, db, NULL, NULL));
  assert_memory_equal(back, dense, kept);
  assert_ok(dv_copy_to_host(dev, view2, NULL, NULL));
  for (size_t i = 0; i < span; i++) { /* the kept bytes are h's, every other byte raw2's own */
    size_t o = i - skew, row = o / (size_t)(2 * L * 4), col = o % (size_t)(2 * L * 4);
    bool in = i >= skew && row < (size_t)rows && col < (size_t)(L * 4);
    unsigned char want = in ? raw[i] : pat(i, 99);
    if (raw2[i] != want)
      fail_msg("L=%lld skew %zu: byte %zu is %u, not %u", (long long)L, skew, i, raw2[i], want);
  }
  dv_array_release(view), dv_array_release(view2), dv_array_release(db), dv_array_release(dev);
  free(raw), free(dense), free(back), free(raw2);
}

static void test_long_runs_both_ways(void **state) {
  (void)state;
  int64_t Ls[] = {2, 4, 16, 256, 257};
  for (size_t k = 0; k < sizeof Ls / sizeof *Ls; k++) {
    long_runs(Ls[k], 0);
    long_runs(Ls[k], 4); /* misaligned rows: streamed lines only where whole */
  }
}

/* a.T of an r x c array of `dt` (its rows reversed when `neg`) into a
 * C-order device array, back into a dense host buffer; then the device
 * array into the a.T view of a second buffer, which must equal the first. */
static void transpose_both_ways(dv_type_id id, int64_t r, int64_t c, bool neg) {
  const dv_dtype *dt = dv_dtype_get(id);
  int64_t isz = (int64_t)dv_dtype_itemsize(dt);
  size_t bytes = (size_t)(r * c * isz);
  unsigned char *a = malloc(bytes), *a2 = malloc(bytes), *back = malloc(bytes);
  assert_non_null(a), assert_non_null(a2), assert_non_null(back);
  for (size_t i = 0; i < bytes; i++) a[i] = pat(i, (unsigned)isz), a2[i] = 0;
  /* a is r x c in C order; its transpose is c x r with strides (isz, c*isz);
   * reversed along the transpose's columns (a's rows): stride -c*isz from
   * a's last row. */
  int64_t shape[2] = {c, r}, st[2] = {isz, neg ? -c * isz : c * isz};
  size_t base = neg ? (size_t)((r - 1) * c * isz) : 0;
  dv_array *t, *t2, *dev, *db;
  assert_ok(dv_host_array_wrap(g_ctx, a + base, 2, shape, dt, st, &t));
  assert_ok(dv_host_array_wrap(g_ctx, a2 + base, 2, shape, dt, st, &t2));
  assert_ok(dv_host_array_wrap(g_ctx, back, 2, shape, dt, NULL, &db));
  assert_ok(dv_device_array(g_ctx, 2, shape, dt, NULL, 'C', NULL, &dev));
  assert_ok(dv_copy_to_device(dev, t, NULL));
  assert_ok(dv_copy_to_host(dev, db, NULL, NULL));
  for (int64_t i = 0; i < c; i++)
    for (int64_t j = 0; j < r; j++) {
      int64_t jj = neg ? r - 1 - j : j;
      if (memcmp(back + (size_t)((i * r + j) * isz), a + (size_t)((jj * c + i) * isz), (size_t)isz))
        fail_msg("%s %lldx%lld%s: element (%lld, %lld) differs", dv_dtype_name(dt), (long long)r,
                 (long long)c, neg ? " reversed" : "", (long long)i, (long long)j);
    }
  assert_ok(dv_copy_to_host(dev, t2, NULL, NULL));
  assert_memory_equal(a2, a, bytes);
  dv_array_release(t), dv_array_release(t2), dv_array_release(db), dv_array_release(dev);
  free(a), free(a2), free(back);
}

static void test_long_transposes_both_ways(void **state) {
  (void)state;
  dv_type_id ids[] = {DV_INT8, DV_FLOAT16, DV_FLOAT32, DV_FLOAT64, DV_COMPLEX128};
  for (size_t k = 0; k < sizeof ids / sizeof *ids; k++) {
    transpose_both_ways(ids[k], 517, 263, false); /* tiles and blocks cut at both edges */
    transpose_both_ways(ids[k], 64, 1031, true);
  }
  transpose_both_ways(DV_FLOAT32, 1024, 2048, false); /* whole tiles */
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      T(test_long_runs_both_ways),
      T(test_long_transposes_both_ways),
  };
  return test_main(argc, argv, "longcopy", tests, sizeof tests / sizeof tests[0]);
}
