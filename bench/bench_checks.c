/*
 * The cost and the yield of the host simulator's kernel checks (issue 24),
 * with Oclgrind, an OpenCL device simulator, beside them where installed.
 *
 * (a) Timing, in one run: Numba's tiled matmul (16 x 16 tiles in shared
 *     memory; n = 128 and 256) and a block reduction (256 threads a block,
 *     8 barriers) on the host simulator in four contexts of their own:
 *     host_mode=fast; host_mode=checked with kernel_check=off, =bounds and
 *     =on (every check).  Batches interleaved across the contexts, medians;
 *     each row's time is printed with its ratio to fast and to checked-off.
 *     Then the same kernels on Oclgrind (devarray's OpenCL backend,
 *     opencl_device=Oclgrind) in a child process per Oclgrind setting:
 *     its default checks (memory), + OCLGRIND_DATA_RACES=1, + races and
 *     OCLGRIND_UNINITIALIZED=1; printed as Oclgrind's time / devarray's.
 * (b) The seeded bugs of bench/kernels/seeded.dvk, each bug and its
 *     corrected twin run once under devarray's kernel_check=on (a context
 *     each; the status and message of the first step that failed, or "no
 *     report") and under Oclgrind with all its checks (a child process each;
 *     whether its stderr had a report, how many, and the first one's
 *     headline).  Nothing is assumed about either side: what each reported
 *     is what was seen.
 * Oclgrind installs no .icd: a temporary directory holding oclgrind.icd is
 * the child's OCL_ICD_VENDORS.  Results of (a) are checked against C (max
 * error printed).
 *   bench_checks [--reps R] [--reduce N] [--oclgrind-reps R] [--timeout S]
 *                [--no-oclgrind] [--only timing|seeded] [--seeded FILE]
 */
#define _GNU_SOURCE
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_util.h"
#include "devarray.h"

#ifndef DV_BENCH_OCLGRIND_LIB
#define DV_BENCH_OCLGRIND_LIB "/usr/lib/oclgrind/liboclgrind-rt-icd.so"
#endif

#define RB 256 /* threads a block in the reduction */

/* The kernels: bench/kernels/bench.dvk (saxpy, naive, tiled, block_sum, empty). */
static char *k_src;

static int reps = 7, ocl_reps = 1, timeout_s = 600;

/* ---- one context and its kernels ---- */

typedef struct {
  const char *label;
  dv_context *ctx;
  dv_stream *s;
  dv_program *p;
  dv_module *m;
  dv_kernel *tiled, *block_sum;
  double t[64], med, err;
} side;

/* A context with "name=value" options (NULL-terminated), the module built.
 * Returns 0 and prints why when an option is refused or the context cannot
 * be made (a refused option is how a build without a check says so). */
static int side_open(side *sd, const char *label, ...) {
  memset(sd, 0, sizeof *sd);
  sd->label = label;
  dv_config *cfg;
  DV(dv_config_create(&cfg));
  va_list ap;
  va_start(ap, label);
  dv_status rc = DV_OK;
  for (const char *kv; (kv = va_arg(ap, const char *)) != NULL;) {
    char name[64];
    const char *eq = strchr(kv, '=');
    snprintf(name, sizeof name, "%.*s", (int)(eq - kv), kv);
    if ((rc = dv_config_set(cfg, name, eq + 1)) != DV_OK) {
      printf("%-16s unavailable: %s refused: %s: %s\n", label, kv, dv_status_name(rc), dv_last_error());
      break;
    }
  }
  va_end(ap);
  if (!rc && (rc = dv_context_create(cfg, &sd->ctx)) != DV_OK)
    printf("%-16s unavailable: context: %s: %s\n", label, dv_status_name(rc), dv_last_error());
  dv_config_destroy(cfg);
  if (rc) return sd->ctx = NULL, 0;
  DV(dv_stream_create(sd->ctx, 0, &sd->s));
  DV(dv_program_create(sd->ctx, "bench.dvk", k_src, &sd->p));
  double t0 = bench_now();
  rc = dv_program_build(sd->p, 0, &sd->m);
  if (rc) {
    printf("%-16s unavailable: build: %s: %s\n%s\n", label, dv_status_name(rc), dv_last_error(),
           dv_program_log(sd->p));
    exit(1);
  }
  double tb = bench_now() - t0;
  DV(dv_module_kernel(sd->m, "tiled", &sd->tiled));
  DV(dv_module_kernel(sd->m, "block_sum", &sd->block_sum));
  dv_device_info di;
  DV(dv_context_device_info(sd->ctx, &di));
  printf("%-16s %s (%s)", label, dv_context_backend(sd->ctx), di.name);
  if (!strcmp(dv_context_backend(sd->ctx), "host")) {
    char hm[32], kc[32], cf[256];
    DV(dv_context_option(sd->ctx, "host_mode", hm, sizeof hm, NULL));
    DV(dv_context_option(sd->ctx, "kernel_check", kc, sizeof kc, NULL));
    DV(dv_context_option(sd->ctx, "host_cflags", cf, sizeof cf, NULL));
    printf(": host_mode %s, kernel_check %s, host_cflags \"%s\"", hm, kc, cf);
  }
  printf("; module %s in %.0f ms\n", dv_module_from_cache(sd->m) ? "from the cache" : "compiled", tb * 1e3);
  return 1;
}

