/* The staged engine: a dense array crosses the network in chunks through
 * DV_MPI_DEPTH pinned buffers.  Chunk k goes device -> buffer (k % DEPTH)
 * on the stream (an event marks its end), then to a non-blocking MPI
 * operation, then (for receives and reductions) buffer -> device on the
 * stream.  Each phase of chunk k+1 overlaps the network phase of chunk k.
 *
 * The engine is a state machine that never blocks (dv_mpi__pipe_step), so a
 * non-blocking request can carry one; dv_mpi__pipe_run loops it.  With
 * DV_MPI_NO_PIPELINE the whole array is staged in one buffer before the
 * first chunk leaves (the comparison that bench_mpi measures). */
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_internal.h"

static int64_t chunk_count(const dv_mpi_pipe *p, int64_t k) {
  int64_t lo = k * p->chunk;
  return p->n - lo < p->chunk ? p->n - lo : p->chunk;
}

/* Copy chunk k between the dense array and buffer b (to_host: dense -> b). */
static dv_status copy_chunk(dv_mpi_pipe *p, int64_t k, int b, int to_host) {
  int64_t lo = k * p->chunk, cnt = chunk_count(p, k);
  dv_index i1 = DV_SLICE(lo, lo + cnt, 1), i2 = DV_SLICE(0, cnt, 1);
  dv_array *v1 = NULL, *v2 = NULL;
  dv_status s = dv_array_slice(p->flat, 1, &i1, &v1);
  if (s == DV_OK) s = dv_array_slice(p->st->buf[b], 1, &i2, &v2);
  if (s == DV_OK) s = to_host ? dv_array_copy(v2, v1, p->stream) : dv_array_copy(v1, v2, p->stream);
  dv_array_release(v1);
  dv_array_release(v2);
  return s;
}

dv_status dv_mpi__pipe_start(dv_mpi_pipe *p, dv_mpi_comm *c, dv_array *dense, dv_stream *s,
                             int64_t chunk, int in, int out, dv_mpi_net_fn net, void *arg) {
  memset(p, 0, sizeof *p);
  for (int i = 0; i < DV_MPI_DEPTH; i++) p->req[i] = MPI_REQUEST_NULL;
  p->c = c;
  p->stream = s;
  p->in = in;
  p->out = out;
  p->net = net;
  p->arg = arg;
  p->chunk = chunk;
  p->n = dv_array_size(dense);
  p->nchunks = p->n ? (p->n + chunk - 1) / chunk : 0;
  if (p->nchunks > INT32_MAX)
    return dv_mpi__fail(DV_ERR_OVERFLOW, "%lld chunks: more than MPI can count",
                        (long long)p->nchunks);
  dv_status st = dv_array_ravel(dense, 'C', DV_VIEW_ONLY, s, &p->flat);
  if (st != DV_OK) return st;
  if (p->nchunks == 0) return DV_OK;
  int64_t bufelems = (c->flags & DV_MPI_NO_PIPELINE) ? p->n : (p->n < chunk ? p->n : chunk);
  st = dv_mpi__stage_get(c, dv_array_context(dense), dv_array_dtype(dense), bufelems, &p->st);
  if (st != DV_OK) {
    dv_array_release(p->flat);
    p->flat = NULL;
  }
  return st;
}

static void pipe_end(dv_mpi_pipe *p) {
  if (p->freq) {
    for (int64_t k = 0; k < p->nchunks; k++)
      if (p->freq[k] != MPI_REQUEST_NULL) {
        MPI_Cancel(&p->freq[k]);
        MPI_Wait(&p->freq[k], MPI_STATUS_IGNORE);
      }
    free(p->freq);
    p->freq = NULL;
  }
  dv_mpi__stage_put(p->c, p->st);
  p->st = NULL;
  dv_array_release(p->flat);
  p->flat = NULL;
}

void dv_mpi__pipe_abort(dv_mpi_pipe *p) {
  for (int i = 0; i < DV_MPI_DEPTH; i++) {
    if (p->req[i] != MPI_REQUEST_NULL) {
      MPI_Cancel(&p->req[i]);
      MPI_Wait(&p->req[i], MPI_STATUS_IGNORE);
    }
  }
  if (p->flat) dv_stream_synchronize(p->stream);
  pipe_end(p);
}

/* Not pipelined: everything to one buffer, all chunks over the network,
 * everything back; a state machine too (never blocks), so that a rank's
 * own send and receive, or two neighbours', can progress together. */
