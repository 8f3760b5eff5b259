/*
 * Numba's pending-deallocation queue, kept exactly:
 *  - one queue for everything (device, mapped and managed memory with their
 *    bytes; pinned memory, streams and events with 0 bytes), so the count
 *    limit bounds all of them together;
 *  - entries are queued when the last reference goes;
 *  - the enqueue itself flushes when the count is strictly greater than the
 *    count limit or the bytes strictly greater than ratio x total memory;
 *  - defer-cleanup scopes nest through a counter; while one is open nothing
 *    is flushed, and leaving the outermost does not flush.
 * Where devarray differs on purpose: a failing free is logged and counted and
 * every other free is still attempted.
 *
 * The two limits are options of the context, changeable while it lives
 * (dv_context_set_dealloc_limits): they are read and written under the
 * context's lock, and a change is seen by the next enqueue, as Numba reads
 * its config at each enqueue; changing them flushes nothing by itself.
 *
 * The queue lives in the core because every layer hands it destructors:
 * arrays their memory, streams and events themselves.  It runs them through
 * the function pointers it was given and knows none of them.
 */
#include <string.h>

#include "core.h"

/* Numba: int(total_memory * ratio), which Numba recomputes per check;
 * here whenever the ratio changes (caller holds ctx->lock). */
void dv__pending_limits_set(dv_context *ctx) {
  double limit = (double)ctx->total_memory * ctx->opt[DV_OPT_MAX_PENDING_RATIO].d;
  ctx->pending_byte_limit = (size_t)limit;
}

static bool dv__over_limit(dv_context *ctx, const dv_pending_queue *q) {
  int64_t count_limit = ctx->opt[DV_OPT_MAX_PENDING_COUNT].i;
  return (int64_t)q->count > count_limit || q->bytes > ctx->pending_byte_limit;
}

/* Run the entries taken out of a queue; returns the first error. */
static dv_status dv__run_entries(dv_context *ctx, dv_pending_entry *items, size_t n) {
  dv_status first = DV_OK;
  for (size_t i = 0; i < n; i++) {
    dv_status rc = items[i].fn(ctx, items[i].handle, items[i].aux);
    if (rc) {
      dv__log(DV_LOG_ERROR, "deferred free failed: %s: %s", dv_status_name(rc), dv_last_error());
      pthread_mutex_lock(&ctx->stats.lock);
      ctx->stats.failed_frees++;
      pthread_mutex_unlock(&ctx->stats.lock);
      if (!first) first = rc;
    }
  }
  return first;
}

/* Entries a flush copies out to its own stack, leaving the queue its
 * array (no malloc and free of the array per flush); a longer queue hands
 * its array over. */
enum { DV_TAKE_LOCAL = 32 };

/* Take every entry out of q (caller holds ctx->lock): into local[] when they
 * fit, else the queue's array itself (returned; the caller frees it). */
static dv_pending_entry *dv__take(dv_context *ctx, dv_pending_queue *q, dv_pending_entry *local, size_t *n,
                                  dv_pending_entry **owned) {
  *n = q->count;
  *owned = NULL;
  if (q->count) ctx->stats.flushes++;
  dv_pending_entry *items = local;
  if (q->count <= DV_TAKE_LOCAL) {
    if (q->count) memcpy(local, q->items, q->count * sizeof *local);
  } else {
    items = *owned = q->items;
    q->items = NULL;
    q->cap = 0;
  }
  q->count = q->bytes = 0;
  return items;
}

static dv_status dv__flush_taken(dv_context *ctx, dv_pending_entry *items, size_t n, dv_pending_entry *owned) {
  dv_status rc = dv__run_entries(ctx, items, n);
  dv__free(owned);
  return rc;
}

dv_status dv__defer_free(dv_context *ctx, dv_dtor_fn fn, void *handle, void *aux, size_t bytes) {
  return dv__defer_free_counted(ctx, fn, handle, aux, bytes, DV_STAT_KINDS, 0);
}

dv_status dv__defer_free_counted(dv_context *ctx, dv_dtor_fn fn, void *handle, void *aux, size_t bytes,
                                 dv_stat_kind stat, uint64_t stat_n) {
  dv_pending_queue *q = &ctx->pending;
  dv__spin_lock(&ctx->lock);
  if (stat_n) dv__stats_sub_locked(ctx, stat, stat_n); /* the statistics live under this lock too */
  if (q->count == q->cap) {
    size_t ncap = q->cap ? q->cap * 2 : 16;
    dv_pending_entry *n = dv__malloc(ncap * sizeof *n);
    if (!n) {
      /* Cannot queue: free at once rather than leak. */
      dv__spin_unlock(&ctx->lock);
      dv__log(DV_LOG_WARN, "pending-deallocation queue could not grow; freeing at once");
      dv_status rc = fn(ctx, handle, aux);
      if (rc) dv__log(DV_LOG_ERROR, "free failed: %s", dv_last_error());
      return rc;
    }
    if (q->count) memcpy(n, q->items, q->count * sizeof *n);
    dv__free(q->items);
    q->items = n;
    q->cap = ncap;
  }
  q->items[q->count++] = (dv_pending_entry){fn, handle, aux, bytes};
  q->bytes += bytes;
  /* the peak is kept under this lock, with the queue */
  if (q->count > ctx->stats.pending_peak) ctx->stats.pending_peak = q->count;
  if (ctx->defer_depth > 0 || !dv__over_limit(ctx, q)) {
    dv__spin_unlock(&ctx->lock);
    return DV_OK;
  }
  size_t n;
  dv_pending_entry local[DV_TAKE_LOCAL], *owned;
  dv_pending_entry *items = dv__take(ctx, q, local, &n, &owned);
  dv__spin_unlock(&ctx->lock);
  return dv__flush_taken(ctx, items, n, owned);
}

