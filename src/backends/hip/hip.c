/*
 * The HIP backend (issue 26): AMD GPUs through AMD's HIP runtime,
 * libamdhip64 (ROCm 5: libamdhip64.so.5, ROCm 6: .so.6), loaded at run time
 * with dlopen through the entry-point list hip_symbols.def (the loader is
 * the one the CUDA backend uses: ../dynlib.c).  The library never links
 * against ROCm and builds without it (hip_runtime.h declares the types).
 *
 * What exists: loading the runtime, hipInit, listing the devices (probe:
 * `devarray info`'s "hip" line says what was found, or why nothing was).
 * What does not yet: every operation (device memory, copies, streams,
 * events, kernels through hipRTC).  Until they exist the backend refuses to
 * open -- DV_ERR_BACKEND_UNAVAILABLE, "not complete yet" -- so that no
 * context ever runs on a stub, and automatic selection never tries it
 * (registry.c).  docs/design.md, "HIP backend", has the plan.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "../../core/core.h"
#include "../backend.h"
#include "../dynlib.h"
#include "hip_runtime.h"

static dv_hip_api hip;
static void *hip_lib;
static const char *hip_lib_name;
static dv_status hip_load_status;
static char hip_load_msg[512];
static pthread_once_t hip_once = PTHREAD_ONCE_INIT;

#define DV_HIP(ret, name, params) {#name, NULL, (void **)&hip.name, 0},
static const dv_dynsym hip_syms[] = {
#include "hip_symbols.def"
};
#undef DV_HIP

/* ROCm's version number: major * 10^7 + minor * 10^5 + patch. */
static void hip_version_text(char *buf, size_t cap) {
  int v = 0;
  if (hip.hipRuntimeGetVersion(&v) == DV_HIP_SUCCESS && v > 0)
    snprintf(buf, cap, "%d.%d", v / 10000000, (v / 100000) % 100);
  else
    snprintf(buf, cap, "(version unknown)");
}

static void hip_load(void) {
  /* The development symlink first (the ROCm a build environment chose),
   * then the newest runtime. */
  static const char *const names[] = {"libamdhip64.so", "libamdhip64.so.6", "libamdhip64.so.5"};
  hip_load_status = dv__dynlib_open("HIP runtime", names, 3, hip_syms, sizeof hip_syms / sizeof hip_syms[0],
                                    &hip_lib, &hip_lib_name, hip_load_msg, sizeof hip_load_msg);
  if (hip_load_status) return;
  dv_hipError_t r = hip.hipInit(0);
  if (r != DV_HIP_SUCCESS) {
    const char *n = hip.hipGetErrorName(r);
    char ver[32];
    hip_version_text(ver, sizeof ver);
    /* No GPU (no /dev/kfd): ROCm 5 says hipErrorInvalidDevice, later ones hipErrorNoDevice. */
    bool none = r == DV_HIP_ERROR_NO_DEVICE || r == DV_HIP_ERROR_INVALID_DEVICE;
    snprintf(hip_load_msg, sizeof hip_load_msg, "HIP runtime %s (%s) %s: hipInit failed: %s (%d)", ver,
             hip_lib_name, none ? "finds no AMD GPU" : "cannot start", n ? n : "?", r);
    hip_load_status = none ? DV_ERR_BACKEND_UNAVAILABLE : DV_ERR_DRIVER;
    return;
  }
  hip_load_status = DV_OK;
}

static dv_status hip_ensure(void) {
  pthread_once(&hip_once, hip_load);
  if (hip_load_status) return dv__error(hip_load_status, "%s", hip_load_msg);
  return DV_OK;
}

/* What was found: the runtime, then the devices, then why the backend
 * cannot be used anyway.  Always a failure status until the backend's
 * operations exist. */
static dv_status hip_describe(char *reason, size_t cap) {
  char tmp[1024];
  dv_status rc = hip_ensure();
  int n = 0;
  if (!rc) {
    dv_hipError_t r = hip.hipGetDeviceCount(&n);
    if (r == DV_HIP_ERROR_NO_DEVICE) n = 0;
    else if (r != DV_HIP_SUCCESS)
      {
      const char *en = hip.hipGetErrorName(r);
      rc = dv__error(DV_ERR_DRIVER, "HIP hipGetDeviceCount failed: %s (%d)", en ? en : "?", r);
    }
  }
  if (!rc && n == 0) {
    char ver[32];
    hip_version_text(ver, sizeof ver);
    rc = dv__error(DV_ERR_BACKEND_UNAVAILABLE, "HIP runtime %s (%s) reports no device", ver, hip_lib_name);
  }
  if (!rc) {
    char ver[32];
    hip_version_text(ver, sizeof ver);
    size_t k = (size_t)snprintf(tmp, sizeof tmp, "HIP runtime %s (%s), %d device(s)", ver, hip_lib_name, n);
    for (int i = 0; i < n && k < sizeof tmp; i++) {
      dv_hipDevice_t d = 0;
      char name[128] = "?";
      if (hip.hipDeviceGet(&d, i) == DV_HIP_SUCCESS) hip.hipDeviceGetName(name, sizeof name, d);
      k += (size_t)snprintf(tmp + k, sizeof tmp - k, "%s%d: %s", i ? ", " : ": ", i, name);
    }
    if (k < sizeof tmp)
      snprintf(tmp + k, sizeof tmp - k,
               "; but the HIP backend is not complete yet (issue 26: device memory, copies, streams, events "
               "and kernels are still to come), so it cannot be opened");
    rc = dv__error(DV_ERR_BACKEND_UNAVAILABLE, "%s", tmp);
  }
  if (reason && cap) snprintf(reason, cap, "%s", dv_last_error());
  return rc;
}

static dv_status hipb_probe(char *reason, size_t cap) { return hip_describe(reason, cap); }

static dv_status hipb_open(const dv_backend_config *cfg, void **state) {
  (void)cfg;
  *state = NULL;
  return hip_describe(NULL, 0); /* never DV_OK yet: see the top of this file */
}

static void hipb_close(void *state) { (void)state; }

/* Only probe, open and close: open never succeeds, so nothing else is ever called. */
const dv_backend dv__backend_hip = {
    .version = DV_BACKEND_VERSION,
    .name = "hip",
    .probe = hipb_probe,
    .open = hipb_open,
    .close = hipb_close,
};
