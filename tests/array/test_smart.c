#define _DEFAULT_SOURCE
/*
 * Smart arrays and automatic transfers at launch (issue 12), on every
 * backend that runs kernels.  The transfer counters of dv_stats (version 3)
 * are the oracle for what moved: each test takes them before and after and
 * asserts the exact number of host-to-device and device-to-host copies,
 * and checks the values that arrive.  Kernels: tests/kernels/smart.dvk.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <unistd.h>

#include "common.h"

#ifndef DV_TEST_KERNELS_DIR
#error "DV_TEST_KERNELS_DIR must name tests/kernels"
#endif

static char g_cache_dir[256];

/* False on a driver test double (tests/backends/cuda/cudadouble, tests/backends/hip/hipdouble), which loads and
 * checks kernels but does not run them: there the transfer counts are still
 * asserted, the values a kernel computed are not (main says so). */
static bool g_kernels_run = true;
#define assert_kernel_value(c)            \
  do {                                    \
    if (g_kernels_run) assert_true(c);    \
  } while (0)

/* ---- helpers ---------------------------------------------------------------------- */

typedef struct moves {
  uint64_t h2d, d2h, d2d;
} moves;

static moves count_now(void) {
  dv_stats st = {.size = sizeof st};
  assert_ok(dv_context_stats(g_ctx, &st));
  assert_int_equal(st.version, DV_STATS_VERSION);
  return (moves){st.transfers_h2d, st.transfers_d2h, st.transfers_d2d};
}

/* The transfers since `before` are exactly h2d up and d2h down (none device to device). */
#define assert_moves(before, up, down)                                          \
  do {                                                                          \
    moves now_ = count_now();                                                   \
    assert_int_equal(now_.h2d - (before).h2d, (up));                            \
    assert_int_equal(now_.d2h - (before).d2h, (down));                          \
    assert_int_equal(now_.d2d - (before).d2d, 0);                               \
  } while (0)

static dv_module *build_smart(void) {
  char path[512];
  snprintf(path, sizeof path, "%s/smart.dvk", DV_TEST_KERNELS_DIR);
  char *src = read_text_file(path);
  dv_program *p = NULL;
  assert_ok(dv_program_create(g_ctx, "smart.dvk", src, &p));
  free(src);
  dv_module *m = NULL;
  dv_status rc = dv_program_build(p, 0, &m);
  if (rc == DV_ERR_COMPILE) fprintf(stderr, "%s\n", dv_program_log(p));
  dv_program_destroy(p);
  assert_ok(rc);
  return m;
}

static dv_kernel *kernel(dv_module *m, const char *name) {
  dv_kernel *k = NULL;
  assert_ok(dv_module_kernel(m, name, &k));
  return k;
}

static dv_launch_config cfg1(int64_t n, dv_stream *s) {
  dv_launch_config c = {{(uint32_t)((n + 63) / 64), 1, 1}, {64, 1, 1}, 0, s};
  return c;
}

static dv_array *wrap(float *data, int64_t n) {
  dv_array *h = NULL;
  assert_ok(dv_host_array_wrap(g_ctx, data, 1, &n, dv_dtype_get(DV_FLOAT32), NULL, &h));
  return h;
}

static dv_array *wrap_ctx(dv_context *c, float *data, int64_t n) {
  dv_array *h = NULL;
  assert_ok(dv_host_array_wrap(c, data, 1, &n, dv_dtype_get(DV_FLOAT32), NULL, &h));
  return h;
}

static float *host_data(dv_array *a) {
  void *p = NULL;
  assert_ok(dv_array_host_data(a, &p));
  return p;
}

/* ---- host arrays as launch arguments ------------------------------------------------ */

/* The conservative default copies both ways; `in` is never copied back;
 * `out` is never copied in; pinned memory is treated like pageable; mapped
 * memory is not copied at all. */
static void test_host_argument_directions(void **state) {
  (void)state;
  enum { N = 300 };
  dv_module *m = build_smart();
  float x[N], y[N];
  for (int i = 0; i < N; i++) x[i] = (float)i, y[i] = -1.0f;
  dv_stats st = {.size = sizeof st};
  assert_ok(dv_context_stats(g_ctx, &st));
  uint64_t arrays0 = st.arrays.current;
  dv_array *hx = wrap(x, N), *hy = wrap(y, N);
  dv_launch_config c = cfg1(N, NULL);

  /* default: in and out */
  moves b = count_now();
  dv_arg a1[] = {DV_ARG_ARRAY(hx), DV_ARG_I32(N)};
  assert_ok(dv_kernel_launch(kernel(m, "incr"), &c, 2, a1));
  assert_moves(b, 1, 1);
  for (int i = 0; i < N; i++) assert_kernel_value(x[i] == (float)i + 1.0f);

  /* explicit inout: the same */
  b = count_now();
  dv_arg a2[] = {DV_ARG_ARRAY_INOUT(hx), DV_ARG_I32(N)};
  assert_ok(dv_kernel_launch(kernel(m, "incr"), &c, 2, a2));
  assert_moves(b, 1, 1);
  for (int i = 0; i < N; i++) assert_kernel_value(x[i] == (float)i + 2.0f);

  /* in: copied in, never back (the kernel's write to its copy is dropped) */
  b = count_now();
  dv_arg a3[] = {DV_ARG_ARRAY_IN(hx), DV_ARG_I32(N)};
  assert_ok(dv_kernel_launch(kernel(m, "incr"), &c, 2, a3));
  assert_moves(b, 1, 0);
  for (int i = 0; i < N; i++) assert_kernel_value(x[i] == (float)i + 2.0f);

  /* in + out: x up, y down, nothing else */
  b = count_now();
  dv_arg a4[] = {DV_ARG_ARRAY_IN(hx), DV_ARG_ARRAY_OUT(hy), DV_ARG_F32(3.0f), DV_ARG_I32(N)};
  assert_ok(dv_kernel_launch(kernel(m, "scale"), &c, 4, a4));
  assert_moves(b, 1, 1);
  for (int i = 0; i < N; i++) assert_kernel_value(y[i] == 3.0f * ((float)i + 2.0f));

  /* out alone: never copied in */
  b = count_now();
  dv_arg a5[] = {DV_ARG_ARRAY_OUT(hy), DV_ARG_F32(7.5f), DV_ARG_I32(N)};
  assert_ok(dv_kernel_launch(kernel(m, "fill"), &c, 3, a5));
  assert_moves(b, 0, 1);
  for (int i = 0; i < N; i++) assert_kernel_value(y[i] == 7.5f);

  /* pinned host memory: copied like pageable memory */
  int64_t n = N;
  dv_array *p;
  assert_ok(dv_pinned_array(g_ctx, 1, &n, dv_dtype_get(DV_FLOAT32), NULL, 'C', &p));
  float *pd = host_data(p);
  for (int i = 0; i < N; i++) pd[i] = (float)(2 * i);
  b = count_now();
  dv_arg a6[] = {DV_ARG_ARRAY(p), DV_ARG_I32(N)};
  assert_ok(dv_kernel_launch(kernel(m, "incr"), &c, 2, a6));
  assert_moves(b, 1, 1);
  for (int i = 0; i < N; i++) assert_kernel_value(pd[i] == (float)(2 * i) + 1.0f);
  dv_array_release(p);

  /* registered (pinned in place) memory: copied like pageable memory */
  dv_status reg = dv_array_register(hx);
  if (reg != DV_ERR_NOT_SUPPORTED) {
    assert_ok(reg);
    b = count_now();
    assert_ok(dv_kernel_launch(kernel(m, "incr"), &c, 2, a1));
    assert_moves(b, 1, 1);
    for (int i = 0; i < N; i++) assert_kernel_value(x[i] == (float)i + 3.0f);
    assert_ok(dv_array_deregister(hx));
  }

  /* mapped memory: the device addresses it; nothing is copied */
  dv_array *mp = NULL;
  dv_status rc = dv_mapped_array(g_ctx, 1, &n, dv_dtype_get(DV_FLOAT32), NULL, 'C', 0, &mp);
  if (rc != DV_ERR_NOT_SUPPORTED) {
    assert_ok(rc);
    float *md = host_data(mp);
    for (int i = 0; i < N; i++) md[i] = (float)(3 * i);
    b = count_now();
    dv_arg a7[] = {DV_ARG_ARRAY(mp), DV_ARG_I32(N)};
    assert_ok(dv_kernel_launch(kernel(m, "incr"), &c, 2, a7));
    assert_moves(b, 0, 0);
    for (int i = 0; i < N; i++) assert_kernel_value(md[i] == (float)(3 * i) + 1.0f);
    dv_array_release(mp);
  }
  /* the temporaries went back: no array is left */
  dv_array_release(hx);
  dv_array_release(hy);
  assert_ok(dv_context_flush_deallocs(g_ctx));
  assert_ok(dv_context_stats(g_ctx, &st));
  assert_int_equal(st.arrays.current, arrays0);
  dv_module_release(m);
}

