/*
 * Kernel parameter lists and their types (the reader's second half; the scan
 * is signature.c): "DV_ARRAY(const float, x), unsigned long n" into kinds,
 * element and value types, names and declarations; C's specifiers in any
 * order, the dialect's and <stdint.h>'s names, aliases through the scan's
 * lookup; comparisons of signatures, with each other and with what a driver
 * reports (the debug builds' cross-check).
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sigtypes.h"

/* ---- types ------------------------------------------------------------------------ */

typedef struct dv_kname {
  const char *name;
  dv_type_id id;
} dv_kname;

/* Type names that are not C's specifiers (those, in any order, are
 * dv__specifiers'): the dialect's, <stdint.h>'s, OpenCL C's.  `long` is 64
 * bits on every backend devarray runs on (LP64 hosts, OpenCL, CUDA on
 * 64-bit Linux). */
static const dv_kname dv__knames[] = {
    {"int8_t", DV_INT8},     {"dv_i8", DV_INT8},       {"uchar", DV_UINT8},
    {"uint8_t", DV_UINT8},   {"dv_u8", DV_UINT8},      {"int16_t", DV_INT16},
    {"dv_i16", DV_INT16},    {"ushort", DV_UINT16},    {"uint16_t", DV_UINT16},
    {"dv_u16", DV_UINT16},   {"int32_t", DV_INT32},    {"dv_i32", DV_INT32},
    {"uint", DV_UINT32},     {"uint32_t", DV_UINT32},  {"dv_u32", DV_UINT32},
    {"int64_t", DV_INT64},   {"dv_i64", DV_INT64},     {"ptrdiff_t", DV_INT64},
    {"intptr_t", DV_INT64},  {"ulong", DV_UINT64},     {"uint64_t", DV_UINT64},
    {"dv_u64", DV_UINT64},   {"size_t", DV_UINT64},    {"uintptr_t", DV_UINT64},
    {"half", DV_FLOAT16},    {"dv_f16", DV_FLOAT16},   {"dv_f32", DV_FLOAT32},
    {"dv_f64", DV_FLOAT64},
};

const char *dv__ktype_text(dv_type_id id) {
  switch (id) {
    case DV_BOOL: return "bool";
    case DV_INT8: return "int8";
    case DV_INT16: return "int16";
    case DV_INT32: return "int32";
    case DV_INT64: return "int64";
    case DV_UINT8: return "uint8";
    case DV_UINT16: return "uint16";
    case DV_UINT32: return "uint32";
    case DV_UINT64: return "uint64";
    case DV_FLOAT16: return "float16";
    case DV_FLOAT32: return "float32";
    case DV_FLOAT64: return "float64";
    case DV_COMPLEX64: return "complex64";
    case DV_COMPLEX128: return "complex128";
    case DV_RECORD: return "record";
    default: return "unknown";
  }
}

/* ---- parameter lists ----------------------------------------------------------------- */

static bool dv__qualifier(const char *s, size_t len, bool *is_const) {
  static const char *const q[] = {"volatile", "restrict", "__restrict", "__restrict__",
                                  "DV_RESTRICT", "register", "DV_GLOBAL_MEM", "DV_CONSTANT_MEM",
                                  "DV_SHARED_MEM", "__global", "global", "__constant"};
  if (dv__is_word(s, len, "const")) return *is_const = true;
  for (size_t i = 0; i < sizeof q / sizeof *q; i++)
    if (dv__is_word(s, len, q[i])) return true;
  return false;
}

/* Resolve the type text `t` (len bytes): qualifiers dropped, aliases followed. */
/* The type the C specifiers make, in any order ("long unsigned int",
 * "char unsigned"), or DV_TYPE_COUNT when a word is not a specifier. */
