#define _DEFAULT_SOURCE /* mkstemp, dup */
/*
 * The host simulator's two modes give the same results (issue 23, item 5):
 * deterministic kernels (tests/kernels/modes.dvk) run in two contexts on
 * the host backend, one with host_mode=fast and one with host_mode=checked,
 * and every output must agree bit for bit between them (memcmp) and with a
 * reference computed here in plain C.  Covered: integer and float
 * arithmetic, 1-D, 2-D and 3-D launches with partial blocks, a strided view,
 * shared memory with barriers (a tree reduction, a scan with a barrier in a
 * loop, a reversal), atomics with one possible result, wave operations,
 * private arrays, constant memory and dv_printf's output.  Each context
 * must also report the mode it runs in (dv_context_option), and a divergent
 * barrier must not hang fast mode.
 *
 * Host only: on another backend the suite is skipped, by name.  Built with
 * -ffp-contract=off so the reference rounds every float operation as the
 * kernels' C11 does.
 */
#include <limits.h>
#include <math.h>
#include <unistd.h>

#include "common.h"

#ifndef DV_TEST_KERNELS_DIR
#error "DV_TEST_KERNELS_DIR must name tests/kernels"
#endif

enum { BLOCK = 64, NCOEF = 5, WAVE = 32 };
static const float g_coef[NCOEF] = {0.5f, -1.25f, 0.375f, 2.0f, -0.0625f};
static const int32_t g_lut[16] = {3, -1, 4, 1, -5, 9, 2, -6, 5, 3, -5, 8, 9, -7, 9, 3};

static char g_cache_dir[256];

/* The two contexts, [0] fast and [1] checked, and modes.dvk built on each. */
enum { FAST, CHECKED };
static const char *const g_mode[2] = {"fast", "checked"};
static dv_context *g_c[2];
static dv_module *g_m[2];

static dv_module *build_modes(dv_context *c) {
  char path[512];
  snprintf(path, sizeof path, "%s/modes.dvk", DV_TEST_KERNELS_DIR);
  char *src = read_text_file(path);
  dv_program *p = NULL;
  assert_ok(dv_program_create(c, "modes.dvk", src, &p));
  free(src);
  char num[16];
  snprintf(num, sizeof num, "%d", BLOCK);
  assert_ok(dv_program_define(p, "BLOCK", num));
  snprintf(num, sizeof num, "%d", NCOEF);
  assert_ok(dv_program_define(p, "NCOEF", num));
  int64_t nc = NCOEF, nl = 16;
  dv_array *hc = NULL, *hl = NULL;
  assert_ok(dv_host_array_wrap(c, (void *)g_coef, 1, &nc, dv_dtype_get(DV_FLOAT32), NULL, &hc));
  assert_ok(dv_host_array_wrap(c, (void *)g_lut, 1, &nl, dv_dtype_get(DV_INT32), NULL, &hl));
  assert_ok(dv_program_constant(p, "coef", hc));
  assert_ok(dv_program_constant(p, "lut", hl));
  dv_array_release(hc);
  dv_array_release(hl);
  dv_module *m = NULL;
  dv_status rc = dv_program_build(p, 0, &m);
  if (rc)
    fail_msg("build on host_mode=%s: %s: %s\n%s", g_mode[c == g_c[FAST] ? FAST : CHECKED],
             dv_status_name(rc), dv_last_error(), dv_program_log(p));
  dv_program_destroy(p);
  return m;
}

static int modes_setup(void **state) {
  (void)state;
  for (int k = 0; k < 2; k++) {
    char opt[64];
    snprintf(opt, sizeof opt, "host_mode=%s", g_mode[k]);
    dv_status rc = test_context(&g_c[k], opt, NULL);
    if (rc) {
      fprintf(stderr, "context with %s: %s: %s\n", opt, dv_status_name(rc), dv_last_error());
      return -1;
    }
  }
  g_m[FAST] = build_modes(g_c[FAST]);
  g_m[CHECKED] = build_modes(g_c[CHECKED]);
  return 0;
}

