/*
 * The host simulator's kernels: build, load, launch and run kernel sources
 * written in the dialect of <devarray/kernel.h>, with the semantics of a GPU
 * and the checks a GPU does not make.
 *
 * Build.  The kernel layer hands us one translation unit (the dialect
 * header, its prelude, `#line 1 "<program>"`, the user's source).  We append
 * a small trailer (the runtime pointer dv__rt, the thread-local dv__self,
 * a hidden __stack_chk_fail), write it to a private temporary directory and
 * run the system C compiler with posix_spawn (no shell): $host_cc, else
 * $CC, cc, gcc, clang on PATH; `-std=c11 -shared -fPIC -fvisibility=hidden`,
 * then host_cflags, then the program's own options; a missing compiler is
 * DV_ERR_NO_COMPILER naming what was tried, a failed compile DV_ERR_COMPILE
 * with the whole log.  The compiled image is the .so's bytes (the kernel
 * layer caches them on disk); loading writes an image to a fresh private
 * file, dlopens it RTLD_LOCAL|RTLD_NOW and deletes the name but keeps a
 * descriptor open until unload: glibc recognises an already loaded object
 * by device and inode, and an inode freed by one module must not be reused
 * under another that dlopen would then take for the first.  Where the
 * temporary directory is noexec, the image is loaded from a memfd.
 *
 * Calls.  A kernel is a plain C function; its parameter list comes from
 * `dv__sig_<kernel>` (the stringified parameters), which we parse to check
 * the launch's arguments (count, kind, and the scalar types we can read) and
 * libffi builds the call from run-time argument lists; on x86-64 Linux the
 * arguments are sorted once per launch into the registers and stack slots
 * of the System V convention and each thread is a plain call (hk_flat).
 *
 * Execution.  A launch is an operation queued on a stream like a copy; it
 * holds a reference on every buffer it uses.  The stream's worker runs it:
 * blocks are taken from a shared counter by the worker and by helper
 * threads of a small per-context pool (so blocks really run in parallel,
 * as on a GPU, and can wait for each other through atomics); each OS thread
 * runs one block at a time.  A fault is the stream's error (host.c keeps
 * it with its message): the launch returns it when synchronous, else the
 * stream's next synchronize.  The threads of a block are fibers on that OS
 * thread (fiber.c), stacks of host_fiber_stack bytes mmap'ed with a
 * PROT_NONE guard page below each and reused across blocks.  Measured in
 * the research for this design: a fiber barrier is >= 21x cheaper than an
 * OS thread per GPU thread, and the scheduler sees every thread's state, so
 * a barrier that part of a block never reaches is an exact error, not a
 * hang: when no fiber can run, either every thread waits at the same
 * barrier (release them), or every thread of a wave waits at the same wave
 * barrier (release that wave), or the block is stopped and the launch
 * fails with DV_ERR_KERNEL_FAULT naming the kernel, block, threads and
 * barriers.  Barrier sites are __COUNTER__ values, so two barriers on one
 * line are told apart.  A wave operation (shuffle, any, all, ballot) is a
 * wave barrier with an exchange: each lane leaves its value in a slot of
 * its own, waits, then reads its wave's slots (hk_rt_wave).  dv_printf
 * formats into a buffer of the launch, written to stdout in block and
 * thread order when the launch has run (hk_rt_printf, hk_print_flush).  Fibers are made only as needed (HIP-CPU runs a
 * block's threads plainly until one reaches a barrier): a "runner" fiber
 * runs thread 0, 1, 2, ... one after the other; when the running thread
 * stops at a barrier, that fiber stays with it and a new runner goes on
 * with the next thread.  A kernel without barriers thus costs one fiber
 * per block and no switch per thread; threads run in the same order as
 * with one fiber each from the start.  Once every thread has started, one
 * that waits at a barrier switches straight to the next thread that can run
 * (one switch per thread and barrier, between two stacks at the same call
 * site, so the CPU predicts the returns); the last of a pass goes back to
 * the scheduler, which applies the rules above.
 *
 * Checks.  Static shared arrays get their slot in a per-executor arena on
 * first use in a block, filled with 0xDF (read-before-write shows) and
 * followed by a 64-byte redzone holding a canary; with kernel_check (or
 * DV_BUILD_DEBUG) the canaries are checked at every barrier and at the end
 * of each block, and a hit names the array and its line.  The dynamic area
 * is one more slot; DV_DYN_SHARED_TAKE past the launch's dynamic_shared is
 * a fault, and so are static plus dynamic shared bytes over 48 KiB (a GPU
 * refuses such a kernel).  With kernel_check, kernels are compiled with
 * -fstack-protector-strong and our own __stack_chk_fail, so a local array
 * written past its end faults the launch instead of aborting, and the guard
 * bytes of every buffer argument are checked after the kernel (global
 * out-of-bounds writes).  Every build uses -fstack-clash-protection where
 * the compiler has it, so a local array bigger than the fiber's stack hits
 * the guard page below that stack instead of another fiber's stack.  When
 * devarray itself is built with AddressSanitizer, kernels are compiled with -fsanitize=address too (an
 * instrumented .so can only be loaded into an instrumented process) and the
 * buffers' guards are poisoned while the kernel runs, so ASan reports a bad
 * local or global access with its stack (and ends the process, as ASan
 * does).  Shared redzones keep their canary in every build: the fault is
 * reported the same way everywhere and the process goes on.
 *
 * Faults.  SIGSEGV, SIGBUS, SIGFPE and SIGILL get a process-wide handler
 * (installed while some host context has launched kernels; it chains to the
 * previous handler for faults outside kernels).  Executor threads have an
 * alternate signal stack, so a fiber's stack overflow into its guard page
 * is handled too; the handler siglongjmps back to the block's scheduler and
 * the launch fails with DV_ERR_KERNEL_FAULT naming the signal, address,
 * block and thread (a fault in a guard page, or with the stack pointer
 * below the fiber's stack, is named a stack overflow, with the stack's
 * size and the host_fiber_stack option).  The process goes on; the fibers of that block are
 * abandoned (their stacks are reused).
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <ffi.h>
#include <setjmp.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <ucontext.h>
#include <unistd.h>

#include "../../core/core.h"
#include "../backend.h"
#include "devarray/kernel.h"
#include "fiber.h"
#include "host_internal.h"

#if DV_HOST_ASAN
#include <sanitizer/asan_interface.h>
#endif

extern char **environ;

#define HK_MAX_THREADS 1024
#define HK_SHARED_LIMIT ((size_t)48 << 10) /* static + dynamic shared bytes per block */
#define HK_CONST_LIMIT ((size_t)64 << 10)
#define HK_REDZONE 64
#define HK_CANARY 0xFD
#define HK_POISON 0xDF
#define HK_ARENA_BYTES ((size_t)128 << 10) /* shared limit + redzones + alignment */
#define HK_MAX_SLOTS 256
#define HK_ALTSTACK ((size_t)64 << 10)
#define HK_GUARD_BYTE 0xAB /* host.c's guard pattern */

/* ========================================================================== */
/* State                                                                       */
/* ========================================================================== */

struct hk_state {
  hb_state *st;
  const hk_services *sv; /* host.c's blocks and streams */
  bool guarded;          /* option host_guard: buffers have guard bytes */
  int check;          /* option kernel_check */
  char *cc_option;    /* option host_cc ("" : search) */
  char *cflags;       /* option host_cflags */
  size_t fiber_stack; /* usable bytes per fiber (page multiple) */
  size_t page;
  int wave;           /* option host_wave_size */
  size_t printf_cap;  /* option host_printf_buffer: dv_printf bytes per launch */

  pthread_mutex_t lock; /* compiler identity */
  bool cc_probed;
  bool no_clash; /* the compiler refused -fstack-clash-protection (then: without it) */
  dv_status cc_status;
  char cc_msg[512];
  char **cc_argv; /* the compiler and the words that came with it (NULL-terminated) */
  int cc_argc;
  char *ident;

  /* Helper threads that join launches with more than one block. */
  pthread_mutex_t pm;
  pthread_cond_t pwork, pdone;
  hk_job *jobs;
  pthread_t *helpers;
  int nhelpers;
  bool pool_started, stop;
  bool signals; /* this state counts in the signal handler's users */
};

static void hk_sig_release(void);

dv_status hk_open(hb_state *st, const dv_backend_config *cfg, const hk_services *sv,
                  hk_state **out) {
  *out = NULL;
  hk_state *k = dv__calloc(1, sizeof *k);
  if (!k) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate the host kernel state");
  k->st = st;
  k->sv = sv;
  k->guarded = cfg->host_guard != 0;
  k->check = cfg->kernel_check != 0;
  k->cc_option = dv__strdup(cfg->host_cc ? cfg->host_cc : "");
  k->cflags = dv__strdup(cfg->host_cflags ? cfg->host_cflags : "");
  long pg = sysconf(_SC_PAGESIZE);
  k->page = pg > 0 ? (size_t)pg : 4096;
  size_t fs = cfg->host_fiber_stack ? cfg->host_fiber_stack : ((size_t)128 << 10);
  if (fs < 16384) fs = 16384;
  k->fiber_stack = (fs + k->page - 1) & ~(k->page - 1);
  k->wave = cfg->host_wave_size > 0 ? cfg->host_wave_size : 32;
  k->printf_cap = cfg->host_printf_buffer ? cfg->host_printf_buffer : ((size_t)1 << 20);
  if (!k->cc_option || !k->cflags) {
    dv__free(k->cc_option);
    dv__free(k->cflags);
    dv__free(k);
    return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate the host kernel state");
  }
  pthread_mutex_init(&k->lock, NULL);
  pthread_mutex_init(&k->pm, NULL);
  pthread_cond_init(&k->pwork, NULL);
  pthread_cond_init(&k->pdone, NULL);
  *out = k;
  return DV_OK;
}

static void hk_free_words(char **w) {
  if (!w) return;
  for (char **p = w; *p; p++) dv__free(*p);
  dv__free(w);
}

void hk_close(hk_state *k) {
  if (!k) return;
  pthread_mutex_lock(&k->pm);
  k->stop = true;
  pthread_cond_broadcast(&k->pwork);
  pthread_mutex_unlock(&k->pm);
  for (int i = 0; i < k->nhelpers; i++) pthread_join(k->helpers[i], NULL);
  dv__free(k->helpers);
  if (k->signals) hk_sig_release();
  hk_free_words(k->cc_argv);
  dv__free(k->ident);
  dv__free(k->cc_option);
  dv__free(k->cflags);
  pthread_mutex_destroy(&k->lock);
  pthread_mutex_destroy(&k->pm);
  pthread_cond_destroy(&k->pwork);
  pthread_cond_destroy(&k->pdone);
  dv__free(k);
}

/* Is devarray itself built with AddressSanitizer (then kernels are too)? */
static bool hk_asan(void) {
#if DV_HOST_ASAN
  return true;
#else
  return false;
#endif
}

/* snprintf that may truncate (messages), without the compiler's warning. */
__attribute__((format(printf, 3, 4))) static void hk_fmt(char *buf, size_t cap, const char *fmt,
                                                         ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, cap, fmt, ap);
  va_end(ap);
}

/* ========================================================================== */
/* Running the compiler                                                        */
/* ========================================================================== */

/* Split s on blanks into a NULL-terminated dv__malloc'd array (appended to
 * *v of *n words).  Returns false on allocation failure. */
static bool hk_words(const char *s, char ***v, int *n) {
  while (s && *s) {
    while (*s == ' ' || *s == '\t' || *s == '\n') s++;
    if (!*s) break;
    const char *e = s;
    while (*e && *e != ' ' && *e != '\t' && *e != '\n') e++;
    char **nv = dv__malloc((size_t)(*n + 2) * sizeof *nv);
    char *w = dv__malloc((size_t)(e - s) + 1);
    if (!nv || !w) {
      dv__free(nv);
      dv__free(w);
      return false;
    }
    memcpy(w, s, (size_t)(e - s));
    w[e - s] = 0;
    if (*n) memcpy(nv, *v, (size_t)*n * sizeof *nv);
    nv[(*n)++] = w;
    nv[*n] = NULL;
    dv__free(*v);
    *v = nv;
    s = e;
  }
  return true;
}

/* Append one word (as is) to *v. */
static bool hk_word(const char *w, char ***v, int *n) {
  char **nv = dv__malloc((size_t)(*n + 2) * sizeof *nv);
  char *c = dv__strdup(w);
  if (!nv || !c) {
    dv__free(nv);
    dv__free(c);
    return false;
  }
  if (*n) memcpy(nv, *v, (size_t)*n * sizeof *nv);
  nv[(*n)++] = c;
  nv[*n] = NULL;
  dv__free(*v);
  *v = nv;
  return true;
}

