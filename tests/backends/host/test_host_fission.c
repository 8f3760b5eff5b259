/*
 * Region fission for the host simulator's fast mode (issue 23,
 * src/backends/host/host_fission.c): a kernel whose barriers sit in
 * uniform control flow gets a function that runs a block as loops over its
 * threads between barriers.  Each kernel here is built and run in a fast
 * and a checked context; the results must equal each other and a
 * reference computed here, bit for bit, and the fast build's log says
 * whether the pass accepted the kernel (it must accept the tiled matmul,
 * the block reduction and barriers in loops, with locals of every kind
 * living across barriers; it must refuse a barrier under an if, in a
 * device function, and wave operations, and those kernels still run).  A
 * divergent loop condition and an early return before a barrier are
 * divergent-barrier faults, not hangs.  Where libclang cannot be loaded,
 * the pass is off: the checks of acceptance skip, by name.
 */
#include "fission_common.h"

/* Run `kernel` of src in both modes on a float array x (n) and an output
 * out (nout), with block and grid given; out[mode] gets the results. */
static void run_both(const char *src, const char *kernel, const char *verdict, const float *x,
                     int64_t n, int64_t nout, dv_launch_config lc, int extra, float *out[2]) {
  for (int mi = 0; mi < 2; mi++) {
    dv_context *c = mode_ctx(modes[mi]);
    dv_module *m = build(c, mi, kernel, src, kernel, verdict);
    dv_kernel *k = test_kernel(m, kernel);
    dv_array *dx = test_dev_from(c, x, n, DV_FLOAT32);
    dv_array *dout = NULL;
    assert_ok(dv_device_array(c, 1, &nout, dv_dtype_get(DV_FLOAT32), NULL, 'C', NULL, &dout));
    assert_ok(dv_array_memset(dout, 0, NULL));
    dv_arg a[] = {DV_ARG_ARRAY(dx), DV_ARG_ARRAY(dout), DV_ARG_I32(extra)};
    assert_ok(dv_kernel_launch(k, &lc, 3, a));
    test_to_host(dout, out[mi]);
    dv_array_release(dx);
    dv_array_release(dout);
    dv_module_release(m);
    assert_ok(dv_context_destroy(c));
  }
}

static void expect_equal(const float *want, float *out[2], int64_t n, const char *what) {
  for (int64_t i = 0; i < n; i++)
    for (int mi = 0; mi < 2; mi++)
      if (memcmp(&out[mi][i], &want[i], sizeof(float)))
        fail_msg("%s: element %lld: %s mode %.9g, expected %.9g", what, (long long)i, modes[mi],
                 (double)out[mi][i], (double)want[i]);
}

/* ---- the tiled matmul: two barriers in a loop, DV_SHARED2 ----------------- */

static const char *k_tiled =
    "#define TPB 8\n"
    "DV_KERNEL(tiled, DV_ARRAY(const float, AB), DV_ARRAY(float, C), int n) {\n"
    "  DV_BIND(const float, AB); DV_BIND(float, C);\n"
    "  const float *A = AB, *B = AB + n * n;\n"
    "  DV_SHARED2(float, sA, TPB, TPB); DV_SHARED2(float, sB, TPB, TPB);\n"
    "  int tx = dv_thread_idx(0), ty = dv_thread_idx(1);\n"
    "  int x = dv_block_idx(0) * TPB + tx, y = dv_block_idx(1) * TPB + ty;\n"
    "  float acc = 0.0f;\n"
    "  for (int t = 0; t < (n + TPB - 1) / TPB; t++) {\n"
    "    sA[ty][tx] = (y < n && t * TPB + tx < n) ? A[y * n + t * TPB + tx] : 0.0f;\n"
    "    sB[ty][tx] = (x < n && t * TPB + ty < n) ? B[(t * TPB + ty) * n + x] : 0.0f;\n"
    "    dv_syncthreads();\n"
    "    for (int j = 0; j < TPB; j++) acc += sA[ty][j] * sB[j][tx];\n"
    "    dv_syncthreads();\n"
    "  }\n"
    "  if (y < n && x < n) C[y * n + x] = acc;\n"
    "}\n";

static void test_tiled_matmul(void **state) {
  (void)state;
  enum { N = 21, TPB = 8, G = (N + TPB - 1) / TPB };
  static float ab[2 * N * N], want[N * N], o0[N * N], o1[N * N];
  for (int i = 0; i < 2 * N * N; i++) ab[i] = (float)((i * 7) % 11) - 5.0f; /* exact sums */
  for (int y = 0; y < N; y++)
    for (int x = 0; x < N; x++) {
      float acc = 0.0f;
      for (int j = 0; j < N; j++) acc += ab[y * N + j] * ab[N * N + j * N + x];
      want[y * N + x] = acc;
    }
  float *out[2] = {o0, o1};
  dv_launch_config lc = {{G, G, 1}, {TPB, TPB, 1}, 0, NULL};
  run_both(k_tiled, "tiled", "accepted", ab, 2 * N * N, N * N, lc, N, out);
  expect_equal(want, out, N * N, "tiled");
}

