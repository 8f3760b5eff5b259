/*
 * The pool: a stream-ordered caching allocator over the backend's plain
 * allocations (so CUDA IPC keeps working on its segments).
 *
 * Stream order.  Every block belongs to a stream: the one it was allocated
 * for, then the one it was freed on.  A free block is reusable at once on
 * its own stream (later work there runs after the work that used it).  On
 * another stream it is reusable only once an event recorded on its stream,
 * after its free, has completed: each stream keeps a free sequence number
 * and a fence event; a steal records the fence lazily (only when needed) and
 * queries it, and never waits on the host.
 *
 * Small requests (up to 1 MiB) use size classes, four per power of two: each
 * class has its free list and slabs (segments cut into blocks of the class),
 * all under one spinlock (`small_m`) that also guards the allocated/active
 * counters, so an allocation or a free of a small block is one atomic
 * exchange and plain stores, with exact counters, peaks included.  A free
 * stamps the block with its stream's epoch (a plain load, not a
 * read-modify-write): recording a stream's fence advances the epoch, so the
 * fence covers every block stamped before it.  Larger requests use
 * best fit over segregated bins (two levels, like TLSF) with splitting and
 * coalescing, under one lock.
 *
 * Out of memory: return cached segments to the device (after waiting for
 * the device, the only place the pool synchronizes), retry; the core then
 * flushes the pending-deallocation queue and retries once more.  The final
 * message gives requested bytes, free device memory, cached bytes, the
 * largest free block and fragmentation.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pool_internal.h"

/* ---- counters ------------------------------------------------------------------ */

static inline void cnt_add(pool_atomic_counter *c, uint64_t n) {
  uint64_t cur = atomic_fetch_add_explicit(&c->current, n, memory_order_relaxed) + n;
  atomic_fetch_add_explicit(&c->total, n, memory_order_relaxed);
  uint64_t pk = atomic_load_explicit(&c->peak, memory_order_relaxed);
  while (cur > pk && !atomic_compare_exchange_weak(&c->peak, &pk, cur)) {
  }
}
static inline void cnt_sub(pool_atomic_counter *c, uint64_t n) {
  atomic_fetch_sub_explicit(&c->current, n, memory_order_relaxed);
}
static inline void pc_add(pool_counter *c, uint64_t n) {
  c->current += n;
  c->total += n;
  if (c->current > c->peak) c->peak = c->current;
}
static dv_counter cnt_get(pool_atomic_counter *c) {
  dv_counter r = {atomic_load(&c->current), atomic_load(&c->peak), atomic_load(&c->total)};
  return r;
}

/* ---- streams and fences --------------------------------------------------------- */

static pool_stream *ps_new(pool *p, dv_stream *s) {
  pool_stream *ps = dv__calloc(1, sizeof *ps);
  if (!ps) return NULL;
  ps->stream = s;
  ps->bs = dv__bstream(p->ctx, s);
  pthread_mutex_init(&ps->m, NULL);
  pthread_mutex_lock(&p->streams_m);
  ps->id = p->next_stream_id++;
  ps->next = p->streams;
  p->streams = ps;
  pthread_mutex_unlock(&p->streams_m);
  return ps;
}

/* The record of stream s (created once, then found without a lock). */
static pool_stream *ps_of(pool *p, dv_stream *s) {
  if (s && s == p->per_thread_ps_key && p->per_thread_ps) return p->per_thread_ps;
  if (!s || s->is_default) return p->default_ps;
  pool_stream *ps = dv__stream_slot(s, p->slot_key);
  if (ps) return ps;
  pthread_mutex_lock(&p->streams_m);
  ps = dv__stream_slot(s, p->slot_key);
  pthread_mutex_unlock(&p->streams_m);
  if (ps) return ps;
  ps = ps_new(p, s);
  if (!ps) return NULL;
  /* should another thread win, ours stays on the list, unused */
  return dv__stream_slot_publish(s, p->slot_key, ps);
}

/* ps_of for the fast paths: NULL (take the slow path) when the record does
 * not exist yet, and for the per-thread default stream, whose blocks are
 * never reused at once. */
static inline pool_stream *ps_fast(pool *p, dv_stream *s) {
  if (!s) return p->default_ps;
  if (s == p->per_thread_ps_key) return NULL;
  return s->is_default ? p->default_ps : dv__stream_slot(s, p->slot_key);
}

