/*
 * The host simulator's kernels: calling one.  A kernel is a plain C
 * function of the module; the kernel layer has checked a launch's
 * arguments against the kernel's declaration, and its lowered arguments
 * (buffers, offsets, views, scalars) become a call.  libffi builds the call
 * from the run-time argument list; on x86-64 Linux the arguments are sorted
 * once per launch into the registers and stack slots of the System V
 * convention and each thread is a plain call (hk_flat, in
 * host_kernel_internal.h).
 */
#include <string.h>

#include "exec_internal.h"

/* The kernel's view struct by value: 17 int64 (kernel.h's dv_kview). */
static ffi_type *hk_view_elems[2 + 2 * DV_BKVIEW_MAXDIMS] = {
    &ffi_type_sint64, &ffi_type_sint64, &ffi_type_sint64, &ffi_type_sint64, &ffi_type_sint64,
    &ffi_type_sint64, &ffi_type_sint64, &ffi_type_sint64, &ffi_type_sint64, &ffi_type_sint64,
    &ffi_type_sint64, &ffi_type_sint64, &ffi_type_sint64, &ffi_type_sint64, &ffi_type_sint64,
    &ffi_type_sint64, &ffi_type_sint64, NULL};
static ffi_type hk_view_ffi = {sizeof(dv_bkview), _Alignof(dv_bkview), FFI_TYPE_STRUCT,
                               hk_view_elems};
_Static_assert(sizeof(dv_bkview) == 17 * sizeof(int64_t), "dv_bkview is 17 int64");
_Static_assert(sizeof(dv_kview) == sizeof(dv_bkview), "kernel.h's dv_kview matches dv_bkview");

static ffi_type *hk_dtype_ffi(dv_type_id t) {
  switch (t) {
    case DV_BOOL: return &ffi_type_uint8;
    case DV_INT8: return &ffi_type_sint8;
    case DV_INT16: return &ffi_type_sint16;
    case DV_INT32: return &ffi_type_sint32;
    case DV_INT64: return &ffi_type_sint64;
    case DV_UINT8: return &ffi_type_uint8;
    case DV_UINT16: return &ffi_type_uint16;
    case DV_UINT32: return &ffi_type_uint32;
    case DV_UINT64: return &ffi_type_uint64;
    case DV_FLOAT16: return &ffi_type_uint16; /* dv_f16: 16-bit storage, passed as an integer */
    case DV_FLOAT32: return &ffi_type_float;
    case DV_FLOAT64: return &ffi_type_double;
    default: return NULL;
  }
}

/* Each lowered argument's libffi type.  The kernel layer has checked the
 * arguments against the kernel's declaration (src/kernel/contract.c), so
 * an array is a buffer and an int64 offset (and a view), and a scalar has
 * the parameter's size and kind; what is left to refuse here is a dtype the
 * simulator cannot pass. */
dv_status hk_arg_types(const hk_kview *kn, const dv_blaunch *bl, ffi_type **types) {
  for (size_t j = 0; j < bl->nargs; j++) {
    const dv_barg *a = &bl->args[j];
    switch (a->kind) {
      case DV_BARG_BUFFER:
        types[j] = &ffi_type_pointer;
        break;
      case DV_BARG_VIEW:
        if (!a->value || a->size != sizeof(dv_bkview))
          return dv__error(DV_ERR_KERNEL_ARGUMENT, "kernel %s, lowered argument %zu: malformed view",
                           kn->name, j);
        types[j] = &hk_view_ffi;
        break;
      case DV_BARG_VALUE: {
        ffi_type *ft = hk_dtype_ffi(a->type);
        if (!ft || !a->value || a->size != ft->size || a->size > sizeof(hk_val))
          return dv__error(DV_ERR_KERNEL_ARGUMENT,
                           "kernel %s, lowered argument %zu: a %zu-byte value of dtype %d cannot be "
                           "passed", kn->name, j, a->size, (int)a->type);
        types[j] = ft;
        break;
      }
      default:
        return dv__error(DV_ERR_KERNEL_ARGUMENT, "kernel %s, lowered argument %zu: unknown kind %d",
                         kn->name, j, (int)a->kind);
    }
  }
  return DV_OK;
}

