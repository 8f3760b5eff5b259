/*
 * CUDA kernels compiled without a GPU: every kernel source of the repository
 * (tests/kernels, examples, src/kernel, bench/kernels: tests/kernel_units.h, listed when CMake
 * configures) goes through devarray's own NVRTC path, white-box: the same
 * translation unit a build assembles (dv__program_unit), the same options,
 * the target the backend picks for an sm_90 device.  Also: compile errors
 * with their line, a missing NVRTC, the choice between CUBIN and PTX, the
 * constant buffer, the image devarray caches, and the NVRTC chosen for a
 * driver version.  Skipped (77), naming NVRTC, where libnvrtc cannot be
 * loaded.
 */
#define _GNU_SOURCE /* memmem */
#include <ctype.h>
#include <dlfcn.h>
#include <glob.h>

#include "common.h"
#include "backends/cudafam/fam.h"
#include "backends/cuda/nvrtc.h"
#include "kernel/kernel_internal.h"
#include "kernel_units.h" /* the kernel sources, their setups, the units */

static const dv_nvrtc *g_nv;

static bool is_elf(const dv_nvrtc_out *o) {
  return o->size > 4 && memcmp(o->image, "\x7f" "ELF", 4) == 0;
}

/* Compile for the sm_90 target the backend would choose: a CUBIN. */
static void compile_one(dv_context *ctx, const char *path, const ksetup *su) {
  char *src = read_text_file(path);
  const char *name = base_name(path);
  char *unit = assemble(ctx, name, src, su);
  free(src);
  char arch[32];
  int is_ptx = -1;
  assert_ok(dv__nvrtc_target(g_nv, 90, arch, sizeof arch, &is_ptx));
  dv_nvrtc_out o;
  dv_status rc = dv__nvrtc_compile(g_nv, name, unit, arch, 0, "", &o);
  if (su && su->must_fail_at) {
    char at[64]; /* NVRTC's spelling: file(line) */
    snprintf(at, sizeof at, "%s(%d)", su->must_fail_at, su->fail_line);
    if (rc != DV_ERR_COMPILE) fail_msg("%s compiled, but should fail at %s", name, at);
    assert_non_null(o.log);
    if (!strstr(o.log, at)) fail_msg("%s: the log lacks %s:\n%s", name, at, o.log);
    assert_null(o.image);
    print_message("[   ok   ] %-22s fails as expected at %s\n", name, at);
  } else {
    if (rc != DV_OK)
      fail_msg("%s (defines %s) does not compile for %s: %s\n%s\n(a new source that needs defines or "
               "constant arrays: add it to g_setups in tests/kernel_units.h)",
               name, su && su->defines[0] ? su->defines[0] : "none", arch, dv_last_error(),
               o.log ? o.log : "(no log)");
    assert_int_equal(o.is_ptx, 0);
    assert_true(is_elf(&o));
    print_message("[   ok   ] %-22s %-30s %s CUBIN %zu bytes\n", name,
                  su && su->defines[0] ? su->defines[0] : "", arch, o.size);
  }
  dv__nvrtc_out_free(&o);
  free(unit);
}

static void test_every_kernel_source(void **state) {
  (void)state;
  dv_context *ctx = NULL;
  assert_ok(test_context(&ctx, NULL));
  size_t n = for_each_kernel_unit(ctx, compile_one);
  /* The list comes from a glob: it must have found the repository's kernels. */
  assert_true(n >= 3);
  assert_ok(dv_context_destroy(ctx));
}

/* Debug builds (-G), PTX for a virtual architecture, and the
 * constant buffer the prelude declares, visible by name in the PTX. */
