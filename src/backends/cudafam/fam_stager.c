/*
 * The CUDA family's staging threads (fam_stager.h; issue 36).  One thread
 * per stream that queues asynchronous pageable copies, made at the first
 * such copy, with a word of mapped pinned memory (the flag) it writes a
 * sequence number to as each job finishes:
 *
 *  - host to device, the stream busy at the call: the copy records an event
 *    on the stream (the "mark": the host rows are read only after the work
 *    queued before the copy, a download into them say), queues a fill job
 *    per piece and, on the stream, a wait for the flag to reach the job's
 *    number, then the piece's DMA.  The thread waits for the mark, copies
 *    the rows into the buffer and writes the number.
 *  - device to host: each piece's DMA, then the buffer's event, then a
 *    drain job; once every piece is queued, one wait for the last drain's
 *    number, so that later work on the stream (a callback reading the
 *    rows, an event the caller waits for) comes after the copy-out.
 *  - buffers of host-to-device pieces come back once the event recorded
 *    after their DMA completes; the thread waits for those when it has no
 *    job, so fills run ahead of returns.
 *
 * No callback and no host function is queued, so nothing here waits for
 * another stream's callbacks (a driver may run them one at a time for the
 * whole process).  The thread calls the driver (event waits, the buffers'
 * frees) with the context current; it never blocks on the calling thread,
 * and every wait on the stream is queued after the event the job waits
 * for, under the stream's submission lock, so the two cannot wait for each
 * other.  The events it waits for are made with blocking sync, so a thread
 * waiting for a long kernel sleeps instead of spinning a core (the driver's
 * default for a context with few threads).  A destroyed stream's thread
 * finishes its jobs and is joined by a
 * later detach or by close (after the context's synchronize, so its waits
 * end).  Numbers are 64 bits (no wrap), compared as the driver's GEQ.
 */
#include <pthread.h>
#include <string.h>

#include "fam_stager.h"

enum { JOB_FILL, JOB_DRAIN, JOB_PRE };

typedef struct cu_pre cu_pre;
typedef struct cu_job {
  struct cu_job *next;
  int kind;
  cu_stage *b;
  bool recorded;
  cu_pre *pre;
  char *host;
  size_t hpitch, w, k;
  uint64_t seq; /* written to the flag when done (FILL, DRAIN) */
} cu_job;

/* A mark: an event the fills of one copy wait for; back to the thread's
 * list once they are done (its own job, queued after them). */
struct cu_pre {
  cu_pre *next;
  dv_CUevent ev;
  cu_job done;
};

struct cu_stager {
  cu_stager *next; /* the context's list */
  cu_state *st;
  dv_cu_staging *g;
  pthread_t thread;
  pthread_mutex_t submit; /* one submission (a copy's pieces) at a time */
  pthread_mutex_t lock;
  pthread_cond_t work, done;
  cu_job *head, *tail;          /* jobs, in order */
  cu_stage *returns, *ret_tail; /* buffers to give back after their events */
  cu_pre *pre_free;             /* marks not in use */
  cu_pre *cur_pre;              /* the submission's mark (under submit) */
  uint64_t next_seq;            /* under submit */
  uint64_t done_seq;            /* the flag's value */
  uint64_t drains;              /* the last drain queued, and the last the stream waits for */
  uint64_t ordered;
  _Atomic uint64_t *flag; /* mapped pinned memory */
  dv_CUdeviceptr flag_dev;
  bool quit, detached, exited;
};

struct dv_cu_stagers {
  pthread_mutex_t lock;
  bool on;
  cu_stager *all;
};

bool dv__cu_stager_on(const cu_state *st) { return st->stagers && st->stagers->on; }

dv_status dv__cu_stagers_open(cu_state *st) {
  struct dv_cu_stagers *L = dv__calloc(1, sizeof *L);
  if (!L)
    return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate the %s staging threads' list",
                     st->drv->vendor);
  pthread_mutex_init(&L->lock, NULL);
  int x = 0;
  L->on = cu.cuStreamWaitValue64_v2 && st->info.can_map_host_memory &&
          cu.cuDeviceGetAttribute(&x, DV_CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS,
                                  st->dev) == DV_CUDA_SUCCESS &&
          x == 1;
  st->stagers = L;
  return DV_OK;
}

