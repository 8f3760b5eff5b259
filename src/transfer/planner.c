/*
 * The transfer planner: turns (source view, destination view) into the
 * fewest backend operations.
 *
 *  1. Drop size-1 dimensions; flip dimensions whose strides are negative on
 *     both sides; order dimensions by the destination's stride; merge
 *     dimensions that are contiguous on both sides.
 *  2. If what is left is at most three levels of positive pitches (rows of
 *     contiguous bytes, or of single elements), it is one rectangular copy.
 *  3. Otherwise, if the backend can gather/scatter (copy_strided), one
 *     strided copy.
 *  4. Otherwise pack/unpack through host staging, every phase in stream
 *     order: device -> staging laid out in the device view's own order
 *     (rectangular copies), a CPU repack on the host (a stream callback),
 *     staging -> device (rectangular copies).  A device view that would take
 *     more than one rectangular copy is packed (or unpacked) on the device
 *     instead when the backend has copy_strided: a strided copy between the
 *     view and a dense device temporary in the staging layout, and one
 *     contiguous copy between the temporary and staging.  Host views are never copied
 *     by the device as a whole: the CPU reads or writes exactly their
 *     elements, so bytes between a host view's elements are never touched.
 *
 * Two views of the same memory (one device buffer, or host memory) are
 * first tested for shared bytes (overlap.c): views that share one are
 * refused with DV_ERR_INVALID_ARGUMENT on every backend, whatever a driver
 * would have made of them; when the exact test runs out of work the copy
 * goes through a dense temporary, which is right either way.
 */
#include <stdio.h>
#include <string.h>

#include "../core/memops.h"
#include "../memory/memory.h"
#include "../stream/stream.h"
#include "transfer.h"

typedef struct dv_plan {
  int nd;
  size_t isz;
  int64_t n[DV_MAXDIMS];
  int64_t ss[DV_MAXDIMS], ds[DV_MAXDIMS]; /* source / destination strides */
  int64_t soff, doff;                     /* byte offsets from the views' bases */
} dv_plan;

/* The address of byte `off` of view v. */
static dv_memref dv__ref(const dv_view *v, int64_t off) {
  dv_memref r = v->base;
  if (v->host)
    r.ptr = (char *)v->base.ptr + off;
  else
    r.offset = v->base.offset + (size_t)off;
  return r;
}

/* The view's extents and strides without its size-1 dimensions (their
 * strides never reach an element); returns how many are left. */
static int dv__squeeze(const dv_view *v, int64_t *n, int64_t *st) {
  int k = 0;
  for (int i = 0; i < v->ndim; i++)
    if (v->shape[i] != 1) n[k] = v->shape[i], st[k] = v->strides[i], k++;
  return k;
}

static int64_t dv__view_size(const dv_view *v) {
  int64_t n = 1;
  for (int i = 0; i < v->ndim; i++) n *= v->shape[i]; /* checked when the array was made */
  return n;
}

/* Build the normalised plan; returns false for size 0 (nothing to do).
 * Both views have the same shape once size-1 dimensions are dropped. */
static bool dv__plan_build(dv_plan *p, const dv_view *dst, const dv_view *src) {
  int64_t sn[DV_MAXDIMS], sst[DV_MAXDIMS], dn[DV_MAXDIMS], dst_[DV_MAXDIMS];
  int snd = dv__squeeze(src, sn, sst);
  dv__squeeze(dst, dn, dst_);
  p->isz = src->itemsize;
  p->soff = src->offset;
  p->doff = dst->offset;
  if (dv__view_size(src) == 0) return false;
  /* Flip dimensions negative on both sides. */
  for (int i = 0; i < snd; i++) {
    if (sst[i] < 0 && dst_[i] < 0) {
      p->soff += (sn[i] - 1) * sst[i];
      p->doff += (sn[i] - 1) * dst_[i];
      sst[i] = -sst[i];
      dst_[i] = -dst_[i];
    }
  }
  /* Order by decreasing |destination stride| (stable insertion sort). */
  int perm[DV_MAXDIMS];
  for (int i = 0; i < snd; i++) perm[i] = i;
  for (int i = 1; i < snd; i++) {
    int x = perm[i], j = i;
    int64_t kx = dst_[x] < 0 ? -dst_[x] : dst_[x];
    while (j > 0) {
      int y = perm[j - 1];
      int64_t ky = dst_[y] < 0 ? -dst_[y] : dst_[y];
      if (ky >= kx) break;
      perm[j] = y;
      j--;
    }
    perm[j] = x;
  }
  /* Merge dimensions contiguous on both sides. */
  int nd = 0;
  for (int k = 0; k < snd; k++) {
    int i = perm[k];
    if (nd > 0 && p->ss[nd - 1] == sst[i] * sn[i] && p->ds[nd - 1] == dst_[i] * sn[i]) {
      p->n[nd - 1] *= sn[i];
      p->ss[nd - 1] = sst[i];
      p->ds[nd - 1] = dst_[i];
      continue;
    }
    p->n[nd] = sn[i];
    p->ss[nd] = sst[i];
    p->ds[nd] = dst_[i];
    nd++;
  }
  p->nd = nd;
  return true;
}

