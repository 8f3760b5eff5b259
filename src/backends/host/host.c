/*
 * The host simulator: a device model, not a stub.  This file: streams,
 * copies, events, host memory, open and close; device memory is host_mem.c.
 *
 *  - Device memory is host RAM owned by the simulator (never the caller's),
 *    bounded by a capacity (option host_memory), so out-of-memory and the
 *    pending-deallocation ratio limit are real.
 *  - Each stream is a worker thread executing its queue in order, so
 *    asynchronous work really happens later: a missing synchronize shows.
 *  - In checked mode allocations carry guard bytes on both sides; freed
 *    memory is poisoned and kept a while in a quarantine whose poison is
 *    checked, so stray writes (before, after or after-free) are reported as
 *    DV_ERR_CORRUPTION.  Fast mode checks a few canary bytes on each side
 *    of blocks kernels have used and reuses freed blocks (host_mem.c).
 *  - Copies are bounds-checked against their allocations when queued.
 *  - Faults can be injected: the k-th device allocation, copy or free fails.
 *  - Blocks are reference counted by the queued operations that use them, so
 *    memory freed while work is queued is reclaimed when that work is done.
 *  - Kernels (host_kernel.c and the files it names, fiber.c) are queued
 *    operations too (OP_KERNEL): compiled with the system C compiler, run by
 *    the stream's worker and a few helper threads, with the checks a GPU
 *    does not make.  A stream holds at most HB_KERNEL_QUEUE of them.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../../core/core.h"
#include "../backend.h"
#include "../../core/memops.h"

/* Launches a stream holds before it has run them: one more waits for the
 * stream to run one, as a GPU's launch queue makes it wait.  Each queued
 * launch keeps ~2 KiB (its record, argument lists, buffer references); with
 * no bound, 11,000 asynchronous launches ahead of a slower worker kept
 * ~22 MiB, which malloc then kept too (issue 22 #15). */
#define HB_KERNEL_QUEUE 1024


#include "host_mem.h"

typedef enum { OP_RECT, OP_STRIDED, OP_MEMSET, OP_CALLBACK, OP_RECORD, OP_WAIT, OP_KERNEL } hb_opkind;

struct dv_bevent {
  _Atomic int refs; /* owner + queued record/wait operations */
  pthread_mutex_t m;
  pthread_cond_t cv;
  uint64_t recorded, completed; /* generations */
  double t_ms;
  unsigned flags;
};

typedef struct hb_op {
  hb_opkind kind;
  struct hb_op *next;
  hb_block *b1, *b2; /* blocks the op holds a reference on */
  union {
    dv_rect rect;
    dv_strided strided;
    struct { dv_memref dst; int value; size_t bytes; } set;
    struct { dv_bcallback_fn fn; void *user; } cb;
    struct { dv_bevent *e; uint64_t gen; } ev;
    hk_job *kernel; /* host_kernel.c */
  } u;
} hb_op;

struct dv_bstream {
  hb_state *st;
  pthread_mutex_t m;
  pthread_cond_t cv_work, cv_done;
  hb_op *head, *tail;
  /* Operations queued / completed, and the first error since the last
   * synchronize: changed only under m, read without it by the synchronize
   * of an idle stream (hb_stream_sync's fast path). */
  _Atomic uint64_t queued, done;
  bool stop;
  int kernels; /* OP_KERNEL queued and not finished (HB_KERNEL_QUEUE) */
  /* The stream's claim word: CLAIM_INLINE while a synchronous op runs on
   * its caller's thread, plus CLAIM_OP per queued operation not finished and
   * CLAIM_WAITER per thread waiting in hb_stream_sync.  An idle stream (0)
   * is claimed for an inline op with one compare-and-swap; the ops and
   * waiters are added under m, so the inline op's release takes m only
   * when one of them came meanwhile. */
  _Atomic uint32_t claim;
  int waiters;           /* threads in hb_stream_sync (an inline op wakes only them) */
  _Atomic dv_status error; /* first error since the last synchronize */
  char errmsg[768];      /* its detail message */
  pthread_t thread;
};

