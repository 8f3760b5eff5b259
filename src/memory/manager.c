/*
 * The direct memory manager: every allocation is a backend allocation and
 * every free a backend free (queued by the caller through the pending
 * queue).  dv__device_alloc adds Numba's out-of-memory rule: flush the
 * pending queue and retry once.
 */
#include <stdio.h>

#include "../core/internal.h"

static dv_status dv__direct_alloc(dv_context *ctx, size_t bytes, dv_stream *stream, void **buf) {
  (void)stream;
  return ctx->be->mem_alloc(ctx->bst, bytes, buf);
}

static dv_status dv__direct_free(dv_context *ctx, void *buf, size_t bytes, dv_stream *stream) {
  (void)bytes;
  (void)stream;
  return ctx->be->mem_free(ctx->bst, buf);
}

static dv_status dv__direct_info(dv_context *ctx, size_t *free_bytes, size_t *total_bytes) {
  return ctx->be->mem_info(ctx->bst, free_bytes, total_bytes);
}

const dv_memory_manager dv__mm_direct = {1, "direct", dv__direct_alloc, dv__direct_free,
                                         dv__direct_info};

dv_status dv__device_alloc(dv_context *ctx, size_t bytes, dv_stream *stream, void **buf) {
  *buf = NULL;
  dv_status rc = ctx->mm->alloc(ctx, bytes, stream, buf);
  if (rc != DV_ERR_OUT_OF_MEMORY) return rc;
  pthread_mutex_lock(&ctx->stats.lock);
  ctx->stats.oom_retries++;
  pthread_mutex_unlock(&ctx->stats.lock);
  dv_status frc = dv__flush(ctx);
  if (frc) dv__log(DV_LOG_ERROR, "flush before retrying the allocation failed");
  rc = ctx->mm->alloc(ctx, bytes, stream, buf);
  if (rc == DV_ERR_OUT_OF_MEMORY) {
    char detail[512];
    snprintf(detail, sizeof detail, "%s", dv_last_error());
    size_t f = 0, t = 0;
    ctx->mm->mem_info(ctx, &f, &t);
    return dv__error(DV_ERR_OUT_OF_MEMORY,
                     "cannot allocate %zu bytes of device memory (%zu free of %zu, after one "
                     "flush of the pending-deallocation queue): %s",
                     bytes, f, t, detail);
  }
  return rc;
}
