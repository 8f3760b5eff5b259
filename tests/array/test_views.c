/* Views: slicing, integer indexing, reshape (view / device copy / view-only),
 * ravel, split, contiguity flags.  Data checked through copies to the host. */
#include "common.h"

static dv_array *iota_dev(int nd, const int64_t *shape, char order) {
  int64_t n = 1;
  for (int i = 0; i < nd; i++) n *= shape[i];
  double *h = malloc((size_t)(n ? n : 1) * 8);
  for (int64_t i = 0; i < n; i++) h[i] = (double)i;
  /* host data is C-ordered iota; the device array may be F-ordered */
  dv_array *hh, *d;
  assert_ok(dv_host_array_wrap(g_ctx, h, nd, shape, dv_dtype_get(DV_FLOAT64), NULL, &hh));
  assert_ok(dv_device_array(g_ctx, nd, shape, dv_dtype_get(DV_FLOAT64), NULL, order, NULL, &d));
  assert_ok(dv_copy_to_device(d, hh, NULL));
  dv_array_release(hh);
  free(h);
  return d;
}

/* Read a device array into a C-ordered host buffer. */
static void read_c(dv_array *d, double *out) {
  dv_array *h;
  assert_ok(dv_host_array_wrap(g_ctx, out, dv_array_ndim(d), dv_array_shape(d), dv_array_dtype(d), NULL, &h));
  assert_ok(dv_copy_to_host(d, h, NULL, NULL));
  dv_array_release(h);
}

static void test_slice_errors(void **state) {
  (void)state;
  int64_t shape[2] = {4, 5};
  dv_array *d = iota_dev(2, shape, 'C'), *v = (dv_array *)1;
  dv_index zero[1] = {DV_SLICE(0, 4, 0)};
  assert_status(dv_array_slice(d, 1, zero, &v), DV_ERR_BAD_STEP);
  assert_null(v);
  dv_index three[3] = {DV_ALL, DV_ALL, DV_ALL};
  assert_status(dv_array_slice(d, 3, three, &v), DV_ERR_TOO_MANY_INDICES);
  dv_index oob[1] = {DV_AT(4)};
  assert_status(dv_array_slice(d, 1, oob, &v), DV_ERR_INDEX);
  dv_index noob[1] = {DV_AT(-5)};
  assert_status(dv_array_slice(d, 1, noob, &v), DV_ERR_INDEX);
  assert_status(dv_array_slice(d, 1, NULL, &v), DV_ERR_NULL_ARGUMENT);
  assert_status(dv_array_slice(NULL, 0, NULL, &v), DV_ERR_NULL_ARGUMENT);
  dv_array_release(d);
}

static void test_slices_values(void **state) {
  (void)state;
  int64_t shape[2] = {4, 5};
  dv_array *d = iota_dev(2, shape, 'C'), *v;
  /* d[::-1, 1::2] -> rows 3..0, cols 1,3 */
  dv_index idx[2] = {DV_SLICE(DV_NONE, DV_NONE, -1), DV_SLICE(1, DV_NONE, 2)};
  assert_ok(dv_array_slice(d, 2, idx, &v));
  assert_int_equal(dv_array_shape(v)[0], 4);
  assert_int_equal(dv_array_shape(v)[1], 2);
  assert_int_equal(dv_array_strides(v)[0], -40);
  assert_int_equal(dv_array_strides(v)[1], 16);
  double out[8];
  read_c(v, out);
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 2; j++) assert_true(out[i * 2 + j] == (3 - i) * 5 + 1 + 2 * j);
  dv_array_release(v);
  /* empty slice and integer index */
  dv_index e[2] = {DV_SLICE(3, 1, 1), DV_AT(-1)};
  assert_ok(dv_array_slice(d, 2, e, &v));
  assert_int_equal(dv_array_ndim(v), 1);
  assert_int_equal(dv_array_size(v), 0);
  dv_array_release(v);
  /* view keeps its base alive after the base is released */
  dv_index row[1] = {DV_AT(2)};
  assert_ok(dv_array_slice(d, 1, row, &v));
  dv_array_release(d);
  read_c(v, out);
  for (int j = 0; j < 5; j++) assert_true(out[j] == 10 + j);
  dv_array_release(v);
}

