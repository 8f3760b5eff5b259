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
 *    at the call, else the stream's staging thread fills it after an event
 *    recorded at the call (the host rows are read in stream order, after a
 *    download into them say) while the stream waits for it; device to
 *    host, the staging thread copies each piece out after its DMA's event,
 *    and the stream waits for the last one; buffers come back through the
 *    thread (fam_stager.c: no callback, so nothing waits for another
 *    stream's callbacks, which the driver may serialize).  Where the driver
 *    lacks stream memory operations (or the thread cannot be made), stream
 *    callbacks do the same: h2d_fill, d2h_done, and buffers back after
 *    their DMA (cuStreamAddCallback, which runs after a device error too,
 *    with its status, so buffers always come back; cuLaunchHostFunc's
 *    would not).  Callbacks never call the driver (the reference forbids it).
 *
 * Buffers and their limit: fam_stagebuf.c.
 *
 * A stream capturing a CUDA graph cannot take this path (stream callbacks
 * cannot be captured, and the staging buffers' reuse is not in the graph):
 * cuda.c refuses such copies with DV_ERR_MISUSE before anything is queued.
 *
 * The host side of each piece is copied by the context's copy team
 * (fam_stagebuf.c); a team busy with another piece (a staging thread's
 * while the calling thread fills, say) leaves the other copier to copy
 * alone.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fam_stagebuf.h"
#include "fam_stager.h"

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

/* ---- asynchronous copies without staging threads: pieces completed by stream callbacks ---- */

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
  dv__cu_stage_put(g, p->b, driver_ok);
  dv__free(p);
  dv__cu_stagebuf_unref(g, driver_ok);
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
    dv__copy_team_rows(dv__cu_stage_team(p->g), p->host, p->hpitch, p->b->ptr, p->w, p->w, p->k);
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
    dv__copy_team_rows(dv__cu_stage_team(p->g), p->b->ptr, p->w, p->host, p->hpitch, p->w, p->k);
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
  dv_status rc = dv__cu_stage_get(g, w * k, false, 0, &p->b);
  if (rc) {
    dv__free(p);
    return rc;
  }
  p->g = g, p->host = host, p->w = w, p->k = k, p->hpitch = hpitch;
  dv__cu_stagebuf_ref(g); /* the piece's, until piece_done */
  dv_CUresult r;
  if (to_device && fill_later) {
    r = cu.cuStreamAddCallback(s->s, h2d_fill, p, 0);
    if (r) {
      piece_done(p, true);
      return cu_fail(r, DV_CU_E_cuStreamAddCallback, " (staging)");
    }
  } else if (to_device) {
    dv__copy_team_rows(dv__cu_stage_team(g), p->b->ptr, w, host, hpitch, w, k);
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
      dv__copy_team_rows(dv__cu_stage_team(g), host, hpitch, p->b->ptr, w, w, k);
    piece_done(p, true);
    if (!rc) rc = cu_fail(rq, DV_CU_E_cuStreamAddCallback, " (staging)");
  }
  return rc;
}

/* ---- asynchronous copies with a staging thread (fam_stager.c) --------------------------- */

/* One piece whose host side the stream's staging thread does: host to
 * device, filled by the thread once the copy's mark (pre) is done, or here
 * when the stream was idle (pre NULL); device to host, drained by the
 * thread after the DMA.  Buffers come back through the thread. */
static dv_status thread_piece(cu_state *st, dv_bstream *s, cu_stager *t, bool to_device, void *pre, char *host,
                              size_t hpitch, dv_CUdeviceptr dev, size_t dpitch, size_t w, size_t k) {
  dv_cu_staging *g = st->staging;
  cu_stage *b = NULL;
  dv_status rc = dv__cu_stage_get(g, w * k, false, 0, &b);
  if (rc) return rc;
  if ((rc = dv__cu_stage_event(st, b)) != DV_OK) {
    dv__cu_stage_put(g, b, true);
    return rc;
  }
  bool by_thread = to_device && pre;
  if (by_thread && (rc = dv__cu_stager_fill(st, s, t, pre, b, host, hpitch, w, k)) != DV_OK) {
    dv__cu_stager_put_back(t, b, false); /* after its fill, which may still run */
    return rc;
  }
  if (to_device && !by_thread) dv__copy_team_rows(dv__cu_stage_team(g), b->ptr, w, host, hpitch, w, k);
  dv_cu_entry what = DV_CU_E_NONE;
  dv_CUresult r = piece_dma(st, s, to_device, b->ptr, dev, dpitch, w, k, &what);
  if (r) {
    if (by_thread) dv__cu_stager_put_back(t, b, false);
    else dv__cu_stage_put(g, b, true); /* nothing queued uses it */
    return cu_fail(r, what, "");
  }
  dv_CUresult rr = cu.cuEventRecord(b->ev, s->s);
  if (rr) {
    /* The DMA is queued but cannot be waited for by its event. */
    cu.cuStreamSynchronize(s->s);
    rc = cu_fail(rr, DV_CU_E_cuEventRecord, " (staging)");
  }
  if (to_device) {
    dv__cu_stager_put_back(t, b, !rr);
    return rc;
  }
  if (dv__cu_stager_drain(t, b, !rr, host, hpitch, w, k) != DV_OK) {
    /* No record for the thread: drained here. */
    if (!rr && cu.cuEventSynchronize(b->ev) == DV_CUDA_SUCCESS)
      dv__copy_team_rows(dv__cu_stage_team(g), host, hpitch, b->ptr, w, w, k);
    dv__cu_stage_put(g, b, true);
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
  dv_CUresult r = dv__cu_stage_driver(g)->api->cuEventSynchronize(o->b->ev);
  if (!r && !to_device) dv__copy_team_rows(dv__cu_stage_team(g), o->host, o->hpitch, o->b->ptr, o->w, o->w, o->k);
  if (!r && reuse && o->b->size >= need) *reuse = o->b;
  else dv__cu_stage_put(g, o->b, true);
  o->b = NULL;
  y->head ^= 1;
  y->n--;
  return r ? dv__cu_fail(dv__cu_stage_driver(g), r, DV_CU_E_cuEventSynchronize, " (staging)") : DV_OK;
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
    rc = dv__cu_stage_get(g, w * k, true, y->n, &b);
    if (rc == DV_ERR_NOT_READY) rc = sync_oldest(g, y, to_device, &b, w * k);
    if (rc) return rc;
  }
  dv_CUresult r = b->ev ? DV_CUDA_SUCCESS : cu.cuEventCreate(&b->ev, DV_CU_EVENT_DISABLE_TIMING);
  if (r) {
    b->ev = NULL;
    dv__cu_stage_put(g, b, true);
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
      dv__cu_stage_put(g, b, true);
      return cu_fail_in(r, "waiting for the stream before a staged copy", DV_CU_E_cuEventRecord,
                        DV_CU_E_cuEventSynchronize);
    }
    y->waited = true;
  }
  if (to_device) dv__copy_team_rows(dv__cu_stage_team(g), b->ptr, w, host, hpitch, w, k);
  dv_cu_entry what = DV_CU_E_NONE;
  r = piece_dma(st, s, to_device, b->ptr, dev, dpitch, w, k, &what);
  if (r) {
    dv__cu_stage_put(g, b, true);
    return cu_fail(r, what, "");
  }
  r = cu.cuEventRecord(b->ev, s->s);
  if (r) {
    /* The DMA is queued but cannot be waited for by its event. */
    dv_CUresult r2 = cu.cuStreamSynchronize(s->s);
    if (!r2 && !to_device) dv__copy_team_rows(dv__cu_stage_team(g), host, hpitch, b->ptr, w, w, k);
    dv__cu_stage_put(g, b, true);
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
  size_t chunk = dv__cu_stage_chunk(g);
  dv__cu_stage_trim(g);
  cu_sync y;
  memset(&y, 0, sizeof y);
  bool fill_later = to_device && !sync && !fill_at_call(st, s);
  dv_status rc = DV_OK;
  /* Asynchronous: the stream's staging thread where the driver allows it
   * (else, or when it cannot be made, stream callbacks). */
  cu_stager *t = !sync && dv__cu_stager_on(st) ? dv__cu_stager_begin(st, s) : NULL;
  void *pre = NULL;
  if (t && fill_later) rc = dv__cu_stager_mark(st, s, t, &pre);
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
             : t  ? thread_piece(st, s, t, to_device, pre, h, hp, d, dp, w, k)
                  : async_piece(st, s, to_device, fill_later, h, hp, d, dp, w, k);
      }
    }
  }
  /* Also on failure: the pieces in flight use their buffers. */
  while (y.n) {
    dv_status e = sync_oldest(g, &y, to_device, NULL, 0);
    if (!rc) rc = e;
  }
  if (t) {
    /* Device to host: later work on the stream waits for the drains queued
     * (those of a failed copy too: their rows were written). */
    dv_status e = to_device ? DV_OK : dv__cu_stager_order(st, s, t);
    if (!rc) rc = e;
    dv__cu_stager_end(t);
  }
  return rc;
}

dv_status dv__cu_staging_open(cu_state *st, const dv_backend_config *cfg) {
  dv_status rc = dv__cu_stagebuf_open(st, cfg);
  if (!rc && (rc = dv__cu_stagers_open(st)) != DV_OK) dv__cu_stagebuf_close(st);
  return rc;
}

/* After every stream of the context was synchronized: the staging threads
 * end first (they give buffers back), then the buffers go. */
void dv__cu_staging_close(cu_state *st) {
  dv__cu_stagers_close(st);
  dv__cu_stagebuf_close(st);
}
