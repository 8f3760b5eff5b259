/* Point-to-point: send/recv, blocking and not, and their requests.
 *
 * A request is a small state machine advanced by dv_mpi_test/wait/waitall:
 *   HEADER  the sender's header (dtype, shape, chunk size, or a local error)
 *           is on its way on the header communicator, and the receiver's
 *           answer (its status and its own header) on the ack communicator;
 *   DATA    the chunks are moving: MPI requests straight on host (or, with a
 *           CUDA-aware MPI, device) memory, or the staged engine;
 *   DONE    unpacked, stream synchronized; the status is final.
 * Data moves only after the receiver has accepted the header, so a mismatch
 * fails both ranks and nothing is left in flight. */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_internal.h"

enum { PH_HEADER, PH_DATA, PH_ACK, PH_DONE };
enum { HDR_MAGIC, HDR_ERR, HDR_DTYPE, HDR_ITEMSIZE, HDR_CHUNK, HDR_NDIM, HDR_SHAPE };

struct dv_mpi_request {
  dv_mpi_comm *c;
  int is_send, phase, use_pipe;
  dv_array *user;  /* retained */
  dv_array *dense; /* packed copy or receive buffer (retained), NULL if none */
  dv_stream *stream;
  int peer, tag;
  int64_t chunk, n;
  int64_t hdr[DV_MPI_HDR_LEN];
  int64_t ack[DV_MPI_HDR_LEN + 1];
  MPI_Request hreq, areq;
  MPI_Request *dreq;
  int ndreq;
  MPI_Datatype elem, derived;
  int elem_owned, derived_owned;
  dv_mpi_pipe pipe;
  dv_mpi_path path;
  int64_t nchunks;
  void *ptr;         /* host or device address given to MPI */
  MPI_Datatype type; /* elem, or the derived datatype */
  int count_per;     /* 1 with the derived datatype (one message), else 0 */
  dv_status status;
  MPI_Status mstat;
  char msg[512];
};

static void fill_header(int64_t *h, const dv_array *a, int64_t chunk, dv_status err) {
  memset(h, 0, sizeof(int64_t) * DV_MPI_HDR_LEN);
  h[HDR_MAGIC] = DV_MPI_HDR_MAGIC;
  h[HDR_ERR] = err;
  if (!a) return;
  h[HDR_DTYPE] = dv_dtype_id(dv_array_dtype(a));
  h[HDR_ITEMSIZE] = (int64_t)dv_dtype_itemsize(dv_array_dtype(a));
  h[HDR_CHUNK] = chunk;
  h[HDR_NDIM] = dv_array_ndim(a);
  for (int d = 0; d < dv_array_ndim(a); d++) h[HDR_SHAPE + d] = dv_array_shape(a)[d];
}

static void shape_str(const int64_t *h, char *buf, size_t cap) {
  size_t o = 0;
  o += (size_t)snprintf(buf + o, cap - o, "(");
  for (int64_t d = 0; d < h[HDR_NDIM] && d < DV_MAXDIMS && o < cap; d++)
    o += (size_t)snprintf(buf + o, cap - o, "%s%lld", d ? ", " : "", (long long)h[HDR_SHAPE + d]);
  if (o < cap) snprintf(buf + o, cap - o, ")");
}

static const char *dtype_str(const int64_t *h) {
  const dv_dtype *dt = dv_dtype_get((dv_type_id)h[HDR_DTYPE]);
  return dt ? dv_dtype_name(dt) : "record";
}

/* Compare the receiver's header `mine` with the sender's: DV_OK or the
 * mismatch status, with a message. */