/* ---- the block reduction: a barrier, then one in a loop ------------------- */

static const char *k_reduce =
    "#define RB 64\n"
    "DV_KERNEL(block_sum, DV_ARRAY(const float, x), DV_ARRAY(float, partial), int n) {\n"
    "  DV_BIND(const float, x); DV_BIND(float, partial);\n"
    "  DV_SHARED(float, s, RB);\n"
    "  int t = dv_thread_idx(0);\n"
    "  dv_i64 i = dv_global_id(0);\n"
    "  s[t] = i < n ? x[i] : 0.0f;\n"
    "  dv_syncthreads();\n"
    "  for (int w = RB / 2; w > 1; w >>= 1) {\n"
    "    if (t < w) s[t] += s[t + w];\n"
    "    dv_syncthreads();\n"
    "  }\n"
    "  if (t == 0) partial[dv_block_idx(0)] = s[0] + s[1];\n"
    "}\n";

static void test_block_reduction(void **state) {
  (void)state;
  enum { RB = 64, N = 1000, G = (N + RB - 1) / RB };
  static float x[N], want[G], o0[G], o1[G];
  for (int i = 0; i < N; i++) x[i] = (float)(i % 13) * 0.25f;
  for (int b = 0; b < G; b++) {
    float s[RB];
    for (int t = 0; t < RB; t++) s[t] = b * RB + t < N ? x[b * RB + t] : 0.0f;
    for (int w = RB / 2; w > 1; w >>= 1)
      for (int t = 0; t < w; t++) s[t] += s[t + w];
    want[b] = s[0] + s[1];
  }
  float *out[2] = {o0, o1};
  dv_launch_config lc = {{G, 1, 1}, {RB, 1, 1}, 0, NULL};
  /* the loop's variable a scalar, t and i declared again in each region */
  run_both(k_reduce, "block_sum", "accepted (uniform loops 1, thread-index locals 2, loops around regions 0)", x, N, G,
           lc, N, out);
  expect_equal(want, out, G, "block_sum");
}

/* ---- uniform loops and thread-index locals (issue 23, second step) ------- */

/* Loops with barriers whose variable is uniform (init, condition and step
 * from constants, parameters, the block's index and size and locals
 * computed once) run once for the block with the variable a scalar; t and
 * g (from the thread index, never changed) are declared again in each
 * region.  The loops over q (its start reads t) and r (changed in its
 * body) are not uniform and keep the per-thread condition. */
static const char *k_uniform =
    "DV_KERNEL(uniform, DV_ARRAY(const float, x), DV_ARRAY(float, out), int m) {\n"
    "  DV_BIND(const float, x); DV_BIND(float, out);\n"
    "  DV_SHARED(float, s, 64); DV_SHARED(float, s2, 64);\n"
    "  int t = dv_thread_idx(0);\n"
    "  dv_i64 g = dv_global_id(0);\n"
    "  int half = dv_block_dim(0) / 2, lim = m;\n"
    "  s[t] = x[g];\n"
    "  dv_syncthreads();\n"
    "  for (int w = half; w > 0; w >>= 1) {\n"
    "    if (t < w) s[t] += s[t + w];\n"
    "    dv_syncthreads();\n"
    "  }\n"
    "  float acc = s[0];\n"
    "  dv_syncthreads();\n"
    "  s[t] = x[g];\n"
    "  dv_syncthreads();\n"
    "  for (int k = dv_block_idx(0) % 3; k < lim; k += 2) {\n"
    "    s2[t] = s[(t + k) % 64] + (float)k;\n"
    "    dv_syncthreads();\n"
    "    s[t] = s2[t];\n"
    "    dv_syncthreads();\n"
    "  }\n"
    "  int j = 0;\n"
    "  for (int q = t - t; q < 2; q++) {\n"
    "    j += q;\n"
    "    dv_syncthreads();\n"
    "  }\n"
    "  for (int r = 0; r < 2; r++) {\n"
    "    j += r;\n"
    "    dv_syncthreads();\n"
    "    r += 0;\n"
    "  }\n"
    "  out[g] = acc + s[t] + (float)j;\n"
    "}\n";

