#define _DEFAULT_SOURCE
/*
 * Kernels through the public API, on every backend that can run them:
 * launches and arguments, shared memory with barriers (proved necessary),
 * dynamic shared memory sized at launch, private local arrays, constant
 * arrays and their update, wave barriers, atomics under contention, the
 * tiled matrix multiply, launch-configuration limits, build errors with
 * their log, stream order and deferred deallocation with launches, native
 * handles, and the compiled-module cache.  Kernel sources live in
 * tests/kernels/.  The host simulator's own checks (divergent barriers,
 * out-of-bounds shared memory, faults) are at the end and run only there.
 */
#include <dirent.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <math.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"

#ifndef DV_TEST_KERNELS_DIR
#error "DV_TEST_KERNELS_DIR must name tests/kernels"
#endif

static char g_cache_dir[256];

static char *read_source(const char *file) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", DV_TEST_KERNELS_DIR, file);
  return read_text_file(path);
}

static bool is_backend(const char *name) { return strncmp(g_backend, name, strlen(name)) == 0; }

/* Build tests/kernels/<file> on ctx with "NAME=VALUE" defines (NULL-terminated). */
static dv_status build_on(dv_context *ctx, const char *file, unsigned flags, dv_module **m, ...) {
  char *src = read_source(file);
  dv_program *p = NULL;
  dv_status rc = dv_program_create(ctx, file, src, &p);
  free(src);
  if (rc) return rc;
  va_list ap;
  va_start(ap, m);
  for (const char *kv; !rc && (kv = va_arg(ap, const char *)) != NULL;) {
    char name[64];
    const char *eq = strchr(kv, '=');
    size_t n = eq ? (size_t)(eq - kv) : strlen(kv);
    memcpy(name, kv, n);
    name[n] = 0;
    rc = dv_program_define(p, name, eq ? eq + 1 : NULL);
  }
  va_end(ap);
  if (!rc) rc = dv_program_build(p, flags, m);
  if (rc == DV_ERR_COMPILE) fprintf(stderr, "%s\n", dv_program_log(p));
  dv_program_destroy(p);
  return rc;
}
#define BUILD(file, m, ...) build_on(g_ctx, file, 0, m, ##__VA_ARGS__, NULL)

static dv_launch_config cfg1(uint32_t grid, uint32_t block) {
  dv_launch_config c = {{grid, 1, 1}, {block, 1, 1}, 0, NULL};
  return c;
}

/* ---- basics ---------------------------------------------------------------------- */

static void test_scale_and_scalars(void **state) {
  (void)state;
  NEEDS_EXECUTION();
  enum { N = 1000 };
  float x[N], y[N];
  for (int i = 0; i < N; i++) x[i] = (float)i;
  dv_module *m;
  assert_ok(BUILD("basic.dvk", &m));
  dv_array *dx = test_dev_from(g_ctx, x, N, DV_FLOAT32), *dy;
  int64_t n = N;
  assert_ok(dv_device_array(g_ctx, 1, &n, dv_dtype_get(DV_FLOAT32), NULL, 'C', NULL, &dy));
  dv_arg args[] = {DV_ARG_ARRAY(dx), DV_ARG_ARRAY(dy), DV_ARG_F32(2.5f), DV_ARG_I32(N)};
  dv_launch_config c = cfg1((N + 127) / 128, 128);
  assert_ok(dv_kernel_launch(test_kernel(m, "scale"), &c, 4, args));
  test_to_host(dy, y);
  for (int i = 0; i < N; i++) assert_true(y[i] == 2.5f * (float)i);

  /* int64, uint32 and double scalars. */
  int64_t v[64];
  for (int i = 0; i < 64; i++) v[i] = (int64_t)i << 34;
  dv_array *dv = test_dev_from(g_ctx, v, 64, DV_INT64);
  dv_arg a2[] = {DV_ARG_ARRAY(dv), DV_ARG_I64((int64_t)1 << 40), DV_ARG_F64(1.5), DV_ARG_U32(64)};
  c = cfg1(2, 32);
  assert_ok(dv_kernel_launch(test_kernel(m, "add64"), &c, 4, a2));
  test_to_host(dv, v);
  for (int i = 0; i < 64; i++) assert_true(v[i] == ((int64_t)i << 34) + ((int64_t)1 << 40) + 3);

  /* A view of a pool block or a slice: the offset reaches the kernel. */
  dv_array *tail;
  dv_index idx = DV_SLICE(500, DV_NONE, 1);
  assert_ok(dv_array_slice(dx, 1, &idx, &tail));
  dv_arg a3[] = {DV_ARG_ARRAY(tail), DV_ARG_ARRAY(dy), DV_ARG_F32(1.0f), DV_ARG_I32(500)};
  c = cfg1(4, 128);
  assert_ok(dv_kernel_launch(test_kernel(m, "scale"), &c, 4, a3));
  test_to_host(dy, y);
  for (int i = 0; i < 500; i++) assert_true(y[i] == (float)(i + 500));
  dv_array_release(tail);
  dv_array_release(dv);
  dv_array_release(dx);
  dv_array_release(dy);
  dv_module_release(m);
}

static void test_indices_2d(void **state) {
  (void)state;
  NEEDS_EXECUTION();
  enum { BX = 4, BY = 2, GX = 3, GY = 2, T = BX * BY * GX * GY };
  int out[T * 8];
  memset(out, 0xff, sizeof out);
  dv_module *m;
  assert_ok(BUILD("basic.dvk", &m));
  dv_array *d = test_dev_from(g_ctx, out, T * 8, DV_INT32);
  dv_arg a[] = {DV_ARG_ARRAY(d)};
  dv_launch_config c = {{GX, GY, 1}, {BX, BY, 1}, 0, NULL};
  assert_ok(dv_kernel_launch(test_kernel(m, "indices"), &c, 1, a));
  test_to_host(d, out);
  for (int by = 0; by < GY; by++)
    for (int bx = 0; bx < GX; bx++)
      for (int ty = 0; ty < BY; ty++)
        for (int tx = 0; tx < BX; tx++) {
          int t = ((by * GX + bx) * BY + ty) * BX + tx;
          int *o = &out[t * 8];
          assert_int_equal(o[0], tx);
          assert_int_equal(o[1], ty);
          assert_int_equal(o[2], bx);
          assert_int_equal(o[3], by);
          assert_int_equal(o[4], BX * 100 + BY);
          assert_int_equal(o[5], GX * 100 + GY);
          assert_int_equal(o[6], bx * BX + tx);
          assert_int_equal(o[7], ty + bx * 1000);
        }
  dv_array_release(d);
  dv_module_release(m);
}