static void side_close(side *sd) {
  if (!sd->ctx) return;
  dv_stream_release(sd->s);
  dv_module_release(sd->m);
  dv_program_destroy(sd->p);
  DV(dv_context_flush_deallocs(sd->ctx));
  DV(dv_context_destroy(sd->ctx));
  sd->ctx = NULL;
}

static dv_array *dev_f32(side *sd, const float *data, int ndim, const int64_t *shape) {
  const dv_dtype *f32 = dv_dtype_get(DV_FLOAT32);
  dv_array *d, *h;
  if (!data) {
    DV(dv_device_array(sd->ctx, ndim, shape, f32, NULL, 'C', NULL, &d));
    return d;
  }
  DV(dv_host_array_wrap(sd->ctx, (void *)data, ndim, shape, f32, NULL, &h));
  DV(dv_to_device(sd->ctx, h, NULL, 1, NULL, &d));
  dv_array_release(h);
  return d;
}

static void to_host_f32(dv_array *d, float *out, int ndim, const int64_t *shape) {
  dv_array *h;
  DV(dv_host_array_wrap(dv_array_context(d), out, ndim, shape, dv_dtype_get(DV_FLOAT32), NULL, &h));
  DV(dv_copy_to_host(d, h, NULL, NULL));
  dv_array_release(h);
}

static double max_err(const float *a, const float *b, size_t n) {
  double e = 0;
  for (size_t i = 0; i < n; i++) e = fmax(e, fabs((double)a[i] - (double)b[i]));
  return e;
}

static void *xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p) {
    fprintf(stderr, "out of memory\n");
    exit(1);
  }
  return p;
}

/* ---- (a) the rows: every side in turn, batch by batch ---- */

/* Tiled matmul n x n on sides[0..ns); warm: one launch before the timed ones. */
static void row_tiled(side **sides, int ns, int n, int r, int warm) {
  size_t nn = (size_t)n * (size_t)n;
  float *A = xmalloc(nn * 4), *B = xmalloc(nn * 4), *R = xmalloc(nn * 4), *C = xmalloc(nn * 4);
  /* multiples of 1/8 below 2^11: every sum exact in float, in any order */
  for (size_t i = 0; i < nn; i++) A[i] = (float)(i % 7) * 0.25f, B[i] = (float)(i % 5) * 0.5f;
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) {
      float acc = 0;
      for (int k = 0; k < n; k++) acc += A[(size_t)i * n + k] * B[(size_t)k * n + j];
      R[(size_t)i * n + j] = acc;
    }
  int64_t shape[2] = {n, n};
  dv_array *dA[8], *dB[8], *dC[8];
  uint32_t g = (uint32_t)((n + 15) / 16);
  for (int v = 0; v < ns; v++) {
    dA[v] = dev_f32(sides[v], A, 2, shape);
    dB[v] = dev_f32(sides[v], B, 2, shape);
    dC[v] = dev_f32(sides[v], NULL, 2, shape);
  }
  for (int b = warm ? -1 : 0; b < r; b++)
    for (int v = 0; v < ns; v++) {
      dv_launch_config lc = {{g, g, 1}, {16, 16, 1}, 0, sides[v]->s};
      dv_arg args[] = {DV_ARG_ARRAY(dA[v]), DV_ARG_ARRAY(dB[v]), DV_ARG_ARRAY(dC[v]), DV_ARG_I32(n)};
      double t0 = bench_now();
      DV(dv_kernel_launch(sides[v]->tiled, &lc, 4, args));
      DV(dv_stream_synchronize(sides[v]->s));
      if (b >= 0) sides[v]->t[b] = bench_now() - t0;
    }
  for (int v = 0; v < ns; v++) {
    to_host_f32(dC[v], C, 2, shape);
    sides[v]->err = max_err(C, R, nn);
    sides[v]->med = bench_median(sides[v]->t, r);
    dv_array_release(dA[v]), dv_array_release(dB[v]), dv_array_release(dC[v]);
  }
  free(A), free(B), free(R), free(C);
}

