/*
 * Source lines of a module's code addresses (issue 24: access checks and
 * the watchdog name `file:line`).  PLACEHOLDER while the real one is built
 * on its own branch: it names the module and the offset only.
 */
#include <dlfcn.h>

#include "host_kernel_internal.h"

void hk_line_of(const dv_bmodule *m, const void *pc, char *buf, size_t cap) {
  Dl_info di;
  if (dladdr(pc, &di) && di.dli_fbase)
    hk_fmt(buf, cap, "%s+0x%zx", m ? m->name : "module",
           (size_t)((const char *)pc - (const char *)di.dli_fbase));
  else
    hk_fmt(buf, cap, "%s:%p", m ? m->name : "module", pc);
}
