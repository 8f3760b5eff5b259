/*
 * What the region-fission suites share (test_host_fission.c: what the pass
 * takes and refuses, and the same results in both modes;
 * test_host_fission_faults.c: faults inside its functions, and the ids of
 * launches too big for them): the contexts, the build with the pass's
 * verdict checked, and whether libclang (which the pass needs) loads.
 */
#ifndef DV_TEST_FISSION_COMMON_H
#define DV_TEST_FISSION_COMMON_H

#include <dlfcn.h>

#include "common.h"

static char g_cache_dir[256];
static bool g_libclang;

static const char *const modes[2] = {"fast", "checked"};

/* Fast mode without kernel_check (the Release default): with it, fast mode
 * keeps the block function, whose barriers check the shared redzones. */
static dv_context *mode_ctx(const char *mode) {
  char opt[32];
  snprintf(opt, sizeof opt, "host_mode=%s", mode);
  dv_context *c = NULL;
  assert_ok(test_context(&c, opt, strcmp(mode, "fast") ? NULL : "kernel_check=off", NULL));
  return c;
}

/* Build src in c; in fast mode, check the pass's verdict on `kernel`
 * ("accepted" or "refused") in the build log. */
static dv_module *build(dv_context *c, int mode, const char *name, const char *src,
                        const char *kernel, const char *verdict) {
  dv_program *p = NULL;
  assert_ok(dv_program_create(c, name, src, &p));
  dv_module *m = NULL;
  dv_status rc = dv_program_build(p, DV_BUILD_NO_CACHE, &m);
  if (rc) fail_msg("build %s: %s: %s\n%s", name, dv_status_name(rc), dv_last_error(), dv_program_log(p));
  const char *log = dv_program_log(p);
  char want[160];
  snprintf(want, sizeof want, "region fission: kernel %s: %s", kernel, verdict);
  if (mode == 0 && g_libclang && (!log || !strstr(log, want)))
    fail_msg("build %s: the log does not say \"%s\":\n%s", name, want, log ? log : "(none)");
  if (mode == 0 && log && strstr(log, "did not compile"))
    fail_msg("build %s: the pass's code did not compile:\n%s", name, log);
  if (mode == 1 && log && strstr(log, "region fission"))
    fail_msg("build %s: the pass ran in checked mode:\n%s", name, log);
  if (getenv("DV_TEST_SHOW_LOG")) printf("%s\n", log ? log : "");
  if (mode == 0 && !g_libclang) printf("SKIPPED: %s: no libclang, the pass's verdict\n", name);
  dv_program_destroy(p);
  return m;
}

/* Whether libclang loads, as the library looks for it (DV_HOST_FISSION=0: as
 * if not): without it the pass is off and the verdict checks skip, by name. */
static void fission_detect_libclang(void) {
  const char *names[] = {"libclang.so.1", "libclang-19.so.1", "libclang-18.so.1",
                         "libclang-17.so.1", "libclang-16.so.1", "libclang-15.so.1",
                         "libclang-14.so.1", "libclang.so"};
  const char *env = getenv("DV_HOST_FISSION");
  for (size_t i = 0; i < sizeof names / sizeof names[0] && !g_libclang && !(env && !strcmp(env, "0")); i++) {
    void *h = dlopen(names[i], RTLD_LAZY | RTLD_LOCAL | RTLD_NOLOAD);
    if (!h) h = dlopen(names[i], RTLD_LAZY | RTLD_LOCAL);
    g_libclang = h != NULL; /* left loaded: the library loads it too */
  }
}

#endif
