/*
 * The pinned pool: a caching allocator for the page-locked host memory of
 * pinned and mapped arrays, beneath dv__host_alloc / dv__host_free
 * (hostmem.c), so the array layer calls what it always called.  Anchor:
 * PyTorch's CachingHostAllocator (whole blocks, never split; the streams
 * that used a block recorded, an event per stream at its free, reuse once
 * they have completed); where it differs, docs/pinned_pool.md.
 *
 * Classes.  A request is served by a block of its class: 512 bytes, then
 * the multiples of 2^e/8 between 2^e and 2^(e+1), so a block holds at most
 * 1/8 more than was asked (not the next power of two, which can double what
 * is held: CuPy #7742, PyTorch #95823).  A free block serves its own class
 * and flags only.  Requests over 1 TiB, and those the limit leaves no room
 * for, are served outside the pool: the driver's allocation and free, as
 * with the pool off.
 *
 * Order.  A block freed while queued work may still use it is reusable only
 * once that work is done: the array layer tells the pool which asynchronous
 * streams used it (dv__pinned_used); its free records an event on each and
 * releases them; an allocation takes a free block whose events have all
 * completed (a query, never a wait).  A block used on more than
 * DV_PINNED_USES streams, or exported to work devarray cannot see, is
 * "wide": its reuse waits for the whole device once (the driver's free would
 * have waited so for every block).  Work on the default stream is waited
 * for before its call returns: nothing to record.
 *
 * Reserve and limit.  The reserve is one allocation made with the context
 * (pinned_pool_reserve) from which plain pinned blocks are carved; it stays
 * until the context goes.  The limit bounds what the pool holds (in use and
 * cached): a request over it frees cached blocks, largest first, then goes
 * outside the pool if that is not enough.  A driver allocation that fails
 * for lack of memory empties the cache and is retried once.
 *
 * Statistics are the pool's own (dv_pinned_pool_stats: blocks, class
 * sizes); dv_stats.pinned and .mapped keep counting what arrays hold
 * (hostmem.c), and the planner's staging buffers (staging.c) are apart.
 */
#include <string.h>
#include <unistd.h>

#include "memory.h"

#define PP_MIN_SHIFT 9  /* the smallest class: 512 bytes */
#define PP_MAX_SHIFT 40 /* classes up to 1 TiB */
#define PP_CARVE_ALIGN 256

_Static_assert((PP_MAX_SHIFT - PP_MIN_SHIFT) * 8 + 1 == DV_PINNED_CLASSES, "one class per eighth");

/* The class of a request of n bytes, its size in *size; -1 past the classes. */
static int pp_class(size_t n, size_t *size) {
  if (n <= ((size_t)1 << PP_MIN_SHIFT)) {
    *size = (size_t)1 << PP_MIN_SHIFT;
    return 0;
  }
  int e = 63 - __builtin_clzll((unsigned long long)(n - 1)); /* n in (2^e, 2^(e+1)] */
  if (e >= PP_MAX_SHIFT) return -1;
  size_t base = (size_t)1 << e, step = base >> 3;
  size_t j = (n - base + step - 1) / step; /* 1..8 */
  *size = base + j * step;
  return (e - PP_MIN_SHIFT) * 8 + (int)j;
}

static void cnt_add(dv_counter *c, uint64_t n) {
  c->current += n;
  c->total += n;
  if (c->current > c->peak) c->peak = c->current;
}

/* ---- blocks ------------------------------------------------------------------ */

/* Give a block back (its backend memory unless carved from the reserve, its
 * events, its record).  The driver's free waits for queued work that uses
 * the memory. */
static dv_status pp_destroy(dv_context *ctx, dv_pinned_block *b) {
  dv_status rc = b->handle ? ctx->be->host_free(ctx->bst, b->handle) : DV_OK;
  for (int i = 0; i < DV_PINNED_USES; i++)
    if (b->fence[i]) ctx->be->event_destroy(ctx->bst, b->fence[i]);
  dv__free(b);
  return rc;
}

static dv_status pp_destroy_list(dv_context *ctx, dv_pinned_block *list) {
  dv_status first = DV_OK;
  for (dv_pinned_block *b = list, *n; b; b = n) {
    n = b->next;
    dv_status rc = pp_destroy(ctx, b);
    if (rc && !first) first = rc;
  }
  return first;
}

/* Take cached blocks of the driver's (not the reserve's) out of the pool,
 * largest classes first, until `want` bytes are out (SIZE_MAX: all); they
 * are returned as a list, to free without the lock.  Caller holds p->m. */
