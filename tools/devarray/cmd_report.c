/*
 * devarray report [options]: the pool after a random workload: statistics,
 * segment map (PNG), snapshot (JSON), allocation log (CSV).
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

/* ---- report ------------------------------------------------------------------- */

/* RMM's random_allocations rule: 73% allocate while under n live, else free
 * a random live one; sizes uniform in [1, max_mib] MiB (here in bytes, so
 * small blocks appear too when max_mib is small). */
static unsigned long long rng_state = 0x9E3779B97F4A7C15ull;
static unsigned long long rng(void) {
  rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
  return rng_state;
}

static void map_run(FILE *f, double x0, double x1, int seg, const char *state) {
  fprintf(f, "%g %g %d %d\n", (x0 + x1) / 2, (x1 - x0) / 2, seg,
          strcmp(state, "free") ? 0xd62728 : 0x2ca02c);
}

/* Draw the segment map from the pool's snapshot (dv_memory_snapshot_json)
 * into out as a PNG.  The number of segments, or -1 (said why). */
static int draw_map(const char *snapshot, outfile *out) {
  jval root;
  const char *err;
  size_t at;
  if (!json_parse(snapshot, &root, &err, &at)) {
    errorf("the pool's snapshot is not valid JSON (%s at byte %zu)", err, at);
    jfree(&root);
    return -1;
  }
  const jval *segs = jget(&root, "segments", J_ARRAY);
  char *script = NULL;
  size_t len = 0;
  FILE *f = segs ? open_memstream(&script, &len) : NULL;
  if (!f) {
    if (segs)
      errorf("out of memory");
    else
      errorf("the pool's snapshot has no \"segments\" array");
    jfree(&root);
    return -1;
  }
  int nseg = (int)segs->n;
  double maxx = 0;
  bool ok = true;
  gp_terminal(f, false, 1000, 200 + 18 * nseg);
  fprintf(f,
          "set title 'devarray pool: segments (rows) and blocks; red allocated, green free'\n"
          "set xlabel 'offset in segment (MiB)'\nset ylabel 'segment'\nset yrange [-1:%d]\n"
          "set style fill solid 0.8 border -1\nunset key\n$map << EOD\n",
          nseg);
  for (int s = 0; ok && s < nseg; s++) {
    const jval *seg = &segs->item[s], *blocks = jget(seg, "blocks", J_ARRAY);
    uint64_t ssize;
    if (!blocks || !jget_uint(seg, "size", &ssize)) {
      ok = false;
      break;
    }
    /* merge runs of blocks in the same state for drawing */
    double run0 = -1, run1 = 0;
    const char *runstate = "";
    for (size_t b = 0; b < blocks->n; b++) {
      const jval *blk = &blocks->item[b], *st = jget(blk, "state", J_STRING);
      uint64_t off, sz;
      if (!st || !jget_uint(blk, "offset", &off) || !jget_uint(blk, "size", &sz)) {
        ok = false;
        break;
      }
      double x0 = (double)off / 1048576.0, x1 = (double)(off + sz) / 1048576.0;
      if (run0 >= 0 && !strcmp(st->string, runstate) && x0 <= run1 + 1e-9) {
        run1 = x1;
      } else {
        if (run0 >= 0) map_run(f, run0, run1, s, runstate);
        run0 = x0, run1 = x1, runstate = st->string;
      }
    }
    if (ok && run0 >= 0) map_run(f, run0, run1, s, runstate);
    if ((double)ssize / 1048576.0 > maxx) maxx = (double)ssize / 1048576.0;
  }
  /* An empty pool still gets a (blank) map: gnuplot needs one point to plot. */
  fprintf(f, "EOD\nset xrange [0:%g]\nplot %s\n", maxx > 0 ? maxx : 1,
          nseg ? "$map using 1:3:2:(0.4):4 with boxxyerror lc rgb variable" : "NaN notitle");
  bool closed = fclose(f) == 0 && script;
  jfree(&root);
  if (!ok)
    errorf("the pool's snapshot lacks a segment's size or a block's offset, size or state");
  else if (!closed)
    errorf("out of memory");
  int rc = ok && closed ? run_gnuplot(script, len, out) : EXIT_FAILURE;
  free(script);
  return rc ? -1 : nseg;
}