static void test_uniform_loops(void **state) {
  (void)state;
  enum { B = 64, G = 5, N = B * G, M = 7 };
  static float x[N], want[N], o0[N], o1[N];
  for (int i = 0; i < N; i++) x[i] = (float)((i * 7) % 11) - 3.5f;
  for (int b = 0; b < G; b++) {
    float s[B], s2[B];
    for (int t = 0; t < B; t++) s[t] = x[b * B + t];
    for (int w = B / 2; w > 0; w >>= 1)
      for (int t = 0; t < w; t++) s[t] += s[t + w];
    float acc = s[0];
    for (int t = 0; t < B; t++) s[t] = x[b * B + t];
    for (int k = b % 3; k < M; k += 2) {
      for (int t = 0; t < B; t++) s2[t] = s[(t + k) % 64] + (float)k;
      for (int t = 0; t < B; t++) s[t] = s2[t];
    }
    for (int t = 0; t < B; t++) want[b * B + t] = acc + s[t] + 2.0f;
  }
  float *out[2] = {o0, o1};
  dv_launch_config lc = {{G, 1, 1}, {B, 1, 1}, 0, NULL};
  run_both(k_uniform, "uniform", "accepted (uniform loops 2, thread-index locals 2, loops around regions 0)", x, N, N,
           lc, M, out);
  expect_equal(want, out, N, "uniform");
}

/* ---- uniform loops without barriers around the regions ------------------ */

/* The naive matmul's loop over j (uniform, at the top, no call, no return,
 * no break) runs around the threads' loop: `for (j) for (threads)`, acc per
 * thread.  The kernels after it keep their loops inside the threads' loop:
 * a bound from the thread index, a call of a device function, a break.
 * (A program is only given to the pass when its text names a barrier: the
 * last kernel has one.) */
static const char *k_naive =
    "static float twice(float v) { return v + v; }\n"
    "DV_KERNEL(naive, DV_ARRAY(const float, A), DV_ARRAY(float, C), int n) {\n"
    "  DV_BIND(const float, A); DV_BIND(float, C);\n"
    "  int x = (int)dv_global_id(0), y = (int)dv_global_id(1);\n"
    "  if (x >= n || y >= n) return;\n"
    "  float acc = 0.0f;\n"
    "  for (int j = 0; j < n; j++) acc += A[y * n + j] * A[n * n + j * n + x];\n"
    "  C[y * n + x] = acc;\n"
    "}\n"
    "DV_KERNEL(rowsum, DV_ARRAY(const float, A), DV_ARRAY(float, C), int n) {\n"
    "  DV_BIND(const float, A); DV_BIND(float, C);\n"
    "  int x = (int)dv_global_id(0), y = (int)dv_global_id(1);\n"
    "  if (x >= n || y >= n) return;\n"
    "  float acc = 0.0f;\n"
    "  for (int j = x - x; j < n; j++) acc += A[y * n + j];\n"
    "  for (int j = 0; j < n; j++) acc += twice(A[j]);\n"
    "  for (int j = 0; j < n; j++) { if (A[j] > 2.0f) break; acc += 1.0f; }\n"
    "  C[y * n + x] = acc;\n"
    "}\n"
    "DV_KERNEL(with_barrier, DV_ARRAY(float, C)) {\n"
    "  DV_BIND(float, C);\n"
    "  dv_syncthreads();\n"
    "  C[dv_thread_idx(0)] = 1.0f;\n"
    "}\n";

static void test_loops_around_regions(void **state) {
  (void)state;
  enum { N = 40 };
  static float a[2 * N * N], want[2][N * N], o[2][2][N * N];
  for (int i = 0; i < 2 * N * N; i++) a[i] = (float)((i * 5) % 9) * 0.5f;
  for (int y = 0; y < N; y++)
    for (int x = 0; x < N; x++) {
      float acc = 0.0f;
      for (int j = 0; j < N; j++) acc += a[y * N + j] * a[N * N + j * N + x];
      want[0][y * N + x] = acc;
      acc = 0.0f;
      for (int j = 0; j < N; j++) acc += a[y * N + j];
      for (int j = 0; j < N; j++) acc += a[j] + a[j];
      for (int j = 0; j < N; j++) {
        if (a[j] > 2.0f) break;
        acc += 1.0f;
      }
      want[1][y * N + x] = acc;
    }
  const char *names[2] = {"naive", "rowsum"};
  const char *verdicts[2] = {"accepted (uniform loops 0, thread-index locals 2, loops around "
                             "regions 1)",
                             "refused: no barrier and no uniform loop at the top"};
  dv_launch_config lc = {{3, 5, 1}, {16, 8, 1}, 0, NULL}; /* more threads than N x N */
  for (int k = 0; k < 2; k++)
    for (int mi = 0; mi < 2; mi++) {
      dv_context *c = mode_ctx(modes[mi]);
      dv_module *m = build(c, mi, names[k], k_naive, names[k], verdicts[k]);
      dv_kernel *kn = test_kernel(m, names[k]);
      int64_t na = 2 * N * N, nc = N * N;
      dv_array *da = test_dev_from(c, a, na, DV_FLOAT32);
      dv_array *dc = NULL;
      assert_ok(dv_device_array(c, 1, &nc, dv_dtype_get(DV_FLOAT32), NULL, 'C', NULL, &dc));
      assert_ok(dv_array_memset(dc, 0, NULL));
      dv_arg args[] = {DV_ARG_ARRAY(da), DV_ARG_ARRAY(dc), DV_ARG_I32(N)};
      assert_ok(dv_kernel_launch(kn, &lc, 3, args));
      test_to_host(dc, o[k][mi]);
      dv_array_release(da);
      dv_array_release(dc);
      dv_module_release(m);
      assert_ok(dv_context_destroy(c));
    }
  for (int k = 0; k < 2; k++) {
    float *out[2] = {o[k][0], o[k][1]};
    expect_equal(want[k], out, N * N, names[k]);
  }
}

