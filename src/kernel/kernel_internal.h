/*
 * The kernel layer (src/kernel/): programs, modules, kernels and launches.
 * It sits beside the transfer planner: it reads array descriptors handed to
 * it and calls the backends through the version-3 methods of the backend
 * table; the compiled-module cache on disk (cache.c) and SHA-256 (sha256.c)
 * are its own.
 */
#ifndef DV_KERNEL_INTERNAL_H
#define DV_KERNEL_INTERNAL_H

#include "../array/array.h"
#include "../backends/backend.h"
#include "../core/core.h"
#include "../stream/stream.h"
#include "signature.h"

typedef struct dv_kconst {
  char *name;
  dv_type_id type;
  size_t itemsize;
  int64_t count;
  size_t offset; /* in the constant buffer */
} dv_kconst;

#define DV__KBACKENDS 4 /* host, opencl, cuda, hip: per-backend options */

struct dv_program {
  dv_context *ctx;
  char *name;
  char *source;
  char **defines; /* "NAME VALUE" pairs as two strings each */
  size_t ndefines;
  char *options[DV__KBACKENDS];
  dv_kconst *consts;
  size_t nconsts;
  unsigned char *const_data;
  size_t const_bytes;
  char *log;
};

#define DV__KERNEL_LIVE 0x6b65726eu /* "kern" */
#define DV__KERNEL_DEAD 0xdeadbeefu

struct dv_kernel {
  _Atomic uint32_t magic; /* LIVE until its module's last reference goes, then DEAD */
  _Atomic int holds;      /* dv_kernel_retain, each holding one module reference */
  struct dv_module *module;
  dv_bkernel *bk;
  char *name;
  const dv_ksig *sig;     /* in module->sigs; NULL: not readable (see unreadable) */
  const char *unreadable; /* why the signature could not be read (static text) */
  dv_kernel_attrs attrs;
  struct dv_kernel *next;
};

struct dv_module {
  dv_handle hdr; /* DV_HANDLE_MODULE */
  _Atomic int refs;
  dv_context *ctx;
  dv_bmodule *bm;
  dv_klimits limits;
  dv_kconst *consts; /* copies of the program's declarations */
  size_t nconsts;
  size_t const_bytes;
  int from_cache;
  char *program;  /* the program's name, for messages */
  dv_ksigs sigs;  /* every DV_KERNEL of the source (signature.c) */
  pthread_mutex_t lock; /* kernels */
  struct dv_kernel *kernels;
};

/* The C type the dialect names for a dtype ("dv_f32"), or NULL if constants
 * and scalars of that dtype are not supported in kernels. */
const char *dv__kernel_ctype(dv_type_id id);

/* The translation unit a build hands to the backend (dv__malloc'd; NULL
 * when out of memory): the dialect header, the prelude (with each kernel's
 * lowered argument names from sigs; NULL: without them), `#line 1`, the
 * source. */
char *dv__program_unit(const dv_program *p, const dv_ksigs *sigs);

/* What dv_program_build compiles for a context of `backend` ("host",
 * "opencl", "cuda", "hip"; `predefined`: the device's predefined names,
 * dv_klimits.predefined, or NULL): the kernels' declarations read for that
 * backend (*sigs, free with dv__ksigs_free) and the unit assembled with
 * them (*unit, dv__malloc'd); *options: the program's options for that
 * backend ("" when none; the program's string).  On failure nothing is
 * left to free.  Also used by tests/backends/hip/test_hip_rtc.c to compile exactly what
 * a build would. */
dv_status dv__program_assemble(const dv_program *p, const char *backend, const char *predefined,
                               dv_ksigs *sigs, char **unit, const char **options);

/* A kernel handle the caller may use: DV_OK, or DV_ERR_MISUSE (a kernel
 * whose module's last reference is gone) / DV_ERR_NULL_ARGUMENT. */
dv_status dv__kernel_usable(const dv_kernel *k);
/* Check a launch's arguments against the kernel's signature (contract.c). */
dv_status dv__check_contract(const dv_kernel *k, size_t nargs, const dv_arg *args);
/* Refuse, at build and on every backend, declarations no launch could
 * satisfy or some backend cannot compile (contract.c): a kernel with no
 * parameter, a pointer parameter.  DV_ERR_COMPILE naming the program, the
 * line and the kernel, with the same text in *log (the program's log:
 * allocated, the caller frees; left NULL when out of memory). */
dv_status dv__check_declarations(const char *program, const dv_ksigs *sigs, char **log);
/* A scalar argument's bytes (dv_arg.value, or dv_arg.scalar when NULL). */
const void *dv__arg_value(const dv_arg *a);
/* Free the kernels of unloaded modules kept to catch late use (context destroy). */
/* The kernel layer's part of a context (ctx->kernels), made and freed with
 * the context (dv__kernel_state_init, dv__kernel_state_fini; launch.c). */
struct dv_kernel_state {
  _Atomic int64_t live_modules, live_programs; /* the user's: they make the context BUSY */
  /* Kernels of unloaded modules, poisoned and kept (at most 1024, oldest
   * freed first) so a late use is caught; under `lock`. */
  dv_spin lock;
  struct dv_kernel *dead, *dead_tail;
  size_t ndead;
};
dv_status dv__kernel_state_init(dv_context *ctx);
/* Frees the dead kernels and the record. */
void dv__kernel_state_fini(dv_context *ctx);

#endif
