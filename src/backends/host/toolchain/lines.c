/*
 * Source lines of a module's code addresses: "file:line" in the user's file
 * as the program names it (the kernel layer's `#line 1 "<program>"`), for
 * the watchdog's report (an interrupted pc) and the access checks' (a
 * return address from their hooks).
 *
 * Kernel modules carry a line table (host_build.c compiles them with -g1
 * -gdwarf-4: line tables only, no change to the code; DWARF 5's file
 * numbering is misread by binutils 2.40's addr2line).  It is read lazily,
 * at report time only: `addr2line -e /proc/self/fd/3 0xOFFSET`, spawned
 * with posix_spawnp (no shell), where fd 3 is the loaded module's own file
 * (host_module.c keeps a descriptor: the file may be deleted, or a memfd)
 * and OFFSET is pc minus the module's load base (dladdr).  A return
 * address is the instruction after its call: one is subtracted for it, so
 * that the line is the call's.  Answers, the failures included, are cached
 * per module (a small table), so repeated reports do not spawn again.  No
 * addr2line, or no line for the address: "prog.dvk+0x1f0"; an address
 * outside the module (libc, the runtime): its object and symbol.
 */
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "toolchain_internal.h"

extern char **environ;

#define HK_LINES 32

struct hk_lines {
  pthread_mutex_t mu;
  size_t n, next;
  struct {
    uintptr_t off;
    char text[160];
  } e[HK_LINES];
};

void hk_lines_free(struct hk_lines *c) {
  if (!c) return;
  pthread_mutex_destroy(&c->mu);
  dv__free(c);
}

/* The module's cache, made on first use (under the module's lock). */
static struct hk_lines *hk_lines_of(const dv_bmodule *cm) {
  dv_bmodule *m = (dv_bmodule *)(uintptr_t)cm; /* the cache is not the module's meaning */
  pthread_mutex_lock(&m->lock);
  if (!m->lines) {
    struct hk_lines *c = dv__calloc(1, sizeof *c);
    if (c) {
      pthread_mutex_init(&c->mu, NULL);
      m->lines = c;
    }
  }
  struct hk_lines *c = m->lines;
  pthread_mutex_unlock(&m->lock);
  return c;
}

typedef struct hk_seg_find {
  uintptr_t base, lo, hi;
} hk_seg_find;

static int hk_seg_cb(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)size;
  hk_seg_find *f = arg;
  if ((uintptr_t)info->dlpi_addr != f->base) return 0;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X)) continue;
    uintptr_t lo = f->base + ph->p_vaddr, hi = lo + ph->p_memsz;
    if (!f->hi || lo < f->lo) f->lo = lo;
    if (hi > f->hi) f->hi = hi;
  }
  return 1;
}

/* Kept in the module itself (no allocation: a launch calls it). */
bool hk_module_text(const hk_mview *cm, uintptr_t *lo, uintptr_t *hi) {
  *lo = *hi = 0;
  if (!cm) return false;
  dv_bmodule *m = hk_module_of(cm);
  pthread_mutex_lock(&m->lock);
  if (!m->text_known) {
    void *anchor = NULL;
    Dl_info di;
    memcpy(&anchor, &m->v.self_slot, sizeof anchor);
    hk_seg_find f = {0, 0, 0};
    if (anchor && dladdr(anchor, &di) && di.dli_fbase) {
      f.base = (uintptr_t)di.dli_fbase;
      dl_iterate_phdr(hk_seg_cb, &f);
    }
    m->text_lo = f.lo, m->text_hi = f.hi;
    m->text_known = true;
  }
  *lo = m->text_lo, *hi = m->text_hi;
  pthread_mutex_unlock(&m->lock);
  return *hi > *lo;
}

/* The file name as the program gave it: addr2line puts the compiler's
 * working directory before a relative name. */
static void hk_short_name(const dv_bmodule *m, char *s) {
  size_t n = strlen(s), mn = strlen(m->v.name);
  char *colon = strrchr(s, ':');
  if (!colon) return;
  size_t fl = (size_t)(colon - s);
  if (fl > mn && s[fl - mn - 1] == '/' && !memcmp(s + fl - mn, m->v.name, mn)) {
    memmove(s, s + fl - mn, n - (fl - mn) + 1);
    return;
  }
  /* "<devarray host runtime>" and the like: no directory either. */
  char *slash = NULL;
  for (char *p = s; p < colon; p++)
    if (*p == '/') slash = p;
  if (slash && slash[1] == '<') memmove(s, slash + 1, strlen(slash + 1) + 1);
}

/* Run addr2line on offset off of the module open at fd; its first line
 * into out.  False: it could not run or knows no line. */