static int modes_teardown(void **state) {
  (void)state;
  int bad = 0;
  for (int k = 0; k < 2; k++) {
    dv_module_release(g_m[k]);
    g_m[k] = NULL;
    dv_status rc = dv_context_check_memory(g_c[k]);
    if (!rc) rc = dv_context_destroy(g_c[k]);
    if (rc) {
      fprintf(stderr, "host_mode=%s: %s: %s\n", g_mode[k], dv_status_name(rc), dv_last_error());
      bad = -1;
    }
    g_c[k] = NULL;
  }
  return bad;
}
#define TM(f) cmocka_unit_test_setup_teardown(f, modes_setup, modes_teardown)

/* ---- running one kernel in both modes --------------------------------------------- */

/* An array argument: n elements of type t, starting as init (copied to the
 * device), copied back after the launch into out[FAST] and out[CHECKED]. */
typedef struct marr {
  const void *init;
  int64_t n;
  dv_type_id t;
  void *out[2];
} marr;

static size_t marr_bytes(const marr *a) {
  return (size_t)a->n * dv_dtype_itemsize(dv_dtype_get(a->t));
}

/* Launch `kernel` with the arrays, then the scalars, in mode k. */
static void launch_mode(int k, const char *kernel, dv_launch_config cfg, marr *arrs, int na,
                        const dv_arg *scalars, int ns) {
  dv_array *d[8];
  dv_arg args[12];
  assert_true(na <= 8 && na + ns <= 12);
  for (int i = 0; i < na; i++) {
    d[i] = test_dev_from(g_c[k], arrs[i].init, arrs[i].n, arrs[i].t);
    args[i] = DV_ARG_ARRAY(d[i]);
  }
  for (int i = 0; i < ns; i++) args[na + i] = scalars[i];
  dv_status rc = dv_kernel_launch(test_kernel(g_m[k], kernel), &cfg, na + ns, args);
  if (rc)
    fail_msg("%s in host_mode=%s: %s: %s", kernel, g_mode[k], dv_status_name(rc), dv_last_error());
  for (int i = 0; i < na; i++) {
    arrs[i].out[k] = malloc(marr_bytes(&arrs[i]));
    assert_non_null(arrs[i].out[k]);
    test_to_host(d[i], arrs[i].out[k]);
    dv_array_release(d[i]);
  }
}

static void run_both(const char *kernel, dv_launch_config cfg, marr *arrs, int na,
                     const dv_arg *scalars, int ns) {
  launch_mode(FAST, kernel, cfg, arrs, na, scalars, ns);
  launch_mode(CHECKED, kernel, cfg, arrs, na, scalars, ns);
}

static void free_both(marr *arrs, int na) {
  for (int i = 0; i < na; i++) free(arrs[i].out[FAST]), free(arrs[i].out[CHECKED]);
}

/* The first byte where two results differ, in the failure message. */
static void same_bytes(const char *what, const char *a_name, const void *a, const char *b_name,
                       const void *b, size_t bytes) {
  if (memcmp(a, b, bytes) == 0) return;
  size_t i = 0;
  while (((const unsigned char *)a)[i] == ((const unsigned char *)b)[i]) i++;
  fail_msg("%s: %s and %s differ first at byte %zu of %zu (0x%02x, 0x%02x)", what, a_name, b_name,
           i, bytes, ((const unsigned char *)a)[i], ((const unsigned char *)b)[i]);
}

/* Fast and checked agree bit for bit, and both with the reference. */
static void check_output(const char *what, const marr *a, const void *ref) {
  same_bytes(what, "fast mode", a->out[FAST], "checked mode", a->out[CHECKED], marr_bytes(a));
  same_bytes(what, "fast mode", a->out[FAST], "the C reference", ref, marr_bytes(a));
}