static bool hk_executable(const char *path) {
  struct stat sb;
  return stat(path, &sb) == 0 && S_ISREG(sb.st_mode) && access(path, X_OK) == 0;
}

/* The full path of program `prog` (as execvp would find it), or NULL
 * (errno ENOMEM: found, but no memory for the path). */
static char *hk_which(const char *prog) {
  errno = 0;
  if (!*prog) return NULL;
  if (strchr(prog, '/')) {
    char *r = hk_executable(prog) ? dv__strdup(prog) : NULL;
    if (!r && hk_executable(prog)) errno = ENOMEM;
    return r;
  }
  const char *path = getenv("PATH");
  if (!path || !*path) path = "/usr/local/bin:/usr/bin:/bin";
  char buf[4096];
  while (*path) {
    const char *e = strchr(path, ':');
    size_t len = e ? (size_t)(e - path) : strlen(path);
    int k = snprintf(buf, sizeof buf, "%.*s/%s", (int)len, len ? path : ".", prog);
    if (k > 0 && (size_t)k < sizeof buf && hk_executable(buf)) {
      char *r = dv__strdup(buf);
      if (!r) errno = ENOMEM;
      return r;
    }
    if (!e) break;
    path = e + 1;
  }
  return NULL;
}

/* Run argv[0] (a full path) with stdout and stderr into out_path; *code is
 * its exit status (or 128 + signal).  Returns errno-style failure or 0. */
static int hk_spawn(char *const argv[], const char *out_path, int *code) {
  posix_spawn_file_actions_t fa;
  if (posix_spawn_file_actions_init(&fa)) return ENOMEM;
  int e = posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  if (!e) e = posix_spawn_file_actions_addopen(&fa, 1, out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (!e) e = posix_spawn_file_actions_adddup2(&fa, 1, 2);
  pid_t pid = 0;
  if (!e) e = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (e) return e;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return errno;
  }
  if (WIFEXITED(status))
    *code = WEXITSTATUS(status);
  else if (WIFSIGNALED(status))
    *code = 128 + WTERMSIG(status);
  else
    *code = 255;
  return 0;
}

/* Whole file into a NUL-terminated dv__malloc'd buffer. */
static char *hk_read_file(const char *path, size_t *size) {
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

static bool hk_write_file(const char *path, const void *data, size_t n) {
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
static bool hk_tempdir(char *buf, size_t cap) {
  const char *t = getenv("TMPDIR");
  if (!t || !*t || access(t, W_OK) != 0) t = "/tmp";
  int k = snprintf(buf, cap, "%s/devarray-kernel-XXXXXX", t);
  if (k < 0 || (size_t)k >= cap) return false;
  return mkdtemp(buf) != NULL;
}

static void hk_path(char *buf, size_t cap, const char *dir, const char *file) {
  snprintf(buf, cap, "%s/%s", dir, file);
}

/* Appended to every host translation unit. */
static const char hk_trailer[] =
    "\n#line 1 \"<devarray host runtime>\"\n"
    "DV__EXPORT const dv__host_rt *dv__rt;\n"
    "DV__EXPORT _Thread_local dv__hthread *dv__self;\n"
    "DV__EXPORT dv__hthread **dv__self_slot(void);\n"
    "dv__hthread **dv__self_slot(void) { return &dv__self; }\n"
    /* -fstack-protector's failure: a fault of this thread, not abort(). */
    "__attribute__((visibility(\"hidden\"), noreturn)) void __stack_chk_fail(void);\n"
    "void __stack_chk_fail(void) {\n"
    "  dv__rt->fault(\"a local array was written past its end (stack protector)\", 0);\n"
    "  __builtin_trap();\n"
    "}\n";

/* Find the compiler and its identity, once per state.  Caller holds k->lock. */
static dv_status hk_probe_compiler(hk_state *k) {
  if (k->cc_probed) {
    if (k->cc_status) return dv__error(k->cc_status, "%s", k->cc_msg);
    return DV_OK;
  }
  char tried[400] = "";
  size_t tn = 0;
  char **words = NULL;
  int nwords = 0;
  char *path = NULL;
  bool oom = false;
  const char *cands[6];
  const char *labels[6];
  int nc = 0;
  if (k->cc_option[0]) {
    cands[nc] = k->cc_option, labels[nc++] = "host_cc option";
  } else {
    const char *cc = getenv("CC");
    if (cc && *cc) cands[nc] = cc, labels[nc++] = "$CC";
#if defined(__clang__)
    /* An instrumented module needs the sanitizer runtime of devarray's own compiler. */
    if (hk_asan()) cands[nc] = "clang", labels[nc++] = NULL;
#endif
    cands[nc] = "cc", labels[nc++] = NULL;
    cands[nc] = "gcc", labels[nc++] = NULL;
    cands[nc] = "clang", labels[nc++] = NULL;
  }
  for (int i = 0; i < nc && !path && !oom; i++) {
    hk_free_words(words);
    words = NULL;
    nwords = 0;
    if (!hk_words(cands[i], &words, &nwords)) {
      oom = true;
      break;
    }
    int w = snprintf(tried + tn, sizeof tried - tn, "%s%s%s\"%s\"", tn ? ", " : "",
                     labels[i] ? labels[i] : "", labels[i] ? " " : "", cands[i]);
    if (w > 0 && tn + (size_t)w < sizeof tried) tn += (size_t)w;
    if (nwords == 0) continue;
    path = hk_which(words[0]);
    if (!path && errno == ENOMEM) oom = true;
  }
  if (oom || !path) {
    hk_free_words(words);
    k->cc_probed = true;
    k->cc_status = oom ? DV_ERR_HOST_OUT_OF_MEMORY : DV_ERR_NO_COMPILER;
    if (oom)
      snprintf(k->cc_msg, sizeof k->cc_msg, "out of memory looking for a C compiler");
    else
      snprintf(k->cc_msg, sizeof k->cc_msg,
               "host simulator: no C compiler for kernels: tried %s (on PATH); set the host_cc "
               "option (DV_HOST_CC) or CC", tried);
    if (oom) k->cc_probed = false; /* try again later */
    return dv__error(oom ? DV_ERR_HOST_OUT_OF_MEMORY : DV_ERR_NO_COMPILER, "%s", k->cc_msg);
  }
  dv__free(words[0]);
  words[0] = path;

  /* Identity: path, first line of --version, -dumpmachine, flags. */
  char dir[512], out[600], version[256] = "?", machine[128] = "?";
  bool probe_oom = false;
  if (hk_tempdir(dir, sizeof dir)) {
    hk_path(out, sizeof out, dir, "probe.txt");
    const char *what[2] = {"--version", "-dumpmachine"};
    char *dst[2] = {version, machine};
    size_t cap[2] = {sizeof version, sizeof machine};
    for (int i = 0; i < 2; i++) {
      char *argv[64];
      int a = 0;
      for (int j = 0; j < nwords && a < 60; j++) argv[a++] = words[j];
      argv[a++] = (char *)what[i];
      argv[a] = NULL;
      int code = -1;
      if (hk_spawn(argv, out, &code) == 0 && code == 0) {
        errno = 0;
        char *txt = hk_read_file(out, NULL);
        if (txt) {
          size_t l = strcspn(txt, "\n");
          snprintf(dst[i], cap[i], "%.*s", (int)l, txt);
          dv__free(txt);
        } else if (errno == ENOMEM) {
          probe_oom = true; /* not an identity to keep */
        }
      }
    }
    unlink(out);
    rmdir(dir);
  }
  size_t need = 96 + strlen(path) + strlen(version) + strlen(machine) + strlen(k->cflags) +
                strlen(k->cc_option);
  char *ident = probe_oom ? NULL : dv__malloc(need);
  if (!ident) {
    hk_free_words(words);
    return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot record the compiler's identity");
  }
  /* The runtime trailer is compiled into every module: a change to it must
   * not load modules built with the old one from the cache. */
  uint64_t th = 1469598103934665603ull;
  for (size_t i = 0; hk_trailer[i]; i++) th = (th ^ (unsigned char)hk_trailer[i]) * 1099511628211ull;
  snprintf(ident, need, "cc=%s|%s|%s|flags=%s|asan=%d|check=%d|fiber|rt=%016llx", path, version,
           machine, k->cflags, hk_asan() ? 1 : 0, k->check, (unsigned long long)th);
  k->cc_argv = words;
  k->cc_argc = nwords;
  k->ident = ident;
  k->cc_probed = true;
  k->cc_status = DV_OK;
  return DV_OK;
}

dv_status hk_kernel_target_id(void *state, char *buf, size_t cap) {
  hk_state *k = ((hb_state_head *)state)->k;
  pthread_mutex_lock(&k->lock);
  dv_status rc = hk_probe_compiler(k);
  if (!rc) {
    size_t n = strlen(k->ident);
    if (n < cap) {
      memcpy(buf, k->ident, n + 1);
    } else if (cap) {
      /* Too long for the caller: a prefix and a hash of the whole. */
      uint64_t h = 1469598103934665603ull;
      for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)k->ident[i]) * 1099511628211ull;
      char tail[24];
      snprintf(tail, sizeof tail, "#%016llx", (unsigned long long)h);
      size_t tl = strlen(tail);
      if (cap > tl + 1) {
        memcpy(buf, k->ident, cap - tl - 1);
        memcpy(buf + cap - tl - 1, tail, tl + 1);
      } else {
        buf[0] = 0;
      }
    }
  }
  pthread_mutex_unlock(&k->lock);
  return rc;
}

dv_status hk_kernel_limits(void *state, dv_klimits *out) {
  hk_state *k = ((hb_state_head *)state)->k;
  memset(out, 0, sizeof *out);
  out->max_threads_per_block = HK_MAX_THREADS;
  out->max_block[0] = 1024, out->max_block[1] = 1024, out->max_block[2] = 64;
  out->max_grid[0] = 2147483647u, out->max_grid[1] = 65535, out->max_grid[2] = 65535;
  out->max_shared_per_block = HK_SHARED_LIMIT;
  out->max_shared_per_block_optin = HK_SHARED_LIMIT;
  out->max_constant_bytes = HK_CONST_LIMIT;
  out->max_arg_bytes = 0;
  out->wave_size = k->wave;
  return DV_OK;
}

/* ========================================================================== */
/* Modules and kernels                                                         */
/* ========================================================================== */

struct dv_bkernel {
  dv_bmodule *m;
  char *name;
  void (*fn)(void);
  const char *sig; /* the module's dv__sig_<name>: the parameter list as written */
  dv_bkernel *next;
};

struct dv_bmodule {
  hk_state *k;
  void *dl;
  int fd; /* keeps the deleted file's inode (see the top) */
  char *name;
  unsigned char *cbuf;
  size_t cbytes;
  dv__hthread **(*self_slot)(void);
  bool check;    /* kernel_check or DV_BUILD_DEBUG */
  pthread_mutex_t lock;
  dv_bkernel *kernels;
};

static const dv__host_rt hk_rt; /* the runtime (below) */

static void hk_module_free(dv_bmodule *m) {
  if (!m) return;
  for (dv_bkernel *kn = m->kernels, *next; kn; kn = next) {
    next = kn->next;
    dv__free(kn->name);
    dv__free(kn);
  }
  if (m->dl) dlclose(m->dl);
  if (m->fd >= 0) close(m->fd);
  pthread_mutex_destroy(&m->lock);
  dv__free(m->name);
  dv__free(m);
}

/* dlopen the module at path (then the name may go), fill in the runtime and
 * the initial constants. */