static dv_pinned_block *pp_evict(dv_pinned_pool *p, size_t want) {
  dv_pinned_block *out = NULL;
  size_t got = 0;
  for (int c = DV_PINNED_CLASSES - 1; c >= 0 && got < want; c--)
    for (dv_pinned_block **pp = &p->free[c]; *pp && got < want;) {
      dv_pinned_block *b = *pp;
      if (!b->handle) { /* carved from the reserve */
        pp = &b->next;
        continue;
      }
      *pp = b->next;
      p->cached -= b->size;
      p->free_blocks--;
      p->held.current -= b->size;
      p->releases++;
      got += b->size;
      b->next = out;
      out = b;
    }
  return out;
}

/* Whether free block b may be handed out now: every event recorded at its
 * free has completed, and a wide one's free is covered by a wait for the
 * device.  Never waits.  Caller holds p->m. */
static bool pp_ready(dv_context *ctx, dv_pinned_pool *p, dv_pinned_block *b) {
  if (b->wait) {
    if (b->seq > p->waited_upto) return false;
    b->wait = false;
    b->nfence = 0; /* the wait covers them */
  }
  while (b->nfence > 0) {
    dv_status rc = ctx->be->event_query(ctx->bst, b->fence[b->nfence - 1]);
    if (rc == DV_ERR_NOT_READY) return false;
    if (rc) { /* the event cannot tell: wait for the device instead */
      b->wait = true;
      b->seq = ++p->seq;
      return false;
    }
    b->nfence--;
  }
  return true;
}

/* A free block of class c made with `flags` that may be handed out, taken
 * off its list; *waiting says whether one exists that a wait for the device
 * would free.  Caller holds p->m. */
static dv_pinned_block *pp_take(dv_context *ctx, dv_pinned_pool *p, int c, unsigned flags, bool *waiting) {
  *waiting = false;
  for (dv_pinned_block **pp = &p->free[c]; *pp; pp = &(*pp)->next) {
    dv_pinned_block *b = *pp;
    if (b->flags != flags) continue;
    if (!pp_ready(ctx, p, b)) {
      if (b->wait) *waiting = true;
      continue;
    }
    *pp = b->next;
    b->next = NULL;
    p->cached -= b->size;
    p->free_blocks--;
    cnt_add(&p->in_use, b->size);
    p->hits++;
    return b;
  }
  return NULL;
}

/* ---- allocation and free ---------------------------------------------------- */

static void pp_hand_out(const dv_pinned_block *b, void **handle, void **ptr, void **dev_buf) {
  *handle = (void *)b;
  *ptr = b->ptr;
  if (dev_buf) *dev_buf = b->dev_buf;
}

dv_status dv__pinned_alloc(dv_context *ctx, size_t bytes, unsigned flags, void **handle, void **ptr,
                           void **dev_buf) {
  *handle = *ptr = NULL;
  if (dev_buf) *dev_buf = NULL;
  dv_pinned_pool *p = &ctx->memory->pinned;
  size_t size = bytes;
  int c = pp_class(bytes, &size);
  if (c >= 0) {
    bool waiting;
    pthread_mutex_lock(&p->m);
    dv_pinned_block *b = pp_take(ctx, p, c, flags, &waiting);
    if (!b && waiting) {
      /* only blocks whose reuse waits for the device: wait once, for all of them */
      uint64_t covers = p->seq;
      p->waits++;
      pthread_mutex_unlock(&p->m);
      dv_status wrc = dv__bstream_wait(ctx, NULL);
      pthread_mutex_lock(&p->m);
      if (!wrc && covers > p->waited_upto) p->waited_upto = covers;
      b = pp_take(ctx, p, c, flags, &waiting);
    }
    pthread_mutex_unlock(&p->m);
    if (b) {
      pp_hand_out(b, handle, ptr, dev_buf);
      return DV_OK;
    }
  }
  /* A new block: carved from the reserve, else the driver's, within the limit. */
  dv_pinned_block *b = dv__calloc(1, sizeof *b);
  if (!b) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate a pinned pool record");
  b->flags = flags;
  b->cls = c;
  b->size = size;
  dv_pinned_block *evicted = NULL;
  bool carved = false;
  pthread_mutex_lock(&p->m);
  if (c >= 0 && flags == 0 && p->arena_ptr) {
    size_t off = (p->arena_used + PP_CARVE_ALIGN - 1) & ~(size_t)(PP_CARVE_ALIGN - 1);
    if (off <= p->reserve && size <= p->reserve - off) {
      b->ptr = p->arena_ptr + off;
      p->arena_used = off + size;
      carved = true;
      cnt_add(&p->in_use, size);
      p->misses++;
    }
  }
  if (!carved && c >= 0) {
    if (p->held.current + size > p->limit) evicted = pp_evict(p, p->held.current + size - p->limit);
    if (p->held.current + size > p->limit) b->cls = -1; /* no room: outside the pool */
    else cnt_add(&p->held, size); /* the room is taken now; given back if the driver fails */
  }
  pthread_mutex_unlock(&p->m);
  dv_status rc = pp_destroy_list(ctx, evicted);
  if (rc) dv__log(DV_LOG_WARN, "pinned pool: freeing cached blocks for room failed: %s", dv_last_error());
  if (carved) {
    pp_hand_out(b, handle, ptr, dev_buf);
    return DV_OK;
  }
  /* The driver wants at least one byte; a block outside the pool is the size asked. */
  size_t ask = b->cls >= 0 ? size : (bytes > 0 ? bytes : 1);
  rc = ctx->be->host_alloc(ctx->bst, ask, flags, &b->handle, &b->ptr, dev_buf ? &b->dev_buf : NULL);
  if (rc == DV_ERR_HOST_OUT_OF_MEMORY) {
    /* what the pool caches may be what the driver lacks: give it back, once */
    pthread_mutex_lock(&p->m);
    bool any = p->cached > 0;
    evicted = pp_evict(p, SIZE_MAX);
    pthread_mutex_unlock(&p->m);
    pp_destroy_list(ctx, evicted);
    if (any) rc = ctx->be->host_alloc(ctx->bst, ask, flags, &b->handle, &b->ptr, dev_buf ? &b->dev_buf : NULL);
  }
  pthread_mutex_lock(&p->m);
  if (b->cls < 0) {
    if (!rc) p->uncached++;
  } else if (rc) { /* the room taken above */
    p->held.current -= size;
    p->held.total -= size;
  } else {
    cnt_add(&p->in_use, size);
    p->misses++;
  }
  pthread_mutex_unlock(&p->m);
  if (rc) {
    dv__free(b);
    return rc;
  }
  b->size = ask;
  pp_hand_out(b, handle, ptr, dev_buf);
  return DV_OK;
}