/* Host arguments of any layout: a strided 2-D slice, a negative-stride
 * view, an F-order array, through a DV_VIEW kernel; elements outside the
 * view are untouched. */
static void test_host_argument_layouts(void **state) {
  (void)state;
  dv_module *m = build_smart();
  dv_kernel *k2 = kernel(m, "view2"), *k1 = kernel(m, "view1");
  enum { R = 6, C = 10 };
  float base[R * C], want[R * C];
  for (int i = 0; i < R * C; i++) base[i] = want[i] = (float)i;
  int64_t shape[2] = {R, C};
  dv_array *full;
  assert_ok(dv_host_array_wrap(g_ctx, base, 2, shape, dv_dtype_get(DV_FLOAT32), NULL, &full));
  /* every other column, rows reversed: strides (-40, 8) */
  dv_index idx[2] = {DV_SLICE(DV_NONE, DV_NONE, -1), DV_SLICE(1, DV_NONE, 2)};
  dv_array *v;
  assert_ok(dv_array_slice(full, 2, idx, &v));
  assert_true(dv_array_strides(v)[0] < 0);
  for (int i = 0; i < R; i++)
    for (int j = 1; j < C; j += 2) want[i * C + j] = want[i * C + j] * 2.0f + 1.0f;
  moves b = count_now();
  dv_launch_config c = {{C / 2, R, 1}, {1, 1, 1}, 0, NULL};
  dv_arg a[] = {DV_ARG_VIEW(v)};
  assert_ok(dv_kernel_launch(k2, &c, 1, a));
  assert_moves(b, 1, 1);
  for (int i = 0; i < R * C; i++) assert_kernel_value(base[i] == want[i]);
  dv_array_release(v);

  /* F order */
  dv_array *f;
  assert_ok(dv_host_array(g_ctx, 2, shape, dv_dtype_get(DV_FLOAT32), NULL, 'F', &f));
  float *fd = host_data(f);
  for (int i = 0; i < R * C; i++) fd[i] = (float)i; /* fd[j*R + i] is element (i, j) */
  c = (dv_launch_config){{C, R, 1}, {1, 1, 1}, 0, NULL};
  dv_arg af[] = {DV_ARG_VIEW_INOUT(f)};
  b = count_now();
  assert_ok(dv_kernel_launch(k2, &c, 1, af));
  assert_moves(b, 1, 1);
  for (int i = 0; i < R * C; i++) assert_kernel_value(fd[i] == (float)i * 2.0f + 1.0f);
  dv_array_release(f);

  /* 1-D reversed with a step: x[::-3] */
  float x[20];
  for (int i = 0; i < 20; i++) x[i] = (float)i;
  dv_array *hx = wrap(x, 20), *r;
  dv_index ri = DV_SLICE(DV_NONE, DV_NONE, -3);
  assert_ok(dv_array_slice(hx, 1, &ri, &r));
  c = cfg1(dv_array_size(r), NULL);
  dv_arg ar[] = {DV_ARG_VIEW(r)};
  assert_ok(dv_kernel_launch(k1, &c, 1, ar));
  for (int i = 0; i < 20; i++)
    assert_kernel_value(x[i] == ((19 - i) % 3 == 0 ? (float)i * 2.0f + 1.0f : (float)i));
  dv_array_release(r);
  dv_array_release(hx);
  dv_array_release(full);
  dv_module_release(m);
}

/* ---- smart arrays ----------------------------------------------------------------- */

/* A chain of N launches: exactly one upload and no download until the host
 * asks; then exactly one download; asking again moves nothing. */
static void test_smart_chain(void **state) {
  (void)state;
  enum { N = 500, LAUNCHES = 6 };
  dv_module *m = build_smart();
  float x[N];
  for (int i = 0; i < N; i++) x[i] = (float)i;
  dv_array *hx = wrap(x, N);
  dv_smart *s;
  moves b = count_now();
  assert_ok(dv_smart_from_array(hx, 0, NULL, &s));
  assert_true(dv_smart_is_current(s, DV_WHERE_HOST));
  assert_false(dv_smart_is_current(s, DV_WHERE_DEVICE));
  dv_launch_config c = cfg1(N, NULL);
  dv_arg a[] = {DV_ARG_SMART(s), DV_ARG_I32(N)};
  for (int l = 0; l < LAUNCHES; l++) assert_ok(dv_kernel_launch(kernel(m, "incr"), &c, 2, a));
  assert_moves(b, 1, 0);
  assert_true(dv_smart_is_current(s, DV_WHERE_DEVICE));
  assert_false(dv_smart_is_current(s, DV_WHERE_HOST));
  for (int i = 0; i < N; i++) assert_kernel_value(x[i] == (float)i); /* the host copy is stale */
  dv_array *h = NULL;
  assert_ok(dv_smart_get(s, DV_WHERE_HOST, NULL, &h));
  assert_ptr_equal(h, hx); /* the adopted array is the host copy */
  assert_moves(b, 1, 1);
  for (int i = 0; i < N; i++) assert_kernel_value(x[i] == (float)i + LAUNCHES);
  assert_ok(dv_smart_get(s, DV_WHERE_HOST, NULL, &h));
  dv_array *d = NULL, *d2 = NULL;
  assert_ok(dv_smart_get(s, DV_WHERE_DEVICE, NULL, &d));
  assert_ok(dv_smart_get(s, DV_WHERE_DEVICE, NULL, &d2));
  assert_ptr_equal(d, d2);
  assert_int_equal(dv_array_memory(d), DV_MEM_DEVICE);
  assert_moves(b, 1, 1);
  dv_array_release(hx); /* the smart array keeps its own reference */
  assert_int_equal(dv_smart_ndim(s), 1);
  assert_int_equal(dv_smart_shape(s)[0], N);
  assert_int_equal(dv_dtype_id(dv_smart_dtype(s)), DV_FLOAT32);
  dv_smart_release(s);
  dv_module_release(m);
}

