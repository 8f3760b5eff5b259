/*
 * The OpenCL backend's events: an event is the marker of its last record
 * (with the queue's profiling, the times of elapsed).
 */
#include "opencl_internal.h"

#if DV_HAVE_OPENCL_HEADERS

/* ---- events --------------------------------------------------------------------------- */

dv_status dv__clb_event_create(void *state, unsigned flags, dv_bevent **out) {
  (void)state;
  dv_bevent *e = dv__calloc(1, sizeof *e);
  if (!e) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate an event");
  pthread_mutex_init(&e->m, NULL);
  e->flags = flags;
  *out = e;
  return DV_OK;
}

dv_status dv__clb_event_destroy(void *state, dv_bevent *e) {
  (void)state;
  if (e->ev) cl.clReleaseEvent(e->ev);
  pthread_mutex_destroy(&e->m);
  dv__free(e);
  return DV_OK;
}

dv_status dv__clb_event_record(void *state, dv_bevent *e, dv_bstream *s) {
  (void)state;
  cl_event ev;
  CL_TRY(cl.clEnqueueMarkerWithWaitList(s->q, 0, NULL, &ev), "clEnqueueMarkerWithWaitList");
  cl.clFlush(s->q);
  pthread_mutex_lock(&e->m);
  cl_event old = e->ev;
  e->ev = ev;
  pthread_mutex_unlock(&e->m);
  if (old) cl.clReleaseEvent(old);
  return DV_OK;
}

dv_status dv__clb_event_wait(void *state, dv_bstream *s, dv_bevent *e) {
  (void)state;
  cl_event ev = NULL;
  pthread_mutex_lock(&e->m);
  cl_int err = e->ev ? cl.clEnqueueBarrierWithWaitList(s->q, 1, &e->ev, &ev) : CL_SUCCESS;
  pthread_mutex_unlock(&e->m);
  if (err) return dv__clk_fail(err, "clEnqueueBarrierWithWaitList");
  if (ev) cl_track(s, ev);
  return DV_OK;
}

dv_status dv__clb_event_query(void *state, dv_bevent *e) {
  (void)state;
  pthread_mutex_lock(&e->m);
  cl_int status = CL_COMPLETE, err = CL_SUCCESS;
  if (e->ev) err = cl.clGetEventInfo(e->ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, NULL);
  pthread_mutex_unlock(&e->m);
  if (err) return dv__clk_fail(err, "clGetEventInfo");
  if (status < 0) return dv__clk_fail(status, "the recorded work");
  return status == CL_COMPLETE ? DV_OK : DV_ERR_NOT_READY;
}

dv_status dv__clb_event_sync(void *state, dv_bevent *e) {
  (void)state;
  pthread_mutex_lock(&e->m);
  cl_int err = e->ev ? cl.clWaitForEvents(1, &e->ev) : CL_SUCCESS;
  pthread_mutex_unlock(&e->m);
  if (err) return dv__clk_fail(err, "clWaitForEvents");
  return DV_OK;
}

dv_status dv__clb_event_elapsed(void *state, dv_bevent *a, dv_bevent *b, float *ms) {
  (void)state;
  if (!(a->flags & DV_EVENT_TIMING) || !(b->flags & DV_EVENT_TIMING))
    return dv__error(DV_ERR_INVALID_ARGUMENT, "elapsed time needs two events created with DV_EVENT_TIMING");
  pthread_mutex_lock(&a->m);
  pthread_mutex_lock(&b->m);
  dv_status rc = DV_OK;
  if (!a->ev || !b->ev) {
    rc = dv__error(DV_ERR_MISUSE, "elapsed time of an event that was never recorded");
  } else {
    cl_int sa = 0, sb = 0;
    cl.clGetEventInfo(a->ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof sa, &sa, NULL);
    cl.clGetEventInfo(b->ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof sb, &sb, NULL);
    if (sa != CL_COMPLETE || sb != CL_COMPLETE) {
      rc = dv__error(DV_ERR_NOT_READY, "an event has not completed yet");
    } else {
      cl_ulong t0 = 0, t1 = 0;
      cl_int e1 = cl.clGetEventProfilingInfo(a->ev, CL_PROFILING_COMMAND_END, sizeof t0, &t0, NULL);
      cl_int e2 = cl.clGetEventProfilingInfo(b->ev, CL_PROFILING_COMMAND_END, sizeof t1, &t1, NULL);
      if (e1 || e2) rc = dv__clk_fail(e1 ? e1 : e2, "clGetEventProfilingInfo");
      else *ms = (float)((double)((cl_long)(t1 - t0)) / 1e6);
    }
  }
  pthread_mutex_unlock(&b->m);
  pthread_mutex_unlock(&a->m);
  return rc;
}

#else
typedef int dv__opencl_event_none; /* built without OpenCL headers: nothing here */
#endif /* DV_HAVE_OPENCL_HEADERS */
