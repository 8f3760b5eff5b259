/*
 * Modules, kernels and launches.  A launch is checked here against the
 * device's limits and the kernel's attributes before anything is queued,
 * its arguments are lowered to the backend's form (an array becomes its
 * buffer, the byte offset of element 0, and for DV_VIEW its shape and
 * strides), and the backend queues it on the stream like a copy.
 */
#include <stdio.h>
#include <string.h>

#include "kernel_internal.h"
#include "../array/smart.h"

/* ---- modules ------------------------------------------------------------------- */

dv_module *dv_module_retain(dv_module *m) {
  if (m && dv__handle_check(&m->hdr, DV_HANDLE_MODULE, __func__)) {
    dv__log(DV_LOG_ERROR, "%s", dv_last_error());
    return NULL;
  }
  if (m) atomic_fetch_add(&m->refs, 1);
  return m;
}

/* A graph's hold on a module (dv__capture_keep). */
static void dv__keep_module(void *m) { dv_module_release(m); }

/* Keep a kernel of an unloaded module, poisoned, so a late use is caught;
 * the oldest beyond 1024 are freed. */
static void dv__kernel_bury(dv_context *ctx, dv_kernel *k) {
  k->next = NULL;
  k->bk = NULL;
  k->sig = NULL;
  dv_kernel *evict = NULL;
  dv_kernel_state *ks = ctx->kernels;
  dv__spin_lock(&ks->lock);
  if (ks->dead_tail) ks->dead_tail->next = k;
  else ks->dead = k;
  ks->dead_tail = k;
  if (++ks->ndead > 1024) {
    evict = ks->dead;
    ks->dead = evict->next;
    ks->ndead--;
  }
  dv__spin_unlock(&ks->lock);
  if (evict) {
    dv__free(evict->name);
    dv__free(evict);
  }
}

dv_status dv__kernel_state_init(dv_context *ctx) {
  dv_kernel_state *ks = dv__calloc(1, sizeof *ks);
  if (!ks) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate the context's kernel records");
  dv__spin_init(&ks->lock);
  ctx->kernels = ks;
  return DV_OK;
}

void dv__kernel_state_fini(dv_context *ctx) {
  dv_kernel_state *ks = ctx->kernels;
  if (!ks) return;
  for (dv_kernel *k = ks->dead, *next; k; k = next) {
    next = k->next;
    dv__free(k->name);
    dv__free(k);
  }
  dv__free(ks);
  ctx->kernels = NULL;
}

/* The queued unload: launches already queued may still use the module, so
 * wait for the device first.  Runs at a flush, never in a stream callback
 * (the header forbids releasing objects there). */
static dv_status dv__dtor_module(dv_context *ctx, void *handle, void *aux) {
  (void)aux;
  dv_module *m = handle;
  dv_status rc = dv__bstream_wait(ctx, NULL);
  dv_status r2 = ctx->be->module_unload(ctx->bst, m->bm);
  for (dv_kernel *k = m->kernels, *next; k; k = next) {
    next = k->next;
    dv__kernel_bury(ctx, k);
  }
  for (size_t i = 0; i < m->nconsts; i++) dv__free(m->consts[i].name);
  dv__free(m->consts);
  dv__ksigs_free(&m->sigs);
  dv__free(m->program);
  pthread_mutex_destroy(&m->lock);
  dv__handle_retire(m, sizeof *m, 0, ctx->handles_checked, NULL);
  return rc ? rc : r2;
}

void dv_module_release(dv_module *m) {
  if (!m) return;
  /* the header first: a released handle's other fields are not to be read */
  int r = dv__handle_live(&m->hdr, DV_HANDLE_MODULE) ? atomic_load(&m->refs) : 0;
  do {
    if (r <= 0) {
      dv__handle_report(&m->hdr, DV_HANDLE_MODULE, __func__); /* a double release: nothing changes */
      return;
    }
  } while (!atomic_compare_exchange_weak(&m->refs, &r, r - 1));
  if (r != 1) return;
  dv__handle_close(&m->hdr, DV_HANDLE_MODULE);
  dv_context *ctx = m->ctx;
  /* From now on its kernels are caught if used (the unload itself waits
   * for the next flush). */
  pthread_mutex_lock(&m->lock);
  for (dv_kernel *k = m->kernels; k; k = k->next) atomic_store(&k->magic, DV__KERNEL_DEAD);
  pthread_mutex_unlock(&m->lock);
  atomic_fetch_sub(&ctx->kernels->live_modules, 1);
  dv_status rc = dv__defer_free(ctx, dv__dtor_module, m, NULL, 0);
  if (rc) dv__log(DV_LOG_ERROR, "unloading a kernel module: %s", dv_last_error());
}

