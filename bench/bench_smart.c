/*
 * Smart arrays and host arrays at launch (issue 12), one backend per run:
 * K steps of a 1-D heat stencil on N floats, three ways, in the same run:
 *   explicit  device arrays by hand (one upload, K launches, one download):
 *             the baseline every ratio divides by;
 *   host      host arrays passed to each launch with the conservative
 *             default (each launch copies both arrays in and back);
 *   hinted    host arrays with direction hints (in / out: one copy each way
 *             per launch instead of two);
 *   smart     smart arrays (in / out), one get(host) at the end.
 * Then the per-launch overhead of a smart argument on a tiny array, against
 * a device-array argument (the bookkeeping: lock, valid bits).
 *   bench_smart [--backend host|opencl|cuda] [--n N] [--iters K] [--reps R]
 * Medians of R runs; transfers counted from dv_stats (version 3).
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "devarray.h"

static const char *k_src =
    "DV_KERNEL(heat_step, DV_ARRAY(const float, u), DV_ARRAY(float, v), float r, int n) {\n"
    "  DV_BIND(const float, u); DV_BIND(float, v);\n"
    "  dv_i64 i = dv_global_id(0);\n"
    "  if (i >= n) return;\n"
    "  if (i == 0 || i == n - 1) v[i] = u[i];\n"
    "  else v[i] = u[i] + r * (u[i - 1] - 2.0f * u[i] + u[i + 1]);\n"
    "}\n";

enum { EXPLICIT, HOST, HINTED, SMART, WAYS };
static const char *way_name[WAYS] = {"explicit device arrays", "host arrays (conservative)",
                                     "host arrays (in/out hints)", "smart arrays (in/out)"};

static dv_context *g_ctx;
static dv_kernel *g_k;
static int g_n;
static long g_iters;
static float *g_a, *g_b;

static void counts(uint64_t *up, uint64_t *down) {
  dv_stats st = {.size = sizeof st};
  DV(dv_context_stats(g_ctx, &st));
  *up = st.transfers_h2d, *down = st.transfers_d2h;
}

/* One run of `way`; returns seconds, and the transfers it made. */
static double run(int way, uint64_t *up, uint64_t *down) {
  int64_t len = g_n;
  const dv_dtype *f32 = dv_dtype_get(DV_FLOAT32);
  dv_launch_config cfg = {{(uint32_t)((g_n + 127) / 128), 1, 1}, {128, 1, 1}, 0, NULL};
  const float r = 0.25f;
  for (int i = 0; i < g_n; i++) g_a[i] = (float)(i % 97);
  dv_array *ha, *hb;
  DV(dv_host_array_wrap(g_ctx, g_a, 1, &len, f32, NULL, &ha));
  DV(dv_host_array_wrap(g_ctx, g_b, 1, &len, f32, NULL, &hb));
  uint64_t u0, d0;
  counts(&u0, &d0);
  double t0 = bench_now();
  if (way == EXPLICIT) {
    dv_array *da, *db;
    DV(dv_to_device(g_ctx, ha, NULL, 1, NULL, &da));
    DV(dv_device_array_like(da, NULL, &db));
    for (long s = 0; s < g_iters; s++) {
      dv_arg a[] = {DV_ARG_ARRAY(s % 2 ? db : da), DV_ARG_ARRAY(s % 2 ? da : db), DV_ARG_F32(r),
                    DV_ARG_I32(g_n)};
      DV(dv_kernel_launch(g_k, &cfg, 4, a));
    }
    DV(dv_copy_to_host(g_iters % 2 ? db : da, ha, NULL, NULL));
    dv_array_release(da);
    dv_array_release(db);
  } else if (way == HOST || way == HINTED) {
    for (long s = 0; s < g_iters; s++) {
      dv_array *u = s % 2 ? hb : ha, *v = s % 2 ? ha : hb;
      dv_arg a[] = {DV_ARG_ARRAY(u), DV_ARG_ARRAY(v), DV_ARG_F32(r), DV_ARG_I32(g_n)};
      if (way == HINTED) a[0] = DV_ARG_ARRAY_IN(u), a[1] = DV_ARG_ARRAY_OUT(v);
      DV(dv_kernel_launch(g_k, &cfg, 4, a));
    }
  } else {
    dv_smart *sa, *sb;
    DV(dv_smart_from_array(ha, 0, NULL, &sa));
    DV(dv_smart_create(g_ctx, 1, &len, f32, NULL, 'C', DV_WHERE_DEVICE, NULL, &sb));
    for (long s = 0; s < g_iters; s++) {
      dv_arg a[] = {DV_ARG_SMART_IN(s % 2 ? sb : sa), DV_ARG_SMART_OUT(s % 2 ? sa : sb),
                    DV_ARG_F32(r), DV_ARG_I32(g_n)};
      DV(dv_kernel_launch(g_k, &cfg, 4, a));
    }
    dv_array *out;
    DV(dv_smart_get(g_iters % 2 ? sb : sa, DV_WHERE_HOST, NULL, &out));
    dv_smart_release(sa);
    dv_smart_release(sb);
  }
  double t = bench_now() - t0;
  uint64_t u1, d1;
  counts(&u1, &d1);
  *up = u1 - u0, *down = d1 - d0;
  dv_array_release(ha);
  dv_array_release(hb);
  DV(dv_context_flush_deallocs(g_ctx));
  return t;
}

/* The small-launch loops, as functions of their own so that callgrind can
 * count each (--toggle-collect=launch_device_loop / launch_smart_loop). */