static dv_launch_config launch1(uint32_t grid, uint32_t block) {
  dv_launch_config c = {{grid, 1, 1}, {block, 1, 1}, 0, NULL};
  return c;
}

/* Inputs: n int32 in [-lim, lim] (xorshift from seed). */
static void fill_i32(int32_t *v, int n, int32_t lim, uint64_t seed) {
  rnd_seed(seed);
  for (int i = 0; i < n; i++) v[i] = (int32_t)rnd_range(-lim, lim);
}
static void fill_f32(float *v, int n, uint64_t seed) {
  rnd_seed(seed);
  for (int i = 0; i < n; i++) v[i] = (float)rnd_range(-40000, 40000) / 1024.0f;
}

/* ---- the tests ---------------------------------------------------------------------- */

/* Each context reports the mode it was given; a context that does not name
 * one follows DV_HOST_MODE (as the host-fast CTest variants set it), else
 * the build's default. */
static void test_mode_reported(void **state) {
  (void)state;
  for (int k = 0; k < 2; k++) {
    char buf[32] = "";
    dv_option_source src;
    assert_ok(dv_context_option(g_c[k], "host_mode", buf, sizeof buf, &src));
    assert_string_equal(buf, g_mode[k]);
    assert_int_equal(src, DV_SOURCE_API);
  }
  dv_context *c = NULL;
  assert_ok(test_context(&c, NULL));
  char buf[32] = "";
  dv_option_source src;
  assert_ok(dv_context_option(c, "host_mode", buf, sizeof buf, &src));
  const char *env = getenv("DV_HOST_MODE");
  if (env && *env) {
    assert_string_equal(buf, env);
    assert_int_equal(src, DV_SOURCE_ENV);
  } else {
#ifdef NDEBUG
    assert_string_equal(buf, "fast");
#else
    assert_string_equal(buf, "checked");
#endif
    assert_int_equal(src, DV_SOURCE_DEFAULT);
  }
  assert_ok(dv_context_destroy(c));
  /* Anything but the two modes is refused, naming the option. */
  dv_config *cfg = NULL;
  assert_ok(dv_config_create(&cfg));
  assert_status(dv_config_set(cfg, "host_mode", "quick"), DV_ERR_BAD_OPTION);
  assert_non_null(strstr(dv_last_error(), "host_mode"));
  dv_config_destroy(cfg);
}

static void test_arithmetic(void **state) {
  (void)state;
  enum { N = 1000 };
  static int32_t a[N], b[N], oi[N], ri[N];
  static float x[N], of[N], rf[N];
  static double y[N], od[N], rd[N];
  static uint64_t ou[N], ru[N];
  fill_i32(a, N, 1000000, 11);
  fill_i32(b, N, 70000, 12);
  fill_f32(x, N, 13);
  rnd_seed(14);
  for (int i = 0; i < N; i++) y[i] = (double)rnd_range(-(1 << 30), 1 << 30) / 4096.0;
  memset(oi, 0x5a, sizeof oi), memset(ou, 0x5a, sizeof ou);
  memset(of, 0x5a, sizeof of), memset(od, 0x5a, sizeof od);
  marr arrs[] = {{a, N, DV_INT32, {0}},    {b, N, DV_INT32, {0}},   {x, N, DV_FLOAT32, {0}},
                 {y, N, DV_FLOAT64, {0}},  {oi, N, DV_INT32, {0}},  {ou, N, DV_UINT64, {0}},
                 {of, N, DV_FLOAT32, {0}}, {od, N, DV_FLOAT64, {0}}};
  dv_arg sc[] = {DV_ARG_I32(N)};
  run_both("arith", launch1((N + 127) / 128, 128), arrs, 8, sc, 1);
  for (int i = 0; i < N; i++) {
    int32_t ai = a[i], bi = b[i];
    uint32_t m = (uint32_t)ai * (uint32_t)bi;
    uint32_t r = (m ^ ((uint32_t)ai >> 3)) + (uint32_t)(ai / (bi | 1)) + (uint32_t)(ai % 7) -
                 (uint32_t)bi * 4u + (ai < bi ? 11u : 0u - 13u);
    ri[i] = (int32_t)r;
    uint64_t u = (uint64_t)(uint32_t)ai * 0x9E3779B97F4A7C15ull + (uint64_t)i;
    ru[i] = (u << 13 | u >> 51) ^ (u / 977u) ^ (uint64_t)(int64_t)bi;
    float xf = x[i];
    float t1 = xf * 1.5f;
    float t2 = t1 + 0.25f;
    float t3 = xf / (fabsf(xf) + 3.0f);
    rf[i] =
        t2 * xf - t3 + sqrtf(fabsf(xf)) + (float)ai * 0.001f + fminf(xf, 0.5f) + floorf(xf * 3.0f);
    double yd = y[i];
    double s1 = yd * yd;
    double s2 = s1 - yd / 7.0;
    rd[i] = s2 + sqrt(fabs(yd)) * (double)xf + (double)ai / 3.0 + fmax(yd, -1.0);
  }
  for (int i = 0; i < 4; i++) check_output("arith: inputs unchanged", &arrs[i], arrs[i].init);
  check_output("arith: int32", &arrs[4], ri);
  check_output("arith: uint64", &arrs[5], ru);
  check_output("arith: float32", &arrs[6], rf);
  check_output("arith: float64", &arrs[7], rd);
  free_both(arrs, 8);
}

