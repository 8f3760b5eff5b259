#define _DEFAULT_SOURCE /* mkstemp, dup */
/*
 * Wave operations and dv_printf in kernels (issue 21), on every backend that
 * runs kernels: the four shuffles for each of the six types, chained
 * shuffles, any/all/ballot and lane ids, checked exactly against a CPU
 * reference computed with the wave size the kernel reports (1 on PoCL,
 * which has no sub-groups; host_wave_size on the simulator).  On the host
 * simulator also: other wave sizes (1, 8, 24, 64: ballot's high bits), a
 * partial last wave, a wave operation reached by half a wave (a fault
 * naming it), out-of-range deltas, and dv_printf's output captured from
 * stdout (coordinates, order, truncation, a faulting launch).  On the CUDA
 * driver test double the kernels are built and looked up; what they compute
 * is skipped by name (it does not execute kernels).
 */
#include <stdbool.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"

#ifndef DV_TEST_KERNELS_DIR
#error "DV_TEST_KERNELS_DIR must name tests/kernels"
#endif

static char g_cache_dir[256];

static bool is_backend(const char *name) { return strncmp(g_backend, name, strlen(name)) == 0; }

/* Tests of the host simulator's own behaviour skip elsewhere, by name. */
#define HOST_ONLY()                                                                              \
  do {                                                                                           \
    if (!is_backend("host")) {                                                                   \
      printf("SKIPPED: %s: the host simulator's behaviour (backend %s)\n", __func__, g_backend); \
      skip();                                                                                    \
    }                                                                                            \
  } while (0)

/* The CUDA driver test double loads kernels but cannot run them: release
 * the module that was built and skip by name. */
#define NEEDS_EXECUTION_M(ctx, m)                                                         \
  do {                                                                                  \
    if (test_on_cuda_double(ctx)) {                                                          \
      dv_module_release(m);                                                             \
      printf("SKIPPED: %s: the CUDA test double does not execute kernels\n", __func__); \
      skip();                                                                           \
    }                                                                                   \
  } while (0)

static dv_array *dev_new(dv_context *ctx, int64_t n, dv_type_id t) {
  dv_array *d = NULL;
  assert_ok(dv_device_array(ctx, 1, &n, dv_dtype_get(t), NULL, 'C', NULL, &d));
  return d;
}

static void assert_contains(const char *hay, const char *needle) {
  if (!strstr(hay, needle)) fail_msg("expected \"%s\" in: %s", needle, hay);
}

/* ---- the CPU reference ------------------------------------------------------------ */

/* wave.dvk's VAL_* patterns as bit patterns of their type's width. */
enum { T_I32, T_U32, T_I64, T_U64, T_F32, T_F64, NTYPES };
static const char *const g_tname[NTYPES] = {"i32", "u32", "i64", "u64", "f32", "f64"};
static const dv_type_id g_tid[NTYPES] = {DV_INT32,  DV_UINT32,  DV_INT64,
                                         DV_UINT64, DV_FLOAT32, DV_FLOAT64};
static const size_t g_tsize[NTYPES] = {4, 4, 8, 8, 4, 8};

static uint64_t val_bits(int type, int64_t g) {
  uint64_t b = 0;
  switch (type) {
    case T_I32: {
      int32_t v = (int32_t)g * 37 - 500;
      uint32_t u;
      memcpy(&u, &v, 4);
      b = u;
      break;
    }
    case T_U32: b = (uint32_t)((uint32_t)g * 2654435761u); break;
    case T_I64: {
      int64_t v = g * (int64_t)3000000007 - 12345;
      memcpy(&b, &v, 8);
      break;
    }
    case T_U64: b = ((uint64_t)g << 40) | 0xABCDu; break;
    case T_F32: {
      float v = (float)g * 0.5f - 3.25f;
      uint32_t u;
      memcpy(&u, &v, 4);
      b = u;
      break;
    }
    case T_F64: {
      double v = (double)g * 1.0e10 + 0.125;
      memcpy(&b, &v, 8);
      break;
    }
  }
  return b;
}