__attribute__((noinline)) void launch_device_loop(int count, dv_array *da, dv_array *db) {
  dv_launch_config c = {{1, 1, 1}, {64, 1, 1}, 0, NULL};
  for (int i = 0; i < count; i++) {
    dv_arg a[] = {DV_ARG_ARRAY(da), DV_ARG_ARRAY(db), DV_ARG_F32(0.25f), DV_ARG_I32(64)};
    DV(dv_kernel_launch(g_k, &c, 4, a));
  }
}

__attribute__((noinline)) void launch_smart_loop(int count, dv_smart *sa, dv_smart *sb) {
  dv_launch_config c = {{1, 1, 1}, {64, 1, 1}, 0, NULL};
  for (int i = 0; i < count; i++) {
    dv_arg a[] = {DV_ARG_SMART_IN(sa), DV_ARG_SMART_OUT(sb), DV_ARG_F32(0.25f), DV_ARG_I32(64)};
    DV(dv_kernel_launch(g_k, &c, 4, a));
  }
}

int main(int argc, char **argv) {
  const char *backend = NULL;
  int reps = 5, launch_only = 0;
  g_n = 1 << 20;
  g_iters = 50;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--backend") && i + 1 < argc) backend = argv[++i];
    else if (!strcmp(argv[i], "--n") && i + 1 < argc) g_n = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--iters") && i + 1 < argc) g_iters = atol(argv[++i]);
    else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--launch-only") && i + 1 < argc) launch_only = atoi(argv[++i]);
    else {
      fprintf(stderr, "usage: %s [--backend B] [--n N] [--iters K] [--reps R] [--launch-only COUNT]\n",
              argv[0]);
      return 2;
    }
  }
  if (g_n < 3 || g_iters < 1 || reps < 1 || reps > 99) return 2;
  dv_config *cfg;
  DV(dv_config_create(&cfg));
  if (backend) DV(dv_config_set(cfg, "backend", backend));
  DV(dv_context_create(cfg, &g_ctx));
  dv_config_destroy(cfg);
  dv_program *p;
  dv_module *m;
  DV(dv_program_create(g_ctx, "bench_smart", k_src, &p));
  DV(dv_program_build(p, 0, &m));
  DV(dv_module_kernel(m, "heat_step", &g_k));
  g_a = malloc((size_t)g_n * sizeof *g_a);
  g_b = malloc((size_t)g_n * sizeof *g_b);
  if (!g_a || !g_b) return 1;

  if (launch_only) goto small;
  printf("bench_smart: backend %s, %ld steps on %d floats (%.1f MiB per array), median of %d\n",
         dv_context_backend(g_ctx), g_iters, g_n, g_n * 4.0 / 1048576.0, reps);
  double med[WAYS];
  uint64_t up[WAYS], down[WAYS];
  /* Round robin over the ways, so that a busy moment of a shared machine
   * falls on all of them alike. */
  double t[WAYS][99];
  for (int w = 0; w < WAYS; w++) (void)run(w, &up[w], &down[w]); /* warm-up */
  for (int r = 0; r < reps; r++)
    for (int w = 0; w < WAYS; w++) t[w][r] = run(w, &up[w], &down[w]);
  for (int w = 0; w < WAYS; w++) med[w] = bench_median(t[w], reps);
  printf("  %-28s %8s %8s %11s %9s\n", "", "up", "down", "median ms", "ratio");
  for (int w = 0; w < WAYS; w++)
    printf("  %-28s %8llu %8llu %11.2f %8.2fx\n", way_name[w], (unsigned long long)up[w],
           (unsigned long long)down[w], med[w] * 1e3, med[w] / med[EXPLICIT]);

small:;
  /* Per-launch cost of a smart argument whose device copy is current,
   * against a device array, on a 64-element array (the kernel is trivial). */
  int64_t len = 64;
  const dv_dtype *f32 = dv_dtype_get(DV_FLOAT32);
  dv_array *da, *db;
  DV(dv_device_array(g_ctx, 1, &len, f32, NULL, 'C', NULL, &da));
  DV(dv_device_array(g_ctx, 1, &len, f32, NULL, 'C', NULL, &db));
  dv_smart *sa, *sb;
  DV(dv_smart_create(g_ctx, 1, &len, f32, NULL, 'C', DV_WHERE_DEVICE, NULL, &sa));
  DV(dv_smart_create(g_ctx, 1, &len, f32, NULL, 'C', DV_WHERE_DEVICE, NULL, &sb));
  if (launch_only) {
    launch_smart_loop(1, sa, sb); /* the device copies exist from here on */
    launch_device_loop(launch_only, da, db);
    launch_smart_loop(launch_only, sa, sb);
  } else {
    enum { LAUNCHES = 2000 };
    double td[99], ts[99];
    for (int r = 0; r < reps; r++) {
      double t0 = bench_now();
      launch_device_loop(LAUNCHES, da, db);
      td[r] = (bench_now() - t0) / LAUNCHES;
      t0 = bench_now();
      launch_smart_loop(LAUNCHES, sa, sb);
      ts[r] = (bench_now() - t0) / LAUNCHES;
    }
    double mtd = bench_median(td, reps), mts = bench_median(ts, reps);
    printf("  synchronous launch, 64 floats: device arrays %.2f us, smart arrays %.2f us (%.2fx)\n",
           mtd * 1e6, mts * 1e6, mts / mtd);
  }
  dv_smart_release(sa);
  dv_smart_release(sb);
  dv_array_release(da);
  dv_array_release(db);
  dv_module_release(m);
  dv_program_destroy(p);
  DV(dv_context_destroy(g_ctx));
  free(g_a);
  free(g_b);
  return 0;
}