/* Express the plan as one rect if it fits (positive, non-overlapping pitches). */
static bool dv__plan_rect(const dv_plan *p, dv_rect *r) {
  int nd = p->nd;
  int64_t isz = (int64_t)p->isz;
  int rows; /* dims that become rows/slices */
  memset(r, 0, sizeof *r);
  if (nd == 0) {
    r->width = p->isz, r->height = r->depth = 1;
    return true;
  }
  if (p->ss[nd - 1] == isz && p->ds[nd - 1] == isz) {
    r->width = (size_t)(p->n[nd - 1] * isz);
    rows = nd - 1;
  } else {
    r->width = p->isz;
    rows = nd;
  }
  if (rows > 2) return false;
  size_t h = 1, d = 1, sp = r->width, dp = r->width, ssl = 0, dsl = 0;
  if (rows >= 1) {
    int i = rows == 2 ? 1 : 0;
    h = (size_t)p->n[i];
    if (p->ss[i] < (int64_t)r->width || p->ds[i] < (int64_t)r->width) return false;
    sp = (size_t)p->ss[i], dp = (size_t)p->ds[i];
  }
  if (rows == 2) {
    d = (size_t)p->n[0];
    /* slices must not overlap: the last row of one ends before the next;
     * backends with stricter rules (slice >= pitch * height) refuse */
    if (p->ss[0] < (int64_t)(sp * (h - 1) + r->width) || p->ds[0] < (int64_t)(dp * (h - 1) + r->width)) return false;
    ssl = (size_t)p->ss[0], dsl = (size_t)p->ds[0];
  }
  r->height = h, r->depth = d;
  r->src_pitch = sp, r->dst_pitch = dp, r->src_slice = ssl, r->dst_slice = dsl;
  return true;
}

/* One copy made for the caller: counted by dv__stream_submit once queued. */
static void dv__count(dv__op_tally *t, const dv_view *dst, const dv_view *src, uint64_t bytes) {
  dv__tally(t, dst->host, src->host, bytes);
}

/* ---- staging ---------------------------------------------------------------- */

/* A strided copy over plain host memory, run as a stream callback. */
typedef struct dv_repack {
  dv_strided c;
  char *free1, *free2; /* staging buffers to free afterwards (if last) */
} dv_repack;

static void dv__repack_cb(void *user, dv_status status) {
  dv_repack *r = user;
  if (status == DV_OK)
    dv__strided_copy(r->c.dst.ptr, r->c.dst_strides, r->c.src.ptr, r->c.src_strides, r->c.shape,
                     r->c.nd, r->c.itemsize);
  dv__free(r);
}

/* Staging buffers go back to the pinned pool once the stream is past them. */
typedef struct dv_free_list {
  dv_context *ctx;
  dv_staging_buf *a, *b;
} dv_free_list;
static void dv__free_cb(void *user, dv_status status) {
  (void)status;
  dv_free_list *f = user;
  dv__staging_put(f->ctx, f->a);
  dv__staging_put(f->ctx, f->b);
  dv__free(f);
}

/* Dense staging strides in the order of decreasing device stride (stable),
 * with stride 0 where the device stride is 0 (a broadcast dimension is
 * staged once).  perm receives that order. */
static void dv__staging_strides(int nd, const int64_t *n, const int64_t *dvs, int64_t isz,
                                int *perm, int64_t *st) {
  for (int i = 0; i < nd; i++) perm[i] = i;
  for (int i = 1; i < nd; i++) {
    int x = perm[i], j = i;
    while (j > 0 && dvs[perm[j - 1]] < dvs[x]) perm[j] = perm[j - 1], j--;
    perm[j] = x;
  }
  int64_t s = isz;
  for (int k = nd - 1; k >= 0; k--) {
    int i = perm[k];
    st[i] = dvs[i] == 0 ? 0 : s;
    if (dvs[i] != 0) s *= n[i];
  }
}