static void test_grid_3d(void **state) {
  (void)state;
  enum { NX = 10, NY = 7, NZ = 5, BX = 4, BY = 3, BZ = 2, E = NX * NY * NZ };
  static int32_t who[E], rwho[E];
  static float val[E], rval[E];
  memset(who, 0xff, sizeof who), memset(val, 0xff, sizeof val);
  marr arrs[] = {{who, E, DV_INT32, {0}}, {val, E, DV_FLOAT32, {0}}};
  dv_arg sc[] = {DV_ARG_I32(NX), DV_ARG_I32(NY), DV_ARG_I32(NZ)};
  dv_launch_config cfg = {
      {(NX + BX - 1) / BX, (NY + BY - 1) / BY, (NZ + BZ - 1) / BZ}, {BX, BY, BZ}, 0, NULL};
  run_both("grid3d", cfg, arrs, 2, sc, 3);
  for (int z = 0; z < NZ; z++)
    for (int y = 0; y < NY; y++)
      for (int x = 0; x < NX; x++) {
        int e = (z * NY + y) * NX + x;
        rwho[e] =
            ((x % BX * 8 + y % BY) * 8 + z % BZ) * 1000 + (x / BX * 16 + y / BY) * 16 + z / BZ;
        rval[e] = (float)x * 0.5f + (float)y * 0.25f - (float)z / 3.0f;
      }
  check_output("grid3d: who", &arrs[0], rwho);
  check_output("grid3d: val", &arrs[1], rval);
  free_both(arrs, 2);
}

/* A 2-D launch over d[1::2, ::-3] of a 23x37 float32 array (negative
 * stride, partial blocks at both edges); the whole array comes back. */
