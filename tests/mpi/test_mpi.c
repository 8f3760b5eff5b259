/* libdevarray_mpi under mpirun (tests/mpi/run_mpi.sh starts 4 ranks):
 *   test_mpi BACKEND MODE
 * BACKEND: host or opencl; MODE: default, staged (DV_MPI_FORCE_STAGED, tiny
 * chunks so that the pipeline runs several), noheader (DV_MPI_NO_HEADER and
 * DV_MPI_FORCE_PACK).  Every operation and dtype is checked against values
 * computed here in C; a backend missing on this machine exits 77 on every
 * rank (skipped).  One context and one communicator serve all tests. */
#include <complex.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "devarray_mpi.h"

static dv_context *g_ctx;
static dv_mpi_comm *g_comm;
static int g_rank, g_size;
static const char *g_backend = "host", *g_mode = "default";

#define assert_ok(expr)                                                                      \
  do {                                                                                       \
    dv_status s_ = (expr);                                                                   \
    if (s_ != DV_OK)                                                                         \
      fail_msg("rank %d: %s -> %s: %s", g_rank, #expr, dv_status_name(s_), dv_last_error()); \
  } while (0)
#define assert_status(expr, want)                                                               \
  do {                                                                                          \
    dv_status s_ = (expr);                                                                      \
    if (s_ != (want))                                                                           \
      fail_msg("rank %d: %s -> %s (%s), expected %s", g_rank, #expr, dv_status_name(s_),        \
               dv_last_error(), dv_status_name(want));                                          \
    if ((want) != DV_OK && dv_last_error()[0] == 0) fail_msg("%s: empty error message", #expr); \
  } while (0)

static int header_on(void) { return !(dv_mpi_comm_flags(g_comm) & DV_MPI_NO_HEADER); }

/* ---- values: small integers, exact in every dtype, sums below 128 ---------- */

static uint16_t to_half(double v) { /* exact for the small integers used here */
  if (v == 0) return 0;
  int e = 0;
  double m = v;
  while (m >= 2) {
    m /= 2;
    e++;
  }
  return (uint16_t)(((e + 15) << 10) | (uint16_t)((m - 1) * 1024));
}
static double from_half(uint16_t h) {
  int e = (h >> 10) & 0x1f;
  if (!e) return 0;
  double m = 1 + (h & 0x3ff) / 1024.0;
  for (int i = 15; i < e; i++) m *= 2;
  return m;
}

static void store(dv_type_id id, void *p, double re, double im) {
  switch (id) {
    case DV_BOOL: *(uint8_t *)p = re != 0; break;
    case DV_INT8: *(int8_t *)p = (int8_t)re; break;
    case DV_INT16: *(int16_t *)p = (int16_t)re; break;
    case DV_INT32: *(int32_t *)p = (int32_t)re; break;
    case DV_INT64: *(int64_t *)p = (int64_t)re; break;
    case DV_UINT8: *(uint8_t *)p = (uint8_t)re; break;
    case DV_UINT16: *(uint16_t *)p = (uint16_t)re; break;
    case DV_UINT32: *(uint32_t *)p = (uint32_t)re; break;
    case DV_UINT64: *(uint64_t *)p = (uint64_t)re; break;
    case DV_FLOAT16: *(uint16_t *)p = to_half(re); break;
    case DV_FLOAT32: *(float *)p = (float)re; break;
    case DV_FLOAT64: *(double *)p = re; break;
    case DV_COMPLEX64: ((float *)p)[0] = (float)re, ((float *)p)[1] = (float)im; break;
    case DV_COMPLEX128: ((double *)p)[0] = re, ((double *)p)[1] = im; break;
    default: break;
  }
}

static void load(dv_type_id id, const void *p, double *re, double *im) {
  *im = 0;
  switch (id) {
    case DV_BOOL: *re = *(const uint8_t *)p; break;
    case DV_INT8: *re = *(const int8_t *)p; break;
    case DV_INT16: *re = *(const int16_t *)p; break;
    case DV_INT32: *re = *(const int32_t *)p; break;
    case DV_INT64: *re = (double)*(const int64_t *)p; break;
    case DV_UINT8: *re = *(const uint8_t *)p; break;
    case DV_UINT16: *re = *(const uint16_t *)p; break;
    case DV_UINT32: *re = *(const uint32_t *)p; break;
    case DV_UINT64: *re = (double)*(const uint64_t *)p; break;
    case DV_FLOAT16: *re = from_half(*(const uint16_t *)p); break;
    case DV_FLOAT32: *re = *(const float *)p; break;
    case DV_FLOAT64: *re = *(const double *)p; break;
    case DV_COMPLEX64: *re = ((const float *)p)[0], *im = ((const float *)p)[1]; break;
    case DV_COMPLEX128: *re = ((const double *)p)[0], *im = ((const double *)p)[1]; break;
    default: break;
  }
}

static int is_complex(dv_type_id id) { return id == DV_COMPLEX64 || id == DV_COMPLEX128; }

/* element i of rank r: (re, im); prod: small factors */
static void value(dv_type_id id, int r, int64_t i, int prod, double *re, double *im) {
  if (prod) {
    *re = (double)((r + i) % 3 + 1);
    *im = is_complex(id) ? (double)(i % 2) : 0;
  } else {
    *re = (double)((r * 7 + i * 3) % 29);
    *im = is_complex(id) ? (double)((r + i) % 5) : 0;
  }
  if (id == DV_BOOL) *re = *re != 0 && ((r + i) % 3 != 0);
}

/* ---- arrays of several layouts and memories --------------------------------- */

enum { L_DENSE, L_COLUMNS, L_REVERSED, L_PINNED, L_COUNT };

/* A (rows, cols) array: dense device, every other column of a wider device
 * array, both axes reversed (negative strides), or pinned host memory. */
static dv_array *make(const dv_dtype *dt, int layout, int64_t rows, int64_t cols) {
  dv_array *base = NULL, *view = NULL;
  int64_t shape[2] = {rows, layout == L_COLUMNS ? 2 * cols : cols};
  if (layout == L_PINNED) {
    assert_ok(dv_pinned_array(g_ctx, 2, shape, dt, NULL, 'C', &base));
    return base;
  }
  assert_ok(dv_device_array(g_ctx, 2, shape, dt, NULL, 'C', NULL, &base));
  if (layout == L_DENSE) return base;
  dv_index idx[2];
  if (layout == L_COLUMNS) {
    idx[0] = DV_ALL;
    idx[1] = DV_SLICE(DV_NONE, DV_NONE, 2);
  } else {
    idx[0] = DV_SLICE(DV_NONE, DV_NONE, -1);
    idx[1] = DV_SLICE(DV_NONE, DV_NONE, -1);
  }
  assert_ok(dv_array_slice(base, 2, idx, &view));
  dv_array_release(base);
  return view;
}

/* Host copy (C order) of any array; the caller releases it. */
static dv_array *host_copy(const dv_array *a, void **data) {
  dv_array *h = NULL;
  assert_ok(
      dv_host_array(g_ctx, dv_array_ndim(a), dv_array_shape(a), dv_array_dtype(a), NULL, 'C', &h));
  assert_ok(dv_array_copy(h, a, NULL));
  assert_ok(dv_context_synchronize(g_ctx));
  assert_ok(dv_array_host_data(h, data));
  return h;
}

static void fill(dv_array *a, int r, int prod) {
  dv_type_id id = dv_dtype_id(dv_array_dtype(a));
  size_t isz = dv_dtype_itemsize(dv_array_dtype(a));
  dv_array *h = NULL;
  void *p = NULL;
  assert_ok(
      dv_host_array(g_ctx, dv_array_ndim(a), dv_array_shape(a), dv_array_dtype(a), NULL, 'C', &h));
  assert_ok(dv_array_host_data(h, &p));
  for (int64_t i = 0; i < dv_array_size(a); i++) {
    double re, im;
    value(id, r, i, prod, &re, &im);
    store(id, (char *)p + (size_t)i * isz, re, im);
  }
  assert_ok(dv_array_copy(a, h, NULL));
  assert_ok(dv_context_synchronize(g_ctx));
  dv_array_release(h);
}

/* a must hold rank r's values (element offset `first` on). */
static void expect_values(const dv_array *a, int r, int64_t first, int64_t n) {
  dv_type_id id = dv_dtype_id(dv_array_dtype(a));
  size_t isz = dv_dtype_itemsize(dv_array_dtype(a));
  void *p = NULL;
  dv_array *h = host_copy(a, &p);
  for (int64_t i = 0; i < n; i++) {
    double re, im, wre, wim;
    load(id, (char *)p + (size_t)(first + i) * isz, &re, &im);
    value(id, r, i, 0, &wre, &wim);
    if (re != wre || im != wim)
      fail_msg("rank %d, %s: element %lld is (%g, %g), expected rank %d's (%g, %g)", g_rank,
               dv_dtype_name(dv_array_dtype(a)), (long long)(first + i), re, im, r, wre, wim);
  }
  dv_array_release(h);
}

/* ---- point to point ------------------------------------------------------------- */

static void t_p2p_ring(void **state) {
  (void)state;
  int next = (g_rank + 1) % g_size, prev = (g_rank + g_size - 1) % g_size;
  for (int id = 0; id < DV_RECORD; id++) {
    const dv_dtype *dt = dv_dtype_get((dv_type_id)id);
    dv_array *out = make(dt, id % L_COUNT, 3, 5), *in = make(dt, (id + 1) % L_COUNT, 3, 5);
    fill(out, g_rank, 0);
    dv_mpi_request *req[2] = {NULL, NULL};
    assert_ok(dv_mpi_irecv(g_comm, in, prev, id, NULL, &req[0]));
    assert_ok(dv_mpi_isend(g_comm, out, next, id, NULL, &req[1]));
    assert_ok(dv_mpi_waitall(2, req));
    assert_null(req[0]);
    expect_values(in, prev, 0, 15);
    dv_array_release(out);
    dv_array_release(in);
  }
}

static void t_p2p_blocking_strided(void **state) {
  (void)state;
  /* even ranks send a column and a reversed view; odd ranks receive them
   * into other strided views, blocking calls, test() polling for one */
  const dv_dtype *dt = dv_dtype_get(DV_FLOAT64);
  int peer = g_rank ^ 1;
  if (peer >= g_size) return;
  int64_t shape[2] = {6, 4};
  dv_array *base = NULL, *col = NULL;
  assert_ok(dv_device_array(g_ctx, 2, shape, dt, NULL, 'F', NULL, &base));
  dv_index ix[2] = {DV_ALL, DV_AT(2)};
  assert_ok(
      dv_array_slice(base, 2, ix, &col)); /* shape (6,), F order: unit stride; C-row view next */
  dv_array *row = NULL;
  dv_index iy[2] = {DV_AT(1), DV_SLICE(DV_NONE, DV_NONE, -1)};
  assert_ok(dv_array_slice(base, 2, iy, &row)); /* shape (4,), stride -6*8 */
  if (g_rank % 2 == 0) {
    fill(row, g_rank, 0);
    assert_ok(dv_mpi_send(g_comm, row, peer, 7, NULL));
    fill(col, g_rank, 0);
    dv_mpi_request *r = NULL;
    assert_ok(dv_mpi_isend(g_comm, col, peer, 8, NULL, &r));
    int done = 0;
    while (!done) assert_ok(dv_mpi_test(&r, &done, NULL));
    assert_null(r);
  } else {
    dv_array *other = NULL, *ocol = NULL;
    assert_ok(dv_device_array(g_ctx, 2, (int64_t[]){4, 6}, dt, NULL, 'C', NULL, &other));
    dv_index iz[2] = {DV_SLICE(DV_NONE, DV_NONE, -1), DV_AT(5)};
    assert_ok(dv_array_slice(other, 2, iz, &ocol)); /* (4,), negative stride, a column */
    MPI_Status st;
    assert_ok(dv_mpi_recv(g_comm, ocol, peer, 7, NULL, &st));
    assert_int_equal(st.MPI_SOURCE, peer);
    expect_values(ocol, peer, 0, 4);
    dv_array *c2 = NULL;
    dv_index iw[2] = {DV_ALL, DV_AT(1)};
    dv_array *wide = NULL;
    assert_ok(dv_device_array(g_ctx, 2, (int64_t[]){6, 3}, dt, NULL, 'C', NULL, &wide));
    assert_ok(dv_array_slice(wide, 2, iw, &c2));
    assert_ok(dv_mpi_recv(g_comm, c2, peer, 8, NULL, NULL));
    expect_values(c2, peer, 0, 6);
    dv_array_release(c2);
    dv_array_release(wide);
    dv_array_release(ocol);
    dv_array_release(other);
  }
  dv_array_release(row);
  dv_array_release(col);
  dv_array_release(base);
}

static void t_p2p_any_source_and_records(void **state) {
  (void)state;
  dv_field_desc f[2] = {{"a", dv_dtype_get(DV_INT32), 0, 0, NULL},
                        {"b", dv_dtype_get(DV_FLOAT64), 8, 0, NULL}};
  dv_dtype *rec = NULL;
  assert_ok(dv_dtype_record_create(f, 2, 16, &rec));
  int64_t n = 4;
  dv_array *a = NULL;
  assert_ok(dv_device_array(g_ctx, 1, &n, rec, NULL, 'C', NULL, &a));
  if (g_rank == 0) {
    int seen = 0;
    for (int k = 1; k < g_size; k++) {
      MPI_Status st;
      if (!header_on()) st.MPI_SOURCE = k;
      assert_ok(dv_mpi_recv(g_comm, a, header_on() ? MPI_ANY_SOURCE : k,
                            header_on() ? MPI_ANY_TAG : 40 + k, NULL, &st));
      assert_true(st.MPI_SOURCE >= 1 && st.MPI_SOURCE < g_size);
      if (header_on()) assert_int_equal(st.MPI_TAG, 40 + st.MPI_SOURCE);
      seen |= 1 << st.MPI_SOURCE;
      void *p = NULL;
      dv_array *h = host_copy(a, &p);
      for (int64_t i = 0; i < n; i++) {
        int32_t x;
        double y;
        memcpy(&x, (char *)p + i * 16, 4);
        memcpy(&y, (char *)p + i * 16 + 8, 8);
        assert_int_equal(x, st.MPI_SOURCE * 100 + i);
        assert_true(y == st.MPI_SOURCE + 0.5 * (double)i);
      }
      dv_array_release(h);
    }
    assert_int_equal(seen, ((1 << g_size) - 1) & ~1);
  } else {
    dv_array *h = NULL;
    void *p = NULL;
    assert_ok(dv_host_array(g_ctx, 1, &n, rec, NULL, 'C', &h));
    assert_ok(dv_array_host_data(h, &p));
    memset(p, 0, 16 * (size_t)n);
    for (int64_t i = 0; i < n; i++) {
      int32_t x = g_rank * 100 + (int32_t)i;
      double y = g_rank + 0.5 * (double)i;
      memcpy((char *)p + i * 16, &x, 4);
      memcpy((char *)p + i * 16 + 8, &y, 8);
    }
    assert_ok(dv_array_copy(a, h, NULL));
    assert_ok(dv_mpi_send(g_comm, a, 0, 40 + g_rank, NULL));
    dv_array_release(h);
  }
  dv_array_release(a);
  dv_dtype_release(rec);
}

/* ---- eager messages: the acceptance cache, notices, order ------------------------ */

/* 1 when device arrays take a path that sends eagerly (host memory, not staged) */
static int eager_path(void) {
  int64_t n = 1;
  dv_array *a = NULL;
  assert_ok(dv_device_array(g_ctx, 1, &n, dv_dtype_get(DV_INT8), NULL, 'C', NULL, &a));
  int e = dv_mpi_path_of(g_comm, a) != DV_MPI_PATH_STAGED;
  dv_array_release(a);
  return e && header_on();
}

static dv_mpi_stats stats_now(void) {
  dv_mpi_stats st = {.size = sizeof st};
  assert_ok(dv_mpi_stats_get(g_comm, &st));
  return st;
}

static dv_array *vec(const dv_dtype *dt, int64_t n, int r) {
  dv_array *a = NULL;
  assert_ok(dv_device_array(g_ctx, 1, &n, dt, NULL, 'C', NULL, &a));
  fill(a, r, 0);
  return a;
}

/* a message between the pair (even sender, odd receiver); n elements each side */
static dv_status pair_msg(const dv_dtype *dt, int64_t n_send, int64_t n_recv, int tag, int r) {
  int peer = g_rank ^ 1;
  int sender = g_rank % 2 == 0;
  dv_array *a = vec(dt, sender ? n_send : n_recv, sender ? r : 99);
  dv_status s = sender ? dv_mpi_send(g_comm, a, peer, tag, NULL)
                       : dv_mpi_recv(g_comm, a, peer, tag, NULL, NULL);
  if (s == DV_OK && !sender) expect_values(a, r, 0, n_recv);
  dv_array_release(a);
  return s;
}

/* cache hit: the second message of a header goes eager; a changed header
 * (shape, dtype) goes SYNC again, and its mismatch fails both ranks at once */
static void t_cache_hit_and_invalidation(void **state) {
  (void)state;
  MPI_Barrier(MPI_COMM_WORLD); /* the previous test's messages are all matched */
  if (!eager_path() || (g_rank ^ 1) >= g_size) skip(); /* staged messages are always SYNC */
  const dv_dtype *f8 = dv_dtype_get(DV_FLOAT64), *f4 = dv_dtype_get(DV_FLOAT32);
  int sender = g_rank % 2 == 0;
  dv_mpi_stats s0 = stats_now();
  assert_ok(pair_msg(f8, 6, 6, 20, 1)); /* SYNC: the receiver accepts (6,) float64 */
  dv_mpi_stats s1 = stats_now();
  assert_int_equal(s1.headers - s0.headers, 1);
  assert_int_equal(s1.eager - s0.eager, 0);
  assert_ok(pair_msg(f8, 6, 6, 20, 2)); /* the same header: eager on the sender */
  assert_ok(pair_msg(f8, 6, 6, 20, 3));
  dv_mpi_stats s2 = stats_now();
  assert_int_equal(s2.eager - s1.eager, sender ? 2 : 0);
  assert_int_equal(s2.headers - s1.headers, 0);
  assert_ok(pair_msg(f8, 6, 6, 21, 4)); /* another tag: not cached yet */
  dv_mpi_stats s3 = stats_now();
  assert_int_equal(s3.headers - s2.headers, 1);
  /* the sender's array changes shape, then dtype: SYNC again, accepted */
  assert_ok(pair_msg(f8, 7, 7, 20, 5));
  assert_ok(pair_msg(f4, 7, 7, 20, 6));
  dv_mpi_stats s4 = stats_now();
  assert_int_equal(s4.headers - s3.headers, 2);
  assert_int_equal(s4.eager - s3.eager, 0);
  assert_ok(pair_msg(f4, 7, 7, 20, 7)); /* and cached again */
  dv_mpi_stats s5 = stats_now();
  assert_int_equal(s5.eager - s4.eager, sender ? 1 : 0);
  /* a changed sender header that does not fit: both ranks fail in this call */
  assert_status(pair_msg(f4, 8, 7, 20, 8), DV_ERR_SHAPE_MISMATCH);
  assert_ok(pair_msg(f4, 7, 7, 20, 9)); /* nothing left in flight */
}

/* the receiver's array differs from the one the cache remembers: the
 * receiver fails at once, the sender at its next send to that rank (which
 * fails on both ranks), and the one after that is SYNC again and works */
static void t_mismatch_after_warm_cache(void **state) {
  (void)state;
  MPI_Barrier(MPI_COMM_WORLD); /* the previous test's messages are all matched */
  if (!eager_path() || (g_rank ^ 1) >= g_size) skip();
  const dv_dtype *f8 = dv_dtype_get(DV_FLOAT64), *i4 = dv_dtype_get(DV_INT32);
  int sender = g_rank % 2 == 0;
  assert_ok(pair_msg(f8, 6, 6, 22, 1));
  assert_ok(pair_msg(f8, 6, 6, 22, 2)); /* warm: eager */
  dv_mpi_stats s0 = stats_now();
  /* the receiver now has 7 elements: only it can know, at once */
  dv_status s = pair_msg(f8, 6, 7, 22, 3);
  if (sender)
    assert_ok(s);
  else {
    if (s != DV_ERR_SHAPE_MISMATCH)
      fail_msg("receiver: %s (%s)", dv_status_name(s), dv_last_error());
    assert_non_null(strstr(dv_last_error(), "shape mismatch"));
  }
  /* the notice is on its way before the receiver's call returned; the
   * barrier lets it arrive (Open MPI's shared memory keeps one order per pair) */
  MPI_Barrier(MPI_COMM_WORLD);
  s = pair_msg(f8, 6, 6, 22, 4);
  if (s != DV_ERR_SHAPE_MISMATCH)
    fail_msg("rank %d, the send after the rejection: %s (%s)", g_rank, dv_status_name(s),
             dv_last_error());
  if (sender)
    assert_non_null(strstr(dv_last_error(), "rejected an earlier message"));
  else
    assert_non_null(strstr(dv_last_error(), "its earlier message"));
  dv_mpi_stats s1 = stats_now();
  if (sender) assert_int_equal(s1.late_rejections - s0.late_rejections, 1);
  /* the cache entry is gone: SYNC, and it works */
  assert_ok(pair_msg(f8, 6, 6, 22, 5));
  dv_mpi_stats s2 = stats_now();
  assert_int_equal(s2.headers - s1.headers, 1);
  /* a dtype change on the receiver after a warm cache, the same way */
  assert_ok(pair_msg(f8, 6, 6, 22, 6)); /* eager */
  dv_array *a = vec(sender ? f8 : i4, 6, 7);
  s = sender ? dv_mpi_send(g_comm, a, g_rank ^ 1, 22, NULL)
             : dv_mpi_recv(g_comm, a, g_rank ^ 1, 22, NULL, NULL);
  assert_status(s, sender ? DV_OK : DV_ERR_DTYPE_MISMATCH);
  dv_array_release(a);
  MPI_Barrier(MPI_COMM_WORLD);
  assert_status(pair_msg(f8, 6, 6, 22, 8), DV_ERR_DTYPE_MISMATCH);
  if (sender) assert_non_null(strstr(dv_last_error(), "int32"));
  assert_ok(pair_msg(f8, 6, 6, 22, 9));
  /* an empty array (no data message) rejected after a warm cache: nothing to drain */
  assert_ok(pair_msg(f8, 0, 0, 23, 1));
  assert_ok(pair_msg(f8, 0, 0, 23, 1));
  assert_status(pair_msg(f8, 0, 1, 23, 1), sender ? DV_OK : DV_ERR_SHAPE_MISMATCH);
  MPI_Barrier(MPI_COMM_WORLD);
  assert_status(pair_msg(f8, 0, 0, 23, 1), DV_ERR_SHAPE_MISMATCH);
  assert_ok(pair_msg(f8, 0, 0, 23, 1));
}

/* a rejection the sender never learns from a later send: its
 * dv_mpi_comm_destroy reports it */
static void t_rejection_at_destroy(void **state) {
  (void)state;
  MPI_Barrier(MPI_COMM_WORLD); /* the previous test's messages are all matched */
  if (!eager_path()) skip();
  dv_mpi_comm *c = NULL;
  assert_ok(dv_mpi_comm_create(MPI_COMM_WORLD, 0, &c));
  int peer = g_rank ^ 1, sender = g_rank % 2 == 0;
  if (peer < g_size) {
    for (int k = 0; k < 3; k++) { /* the third: the receiver's array has another shape */
      dv_array *a = vec(dv_dtype_get(DV_INT16), sender || k < 2 ? 5 : 4, 1);
      dv_status s =
          sender ? dv_mpi_send(c, a, peer, 1, NULL) : dv_mpi_recv(c, a, peer, 1, NULL, NULL);
      assert_status(s, k == 2 && !sender ? DV_ERR_SHAPE_MISMATCH : DV_OK);
      dv_array_release(a);
    }
  }
  dv_status s = dv_mpi_comm_destroy(c);
  if (peer < g_size && sender) {
    if (s != DV_ERR_SHAPE_MISMATCH) fail_msg("destroy: %s", dv_status_name(s));
    assert_non_null(strstr(dv_last_error(), "dv_mpi_comm_destroy: rank"));
  } else {
    assert_ok(s);
  }
}

/* MPI_ANY_SOURCE and MPI_ANY_TAG with eager messages: every rank sends rank
 * 0 three messages of one header; the source and tag come back right */
static void t_eager_any_source(void **state) {
  (void)state;
  MPI_Barrier(MPI_COMM_WORLD); /* the previous test's messages are all matched */
  const dv_dtype *i8 = dv_dtype_get(DV_INT64);
  if (g_rank == 0) {
    int count[64] = {0};
    for (int k = 0; k < 3 * (g_size - 1); k++) {
      dv_array *a = vec(i8, 5, 0);
      MPI_Status st;
      int any = header_on(); /* without headers only a single chunk may use ANY */
      assert_ok(dv_mpi_recv(g_comm, a, any ? MPI_ANY_SOURCE : 1 + k % (g_size - 1),
                            any ? MPI_ANY_TAG : 50 + 1 + k % (g_size - 1), NULL, &st));
      int src = st.MPI_SOURCE;
      assert_true(src >= 1 && src < g_size);
      assert_int_equal(st.MPI_TAG, 50 + src);
      /* messages of one source arrive in order: its k-th carries 10 * k + src */
      expect_values(a, 10 * count[src] + src, 0, 5);
      count[src]++;
      dv_array_release(a);
    }
    for (int r = 1; r < g_size; r++) assert_int_equal(count[r], 3);
  } else {
    dv_mpi_stats s0 = stats_now();
    for (int k = 0; k < 3; k++) {
      dv_array *a = vec(i8, 5, 10 * k + g_rank);
      assert_ok(dv_mpi_send(g_comm, a, 0, 50 + g_rank, NULL));
      dv_array_release(a);
    }
    dv_mpi_stats s1 = stats_now();
    if (eager_path()) assert_true(s1.eager - s0.eager >= 2);
  }
}

/* order: an eager send does not overtake an older SYNC send to the same
 * (peer, tag), and the receiver posts data receives in header order even
 * when a later receive is tested first, or when MPI reports the later
 * header complete before the older (rounds: that happens now and then, at
 * load; it once made the later data receive match the older message) */
static void t_eager_order(void **state) {
  (void)state;
  MPI_Barrier(MPI_COMM_WORLD); /* the previous test's messages are all matched */
  int peer = g_rank ^ 1, sender = g_rank % 2 == 0;
  if (peer >= g_size || !header_on()) skip();
  const dv_dtype *f8 = dv_dtype_get(DV_FLOAT64);
  dv_mpi_request *req[2] = {NULL, NULL};
  dv_array *a, *b;
  for (int round = 0; round < 8; round++) {
    assert_ok(pair_msg(f8, 4, 4, 60, 1)); /* (4,) is cached for tag 60 */
    a = vec(f8, 5, sender ? 2 + round : 99);
    b = vec(f8, 4, sender ? 3 + round : 99);
    if (sender) {
      assert_ok(dv_mpi_isend(g_comm, a, peer, 60, NULL, &req[0])); /* (5,): SYNC */
      assert_ok(dv_mpi_isend(g_comm, b, peer, 60, NULL, &req[1])); /* (4,): must wait for it */
      assert_ok(dv_mpi_wait(&req[1], NULL)); /* the later one alone: it moves the older on */
      assert_ok(dv_mpi_wait(&req[0], NULL));
    } else {
      assert_ok(dv_mpi_irecv(g_comm, a, peer, 60, NULL, &req[0]));
      assert_ok(dv_mpi_irecv(g_comm, b, peer, 60, NULL, &req[1]));
      assert_ok(dv_mpi_waitall(2, req));
      expect_values(a, 2 + round, 0, 5);
      expect_values(b, 3 + round, 0, 4);
    }
    dv_array_release(a);
    dv_array_release(b);
  }
  /* two eager messages to receives with MPI_ANY_SOURCE; the later tested first */
  a = vec(f8, 4, sender ? 4 : 99);
  b = vec(f8, 4, sender ? 5 : 99);
  if (sender) {
    assert_ok(dv_mpi_send(g_comm, a, peer, 60, NULL));
    assert_ok(dv_mpi_send(g_comm, b, peer, 60, NULL));
  } else {
    assert_ok(dv_mpi_irecv(g_comm, a, MPI_ANY_SOURCE, 60, NULL, &req[0]));
    assert_ok(dv_mpi_irecv(g_comm, b, MPI_ANY_SOURCE, 60, NULL, &req[1]));
    assert_ok(dv_mpi_wait(&req[1], NULL));
    assert_ok(dv_mpi_wait(&req[0], NULL));
    expect_values(a, 4, 0, 4);
    expect_values(b, 5, 0, 4);
  }
  dv_array_release(a);
  dv_array_release(b);
}

/* strided views in many chunks: one MPI datatype per chunk on host memory
 * (rows cut in the middle: heads, whole rows, tails) */
static void t_chunked_views(void **state) {
  (void)state;
  MPI_Barrier(MPI_COMM_WORLD); /* the previous test's messages are all matched */
  int peer = g_rank ^ 1;
  if (peer >= g_size) skip();
  size_t chunk = 5 * 8; /* 5 float64: chunks end inside rows of 7 */
  assert_ok(dv_mpi_comm_set_chunk(g_comm, chunk));
  const dv_dtype *f8 = dv_dtype_get(DV_FLOAT64);
  for (int layout = 0; layout < L_COUNT; layout++) {
    dv_array *out = make(f8, L_COLUMNS, 6, 7), *in = make(f8, layout, 6, 7);
    fill(out, g_rank, 0);
    dv_mpi_request *req[2] = {NULL, NULL};
    assert_ok(dv_mpi_irecv(g_comm, in, peer, 70 + layout, NULL, &req[0]));
    assert_ok(dv_mpi_isend(g_comm, out, peer, 70 + layout, NULL, &req[1]));
    assert_ok(dv_mpi_waitall(2, req));
    expect_values(in, peer, 0, 42);
    dv_array_release(out);
    dv_array_release(in);
  }
  /* 3-D: a strided view of a (4, 6, 6) array, chunks across two dimensions */
  dv_array *base = NULL, *v = NULL, *in = NULL;
  assert_ok(dv_device_array(g_ctx, 3, (int64_t[]){4, 6, 6}, f8, NULL, 'C', NULL, &base));
  dv_index idx[3] = {DV_ALL, DV_SLICE(DV_NONE, DV_NONE, 2), DV_SLICE(1, DV_NONE, 2)};
  assert_ok(dv_array_slice(base, 3, idx, &v)); /* (4, 3, 3) */
  assert_ok(dv_device_array(g_ctx, 3, (int64_t[]){4, 3, 3}, f8, NULL, 'F', NULL, &in));
  fill(v, g_rank, 0);
  dv_mpi_request *req[2] = {NULL, NULL};
  assert_ok(dv_mpi_irecv(g_comm, in, peer, 79, NULL, &req[0]));
  assert_ok(dv_mpi_isend(g_comm, v, peer, 79, NULL, &req[1]));
  assert_ok(dv_mpi_waitall(2, req));
  expect_values(in, peer, 0, 36);
  dv_array_release(in);
  dv_array_release(v);
  dv_array_release(base);
  assert_ok(dv_mpi_comm_set_chunk(g_comm, !strcmp(g_mode, "noheader") ||
                                                  !strcmp(g_backend, "opencl") ||
                                                  !strcmp(g_mode, "staged")
                                              ? 40
                                              : (size_t)1 << 20));
}

/* ---- collectives ------------------------------------------------------------------ */

static void t_bcast(void **state) {
  (void)state;
  for (int id = 0; id < DV_RECORD; id++) {
    const dv_dtype *dt = dv_dtype_get((dv_type_id)id);
    int root = id % g_size;
    dv_array *a = make(dt, (id + g_rank) % L_COUNT, 4, 3);
    if (g_rank == root)
      fill(a, root, 0);
    else
      assert_ok(dv_array_memset(a, 0, NULL));
    assert_ok(dv_mpi_bcast(g_comm, a, root, NULL));
    expect_values(a, root, 0, 12);
    dv_array_release(a);
  }
}

/* reference of op over the ranks for element i */
static void reference(dv_type_id id, dv_mpi_op op, int64_t i, double *re, double *im) {
  int prod = op == DV_MPI_PROD;
  value(id, 0, i, prod, re, im);
  for (int r = 1; r < g_size; r++) {
    double xr, xi;
    value(id, r, i, prod, &xr, &xi);
    if (id == DV_BOOL) {
      int a = *re != 0, b = xr != 0;
      *re = (op == DV_MPI_SUM || op == DV_MPI_MAX) ? (a || b) : (a && b);
    } else if (op == DV_MPI_SUM) {
      *re += xr, *im += xi;
    } else if (op == DV_MPI_PROD) {
      double complex z = (*re + *im * I) * (xr + xi * I);
      *re = creal(z), *im = cimag(z);
    } else if (op == DV_MPI_MIN) {
      *re = xr < *re ? xr : *re;
    } else {
      *re = xr > *re ? xr : *re;
    }
  }
}

static void t_allreduce(void **state) {
  (void)state;
  static const char *const names[] = {"sum", "prod", "min", "max"};
  for (int id = 0; id < DV_RECORD; id++) {
    for (int op = DV_MPI_SUM; op <= DV_MPI_MAX; op++) {
      const dv_dtype *dt = dv_dtype_get((dv_type_id)id);
      int layout = (id + op) % L_COUNT;
      dv_array *recv = make(dt, layout, 2, 5), *send = NULL;
      int in_place = (id + op) % 2;
      if (in_place)
        fill(recv, g_rank, op == DV_MPI_PROD);
      else {
        send = make(dt, (layout + 1) % L_COUNT, 2, 5);
        fill(send, g_rank, op == DV_MPI_PROD);
      }
      dv_status s = dv_mpi_allreduce(g_comm, send, recv, (dv_mpi_op)op, NULL);
      if (is_complex((dv_type_id)id) && (op == DV_MPI_MIN || op == DV_MPI_MAX)) {
        if (s != DV_ERR_NOT_SUPPORTED) fail_msg("complex %s: %s", names[op], dv_status_name(s));
      } else {
        if (s != DV_OK)
          fail_msg("rank %d: allreduce %s %s: %s", g_rank, dv_dtype_name(dt), names[op],
                   dv_last_error());
        void *p = NULL;
        dv_array *h = host_copy(recv, &p);
        for (int64_t i = 0; i < 10; i++) {
          double re, im, wre, wim;
          load((dv_type_id)id, (char *)p + (size_t)i * dv_dtype_itemsize(dt), &re, &im);
          reference((dv_type_id)id, (dv_mpi_op)op, i, &wre, &wim);
          if (re != wre || im != wim)
            fail_msg("allreduce %s %s (layout %d%s): element %lld is (%g, %g), expected (%g, %g)",
                     dv_dtype_name(dt), names[op], layout, in_place ? ", in place" : "",
                     (long long)i, re, im, wre, wim);
        }
        dv_array_release(h);
      }
      dv_array_release(send);
      dv_array_release(recv);
    }
  }
}

static void t_gather(void **state) {
  (void)state;
  for (int all = 0; all < 2; all++) {
    for (int id = 0; id < DV_RECORD; id++) {
      const dv_dtype *dt = dv_dtype_get((dv_type_id)id);
      int root = (id + 1) % g_size;
      dv_array *send = make(dt, (id + g_rank) % L_COUNT, 2, 3), *recv = NULL;
      fill(send, g_rank, 0);
      if (all || g_rank == root) recv = make(dt, (id + all) % L_COUNT, 2 * g_size, 3);
      if (all)
        assert_ok(dv_mpi_allgather(g_comm, send, recv, NULL));
      else
        assert_ok(dv_mpi_gather(g_comm, send, recv, root, NULL));
      if (recv)
        for (int r = 0; r < g_size; r++) expect_values(recv, r, 6 * r, 6);
      dv_array_release(send);
      dv_array_release(recv);
    }
  }
}

/* ---- errors: every rank reports, nothing hangs, the next call works ------------ */

static void t_mismatch(void **state) {
  (void)state;
  if (!header_on()) skip();
  const dv_dtype *f8 = dv_dtype_get(DV_FLOAT64), *i4 = dv_dtype_get(DV_INT32);
  int peer = g_rank ^ 1;
  if (peer < g_size) {
    /* shape: the sender has 4 elements, the receiver 5 */
    int64_t n = g_rank % 2 ? 5 : 4;
    dv_array *a = NULL;
    assert_ok(dv_device_array(g_ctx, 1, &n, f8, NULL, 'C', NULL, &a));
    if (g_rank % 2 == 0)
      assert_status(dv_mpi_send(g_comm, a, peer, 3, NULL), DV_ERR_SHAPE_MISMATCH);
    else
      assert_status(dv_mpi_recv(g_comm, a, peer, 3, NULL, NULL), DV_ERR_SHAPE_MISMATCH);
    dv_array_release(a);
    /* dtype */
    n = 4;
    assert_ok(dv_device_array(g_ctx, 1, &n, g_rank % 2 ? i4 : f8, NULL, 'C', NULL, &a));
    dv_mpi_request *r = NULL;
    if (g_rank % 2 == 0)
      assert_ok(dv_mpi_isend(g_comm, a, peer, 4, NULL, &r));
    else
      assert_ok(dv_mpi_irecv(g_comm, a, peer, 4, NULL, &r));
    assert_status(dv_mpi_wait(&r, NULL), DV_ERR_DTYPE_MISMATCH);
    assert_true(strstr(dv_last_error(), "int32") && strstr(dv_last_error(), "float64"));
    dv_array_release(a);
    /* a receiver's own bad argument (a zero-stride view) fails the sender too */
    assert_ok(dv_device_array(g_ctx, 1, &n, f8, g_rank % 2 ? (int64_t[]){0} : NULL, 'C', NULL, &a));
    if (g_rank % 2 == 0)
      assert_status(dv_mpi_send(g_comm, a, peer, 5, NULL), DV_ERR_INVALID_ARGUMENT);
    else
      assert_status(dv_mpi_recv(g_comm, a, peer, 5, NULL, NULL), DV_ERR_INVALID_ARGUMENT);
    dv_array_release(a);
  }
  /* a local failure while preparing (packing a negative-stride view needs a
   * new array; the library's next host allocation fails on request) reaches
   * the peer through the header exchange, on either side */
  for (int failing = 0; failing < 2 && peer < g_size; failing++) {
    const dv_dtype *i2 = dv_dtype_get(DV_INT16);
    dv_array *v = make(i2, L_REVERSED, 3, 4);
    int me_failing = g_rank % 2 == failing;
    int injected = me_failing && dv_fault_inject(NULL, DV_FAULT_HOST_ALLOC, 1) == DV_OK;
    int any = 0;
    MPI_Allreduce(&injected, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (!any) { /* no fault injection in this build */
      dv_array_release(v);
      break;
    }
    dv_status s = g_rank % 2 == 0 ? dv_mpi_send(g_comm, v, peer, 6, NULL)
                                  : dv_mpi_recv(g_comm, v, peer, 6, NULL, NULL);
    if (s != DV_ERR_HOST_OUT_OF_MEMORY)
      fail_msg("rank %d (%s side failing): %s (%s), expected DV_ERR_HOST_OUT_OF_MEMORY", g_rank,
               failing ? "receiver" : "sender", dv_status_name(s), dv_last_error());
    dv_fault_inject(NULL, DV_FAULT_HOST_ALLOC, 0);
    dv_array_release(v);
  }
  /* collectives: rank size-1 has another shape / dtype; rank 0 a NULL recv */
  int last = g_rank == g_size - 1;
  int64_t shape[2] = {3, last ? 4 : 5};
  dv_array *a = NULL;
  assert_ok(dv_device_array(g_ctx, 2, shape, f8, NULL, 'C', NULL, &a));
  assert_status(dv_mpi_bcast(g_comm, a, 0, NULL), DV_ERR_SHAPE_MISMATCH);
  assert_status(dv_mpi_allreduce(g_comm, NULL, a, DV_MPI_SUM, NULL), DV_ERR_SHAPE_MISMATCH);
  dv_array_release(a);
  shape[1] = 5;
  assert_ok(dv_device_array(g_ctx, 2, shape, last ? i4 : f8, NULL, 'C', NULL, &a));
  assert_status(dv_mpi_allreduce(g_comm, NULL, a, DV_MPI_MAX, NULL), DV_ERR_DTYPE_MISMATCH);
  dv_array_release(a);
  assert_ok(dv_device_array(g_ctx, 2, shape, f8, NULL, 'C', NULL, &a));
  assert_status(dv_mpi_allreduce(g_comm, NULL, g_rank == 0 ? NULL : a, DV_MPI_SUM, NULL),
                DV_ERR_NULL_ARGUMENT);
  assert_status(dv_mpi_bcast(g_comm, a, g_rank == 1 ? 0 : 1, NULL), DV_ERR_INVALID_ARGUMENT);
  assert_status(dv_mpi_allgather(g_comm, a, a, NULL), DV_ERR_SHAPE_MISMATCH);
  /* a rank whose preparation fails (its next library allocation) fails the
   * collective on every rank */
  {
    dv_array *v = make(dv_dtype_get(DV_FLOAT32), L_REVERSED, 3, 4), *g = NULL;
    if (g_rank == 1 % g_size) assert_ok(dv_fault_inject(NULL, DV_FAULT_HOST_ALLOC, 1));
    assert_status(dv_mpi_allreduce(g_comm, NULL, v, DV_MPI_MAX, NULL), DV_ERR_HOST_OUT_OF_MEMORY);
    if (g_rank == 1 % g_size) assert_false(dv_fault_pending(NULL, DV_FAULT_HOST_ALLOC));
    if (g_rank == 0)
      assert_ok(dv_device_array(g_ctx, 1, (int64_t[]){12 * g_size}, dv_dtype_get(DV_FLOAT32), NULL,
                                'C', NULL, &g));
    if (g_rank == 0) assert_ok(dv_fault_inject(NULL, DV_FAULT_HOST_ALLOC, 1));
    assert_status(dv_mpi_gather(g_comm, v, g, 0, NULL), DV_ERR_HOST_OUT_OF_MEMORY);
    dv_fault_inject(NULL, DV_FAULT_HOST_ALLOC, 0);
    dv_array_release(g);
    dv_array_release(v);
  }
  /* nothing is left in flight: the next broadcast is right */
  if (g_rank == 2 % g_size) fill(a, g_rank, 0);
  assert_ok(dv_mpi_bcast(g_comm, a, 2 % g_size, NULL));
  expect_values(a, 2 % g_size, 0, 15);
  dv_array_release(a);
  dv_mpi_stats st = {.size = sizeof st};
  assert_ok(dv_mpi_stats_get(g_comm, &st));
  assert_true(st.mismatches >= 6);
}

/* dv_mpi_stats_get writes the caller's size: a version-1 struct (size 0, as a program
 * built before version 2 zeroed it, or its own size) gets version 1's fields and not a byte
 * more; the current size gets everything. */
static void t_stats_sizes(void **state) {
  (void)state;
  const size_t v1 = offsetof(dv_mpi_stats, eager);
  unsigned char buf[sizeof(dv_mpi_stats) + 16];
  for (int k = 0; k < 2; k++) {
    memset(buf, 0xAB, sizeof buf);
    uint32_t sz = k ? (uint32_t)v1 : 0;
    memcpy(buf + offsetof(dv_mpi_stats, size), &sz, sizeof sz);
    assert_ok(dv_mpi_stats_get(g_comm, (dv_mpi_stats *)(void *)buf));
    dv_mpi_stats got;
    memcpy(&got, buf, sizeof got);
    assert_int_equal(got.version, 1);
    assert_int_equal(got.size, v1);
    for (size_t i = v1; i < sizeof buf; i++)
      if (buf[i] != 0xAB) fail_msg("byte %zu past a version-1 struct was written", i);
  }
  dv_mpi_stats st = {.size = sizeof st};
  assert_ok(dv_mpi_stats_get(g_comm, &st));
  assert_int_equal(st.version, DV_MPI_STATS_VERSION);
  assert_int_equal(st.size, sizeof st);
  assert_status(dv_mpi_stats_get(g_comm, NULL), DV_ERR_NULL_ARGUMENT);
}

static void t_errors(void **state) {
  (void)state;
  assert_status(dv_mpi_status_from_mpi(MPI_ERR_TRUNCATE, "test"), DV_ERR_SHAPE_MISMATCH);
  assert_true(strncmp(dv_last_error(), "test: ", 6) == 0 && strlen(dv_last_error()) > 8);
  assert_status(dv_mpi_status_from_mpi(MPI_ERR_RANK, "x"), DV_ERR_INVALID_ARGUMENT);
  assert_status(dv_mpi_status_from_mpi(MPI_ERR_INTERN, "x"), DV_ERR_DRIVER);
  int64_t n = 3;
  dv_array *a = NULL;
  assert_ok(dv_device_array(g_ctx, 1, &n, dv_dtype_get(DV_INT8), NULL, 'C', NULL, &a));
  dv_mpi_request *r = (dv_mpi_request *)&n;
  /* each message names the function the caller called */
  assert_status(dv_mpi_isend(g_comm, a, g_size + 3, 0, NULL, &r), DV_ERR_INVALID_ARGUMENT);
  assert_null(r);
  assert_true(strncmp(dv_last_error(), "dv_mpi_isend: ", 14) == 0);
  assert_status(dv_mpi_irecv(g_comm, a, g_size + 3, 0, NULL, &r), DV_ERR_INVALID_ARGUMENT);
  assert_true(strncmp(dv_last_error(), "dv_mpi_irecv: ", 14) == 0);
  assert_status(dv_mpi_send(g_comm, a, 0, -5, NULL), DV_ERR_INVALID_ARGUMENT);
  if (strncmp(dv_last_error(), "dv_mpi_send: ", 13) != 0)
    fail_msg("dv_mpi_send says: %s", dv_last_error());
  assert_status(dv_mpi_send(NULL, a, 0, 0, NULL), DV_ERR_NULL_ARGUMENT);
  assert_true(strncmp(dv_last_error(), "dv_mpi_send: ", 13) == 0);
  assert_status(dv_mpi_recv(g_comm, a, g_size + 3, 0, NULL, NULL), DV_ERR_INVALID_ARGUMENT);
  if (strncmp(dv_last_error(), "dv_mpi_recv: ", 13) != 0)
    fail_msg("dv_mpi_recv says: %s", dv_last_error());
  assert_status(dv_mpi_comm_set_chunk(g_comm, 0), DV_ERR_INVALID_ARGUMENT);
  assert_ok(dv_mpi_send(g_comm, a, MPI_PROC_NULL, 0, NULL)); /* MPI's null peer: a no-op */
  assert_status(dv_mpi_comm_create(MPI_COMM_NULL, 0, &(dv_mpi_comm *){NULL}), DV_ERR_NULL_ARGUMENT);
  assert_int_equal(dv_mpi_path_of(NULL, a), DV_MPI_PATH_COUNT);
  dv_array_release(a);
}

/* messages to oneself, the staged path without pipelining, BUSY while pending */
static void t_self_and_one_shot(void **state) {
  (void)state;
  unsigned flags = dv_mpi_comm_flags(g_comm);
  assert_ok(dv_mpi_comm_set_flags(g_comm, flags | DV_MPI_FORCE_STAGED | DV_MPI_NO_PIPELINE));
  const dv_dtype *dt = dv_dtype_get(DV_INT32);
  dv_array *out = make(dt, L_COLUMNS, 4, 6), *in = make(dt, L_REVERSED, 4, 6);
  fill(out, g_rank, 0);
  dv_mpi_request *req[2] = {NULL, NULL};
  assert_ok(dv_mpi_isend(g_comm, out, g_rank, 77, NULL, &req[0]));
  assert_ok(dv_mpi_irecv(g_comm, in, g_rank, 77, NULL, &req[1]));
  assert_status(dv_mpi_comm_destroy(g_comm), DV_ERR_BUSY);
  assert_ok(dv_mpi_waitall(2, req));
  expect_values(in, g_rank, 0, 24);
  fill(in, g_rank, 0);
  assert_ok(dv_mpi_allreduce(g_comm, NULL, in, DV_MPI_SUM, NULL));
  void *p = NULL;
  dv_array *h = host_copy(in, &p);
  for (int64_t i = 0; i < 24; i++) {
    double re, im, wre, wim;
    load(DV_INT32, (char *)p + i * 4, &re, &im);
    reference(DV_INT32, DV_MPI_SUM, i, &wre, &wim);
    if (re != wre)
      fail_msg("one-shot allreduce: element %lld is %g, expected %g", (long long)i, re, wre);
  }
  dv_array_release(h);
  dv_array_release(out);
  dv_array_release(in);
  assert_ok(dv_mpi_comm_set_flags(g_comm, flags));
}

static void t_stats(void **state) {
  (void)state;
  dv_mpi_stats st = {.size = sizeof st};
  assert_ok(dv_mpi_stats_get(g_comm, &st));
  assert_int_equal(st.version, DV_MPI_STATS_VERSION);
  assert_int_equal(st.size, sizeof st);
  int staged = !strcmp(g_backend, "opencl") || !strcmp(g_mode, "staged");
  assert_int_equal(st.calls[DV_MPI_PATH_DIRECT], 0);
  if (staged) {
    assert_true(st.calls[DV_MPI_PATH_STAGED] > 50);
    assert_true(st.chunks > st.calls[DV_MPI_PATH_STAGED]); /* several chunks per array */
    assert_true(st.device_packs > 0);
  } else {
    assert_true(st.calls[DV_MPI_PATH_HOST] > 50);
    assert_int_equal(st.calls[DV_MPI_PATH_STAGED], 0);
    if (!strcmp(g_mode, "noheader")) {
      assert_int_equal(st.derived_types, 0);
      assert_true(st.host_packs > 0);
    } else {
      assert_true(st.derived_types > 0);
    }
  }
  assert_true(header_on() ? st.headers > 0 : st.headers == 0);
  /* the pinned host array always goes straight to MPI, unless forced */
  int64_t n = 2;
  dv_array *p = NULL;
  assert_ok(dv_pinned_array(g_ctx, 1, &n, dv_dtype_get(DV_INT8), NULL, 'C', &p));
  assert_int_equal(dv_mpi_path_of(g_comm, p),
                   !strcmp(g_mode, "staged") ? DV_MPI_PATH_STAGED : DV_MPI_PATH_HOST);
  dv_array_release(p);
}

int main(int argc, char **argv) {
  if (argc > 1) g_backend = argv[1];
  if (argc > 2) g_mode = argv[2];
  dv_config *cfg = NULL;
  dv_status rc = dv_config_create(&cfg);
  if (!rc) rc = dv_config_set(cfg, "backend", g_backend);
  if (!rc) rc = dv_context_create(cfg, &g_ctx);
  dv_config_destroy(cfg);
  if (rc) {
    printf("SKIPPED: mpi on backend %s: %s (%s)\n", g_backend, dv_last_error(), dv_status_name(rc));
    return 77;
  }
  MPI_Init(&argc, &argv);
  /* staged: set by the environment (DV_MPI_STAGED=1, DV_MPI_CHUNK=40 from
   * tests/mpi/CMakeLists.txt), which checks the options' parsing too */
  unsigned flags = 0;
  if (!strcmp(g_mode, "noheader")) flags = DV_MPI_NO_HEADER | DV_MPI_FORCE_PACK;
  rc = dv_mpi_comm_create(MPI_COMM_WORLD, flags, &g_comm);
  if (rc) {
    fprintf(stderr, "dv_mpi_comm_create: %s\n", dv_last_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  if (!strcmp(g_mode, "staged") && !(dv_mpi_comm_flags(g_comm) & DV_MPI_FORCE_STAGED)) {
    fprintf(stderr, "test_mpi staged: DV_MPI_STAGED=1 did not set DV_MPI_FORCE_STAGED\n");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  /* small chunks: the staged arrays here cross in several pipelined chunks */
  if (!strcmp(g_mode, "noheader") || !strcmp(g_backend, "opencl"))
    dv_mpi_comm_set_chunk(g_comm, 40);
  g_rank = dv_mpi_comm_rank(g_comm);
  g_size = dv_mpi_comm_size(g_comm);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(t_p2p_ring),
      cmocka_unit_test(t_p2p_blocking_strided),
      cmocka_unit_test(t_p2p_any_source_and_records),
      cmocka_unit_test(t_cache_hit_and_invalidation),
      cmocka_unit_test(t_mismatch_after_warm_cache),
      cmocka_unit_test(t_rejection_at_destroy),
      cmocka_unit_test(t_eager_any_source),
      cmocka_unit_test(t_eager_order),
      cmocka_unit_test(t_chunked_views),
      cmocka_unit_test(t_bcast),
      cmocka_unit_test(t_allreduce),
      cmocka_unit_test(t_gather),
      cmocka_unit_test(t_mismatch),
      cmocka_unit_test(t_errors), cmocka_unit_test(t_stats_sizes),
      cmocka_unit_test(t_stats),
      cmocka_unit_test(t_self_and_one_shot),
  };
  char name[96];
  snprintf(name, sizeof name, "mpi[%s,%s,rank %d]", g_backend, g_mode, g_rank);
  int failed = _cmocka_run_group_tests(name, tests, sizeof tests / sizeof tests[0], NULL, NULL);
  int any = 0;
  MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  rc = dv_mpi_comm_destroy(g_comm);
  if (rc) fprintf(stderr, "dv_mpi_comm_destroy: %s\n", dv_last_error()), any = 1;
  rc = dv_context_check_memory(g_ctx);
  if (!rc) rc = dv_context_destroy(g_ctx);
  if (rc) fprintf(stderr, "context: %s\n", dv_last_error()), any = 1;
  MPI_Finalize();
  return any ? 1 : 0;
}
