/*
 * The array layer: dtypes (dtype.c), layout, pure functions over shapes and
 * strides (layout.c), array objects over reference-counted allocations
 * (array.c: their lifetime, creation and accessors; views.c: slices,
 * reshape, fields; copy.c: copies between arrays) and the scopes that
 * register or map host arrays (scope.c).  It
 * describes its arrays to the transfer planner as plain views and gets its
 * memory from the memory layer.
 */
#ifndef DV_ARRAY_H
#define DV_ARRAY_H

#include "../backends/backend.h"
#include "../core/core.h"
#include "../memory/memory.h"
#include "../stream/stream.h"
#include "../transfer/transfer.h"

/* ---- allocations and arrays (array.c, views.c, copy.c) ---- */
/* Extents an allocation record holds room for, for the descriptor made with
 * it (dv__array_create): a new array of up to this many dimensions costs one
 * record, no separate descriptor. */
#define DV_EMBED_DIMS 4

typedef struct dv_alloc {
  /* First: a record recycled through the thread's cache (array.c) keeps
   * its initialised mutex, and the rest is cleared. */
  pthread_mutex_t reg_lock;
  _Atomic int refs;
  dv_context *ctx;
  dv_memory_kind kind;
  bool owned;          /* devarray frees it */
  bool pooled;         /* pinned or mapped memory of the pinned pool (handle: its block) */
  void *buf;           /* device buffer handle (device, mapped device view) */
  size_t buf_offset;   /* byte offset of the allocation inside buf (pool blocks) */
  void *mm_handle;     /* the memory manager's record of the block */
  dv_stream *stream;   /* the stream device memory was allocated for (retained), or NULL */
  void *host;          /* host pointer (host kinds) */
  void *handle;        /* backend host-memory handle (pinned/mapped) */
  size_t bytes;
  void *reg_handle;    /* registration handle while registered */
  void *reg_buf;       /* device handle of the registered (mapped) memory */
  bool user_registered; /* dv_array_register holds one registration */
  int reg_count;       /* dv_array_register / scopes holding it */
  dv_array *keep;      /* a host array kept alive by a mapped device view */
  bool foreign;        /* device memory wrapped by dv_device_array_wrap */
  /* Device memory a plugged-in manager handed out that is not a buffer of
   * the backend (dv__mm_block_known): kept and given back to the manager's
   * free, never to the backend; every access to it is refused (dv__check_live). */
  bool opaque;
  dv_release_fn release; /* foreign: called once the memory is no longer used */
  void *release_user;
  /* Exported for work devarray does not see (a DLPack consumer's own
   * streams): with a stream-ordered manager its free waits for the device
   * first (dv__dtor_device). */
  _Atomic bool outside;
  /* Room for the descriptor made with the record (dv__array_create, up to
   * DV_EMBED_DIMS dimensions): a struct dv_array and its extents.  It is
   * gone with the record, which it outlives never (it holds a reference). */
  int64_t embed_[7 + 2 * DV_EMBED_DIMS];
} dv_alloc;

/* A descriptor is sized by its ndim (56 + 16 * ndim bytes): shape and
 * strides point into its own tail, which dv__array_new allocates with it. */
struct dv_array {
  dv_handle hdr; /* DV_HANDLE_ARRAY: released at the descriptor's last release */
  _Atomic int refs;
  int ndim;
  dv_alloc *alloc;
  const dv_dtype *dtype;
  int64_t offset;   /* byte offset of element [0,..,0] from the allocation start */
  int64_t *shape;   /* ndim extents (dims_) */
  int64_t *strides; /* ndim byte strides (dims_ + ndim) */
  int64_t dims_[];  /* storage of both */
};
_Static_assert(sizeof(struct dv_array) == 7 * sizeof(int64_t), "dv_alloc.embed_ holds a descriptor's header");

/* Whether a is the descriptor inside its allocation record (not freed by
 * itself: it goes with the record). */
static inline bool dv__array_embedded(const dv_array *a) {
  return (const void *)a == (const void *)a->alloc->embed_;
}

/* Make an array descriptor over alloc (retains alloc and dtype). */
dv_status dv__array_new(dv_alloc *alloc, const dv_dtype *dt, int ndim, const int64_t *shape,
                        const int64_t *strides, int64_t offset, dv_array **out);