/* mark_changed(host) after a host write: exactly one upload at the next
 * launch, and the write arrives; an `in` launch leaves the host copy
 * current; an `out` launch uploads nothing even when the device is stale. */
static void test_smart_mark_changed(void **state) {
  (void)state;
  enum { N = 128 };
  dv_module *m = build_smart();
  int64_t n = N;
  dv_smart *s, *t;
  assert_ok(dv_smart_create(g_ctx, 1, &n, dv_dtype_get(DV_FLOAT32), NULL, 'C', DV_WHERE_HOST, NULL, &s));
  dv_array *h;
  assert_ok(dv_smart_get(s, DV_WHERE_HOST, NULL, &h));
  float *hd = host_data(h);
  for (int i = 0; i < N; i++) hd[i] = (float)i;
  assert_ok(dv_smart_mark_changed(s, DV_WHERE_HOST));
  dv_launch_config c = cfg1(N, NULL);
  dv_arg a[] = {DV_ARG_SMART(s), DV_ARG_I32(N)};
  moves b = count_now();
  assert_ok(dv_kernel_launch(kernel(m, "incr"), &c, 2, a));
  assert_moves(b, 1, 0);
  assert_ok(dv_smart_get(s, DV_WHERE_HOST, NULL, &h));
  assert_moves(b, 1, 1);
  for (int i = 0; i < N; i++) assert_kernel_value(hd[i] == (float)i + 1.0f);
  /* The host writes again: one upload at the next launch, then none. */
  for (int i = 0; i < N; i++) hd[i] = 100.0f;
  assert_ok(dv_smart_mark_changed(s, DV_WHERE_HOST));
  assert_false(dv_smart_is_current(s, DV_WHERE_DEVICE));
  b = count_now();
  assert_ok(dv_kernel_launch(kernel(m, "incr"), &c, 2, a));
  assert_ok(dv_kernel_launch(kernel(m, "incr"), &c, 2, a));
  assert_moves(b, 1, 0);
  assert_ok(dv_smart_get(s, DV_WHERE_HOST, NULL, &h));
  for (int i = 0; i < N; i++) assert_kernel_value(hd[i] == 102.0f);

  /* in: read on the device, the host copy stays current (no download). */
  assert_ok(dv_smart_create(g_ctx, 1, &n, dv_dtype_get(DV_FLOAT32), NULL, 'C', DV_WHERE_DEVICE, NULL, &t));
  b = count_now();
  dv_arg a2[] = {DV_ARG_SMART_IN(s), DV_ARG_SMART_OUT(t), DV_ARG_F32(2.0f), DV_ARG_I32(N)};
  assert_ok(dv_kernel_launch(kernel(m, "scale"), &c, 4, a2));
  assert_moves(b, 0, 0); /* s's device copy was current, t is overwritten */
  assert_true(dv_smart_is_current(s, DV_WHERE_HOST));
  assert_true(dv_smart_is_current(s, DV_WHERE_DEVICE));
  assert_ok(dv_smart_get(s, DV_WHERE_HOST, NULL, &h));
  assert_moves(b, 0, 0);
  dv_array *th;
  assert_ok(dv_smart_get(t, DV_WHERE_HOST, NULL, &th));
  assert_moves(b, 0, 1);
  float *td = host_data(th);
  for (int i = 0; i < N; i++) assert_kernel_value(td[i] == 204.0f);
  /* out on a smart array whose host copy is newer: the device is written,
   * nothing is uploaded, and the host copy becomes stale. */
  for (int i = 0; i < N; i++) td[i] = 1.0f;
  assert_ok(dv_smart_mark_changed(t, DV_WHERE_HOST));
  b = count_now();
  dv_arg a3[] = {DV_ARG_SMART_OUT(t), DV_ARG_F32(9.0f), DV_ARG_I32(N)};
  assert_ok(dv_kernel_launch(kernel(m, "fill"), &c, 3, a3));
  assert_moves(b, 0, 0);
  assert_false(dv_smart_is_current(t, DV_WHERE_HOST));
  assert_ok(dv_smart_get(t, DV_WHERE_HOST, NULL, &th));
  assert_moves(b, 0, 1);
  for (int i = 0; i < N; i++) assert_kernel_value(td[i] == 9.0f);
  dv_smart_release(t);
  dv_smart_release(s);
  dv_module_release(m);
}

/* Any layout: an adopted negative-stride, strided view and an F-order copy,
 * through DV_VIEW kernels; the device copy is dense and the values land in
 * exactly the view's elements. */
static void test_smart_layouts(void **state) {
  (void)state;
  dv_module *m = build_smart();
  enum { R = 5, C = 8 };
  float base[R * C], want[R * C];
  for (int i = 0; i < R * C; i++) base[i] = want[i] = (float)i;
  int64_t shape[2] = {R, C};
  dv_array *full, *v;
  assert_ok(dv_host_array_wrap(g_ctx, base, 2, shape, dv_dtype_get(DV_FLOAT32), NULL, &full));
  dv_index idx[2] = {DV_SLICE(DV_NONE, DV_NONE, -2), DV_SLICE(DV_NONE, DV_NONE, -1)};
  assert_ok(dv_array_slice(full, 2, idx, &v)); /* rows 4, 2, 0 reversed, columns reversed */
  dv_smart *s;
  assert_ok(dv_smart_from_array(v, 0, NULL, &s));
  dv_launch_config c = {{C, 3, 1}, {1, 1, 1}, 0, NULL};
  dv_arg a[] = {DV_ARG_SMART_VIEW(s)};
  moves b = count_now();
  assert_ok(dv_kernel_launch(kernel(m, "view2"), &c, 1, a));
  assert_ok(dv_kernel_launch(kernel(m, "view2"), &c, 1, a));
  assert_moves(b, 1, 0);
  dv_array *d;
  assert_ok(dv_smart_get(s, DV_WHERE_DEVICE, NULL, &d));
  assert_true(dv_array_is_c_contiguous(d) || dv_array_is_f_contiguous(d)); /* dense */
  dv_array *h;
  assert_ok(dv_smart_get(s, DV_WHERE_HOST, NULL, &h));
  assert_moves(b, 1, 1);
  for (int i = 0; i < R; i += 2)
    for (int j = 0; j < C; j++) want[i * C + j] = (want[i * C + j] * 2.0f + 1.0f) * 2.0f + 1.0f;
  for (int i = 0; i < R * C; i++) assert_kernel_value(base[i] == want[i]);
  dv_smart_release(s);
  dv_array_release(v);

  /* An F-order array copied (DV_SMART_COPY): the original never changes. */
  dv_array *f;
  assert_ok(dv_host_array(g_ctx, 2, shape, dv_dtype_get(DV_FLOAT32), NULL, 'F', &f));
  float *fd = host_data(f);
  for (int i = 0; i < R * C; i++) fd[i] = (float)i;
  assert_ok(dv_smart_from_array(f, DV_SMART_COPY, NULL, &s));
  a[0] = DV_ARG_SMART_VIEW(s);
  c = (dv_launch_config){{C, R, 1}, {1, 1, 1}, 0, NULL};
  b = count_now();
  assert_ok(dv_kernel_launch(kernel(m, "view2"), &c, 1, a));
  assert_moves(b, 1, 0);
  assert_ok(dv_smart_get(s, DV_WHERE_HOST, NULL, &h));
  assert_true(h != f);
  assert_true(dv_array_is_f_contiguous(h));
  float *hd = host_data(h);
  for (int i = 0; i < R * C; i++) assert_kernel_value(hd[i] == (float)i * 2.0f + 1.0f && fd[i] == (float)i);
  dv_smart_release(s);
  dv_array_release(f);
  dv_array_release(full);
  dv_module_release(m);
}

