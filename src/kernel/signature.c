/*
 * Kernel signatures read from a program's source: the scan (signature.h says
 * what the reader does and does not understand) -- lexing, directives and
 * their conditions, aliases, kernel macros, DV_KERNEL declarations.  What a
 * parameter list means (types, kinds) is sigtypes.c's.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "signature.h"
#include "sigtypes.h"

/* ---- aliases: object-like #defines, typedefs, the program's defines --------------- */

typedef struct dv_kalias {
  char *name;
  char *text; /* NULL: defined, with no usable text (function-like, or #undef'd: see gone) */
  bool gone;  /* #undef */
  bool uncertain; /* set (or undefined) under a condition the reader cannot evaluate */
} dv_kalias;

/* A function-like macro whose body declares kernels:
 * `#define SHUFFLES(T, CT) DV_KERNEL(shuffles_##T, DV_ARRAY(CT, out), ...)`. */
#define DV__KMACRO_PARAMS 16
typedef struct dv_kmacro {
  char *name;
  int nparams;
  char *params[DV__KMACRO_PARAMS];
  char *body;
} dv_kmacro;

typedef struct dv_kscan {
  const char *s;
  size_t n, i;
  int line;
  /* #if nesting: per level the current branch (1 taken, 0 not, -1 unknown)
   * and whether an earlier branch was taken (same values). */
  signed char cur[64], seen[64];
  int depth, overflow;
  dv_kalias *al;
  size_t nal, capal;
  uint32_t *tab; /* open addressing over al: index + 1, 0 empty; tabcap a power of two */
  size_t tabcap;
  const char *backend;
  const char *predefined; /* names the backend's compiler defines here (space-separated) */
  dv_ksigs out;
  size_t capout;
  bool oom;
  uint32_t *ktab; /* open addressing over out.v: index + 1 */
  size_t ktabcap;
  dv_kmacro *km;
  size_t nkm, capkm;
  int expanding;  /* depth of macro expansion being scanned (at most 4) */
  int fixed_line; /* within an expansion: the invocation's line */
  dv_kaliases aliases; /* how the parameter reader (sigtypes.c) looks names up */
} dv_kscan;

static uint32_t dv__khash(const char *s, size_t n) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 16777619u;
  return h;
}

static dv_kalias *dv__alias_find(dv_kscan *sc, const char *name, size_t len) {
  if (!sc->tabcap) return NULL;
  for (size_t h = dv__khash(name, len) & (sc->tabcap - 1);; h = (h + 1) & (sc->tabcap - 1)) {
    uint32_t k = sc->tab[h];
    if (!k) return NULL;
    dv_kalias *a = &sc->al[k - 1];
    if (strncmp(a->name, name, len) == 0 && a->name[len] == 0) return a;
  }
}

/* Put al[idx] in the table (which has room). */
static void dv__tab_put(dv_kscan *sc, size_t idx) {
  const char *nm = sc->al[idx].name;
  size_t h = dv__khash(nm, strlen(nm)) & (sc->tabcap - 1);
  while (sc->tab[h]) h = (h + 1) & (sc->tabcap - 1);
  sc->tab[h] = (uint32_t)(idx + 1);
}

/* A bigger copy of p (old bytes kept); p is freed only on success. */
static void *dv__kgrow(void *p, size_t old_bytes, size_t new_bytes) {
  void *q = dv__malloc(new_bytes);
  if (!q) return NULL;
  if (p) memcpy(q, p, old_bytes);
  dv__free(p);
  return q;
}

static char *dv__strndup(const char *s, size_t n) {
  char *d = dv__malloc(n + 1);
  if (d) memcpy(d, s, n), d[n] = 0;
  return d;
}

static int dv__active(const dv_kscan *sc);

/* The alias lookup the parameter reader calls: NAME's text (NULL: none a
 * type can come from), *uncertain when defined under an unknown condition. */
static const char *dv__alias_text(void *ctx, const char *name, size_t len, bool *uncertain) {
  dv_kalias *a = dv__alias_find(ctx, name, len);
  *uncertain = a && a->uncertain;
  return a && !a->gone ? a->text : NULL;
}

/* NAME means `text` from here on (has_text false: defined, with no text a
 * type can come from).  Set where the reader cannot tell whether this line
 * is compiled, the alias is uncertain: what resolves through it is unknown. */
