/*
 * Array objects: reference-counted descriptors (dtype, shape, strides,
 * offset) over one shared, reference-counted allocation.  Views share the
 * allocation; the last reference to an allocation queues its free.
 */
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "array.h"

/* ---- allocations ------------------------------------------------------------ */

/*
 * Allocation records are recycled through a small process-wide cache: an
 * array made and released per call (dv_to_device) would otherwise pay
 * malloc and free of its record each time, and the pending-deallocation
 * queue frees records in batches larger than glibc's per-thread cache keeps
 * (issue 13).  Records hold nothing once released.  Not under
 * AddressSanitizer, so that a use of a released record is still caught.
 */
#if defined(__SANITIZE_ADDRESS__)
#define DV_ALLOC_CACHE 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define DV_ALLOC_CACHE 0
#endif
#endif
#ifndef DV_ALLOC_CACHE
#define DV_ALLOC_CACHE 32
#endif
#if DV_ALLOC_CACHE
static atomic_flag dv__alloc_cache_m = ATOMIC_FLAG_INIT;
static dv_alloc *dv__alloc_cache[DV_ALLOC_CACHE];
static int dv__alloc_cached;
#endif

static void dv__alloc_free(dv_alloc *a) {
#if DV_ALLOC_CACHE
  while (atomic_flag_test_and_set_explicit(&dv__alloc_cache_m, memory_order_acquire)) sched_yield();
  if (dv__alloc_cached < DV_ALLOC_CACHE) {
    dv__alloc_cache[dv__alloc_cached++] = a;
    a = NULL;
  }
  atomic_flag_clear_explicit(&dv__alloc_cache_m, memory_order_release);
#endif
  dv__free(a);
}

static dv_alloc *dv__alloc_get(void) {
  dv_alloc *a = NULL;
#if DV_ALLOC_CACHE
  while (atomic_flag_test_and_set_explicit(&dv__alloc_cache_m, memory_order_acquire)) sched_yield();
  if (dv__alloc_cached > 0) a = dv__alloc_cache[--dv__alloc_cached];
  atomic_flag_clear_explicit(&dv__alloc_cache_m, memory_order_release);
  if (a) {
    memset(a, 0, sizeof *a);
    return a;
  }
#endif
  return dv__calloc(1, sizeof *a);
}

/* A queued device free: the allocation record carries the block, its size
 * and the stream it belongs to. */
static dv_status dv__dtor_device(dv_context *ctx, void *handle, void *aux) {
  (void)aux;
  dv_alloc *a = handle;
  dv_block blk = {a->buf, a->buf_offset, a->mm_handle};
  /* Exported to a consumer that may have queued work on streams of its
   * own (DLPack), which no event of ours can follow: a manager that reuses
   * the block in stream order gets it once the device has finished
   * everything queued (the memory is freed whatever that returns). */
  dv_status wrc = DV_OK;
  if (atomic_load_explicit(&a->outside, memory_order_relaxed) && dv__mm_stream_ordered(ctx))
    wrc = ctx->be->stream_sync(ctx->bst, NULL);
  dv_status rc = ctx->mm.free(ctx->mm_state, blk, a->bytes, a->stream);
  if (!rc) rc = wrc;
  dv__stats_sub(ctx, DV_STAT_DEVICE, a->bytes);
  dv__stream_irelease(a->stream);
  dv__alloc_free(a);
  return rc;
}

static dv_status dv__dtor_managed(dv_context *ctx, void *buf, void *aux) {
  size_t bytes = (size_t)(uintptr_t)aux;
  dv_status rc = ctx->be->mem_free(ctx->bst, buf);
  dv__stats_sub(ctx, DV_STAT_MANAGED, bytes);
  return rc;
}

static dv_status dv__dtor_pinned(dv_context *ctx, void *handle, void *aux) {
  return dv__host_free(ctx, handle, (size_t)(uintptr_t)aux, 0);
}

static dv_status dv__dtor_mapped(dv_context *ctx, void *handle, void *aux) {
  return dv__host_free(ctx, handle, (size_t)(uintptr_t)aux, DV_HOSTMEM_MAPPED);
}

static void dv__unregister_now(dv_alloc *a) {
  dv_status rc = dv__host_unregister(a->ctx, a->reg_handle, a->bytes);
  if (rc) dv__log(DV_LOG_ERROR, "unregistering host memory failed: %s", dv_last_error());
  a->reg_handle = NULL;
  a->reg_buf = NULL;
}

/* Foreign memory (dv_device_array_wrap, array/foreign.c) goes back to its
 * owner through the same queue as device frees.  Runs at a flush: queued
 * work may still read the memory, so wait for the device before handing it
 * back to its owner.  The allocation record is the queue entry. */
static dv_status dv__dtor_foreign(dv_context *ctx, void *handle, void *aux) {
  (void)aux;
  dv_alloc *a = handle;
  dv_status rc = ctx->be->stream_sync(ctx->bst, NULL);
  dv_status r2 = a->buf ? ctx->be->buffer_unwrap(ctx->bst, a->buf) : DV_OK;
  if (a->release) a->release(a->release_user);
  dv__free(a);
  return rc ? rc : r2;
}

static dv_status dv__foreign_release(dv_alloc *a) {
  dv_context *ctx = a->ctx;
  pthread_mutex_destroy(&a->reg_lock);
  atomic_fetch_sub(&ctx->live_allocs, 1);
  return dv__defer_free(ctx, dv__dtor_foreign, a, NULL, 0);
}

void dv__alloc_release(dv_alloc *a) {
  if (!a || atomic_fetch_sub(&a->refs, 1) != 1) return;
  dv_context *ctx = a->ctx;
  if (a->reg_count > 0) {
    a->reg_count = 0;
    dv__unregister_now(a);
  }
  if (a->foreign) {
    dv_status frc = dv__foreign_release(a); /* it owns the record now */
    if (frc) dv__log(DV_LOG_ERROR, "releasing wrapped memory: %s", dv_last_error());
    return;
  }
  if (a->owned) {
    dv_status rc = DV_OK;
    switch (a->kind) {
      case DV_MEM_DEVICE:
        if (a->buf) {
          /* The record itself goes into the queue (it knows block and stream). */
          pthread_mutex_destroy(&a->reg_lock);
          atomic_fetch_sub(&ctx->live_allocs, 1);
          rc = dv__defer_free(ctx, dv__dtor_device, a, NULL, a->bytes);
          if (rc) dv__log(DV_LOG_ERROR, "releasing memory: %s", dv_last_error());
          return;
        }
        break;
      case DV_MEM_MANAGED:
        if (a->buf)
          rc = dv__defer_free(ctx, dv__dtor_managed, a->buf, (void *)(uintptr_t)a->bytes, a->bytes);
        break;
      case DV_MEM_PINNED:
        rc = dv__defer_free(ctx, dv__dtor_pinned, a->handle, (void *)(uintptr_t)a->bytes, 0);
        break;
      case DV_MEM_MAPPED:
        rc = dv__defer_free(ctx, dv__dtor_mapped, a->handle, (void *)(uintptr_t)a->bytes, a->bytes);
        break;
      case DV_MEM_HOST:
        dv__free(a->host);
        break;
    }
    if (rc) dv__log(DV_LOG_ERROR, "releasing memory: %s", dv_last_error());
  }
  if (a->keep) dv_array_release(a->keep);
  dv__stream_irelease(a->stream);
  pthread_mutex_destroy(&a->reg_lock);
  atomic_fetch_sub(&ctx->live_allocs, 1);
  dv__alloc_free(a);
}

