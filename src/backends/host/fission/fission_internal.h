/*
 * Region fission (fission.c: libclang, the tree, the plan;
 * fission_text.c: questions on the text and tree, uniform values;
 * fission_gen.c: the generated code): what the three files share (private
 * to fission/; the others see fission.h).
 */
#ifndef DV_HOST_FISSION_INTERNAL_H
#define DV_HOST_FISSION_INTERNAL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>

#include "../../../core/core.h"
#include "fission.h"

/* snprintf that may truncate (messages), without the compiler's warning. */
__attribute__((format(printf, 3, 4))) static inline void hf_fmt(char *buf, size_t cap,
                                                                const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, cap, fmt, ap);
  va_end(ap);
}

enum { /* cursor kinds (clang-c/Index.h) */
  K_FUNC = 8, K_VAR = 9, K_PARM = 10, K_CALL = 103, K_COMPOUND = 202, K_LABEL = 201,
  K_WHILE = 207, K_DO = 208, K_FOR = 209, K_GOTO = 210, K_IGOTO = 211, K_CONTINUE = 212,
  K_BREAK = 213, K_RETURN = 214, K_ASM = 215, K_SWITCH = 206, K_DECLSTMT = 231,
  K_DECLREF = 101, K_ADDRLABEL = 120, K_STMTEXPR = 121
};
enum { T_POINTER = 101, T_RECORD = 105, T_CARRAY = 112, T_IARRAY = 114, T_VARRAY = 115 };

/* ---- the kernel's syntax tree, flattened --------------------------------- */

typedef struct hf_node {
  int kind, parent, first, next, last; /* tree links (-1: none) */
  unsigned s, e, loc;                  /* extent [s, e) and location (offsets) */
  int ref_kind;                        /* DeclRefExpr: what it names */
  unsigned ref_loc;
  int var; /* VarDecl: its index in vars; DeclRefExpr: the local it names (-1: none) */
  bool uni; /* a for loop with a barrier whose variable is uniform (a scalar) */
  bool imp; /* such a loop without a barrier at the top: the threads' loops run inside it */
} hf_node;

typedef struct hf_var {
  int node, decl;  /* its VarDecl and DeclStmt nodes */
  int region;      /* where it is declared */
  int tkind;       /* its canonical type's kind */
  char type[256];  /* that type, top-level const removed */
  bool lift, hoist; /* per thread; computed once before the regions */
  bool uni;         /* a uniform loop's variable: a scalar */
  bool remat;       /* declared at the top from uniform values and the thread
                     * index, never changed: declared again in the regions */
} hf_var;

enum { E_REF, E_RET, E_DECL, E_DROP };
typedef struct hf_edit { unsigned s, e; int kind, arg; } hf_edit;

typedef struct hf_reg { unsigned s, e; } hf_reg;

typedef struct hf {
  const char *src;
  void *tu;
  hf_node *n;
  int nn, cap;
  hf_var *vars;
  int nvars;
  hf_edit *ed;
  int ned;
  hf_reg *reg;
  int nreg;
  int cur_region;  /* while emitting */
  const char *lsuf; /* while emitting: the suffix of the region's label (its two loops) */
  bool has_ret, has_loops, oom;
  int nparams;
  int nuni, nremat, nimp; /* uniform loops; locals declared again in each region */
  char *out;       /* the generated text */
  size_t len, cap_out;
  char why[200];   /* why the kernel was refused */
  char **sync;     /* functions that reach a barrier or a wave operation */
  int nsync;
  bool sync_addr;  /* one of them named other than called (its address taken) */
} hf;

/* helpers on text */
static inline bool hf_idch(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}
static inline unsigned hf_skip(const char *s, unsigned i) {
  while (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') i++;
  return i;
}
static inline bool hf_blank(const char *s, unsigned a, unsigned b) {
  for (unsigned i = a; i < b; i++)
    if (!(s[i] == ' ' || s[i] == '\t' || s[i] == '\n')) return false;
  return true;
}

/* fission_text.c: the text and the tree */
void *hf_grow(void *p, size_t have, size_t want, size_t size);
bool hf_rt_call(const char *s, unsigned i, const char *member);
bool hf_text_syncs(const hf *h, unsigned s, unsigned e);
unsigned hf_node_line(const hf *h, int i);
bool hf_is_barrier(const hf *h, int i);
bool hf_contains(const hf *h, int i);
bool hf_for_parts(const hf *h, int i, unsigned p[3][2]);
/* Is the variable named at [s, e) written (assigned, incremented, address
 * taken), also through parentheses and casts (`(k) += t`, `(int *)&k`)? */
bool hf_written(const char *src, unsigned s, unsigned e);
/* Is the name at s the operand of a unary `&` (through parentheses, casts)? */
bool hf_addr_taken(const char *src, unsigned s);
/* Is break/continue node i's target the loop `loop`? */
bool hf_leaves(const hf *h, int i, int loop);

/* fission_text.c: uniform values */
/* Are all nodes in [s, e) uniform (with tid: or from the thread index; the
 * local loopvar may be written)? */
bool hf_pure(const hf *h, unsigned s, unsigned e, unsigned self_loc, bool tid, int loopvar);
/* Is local v written outside [s, e)? */
bool hf_changed(const hf *h, int v, unsigned s, unsigned e);
/* Mark for loop i uniform (hf_node.uni, its variable's hf_var.uni) if it is. */
void hf_uniform_loop(hf *h, int i, unsigned self_loc);
/* May barrier-free for loop i run around the threads' loop? */
bool hf_implicit_ok(const hf *h, int i);

/* fission_gen.c */
void hf_put(hf *h, const char *s, size_t n);
__attribute__((format(printf, 2, 3))) void hf_printf(hf *h, const char *fmt, ...);
int hf_region_of(const hf *h, unsigned off);
void hf_emit(hf *h, unsigned s, unsigned e, int skip_edit);
/* plan: register the regions (hf.reg); else write them */
void hf_gen_list(hf *h, int compound, bool plan);
/* Append dv__fis_<name> to h->out (root: the function; param1: its second
 * parameter; body: its compound statement). */
bool hf_write(hf *h, int root, int param1, int body, const char *name);

#endif
