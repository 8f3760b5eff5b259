/*
 * The host simulator's kernels: modules and kernels (the compiler driver
 * that makes a module's image is build.c), and the small file helpers
 * both use.
 *
 * Load.  The compiled image is the .so's bytes (the kernel layer caches
 * them on disk); loading writes an image to a fresh private file, dlopens it
 * RTLD_LOCAL|RTLD_NOW and deletes the name but keeps a descriptor open until
 * unload: glibc recognises an already loaded object by device and inode,
 * and an inode freed by one module must not be reused under another that
 * dlopen would then take for the first.  Where the temporary directory is
 * noexec, the image is loaded from a memfd.  The module's dv__rt is set to
 * the runtime hk_tc_open was given (exec/'s).
 *
 * Kernels.  A kernel is the module's function of that name; its parameter
 * list as written comes from `dv__sig_<kernel>` (DV_KERNEL's stringified
 * list), which names a parameter in messages.
 */

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "toolchain_internal.h"

/* ---- files ------------------------------------------------------------------ */

/* Whole file into a NUL-terminated dv__malloc'd buffer. */
char *hk_read_file(const char *path, size_t *size) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return NULL;
  struct stat sb;
  if (fstat(fd, &sb) != 0 || sb.st_size < 0) {
    close(fd);
    return NULL;
  }
  size_t n = (size_t)sb.st_size;
  char *buf = dv__malloc(n + 1);
  if (!buf) errno = ENOMEM;
  size_t got = 0;
  while (buf && got < n) {
    ssize_t r = read(fd, buf + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += (size_t)r;
  }
  close(fd);
  if (!buf) {
    errno = ENOMEM;
    return NULL;
  }
  buf[got] = 0;
  if (size) *size = got;
  return buf;
}

bool hk_write_file(const char *path, const void *data, size_t n) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  const char *p = data;
  size_t done = 0;
  while (done < n) {
    ssize_t w = write(fd, p + done, n - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) break;
    done += (size_t)w;
  }
  return close(fd) == 0 && done == n;
}

/* A private temporary directory (mode 0700) in $TMPDIR or /tmp. */
bool hk_tempdir(char *buf, size_t cap) {
  const char *t = getenv("TMPDIR");
  if (!t || !*t || access(t, W_OK) != 0) t = "/tmp";
  int k = snprintf(buf, cap, "%s/devarray-kernel-XXXXXX", t);
  if (k < 0 || (size_t)k >= cap) return false;
  return mkdtemp(buf) != NULL;
}

void hk_path(char *buf, size_t cap, const char *dir, const char *file) {
  snprintf(buf, cap, "%s/%s", dir, file);
}

const hk_kview *hk_kernel_view(const dv_bkernel *kn) { return &kn->v; }
const hk_mview *hk_module_view(const dv_bmodule *m) { return &m->v; }

/* ---- a module's segments (the access checks) ---------------------------------- */

typedef struct hk_seg_find {
  uintptr_t base;
  dv_bmodule *m;
} hk_seg_find;

static int hk_seg_cb(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)size;
  hk_seg_find *f = arg;
  if ((uintptr_t)info->dlpi_addr != f->base) return 0;
  dv_bmodule *m = f->m;
  for (int i = 0; i < info->dlpi_phnum && m->v.nseg < 8; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type == PT_TLS) m->v.tls_bytes = ph->p_memsz;
    if (ph->p_type != PT_LOAD) continue;
    m->v.seg_lo[m->v.nseg] = (uintptr_t)info->dlpi_addr + ph->p_vaddr;
    m->v.seg_hi[m->v.nseg] = m->v.seg_lo[m->v.nseg] + ph->p_memsz;
    m->v.nseg++;
  }
  return 1;
}

dv_status hk_module_segments(const hk_mview *mv, const dv__host_rt *with) {
  dv_bmodule *m = hk_module_of(mv);
  pthread_mutex_lock(&m->lock);
  dv_status rc = DV_OK;
  if (!m->v.nseg) {
    struct link_map *lm = NULL;
    const dv__host_rt **rt = dlsym(m->v.dl, "dv__rt");
    if (rt && dlinfo(m->v.dl, RTLD_DI_LINKMAP, &lm) == 0 && lm) {
      hk_seg_find f = {(uintptr_t)lm->l_addr, m};
      dl_iterate_phdr(hk_seg_cb, &f);
    }
    if (!rt || !m->v.nseg)
      rc = dv__error(DV_ERR_SYMBOL_LOAD, "kernel module %s: cannot find its segments for the "
                     "access checks", m->v.name);
    else
      *rt = with;
  }
  pthread_mutex_unlock(&m->lock);
  return rc;
}

/* ========================================================================== */
/* Modules and kernels                                                         */
/* ========================================================================== */

static void hk_module_free(dv_bmodule *m) {
  if (!m) return;
  for (dv_bkernel *kn = m->kernels, *next; kn; kn = next) {
    next = kn->next;
    dv__free((void *)kn->v.name);
    dv__free(kn);
  }
  if (m->v.dl) dlclose(m->v.dl);
  hk_lines_free(m->lines);
  if (m->fd >= 0) close(m->fd);
  pthread_mutex_destroy(&m->lock);
  dv__free((void *)m->v.name);
  dv__free(m);
}

