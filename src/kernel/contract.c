/*
 * The kernel contract: every launch's arguments checked against the
 * kernel's DV_KERNEL declaration (signature.c), once, here, before anything
 * is allocated or queued, on every backend.  One message format names the
 * kernel, the parameter (its position, 1-based, and its declaration), what
 * it takes and what it was given:
 *
 *   kernel scale, parameter 4 of 4 (`int n`): takes an int32 scalar
 *   (DV_ARG_I32); given an int64 scalar (DV_ARG_I64)
 *
 * The rules (docs/kernels.md, "The contract"):
 *  - as many arguments as parameters;
 *  - DV_ARRAY takes DV_ARG_ARRAY* or DV_ARG_SMART*, DV_VIEW takes
 *    DV_ARG_VIEW* or DV_ARG_SMART_VIEW*, a scalar takes a scalar;
 *  - a scalar's dtype has the parameter's size and kind (integer, floating
 *    point): no conversion happens on any backend.  An integer of the same
 *    size and the other signedness is accepted when its value fits the
 *    parameter's type (DV_ARG_I32(n) for an `unsigned` parameter, n >= 0);
 *    a `bool` parameter takes DV_ARG_BOOL or a one-byte integer 0 or 1;
 *  - an array's dtype is the parameter's element type (a `char` parameter
 *    takes int8, uint8 and bool arrays, an unsigned char one uint8 and bool);
 *    an element type devarray cannot resolve is not checked;
 *  - a DV_ARRAY parameter indexes element i at base + i: a device (or
 *    mapped, or managed) array must be C-contiguous; host arrays reach the
 *    kernel through a dense temporary and smart arrays through their dense
 *    device copy, so any layout of those is taken;
 *  - the lowered parameters fit the device's parameter space.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "kernel_internal.h"
#include "../array/smart.h"

static const char *dv__arg_ctor(dv_type_id t) {
  switch (t) {
    case DV_BOOL: return "DV_ARG_BOOL";
    case DV_INT8: return "DV_ARG_I8";
    case DV_INT16: return "DV_ARG_I16";
    case DV_INT32: return "DV_ARG_I32";
    case DV_INT64: return "DV_ARG_I64";
    case DV_UINT8: return "DV_ARG_U8";
    case DV_UINT16: return "DV_ARG_U16";
    case DV_UINT32: return "DV_ARG_U32";
    case DV_UINT64: return "DV_ARG_U64";
    case DV_FLOAT16: return "DV_ARG_F16";
    case DV_FLOAT32: return "DV_ARG_F32";
    case DV_FLOAT64: return "DV_ARG_F64";
    default: return "no constructor";
  }
}

/* "a" or "an" before a dtype's name ("an int32", "a uint32", "a float64"). */
static const char *dv__an(const char *word) {
  return word[0] == 'i' || strncmp(word, "unknown", 7) == 0 ? "an" : "a";
}

static bool dv__is_float(dv_type_id t) { return t == DV_FLOAT16 || t == DV_FLOAT32 || t == DV_FLOAT64; }
static bool dv__is_signed(dv_type_id t) {
  return t == DV_INT8 || t == DV_INT16 || t == DV_INT32 || t == DV_INT64;
}
static size_t dv__tsize(dv_type_id t) {
  const dv_dtype *d = dv_dtype_get(t);
  return d ? dv_dtype_itemsize(d) : 0;
}

const void *dv__arg_value(const dv_arg *a) { return a->value ? a->value : (const void *)&a->scalar; }

/* The integer value of a scalar argument: as int64 (signed types) or uint64. */
static void dv__int_value(const dv_arg *a, int64_t *s, uint64_t *u) {
  const void *v = dv__arg_value(a);
  switch (a->type) {
    case DV_INT8: { int8_t x; memcpy(&x, v, 1); *s = x; break; }
    case DV_INT16: { int16_t x; memcpy(&x, v, 2); *s = x; break; }
    case DV_INT32: { int32_t x; memcpy(&x, v, 4); *s = x; break; }
    case DV_INT64: { int64_t x; memcpy(&x, v, 8); *s = x; break; }
    case DV_BOOL:
    case DV_UINT8: { uint8_t x; memcpy(&x, v, 1); *u = x; break; }
    case DV_UINT16: { uint16_t x; memcpy(&x, v, 2); *u = x; break; }
    case DV_UINT32: { uint32_t x; memcpy(&x, v, 4); *u = x; break; }
    case DV_UINT64: { uint64_t x; memcpy(&x, v, 8); *u = x; break; }
    default: break;
  }
}

