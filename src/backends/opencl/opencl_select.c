/*
 * The OpenCL backend's device discovery and choice: every platform's
 * devices, which of them are simulators (never chosen automatically), and
 * the device a context opens ("p:d", an ordinal, a name, or the default).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "opencl_internal.h"

#if DV_HAVE_OPENCL_HEADERS


/* OpenCL devices that simulate a device in an interpreter, found by platform
 * or device name or vendor.  Oclgrind reports itself as a GPU (and a CPU and
 * an accelerator) and runs kernels hundreds of times slower than native
 * code; it is a debugging tool, so only a named device selects it. */
static const char *const cl_simulator_names[] = {"Oclgrind"};

static bool cl_contains(const char *hay, const char *needle) {
  size_t n = strlen(needle);
  for (; *hay; hay++)
    if (strncasecmp(hay, needle, n) == 0) return true;
  return false;
}

static bool cl_is_simulator(cl_platform_id p, cl_device_id d, const char *dev_name) {
  char plat[128] = "", vendor[128] = "";
  cl.clGetPlatformInfo(p, CL_PLATFORM_NAME, sizeof plat, plat, NULL);
  cl.clGetDeviceInfo(d, CL_DEVICE_VENDOR, sizeof vendor, vendor, NULL);
  for (size_t i = 0; i < sizeof cl_simulator_names / sizeof *cl_simulator_names; i++)
    if (cl_contains(plat, cl_simulator_names[i]) || cl_contains(vendor, cl_simulator_names[i]) ||
        cl_contains(dev_name, cl_simulator_names[i]))
      return true;
  return false;
}

dv_status dv__cl_enumerate(cl_dev_entry *out, unsigned *n) {
  *n = 0;
  cl_platform_id plats[16];
  cl_uint np = 0;
  cl_int e = cl.clGetPlatformIDs(16, plats, &np);
  if (e == CL_PLATFORM_NOT_FOUND_KHR || (e == CL_SUCCESS && np == 0))
    return dv__error(DV_ERR_BACKEND_UNAVAILABLE, "no OpenCL platform is installed (no ICD found)");
  if (e)
    return dv__error(dv__cl_status(e), "OpenCL clGetPlatformIDs failed: %s (%d)", dv__cl_error_name(e), e);
  for (cl_uint p = 0; p < np && p < 16; p++) {
    cl_device_id devs[16];
    cl_uint nd = 0;
    if (cl.clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, 16, devs, &nd) != CL_SUCCESS) continue;
    for (cl_uint d = 0; d < nd && d < 16 && *n < CL_MAX_DEVS; d++) {
      cl_dev_entry *x = &out[(*n)++];
      x->p = plats[p], x->d = devs[d], x->pi = p, x->di = d;
      cl.clGetDeviceInfo(devs[d], CL_DEVICE_TYPE, sizeof x->type, &x->type, NULL);
      x->name[0] = 0;
      cl.clGetDeviceInfo(devs[d], CL_DEVICE_NAME, sizeof x->name, x->name, NULL);
      x->simulator = cl_is_simulator(plats[p], devs[d], x->name);
    }
  }
  if (*n == 0) return dv__error(DV_ERR_BACKEND_UNAVAILABLE, "OpenCL platforms have no devices");
  return DV_OK;
}


/* Choose a device: "p:d", an ordinal "n", a name substring, or (empty) the first GPU, or,
 * unless require_gpu, the first device of any type.  A simulator (Oclgrind)
 * is chosen only by "p:d" or its name, never by the empty selection. */
dv_status dv__cl_choose(const dv_backend_config *cfg, cl_dev_entry *chosen) {
  cl_dev_entry devs[CL_MAX_DEVS];
  unsigned n;
  dv_status rc = dv__cl_enumerate(devs, &n);
  if (rc) return rc;
  const char *sel = cfg->device ? cfg->device : "";
  unsigned pi, di;
  char tail;
  if (*sel && sscanf(sel, "%u:%u%c", &pi, &di, &tail) == 2) {
    for (unsigned i = 0; i < n; i++)
      if (devs[i].pi == pi && devs[i].di == di) {
        *chosen = devs[i];
        return DV_OK;
      }
    return dv__error(DV_ERR_BACKEND_UNAVAILABLE, "no OpenCL device %u:%u (%u device(s) found)", pi, di, n);
  }
  if (*sel && strspn(sel, "0123456789") == strlen(sel)) {
    unsigned long ul = strtoul(sel, NULL, 10); /* digits only: no sign, no junk */
    unsigned idx = ul > CL_MAX_DEVS ? CL_MAX_DEVS : (unsigned)ul; /* past the last either way */
    /* An ordinal, as Numba's select_device(n) gives: the n-th device in the
     * automatic choice's order (GPUs first, then the others), simulators never. */
    unsigned k = 0;
    for (int gpu = 1; gpu >= 0; gpu--)
      for (unsigned i = 0; i < n; i++) {
        if (devs[i].simulator || ((devs[i].type & CL_DEVICE_TYPE_GPU) != 0) != (gpu == 1)) continue;
        if (k++ == idx) {
          *chosen = devs[i];
          return DV_OK;
        }
      }
    return dv__error(DV_ERR_BACKEND_UNAVAILABLE,
                     "no OpenCL device %.40s: %u device(s) can be chosen by ordinal (GPUs first; "
                     "simulators only by name)", sel, k);
  }
  if (*sel) {
    for (unsigned i = 0; i < n; i++)
      if (cl_contains(devs[i].name, sel)) {
        *chosen = devs[i];
        return DV_OK;
      }
    return dv__error(DV_ERR_BACKEND_UNAVAILABLE, "no OpenCL device name contains \"%s\"", sel);
  }
  unsigned nsim = 0, sim = 0, other = n;
  for (unsigned i = 0; i < n; i++) {
    if (devs[i].simulator) {
      if (!nsim++) sim = i;
      continue;
    }
    if (other == n) other = i;
    if (devs[i].type & CL_DEVICE_TYPE_GPU) {
      *chosen = devs[i];
      return DV_OK;
    }
  }
  char skipped[512] = "";
  if (nsim)
    snprintf(skipped, sizeof skipped,
             "; %u simulator(s) such as \"%.120s\" (%u:%u) are never chosen automatically: name one "
             "(DV_OPENCL_DEVICE=\"%.120s\")",
             nsim, devs[sim].name, devs[sim].pi, devs[sim].di, devs[sim].name);
  if (other == n)
    return dv__error(DV_ERR_BACKEND_UNAVAILABLE, "no OpenCL device but simulators%s", skipped);
  if (cfg->require_gpu)
    return dv__error(DV_ERR_BACKEND_UNAVAILABLE,
                     "no OpenCL GPU (found %u other device(s), e.g. \"%s\"; CPU devices are used only "
                     "when asked for: DV_BACKEND=opencl or DV_OPENCL_DEVICE)%s",
                     n - nsim, devs[other].name, skipped);
  *chosen = devs[other];
  return DV_OK;
}

#endif /* DV_HAVE_OPENCL_HEADERS */
