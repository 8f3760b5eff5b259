/*
 * The CUDA family's staging buffers (fam_stagebuf.h): pinned host buffers
 * for pageable copies, sized to the piece (64 KiB, doubling up to the
 * chunk) and kept on a free list for the next copy, at most staging_limit
 * bytes of them per context (DV_STAGING_LIMIT; 0, the default: four
 * chunks, and never less than one).  An asynchronous copy that finds none
 * free and no room waits for one to come back (it may then wait for work
 * queued before it); idle buffers too small for a piece are freed to make
 * room; a synchronous copy with a piece of its own in flight finishes that
 * piece first, and one with none takes a buffer beyond the limit rather
 * than wait (freed as soon as it comes back).  Every pageable copy first
 * frees the idle buffers beyond two chunks' worth (not on HIP, whose host
 * free waits for the whole device: kept to the limit, freed at close;
 * dv_cu_driver.host_free_syncs).  The bytes held count in
 * the context's dv_stats `staging`, reuses and new buffers in staging_hits
 * and staging_misses.  The state is reference counted (the context and
 * every asynchronous piece in flight), so a piece that completes after
 * close (a sticky error ends close's synchronize early) finds it.
 *
 * The host side of each piece is copied by the context's copy team
 * (src/core/copyteam.h): pieces of at least staging_thread_min bytes
 * (DV_STAGING_THREAD_MIN, default 1 MiB) are split over staging_threads
 * threads (DV_STAGING_THREADS; 0, the default: min(4, online CPUs)), since
 * one thread's memcpy (about 10-20 GB/s) is slower than the DMA of a PCIe
 * 5 link.  The team calls nothing of the driver, so callbacks may use it.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fam_stagebuf.h"

struct dv_cu_staging {
  const dv_cu_driver *drv; /* the context's driver (buffers may outlive the context) */
  pthread_mutex_t lock;
  pthread_cond_t back; /* a buffer came back to the free list */
  atomic_int refs;     /* the context's, and one per asynchronous piece in flight */
  bool closed;         /* the context closed: buffers that come back are not kept */
  cu_stage *free_list; /* idle buffers */
  size_t total;        /* bytes of every buffer: idle, in use, being allocated */
  size_t idle;         /* bytes on the free list */
  size_t chunk, limit;
  dv_copy_team *team; /* the host copies of pieces; NULL (could not be made): one thread */
  dv_atomic_counter *stat_bytes;             /* the context's dv_stats `staging`, or NULL */
  _Atomic uint64_t *stat_hits, *stat_misses; /* staging_hits, staging_misses, or NULL */
};

/* The option staging_threads; 0 means min(4, online CPUs). */
static int staging_threads(int opt) {
  if (opt > 0) return opt;
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n < 1 ? 1 : n > 4 ? 4 : (int)n;
}

dv_status dv__cu_stagebuf_open(cu_state *st, const dv_backend_config *cfg) {
  dv_cu_staging *g = dv__calloc(1, sizeof *g);
  if (!g)
    return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate the %s staging state",
                     st->drv->vendor);
  g->drv = st->drv;
  pthread_mutex_init(&g->lock, NULL);
  pthread_cond_init(&g->back, NULL);
  atomic_init(&g->refs, 1);
  /* The option staging_chunk (DV_STAGING_CHUNK), range-checked
   * by the options table; 0 only from a caller that filled no config. */
  g->chunk = cfg->staging_chunk ? cfg->staging_chunk : (size_t)4 << 20;
  /* staging_limit (DV_STAGING_LIMIT): 0 is four chunks; at least one. */
  g->limit = cfg->staging_limit ? cfg->staging_limit : 4 * g->chunk;
  if (g->limit < g->chunk) g->limit = g->chunk;
  g->stat_bytes = cfg->staging_bytes;
  g->stat_hits = cfg->staging_hits;
  g->stat_misses = cfg->staging_misses;
  /* No team (no memory for it) copies on one thread: not an error. */
  g->team = dv__copy_team_create(staging_threads(cfg->staging_threads), cfg->staging_thread_min);
  st->staging = g;
  return DV_OK;
}

