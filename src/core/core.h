/*
 * The core: what every layer uses and what uses no layer.  Status and the
 * thread's detail message, logging, the host-allocation hook, checked
 * arithmetic, options, statistics, Numba's pending-deallocation queue, and
 * the context record that carries them.
 *
 * The layers above, each with its own header, from the top down: the
 * context's lifecycle (src/context/), arrays (src/array/array.h), the
 * transfer planner (src/transfer/transfer.h), memory (src/memory/memory.h),
 * streams (src/stream/stream.h), backends (src/backends/backend.h).  A file
 * includes headers of its own layer and of layers below it only;
 * scripts/check-layers checks that, and the calls between the built
 * objects, with every test run.  The core includes nothing of theirs: the
 * context refers to their parts through pointers to incomplete types.
 */
#ifndef DV_CORE_H
#define DV_CORE_H

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "devarray.h"
#include "spin.h"

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

/* ---- the report channel for `devarray check` (report.c) ---- */
/* The longest report line (one write: atomic on a pipe). */
#define DV_REPORT_MAX 4096
/* Whether the environment opened the channel (DV_REPORT_FD). */
bool dv__report_open_p(void);
/* Send one report ("kernel" or "api", its status, its message) when the
 * channel is open; nothing otherwise.  Thread-safe; never fails. */
void dv__report(const char *category, dv_status s, const char *msg);

/* ---- host allocation hook with fault injection (alloc.c) ---- */
void *dv__malloc(size_t n);
void *dv__calloc(size_t n, size_t size);
void dv__free(void *p);
char *dv__strdup(const char *s);
void dv__fault_host_set(uint64_t k);
int dv__fault_host_pending(void);

/* ---- NVTX through its injection (nvtx.c): nothing unless a tool listens ---- */
/* Whether a tool took NVTX's memory extension / core ranges (loads it once). */
bool dv__nvtx_memory_on(void);
bool dv__nvtx_ranges_on(void);
/* A heap of sub-allocations over [ptr, ptr + bytes) (NULL: none, no tool). */
void *dv__nvtx_heap_register(const void *ptr, size_t bytes, const char *name);
void dv__nvtx_heap_unregister(void *heap);
/* A region (one block handed out) of heap, and its end. */
void dv__nvtx_region_register(void *heap, const void *ptr, size_t bytes);
void dv__nvtx_region_unregister(const void *ptr);
/* A range of devarray's own work on this thread (only when ranges are on). */
void dv__nvtx_push(const char *name);
void dv__nvtx_pop(void);
/* A context made with nvtx_ranges=on: ranges from now on, if a tool listens. */
void dv__nvtx_ranges_enable(void);
/* Set once a context made with nvtx_ranges=on found a listening tool: from
 * then on the process's devarray work is in ranges (one domain, one tool). */
extern atomic_bool dv__nvtx_ranges_enabled;
/* True once ranges are on.  A caller with a range takes an out-of-line
 * path for it (push, the work, pop), so that the common path pays one load
 * and branch and keeps nothing live across its call. */
#define DV_NVTX_RANGES() DV_UNLIKELY(atomic_load_explicit(&dv__nvtx_ranges_enabled, memory_order_relaxed))

/* ---- handles that cannot be used after release (handle.c) ---- */
/* The header every public handle begins with: `magic` is the kind's live
 * word until the caller's last release, the kind's released word after it.
 * (No creation counter: a process-wide atomic would be a cache line every
 * thread's allocations contend for.) */