static void test_contiguity_rules(void **state) {
  (void)state;
  /* NumPy's relaxed rules, on wrapped host descriptors */
  char buf[1024];
  const dv_dtype *f8 = dv_dtype_get(DV_FLOAT64);
  struct { int nd; int64_t shape[3], strides[3]; int c, f; } cases[] = {
      {2, {1, 10}, {800, 8}, 1, 1},  /* size-1 dim ignored: both */
      {2, {1, 3}, {0, 8}, 1, 1},     /* zero stride on a size-1 dim: NumPy says C (Numba: neither) */
      {2, {3, 1}, {8, 0}, 1, 1},
      {2, {2, 3}, {24, 8}, 1, 0},
      {2, {2, 3}, {8, 16}, 0, 1},
      {2, {2, 3}, {48, 16}, 0, 0},
      {2, {0, 3}, {24, 8}, 1, 1},    /* size 0: both */
      {0, {0}, {0}, 1, 1},           /* 0-d: both */
      {2, {3, 2}, {0, 8}, 0, 0},     /* broadcast */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    dv_array *a;
    assert_ok(dv_host_array_wrap(g_ctx, buf + 512, cases[i].nd, cases[i].shape, f8, cases[i].strides, &a));
    if (dv_array_is_c_contiguous(a) != cases[i].c || dv_array_is_f_contiguous(a) != cases[i].f)
      fail_msg("case %zu: c=%d f=%d", i, dv_array_is_c_contiguous(a), dv_array_is_f_contiguous(a));
    dv_array_release(a);
  }
}

static void test_reshape(void **state) {
  (void)state;
  int64_t s23[2] = {2, 3};
  /* contiguous: a view */
  dv_array *c = iota_dev(2, s23, 'C'), *r, *f;
  int64_t s32[2] = {3, 2}, m1[2] = {-1, 2};
  assert_ok(dv_array_reshape(c, 2, m1, 'C', DV_VIEW_ONLY, NULL, &r));
  assert_int_equal(dv_array_shape(r)[0], 3);
  double out[6];
  read_c(r, out);
  for (int i = 0; i < 6; i++) assert_true(out[i] == i);
  dv_array_release(r);
  /* a 2x3 F array reshaped with order C: NumPy's [[0,1],[2,3],[4,5]] of its
   * logical (C-order) elements, not Numba's reinterpretation */
  f = iota_dev(2, s23, 'F');
  assert_status(dv_array_reshape(f, 2, s32, 'C', DV_VIEW_ONLY, NULL, &r), DV_ERR_COPY_NEEDED);
  assert_null(r);
  assert_ok(dv_array_reshape(f, 2, s32, 'C', 0, NULL, &r));
  read_c(r, out);
  for (int i = 0; i < 6; i++) assert_true(out[i] == i);
  assert_int_equal(dv_array_memory(r), DV_MEM_DEVICE);
  dv_array_release(r);
  /* ... and with order F it is a view of the F buffer */
  assert_ok(dv_array_reshape(f, 2, s32, 'F', DV_VIEW_ONLY, NULL, &r));
  dv_array_release(r);
  /* order A on an F array means F */
  assert_ok(dv_array_reshape(f, 2, s32, 'A', DV_VIEW_ONLY, NULL, &r));
  dv_array_release(r);
  /* [:, ::2] of (4,6) has uniform stride 16: NumPy views it as (12,) */
  int64_t s46[2] = {4, 6}, s413[3] = {4, 1, 3}, s12 = 12;
  dv_array *big = iota_dev(2, s46, 'C'), *sl;
  dv_index every2[2] = {DV_ALL, DV_SLICE(DV_NONE, DV_NONE, 2)};
  assert_ok(dv_array_slice(big, 2, every2, &sl));
  assert_ok(dv_array_reshape(sl, 1, &s12, 'C', DV_VIEW_ONLY, NULL, &r));
  assert_int_equal(dv_array_strides(r)[0], 16);
  dv_array_release(r);
  dv_array_release(sl);
  /* non-contiguous source that NumPy can still view: [:, :3] of (4,6) to (4,1,3) */
  dv_index idx[2] = {DV_ALL, DV_SLICE(DV_NONE, 3, 1)};
  assert_ok(dv_array_slice(big, 2, idx, &sl));
  assert_ok(dv_array_reshape(sl, 3, s413, 'C', DV_VIEW_ONLY, NULL, &r));
  double o12[12];
  read_c(r, o12);
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 3; j++) assert_true(o12[i * 3 + j] == i * 6 + j);
  dv_array_release(r);
  /* ... but to (12,) it needs a copy */
  assert_status(dv_array_reshape(sl, 1, &s12, 'C', DV_VIEW_ONLY, NULL, &r), DV_ERR_COPY_NEEDED);
  assert_ok(dv_array_reshape(sl, 1, &s12, 'C', 0, NULL, &r));
  read_c(r, o12);
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 3; j++) assert_true(o12[i * 3 + j] == i * 6 + j);
  dv_array_release(r);
  /* errors */
  int64_t two[2] = {-1, -1}, bad[2] = {4, 2}, neg[2] = {-2, 3}, z[2] = {0, -1};
  assert_status(dv_array_reshape(c, 2, two, 'C', 0, NULL, &r), DV_ERR_BAD_SHAPE);
  assert_status(dv_array_reshape(c, 2, bad, 'C', 0, NULL, &r), DV_ERR_RESHAPE_SIZE);
  assert_status(dv_array_reshape(c, 2, neg, 'C', 0, NULL, &r), DV_ERR_BAD_SHAPE);
  assert_status(dv_array_reshape(c, 2, z, 'C', 0, NULL, &r), DV_ERR_BAD_SHAPE);
  assert_status(dv_array_reshape(c, 2, s32, 'X', 0, NULL, &r), DV_ERR_BAD_ORDER);
  int64_t m4[1] = {-1};
  assert_status(dv_array_reshape(c, 1, m4, 'C', 0, NULL, NULL), DV_ERR_NULL_ARGUMENT);
  dv_array_release(c), dv_array_release(f), dv_array_release(big), dv_array_release(sl);
}

