/*
 * What toolchain/'s files share: its state, the whole module and kernel
 * records (their first member is the view toolchain.h shows the others),
 * the file helpers.  Private to toolchain/ (and the white-box tests).
 */
#ifndef DV_HOST_TOOLCHAIN_INTERNAL_H
#define DV_HOST_TOOLCHAIN_INTERNAL_H
#include <pthread.h>

#include "toolchain.h"

struct hk_tc {
  const dv__host_rt *rt; /* every module's dv__rt (exec/'s runtime) */
  int check;          /* option kernel_check: 0 off, 1 bounds, 2 on (the access checks) */
  bool check_auto;    /* check 2 came from auto: a compiler that cannot instrument falls back */
  char tsan_msg[320]; /* check 2 asked, the compiler cannot instrument: why ("" : it can) */
  bool fast;          /* option host_mode is fast: kernels run as loops over threads */
  bool fission;       /* option host_fission (fast mode only) */
  char *cc_option;    /* option host_cc ("" : search) */
  char *cflags;       /* option host_cflags */
  size_t fiber_stack; /* exec/'s usable bytes per fiber: a fission function may take half */

  pthread_mutex_t lock; /* compiler identity */
  bool cc_probed;
  bool no_clash; /* the compiler refused -fstack-clash-protection (then: without it) */
  dv_status cc_status;
  char cc_msg[512];
  char **cc_argv; /* the compiler and the words that came with it (NULL-terminated) */
  int cc_argc;
  char *ident;
};

struct dv_bkernel {
  hk_kview v; /* first: the view (hk_kernel_view) */
  dv_bmodule *mod;
  dv_bkernel *next;
};

struct dv_bmodule {
  hk_mview v; /* first: the view (hk_module_view) */
  hk_tc *k;
  int fd; /* keeps the deleted file's inode (build.c's top comment) */
  unsigned char *cbuf;
  size_t cbytes;
  struct hk_lines *lines; /* lines.c's answers (made on first use) */
  bool text_known;        /* lines.c's hk_module_text (under lock) */
  uintptr_t text_lo, text_hi;
  pthread_mutex_t lock;
  dv_bkernel *kernels;
};

/* The toolchain's own module record behind a view. */
static inline dv_bmodule *hk_module_of(const hk_mview *v) { return (dv_bmodule *)(uintptr_t)v; }

/* ---- module.c ---- */
/* Whole file into a NUL-terminated dv__malloc'd buffer (*size: its length;
 * NULL: errno says why, ENOMEM for no memory). */
char *hk_read_file(const char *path, size_t *size);
bool hk_write_file(const char *path, const void *data, size_t n);
/* A private temporary directory (its path into buf). */
bool hk_tempdir(char *buf, size_t cap);
void hk_path(char *buf, size_t cap, const char *dir, const char *file);

/* words.c: the compiler's log in the program's words, in place (it only
 * shrinks); unit_path is the translation unit's temporary file. */
void hk_user_words(char *log, const char *unit_path);
/* The first lines of a compiler log into buf (cap bytes), for a message. */
void hk_log_head(const char *log, char *buf, size_t cap);
/* After a load failure (dv_last_error says why): a symbol defined nowhere is
 * DV_ERR_COMPILE naming it, its error put ahead of the compiler's first
 * cc_len bytes of *logtxt (the rest dropped); otherwise DV_ERR_LIBRARY_LOAD. */
dv_status hk_undefined_symbol(const dv_build_req *req, char **logtxt, size_t cc_len);
/* Load the module at path (its bytes: image); from memory if that fails. */
dv_status hk_load(hk_tc *k, const dv_build_req *req, const char *path, const void *image,
                  size_t n, dv_bmodule **out);

/* ---- build.c ---- */
/* Free a NULL-terminated array of words (the compiler's command line). */
void hk_free_words(char **w);
/* What hk_cc does: preprocess (-E), compile a module, compile an object
 * for the access checks (-c), or link that object and the hooks' into the
 * module. */
enum { HK_CC_PRE, HK_CC_MODULE, HK_CC_OBJECT, HK_CC_LINK };
/* ---- access_hooks.c ---- */
/* How the hooks are compiled: build.c's hk_cc, handed over by the caller
 * (access_hooks.c sits below build.c and never calls up into it). */
typedef dv_status (*hk_cc_fn)(hk_tc *k, const dv_build_req *req, bool check, const char *in,
                              const char *in2, const char *out, int what, const char *log_path,
                              int *code, char **logtxt);
/* The access checks' hooks' object written at path (dir: the build's
 * temporary directory), compiled with cc on the first call for k's
 * compiler identity and kept for the process.  A compile that fails is
 * DV_ERR_COMPILE with the compiler's words in *why (dv__malloc'd, for the
 * build's log; NULL otherwise); nothing is kept on any failure. */
dv_status hk_hooks_object(hk_tc *k, const dv_build_req *req, const char *dir, const char *path,
                          hk_cc_fn cc, char **why);
/* ---- lines.c ---- */
/* Free a module's cached answers (module.c, at unload). */
void hk_lines_free(struct hk_lines *c);

#endif