static void test_view_2d(void **state) {
  (void)state;
  enum { R = 23, C = 37 };
  static float init[R][C], out[2][R][C], ref[R][C];
  fill_f32(&init[0][0], R * C, 21);
  int64_t shape[2] = {R, C};
  for (int k = 0; k < 2; k++) {
    dv_array *h = NULL, *d = NULL, *v = NULL;
    memcpy(out[k], init, sizeof init);
    assert_ok(dv_host_array_wrap(g_c[k], out[k], 2, shape, dv_dtype_get(DV_FLOAT32), NULL, &h));
    assert_ok(dv_to_device(g_c[k], h, NULL, 1, NULL, &d));
    dv_index idx[2] = {DV_SLICE(1, DV_NONE, 2), DV_SLICE(DV_NONE, DV_NONE, -3)};
    assert_ok(dv_array_slice(d, 2, idx, &v));
    assert_int_equal(dv_array_shape(v)[0], 11);
    assert_int_equal(dv_array_shape(v)[1], 13);
    dv_arg args[] = {DV_ARG_VIEW(v), DV_ARG_F32(-1.5f)};
    dv_launch_config cfg = {{2, 3, 1}, {8, 4, 1}, 0, NULL};
    assert_ok(dv_kernel_launch(test_kernel(g_m[k], "view2d"), &cfg, 2, args));
    assert_ok(dv_copy_to_host(d, h, NULL, NULL));
    dv_array_release(v), dv_array_release(d), dv_array_release(h);
  }
  memcpy(ref, init, sizeof init);
  for (int i = 0; i < 11; i++)
    for (int j = 0; j < 13; j++) {
      float *e = &ref[1 + 2 * i][C - 1 - 3 * j];
      *e = *e * -1.5f + (float)i - (float)j / 4.0f;
    }
  same_bytes("view2d", "fast mode", out[FAST], "checked mode", out[CHECKED], sizeof ref);
  same_bytes("view2d", "fast mode", out[FAST], "the C reference", ref, sizeof ref);
}

static void test_shared_and_barriers(void **state) {
  (void)state;
  enum { N = 1000, G = (N + BLOCK - 1) / BLOCK };
  static float x[N], rev[N], rrev[N], fsum[G], rfsum[G];
  static int32_t a[N], scan[N], rscan[N], isum[G], risum[G];
  fill_f32(x, N, 31);
  fill_i32(a, N, 100000, 32);
  memset(fsum, 0, sizeof fsum), memset(isum, 0, sizeof isum);
  memset(scan, 0, sizeof scan), memset(rev, 0, sizeof rev);
  marr arrs[] = {{x, N, DV_FLOAT32, {0}},  {a, N, DV_INT32, {0}},    {fsum, G, DV_FLOAT32, {0}},
                 {isum, G, DV_INT32, {0}}, {scan, N, DV_INT32, {0}}, {rev, N, DV_FLOAT32, {0}}};
  dv_arg sc[] = {DV_ARG_I32(N)};
  run_both("block_ops", launch1(G, BLOCK), arrs, 6, sc, 1);
  for (int b = 0; b < G; b++) {
    float fs[BLOCK];
    int32_t is[BLOCK];
    for (int t = 0; t < BLOCK; t++) {
      int g = b * BLOCK + t;
      fs[t] = g < N ? x[g] : 0.0f;
      is[t] = g < N ? a[g] : 0;
    }
    for (int s = BLOCK / 2; s > 0; s /= 2)
      for (int t = 0; t < s; t++) fs[t] += fs[t + s], is[t] += is[t + s];
    rfsum[b] = fs[0];
    risum[b] = is[0];
    int32_t acc = 0;
    for (int t = 0; t < BLOCK; t++) {
      int g = b * BLOCK + t;
      acc += g < N ? a[g] : 0;
      if (g < N) rscan[g] = acc;
      int from = b * BLOCK + BLOCK - 1 - t;
      if (g < N) rrev[g] = (from < N ? x[from] : 0.0f) * 2.0f;
    }
  }
  check_output("block_ops: float tree sums", &arrs[2], rfsum);
  check_output("block_ops: int tree sums", &arrs[3], risum);
  check_output("block_ops: scan", &arrs[4], rscan);
  check_output("block_ops: reversal", &arrs[5], rrev);
  free_both(arrs, 6);
}

