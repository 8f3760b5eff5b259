/* Streams and events (stream.c), stream-local slots for the layers above
 * (keys, like thread-local keys), the layer's part of the context
 * (dv_stream_state, ctx->streams), and the one submission path for stream
 * work (dv__stream_submit, below): the layer above the backends. */
#ifndef DV_STREAM_H
#define DV_STREAM_H

#include "../backends/backend.h"
#include "../core/core.h"

/*
 * Stream callbacks' rule (devarray.h, dv_stream_add_callback; issue 36): on
 * the thread that runs a user's callback, no devarray call reaches the
 * backend, on every backend alike (CUDA's drivers forbid their own calls
 * there; a simulator or OpenCL call could wait on the very stream that runs
 * the callback).  The stream layer counts the user's callbacks running on
 * the thread (dv__callback_depth, around fn in stream.c) and refuses:
 * DV_CHECK_NOT_IN_CALLBACK() at each entry point that would reach the
 * backend, before it changes anything (the layers above use it too: array
 * and host-memory allocation, modules, IPC, contexts), and in
 * dv__stream_submit for every copy, memset, launch and constant upload,
 * where it costs nothing: see dv__stream_admit.  The backends know nothing
 * of it.
 */
extern _Thread_local unsigned dv__callback_depth __attribute__((visibility("hidden")));
/* DV_ERR_MISUSE: `what` (a function's name, or the kind of call) was made
 * from inside a stream callback.  Out of line, cold. */
dv_status dv__callback_refused(const char *what);
static inline bool dv__in_callback(void) { return DV_UNLIKELY(dv__callback_depth != 0); }
#define DV_CHECK_NOT_IN_CALLBACK()                                \
  do {                                                            \
    if (dv__in_callback()) return dv__callback_refused(__func__); \
  } while (0)
/* The slow path of a submission's admission (dv__stream_submit): the
 * calling thread has no cached copy counters for ctx (core's dv__stats_tl:
 * its first work for ctx, another context since, or a user's callback
 * running, which clears the cache on entry).  Refuses inside a callback
 * (DV_ERR_MISUSE), else finds or makes the thread's block into *ts
 * (DV_ERR_HOST_OUT_OF_MEMORY when there is no memory for one).  Nothing is
 * queued or changed on failure. */
dv_status dv__stream_admit(dv_context *ctx, dv_thread_stats **ts);

/* Stream-local slots: a layer above keeps a value per stream under a key
 * it was given (dv__stream_key_create), like a thread-local key; the
 * stream layer knows nothing of what it holds. */
#define DV_STREAM_SLOTS 4

typedef struct dv_capture dv_capture;
struct dv__op;

struct dv_stream {
  dv_handle hdr;         /* DV_HANDLE_STREAM: released at the user's last release */
  _Atomic int refs;      /* every reference: the user's and the library's */
  _Atomic int user_refs; /* the user's (they make the context BUSY) */
  dv_context *ctx;
  dv_bstream *bs;
  bool is_default;
  _Atomic int auto_sync_depth;
  void *_Atomic slot[DV_STREAM_SLOTS]; /* by key; NULL until set */
  dv_capture *capture; /* the graph capture in progress on this stream, or NULL (graph.c) */
};

/*
 * Graph capture (issue 40; the public API in graph.c).  While a stream
 * captures, the work devarray queues on it is recorded by the backend
 * (CUDA's and HIP's stream capture; the shared recorder elsewhere) and the
 * capture record below keeps what the graph's work uses alive for as long
 * as the graph: the allocations of the arrays (the array layer, through
 * dv__alloc_after), the modules of its launches, the events it records,
 * the records of its host callbacks.  The streams the work must be
 * ordered before (the op's `after`, dv__stream_order_after) are kept too
 * and ordered after each launch of the graph instead of after the capture.
 * Work that cannot be captured is refused before anything is queued, so a
 * capture is never left half-recorded: an op that waits for the stream
 * (DV_OP_WAIT), synchronize, query, waits for events, copies staged
 * through host memory (dv__capture_refused).  A capturing stream is used
 * by one thread at a time: the capture's own calls are not locked.
 */
typedef struct dv_keep {
  void *obj;
  void (*release)(void *obj);
} dv_keep;
struct dv_capture {
  dv_keep *keep;
  size_t nkeep, capkeep;
  dv_stream **after; /* retained (dv__stream_iretain), each once */
  size_t nafter, capafter;
  size_t ops; /* ops recorded (for dv_graph_info) */
  bool oom;   /* keeping an op's memory failed (dv__alloc_after cannot fail): the op is refused */
  const char *refuse; /* or the op uses memory a graph cannot (pageable host memory): refused, named */
};
/* Keep obj alive while the capture and its graph live (release(obj) at
 * the end).  DV_ERR_HOST_OUT_OF_MEMORY: nothing kept (the caller drops what
 * it would have kept, and fails). */
