/*
 * hipRTC loaded at run time (hiprtc.h).  The library is opened with the
 * loader the backends share (../dynlib.c), once per request, and kept for
 * the life of the process; the strided-copy kernels are compiled once per
 * gfx target and kept likewise.
 */
#include "hiprtc.h"

#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/core.h"
#include "../backend.h"
#include "../dynlib.h"
#include "../rtcopts.h"

/* ---- loading ---------------------------------------------------------------------------- */

typedef struct dv_hiprtc_entry {
  struct dv_hiprtc_entry *next;
  dv_hiprtc rtc;
} dv_hiprtc_entry;

static pthread_mutex_t hiprtc_lock = PTHREAD_MUTEX_INITIALIZER;
static dv_hiprtc_entry *hiprtc_loaded;

/* Try one file: an entry with every entry point, or NULL with `why`. */
static dv_hiprtc_entry *hiprtc_try(const char *key, const char *file, char *why, size_t cap,
                                   bool *oom) {
  dv_hiprtc_entry *e = dv__calloc(1, sizeof *e);
  if (!e) {
    *oom = true;
    snprintf(why, cap, "cannot allocate the hipRTC record");
    return NULL;
  }
#define DV_HIPRTC(ret, name, params) {#name, NULL, (void **)&e->rtc.api.name, 0},
  const dv_dynsym syms[] = {
#include "hiprtc_symbols.def"
  };
#undef DV_HIPRTC
  const char *which = NULL;
  const char *names[1] = {file};
  char msg[512] = "";
  dv_status rc = dv__dynlib_open("hipRTC", names, 1, syms, sizeof syms / sizeof *syms, &e->rtc.lib,
                                 &which, msg, sizeof msg);
  if (rc) {
    /* A library without hipRTC stays loaded (dynlib.h): it is the runtime,
     * or a file the process may load again. */
    snprintf(why, cap, "%s", msg);
    dv__free(e);
    return NULL;
  }
  snprintf(e->rtc.key, sizeof e->rtc.key, "%s", key);
  snprintf(e->rtc.file, sizeof e->rtc.file, "%s", file);
  if (e->rtc.api.hiprtcVersion(&e->rtc.major, &e->rtc.minor) != DV_HIPRTC_SUCCESS)
    e->rtc.major = e->rtc.minor = 0;
  return e;
}

dv_status dv__hiprtc_load(const char *library, const char *runtime, const dv_hiprtc **out) {
  *out = NULL;
  const char *key = library ? library : "";
  if (strlen(key) >= sizeof((dv_hiprtc *)0)->key ||
      (runtime && strlen(runtime) >= sizeof((dv_hiprtc *)0)->file))
    return dv__error(DV_ERR_INVALID_ARGUMENT, "hiprtc_library: the name is too long");
  pthread_mutex_lock(&hiprtc_lock);
  for (dv_hiprtc_entry *e = hiprtc_loaded; e; e = e->next)
    if (strcmp(e->rtc.key, key) == 0) {
      pthread_mutex_unlock(&hiprtc_lock);
      *out = &e->rtc;
      return DV_OK;
    }
  /* ROCm 6: libhiprtc; ROCm 5: inside the runtime. */
  const char *list[5];
  size_t n = 0;
  if (*key) {
    list[n++] = key;
  } else {
    list[n++] = "libhiprtc.so.6";
    list[n++] = "libhiprtc.so";
    if (runtime && *runtime) {
      list[n++] = runtime;
    } else {
      list[n++] = "libamdhip64.so";
      list[n++] = "libamdhip64.so.5";
    }
  }
  char tried[2048] = "";
  size_t k = 0;
  bool oom = false;
  for (size_t i = 0; i < n; i++) {
    char why[600];
    dv_hiprtc_entry *e = hiprtc_try(key, list[i], why, sizeof why, &oom);
    if (e) {
      e->next = hiprtc_loaded;
      hiprtc_loaded = e;
      pthread_mutex_unlock(&hiprtc_lock);
      dv__log(DV_LOG_DEBUG, "hipRTC %d.%d loaded from %s", e->rtc.major, e->rtc.minor, list[i]);
      *out = &e->rtc;
      return DV_OK;
    }
    if (k < sizeof tried)
      k += (size_t)snprintf(tried + k, sizeof tried - k, "\n  %s: %s", list[i], why);
    if (oom) break;
  }
  pthread_mutex_unlock(&hiprtc_lock);
  if (oom) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate the hipRTC record");
  return dv__error(DV_ERR_NO_COMPILER,
                   "hipRTC not found: HIP kernels are compiled at run time by hipRTC (ROCm 6's "
                   "libhiprtc.so.6, inside libamdhip64.so.5 on ROCm 5); tried:%s\nInstall it, add "
                   "its directory to LD_LIBRARY_PATH, or name the file with the hiprtc_library "
                   "option",
                   tried);
}

