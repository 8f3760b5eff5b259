/*
 * The driver's device memory, bypassing every manager: what the built-in
 * managers (direct, in manager.c, and the pool) and plugged-in ones build
 * on.  The bottom of the memory layer: it calls only the backend.
 */
#include "memory.h"

dv_status dv__backend_alloc(dv_context *ctx, size_t bytes, dv_block *out) {
  *out = (dv_block){NULL, 0, NULL};
  if (bytes == 0) return dv__error(DV_ERR_INVALID_ARGUMENT, "allocation of 0 bytes");
  return ctx->be->mem_alloc(ctx->bst, bytes, &out->buf);
}

dv_status dv_backend_alloc(dv_context *ctx, size_t bytes, dv_block *out) {
  DV_CHECK_NULL(out);
  *out = (dv_block){NULL, 0, NULL};
  DV_CHECK_NULL(ctx);
  DV_CHECK_HANDLE(ctx, DV_HANDLE_CONTEXT);
  DV_CHECK_NOT_IN_CALLBACK();
  return dv__backend_alloc(ctx, bytes, out);
}

dv_status dv__backend_free(dv_context *ctx, dv_block block) {
  if (!block.buf) return dv__error(DV_ERR_INVALID_ARGUMENT, "free of a NULL device buffer");
  return ctx->be->mem_free(ctx->bst, block.buf);
}

dv_status dv_backend_free(dv_context *ctx, dv_block block) {
  DV_CHECK_NULL(ctx);
  DV_CHECK_HANDLE(ctx, DV_HANDLE_CONTEXT);
  DV_CHECK_NOT_IN_CALLBACK();
  return dv__backend_free(ctx, block);
}

dv_status dv_backend_memory_info(dv_context *ctx, size_t *free_bytes, size_t *total_bytes) {
  if (free_bytes) *free_bytes = 0;
  if (total_bytes) *total_bytes = 0;
  DV_CHECK_NULL(ctx);
  DV_CHECK_HANDLE(ctx, DV_HANDLE_CONTEXT);
  DV_CHECK_NOT_IN_CALLBACK();
  size_t f = 0, t = 0;
  dv_status rc = ctx->be->mem_info(ctx->bst, &f, &t);
  if (rc) return rc;
  if (free_bytes) *free_bytes = f;
  if (total_bytes) *total_bytes = t;
  return rc;
}

/* The memory limit (set in manager.c), checked by both built-in managers
 * before they take memory from the driver. */
dv_status dv__mm_limit_check(dv_context *ctx, uint64_t held, uint64_t cached, size_t more) {
  size_t limit = atomic_load_explicit(&ctx->memory->limit, memory_order_relaxed);
  if (!limit || held + more <= limit) return DV_OK;
  return dv__error(DV_ERR_OUT_OF_MEMORY,
                   "the memory limit of %zu bytes would be passed: the %s manager holds %llu bytes "
                   "(%llu of them cached free) and needs %zu more",
                   limit, ctx->memory->mm.name, (unsigned long long)held, (unsigned long long)cached, more);
}