static uint64_t out_bits(int type, const void *buf, size_t i) {
  uint64_t b = 0;
  if (g_tsize[type] == 4) {
    uint32_t u;
    memcpy(&u, (const char *)buf + 4 * i, 4);
    b = u;
  } else {
    memcpy(&b, (const char *)buf + 8 * i, 8);
  }
  return b;
}

/* Where lane `lane` of a wave of `cnt` lanes (wave size W) reads from, or
 * -1 for its own value.  op: 0 idx (arg: the lane asked for), 1 up, 2 down,
 * 3 xor: CUDA's rules (docs/kernels.md). */
static int ref_src(int op, int lane, int arg, int W, int cnt) {
  int s;
  switch (op) {
    case 0: s = ((arg % W) + W) % W; break;
    case 1: s = lane - arg; break;
    case 2: s = lane + arg; break;
    default: s = lane ^ arg; break;
  }
  return s >= 0 && s < cnt ? s : -1;
}

/* The wave size kernels see on ctx (votes' 4th output, checked against the
 * kernel attribute). */
static int wave_size_of(dv_context *ctx, dv_module *m) {
  int pred[1] = {1}, out[4] = {0};
  uint64_t ballot[1];
  dv_array *dp = test_dev_from(ctx, pred, 1, DV_INT32), *dout = dev_new(ctx, 4, DV_INT32),
           *db = dev_new(ctx, 1, DV_UINT64);
  dv_arg a[] = {DV_ARG_ARRAY(dp), DV_ARG_ARRAY(dout), DV_ARG_ARRAY(db)};
  dv_launch_config c = {{1, 1, 1}, {1, 1, 1}, 0, NULL};
  dv_kernel *k = test_kernel(m, "votes");
  assert_ok(dv_kernel_launch(k, &c, 3, a));
  test_to_host(dout, out);
  test_to_host(db, ballot);
  dv_kernel_attrs at;
  assert_ok(dv_kernel_attributes(k, &at));
  assert_int_equal(out[3], at.wave_size);
  assert_true(out[3] >= 1);
  assert_int_equal(out[0], 1); /* one lane: its own predicate */
  assert_int_equal(out[1], 1);
  assert_int_equal(out[2], 0);
  assert_true(ballot[0] == 1);
  dv_array_release(dp), dv_array_release(dout), dv_array_release(db);
  return out[3];
}

/* Every shuffle of every type with blocks of B threads (shape blk) and G
 * blocks, for several lane/delta/mask choices; exact comparison. */
static void check_shuffles(dv_context *ctx, dv_module *m, int W, const uint32_t blk[3], int G) {
  const int B = (int)(blk[0] * blk[1] * blk[2]), N = B * G;
  const int lanes[][2] = {{1, 1}, {3, -5}, {0, W + 2}, {-1, 0}, {1, W - 1}};
  int args[4]; /* delta or mask candidates within [0, W) */
  const int cand[4] = {0, 1, 3, W - 1};
  int nargs = 0;
  for (int i = 0; i < 4; i++) {
    bool dup = cand[i] < 0 || cand[i] >= W;
    for (int j = 0; j < nargs; j++) dup |= args[j] == cand[i];
    if (!dup) args[nargs++] = cand[i];
  }
  void *buf = malloc((size_t)N * 4 * 8);
  assert_non_null(buf);
  for (int type = 0; type < NTYPES; type++) {
    char name[32];
    snprintf(name, sizeof name, "shuffles_%s", g_tname[type]);
    dv_kernel *k = NULL;
    if (type == T_F64 && dv_module_kernel(m, name, &k) != DV_OK) {
      print_message("[ info ] %s: no fp64 on this device: shuffles_f64 not built\n", g_backend);
      continue;
    }
    k = test_kernel(m, name);
    dv_array *d = dev_new(ctx, (int64_t)N * 4, g_tid[type]);
    for (size_t li = 0; li < sizeof lanes / sizeof *lanes; li++)
      for (int ai = 0; ai < nargs; ai++) {
        int delta = args[ai], mask = args[(ai + 1) % nargs];
        dv_arg a[] = {DV_ARG_ARRAY(d), DV_ARG_I32(lanes[li][0]), DV_ARG_I32(lanes[li][1]),
                      DV_ARG_I32(delta), DV_ARG_I32(mask)};
        dv_launch_config c = {{(uint32_t)G, 1, 1}, {blk[0], blk[1], blk[2]}, 0, NULL};
        assert_ok(dv_kernel_launch(k, &c, 5, a));
        test_to_host(d, buf);
        for (int g = 0; g < N; g++) {
          int t = g % B, w0 = t - t % W, lane = t - w0, cnt = B - w0 < W ? B - w0 : W;
          int op_arg[4] = {lane * lanes[li][0] + lanes[li][1], delta, delta, mask};
          for (int op = 0; op < 4; op++) {
            int s = ref_src(op, lane, op_arg[op], W, cnt);
            int64_t from = s < 0 ? g : (int64_t)(g - lane + s);
            uint64_t want = val_bits(type, from), got = out_bits(type, buf, (size_t)(4 * g + op));
            if (want != got)
              fail_msg(
                  "%s, wave size %d, block %ux%ux%u: thread %d (lane %d) op %d (lane "
                  "args %d,%d delta %d mask %d): got bits %llx, want %llx (from thread %lld)",
                  name, W, blk[0], blk[1], blk[2], g, lane, op, lanes[li][0], lanes[li][1], delta,
                  mask, (unsigned long long)got, (unsigned long long)want, (long long)from);
          }
        }
      }
    dv_array_release(d);
  }
  free(buf);
}

