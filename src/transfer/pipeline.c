/*
 * Copies between two contexts of one backend that need no host staging
 * (issue 13): device memory of one context into device memory of another
 * through the backend's optional copy_peer (CUDA: cuMemcpyPeerAsync, with
 * peer access enabled where the devices allow it).  Only views dense in C
 * order on both sides take it; everything else keeps the staged path of
 * dv__copy_across (src/array/array.c).  A file of its own, beside the
 * planner, so that the planner's fast paths and this evolve apart.
 */
#include "transfer.h"

#include "../stream/stream.h"

/* Dense in C order once extents of 1 are dropped (extent 0: empty). */
static bool dv__c_dense(const dv_view *v) {
  int64_t want = (int64_t)v->itemsize;
  for (int i = v->ndim - 1; i >= 0; i--) {
    if (v->shape[i] == 1) continue;
    if (v->strides[i] != want) return false;
    want *= v->shape[i];
  }
  return true;
}

dv_status dv__copy_peer_dense(dv_context *dctx, const dv_view *dst, dv_context *sctx, const dv_view *src,
                              dv_stream *stream, int64_t count) {
  const dv_backend *be = dctx->be;
  if (be != sctx->be || !dv__be_has(be, DV_BCAP_PEER)) return DV_ERR_NOT_SUPPORTED;
  if (dst->host || src->host || dst->itemsize != src->itemsize) return DV_ERR_NOT_SUPPORTED;
  if (!dv__c_dense(dst) || !dv__c_dense(src)) return DV_ERR_NOT_SUPPORTED;
  if (count == 0) return DV_OK;
  dv_memref d = dst->base, s = src->base;
  d.offset += (size_t)dst->offset;
  s.offset += (size_t)src->offset;
  dv_status rc = be->copy_peer(dctx->bst, dv__bstream(dctx, stream), d, sctx->bst, s, (size_t)count * src->itemsize);
  if (rc == DV_ERR_NOT_SUPPORTED) return rc;
  dv_status r2 = dv__sync_if_null(dctx, stream);
  return rc ? rc : r2;
}