dv_alloc *dv__alloc_new(dv_context *ctx, dv_memory_kind kind) {
  dv_alloc *a = dv__alloc_get();
  if (!a) return NULL;
  atomic_store(&a->refs, 1);
  a->ctx = ctx;
  a->kind = kind;
  pthread_mutex_init(&a->reg_lock, NULL);
  atomic_fetch_add(&ctx->live_allocs, 1);
  return a;
}

/* Free memory obtained for an allocation that never got a descriptor. */
static void dv__alloc_abandon(dv_alloc *a) { dv__alloc_release(a); }

dv_status dv__array_new(dv_alloc *alloc, const dv_dtype *dt, int ndim, const int64_t *shape,
                        const int64_t *strides, int64_t offset, dv_array **out) {
  dv_array *a = dv__malloc(sizeof *a + 2 * (size_t)ndim * sizeof(int64_t));
  if (!a) {
    *out = NULL;
    return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate an array descriptor");
  }
  atomic_store(&a->refs, 1);
  atomic_fetch_add(&alloc->refs, 1);
  a->alloc = alloc;
  a->dtype = dv_dtype_retain(dt);
  a->ndim = ndim;
  a->offset = offset;
  a->shape = a->dims_;
  a->strides = a->dims_ + ndim;
  for (int i = 0; i < ndim; i++) a->shape[i] = shape[i], a->strides[i] = strides[i];
  atomic_fetch_add(&alloc->ctx->live_arrays, 1);
  dv__stats_add(alloc->ctx, DV_STAT_ARRAYS, 1);
  *out = a;
  return DV_OK;
}

dv_array *dv_array_retain(dv_array *a) {
  if (a) atomic_fetch_add(&a->refs, 1);
  return a;
}

void dv_array_release(dv_array *a) {
  if (!a || atomic_fetch_sub(&a->refs, 1) != 1) return;
  dv_context *ctx = a->alloc->ctx;
  dv_dtype_release(a->dtype);
  dv__alloc_release(a->alloc);
  dv__stats_sub(ctx, DV_STAT_ARRAYS, 1);
  atomic_fetch_sub(&ctx->live_arrays, 1);
  dv__free(a);
}

/* Validate (ndim, shape, dtype, strides, order) and compute the strides,
 * the allocation size and the offset of element 0. */
dv_status dv__check_layout(int ndim, const int64_t *shape, const dv_dtype *dtype,
                                  const int64_t *strides, char order, int64_t *st,
                                  int64_t *alloc_bytes, int64_t *offset) {
  if (!dtype) return dv__error(DV_ERR_NULL_ARGUMENT, "dtype is NULL");
  if (ndim < 0 || ndim > DV_MAXDIMS)
    return dv__error(DV_ERR_BAD_SHAPE, "ndim %d is outside 0..%d", ndim, DV_MAXDIMS);
  if (ndim > 0 && !shape) return dv__error(DV_ERR_NULL_ARGUMENT, "shape is NULL with ndim %d", ndim);
  if (dtype->itemsize == 0) return dv__error(DV_ERR_BAD_DTYPE, "dtype has itemsize 0");
  dv_status rc = dv__check_order(order);
  if (rc) return rc;
  int64_t size;
  rc = dv__layout_size(ndim, shape, &size);
  if (rc) return rc;
  int64_t isz = (int64_t)dtype->itemsize, nbytes;
  if (dv__mul_overflow(size, isz, &nbytes))
    return dv__error(DV_ERR_OVERFLOW, "%lld elements of %lld bytes overflow", (long long)size, (long long)isz);
  /* The dense layout of the shape must be expressible whatever the strides:
   * its non-zero extents times the itemsize fit int64_t, even beside a zero
   * extent (NumPy's rule; copies and dense views of this array rely on it). */
  rc = dv__layout_dense(ndim, shape, isz, order, st);
  if (rc) return rc;
  if (!strides) {
    *alloc_bytes = nbytes;
    *offset = 0;
    return DV_OK;
  }
  int64_t al = (int64_t)dtype->alignment;
  for (int i = 0; i < ndim; i++) {
    if (strides[i] % al != 0)
      return dv__error(DV_ERR_BAD_STRIDES,
                       "stride %lld of dimension %d is not a multiple of the %s alignment %lld",
                       (long long)strides[i], i, dtype->name, (long long)al);
    st[i] = strides[i];
  }
  int64_t lo, hi, span;
  rc = dv__layout_extent(ndim, shape, st, isz, &lo, &hi);
  if (rc) return rc;
  if (lo == INT64_MIN || dv__add_overflow(hi, -lo, &span))
    return dv__error(DV_ERR_OVERFLOW, "the strides' byte span overflows");
  *alloc_bytes = span;
  *offset = -lo;
  return DV_OK;
}

dv_status dv__array_create(dv_context *ctx, dv_memory_kind kind, int ndim, const int64_t *shape,
                           const dv_dtype *dtype, const int64_t *strides, char order,
                           unsigned flags, dv_stream *stream, dv_array **out) {
  int64_t st[DV_MAXDIMS], bytes = 0, offset = 0;
  dv_status rc = dv__check_layout(ndim, shape, dtype, strides, order, st, &bytes, &offset);
  if (rc) return rc;
  dv_alloc *a = dv__alloc_new(ctx, kind);
  if (!a) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate an allocation record");
  a->bytes = (size_t)bytes;
  a->owned = true;
  switch (kind) {
    case DV_MEM_DEVICE:
      if (bytes > 0) {
        dv_block blk;
        rc = dv__device_alloc(ctx, (size_t)bytes, stream, &blk);
        a->buf = blk.buf;
        a->buf_offset = blk.offset;
        a->mm_handle = blk.handle;
        /* The stream its free is ordered after; the per-thread default
         * stream too (the pool keeps it apart: issue 13 #5). */
        if (!rc && stream && (!stream->is_default || stream == ctx->per_thread_stream))
          a->stream = dv__stream_iretain(stream);
      }
      if (!rc) dv__stats_add(ctx, DV_STAT_DEVICE, (uint64_t)bytes);
      break;
    case DV_MEM_HOST:
      a->host = dv__malloc((size_t)bytes);
      if (!a->host) rc = dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate %lld bytes of host memory", (long long)bytes);
      break;
    case DV_MEM_PINNED:
    case DV_MEM_MAPPED: {
      unsigned hf = 0;
      if (kind == DV_MEM_MAPPED) {
        hf |= DV_HOSTMEM_MAPPED;
        if (flags & DV_MAPPED_PORTABLE) hf |= DV_HOSTMEM_PORTABLE;
        if (flags & DV_MAPPED_WRITECOMBINED) hf |= DV_HOSTMEM_WC;
      }
      rc = dv__host_alloc(ctx, (size_t)bytes, hf, &a->handle, &a->host, kind == DV_MEM_MAPPED ? &a->buf : NULL);
      break;
    }
    case DV_MEM_MANAGED:
      if (!ctx->be->managed_alloc) {
        rc = dv__error(DV_ERR_NOT_SUPPORTED, "managed memory is not supported by backend %s", ctx->be->name);
        break;
      }
      if (bytes > 0) {
        rc = ctx->be->managed_alloc(ctx->bst, (size_t)bytes, (int)(flags & 1u), &a->buf);
        if (rc == DV_ERR_OUT_OF_MEMORY) { /* Numba: flush the queue and retry once */
          dv__flush(ctx);
          rc = ctx->be->managed_alloc(ctx->bst, (size_t)bytes, (int)(flags & 1u), &a->buf);
        }
      }
      if (!rc) {
        a->host = a->buf; /* one address for host and device */
        dv__stats_add(ctx, DV_STAT_MANAGED, (uint64_t)bytes);
      }
      break;
  }
  if (rc) {
    a->owned = false; /* nothing to free */
    dv__alloc_abandon(a);
    return rc;
  }
  rc = dv__array_new(a, dtype, ndim, shape, st, offset, out);
  dv__alloc_release(a); /* the descriptor holds it now, or it goes */
  return rc;
}