static dv_status compare(const int64_t *sent, const int64_t *mine, int sender, int receiver,
                         char *msg, size_t cap) {
  char s1[256], s2[256];
  if (sent[HDR_MAGIC] != DV_MPI_HDR_MAGIC) {
    snprintf(msg, cap,
             "rank %d sent a message that is not a devarray header (is DV_MPI_NO_HEADER set on one "
             "side only?)",
             sender);
    return DV_ERR_INVALID_ARGUMENT;
  }
  if (sent[HDR_ERR]) {
    snprintf(msg, cap, "sender rank %d failed its own checks (%s)", sender,
             dv_status_name((dv_status)sent[HDR_ERR]));
    return (dv_status)sent[HDR_ERR];
  }
  if (mine[HDR_ERR]) {
    snprintf(msg, cap, "receiver rank %d failed its own checks (%s)", receiver,
             dv_status_name((dv_status)mine[HDR_ERR]));
    return (dv_status)mine[HDR_ERR];
  }
  if (sent[HDR_DTYPE] != mine[HDR_DTYPE] || sent[HDR_ITEMSIZE] != mine[HDR_ITEMSIZE]) {
    snprintf(msg, cap,
             "dtype mismatch: rank %d sends %s (%lld bytes), rank %d receives %s (%lld bytes)",
             sender, dtype_str(sent), (long long)sent[HDR_ITEMSIZE], receiver, dtype_str(mine),
             (long long)mine[HDR_ITEMSIZE]);
    return DV_ERR_DTYPE_MISMATCH;
  }
  int same = sent[HDR_NDIM] == mine[HDR_NDIM];
  for (int64_t d = 0; same && d < sent[HDR_NDIM] && d < DV_MAXDIMS; d++)
    same = sent[HDR_SHAPE + d] == mine[HDR_SHAPE + d];
  if (!same) {
    shape_str(sent, s1, sizeof s1);
    shape_str(mine, s2, sizeof s2);
    snprintf(msg, cap, "shape mismatch: rank %d sends %.120s, rank %d receives %.120s", sender, s1,
             receiver, s2);
    return DV_ERR_SHAPE_MISMATCH;
  }
  return DV_OK;
}

static int send_chunk(void *arg, int64_t k, void *buf, int count, MPI_Request *req) {
  dv_mpi_request *r = arg;
  (void)k;
  return MPI_Isend(buf, count, r->elem, r->peer, r->tag, r->c->data, req);
}

static int recv_chunk(void *arg, int64_t k, void *buf, int count, MPI_Request *req) {
  dv_mpi_request *r = arg;
  (void)k;
  return MPI_Irecv(buf, count, r->elem, r->peer, r->tag, r->c->data, req);
}

static void request_free(dv_mpi_request *r) {
  if (!r) return;
  if (r->use_pipe) dv_mpi__pipe_abort(&r->pipe); /* prepared, never finished */
  for (int i = 0; i < r->ndreq; i++)
    if (r->dreq[i] != MPI_REQUEST_NULL) {
      MPI_Cancel(&r->dreq[i]);
      MPI_Wait(&r->dreq[i], MPI_STATUS_IGNORE);
    }
  free(r->dreq);
  if (r->derived_owned) MPI_Type_free(&r->derived);
  if (r->elem_owned) MPI_Type_free(&r->elem);
  dv_array_release(r->dense);
  dv_array_release(r->user);
  atomic_fetch_sub(&r->c->pending, 1);
  free(r);
}

/* Everything that can fail locally before data moves: packing, buffers,
 * datatypes, the stream.  The sender does it before its header goes out and
 * the receiver before it answers, so that such a failure reaches the peer
 * through the header exchange instead of leaving it waiting. */