/*
 * Pack (or unpack) a device view on the device: the backend's strided copy
 * between the view and a dense device temporary laid out as the staging
 * buffer, and one contiguous copy between the temporary and staging.
 * DV_ERR_NOT_SUPPORTED when that cannot be done (no memory for the
 * temporary, a layout the backend's kernels refuse): the caller then uses
 * rectangular copies.  The temporary is an optimisation: it comes straight
 * from the memory manager (no flush-and-retry, and the thread's error
 * message is left as it was when there is none), and goes back to it as
 * soon as its copies are queued: a manager's free takes the stream the
 * block's work is queued on (dv_memory_manager.free).
 */
static dv_status dv__device_pack(dv_context *ctx, dv_stream *stream, dv_bstream *bs,
                                 const dv_plan *p, dv_memref dev, char *stage, bool to_device) {
  int64_t count = 1;
  for (int i = 0; i < p->nd; i++) count *= p->n[i];
  size_t bytes = (size_t)count * p->isz;
  char saved[1024];
  snprintf(saved, sizeof saved, "%s", dv_last_error());
  dv_block blk = {NULL, 0, NULL};
  dv_memory_state *m = ctx->memory;
  if (m->mm.alloc(m->mm_state, bytes, stream, &blk) != DV_OK) {
    dv__log(DV_LOG_DEBUG, "device packing: no temporary of %zu bytes (%s); copying by rows", bytes,
            dv_last_error());
    dv__error(DV_OK, "%s", saved); /* the fallback succeeds or reports its own error */
    return DV_ERR_NOT_SUPPORTED;
  }
  if (!dv__mm_block_known(ctx, blk, bytes)) { /* a plug-in's memory the backend cannot use */
    dv_status frc = m->mm.free(m->mm_state, blk, bytes, stream);
    if (frc) dv__log(DV_LOG_WARN, "device packing: giving back an unusable temporary failed: %s", dv_last_error());
    dv__error(DV_OK, "%s", saved);
    return DV_ERR_NOT_SUPPORTED;
  }
  dv__mem_note(ctx, DV_MEMORY_ALLOC, DV_MEM_DEVICE, bytes, blk.buf, blk.offset, stream);
  dv_memref tmp = {.buf = blk.buf, .offset = blk.offset}, h = {.ptr = stage};
  dv_strided c;
  memset(&c, 0, sizeof c);
  c.nd = p->nd;
  c.itemsize = p->isz;
  memcpy(c.shape, p->n, sizeof c.shape);
  c.src = to_device ? tmp : dev;
  c.dst = to_device ? dev : tmp;
  memcpy(c.src_strides, to_device ? p->ss : p->ds, sizeof c.src_strides);
  memcpy(c.dst_strides, to_device ? p->ds : p->ss, sizeof c.dst_strides);
  dv_rect r;
  memset(&r, 0, sizeof r);
  r.src = to_device ? h : tmp;
  r.dst = to_device ? tmp : h;
  r.width = bytes;
  r.height = r.depth = 1;
  dv_status rc = DV_OK;
  if (to_device) rc = ctx->be->copy_rect(ctx->bst, bs, &r);
  if (!rc) rc = ctx->be->copy_strided(ctx->bst, bs, &c);
  if (!rc && !to_device) rc = ctx->be->copy_rect(ctx->bst, bs, &r);
  if (rc == DV_OK) atomic_fetch_add(&ctx->stats.copies, 2);
  /* A copy that failed to queue may still have queued its first phase:
   * the manager's free is stream-ordered either way. */
  dv__mem_note(ctx, DV_MEMORY_FREE, DV_MEM_DEVICE, bytes, blk.buf, blk.offset, stream);
  dv_status frc = m->mm.free(m->mm_state, blk, bytes, stream);
  if (frc) dv__log(DV_LOG_ERROR, "releasing a packing temporary: %s", dv_last_error());
  return rc;
}

/*
 * One device view <-> a dense host staging buffer in the device view's own
 * order.  dims: n[] and device strides dv[] (after the caller flipped
 * negative device strides); the staging strides st[] are computed here.
 * Issues rect copies (looping over dimensions beyond three levels).
 */
