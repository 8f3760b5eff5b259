/*
 * The CUDA backend's host-memory side: which host ranges are page-locked
 * (pinned by cuMemHostAlloc or registered by cuMemHostRegister, one
 * process-wide registry with reference counts, since the primary context is
 * shared by every devarray context on a device and a registration is
 * process-wide with CU_MEMHOSTREGISTER_PORTABLE), and the pageable path.
 *
 * The pageable path: the driver runs a copy from pageable host memory
 * synchronously with its stream (host to device: after a stream
 * synchronize; device to pageable host: the call returns when the copy is
 * done), so "queue and return" would break and work queued behind an event
 * the caller records later would deadlock.  Every copy with a pageable host
 * side goes through pinned staging buffers instead, ordered on the stream:
 * the copy is cut into pieces of at most the chunk size (option
 * staging_chunk, DV_STAGING_CHUNK; default 4 MiB).
 *
 *  - A synchronous copy keeps its host side on the calling thread and never
 *    depends on a host callback (the driver "may serialize" them, so one
 *    blocked elsewhere in the process would hold it up): host to device, it
 *    waits for its stream (an event recorded there), then copies a piece
 *    into a buffer, queues its DMA and records the buffer's event, the next
 *    piece into a second buffer while the first one's DMA runs; device to
 *    host, it queues each piece's DMA into a buffer and records its event,
 *    waits for the older piece's event and copies it out.  Two pieces in
 *    flight at most.
 *  - An asynchronous copy returns once its pieces are queued: host to
 *    device, the calling thread fills each buffer when the stream is idle
 *    at the call, else a stream callback fills it (the host rows are read in
 *    stream order, after a download into them say); device to host, a
 *    stream callback after each piece's DMA copies it out.  Buffers come
 *    back through a callback after their DMA (cuStreamAddCallback, which
 *    runs after a device error too, with its status, so buffers always come
 *    back; cuLaunchHostFunc's would not).  Callbacks never call the driver
 *    (the reference forbids it).
 *
 * Buffers: sized to the piece (64 KiB, doubling up to the chunk) and kept
 * on a free list for the next copy, at most staging_limit bytes of
 * them per context (DV_STAGING_LIMIT; 0, the default: four chunks,
 * and never less than one).  An asynchronous copy that finds none free and
 * no room waits for one to come back (it may then wait for work queued
 * before it); idle buffers too small for a piece are freed to make room; a
 * synchronous copy with a piece of its own in flight finishes that piece
 * first, and one with none takes a buffer beyond the limit rather than wait
 * for callbacks (freed as soon as it comes back).  Every pageable copy
 * first frees the idle buffers beyond two chunks' worth (the calling thread
 * does: callbacks may not call the driver).  The bytes held count in the
 * context's dv_stats `staging`, reuses and new buffers in staging_hits and
 * staging_misses.  The staging state is reference counted (the context and
 * every asynchronous piece in flight), so a callback that runs after close
 * (a sticky error ends close's synchronize early) finds it.
 *
 * A stream capturing a CUDA graph cannot take this path (stream callbacks
 * cannot be captured, and the staging buffers' reuse is not in the graph):
 * cuda.c refuses such copies with DV_ERR_MISUSE before anything is queued.
 *
 * The host side of each piece (its rows into the staging buffer, at the
 * call or in h2d_fill; out of it, at the call or in d2h_done) is copied by
 * the context's copy team (src/core/copyteam.h): pieces of at least
 * staging_thread_min bytes (DV_STAGING_THREAD_MIN, default 1
 * MiB) are split over staging_threads threads (DV_STAGING_THREADS;
 * 0, the default: min(4, online CPUs)), since one thread's memcpy (about
 * 10-20 GB/s) is slower than the DMA of a PCIe 5 link.  The team calls
 * nothing of the driver, so callbacks may use it; a team busy with another
 * piece (a callback's while the calling thread fills, say) leaves the
 * other copier to copy alone.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../core/copyteam.h"
#include "fam.h"

/* ---- the registry of page-locked host ranges -------------------------------------------- */

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static dv_cu_host *reg_head;