dv_status dv__pinned_free(dv_context *ctx, void *handle) {
  dv_pinned_block *b = handle;
  if (!b) return dv__error(DV_ERR_INVALID_ARGUMENT, "NULL pinned pool block");
  dv_pinned_pool *p = &ctx->memory->pinned;
  /* One event per stream whose work used it, recorded behind that work. */
  bool wide = atomic_exchange(&b->wide, false);
  int n = 0;
  for (int i = 0; i < DV_PINNED_USES; i++) {
    dv_stream *s = atomic_exchange(&b->used[i], NULL);
    if (!s) continue;
    if (s->capture) wide = true; /* a fence there would go into its graph: reuse waits for the device */
    if (!wide && b->cls >= 0) {
      if (!b->fence[n] && ctx->be->event_create(ctx->bst, 0, &b->fence[n]) != DV_OK) b->fence[n] = NULL;
      if (b->fence[n] && ctx->be->event_record(ctx->bst, b->fence[n], s->bs) == DV_OK) n++;
      else wide = true; /* no event: its reuse waits for the device instead */
    }
    dv__stream_irelease(s);
  }
  if (b->cls < 0) return pp_destroy(ctx, b); /* outside the pool: the driver's free waits */
  pthread_mutex_lock(&p->m);
  b->nfence = n;
  b->wait = wide;
  b->seq = ++p->seq;
  b->next = p->free[b->cls];
  p->free[b->cls] = b;
  p->cached += b->size;
  p->free_blocks++;
  p->in_use.current -= b->size;
  pthread_mutex_unlock(&p->m);
  return DV_OK;
}

void dv__pinned_used(void *handle, dv_stream *s) {
  dv_pinned_block *b = handle;
  if (atomic_load_explicit(&b->wide, memory_order_relaxed)) return;
  for (int i = 0; i < DV_PINNED_USES; i++) {
    dv_stream *cur = atomic_load(&b->used[i]);
    if (cur == s) return;
    if (cur) continue;
    dv__stream_iretain(s);
    if (atomic_compare_exchange_strong(&b->used[i], &cur, s)) return;
    dv__stream_irelease(s); /* another thread took the slot */
    if (cur == s) return;
  }
  atomic_store(&b->wide, true);
}

void dv__pinned_used_outside(void *handle) {
  dv_pinned_block *b = handle;
  atomic_store(&b->wide, true);
}

dv_status dv__pinned_trim(dv_context *ctx) {
  dv_pinned_pool *p = &ctx->memory->pinned;
  if (!p->on) return DV_OK;
  pthread_mutex_lock(&p->m);
  dv_pinned_block *evicted = pp_evict(p, SIZE_MAX);
  pthread_mutex_unlock(&p->m);
  return pp_destroy_list(ctx, evicted);
}

