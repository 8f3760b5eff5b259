/*
 * devarray_mpi.h — device arrays over MPI (libdevarray_mpi).
 *
 * An optional component above devarray's public API: point-to-point and
 * collective communication of dv_arrays of any layout, on any backend, over
 * any MPI communicator.  Link with `pkg-config --libs devarray-mpi` or the
 * CMake target devarray::devarray_mpi; it needs an MPI library (Open MPI),
 * the core libdevarray does not.
 *
 * Wire format.  An array travels as its elements in C (row-major) order,
 * whatever its strides, cut into chunks of `chunk` elements (the
 * communicator's chunk size in bytes divided by the itemsize, at least 1):
 * one MPI message (or non-blocking collective) per chunk.  A receiver takes
 * the sender's chunk size from the header; collectives need the same chunk
 * size on every rank (the default, or DV_MPI_CHUNK in every rank's
 * environment), which their header exchange checks.  Without the header
 * exchange every rank must use the same chunk size.
 *
 * Paths, chosen per call and per array (dv_mpi_stats counts each):
 *  - direct: a CUDA device array and an Open MPI that reports CUDA support at
 *    run time (MPIX_Query_cuda_support()): the device pointer goes to MPI.
 *  - host memory: host, pinned, mapped and managed arrays, and device arrays
 *    of the host simulator: their host pointer goes to MPI with no copy; a
 *    strided view without negative strides is described by MPI derived
 *    datatypes (point-to-point: one per chunk, at any size; collectives: up
 *    to 256 KiB and one chunk), others are packed into a host buffer first
 *    (DV_MPI_FORCE_PACK packs always).
 *  - staged: everything else (OpenCL and CUDA device memory), or any array
 *    when DV_MPI_FORCE_STAGED is set.  A strided view is packed on the device
 *    (dv_array_copy_new) first; then chunks go through pinned buffers
 *    (double-buffered): the device-to-host copy of chunk k+1 runs while chunk k
 *    is on the network, and on receipt the host-to-device copy of chunk k runs
 *    while chunk k+1 arrives.
 *
 * Errors.  Every function returns a dv_status and sets dv_last_error().  The
 * communicator is duplicated (four times: data, headers, answers, rejection
 * notices) and the duplicates get MPI_ERRORS_RETURN, so MPI errors come back
 * as statuses (DV_ERR_DRIVER by default; see dv_mpi_status_from_mpi()) with
 * MPI's own message, and user traffic on the original communicator never
 * matches devarray's.  Before data is accepted, a small header (dtype, shape,
 * chunk size, or the sender's own local error) is checked: a mismatch, or a
 * bad argument or failed local preparation (packing, buffers) on any one
 * rank, is reported with the same status on every rank involved, and no
 * data is accepted.  Collectives: one MPI_Allreduce of the fields of every
 * rank, before data moves.  Point-to-point: the receiver compares the
 * sender's header with its own array on every message; how the sender
 * learns the verdict depends on whether it has seen that header accepted:
 *  - SYNC (a round trip): the first message with a given (destination, tag,
 *    dtype, shape, chunk size) on this dv_mpi_comm, a message of several
 *    chunks, a staged one, or one carrying an error: the receiver answers
 *    and data moves only after acceptance, so a rejection fails both ranks
 *    in the same call (as MPI_Ssend, the send completes once matched).
 *  - EAGER (no round trip, as MPI_Send): a single-message send on the host
 *    or direct path whose header this destination accepted for this tag
 *    before (the sender remembers up to 16 (destination, tag) headers per
 *    dv_mpi_comm).  Header and data leave at once.  If the receiver rejects
 *    it (its array differs now), the receiver's call fails at once, the data
 *    is drained, and a notice goes back: the sender's *next* send to that
 *    rank (any tag) that starts after the notice arrived fails with the same
 *    status and a message naming the rejected message, sends no data, and
 *    makes the matching receive fail too (so both ranks see it); the
 *    sender's remembered headers for that rank are dropped, so the send
 *    after it is SYNC again.  A notice not taken that way by the sender is
 *    returned by its dv_mpi_comm_destroy.  The send that was rejected itself
 *    returned DV_OK.  dv_mpi_stats counts eager sends and notices taken.
 * A copy or MPI failure in the middle of a transfer is reported only where
 * it happened.  With DV_MPI_NO_HEADER no header travels: a mismatch is then
 * MPI's (truncation) or undefined, and a rank that fails its local checks
 * returns while its peers may wait forever.
 *
 * Streams.  Every operation takes a dv_stream (NULL: the array's context's
 * default stream).  Data sent is read after the work queued on that stream
 * before the call; data received is written in that stream's order and is
 * complete on the host and on the stream when the call (or dv_mpi_wait)
 * returns.
 *
 * Ordering.  Messages from one rank to another with one tag are received
 * in the order they were sent (MPI's rule), eager or not: a send does not
 * post its data before an older send to the same (rank, tag) has posted its
 * own, and a receive's data is matched in the order the headers were.  Two
 * messages between the same two ranks with the same tag on the same
 * communicator must not be in flight at once when either spans several
 * chunks (their chunks could interleave): use distinct tags.
 *
 * Threads.  The MPI library must be initialised (MPI_Init or
 * MPI_Init_thread) before dv_mpi_comm_create.  Calls on one dv_mpi_comm (and
 * its requests) must not run concurrently; threads that communicate at once
 * each use their own dv_mpi_comm, with MPI initialised for
 * MPI_THREAD_MULTIPLE.  dv_mpi_stats_get may be called from any thread at
 * any time.  Requests are not completed by devarray events: completion is
 * dv_mpi_test/wait/waitall (after which received data is on the stream and
 * the host).
 */