static void test_view_argument(void **state) {
  (void)state;
  NEEDS_EXECUTION();
  float a[6][8];
  for (int i = 0; i < 6; i++)
    for (int j = 0; j < 8; j++) a[i][j] = (float)(i * 8 + j);
  int64_t shape[2] = {6, 8};
  dv_array *h, *d, *v;
  assert_ok(dv_host_array_wrap(g_ctx, a, 2, shape, dv_dtype_get(DV_FLOAT32), NULL, &h));
  assert_ok(dv_to_device(g_ctx, h, NULL, 1, NULL, &d));
  /* d[1::2, ::-3]: rows 1,3,5 and columns 7,4,1 (negative stride). */
  dv_index idx[2] = {DV_SLICE(1, DV_NONE, 2), DV_SLICE(DV_NONE, DV_NONE, -3)};
  assert_ok(dv_array_slice(d, 2, idx, &v));
  dv_module *m;
  assert_ok(BUILD("basic.dvk", &m));
  dv_arg args[] = {DV_ARG_VIEW(v), DV_ARG_F32(-1.0f)};
  dv_launch_config c = {{1, 1, 1}, {4, 4, 1}, 0, NULL};
  assert_ok(dv_kernel_launch(test_kernel(m, "view_scale"), &c, 2, args));
  assert_ok(dv_copy_to_host(d, h, NULL, NULL));
  for (int i = 0; i < 6; i++)
    for (int j = 0; j < 8; j++) {
      bool in = (i % 2 == 1) && (j == 7 || j == 4 || j == 1);
      assert_true(a[i][j] == (in ? -1.0f : 1.0f) * (float)(i * 8 + j));
    }
  dv_array_release(v);
  dv_array_release(d);
  dv_array_release(h);
  dv_module_release(m);
}

static void test_math(void **state) {
  (void)state;
  NEEDS_EXECUTION();
  float f[8] = {0};
  double dd[3] = {-1, -1, -1};
  dv_module *m;
  assert_ok(BUILD("basic.dvk", &m));
  dv_array *df = test_dev_from(g_ctx, f, 8, DV_FLOAT32), *ddv = test_dev_from(g_ctx, dd, 3, DV_FLOAT64);
  dv_arg a[] = {DV_ARG_ARRAY(df), DV_ARG_ARRAY(ddv)};
  dv_launch_config c = cfg1(1, 1);
  assert_ok(dv_kernel_launch(test_kernel(m, "math"), &c, 2, a));
  test_to_host(df, f);
  test_to_host(ddv, dd);
  float want[8] = {4, 1, 2.5f, 3, 4, 2, 1024, 5};
  for (int i = 0; i < 8; i++) assert_true(fabsf(f[i] - want[i]) < 1e-5f);
  if (dd[0] != -1) { /* the device has doubles */
    assert_true(fabs(dd[0] - sqrt(2.0)) < 1e-12);
    assert_true(dd[1] == 1.0 && dd[2] == 0.0);
  }
  dv_array_release(df);
  dv_array_release(ddv);
  dv_module_release(m);
}

/* ---- shared memory and barriers --------------------------------------------------- */

static int reverse_run(const char *def1, const char *def2, int *wrong) {
  enum { B = 64, G = 8, N = B * G };
  int in[N], out[N];
  for (int i = 0; i < N; i++) in[i] = i * 3 + 1, out[i] = -1;
  dv_module *m;
  assert_ok(build_on(g_ctx, "reverse.dvk", 0, &m, "B=64", def1, def2, NULL));
  dv_array *di = test_dev_from(g_ctx, in, N, DV_INT32), *dout = test_dev_from(g_ctx, out, N, DV_INT32);
  dv_arg a[] = {DV_ARG_ARRAY(di), DV_ARG_ARRAY(dout)};
  dv_launch_config c = cfg1(G, B);
  dv_status rc = dv_kernel_launch(test_kernel(m, "reverse"), &c, 2, a);
  test_to_host(dout, out);
  *wrong = 0;
  for (int b = 0; b < G; b++)
    for (int t = 0; t < B; t++)
      if (out[b * B + t] != in[b * B + B - 1 - t]) (*wrong)++;
  dv_array_release(di);
  dv_array_release(dout);
  dv_module_release(m);
  return rc;
}

/* The host simulator with its access checks (kernel_check=on, checked
 * mode's default): a missing barrier is reported, not run. */
static bool access_checks(void) {
  char v[16] = "";
  return is_backend("host") && !dv_context_option(g_ctx, "kernel_check", v, sizeof v, NULL) &&
         strcmp(v, "on") == 0;
}

static void test_barrier_is_needed(void **state) {
  (void)state;
  NEEDS_EXECUTION();
  int wrong;
  assert_ok(reverse_run("USE_SYNCTHREADS", NULL, &wrong));
  assert_int_equal(wrong, 0);
  assert_ok(reverse_run("SCOPE=DV_FENCE_LOCAL", NULL, &wrong));
  assert_int_equal(wrong, 0);
  assert_ok(reverse_run("SCOPE=DV_FENCE_GLOBAL|DV_FENCE_LOCAL", NULL, &wrong));
  assert_int_equal(wrong, 0);
  /* Without the barrier: the host simulator runs each thread until it
   * blocks, so thread t reads s[63 - t] before thread 63 - t wrote it (with
   * the access checks, that read is reported).  Other devices may get
   * lucky; the result is reported, not asserted. */
  dv_status rc = reverse_run("NO_SYNC", NULL, &wrong);
  if (access_checks()) {
    assert_int_equal(rc, DV_ERR_KERNEL_FAULT);
    /* thread 31 read s[32] before thread 32 wrote it: a race (the read of
     * memory not yet written is reported as one once the write comes) */
    if (!strstr(dv_last_error(), "kernel reverse: read-write race on shared array 's' element 32: "
                                 "thread (32,0,0) of block (0,0,0) wrote it at reverse.dvk:") ||
        !strstr(dv_last_error(), "thread (31,0,0) of block (0,0,0) read it at reverse.dvk:") ||
        !strstr(dv_last_error(), "no barrier between"))
      fail_msg("%s", dv_last_error());
  } else if (is_backend("host"))
    assert_true(wrong > 0);
  else
    print_message("[ info ] %s without a barrier: %d of 512 wrong\n", g_backend, wrong);
}

static void test_wavebarrier(void **state) {
  (void)state;
  NEEDS_EXECUTION();
  enum { B = 64, G = 4, N = B * G };
  int in[N], out[N];
  for (int i = 0; i < N; i++) in[i] = i + 100;
  for (int pass = 0; pass < 2; pass++) {
    dv_module *m;
    assert_ok(build_on(g_ctx, "reverse.dvk", 0, &m, pass ? "NO_SYNC" : "WITH_SYNC", NULL));
    dv_kernel *k = test_kernel(m, "wave_swap");
    dv_kernel_attrs at;
    assert_ok(dv_kernel_attributes(k, &at));
    assert_true(at.wave_size >= 1);
    dv_array *di = test_dev_from(g_ctx, in, N, DV_INT32), *dout;
    int64_t n = N;
    assert_ok(dv_device_array(g_ctx, 1, &n, dv_dtype_get(DV_INT32), NULL, 'C', NULL, &dout));
    dv_arg a[] = {DV_ARG_ARRAY(di), DV_ARG_ARRAY(dout)};
    dv_launch_config c = cfg1(G, B);
    dv_status rc = dv_kernel_launch(k, &c, 2, a);
    if (pass && access_checks()) { /* reported (see test_barrier_is_needed) */
      assert_int_equal(rc, DV_ERR_KERNEL_FAULT);
      if (!strstr(dv_last_error(), "kernel wave_swap: read-write race on shared array 's'") ||
          !strstr(dv_last_error(), "no barrier between"))
        fail_msg("%s", dv_last_error());
    } else {
      assert_ok(rc);
    }
    test_to_host(dout, out);
    int wrong = 0;
    for (int i = 0; i < N; i++) wrong += out[i] != in[i ^ 1];
    if (!pass)
      assert_int_equal(wrong, 0);
    else if (is_backend("host") && !access_checks())
      assert_true(wrong > 0); /* even threads read before odd ones wrote */
    dv_array_release(di);
    dv_array_release(dout);
    dv_module_release(m);
  }
}