/* ---- locals of every kind across barriers, in while and do loops ---------- */

static const char *k_locals =
    "struct pair { int a; float b; };\n"
    "DV_KERNEL(locals, DV_ARRAY(const float, x), DV_ARRAY(float, out), int rounds) {\n"
    "  DV_BIND(const float, x); DV_BIND(float, out);\n"
    "  DV_SHARED2(float, tile, 4, 8);\n"
    "  DV_SHARED(float, s, 32);\n"
    "  const int t = dv_thread_idx(0) + 8 * dv_thread_idx(1), n = 32;\n"
    "  int p = 1, q = 2, r;\n"
    "  float arr[3] = {x[t], 2.0f * x[t], 3.0f};\n"
    "  DV_LOCAL_ARRAY(int, hist, 2);\n"
    "  struct pair pr = {t, 0.5f};\n"
    "  float (*row)[8] = tile + dv_thread_idx(1);\n"
    "  const float *src = x + t;\n"
    "  hist[0] = t; hist[1] = -t;\n"
    "  r = 0;\n"
    "  int k = 0;\n"
    "  while (k < rounds) {\n"
    "    (*row)[dv_thread_idx(0)] = arr[k % 3] + (float)p;\n"
    "    s[t] = *src + (float)q;\n"
    "    dv_syncthreads();\n"
    "    arr[k % 3] += tile[(dv_thread_idx(1) + 1) % 4][(dv_thread_idx(0) + 3) % 8] + s[n - 1 - t];\n"
    "    p += q; q = p - q; r += hist[k % 2]; pr.b += 1.0f;\n"
    "    dv_syncthreads();\n"
    "    k++;\n"
    "  }\n"
    "  do {\n"
    "    { int inner = t + k; s[t] = (float)inner; }\n"
    "    dv_syncthreads();\n"
    "    r += (int)s[(t + 1) % n];\n"
    "    dv_syncthreads();\n"
    "  } while (--k > rounds - 2);\n"
    "  out[t] = arr[0] + arr[1] + arr[2] + (float)(p + q + r + pr.a) + pr.b;\n"
    "}\n";

static void test_locals_across_barriers(void **state) {
  (void)state;
  enum { T = 32, R = 5 };
  float x[T], want[T], o0[T], o1[T];
  for (int i = 0; i < T; i++) x[i] = (float)(i % 5) - 1.0f;
  /* the reference: the block's threads in lock step */
  float arr[T][3], tile[4][8], s[T], pb[T];
  int p[T], q[T], r[T], k = 0;
  for (int t = 0; t < T; t++)
    arr[t][0] = x[t], arr[t][1] = 2.0f * x[t], arr[t][2] = 3.0f, p[t] = 1, q[t] = 2, r[t] = 0,
    pb[t] = 0.5f;
  for (k = 0; k < R; k++) {
    for (int t = 0; t < T; t++) tile[t / 8][t % 8] = arr[t][k % 3] + (float)p[t], s[t] = x[t] + (float)q[t];
    for (int t = 0; t < T; t++) {
      arr[t][k % 3] += tile[(t / 8 + 1) % 4][(t % 8 + 3) % 8] + s[T - 1 - t];
      p[t] += q[t], q[t] = p[t] - q[t], r[t] += k % 2 ? -t : t, pb[t] += 1.0f;
    }
  }
  do {
    for (int t = 0; t < T; t++) s[t] = (float)(t + k);
    for (int t = 0; t < T; t++) r[t] += (int)s[(t + 1) % T];
  } while (--k > R - 2);
  for (int t = 0; t < T; t++)
    want[t] = arr[t][0] + arr[t][1] + arr[t][2] + (float)(p[t] + q[t] + r[t] + t) + pb[t];
  float *out[2] = {o0, o1};
  dv_launch_config lc = {{1, 1, 1}, {8, 4, 1}, 0, NULL};
  run_both(k_locals, "locals", "accepted", x, T, T, lc, R, out);
  expect_equal(want, out, T, "locals");
}

/* ---- what the pass refuses still runs ------------------------------------- */