bool dv__hiprtc_processor(const char *arch, char *buf, size_t cap) {
  if (cap) buf[0] = 0;
  if (!arch || strncmp(arch, "gfx", 3) != 0) return false;
  size_t n = 3;
  while (arch[n] && arch[n] != ':') {
    if (!isalnum((unsigned char)arch[n])) return false;
    n++;
  }
  if (n < 5 || n > 9 || n >= cap) return false;
  memcpy(buf, arch, n);
  buf[n] = 0;
  return true;
}

/* ---- compiling -------------------------------------------------------------------------- */

void dv__hiprtc_out_free(dv_hiprtc_out *out) {
  if (!out) return;
  dv__free(out->image);
  dv__free(out->log);
  memset(out, 0, sizeof *out);
}

/* The program's log (NULL when empty), with `head` in front when given. */
static char *hiprtc_log(const dv_hiprtc *rtc, dv_hiprtcProgram prog, const char *head) {
  size_t n = 0, h = head ? strlen(head) : 0;
  if (rtc->api.hiprtcGetProgramLogSize(prog, &n) != DV_HIPRTC_SUCCESS) n = 0;
  if (n <= 1 && !h) return NULL;
  char *log = dv__malloc(h + n + 1);
  if (!log) return NULL;
  if (h) memcpy(log, head, h);
  log[h] = 0;
  if (n > 1 && rtc->api.hiprtcGetProgramLog(prog, log + h) != DV_HIPRTC_SUCCESS) log[h] = 0;
  log[h + n] = 0;
  return log;
}

#define DV__HIPRTC_MAXOPTS 128

dv_status dv__hiprtc_compile(const dv_hiprtc *rtc, const char *name, const char *source,
                             const char *arch, unsigned flags, const char *user_options,
                             dv_hiprtc_out *out) {
  memset(out, 0, sizeof *out);
  char arch_opt[96];
  snprintf(arch_opt, sizeof arch_opt, "--gpu-architecture=%s", arch);
  char *copy = dv__strdup(user_options ? user_options : "");
  if (!copy) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot copy the hipRTC options");
  const char *opts[DV__HIPRTC_MAXOPTS];
  int nopts = 0;
  opts[nopts++] = arch_opt;
  if (flags & DV_BUILD_DEBUG) {
    opts[nopts++] = "-O0";
    opts[nopts++] = "-g";
  } else {
    opts[nopts++] = "-O3";
  }
  const int fixed = nopts;
  if (!dv__rtc_split_options(copy, opts, &nopts, DV__HIPRTC_MAXOPTS)) {
    dv__free(copy);
    return dv__error(DV_ERR_INVALID_ARGUMENT, "program %s: more than %d hipRTC options", name,
                     DV__HIPRTC_MAXOPTS - fixed);
  }
  const dv_hiprtc_api *f = &rtc->api;
  dv_hiprtcProgram prog = NULL;
  dv_hiprtcResult r = f->hiprtcCreateProgram(&prog, source, name, 0, NULL, NULL);
  if (r != DV_HIPRTC_SUCCESS) {
    dv__free(copy);
    const char *es = f->hiprtcGetErrorString(r);
    return dv__error(r == DV_HIPRTC_ERROR_OUT_OF_MEMORY ? DV_ERR_HOST_OUT_OF_MEMORY : DV_ERR_DRIVER,
                     "hiprtcCreateProgram failed for %s: %s (%d)", name, es ? es : "?", r);
  }
  r = f->hiprtcCompileProgram(prog, nopts, opts);
  const char *es = f->hiprtcGetErrorString(r);
  if (!es) es = "?";
  dv_status rc = DV_OK;
  if (r == DV_HIPRTC_ERROR_COMPILATION || r == DV_HIPRTC_ERROR_INVALID_OPTION) {
    char head[2048] = "";
    if (r == DV_HIPRTC_ERROR_INVALID_OPTION)
      dv__rtc_rejected_note(head, sizeof head, "hipRTC", rtc->major, rtc->minor, opts, nopts);
    out->log = hiprtc_log(rtc, prog, head[0] ? head : NULL);
    rc = dv__error(DV_ERR_COMPILE, "hipRTC could not compile %s for %s: %s", name, arch, es);
  } else if (r != DV_HIPRTC_SUCCESS) {
    out->log = hiprtc_log(rtc, prog, NULL);
    rc = dv__error(r == DV_HIPRTC_ERROR_OUT_OF_MEMORY ? DV_ERR_HOST_OUT_OF_MEMORY : DV_ERR_DRIVER,
                   "hiprtcCompileProgram failed for %s: %s (%d)", name, es, r);
  } else {
    out->log = hiprtc_log(rtc, prog, NULL);
    size_t n = 0;
    r = f->hiprtcGetCodeSize(prog, &n);
    if (r != DV_HIPRTC_SUCCESS || n == 0) {
      rc = dv__error(DV_ERR_DRIVER, "hipRTC returned no code object for %s (%d)", name, r);
    } else if (!(out->image = dv__malloc(n + 1))) {
      rc = dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate %zu bytes for a compiled kernel", n);
    } else if ((r = f->hiprtcGetCode(prog, out->image)) != DV_HIPRTC_SUCCESS) {
      rc = dv__error(DV_ERR_DRIVER, "hipRTC could not return the code object of %s (%d)", name, r);
    } else if (n < 4 || memcmp(out->image, "\x7f" "ELF", 4) != 0) {
      rc = dv__error(DV_ERR_DRIVER, "hipRTC returned %zu bytes for %s that are not an ELF code object",
                     n, name);
    } else {
      ((char *)out->image)[n] = 0;
      out->size = n;
    }
  }
  f->hiprtcDestroyProgram(&prog);
  dv__free(copy);
  if (rc) {
    dv__free(out->image);
    out->image = NULL;
    out->size = 0;
  }
  return rc;
}

