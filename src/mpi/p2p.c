/* Point-to-point: send/recv, blocking and not, and their requests.
 *
 * A request is a small state machine advanced by dv_mpi_test/wait/waitall:
 *   HEADER  the sender's header (dtype, shape, chunk size, or a local error)
 *           is on its way on the header communicator; for a SYNC header the
 *           receiver's answer (its status and its own header) comes back on
 *           the ack communicator and data moves only after acceptance;
 *   DATA    the chunks are moving: MPI requests straight on host (or, with a
 *           CUDA-aware MPI, device) memory, or the staged engine;
 *   ACK     the last MPI operations of the request (the answer, a notice,
 *           the header send) complete;
 *   DONE    unpacked, stream synchronized; the status is final.
 *
 * Round trips.  A SYNC header costs a round trip before the data, so a
 * mismatch fails both ranks in the same call and nothing is left in
 * flight.  Once a receiver has accepted a header (dtype, shape, chunk size)
 * from this rank for a tag, the sender remembers it (comm.c's acceptance
 * cache) and later single-message sends of the same header with that tag
 * are EAGER: the header and then the data leave at once, with no answer on
 * success.  The receiver still compares every header with its own array; on
 * a rejection it drains the data, fails its call, and sends a notice on the
 * notice communicator.  The sender takes notices from a peer before each
 * send to it: the first send after one arrived fails with the rejection's
 * status, sending a LATE error header so that the matching receive fails
 * too (nothing moves), and the peer's cache entries are dropped (the next
 * send is SYNC again).  dv_mpi_comm_destroy takes the rest (see comm.c).
 *
 * Order.  MPI matches messages of one (source, tag, communicator) in order,
 * but completion may be observed out of order.  Headers and data travel on
 * different communicators, so the data receive of a header is posted in
 * header order: receives whose header has not been processed are kept in
 * posting order (c->recvs), and an arrived header waits until every older
 * receive that could match the same (source, tag) has processed its own.
 * Testing the older ones first is not enough: MPI may report the later
 * header complete while the older, already matched, is not yet.  A send
 * posts its data only when no older send to the same (peer, tag) is still
 * waiting to post its own (c->sends). */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_internal.h"

enum { PH_HEADER, PH_DATA, PH_ACK, PH_DONE };

struct dv_mpi_request {
  dv_mpi_spare link; /* first: comm.c frees the spare ones */
  dv_mpi_comm *c;
  dv_mpi_request *qnext; /* in c->sends or c->recvs while queued */
  int queued;
  int hdr_in; /* the header receive completed (hst); processed once the older ones are */
  MPI_Status hst;
  int is_send, phase, use_pipe, mode, answered;
  dv_array *user;  /* retained */
  dv_array *dense; /* packed copy or receive buffer (retained), NULL if none */
  dv_stream *stream;
  int peer, tag;
  int64_t chunk, n;
  int64_t hdr[DV_MPI_HDR_LEN];
  int64_t ack[DV_MPI_NOTE_LEN]; /* the answer (status, header) or a notice */
  MPI_Request hreq, areq;
  MPI_Request *dreq, dreq1; /* dreq is &dreq1 for a single message */
  int ndreq;
  MPI_Datatype elem, derived;
  int elem_owned, derived_owned;
  dv_mpi_pipe pipe;
  dv_mpi_path path;
  int64_t nchunks;
  void *ptr;         /* host or device address given to MPI */
  MPI_Datatype type; /* elem, or the derived datatype */
  int count_per;     /* 1 with the derived datatype (one message), else 0 */
  void *scratch;     /* the drained data of a rejected eager message */
  MPI_Datatype drain_type;
  int drain_owned;
  dv_status status;
  MPI_Status mstat;
  char msg[512];
};

/* ---- the send and receive queues (see the file comment) ---------------------- */

static void enqueue(dv_mpi_request **head, dv_mpi_request *r) {
  while (*head) head = &(*head)->qnext;
  *head = r;
  r->qnext = NULL;
  r->queued = 1;
}