static void test_dynamic_shared_sizes(void **state) {
  (void)state;
  NEEDS_EXECUTION();
  dv_module *m;
  assert_ok(BUILD("dynshared.dvk", &m));
  dv_kernel *k = test_kernel(m, "dyn_reverse");
  /* The same kernel with three sizes, one after the other. */
  const int sizes[] = {3, 64, 200};
  for (size_t s = 0; s < 3; s++) {
    int n = sizes[s], G = 3;
    float *a = malloc(sizeof(float) * (size_t)(n * G));
    int *b = malloc(sizeof(int) * (size_t)(n * G));
    for (int i = 0; i < n * G; i++) a[i] = (float)i + 0.5f, b[i] = -i;
    dv_array *da = test_dev_from(g_ctx, a, n * G, DV_FLOAT32), *db = test_dev_from(g_ctx, b, n * G, DV_INT32);
    dv_arg args[] = {DV_ARG_ARRAY(da), DV_ARG_ARRAY(db), DV_ARG_I32(n)};
    dv_launch_config c = cfg1((uint32_t)G, (uint32_t)n);
    c.dynamic_shared = (size_t)n * (sizeof(float) + sizeof(int)) + 16;
    assert_ok(dv_kernel_launch(k, &c, 3, args));
    test_to_host(da, a);
    test_to_host(db, b);
    for (int g = 0; g < G; g++)
      for (int t = 0; t < n; t++) {
        assert_true(a[g * n + t] == (float)(g * n + n - 1 - t) + 0.5f);
        assert_int_equal(b[g * n + t], -(g * n + n - 1 - t));
      }
    dv_array_release(da);
    dv_array_release(db);
    free(a);
    free(b);
  }
  dv_module_release(m);
}

static void test_local_arrays_private(void **state) {
  (void)state;
  NEEDS_EXECUTION();
  enum { B = 32, G = 4, N = B * G, L = 16 };
  int out[N];
  dv_module *m;
  assert_ok(BUILD("local.dvk", &m));
  int64_t n = N;
  dv_array *d;
  assert_ok(dv_device_array(g_ctx, 1, &n, dv_dtype_get(DV_INT32), NULL, 'C', NULL, &d));
  dv_arg a[] = {DV_ARG_ARRAY(d)};
  dv_launch_config c = cfg1(G, B);
  assert_ok(dv_kernel_launch(test_kernel(m, "local_sum"), &c, 1, a));
  test_to_host(d, out);
  for (int t = 0; t < N; t++) {
    int want = 0;
    for (int k = 0; k < L; k++) want += t * L + k + t;
    assert_int_equal(out[t], want);
  }
  dv_array_release(d);
  dv_module_release(m);
}

static void test_constant_memory(void **state) {
  (void)state;
  NEEDS_EXECUTION();
  float coef[8];
  int32_t idx[5] = {7, 0, 3, 3, 1};
  for (int i = 0; i < 8; i++) coef[i] = (float)(i + 1) * 10.0f;
  int64_t n8 = 8, n5 = 5;
  dv_array *hc, *hi;
  assert_ok(dv_host_array_wrap(g_ctx, coef, 1, &n8, dv_dtype_get(DV_FLOAT32), NULL, &hc));
  assert_ok(dv_host_array_wrap(g_ctx, idx, 1, &n5, dv_dtype_get(DV_INT32), NULL, &hi));
  char *src = read_source("constant.dvk");
  dv_program *p;
  assert_ok(dv_program_create(g_ctx, "constant.dvk", src, &p));
  free(src);
  assert_ok(dv_program_constant(p, "coef", hc));
  assert_ok(dv_program_constant(p, "idx", hi));
  assert_ok(dv_program_define(p, "NIDX", "5"));
  /* Errors: a second declaration, a bad name, a device array, an empty one. */
  assert_status(dv_program_constant(p, "coef", hc), DV_ERR_INVALID_ARGUMENT);
  assert_status(dv_program_constant(p, "2bad", hc), DV_ERR_INVALID_ARGUMENT);
  assert_status(dv_program_define(p, "NIDX", "6"), DV_ERR_INVALID_ARGUMENT);
  /* A NULL name is a NULL argument, as the header says, with a message naming it. */
  assert_status(dv_program_define(p, NULL, "6"), DV_ERR_NULL_ARGUMENT);
  assert_non_null(strstr(dv_last_error(), "name"));
  assert_status(dv_program_constant(p, NULL, hc), DV_ERR_NULL_ARGUMENT);
  assert_non_null(strstr(dv_last_error(), "name"));
  dv_array *dev_data = test_dev_from(g_ctx, coef, 8, DV_FLOAT32), *empty;
  assert_status(dv_program_constant(p, "on_device", dev_data), DV_ERR_INVALID_ARGUMENT);
  dv_array_release(dev_data);
  int64_t zero = 0;
  assert_ok(dv_host_array_wrap(g_ctx, coef, 1, &zero, dv_dtype_get(DV_FLOAT32), NULL, &empty));
  assert_status(dv_program_constant(p, "empty", empty), DV_ERR_INVALID_ARGUMENT);
  dv_array_release(empty);
  dv_field_desc fields[2] = {{"a", dv_dtype_get(DV_INT32), 0, 0, NULL}, {"b", dv_dtype_get(DV_FLOAT32), 4, 0, NULL}};
  dv_dtype *rec;
  assert_ok(dv_dtype_record_create(fields, 2, 0, &rec));
  char recbuf[16] = {0};
  int64_t two = 2;
  dv_array *hrec;
  assert_ok(dv_host_array_wrap(g_ctx, recbuf, 1, &two, rec, NULL, &hrec));
  assert_status(dv_program_constant(p, "records", hrec), DV_ERR_BAD_DTYPE);
  dv_array_release(hrec);
  dv_dtype_release(rec);
  dv_module *m;
  assert_ok(dv_program_build(p, 0, &m));
  /* The host data may change after declaration: the copy was taken. */
  coef[7] = -1.0f;
  enum { N = 40 };
  float out[N];
  int64_t nn = N;
  dv_array *d;
  assert_ok(dv_device_array(g_ctx, 1, &nn, dv_dtype_get(DV_FLOAT32), NULL, 'C', NULL, &d));
  dv_arg a[] = {DV_ARG_ARRAY(d), DV_ARG_I32(N)};
  dv_launch_config c = cfg1(1, 64);
  dv_kernel *k = test_kernel(m, "apply_coef");
  dv_kernel_attrs at;
  assert_ok(dv_kernel_attributes(k, &at));
  assert_true(at.constant_bytes == 0 || at.constant_bytes >= 52);
  assert_ok(dv_kernel_launch(k, &c, 2, a));
  test_to_host(d, out);
  for (int i = 0; i < N; i++) assert_true(out[i] == (float)(idx[i % 5] + 1) * 20.0f);
  /* Update between launches, from the host and from a device array. */
  for (int i = 0; i < 8; i++) coef[i] = (float)(100 + i);
  assert_ok(dv_module_set_constant(m, "coef", hc, NULL));
  assert_ok(dv_kernel_launch(k, &c, 2, a));
  test_to_host(d, out);
  for (int i = 0; i < N; i++) assert_true(out[i] == (float)(100 + idx[i % 5]) * 2.0f);
  /* A strided host source: every other element of a 16-element array. */
  float wide[16];
  for (int i = 0; i < 16; i++) wide[i] = (i % 2) ? -1.0f : (float)(200 + i / 2);
  int64_t n16 = 16;
  dv_array *hw, *hstrided;
  assert_ok(dv_host_array_wrap(g_ctx, wide, 1, &n16, dv_dtype_get(DV_FLOAT32), NULL, &hw));
  dv_index ev2 = DV_SLICE(0, DV_NONE, 2);
  assert_ok(dv_array_slice(hw, 1, &ev2, &hstrided));
  assert_ok(dv_module_set_constant(m, "coef", hstrided, NULL));
  assert_ok(dv_kernel_launch(k, &c, 2, a));
  test_to_host(d, out);
  for (int i = 0; i < N; i++) assert_true(out[i] == (float)(200 + idx[i % 5]) * 2.0f);
  dv_array_release(hstrided);
  dv_array_release(hw);
  for (int i = 0; i < 8; i++) coef[i] = (float)(100 + i);
  assert_ok(dv_module_set_constant(m, "coef", hc, NULL));
  int32_t idx2[5] = {2, 2, 2, 2, 2};
  dv_array *di = test_dev_from(g_ctx, idx2, 5, DV_INT32);
  dv_stream *s;
  assert_ok(dv_stream_create(g_ctx, 0, &s));
  assert_ok(dv_module_set_constant(m, "idx", di, s));
  c.stream = s;
  assert_ok(dv_kernel_launch(k, &c, 2, a));
  assert_ok(dv_stream_synchronize(s));
  test_to_host(d, out);
  for (int i = 0; i < N; i++) assert_true(out[i] == 204.0f);
  /* Wrong name, dtype, size. */
  assert_status(dv_module_set_constant(m, "nope", hc, NULL), DV_ERR_INVALID_ARGUMENT);
  assert_status(dv_module_set_constant(m, "idx", hc, NULL), DV_ERR_DTYPE_MISMATCH);
  dv_array *tail;
  dv_index ix = DV_SLICE(1, DV_NONE, 1);
  assert_ok(dv_array_slice(hi, 1, &ix, &tail));
  assert_status(dv_module_set_constant(m, "idx", tail, NULL), DV_ERR_SHAPE_MISMATCH);
  dv_array_release(tail);
  dv_stream_release(s);
  dv_array_release(di);
  dv_array_release(d);
  dv_array_release(hc);
  dv_array_release(hi);
  dv_module_release(m);
  dv_program_destroy(p);
}