static void test_atomics(void **state) {
  (void)state;
  enum { N = 1000 };
  static int32_t a[N];
  fill_i32(a, N, 50000, 41);
  int32_t bins[32] = {0}, mm[2] = {INT32_MAX, INT32_MIN}, rbins[32] = {0},
          rmm[2] = {INT32_MAX, INT32_MIN};
  uint32_t bits[1] = {0}, rbits[1] = {0};
  float fs[1] = {0}, rfs[1] = {0};
  int64_t big[1] = {0}, rbig[1] = {0};
  marr arrs[] = {{a, N, DV_INT32, {0}},     {bins, 32, DV_INT32, {0}}, {mm, 2, DV_INT32, {0}},
                 {bits, 1, DV_UINT32, {0}}, {fs, 1, DV_FLOAT32, {0}},  {big, 1, DV_INT64, {0}}};
  dv_arg sc[] = {DV_ARG_I32(N)};
  run_both("histogram", launch1((N + BLOCK - 1) / BLOCK, BLOCK), arrs, 6, sc, 1);
  double fsum = 0;
  for (int i = 0; i < N; i++) {
    int32_t v = a[i], bin = (v % 16 + 16) % 16;
    rbins[bin]++;
    rbins[16 + bin] += v;
    rmm[0] = v < rmm[0] ? v : rmm[0];
    rmm[1] = v > rmm[1] ? v : rmm[1];
    rbits[0] |= 1u << bin;
    fsum += v % 100;
    rbig[0] += (int64_t)v * 1048576;
  }
  rfs[0] = (float)fsum; /* small integers: exact in float in any order */
  check_output("histogram: bins and shared sums", &arrs[1], rbins);
  check_output("histogram: min, max", &arrs[2], rmm);
  check_output("histogram: or", &arrs[3], rbits);
  check_output("histogram: float sum", &arrs[4], rfs);
  check_output("histogram: int64 sum", &arrs[5], rbig);
  free_both(arrs, 6);
}

static void test_wave_operations(void **state) {
  (void)state;
  enum { N = 256, B = 64 };
  static float x[N], wsum[N], rwsum[N];
  static int32_t bfly[N], rbfly[N];
  static uint64_t ballot[N], rballot[N];
  int32_t wsize[1] = {0}, rwsize[1] = {WAVE};
  fill_f32(x, N, 51);
  marr arrs[] = {{x, N, DV_FLOAT32, {0}},
                 {wsum, N, DV_FLOAT32, {0}},
                 {bfly, N, DV_INT32, {0}},
                 {ballot, N, DV_UINT64, {0}},
                 {wsize, 1, DV_INT32, {0}}};
  run_both("waves", launch1(N / B, B), arrs, 5, NULL, 0);
  for (int w = 0; w < N / WAVE; w++) {
    float v[WAVE], old[WAVE];
    int32_t k[WAVE], kold[WAVE];
    uint64_t bal = 0;
    for (int l = 0; l < WAVE; l++) {
      int g = w * WAVE + l;
      v[l] = x[g];
      k[l] = g * 7 - 100;
      if (x[g] > 0.0f) bal |= 1ull << l;
    }
    for (int d = WAVE / 2; d > 0; d /= 2) {
      memcpy(old, v, sizeof v);
      for (int l = 0; l < WAVE; l++) v[l] += l + d < WAVE ? old[l + d] : old[l];
    }
    for (int mask = 1; mask < WAVE; mask *= 2) {
      memcpy(kold, k, sizeof k);
      for (int l = 0; l < WAVE; l++) k[l] = kold[l] * 3 + kold[l ^ mask];
    }
    for (int l = 0; l < WAVE; l++) {
      rwsum[w * WAVE + l] = v[l];
      rbfly[w * WAVE + l] = k[l];
      rballot[w * WAVE + l] = bal;
    }
  }
  check_output("waves: wave size", &arrs[4], rwsize);
  check_output("waves: shuffle-down sums", &arrs[1], rwsum);
  check_output("waves: xor butterfly", &arrs[2], rbfly);
  check_output("waves: ballot", &arrs[3], rballot);
  free_both(arrs, 5);
}