static dv_status prepare(dv_mpi_request *r) {
  dv_mpi_comm *c = r->c;
  dv_array *a = r->user;
  r->path = dv_mpi__path(c, a, &r->ptr);
  dv_status s;
  r->nchunks = r->n ? (r->n + r->chunk - 1) / r->chunk : 0;
  if (r->nchunks > INT32_MAX)
    return dv_mpi__fail(DV_ERR_OVERFLOW, "%lld chunks: more than MPI can count",
                        (long long)r->nchunks);
  int any = r->peer == MPI_ANY_SOURCE || r->tag == MPI_ANY_TAG;
  if (any && r->nchunks > 1)
    return dv_mpi__fail(
        DV_ERR_NOT_SUPPORTED,
        "MPI_ANY_SOURCE/MPI_ANY_TAG with a message of %lld chunks needs the header exchange",
        (long long)r->nchunks);
  int contiguous = dv_array_is_c_contiguous(a);
  if (r->path == DV_MPI_PATH_STAGED) {
    if (contiguous)
      r->dense = dv_array_retain(a);
    else if ((s = dv_mpi__dense_c(c, a, r->stream, r->is_send ? a : NULL, &r->dense)) != DV_OK)
      return s;
    s = dv_mpi__pipe_start(&r->pipe, c, r->dense, r->stream, r->chunk, r->is_send, !r->is_send,
                           r->is_send ? send_chunk : recv_chunk, r);
    if (s != DV_OK) return s;
    r->use_pipe = 1;
    return DV_OK;
  }
  /* direct or host memory: pointers to MPI */
  r->type = r->elem;
  r->count_per = 0;
  if (!contiguous) {
    if (r->path == DV_MPI_PATH_HOST && r->nchunks <= 1 && !(c->flags & DV_MPI_FORCE_PACK) &&
        dv_mpi__derivable(a)) {
      if ((s = dv_mpi__derived(a, r->elem, &r->derived)) != DV_OK) return s;
      r->derived_owned = 1;
      r->type = r->derived;
      r->count_per = 1;
      atomic_fetch_add(&c->derived_types, 1);
    } else {
      if ((s = dv_mpi__dense_c(c, a, r->stream, r->is_send ? a : NULL, &r->dense)) != DV_OK)
        return s;
      dv_mpi__path(c, r->dense, &r->ptr);
    }
  }
  /* work queued on the stream that reads or writes the memory comes first */
  if ((s = dv_stream_synchronize(r->stream)) != DV_OK) return s;
  r->dreq = calloc(r->nchunks ? (size_t)r->nchunks : 1, sizeof *r->dreq);
  if (!r->dreq) return dv_mpi__fail(DV_ERR_HOST_OUT_OF_MEMORY, "send/recv: no memory");
  return DV_OK;
}

/* Move the data: once prepared and (with the header) accepted. */
static dv_status launch(dv_mpi_request *r) {
  dv_mpi_comm *c = r->c;
  dv_mpi__count(c, r->path, dv_array_nbytes(r->user));
  if (r->use_pipe) return DV_OK; /* the staged engine posts its own operations */
  size_t isz = dv_dtype_itemsize(dv_array_dtype(r->user));
  for (int64_t k = 0; k < r->nchunks; k++) {
    int64_t lo = k * r->chunk, cnt = r->n - lo < r->chunk ? r->n - lo : r->chunk;
    void *b = r->count_per ? r->ptr : (char *)r->ptr + (size_t)lo * isz;
    int count = r->count_per ? r->count_per : (int)cnt;
    int err = r->is_send ? MPI_Isend(b, count, r->type, r->peer, r->tag, c->data, &r->dreq[k])
                         : MPI_Irecv(b, count, r->type, r->peer, r->tag, c->data, &r->dreq[k]);
    r->ndreq = (int)k + 1;
    if (err != MPI_SUCCESS) return dv_mpi__mpi(err, r->is_send ? "MPI_Isend" : "MPI_Irecv");
  }
  return DV_OK;
}

/* Data arrived (receive) or left (send): unpack and synchronize. */
static dv_status finish_data(dv_mpi_request *r) {
  dv_status s = DV_OK;
  if (!r->is_send && r->dense && r->dense != r->user)
    s = dv_array_copy(r->user, r->dense, r->stream);
  if (s == DV_OK && (r->use_pipe || r->dense)) s = dv_stream_synchronize(r->stream);
  return s;
}

static void fail(dv_mpi_request *r, dv_status s) {
  if (r->status == DV_OK) {
    r->status = s;
    snprintf(r->msg, sizeof r->msg, "%s", dv_last_error());
  }
}

