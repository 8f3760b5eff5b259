/*
 * The HIP backend (issue 26): AMD GPUs through AMD's HIP runtime,
 * libamdhip64 (ROCm 5: libamdhip64.so.5, ROCm 6: .so.6), loaded at run time
 * with dlopen through the entry-point list hip_symbols.def (the loader is
 * the one the CUDA backend uses: ../dynlib.c).  The library never links
 * against ROCm and builds without it (hip_runtime.h declares the types).
 *
 * This file loads the runtime (hipInit once per process), probes it
 * (`devarray info`'s "hip" line: the runtime's version and the devices, or
 * why there are none) and opens contexts.  Everything else is the CUDA
 * backend's code (../cuda/) on the HIP driver (hip_driver.c: translations
 * with the CUDA driver API's prototypes): the table below takes every
 * method but probe and open from DV_CU_BACKEND_METHODS, the
 * list the CUDA backend's own table is written with.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "../../core/core.h"
#include "../backend.h"
#include "../dynlib.h"
#include "hip_internal.h"

static void *hip_lib;
static dv_status hip_load_status;
static char hip_load_msg[512];
static pthread_once_t hip_once = PTHREAD_ONCE_INIT;

#define DV_HIP(ret, name, params) {#name, NULL, (void **)&dv__hip_api.name, 0},
/* Written once, in hip_load. */
static dv_dynsym hip_syms[] = {
#include "hip_symbols.def"
    {"hipGetDeviceProperties", NULL, (void **)&dv__hip_get_props, 1},
};
#undef DV_HIP

/* ROCm's version number: major * 10^7 + minor * 10^5 + patch. */
static void hip_version_text(char *buf, size_t cap) {
  int v = 0;
  if (dv__hip_api.hipRuntimeGetVersion(&v) == DV_HIP_SUCCESS && v > 0)
    snprintf(buf, cap, "%d.%d", v / 10000000, (v / 100000) % 100);
  else
    snprintf(buf, cap, "(version unknown)");
}

/* The driver's state does not survive fork: contexts refuse in the child
 * (the flag the shared code reads). */
static void hip_after_fork_child(void) { atomic_store(&dv__hip_forked, 1); }

static void hip_load(void) {
  /* The development symlink first (the ROCm a build environment chose),
   * then the newest runtime. */
  static const char *const names[] = {"libamdhip64.so", "libamdhip64.so.6", "libamdhip64.so.5"};
  /* hipLaunchHostFunc came with ROCm 5.3: without it, hip_driver.c queues
   * host functions through hipStreamAddCallback.  Without
   * hipStreamWaitValue64 the staging threads are not used; without
   * hipMemPrefetchAsync / hipMemAdvise managed memory takes no hints. */
  for (size_t i = 0; i < sizeof hip_syms / sizeof hip_syms[0]; i++)
    if (!strcmp(hip_syms[i].name, "hipLaunchHostFunc") || !strcmp(hip_syms[i].name, "hipStreamWaitValue64") ||
        !strcmp(hip_syms[i].name, "hipMemPrefetchAsync") || !strcmp(hip_syms[i].name, "hipMemAdvise") ||
        /* the stream-ordered allocator (ROCm 5.2): the "async" manager is refused without it */
        strstr(hip_syms[i].name, "MemPool") || !strcmp(hip_syms[i].name, "hipMallocFromPoolAsync") ||
        !strcmp(hip_syms[i].name, "hipFreeAsync") ||
        !strncmp(hip_syms[i].name, "hipGraph", 8) || !strcmp(hip_syms[i].name, "hipStreamBeginCapture") ||
        !strcmp(hip_syms[i].name, "hipStreamEndCapture")) /* graphs: refused without them */
      hip_syms[i].optional = 1;
  hip_load_status =
      dv__dynlib_open("HIP runtime", names, 3, hip_syms, sizeof hip_syms / sizeof hip_syms[0],
                      &hip_lib, &dv__hip_lib_name, hip_load_msg, sizeof hip_load_msg);
  if (hip_load_status) return;
  dv_hipError_t r = dv__hip_api.hipInit(0);
  if (r != DV_HIP_SUCCESS) {
    const char *n = dv__hip_api.hipGetErrorName(r);
    char ver[32];
    hip_version_text(ver, sizeof ver);
    /* No GPU (no /dev/kfd): ROCm 5 says hipErrorInvalidDevice, later ones hipErrorNoDevice. */
    bool none = r == DV_HIP_ERROR_NO_DEVICE || r == DV_HIP_ERROR_INVALID_DEVICE;
    snprintf(hip_load_msg, sizeof hip_load_msg, "HIP runtime %s (%s) %s: hipInit failed: %s (%d)",
             ver, dv__hip_lib_name, none ? "finds no AMD GPU" : "cannot start", n ? n : "?", r);
    hip_load_status = none ? DV_ERR_BACKEND_UNAVAILABLE : DV_ERR_DRIVER;
    return;
  }
  dv__hip_pools_install(); /* the stream-ordered allocator, where the runtime has it */
  hip_load_status = dv__hip_driver_init();
  if (hip_load_status) {
    snprintf(hip_load_msg, sizeof hip_load_msg, "%s", dv_last_error());
    return;
  }
  pthread_atfork(NULL, NULL, hip_after_fork_child);
}

