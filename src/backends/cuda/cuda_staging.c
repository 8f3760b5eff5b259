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
 * cuda_staging_chunk, DV_CUDA_STAGING_CHUNK; default 4 MiB); host to
 * device, the host copies a piece into a staging buffer and queues its DMA,
 * then the next piece into a second buffer while the first one's DMA runs
 * (when the stream had work queued at the call, a stream callback fills
 * each buffer instead, so that the host rows are read in stream order); device to host, the DMA of each
 * piece is queued into a staging buffer, followed by a stream callback that
 * copies it out to the caller's memory and hands the buffer back
 * (cuStreamAddCallback, which runs after a device error too, with its
 * status, so buffers always come back; cuLaunchHostFunc's would not).  A
 * synchronous copy keeps at most two buffers in flight (double buffering);
 * an asynchronous one never waits for a buffer (it takes a new one), so it
 * never blocks on work queued before it.  Callbacks never call the
 * driver (the reference forbids it): buffers come back to a free list that
 * the calling threads trim.
 *
 * The host side of each piece (its rows into the staging buffer, at the
 * call or in h2d_fill; out of it, in d2h_done) is copied by the context's
 * copy team (src/core/copyteam.h): pieces of at least
 * cuda_staging_thread_min bytes (DV_CUDA_STAGING_THREAD_MIN, default 1
 * MiB) are split over cuda_staging_threads threads (DV_CUDA_STAGING_THREADS;
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
#include "cuda_internal.h"

/* ---- the registry of page-locked host ranges -------------------------------------------- */

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static dv_cu_host *reg_head;

bool dv__cu_host_pinned(const void *p, size_t n) {
  uintptr_t a = (uintptr_t)p;
  bool yes = false;
  pthread_mutex_lock(&reg_lock);
  for (dv_cu_host *h = reg_head; h; h = h->next) {
    uintptr_t b = (uintptr_t)h->ptr;
    if (a >= b && a - b < h->bytes) {
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

dv_cu_host *dv__cu_host_find_registered(void *p, size_t n, bool mapped) {
  pthread_mutex_lock(&reg_lock);
  dv_cu_host *h = reg_head;
  for (; h; h = h->next)
    if (h->registered && h->ptr == p && h->bytes == n && (!mapped || h->dev)) {
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
  cu_state *st;
  void *ptr;
  size_t size;
} cu_stage;

struct dv_cu_staging {
  pthread_mutex_t lock;
  pthread_cond_t back;
  cu_stage *free_list;
  size_t nfree;
  size_t chunk;
  dv_copy_team *team; /* the host copies of pieces; NULL (could not be made): one thread */
};

/* The option cuda_staging_threads; 0 means min(4, online CPUs). */
static int staging_threads(int opt) {
  if (opt > 0) return opt;
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n < 1 ? 1 : n > 4 ? 4 : (int)n;
}

dv_status dv__cu_staging_open(cu_state *st, const dv_backend_config *cfg) {
  dv_cu_staging *g = dv__calloc(1, sizeof *g);
  if (!g) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate the CUDA staging state");
  pthread_mutex_init(&g->lock, NULL);
  pthread_cond_init(&g->back, NULL);
  /* The option cuda_staging_chunk (DV_CUDA_STAGING_CHUNK), range-checked
   * by the options table; 0 only from a caller that filled no config. */
  g->chunk = cfg->cuda_staging_chunk ? cfg->cuda_staging_chunk : (size_t)4 << 20;
  /* No team (no memory for it) copies on one thread: not an error. */
  g->team = dv__copy_team_create(staging_threads(cfg->cuda_staging_threads), cfg->cuda_staging_thread_min);
  st->staging = g;
  return DV_OK;
}

size_t dv__cu_staging_chunk(cu_state *st) { return st->staging->chunk; }

/* After every stream of the context was synchronized. */
void dv__cu_staging_close(cu_state *st) {
  dv_cu_staging *g = st->staging;
  if (!g) return;
  for (cu_stage *b = g->free_list, *n; b; b = n) {
    n = b->next;
    cu.cuMemFreeHost(b->ptr);
    dv__free(b);
  }
  dv__copy_team_destroy(g->team);
  pthread_cond_destroy(&g->back);
  pthread_mutex_destroy(&g->lock);
  dv__free(g);
  st->staging = NULL;
}


/* The caller's pieces still in flight (0 for a caller that does not count). */
static int inflight_now(int *inflight, pthread_mutex_t *count_lock) {
  if (!inflight) return 0;
  pthread_mutex_lock(count_lock);
  int n = *inflight;
  pthread_mutex_unlock(count_lock);
  return n;
}

/* A buffer of at least n bytes: from the free list, else a new one; a
 * synchronous copy with two of its own pieces in flight waits for a buffer
 * to come back.  The count is read again after every wake-up: the buffer
 * that came back may have gone to another thread while this copy's own
 * pieces finished, and then nothing more would wake it.  (Lock order:
 * g->lock, then count_lock; piece_done takes them one after the other.) */
static dv_status stage_get(cu_state *st, size_t n, int *inflight, pthread_mutex_t *count_lock,
                           bool may_wait, cu_stage **out) {
  dv_cu_staging *g = st->staging;
  *out = NULL;
  pthread_mutex_lock(&g->lock);
  for (;;) {
    for (cu_stage **pp = &g->free_list; *pp; pp = &(*pp)->next)
      if ((*pp)->size >= n) {
        *out = *pp;
        *pp = (*pp)->next;
        g->nfree--;
        pthread_mutex_unlock(&g->lock);
        return DV_OK;
      }
    if (!may_wait || inflight_now(inflight, count_lock) < 2) break;
    pthread_cond_wait(&g->back, &g->lock);
  }
  /* Trim what the free list holds beyond a few buffers (only here: host
   * functions may not call the driver). */
  cu_stage *drop = NULL;
  while (g->nfree > 4) {
    cu_stage *b = g->free_list;
    g->free_list = b->next;
    g->nfree--;
    b->next = drop;
    drop = b;
  }
  pthread_mutex_unlock(&g->lock);
  for (cu_stage *b = drop, *nx; b; b = nx) {
    nx = b->next;
    cu.cuMemFreeHost(b->ptr);
    dv__free(b);
  }
  cu_stage *b = dv__calloc(1, sizeof *b);
  if (!b) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate a staging record");
  size_t size = n < g->chunk ? g->chunk : n;
  dv_CUresult r = cu.cuMemHostAlloc(&b->ptr, size, DV_CU_MEMHOSTALLOC_PORTABLE);
  if (r) {
    dv__free(b);
    if (r == DV_CUDA_ERROR_OUT_OF_MEMORY)
      return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "CUDA cuMemHostAlloc of a %zu-byte staging buffer failed: out of page-locked memory", size);
    return cu_fail(r, "cuMemHostAlloc (staging)");
  }
  b->st = st;
  b->size = size;
  *out = b;
  return DV_OK;
}

static void stage_put(cu_stage *b) {
  dv_cu_staging *g = b->st->staging;
  pthread_mutex_lock(&g->lock);
  b->next = g->free_list;
  g->free_list = b;
  g->nfree++;
  pthread_cond_broadcast(&g->back);
  pthread_mutex_unlock(&g->lock);
}

/* One piece: k rows of w bytes; host rows hpitch apart, device rows dpitch apart. */
typedef struct cu_piece {
  cu_stage *b;
  char *host;
  size_t w, k, hpitch;
  int *inflight;
  pthread_mutex_t *count_lock;
} cu_piece;

static void piece_done(cu_piece *p) {
  if (p->inflight) {
    pthread_mutex_lock(p->count_lock);
    (*p->inflight)--;
    pthread_mutex_unlock(p->count_lock);
  }
  stage_put(p->b);
  dv__free(p);
}

static void h2d_done(dv_CUstream s, dv_CUresult status, void *arg) {
  (void)s, (void)status;
  piece_done(arg);
}

/* After a device error the staged bytes are not the device's: not copied out. */
static void d2h_done(dv_CUstream s, dv_CUresult status, void *arg) {
  (void)s;
  cu_piece *p = arg;
  if (status == DV_CUDA_SUCCESS)
    dv__copy_team_rows(p->b->st->staging->team, p->host, p->hpitch, p->b->ptr, p->w, p->w, p->k);
  piece_done(p);
}

/* Host to device when the stream still had work queued at the call: the
 * host rows go into the staging buffer when the stream gets here (earlier
 * work, a download into the same host memory say, may still write them).
 * After a device error nothing is copied: the DMA behind fails too. */
static void h2d_fill(dv_CUstream s, dv_CUresult status, void *arg) {
  (void)s;
  cu_piece *p = arg;
  if (status == DV_CUDA_SUCCESS)
    dv__copy_team_rows(p->b->st->staging->team, p->b->ptr, p->w, p->host, p->hpitch, p->w, p->k);
}

static dv_status piece_run(cu_state *st, dv_bstream *s, bool to_device, bool fill_later, char *host, size_t hpitch,
                           dv_CUdeviceptr dev, size_t dpitch, size_t w, size_t k, int *inflight,
                           pthread_mutex_t *count_lock, bool sync) {
  cu_piece *p = dv__calloc(1, sizeof *p);
  if (!p) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate a staging record");
  dv_status rc = stage_get(st, w * k, inflight, count_lock, sync, &p->b);
  if (rc) {
    dv__free(p);
    return rc;
  }
  p->host = host, p->w = w, p->k = k, p->hpitch = hpitch;
  char *b = p->b->ptr;
  dv_CUresult r;
  const char *what;
  if (to_device && fill_later) {
    r = cu.cuStreamAddCallback(s->s, h2d_fill, p, 0);
    if (r) {
      stage_put(p->b);
      dv__free(p);
      return cu_fail(r, "cuStreamAddCallback (staging)");
    }
  } else if (to_device) {
    dv__copy_team_rows(st->staging->team, b, w, host, hpitch, w, k);
  }
  if (k == 1) {
    what = to_device ? "cuMemcpyHtoDAsync" : "cuMemcpyDtoHAsync";
    r = to_device ? cu.cuMemcpyHtoDAsync_v2(dev, b, w, s->s) : cu.cuMemcpyDtoHAsync_v2(b, dev, w, s->s);
  } else {
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
    what = "cuMemcpy2DAsync";
    r = cu.cuMemcpy2DAsync_v2(&c, s->s);
  }
  if (!r) {
    if (inflight) {
      pthread_mutex_lock(count_lock);
      (*inflight)++;
      pthread_mutex_unlock(count_lock);
    }
    p->inflight = inflight, p->count_lock = count_lock;
    r = cu.cuStreamAddCallback(s->s, to_device ? h2d_done : d2h_done, p, 0);
    if (r) {
      /* The copy is queued but its completion cannot be: wait for it here. */
      dv_CUresult r2 = cu.cuStreamSynchronize(s->s);
      if (to_device) h2d_done(s->s, r2, p);
      else d2h_done(s->s, r2, p);
      return cu_fail(r, "cuStreamAddCallback (staging)");
    }
    return DV_OK;
  }
  if (to_device && fill_later) {
    /* The fill callback is queued and uses p: let the stream pass it. */
    dv_CUresult r2 = cu.cuStreamSynchronize(s->s);
    (void)r2;
  }
  stage_put(p->b);
  dv__free(p);
  return cu_fail(r, what);
}

dv_status dv__cu_copy_pageable(cu_state *st, dv_bstream *s, const dv_rect *r) {
  bool to_device = r->dst.buf != NULL;
  char *host = to_device ? (char *)r->src.ptr : (char *)r->dst.ptr;
  dv_CUdeviceptr dev = to_device ? cu_ptr(r->dst) : cu_ptr(r->src);
  size_t hpitch = to_device ? r->src_pitch : r->dst_pitch, dpitch = to_device ? r->dst_pitch : r->src_pitch;
  size_t hslice = to_device ? r->src_slice : r->dst_slice, dslice = to_device ? r->dst_slice : r->src_slice;
  bool sync = (r->flags & DV_COPY_SYNC) != 0;
  size_t chunk = st->staging->chunk;
  int inflight = 0;
  pthread_mutex_t count_lock = PTHREAD_MUTEX_INITIALIZER;
  dv_status rc = DV_OK;
  /* The host side is read in stream order.  With the stream idle at the
   * call nothing queued before this copy can still write the host rows, so
   * they are read now, overlapping the DMAs; else each piece's rows are
   * read by a stream callback ahead of its DMA (h2d_fill).  The legacy
   * default stream also waits for every blocking stream of the context,
   * which its own query does not tell: a synchronous copy (which waits for
   * them anyway) waits for the context first, an asynchronous one fills in
   * stream order. */
  bool fill_later = false;
  if (to_device) {
    if (s->s == NULL || s->s == DV_CU_STREAM_LEGACY)
      fill_later = !sync || cu.cuCtxSynchronize() != DV_CUDA_SUCCESS;
    else /* blocking streams (the per-thread one too) also wait for the legacy stream */
      fill_later = cu.cuStreamQuery(s->s) != DV_CUDA_SUCCESS ||
                   cu.cuStreamQuery(DV_CU_STREAM_LEGACY) != DV_CUDA_SUCCESS;
  }
  for (size_t z = 0; z < r->depth && !rc; z++) {
    char *hz = host + z * hslice;
    dv_CUdeviceptr dz = dev + z * dslice;
    if (r->width >= chunk || r->height == 1) {
      /* Rows one at a time, each in pieces of at most a chunk. */
      for (size_t y = 0; y < r->height && !rc; y++)
        for (size_t x = 0; x < r->width && !rc; x += chunk) {
          size_t w = r->width - x < chunk ? r->width - x : chunk;
          rc = piece_run(st, s, to_device, fill_later, hz + y * hpitch + x, 0, dz + y * dpitch + x, 0, w, 1,
                         sync ? &inflight : NULL, &count_lock, sync);
        }
    } else {
      size_t per = chunk / r->width;
      for (size_t y = 0; y < r->height && !rc; y += per) {
        size_t k = r->height - y < per ? r->height - y : per;
        rc = piece_run(st, s, to_device, fill_later, hz + y * hpitch, hpitch, dz + y * dpitch, dpitch, r->width, k,
                       sync ? &inflight : NULL, &count_lock, sync);
      }
    }
  }
  if (sync) {
    /* Also on failure: pieces already queued use this frame's counter. */
    dv_CUresult e = cu.cuStreamSynchronize(s->s);
    if (!rc && e) rc = cu_fail(e, "cuStreamSynchronize");
  }
  pthread_mutex_destroy(&count_lock);
  return rc;
}