static void test_local_arrays(void **state) {
  (void)state;
  enum { N = 300, L = 9 };
  static int32_t a[N], out[N * L], ref[N * L];
  fill_i32(a, N, INT32_MAX, 61);
  memset(out, 0, sizeof out);
  marr arrs[] = {{a, N, DV_INT32, {0}}, {out, N * L, DV_INT32, {0}}};
  dv_arg sc[] = {DV_ARG_I32(N)};
  run_both("local_sort", launch1((N + 127) / 128, 128), arrs, 2, sc, 1);
  for (int i = 0; i < N; i++) {
    int32_t v[L];
    for (int k = 0; k < L; k++)
      v[k] = (int32_t)(((uint32_t)a[i] * (uint32_t)(k + 1) * 2654435761u) >> 7) % 1000;
    for (int k = 0; k < L; k++) /* selection sort: not the kernel's algorithm */
      for (int j = k + 1; j < L; j++)
        if (v[j] < v[k]) {
          int32_t t = v[j];
          v[j] = v[k], v[k] = t;
        }
    memcpy(&ref[i * L], v, sizeof v);
  }
  check_output("local_sort", &arrs[1], ref);
  free_both(arrs, 2);
}

static void test_constant_memory(void **state) {
  (void)state;
  enum { N = 500 };
  static float x[N], out[N], ref[N];
  static int32_t look[N], rlook[N];
  fill_f32(x, N, 71);
  memset(out, 0, sizeof out), memset(look, 0, sizeof look);
  marr arrs[] = {{x, N, DV_FLOAT32, {0}}, {out, N, DV_FLOAT32, {0}}, {look, N, DV_INT32, {0}}};
  dv_arg sc[] = {DV_ARG_I32(N)};
  run_both("const_poly", launch1((N + 127) / 128, 128), arrs, 3, sc, 1);
  for (int i = 0; i < N; i++) {
    float r = g_coef[NCOEF - 1];
    for (int k = NCOEF - 2; k >= 0; k--) r = r * x[i] + g_coef[k];
    ref[i] = r;
    rlook[i] = g_lut[i % 16] * i;
  }
  check_output("const_poly: polynomial", &arrs[1], ref);
  check_output("const_poly: lookup", &arrs[2], rlook);
  free_both(arrs, 3);
}

/* dv_printf: what each mode writes to stdout, captured through a file. */
static char *printed(int k, const int32_t *a, int n, uint32_t grid, uint32_t block) {
  dv_array *d = test_dev_from(g_c[k], a, n, DV_INT32);
  char path[256];
  const char *tmp = getenv("TMPDIR");
  snprintf(path, sizeof path, "%s/modes-out-XXXXXX", tmp ? tmp : "/tmp");
  fflush(stdout);
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  int saved = dup(1);
  assert_true(saved >= 0);
  assert_true(dup2(fd, 1) == 1);
  dv_arg args[] = {DV_ARG_ARRAY(d), DV_ARG_I32(n)};
  dv_launch_config cfg = launch1(grid, block);
  dv_status rc = dv_kernel_launch(test_kernel(g_m[k], "say"), &cfg, 2, args);
  char msg[512];
  snprintf(msg, sizeof msg, "%s", rc ? dv_last_error() : "");
  fflush(stdout);
  assert_true(dup2(saved, 1) == 1);
  close(saved);
  close(fd);
  char *text = read_text_file(path);
  unlink(path);
  dv_array_release(d);
  if (rc) fail_msg("say in host_mode=%s: %s: %s", g_mode[k], dv_status_name(rc), msg);
  return text;
}