/* Block reduction of n floats: the launch, the partials copied back and
 * summed on the host, all timed. */
static void row_reduce(side **sides, int ns, size_t n, int r, int warm) {
  size_t nb = (n + RB - 1) / RB;
  float *x = xmalloc(n * 4), *part = xmalloc(nb * 4), ref = 0;
  for (size_t i = 0; i < n; i++) x[i] = (float)(i % 7) * 0.25f, ref += x[i]; /* exact */
  int64_t shape[1] = {(int64_t)n}, pshape[1] = {(int64_t)nb};
  dv_array *dx[8], *dp[8], *hp[8];
  float got[8] = {0};
  for (int v = 0; v < ns; v++) {
    dx[v] = dev_f32(sides[v], x, 1, shape);
    dp[v] = dev_f32(sides[v], NULL, 1, pshape);
    DV(dv_host_array_wrap(sides[v]->ctx, part, 1, pshape, dv_dtype_get(DV_FLOAT32), NULL, &hp[v]));
  }
  for (int b = warm ? -1 : 0; b < r; b++)
    for (int v = 0; v < ns; v++) {
      side *sd = sides[v];
      dv_launch_config lc = {{(uint32_t)nb, 1, 1}, {RB, 1, 1}, 0, sd->s};
      dv_arg args[] = {DV_ARG_ARRAY(dx[v]), DV_ARG_ARRAY(dp[v]), DV_ARG_I64((int64_t)n)};
      double t0 = bench_now();
      DV(dv_kernel_launch(sd->block_sum, &lc, 3, args));
      DV(dv_copy_to_host(dp[v], hp[v], sd->s, NULL));
      DV(dv_stream_synchronize(sd->s));
      float s = 0;
      for (size_t k = 0; k < nb; k++) s += part[k];
      if (b >= 0) sd->t[b] = bench_now() - t0;
      got[v] = s;
    }
  for (int v = 0; v < ns; v++) {
    sides[v]->err = fabs((double)got[v] - (double)ref);
    sides[v]->med = bench_median(sides[v]->t, r);
    dv_array_release(dx[v]), dv_array_release(dp[v]), dv_array_release(hp[v]);
  }
  free(x), free(part);
}

/* ---- child processes on Oclgrind ---- */

static char icd_dir[256]; /* the temporary OCL_ICD_VENDORS directory; "" without Oclgrind */
static const char *self_exe = "/proc/self/exe";

/* Oclgrind's settings for the timing children. */
typedef struct {
  const char *label, *env1, *env2;
} ocl_mode;
static const ocl_mode ocl_modes[] = {
    {"Oclgrind default", NULL, NULL}, /* memory errors, barrier divergence */
    {"Oclgrind +races", "OCLGRIND_DATA_RACES=1", NULL},
    {"Oclgrind all", "OCLGRIND_DATA_RACES=1", "OCLGRIND_UNINITIALIZED=1"},
};

/* Make the ICD directory; 0 (and say why) where Oclgrind is not installed. */
static int oclgrind_setup(void) {
  if (access(DV_BENCH_OCLGRIND_LIB, R_OK) != 0) {
    printf("Oclgrind: skipped: %s not found (Debian's oclgrind; scripts/setup installs it)\n",
           DV_BENCH_OCLGRIND_LIB);
    return 0;
  }
  const char *tmp = getenv("TMPDIR");
  snprintf(icd_dir, sizeof icd_dir, "%s/bench_checks.XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(icd_dir)) {
    printf("Oclgrind: skipped: cannot make %s\n", icd_dir);
    return icd_dir[0] = 0, 0;
  }
  char path[300];
  snprintf(path, sizeof path, "%s/oclgrind.icd", icd_dir);
  FILE *f = fopen(path, "w");
  if (!f || fprintf(f, "%s\n", DV_BENCH_OCLGRIND_LIB) < 0 || fclose(f) != 0) {
    printf("Oclgrind: skipped: cannot write %s\n", path);
    return 0;
  }
  return 1;
}

static void oclgrind_cleanup(void) {
  if (!icd_dir[0]) return;
  char path[300];
  snprintf(path, sizeof path, "%s/oclgrind.icd", icd_dir);
  unlink(path);
  rmdir(icd_dir);
}

