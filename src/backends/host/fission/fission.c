/*
 * The host simulator's kernels: region fission for fast mode (issue 23).
 *
 * A kernel whose barriers all sit at statement level in uniform control
 * flow (the body's statement list, nested blocks, and for/while/do loops
 * nested only in such lists) gets a third function, dv__fis_<kernel>, that
 * runs one whole block without fibers: each barrier-free region of the body
 * is a loop over the block's threads (which the C compiler can vectorize),
 * the body's locals that live from one region into another are arrays with
 * one element per thread (VLAs of the block's size, __typeof__ of the
 * variable's type), loops that contain barriers are rebuilt around the
 * regions with their condition evaluated per thread and checked to be the
 * same for all (else a divergent-barrier fault through dv__rt->fault), and
 * an early `return` marks its thread finished (a barrier some finished
 * threads never reach is the same fault).  The declarations that open the
 * body whose value is the same for every thread (computed from the
 * parameters and shared arrays only, reading no memory, never changed, no
 * name the body used before them) are computed once.  A local whose
 * address is taken, or an array that decays, is kept per thread.
 *
 * Why libclang: the rewrite must know every declaration and every use of a
 * local, which takes a C front end; libclang's C API is stable, installed
 * with clang, and needs no headers here (the few types and functions used
 * are declared below and loaded with dlopen, as src/backends/cuda/ loads
 * the driver).  It parses the unit the host compiler preprocessed (so the
 * dialect's macros are expanded and offsets are exact); the generated
 * functions are appended to that text, which is then compiled as before.
 * Where libclang is absent, or the pass is not sure (a barrier under an
 * if, in a called function, a wave operation, goto, a static local, a
 * parameter the body changes, a break out of a loop with a barrier, a
 * compound literal, a type declared in the kernel, a call through a
 * pointer where a barrier function's address is taken ...),
 * it generates nothing for that kernel, and if the generated code fails to
 * compile the unit is compiled without it (host_build.c): the kernel runs
 * as before, through its block function and fibers.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fission_internal.h"

/* ---- libclang's C API, as much as is used ------------------------------ */

typedef struct { const void *data; unsigned flags; } hf_str;
typedef struct { int kind; int xdata; const void *data[3]; } hf_cur;
typedef struct { const void *p[2]; unsigned i; } hf_loc;
typedef struct { const void *p[2]; unsigned b, e; } hf_range;
typedef struct { int kind; void *data[2]; } hf_type;
typedef struct { const char *name, *contents; unsigned long length; } hf_unsaved;
typedef int (*hf_visitor)(hf_cur, hf_cur, void *);

#define HF_SYMS(X)                                                                             \
  X(void *, clang_createIndex, (int, int))                                                     \
  X(void, clang_disposeIndex, (void *))                                                        \
  X(void *, clang_parseTranslationUnit,                                                        \
    (void *, const char *, const char *const *, int, hf_unsaved *, unsigned, unsigned))        \
  X(void, clang_disposeTranslationUnit, (void *))                                              \
  X(hf_cur, clang_getTranslationUnitCursor, (void *))                                          \
  X(unsigned, clang_visitChildren, (hf_cur, hf_visitor, void *))                               \
  X(hf_str, clang_getCursorSpelling, (hf_cur))                                                 \
  X(const char *, clang_getCString, (hf_str))                                                  \
  X(void, clang_disposeString, (hf_str))                                                       \
  X(hf_range, clang_getCursorExtent, (hf_cur))                                                 \
  X(hf_loc, clang_getCursorLocation, (hf_cur))                                                 \
  X(hf_loc, clang_getRangeStart, (hf_range))                                                   \
  X(hf_loc, clang_getRangeEnd, (hf_range))                                                     \
  X(void, clang_getFileLocation, (hf_loc, void **, unsigned *, unsigned *, unsigned *))        \
  X(void, clang_getPresumedLocation, (hf_loc, hf_str *, unsigned *, unsigned *))               \
  X(hf_cur, clang_getCursorReferenced, (hf_cur))                                               \
  X(hf_type, clang_getCursorType, (hf_cur))                                                    \
  X(hf_type, clang_getCanonicalType, (hf_type))                                                \
  X(hf_str, clang_getTypeSpelling, (hf_type))                                                  \
  X(unsigned, clang_isConstQualifiedType, (hf_type))                                           \
  X(hf_type, clang_getArrayElementType, (hf_type))                                             \
  X(int, clang_Cursor_getStorageClass, (hf_cur))                                               \
  X(unsigned, clang_isCursorDefinition, (hf_cur))                                              \
  X(unsigned, clang_getNumDiagnostics, (void *))                                               \
  X(void *, clang_getDiagnostic, (void *, unsigned))                                           \
  X(int, clang_getDiagnosticSeverity, (void *))                                                \
  X(hf_loc, clang_getDiagnosticLocation, (void *))                                             \
  X(void, clang_disposeDiagnostic, (void *))                                                   \
  X(void, clang_toggleCrashRecovery, (unsigned))