size_t dv__cu_staging_chunk(cu_state *st) { return st->staging->chunk; }
size_t dv__cu_stage_chunk(dv_cu_staging *g) { return g->chunk; }
dv_copy_team *dv__cu_stage_team(dv_cu_staging *g) { return g->team; }
const dv_cu_driver *dv__cu_stage_driver(dv_cu_staging *g) { return g->drv; }

/* Free buffers with the driver (the calling thread's, never a callback's). */
static void stage_free(dv_cu_staging *g, cu_stage *list) {
  for (cu_stage *b = list, *n; b; b = n) {
    n = b->next;
    if (b->ev) g->drv->api->cuEventDestroy_v2(b->ev);
    g->drv->api->cuMemFreeHost(b->ptr);
    if (g->stat_bytes) dv__counter_sub(g->stat_bytes, b->size);
    dv__free(b);
  }
}

/* The last reference: the state goes.  Buffers still listed are freed when
 * the caller may call the driver (close); a callback that drops the last
 * reference (after a close that could not wait for it) frees only the
 * records: the pinned memory goes with the primary context. */
void dv__cu_stagebuf_ref(dv_cu_staging *g) { atomic_fetch_add(&g->refs, 1); }

void dv__cu_stagebuf_unref(dv_cu_staging *g, bool driver_ok) {
  if (atomic_fetch_sub(&g->refs, 1) != 1) return;
  if (driver_ok) {
    stage_free(g, g->free_list);
  } else {
    for (cu_stage *b = g->free_list, *n; b; b = n) {
      n = b->next;
      if (g->stat_bytes) dv__counter_sub(g->stat_bytes, b->size);
      dv__free(b);
    }
  }
  dv__copy_team_destroy(g->team);
  pthread_cond_destroy(&g->back);
  pthread_mutex_destroy(&g->lock);
  dv__free(g);
}

/* After every stream of the context was synchronized. */
void dv__cu_stagebuf_close(cu_state *st) {
  dv_cu_staging *g = st->staging;
  if (!g) return;
  pthread_mutex_lock(&g->lock);
  g->closed = true;
  cu_stage *idle = g->free_list;
  g->free_list = NULL;
  g->total -= g->idle;
  g->idle = 0;
  pthread_mutex_unlock(&g->lock);
  stage_free(g, idle);
  /* The context's counters go with it: a piece that comes back later
   * counts nothing. */
  pthread_mutex_lock(&g->lock);
  g->stat_bytes = NULL;
  g->stat_hits = g->stat_misses = NULL;
  pthread_mutex_unlock(&g->lock);
  st->staging = NULL;
  dv__cu_stagebuf_unref(g, true);
}

/* Take idle buffers off the list until at most `keep` idle bytes remain
 * (largest first; g->lock held); the caller frees them after unlocking. */
static cu_stage *stage_take_idle(dv_cu_staging *g, size_t keep) {
  cu_stage *drop = NULL;
  while (g->idle > keep) {
    cu_stage **big = &g->free_list;
    for (cu_stage **pp = &g->free_list; *pp; pp = &(*pp)->next)
      if ((*pp)->size > (*big)->size) big = pp;
    cu_stage *b = *big;
    *big = b->next;
    g->idle -= b->size;
    g->total -= b->size;
    b->next = drop;
    drop = b;
  }
  return drop;
}

/* Every pageable copy starts here: idle buffers beyond two chunks' worth go. */
void dv__cu_stage_trim(dv_cu_staging *g) {
  if (g->drv->host_free_syncs) return; /* kept to the limit, freed at close */
  pthread_mutex_lock(&g->lock);
  cu_stage *drop = g->idle > 2 * g->chunk ? stage_take_idle(g, 2 * g->chunk) : NULL;
  pthread_mutex_unlock(&g->lock);
  stage_free(g, drop);
}

/* The buffer size for a piece of n bytes: 64 KiB doubling up to the chunk. */
static size_t stage_size(const dv_cu_staging *g, size_t n) {
  size_t s = (size_t)64 << 10;
  while (s < n && s < g->chunk) s <<= 1;
  return s < g->chunk ? s : g->chunk;
}