/* "kernel K, parameter I of N (`decl`): takes " -- the common head. */
static int dv__head(char *b, size_t cap, const dv_kernel *k, int i) {
  const dv_ksig *sig = k->sig;
  return snprintf(b, cap, "kernel %s, parameter %d of %d (`%s`): takes ", k->name, i + 1,
                  sig->nparams, sig->params[i].decl);
}

static void dv__takes(char *b, size_t cap, const dv_kparam *p) {
  const char *t = p->type.id == DV_TYPE_COUNT ? NULL : dv__ktype_text(p->type.id);
  switch (p->kind) {
    case DV_PARAM_ARRAY:
      snprintf(b, cap, "a C-contiguous %s%sarray (DV_ARG_ARRAY or DV_ARG_SMART)", t ? t : "",
               t ? " " : "");
      break;
    case DV_PARAM_VIEW:
      snprintf(b, cap, "%s %s%sarray with shape and strides (DV_ARG_VIEW or DV_ARG_SMART_VIEW)",
               t ? dv__an(t) : "an", t ? t : "", t ? " " : "");
      break;
    default:
      if (p->type.pointer)
        snprintf(b, cap, "a pointer, which no argument can be: declare arrays as DV_ARRAY(T, %s)",
                 p->name);
      else if (!t && p->type.uncertain)
        snprintf(b, cap, "a value of a type defined under a preprocessor condition devarray cannot "
                 "evaluate (define the condition with dv_program_define)");
      else if (!t)
        snprintf(b, cap, "a value of a type devarray cannot resolve (use a C or dv_* type, or "
                 "#define or typedef it in the program)");
      else
        snprintf(b, cap, "%s %s scalar (%s)", dv__an(t), t, dv__arg_ctor(p->type.id));
  }
}

static const char *dv__mem_word(const dv_array *a) {
  switch (a->alloc->kind) {
    case DV_MEM_DEVICE: return "device";
    case DV_MEM_HOST: return "host";
    case DV_MEM_PINNED: return "pinned host";
    case DV_MEM_MAPPED: return "mapped host";
    case DV_MEM_MANAGED: return "managed";
    default: return "";
  }
}

static const char *dv__kind_ctor(dv_arg_kind k) {
  switch (k) {
    case DV_ARG_ARRAY: return "DV_ARG_ARRAY";
    case DV_ARG_VIEW: return "DV_ARG_VIEW";
    case DV_ARG_SMART: return "DV_ARG_SMART";
    case DV_ARG_SMART_VIEW: return "DV_ARG_SMART_VIEW";
    default: return "a scalar";
  }
}

static const dv_dtype *dv__arg_dtype(const dv_arg *a) {
  if (a->kind == DV_ARG_SMART || a->kind == DV_ARG_SMART_VIEW) return dv_smart_dtype(a->smart);
  return a->array->dtype;
}

static void dv__given(char *b, size_t cap, const dv_arg *a) {
  if (a->kind == DV_ARG_SCALAR) {
    const char *t = dv__ktype_text(a->type);
    snprintf(b, cap, "%s %s scalar (%s)", dv__an(t), t, dv__arg_ctor(a->type));
    return;
  }
  const char *dt = dv_dtype_name(dv__arg_dtype(a));
  if (a->kind == DV_ARG_SMART || a->kind == DV_ARG_SMART_VIEW)
    snprintf(b, cap, "%s %s smart array (%s)", dv__an(dt), dt, dv__kind_ctor(a->kind));
  else
    snprintf(b, cap, "%s %s %s array (%s)", dv__an(dt), dt, dv__mem_word(a->array),
             dv__kind_ctor(a->kind));
}

static dv_status dv__mismatch(const dv_kernel *k, int i, const dv_arg *a, const char *why) {
  char head[320], takes[200], given[160];
  dv__head(head, sizeof head, k, i);
  dv__takes(takes, sizeof takes, &k->sig->params[i]);
  dv__given(given, sizeof given, a);
  return dv__error(DV_ERR_KERNEL_ARGUMENT, "%s%s; given %s%s%s", head, takes, given,
                   why && *why ? ", " : "", why ? why : "");
}

