/*
 * Array objects, their lifetime: reference-counted descriptors (dtype,
 * shape, strides, offset) over one shared, reference-counted allocation;
 * the creation API and the accessors.  Views share the allocation (views.c
 * makes them); the last reference to an allocation queues its free.  Copies
 * between arrays are copy.c.
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "array.h"

/* ---- allocations ------------------------------------------------------------ */

/*
 * Allocation records are recycled through a small cache of the calling
 * thread: an array made and released per call (dv_device_array,
 * dv_to_device) would otherwise pay malloc and free of its record each
 * time, and the pending-deallocation queue frees records in batches larger
 * than glibc's per-thread cache keeps (issue 13).  Per thread, so that
 * taking and returning a record is a load and a store, no lock (issue 23);
 * a thread's cache is freed when the thread exits (a pthread key's
 * destructor).  A cached record keeps its initialised mutex and holds
 * nothing else.  Not under AddressSanitizer, so that a use of a released
 * record is still caught.
 */
#if defined(__SANITIZE_ADDRESS__)
#define DV_ALLOC_CACHE 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define DV_ALLOC_CACHE 0
#endif
#endif
#ifndef DV_ALLOC_CACHE
#define DV_ALLOC_CACHE 16
#endif

/* A record leaves the library's hands for good. */
static void dv__alloc_destroy(dv_alloc *a) {
  pthread_mutex_destroy(&a->reg_lock);
  dv__free(a);
}

/* A record released for good: in checked mode (the record's context's) kept
 * in the handle quarantine, for the descriptor embedded in it (handle.c). */
static bool dv__alloc_retired(dv_alloc *a) {
  if (!a->ctx || !a->ctx->handles_checked) return false;
  pthread_mutex_destroy(&a->reg_lock);
  dv__handle_retire(a, sizeof *a, offsetof(dv_alloc, embed_), true, NULL);
  return true;
}

#if DV_ALLOC_CACHE
typedef struct dv_alloc_cache {
  int n;
  bool keyed; /* the thread-exit destructor is set for this thread */
  dv_alloc *rec[DV_ALLOC_CACHE];
} dv_alloc_cache;
static _Thread_local dv_alloc_cache dv__alloc_tl;
static pthread_key_t dv__alloc_key;
static pthread_once_t dv__alloc_once = PTHREAD_ONCE_INIT;
static bool dv__alloc_key_ok;

static void dv__alloc_cache_drain(void *p) {
  dv_alloc_cache *c = p;
  while (c->n > 0) dv__alloc_destroy(c->rec[--c->n]);
}
static void dv__alloc_key_make(void) { dv__alloc_key_ok = pthread_key_create(&dv__alloc_key, dv__alloc_cache_drain) == 0; }
/* Once the library is unloaded its destructor must not run at thread exit
 * (the records of threads still alive then are left to the process). */
__attribute__((destructor)) static void dv__alloc_key_drop(void) {
  if (dv__alloc_key_ok) pthread_key_delete(dv__alloc_key), dv__alloc_key_ok = false;
}
/* The first record this thread caches arms the destructor; false when it
 * cannot be armed (the record is freed instead of cached). */
static __attribute__((noinline)) bool dv__alloc_cache_arm(dv_alloc_cache *c) {
  pthread_once(&dv__alloc_once, dv__alloc_key_make);
  if (!dv__alloc_key_ok || pthread_setspecific(dv__alloc_key, c) != 0) return false;
  c->keyed = true;
  return true;
}
#endif

static void dv__alloc_free(dv_alloc *a) {
  if (dv__alloc_retired(a)) return;
#if DV_ALLOC_CACHE
  dv_alloc_cache *c = &dv__alloc_tl;
  if (c->n < DV_ALLOC_CACHE && (c->keyed || dv__alloc_cache_arm(c))) {
    c->rec[c->n++] = a;
    return;
  }
#endif
  dv__alloc_destroy(a);
}