/* Can block b (free) be used on stream `to`?  Never waits. */
static bool usable(pool *p, const pool_block *b, pool_stream *to) {
  pool_stream *from = b->ps;
  if (!from || (from == to && !from->per_thread)) return true;
  if (b->seq < atomic_load(&from->done_upto)) return true;
  dv_context *ctx = p->ctx;
  bool ok = false;
  pthread_mutex_lock(&from->m);
  if (!from->bs) {
    ok = true; /* its stream is gone: its work finished before */
  } else if (from->stream && from->stream->capture) {
    ok = false; /* a fence recorded there would go into its graph: not usable until the capture ends */
  } else {
    if (!from->fence && ctx->be->event_create(ctx->bst, 0, &from->fence) != DV_OK) from->fence = NULL;
    if (from->fence) {
      if (from->fence_covers <= b->seq) {
        /* record the fence now: it covers every free so far on that stream
         * (those that read the epoch before it advanced) */
        uint64_t covers = atomic_fetch_add(&from->epoch, 1) + 1;
        if (ctx->be->event_record(ctx->bst, from->fence, from->bs) == DV_OK) from->fence_covers = covers;
      } else if (ctx->be->event_query(ctx->bst, from->fence) == DV_OK) {
        atomic_store(&from->done_upto, from->fence_covers);
        ok = b->seq < from->fence_covers;
      }
    }
  }
  pthread_mutex_unlock(&from->m);
  return ok;
}


/* ---- small: size classes ------------------------------------------------------------ */

/* Classes are 512, 640, 768, 896 (steps of 128), then four per power of
 * two: 1024, 1280, 1536, 1792, 2048, ...  O(1) from the bit length. */
static int class_of(pool *p, size_t bytes) {
  (void)p;
  if (bytes <= POOL_ALIGN) return 0;
  size_t v = bytes - 1;
  int lg = 63 - __builtin_clzll((unsigned long long)v); /* 2^lg <= v < 2^(lg+1) */
  int sub = (int)((v >> (lg - 2)) & 3);                 /* quarter within the octave */
  return (lg - 9) * 4 + sub + 1;
}

static dv_status slab_new(pool *p, pool_class *c, int ci) {
  size_t sz = c->size * 4 > SLAB_MIN ? c->size * 4 : SLAB_MIN;
  sz = sz / c->size * c->size;
  pool_segment *seg = dv__calloc(1, sizeof *seg);
  size_t n = sz / c->size;
  pool_block *blocks = seg ? dv__calloc(n, sizeof *blocks) : NULL;
  if (!seg || !blocks) {
    dv__free(seg);
    dv__free(blocks);
    return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate pool metadata");
  }
  dv_status rc = dv__mm_limit_check(p->ctx, atomic_load(&p->reserved.current), atomic_load(&p->free_cached), sz);
  if (!rc) rc = dv__backend_alloc(p->ctx, sz, &seg->mem);
  if (rc) {
    dv__free(seg);
    dv__free(blocks);
    return rc;
  }
  seg->size = sz;
  seg->cls = ci;
  seg->nblocks = seg->nfree = n;
  seg->blocks = blocks;
  for (size_t i = n; i-- > 0;) {
    pool_block *b = &blocks[i];
    b->seg = seg;
    b->offset = i * c->size;
    b->size = c->size;
    b->free = true;
    b->fnext = c->free;
    if (c->free) c->free->fprev = b;
    c->free = b;
  }
  seg->next = c->slabs;
  if (c->slabs) c->slabs->prev = seg;
  c->slabs = seg;
  if (p->nvtx) dv__pool_note_segment(p, seg, true);
  cnt_add(&p->reserved, sz);
  atomic_fetch_add(&p->segments, 1);
  c->free_cached += sz;
  return DV_OK;
}

static void flist_remove(pool_block **head, pool_block *b) {
  if (b->fprev) b->fprev->fnext = b->fnext;
  else *head = b->fnext;
  if (b->fnext) b->fnext->fprev = b->fprev;
  b->fprev = b->fnext = NULL;
}

static void flist_push(pool_block **head, pool_block *b) {
  b->fprev = NULL;
  b->fnext = *head;
  if (*head) (*head)->fprev = b;
  *head = b;
}