static bool dv__dtype_fits(const dv_ktype *t, dv_type_id have) {
  if (t->id == DV_TYPE_COUNT) return true; /* not resolvable: not checked */
  if (t->id == have) return true;
  if (t->plain_char) return have == DV_INT8 || have == DV_UINT8 || have == DV_BOOL;
  return t->id == DV_UINT8 && have == DV_BOOL;
}

static void dv__layout(char *b, size_t cap, const dv_array *a) {
  size_t o = (size_t)snprintf(b, cap, "with shape (");
  for (int d = 0; d < a->ndim && o < cap; d++)
    o += (size_t)snprintf(b + o, cap - o, "%s%" PRId64, d ? ", " : "", a->shape[d]);
  if (o < cap) o += (size_t)snprintf(b + o, cap - o, ") and byte strides (");
  for (int d = 0; d < a->ndim && o < cap; d++)
    o += (size_t)snprintf(b + o, cap - o, "%s%" PRId64, d ? ", " : "", a->strides[d]);
  if (o < cap)
    snprintf(b + o, cap - o, "), not C-contiguous: pass it with DV_ARG_VIEW to a DV_VIEW(T, name) "
             "parameter, or make a dense copy (dv_array_copy_new)");
}

static dv_status dv__check_scalar(const dv_kernel *k, int i, const dv_kparam *p, const dv_arg *a) {
  if (p->type.pointer || p->type.id == DV_TYPE_COUNT) return dv__mismatch(k, i, a, NULL);
  dv_type_id want = p->type.id, have = a->type;
  if (have == DV_BOOL) { /* a hand-made argument may hold anything in its byte */
    uint8_t b;
    memcpy(&b, dv__arg_value(a), 1);
    if (b > 1) return dv__mismatch(k, i, a, "whose byte is neither 0 nor 1");
  }
  if (want == have) return DV_OK;
  bool wf = dv__is_float(want), hf = dv__is_float(have);
  if (wf || hf || dv__tsize(want) != dv__tsize(have))
    return dv__mismatch(k, i, a, "and no conversion is made on any backend");
  /* Integers of one size: the value must fit the parameter's type. */
  int64_t s = 0;
  uint64_t u = 0;
  dv__int_value(a, &s, &u);
  bool neg = dv__is_signed(have) && s < 0;
  uint64_t mag = dv__is_signed(have) ? (uint64_t)s : u;
  uint64_t max = want == DV_BOOL ? 1
                 : dv__is_signed(want) ? (UINT64_MAX >> (65 - 8 * dv__tsize(want)))
                                       : (UINT64_MAX >> (64 - 8 * dv__tsize(want)));
  bool fits = !(neg && !dv__is_signed(want)) && (neg || mag <= max);
  if (fits) return DV_OK;
  char why[160];
  if (dv__is_signed(have))
    snprintf(why, sizeof why, "of value %" PRId64 ", which %s %s parameter cannot hold", s,
             dv__an(dv__ktype_text(want)), dv__ktype_text(want));
  else
    snprintf(why, sizeof why, "of value %" PRIu64 ", which %s %s parameter cannot hold", u,
             dv__an(dv__ktype_text(want)), dv__ktype_text(want));
  return dv__mismatch(k, i, a, why);
}

/* Bytes of parameter space the lowered arguments take (C alignment of each). */
static size_t dv__param_bytes(const dv_ksig *sig) {
  size_t total = 0;
  for (int i = 0; i < sig->nparams; i++) {
    const dv_kparam *p = &sig->params[i];
    size_t sz = p->kind == DV_PARAM_SCALAR ? dv__tsize(p->type.id) : 16;
    if (p->kind == DV_PARAM_VIEW) sz += sizeof(dv_bkview);
    size_t al = p->kind == DV_PARAM_SCALAR && sz && sz < 8 ? sz : 8;
    total = (total + al - 1) / al * al + sz;
  }
  return total;
}