int dv_module_from_cache(const dv_module *m) {
  return m && !dv__handle_check(&m->hdr, DV_HANDLE_MODULE, __func__) ? m->from_cache : 0;
}

/* ---- kernels ---------------------------------------------------------------------- */

dv_status dv__kernel_usable(const dv_kernel *k) {
  if (!k) return dv__error(DV_ERR_NULL_ARGUMENT, "the kernel is NULL");
  uint32_t magic = atomic_load(&((dv_kernel *)k)->magic);
  if (magic == DV__KERNEL_LIVE) return DV_OK;
  if (magic == DV__KERNEL_DEAD)
    return dv__error(DV_ERR_MISUSE,
                     "kernel %s is used after the last reference to its module was released "
                     "(dv_module_release); hold it with dv_kernel_retain to keep the module loaded",
                     k->name);
  return dv__error(DV_ERR_MISUSE, "not a kernel (a pointer that is not a dv_kernel, or one long freed)");
}

dv_kernel *dv_kernel_retain(dv_kernel *k) {
  if (!k) return NULL;
  if (dv__kernel_usable(k)) {
    dv__log(DV_LOG_ERROR, "dv_kernel_retain: %s", dv_last_error());
    return k;
  }
  atomic_fetch_add(&k->holds, 1);
  dv_module_retain(k->module);
  return k;
}

void dv_kernel_release(dv_kernel *k) {
  if (!k) return;
  if (dv__kernel_usable(k)) {
    dv__log(DV_LOG_ERROR, "dv_kernel_release: %s", dv_last_error());
    return;
  }
  int h = atomic_load(&k->holds);
  do {
    if (h <= 0) {
      dv__log(DV_LOG_ERROR, "dv_kernel_release: kernel %s has no hold left (dv_kernel_retain)",
              k->name);
      return;
    }
  } while (!atomic_compare_exchange_weak(&k->holds, &h, h - 1));
  dv_module_release(k->module);
}

#ifndef NDEBUG
/* What the driver says of the parameters against the signature devarray read. */
static dv_status dv__cross_check(dv_module *m, dv_kernel *k) {
  dv_context *ctx = m->ctx;
  if (!dv__be_has(ctx->be, DV_BCAP_KERNELS) || !k->sig) return DV_OK;
  dv_bparam bp[3 * DV_BKMAXPARAMS + 2];
  size_t n = 0;
  const char *text = NULL;
  if (ctx->be->kernel_params(ctx->bst, k->bk, bp, sizeof bp / sizeof *bp, &n, &text)) return DV_OK;
  char why[300] = "";
  bool same = true;
  if (text) {
    dv_ksig exported;
    dv_status prc = dv__ksig_parse_list(text, &exported);
    if (prc) return prc;
    same = dv__ksig_same(k->sig, &exported, why, sizeof why);
    dv__ksig_clear(&exported);
  } else {
    same = dv__ksig_lowered_same(k->sig, bp, n, why, sizeof why);
  }
  if (same) return DV_OK;
  return dv__error(DV_ERR_KERNEL_ARGUMENT,
                   "kernel %s: devarray read its parameters from program %s differently from what "
                   "the %s driver reports (%s); this is a devarray defect: please report it",
                   k->name, m->program, ctx->be->name, why);
}
#endif