static dv_type_id dv__specifiers(const char *norm, bool *plain_char) {
  int sgn = 0, uns = 0, shrt = 0, lng = 0, chr = 0, in = 0, flt = 0, dbl = 0, bl = 0, words = 0;
  for (const char *p = norm; *p;) {
    const char *w = p;
    while (*p && *p != ' ') p++;
    size_t n = (size_t)(p - w);
    if (*p) p++;
    words++;
    if (dv__is_word(w, n, "signed")) sgn++;
    else if (dv__is_word(w, n, "unsigned")) uns++;
    else if (dv__is_word(w, n, "short")) shrt++;
    else if (dv__is_word(w, n, "long")) lng++;
    else if (dv__is_word(w, n, "char")) chr++;
    else if (dv__is_word(w, n, "int")) in++;
    else if (dv__is_word(w, n, "float")) flt++;
    else if (dv__is_word(w, n, "double")) dbl++;
    else if (dv__is_word(w, n, "_Bool") || dv__is_word(w, n, "bool")) bl++;
    else return DV_TYPE_COUNT;
  }
  if (!words || sgn + uns > 1 || in > 1 || shrt > 1 || lng > 2 || (shrt && lng)) return DV_TYPE_COUNT;
  if (flt || dbl || bl || chr) {
    if (words != 1 + (chr ? sgn + uns : 0)) return DV_TYPE_COUNT; /* "long double", "int char" ... */
    if (flt) return DV_FLOAT32;
    if (dbl) return DV_FLOAT64;
    if (bl) return DV_BOOL;
    *plain_char = !sgn && !uns;
    return uns ? DV_UINT8 : DV_INT8;
  }
  if (shrt) return uns ? DV_UINT16 : DV_INT16;
  if (lng) return uns ? DV_UINT64 : DV_INT64;
  return uns ? DV_UINT32 : DV_INT32;
}

/* Resolve the type text `t` (len bytes): qualifiers dropped, aliases followed. */
static void dv__resolve(const dv_kaliases *al, const char *t, size_t len, dv_ktype *out,
                        bool *is_const, int depth) {
  out->id = DV_TYPE_COUNT;
  char norm[96];
  size_t nn = 0, nwords = 0, i = 0;
  const char *last = NULL;
  size_t lastlen = 0;
  bool other = false; /* a '(' or another sign: a macro with arguments, a function type */
  while (i < len) {
    if (t[i] == '*' || t[i] == '[') out->pointer = true;
    if (!dv__ident_start(t[i])) {
      if (t[i] == '(' || t[i] == ')') other = true;
      i++;
      continue;
    }
    size_t ws = i;
    while (i < len && dv__ident_char(t[i])) i++;
    size_t wl = i - ws;
    if (dv__qualifier(t + ws, wl, is_const)) continue;
    if (nn + wl + 2 >= sizeof norm) return;
    if (nn) norm[nn++] = ' ';
    memcpy(norm + nn, t + ws, wl);
    nn += wl;
    nwords++;
    last = t + ws, lastlen = wl;
  }
  norm[nn] = 0;
  if (other && !out->pointer) return;
  if (nwords == 1 && al && depth < 8) {
    bool uncertain = false;
    const char *text = al->find(al->ctx, last, lastlen, &uncertain);
    if (uncertain) {
      out->uncertain = true; /* defined under a condition the reader cannot evaluate */
      return;
    }
    if (text) {
      dv__resolve(al, text, strlen(text), out, is_const, depth + 1);
      return;
    }
  }
  bool plain = false;
  dv_type_id id = dv__specifiers(norm, &plain);
  if (id != DV_TYPE_COUNT) {
    out->id = id;
    out->plain_char = plain;
    return;
  }
  for (size_t k = 0; k < sizeof dv__knames / sizeof *dv__knames; k++)
    if (strcmp(norm, dv__knames[k].name) == 0) {
      out->id = dv__knames[k].id;
      out->plain_char = false;
      return;
    }
}

/* Copy `len` bytes of `s` into dst (cap bytes), blanks collapsed, "..." when cut. */
static void dv__collapse(char *dst, size_t cap, const char *s, size_t len) {
  size_t o = 0;
  bool blank = false;
  for (size_t i = 0; i < len && o + 1 < cap; i++) {
    if (isspace((unsigned char)s[i])) {
      blank = o > 0;
      continue;
    }
    if (blank && o + 2 < cap) dst[o++] = ' ';
    blank = false;
    dst[o++] = s[i];
  }
  dst[o] = 0;
  if (o + 1 >= cap && cap > 4) memcpy(dst + cap - 4, "...", 4);
}