/* any/all/ballot/lane id for several predicate patterns. */
static void check_votes(dv_context *ctx, dv_module *m, int W, const uint32_t blk[3], int G) {
  const int B = (int)(blk[0] * blk[1] * blk[2]), N = B * G;
  int *pred = malloc((size_t)N * sizeof *pred), *out = malloc((size_t)N * 4 * sizeof *out);
  uint64_t *ballot = malloc((size_t)N * sizeof *ballot);
  assert_true(pred && out && ballot);
  dv_array *dout = dev_new(ctx, (int64_t)N * 4, DV_INT32), *db = dev_new(ctx, N, DV_UINT64);
  for (int pattern = 0; pattern < 6; pattern++) {
    rnd_seed(1234 + (uint64_t)pattern);
    for (int g = 0; g < N; g++) {
      int t = g % B;
      switch (pattern) {
        case 0: pred[g] = 0; break;
        case 1: pred[g] = -7; break; /* non-zero, not 1 */
        case 2: pred[g] = g % 3 == 0; break;
        case 3: pred[g] = t % W == W - 1; break;       /* the last lane only */
        case 4: pred[g] = t % W != 0 || W == 1; break; /* all but lane 0 */
        default: pred[g] = (int)(rnd() & 1); break;
      }
    }
    dv_array *dp = test_dev_from(ctx, pred, N, DV_INT32);
    dv_arg a[] = {DV_ARG_ARRAY(dp), DV_ARG_ARRAY(dout), DV_ARG_ARRAY(db)};
    dv_launch_config c = {{(uint32_t)G, 1, 1}, {blk[0], blk[1], blk[2]}, 0, NULL};
    assert_ok(dv_kernel_launch(test_kernel(m, "votes"), &c, 3, a));
    test_to_host(dout, out);
    test_to_host(db, ballot);
    for (int g = 0; g < N; g++) {
      int t = g % B, w0 = t - t % W, cnt = B - w0 < W ? B - w0 : W;
      int any = 0, all = 1;
      uint64_t bits = 0;
      for (int j = 0; j < cnt; j++) {
        int p = pred[g - t + w0 + j] != 0;
        any |= p;
        all &= p;
        if (p) bits |= (uint64_t)1 << j;
      }
      if (out[4 * g] != any || out[4 * g + 1] != all || out[4 * g + 2] != t % W ||
          out[4 * g + 3] != W || ballot[g] != bits)
        fail_msg(
            "votes, pattern %d, wave size %d, block %ux%ux%u, thread %d: any %d all %d lane "
            "%d wave %d ballot %llx; want %d %d %d %d %llx",
            pattern, W, blk[0], blk[1], blk[2], g, out[4 * g], out[4 * g + 1], out[4 * g + 2],
            out[4 * g + 3], (unsigned long long)ballot[g], any, all, t % W, W,
            (unsigned long long)bits);
    }
    dv_array_release(dp);
  }
  dv_array_release(dout), dv_array_release(db);
  free(pred), free(out), free(ballot);
}