/* Run this program as a child: argv, with the environment of this process;
 * with ocl, less the variables that choose a backend or set up Oclgrind,
 * plus OCL_ICD_VENDORS, DV_BACKEND=opencl, DV_OPENCL_DEVICE=Oclgrind; and the
 * extra ones given.  Its stdout and stderr are read into *out and *err
 * (malloc'd).  Returns its exit status, or -1 when it was killed (after
 * timeout_s: SIGALRM) or could not run; *sig says the signal. */
extern char **environ;
static int run_child(char *const *argv, int ocl, const char *e1, const char *e2, char **out, char **err,
                     int *sig) {
  size_t ne = 0;
  while (environ[ne]) ne++;
  char **envp = xmalloc((ne + 8) * sizeof *envp);
  size_t k = 0;
  static const char *const drop[] = {"OCL_ICD_VENDORS=", "DV_BACKEND=", "DV_OPENCL_DEVICE=",
                                     "DV_DEVICE=", "OCLGRIND_"};
  for (size_t i = 0; i < ne; i++) {
    int keep = 1;
    for (size_t d = 0; ocl && d < sizeof drop / sizeof *drop; d++)
      keep &= strncmp(environ[i], drop[d], strlen(drop[d])) != 0;
    if (keep) envp[k++] = environ[i];
  }
  char vendors[320];
  snprintf(vendors, sizeof vendors, "OCL_ICD_VENDORS=%s", icd_dir);
  if (ocl) {
    envp[k++] = vendors;
    envp[k++] = "DV_BACKEND=opencl";
    envp[k++] = "DV_OPENCL_DEVICE=Oclgrind";
  }
  if (e1) envp[k++] = (char *)e1;
  if (e2) envp[k++] = (char *)e2;
  envp[k] = NULL;
  FILE *fo = tmpfile(), *fe = tmpfile();
  *out = *err = NULL;
  *sig = 0;
  int status = -1;
  fflush(stdout);
  pid_t pid = fo && fe ? fork() : -1;
  if (pid == 0) {
    dup2(fileno(fo), 1);
    dup2(fileno(fe), 2);
    alarm((unsigned)timeout_s);
    execve(self_exe, argv, envp);
    _exit(127);
  }
  if (pid > 0 && waitpid(pid, &status, 0) == pid) {
    if (WIFSIGNALED(status)) *sig = WTERMSIG(status), status = -1;
    else status = WEXITSTATUS(status);
  }
  FILE *fs[2] = {fo, fe};
  char **dst[2] = {out, err};
  for (int i = 0; i < 2; i++) {
    if (!fs[i]) continue;
    long n = (fseek(fs[i], 0, SEEK_END), ftell(fs[i]));
    rewind(fs[i]);
    *dst[i] = xmalloc((size_t)(n > 0 ? n : 0) + 1);
    size_t got = n > 0 ? fread(*dst[i], 1, (size_t)n, fs[i]) : 0;
    (*dst[i])[got] = 0;
    fclose(fs[i]);
  }
  if (!*out) *out = calloc(1, 1);
  if (!*err) *err = calloc(1, 1);
  free(envp);
  return status;
}

/* The child's side of (a): the rows on Oclgrind, one line each on stdout,
 * "row NAME SECONDS ERROR". */
static int child_time(int ntiled, const int *tn, size_t nreduce) {
  side o;
  side *one[1] = {&o};
  if (!side_open(&o, "Oclgrind", "backend=opencl", "opencl_device=Oclgrind", (const char *)NULL)) return 1;
  for (int i = 0; i < ntiled; i++) {
    row_tiled(one, 1, tn[i], ocl_reps, 0);
    printf("row tiled%d %.9g %.3g\n", tn[i], o.med, o.err);
  }
  row_reduce(one, 1, nreduce, ocl_reps, 0);
  printf("row reduce %.9g %.3g\n", o.med, o.err);
  side_close(&o);
  return 0;
}

/* ---- (b) the seeded bugs ---- */

typedef struct {
  const char *name, *what;
  uint32_t grid, block;
} seeded_case;
static const seeded_case cases[] = {
    {"ww", "shared write-write race", 64, 64},
    {"reduce", "reduction missing one barrier", 16, 256},
    {"counter", "non-atomic counter, 64 blocks", 64, 64},
    {"uninit", "uninitialized shared read", 64, 64},
    {"shared_oob", "shared out-of-bounds write", 64, 64},
    {"global_read", "global out-of-bounds read", 64, 64},
    {"divergent", "divergent barrier", 64, 64},
    {"global_write", "global out-of-bounds write", 64, 64},
};
#define NCASES (sizeof cases / sizeof *cases)
#define SEEDED_N 4096 /* grid x block of every case */

