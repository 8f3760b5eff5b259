/* libdevarray_mpi internals: shared by comm.c (communicators, options,
 * errors, dtypes, paths, the staging cache, point-to-point headers, the
 * acceptance cache and rejection notices), pipe.c (the staged engine),
 * p2p.c (send/recv and requests) and coll.c (collectives).  This component
 * sits above devarray's public API: it includes only public headers. */
#ifndef DV_MPI_INTERNAL_H
#define DV_MPI_INTERNAL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "devarray_mpi.h"

/* Staging buffers per pipeline: chunk k uses buffer k % DV_MPI_DEPTH. */
#define DV_MPI_DEPTH 2
/* Header fields of a point-to-point message (only HDR_SHAPE + ndim of them
 * travel). */
#define DV_MPI_HDR_MAGIC 0x64766d7069000002LL /* "dvmpi" v2 */
#define DV_MPI_HDR_LEN (7 + DV_MAXDIMS)
enum { HDR_MAGIC, HDR_ERR, HDR_MODE, HDR_DTYPE, HDR_ITEMSIZE, HDR_CHUNK, HDR_NDIM, HDR_SHAPE };
/* HDR_MODE: SYNC, the sender waits for the receiver's answer before data
 * moves; EAGER, the data follows at once and the receiver answers only a
 * rejection (a notice); LATE, SYNC carrying an earlier message's rejection
 * (HDR_ERR) that the sender learnt of from a notice. */
enum { DV_MPI_SYNC = 0, DV_MPI_EAGER = 1, DV_MPI_LATE = 2 };
/* A rejection notice: status, the rejected header as sent, the receiver's. */
#define DV_MPI_NOTE_LEN (1 + 2 * DV_MPI_HDR_LEN)
/* Headers a peer accepted, remembered per communicator (sender side). */
#define DV_MPI_SEEN_MAX 16
/* Free requests kept per communicator for reuse. */
#define DV_MPI_SPARE_MAX 8
/* Strided host views up to this many bytes travel as MPI derived datatypes
 * in collectives (point-to-point: any size, see dv_mpi__derivable). */
#define DV_MPI_DERIVED_MAX ((int64_t)256 << 10)

/* A set of pinned staging buffers and events for one (context, dtype,
 * chunk) triple; cached on the communicator for reuse. */
typedef struct dv_mpi_stage {
  struct dv_mpi_stage *next;
  dv_context *ctx;
  const dv_dtype *dtype; /* retained */
  int64_t chunk;         /* elements per buffer */
  dv_array *buf[DV_MPI_DEPTH];
  void *host[DV_MPI_DEPTH];
  dv_event *ev_in[DV_MPI_DEPTH];
  dv_event *ev_out[DV_MPI_DEPTH];
} dv_mpi_stage;

/* A header that rank `peer` accepted for messages with `tag`. */
typedef struct dv_mpi_seen {
  int peer, tag, used;
  int64_t hdr[DV_MPI_HDR_LEN];
} dv_mpi_seen;

/* A free request's first member (p2p.c), so that comm.c can free spares. */
typedef struct dv_mpi_spare {
  struct dv_mpi_spare *next;
} dv_mpi_spare;

struct dv_mpi_comm {
  MPI_Comm data, hdr, ack, note; /* duplicates with MPI_ERRORS_RETURN */
  int rank, size;
  unsigned flags;
  size_t chunk_bytes;
  atomic_int pending; /* live requests */
  dv_mpi_stage *cache;
  int ncache;
  dv_mpi_seen seen[DV_MPI_SEEN_MAX];
  int seen_next;                 /* the entry replaced next */
  int *notes_sent, *notes_got;   /* rejection notices per rank (size entries each) */
  dv_mpi_request *sends, *recvs; /* in order: sends whose data is not yet posted; receives
                                    whose header has not arrived (p2p.c) */
  dv_mpi_spare *spare;
  int nspare;
  _Atomic uint64_t calls[DV_MPI_PATH_COUNT], bytes[DV_MPI_PATH_COUNT];
  _Atomic uint64_t chunks, device_packs, host_packs, derived_types, headers, mismatches;
  _Atomic uint64_t eager, late;
};

/* The network step of one chunk: start a non-blocking MPI operation on
 * `count` elements at host address buf (chunk k), into *req. */