static double hb_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* ---- host memory ---------------------------------------------------------- */

typedef struct hb_host {
  void *ptr;
  bool owned;
  hb_block *alias; /* device view when mapped */
} hb_host;

static dv_status hb_host_alloc(void *state, size_t bytes, unsigned flags, void **handle,
                               void **ptr, void **dev_buf) {
  hb_state *st = state;
  *handle = *ptr = NULL;
  if (dev_buf) *dev_buf = NULL;
  hb_host *h = dv__calloc(1, sizeof *h);
  void *p = h ? dv__malloc(bytes) : NULL;
  hb_block *alias = NULL;
  if (p && (flags & DV_HOSTMEM_MAPPED)) alias = hb_alias_new(st, p, bytes);
  if (!h || !p || ((flags & DV_HOSTMEM_MAPPED) && !alias)) {
    dv__free(p);
    dv__free(h);
    return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate %zu bytes of pinned host memory", bytes);
  }
  h->ptr = p;
  h->owned = true;
  h->alias = alias;
  *handle = h;
  *ptr = p;
  if (dev_buf) *dev_buf = alias;
  return DV_OK;
}

static _Thread_local bool hb_in_worker;
static dv_status hb_stream_sync(void *state, dv_bstream *s);

/* Like cuMemFreeHost, releasing host memory first waits for queued work, so
 * an asynchronous copy never reads freed memory.  (Not from a worker thread,
 * where waiting would deadlock: callbacks must not drop the last reference
 * to host memory still used by queued work.) */
static dv_status hb_host_release(hb_state *st, hb_host *h) {
  if (!h) return dv__error(DV_ERR_INVALID_ARGUMENT, "NULL host-memory handle");
  if (!hb_in_worker) hb_stream_sync(st, NULL);
  if (h->alias) {
    atomic_store(&h->alias->freed, true);
    hb_block_unref(h->alias);
  }
  if (h->owned) dv__free(h->ptr);
  dv__free(h);
  return DV_OK;
}

static dv_status hb_host_free(void *state, void *handle) {
  return hb_host_release(state, handle);
}

static dv_status hb_host_register(void *state, void *ptr, size_t bytes, unsigned flags,
                                  void **handle, void **dev_buf) {
  hb_state *st = state;
  *handle = NULL;
  if (dev_buf) *dev_buf = NULL;
  if (!ptr || !bytes) return dv__error(DV_ERR_INVALID_ARGUMENT, "register of an empty range");
  hb_host *h = dv__calloc(1, sizeof *h);
  hb_block *alias = (h && (flags & DV_HOSTMEM_MAPPED)) ? hb_alias_new(st, ptr, bytes) : NULL;
  if (!h || ((flags & DV_HOSTMEM_MAPPED) && !alias)) {
    dv__free(h);
    return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate a registration record");
  }
  h->ptr = ptr;
  h->alias = alias;
  *handle = h;
  if (dev_buf) *dev_buf = alias;
  return DV_OK;
}

static dv_status hb_host_unregister(void *state, void *handle) {
  return hb_host_release(state, handle);
}

/* ---- streams -------------------------------------------------------------- */

static void hb_event_unref(dv_bevent *e) {
  if (e && atomic_fetch_sub(&e->refs, 1) == 1) {
    pthread_mutex_destroy(&e->m);
    pthread_cond_destroy(&e->cv);
    free(e);
  }
}

static unsigned char *hb_addr(dv_memref r) {
  return r.buf ? ((hb_block *)r.buf)->data + r.offset : (unsigned char *)r.ptr;
}