static dv_status flat_step(dv_mpi_pipe *p, int *finished) {
  dv_status s;
  dv_mpi_stage *st = p->st;
  size_t isz = dv_dtype_itemsize(dv_array_dtype(p->flat));
  switch (p->flat_phase) {
    case 0:
      if (p->in) {
        s = dv_array_copy(st->buf[0], p->flat, p->stream);
        if (s == DV_OK) s = dv_event_record(st->ev_in[0], p->stream);
        if (s != DV_OK) return s;
      }
      p->flat_phase = 1;
      /* fall through */
    case 1:
      if (p->in) {
        s = dv_event_query(st->ev_in[0]);
        if (s == DV_ERR_NOT_READY) return DV_OK;
        if (s != DV_OK) return s;
      }
      p->freq = calloc((size_t)p->nchunks, sizeof *p->freq);
      if (!p->freq) return dv_mpi__fail(DV_ERR_HOST_OUT_OF_MEMORY, "staged transfer: no memory");
      for (int64_t k = 0; k < p->nchunks; k++) p->freq[k] = MPI_REQUEST_NULL;
      for (int64_t k = 0; k < p->nchunks; k++) {
        int err = p->net(p->arg, k, (char *)st->host[0] + (size_t)(k * p->chunk) * isz,
                         (int)chunk_count(p, k), &p->freq[k]);
        if (err != MPI_SUCCESS) return dv_mpi__mpi(err, "staged chunk");
        atomic_fetch_add(&p->c->chunks, 1);
      }
      p->flat_phase = 2;
      /* fall through */
    case 2: {
      int flag = 0;
      int err = MPI_Testall((int)p->nchunks, p->freq, &flag, MPI_STATUSES_IGNORE);
      if (err != MPI_SUCCESS) return dv_mpi__mpi(err, "staged chunk");
      if (!flag) return DV_OK;
      p->done = p->issued = p->netted = p->nchunks;
      if (p->out) {
        s = dv_array_copy(p->flat, st->buf[0], p->stream);
        if (s == DV_OK) s = dv_event_record(st->ev_out[0], p->stream);
        if (s != DV_OK) return s;
      }
      p->flat_phase = 3;
    }
      /* fall through */
    case 3:
      if (p->out) {
        s = dv_event_query(st->ev_out[0]);
        if (s == DV_ERR_NOT_READY) return DV_OK;
        if (s != DV_OK) return s;
      }
      p->flat_phase = 4;
      *finished = 1;
      return DV_OK;
    default: *finished = 1; return DV_OK;
  }
}

dv_status dv_mpi__pipe_step(dv_mpi_pipe *p, int *finished) {
  *finished = 0;
  dv_status s;
  if (p->nchunks == 0 || !p->st) {
    *finished = 1;
    pipe_end(p);
    return DV_OK;
  }
  if (p->c->flags & DV_MPI_NO_PIPELINE) {
    s = flat_step(p, finished);
    if (s == DV_OK && *finished) pipe_end(p);
    return s;
  }
  dv_mpi_stage *st = p->st;
  /* 1. claim free buffers; copy their chunks device -> host */
  while (p->issued < p->nchunks && p->issued - p->done < DV_MPI_DEPTH) {
    int b = (int)(p->issued % DV_MPI_DEPTH);
    if (p->out_pending[b]) {
      s = dv_event_query(st->ev_out[b]);
      if (s == DV_ERR_NOT_READY) break;
      if (s != DV_OK) return s;
      p->out_pending[b] = 0;
    }
    if (p->in) {
      s = copy_chunk(p, p->issued, b, 1);
      if (s == DV_OK) s = dv_event_record(st->ev_in[b], p->stream);
      if (s != DV_OK) return s;
    }
    p->issued++;
  }
  /* 2. start the network operation of every chunk that is on the host */
  while (p->netted < p->issued) {
    int b = (int)(p->netted % DV_MPI_DEPTH);
    if (p->in) {
      s = dv_event_query(st->ev_in[b]);
      if (s == DV_ERR_NOT_READY) break;
      if (s != DV_OK) return s;
    }
    int err = p->net(p->arg, p->netted, st->host[b], (int)chunk_count(p, p->netted), &p->req[b]);
    if (err != MPI_SUCCESS) return dv_mpi__mpi(err, "staged chunk");
    atomic_fetch_add(&p->c->chunks, 1);
    p->netted++;
  }
  /* 3. retire chunks whose network operation completed (in order) */
  while (p->done < p->netted) {
    int b = (int)(p->done % DV_MPI_DEPTH);
    int flag = 0;
    int err = MPI_Test(&p->req[b], &flag, MPI_STATUS_IGNORE);
    if (err != MPI_SUCCESS) return dv_mpi__mpi(err, "staged chunk");
    if (!flag) break;
    if (p->out) {
      s = copy_chunk(p, p->done, b, 0);
      if (s == DV_OK) s = dv_event_record(st->ev_out[b], p->stream);
      if (s != DV_OK) return s;
      p->out_pending[b] = 1;
    }
    p->done++;
  }
  if (p->done < p->nchunks) return DV_OK;
  for (int b = 0; b < DV_MPI_DEPTH; b++) {
    if (!p->out_pending[b]) continue;
    s = dv_event_query(st->ev_out[b]);
    if (s == DV_ERR_NOT_READY) return DV_OK;
    if (s != DV_OK) return s;
    p->out_pending[b] = 0;
  }
  *finished = 1;
  pipe_end(p);
  return DV_OK;
}

dv_status dv_mpi__pipe_run(dv_mpi_pipe *p) {
  for (;;) {
    int fin = 0;
    int64_t before = p->issued + p->netted + p->done;
    dv_status s = dv_mpi__pipe_step(p, &fin);
    if (s != DV_OK) {
      dv_mpi__pipe_abort(p);
      return s;
    }
    if (fin) return DV_OK;
    if (p->issued + p->netted + p->done == before) {
      dv_mpi__progress(p->c);
      sched_yield();
    }
  }
}