typedef enum dv_handle_kind {
  DV_HANDLE_ARRAY,
  DV_HANDLE_STREAM,
  DV_HANDLE_EVENT,
  DV_HANDLE_MODULE,
  DV_HANDLE_CONTEXT,
  DV_HANDLE_KINDS
} dv_handle_kind;
typedef struct dv_handle {
  _Atomic uint32_t magic;
} dv_handle;
#define DV__HANDLE_LIVE(kind) (0x64760000u | (uint32_t)(kind))     /* "dv" */
#define DV__HANDLE_RELEASED(kind) (0xdead0000u | (uint32_t)(kind))
/* How many released handles checked mode keeps (process-wide). */
#define DV_HANDLE_QUARANTINE 4096
const char *dv__handle_kind_name(dv_handle_kind kind);
static inline void dv__handle_init(dv_handle *h, dv_handle_kind kind) {
  atomic_store_explicit(&h->magic, DV__HANDLE_LIVE(kind), memory_order_release);
}
/* ---- tracking: live handles and where they were made (track.c) ---- */
extern _Atomic int dv__tracking; /* dv_tracking_enable, DV_TRACK, DV_LEAK_CHECK */
/* How the array layer describes one of its handles for a listing. */
typedef struct dv_track_info {
  int memory;         /* dv_memory_kind of its allocation; -1 unknown */
  uint64_t bytes;     /* its allocation's bytes */
  const void *alloc;  /* its allocation (one count of the bytes per allocation) */
  char what[160];     /* "float32 (3, 4)" */
} dv_track_info;
typedef void (*dv_track_describe_fn)(const void *array, dv_track_info *out);
void dv__track_set_describer(dv_track_describe_fn fn);
void dv__track_add(const void *h, dv_handle_kind kind, dv_context *ctx);
void dv__track_remove(const void *h);
/* The live records of ctx (all for NULL) as JSON, snprintf's way: the
 * length it needs, written up to cap. */
size_t dv__track_json(dv_context *ctx, char *buf, size_t cap);
/* A handle made for a caller: live, and tracked when tracking is on. */
static inline void dv__handle_open(dv_handle *h, dv_handle_kind kind, dv_context *ctx) {
  dv__handle_init(h, kind);
  if (DV_UNLIKELY(atomic_load_explicit(&dv__tracking, memory_order_relaxed))) dv__track_add(h, kind, ctx);
}
/* The caller's last release of it: released from now on, and untracked. */
static inline void dv__handle_close(dv_handle *h, dv_handle_kind kind) {
  atomic_store_explicit(&h->magic, DV__HANDLE_RELEASED(kind), memory_order_release);
  if (DV_UNLIKELY(atomic_load_explicit(&dv__tracking, memory_order_relaxed))) dv__track_remove(h);
}
/* DV_ERR_MISUSE naming fn and the kind, for a header that is not live. */
dv_status dv__handle_error(const dv_handle *h, dv_handle_kind kind, const char *fn);
/* DV_OK for a live handle of `kind`; else DV_ERR_MISUSE "fn: <kind> was
 * released" (or "not a <kind>").  NULL is the caller's to handle. */
static inline dv_status dv__handle_check(const dv_handle *h, dv_handle_kind kind, const char *fn) {
  if (DV_LIKELY(atomic_load_explicit(&((dv_handle *)h)->magic, memory_order_relaxed) ==
                DV__HANDLE_LIVE(kind)))
    return DV_OK;
  return dv__handle_error(h, kind, fn);
}
/* Whether h is a live handle of `kind`: the same test with no error set
 * and no report (the release paths, which report a double release their
 * own way: dv__handle_report). */
static inline bool dv__handle_live(const dv_handle *h, dv_handle_kind kind) {
  return atomic_load_explicit(&((dv_handle *)h)->magic, memory_order_relaxed) == DV__HANDLE_LIVE(kind);
}
/* The check at an entry point returning dv_status (h non-NULL). */
#define DV_CHECK_HANDLE(h, kind)                                          \
  do {                                                                    \
    dv_status dv__hrc = dv__handle_check(&(h)->hdr, (kind), __func__);    \
    if (DV_UNLIKELY(dv__hrc)) return dv__hrc;                             \
  } while (0)
/* Set the error for a release of h that is not live (a double release:
 * "fn: <kind> was released already") and log it; nothing changes. */
void dv__handle_report(const dv_handle *h, dv_handle_kind kind, const char *fn);
/* Free a released handle's memory (size bytes at p, its dv_handle at byte
 * hdr_off; free_fn NULL: dv__free), or in checked mode keep it in the
 * quarantine, all but the header poisoned under AddressSanitizer. */