/* Sort the launch's arguments for hk_call (see hk_flat); leaves flat.ok
 * false for an argument type it does not know or too many stack slots. */
void hk_flat_build(hk_job *l) {
#if HK_FLAT
  hk_flat *f = &l->flat;
  memset(f, 0, sizeof *f);
  int ng = 0, nx = 0, ns = 0;
  for (size_t j = 0; j < l->nargs; j++) {
    const ffi_type *t = l->types[j];
    const void *v = l->values[j];
    uint64_t u = 0;
    bool sse = false;
    if (t == &hk_view_ffi) { /* class MEMORY: its bytes in stack slots */
      if (ns + (int)(sizeof(dv_bkview) / 8) > HK_FLAT_STACK) return;
      memcpy(&f->s[ns], v, sizeof(dv_bkview));
      ns += (int)(sizeof(dv_bkview) / 8);
      continue;
    }
#define HK_INT(ft, T)         \
  if (t == &ft) {             \
    T x_;                     \
    memcpy(&x_, v, sizeof x_); \
    u = (uint64_t)x_;         \
  } else
    if (t == &ffi_type_pointer) {
      void *p;
      memcpy(&p, v, sizeof p);
      u = (uint64_t)(uintptr_t)p;
    } else HK_INT(ffi_type_sint8, int8_t) HK_INT(ffi_type_sint16, int16_t)
      HK_INT(ffi_type_sint32, int32_t) HK_INT(ffi_type_sint64, int64_t)
      HK_INT(ffi_type_uint8, uint8_t) HK_INT(ffi_type_uint16, uint16_t)
      HK_INT(ffi_type_uint32, uint32_t) HK_INT(ffi_type_uint64, uint64_t)
    if (t == &ffi_type_float) {
      uint32_t b;
      memcpy(&b, v, sizeof b);
      u = b; /* the low half of the register or slot */
      sse = true;
    } else if (t == &ffi_type_double) {
      memcpy(&u, v, sizeof u);
      sse = true;
    } else {
      return;
    }
#undef HK_INT
    if (sse && nx < 8)
      f->x[nx++] = u;
    else if (!sse && ng < 6)
      f->g[ng++] = u;
    else if (ns < HK_FLAT_STACK)
      f->s[ns++] = u;
    else
      return;
  }
  f->ok = true;
#else
  (void)l;
#endif
}

#if HK_FLAT
#define HK_S8(b) uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t
typedef void (*hk_flat_fn)(uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, double,
                           double, double, double, double, double, double, double, HK_S8(0),
                           HK_S8(1), HK_S8(2), HK_S8(3), HK_S8(4));
_Static_assert(HK_FLAT_STACK == 40, "hk_flat_fn passes 40 stack slots");
#undef HK_S8
#endif

/* The kernel (one simulated thread) or its block function (the threads of
 * a block from the one dv__self names: kernel.h), with the launch's
 * arguments; both take the kernel's parameters.  *in_kernel
 * is set for the call's duration only: the signal handler takes a fault for
 * the kernel's while it is (host_exec.c); the runtime the kernel calls
 * clears it meanwhile (host_rt.c). */
void hk_call(hk_job *l, void (*fn_)(void), volatile sig_atomic_t *in_kernel) {
#if HK_FLAT
  const hk_flat *f = &l->flat;
  if (f->ok) {
    hk_flat_fn fn = (hk_flat_fn)fn_;
    double x[8];
    memcpy(x, f->x, sizeof x); /* bit patterns: a float's in the low half */
    const uint64_t *s = f->s;
    *in_kernel = 1;
    fn(f->g[0], f->g[1], f->g[2], f->g[3], f->g[4], f->g[5], x[0], x[1], x[2], x[3], x[4], x[5],
       x[6], x[7], s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7], s[8], s[9], s[10], s[11],
       s[12], s[13], s[14], s[15], s[16], s[17], s[18], s[19], s[20], s[21], s[22], s[23], s[24],
       s[25], s[26], s[27], s[28], s[29], s[30], s[31], s[32], s[33], s[34], s[35], s[36], s[37],
       s[38], s[39]);
    *in_kernel = 0;
    return;
  }
#endif
  *in_kernel = 1;
  ffi_call(&l->cif, fn_, NULL, l->values);
  *in_kernel = 0;
}