static char *seeded_src;
static const char *seeded_path = DV_BENCH_KERNELS_DIR "/seeded.dvk";

static char *read_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  rewind(f);
  char *s = xmalloc((size_t)(n > 0 ? n : 0) + 1);
  size_t got = n > 0 ? fread(s, 1, (size_t)n, f) : 0;
  s[got] = 0;
  fclose(f);
  return s;
}

/* Run kernel `kname` of case c once in ctx (a NULL stream: the launch
 * returns its fault).  The first step that failed and its status and
 * message go to step/rc/msg; "" and DV_OK when none did. */
static void seeded_once(dv_context *ctx, const seeded_case *c, const char *kname, const char **step,
                        dv_status *rc, char *msg, size_t cap) {
  static int in[SEEDED_N], out[SEEDED_N + 1];
  for (int i = 0; i < SEEDED_N; i++) in[i] = i % 97 + 1;
  memset(out, 0, sizeof out);
  dv_program *p = NULL;
  dv_module *m = NULL;
  dv_kernel *k = NULL;
  dv_array *hi = NULL, *ho = NULL, *di = NULL, *dout = NULL;
  int64_t nin = SEEDED_N, nout = SEEDED_N + 1;
  const dv_dtype *i32 = dv_dtype_get(DV_INT32);
  *step = "program";
  if ((*rc = dv_program_create(ctx, "seeded.dvk", seeded_src, &p))) goto done;
  *step = "build";
  if ((*rc = dv_program_build(p, 0, &m))) goto done;
  *step = "kernel";
  if ((*rc = dv_module_kernel(m, kname, &k))) goto done;
  *step = "arrays";
  if ((*rc = dv_host_array_wrap(ctx, in, 1, &nin, i32, NULL, &hi)) ||
      (*rc = dv_host_array_wrap(ctx, out, 1, &nout, i32, NULL, &ho)) ||
      (*rc = dv_to_device(ctx, hi, NULL, 1, NULL, &di)) || (*rc = dv_to_device(ctx, ho, NULL, 1, NULL, &dout)))
    goto done;
  *step = "launch";
  dv_launch_config lc = {{c->grid, 1, 1}, {c->block, 1, 1}, 0, NULL};
  dv_arg args[] = {DV_ARG_ARRAY(di), DV_ARG_ARRAY(dout), DV_ARG_I32(SEEDED_N)};
  if ((*rc = dv_kernel_launch(k, &lc, 3, args))) goto done;
  *step = "synchronize";
  if ((*rc = dv_context_synchronize(ctx))) goto done;
  *step = "copy back";
  if ((*rc = dv_copy_to_host(dout, ho, NULL, NULL))) goto done;
  *step = "";
done:
  snprintf(msg, cap, "%s", *rc ? dv_last_error() : "");
  dv_array_release(hi), dv_array_release(ho), dv_array_release(di), dv_array_release(dout);
  dv_module_release(m);
  dv_program_destroy(p);
}

/* The child's side of (b): case `kname` once, on the host simulator
 * (host: checked, kernel_check=on, kernel_timeout where this build has it)
 * or on Oclgrind (the parent set DV_BACKEND and DV_OPENCL_DEVICE); prints
 * "status STEP NAME" and the message on stdout. */
static int child_seeded(const char *kname, int host) {
  for (size_t i = 0; i < NCASES; i++) {
    if (strlen(kname) < 4 || strcmp(kname + 4, cases[i].name)) continue;
    dv_config *cfg;
    DV(dv_config_create(&cfg));
    if (host) {
      DV(dv_config_set(cfg, "backend", "host"));
      DV(dv_config_set(cfg, "host_mode", "checked"));
      DV(dv_config_set(cfg, "kernel_check", "on"));
      (void)dv_config_set(cfg, "kernel_timeout", "20"); /* where this build has it */
    }
    dv_context *ctx;
    DV(dv_context_create(cfg, &ctx));
    dv_config_destroy(cfg);
    const char *step;
    dv_status rc;
    char msg[4096];
    seeded_once(ctx, &cases[i], kname, &step, &rc, msg, sizeof msg);
    dv_status end = dv_context_destroy(ctx);
    if (!rc && end) step = "context destroy", rc = end, snprintf(msg, sizeof msg, "%s", dv_last_error());
    printf("status %s %s\n%s\n", step[0] ? step : "-", dv_status_name(rc), msg);
    return 0;
  }
  return 2;
}