/* Take free block b of class c for stream ps (caller holds small_m). */
static inline void small_take(pool *p, pool_class *c, pool_block *b, pool_stream *ps, size_t bytes) {
  if (b == c->free) { /* the head (the fast path's case) */
    c->free = b->fnext;
    if (b->fnext) b->fnext->fprev = NULL;
    b->fnext = NULL;
  } else {
    flist_remove(&c->free, b);
  }
  b->free = false;
  b->ps = ps;
  b->seg->nfree--;
  c->free_cached -= b->size;
  b->requested = bytes;
  pc_add(&p->allocated, bytes);
  pc_add(&p->active, b->size);
}

static dv_status small_alloc(pool *p, int ci, pool_stream *ps, size_t bytes, pool_block **out) {
  pool_class *c = &p->cls[ci];
  dv__spin_lock(&p->small_m);
  pool_block *b = c->free;
  int scanned = 0;
  for (; b && scanned < STEAL_SCAN; b = b->fnext, scanned++)
    if ((b->ps == ps && !ps->per_thread) || usable(p, b, ps)) break;
  if (!b || scanned >= STEAL_SCAN) {
    b = NULL;
    dv_status rc = slab_new(p, c, ci);
    if (rc) {
      dv__spin_unlock(&p->small_m);
      return rc;
    }
    atomic_fetch_add(&p->misses, 1);
    b = c->free;
  } else {
    c->hits++;
  }
  small_take(p, c, b, ps, bytes);
  dv__spin_unlock(&p->small_m);
  *out = b;
  return DV_OK;
}

/* ---- large: best fit in segregated bins, split and coalesce ---------------------------- */

static void bin_index(size_t size, int *fl, int *sl) {
  int f = 63 - __builtin_clzll((unsigned long long)size);
  int s = (int)((size >> (f >= 3 ? f - 3 : 0)) & (NBIN_SL - 1));
  if (f >= NBIN_FL) f = NBIN_FL - 1, s = NBIN_SL - 1;
  *fl = f, *sl = s;
}

static void bin_insert(pool *p, pool_block *b) {
  int f, s;
  bin_index(b->size, &f, &s);
  flist_push(&p->bins[f][s], b);
}

static void bin_remove(pool *p, pool_block *b) {
  int f, s;
  bin_index(b->size, &f, &s);
  flist_remove(&p->bins[f][s], b);
}

/* Best fit: the smallest usable free block >= size (caller holds large_m). */
static pool_block *best_fit(pool *p, size_t size, pool_stream *ps) {
  int f0, s0;
  bin_index(size, &f0, &s0);
  for (int f = f0; f < NBIN_FL; f++)
    for (int s = (f == f0 ? s0 : 0); s < NBIN_SL; s++) {
      pool_block *best = NULL;
      for (pool_block *b = p->bins[f][s]; b; b = b->fnext)
        if (b->size >= size && (!best || b->size < best->size) && usable(p, b, ps)) best = b;
      if (best) return best;
    }
  return NULL;
}

static dv_status large_segment(pool *p, size_t size) {
  size_t sz = (size + LARGE_GRAIN - 1) / LARGE_GRAIN * LARGE_GRAIN;
  pool_segment *seg = dv__calloc(1, sizeof *seg);
  pool_block *b = seg ? dv__calloc(1, sizeof *b) : NULL;
  if (!seg || !b) {
    dv__free(seg);
    dv__free(b);
    return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate pool metadata");
  }
  dv_status rc = dv__mm_limit_check(p->ctx, atomic_load(&p->reserved.current), atomic_load(&p->free_cached), sz);
  if (!rc) rc = dv__backend_alloc(p->ctx, sz, &seg->mem);
  if (rc) {
    dv__free(seg);
    dv__free(b);
    return rc;
  }
  seg->size = sz;
  seg->cls = -1;
  seg->blocks = b;
  b->seg = seg;
  b->size = sz;
  b->free = true;
  b->ps = NULL; /* fresh memory: usable anywhere */
  seg->next = p->large;
  if (p->large) p->large->prev = seg;
  p->large = seg;
  if (p->nvtx) dv__pool_note_segment(p, seg, true);
  bin_insert(p, b);
  cnt_add(&p->reserved, sz);
  atomic_fetch_add(&p->segments, 1);
  atomic_fetch_add(&p->free_segments, 1);
  atomic_fetch_add(&p->free_cached, sz);
  return DV_OK;
}