static const char *k_under_if =
    "DV_KERNEL(under_if, DV_ARRAY(const float, x), DV_ARRAY(float, out), int n) {\n"
    "  DV_BIND(const float, x); DV_BIND(float, out);\n"
    "  DV_SHARED(float, s, 32);\n"
    "  int t = dv_thread_idx(0);\n"
    "  s[t] = x[t];\n"
    "  if (n > 0) dv_syncthreads();\n"
    "  out[t] = s[31 - t] + (float)n;\n"
    "}\n";

static const char *k_in_function =
    "DV_DEVICE void sync_all(void) { dv_syncthreads(); }\n"
    "DV_KERNEL(in_function, DV_ARRAY(const float, x), DV_ARRAY(float, out), int n) {\n"
    "  DV_BIND(const float, x); DV_BIND(float, out);\n"
    "  DV_SHARED(float, s, 32);\n"
    "  int t = dv_thread_idx(0);\n"
    "  s[t] = x[t];\n"
    "  sync_all();\n"
    "  dv_syncthreads();\n"
    "  out[t] = s[31 - t] + (float)n;\n"
    "}\n";

static const char *k_wave =
    "DV_KERNEL(wave, DV_ARRAY(const float, x), DV_ARRAY(float, out), int n) {\n"
    "  DV_BIND(const float, x); DV_BIND(float, out);\n"
    "  DV_SHARED(float, s, 32);\n"
    "  int t = dv_thread_idx(0);\n"
    "  s[t] = x[t];\n"
    "  dv_syncthreads();\n"
    "  out[t] = s[31 - t] + (float)n + (float)dv_wave_shuffle_idx_i32(t, 0);\n"
    "}\n";

static void test_refused_still_run(void **state) {
  (void)state;
  float x[32], want[32], o0[32], o1[32];
  for (int i = 0; i < 32; i++) x[i] = (float)i * 1.5f;
  float *out[2] = {o0, o1};
  dv_launch_config lc = {{1, 1, 1}, {32, 1, 1}, 0, NULL};
  const char *srcs[3] = {k_under_if, k_in_function, k_wave};
  const char *names[3] = {"under_if", "in_function", "wave"};
  for (int q = 0; q < 3; q++) {
    for (int t = 0; t < 32; t++) want[t] = x[31 - t] + 3.0f;
    run_both(srcs[q], names[q], "refused", x, 32, 32, lc, 3, out);
    expect_equal(want, out, 32, names[q]);
  }
}

/* ---- more per-thread state than the stack takes: the pass's function
 * declines at run time and the block runs on fibers ------------------------- */

static const char *k_big =
    "DV_KERNEL(big, DV_ARRAY(const float, x), DV_ARRAY(float, out), int n) {\n"
    "  DV_BIND(const float, x); DV_BIND(float, out);\n"
    "  DV_SHARED(float, s, 1024);\n"
    "  int t = dv_thread_idx(0);\n"
    "  float loc[64];\n"
    "  for (int j = 0; j < 64; j++) loc[j] = x[t] + (float)j;\n"
    "  s[t] = loc[t % 64];\n"
    "  dv_syncthreads();\n"
    "  out[t] = s[1023 - t] + loc[(t + 1) % 64] + (float)n;\n"
    "}\n";

static void test_declines_big_state(void **state) {
  (void)state;
  enum { T = 1024 };
  static float x[T], want[T], o0[T], o1[T];
  for (int i = 0; i < T; i++) x[i] = (float)(i % 17);
  for (int t = 0; t < T; t++) {
    int u = T - 1 - t;
    want[t] = (x[u] + (float)(u % 64)) + (x[t] + (float)((t + 1) % 64)) + 2.0f;
  }
  float *out[2] = {o0, o1};
  dv_launch_config lc = {{1, 1, 1}, {T, 1, 1}, 0, NULL};
  run_both(k_big, "big", "accepted", x, T, T, lc, 2, out);
  expect_equal(want, out, T, "big");
}

/* ---- divergence: reported, never a hang ----------------------------------- */

static const char *k_div_loop =
    "DV_KERNEL(div_loop, DV_ARRAY(const float, x), DV_ARRAY(float, out), int n) {\n"
    "  DV_BIND(const float, x); DV_BIND(float, out);\n"
    "  int t = dv_thread_idx(0), g = dv_block_idx(0) * 32 + t;\n"
    "  for (int r = 0; r < t % n; r++) {\n"
    "    out[g] += x[g];\n"
    "    dv_syncthreads();\n"
    "  }\n"
    "}\n";

static const char *k_div_return =
    "DV_KERNEL(div_return, DV_ARRAY(const float, x), DV_ARRAY(float, out), int n) {\n"
    "  DV_BIND(const float, x); DV_BIND(float, out);\n"
    "  int t = dv_thread_idx(0), g = dv_block_idx(0) * 32 + t;\n"
    "  out[g] = x[g];\n"
    "  if (t < n) return;\n"
    "  dv_syncthreads();\n"
    "  out[g] += 1.0f;\n"
    "}\n";