static void job_run(cu_stager *t, cu_job *j);

static void *stager_main(void *arg) {
  cu_stager *t = arg;
  const dv_cu_api *api = t->st->drv->api;
  api->cuCtxSetCurrent(t->st->ctx);
  pthread_mutex_lock(&t->lock);
  for (;;) {
    if (t->head) {
      cu_job *j = t->head;
      t->head = j->next;
      if (!t->head) t->tail = NULL;
      pthread_mutex_unlock(&t->lock);
      job_run(t, j);
      pthread_mutex_lock(&t->lock);
      continue;
    }
    if (t->returns) {
      cu_stage *b = t->returns;
      t->returns = b->next;
      if (!t->returns) t->ret_tail = NULL;
      pthread_mutex_unlock(&t->lock);
      b->next = NULL;
      if (b->wait_ev) api->cuEventSynchronize(b->ev); /* a failure too: the stream is past it */
      b->wait_ev = false;
      dv__cu_stage_put(t->g, b, false); /* listed: a free may wait for the device (HIP) */
      pthread_mutex_lock(&t->lock);
      continue;
    }
    if (t->quit || t->detached) break;
    pthread_cond_wait(&t->work, &t->lock);
  }
  t->exited = true;
  pthread_cond_broadcast(&t->done);
  pthread_mutex_unlock(&t->lock);
  return NULL;
}

/* A job's number reached: the stream's wait for it ends. */
static void job_signal(cu_stager *t, uint64_t seq) {
  pthread_mutex_lock(&t->lock);
  atomic_store_explicit(t->flag, seq, memory_order_seq_cst); /* after the rows it covers */
  t->done_seq = seq;
  pthread_cond_broadcast(&t->done);
  pthread_mutex_unlock(&t->lock);
}

static void job_run(cu_stager *t, cu_job *j) {
  const dv_cu_api *api = t->st->drv->api;
  dv_copy_team *team = dv__cu_stage_team(t->g);
  switch (j->kind) {
    case JOB_FILL: {
      /* After a device error nothing is copied: the DMA behind fails too. */
      dv_CUresult r = api->cuEventSynchronize(j->pre->ev);
      if (r == DV_CUDA_SUCCESS)
        dv__copy_team_rows(team, j->b->ptr, j->w, j->host, j->hpitch, j->w, j->k);
      job_signal(t, j->seq);
      dv__free(j);
      return;
    }
    case JOB_DRAIN: {
      /* After a device error the staged bytes are not the device's. */
      dv_CUresult r = j->recorded ? api->cuEventSynchronize(j->b->ev) : DV_CUDA_SUCCESS;
      if (r == DV_CUDA_SUCCESS)
        dv__copy_team_rows(team, j->host, j->hpitch, j->b->ptr, j->w, j->w, j->k);
      dv__cu_stage_put(t->g, j->b, false);
      job_signal(t, j->seq);
      dv__free(j);
      return;
    }
    default: { /* JOB_PRE: the mark's fills are done */
      cu_pre *p = j->pre;
      pthread_mutex_lock(&t->lock);
      p->next = t->pre_free;
      t->pre_free = p;
      pthread_mutex_unlock(&t->lock);
      return;
    }
  }
}

static void job_push(cu_stager *t, cu_job *j) {
  j->next = NULL;
  pthread_mutex_lock(&t->lock);
  if (t->tail)
    t->tail->next = j;
  else
    t->head = j;
  t->tail = j;
  pthread_cond_signal(&t->work);
  pthread_mutex_unlock(&t->lock);
}

/* After the thread ended (joined): its flag and marks go (the caller has
 * the context current). */
static void stager_free(cu_stager *t) {
  const dv_cu_api *api = t->st->drv->api;
  for (cu_pre *p = t->pre_free, *n; p; p = n) {
    n = p->next;
    api->cuEventDestroy_v2(p->ev);
    dv__free(p);
  }
  api->cuMemFreeHost((void *)t->flag);
  pthread_cond_destroy(&t->work);
  pthread_cond_destroy(&t->done);
  pthread_mutex_destroy(&t->lock);
  pthread_mutex_destroy(&t->submit);
  dv__free(t);
}