static void dv__alias_set(dv_kscan *sc, const char *name, size_t len, const char *text, size_t tlen,
                          bool has_text) {
  bool uncertain = dv__active(sc) < 0;
  dv_kalias *a = dv__alias_find(sc, name, len);
  char *t = NULL;
  if (has_text) {
    while (tlen && isspace((unsigned char)text[tlen - 1])) tlen--;
    while (tlen && isspace((unsigned char)*text)) text++, tlen--;
    if (!(t = dv__strndup(text, tlen))) {
      sc->oom = true;
      return;
    }
  }
  if (a) {
    dv__free(a->text);
    a->text = t;
    a->gone = false;
    a->uncertain = uncertain;
    return;
  }
  if (sc->nal == sc->capal) {
    size_t cap = sc->capal ? 2 * sc->capal : 16;
    dv_kalias *na = dv__kgrow(sc->al, sc->nal * sizeof *na, cap * sizeof *na);
    uint32_t *nt = na ? dv__calloc(2 * cap, sizeof *nt) : NULL;
    if (!nt) {
      if (na) sc->al = na, sc->capal = cap; /* kept: al grew, the old table still fits */
      dv__free(t);
      sc->oom = true;
      return;
    }
    sc->al = na, sc->capal = cap;
    dv__free(sc->tab);
    sc->tab = nt, sc->tabcap = 2 * cap;
    for (size_t i = 0; i < sc->nal; i++) dv__tab_put(sc, i);
  }
  char *nm = dv__strndup(name, len);
  if (!nm) {
    dv__free(t);
    sc->oom = true;
    return;
  }
  sc->al[sc->nal] = (dv_kalias){nm, t, false, uncertain};
  dv__tab_put(sc, sc->nal++);
}

/* ---- three-valued conditions ------------------------------------------------------- */

static int dv__and3(int a, int b) { return a == 0 || b == 0 ? 0 : a == 1 && b == 1 ? 1 : -1; }
static int dv__or3(int a, int b) { return a == 1 || b == 1 ? 1 : a == 0 && b == 0 ? 0 : -1; }
static int dv__not3(int a) { return a < 0 ? -1 : !a; }

/* Whether `name` is one of the space-separated words of `list`. */
static bool dv__in_list(const char *list, const char *name, size_t len) {
  for (const char *p = list; p && *p;) {
    while (*p == ' ') p++;
    const char *w = p;
    while (*p && *p != ' ') p++;
    if ((size_t)(p - w) == len && memcmp(w, name, len) == 0) return true;
  }
  return false;
}

/* defined(name): 1, 0, or -1 where the compiler or the dialect may define
 * it and the reader cannot know.  The backend says what its compiler
 * predefines for this device (OpenCL: the device's extensions); the names
 * that tell the backends apart are known on each. */
static int dv__defined(dv_kscan *sc, const char *name, size_t len) {
  dv_kalias *a = dv__alias_find(sc, name, len);
  if (a) return a->uncertain ? -1 : a->gone ? 0 : 1;
  if (dv__in_list(sc->predefined, name, len)) return 1;
  bool cl = strcmp(sc->backend, "opencl") == 0, cuda = strcmp(sc->backend, "cuda") == 0,
       hip = strcmp(sc->backend, "hip") == 0;
  if (len > 11 && memcmp(name, "DV_BACKEND_", 11) == 0) {
    char up[16] = "";
    size_t bl = strlen(sc->backend);
    for (size_t i = 0; i < bl && i < sizeof up - 1; i++) up[i] = (char)toupper((unsigned char)sc->backend[i]);
    return len - 11 == bl && memcmp(name + 11, up, bl) == 0;
  }
  static const char *const cl_names[] = {"__OPENCL_VERSION__", "__OPENCL_C_VERSION__", "CL_VERSION_1_2"};
  static const char *const cuda_names[] = {"__CUDACC__", "__CUDACC_RTC__", "__CUDA_ARCH__"};
  /* hipRTC's (ROCm 5.2, measured): __HIP__, __HIPCC__, __HIPCC_RTC__ and
   * __HIP_DEVICE_COMPILE__, none of CUDA's. */
  static const char *const hip_names[] = {"__HIP__", "__HIPCC__", "__HIPCC_RTC__",
                                          "__HIP_DEVICE_COMPILE__"};
  for (size_t i = 0; i < 3; i++) {
    if (dv__is_word(name, len, cl_names[i])) return cl ? 1 : 0;
    if (dv__is_word(name, len, cuda_names[i])) return cuda ? 1 : 0;
  }
  for (size_t i = 0; i < 4; i++)
    if (dv__is_word(name, len, hip_names[i])) return hip ? 1 : 0;
  /* Extension macros: on OpenCL the device's list (predefined) is complete. */
  if (len > 3 && memcmp(name, "cl_", 3) == 0) return cl && !sc->predefined ? -1 : 0;
  if ((len >= 2 && name[0] == '_' && (name[1] == '_' || isupper((unsigned char)name[1]))) ||
      (len > 3 && (memcmp(name, "CL_", 3) == 0 || memcmp(name, "DV_", 3) == 0)))
    return -1;
  return 0;
}