/* Allocate memory of `kind` for a layout and return a fresh array. */
dv_status dv__array_create(dv_context *ctx, dv_memory_kind kind, int ndim, const int64_t *shape,
                           const dv_dtype *dtype, const int64_t *strides, char order,
                           unsigned flags, dv_stream *stream, dv_array **out);
void dv__alloc_release(dv_alloc *a);
/* Check a layout for a new array (ndim, shape, dtype, strides or order):
 * on success st[] holds the strides, *alloc_bytes the bytes the layout spans
 * and *offset the byte offset of element 0 from the lowest byte. */
dv_status dv__check_layout(int ndim, const int64_t *shape, const dv_dtype *dtype,
                           const int64_t *strides, char order, int64_t *st,
                           int64_t *alloc_bytes, int64_t *offset);
/* A new allocation record of `kind` (one reference, nothing allocated). */
dv_alloc *dv__alloc_new(dv_context *ctx, dv_memory_kind kind);

/* dv__check_live's whole test (below), out of line. */
dv_status dv__check_live_slow(const dv_array *a, const char *what);
/* The error for an access to opaque memory (dv_alloc.opaque). */
dv_status dv__opaque_error(const dv_array *a, const char *what);

/* A stream argument must belong to the context the work runs on.  Every
 * entry point that takes one checks it before it allocates, queues or
 * retains anything, so a refused call leaves nothing behind (a pending free
 * holding the foreign stream, a pool record attached to it). */
static inline dv_status dv__check_stream_fn(const dv_context *ctx, const dv_stream *stream,
                                           const char *fn) {
  if (stream) {
    dv_status rc = dv__handle_check(&stream->hdr, DV_HANDLE_STREAM, fn);
    if (rc) return rc;
  }
  if (stream && stream->ctx != ctx)
    return dv__error(DV_ERR_BACKEND_MISMATCH, "the stream belongs to another context");
  return DV_OK;
}

/* The check in the entry point it is called from (its name in a message). */
#define dv__check_stream(ctx, stream) dv__check_stream_fn((ctx), (stream), __func__)
/* A live array handle, at an entry point that returns a dv_status. */
#define DV_CHECK_ARRAY(a) DV_CHECK_HANDLE((a), DV_HANDLE_ARRAY)

/* Dense strides for a copy of a: its own layout when it is C or F
 * contiguous (or 1-D), else dense in a's stride order (array.c). */
void dv__like_strides(const dv_array *a, int64_t *st);
/* A copy of a laid out densely in `order` with shape (nnd, nshape), on
 * `stream` (copy.c; reshape and ravel when no view exists). */
dv_status dv__reshape_copy(const dv_array *a, int nnd, const int64_t *nshape, char order,
                           dv_stream *stream, dv_array **out);

static inline bool dv__is_host_side(const dv_array *a) {
  return a->alloc->kind != DV_MEM_DEVICE && a->alloc->kind != DV_MEM_MANAGED;
}

/* DV_ERR_INVALID_ARGUMENT when a is a device view of host memory whose
 * mapped scope has ended (its memory is gone), or its memory is opaque
 * (dv__opaque_error); `what` names it in the message ("array", "source",
 * ...).  Size-0 arrays are always live.  Inline: the common case (device
 * memory with its buffer, or host memory, and not opaque) is decided here,
 * on every copy's path. */
static inline dv_status dv__check_live(const dv_array *a, const char *what) {
  const dv_alloc *al = a->alloc;
  if (DV_LIKELY((al->buf || dv__is_host_side(a)) && !al->opaque)) return DV_OK;
  return dv__check_live_slow(a, what);
}

/*
 * Every queued use of an array, in one place.  Work that uses an array is
 * submitted on `stream` (a stream of ctx; NULL: the default stream) with
 * the array's dv__alloc_after among the op's `after` streams
 * (dv__stream_submit, src/stream/stream.h): an array whose memory a
 * stream-ordered manager (the pool) gave to another stream of ctx has that
 * stream ordered after the work (one event, made only then), so that
 * releasing the array meanwhile cannot hand the block out again before the
 * work is done: dv_array_release's "queued work that still uses it
 * completes first".  Memory the manager did not give (host, mapped,
 * managed, foreign, another context's) is left alone (NULL).  Used by
 * copies, memset, element and field access and the copies of reshape and
 * ravel (copy.c), and by launches and constant uploads
 * (src/kernel/launch.c).  The common cases, the direct manager and arrays
 * of the work's own stream, cost a comparison or two.
 */