static dv_status hk_load_path(hk_state *k, const dv_build_req *req, const char *path, int fd,
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
  m->name = name;
  m->fd = fd >= 0 ? fd : open(path, O_RDONLY | O_CLOEXEC);
  m->check = k->check || (req->flags & DV_BUILD_DEBUG);
  dv_status rc = DV_OK;
  if (m->fd < 0) {
    rc = dv__error(DV_ERR_LIBRARY_LOAD, "cannot open the compiled module %s: %s", path,
                   strerror(errno));
    goto fail;
  }
  m->dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!m->dl) {
    const char *e = dlerror();
    rc = dv__error(DV_ERR_LIBRARY_LOAD, "cannot load kernel module %s: %s", m->name,
                   e ? e : "dlopen failed");
    goto fail;
  }
  const dv__host_rt **rt = dlsym(m->dl, "dv__rt");
  void *slot = dlsym(m->dl, "dv__self_slot");
  memcpy(&m->self_slot, &slot, sizeof slot); /* POSIX: dlsym's pointer works as a function's */
  if (!rt || !slot) {
    rc = dv__error(DV_ERR_SYMBOL_LOAD, "kernel module %s lacks the host runtime's symbols "
                   "(dv__rt, dv__self_slot): not built by this devarray", m->name);
    goto fail;
  }
  *rt = &hk_rt;
  if (req->const_bytes) {
    m->cbuf = dlsym(m->dl, "dv__cbuf");
    if (!m->cbuf) {
      rc = dv__error(DV_ERR_SYMBOL_LOAD, "kernel module %s lacks its constant buffer dv__cbuf",
                     m->name);
      goto fail;
    }
    m->cbytes = req->const_bytes;
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
static dv_status hk_load_memfd(hk_state *k, const dv_build_req *req, const void *image,
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
static dv_status hk_load(hk_state *k, const dv_build_req *req, const char *path,
                         const void *image, size_t n, dv_bmodule **out) {
  dv_status rc = hk_load_path(k, req, path, -1, out);
  if (rc != DV_ERR_LIBRARY_LOAD) return rc;
  char first[512];
  snprintf(first, sizeof first, "%s", dv_last_error());
  dv_status r2 = hk_load_memfd(k, req, image, n, out);
  if (r2 == DV_OK || r2 == DV_ERR_HOST_OUT_OF_MEMORY) return r2;
  return dv__error(rc, "%s", first);
}

/* The first lines of a compiler log, for the detail message. */
static void hk_log_head(const char *log, char *buf, size_t cap) {
  size_t n = 0;
  int lines = 0;
  while (log[n] && n + 1 < cap && lines < 6) {
    if (log[n] == '\n') lines++;
    n++;
  }
  memcpy(buf, log, n);
  buf[n] = 0;
}

dv_status hk_module_build(void *state, const dv_build_req *req, dv_bmodule **out, void **image,
                          size_t *image_size, char **log) {
  hk_state *k = ((hb_state_head *)state)->k;
  *out = NULL;
  if (image) *image = NULL;
  if (image_size) *image_size = 0;
  if (log) *log = NULL;
  if (!req || !req->source) return dv__error(DV_ERR_NULL_ARGUMENT, "build request without source");
  pthread_mutex_lock(&k->lock);
  dv_status rc = hk_probe_compiler(k);
  pthread_mutex_unlock(&k->lock);
  if (rc) return rc;
  bool check = k->check || (req->flags & DV_BUILD_DEBUG);

  char dir[512], src[600], so[600], out_path[600];
  if (!hk_tempdir(dir, sizeof dir))
    return dv__error(DV_ERR_DRIVER, "host simulator: cannot create a temporary directory: %s",
                     strerror(errno));
  hk_path(src, sizeof src, dir, "kernel.c");
  hk_path(so, sizeof so, dir, "kernel.so");
  hk_path(out_path, sizeof out_path, dir, "compiler.txt");

  char **argv = NULL;
  int argc = 0;
  char *text = NULL, *logtxt = NULL;
  size_t sl = strlen(req->source);
  text = dv__malloc(sl + sizeof hk_trailer);
  if (!text) {
    rc = dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot assemble the compiler's command line");
    goto done;
  }
  memcpy(text, req->source, sl);
  memcpy(text + sl, hk_trailer, sizeof hk_trailer);
  if (!hk_write_file(src, text, sl + sizeof hk_trailer - 1)) {
    rc = dv__error(DV_ERR_DRIVER, "host simulator: cannot write %s: %s", src, strerror(errno));
    goto done;
  }
  int code = -1;
  for (int attempt = 0; attempt < 2; attempt++) {
    /* Stack clash protection in every build: a frame bigger than a page
     * touches each page from the top, so a local array larger than the
     * fiber's stack hits the guard page below it (reported as a stack
     * overflow) rather than another fiber's stack.  A compiler that does
     * not know the option (gcc < 8, clang < 11) compiles without it. */
    pthread_mutex_lock(&k->lock);
    bool clash = !k->no_clash;
    pthread_mutex_unlock(&k->lock);
    hk_free_words(argv);
    argv = NULL;
    argc = 0;
    /* The command line: compiler (and its words), ours, host_cflags, the program's options. */
    bool ok = true;
    for (int i = 0; ok && i < k->cc_argc; i++) ok = hk_word(k->cc_argv[i], &argv, &argc);
    if (ok) ok = hk_words("-std=c11 -shared -fPIC -fvisibility=hidden", &argv, &argc);
    if (ok && clash) ok = hk_words("-fstack-clash-protection", &argv, &argc);
    if (ok && check) ok = hk_words("-fstack-protector-strong", &argv, &argc);
    if (ok && hk_asan()) ok = hk_words("-fsanitize=address -fno-omit-frame-pointer", &argv, &argc);
    if (ok) ok = hk_words(k->cflags, &argv, &argc);
    if (ok) ok = hk_words(req->options, &argv, &argc);
    if (ok && (req->flags & DV_BUILD_DEBUG)) ok = hk_words("-g", &argv, &argc);
    if (ok) ok = hk_word("-o", &argv, &argc) && hk_word(so, &argv, &argc) &&
                 hk_word(src, &argv, &argc) && hk_word("-lm", &argv, &argc);
    if (!ok) {
      rc = dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot assemble the compiler's command line");
      goto done;
    }
    int e = hk_spawn(argv, out_path, &code);
    if (e) {
      rc = dv__error(DV_ERR_NO_COMPILER, "host simulator: cannot run the C compiler %s: %s",
                     argv[0], strerror(e));
      goto done;
    }
    dv__free(logtxt);
    errno = 0;
    logtxt = hk_read_file(out_path, NULL);
    if (!logtxt && errno != ENOMEM) logtxt = dv__strdup("");
    if (!logtxt) {
      rc = dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot read the compiler's log");
      goto done;
    }
    if (code == 0 || !clash || !strstr(logtxt, "stack-clash-protection")) break;
    pthread_mutex_lock(&k->lock);
    k->no_clash = true;
    pthread_mutex_unlock(&k->lock);
  }
  if (code != 0) {
    char head[700];
    hk_log_head(logtxt, head, sizeof head);
    rc = dv__error(DV_ERR_COMPILE, "program %s failed to compile (%s exited with %d):\n%s",
                   req->name ? req->name : "kernel", argv[0], code, head);
    goto done;
  }
  size_t n = 0;
  errno = 0;
  char *bytes = hk_read_file(so, &n);
  if (!bytes) {
    rc = errno == ENOMEM
             ? dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "no memory for the compiled module's image")
             : dv__error(DV_ERR_DRIVER, "host simulator: cannot read the compiled module %s", so);
    goto done;
  }
  rc = hk_load(k, req, so, bytes, n, out);
  if (!rc && image) {
    *image = bytes;
    if (image_size) *image_size = n;
  } else {
    dv__free(bytes);
  }
done:
  unlink(src);
  unlink(so);
  unlink(out_path);
  rmdir(dir);
  hk_free_words(argv);
  dv__free(text);
  if (log)
    *log = logtxt;
  else
    dv__free(logtxt);
  return rc;
}

dv_status hk_module_load(void *state, const dv_build_req *req, const void *image,
                         size_t image_size, dv_bmodule **out, char **log) {
  hk_state *k = ((hb_state_head *)state)->k;
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

dv_status hk_module_unload(void *state, dv_bmodule *m) {
  (void)state;
  hk_module_free(m);
  return DV_OK;
}

/* ---- the kernel's parameter list ---------------------------------------- */

/* The kernel layer reads every kernel's declaration and checks launches
 * against it (src/kernel/signature.c, contract.c); the module's exported
 * text (DV_KERNEL's stringified list) serves its cross-check and names a
 * parameter in messages here. */

/* Parameter i (0-based) of the exported list, blanks trimmed, into buf. */
static void hk_param_text(const char *sig, int i, char *buf, size_t cap) {
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

dv_status hk_kernel_get(void *state, dv_bmodule *m, const char *name, dv_bkernel **out) {
  (void)state;
  *out = NULL;
  if (!m || !name) return dv__error(DV_ERR_NULL_ARGUMENT, "kernel_get without module or name");
  char signame[300];
  int w = snprintf(signame, sizeof signame, "dv__sig_%s", name);
  void *fn = dlsym(m->dl, name);
  const char *sig = (w > 0 && (size_t)w < sizeof signame) ? dlsym(m->dl, signame) : NULL;
  if (!fn || !sig)
    return dv__error(DV_ERR_INVALID_ARGUMENT, "program %s has no kernel %s%s", m->name, name,
                     fn ? " (the symbol exists but is not a DV_KERNEL)" : "");
  dv_bkernel *kn = dv__calloc(1, sizeof *kn);
  char *nm = dv__strdup(name);
  if (!kn || !nm) {
    dv__free(kn);
    dv__free(nm);
    return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate a kernel");
  }
  kn->sig = sig;
  kn->m = m;
  kn->name = nm;
  /* A function pointer from dlsym's object pointer (POSIX guarantees it works). */
  memcpy(&kn->fn, &fn, sizeof fn);
  pthread_mutex_lock(&m->lock);
  kn->next = m->kernels;
  m->kernels = kn;
  pthread_mutex_unlock(&m->lock);
  *out = kn;
  return DV_OK;
}

dv_status hk_kernel_attrs(void *state, dv_bkernel *kn, dv_kernel_attrs *out) {
  hk_state *k = ((hb_state_head *)state)->k;
  memset(out, 0, sizeof *out);
  out->max_threads_per_block = HK_MAX_THREADS;
  out->static_shared_bytes = 0; /* known only when a block runs */
  out->max_dynamic_shared_bytes = HK_SHARED_LIMIT;
  out->local_bytes_per_thread = 0;
  out->constant_bytes = kn->m->cbytes;
  out->registers = -1;
  out->wave_size = k->wave;
  return DV_OK;
}

dv_status hk_kernel_params(void *state, dv_bkernel *kn, dv_bparam *out, size_t cap, size_t *n,
                           const char **sig) {
  (void)state, (void)out, (void)cap;
  *n = 0;
  *sig = kn->sig;
  return DV_OK;
}

/* ========================================================================== */
/* Launches                                                                    */
/* ========================================================================== */

typedef union hk_val {
  void *p;
  uint64_t u;
  double d;
  unsigned char raw[8];
} hk_val;

/* The System V x86-64 calling convention, done by hand: a kernel's
 * arguments are the same for every thread of a launch, so they are sorted
 * once into the registers and stack slots the ABI gives them (integers and
 * pointers: rdi, rsi, rdx, rcx, r8, r9; float and double: xmm0-7; the rest
 * and structs by value: 8-byte stack slots in order) and each thread is a
 * plain call through a prototype with all of those (a callee ignores the
 * registers and slots past its own parameters; the caller pops them).
 * libffi classifies and copies every argument on every call, which cost
 * more than a thread of a small kernel.  Elsewhere, or for an argument
 * this does not know, libffi makes every call. */
#if defined(__x86_64__) && defined(__linux__)
#define HK_FLAT 1
#define HK_FLAT_STACK 40
typedef struct hk_flat {
  bool ok;
  uint64_t g[6], x[8], s[HK_FLAT_STACK];
} hk_flat;
#endif

struct hk_job {
  hk_state *k;
  dv_bkernel *kern;
  uint32_t grid[3], block[3];
  size_t dyn;
  uint64_t nblocks;
  int nthreads;
#if HK_FLAT
  hk_flat flat;
#endif
  ffi_cif cif;
  size_t nargs;
  ffi_type **types;
  void **values;
  hk_val *vals;
  dv_bkview *views;
  hb_block **held; /* one reference each */
  int *held_param; /* which parameter */
  size_t nheld;

  /* While it runs. */
  _Atomic uint64_t next; /* next block to take */
  _Atomic int abort;     /* a block faulted: take no more */
  pthread_mutex_t em;
  dv_status err;
  uint64_t err_block;
  char msg[768];
  /* Helper threads (hk_state.pm). */
  int want, joined, active;
  hk_job *jnext;
  bool listed;
  /* dv_printf's output (hk_rt_printf), written when the launch has run. */
  pthread_mutex_t pmu;
  char *out;         /* the calls' texts, one after the other */
  size_t out_len, out_cap;
  size_t out_used;   /* charged against host_printf_buffer */
  struct hk_rec *recs;
  size_t nrecs, recs_cap;
  uint64_t dropped, dropped_bytes;
};

/* The kernel's view struct by value: 17 int64 (kernel.h's dv_kview). */
static ffi_type *hk_view_elems[2 + 2 * DV_BKVIEW_MAXDIMS] = {
    &ffi_type_sint64, &ffi_type_sint64, &ffi_type_sint64, &ffi_type_sint64, &ffi_type_sint64,
    &ffi_type_sint64, &ffi_type_sint64, &ffi_type_sint64, &ffi_type_sint64, &ffi_type_sint64,
    &ffi_type_sint64, &ffi_type_sint64, &ffi_type_sint64, &ffi_type_sint64, &ffi_type_sint64,
    &ffi_type_sint64, &ffi_type_sint64, NULL};
static ffi_type hk_view_ffi = {sizeof(dv_bkview), _Alignof(dv_bkview), FFI_TYPE_STRUCT,
                               hk_view_elems};
_Static_assert(sizeof(dv_bkview) == 17 * sizeof(int64_t), "dv_bkview is 17 int64");
_Static_assert(sizeof(dv_kview) == sizeof(dv_bkview), "kernel.h's dv_kview matches dv_bkview");

static ffi_type *hk_dtype_ffi(dv_type_id t) {
  switch (t) {
    case DV_BOOL: return &ffi_type_uint8;
    case DV_INT8: return &ffi_type_sint8;
    case DV_INT16: return &ffi_type_sint16;
    case DV_INT32: return &ffi_type_sint32;
    case DV_INT64: return &ffi_type_sint64;
    case DV_UINT8: return &ffi_type_uint8;
    case DV_UINT16: return &ffi_type_uint16;
    case DV_UINT32: return &ffi_type_uint32;
    case DV_UINT64: return &ffi_type_uint64;
    case DV_FLOAT16: return &ffi_type_uint16; /* dv_f16: 16-bit storage, passed as an integer */
    case DV_FLOAT32: return &ffi_type_float;
    case DV_FLOAT64: return &ffi_type_double;
    default: return NULL;
  }
}

/* Each lowered argument's libffi type.  The kernel layer has checked the
 * arguments against the kernel's declaration (src/kernel/contract.c), so
 * an array is a buffer and an int64 offset (and a view), and a scalar has
 * the parameter's size and kind; what is left to refuse here is a dtype the
 * simulator cannot pass. */
static dv_status hk_arg_types(const dv_bkernel *kn, const dv_blaunch *bl, ffi_type **types) {
  for (size_t j = 0; j < bl->nargs; j++) {
    const dv_barg *a = &bl->args[j];
    switch (a->kind) {
      case DV_BARG_BUFFER:
        types[j] = &ffi_type_pointer;
        break;
      case DV_BARG_VIEW:
        if (!a->value || a->size != sizeof(dv_bkview))
          return dv__error(DV_ERR_KERNEL_ARGUMENT, "kernel %s, lowered argument %zu: malformed view",
                           kn->name, j);
        types[j] = &hk_view_ffi;
        break;
      case DV_BARG_VALUE: {
        ffi_type *ft = hk_dtype_ffi(a->type);
        if (!ft || !a->value || a->size != ft->size || a->size > sizeof(hk_val))
          return dv__error(DV_ERR_KERNEL_ARGUMENT,
                           "kernel %s, lowered argument %zu: a %zu-byte value of dtype %d cannot be "
                           "passed", kn->name, j, a->size, (int)a->type);
        types[j] = ft;
        break;
      }
      default:
        return dv__error(DV_ERR_KERNEL_ARGUMENT, "kernel %s, lowered argument %zu: unknown kind %d",
                         kn->name, j, (int)a->kind);
    }
  }
  return DV_OK;
}

/* Sort the launch's arguments for hk_call (see hk_flat); leaves flat.ok
 * false for an argument type it does not know or too many stack slots. */
static void hk_flat_build(hk_job *l) {
#if HK_FLAT
  hk_flat *f = &l->flat;
  memset(f, 0, sizeof *f);
  int ng = 0, nx = 0, ns = 0;
  for (size_t j = 0; j < l->nargs; j++) {
    const ffi_type *t = l->types[j];
    const void *v = l->values[j];
    uint64_t u = 0;
    bool sse = false;
    if (t == &hk_view_ffi) { /* class MEMORY: its bytes in stack slots */
      if (ns + (int)(sizeof(dv_bkview) / 8) > HK_FLAT_STACK) return;
      memcpy(&f->s[ns], v, sizeof(dv_bkview));
      ns += (int)(sizeof(dv_bkview) / 8);
      continue;
    }
#define HK_INT(ft, T)         \
  if (t == &ft) {             \
    T x_;                     \
    memcpy(&x_, v, sizeof x_); \
    u = (uint64_t)x_;         \
  } else
    if (t == &ffi_type_pointer) {
      void *p;
      memcpy(&p, v, sizeof p);
      u = (uint64_t)(uintptr_t)p;
    } else HK_INT(ffi_type_sint8, int8_t) HK_INT(ffi_type_sint16, int16_t)
      HK_INT(ffi_type_sint32, int32_t) HK_INT(ffi_type_sint64, int64_t)
      HK_INT(ffi_type_uint8, uint8_t) HK_INT(ffi_type_uint16, uint16_t)
      HK_INT(ffi_type_uint32, uint32_t) HK_INT(ffi_type_uint64, uint64_t)
    if (t == &ffi_type_float) {
      uint32_t b;
      memcpy(&b, v, sizeof b);
      u = b; /* the low half of the register or slot */
      sse = true;
    } else if (t == &ffi_type_double) {
      memcpy(&u, v, sizeof u);
      sse = true;
    } else {
      return;
    }
#undef HK_INT
    if (sse && nx < 8)
      f->x[nx++] = u;
    else if (!sse && ng < 6)
      f->g[ng++] = u;
    else if (ns < HK_FLAT_STACK)
      f->s[ns++] = u;
    else
      return;
  }
  f->ok = true;
#else
  (void)l;
#endif
}

#if HK_FLAT
#define HK_S8(b) uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t
typedef void (*hk_flat_fn)(uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, double,
                           double, double, double, double, double, double, double, HK_S8(0),
                           HK_S8(1), HK_S8(2), HK_S8(3), HK_S8(4));
_Static_assert(HK_FLAT_STACK == 40, "hk_flat_fn passes 40 stack slots");
#undef HK_S8
#endif

/* One simulated thread: the kernel with the launch's arguments. */
static void hk_call(hk_job *l) {
#if HK_FLAT
  const hk_flat *f = &l->flat;
  if (f->ok) {
    hk_flat_fn fn = (hk_flat_fn)l->kern->fn;
    double x[8];
    memcpy(x, f->x, sizeof x); /* bit patterns: a float's in the low half */
    const uint64_t *s = f->s;
    fn(f->g[0], f->g[1], f->g[2], f->g[3], f->g[4], f->g[5], x[0], x[1], x[2], x[3], x[4], x[5],
       x[6], x[7], s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7], s[8], s[9], s[10], s[11],
       s[12], s[13], s[14], s[15], s[16], s[17], s[18], s[19], s[20], s[21], s[22], s[23], s[24],
       s[25], s[26], s[27], s[28], s[29], s[30], s[31], s[32], s[33], s[34], s[35], s[36], s[37],
       s[38], s[39]);
    return;
  }
#endif
  ffi_call(&l->cif, l->kern->fn, NULL, l->values);
}

void hk_launch_free(hk_job *l) {
  if (!l) return;
  for (size_t i = 0; i < l->nheld; i++) l->k->sv->block_unref(l->held[i]);
  pthread_mutex_destroy(&l->em);
  pthread_mutex_destroy(&l->pmu);
  dv__free(l->out);
  dv__free(l->recs);
  dv__free(l->types);
  dv__free(l->values);
  dv__free(l->vals);
  dv__free(l->views);
  dv__free(l->held);
  dv__free(l->held_param);
  dv__free(l);
}

dv_status hk_launch(void *state, dv_bstream *s, dv_bkernel *kn, const dv_blaunch *bl) {
  hk_state *k = ((hb_state_head *)state)->k;
  if (!s || !kn || !bl) return dv__error(DV_ERR_NULL_ARGUMENT, "launch without stream, kernel or config");
  uint64_t threads = 1, blocks = 1;
  static const uint32_t maxb[3] = {1024, 1024, 64}, maxg[3] = {2147483647u, 65535, 65535};
  for (int d = 0; d < 3; d++) {
    if (bl->block[d] < 1 || bl->block[d] > maxb[d] || bl->grid[d] < 1 || bl->grid[d] > maxg[d])
      return dv__error(DV_ERR_LAUNCH_CONFIG,
                       "kernel %s: grid (%u,%u,%u) of blocks (%u,%u,%u) is outside the host "
                       "simulator's limits", kn->name, bl->grid[0], bl->grid[1], bl->grid[2],
                       bl->block[0], bl->block[1], bl->block[2]);
    threads *= bl->block[d];
    blocks *= bl->grid[d];
  }
  if (threads > HK_MAX_THREADS)
    return dv__error(DV_ERR_LAUNCH_CONFIG, "kernel %s: %llu threads per block; the limit is %d",
                     kn->name, (unsigned long long)threads, HK_MAX_THREADS);
  if (bl->dynamic_shared > HK_SHARED_LIMIT)
    return dv__error(DV_ERR_LAUNCH_CONFIG,
                     "kernel %s: %zu bytes of dynamic shared memory; the limit is %zu", kn->name,
                     bl->dynamic_shared, HK_SHARED_LIMIT);
  if (bl->nargs && !bl->args) return dv__error(DV_ERR_NULL_ARGUMENT, "launch arguments are NULL");

  hk_job *l = dv__calloc(1, sizeof *l);
  size_t na = bl->nargs ? bl->nargs : 1;
  if (l) {
    pthread_mutex_init(&l->em, NULL);
    pthread_mutex_init(&l->pmu, NULL);
    l->types = dv__calloc(na, sizeof *l->types);
    l->values = dv__calloc(na, sizeof *l->values);
    l->vals = dv__calloc(na, sizeof *l->vals);
    l->views = dv__calloc(na, sizeof *l->views);
    l->held = dv__calloc(na, sizeof *l->held);
    l->held_param = dv__calloc(na, sizeof *l->held_param);
  }
  if (!l || !l->types || !l->values || !l->vals || !l->views || !l->held || !l->held_param) {
    hk_launch_free(l);
    return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate a kernel launch");
  }
  dv_status rc = hk_arg_types(kn, bl, l->types);
  if (rc) {
    hk_launch_free(l);
    return rc;
  }
  l->k = k;
  l->kern = kn;
  memcpy(l->grid, bl->grid, sizeof l->grid);
  memcpy(l->block, bl->block, sizeof l->block);
  l->dyn = bl->dynamic_shared;
  l->nblocks = blocks;
  l->nthreads = (int)threads;
  l->nargs = bl->nargs;
  int param = -1;
  for (size_t j = 0; j < bl->nargs; j++) {
    const dv_barg *a = &bl->args[j];
    /* A buffer starts an array argument (its offset and view follow); any
     * other value starts a scalar one. */
    if (a->kind == DV_BARG_BUFFER ||
        (a->kind == DV_BARG_VALUE && !(j > 0 && bl->args[j - 1].kind == DV_BARG_BUFFER)))
      param++;
    switch (a->kind) {
      case DV_BARG_BUFFER: {
        hb_block *b = a->buf;
        if (!b) { /* an empty array owns no memory */
          l->vals[j].p = NULL;
          l->values[j] = &l->vals[j];
          break;
        }
        if (atomic_load(&b->freed)) {
          hk_launch_free(l);
          return dv__error(DV_ERR_INVALID_ARGUMENT, "kernel %s, argument %d: its device buffer "
                           "was freed", kn->name, param);
        }
        atomic_fetch_add(&b->refs, 1);
        l->held_param[l->nheld] = param;
        l->held[l->nheld++] = b;
        l->vals[j].p = b->data;
        l->values[j] = &l->vals[j];
        break;
      }
      case DV_BARG_VALUE:
        memcpy(l->vals[j].raw, a->value, a->size);
        l->values[j] = &l->vals[j];
        break;
      case DV_BARG_VIEW:
        memcpy(&l->views[j], a->value, sizeof(dv_bkview));
        l->values[j] = &l->views[j];
        break;
    }
  }
  if (ffi_prep_cif(&l->cif, FFI_DEFAULT_ABI, (unsigned)l->nargs, &ffi_type_void, l->types) !=
      FFI_OK) {
    hk_launch_free(l);
    return dv__error(DV_ERR_KERNEL_ARGUMENT, "kernel %s: libffi cannot build this call",
                     kn->name);
  }
  hk_flat_build(l);
  rc = k->sv->enqueue(s, l);
  if (rc) hk_launch_free(l);
  return rc;
}

/* ========================================================================== */
/* Executors: an OS thread that runs blocks                                    */
/* ========================================================================== */

typedef enum { HK_T_NEW, HK_T_RUN, HK_T_BAR, HK_T_WAVE, HK_T_EXIT, HK_T_FAULT } hk_tstate;

typedef struct hk_fib hk_fib;

/* A simulated thread of the running block. */
typedef struct hk_thr {
  int state; /* hk_tstate */
  int site, line;
  int op;      /* HK_T_WAVE: the wave operation (dv__wave_*), -1 a wave barrier */
  unsigned wphase; /* wave operations done: its parity picks the slot of wv */
  dv_u64 wv[2];    /* the value given to a wave operation (two slots: see hk_rt_wave) */
  hk_fib *fib; /* the fiber it runs on */
} hk_thr;

/* A fiber: a runner (threads one after the other) until its thread waits
 * at a barrier; from then on that thread's. */
struct hk_fib {
  fb_fiber f;
  bool taken; /* its thread waited at a barrier: run no other thread */
  bool done;  /* returned (its stack holds nothing) */
};

typedef struct hk_slot {
  size_t off, bytes;
  const char *name; /* static string of the kernel's module */
  int line;
} hk_slot;

typedef struct hk_exec {
  hk_state *k;
  fb_fiber sched;
  /* Fiber stacks: nstacks of `stride` bytes, a guard page at the bottom of each. */
  unsigned char *stacks;
  size_t nstacks, stride, map_bytes;
  hk_thr *thr;
  dv__hthread *ht;
  hk_fib *fib;
  size_t cap; /* entries of thr, ht and fib */
  /* Alternate signal stack. */
  void *alt;
  stack_t alt_old;
  bool alt_set;
  /* Shared memory of the running block. */
  unsigned char *arena;
  hk_slot slots[HK_MAX_SLOTS];
  int nslots;
  int *site_slot; /* site -> slot + 1 */
  int site_cap;
  size_t arena_used, static_bytes;
  unsigned char *dyn;
  size_t dyn_bytes;
  /* The running block. */
  hk_job *l;
  dv_bmodule *m;
  uint64_t block;
  int n;           /* threads */
  int nfib;        /* fibers made for this block */
  int next_thread; /* the next one a runner takes */
  int cur;         /* simulated thread running */
  hk_fib *rfib;    /* the fiber running */
  bool direct;     /* every thread has its fiber: a waiting one switches to the next */
  /* Threads waiting at a barrier (HK_T_BAR) and at a wave barrier, counted
   * as they arrive; bar_mixed: not all of the former at bar_site. */
  int nbar, nwave, bar_site;
  bool bar_mixed;
  dv__hthread **self;
  sigjmp_buf jb;
  volatile sig_atomic_t in_kernel;
  volatile int sig, sig_code;
  void *volatile sig_addr;
  void *volatile sig_sp; /* the interrupted stack pointer (NULL: unknown here) */
  char fault[700];
} hk_exec;

static _Thread_local hk_exec *hk_cur; /* this OS thread's executor */

static void hk_unmap_stacks(hk_exec *ex) {
  if (!ex->stacks) return;
#if DV_HOST_ASAN
  ASAN_UNPOISON_MEMORY_REGION(ex->stacks, ex->map_bytes);
#endif
  munmap(ex->stacks, ex->map_bytes);
  ex->stacks = NULL;
  ex->nstacks = 0;
  ex->map_bytes = 0;
}

static void hk_exec_free(hk_exec *ex) {
  if (!ex) return;
  for (size_t i = 0; i < ex->cap; i++) fb_release(&ex->fib[i].f);
  hk_unmap_stacks(ex);
  if (ex->alt_set) {
    stack_t cur;
    /* Put back what was there (or nothing). */
    if (sigaltstack(NULL, &cur) == 0 && cur.ss_sp == ex->alt) sigaltstack(&ex->alt_old, NULL);
  }
  if (ex->alt) munmap(ex->alt, HK_ALTSTACK);
  fb_sched_fini(&ex->sched);
  dv__free(ex->thr);
  dv__free(ex->ht);
  dv__free(ex->fib);
  dv__free(ex->arena);
  dv__free(ex->site_slot);
  dv__free(ex);
}

static hk_exec *hk_exec_new(hk_state *k) {
  hk_exec *ex = dv__calloc(1, sizeof *ex);
  if (!ex) return NULL;
  ex->k = k;
  fb_sched_init(&ex->sched);
  ex->arena = dv__malloc(HK_ARENA_BYTES);
  if (!ex->arena) {
    hk_exec_free(ex);
    return NULL;
  }
  /* An alternate signal stack, unless the thread has a big enough one. */
  stack_t cur;
  if (sigaltstack(NULL, &cur) == 0 && ((cur.ss_flags & SS_DISABLE) || cur.ss_size < HK_ALTSTACK)) {
    void *p = mmap(NULL, HK_ALTSTACK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p != MAP_FAILED) {
      ex->alt = p;
      stack_t ss = {.ss_sp = p, .ss_flags = 0, .ss_size = HK_ALTSTACK};
      if (sigaltstack(&ss, &ex->alt_old) == 0) ex->alt_set = true;
    }
  }
  return ex;
}

/* Room for n simulated threads, fibers and fiber stacks. */
static bool hk_exec_reserve(hk_exec *ex, int n) {
  int nf = n;
  if ((size_t)n > ex->cap) {
    hk_thr *t = dv__calloc((size_t)n, sizeof *t);
    dv__hthread *h = dv__calloc((size_t)n, sizeof *h);
    hk_fib *f = dv__calloc((size_t)n, sizeof *f);
    if (!t || !h || !f) {
      dv__free(t);
      dv__free(h);
      dv__free(f);
      return false;
    }
    if (ex->cap) memcpy(f, ex->fib, ex->cap * sizeof *f); /* keeps ThreadSanitizer's fibers */
    dv__free(ex->thr);
    dv__free(ex->ht);
    dv__free(ex->fib);
    ex->thr = t;
    ex->ht = h;
    ex->fib = f;
    ex->cap = (size_t)n;
  }
  size_t page = ex->k->page;
  size_t stride = ex->k->fiber_stack + page;
  if ((size_t)nf > ex->nstacks || stride != ex->stride) {
    hk_unmap_stacks(ex);
    size_t bytes = stride * (size_t)nf;
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
    if (p == MAP_FAILED) return false;
    ex->stacks = p;
    ex->map_bytes = bytes;
    ex->stride = stride;
    ex->nstacks = (size_t)nf;
    for (int i = 0; i < nf; i++) mprotect(ex->stacks + (size_t)i * stride, page, PROT_NONE);
  }
  return true;
}

static void hk_coords(uint64_t lin, const uint32_t dim[3], unsigned c[3]) {
  c[0] = (unsigned)(lin % dim[0]);
  c[1] = (unsigned)((lin / dim[0]) % dim[1]);
  c[2] = (unsigned)(lin / ((uint64_t)dim[0] * dim[1]));
}

/* "kernel K, block (x,y,z)" */
static int hk_where(const hk_exec *ex, char *buf, size_t cap) {
  unsigned b[3];
  hk_coords(ex->block, ex->l->grid, b);
  return snprintf(buf, cap, "kernel %s, block (%u,%u,%u)", ex->l->kern->name, b[0], b[1], b[2]);
}

static void hk_thread_name(const hk_exec *ex, int i, char *buf, size_t cap) {
  unsigned t[3];
  hk_coords((uint64_t)i, ex->l->block, t);
  snprintf(buf, cap, "thread (%u,%u,%u)", t[0], t[1], t[2]);
}

/* Stop the calling simulated thread's block with a fault; never returns. */
__attribute__((noreturn, format(printf, 2, 3))) static void hk_fault(hk_exec *ex, const char *fmt,
                                                                     ...) {
  char what[480], where[160], who[64];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  hk_where(ex, where, sizeof where);
  hk_thread_name(ex, ex->cur, who, sizeof who);
  hk_fmt(ex->fault, sizeof ex->fault, "%s, %s: %s", where, who, what);
  ex->thr[ex->cur].state = HK_T_FAULT;
  fb_yield(&ex->rfib->f, true); /* not `done`: its stack is abandoned */
  __builtin_trap();             /* never resumed */
}

/* ---- the runtime the kernels call (dv__rt) -------------------------------- */

/* A canary, not ASan poison, even in ASan builds: a poisoned redzone would
 * make ASan abort the process at the bad write, where every other build
 * reports the array and block and goes on (and the kernel suite checks
 * that report in the ASan build too). */
static void hk_fill_redzone(unsigned char *p) { memset(p, HK_CANARY, HK_REDZONE); }

static void *hk_rt_shared(int site, size_t bytes, size_t align, const char *name, int line) {
  hk_exec *ex = hk_cur;
  if (site < 0 || site >= (1 << 20)) hk_fault(ex, "shared array %s: bad site id %d", name, site);
  if (site >= ex->site_cap) {
    int ncap = ex->site_cap ? ex->site_cap : 64;
    while (ncap <= site) ncap *= 2;
    int *ns = dv__calloc((size_t)ncap, sizeof *ns);
    if (!ns) hk_fault(ex, "out of host memory for shared array %s", name);
    if (ex->site_cap) memcpy(ns, ex->site_slot, (size_t)ex->site_cap * sizeof *ns);
    dv__free(ex->site_slot);
    ex->site_slot = ns;
    ex->site_cap = ncap;
  }
  int s = ex->site_slot[site];
  if (s) {
    hk_slot *sl = &ex->slots[s - 1];
    if (sl->bytes != bytes)
      hk_fault(ex, "shared array %s (%s:%d) is declared with %zu bytes here but %zu bytes by "
               "another thread", name, ex->m->name, line, bytes, sl->bytes);
    return ex->arena + sl->off;
  }
  /* First use in this block: a fresh slot, poisoned, with a redzone. */
  if (ex->static_bytes + bytes < bytes || ex->static_bytes + bytes + ex->dyn_bytes > HK_SHARED_LIMIT)
    hk_fault(ex, "shared memory exceeds the device's %zu bytes per block: %zu bytes of static "
             "arrays up to %s (%s:%d) plus %zu bytes of dynamic shared memory", HK_SHARED_LIMIT,
             ex->static_bytes + bytes, name, ex->m->name, line, ex->dyn_bytes);
  if (align < 16) align = 16;
  if (align & (align - 1)) hk_fault(ex, "shared array %s: alignment %zu", name, align);
  size_t off = (ex->arena_used + align - 1) & ~(align - 1);
  if (ex->nslots >= HK_MAX_SLOTS || off + bytes + HK_REDZONE > HK_ARENA_BYTES)
    hk_fault(ex, "too many shared arrays (at most %d per block)", HK_MAX_SLOTS);
  memset(ex->arena + off, HK_POISON, bytes);
  hk_fill_redzone(ex->arena + off + bytes);
  hk_slot *sl = &ex->slots[ex->nslots++];
  sl->off = off;
  sl->bytes = bytes;
  sl->name = name;
  sl->line = line;
  ex->site_slot[site] = ex->nslots;
  ex->arena_used = off + bytes + HK_REDZONE;
  ex->static_bytes += bytes;
  return ex->arena + off;
}

static unsigned char *hk_rt_dyn(size_t *bytes) {
  hk_exec *ex = hk_cur;
  if (bytes) *bytes = ex->dyn_bytes;
  return ex->dyn;
}

static void *hk_rt_dyn_take(size_t *cursor, size_t bytes, size_t align, const char *name,
                            int line) {
  hk_exec *ex = hk_cur;
  if (!align || (align & (align - 1))) align = 1;
  size_t c = (*cursor + align - 1) & ~(align - 1);
  if (c < *cursor || c + bytes < c || c + bytes > ex->dyn_bytes)
    hk_fault(ex, "dynamic shared array %s (%s:%d) needs bytes [%zu, %zu) of dynamic shared "
             "memory, but the launch gave %zu bytes (dynamic_shared)", name, ex->m->name, line, c,
             c + bytes, ex->dyn_bytes);
  *cursor = c + bytes;
  return ex->dyn + c;
}

/* The running thread waits at a barrier.  Once every thread has its fiber,
 * it switches straight to the next thread of the scheduler's pass (one
 * switch per thread and barrier, not two, and both sides of the switch have
 * the same call stack); the last one of the pass goes back to the
 * scheduler, which decides whom a barrier releases. */
static void hk_wait(hk_exec *ex, int state, int site, int line) {
  int i = ex->cur;
  hk_thr *thr = ex->thr, *t = &thr[i];
  t->state = state;
  t->site = site;
  t->line = line;
  if (state == HK_T_BAR) {
    if (ex->nbar++ == 0)
      ex->bar_site = site;
    else if (site != ex->bar_site)
      ex->bar_mixed = true;
  } else {
    ex->nwave++;
  }
  hk_fib *from = ex->rfib;
  if (ex->direct) {
    const int n = ex->n;
    for (int j = i + 1; j < n; j++) {
      if (thr[j].state != HK_T_RUN) continue;
      hk_fib *to = thr[j].fib;
      ex->cur = j;
      ex->rfib = to;
      *ex->self = &ex->ht[j];
      fb_switch(&from->f, &to->f);
      return;
    }
  }
  fb_yield(&from->f, false);
}

static void hk_rt_barrier(int site, int fence, int line) {
  (void)fence; /* the threads of a block share one OS thread: memory is coherent */
  hk_wait(hk_cur, HK_T_BAR, site, line);
}

static void hk_rt_wavebarrier(int site, int line) { hk_wait(hk_cur, HK_T_WAVE, site, line); }

static int hk_rt_wave_size(void) { return hk_cur->k->wave; }

static const char *const hk_wave_names[] = {
    "dv_wave_shuffle_idx", "dv_wave_shuffle_up", "dv_wave_shuffle_down", "dv_wave_shuffle_xor",
    "dv_wave_any",         "dv_wave_all",        "dv_wave_ballot"};
#define HK_NWAVE_OPS ((int)(sizeof hk_wave_names / sizeof *hk_wave_names))

/* A wave operation: the caller's lane leaves v in its slot and waits at the
 * wave barrier `site` (hk_schedule releases the wave when every lane of it
 * waits there, and reports it divergent otherwise); then it reads the
 * slots of its wave.  Two slots per thread, used in turn: a lane released
 * from operation k that reaches operation k + 1 before a slower lane has
 * read the values of k writes the other slot, and operation k + 2 cannot
 * begin before every lane has passed k + 1, so a value is never
 * overwritten before the whole wave read it.  A wave of one lane (the
 * block's partial last wave, or host_wave_size 1) needs no wait. */
static dv_u64 hk_rt_wave(int op, dv_u64 v, int arg, int site, int line) {
  hk_exec *ex = hk_cur;
  const int W = ex->k->wave, n = ex->n, i = ex->cur;
  if (op < 0 || op >= HK_NWAVE_OPS)
    hk_fault(ex, "unknown wave operation %d (%s:%d)", op, ex->m->name, line);
  const char *name = hk_wave_names[op];
  if ((op == dv__wave_up || op == dv__wave_down || op == dv__wave_xor) && (arg < 0 || arg >= W))
    hk_fault(ex, "%s (%s:%d): %s %d is outside [0, %d), the wave size (host_wave_size)", name,
             ex->m->name, line, op == dv__wave_xor ? "lane mask" : "delta", arg, W);
  if (op == dv__wave_ballot && W > 64)
    hk_fault(ex, "dv_wave_ballot (%s:%d): its 64-bit mask cannot hold a wave of %d threads "
             "(host_wave_size)", ex->m->name, line, W);
  const int w0 = i - i % W, cnt = (w0 + W < n ? w0 + W : n) - w0, lane = i - w0;
  hk_thr *t = &ex->thr[i];
  const unsigned p = t->wphase++ & 1u;
  t->wv[p] = v;
  if (cnt > 1) {
    t->op = op;
    hk_wait(ex, HK_T_WAVE, site, line);
    t = &ex->thr[i];
    t->op = -1;
  }
  const hk_thr *w = &ex->thr[w0];
  int src = lane;
  switch (op) {
    case dv__wave_idx: src = ((arg % W) + W) % W; break;
    case dv__wave_up: src = lane - arg; break;
    case dv__wave_down: src = lane + arg; break;
    case dv__wave_xor: src = lane ^ arg; break;
    case dv__wave_any:
      for (int j = 0; j < cnt; j++)
        if (w[j].wv[p]) return 1;
      return 0;
    case dv__wave_all:
      for (int j = 0; j < cnt; j++)
        if (!w[j].wv[p]) return 0;
      return 1;
    default: { /* ballot */
      dv_u64 bits = 0;
      for (int j = 0; j < cnt; j++)
        if (w[j].wv[p]) bits |= (dv_u64)1 << j;
      return bits;
    }
  }
  return src >= 0 && src < cnt ? w[src].wv[p] : v;
}

/* One dv_printf call's text in the launch's buffer. */
typedef struct hk_rec {
  uint64_t block, seq;
  size_t off;
  uint32_t len;
  int thread;
} hk_rec;
#define HK_REC_COST 32 /* bytes of host_printf_buffer each call takes besides its text */

/* *p (of *cap items of `size` bytes) with room for `need` items, doubling
 * from `first`.  False: no memory (*p is unchanged). */
static bool hk_grow(void **p, size_t *cap, size_t size, size_t need, size_t first) {
  if (need <= *cap) return true;
  size_t nc = *cap ? *cap : first;
  while (nc < need) nc *= 2;
  void *np = dv__malloc(nc * size);
  if (!np) return false;
  if (*cap) memcpy(np, *p, *cap * size);
  dv__free(*p);
  *p = np;
  *cap = nc;
  return true;
}

/* dv_printf: the text goes to the launch's buffer (hk_print_flush writes it). */
__attribute__((format(printf, 1, 2))) static void hk_rt_printf(const char *fmt, ...) {
  hk_exec *ex = hk_cur;
  hk_job *l = ex->l;
  char small[256];
  va_list ap, ap2;
  va_start(ap, fmt);
  va_copy(ap2, ap);
  int n = vsnprintf(small, sizeof small, fmt, ap);
  va_end(ap);
  pthread_mutex_lock(&l->pmu);
  const size_t cap = l->k->printf_cap;
  bool ok = n >= 0 && l->out_used + (size_t)n + HK_REC_COST <= cap;
  if (ok) ok = hk_grow((void **)&l->out, &l->out_cap, 1, l->out_len + (size_t)n + 1, 4096);
  if (ok) ok = hk_grow((void **)&l->recs, &l->recs_cap, sizeof *l->recs, l->nrecs + 1, 64);
  if (ok) {
    if ((size_t)n < sizeof small)
      memcpy(l->out + l->out_len, small, (size_t)n + 1);
    else
      vsnprintf(l->out + l->out_len, (size_t)n + 1, fmt, ap2);
    l->recs[l->nrecs] = (hk_rec){ex->block, l->nrecs, l->out_len, (uint32_t)n, ex->cur};
    l->nrecs++;
    l->out_len += (size_t)n;
    l->out_used += (size_t)n + HK_REC_COST;
  } else {
    l->dropped++;
    if (n > 0) l->dropped_bytes += (uint64_t)n;
  }
  pthread_mutex_unlock(&l->pmu);
  va_end(ap2);
}

static void hk_rt_fault(const char *what, int line) {
  hk_exec *ex = hk_cur;
  if (line > 0) hk_fault(ex, "%s (%s:%d)", what, ex->m->name, line);
  hk_fault(ex, "%s", what);
}

static const dv__host_rt hk_rt = {
    .version = 2,
    .shared = hk_rt_shared,
    .dyn = hk_rt_dyn,
    .dyn_take = hk_rt_dyn_take,
    .barrier = hk_rt_barrier,
    .wavebarrier = hk_rt_wavebarrier,
    .wave_size = hk_rt_wave_size,
    .fault = hk_rt_fault,
    .wave = hk_rt_wave,
    .print = hk_rt_printf,
};

/* ---- the runner: threads one after the other -------------------------------- */

static void hk_runner_main(void *arg) {
  hk_fib *fb = arg;
  hk_exec *ex = hk_cur;
  hk_job *l = ex->l;
  while (!fb->taken && ex->next_thread < ex->n) {
    int i = ex->next_thread++;
    hk_thr *t = &ex->thr[i];
    t->fib = fb;
    t->state = HK_T_RUN;
    ex->cur = i;
    *ex->self = &ex->ht[i];
    hk_call(l);
    t->state = HK_T_EXIT;
  }
  fb->done = true;
  fb_yield(&fb->f, true);
}

/* ---- the block scheduler -------------------------------------------------- */

/* Index of the first shared slot whose redzone was written, or -1. */
static int hk_bad_redzone(const hk_exec *ex) {
  for (int s = 0; s < ex->nslots; s++) {
    const unsigned char *rz = ex->arena + ex->slots[s].off + ex->slots[s].bytes;
    for (int i = 0; i < HK_REDZONE; i++)
      if (rz[i] != HK_CANARY) return s;
  }
  return -1;
}

static void hk_redzone_fault(hk_exec *ex, int s, const char *when) {
  char where[160];
  hk_where(ex, where, sizeof where);
  const hk_slot *sl = &ex->slots[s];
  if (sl->line > 0)
    hk_fmt(ex->fault, sizeof ex->fault,
             "%s: shared array %s (%s:%d, %zu bytes) was written past its end (its redzone was "
             "overwritten; found %s)", where, sl->name, ex->m->name, sl->line, sl->bytes, when);
  else
    hk_fmt(ex->fault, sizeof ex->fault,
             "%s: %s (%zu bytes) was written past its end (its redzone was overwritten; found %s)",
             where, sl->name, sl->bytes, when);
}

typedef struct hk_group {
  int state, site, line, count, first, op;
} hk_group;

/* Describe why threads [lo, hi) cannot go on. */
static void hk_divergence(hk_exec *ex, int lo, int hi, const char *what) {
  hk_group g[4];
  int ng = 0, more = 0, nexit = 0, first_exit = -1;
  for (int i = lo; i < hi; i++) {
    const hk_thr *t = &ex->thr[i];
    if (t->state == HK_T_EXIT) {
      if (!nexit++) first_exit = i;
      continue;
    }
    int j = 0;
    while (j < ng && !(g[j].state == t->state && g[j].site == t->site)) j++;
    if (j == ng) {
      if (ng == 4) {
        more++;
        continue;
      }
      g[ng++] = (hk_group){t->state, t->site, t->line, 0, i, t->state == HK_T_WAVE ? t->op : -1};
    }
    g[j].count++;
  }
  char buf[700];
  size_t n = (size_t)hk_where(ex, buf, sizeof buf);
#define HK_ADD(...)                                                              \
  do {                                                                           \
    if (n < sizeof buf) {                                                        \
      int w_ = snprintf(buf + n, sizeof buf - n, __VA_ARGS__);                   \
      if (w_ > 0) n += (size_t)w_;                                               \
    }                                                                            \
  } while (0)
  HK_ADD(": %s: ", what);
  for (int j = 0; j < ng; j++) {
    char who[64];
    hk_thread_name(ex, g[j].first, who, sizeof who);
    bool again = false; /* another barrier on the same line */
    for (int q = 0; q < j; q++)
      if (g[q].line == g[j].line) again = true;
    char kind[48];
    if (g[j].state == HK_T_WAVE && g[j].op >= 0 && g[j].op < HK_NWAVE_OPS)
      hk_fmt(kind, sizeof kind, "wave operation %s", hk_wave_names[g[j].op]);
    else
      hk_fmt(kind, sizeof kind, "%sbarrier", g[j].state == HK_T_WAVE ? "wave " : "");
    HK_ADD("%s%d thread%s wait%s at %s%s at %s:%d (first: %s)", j ? ", " : "", g[j].count,
           g[j].count == 1 ? "" : "s", g[j].count == 1 ? "s" : "", again ? "another " : "the ",
           kind, ex->m->name, g[j].line, who);
  }
  if (more) HK_ADD(", %d more thread%s wait elsewhere", more, more == 1 ? "" : "s");
  if (nexit) {
    char who[64];
    hk_thread_name(ex, first_exit, who, sizeof who);
    HK_ADD(", %d thread%s exited (first: %s)", nexit, nexit == 1 ? "" : "s", who);
  }
#undef HK_ADD
  hk_fmt(ex->fault, sizeof ex->fault, "%s", buf);
}

/* Run the fibers of the block until all have returned.  0: done; 1: fault
 * (ex->fault says what). */
static int hk_schedule(hk_exec *ex) {
  const int n = ex->n, W = ex->k->wave;
  const bool check = ex->m->check;
  /* First every thread runs, in order, on runners made as they are needed. */
  while (ex->next_thread < n) {
    hk_fib *fb = &ex->fib[ex->nfib];
    fb->taken = fb->done = false;
    if (fb_prepare(&fb->f, &ex->sched, ex->stacks + (size_t)ex->nfib * ex->stride + ex->k->page,
                   ex->k->fiber_stack, hk_runner_main, fb) != 0) {
      int w = hk_where(ex, ex->fault, sizeof ex->fault);
      if (w > 0 && (size_t)w < sizeof ex->fault)
        hk_fmt(ex->fault + w, sizeof ex->fault - (size_t)w, ": cannot set up a fiber");
      fb->done = true;
      return 1;
    }
    ex->nfib++;
    ex->rfib = fb;
    ex->in_kernel = 1;
    fb_resume(&ex->sched, &fb->f);
    ex->in_kernel = 0;
    if (ex->thr[ex->cur].state == HK_T_FAULT) return 1;
    if (!fb->done) fb->taken = true; /* its thread waits at a barrier */
  }
  /* Then passes over the threads that can run, in order: the scheduler
   * resumes the first, each one that waits switches to the next (hk_wait),
   * and control comes back here when one returns, faults, or waits with
   * none after it. */
  ex->direct = true;
  for (;;) {
    for (int i = 0; i < n;) {
      hk_thr *t = &ex->thr[i];
      if (t->state != HK_T_RUN) {
        i++;
        continue;
      }
      ex->cur = i;
      ex->rfib = t->fib;
      *ex->self = &ex->ht[i];
      ex->in_kernel = 1;
      fb_resume(&ex->sched, &ex->rfib->f);
      ex->in_kernel = 0;
      if (ex->thr[ex->cur].state == HK_T_FAULT) return 1;
      i = ex->cur + 1;
    }
    /* A pass leaves no thread runnable: each one returned or waits. */
    const int nbar = ex->nbar, nwave = ex->nwave;
    if (!nbar && !nwave) {
      int bad = check ? hk_bad_redzone(ex) : -1;
      if (bad >= 0) {
        hk_redzone_fault(ex, bad, "at the end of the block");
        return 1;
      }
      return 0;
    }
    /* Whole waves waiting at one wave barrier go on. */
    bool released = false;
    for (int w0 = 0; nwave && w0 < n; w0 += W) {
      int w1 = w0 + W < n ? w0 + W : n;
      bool all = true;
      for (int i = w0; i < w1 && all; i++)
        all = ex->thr[i].state == HK_T_WAVE && ex->thr[i].site == ex->thr[w0].site;
      if (!all) continue;
      for (int i = w0; i < w1; i++) ex->thr[i].state = HK_T_RUN;
      ex->nwave -= w1 - w0;
      released = true;
    }
    if (released) continue;
    /* The whole block waiting at one barrier goes on. */
    if (nbar == n) {
      if (!ex->bar_mixed) {
        int bad = check ? hk_bad_redzone(ex) : -1;
        if (bad >= 0) {
          char when[160];
          hk_fmt(when, sizeof when, "at the barrier at %s:%d", ex->m->name, ex->thr[0].line);
          hk_redzone_fault(ex, bad, when);
          return 1;
        }
        for (int i = 0; i < n; i++) ex->thr[i].state = HK_T_RUN;
        ex->nbar = 0;
        continue;
      }
    }
    /* Stuck: a divergent barrier. */
    if (nwave) {
      for (int w0 = 0; w0 < n; w0 += W) {
        int w1 = w0 + W < n ? w0 + W : n;
        bool has = false, op = false;
        for (int i = w0; i < w1; i++) {
          has |= ex->thr[i].state == HK_T_WAVE;
          op |= ex->thr[i].state == HK_T_WAVE && ex->thr[i].op >= 0;
        }
        if (!has) continue;
        char what[96];
        hk_fmt(what, sizeof what, "divergent wave %s in wave %d (threads %d-%d)",
               op ? "operation" : "barrier", w0 / W, w0, w1 - 1);
        hk_divergence(ex, w0, w1, what);
        return 1;
      }
    }
    hk_divergence(ex, 0, n, "divergent barrier");
    return 1;
  }
}

static void hk_signal_text(hk_exec *ex) {
  char where[160], who[64], what[300];
  hk_where(ex, where, sizeof where);
  hk_thread_name(ex, ex->cur, who, sizeof who);
  /* A stack overflow: the address is in a guard page (kernels are compiled
   * with -fstack-clash-protection, so a big frame touches the guard below
   * its stack before anything past it), or the stack pointer itself is
   * below the running fiber's stack (a compiler without that option: the
   * frame jumped the guard). */
  uintptr_t a = (uintptr_t)ex->sig_addr, s0 = (uintptr_t)ex->stacks;
  bool guard =
      ex->stacks && a >= s0 && a < s0 + ex->map_bytes && (a - s0) % ex->stride < ex->k->page;
  uintptr_t sp = (uintptr_t)ex->sig_sp;
  const fb_fiber *rf = ex->rfib ? &ex->rfib->f : NULL;
  if (sp && rf && rf->stack_lo && sp < (uintptr_t)rf->stack_lo &&
      (uintptr_t)rf->stack_lo - sp < ((uintptr_t)1 << 40))
    guard = true;
  switch (ex->sig) {
    case SIGSEGV:
    case SIGBUS:
      if (guard) {
        hk_fmt(what, sizeof what, "stack overflow: the thread needs more than its %zu bytes of "
                 "stack (option host_fiber_stack; local arrays live there)", ex->k->fiber_stack);
        break;
      }
      if (ex->sig == SIGBUS) {
        hk_fmt(what, sizeof what, "SIGBUS (bus error) at address %p", ex->sig_addr);
        break;
      }
      hk_fmt(what, sizeof what, "SIGSEGV (invalid memory access) at address %p", ex->sig_addr);
      break;
    case SIGFPE:
      hk_fmt(what, sizeof what, "SIGFPE (%s)",
               ex->sig_code == FPE_INTDIV ? "integer division by zero"
               : ex->sig_code == FPE_INTOVF ? "integer overflow" : "arithmetic exception");
      break;
    case SIGILL:
      hk_fmt(what, sizeof what, "SIGILL (illegal instruction or trap) at %p", ex->sig_addr);
      break;
    default:
      hk_fmt(what, sizeof what, "signal %d", ex->sig);
  }
  hk_fmt(ex->fault, sizeof ex->fault, "%s, %s: %s", where, who, what);
}

/* Where the scheduler comes back to when a signal stops the block. */
static int hk_schedule_guarded(hk_exec *ex) {
  if (sigsetjmp(ex->jb, 1)) {
    fb_escaped(&ex->sched);
    ex->in_kernel = 0;
    hk_signal_text(ex);
    return 1;
  }
  return hk_schedule(ex);
}

static void hk_launch_fail(hk_job *l, uint64_t block, const char *msg) {
  pthread_mutex_lock(&l->em);
  if (!l->err || block < l->err_block) {
    l->err = DV_ERR_KERNEL_FAULT;
    l->err_block = block;
    hk_fmt(l->msg, sizeof l->msg, "%s", msg);
  }
  pthread_mutex_unlock(&l->em);
  atomic_store(&l->abort, 1);
}

static void hk_run_block(hk_exec *ex, hk_job *l, uint64_t b) {
  const int n = l->nthreads;
  if (!hk_exec_reserve(ex, n)) {
    pthread_mutex_lock(&l->em);
    if (!l->err) {
      l->err = DV_ERR_HOST_OUT_OF_MEMORY;
      hk_fmt(l->msg, sizeof l->msg, "kernel %s: no memory for %d fiber stacks of %zu bytes",
               l->kern->name, n, ex->k->fiber_stack);
    }
    pthread_mutex_unlock(&l->em);
    atomic_store(&l->abort, 1);
    return;
  }
  ex->l = l;
  ex->m = l->kern->m;
  ex->block = b;
  ex->n = n;
  ex->nfib = 0;
  ex->next_thread = 0;
  ex->direct = false;
  unsigned bc[3];
  hk_coords(b, l->grid, bc);
  for (int i = 0; i < n; i++) {
    dv__hthread *h = &ex->ht[i];
    unsigned tc[3];
    hk_coords((uint64_t)i, l->block, tc);
    for (int d = 0; d < 3; d++) {
      h->tid[d] = (int)tc[d];
      h->bid[d] = (int)bc[d];
      h->bdim[d] = (int)l->block[d];
      h->gdim[d] = (int)l->grid[d];
    }
    h->block = ex;
  }
  /* Shared memory: the dynamic area first, then static arrays as they come. */
  if (ex->site_cap) memset(ex->site_slot, 0, (size_t)ex->site_cap * sizeof *ex->site_slot);
  ex->nslots = 0;
  ex->static_bytes = 0;
  ex->dyn = ex->arena;
  ex->dyn_bytes = l->dyn;
  memset(ex->dyn, HK_POISON, l->dyn);
  hk_fill_redzone(ex->arena + l->dyn);
  ex->slots[0] = (hk_slot){0, l->dyn, "dynamic shared memory", 0};
  ex->nslots = 1;
  ex->arena_used = l->dyn + HK_REDZONE;
  ex->self = ex->m->self_slot();
  ex->fault[0] = 0;
  for (int i = 0; i < n; i++) {
    hk_thr *t = &ex->thr[i];
    t->state = HK_T_NEW, t->fib = NULL, t->op = -1, t->wphase = 0;
  }
  ex->nbar = ex->nwave = 0;
  ex->bar_mixed = false;
  ex->cur = 0;
  int rc = hk_schedule_guarded(ex);
  for (int f = 0; f < ex->nfib; f++)
    if (!ex->fib[f].done) fb_abandon(&ex->fib[f].f);
  *ex->self = NULL;
  if (rc) hk_launch_fail(l, b, ex->fault);
}

static void hk_run_blocks(hk_exec *ex, hk_job *l) {
  while (!atomic_load(&l->abort)) {
    uint64_t b = atomic_fetch_add(&l->next, 1);
    if (b >= l->nblocks) break;
    hk_run_block(ex, l, b);
  }
}

/* ========================================================================== */
/* Signals                                                                     */
/* ========================================================================== */

static const int hk_sigs[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL};
#define HK_NSIGS ((int)(sizeof hk_sigs / sizeof *hk_sigs))
static struct sigaction hk_sig_old[HK_NSIGS];
static pthread_mutex_t hk_sig_lock = PTHREAD_MUTEX_INITIALIZER;
static int hk_sig_users;

/* The stack pointer of the interrupted code, where the platform says. */
static void *hk_uc_sp(void *uc) {
#if defined(__linux__) && defined(__x86_64__)
  return uc ? (void *)((ucontext_t *)uc)->uc_mcontext.gregs[REG_RSP] : NULL;
#elif defined(__linux__) && defined(__aarch64__)
  return uc ? (void *)((ucontext_t *)uc)->uc_mcontext.sp : NULL;
#else
  (void)uc;
  return NULL;
#endif
}

static void hk_on_signal(int sig, siginfo_t *si, void *uc) {
  hk_exec *ex = hk_cur;
  if (ex && ex->in_kernel) {
    ex->in_kernel = 0;
    ex->sig = sig;
    ex->sig_code = si ? si->si_code : 0;
    ex->sig_addr = si ? si->si_addr : NULL;
    ex->sig_sp = hk_uc_sp(uc);
    fb_escape(&ex->rfib->f);
    siglongjmp(ex->jb, 1);
  }
  /* Not ours: whoever handled it before. */
  for (int i = 0; i < HK_NSIGS; i++) {
    if (hk_sigs[i] != sig) continue;
    const struct sigaction *old = &hk_sig_old[i];
    if ((old->sa_flags & SA_SIGINFO) && old->sa_sigaction) {
      old->sa_sigaction(sig, si, uc);
    } else if (old->sa_handler == SIG_IGN) {
      return;
    } else if (old->sa_handler == SIG_DFL) {
      signal(sig, SIG_DFL);
      raise(sig); /* delivered when this handler returns (or the fault repeats) */
    } else {
      old->sa_handler(sig);
    }
    return;
  }
}

static void hk_sig_acquire(hk_state *k) {
  pthread_mutex_lock(&hk_sig_lock);
  if (!k->signals) {
    k->signals = true;
    if (hk_sig_users++ == 0) {
      struct sigaction sa;
      memset(&sa, 0, sizeof sa);
      sa.sa_sigaction = hk_on_signal;
      sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
      sigemptyset(&sa.sa_mask);
      for (int i = 0; i < HK_NSIGS; i++) sigaction(hk_sigs[i], &sa, &hk_sig_old[i]);
    }
  }
  pthread_mutex_unlock(&hk_sig_lock);
}

static void hk_sig_release(void) {
  pthread_mutex_lock(&hk_sig_lock);
  if (--hk_sig_users == 0) {
    for (int i = 0; i < HK_NSIGS; i++) {
      struct sigaction cur;
      if (sigaction(hk_sigs[i], NULL, &cur) == 0 && (cur.sa_flags & SA_SIGINFO) &&
          cur.sa_sigaction == hk_on_signal)
        sigaction(hk_sigs[i], &hk_sig_old[i], NULL);
    }
  }
  pthread_mutex_unlock(&hk_sig_lock);
}

/* ========================================================================== */
/* Running a launch: the stream's worker and the helper threads                */
/* ========================================================================== */

static hk_exec *hk_exec_here(hk_state *k) {
  if (hk_cur && hk_cur->k != k) {
    hk_exec_free(hk_cur);
    hk_cur = NULL;
  }
  if (!hk_cur) hk_cur = hk_exec_new(k);
  return hk_cur;
}

void hk_thread_exit(void) {
  hk_exec_free(hk_cur);
  hk_cur = NULL;
}

static void *hk_helper(void *arg) {
  hk_state *k = arg;
  pthread_mutex_lock(&k->pm);
  for (;;) {
    hk_job *job = NULL;
    while (!k->stop) {
      for (hk_job **pp = &k->jobs; *pp; pp = &(*pp)->jnext)
        if ((*pp)->joined < (*pp)->want) {
          job = *pp;
          if (++job->joined >= job->want) { /* full: off the list */
            *pp = job->jnext;
            job->listed = false;
          }
          break;
        }
      if (job) break;
      pthread_cond_wait(&k->pwork, &k->pm);
    }
    if (!job) break;
    job->active++;
    pthread_mutex_unlock(&k->pm);
    hk_exec *ex = hk_exec_here(k);
    if (ex) {
      hk_run_blocks(ex, job);
    } else {
      pthread_mutex_lock(&job->em);
      if (!job->err) {
        job->err = DV_ERR_HOST_OUT_OF_MEMORY;
        hk_fmt(job->msg, sizeof job->msg, "kernel %s: no memory to set up a helper thread",
               job->kern->name);
      }
      pthread_mutex_unlock(&job->em);
      atomic_store(&job->abort, 1);
    }
    pthread_mutex_lock(&k->pm);
    if (--job->active == 0) pthread_cond_broadcast(&k->pdone);
  }
  pthread_mutex_unlock(&k->pm);
  hk_thread_exit();
  return NULL;
}

/* Start the helpers once (one per extra core, at least one, so that blocks
 * can wait for each other even on one core).  False: no memory (try again
 * at the next launch). */
static bool hk_pool_start(hk_state *k) {
  bool ok = true;
  pthread_mutex_lock(&k->pm);
  if (!k->pool_started && !k->stop) {
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    int want = ncpu > 1 ? (int)ncpu - 1 : 1;
    if (want > 63) want = 63;
    k->helpers = dv__calloc((size_t)want, sizeof *k->helpers);
    ok = k->helpers != NULL;
    k->pool_started = ok;
    for (int i = 0; ok && i < want; i++) {
      int e = pthread_create(&k->helpers[i], NULL, hk_helper, k);
      if (e) {
        dv__log(DV_LOG_WARN, "host simulator: %d of %d kernel helper threads started: %s",
                k->nhelpers, want, strerror(e));
        break;
      }
      k->nhelpers++;
    }
  }
  pthread_mutex_unlock(&k->pm);
  return ok;
}

DV_NO_ASAN static void hk_guard_fill(unsigned char *p, size_t n) {
  volatile unsigned char *v = p;
  for (size_t i = 0; i < n; i++) v[i] = HK_GUARD_BYTE;
}

/* The guards of the buffers a launch uses: poisoned for ASan while it runs. */
static void hk_guards_begin(hk_job *l) {
#if DV_HOST_ASAN
  if (!l->k->guarded) return;
  for (size_t i = 0; i < l->nheld; i++) {
    hb_block *b = l->held[i];
    if (b->alias || atomic_fetch_add(&b->kernel_users, 1) != 0) continue;
    ASAN_POISON_MEMORY_REGION(b->data - HB_FRONT, HB_FRONT);
    ASAN_POISON_MEMORY_REGION(b->data + b->bytes, HB_BACK);
  }
#else
  (void)l;
#endif
}

/* After the kernel: with checks on, a guard written is this launch's fault. */
static void hk_guards_end(hk_job *l, bool check) {
  if (!l->k->guarded) return;
  for (size_t i = 0; i < l->nheld; i++) {
    hb_block *b = l->held[i];
    if (b->alias) continue;
#if DV_HOST_ASAN
    if (atomic_fetch_sub(&b->kernel_users, 1) == 1) {
      ASAN_UNPOISON_MEMORY_REGION(b->data - HB_FRONT, HB_FRONT);
      ASAN_UNPOISON_MEMORY_REGION(b->data + b->bytes, HB_BACK);
    }
#endif
    if (!check || l->k->sv->guards_ok(b)) continue;
    char decl[96];
    hk_param_text(l->kern->sig, l->held_param[i], decl, sizeof decl);
    char msg[600];
    hk_fmt(msg, sizeof msg,
             "kernel %s wrote outside the %zu-byte device buffer of argument %d (`%s`): its guard "
             "bytes were overwritten (found after the kernel; the block and thread are unknown)",
             l->kern->name, b->bytes, l->held_param[i], decl);
    pthread_mutex_lock(&l->em);
    if (!l->err) {
      l->err = DV_ERR_KERNEL_FAULT;
      hk_fmt(l->msg, sizeof l->msg, "%s", msg);
    }
    pthread_mutex_unlock(&l->em);
    /* Reported here; put the guards back so the free does not report it again. */
    hk_guard_fill(b->data - HB_FRONT, HB_FRONT);
    hk_guard_fill(b->data + b->bytes, HB_BACK);
  }
}

static int hk_rec_cmp(const void *a, const void *b) {
  const hk_rec *x = a, *y = b;
  if (x->block != y->block) return x->block < y->block ? -1 : 1;
  if (x->thread != y->thread) return x->thread < y->thread ? -1 : 1;
  return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* The launch's dv_printf output to stdout: block then thread order, each
 * line after its thread's coordinates; then what did not fit. */
static void hk_print_flush(hk_job *l) {
  if (!l->nrecs && !l->dropped) return;
  qsort(l->recs, l->nrecs, sizeof *l->recs, hk_rec_cmp);
  flockfile(stdout);
  for (size_t r = 0; r < l->nrecs; r++) {
    const hk_rec *rec = &l->recs[r];
    unsigned b[3], t[3];
    hk_coords(rec->block, l->grid, b);
    hk_coords((uint64_t)rec->thread, l->block, t);
    const char *p = l->out + rec->off, *e = p + rec->len;
    while (p < e) {
      const char *nl = memchr(p, '\n', (size_t)(e - p));
      size_t len = nl ? (size_t)(nl - p) : (size_t)(e - p);
      fprintf(stdout, "[block (%u,%u,%u) thread (%u,%u,%u)] ", b[0], b[1], b[2], t[0], t[1], t[2]);
      fwrite(p, 1, len, stdout);
      fputc('\n', stdout);
      p += len + (nl ? 1 : 0);
    }
  }
  if (l->dropped)
    fprintf(stdout, "[devarray] kernel %s: %llu dv_printf call%s (%llu bytes) dropped: the "
            "launch's output is limited to %zu bytes, %d per call besides its text (option "
            "host_printf_buffer)\n", l->kern->name, (unsigned long long)l->dropped,
            l->dropped == 1 ? "" : "s", (unsigned long long)l->dropped_bytes, l->k->printf_cap,
            HK_REC_COST);
  fflush(stdout);
  funlockfile(stdout);
  dv__free(l->out);
  dv__free(l->recs);
  l->out = NULL;
  l->recs = NULL;
  l->out_len = l->out_cap = l->out_used = l->nrecs = l->recs_cap = 0;
  l->dropped = l->dropped_bytes = 0;
}

dv_status hk_run(hk_job *l, char *msg, size_t cap) {
  hk_state *k = l->k;
  hk_exec *ex = hk_exec_here(k);
  if (!ex) {
    snprintf(msg, cap, "kernel %s: the host simulator cannot set up a thread to run it",
             l->kern->name);
    return DV_ERR_HOST_OUT_OF_MEMORY;
  }
  hk_sig_acquire(k);
  hk_guards_begin(l);
  bool posted = false;
  if (l->nblocks > 1) {
    if (!hk_pool_start(k)) {
      hk_guards_end(l, false);
      snprintf(msg, cap, "kernel %s: no memory to start the host simulator's helper threads",
               l->kern->name);
      return DV_ERR_HOST_OUT_OF_MEMORY;
    }
    pthread_mutex_lock(&k->pm);
    if (k->nhelpers > 0) {
      uint64_t want = l->nblocks - 1 < (uint64_t)k->nhelpers ? l->nblocks - 1 : (uint64_t)k->nhelpers;
      l->want = (int)want;
      l->jnext = k->jobs;
      k->jobs = l;
      l->listed = true;
      posted = true;
      pthread_cond_broadcast(&k->pwork);
    }
    pthread_mutex_unlock(&k->pm);
  }
  hk_run_blocks(ex, l);
  if (posted) {
    pthread_mutex_lock(&k->pm);
    if (l->listed) {
      for (hk_job **pp = &k->jobs; *pp; pp = &(*pp)->jnext)
        if (*pp == l) {
          *pp = l->jnext;
          break;
        }
      l->listed = false;
    }
    while (l->active) pthread_cond_wait(&k->pdone, &k->pm);
    pthread_mutex_unlock(&k->pm);
  }
  hk_guards_end(l, l->kern->m->check);
  hk_print_flush(l);
  if (l->err) {
    snprintf(msg, cap, "%s", l->msg);
    return l->err;
  }
  return DV_OK;
}

/* ========================================================================== */
/* Constants, native handles, foreign memory                                   */
/* ========================================================================== */

dv_status hk_constant_write(void *state, dv_bmodule *m, dv_bstream *s, size_t offset,
                            dv_memref src, size_t bytes) {
  if (!m || !s) return dv__error(DV_ERR_NULL_ARGUMENT, "constant write without module or stream");
  if (offset > m->cbytes || bytes > m->cbytes - offset)
    return dv__error(DV_ERR_INVALID_ARGUMENT,
                     "constant write of %zu bytes at offset %zu outside the %zu-byte constant "
                     "buffer of program %s", bytes, offset, m->cbytes, m->name);
  if (!bytes) return DV_OK;
  dv_rect r;
  memset(&r, 0, sizeof r);
  r.src = src;
  r.dst.ptr = m->cbuf + offset;
  r.width = bytes;
  r.height = 1;
  r.depth = 1;
  return ((hb_state_head *)state)->k->sv->copy_rect(state, s, &r);
}

dv_status hk_native_context(void *state, void **context, void **device) {
  (void)state;
  if (context) *context = NULL;
  if (device) *device = NULL;
  return DV_OK;
}

dv_status hk_native_stream(void *state, dv_bstream *s, void **handle) {
  (void)state;
  (void)s;
  if (handle) *handle = NULL;
  return dv__error(DV_ERR_NOT_SUPPORTED,
                   "the host simulator's streams are worker threads with no native handle");
}

dv_status hk_native_buffer(void *state, void *buf, void **native) {
  (void)state;
  if (!buf) return dv__error(DV_ERR_NULL_ARGUMENT, "buffer is NULL");
  *native = ((hb_block *)buf)->data;
  return DV_OK;
}

dv_status hk_buffer_wrap(void *state, void *native, size_t bytes, void **buf) {
  *buf = NULL;
  if (!native && bytes)
    return dv__error(DV_ERR_INVALID_ARGUMENT, "cannot wrap a NULL pointer of %zu bytes", bytes);
  hb_block *b = ((hb_state_head *)state)->k->sv->alias_new(state, native, bytes);
  if (!b) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate a wrapped buffer");
  *buf = b;
  return DV_OK;
}

dv_status hk_buffer_unwrap(void *state, void *buf) {
  hb_block *b = buf;
  if (!b || !b->alias)
    return dv__error(DV_ERR_INVALID_ARGUMENT, "buffer %p was not made by buffer_wrap", buf);
  atomic_store(&b->freed, true);
  return ((hb_state_head *)state)->k->sv->block_unref(b); /* queued work keeps its own refs */
}