/* #if / #elif expressions: literals and (!)defined(X); anything else is unknown. */
static int dv__eval(dv_kscan *sc, const char *e, size_t len);

/* One term: [!]* (number | NAME | defined NAME | defined(NAME) | (expression)). */
static int dv__eval_term(dv_kscan *sc, const char *e, size_t len) {
  size_t i = 0;
  while (i < len && isspace((unsigned char)e[i])) i++;
  while (len > i && isspace((unsigned char)e[len - 1])) len--;
  int neg = 0;
  while (i < len && e[i] == '!') {
    neg ^= 1, i++;
    while (i < len && isspace((unsigned char)e[i])) i++;
  }
  int v = -1;
  if (i < len && e[i] == '(' && e[len - 1] == ')') {
    int d = 0;
    size_t j = i;
    for (; j < len; j++) {
      if (e[j] == '(') d++;
      if (e[j] == ')' && --d == 0) break;
    }
    if (j == len - 1) v = dv__eval(sc, e + i + 1, len - i - 2);
  } else if (i < len && isdigit((unsigned char)e[i])) {
    size_t j = i;
    while (j < len && isdigit((unsigned char)e[j])) j++;
    if (j == len) v = strtol(e + i, NULL, 10) != 0;
  } else if (i < len && dv__ident_start(e[i]) &&
             !(len - i > 7 && memcmp(e + i, "defined", 7) == 0 && !dv__ident_char(e[i + 7]))) {
    /* `#if NAME`: a define's integer value; an undefined name is 0, as in C. */
    size_t ns = i;
    while (i < len && dv__ident_char(e[i])) i++;
    if (i == len) {
      dv_kalias *a = dv__alias_find(sc, e + ns, i - ns);
      if (a && !a->uncertain && !a->gone && a->text) {
        char *end = NULL;
        long long x = strtoll(a->text, &end, 0);
        v = end && end != a->text && *end == 0 ? x != 0 : -1;
      } else {
        v = a && !a->uncertain && a->gone ? 0 : dv__defined(sc, e + ns, i - ns) == 0 ? 0 : -1;
      }
    }
  } else if (len - i > 7 && memcmp(e + i, "defined", 7) == 0 && !dv__ident_char(e[i + 7])) {
    i += 7;
    while (i < len && isspace((unsigned char)e[i])) i++;
    bool paren = i < len && e[i] == '(';
    if (paren) i++;
    while (i < len && isspace((unsigned char)e[i])) i++;
    size_t ns = i;
    while (i < len && dv__ident_char(e[i])) i++;
    size_t nl = i - ns;
    while (i < len && isspace((unsigned char)e[i])) i++;
    if (paren && i < len && e[i] == ')') i++, paren = false;
    while (i < len && isspace((unsigned char)e[i])) i++;
    if (nl && !paren && i == len) v = dv__defined(sc, e + ns, nl);
  }
  return neg ? dv__not3(v) : v;
}

/* The top-level `op` ("||" or "&&") in e, or len. */
static size_t dv__find_op(const char *e, size_t len, const char *op) {
  int d = 0;
  for (size_t i = 0; i + 1 < len; i++) {
    if (e[i] == '(') d++;
    if (e[i] == ')') d--;
    if (d == 0 && e[i] == op[0] && e[i + 1] == op[1]) return i;
  }
  return len;
}

/* #if and #elif expressions: terms joined by || and && (three-valued: a
 * known 0 or 1 wins over an unknown where C's logic allows); anything else
 * is unknown. */