/* Streams: the upload, the launches and the download are ordered on the
 * stream given; get(host) on a stream returns with the data there. */
static void test_smart_streams(void **state) {
  (void)state;
  enum { N = 4096 };
  dv_module *m = build_smart();
  dv_stream *st;
  assert_ok(dv_stream_create(g_ctx, DV_STREAM_NON_BLOCKING, &st));
  int64_t n = N;
  dv_smart *s;
  assert_ok(dv_smart_create(g_ctx, 1, &n, dv_dtype_get(DV_FLOAT32), NULL, 'C', DV_WHERE_HOST, st, &s));
  dv_array *h;
  assert_ok(dv_smart_get(s, DV_WHERE_HOST, st, &h));
  float *hd = host_data(h);
  for (int i = 0; i < N; i++) hd[i] = (float)i;
  assert_ok(dv_smart_mark_changed(s, DV_WHERE_HOST));
  dv_launch_config c = cfg1(N, st);
  dv_arg a[] = {DV_ARG_SMART(s), DV_ARG_I32(N)};
  moves b = count_now();
  for (int l = 0; l < 4; l++) assert_ok(dv_kernel_launch(kernel(m, "incr"), &c, 2, a));
  assert_ok(dv_smart_get(s, DV_WHERE_HOST, st, &h)); /* waits for st */
  assert_moves(b, 1, 1);
  for (int i = 0; i < N; i++) assert_kernel_value(hd[i] == (float)i + 4.0f);

  /* Host arrays on a stream: read and written in stream order. */
  float *x = calloc(N, sizeof *x);
  assert_non_null(x);
  for (int i = 0; i < N; i++) x[i] = (float)-i;
  dv_array *hx = wrap(x, N);
  dv_arg a2[] = {DV_ARG_ARRAY(hx), DV_ARG_I32(N)};
  b = count_now();
  assert_ok(dv_kernel_launch(kernel(m, "incr"), &c, 2, a2));
  assert_ok(dv_kernel_launch(kernel(m, "incr"), &c, 2, a2));
  assert_ok(dv_stream_synchronize(st));
  assert_moves(b, 2, 2);
  for (int i = 0; i < N; i++) assert_kernel_value(x[i] == (float)-i + 2.0f);
  dv_array_release(hx);
  free(x);
  dv_smart_release(s);
  dv_stream_release(st);
  dv_module_release(m);
}

/* One smart array used from two streams and the default stream, with no
 * events from the caller: each use waits for the last work on the device
 * copy, whatever stream queued it. */
static void test_smart_across_streams(void **state) {
  (void)state;
  enum { N = 256 };
  dv_module *m = build_smart();
  dv_stream *s1, *s2;
  assert_ok(dv_stream_create(g_ctx, DV_STREAM_NON_BLOCKING, &s1));
  assert_ok(dv_stream_create(g_ctx, DV_STREAM_NON_BLOCKING, &s2));
  float x[N];
  for (int i = 0; i < N; i++) x[i] = (float)i;
  dv_array *hx = wrap(x, N);
  dv_smart *s;
  assert_ok(dv_smart_from_array(hx, 0, NULL, &s));
  int spins = strncmp(g_backend, "host", 4) == 0 ? 200000 : 20000;
  for (int round = 0; round < 3; round++) {
    dv_launch_config c1 = cfg1(N, s1), c2 = cfg1(N, s2);
    dv_arg slow[] = {DV_ARG_SMART(s), DV_ARG_I32(N), DV_ARG_I32(spins)};
    dv_arg fast[] = {DV_ARG_SMART(s), DV_ARG_I32(N)};
    assert_ok(dv_kernel_launch(kernel(m, "incr_slow"), &c1, 3, slow)); /* uploads on s1 first */
    assert_ok(dv_kernel_launch(kernel(m, "incr"), &c2, 2, fast));
    dv_array *h;
    assert_ok(dv_smart_get(s, DV_WHERE_HOST, NULL, &h)); /* the default stream, after s2 */
    for (int i = 0; i < N; i++) assert_kernel_value(x[i] == (float)i + 2.0f * (float)(round + 1));
    assert_ok(dv_smart_mark_changed(s, DV_WHERE_HOST));
  }
  dv_smart_release(s);
  dv_array_release(hx);
  dv_stream_release(s1);
  dv_stream_release(s2);
  dv_module_release(m);
}

/* Releasing a smart array whose last work on its device copy is queued on
 * another stream than the one the copy was allocated for: a stream-ordered
 * manager (the pool) hands the block out again in the allocation stream's
 * order, so that stream must first wait for the smart array's work.  Here
 * the device copy is allocated on stream a, a second upload is queued on
 * stream c behind a callback that holds c for a while, and the smart array
 * is released; a new array on a gets the same block and is written, and
 * must keep what was written (the deferred free waits for the device
 * before the pool sees the block; this guards that). */
static _Atomic int g_open_gate;
static void gate_cb(dv_stream *strm, dv_status st, void *user) {
  (void)strm, (void)st, (void)user;
  for (int i = 0; i < 300 && !atomic_load(&g_open_gate); i++) usleep(1000); /* at most 0.3 s */
}

/* dv_smart_get(host) of a host copy that is current but still being read by
 * a queued upload waits for the upload: the caller writes the host copy as
 * soon as the call returns, and the device copy must keep what was current
 * when the upload was asked for. */
