/*
 * The kernel dialect compiled for AMD GPUs without one (issue 26): every
 * kernel source of the repository (tests/kernel_units.h: the list CMake
 * generates and the setups the NVRTC test uses), assembled exactly as the
 * library assembles it (dv__program_unit), compiled as HIP, device code
 * only, by hipcc for the targets Debian's ROCm 5.2 (clang 15) builds:
 * gfx90a (MI200, CDNA2), gfx940 (MI300 family, CDNA3) and gfx1030 (RDNA2).
 * gfx942 and gfx1100 need a newer ROCm (docs/history.md, "HIP backend").
 * Also: the wave size each target compiles with, helpers declared without
 * DV_DEVICE, the constant buffer in the code object, a compile error's line.
 * Skipped (77), naming hipcc, where hipcc cannot be run.
 *
 * Usage: test_hip_compile [hipcc]   (default: hipcc on PATH)
 */
#define _GNU_SOURCE /* memmem */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"
#include "kernel/kernel_internal.h"
#include "kernel_units.h" /* the kernel sources, their setups, the units */

extern char **environ;

static const char *g_hipcc = "hipcc";
static char g_dir[] = "/tmp/dv_hip_compile_XXXXXX";
static const char *const g_targets[] = {"gfx90a", "gfx940", "gfx1030"};
#define NTARGETS (sizeof g_targets / sizeof *g_targets)

/* Runs argv (NULL-terminated) with stdout and stderr in `log`; returns its
 * exit status, or -1 where it could not be started or did not exit. */
static int run_logged(char *const argv[], const char *log) {
  posix_spawn_file_actions_t fa;
  if (posix_spawn_file_actions_init(&fa)) return -1;
  posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  pid_t pid;
  int rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc) return -1;
  int st;
  while (waitpid(pid, &st, 0) < 0)
    if (errno != EINTR) return -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static char *read_file(const char *path, size_t *size) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *b = malloc((size_t)n + 1);
  if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
    free(b);
    b = NULL;
  }
  fclose(f);
  if (b) b[n] = 0;
  *size = b ? (size_t)n : 0;
  return b;
}

/* Compiles `unit` (named `name`) with hipcc for `targets`, device code only,
 * plus up to two extra options; the code object (a clang offload bundle)
 * and the log come back to the caller (free both).  Returns hipcc's status. */
static int hip_compile(const char *name, const char *unit, const char *const *targets, size_t nt,
                       const char *extra1, const char *extra2, char **obj, size_t *obj_size,
                       char **log) {
  char src[512], out[512], logp[512];
  snprintf(src, sizeof src, "%s/%s.hip", g_dir, name);
  snprintf(out, sizeof out, "%s/%s.o", g_dir, name);
  snprintf(logp, sizeof logp, "%s/%s.log", g_dir, name);
  FILE *f = fopen(src, "w");
  assert_non_null(f);
  assert_int_equal(fputs(unit, f) >= 0, 1);
  assert_int_equal(fclose(f), 0);
  unlink(out);
  char arch[8][48];
  char *argv[24];
  int k = 0;
  argv[k++] = (char *)g_hipcc;
  argv[k++] = "-x";
  argv[k++] = "hip";
  argv[k++] = "--cuda-device-only"; /* no host pass: the library loads code objects */
  for (size_t i = 0; i < nt && i < 8; i++) {
    snprintf(arch[i], sizeof arch[i], "--offload-arch=%s", targets[i]);
    argv[k++] = arch[i];
  }
  if (extra1) argv[k++] = (char *)extra1;
  if (extra2) argv[k++] = (char *)extra2;
  argv[k++] = "-c";
  argv[k++] = src;
  argv[k++] = "-o";
  argv[k++] = out;
  argv[k] = NULL;
  int rc = run_logged(argv, logp);
  size_t ls;
  *log = read_file(logp, &ls);
  *obj = read_file(out, obj_size);
  return rc;
}