static void segment_unlink(pool_segment **head, pool_segment *seg) {
  if (seg->prev) seg->prev->next = seg->next;
  else *head = seg->next;
  if (seg->next) seg->next->prev = seg->prev;
}

static dv_status segment_release(pool *p, pool_segment *seg) {
  if (seg->nvtx_heap) dv__pool_note_segment(p, seg, false);
  dv_status rc = dv__backend_free(p->ctx, seg->mem);
  cnt_sub(&p->reserved, seg->size);
  atomic_fetch_sub(&p->segments, 1);
  atomic_fetch_sub(&p->free_cached, seg->size);
  atomic_fetch_add(&p->releases, 1);
  dv__free(seg->blocks); /* small: the block array; large: the first block */
  dv__free(seg);
  return rc;
}

/* Release every segment whose blocks are all free.  No fence is needed:
 * freeing device memory is safe with work still queued (cuMemFree waits for
 * the device, OpenCL defers the release, the simulator counts references).
 * Returns the bytes released. */
static size_t release_free_segments(pool *p, bool reserve_too) {
  size_t released = 0;
  pthread_mutex_lock(&p->large_m);
  for (pool_segment *seg = p->large, *next; seg; seg = next) {
    next = seg->next;
    bool all_free = reserve_too || !seg->keep;
    for (pool_block *b = seg->blocks; b && all_free; b = b->next) all_free = b->free;
    if (!all_free) continue;
    if (seg->blocks->size == seg->size) atomic_fetch_sub(&p->free_segments, 1);
    for (pool_block *b = seg->blocks, *n; b; b = n) {
      n = b->next;
      bin_remove(p, b);
      if (b != seg->blocks) dv__free(b);
    }
    seg->blocks->next = NULL;
    segment_unlink(&p->large, seg);
    released += seg->size;
    segment_release(p, seg);
  }
  pthread_mutex_unlock(&p->large_m);
  dv__spin_lock(&p->small_m);
  for (int ci = 0; ci < p->ncls; ci++) {
    pool_class *c = &p->cls[ci];
    for (pool_segment *seg = c->slabs, *next; seg; seg = next) {
      next = seg->next;
      if (seg->nfree != seg->nblocks) continue;
      for (size_t i = 0; i < seg->nblocks; i++) flist_remove(&c->free, &seg->blocks[i]);
      segment_unlink(&c->slabs, seg);
      released += seg->size;
      c->free_cached -= seg->size;
      atomic_fetch_add(&p->free_cached, seg->size); /* segment_release takes it off the total */
      segment_release(p, seg);
    }
  }
  dv__spin_unlock(&p->small_m);
  return released;
}

/* Free cached bytes: the large pool's (atomic) plus every class's. */
static uint64_t free_cached(pool *p) {
  uint64_t t = atomic_load(&p->free_cached);
  dv__spin_lock(&p->small_m);
  for (int ci = 0; ci < p->ncls; ci++) t += p->cls[ci].free_cached;
  dv__spin_unlock(&p->small_m);
  return t;
}

/* Segments entirely free: the large ones (counted) plus the slabs (found;
 * only the out-of-memory path asks). */
static int64_t free_segments(pool *p) {
  int64_t n = atomic_load(&p->free_segments);
  dv__spin_lock(&p->small_m);
  for (int ci = 0; ci < p->ncls; ci++)
    for (pool_segment *seg = p->cls[ci].slabs; seg; seg = seg->next) n += seg->nfree == seg->nblocks;
  dv__spin_unlock(&p->small_m);
  return n;
}

/* The largest free block: the largest in the highest non-empty bin (bins
 * are ordered by size), or the largest class with a free block. */
