/*
 * The host simulator's streams: each a worker thread running its queue of
 * operations in order (copies, memsets, callbacks, event records and waits,
 * kernels), so asynchronous work really happens later and a missing
 * synchronize shows; the device-wide count of queued work; events.  Queued
 * operations hold references on the blocks they use.  Copies are queued by
 * copy.c; tasks (exec/'s launches) by hb_enqueue_task, opaque here.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../../../core/memops.h"
#include "device_internal.h"

static double hb_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static _Thread_local bool hb_in_worker;

bool hb_on_worker(void) { return hb_in_worker; }

/* ---- streams -------------------------------------------------------------- */

static void hb_event_unref(dv_bevent *e) {
  if (e && atomic_fetch_sub(&e->refs, 1) == 1) {
    pthread_mutex_destroy(&e->m);
    pthread_cond_destroy(&e->cv);
    free(e);
  }
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
    case OP_TASK: {
      /* A task's failure (a kernel fault) is the stream's error, like a failed copy on a GPU:
       * the next synchronize returns it (and its message). */
      char msg[sizeof s->errmsg];
      msg[0] = 0;
      dv_status rc = op->u.task.ops->run(op->u.task.task, msg, sizeof msg);
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
  if (op->kind == OP_TASK) op->u.task.ops->free(op->u.task.task);
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
    if (op->kind == OP_TASK) s->tasks--;
    hb_bump(&s->done);
    atomic_fetch_sub(&s->claim, CLAIM_OP);
    pthread_cond_broadcast(&s->cv_done);
    pthread_mutex_unlock(&s->m);
    hb_op_finish(op);
    hb_outstanding_done(st);
    pthread_mutex_lock(&s->m);
  }
  pthread_mutex_unlock(&s->m);
  return NULL;
}

/* An operation record sized for its kind's payload (a strided copy's
 * record is ~840 bytes, every other kind's at most ~100): only the header
 * is set, the caller fills the payload. */
size_t hb_op_size(hb_opkind kind) {
  size_t payload;
  switch (kind) {
    case OP_RECT: payload = sizeof(dv_rect); break;
    case OP_STRIDED: payload = sizeof(dv_strided); break;
    case OP_MEMSET: payload = sizeof(((hb_op *)0)->u.set); break;
    case OP_CALLBACK: payload = sizeof(((hb_op *)0)->u.cb); break;
    case OP_RECORD:
    case OP_WAIT: payload = sizeof(((hb_op *)0)->u.ev); break;
    default: payload = sizeof(((hb_op *)0)->u.task); break;
  }
  return offsetof(hb_op, u) + payload;
}

hb_op *hb_op_new(hb_opkind kind) {
  hb_op *op = dv__malloc(hb_op_size(kind));
  if (op) op->kind = kind, op->next = NULL, op->b1 = op->b2 = NULL;
  return op;
}

void hb_enqueue(dv_bstream *s, hb_op *op) {
  hb_outstanding_add(s->st);
  pthread_mutex_lock(&s->m);
  if (op->kind == OP_TASK) {
    /* A stream's full task queue: wait for the worker (never on a
     * worker, which may be the one to wait for). */
    while (s->tasks >= HB_TASK_QUEUE && !hb_in_worker) pthread_cond_wait(&s->cv_done, &s->m);
    s->tasks++;
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

dv_status hb_enqueue_task(dv_bstream *s, const hb_task_ops *ops, void *task) {
  hb_op *op = hb_op_new(OP_TASK);
  if (!op) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot queue a kernel launch");
  op->u.task.ops = ops;
  op->u.task.task = task;
  hb_enqueue(s, op);
  return DV_OK;
}

dv_status hb_stream_create(void *state, unsigned flags, dv_bstream **out) {
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

dv_status hb_stream_destroy(void *state, dv_bstream *s) {
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

dv_status hb_stream_sync(void *state, dv_bstream *s) {
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

dv_status hb_stream_query(void *state, dv_bstream *s) {
  (void)state;
  pthread_mutex_lock(&s->m);
  bool idle = s->done == s->queued && !(atomic_load(&s->claim) & CLAIM_INLINE);
  pthread_mutex_unlock(&s->m);
  return idle ? DV_OK : DV_ERR_NOT_READY;
}

dv_status hb_stream_callback(void *state, dv_bstream *s, dv_bcallback_fn fn, void *user) {
  (void)state;
  hb_op *op = hb_op_new(OP_CALLBACK);
  if (!op) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot queue a callback");
  op->u.cb.fn = fn;
  op->u.cb.user = user;
  hb_enqueue(s, op);
  return DV_OK;
}

/* ---- events --------------------------------------------------------------- */

dv_status hb_event_create(void *state, unsigned flags, dv_bevent **out) {
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

dv_status hb_event_destroy(void *state, dv_bevent *e) {
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

dv_status hb_event_record(void *state, dv_bevent *e, dv_bstream *s) {
  (void)state;
  return hb_event_op(s, e, OP_RECORD);
}

dv_status hb_event_wait(void *state, dv_bstream *s, dv_bevent *e) {
  (void)state;
  return hb_event_op(s, e, OP_WAIT);
}

dv_status hb_event_query(void *state, dv_bevent *e) {
  (void)state;
  pthread_mutex_lock(&e->m);
  bool done = e->completed >= e->recorded;
  pthread_mutex_unlock(&e->m);
  return done ? DV_OK : DV_ERR_NOT_READY;
}

dv_status hb_event_sync(void *state, dv_bevent *e) {
  (void)state;
  pthread_mutex_lock(&e->m);
  uint64_t target = e->recorded;
  while (e->completed < target) pthread_cond_wait(&e->cv, &e->m);
  pthread_mutex_unlock(&e->m);
  return DV_OK;
}

dv_status hb_event_elapsed(void *state, dv_bevent *a, dv_bevent *b, float *ms) {
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

/* ---- operations run on the caller's thread ----------------------------------- */

/* Release an inline claim.  Wake the worker and waiters only when work or
 * a waiter came meanwhile (they are added to the claim word under m, so
 * none is missed). */
void hb_claim_release(dv_bstream *s) {
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
bool hb_try_inline(dv_bstream *s, hb_op *op) {
  hb_state *st = s->st;
  if (!hb_claim_inline(s)) return false;
  if (st->delay_us > 0) usleep((useconds_t)st->delay_us);
  hb_execute(s, op);
  hb_claim_release(s);
  return true;
}

bool hb_task_try_inline(dv_bstream *s, const hb_task_ops *ops, void *task, char *msg, size_t cap,
                        dv_status *rc) {
  if (s->st->delay_us > 0 || !hb_claim_inline(s)) return false;
  /* An earlier error of the stream is the launch's to return, first (the
   * queued path's synchronize does that). */
  if (atomic_load(&s->error) != DV_OK) {
    hb_claim_release(s);
    return false;
  }
  *rc = ops->run(task, msg, cap);
  hb_claim_release(s);
  return true;
}
