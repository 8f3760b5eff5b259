/*
 * Copies between arrays: dv_array_copy, dv_to_device, dv_copy_to_host,
 * dv_copy_to_device, memset, dv_array_copy_new, element and record-field
 * access, and the copy behind reshape and ravel (dv__reshape_copy).  Arrays
 * are described to the transfer planner (its single entry, dv__transfer) as
 * plain views, with the allocation streams that must wait for the work
 * (dv__alloc_after, array.h); the planner submits the work through the
 * stream layer's one path (dv__stream_submit), which waits or orders.
 */
#include <stdio.h>
#include <string.h>

#include "array.h"

/* The slow part of dv__alloc_after (array.h). */
static void dv__keep_alloc(void *al) { dv__alloc_release(al); }

__attribute__((noinline)) dv_stream *dv__alloc_order_slow(dv_context *ctx, const dv_alloc *al,
                                                         const dv_stream *stream) {
  if (stream && stream->capture) { /* the graph's work uses al at each launch: the graph keeps it */
    dv_alloc *a = (dv_alloc *)al;
    if (al->kind == DV_MEM_HOST && al->reg_count == 0) /* CUDA's rule, on every backend alike */
      stream->capture->refuse = "work with pageable host memory (the driver copies it synchronously; register "
                                "the array or use pinned memory)";
    atomic_fetch_add(&a->refs, 1);
    if (dv__capture_keep(stream->capture, a, dv__keep_alloc)) {
      atomic_fetch_sub(&a->refs, 1);
      stream->capture->oom = true; /* the op is refused when submitted */
    }
    /* Nothing to order and no use to note: the memory is the graph's until
     * its last release, which waits for every launch first (graph.c); a use
     * noted on the capturing stream would hold that stream, whose capture
     * holds the memory. */
    return NULL;
  }
  if (al->kind != DV_MEM_DEVICE) { /* the pinned pool's block, used on `stream` */
    if (al->pooled && stream) dv__pinned_used(al->handle, (dv_stream *)stream);
    return NULL;
  }
  if (!dv__mm_stream_ordered(ctx) || !al->owned || !al->buf || al->ctx != ctx) return NULL;
  dv_stream *owner = al->stream ? al->stream : dv__default_stream(ctx);
  return owner->bs == dv__bstream(ctx, (dv_stream *)stream) ? NULL : owner;
}

/*
 * The planner's views of arrays.  Internal copies (an element, a field, the
 * caller's buffer, a copy's destination laid out for the reading order) are
 * described as plain views on the stack: nothing is allocated, reference
 * counted or counted in the statistics for them, so a call that fails has
 * changed nothing.
 */
static void dv__view_part(const dv_array *a, const dv_dtype *dt, int ndim, const int64_t *shape,
                          const int64_t *strides, int64_t offset, dv_view *v) {
  v->base = (dv_memref){0};
  v->host = dv__is_host_side(a);
  if (v->host)
    v->base.ptr = a->alloc->host;
  else
    v->base.buf = a->alloc->buf, v->base.offset = a->alloc->buf_offset;
  v->ndim = ndim;
  v->itemsize = dt->itemsize;
  v->offset = offset;
  v->shape = shape;
  v->strides = strides;
}

static void dv__view_of(const dv_array *a, dv_view *v) {
  dv__view_part(a, a->dtype, a->ndim, a->shape, a->strides, a->offset, v);
}

/* The address of an array's element 0, as dv__view_of and the planner make it. */
static inline dv_memref dv__ref_of(const dv_array *a, bool *host) {
  dv_memref r = {0};
  *host = dv__is_host_side(a);
  if (*host)
    r.ptr = (char *)a->alloc->host + a->offset;
  else
    r.buf = a->alloc->buf, r.offset = a->alloc->buf_offset + (size_t)a->offset;
  return r;
}

