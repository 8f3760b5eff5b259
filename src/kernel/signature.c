/*
 * Kernel signatures read from a program's source: the scan of DV_KERNEL
 * declarations, typedefs and kernel-macro invocations (signature.h says
 * what the reader does and does not understand).  The preprocessor it
 * follows (directives, conditions, aliases) is sigpp.c's; what a parameter
 * list means (types, kinds) is sigtypes.c's.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sigscan.h"
/* ---- the scan ------------------------------------------------------------------------ */


/* Record DV_KERNEL( ... ) whose '(' is at sc->i. */
/* The signature of `kernel`, or -1. */
static long dv__kfind(const dv_kscan *sc, const char *kernel) {
  if (!sc->ktabcap) return -1;
  for (size_t h = dv__kpp_hash(kernel, strlen(kernel)) & (sc->ktabcap - 1);; h = (h + 1) & (sc->ktabcap - 1)) {
    uint32_t k = sc->ktab[h];
    if (!k) return -1;
    if (strcmp(sc->out.v[k - 1].kernel, kernel) == 0) return (long)k - 1;
  }
}

/* Append sig to the output (and its name to the table); false when out of memory. */
static bool dv__kadd(dv_kscan *sc, dv_ksig *sig) {
  if (sc->out.n == sc->capout) {
    size_t cap = sc->capout ? 2 * sc->capout : 8;
    dv_ksig *nv = dv__kpp_grow(sc->out.v, sc->out.n * sizeof *nv, cap * sizeof *nv);
    uint32_t *nt = nv ? dv__calloc(2 * cap, sizeof *nt) : NULL;
    if (!nt) {
      if (nv) sc->out.v = nv, sc->capout = cap;
      return false;
    }
    sc->out.v = nv, sc->capout = cap;
    dv__free(sc->ktab);
    sc->ktab = nt, sc->ktabcap = 2 * cap;
    for (size_t i = 0; i < sc->out.n; i++) {
      const char *kn = sc->out.v[i].kernel;
      size_t h = dv__kpp_hash(kn, strlen(kn)) & (sc->ktabcap - 1);
      while (sc->ktab[h]) h = (h + 1) & (sc->ktabcap - 1);
      sc->ktab[h] = (uint32_t)(i + 1);
    }
  }
  size_t h = dv__kpp_hash(sig->kernel, strlen(sig->kernel)) & (sc->ktabcap - 1);
  while (sc->ktab[h]) h = (h + 1) & (sc->ktabcap - 1);
  sc->out.v[sc->out.n] = *sig;
  sc->ktab[h] = (uint32_t)(++sc->out.n);
  return true;
}

/* Record DV_KERNEL( ... ) whose '(' is at sc->i.  Directives inside the
 * list are followed (text in a branch not compiled is dropped; text in one
 * the reader cannot evaluate makes the declaration ambiguous). */