static dv_alloc *dv__alloc_get(void) {
#if DV_ALLOC_CACHE
  dv_alloc_cache *c = &dv__alloc_tl;
  /* Not while a host-allocation fault is armed: the record's allocation is
   * one the fault may hit, as it is when the cache is empty (tests/test_oom
   * sweeps every path's error returns in every build). */
  if (c->n > 0 && !dv__fault_host_pending()) {
    dv_alloc *a = c->rec[--c->n];
    /* everything after the (initialised) mutex; the embedded descriptor's
     * room needs no clearing */
    memset((char *)a + sizeof a->reg_lock, 0, offsetof(dv_alloc, embed_) - sizeof a->reg_lock);
    return a;
  }
#endif
  dv_alloc *a = dv__calloc(1, sizeof *a);
  if (a) pthread_mutex_init(&a->reg_lock, NULL);
  return a;
}

/* An owned allocation's event for the memory hooks and scopes
 * (memory/events.c): its memory made, or let go of by its last array.
 * Out of line, behind dv__mem_events_on: nothing of it on the paths while
 * no hook or scope is installed. */
static __attribute__((noinline)) void dv__alloc_note_slow(dv_alloc *a, dv_memory_event_kind ev) {
  if (!a->owned || a->foreign || a->kind == DV_MEM_HOST || a->bytes == 0) return;
  bool dev = a->kind == DV_MEM_DEVICE || a->kind == DV_MEM_MANAGED;
  dv__mem_note(a->ctx, ev, a->kind, a->bytes, dev ? a->buf : a->host, a->kind == DV_MEM_DEVICE ? a->buf_offset : 0,
               a->kind == DV_MEM_DEVICE ? a->stream : NULL);
}
static inline void dv__alloc_note(dv_context *ctx, dv_alloc *a, dv_memory_event_kind ev) {
  if (DV_UNLIKELY(dv__mem_events_on(ctx))) dv__alloc_note_slow(a, ev);
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
    wrc = dv__bstream_wait(ctx, NULL);
  dv_memory_state *m = ctx->memory;
  dv_status rc = m->mm.free(m->mm_state, blk, a->bytes, a->stream);
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
  dv_status rc = dv__bstream_wait(ctx, NULL);
  dv_status r2 = a->buf ? ctx->be->buffer_unwrap(ctx->bst, a->buf) : DV_OK;
  if (a->release) a->release(a->release_user);
  dv__alloc_free(a);
  return rc ? rc : r2;
}

static dv_status dv__foreign_release(dv_alloc *a) {
  dv_context *ctx = a->ctx;
  return dv__defer_free(ctx, dv__dtor_foreign, a, NULL, 0);
}

/* Drop a reference to a record; `arrays` descriptors (0, or the 1 just
 * released over it) leave the `arrays` statistic with it: with the queue's
 * entry, under its lock, when the record's device memory is queued (one
 * lock for a device array's release: issue 23). */
static void dv__alloc_release_n(dv_alloc *a, uint64_t arrays) {
  dv_context *ctx = a->ctx; /* before the drop: another holder may free the record after it */
  if (!dv__ref_drop(&a->refs)) {
    if (arrays) dv__stats_sub(ctx, DV_STAT_ARRAYS, arrays);
    return;
  }
  dv__alloc_note(ctx, a, DV_MEMORY_FREE);
  if (a->owned && a->kind == DV_MEM_DEVICE && a->buf && !a->foreign && a->reg_count == 0) {
    /* The record itself goes into the queue (it knows block and stream). */
    dv_status rc = dv__defer_free_counted(ctx, dv__dtor_device, a, NULL, a->bytes, DV_STAT_ARRAYS, arrays);
    if (rc) dv__log(DV_LOG_ERROR, "releasing memory: %s", dv_last_error());
    return;
  }
  if (arrays) dv__stats_sub(ctx, DV_STAT_ARRAYS, arrays);
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
      case DV_MEM_MAPPED: {
        /* exported to work devarray cannot see: the pool's reuse of it waits for the device */
        if (a->pooled && atomic_load_explicit(&a->outside, memory_order_relaxed)) dv__pinned_used_outside(a->handle);
        bool mapped = a->kind == DV_MEM_MAPPED;
        rc = dv__defer_free(ctx, mapped ? dv__dtor_mapped : dv__dtor_pinned, a->handle, (void *)(uintptr_t)a->bytes,
                            mapped ? a->bytes : 0);
        break;
      }
      case DV_MEM_HOST:
        dv__free(a->host);
        break;
    }
    if (rc) dv__log(DV_LOG_ERROR, "releasing memory: %s", dv_last_error());
  }
  if (a->keep) dv_array_release(a->keep);
  dv__stream_irelease(a->stream);
  dv__alloc_free(a);
}