static void test_smart_get_host_waits_for_upload(void **state) {
  (void)state;
  enum { N = 2048 };
  const dv_dtype *dt = dv_dtype_get(DV_FLOAT32);
  int64_t n = N;
  dv_stream *cs;
  assert_ok(dv_stream_create(g_ctx, DV_STREAM_NON_BLOCKING, &cs));
  dv_smart *s;
  assert_ok(dv_smart_create(g_ctx, 1, &n, dt, NULL, 'C', DV_WHERE_HOST, NULL, &s));
  dv_array *h = NULL, *d = NULL;
  assert_ok(dv_smart_get(s, DV_WHERE_HOST, NULL, &h));
  float *hp = host_data(h);
  for (int i = 0; i < N; i++) hp[i] = (float)i;
  assert_ok(dv_smart_mark_changed(s, DV_WHERE_HOST));
  atomic_store(&g_open_gate, 0); /* the gate opens by itself after 0.3 s */
  assert_ok(dv_stream_add_callback(cs, gate_cb, NULL));
  assert_ok(dv_smart_get(s, DV_WHERE_DEVICE, cs, &d)); /* the upload waits behind the gate */
  assert_ok(dv_smart_get(s, DV_WHERE_HOST, NULL, &h)); /* current: nothing moves, but waits */
  for (int i = 0; i < N; i++) hp[i] = -1.0f; /* a host write the upload must not see */
  assert_ok(dv_stream_synchronize(cs));
  float back[N];
  dv_array *hb = wrap(back, N);
  assert_ok(dv_copy_to_host(d, hb, NULL, NULL));
  for (int i = 0; i < N; i++) assert_kernel_value(back[i] == (float)i);
  dv_array_release(hb);
  dv_smart_release(s);
  dv_stream_release(cs);
}

static void test_smart_release_orders_pool_reuse(void **state) {
  (void)state;
  if (strncmp(g_backend, "host", 4) != 0) {
    printf("SKIPPED: test_smart_release_orders_pool_reuse: host simulator only (pool context of its own)\n");
    skip();
  }
  enum { N = 4096 };
  dv_context *c = NULL;
  assert_ok(test_context(&c, "memory_manager=pool", NULL));
  const dv_dtype *dt = dv_dtype_get(DV_FLOAT32);
  int64_t n = N;
  dv_stream *a, *cs;
  assert_ok(dv_stream_create(c, DV_STREAM_NON_BLOCKING, &a));
  assert_ok(dv_stream_create(c, DV_STREAM_NON_BLOCKING, &cs));
  dv_smart *s;
  assert_ok(dv_smart_create(c, 1, &n, dt, NULL, 'C', DV_WHERE_HOST, NULL, &s));
  dv_array *h = NULL, *d = NULL;
  assert_ok(dv_smart_get(s, DV_WHERE_HOST, NULL, &h));
  float *hp = host_data(h);
  for (int i = 0; i < N; i++) hp[i] = 1.0f;
  assert_ok(dv_smart_mark_changed(s, DV_WHERE_HOST));
  assert_ok(dv_smart_get(s, DV_WHERE_DEVICE, a, &d)); /* allocated for a, uploaded on a */
  assert_ok(dv_stream_synchronize(a));
  void *blk0 = NULL;
  size_t off0 = 0;
  assert_ok(dv_array_native(d, &blk0, &off0));
  for (int i = 0; i < N; i++) hp[i] = 2.0f;
  assert_ok(dv_smart_mark_changed(s, DV_WHERE_HOST));
  atomic_store(&g_open_gate, 0);
  assert_ok(dv_stream_add_callback(cs, gate_cb, NULL));
  assert_ok(dv_smart_get(s, DV_WHERE_DEVICE, cs, &d)); /* the upload waits behind the gate */
  dv_smart_release(s);
  assert_ok(dv_context_flush_deallocs(c));
  dv_array *x = NULL;
  assert_ok(dv_device_array(c, 1, &n, dt, NULL, 'C', a, &x));
  void *blk1 = NULL;
  size_t off1 = 0;
  assert_ok(dv_array_native(x, &blk1, &off1));
  bool reused = blk0 == blk1 && off0 == off1;
  float three[N];
  for (int i = 0; i < N; i++) three[i] = 3.0f;
  dv_array *h3 = wrap_ctx(c, three, N);
  assert_ok(dv_array_copy(x, h3, a));
  assert_ok(dv_stream_synchronize(a));
  atomic_store(&g_open_gate, 1);
  assert_ok(dv_stream_synchronize(cs));
  float back[N];
  dv_array *hb = wrap_ctx(c, back, N);
  assert_ok(dv_array_copy(hb, x, NULL));
  if (!reused) printf("note: the pool did not hand the smart array's block out again\n");
  for (int i = 0; i < N; i++)
    if (back[i] != 3.0f)
      fail_msg("element %d is %g, want 3: the released smart array's queued upload wrote the block "
               "after the pool handed it out again", i, (double)back[i]);
  dv_array_release(hb), dv_array_release(h3), dv_array_release(x);
  dv_stream_release(a), dv_stream_release(cs);
  assert_ok(dv_context_destroy(c));
}

/* dv_smart_from_array with DV_SMART_COPY queues the copy on `stream`; that
 * is work the smart array queued on its device copy, so a download on
 * another stream must wait for it (dv_smart_get: "every transfer and launch
 * a smart array queues on its device copy waits first for the last one it
 * queued there").  The copy is held behind a callback on its stream; the
 * download on another stream used to read the device copy before the copy
 * had written it. */
static void test_smart_copy_ordered_for_other_streams(void **state) {
  (void)state;
  enum { N = 512 };
  float x[N], y[N];
  for (int i = 0; i < N; i++) x[i] = (float)i + 0.5f;
  dv_array *hx = wrap(x, N), *d = NULL;
  assert_ok(dv_to_device(g_ctx, hx, NULL, 1, NULL, &d));
  dv_stream *a, *b;
  assert_ok(dv_stream_create(g_ctx, DV_STREAM_NON_BLOCKING, &a));
  assert_ok(dv_stream_create(g_ctx, DV_STREAM_NON_BLOCKING, &b));
  atomic_store(&g_open_gate, 0);
  assert_ok(dv_stream_add_callback(a, gate_cb, NULL));
  dv_smart *s = NULL;
  assert_ok(dv_smart_from_array(d, DV_SMART_COPY, a, &s)); /* queued on a, behind the gate */
  dv_array *h = NULL;
  dv_status rc = dv_smart_get(s, DV_WHERE_HOST, b, &h);   /* downloads on b */
  if (!rc) memcpy(y, host_data(h), sizeof y);
  atomic_store(&g_open_gate, 1);
  assert_ok(dv_stream_synchronize(a));
  assert_ok(rc);
  for (int i = 0; i < N; i++)
    if (y[i] != x[i])
      fail_msg("element %d: %g, want %g: the download on another stream ran before the "
               "DV_SMART_COPY copy on its stream", i, (double)y[i], (double)x[i]);
  dv_smart_release(s);
  dv_array_release(d), dv_array_release(hx);
  dv_stream_release(a), dv_stream_release(b);
}

/* A 0-d smart array moves one element; an empty one moves nothing but
 * still keeps its valid bits. */