/* dlopen the module at path (then the name may go), fill in the runtime and
 * the initial constants. */
static dv_status hk_load_path(hk_tc *k, const dv_build_req *req, const char *path, int fd,
                              dv_bmodule **out) {
  *out = NULL;
  dv_bmodule *m = dv__calloc(1, sizeof *m);
  char *name = dv__strdup(req->name ? req->name : "kernel");
  if (!m || !name) {
    dv__free(m);
    dv__free(name);
    return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate a kernel module");
  }
  pthread_mutex_init(&m->lock, NULL);
  m->k = k;
  m->v.name = name;
  m->fd = fd >= 0 ? fd : open(path, O_RDONLY | O_CLOEXEC);
  m->v.check = k->check || (req->flags & DV_BUILD_DEBUG);
  dv_status rc = DV_OK;
  if (m->fd < 0) {
    rc = dv__error(DV_ERR_LIBRARY_LOAD, "cannot open the compiled module %s: %s", path,
                   strerror(errno));
    goto fail;
  }
  m->v.dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!m->v.dl) {
    const char *e = dlerror();
    rc = dv__error(DV_ERR_LIBRARY_LOAD, "cannot load kernel module %s: %s", m->v.name,
                   e ? e : "dlopen failed");
    goto fail;
  }
  const dv__host_rt **rt = dlsym(m->v.dl, "dv__rt");
  void *slot = dlsym(m->v.dl, "dv__self_slot");
  memcpy(&m->v.self_slot, &slot, sizeof slot); /* POSIX: dlsym's pointer works as a function's */
  if (!rt || !slot) {
    rc = dv__error(DV_ERR_SYMBOL_LOAD, "kernel module %s lacks the host runtime's symbols "
                   "(dv__rt, dv__self_slot): not built by this devarray", m->v.name);
    goto fail;
  }
  *rt = k->rt; /* an instrumented module's first launch gives it the access checks' (hk_module_segments) */
  m->v.access = dlsym(m->v.dl, "dv__access_checked") != NULL;
  /* The stack a fission function may take for its threads' state: half a fiber's. */
  size_t *room = dlsym(m->v.dl, "dv__fis_room");
  if (room) *room = k->fiber_stack / 2;
  if (req->const_bytes) {
    m->cbuf = dlsym(m->v.dl, "dv__cbuf");
    if (!m->cbuf) {
      rc = dv__error(DV_ERR_SYMBOL_LOAD, "kernel module %s lacks its constant buffer dv__cbuf",
                     m->v.name);
      goto fail;
    }
    m->cbytes = m->v.cbytes = req->const_bytes;
    if (req->const_init) memcpy(m->cbuf, req->const_init, req->const_bytes);
  }
  *out = m;
  return DV_OK;
fail:
  if (fd >= 0 && m->fd == fd) m->fd = -1; /* the caller's */
  hk_module_free(m);
  return rc;
}

/* Where the temporary directory is mounted noexec, dlopen fails; load the
 * image from an anonymous memory file instead (Linux). */
static dv_status hk_load_memfd(hk_tc *k, const dv_build_req *req, const void *image,
                               size_t n, dv_bmodule **out) {
  *out = NULL;
#ifdef MFD_CLOEXEC
  int fd = memfd_create("devarray-kernel", MFD_CLOEXEC);
  if (fd < 0) return dv__error(DV_ERR_LIBRARY_LOAD, "memfd_create: %s", strerror(errno));
  const char *p = image;
  size_t done = 0;
  while (done < n) {
    ssize_t w = write(fd, p + done, n - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) break;
    done += (size_t)w;
  }
  char path[64];
  /* dlopen knows loaded objects by name: a module that outlived its
   * descriptor would answer for a new one with the same number. */
  for (int tries = 0; done == n && tries < 16; tries++) {
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    void *h = dlopen(path, RTLD_LAZY | RTLD_NOLOAD);
    if (!h) break;
    dlclose(h);
    int fd2 = fcntl(fd, F_DUPFD_CLOEXEC, fd + 1);
    close(fd);
    fd = fd2;
    if (fd < 0) break;
  }
  if (fd < 0 || done != n) {
    if (fd >= 0) close(fd);
    return dv__error(DV_ERR_LIBRARY_LOAD, "cannot write the kernel module to a memory file");
  }
  dv_status rc = hk_load_path(k, req, path, fd, out);
  if (rc) close(fd);
  return rc;
#else
  (void)k, (void)req, (void)image, (void)n;
  return dv__error(DV_ERR_LIBRARY_LOAD, "no memory files here");
#endif
}

/* Load the module at path (its bytes: image); from memory if that fails. */
dv_status hk_load(hk_tc *k, const dv_build_req *req, const char *path, const void *image,
                  size_t n, dv_bmodule **out) {
  dv_status rc = hk_load_path(k, req, path, -1, out);
  if (rc != DV_ERR_LIBRARY_LOAD) return rc;
  char first[512];
  snprintf(first, sizeof first, "%s", dv_last_error());
  dv_status r2 = hk_load_memfd(k, req, image, n, out);
  if (r2 == DV_OK || r2 == DV_ERR_HOST_OUT_OF_MEMORY) return r2;
  return dv__error(rc, "%s", first);
}

