/*
 * The OpenCL backend's copies: rects (within and between buffers, to and
 * from the host) and memset.  What rects cannot express the planner hands
 * to the strided-copy kernel (opencl_copykernel.c).
 */
#include "opencl_internal.h"

#if DV_HAVE_OPENCL_HEADERS

/* ---- copies -------------------------------------------------------------------------- */

/* OpenCL's rect rules: a slice pitch is a multiple of the row pitch and
 * holds `height` rows. */
static bool cl_rect_ok(size_t pitch, size_t slice, size_t height, size_t depth) {
  return depth <= 1 || (pitch && slice % pitch == 0 && slice >= pitch * height);
}

static void cl_origin(size_t off, size_t pitch, size_t slice, size_t o[3]) {
  o[2] = slice ? off / slice : 0;
  off -= o[2] * slice;
  o[1] = pitch ? off / pitch : 0;
  o[0] = off - o[1] * pitch;
}

dv_status dv__clb_copy_rect(void *state, dv_bstream *s, const dv_rect *r) {
  cl_state *st = state;
  if (!r->width || !r->height || !r->depth) return DV_OK;
  bool sd = r->src.buf != NULL, dd = r->dst.buf != NULL;
  cl_bool blocking = (r->flags & DV_COPY_SYNC) ? CL_TRUE : CL_FALSE;
  size_t sp = r->height > 1 ? r->src_pitch : r->width, dp = r->height > 1 ? r->dst_pitch : r->width;
  size_t ss = r->depth > 1 ? r->src_slice : sp * r->height, ds = r->depth > 1 ? r->dst_slice : dp * r->height;
  if (!sd && !dd) return dv__host_rect_in_order(dv__clb_stream_callback, st, s, r); /* host to host */
  if (!cl_rect_ok(sp, ss, r->height, r->depth) || !cl_rect_ok(dp, ds, r->height, r->depth)) return DV_ERR_NOT_SUPPORTED;
  /* Within one buffer (pool blocks share segments) OpenCL wants equal
   * pitches on both sides; otherwise let the planner use the kernel. */
  if (sd && dd && r->src.buf == r->dst.buf && (r->height > 1 || r->depth > 1) && (sp != dp || ss != ds))
    return DV_ERR_NOT_SUPPORTED;
  bool flat = r->height == 1 && r->depth == 1;
  /* Within one buffer OpenCL refuses a rect copy (CL_MEM_COPY_OVERLAP) when
   * the two regions overlap as its specification's test sees them: that
   * test compares linear ranges from each origin to origin + depth x slice
   * + height x pitch + width, far past the bytes the rows touch (PoCL
   * follows it; other drivers compare bounding boxes).  The planner has
   * refused views whose elements share bytes, so such a copy is right but
   * would be refused: leave it to the strided-copy kernel, which moves
   * exactly the elements.  A flat copy's range is its bytes. */
  if (sd && dd && r->src.buf == r->dst.buf && !flat) {
    size_t s0 = r->src.offset, s1 = s0 + r->depth * ss + r->height * sp + r->width;
    size_t d0 = r->dst.offset, d1 = d0 + r->depth * ds + r->height * dp + r->width;
    if (s0 < d1 && d0 < s1) return DV_ERR_NOT_SUPPORTED;
  }
  size_t region[3] = {r->width, r->height, r->depth}, so[3], dofs[3], zero[3] = {0, 0, 0};
  if (sd && dd) {
    if (flat) {
      CL_TRY(cl.clEnqueueCopyBuffer(s->q, r->src.buf, r->dst.buf, r->src.offset, r->dst.offset, r->width, 0, NULL, NULL),
             "clEnqueueCopyBuffer");
    } else {
      cl_origin(r->src.offset, sp, ss, so);
      cl_origin(r->dst.offset, dp, ds, dofs);
      CL_TRY(cl.clEnqueueCopyBufferRect(s->q, r->src.buf, r->dst.buf, so, dofs, region, sp, ss, dp, ds, 0, NULL, NULL),
             "clEnqueueCopyBufferRect");
    }
    if (blocking) CL_TRY(cl.clFinish(s->q), "clFinish");
  } else if (dd) {
    if (flat) {
      CL_TRY(cl.clEnqueueWriteBuffer(s->q, r->dst.buf, blocking, r->dst.offset, r->width, r->src.ptr, 0, NULL, NULL),
             "clEnqueueWriteBuffer");
    } else {
      cl_origin(r->dst.offset, dp, ds, dofs);
      CL_TRY(cl.clEnqueueWriteBufferRect(s->q, r->dst.buf, blocking, dofs, zero, region, dp, ds, sp, ss, r->src.ptr, 0,
                                         NULL, NULL),
             "clEnqueueWriteBufferRect");
    }
  } else {
    if (flat) {
      CL_TRY(cl.clEnqueueReadBuffer(s->q, r->src.buf, blocking, r->src.offset, r->width, r->dst.ptr, 0, NULL, NULL),
             "clEnqueueReadBuffer");
    } else {
      cl_origin(r->src.offset, sp, ss, so);
      CL_TRY(cl.clEnqueueReadBufferRect(s->q, r->src.buf, blocking, so, zero, region, sp, ss, dp, ds, r->dst.ptr, 0, NULL,
                                        NULL),
             "clEnqueueReadBufferRect");
    }
  }
  if (!blocking) {
    cl_event ev;
    if (cl.clEnqueueMarkerWithWaitList(s->q, 0, NULL, &ev) == CL_SUCCESS) cl_track(s, ev);
    cl.clFlush(s->q);
  }
  return DV_OK;
}

dv_status dv__clb_memset(void *state, dv_bstream *s, dv_memref dst, int value, size_t bytes) {
  (void)state;
  if (!bytes) return DV_OK;
  if (!dst.buf) return DV_ERR_NOT_SUPPORTED;
  cl_uchar pattern = (cl_uchar)value;
  cl_event ev;
  CL_TRY(cl.clEnqueueFillBuffer(s->q, dst.buf, &pattern, 1, dst.offset, bytes, 0, NULL, &ev), "clEnqueueFillBuffer");
  cl_track(s, ev);
  cl.clFlush(s->q);
  return DV_OK;
}

#else
typedef int dv__opencl_copy_none; /* built without OpenCL headers: nothing here */
#endif /* DV_HAVE_OPENCL_HEADERS */
