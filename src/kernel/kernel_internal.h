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

typedef struct dv_kconst {
  char *name;
  dv_type_id type;
  size_t itemsize;
  int64_t count;
  size_t offset; /* in the constant buffer */
} dv_kconst;

#define DV__KBACKENDS 3 /* host, opencl, cuda: per-backend options */

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

struct dv_kernel {
  struct dv_module *module;
  dv_bkernel *bk;
  char *name;
  dv_kernel_attrs attrs;
  struct dv_kernel *next;
};

struct dv_module {
  _Atomic int refs;
  dv_context *ctx;
  dv_bmodule *bm;
  dv_klimits limits;
  dv_kconst *consts; /* copies of the program's declarations */
  size_t nconsts;
  size_t const_bytes;
  int from_cache;
  pthread_mutex_t lock; /* kernels */
  struct dv_kernel *kernels;
};

/* The C type the dialect names for a dtype ("dv_f32"), or NULL if constants
 * and scalars of that dtype are not supported in kernels. */
const char *dv__kernel_ctype(dv_type_id id);

/* The translation unit a build hands to the backend (dv__malloc'd; NULL
 * when out of memory): the dialect header, the prelude, `#line 1`, the
 * source. */
char *dv__program_unit(const dv_program *p);

#endif