/* Advance r without blocking; returns 1 when it reached PH_DONE. */
static int advance(dv_mpi_request *r) {
  dv_mpi_comm *c = r->c;
  int flag = 0, err;
  if (r->phase == PH_HEADER) {
    if (r->is_send) {
      MPI_Request two[2] = {r->hreq, r->areq};
      err = MPI_Testall(2, two, &flag, MPI_STATUSES_IGNORE);
      r->hreq = two[0];
      r->areq = two[1];
      if (err != MPI_SUCCESS) {
        fail(r, dv_mpi__mpi(err, "header exchange"));
        r->phase = PH_DONE;
        return 1;
      }
      if (!flag) return 0;
      if (r->ack[0] != DV_OK) {
        char mine[256], theirs[256];
        shape_str(r->hdr, mine, sizeof mine);
        shape_str(r->ack + 1, theirs, sizeof theirs);
        atomic_fetch_add(&c->mismatches, 1);
        fail(r,
             dv_mpi__fail(
                 (dv_status)r->ack[0],
                 "rank %d rejected the message from rank %d (%s): sent %s %s, receiver has %s %s",
                 r->peer, c->rank, dv_status_name((dv_status)r->ack[0]), dtype_str(r->hdr), mine,
                 r->ack[1 + HDR_ERR] ? "(failed its own checks)" : dtype_str(r->ack + 1), theirs));
        r->phase = PH_DONE;
        return 1;
      }
      if (r->hdr[HDR_ERR]) { /* our own local error, now known to the receiver */
        r->phase = PH_DONE;
        return 1;
      }
    } else {
      MPI_Status st;
      err = MPI_Test(&r->hreq, &flag, &st);
      if (err != MPI_SUCCESS) {
        fail(r, dv_mpi__mpi(err, "header receive"));
        r->phase = PH_DONE;
        return 1;
      }
      if (!flag) return 0;
      r->peer = st.MPI_SOURCE;
      r->tag = st.MPI_TAG;
      r->mstat = st;
      int64_t mine[DV_MPI_HDR_LEN];
      fill_header(mine, r->user, r->chunk, r->status);
      char msg[512];
      dv_status s = compare(r->hdr, mine, r->peer, c->rank, msg, sizeof msg);
      if (s == DV_OK) {
        r->chunk = r->hdr[HDR_CHUNK] > 0 ? r->hdr[HDR_CHUNK] : r->chunk; /* the sender's chunking */
        s = prepare(r);
        if (s != DV_OK) snprintf(msg, sizeof msg, "%s", dv_last_error());
      }
      r->ack[0] = s;
      memcpy(r->ack + 1, mine, sizeof mine);
      err = MPI_Isend(r->ack, DV_MPI_HDR_LEN + 1, MPI_INT64_T, r->peer, r->tag, c->ack, &r->areq);
      if (err != MPI_SUCCESS) {
        fail(r, dv_mpi__mpi(err, "header answer"));
        r->phase = PH_DONE;
        return 1;
      }
      if (s != DV_OK) {
        if (r->status == DV_OK) atomic_fetch_add(&c->mismatches, 1);
        fail(r, dv_mpi__fail(s, "%s", msg));
        r->phase = PH_ACK;
        return advance(r);
      }
    }
    dv_status s = launch(r);
    if (s != DV_OK) {
      fail(r, s);
      r->phase = r->is_send ? PH_DONE : PH_ACK;
      return r->phase == PH_DONE ? 1 : advance(r);
    }
    r->phase = PH_DATA;
  }
  if (r->phase == PH_DATA) {
    if (r->use_pipe) {
      int fin = 0;
      dv_status s = dv_mpi__pipe_step(&r->pipe, &fin);
      if (s != DV_OK) {
        dv_mpi__pipe_abort(&r->pipe);
        r->use_pipe = 0;
        fail(r, s);
        r->phase = PH_ACK;
      } else if (!fin) {
        return 0;
      } else {
        r->use_pipe = 0;
      }
    } else if (r->ndreq) {
      MPI_Status *sts = calloc((size_t)r->ndreq, sizeof *sts);
      err = sts ? MPI_Testall(r->ndreq, r->dreq, &flag, sts) : MPI_ERR_NO_MEM;
      if (err != MPI_SUCCESS) {
        free(sts);
        fail(r, dv_mpi__mpi(err, r->is_send ? "send" : "receive"));
        r->phase = PH_ACK;
        return advance(r);
      }
      if (!flag) {
        free(sts);
        return 0;
      }
      if (!r->is_send && (c->flags & DV_MPI_NO_HEADER)) r->mstat = sts[0];
      free(sts);
    }
    if (r->status == DV_OK) {
      dv_status s = finish_data(r);
      if (s != DV_OK) fail(r, s);
    }
    r->phase = PH_ACK;
  }
  if (r->phase == PH_ACK) {
    if (r->areq != MPI_REQUEST_NULL && !r->is_send) {
      err = MPI_Test(&r->areq, &flag, MPI_STATUS_IGNORE);
      if (err != MPI_SUCCESS)
        fail(r, dv_mpi__mpi(err, "header answer"));
      else if (!flag)
        return 0;
    }
    r->phase = PH_DONE;
  }
  return r->phase == PH_DONE;
}