static void test_atomics_contention(void **state) {
  (void)state;
  NEEDS_EXECUTION();
  enum { B = 64, G = 16, T = B * G };
  int32_t c32[8] = {0, 0, -1, 0, 0, 0, 0, 0};
  int64_t c64[6] = {0, 0, 0, 0, 0, 0};
  float f[3] = {0, 0, 0};
  uint32_t u32[3] = {0, 0xffffffffu, 0};
  dv_module *m;
  assert_ok(BUILD("atomics.dvk", &m));
  dv_array *a = test_dev_from(g_ctx, c32, 8, DV_INT32), *b = test_dev_from(g_ctx, c64, 6, DV_INT64),
           *cf = test_dev_from(g_ctx, f, 3, DV_FLOAT32), *cu = test_dev_from(g_ctx, u32, 3, DV_UINT32);
  dv_arg args[] = {DV_ARG_ARRAY(a), DV_ARG_ARRAY(b), DV_ARG_ARRAY(cf), DV_ARG_ARRAY(cu)};
  dv_launch_config c = cfg1(G, B);
  assert_ok(dv_kernel_launch(test_kernel(m, "atomics"), &c, 4, args));
  test_to_host(a, c32);
  test_to_host(b, c64);
  test_to_host(cf, f);
  test_to_host(cu, u32);
  assert_int_equal(c32[0], T);
  assert_int_equal(c32[1], -(T - 1));
  assert_int_equal(c32[2], T - 1);
  assert_int_equal(c32[3], 7);
  assert_int_equal(c32[4], T);
  assert_int_equal(c32[5], T);
  assert_true(u32[0] == 2u * T && u32[1] == 5u && u32[2] == T - 1);
  assert_true(c64[0] == (int64_t)T << 33);
  assert_true(c64[1] == -(int64_t)(T - 1) - ((int64_t)1 << 40));
  assert_true(c64[2] == (int64_t)(T - 1) + ((int64_t)1 << 40));
  assert_true(c64[3] == 3 * (int64_t)T);
  assert_true(c64[4] == 9);
  assert_true(f[0] == (float)T && f[1] == -(float)(T - 1) && f[2] == (float)(T - 1));
  dv_array_release(a);
  dv_array_release(b);
  dv_array_release(cf);
  dv_array_release(cu);
  dv_module_release(m);
}

static void matmul_ref(const float *A, const float *B, double *C, int n) {
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) {
      double s = 0;
      for (int k = 0; k < n; k++) s += (double)A[i * n + k] * B[k * n + j];
      C[i * n + j] = s;
    }
}

static void test_matmul(void **state) {
  (void)state;
  NEEDS_EXECUTION();
  dv_module *m;
  assert_ok(BUILD("matmul.dvk", &m));
  const int ns[] = {16, 33, 100};
  for (size_t t = 0; t < 3; t++) {
    int n = ns[t];
    size_t nn = (size_t)n * (size_t)n;
    float *A = malloc(nn * 4), *B = malloc(nn * 4), *C = malloc(nn * 4);
    double *R = malloc(nn * 8);
    rnd_seed(42 + t);
    for (size_t i = 0; i < nn; i++) {
      A[i] = (float)rnd_range(-100, 100) / 50.0f;
      B[i] = (float)rnd_range(-100, 100) / 50.0f;
    }
    matmul_ref(A, B, R, n);
    dv_array *dA = test_dev_from(g_ctx, A, (int64_t)nn, DV_FLOAT32), *dB = test_dev_from(g_ctx, B, (int64_t)nn, DV_FLOAT32),
             *dC;
    int64_t sz = (int64_t)nn;
    assert_ok(dv_device_array(g_ctx, 1, &sz, dv_dtype_get(DV_FLOAT32), NULL, 'C', NULL, &dC));
    const char *names[] = {"matmul_tiled", "matmul_naive"};
    for (int v = 0; v < 2; v++) {
      assert_ok(dv_array_memset(dC, 0, NULL));
      dv_arg args[] = {DV_ARG_ARRAY(dA), DV_ARG_ARRAY(dB), DV_ARG_ARRAY(dC), DV_ARG_I32(n)};
      uint32_t g = (uint32_t)((n + 15) / 16);
      dv_launch_config c = {{g, g, 1}, {16, 16, 1}, 0, NULL};
      assert_ok(dv_kernel_launch(test_kernel(m, names[v]), &c, 4, args));
      test_to_host(dC, C);
      double err = 0;
      for (size_t i = 0; i < nn; i++) err = fmax(err, fabs(C[i] - R[i]));
      if (err > 1e-3) fail_msg("%s n=%d: max abs error %g", names[v], n, err);
    }
    dv_array_release(dA);
    dv_array_release(dB);
    dv_array_release(dC);
    free(A), free(B), free(C), free(R);
  }
  dv_module_release(m);
}

/* ---- checks, errors ------------------------------------------------------------------ */