/*
 * A buffer of at least n bytes (n <= the chunk): an idle one, else a new one
 * while the limit allows (idle ones too small are freed to make room).  At
 * the limit an asynchronous copy waits for a buffer to come back; a
 * synchronous one gets DV_ERR_NOT_READY when `own` of its pieces are in
 * flight (it finishes one and asks again), else a buffer beyond the limit.
 */
dv_status dv__cu_stage_get(dv_cu_staging *g, size_t n, bool sync, int own, cu_stage **out) {
  size_t size = stage_size(g, n);
  bool over = false;
  *out = NULL;
  pthread_mutex_lock(&g->lock);
  for (;;) {
    cu_stage **best = NULL;
    for (cu_stage **pp = &g->free_list; *pp; pp = &(*pp)->next)
      if ((*pp)->size >= n && (!best || (*pp)->size < (*best)->size)) best = pp;
    if (best) {
      cu_stage *b = *best;
      *best = b->next;
      g->idle -= b->size;
      pthread_mutex_unlock(&g->lock);
      b->next = NULL;
      if (g->stat_hits) atomic_fetch_add(g->stat_hits, 1);
      *out = b;
      return DV_OK;
    }
    if (g->total + size <= g->limit) break;
    if (g->idle) {
      /* Idle buffers too small for this piece: freed to make room. */
      size_t need = g->total + size - g->limit;
      cu_stage *drop = stage_take_idle(g, g->idle > need ? g->idle - need : 0);
      pthread_mutex_unlock(&g->lock);
      stage_free(g, drop);
      pthread_mutex_lock(&g->lock);
      continue;
    }
    if (sync) {
      if (own) {
        pthread_mutex_unlock(&g->lock);
        return DV_ERR_NOT_READY;
      }
      over = true; /* never wait for callbacks: one buffer beyond the limit */
      break;
    }
    pthread_cond_wait(&g->back, &g->lock);
  }
  g->total += size;
  pthread_mutex_unlock(&g->lock);
  cu_stage *b = dv__calloc(1, sizeof *b);
  dv_CUresult r =
      b ? g->drv->api->cuMemHostAlloc(&b->ptr, size, DV_CU_MEMHOSTALLOC_PORTABLE) : DV_CUDA_SUCCESS;
  if (!b || r) {
    dv__free(b);
    pthread_mutex_lock(&g->lock);
    g->total -= size;
    pthread_cond_broadcast(&g->back); /* room for a waiting copy */
    pthread_mutex_unlock(&g->lock);
    if (!b) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate a staging record");
    if (dv__cu_code(g->drv, r) == DV_CUDA_ERROR_OUT_OF_MEMORY)
      return dv__error(DV_ERR_HOST_OUT_OF_MEMORY,
                       "%s %s of a %zu-byte staging buffer failed: out of page-locked memory",
                       g->drv->vendor, dv__cu_name(g->drv, DV_CU_E_cuMemHostAlloc), size);
    return dv__cu_fail(g->drv, r, DV_CU_E_cuMemHostAlloc, " (staging)");
  }
  b->size = size;
  b->over = over;
  if (g->stat_bytes) dv__counter_add(g->stat_bytes, size);
  if (g->stat_misses) atomic_fetch_add(g->stat_misses, 1);
  *out = b;
  return DV_OK;
}

/* A buffer back to the free list.  On the calling thread (driver_ok) one
 * beyond the limit is freed at once; from a callback it is listed (the
 * next copy's trim or close frees what is too much). */
void dv__cu_stage_put(dv_cu_staging *g, cu_stage *b, bool driver_ok) {
  pthread_mutex_lock(&g->lock);
  if (driver_ok && (b->over || g->total > g->limit || g->closed)) {
    g->total -= b->size;
    pthread_mutex_unlock(&g->lock);
    b->next = NULL;
    stage_free(g, b);
    return;
  }
  b->over = false;
  b->next = g->free_list;
  g->free_list = b;
  g->idle += b->size;
  pthread_cond_broadcast(&g->back);
  pthread_mutex_unlock(&g->lock);
}