static int dv__eval(dv_kscan *sc, const char *e, size_t len) {
  size_t o = dv__find_op(e, len, "||");
  if (o < len) return dv__or3(dv__eval(sc, e, o), dv__eval(sc, e + o + 2, len - o - 2));
  size_t a = dv__find_op(e, len, "&&");
  if (a < len) return dv__and3(dv__eval(sc, e, a), dv__eval(sc, e + a + 2, len - a - 2));
  return dv__eval_term(sc, e, len);
}

/* Whether the text here is compiled, as far as the levels from `from` on say. */
static int dv__active_from(const dv_kscan *sc, int from) {
  int a = 1;
  for (int d = from; d < sc->depth && d < 64; d++) a = dv__and3(a, sc->cur[d]);
  return sc->overflow ? dv__and3(a, -1) : a;
}

static int dv__active(const dv_kscan *sc) { return dv__active_from(sc, 0); }

/* ---- lexing ---------------------------------------------------------------------- */

/* Skip a comment or a literal at sc->i; returns whether it did. */
/* The length of a backslash-newline at s[i] (LF or CRLF), 0 if none. */
static size_t dv__continuation(const char *s, size_t i, size_t n) {
  if (s[i] != '\\') return 0;
  if (i + 1 < n && s[i + 1] == '\n') return 2;
  if (i + 2 < n && s[i + 1] == '\r' && s[i + 2] == '\n') return 3;
  return 0;
}

/* Skip a comment or a literal at sc->i; returns whether it did. */
static bool dv__skip_noncode(dv_kscan *sc) {
  const char *s = sc->s;
  size_t i = sc->i;
  if (s[i] == '/' && i + 1 < sc->n && s[i + 1] == '/') {
    while (i < sc->n && s[i] != '\n') {
      size_t k = dv__continuation(s, i, sc->n);
      if (k) sc->line++;
      i += k ? k : 1;
    }
  } else if (s[i] == '/' && i + 1 < sc->n && s[i + 1] == '*') {
    i += 2;
    while (i < sc->n && !(s[i] == '*' && i + 1 < sc->n && s[i + 1] == '/')) {
      if (s[i] == '\n') sc->line++;
      i++;
    }
    i = i < sc->n ? i + 2 : i;
  } else if (s[i] == '"' || s[i] == '\'') {
    char q = s[i++];
    while (i < sc->n && s[i] != q && s[i] != '\n') i += s[i] == '\\' && i + 1 < sc->n ? 2 : 1;
    if (i < sc->n && s[i] == q) i++;
  } else {
    return false;
  }
  sc->i = i;
  return true;
}

/* The text from sc->i to the end of the logical line (backslash-newlines
 * joined, CRLF too), comments replaced by a blank, literals kept as they
 * are; dv__malloc'd. */
static char *dv__directive_text(dv_kscan *sc) {
  size_t cap = 64, len = 0;
  char *t = dv__malloc(cap);
  if (!t) return sc->oom = true, NULL;
  while (sc->i < sc->n && sc->s[sc->i] != '\n') {
    size_t from = sc->i, k = dv__continuation(sc->s, sc->i, sc->n);
    const char *piece = " ";
    size_t plen = 1;
    char c = sc->s[sc->i];
    if (k) {
      sc->i += k, sc->line++;
    } else if (c == '/' && sc->i + 1 < sc->n && (sc->s[sc->i + 1] == '*' || sc->s[sc->i + 1] == '/')) {
      dv__skip_noncode(sc);
    } else if (c == '"' || c == '\'') {
      dv__skip_noncode(sc);
      piece = sc->s + from, plen = sc->i - from;
    } else {
      sc->i++;
      piece = sc->s + from;
      if (c == '\r') piece = " ";
    }
    while (len + plen + 1 > cap) {
      char *t2 = dv__kgrow(t, len, 2 * cap);
      if (!t2) return dv__free(t), sc->oom = true, NULL;
      t = t2, cap *= 2;
    }
    memcpy(t + len, piece, plen);
    len += plen;
  }
  t[len] = 0;
  return t;
}

static void dv__kmacro_free(dv_kmacro *m) {
  dv__free(m->name);
  for (int i = 0; i < m->nparams; i++) dv__free(m->params[i]);
  dv__free(m->body);
  memset(m, 0, sizeof *m);
}

static void dv__kmacro_undef(dv_kscan *sc, const char *name, size_t len) {
  for (size_t i = 0; i < sc->nkm; i++)
    if (sc->km[i].name && strlen(sc->km[i].name) == len && memcmp(sc->km[i].name, name, len) == 0)
      dv__kmacro_free(&sc->km[i]);
}