/* A stream argument must belong to the context the work runs on.  Every
 * entry point that takes one checks it before it allocates, queues or
 * retains anything, so a refused call leaves nothing behind (a pending free
 * holding the foreign stream, a pool record attached to it). */
static dv_status dv__check_stream(const dv_context *ctx, const dv_stream *stream) {
  if (stream && stream->ctx != ctx)
    return dv__error(DV_ERR_BACKEND_MISMATCH, "the stream belongs to another context");
  return DV_OK;
}

/* A device view whose memory is gone (a mapped scope that has ended) is bad
 * input; entry points that would allocate for it check this first, so that
 * the refusal changes nothing.  Size-0 arrays have no memory to lose. */
dv_status dv__check_live(const dv_array *a, const char *what) {
  if (!dv__is_host_side(a) && !a->alloc->buf && dv_array_size(a) > 0)
    return dv__error(DV_ERR_INVALID_ARGUMENT,
                     "the %s is a device view of host memory whose mapped scope has ended", what);
  return DV_OK;
}

/* The slow part of dv__arrays_used_on (array.h): the allocation streams of
 * the arrays that need it, to the memory layer, which orders them. */
static inline bool dv__alloc_of_other_stream(const dv_alloc *al, dv_context *ctx, dv_bstream *bs) {
  return al->kind == DV_MEM_DEVICE && al->owned && al->buf && al->ctx == ctx && dv__bstream(ctx, al->stream) != bs;
}
__attribute__((noinline)) dv_status dv__arrays_order(dv_context *ctx, dv_stream *stream, const dv_array *const *arr,
                                                     size_t n) {
  if (!dv__mm_stream_ordered(ctx)) return DV_OK;
  dv_bstream *bs = dv__bstream(ctx, stream);
  dv_stream *owners[16];
  size_t k = 0;
  dv_status rc = DV_OK;
  for (size_t i = 0; i < n && !rc; i++) {
    if (!arr[i] || !dv__alloc_of_other_stream(arr[i]->alloc, ctx, bs)) continue;
    owners[k++] = arr[i]->alloc->stream;
    if (k == sizeof owners / sizeof owners[0]) {
      rc = dv__mm_order_after(ctx, stream, owners, k);
      k = 0;
    }
  }
  if (!rc && k) rc = dv__mm_order_after(ctx, stream, owners, k);
  return rc;
}

/* After a call queued work that uses a (and b) on `stream`: the arrays'
 * streams wait for it where they must (dv__arrays_used_on).  A synchronous
 * call (stream NULL) has waited for its work before it returns: nothing is
 * left to order. */
static __attribute__((noinline)) dv_status dv__order_pair(dv_context *ctx, dv_stream *stream, const dv_array *a,
                                                         const dv_array *b) {
  const dv_array *v[2] = {a, b};
  return dv__arrays_order(ctx, stream, v, 2);
}
static inline dv_status dv__used_on(dv_context *ctx, dv_stream *stream, const dv_array *a, const dv_array *b) {
  if (!stream || (!dv__alloc_maybe_elsewhere(a->alloc, stream) && (!b || !dv__alloc_maybe_elsewhere(b->alloc, stream))))
    return DV_OK;
  return dv__order_pair(ctx, stream, a, b);
}

/*
 * The planner's views of arrays.  Internal copies (an element, a field, the
 * caller's buffer, a copy's destination laid out for the reading order) are
 * described as plain views on the stack: nothing is allocated, reference
 * counted or counted in the statistics for them, so a call that fails has
 * changed nothing.
 */
static void dv__view_part(const dv_array *a, const dv_dtype *dt, int ndim, const int64_t *shape,
                          const int64_t *strides, int64_t offset, dv_view *v) {
  /* Only the first ndim extents and strides are ever read: the rest of the
   * (~540-byte) view is left unset on this per-copy path. */
  v->base = (dv_memref){0};
  v->host = dv__is_host_side(a);
  if (v->host)
    v->base.ptr = a->alloc->host;
  else
    v->base.buf = a->alloc->buf, v->base.offset = a->alloc->buf_offset;
  v->ndim = ndim;
  v->itemsize = dt->itemsize;
  v->offset = offset;
  for (int i = 0; i < ndim; i++) v->shape[i] = shape[i], v->strides[i] = strides[i];
}

static void dv__view_of(const dv_array *a, dv_view *v) {
  dv__view_part(a, a->dtype, a->ndim, a->shape, a->strides, a->offset, v);
}

/* Bytes of an array whose elements are dense in C order (size-1
 * dimensions ignored), -1 otherwise, 0 when it is empty. */
static int64_t dv__c_bytes(const dv_array *a) {
  int64_t s = (int64_t)a->dtype->itemsize;
  const int64_t *sh = a->shape, *st = a->strides;
  if (a->ndim == 1) return sh[0] == 0 ? 0 : sh[0] == 1 || st[0] == s ? s * sh[0] : -1;
  for (int i = a->ndim - 1; i >= 0; i--) {
    if (sh[i] == 0) return 0;
    if (sh[i] != 1 && st[i] != s) return -1;
    s *= sh[i];
  }
  return s;
}

/* The address of an array's element 0, as dv__view_of and the planner make it. */
static dv_memref dv__ref_of(const dv_array *a, bool *host) {
  dv_memref r = {0};
  *host = dv__is_host_side(a);
  if (*host)
    r.ptr = (char *)a->alloc->host + a->offset;
  else
    r.buf = a->alloc->buf, r.offset = a->alloc->buf_offset + (size_t)a->offset;
  return r;
}

/* The caller's host buffer, dense in C order. */
static void dv__view_host(void *buf, const dv_dtype *dt, int ndim, const int64_t *shape, dv_view *v) {
  memset(v, 0, sizeof *v);
  v->base.ptr = buf;
  v->host = true;
  v->ndim = ndim;
  v->itemsize = dt->itemsize;
  dv__layout_dense(ndim, shape, (int64_t)dt->itemsize, 'C', v->strides); /* fits: the other side exists */
  for (int i = 0; i < ndim; i++) v->shape[i] = shape[i];
}

/* ---- creation API ------------------------------------------------------------ */

