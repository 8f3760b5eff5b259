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

/* The backend's peer copy, as an op of the submission path. */
typedef struct dv_peer {
  dv_context *sctx;
  dv_memref d, s;
  size_t bytes;
} dv_peer;
static dv_status dv__peer_run(dv_context *ctx, dv_stream *stream, dv_bstream *bs, unsigned flags, const dv__op *op,
                              dv__op_tally *t) {
  (void)stream, (void)flags, (void)t;
  const dv_peer *p = op->arg;
  return ctx->be->copy_peer(ctx->bst, bs, p->d, p->sctx->bst, p->s, p->bytes);
}

dv_status dv__copy_peer_dense(dv_context *dctx, const dv_view *dst, dv_context *sctx, const dv_view *src,
                              dv_stream *stream, int64_t count, dv_stream *const *after, size_t nafter) {
  const dv_backend *be = dctx->be;
  if (be != sctx->be || !dv__be_has(be, DV_BCAP_PEER)) return DV_ERR_NOT_SUPPORTED;
  if (dst->host || src->host || dst->itemsize != src->itemsize) return DV_ERR_NOT_SUPPORTED;
  if (dv__view_dense_bytes(dst) < 0 || dv__view_dense_bytes(src) < 0) return DV_ERR_NOT_SUPPORTED;
  if (count == 0) return DV_OK;
  dv_peer p = {sctx, dst->base, src->base, (size_t)count * src->itemsize};
  p.d.offset += (size_t)dst->offset;
  p.s.offset += (size_t)src->offset;
  /* A backend that cannot copy between these two devices says so before
   * it queues anything: nothing to wait for. */
  dv__op op = {dv__peer_run, NULL, false, false, NULL, NULL, &p, DV_OP_UNSUPPORTED_STOPS, after, nafter};
  return dv__stream_submit(dctx, stream, &op);
}