static void largest_free(pool *p, uint64_t *largest) {
  uint64_t l = 0;
  pthread_mutex_lock(&p->large_m);
  for (int f = NBIN_FL - 1; f >= 0 && !l; f--)
    for (int s2 = NBIN_SL - 1; s2 >= 0 && !l; s2--)
      for (pool_block *b = p->bins[f][s2]; b; b = b->fnext)
        if (b->size > l) l = b->size;
  pthread_mutex_unlock(&p->large_m);
  dv__spin_lock(&p->small_m);
  for (int ci = p->ncls - 1; ci >= 0; ci--) {
    pool_class *c = &p->cls[ci];
    if (c->free) {
      if (c->size > l) l = c->size;
      break;
    }
  }
  dv__spin_unlock(&p->small_m);
  *largest = l;
}

static dv_status large_alloc(pool *p, size_t size, size_t bytes, pool_stream *ps, pool_block **out) {
  pthread_mutex_lock(&p->large_m);
  pool_block *b = best_fit(p, size, ps);
  if (b) {
    atomic_fetch_add(&p->hits, 1);
  } else {
    dv_status rc = large_segment(p, size);
    if (rc) {
      pthread_mutex_unlock(&p->large_m);
      return rc;
    }
    atomic_fetch_add(&p->misses, 1);
    b = best_fit(p, size, ps);
  }
  bin_remove(p, b);
  if (b->size == b->seg->size) atomic_fetch_sub(&p->free_segments, 1);
  if (b->size - size > SMALL_MAX) { /* split: the remainder stays free */
    pool_block *r = dv__calloc(1, sizeof *r);
    if (r) {
      r->seg = b->seg;
      r->offset = b->offset + size;
      r->size = b->size - size;
      r->free = true;
      r->ps = b->ps;
      r->seq = b->seq;
      r->prev = b;
      r->next = b->next;
      if (b->next) b->next->prev = r;
      b->next = r;
      b->size = size;
      bin_insert(p, r);
      atomic_fetch_add(&p->splits, 1);
    }
  }
  b->free = false;
  b->ps = ps;
  atomic_fetch_sub(&p->free_cached, b->size);
  pthread_mutex_unlock(&p->large_m);
  b->requested = bytes;
  dv__spin_lock(&p->small_m);
  pc_add(&p->allocated, bytes);
  pc_add(&p->active, b->size);
  dv__spin_unlock(&p->small_m);
  *out = b;
  return DV_OK;
}

/* Merge b with its free neighbours that belong to the same stream. */
static pool_block *coalesce(pool *p, pool_block *b) {
  pool_block *n = b->next;
  if (n && n->free && n->ps == b->ps) {
    bin_remove(p, n);
    b->size += n->size;
    if (n->seq > b->seq) b->seq = n->seq;
    b->next = n->next;
    if (n->next) n->next->prev = b;
    dv__free(n);
    atomic_fetch_add(&p->merges, 1);
  }
  pool_block *v = b->prev;
  if (v && v->free && v->ps == b->ps) {
    bin_remove(p, v);
    v->size += b->size;
    if (b->seq > v->seq) v->seq = b->seq;
    v->next = b->next;
    if (b->next) b->next->prev = v;
    dv__free(b);
    b = v;
    atomic_fetch_add(&p->merges, 1);
  }
  return b;
}

/* ---- the manager table ------------------------------------------------------------------ */

static void pool_fini(void *state);