static void test_debug_ptx_and_constants(void **state) {
  (void)state;
  dv_context *ctx = NULL;
  assert_ok(test_context(&ctx, NULL));
  char path[1024];
  snprintf(path, sizeof path, "%s/tests/kernels/dialect.dvk", DV_TEST_SOURCE_DIR);
  char *src = read_text_file(path);
  const ksetup *su = find_setup("dialect.dvk");
  char *unit = assemble(ctx, "dialect.dvk", src, su);
  free(src);
  dv_nvrtc_out o;
  assert_ok(dv__nvrtc_compile(g_nv, "dialect.dvk", unit, "sm_90", DV_BUILD_DEBUG, "", &o));
  assert_true(is_elf(&o));
  /* -G alone: with -lineinfo as well ptxas warns on every debug build. */
  if (o.log && strstr(o.log, "line-info"))
    fail_msg("a debug build draws a warning about line information:\n%s", o.log);
  /* The CUBIN's symbol table names the constant buffer (a module-local
   * symbol, as nvcc's own __constant__ variables that cudaMemcpyToSymbol
   * finds through the driver). */
  assert_non_null(memmem(o.image, o.size, "dv__cbuf", 9));
  dv__nvrtc_out_free(&o);
  assert_ok(dv__nvrtc_compile(g_nv, "dialect.dvk", unit, "compute_90", 0, "-DEXTRA=1  -lineinfo ", &o));
  assert_int_equal(o.is_ptx, 1);
  const char *ptx = o.image;
  assert_true(strlen(ptx) + 1 == o.size);
  assert_non_null(strstr(ptx, ".version"));
  assert_non_null(strstr(ptx, ".target sm_90"));
  /* The kernels keep their C names (extern "C") ... */
  assert_non_null(strstr(ptx, ".entry dialect_all("));
  assert_non_null(strstr(ptx, ".entry dialect_views("));
  /* ... and the constant buffer its own, for cuModuleGetGlobal. */
  const char *cb = strstr(ptx, ".const .align 16 .b8 dv__cbuf[16]");
  if (!cb) fail_msg("no 16-byte-aligned constant buffer dv__cbuf[16] in the PTX");
  /* Kernels read it with constant loads. */
  assert_non_null(strstr(ptx, "ld.const"));
  dv__nvrtc_out_free(&o);
  free(unit);
  assert_ok(dv_context_destroy(ctx));
}

/* A compile error: DV_ERR_COMPILE, the log names the program and its line
 * (counted in the user's source, after the prelude), no image. */
static void test_compile_error_line(void **state) {
  (void)state;
  dv_context *ctx = NULL;
  assert_ok(test_context(&ctx, NULL));
  const char *src = "/* 1 */\n/* 2 */\nDV_KERNEL(k, int n) {\n  n += nope;\n}\n";
  char *unit = assemble(ctx, "broken.dvk", src, NULL);
  dv_nvrtc_out o;
  assert_status(dv__nvrtc_compile(g_nv, "broken.dvk", unit, "sm_90", 0, "", &o), DV_ERR_COMPILE);
  assert_non_null(o.log);
  if (!strstr(o.log, "broken.dvk(4)")) fail_msg("log without broken.dvk(4):\n%s", o.log);
  assert_non_null(strstr(o.log, "nope"));
  assert_null(o.image);
  assert_int_equal(o.size, 0);
  dv__nvrtc_out_free(&o);
  /* An option NVRTC rejects is a compile error whose log names it. */
  const char *ok = "DV_KERNEL(k, int n) { (void)n; }\n";
  char *unit2 = assemble(ctx, "opt.dvk", ok, NULL);
  assert_status(dv__nvrtc_compile(g_nv, "opt.dvk", unit2, "sm_90", 0, "--no-such-option", &o),
                DV_ERR_COMPILE);
  assert_non_null(o.log);
  assert_non_null(strstr(o.log, "--no-such-option"));
  dv__nvrtc_out_free(&o);
  /* The user's options reach NVRTC (a define the source requires). */
  const char *needs = "#ifndef NEED\n#error NEED is not defined\n#endif\nDV_KERNEL(k, int n) { (void)n; }\n";
  char *unit3 = assemble(ctx, "need.dvk", needs, NULL);
  assert_status(dv__nvrtc_compile(g_nv, "need.dvk", unit3, "sm_90", 0, "", &o), DV_ERR_COMPILE);
  assert_non_null(strstr(o.log, "NEED is not defined"));
  dv__nvrtc_out_free(&o);
  assert_ok(dv__nvrtc_compile(g_nv, "need.dvk", unit3, "sm_90", 0, " -DNEED=1\t-lineinfo", &o));
  assert_true(is_elf(&o));
  dv__nvrtc_out_free(&o);
  free(unit);
  free(unit2);
  free(unit3);
  assert_ok(dv_context_destroy(ctx));
}

/* CUBIN for an architecture NVRTC has, PTX of NVRTC's newest for a newer
 * device, an error for a device older than all of them. */