void dv__alloc_release(dv_alloc *a) {
  if (a) dv__alloc_release_n(a, 0);
}

dv_alloc *dv__alloc_new(dv_context *ctx, dv_memory_kind kind) {
  dv_alloc *a = dv__alloc_get();
  if (!a) return NULL;
  atomic_store_explicit(&a->refs, 1, memory_order_relaxed);
  a->ctx = ctx;
  a->kind = kind;
  return a;
}

/* Free memory obtained for an allocation that never got a descriptor. */
static void dv__alloc_abandon(dv_alloc *a) { dv__alloc_release(a); }

static inline void dv__array_fill(dv_array *a, dv_alloc *alloc, const dv_dtype *dt, int ndim, const int64_t *shape,
                                  const int64_t *strides, int64_t offset) {
  atomic_store_explicit(&a->refs, 1, memory_order_relaxed);
  a->alloc = alloc;
  a->dtype = dt;
  if (atomic_load_explicit(&dt->refs, memory_order_relaxed) >= 0) dv_dtype_retain(dt); /* builtins: -1 */
  a->ndim = ndim;
  a->offset = offset;
  a->shape = a->dims_;
  a->strides = a->dims_ + ndim;
  for (int i = 0; i < ndim; i++) a->shape[i] = shape[i], a->strides[i] = strides[i];
  /* last: a tracking listing on another thread may describe it from now on */
  dv__handle_open(&a->hdr, DV_HANDLE_ARRAY, alloc->ctx);
}

/* A tracked array for the core's listings (core/track.c): its dtype and
 * shape, its allocation's memory and bytes.  Reads the live descriptor. */
static void dv__array_describe(const void *h, dv_track_info *out) {
  const dv_array *a = h;
  out->memory = (int)a->alloc->kind;
  out->bytes = a->alloc->bytes;
  out->alloc = a->alloc;
  size_t n = (size_t)snprintf(out->what, sizeof out->what, "%s (", a->dtype->name ? a->dtype->name : "record");
  for (int i = 0; i < a->ndim && n < sizeof out->what; i++)
    n += (size_t)snprintf(out->what + n, sizeof out->what - n, "%s%lld", i ? ", " : "", (long long)a->shape[i]);
  if (n < sizeof out->what) snprintf(out->what + n, sizeof out->what - n, a->ndim == 1 ? ",)" : ")");
}

void dv__arrays_track_init(void) { dv__track_set_describer(dv__array_describe); }

dv_status dv__array_new(dv_alloc *alloc, const dv_dtype *dt, int ndim, const int64_t *shape,
                        const int64_t *strides, int64_t offset, dv_array **out) {
  dv_array *a = dv__malloc(sizeof *a + 2 * (size_t)ndim * sizeof(int64_t));
  if (!a) {
    *out = NULL;
    return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate an array descriptor");
  }
  atomic_fetch_add(&alloc->refs, 1);
  dv__array_fill(a, alloc, dt, ndim, shape, strides, offset);
  dv__stats_add(alloc->ctx, DV_STAT_ARRAYS, 1);
  *out = a;
  return DV_OK;
}

/* The descriptor inside a new record (ndim <= DV_EMBED_DIMS): it takes over
 * the caller's reference to the record; nothing is allocated.  The caller
 * counts it. */