/* The caller's host buffer, dense in C order (strides st[ndim], filled here). */
static void dv__view_host(void *buf, const dv_dtype *dt, int ndim, const int64_t *shape, int64_t *st, dv_view *v) {
  memset(v, 0, sizeof *v);
  v->base.ptr = buf;
  v->host = true;
  v->ndim = ndim;
  v->itemsize = dt->itemsize;
  dv__layout_dense(ndim, shape, (int64_t)dt->itemsize, 'C', st); /* fits: the other side exists */
  v->shape = shape;
  v->strides = st;
}

/* ---- transfers ---------------------------------------------------------------- */

static void dv__fmt_shape(char *buf, size_t cap, const dv_array *a) {
  size_t n = (size_t)snprintf(buf, cap, "(");
  for (int i = 0; i < a->ndim && n < cap; i++)
    n += (size_t)snprintf(buf + n, cap - n, "%lld%s", (long long)a->shape[i],
                          (a->ndim == 1 || i + 1 < a->ndim) ? "," : "");
  if (n < cap) snprintf(buf + n, cap - n, ")");
}

static __attribute__((noinline)) dv_status dv__check_compat_slow(const dv_array *dst, const dv_array *src) {
  if (dst->dtype != src->dtype && !dv_dtype_equal(dst->dtype, src->dtype))
    return dv__error(DV_ERR_DTYPE_MISMATCH, "incompatible dtype: %s into %s", src->dtype->name,
                     dst->dtype->name);
  if (dst->ndim == src->ndim) { /* the common case: the same shape, size-1 dims and all */
    int i = 0;
    while (i < dst->ndim && dst->shape[i] == src->shape[i]) i++;
    if (i == dst->ndim) return DV_OK;
  }
  int64_t a[DV_MAXDIMS], b[DV_MAXDIMS];
  int na = dv__layout_squeeze(src->ndim, src->shape, NULL, a, NULL);
  int nb = dv__layout_squeeze(dst->ndim, dst->shape, NULL, b, NULL);
  bool same = na == nb;
  for (int i = 0; same && i < na; i++) same = a[i] == b[i];
  if (!same) {
    char s1[256], s2[256];
    dv__fmt_shape(s1, sizeof s1, src);
    dv__fmt_shape(s2, sizeof s2, dst);
    return dv__error(DV_ERR_SHAPE_MISMATCH, "incompatible shape: %s into %s", s1, s2);
  }
  return DV_OK;
}

/* Same dtype, same shape once size-1 dimensions are dropped; the common
 * case (one dtype object, one shape) is decided here, the rest by the slow
 * part, which also words the errors. */
static inline dv_status dv__check_compat(const dv_array *dst, const dv_array *src) {
  if (dst->dtype == src->dtype && dst->ndim == src->ndim) {
    int i = 0;
    while (i < dst->ndim && dst->shape[i] == src->shape[i]) i++;
    if (i == dst->ndim) return DV_OK;
  }
  return dv__check_compat_slow(dst, src);
}

/*
 * Between two contexts (two devices, or two backends) device memory is not
 * shared: the copy goes through a dense host buffer, device -> host on the
 * source's context, then host -> device on the destination's.  Host memory
 * is reachable from every context, so a host side needs no staging.  Such
 * copies are synchronous on the source side; the destination side follows
 * `stream` (which must belong to the destination's context).
 */