static void test_target_choice(void **state) {
  (void)state;
  char arch[32];
  int ptx = -1;
  assert_ok(dv__nvrtc_target(g_nv, 90, arch, sizeof arch, &ptx));
  assert_string_equal(arch, "sm_90");
  assert_int_equal(ptx, 0);
  if (g_nv->narchs == 0) {
    print_message("[ info ] NVRTC %d.%d cannot list its architectures\n", g_nv->major, g_nv->minor);
    return;
  }
  int lo = g_nv->archs[0], hi = g_nv->archs[g_nv->narchs - 1];
  char want[32];
  assert_ok(dv__nvrtc_target(g_nv, hi + 10, arch, sizeof arch, &ptx));
  snprintf(want, sizeof want, "compute_%d", hi);
  assert_string_equal(arch, want);
  assert_int_equal(ptx, 1);
  assert_ok(dv__nvrtc_target(g_nv, lo, arch, sizeof arch, &ptx));
  snprintf(want, sizeof want, "sm_%d", lo);
  assert_string_equal(arch, want);
  assert_int_equal(ptx, 0);
  if (lo > 10) {
    assert_status(dv__nvrtc_target(g_nv, lo - 1, arch, sizeof arch, &ptx), DV_ERR_NO_COMPILER);
    assert_non_null(strstr(dv_last_error(), "NVRTC"));
  }
  /* Between two listed architectures: PTX of the one below. */
  for (int i = 0; i + 1 < g_nv->narchs; i++)
    if (g_nv->archs[i + 1] - g_nv->archs[i] > 1) {
      assert_ok(dv__nvrtc_target(g_nv, g_nv->archs[i] + 1, arch, sizeof arch, &ptx));
      snprintf(want, sizeof want, "compute_%d", g_nv->archs[i]);
      assert_string_equal(arch, want);
      assert_int_equal(ptx, 1);
      break;
    }
  /* What the CUBIN compile gives, PTX gives too (for the newer device). */
  dv_context *ctx = NULL;
  assert_ok(test_context(&ctx, NULL));
  char *unit = assemble(ctx, "p.dvk", "DV_KERNEL(k, DV_ARRAY(float, x)) { DV_BIND(float, x); x[0] = 1; }", NULL);
  assert_ok(dv__nvrtc_target(g_nv, hi + 10, arch, sizeof arch, &ptx));
  dv_nvrtc_out o;
  assert_ok(dv__nvrtc_compile(g_nv, "p.dvk", unit, arch, 0, "", &o));
  assert_int_equal(o.is_ptx, 1);
  assert_non_null(strstr(o.image, ".entry k("));
  dv__nvrtc_out_free(&o);
  free(unit);
  assert_ok(dv_context_destroy(ctx));
}

/* A library that is not there: DV_ERR_NO_COMPILER naming what was tried. */
static void test_missing_library(void **state) {
  (void)state;
  const dv_nvrtc *nv = (const dv_nvrtc *)state;
  assert_status(dv__nvrtc_load("/nonexistent/libnvrtc.so", 0, &nv), DV_ERR_NO_COMPILER);
  assert_null(nv);
  const char *msg = dv_last_error();
  assert_non_null(strstr(msg, "NVRTC not found"));
  assert_non_null(strstr(msg, "/nonexistent/libnvrtc.so"));
  assert_non_null(strstr(msg, "No such file")); /* dlerror's reason */
  /* A library that is not NVRTC: the missing entry point is named. */
  assert_status(dv__nvrtc_load("libm.so.6", 0, &nv), DV_ERR_NO_COMPILER);
  assert_non_null(strstr(dv_last_error(), "nvrtc"));
  /* The default search loads once: the same record twice. */
  const dv_nvrtc *a = NULL, *b = NULL;
  assert_ok(dv__nvrtc_load("", 0, &a));
  assert_ok(dv__nvrtc_load(NULL, 0, &b));
  assert_ptr_equal(a, b);
}

/* The options of a debug build, as the log of a rejected option lists them:
 * -G, and no -lineinfo (NVRTC 13's ptxas warns about the pair on every
 * build).  The user's options still come after devarray's own. */
static void test_debug_options(void **state) {
  (void)state;
  dv_context *ctx = NULL;
  assert_ok(test_context(&ctx, NULL));
  char *unit = assemble(ctx, "dbg.dvk", "DV_KERNEL(k, int n) { (void)n; }\n", NULL);
  dv_nvrtc_out o;
  assert_status(dv__nvrtc_compile(g_nv, "dbg.dvk", unit, "sm_90", DV_BUILD_DEBUG, "--no-such-option", &o),
                DV_ERR_COMPILE);
  assert_non_null(o.log);
  const char *list = strstr(o.log, "rejected an option:");
  if (!list) fail_msg("the log does not list the options:\n%s", o.log);
  const char *eol = strchr(list, '\n');
  char opts[1024];
  snprintf(opts, sizeof opts, "%.*s ", eol ? (int)(eol - list) : (int)strlen(list), list);
  if (!strstr(opts, " -G ") || strstr(opts, "lineinfo") || !strstr(opts, " -G --no-such-option "))
    fail_msg("debug options: %s (want -G without -lineinfo, before the user's)", opts);
  dv__nvrtc_out_free(&o);
  /* Without DV_BUILD_DEBUG: no -G. */
  assert_status(dv__nvrtc_compile(g_nv, "dbg.dvk", unit, "sm_90", 0, "--no-such-option", &o),
                DV_ERR_COMPILE);
  assert_non_null(o.log);
  if (strstr(o.log, " -G ")) fail_msg("-G without DV_BUILD_DEBUG:\n%s", o.log);
  dv__nvrtc_out_free(&o);
  free(unit);
  assert_ok(dv_context_destroy(ctx));
}

