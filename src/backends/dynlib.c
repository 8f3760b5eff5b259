/* Loading a driver library and its entry points (dynlib.h). */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "dynlib.h"

dv_status dv__dynlib_open(const char *what, const char *const *names, size_t nnames,
                          const dv_dynsym *syms, size_t nsyms, void **lib, const char **which,
                          char *msg, size_t cap) {
  *lib = NULL;
  *which = NULL;
  char err[256] = ""; /* the first name's reason: the one a user looks for */
  for (size_t i = 0; i < nnames && !*lib; i++) {
    *lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (*lib) {
      *which = names[i];
    } else if (i == 0) {
      const char *e = dlerror();
      snprintf(err, sizeof err, "%s", e ? e : "not found");
    }
  }
  if (!*lib) {
    size_t k = (size_t)snprintf(msg, cap, "no %s: ", what);
    for (size_t i = 0; i < nnames && k < cap; i++)
      k += (size_t)snprintf(msg + k, cap - k, "%s%s", i ? (i + 1 == nnames ? " or " : ", ") : "", names[i]);
    if (k < cap)
      snprintf(msg + k, cap - k, " could not be loaded (%s)", err);
    return DV_ERR_LIBRARY_LOAD;
  }
  for (size_t i = 0; i < nsyms; i++) {
    void *p = dlsym(*lib, syms[i].name);
    if (!p && syms[i].alt) p = dlsym(*lib, syms[i].alt);
    *syms[i].slot = p;
    if (!p && !syms[i].optional) {
      snprintf(msg, cap, "%s lacks the entry point %s (%s too old?)", *which, syms[i].name, what);
      return DV_ERR_SYMBOL_LOAD;
    }
  }
  return DV_OK;
}
