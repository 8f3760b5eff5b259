/*
 * The memory layer: device memory through the context's memory manager
 * (manager.c, with the built-in direct manager and the pool, pool.c, both
 * over the driver's own allocations, device.c), page-locked and registered
 * host memory (hostmem.c) with the pinned pool beneath it (pinned_pool.c),
 * and the planner's pinned staging pool (staging.c).  Above the streams: the pool orders its reuse by stream,
 * keeping its record of each stream in a stream slot (src/stream/).  Its
 * part of the context is struct dv_memory_state (below, ctx->memory).
 */
#ifndef DV_MEMORY_H
#define DV_MEMORY_H

#include "../backends/backend.h"
#include "../core/core.h"
#include "../stream/stream.h"

/* ---- memory managers (manager.c, pool.c) ---- */
extern const dv_memory_manager dv__mm_direct;
extern const dv_memory_manager dv__mm_pool;
/* The driver's stream-ordered pool (async.c; backends with DV_BCAP_DRIVER_POOL). */
extern const dv_memory_manager dv__mm_async;
/* Bytes the async manager has handed out now (the memory limit's "held"). */
void dv__async_held(void *state, uint64_t *held);
/* The pool's JSON snapshot (pool.c). */
dv_status dv__pool_snapshot(void *state, char *buf, size_t cap, size_t *needed);
/* The driver's device memory for the built-in managers (device.c):
 * dv_backend_alloc without the handle check, so that the pool can take its
 * reserve while the context is being made. */
dv_status dv__backend_alloc(dv_context *ctx, size_t bytes, dv_block *out);
dv_status dv__backend_free(dv_context *ctx, dv_block block);
/* Device memory through the context's manager, with Numba's one
 * flush-and-retry on out-of-memory. */
dv_status dv__device_alloc(dv_context *ctx, size_t bytes, dv_stream *stream, dv_block *out);

/* ---- host memory (hostmem.c): the backend's, counted in the statistics ---- */
/* Page-locked memory; with DV_HOSTMEM_MAPPED also device-addressable
 * (*dev_buf, which may then be NULL only where the backend cannot map).
 * Counted as mapped or pinned bytes by that flag. */
dv_status dv__host_alloc(dv_context *ctx, size_t bytes, unsigned flags, void **handle, void **ptr,
                         void **dev_buf);
dv_status dv__host_free(dv_context *ctx, void *handle, size_t bytes, unsigned flags);
/* Page-lock (and map) existing memory; counted as registered bytes. */
dv_status dv__host_register(dv_context *ctx, void *ptr, size_t bytes, void **handle, void **dev_buf);
dv_status dv__host_unregister(dv_context *ctx, void *handle, size_t bytes);

/* ---- the pinned pool (pinned_pool.c), beneath dv__host_alloc/_free ---- */
/* Async streams a pooled block keeps a record of; used on more, it waits for
 * the whole device before its reuse. */
#define DV_PINNED_USES 4
/* Size classes: 512 bytes, then eight per power of two up to 1 TiB (a class
 * holds at most 1/8 more than is asked above 512 bytes); larger requests
 * are served outside the pool. */
#define DV_PINNED_CLASSES 249
/* A block of pinned (or mapped) host memory the pool hands out: the handle
 * dv__host_alloc returns when the pool is on, which dv__host_free takes. */
typedef struct dv_pinned_block dv_pinned_block;
struct dv_pinned_block {
  void *handle;   /* the backend's (NULL: carved from the reserve) */
  void *ptr;      /* host address */
  void *dev_buf;  /* device buffer of mapped memory (else NULL) */
  size_t size;    /* bytes it holds (its class's size) */
  unsigned flags; /* the DV_HOSTMEM_* it was made with: reused for the same flags only */
  int cls;        /* size class; -1: outside the pool (freed at its release) */
  /* Asynchronous streams whose queued work used it since it was handed out
   * (retained; dv__pinned_used), and whether more did, or work devarray
   * cannot see (a DLPack consumer's): `wide`, the device's whole queue. */
  dv_stream *_Atomic used[DV_PINNED_USES];
  _Atomic bool wide;
  /* Set at its free: one event per stream of used[], recorded then (kept
   * for the block's next frees); reusable once they have completed, and a
   * wide block once the device has been waited for after its free. */
  dv_bevent *fence[DV_PINNED_USES];
  int nfence;      /* fences not yet seen complete */
  bool wait;       /* wide at its free: needs a wait for the device */
  uint64_t seq;    /* the pool's free sequence number when it went back */
  dv_pinned_block *next;
};
typedef struct dv_pinned_pool {
  bool on;                 /* option pinned_pool, fixed for the context's life */
  pthread_mutex_t m;       /* everything below */
  dv_pinned_block *free[DV_PINNED_CLASSES]; /* free blocks by class, newest first */
  size_t limit, reserve;   /* bytes (limit: held, in use and cached together) */
  /* the reserve: one page-locked allocation made at creation, carved into
   * blocks of plain pinned memory; never freed before the context goes */
  void *arena_handle;
  char *arena_ptr;
  size_t arena_used;
  uint64_t seq, waited_upto; /* frees so far; the wide ones up to this are done */
  /* statistics (bytes of blocks: class sizes) */
  dv_counter held, in_use;
  uint64_t cached, pending, free_blocks, hits, misses, uncached, waits, releases;
} dv_pinned_pool;
/* Ready the pool (options pinned_pool*, the reserve allocated); on failure
 * nothing is left.  Fini frees every block and the reserve; the context has
 * no pinned array left then. */
