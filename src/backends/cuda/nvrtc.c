/*
 * NVRTC loaded at run time (nvrtc.h).  Each library name is loaded once and
 * kept for the life of the process (NVRTC keeps global state; unloading it
 * while another context compiles would be unsafe).
 */
#include "nvrtc.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/core.h"
#include "../rtcopts.h"

/* One loaded library, found again by the name it was opened with (nv.name):
 * a search tries names in turn, so the same file named twice is one record
 * only where the name is the same (dlopen returns the same handle anyway). */
typedef struct dv_nvrtc_entry {
  struct dv_nvrtc_entry *next;
  dv_nvrtc nv;
} dv_nvrtc_entry;

static pthread_mutex_t dv__nvrtc_lock = PTHREAD_MUTEX_INITIALIZER;
static dv_nvrtc_entry *dv__nvrtc_loaded;

/* NVRTC majors the default search names: 11 is the oldest devarray can use
 * (11.1 emits CUBIN); without a driver version it starts at 13. */
#define DV__NVRTC_OLDEST_MAJOR 11
#define DV__NVRTC_NEWEST_MAJOR 13
/* At most this many versioned names (a driver far ahead of the oldest). */
#define DV__NVRTC_MAX_NAMES 8

static int dv__int_cmp(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

/* Resolve the entry points of an opened library; false names the missing one. */
static bool dv__nvrtc_resolve(dv_nvrtc *nv, const char **missing) {
#define DV_NVRTC(ret, name, params, optional)          \
  *(void **)&nv->api.name = dlsym(nv->lib, #name);     \
  if (!nv->api.name && !(optional)) {                  \
    *missing = #name;                                  \
    return false;                                      \
  }
#include "nvrtc_symbols.def"
#undef DV_NVRTC
  return true;
}

static void dv__nvrtc_describe(dv_nvrtc *nv) {
  nv->major = nv->minor = 0;
  nv->api.nvrtcVersion(&nv->major, &nv->minor);
  nv->narchs = 0;
  int n = 0;
  if (nv->api.nvrtcGetNumSupportedArchs && nv->api.nvrtcGetSupportedArchs &&
      nv->api.nvrtcGetNumSupportedArchs(&n) == DV_NVRTC_SUCCESS && n > 0) {
    int *a = dv__calloc((size_t)n, sizeof *a);
    if (a && nv->api.nvrtcGetSupportedArchs(a) == DV_NVRTC_SUCCESS) {
      qsort(a, (size_t)n, sizeof *a, dv__int_cmp);
      /* Keep the newest ones if there were ever more than we hold. */
      int first = n > DV_NVRTC_MAX_ARCHS ? n - DV_NVRTC_MAX_ARCHS : 0;
      for (int i = first; i < n; i++) nv->archs[nv->narchs++] = a[i];
    }
    dv__free(a);
  }
}

/* Append "  name: why" to the list of what was tried. */
static void dv__nvrtc_tried(char *tried, size_t cap, size_t *k, const char *name, const char *why) {
  if (*k >= cap) return;
  *k += (size_t)snprintf(tried + *k, cap - *k, "%s  %s: %s", *k ? "\n" : "", name, why);
}

/* The record for `name`: the one loaded before, or a new one.  Under the
 * lock.  NULL with `why` filled when it cannot be opened or is not NVRTC
 * (*missing: the entry point it lacks), or when memory ran out (*oom). */
static dv_nvrtc_entry *dv__nvrtc_open(const char *name, char *why, size_t cap, const char **missing,
                                      bool *oom) {
  *missing = NULL;
  for (dv_nvrtc_entry *e = dv__nvrtc_loaded; e; e = e->next)
    if (strcmp(e->nv.name, name) == 0) return e;
  void *lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char *err = dlerror();
    snprintf(why, cap, "%s", err ? err : "cannot be opened");
    return NULL;
  }
  dv_nvrtc_entry *e = dv__calloc(1, sizeof *e);
  if (!e) {
    dlclose(lib);
    snprintf(why, cap, "cannot allocate the NVRTC record");
    *oom = true;
    return NULL;
  }
  e->nv.lib = lib;
  if (!dv__nvrtc_resolve(&e->nv, missing)) {
    snprintf(why, cap, "lacks the entry point %s", *missing);
    dlclose(lib);
    dv__free(e);
    return NULL;
  }
  snprintf(e->nv.name, sizeof e->nv.name, "%s", name);
  dv__nvrtc_describe(&e->nv);
  e->next = dv__nvrtc_loaded;
  dv__nvrtc_loaded = e;
  dv__log(DV_LOG_DEBUG, "NVRTC %d.%d loaded from %s (%d architectures)", e->nv.major, e->nv.minor,
          name, e->nv.narchs);
  return e;
}

dv_status dv__nvrtc_load(const char *library, int driver_version, const dv_nvrtc **out) {
  *out = NULL;
  const char *key = library ? library : "";
  if (strlen(key) >= sizeof((dv_nvrtc *)0)->name)
    return dv__error(DV_ERR_INVALID_ARGUMENT, "nvrtc_library: the name is too long");
  int dmajor = driver_version > 0 ? driver_version / 1000 : 0;
  /* The names to try: the option's one, or libnvrtc.so.<driver's major>,
   * the majors below it down to the oldest usable, then libnvrtc.so. */
  char names[DV__NVRTC_MAX_NAMES + 1][32];
  const char *list[DV__NVRTC_MAX_NAMES + 1];
  size_t nnames = 0;
  if (*key) {
    list[nnames++] = key;
  } else {
    int top = dmajor ? dmajor : DV__NVRTC_NEWEST_MAJOR;
    for (int m = top; m >= DV__NVRTC_OLDEST_MAJOR && nnames < DV__NVRTC_MAX_NAMES; m--) {
      snprintf(names[nnames], sizeof names[nnames], "libnvrtc.so.%d", m);
      list[nnames] = names[nnames];
      nnames++;
    }
    list[nnames++] = "libnvrtc.so";
  }
  char tried[1536] = "";
  size_t k = 0;
  const dv_nvrtc *newer = NULL; /* the first one refused as newer than the driver */
  const char *missing = NULL;
  bool oom = false;
  pthread_mutex_lock(&dv__nvrtc_lock);
  for (size_t i = 0; i < nnames; i++) {
    char why[512];
    dv_nvrtc_entry *e = dv__nvrtc_open(list[i], why, sizeof why, &missing, &oom);
    if (!e) {
      dv__nvrtc_tried(tried, sizeof tried, &k, list[i], why);
      continue;
    }
    /* A driver cannot load what a newer NVRTC major emits (NVRTC 13: PTX
     * ISA 9.0 and a CUBIN ABI that 12.x drivers refuse).  Checked on every
     * call, cached record or not: the driver is the context's. */
    if (dmajor && e->nv.major > dmajor) {
      snprintf(why, sizeof why, "NVRTC %d.%d, newer than the driver", e->nv.major, e->nv.minor);
      dv__nvrtc_tried(tried, sizeof tried, &k, list[i], why);
      if (!newer) newer = &e->nv;
      continue;
    }
    pthread_mutex_unlock(&dv__nvrtc_lock);
    *out = &e->nv;
    return DV_OK;
  }
  pthread_mutex_unlock(&dv__nvrtc_lock);
  if (oom) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate the NVRTC record");
  if (newer) {
    /* pip: nvidia-cuda-nvrtc-cu11 / -cu12; from 13 on one name, versioned. */
    char pkg[64];
    if (dmajor <= 12) snprintf(pkg, sizeof pkg, "nvidia-cuda-nvrtc-cu%d", dmajor);
    else snprintf(pkg, sizeof pkg, "nvidia-cuda-nvrtc==%d.*", dmajor);
    return dv__error(DV_ERR_NO_COMPILER,
                     "NVRTC %d.%d (%s) is newer than the CUDA driver (%d.%d), which cannot load "
                     "the code it emits%s%s\nInstall NVRTC %d or older (the CUDA toolkit's "
                     "libnvrtc.so.%d, or the pip package %s) and name it with the nvrtc_library "
                     "option (DV_NVRTC_LIBRARY), or update the driver",
                     newer->major, newer->minor, newer->name, dmajor, (driver_version % 1000) / 10,
                     *key ? "" : "; tried:\n", *key ? "" : tried, dmajor, dmajor, pkg);
  }
  if (*key && missing)
    return dv__error(DV_ERR_NO_COMPILER,
                     "NVRTC %s lacks the entry point %s (devarray needs NVRTC 11.1 or later, "
                     "which emits CUBIN)", key, missing);
  return dv__error(DV_ERR_NO_COMPILER,
                   "NVRTC not found: CUDA kernels are compiled at run time by NVRTC (the CUDA "
                   "toolkit's libnvrtc, or the nvidia-cuda-nvrtc package); tried:\n%s\n"
                   "Install it, add its directory to LD_LIBRARY_PATH, or name the file with the "
                   "nvrtc_library option (DV_NVRTC_LIBRARY)", tried);
}

dv_status dv__nvrtc_target(const dv_nvrtc *nv, int cc, char *arch, size_t cap, int *is_ptx) {
  *is_ptx = 0;
  if (nv->narchs == 0) { /* cannot tell: trust the device's own architecture */
    snprintf(arch, cap, "sm_%d", cc);
    return DV_OK;
  }
  int lo = nv->archs[0], hi = nv->archs[nv->narchs - 1];
  if (cc < lo)
    return dv__error(DV_ERR_NO_COMPILER,
                     "NVRTC %d.%d (%s) cannot compile for compute capability %d.%d: its oldest "
                     "architecture is sm_%d; use an older NVRTC (nvrtc_library option)",
                     nv->major, nv->minor, nv->name, cc / 10, cc % 10, lo);
  for (int i = 0; i < nv->narchs; i++)
    if (nv->archs[i] == cc) {
      snprintf(arch, cap, "sm_%d", cc);
      return DV_OK;
    }
  /* Newer than NVRTC, or between its architectures: PTX of the newest
   * architecture below the device, compiled by the driver at load. */
  int best = lo;
  for (int i = 0; i < nv->narchs; i++)
    if (nv->archs[i] <= cc) best = nv->archs[i];
  if (cc > hi) best = hi;
  snprintf(arch, cap, "compute_%d", best);
  *is_ptx = 1;
  return DV_OK;
}

void dv__nvrtc_out_free(dv_nvrtc_out *out) {
  if (!out) return;
  dv__free(out->image);
  dv__free(out->log);
  memset(out, 0, sizeof *out);
}

/* A copy of the program's log, or NULL when it is empty. */
static char *dv__nvrtc_log(const dv_nvrtc *nv, dv_nvrtcProgram prog) {
  size_t n = 0;
  if (nv->api.nvrtcGetProgramLogSize(prog, &n) != DV_NVRTC_SUCCESS || n <= 1) return NULL;
  char *log = dv__malloc(n + 1);
  if (!log) return NULL;
  if (nv->api.nvrtcGetProgramLog(prog, log) != DV_NVRTC_SUCCESS) {
    dv__free(log);
    return NULL;
  }
  log[n] = 0;
  return log;
}

/* `text` with "prefix" in front (a new string), or text itself on failure. */
static char *dv__prepend(char *text, const char *prefix) {
  size_t a = strlen(prefix), b = text ? strlen(text) : 0;
  char *s = dv__malloc(a + b + 1);
  if (!s) return text;
  memcpy(s, prefix, a);
  if (b) memcpy(s + a, text, b);
  s[a + b] = 0;
  dv__free(text);
  return s;
}

#define DV__NVRTC_MAXOPTS 128

dv_status dv__nvrtc_compile(const dv_nvrtc *nv, const char *name, const char *source,
                            const char *arch, unsigned flags, const char *user_options,
                            dv_nvrtc_out *out) {
  memset(out, 0, sizeof *out);
  int is_ptx = strncmp(arch, "compute_", 8) == 0;
  char arch_opt[64];
  snprintf(arch_opt, sizeof arch_opt, "--gpu-architecture=%s", arch);
  /* The user's options, split on white space (a private copy to cut up). */
  char *uopts = dv__strdup(user_options ? user_options : "");
  if (!uopts) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot copy the NVRTC options");
  const char *opts[DV__NVRTC_MAXOPTS];
  int nopts = 0;
  opts[nopts++] = arch_opt;
  /* Functions without __device__ (helpers a kernel source declares plainly,
   * as it may on OpenCL and the host) are device functions. */
  opts[nopts++] = "-default-device";
  /* -G alone: with -lineinfo too, ptxas warns on every build that it
   * ignores -lineinfo (NVRTC 13), and -G's debug information has the lines. */
  if (flags & DV_BUILD_DEBUG) opts[nopts++] = "-G";
  const int fixed = nopts;
  if (!dv__rtc_split_options(uopts, opts, &nopts, DV__NVRTC_MAXOPTS)) {
    dv__free(uopts);
    return dv__error(DV_ERR_INVALID_ARGUMENT, "program %s: more than %d NVRTC options", name,
                     DV__NVRTC_MAXOPTS - fixed);
  }

  const dv_nvrtc_api *f = &nv->api;
  dv_nvrtcProgram prog = NULL;
  dv_nvrtcResult r = f->nvrtcCreateProgram(&prog, source, name, 0, NULL, NULL);
  if (r != DV_NVRTC_SUCCESS) {
    dv__free(uopts);
    return dv__error(r == DV_NVRTC_ERROR_OUT_OF_MEMORY ? DV_ERR_HOST_OUT_OF_MEMORY : DV_ERR_DRIVER,
                     "nvrtcCreateProgram failed for %s: %s (%d)", name, f->nvrtcGetErrorString(r), r);
  }
  r = f->nvrtcCompileProgram(prog, nopts, opts);
  out->log = dv__nvrtc_log(nv, prog);
  dv_status rc = DV_OK;
  if (r == DV_NVRTC_ERROR_COMPILATION || r == DV_NVRTC_ERROR_INVALID_OPTION) {
    if (r == DV_NVRTC_ERROR_INVALID_OPTION) {
      /* NVRTC may say nothing more: name the options in the log. */
      char head[2048];
      dv__rtc_rejected_note(head, sizeof head, "NVRTC", nv->major, nv->minor, opts, nopts);
      out->log = dv__prepend(out->log, head);
    }
    rc = dv__error(DV_ERR_COMPILE, "NVRTC could not compile %s for %s: %s", name, arch,
                   f->nvrtcGetErrorString(r));
  } else if (r != DV_NVRTC_SUCCESS) {
    rc = dv__error(r == DV_NVRTC_ERROR_OUT_OF_MEMORY ? DV_ERR_HOST_OUT_OF_MEMORY : DV_ERR_DRIVER,
                   "nvrtcCompileProgram failed for %s: %s (%d)", name, f->nvrtcGetErrorString(r), r);
  } else {
    size_t n = 0;
    r = is_ptx ? f->nvrtcGetPTXSize(prog, &n) : f->nvrtcGetCUBINSize(prog, &n);
    if (r != DV_NVRTC_SUCCESS || n == 0) {
      rc = dv__error(DV_ERR_DRIVER, "NVRTC returned no %s for %s: %s (%d)", is_ptx ? "PTX" : "CUBIN",
                     name, f->nvrtcGetErrorString(r), r);
    } else if (!(out->image = dv__malloc(n + 1))) {
      rc = dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate %zu bytes for a compiled kernel", n);
    } else {
      r = is_ptx ? f->nvrtcGetPTX(prog, out->image) : f->nvrtcGetCUBIN(prog, out->image);
      if (r != DV_NVRTC_SUCCESS) {
        rc = dv__error(DV_ERR_DRIVER, "NVRTC could not return the %s of %s: %s (%d)",
                       is_ptx ? "PTX" : "CUBIN", name, f->nvrtcGetErrorString(r), r);
      } else {
        ((char *)out->image)[n] = 0; /* PTX's size counts its NUL; CUBIN gets a spare one */
        out->size = n;
        out->is_ptx = is_ptx;
      }
    }
  }
  f->nvrtcDestroyProgram(&prog);
  dv__free(uopts);
  if (rc) {
    dv__free(out->image);
    out->image = NULL;
    out->size = 0;
  }
  return rc;
}
