/*
 * The host simulator's kernels: region fission, code generation (issue 23).
 *
 * fission.c parses the preprocessed unit with libclang, flattens each
 * kernel's syntax tree and decides what the pass may do (refusals, the
 * regions, which locals are computed once and which live per thread); this
 * file writes dv__fis_<kernel> from that plan: a loop over the block's
 * threads per region, the text of the region with the plan's edits applied
 * (per-thread locals, early returns), loops that hold barriers rebuilt
 * around their regions, and the checks that report divergent barriers.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fission_internal.h"

/* ---- text out ------------------------------------------------------------ */

void hf_put(hf *h, const char *s, size_t n) {
  if (h->oom) return;
  if (h->len + n + 1 > h->cap_out) {
    size_t c = h->cap_out ? h->cap_out * 2 : 4096;
    while (c < h->len + n + 1) c *= 2;
    char *p = hf_grow(h->out, h->out ? h->len + 1 : 0, c, 1);
    if (!p) {
      h->oom = true;
      return;
    }
    h->out = p, h->cap_out = c;
  }
  memcpy(h->out + h->len, s, n);
  h->len += n;
  h->out[h->len] = 0;
}

__attribute__((format(printf, 2, 3))) void hf_printf(hf *h, const char *fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  int w = vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (w < 0 || (size_t)w >= sizeof buf) {
    h->oom = true;
    return;
  }
  hf_put(h, buf, (size_t)w);
}

/* The end of a statement, its `;` included. */
static unsigned hf_stmt_end(const hf *h, int i) {
  unsigned e = h->n[i].e, j = hf_skip(h->src, e);
  return h->src[j] == ';' && h->n[i].kind != K_DECLSTMT && h->n[i].kind != K_COMPOUND ? j + 1 : e;
}

static int hf_new_region(hf *h, unsigned s, unsigned e) {
  hf_reg *r = hf_grow(h->reg, (size_t)h->nreg, (size_t)h->nreg + 1, sizeof *r);
  if (!r) {
    h->oom = true;
    return -1;
  }
  h->reg = r;
  r[h->nreg] = (hf_reg){s, e};
  return h->nreg++;
}


/* ---- regions ----------------------------------------------------------- */

int hf_region_of(const hf *h, unsigned off) {
  for (int r = 0; r < h->nreg; r++)
    if (off >= h->reg[r].s && off < h->reg[r].e) return r;
  return -1;
}

/* Emit text [s, e) with the edits inside it applied. */
void hf_emit(hf *h, unsigned s, unsigned e, int skip_edit);

static void hf_emit_decl(hf *h, int d) {
  for (int c = h->n[d].first; c >= 0; c = h->n[c].next) {
    if (h->n[c].kind != K_VAR) continue;
    const hf_var *v = &h->vars[h->n[c].var];
    const hf_node *x = &h->n[c];
    /* the initializer: after the first `=` past the name (brackets skipped) */
    unsigned j = x->loc;
    while (j < x->e && hf_idch(h->src[j])) j++;
    int depth = 0;
    for (; j < x->e; j++) {
      char ch = h->src[j];
      if (ch == '[' || ch == '(') depth++;
      if (ch == ']' || ch == ')') depth--;
      if (ch == '=' && depth <= 0 && h->src[j + 1] != '=') break;
    }
    if (j >= x->e) continue; /* no initializer */
    unsigned is = hf_skip(h->src, j + 1);
    bool brace = h->src[is] == '{';
    int vi = h->n[c].var;
    if (v->tkind == T_CARRAY || v->tkind == T_IARRAY) {
      hf_printf(h, " __builtin_memcpy(dv__v%d[dv__i], (__typeof__(%s))%s", vi, v->type,
                brace ? "" : "{");
      hf_emit(h, is, x->e, -1);
      hf_printf(h, "%s, sizeof dv__v%d[0]);", brace ? "" : "}", vi);
    } else {
      hf_printf(h, " dv__v%d[dv__i] = ", vi);
      if (brace) hf_printf(h, "(__typeof__(%s))", v->type);
      hf_emit(h, is, x->e, -1);
      hf_put(h, ";", 1);
    }
  }
}

void hf_emit(hf *h, unsigned s, unsigned e, int skip_edit) {
  unsigned pos = s;
  for (int k = 0; k < h->ned; k++) {
    const hf_edit *d = &h->ed[k];
    if (k == skip_edit || d->s < pos || d->s >= e) continue;
    hf_put(h, h->src + pos, d->s - pos);
    if (d->kind == E_REF)
      hf_printf(h, "(dv__v%d[dv__i])", d->arg);
    else if (d->kind == E_RET)
      hf_printf(h, "do { dv__done[dv__i] = 1; dv__ndone = 1; goto dv__n%d%s; } while (0)",
                h->cur_region, h->lsuf ? h->lsuf : "");
    else if (d->kind == E_DECL)
      hf_emit_decl(h, d->arg);
    pos = d->e;
  }
  if (pos < e) hf_put(h, h->src + pos, e - pos);
}


