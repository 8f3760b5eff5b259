/*
 * The host simulator's access checks (issue 24): what checked mode's
 * kernel_check=on adds to kernel_check=bounds.  Kernels are compiled with
 * the compiler's thread-sanitizer instrumentation (every load and store a
 * call); the module's entry points (kernel.h) hand each access to the
 * library's runtime (access.c), which finds what it touches and asks
 * the checks below.  One file per check:
 *
 *   access.c     the dispatch: which array, shared array or local an
 *                     access touches; memcheck (memcheck.c) for what is
 *                     outside them; the reports
 *   initcheck.c  reads of shared memory no thread of the block wrote
 *   race.c       data races: shared memory within a block's barrier
 *                     interval, global memory across the launch (its shared
 *                     shadow state: race_shadow.c)
 *
 * A launch's blocks run in parallel under these checks, as without them:
 * each executor thread has its own state for the block it runs (shared
 * memory's shadow, init bits, barrier counts: access.c's lanes, a
 * view of the race state each); the global race shadow is the launch's,
 * under locks (race.c).  Offsets are bytes: into a global
 * region (one of the launch's arrays, numbered by the dispatcher) or into
 * the block's shared arena (static shared arrays and the dynamic area).
 */
#ifndef DV_HOST_CHECK_H
#define DV_HOST_CHECK_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One access, as the checks record it. */
typedef struct hk_acc {
  uint64_t block; /* linear index of the block in the launch's grid */
  int thread;     /* linear index of the thread in its block */
  const void *pc; /* the access's instruction (for its source line) */
  bool write;
} hk_acc;

/* ---- initcheck.c ---- */
typedef struct hk_init hk_init;
/* State for a shared arena of `bytes` bytes; NULL: no memory. */
hk_init *hk_init_new(size_t bytes);
void hk_init_free(hk_init *s);
/* A new block: nothing of its shared memory is written. */
void hk_init_block(hk_init *s);
/* Bytes [off, off + n) were written by some thread of the block. */
void hk_init_write(hk_init *s, size_t off, size_t n);
/* A read of [off, off + n): true when no byte of it was written in this
 * block (*first: off).  Not when some were: a whole struct read or copied
 * reads its padding, which nothing writes (compute-sanitizer, too, reports
 * a value used, not a copy). */
bool hk_init_read(const hk_init *s, size_t off, size_t n, size_t *first);
/* The state, visible for the inline forms below: bit b % 64 of bits[b / 64]
 * says byte b was written. */
struct hk_init {
  size_t bytes;
  uint64_t bits[];
};
/* An access of 1 to 8 bytes inside one word of bits and the arena: the
 * commonest, which the inline forms do themselves. */
static inline bool hk_init_small(const hk_init *s, size_t off, size_t n) {
  return n - 1 < 8 && (off & 63) + n <= 64 && off < s->bytes && n <= s->bytes - off;
}
static inline uint64_t hk_init_bits(size_t off, size_t n) {
  return ((UINT64_C(1) << n) - 1) << (off & 63);
}
/* hk_init_write and hk_init_read, inline where they can be. */
static inline void hk_init_write_i(hk_init *s, size_t off, size_t n) {
  if (hk_init_small(s, off, n))
    s->bits[off >> 6] |= hk_init_bits(off, n);
  else
    hk_init_write(s, off, n);
}
static inline bool hk_init_read_i(const hk_init *s, size_t off, size_t n, size_t *first) {
  if (!hk_init_small(s, off, n)) return hk_init_read(s, off, n, first);
  if (s->bits[off >> 6] & hk_init_bits(off, n)) return false;
  *first = off;
  return true;
}

/* ---- race.c ---- */
/* Shadow: a 32-byte cell per aligned 4-byte word touched, byte cells for
 * words accessed in part (global regions per 4 KiB chunk on first touch; the
 * shared arena at hk_race_new); answers per byte.  race.c's top comment
 * has the details. */
typedef struct hk_race hk_race;
/* What a race report needs: the earlier access it conflicts with. */
typedef struct hk_race_hit {
  hk_acc prev; /* pc: NULL when the launch ran over 2^20 distinct pcs */
  size_t off;  /* the first byte both touch (region or arena offset) */
} hk_race_hit;
/* A launch's race state: nregions global regions of bytes[i] bytes each,
 * a shared arena of shared_bytes per block, blocks of block_threads
 * threads in waves of `wave` lanes (thread t is in wave t / wave).  NULL:
 * no memory (or block_threads or wave below 1, or bytes NULL with
 * nregions > 0). */
hk_race *hk_race_new(size_t nregions, const size_t *bytes, size_t shared_bytes,
                     int block_threads, int wave);
/* Another view of r's launch, for another executor thread: the same global
 * shadow, its own shared arena's shadow and running block.  Each view is
 * used by one thread at a time; different views may be used at once.
 * NULL: no memory (or r NULL). */
hk_race *hk_race_view(hk_race *r);
/* Frees a view; the launch's global shadow goes with the last one.  NULL:
 * nothing */
void hk_race_free(hk_race *r);
/* Block `block` starts on view r: its shared memory's history is forgotten
 * and its barrier counts start at zero.  Global memory's history stays for
 * the whole launch.  Accesses through r until the next call are this
 * block's (their hk_acc.block is not read). */
void hk_race_block(hk_race *r, uint64_t block);
/* Every thread of the running block passed a barrier with these fences
 * (DV_FENCE_LOCAL orders shared memory, DV_FENCE_GLOBAL global memory; a
 * barrier with neither orders nothing). */
void hk_race_barrier(hk_race *r, int fence);
/* Every lane of wave w of the running block passed a wave barrier or a
 * wave operation: it orders that wave's lanes (shared and global).  A w
 * outside the block is ignored. */
void hk_race_wave(hk_race *r, int w);
/* Check and record a (non-atomic) access of [off, off + n) of global region
 * g / of the running block's shared arena.  true: it races with an earlier
 * access by another thread (at least one a write, not ordered by a barrier
 * both passed); *hit (may be NULL) says which: the first conflicting byte's
 * earlier access (a write when there is one), the rest of the access is
 * still recorded.  Atomic accesses are never passed here.  The part of an
 * access past its region or arena, a region g out of range and a thread
 * outside the block are ignored (access.c reports them). */
bool hk_race_global(hk_race *r, size_t g, size_t off, size_t n, const hk_acc *a,
                    hk_race_hit *hit);
bool hk_race_shared(hk_race *r, size_t off, size_t n, const hk_acc *a, hk_race_hit *hit);
/* true once some global memory went unchecked (by any view): a shadow chunk that could not
 * be allocated (it stays unchecked for the launch), or a block whose thread
 * ids need more than 44 bits.  The dispatcher logs "race checking
 * incomplete". */
bool hk_race_degraded(const hk_race *r);
/* Bytes the launch's state holds now (shadow, tables, every view's): for
 * logs and tests. */
size_t hk_race_shadow_bytes(const hk_race *r);

#endif