dv_status dv_device_array(dv_context *ctx, int ndim, const int64_t *shape, const dv_dtype *dtype,
                          const int64_t *strides, char order, dv_stream *stream, dv_array **out) {
  DV_CHECK_NULL(out);
  *out = NULL;
  DV_CHECK_NULL(ctx);
  dv_status rc = dv__check_stream(ctx, stream);
  if (rc) return rc;
  return dv__array_create(ctx, DV_MEM_DEVICE, ndim, shape, dtype, strides, order, 0, stream, out);
}

static void dv__like_strides(const dv_array *a, int64_t *st) {
  int64_t isz = (int64_t)a->dtype->itemsize;
  bool c = dv__layout_is_c(a->ndim, a->shape, a->strides, isz);
  bool f = dv__layout_is_f(a->ndim, a->shape, a->strides, isz);
  if (a->ndim <= 1 || c || f)
    dv__layout_dense(a->ndim, a->shape, isz, (f && !c) ? 'F' : 'C', st);
  else
    dv__layout_like(a->ndim, a->shape, a->strides, isz, st);
}

dv_status dv_device_array_like(const dv_array *a, dv_stream *stream, dv_array **out) {
  DV_CHECK_NULL(out);
  *out = NULL;
  DV_CHECK_NULL(a);
  int64_t st[DV_MAXDIMS];
  dv__like_strides(a, st);
  return dv_device_array(a->alloc->ctx, a->ndim, a->shape, a->dtype, st, 'C', stream, out);
}

dv_status dv_device_record(dv_context *ctx, const dv_dtype *dtype, dv_stream *stream, dv_array **out) {
  DV_CHECK_NULL(out);
  *out = NULL;
  DV_CHECK_NULL(ctx);
  DV_CHECK_NULL(dtype);
  if (dtype->id != DV_RECORD)
    return dv__error(DV_ERR_BAD_DTYPE, "dv_device_record needs a record dtype, not %s", dtype->name);
  return dv_device_array(ctx, 0, NULL, dtype, NULL, 'C', stream, out);
}

dv_status dv_host_array_wrap(dv_context *ctx, void *data, int ndim, const int64_t *shape,
                             const dv_dtype *dtype, const int64_t *strides, dv_array **out) {
  DV_CHECK_NULL(out);
  *out = NULL;
  DV_CHECK_NULL(ctx);
  int64_t st[DV_MAXDIMS], bytes = 0, offset = 0;
  dv_status rc = dv__check_layout(ndim, shape, dtype, strides, 'C', st, &bytes, &offset);
  if (rc) return rc;
  if (!data && bytes > 0) return dv__error(DV_ERR_NULL_ARGUMENT, "data is NULL for a non-empty array");
  dv_alloc *a = dv__alloc_new(ctx, DV_MEM_HOST);
  if (!a) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate an allocation record");
  a->host = (char *)data - offset;
  a->bytes = (size_t)bytes;
  rc = dv__array_new(a, dtype, ndim, shape, st, offset, out);
  dv__alloc_release(a);
  return rc;
}

#define DV_HOST_CREATOR(fn, kind, flags)                                                      \
  dv_status fn(dv_context *ctx, int ndim, const int64_t *shape, const dv_dtype *dtype,        \
               const int64_t *strides, char order, dv_array **out) {                          \
    DV_CHECK_NULL(out);                                                                       \
    *out = NULL;                                                                              \
    DV_CHECK_NULL(ctx);                                                                       \
    return dv__array_create(ctx, kind, ndim, shape, dtype, strides, order, flags, NULL, out);        \
  }
DV_HOST_CREATOR(dv_host_array, DV_MEM_HOST, 0)
DV_HOST_CREATOR(dv_pinned_array, DV_MEM_PINNED, 0)

dv_status dv_managed_array(dv_context *ctx, int ndim, const int64_t *shape, const dv_dtype *dtype,
                           const int64_t *strides, char order, int attach_global, dv_array **out) {
  DV_CHECK_NULL(out);
  *out = NULL;
  DV_CHECK_NULL(ctx);
  return dv__array_create(ctx, DV_MEM_MANAGED, ndim, shape, dtype, strides, order, attach_global ? 1u : 0u, NULL, out);
}

dv_status dv_mapped_array(dv_context *ctx, int ndim, const int64_t *shape, const dv_dtype *dtype,
                          const int64_t *strides, char order, unsigned flags, dv_array **out) {
  DV_CHECK_NULL(out);
  *out = NULL;
  DV_CHECK_NULL(ctx);
  if (flags & ~(DV_MAPPED_PORTABLE | DV_MAPPED_WRITECOMBINED))
    return dv__error(DV_ERR_INVALID_ARGUMENT, "unknown mapped-array flags 0x%x", flags);
  return dv__array_create(ctx, DV_MEM_MAPPED, ndim, shape, dtype, strides, order, flags, NULL, out);
}

/* ---- accessors ------------------------------------------------------------------ */

int dv_array_ndim(const dv_array *a) { return a ? a->ndim : 0; }
const int64_t *dv_array_shape(const dv_array *a) { return a && a->ndim ? a->shape : NULL; }
const int64_t *dv_array_strides(const dv_array *a) { return a && a->ndim ? a->strides : NULL; }
const dv_dtype *dv_array_dtype(const dv_array *a) { return a ? a->dtype : NULL; }
dv_memory_kind dv_array_memory(const dv_array *a) { return a ? a->alloc->kind : DV_MEM_DEVICE; }
dv_context *dv_array_context(const dv_array *a) { return a ? a->alloc->ctx : NULL; }

int64_t dv_array_size(const dv_array *a) {
  if (!a) return 0;
  int64_t n = 1;
  for (int i = 0; i < a->ndim; i++) n *= a->shape[i]; /* checked at creation */
  return n;
}

int64_t dv_array_nbytes(const dv_array *a) { return a ? dv_array_size(a) * (int64_t)a->dtype->itemsize : 0; }

int dv_array_is_c_contiguous(const dv_array *a) {
  return a && dv__layout_is_c(a->ndim, a->shape, a->strides, (int64_t)a->dtype->itemsize);
}
int dv_array_is_f_contiguous(const dv_array *a) {
  return a && dv__layout_is_f(a->ndim, a->shape, a->strides, (int64_t)a->dtype->itemsize);
}

dv_status dv_array_host_data(const dv_array *a, void **ptr) {
  DV_CHECK_NULL(ptr);
  *ptr = NULL;
  DV_CHECK_NULL(a);
  if (a->alloc->kind == DV_MEM_DEVICE)
    return dv__error(DV_ERR_MISUSE, "the array lives in device memory; copy it to the host first");
  *ptr = (char *)a->alloc->host + a->offset;
  return DV_OK;
}

/* ---- transfers ---------------------------------------------------------------- */

static void dv__fmt_shape(char *buf, size_t cap, const dv_array *a) {
  size_t n = (size_t)snprintf(buf, cap, "(");
  for (int i = 0; i < a->ndim && n < cap; i++)
    n += (size_t)snprintf(buf + n, cap - n, "%lld%s", (long long)a->shape[i],
                          (a->ndim == 1 || i + 1 < a->ndim) ? "," : "");
  if (n < cap) snprintf(buf + n, cap - n, ")");
}