static dv_status dv__copy_across(dv_context *dctx, const dv_view *dst, dv_context *sctx, const dv_view *src,
                                 dv_stream *stream, dv_stream *const *after, size_t nafter) {
  if (src->host) return dv__transfer(dctx, dst, src, stream, after, nafter, 0);
  if (dst->host) return dv__transfer(sctx, dst, src, NULL, NULL, 0, 0);
  int64_t count = 1; /* the source's size: checked when it was made */
  for (int i = 0; i < src->ndim; i++) count *= src->shape[i];
  /* Two contexts of one backend (two devices): a peer copy where both views
   * are dense in C order (dv__copy_peer_dense, src/transfer/pipeline.c). */
  dv_status prc = dv__copy_peer_dense(dctx, dst, sctx, src, stream, count, after, nafter);
  if (prc != DV_ERR_NOT_SUPPORTED) return prc;
  void *buf = dv__malloc((size_t)count * src->itemsize);
  if (!buf) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate a %lld-byte staging buffer",
                             (long long)count * (long long)src->itemsize);
  int64_t st[DV_MAXDIMS];
  dv__layout_dense(src->ndim, src->shape, (int64_t)src->itemsize, 'C', st); /* fits: src exists */
  dv_view tmp = {.base = {.ptr = buf}, .host = true, .ndim = src->ndim, .itemsize = src->itemsize,
                 .shape = src->shape, .strides = st};
  dv_status rc = dv__transfer(sctx, &tmp, src, NULL, NULL, 0, 0);
  /* the staging buffer is freed here: the destination side is waited for */
  if (!rc) rc = dv__transfer(dctx, dst, &tmp, stream, after, nafter, DV_OP_WAIT);
  dv__free(buf);
  return rc;
}

/* Copy view src (memory of sctx) into view dst (memory of dctx): waited for
 * when synchronous (stream NULL), the streams `after` ordered behind it
 * otherwise. */
static dv_status dv__copy_views(dv_context *dctx, const dv_view *dst, dv_context *sctx, const dv_view *src,
                                dv_stream *stream, dv_stream *const *after, size_t nafter) {
  if (DV_UNLIKELY(sctx != dctx)) return dv__copy_across(dctx, dst, sctx, src, stream, after, nafter);
  return dv__transfer(dctx, dst, src, stream, after, nafter, 0);
}

/* Copy array src into array dst (compatible, live, dst of ctx, the stream
 * checked). */
static dv_status dv__copy_planned(dv_context *ctx, dv_array *dst, const dv_array *src, dv_stream *stream,
                                  dv_stream *const *after, size_t nafter);
static inline __attribute__((always_inline)) dv_status dv__copy_arrays(dv_context *ctx, dv_array *dst,
                                                                     const dv_array *src, dv_stream *stream) {
  dv_stream *after[2] = {dv__alloc_after(ctx, dst->alloc, stream), dv__alloc_after(ctx, src->alloc, stream)};
  size_t nafter = after[0] || after[1] ? 2 : 0;
  /* The common case, two arrays of ctx dense in C order (the planner's
   * test, on the arrays themselves: no views), is the planner's one
   * contiguous copy; everything else goes to the planner as views. */
  if (DV_LIKELY(src->alloc->ctx == ctx)) {
    int64_t isz = (int64_t)src->dtype->itemsize;
    int64_t bytes = dv__dense_bytes(src->ndim, src->shape, src->strides, isz);
    if (bytes > 0 && dv__dense_bytes(dst->ndim, dst->shape, dst->strides, isz) == bytes) {
      bool dh, sh;
      dv_memref dr = dv__ref_of(dst, &dh), sr = dv__ref_of(src, &sh);
      if (dv__transfer_dense_ok(dr, dh, sr, sh))
        return dv__transfer_dense(ctx, dr, dh, sr, sh, (size_t)bytes, stream, after, nafter, 0);
    }
  }
  return dv__copy_planned(ctx, dst, src, stream, after, nafter);
}
static __attribute__((noinline)) dv_status dv__copy_planned(dv_context *ctx, dv_array *dst, const dv_array *src,
                                                           dv_stream *stream, dv_stream *const *after,
                                                           size_t nafter) {
  dv_view dv, sv;
  dv__view_of(dst, &dv);
  dv__view_of(src, &sv);
  if (src->alloc->ctx != ctx) return dv__copy_across(ctx, &dv, src->alloc->ctx, &sv, stream, after, nafter);
  return dv__transfer_planned(ctx, &dv, &sv, stream, after, nafter, 0);
}