dv_status dv_module_kernel(dv_module *m, const char *name, dv_kernel **out) {
  DV_CHECK_NULL(out);
  *out = NULL;
  DV_CHECK_NULL(m);
  DV_CHECK_HANDLE(m, DV_HANDLE_MODULE);
  DV_CHECK_NULL(name);
  DV_CHECK_NOT_IN_CALLBACK();
  dv_context *ctx = m->ctx;
  dv_status rc = DV_OK;
  pthread_mutex_lock(&m->lock);
  dv_kernel *k = NULL;
  for (dv_kernel *i = m->kernels; i; i = i->next)
    if (strcmp(i->name, name) == 0) k = i;
  if (!k) {
    dv_bkernel *bk = NULL;
    rc = ctx->be->kernel_get(ctx->bst, m->bm, name, &bk);
    if (!rc) {
      k = dv__calloc(1, sizeof *k);
      char *nm = dv__strdup(name);
      if (!k || !nm) {
        dv__free(k), dv__free(nm);
        k = NULL;
        rc = dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate a kernel");
      } else {
        atomic_init(&k->magic, DV__KERNEL_LIVE);
        atomic_init(&k->holds, 0);
        k->module = m;
        k->bk = bk;
        k->name = nm;
        const dv_ksig *sig = dv__ksig_find(&m->sigs, name);
        if (!sig)
          k->unreadable = "its DV_KERNEL declaration is not in the program's source as written "
                          "(declared through a macro?); devarray checks every launch against the "
                          "declaration, so write DV_KERNEL(name, ...) at file scope";
        else if (sig->ambiguous)
          k->unreadable = "it is declared more than once with different parameter lists, under "
                          "preprocessor conditions devarray cannot evaluate (a name defined "
                          "outside the program?); define the condition with dv_program_define";
        else
          k->sig = sig;
        rc = ctx->be->kernel_attrs(ctx->bst, bk, &k->attrs);
#ifndef NDEBUG
        if (!rc) rc = dv__cross_check(m, k);
#endif
        if (rc) {
          dv__free(k->name);
          dv__free(k);
          k = NULL;
        } else {
          k->next = m->kernels;
          m->kernels = k;
        }
      }
    }
  }
  pthread_mutex_unlock(&m->lock);
  if (k && !k->sig)
    return dv__error(DV_ERR_KERNEL_ARGUMENT, "program %s, kernel %s: %s", m->program, name,
                     k->unreadable);
  *out = k;
  return rc;
}

const char *dv_kernel_name(const dv_kernel *k) { return k ? k->name : ""; }

dv_status dv_kernel_attributes(dv_kernel *k, dv_kernel_attrs *out) {
  DV_CHECK_NULL(out);
  memset(out, 0, sizeof *out);
  DV_CHECK_NULL(k);
  dv_status rc = dv__kernel_usable(k);
  if (rc) return rc;
  *out = k->attrs;
  return DV_OK;
}

int dv_kernel_num_params(const dv_kernel *k) {
  if (!k || atomic_load(&((dv_kernel *)k)->magic) != DV__KERNEL_LIVE || !k->sig) return -1;
  return k->sig->nparams;
}

dv_status dv_kernel_param_info(const dv_kernel *k, int i, dv_kernel_param *out) {
  DV_CHECK_NULL(out);
  memset(out, 0, sizeof *out);
  DV_CHECK_NULL(k);
  dv_status rc = dv__kernel_usable(k);
  if (rc) return rc;
  if (i < 0 || i >= k->sig->nparams)
    return dv__error(DV_ERR_INVALID_ARGUMENT, "kernel %s has %d parameters; asked for parameter %d",
                     k->name, k->sig->nparams, i);
  const dv_kparam *p = &k->sig->params[i];
  out->kind = p->kind;
  out->type = p->type.pointer ? DV_TYPE_COUNT : p->type.id;
  out->is_const = p->is_const;
  out->name = p->name;
  out->decl = p->decl;
  return DV_OK;
}

/* ---- constants ------------------------------------------------------------------ */

/* A constant write, as an op of the submission path. */
typedef struct dv_kwrite {
  dv_bmodule *bm;
  size_t offset;
  dv_memref from;
  size_t bytes;
} dv_kwrite;
static dv_status dv__constant_run(dv_context *ctx, dv_stream *stream, dv_bstream *bs, unsigned flags,
                                  const dv__op *op, dv__op_tally *t) {
  (void)stream, (void)flags, (void)t;
  const dv_kwrite *w = op->arg;
  return ctx->be->constant_write(ctx->bst, w->bm, bs, w->offset, w->from, w->bytes);
}