static void test_ravel(void **state) {
  (void)state;
  int64_t s23[2] = {2, 3};
  dv_array *c = iota_dev(2, s23, 'C'), *f = iota_dev(2, s23, 'F'), *r;
  double out[6];
  assert_ok(dv_array_ravel(c, 'C', DV_VIEW_ONLY, NULL, &r));
  dv_array_release(r);
  assert_ok(dv_array_ravel(f, 'A', DV_VIEW_ONLY, NULL, &r)); /* F buffer order */
  read_c(r, out);
  double fo[6] = {0, 3, 1, 4, 2, 5};
  assert_memory_equal(out, fo, sizeof fo);
  dv_array_release(r);
  /* F-contiguous with 'C': Numba raises; devarray copies on the device */
  assert_status(dv_array_ravel(f, 'C', DV_VIEW_ONLY, NULL, &r), DV_ERR_COPY_NEEDED);
  assert_ok(dv_array_ravel(f, 'C', 0, NULL, &r));
  read_c(r, out);
  for (int i = 0; i < 6; i++) assert_true(out[i] == i);
  dv_array_release(r);
  assert_ok(dv_array_ravel(c, 'F', 0, NULL, &r));
  read_c(r, out);
  assert_memory_equal(out, fo, sizeof fo);
  dv_array_release(r);
  assert_status(dv_array_ravel(c, 'K', 0, NULL, &r), DV_ERR_BAD_ORDER);
  dv_array_release(c), dv_array_release(f);
}

static void test_split(void **state) {
  (void)state;
  int64_t n = 10;
  dv_array *d = iota_dev(1, &n, 'C'), *views[8];
  size_t count = 0;
  assert_ok(dv_array_split(d, 4, NULL, 0, &count));
  assert_int_equal(count, 3);
  assert_status(dv_array_split(d, 4, views, 2, &count), DV_ERR_INVALID_ARGUMENT);
  assert_ok(dv_array_split(d, 4, views, 8, &count));
  assert_int_equal(count, 3);
  assert_int_equal(dv_array_size(views[2]), 2);
  double out[4];
  read_c(views[2], out);
  assert_true(out[0] == 8 && out[1] == 9);
  for (size_t i = 0; i < count; i++) dv_array_release(views[i]);
  assert_status(dv_array_split(d, 0, views, 8, &count), DV_ERR_INVALID_ARGUMENT);
  dv_array *st;
  dv_index step[1] = {DV_SLICE(DV_NONE, DV_NONE, 2)};
  assert_ok(dv_array_slice(d, 1, step, &st));
  assert_status(dv_array_split(st, 2, views, 8, &count), DV_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(dv_last_error(), "unit stride"));
  int64_t s22[2] = {2, 2};
  dv_array *two = iota_dev(2, s22, 'C');
  assert_status(dv_array_split(two, 2, views, 8, &count), DV_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(dv_last_error(), "1d"));
  dv_array_release(st), dv_array_release(two), dv_array_release(d);
}

/* A dimension sliced to length 0 keeps NumPy's layout: the parent's stride
 * (as if the step were 1) and the parent's start, whatever the step; split
 * (Numba's unit-stride contract) then accepts it like NumPy's view. */