static struct {
#define HF_FIELD(ret, name, params) ret(*name) params;
  HF_SYMS(HF_FIELD)
#undef HF_FIELD
} cx;
static void *hf_lib;
static pthread_once_t hf_once = PTHREAD_ONCE_INIT;


static void hf_load(void) {
  const char *names[] = {"libclang.so.1", "libclang-19.so.1", "libclang-18.so.1",
                         "libclang-17.so.1", "libclang-16.so.1", "libclang-15.so.1",
                         "libclang-14.so.1", "libclang.so"};
  for (size_t i = 0; i < sizeof names / sizeof names[0] && !hf_lib; i++)
    hf_lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
  if (!hf_lib) {
    dv__log(DV_LOG_DEBUG, "host simulator: no libclang: fast mode runs kernels with barriers "
                          "on fibers (no region fission)");
    return;
  }
  bool ok = true;
#define HF_LOAD(ret, name, params)                   \
  *(void **)&cx.name = dlsym(hf_lib, #name);         \
  if (!cx.name) ok = false;
  HF_SYMS(HF_LOAD)
#undef HF_LOAD
  if (!ok) {
    dv__log(DV_LOG_DEBUG, "host simulator: libclang lacks functions region fission uses");
    hf_lib = NULL; /* left loaded: a library may not like dlclose */
    return;
  }
  cx.clang_toggleCrashRecovery(0); /* no signal handlers of its own in this process */
}

bool hk_fission_available(void) {
  pthread_once(&hf_once, hf_load);
  return hf_lib != NULL;
}




static unsigned hf_off(hf_loc l) {
  unsigned off = 0;
  cx.clang_getFileLocation(l, NULL, NULL, NULL, &off);
  return off;
}

static int hf_add(hf *h, hf_cur c, int parent) {
  if (h->nn == h->cap) {
    int nc = h->cap ? h->cap * 2 : 256;
    hf_node *p = hf_grow(h->n, (size_t)h->nn, (size_t)nc, sizeof *p);
    if (!p) {
      h->oom = true;
      return -1;
    }
    h->n = p, h->cap = nc;
  }
  hf_node *x = &h->n[h->nn];
  hf_range r = cx.clang_getCursorExtent(c);
  *x = (hf_node){c.kind, parent, -1, -1, -1, hf_off(cx.clang_getRangeStart(r)),
                 hf_off(cx.clang_getRangeEnd(r)), hf_off(cx.clang_getCursorLocation(c)), 0, 0, -1, false, false};
  if (c.kind == K_DECLREF) {
    hf_cur d = cx.clang_getCursorReferenced(c);
    x->ref_kind = d.kind;
    x->ref_loc = hf_off(cx.clang_getCursorLocation(d));
  }
  if (parent >= 0) {
    if (h->n[parent].last >= 0)
      h->n[h->n[parent].last].next = h->nn;
    else
      h->n[parent].first = h->nn;
    h->n[parent].last = h->nn;
  }
  return h->nn++;
}

typedef struct { hf *h; int parent; } hf_walk;

static int hf_visit(hf_cur c, hf_cur parent, void *data) {
  (void)parent;
  hf_walk *w = data;
  int i = hf_add(w->h, c, w->parent);
  if (i < 0) return 0;
  if (c.kind == K_VAR) { /* the variable's type, while the cursor is at hand */
    hf_var *nv = hf_grow(w->h->vars, (size_t)w->h->nvars, (size_t)w->h->nvars + 1, sizeof *nv);
    if (!nv) {
      w->h->oom = true;
      return 0;
    }
    w->h->vars = nv;
    hf_var *v = &nv[w->h->nvars];
    memset(v, 0, sizeof *v);
    v->node = i, v->region = -1, v->decl = w->parent;
    hf_type t = cx.clang_getCanonicalType(cx.clang_getCursorType(c));
    v->tkind = t.kind;
    bool top_const = cx.clang_isConstQualifiedType(t) != 0;
    hf_type el = t;
    while (el.kind == T_CARRAY || el.kind == T_IARRAY) el = cx.clang_getArrayElementType(el);
    bool el_const = el.kind != t.kind && cx.clang_isConstQualifiedType(el);
    hf_str s = cx.clang_getTypeSpelling(t);
    const char *ts = cx.clang_getCString(s);
    snprintf(v->type, sizeof v->type, "%s", ts ? ts : "");
    cx.clang_disposeString(s);
    size_t tl = strlen(v->type);
    if (t.kind == T_POINTER && top_const && tl > 6 && !strcmp(v->type + tl - 6, " const"))
      v->type[tl - 6] = 0;
    else if ((top_const || el_const) && t.kind != T_POINTER && !strncmp(v->type, "const ", 6))
      memmove(v->type, v->type + 6, tl - 5);
    int sc = cx.clang_Cursor_getStorageClass(c); /* register (7) and auto (6) are fine */
    if (sc >= 2 && sc <= 5) v->tkind = -1; /* static, extern: refused */
    w->h->n[i].var = w->h->nvars++;
  }
  hf_walk sub = {w->h, i};
  cx.clang_visitChildren(c, hf_visit, &sub);
  return w->h->oom ? 0 : 1; /* CXChildVisit_Continue */
}

/* ---- text ---------------------------------------------------------------- */





/* ---- analysis ------------------------------------------------------------ */

static bool hf_refuse(hf *h, const char *why, unsigned line) {
  if (!h->why[0]) hf_fmt(h->why, sizeof h->why, "%s (line %u)", why, line);
  return false;
}








/* Structure: item kinds of a statement list, checked (false: refused). */
static bool hf_check_list(hf *h, int compound);

static bool hf_check_loop(hf *h, int i) {
  const hf_node *x = &h->n[i];
  int body = x->kind == K_DO ? x->first : x->last;
  if (body < 0 || h->n[body].kind != K_COMPOUND)
    return hf_refuse(h, "a loop with a barrier whose body is not a block", hf_node_line(h, i));
  for (int c = x->first; c >= 0; c = h->n[c].next)
    if (c != body && hf_contains(h, c))
      return hf_refuse(h, "a barrier in a loop's condition", hf_node_line(h, i));
  for (int k = 0; k < h->nn; k++)
    if ((h->n[k].kind == K_BREAK || h->n[k].kind == K_CONTINUE) && h->n[k].s >= x->s &&
        h->n[k].e <= x->e && hf_leaves(h, k, i))
      return hf_refuse(h, "break or continue in a loop with a barrier", hf_node_line(h, k));
  if (x->kind == K_FOR) {
    unsigned p[3][2];
    if (!hf_for_parts(h, i, p))
      return hf_refuse(h, "a for loop not understood", hf_node_line(h, i));
  }
  h->has_loops = true;
  return hf_check_list(h, body);
}

static bool hf_check_list(hf *h, int compound) {
  for (int c = h->n[compound].first; c >= 0; c = h->n[c].next) {
    if (!hf_contains(h, c)) continue;
    int k = h->n[c].kind;
    if (hf_is_barrier(h, c)) {
      /* the call is the whole statement and takes no call of its own */
      for (int d = h->n[c].first; d >= 0; d = h->n[d].next)
        if (h->n[d].s != h->n[c].s && hf_contains(h, d))
          return hf_refuse(h, "a barrier in a barrier's arguments", 0);
      continue;
    }
    if (k == K_COMPOUND) {
      if (!hf_check_list(h, c)) return false;
    } else if (k == K_FOR || k == K_WHILE || k == K_DO) {
      if (!hf_check_loop(h, c)) return false;
    } else {
      bool wave = false;
      for (unsigned j = h->n[c].s; j < h->n[c].e && !wave; j++)
        wave = h->src[j] == 'd' && (hf_rt_call(h->src, j, "wave") ||
                                    hf_rt_call(h->src, j, "wavebarrier"));
      return hf_refuse(h, wave ? "a wave operation or wave barrier"
                               : "a barrier under if, switch or an expression",
                       hf_node_line(h, c));
    }
  }
  return true;
}


/* ---- one kernel ----------------------------------------------------------- */

static bool hf_add_edit(hf *h, unsigned s, unsigned e, int kind, int arg) {
  hf_edit *d = hf_grow(h->ed, (size_t)h->ned, (size_t)h->ned + 1, sizeof *d);
  if (!d) {
    h->oom = true;
    return false;
  }
  h->ed = d;
  d[h->ned++] = (hf_edit){s, e, kind, arg};
  return true;
}

static int hf_edit_cmp(const void *a, const void *b) {
  const hf_edit *x = a, *y = b;
  if (x->s != y->s) return x->s < y->s ? -1 : 1;
  return x->e > y->e ? -1 : x->e < y->e;
}

/* May the declaration statement d (before the first barrier, at the top)
 * be computed once for the block? */
static bool hf_hoistable(hf *h, int d, unsigned self_loc) {
  for (unsigned j = h->n[d].s; j < h->n[d].e; j++)
    if (!strncmp(h->src + j, "++", 2) || !strncmp(h->src + j, "--", 2)) return false;
  for (int i = 0; i < h->nn; i++) {
    const hf_node *x = &h->n[i];
    if (x->s < h->n[d].s || x->e > h->n[d].e || i == d) continue;
    if (x->kind == K_VAR) {
      const hf_var *v = &h->vars[x->var];
      if (!((v->tkind >= 2 && v->tkind <= 40) || v->tkind == T_POINTER)) return false;
      for (int r = 0; r < h->nn; r++)
        if (h->n[r].kind == K_DECLREF && h->n[r].var == x->var &&
            hf_written(h->src, h->n[r].s, h->n[r].e))
          return false;
    } else if (x->kind == K_CALL) {
      if (!hf_rt_call(h->src, x->s, "shared")) return false;
    } else if (x->kind == 113 /* array subscript */ || x->kind == 118 /* compound literal */) {
      return false; /* a memory read: it may depend on code before it */
    } else if (x->kind == 112 /* unary operator */ && h->src[x->s] == '*') {
      return false;
    } else if (x->kind == 102 /* member */ && strncmp(h->src + x->s, "dv__rt", 6)) {
      for (unsigned j = x->s; j + 1 < x->e; j++)
        if (h->src[j] == '-' && h->src[j + 1] == '>') return false;
    } else if (x->kind == K_DECLREF) {
      if (x->ref_kind == K_PARM && x->ref_loc == self_loc) return false;
      bool rt = x->e - x->s == 6 && !strncmp(h->src + x->s, "dv__rt", 6);
      if (x->ref_kind == K_VAR && !rt && (x->var < 0 || !h->vars[x->var].hoist)) return false;
      if (x->ref_kind != K_PARM && x->ref_kind != K_VAR && x->ref_kind != 7 /* enumerator */)
        return false;
    } else if (x->kind == 115 /* compound assignment */ || x->kind == K_STMTEXPR) {
      return false;
    } else if (x->kind == 114 /* binary operator */) {
      /* an assignment inside an initializer: `=` between the operands */
      int a = x->first, b = a >= 0 ? h->n[a].next : -1;
      if (b >= 0) {
        unsigned k = hf_skip(h->src, h->n[a].e);
        if (h->src[k] == '=' && h->src[k + 1] != '=') return false;
      }
    }
  }
  return true;
}

static bool hf_mentions(const hf *h, unsigned s, unsigned e, const char *name);

static void hf_reset(hf *h) {
  h->nn = 0, h->nvars = 0, h->ned = 0, h->nreg = 0;
  h->has_ret = h->has_loops = false;
  h->nuni = h->nremat = h->nimp = 0;
  h->why[0] = 0;
}

static bool hf_in_sync(const hf *h, unsigned s, unsigned e) {
  for (int k = 0; k < h->nsync; k++) {
    size_t l = strlen(h->sync[k]);
    if (e - s == l && !strncmp(h->src + s, h->sync[k], l)) return true;
  }
  return false;
}

/* Analyse kernel function fn (dv__kb_<name>) and append dv__fis_<name>. */
static bool hf_kernel(hf *h, hf_cur fn, const char *name) {
  hf_reset(h);
  int root = hf_add(h, fn, -1);
  if (root < 0) return false;
  hf_walk w = {h, root};
  cx.clang_visitChildren(fn, hf_visit, &w);
  if (h->oom) return false;
  const hf_node *f = &h->n[root];
  int body = f->last;
  if (body < 0 || h->n[body].kind != K_COMPOUND) return hf_refuse(h, "no body", 0);
  int params[2] = {-1, -1};
  h->nparams = 0;
  for (int c = f->first; c >= 0; c = h->n[c].next)
    if (h->n[c].kind == K_PARM) {
      if (h->nparams < 2) params[h->nparams] = c;
      h->nparams++;
    }
  if (h->nparams < 2) return hf_refuse(h, "no parameters", 0);
  unsigned self_loc = h->n[params[0]].loc;
  /* The front end's errors inside the kernel (glibc's headers as gcc
   * preprocessed them may hold some libclang does not parse: not ours). */
  unsigned nd = cx.clang_getNumDiagnostics(h->tu);
  for (unsigned k = 0; k < nd; k++) {
    void *dg = cx.clang_getDiagnostic(h->tu, k);
    unsigned off = hf_off(cx.clang_getDiagnosticLocation(dg));
    int sev = cx.clang_getDiagnosticSeverity(dg);
    cx.clang_disposeDiagnostic(dg);
    if (sev >= 3 && off >= f->s && off < f->e) return hf_refuse(h, "not parsed", 0);
  }
  for (int i = 0; i < h->nn; i++) {
    hf_node *x = &h->n[i];
    if (x->kind == K_GOTO || x->kind == K_IGOTO || x->kind == K_LABEL || x->kind == K_ASM ||
        x->kind == K_ADDRLABEL || x->kind == K_STMTEXPR)
      return hf_refuse(h, "goto, a label, asm or a statement expression", hf_node_line(h, i));
    if (x->kind == K_RETURN) h->has_ret = true;
    if ((x->kind == 2 || x->kind == 3 || x->kind == 5 || x->kind == 20) &&
        strncmp(h->src + x->loc, "dv__", 4)) /* DV_SHARED's length check is not one */
      return hf_refuse(h, "a struct, union, enum or typedef declared in the kernel",
                       hf_node_line(h, i));
    if (x->kind == 118)
      return hf_refuse(h, "a compound literal (its storage is not kept per thread)",
                       hf_node_line(h, i));
    if (x->kind == K_CALL && h->sync_addr && strncmp(h->src + x->s, "dv__rt", 6)) {
      /* a call through a pointer may reach a barrier unseen */
      bool direct = false;
      for (int k = i + 1; k < h->nn && h->n[k].s == x->s && !direct; k++)
        direct = h->n[k].kind == K_DECLREF && h->n[k].ref_kind == K_FUNC;
      if (!direct)
        return hf_refuse(h, "a call through a pointer in a unit where a function that reaches "
                         "a barrier or wave operation has its address taken", hf_node_line(h, i));
    }
    if (x->kind == K_DECLREF && x->ref_kind == K_FUNC && hf_in_sync(h, x->s, x->e))
      return hf_refuse(h, "a call of a function that reaches a barrier or wave operation",
                       hf_node_line(h, i));
    if (x->kind == K_DECLREF && x->ref_kind == K_PARM && hf_written(h->src, x->s, x->e))
      return hf_refuse(h, "a parameter the body changes", hf_node_line(h, i));
    if (x->kind == K_DECLREF && x->ref_kind == K_VAR)
      for (int v = 0; v < h->nvars; v++)
        if (h->n[h->vars[v].node].loc == x->ref_loc) x->var = v;
  }
  for (int v = 0; v < h->nvars; v++)
    if (h->vars[v].tkind < 0)
      return hf_refuse(h, "a static local", hf_node_line(h, h->vars[v].node));
  if (!hf_check_list(h, body)) return false;
  /* Uniform declarations that open the body (before any other statement
   * and the first barrier): computed once. */
  for (int c = h->n[body].first; c >= 0 && !hf_contains(h, c); c = h->n[c].next) {
    if (h->n[c].kind != K_DECLSTMT) break;
    if (!hf_hoistable(h, c, self_loc)) { /* or from the block's indices and sizes */
      bool all = true;
      for (int d = h->n[c].first; d >= 0 && all; d = h->n[d].next)
        if (h->n[d].kind == K_VAR)
          all = h->vars[h->n[d].var].tkind >= 3 && h->vars[h->n[d].var].tkind <= 22 &&
                h->n[d].first >= 0 && hf_pure(h, h->n[d].loc, h->n[d].e, self_loc, false, -1) &&
                !hf_changed(h, h->n[d].var, 0, 0);
      if (!all) continue;
    }
    /* a name the body uses before the declaration (a global's, or a
     * function's) would be captured by the declaration moved ahead of it */
    bool captures = false;
    for (int d = h->n[c].first; d >= 0 && !captures; d = h->n[d].next) {
      if (h->n[d].kind != K_VAR) continue;
      char nm[128];
      unsigned l = 0, q = h->n[d].loc;
      while (hf_idch(h->src[q + l]) && l + 1 < sizeof nm) nm[l] = h->src[q + l], l++;
      nm[l] = 0;
      captures = !l || hf_mentions(h, h->n[body].s, h->n[c].s, nm);
    }
    if (captures) continue;
    for (int d = h->n[c].first; d >= 0; d = h->n[d].next)
      if (h->n[d].kind == K_VAR) h->vars[h->n[d].var].hoist = true;
    hf_add_edit(h, h->n[c].s, h->n[c].e, E_DROP, c);
  }
  /* Loops with barriers whose variable is uniform: scalars, no regions. */
  for (int i = 0; i < h->nn; i++)
    if (h->n[i].kind == K_FOR && hf_contains(h, i)) hf_uniform_loop(h, i, self_loc);
  /* Uniform for loops without barriers at the top: the threads' loops run
   * inside them (PoCL's implicit loop barriers), for race-free kernels the
   * same results, the loop's variable a scalar. */
  for (int c = h->n[body].first; c >= 0; c = h->n[c].next) {
    if (h->n[c].kind != K_FOR || hf_contains(h, c) || !hf_implicit_ok(h, c)) continue;
    hf_uniform_loop(h, c, self_loc);
    if (h->n[c].uni) h->n[c].imp = true, h->nuni--, h->nimp++;
  }
  if (!hf_contains(h, body) && !h->nimp)
    return hf_refuse(h, "no barrier and no uniform loop at the top", hf_node_line(h, root));
  hf_gen_list(h, body, true);
  if (h->oom) return false;
  for (int v = 0; v < h->nvars; v++) h->vars[v].region = hf_region_of(h, h->n[h->vars[v].node].s);
  /* Top-level locals from uniform values and the thread index: declared
   * again in each region after theirs. */
  for (int c = h->n[body].first; c >= 0; c = h->n[c].next) {
    if (h->n[c].kind != K_DECLSTMT || hf_region_of(h, h->n[c].s) < 0) continue;
    bool all = true, any = false;
    for (int d = h->n[c].first; d >= 0 && all; d = h->n[d].next) {
      if (h->n[d].kind != K_VAR) continue;
      const hf_var *v = &h->vars[h->n[d].var];
      all = !v->hoist && v->tkind >= 3 && v->tkind <= 22 && h->n[d].first >= 0 &&
            hf_pure(h, h->n[d].loc, h->n[d].e, self_loc, true, -1) && !hf_changed(h, h->n[d].var, 0, 0);
      any = true;
    }
    if (!all || !any) continue;
    for (int d = h->n[c].first; d >= 0; d = h->n[d].next)
      if (h->n[d].kind == K_VAR) h->vars[h->n[d].var].remat = true, h->nremat++;
  }
  /* Locals used in another region than their own: one per thread. */
  for (int i = 0; i < h->nn; i++) {
    const hf_node *x = &h->n[i];
    if (x->kind != K_DECLREF || x->var < 0 || h->vars[x->var].hoist || h->vars[x->var].uni ||
        h->vars[x->var].remat)
      continue;
    if (hf_region_of(h, x->s) != h->vars[x->var].region) h->vars[x->var].lift = true;
    /* a pointer to it may outlive its region: its address taken, or an
     * array's decayed (used other than subscripted) */
    if (hf_addr_taken(h->src, x->s)) h->vars[x->var].lift = true;
    int tk = h->vars[x->var].tkind;
    if (tk == T_CARRAY || tk == T_IARRAY) {
      unsigned a = hf_skip(h->src, x->e);
      if (h->src[a] != '[') h->vars[x->var].lift = true;
    }
  }
  for (int v = 0; v < h->nvars; v++) {
    if (!h->vars[v].lift) continue;
    int d = h->vars[v].decl;
    if (d < 0 || h->n[d].kind != K_DECLSTMT) return hf_refuse(h, "a local not understood", 0);
    for (int c = h->n[d].first; c >= 0; c = h->n[c].next)
      if (h->n[c].kind == K_VAR) h->vars[h->n[c].var].lift = true;
  }
  for (int v = 0; v < h->nvars; v++) {
    hf_var *x = &h->vars[v];
    if (!x->lift) continue;
    if (x->tkind == T_VARRAY || !x->type[0] || strstr(x->type, "(unnamed") ||
        strstr(x->type, "(anonymous"))
      return hf_refuse(h, "a variable-length array or unnamed type kept across a barrier",
                       hf_node_line(h, x->node));
    bool first = true; /* one edit per declaration statement */
    for (int u = 0; u < v; u++)
      if (h->vars[u].lift && h->vars[u].decl == x->decl) first = false;
    if (first) hf_add_edit(h, h->n[x->decl].s, h->n[x->decl].e, E_DECL, x->decl);
  }
  for (int i = 0; i < h->nn; i++) {
    const hf_node *x = &h->n[i];
    if (x->kind == K_DECLREF && x->var >= 0 && h->vars[x->var].lift)
      hf_add_edit(h, x->s, x->e, E_REF, x->var);
    if (x->kind == K_RETURN) hf_add_edit(h, x->s, x->e, E_RET, 0);
  }
  if (h->oom) return false;
  qsort(h->ed, (size_t)h->ned, sizeof *h->ed, hf_edit_cmp);
  return hf_write(h, root, params[1], body, name);
  return !h->oom;
}

/* Functions that reach a barrier or a wave operation, directly or through
 * another such function (by name). */
typedef struct { hf *h; unsigned (*fns)[2]; char **names; hf_cur *cur; int n, cap; } hf_fns;

static int hf_visit_tu(hf_cur c, hf_cur parent, void *data) {
  (void)parent;
  hf_fns *F = data;
  if (c.kind != K_FUNC || !cx.clang_isCursorDefinition(c)) return 1;
  if (F->n == F->cap) {
    int nc = F->cap ? F->cap * 2 : 64;
    unsigned(*nf)[2] = hf_grow(F->fns, (size_t)F->n, (size_t)nc, sizeof *nf);
    if (nf) F->fns = nf;
    char **nn = nf ? hf_grow(F->names, (size_t)F->n, (size_t)nc, sizeof *nn) : NULL;
    if (nn) F->names = nn;
    hf_cur *ncur = nn ? hf_grow(F->cur, (size_t)F->n, (size_t)nc, sizeof *ncur) : NULL;
    if (ncur) F->cur = ncur;
    if (!nf || !nn || !ncur) {
      F->h->oom = true;
      return 0;
    }
    F->cap = nc;
  }
  hf_range r = cx.clang_getCursorExtent(c);
  hf_str s = cx.clang_getCursorSpelling(c);
  const char *nm = cx.clang_getCString(s);
  F->names[F->n] = dv__strdup(nm ? nm : "");
  cx.clang_disposeString(s);
  if (!F->names[F->n]) {
    F->h->oom = true;
    return 0;
  }
  F->fns[F->n][0] = hf_off(cx.clang_getRangeStart(r));
  F->fns[F->n][1] = hf_off(cx.clang_getRangeEnd(r));
  F->cur[F->n] = c;
  F->n++;
  return 1;
}

static bool hf_mentions(const hf *h, unsigned s, unsigned e, const char *name) {
  size_t l = strlen(name);
  for (unsigned i = s; i + l <= e; i++)
    if (!strncmp(h->src + i, name, l) && !hf_idch(h->src[i + l]) &&
        (i == 0 || !hf_idch(h->src[i - 1])))
      return true;
  return false;
}

char *hk_fission(const char *pre, size_t n, char *note, size_t cap, bool *oom) {
  *oom = false;
  note[0] = 0;
  if (!hk_fission_available() || n > (64u << 20)) return NULL;
  hf h;
  memset(&h, 0, sizeof h);
  h.src = pre;
  void *idx = cx.clang_createIndex(0, 0);
  if (!idx) return NULL;
  const char *args[] = {"-x", "c", "-std=gnu11", "-w", "-ferror-limit=0"};
  hf_unsaved u = {"dv-fission.c", pre, (unsigned long)n};
  h.tu = cx.clang_parseTranslationUnit(idx, "dv-fission.c", args, 5, &u, 1, 0);
  if (!h.tu) {
    cx.clang_disposeIndex(idx);
    hf_fmt(note, cap, "region fission: libclang could not parse the unit\n");
    return NULL;
  }
  hf_fns F = {&h, NULL, NULL, 0, 0};
  cx.clang_visitChildren(cx.clang_getTranslationUnitCursor(h.tu), hf_visit_tu, &F);
  /* which functions reach a barrier: directly, then through others */
  bool *sy = dv__calloc((size_t)F.n + 1, sizeof *sy);
  h.sync = dv__calloc((size_t)F.n + 1, sizeof *h.sync);
  if (!sy || !h.sync) h.oom = true;
  for (int i = 0; !h.oom && i < F.n; i++)
    if (strncmp(F.names[i], "dv__kb_", 7) && hf_text_syncs(&h, F.fns[i][0], F.fns[i][1]))
      sy[i] = true, h.sync[h.nsync++] = F.names[i];
  for (bool more = true; more && !h.oom;) {
    more = false;
    for (int i = 0; i < F.n; i++) {
      if (sy[i] || !strncmp(F.names[i], "dv__kb_", 7)) continue;
      for (int k = 0; k < h.nsync && !sy[i]; k++)
        if (hf_mentions(&h, F.fns[i][0], F.fns[i][1], h.sync[k]))
          sy[i] = true, h.sync[h.nsync++] = F.names[i], more = true;
    }
  }
  for (int k = 0; k < h.nsync && !h.sync_addr; k++) {
    size_t l = strlen(h.sync[k]);
    for (size_t i = 0; i + l <= n && !h.sync_addr; i++)
      if (pre[i] == h.sync[k][0] && !strncmp(pre + i, h.sync[k], l) && !hf_idch(pre[i + l]) &&
          (i == 0 || !hf_idch(pre[i - 1])))
        h.sync_addr = pre[hf_skip(pre, (unsigned)(i + l))] != '(';
  }
  size_t nl = 0;
  int accepted = 0;
  hf_printf(&h, "\n# 1 \"<devarray region fission>\"\n"
                "__attribute__((visibility(\"default\"))) size_t dv__fis_room;\n"
                "__attribute__((visibility(\"default\"))) _Thread_local struct {\n"
                "  int site, line, n; unsigned char done[1024]; } "
                "dv__fis_div;\n"
                "static __attribute__((noinline, cold, unused)) void dv__fis_fault(dv__hthread *t, "
                "int j, const char *what, int line) {\n"
                "  t->tid[0] = j %% t->bdim[0];\n  t->tid[1] = j / t->bdim[0] %% t->bdim[1];\n"
                "  t->tid[2] = j / (t->bdim[0] * t->bdim[1]);\n  dv__rt->fault(what, line);\n}\n");
  for (int i = 0; !h.oom && i < F.n; i++) {
    if (strncmp(F.names[i], "dv__kb_", 7)) continue;
    size_t mark = h.len;
    bool ok = hf_kernel(&h, F.cur[i], F.names[i] + 7);
    if (h.oom) break; /* out of memory: the caller reports it */
    if (!ok) h.len = mark;
    if (h.out) h.out[h.len] = 0;
    accepted += ok;
    char how[128];
    snprintf(how, sizeof how, " (uniform loops %d, thread-index locals %d, loops around regions %d)",
             h.nuni, h.nremat, h.nimp);
    int w = snprintf(note + nl, cap - nl, "region fission: kernel %s: %s%s\n", F.names[i] + 7,
                     ok ? "accepted" : "refused: ", ok ? how : h.why);
    if (w > 0 && nl + (size_t)w < cap) nl += (size_t)w;
  }
  dv__free(h.n);
  dv__free(h.vars);
  dv__free(h.ed);
  dv__free(h.reg);
  dv__free(h.sync);
  *oom = h.oom;
  char *res = accepted && !h.oom ? h.out : NULL;
  if (!res) dv__free(h.out);
  dv__free(sy);
  for (int i = 0; i < F.n; i++) dv__free(F.names[i]);
  dv__free(F.names);
  dv__free(F.fns);
  cx.clang_disposeTranslationUnit(h.tu);
  dv__free(F.cur);
  cx.clang_disposeIndex(idx);
  return res;
}