static cu_stager *stager_new(cu_state *st) {
  cu_stager *t = dv__calloc(1, sizeof *t);
  if (!t) return NULL;
  void *p = NULL;
  if (cu.cuMemHostAlloc(&p, 64, DV_CU_MEMHOSTALLOC_PORTABLE | DV_CU_MEMHOSTALLOC_DEVICEMAP) !=
      DV_CUDA_SUCCESS) {
    dv__free(t);
    return NULL;
  }
  t->flag = p;
  atomic_store(t->flag, 0);
  if (cu.cuMemHostGetDevicePointer_v2(&t->flag_dev, p, 0) != DV_CUDA_SUCCESS) {
    cu.cuMemFreeHost(p);
    dv__free(t);
    return NULL;
  }
  t->st = st;
  t->g = st->staging;
  pthread_mutex_init(&t->submit, NULL);
  pthread_mutex_init(&t->lock, NULL);
  pthread_cond_init(&t->work, NULL);
  pthread_cond_init(&t->done, NULL);
  if (pthread_create(&t->thread, NULL, stager_main, t)) {
    stager_free(t);
    return NULL;
  }
  return t;
}

/* Join and free the threads that ended (L->lock held). */
static void stagers_reap(struct dv_cu_stagers *L) {
  for (cu_stager **pp = &L->all; *pp;) {
    cu_stager *t = *pp;
    pthread_mutex_lock(&t->lock);
    bool gone = t->exited;
    pthread_mutex_unlock(&t->lock);
    if (!gone) {
      pp = &t->next;
      continue;
    }
    *pp = t->next;
    pthread_join(t->thread, NULL);
    stager_free(t);
  }
}

cu_stager *dv__cu_stager_begin(cu_state *st, dv_bstream *s) {
  struct dv_cu_stagers *L = st->stagers;
  pthread_mutex_lock(&L->lock);
  cu_stager *t = s->stager;
  if (!t && (t = stager_new(st)) != NULL) {
    t->next = L->all;
    L->all = t;
    s->stager = t;
  }
  pthread_mutex_unlock(&L->lock);
  if (t) pthread_mutex_lock(&t->submit);
  return t;
}

void dv__cu_stager_end(cu_stager *t) {
  if (t->cur_pre) {
    t->cur_pre->done.kind = JOB_PRE;
    t->cur_pre->done.pre = t->cur_pre;
    job_push(t, &t->cur_pre->done);
    t->cur_pre = NULL;
  }
  pthread_mutex_unlock(&t->submit);
}

void dv__cu_stager_detach(cu_state *st, dv_bstream *s) {
  struct dv_cu_stagers *L = st->stagers;
  if (!L) return;
  pthread_mutex_lock(&L->lock);
  cu_stager *t = s->stager;
  s->stager = NULL;
  if (t) {
    pthread_mutex_lock(&t->lock);
    t->detached = true;
    pthread_cond_signal(&t->work);
    pthread_mutex_unlock(&t->lock);
  }
  stagers_reap(L);
  pthread_mutex_unlock(&L->lock);
}

void dv__cu_stagers_close(cu_state *st) {
  struct dv_cu_stagers *L = st->stagers;
  if (!L) return;
  pthread_mutex_lock(&L->lock);
  for (cu_stager *t = L->all; t; t = t->next) {
    pthread_mutex_lock(&t->lock);
    t->quit = true;
    pthread_cond_signal(&t->work);
    pthread_mutex_unlock(&t->lock);
  }
  for (cu_stager *t = L->all, *n; t; t = n) {
    n = t->next;
    pthread_join(t->thread, NULL);
    stager_free(t);
  }
  L->all = NULL;
  pthread_mutex_unlock(&L->lock);
  pthread_mutex_destroy(&L->lock);
  dv__free(L);
  st->stagers = NULL;
}

dv_status dv__cu_stage_event(cu_state *st, cu_stage *b) {
  if (b->ev) return DV_OK;
  dv_CUresult r = cu.cuEventCreate(&b->ev, DV_CU_EVENT_DISABLE_TIMING | DV_CU_EVENT_BLOCKING_SYNC);
  if (r) {
    b->ev = NULL;
    return cu_fail(r, DV_CU_E_cuEventCreate, " (staging)");
  }
  return DV_OK;
}