static dv_status dv__device_staging(dv_context *ctx, dv_stream *stream, dv_bstream *bs, int nd,
                                    const int64_t *n, const int64_t *dvs, int64_t isz,
                                    dv_memref dev, char *stage, bool to_device, int64_t *st) {
  int perm[DV_MAXDIMS];
  dv__staging_strides(nd, n, dvs, isz, perm, st);
  /* Build a plan over the non-broadcast dims, device order, and merge. */
  dv_plan p = {.isz = (size_t)isz};
  for (int k = 0; k < nd; k++) {
    int i = perm[k];
    if (dvs[i] == 0) continue;
    if (p.nd > 0 && p.ss[p.nd - 1] == st[i] * n[i] && p.ds[p.nd - 1] == dvs[i] * n[i]) {
      p.n[p.nd - 1] *= n[i];
      p.ss[p.nd - 1] = st[i];
      p.ds[p.nd - 1] = dvs[i];
      continue;
    }
    p.n[p.nd] = n[i], p.ss[p.nd] = st[i], p.ds[p.nd] = dvs[i];
    p.nd++;
  }
  /* Outer dims beyond what one rect holds are looped over.  A backend may
   * refuse a rect (OpenCL wants slice pitches that are multiples of the row
   * pitch; CUDA, pitches above the device's limit): then one level fewer per
   * rect, down to single rows; rows the backend refuses too (a 1-D view
   * whose stride is above the pitch limit) are packed on the device by its
   * strided copy where it has one, else copied an element at a time. */
  int64_t isz64 = isz;
  int levels = (p.nd > 0 && p.ss[p.nd - 1] == isz64 && p.ds[p.nd - 1] == isz64) ? 3 : 2;
  bool packed = false;
  if (p.nd > levels && dv__be_has(ctx->be, DV_BCAP_STRIDED)) {
    packed = true;
    dv_status rc = dv__device_pack(ctx, stream, bs, &p, dev, stage, to_device);
    if (rc != DV_ERR_NOT_SUPPORTED) return rc;
  }
  for (;; levels--) {
    int outer = p.nd > levels ? p.nd - levels : 0;
    dv_plan q = p;
    q.nd = p.nd - outer;
    for (int i = 0; i < q.nd; i++) q.n[i] = p.n[outer + i], q.ss[i] = p.ss[outer + i], q.ds[i] = p.ds[outer + i];
    dv_rect r;
    if (!dv__plan_rect(&q, &r))
      return dv__error(DV_ERR_NOT_SUPPORTED, "device view with overlapping rows cannot be staged");
    int64_t idx[DV_MAXDIMS] = {0};
    bool first = true;
    for (;;) {
      int64_t so = 0, dof = 0;
      for (int i = 0; i < outer; i++) so += idx[i] * p.ss[i], dof += idx[i] * p.ds[i];
      dv_memref h = {.ptr = stage + so};
      dv_memref d = dev;
      d.offset += (size_t)dof;
      dv_rect x = r;
      x.src = to_device ? h : d;
      x.dst = to_device ? d : h;
      if (!to_device) {
        x.src_pitch = r.dst_pitch, x.dst_pitch = r.src_pitch;
        x.src_slice = r.dst_slice, x.dst_slice = r.src_slice;
      }
      dv_status rc = ctx->be->copy_rect(ctx->bst, bs, &x);
      if (rc == DV_ERR_NOT_SUPPORTED && first && levels == 1 && !packed && dv__be_has(ctx->be, DV_BCAP_STRIDED)) {
        packed = true; /* rows refused: the device packs the view */
        rc = dv__device_pack(ctx, stream, bs, &p, dev, stage, to_device);
        if (rc != DV_ERR_NOT_SUPPORTED) return rc;
      }
      if (rc == DV_ERR_NOT_SUPPORTED && first && levels > 0) break; /* fewer levels */
      if (rc == DV_ERR_NOT_SUPPORTED)
        return dv__error(DV_ERR_NOT_SUPPORTED,
                         "the %s backend refused to copy a device view of %d dimension(s) through host "
                         "staging in every layout, down to single %zu-byte elements",
                         ctx->backend_name, p.nd, (size_t)isz);
      if (rc) return rc;
      first = false;
      atomic_fetch_add(&ctx->stats.copies, 1);
      int k = outer - 1;
      for (; k >= 0; k--) {
        if (++idx[k] < p.n[k]) break;
        idx[k] = 0;
      }
      if (k < 0) return DV_OK;
    }
  }
}