/* ---- generation (plan: register the regions; else: write them) ---------- */

/* One loop over the block's threads around the stretch [s, e); `skip`: the
 * threads that returned are skipped; `lsuf` tells its label from the other
 * loop's. */
static void hf_region_loop(hf *h, unsigned s, unsigned e, const char *pre, const char *post,
                           const char *rec, bool skip, const char *lsuf) {
  int r = h->cur_region;
  h->lsuf = lsuf;
  hf_printf(h, "\n  for (int dv__z = 0; dv__z < dv__bz; dv__z++) { %stid[2] = dv__z;\n"
               "  for (int dv__y = 0; dv__y < dv__by; dv__y++) { %stid[1] = dv__y;\n"
               "  for (int dv__x = 0; dv__x < dv__bx; dv__x++) { %stid[0] = dv__x;\n"
               "  const int dv__i = dv__x + dv__bx * (dv__y + dv__by * dv__z); (void)dv__i;\n",
            rec, rec, rec);
  if (skip) hf_printf(h, "  if (dv__done[dv__i]) continue;\n");
  /* the locals declared again in each region (fission.c: remat) */
  for (int d = 0; d < h->nn; d++) {
    if (h->n[d].kind != K_DECLSTMT || h->n[d].e > s) continue;
    bool re = false;
    for (int c = h->n[d].first; c >= 0; c = h->n[c].next)
      if (h->n[c].kind == K_VAR && h->vars[h->n[c].var].remat) re = true;
    if (!re) continue;
    hf_put(h, "  ", 2);
    hf_put(h, h->src + h->n[d].s, h->n[d].e - h->n[d].s);
    hf_put(h, ";", 1);
    for (int c = h->n[d].first; c >= 0; c = h->n[c].next) {
      unsigned a = h->n[c].loc, b = a;
      while (hf_idch(h->src[b])) b++;
      if (h->n[c].kind == K_VAR) hf_printf(h, " (void)%.*s;", (int)(b - a), h->src + a);
    }
    hf_put(h, "\n", 1);
  }
  hf_printf(h, "  {%s", pre ? pre : "");
  hf_emit(h, s, e, -1);
  hf_printf(h, "%s\n  }\n  dv__n%d%s:;\n  }}}", post ? post : "", r, lsuf);
  h->lsuf = NULL;
}

static void hf_region(hf *h, bool plan, unsigned s, unsigned e, const char *pre,
                      const char *post) {
  if (plan) {
    hf_new_region(h, s, e);
    return;
  }
  int r = hf_region_of(h, s);
  h->cur_region = r;
  /* A region that calls nothing runs on a copy of the record that does not
   * escape (so the loop vectorizes); one that calls something keeps the
   * record dv__self points to up to date (the runtime and device
   * functions read it). */
  bool calls = false;
  for (int i = 0; i < h->nn && !calls; i++) {
    calls = h->n[i].kind == K_CALL && h->n[i].s >= s && h->n[i].s < e;
    for (int k = 0; k < h->ned && calls; k++) /* in a declaration computed once */
      if (h->ed[k].kind == E_DROP && h->n[i].s >= h->ed[k].s && h->n[i].s < h->ed[k].e)
        calls = false;
  }
  const char *rec = calls ? "dv__t->" : "dv__r.";
  if (!calls) /* a fault's report names the record's thread "or one after it": the first */
    hf_printf(h, "\n  dv__t->tid[0] = dv__t->tid[1] = dv__t->tid[2] = 0;"
                 "\n  { dv__hthread dv__r = *dv__t; const dv__hthread *const dv__self = &dv__r;");
  /* With early returns, the threads that returned are skipped, but only
   * once one has: a loop with that test does not vectorize, so the region
   * has two, and the one without runs while no thread has returned. */
  if (h->has_ret) {
    hf_printf(h, "\n  if (!dv__ndone) {");
    hf_region_loop(h, s, e, pre, post, rec, false, "");
    hf_printf(h, "\n  } else {");
    hf_region_loop(h, s, e, pre, post, rec, true, "_r");
    hf_printf(h, "\n  }");
  } else {
    hf_region_loop(h, s, e, pre, post, rec, false, "");
  }
  if (!calls) hf_printf(h, " }");
  hf_printf(h, "\n");
}

