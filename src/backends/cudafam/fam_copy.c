/*
 * Copies in the CUDA family's core: rectangles (contiguous, 2-D and 3-D,
 * host-to-host in stream order), pageable host memory handed to the
 * staging path (fam_staging.c), memset, and copies between the devices of
 * two contexts (peer access where the devices allow it).  fam.c holds the
 * streams these queue on.
 */
#include <stdio.h>
#include <string.h>

#include "fam.h"

/* ---- copies ------------------------------------------------------------------------------------ */

static void cu_side2(const dv_memref *m, int *type, const void **host, dv_CUdeviceptr *dev) {
  if (m->buf) *type = DV_CU_MEMORYTYPE_DEVICE, *dev = cu_ptr(*m), *host = NULL;
  else *type = DV_CU_MEMORYTYPE_HOST, *host = m->ptr, *dev = 0;
}

/* A copy with pageable host memory on a stream that is capturing a CUDA
 * graph: refused before anything is queued.  The driver runs such a copy
 * synchronously (not capturable), and the staged path's host callbacks and
 * buffer reuse cannot be captured either. */
static dv_status cu_refuse_capture(cu_state *st, dv_bstream *s) {
  dv_CUstreamCaptureStatus cs = DV_CU_STREAM_CAPTURE_STATUS_NONE;
  dv_CUresult r = cu.cuStreamIsCapturing(s->s, &cs);
  if (r == DV_CUDA_SUCCESS && cs == DV_CU_STREAM_CAPTURE_STATUS_NONE) return DV_OK;
  if (r != DV_CUDA_SUCCESS && cu_code(r) != DV_CUDA_ERROR_STREAM_CAPTURE_IMPLICIT) return cu_fail(r, DV_CU_E_cuStreamIsCapturing, "");
  return dv__error(DV_ERR_MISUSE,
                   "a copy with pageable host memory on a %s stream that %s %s graph cannot be captured: the "
                   "driver copies pageable memory synchronously and devarray stages it through pinned buffers "
                   "with host callbacks; use pinned or registered host memory (dv_pinned_array, "
                   "dv_array_register) for copies in a graph capture",
                   st->drv->vendor,
                   r ? "is the legacy stream while a blocking stream is capturing a"
                     : cs == DV_CU_STREAM_CAPTURE_STATUS_ACTIVE ? "is capturing a"
                                                                : "was captured into an invalidated",
                   st->drv->vendor);
}

static dv_status cu_copy_rect(cu_state *st, dv_bstream *s, const dv_rect *r);

dv_status dv__cub_copy_rect(void *state, dv_bstream *s, const dv_rect *r) {
  cu_state *st = state;
  if (!r->width || !r->height || !r->depth) return DV_OK;
  dv_status rc = cu_copy_rect(st, s, r);
  dv__cu_used(st, s); /* after queueing (part of it, on failure) */
  return rc;
}

static dv_status cu_copy_rect(cu_state *st, dv_bstream *s, const dv_rect *r) {
  CU_ENTER(st);
  bool sd = r->src.buf != NULL, dd = r->dst.buf != NULL;
  if (!sd && !dd) return dv__host_rect_in_order(dv__cub_stream_callback, st, s, r); /* host to host */
  bool rect = r->height > 1 || r->depth > 1;
  if (rect && (r->src_pitch > st->max_pitch || r->dst_pitch > st->max_pitch))
    return DV_ERR_NOT_SUPPORTED; /* above the driver's pitch limit: the planner picks another plan */
  if (sd != dd) {
    /* Pageable host memory: through pinned staging, ordered on the stream. */
    const dv_memref *h = sd ? &r->dst : &r->src;
    size_t hp = sd ? r->dst_pitch : r->src_pitch, hs = sd ? r->dst_slice : r->src_slice;
    size_t span = (r->depth - 1) * hs + (r->height - 1) * hp + r->width;
    /* Pinned by devarray, or by someone else (the driver says so): copied
     * directly; else pageable. */
    if (!dv__cu_host_pinned(st->drv, h->ptr, span) && !dv__cu_foreign_pinned(st, h->ptr, span)) {
      dv_status crc = cu_refuse_capture(st, s);
      if (crc) return crc;
      /* A synchronous copy smaller than a chunk waits for its stream anyway:
       * the driver's own pageable path (no staging round trip) serves it. */
      bool small_sync = (r->flags & DV_COPY_SYNC) && span < dv__cu_staging_chunk(st);
      if (!small_sync) return dv__cu_copy_pageable(st, s, r);
    }
  }
  if (r->height == 1 && r->depth == 1) {
    if (sd && dd) CU_TRY(cu.cuMemcpyDtoDAsync_v2(cu_ptr(r->dst), cu_ptr(r->src), r->width, s->s), DV_CU_E_cuMemcpyDtoDAsync_v2, "");
    else if (dd) CU_TRY(cu.cuMemcpyHtoDAsync_v2(cu_ptr(r->dst), r->src.ptr, r->width, s->s), DV_CU_E_cuMemcpyHtoDAsync_v2, "");
    else CU_TRY(cu.cuMemcpyDtoHAsync_v2(r->dst.ptr, cu_ptr(r->src), r->width, s->s), DV_CU_E_cuMemcpyDtoHAsync_v2, "");
  } else if (r->depth == 1) {
    dv_CUDA_MEMCPY2D c;
    memset(&c, 0, sizeof c);
    const void *h;
    cu_side2(&r->src, &c.srcMemoryType, &h, &c.srcDevice);
    c.srcHost = h;
    cu_side2(&r->dst, &c.dstMemoryType, &h, &c.dstDevice);
    c.dstHost = (void *)h;
    c.srcPitch = r->src_pitch, c.dstPitch = r->dst_pitch;
    c.WidthInBytes = r->width, c.Height = r->height;
    dv_CUresult e = cu.cuMemcpy2DAsync_v2(&c, s->s);
    /* "cuMemcpy2D() may fail for pitches not computed by cuMemAllocPitch()":
     * a device-to-device copy the driver refuses goes another way. */
    if (cu_code(e) == DV_CUDA_ERROR_INVALID_VALUE && sd && dd) return DV_ERR_NOT_SUPPORTED;
    if (e) return cu_fail(e, DV_CU_E_cuMemcpy2DAsync_v2, "");
  } else {
    /* 3-D: a slice is srcHeight rows of srcPitch bytes. */
    if (!r->src_pitch || !r->dst_pitch || r->src_slice % r->src_pitch || r->dst_slice % r->dst_pitch ||
        r->src_slice < r->src_pitch * r->height || r->dst_slice < r->dst_pitch * r->height)
      return DV_ERR_NOT_SUPPORTED;
    dv_CUDA_MEMCPY3D c;
    memset(&c, 0, sizeof c);
    const void *h;
    cu_side2(&r->src, &c.srcMemoryType, &h, &c.srcDevice);
    c.srcHost = h;
    cu_side2(&r->dst, &c.dstMemoryType, &h, &c.dstDevice);
    c.dstHost = (void *)h;
    c.srcPitch = r->src_pitch, c.srcHeight = r->src_slice / r->src_pitch;
    c.dstPitch = r->dst_pitch, c.dstHeight = r->dst_slice / r->dst_pitch;
    c.WidthInBytes = r->width, c.Height = r->height, c.Depth = r->depth;
    dv_CUresult e = cu.cuMemcpy3DAsync_v2(&c, s->s);
    if (cu_code(e) == DV_CUDA_ERROR_INVALID_VALUE && sd && dd) return DV_ERR_NOT_SUPPORTED;
    if (e) return cu_fail(e, DV_CU_E_cuMemcpy3DAsync_v2, "");
  }
  if (r->flags & DV_COPY_SYNC) CU_TRY(cu.cuStreamSynchronize(s->s), DV_CU_E_cuStreamSynchronize, "");
  return DV_OK;
}