static void test_launch_limits(void **state) {
  (void)state;
  dv_module *m;
  assert_ok(BUILD("basic.dvk", &m));
  dv_kernel *k = test_kernel(m, "empty");
  dv_kernel_attrs at;
  assert_ok(dv_kernel_attributes(k, &at));
  assert_true(at.max_threads_per_block >= 1);
  dv_arg a[] = {DV_ARG_I32(0)};
  /* Too many threads in a block. */
  dv_launch_config c = cfg1(1, (uint32_t)at.max_threads_per_block + 1);
  assert_status(dv_kernel_launch(k, &c, 1, a), DV_ERR_LAUNCH_CONFIG);
  assert_non_null(strstr(dv_last_error(), "threads"));
  assert_non_null(strstr(dv_last_error(), "limit"));
  /* A block dimension alone over its limit (x * y fits, z is 65, 2048...). */
  c = (dv_launch_config){{1, 1, 1}, {1, 1, 100000}, 0, NULL};
  assert_status(dv_kernel_launch(k, &c, 1, a), DV_ERR_LAUNCH_CONFIG);
  assert_non_null(strstr(dv_last_error(), "block.z"));
  /* A grid over the device's limit in y. */
  c = (dv_launch_config){{1, 0xffffffffu, 1}, {1, 1, 1}, 0, NULL};
  assert_status(dv_kernel_launch(k, &c, 1, a), DV_ERR_LAUNCH_CONFIG);
  assert_non_null(strstr(dv_last_error(), "grid.y"));
  /* Dynamic shared memory over the limit. */
  c = cfg1(1, 1);
  c.dynamic_shared = (size_t)1 << 40;
  assert_status(dv_kernel_launch(k, &c, 1, a), DV_ERR_LAUNCH_CONFIG);
  assert_non_null(strstr(dv_last_error(), "shared memory"));
  /* Arguments: a host array (now copied for the kernel: test_smart), NULL, an
   * unknown kind, a view of 9 dimensions. */
  float x = 0;
  int64_t one = 1;
  dv_array *h;
  assert_ok(dv_host_array_wrap(g_ctx, &x, 1, &one, dv_dtype_get(DV_FLOAT32), NULL, &h));
  dv_kernel *ks = test_kernel(m, "scale");
  dv_arg bad[] = {DV_ARG_ARRAY(h), DV_ARG_ARRAY(h), DV_ARG_F32(1), DV_ARG_I32(1)};
  c = cfg1(1, 1);
  assert_ok(dv_kernel_launch(ks, &c, 4, bad));
  bad[0] = DV_ARG_ARRAY(NULL);
  assert_status(dv_kernel_launch(ks, &c, 4, bad), DV_ERR_NULL_ARGUMENT);
  bad[0].kind = (dv_arg_kind)9;
  assert_status(dv_kernel_launch(ks, &c, 4, bad), DV_ERR_KERNEL_ARGUMENT);
  int64_t shape9[9] = {1, 1, 1, 1, 1, 1, 1, 1, 2};
  dv_array *d9;
  assert_ok(dv_device_array(g_ctx, 9, shape9, dv_dtype_get(DV_FLOAT32), NULL, 'C', NULL, &d9));
  dv_arg v9[] = {DV_ARG_VIEW(d9), DV_ARG_F32(1)};
  assert_status(dv_kernel_launch(test_kernel(m, "view_scale"), &c, 2, v9), DV_ERR_KERNEL_ARGUMENT);
  /* A wrong count is refused on every backend (the kernel layer counts). */
  dv_arg few[] = {DV_ARG_I32(1), DV_ARG_I32(2)};
  assert_status(dv_kernel_launch(k, &c, 2, few), DV_ERR_KERNEL_ARGUMENT);
  /* Unknown kernel name. */
  dv_kernel *none = (dv_kernel *)&x;
  assert_status(dv_module_kernel(m, "no_such_kernel", &none), DV_ERR_INVALID_ARGUMENT);
  assert_null(none);
  dv_array_release(d9);
  dv_array_release(h);
  dv_module_release(m);
}

static void test_build_error_log(void **state) {
  (void)state;
  dv_module *m = (dv_module *)state;
  char *src = read_source("error.dvk");
  dv_program *p;
  assert_ok(dv_program_create(g_ctx, "error.dvk", src, &p));
  free(src);
  assert_status(dv_program_build(p, DV_BUILD_NO_CACHE, &m), DV_ERR_COMPILE);
  assert_null(m);
  const char *log = dv_program_log(p);
  if (!strstr(log, "error.dvk:4") && !strstr(log, "error.dvk(4)") && !strstr(log, "error.dvk\", line 4"))
    fail_msg("the log does not point at error.dvk line 4:\n%s", log);
  assert_non_null(strstr(log, "undeclared_identifier_on_line_4"));
  assert_non_null(strstr(dv_last_error(), "error.dvk"));
  /* A long log (many errors) comes back whole. */
  char *big = malloc(200000);
  size_t off = 0;
  off += (size_t)sprintf(big + off, "DV_KERNEL(many, int n) {\n");
  for (int i = 0; i < 60; i++) off += (size_t)sprintf(big + off, "  n += missing_symbol_%03d;\n", i);
  sprintf(big + off, "}\n");
  dv_program *p2;
  assert_ok(dv_program_create(g_ctx, "many.dvk", big, &p2));
  free(big);
  assert_status(dv_program_build(p2, DV_BUILD_NO_CACHE, &m), DV_ERR_COMPILE);
  const char *log2 = dv_program_log(p2);
  assert_true(strlen(log2) > 2048);
  /* Compilers stop after some errors; the log still goes past 2 KiB. */
  assert_non_null(strstr(log2, "missing_symbol_000"));
  assert_non_null(strstr(log2, "missing_symbol_010"));
  dv_program_destroy(p2);
  /* Numba's rule: a shared or local array's length must be positive. */
  const char *zero_len[] = {
      "DV_KERNEL(z, DV_ARRAY(int, out)) { DV_BIND(int, out); DV_SHARED(int, s, 0);\n"
      "  s[0] = 1; out[0] = s[0]; }\n",
      "DV_KERNEL(z, DV_ARRAY(int, out)) { DV_BIND(int, out); DV_LOCAL_ARRAY(int, l, -2);\n"
      "  l[0] = 1; out[0] = l[0]; }\n",
      "DV_KERNEL(z, DV_ARRAY(int, out)) { DV_BIND(int, out); DV_SHARED2(int, s2, 4, 0);\n"
      "  s2[0][0] = 1; out[0] = s2[0][0]; }\n"};
  for (int i = 0; i < 3; i++) {
    dv_program *pz;
    assert_ok(dv_program_create(g_ctx, "zero.dvk", zero_len[i], &pz));
    assert_status(dv_program_build(pz, DV_BUILD_NO_CACHE, &m), DV_ERR_COMPILE);
    if (!is_backend("cuda")) assert_non_null(strstr(dv_program_log(pz), "dv__length_of_"));
    dv_program_destroy(pz);
  }
  /* Bad arguments to the program API. */
  assert_status(dv_program_options(p, "metal", "-O3"), DV_ERR_INVALID_ARGUMENT);
  assert_status(dv_program_define(p, "has space", "1"), DV_ERR_INVALID_ARGUMENT);
  assert_status(dv_program_build(p, 0x80, &m), DV_ERR_INVALID_ARGUMENT);
  dv_program *none = (dv_program *)p;
  assert_status(dv_program_create(g_ctx, "x", NULL, &none), DV_ERR_NULL_ARGUMENT);
  assert_null(none);
  dv_program_destroy(p);
  dv_program_destroy(NULL);
  dv_module_release(NULL);
}

