/*
 * The pool's snapshot (dv__pool_snapshot): its segments and blocks, each
 * block's state and stream, and the manager's statistics, as JSON.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "pool_internal.h"

typedef struct sbuf {
  char *p;
  size_t cap, len;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...) DV_PRINTF(2, 3);
static void sb_printf(sbuf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(b->p && b->len < b->cap ? b->p + b->len : NULL, b->p && b->len < b->cap ? b->cap - b->len : 0, fmt, ap);
  va_end(ap);
  if (n > 0) b->len += (size_t)n;
}

static const char *block_state(pool_block *b) { return b->free ? "free" : "allocated"; }
/* Free and known reusable on every stream (its stream has passed the free). */
static int block_fenced(pool_block *b) {
  return b->free && (b->ps == NULL || b->seq < atomic_load(&b->ps->done_upto));
}

static void snap_segment(pool *p, sbuf *b, pool_segment *seg, bool *first) {
  sb_printf(b, "%s{\"size\":%zu,\"kind\":\"%s\",\"class\":%zu,\"blocks\":[", *first ? "" : ",", seg->size,
            seg->cls >= 0 ? "small" : "large", seg->cls >= 0 ? p->cls[seg->cls].size : 0);
  *first = false;
  bool f = true;
  if (seg->cls >= 0) {
    for (size_t i = 0; i < seg->nblocks; i++) {
      pool_block *x = &seg->blocks[i];
      sb_printf(b, "%s{\"offset\":%zu,\"size\":%zu,\"state\":\"%s\",\"stream\":%d,\"any_stream\":%s}", f ? "" : ",",
                x->offset, x->size, block_state(x), x->ps ? x->ps->id : -1, block_fenced(x) ? "true" : "false");
      f = false;
    }
  } else {
    for (pool_block *x = seg->blocks; x; x = x->next) {
      sb_printf(b, "%s{\"offset\":%zu,\"size\":%zu,\"state\":\"%s\",\"stream\":%d,\"any_stream\":%s}", f ? "" : ",",
                x->offset, x->size, block_state(x), x->ps ? x->ps->id : -1, block_fenced(x) ? "true" : "false");
      f = false;
    }
  }
  sb_printf(b, "]}");
}

/* With tracking on: ,"tracking":{...} (core/track.c's listing of ctx). */
static void dv__snapshot_tracking(sbuf *b, dv_context *ctx) {
  if (!dv_tracking_enabled()) return;
  sb_printf(b, ",\"tracking\":");
  size_t room = b->p && b->len < b->cap ? b->cap - b->len : 0;
  b->len += dv__track_json(ctx, room ? b->p + b->len : NULL, room);
}

/* Render the snapshot into b (b->p NULL: measure only); returns its length. */
static size_t snapshot_render(pool *p, sbuf *b) {
  bool first = true;
  sb_printf(b, "{\"segments\":[");
  pthread_mutex_lock(&p->large_m);
  for (pool_segment *seg = p->large; seg; seg = seg->next) snap_segment(p, b, seg, &first);
  pthread_mutex_unlock(&p->large_m);
  dv__spin_lock(&p->small_m);
  for (int ci = 0; ci < p->ncls; ci++)
    for (pool_segment *seg = p->cls[ci].slabs; seg; seg = seg->next) snap_segment(p, b, seg, &first);
  dv__spin_unlock(&p->small_m);
  dv_mm_stats st;
  dv__pool_stats(p, &st);
  sb_printf(b,
            "],\"stats\":{\"allocated\":%llu,\"active\":%llu,\"reserved\":%llu,\"hits\":%llu,\"misses\":%llu,"
            "\"splits\":%llu,\"merges\":%llu,\"releases\":%llu,\"largest_free\":%llu,\"free_cached\":%llu}",
            (unsigned long long)st.allocated.current, (unsigned long long)st.active.current,
            (unsigned long long)st.reserved.current, (unsigned long long)st.hits, (unsigned long long)st.misses,
            (unsigned long long)st.splits, (unsigned long long)st.merges, (unsigned long long)st.releases,
            (unsigned long long)st.largest_free, (unsigned long long)st.free_cached);
  dv__snapshot_tracking(b, p->ctx);
  sb_printf(b, "}");
  return b->len;
}

dv_status dv__pool_snapshot(void *state, char *buf, size_t cap, size_t *needed) {
  pool *p = state;
  sbuf m = {NULL, 0, 0};
  size_t len = snapshot_render(p, &m);
  *needed = len;
  if (!buf) return DV_OK;
  if (len >= cap)
    return dv__error(DV_ERR_INVALID_ARGUMENT, "buffer of %zu bytes is too small; %zu needed", cap, len + 1);
  /* The caller's buffer gets the whole document or nothing: it is rendered
   * into memory of our own first, because other threads may change the pool
   * between the measuring pass and this one and make it longer than cap. */
  sbuf w = {dv__malloc(cap), cap, 0};
  if (!w.p) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate %zu bytes for the snapshot", cap);
  len = snapshot_render(p, &w);
  *needed = len;
  if (len >= cap) {
    dv__free(w.p);
    return dv__error(DV_ERR_INVALID_ARGUMENT, "buffer of %zu bytes is too small; %zu needed", cap, len + 1);
  }
  memcpy(buf, w.p, len + 1);
  dv__free(w.p);
  return DV_OK;
}

