/*
 * The OpenCL backend's streams (in-order command queues) and host
 * callbacks, which run on a thread of the context's own (started at open,
 * stopped at close), never inside an OpenCL call.
 */
#include <sched.h>

#include "opencl_internal.h"

#if DV_HAVE_OPENCL_HEADERS

/* ---- streams ------------------------------------------------------------------------ */

dv_status dv__clb_stream_create(void *state, unsigned flags, dv_bstream **out) {
  cl_state *st = state;
  (void)flags;
  *out = NULL;
  dv_bstream *s = dv__calloc(1, sizeof *s);
  if (!s) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate a stream");
  cl_int e;
  s->q = cl.clCreateCommandQueue(st->ctx, st->device, CL_QUEUE_PROFILING_ENABLE, &e);
  if (!s->q) {
    dv__free(s);
    return dv__clk_fail(e, "clCreateCommandQueue");
  }
  pthread_mutex_init(&s->m, NULL);
  pthread_mutex_lock(&st->lock);
  s->next = st->streams;
  st->streams = s;
  pthread_mutex_unlock(&st->lock);
  *out = s;
  return DV_OK;
}

dv_status dv__clb_stream_destroy(void *state, dv_bstream *s) {
  cl_state *st = state;
  pthread_mutex_lock(&st->lock);
  for (dv_bstream **p = &st->streams; *p; p = &(*p)->next)
    if (*p == s) {
      *p = s->next;
      break;
    }
  pthread_mutex_unlock(&st->lock);
  cl_int e = cl.clFinish(s->q);
  cl_int e2 = cl.clReleaseCommandQueue(s->q);
  if (s->last) cl.clReleaseEvent(s->last);
  for (int i = 0; i < s->nmarks; i++) cl.clReleaseEvent(s->marks[(s->mark0 + i) % CL_MARKS]);
  pthread_mutex_destroy(&s->m);
  dv__free(s);
  if (e) return dv__clk_fail(e, "clFinish");
  if (e2) return dv__clk_fail(e2, "clReleaseCommandQueue");
  return DV_OK;
}

dv_status dv__cl_sync_all(cl_state *st) {
  /* Queues are only destroyed through the context, never while a sync of
   * the whole device runs on another thread of the same context's owner;
   * hold the lock while finishing each queue. */
  dv_status first = DV_OK;
  pthread_mutex_lock(&st->lock);
  for (dv_bstream *s = st->streams; s; s = s->next) {
    atomic_store(&s->untracked, false);
    cl_int e = cl.clFinish(s->q);
    if (e && !first) first = dv__clk_fail(e, "clFinish");
  }
  pthread_mutex_unlock(&st->lock);
  return first;
}

dv_status dv__clb_stream_sync(void *state, dv_bstream *s) {
  if (!s) return dv__cl_sync_all(state);
  /* Everything queued so far is done when clFinish returns; a launch queued
   * meanwhile sets the flag again. */
  atomic_store(&s->untracked, false);
  CL_TRY(cl.clFinish(s->q), "clFinish");
  return DV_OK;
}

dv_status dv__clb_stream_query(void *state, dv_bstream *s) {
  (void)state;
  cl_int status = CL_COMPLETE, e = CL_SUCCESS;
  bool native = atomic_load(&s->native);
  if (native || atomic_exchange(&s->untracked, false)) {
    /* Work we did not track (the caller's own on a native queue, or
     * launches queued without events): ask a fresh marker.  For a native
     * queue give it a moment to pass an idle queue (the answer may still be
     * NOT_READY just after the work is done). */
    cl_event ev;
    CL_TRY(cl.clEnqueueMarkerWithWaitList(s->q, 0, NULL, &ev), "clEnqueueMarkerWithWaitList");
    cl.clFlush(s->q);
    for (int i = 0; native && i < 100; i++) {
      if (cl.clGetEventInfo(ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, NULL) != CL_SUCCESS ||
          status <= CL_COMPLETE)
        break;
      sched_yield();
    }
    cl_track(s, ev);
  }
  pthread_mutex_lock(&s->m);
  if (s->last) e = cl.clGetEventInfo(s->last, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, NULL);
  pthread_mutex_unlock(&s->m);
  if (e) return dv__clk_fail(e, "clGetEventInfo");
  if (status < 0) return dv__clk_fail(status, "a queued command");
  return status == CL_COMPLETE ? DV_OK : DV_ERR_NOT_READY;
}

/* ---- host callbacks --------------------------------------------------------------- */

typedef struct cl_cb {
  dv_bcallback_fn fn;
  void *user;
  cl_event gate; /* user event the queue's barrier waits on */
  dv_status status;
  cl_state *st;
  struct cl_cb *next;
} cl_cb;