static __attribute__((noinline)) dv_status dv__check_compat_slow(const dv_array *dst, const dv_array *src) {
  if (dst->dtype != src->dtype && !dv_dtype_equal(dst->dtype, src->dtype))
    return dv__error(DV_ERR_DTYPE_MISMATCH, "incompatible dtype: %s into %s", src->dtype->name,
                     dst->dtype->name);
  if (dst->ndim == src->ndim) { /* the common case: the same shape, size-1 dims and all */
    int i = 0;
    while (i < dst->ndim && dst->shape[i] == src->shape[i]) i++;
    if (i == dst->ndim) return DV_OK;
  }
  int64_t a[DV_MAXDIMS], b[DV_MAXDIMS];
  int na = dv__layout_squeeze(src->ndim, src->shape, NULL, a, NULL);
  int nb = dv__layout_squeeze(dst->ndim, dst->shape, NULL, b, NULL);
  bool same = na == nb;
  for (int i = 0; same && i < na; i++) same = a[i] == b[i];
  if (!same) {
    char s1[256], s2[256];
    dv__fmt_shape(s1, sizeof s1, src);
    dv__fmt_shape(s2, sizeof s2, dst);
    return dv__error(DV_ERR_SHAPE_MISMATCH, "incompatible shape: %s into %s", s1, s2);
  }
  return DV_OK;
}

/* Same dtype, same shape once size-1 dimensions are dropped; the common
 * case (one dtype object, one shape) is decided here, the rest by the slow
 * part, which also words the errors. */
static inline dv_status dv__check_compat(const dv_array *dst, const dv_array *src) {
  if (dst->dtype == src->dtype && dst->ndim == src->ndim) {
    int i = 0;
    while (i < dst->ndim && dst->shape[i] == src->shape[i]) i++;
    if (i == dst->ndim) return DV_OK;
  }
  return dv__check_compat_slow(dst, src);
}

/*
 * Between two contexts (two devices, or two backends) device memory is not
 * shared: the copy goes through a dense host buffer, device -> host on the
 * source's context, then host -> device on the destination's.  Host memory
 * is reachable from every context, so a host side needs no staging.  Such
 * copies are synchronous on the source side; the destination side follows
 * `stream` (which must belong to the destination's context).
 */
static dv_status dv__copy_across(dv_context *dctx, const dv_view *dst, dv_context *sctx, const dv_view *src,
                                 dv_stream *stream) {
  if (src->host) {
    dv_status rc = dv__transfer(dctx, dst, src, stream);
    dv_status r2 = dv__sync_if_null(dctx, stream);
    return rc ? rc : r2;
  }
  if (dst->host) {
    dv_status rc = dv__transfer(sctx, dst, src, NULL);
    dv_status r2 = dv__sync_if_null(sctx, NULL);
    return rc ? rc : r2;
  }
  int64_t count = 1; /* the source's size: checked when it was made */
  for (int i = 0; i < src->ndim; i++) count *= src->shape[i];
  /* Two contexts of one backend (two devices): a peer copy where both views
   * are dense in C order (dv__copy_peer_dense, src/transfer/pipeline.c). */
  dv_status prc = dv__copy_peer_dense(dctx, dst, sctx, src, stream, count);
  if (prc != DV_ERR_NOT_SUPPORTED) return prc;
  void *buf = dv__malloc((size_t)count * src->itemsize);
  if (!buf) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate a %lld-byte staging buffer",
                             (long long)count * (long long)src->itemsize);
  dv_view tmp = {.base = {.ptr = buf}, .host = true, .ndim = src->ndim, .itemsize = src->itemsize};
  memcpy(tmp.shape, src->shape, sizeof tmp.shape);
  dv__layout_dense(src->ndim, src->shape, (int64_t)src->itemsize, 'C', tmp.strides); /* fits: src exists */
  dv_status rc = dv__transfer(sctx, &tmp, src, NULL);
  dv_status r2 = dv__sync_if_null(sctx, NULL);
  if (!rc) rc = r2;
  if (!rc) rc = dv__transfer(dctx, dst, &tmp, stream);
  /* the staging buffer is freed here: wait for the destination side */
  r2 = dctx->be->stream_sync(dctx->bst, dv__bstream(dctx, stream));
  if (!rc) rc = r2;
  dv__free(buf);
  return rc;
}

/* Copy view src (memory of sctx) into view dst (memory of dctx), and wait
 * when the call is synchronous (stream NULL). */
static dv_status dv__copy_views(dv_context *dctx, const dv_view *dst, dv_context *sctx, const dv_view *src,
                                dv_stream *stream) {
  if (sctx != dctx) return dv__copy_across(dctx, dst, sctx, src, stream);
  dv_status rc = dv__transfer(dctx, dst, src, stream);
  dv_status r2 = dv__sync_if_null(dctx, stream);
  return rc ? rc : r2;
}

static dv_status dv__copy_general(dv_array *dst, const dv_array *src, dv_stream *stream);

/* dv__copy of two live arrays of ctx, both dense in C order over `bytes`
 * (> 0) bytes: one contiguous copy without views, and the wait when
 * synchronous.  DV_ERR_NOT_SUPPORTED, having done nothing, when the planner
 * must decide. */
static inline __attribute__((always_inline)) dv_status dv__copy_contig(dv_context *ctx, dv_array *dst,
                                                                     const dv_array *src, int64_t bytes,
                                                                     dv_stream *stream) {
  bool dh, sh;
  dv_memref dr = dv__ref_of(dst, &dh), sr = dv__ref_of(src, &sh);
  dv_status rc = dv__transfer_contig(ctx, dr, dh, sr, sh, (size_t)bytes, stream);
  if (rc == DV_ERR_NOT_SUPPORTED) return rc;
  dv_status r2 = dv__sync_if_null(ctx, stream);
  dv_status r3 = dv__used_on(ctx, stream, dst, src);
  return rc ? rc : r2 ? r2 : r3;
}

/* Copy array src into array dst (compatible), and wait when synchronous. */
static dv_status dv__copy(dv_array *dst, const dv_array *src, dv_stream *stream) {
  dv_context *ctx = dst->alloc->ctx;
  if (stream && stream->ctx != ctx)
    return dv__error(DV_ERR_BACKEND_MISMATCH, "the stream belongs to another context than the destination");
  /* before a copy across contexts makes its staging buffer */
  dv_status rc = dv__check_live(src, "source");
  if (!rc) rc = dv__check_live(dst, "destination");
  if (rc) return rc;
  if (src->alloc->ctx == ctx) {
    /* The common case: both dense in C order (and compatible: the same
     * elements at the same byte offsets), one contiguous copy, no views. */
    int64_t bytes = dv__c_bytes(src);
    if (bytes > 0 && dv__c_bytes(dst) == bytes) {
      rc = dv__copy_contig(ctx, dst, src, bytes, stream);
      if (rc != DV_ERR_NOT_SUPPORTED) return rc;
    }
  }
  return dv__copy_general(dst, src, stream);
}

/* dv__copy for every other case: through views and the planner. */
static __attribute__((noinline)) dv_status dv__copy_general(dv_array *dst, const dv_array *src, dv_stream *stream) {
  dv_context *ctx = dst->alloc->ctx;
  dv_view dv, sv;
  dv__view_of(dst, &dv);
  dv__view_of(src, &sv);
  dv_status rc = dv__copy_views(ctx, &dv, src->alloc->ctx, &sv, stream);
  dv_status r2 = dv__used_on(ctx, stream, dst, src); /* a failed copy may have queued a part */
  return rc ? rc : r2;
}