static void check_chained(dv_context *ctx, dv_module *m, int W, const uint32_t blk[3], int G) {
  const int B = (int)(blk[0] * blk[1] * blk[2]), N = B * G;
  int *out = malloc((size_t)N * 2 * sizeof *out);
  assert_non_null(out);
  dv_array *d = dev_new(ctx, (int64_t)N * 2, DV_INT32);
  dv_arg a[] = {DV_ARG_ARRAY(d)};
  dv_launch_config c = {{(uint32_t)G, 1, 1}, {blk[0], blk[1], blk[2]}, 0, NULL};
  assert_ok(dv_kernel_launch(test_kernel(m, "chained"), &c, 1, a));
  test_to_host(d, out);
  for (int g = 0; g < N; g++) {
    int t = g % B, w0 = t - t % W, lane = t - w0, cnt = B - w0 < W ? B - w0 : W;
    int base = g - lane;
    /* r2 = r1 of lane la (this lane's source), r1 of la = v of la's source lb. */
    int src_a = ref_src(0, lane, lane + 1, W, cnt), la = src_a < 0 ? lane : src_a;
    int src_b = ref_src(0, la, la + 1, W, cnt), lb = src_b < 0 ? la : src_b;
    int want_r2 = (int)(uint32_t)val_bits(T_I32, base + lb);
    int k = W > 1 ? 1 : 0;
    int sd = ref_src(2, lane, k, W, cnt), ld = sd < 0 ? lane : sd; /* d = u of lane ld */
    int su = ref_src(1, ld, k, W, cnt), lu = su < 0 ? ld : su;     /* u of ld = v of lu */
    int want_d = (int)(uint32_t)val_bits(T_I32, base + lu);
    if (out[2 * g] != want_r2 || out[2 * g + 1] != want_d)
      fail_msg("chained, wave size %d, thread %d: %d %d, want %d %d", W, g, out[2 * g],
               out[2 * g + 1], want_r2, want_d);
  }
  dv_array_release(d);
  free(out);
}

/* ---- on every backend -------------------------------------------------------------- */

static void test_wave_operations(void **state) {
  (void)state;
  dv_module *m = test_build(g_ctx, "wave.dvk", NULL, NULL, NULL); /* builds on every backend, the CUDA double included */
  test_kernel(m, "shuffles_i32");
  test_kernel(m, "votes");
  NEEDS_EXECUTION_M(g_ctx, m);
  int W = wave_size_of(g_ctx, m);
  print_message("[ info ] %s: wave size %d\n", g_backend, W);
  /* Blocks that are whole waves: 1-D, and 3-D (lanes count x fastest). */
  const uint32_t b1[3] = {128, 1, 1}, b3[3] = {8, 4, 2};
  check_shuffles(g_ctx, m, W, b1, 3);
  check_shuffles(g_ctx, m, W, b3, 2);
  check_votes(g_ctx, m, W, b1, 3);
  check_votes(g_ctx, m, W, b3, 2);
  check_chained(g_ctx, m, W, b1, 2);
  dv_module_release(m);
}

/* ---- the host simulator's waves ------------------------------------------------------- */

static dv_context *host_ctx(const char *opt1, const char *opt2) {
  dv_context *c = NULL;
  assert_ok(test_context(&c, "kernel_cache=off", opt1, opt2, (const char *)NULL));
  return c;
}

static void finish(dv_context *c, dv_module *m) {
  dv_module_release(m);
  assert_ok(dv_context_check_memory(c));
  assert_ok(dv_context_destroy(c));
}

/* Wave sizes 1, 8, 24 (not a power of two: partial waves in every block)
 * and 64 (ballot's upper 32 bits), and a block of 100 with waves of 32 (a
 * partial last wave of 4 lanes). */