static dv_status dv__staged(dv_context *ctx, dv_stream *stream, dv_bstream *bs, const dv_view *dst,
                            const dv_view *src, const dv_plan *p0, dv__op_tally *t) {
  dv_plan p = *p0;
  int64_t isz = (int64_t)p.isz;
  bool sh = src->host, dh = dst->host;
  atomic_fetch_add(&ctx->stats.staged_copies, 1);
  int64_t count = 1;
  for (int i = 0; i < p.nd; i++) count *= p.n[i];
  int64_t bytes = count * isz;
  char *sa = NULL, *sb = NULL;
  dv_staging_buf *ba = NULL, *bb = NULL;
  int64_t sta[DV_MAXDIMS], stb[DV_MAXDIMS];
  /* Source side: a device source goes to staging A (in its own order). */
  int64_t s_off = p.soff, d_off = p.doff;
  int64_t ss[DV_MAXDIMS], ds[DV_MAXDIMS];
  memcpy(ss, p.ss, sizeof ss);
  memcpy(ds, p.ds, sizeof ds);
  dv_status rc = DV_OK;
  if (!sh) {
    rc = dv__staging_get(ctx, (size_t)bytes, &ba);
    if (rc) return rc;
    sa = ba->ptr;
    /* Flip the source's negative dims (the CPU repack handles the sign). */
    int64_t dsv[DV_MAXDIMS], off = s_off;
    for (int i = 0; i < p.nd; i++) {
      dsv[i] = ss[i];
      if (ss[i] < 0) off += (p.n[i] - 1) * ss[i], dsv[i] = -ss[i];
    }
    rc = dv__device_staging(ctx, stream, bs, p.nd, p.n, dsv, isz, dv__ref(src, off), sa, false, sta);
    if (rc) goto fail;
    for (int i = 0; i < p.nd; i++)
      if (ss[i] < 0) sta[i] = -sta[i]; /* element 0 of the view sits at the far end */
    /* Staging A with strides sta, element 0 at: */
    int64_t base = 0;
    for (int i = 0; i < p.nd; i++)
      if (sta[i] < 0) base -= (p.n[i] - 1) * sta[i];
    s_off = base;
    memcpy(ss, sta, sizeof ss);
  }
  int64_t dsv[DV_MAXDIMS], dev_off = d_off;
  if (!dh) {
    rc = dv__staging_get(ctx, (size_t)bytes, &bb);
    if (rc) goto fail;
    sb = bb->ptr;
    for (int i = 0; i < p.nd; i++) {
      dsv[i] = ds[i];
      if (ds[i] < 0) dev_off += (p.n[i] - 1) * ds[i], dsv[i] = -ds[i];
    }
    /* The layout of staging B is the device layout's order (computed by
     * dv__device_staging); compute it without issuing copies first. */
  }
  /* The CPU repack: source (host view or staging A) -> destination (host view
   * or staging B), in stream order. */
  dv_repack *rp = dv__calloc(1, sizeof *rp);
  if (!rp) {
    rc = dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate a repack record");
    goto fail;
  }
  rp->c.nd = p.nd;
  rp->c.itemsize = p.isz;
  memcpy(rp->c.shape, p.n, sizeof p.n);
  rp->c.src.ptr = sh ? (char *)src->base.ptr + p.soff : sa + s_off;
  memcpy(rp->c.src_strides, ss, sizeof ss);
  if (dh) {
    rp->c.dst.ptr = (char *)dst->base.ptr + p.doff;
    memcpy(rp->c.dst_strides, ds, sizeof ds);
  } else {
    /* Staging B: dense in the device view's order, as dv__device_staging
     * will lay it out. */
    int perm[DV_MAXDIMS];
    dv__staging_strides(p.nd, p.n, dsv, isz, perm, stb);
    int64_t base = 0;
    for (int i = 0; i < p.nd; i++) {
      rp->c.dst_strides[i] = ds[i] < 0 ? -stb[i] : stb[i];
      if (ds[i] < 0) base += (p.n[i] - 1) * stb[i];
    }
    rp->c.dst.ptr = sb + base;
  }
  rc = ctx->be->stream_callback(ctx->bst, bs, dv__repack_cb, rp);
  if (rc) {
    dv__free(rp);
    goto fail;
  }
  if (!dh) {
    int64_t st2[DV_MAXDIMS];
    rc = dv__device_staging(ctx, stream, bs, p.nd, p.n, dsv, isz, dv__ref(dst, dev_off), sb, true, st2);
    if (rc) goto fail;
  }
  dv_free_list *fl = dv__malloc(sizeof *fl);
  if (!fl) {
    rc = dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate a staging record");
    goto fail;
  }
  fl->ctx = ctx, fl->a = ba, fl->b = bb;
  rc = ctx->be->stream_callback(ctx->bst, bs, dv__free_cb, fl);
  if (rc) {
    dv__free(fl);
    goto fail;
  }
  dv__count(t, dst, src, (uint64_t)bytes);
  return DV_OK;
fail:
  /* Copies into or out of the staging buffers may already be queued (even
   * part of a phase): wait for the stream before freeing them. */
  dv__bstream_wait(ctx, bs);
  dv__staging_put(ctx, ba);
  dv__staging_put(ctx, bb);
  return rc;
}