static dv_status hip_ensure(void) {
  pthread_once(&hip_once, hip_load);
  if (hip_load_status) return dv__error(hip_load_status, "%s", hip_load_msg);
  return DV_OK;
}

/* What was found: the runtime and its devices (DV_OK), or why the backend
 * cannot be used (the status and its message). */
static dv_status hipb_probe(char *reason, size_t cap) {
  char tmp[1024];
  dv_status rc = hip_ensure();
  int n = 0;
  if (!rc) {
    dv_hipError_t r = dv__hip_api.hipGetDeviceCount(&n);
    if (r == DV_HIP_ERROR_NO_DEVICE)
      n = 0;
    else if (r != DV_HIP_SUCCESS) {
      const char *en = dv__hip_api.hipGetErrorName(r);
      rc = dv__error(DV_ERR_DRIVER, "HIP hipGetDeviceCount failed: %s (%d)", en ? en : "?", r);
    }
  }
  char ver[32] = "";
  if (!rc) hip_version_text(ver, sizeof ver);
  if (!rc && n == 0)
    rc = dv__error(DV_ERR_BACKEND_UNAVAILABLE, "HIP runtime %s (%s) reports no device", ver,
                   dv__hip_lib_name);
  if (rc) {
    if (reason && cap) snprintf(reason, cap, "%s", dv_last_error());
    return rc;
  }
  size_t k = (size_t)snprintf(tmp, sizeof tmp, "HIP runtime %s (%s), %d device(s)", ver,
                              dv__hip_lib_name, n);
  for (int i = 0; i < n && k < sizeof tmp; i++) {
    dv_hipDevice_t d = 0;
    char name[128] = "?";
    if (dv__hip_api.hipDeviceGet(&d, i) == DV_HIP_SUCCESS)
      dv__hip_api.hipDeviceGetName(name, sizeof name, d);
    k += (size_t)snprintf(tmp + k, sizeof tmp - k, "%s%d: %s", i ? ", " : ": ", i, name);
  }
  if (reason && cap) snprintf(reason, cap, "%s", tmp);
  return DV_OK;
}

/* A context on device cfg->device (an ordinal: options device / hip_device):
 * the CUDA backend's open on the HIP driver. */
static dv_status hipb_open(const dv_backend_config *cfg, void **state) {
  *state = NULL;
  dv_status rc = hip_ensure();
  if (rc) return rc;
  return dv__cu_open(&dv__hip_driver, cfg, state);
}

/* Every method but probe and open is the CUDA family's (DV_CU_BACKEND_METHODS). */
const dv_backend dv__backend_hip = {
    .name = "hip",
    .caps = DV_CU_BACKEND_CAPS,
    .probe = hipb_probe,
    .open = hipb_open,
    DV_CU_BACKEND_METHODS /* ends with a comma */
};