void dv__handle_retire(void *p, size_t size, size_t hdr_off, bool checked, void (*free_fn)(void *));

/* ---- checked arithmetic ---- */
static inline bool dv__mul_overflow(int64_t a, int64_t b, int64_t *r) {
  return __builtin_mul_overflow(a, b, r);
}
static inline bool dv__add_overflow(int64_t a, int64_t b, int64_t *r) {
  return __builtin_add_overflow(a, b, r);
}

/* ---- reference counts ---- */
/* Drop one reference; true when it was the last.  A holder that reads 1 is
 * the only one (a new reference is only ever made from an existing one), so
 * the common case of a sole owner needs no locked decrement. */
static inline bool dv__ref_drop(_Atomic int *refs) {
  return atomic_load_explicit(refs, memory_order_acquire) == 1 ||
         atomic_fetch_sub_explicit(refs, 1, memory_order_acq_rel) == 1;
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
  DV_OPT_KERNEL_CACHE,
  DV_OPT_KERNEL_CACHE_DIR,
  DV_OPT_KERNEL_CHECK,
  DV_OPT_HOST_CC,
  DV_OPT_HOST_CFLAGS,
  DV_OPT_HOST_FIBER_STACK,
  DV_OPT_HOST_WAVE_SIZE,
  DV_OPT_NVRTC_LIBRARY,
  DV_OPT_HOST_IPC,
  DV_OPT_STAGING_CHUNK,
  DV_OPT_DEVICE,
  DV_OPT_STAGING_THREADS,
  DV_OPT_STAGING_THREAD_MIN,
  DV_OPT_HOST_PRINTF_BUFFER,
  DV_OPT_STAGING_LIMIT,
  DV_OPT_HOST_MODE,
  DV_OPT_HOST_FISSION,
  DV_OPT_KERNEL_TIMEOUT,
  DV_OPT_HIP_DEVICE,
  DV_OPT_HIP_ARCH,
  DV_OPT_HIPRTC_LIBRARY,
  DV_OPT_MEMORY_LIMIT,
  DV_OPT_MEMORY_LIMIT_FRACTION,
  DV_OPT_POOL_RESERVE,
  DV_OPT_PINNED_POOL,
  DV_OPT_PINNED_POOL_RESERVE,
  DV_OPT_PINNED_POOL_LIMIT,
  DV_OPT_ASYNC_POOL,
  DV_OPT_ASYNC_RELEASE_THRESHOLD,
  DV_OPT_NVTX,
  DV_OPT_NVTX_RANGES,
  DV_OPT_COUNT
} dv_opt_id;