/* Each block has its own 32 elements: the kernels' only bug is the divergent
 * barrier (blocks sharing elements would be a race between blocks, which
 * checked mode's access checks report first when the blocks run in parallel). */
static void divergent(const char *src, const char *name, int extra, char msg[2][700]) {
  float x[64] = {0};
  for (int mi = 0; mi < 2; mi++) {
    dv_context *c = mode_ctx(modes[mi]);
    dv_module *m = build(c, mi, name, src, name, "accepted");
    dv_kernel *k = test_kernel(m, name);
    dv_array *dx = test_dev_from(c, x, 64, DV_FLOAT32);
    dv_array *dout = test_dev_from(c, x, 64, DV_FLOAT32);
    dv_arg a[] = {DV_ARG_ARRAY(dx), DV_ARG_ARRAY(dout), DV_ARG_I32(extra)};
    dv_launch_config lc = {{2, 1, 1}, {32, 1, 1}, 0, NULL};
    assert_status(dv_kernel_launch(k, &lc, 3, a), DV_ERR_KERNEL_FAULT);
    snprintf(msg[mi], sizeof msg[mi], "%s", dv_last_error());
    if (!strstr(msg[mi], "divergent barrier") || !strstr(msg[mi], "kernel ") ||
        !strstr(msg[mi], "block (0,0,0)"))
      fail_msg("%s mode's report: %s", modes[mi], msg[mi]);
    dv_array_release(dx);
    dv_array_release(dout);
    dv_module_release(m);
    assert_ok(dv_context_destroy(c));
  }
}

static void test_divergent_loop_condition(void **state) {
  (void)state;
  char msg[2][700];
  divergent(k_div_loop, "div_loop", 4, msg);
  if (g_libclang && !strstr(msg[0], "the condition of the loop at line 4"))
    fail_msg("fast mode's report does not name the loop: %s", msg[0]);
}

static void test_divergent_early_return(void **state) {
  (void)state;
  char msg[2][700];
  divergent(k_div_return, "div_return", 5, msg);
  /* the scheduler's own report, as in checked mode */
  assert_string_equal(msg[0], msg[1]);
  if (!strstr(msg[0], "27 threads wait") || !strstr(msg[0], "5 threads exited"))
    fail_msg("the report: %s", msg[0]);
}

/* ---- the reviewer's defects (issue 23): each kernel runs in both modes
 * against a reference computed here ------------------------------------------ */

/* Run src's kernel `name` on 8 threads (x[i] = i, extra = n) and compare
 * with want(t, n). */
static void run8(const char *src, const char *name, const char *verdict, int extra,
                 float (*want)(int t, int n)) {
  float x[8], w[8], o0[8], o1[8];
  for (int i = 0; i < 8; i++) x[i] = (float)i, w[i] = want(i, extra);
  float *out[2] = {o0, o1};
  dv_launch_config lc = {{1, 1, 1}, {8, 1, 1}, 0, NULL};
  run_both(src, name, verdict, x, 8, 8, lc, extra, out);
  expect_equal(w, out, 8, name);
}

/* 1. a declaration after a store, or after a return, is not computed
 * ahead of them (its initializer reads memory) */
static const char *k_hoist_store =
    "DV_KERNEL(hoist_store, DV_ARRAY(const float, x), DV_ARRAY(float, out), int n) {\n"
    "  DV_BIND(const float, x); DV_BIND(float, out);\n"
    "  DV_SHARED(float, sh, 8);\n"
    "  sh[dv_thread_idx(0)] = 42.0f;\n" /* each thread its own slot (not a race) */
    "  float v = sh[dv_thread_idx(0)];\n"
    "  dv_syncthreads();\n"
    "  out[dv_thread_idx(0)] = v + (float)n;\n"
    "}\n";
static const char *k_hoist_return =
    "DV_KERNEL(hoist_return, DV_ARRAY(const float, x), DV_ARRAY(float, out), int n) {\n"
    "  DV_BIND(const float, x); DV_BIND(float, out);\n"
    "  const float *p = n == 8 ? (const float *)0 : x;\n"
    "  if (n == 8) return;\n"
    "  float v = p[1];\n"
    "  dv_syncthreads();\n"
    "  out[dv_thread_idx(0)] = v;\n"
    "}\n";
static float want_hoist_store(int t, int n) { (void)t; return 42.0f + (float)n; }
static float want_zero(int t, int n) { (void)t, (void)n; return 0.0f; }
static float want_one(int t, int n) { (void)t, (void)n; return 1.0f; }

static void test_hoist_keeps_order(void **state) {
  (void)state;
  run8(k_hoist_store, "hoist_store", "accepted", 5, want_hoist_store);
  run8(k_hoist_return, "hoist_return", "accepted", 8, want_zero); /* p is NULL: never read */
  run8(k_hoist_return, "hoist_return", "accepted", 3, want_one);
}