const char report_help[] =
    "Usage: devarray report [OPTIONS]\n"
    "\n"
    "Run a random workload on the pool memory manager (RMM's random_allocations:\n"
    "73% of steps allocate while fewer than 120 arrays are live, the others free a\n"
    "random live one; sizes uniform in 1..--max bytes), then print the pool's\n"
    "statistics and draw its segments and blocks.\n"
    "\n"
    "Options:\n"
    "      --backend NAME  auto, host, opencl, cuda or hip (default: the backend option)\n"
    "      --steps N       workload steps, 0 to 100000000 (default 1500)\n"
    "      --max BYTES     largest allocation, 1 to 64G (default 3M)\n"
    "      --png FILE      the segment map as a PNG (default: a new file\n"
    "                      $TMPDIR/devarray-segments-XXXXXX.png, its name printed;\n"
    "                      needs gnuplot: without it the default map is skipped\n"
    "                      with a note, a map asked for by name is an error)\n"
    "      --json FILE     the pool's snapshot (segments, blocks, statistics) as JSON\n"
    "      --csv FILE      append every allocation and free in RMM's CSV format\n"
    "  -h, --help          print this help and exit\n"
    "\n"
    "BYTES is a whole number with an optional K, M, G or T suffix (powers of 1024).\n";

int cmd_report(int argc, char **argv) {
  enum { OPT_BACKEND = 256, OPT_PNG, OPT_JSON, OPT_CSV, OPT_STEPS, OPT_MAX };
  static const struct option opts[] = {{"backend", required_argument, NULL, OPT_BACKEND},
                                       {"png", required_argument, NULL, OPT_PNG},
                                       {"json", required_argument, NULL, OPT_JSON},
                                       {"csv", required_argument, NULL, OPT_CSV},
                                       {"steps", required_argument, NULL, OPT_STEPS},
                                       {"max", required_argument, NULL, OPT_MAX},
                                       {"help", no_argument, NULL, 'h'},
                                       {NULL, 0, NULL, 0}};
  const char *backend = NULL, *png = NULL, *json = NULL, *csv = NULL;
  long long steps = 1500;
  int live_max = 120;
  uint64_t max_bytes = (uint64_t)3 << 20;
  int c, bad = 0;
  while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    switch (c) {
      case 'h': fputs(report_help, stdout); return 0;
      case OPT_BACKEND: backend = optarg; break;
      case OPT_PNG: png = optarg; break;
      case OPT_JSON: json = optarg; break;
      case OPT_CSV: csv = optarg; break;
      case OPT_STEPS: bad = parse_count("--steps", optarg, 0, 100000000, &steps); break;
      case OPT_MAX: bad = parse_size("--max", optarg, 1, (uint64_t)64 << 30, &max_bytes); break;
      default: return try_help(); /* getopt said what was wrong */
    }
    if (bad) return bad;
  }
  if (optind < argc) return usage_error("unexpected argument '%s'", argv[optind]);
  dv_config *cfg = NULL;
  dv_context *ctx = NULL;
  if (dv_config_create(&cfg) || dv_config_set(cfg, "memory_manager", "pool")) {
    errorf("%s", dv_last_error());
    dv_config_destroy(cfg);
    return EXIT_FAILURE;
  }
  if (backend && dv_config_set(cfg, "backend", backend)) {
    errorf("--backend: %s", dv_last_error());
    dv_config_destroy(cfg);
    return try_help();
  }
  if (csv && dv_config_set(cfg, "pool_log", csv)) {
    errorf("--csv: %s", dv_last_error());
    dv_config_destroy(cfg);
    return try_help();
  }

  /* Every output is opened before the work starts.  The CSV log is the
   * library's (it appends, and only warns when it cannot open the file), so
   * the tool checks that it can append to it. */
  bool draw = true;
  if (!on_path("gnuplot")) {
    if (png) {
      errorf("--png: gnuplot was not found on PATH; " GNUPLOT_HINT);
      dv_config_destroy(cfg);
      return EXIT_FAILURE;
    }
    draw = false;
  }
  outfile png_file = {0}, json_file = {0}, csv_file = {0};
  int status = 0;
  char tmp_png[4096];
  if (draw)
    status = png ? out_open(&png_file, png, "wb")
                 : out_open_temp(&png_file, tmp_png, sizeof tmp_png, "devarray-segments", "png");
  if (!status && json) status = out_open(&json_file, json, "w");
  if (!status && csv) status = out_open(&csv_file, csv, "a");
  if (!status && csv) status = out_close(&csv_file, true);
  if (status) {
    out_close(&png_file, false), out_close(&json_file, false);
    dv_config_destroy(cfg);
    return EXIT_FAILURE;
  }

  dv_status rc = dv_context_create(cfg, &ctx);
  dv_config_destroy(cfg);
  dv_array **live = rc ? NULL : calloc((size_t)live_max, sizeof *live);
  if (rc || !live) {
    if (rc)
      errorf("%s: %s", dv_status_name(rc), dv_last_error());
    else
      errorf("out of memory");
    dv_context_destroy(ctx);
    out_close(&png_file, false), out_close(&json_file, false);
    if (csv_file.created) remove(csv);
    return EXIT_FAILURE;
  }
  /* a workload that leaves allocated and cached blocks behind */
  int nlive = 0;
  for (long long i = 0; i < steps; i++) {
    if (nlive < live_max && (rng() % 100 < 73 || nlive == 0)) {
      int64_t n = (int64_t)(1 + rng() % max_bytes);
      if (dv_device_array(ctx, 1, &n, dv_dtype_get(DV_UINT8), NULL, 'C', NULL, &live[nlive]) ==
          DV_OK)
        nlive++;
    } else if (nlive) {
      int k = (int)(rng() % (unsigned)nlive);
      dv_array_release(live[k]);
      live[k] = live[--nlive];
    }
  }
  dv_context_flush_deallocs(ctx);
  dv_mm_stats ms;
  memset(&ms, 0, sizeof ms);
  dv_memory_stats(ctx, &ms);
  double frag = ms.free_cached ? 1.0 - (double)ms.largest_free / (double)ms.free_cached : 0.0;
  printf("pool on backend %s after %lld random steps (%d arrays live)\n\n", dv_context_backend(ctx),
         steps, nlive);
  printf("%-12s %14s %14s %14s\n", "bytes", "current", "peak", "total");
  printf("%-12s %14llu %14llu %14llu\n", "allocated", (unsigned long long)ms.allocated.current,
         (unsigned long long)ms.allocated.peak, (unsigned long long)ms.allocated.total);
  printf("%-12s %14llu %14llu %14llu\n", "active", (unsigned long long)ms.active.current,
         (unsigned long long)ms.active.peak, (unsigned long long)ms.active.total);
  printf("%-12s %14llu %14llu %14llu\n", "reserved", (unsigned long long)ms.reserved.current,
         (unsigned long long)ms.reserved.peak, (unsigned long long)ms.reserved.total);
  printf(
      "\nhits %llu, misses %llu, splits %llu, merges %llu, releases %llu; %llu segments; cached "
      "free %llu "
      "bytes, largest free block %llu, fragmentation %.3f\n",
      (unsigned long long)ms.hits, (unsigned long long)ms.misses, (unsigned long long)ms.splits,
      (unsigned long long)ms.merges, (unsigned long long)ms.releases,
      (unsigned long long)ms.segments, (unsigned long long)ms.free_cached,
      (unsigned long long)ms.largest_free, frag);
  fflush(stdout);

  /* The snapshot: asked for its length, then written (a bigger buffer if the pool grew in between).
   */
  char *snap = NULL;
  size_t need = 0;
  rc = dv_memory_snapshot_json(ctx, NULL, 0, &need);
  for (int tries = 0; !rc && tries < 3; tries++) {
    free(snap);
    snap = malloc(need + 1);
    if (!snap) {
      rc = DV_ERR_HOST_OUT_OF_MEMORY;
      break;
    }
    rc = dv_memory_snapshot_json(ctx, snap, need + 1, &need);
    if (rc != DV_ERR_INVALID_ARGUMENT) break;
  }
  if (rc) {
    errorf("snapshot: %s: %s", dv_status_name(rc), dv_last_error());
    status = EXIT_FAILURE;
  }
  if (!status && json_file.f) {
    fputs(snap, json_file.f), fputc('\n', json_file.f);
    status = out_close(&json_file, true);
    if (!status) printf("snapshot: %s\n", json);
  }
  if (!status && draw) {
    int segs = draw_map(snap, &png_file);
    status = out_close(&png_file, segs >= 0);
    if (!status) printf("segment map: %s (%d segments)\n", png_file.path, segs);
  } else if (!status) {
    printf(
        "segment map: not drawn (gnuplot with the pngcairo terminal is needed: Debian's "
        "gnuplot-nox)\n");
  }
  out_close(&png_file, !status), out_close(&json_file, !status);
  free(snap);
  for (int i = 0; i < nlive; i++) dv_array_release(live[i]);
  free(live);
  dv_context_destroy(ctx);
  /* The library has written and closed the log by now. */
  if (!status && csv) printf("allocation log (RMM format): %s\n", csv);
  return status;
}
