#define _POSIX_C_SOURCE 200809L
/* An iterative stencil (the 1-D heat equation, explicit steps) run three
 * ways, printing the transfers and the time of each:
 *   1. host arrays passed to every launch: copied in and back each time
 *      (Numba's conservative default);
 *   2. device arrays managed by hand: one upload, one download;
 *   3. smart arrays: the same transfers as (2), with the code of (1).
 *   example_smart [--backend host|opencl|cuda] [--n N] [--iters K]
 * The three results must be identical (one kernel, one device) and match a
 * host reference; the program exits 1 otherwise. */
#include <math.h>
#include <time.h>

#include "kernel_example.h"

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

typedef struct moved {
  unsigned long long up, down;
} moved;

static moved counts(dv_context *ctx) {
  dv_stats st = {.size = sizeof st};
  TRY(dv_context_stats(ctx, &st));
  return (moved){(unsigned long long)st.transfers_h2d, (unsigned long long)st.transfers_d2h};
}

static void report(const char *how, dv_context *ctx, moved before, double ms) {
  moved after = counts(ctx);
  printf("  %-34s %5llu up %5llu down  %9.2f ms\n", how, after.up - before.up,
         after.down - before.down, ms);
}

int main(int argc, char **argv) {
  /* --iters is ours; the rest goes to the shared parser. */
  long iters = 50;
  int kept = 1;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--iters") && i + 1 < argc) {
      iters = strtol(argv[++i], NULL, 10);
      if (iters <= 0) {
        fprintf(stderr, "%s: --iters needs a positive integer\n", argv[0]);
        return 2;
      }
    } else {
      argv[kept++] = argv[i];
    }
  }
  argc = kept;
  ex_opts o = {NULL, 1 << 16, NULL};
  ex_parse(argc, argv, &o,
           "K steps of a 1-D heat stencil on N floats (--iters K, default 50): host arrays,\n"
           "device arrays and smart arrays, with the transfers and time of each.");
  int n = (int)o.n;
  const float r = 0.25f;
  float *init = malloc((size_t)n * sizeof *init), *a = malloc((size_t)n * sizeof *a);
  float *b = malloc((size_t)n * sizeof *b);
  float *res[3];
  for (int w = 0; w < 3; w++) res[w] = malloc((size_t)n * sizeof *res[w]);
  if (!init || !a || !b || !res[0] || !res[1] || !res[2]) return 1;
  for (int i = 0; i < n; i++) init[i] = (i > n / 3 && i < 2 * n / 3) ? 100.0f : 0.0f;

  /* The host reference, in double precision. */
  double *du = malloc((size_t)n * sizeof *du), *dv = malloc((size_t)n * sizeof *dv);
  if (!du || !dv) return 1;
  for (int i = 0; i < n; i++) du[i] = init[i];
  for (long k = 0; k < iters; k++) {
    for (int i = 0; i < n; i++)
      dv[i] = (i == 0 || i == n - 1) ? du[i] : du[i] + r * (du[i - 1] - 2.0 * du[i] + du[i + 1]);
    double *t = du;
    du = dv, dv = t;
  }

  dv_context *ctx = ex_context(&o);
  dv_program *p = ex_program(ctx, &o, "smart.dvk");
  dv_module *m = ex_build(p);
  dv_kernel *k;
  TRY(dv_module_kernel(m, "heat_step", &k));
  dv_launch_config cfg = {{(uint32_t)((n + 127) / 128), 1, 1}, {128, 1, 1}, 0, NULL};
  const dv_dtype *f32 = dv_dtype_get(DV_FLOAT32);
  int64_t len = n;
  printf("%s: %ld steps of a heat stencil on %d floats\n", dv_context_backend(ctx), iters, n);

  /* 1. Host arrays, conservative: every launch copies both arrays in and back. */
  memcpy(a, init, (size_t)n * sizeof *a);
  dv_array *ha, *hb;
  TRY(dv_host_array_wrap(ctx, a, 1, &len, f32, NULL, &ha));
  TRY(dv_host_array_wrap(ctx, b, 1, &len, f32, NULL, &hb));
  moved before = counts(ctx);
  double t0 = now_ms();
  for (long s = 0; s < iters; s++) {
    dv_array *u = s % 2 ? hb : ha, *v = s % 2 ? ha : hb;
    dv_arg args[] = {DV_ARG_ARRAY(u), DV_ARG_ARRAY(v), DV_ARG_F32(r), DV_ARG_I32(n)};
    TRY(dv_kernel_launch(k, &cfg, 4, args));
  }
  report("host arrays (conservative)", ctx, before, now_ms() - t0);
  memcpy(res[0], iters % 2 ? b : a, (size_t)n * sizeof *a);

  /* 2. Device arrays by hand: one upload, the steps, one download. */
  memcpy(a, init, (size_t)n * sizeof *a);
  before = counts(ctx);
  t0 = now_ms();
  dv_array *da, *db;
  TRY(dv_to_device(ctx, ha, NULL, 1, NULL, &da));
  TRY(dv_device_array_like(da, NULL, &db));
  for (long s = 0; s < iters; s++) {
    dv_array *u = s % 2 ? db : da, *v = s % 2 ? da : db;
    dv_arg args[] = {DV_ARG_ARRAY(u), DV_ARG_ARRAY(v), DV_ARG_F32(r), DV_ARG_I32(n)};
    TRY(dv_kernel_launch(k, &cfg, 4, args));
  }
  TRY(dv_copy_to_host(iters % 2 ? db : da, ha, NULL, NULL));
  report("device arrays (explicit)", ctx, before, now_ms() - t0);
  memcpy(res[1], a, (size_t)n * sizeof *a);
  dv_array_release(da);
  dv_array_release(db);

  /* 3. Smart arrays: launches make the device copy current and mark it
   * changed; the host asks for the result once. */
  memcpy(a, init, (size_t)n * sizeof *a);
  before = counts(ctx);
  t0 = now_ms();
  dv_smart *sa, *sb;
  TRY(dv_smart_from_array(ha, 0, NULL, &sa));
  TRY(dv_smart_create(ctx, 1, &len, f32, NULL, 'C', DV_WHERE_DEVICE, NULL, &sb));
  for (long s = 0; s < iters; s++) {
    dv_smart *u = s % 2 ? sb : sa, *v = s % 2 ? sa : sb;
    dv_arg args[] = {DV_ARG_SMART_IN(u), DV_ARG_SMART_OUT(v), DV_ARG_F32(r), DV_ARG_I32(n)};
    TRY(dv_kernel_launch(k, &cfg, 4, args));
  }
  dv_array *out;
  TRY(dv_smart_get(iters % 2 ? sb : sa, DV_WHERE_HOST, NULL, &out));
  report("smart arrays", ctx, before, now_ms() - t0);
  void *od;
  TRY(dv_array_host_data(out, &od));
  memcpy(res[2], od, (size_t)n * sizeof *a);
  dv_smart_release(sa);
  dv_smart_release(sb);

  int bad = 0;
  double err = 0;
  for (int i = 0; i < n; i++) {
    if (memcmp(&res[0][i], &res[1][i], sizeof(float)) || memcmp(&res[0][i], &res[2][i], sizeof(float)))
      bad = 1;
    err = fmax(err, fabs(du[i] - res[2][i]));
  }
  printf("  results identical: %s; max abs error vs double reference %.3g\n", bad ? "NO" : "yes", err);

  dv_array_release(ha);
  dv_array_release(hb);
  dv_module_release(m);
  dv_program_destroy(p);
  TRY(dv_context_destroy(ctx));
  free(init), free(a), free(b), free(du), free(dv);
  for (int w = 0; w < 3; w++) free(res[w]);
  return bad || err > 1e-2 ? 1 : 0;
}