static void test_host_wave_sizes(void **state) {
  (void)state;
  HOST_ONLY();
  const char *sizes[] = {"host_wave_size=1", "host_wave_size=8", "host_wave_size=24",
                         "host_wave_size=64", "host_wave_size=32"};
  const int want[] = {1, 8, 24, 64, 32};
  for (int i = 0; i < 5; i++) {
    dv_context *c = host_ctx(sizes[i], NULL);
    dv_module *m = test_build(c, "wave.dvk", NULL, NULL, NULL);
    int W = wave_size_of(c, m);
    assert_int_equal(W, want[i]);
    const uint32_t b1[3] = {128, 1, 1}, b3[3] = {8, 4, 2}, odd[3] = {100, 1, 1};
    const uint32_t *blk = W == 32 ? odd : b1;
    check_shuffles(c, m, W, blk, 2);
    check_votes(c, m, W, blk, 2);
    check_votes(c, m, W, b3, 2);
    check_chained(c, m, W, blk, 2);
    finish(c, m);
  }
}

static void test_host_wave_faults(void **state) {
  (void)state;
  HOST_ONLY();
  /* Divergent wave operations and out-of-range lanes are checked mode's faults. */
  dv_context *c = host_ctx("host_wave_size=32", "host_mode=checked");
  dv_module *m = test_build(c, "wave.dvk", NULL, NULL, NULL);
  dv_array *d = dev_new(c, 256 * 4, DV_UINT64);
  dv_launch_config lc = {{1, 1, 1}, {64, 1, 1}, 0, NULL};
  /* Half of each wave reaches the ballot: reported like a divergent barrier. */
  dv_arg a1[] = {DV_ARG_ARRAY(d)};
  assert_status(dv_kernel_launch(test_kernel(m, "half_wave_ballot"), &lc, 1, a1), DV_ERR_KERNEL_FAULT);
  const char *e = dv_last_error();
  assert_contains(e,
                  "kernel half_wave_ballot, block (0,0,0): divergent wave operation in wave 0 "
                  "(threads 0-31)");
  assert_contains(e, "16 threads wait at the wave operation dv_wave_ballot at wave.dvk:");
  assert_contains(e, "16 threads exited (first: thread (16,0,0))");
  /* A delta or mask outside [0, wave size). */
  dv_arg a2[] = {DV_ARG_ARRAY(d), DV_ARG_I32(1), DV_ARG_I32(0), DV_ARG_I32(32), DV_ARG_I32(0)};
  assert_status(dv_kernel_launch(test_kernel(m, "shuffles_u64"), &lc, 5, a2), DV_ERR_KERNEL_FAULT);
  assert_contains(dv_last_error(),
                  "kernel shuffles_u64, block (0,0,0), thread (0,0,0): "
                  "dv_wave_shuffle_up (wave.dvk:");
  assert_contains(dv_last_error(), "delta 32 is outside [0, 32), the wave size (host_wave_size)");
  dv_arg a3[] = {DV_ARG_ARRAY(d), DV_ARG_I32(1), DV_ARG_I32(0), DV_ARG_I32(0), DV_ARG_I32(-1)};
  assert_status(dv_kernel_launch(test_kernel(m, "shuffles_u64"), &lc, 5, a3), DV_ERR_KERNEL_FAULT);
  assert_contains(dv_last_error(), "dv_wave_shuffle_xor (wave.dvk:");
  assert_contains(dv_last_error(), "lane mask -1 is outside [0, 32)");
  /* The context goes on. */
  dv_arg ok[] = {DV_ARG_ARRAY(d), DV_ARG_I32(1), DV_ARG_I32(0), DV_ARG_I32(31), DV_ARG_I32(31)};
  assert_ok(dv_kernel_launch(test_kernel(m, "shuffles_u64"), &lc, 5, ok));
  dv_array_release(d);
  finish(c, m);

  /* A ballot cannot hold more than 64 lanes. */
  c = host_ctx("host_wave_size=128", "host_mode=checked");
  m = test_build(c, "wave.dvk", NULL, NULL, NULL);
  int pred[128] = {0};
  dv_array *dp = test_dev_from(c, pred, 128, DV_INT32), *dout = dev_new(c, 512, DV_INT32),
           *db = dev_new(c, 128, DV_UINT64);
  dv_arg a4[] = {DV_ARG_ARRAY(dp), DV_ARG_ARRAY(dout), DV_ARG_ARRAY(db)};
  lc.block.x = 128;
  assert_status(dv_kernel_launch(test_kernel(m, "votes"), &lc, 3, a4), DV_ERR_KERNEL_FAULT);
  assert_contains(dv_last_error(), "dv_wave_ballot (wave.dvk:");
  assert_contains(dv_last_error(), "64-bit mask cannot hold a wave of 128 threads");
  dv_array_release(dp), dv_array_release(dout), dv_array_release(db);
  finish(c, m);
}