dv_status dv_array_copy(dv_array *dst, const dv_array *src, dv_stream *stream) {
  DV_CHECK_NULL(dst);
  DV_CHECK_NULL(src);
  dv_status rc = dv__check_stream(dst->alloc->ctx, stream);
  if (!rc) rc = dv__check_compat(dst, src);
  if (rc) return rc;
  return dv__copy(dst, src, stream);
}

dv_status dv_to_device(dv_context *ctx, const dv_array *src, dv_stream *stream, int copy,
                       dv_array *to, dv_array **out) {
  if (out) *out = NULL;
  DV_CHECK_NULL(ctx);
  DV_CHECK_NULL(src);
  dv_status src_rc = dv__check_stream(ctx, stream);
  if (!src_rc && copy) src_rc = dv__check_live(src, "source");
  if (src_rc) return src_rc;
  if (to && to->alloc->ctx != ctx)
    return dv__error(DV_ERR_BACKEND_MISMATCH, "`to` belongs to another context than ctx");
  if (to) {
    if (dv__is_host_side(to))
      return dv__error(DV_ERR_INVALID_ARGUMENT, "`to` must be a device array");
    dv_status rc = dv__check_compat(to, src);
    if (!rc) rc = dv__copy(to, src, stream);
    if (!rc && out) *out = dv_array_retain(to);
    return rc;
  }
  DV_CHECK_NULL(out);
  if (!dv__is_host_side(src) && src->alloc->ctx == ctx) {
    *out = dv_array_retain((dv_array *)src); /* Numba returns device arrays as they are */
    return DV_OK;
  }
  /* A host array, or a device array of another context (device or backend);
   * one dense in C order (not empty) gets the C layout without a stride search. */
  dv_array *d = NULL;
  int64_t lst[DV_MAXDIMS];
  int64_t dense = dv__c_bytes(src);
  if (dense <= 0) dv__like_strides(src, lst);
  dv_status rc = dv_device_array(ctx, src->ndim, src->shape, src->dtype, dense > 0 ? NULL : lst, 'C', stream, &d);
  if (rc) return rc;
  if (copy) {
    /* d is new, dense like src and of ctx: no checks to repeat */
    rc = dense > 0 && src->alloc->ctx == ctx ? dv__copy_contig(ctx, d, src, dense, stream) : DV_ERR_NOT_SUPPORTED;
    if (rc == DV_ERR_NOT_SUPPORTED) rc = dv__copy(d, src, stream);
  }
  if (rc) {
    dv_array_release(d);
    return rc;
  }
  *out = d;
  return DV_OK;
}

dv_status dv_copy_to_host(const dv_array *src, dv_array *dst, dv_stream *stream, dv_array **out) {
  if (out) *out = NULL;
  DV_CHECK_NULL(src);
  /* The work runs on the destination's context (a new host array is made
   * on the source's). */
  dv_status src_rc = dv__check_stream(dst ? dst->alloc->ctx : src->alloc->ctx, stream);
  if (!src_rc) src_rc = dv__check_live(src, "source");
  if (src_rc) return src_rc;
  if (dst) {
    if (!dv__is_host_side(dst))
      return dv__error(DV_ERR_INVALID_ARGUMENT, "the destination of dv_copy_to_host must be a host array");
    dv_status rc = dv__check_compat(dst, src);
    if (!rc) rc = dv__copy(dst, src, stream);
    if (!rc && out) *out = dv_array_retain(dst);
    return rc;
  }
  DV_CHECK_NULL(out);
  int64_t st[DV_MAXDIMS];
  dv__like_strides(src, st);
  dv_array *h = NULL;
  dv_status rc = dv_host_array(src->alloc->ctx, src->ndim, src->shape, src->dtype, st, 'C', &h);
  if (!rc) rc = dv__copy(h, src, stream);
  if (rc) {
    dv_array_release(h);
    return rc;
  }
  *out = h;
  return DV_OK;
}

dv_status dv_copy_to_device(dv_array *dst, const dv_array *src, dv_stream *stream) {
  DV_CHECK_NULL(dst);
  DV_CHECK_NULL(src);
  dv_status rc = dv__check_stream(dst->alloc->ctx, stream);
  if (rc) return rc;
  if (dv__is_host_side(dst))
    return dv__error(DV_ERR_INVALID_ARGUMENT, "the destination of dv_copy_to_device must be a device array");
  rc = dv__check_compat(dst, src);
  if (rc) return rc;
  return dv__copy(dst, src, stream);
}

dv_status dv_array_memset(dv_array *a, int value, dv_stream *stream) {
  DV_CHECK_NULL(a);
  dv_context *ctx = a->alloc->ctx;
  dv_status rc = dv__check_stream(ctx, stream);
  if (!rc) rc = dv__check_live(a, "array");
  if (rc) return rc;
  dv_view v;
  dv__view_of(a, &v);
  rc = dv__memset(ctx, &v, value, stream);
  dv_status r2 = dv__sync_if_null(ctx, stream);
  dv_status r3 = dv__used_on(ctx, stream, a, NULL);
  return rc ? rc : r2 ? r2 : r3;
}

dv_status dv_array_copy_new(const dv_array *a, char order, dv_stream *stream, dv_array **out) {
  DV_CHECK_NULL(out);
  *out = NULL;
  DV_CHECK_NULL(a);
  dv_status rc = dv__check_stream(a->alloc->ctx, stream);
  if (!rc) rc = dv__check_live(a, "source");
  if (rc) return rc;
  dv_array *n = NULL;
  dv_memory_kind kind = dv__is_host_side(a) ? DV_MEM_HOST : DV_MEM_DEVICE;
  rc = dv__array_create(a->alloc->ctx, kind, a->ndim, a->shape, a->dtype, NULL, order, 0, stream, &n);
  if (!rc) rc = dv__copy(n, a, stream);
  if (rc) {
    dv_array_release(n);
    return rc;
  }
  *out = n;
  return DV_OK;
}

/* ---- views ------------------------------------------------------------------------ */