/* ---- streams, events, deferred deallocation ------------------------------------------ */

static void test_stream_order_and_release(void **state) {
  (void)state;
  NEEDS_EXECUTION();
  enum { N = 4096 };
  float x[N], y[N];
  for (int i = 0; i < N; i++) x[i] = (float)i;
  dv_module *m;
  assert_ok(BUILD("basic.dvk", &m));
  dv_kernel *k = test_kernel(m, "scale");
  dv_stream *s1, *s2;
  assert_ok(dv_stream_create(g_ctx, 0, &s1));
  assert_ok(dv_stream_create(g_ctx, 0, &s2));
  int64_t n = N;
  dv_array *hx, *hy, *dx, *dy, *dz;
  assert_ok(dv_host_array_wrap(g_ctx, x, 1, &n, dv_dtype_get(DV_FLOAT32), NULL, &hx));
  assert_ok(dv_host_array_wrap(g_ctx, y, 1, &n, dv_dtype_get(DV_FLOAT32), NULL, &hy));
  assert_ok(dv_device_array(g_ctx, 1, &n, dv_dtype_get(DV_FLOAT32), NULL, 'C', s1, &dx));
  assert_ok(dv_device_array(g_ctx, 1, &n, dv_dtype_get(DV_FLOAT32), NULL, 'C', s1, &dy));
  assert_ok(dv_device_array(g_ctx, 1, &n, dv_dtype_get(DV_FLOAT32), NULL, 'C', s2, &dz));
  /* copy, launch, launch, copy back: all queued on s1, then an event hands
   * the result to s2. */
  assert_ok(dv_copy_to_device(dx, hx, s1));
  dv_arg a1[] = {DV_ARG_ARRAY(dx), DV_ARG_ARRAY(dy), DV_ARG_F32(2.0f), DV_ARG_I32(N)};
  dv_launch_config c = cfg1(N / 256, 256);
  c.stream = s1;
  assert_ok(dv_kernel_launch(k, &c, 4, a1));
  dv_arg a2[] = {DV_ARG_ARRAY(dy), DV_ARG_ARRAY(dx), DV_ARG_F32(3.0f), DV_ARG_I32(N)};
  assert_ok(dv_kernel_launch(k, &c, 4, a2));
  dv_event *e;
  assert_ok(dv_event_create(g_ctx, 0, &e));
  assert_ok(dv_event_record(e, s1));
  assert_ok(dv_stream_wait_event(s2, e));
  dv_arg a3[] = {DV_ARG_ARRAY(dx), DV_ARG_ARRAY(dz), DV_ARG_F32(0.5f), DV_ARG_I32(N)};
  c.stream = s2;
  assert_ok(dv_kernel_launch(k, &c, 4, a3));
  /* Release arrays while the launches are queued: they must live on. */
  dv_array_release(dx);
  dv_array_release(dy);
  assert_ok(dv_copy_to_host(dz, hy, s2, NULL));
  assert_ok(dv_context_flush_deallocs(g_ctx));
  /* Allocations of the same size on s1 may reuse the memory only in order. */
  dv_array *reuse;
  assert_ok(dv_device_array(g_ctx, 1, &n, dv_dtype_get(DV_FLOAT32), NULL, 'C', s1, &reuse));
  assert_ok(dv_array_memset(reuse, 0, s1));
  assert_ok(dv_stream_synchronize(s2));
  assert_ok(dv_stream_synchronize(s1));
  for (int i = 0; i < N; i++) assert_true(y[i] == (float)i * 3.0f);
  dv_array_release(reuse);
  dv_event_release(e);
  dv_array_release(dz);
  dv_array_release(hx);
  dv_array_release(hy);
  dv_stream_release(s1);
  dv_stream_release(s2);
  dv_module_release(m);
}

static void test_empty_array_argument(void **state) {
  (void)state;
  dv_module *m;
  assert_ok(BUILD("basic.dvk", &m));
  int64_t zero = 0;
  dv_array *e1, *e2;
  assert_ok(dv_device_array(g_ctx, 1, &zero, dv_dtype_get(DV_FLOAT32), NULL, 'C', NULL, &e1));
  assert_ok(dv_device_array(g_ctx, 1, &zero, dv_dtype_get(DV_FLOAT32), NULL, 'C', NULL, &e2));
  dv_arg a[] = {DV_ARG_ARRAY(e1), DV_ARG_ARRAY(e2), DV_ARG_F32(1.0f), DV_ARG_I32(0)};
  dv_launch_config c = cfg1(1, 32);
  assert_ok(dv_kernel_launch(test_kernel(m, "scale"), &c, 4, a));
  dv_array_release(e1);
  dv_array_release(e2);
  dv_module_release(m);
}

/* An array allocated on the default stream, used by a slow kernel on another
 * stream and released at once: a stream-ordered manager must not give its
 * memory to the default stream's next allocation before the kernel ran. */
static void test_release_during_cross_stream_launch(void **state) {
  (void)state;
  enum { N = 256 };
  dv_module *m;
  assert_ok(BUILD("basic.dvk", &m));
  dv_kernel *k = test_kernel(m, "spin_fill");
  dv_stream *s;
  assert_ok(dv_stream_create(g_ctx, DV_STREAM_NON_BLOCKING, &s));
  int64_t n = N;
  dv_array *a, *b;
  assert_ok(dv_device_array(g_ctx, 1, &n, dv_dtype_get(DV_INT32), NULL, 'C', NULL, &a));
  dv_arg args[] = {DV_ARG_ARRAY(a), DV_ARG_I32(N), DV_ARG_I32(is_backend("host") ? 200000 : 20000)};
  dv_launch_config c = cfg1(N / 64, 64);
  c.stream = s;
  assert_ok(dv_kernel_launch(k, &c, 3, args));
  dv_array_release(a);
  assert_ok(dv_context_flush_deallocs(g_ctx));
  assert_ok(dv_device_array(g_ctx, 1, &n, dv_dtype_get(DV_INT32), NULL, 'C', NULL, &b));
  assert_ok(dv_array_memset(b, 0, NULL));
  assert_ok(dv_stream_synchronize(s));
  int out[N];
  test_to_host(b, out);
  for (int i = 0; i < N; i++)
    if (out[i] != 0) fail_msg("element %d is %d: the kernel wrote into memory given to a new array", i, out[i]);
  dv_array_release(b);
  dv_stream_release(s);
  dv_module_release(m);
}

/* Issue 22, item 1, for constants: a constant uploaded from a device array
 * on another stream than the array's reads it when the upload runs; the
 * array released meanwhile must not have its block handed out (to a new
 * array on its stream, written at once) before that.  The upload waits
 * behind a callback that lets go after 0.3 s. */
static void gate_300ms(dv_stream *s, dv_status st, void *u) {
  (void)s, (void)st;
  for (int i = 0; i < 300 && !atomic_load((_Atomic int *)u); i++) usleep(1000);
}

