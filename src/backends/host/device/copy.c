/*
 * The host simulator's copies: bounds-checked against their blocks when
 * queued, run on the stream's worker or, for a synchronous copy on an idle
 * stream, on the caller's thread (hb_try_inline); faults injected here.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../../../core/memops.h"
#include "device_internal.h"

/* ---- copies --------------------------------------------------------------- */

/* Check that [lo, hi) relative to r is inside its block; take a reference
 * when held is not NULL. */
static dv_status hb_check_ref(dv_memref r, int64_t lo, int64_t hi, const char *side, hb_block **held) {
  if (held) *held = NULL;
  if (!r.buf) {
    if (!r.ptr && hi > lo) return dv__error(DV_ERR_INVALID_ARGUMENT, "%s host pointer is NULL", side);
    return DV_OK;
  }
  hb_block *b = r.buf;
  if (atomic_load(&b->freed))
    return dv__error(DV_ERR_INVALID_ARGUMENT, "%s device buffer %p was freed", side, (void *)b);
  int64_t a0 = (int64_t)r.offset + lo, a1 = (int64_t)r.offset + hi;
  if (a0 < 0 || a1 > (int64_t)b->bytes)
    return dv__error(DV_ERR_INVALID_ARGUMENT,
                     "%s range [%lld, %lld) is outside its %zu-byte device buffer", side,
                     (long long)a0, (long long)a1, b->bytes);
  if (held) {
    atomic_fetch_add(&b->refs, 1);
    *held = b;
  }
  return DV_OK;
}

/* hb_check_ref's test for [0, n) without a message or a reference. */
static inline bool hb_run_ok(const dv_memref *r, size_t n) {
  if (!r->buf) return r->ptr != NULL;
  const hb_block *b = r->buf;
  return !atomic_load(&b->freed) && r->offset <= b->bytes && n <= b->bytes - r->offset;
}

static dv_status hb_fault_copy(hb_state *st) {
  if (hb_fault_fires(st, DV_FAULT_COPY))
    return dv__error(DV_ERR_DRIVER, "injected fault: copy failed");
  return DV_OK;
}

/* Check both sides of a copy described by `t` (the caller's record on its
 * stack, payload filled), then run it inline (synchronous, idle stream: no
 * record is allocated) or queue a heap copy of it sized for its kind. */
static dv_status hb_queue_checked(dv_bstream *s, hb_op *t, unsigned flags, dv_memref src,
                                  int64_t slo, int64_t shi, dv_memref dst, int64_t dlo, int64_t dhi) {
  t->next = NULL;
  dv_status rc;
  if (flags & DV_COPY_SYNC) {
    rc = hb_check_ref(src, slo, shi, "source", NULL);
    if (!rc) rc = hb_check_ref(dst, dlo, dhi, "destination", NULL);
    if (rc) return rc;
    t->b1 = t->b2 = NULL;
    if (hb_try_inline(s, t)) return DV_OK;
  }
  rc = hb_check_ref(src, slo, shi, "source", &t->b1);
  if (!rc) rc = hb_check_ref(dst, dlo, dhi, "destination", &t->b2);
  if (rc) {
    hb_block_unref(t->b1);
    hb_block_unref(t->b2);
    return rc;
  }
  size_t size = hb_op_size(t->kind);
  hb_op *op = dv__malloc(size);
  if (!op) {
    hb_block_unref(t->b1);
    hb_block_unref(t->b2);
    return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot queue a copy");
  }
  memcpy(op, t, size);
  hb_enqueue(s, op);
  return DV_OK;
}

dv_status hb_copy_rect(void *state, dv_bstream *s, const dv_rect *r) {
  dv_status rc = hb_fault_copy(state);
  if (rc) return rc;
  if (!r->width || !r->height || !r->depth) return DV_OK;
  if ((r->flags & DV_COPY_SYNC) && r->height == 1 && r->depth == 1 && !((hb_state *)state)->delay_us) {
    /* one synchronous run (a dense copy): run here when both sides are in
     * range and the stream is idle, without an operation record (anything
     * else goes the general way, which also words the errors) */
    if (hb_run_ok(&r->src, r->width) && hb_run_ok(&r->dst, r->width) && hb_claim_inline(s)) {
      memmove(hb_addr(r->dst), hb_addr(r->src), r->width);
      hb_claim_release(s);
      return DV_OK;
    }
  }
  /* A capturing stream's copy is recorded, not queued (../../graphrec.h).
   * Here, not in a wrapper, so that the synchronous run above pays nothing
   * for it: the stream layer never sets DV_COPY_SYNC under capture. */
  DV_REC_HOOK(s, dv__rec_copy_rect(rec_, r));
  hb_op t, *op = &t;
  t.kind = OP_RECT;
  op->u.rect = *r;
  int64_t sh = (int64_t)((r->depth - 1) * r->src_slice + (r->height - 1) * r->src_pitch + r->width);
  int64_t dh = (int64_t)((r->depth - 1) * r->dst_slice + (r->height - 1) * r->dst_pitch + r->width);
  return hb_queue_checked(s, op, r->flags, r->src, 0, sh, r->dst, 0, dh);
}

static void hb_span(const dv_strided *c, const int64_t *strides, int64_t *lo, int64_t *hi) {
  *lo = 0;
  *hi = (int64_t)c->itemsize;
  for (int i = 0; i < c->nd; i++) {
    int64_t e = (c->shape[i] - 1) * strides[i];
    if (e < 0) *lo += e;
    else *hi += e;
  }
}

dv_status hb_copy_strided(void *state, dv_bstream *s, const dv_strided *c) {
  if (!((hb_state *)state)->strided) return DV_ERR_NOT_SUPPORTED; /* planner stages instead */
  dv_status rc = hb_fault_copy(state);
  if (rc) return rc;
  for (int i = 0; i < c->nd; i++)
    if (c->shape[i] == 0) return DV_OK;
  hb_op t, *op = &t;
  t.kind = OP_STRIDED;
  op->u.strided = *c;
  int64_t slo, shi, dlo, dhi;
  hb_span(c, c->src_strides, &slo, &shi);
  hb_span(c, c->dst_strides, &dlo, &dhi);
  return hb_queue_checked(s, op, c->flags, c->src, slo, shi, c->dst, dlo, dhi);
}

dv_status hb_memset(void *state, dv_bstream *s, dv_memref dst, int value, size_t bytes) {
  (void)state;
  if (!bytes) return DV_OK;
  hb_op t, *op = &t;
  t.kind = OP_MEMSET;
  op->u.set.dst = dst;
  op->u.set.value = value;
  op->u.set.bytes = bytes;
  return hb_queue_checked(s, op, 0, (dv_memref){0}, 0, 0, dst, 0, (int64_t)bytes);
}