/* 2. a declaration computed once does not capture a global named before it */
static const char *k_capture =
    "static const float scale = 3.0f;\n"
    "DV_KERNEL(capture, DV_ARRAY(const float, x), DV_ARRAY(float, out), int n) {\n"
    "  DV_BIND(const float, x); DV_BIND(float, out);\n"
    "  float v = scale * 2.0f;\n"
    "  float scale = (float)n;\n"
    "  dv_syncthreads();\n"
    "  out[dv_thread_idx(0)] = v + scale;\n"
    "}\n";
static float want_capture(int t, int n) { (void)t; return 6.0f + (float)n; }

static void test_hoist_no_capture(void **state) {
  (void)state;
  run8(k_capture, "capture", "accepted", 4, want_capture);
}

/* 3. writes through parentheses and casts are writes */
static const char *k_paren_write =
    "DV_KERNEL(paren_write, DV_ARRAY(const float, x), DV_ARRAY(float, out), int n) {\n"
    "  DV_BIND(const float, x); DV_BIND(float, out);\n"
    "  int k = n;\n"
    "  (k) += dv_thread_idx(0);\n"
    "  (k)++;\n"
    "  dv_syncthreads();\n"
    "  out[dv_thread_idx(0)] = (float)k;\n"
    "}\n";
static const char *k_cast_write =
    "DV_KERNEL(cast_write, DV_ARRAY(const float, x), DV_ARRAY(float, out), int n) {\n"
    "  DV_BIND(const float, x); DV_BIND(float, out);\n"
    "  int k = n;\n"
    "  int *pk = (int *)&k;\n"
    "  *pk += dv_thread_idx(0) + 1;\n"
    "  dv_syncthreads();\n"
    "  out[dv_thread_idx(0)] = (float)k;\n"
    "}\n";
static const char *k_cast_param =
    "DV_KERNEL(cast_param, DV_ARRAY(const float, x), DV_ARRAY(float, out), int n) {\n"
    "  DV_BIND(const float, x); DV_BIND(float, out);\n"
    "  int *pn = (int *)&n;\n"
    "  *pn += dv_thread_idx(0) + 1;\n"
    "  dv_syncthreads();\n"
    "  out[dv_thread_idx(0)] = (float)n;\n"
    "}\n";
static float want_tn1(int t, int n) { return (float)(t + n + 1); }

static void test_hidden_writes(void **state) {
  (void)state;
  run8(k_paren_write, "paren_write", "accepted", 10, want_tn1);
  run8(k_cast_write, "cast_write", "accepted", 10, want_tn1);
  run8(k_cast_param, "cast_param", "refused: a parameter the body changes", 10, want_tn1);
}

/* 4. a pointer kept across a barrier to a local: the local lives per thread */
static const char *k_addr_local =
    "DV_KERNEL(addr_local, DV_ARRAY(const float, x), DV_ARRAY(float, out), int n) {\n"
    "  DV_BIND(const float, x); DV_BIND(float, out);\n"
    "  int t = dv_thread_idx(0);\n"
    "  float v = x[t] * 3.0f;\n"
    "  float *p = &v;\n"
    "  float arr[2] = {x[t], x[t] + 100.0f};\n"
    "  float *q = arr;\n"
    "  dv_syncthreads();\n"
    "  out[t] = *p + q[1] + (float)n;\n"
    "}\n";
static const char *k_literal =
    "DV_KERNEL(literal, DV_ARRAY(const float, x), DV_ARRAY(float, out), int n) {\n"
    "  DV_BIND(const float, x); DV_BIND(float, out);\n"
    "  int t = dv_thread_idx(0);\n"
    "  const float *q = (const float[]){x[t] * 3.0f, 7.0f};\n"
    "  dv_syncthreads();\n"
    "  out[t] = q[0] + (float)n;\n"
    "}\n";
static float want_addr(int t, int n) { return (float)t * 3.0f + ((float)t + 100.0f) + (float)n; }
static float want_literal(int t, int n) { return (float)t * 3.0f + (float)n; }

static void test_address_taken_locals(void **state) {
  (void)state;
  run8(k_addr_local, "addr_local", "accepted", 2, want_addr);
  run8(k_literal, "literal", "refused: a compound literal", 2, want_literal);
}

/* 5. a barrier reached through a function pointer */
static const char *k_fnptr =
    "DV_DEVICE void syncer(void) { dv_syncthreads(); }\n"
    "static void (*const gsync)(void) = syncer;\n"
    "DV_KERNEL(fnptr, DV_ARRAY(const float, x), DV_ARRAY(float, out), int n) {\n"
    "  DV_BIND(const float, x); DV_BIND(float, out);\n"
    "  DV_SHARED(float, sh, 8);\n"
    "  int t = dv_thread_idx(0);\n"
    "  sh[t] = x[t];\n"
    "  dv_syncthreads();\n"
    "  float v = sh[(t + 1) % 8];\n"
    "  dv_syncthreads();\n"
    "  sh[t] = v * 10.0f;\n"
    "  gsync();\n"
    "  out[t] = sh[(t + 1) % 8] + (float)n;\n"
    "}\n";