static void dv__kernel_decl(dv_kscan *sc, int line) {
  const char *s = sc->s;
  size_t open = sc->i;
  int depth = 1;
  bool uncertain = false, line_start = false;
  /* The list, with comments blanked and literals kept (grown as it goes). */
  size_t tcap = 256, tl = 0;
  char *text = dv__malloc(tcap);
  if (!text) {
    sc->oom = true;
    return;
  }
  int depth0 = sc->depth; /* conditions opened inside the list count for it */
  sc->i = open + 1;
  while (sc->i < sc->n && depth > 0 && !sc->oom) {
    char c = s[sc->i];
    /* Room for what this step may add: a literal up to the end of its line. */
    size_t need = tl + 2;
    if (c == '"' || c == '\'') {
      const char *nl = memchr(s + sc->i, '\n', sc->n - sc->i);
      need += nl ? (size_t)(nl - (s + sc->i)) + 1 : sc->n - sc->i;
    }
    if (need > tcap) {
      size_t ncap = tcap;
      while (ncap < need) ncap *= 2;
      char *t2 = dv__kpp_grow(text, tl, ncap);
      if (!t2) {
        sc->oom = true;
        break;
      }
      text = t2, tcap = ncap;
    }
    if (c == '#' && line_start && !sc->expanding) {
      dv__kpp_directive(sc);
      continue;
    }
    size_t before = sc->i, k = dv__kpp_continuation(s, sc->i, sc->n);
    if (k) {
      sc->i += k, sc->line++;
      continue;
    }
    int act = dv__kpp_active(sc);
    if (dv__kpp_skip_noncode(sc)) {
      bool lit = s[before] == '"' || s[before] == '\'';
      if (act != 0) {
        if (lit) memcpy(text + tl, s + before, sc->i - before), tl += sc->i - before;
        else text[tl++] = ' ';
      }
      continue;
    }
    sc->i++;
    if (c == '\n') {
      sc->line++, line_start = true;
    } else if (!isspace((unsigned char)c)) {
      line_start = false;
    }
    if (act == 0) continue;
    if (dv__kpp_active_from(sc, depth0) < 0 && !isspace((unsigned char)c)) uncertain = true;
    if (c == '(') depth++;
    if (c == ')' && --depth == 0) break;
    text[tl++] = c;
  }
  text[tl] = 0;
  int active = dv__kpp_active(sc);
  if (depth != 0 || active == 0 || sc->oom) {
    dv__free(text);
    return;
  }
  const char *te = text + tl, *ne = dv__kitem_end(text, te), *na = text, *nb = ne;
  dv__ktrim(&na, &nb);
  bool ident = na < nb && dv__ident_start(*na);
  for (const char *c = na; ident && c < nb; c++) ident = dv__ident_char(*c);
  if (!ident) {
    dv__free(text);
    return;
  }
  dv_ksig sig = {0};
  sig.kernel = dv__kpp_strndup(na, (size_t)(nb - na));
  sig.line = line;
  sig.ambiguous = uncertain;
  if (!sig.kernel || dv__ksig_parse_params(&sc->aliases, ne < te ? ne + 1 : te, te, &sig)) {
    dv__ksig_clear(&sig);
    dv__free(text);
    sc->oom = true;
    return;
  }
  dv__free(text);
  long prev = dv__kfind(sc, sig.kernel);
  if (prev >= 0) {
    /* A prototype and its definition agree in kinds and types (names may
     * differ); two that do not can only be under conditions not both compiled. */
    dv_ksig *first = &sc->out.v[prev];
    if (!dv__ksig_params_equal(first, &sig) || sig.ambiguous) first->ambiguous = true;
    for (int i = 0; !first->ambiguous && i < sig.nparams; i++)
      if (strcmp(first->params[i].name, sig.params[i].name) != 0) first->names_differ = true;
    dv__ksig_clear(&sig);
    return;
  }
  if (!dv__kadd(sc, &sig)) {
    dv__ksig_clear(&sig);
    sc->oom = true;
  }
}

/* typedef ... NAME; at sc->i (just after the word). */
static void dv__typedef(dv_kscan *sc) {
  size_t start = sc->i;
  int depth = 0;
  while (sc->i < sc->n) {
    if (dv__kpp_skip_noncode(sc)) continue;
    char c = sc->s[sc->i];
    if (c == '\n') sc->line++;
    if (c == '{' || c == '(' || c == '[') depth++;
    if ((c == '}' || c == ')' || c == ']') && depth > 0) depth--;
    if (c == ';' && depth == 0) break;
    sc->i++;
  }
  const char *a = sc->s + start, *b = sc->s + sc->i;
  dv__ktrim(&a, &b);
  const char *ns = b;
  while (ns > a && dv__ident_char(ns[-1])) ns--;
  if (ns == b || dv__kpp_active(sc) == 0) return;
  bool simple = true;
  for (const char *c = a; c < ns; c++)
    if (*c == '{' || *c == '(' || *c == '[') simple = false;
  /* A struct or function type: defined, but not a dtype. */
  dv__kpp_alias_set(sc, ns, (size_t)(b - ns), a, (size_t)(ns - a), simple);
}

static void dv__scan_code(dv_kscan *sc);

/* The invocation NAME(args) of kernel macro m, whose '(' is at sc->i:
 * substitute the arguments into the body (## joins), and scan that. */