/* dv__copy_arrays in an NVTX range (ranges on: nvtx.c). */
static __attribute__((noinline, cold)) dv_status dv__copy_ranged(dv_context *ctx, dv_array *dst,
                                                                const dv_array *src, dv_stream *stream) {
  dv__nvtx_push("devarray copy");
  dv_status rc = dv__copy_arrays(ctx, dst, src, stream);
  dv__nvtx_pop();
  return rc;
}

/* Copy array src into array dst (compatible): waited for when synchronous. */
static dv_status dv__copy(dv_array *dst, const dv_array *src, dv_stream *stream) {
  dv_context *ctx = dst->alloc->ctx;
  if (stream && stream->ctx != ctx)
    return dv__error(DV_ERR_BACKEND_MISMATCH, "the stream belongs to another context than the destination");
  /* before a copy across contexts makes its staging buffer */
  dv_status rc = dv__check_live(src, "source");
  if (!rc) rc = dv__check_live(dst, "destination");
  if (rc) return rc;
  if (DV_NVTX_RANGES()) return dv__copy_ranged(ctx, dst, src, stream);
  return dv__copy_arrays(ctx, dst, src, stream);
}

dv_status dv_array_copy(dv_array *dst, const dv_array *src, dv_stream *stream) {
  DV_CHECK_NULL(dst);
  DV_CHECK_ARRAY(dst);
  DV_CHECK_NULL(src);
  DV_CHECK_ARRAY(src);
  dv_status rc = dv__check_stream(dst->alloc->ctx, stream);
  if (!rc) rc = dv__check_compat(dst, src);
  if (rc) return rc;
  return dv__copy(dst, src, stream);
}

dv_status dv_to_device(dv_context *ctx, const dv_array *src, dv_stream *stream, int copy,
                       dv_array *to, dv_array **out) {
  if (out) *out = NULL;
  DV_CHECK_NULL(ctx);
  DV_CHECK_HANDLE(ctx, DV_HANDLE_CONTEXT);
  DV_CHECK_NULL(src);
  DV_CHECK_ARRAY(src);
  dv_status src_rc = dv__check_stream(ctx, stream);
  if (!src_rc && copy) src_rc = dv__check_live(src, "source");
  if (src_rc) return src_rc;
  if (to) DV_CHECK_ARRAY(to);
  if (to && to->alloc->ctx != ctx)
    return dv__error(DV_ERR_BACKEND_MISMATCH, "`to` belongs to another context than ctx");
  if (to) {
    if (dv__is_host_side(to))
      return dv__error(DV_ERR_INVALID_ARGUMENT, "`to` must be a device array");
    dv_status rc = dv__check_compat(to, src);
    if (!rc) rc = dv__copy(to, src, stream);
    if (!rc && out) *out = dv_array_retain(to);
    return rc;
  }
  DV_CHECK_NULL(out);
  if (!dv__is_host_side(src) && src->alloc->ctx == ctx) {
    *out = dv_array_retain((dv_array *)src); /* Numba returns device arrays as they are */
    return DV_OK;
  }
  /* A host array, or a device array of another context (device or backend);
   * one dense in C order (not empty) gets the C layout without a stride search. */
  dv_array *d = NULL;
  int64_t lst[DV_MAXDIMS];
  int64_t dense = dv__dense_bytes(src->ndim, src->shape, src->strides, (int64_t)src->dtype->itemsize);
  if (dense <= 0) dv__like_strides(src, lst);
  dv_status rc = dv_device_array(ctx, src->ndim, src->shape, src->dtype, dense > 0 ? NULL : lst, 'C', stream, &d);
  if (rc) return rc;
  if (copy) {
    /* d is new, of ctx, laid out like src (dense in C order over `dense`
     * bytes when src is) and allocated for `stream`; src is host memory or
     * another context's: no checks to repeat, no stream to order (the
     * pinned pool hears of the use of its memory: dv__alloc_after). */
    (void)dv__alloc_after(ctx, src->alloc, stream);
    bool dh, sh;
    dv_memref dr, sr;
    if (dense > 0 && src->alloc->ctx == ctx &&
        (dr = dv__ref_of(d, &dh), sr = dv__ref_of(src, &sh), dv__transfer_dense_ok(dr, dh, sr, sh)))
      rc = dv__transfer_dense(ctx, dr, dh, sr, sh, (size_t)dense, stream, NULL, 0, 0);
    else
      rc = dv__copy_planned(ctx, d, src, stream, NULL, 0);
  }
  if (rc) {
    dv_array_release(d);
    return rc;
  }
  *out = d;
  return DV_OK;
}