/* The bundle holds a code object for each target. */
static void assert_bundle(const char *name, const char *obj, size_t size, const char *const *targets,
                          size_t nt) {
  if (!obj || size < 24 || memcmp(obj, "__CLANG_OFFLOAD_BUNDLE__", 24) != 0)
    fail_msg("%s: hipcc wrote no offload bundle", name);
  for (size_t i = 0; i < nt; i++) {
    char id[64];
    snprintf(id, sizeof id, "amdgcn-amd-amdhsa--%s", targets[i]);
    if (!memmem(obj, size, id, strlen(id))) fail_msg("%s: no code object for %s", name, targets[i]);
  }
}

static void compile_one(dv_context *ctx, const char *path, const ksetup *su) {
  char *src = read_text_file(path);
  const char *name = base_name(path);
  char *unit = assemble(ctx, name, src, su);
  free(src);
  char *obj = NULL, *log = NULL;
  size_t size = 0;
  char file[128];
  snprintf(file, sizeof file, "%s%s%s", name, su && su->defines[0] ? "." : "",
           su && su->defines[0] ? su->defines[0] : "");
  int rc = hip_compile(file, unit, g_targets, NTARGETS, NULL, NULL, &obj, &size, &log);
  if (su && su->must_fail_at) {
    char at[64]; /* clang's spelling: file:line: */
    snprintf(at, sizeof at, "%s:%d:", su->must_fail_at, su->fail_line);
    if (rc == 0) fail_msg("%s compiled, but should fail at %s", name, at);
    if (!log || !strstr(log, at)) fail_msg("%s: the log lacks %s:\n%s", name, at, log ? log : "");
    print_message("[   ok   ] %-22s fails as expected at %s\n", name, at);
  } else {
    if (rc != 0)
      fail_msg("%s (defines %s) does not compile for AMD (hipcc status %d):\n%s\n(a new source that "
               "needs defines or constant arrays: add it to g_setups in tests/kernel_units.h)",
               name, su && su->defines[0] ? su->defines[0] : "none", rc, log ? log : "(no log)");
    assert_bundle(name, obj, size, g_targets, NTARGETS);
    print_message("[   ok   ] %-22s %-30s gfx90a gfx940 gfx1030: %zu bytes\n", name,
                  su && su->defines[0] ? su->defines[0] : "", size);
  }
  free(obj);
  free(log);
  free(unit);
}

static void test_every_kernel_source(void **state) {
  (void)state;
  dv_context *ctx = NULL;
  assert_ok(test_context(&ctx, NULL));
  size_t n = for_each_kernel_unit(ctx, compile_one);
  assert_true(n >= 3); /* the glob found the repository's kernels */
  assert_ok(dv_context_destroy(ctx));
}

/* dv_wave_size() is the target's wave: 64 on CDNA (gfx90a, gfx940), 32 on
 * RDNA2 (gfx1030: wave32; ROCm 5.2's HIP refuses -mwavefrontsize64 there),
 * fixed when the code object is compiled; the check fails where the size is
 * wrong. */