dv_status dv_array_slice(const dv_array *a, int nidx, const dv_index *idx, dv_array **out) {
  DV_CHECK_NULL(out);
  *out = NULL;
  DV_CHECK_NULL(a);
  if (nidx < 0) return dv__error(DV_ERR_INVALID_ARGUMENT, "negative index count %d", nidx);
  if (nidx > 0 && !idx) return dv__error(DV_ERR_NULL_ARGUMENT, "idx is NULL with %d entries", nidx);
  if (nidx > a->ndim)
    return dv__error(DV_ERR_TOO_MANY_INDICES, "too many indices for array: %d-dimensional, but %d were indexed",
                     a->ndim, nidx);
  int64_t shape[DV_MAXDIMS], strides[DV_MAXDIMS], offset = a->offset;
  int nd = 0;
  for (int i = 0; i < a->ndim; i++) {
    int64_t len = a->shape[i], st = a->strides[i];
    if (i >= nidx) {
      shape[nd] = len, strides[nd] = st, nd++;
      continue;
    }
    const dv_index *x = &idx[i];
    if (x->kind == DV_IDX_INT) {
      int64_t k = x->index;
      if (k < 0) k += len;
      if (k < 0 || k >= len)
        return dv__error(DV_ERR_INDEX, "index %lld is out of bounds for axis %d with size %lld",
                         (long long)x->index, i, (long long)len);
      offset += k * st;
      continue;
    }
    if (x->kind != DV_IDX_SLICE) return dv__error(DV_ERR_INVALID_ARGUMENT, "index %d has an unknown kind", i);
    int64_t step = x->step;
    if (step == 0) return dv__error(DV_ERR_BAD_STEP, "slice step cannot be zero (axis %d)", i);
    if (step == INT64_MIN) step = -INT64_MAX; /* keep -step representable */
    int64_t start = x->start, stop = x->stop;
    if (start == DV_NONE) start = step < 0 ? len - 1 : 0;
    else if (start < 0) {
      start += len;
      if (start < 0) start = step < 0 ? -1 : 0;
    } else if (start >= len) start = step < 0 ? len - 1 : len;
    if (stop == DV_NONE) stop = step < 0 ? -1 : len;
    else if (stop < 0) {
      stop += len;
      if (stop < 0) stop = step < 0 ? -1 : 0;
    } else if (stop >= len) stop = step < 0 ? len - 1 : len;
    int64_t n;
    if (step < 0) n = stop < start ? (start - stop - 1) / (-step) + 1 : 0;
    else n = start < stop ? (stop - start - 1) / step + 1 : 0;
    shape[nd] = n;
    /* NumPy's rule: an empty range behaves as if its step were 1 and its
     * start 0, so the dimension keeps the parent's stride and the view's
     * start does not move.  Otherwise the stride is step * stride, which
     * cannot overflow for n > 1 (it stays inside the allocation); for n == 1
     * it is never used to reach an element, so an overflow keeps the
     * parent's stride rather than failing. */
    int64_t ns = st;
    if (n > 0) {
      offset += start * st;
      if (dv__mul_overflow(step, st, &ns)) ns = st;
    }
    strides[nd] = ns;
    nd++;
  }
  return dv__array_new(a->alloc, a->dtype, nd, shape, strides, offset, out);
}

/* The byte offset of element `index` (negative entries count from the
 * end), with dv_array_slice's messages for indices out of range. */
static dv_status dv__element_offset(const dv_array *a, const int64_t *index, int64_t *offset) {
  int64_t off = a->offset;
  for (int i = 0; i < a->ndim; i++) {
    int64_t k = index[i];
    if (k < 0) k += a->shape[i];
    if (k < 0 || k >= a->shape[i])
      return dv__error(DV_ERR_INDEX, "index %lld is out of bounds for axis %d with size %lld",
                       (long long)index[i], i, (long long)a->shape[i]);
    off += k * a->strides[i];
  }
  *offset = off;
  return DV_OK;
}

static dv_status dv__item_io(dv_array *a, const int64_t *index, void *buf, size_t size,
                             dv_stream *stream, bool get) {
  DV_CHECK_NULL(a);
  DV_CHECK_NULL(buf);
  if (a->ndim > 0) DV_CHECK_NULL(index);
  dv_status rc = dv__check_stream(a->alloc->ctx, stream);
  if (rc) return rc;
  if (size < a->dtype->itemsize)
    return dv__error(DV_ERR_INVALID_ARGUMENT, "buffer of %zu bytes is smaller than the %zu-byte element",
                     size, a->dtype->itemsize);
  int64_t off = 0;
  rc = dv__element_offset(a, index, &off);
  if (rc) return rc;
  rc = dv__check_live(a, get ? "source" : "destination");
  if (rc) return rc;
  dv_view v, h;
  dv__view_part(a, a->dtype, 0, NULL, NULL, off, &v);
  dv__view_host(buf, a->dtype, 0, NULL, &h);
  dv_context *ctx = a->alloc->ctx;
  rc = get ? dv__copy_views(ctx, &h, ctx, &v, stream) : dv__copy_views(ctx, &v, ctx, &h, stream);
  dv_status r2 = dv__used_on(ctx, stream, a, NULL);
  return rc ? rc : r2;
}

dv_status dv_array_get_item(const dv_array *a, const int64_t *index, void *out, size_t outsize,
                            dv_stream *stream) {
  return dv__item_io((dv_array *)a, index, out, outsize, stream, true);
}

dv_status dv_array_set_item(dv_array *a, const int64_t *index, const void *value, size_t size,
                            dv_stream *stream) {
  return dv__item_io(a, index, (void *)value, size, stream, false);
}

static dv_status dv__resolve_order(const dv_array *a, char order, char *eff) {
  if (order == 'C' || order == 'F') *eff = order;
  else if (order == 'A') *eff = (dv_array_is_f_contiguous(a) && !dv_array_is_c_contiguous(a)) ? 'F' : 'C';
  else
    return dv__error(DV_ERR_BAD_ORDER, "order must be 'C', 'F' or 'A', not '%c'",
                     (order >= 32 && order < 127) ? order : '?');
  return DV_OK;
}

/* A copy of a laid out densely in `order` with shape (nnd, nshape). */
static dv_status dv__reshape_copy(const dv_array *a, int nnd, const int64_t *nshape, char order,
                                  dv_stream *stream, dv_array **out) {
  dv_memory_kind kind = dv__is_host_side(a) ? DV_MEM_HOST : DV_MEM_DEVICE;
  dv_status rc = dv__check_live(a, "source");
  if (rc) return rc;
  dv_array *n = NULL;
  rc = dv__array_create(a->alloc->ctx, kind, nnd, nshape, a->dtype, NULL, order, 0, stream, &n);
  if (rc) return rc;
  /* View the new (dense) array with a's shape, reading in `order`: always
   * possible, and then the copy is an ordinary element-wise transfer. */
  int64_t vst[DV_MAXDIMS];
  dv__layout_dense(a->ndim, a->shape, (int64_t)a->dtype->itemsize, order, vst);
  dv_view v, av;
  dv__view_part(n, a->dtype, a->ndim, a->shape, vst, n->offset, &v);
  dv__view_of(a, &av);
  rc = dv__copy_views(n->alloc->ctx, &v, a->alloc->ctx, &av, stream);
  dv_status r2 = dv__used_on(n->alloc->ctx, stream, a, n);
  if (!rc) rc = r2;
  if (rc) {
    dv_array_release(n);
    return rc;
  }
  *out = n;
  return DV_OK;
}

dv_status dv_array_reshape(const dv_array *a, int ndim, const int64_t *shape, char order,
                           unsigned flags, dv_stream *stream, dv_array **out) {
  DV_CHECK_NULL(out);
  *out = NULL;
  DV_CHECK_NULL(a);
  if (ndim > 0) DV_CHECK_NULL(shape);
  dv_status rc = dv__check_stream(a->alloc->ctx, stream);
  if (rc) return rc;
  char eff = 'C';
  rc = dv__resolve_order(a, order, &eff);
  if (rc) return rc;
  int64_t nshape[DV_MAXDIMS], nst[DV_MAXDIMS];
  rc = dv__layout_resolve_shape(dv_array_size(a), ndim, shape, nshape);
  if (rc) return rc;
  /* An empty array may take any shape with a zero extent: its dense layout
   * (what a view or a copy of it gets) must not overflow either. */
  rc = dv__layout_dense(ndim, nshape, (int64_t)a->dtype->itemsize, eff, nst);
  if (rc) return rc;
  if (dv__layout_reshape_view(a->ndim, a->shape, a->strides, (int64_t)a->dtype->itemsize, ndim,
                              nshape, eff, nst))
    return dv__array_new(a->alloc, a->dtype, ndim, nshape, nst, a->offset, out);
  if (flags & DV_VIEW_ONLY)
    return dv__error(DV_ERR_COPY_NEEDED, "reshape of this layout to the new shape needs a copy");
  return dv__reshape_copy(a, ndim, nshape, eff, stream, out);
}