dv_status dv_module_set_constant(dv_module *m, const char *name, const dv_array *src,
                                 dv_stream *stream) {
  DV_CHECK_NULL(m);
  DV_CHECK_HANDLE(m, DV_HANDLE_MODULE);
  DV_CHECK_NULL(name);
  DV_CHECK_NULL(src);
  DV_CHECK_ARRAY(src);
  DV_CHECK_NOT_IN_CALLBACK();
  dv_context *ctx = m->ctx;
  const dv_kconst *c = NULL;
  for (size_t i = 0; i < m->nconsts; i++)
    if (strcmp(m->consts[i].name, name) == 0) c = &m->consts[i];
  if (!c) return dv__error(DV_ERR_INVALID_ARGUMENT, "the module has no constant array %s", name);
  if (stream) DV_CHECK_HANDLE(stream, DV_HANDLE_STREAM);
  if (src->alloc->ctx != ctx || (stream && stream->ctx != ctx))
    return dv__error(DV_ERR_BACKEND_MISMATCH, "constant %s: array or stream of another context", name);
  if (src->dtype->id != c->type)
    return dv__error(DV_ERR_DTYPE_MISMATCH, "constant %s has dtype %s; the array has %s", name,
                     dv_dtype_name(dv_dtype_get(c->type)), src->dtype->name);
  int64_t n = dv_array_size(src);
  if (n != c->count)
    return dv__error(DV_ERR_SHAPE_MISMATCH, "constant %s has %lld elements; the array has %lld",
                     name, (long long)c->count, (long long)n);
  dv_status rc;
  if (stream && stream->capture) { /* a graph reads the array at each launch, into a module it keeps */
    if (dv__is_host_side(src) || !dv_array_is_c_contiguous(src))
      return dv__capture_refused("a constant upload from host memory or from an array that is not C-contiguous");
    rc = dv__capture_keep(stream->capture, dv_module_retain(m), dv__keep_module);
    if (rc) {
      dv_module_release(m);
      return rc;
    }
  }
  if (dv_array_is_c_contiguous(src)) {
    dv_memref r = {0};
    if (dv__is_host_side(src))
      r.ptr = (char *)src->alloc->host + src->offset;
    else
      r.buf = src->alloc->buf, r.offset = src->alloc->buf_offset + (size_t)src->offset;
    dv_kwrite w = {m->bm, c->offset, r, (size_t)n * c->itemsize};
    dv_stream *after = dv__alloc_after(ctx, src->alloc, stream);
    dv__op op = {dv__constant_run, NULL, false, false, NULL, NULL, &w, DV_OP_STOP_ON_ERROR, &after, after ? 1 : 0};
    return dv__stream_submit(ctx, stream, &op);
  }
  /* Any other layout: a dense copy first (device or host, as the source),
   * in the same stream order.  The write may read the copy later, so the
   * stream is waited for before the copy goes. */
  dv_array *tmp = NULL;
  rc = dv_array_copy_new(src, 'C', stream, &tmp);
  if (rc) return rc;
  dv_memref r = {0};
  if (dv__is_host_side(tmp))
    r.ptr = (char *)tmp->alloc->host + tmp->offset;
  else
    r.buf = tmp->alloc->buf, r.offset = tmp->alloc->buf_offset + (size_t)tmp->offset;
  dv_kwrite w = {m->bm, c->offset, r, (size_t)n * c->itemsize};
  dv__op op = {dv__constant_run, NULL, false, false, NULL, NULL, &w, DV_OP_WAIT, NULL, 0};
  rc = dv__stream_submit(ctx, stream, &op);
  dv_array_release(tmp);
  return rc;
}

/* ---- launches --------------------------------------------------------------------- */

#define DV__KMAXARGS 64

static uint32_t dv__one(uint32_t v) { return v ? v : 1; }