dv_status dv_copy_to_host(const dv_array *src, dv_array *dst, dv_stream *stream, dv_array **out) {
  if (out) *out = NULL;
  DV_CHECK_NULL(src);
  DV_CHECK_ARRAY(src);
  /* The work runs on the destination's context (a new host array is made
   * on the source's). */
  if (dst) DV_CHECK_ARRAY(dst);
  dv_status src_rc = dv__check_stream(dst ? dst->alloc->ctx : src->alloc->ctx, stream);
  if (!src_rc) src_rc = dv__check_live(src, "source");
  if (src_rc) return src_rc;
  if (dst) {
    if (!dv__is_host_side(dst))
      return dv__error(DV_ERR_INVALID_ARGUMENT, "the destination of dv_copy_to_host must be a host array");
    dv_status rc = dv__check_compat(dst, src);
    if (!rc) rc = dv__copy(dst, src, stream);
    if (!rc && out) *out = dv_array_retain(dst);
    return rc;
  }
  DV_CHECK_NULL(out);
  int64_t st[DV_MAXDIMS];
  dv__like_strides(src, st);
  dv_array *h = NULL;
  dv_status rc = dv_host_array(src->alloc->ctx, src->ndim, src->shape, src->dtype, st, 'C', &h);
  if (!rc) rc = dv__copy(h, src, stream);
  if (rc) {
    dv_array_release(h);
    return rc;
  }
  *out = h;
  return DV_OK;
}

dv_status dv_copy_to_device(dv_array *dst, const dv_array *src, dv_stream *stream) {
  DV_CHECK_NULL(dst);
  DV_CHECK_ARRAY(dst);
  DV_CHECK_NULL(src);
  DV_CHECK_ARRAY(src);
  dv_status rc = dv__check_stream(dst->alloc->ctx, stream);
  if (rc) return rc;
  if (dv__is_host_side(dst))
    return dv__error(DV_ERR_INVALID_ARGUMENT, "the destination of dv_copy_to_device must be a device array");
  rc = dv__check_compat(dst, src);
  if (rc) return rc;
  return dv__copy(dst, src, stream);
}

dv_status dv_array_memset(dv_array *a, int value, dv_stream *stream) {
  DV_CHECK_NULL(a);
  DV_CHECK_ARRAY(a);
  dv_context *ctx = a->alloc->ctx;
  dv_status rc = dv__check_stream(ctx, stream);
  if (!rc) rc = dv__check_live(a, "array");
  if (rc) return rc;
  dv_view v;
  dv__view_of(a, &v);
  dv_stream *after = dv__alloc_after(ctx, a->alloc, stream);
  if (DV_NVTX_RANGES()) {
    dv__nvtx_push("devarray memset");
    rc = dv__memset(ctx, &v, &value, stream, &after, after ? 1 : 0);
    dv__nvtx_pop();
    return rc;
  }
  return dv__memset(ctx, &v, &value, stream, &after, after ? 1 : 0);
}