static dv_array *dv__array_embed(dv_alloc *alloc, const dv_dtype *dt, int ndim, const int64_t *shape,
                                 const int64_t *strides, int64_t offset) {
  dv_array *a = (dv_array *)(void *)alloc->embed_;
  dv__array_fill(a, alloc, dt, ndim, shape, strides, offset);
  return a;
}

dv_array *dv_array_retain(dv_array *a) {
  if (a && dv__handle_check(&a->hdr, DV_HANDLE_ARRAY, __func__)) {
    dv__log(DV_LOG_ERROR, "%s", dv_last_error());
    return NULL;
  }
  if (a) atomic_fetch_add(&a->refs, 1);
  return a;
}

void dv_array_release(dv_array *a) {
  if (!a) return;
  if (DV_UNLIKELY(!dv__handle_live(&a->hdr, DV_HANDLE_ARRAY))) {
    dv__handle_report(&a->hdr, DV_HANDLE_ARRAY, __func__); /* a double release: nothing changes */
    return;
  }
  if (!dv__ref_drop(&a->refs)) return;
  dv__handle_close(&a->hdr, DV_HANDLE_ARRAY);
  dv_alloc *al = a->alloc;
  bool embedded = dv__array_embedded(a);
  if (atomic_load_explicit(&a->dtype->refs, memory_order_relaxed) >= 0) dv_dtype_release(a->dtype);
  if (!embedded)
    dv__handle_retire(a, sizeof *a + 2 * (size_t)a->ndim * sizeof(int64_t), 0, al->ctx && al->ctx->handles_checked,
                      NULL);
  dv__alloc_release_n(al, 1); /* last: an embedded descriptor goes with the record */
}

/* The general path of dv__check_layout: every layout, every message. */
static __attribute__((noinline)) dv_status dv__check_layout_any(int ndim, const int64_t *shape,
                                                               const dv_dtype *dtype, const int64_t *strides,
                                                               char order, int64_t *st, int64_t *alloc_bytes,
                                                               int64_t *offset) {
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

/* One dense dimension (most arrays made per call): what the general path
 * checks, in a few instructions, inlined where arrays are made; anything it
 * would refuse goes on to the general path for the message. */
static inline __attribute__((always_inline)) dv_status dv__check_layout_in(int ndim, const int64_t *shape,
                                                                          const dv_dtype *dtype,
                                                                          const int64_t *strides, char order,
                                                                          int64_t *st, int64_t *alloc_bytes,
                                                                          int64_t *offset) {
  int64_t n1;
  if (ndim == 1 && !strides && shape && dtype && shape[0] >= 0 && dtype->itemsize > 0 &&
      (order == 'C' || order == 'F') && !dv__mul_overflow(shape[0], (int64_t)dtype->itemsize, &n1)) {
    st[0] = (int64_t)dtype->itemsize;
    *alloc_bytes = n1;
    *offset = 0;
    return DV_OK;
  }
  return dv__check_layout_any(ndim, shape, dtype, strides, order, st, alloc_bytes, offset);
}

/* Validate (ndim, shape, dtype, strides, order) and compute the strides,
 * the allocation size and the offset of element 0. */
dv_status dv__check_layout(int ndim, const int64_t *shape, const dv_dtype *dtype, const int64_t *strides,
                           char order, int64_t *st, int64_t *alloc_bytes, int64_t *offset) {
  return dv__check_layout_in(ndim, shape, dtype, strides, order, st, alloc_bytes, offset);
}

dv_status dv__array_create(dv_context *ctx, dv_memory_kind kind, int ndim, const int64_t *shape,
                           const dv_dtype *dtype, const int64_t *strides, char order,
                           unsigned flags, dv_stream *stream, dv_array **out) {
  int64_t st[DV_MAXDIMS], bytes = 0, offset = 0;
  dv_status rc = dv__check_layout_in(ndim, shape, dtype, strides, order, st, &bytes, &offset);
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
        if (!rc) a->opaque = !dv__mm_block_known(ctx, blk, (size_t)bytes);
        /* The stream its free is ordered after; the per-thread default
         * stream too (the pool keeps it apart: issue 13 #5). */
        if (!rc && stream && (!stream->is_default || stream == dv__per_thread_stream(ctx)))
          a->stream = dv__stream_iretain(stream);
      }
      /* counted with its descriptor below when that is embedded (one lock) */
      if (!rc && ndim > DV_EMBED_DIMS) dv__stats_add(ctx, DV_STAT_DEVICE, (uint64_t)bytes);
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
      a->pooled = !rc && dv__pinned_on(ctx);
      break;
    }
    case DV_MEM_MANAGED:
      if (!dv__be_has(ctx->be, DV_BCAP_MANAGED)) {
        rc = dv__error(DV_ERR_NOT_SUPPORTED, "managed memory is not supported by backend %s", ctx->be->name);
        break;
      }
      if (dv__in_callback()) { /* devarray.h, dv_stream_add_callback */
        rc = dv__callback_refused("an allocation of managed memory");
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
  dv__alloc_note(ctx, a, DV_MEMORY_ALLOC);
  if (ndim <= DV_EMBED_DIMS) {
    *out = dv__array_embed(a, dtype, ndim, shape, st, offset); /* it holds the record now */
    if (kind == DV_MEM_DEVICE) dv__stats_add2(ctx, DV_STAT_ARRAYS, 1, DV_STAT_DEVICE, (uint64_t)bytes);
    else dv__stats_add(ctx, DV_STAT_ARRAYS, 1);
    return DV_OK;
  }
  rc = dv__array_new(a, dtype, ndim, shape, st, offset, out);
  dv__alloc_release(a); /* the descriptor holds it now, or it goes */
  return rc;
}