/* ---- dv_printf ---------------------------------------------------------------------- */

/* Run fn(arg) with stdout going to a file; returns what was written. */
static char *capture_stdout(void (*fn)(void *), void *arg) {
  fflush(stdout);
  char path[256];
  const char *tmp = getenv("TMPDIR");
  snprintf(path, sizeof path, "%s/kwave-out-XXXXXX", tmp ? tmp : "/tmp");
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  int saved = dup(1);
  assert_true(saved >= 0);
  assert_true(dup2(fd, 1) == 1);
  fn(arg);
  fflush(stdout);
  assert_true(dup2(saved, 1) == 1);
  close(saved);
  close(fd);
  char *text = read_text_file(path);
  unlink(path);
  return text;
}

typedef struct print_job {
  dv_kernel *k;
  dv_launch_config cfg;
  dv_arg args[2];
  dv_status rc;
  char msg[1024];
} print_job;

static void run_print_job(void *arg) {
  print_job *j = arg;
  /* The program's own output stays in order; PoCL writes straight to file
   * descriptor 1, so stdout's buffer is flushed first. */
  printf("(before the launch)\n");
  fflush(stdout);
  j->rc = dv_kernel_launch(j->k, &j->cfg, 2, j->args);
  snprintf(j->msg, sizeof j->msg, "%s", j->rc ? dv_last_error() : "");
  printf("(after the launch)\n");
}

static int count_lines(const char *s, const char *needle) {
  int n = 0;
  for (const char *p = s; (p = strstr(p, needle)) != NULL; p += strlen(needle)) n++;
  return n;
}

static void test_printf(void **state) {
  (void)state;
  dv_module *m = test_build(g_ctx, "printf.dvk", NULL, NULL, NULL);
  dv_kernel *k = test_kernel(m, "hello");
  test_kernel(m, "print_then_fault");
  NEEDS_EXECUTION_M(g_ctx, m);
  enum { BX = 4, BY = 2, G = 2, N = BX * BY * G };
  int v[N];
  for (int i = 0; i < N; i++) v[i] = 100 + i;
  dv_array *dv = test_dev_from(g_ctx, v, N, DV_INT32);
  print_job j = {k, {{G, 1, 1}, {BX, BY, 1}, 0, NULL}, {DV_ARG_ARRAY(dv), DV_ARG_I32(5)}, 0, ""};
  char *out = capture_stdout(run_print_job, &j);
  if (j.rc) fail_msg("launch: %s: %s", dv_status_name(j.rc), j.msg);
  if (is_backend("host")) {
    /* Exactly these lines, in block then thread order. */
    char want[4096] = "(before the launch)\n";
    size_t n = strlen(want);
    for (int b = 0; b < G; b++) {
      for (int t = 0; t < BX * BY; t++) {
        int g = b * BX * BY + t;
        char pre[64];
        snprintf(pre, sizeof pre, "[block (%d,0,0) thread (%d,%d,0)] ", b, t % BX, t / BX);
        if (t < 5)
          n += (size_t)snprintf(want + n, sizeof want - n, "%st=%d v=%d big=%lld f=%.3f ok!\n", pre,
                                t, v[g], (long long)v[g] << 33, (double)((float)v[g] * 0.5f));
        if (t == 0)
          n += (size_t)snprintf(want + n, sizeof want - n, "%sfirst\n%ssecond\n%sno newline %d\n",
                                pre, pre, pre, b);
      }
    }
    snprintf(want + n, sizeof want - n, "(after the launch)\n");
    if (strcmp(out, want) != 0) fail_msg("dv_printf output:\n%s\nwanted:\n%s", out, want);
  } else {
    /* OpenCL (PoCL) prints from the device's buffer when the kernel is done:
     * the same text, without coordinates, in an order of its own. */
    print_message("[ info ] %s printed:\n%s", g_backend, out);
    for (int b = 0; b < G; b++)
      for (int t = 0; t < 5; t++) {
        int g = b * BX * BY + t;
        char line[128];
        snprintf(line, sizeof line, "t=%d v=%d big=%lld f=%.3f ok!\n", t, v[g],
                 (long long)v[g] << 33, (double)((float)v[g] * 0.5f));
        assert_int_equal(count_lines(out, line), 1);
      }
    assert_int_equal(count_lines(out, "first\nsecond\n"), G);
    assert_int_equal(count_lines(out, "no newline"), G);
    assert_true(strstr(out, "(before the launch)") < strstr(out, "t=0 v=100"));
  }
  free(out);
  dv_array_release(dv);
  dv_module_release(m);
}

