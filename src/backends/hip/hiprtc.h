/*
 * hipRTC, AMD's run-time compiler for HIP, loaded with dlopen so that
 * devarray builds and runs without it: kernels on the HIP backend need it at
 * run time, nothing else does.  ROCm 6 ships it as libhiprtc.so.6; ROCm 5
 * keeps it inside the runtime, libamdhip64.so.5.  It compiles offline: no
 * GPU is needed to turn a translation unit into an AMDGPU code object (an
 * ELF file the runtime's hipModuleLoadData takes), which is how
 * tests/backends/hip/test_hip_rtc.c checks every kernel source of the repository.
 *
 * The contract mirrors NVRTC's (../cuda/nvrtc.h): a missing compiler is
 * DV_ERR_NO_COMPILER naming what was tried, a source that does not compile
 * is DV_ERR_COMPILE with the whole log.
 */
#ifndef DV_HIPRTC_H
#define DV_HIPRTC_H
#include <stdbool.h>
#include <stddef.h>

#include "devarray.h"
#include "hip_runtime.h"

/* hiprtcResult values devarray tells apart (the same as NVRTC's). */
enum {
  DV_HIPRTC_ERROR_OUT_OF_MEMORY = 1,
  DV_HIPRTC_ERROR_INVALID_OPTION = 5,
  DV_HIPRTC_ERROR_COMPILATION = 6,
};

/* One loaded hipRTC (kept for the life of the process). */
typedef struct dv_hiprtc {
  dv_hiprtc_api api;
  void *lib;
  char key[256];  /* what was asked for (the option's value; "": the search) */
  char file[256]; /* the file that loaded */
  int major, minor; /* hiprtcVersion */
} dv_hiprtc;

/*
 * Load hipRTC.  `library` names the file (the hiprtc_library option); "" or
 * NULL searches: libhiprtc.so.6, libhiprtc.so (ROCm 6), then `runtime` (the
 * libamdhip64 the HIP backend loaded; NULL: libamdhip64.so, then
 * libamdhip64.so.5), which holds hipRTC on ROCm 5.  Each request is loaded
 * once per process and kept (hipRTC keeps global state).  Failure:
 * DV_ERR_NO_COMPILER, the message naming every file tried with its reason
 * and the hiprtc_library option; DV_ERR_INVALID_ARGUMENT for a name longer
 * than 255 bytes.  Thread-safe.
 */
dv_status dv__hiprtc_load(const char *library, const char *runtime, const dv_hiprtc **out);

/* A compiled code object (an AMDGPU ELF file, with a spare NUL after it). */
typedef struct dv_hiprtc_out {
  void *image;
  size_t size;
  char *log; /* the whole compiler log, NUL-terminated; NULL when empty */
} dv_hiprtc_out;

/*
 * Compile one translation unit `source` named `name` for the gfx target
 * `arch` ("gfx90a", or with the device's features, "gfx90a:sramecc+:xnack-").
 * Options: --gpu-architecture=<arch>, -O3 (DV_BUILD_DEBUG: -O0 -g instead),
 * then `user_options` split on white space (at most 120).  Failure to
 * compile (or an option hipRTC rejects: the log then lists every option
 * passed): DV_ERR_COMPILE with the log in out->log.  Other failures:
 * DV_ERR_HOST_OUT_OF_MEMORY, DV_ERR_DRIVER (hipRTC's own error, named).
 * Everything in *out is dv__malloc'd; release it with dv__hiprtc_out_free
 * on success and on failure.  Thread-safe (hipRTC's programs are separate).
 */
dv_status dv__hiprtc_compile(const dv_hiprtc *rtc, const char *name, const char *source,
                             const char *arch, unsigned flags, const char *user_options,
                             dv_hiprtc_out *out);
void dv__hiprtc_out_free(dv_hiprtc_out *out);

/*
 * devarray's strided-copy kernels (src/kernel/copy_kernels.dvk, with the
 * dialect header) compiled by `rtc` for `arch`: compiled at the first call
 * for that pair and kept for the life of the process (every context of the
 * same target shares it; never recompiled, not even by a new context).
 * *image stays valid until the process ends.  Failure: the compile's status
 * (the log goes to the debug log).  Thread-safe.
 */
dv_status dv__hiprtc_copy_image(const dv_hiprtc *rtc, const char *arch, const void **image,
                                size_t *size);

/*
 * The gfx target of an architecture name as the runtime reports it
 * (hipDeviceProp_t.gcnArchName, "gfx90a:sramecc+:xnack-"): the processor
 * before the first ':' ("gfx90a"), written to buf.  False when `arch` is not
 * "gfx" followed by 2 to 6 hexadecimal digits or letters (nothing sensible
 * to compile for).
 */
bool dv__hiprtc_processor(const char *arch, char *buf, size_t cap);

/* The HIP driver's kernel operations (dv_cu_driver.kops, ../cudafam/fam.h):
 * compile through hipRTC for the context's gfx target (dv_hip_ctx.arch), HSACO images
 * in the module cache, the copy kernels compiled at first use, AMD's
 * limits (LDS 64 KiB without opt-in, the device's wave size). */
extern const struct dv_cu_kernel_ops dv__hip_kernel_ops;

#endif
