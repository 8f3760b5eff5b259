/*
 * devarray bench [options]: the transfer sweep against memcpy of the same bytes
 * (table, JSON, plot).
 */
#define _DEFAULT_SOURCE
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

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

/* GB/s; 0 when the clock saw no time pass. */
static double gbps(size_t bytes, double seconds) {
  return seconds > 0 ? (double)bytes / seconds / 1e9 : 0;
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
    if (done == total) fprintf(stderr, "devarray: bench: %d/%d done\n", done, total);
    return;
  }
  int width = 30, fill = total ? done * width / total : width;
  fprintf(stderr, "\r[%.*s%*s] %3d/%d %-28s", fill, "##############################", width - fill,
          "", done, total, what);
  if (done == total) fprintf(stderr, "\n");
}

/* One measurement: median over reps of a synchronous devarray transfer and
 * of memcpy of the same number of bytes between two host buffers.  bytes >= 8. */
static dv_status measure(dv_context *ctx, direction dir, int pinned, size_t bytes, int reps,
                         result *r) {
  const dv_dtype *f8 = dv_dtype_get(DV_FLOAT64);
  int64_t n = (int64_t)(bytes / 8);
  bool strided = dir == H2D_STRIDED || dir == D2H_STRIDED || dir == D2D_STRIDED;
  /* strided: a (rows, 2*cols) host array viewed as [:, ::2] */
  int64_t cols = n < 512 ? n : 512, rows = n / cols;
  int64_t shape2[2] = {rows, cols}, wide[2] = {rows, 2 * cols};
  dv_array *host = NULL, *view = NULL, *dev = NULL, *dev2 = NULL;
  void *plain = NULL;
  char *m1 = NULL, *m2 = NULL;
  double *td = NULL, *tm = NULL;
  dv_status rc = DV_OK;
#define TRY(call)      \
  do {                 \
    rc = (call);       \
    if (rc) goto done; \
  } while (0)
#define TRY_ALLOC(p)                  \
  do {                                \
    if (!(p)) {                       \
      rc = DV_ERR_HOST_OUT_OF_MEMORY; \
      goto done;                      \
    }                                 \
  } while (0)
  if (strided) {
    if (pinned) {
      TRY(dv_pinned_array(ctx, 2, wide, f8, NULL, 'C', &host));
    } else {
      TRY_ALLOC(plain = malloc((size_t)(rows * 2 * cols * 8)));
      TRY(dv_host_array_wrap(ctx, plain, 2, wide, f8, NULL, &host));
    }
    dv_index idx[2] = {DV_ALL, DV_SLICE(DV_NONE, DV_NONE, 2)};
    TRY(dv_array_slice(host, 2, idx, &view));
    TRY(dv_device_array(ctx, 2, shape2, f8, NULL, 'C', NULL, &dev));
    if (dir == D2D_STRIDED) { /* the wide array on the device, its every other column */
      dv_array *wide_dev = NULL;
      TRY(dv_device_array(ctx, 2, wide, f8, NULL, 'C', NULL, &wide_dev));
      rc = dv_array_slice(wide_dev, 2, idx, &dev2);
      dv_array_release(wide_dev);
      if (rc) goto done;
    }
  } else {
    if (pinned) {
      TRY(dv_pinned_array(ctx, 1, &n, f8, NULL, 'C', &host));
    } else {
      TRY_ALLOC(plain = malloc(bytes));
      TRY(dv_host_array_wrap(ctx, plain, 1, &n, f8, NULL, &host));
    }
    view = dv_array_retain(host);
    TRY(dv_device_array(ctx, 1, &n, f8, NULL, 'C', NULL, &dev));
    if (dir == D2D) TRY(dv_device_array(ctx, 1, &n, f8, NULL, 'C', NULL, &dev2));
  }
  void *hp;
  TRY(dv_array_host_data(host, &hp));
  memset(hp, 1, (size_t)dv_array_nbytes(host));
  TRY(dv_array_memset(dev, 2, NULL));
  if (dev2) TRY(dv_array_memset(dev2, 3, NULL));
  size_t moved = (size_t)dv_array_nbytes(dev);
  TRY_ALLOC(m1 = malloc(moved));
  TRY_ALLOC(m2 = malloc(moved));
  TRY_ALLOC(td = malloc(sizeof(double) * (size_t)reps));
  TRY_ALLOC(tm = malloc(sizeof(double) * (size_t)reps));
  memset(m1, 1, moved), memset(m2, 2, moved);
  for (int i = -1; i < reps; i++) { /* i = -1: warm-up */
    double t0 = now_s();
    switch (dir) {
      case H2D:
      case H2D_STRIDED: TRY(dv_copy_to_device(dev, view, NULL)); break;
      case D2H:
      case D2H_STRIDED: TRY(dv_copy_to_host(dev, view, NULL, NULL)); break;
      case D2D: TRY(dv_array_copy(dev2, dev, NULL)); break;
      case D2D_STRIDED: TRY(dv_array_copy(dev, dev2, NULL)); break;
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
#undef TRY
#undef TRY_ALLOC
done:
  free(td), free(tm), free(m1), free(m2);
  dv_array_release(view), dv_array_release(host), dv_array_release(dev), dv_array_release(dev2);
  free(plain);
  return rc;
}

/* The sweep as GB/s against bytes: one line per direction and host memory,
 * and memcpy of the same bytes (the median over the directions) dashed. */
static int plot_bench(outfile *out, bool svg, const char *backend, const char *device, int reps,
                      const result *res, int nplan, int ns) {
  char *script = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&script, &len);
  if (!f) {
    errorf("out of memory");
    return EXIT_FAILURE;
  }
  gp_terminal(f, svg, 960, 600);
  fputs("set title ", f);
  char title[600];
  snprintf(title, sizeof title, "devarray bench: backend %s, device %s; median of %d", backend,
           device, reps);
  gp_quoted(f, title);
  fputs(
      "\nset xlabel 'bytes per transfer'\nset ylabel 'GB/s'\n"
      "set logscale xy 2\nset format x '%.0b %BB'\nset format y '%g'\n"
      "set grid\nset key outside right top\nset pointsize 0.8\n",
      f);
  for (int p = 0; p < nplan; p++) {
    fprintf(f, "$d%d << EOD\n", p);
    for (int s = 0; s < ns; s++) {
      const result *r = &res[p * ns + s];
      double g = gbps(r->bytes, r->t_dv);
      if (g > 0 && isfinite(g)) fprintf(f, "%zu %.6g\n", r->bytes, g);
    }
    fputs("EOD\n", f);
  }
  fputs("$memcpy << EOD\n", f);
  double *g = malloc(sizeof(double) * (size_t)(nplan ? nplan : 1));
  for (int s = 0; g && s < ns; s++) {
    int k = 0;
    for (int p = 0; p < nplan; p++) {
      double v = gbps(res[p * ns + s].bytes, res[p * ns + s].t_memcpy);
      if (v > 0 && isfinite(v)) g[k++] = v;
    }
    if (k) fprintf(f, "%zu %.6g\n", res[s].bytes, median(g, k));
  }
  free(g);
  fputs("EOD\nplot ", f);
  for (int p = 0; p < nplan; p++) {
    const result *r = &res[p * ns];
    fprintf(f, "$d%d using 1:2 with linespoints lw 1.5 title '%s %s', ", p, dir_name[r->dir],
            r->pinned ? "pinned" : "pageable");
  }
  fputs("$memcpy using 1:2 with lines dt 2 lw 2 lc rgb 'black' title 'memcpy (same bytes)'\n", f);
  if (fclose(f) || !script) {
    free(script);
    errorf("out of memory");
    return EXIT_FAILURE;
  }
  int rc = run_gnuplot(script, len, out);
  free(script);
  return rc;
}

/* The plot's format from its name: .png or .svg.  -1 for anything else. */
static int plot_format(const char *path) {
  const char *dot = strrchr(path, '.');
  if (dot && !strcasecmp(dot, ".svg")) return 1;
  if (dot && !strcasecmp(dot, ".png")) return 0;
  return -1;
}

const char bench_help[] =
    "Usage: devarray bench [OPTIONS]\n"
    "\n"
    "Time synchronous transfers -- host to device, device to host and device to\n"
    "device; pageable and pinned host memory; contiguous and every other column of\n"
    "a 2-D float64 array -- at sizes from --min to --max growing by 4x, against\n"
    "memcpy of the same bytes.  Each figure is the median of --reps repetitions\n"
    "after one warm-up; ratio = memcpy time / devarray time.\n"
    "\n"
    "Options:\n"
    "      --backend NAME  auto, host, opencl, cuda or hip (default: the backend option,\n"
    "                      DV_BACKEND, which defaults to auto)\n"
    "      --quick         a short sweep: up to 16M, 5 repetitions (an explicit\n"
    "                      --max or --reps wins)\n"
    "      --reps N        repetitions per measurement, 1 to 1000000 (default 11)\n"
    "      --min BYTES     smallest transfer, at least 8 (default 4K)\n"
    "      --max BYTES     largest transfer, at most 64G (default 256M)\n"
    "      --json          print the results as one JSON object instead of a table\n"
    "      --plot FILE     also draw GB/s against bytes to FILE, a .png or .svg\n"
    "                      (needs gnuplot)\n"
    "  -h, --help          print this help and exit\n"
    "\n"
    "BYTES is a whole number with an optional K, M, G or T suffix (powers of 1024).\n"
    "Progress goes to stderr; the table or JSON to stdout.\n";

int cmd_bench(int argc, char **argv) {
  enum { OPT_JSON = 256, OPT_QUICK, OPT_BACKEND, OPT_REPS, OPT_MIN, OPT_MAX, OPT_PLOT };
  static const struct option opts[] = {{"json", no_argument, NULL, OPT_JSON},
                                       {"quick", no_argument, NULL, OPT_QUICK},
                                       {"backend", required_argument, NULL, OPT_BACKEND},
                                       {"reps", required_argument, NULL, OPT_REPS},
                                       {"min", required_argument, NULL, OPT_MIN},
                                       {"max", required_argument, NULL, OPT_MAX},
                                       {"plot", required_argument, NULL, OPT_PLOT},
                                       {"help", no_argument, NULL, 'h'},
                                       {NULL, 0, NULL, 0}};
  bool json = false, quick = false;
  long long reps = 0;
  const char *backend = NULL, *plot = NULL;
  uint64_t min = 4096, max = 0;
  int c, bad = 0;
  while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    switch (c) {
      case 'h': fputs(bench_help, stdout); return 0;
      case OPT_JSON: json = true; break;
      case OPT_QUICK: quick = true; break;
      case OPT_BACKEND: backend = optarg; break;
      case OPT_REPS: bad = parse_count("--reps", optarg, 1, 1000000, &reps); break;
      case OPT_MIN: bad = parse_size("--min", optarg, 8, (uint64_t)64 << 30, &min); break;
      case OPT_MAX: bad = parse_size("--max", optarg, 8, (uint64_t)64 << 30, &max); break;
      case OPT_PLOT: plot = optarg; break;
      default: return try_help(); /* getopt said what was wrong */
    }
    if (bad) return bad;
  }
  if (optind < argc) return usage_error("unexpected argument '%s'", argv[optind]);
  if (!max) max = quick ? (uint64_t)16 << 20 : (uint64_t)256 << 20;
  if (!reps) reps = quick ? 5 : 11;
  if (min > max) {
    char a[32], b[32];
    size_text(a, sizeof a, min), size_text(b, sizeof b, max);
    return usage_error("--min (%s) is larger than --max (%s)", a, b);
  }
  int svg = plot ? plot_format(plot) : 0;
  if (svg < 0) return usage_error("--plot: '%s' is neither a .png nor a .svg name", plot);
  dv_config *cfg = NULL;
  dv_context *ctx = NULL;
  if (dv_config_create(&cfg)) {
    errorf("%s", dv_last_error());
    return EXIT_FAILURE;
  }
  if (backend && dv_config_set(cfg, "backend", backend)) {
    errorf("--backend: %s", dv_last_error());
    dv_config_destroy(cfg);
    return try_help();
  }

  /* What can fail before the work does: gnuplot, the plot's file. */
  outfile plot_file = {0};
  if (plot && !on_path("gnuplot")) {
    errorf("--plot: gnuplot was not found on PATH; " GNUPLOT_HINT);
    dv_config_destroy(cfg);
    return EXIT_FAILURE;
  }
  if (plot && out_open(&plot_file, plot, "wb")) {
    dv_config_destroy(cfg);
    return EXIT_FAILURE;
  }

  /* the sweep needs room for two device arrays of the largest size */
  char mem[32];
  snprintf(mem, sizeof mem, "%llu", (unsigned long long)(4 * max + ((uint64_t)64 << 20)));
  dv_config_set(cfg, "host_memory", mem);
  dv_config_set(cfg, "host_guard", "off"); /* measure copies, not the guard checks */
  dv_status rc = dv_context_create(cfg, &ctx);
  dv_config_destroy(cfg);
  if (rc) {
    errorf("%s: %s", dv_status_name(rc), dv_last_error());
    return out_close(&plot_file, false), EXIT_FAILURE;
  }
  dv_device_info di;
  if (dv_context_device_info(ctx, &di)) snprintf(di.name, sizeof di.name, "?");
  size_t sizes[32];
  int ns = 0;
  for (uint64_t s = min; s <= max && ns < 32; s *= 4) sizes[ns++] = (size_t)s;
  struct {
    direction d;
    int pinned;
  } plan[] = {{H2D, 0}, {H2D, 1},         {D2H, 0},         {D2H, 1},
              {D2D, 0}, {H2D_STRIDED, 0}, {D2H_STRIDED, 0}, {D2D_STRIDED, 0}};
  int nplan = (int)(sizeof plan / sizeof plan[0]), total = nplan * ns, done = 0;
  result *res = calloc((size_t)total, sizeof *res);
  if (!res) {
    errorf("out of memory");
    dv_context_destroy(ctx);
    return out_close(&plot_file, false), EXIT_FAILURE;
  }
  for (int p = 0; p < nplan; p++)
    for (int s = 0; s < ns; s++) {
      char what[64];
      snprintf(what, sizeof what, "%s%s %zu B", dir_name[plan[p].d],
               plan[p].pinned ? " pinned" : "", sizes[s]);
      progress(done, total, what);
      rc = measure(ctx, plan[p].d, plan[p].pinned, sizes[s], (int)reps, &res[done]);
      if (rc) {
        if (isatty(2)) fputc('\n', stderr);
        errorf("%s: %s: %s", what, dv_status_name(rc),
               *dv_last_error() ? dv_last_error() : dv_status_str(rc));
        free(res);
        dv_context_destroy(ctx);
        return out_close(&plot_file, false), EXIT_FAILURE;
      }
      done++;
    }
  progress(done, total, "done");
  const char *be = dv_context_backend(ctx);
  if (json) {
    printf("{\"backend\":");
    json_string(stdout, be);
    printf(",\"device\":");
    json_string(stdout, di.name);
    printf(",\"reps\":%lld,\"statistic\":\"median\",\"results\":[", reps);
    for (int i = 0; i < total; i++) {
      const result *r = &res[i];
      printf(
          "%s{\"direction\":\"%s\",\"host\":\"%s\",\"bytes\":%zu,\"devarray_s\":%.9f,\"memcpy_s\":%"
          ".9f,",
          i ? "," : "", dir_name[r->dir], r->pinned ? "pinned" : "pageable", r->bytes, r->t_dv,
          r->t_memcpy);
      json_fixed3(stdout, "devarray_GBps", gbps(r->bytes, r->t_dv));
      putchar(',');
      json_fixed3(stdout, "memcpy_GBps", gbps(r->bytes, r->t_memcpy));
      putchar(',');
      json_fixed3(stdout, "ratio", r->t_memcpy / r->t_dv);
      putchar('}');
    }
    printf("]}\n");
  } else {
    printf(
        "backend %s, device %s; median of %lld; ratio = memcpy time / devarray time (1.0 = as fast "
        "as memcpy)\n\n",
        be, di.name, reps);
    printf("%-12s %-9s %12s %12s %12s %8s\n", "direction", "host", "bytes", "devarray GB/s",
           "memcpy GB/s", "ratio");
    for (int i = 0; i < total; i++)
      printf("%-12s %-9s %12zu %12.2f %12.2f %8.3f\n", dir_name[res[i].dir],
             res[i].pinned ? "pinned" : "pageable", res[i].bytes, gbps(res[i].bytes, res[i].t_dv),
             gbps(res[i].bytes, res[i].t_memcpy), res[i].t_memcpy / res[i].t_dv);
  }
  int status = 0;
  if (plot) {
    /* The table is out first: a failing plot does not lose the measurements. */
    fflush(stdout);
    status = plot_bench(&plot_file, svg, be, di.name, (int)reps, res, nplan, ns);
    status = out_close(&plot_file, status == 0);
    if (!status) fprintf(stderr, "devarray: bench: plot: %s\n", plot);
  }
  free(res);
  dv_context_destroy(ctx);
  return status;
}