dv_status dv_array_copy_new(const dv_array *a, char order, dv_stream *stream, dv_array **out) {
  DV_CHECK_NULL(out);
  *out = NULL;
  DV_CHECK_NULL(a);
  DV_CHECK_ARRAY(a);
  dv_status rc = dv__check_stream(a->alloc->ctx, stream);
  if (!rc) rc = dv__check_live(a, "source");
  if (rc) return rc;
  dv_array *n = NULL;
  dv_memory_kind kind = dv__is_host_side(a) ? DV_MEM_HOST : DV_MEM_DEVICE;
  rc = dv__array_create(a->alloc->ctx, kind, a->ndim, a->shape, a->dtype, NULL, order, 0, stream, &n);
  if (!rc) rc = dv__copy(n, a, stream);
  if (rc) {
    dv_array_release(n);
    return rc;
  }
  *out = n;
  return DV_OK;
}

/* The byte offset of element `index` (negative entries count from the
 * end), with dv_array_slice's messages for indices out of range. */
static dv_status dv__element_offset(const dv_array *a, const int64_t *index, int64_t *offset) {
  int64_t off = a->offset;
  for (int i = 0; i < a->ndim; i++) {
    int64_t k = index[i];
    if (k < 0) k += a->shape[i];
    if (k < 0 || k >= a->shape[i])
      return dv__error(DV_ERR_INDEX, "index %lld is out of bounds for axis %d with size %lld",
                       (long long)index[i], i, (long long)a->shape[i]);
    off += k * a->strides[i];
  }
  *offset = off;
  return DV_OK;
}

static dv_status dv__item_io(dv_array *a, const int64_t *index, void *buf, size_t size,
                             dv_stream *stream, bool get, const char *fn) {
  DV_CHECK_NULL(a);
  dv_status rc = dv__handle_check(&a->hdr, DV_HANDLE_ARRAY, fn);
  if (rc) return rc;
  DV_CHECK_NULL(buf);
  if (a->ndim > 0) DV_CHECK_NULL(index);
  rc = dv__check_stream_fn(a->alloc->ctx, stream, fn);
  if (rc) return rc;
  if (size < a->dtype->itemsize)
    return dv__error(DV_ERR_INVALID_ARGUMENT, "buffer of %zu bytes is smaller than the %zu-byte element",
                     size, a->dtype->itemsize);
  int64_t off = 0;
  rc = dv__element_offset(a, index, &off);
  if (rc) return rc;
  rc = dv__check_live(a, get ? "source" : "destination");
  if (rc) return rc;
  dv_view v, h;
  dv__view_part(a, a->dtype, 0, NULL, NULL, off, &v);
  dv__view_host(buf, a->dtype, 0, NULL, NULL, &h);
  dv_context *ctx = a->alloc->ctx;
  /* the caller's buffer is not the graph's: an element access is not captured */
  if (stream && stream->capture) return dv__capture_refused(fn);
  dv_stream *after = dv__alloc_after(ctx, a->alloc, stream);
  return get ? dv__transfer(ctx, &h, &v, stream, &after, after ? 1 : 0, 0)
             : dv__transfer(ctx, &v, &h, stream, &after, after ? 1 : 0, 0);
}

dv_status dv_array_get_item(const dv_array *a, const int64_t *index, void *out, size_t outsize,
                            dv_stream *stream) {
  return dv__item_io((dv_array *)a, index, out, outsize, stream, true, __func__);
}

