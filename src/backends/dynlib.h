/*
 * Loading a driver library at run time (dynlib.c): dlopen the first of its
 * names that loads, then resolve its entry points from a list.  The CUDA
 * backend (libcuda.so.1 through cudafam/fam_symbols.def) and the HIP backend
 * (libamdhip64.so through hip_symbols.def) build their lists from their
 * X-macro files; nothing links against a driver.
 */
#ifndef DV_BACKENDS_DYNLIB_H
#define DV_BACKENDS_DYNLIB_H
#include <stddef.h>

#include "devarray.h"

/* One entry point: its name; another name with the same prototype, tried
 * where the library lacks the first (NULL: none); where its address goes
 * (NULL when neither is there); whether it may be missing. */
typedef struct dv_dynsym {
  const char *name;
  const char *alt;
  void **slot;
  int optional;
} dv_dynsym;

/*
 * dlopen (RTLD_NOW | RTLD_LOCAL) the first of names[0..nnames) that loads,
 * then fill every slot of syms[0..nsyms).  `what` names the library in
 * messages ("CUDA driver": "no CUDA driver: ...").  On DV_OK *lib is the handle and *which the
 * name that loaded.  DV_ERR_LIBRARY_LOAD: none loaded (msg: the names tried
 * and the loader's reason).  DV_ERR_SYMBOL_LOAD: a required entry point is
 * missing (msg names it and the library); *lib and *which are set all the
 * same and the library stays loaded (not every driver survives dlclose).
 * msg (cap bytes) is written on failure only.  Not thread-safe: callers run
 * it once (pthread_once).  Sets no thread error detail.
 */
dv_status dv__dynlib_open(const char *what, const char *const *names, size_t nnames,
                          const dv_dynsym *syms, size_t nsyms, void **lib, const char **which,
                          char *msg, size_t cap);

#endif