static dv_status dv__check_config(const dv_kernel *k, const dv_launch_config *cfg,
                                  uint32_t grid[3], uint32_t block[3]) {
  const dv_klimits *L = &k->module->limits;
  const char *axis = "xyz";
  grid[0] = dv__one(cfg->grid.x), grid[1] = dv__one(cfg->grid.y), grid[2] = dv__one(cfg->grid.z);
  block[0] = dv__one(cfg->block.x), block[1] = dv__one(cfg->block.y),
  block[2] = dv__one(cfg->block.z);
  uint64_t threads = (uint64_t)block[0] * block[1]; /* < 2^64 */
  if (__builtin_mul_overflow(threads, (uint64_t)block[2], &threads)) threads = UINT64_MAX;
  for (int d = 0; d < 3; d++) {
    if (L->max_block[d] && block[d] > L->max_block[d])
      return dv__error(DV_ERR_LAUNCH_CONFIG,
                       "kernel %s: block.%c = %u exceeds the device's limit of %u threads in %c",
                       k->name, axis[d], block[d], L->max_block[d], axis[d]);
    /* Block indices are ints in the dialect, whatever the device allows. */
    uint32_t gmax = L->max_grid[d] && L->max_grid[d] < INT32_MAX ? L->max_grid[d] : INT32_MAX;
    if (grid[d] > gmax)
      return dv__error(DV_ERR_LAUNCH_CONFIG,
                       "kernel %s: grid.%c = %u exceeds the device's limit of %u blocks in %c",
                       k->name, axis[d], grid[d], gmax, axis[d]);
  }
  if (L->max_threads_per_block && threads > L->max_threads_per_block)
    return dv__error(DV_ERR_LAUNCH_CONFIG,
                     "kernel %s: a block of %llu threads exceeds the device's limit of %u threads "
                     "per block", k->name, (unsigned long long)threads, L->max_threads_per_block);
  if (k->attrs.max_threads_per_block > 0 && threads > (uint64_t)k->attrs.max_threads_per_block)
    return dv__error(DV_ERR_LAUNCH_CONFIG,
                     "kernel %s: a block of %llu threads exceeds this kernel's limit of %d threads "
                     "per block (its registers or local memory)", k->name,
                     (unsigned long long)threads, k->attrs.max_threads_per_block);
  size_t shared_limit = L->max_shared_per_block_optin > L->max_shared_per_block
                            ? L->max_shared_per_block_optin
                            : L->max_shared_per_block;
  size_t stat = k->attrs.static_shared_bytes;
  if (shared_limit &&
      (cfg->dynamic_shared > shared_limit || stat + cfg->dynamic_shared > shared_limit))
    return dv__error(DV_ERR_LAUNCH_CONFIG,
                     "kernel %s: %zu bytes of static plus %zu bytes of dynamic shared memory exceed "
                     "the device's limit of %zu bytes per block", k->name, stat,
                     cfg->dynamic_shared, shared_limit);
  if (k->attrs.max_dynamic_shared_bytes && cfg->dynamic_shared > k->attrs.max_dynamic_shared_bytes)
    return dv__error(DV_ERR_LAUNCH_CONFIG,
                     "kernel %s: %zu bytes of dynamic shared memory exceed this kernel's limit of "
                     "%zu bytes", k->name, cfg->dynamic_shared, k->attrs.max_dynamic_shared_bytes);
  return DV_OK;
}

/* Host memory a launch copies for the kernel (pageable, pinned, registered). */
static bool dv__copied_kind(const dv_array *arr) {
  return arr->alloc->kind == DV_MEM_HOST || arr->alloc->kind == DV_MEM_PINNED;
}

static bool dv__is_smart_kind(dv_arg_kind kind) {
  return kind == DV_ARG_SMART || kind == DV_ARG_SMART_VIEW;
}