typedef struct dv_optval {
  int set;                 /* value present at this level */
  dv_option_source source;
  int64_t i;               /* int, size, bool */
  double d;                /* double */
  char s[DV_OPTION_STRING_MAX + 1]; /* string */
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

/* ---- pending-deallocation queue (pending.c) ---- */
/* Every layer queues its destructors here (arrays their memory, streams
 * and events themselves): the queue runs them and knows none of them. */
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

/* Queue a destructor (bytes: 0 for pinned memory, streams and events); may
 * flush.  Returns the flush's first error, if any. */
dv_status dv__defer_free(dv_context *ctx, dv_dtor_fn fn, void *handle, void *aux, size_t bytes);
/* Flush the queue unless deferred. */
dv_status dv__flush(dv_context *ctx);
/* The byte limit from total_memory and the ratio option (caller holds
 * ctx->lock, or has the context to itself). */
void dv__pending_limits_set(dv_context *ctx);

/* ---- statistics (stats.c) ---- */
typedef enum dv_stat_kind {
  DV_STAT_DEVICE, DV_STAT_PINNED, DV_STAT_MAPPED, DV_STAT_REGISTERED, DV_STAT_MANAGED,
  DV_STAT_ARRAYS, DV_STAT_STAGING, DV_STAT_KINDS
} dv_stat_kind;

/* A counter: atomics, changed either without a lock (dv__counter_add) or
 * under the context's lock (dv__stats_add); read with atomic loads. */
typedef struct dv_atomic_counter {
  _Atomic uint64_t current, peak, total;
} dv_atomic_counter;

typedef struct dv_stats_state {
  pthread_mutex_t lock; /* oom_retries, failed_frees, the threads' blocks */
  /* c[k], every kind but DV_STAT_STAGING: current, peak and total change
   * under the context's lock (ctx->lock, the pending queue's), so that an
   * array's creation counts its memory and itself with one locked
   * instruction and its release drops its count with the queue's entry
   * (issue 23: four locked read-modify-writes per device array made and
   * released were a fifth of its cost).  A free is subtracted as it is
   * made, never held back to the end of a flush: a flush may wait for the
   * device, and another thread's allocation meanwhile would raise the peak
   * past what was ever held.  c[DV_STAT_STAGING] belongs to a backend's
   * staging buffers, which count with dv__counter_add: atomics, no lock. */
  dv_atomic_counter c[DV_STAT_KINDS];
  uint64_t pending_peak, flushes; /* under the context's lock, with the queue (pending.c) */
  uint64_t oom_retries, failed_frees;
  _Atomic uint64_t copies, staged_copies, bytes_h2d, bytes_d2h, bytes_d2d;
  _Atomic uint64_t staging_hits, staging_misses;
  _Atomic uint64_t n_h2d, n_d2h, n_d2d; /* transfers by direction (dv_stats v3) */
  /* Copies counted per thread (dv__stats_count): each thread adds to a block
   * of its own without a read-modify-write; reads sum the blocks (under
   * lock).  id is unique among all contexts ever made, so a thread's cached
   * block is never mistaken for another context's. */
  uint64_t id;
  struct dv_thread_stats *threads;
} dv_stats_state;

void dv__stats_init(dv_stats_state *s);
void dv__stats_destroy(dv_stats_state *s);
void dv__stats_add(dv_context *ctx, dv_stat_kind k, uint64_t n);
void dv__stats_sub(dv_context *ctx, dv_stat_kind k, uint64_t n);
/* A context's counter changes under the context's lock: plain loads and
 * stores of the atomics (readers load them atomically), the peak exact. */
static inline void dv__ctr_add_locked(dv_atomic_counter *c, uint64_t n) {
  uint64_t cur = atomic_load_explicit(&c->current, memory_order_relaxed) + n;
  atomic_store_explicit(&c->current, cur, memory_order_relaxed);
  atomic_store_explicit(&c->total, atomic_load_explicit(&c->total, memory_order_relaxed) + n,
                        memory_order_relaxed);
  if (cur > atomic_load_explicit(&c->peak, memory_order_relaxed))
    atomic_store_explicit(&c->peak, cur, memory_order_relaxed);
}

static inline void dv__ctr_sub_locked(dv_atomic_counter *c, uint64_t n) {
  atomic_store_explicit(&c->current, atomic_load_explicit(&c->current, memory_order_relaxed) - n,
                        memory_order_relaxed);
}
/* dv__stats_sub with ctx->lock held (not DV_STAT_STAGING). */
void dv__stats_sub_locked(dv_context *ctx, dv_stat_kind k, uint64_t n);
/* dv__defer_free (pending.c), subtracting n from statistic k under the
 * queue's lock (a released descriptor from `arrays`: one lock for both). */
dv_status dv__defer_free_counted(dv_context *ctx, dv_dtor_fn fn, void *handle, void *aux, size_t bytes,
                                 dv_stat_kind k, uint64_t n);
/* The same on one counter, for a layer that holds the counter but not the
 * context (a backend's own staging buffers: dv_backend_config). */
void dv__counter_add(dv_atomic_counter *c, uint64_t n);
void dv__counter_sub(dv_atomic_counter *c, uint64_t n);
/* One thread's copy counters for one context (stats.c): written by that
 * thread only (a load and a store, no read-modify-write), read by any under
 * the context's stats lock. */
typedef struct dv_thread_stats {
  _Atomic uint64_t copies, bytes[3], n[3]; /* [0] host to device, [1] device to host, [2] device to device */
  pthread_t owner;
  struct dv_thread_stats *next;
} dv_thread_stats;
/* The calling thread's block of the context (by stats id) it counted for last. */
typedef struct dv_stats_tls {
  uint64_t id;
  dv_thread_stats *t;
} dv_stats_tls;
extern _Thread_local dv_stats_tls dv__stats_tl;
/* The calling thread's block for ctx, found or made and cached in
 * dv__stats_tl (NULL: no memory for one).  The fast path, the cache, is the
 * caller's test (the stream layer's, in dv__stream_submit). */
dv_thread_stats *dv__stats_block(dv_context *ctx);
/* Drop the calling thread's cached block: its next lookup is dv__stats_block. */
static inline void dv__stats_forget_thread(void) { dv__stats_tl.id = 0; }
static inline void dv__stats_bump(_Atomic uint64_t *c, uint64_t n) {
  atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n, memory_order_relaxed);
}
static inline void dv__stats_count(dv_thread_stats *t, bool dh, bool sh, uint64_t bytes) {
  dv__stats_bump(&t->copies, 1);
  if (!(sh && dh)) {
    int dir = sh ? 0 : dh ? 1 : 2;
    dv__stats_bump(&t->bytes[dir], bytes), dv__stats_bump(&t->n[dir], 1);
  }
}