static void dv__kmacro_expand(dv_kscan *sc, const dv_kmacro *m, int line) {
  const char *s = sc->s;
  size_t i = sc->i + 1, argstart[DV__KMACRO_PARAMS + 1], argend[DV__KMACRO_PARAMS + 1];
  int depth = 1, nargs = 0;
  argstart[0] = i;
  while (i < sc->n && depth > 0) {
    char c = s[i];
    if (c == '"' || c == '\'' || (c == '/' && i + 1 < sc->n && (s[i + 1] == '/' || s[i + 1] == '*'))) {
      size_t save = sc->i;
      sc->i = i;
      dv__kpp_skip_noncode(sc);
      i = sc->i;
      sc->i = save;
      continue;
    }
    if (c == '\n') sc->line++;
    if (c == '(') depth++;
    if ((c == ')' && --depth == 0) || (c == ',' && depth == 1)) {
      if (nargs <= DV__KMACRO_PARAMS) argend[nargs] = i;
      nargs++;
      if (nargs <= DV__KMACRO_PARAMS) argstart[nargs] = i + 1;
    }
    i++;
  }
  sc->i = i;
  if (depth != 0 || nargs != (m->nparams ? m->nparams : 1)) return; /* not an invocation it reads */
  size_t cap = strlen(m->body) + 1;
  for (int a = 0; a < m->nparams; a++) cap += 8 * (argend[a] - argstart[a] + 1);
  char *x = dv__malloc(cap), *o = x;
  if (!x) {
    sc->oom = true;
    return;
  }
  for (const char *b = m->body; *b;) {
    if (dv__ident_start(*b)) {
      const char *ws = b;
      while (dv__ident_char(*b)) b++;
      int k = -1;
      for (int a = 0; a < m->nparams; a++)
        if (strlen(m->params[a]) == (size_t)(b - ws) && memcmp(m->params[a], ws, (size_t)(b - ws)) == 0) k = a;
      const char *from = k >= 0 ? s + argstart[k] : ws, *to = k >= 0 ? s + argend[k] : b;
      if (k >= 0) dv__ktrim(&from, &to);
      if ((size_t)(o - x) + (size_t)(to - from) + 1 >= cap) break;
      memcpy(o, from, (size_t)(to - from));
      o += to - from;
    } else if (b[0] == '#' && b[1] == '#') {
      while (o > x && isspace((unsigned char)o[-1])) o--;
      b += 2;
      while (isspace((unsigned char)*b)) b++;
    } else {
      if ((size_t)(o - x) + 2 >= cap) break;
      *o++ = *b++;
    }
  }
  *o = 0;
  const char *ss = sc->s;
  size_t sn = sc->n, si = sc->i;
  int sline = sc->line, sfixed = sc->fixed_line;
  sc->s = x, sc->n = (size_t)(o - x), sc->i = 0;
  sc->fixed_line = sfixed ? sfixed : line;
  sc->expanding++;
  dv__scan_code(sc);
  sc->expanding--;
  sc->s = ss, sc->n = sn, sc->i = si, sc->line = sline, sc->fixed_line = sfixed;
  dv__free(x);
}

static const dv_kmacro *dv__kmacro_find(const dv_kscan *sc, const char *name, size_t len) {
  for (size_t i = 0; i < sc->nkm; i++)
    if (sc->km[i].name && strlen(sc->km[i].name) == len && memcmp(sc->km[i].name, name, len) == 0)
      return &sc->km[i];
  return NULL;
}

/* Scan sc->s from sc->i: directives, DV_KERNEL declarations, typedefs and
 * invocations of kernel macros. */
static void dv__scan_code(dv_kscan *sc) {
  bool line_start = true;
  int braces = 0; /* kernels and typedefs are read at file scope only */
  while (sc->i < sc->n && !sc->oom) {
    char c = sc->s[sc->i];
    size_t k = dv__kpp_continuation(sc->s, sc->i, sc->n);
    if (k) {
      sc->i += k, sc->line++;
      continue;
    }
    if (c == '\n') {
      sc->line++, sc->i++, line_start = true;
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v') {
      sc->i++;
      continue;
    }
    if (c == '#' && line_start && !sc->expanding) {
      dv__kpp_directive(sc);
      continue;
    }
    bool lit = c == '"' || c == '\'';
    if (dv__kpp_skip_noncode(sc)) { /* a comment leaves `#` the first token of its line */
      if (lit) line_start = false;
      continue;
    }
    line_start = false;
    if (dv__kpp_active(sc) == 0) { /* not compiled: only directives matter */
      sc->i++;
      continue;
    }
    if (c == '{' || c == '}') {
      braces += c == '{' ? 1 : braces > 0 ? -1 : 0;
      sc->i++;
      continue;
    }
    if (dv__ident_start(c)) {
      size_t ws = sc->i;
      while (sc->i < sc->n && dv__ident_char(sc->s[sc->i])) sc->i++;
      size_t wl = sc->i - ws;
      if (braces) continue;
      bool kernel = dv__is_word(sc->s + ws, wl, "DV_KERNEL");
      const dv_kmacro *m = !kernel && sc->expanding < 4 ? dv__kmacro_find(sc, sc->s + ws, wl) : NULL;
      if (kernel || m || dv__is_word(sc->s + ws, wl, "typedef")) {
        int line = sc->fixed_line ? sc->fixed_line : sc->line;
        size_t j = sc->i;
        while (j < sc->n && isspace((unsigned char)sc->s[j])) {
          if (sc->s[j] == '\n') sc->line++;
          j++;
        }
        sc->i = j;
        bool call = j < sc->n && sc->s[j] == '(';
        if (kernel && call) dv__kernel_decl(sc, line);
        else if (m && call) dv__kmacro_expand(sc, m, line);
        else if (!kernel && !m) dv__typedef(sc);
      }
      continue;
    }
    sc->i++;
  }
}