/* OpenCL's callback: hand the work to the callback thread and return. */
static void CL_CALLBACK cl_cb_trampoline(cl_event ev, cl_int status, void *arg) {
  (void)ev;
  cl_cb *c = arg;
  cl_state *st = c->st;
  c->status = status == CL_COMPLETE ? DV_OK : dv__cl_status(status);
  c->next = NULL;
  pthread_mutex_lock(&st->cb_m);
  if (st->cb_tail) st->cb_tail->next = c;
  else st->cb_head = c;
  st->cb_tail = c;
  pthread_cond_signal(&st->cb_cv);
  pthread_mutex_unlock(&st->cb_m);
}

static void *cl_cb_worker(void *arg) {
  cl_state *st = arg;
  pthread_mutex_lock(&st->cb_m);
  for (;;) {
    while (!st->cb_head && !st->cb_stop) pthread_cond_wait(&st->cb_cv, &st->cb_m);
    cl_cb *c = st->cb_head;
    if (!c) break;
    st->cb_head = c->next;
    if (!st->cb_head) st->cb_tail = NULL;
    pthread_mutex_unlock(&st->cb_m);
    c->fn(c->user, c->status);
    cl.clSetUserEventStatus(c->gate, CL_COMPLETE); /* later commands may go on */
    cl.clReleaseEvent(c->gate);
    dv__free(c);
    pthread_mutex_lock(&st->cb_m);
  }
  pthread_mutex_unlock(&st->cb_m);
  return NULL;
}

/* The context's callback thread (clb_open, clb_close). */
dv_status dv__cl_callbacks_start(cl_state *st) {
  pthread_mutex_init(&st->cb_m, NULL);
  pthread_cond_init(&st->cb_cv, NULL);
  if (pthread_create(&st->cb_thread, NULL, cl_cb_worker, st) != 0) {
    pthread_mutex_destroy(&st->cb_m);
    pthread_cond_destroy(&st->cb_cv);
    return dv__error(DV_ERR_DRIVER, "cannot start the OpenCL callback thread");
  }
  return DV_OK;
}

void dv__cl_callbacks_stop(cl_state *st) {
  pthread_mutex_lock(&st->cb_m);
  st->cb_stop = true;
  pthread_cond_signal(&st->cb_cv);
  pthread_mutex_unlock(&st->cb_m);
  pthread_join(st->cb_thread, NULL);
  pthread_mutex_destroy(&st->cb_m);
  pthread_cond_destroy(&st->cb_cv);
}

dv_status dv__clb_stream_callback(void *state, dv_bstream *s, dv_bcallback_fn fn, void *user) {
  cl_state *st = state;
  cl_cb *c = dv__malloc(sizeof *c);
  if (!c) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate a callback record");
  cl_int e;
  c->fn = fn, c->user = user, c->st = st;
  c->gate = cl.clCreateUserEvent(st->ctx, &e);
  if (!c->gate) {
    dv__free(c);
    return dv__clk_fail(e, "clCreateUserEvent");
  }
  cl_event marker;
  e = cl.clEnqueueMarkerWithWaitList(s->q, 0, NULL, &marker);
  if (e) {
    cl.clReleaseEvent(c->gate);
    dv__free(c);
    return dv__clk_fail(e, "clEnqueueMarkerWithWaitList");
  }
  /* Later commands wait for the callback's user event. */
  cl_event barrier = NULL;
  e = cl.clEnqueueBarrierWithWaitList(s->q, 1, &c->gate, &barrier);
  if (e) {
    /* The marker is queued: complete the gate ourselves and drop the record. */
    cl.clSetUserEventStatus(c->gate, CL_COMPLETE);
    cl.clReleaseEvent(c->gate);
    cl.clReleaseEvent(marker);
    dv__free(c);
    return dv__clk_fail(e, "clEnqueueBarrierWithWaitList");
  }
  cl_track(s, barrier);
  e = cl.clSetEventCallback(marker, CL_COMPLETE, cl_cb_trampoline, c);
  cl.clReleaseEvent(marker);
  if (e) {
    cl.clSetUserEventStatus(c->gate, CL_COMPLETE);
    cl.clReleaseEvent(c->gate);
    dv__free(c);
    return dv__clk_fail(e, "clSetEventCallback");
  }
  cl.clFlush(s->q);
  return DV_OK;
}

#else
typedef int dv__opencl_stream_none; /* built without OpenCL headers: nothing here */
#endif /* DV_HAVE_OPENCL_HEADERS */