/* ---- the context ---- */
/* Each layer's part, defined in that layer's header and known here by name
 * only: made by the layer's init and freed by its fini, which
 * src/context/context.c calls in order (the layers below first). */
typedef struct dv_backend dv_backend;           /* backends/backend.h */
typedef struct dv_stream_state dv_stream_state; /* stream/stream.h */
typedef struct dv_memory_state dv_memory_state; /* memory/memory.h */
typedef struct dv_array_state dv_array_state;   /* array/array.h */
typedef struct dv_kernel_state dv_kernel_state; /* kernel/kernel_internal.h */

/* Made and torn down by src/context/context.c; every layer reads it.  The
 * core's own: the options, the lock, the pending queue, the statistics. */
struct dv_context {
  dv_handle hdr; /* DV_HANDLE_CONTEXT (handle.c) */
  /* host_mode is checked: released handles are quarantined (handle.c) */
  bool handles_checked;
  const dv_backend *be;
  void *bst; /* backend state */
  const char *backend_name; /* be->name, for the core, which reports it */
  dv_optval opt[DV_OPT_COUNT];
  /* read once at creation (Numba reads it at initialize): the pending
   * queue's byte limit comes from it (dv__pending_limits_set) */
  size_t total_memory;

  dv_spin lock; /* the queue, the defer count, the limits: short sections only */
  dv_pending_queue pending; /* memory, pinned memory, streams, events: one queue, as Numba's */
  int defer_depth;
  /* int(total_memory * the ratio limit), kept with the limits it comes
   * from (dv__pending_limits_set) rather than converted at every enqueue */
  size_t pending_byte_limit;

  dv_stats_state stats;

  dv_stream_state *streams; /* the default streams, the live counts, the slot keys */
  dv_memory_state *memory;  /* the memory manager, its state, the staging pool */
  dv_array_state *arrays;   /* the live scopes (live arrays are stats.c[DV_STAT_ARRAYS]) */
  dv_kernel_state *kernels; /* its programs, modules, dead kernels */
};

/* Two counters at once (neither DV_STAT_STAGING): one lock, inline (an
 * array's creation counts its memory and itself). */
static inline void dv__stats_add2(dv_context *ctx, dv_stat_kind k1, uint64_t n1, dv_stat_kind k2,
                                  uint64_t n2) {
  dv__spin_lock(&ctx->lock);
  dv__ctr_add_locked(&ctx->stats.c[k1], n1);
  dv__ctr_add_locked(&ctx->stats.c[k2], n2);
  dv__spin_unlock(&ctx->lock);
}

#endif
