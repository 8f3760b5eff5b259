/*
 * The transfer planner (planner.c, overlap.c): turns a pair of views into
 * backend operations.  It works on plain descriptors of memory and layout;
 * arrays are the layer above, which describes its arrays this way.
 */
#ifndef DV_TRANSFER_H
#define DV_TRANSFER_H

#include "../backends/backend.h"
#include "../core/core.h"

/* One side of a transfer: where its memory is and how its elements lie in
 * it.  Device memory is base.buf at byte base.offset (base.ptr NULL); host
 * memory is base.ptr (base.buf NULL).  A device view with no buffer has
 * lost its memory (a mapped scope that has ended). */
typedef struct dv_view {
  dv_memref base;
  bool host;       /* host memory: the CPU may read and write it */
  int ndim;
  size_t itemsize;
  int64_t offset;  /* byte offset of element [0,...,0] from base */
  int64_t shape[DV_MAXDIMS], strides[DV_MAXDIMS];
} dv_view;

/* Queue the copy of src's elements into dst's (same shape after dropping
 * size-1 dimensions, same itemsize) on stream (NULL: the default stream; the
 * caller waits).  Views that share a byte are DV_ERR_INVALID_ARGUMENT. */
dv_status dv__transfer(dv_context *ctx, const dv_view *dst, const dv_view *src, dv_stream *stream);
/* Queue one contiguous copy of `bytes` bytes (> 0) from src to dst (host
 * pointers when *_host, device references otherwise) on stream, as
 * dv__transfer does for two views dense in C order, without views.
 * DV_ERR_NOT_SUPPORTED, having done nothing, when the general planner must
 * decide (both sides host memory, one device buffer, a lost buffer). */
dv_status dv__transfer_contig(dv_context *ctx, dv_memref dst, bool dst_host, dv_memref src, bool src_host,
                              size_t bytes, dv_stream *stream);
/* Queue setting every byte of every element of a to value. */
dv_status dv__memset(dv_context *ctx, const dv_view *a, int value, dv_stream *stream);

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
 * (count elements): the backend's copy_peer, queued on stream (a stream of
 * dctx; NULL: wait).  DV_ERR_NOT_SUPPORTED: stage through the host
 * instead (pipeline.c). */
dv_status dv__copy_peer_dense(dv_context *dctx, const dv_view *dst, dv_context *sctx, const dv_view *src,
                              dv_stream *stream, int64_t count);

#endif