/* Check one argument; nothing is made or changed. */
static dv_status dv__check_arg(const dv_kernel *k, dv_context *ctx, size_t i, const dv_arg *a) {
  switch (a->kind) {
    case DV_ARG_SCALAR:
      if (!dv__kernel_ctype(a->type))
        return dv__error(DV_ERR_KERNEL_ARGUMENT,
                         "kernel %s, argument %zu: scalar dtype %d is not supported in kernels",
                         k->name, i, (int)a->type);
      return DV_OK; /* (value NULL: the value is in a->scalar) */
    case DV_ARG_ARRAY:
    case DV_ARG_VIEW:
    case DV_ARG_SMART:
    case DV_ARG_SMART_VIEW:
      break;
    default:
      return dv__error(DV_ERR_KERNEL_ARGUMENT, "kernel %s, argument %zu: unknown kind %d",
                       k->name, i, (int)a->kind);
  }
  if ((unsigned)a->dir > (unsigned)DV_DIR_INOUT)
    return dv__error(DV_ERR_KERNEL_ARGUMENT, "kernel %s, argument %zu: unknown direction %d",
                     k->name, i, (int)a->dir);
  int ndim;
  if (dv__is_smart_kind(a->kind)) {
    if (!a->smart)
      return dv__error(DV_ERR_NULL_ARGUMENT, "kernel %s, argument %zu: smart array is NULL", k->name, i);
    if (dv__smart_context(a->smart) != ctx)
      return dv__error(DV_ERR_BACKEND_MISMATCH,
                       "kernel %s, argument %zu: the smart array belongs to another context", k->name, i);
    ndim = dv_smart_ndim(a->smart);
  } else {
    const dv_array *arr = a->array;
    if (!arr)
      return dv__error(DV_ERR_NULL_ARGUMENT, "kernel %s, argument %zu: array is NULL", k->name, i);
    if (dv__handle_check(&arr->hdr, DV_HANDLE_ARRAY, "dv_kernel_launch"))
      return dv__error(DV_ERR_MISUSE, "dv_kernel_launch: kernel %s, argument %zu: array was released", k->name, i);
    if (arr->alloc->ctx != ctx)
      return dv__error(DV_ERR_BACKEND_MISMATCH,
                       "kernel %s, argument %zu: the array belongs to another context", k->name, i);
    if (!dv__copied_kind(arr) && !arr->alloc->buf && dv_array_size(arr) > 0)
      return dv__error(DV_ERR_MISUSE,
                       "kernel %s, argument %zu: the array has no device memory (a device view of "
                       "host memory whose mapped scope has ended)", k->name, i);
    if (arr->alloc->opaque) {
      char what[96];
      snprintf(what, sizeof what, "kernel %s, argument %zu", k->name, i);
      return dv__opaque_error(arr, what);
    }
    ndim = arr->ndim;
  }
  if ((a->kind == DV_ARG_VIEW || a->kind == DV_ARG_SMART_VIEW) && ndim > DV_BKVIEW_MAXDIMS)
    return dv__error(DV_ERR_KERNEL_ARGUMENT,
                     "kernel %s, argument %zu: a DV_VIEW array has at most %d dimensions; "
                     "this one has %d", k->name, i, DV_BKVIEW_MAXDIMS, ndim);
  return DV_OK;
}

/* Release the temporaries of a launch (through the deferred path: queued
 * work that uses them runs first). */
static void dv__release_temps(dv_array **tmp, size_t n) {
  for (size_t i = 0; i < n; i++) dv_array_release(tmp[i]), tmp[i] = NULL;
}

/* Queue the kernel itself on its stream with its lowered arguments
 * (`use[i]` is the device-side array of argument i). */
static dv_status dv__launch_lowered(dv_kernel *k, const dv_launch_config *cfg, const uint32_t grid[3],
                                    const uint32_t block[3], size_t nargs, const dv_arg *args,
                                    dv_array *const *use);

static dv_status dv__kernel_launch(dv_kernel *k, const dv_launch_config *cfg, size_t nargs, const dv_arg *args);
/* dv__kernel_launch in an NVTX range (ranges on: nvtx.c). */
static __attribute__((noinline, cold)) dv_status dv__kernel_launch_ranged(dv_kernel *k, const dv_launch_config *cfg,
                                                                         size_t nargs, const dv_arg *args) {
  dv__nvtx_push("devarray launch");
  dv_status rc = dv__kernel_launch(k, cfg, nargs, args);
  dv__nvtx_pop();
  return rc;
}
dv_status dv_kernel_launch(dv_kernel *k, const dv_launch_config *cfg, size_t nargs,
                           const dv_arg *args) {
  if (DV_NVTX_RANGES()) return dv__kernel_launch_ranged(k, cfg, nargs, args);
  return dv__kernel_launch(k, cfg, nargs, args);
}