dv_status dv__pinned_init(dv_context *ctx, dv_pinned_pool *p);
void dv__pinned_fini(dv_context *ctx, dv_pinned_pool *p);
/* What dv__host_alloc / dv__host_free do when the pool is on (*handle: the
 * block).  The free records the block's fences; it never waits. */
dv_status dv__pinned_alloc(dv_context *ctx, size_t bytes, unsigned flags, void **handle, void **ptr,
                           void **dev_buf);
dv_status dv__pinned_free(dv_context *ctx, void *handle);
/* Return cached blocks to the driver (every one but the reserve's). */
dv_status dv__pinned_trim(dv_context *ctx);
/* Whether the context's pinned and mapped memory comes from the pool. */
static inline bool dv__pinned_on(const dv_context *ctx);
/* Work queued on stream s (not NULL: an asynchronous one) uses block
 * `handle` of the pool: its reuse waits for that work (the array layer says
 * so: dv__alloc_after, src/array/array.h).  The quick test first, exact
 * where it says yes. */
static inline bool dv__pinned_known_use(const void *handle, const dv_stream *s) {
  const dv_pinned_block *b = handle;
  return atomic_load_explicit(&b->used[0], memory_order_relaxed) == s ||
         atomic_load_explicit(&b->wide, memory_order_relaxed);
}
void dv__pinned_used(void *handle, dv_stream *s);
/* Work devarray cannot see may use it (exported through DLPack): its reuse
 * waits for the whole device. */
void dv__pinned_used_outside(void *handle);

/* ---- pinned staging pool (staging.c) ---- */
#define DV_STAGING_CLASSES 16 /* 64 KiB .. 2 GiB */
typedef struct dv_staging_buf {
  void *ptr, *handle;
  size_t size;
  int cls;
  struct dv_staging_buf *next;
} dv_staging_buf;
typedef struct dv_staging {
  pthread_mutex_t m;
  dv_staging_buf *free[DV_STAGING_CLASSES];
  size_t cached, reserved;
} dv_staging;
dv_status dv__staging_get(dv_context *ctx, size_t bytes, dv_staging_buf **out);
void dv__staging_put(dv_context *ctx, dv_staging_buf *b); /* safe from stream callbacks */
/* Ready an empty pool; free every buffer it caches (dv__memory_init, _fini). */
void dv__staging_init(dv_staging *st);
void dv__staging_fini(dv_context *ctx, dv_staging *st);

/* ---- hooks, scoped statistics, the out-of-memory handler (events.c) ---- */
typedef struct dv_mem_hook {
  int id;
  dv_memory_hook_fn fn;
  void *user;
} dv_mem_hook;
typedef struct dv_mem_events {
  pthread_mutex_t hooks_lock; /* hooks, nhooks, cap, next_id; held while hooks run */
  dv_mem_hook *hooks;
  int nhooks, cap, next_id;
  _Atomic int nhooks_on;       /* nhooks, read without the lock */
  pthread_mutex_t scope_lock;  /* scopes, ndepth */
  dv_memory_scope_stats *scopes; /* DV_SCOPES_MAX, made at the first push */
  int ndepth;
  _Atomic int depth;           /* ndepth, read without the lock */
  pthread_mutex_t oom_lock;    /* the handler */
  dv_oom_fn oom;
  void *oom_user;
  int oom_max;
} dv_mem_events;
void dv__mem_events_init(dv_mem_events *e);
void dv__mem_events_fini(dv_mem_events *e);
/* Scopes and hooks hear of the event (the caller tested `events_on`). */
void dv__mem_dispatch(dv_context *ctx, const dv_memory_event *ev);
/* After devarray's own flush and retry failed: the handler's tries
 * (*asked: how often it was called); the last allocation's status. */
dv_status dv__mem_oom_retry(dv_context *ctx, size_t bytes, dv_stream *stream, dv_block *out, int *asked);