/* The first line of text (at most cap - 1 characters), for a short quote. */
static void first_line(const char *text, char *buf, size_t cap) {
  text += strspn(text, "\n");
  size_t n = strcspn(text, "\n");
  snprintf(buf, cap, "%.*s", (int)(n < cap ? n : cap - 1), text);
}

/* devarray: the case in a child (where a sanitized build's own checks turn
 * a bug into a crash, only the child ends); prints the status and message
 * of the first step that failed, or "no report". */
static void seeded_devarray(const char *kname) {
  char *argv[] = {"bench_checks", "--child", "host-seeded", (char *)kname, NULL};
  char *out, *err;
  int sig;
  int st = run_child(argv, 0, NULL, NULL, &out, &err, &sig);
  char step[64] = "", status[64] = "";
  const char *msg = "";
  if (!strncmp(out, "status ", 7) && sscanf(out + 7, "%63s %63s", step, status) == 2) {
    msg = strchr(out, '\n');
    msg = msg ? msg + 1 : "";
  }
  printf("    devarray %-18s ", kname);
  if (st != 0 || !status[0]) {
    char line[200] = "";
    /* a sanitizer's report: its SUMMARY line says the most */
    const char *sum = strstr(err, "SUMMARY: ");
    first_line(sum ? sum : err, line, sizeof line);
    if (st < 0)
      printf("the process died (%s)", sig == SIGALRM ? "timed out" : strsignal(sig));
    else
      printf("the process failed (exit status %d)", st);
    printf("%s%s\n", line[0] ? "; stderr: " : "", line);
  } else if (!strcmp(status, "DV_OK")) {
    printf("no report\n");
  } else {
    printf("%s at %s:\n", status, step);
    char *m = strdup(msg);
    for (char *line = m ? strtok(m, "\n") : NULL; line; line = strtok(NULL, "\n"))
      printf("        | %s\n", line);
    free(m);
  }
  free(out), free(err);
}

/* Oclgrind: the case in a child with all of Oclgrind's checks.  Its reports
 * go to stderr, one per offending access or work-group: a headline (not
 * indented: "Read-write data race at local memory address 0x...") and
 * indented lines naming the kernel, the work-items and "At line N (column
 * C) of FILE".  Prints how many there were, by kind (the headline less its
 * address), each kind with the line of its first report. */
#define OCL_KINDS 6
static void seeded_oclgrind(const char *kname) {
  char *argv[] = {"bench_checks", "--child", "seeded", (char *)kname, NULL};
  char *out, *err;
  int sig;
  int st = run_child(argv, 1, "OCLGRIND_DATA_RACES=1", "OCLGRIND_UNINITIALIZED=1", &out, &err, &sig);
  int nrep = 0, nk = 0, cur = -1;
  char note[160] = "";
  struct {
    char kind[96];
    int n, line;
  } k[OCL_KINDS];
  for (char *line = strtok(err, "\n"); line; line = strtok(NULL, "\n")) {
    if (line[0] == '\t' || line[0] == ' ') { /* a report's detail */
      const char *at = strstr(line, "At line ");
      if (cur >= 0 && at && !k[cur].line) k[cur].line = atoi(at + 8);
      continue;
    }
    cur = -1;
    if (!strncmp(line, "==", 2)) continue; /* a sanitizer's, not Oclgrind's */
    if (!strncmp(line, "Oclgrind: ", 10)) { /* a note: "1000 errors generated - suppressing ..." */
      snprintf(note, sizeof note, "%s", line);
      continue;
    }
    nrep++;
    char kind[96];
    snprintf(kind, sizeof kind, "%s", line);
    char *addr = strstr(kind, " address 0x");
    if (addr) *addr = 0;
    for (int i = 0; i < nk; i++)
      if (!strcmp(k[i].kind, kind)) cur = i;
    if (cur < 0 && nk < OCL_KINDS) {
      cur = nk++;
      snprintf(k[cur].kind, sizeof k[cur].kind, "%s", kind);
      k[cur].n = k[cur].line = 0;
    }
    if (cur >= 0) k[cur].n++;
  }
  char status[64] = "";
  if (!strncmp(out, "status ", 7)) sscanf(out + 7, "%*s %63s", status);
  printf("    Oclgrind %-18s ", kname);
  if (st < 0)
    printf("%s; ", sig == SIGALRM ? "timed out" : strsignal(sig));
  else if (st != 0)
    printf("child exit status %d; ", st);
  if (nrep)
    printf("%d report(s) on stderr%s\n", nrep, nk == OCL_KINDS ? " (the first kinds:)" : ":");
  else
    printf("no report on stderr\n");
  if (status[0] && strcmp(status, "DV_OK")) printf("        | devarray's status on Oclgrind: %s\n", status);
  for (int i = 0; i < nk; i++) {
    printf("        | %d x %s", k[i].n, k[i].kind);
    if (k[i].line) printf(", first at line %d", k[i].line);
    printf("\n");
  }
  if (note[0]) printf("        | (%s)\n", note);
  free(out), free(err);
}

