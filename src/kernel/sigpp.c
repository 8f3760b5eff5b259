/*
 * The preprocessor the kernel-signature scan follows (signature.h says what
 * it understands): aliases (object-like #defines, typedefs, the program's
 * defines), three-valued #if conditions, comments and literals, directives,
 * and the function-like macros whose bodies declare kernels.  The scan of
 * DV_KERNEL declarations is signature.c's.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sigscan.h"

uint32_t dv__kpp_hash(const char *s, size_t n) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 16777619u;
  return h;
}

dv_kalias *dv__kpp_alias_find(dv_kscan *sc, const char *name, size_t len) {
  if (!sc->tabcap) return NULL;
  for (size_t h = dv__kpp_hash(name, len) & (sc->tabcap - 1);; h = (h + 1) & (sc->tabcap - 1)) {
    uint32_t k = sc->tab[h];
    if (!k) return NULL;
    dv_kalias *a = &sc->al[k - 1];
    if (strncmp(a->name, name, len) == 0 && a->name[len] == 0) return a;
  }
}

/* Put al[idx] in the table (which has room). */
static void dv__tab_put(dv_kscan *sc, size_t idx) {
  const char *nm = sc->al[idx].name;
  size_t h = dv__kpp_hash(nm, strlen(nm)) & (sc->tabcap - 1);
  while (sc->tab[h]) h = (h + 1) & (sc->tabcap - 1);
  sc->tab[h] = (uint32_t)(idx + 1);
}

/* A bigger copy of p (old bytes kept); p is freed only on success. */
void *dv__kpp_grow(void *p, size_t old_bytes, size_t new_bytes) {
  void *q = dv__malloc(new_bytes);
  if (!q) return NULL;
  if (p) memcpy(q, p, old_bytes);
  dv__free(p);
  return q;
}

char *dv__kpp_strndup(const char *s, size_t n) {
  char *d = dv__malloc(n + 1);
  if (d) memcpy(d, s, n), d[n] = 0;
  return d;
}


/* The alias lookup the parameter reader calls: NAME's text (NULL: none a
 * type can come from), *uncertain when defined under an unknown condition. */
const char *dv__kpp_alias_text(void *ctx, const char *name, size_t len, bool *uncertain) {
  dv_kalias *a = dv__kpp_alias_find(ctx, name, len);
  *uncertain = a && a->uncertain;
  return a && !a->gone ? a->text : NULL;
}

/* NAME means `text` from here on (has_text false: defined, with no text a
 * type can come from).  Set where the reader cannot tell whether this line
 * is compiled, the alias is uncertain: what resolves through it is unknown. */