typedef int (*dv_mpi_net_fn)(void *arg, int64_t k, void *buf, int count, MPI_Request *req);

/* The staged engine over a dense 1-D array (see pipe.c). */
typedef struct dv_mpi_pipe {
  dv_mpi_comm *c;
  dv_stream *stream;
  dv_array *flat; /* dense 1-D view, retained */
  dv_mpi_stage *st;
  int64_t n, chunk, nchunks;
  int in, out; /* device->host before the network; host->device after */
  dv_mpi_net_fn net;
  void *arg;
  int64_t issued, netted, done;
  MPI_Request req[DV_MPI_DEPTH];
  int out_pending[DV_MPI_DEPTH];
  int flat_phase;    /* DV_MPI_NO_PIPELINE: 0 copy in, 1 network, 2 wait, 3 copy out, 4 done */
  MPI_Request *freq; /* DV_MPI_NO_PIPELINE: one request per chunk */
} dv_mpi_pipe;

/* comm.c */
dv_status dv_mpi__fail(dv_status s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
dv_status dv_mpi__mpi(int err, const char *what);
dv_status dv_mpi__type(const dv_dtype *dt, MPI_Datatype *out, int *owned);
int64_t dv_mpi__chunk_elems(const dv_mpi_comm *c, const dv_dtype *dt);
dv_mpi_path dv_mpi__path(const dv_mpi_comm *c, const dv_array *a, void **ptr);
dv_status dv_mpi__stage_get(dv_mpi_comm *c, dv_context *ctx, const dv_dtype *dt, int64_t chunk,
                            dv_mpi_stage **out);
void dv_mpi__stage_put(dv_mpi_comm *c, dv_mpi_stage *st);
dv_stream *dv_mpi__stream(const dv_array *a, dv_stream *s);
dv_status dv_mpi__dense_c(dv_mpi_comm *c, const dv_array *a, dv_stream *s, const dv_array *from,
                          dv_array **out);
int dv_mpi__derivable(const dv_array *a);
dv_status dv_mpi__derived(const dv_array *a, MPI_Datatype elem, MPI_Datatype *out);
/* The C-order elements [lo, lo + cnt) of a, from element 0, committed. */
dv_status dv_mpi__derived_range(const dv_array *a, MPI_Datatype elem, int64_t lo, int64_t cnt,
                                MPI_Datatype *out);
void dv_mpi__count(dv_mpi_comm *c, dv_mpi_path p, int64_t bytes);
void dv_mpi__progress(dv_mpi_comm *c);
/* headers: fill (a may be NULL: error only), length on the wire, compare
 * (DV_OK or the receiver's verdict with a message), describe ("float64 (3, 4)") */
void dv_mpi__hdr_fill(int64_t *h, const dv_array *a, int64_t chunk, dv_status err, int64_t mode);
int dv_mpi__hdr_len(const int64_t *h);
dv_status dv_mpi__hdr_compare(const int64_t *sent, const int64_t *mine, int sender, int receiver,
                              char *msg, size_t cap);
void dv_mpi__hdr_describe(const int64_t *h, char *buf, size_t cap);
/* the acceptance cache: 1 when `peer` accepted header h with tag before */
int dv_mpi__seen(const dv_mpi_comm *c, int peer, int tag, const int64_t *h);
void dv_mpi__seen_add(dv_mpi_comm *c, int peer, int tag, const int64_t *h);
/* Take the rejection notices `peer` sent (any rank for MPI_ANY_SOURCE) that
 * have arrived: DV_OK if none, else the first one's status with its
 * message in msg; the peer's cache entries are dropped. */
dv_status dv_mpi__notice_take(dv_mpi_comm *c, int peer, char *msg, size_t cap);

/* pipe.c */
dv_status dv_mpi__pipe_start(dv_mpi_pipe *p, dv_mpi_comm *c, dv_array *dense, dv_stream *s,
                             int64_t chunk, int in, int out, dv_mpi_net_fn net, void *arg);
dv_status dv_mpi__pipe_step(dv_mpi_pipe *p, int *finished);
dv_status dv_mpi__pipe_run(dv_mpi_pipe *p);
void dv_mpi__pipe_abort(dv_mpi_pipe *p);

#endif