/* A device view whose memory is gone (a mapped scope that has ended) is bad
 * input; entry points that would allocate for it check this first, so that
 * the refusal changes nothing.  Size-0 arrays have no memory to lose. */
dv_status dv__check_live_slow(const dv_array *a, const char *what) {
  if (!dv__is_host_side(a) && !a->alloc->buf && dv_array_size(a) > 0)
    return dv__error(DV_ERR_INVALID_ARGUMENT,
                     "the %s is a device view of host memory whose mapped scope has ended", what);
  if (a->alloc->opaque) return dv__opaque_error(a, what);
  return DV_OK;
}

dv_status dv__opaque_error(const dv_array *a, const char *what) {
  const dv_context *ctx = a->alloc->ctx;
  return dv__error(DV_ERR_INVALID_ARGUMENT,
                   "the %s's memory came from the memory manager \"%s\" as buffer %p, which is "
                   "not device memory of the %s backend: devarray cannot read, write or export it",
                   what, ctx->memory->mm.name ? ctx->memory->mm.name : "?", a->alloc->buf, ctx->be->name);
}

/* ---- creation API ------------------------------------------------------------ */

dv_status dv_device_array(dv_context *ctx, int ndim, const int64_t *shape, const dv_dtype *dtype,
                          const int64_t *strides, char order, dv_stream *stream, dv_array **out) {
  DV_CHECK_NULL(out);
  *out = NULL;
  DV_CHECK_NULL(ctx);
  DV_CHECK_HANDLE(ctx, DV_HANDLE_CONTEXT);
  dv_status rc = dv__check_stream(ctx, stream);
  if (rc) return rc;
  return dv__array_create(ctx, DV_MEM_DEVICE, ndim, shape, dtype, strides, order, 0, stream, out);
}

void dv__like_strides(const dv_array *a, int64_t *st) {
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
  DV_CHECK_ARRAY(a);
  int64_t st[DV_MAXDIMS];
  dv__like_strides(a, st);
  return dv_device_array(a->alloc->ctx, a->ndim, a->shape, a->dtype, st, 'C', stream, out);
}