dv_status dv__capture_keep(dv_capture *c, void *obj, void (*release)(void *obj));
/* Order the streams owners[0..n) after each launch of the graph. */
dv_status dv__capture_after(dv_capture *c, dv_stream *const *owners, size_t n);
/* Release everything c holds and free it (NULL: nothing). */
void dv__capture_free(dv_capture *c);
/* DV_ERR_MISUSE for `what` on a capturing stream: it cannot be captured. */
dv_status dv__capture_refused(const char *what);
/* dv__stream_submit on a capturing stream (out of line). */
dv_status dv__stream_submit_captured(dv_context *ctx, dv_stream *stream, const struct dv__op *op);

struct dv_event {
  dv_handle hdr; /* DV_HANDLE_EVENT */
  dv_context *ctx;
  dv_bevent *be;
  unsigned flags;
  atomic_int refs; /* dv_event_retain / dv_event_release; the last release destroys it */
};

/* Told that stream s is being destroyed (its work is not waited for):
 * value is its slot under the key, arg the key's. */
typedef void (*dv_stream_slot_fn)(dv_context *ctx, dv_stream *s, void *value, void *arg);

/* The stream layer's part of the context (ctx->streams), made by
 * dv__streams_open and freed by dv__streams_close. */
typedef struct dv_stream_state {
  /* The default stream, and the driver's legacy and per-thread default
   * streams (the default one where the backend has none; borrowed by the
   * caller: see dv_context_legacy_stream).  First, so that the default
   * stream's backend stream is one load from the context's record. */
  dv_stream std[3];
  _Atomic int64_t live_streams, live_events; /* the user's */
  _Atomic int64_t live_graphs; /* graphs not yet gone (graph.c; their executables hold them) */
  struct {
    bool used;
    dv_stream_slot_fn destroyed; /* NULL: nothing to tell */
    void *arg;
  } keys[DV_STREAM_SLOTS];
} dv_stream_state;

static inline dv_stream *dv__default_stream(const dv_context *ctx) { return &ctx->streams->std[0]; }
static inline dv_stream *dv__legacy_stream(const dv_context *ctx) { return &ctx->streams->std[1]; }
static inline dv_stream *dv__per_thread_stream(const dv_context *ctx) { return &ctx->streams->std[2]; }

/* The backend stream to use for `s` (NULL: the default stream). */
static inline dv_bstream *dv__bstream(dv_context *ctx, dv_stream *s) {
  return s ? s->bs : ctx->streams->std[0].bs;
}

/* A key for one slot of every stream of ctx, with the call that hears of a
 * stream's destruction (before its backend stream goes; every stream the
 * user made, whatever its slot holds), or NULL.  Keys are made and deleted
 * while the context has no stream of the user's (the layers' init and fini,
 * run by src/context/context.c): destroying a stream reads them unlocked. */
dv_status dv__stream_key_create(dv_context *ctx, dv_stream_slot_fn destroyed, void *arg, int *key);
void dv__stream_key_delete(dv_context *ctx, int key);
/* The value in s's slot under key (NULL: none yet). */
static inline void *dv__stream_slot(dv_stream *s, int key) {
  return atomic_load_explicit(&s->slot[key], memory_order_acquire);
}
/* Set s's slot under key to v unless it holds a value already; returns the
 * value it holds then (v, or the one another thread set first). */
static inline void *dv__stream_slot_publish(dv_stream *s, int key, void *v) {
  void *expected = NULL;
  if (atomic_compare_exchange_strong(&s->slot[key], &expected, v)) return v;
  return expected;
}

/* The stream layer's state: the context's default stream and the driver's
 * built-in ones (legacy, per-thread; the default stream stands in where the
 * backend has none).  Close frees what open made (nothing if it failed). */
dv_status dv__streams_open(dv_context *ctx);
void dv__streams_close(dv_context *ctx);

/* Internal stream references (an allocation made for a stream keeps it). */
dv_stream *dv__stream_iretain(dv_stream *s);
void dv__stream_irelease(dv_stream *s);

/* Wait for the default stream after queuing synchronous work (s NULL). */
dv_status dv__sync_if_null(dv_context *ctx, dv_stream *s);
/* Wait on the host for everything queued on `s` (NULL: the default stream). */
dv_status dv__stream_wait(dv_context *ctx, dv_stream *s);
/* Wait on the host for backend stream bs (NULL: the whole device, every
 * stream of the context). */
dv_status dv__bstream_wait(dv_context *ctx, dv_bstream *bs);

/*
 * The one submission path for stream work.  Every copy, memset, element and
 * field access, reshape copy, constant upload and launch is an op handed to
 * dv__stream_submit, which resolves the stream (NULL: the default stream,
 * and the call is synchronous), runs the op on it, counts the copies the op
 * made for its caller (dv__stats_count), and then either waits for the
 * stream (a synchronous call) or orders the op's `after` streams behind it
 * (dv__stream_order_after).  The layers above describe their work as ops:
 * the planner its transfers and memsets (src/transfer/), the kernel layer
 * its launches and constant writes (src/kernel/launch.c); the array layer
 * names the allocation streams of the arrays the work uses (array.h).
 */