static void test_constant_from_released_array(void **state) {
  (void)state;
  NEEDS_EXECUTION();
  if (!strstr(g_backend, "-pool")) skip(); /* the direct manager frees through the driver */
  float coef[8];
  int32_t idx[5] = {0, 0, 0, 0, 0}, three[5] = {3, 3, 3, 3, 3};
  for (int i = 0; i < 8; i++) coef[i] = (float)(100 + i);
  int64_t n8 = 8, n5 = 5;
  dv_array *hc, *hi, *h3;
  assert_ok(dv_host_array_wrap(g_ctx, coef, 1, &n8, dv_dtype_get(DV_FLOAT32), NULL, &hc));
  assert_ok(dv_host_array_wrap(g_ctx, idx, 1, &n5, dv_dtype_get(DV_INT32), NULL, &hi));
  assert_ok(dv_host_array_wrap(g_ctx, three, 1, &n5, dv_dtype_get(DV_INT32), NULL, &h3));
  char *src = read_source("constant.dvk");
  dv_program *p;
  assert_ok(dv_program_create(g_ctx, "constant.dvk", src, &p));
  free(src);
  assert_ok(dv_program_constant(p, "coef", hc));
  assert_ok(dv_program_constant(p, "idx", hi));
  assert_ok(dv_program_define(p, "NIDX", "5"));
  dv_module *m;
  assert_ok(dv_program_build(p, 0, &m));
  dv_stream *sa, *sb;
  assert_ok(dv_stream_create(g_ctx, 0, &sa));
  assert_ok(dv_stream_create(g_ctx, 0, &sb));
  dv_array *di, *x;
  assert_ok(dv_device_array(g_ctx, 1, &n5, dv_dtype_get(DV_INT32), NULL, 'C', sa, &di));
  assert_ok(dv_copy_to_device(di, h3, NULL));
  _Atomic int open = 0;
  assert_ok(dv_stream_add_callback(sb, gate_300ms, &open));
  assert_ok(dv_module_set_constant(m, "idx", di, sb)); /* reads di when it runs */
  dv_array_release(di);
  assert_ok(dv_context_flush_deallocs(g_ctx));
  assert_ok(dv_device_array(g_ctx, 1, &n5, dv_dtype_get(DV_INT32), NULL, 'C', sa, &x));
  assert_ok(dv_array_memset(x, 0, sa)); /* idx 0 everywhere, if the upload read this */
  for (int i = 0; i < 200 && dv_stream_query(sa) == DV_ERR_NOT_READY; i++) usleep(1000);
  atomic_store(&open, 1);
  enum { N = 40 };
  int64_t nn = N;
  dv_array *d;
  assert_ok(dv_device_array(g_ctx, 1, &nn, dv_dtype_get(DV_FLOAT32), NULL, 'C', sb, &d));
  dv_arg a[] = {DV_ARG_ARRAY(d), DV_ARG_I32(N)};
  dv_launch_config c = cfg1(1, 64);
  c.stream = sb;
  assert_ok(dv_kernel_launch(test_kernel(m, "apply_coef"), &c, 2, a));
  assert_ok(dv_context_synchronize(g_ctx));
  float out[N];
  test_to_host(d, out);
  for (int i = 0; i < N; i++)
    if (out[i] != 206.0f) fail_msg("element %d is %g, not 206: the constant upload read the memory of a new array", i, (double)out[i]);
  dv_array_release(d), dv_array_release(x);
  dv_array_release(hc), dv_array_release(hi), dv_array_release(h3);
  dv_stream_release(sa), dv_stream_release(sb);
  dv_module_release(m);
  dv_program_destroy(p);
}

/* ---- native handles and foreign memory ------------------------------------------------ */

static int g_released;
static void on_release(void *user) { g_released += *(int *)user; }

static void test_native_round_trip(void **state) {
  (void)state;
  float x[16];
  for (int i = 0; i < 16; i++) x[i] = (float)i;
  dv_array *d = test_dev_from(g_ctx, x, 16, DV_FLOAT32);
  void *buf = NULL;
  size_t off = 99;
  assert_ok(dv_array_native(d, &buf, &off));
  assert_non_null(buf);
  void *nctx = (void *)1, *ndev = (void *)1;
  assert_ok(dv_context_native(g_ctx, &nctx, &ndev));
  if (!is_backend("host")) assert_non_null(nctx);
  dv_stream *def = dv_context_default_stream(g_ctx);
  void *q = NULL;
  dv_status rs = dv_stream_native(def, &q);
  if (is_backend("host"))
    assert_int_equal(rs, DV_ERR_NOT_SUPPORTED);
  else
    assert_true(rs == DV_OK && q != NULL);
  /* Wrap the same memory as a second array (borrowed) and read it back. */
  int one = 1;
  g_released = 0;
  dv_array *w;
  int64_t n = 8;
  int64_t st = 8; /* every other element */
  assert_ok(dv_device_array_wrap(g_ctx, buf, off + 4, 16 * sizeof(float), 1, &n,
                                 dv_dtype_get(DV_FLOAT32), &st, on_release, &one, &w));
  float y[8];
  test_to_host(w, y);
  for (int i = 0; i < 8; i++) assert_true(y[i] == (float)(1 + 2 * i));
  /* Out of bounds layout is refused and release is not called. */
  int64_t n9 = 9;
  dv_array *bad = (dv_array *)&one;
  assert_status(dv_device_array_wrap(g_ctx, buf, off + 4, 16 * sizeof(float), 1, &n9,
                                     dv_dtype_get(DV_FLOAT32), &st, on_release, &one, &bad),
                DV_ERR_BAD_STRIDES);
  assert_null(bad);
  /* Misaligned strides or element 0, and element counts that overflow. */
  int64_t st2 = 2;
  assert_status(dv_device_array_wrap(g_ctx, buf, off, 16 * sizeof(float), 1, &n,
                                     dv_dtype_get(DV_FLOAT32), &st2, NULL, NULL, &bad),
                DV_ERR_BAD_STRIDES);
  assert_status(dv_device_array_wrap(g_ctx, buf, off + 1, 16 * sizeof(float), 1, &n,
                                     dv_dtype_get(DV_FLOAT32), NULL, NULL, NULL, &bad),
                DV_ERR_BAD_STRIDES);
  int64_t huge[2] = {(int64_t)1 << 40, (int64_t)1 << 40}, zst[2] = {0, 0};
  assert_status(dv_device_array_wrap(g_ctx, buf, off, 16 * sizeof(float), 2, huge,
                                     dv_dtype_get(DV_FLOAT32), zst, NULL, NULL, &bad),
                DV_ERR_OVERFLOW);
  assert_status(dv_device_array_wrap(g_ctx, buf, (size_t)INT64_MAX, 16 * sizeof(float), 1, &n,
                                     dv_dtype_get(DV_FLOAT32), NULL, NULL, NULL, &bad),
                DV_ERR_BAD_STRIDES);
  assert_int_equal(g_released, 0);
  dv_array_release(w);
  assert_ok(dv_context_flush_deallocs(g_ctx));
  assert_int_equal(g_released, 1);
  /* The original is untouched by the wrapper's release. */
  test_to_host(d, x);
  for (int i = 0; i < 16; i++) assert_true(x[i] == (float)i);
  dv_array_release(d);
  /* Host arrays have no native device memory. */
  dv_array *h;
  assert_ok(dv_host_array_wrap(g_ctx, x, 1, &n, dv_dtype_get(DV_FLOAT32), NULL, &h));
  assert_status(dv_array_native(h, &buf, &off), DV_ERR_MISUSE);
  assert_null(buf);
  dv_array_release(h);
}