static float want_fnptr(int t, int n) { return (float)((t + 2) % 8) * 10.0f + (float)n; }

static void test_barrier_through_pointer(void **state) {
  (void)state;
  run8(k_fnptr, "fnptr", "refused: a call through a pointer", 1, want_fnptr);
}

/* 6. a big frame of the kernel's own beside the threads' state: the pass's
 * function declines (the block runs on fibers) instead of overflowing */
static const char *k_big_frame =
    "DV_KERNEL(big_frame, DV_ARRAY(const float, x), DV_ARRAY(float, out), int n) {\n"
    "  DV_BIND(const float, x); DV_BIND(float, out);\n"
    "  int t = dv_thread_idx(0) + 32 * dv_thread_idx(1);\n"
    "  int a0 = t, a1 = t + 1, a2 = t + 2, a3 = t + 3, a4 = t + 4, a5 = t + 5, a6 = t + 6;\n"
    "  int a7 = t + 7, a8 = t + 8, a9 = t + 9, a10 = t + 10, a11 = t + 11, a12 = t + 12;\n"
    "  int a13 = t + 13;\n"
    "  dv_syncthreads();\n"
    "  volatile int big[20000];\n"
    "  for (int i = 0; i < 20000; i++) big[i] = i ^ t;\n"
    "  int s = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7 + a8 + a9 + a10 + a11 + a12 + a13;\n"
    "  out[t] = (float)(s + big[t % 20000]) + (float)n;\n"
    "}\n";

static void test_big_frame_declines(void **state) {
  (void)state;
  enum { T = 1024 };
  static float x[T], want[T], o0[T], o1[T];
  for (int t = 0; t < T; t++) x[t] = 0.0f, want[t] = (float)(14 * t + 91 + (t ^ t)) + 1.0f;
  float *out[2] = {o0, o1};
  dv_launch_config lc = {{1, 1, 1}, {32, 32, 1}, 0, NULL};
  run_both(k_big_frame, "big_frame", "accepted", x, T, T, lc, 1, out);
  expect_equal(want, out, T, "big_frame");
}

/* minor: a type declared in the kernel is refused, not a failed compile;
 * register locals are not static ones */
static const char *k_local_type =
    "DV_KERNEL(local_type, DV_ARRAY(const float, x), DV_ARRAY(float, out), int n) {\n"
    "  DV_BIND(const float, x); DV_BIND(float, out);\n"
    "  typedef struct { int a, b; } P;\n"
    "  register int t = dv_thread_idx(0);\n"
    "  P p = {t, t * n};\n"
    "  dv_syncthreads();\n"
    "  out[t] = (float)(p.a + p.b);\n"
    "}\n";
static const char *k_register =
    "DV_KERNEL(reg_local, DV_ARRAY(const float, x), DV_ARRAY(float, out), int n) {\n"
    "  DV_BIND(const float, x); DV_BIND(float, out);\n"
    "  register int t = dv_thread_idx(0);\n"
    "  dv_syncthreads();\n"
    "  out[t] = (float)(t + t * n);\n"
    "}\n";
static float want_type(int t, int n) { return (float)(t + t * n); }

static void test_local_types_and_register(void **state) {
  (void)state;
  run8(k_local_type, "local_type", "refused: a struct, union, enum or typedef", 3, want_type);
  run8(k_register, "reg_local", "accepted", 3, want_type);
}

int main(int argc, char **argv) {
  fission_detect_libclang();
  int begin = kernel_suite_begin(argc, argv, "host_fission", NULL, g_cache_dir, sizeof g_cache_dir);
  if (begin) return begin;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_tiled_matmul),
      cmocka_unit_test(test_block_reduction),
      cmocka_unit_test(test_uniform_loops),
      cmocka_unit_test(test_loops_around_regions),
      cmocka_unit_test(test_locals_across_barriers),
      cmocka_unit_test(test_refused_still_run),
      cmocka_unit_test(test_declines_big_state),
      cmocka_unit_test(test_divergent_loop_condition),
      cmocka_unit_test(test_divergent_early_return),
      cmocka_unit_test(test_hoist_keeps_order),
      cmocka_unit_test(test_hoist_no_capture),
      cmocka_unit_test(test_hidden_writes),
      cmocka_unit_test(test_address_taken_locals),
      cmocka_unit_test(test_barrier_through_pointer),
      cmocka_unit_test(test_big_frame_declines),
      cmocka_unit_test(test_local_types_and_register),
  };
  return kernel_suite_end(g_cache_dir, test_main(argc, argv, "host_fission", tests,
                                                 sizeof tests / sizeof tests[0]));
}