/* An NVRTC file of the toolkit by its path (for naming it explicitly), the
 * one that loads: its path in buf, or false. */
static bool toolkit_nvrtc(char *buf, size_t cap, const dv_nvrtc **nv) {
  glob_t g;
  bool found = false;
  if (glob("/usr/local/cuda*/lib64/libnvrtc.so.*", 0, NULL, &g) != 0) return false;
  for (size_t i = 0; i < g.gl_pathc && !found; i++) {
    const char *v = strstr(g.gl_pathv[i], "libnvrtc.so.") + strlen("libnvrtc.so.");
    if (!isdigit((unsigned char)*v)) continue;
    if (dv__nvrtc_load(g.gl_pathv[i], 0, nv) == DV_OK) {
      snprintf(buf, cap, "%s", g.gl_pathv[i]);
      found = true;
    }
  }
  globfree(&g);
  return found;
}

/* NVRTC chosen for the driver: one newer than the driver's major version is
 * refused, named or found, with both versions and the option in the
 * message, also after it was loaded for a driver that could use it (the
 * cache does not decide); the driver's own major is taken first. */
static void test_nvrtc_for_driver(void **state) {
  (void)state;
  char path[1024];
  const dv_nvrtc *nv = NULL;
  if (!toolkit_nvrtc(path, sizeof path, &nv)) {
    print_message("[ SKIPPED ] test_nvrtc_for_driver: no /usr/local/cuda*/lib64/libnvrtc.so.<major>\n");
    skip();
  }
  int n = nv->major;
  const dv_nvrtc *same = NULL;
  /* A driver of the same major (any minor) or newer takes it. */
  assert_ok(dv__nvrtc_load(path, n * 1000, &same));
  assert_ptr_equal(same, nv);
  assert_ok(dv__nvrtc_load(path, n * 1000 + 990, &same));
  assert_ptr_equal(same, nv);
  assert_ok(dv__nvrtc_load(path, (n + 1) * 1000, &same));
  assert_ptr_equal(same, nv);
  /* An older driver: refused, though it is loaded (cached) already. */
  const dv_nvrtc *got = nv;
  assert_status(dv__nvrtc_load(path, (n - 1) * 1000 + 40, &got), DV_ERR_NO_COMPILER);
  assert_null(got);
  char want[64];
  const char *msg = dv_last_error();
  print_message("[  info  ] %s\n", msg);
  snprintf(want, sizeof want, "NVRTC %d.%d (%s)", nv->major, nv->minor, path);
  if (!strstr(msg, want)) fail_msg("no \"%s\" in: %s", want, msg);
  snprintf(want, sizeof want, "newer than the CUDA driver (%d.4)", n - 1);
  if (!strstr(msg, want)) fail_msg("no \"%s\" in: %s", want, msg);
  assert_non_null(strstr(msg, "nvrtc_library"));
  assert_non_null(strstr(msg, "DV_NVRTC_LIBRARY"));
  /* Twice: nothing about the first refusal sticks, either way. */
  assert_status(dv__nvrtc_load(path, (n - 1) * 1000, &got), DV_ERR_NO_COMPILER);
  assert_ok(dv__nvrtc_load(path, n * 1000, &got));
  assert_ptr_equal(got, nv);

  /* The search: libnvrtc.so.<driver major> first. */
  char soname[32];
  snprintf(soname, sizeof soname, "libnvrtc.so.%d", n);
  void *h = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
  if (h) {
    dlclose(h);
    assert_ok(dv__nvrtc_load("", n * 1000 + 20, &got));
    assert_string_equal(got->name, soname);
    assert_int_equal(got->major, n);
  } else {
    print_message("[  info  ] %s is not on the library path: the search is not checked\n", soname);
  }
  /* For the driver before it: only older majors, or a refusal that names
   * what it tried, libnvrtc.so.<driver major> first. */
  dv_status rc = dv__nvrtc_load("", (n - 1) * 1000 + 80, &got);
  if (rc == DV_OK) {
    if (got->major > n - 1)
      fail_msg("NVRTC %d.%d (%s) chosen for driver %d.8", got->major, got->minor, got->name, n - 1);
    print_message("[  info  ] driver %d.8 gets NVRTC %d.%d (%s)\n", n - 1, got->major, got->minor,
                  got->name);
  } else {
    assert_int_equal(rc, DV_ERR_NO_COMPILER);
    msg = dv_last_error();
    snprintf(want, sizeof want, "  libnvrtc.so.%d: ", n - 1);
    if (!strstr(msg, want)) fail_msg("no \"%s\" in: %s", want, msg);
    assert_null(strstr(msg, soname)); /* never tried: newer than the driver */
    assert_non_null(strstr(msg, "nvrtc_library"));
    /* Where plain libnvrtc.so is the newer one, that is what is said. */
    const dv_nvrtc *plain = NULL;
    if (dv__nvrtc_load("libnvrtc.so", 0, &plain) == DV_OK && plain->major > n - 1) {
      assert_status(dv__nvrtc_load("", (n - 1) * 1000 + 80, &got), DV_ERR_NO_COMPILER);
      msg = dv_last_error();
      snprintf(want, sizeof want, "(libnvrtc.so) is newer than the CUDA driver (%d.8)", n - 1);
      if (!strstr(msg, want)) fail_msg("no \"%s\" in: %s", want, msg);
    }
  }
}