dv_status dv_array_ravel(const dv_array *a, char order, unsigned flags, dv_stream *stream,
                         dv_array **out) {
  DV_CHECK_NULL(out);
  *out = NULL;
  DV_CHECK_NULL(a);
  dv_status rc = dv__check_stream(a->alloc->ctx, stream);
  if (rc) return rc;
  bool c = dv_array_is_c_contiguous(a), f = dv_array_is_f_contiguous(a);
  char eff = 'C';
  rc = dv__resolve_order(a, order, &eff);
  if (rc) return rc;
  int64_t n = dv_array_size(a), st = (int64_t)a->dtype->itemsize;
  bool view = (order == 'C' && c) || (order == 'F' && f) || (order == 'A' && (c || f));
  if (view) return dv__array_new(a->alloc, a->dtype, 1, &n, &st, a->offset, out);
  if (flags & DV_VIEW_ONLY)
    return dv__error(DV_ERR_COPY_NEEDED, "ravel of a non-contiguous array in order '%c' needs a copy", order);
  return dv__reshape_copy(a, 1, &n, eff, stream, out);
}

dv_status dv_array_split(const dv_array *a, int64_t section, dv_array **views, size_t cap,
                         size_t *count) {
  DV_CHECK_NULL(count);
  *count = 0;
  /* views has cap entries: all NULL unless they receive a view */
  if (views)
    for (size_t i = 0; i < cap; i++) views[i] = NULL;
  DV_CHECK_NULL(a);
  if (a->ndim != 1) return dv__error(DV_ERR_INVALID_ARGUMENT, "only support 1d array (got %d dims)", a->ndim);
  if (a->strides[0] != (int64_t)a->dtype->itemsize)
    return dv__error(DV_ERR_INVALID_ARGUMENT, "only support unit stride (stride %lld, itemsize %zu)",
                     (long long)a->strides[0], a->dtype->itemsize);
  if (section <= 0) return dv__error(DV_ERR_INVALID_ARGUMENT, "section must be positive, not %lld", (long long)section);
  int64_t size = a->shape[0];
  size_t n = (size_t)(size / section + (size % section != 0));
  if (!views) {
    *count = n;
    return DV_OK;
  }
  if (cap < n) return dv__error(DV_ERR_INVALID_ARGUMENT, "%zu views need room, cap is %zu", n, cap);
  for (size_t i = 0; i < n; i++) {
    int64_t begin = (int64_t)i * section, len = size - begin < section ? size - begin : section;
    dv_status rc = dv__array_new(a->alloc, a->dtype, 1, &len, a->strides,
                                 a->offset + begin * a->strides[0], &views[i]);
    if (rc) {
      for (size_t j = 0; j < i; j++) dv_array_release(views[j]), views[j] = NULL;
      return rc;
    }
  }
  *count = n;
  return DV_OK;
}

/* ---- records --------------------------------------------------------------------- */

dv_status dv_array_field(const dv_array *a, const char *name, dv_array **out) {
  DV_CHECK_NULL(out);
  *out = NULL;
  DV_CHECK_NULL(a);
  DV_CHECK_NULL(name);
  if (a->dtype->id != DV_RECORD)
    return dv__error(DV_ERR_BAD_DTYPE, "field access needs a record array, not %s", a->dtype->name);
  const dv_field *f = dv__dtype_find_field(a->dtype, name);
  if (!f) return dv__error(DV_ERR_UNKNOWN_FIELD, "no field named \"%s\"", name);
  if (a->ndim + f->ndim > DV_MAXDIMS)
    return dv__error(DV_ERR_BAD_SHAPE, "field view would have more than %d dimensions", DV_MAXDIMS);
  int64_t shape[DV_MAXDIMS], st[DV_MAXDIMS];
  int nd = 0;
  for (int i = 0; i < a->ndim; i++) shape[nd] = a->shape[i], st[nd] = a->strides[i], nd++;
  dv__layout_dense(f->ndim, f->shape, (int64_t)f->dtype->itemsize, 'C', st + nd);
  for (int i = 0; i < f->ndim; i++) shape[nd + i] = f->shape[i];
  nd += f->ndim;
  return dv__array_new(a->alloc, f->dtype, nd, shape, st, a->offset + (int64_t)f->offset, out);
}

static dv_status dv__record_io(dv_array *rec, const char *name, void *buf, size_t size,
                               dv_stream *stream, bool get) {
  DV_CHECK_NULL(rec);
  DV_CHECK_NULL(name);
  DV_CHECK_NULL(buf);
  dv_status rc = dv__check_stream(rec->alloc->ctx, stream);
  if (rc) return rc;
  if (rec->ndim != 0)
    return dv__error(DV_ERR_INVALID_ARGUMENT, "a record is 0-d; this array has %d dims (use dv_array_field)", rec->ndim);
  if (rec->dtype->id != DV_RECORD)
    return dv__error(DV_ERR_BAD_DTYPE, "field access needs a record array, not %s", rec->dtype->name);
  const dv_field *f = dv__dtype_find_field(rec->dtype, name);
  if (!f) return dv__error(DV_ERR_UNKNOWN_FIELD, "no field named \"%s\"", name);
  /* The field's bytes fit int64_t (checked when the dtype was made). */
  int64_t count;
  dv__layout_size(f->ndim, f->shape, &count);
  size_t need = (size_t)count * f->dtype->itemsize;
  if (size < need)
    return dv__error(DV_ERR_INVALID_ARGUMENT, "field \"%s\" has %zu bytes; buffer has %zu", name, need, size);
  rc = dv__check_live(rec, get ? "source" : "destination");
  if (rc) return rc;
  /* The field inside the record (C order for sub-arrays) and the caller's
   * buffer, both as stack descriptors. */
  int64_t st[DV_MAXDIMS];
  dv__layout_dense(f->ndim, f->shape, (int64_t)f->dtype->itemsize, 'C', st);
  dv_view fv, h;
  dv__view_part(rec, f->dtype, f->ndim, f->shape, st, rec->offset + (int64_t)f->offset, &fv);
  dv__view_host(buf, f->dtype, f->ndim, f->shape, &h);
  dv_context *ctx = rec->alloc->ctx;
  rc = get ? dv__copy_views(ctx, &h, ctx, &fv, stream) : dv__copy_views(ctx, &fv, ctx, &h, stream);
  dv_status r2 = dv__used_on(ctx, stream, rec, NULL);
  return rc ? rc : r2;
}

dv_status dv_record_get(const dv_array *rec, const char *name, void *out, size_t size, dv_stream *stream) {
  return dv__record_io((dv_array *)rec, name, out, size, stream, true);
}

dv_status dv_record_set(dv_array *rec, const char *name, const void *value, size_t size, dv_stream *stream) {
  return dv__record_io(rec, name, (void *)value, size, stream, false);
}