/* The quick test, exact where it says no: device memory allocated for
 * another stream object than `stream`, or the pinned pool's host memory
 * used on an asynchronous stream the pool has no record of yet
 * (dv__alloc_order_slow decides the rest, and tells the pool: a released
 * pinned array's block is reused after that work, dv__pinned_used), or a
 * stream that captures a graph (the slow path keeps the allocation for the
 * graph: stream.h's capture record). */
static inline bool dv__alloc_maybe_elsewhere(const dv_alloc *al, const dv_stream *stream) {
  /* a capturing stream: the graph keeps the allocation (the slow path) */
  if (DV_UNLIKELY(stream && stream->capture)) return true;
  if (al->kind == DV_MEM_DEVICE) return al->stream != stream;
  return al->pooled && stream && !dv__pinned_known_use(al->handle, stream);
}
dv_stream *dv__alloc_order_slow(dv_context *ctx, const dv_alloc *al, const dv_stream *stream);
static inline dv_stream *dv__alloc_after(dv_context *ctx, const dv_alloc *al, const dv_stream *stream) {
  return DV_UNLIKELY(dv__alloc_maybe_elsewhere(al, stream)) ? dv__alloc_order_slow(ctx, al, stream) : NULL;
}

/* ---- dtype internals (dtype.c) ---- */
typedef struct dv_field {
  char *name;
  const dv_dtype *dtype;
  size_t offset;
  int ndim;
  int64_t shape[DV_MAXDIMS];
} dv_field;

struct dv_dtype {
  _Atomic int refs; /* -1: static */
  dv_type_id id;
  size_t itemsize, alignment;
  const char *name;
  size_t nfields;
  dv_field *fields;
};

const dv_field *dv__dtype_find_field(const dv_dtype *dt, const char *name);

/* ---- layout (layout.c): pure functions over shape/strides ---- */
dv_status dv__layout_size(int ndim, const int64_t *shape, int64_t *size);
/* Byte range [lo, hi) touched relative to element 0 (lo <= 0). Size 0: 0,0. */
dv_status dv__layout_extent(int ndim, const int64_t *shape, const int64_t *strides,
                            int64_t itemsize, int64_t *lo, int64_t *hi);
bool dv__layout_is_c(int ndim, const int64_t *shape, const int64_t *strides, int64_t itemsize);
bool dv__layout_is_f(int ndim, const int64_t *shape, const int64_t *strides, int64_t itemsize);
/* Dense strides for order 'C'/'F'; DV_ERR_OVERFLOW possible. */
dv_status dv__layout_dense(int ndim, const int64_t *shape, int64_t itemsize, char order,
                           int64_t *strides);
/* Dense strides keeping the stride order of `like` (device_array_like). */
void dv__layout_like(int ndim, const int64_t *shape, const int64_t *like, int64_t itemsize,
                     int64_t *strides);
/* NumPy's no-copy reshape; returns false when a copy is needed. */
bool dv__layout_reshape_view(int ndim, const int64_t *shape, const int64_t *strides,
                             int64_t itemsize, int nnd, const int64_t *nshape, char order,
                             int64_t *nstrides);
/* Fill in -1 and check the size: statuses as dv_array_reshape. */
dv_status dv__layout_resolve_shape(int64_t size, int nnd, const int64_t *in, int64_t *out);
/* Drop size-1 dims (Numba's comparison of shapes). */
int dv__layout_squeeze(int ndim, const int64_t *shape, const int64_t *strides, int64_t *oshape,
                       int64_t *ostrides);
/* 'C' or 'F'; DV_ERR_BAD_ORDER otherwise. */
dv_status dv__check_order(char order);

/* ---- the array layer's part of the context (ctx->arrays, scope.c) ---- */
struct dv_array_state {
  _Atomic int64_t live_scopes; /* pinned and mapped scopes not yet ended */
};
dv_status dv__arrays_init(dv_context *ctx);
/* Tell the core how tracking describes an array (array.c). */
void dv__arrays_track_init(void);
void dv__arrays_fini(dv_context *ctx); /* nothing if init failed */

#endif
