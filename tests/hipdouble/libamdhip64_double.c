/*
 * A test double of AMD's HIP runtime (libamdhip64), built as libamdhip64.so
 * in a folder of its own that the HIP test entries put first on
 * LD_LIBRARY_PATH, so that the backend's dlopen finds it as it would find
 * ROCm.  Never installed; the library knows nothing of it.
 *
 * Today it answers what the HIP backend calls (issue 26, phase 1: loading,
 * hipInit, the device list); the strict double of the runtime's memory,
 * copy, stream and event rules (like tests/cudadouble) grows with the
 * backend's operations.  Its answers, from the environment:
 *   HIP_DOUBLE_DEVICES  devices reported (default 1; 0: hipErrorNoDevice)
 *   HIP_DOUBLE_INIT     hipInit's result (default 0, hipSuccess)
 * hip_double_init_calls() says how often hipInit ran (tests find it with dlsym).
 */
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#define API __attribute__((visibility("default")))

enum { OK = 0, INVALID_VALUE = 1, NOT_INITIALIZED = 3, NO_DEVICE = 100, INVALID_DEVICE = 101 };

/* The entry points (HIP's prototypes, with int for enums and devices). */
API int hip_double_init_calls(void);
API int hipInit(unsigned flags);
API int hipRuntimeGetVersion(int *v);
API const char *hipGetErrorName(int e);
API const char *hipGetErrorString(int e);
API int hipGetDeviceCount(int *n);
API int hipDeviceGet(int *d, int ordinal);
API int hipDeviceGetName(char *name, int len, int d);
API int hipDeviceTotalMem(size_t *bytes, int d);

static atomic_int init_calls;
static atomic_int initialized;

static int env_int(const char *name, int dflt) {
  const char *v = getenv(name);
  return v && *v ? atoi(v) : dflt;
}

API int hip_double_init_calls(void) { return atomic_load(&init_calls); }

API int hipInit(unsigned flags) {
  atomic_fetch_add(&init_calls, 1);
  if (flags != 0) return INVALID_VALUE; /* HIP: flags must be 0 */
  int r = env_int("HIP_DOUBLE_INIT", OK);
  if (r == OK) atomic_store(&initialized, 1);
  return r;
}

API int hipRuntimeGetVersion(int *v) {
  if (!v) return INVALID_VALUE;
  *v = 60032830; /* ROCm 6.0: major * 10^7 + minor * 10^5 + patch */
  return OK;
}

API const char *hipGetErrorName(int e) {
  switch (e) {
    case OK: return "hipSuccess";
    case INVALID_VALUE: return "hipErrorInvalidValue";
    case NOT_INITIALIZED: return "hipErrorNotInitialized";
    case NO_DEVICE: return "hipErrorNoDevice";
    case INVALID_DEVICE: return "hipErrorInvalidDevice";
    default: return "hipErrorUnknown";
  }
}

API const char *hipGetErrorString(int e) { return hipGetErrorName(e); }

static int ndevices(void) { return env_int("HIP_DOUBLE_DEVICES", 1); }

API int hipGetDeviceCount(int *n) {
  if (!n) return INVALID_VALUE;
  if (!atomic_load(&initialized)) return NOT_INITIALIZED; /* stricter than HIP: the backend inits first */
  *n = ndevices();
  return *n > 0 ? OK : NO_DEVICE;
}

API int hipDeviceGet(int *d, int ordinal) {
  if (!d) return INVALID_VALUE;
  if (ordinal < 0 || ordinal >= ndevices()) return INVALID_DEVICE;
  *d = ordinal;
  return OK;
}

API int hipDeviceGetName(char *name, int len, int d) {
  if (!name || len <= 0) return INVALID_VALUE;
  if (d < 0 || d >= ndevices()) return INVALID_DEVICE;
  snprintf(name, (size_t)len, "HIP test double %d (gfx90a)", d);
  return OK;
}

API int hipDeviceTotalMem(size_t *bytes, int d) {
  if (!bytes) return INVALID_VALUE;
  if (d < 0 || d >= ndevices()) return INVALID_DEVICE;
  *bytes = (size_t)64 << 30;
  return OK;
}