dv_status dv__flush(dv_context *ctx) {
  dv__spin_lock(&ctx->lock);
  if (ctx->defer_depth > 0) {
    dv__spin_unlock(&ctx->lock);
    return DV_OK;
  }
  size_t n;
  dv_pending_entry local[DV_TAKE_LOCAL], *owned;
  dv_pending_entry *items = dv__take(ctx, &ctx->pending, local, &n, &owned);
  dv__spin_unlock(&ctx->lock);
  return dv__flush_taken(ctx, items, n, owned);
}

/* Rounds of dv_context_flush_deallocs: a free that queues another entry
 * (the last array bound to a stream releases the stream) is drained in the
 * next round; the bound stops a free that queues something every time. */
#define DV__FLUSH_ROUNDS 64

dv_status dv_context_flush_deallocs(dv_context *ctx) {
  DV_CHECK_NULL(ctx);
  DV_CHECK_HANDLE(ctx, DV_HANDLE_CONTEXT);
  dv_status first = DV_OK;
  for (int round = 0; round < DV__FLUSH_ROUNDS; round++) {
    dv_status rc = dv__flush(ctx);
    if (rc && !first) first = rc;
    dv__spin_lock(&ctx->lock);
    int done = ctx->pending.count == 0 || ctx->defer_depth > 0;
    dv__spin_unlock(&ctx->lock);
    if (done) break;
  }
  return first;
}

dv_status dv_context_pending_deallocs(dv_context *ctx, size_t *count, size_t *bytes) {
  if (count) *count = 0;
  if (bytes) *bytes = 0;
  DV_CHECK_NULL(ctx);
  DV_CHECK_HANDLE(ctx, DV_HANDLE_CONTEXT);
  dv__spin_lock(&ctx->lock);
  if (count) *count = ctx->pending.count;
  if (bytes) *bytes = ctx->pending.bytes;
  dv__spin_unlock(&ctx->lock);
  return DV_OK;
}

/* The largest count limit accepted: the option's own maximum. */
#define DV__MAX_COUNT_LIMIT 1000000000u

dv_status dv_context_set_dealloc_limits(dv_context *ctx, size_t max_count, double max_ratio) {
  DV_CHECK_NULL(ctx);
  DV_CHECK_HANDLE(ctx, DV_HANDLE_CONTEXT);
  if (max_count > DV__MAX_COUNT_LIMIT)
    return dv__error(DV_ERR_INVALID_ARGUMENT, "pending-deallocation count limit %zu is above the maximum %u",
                     max_count, DV__MAX_COUNT_LIMIT);
  /* written so that NaN fails too */
  if (!(max_ratio >= 0.0 && max_ratio <= 1.0))
    return dv__error(DV_ERR_INVALID_ARGUMENT,
                     "pending-deallocation ratio %g is not a fraction of device memory (0 to 1)", max_ratio);
  dv__spin_lock(&ctx->lock);
  ctx->opt[DV_OPT_MAX_PENDING_COUNT].i = (int64_t)max_count;
  ctx->opt[DV_OPT_MAX_PENDING_COUNT].source = DV_SOURCE_API;
  ctx->opt[DV_OPT_MAX_PENDING_RATIO].d = max_ratio;
  ctx->opt[DV_OPT_MAX_PENDING_RATIO].source = DV_SOURCE_API;
  dv__pending_limits_set(ctx);
  dv__spin_unlock(&ctx->lock);
  return DV_OK;
}

dv_status dv_context_dealloc_limits(dv_context *ctx, size_t *max_count, double *max_ratio, size_t *max_bytes) {
  if (max_count) *max_count = 0;
  if (max_ratio) *max_ratio = 0;
  if (max_bytes) *max_bytes = 0;
  DV_CHECK_NULL(ctx);
  DV_CHECK_HANDLE(ctx, DV_HANDLE_CONTEXT);
  dv__spin_lock(&ctx->lock);
  if (max_count) *max_count = (size_t)ctx->opt[DV_OPT_MAX_PENDING_COUNT].i;
  if (max_ratio) *max_ratio = ctx->opt[DV_OPT_MAX_PENDING_RATIO].d;
  if (max_bytes) *max_bytes = ctx->pending_byte_limit;
  dv__spin_unlock(&ctx->lock);
  return DV_OK;
}

dv_status dv_defer_cleanup_begin(dv_context *ctx) {
  DV_CHECK_NULL(ctx);
  DV_CHECK_HANDLE(ctx, DV_HANDLE_CONTEXT);
  dv__spin_lock(&ctx->lock);
  ctx->defer_depth++;
  dv__spin_unlock(&ctx->lock);
  return DV_OK;
}

dv_status dv_defer_cleanup_end(dv_context *ctx) {
  DV_CHECK_NULL(ctx);
  DV_CHECK_HANDLE(ctx, DV_HANDLE_CONTEXT);
  dv__spin_lock(&ctx->lock);
  if (ctx->defer_depth == 0) {
    dv__spin_unlock(&ctx->lock);
    return dv__error(DV_ERR_MISUSE, "dv_defer_cleanup_end without a matching begin");
  }
  ctx->defer_depth--;
  dv__spin_unlock(&ctx->lock);
  return DV_OK;
}