static void hb_execute(dv_bstream *s, hb_op *op) {
  switch (op->kind) {
    case OP_RECT: {
      const dv_rect *r = &op->u.rect;
      if (r->height == 1 && r->depth == 1) { /* one run (dense copies) */
        memmove(hb_addr(r->dst), hb_addr(r->src), r->width);
        break;
      }
      dv__rect_copy(hb_addr(r->dst), r->dst_pitch, r->dst_slice, hb_addr(r->src), r->src_pitch,
                    r->src_slice, r->width, r->height, r->depth);
      break;
    }
    case OP_STRIDED: {
      const dv_strided *c = &op->u.strided;
      dv__strided_copy(hb_addr(c->dst), c->dst_strides, hb_addr(c->src), c->src_strides, c->shape,
                       c->nd, c->itemsize);
      break;
    }
    case OP_MEMSET:
      memset(hb_addr(op->u.set.dst), op->u.set.value, op->u.set.bytes);
      break;
    case OP_CALLBACK: {
      pthread_mutex_lock(&s->m);
      dv_status err = s->error;
      pthread_mutex_unlock(&s->m);
      op->u.cb.fn(op->u.cb.user, err);
      break;
    }
    case OP_RECORD: {
      dv_bevent *e = op->u.ev.e;
      pthread_mutex_lock(&e->m);
      if (e->completed < op->u.ev.gen) {
        e->completed = op->u.ev.gen;
        e->t_ms = hb_now_ms();
      }
      pthread_cond_broadcast(&e->cv);
      pthread_mutex_unlock(&e->m);
      break;
    }
    case OP_WAIT: {
      dv_bevent *e = op->u.ev.e;
      pthread_mutex_lock(&e->m);
      while (e->completed < op->u.ev.gen) pthread_cond_wait(&e->cv, &e->m);
      pthread_mutex_unlock(&e->m);
      break;
    }
    case OP_KERNEL: {
      /* A kernel fault is the stream's error, like a failed copy on a GPU:
       * the next synchronize returns it (and its message). */
      char msg[sizeof s->errmsg];
      msg[0] = 0;
      dv_status rc = hk_run(op->u.kernel, msg, sizeof msg);
      if (rc) {
        pthread_mutex_lock(&s->m);
        if (!s->error) {
          s->error = rc;
          snprintf(s->errmsg, sizeof s->errmsg, "%s", msg);
        }
        pthread_mutex_unlock(&s->m);
      }
      break;
    }
  }
}

/* Drop what a finished operation holds (its record itself stays). */
static void hb_op_release(hb_op *op) {
  dv_status r1 = hb_block_unref(op->b1), r2 = hb_block_unref(op->b2);
  (void)r1;
  (void)r2; /* corruption is logged and counted by the block itself */
  if (op->kind == OP_RECORD || op->kind == OP_WAIT) hb_event_unref(op->u.ev.e);
  if (op->kind == OP_KERNEL) hk_launch_free(op->u.kernel);
}

static void hb_op_finish(hb_op *op) {
  hb_op_release(op);
  dv__free(op);
}

/* A stream counter, changed under the stream's lock only: no atomic
 * read-modify-write needed, only a release store for lock-free readers. */
static inline void hb_bump(_Atomic uint64_t *c) {
  atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + 1, memory_order_release);
}

/* Device-wide count of queued operations: atomic, so that queuing and
 * finishing work take no device-wide lock.  The lock is taken only when the
 * count reaches zero, to wake device-wide synchronizes (which test the count
 * under it, so no wake-up is lost). */
static void hb_outstanding_add(hb_state *st) { atomic_fetch_add(&st->outstanding, 1); }
static void hb_outstanding_done(hb_state *st) {
  /* Both sides use sequentially consistent atomics: a waiter counts itself
   * then reads the count, we drop the count then read the waiters, so at
   * least one of us sees the other. */
  if (atomic_fetch_sub(&st->outstanding, 1) == 1 && atomic_load(&st->idle_waiters)) {
    pthread_mutex_lock(&st->idle_m);
    pthread_cond_broadcast(&st->idle_cv);
    pthread_mutex_unlock(&st->idle_m);
  }
}

#define CLAIM_INLINE 1u
#define CLAIM_OP 2u
#define CLAIM_WAITER (1u << 24)