void dv__ktrim(const char **a, const char **b) {
  while (*a < *b && isspace((unsigned char)**a)) (*a)++;
  while (*b > *a && isspace((unsigned char)(*b)[-1])) (*b)--;
}

/* The end of the top-level item that starts at s (a ',' at depth 0, or e). */
const char *dv__kitem_end(const char *s, const char *e) {
  int depth = 0;
  for (; s < e; s++) {
    if (*s == '(' || *s == '[' || *s == '{') depth++;
    else if ((*s == ')' || *s == ']' || *s == '}') && depth > 0) depth--;
    else if (*s == ',' && depth == 0) break;
  }
  return s;
}

static bool dv__starts_macro(const char *a, const char *b, const char *macro, const char **inner,
                             const char **inner_end) {
  size_t ml = strlen(macro);
  if ((size_t)(b - a) <= ml || memcmp(a, macro, ml) != 0 || dv__ident_char(a[ml])) return false;
  const char *p = a + ml;
  while (p < b && isspace((unsigned char)*p)) p++;
  if (p >= b || *p != '(') return false;
  int depth = 0;
  const char *q = p;
  for (; q < b; q++) {
    if (*q == '(') depth++;
    else if (*q == ')' && --depth == 0) break;
  }
  *inner = p + 1;
  *inner_end = q;
  return true;
}

dv_status dv__ksig_parse_params(const dv_kaliases *al, const char *s, const char *e, dv_ksig *out) {
  int cap = 1;
  for (const char *c = s; c < e; c++) cap += *c == ',';
  out->params = dv__calloc((size_t)cap, sizeof *out->params);
  if (!out->params) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot read a kernel signature");
  out->nparams = 0;
  while (s < e) {
    const char *ie = dv__kitem_end(s, e), *a = s, *b = ie;
    s = ie < e ? ie + 1 : e;
    dv__ktrim(&a, &b);
    if (a == b || (b - a == 4 && memcmp(a, "void", 4) == 0)) continue;
    dv_kparam *p = &out->params[out->nparams++];
    dv__collapse(p->decl, sizeof p->decl, a, (size_t)(b - a));
    const char *in, *in_end;
    bool arr = dv__starts_macro(a, b, "DV_ARRAY", &in, &in_end);
    bool view = !arr && dv__starts_macro(a, b, "DV_VIEW", &in, &in_end);
    if (arr || view) {
      p->kind = arr ? DV_PARAM_ARRAY : DV_PARAM_VIEW;
      const char *te = dv__kitem_end(in, in_end);
      const char *na = te < in_end ? te + 1 : in_end, *nb = in_end;
      dv__ktrim(&na, &nb);
      dv__collapse(p->name, sizeof p->name, na, (size_t)(nb - na));
      bool pointer_elem = false;
      dv_ktype t = {0};
      dv__resolve(al, in, (size_t)(te - in), &t, &p->is_const, 0);
      pointer_elem = t.pointer;
      p->type = t;
      p->type.pointer = false;
      if (pointer_elem) p->type.id = DV_TYPE_COUNT; /* an array of pointers: not a dtype */
    } else {
      p->kind = DV_PARAM_SCALAR;
      const char *ne = b, *ns = b;
      while (ns > a && dv__ident_char(ns[-1])) ns--;
      if (ns == ne || ns == a) { /* no separate name: a type alone */
        p->type.id = DV_TYPE_COUNT;
        continue;
      }
      dv__collapse(p->name, sizeof p->name, ns, (size_t)(ne - ns));
      bool c = false;
      dv__resolve(al, a, (size_t)(ns - a), &p->type, &c, 0);
      p->is_const = c;
    }
  }
  return DV_OK;
}

bool dv__ksig_params_equal(const dv_ksig *a, const dv_ksig *b) {
  if (a->nparams != b->nparams) return false;
  for (int i = 0; i < a->nparams; i++) {
    const dv_kparam *p = &a->params[i], *q = &b->params[i];
    if (p->kind != q->kind || p->type.id != q->type.id || p->type.pointer != q->type.pointer)
      return false;
  }
  return true;
}

