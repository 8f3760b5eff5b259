/*
 * The "async" memory manager: device memory from the driver's own
 * stream-ordered pool (CUDA's cuMemAllocFromPoolAsync / cuMemFreeAsync,
 * HIP's hipMallocFromPoolAsync / hipFreeAsync: the backend's DRIVER_POOL
 * group), as RMM's cuda_async_memory_resource and CuPy's MemoryAsyncPool
 * use it.  The driver caches, splits and reuses; this file names the pool
 * (option async_pool), sets its release threshold (async_release_threshold),
 * keeps the exact requested-bytes counters and the memory limit, and reads
 * the pool's reserved and used bytes for the statistics.
 *
 * Stream order, by the rules every manager but "direct" follows
 * (memory.h, dv__mm_stream_ordered): an allocation is usable in the order
 * of the stream it was made for; work on other streams that uses it makes
 * that stream wait for it (the array layer and the stream layer do that),
 * so its free, queued on that stream (cuMemFreeAsync) when the
 * pending-deallocation queue runs, comes after all of that work.  The
 * driver then reuses the memory at once on the same stream and, on
 * another, once the free has completed.  The per-thread default stream's
 * memory is allocated and freed on the legacy stream (which every
 * blocking stream, each thread's per-thread stream included, synchronizes
 * with): a free runs on whichever thread flushes the queue, where the
 * per-thread handle would name that thread's stream.
 *
 * The host simulator and OpenCL have no such pool: the manager is refused
 * there (DV_ERR_NOT_SUPPORTED at context creation), not mapped onto
 * devarray's own pool, whose name is "pool".
 */
#include <stdio.h>
#include <string.h>

#include "../core/spin.h"
#include "memory.h"

typedef struct async_mm {
  dv_context *ctx;
  void *pool; /* the backend's record of the driver pool */
  dv_spin m;  /* the counters below */
  dv_counter allocated;
  uint64_t allocs, trims;
  _Atomic uint64_t held; /* allocated.current, read without the lock (the memory limit) */
} async_mm;

/* The backend stream memory for `s` is allocated and freed on. */
static dv_bstream *async_bs(dv_context *ctx, dv_stream *s) {
  dv_stream *pt = dv__per_thread_stream(ctx);
  if (s == pt && pt->bs != dv__default_stream(ctx)->bs) return dv__legacy_stream(ctx)->bs;
  return dv__bstream(ctx, s);
}

static dv_status async_init(dv_context *ctx, void *user, void **state) {
  (void)user;
  *state = NULL;
  if (!dv__be_has(ctx->be, DV_BCAP_DRIVER_POOL))
    return dv__error(DV_ERR_NOT_SUPPORTED,
                     "memory_manager=async needs the CUDA or HIP driver's stream-ordered pool; the "
                     "%s backend has "
                     "none: use memory_manager=pool (devarray's own stream-ordered pool)",
                     ctx->be->name);
  const char *which = ctx->opt[DV_OPT_ASYNC_POOL].s;
  dv_bpool_config c = {DV_BPOOL_PRIVATE, true,
                       (uint64_t)ctx->opt[DV_OPT_ASYNC_RELEASE_THRESHOLD].i};
  if (!strcmp(which, "default"))
    c.kind = DV_BPOOL_DEFAULT;
  else if (!strcmp(which, "current"))
    c.kind = DV_BPOOL_CURRENT;
  /* a pool the device shares keeps its own threshold unless one was given */
  if (c.kind != DV_BPOOL_PRIVATE)
    c.set_threshold = ctx->opt[DV_OPT_ASYNC_RELEASE_THRESHOLD].source != DV_SOURCE_DEFAULT;
  async_mm *a = dv__calloc(1, sizeof *a);
  if (!a) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate the async manager's state");
  a->ctx = ctx;
  dv__spin_init(&a->m);
  dv_status rc = ctx->be->pool_open(ctx->bst, &c, &a->pool);
  if (rc) {
    dv__free(a);
    return rc;
  }
  *state = a;
  return DV_OK;
}

static void async_fini(void *state) {
  async_mm *a = state;
  dv_context *ctx = a->ctx;
  dv__bstream_wait(ctx, NULL); /* every queued free has run */
  if (atomic_load(&a->held))
    dv__log(DV_LOG_WARN, "async manager: %llu bytes still allocated at close",
            (unsigned long long)atomic_load(&a->held));
  ctx->be->pool_close(ctx->bst, a->pool);
  dv__free(a);
}

static dv_status async_take(async_mm *a, size_t bytes, dv_bstream *bs, void **buf) {
  dv_context *ctx = a->ctx;
  dv_status rc = ctx->be->alloc_async(ctx->bst, a->pool, bs, bytes, buf);
  if (rc != DV_ERR_OUT_OF_MEMORY) return rc;
  /* Frees queued on other streams become reusable once they have run, and
   * memory the pool holds beyond this request may sit in pieces: wait for
   * the device, give the pool's free memory back, try once more. */
  char why[512];
  snprintf(why, sizeof why, "%s", dv_last_error());
  if (dv__bstream_wait(ctx, NULL) || ctx->be->pool_trim(ctx->bst, a->pool, 0))
    return dv__error(DV_ERR_OUT_OF_MEMORY, "%s", why);
  dv__spin_lock(&a->m);
  a->trims++;
  dv__spin_unlock(&a->m);
  return ctx->be->alloc_async(ctx->bst, a->pool, bs, bytes, buf);
}