/* ---- the pool's life ---------------------------------------------------------- */

static size_t pp_default_limit(void) {
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return (size_t)1 << 30;
  return (size_t)pages / 4 * (size_t)page;
}

dv_status dv__pinned_init(dv_context *ctx, dv_pinned_pool *p) {
  memset(p, 0, sizeof *p);
  p->on = ctx->opt[DV_OPT_PINNED_POOL].i != 0;
  if (!p->on) return DV_OK;
  p->reserve = (size_t)ctx->opt[DV_OPT_PINNED_POOL_RESERVE].i;
  p->limit = ctx->opt[DV_OPT_PINNED_POOL_LIMIT].i ? (size_t)ctx->opt[DV_OPT_PINNED_POOL_LIMIT].i : pp_default_limit();
  if (p->limit < p->reserve) p->limit = p->reserve;
  if (p->reserve) {
    void *ptr = NULL;
    dv_status rc = ctx->be->host_alloc(ctx->bst, p->reserve, 0, &p->arena_handle, &ptr, NULL);
    if (rc) {
      p->on = false;
      return rc;
    }
    p->arena_ptr = ptr;
    cnt_add(&p->held, p->reserve);
  }
  pthread_mutex_init(&p->m, NULL);
  return DV_OK;
}

void dv__pinned_fini(dv_context *ctx, dv_pinned_pool *p) {
  if (!p->on) return;
  /* every block is free now (the context has no array left) */
  dv_status rc = DV_OK;
  for (int c = 0; c < DV_PINNED_CLASSES; c++) {
    dv_status r = pp_destroy_list(ctx, p->free[c]);
    if (r && !rc) rc = r;
    p->free[c] = NULL;
  }
  if (p->arena_handle) {
    dv_status r = ctx->be->host_free(ctx->bst, p->arena_handle);
    if (r && !rc) rc = r;
  }
  if (rc) dv__log(DV_LOG_ERROR, "pinned pool: freeing its memory failed: %s", dv_last_error());
  pthread_mutex_destroy(&p->m);
  p->on = false;
}

/* ---- the public calls ------------------------------------------------------------ */

dv_status dv_pinned_pool_stats(dv_context *ctx, dv_pinned_stats *out) {
  DV_CHECK_NULL(out);
  memset(out, 0, sizeof *out);
  DV_CHECK_NULL(ctx);
  DV_CHECK_HANDLE(ctx, DV_HANDLE_CONTEXT);
  dv_pinned_pool *p = &ctx->memory->pinned;
  if (!p->on) return DV_OK;
  out->enabled = 1;
  pthread_mutex_lock(&p->m);
  out->held = p->held;
  out->in_use = p->in_use;
  out->cached = p->cached;
  out->free_blocks = p->free_blocks;
  for (int c = 0; c < DV_PINNED_CLASSES; c++)
    for (dv_pinned_block *b = p->free[c]; b; b = b->next)
      if (b->nfence > 0 || b->wait) out->pending += b->size;
  out->hits = p->hits;
  out->misses = p->misses;
  out->uncached = p->uncached;
  out->waits = p->waits;
  out->releases = p->releases;
  out->reserve = p->reserve;
  out->limit = p->limit;
  pthread_mutex_unlock(&p->m);
  return DV_OK;
}

dv_status dv_pinned_pool_trim(dv_context *ctx) {
  DV_CHECK_NULL(ctx);
  DV_CHECK_HANDLE(ctx, DV_HANDLE_CONTEXT);
  dv_status rc = dv__flush(ctx); /* released arrays back to the pool first */
  dv_status r2 = dv__pinned_trim(ctx);
  return rc ? rc : r2;
}

dv_status dv_pinned_pool_set_limit(dv_context *ctx, size_t limit) {
  DV_CHECK_NULL(ctx);
  DV_CHECK_HANDLE(ctx, DV_HANDLE_CONTEXT);
  dv_pinned_pool *p = &ctx->memory->pinned;
  if (!p->on) return dv__error(DV_ERR_NOT_SUPPORTED, "the pinned pool is off (option pinned_pool)");
  if (limit == 0) limit = pp_default_limit();
  pthread_mutex_lock(&p->m);
  if (limit < p->reserve) {
    size_t r = p->reserve;
    pthread_mutex_unlock(&p->m);
    return dv__error(DV_ERR_INVALID_ARGUMENT, "a limit of %zu bytes is below the pool's reserve of %zu bytes",
                     limit, r);
  }
  p->limit = limit;
  dv_pinned_block *evicted = p->held.current > limit ? pp_evict(p, p->held.current - limit) : NULL;
  pthread_mutex_unlock(&p->m);
  return pp_destroy_list(ctx, evicted);
}