/* ---- the parent: printing ---- */

static void print_machine(void) {
  struct utsname u;
  char cpu[256] = "unknown CPU";
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (f) {
    char line[512];
    while (fgets(line, sizeof line, f))
      if (!strncmp(line, "model name", 10) && strchr(line, ':')) {
        snprintf(cpu, sizeof cpu, "%s", strchr(line, ':') + 2);
        cpu[strcspn(cpu, "\n")] = 0;
        break;
      }
    fclose(f);
  }
  printf("machine: %s, %ld CPUs online, %s %s\n", cpu, sysconf(_SC_NPROCESSORS_ONLN),
         uname(&u) == 0 ? u.sysname : "", uname(&u) == 0 ? u.release : "");
}

static void print_row(const char *what, side **sides, int ns, const double *ocl, const double *ocl_err,
                      int nocl) {
  double fast = sides[0]->ctx ? sides[0]->med : NAN, off = sides[1]->ctx ? sides[1]->med : NAN;
  for (int v = 0; v < ns; v++) {
    if (!sides[v]->ctx) continue;
    printf("%-18s %-16s %10.3f ms  max err %-7.2g  x%-8.2f fast  x%-8.2f checked-off\n", what,
           sides[v]->label, sides[v]->med * 1e3, sides[v]->err, sides[v]->med / fast,
           sides[v]->med / off);
  }
  double on = sides[3]->ctx ? sides[3]->med : NAN;
  for (int o = 0; o < nocl; o++) {
    if (isnan(ocl[o])) {
      printf("%-18s %-16s (no result: see above)\n", what, ocl_modes[o].label);
      continue;
    }
    printf("%-18s %-16s %10.3f ms  max err %-7.2g  x%-8.0f fast  x%-8.0f checked-off  x%.0f "
           "kernel_check=on\n",
           what, ocl_modes[o].label, ocl[o] * 1e3, ocl_err[o], ocl[o] / fast, ocl[o] / off, ocl[o] / on);
  }
}

static int usage(const char *a0) {
  fprintf(stderr,
          "usage: %s [--reps R] [--reduce N] [--oclgrind-reps R] [--timeout S] [--no-oclgrind]\n"
          "          [--only timing|seeded] [--seeded FILE]\n", a0);
  return 2;
}