static void hf_barrier_check(hf *h, int call) {
  if (!h->has_ret) return;
  /* dv__rt->barrier(site, fence, line): the first and last arguments */
  const char *s = h->src;
  unsigned j = h->n[call].s;
  while (j < h->n[call].e && s[j] != '(') j++;
  int site = atoi(s + j + 1);
  unsigned k = h->n[call].e - 1;
  while (k > j && s[k] != ',') k--;
  int line = atoi(s + k + 1);
  hf_printf(h, "\n  if (dv__ndone) { int dv__a = 0;\n"
               "    for (int dv__j = 0; dv__j < dv__n; dv__j++) dv__a += dv__done[dv__j];\n"
               "    if (dv__a == dv__n) goto dv__end;\n"
               "    if (dv__a) {\n"
               "      dv__fis_div.site = %d, dv__fis_div.line = %d, dv__fis_div.n = dv__n;\n"
               "      __builtin_memcpy(dv__fis_div.done, dv__done, (size_t)dv__n);\n"
               "      dv__in->stop = 3; return; } }\n", site, line);
}

static void hf_cond_check(hf *h, unsigned line) {
  hf_printf(h, "\n  { int dv__f = -1, dv__c = 0;\n"
               "    for (int dv__j = 0; dv__j < dv__n; dv__j++) {\n"
               "      if (%s) continue;\n"
               "      if (dv__f < 0) dv__f = dv__j, dv__c = dv__cv[dv__j];\n"
               "      else if (dv__cv[dv__j] != dv__c) dv__fis_fault(dv__t, dv__j, "
               "\"divergent barrier: the condition of the loop at line %u, which holds a "
               "barrier, differs between the threads of its block\", %u);\n"
               "    }\n"
               "    if (dv__f < 0) goto dv__end;\n"
               "    if (!dv__c) break; }\n", h->has_ret ? "dv__done[dv__j]" : "0", line, line);
}


static void hf_gen_loop(hf *h, int i, bool plan) {
  const hf_node *x = &h->n[i];
  unsigned line = hf_node_line(h, i);
  int body = x->kind == K_DO ? x->first : x->last;
  unsigned p[3][2] = {{0, 0}, {0, 0}, {0, 0}};
  if (x->kind == K_FOR)
    hf_for_parts(h, i, p);
  else if (x->kind == K_WHILE)
    p[1][0] = h->n[x->first].s, p[1][1] = h->n[x->first].e;
  else
    p[1][0] = h->n[x->last].s, p[1][1] = h->n[x->last].e;
  if (x->uni) { /* uniform: one loop for the block, its variable a scalar */
    if (!plan) {
      hf_printf(h, "\n  { ");
      hf_emit(h, p[0][0], p[0][1], -1);
      hf_printf(h, ";\n  for (;;) {");
      if (!hf_blank(h->src, p[1][0], p[1][1])) {
        hf_printf(h, "\n  if (!(");
        hf_emit(h, p[1][0], p[1][1], -1);
        hf_printf(h, ")) break;");
      }
    }
    if (h->n[body].kind == K_COMPOUND)
      hf_gen_list(h, body, plan);
    else /* a loop around regions may have a statement for its body */
      hf_region(h, plan, h->n[body].s, hf_stmt_end(h, body), NULL, NULL);
    if (!plan) {
      hf_printf(h, "\n  ");
      hf_emit(h, p[2][0], p[2][1], -1);
      hf_printf(h, ";\n  }}");
    }
    return;
  }
  if (!plan) hf_printf(h, "\n  {");
  if (!hf_blank(h->src, p[0][0], p[0][1])) { /* init: a declaration or an expression */
    int d = -1;
    for (int c = x->first; c >= 0; c = h->n[c].next)
      if (h->n[c].kind == K_DECLSTMT && h->n[c].s >= p[0][0] && h->n[c].s < p[0][1]) d = c;
    if (d >= 0)
      hf_region(h, plan, h->n[d].s, h->n[d].e > p[0][1] ? h->n[d].e : p[0][1], NULL, ";");
    else
      hf_region(h, plan, p[0][0], p[0][1], NULL, ";");
  }
  if (!plan) hf_printf(h, "\n  for (;;) {");
  bool cond = !hf_blank(h->src, p[1][0], p[1][1]);
  if (x->kind == K_DO) hf_gen_list(h, body, plan);
  if (cond) {
    hf_region(h, plan, p[1][0], p[1][1], " dv__cv[dv__i] = !!(", ");");
    if (!plan) hf_cond_check(h, line);
  }
  if (x->kind != K_DO) hf_gen_list(h, body, plan);
  if (!hf_blank(h->src, p[2][0], p[2][1])) hf_region(h, plan, p[2][0], p[2][1], NULL, ";");
  if (!plan) hf_printf(h, "\n  }}");
}

