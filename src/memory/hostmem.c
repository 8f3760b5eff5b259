/*
 * Host memory from the backend: page-locked allocations (pinned, or mapped
 * into the device's address space) and the registration of existing memory,
 * each counted in the context's statistics.  Page-locked allocations come
 * from the pinned pool when it is on (pinned_pool.c; the handle is then the
 * pool's block).  The arrays over such memory, and the scopes that register
 * it for a while, are the array layer's (src/array/array.c,
 * src/array/scope.c).
 */
#include "memory.h"

dv_status dv__host_alloc(dv_context *ctx, size_t bytes, unsigned flags, void **handle, void **ptr,
                         void **dev_buf) {
  if (dv__in_callback()) return dv__callback_refused("an allocation of pinned or mapped memory");
  /* The driver wants at least one byte; the statistics count what was asked. */
  dv_status rc = dv__pinned_on(ctx) ? dv__pinned_alloc(ctx, bytes, flags, handle, ptr, dev_buf)
                                    : ctx->be->host_alloc(ctx->bst, bytes > 0 ? bytes : 1, flags, handle, ptr, dev_buf);
  if (!rc) dv__stats_add(ctx, (flags & DV_HOSTMEM_MAPPED) ? DV_STAT_MAPPED : DV_STAT_PINNED, bytes);
  return rc;
}

dv_status dv__host_free(dv_context *ctx, void *handle, size_t bytes, unsigned flags) {
  dv_status rc = dv__pinned_on(ctx) ? dv__pinned_free(ctx, handle) : ctx->be->host_free(ctx->bst, handle);
  dv__stats_sub(ctx, (flags & DV_HOSTMEM_MAPPED) ? DV_STAT_MAPPED : DV_STAT_PINNED, bytes);
  return rc;
}

dv_status dv__host_register(dv_context *ctx, void *ptr, size_t bytes, void **handle, void **dev_buf) {
  /* Mapped and portable, so that a mapped scope can hand out device views
   * of the same registration. */
  dv_status rc = ctx->be->host_register(ctx->bst, ptr, bytes, DV_HOSTMEM_MAPPED | DV_HOSTMEM_PORTABLE,
                                        handle, dev_buf);
  if (!rc) dv__stats_add(ctx, DV_STAT_REGISTERED, bytes);
  return rc;
}

dv_status dv__host_unregister(dv_context *ctx, void *handle, size_t bytes) {
  dv_status rc = ctx->be->host_unregister(ctx->bst, handle);
  dv__stats_sub(ctx, DV_STAT_REGISTERED, bytes);
  return rc;
}