static void dequeue(dv_mpi_request *r) {
  if (!r->queued) return;
  dv_mpi_request **head = r->is_send ? &r->c->sends : &r->c->recvs;
  while (*head && *head != r) head = &(*head)->qnext;
  if (*head) *head = r->qnext;
  r->qnext = NULL;
  r->queued = 0;
}

/* 1 when a send queued before r (all queued sends when r is not queued)
 * goes to the same (peer, tag) and has not posted its data yet. */
static int older_send(const dv_mpi_request *r) {
  for (const dv_mpi_request *q = r->c->sends; q && q != r; q = q->qnext)
    if (q->peer == r->peer && q->tag == r->tag) return 1;
  return 0;
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

static void cancel(MPI_Request *q) {
  if (*q == MPI_REQUEST_NULL) return;
  MPI_Cancel(q);
  MPI_Wait(q, MPI_STATUS_IGNORE);
}

static void request_free(dv_mpi_request *r) {
  if (!r) return;
  dv_mpi_comm *c = r->c;
  dequeue(r);
  if (r->use_pipe) dv_mpi__pipe_abort(&r->pipe); /* prepared, never finished */
  for (int i = 0; i < r->ndreq; i++) cancel(&r->dreq[i]);
  cancel(&r->hreq);
  cancel(&r->areq);
  if (r->dreq != &r->dreq1) free(r->dreq);
  if (r->derived_owned) MPI_Type_free(&r->derived);
  if (r->elem_owned) MPI_Type_free(&r->elem);
  if (r->drain_owned) MPI_Type_free(&r->drain_type);
  free(r->scratch);
  dv_array_release(r->dense);
  dv_array_release(r->user);
  atomic_fetch_sub(&c->pending, 1);
  if (c->nspare < DV_MPI_SPARE_MAX) { /* kept for the next request: no allocation per message */
    r->link.next = c->spare;
    c->spare = &r->link;
    c->nspare++;
  } else {
    free(r);
  }
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
    if (r->path == DV_MPI_PATH_HOST && !(c->flags & DV_MPI_FORCE_PACK) && dv_mpi__derivable(a)) {
      if (r->nchunks <= 1) { /* one datatype for the whole view */
        if ((s = dv_mpi__derived(a, r->elem, &r->derived)) != DV_OK) return s;
        r->derived_owned = 1;
        r->type = r->derived;
      }
      r->count_per = 1; /* several chunks: one datatype per chunk, made by launch() */
      atomic_fetch_add(&c->derived_types, 1);
    } else {
      if ((s = dv_mpi__dense_c(c, a, r->stream, r->is_send ? a : NULL, &r->dense)) != DV_OK)
        return s;
      dv_mpi__path(c, r->dense, &r->ptr);
    }
  }
  /* work queued on the stream that reads or writes the memory comes first */
  if ((s = dv_stream_synchronize(r->stream)) != DV_OK) return s;
  if (r->nchunks > 1) {
    r->dreq = calloc((size_t)r->nchunks, sizeof *r->dreq);
    if (!r->dreq) {
      r->dreq = &r->dreq1;
      return dv_mpi__fail(DV_ERR_HOST_OUT_OF_MEMORY, "send/recv: no memory");
    }
  }
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
    MPI_Datatype t = r->type;
    if (r->count_per && r->nchunks > 1) { /* this chunk's elements of the strided view */
      dv_status s = dv_mpi__derived_range(r->user, r->elem, lo, cnt, &t);
      if (s != DV_OK) return s;
    }
    int err = r->is_send ? MPI_Isend(b, count, t, r->peer, r->tag, c->data, &r->dreq[k])
                         : MPI_Irecv(b, count, t, r->peer, r->tag, c->data, &r->dreq[k]);
    if (t != r->type) MPI_Type_free(&t); /* the operation keeps what it needs */
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

/* A rejected eager message: its data is on its way; receive it into a
 * scratch buffer (into nothing, truncated, if that cannot be allocated). */
static int drain(dv_mpi_request *r) {
  const int64_t *h = r->hdr;
  int64_t n = 1;
  for (int64_t d = 0; d < h[HDR_NDIM] && d < DV_MAXDIMS; d++) n *= h[HDR_SHAPE + d];
  if (n == 0) return MPI_SUCCESS; /* an empty array sends no data message */
  const dv_dtype *dt = dv_dtype_get((dv_type_id)h[HDR_DTYPE]);
  int count = (int)n; /* the sender's eager messages are below INT_MAX bytes */
  r->drain_type = MPI_BYTE;
  if (!dt || dv_mpi__type(dt, &r->drain_type, &r->drain_owned) != DV_OK) { /* a record: bytes */
    count = (int)(n * h[HDR_ITEMSIZE]);
    r->drain_type = MPI_BYTE;
  }
  r->scratch = malloc((size_t)(n * h[HDR_ITEMSIZE]) + 1);
  if (!r->scratch) count = 0;
  r->dreq = &r->dreq1;
  r->ndreq = 1;
  return MPI_Irecv(r->scratch, count, r->drain_type, r->peer, r->tag, r->c->data, &r->dreq1);
}

/* 1 when a receive queued before r could match r's header's (source, tag)
 * and has not processed its header yet: its data receive comes first. */
static int older_recv(const dv_mpi_request *r) {
  for (const dv_mpi_request *q = r->c->recvs; q && q != r; q = q->qnext)
    if ((q->peer == MPI_ANY_SOURCE || q->peer == r->hst.MPI_SOURCE) &&
        (q->tag == MPI_ANY_TAG || q->tag == r->hst.MPI_TAG))
      return 1;
  return 0;
}

/* A receive's header arrived (or not yet, or an older receive's has not
 * been processed: 0).  Compare, prepare, answer a SYNC header, start the
 * data receive; or, on a rejection, answer or send a notice and drain. */
static int recv_header(dv_mpi_request *r) {
  dv_mpi_comm *c = r->c;
  int flag = 0, err = MPI_SUCCESS;
  if (!r->hdr_in) {
    err = MPI_Test(&r->hreq, &flag, &r->hst);
    if (err != MPI_SUCCESS) {
      dequeue(r);
      fail(r, dv_mpi__mpi(err, "header receive"));
      r->phase = PH_DONE;
      return 1;
    }
    if (!flag) return 0;
    r->hdr_in = 1;
  }
  if (older_recv(r)) return 0;
  MPI_Status st = r->hst;
  dequeue(r);
  r->peer = st.MPI_SOURCE;
  r->tag = st.MPI_TAG;
  r->mstat = st;
  int eager =
      r->hdr[HDR_MAGIC] == DV_MPI_HDR_MAGIC && r->hdr[HDR_MODE] == DV_MPI_EAGER && !r->hdr[HDR_ERR];
  int64_t mine[DV_MPI_HDR_LEN];
  dv_mpi__hdr_fill(mine, r->user, r->chunk, r->status, 0);
  char msg[512];
  dv_status s = dv_mpi__hdr_compare(r->hdr, mine, r->peer, c->rank, msg, sizeof msg);
  if (s == DV_OK) {
    r->chunk = r->hdr[HDR_CHUNK] > 0 ? r->hdr[HDR_CHUNK] : r->chunk; /* the sender's chunking */
    s = prepare(r);
    if (s != DV_OK) snprintf(msg, sizeof msg, "%s", dv_last_error());
  }
  if (!eager) {
    atomic_fetch_add(&c->headers, 1);
    r->ack[0] = s;
    memcpy(r->ack + 1, mine, sizeof(int64_t) * (size_t)dv_mpi__hdr_len(mine));
    err = MPI_Isend(r->ack, 1 + dv_mpi__hdr_len(mine), MPI_INT64_T, r->peer, r->tag, c->ack,
                    &r->areq);
  } else if (s != DV_OK) {
    r->ack[0] = s;
    memcpy(r->ack + 1, r->hdr, sizeof(int64_t) * DV_MPI_HDR_LEN);
    memcpy(r->ack + 1 + DV_MPI_HDR_LEN, mine, sizeof(int64_t) * DV_MPI_HDR_LEN);
    err = MPI_Isend(r->ack, DV_MPI_NOTE_LEN, MPI_INT64_T, r->peer, r->tag, c->note, &r->areq);
    if (err == MPI_SUCCESS) c->notes_sent[r->peer]++;
    if (err == MPI_SUCCESS) err = drain(r);
  }
  if (err != MPI_SUCCESS) {
    fail(r, dv_mpi__mpi(err, eager ? "rejection notice" : "header answer"));
    r->phase = PH_ACK;
    return 1;
  }
  if (s != DV_OK) {
    if (r->status == DV_OK) atomic_fetch_add(&c->mismatches, 1);
    fail(r, dv_mpi__fail(s, "%s", msg));
    r->phase = eager ? PH_DATA : PH_ACK;
    return 1;
  }
  s = launch(r);
  if (s == DV_OK && r->use_pipe) { /* post the staged engine's first receives now, in order */
    int fin = 0;
    s = dv_mpi__pipe_step(&r->pipe, &fin);
    if (s != DV_OK) {
      dv_mpi__pipe_abort(&r->pipe);
      r->use_pipe = 0;
    } else if (fin) {
      r->use_pipe = 0;
    }
  }
  if (s != DV_OK) {
    fail(r, s);
    r->phase = PH_ACK;
    return 1;
  }
  r->phase = PH_DATA;
  return 1;
}

static int advance(dv_mpi_request *r);

/* A SYNC send's header phase: 0 while the answer (or an older send to the
 * same (peer, tag)) is awaited. */
static int send_header(dv_mpi_request *r) {
  dv_mpi_comm *c = r->c;
  if (!r->answered) {
    int flag = 0;
    MPI_Request two[2] = {r->hreq, r->areq};
    int err = MPI_Testall(2, two, &flag, MPI_STATUSES_IGNORE);
    r->hreq = two[0];
    r->areq = two[1];
    if (err != MPI_SUCCESS) {
      fail(r, dv_mpi__mpi(err, "header exchange"));
      r->phase = PH_DONE;
      return 1;
    }
    if (!flag) return 0;
    r->answered = 1;
    if (r->ack[0] != DV_OK) {
      char mine[256], theirs[256];
      dv_mpi__hdr_describe(r->hdr, mine, sizeof mine);
      dv_mpi__hdr_describe(r->ack + 1, theirs, sizeof theirs);
      atomic_fetch_add(&c->mismatches, 1);
      fail(r,
           dv_mpi__fail((dv_status)r->ack[0],
                        "rank %d rejected the message from rank %d (%s): sent %s, receiver has %s",
                        r->peer, c->rank, dv_status_name((dv_status)r->ack[0]), mine, theirs));
      r->phase = PH_DONE;
      return 1;
    }
    if (r->hdr[HDR_ERR]) { /* our own local error, now known to the receiver */
      r->phase = PH_DONE;
      return 1;
    }
    if (!r->use_pipe && r->nchunks <= 1) dv_mpi__seen_add(c, r->peer, r->tag, r->hdr);
  }
  if (older_send(r)) { /* their data must be posted first: move them on (r may be waited alone) */
    for (dv_mpi_request *q = c->sends, *next; q && q != r; q = next) {
      next = q->qnext;
      if (q->peer == r->peer && q->tag == r->tag) advance(q);
    }
    if (older_send(r)) return 0;
  }
  if (!r->use_pipe) dequeue(r);
  dv_status s = launch(r);
  if (s != DV_OK) {
    dequeue(r);
    fail(r, s);
    r->phase = PH_DONE;
    return 1;
  }
  r->phase = PH_DATA;
  return 1;
}

/* Advance r without blocking; returns 1 when it reached PH_DONE. */
static int advance(dv_mpi_request *r) {
  dv_mpi_comm *c = r->c;
  int flag = 0, err;
  if (r->phase == PH_HEADER) {
    if (r->is_send) {
      if (!send_header(r)) return 0;
    } else {
      for (dv_mpi_request *q = c->recvs, *next; q && q != r; q = next) {
        next = q->qnext; /* older receives first: their data receives are posted first */
        recv_header(q);
      }
      if (!recv_header(r)) return 0;
    }
    if (r->phase == PH_DONE) return 1;
  }
  if (r->phase == PH_DATA) {
    if (r->use_pipe) {
      int fin = 0;
      dv_status s = dv_mpi__pipe_step(&r->pipe, &fin);
      if (s != DV_OK) {
        dv_mpi__pipe_abort(&r->pipe);
        r->use_pipe = 0;
        dequeue(r);
        fail(r, s);
        r->phase = PH_ACK;
      } else if (!fin) {
        if (r->is_send && r->pipe.netted == r->pipe.nchunks) dequeue(r); /* all chunks posted */
        return 0;
      } else {
        r->use_pipe = 0;
        dequeue(r);
      }
    } else if (r->ndreq == 1) {
      MPI_Status st;
      err = MPI_Test(&r->dreq[0], &flag, &st);
      if (err != MPI_SUCCESS) { /* (a drain into nothing ends truncated: its status is set) */
        fail(r, dv_mpi__mpi(err, r->is_send ? "send" : "receive"));
        r->phase = PH_ACK;
        return advance(r);
      }
      if (!flag) return 0;
      if (!r->is_send && (c->flags & DV_MPI_NO_HEADER)) r->mstat = st;
    } else if (r->ndreq) {
      err = MPI_Testall(r->ndreq, r->dreq, &flag, MPI_STATUSES_IGNORE);
      if (err != MPI_SUCCESS) {
        fail(r, dv_mpi__mpi(err, r->is_send ? "send" : "receive"));
        r->phase = PH_ACK;
        return advance(r);
      }
      if (!flag) return 0;
    }
    if (r->status == DV_OK) {
      dv_status s = finish_data(r);
      if (s != DV_OK) fail(r, s);
    }
    r->phase = PH_ACK;
  }
  if (r->phase == PH_ACK) {
    MPI_Request *last = r->is_send ? &r->hreq : &r->areq;
    if (*last != MPI_REQUEST_NULL) {
      err = MPI_Test(last, &flag, MPI_STATUS_IGNORE);
      if (err != MPI_SUCCESS)
        fail(r, dv_mpi__mpi(err, r->is_send ? "header send" : "header answer"));
      else if (!flag)
        return 0;
    }
    r->phase = PH_DONE;
  }
  return r->phase == PH_DONE;
}

static dv_mpi_request *request_new(dv_mpi_comm *c) {
  dv_mpi_request *r;
  if (c->spare) {
    r = (dv_mpi_request *)c->spare;
    c->spare = c->spare->next;
    c->nspare--;
  } else if (!(r = malloc(sizeof *r))) {
    return NULL;
  }
  /* every field but the large buffers, which are written before they are read */
  r->link.next = NULL;
  r->c = c;
  r->qnext = NULL;
  r->queued = r->hdr_in = r->is_send = r->phase = r->use_pipe = r->mode = r->answered = 0;
  r->user = r->dense = NULL;
  r->stream = NULL;
  r->chunk = r->n = r->nchunks = 0;
  r->hreq = r->areq = r->dreq1 = MPI_REQUEST_NULL;
  r->dreq = &r->dreq1;
  r->ndreq = 0;
  r->elem = r->derived = r->type = r->drain_type = MPI_BYTE;
  r->elem_owned = r->derived_owned = r->drain_owned = r->count_per = 0;
  r->path = DV_MPI_PATH_HOST;
  r->ptr = r->scratch = NULL;
  r->status = DV_OK;
  r->msg[0] = 0;
  atomic_fetch_add(&c->pending, 1);
  return r;
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
  /* an earlier eager message to this peer was rejected: this send reports it */
  int64_t mode = DV_MPI_SYNC;
  if (header && is_send && peer != MPI_PROC_NULL && local == DV_OK) {
    char nmsg[1024];
    dv_status ns = dv_mpi__notice_take(c, peer, nmsg, sizeof nmsg);
    if (ns != DV_OK) {
      local = ns;
      mode = DV_MPI_LATE;
      snprintf(lmsg, sizeof lmsg, "%s: %.300s; this send fails on both ranks and moves nothing", fn,
               nmsg);
    }
  }
  dv_mpi_request *r = request_new(c);
  if (!r) return dv_mpi__fail(DV_ERR_HOST_OUT_OF_MEMORY, "%s: no memory", fn);
  r->is_send = is_send;
  r->user = dv_array_retain(a);
  r->stream = a ? dv_mpi__stream(a, stream) : NULL;
  r->peer = peer;
  r->tag = tag;
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
    r->phase = PH_HEADER;
    if (is_send) {
      if (local == DV_OK && (local = prepare(r)) != DV_OK) {
        r->status = local;
        snprintf(r->msg, sizeof r->msg, "%s", dv_last_error());
      }
      dv_mpi__hdr_fill(r->hdr, a, r->chunk, local, mode);
      /* eager: one message already accepted with this header and tag, and
       * no older send to the same (peer, tag) still to post its data */
      if (local == DV_OK && !r->use_pipe && r->nchunks <= 1 &&
          dv_array_nbytes(a) <= (int64_t)INT32_MAX && dv_mpi__seen(c, peer, tag, r->hdr) &&
          !older_send(r))
        r->hdr[HDR_MODE] = DV_MPI_EAGER;
      r->mode = (int)r->hdr[HDR_MODE];
      err = MPI_Isend(r->hdr, dv_mpi__hdr_len(r->hdr), MPI_INT64_T, peer, tag, c->hdr, &r->hreq);
      if (r->mode == DV_MPI_EAGER) {
        atomic_fetch_add(&c->eager, 1);
        dv_status s = err == MPI_SUCCESS ? launch(r) : DV_OK;
        if (s != DV_OK) { /* the header is out: the receiver waits for data that cannot come */
          fail(r, s);
          r->phase = PH_ACK;
        } else {
          r->phase = PH_DATA;
        }
      } else {
        atomic_fetch_add(&c->headers, 1);
        if (err == MPI_SUCCESS)
          err = MPI_Irecv(r->ack, 1 + DV_MPI_HDR_LEN, MPI_INT64_T, peer, tag, c->ack, &r->areq);
        if (err == MPI_SUCCESS) enqueue(&c->sends, r);
      }
    } else {
      err = MPI_Irecv(r->hdr, DV_MPI_HDR_LEN, MPI_INT64_T, peer, tag, c->hdr, &r->hreq);
      if (err == MPI_SUCCESS) enqueue(&c->recvs, r);
    }
    if (err != MPI_SUCCESS) {
      dv_status s = dv_mpi__mpi(err, "header exchange");
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

/* Between two polls of a wait: MPI_Test already drives MPI's progress, so
 * spin at first (a small message's round trip is a few microseconds, a
 * sched_yield a system call); then give the CPU away (ranks may share CPUs,
 * and the staged engine waits for copies on other threads). */
static void idle(dv_mpi_comm *c, int spins) {
  if (spins < 512) return;
  dv_mpi__progress(c);
  sched_yield();
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
  for (int spins = 0; !advance(*req); spins++) idle((*req)->c, spins);
  return complete(req, status);
}

DV_API dv_status dv_mpi_waitall(size_t n, dv_mpi_request **reqs) {
  if (!reqs && n) return dv_mpi__fail(DV_ERR_NULL_ARGUMENT, "dv_mpi_waitall: reqs is NULL");
  dv_status first = DV_OK;
  char msg[1024] = "";
  for (int spins = 0;; spins++) {
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
    idle(any, spins);
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
