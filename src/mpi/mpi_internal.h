/* libdevarray_mpi internals: shared by comm.c (communicators, options,
 * errors, dtypes, paths, the staging cache), pipe.c (the staged engine),
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
/* Header fields of a point-to-point message. */
#define DV_MPI_HDR_MAGIC 0x64766d7069000001LL /* "dvmpi" v1 */
#define DV_MPI_HDR_LEN (6 + DV_MAXDIMS)
/* Strided host views up to this many bytes travel as MPI derived datatypes. */
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

struct dv_mpi_comm {
  MPI_Comm data, hdr, ack; /* duplicates with MPI_ERRORS_RETURN */
  int rank, size;
  unsigned flags;
  size_t chunk_bytes;
  atomic_int pending; /* live requests */
  dv_mpi_stage *cache;
  int ncache;
  _Atomic uint64_t calls[DV_MPI_PATH_COUNT], bytes[DV_MPI_PATH_COUNT];
  _Atomic uint64_t chunks, device_packs, host_packs, derived_types, headers, mismatches;
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
void dv_mpi__count(dv_mpi_comm *c, dv_mpi_path p, int64_t bytes);
void dv_mpi__progress(dv_mpi_comm *c);

/* pipe.c */
dv_status dv_mpi__pipe_start(dv_mpi_pipe *p, dv_mpi_comm *c, dv_array *dense, dv_stream *s,
                             int64_t chunk, int in, int out, dv_mpi_net_fn net, void *arg);
dv_status dv_mpi__pipe_step(dv_mpi_pipe *p, int *finished);
dv_status dv_mpi__pipe_run(dv_mpi_pipe *p);
void dv_mpi__pipe_abort(dv_mpi_pipe *p);

#endif
