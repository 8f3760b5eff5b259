/*
 * devarray - the command-line tool.
 *
 *   devarray info                 backends, devices, capacities, options
 *   devarray bench [options]      transfer sweep against memcpy of the same bytes
 *   devarray report [options]     the pool after a random workload: statistics, segment map (PNG), snapshot, CSV log
 *
 * Progress goes to stderr, results to stdout.
 */
#define _DEFAULT_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <stdbool.h>

#include "devarray.h"

static const char *source_name(dv_option_source s) {
  switch (s) {
    case DV_SOURCE_DEFAULT: return "default";
    case DV_SOURCE_ENV: return "environment";
    case DV_SOURCE_ENV_NUMBA: return "environment (Numba name)";
    case DV_SOURCE_API: return "api";
  }
  return "?";
}

static void print_size(char *buf, size_t cap, double bytes) {
  const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int i = 0;
  while (bytes >= 1024 && i < 4) bytes /= 1024, i++;
  snprintf(buf, cap, i ? "%.1f %s" : "%.0f %s", bytes, u[i]);
}

static void print_device(const dv_device_info *d) {
  char mem[32], maxa[32];
  print_size(mem, sizeof mem, (double)d->total_memory);
  print_size(maxa, sizeof maxa, (double)d->max_allocation);
  printf("    device:          %s (%s)\n", d->name, d->vendor);
  printf("    driver:          %s\n", d->driver_version);
  printf("    memory:          %s, largest allocation %s, alignment %llu bytes\n", mem, maxa,
         (unsigned long long)d->base_alignment);
  printf("    mapped memory:   %s; managed memory: %s\n", d->can_map_host_memory ? "yes" : "no",
         d->managed_memory ? "yes" : "no");
  if (d->compute_major) printf("    compute:         %d.%d\n", d->compute_major, d->compute_minor);
  if (d->pci_bus_id[0]) printf("    PCI bus id:      %s\n", d->pci_bus_id);
  printf("    peer access:     %d other device(s)\n", d->peer_devices);
}

static int cmd_info(void) {
  printf("devarray %s\n\nbackends:\n", dv_version());
  for (size_t i = 0; i < dv_backend_count(); i++) {
    const char *name = dv_backend_name(i);
    char reason[512];
    dv_status rc = dv_backend_probe(name, reason, sizeof reason);
    if (rc) {
      printf("  %-7s unavailable: %s (%s)\n", name, reason, dv_status_name(rc));
      continue;
    }
    dv_config *cfg = NULL;
    dv_context *ctx = NULL;
    dv_config_create(&cfg);
    dv_config_set(cfg, "backend", name);
    rc = dv_context_create(cfg, &ctx);
    dv_config_destroy(cfg);
    if (rc) {
      printf("  %-7s unavailable: %s (%s)\n", name, dv_last_error(), dv_status_name(rc));
      continue;
    }
    printf("  %-7s available: %s\n", name, reason);
    dv_device_info di;
    if (dv_context_device_info(ctx, &di) == DV_OK) print_device(&di);
    dv_context_destroy(ctx);
  }
  dv_context *ctx = NULL;
  if (dv_context_create(NULL, &ctx) == DV_OK) {
    printf("\ndefault backend (backend option \"auto\" picks cuda, an OpenCL GPU, then host): %s\n",
           dv_context_backend(ctx));
    dv_context_destroy(ctx);
  } else {
    printf("\nno default context: %s\n", dv_last_error());
  }
  printf("\noptions (environment variable, value, source):\n");
  for (size_t i = 0; i < dv_option_count(); i++) {
    dv_option_info oi;
    char val[160];
    dv_option_source src;
    dv_option_describe(i, &oi);
    dv_option_get(oi.name, val, sizeof val, &src);
    printf("  %-34s %-30s = %-12s (%s)\n", oi.name, oi.env, val[0] ? val : "\"\"", source_name(src));
    printf("  %-34s %s%s%s\n", "", oi.description, oi.env_fallback ? "; also " : "",
           oi.env_fallback ? oi.env_fallback : "");
  }
  return 0;
}