void hf_gen_list(hf *h, int compound, bool plan) {
  int c = h->n[compound].first;
  while (c >= 0) {
    if (!hf_contains(h, c) && !h->n[c].imp) { /* a run of barrier-free statements: one region */
      int last = c;
      while (h->n[last].next >= 0 && !hf_contains(h, h->n[last].next) && !h->n[h->n[last].next].imp)
        last = h->n[last].next;
      hf_region(h, plan, h->n[c].s, hf_stmt_end(h, last), NULL, NULL);
      c = h->n[last].next;
      continue;
    }
    if (hf_is_barrier(h, c)) {
      if (!plan) hf_barrier_check(h, c);
    } else if (h->n[c].kind == K_COMPOUND) {
      hf_gen_list(h, c, plan);
    } else {
      hf_gen_loop(h, c, plan);
    }
    c = h->n[c].next;
  }
}
/* ---- the function ---------------------------------------------------------- */

bool hf_write(hf *h, int root, int param1, int body, const char *name) {
  const hf_node *f = &h->n[root];
  /* The function. */
  bool calls = false; /* anything but a barrier (printf and the like take stack) */
  for (int i = 0; i < h->nn && !calls; i++)
    calls = h->n[i].kind == K_CALL && !hf_rt_call(h->src, h->n[i].s, "barrier") &&
            !hf_rt_call(h->src, h->n[i].s, "shared");
  unsigned ps = h->n[param1].s, pe = h->n[f->last].s;
  for (int c = f->first; c >= 0; c = h->n[c].next)
    if (h->n[c].kind == K_PARM) pe = h->n[c].e;
  hf_printf(h, "\n__attribute__((visibility(\"default\"))) void dv__fis_%s(", name);
  hf_put(h, h->src + ps, pe - ps);
  hf_printf(h, ") {\n  { size_t dv__per = 0");
  for (int v = 0; v < h->nvars; v++)
    if (h->vars[v].lift) hf_printf(h, " + sizeof(__typeof__(%s))", h->vars[v].type);
  hf_printf(h, " + %d;\n    size_t dv__frame = %d", (h->has_ret ? 1 : 0) + (h->has_loops ? 1 : 0),
            calls ? 16384 : 1024);
  /* the rest of the frame: the locals that stay (the kernel's own frame on
   * a fiber), those whose type is named at file scope (no tag: a local
   * struct's is not declared yet here) */
  for (int v = 0; v < h->nvars; v++) {
    const hf_var *x = &h->vars[v];
    if (x->lift || x->tkind == T_VARRAY || !x->type[0] || strchr(x->type, '(') ||
        strstr(x->type, "struct") || strstr(x->type, "union") || strstr(x->type, "enum"))
      continue;
    hf_printf(h, " + sizeof(__typeof__(%s))", x->type);
  }
  hf_printf(h, ";\n    if ((size_t)dv__self->bdim[0] * (size_t)dv__self->bdim[1] * "
               "(size_t)dv__self->bdim[2] * dv__per + dv__frame > dv__fis_room) { "
               "dv__self->stop = 2; return; } }\n");
  /* dv_global_id in int (kernel.h's dv__gidt), so that it is affine in the
   * thread index for the vectorizer: a launch with more threads in a
   * dimension than an int holds runs as without the pass. */
  hf_printf(h, "  for (int dv__d = 0; dv__d < 3; dv__d++)\n"
               "    if ((long long)dv__self->gdim[dv__d] * dv__self->bdim[dv__d] > 2147483647) { "
               "dv__self->stop = 2; return; }\n");
  hf_printf(h, "  dv__hthread *const dv__in = dv__self, dv__l = *dv__self, *const dv__t = &dv__l;\n"
               "  (void)dv__in;\n"
               "  dv__self = dv__t;\n  {\n"
               "  const dv__hthread *const dv__self = dv__t;\n"
               "  typedef int dv__gidt;\n"
               "  const int dv__bx = dv__t->bdim[0], dv__by = dv__t->bdim[1], "
               "dv__bz = dv__t->bdim[2];\n"
               "  const int dv__n = dv__bx * dv__by * dv__bz; (void)dv__n;\n");
  for (int v = 0; v < h->nvars; v++)
    if (h->vars[v].lift) hf_printf(h, "  __typeof__(%s) dv__v%d[dv__n];\n", h->vars[v].type, v);
  if (h->has_ret)
    hf_printf(h, "  unsigned char dv__done[dv__n];\n  __builtin_memset(dv__done, 0, "
                 "sizeof dv__done);\n  int dv__ndone = 0; /* whether a thread returned */\n");
  if (h->has_loops) hf_printf(h, "  unsigned char dv__cv[dv__n];\n");
  for (int k = 0; k < h->ned; k++)
    if (h->ed[k].kind == E_DROP) {
      hf_put(h, "  ", 2);
      hf_emit(h, h->ed[k].s, h->ed[k].e, k);
      hf_put(h, ";\n", 2);
    }
  hf_gen_list(h, body, false);
  hf_printf(h, "\n  }\n  dv__end:;\n}\n");
  return !h->oom;
}