dv_status dv__cu_stager_mark(cu_state *st, dv_bstream *s, cu_stager *t, void **pre) {
  *pre = NULL;
  if (t->cur_pre) {
    *pre = t->cur_pre;
    return DV_OK;
  }
  pthread_mutex_lock(&t->lock);
  cu_pre *p = t->pre_free;
  if (p) t->pre_free = p->next;
  pthread_mutex_unlock(&t->lock);
  if (!p) {
    if (!(p = dv__calloc(1, sizeof *p)))
      return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate a staging record");
    dv_CUresult r = cu.cuEventCreate(&p->ev, DV_CU_EVENT_DISABLE_TIMING | DV_CU_EVENT_BLOCKING_SYNC);
    if (r) {
      dv__free(p);
      return cu_fail(r, DV_CU_E_cuEventCreate, " (staging)");
    }
  }
  dv_CUresult r = cu.cuEventRecord(p->ev, s->s);
  if (r) {
    pthread_mutex_lock(&t->lock);
    p->next = t->pre_free;
    t->pre_free = p;
    pthread_mutex_unlock(&t->lock);
    return cu_fail(r, DV_CU_E_cuEventRecord, " (staging)");
  }
  t->cur_pre = p;
  *pre = p;
  return DV_OK;
}

/* The stream waits for the flag to reach seq. */
static dv_status stream_wait(cu_state *st, dv_bstream *s, cu_stager *t, uint64_t seq) {
  dv_CUresult r = cu.cuStreamWaitValue64_v2(s->s, t->flag_dev, seq, DV_CU_STREAM_WAIT_VALUE_GEQ);
  return r ? cu_fail(r, DV_CU_E_cuStreamWaitValue64_v2, " (staging)") : DV_OK;
}

dv_status dv__cu_stager_fill(cu_state *st, dv_bstream *s, cu_stager *t, void *pre, cu_stage *b,
                             char *host, size_t hpitch, size_t w, size_t k) {
  cu_job *j = dv__calloc(1, sizeof *j);
  if (!j) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate a staging record");
  j->kind = JOB_FILL, j->b = b, j->pre = pre, j->host = host, j->hpitch = hpitch, j->w = w,
  j->k = k;
  uint64_t seq = j->seq = ++t->next_seq;
  job_push(t, j); /* j is the thread's from here */
  return stream_wait(st, s, t, seq);
}

void dv__cu_stager_put_back(cu_stager *t, cu_stage *b, bool recorded) {
  b->wait_ev = recorded;
  b->next = NULL;
  pthread_mutex_lock(&t->lock);
  if (t->ret_tail)
    t->ret_tail->next = b;
  else
    t->returns = b;
  t->ret_tail = b;
  pthread_cond_signal(&t->work);
  pthread_mutex_unlock(&t->lock);
}

dv_status dv__cu_stager_drain(cu_stager *t, cu_stage *b, bool recorded, char *host, size_t hpitch,
                              size_t w, size_t k) {
  cu_job *j = dv__calloc(1, sizeof *j);
  if (!j) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate a staging record");
  j->kind = JOB_DRAIN, j->b = b, j->recorded = recorded, j->host = host, j->hpitch = hpitch,
  j->w = w, j->k = k;
  j->seq = t->drains = ++t->next_seq;
  job_push(t, j);
  return DV_OK;
}

dv_status dv__cu_stager_order(cu_state *st, dv_bstream *s, cu_stager *t) {
  if (t->drains <= t->ordered) return DV_OK;
  uint64_t seq = t->drains;
  dv_status rc = stream_wait(st, s, t, seq);
  if (rc) {
    /* Later work on the stream cannot be made to wait: wait here. */
    pthread_mutex_lock(&t->lock);
    while (t->done_seq < seq && !t->exited) pthread_cond_wait(&t->done, &t->lock);
    pthread_mutex_unlock(&t->lock);
  }
  t->ordered = seq;
  return rc;
}