/* ---- the strided-copy kernels ------------------------------------------------------------- */

typedef struct dv_hiprtc_copy {
  struct dv_hiprtc_copy *next;
  const dv_hiprtc *rtc;
  char arch[64];
  dv_hiprtc_out out;
} dv_hiprtc_copy;

static pthread_mutex_t hiprtc_copy_lock = PTHREAD_MUTEX_INITIALIZER;
static dv_hiprtc_copy *hiprtc_copies;

dv_status dv__hiprtc_copy_image(const dv_hiprtc *rtc, const char *arch, const void **image,
                                size_t *size) {
  *image = NULL;
  *size = 0;
  if (strlen(arch) >= sizeof((dv_hiprtc_copy *)0)->arch)
    return dv__error(DV_ERR_INVALID_ARGUMENT, "gfx target name too long: %s", arch);
  /* Held while compiling: two contexts of one target compile it once. */
  pthread_mutex_lock(&hiprtc_copy_lock);
  for (dv_hiprtc_copy *c = hiprtc_copies; c; c = c->next)
    if (c->rtc == rtc && strcmp(c->arch, arch) == 0) {
      *image = c->out.image;
      *size = c->out.size;
      pthread_mutex_unlock(&hiprtc_copy_lock);
      return DV_OK;
    }
  static const char line[] = "\n#line 1 \"copy_kernels.dvk\"\n";
  size_t n = strlen(dv__kernel_header) + sizeof line + strlen(dv__copy_kernels_source);
  char *tu = dv__malloc(n);
  dv_hiprtc_copy *c = dv__calloc(1, sizeof *c);
  dv_status rc = DV_OK;
  if (!tu || !c) {
    rc = dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate the copy kernels' source");
  } else {
    snprintf(tu, n, "%s%s%s", dv__kernel_header, line, dv__copy_kernels_source);
    rc = dv__hiprtc_compile(rtc, "copy_kernels.dvk", tu, arch, 0, "", &c->out);
  }
  if (rc) {
    if (c && c->out.log) dv__log(DV_LOG_DEBUG, "hipRTC log of the copy kernels:\n%s", c->out.log);
    if (c) dv__hiprtc_out_free(&c->out);
    dv__free(c);
  } else {
    dv__free(c->out.log); /* warnings only: nothing to keep */
    c->out.log = NULL;
    c->rtc = rtc;
    snprintf(c->arch, sizeof c->arch, "%s", arch);
    c->next = hiprtc_copies;
    hiprtc_copies = c;
    *image = c->out.image;
    *size = c->out.size;
  }
  pthread_mutex_unlock(&hiprtc_copy_lock);
  dv__free(tu);
  return rc;
}