dv_status dv__ksig_scan(const char *source, char *const *defines, size_t ndefines,
                        const char *options, const char *backend, const char *predefined,
                        dv_ksigs *out) {
  memset(out, 0, sizeof *out);
  dv_kscan sc;
  memset(&sc, 0, sizeof sc);
  sc.s = source;
  sc.n = strlen(source);
  sc.line = 1;
  sc.backend = backend ? backend : "";
  sc.predefined = predefined;
  sc.aliases = (dv_kaliases){dv__kpp_alias_text, &sc};
  for (size_t d = 0; d < ndefines; d++) {
    const char *v = defines[2 * d + 1];
    dv__kpp_alias_set(&sc, defines[2 * d], strlen(defines[2 * d]), v, strlen(v), true);
  }
  /* -DNAME[=VALUE], -D NAME[=VALUE], --define-macro[=]NAME[=VALUE], -UNAME, -U NAME. */
  for (const char *o = options; o && *o;) {
    while (isspace((unsigned char)*o)) o++;
    const char *w = o;
    while (*o && !isspace((unsigned char)*o)) o++;
    size_t wl = (size_t)(o - w);
    int what = 0; /* 1 define, 2 undefine */
    const char *arg = NULL;
    if (wl >= 2 && w[0] == '-' && (w[1] == 'D' || w[1] == 'U')) {
      what = w[1] == 'D' ? 1 : 2;
      arg = w + 2;
    } else if (wl >= 15 && memcmp(w, "--define-macro", 14) == 0 && (wl == 14 || w[14] == '=')) {
      what = 1;
      arg = wl == 14 ? w + 14 : w + 15;
    } else if (wl == 14 && memcmp(w, "--define-macro", 14) == 0) {
      what = 1;
      arg = w + 14;
    }
    if (!what) continue;
    if (arg == o) { /* the name is the next word */
      while (isspace((unsigned char)*o)) o++;
      arg = o;
      while (*o && !isspace((unsigned char)*o)) o++;
    }
    const char *eq = arg;
    while (eq < o && *eq != '=') eq++;
    if (eq == arg) continue;
    if (what == 2) {
      dv__kpp_alias_set(&sc, arg, (size_t)(eq - arg), NULL, 0, false);
      dv_kalias *a = dv__kpp_alias_find(&sc, arg, (size_t)(eq - arg));
      if (a) a->gone = true;
    } else {
      bool val = eq < o;
      dv__kpp_alias_set(&sc, arg, (size_t)(eq - arg), val ? eq + 1 : "1", val ? (size_t)(o - eq - 1) : 1, true);
    }
  }
  dv__scan_code(&sc);
  for (size_t a = 0; a < sc.nal; a++) dv__free(sc.al[a].name), dv__free(sc.al[a].text);
  dv__free(sc.al);
  dv__free(sc.tab);
  dv__free(sc.ktab);
  for (size_t m = 0; m < sc.nkm; m++) dv__kpp_macro_free(&sc.km[m]);
  dv__free(sc.km);
  if (sc.oom) {
    dv__ksigs_free(&sc.out);
    return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot read the kernels' signatures");
  }
  *out = sc.out;
  return DV_OK;
}

void dv__ksigs_free(dv_ksigs *s) {
  if (!s) return;
  for (size_t i = 0; i < s->n; i++) dv__ksig_clear(&s->v[i]);
  dv__free(s->v);
  s->v = NULL;
  s->n = 0;
}

const dv_ksig *dv__ksig_find(const dv_ksigs *s, const char *kernel) {
  for (size_t i = 0; s && i < s->n; i++)
    if (strcmp(s->v[i].kernel, kernel) == 0) return &s->v[i];
  return NULL;
}