static void *hb_worker(void *arg) {
  dv_bstream *s = arg;
  hb_state *st = s->st;
  hb_in_worker = true;
  pthread_mutex_lock(&s->m);
  for (;;) {
    while ((!s->head || (atomic_load(&s->claim) & CLAIM_INLINE)) && !(s->stop && !s->head))
      pthread_cond_wait(&s->cv_work, &s->m);
    if (!s->head) break; /* stop requested and queue drained */
    hb_op *op = s->head;
    pthread_mutex_unlock(&s->m);
    if (st->delay_us > 0) usleep((useconds_t)st->delay_us);
    hb_execute(s, op);
    pthread_mutex_lock(&s->m);
    s->head = op->next;
    if (!s->head) s->tail = NULL;
    if (op->kind == OP_KERNEL) s->kernels--;
    hb_bump(&s->done);
    atomic_fetch_sub(&s->claim, CLAIM_OP);
    pthread_cond_broadcast(&s->cv_done);
    pthread_mutex_unlock(&s->m);
    hb_op_finish(op);
    hb_outstanding_done(st);
    pthread_mutex_lock(&s->m);
  }
  pthread_mutex_unlock(&s->m);
  hk_thread_exit(); /* the kernel executor this thread may have set up */
  return NULL;
}

/* An operation record sized for its kind's payload (a strided copy's
 * record is ~840 bytes, every other kind's at most ~100): only the header
 * is set, the caller fills the payload. */
static size_t hb_op_size(hb_opkind kind) {
  size_t payload;
  switch (kind) {
    case OP_RECT: payload = sizeof(dv_rect); break;
    case OP_STRIDED: payload = sizeof(dv_strided); break;
    case OP_MEMSET: payload = sizeof(((hb_op *)0)->u.set); break;
    case OP_CALLBACK: payload = sizeof(((hb_op *)0)->u.cb); break;
    case OP_RECORD:
    case OP_WAIT: payload = sizeof(((hb_op *)0)->u.ev); break;
    default: payload = sizeof(hk_job *); break;
  }
  return offsetof(hb_op, u) + payload;
}

static hb_op *hb_op_new(hb_opkind kind) {
  hb_op *op = dv__malloc(hb_op_size(kind));
  if (op) op->kind = kind, op->next = NULL, op->b1 = op->b2 = NULL;
  return op;
}

static void hb_enqueue(dv_bstream *s, hb_op *op) {
  hb_outstanding_add(s->st);
  pthread_mutex_lock(&s->m);
  if (op->kind == OP_KERNEL) {
    /* A stream's full launch queue: wait for the worker (never on a
     * worker, which may be the one to wait for). */
    while (s->kernels >= HB_KERNEL_QUEUE && !hb_in_worker) pthread_cond_wait(&s->cv_done, &s->m);
    s->kernels++;
  }
  op->next = NULL;
  if (s->tail)
    s->tail->next = op;
  else
    s->head = op;
  s->tail = op;
  hb_bump(&s->queued);
  atomic_fetch_add(&s->claim, CLAIM_OP);
  pthread_cond_signal(&s->cv_work);
  pthread_mutex_unlock(&s->m);
}

static dv_status hb_stream_create(void *state, unsigned flags, dv_bstream **out) {
  (void)flags;
  *out = NULL;
  dv_bstream *s = dv__calloc(1, sizeof *s);
  if (!s) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate a stream");
  s->st = state;
  pthread_mutex_init(&s->m, NULL);
  pthread_cond_init(&s->cv_work, NULL);
  pthread_cond_init(&s->cv_done, NULL);
  int e = pthread_create(&s->thread, NULL, hb_worker, s);
  if (e) {
    pthread_mutex_destroy(&s->m);
    pthread_cond_destroy(&s->cv_work);
    pthread_cond_destroy(&s->cv_done);
    dv__free(s);
    return dv__error(DV_ERR_DRIVER, "host simulator: cannot start a stream thread: %s", strerror(e));
  }
  *out = s;
  return DV_OK;
}