static void test_printf(void **state) {
  (void)state;
  enum { N = 20, B = 8, G = 3 };
  int32_t a[N];
  fill_i32(a, N, 3000000, 81);
  char *out[2] = {printed(FAST, a, N, G, B), printed(CHECKED, a, N, G, B)};
  char want[4096];
  size_t len = 0;
  for (int g = 0; g < N; g++)
    if (g % B % 3 == 0)
      len += (size_t)snprintf(want + len, sizeof want - len,
                              "[block (%d,0,0) thread (%d,0,0)] g=%d a=%d sq=%lld h=%.2f\n", g / B,
                              g % B, g, a[g], (long long)a[g] * a[g], (double)a[g] * 0.5);
  assert_true(len < sizeof want);
  if (strcmp(out[FAST], out[CHECKED]) != 0)
    fail_msg("dv_printf: fast mode printed\n%s\nchecked mode printed\n%s", out[FAST], out[CHECKED]);
  if (strcmp(out[FAST], want) != 0) fail_msg("dv_printf printed\n%s\nwanted\n%s", out[FAST], want);
  free(out[FAST]), free(out[CHECKED]);
}

/* Divergent barriers (tests/kernels/divergent.dvk): checked mode reports
 * each; fast mode may run or report them, but returns (never hangs) and the
 * context goes on working. */
static void test_divergent_barriers(void **state) {
  (void)state;
  char path[512];
  snprintf(path, sizeof path, "%s/divergent.dvk", DV_TEST_KERNELS_DIR);
  char *src = read_text_file(path);
  const char *names[3] = {"early_return", "two_sites", "loop_count"};
  const uint32_t blocks[3] = {64, 8, 8};
  for (int k = 0; k < 2; k++) {
    dv_program *p = NULL;
    dv_module *m = NULL;
    assert_ok(dv_program_create(g_c[k], "divergent.dvk", src, &p));
    assert_ok(dv_program_build(p, 0, &m));
    dv_program_destroy(p);
    int32_t zero[64] = {0}, out[64];
    dv_array *d = test_dev_from(g_c[k], zero, 64, DV_INT32);
    dv_arg a[] = {DV_ARG_ARRAY(d)};
    for (int i = 0; i < 3; i++) {
      dv_launch_config cfg = launch1(2, blocks[i]);
      dv_status rc = dv_kernel_launch(test_kernel(m, names[i]), &cfg, 1, a);
      if (k == CHECKED ? rc != DV_ERR_KERNEL_FAULT : rc != DV_OK && rc != DV_ERR_KERNEL_FAULT)
        fail_msg("%s in host_mode=%s: %s: %s", names[i], g_mode[k], dv_status_name(rc),
                 dv_last_error());
      if (rc) assert_non_null(strstr(dv_last_error(), names[i]));
      if (k == CHECKED && !strstr(dv_last_error(), "divergent barrier"))
        fail_msg("%s in checked mode is not reported as the divergent barrier: %s", names[i], dv_last_error());
    }
    /* The context goes on: a launch of the same module that is not divergent. */
    dv_launch_config cfg = launch1(1, 40);
    assert_ok(dv_kernel_launch(test_kernel(m, "early_return"), &cfg, 1, a));
    test_to_host(d, out);
    for (int t = 0; t < 40; t++) assert_int_equal(out[t], t);
    dv_array_release(d);
    dv_module_release(m);
  }
  free(src);
}

int main(int argc, char **argv) {
  const char *be = argc > 1 ? argv[1] : "host";
  if (strncmp(be, "host", 4) != 0) {
    printf("SKIPPED: suite modes on backend %s: host_mode is the host simulator's\n", be);
    return 77;
  }
  int begin = kernel_suite_begin(argc, argv, "modes", NULL, g_cache_dir, sizeof g_cache_dir);
  if (begin) return begin;
  const struct CMUnitTest tests[] = {
      TM(test_mode_reported),   TM(test_arithmetic),          TM(test_grid_3d),
      TM(test_view_2d),         TM(test_shared_and_barriers), TM(test_atomics),
      TM(test_wave_operations), TM(test_local_arrays),        TM(test_constant_memory),
      TM(test_printf),          TM(test_divergent_barriers),
  };
  return kernel_suite_end(g_cache_dir,
                          test_main(argc, argv, "modes", tests, sizeof tests / sizeof tests[0]));
}
