/*
 * hipRTC in the HIP test double: every hiprtc* entry point of
 * src/backends/hip/hiprtc_symbols.def forwards to a real hipRTC, which
 * compiles HIP C++ to an AMDGPU code object offline, with no GPU (ROCm 5.2:
 * about 0.2 s).  The real library is loaded once, by absolute path, with
 * RTLD_LOCAL (its hip* symbols never meet the double's): HIP_DOUBLE_HIPRTC
 * names it, else the first of /usr/lib/x86_64-linux-gnu/libamdhip64.so.5,
 * /opt/rocm/lib/libhiprtc.so.6 and /opt/rocm/lib/libamdhip64.so that loads
 * and has hiprtcCreateProgram.  Without one, hiprtcCreateProgram (and
 * hiprtcVersion) fail with HIPRTC_ERROR_INTERNAL_ERROR and
 * hiprtcGetErrorString says why: never a fake compile.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../../../src/backends/hip/hip_runtime.h"

#define API __attribute__((visibility("default")))
#define HIPRTC_ERROR_INVALID_INPUT 3
#define HIPRTC_ERROR_INVALID_PROGRAM 4
#define HIPRTC_ERROR_INTERNAL_ERROR 11

#define DV_HIPRTC(ret, name, params) API ret name params;
#include "../../../../src/backends/hip/hiprtc_symbols.def"
#undef DV_HIPRTC
API const char *hip_double_hiprtc_path(void);

static dv_hiprtc_api real;
static const char *real_path;
static char why[768];
static pthread_once_t once = PTHREAD_ONCE_INIT;

#define DV_HIPRTC(ret, name, params) {#name, (void **)&real.name},
static const struct {
  const char *name;
  void **slot;
} syms[] = {
#include "../../../../src/backends/hip/hiprtc_symbols.def"
};
#undef DV_HIPRTC

static int try_load(const char *path) {
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char *e = dlerror();
    size_t k = strlen(why);
    snprintf(why + k, sizeof why - k, "%s%s", k ? "; " : "", e ? e : path);
    return 0;
  }
  for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
    void *f = dlsym(h, syms[i].name);
    if (!f) {
      size_t k = strlen(why);
      snprintf(why + k, sizeof why - k, "%s%s lacks %s", k ? "; " : "", path, syms[i].name);
      for (size_t j = 0; j < i; j++) *syms[j].slot = NULL;
      dlclose(h);
      return 0;
    }
    *syms[i].slot = f;
  }
  real_path = path; /* never unloaded: programs it made may outlive anything */
  return 1;
}

static void load(void) {
  static const char *const cands[] = {"/usr/lib/x86_64-linux-gnu/libamdhip64.so.5", "/opt/rocm/lib/libhiprtc.so.6",
                                      "/opt/rocm/lib/libamdhip64.so"};
  const char *env = getenv("HIP_DOUBLE_HIPRTC");
  if (env && *env) {
    try_load(env);
  } else {
    for (size_t i = 0; i < sizeof cands / sizeof cands[0] && !real_path; i++) try_load(cands[i]);
  }
}

static int have(void) {
  pthread_once(&once, load);
  return real_path != NULL;
}

/* The real hipRTC's path, or NULL (tests find it with dlsym). */
API const char *hip_double_hiprtc_path(void) { return have() ? real_path : NULL; }

API const char *hiprtcGetErrorString(dv_hiprtcResult r) {
  if (have()) return real.hiprtcGetErrorString(r);
  static char msg[1024];
  if (r == HIPRTC_ERROR_INTERNAL_ERROR) {
    snprintf(msg, sizeof msg,
             "HIPRTC_ERROR_INTERNAL_ERROR (the HIP test double forwards hipRTC to a real one and found none: %s)",
             why[0] ? why : "nothing to try");
    return msg;
  }
  return r == 0 ? "HIPRTC_SUCCESS" : "HIPRTC_ERROR (the HIP test double has no real hipRTC)";
}

API dv_hiprtcResult hiprtcVersion(int *major, int *minor) {
  if (!have()) return HIPRTC_ERROR_INTERNAL_ERROR;
  return real.hiprtcVersion(major, minor);
}

API dv_hiprtcResult hiprtcCreateProgram(dv_hiprtcProgram *p, const char *src, const char *name, int nheaders,
                                        const char **headers, const char **include_names) {
  if (!have()) {
    if (p) *p = NULL;
    return HIPRTC_ERROR_INTERNAL_ERROR;
  }
  return real.hiprtcCreateProgram(p, src, name, nheaders, headers, include_names);
}

/* Without a real hipRTC no program exists: every handle is invalid. */
#define FORWARD(call) return have() ? real.call : HIPRTC_ERROR_INVALID_PROGRAM

API dv_hiprtcResult hiprtcCompileProgram(dv_hiprtcProgram p, int nopts, const char **opts) {
  FORWARD(hiprtcCompileProgram(p, nopts, opts));
}
API dv_hiprtcResult hiprtcDestroyProgram(dv_hiprtcProgram *p) { FORWARD(hiprtcDestroyProgram(p)); }
API dv_hiprtcResult hiprtcGetProgramLogSize(dv_hiprtcProgram p, size_t *size) {
  FORWARD(hiprtcGetProgramLogSize(p, size));
}
API dv_hiprtcResult hiprtcGetProgramLog(dv_hiprtcProgram p, char *log) { FORWARD(hiprtcGetProgramLog(p, log)); }
API dv_hiprtcResult hiprtcGetCodeSize(dv_hiprtcProgram p, size_t *size) { FORWARD(hiprtcGetCodeSize(p, size)); }
API dv_hiprtcResult hiprtcGetCode(dv_hiprtcProgram p, char *code) { FORWARD(hiprtcGetCode(p, code)); }
