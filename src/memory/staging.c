/*
 * The pinned staging pool: host buffers for the transfer planner's
 * pack/unpack, page-locked (the backend's host_alloc) so that staged copies
 * run at pinned speed, and reused instead of allocated per copy (a pinned
 * allocation costs far more than the copy it serves).
 *
 * Reuse is stream-ordered: a buffer goes back to the pool from a stream
 * callback queued after the copies that use it, so it is free when it
 * returns.  Returning never frees (callbacks must not call into drivers
 * that may wait on the very stream running them); the pool is trimmed to its
 * cap when buffers are taken, and emptied when the context is destroyed.
 */
#include "memory.h"

#define STG_MIN_SHIFT 16 /* 64 KiB */
#define STG_CAP ((size_t)256 << 20)

static int stg_class(size_t bytes) {
  int c = STG_MIN_SHIFT;
  while (c < 62 && ((size_t)1 << c) < bytes) c++;
  return c - STG_MIN_SHIFT;
}

void dv__staging_init(dv_staging *st) { pthread_mutex_init(&st->m, NULL); }

dv_status dv__staging_get(dv_context *ctx, size_t bytes, dv_staging_buf **out) {
  *out = NULL;
  int c = stg_class(bytes);
  if (c >= DV_STAGING_CLASSES)
    return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "staging buffer of %zu bytes is too large", bytes);
  dv_staging *st = &ctx->memory->staging;
  dv_staging_buf *trim = NULL;
  pthread_mutex_lock(&st->m);
  dv_staging_buf *b = st->free[c];
  if (b) {
    st->free[c] = b->next;
    st->cached -= b->size;
    atomic_fetch_add(&ctx->stats.staging_hits, 1);
  }
  /* over the cap: take the largest cached buffers out, to free below */
  for (int k = DV_STAGING_CLASSES - 1; k >= 0 && st->cached > STG_CAP; k--)
    while (st->free[k] && st->cached > STG_CAP) {
      dv_staging_buf *x = st->free[k];
      st->free[k] = x->next;
      st->cached -= x->size;
      st->reserved -= x->size;
      x->next = trim;
      trim = x;
    }
  pthread_mutex_unlock(&st->m);
  for (dv_staging_buf *x = trim, *n; x; x = n) {
    n = x->next;
    ctx->be->host_free(ctx->bst, x->handle);
    dv__stats_sub(ctx, DV_STAT_STAGING, x->size);
    dv__free(x);
  }
  if (b) {
    *out = b;
    return DV_OK;
  }
  b = dv__calloc(1, sizeof *b);
  if (!b) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate a staging record");
  b->size = (size_t)1 << (c + STG_MIN_SHIFT);
  b->cls = c;
  dv_status rc = ctx->be->host_alloc(ctx->bst, b->size, 0, &b->handle, &b->ptr, NULL);
  if (rc) {
    dv__free(b);
    return rc;
  }
  dv__stats_add(ctx, DV_STAT_STAGING, b->size);
  atomic_fetch_add(&ctx->stats.staging_misses, 1);
  pthread_mutex_lock(&st->m);
  st->reserved += b->size;
  pthread_mutex_unlock(&st->m);
  *out = b;
  return DV_OK;
}

void dv__staging_put(dv_context *ctx, dv_staging_buf *b) {
  if (!b) return;
  dv_staging *st = &ctx->memory->staging;
  pthread_mutex_lock(&st->m);
  b->next = st->free[b->cls];
  st->free[b->cls] = b;
  st->cached += b->size;
  pthread_mutex_unlock(&st->m);
}

void dv__staging_fini(dv_context *ctx, dv_staging *st) {
  for (int k = 0; k < DV_STAGING_CLASSES; k++)
    for (dv_staging_buf *x = st->free[k], *n; x; x = n) {
      n = x->next;
      ctx->be->host_free(ctx->bst, x->handle);
      dv__stats_sub(ctx, DV_STAT_STAGING, x->size);
      dv__free(x);
    }
  pthread_mutex_destroy(&st->m);
}