/* Pinned by drv: memory another driver pinned is pageable to this one. */
bool dv__cu_host_pinned(const dv_cu_driver *drv, const void *p, size_t n) {
  uintptr_t a = (uintptr_t)p;
  bool yes = false;
  pthread_mutex_lock(&reg_lock);
  for (dv_cu_host *h = reg_head; h; h = h->next) {
    uintptr_t b = (uintptr_t)h->ptr;
    if (h->drv == drv && a >= b && a - b < h->bytes) {
      yes = n <= h->bytes - (a - b);
      break;
    }
  }
  pthread_mutex_unlock(&reg_lock);
  return yes;
}

void dv__cu_host_add(dv_cu_host *h) {
  pthread_mutex_lock(&reg_lock);
  h->refs = 1;
  h->next = reg_head;
  reg_head = h;
  pthread_mutex_unlock(&reg_lock);
}

dv_cu_host *dv__cu_host_find_registered(const dv_cu_driver *drv, void *p, size_t n, bool mapped) {
  pthread_mutex_lock(&reg_lock);
  dv_cu_host *h = reg_head;
  for (; h; h = h->next)
    if (h->drv == drv && h->registered && h->ptr == p && h->bytes == n && (!mapped || h->dev)) {
      h->refs++;
      break;
    }
  pthread_mutex_unlock(&reg_lock);
  return h;
}

bool dv__cu_host_drop(dv_cu_host *h) {
  pthread_mutex_lock(&reg_lock);
  bool last = --h->refs == 0;
  if (last)
    for (dv_cu_host **pp = &reg_head; *pp; pp = &(*pp)->next)
      if (*pp == h) {
        *pp = h->next;
        break;
      }
  pthread_mutex_unlock(&reg_lock);
  return last;
}

/* ---- staging buffers -------------------------------------------------------------------- */

typedef struct cu_stage {
  struct cu_stage *next;
  void *ptr;
  size_t size;
  dv_CUevent ev; /* synchronous copies: the piece's DMA is done (made at first use) */
  bool over;     /* taken beyond the limit by a synchronous copy: freed when it comes back */
} cu_stage;

struct dv_cu_staging {
  const dv_cu_driver *drv; /* the context's driver (buffers may outlive the context) */
  pthread_mutex_t lock;
  pthread_cond_t back;   /* a buffer came back to the free list */
  atomic_int refs;       /* the context's, and one per asynchronous piece in flight */
  bool closed;           /* the context closed: buffers that come back are not kept */
  cu_stage *free_list;   /* idle buffers */
  size_t total;          /* bytes of every buffer: idle, in use, being allocated */
  size_t idle;           /* bytes on the free list */
  size_t chunk, limit;
  dv_copy_team *team;    /* the host copies of pieces; NULL (could not be made): one thread */
  dv_atomic_counter *stat_bytes;            /* the context's dv_stats `staging`, or NULL */
  _Atomic uint64_t *stat_hits, *stat_misses; /* staging_hits, staging_misses, or NULL */
};

/* The option staging_threads; 0 means min(4, online CPUs). */
static int staging_threads(int opt) {
  if (opt > 0) return opt;
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n < 1 ? 1 : n > 4 ? 4 : (int)n;
}

