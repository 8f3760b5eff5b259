/*
 * The host simulator's kernels: region fission, questions on the text and
 * the tree (issue 23): what is a barrier, a runtime call, a write, a for
 * loop's clauses, a line; and uniform values.
 *
 * Which expressions are the same for every thread of a block (hf_pure),
 * which for loops holding barriers have a uniform variable (a scalar in the
 * generated code, one loop for the block), and which uniform for loops
 * without barriers may run around the threads' loop (PoCL's implicit loop
 * barriers).  fission.c calls these while it plans a kernel.
 */
#include <stdlib.h>
#include <string.h>

#include "fission_internal.h"

/* ---- the text and the tree ----------------------------------------------- */

/* An array of `size`-byte elements grown from `have` to `want` elements
 * (there is no dv__realloc: the allocation hook counts and injects faults). */
void *hf_grow(void *p, size_t have, size_t want, size_t size) {
  void *q = dv__malloc(want * size);
  if (!q) return NULL;
  if (have) memcpy(q, p, have * size);
  dv__free(p);
  return q;
}

/* Does the text at i read `dv__rt -> <member> (`?  member NULL: a barrier,
 * a wave barrier or a wave operation. */
bool hf_rt_call(const char *s, unsigned i, const char *member) {
  if (strncmp(s + i, "dv__rt", 6) || (i && hf_idch(s[i - 1]))) return false;
  i = hf_skip(s, i + 6);
  if (strncmp(s + i, "->", 2)) return false;
  i = hf_skip(s, i + 2);
  const char *names[] = {"barrier", "wavebarrier", "wave"};
  for (int k = 0; k < 3; k++) {
    const char *m = member ? member : names[k];
    size_t ml = strlen(m);
    if (!strncmp(s + i, m, ml) && !hf_idch(s[i + ml]) && s[hf_skip(s, i + (unsigned)ml)] == '(')
      return true;
    if (member) break;
  }
  return false;
}

bool hf_text_syncs(const hf *h, unsigned s, unsigned e) {
  for (unsigned i = s; i < e; i++)
    if (h->src[i] == 'd' && hf_rt_call(h->src, i, NULL)) return true;
  return false;
}

static bool hf_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

/* The start of the text before the name at s, opening parentheses skipped
 * (their count in *parens). */
static unsigned hf_before(const char *src, unsigned s, int *parens) {
  unsigned j = s;
  *parens = 0;
  for (;;) {
    while (j > 0 && hf_space(src[j - 1])) j--;
    if (j > 0 && src[j - 1] == '(') {
      j--, ++*parens;
      continue;
    }
    return j;
  }
}

/* Is the name at s (a variable) the operand of a unary `&`, through
 * parentheses and a cast (`(int *)&k`: a `)` before the `&` counts as a
 * cast's, never as an operand's), so its address is taken? */
bool hf_addr_taken(const char *src, unsigned s) {
  int parens;
  unsigned j = hf_before(src, s, &parens);
  if (j >= 1 && src[j - 1] == '&' && !(j >= 2 && src[j - 2] == '&')) {
    unsigned k = j - 1;
    while (k > 0 && hf_space(src[k - 1])) k--;
    char p = k ? src[k - 1] : 0;
    if (p == ')') { /* a cast's `(type *)` or `(name)`, or an operand's `(a + b)` */
      unsigned o = k - 1;
      int depth = 0;
      bool type = true;
      while (o > 0) {
        o--;
        if (src[o] == ')') depth++;
        if (src[o] == '(' && depth-- == 0) break;
        if (!(hf_idch(src[o]) || hf_space(src[o]) || src[o] == '*')) type = false;
      }
      return type;
    }
    if (!(hf_idch(p) || p == ']')) return true; /* unary &: address taken */
  }
  return false;
}

/* Is the variable named at [s, e) written (assigned, incremented, address
 * taken), also through parentheses (`(k) += t`, `(k)++`) and casts? */