dv_status hk_module_load(hk_tc *k, const dv_build_req *req, const void *image,
                         size_t image_size, dv_bmodule **out, char **log) {
  *out = NULL;
  if (log) *log = NULL;
  if (!image || image_size < 4 || memcmp(image, "\177ELF", 4) != 0)
    return dv__error(DV_ERR_INVALID_ARGUMENT, "not a host kernel module image");
  char dir[512], so[600];
  if (!hk_tempdir(dir, sizeof dir)) return hk_load_memfd(k, req, image, image_size, out);
  hk_path(so, sizeof so, dir, "kernel.so");
  dv_status rc;
  if (!hk_write_file(so, image, image_size))
    rc = hk_load_memfd(k, req, image, image_size, out);
  else
    rc = hk_load(k, req, so, image, image_size, out);
  unlink(so);
  rmdir(dir);
  return rc;
}

dv_status hk_module_unload(hk_tc *k, dv_bmodule *m) {
  (void)k;
  hk_module_free(m);
  return DV_OK;
}

const char *hk_module_constants(const dv_bmodule *m, unsigned char **buf, size_t *bytes) {
  *buf = m->cbuf;
  *bytes = m->cbytes;
  return m->v.name;
}

/* ---- the kernel's parameter list ---------------------------------------- */

/* The kernel layer reads every kernel's declaration and checks launches
 * against it (src/kernel/signature.c, contract.c); the module's exported
 * text (DV_KERNEL's stringified list) serves its cross-check and names a
 * parameter in messages here. */

/* Parameter i (0-based) of the exported list, blanks trimmed, into buf. */
void hk_param_text(const char *sig, int i, char *buf, size_t cap) {
  int depth = 0, at = 0;
  const char *s = sig, *start = sig;
  buf[0] = 0;
  for (;; s++) {
    if (*s == '(' || *s == '[') depth++;
    if ((*s == ')' || *s == ']') && depth > 0) depth--;
    if (*s == 0 || (*s == ',' && depth == 0)) {
      if (at++ == i) {
        while (start < s && (*start == ' ' || *start == '\t' || *start == '\n')) start++;
        const char *e = s;
        while (e > start && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\n')) e--;
        snprintf(buf, cap, "%.*s", (int)(e - start), start);
        return;
      }
      if (*s == 0) return;
      start = s + 1;
    }
  }
}

dv_status hk_kernel_get(hk_tc *k, dv_bmodule *m, const char *name, dv_bkernel **out) {
  (void)k;
  *out = NULL;
  if (!m || !name) return dv__error(DV_ERR_NULL_ARGUMENT, "kernel_get without module or name");
  char signame[300];
  int w = snprintf(signame, sizeof signame, "dv__sig_%s", name);
  void *fn = dlsym(m->v.dl, name);
  const char *sig = (w > 0 && (size_t)w < sizeof signame) ? dlsym(m->v.dl, signame) : NULL;
  if (!fn || !sig)
    return dv__error(DV_ERR_INVALID_ARGUMENT, "program %s has no kernel %s%s", m->v.name, name,
                     fn ? " (the symbol exists but is not a DV_KERNEL)" : "");
  dv_bkernel *kn = dv__calloc(1, sizeof *kn);
  char *nm = dv__strdup(name);
  if (!kn || !nm) {
    dv__free(kn);
    dv__free(nm);
    return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate a kernel");
  }
  kn->v.sig = sig;
  kn->mod = m;
  kn->v.m = &m->v;
  kn->v.name = nm;
  /* A function pointer from dlsym's object pointer (POSIX guarantees it works). */
  memcpy(&kn->v.fn, &fn, sizeof fn);
  /* The block function (kernel.h), where the kernel has one. */
  w = snprintf(signame, sizeof signame, "dv__blk_%s", name);
  void *blk = (w > 0 && (size_t)w < sizeof signame) ? dlsym(m->v.dl, signame) : NULL;
  memcpy(&kn->v.blk, &blk, sizeof blk);
  /* Its fission function (fission/), where the module has one. */
  w = snprintf(signame, sizeof signame, "dv__fis_%s", name);
  void *fis = (w > 0 && (size_t)w < sizeof signame) ? dlsym(m->v.dl, signame) : NULL;
  memcpy(&kn->v.fis, &fis, sizeof fis);
  pthread_mutex_lock(&m->lock);
  kn->next = m->kernels;
  m->kernels = kn;
  pthread_mutex_unlock(&m->lock);
  *out = kn;
  return DV_OK;
}


dv_status hk_kernel_params(hk_tc *k, dv_bkernel *kn, dv_bparam *out, size_t cap, size_t *n,
                           const char **sig) {
  (void)k, (void)out, (void)cap;
  *n = 0;
  *sig = kn->v.sig;
  return DV_OK;
}
