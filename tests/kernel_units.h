/*
 * Every kernel source of the repository as the library assembles it, for
 * the tests that compile them offline for a GPU without one (test_nvrtc.c:
 * CUDA through NVRTC; test_hip_compile.c: AMD targets through hipcc).  The
 * list of sources is generated when CMake configures (tests/CMakeLists.txt:
 * tests/kernels, examples, src/kernel, bench/kernels); this header holds
 * what some of them need from their host program (defines, constant arrays)
 * and the walk over every source and variant, so that both compilers see
 * the same translation units.  Include after common.h and
 * kernel/kernel_internal.h.
 */
#ifndef DV_TEST_KERNEL_UNITS_H
#define DV_TEST_KERNEL_UNITS_H
#include "nvrtc_sources.h" /* generated: const char *const dv_test_kernel_sources[] */

__attribute__((unused)) static const char *base_name(const char *path) {
  const char *b = strrchr(path, '/');
  return b ? b + 1 : path;
}

/* What a source needs from its host program: defines and constant arrays. */
typedef struct ksetup {
  const char *file;
  const char *defines[4];            /* "NAME=VALUE" */
  struct { const char *name; dv_type_id type; int64_t n; } consts[3];
  const char *must_fail_at;          /* a compile error expected on this line: "file", line */
  int fail_line;
  int required;                      /* the source does not compile without this */
} ksetup;

static const ksetup g_setups[] = {
    {"constant.dvk", {"NIDX=5"}, {{"coef", DV_FLOAT32, 8}, {"idx", DV_INT32, 5}}, NULL, 0, 1},
    {"constant_memory.dvk", {"NCOEF=4"}, {{"coef", DV_FLOAT32, 4}}, NULL, 0, 1},
    {"dialect.dvk", {NULL}, {{"ctab", DV_FLOAT32, 4}}, NULL, 0, 1},
    {"error.dvk", {NULL}, {{NULL}}, "error.dvk", 4, 1},
    {"modes.dvk", {"BLOCK=64", "NCOEF=5"}, {{"coef", DV_FLOAT32, 5}, {"lut", DV_INT32, 16}}, NULL, 0, 1},
    /* Variants the tests build (the plain source is compiled too). */
    {"reverse.dvk", {"NO_SYNC"}, {{NULL}}, NULL, 0, 0},
    {"reverse.dvk", {"USE_SYNCTHREADS", "SCOPE=DV_FENCE_LOCAL"}, {{NULL}}, NULL, 0, 0},
    {"matmul.dvk", {"TPB=32"}, {{NULL}}, NULL, 0, 0},
};

/* The program as the kernel layer holds it, with the setup's defines and
 * constant arrays (on a host context: only its source assembly is used). */
__attribute__((unused)) static dv_program *setup_program(dv_context *ctx, const char *name,
                                                         const char *source, const ksetup *su) {
  dv_program *p = NULL;
  assert_ok(dv_program_create(ctx, name, source, &p));
  for (int i = 0; su && i < 4 && su->defines[i]; i++) {
    char def[128];
    snprintf(def, sizeof def, "%s", su->defines[i]);
    char *eq = strchr(def, '=');
    if (eq) *eq = 0;
    assert_ok(dv_program_define(p, def, eq ? eq + 1 : NULL));
  }
  for (int i = 0; su && i < 3 && su->consts[i].name; i++) {
    int64_t n = su->consts[i].n;
    static double zeros[64]; /* the values do not matter for compiling */
    assert_true((size_t)n * dv_dtype_itemsize(dv_dtype_get(su->consts[i].type)) <= sizeof zeros);
    dv_array *h = NULL;
    assert_ok(dv_host_array_wrap(ctx, zeros, 1, &n, dv_dtype_get(su->consts[i].type), NULL, &h));
    assert_ok(dv_program_constant(p, su->consts[i].name, h));
    dv_array_release(h);
  }
  return p;
}

/* The unit a build would compile (without the argument names only the host uses). */
__attribute__((unused)) static char *assemble(dv_context *ctx, const char *name, const char *source,
                                              const ksetup *su) {
  dv_program *p = setup_program(ctx, name, source, su);
  char *unit = dv__program_unit(p, NULL);
  assert_non_null(unit);
  dv_program_destroy(p);
  return unit;
}

/* The setup named `file` (the last of its variants), or NULL. */
__attribute__((unused)) static const ksetup *find_setup(const char *file) {
  const ksetup *su = NULL;
  for (size_t i = 0; i < sizeof g_setups / sizeof *g_setups; i++)
    if (strcmp(g_setups[i].file, file) == 0) su = &g_setups[i];
  return su;
}

/* Calls compile(ctx, path, setup) for every kernel source: once per variant
 * in g_setups, and once as it stands (setup NULL) unless it needs constant
 * arrays, fails on purpose or does not compile without its setup.  Returns
 * how many sources the generated list holds. */
__attribute__((unused)) static size_t for_each_kernel_unit(
    dv_context *ctx, void (*compile)(dv_context *, const char *, const ksetup *)) {
  size_t n = 0;
  for (const char *const *p = dv_test_kernel_sources; *p; p++, n++) {
    const char *name = base_name(*p);
    int variants = 0;
    bool needs_setup = false;
    for (size_t i = 0; i < sizeof g_setups / sizeof *g_setups; i++)
      if (strcmp(g_setups[i].file, name) == 0) {
        compile(ctx, *p, &g_setups[i]);
        variants++;
        if (g_setups[i].consts[0].name || g_setups[i].must_fail_at || g_setups[i].required)
          needs_setup = true;
      }
    if (!variants || !needs_setup) compile(ctx, *p, NULL);
  }
  return n;
}

/* The HIP dialect's names (test_hip_compile.c through hipcc, test_hip_rtc.c
 * through hipRTC): HIP, not CUDA; a helper without DV_DEVICE; dynamic
 * shared memory; the wave barrier; the constant buffer `tab`, which the
 * program adds. */
__attribute__((unused)) static const char *const hip_dialect_src =
    "#if !defined(DV_BACKEND_HIP) || defined(DV_BACKEND_CUDA) || defined(DV_BACKEND_OPENCL)\n"
    "#error not compiled as HIP\n"
    "#endif\n"
    "static float twice(float x) { return 2.0f * x; }\n"
    "int plus_lane(int v) { return v + dv_lane_id(); }\n"
    "DV_KERNEL(hip_names_k, DV_ARRAY(float, x), int n) {\n"
    "  DV_BIND(float, x);\n"
    "  DV_DYN_SHARED_BEGIN();\n"
    "  DV_DYN_SHARED_TAKE(float, s, 64);\n"
    "  int i = (int)dv_global_id(0);\n"
    "  s[dv_thread_idx(0)] = twice(x[i]) + tab[i % 4];\n"
    "  dv_wavebarrier();\n"
    "  if (i < n) x[i] = s[dv_thread_idx(0) ^ 1] + (float)plus_lane(i);\n"
    "}\n";

#endif