void dv__kpp_alias_set(dv_kscan *sc, const char *name, size_t len, const char *text, size_t tlen,
                          bool has_text) {
  bool uncertain = dv__kpp_active(sc) < 0;
  dv_kalias *a = dv__kpp_alias_find(sc, name, len);
  char *t = NULL;
  if (has_text) {
    while (tlen && isspace((unsigned char)text[tlen - 1])) tlen--;
    while (tlen && isspace((unsigned char)*text)) text++, tlen--;
    if (!(t = dv__kpp_strndup(text, tlen))) {
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
    dv_kalias *na = dv__kpp_grow(sc->al, sc->nal * sizeof *na, cap * sizeof *na);
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
  char *nm = dv__kpp_strndup(name, len);
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
  dv_kalias *a = dv__kpp_alias_find(sc, name, len);
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
      dv_kalias *a = dv__kpp_alias_find(sc, e + ns, i - ns);
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
int dv__kpp_active_from(const dv_kscan *sc, int from) {
  int a = 1;
  for (int d = from; d < sc->depth && d < 64; d++) a = dv__and3(a, sc->cur[d]);
  return sc->overflow ? dv__and3(a, -1) : a;
}

int dv__kpp_active(const dv_kscan *sc) { return dv__kpp_active_from(sc, 0); }

/* ---- lexing ---------------------------------------------------------------------- */

/* Skip a comment or a literal at sc->i; returns whether it did. */
/* The length of a backslash-newline at s[i] (LF or CRLF), 0 if none. */
size_t dv__kpp_continuation(const char *s, size_t i, size_t n) {
  if (s[i] != '\\') return 0;
  if (i + 1 < n && s[i + 1] == '\n') return 2;
  if (i + 2 < n && s[i + 1] == '\r' && s[i + 2] == '\n') return 3;
  return 0;
}

/* Skip a comment or a literal at sc->i; returns whether it did. */
bool dv__kpp_skip_noncode(dv_kscan *sc) {
  const char *s = sc->s;
  size_t i = sc->i;
  if (s[i] == '/' && i + 1 < sc->n && s[i + 1] == '/') {
    while (i < sc->n && s[i] != '\n') {
      size_t k = dv__kpp_continuation(s, i, sc->n);
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
    size_t from = sc->i, k = dv__kpp_continuation(sc->s, sc->i, sc->n);
    const char *piece = " ";
    size_t plen = 1;
    char c = sc->s[sc->i];
    if (k) {
      sc->i += k, sc->line++;
    } else if (c == '/' && sc->i + 1 < sc->n && (sc->s[sc->i + 1] == '*' || sc->s[sc->i + 1] == '/')) {
      dv__kpp_skip_noncode(sc);
    } else if (c == '"' || c == '\'') {
      dv__kpp_skip_noncode(sc);
      piece = sc->s + from, plen = sc->i - from;
    } else {
      sc->i++;
      piece = sc->s + from;
      if (c == '\r') piece = " ";
    }
    while (len + plen + 1 > cap) {
      char *t2 = dv__kpp_grow(t, len, 2 * cap);
      if (!t2) return dv__free(t), sc->oom = true, NULL;
      t = t2, cap *= 2;
    }
    memcpy(t + len, piece, plen);
    len += plen;
  }
  t[len] = 0;
  return t;
}

void dv__kpp_macro_free(dv_kmacro *m) {
  dv__free(m->name);
  for (int i = 0; i < m->nparams; i++) dv__free(m->params[i]);
  dv__free(m->body);
  memset(m, 0, sizeof *m);
}

static void dv__kmacro_undef(dv_kscan *sc, const char *name, size_t len) {
  for (size_t i = 0; i < sc->nkm; i++)
    if (sc->km[i].name && strlen(sc->km[i].name) == len && memcmp(sc->km[i].name, name, len) == 0)
      dv__kpp_macro_free(&sc->km[i]);
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
        dv__kpp_macro_free(&m);
        return;
      }
      break;
    }
    if (m.nparams == DV__KMACRO_PARAMS || !(m.params[m.nparams] = dv__kpp_strndup(ps, (size_t)(q - ps)))) {
      if (m.nparams < DV__KMACRO_PARAMS) sc->oom = true;
      dv__kpp_macro_free(&m);
      return;
    }
    m.nparams++;
  }
  m.name = dv__kpp_strndup(name, len);
  m.body = dv__strdup(close + 1);
  if (!m.name || !m.body) {
    sc->oom = true;
    dv__kpp_macro_free(&m);
    return;
  }
  if (sc->nkm == sc->capkm) {
    size_t cap = sc->capkm ? 2 * sc->capkm : 4;
    dv_kmacro *nk = dv__kpp_grow(sc->km, sc->nkm * sizeof *nk, cap * sizeof *nk);
    if (!nk) {
      sc->oom = true;
      dv__kpp_macro_free(&m);
      return;
    }
    sc->km = nk, sc->capkm = cap;
  }
  sc->km[sc->nkm++] = m;
}

void dv__kpp_directive(dv_kscan *sc) {
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
  } else if ((DV__IS("define") || DV__IS("undef")) && dv__kpp_active(sc) != 0) {
    const char *ns = p;
    while (dv__ident_char(*p)) p++;
    size_t nl = (size_t)(p - ns);
    if (nl && DV__IS("undef")) {
      dv__kmacro_undef(sc, ns, nl);
      dv__kpp_alias_set(sc, ns, nl, NULL, 0, false);
      dv_kalias *a = dv__kpp_alias_find(sc, ns, nl);
      if (a) a->gone = true;
    } else if (nl) {
      bool function_like = *p == '(';
      dv__kpp_alias_set(sc, ns, nl, p, strlen(p), !function_like);
      if (function_like) dv__kmacro_define(sc, ns, nl, p);
    }
  }
#undef DV__IS
  dv__free(t);
}