static dv_status pool_init(dv_context *ctx, void *user, void **state) {
  (void)user;
  *state = NULL;
  pool *p = dv__calloc(1, sizeof *p);
  if (!p) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate the pool");
  p->ctx = ctx;
  /* classes: 512, then four per octave (see class_of) up to 1 MiB */
  for (int c = 0; c < NCLASS; c++) {
    size_t size = POOL_ALIGN;
    if (c > 0) {
      int lg = 9 + (c - 1) / 4, sub = (c - 1) % 4;
      size = ((size_t)1 << lg) + (size_t)(sub + 1) * ((size_t)1 << (lg - 2));
    }
    if (size > SMALL_MAX) break;
    p->cls[c].size = size;
    p->ncls = c + 1;
  }
  for (size_t u = 0; u < SMALL_MAX / POOL_ALIGN; u++) p->cls_lut[u] = (uint8_t)class_of(p, (u + 1) * POOL_ALIGN);
  dv__spin_init(&p->small_m);
  pthread_mutex_init(&p->large_m, NULL);
  pthread_mutex_init(&p->streams_m, NULL);
  pthread_mutex_init(&p->log_m, NULL);
  p->release_threshold = (size_t)ctx->opt[DV_OPT_POOL_RELEASE_THRESHOLD].i;
  p->default_ps = ps_new(p, NULL);
  dv_stream *pt = dv__per_thread_stream(ctx), *lg = dv__legacy_stream(ctx);
  if (p->default_ps && pt->bs != dv__default_stream(ctx)->bs) {
    p->per_thread_ps = ps_new(p, NULL);
    if (!p->per_thread_ps) { /* reported below: the default one goes too */
      pthread_mutex_destroy(&p->default_ps->m);
      dv__free(p->default_ps);
      p->default_ps = NULL;
      p->streams = NULL;
    } else
      p->per_thread_ps->bs = lg->bs, p->per_thread_ps->per_thread = true, p->per_thread_ps_key = pt;
  }
  dv_status rc = p->default_ps ? dv__stream_key_create(ctx, NULL, NULL, &p->slot_key)
                               : dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate the pool");
  if (rc) {
    for (pool_stream *ps = p->streams, *n; ps; ps = n) {
      n = ps->next;
      pthread_mutex_destroy(&ps->m);
      dv__free(ps);
    }
    pthread_mutex_destroy(&p->large_m);
    pthread_mutex_destroy(&p->streams_m);
    pthread_mutex_destroy(&p->log_m);
    dv__free(p);
    return rc;
  }
  const char *log = ctx->opt[DV_OPT_POOL_LOG].s;
  if (log[0]) {
    p->log = fopen(log, "a");
    if (!p->log) dv__log(DV_LOG_WARN, "pool: cannot open the allocation log %s", log);
    else if (ftell(p->log) == 0) fprintf(p->log, "Thread,Time,Action,Pointer,Size,Stream\n");
  }
  /* NVTX: device addresses (CUDA's buffers are its pointers) for a tool that listens */
  p->nvtx = ctx->opt[DV_OPT_NVTX].i && !strcmp(ctx->be->name, "cuda") && dv__nvtx_memory_on();
  p->noted = p->log || p->nvtx;
  p->slow_free = p->noted || p->release_threshold;
  /* the reserve: one large segment, kept until the pool goes */
  size_t reserve = (size_t)ctx->opt[DV_OPT_POOL_RESERVE].i;
  rc = reserve ? large_segment(p, reserve) : DV_OK;
  if (rc) {
    char why[400];
    snprintf(why, sizeof why, "%s", dv_last_error());
    pool_fini(p);
    return dv__error(rc, "pool: cannot reserve %zu bytes (pool_reserve): %s", reserve, why);
  }
  if (reserve) p->large->keep = true;
  *state = p;
  return DV_OK;
}

void dv__pool_held(void *state, uint64_t *held, uint64_t *cached) {
  pool *p = state;
  *held = atomic_load(&p->reserved.current);
  *cached = free_cached(p);
}

static void pool_fini(void *state) {
  pool *p = state;
  dv_context *ctx = p->ctx;
  dv__bstream_wait(ctx, NULL);
  release_free_segments(p, true);
  /* segments still holding allocated blocks were leaked by their owners */
  if (p->large || atomic_load(&p->segments))
    dv__log(DV_LOG_WARN, "pool: %llu segment(s) still hold allocated blocks at close",
            (unsigned long long)atomic_load(&p->segments));
  for (pool_stream *ps = p->streams, *n; ps; ps = n) {
    n = ps->next;
    if (ps->fence) ctx->be->event_destroy(ctx->bst, ps->fence);
    pthread_mutex_destroy(&ps->m);
    dv__free(ps);
  }
  dv__stream_key_delete(ctx, p->slot_key);
  pthread_mutex_destroy(&p->large_m);
  pthread_mutex_destroy(&p->streams_m);
  pthread_mutex_destroy(&p->log_m);
  if (p->log) fclose(p->log);
  dv__free(p);
}