/* The image kept in the cache: a marker saying CUBIN or PTX, then the bytes. */
static void test_cache_image(void **state) {
  (void)state;
  const char cubin[] = "\x7f" "ELF rest of a cubin";
  void *img = NULL;
  size_t n = 0;
  assert_ok(dv__cu_image_pack(cubin, sizeof cubin - 1, 0, &img, &n));
  const void *payload = NULL;
  size_t psz = 0;
  int is_ptx = -1;
  assert_ok(dv__cu_image_unpack(img, n, &payload, &psz, &is_ptx));
  assert_int_equal(is_ptx, 0);
  assert_int_equal(psz, sizeof cubin - 1);
  assert_memory_equal(payload, cubin, psz);
  /* Damaged or foreign images are refused, never loaded. */
  ((char *)img)[0] ^= 1;
  assert_status(dv__cu_image_unpack(img, n, &payload, &psz, &is_ptx), DV_ERR_INVALID_ARGUMENT);
  assert_status(dv__cu_image_unpack(img, 3, &payload, &psz, &is_ptx), DV_ERR_INVALID_ARGUMENT);
  free(img);
  const char ptx[] = "//\n.version 9.0\n.target sm_90\n";
  assert_ok(dv__cu_image_pack(ptx, sizeof ptx, 1, &img, &n)); /* PTX with its NUL */
  assert_ok(dv__cu_image_unpack(img, n, &payload, &psz, &is_ptx));
  assert_int_equal(is_ptx, 1);
  assert_string_equal(payload, ptx);
  /* PTX must end in its NUL (cuModuleLoadData reads a C string). */
  assert_status(dv__cu_image_unpack(img, n - 1, &payload, &psz, &is_ptx), DV_ERR_INVALID_ARGUMENT);
  free(img);
}

int main(void) {
  dv_status rc = dv__nvrtc_load(getenv("DV_NVRTC_LIBRARY"), 0, &g_nv);
  if (rc) {
    printf("nvrtc: skipped: NVRTC cannot be loaded here (%s): %s\n", dv_status_name(rc), dv_last_error());
    return 77;
  }
  printf("NVRTC %d.%d from %s; architectures:", g_nv->major, g_nv->minor, g_nv->name);
  for (int i = 0; i < g_nv->narchs; i++) printf(" %d", g_nv->archs[i]);
  printf("\n");
  g_backend = "host";
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_kernel_source), cmocka_unit_test(test_debug_ptx_and_constants),
      cmocka_unit_test(test_compile_error_line),  cmocka_unit_test(test_target_choice),
      cmocka_unit_test(test_missing_library),     cmocka_unit_test(test_cache_image),
      cmocka_unit_test(test_debug_options),       cmocka_unit_test(test_nvrtc_for_driver),
  };
  return cmocka_run_group_tests_name("nvrtc", tests, NULL, NULL);
}