static void test_wave_size_per_target(void **state) {
  (void)state;
  dv_context *ctx = NULL;
  assert_ok(test_context(&ctx, NULL));
  const char *src =
      "#ifdef __HIP_DEVICE_COMPILE__\n"
      "static_assert(dv_wave_size() == EXPECT, \"wave size\");\n"
      "#endif\n"
      "DV_KERNEL(w, DV_ARRAY(dv_u64, out)) {\n"
      "  DV_BIND(dv_u64, out);\n"
      "  out[dv_thread_idx(0)] = dv_wave_ballot(dv_lane_id() & 1);\n"
      "}\n";
  char *unit = assemble(ctx, "wave_size.dvk", src, NULL);
  /* why: NULL where it compiles, else what the log says. */
  const struct { const char *target, *expect, *extra, *why; } cases[] = {
      {"gfx90a", "-DEXPECT=64", NULL, NULL},
      {"gfx940", "-DEXPECT=64", NULL, NULL},
      {"gfx1030", "-DEXPECT=32", NULL, NULL},
      {"gfx90a", "-DEXPECT=32", NULL, "wave size"},
      {"gfx1030", "-DEXPECT=64", NULL, "wave size"},
      /* ROCm 5.2's HIP refuses RDNA in wave64 mode: wave32 is the only one. */
      {"gfx1030", "-DEXPECT=64", "-mwavefrontsize64", "wavefront size 64"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    char *obj = NULL, *log = NULL;
    size_t size = 0;
    int rc = hip_compile("wave_size", unit, &cases[i].target, 1, cases[i].expect, cases[i].extra,
                         &obj, &size, &log);
    if (!cases[i].why) {
      if (rc != 0) fail_msg("%s %s: %s", cases[i].target, cases[i].expect, log ? log : "");
      assert_bundle("wave_size", obj, size, &cases[i].target, 1);
    } else {
      if (rc == 0) fail_msg("%s %s %s compiled", cases[i].target, cases[i].expect,
                            cases[i].extra ? cases[i].extra : "");
      if (!log || !strstr(log, cases[i].why))
        fail_msg("%s %s: the log lacks \"%s\":\n%s", cases[i].target, cases[i].expect, cases[i].why,
                 log ? log : "");
    }
    free(obj);
    free(log);
  }
  free(unit);
  assert_ok(dv_context_destroy(ctx));
}

/* The dialect marks HIP as HIP (not CUDA); helpers declared without
 * DV_DEVICE are device functions (NVRTC's -default-device); the constant
 * buffer and the kernel keep their names in the code object (for
 * hipModuleGetGlobal and hipModuleGetFunction). */
static void test_dialect_names(void **state) {
  (void)state;
  dv_context *ctx = NULL;
  assert_ok(test_context(&ctx, NULL));
  dv_program *p = NULL;
  const char *src = hip_dialect_src;
  assert_ok(dv_program_create(ctx, "names.dvk", src, &p));
  float tab[4] = {1, 2, 3, 4};
  int64_t four = 4;
  dv_array *h = NULL;
  assert_ok(dv_host_array_wrap(ctx, tab, 1, &four, dv_dtype_get(DV_FLOAT32), NULL, &h));
  assert_ok(dv_program_constant(p, "tab", h));
  dv_array_release(h);
  char *unit = dv__program_unit(p, NULL);
  assert_non_null(unit);
  dv_program_destroy(p);
  char *obj = NULL, *log = NULL;
  size_t size = 0;
  int rc = hip_compile("names", unit, g_targets, NTARGETS, NULL, NULL, &obj, &size, &log);
  if (rc != 0) fail_msg("names.dvk: %s", log ? log : "");
  assert_bundle("names", obj, size, g_targets, NTARGETS);
  assert_non_null(memmem(obj, size, "hip_names_k", 11));
  assert_non_null(memmem(obj, size, "dv__cbuf", 8));
  free(obj);
  free(log);
  free(unit);
  assert_ok(dv_context_destroy(ctx));
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st, (void)flag, (void)ftw;
  return remove(path);
}
static void remove_dir(void) { nftw(g_dir, remove_entry, 8, FTW_DEPTH | FTW_PHYS); }

int main(int argc, char **argv) {
  if (argc > 1 && argv[1][0]) g_hipcc = argv[1];
  if (!mkdtemp(g_dir)) {
    perror("mkdtemp");
    return 1;
  }
  /* hipcc's clang leaves a temporary folder per offload target in TMPDIR
   * (/tmp/<unit>-XXXXXX): here they go into g_dir, removed at the end. */
  setenv("TMPDIR", g_dir, 1);
  char *probe[] = {(char *)g_hipcc, "--version", NULL};
  char log[600];
  snprintf(log, sizeof log, "%s/version.log", g_dir);
  if (run_logged(probe, log) != 0) {
    printf("hip.gfx_compile: skipped: hipcc (%s) cannot be run here (scripts/setup installs "
           "Debian's hipcc)\n", g_hipcc);
    remove_dir();
    return 77;
  }
  g_backend = "host";
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_kernel_source),
      cmocka_unit_test(test_wave_size_per_target),
      cmocka_unit_test(test_dialect_names),
  };
  int rc = cmocka_run_group_tests_name("hip_compile", tests, NULL, NULL);
  remove_dir();
  return rc;
}