static __attribute__((noinline)) dv_status pool_alloc_slow(void *state, size_t bytes, dv_stream *stream,
                                                           dv_block *out) {
  pool *p = state;
  pool_stream *ps = ps_of(p, stream);
  if (!ps) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate pool metadata");
  size_t size = (bytes + POOL_ALIGN - 1) / POOL_ALIGN * POOL_ALIGN;
  if (size < bytes) return dv__error(DV_ERR_OUT_OF_MEMORY, "allocation of %zu bytes", bytes);
  pool_block *b;
  int ci = size <= SMALL_MAX ? class_of(p, size) : -1;
  dv_status rc = ci >= 0 ? small_alloc(p, ci, ps, bytes, &b) : large_alloc(p, size, bytes, ps, &b);
  if (rc == DV_ERR_OUT_OF_MEMORY) {
    /* give cached memory back to the device (after waiting for it: the
     * pool's only host synchronisation) and try again */
    dv_context *ctx = p->ctx;
    size_t dfree = 0, dtotal = 0, released = 0;
    dv_backend_memory_info(ctx, &dfree, &dtotal);
    /* only when giving the cache back can make room for this request
     * (on the device, and under the memory limit) */
    uint64_t cached = free_cached(p), held = atomic_load(&p->reserved.current);
    size_t limit = atomic_load(&ctx->memory->limit);
    if (free_segments(p) > 0 && dfree + cached >= size && (!limit || held - cached + size <= limit)) {
      dv__bstream_wait(ctx, NULL);
      released = release_free_segments(p, false);
    }
    if (released) rc = ci >= 0 ? small_alloc(p, ci, ps, bytes, &b) : large_alloc(p, size, bytes, ps, &b);
    if (rc == DV_ERR_OUT_OF_MEMORY) {
      char detail[512];
      snprintf(detail, sizeof detail, "%s", dv_last_error());
      size_t f = 0, t = 0;
      dv_backend_memory_info(ctx, &f, &t);
      uint64_t largest = 0;
      cached = free_cached(p);
      largest_free(p, &largest);
      double frag = cached ? 1.0 - (double)largest / (double)cached : 0.0;
      return dv__error(DV_ERR_OUT_OF_MEMORY,
                       "pool: %zu bytes requested; device free %zu of %zu; pool cached %llu bytes (largest free "
                       "block %llu, fragmentation %.2f) after returning %zu cached bytes to the device; %s",
                       bytes, f, t, (unsigned long long)cached, (unsigned long long)largest, frag, released, detail);
    }
  }
  if (rc) return rc;
  out->buf = b->seg->mem.buf;
  out->offset = b->seg->mem.offset + b->offset;
  out->handle = b;
  dv__pool_note(p, "allocate", out, b, bytes, ps);
  return DV_OK;
}

/* The fast path: a small request whose class's most recently freed block
 * belongs to the same stream (no log).  Everything else goes the slow way. */
static dv_status pool_alloc(void *state, size_t bytes, dv_stream *stream, dv_block *out) {
  pool *p = state;
  pool_stream *ps = ps_fast(p, stream);
  if (ps && bytes - 1 < SMALL_MAX && !p->noted) {
    pool_class *c = &p->cls[p->cls_lut[(bytes - 1) / POOL_ALIGN]];
    dv__spin_lock(&p->small_m);
    pool_block *b = c->free;
    if (b && b->ps == ps) {
      c->hits++;
      small_take(p, c, b, ps, bytes);
      dv__spin_unlock(&p->small_m);
      out->buf = b->seg->mem.buf;
      out->offset = b->seg->mem.offset + b->offset;
      out->handle = b;
      return DV_OK;
    }
    dv__spin_unlock(&p->small_m);
  }
  return pool_alloc_slow(state, bytes, stream, out);
}

static __attribute__((noinline)) dv_status pool_free_slow(void *state, dv_block blk, size_t bytes,
                                                          dv_stream *stream) {
  pool *p = state;
  pool_block *b = blk.handle;
  if (!b || b->free) return dv__error(DV_ERR_INVALID_ARGUMENT, "pool: free of a block it does not hold");
  pool_stream *ps = ps_of(p, stream);
  if (!ps) ps = b->ps;
  dv__pool_note(p, "free", &blk, b, bytes, ps);
  size_t size = b->size;
  /* the stream's work that used the block was queued before this load */
  uint64_t seq = atomic_load(&ps->epoch);
  if (b->seg->cls >= 0) {
    pool_class *c = &p->cls[b->seg->cls];
    dv__spin_lock(&p->small_m);
    p->allocated.current -= b->requested;
    p->active.current -= size;
    b->free = true;
    b->ps = ps;
    b->seq = seq;
    b->seg->nfree++;
    flist_push(&c->free, b);
    c->free_cached += size;
    dv__spin_unlock(&p->small_m);
  } else {
    dv__spin_lock(&p->small_m);
    p->allocated.current -= b->requested;
    p->active.current -= size;
    dv__spin_unlock(&p->small_m);
    pthread_mutex_lock(&p->large_m);
    b->free = true;
    b->ps = ps;
    b->seq = seq;
    atomic_fetch_add(&p->free_cached, size);
    b = coalesce(p, b);
    if (b->size == b->seg->size) atomic_fetch_add(&p->free_segments, 1);
    bin_insert(p, b);
    pthread_mutex_unlock(&p->large_m);
  }
  if (p->release_threshold && free_cached(p) > p->release_threshold) release_free_segments(p, false);
  return DV_OK;
}