/* Addresses of both sides in the one address space they share, if they
 * share one: the same device buffer (byte offsets in it) or host memory
 * (pointers). */
static bool dv__same_memory(const dv_view *dst, const dv_view *src, int64_t *dbase, int64_t *sbase) {
  if (src->host != dst->host) return false;
  if (src->host) {
    *sbase = (int64_t)(uintptr_t)src->base.ptr;
    *dbase = (int64_t)(uintptr_t)dst->base.ptr;
    return true;
  }
  if (src->base.buf != dst->base.buf) return false;
  *sbase = (int64_t)src->base.offset;
  *dbase = (int64_t)dst->base.offset;
  return true;
}

/* A view in the plan's dimensions over the memory at base. */
static void dv__plan_view(dv_view *v, const dv_view *base, const dv_plan *p, const int64_t *strides,
                          int64_t offset) {
  *v = *base;
  v->ndim = p->nd;
  v->offset = offset;
  v->shape = p->n;
  v->strides = strides;
}

/* Dense C-order byte strides for nd extents n of isz-byte elements. */
static void dv__dense_strides(int nd, const int64_t *n, int64_t isz, int64_t *st) {
  int64_t s = isz;
  for (int i = nd - 1; i >= 0; i--) st[i] = s, s *= n[i];
}

/* A pageable temporary too large for the staging pool, freed by the stream
 * once it is past it. */
static void dv__free_host_cb(void *user, dv_status status) {
  (void)status;
  dv__free(user);
}

/* src -> a dense host temporary -> dst, in stream order.  Used when the
 * overlap test could not decide: right whether or not the views share
 * bytes, as NumPy's copies through a temporary are (so it is never split
 * into chunks: a chunk's writes could change what a later chunk reads).
 * The temporary is a pinned staging buffer up to the staging pool's
 * largest class (2 GiB), pageable host memory beyond it. */
_Atomic int64_t dv__via_pinned_max = (int64_t)1 << (16 + DV_STAGING_CLASSES - 1); /* 2 GiB */
static dv_status dv__xfer(dv_context *ctx, dv_stream *stream, dv_bstream *bs, unsigned flags,
                          const dv_view *dst, const dv_view *src, dv__op_tally *t);
static dv_status dv__via_pageable(dv_context *ctx, dv_bstream *bs, unsigned flags, const dv_view *dst,
                                  const dv_view *src, const dv_plan *p, dv_stream *stream, dv__op_tally *t);
static dv_status dv__via_temporary(dv_context *ctx, dv_bstream *bs, unsigned flags, const dv_view *dst,
                                   const dv_view *src, const dv_plan *p, dv_stream *stream, dv__op_tally *t) {
  int64_t count = 1, isz = (int64_t)p->isz;
  for (int i = 0; i < p->nd; i++) count *= p->n[i];
  if (count * isz > atomic_load(&dv__via_pinned_max))
    return dv__via_pageable(ctx, bs, flags, dst, src, p, stream, t);
  dv_staging_buf *b = NULL;
  dv_status rc = dv__staging_get(ctx, (size_t)(count * isz), &b);
  if (rc) return rc;
  dv_view tmp = {.base = {.ptr = b->ptr}, .host = true, .itemsize = p->isz};
  int64_t dense[DV_MAXDIMS];
  dv__dense_strides(p->nd, p->n, isz, dense);
  dv_view tv, sv, dv;
  dv__plan_view(&tv, &tmp, p, dense, 0);
  dv__plan_view(&sv, src, p, p->ss, p->soff);
  dv__plan_view(&dv, dst, p, p->ds, p->doff);
  rc = dv__xfer(ctx, stream, bs, flags, &tv, &sv, t);
  if (!rc) rc = dv__xfer(ctx, stream, bs, flags, &dv, &tv, t);
  dv_free_list *fl = rc ? NULL : dv__malloc(sizeof *fl);
  if (!rc && !fl) rc = dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate a staging record");
  if (!rc) {
    fl->ctx = ctx, fl->a = b, fl->b = NULL;
    rc = ctx->be->stream_callback(ctx->bst, bs, dv__free_cb, fl);
    if (!rc) return DV_OK;
    dv__free(fl);
  }
  /* Copies into or out of the temporary may be queued: wait before it goes back. */
  dv__bstream_wait(ctx, bs);
  dv__staging_put(ctx, b);
  return rc;
}