dv_status dv_array_set_item(dv_array *a, const int64_t *index, const void *value, size_t size,
                            dv_stream *stream) {
  return dv__item_io(a, index, (void *)value, size, stream, false, __func__);
}
/* A copy of a laid out densely in `order` with shape (nnd, nshape). */
dv_status dv__reshape_copy(const dv_array *a, int nnd, const int64_t *nshape, char order,
                                  dv_stream *stream, dv_array **out) {
  dv_memory_kind kind = dv__is_host_side(a) ? DV_MEM_HOST : DV_MEM_DEVICE;
  dv_status rc = dv__check_live(a, "source");
  if (rc) return rc;
  dv_array *n = NULL;
  rc = dv__array_create(a->alloc->ctx, kind, nnd, nshape, a->dtype, NULL, order, 0, stream, &n);
  if (rc) return rc;
  /* View the new (dense) array with a's shape, reading in `order`: always
   * possible, and then the copy is an ordinary element-wise transfer. */
  int64_t vst[DV_MAXDIMS];
  dv__layout_dense(a->ndim, a->shape, (int64_t)a->dtype->itemsize, order, vst);
  dv_view v, av;
  dv__view_part(n, a->dtype, a->ndim, a->shape, vst, n->offset, &v);
  dv__view_of(a, &av);
  dv_context *ctx = n->alloc->ctx;
  dv_stream *after[2] = {dv__alloc_after(ctx, a->alloc, stream), dv__alloc_after(ctx, n->alloc, stream)};
  rc = dv__copy_views(ctx, &v, a->alloc->ctx, &av, stream, after, after[0] || after[1] ? 2 : 0);
  if (rc) {
    dv_array_release(n);
    return rc;
  }
  *out = n;
  return DV_OK;
}

static dv_status dv__record_io(dv_array *rec, const char *name, void *buf, size_t size,
                               dv_stream *stream, bool get, const char *fn) {
  DV_CHECK_NULL(rec);
  dv_status rc = dv__handle_check(&rec->hdr, DV_HANDLE_ARRAY, fn);
  if (rc) return rc;
  DV_CHECK_NULL(name);
  DV_CHECK_NULL(buf);
  rc = dv__check_stream_fn(rec->alloc->ctx, stream, fn);
  if (rc) return rc;
  if (rec->ndim != 0)
    return dv__error(DV_ERR_INVALID_ARGUMENT, "a record is 0-d; this array has %d dims (use dv_array_field)", rec->ndim);
  if (rec->dtype->id != DV_RECORD)
    return dv__error(DV_ERR_BAD_DTYPE, "field access needs a record array, not %s", rec->dtype->name);
  const dv_field *f = dv__dtype_find_field(rec->dtype, name);
  if (!f) return dv__error(DV_ERR_UNKNOWN_FIELD, "no field named \"%s\"", name);
  /* The field's bytes fit int64_t (checked when the dtype was made). */
  int64_t count;
  dv__layout_size(f->ndim, f->shape, &count);
  size_t need = (size_t)count * f->dtype->itemsize;
  if (size < need)
    return dv__error(DV_ERR_INVALID_ARGUMENT, "field \"%s\" has %zu bytes; buffer has %zu", name, need, size);
  rc = dv__check_live(rec, get ? "source" : "destination");
  if (rc) return rc;
  /* The field inside the record (C order for sub-arrays) and the caller's
   * buffer, both as stack descriptors. */
  int64_t st[DV_MAXDIMS], hst[DV_MAXDIMS];
  dv__layout_dense(f->ndim, f->shape, (int64_t)f->dtype->itemsize, 'C', st);
  dv_view fv, h;
  dv__view_part(rec, f->dtype, f->ndim, f->shape, st, rec->offset + (int64_t)f->offset, &fv);
  dv__view_host(buf, f->dtype, f->ndim, f->shape, hst, &h);
  dv_context *ctx = rec->alloc->ctx;
  if (stream && stream->capture) return dv__capture_refused(fn);
  dv_stream *after = dv__alloc_after(ctx, rec->alloc, stream);
  return get ? dv__transfer(ctx, &h, &fv, stream, &after, after ? 1 : 0, 0)
             : dv__transfer(ctx, &fv, &h, stream, &after, after ? 1 : 0, 0);
}

dv_status dv_record_get(const dv_array *rec, const char *name, void *out, size_t size, dv_stream *stream) {
  return dv__record_io((dv_array *)rec, name, out, size, stream, true, __func__);
}

dv_status dv_record_set(dv_array *rec, const char *name, const void *value, size_t size, dv_stream *stream) {
  return dv__record_io(rec, name, (void *)value, size, stream, false, __func__);
}