/* `#define NAME(a, b) body` (p at the '('): kept when the body declares a
 * kernel, so that NAME(x, y) at file scope is read as its expansion.
 * Variadic macros and bodies without DV_KERNEL are not kept. */
static void dv__kmacro_define(dv_kscan *sc, const char *name, size_t len, const char *p) {
  dv__kmacro_undef(sc, name, len);
  const char *close = strchr(p, ')');
  if (!close || !strstr(close, "DV_KERNEL")) return;
  dv_kmacro m;
  memset(&m, 0, sizeof m);
  for (const char *q = p + 1; q < close;) {
    while (q < close && (isspace((unsigned char)*q) || *q == ',')) q++;
    const char *ps = q;
    while (q < close && dv__ident_char(*q)) q++;
    if (q == ps) {
      if (q < close) { /* "..." or anything else: not a macro this reader expands */
        dv__kmacro_free(&m);
        return;
      }
      break;
    }
    if (m.nparams == DV__KMACRO_PARAMS || !(m.params[m.nparams] = dv__strndup(ps, (size_t)(q - ps)))) {
      if (m.nparams < DV__KMACRO_PARAMS) sc->oom = true;
      dv__kmacro_free(&m);
      return;
    }
    m.nparams++;
  }
  m.name = dv__strndup(name, len);
  m.body = dv__strdup(close + 1);
  if (!m.name || !m.body) {
    sc->oom = true;
    dv__kmacro_free(&m);
    return;
  }
  if (sc->nkm == sc->capkm) {
    size_t cap = sc->capkm ? 2 * sc->capkm : 4;
    dv_kmacro *nk = dv__kgrow(sc->km, sc->nkm * sizeof *nk, cap * sizeof *nk);
    if (!nk) {
      sc->oom = true;
      dv__kmacro_free(&m);
      return;
    }
    sc->km = nk, sc->capkm = cap;
  }
  sc->km[sc->nkm++] = m;
}

static void dv__directive(dv_kscan *sc) {
  sc->i++; /* '#' */
  char *t = dv__directive_text(sc);
  if (!t) return;
  const char *p = t;
  while (isspace((unsigned char)*p)) p++;
  const char *w = p;
  while (dv__ident_char(*p)) p++;
  size_t wl = (size_t)(p - w);
  while (isspace((unsigned char)*p)) p++;
#define DV__IS(word) (wl == strlen(word) && memcmp(w, word, wl) == 0)
  if (DV__IS("if") || DV__IS("ifdef") || DV__IS("ifndef")) {
    int v;
    if (DV__IS("if")) {
      v = dv__eval(sc, p, strlen(p));
    } else {
      const char *ne = p;
      while (dv__ident_char(*ne)) ne++;
      v = dv__defined(sc, p, (size_t)(ne - p));
      if (DV__IS("ifndef")) v = dv__not3(v);
    }
    if (sc->depth < 64) sc->cur[sc->depth] = (signed char)v, sc->seen[sc->depth] = (signed char)v;
    else sc->overflow++;
    sc->depth++;
  } else if ((DV__IS("elif") || DV__IS("else")) && sc->depth > 0) {
    int d = sc->depth - 1;
    if (d < 64) {
      int v = DV__IS("else") ? 1 : dv__eval(sc, p, strlen(p));
      int seen = sc->seen[d];
      sc->cur[d] = (signed char)dv__and3(dv__not3(seen), v);
      sc->seen[d] = (signed char)dv__or3(seen, v);
    }
  } else if (DV__IS("endif") && sc->depth > 0) {
    sc->depth--;
    if (sc->depth >= 64) sc->overflow--;
  } else if ((DV__IS("define") || DV__IS("undef")) && dv__active(sc) != 0) {
    const char *ns = p;
    while (dv__ident_char(*p)) p++;
    size_t nl = (size_t)(p - ns);
    if (nl && DV__IS("undef")) {
      dv__kmacro_undef(sc, ns, nl);
      dv__alias_set(sc, ns, nl, NULL, 0, false);
      dv_kalias *a = dv__alias_find(sc, ns, nl);
      if (a) a->gone = true;
    } else if (nl) {
      bool function_like = *p == '(';
      dv__alias_set(sc, ns, nl, p, strlen(p), !function_like);
      if (function_like) dv__kmacro_define(sc, ns, nl, p);
    }
  }
#undef DV__IS
  dv__free(t);
}