static inline __attribute__((always_inline)) dv_status dv__kernel_launch(dv_kernel *k, const dv_launch_config *cfg,
                                                                        size_t nargs, const dv_arg *args) {
  DV_CHECK_NULL(k);
  DV_CHECK_NULL(cfg);
  DV_CHECK_NOT_IN_CALLBACK();
  dv_status rc = dv__kernel_usable(k);
  if (rc) return rc;
  if (nargs && !args) return dv__error(DV_ERR_NULL_ARGUMENT, "args is NULL with nargs = %zu", nargs);
  dv_context *ctx = k->module->ctx;
  if (cfg->stream) DV_CHECK_HANDLE(cfg->stream, DV_HANDLE_STREAM);
  if (cfg->stream && cfg->stream->ctx != ctx)
    return dv__error(DV_ERR_BACKEND_MISMATCH, "kernel %s: the stream belongs to another context",
                     k->name);
  uint32_t grid[3], block[3];
  rc = dv__check_config(k, cfg, grid, block);
  if (rc) return rc;
  if (nargs > DV__KMAXARGS)
    return dv__error(DV_ERR_KERNEL_ARGUMENT, "kernel %s: %zu arguments; at most %d are supported",
                     k->name, nargs, DV__KMAXARGS);
  /* Every argument is checked before anything is allocated, copied or queued. */
  bool moves = false;
  for (size_t i = 0; i < nargs; i++) {
    rc = dv__check_arg(k, ctx, i, &args[i]);
    if (rc) return rc;
    if (dv__is_smart_kind(args[i].kind) ||
        ((args[i].kind == DV_ARG_ARRAY || args[i].kind == DV_ARG_VIEW) && dv__copied_kind(args[i].array)))
      moves = true;
  }
  /* ... and against the kernel's declaration: the same checks, statuses and
   * messages on every backend (contract.c). */
  rc = dv__check_contract(k, nargs, args);
  if (rc) return rc;
  dv_array *use[DV__KMAXARGS];
  for (size_t i = 0; i < nargs; i++) use[i] = (dv_array *)args[i].array;
  if (cfg->stream && cfg->stream->capture) {
    /* A graph launches the kernel again and again: host and smart arrays,
     * copied in and out around each call through temporaries, cannot be
     * part of it; the module stays loaded while the graph lives. */
    if (moves)
      return dv__capture_refused("a launch with a host or smart array argument (copied through a temporary "
                                 "around the call; pass device, mapped or managed arrays)");
    rc = dv__capture_keep(cfg->stream->capture, dv_module_retain(k->module), dv__keep_module);
    if (rc) {
      dv_module_release(k->module);
      return rc;
    }
  }
  if (!moves) return dv__launch_lowered(k, cfg, grid, block, nargs, args, use);

  /* Host and smart arrays.  First every device array they need is made, so
   * that running out of memory queues nothing; then the copies in, the
   * kernel and the copies back go on one stream, in that order (a
   * synchronous launch uses the default stream and waits for it at the
   * end). */
  dv_array *tmp[DV__KMAXARGS] = {0};
  dv_stream *cs = cfg->stream ? cfg->stream : dv__default_stream(ctx);
  for (size_t i = 0; i < nargs && !rc; i++) {
    const dv_arg *a = &args[i];
    if (dv__is_smart_kind(a->kind))
      rc = dv__smart_reserve(a->smart, cfg->stream);
    else if ((a->kind == DV_ARG_ARRAY || a->kind == DV_ARG_VIEW) && dv__copied_kind(a->array))
      /* DV_ARRAY reads element i at base + i: a C-ordered temporary, whatever
       * the host array's layout; DV_VIEW gets the host array's own order. */
      rc = a->kind == DV_ARG_ARRAY
               ? dv_device_array(ctx, a->array->ndim, a->array->shape, a->array->dtype, NULL, 'C',
                                 cfg->stream, &tmp[i])
               : dv_device_array_like(a->array, cfg->stream, &tmp[i]);
  }
  for (size_t i = 0; i < nargs && !rc; i++) {
    const dv_arg *a = &args[i];
    if (dv__is_smart_kind(a->kind)) {
      rc = dv__smart_for_launch(a->smart, cs, a->dir != DV_DIR_OUT, &use[i]);
    } else if (tmp[i]) {
      use[i] = tmp[i];
      if (a->dir != DV_DIR_OUT) rc = dv_array_copy(tmp[i], a->array, cs);
    }
  }
  if (!rc) {
    dv_launch_config c2 = *cfg;
    c2.stream = cs;
    rc = dv__launch_lowered(k, &c2, grid, block, nargs, args, use);
    /* The kernel is queued: its results come back, whatever fails next. */
    for (size_t i = 0; !rc && i < nargs; i++) {
      const dv_arg *a = &args[i];
      if (dv__is_smart_kind(a->kind) && a->dir != DV_DIR_IN) dv__smart_device_written(a->smart);
    }
    dv_status back = DV_OK;
    for (size_t i = 0; !rc && i < nargs; i++) {
      if (!tmp[i] || args[i].dir == DV_DIR_IN) continue;
      dv_status r2 = dv_array_copy((dv_array *)args[i].array, tmp[i], cs);
      if (r2 && !back) back = r2;
    }
    if (!rc) rc = back;
  }
  dv__release_temps(tmp, nargs);
  dv_status r2 = dv__sync_if_null(ctx, cfg->stream);
  return rc ? rc : r2;
}

