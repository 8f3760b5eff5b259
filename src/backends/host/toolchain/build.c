/*
 * The host simulator's kernels: the compiler driver and modules.
 *
 * Build.  The kernel layer hands us one translation unit (the dialect
 * header, its prelude, `#line 1 "<program>"`, the user's source).  We append
 * a small trailer (the runtime pointer dv__rt, the thread-local dv__self,
 * a hidden __stack_chk_fail), write it to a private temporary directory and
 * run the system C compiler with posix_spawn (no shell): $host_cc, else
 * $CC, cc, gcc, clang on PATH; `-std=c11 -shared -fPIC -fvisibility=hidden`,
 * then host_cflags, then the program's own options; a missing compiler is
 * DV_ERR_NO_COMPILER naming what was tried, a failed compile DV_ERR_COMPILE
 * with the whole log.  Every build uses -fstack-clash-protection where the
 * compiler has it (a local array bigger than the fiber's stack then hits the
 * guard page below that stack instead of another fiber's stack); with
 * kernel_check, kernels are compiled with -fstack-protector-strong and the
 * trailer's __stack_chk_fail, so a local array written past its end faults
 * the launch instead of aborting; when devarray itself is built with
 * AddressSanitizer, kernels are compiled with -fsanitize=address too (an
 * instrumented .so can only be loaded into an instrumented process).
 *
 * kernel_check=on (the access checks, issue 24): kernels are compiled with
 * -fsanitize=thread, -g1 -gdwarf-4 (line tables for the reports; DWARF 5's
 * file numbering is misread by binutils 2.40's addr2line) and
 * -DDV__ACCESS_CHECK, which makes kernel.h define the hooks the
 * instrumentation calls (hidden, so they bind inside the module), and
 * without -fsanitize=address (the two cannot be combined; memcheck covers
 * what ASan would).  The object is linked into the module in a step of its
 * own, without -fsanitize=thread, so no ThreadSanitizer runtime is ever
 * linked or loaded (also when devarray itself is built with it).  Whether
 * the compiler can is probed once (hk_probe_compiler): where it cannot,
 * kernel_check=auto falls back to bounds with a log line, an explicit
 * kernel_check=on fails each build with DV_ERR_NOT_SUPPORTED.
 *
 * Loading the compiled image and finding its kernels: module.c.
 */
#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../fission/fission.h"
#include "toolchain_internal.h"

extern char **environ;

/* ========================================================================== */
/* The toolchain's state                                                       */
/* ========================================================================== */

dv_status hk_tc_open(const dv_backend_config *cfg, const dv__host_rt *rt, hk_tc **out) {
  *out = NULL;
  hk_tc *k = dv__calloc(1, sizeof *k);
  if (!k) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate the host kernel state");
  k->rt = rt;
  k->fast = !cfg->host_checked;
  k->fission = cfg->host_fission != 0;
  k->check = cfg->kernel_check < 0 ? 0 : cfg->kernel_check > 2 ? 2 : cfg->kernel_check;
  k->check_auto = cfg->kernel_check_auto != 0;
  k->cc_option = dv__strdup(cfg->host_cc ? cfg->host_cc : "");
  k->cflags = dv__strdup(cfg->host_cflags ? cfg->host_cflags : "");
  /* exec/'s fiber stack (hk_open: the same computation). */
  long pg = sysconf(_SC_PAGESIZE);
  size_t page = pg > 0 ? (size_t)pg : 4096;
  size_t fs = cfg->host_fiber_stack ? cfg->host_fiber_stack : ((size_t)128 << 10);
  if (fs < 16384) fs = 16384;
  k->fiber_stack = (fs + page - 1) & ~(page - 1);
  if (!k->cc_option || !k->cflags) {
    dv__free(k->cc_option);
    dv__free(k->cflags);
    dv__free(k);
    return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate the host kernel state");
  }
  pthread_mutex_init(&k->lock, NULL);
  *out = k;
  return DV_OK;
}

void hk_tc_close(hk_tc *k) {
  if (!k) return;
  hk_free_words(k->cc_argv);
  dv__free(k->ident);
  dv__free(k->cc_option);
  dv__free(k->cflags);
  pthread_mutex_destroy(&k->lock);
  dv__free(k);
}

void hk_free_words(char **w) {
  if (!w) return;
  for (char **p = w; *p; p++) dv__free(*p);
  dv__free(w);
}

