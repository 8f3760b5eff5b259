/*
 * The pool's records (pool.c: the allocator; pool_snapshot.c: its JSON
 * snapshot), shared by the two files and nothing else.
 */
#ifndef DV_MEMORY_POOL_INTERNAL_H
#define DV_MEMORY_POOL_INTERNAL_H

#include "memory.h"
#include "../core/spin.h"

#define POOL_ALIGN 512u
#define SMALL_MAX ((size_t)1 << 20)
#define SLAB_MIN ((size_t)2 << 20)
#define LARGE_GRAIN ((size_t)2 << 20)
#define NCLASS 48
#define NBIN_FL 48
#define NBIN_SL 8
#define STEAL_SCAN 16

typedef struct pool_stream {
  dv_stream *stream; /* NULL for the context's default stream */
  dv_bstream *bs;    /* NULL once the stream is destroyed */
  pthread_mutex_t m;
  _Atomic uint64_t epoch;     /* frees stamp their block with it; a fence record advances it */
  _Atomic uint64_t done_upto; /* frees with seq < done_upto are complete */
  dv_bevent *fence;
  uint64_t fence_covers;     /* the fence's record covers seq < fence_covers */
  struct pool_stream *next;
  int id;
  /* The per-thread default stream where the backend has one (CUDA): a
   * stream per thread under one record, so a block freed there is never
   * "the same stream" as its next user; its fence goes on the legacy
   * stream, which waits for every blocking stream (issue 13 #5). */
  bool per_thread;
} pool_stream;

typedef struct pool_segment pool_segment;

typedef struct pool_block {
  pool_segment *seg;
  size_t offset, size, requested;
  bool free;
  pool_stream *ps;
  uint64_t seq; /* its stream's epoch when it was freed */
  struct pool_block *prev, *next;   /* address order (large segments) */
  struct pool_block *fprev, *fnext; /* free list */
} pool_block;

struct pool_segment {
  dv_block mem;
  size_t size;
  int cls; /* size class, or -1 for a large segment */
  bool keep; /* the reserve (pool_reserve): released only when the pool goes */
  size_t nfree, nblocks;
  pool_block *blocks; /* small: array of nblocks; large: first block */
  pool_segment *prev, *next;
  void *nvtx_heap; /* its NVTX heap while a tool listens (pool_note.c), else NULL */
};

/* The small-block lock: held for a few dozen instructions, so a spinlock
 * (src/core/spin.h) costs less than a mutex on the fast path. */
typedef struct pool_class {
  size_t size;
  pool_block *free; /* LIFO */
  pool_segment *slabs;
  /* counted under small_m, summed by the statistics */
  uint64_t hits, free_cached;
} pool_class;

/* A counter kept under small_m. */
typedef struct pool_counter {
  uint64_t current, peak, total;
} pool_counter;

typedef struct pool_atomic_counter {
  _Atomic uint64_t current, peak, total;
} pool_atomic_counter;

typedef struct pool {
  dv_context *ctx;
  dv_spin small_m; /* the classes, allocated, active */
  uint8_t cls_lut[SMALL_MAX / POOL_ALIGN]; /* class of (bytes - 1) / POOL_ALIGN */
  pool_class cls[NCLASS];
  int ncls;
  pool_counter allocated, active;
  pthread_mutex_t large_m;
  pool_block *bins[NBIN_FL][NBIN_SL];
  pool_segment *large;
  pthread_mutex_t streams_m;
  pool_stream *streams, *default_ps, *per_thread_ps;
  dv_stream *per_thread_ps_key; /* the context's per-thread stream record */
  int slot_key; /* each stream's record lies in its slot under this key (src/stream/) */
  int next_stream_id;
  pool_atomic_counter reserved;
  _Atomic uint64_t hits, misses, splits, merges, releases, segments, free_cached;
  _Atomic int64_t free_segments; /* large segments known to be entirely free */
  size_t release_threshold;
  bool slow_free; /* a log, NVTX or a release threshold: every free goes the slow way */
  bool noted;     /* a log or NVTX: every allocation goes the slow way too (dv__pool_note) */
  bool nvtx;      /* a listening NVTX tool hears of segments and blocks (CUDA: device addresses) */
  FILE *log;
  pthread_mutex_t log_m;
} pool;

/* pool_note.c: what the pool tells beyond itself.  An allocation or a free
 * of blk (`size` bytes asked for) to the log and to a listening NVTX tool
 * (a region of its segment's heap: the bytes the caller asked for, so that
 * memcheck checks them); a segment made or released (its heap). */
void dv__pool_note(pool *p, const char *action, const dv_block *blk, const pool_block *b, size_t size,
                   const pool_stream *ps);
void dv__pool_note_segment(pool *p, pool_segment *seg, bool made);

/* The manager's statistics (pool.c), which the snapshot ends with. */
dv_status dv__pool_stats(void *state, dv_mm_stats *out);

#endif