/* The kernel itself, as an op of the submission path. */
typedef struct dv_klaunch {
  dv_bkernel *bk;
  const dv_blaunch *bl;
} dv_klaunch;
static dv_status dv__launch_run(dv_context *ctx, dv_stream *stream, dv_bstream *bs, unsigned flags,
                                const dv__op *op, dv__op_tally *t) {
  (void)stream, (void)t;
  const dv_klaunch *kl = op->arg;
  dv_blaunch bl = *kl->bl;
  bl.flags = flags; /* DV_COPY_SYNC for a synchronous launch (dv__stream_submit) */
  return ctx->be->launch(ctx->bst, bs, kl->bk, &bl);
}

static dv_status dv__launch_lowered(dv_kernel *k, const dv_launch_config *cfg, const uint32_t grid[3],
                                    const uint32_t block[3], size_t nargs, const dv_arg *args,
                                    dv_array *const *use) {
  dv_context *ctx = k->module->ctx;
  /* Lower the arguments: each array becomes up to three backend arguments. */
  dv_barg bargs[3 * DV__KMAXARGS];
  int64_t offsets[DV__KMAXARGS];
  dv_bkview views[DV__KMAXARGS];
  dv_barray spans[DV__KMAXARGS]; /* for the host simulator's access checks */
  size_t nb = 0;
  dv_stream *after[DV__KMAXARGS]; /* the arrays' allocation streams to order (array.h) */
  size_t nafter = 0;
  for (size_t i = 0; i < nargs; i++) {
    const dv_arg *a = &args[i];
    after[i] = NULL;
    if (a->kind == DV_ARG_SCALAR) {
      bargs[nb++] = (dv_barg){DV_BARG_VALUE, a->type, NULL, dv__arg_value(a),
                              dv_dtype_itemsize(dv_dtype_get(a->type))};
      continue;
    }
    const dv_array *arr = use[i];
    void *buf = NULL;
    switch (arr->alloc->kind) {
      case DV_MEM_DEVICE:
      case DV_MEM_MANAGED:
      case DV_MEM_MAPPED:
        buf = arr->alloc->buf;
        break;
      default:
        break;
    }
    offsets[i] = (int64_t)arr->alloc->buf_offset + arr->offset;
    if ((after[i] = dv__alloc_after(ctx, arr->alloc, cfg->stream))) nafter = nargs;
    dv_barray *sp = &spans[i];
    sp->itemsize = arr->dtype->itemsize;
    if (dv__layout_extent(arr->ndim, arr->shape, arr->strides, (int64_t)sp->itemsize, &sp->lo,
                          &sp->hi))
      sp->itemsize = 0, sp->lo = sp->hi = 0; /* not known (the backend then takes the buffer) */
    bargs[nb++] = (dv_barg){DV_BARG_BUFFER, DV_BOOL, buf, sp, sizeof *sp};
    bargs[nb++] = (dv_barg){DV_BARG_VALUE, DV_INT64, NULL, &offsets[i], sizeof(int64_t)};
    if (a->kind == DV_ARG_VIEW || a->kind == DV_ARG_SMART_VIEW) {
      dv_bkview *v = &views[i];
      memset(v, 0, sizeof *v);
      v->ndim = arr->ndim;
      for (int d = 0; d < arr->ndim; d++) v->shape[d] = arr->shape[d], v->strides[d] = arr->strides[d];
      bargs[nb++] = (dv_barg){DV_BARG_VIEW, DV_BOOL, NULL, v, sizeof *v};
    }
  }
  dv_blaunch bl;
  memcpy(bl.grid, grid, sizeof bl.grid);
  memcpy(bl.block, block, sizeof bl.block);
  bl.dynamic_shared = cfg->dynamic_shared;
  bl.nargs = nb;
  bl.args = bargs;
  bl.flags = 0;
  /* Queued, then waited for (a synchronous launch) or followed by the
   * streams a stream-ordered manager gave the arrays' memory to (array.h). */
  dv_klaunch kl = {k->bk, &bl};
  dv__op op = {dv__launch_run, NULL, false, false, NULL, NULL, &kl, DV_OP_STOP_ON_ERROR, after, nafter};
  return dv__stream_submit(ctx, cfg->stream, &op);
}