static dv_status async_alloc(void *state, size_t bytes, dv_stream *stream, dv_block *out) {
  async_mm *a = state;
  dv_context *ctx = a->ctx;
  *out = (dv_block){NULL, 0, NULL};
  if (bytes == 0) return dv__error(DV_ERR_INVALID_ARGUMENT, "allocation of 0 bytes");
  /* On a stream that captures a graph the driver's allocation would be the
   * graph's (an allocation node: its memory exists only while a launch of
   * the graph runs), not an array's: not graph-safe, refused before the
   * driver is asked (the capture goes on). */
  if (stream && stream->capture)
    return dv__capture_refused("an allocation from the async manager (stream-ordered: on a capturing stream it "
                               "would be the graph's own; allocate before the capture or on another stream)");
  /* under a memory limit: count first, so that two threads cannot both pass it */
  uint64_t held = atomic_fetch_add(&a->held, bytes);
  dv_status rc = dv__mm_limit_check(ctx, held, 0, bytes);
  if (!rc) rc = async_take(a, bytes, async_bs(ctx, stream), &out->buf);
  if (rc) {
    atomic_fetch_sub(&a->held, bytes);
    out->buf = NULL;
    return rc;
  }
  dv__spin_lock(&a->m);
  a->allocated.current += bytes;
  a->allocated.total += bytes;
  if (a->allocated.current > a->allocated.peak) a->allocated.peak = a->allocated.current;
  a->allocs++;
  dv__spin_unlock(&a->m);
  return DV_OK;
}

static dv_status async_free(void *state, dv_block blk, size_t bytes, dv_stream *stream) {
  async_mm *a = state;
  dv_context *ctx = a->ctx;
  if (!blk.buf) return dv__error(DV_ERR_INVALID_ARGUMENT, "free of a NULL device buffer");
  /* counted gone whatever the driver says: the block is not the caller's any more */
  dv_status rc = ctx->be->free_async(ctx->bst, async_bs(ctx, stream), blk.buf);
  atomic_fetch_sub(&a->held, bytes);
  dv__spin_lock(&a->m);
  a->allocated.current -= bytes;
  dv__spin_unlock(&a->m);
  return rc;
}

static dv_status async_mem_info(void *state, size_t *free_bytes, size_t *total_bytes) {
  async_mm *a = state;
  dv_context *ctx = a->ctx;
  dv_status rc = dv_backend_memory_info(ctx, free_bytes, total_bytes);
  dv_bpool_stats ps;
  if (!rc && ctx->be->pool_stats(ctx->bst, a->pool, &ps) == DV_OK && ps.reserved > ps.used)
    *free_bytes += (size_t)(ps.reserved - ps.used); /* held free by the pool: available to arrays */
  return rc;
}

static dv_status async_stats(void *state, dv_mm_stats *out) {
  async_mm *a = state;
  dv_context *ctx = a->ctx;
  dv_bpool_stats ps;
  dv_status rc = ctx->be->pool_stats(ctx->bst, a->pool, &ps);
  if (rc) return rc;
  dv__spin_lock(&a->m);
  out->allocated = a->allocated;
  out->misses = a->allocs; /* every allocation asks the driver */
  out->releases = a->trims;
  dv__spin_unlock(&a->m);
  /* the driver's own figures: no totals kept */
  out->active = (dv_counter){ps.used, ps.used_high, 0};
  out->reserved = (dv_counter){ps.reserved, ps.reserved_high, 0};
  out->free_cached = ps.reserved > ps.used ? ps.reserved - ps.used : 0;
  return DV_OK;
}

static dv_status async_trim(void *state) {
  async_mm *a = state;
  dv_context *ctx = a->ctx;
  dv_status rc = dv__bstream_wait(ctx, NULL); /* the frees queued so far have run */
  dv_status r2 = ctx->be->pool_trim(ctx->bst, a->pool, 0);
  if (!r2) {
    dv__spin_lock(&a->m);
    a->trims++;
    dv__spin_unlock(&a->m);
  }
  return rc ? rc : r2;
}

void dv__async_held(void *state, uint64_t *held) {
  *held = atomic_load(&((async_mm *)state)->held);
}

const dv_memory_manager dv__mm_async = {
    .version = DV_MEMORY_MANAGER_VERSION,
    .name = "async",
    .init = async_init,
    .fini = async_fini,
    .alloc = async_alloc,
    .free = async_free,
    .mem_info = async_mem_info,
    .stats = async_stats,
    .trim = async_trim,
};