/* Is devarray itself built with AddressSanitizer (then kernels are too)? */
static bool hk_asan(void) {
#if DV_HOST_ASAN
  return true;
#else
  return false;
#endif
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

/* Appended to every host translation unit. */
/* The flags every module is compiled with (part of the module's identity:
 * hk_probe_compiler). */
static const char hk_fixed_flags[] =
    "-std=c11 -shared -fPIC -fvisibility=hidden -ffp-contract=off -g1 -gdwarf-4";

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

/* The CPU a module compiled with -march=native (or -mcpu/-mtune=native)
 * is for, as a hash of the processor's model name and feature flags
 * (/proc/cpuinfo's first processor), so that a cache shared by machines
 * with different CPUs never hands one a module built for another's
 * instructions.  0 when the flags do not ask for the native CPU. */
static uint64_t hk_cpu_id(const char *cflags) {
  if (!strstr(cflags, "=native")) return 0;
  uint64_t h = 1469598103934665603ull;
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (!f) return 1; /* not known: a fixed value (the compiler's identity still counts) */
  char line[4096];
  int seen = 0;
  while (fgets(line, sizeof line, f)) {
    bool model = !strncmp(line, "model name", 10) || !strncmp(line, "vendor_id", 9) ||
                 !strncmp(line, "CPU part", 8) || !strncmp(line, "CPU implementer", 15);
    bool flags = !strncmp(line, "flags", 5) || !strncmp(line, "Features", 8);
    if (!model && !flags) continue;
    for (const char *c = line; *c; c++) h = (h ^ (unsigned char)*c) * 1099511628211ull;
    if (flags && ++seen >= 1) break; /* the first processor's */
  }
  fclose(f);
  return h;
}

/* kernel_check=on: can the compiler (words) instrument a kernel for the
 * access checks (-fsanitize=thread, and kernel.h's attributes for the
 * hooks)?  Probed once per state; where it cannot, auto falls back to
 * bounds (k->check 1, logged), an explicit on keeps the reason in
 * k->tsan_msg for every build to report.  Caller holds k->lock. */
static void hk_probe_tsan(hk_tc *k, char **words, int nwords) {
  k->tsan_msg[0] = 0;
  if (k->check < 2) return;
  static const char probe[] =
      "#if !defined(__has_attribute)\n#error no __has_attribute\n#endif\n"
      "#if !(__has_attribute(disable_sanitizer_instrumentation) || "
      "(defined(__GNUC__) && !defined(__clang__)))\n"
      "#error no attribute to leave the hooks uninstrumented (clang >= 14 or gcc)\n#endif\n"
      "int dv__probe(int *p) { return *p; }\n";
  char dir[512], in[600], obj[600], out[600];
  bool ok = false;
  char why[200] = "cannot create a temporary directory";
  if (hk_tempdir(dir, sizeof dir)) {
    hk_path(in, sizeof in, dir, "probe.c");
    hk_path(obj, sizeof obj, dir, "probe.o");
    hk_path(out, sizeof out, dir, "probe.txt");
    if (hk_write_file(in, probe, sizeof probe - 1)) {
      char *argv[72];
      int a = 0;
      for (int j = 0; j < nwords && a < 60; j++) argv[a++] = words[j];
      const char *add[] = {"-std=c11", "-fPIC", "-fsanitize=thread", "-c", "-o", obj, in};
      for (size_t j = 0; j < sizeof add / sizeof *add; j++) argv[a++] = (char *)add[j];
      argv[a] = NULL;
      int code = -1;
      if (hk_spawn(argv, out, &code) == 0 && code == 0) {
        ok = true;
      } else {
        char *txt = hk_read_file(out, NULL);
        size_t l = txt ? strcspn(txt, "\n") : 0;
        hk_fmt(why, sizeof why, "%.*s", (int)(l < 180 ? l : 180), txt && l ? txt : "it failed");
        dv__free(txt);
      }
    }
    unlink(in);
    unlink(obj);
    unlink(out);
    rmdir(dir);
  }
  if (ok) return;
  if (k->check_auto) {
    k->check = 1;
    dv__log(DV_LOG_INFO, "host simulator: the C compiler %s cannot instrument kernels for the "
            "access checks (-fsanitize=thread: %s); kernel_check=auto runs with bounds checks only",
            words[0], why);
    return;
  }
  hk_fmt(k->tsan_msg, sizeof k->tsan_msg, "kernel_check=on: the C compiler %s cannot instrument "
         "kernels for the access checks (-fsanitize=thread: %s); use kernel_check=bounds, or gcc "
         "or clang >= 14 (option host_cc)", words[0], why);
}

/* Find the compiler and its identity, once per state.  Caller holds k->lock. */
static dv_status hk_probe_compiler(hk_tc *k) {
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
  hk_probe_tsan(k, words, nwords);
  size_t need = 112 + sizeof hk_fixed_flags + strlen(path) + strlen(version) + strlen(machine) +
                strlen(k->cflags) +
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
  /* A module built with region fission (fast mode, host_fission.c) has more in it. */
  snprintf(ident, need, "cc=%s|%s|%s|flags=%s %s|asan=%d|check=%d|fiber|rt=%016llx|cpu=%016llx%s",
           path, version, machine, hk_fixed_flags, k->cflags, hk_asan() ? 1 : 0, k->check,
           (unsigned long long)th, (unsigned long long)hk_cpu_id(k->cflags),
           k->fast && k->fission && hk_fission_available() ? "|fission3" : "");
  k->cc_argv = words;
  k->cc_argc = nwords;
  k->ident = ident;
  k->cc_probed = true;
  k->cc_status = DV_OK;
  return DV_OK;
}

dv_status hk_kernel_target_id(hk_tc *k, char *buf, size_t cap) {
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

/* Run the compiler's command line argv (its output into log_path; its exit
 * status into *code) and read that log into *logtxt (replacing it). */
static dv_status hk_run_logged(char **argv, const char *log_path, int *code, char **logtxt,
                               const char *who) {
  int e = hk_spawn(argv, log_path, code);
  if (e)
    return dv__error(DV_ERR_NO_COMPILER, "host simulator: cannot run the C compiler %s: %s",
                     argv[0], strerror(e));
  dv__free(*logtxt);
  errno = 0;
  *logtxt = hk_read_file(log_path, NULL);
  if (!*logtxt && errno != ENOMEM) *logtxt = dv__strdup("");
  if (!*logtxt) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot read the %s's log", who);
  return DV_OK;
}


/* Run the compiler on `in`: preprocess it into out (-E), or compile it into
 * the module out; *code is its exit status, *logtxt (replaced) its output.
 * HK_CC_LINK links the objects in and in2 (the hooks'); in2 is NULL else. */
static dv_status hk_cc(hk_tc *k, const dv_build_req *req, bool check, const char *in,
                       const char *in2, const char *out, int what, const char *log_path,
                       int *code, char **logtxt) {
  const bool preprocess = what == HK_CC_PRE, access = k->check >= 2;
  char **argv = NULL;
  int argc = 0;
  dv_status rc = DV_OK;
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
    if (what == HK_CC_LINK) { /* no -fsanitize=thread: no sanitizer runtime in the module */
      /* The kernel's object and the hooks' (hk_hooks_object), one link. */
      ok = ok && hk_words("-shared -fPIC", &argv, &argc) && hk_word("-o", &argv, &argc) &&
           hk_word(out, &argv, &argc) && hk_word(in, &argv, &argc) &&
           hk_word(in2, &argv, &argc) && hk_word("-lm", &argv, &argc);
      rc = ok ? hk_run_logged(argv, log_path, code, logtxt, "linker")
              : dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot assemble the linker's command line");
      break;
    }
    /* No contraction of a * b + c into a fused multiply-add: clang's default
     * contracts where the target has FMA (fast mode's -march=native does, the
     * checked mode's baseline does not), so the two modes would round
     * differently; gcc's -std=c11 already does not contract. */
    if (ok) ok = hk_words(hk_fixed_flags, &argv, &argc);
    if (ok && clash) ok = hk_words("-fstack-clash-protection", &argv, &argc);
    if (ok && check) ok = hk_words("-fstack-protector-strong", &argv, &argc);
    /* The access checks replace AddressSanitizer (the two cannot be combined). */
    if (ok && hk_asan() && !access)
      ok = hk_words("-fsanitize=address -fno-omit-frame-pointer", &argv, &argc);
    /* (No builtin memcpy, memmove, memset: gcc expands a fixed-size one
     * inline without instrumenting it; as calls they reach kernel.h's.) */
    if (ok && access)
      ok = hk_words("-DDV__ACCESS_CHECK=1 -fsanitize=thread -g1 -gdwarf-4 -fno-builtin-memcpy "
                    "-fno-builtin-memmove -fno-builtin-memset", &argv, &argc);
    if (ok) ok = hk_words(k->cflags, &argv, &argc);
    if (ok) ok = hk_words(req->options, &argv, &argc);
    if (ok && (req->flags & DV_BUILD_DEBUG)) ok = hk_words("-g", &argv, &argc);
    if (ok && preprocess) ok = hk_word("-E", &argv, &argc);
    if (ok && what == HK_CC_OBJECT) ok = hk_word("-c", &argv, &argc);
    if (ok) ok = hk_word("-o", &argv, &argc) && hk_word(out, &argv, &argc) &&
                 hk_word(in, &argv, &argc) && (what != HK_CC_MODULE || hk_word("-lm", &argv, &argc));
    if (!ok) {
      rc = dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot assemble the compiler's command line");
      break;
    }
    rc = hk_run_logged(argv, log_path, code, logtxt, "compiler");
    if (rc) break;
    if (*code == 0 || !clash || !strstr(*logtxt, "stack-clash-protection")) break;
    pthread_mutex_lock(&k->lock);
    k->no_clash = true;
    pthread_mutex_unlock(&k->lock);
  }
  hk_free_words(argv);
  return rc;
}

/* Whether region fission may have something to do in the program's own
 * text (after the prelude): a barrier it names, or a `for` loop (a uniform
 * loop may run around the threads' loop).  Only then is the pass worth its
 * preprocessing and parsing (~0.4 s a build, once: modules are cached).  A
 * barrier the text does not name (in a header it includes) just keeps the
 * fibers. */
static bool hk_fission_worth(const char *unit) {
  const char *p = strstr(unit, "/* ---- devarray prelude ---- */");
  p = p ? p : unit;
  if (strstr(p, "dv_syncthreads") || strstr(p, "dv_barrier")) return true;
  for (const char *q = p; (q = strstr(q, "for")) != NULL; q += 3) {
    bool word = q == p || !(isalnum((unsigned char)q[-1]) || q[-1] == '_');
    const char *r = q + 3;
    while (*r == ' ' || *r == '\t' || *r == '\n') r++;
    if (word && *r == '(') return true;
  }
  return false;
}

dv_status hk_module_build(hk_tc *k, const dv_build_req *req, dv_bmodule **out, void **image,
                          size_t *image_size, char **log) {
  *out = NULL;
  if (image) *image = NULL;
  if (image_size) *image_size = 0;
  if (log) *log = NULL;
  if (!req || !req->source) return dv__error(DV_ERR_NULL_ARGUMENT, "build request without source");
  pthread_mutex_lock(&k->lock);
  dv_status rc = hk_probe_compiler(k);
  pthread_mutex_unlock(&k->lock);
  if (rc) return rc;
  pthread_mutex_lock(&k->lock);
  const bool access = k->check >= 2;
  if (k->tsan_msg[0]) rc = dv__error(DV_ERR_NOT_SUPPORTED, "program %s: %s",
                                     req->name ? req->name : "kernel", k->tsan_msg);
  pthread_mutex_unlock(&k->lock);
  if (rc) return rc;
  bool check = k->check || (req->flags & DV_BUILD_DEBUG);

  char dir[512], src[600], so[600], out_path[600], pre_path[600], fis_path[600], obj[600],
      hooks[600];
  if (!hk_tempdir(dir, sizeof dir))
    return dv__error(DV_ERR_DRIVER, "host simulator: cannot create a temporary directory: %s",
                     strerror(errno));
  hk_path(src, sizeof src, dir, "kernel.c");
  hk_path(so, sizeof so, dir, "kernel.so");
  hk_path(out_path, sizeof out_path, dir, "compiler.txt");
  hk_path(pre_path, sizeof pre_path, dir, "kernel.i");
  hk_path(fis_path, sizeof fis_path, dir, "fission.i");
  hk_path(obj, sizeof obj, dir, "kernel.o");
  hk_path(hooks, sizeof hooks, dir, "hooks.o");

  char *text = NULL, *logtxt = NULL, *pre = NULL, *fis = NULL;
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
  /* Fast mode: region fission (host_fission.c) on the preprocessed unit;
   * its functions are appended to it and that is compiled instead.  If it
   * does not compile, the unit is compiled as it was (the kernels then
   * have no fission function). */
  char note[2048] = "";
  const char *input = src;
  if (k->fast && k->fission && !access && hk_fission_worth(req->source) &&
      hk_fission_available()) {
    rc = hk_cc(k, req, check, src, NULL, pre_path, HK_CC_PRE, out_path, &code, &logtxt);
    if (rc) goto done;
    size_t pn = 0;
    errno = 0;
    pre = code == 0 ? hk_read_file(pre_path, &pn) : NULL;
    bool oom = code == 0 && !pre && errno == ENOMEM;
    char *add = pre ? hk_fission(pre, pn, note, sizeof note - 200, &oom) : NULL;
    if (add) {
      size_t an = strlen(add);
      fis = dv__malloc(pn + an + 1);
      if (fis) {
        memcpy(fis, pre, pn);
        memcpy(fis + pn, add, an + 1);
        if (hk_write_file(fis_path, fis, pn + an)) input = fis_path;
      } else {
        oom = true;
      }
      dv__free(add);
    }
    /* No memory is a status here as everywhere (not a silent build without
     * the pass). */
    if (oom) {
      rc = dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "program %s: no memory for region fission",
                     req->name ? req->name : "kernel");
      goto done;
    }
  }
  /* The access checks: an instrumented object, then the module linked from it. */
  rc = hk_cc(k, req, check, input, NULL, access ? obj : so, access ? HK_CC_OBJECT : HK_CC_MODULE,
             out_path, &code, &logtxt);
  if (!rc && code != 0 && input != src) {
    size_t nl = strlen(note);
    hk_fmt(note + nl, sizeof note - nl, "region fission: the generated code did not compile "
           "(compiled without it):\n%.150s\n", logtxt ? logtxt : "");
    rc = hk_cc(k, req, check, src, NULL, so, HK_CC_MODULE, out_path, &code, &logtxt);
  }
  if (!rc && code == 0 && access) {
    char *clog = logtxt; /* the compiler's warnings stay in the build log */
    logtxt = NULL;
    rc = hk_hooks_object(k, req, dir, hooks, hk_cc, &logtxt);
    if (!rc) rc = hk_cc(k, req, check, obj, hooks, so, HK_CC_LINK, out_path, &code, &logtxt);
    if (!rc && clog && clog[0]) {
      size_t cl = strlen(clog), ll = strlen(logtxt);
      char *both = dv__malloc(cl + ll + 1);
      if (both) {
        memcpy(both, clog, cl);
        memcpy(both + cl, logtxt, ll + 1);
        dv__free(logtxt);
        logtxt = both;
      } else {
        rc = dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot assemble the compiler's log");
      }
    }
    dv__free(clog);
  }
  if (rc) goto done;
  /* The program itself does not compile: its errors are the user's, said
   * once and alone (not also as the pass's notes on the same text). */
  if (code != 0) note[0] = 0;
  if (logtxt) hk_user_words(logtxt, src);
  size_t cc_len = logtxt ? strlen(logtxt) : 0; /* the compiler's own words */
  if (note[0] && logtxt) {
    dv__log(DV_LOG_DEBUG, "host simulator: program %s: %s", req->name ? req->name : "kernel", note);
    size_t nl = strlen(note), ll = strlen(logtxt);
    char *both = dv__malloc(nl + ll + 1);
    if (!both) {
      rc = dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot assemble the compiler's log");
      goto done;
    }
    memcpy(both, logtxt, ll); /* the compiler's words first, then what the pass did */
    memcpy(both + ll, note, nl + 1);
    dv__free(logtxt);
    logtxt = both;
  }
  if (logtxt) hk_user_words(logtxt, src);
  if (code != 0) {
    char head[700];
    hk_log_head(logtxt, head, sizeof head);
    rc = dv__error(DV_ERR_COMPILE, "program %s failed to compile (%s exited with %d):\n%s",
                   req->name ? req->name : "kernel", k->cc_argv[0], code, head);
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
  if (rc == DV_ERR_LIBRARY_LOAD) rc = hk_undefined_symbol(req, &logtxt, cc_len);
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
  unlink(pre_path);
  unlink(fis_path);
  unlink(obj);
  unlink(hooks);
  rmdir(dir);
  dv__free(text);
  dv__free(pre);
  dv__free(fis);
  if (log)
    *log = logtxt;
  else
    dv__free(logtxt);
  return rc;
}