static dv_status dv__via_pageable(dv_context *ctx, dv_bstream *bs, unsigned flags, const dv_view *dst,
                                  const dv_view *src, const dv_plan *p, dv_stream *stream, dv__op_tally *t) {
  int64_t count = 1, isz = (int64_t)p->isz;
  for (int i = 0; i < p->nd; i++) count *= p->n[i];
  void *buf = dv__malloc((size_t)(count * isz));
  if (!buf)
    return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate a %lld-byte temporary for a copy",
                     (long long)(count * isz));
  dv_view tmp = {.base = {.ptr = buf}, .host = true, .itemsize = p->isz};
  int64_t dense[DV_MAXDIMS];
  dv__dense_strides(p->nd, p->n, isz, dense);
  dv_view tv, sv, dv;
  dv__plan_view(&tv, &tmp, p, dense, 0);
  dv__plan_view(&sv, src, p, p->ss, p->soff);
  dv__plan_view(&dv, dst, p, p->ds, p->doff);
  dv_status rc = dv__xfer(ctx, stream, bs, flags, &tv, &sv, t);
  if (!rc) rc = dv__xfer(ctx, stream, bs, flags, &dv, &tv, t);
  if (!rc) rc = ctx->be->stream_callback(ctx->bst, bs, dv__free_host_cb, buf);
  if (!rc) return DV_OK;
  dv__bstream_wait(ctx, bs);
  dv__free(buf);
  return rc;
}

/* A device view without a buffer has lost its memory: an error, not a crash. */
static dv_status dv__check_view_live(const dv_view *v, const char *side) {
  if (!v->host && !v->base.buf)
    return dv__error(DV_ERR_INVALID_ARGUMENT,
                     "the %s is a device view of host memory whose mapped scope has ended", side);
  return DV_OK;
}

/* Everything but one contiguous copy: plan, test for shared bytes, then one
 * rectangular copy, one strided copy, or staging. */
static __attribute__((noinline)) dv_status dv__plan_copy(dv_context *ctx, dv_stream *stream, dv_bstream *bs,
                                                         unsigned flags, const dv_view *dst, const dv_view *src,
                                                         dv__op_tally *t) {
  dv_plan p;
  if (!dv__plan_build(&p, dst, src)) return DV_OK;
  dv_status lrc = dv__check_view_live(src, "source");
  if (!lrc) lrc = dv__check_view_live(dst, "destination");
  if (lrc) return lrc;
  int64_t sbase, dbase;
  if (dv__same_memory(dst, src, &dbase, &sbase)) {
    dv_overlap ov = dv__overlap(p.nd, p.n, sbase + p.soff, p.ss, dbase + p.doff, p.ds, (int64_t)p.isz);
    if (ov == DV_OVERLAP_YES)
      return dv__error(DV_ERR_INVALID_ARGUMENT,
                       "the source and destination views share memory (copy through a temporary array)");
    if (ov == DV_OVERLAP_UNKNOWN) {
      if (stream && stream->capture) return dv__capture_refused("a copy between views that may share memory (copied through a temporary)");
      return dv__via_temporary(ctx, bs, flags, dst, src, &p, stream, t);
    }
  }
  int64_t count = 1;
  for (int i = 0; i < p.nd; i++) count *= p.n[i];
  uint64_t bytes = (uint64_t)count * p.isz;
  /* Host-to-host copies of views that are not dense would touch the bytes
   * between elements if done as rows; the rect form only ever copies
   * element bytes, so it is safe for every side. */
  dv_rect r;
  bool any_neg = false;
  for (int i = 0; i < p.nd; i++)
    if (p.ss[i] <= 0 || p.ds[i] <= 0) any_neg = true;
  if (!any_neg && dv__plan_rect(&p, &r)) {
    r.src = dv__ref(src, p.soff);
    r.dst = dv__ref(dst, p.doff);
    r.flags = flags;
    dv_status rc = ctx->be->copy_rect(ctx->bst, bs, &r);
    if (rc == DV_OK) {
      dv__count(t, dst, src, bytes);
      return DV_OK;
    }
    if (rc != DV_ERR_NOT_SUPPORTED) return rc;
  }
  if (dv__be_has(ctx->be, DV_BCAP_STRIDED)) {
    dv_strided c;
    c.src = dv__ref(src, p.soff);
    c.dst = dv__ref(dst, p.doff);
    c.flags = flags;
    c.nd = p.nd;
    c.itemsize = p.isz;
    memcpy(c.shape, p.n, sizeof c.shape);
    memcpy(c.src_strides, p.ss, sizeof c.src_strides);
    memcpy(c.dst_strides, p.ds, sizeof c.dst_strides);
    dv_status rc = ctx->be->copy_strided(ctx->bst, bs, &c);
    if (rc == DV_OK) {
      dv__count(t, dst, src, bytes);
      return DV_OK;
    }
    if (rc != DV_ERR_NOT_SUPPORTED) return rc;
  }
  if (stream && stream->capture)
    return dv__capture_refused("a copy this backend stages through host memory (the layout has no rectangular or "
                               "strided form here)");
  return dv__staged(ctx, stream, bs, dst, src, &p, t);
}