/* ---- the HIP driver's kernel operations (../cudafam/fam_kernel.c calls them) ------------- */

#include "hip_internal.h"

/* hipRTC for this context, and its gfx target (checked). */
static dv_status hipk_rtc(cu_state *st, const dv_hiprtc **rtc) {
  char proc[16];
  if (!dv__hiprtc_processor(DV_HIP_CTX(st)->arch, proc, sizeof proc))
    return dv__error(DV_ERR_NO_COMPILER,
                     "HIP: the device's gfx target is %s%s%s, so kernels cannot be compiled for it "
                     "(name it with the hip_arch option, e.g. gfx90a)",
                     DV_HIP_CTX(st)->arch[0] ? "\"" : "unknown", DV_HIP_CTX(st)->arch, DV_HIP_CTX(st)->arch[0] ? "\", not a gfx name" : "");
  /* On a ROCm 5 runtime, its own hipRTC first: a ROCm 6 libhiprtc found
   * beside it would bring a second runtime and a compiler of another ROCm. */
  const char *lib = DV_HIP_CTX(st)->rtc_library;
  if (!lib[0] && DV_HIP_CTX(st)->rocm_major == 5 && DV_HIP_CTX(st)->runtime_library[0]) lib = DV_HIP_CTX(st)->runtime_library;
  return dv__hiprtc_load(lib, DV_HIP_CTX(st)->runtime_library, rtc);
}

static dv_status hipk_target_id(cu_state *st, char *buf, size_t cap) {
  const dv_hiprtc *rtc = NULL;
  dv_status rc = hipk_rtc(st, &rtc);
  if (rc) return rc;
  snprintf(buf, cap, "hip %s runtime %d hiprtc %d.%d %s", DV_HIP_CTX(st)->arch, st->driver_version, rtc->major,
           rtc->minor, rtc->file);
  return DV_OK;
}

static dv_status hipk_compile(cu_state *st, const dv_build_req *req, void **image, size_t *size, int *kind,
                              char **log) {
  *kind = DV_CU_IMAGE_HSACO;
  *image = NULL;
  *size = 0;
  *log = NULL;
  const dv_hiprtc *rtc = NULL;
  dv_status rc = hipk_rtc(st, &rtc);
  if (rc) return rc;
  dv_hiprtc_out o;
  rc = dv__hiprtc_compile(rtc, req->name, req->source, DV_HIP_CTX(st)->arch, req->flags, req->options, &o);
  *log = o.log;
  if (!rc) {
    *image = o.image;
    *size = o.size;
  } else {
    dv__free(o.image);
  }
  return rc;
}

static dv_status hipk_copy_image(cu_state *st, const void **image, size_t *size, int *kind) {
  *kind = DV_CU_IMAGE_HSACO;
  const dv_hiprtc *rtc = NULL;
  dv_status rc = hipk_rtc(st, &rtc);
  if (rc) return rc;
  return dv__hiprtc_copy_image(rtc, DV_HIP_CTX(st)->arch, image, size);
}

/* AMD's limits: LDS is 64 KiB per work-group on CDNA and RDNA (the runtime
 * reports it; 64 KiB where it does not), all of it without an opt-in; the
 * wave size is the device's (64 on CDNA, 32 on RDNA), read from the same
 * attribute as CUDA's warp size. */
static void hipk_limits(cu_state *st, dv_klimits *L) {
  (void)st;
  if (L->max_shared_per_block == 0) L->max_shared_per_block = 65536;
  L->max_shared_per_block_optin = L->max_shared_per_block;
  if (L->wave_size < 1) L->wave_size = 64;
  L->max_arg_bytes = 4096;
}

const struct dv_cu_kernel_ops dv__hip_kernel_ops = {
    .image_kinds = 1u << DV_CU_IMAGE_HSACO,
    .target_id = hipk_target_id,
    .compile = hipk_compile,
    .copy_image = hipk_copy_image,
    .limits = hipk_limits,
    .no_shared_optin = 1,
};
