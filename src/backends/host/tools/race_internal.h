/*
 * The race checks' shadow (race.c): the cells, and the state a
 * launch's views share (rc_glob), whose allocations race_shadow.c
 * makes: the global regions' directory pages and chunks, the split words'
 * pool, the pc table.  race.c's top comment has the design; only
 * race.c and race_shadow.c include this.
 */
#ifndef DV_HOST_RACE_INTERNAL_H
#define DV_HOST_RACE_INTERNAL_H
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "check.h"

#define RC_INLINE inline __attribute__((always_inline))
#define RC_NOINLINE __attribute__((noinline))

#define RC_PC_BITS 20
#define RC_PC_LIMIT (1u << RC_PC_BITS) /* indices 0 .. RC_PC_LIMIT - 1 */
#define RC_PC_NONE 0u                  /* an empty record */
#define RC_PC_NULL 1u                  /* a NULL pc, or one past the table */
#define RC_PC_CACHE 64                 /* pcs remembered, direct-mapped */
#define RC_GID_BITS 44
#define RC_GID_MAX ((UINT64_C(1) << RC_GID_BITS) - 1)
#define RC_SEQ_MAX 0xFFFEu /* the last count an event may reach */
#define RC_CHUNK_BITS 12   /* bytes of region per shadow chunk: 4 KiB */
#define RC_CHUNK_BYTES ((size_t)1 << RC_CHUNK_BITS)
#define RC_CHUNK_WORDS (RC_CHUNK_BYTES / 4)
#define RC_PAGE_BITS 9 /* chunk pointers per directory page: 512 */
#define RC_PAGE_SPAN_BITS (RC_CHUNK_BITS + RC_PAGE_BITS)
#define RC_STRIPES 256     /* global cell locks, by the cells' cache line */
#define RC_SEG_BITS 6      /* pool segment s holds 64 << s split-word groups */
#define RC_SEGS 40         /* pool segments at most: 2^46 - 64 split words */

/* The shadow of one word, or of one byte of a split word. */
typedef struct rc_cell {
  uint64_t w, r[2];   /* last write, readers since: gid << RC_PC_BITS | pc; 0: none */
  uint16_t ws, rs[2]; /* the block's event count at each */
  uint16_t gen;       /* shared cells: the block generation they belong to */
} rc_cell;
_Static_assert(sizeof(rc_cell) == 32, "a shadow cell is 32 bytes");

/* A split word's cell: w is a record no access makes (pc index RC_PC_NONE
 * with a nonzero gid), whose gid is 1 + the index of its byte cells' group
 * in the pool (global memory; shared words' byte cells are at 4 * word). */
static inline bool rc_split(const rc_cell *c) { return c->w && !(c->w & (RC_PC_LIMIT - 1)); }

typedef struct rc_chunk {
  rc_cell cell[RC_CHUNK_WORDS];
} rc_chunk;

typedef struct rc_region {
  size_t bytes;
  size_t npages;
  rc_chunk ***page; /* npages directory pages of 2^RC_PAGE_BITS chunks; NULL: untouched */
} rc_region;

/* What a chunk or directory page that could not be allocated points to. */
extern uint64_t dv__rc_dead_marker; /* race_shadow.c's */
#define RC_DEAD_CHUNK ((rc_chunk *)(void *)&dv__rc_dead_marker)
#define RC_DEAD_PAGE ((rc_chunk **)(void *)&dv__rc_dead_marker)

/* A chunk lock, alone on its cache line. */
typedef struct rc_spin {
  atomic_int held;
  char pad[60];
} rc_spin;

/* The launch's global shadow and what its views share. */
typedef struct rc_glob {
  size_t nregions;
  rc_region *reg;
  rc_spin lock[RC_STRIPES];
  pthread_mutex_t alloc; /* directory pages, chunks, the pool */
  pthread_mutex_t pcm;   /* the pc table */
  /* the pool of split global words' byte cells, 4 a group, in segments
   * that double (rc_group); a free group's first cell's w is the next free
   * group's index + 1 (0: none) */
  rc_cell *_Atomic *seg; /* RC_SEGS segment pointers */
  size_t pool_groups, pool_free;
  _Atomic size_t held; /* bytes allocated (hk_race_shadow_bytes), views too */
  atomic_bool degraded;
  atomic_int views;    /* the views alive: the last one frees this */
  /* pcs, interned: pcs[i] is index i's; an open-addressing table finds them */
  const void **pcs;
  uint32_t npcs, pcs_cap;
  const void **hkey;
  uint32_t *hval;
  uint32_t hcap;
} rc_glob;