/* ---- the compiled-module cache --------------------------------------------------------- */

static int count_entries(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return -1;
  int n = 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;)
    if (e->d_name[0] != '.') n++;
  closedir(d);
  return n;
}

static void corrupt_entries(const char *dir) {
  DIR *d = opendir(dir);
  assert_non_null(d);
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    if (e->d_name[0] == '.') continue;
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    fseek(f, -8, SEEK_END);
    fputs("garbage!", f);
    fclose(f);
  }
  closedir(d);
}

static void test_module_cache(void **state) {
  (void)state;
  char dir[300];
  snprintf(dir, sizeof dir, "%s/cache-%s", g_cache_dir, g_backend);
  char opt[320];
  snprintf(opt, sizeof opt, "kernel_cache_dir=%s", dir);
  dv_context *c1;
  assert_ok(test_context(&c1, opt, NULL));
  dv_module *m1, *m2, *m3, *m4;
  assert_ok(build_on(c1, "basic.dvk", 0, &m1, "CACHE_TEST=1", NULL));
  assert_int_equal(dv_module_from_cache(m1), 0);
  assert_int_equal(count_entries(dir), 1);
  /* A second build of the same program (a new context: nothing in memory). */
  dv_context *c2;
  assert_ok(test_context(&c2, opt, NULL));
  assert_ok(build_on(c2, "basic.dvk", 0, &m2, "CACHE_TEST=1", NULL));
  assert_int_equal(dv_module_from_cache(m2), 1);
  /* The cached module works. */
  dv_kernel *k;
  assert_ok(dv_module_kernel(m2, "scale", &k));
  /* Another define is another entry. */
  assert_ok(build_on(c2, "basic.dvk", 0, &m3, "CACHE_TEST=2", NULL));
  assert_int_equal(dv_module_from_cache(m3), 0);
  assert_int_equal(count_entries(dir), 2);
  /* A corrupted entry is ignored and rebuilt. */
  corrupt_entries(dir);
  assert_ok(build_on(c2, "basic.dvk", 0, &m4, "CACHE_TEST=1", NULL));
  assert_int_equal(dv_module_from_cache(m4), 0);
  dv_module_release(m4);
  assert_ok(build_on(c2, "basic.dvk", 0, &m4, "CACHE_TEST=1", NULL));
  assert_int_equal(dv_module_from_cache(m4), 1);
  /* DV_BUILD_NO_CACHE and the kernel_cache option. */
  dv_module *m5;
  assert_ok(build_on(c2, "basic.dvk", DV_BUILD_NO_CACHE, &m5, "CACHE_TEST=1", NULL));
  assert_int_equal(dv_module_from_cache(m5), 0);
  dv_context *c3;
  assert_ok(test_context(&c3, opt, "kernel_cache=off", NULL));
  dv_module *m6;
  assert_ok(build_on(c3, "basic.dvk", 0, &m6, "CACHE_TEST=3", NULL));
  assert_int_equal(dv_module_from_cache(m6), 0);
  assert_int_equal(count_entries(dir), 2);
  /* A module keeps its context busy. */
  assert_status(dv_context_destroy(c3), DV_ERR_BUSY);
  assert_non_null(strstr(dv_last_error(), "module"));
  dv_module_release(m6);
  assert_ok(dv_context_destroy(c3));
  dv_module_release(m1);
  dv_module_release(m2);
  dv_module_release(m3);
  dv_module_release(m4);
  dv_module_release(m5);
  assert_ok(dv_context_destroy(c2));
  assert_ok(dv_context_destroy(c1));
}

/* ---- the host simulator's checks -------------------------------------------------------- */

static void expect_fault(dv_module *m, const char *name, uint32_t block, size_t dyn,
                         const char *must1, const char *must2) {
  int out[64] = {0};
  dv_array *d = test_dev_from(g_ctx, out, 64, DV_INT32);
  dv_arg a[] = {DV_ARG_ARRAY(d), DV_ARG_I32(32)};
  dv_launch_config c = cfg1(1, block);
  c.dynamic_shared = dyn;
  dv_status rc = dv_kernel_launch(test_kernel(m, name), &c, strcmp(name, "dyn_overflow") ? 1 : 2, a);
  if (rc != DV_ERR_KERNEL_FAULT)
    fail_msg("%s: %s (%s), expected DV_ERR_KERNEL_FAULT", name, dv_status_name(rc), dv_last_error());
  if (!strstr(dv_last_error(), name) || (must1 && !strstr(dv_last_error(), must1)) ||
      (must2 && !strstr(dv_last_error(), must2)))
    fail_msg("%s: message lacks \"%s\"/\"%s\": %s", name, must1 ? must1 : "",
             must2 ? must2 : "", dv_last_error());
  dv_array_release(d);
}

static void test_host_checks(void **state) {
  (void)state;
  if (!is_backend("host")) {
    /* Never on a GPU or PoCL: divergent barriers hang or crash them. */
    skip();
  }
  /* Divergence, redzones and dynamic shared memory bounds are checked mode's
   * (fast mode's divergent barriers: tests/backends/host/test_modes.c). */
  CHECKED_MODE_ONLY(g_ctx);
  dv_module *m;
  /* DV_BUILD_DEBUG: the shared redzone checks are on in every build type
   * (kernel_check defaults to off in Release builds). */
  assert_ok(build_on(g_ctx, "divergent.dvk", DV_BUILD_DEBUG, &m, NULL));
  expect_fault(m, "early_return", 64, 0, "divergent.dvk:8", "block (0,0,0)");
  expect_fault(m, "two_sites", 8, 0, "divergent.dvk:15", "thread");
  expect_fault(m, "loop_count", 8, 0, "divergent.dvk:22", NULL);
  expect_fault(m, "shared_oob", 17, 0, "small", NULL);
  expect_fault(m, "dyn_overflow", 8, 64, "dynamic", NULL);
  /* After faults the context still works. */
  dv_module *m2;
  assert_ok(BUILD("basic.dvk", &m2));
  dv_arg a[] = {DV_ARG_I32(0)};
  dv_launch_config c = cfg1(2, 2);
  assert_ok(dv_kernel_launch(test_kernel(m2, "empty"), &c, 1, a));
  dv_module_release(m2);
  dv_module_release(m);
}

int main(int argc, char **argv) {
  /* Every context of this suite caches into a directory of its own. */
  int begin = kernel_suite_begin(argc, argv, "kernels", "default", g_cache_dir, sizeof g_cache_dir);
  if (begin) return begin;
  const struct CMUnitTest tests[] = {
      T(test_scale_and_scalars),   T(test_indices_2d),       T(test_view_argument),
      T(test_math),                T(test_barrier_is_needed), T(test_wavebarrier),
      T(test_dynamic_shared_sizes), T(test_local_arrays_private), T(test_constant_memory),
      T(test_atomics_contention),  T(test_matmul),           T(test_launch_limits),
      T(test_build_error_log),     T(test_stream_order_and_release), T(test_native_round_trip),
      T(test_module_cache),        T(test_host_checks),      T(test_empty_array_argument),
      T(test_release_during_cross_stream_launch), T(test_constant_from_released_array),
  };
  return kernel_suite_end(g_cache_dir, test_main(argc, argv, "kernels", tests, sizeof tests / sizeof tests[0]));
}
