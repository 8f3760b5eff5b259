/*
 * NVRTC, the CUDA runtime compiler, loaded with dlopen so that devarray
 * builds and runs without it: kernels on CUDA need it at run time, nothing
 * else does.  The types are declared here from NVRTC's documentation (dv_
 * prefix); tests/backends/cuda/test_cuda_abi.c checks them against the toolkit's nvrtc.h
 * where one is present.
 */
#ifndef DV_NVRTC_H
#define DV_NVRTC_H
#include <stddef.h>

#include "devarray.h"

typedef int dv_nvrtcResult;
typedef struct dv_nvrtcProgram_st *dv_nvrtcProgram;

enum {
  DV_NVRTC_SUCCESS = 0,
  DV_NVRTC_ERROR_OUT_OF_MEMORY = 1,
  DV_NVRTC_ERROR_INVALID_OPTION = 5,
  DV_NVRTC_ERROR_COMPILATION = 6,
};

typedef struct dv_nvrtc_api {
#define DV_NVRTC(ret, name, params, optional) ret(*name) params;
#include "nvrtc_symbols.def"
#undef DV_NVRTC
} dv_nvrtc_api;

#define DV_NVRTC_MAX_ARCHS 64

/* One loaded NVRTC (kept for the life of the process). */
typedef struct dv_nvrtc {
  dv_nvrtc_api api;
  void *lib;
  char name[256];  /* the file name that loaded (the cache's key) */
  int major, minor; /* nvrtcVersion */
  int narchs;       /* 0: NVRTC cannot list its architectures (older than 11.2) */
  int archs[DV_NVRTC_MAX_ARCHS]; /* supported sm_XY as 10 * X + Y, ascending */
} dv_nvrtc;

/*
 * Load NVRTC for a driver of `driver_version` (cuDriverGetVersion's number,
 * 1000 * major + 10 * minor; 0: unknown, nothing refused).  `library` names
 * the file; "" or NULL searches: libnvrtc.so.<the driver's major>, the
 * majors below it down to 11, then libnvrtc.so (without a driver version
 * from libnvrtc.so.13 down).  An NVRTC whose major version is newer than the
 * driver's is passed over, and refused where nothing else is found: the
 * driver cannot load its output (NVRTC 13 emits PTX ISA 9.0 and CUBINs that
 * 12.x drivers reject).  Each file name is loaded once per process and kept;
 * the driver check is made on every call.  Failure: DV_ERR_NO_COMPILER, the
 * message naming every file tried with its reason (dlerror's, a missing
 * entry point, or "newer than the driver" with both versions and the
 * nvrtc_library option).
 */
dv_status dv__nvrtc_load(const char *library, int driver_version, const dv_nvrtc **out);

/*
 * The target for a device of compute capability cc (10 * major + minor), as
 * CuPy chooses it: "sm_XY" (a CUBIN, no JIT) when NVRTC supports the device's
 * architecture; "compute_XY" of the newest supported architecture below it
 * (PTX, compiled by the driver) when the device is newer than NVRTC or falls
 * between its architectures.  DV_ERR_NO_COMPILER when the device is older
 * than every architecture NVRTC supports.
 */
dv_status dv__nvrtc_target(const dv_nvrtc *nv, int cc, char *arch, size_t cap, int *is_ptx);

/* A compiled image: CUBIN (an ELF file) or PTX text with its NUL. */
typedef struct dv_nvrtc_out {
  void *image;
  size_t size;
  int is_ptx;
  char *log; /* the whole compiler log, NUL-terminated; NULL when empty */
} dv_nvrtc_out;

/*
 * Compile one translation unit `source` named `name` for `arch` ("sm_90":
 * CUBIN, "compute_90": PTX).  Options: the architecture, -default-device,
 * with DV_BUILD_DEBUG -G (alone: with -lineinfo too ptxas warns on every
 * build that it ignores it), then `user_options` split on white space.
 * Failure to compile: DV_ERR_COMPILE with the whole log in out->log (also
 * for an option NVRTC rejects; the log then lists every option passed).
 * Everything in *out is dv__malloc'd; release it with dv__nvrtc_out_free,
 * on success and on failure.
 */
dv_status dv__nvrtc_compile(const dv_nvrtc *nv, const char *name, const char *source,
                            const char *arch, unsigned flags, const char *user_options,
                            dv_nvrtc_out *out);
void dv__nvrtc_out_free(dv_nvrtc_out *out);

#endif