static dv_status hb_stream_destroy(void *state, dv_bstream *s) {
  (void)state;
  pthread_mutex_lock(&s->m);
  s->stop = true;
  pthread_cond_signal(&s->cv_work);
  pthread_mutex_unlock(&s->m);
  pthread_join(s->thread, NULL); /* the worker drains the queue first */
  pthread_mutex_destroy(&s->m);
  pthread_cond_destroy(&s->cv_work);
  pthread_cond_destroy(&s->cv_done);
  dv__free(s);
  return DV_OK;
}

static dv_status hb_stream_sync(void *state, dv_bstream *s) {
  hb_state *st = state;
  if (!s) {
    pthread_mutex_lock(&st->idle_m);
    atomic_fetch_add(&st->idle_waiters, 1);
    while (atomic_load(&st->outstanding)) pthread_cond_wait(&st->idle_cv, &st->idle_m);
    atomic_fetch_sub(&st->idle_waiters, 1);
    pthread_mutex_unlock(&st->idle_m);
    return DV_OK;
  }
  /* An idle stream without an error (the usual state after a synchronous
   * copy ran on the caller's thread) needs no lock: no operation is queued
   * or running when the claim word is 0. */
  if (atomic_load(&s->claim) == 0 && atomic_load_explicit(&s->error, memory_order_acquire) == DV_OK)
    return DV_OK;
  pthread_mutex_lock(&s->m);
  uint64_t target = s->queued;
  s->waiters++;
  atomic_fetch_add(&s->claim, CLAIM_WAITER); /* no new inline op starts while we wait */
  while (s->done < target || (atomic_load(&s->claim) & CLAIM_INLINE)) pthread_cond_wait(&s->cv_done, &s->m);
  atomic_fetch_sub(&s->claim, CLAIM_WAITER);
  s->waiters--;
  dv_status err = s->error;
  s->error = DV_OK;
  char msg[sizeof s->errmsg];
  if (err) snprintf(msg, sizeof msg, "%s", s->errmsg);
  pthread_mutex_unlock(&s->m);
  if (err) return dv__error(err, "%s", msg);
  return err;
}

static dv_status hb_stream_query(void *state, dv_bstream *s) {
  (void)state;
  pthread_mutex_lock(&s->m);
  bool idle = s->done == s->queued && !(atomic_load(&s->claim) & CLAIM_INLINE);
  pthread_mutex_unlock(&s->m);
  return idle ? DV_OK : DV_ERR_NOT_READY;
}

static dv_status hb_stream_callback(void *state, dv_bstream *s, dv_bcallback_fn fn, void *user) {
  (void)state;
  hb_op *op = hb_op_new(OP_CALLBACK);
  if (!op) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot queue a callback");
  op->u.cb.fn = fn;
  op->u.cb.user = user;
  hb_enqueue(s, op);
  return DV_OK;
}

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

/* Release an inline claim.  Wake the worker and waiters only when work or
 * a waiter came meanwhile (they are added to the claim word under m, so
 * none is missed). */
static void hb_claim_release(dv_bstream *s) {
  if (atomic_fetch_sub(&s->claim, CLAIM_INLINE) != CLAIM_INLINE) {
    pthread_mutex_lock(&s->m);
    if (s->waiters) pthread_cond_broadcast(&s->cv_done);
    if (s->head) pthread_cond_signal(&s->cv_work);
    pthread_mutex_unlock(&s->m);
  }
}

/* A synchronous operation on an idle stream runs on the calling thread:
 * the caller would only wait for the worker anyway, and this saves the
 * thread hand-off (tens of microseconds).  The stream is claimed with one
 * compare-and-swap of its claim word (0: nothing queued, running or
 * waiting); order is kept, as work queued meanwhile by other threads waits
 * for the claim's release.  The operation holds no block references (the
 * caller's arrays hold the memory for the length of the call) and is not
 * counted in queued/done or the device-wide count: it is finished before
 * the call that issued it returns. */