bool hf_written(const char *src, unsigned s, unsigned e) {
  int parens;
  unsigned j = hf_before(src, s, &parens);
  unsigned i = hf_skip(src, e);
  bool closed = false;
  for (;;) {
    if (src[i] == '.') { /* a member of a struct */
      i = hf_skip(src, i + 1);
      while (hf_idch(src[i])) i++;
      i = hf_skip(src, i);
    } else if (src[i] == ')' && parens > 0) { /* `(k)`: the parentheses around it */
      parens--, closed = true;
      i = hf_skip(src, i + 1);
    } else {
      break;
    }
  }
  const char *ops[] = {"<<=", ">>=", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "++", "--"};
  for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++)
    if (!strncmp(src + i, ops[k], strlen(ops[k]))) {
      /* `if (k) ++x`: the operator belongs to what follows the `)` */
      unsigned a = hf_skip(src, i + (unsigned)strlen(ops[k]));
      if (closed && k >= 10 && (hf_idch(src[a]) || src[a] == '(')) continue;
      return true;
    }
  if (src[i] == '=' && src[i + 1] != '=') return true;
  if (j >= 2 && (!strncmp(src + j - 2, "++", 2) || !strncmp(src + j - 2, "--", 2))) return true;
  return hf_addr_taken(src, s);
}

unsigned hf_node_line(const hf *h, int i) {
  /* presumed line of an offset: count from the last line marker before it */
  const char *s = h->src;
  unsigned off = h->n[i].s, line = 1;
  unsigned ls = off;
  int nl = 0;
  while (ls > 0) {
    if (s[ls - 1] == '\n') {
      if (s[ls] == '#' && s[ls + 1] == ' ' && s[ls + 2] >= '0' && s[ls + 2] <= '9') {
        line = (unsigned)atoi(s + ls + 2) + (unsigned)nl - 1;
        return line;
      }
      nl++;
    }
    ls--;
  }
  return (unsigned)nl + 1;
}

/* Is node i a barrier call (dv__rt->barrier(...)), a statement of its own? */
bool hf_is_barrier(const hf *h, int i) {
  return h->n[i].kind == K_CALL && hf_rt_call(h->src, h->n[i].s, "barrier");
}

bool hf_contains(const hf *h, int i) { return hf_text_syncs(h, h->n[i].s, h->n[i].e); }

/* A for loop's three clauses' text ranges. */
bool hf_for_parts(const hf *h, int i, unsigned p[3][2]) {
  const char *s = h->src;
  unsigned j = hf_skip(s, h->n[i].s + 3);
  if (s[j] != '(') return false;
  int depth = 0, part = 0;
  p[0][0] = j + 1;
  for (j = j + 1; j < h->n[i].e; j++) {
    if (s[j] == '(' || s[j] == '[' || s[j] == '{') depth++;
    if (s[j] == ']' || s[j] == '}') depth--;
    if (s[j] == ')') {
      if (depth-- == 0) {
        if (part != 2) return false;
        p[2][1] = j;
        return true;
      }
    }
    if (s[j] == ';' && depth == 0) {
      if (part == 2) return false;
      p[part][1] = j;
      p[++part][0] = j + 1;
    }
  }
  return false;
}

/* Is break/continue node i's target the loop `loop`? */
bool hf_leaves(const hf *h, int i, int loop) {
  for (int p = h->n[i].parent; p >= 0; p = h->n[p].parent) {
    int k = h->n[p].kind;
    if (k == K_FOR || k == K_WHILE || k == K_DO || (k == K_SWITCH && h->n[i].kind == K_BREAK))
      return p == loop;
  }
  return false;
}

/* ---- uniform values --------------------------------------------------------- */

/* Is every node inside [s, e) uniform: constants, parameters, the block's
 * and grid's indices and sizes, locals computed once or uniform, and with
 * tid the thread index and locals declared again in each region; no calls,
 * no memory read, nothing written (step: only the local `loopvar`)? */