static bool hk_addr2line(const dv_bmodule *m, int fd, uintptr_t off, char *out, size_t cap) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return false;
  /* Descriptors above the ones the child sets (0-3), so no dup2 there
   * overwrites another's source. */
  int mfd = fcntl(fd, F_DUPFD_CLOEXEC, 10), wfd = fcntl(p[1], F_DUPFD_CLOEXEC, 10);
  close(p[1]);
  bool ok = false;
  posix_spawn_file_actions_t fa;
  if (mfd >= 0 && wfd >= 0 && posix_spawn_file_actions_init(&fa) == 0) {
    int e = posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    if (!e) e = posix_spawn_file_actions_adddup2(&fa, wfd, 1);
    if (!e) e = posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    if (!e) e = posix_spawn_file_actions_adddup2(&fa, mfd, 3);
    char addr[32];
    snprintf(addr, sizeof addr, "0x%llx", (unsigned long long)off);
    char *argv[] = {"addr2line", "-e", "/proc/self/fd/3", addr, NULL};
    pid_t pid = 0;
    if (!e) e = posix_spawnp(&pid, "addr2line", &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(wfd);
    wfd = -1;
    if (!e) {
      char buf[512];
      size_t got = 0;
      for (;;) {
        ssize_t r = read(p[0], buf + got, sizeof buf - 1 - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t)r;
        if (got == sizeof buf - 1) break;
      }
      buf[got] = 0;
      int status = 0;
      while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      buf[strcspn(buf, "\n")] = 0;
      char *sp = strstr(buf, " (discriminator");
      if (sp) *sp = 0;
      const char *colon = strrchr(buf, ':');
      ok = buf[0] && buf[0] != '?' && colon && colon[1] >= '1' && colon[1] <= '9';
      if (ok) {
        hk_short_name(m, buf);
        hk_fmt(out, cap, "%s", buf);
      }
    }
  }
  if (wfd >= 0) close(wfd);
  if (mfd >= 0) close(mfd);
  close(p[0]);
  return ok;
}

static void hk_line_at(const dv_bmodule *m, const void *pc, bool ret, char *buf, size_t cap) {
  Dl_info di, mi;
  void *anchor = NULL;
  if (m) memcpy(&anchor, &m->v.self_slot, sizeof anchor); /* a function of the module */
  memset(&di, 0, sizeof di);
  memset(&mi, 0, sizeof mi);
  if (!pc || !dladdr(pc, &di) || !di.dli_fbase) {
    hk_fmt(buf, cap, "address %p", pc);
    return;
  }
  uintptr_t off = (uintptr_t)pc - (uintptr_t)di.dli_fbase - (ret ? 1 : 0);
  if (!m || !anchor || !dladdr(anchor, &mi) || mi.dli_fbase != di.dli_fbase) {
    /* Outside the module: the object (its last path component) and symbol. */
    const char *obj = di.dli_fname ? strrchr(di.dli_fname, '/') : NULL;
    obj = obj ? obj + 1 : di.dli_fname ? di.dli_fname : "?";
    if (di.dli_sname && di.dli_saddr)
      hk_fmt(buf, cap, "%s+0x%zx in %s", di.dli_sname,
             (size_t)((uintptr_t)pc - (uintptr_t)di.dli_saddr), obj);
    else
      hk_fmt(buf, cap, "%s+0x%zx", obj, (size_t)((uintptr_t)pc - (uintptr_t)di.dli_fbase));
    return;
  }
  struct hk_lines *c = hk_lines_of(m);
  if (c) {
    pthread_mutex_lock(&c->mu);
    for (size_t i = 0; i < c->n; i++)
      if (c->e[i].off == off) {
        hk_fmt(buf, cap, "%s", c->e[i].text);
        pthread_mutex_unlock(&c->mu);
        return;
      }
  }
  char text[160];
  if (m->fd < 0 || !hk_addr2line(m, m->fd, off, text, sizeof text))
    hk_fmt(text, sizeof text, "%s+0x%zx", m->v.name, (size_t)off);
  if (c) {
    size_t i = c->n < HK_LINES ? c->n++ : c->next++ % HK_LINES;
    c->e[i].off = off;
    hk_fmt(c->e[i].text, sizeof c->e[i].text, "%s", text);
    pthread_mutex_unlock(&c->mu);
  }
  hk_fmt(buf, cap, "%s", text);
}

void hk_line_of(const hk_mview *mv, const void *pc, char *buf, size_t cap) {
  const dv_bmodule *m = hk_module_of(mv);
  hk_line_at(m, pc, true, buf, cap);
}

void hk_line_of_pc(const hk_mview *mv, const void *pc, char *buf, size_t cap) {
  const dv_bmodule *m = hk_module_of(mv);
  hk_line_at(m, pc, false, buf, cap);
}
