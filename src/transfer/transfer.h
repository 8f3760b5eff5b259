/*
 * The transfer planner (planner.c, overlap.c, pipeline.c): turns a pair of
 * views into operations submitted through the stream layer's one path
 * (dv__stream_submit).  It works on plain descriptors of memory and layout;
 * arrays are the layer above, which describes its arrays this way.  This
 * header is its single entry (dv__transfer, dv__memset) and the one place
 * that decides "dense" (dv__dense_bytes).
 */
#ifndef DV_TRANSFER_H
#define DV_TRANSFER_H

#include "../backends/backend.h"
#include "../core/core.h"
#include "../stream/stream.h"

/* One side of a transfer: where its memory is and how its elements lie in
 * it.  Device memory is base.buf at byte base.offset (base.ptr NULL); host
 * memory is base.ptr (base.buf NULL).  A device view with no buffer has
 * lost its memory (a mapped scope that has ended).  shape and strides point
 * at the describer's own ndim extents and byte strides (an array's, a
 * plan's): making a view copies none of them. */
typedef struct dv_view {
  dv_memref base;
  bool host;       /* host memory: the CPU may read and write it */
  int ndim;
  size_t itemsize;
  int64_t offset;  /* byte offset of element [0,...,0] from base */
  const int64_t *shape, *strides;
} dv_view;

/* "Dense", decided here only: the bytes of a layout whose elements are
 * dense in C order (size-1 dimensions ignored), -1 otherwise, 0 when it is
 * empty.  The planner's test for one contiguous copy, and the array layer's
 * for giving a copy the C layout without a stride search. */
static inline int64_t dv__dense_bytes(int ndim, const int64_t *sh, const int64_t *st, int64_t itemsize) {
  int64_t s = itemsize;
  if (ndim == 1) return sh[0] == 0 ? 0 : sh[0] == 1 || st[0] == s ? s * sh[0] : -1;
  for (int i = ndim - 1; i >= 0; i--) {
    if (sh[i] == 0) return 0;
    if (sh[i] != 1 && st[i] != s) return -1;
    s *= sh[i];
  }
  return s;
}
static inline int64_t dv__view_dense_bytes(const dv_view *v) {
  return dv__dense_bytes(v->ndim, v->shape, v->strides, (int64_t)v->itemsize);
}

/*
 * The planner's single entry for copies, dense or strided (dv__transfer,
 * below): the copy of src's elements into dst's (same shape after dropping
 * size-1 dimensions, same itemsize), submitted on stream (NULL: the default
 * stream; the call waits) through dv__stream_submit.  A pair dense in C
 * order is one contiguous copy; everything else is planned.  Views that
 * share a byte are DV_ERR_INVALID_ARGUMENT.  after[0..nafter): the streams
 * to order after the copy (dv__op.after).  flags: DV_OP_WAIT to wait even
 * on a stream.  A caller that has the dense test's answer on its own
 * descriptors (copy.c, for arrays) calls dv__transfer_dense or
 * dv__transfer_planned with it: nothing is tested twice.
 */
/* The planned op's run (planner.c: dv__plan_copy). */
dv_status dv__transfer_run(dv_context *ctx, dv_stream *stream, dv_bstream *bs, unsigned flags, const dv__op *op,
                           dv__op_tally *t);
/* The address of element 0 of view v. */
static inline dv_memref dv__view_ref(const dv_view *v) {
  dv_memref r = v->base;
  if (v->host)
    r.ptr = (char *)v->base.ptr + v->offset;
  else
    r.offset = v->base.offset + (size_t)v->offset;
  return r;
}
/* The planned part of dv__transfer (planner.c), for views that are not one
 * contiguous copy (dv__transfer_dense_ok says no). */
dv_status dv__transfer_planned(dv_context *ctx, const dv_view *dst, const dv_view *src, dv_stream *stream,
                               dv_stream *const *after, size_t nafter, unsigned flags);
/* The contiguous copy's run, when the backend refuses the one copy: the
 * same bytes planned as one dimension of bytes (planner.c). */