/* fn: the public function the caller called, named in every message. */
static dv_status start(dv_mpi_comm *c, dv_array *a, int peer, int tag, dv_stream *stream,
                       int is_send, const char *fn, dv_mpi_request **out) {
  if (!out) return dv_mpi__fail(DV_ERR_NULL_ARGUMENT, "%s: req is NULL", fn);
  *out = NULL;
  if (!c) return dv_mpi__fail(DV_ERR_NULL_ARGUMENT, "%s: c is NULL", fn);
  int header = !(c->flags & DV_MPI_NO_HEADER);
  /* local checks: with the header exchange on, a failure is still sent to
   * (or answered to) the peer, so that it fails too instead of waiting */
  dv_status local = DV_OK;
  char lmsg[512] = "";
  if (!a) {
    local = DV_ERR_NULL_ARGUMENT;
    snprintf(lmsg, sizeof lmsg, "%s: array is NULL", fn);
  } else if (!is_send) {
    for (int d = 0; d < dv_array_ndim(a); d++)
      if (dv_array_strides(a)[d] == 0 && dv_array_shape(a)[d] > 1) {
        local = DV_ERR_INVALID_ARGUMENT;
        snprintf(lmsg, sizeof lmsg,
                 "%s: cannot receive into a view with a zero stride (dimension %d)", fn, d);
      }
  }
  if (local != DV_OK && (!header || (!is_send && peer == MPI_ANY_SOURCE)))
    return dv_mpi__fail(local, "%s", lmsg);
  if (peer != MPI_PROC_NULL &&
      ((peer < 0 && (is_send || peer != MPI_ANY_SOURCE)) || peer >= c->size))
    return dv_mpi__fail(DV_ERR_INVALID_ARGUMENT, "%s: rank %d outside the communicator (size %d)",
                        fn, peer, c->size);
  if (tag < 0 && !(tag == MPI_ANY_TAG && !is_send))
    return dv_mpi__fail(DV_ERR_INVALID_ARGUMENT, "%s: invalid tag %d", fn, tag);
  dv_mpi_request *r = calloc(1, sizeof *r);
  if (!r) return dv_mpi__fail(DV_ERR_HOST_OUT_OF_MEMORY, "%s: no memory", fn);
  atomic_fetch_add(&c->pending, 1);
  r->c = c;
  r->is_send = is_send;
  r->user = dv_array_retain(a);
  r->stream = a ? dv_mpi__stream(a, stream) : NULL;
  r->peer = peer;
  r->tag = tag;
  r->hreq = r->areq = MPI_REQUEST_NULL;
  r->elem = MPI_BYTE;
  r->mstat.MPI_SOURCE = peer;
  r->mstat.MPI_TAG = tag;
  r->mstat.MPI_ERROR = MPI_SUCCESS;
  if (a) {
    dv_status s = dv_mpi__type(dv_array_dtype(a), &r->elem, &r->elem_owned);
    if (s != DV_OK && local == DV_OK) {
      local = s;
      snprintf(lmsg, sizeof lmsg, "%s", dv_last_error());
    }
    r->chunk = dv_mpi__chunk_elems(c, dv_array_dtype(a));
    r->n = dv_array_size(a);
  }
  if (local != DV_OK) {
    r->status = local;
    snprintf(r->msg, sizeof r->msg, "%s", lmsg);
  }
  if (peer == MPI_PROC_NULL) {
    r->phase = PH_DONE;
    *out = r;
    return DV_OK;
  }
  int err = MPI_SUCCESS;
  if (header) {
    atomic_fetch_add(&c->headers, 1);
    r->phase = PH_HEADER;
    if (is_send) {
      if (local == DV_OK && (local = prepare(r)) != DV_OK) {
        r->status = local;
        snprintf(r->msg, sizeof r->msg, "%s", dv_last_error());
      }
      fill_header(r->hdr, a, r->chunk, local);
      err = MPI_Isend(r->hdr, DV_MPI_HDR_LEN, MPI_INT64_T, peer, tag, c->hdr, &r->hreq);
      if (err == MPI_SUCCESS)
        err = MPI_Irecv(r->ack, DV_MPI_HDR_LEN + 1, MPI_INT64_T, peer, tag, c->ack, &r->areq);
    } else {
      err = MPI_Irecv(r->hdr, DV_MPI_HDR_LEN, MPI_INT64_T, peer, tag, c->hdr, &r->hreq);
    }
    if (err != MPI_SUCCESS) {
      dv_status s = dv_mpi__mpi(err, "header exchange");
      if (r->hreq != MPI_REQUEST_NULL) {
        MPI_Cancel(&r->hreq);
        MPI_Wait(&r->hreq, MPI_STATUS_IGNORE);
      }
      request_free(r);
      return s;
    }
  } else {
    dv_status s = prepare(r);
    if (s == DV_OK) s = launch(r);
    if (s != DV_OK) {
      request_free(r);
      return s;
    }
    r->phase = PH_DATA;
  }
  *out = r;
  return DV_OK;
}

