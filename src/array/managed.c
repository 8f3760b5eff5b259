/*
 * Managed arrays' hints (issue 40): dv_array_prefetch and dv_array_advise.
 * Both work on the array's own bytes (a view: the lowest to the highest byte
 * its elements touch) and hand them to the backend's MANAGED group
 * (managed_prefetch, managed_advise).  A prefetch is stream work: one op
 * through the stream layer's one path (dv__stream_submit), which waits for
 * a NULL stream and orders the op's `after` streams like a copy's; the
 * backend marks the stream used, so a free of the memory waits for it
 * (the CUDA family's fences).  An advice is not stream-ordered.  Backends
 * without managed memory (the host simulator, OpenCL) have no managed
 * arrays: every array there is refused for its kind.
 */
#include "array.h"

static const char *dv__kind_word(const dv_alloc *al) {
  switch (al->kind) {
    case DV_MEM_DEVICE: return "device";
    case DV_MEM_HOST: return al->reg_count ? "registered host" : "pageable host";
    case DV_MEM_PINNED: return "pinned host";
    case DV_MEM_MAPPED: return "mapped host";
    case DV_MEM_MANAGED: return "managed";
  }
  return "unknown";
}

static dv_status dv__check_location(const char *fn, int where) {
  if (where != DV_LOCATION_HOST && where != DV_LOCATION_DEVICE)
    return dv__error(DV_ERR_INVALID_ARGUMENT,
                     "%s: where is %d: DV_LOCATION_HOST (-1) or DV_LOCATION_DEVICE (0)", fn, where);
  return DV_OK;
}

/* The checks both calls make, in the order of their messages; on success
 * *mem and *bytes are the range (bytes 0: nothing to do). */
static dv_status dv__managed_range(const dv_array *a, const char *fn, dv_memref *mem,
                                   size_t *bytes) {
  const dv_alloc *al = a->alloc;
  if (al->kind != DV_MEM_MANAGED)
    return dv__error(DV_ERR_INVALID_ARGUMENT,
                     "%s: the array is %s memory, not managed memory (dv_managed_array)", fn,
                     dv__kind_word(al));
  if (!dv__be_has(al->ctx->be, DV_BCAP_MANAGED))
    return dv__error(DV_ERR_NOT_SUPPORTED, "%s: backend %s has no managed memory", fn,
                     al->ctx->be->name);
  dv_status rc = dv__check_live(a, "array");
  if (rc) return rc;
  int64_t lo = 0, hi = 0;
  rc = dv__layout_extent(a->ndim, a->shape, a->strides, a->dtype->itemsize, &lo, &hi);
  if (rc) return rc;
  *bytes = (size_t)(hi - lo);
  *mem = (dv_memref){0};
  if (*bytes) mem->buf = al->buf, mem->offset = al->buf_offset + (size_t)(a->offset + lo);
  return DV_OK;
}

/* The op's run: one prefetch queued on bs. */
static dv_status dv__prefetch_run(dv_context *ctx, dv_stream *stream, dv_bstream *bs,
                                  unsigned flags, const dv__op *op, dv__op_tally *t) {
  (void)stream, (void)flags, (void)t;
  const dv_memref *mem = op->dst;
  const size_t *bytes = op->arg;
  return ctx->be->managed_prefetch(ctx->bst, bs, *mem, *bytes, (int)(intptr_t)op->src);
}

dv_status dv_array_prefetch(const dv_array *a, dv_location where, dv_stream *stream) {
  DV_CHECK_NULL(a);
  DV_CHECK_ARRAY(a);
  dv_context *ctx = a->alloc->ctx;
  dv_status rc = dv__check_stream(ctx, stream);
  if (!rc) rc = dv__check_location(__func__, (int)where);
  dv_memref mem;
  size_t bytes = 0;
  if (!rc) rc = dv__managed_range(a, __func__, &mem, &bytes);
  if (rc) return rc;
  DV_CHECK_NOT_IN_CALLBACK();
  /* A graph has no prefetch node (CUDA's nor HIP's): refused before
   * anything is queued, as the driver would refuse it and invalidate the
   * capture. */
  if (stream && stream->capture) return dv__capture_refused(__func__);
  if (!bytes) return DV_OK;
  dv_stream *after = dv__alloc_after(ctx, a->alloc, stream);
  dv__op op = {.run = dv__prefetch_run,
               .dst = &mem,
               .src = (const void *)(intptr_t)where,
               .arg = &bytes,
               .flags = DV_OP_STOP_ON_ERROR,
               .after = &after,
               .nafter = after ? 1 : 0};
  return dv__stream_submit(ctx, stream, &op);
}

dv_status dv_array_advise(const dv_array *a, dv_mem_advice advice, dv_location where) {
  DV_CHECK_NULL(a);
  DV_CHECK_ARRAY(a);
  dv_status rc = DV_OK;
  if ((int)advice < DV_MEM_ADVISE_SET_READ_MOSTLY || (int)advice > DV_MEM_ADVISE_UNSET_ACCESSED_BY)
    rc = dv__error(DV_ERR_INVALID_ARGUMENT,
                   "%s: advice is %d: one of DV_MEM_ADVISE_SET_READ_MOSTLY (1) .. "
                   "DV_MEM_ADVISE_UNSET_ACCESSED_BY (6)",
                   __func__, (int)advice);
  if (!rc) rc = dv__check_location(__func__, (int)where);
  dv_memref mem;
  size_t bytes = 0;
  if (!rc) rc = dv__managed_range(a, __func__, &mem, &bytes);
  if (rc) return rc;
  DV_CHECK_NOT_IN_CALLBACK();
  if (!bytes) return DV_OK;
  dv_context *ctx = a->alloc->ctx;
  return ctx->be->managed_advise(ctx->bst, mem, bytes, (int)advice, (int)where);
}