dv_status dv__check_declarations(const char *program, const dv_ksigs *sigs, char **log) {
  *log = NULL;
  for (size_t i = 0; i < sigs->n; i++) {
    const dv_ksig *s = &sigs->v[i];
    char msg[512];
    if (s->nparams == 0)
      snprintf(msg, sizeof msg,
               "%s:%d: kernel %s declares no parameter: a kernel takes at least one on every "
               "backend (OpenCL C has no form of DV_KERNEL without one); add one, for example "
               "DV_KERNEL(%s, int unused)",
               program, s->line, s->kernel, s->kernel);
    else {
      int j = 0;
      while (j < s->nparams && !(s->params[j].kind == DV_PARAM_SCALAR && s->params[j].type.pointer))
        j++;
      if (j == s->nparams) continue;
      snprintf(msg, sizeof msg,
               "%s:%d: kernel %s, parameter %d of %d (`%s`): a pointer, which no argument can "
               "be (and OpenCL C refuses): declare arrays as DV_ARRAY(T, %s) or DV_VIEW(T, %s)",
               program, s->line, s->kernel, j + 1, s->nparams, s->params[j].decl,
               s->params[j].name, s->params[j].name);
    }
    *log = dv__strdup(msg);
    return dv__error(DV_ERR_COMPILE, "program %s failed to compile:\n%s", program, msg);
  }
  return DV_OK;
}

dv_status dv__check_contract(const dv_kernel *k, size_t nargs, const dv_arg *args) {
  const dv_ksig *sig = k->sig;
  if (nargs != (size_t)sig->nparams) {
    char first[200] = "";
    if (nargs < (size_t)sig->nparams)
      snprintf(first, sizeof first, " (the first missing is parameter %zu, `%s`)", nargs + 1,
               sig->params[nargs].decl);
    return dv__error(DV_ERR_KERNEL_ARGUMENT,
                     "kernel %s takes %d argument%s; the launch passes %zu%s", k->name,
                     sig->nparams, sig->nparams == 1 ? "" : "s", nargs, first);
  }
  for (int i = 0; i < sig->nparams; i++) {
    const dv_kparam *p = &sig->params[i];
    const dv_arg *a = &args[i];
    bool is_arr = a->kind == DV_ARG_ARRAY || a->kind == DV_ARG_SMART;
    bool is_view = a->kind == DV_ARG_VIEW || a->kind == DV_ARG_SMART_VIEW;
    switch (p->kind) {
      case DV_PARAM_SCALAR:
        if (a->kind != DV_ARG_SCALAR) return dv__mismatch(k, i, a, NULL);
        {
          dv_status rc = dv__check_scalar(k, i, p, a);
          if (rc) return rc;
        }
        break;
      case DV_PARAM_ARRAY:
      case DV_PARAM_VIEW: {
        if (p->kind == DV_PARAM_ARRAY ? !is_arr : !is_view) {
          const char *hint = p->kind == DV_PARAM_ARRAY && is_view
                                 ? "which only a DV_VIEW(T, name) parameter takes"
                                 : NULL;
          return dv__mismatch(k, i, a, hint);
        }
        const dv_dtype *dt = dv__arg_dtype(a);
        if (!dv__dtype_fits(&p->type, dv_dtype_id(dt)))
          return dv__mismatch(k, i, a, "and no conversion is made on any backend");
        if (p->kind == DV_PARAM_ARRAY && a->kind == DV_ARG_SMART &&
            !dv__smart_device_c_contiguous(a->smart))
          return dv__mismatch(k, i, a, "whose device copy is not C-contiguous (it is laid out as "
                              "its host copy, or was adopted so): pass it with DV_ARG_SMART_VIEW to a "
                              "DV_VIEW(T, name) parameter");
        if (p->kind == DV_PARAM_ARRAY && a->kind == DV_ARG_ARRAY) {
          const dv_array *arr = a->array;
          bool copied = arr->alloc->kind == DV_MEM_HOST || arr->alloc->kind == DV_MEM_PINNED;
          if (!copied && !dv_array_is_c_contiguous(arr)) {
            char why[400];
            dv__layout(why, sizeof why, arr);
            return dv__mismatch(k, i, a, why);
          }
        }
        break;
      }
    }
  }
  size_t limit = k->module->limits.max_arg_bytes, need = dv__param_bytes(sig);
  if (limit && need > limit)
    return dv__error(DV_ERR_KERNEL_ARGUMENT,
                     "kernel %s: its %d parameters take %zu bytes; the device allows %zu bytes of "
                     "kernel parameters (an array takes 16, a view 152)", k->name, sig->nparams,
                     need, limit);
  return DV_OK;
}