void dv__ksig_clear(dv_ksig *s) {
  if (!s) return;
  dv__free(s->kernel);
  dv__free(s->params);
  memset(s, 0, sizeof *s);
}

dv_status dv__ksig_parse_list(const char *text, dv_ksig *out) {
  memset(out, 0, sizeof *out);
  return dv__ksig_parse_params(NULL, text, text + strlen(text), out);
}

bool dv__ksig_same(const dv_ksig *a, const dv_ksig *b, char *why, size_t cap) {
  if (a->nparams != b->nparams) {
    snprintf(why, cap, "%d parameters against %d", a->nparams, b->nparams);
    return false;
  }
  for (int i = 0; i < a->nparams; i++) {
    const dv_kparam *p = &a->params[i], *q = &b->params[i];
    /* Names count unless the kernel was declared more than once with other
     * names (then the compiler may have taken any of them). */
    if (p->kind != q->kind || (!a->names_differ && strcmp(p->name, q->name) != 0) ||
        (p->type.id != q->type.id && p->type.id != DV_TYPE_COUNT && q->type.id != DV_TYPE_COUNT)) {
      snprintf(why, cap, "parameter %d: `%s` against `%s`", i + 1, p->decl, q->decl);
      return false;
    }
  }
  return true;
}

/* A driver's type name ("float*", "__global float *", "uint") as a type id. */
static dv_type_id dv__driver_type(const char *name, bool *pointer) {
  dv_ktype t = {0};
  bool c = false;
  dv__resolve(NULL, name, strlen(name), &t, &c, 0);
  *pointer = t.pointer;
  return t.id;
}

bool dv__ksig_lowered_same(const dv_ksig *sig, const dv_bparam *bp, size_t n, char *why, size_t cap) {
  size_t j = 0;
  for (int i = 0; i < sig->nparams; i++) {
    const dv_kparam *p = &sig->params[i];
    size_t want = p->kind == DV_PARAM_SCALAR ? 1 : p->kind == DV_PARAM_ARRAY ? 2 : 3;
    if (j + want > n) {
      snprintf(why, cap, "the driver reports %zu lowered parameters; parameter %d (`%s`) needs "
               "%zu more", n, i + 1, p->decl, j + want - n);
      return false;
    }
    for (size_t w = 0; w < want; w++, j++) {
      const dv_bparam *b = &bp[j];
      bool buffer = p->kind != DV_PARAM_SCALAR && w == 0;
      char kind = buffer ? 'b' : 'v';
      size_t size = buffer ? 0 : p->kind == DV_PARAM_SCALAR ? 0 : w == 1 ? 8 : sizeof(dv_bkview);
      if (p->kind == DV_PARAM_SCALAR && p->type.id != DV_TYPE_COUNT)
        size = dv_dtype_itemsize(dv_dtype_get(p->type.id));
      bool ptr = false;
      dv_type_id tid = b->type[0] ? dv__driver_type(b->type, &ptr) : DV_TYPE_COUNT;
      dv_type_id expect = buffer || p->kind == DV_PARAM_SCALAR ? p->type.id
                          : w == 1                            ? DV_INT64
                                                              : DV_TYPE_COUNT;
      bool ok = b->kind == '?' || b->kind == kind;
      if (b->size && size && b->size != size) ok = false;
      if (tid != DV_TYPE_COUNT && expect != DV_TYPE_COUNT && tid != expect && !p->type.plain_char)
        ok = false;
      if (buffer && b->type[0] && !ptr) ok = false;
      if (!ok) {
        snprintf(why, cap, "parameter %d (`%s`), lowered part %zu: expected a %s%s%s of %zu bytes, "
                 "the driver says a %s `%s` of %zu bytes", i + 1, p->decl, w + 1,
                 kind == 'b' ? "buffer" : "value", expect != DV_TYPE_COUNT ? " of " : "",
                 expect != DV_TYPE_COUNT ? dv__ktype_text(expect) : "", size,
                 b->kind == 'b' ? "buffer" : b->kind == 'v' ? "value" : "parameter", b->type, b->size);
        return false;
      }
    }
  }
  if (j != n) {
    snprintf(why, cap, "the declaration lowers to %zu parameters, the driver reports %zu", j, n);
    return false;
  }
  return true;
}