static bool hb_try_inline(dv_bstream *s, hb_op *op) {
  hb_state *st = s->st;
  uint32_t idle = 0;
  if (!atomic_compare_exchange_strong(&s->claim, &idle, CLAIM_INLINE)) return false;
  if (st->delay_us > 0) usleep((useconds_t)st->delay_us);
  hb_execute(s, op);
  hb_claim_release(s);
  return true;
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

static dv_status hb_copy_rect(void *state, dv_bstream *s, const dv_rect *r) {
  dv_status rc = hb_fault_copy(state);
  if (rc) return rc;
  if (!r->width || !r->height || !r->depth) return DV_OK;
  if ((r->flags & DV_COPY_SYNC) && r->height == 1 && r->depth == 1 && !((hb_state *)state)->delay_us) {
    /* one synchronous run (a dense copy): run here when both sides are in
     * range and the stream is idle, without an operation record (anything
     * else goes the general way, which also words the errors) */
    uint32_t idle = 0;
    if (hb_run_ok(&r->src, r->width) && hb_run_ok(&r->dst, r->width) &&
        atomic_compare_exchange_strong(&s->claim, &idle, CLAIM_INLINE)) {
      memmove(hb_addr(r->dst), hb_addr(r->src), r->width);
      hb_claim_release(s);
      return DV_OK;
    }
  }
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

static dv_status hb_copy_strided(void *state, dv_bstream *s, const dv_strided *c) {
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

static dv_status hb_memset(void *state, dv_bstream *s, dv_memref dst, int value, size_t bytes) {
  (void)state;
  if (!bytes) return DV_OK;
  hb_op t, *op = &t;
  t.kind = OP_MEMSET;
  op->u.set.dst = dst;
  op->u.set.value = value;
  op->u.set.bytes = bytes;
  return hb_queue_checked(s, op, 0, (dv_memref){0}, 0, 0, dst, 0, (int64_t)bytes);
}

/* ---- events --------------------------------------------------------------- */

static dv_status hb_event_create(void *state, unsigned flags, dv_bevent **out) {
  (void)state;
  dv_bevent *e = dv__calloc(1, sizeof *e);
  if (!e) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate an event");
  pthread_mutex_init(&e->m, NULL);
  pthread_cond_init(&e->cv, NULL);
  atomic_store(&e->refs, 1);
  e->flags = flags;
  *out = e;
  return DV_OK;
}

static dv_status hb_event_destroy(void *state, dv_bevent *e) {
  (void)state;
  hb_event_unref(e);
  return DV_OK;
}

static dv_status hb_event_op(dv_bstream *s, dv_bevent *e, hb_opkind kind) {
  hb_op *op = hb_op_new(kind);
  if (!op) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot queue an event operation");
  pthread_mutex_lock(&e->m);
  op->u.ev.gen = kind == OP_RECORD ? ++e->recorded : e->recorded;
  pthread_mutex_unlock(&e->m);
  op->u.ev.e = e;
  atomic_fetch_add(&e->refs, 1);
  hb_enqueue(s, op);
  return DV_OK;
}

static dv_status hb_event_record(void *state, dv_bevent *e, dv_bstream *s) {
  (void)state;
  return hb_event_op(s, e, OP_RECORD);
}

static dv_status hb_event_wait(void *state, dv_bstream *s, dv_bevent *e) {
  (void)state;
  return hb_event_op(s, e, OP_WAIT);
}

static dv_status hb_event_query(void *state, dv_bevent *e) {
  (void)state;
  pthread_mutex_lock(&e->m);
  bool done = e->completed >= e->recorded;
  pthread_mutex_unlock(&e->m);
  return done ? DV_OK : DV_ERR_NOT_READY;
}

static dv_status hb_event_sync(void *state, dv_bevent *e) {
  (void)state;
  pthread_mutex_lock(&e->m);
  uint64_t target = e->recorded;
  while (e->completed < target) pthread_cond_wait(&e->cv, &e->m);
  pthread_mutex_unlock(&e->m);
  return DV_OK;
}

static dv_status hb_event_elapsed(void *state, dv_bevent *a, dv_bevent *b, float *ms) {
  (void)state;
  if (!(a->flags & DV_EVENT_TIMING) || !(b->flags & DV_EVENT_TIMING))
    return dv__error(DV_ERR_INVALID_ARGUMENT, "elapsed time needs two events created with DV_EVENT_TIMING");
  pthread_mutex_lock(&a->m);
  bool ra = a->recorded > 0 && a->completed >= a->recorded;
  double ta = a->t_ms;
  pthread_mutex_unlock(&a->m);
  pthread_mutex_lock(&b->m);
  bool rb = b->recorded > 0 && b->completed >= b->recorded;
  double tb = b->t_ms;
  pthread_mutex_unlock(&b->m);
  if (!ra || !rb) {
    if ((a->recorded == 0) || (b->recorded == 0))
      return dv__error(DV_ERR_MISUSE, "elapsed time of an event that was never recorded");
    return dv__error(DV_ERR_NOT_READY, "an event has not completed yet");
  }
  *ms = (float)(tb - ta);
  return DV_OK;
}

/* ---- the rest ------------------------------------------------------------- */

/* ---- for host_kernel.c (host_internal.h) ----------------------------------- */

static dv_status hb_enqueue_kernel(dv_bstream *s, hk_job *l) {
  hb_op *op = hb_op_new(OP_KERNEL);
  if (!op) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot queue a kernel launch");
  op->u.kernel = l;
  hb_enqueue(s, op);
  return DV_OK;
}

static const hk_services hb_services = {
    .block_unref = hb_block_unref,
    .guards_ok = hb_guards_ok,
    .guards_arm = hb_guards_arm,
    .alias_new = hb_alias_new,
    .enqueue = hb_enqueue_kernel,
    .copy_rect = hb_copy_rect,
};

static dv_status hb_probe(char *reason, size_t cap) {
  if (reason && cap) snprintf(reason, cap, "always available");
  return DV_OK;
}

static dv_status hb_open(const dv_backend_config *cfg, void **state) {
  *state = NULL;
  /* One device, 0: any other selector is refused, as the other backends
   * refuse a device they do not have. */
  const char *dev = cfg->device ? cfg->device : "";
  if (*dev) {
    char *end = NULL;
    errno = 0;
    long v = strtol(dev, &end, 10);
    if (errno || end == dev || *end || v < 0)
      return dv__error(DV_ERR_INVALID_ARGUMENT,
                       "host simulator device \"%s\" is not an ordinal (option device; its one "
                       "device is 0)", dev);
    if (v != 0)
      return dv__error(DV_ERR_BACKEND_UNAVAILABLE,
                       "no host simulator device %ld (it has one device, 0; option device)", v);
  }
  hb_state *st = dv__calloc(1, sizeof *st);
  if (!st) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate the host simulator");
  hb_mem_open(st, cfg);
  pthread_mutex_init(&st->idle_m, NULL);
  pthread_cond_init(&st->idle_cv, NULL);
  st->delay_us = cfg->host_delay_us;
  st->strided = cfg->host_strided != 0;
  atomic_store(&st->fault[DV_FAULT_COPY], cfg->fault_copy);
  dv_status rc = hk_open(st, cfg, &hb_services, &st->head.k);
  if (rc) {
    pthread_mutex_destroy(&st->idle_m);
    pthread_cond_destroy(&st->idle_cv);
    dv__free(st);
    return rc;
  }
  *state = st;
  return DV_OK;
}

static void hb_close(void *state) {
  hb_state *st = state;
  hb_stream_sync(st, NULL);
  hk_close(st->head.k); /* after the streams: queued launches have run */
  hb_mem_close(st);
  pthread_mutex_destroy(&st->idle_m);
  pthread_cond_destroy(&st->idle_cv);
  dv__free(st);
}

static dv_status hb_device_info(void *state, dv_device_info *out) {
  hb_state *st = state;
  snprintf(out->backend, sizeof out->backend, "host");
  snprintf(out->name, sizeof out->name, "devarray host simulator");
  snprintf(out->vendor, sizeof out->vendor, "devarray");
  snprintf(out->driver_version, sizeof out->driver_version, "%s", dv_version());
  out->total_memory = st->cap;
  out->max_allocation = st->cap;
  out->base_alignment = 256;
  out->can_map_host_memory = 1;
  out->managed_memory = 0;
  return DV_OK;
}

static dv_status hb_fault_inject(void *state, dv_fault_kind kind, uint64_t k) {
  hb_state *st = state;
  if ((unsigned)kind >= sizeof st->fault / sizeof st->fault[0])
    return dv__error(DV_ERR_INVALID_ARGUMENT, "unknown fault kind %d", (int)kind);
  atomic_store(&st->fault[kind], k);
  return DV_OK;
}

static int hb_fault_pending(void *state, dv_fault_kind kind) {
  hb_state *st = state;
  if ((unsigned)kind >= sizeof st->fault / sizeof st->fault[0]) return 0;
  return atomic_load(&st->fault[kind]) != 0;
}

/* dv_memory_trim: the blocks that queued work still holds come back to the
 * cache when that work ends, so wait for it first (the header promises that
 * trim returns what work that used the memory held); the internal trim of a
 * refused allocation (host_mem.c) does not wait. */
static dv_status hb_trim(void *state) {
  if (!hb_in_worker) hb_stream_sync(state, NULL);
  return hb_mem_trim(state);
}

const dv_backend dv__backend_host = {
    .version = DV_BACKEND_VERSION,
    .name = "host",
    .probe = hb_probe,
    .open = hb_open,
    .close = hb_close,
    .device_info = hb_device_info,
    .mem_alloc = hb_mem_alloc,
    .mem_free = hb_mem_free,
    .mem_info = hb_mem_info,
    .host_alloc = hb_host_alloc,
    .host_free = hb_host_free,
    .host_register = hb_host_register,
    .host_unregister = hb_host_unregister,
    .copy_rect = hb_copy_rect,
    .copy_strided = hb_copy_strided,
    .memset = hb_memset,
    .stream_create = hb_stream_create,
    .stream_destroy = hb_stream_destroy,
    .stream_sync = hb_stream_sync,
    .stream_query = hb_stream_query,
    .stream_callback = hb_stream_callback,
    .event_create = hb_event_create,
    .event_destroy = hb_event_destroy,
    .event_record = hb_event_record,
    .event_wait = hb_event_wait,
    .event_query = hb_event_query,
    .event_sync = hb_event_sync,
    .event_elapsed = hb_event_elapsed,
    .fault_inject = hb_fault_inject,
    .fault_pending = hb_fault_pending,
    .check_memory = hb_check_memory,
    .managed_alloc = NULL,
    .stream_builtin = NULL,
    /* Version 3 (host_kernel.c). */
    .kernel_limits = hk_kernel_limits,
    .kernel_target_id = hk_kernel_target_id,
    .module_build = hk_module_build,
    .module_load = hk_module_load,
    .module_unload = hk_module_unload,
    .kernel_get = hk_kernel_get,
    .kernel_attrs = hk_kernel_attrs,
    .constant_write = hk_constant_write,
    .launch = hk_launch,
    .native_context = hk_native_context,
    .native_stream = hk_native_stream,
    .native_buffer = hk_native_buffer,
    .buffer_wrap = hk_buffer_wrap,
    .buffer_unwrap = hk_buffer_unwrap,
    .ipc_export = hb_ipc_export,
    .ipc_open = hb_ipc_open,
    .ipc_close = hb_ipc_close,
    /* Version 6. */
    .kernel_params = hk_kernel_params,
    /* Version 7. */
    .mem_trim = hb_trim,
};