/* ---- bench ------------------------------------------------------------------- */

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

typedef enum { H2D, D2H, D2D, H2D_STRIDED, D2H_STRIDED, D2D_STRIDED } direction;
static const char *dir_name[] = {"h2d", "d2h", "d2d", "h2d-strided", "d2h-strided", "d2d-strided"};

typedef struct result {
  direction dir;
  int pinned;
  size_t bytes;
  double t_dv, t_memcpy;
} result;

static void progress(int done, int total, const char *what) {
  if (!isatty(2)) {
    if (done == total) fprintf(stderr, "bench: %d/%d done\n", done, total);
    return;
  }
  int width = 30, fill = total ? done * width / total : width;
  fprintf(stderr, "\r[%.*s%*s] %3d/%d %-28s", fill, "##############################", width - fill, "",
          done, total, what);
  if (done == total) fprintf(stderr, "\n");
}

#define CHECK(call)                                                                  \
  do {                                                                               \
    dv_status rc_ = (call);                                                          \
    if (rc_) {                                                                       \
      fprintf(stderr, "\n%s: %s: %s\n", #call, dv_status_name(rc_), dv_last_error()); \
      return rc_;                                                                    \
    }                                                                                \
  } while (0)

/* One measurement: median over reps of a synchronous devarray transfer and
 * of memcpy of the same number of bytes between two host buffers. */
static dv_status measure(dv_context *ctx, direction dir, int pinned, size_t bytes, int reps, result *r) {
  const dv_dtype *f8 = dv_dtype_get(DV_FLOAT64);
  int64_t n = (int64_t)(bytes / 8);
  bool strided = dir == H2D_STRIDED || dir == D2H_STRIDED || dir == D2D_STRIDED;
  /* strided: a (rows, 2*cols) host array viewed as [:, ::2] */
  int64_t cols = n < 512 ? n : 512, rows = n / cols;
  int64_t shape2[2] = {rows, cols}, wide[2] = {rows, 2 * cols};
  dv_array *host = NULL, *view = NULL, *dev = NULL, *dev2 = NULL;
  void *plain = NULL;
  if (strided) {
    if (pinned)
      CHECK(dv_pinned_array(ctx, 2, wide, f8, NULL, 'C', &host));
    else {
      plain = malloc((size_t)(rows * 2 * cols * 8));
      if (!plain) return DV_ERR_HOST_OUT_OF_MEMORY;
      CHECK(dv_host_array_wrap(ctx, plain, 2, wide, f8, NULL, &host));
    }
    dv_index idx[2] = {DV_ALL, DV_SLICE(DV_NONE, DV_NONE, 2)};
    CHECK(dv_array_slice(host, 2, idx, &view));
    CHECK(dv_device_array(ctx, 2, shape2, f8, NULL, 'C', NULL, &dev));
    if (dir == D2D_STRIDED) { /* the wide array on the device, its every other column */
      CHECK(dv_device_array(ctx, 2, wide, f8, NULL, 'C', NULL, &dev2));
      dv_array *dview = NULL;
      CHECK(dv_array_slice(dev2, 2, idx, &dview));
      dv_array_release(dev2);
      dev2 = dview;
    }
  } else {
    if (pinned)
      CHECK(dv_pinned_array(ctx, 1, &n, f8, NULL, 'C', &host));
    else {
      plain = malloc(bytes);
      if (!plain) return DV_ERR_HOST_OUT_OF_MEMORY;
      CHECK(dv_host_array_wrap(ctx, plain, 1, &n, f8, NULL, &host));
    }
    view = dv_array_retain(host);
    CHECK(dv_device_array(ctx, 1, &n, f8, NULL, 'C', NULL, &dev));
    if (dir == D2D) CHECK(dv_device_array(ctx, 1, &n, f8, NULL, 'C', NULL, &dev2));
  }
  void *hp;
  CHECK(dv_array_host_data(host, &hp));
  size_t host_bytes = (size_t)dv_array_nbytes(host);
  memset(hp, 1, host_bytes);
  CHECK(dv_array_memset(dev, 2, NULL));
  if (dev2) CHECK(dv_array_memset(dev2, 3, NULL));
  size_t moved = (size_t)dv_array_nbytes(dev);
  char *m1 = malloc(moved), *m2 = malloc(moved);
  if (!m1 || !m2) return DV_ERR_HOST_OUT_OF_MEMORY;
  memset(m1, 1, moved), memset(m2, 2, moved);
  double *td = malloc(sizeof(double) * (size_t)reps), *tm = malloc(sizeof(double) * (size_t)reps);
  for (int i = -1; i < reps; i++) { /* i = -1: warm-up */
    double t0 = now_s();
    switch (dir) {
      case H2D: case H2D_STRIDED: CHECK(dv_copy_to_device(dev, view, NULL)); break;
      case D2H: case D2H_STRIDED: CHECK(dv_copy_to_host(dev, view, NULL, NULL)); break;
      case D2D: CHECK(dv_array_copy(dev2, dev, NULL)); break;
      case D2D_STRIDED: CHECK(dv_array_copy(dev, dev2, NULL)); break;
    }
    double t1 = now_s();
    memcpy(m2, m1, moved);
    double t2 = now_s();
    if (i >= 0) td[i] = t1 - t0, tm[i] = t2 - t1;
  }
  r->dir = dir;
  r->pinned = pinned;
  r->bytes = moved;
  r->t_dv = median(td, reps);
  r->t_memcpy = median(tm, reps);
  free(td), free(tm), free(m1), free(m2);
  dv_array_release(view), dv_array_release(host), dv_array_release(dev), dv_array_release(dev2);
  free(plain);
  return DV_OK;
}

static int cmd_bench(int argc, char **argv) {
  int json = 0, quick = 0, reps = 0;
  const char *backend = NULL;
  size_t min = 4096, max = (size_t)256 << 20;
  for (int i = 0; i < argc; i++) {
    if (!strcmp(argv[i], "--json")) json = 1;
    else if (!strcmp(argv[i], "--quick")) quick = 1;
    else if (!strcmp(argv[i], "--backend") && i + 1 < argc) backend = argv[++i];
    else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--max") && i + 1 < argc) max = (size_t)strtoull(argv[++i], NULL, 0);
    else {
      fprintf(stderr, "usage: devarray bench [--json] [--quick] [--backend NAME] [--reps N] [--max BYTES]\n");
      return 2;
    }
  }
  if (quick && max > ((size_t)16 << 20)) max = (size_t)16 << 20;
  if (reps <= 0) reps = quick ? 5 : 11;
  dv_config *cfg = NULL;
  dv_context *ctx = NULL;
  dv_config_create(&cfg);
  if (backend && dv_config_set(cfg, "backend", backend)) {
    fprintf(stderr, "devarray bench: %s\n", dv_last_error());
    dv_config_destroy(cfg);
    return 2;
  }
  /* the sweep needs room for two device arrays of the largest size */
  char mem[32];
  snprintf(mem, sizeof mem, "%zu", 4 * max + ((size_t)64 << 20));
  dv_config_set(cfg, "host_memory", mem);
  dv_config_set(cfg, "host_guard", "off"); /* measure copies, not the guard checks */
  dv_status rc = dv_context_create(cfg, &ctx);
  dv_config_destroy(cfg);
  if (rc) {
    fprintf(stderr, "devarray bench: %s: %s\n", dv_status_name(rc), dv_last_error());
    return 1;
  }
  dv_device_info di;
  dv_context_device_info(ctx, &di);
  size_t sizes[32];
  int ns = 0;
  for (size_t s = min; s <= max && ns < 32; s *= 4) sizes[ns++] = s;
  struct { direction d; int pinned; } plan[] = {{H2D, 0}, {H2D, 1}, {D2H, 0}, {D2H, 1}, {D2D, 0},
                                                {H2D_STRIDED, 0}, {D2H_STRIDED, 0}, {D2D_STRIDED, 0}};
  int nplan = (int)(sizeof plan / sizeof plan[0]), total = nplan * ns, done = 0;
  result *res = calloc((size_t)total, sizeof *res);
  for (int p = 0; p < nplan; p++)
    for (int s = 0; s < ns; s++) {
      char what[64];
      snprintf(what, sizeof what, "%s%s %zu B", dir_name[plan[p].d], plan[p].pinned ? " pinned" : "", sizes[s]);
      progress(done, total, what);
      rc = measure(ctx, plan[p].d, plan[p].pinned, sizes[s], reps, &res[done]);
      if (rc) {
        dv_context_destroy(ctx);
        free(res);
        return 1;
      }
      done++;
    }
  progress(done, total, "done");
  if (json) {
    printf("{\"backend\":\"%s\",\"device\":\"%s\",\"reps\":%d,\"statistic\":\"median\",\"results\":[", dv_context_backend(ctx),
           di.name, reps);
    for (int i = 0; i < total; i++)
      printf("%s{\"direction\":\"%s\",\"host\":\"%s\",\"bytes\":%zu,\"devarray_s\":%.9f,\"memcpy_s\":%.9f,"
             "\"devarray_GBps\":%.3f,\"memcpy_GBps\":%.3f,\"ratio\":%.3f}",
             i ? "," : "", dir_name[res[i].dir], res[i].pinned ? "pinned" : "pageable", res[i].bytes, res[i].t_dv,
             res[i].t_memcpy, res[i].bytes / res[i].t_dv / 1e9, res[i].bytes / res[i].t_memcpy / 1e9,
             res[i].t_memcpy / res[i].t_dv);
    printf("]}\n");
  } else {
    printf("backend %s, device %s; median of %d; ratio = memcpy time / devarray time (1.0 = as fast as memcpy)\n\n",
           dv_context_backend(ctx), di.name, reps);
    printf("%-12s %-9s %12s %12s %12s %8s\n", "direction", "host", "bytes", "devarray GB/s", "memcpy GB/s", "ratio");
    for (int i = 0; i < total; i++)
      printf("%-12s %-9s %12zu %12.2f %12.2f %8.3f\n", dir_name[res[i].dir], res[i].pinned ? "pinned" : "pageable",
             res[i].bytes, res[i].bytes / res[i].t_dv / 1e9, res[i].bytes / res[i].t_memcpy / 1e9,
             res[i].t_memcpy / res[i].t_dv);
  }
  free(res);
  dv_context_destroy(ctx);
  return 0;
}


/* ---- report ------------------------------------------------------------------- */

/* RMM's random_allocations rule: 73% allocate while under n live, else free
 * a random live one; sizes uniform in [1, max_mib] MiB (here in bytes, so
 * small blocks appear too when max_mib is small). */
static unsigned long long rng_state = 0x9E3779B97F4A7C15ull;
static unsigned long long rng(void) {
  rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
  return rng_state;
}

/* Draw the segment map from the snapshot JSON (our own, known format). */
static int draw_map(const char *json, const char *png) {
  char dat[] = "/tmp/devarray-map-XXXXXX";
  int fd = mkstemp(dat);
  if (fd < 0) return -1;
  FILE *f = fdopen(fd, "w");
  const char *p = json;
  int seg = 0;
  double maxx = 0;
  while ((p = strstr(p, "{\"size\":")) != NULL) {
    unsigned long long ssize = 0;
    char kind[16] = "";
    if (sscanf(p, "{\"size\":%llu,\"kind\":\"%15[a-z]\"", &ssize, kind) != 2) break;
    const char *end = strstr(p, "]}");
    const char *b = strstr(p, "\"blocks\":[");
    if (!end || !b) break;
    /* merge runs of blocks in the same state for drawing */
    double run0 = -1, run1 = 0;
    char runstate[16] = "";
    while ((b = strstr(b, "{\"offset\":")) != NULL && b < end) {
      unsigned long long off, sz;
      char st[16];
      if (sscanf(b, "{\"offset\":%llu,\"size\":%llu,\"state\":\"%15[a-z]\"", &off, &sz, st) != 3) break;
      double x0 = off / 1048576.0, x1 = (off + sz) / 1048576.0;
      if (run0 >= 0 && strcmp(st, runstate) == 0 && x0 <= run1 + 1e-9) {
        run1 = x1;
      } else {
        if (run0 >= 0) fprintf(f, "%g %g %d %d\n", (run0 + run1) / 2, (run1 - run0) / 2, seg, strcmp(runstate, "free") ? 0xd62728 : 0x2ca02c);
        run0 = x0, run1 = x1;
        snprintf(runstate, sizeof runstate, "%s", st);
      }
      b++;
    }
    if (run0 >= 0)
      fprintf(f, "%g %g %d %d\n", (run0 + run1) / 2, (run1 - run0) / 2, seg, strcmp(runstate, "free") ? 0xd62728 : 0x2ca02c);
    if (ssize / 1048576.0 > maxx) maxx = ssize / 1048576.0;
    seg++;
    p = end;
  }
  fclose(f);
  FILE *g = popen("gnuplot 2>/dev/null", "w");
  if (!g) return -1;
  fprintf(g,
          "set terminal pngcairo size 1000,%d noenhanced\nset output '%s'\n"
          "set title 'devarray pool: segments (rows) and blocks; red allocated, green free'\n"
          "set xlabel 'offset in segment (MiB)'\nset ylabel 'segment'\nset yrange [-1:%d]\nset xrange [0:%g]\n"
          "set style fill solid 0.8 border -1\nunset key\n"
          "plot '%s' using 1:3:2:(0.4):4 with boxxyerror lc rgb variable\n",
          200 + 18 * seg, png, seg, maxx > 0 ? maxx : 1, dat);
  int rc = pclose(g);
  remove(dat);
  return rc == 0 ? seg : -1;
}

static int cmd_report(int argc, char **argv) {
  const char *backend = NULL, *png = "devarray-segments.png", *json = NULL, *csv = NULL;
  int steps = 1500, live_max = 120;
  size_t max_bytes = (size_t)3 << 20;
  for (int i = 0; i < argc; i++) {
    if (!strcmp(argv[i], "--backend") && i + 1 < argc) backend = argv[++i];
    else if (!strcmp(argv[i], "--png") && i + 1 < argc) png = argv[++i];
    else if (!strcmp(argv[i], "--json") && i + 1 < argc) json = argv[++i];
    else if (!strcmp(argv[i], "--csv") && i + 1 < argc) csv = argv[++i];
    else if (!strcmp(argv[i], "--steps") && i + 1 < argc) steps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--max") && i + 1 < argc) max_bytes = (size_t)strtoull(argv[++i], NULL, 0);
    else {
      fprintf(stderr, "usage: devarray report [--backend NAME] [--steps N] [--max BYTES] [--png FILE] [--json FILE] [--csv FILE]\n");
      return 2;
    }
  }
  dv_config *cfg = NULL;
  dv_context *ctx = NULL;
  dv_config_create(&cfg);
  dv_config_set(cfg, "memory_manager", "pool");
  if (backend && dv_config_set(cfg, "backend", backend)) {
    fprintf(stderr, "devarray report: %s\n", dv_last_error());
    dv_config_destroy(cfg);
    return 2;
  }
  if (csv && dv_config_set(cfg, "pool_log", csv)) {
    fprintf(stderr, "devarray report: %s\n", dv_last_error());
    dv_config_destroy(cfg);
    return 2;
  }
  dv_status rc = dv_context_create(cfg, &ctx);
  dv_config_destroy(cfg);
  if (rc) {
    fprintf(stderr, "devarray report: %s: %s\n", dv_status_name(rc), dv_last_error());
    return 1;
  }
  /* a workload that leaves allocated and cached blocks behind */
  dv_array **live = calloc((size_t)live_max, sizeof *live);
  int nlive = 0;
  for (int i = 0; i < steps; i++) {
    if (nlive < live_max && (rng() % 100 < 73 || nlive == 0)) {
      int64_t n = (int64_t)(1 + rng() % max_bytes);
      if (dv_device_array(ctx, 1, &n, dv_dtype_get(DV_UINT8), NULL, 'C', NULL, &live[nlive]) == DV_OK) nlive++;
    } else if (nlive) {
      int k = (int)(rng() % (unsigned)nlive);
      dv_array_release(live[k]);
      live[k] = live[--nlive];
    }
  }
  dv_context_flush_deallocs(ctx);
  dv_mm_stats ms;
  dv_memory_stats(ctx, &ms);
  double frag = ms.free_cached ? 1.0 - (double)ms.largest_free / (double)ms.free_cached : 0.0;
  printf("pool on backend %s after %d random steps (%d arrays live)\n\n", dv_context_backend(ctx), steps, nlive);
  printf("%-12s %14s %14s %14s\n", "bytes", "current", "peak", "total");
  printf("%-12s %14llu %14llu %14llu\n", "allocated", (unsigned long long)ms.allocated.current,
         (unsigned long long)ms.allocated.peak, (unsigned long long)ms.allocated.total);
  printf("%-12s %14llu %14llu %14llu\n", "active", (unsigned long long)ms.active.current,
         (unsigned long long)ms.active.peak, (unsigned long long)ms.active.total);
  printf("%-12s %14llu %14llu %14llu\n", "reserved", (unsigned long long)ms.reserved.current,
         (unsigned long long)ms.reserved.peak, (unsigned long long)ms.reserved.total);
  printf("\nhits %llu, misses %llu, splits %llu, merges %llu, releases %llu; %llu segments; cached free %llu "
         "bytes, largest free block %llu, fragmentation %.3f\n",
         (unsigned long long)ms.hits, (unsigned long long)ms.misses, (unsigned long long)ms.splits,
         (unsigned long long)ms.merges, (unsigned long long)ms.releases, (unsigned long long)ms.segments,
         (unsigned long long)ms.free_cached, (unsigned long long)ms.largest_free, frag);
  size_t need = 0;
  dv_memory_snapshot_json(ctx, NULL, 0, &need);
  char *snap = malloc(need + 1);
  if (snap && dv_memory_snapshot_json(ctx, snap, need + 1, &need) == DV_OK) {
    if (json) {
      FILE *f = fopen(json, "w");
      if (f) fputs(snap, f), fputc('\n', f), fclose(f);
      printf("snapshot: %s\n", json);
    }
    int segs = draw_map(snap, png);
    if (segs >= 0) printf("segment map: %s (%d segments)\n", png, segs);
    else printf("segment map: not drawn (gnuplot with the pngcairo terminal is needed: Debian's gnuplot-nox)\n");
  }
  if (csv) printf("allocation log (RMM format): %s\n", csv);
  free(snap);
  for (int i = 0; i < nlive; i++) dv_array_release(live[i]);
  free(live);
  dv_context_destroy(ctx);
  return 0;
}

int main(int argc, char **argv) {
  if (argc >= 2 && !strcmp(argv[1], "info")) return cmd_info();
  if (argc >= 2 && !strcmp(argv[1], "bench")) return cmd_bench(argc - 2, argv + 2);
  if (argc >= 2 && !strcmp(argv[1], "report")) return cmd_report(argc - 2, argv + 2);
  if (argc >= 2 && (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version"))) {
    printf("devarray %s\n", dv_version());
    return 0;
  }
  fprintf(stderr,
          "usage: devarray info\n"
          "       devarray bench [--json] [--quick] [--backend NAME] [--reps N] [--max BYTES]\n"
          "       devarray report [--backend NAME] [--steps N] [--max BYTES] [--png FILE] [--json FILE] [--csv FILE]\n");
  return argc < 2 ? 2 : (strcmp(argv[1], "help") && strcmp(argv[1], "--help") ? 2 : 0);
}