dv_status dv__cu_staging_open(cu_state *st, const dv_backend_config *cfg) {
  dv_cu_staging *g = dv__calloc(1, sizeof *g);
  if (!g) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate the %s staging state", st->drv->vendor);
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
static void staging_unref(dv_cu_staging *g, bool driver_ok) {
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
void dv__cu_staging_close(cu_state *st) {
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
  staging_unref(g, true);
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
static void stage_trim(dv_cu_staging *g) {
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
static dv_status stage_get(dv_cu_staging *g, size_t n, bool sync, int own, cu_stage **out) {
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
  dv_CUresult r = b ? g->drv->api->cuMemHostAlloc(&b->ptr, size, DV_CU_MEMHOSTALLOC_PORTABLE) : DV_CUDA_SUCCESS;
  if (!b || r) {
    dv__free(b);
    pthread_mutex_lock(&g->lock);
    g->total -= size;
    pthread_cond_broadcast(&g->back); /* room for a waiting copy */
    pthread_mutex_unlock(&g->lock);
    if (!b) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate a staging record");
    if (dv__cu_code(g->drv, r) == DV_CUDA_ERROR_OUT_OF_MEMORY)
      return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "%s %s of a %zu-byte staging buffer failed: out of page-locked memory",
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
static void stage_put(dv_cu_staging *g, cu_stage *b, bool driver_ok) {
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

/* ---- asynchronous copies: pieces completed by stream callbacks ---------------------------- */

/* One piece: k rows of w bytes; host rows hpitch apart.  Owns a reference
 * to the staging state until its buffer is back. */
typedef struct cu_piece {
  dv_cu_staging *g;
  cu_stage *b;
  char *host;
  size_t w, k, hpitch;
  bool queued; /* its DMA was queued: d2h_done copies it out */
} cu_piece;

static void piece_done(cu_piece *p, bool driver_ok) {
  dv_cu_staging *g = p->g;
  stage_put(g, p->b, driver_ok);
  dv__free(p);
  staging_unref(g, driver_ok);
}

static void h2d_done(dv_CUstream s, dv_CUresult status, void *arg) {
  (void)s, (void)status;
  piece_done(arg, false);
}

/* After a device error the staged bytes are not the device's: not copied out. */
static void d2h_done(dv_CUstream s, dv_CUresult status, void *arg) {
  (void)s;
  cu_piece *p = arg;
  if (status == DV_CUDA_SUCCESS && p->queued)
    dv__copy_team_rows(p->g->team, p->host, p->hpitch, p->b->ptr, p->w, p->w, p->k);
  piece_done(p, false);
}

/* Host to device when the stream still had work queued at the call: the
 * host rows go into the staging buffer when the stream gets here (earlier
 * work, a download into the same host memory say, may still write them).
 * After a device error nothing is copied: the DMA behind fails too. */
static void h2d_fill(dv_CUstream s, dv_CUresult status, void *arg) {
  (void)s;
  cu_piece *p = arg;
  if (status == DV_CUDA_SUCCESS)
    dv__copy_team_rows(p->g->team, p->b->ptr, p->w, p->host, p->hpitch, p->w, p->k);
}

/* The DMA of one piece between a staging buffer (rows w apart) and the
 * device (rows dpitch apart), queued on s. */
static dv_CUresult piece_dma(cu_state *st, dv_bstream *s, bool to_device, char *b, dv_CUdeviceptr dev, size_t dpitch, size_t w,
                             size_t k, dv_cu_entry *what) {
  if (k == 1) {
    *what = to_device ? DV_CU_E_cuMemcpyHtoDAsync_v2 : DV_CU_E_cuMemcpyDtoHAsync_v2;
    return to_device ? cu.cuMemcpyHtoDAsync_v2(dev, b, w, s->s) : cu.cuMemcpyDtoHAsync_v2(b, dev, w, s->s);
  }
  dv_CUDA_MEMCPY2D c;
  memset(&c, 0, sizeof c);
  if (to_device) {
    c.srcMemoryType = DV_CU_MEMORYTYPE_HOST, c.srcHost = b, c.srcPitch = w;
    c.dstMemoryType = DV_CU_MEMORYTYPE_DEVICE, c.dstDevice = dev, c.dstPitch = dpitch;
  } else {
    c.srcMemoryType = DV_CU_MEMORYTYPE_DEVICE, c.srcDevice = dev, c.srcPitch = dpitch;
    c.dstMemoryType = DV_CU_MEMORYTYPE_HOST, c.dstHost = b, c.dstPitch = w;
  }
  c.WidthInBytes = w, c.Height = k;
  *what = DV_CU_E_cuMemcpy2DAsync_v2;
  return cu.cuMemcpy2DAsync_v2(&c, s->s);
}

static dv_status async_piece(cu_state *st, dv_bstream *s, bool to_device, bool fill_later, char *host,
                             size_t hpitch, dv_CUdeviceptr dev, size_t dpitch, size_t w, size_t k) {
  dv_cu_staging *g = st->staging;
  cu_piece *p = dv__calloc(1, sizeof *p);
  if (!p) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate a staging record");
  dv_status rc = stage_get(g, w * k, false, 0, &p->b);
  if (rc) {
    dv__free(p);
    return rc;
  }
  p->g = g, p->host = host, p->w = w, p->k = k, p->hpitch = hpitch;
  atomic_fetch_add(&g->refs, 1); /* the piece's, until piece_done */
  dv_CUresult r;
  if (to_device && fill_later) {
    r = cu.cuStreamAddCallback(s->s, h2d_fill, p, 0);
    if (r) {
      piece_done(p, true);
      return cu_fail(r, DV_CU_E_cuStreamAddCallback, " (staging)");
    }
  } else if (to_device) {
    dv__copy_team_rows(g->team, p->b->ptr, w, host, hpitch, w, k);
  }
  dv_cu_entry what = DV_CU_E_NONE;
  r = piece_dma(st, s, to_device, p->b->ptr, dev, dpitch, w, k, &what);
  rc = r ? cu_fail(r, what, "") : DV_OK;
  p->queued = r == DV_CUDA_SUCCESS;
  if (r && !fill_later) {
    piece_done(p, true); /* nothing queued uses it */
    return rc;
  }
  /* The buffer comes back when the stream is past the DMA (or past the fill
   * callback, when the DMA could not be queued). */
  dv_CUresult rq = cu.cuStreamAddCallback(s->s, to_device ? h2d_done : d2h_done, p, 0);
  if (rq) {
    /* What is queued uses the buffer, and its return cannot be: wait here. */
    dv_CUresult r2 = cu.cuStreamSynchronize(s->s);
    if (!to_device && !r2 && p->queued)
      dv__copy_team_rows(g->team, host, hpitch, p->b->ptr, w, w, k);
    piece_done(p, true);
    if (!rc) rc = cu_fail(rq, DV_CU_E_cuStreamAddCallback, " (staging)");
  }
  return rc;
}

/* ---- synchronous copies: the host side on the calling thread ----------------------------- */

/* A piece of a synchronous copy in flight: its DMA queued, the buffer's
 * event recorded after it. */
typedef struct cu_own {
  cu_stage *b;
  char *host;
  size_t w, k, hpitch;
} cu_own;

typedef struct cu_sync {
  cu_own ring[2];
  int head, n; /* the oldest piece in flight, and how many are */
  bool waited; /* host to device: the stream's earlier work is done */
} cu_sync;

/* Finish the oldest piece in flight: wait for its DMA, copy it out (device
 * to host; nothing after a failed wait).  Its buffer goes to *reuse when
 * reuse is given and the buffer holds `need` bytes, else back to the list. */
static dv_status sync_oldest(dv_cu_staging *g, cu_sync *y, bool to_device, cu_stage **reuse, size_t need) {
  cu_own *o = &y->ring[y->head];
  dv_CUresult r = g->drv->api->cuEventSynchronize(o->b->ev);
  if (!r && !to_device) dv__copy_team_rows(g->team, o->host, o->hpitch, o->b->ptr, o->w, o->w, o->k);
  if (!r && reuse && o->b->size >= need) *reuse = o->b;
  else stage_put(g, o->b, true);
  o->b = NULL;
  y->head ^= 1;
  y->n--;
  return r ? dv__cu_fail(g->drv, r, DV_CU_E_cuEventSynchronize, " (staging)") : DV_OK;
}

static dv_status sync_piece(cu_state *st, dv_bstream *s, cu_sync *y, bool to_device, char *host, size_t hpitch,
                            dv_CUdeviceptr dev, size_t dpitch, size_t w, size_t k) {
  dv_cu_staging *g = st->staging;
  dv_status rc = DV_OK;
  cu_stage *b = NULL;
  /* Two in flight: the older one's buffer serves this piece (the copy
   * cycles through its two buffers without asking the list). */
  if (y->n == 2 && (rc = sync_oldest(g, y, to_device, &b, w * k)) != DV_OK) return rc;
  while (!b) {
    rc = stage_get(g, w * k, true, y->n, &b);
    if (rc == DV_ERR_NOT_READY) rc = sync_oldest(g, y, to_device, &b, w * k);
    if (rc) return rc;
  }
  dv_CUresult r = b->ev ? DV_CUDA_SUCCESS : cu.cuEventCreate(&b->ev, DV_CU_EVENT_DISABLE_TIMING);
  if (r) {
    b->ev = NULL;
    stage_put(g, b, true);
    return cu_fail(r, DV_CU_E_cuEventCreate, " (staging)");
  }
  if (to_device && !y->waited) {
    /* The host rows are read after the stream's earlier work (a download
     * into them, say): a synchronous copy waits for its stream anyway.  An
     * event on the legacy stream also waits for the blocking streams, as
     * that stream does; nothing else of the context is waited for. */
    r = cu.cuEventRecord(b->ev, s->s);
    if (!r) r = cu.cuEventSynchronize(b->ev);
    if (r) {
      stage_put(g, b, true);
      return cu_fail_in(r, "waiting for the stream before a staged copy", DV_CU_E_cuEventRecord,
                        DV_CU_E_cuEventSynchronize);
    }
    y->waited = true;
  }
  if (to_device) dv__copy_team_rows(g->team, b->ptr, w, host, hpitch, w, k);
  dv_cu_entry what = DV_CU_E_NONE;
  r = piece_dma(st, s, to_device, b->ptr, dev, dpitch, w, k, &what);
  if (r) {
    stage_put(g, b, true);
    return cu_fail(r, what, "");
  }
  r = cu.cuEventRecord(b->ev, s->s);
  if (r) {
    /* The DMA is queued but cannot be waited for by its event. */
    dv_CUresult r2 = cu.cuStreamSynchronize(s->s);
    if (!r2 && !to_device) dv__copy_team_rows(g->team, host, hpitch, b->ptr, w, w, k);
    stage_put(g, b, true);
    return cu_fail(r, DV_CU_E_cuEventRecord, " (staging)");
  }
  y->ring[(y->head + y->n) % 2] = (cu_own){b, host, w, k, hpitch};
  y->n++;
  return DV_OK;
}

/* The async path's fill decision: can the host rows be read at the call? */
static bool fill_at_call(cu_state *st, dv_bstream *s) {
  /* The legacy default stream also waits for every blocking stream of the
   * context, which its own query does not tell: filled in stream order.
   * Blocking streams (the per-thread one too) also wait for the legacy one. */
  if (s->s == NULL || s->s == DV_CU_STREAM_LEGACY) return false;
  return cu.cuStreamQuery(s->s) == DV_CUDA_SUCCESS && cu.cuStreamQuery(DV_CU_STREAM_LEGACY) == DV_CUDA_SUCCESS;
}

dv_status dv__cu_copy_pageable(cu_state *st, dv_bstream *s, const dv_rect *r) {
  dv_cu_staging *g = st->staging;
  bool to_device = r->dst.buf != NULL;
  char *host = to_device ? (char *)r->src.ptr : (char *)r->dst.ptr;
  dv_CUdeviceptr dev = to_device ? cu_ptr(r->dst) : cu_ptr(r->src);
  size_t hpitch = to_device ? r->src_pitch : r->dst_pitch, dpitch = to_device ? r->dst_pitch : r->src_pitch;
  size_t hslice = to_device ? r->src_slice : r->dst_slice, dslice = to_device ? r->dst_slice : r->src_slice;
  bool sync = (r->flags & DV_COPY_SYNC) != 0;
  size_t chunk = g->chunk;
  stage_trim(g);
  cu_sync y;
  memset(&y, 0, sizeof y);
  bool fill_later = to_device && !sync && !fill_at_call(st, s);
  dv_status rc = DV_OK;
  for (size_t z = 0; z < r->depth && !rc; z++) {
    char *hz = host + z * hslice;
    dv_CUdeviceptr dz = dev + z * dslice;
    /* Rows one at a time, each in pieces of at most a chunk; or rows of one
     * slice a chunk at a time. */
    bool by_row = r->width >= chunk || r->height == 1;
    size_t per = by_row ? 1 : chunk / r->width;
    for (size_t y0 = 0; y0 < r->height && !rc; y0 += per) {
      size_t k = r->height - y0 < per ? r->height - y0 : per;
      for (size_t x = 0; x < (by_row ? r->width : 1) && !rc; x += chunk) {
        size_t w = by_row ? (r->width - x < chunk ? r->width - x : chunk) : r->width;
        char *h = hz + y0 * hpitch + (by_row ? x : 0);
        dv_CUdeviceptr d = dz + y0 * dpitch + (by_row ? x : 0);
        size_t hp = k > 1 ? hpitch : 0, dp = k > 1 ? dpitch : 0;
        rc = sync ? sync_piece(st, s, &y, to_device, h, hp, d, dp, w, k)
                  : async_piece(st, s, to_device, fill_later, h, hp, d, dp, w, k);
      }
    }
  }
  /* Also on failure: the pieces in flight use their buffers. */
  while (y.n) {
    dv_status e = sync_oldest(g, &y, to_device, NULL, 0);
    if (!rc) rc = e;
  }
  return rc;
}