/* The fast path: a small block freed on the default stream or a stream the
 * pool knows, with no log and no release threshold. */
static dv_status pool_free(void *state, dv_block blk, size_t bytes, dv_stream *stream) {
  pool *p = state;
  pool_block *b = blk.handle;
  pool_stream *ps = ps_fast(p, stream);
  if (!b || b->free || !ps || b->seg->cls < 0 || p->slow_free)
    return pool_free_slow(state, blk, bytes, stream);
  pool_class *c = &p->cls[b->seg->cls];
  /* the stream's work that used the block was queued before this load */
  uint64_t seq = atomic_load(&ps->epoch);
  dv__spin_lock(&p->small_m);
  p->allocated.current -= b->requested;
  p->active.current -= b->size;
  b->free = true;
  b->ps = ps;
  b->seq = seq;
  b->seg->nfree++;
  flist_push(&c->free, b);
  c->free_cached += b->size;
  dv__spin_unlock(&p->small_m);
  return DV_OK;
}

static dv_status pool_mem_info(void *state, size_t *free_bytes, size_t *total_bytes) {
  pool *p = state;
  dv_status rc = dv_backend_memory_info(p->ctx, free_bytes, total_bytes);
  if (!rc) *free_bytes += free_cached(p); /* cached memory is available to arrays */
  return rc;
}

dv_status dv__pool_stats(void *state, dv_mm_stats *out) {
  pool *p = state;
  uint64_t hits = atomic_load(&p->hits);
  dv__spin_lock(&p->small_m);
  out->allocated = (dv_counter){p->allocated.current, p->allocated.peak, p->allocated.total};
  out->active = (dv_counter){p->active.current, p->active.peak, p->active.total};
  for (int ci = 0; ci < p->ncls; ci++) hits += p->cls[ci].hits;
  dv__spin_unlock(&p->small_m);
  out->reserved = cnt_get(&p->reserved);
  out->hits = hits;
  out->misses = atomic_load(&p->misses);
  out->splits = atomic_load(&p->splits);
  out->merges = atomic_load(&p->merges);
  out->releases = atomic_load(&p->releases);
  out->free_cached = free_cached(p);
  out->segments = atomic_load(&p->segments);
  largest_free(p, &out->largest_free);
  return DV_OK;
}

static dv_status pool_trim(void *state) {
  pool *p = state;
  dv_status rc = dv__bstream_wait(p->ctx, NULL);
  release_free_segments(p, false);
  return rc;
}

static void pool_stream_destroyed(void *state, dv_stream *s) {
  pool *p = state;
  pool_stream *ps = dv__stream_slot(s, p->slot_key);
  if (!ps) return;
  pthread_mutex_lock(&ps->m);
  ps->bs = NULL; /* the stream's work is complete (the caller synchronized it) */
  atomic_store(&ps->done_upto, UINT64_MAX);
  if (ps->fence) {
    p->ctx->be->event_destroy(p->ctx->bst, ps->fence);
    ps->fence = NULL;
  }
  pthread_mutex_unlock(&ps->m);
}

const dv_memory_manager dv__mm_pool = {
    .version = DV_MEMORY_MANAGER_VERSION,
    .name = "pool",
    .init = pool_init,
    .fini = pool_fini,
    .alloc = pool_alloc,
    .free = pool_free,
    .mem_info = pool_mem_info,
    .stats = dv__pool_stats,
    .trim = pool_trim,
    .stream_destroyed = pool_stream_destroyed,
};