dv_status dv_device_record(dv_context *ctx, const dv_dtype *dtype, dv_stream *stream, dv_array **out) {
  DV_CHECK_NULL(out);
  *out = NULL;
  DV_CHECK_NULL(ctx);
  DV_CHECK_HANDLE(ctx, DV_HANDLE_CONTEXT);
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
  DV_CHECK_HANDLE(ctx, DV_HANDLE_CONTEXT);
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
  DV_CHECK_HANDLE(ctx, DV_HANDLE_CONTEXT);
  return dv__array_create(ctx, DV_MEM_MANAGED, ndim, shape, dtype, strides, order, attach_global ? 1u : 0u, NULL, out);
}

dv_status dv_mapped_array(dv_context *ctx, int ndim, const int64_t *shape, const dv_dtype *dtype,
                          const int64_t *strides, char order, unsigned flags, dv_array **out) {
  DV_CHECK_NULL(out);
  *out = NULL;
  DV_CHECK_NULL(ctx);
  DV_CHECK_HANDLE(ctx, DV_HANDLE_CONTEXT);
  if (flags & ~(DV_MAPPED_PORTABLE | DV_MAPPED_WRITECOMBINED))
    return dv__error(DV_ERR_INVALID_ARGUMENT, "unknown mapped-array flags 0x%x", flags);
  return dv__array_create(ctx, DV_MEM_MAPPED, ndim, shape, dtype, strides, order, flags, NULL, out);
}

/* ---- accessors ------------------------------------------------------------------ */

/* The accessors that cannot fail answer as for NULL when a was released
 * (and set the thread's message, dv_last_error). */
static inline bool dv__array_ok(const dv_array *a, const char *fn) {
  return a && !dv__handle_check(&a->hdr, DV_HANDLE_ARRAY, fn);
}
int dv_array_ndim(const dv_array *a) { return dv__array_ok(a, __func__) ? a->ndim : 0; }
const int64_t *dv_array_shape(const dv_array *a) { return dv__array_ok(a, __func__) && a->ndim ? a->shape : NULL; }
const int64_t *dv_array_strides(const dv_array *a) {
  return dv__array_ok(a, __func__) && a->ndim ? a->strides : NULL;
}
const dv_dtype *dv_array_dtype(const dv_array *a) { return dv__array_ok(a, __func__) ? a->dtype : NULL; }
dv_memory_kind dv_array_memory(const dv_array *a) {
  return dv__array_ok(a, __func__) ? a->alloc->kind : DV_MEM_DEVICE;
}
dv_context *dv_array_context(const dv_array *a) { return dv__array_ok(a, __func__) ? a->alloc->ctx : NULL; }

int64_t dv_array_size(const dv_array *a) {
  if (!dv__array_ok(a, __func__)) return 0;
  int64_t n = 1;
  for (int i = 0; i < a->ndim; i++) n *= a->shape[i]; /* checked at creation */
  return n;
}

int64_t dv_array_nbytes(const dv_array *a) { return dv__array_ok(a, __func__) ? dv_array_size(a) * (int64_t)a->dtype->itemsize : 0; }

int dv_array_is_c_contiguous(const dv_array *a) {
  return dv__array_ok(a, __func__) && dv__layout_is_c(a->ndim, a->shape, a->strides, (int64_t)a->dtype->itemsize);
}
int dv_array_is_f_contiguous(const dv_array *a) {
  return dv__array_ok(a, __func__) && dv__layout_is_f(a->ndim, a->shape, a->strides, (int64_t)a->dtype->itemsize);
}

dv_status dv_array_host_data(const dv_array *a, void **ptr) {
  DV_CHECK_NULL(ptr);
  *ptr = NULL;
  DV_CHECK_NULL(a);
  DV_CHECK_ARRAY(a);
  if (a->alloc->kind == DV_MEM_DEVICE)
    return dv__error(DV_ERR_MISUSE, "the array lives in device memory; copy it to the host first");
  *ptr = (char *)a->alloc->host + a->offset;
  return DV_OK;
}