static void test_empty_slices(void **state) {
  (void)state;
  int64_t n = 10;
  dv_array *a, *v;
  assert_ok(dv_device_array(g_ctx, 1, &n, dv_dtype_get(DV_INT32), NULL, 'C', NULL, &a));
  dv_index cases[] = {DV_SLICE(5, 5, 1), DV_SLICE(5, 5, 2), DV_SLICE(2, 2, -3), DV_SLICE(8, 2, 1),
                      DV_SLICE(8, 2, 3), DV_SLICE(2, 8, -1), DV_SLICE(20, 30, 4)};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    assert_ok(dv_array_slice(a, 1, &cases[i], &v));
    assert_int_equal(dv_array_shape(v)[0], 0);
    if (dv_array_strides(v)[0] != 4) fail_msg("case %zu: stride %lld, NumPy 4", i, (long long)dv_array_strides(v)[0]);
    assert_true(dv_array_is_c_contiguous(v) && dv_array_is_f_contiguous(v));
    size_t count = 99;
    dv_array *parts[1];
    assert_ok(dv_array_split(v, 3, parts, 1, &count));
    assert_int_equal(count, 0);
    dv_array_release(v);
  }
  /* 2-D: an empty row range keeps the row stride; the column slice is ordinary */
  int64_t s45[2] = {4, 5};
  dv_array *b;
  assert_ok(dv_device_array(g_ctx, 2, s45, dv_dtype_get(DV_FLOAT64), NULL, 'C', NULL, &b));
  dv_index e2[2] = {DV_SLICE(3, 1, 2), DV_SLICE(1, DV_NONE, 2)};
  assert_ok(dv_array_slice(b, 2, e2, &v));
  assert_int_equal(dv_array_shape(v)[0], 0);
  assert_int_equal(dv_array_shape(v)[1], 2);
  assert_int_equal(dv_array_strides(v)[0], 40);
  assert_int_equal(dv_array_strides(v)[1], 16);
  dv_array_release(v);
  /* a one-element range stores step * stride, as NumPy does */
  dv_index one[1] = {DV_SLICE(3, 4, 3)};
  assert_ok(dv_array_slice(a, 1, one, &v));
  assert_int_equal(dv_array_shape(v)[0], 1);
  assert_int_equal(dv_array_strides(v)[0], 12);
  dv_array_release(v);
  dv_array_release(b);
  dv_array_release(a);
}

/* A zero extent beside extents whose product overflows (issue 22 #4): the
 * element count is 0, but dv_array_size multiplies left to right and would
 * overflow before it reached the 0 (UBSan), and a dense layout of the shape
 * (a copy, a reshape) would not fit int64_t.  Every constructor refuses the
 * shape, with explicit strides too, as NumPy does; non-zero extents whose
 * product and bytes fit are accepted. */