DV_API dv_status dv_mpi_isend(dv_mpi_comm *c, const dv_array *a, int dest, int tag,
                              dv_stream *stream, dv_mpi_request **req) {
  return start(c, (dv_array *)a, dest, tag, stream, 1, "dv_mpi_isend", req);
}

DV_API dv_status dv_mpi_irecv(dv_mpi_comm *c, dv_array *a, int source, int tag, dv_stream *stream,
                              dv_mpi_request **req) {
  return start(c, a, source, tag, stream, 0, "dv_mpi_irecv", req);
}

static dv_status complete(dv_mpi_request **req, MPI_Status *status) {
  dv_mpi_request *r = *req;
  dv_status s = r->status;
  if (status && status != MPI_STATUS_IGNORE && !r->is_send) *status = r->mstat;
  if (s != DV_OK) dv_error_set(s, r->msg);
  request_free(r);
  *req = NULL;
  return s;
}

DV_API dv_status dv_mpi_test(dv_mpi_request **req, int *done, MPI_Status *status) {
  if (!req || !done) return dv_mpi__fail(DV_ERR_NULL_ARGUMENT, "dv_mpi_test: req or done is NULL");
  *done = 0;
  if (!*req) {
    *done = 1;
    return DV_OK;
  }
  if (!advance(*req)) return DV_OK;
  *done = 1;
  return complete(req, status);
}

DV_API dv_status dv_mpi_wait(dv_mpi_request **req, MPI_Status *status) {
  if (!req) return dv_mpi__fail(DV_ERR_NULL_ARGUMENT, "dv_mpi_wait: req is NULL");
  if (!*req) return DV_OK;
  while (!advance(*req)) {
    dv_mpi__progress((*req)->c);
    sched_yield();
  }
  return complete(req, status);
}

DV_API dv_status dv_mpi_waitall(size_t n, dv_mpi_request **reqs) {
  if (!reqs && n) return dv_mpi__fail(DV_ERR_NULL_ARGUMENT, "dv_mpi_waitall: reqs is NULL");
  dv_status first = DV_OK;
  char msg[1024] = "";
  for (;;) {
    size_t left = 0;
    dv_mpi_comm *any = NULL;
    for (size_t i = 0; i < n; i++) {
      if (!reqs[i]) continue;
      if (advance(reqs[i])) {
        dv_status s = complete(&reqs[i], NULL);
        if (s != DV_OK && first == DV_OK) {
          first = s;
          snprintf(msg, sizeof msg, "%s", dv_last_error());
        }
      } else {
        left++;
        any = reqs[i]->c;
      }
    }
    if (!left) break;
    dv_mpi__progress(any);
    sched_yield();
  }
  if (first != DV_OK) dv_error_set(first, msg);
  return first;
}

DV_API dv_status dv_mpi_send(dv_mpi_comm *c, const dv_array *a, int dest, int tag,
                             dv_stream *stream) {
  dv_mpi_request *r = NULL;
  dv_status s = start(c, (dv_array *)a, dest, tag, stream, 1, "dv_mpi_send", &r);
  if (s != DV_OK) return s;
  return dv_mpi_wait(&r, NULL);
}

DV_API dv_status dv_mpi_recv(dv_mpi_comm *c, dv_array *a, int source, int tag, dv_stream *stream,
                             MPI_Status *status) {
  dv_mpi_request *r = NULL;
  dv_status s = start(c, a, source, tag, stream, 0, "dv_mpi_recv", &r);
  if (s != DV_OK) return s;
  return dv_mpi_wait(&r, status);
}
