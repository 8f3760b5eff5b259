/*
 * The host simulator's toolchain (src/backends/host/toolchain/): the C
 * compiler's discovery and the build of a module (build.c; region fission
 * through fission/), loading a module and finding its kernels (module.c),
 * and source lines of code addresses (lines.c: addr2line).  It knows
 * nothing of execution: the runtime a module's dv__rt points to is handed
 * to it (hk_tc_open, hk_module_segments).
 *
 * The others read a module and a kernel through the read-only views below
 * (hk_mview, hk_kview: toolchain/ writes them when it loads, never after);
 * the rest of dv_bmodule and dv_bkernel is toolchain/'s own
 * (toolchain_internal.h).
 */
#ifndef DV_HOST_TOOLCHAIN_H
#define DV_HOST_TOOLCHAIN_H
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "../../../core/core.h"
#include "../../backend.h"
#include "../../../dialect/dialect.h"

/* devarray built with AddressSanitizer: kernels are built with it too (build.c);
 * the same test as device.h's. */
#if defined(__SANITIZE_ADDRESS__)
#define DV_HOST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define DV_HOST_ASAN 1
#endif
#endif
#if DV_HOST_ASAN
#define DV_NO_ASAN __attribute__((no_sanitize_address))
#else
#define DV_NO_ASAN
#endif

/* snprintf that may truncate (messages), without the compiler's warning. */
__attribute__((format(printf, 3, 4))) static inline void hk_fmt(char *buf, size_t cap,
                                                                const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, cap, fmt, ap);
  va_end(ap);
}

typedef struct hk_tc hk_tc; /* the toolchain of a context: options, the compiler's identity */

/* A loaded module, as the others read it. */
typedef struct hk_mview {
  const char *name;
  void *dl;
  bool check;  /* kernel_check or DV_BUILD_DEBUG */
  /* Compiled for the access checks (kernel_check=on: it defines
   * dv__access_checked); its segments and thread-locals' block (PT_TLS, per
   * thread) once hk_module_segments found them. */
  bool access;
  int nseg;
  uintptr_t seg_lo[8], seg_hi[8];
  size_t tls_bytes;
  size_t cbytes; /* its constant buffer's bytes */
  dv__hthread **(*self_slot)(void);
} hk_mview;

/* A kernel of a loaded module, as the others read it. */
typedef struct hk_kview {
  const hk_mview *m;
  const char *name;
  void (*fn)(void);  /* one simulated thread */
  void (*blk)(void); /* the block function (fast mode; NULL: none) */
  void (*fis)(void); /* the fission function (fast mode; NULL: none; fission/) */
  const char *sig;   /* the module's dv__sig_<name>: the parameter list as written */
} hk_kview;

const hk_kview *hk_kernel_view(const dv_bkernel *kn);
const hk_mview *hk_module_view(const dv_bmodule *m);

/* ---- open and close; the backend table's methods (host.c) ---- */
/* rt: the runtime every module's dv__rt is set to at load. */
dv_status hk_tc_open(const dv_backend_config *cfg, const dv__host_rt *rt, hk_tc **out);
void hk_tc_close(hk_tc *t);
dv_status hk_kernel_target_id(hk_tc *t, char *buf, size_t cap);
dv_status hk_module_build(hk_tc *t, const dv_build_req *req, dv_bmodule **out, void **image,
                          size_t *image_size, char **log);
dv_status hk_module_load(hk_tc *t, const dv_build_req *req, const void *image,
                         size_t image_size, dv_bmodule **out, char **log);
dv_status hk_module_unload(hk_tc *t, dv_bmodule *m);
dv_status hk_kernel_get(hk_tc *t, dv_bmodule *m, const char *name, dv_bkernel **out);
dv_status hk_kernel_params(hk_tc *t, dv_bkernel *kn, dv_bparam *out, size_t cap, size_t *n,
                           const char **sig);
/* A module's constant buffer (*buf, *bytes); returns the module's name. */
const char *hk_module_constants(const dv_bmodule *m, unsigned char **buf, size_t *bytes);

/* ---- for exec/ and the checks ---- */
/* Parameter i (0-based) of a kernel's exported parameter list, blanks
 * trimmed, into buf (messages). */
void hk_param_text(const char *sig, int i, char *buf, size_t cap);
/* The module's segments (hk_mview.nseg, seg_lo/hi, tls_bytes), found once,
 * and its dv__rt set to rt (the access checks' runtime); an error when they
 * cannot be found. */
dv_status hk_module_segments(const hk_mview *m, const dv__host_rt *rt);
/* ---- lines.c ---- */
/* "file:line" of return address pc in module m (the user's file, as the
 * program names it), into buf: the line of the call before it (the access
 * hooks', the runtime's callers); where the line cannot be found, the
 * module and the offset ("prog.dvk+0x1f0"), or the object and symbol
 * outside it.  Answers are cached per module; the first for an address
 * runs addr2line (report time only).  Thread-safe; blocks while it runs. */
void hk_line_of(const hk_mview *m, const void *pc, char *buf, size_t cap);
/* The same for an interrupted pc (a signal's): the instruction at pc. */
void hk_line_of_pc(const hk_mview *m, const void *pc, char *buf, size_t cap);
/* The addresses of m's code (its executable segment), found once; false:
 * not found (*lo = *hi = 0). */
bool hk_module_text(const hk_mview *m, uintptr_t *lo, uintptr_t *hi);

#endif