/* The copies an op made for its caller, counted once it is queued. */
typedef struct dv__op_tally {
  int n;
  struct {
    bool dst_host, src_host;
    uint64_t bytes;
  } c[2];
} dv__op_tally;
static inline void dv__tally(dv__op_tally *t, bool dst_host, bool src_host, uint64_t bytes) {
  if (t->n < 2) t->c[t->n].dst_host = dst_host, t->c[t->n].src_host = src_host, t->c[t->n].bytes = bytes, t->n++;
}

enum {
  DV_OP_STOP_ON_ERROR = 1u, /* a failed run is returned at once: no wait, no ordering */
  DV_OP_WAIT = 2u,          /* wait for the stream even when asynchronous (the op's
                             * operands are freed when the call returns) */
  DV_OP_UNSUPPORTED_STOPS = 4u /* a run that says DV_ERR_NOT_SUPPORTED queued nothing:
                                * returned at once (the caller takes another way) */
};

typedef struct dv__op dv__op;
struct dv__op {
  /* Queue the work on bs (the backend stream of `stream`); flags is
   * DV_COPY_SYNC when the call is synchronous (the backend's copies may then
   * run at once).  A copy made for the caller goes into *t once queued. */
  dv_status (*run)(dv_context *ctx, dv_stream *stream, dv_bstream *bs, unsigned flags, const dv__op *op,
                   dv__op_tally *t);
  /* Or this one rectangular copy (its flags set by dv__stream_submit),
   * counted as a copy of width * height * depth bytes between a host side
   * (*_host) or a device side; should the backend refuse it
   * (DV_ERR_NOT_SUPPORTED), run does the work instead. */
  dv_rect *copy;
  bool dst_host, src_host;
  const void *dst, *src; /* the run's operands, as its layer describes them */
  const void *arg;
  unsigned flags; /* DV_OP_* */
  /* Streams whose later work must wait for this op (the allocation streams
   * of memory it uses; NULL entries: nothing to order). */
  dv_stream *const *after;
  size_t nafter;
};

/* Work on `used` (NULL: the default stream) was just queued: every stream of
 * owners[0..n) that is not `used` itself (duplicates once) waits for it, by
 * one event recorded on `used`.  Should making, recording or waiting for the
 * event fail, waits for `used` on the host instead (the work is done then:
 * nothing left to order) and logs why; returns an error only when that
 * fails too.  (The memory layer's rule for which streams: array.h.) */
dv_status dv__stream_order_after(dv_context *ctx, dv_stream *used, dv_stream *const *owners, size_t n);

/* Run op on `stream` (a stream of ctx; NULL: the default stream, and wait).
 * Inline: at each call site the op is a constant the compiler folds (a
 * launch costs what its backend call costs); the ordering is out of line. */
static inline __attribute__((always_inline)) dv_status dv__stream_submit(dv_context *ctx, dv_stream *stream,
                                                                         const dv__op *op) {
  /* Admission first, before anything is queued: the thread's cached copy
   * counters for ctx, the same test that counting them needs anyway; a
   * thread that runs a user's callback has none cached, so the callback rule
   * is checked on the slow path only. */
  if (DV_UNLIKELY(stream && stream->capture)) return dv__stream_submit_captured(ctx, stream, op);
  dv_thread_stats *ts;
  if (DV_LIKELY(dv__stats_tl.id == ctx->stats.id)) {
    ts = dv__stats_tl.t;
  } else {
    dv_status arc = dv__stream_admit(ctx, &ts);
    if (arc) return arc;
  }
  dv_bstream *bs = dv__bstream(ctx, stream);
  unsigned sync = stream ? 0u : DV_COPY_SYNC;
  dv_status rc = DV_ERR_NOT_SUPPORTED;
  if (op->copy) {
    dv_rect *r = op->copy;
    r->flags = sync;
    rc = ctx->be->copy_rect(ctx->bst, bs, r);
    if (DV_LIKELY(rc == DV_OK))
      dv__stats_count(ts, op->dst_host, op->src_host, (uint64_t)(r->width * r->height * r->depth));
  }
  /* A backend that refuses the one copy has queued nothing: the run (when
   * there is one) does the work its own way. */
  if (rc == DV_ERR_NOT_SUPPORTED && op->run) {
    dv__op_tally t;
    t.n = 0;
    rc = op->run(ctx, stream, bs, sync, op, &t);
    if (DV_UNLIKELY(rc != DV_OK) &&
        ((op->flags & DV_OP_STOP_ON_ERROR) || (rc == DV_ERR_NOT_SUPPORTED && (op->flags & DV_OP_UNSUPPORTED_STOPS))))
      return rc;
    for (int i = 0; i < t.n; i++) dv__stats_count(ts, t.c[i].dst_host, t.c[i].src_host, t.c[i].bytes);
  }
  /* A failed run may have queued part of its work: it is waited for, or
   * ordered, as the whole would have been. */
  dv_status r2 = DV_OK;
  if (!stream || (op->flags & DV_OP_WAIT))
    r2 = ctx->be->stream_sync(ctx->bst, bs); /* then nothing is left to order */
  else if (op->nafter)
    r2 = dv__stream_order_after(ctx, stream, op->after, op->nafter);
  return rc ? rc : r2;
}


#endif
