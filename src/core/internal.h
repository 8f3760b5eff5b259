/* Internal declarations shared between the library's layers (dv__ names). */
#ifndef DV_INTERNAL_H
#define DV_INTERNAL_H

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "devarray.h"
#include "../backends/backend.h"

#if defined(__GNUC__)
#define DV_PRINTF(a, b) __attribute__((format(printf, a, b)))
#define DV_LIKELY(x) __builtin_expect(!!(x), 1)
#define DV_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define DV_PRINTF(a, b)
#define DV_LIKELY(x) (x)
#define DV_UNLIKELY(x) (x)
#endif

/* ---- status / errors (status.c) ---- */
/* Set the thread's detail message and return s. */
dv_status dv__error(dv_status s, const char *fmt, ...) DV_PRINTF(2, 3);
#define DV_CHECK_NULL(p)                                                        \
  do {                                                                          \
    if (DV_UNLIKELY((p) == NULL)) return dv__error(DV_ERR_NULL_ARGUMENT, "%s is NULL", #p); \
  } while (0)

/* ---- logging (log.c) ---- */
void dv__log(dv_log_level level, const char *fmt, ...) DV_PRINTF(2, 3);
void dv__log_set_level(dv_log_level level);
dv_log_level dv__log_level(void);

/* ---- host allocation hook with fault injection (alloc.c) ---- */
void *dv__malloc(size_t n);
void *dv__calloc(size_t n, size_t size);
void dv__free(void *p);
char *dv__strdup(const char *s);
void dv__fault_host_set(uint64_t k);
int dv__fault_host_pending(void);

/* ---- checked arithmetic ---- */
static inline bool dv__mul_overflow(int64_t a, int64_t b, int64_t *r) {
  return __builtin_mul_overflow(a, b, r);
}
static inline bool dv__add_overflow(int64_t a, int64_t b, int64_t *r) {
  return __builtin_add_overflow(a, b, r);
}

/* ---- options (options.c) ---- */
typedef enum dv_opt_id {
  DV_OPT_BACKEND,
  DV_OPT_LOG_LEVEL,
  DV_OPT_HOST_MEMORY,
  DV_OPT_HOST_GUARD,
  DV_OPT_MAX_PENDING_COUNT,
  DV_OPT_MAX_PENDING_RATIO,
  DV_OPT_FAULT_DEVICE_ALLOC,
  DV_OPT_FAULT_HOST_ALLOC,
  DV_OPT_FAULT_COPY,
  DV_OPT_OPENCL_DEVICE,
  DV_OPT_CUDA_DEVICE,
  DV_OPT_HOST_STRIDED,
  DV_OPT_HOST_DELAY_US,
  DV_OPT_MEMORY_MANAGER,
  DV_OPT_POOL_RELEASE_THRESHOLD,
  DV_OPT_POOL_LOG,
  DV_OPT_COUNT
} dv_opt_id;

typedef struct dv_optval {
  int set;                 /* value present at this level */
  dv_option_source source;
  int64_t i;               /* int, size, bool */
  double d;                /* double */
  char s[128];             /* string */
} dv_optval;

struct dv_config {
  dv_optval v[DV_OPT_COUNT];
  bool has_mm;            /* a plugged-in memory manager */
  dv_memory_manager mm;
};

/* The process-wide values (environment or defaults), read once. */
const dv_optval *dv__options_process(void);
/* Resolve config over process values into out[DV_OPT_COUNT]. */
void dv__options_resolve(const dv_config *cfg, dv_optval *out);
/* Format a resolved value as text. */
void dv__option_format(dv_opt_id id, const dv_optval *v, char *buf, size_t cap);
int dv__option_lookup(const char *name);
/* Parse a size string ("1G", "512M", "4096"). Returns 0 on success. */
int dv__parse_size(const char *s, int64_t *out);

/* ---- pending-deallocation queue (memory/pending.c) ---- */
typedef dv_status (*dv_dtor_fn)(dv_context *ctx, void *handle, void *aux);

typedef struct dv_pending_entry {
  dv_dtor_fn fn;
  void *handle;
  void *aux;
  size_t bytes;
} dv_pending_entry;

typedef struct dv_pending_queue {
  dv_pending_entry *items;
  size_t count, cap, bytes;
} dv_pending_queue;

/* ---- memory managers (memory/manager.c, memory/pool.c) ---- */
extern const dv_memory_manager dv__mm_direct;
extern const dv_memory_manager dv__mm_pool;
/* The pool's JSON snapshot (pool.c). */
dv_status dv__pool_snapshot(void *state, char *buf, size_t cap, size_t *needed);

/* ---- statistics (stats.c) ---- */
typedef enum dv_stat_kind {
  DV_STAT_DEVICE, DV_STAT_PINNED, DV_STAT_MAPPED, DV_STAT_REGISTERED, DV_STAT_MANAGED,
  DV_STAT_ARRAYS, DV_STAT_STAGING, DV_STAT_KINDS
} dv_stat_kind;

typedef struct dv_stats_state {
  pthread_mutex_t lock;
  dv_counter c[DV_STAT_KINDS];
  uint64_t pending_peak, flushes, oom_retries, failed_frees;
  _Atomic uint64_t copies, staged_copies, bytes_h2d, bytes_d2h, bytes_d2d;
} dv_stats_state;

void dv__stats_init(dv_stats_state *s);
void dv__stats_destroy(dv_stats_state *s);
void dv__stats_add(dv_context *ctx, dv_stat_kind k, uint64_t n);
void dv__stats_sub(dv_context *ctx, dv_stat_kind k, uint64_t n);

/* ---- streams (stream/stream.c) ---- */
struct dv_stream {
  _Atomic int refs;      /* every reference: the user's and the library's */
  _Atomic int user_refs; /* the user's (they make the context BUSY) */
  dv_context *ctx;
  dv_bstream *bs;
  bool is_default;
  _Atomic int auto_sync_depth;
  void *_Atomic pool_slot; /* the pool's per-stream record, set once */
};

struct dv_event {
  dv_context *ctx;
  dv_bevent *be;
  unsigned flags;
};

/* The backend stream to use for `s` (NULL: default). */
static inline dv_bstream *dv__bstream(dv_context *ctx, dv_stream *s);

/* ---- pinned staging pool (memory/staging.c) ---- */
#define DV_STAGING_CLASSES 16 /* 64 KiB .. 2 GiB */
typedef struct dv_staging_buf {
  void *ptr, *handle;
  size_t size;
  int cls;
  struct dv_staging_buf *next;
} dv_staging_buf;
typedef struct dv_staging {
  pthread_mutex_t m;
  dv_staging_buf *free[DV_STAGING_CLASSES];
  size_t cached, reserved;
  uint64_t hits, misses;
} dv_staging;
dv_status dv__staging_get(dv_context *ctx, size_t bytes, dv_staging_buf **out);
void dv__staging_put(dv_context *ctx, dv_staging_buf *b); /* safe from stream callbacks */
void dv__staging_fini(dv_context *ctx);

/* ---- context (context.c) ---- */
struct dv_context {
  const dv_backend *be;
  void *bst; /* backend state */
  dv_optval opt[DV_OPT_COUNT];
  dv_memory_manager mm; /* a copy of the table */
  void *mm_state;
  size_t total_memory; /* read once at creation (Numba reads it at initialize) */

  pthread_mutex_t lock;     /* guards the queue and the defer count */
  dv_pending_queue pending; /* memory, pinned memory, streams, events: one queue, as Numba's */
  int defer_depth;

  dv_stats_state stats;
  dv_staging staging;
  dv_stream default_stream;
  dv_stream legacy_stream, per_thread_stream; /* borrowed; see dv_context_legacy_stream */

  _Atomic int64_t live_arrays, live_streams, live_events, live_scopes, live_allocs;
};

static inline dv_bstream *dv__bstream(dv_context *ctx, dv_stream *s) {
  return s ? s->bs : ctx->default_stream.bs;
}

/* Internal stream references (an allocation made for a stream keeps it). */
dv_stream *dv__stream_iretain(dv_stream *s);
void dv__stream_irelease(dv_stream *s);

/* Queue a destructor (bytes: 0 for pinned memory, streams and events); may
 * flush.  Returns the flush's first error, if any. */
dv_status dv__defer_free(dv_context *ctx, dv_dtor_fn fn, void *handle, void *aux, size_t bytes);
/* Flush the queue unless deferred. */
dv_status dv__flush(dv_context *ctx);
/* Wait for the given stream (or default) after queuing synchronous work. */
dv_status dv__sync_if_null(dv_context *ctx, dv_stream *s);

/* ---- allocations and arrays (array/array.c) ---- */
typedef struct dv_alloc {
  _Atomic int refs;
  dv_context *ctx;
  dv_memory_kind kind;
  bool owned;          /* devarray frees it */
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
  pthread_mutex_t reg_lock;
  dv_array *keep;      /* a host array kept alive by a mapped device view */
} dv_alloc;

struct dv_array {
  _Atomic int refs;
  dv_alloc *alloc;
  const dv_dtype *dtype;
  int ndim;
  int64_t offset; /* byte offset of element [0,..,0] from the allocation start */
  int64_t shape[DV_MAXDIMS];
  int64_t strides[DV_MAXDIMS];
};

/* Make an array descriptor over alloc (retains alloc and dtype). */
dv_status dv__array_new(dv_alloc *alloc, const dv_dtype *dt, int ndim, const int64_t *shape,
                        const int64_t *strides, int64_t offset, dv_array **out);
/* Allocate memory of `kind` for a layout and return a fresh array. */
dv_status dv__array_create(dv_context *ctx, dv_memory_kind kind, int ndim, const int64_t *shape,
                           const dv_dtype *dtype, const int64_t *strides, char order,
                           unsigned flags, dv_stream *stream, dv_array **out);
void dv__alloc_release(dv_alloc *a);
static inline bool dv__is_host_side(const dv_array *a) {
  return a->alloc->kind != DV_MEM_DEVICE && a->alloc->kind != DV_MEM_MANAGED;
}

/* ---- dtype internals (array/dtype.c) ---- */
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

/* ---- layout (array/layout.c): pure functions over shape/strides ---- */
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

/* ---- overlap of two views of the same memory (transfer/overlap.c) ---- */
typedef enum dv_overlap { DV_OVERLAP_NO, DV_OVERLAP_YES, DV_OVERLAP_UNKNOWN } dv_overlap;
/* nd dimensions of extents n, elements of itemsize bytes; one view's element
 * 0 at address a0 with strides as, the other's at b0 with strides bs.
 * UNKNOWN when the exact search exceeds dv__overlap_max_work steps. */
dv_overlap dv__overlap(int nd, const int64_t *n, int64_t a0, const int64_t *as, int64_t b0,
                       const int64_t *bs, int64_t itemsize);
/* The search's work limit; white-box tests lower it to drive the fallback. */
extern _Atomic int64_t dv__overlap_max_work;

/* ---- transfer planner (transfer/planner.c) ---- */
dv_status dv__transfer(dv_context *ctx, const dv_array *dst, const dv_array *src, dv_stream *stream);
dv_status dv__memset(dv_context *ctx, const dv_array *a, int value, dv_stream *stream);

/* ---- helpers ---- */
/* Device memory through the context's manager, with Numba's one
 * flush-and-retry on out-of-memory. */
dv_status dv__device_alloc(dv_context *ctx, size_t bytes, dv_stream *stream, dv_block *out);
dv_status dv__check_order(char order);

#endif
