/*
 * Kernel signatures: what each DV_KERNEL(...) of a program takes, read once
 * from the program's source when it is built, for every backend.  The
 * kernel layer checks every launch against it (launch.c) before anything is
 * queued, so the same mistake gets the same status and message on the host
 * simulator, OpenCL and CUDA.
 *
 * The reader is a small scanner, not a C parser: it skips comments, string
 * and character literals and the bodies of #define; it follows #ifdef,
 * #ifndef, #if defined(...), #if 0/1, #else and #endif with the names it
 * can know (the program's defines, -D in its options for this backend, the
 * source's own #defines, DV_BACKEND_<this backend>); and it resolves type
 * names through the source's object-like #defines and simple typedefs and
 * the program's defines; a function-like macro whose body declares kernels
 * is read through its expansion where the source invokes it (arguments
 * substituted, ## joined, four macros deep at most).  What it cannot read
 * is marked, never guessed: a DV_KERNEL written inside a variadic or
 * object-like macro is not found (the kernel cannot be looked up), one declared twice with different parameter lists under
 * conditions the reader cannot evaluate is ambiguous, and a type it cannot
 * resolve (a struct, a macro with arguments) is unknown (element types:
 * not checked; scalar parameters: refused at launch, since their size
 * cannot be known).
 */
#ifndef DV_KERNEL_SIGNATURE_H
#define DV_KERNEL_SIGNATURE_H

#include <stdbool.h>
#include <stddef.h>

#include "../backends/backend.h"
#include "../core/core.h"

/* Element or scalar type of a parameter. */
typedef struct dv_ktype {
  dv_type_id id; /* DV_TYPE_COUNT: unknown */
  bool plain_char; /* `char`: int8, uint8 or bool arrays all fit */
  bool pointer;    /* a scalar parameter declared as a pointer */
  bool uncertain;  /* unknown because defined under a condition the reader cannot evaluate */
} dv_ktype;

typedef struct dv_kparam {
  dv_param_kind kind;
  dv_ktype type;
  bool is_const; /* arrays: const elements */
  char name[64];
  char decl[128]; /* as written, blanks collapsed (shortened with "...") */
} dv_kparam;

typedef struct dv_ksig {
  char *kernel;
  dv_kparam *params;
  int nparams;
  int line;       /* of DV_KERNEL in the program's source */
  bool ambiguous; /* declared more than once, differently */
  bool names_differ; /* declared more than once with other parameter names (the names are the
                        first's: the prelude names no arguments for it) */
} dv_ksig;

typedef struct dv_ksigs {
  dv_ksig *v;
  size_t n;
} dv_ksigs;

/* Read every DV_KERNEL of `source`.  `defines` holds ndefines (name, value)
 * pairs (the program's), `options` the compiler options for this backend
 * (scanned for -D, --define-macro and -U), `backend` the backend's name,
 * `predefined` the names its compiler predefines for the device
 * (space-separated; OpenCL: the device's extensions, a complete list of
 * the cl_ names; NULL: not known).  Fails only when out of memory. */
dv_status dv__ksig_scan(const char *source, char *const *defines, size_t ndefines,
                        const char *options, const char *backend, const char *predefined,
                        dv_ksigs *out);
void dv__ksigs_free(dv_ksigs *s);
/* The kernel's signature, or NULL when the source has no DV_KERNEL of that name. */
const dv_ksig *dv__ksig_find(const dv_ksigs *s, const char *kernel);
/* Parse one parameter list ("DV_ARRAY(const float, x), int n") with no
 * aliases: the host simulator's exported text, for the cross-check. */
dv_status dv__ksig_parse_list(const char *text, dv_ksig *out);
void dv__ksig_clear(dv_ksig *s);
/* Whether two parsed signatures agree (kinds, types, names); when not,
 * `why` says where. */
bool dv__ksig_same(const dv_ksig *a, const dv_ksig *b, char *why, size_t cap);
/* Whether the lowered parameters a driver reports (kernel_params) agree with
 * the signature: kinds, value sizes and type names where the driver says. */
bool dv__ksig_lowered_same(const dv_ksig *sig, const dv_bparam *bp, size_t n, char *why, size_t cap);
/* The dialect's name for a type id ("float32 (float, dv_f32)"), for messages. */
const char *dv__ktype_text(dv_type_id id);

#endif