dv_status dv__cub_memset(void *state, dv_bstream *s, dv_memref dst, int value, size_t bytes) {
  if (!bytes) return DV_OK;
  if (!dst.buf) return DV_ERR_NOT_SUPPORTED;
  cu_state *st = state;
  CU_ENTER(st);
  CU_TRY(cu.cuMemsetD8Async(cu_ptr(dst), (unsigned char)value, bytes, s->s), DV_CU_E_cuMemsetD8Async, "");
  dv__cu_used(state, s);
  return DV_OK;
}

/* ---- several devices ------------------------------------------------------------------- */

/* Peer access from this context to another, enabled once (never refused for
 * a copy: without it cuMemcpyPeerAsync stages through the host itself). */
static void cu_enable_peer(cu_state *st, cu_state *src) {
  int can = 0;
  if (cu.cuDeviceCanAccessPeer(&can, st->dev, src->dev) || !can) return;
  dv_CUresult r = cu.cuCtxEnablePeerAccess(src->ctx, 0);
  if (r && cu_code(r) != 704 /* CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED */)
    dv__log(DV_LOG_DEBUG, "cuda: no peer access from device %d to %d (%d): peer copies stage", st->ordinal,
            src->ordinal, r);
}

dv_status dv__cub_copy_peer(void *state, dv_bstream *s, dv_memref dst, void *src_state, dv_memref src,
                               size_t bytes) {
  cu_state *st = state, *ss = src_state;
  if (!bytes) return DV_OK;
  if (!dst.buf || !src.buf) return DV_ERR_NOT_SUPPORTED;
  {
    /* The source context's queued work first (its streams are not ours). */
    CU_ENTER(ss);
    CU_TRY(cu.cuCtxSynchronize(), DV_CU_E_cuCtxSynchronize, " (peer copy source)");
  }
  CU_ENTER(st);
  if (st->ctx == ss->ctx) {
    CU_TRY(cu.cuMemcpyDtoDAsync_v2(cu_ptr(dst), cu_ptr(src), bytes, s->s), DV_CU_E_cuMemcpyDtoDAsync_v2, "");
    CU_TRY(cu.cuStreamSynchronize(s->s), DV_CU_E_cuStreamSynchronize, " (copy between contexts)"); /* as below */
    return DV_OK;
  }
  pthread_mutex_lock(&st->copy_lock);
  cu_enable_peer(st, ss);
  pthread_mutex_unlock(&st->copy_lock);
  /* Between the two contexts, or (a driver that names devices) their devices. */
  CU_TRY(st->drv->copy_peer ? st->drv->copy_peer(st, cu_ptr(dst), ss, cu_ptr(src), bytes, s->s)
                            : cu.cuMemcpyPeerAsync(cu_ptr(dst), st->ctx, cu_ptr(src), ss->ctx, bytes, s->s),
         DV_CU_E_cuMemcpyPeerAsync, "");
  /* A copy between contexts is synchronous on the source's side
   * (dv_array_copy): the caller may write or free the source as soon as
   * this returns, and nothing orders the source context's later work (or
   * its cuMemFree) after a copy queued on this context's stream. */
  CU_TRY(cu.cuStreamSynchronize(s->s), DV_CU_E_cuStreamSynchronize, " (peer copy)");
  return DV_OK;
}