dv_status dv__contig_run(dv_context *ctx, dv_stream *stream, dv_bstream *bs, unsigned flags, const dv__op *op,
                         dv__op_tally *t);
/* Two sides dense in C order over `bytes` (> 0, dv__dense_bytes) bytes are
 * one contiguous copy when their memory is apart (two buffers, or one host
 * side) and present (a device side with its buffer); else planned. */
static inline bool dv__transfer_dense_ok(dv_memref dst, bool dh, dv_memref src, bool sh) {
  return (sh != dh || (!sh && src.buf != dst.buf)) && (sh || src.buf) && (dh || dst.buf);
}
/* The one contiguous copy (element 0 of each side at dst, src). */
static inline dv_status dv__transfer_dense(dv_context *ctx, dv_memref dst, bool dh, dv_memref src, bool sh,
                                           size_t bytes, dv_stream *stream, dv_stream *const *after, size_t nafter,
                                           unsigned flags) {
  dv_rect r;
  r.src = src;
  r.dst = dst;
  r.width = bytes;
  r.height = r.depth = 1;
  r.src_pitch = r.dst_pitch = r.width;
  r.src_slice = r.dst_slice = 0;
  dv__op op = {dv__contig_run, &r, dh, sh, NULL, NULL, NULL, flags, after, nafter};
  return dv__stream_submit(ctx, stream, &op);
}
static inline dv_status dv__transfer(dv_context *ctx, const dv_view *dst, const dv_view *src, dv_stream *stream,
                                     dv_stream *const *after, size_t nafter, unsigned flags) {
  int64_t bytes = dv__view_dense_bytes(src);
  if (bytes > 0 && dv__view_dense_bytes(dst) == bytes) {
    dv_memref d = dv__view_ref(dst), s = dv__view_ref(src);
    if (dv__transfer_dense_ok(d, dst->host, s, src->host))
      return dv__transfer_dense(ctx, d, dst->host, s, src->host, (size_t)bytes, stream, after, nafter, flags);
  }
  return dv__transfer_planned(ctx, dst, src, stream, after, nafter, flags);
}
/* Set every byte of every element of a to value, submitted the same way. */
dv_status dv__memset_run(dv_context *ctx, dv_stream *stream, dv_bstream *bs, unsigned flags, const dv__op *op,
                         dv__op_tally *t);
static inline dv_status dv__memset(dv_context *ctx, const dv_view *a, const int *value, dv_stream *stream,
                                   dv_stream *const *after, size_t nafter) {
  dv__op op = {dv__memset_run, NULL, false, false, a, NULL, value, 0, after, nafter};
  return dv__stream_submit(ctx, stream, &op);
}

/* ---- overlap of two views of the same memory (overlap.c) ---- */
typedef enum dv_overlap { DV_OVERLAP_NO, DV_OVERLAP_YES, DV_OVERLAP_UNKNOWN } dv_overlap;
/* nd dimensions of extents n, elements of itemsize bytes; one view's element
 * 0 at address a0 with strides as, the other's at b0 with strides bs.
 * UNKNOWN when the exact search exceeds dv__overlap_max_work steps. */
dv_overlap dv__overlap(int nd, const int64_t *n, int64_t a0, const int64_t *as, int64_t b0,
                       const int64_t *bs, int64_t itemsize);
/* The search's work limit; white-box tests lower it to drive the fallback. */
extern _Atomic int64_t dv__overlap_max_work;
/* The largest temporary (bytes) the planner takes from the pinned staging
 * pool when copying through one; larger ones are pageable.  White-box tests
 * lower it to drive the pageable path. */
extern _Atomic int64_t dv__via_pinned_max;

/* Between contexts of one backend, both views device memory dense in C order
 * (count elements): the backend's copy_peer, submitted on stream (a stream
 * of dctx; NULL: wait).  DV_ERR_NOT_SUPPORTED: stage through the host
 * instead (pipeline.c). */
dv_status dv__copy_peer_dense(dv_context *dctx, const dv_view *dst, dv_context *sctx, const dv_view *src,
                              dv_stream *stream, int64_t count, dv_stream *const *after, size_t nafter);

#endif