/* ---- the memory layer's part of the context (ctx->memory, manager.c) ---- */
struct dv_memory_state {
  /* hooks installed plus scopes open: the one load an allocation's or a
   * free's event costs while there are none (dv__mem_note) */
  _Atomic int events_on;
  dv_memory_manager mm; /* a copy of the table */
  void *mm_state;
  dv_staging staging; /* the pinned staging pool */
  dv_mem_events events;
  /* the memory limit (0: none) and what the direct manager holds against it */
  _Atomic size_t limit;
  _Atomic size_t direct_held;
  dv_pinned_pool pinned; /* the pinned pool (pinned and mapped arrays) */
  /* the stream key whose destruction call tells the manager
   * (mm.stream_destroyed); -1 when it has none */
  int hook_key;
};
/* The context's manager (cfg's plugged-in one, or the built-in one the
 * memory_manager option names), its state, the pinned pool (its reserve
 * allocated) and the staging pool; on failure
 * nothing is left.  Needs the stream layer's state (dv__streams_open). */
dv_status dv__memory_init(dv_context *ctx, const dv_config *cfg);
/* The manager's fini (it returns every cached segment), the pinned pool's
 * blocks, the staging pool's buffers, the record (nothing if init failed). */
void dv__memory_fini(dv_context *ctx);

/* Tell the hooks and scopes of an allocation or a free (see
 * dv_memory_event in devarray.h): nothing but a load and a branch while
 * none is installed. */
static inline void dv__mem_note(dv_context *ctx, dv_memory_event_kind ev, dv_memory_kind kind, size_t bytes,
                                void *address, size_t offset, dv_stream *stream) {
  dv_memory_state *m = ctx->memory;
  if (DV_LIKELY(atomic_load_explicit(&m->events_on, memory_order_relaxed) == 0)) return;
  dv_memory_event e = {ev, kind, bytes, address, offset, stream, kind == DV_MEM_DEVICE ? m->mm.name : "driver"};
  dv__mem_dispatch(ctx, &e);
}
static inline bool dv__mem_events_on(dv_context *ctx) {
  return atomic_load_explicit(&ctx->memory->events_on, memory_order_relaxed) != 0;
}
/* One more (+1) or one fewer (-1) hook or open scope: by deltas, so that a
 * hook's change and a scope's on two threads never undo each other. */
static inline void dv__mem_events_count(dv_memory_state *m, int delta) { atomic_fetch_add(&m->events_on, delta); }

/* ---- the memory limit (set in manager.c, checked in device.c) ---- */
/* DV_OK when a built-in manager holding `held` bytes (`cached` of them free
 * in its cache) may take `more` from the driver; else DV_ERR_OUT_OF_MEMORY
 * saying the limit, what is held and what is cached. */
dv_status dv__mm_limit_check(dv_context *ctx, uint64_t held, uint64_t cached, size_t more);
/* The pool's held and cached bytes (pool.c). */
void dv__pool_held(void *state, uint64_t *held, uint64_t *cached);
static inline bool dv__pinned_on(const dv_context *ctx) { return ctx->memory->pinned.on; }

/* ---- the stream order of memory in use (manager.c) ---- */
/* Whether the context's manager reuses a freed block in the order of the
 * stream it was allocated for: every manager but "direct" (the pool, the
 * async manager, a plug-in).  The direct manager frees through the pending-deallocation
 * queue to the driver, which keeps memory that queued work uses alive. */
static inline bool dv__mm_stream_ordered(const dv_context *ctx) {
  return ctx->memory->mm.alloc != dv__mm_direct.alloc;
}
/* Work using a block such a manager gave to a stream is followed by that
 * stream's wait for it (dv__stream_order_after, src/stream/, on the streams
 * the array layer names: dv__alloc_after, src/array/array.h).  A block
 * released meanwhile then goes back to its stream behind that work, so
 * neither its stream (at once) nor another (after the stream's fence) gets
 * it before the work is done. */

/* Whether block `blk` of `bytes` from the context's manager is device
 * memory of the backend (a buffer its mem_alloc made, holding the block):
 * always for the built-in managers, which allocate from the backend; for a
 * plugged-in one, as the backend's buffer_check says (a backend without one
 * takes its buffers as device addresses the driver validates:
 * dv__mm_block_check).  A block that is not is carried but never handed to
 * the backend (dv_alloc.opaque). */
bool dv__mm_block_check(dv_context *ctx, dv_block blk, size_t bytes);
static inline bool dv__mm_block_known(dv_context *ctx, dv_block blk, size_t bytes) {
  dv_status (*a)(void *, size_t, dv_stream *, dv_block *) = ctx->memory->mm.alloc;
  return a == dv__mm_direct.alloc || a == dv__mm_pool.alloc || a == dv__mm_async.alloc ||
         dv__mm_block_check(ctx, blk, bytes);
}

#endif