static void test_smart_edge_shapes(void **state) {
  (void)state;
  dv_smart *s;
  assert_ok(dv_smart_create(g_ctx, 0, NULL, dv_dtype_get(DV_FLOAT64), NULL, 'C', DV_WHERE_HOST, NULL, &s));
  assert_null(dv_smart_shape(s));
  dv_array *h, *d;
  assert_ok(dv_smart_get(s, DV_WHERE_HOST, NULL, &h));
  double *hd = (double *)host_data(h);
  *hd = 2.5;
  assert_ok(dv_smart_mark_changed(s, DV_WHERE_HOST));
  moves b = count_now();
  assert_ok(dv_smart_get(s, DV_WHERE_DEVICE, NULL, &d));
  assert_moves(b, 1, 0);
  double back = 0;
  assert_ok(dv_array_get_item(d, NULL, &back, sizeof back, NULL));
  assert_true(back == 2.5);
  dv_smart_release(s);

  int64_t zero[2] = {3, 0};
  assert_ok(dv_smart_create(g_ctx, 2, zero, dv_dtype_get(DV_INT16), NULL, 'F', DV_WHERE_DEVICE, NULL, &s));
  b = count_now();
  assert_ok(dv_smart_get(s, DV_WHERE_HOST, NULL, &h));
  assert_moves(b, 0, 0);
  assert_int_equal(dv_array_size(h), 0);
  assert_true(dv_smart_is_current(s, DV_WHERE_HOST));
  assert_ok(dv_smart_mark_changed(s, DV_WHERE_HOST));
  assert_false(dv_smart_is_current(s, DV_WHERE_DEVICE));
  dv_smart_release(s);
}

/* Threads: eight threads asking one smart array for its device copy at
 * once get the same array, and exactly one upload happens. */
typedef struct getter {
  dv_smart *s;
  dv_array *got;
  dv_status rc;
} getter;

static void *get_device(void *p) {
  getter *g = p;
  g->rc = dv_smart_get(g->s, DV_WHERE_DEVICE, NULL, &g->got);
  if (!g->rc && !dv_smart_is_current(g->s, DV_WHERE_DEVICE)) g->rc = DV_ERR_MISUSE;
  return NULL;
}

static void test_smart_threads(void **state) {
  (void)state;
  enum { T = 8 };
  int64_t n = 1000;
  dv_smart *s;
  assert_ok(dv_smart_create(g_ctx, 1, &n, dv_dtype_get(DV_INT32), NULL, 'C', DV_WHERE_HOST, NULL, &s));
  moves b = count_now();
  pthread_t th[T];
  getter g[T];
  for (int i = 0; i < T; i++) {
    g[i] = (getter){s, NULL, DV_OK};
    assert_int_equal(pthread_create(&th[i], NULL, get_device, &g[i]), 0);
  }
  for (int i = 0; i < T; i++) assert_int_equal(pthread_join(th[i], NULL), 0);
  for (int i = 0; i < T; i++) {
    assert_ok(g[i].rc);
    assert_ptr_equal(g[i].got, g[0].got);
  }
  assert_moves(b, 1, 0);
  dv_smart_release(s);
}

/* The shape, dtype and ndim getters may be called from any thread while
 * another thread makes the missing copy (which stores the copy's pointer
 * in the smart array): they read under the lock.  A smart array made on
 * the device, so that its host copy is the one being made while the
 * getters run (ThreadSanitizer, `make tsan`, reported the unlocked read). */
typedef struct shape_reader {
  dv_smart *s;
  int bad;
} shape_reader;

static void *read_shape(void *arg) {
  shape_reader *r = arg;
  for (int i = 0; i < 2000; i++) {
    const int64_t *sh = dv_smart_shape(r->s);
    if (dv_smart_ndim(r->s) != 1 || !sh || sh[0] != 1000 || !dv_smart_dtype(r->s)) r->bad = 1;
  }
  return NULL;
}

static void test_smart_getters_while_copy_made(void **state) {
  (void)state;
  int64_t n = 1000;
  dv_smart *s;
  assert_ok(dv_smart_create(g_ctx, 1, &n, dv_dtype_get(DV_INT32), NULL, 'C', DV_WHERE_DEVICE, NULL, &s));
  shape_reader r = {s, 0};
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, read_shape, &r), 0);
  dv_array *h = NULL;
  dv_status rc = dv_smart_get(s, DV_WHERE_HOST, NULL, &h); /* makes the host copy */
  assert_int_equal(pthread_join(th, NULL), 0);
  assert_ok(rc);
  assert_int_equal(r.bad, 0);
  dv_smart_release(s);
}

/* Misuse and bad input: clear statuses, outputs cleared, nothing moved or
 * allocated by a refused call. */