#ifndef DEVARRAY_MPI_H
#define DEVARRAY_MPI_H

#include <mpi.h>
#include <stdint.h>

#include "devarray.h"

#ifdef __cplusplus
extern "C" {
#endif

/** @defgroup mpi MPI (libdevarray_mpi)
 *  Device arrays over MPI: send/recv, broadcast, allreduce, gather.
 *  @{ */

/** A devarray view of an MPI communicator (duplicates of it, options, statistics). */
typedef struct dv_mpi_comm dv_mpi_comm;
/** A pending non-blocking send or receive (dv_mpi_isend(), dv_mpi_irecv()). */
typedef struct dv_mpi_request dv_mpi_request;

/** Flag: use the staged path for every array (tests it on the host backend); env DV_MPI_STAGED=1.
 */
#define DV_MPI_FORCE_STAGED 0x1u
/** Flag: skip the header exchange (see the file comment); env DV_MPI_HEADER=0. */
#define DV_MPI_NO_HEADER 0x2u
/** Flag: pack strided host views into a buffer instead of an MPI derived datatype; env
 * DV_MPI_PACK=1. */
#define DV_MPI_FORCE_PACK 0x4u
/** Flag: staged path without pipelining (copy everything, then send; for comparisons); env
 * DV_MPI_PIPELINE=0. */
#define DV_MPI_NO_PIPELINE 0x8u

/** Reductions for dv_mpi_allreduce(). */
typedef enum dv_mpi_op {
  DV_MPI_SUM = 0,  /**< sum (bool: logical or, as NumPy's add) */
  DV_MPI_PROD = 1, /**< product (bool: logical and) */
  DV_MPI_MIN = 2,  /**< minimum (bool: and; complex: DV_ERR_NOT_SUPPORTED) */
  DV_MPI_MAX = 3   /**< maximum (bool: or; complex: DV_ERR_NOT_SUPPORTED) */
} dv_mpi_op;

/** The paths of the file comment, as indices of dv_mpi_stats's arrays. */
typedef enum dv_mpi_path {
  DV_MPI_PATH_DIRECT = 0, /**< device pointer given to a CUDA-aware MPI */
  DV_MPI_PATH_HOST = 1,   /**< host memory given to MPI, no copy */
  DV_MPI_PATH_STAGED = 2, /**< through pinned host buffers */
  DV_MPI_PATH_COUNT = 3   /**< the number of paths; not a path */
} dv_mpi_path;

/** The version of struct dv_mpi_stats (fields are appended only; 2 added eager and
 * late_rejections). */
#define DV_MPI_STATS_VERSION 2

/** Counters of one dv_mpi_comm since its creation (totals). */
typedef struct dv_mpi_stats {
  uint32_t version; /**< DV_MPI_STATS_VERSION */
  uint32_t size;    /**< set by the caller: sizeof(dv_mpi_stats); on return, the bytes filled */
  uint64_t
      calls[DV_MPI_PATH_COUNT]; /**< arrays moved, per path (a collective counts once per array) */
  uint64_t bytes[DV_MPI_PATH_COUNT]; /**< bytes of array data moved, per path */
  uint64_t chunks;                   /**< staged chunks copied through pinned buffers */
  uint64_t device_packs;             /**< strided views packed/unpacked on the device */
  uint64_t host_packs;               /**< strided views packed/unpacked on the host */
  uint64_t derived_types;            /**< strided host views sent as MPI derived datatypes */
  uint64_t headers;                  /**< header exchanges with a round trip */
  uint64_t mismatches;               /**< calls failed by the header check */
  uint64_t eager;           /**< messages sent with their header, no round trip (version 2) */
  uint64_t late_rejections; /**< rejection notices of eager messages taken (version 2) */
} dv_mpi_stats;

/**
 * Wrap `comm` (collective over it: every rank must call it).  The
 * communicator is duplicated; the caller keeps ownership of `comm` and may
 * free it after this call.  flags: DV_MPI_* flags, or'ed with those set by
 * the environment (DV_MPI_STAGED, DV_MPI_HEADER, DV_MPI_PACK,
 * DV_MPI_PIPELINE; DV_MPI_CHUNK sets the chunk size in bytes, default 1 MiB,
 * with K/M suffixes).  Errors: DV_ERR_NULL_ARGUMENT, DV_ERR_MISUSE (MPI not
 * initialised), DV_ERR_HOST_OUT_OF_MEMORY, MPI errors (DV_ERR_DRIVER).  *out
 * is NULL on failure.  Blocks as MPI_Comm_dup does.
 */
DV_API dv_status dv_mpi_comm_create(MPI_Comm comm, unsigned flags, dv_mpi_comm **out);
/**
 * Free the duplicates, the cached pinned buffers and events (collective,
 * like MPI_Comm_free: it exchanges the counts of rejection notices, one
 * MPI_Alltoall, and takes those this rank has not).  Call it before
 * dv_context_destroy of any context whose arrays it moved (its cached
 * pinned buffers belong to that context).  DV_ERR_BUSY (nothing freed, no
 * MPI call made) while requests on it are pending: call it again once they
 * completed (the other ranks wait in it).  Otherwise everything is freed, and then
 * the status of the first rejection notice of one of this rank's eager
 * sends that no later send reported (see Errors in the file comment) is
 * returned with its message, or DV_OK.  NULL: DV_OK.
 */
DV_API dv_status dv_mpi_comm_destroy(dv_mpi_comm *c);
/**
 * Replace the DV_MPI_* flags (not collective).  DV_MPI_NO_HEADER must be the
 * same on every rank; the others may differ (the wire format does not
 * depend on them).  DV_ERR_NULL_ARGUMENT.  Not thread-safe with operations on c.
 */
DV_API dv_status dv_mpi_comm_set_flags(dv_mpi_comm *c, unsigned flags);
/** The current DV_MPI_* flags (0 for NULL). */
DV_API unsigned dv_mpi_comm_flags(const dv_mpi_comm *c);
/** Set the chunk size in bytes (>= 1; see the wire format for who must agree).
 * DV_ERR_INVALID_ARGUMENT for 0, DV_ERR_NULL_ARGUMENT. */
DV_API dv_status dv_mpi_comm_set_chunk(dv_mpi_comm *c, size_t bytes);
/** This rank's rank in the communicator (-1 for NULL). */
DV_API int dv_mpi_comm_rank(const dv_mpi_comm *c);
/** The communicator's size (0 for NULL). */
DV_API int dv_mpi_comm_size(const dv_mpi_comm *c);
/** Copy the counters into *out: set out->size = sizeof(dv_mpi_stats) first, as for
 * dv_stats; that many bytes are written, and version and size say what was filled.  A
 * size of 0 (or below version 1's) means version 1's layout, so a program built against
 * version 1 that zeroed its struct keeps working; a larger one, the current struct.
 * Thread-safe.  DV_ERR_NULL_ARGUMENT. */
DV_API dv_status dv_mpi_stats_get(const dv_mpi_comm *c, dv_mpi_stats *out);
/**
 * 1 when the MPI library reports CUDA support at run time (Open MPI's
 * MPIX_Query_cuda_support()), 0 otherwise or when built without the query.
 */
DV_API int dv_mpi_cuda_aware(void);
/** The path an operation on `a` takes on c now (for tests and logs); DV_MPI_PATH_COUNT if a or c is
 * NULL. */
DV_API dv_mpi_path dv_mpi_path_of(const dv_mpi_comm *c, const dv_array *a);
/**
 * Map an MPI error code to a status and set dv_last_error() to
 * "<what>: <MPI's message>".  MPI_ERR_TRUNCATE gives DV_ERR_SHAPE_MISMATCH,
 * MPI_ERR_TYPE DV_ERR_BAD_DTYPE, MPI_ERR_COUNT/RANK/TAG/ROOT/ARG/COMM/OP/BUFFER
 * DV_ERR_INVALID_ARGUMENT, MPI_ERR_NO_MEM DV_ERR_HOST_OUT_OF_MEMORY,
 * MPI_ERR_UNSUPPORTED_OPERATION DV_ERR_NOT_SUPPORTED, others DV_ERR_DRIVER;
 * MPI_SUCCESS gives DV_OK and leaves the message.
 */
DV_API dv_status dv_mpi_status_from_mpi(int mpi_err, const char *what);

/**
 * Send all of `a` (any layout, any memory) to rank `dest` with `tag`, and
 * return when `a` may be reused.  With the header exchange on (the default)
 * a SYNC send (see the file comment) completes only once the receiver has
 * matched it (as MPI_Ssend), so two ranks that both send first can
 * deadlock: use dv_mpi_isend()/dv_mpi_irecv().  An EAGER send completes as
 * MPI_Send does.  Errors: DV_ERR_NULL_ARGUMENT, DV_ERR_OVERFLOW (a chunk
 * count above INT_MAX), the receiver's mismatch status
 * (DV_ERR_DTYPE_MISMATCH, DV_ERR_SHAPE_MISMATCH, DV_ERR_INVALID_ARGUMENT)
 * for this message or, reported late, for an earlier eager one to `dest`
 * (then nothing is sent and the matching receive fails too), devarray's
 * copy errors, MPI errors.  Blocks.
 */
DV_API dv_status dv_mpi_send(dv_mpi_comm *c, const dv_array *a, int dest, int tag,
                             dv_stream *stream);
/**
 * Receive into all of `a` (any layout; zero strides are
 * DV_ERR_INVALID_ARGUMENT) from `source` (or MPI_ANY_SOURCE) with `tag` (or
 * MPI_ANY_TAG; both need the header exchange with a staged or chunked
 * message).  The sender's array must have the same dtype and the same shape
 * (DV_ERR_DTYPE_MISMATCH / DV_ERR_SHAPE_MISMATCH here, and on the sender in
 * its call or, for an eager message, in its next send to this rank).
 * status (may be NULL or MPI_STATUS_IGNORE) gets the source and tag.  Blocks.
 */
DV_API dv_status dv_mpi_recv(dv_mpi_comm *c, dv_array *a, int source, int tag, dv_stream *stream,
                             MPI_Status *status);
/**
 * Start a send as dv_mpi_send() and return at once with *req (the array and
 * stream are retained by the request).  Progress happens inside
 * dv_mpi_test(), dv_mpi_wait() and dv_mpi_waitall(); `a` must not be written
 * until the request completes.  On failure *req is NULL and nothing is sent.
 */
DV_API dv_status dv_mpi_isend(dv_mpi_comm *c, const dv_array *a, int dest, int tag,
                              dv_stream *stream, dv_mpi_request **req);
/** Start a receive as dv_mpi_recv() and return at once with *req; see dv_mpi_isend(). */
DV_API dv_status dv_mpi_irecv(dv_mpi_comm *c, dv_array *a, int source, int tag, dv_stream *stream,
                              dv_mpi_request **req);
/**
 * Progress *req without blocking.  When it has completed (or failed),
 * *done is 1, the request is freed, *req set to NULL, status (may be NULL)
 * filled for a receive, and the operation's status returned; otherwise
 * *done is 0 and DV_OK returned.  NULL *req: done, DV_OK.
 */
DV_API dv_status dv_mpi_test(dv_mpi_request **req, int *done, MPI_Status *status);
/** Block until *req completes; frees it, sets *req to NULL and returns its status.  NULL *req:
 * DV_OK. */
DV_API dv_status dv_mpi_wait(dv_mpi_request **req, MPI_Status *status);
/**
 * Block until all n requests complete, progressing all of them (so a
 * send and a receive to each other complete together).  Frees them and sets
 * each to NULL; returns the first failing status (all are completed anyway).
 */
DV_API dv_status dv_mpi_waitall(size_t n, dv_mpi_request **reqs);

/**
 * Broadcast `a` of rank `root` into `a` of every other rank (collective).
 * All ranks' arrays must have the same dtype and shape; any layout.  Blocks.
 * Errors on every rank alike (with the header exchange): DV_ERR_DTYPE_MISMATCH,
 * DV_ERR_SHAPE_MISMATCH, DV_ERR_INVALID_ARGUMENT (root out of range or
 * different between ranks), or the status a rank's local checks failed with.
 */
DV_API dv_status dv_mpi_bcast(dv_mpi_comm *c, dv_array *a, int root, dv_stream *stream);
/**
 * Element-wise reduction of every rank's `send` into every rank's `recv`
 * (collective).  send == NULL or send == recv: in place.  send and recv:
 * same dtype and shape, any layouts and memories.  Numeric dtypes: int*,
 * uint*, float32/64 and complex (sum, prod) map to MPI's predefined types and
 * operations; float16 uses a user-defined MPI operation (computed in float,
 * rounded to half); bool maps sum/max to logical or and prod/min to logical
 * and.  DV_ERR_NOT_SUPPORTED for complex min/max and record dtypes.  Integer
 * overflow wraps as in C/MPI.  Errors as dv_mpi_bcast().  Blocks.
 */
DV_API dv_status dv_mpi_allreduce(dv_mpi_comm *c, const dv_array *send, dv_array *recv,
                                  dv_mpi_op op, dv_stream *stream);
/**
 * Gather every rank's `send` (same dtype and shape everywhere) into `recv`
 * on `root`: recv (ignored elsewhere, may be NULL there) has size x send's
 * size elements of the same dtype, filled rank by rank in C order (e.g.
 * shape (size, *send_shape)).  Staged/packed arrays go through one host
 * buffer (not chunked).  Errors as dv_mpi_bcast(), DV_ERR_SHAPE_MISMATCH for
 * a recv of the wrong size, DV_ERR_OVERFLOW above INT_MAX elements.  Blocks.
 */
DV_API dv_status dv_mpi_gather(dv_mpi_comm *c, const dv_array *send, dv_array *recv, int root,
                               dv_stream *stream);
/** As dv_mpi_gather() with every rank receiving (recv required everywhere). */
DV_API dv_status dv_mpi_allgather(dv_mpi_comm *c, const dv_array *send, dv_array *recv,
                                  dv_stream *stream);

/** @} */

#ifdef __cplusplus
}
#endif
#endif /* DEVARRAY_MPI_H */