int main(int argc, char **argv) {
  k_src = bench_kernel_source("bench.dvk");
  long long nreduce = 1 << 18;
  int use_ocl = 1;
  const char *only = NULL;
  static const int tn[2] = {128, 256};
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--reduce") && i + 1 < argc) nreduce = atoll(argv[++i]);
    else if (!strcmp(argv[i], "--oclgrind-reps") && i + 1 < argc) ocl_reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--timeout") && i + 1 < argc) timeout_s = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--no-oclgrind")) use_ocl = 0;
    else if (!strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
    else if (!strcmp(argv[i], "--seeded") && i + 1 < argc) seeded_path = argv[++i];
    else if (!strcmp(argv[i], "--child") && i + 1 < argc) {
      /* internal: run on Oclgrind (the parent set the environment) */
      if (!strcmp(argv[i + 1], "time")) return child_time(2, tn, (size_t)nreduce);
      if ((!strcmp(argv[i + 1], "seeded") || !strcmp(argv[i + 1], "host-seeded")) && i + 2 < argc) {
        if (!(seeded_src = read_file(seeded_path))) return 3;
        int rc = child_seeded(argv[i + 2], !strcmp(argv[i + 1], "host-seeded"));
        free(seeded_src);
        return rc;
      }
      return usage(argv[0]);
    } else return usage(argv[0]);
  }
  if (reps < 1 || reps > 64 || ocl_reps < 1 || ocl_reps > 64 || nreduce < RB || nreduce > (1ll << 28) ||
      timeout_s < 1 || (only && strcmp(only, "timing") && strcmp(only, "seeded")))
    return usage(argv[0]);
  printf("bench_checks: the host simulator's kernel checks, and Oclgrind; medians of %d (Oclgrind: "
         "of %d, no warm-up)\n", reps, ocl_reps);
  print_machine();
  if (use_ocl) use_ocl = oclgrind_setup();

  if (!only || !strcmp(only, "timing")) {
    side sd[4];
    side *sides[4] = {&sd[0], &sd[1], &sd[2], &sd[3]};
    side_open(&sd[0], "fast", "backend=host", "host_mode=fast", (const char *)NULL);
    side_open(&sd[1], "checked off", "backend=host", "host_mode=checked", "kernel_check=off", (const char *)NULL);
    side_open(&sd[2], "checked bounds", "backend=host", "host_mode=checked", "kernel_check=bounds", (const char *)NULL);
    side_open(&sd[3], "checked on", "backend=host", "host_mode=checked", "kernel_check=on", (const char *)NULL);
    if (!sd[0].ctx || !sd[1].ctx) return 1;
    side *live[4];
    int nl = 0;
    for (int v = 0; v < 4; v++)
      if (sd[v].ctx) live[nl++] = &sd[v];
    /* Oclgrind first (the host sides' figures are then printed beside them) */
    double ocl[3][3], ocl_err[3][3];
    int nocl = use_ocl ? 3 : 0;
    for (int o = 0; o < nocl; o++) {
      char rs[32], rr[32], to[32];
      snprintf(rs, sizeof rs, "%lld", nreduce);
      snprintf(rr, sizeof rr, "%d", ocl_reps);
      snprintf(to, sizeof to, "%d", timeout_s);
      char *cargv[] = {"bench_checks", "--reduce", rs, "--oclgrind-reps", rr, "--timeout", to, "--child", "time", NULL};
      char *out, *err;
      int sig;
      double t0 = bench_now();
      int st = run_child(cargv, 1, ocl_modes[o].env1, ocl_modes[o].env2, &out, &err, &sig);
      for (int r = 0; r < 3; r++) ocl[r][o] = ocl_err[r][o] = NAN;
      static const char *const names[3] = {"tiled128", "tiled256", "reduce"};
      for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
        char name[32];
        double t, e;
        if (sscanf(line, "row %31s %lf %lf", name, &t, &e) != 3) continue;
        for (int r = 0; r < 3; r++)
          if (!strcmp(name, names[r])) ocl[r][o] = t, ocl_err[r][o] = e;
      }
      size_t errlines = 0;
      for (const char *c = err; *c; c++) errlines += *c == '\n';
      printf("%-16s child: %s%s, %.1f s in all; stderr %zu line(s)%s\n", ocl_modes[o].label,
             st == 0 ? "ok" : st < 0 ? (sig == SIGALRM ? "timed out" : "killed") : "failed",
             st > 0 ? " (exit status)" : "", bench_now() - t0, errlines, errlines ? ":" : "");
      if (errlines) printf("%.*s", (int)(strlen(err) > 2000 ? 2000 : strlen(err)), err);
      if (st) printf("%s", out);
      free(out), free(err);
    }
    printf("row                side             median         max err        time / fast     time / "
           "checked-off\n");
    for (int r = 0; r < 2; r++) {
      row_tiled(live, nl, tn[r], reps, 1);
      char what[32];
      snprintf(what, sizeof what, "tiled n=%d", tn[r]);
      print_row(what, sides, 4, ocl[r], ocl_err[r], nocl);
    }
    row_reduce(live, nl, (size_t)nreduce, reps, 1);
    char what[32];
    snprintf(what, sizeof what, "reduce %lld", nreduce);
    print_row(what, sides, 4, ocl[2], ocl_err[2], nocl);
    for (int v = 3; v >= 0; v--) side_close(&sd[v]);
  }

  if (!only || !strcmp(only, "seeded")) {
    if (!(seeded_src = read_file(seeded_path))) {
      printf("seeded bugs: cannot read %s\n", seeded_path);
      oclgrind_cleanup();
      return 1;
    }
    printf("seeded bugs (%s): devarray host_mode=checked kernel_check=on; Oclgrind with "
           "OCLGRIND_DATA_RACES=1 OCLGRIND_UNINITIALIZED=1%s\n", seeded_path, use_ocl ? "" : " (skipped)");
    for (size_t i = 0; i < NCASES; i++) {
      printf("%zu. %s (grid %u x block %u)\n", i + 1, cases[i].what, cases[i].grid, cases[i].block);
      for (int fix = 0; fix < 2; fix++) {
        char kname[64];
        snprintf(kname, sizeof kname, "%s_%s", fix ? "fix" : "bug", cases[i].name);
        seeded_devarray(kname);
        if (use_ocl) seeded_oclgrind(kname);
      }
    }
    free(seeded_src);
  }
  oclgrind_cleanup();
  return 0;
}
