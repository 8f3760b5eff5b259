/*
 * NVRTC loaded at run time (nvrtc.h).  Each library name is loaded once and
 * kept for the life of the process (NVRTC keeps global state; unloading it
 * while another context compiles would be unsafe).
 */
#include "nvrtc.h"

#include <ctype.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/core.h"

typedef struct dv_nvrtc_entry {
  struct dv_nvrtc_entry *next;
  char key[256]; /* the option's value ("" : the default search) */
  dv_nvrtc nv;
} dv_nvrtc_entry;

static pthread_mutex_t dv__nvrtc_lock = PTHREAD_MUTEX_INITIALIZER;
static dv_nvrtc_entry *dv__nvrtc_loaded;

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

dv_status dv__nvrtc_load(const char *library, const dv_nvrtc **out) {
  *out = NULL;
  const char *key = library ? library : "";
  if (strlen(key) >= sizeof((dv_nvrtc_entry *)0)->key)
    return dv__error(DV_ERR_INVALID_ARGUMENT, "nvrtc_library: the name is too long");
  pthread_mutex_lock(&dv__nvrtc_lock);
  for (dv_nvrtc_entry *e = dv__nvrtc_loaded; e; e = e->next)
    if (strcmp(e->key, key) == 0) {
      pthread_mutex_unlock(&dv__nvrtc_lock);
      *out = &e->nv;
      return DV_OK;
    }
  const char *defaults[] = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"};
  const char *one[1] = {key};
  const char **names = *key ? one : defaults;
  size_t nnames = *key ? 1 : sizeof defaults / sizeof *defaults;
  char tried[1536] = "";
  size_t k = 0;
  void *lib = NULL;
  const char *name = NULL;
  for (size_t i = 0; i < nnames && !lib; i++) {
    lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (lib) {
      name = names[i];
    } else if (k < sizeof tried) {
      const char *why = dlerror();
      k += (size_t)snprintf(tried + k, sizeof tried - k, "%s  %s: %s", k ? "\n" : "", names[i],
                            why ? why : "cannot be opened");
    }
  }
  if (!lib) {
    pthread_mutex_unlock(&dv__nvrtc_lock);
    return dv__error(DV_ERR_NO_COMPILER,
                     "NVRTC not found: CUDA kernels are compiled at run time by NVRTC (the CUDA "
                     "toolkit's libnvrtc, or the nvidia-cuda-nvrtc package); tried:\n%s\n"
                     "Install it, add its directory to LD_LIBRARY_PATH, or name the file with the "
                     "nvrtc_library option (DV_NVRTC_LIBRARY)", tried);
  }
  dv_nvrtc_entry *e = dv__calloc(1, sizeof *e);
  if (!e) {
    dlclose(lib);
    pthread_mutex_unlock(&dv__nvrtc_lock);
    return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate the NVRTC record");
  }
  e->nv.lib = lib;
  const char *missing = NULL;
  if (!dv__nvrtc_resolve(&e->nv, &missing)) {
    dlclose(lib);
    dv__free(e);
    pthread_mutex_unlock(&dv__nvrtc_lock);
    return dv__error(DV_ERR_NO_COMPILER,
                     "NVRTC %s lacks the entry point %s (devarray needs NVRTC 11.1 or later, "
                     "which emits CUBIN)", name, missing);
  }
  snprintf(e->key, sizeof e->key, "%s", key);
  snprintf(e->nv.name, sizeof e->nv.name, "%s", name);
  dv__nvrtc_describe(&e->nv);
  e->next = dv__nvrtc_loaded;
  dv__nvrtc_loaded = e;
  pthread_mutex_unlock(&dv__nvrtc_lock);
  dv__log(DV_LOG_DEBUG, "NVRTC %d.%d loaded from %s (%d architectures)", e->nv.major,
          e->nv.minor, name, e->nv.narchs);
  *out = &e->nv;
  return DV_OK;
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
  if (flags & DV_BUILD_DEBUG) {
    opts[nopts++] = "-G";
    opts[nopts++] = "-lineinfo";
  }
  for (char *p = uopts; *p;) {
    while (*p && isspace((unsigned char)*p)) *p++ = 0;
    if (!*p) break;
    if (nopts == DV__NVRTC_MAXOPTS) {
      dv__free(uopts);
      return dv__error(DV_ERR_INVALID_ARGUMENT, "program %s: more than %d NVRTC options", name,
                       DV__NVRTC_MAXOPTS - 4);
    }
    opts[nopts++] = p;
    while (*p && !isspace((unsigned char)*p)) p++;
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
      size_t k = (size_t)snprintf(head, sizeof head, "NVRTC %d.%d rejected an option:", nv->major,
                                  nv->minor);
      for (int i = 0; i < nopts && k < sizeof head; i++)
        k += (size_t)snprintf(head + k, sizeof head - k, " %s", opts[i]);
      if (k < sizeof head) snprintf(head + k, sizeof head - k, "\n");
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