static void test_smart_misuse(void **state) {
  (void)state;
  enum { N = 16 };
  dv_module *m = build_smart();
  int64_t n = N, n2[2] = {4, 4};
  dv_smart *s = (dv_smart *)&n;
  assert_status(dv_smart_create(g_ctx, 1, &n, dv_dtype_get(DV_FLOAT32), NULL, 'C', (dv_where)7, NULL, &s),
                DV_ERR_INVALID_ARGUMENT);
  assert_null(s);
  assert_ok(dv_smart_create(g_ctx, 1, &n, dv_dtype_get(DV_FLOAT32), NULL, 'C', DV_WHERE_HOST, NULL, &s));
  /* writing the stale device copy: refused, nothing changes */
  assert_status(dv_smart_mark_changed(s, DV_WHERE_DEVICE), DV_ERR_MISUSE);
  assert_non_null(strstr(dv_last_error(), "stale"));
  assert_true(dv_smart_is_current(s, DV_WHERE_HOST));
  assert_status(dv_smart_mark_changed(s, (dv_where)2), DV_ERR_INVALID_ARGUMENT);
  dv_array *out = (dv_array *)&n;
  assert_status(dv_smart_get(s, (dv_where)-1, NULL, &out), DV_ERR_INVALID_ARGUMENT);
  assert_null(out);
  assert_status(dv_smart_get(NULL, DV_WHERE_HOST, NULL, &out), DV_ERR_NULL_ARGUMENT);
  assert_status(dv_smart_get(s, DV_WHERE_HOST, NULL, NULL), DV_ERR_NULL_ARGUMENT);
  /* a stream of another context */
  dv_context *other;
  assert_ok(test_context(&other, NULL));
  dv_stream *os;
  assert_ok(dv_stream_create(other, 0, &os));
  assert_status(dv_smart_get(s, DV_WHERE_DEVICE, os, &out), DV_ERR_BACKEND_MISMATCH);
  assert_false(dv_smart_is_current(s, DV_WHERE_DEVICE));
  /* attach: dtype, shape, a copy it already has, another context */
  dv_array *d16i, *d44, *d16, *h16;
  assert_ok(dv_device_array(g_ctx, 1, &n, dv_dtype_get(DV_INT32), NULL, 'C', NULL, &d16i));
  assert_ok(dv_device_array(g_ctx, 2, n2, dv_dtype_get(DV_FLOAT32), NULL, 'C', NULL, &d44));
  assert_ok(dv_device_array(g_ctx, 1, &n, dv_dtype_get(DV_FLOAT32), NULL, 'C', NULL, &d16));
  assert_ok(dv_host_array(g_ctx, 1, &n, dv_dtype_get(DV_FLOAT32), NULL, 'C', &h16));
  assert_status(dv_smart_attach(s, d16i), DV_ERR_DTYPE_MISMATCH);
  assert_status(dv_smart_attach(s, d44), DV_ERR_SHAPE_MISMATCH);
  assert_status(dv_smart_attach(s, h16), DV_ERR_MISUSE);
  dv_array *od;
  assert_ok(dv_device_array(other, 1, &n, dv_dtype_get(DV_FLOAT32), NULL, 'C', NULL, &od));
  assert_status(dv_smart_attach(s, od), DV_ERR_BACKEND_MISMATCH);
  /* a good attach: the next get fills exactly that array, once */
  assert_ok(dv_smart_attach(s, d16));
  assert_false(dv_smart_is_current(s, DV_WHERE_DEVICE));
  moves b = count_now();
  assert_ok(dv_smart_get(s, DV_WHERE_DEVICE, NULL, &out));
  assert_ptr_equal(out, d16);
  assert_moves(b, 1, 0);
  assert_status(dv_smart_attach(s, d16), DV_ERR_MISUSE);
  /* from_array: mapped memory, unknown flags, NULL */
  dv_array *mp = NULL;
  if (dv_mapped_array(g_ctx, 1, &n, dv_dtype_get(DV_FLOAT32), NULL, 'C', 0, &mp) == DV_OK) {
    dv_smart *t = (dv_smart *)&n;
    assert_status(dv_smart_from_array(mp, 0, NULL, &t), DV_ERR_MISUSE);
    assert_null(t);
    dv_array_release(mp);
  }
  dv_smart *t = NULL;
  assert_status(dv_smart_from_array(h16, 0x80, NULL, &t), DV_ERR_INVALID_ARGUMENT);
  assert_status(dv_smart_from_array(NULL, 0, NULL, &t), DV_ERR_NULL_ARGUMENT);
  assert_status(dv_smart_from_array(h16, 0, os, &t), DV_ERR_BACKEND_MISMATCH);

  /* Launches with bad arguments move and allocate nothing, even when a good
   * host array comes first. */
  dv_stats st0 = {.size = sizeof st0}, st1 = {.size = sizeof st1};
  assert_ok(dv_context_stats(g_ctx, &st0));
  dv_launch_config c = cfg1(N, NULL);
  dv_arg bad1[] = {DV_ARG_ARRAY(h16), DV_ARG_ARRAY(NULL), DV_ARG_F32(1), DV_ARG_I32(N)};
  assert_status(dv_kernel_launch(kernel(m, "scale"), &c, 4, bad1), DV_ERR_NULL_ARGUMENT);
  dv_arg bad2[] = {DV_ARG_ARRAY(h16), DV_ARG_SMART(NULL), DV_ARG_F32(1), DV_ARG_I32(N)};
  assert_status(dv_kernel_launch(kernel(m, "scale"), &c, 4, bad2), DV_ERR_NULL_ARGUMENT);
  dv_arg bad3[] = {DV_ARG_ARRAY(h16), DV_ARG_I32(N)};
  bad3[0].dir = (dv_arg_dir)9;
  assert_status(dv_kernel_launch(kernel(m, "incr"), &c, 2, bad3), DV_ERR_KERNEL_ARGUMENT);
  dv_smart *os_smart;
  assert_ok(dv_smart_from_array(od, 0, NULL, &os_smart));
  dv_arg bad4[] = {DV_ARG_SMART(s), DV_ARG_SMART(os_smart), DV_ARG_F32(1), DV_ARG_I32(N)};
  assert_status(dv_kernel_launch(kernel(m, "scale"), &c, 4, bad4), DV_ERR_BACKEND_MISMATCH);
  dv_arg bad5[] = {DV_ARG_ARRAY(h16), DV_ARG_ARRAY(od), DV_ARG_F32(1), DV_ARG_I32(N)};
  assert_status(dv_kernel_launch(kernel(m, "scale"), &c, 4, bad5), DV_ERR_BACKEND_MISMATCH);
  assert_ok(dv_context_stats(g_ctx, &st1));
  assert_int_equal(st1.transfers_h2d, st0.transfers_h2d);
  assert_int_equal(st1.transfers_d2h, st0.transfers_d2h);
  assert_int_equal(st1.device.total, st0.device.total);
  assert_int_equal(st1.arrays.total, st0.arrays.total);

  /* retain / release, NULL handling */
  assert_ptr_equal(dv_smart_retain(s), s);
  dv_smart_release(s);
  dv_smart_release(NULL);
  assert_null(dv_smart_retain(NULL));
  assert_int_equal(dv_smart_is_current(NULL, DV_WHERE_HOST), 0);
  assert_int_equal(dv_smart_ndim(NULL), 0);
  assert_null(dv_smart_shape(NULL));
  assert_null(dv_smart_dtype(NULL));
  /* the context is busy while a smart array's copies live */
  dv_array_release(od);
  dv_stream_release(os);
  assert_status(dv_context_destroy(other), DV_ERR_BUSY);
  dv_smart_release(os_smart);
  assert_ok(dv_context_destroy(other));
  dv_array_release(d16i);
  dv_array_release(d44);
  dv_array_release(d16);
  dv_array_release(h16);
  dv_smart_release(s);
  dv_module_release(m);
}

/* Every k-th device allocation, copy and host allocation failing in a
 * launch with a host argument and a smart argument, then get(host): a
 * status comes back, values are right whenever it is DV_OK, the smart
 * array's state stays usable, and nothing leaks (ASan, the arrays count). */
static void test_fault_sweep(void **state) {
  (void)state;
  enum { N = 64 };
  dv_module *m = build_smart();
  dv_kernel *k = kernel(m, "scale");
  const dv_fault_kind kinds[] = {DV_FAULT_DEVICE_ALLOC, DV_FAULT_COPY, DV_FAULT_HOST_ALLOC};
  for (size_t ki = 0; ki < sizeof kinds / sizeof kinds[0]; ki++) {
    for (uint64_t n = 1; n < 64; n++) {
      float x[N];
      for (int i = 0; i < N; i++) x[i] = (float)i;
      dv_stats st = {.size = sizeof st};
      assert_ok(dv_context_stats(g_ctx, &st));
      uint64_t arrays0 = st.arrays.current;
      dv_array *hx = wrap(x, N);
      int64_t len = N;
      dv_smart *s;
      assert_ok(dv_smart_create(g_ctx, 1, &len, dv_dtype_get(DV_FLOAT32), NULL, 'C', DV_WHERE_HOST, NULL, &s));
      dv_status rc = dv_fault_inject(kinds[ki] == DV_FAULT_HOST_ALLOC ? NULL : g_ctx, kinds[ki], n);
      if (rc == DV_ERR_NOT_SUPPORTED) {
        dv_smart_release(s);
        dv_array_release(hx);
        dv_module_release(m);
        skip();
      }
      assert_ok(rc);
      dv_launch_config c = cfg1(N, NULL);
      dv_arg a[] = {DV_ARG_ARRAY_IN(hx), DV_ARG_SMART_OUT(s), DV_ARG_F32(2.0f), DV_ARG_I32(N)};
      dv_array *h = NULL;
      rc = dv_kernel_launch(k, &c, 4, a);
      if (!rc) rc = dv_smart_get(s, DV_WHERE_HOST, NULL, &h);
      bool fired = !dv_fault_pending(kinds[ki] == DV_FAULT_HOST_ALLOC ? NULL : g_ctx, kinds[ki]);
      dv_fault_inject(kinds[ki] == DV_FAULT_HOST_ALLOC ? NULL : g_ctx, kinds[ki], 0);
      if (rc) {
        assert_true(fired);
        assert_true(dv_last_error()[0] != 0);
      } else {
        float *hd = host_data(h);
        for (int i = 0; i < N; i++) assert_kernel_value(hd[i] == 2.0f * (float)i);
      }
      /* one copy is always current, and the array still works */
      assert_true(dv_smart_is_current(s, DV_WHERE_HOST) || dv_smart_is_current(s, DV_WHERE_DEVICE));
      assert_ok(dv_kernel_launch(k, &c, 4, a));
      assert_ok(dv_smart_get(s, DV_WHERE_HOST, NULL, &h));
      dv_smart_release(s);
      dv_array_release(hx);
      assert_ok(dv_context_flush_deallocs(g_ctx));
      assert_ok(dv_context_stats(g_ctx, &st));
      assert_int_equal(st.arrays.current, arrays0);
      if (!fired) break; /* past the last operation of this kind */
    }
  }
  dv_module_release(m);
}