/* Host: what does not fit in host_printf_buffer is dropped and counted; a
 * launch that faults still writes its output. */
static void test_printf_host_limits(void **state) {
  (void)state;
  HOST_ONLY();
  dv_context *c = host_ctx("host_printf_buffer=1024", NULL);
  dv_module *m = test_build(c, "printf.dvk", NULL, NULL, NULL);
  dv_array *d = dev_new(c, 256, DV_INT32);
  /* 256 calls of "before N\n" (8-11 bytes + 32 each): 24 fit in 1024 bytes. */
  print_job j = {test_kernel(m, "print_then_fault"),
                 {{1, 1, 1}, {256, 1, 1}, 0, NULL},
                 {DV_ARG_ARRAY(d), DV_ARG_I32(-1)},
                 0,
                 ""};
  char *out = capture_stdout(run_print_job, &j);
  assert_int_equal(j.rc, DV_OK);
  int kept = count_lines(out, "] before ");
  size_t used = 0;
  int fit = 0;
  for (int t = 0; t < 256; t++) {
    char s[32];
    size_t len = (size_t)snprintf(s, sizeof s, "before %d\n", t);
    if (used + len + 32 > 1024) break;
    used += len + 32;
    fit++;
  }
  assert_int_equal(kept, fit);
  assert_contains(out, "[block (0,0,0) thread (0,0,0)] before 0\n");
  char notice[256];
  snprintf(notice, sizeof notice, "[devarray] kernel print_then_fault: %d dv_printf calls (",
           256 - fit);
  assert_contains(out, notice);
  assert_contains(out, "option host_printf_buffer");
  free(out);
  /* A launch that faults (a divergent barrier) writes what was printed:
   * divergence is reported in checked mode. */
  dv_array_release(d);
  finish(c, m);
  c = host_ctx("host_printf_buffer=1024", "host_mode=checked");
  m = test_build(c, "printf.dvk", NULL, NULL, NULL);
  d = dev_new(c, 256, DV_INT32);
  j.k = test_kernel(m, "print_then_fault");
  j.args[0] = DV_ARG_ARRAY(d);
  j.args[1] = DV_ARG_I32(3);
  j.cfg.block.x = 8;
  out = capture_stdout(run_print_job, &j);
  assert_int_equal(j.rc, DV_ERR_KERNEL_FAULT);
  assert_contains(j.msg, "divergent barrier");
  assert_int_equal(count_lines(out, "] before "), 8);
  assert_contains(out, "[block (0,0,0) thread (7,0,0)] before 7\n");
  free(out);
  dv_array_release(d);
  finish(c, m);
}

int main(int argc, char **argv) {
  int begin = kernel_suite_begin(argc, argv, "kwave", "default", g_cache_dir, sizeof g_cache_dir);
  if (begin) return begin;
  const struct CMUnitTest tests[] = {
      T(test_wave_operations), T(test_host_wave_sizes),    T(test_host_wave_faults),
      T(test_printf),          T(test_printf_host_limits),
  };
  return kernel_suite_end(g_cache_dir,
                          test_main(argc, argv, "kwave", tests, sizeof tests / sizeof tests[0]));
}
