/* The registry of backends: every backend compiled in, found by name. */
#include <stdio.h>
#include <string.h>

#include "../core/core.h"
#include "backend.h"

static const dv_backend *const dv__backends[] = {&dv__backend_host, &dv__backend_opencl,
                                                 &dv__backend_cuda, &dv__backend_hip};
#define DV_NBACKENDS (sizeof dv__backends / sizeof dv__backends[0])


/* Automatic selection's order: the GPU runtimes first (CUDA, then HIP: a
 * machine with an AMD GPU and ROCm picks HIP), then OpenCL (a GPU unless a
 * device is named), then the host simulator, which always opens. */
static const dv_backend *const dv__backends_auto[] = {&dv__backend_cuda, &dv__backend_hip, &dv__backend_opencl,
                                                      &dv__backend_host};

const dv_backend *dv__backend_auto_at(size_t i) {
  return i < sizeof dv__backends_auto / sizeof dv__backends_auto[0] ? dv__backends_auto[i] : NULL;
}

const dv_backend *dv__backend_find(const char *name) {
  for (size_t i = 0; i < DV_NBACKENDS; i++)
    if (strcmp(dv__backends[i]->name, name) == 0) return dv__backends[i];
  return NULL;
}

dv_status dv__backend_check(const dv_backend *be) {
  unsigned caps = be->caps;
  if (!(caps & DV_BCAP_ENTRY) || ((caps & DV_BCAP_BASE) != DV_BCAP_BASE && caps != DV_BCAP_ENTRY))
    return dv__error(DV_ERR_MISUSE, "backend %s: capabilities 0x%x lack part of the base (0x%x)", be->name,
                     caps, (unsigned)DV_BCAP_BASE);
#define DV_BE_METHOD(group, ret, method, params)                                                          \
  if (!(caps & DV_BCAP_##group) != !be->method)                                                           \
    return dv__error(DV_ERR_MISUSE, "backend %s: method " #method " is %s but group " #group " is %s",    \
                     be->name, be->method ? "set" : "NULL", caps & DV_BCAP_##group ? "declared" : "not declared");
#include "backend_methods.def"
#undef DV_BE_METHOD
  return DV_OK;
}

size_t dv_backend_count(void) { return DV_NBACKENDS; }
const char *dv_backend_name(size_t i) { return i < DV_NBACKENDS ? dv__backends[i]->name : NULL; }

dv_status dv_backend_probe(const char *name, char *reason, size_t cap) {
  if (reason && cap) reason[0] = 0;
  DV_CHECK_NULL(name);
  char tmp[512] = "";
  const dv_backend *be = dv__backend_find(name);
  dv_status rc;
  if (!be) {
    snprintf(tmp, sizeof tmp, "no backend named \"%s\"", name);
    rc = dv__error(DV_ERR_BACKEND_UNAVAILABLE, "%s", tmp);
  } else {
    rc = be->probe(tmp, sizeof tmp);
    if (rc) dv__error(rc, "%s", tmp);
  }
  if (reason && cap) snprintf(reason, cap, "%s", tmp);
  return rc;
}
