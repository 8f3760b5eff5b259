/*
 * The access checks' hooks (dialect/access_check.h, kernel_check=on) as an
 * object of their own: compiled once per compiler identity for the process
 * and linked into every checked module beside the kernel's object
 * (build.c's hk_module_build).  The kernel's own unit is then a fifth of
 * the compile it was (docs/benchmarks.md, "Checked-mode kernel builds").
 */
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "toolchain_internal.h"

/* The access checks' hooks as an object of their own, compiled once per
 * compiler identity (k->ident: the compiler, its flags, the check level)
 * with the same compiler and flags as the kernels (not the program's own
 * options: the hooks do not depend on them), and kept for the process: its
 * bytes are written beside each checked kernel's object and linked with it.
 * One entry (a second identity replaces the first); freed at unload. */
static struct {
  pthread_mutex_t lock;
  char *ident;
  void *bytes;
  size_t n;
} hk_hooks = {PTHREAD_MUTEX_INITIALIZER, NULL, NULL, 0};

__attribute__((destructor)) static void hk_hooks_drop(void) {
  dv__free(hk_hooks.ident);
  dv__free(hk_hooks.bytes);
  hk_hooks.ident = NULL;
  hk_hooks.bytes = NULL;
}

/* The hooks' object at path (dir: the build's temporary directory, for the
 * compile's own files).  A failure is the build's; nothing is kept.  A
 * compile that fails is DV_ERR_COMPILE with what the compiler said in *why
 * (dv__malloc'd; the build's log), which is NULL otherwise. */
dv_status hk_hooks_object(hk_tc *k, const dv_build_req *req, const char *dir, const char *path,
                          hk_cc_fn cc, char **why) {
  *why = NULL;
  pthread_mutex_lock(&hk_hooks.lock);
  dv_status rc = DV_OK;
  char src[600], log_path[600];
  hk_path(src, sizeof src, dir, "hooks.c");
  hk_path(log_path, sizeof log_path, dir, "hooks.txt");
  if (hk_hooks.bytes && !strcmp(hk_hooks.ident, k->ident)) {
    if (!hk_write_file(path, hk_hooks.bytes, hk_hooks.n))
      rc = dv__error(DV_ERR_DRIVER, "host simulator: cannot write %s: %s", path, strerror(errno));
    goto out;
  }
  static const char head[] = "#define DV__ACCESS_HOOKS 1\n";
  size_t hl = sizeof head - 1, dl = strlen(dv__kernel_header);
  char *text = dv__malloc(hl + dl + 1), *ident = dv__strdup(k->ident), *logtxt = NULL;
  void *bytes = NULL;
  size_t n = 0;
  int code = -1;
  if (!text || !ident) {
    rc = dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "no memory for the access checks' hooks");
    goto fail;
  }
  memcpy(text, head, hl);
  memcpy(text + hl, dv__kernel_header, dl + 1);
  if (!hk_write_file(src, text, hl + dl)) {
    rc = dv__error(DV_ERR_DRIVER, "host simulator: cannot write %s: %s", src, strerror(errno));
    goto fail;
  }
  dv_build_req hreq = {.name = "access checks", .source = "", .options = "", .flags = 0};
  rc = cc(k, &hreq, false, src, NULL, path, HK_CC_OBJECT, log_path, &code, &logtxt);
  if (!rc && code != 0) {
    char lh[700];
    hk_log_head(logtxt, lh, sizeof lh);
    rc = dv__error(DV_ERR_COMPILE, "program %s: the access checks' hooks failed to compile "
                   "(%s exited with %d):\n%s", req->name ? req->name : "kernel", k->cc_argv[0],
                   code, lh);
    size_t cap = (logtxt ? strlen(logtxt) : 0) + strlen(k->cc_argv[0]) + 80;
    if ((*why = dv__malloc(cap)) != NULL)
      snprintf(*why, cap, "the access checks' hooks failed to compile (%s exited with %d):\n%s",
               k->cc_argv[0], code, logtxt ? logtxt : "");
  }
  if (!rc) {
    errno = 0;
    bytes = hk_read_file(path, &n);
    if (!bytes)
      rc = errno == ENOMEM ? dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "no memory for the hooks' object")
                           : dv__error(DV_ERR_DRIVER, "host simulator: cannot read %s", path);
  }
  if (!rc) {
    dv__free(hk_hooks.ident);
    dv__free(hk_hooks.bytes);
    hk_hooks.ident = ident;
    hk_hooks.bytes = bytes;
    hk_hooks.n = n;
    ident = NULL;
  }
fail:
  dv__free(text);
  dv__free(ident);
  dv__free(logtxt);
  unlink(src);
  unlink(log_path);
out:
  pthread_mutex_unlock(&hk_hooks.lock);
  return rc;
}