/* The same sweep over the create paths: dv_smart_create, dv_smart_from_array
 * with DV_SMART_COPY, and the first dv_smart_get of the missing copy.  A
 * failure leaves the output NULL (or the copy stale) and leaks nothing. */
static void test_create_fault_sweep(void **state) {
  (void)state;
  const dv_fault_kind kinds[] = {DV_FAULT_DEVICE_ALLOC, DV_FAULT_COPY, DV_FAULT_HOST_ALLOC};
  int64_t n = 32;
  for (size_t ki = 0; ki < sizeof kinds / sizeof kinds[0]; ki++) {
    dv_context *fc = kinds[ki] == DV_FAULT_HOST_ALLOC ? NULL : g_ctx;
    for (uint64_t k = 1; k < 64; k++) {
      dv_stats st = {.size = sizeof st};
      assert_ok(dv_context_stats(g_ctx, &st));
      uint64_t arrays0 = st.arrays.current;
      dv_array *h;
      assert_ok(dv_host_array(g_ctx, 1, &n, dv_dtype_get(DV_INT32), NULL, 'C', &h));
      dv_status rc = dv_fault_inject(fc, kinds[ki], k);
      if (rc == DV_ERR_NOT_SUPPORTED) {
        dv_array_release(h);
        skip();
      }
      assert_ok(rc);
      dv_smart *a = NULL, *b = NULL;
      dv_array *got = NULL;
      rc = dv_smart_create(g_ctx, 1, &n, dv_dtype_get(DV_INT32), NULL, 'C', DV_WHERE_DEVICE, NULL, &a);
      if (rc) assert_null(a);
      dv_status r2 = dv_smart_from_array(h, DV_SMART_COPY, NULL, &b);
      if (r2) assert_null(b);
      dv_status r3 = b ? dv_smart_get(b, DV_WHERE_DEVICE, NULL, &got) : DV_OK;
      if (r3) {
        assert_null(got);
        assert_false(dv_smart_is_current(b, DV_WHERE_DEVICE));
      }
      dv_status r4 = a ? dv_smart_get(a, DV_WHERE_HOST, NULL, &got) : DV_OK;
      bool fired = !dv_fault_pending(fc, kinds[ki]);
      dv_fault_inject(fc, kinds[ki], 0);
      if (rc || r2 || r3 || r4) assert_true(fired);
      dv_smart_release(a);
      dv_smart_release(b);
      dv_array_release(h);
      assert_ok(dv_context_flush_deallocs(g_ctx));
      assert_ok(dv_context_stats(g_ctx, &st));
      assert_int_equal(st.arrays.current, arrays0);
      if (!fired) break;
    }
  }
}

/* dv_stats version 3 and the older versions' sizes; the JSON has the counts. */
static void test_stats_v3(void **state) {
  (void)state;
  int64_t n = 8;
  dv_array *d, *h;
  assert_ok(dv_device_array(g_ctx, 1, &n, dv_dtype_get(DV_INT32), NULL, 'C', NULL, &d));
  assert_ok(dv_host_array(g_ctx, 1, &n, dv_dtype_get(DV_INT32), NULL, 'C', &h));
  moves b = count_now();
  assert_ok(dv_array_copy(d, h, NULL));
  assert_ok(dv_array_copy(h, d, NULL));
  assert_ok(dv_array_copy(h, d, NULL));
  dv_array *d2;
  assert_ok(dv_array_copy_new(d, 'C', NULL, &d2));
  moves a = count_now();
  assert_int_equal(a.h2d - b.h2d, 1);
  assert_int_equal(a.d2h - b.d2h, 2);
  assert_int_equal(a.d2d - b.d2d, 1);
  /* a version-2 caller gets version 2 and nothing past it */
  const size_t v2 = offsetof(dv_stats, transfers_h2d);
  union {
    dv_stats st;
    unsigned char bytes[sizeof(dv_stats)];
  } buf;
  memset(&buf, 0xAB, sizeof buf);
  buf.st.size = (uint32_t)v2;
  assert_ok(dv_context_stats(g_ctx, &buf.st));
  assert_int_equal(buf.st.version, 2);
  assert_int_equal(buf.st.size, v2);
  for (size_t i = v2; i < sizeof buf; i++) assert_int_equal(buf.bytes[i], 0xAB);
  dv_stats odd = {.size = (uint32_t)v2 + 8};
  assert_ok(dv_context_stats(g_ctx, &odd));
  assert_int_equal(odd.version, 2);
  char json[4096];
  size_t need = 0;
  assert_ok(dv_context_stats_json(g_ctx, json, sizeof json, &need));
  char want[96];
  snprintf(want, sizeof want, "\"transfers_d2h\":%llu", (unsigned long long)a.d2h);
  assert_non_null(strstr(json, want));
  assert_non_null(strstr(json, "\"version\":3"));
  dv_array_release(d2);
  dv_array_release(d);
  dv_array_release(h);
}

int main(int argc, char **argv) {
  int begin = kernel_suite_begin(argc, argv, "smart", NULL, g_cache_dir, sizeof g_cache_dir);
  if (begin) return begin;
  dv_context *c = NULL;
  dv_device_info di;
  if (test_context(&c, NULL) == DV_OK && dv_context_device_info(c, &di) == DV_OK && test_on_cuda_double(c)) {
    g_kernels_run = false;
    printf("smart: on a driver test double (%s): transfer counts are checked, values computed by "
           "kernels are not (the double does not execute kernels)\n", di.name);
  }
  dv_context_destroy(c);
  const struct CMUnitTest tests[] = {
      T(test_host_argument_directions), T(test_host_argument_layouts), T(test_smart_chain),
      T(test_smart_mark_changed),       T(test_smart_layouts),         T(test_smart_streams),
      T(test_smart_across_streams), T(test_smart_release_orders_pool_reuse),
      T(test_smart_copy_ordered_for_other_streams), T(test_smart_get_host_waits_for_upload),     T(test_smart_misuse),          T(test_fault_sweep),
      T(test_create_fault_sweep),       T(test_smart_edge_shapes),     T(test_smart_threads),
      T(test_smart_getters_while_copy_made),
      T(test_stats_v3),
  };
  return kernel_suite_end(g_cache_dir, test_main(argc, argv, "smart", tests, sizeof tests / sizeof tests[0]));
}