bool hf_pure(const hf *h, unsigned s, unsigned e, unsigned self_loc, bool tid,
             int loopvar) {
  const char *src = h->src;
  for (int i = 0; i < h->nn; i++) {
    const hf_node *x = &h->n[i];
    if (x->s < s || x->e > e || x->s >= x->e) continue;
    switch (x->kind) {
    case K_VAR: /* the declaration itself (a second declarator starts at its name) */
    case 43: case 100: case 106: case 107: case 110: case 111: case 116: case 117: case 136:
      break; /* type names, implicit casts, literals, (), ?:, casts, sizeof */
    case K_DECLREF:
      if (x->ref_kind == K_PARM && x->ref_loc == self_loc) { /* dv__self->member */
        unsigned j = hf_skip(src, x->e);
        if (strncmp(src + j, "->", 2)) return false;
        j = hf_skip(src, j + 2);
        bool ok = false;
        const char *m[] = {"bid", "bdim", "gdim", "tid"};
        for (int k = 0; k < (tid ? 4 : 3); k++) {
          size_t l = strlen(m[k]);
          ok = ok || (!strncmp(src + j, m[k], l) && !hf_idch(src[j + l]));
        }
        if (!ok) return false;
      } else if (x->ref_kind == K_VAR) {
        if (x->var < 0) return false;
        const hf_var *v = &h->vars[x->var];
        if (!(v->hoist || v->uni || (tid && v->remat) || x->var == loopvar)) return false;
      } else if (x->ref_kind != K_PARM && x->ref_kind != 7 /* enumerator */) {
        return false;
      }
      if (hf_written(src, x->s, x->e) && (x->ref_kind != K_VAR || x->var != loopvar))
        return false;
      break;
    case 102: /* member: of dv__self only */
    case 113: /* subscript: dv__self->tid[d] and the like only */
      if (strncmp(src + x->s, "dv__self", 8) || hf_idch(src[x->s + 8])) return false;
      break;
    case 112: { /* unary: not *, & (++ and -- are writes, seen at the operand) */
      char c = src[x->s];
      if (c == '*' || (c == '&' && src[x->s + 1] != '&')) return false;
      break;
    }
    case 114: case 115: { /* binary: an assignment only to loopvar (at the operand) */
      int a = x->first;
      if (a < 0) return false;
      unsigned k = hf_skip(src, h->n[a].e);
      bool asg = (src[k] == '=' && src[k + 1] != '=') || x->kind == 115;
      if (asg && (h->n[a].kind != K_DECLREF || h->n[a].var != loopvar || loopvar < 0))
        return false;
      break;
    }
    default:
      return false;
    }
  }
  return true;
}

/* Is local v written anywhere outside [s, e)? */
bool hf_changed(const hf *h, int v, unsigned s, unsigned e) {
  for (int r = 0; r < h->nn; r++)
    if (h->n[r].kind == K_DECLREF && h->n[r].var == v && !(h->n[r].s >= s && h->n[r].e <= e) &&
        hf_written(h->src, h->n[r].s, h->n[r].e))
      return true;
  return false;
}

/* A for loop with a barrier `for (T v = init; cond; step)` whose init, cond
 * and step are uniform (hf_pure) and whose v changes only in step: v is a
 * scalar and the loop runs once for the block, around its regions. */
void hf_uniform_loop(hf *h, int i, unsigned self_loc) {
  unsigned p[3][2];
  if (!hf_for_parts(h, i, p)) return;
  int d = -1, v = -1, nv = 0;
  for (int c = h->n[i].first; c >= 0; c = h->n[c].next)
    if (h->n[c].kind == K_DECLSTMT && h->n[c].s >= p[0][0] && h->n[c].s < p[0][1]) d = c;
  if (d < 0) return;
  for (int c = h->n[d].first; c >= 0; c = h->n[c].next)
    if (h->n[c].kind == K_VAR) v = c, nv++;
  if (nv != 1 || h->n[v].first < 0) return;
  int var = h->n[v].var;
  if (h->vars[var].tkind < 3 || h->vars[var].tkind > 20) return; /* integers */
  if (!hf_pure(h, h->n[v].loc, h->n[v].e, self_loc, false, -1) ||
      !hf_pure(h, p[1][0], p[1][1], self_loc, false, var) ||
      !hf_pure(h, p[2][0], p[2][1], self_loc, false, var) || hf_changed(h, var, p[2][0], p[2][1]))
    return;
  /* the condition must not write it either */
  for (int r = 0; r < h->nn; r++)
    if (h->n[r].kind == K_DECLREF && h->n[r].var == var && h->n[r].s >= p[1][0] &&
        h->n[r].e <= p[1][1] && hf_written(h->src, h->n[r].s, h->n[r].e))
      return;
  h->vars[var].uni = true;
  h->n[i].uni = true;
  h->nuni++;
}

/* May the for loop i (no barrier in it) run around the threads' loops: no
 * call (device functions, atomics, dv_printf, the runtime), no return, no
 * break or continue that leaves it? */
bool hf_implicit_ok(const hf *h, int i) {
  for (int k = i + 1; k < h->nn && h->n[k].s < h->n[i].e; k++) {
    int kind = h->n[k].kind;
    if (h->n[k].s < h->n[i].s || h->n[k].e > h->n[i].e) continue;
    if (kind == K_CALL || kind == K_RETURN || (kind == K_DECLREF && h->n[k].ref_kind == K_FUNC))
      return false;
    if ((kind == K_BREAK || kind == K_CONTINUE) && hf_leaves(h, k, i)) return false;
  }
  return true;
}