/* The planner's own copies (through a temporary, a memset's pattern):
 * planned like the rest. */
static dv_status dv__xfer(dv_context *ctx, dv_stream *stream, dv_bstream *bs, unsigned flags,
                          const dv_view *dst, const dv_view *src, dv__op_tally *t) {
  return dv__plan_copy(ctx, stream, bs, flags, dst, src, t);
}

/* What dv__transfer (transfer.h) did not make one contiguous copy: planned
 * (not tested for density again). */
dv_status dv__transfer_run(dv_context *ctx, dv_stream *stream, dv_bstream *bs, unsigned flags, const dv__op *op,
                           dv__op_tally *t) {
  return dv__plan_copy(ctx, stream, bs, flags, op->dst, op->src, t);
}

dv_status dv__transfer_planned(dv_context *ctx, const dv_view *dst, const dv_view *src, dv_stream *stream,
                               dv_stream *const *after, size_t nafter, unsigned flags) {
  dv__op op = {dv__transfer_run, NULL, dst->host, src->host, dst, src, NULL, flags, after, nafter};
  return dv__stream_submit(ctx, stream, &op);
}

dv_status dv__contig_run(dv_context *ctx, dv_stream *stream, dv_bstream *bs, unsigned flags, const dv__op *op,
                         dv__op_tally *t) {
  const dv_rect *r = op->copy;
  int64_t n = (int64_t)r->width, one = 1;
  dv_view d = {.base = r->dst, .host = op->dst_host, .ndim = 1, .itemsize = 1, .shape = &n, .strides = &one};
  dv_view s = {.base = r->src, .host = op->src_host, .ndim = 1, .itemsize = 1, .shape = &n, .strides = &one};
  return dv__plan_copy(ctx, stream, bs, flags, &d, &s, t);
}

dv_status dv__memset_run(dv_context *ctx, dv_stream *stream, dv_bstream *bs, unsigned flags, const dv__op *op,
                         dv__op_tally *t) {
  const dv_view *a = op->dst;
  int value = *(const int *)op->arg;
  int64_t size = dv__view_size(a);
  if (size == 0) return DV_OK;
  if (!a->host && !a->base.buf) return dv__check_view_live(a, "array");
  /* Dense in some order when the elements fill their byte range exactly:
   * then one memset over that range. */
  int64_t isz = (int64_t)a->itemsize, lo = 0, hi = isz, nbytes = size * isz;
  for (int i = 0; i < a->ndim; i++) {
    int64_t e = (a->shape[i] - 1) * a->strides[i]; /* inside the allocation: no overflow */
    if (e < 0) lo += e; else hi += e;
  }
  if (hi - lo == nbytes && !a->host)
    return ctx->be->memset(ctx->bst, bs, dv__ref(a, a->offset + lo), value, (size_t)nbytes);
  /* Otherwise scatter a pattern (dense host memory filled with value) in
   * stream order, and free the pattern once the stream has used it. */
  if (stream && stream->capture)
    return dv__capture_refused("a memset of a view that is not dense, or of host memory (it copies a host pattern)");
  char *pat = dv__malloc((size_t)nbytes);
  if (!pat) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate %lld bytes for a memset pattern", (long long)nbytes);
  memset(pat, value, (size_t)nbytes);
  int64_t pst[DV_MAXDIMS];
  dv__dense_strides(a->ndim, a->shape, isz, pst);
  dv_view pv = {.base = {.ptr = pat}, .host = true, .ndim = a->ndim, .itemsize = a->itemsize,
                .shape = a->shape, .strides = pst};
  dv_status rc = dv__xfer(ctx, stream, bs, flags, a, &pv, t);
  if (rc == DV_OK) rc = ctx->be->stream_callback(ctx->bst, bs, dv__free_host_cb, pat);
  if (rc) {
    dv__bstream_wait(ctx, bs);
    dv__free(pat);
  }
  return rc;
}