/* ---- the scan ------------------------------------------------------------------------ */


/* Record DV_KERNEL( ... ) whose '(' is at sc->i. */
/* The signature of `kernel`, or -1. */
static long dv__kfind(const dv_kscan *sc, const char *kernel) {
  if (!sc->ktabcap) return -1;
  for (size_t h = dv__khash(kernel, strlen(kernel)) & (sc->ktabcap - 1);; h = (h + 1) & (sc->ktabcap - 1)) {
    uint32_t k = sc->ktab[h];
    if (!k) return -1;
    if (strcmp(sc->out.v[k - 1].kernel, kernel) == 0) return (long)k - 1;
  }
}

/* Append sig to the output (and its name to the table); false when out of memory. */
static bool dv__kadd(dv_kscan *sc, dv_ksig *sig) {
  if (sc->out.n == sc->capout) {
    size_t cap = sc->capout ? 2 * sc->capout : 8;
    dv_ksig *nv = dv__kgrow(sc->out.v, sc->out.n * sizeof *nv, cap * sizeof *nv);
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
      size_t h = dv__khash(kn, strlen(kn)) & (sc->ktabcap - 1);
      while (sc->ktab[h]) h = (h + 1) & (sc->ktabcap - 1);
      sc->ktab[h] = (uint32_t)(i + 1);
    }
  }
  size_t h = dv__khash(sig->kernel, strlen(sig->kernel)) & (sc->ktabcap - 1);
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
      char *t2 = dv__kgrow(text, tl, ncap);
      if (!t2) {
        sc->oom = true;
        break;
      }
      text = t2, tcap = ncap;
    }
    if (c == '#' && line_start && !sc->expanding) {
      dv__directive(sc);
      continue;
    }
    size_t before = sc->i, k = dv__continuation(s, sc->i, sc->n);
    if (k) {
      sc->i += k, sc->line++;
      continue;
    }
    int act = dv__active(sc);
    if (dv__skip_noncode(sc)) {
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
    if (dv__active_from(sc, depth0) < 0 && !isspace((unsigned char)c)) uncertain = true;
    if (c == '(') depth++;
    if (c == ')' && --depth == 0) break;
    text[tl++] = c;
  }
  text[tl] = 0;
  int active = dv__active(sc);
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
  sig.kernel = dv__strndup(na, (size_t)(nb - na));
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
    if (dv__skip_noncode(sc)) continue;
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
  if (ns == b || dv__active(sc) == 0) return;
  bool simple = true;
  for (const char *c = a; c < ns; c++)
    if (*c == '{' || *c == '(' || *c == '[') simple = false;
  /* A struct or function type: defined, but not a dtype. */
  dv__alias_set(sc, ns, (size_t)(b - ns), a, (size_t)(ns - a), simple);
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
      dv__skip_noncode(sc);
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
    size_t k = dv__continuation(sc->s, sc->i, sc->n);
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
      dv__directive(sc);
      continue;
    }
    bool lit = c == '"' || c == '\'';
    if (dv__skip_noncode(sc)) { /* a comment leaves `#` the first token of its line */
      if (lit) line_start = false;
      continue;
    }
    line_start = false;
    if (dv__active(sc) == 0) { /* not compiled: only directives matter */
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
  sc.aliases = (dv_kaliases){dv__alias_text, &sc};
  for (size_t d = 0; d < ndefines; d++) {
    const char *v = defines[2 * d + 1];
    dv__alias_set(&sc, defines[2 * d], strlen(defines[2 * d]), v, strlen(v), true);
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
      dv__alias_set(&sc, arg, (size_t)(eq - arg), NULL, 0, false);
      dv_kalias *a = dv__alias_find(&sc, arg, (size_t)(eq - arg));
      if (a) a->gone = true;
    } else {
      bool val = eq < o;
      dv__alias_set(&sc, arg, (size_t)(eq - arg), val ? eq + 1 : "1", val ? (size_t)(o - eq - 1) : 1, true);
    }
  }
  dv__scan_code(&sc);
  for (size_t a = 0; a < sc.nal; a++) dv__free(sc.al[a].name), dv__free(sc.al[a].text);
  dv__free(sc.al);
  dv__free(sc.tab);
  dv__free(sc.ktab);
  for (size_t m = 0; m < sc.nkm; m++) dv__kmacro_free(&sc.km[m]);
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