static void test_zero_extent_beside_huge(void **state) {
  (void)state;
  const dv_dtype *f8 = dv_dtype_get(DV_FLOAT64);
  int64_t huge[3] = {INT64_MAX - 53, 7, 0}, huge_st[3] = {56, 8, 8};
  int64_t wide[3] = {(int64_t)1 << 61, 2, 0}, wide_st[3] = {16, 8, 8}; /* 2^62 elements, 2^65 bytes */
  int64_t fits[3] = {(int64_t)1 << 40, 7, 0}, fits_st[3] = {56, 8, 8};
  double buf[1];
  const int64_t *bad[2] = {huge, wide}, *bad_st[2] = {huge_st, wide_st};
  for (int k = 0; k < 2; k++) {
    for (int strided = 0; strided < 2; strided++) {
      const int64_t *st = strided ? bad_st[k] : NULL;
      dv_array *a = (dv_array *)1;
      assert_status(dv_device_array(g_ctx, 3, bad[k], f8, st, 'C', NULL, &a), DV_ERR_OVERFLOW);
      assert_null(a);
      assert_status(dv_host_array(g_ctx, 3, bad[k], f8, st, 'F', &a), DV_ERR_OVERFLOW);
      assert_null(a);
      assert_status(dv_pinned_array(g_ctx, 3, bad[k], f8, st, 'C', &a), DV_ERR_OVERFLOW);
      assert_null(a);
      assert_status(dv_host_array_wrap(g_ctx, buf, 3, bad[k], f8, st, &a), DV_ERR_OVERFLOW);
      assert_null(a);
    }
  }
  assert_non_null(strstr(dv_last_error(), "overflow"));
  /* the largest legal empty shape: accepted, size 0, no bytes */
  dv_array *d, *h, *r = NULL;
  assert_ok(dv_device_array(g_ctx, 3, fits, f8, fits_st, 'C', NULL, &d));
  assert_int_equal(dv_array_size(d), 0);
  assert_int_equal(dv_array_nbytes(d), 0);
  assert_ok(dv_host_array_wrap(g_ctx, buf, 3, fits, f8, fits_st, &h));
  assert_int_equal(dv_array_size(h), 0);
  /* reshape of an empty array: any shape with a zero extent has size 0, but
   * its non-zero extents and its dense bytes must fit as well */
  int64_t r_huge[3] = {0, INT64_MAX - 53, 7}, r_wide[3] = {0, (int64_t)1 << 61, 2};
  int64_t r_fits[3] = {(int64_t)1 << 40, 0, 7}, r_inf[3] = {INT64_MAX - 53, 7, -1};
  assert_status(dv_array_reshape(d, 3, r_huge, 'C', 0, NULL, &r), DV_ERR_OVERFLOW);
  assert_null(r);
  assert_status(dv_array_reshape(h, 3, r_huge, 'F', DV_VIEW_ONLY, NULL, &r), DV_ERR_OVERFLOW);
  assert_status(dv_array_reshape(d, 3, r_wide, 'C', 0, NULL, &r), DV_ERR_OVERFLOW);
  assert_status(dv_array_reshape(h, 3, r_wide, 'C', DV_VIEW_ONLY, NULL, &r), DV_ERR_OVERFLOW);
  assert_status(dv_array_reshape(h, 3, r_inf, 'C', 0, NULL, &r), DV_ERR_OVERFLOW);
  assert_null(r);
  assert_ok(dv_array_reshape(h, 3, r_fits, 'C', DV_VIEW_ONLY, NULL, &r));
  assert_int_equal(dv_array_size(r), 0);
  assert_int_equal(dv_array_strides(r)[2], 8);
  dv_array_release(r);
  assert_ok(dv_array_reshape(d, 3, r_fits, 'F', 0, NULL, &r));
  assert_int_equal(dv_array_size(r), 0);
  assert_int_equal(dv_array_strides(r)[0], 8);
  dv_array_release(r);
  dv_array_release(h);
  dv_array_release(d);
}

/* A new array's descriptor lives inside its allocation record (up to 4
 * dimensions; more get one of their own): a view made from it must keep
 * the memory and read the right bytes after the base is released, for every
 * rank on both sides of that limit; the arrays counter follows every
 * descriptor (issue 23). */
static void test_views_outlive_base(void **state) {
  (void)state;
  for (int nd = 0; nd <= 6; nd++) {
    int64_t shape[6] = {2, 3, 2, 2, 1, 2};
    dv_stats st0 = {.size = sizeof st0}, st1 = {.size = sizeof st1};
    assert_ok(dv_context_stats(g_ctx, &st0));
    dv_array *d = iota_dev(nd, shape, 'C');
    int64_t n = dv_array_size(d);
    dv_index idx[1] = {DV_ALL};
    dv_array *v = NULL;
    if (nd > 0) assert_ok(dv_array_slice(d, 1, idx, &v));
    else v = dv_array_retain(d);
    assert_ok(dv_context_stats(g_ctx, &st1));
    /* iota_dev made a wrapper (released) and d; the slice is one more (a
     * 0-d array is retained instead) */
    assert_int_equal(st1.arrays.current, st0.arrays.current + (nd > 0 ? 2 : 1));
    assert_int_equal(st1.arrays.total, st0.arrays.total + (nd > 0 ? 3 : 2));
    dv_array_release(d); /* the base goes first */
    double *out = calloc((size_t)n, sizeof *out);
    read_c(v, out);
    for (int64_t i = 0; i < n; i++) assert_true(out[i] == (double)i);
    free(out);
    dv_array_release(v);
    assert_ok(dv_context_stats(g_ctx, &st1));
    assert_int_equal(st1.arrays.current, st0.arrays.current);
  }
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      T(test_slice_errors), T(test_slices_values), T(test_contiguity_rules),
      T(test_reshape),      T(test_ravel),         T(test_split),
      T(test_empty_slices), T(test_zero_extent_beside_huge), T(test_views_outlive_base),
  };
  return test_main(argc, argv, "views", tests, sizeof tests / sizeof tests[0]);
}