/* An executor's view. */
struct hk_race {
  rc_glob *gl;
  size_t nregions; /* gl's, for the fast paths */
  rc_region *reg;
  size_t shared_bytes;
  rc_cell *shared;   /* the arena's word cells */
  rc_cell *shared_b; /* the arena's byte cells (of split words) */
  int bt, wave, nwaves;
  int wave_shift; /* log2(wave) when a power of two, else -1 */
  /* the running block */
  uint64_t block, base;                  /* base: block * bt, the gid of its thread 0 */
  bool gid_ok;                           /* every thread of the block has a 44-bit gid */
  uint16_t gen;                          /* shared cells of another generation are empty */
  uint32_t seq, last_local, last_global; /* counts: now, at the last barrier of each fence */
  uint32_t *last_wave;                   /* per wave: at its last synchronization */
  bool dirty;                            /* an access was recorded at the current seq */
  size_t own;                            /* bytes this view allocated for itself */
  const void *pcc_key[RC_PC_CACHE]; /* the last pcs seen, by a hash of their address */
  uint32_t pcc_val[RC_PC_CACHE];
};

static inline void rc_lock(rc_spin *l) {
  for (int i = 0; atomic_exchange_explicit(&l->held, 1, memory_order_acquire); i++)
    while (atomic_load_explicit(&l->held, memory_order_relaxed))
      if (++i > 64) sched_yield();
}
static inline void rc_unlock(rc_spin *l) {
  atomic_store_explicit(&l->held, 0, memory_order_release);
}
static inline rc_spin *rc_lock_of(const hk_race *r, const rc_cell *c) {
  uintptr_t u = (uintptr_t)c >> 6;
  return &r->gl->lock[(u ^ (u >> 8)) & (RC_STRIPES - 1)];
}
static inline void rc_degrade(hk_race *r) {
  atomic_store_explicit(&r->gl->degraded, true, memory_order_relaxed);
}
static inline void rc_held(rc_glob *g, size_t n) {
  atomic_fetch_add_explicit(&g->held, n, memory_order_relaxed);
}

static inline uint64_t rc_gid(uint64_t v) { return v >> RC_PC_BITS; }

/* Group gi of the pool (its segment exists): segment s holds groups
 * 64 * (2^s - 1) to 64 * (2^(s+1) - 1) - 1. */
static inline rc_cell *rc_group(const rc_glob *g, size_t gi) {
  const size_t q = (gi >> RC_SEG_BITS) + 1;
  const int sn = 63 - __builtin_clzll((unsigned long long)q);
  rc_cell *sg = atomic_load_explicit(&g->seg[sn], memory_order_acquire);
  return sg + 4 * (gi - (((size_t)1 << sn) - 1) * ((size_t)1 << RC_SEG_BITS));
}

/* A directory page / chunk pointer, as published (rc_chunk_at). */
static inline rc_chunk **rc_page_get(const rc_region *rg, size_t p) {
  return __atomic_load_n(&rg->page[p], __ATOMIC_ACQUIRE);
}
static inline rc_chunk *rc_chunk_get(rc_chunk **page, size_t k) {
  return __atomic_load_n(&page[k], __ATOMIC_ACQUIRE);
}

/* ---- race_shadow.c ---- */
/* The launch's shared state for nregions regions of bytes[i] bytes each;
 * NULL: no memory.  rc_glob_free: every allocation of it. */
rc_glob *rc_glob_new(size_t nregions, const size_t *bytes);
void rc_glob_free(rc_glob *g);
/* pc's index in the launch's table (RC_PC_NULL: NULL, or no room); the pc
 * of index i (NULL: none). */
uint32_t rc_pc_slow(hk_race *v, const void *pc);
const void *rc_pc_at(const hk_race *v, uint32_t i);
/* Makes page p of rg and its chunk k when not there yet (under `alloc`),
 * publishes them; NULL: dead (no memory, hk_race_degraded says so). */
rc_chunk *rc_chunk_make(hk_race *r, rc_region *rg, size_t p, size_t k);
/* A free group of 4 byte cells from the pool (*gi its index; its cells'
 * content is not defined); false: no memory.  rc_pool_put gives one back. */
bool rc_pool_take(rc_glob *g, size_t *gi);
void rc_pool_put(rc_glob *g, size_t gi);

#endif
