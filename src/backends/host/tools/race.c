/*
 * Data races (issue 24): two accesses to one byte by two threads, at least
 * one a write, neither atomic, not ordered by a synchronization both passed.
 * check.h is the interface; access.c calls it for every access of
 * a checked kernel.
 *
 * Order.  A block's threads run one at a time and nothing orders two
 * blocks, so "not ordered" needs no vector clocks: a block counts its
 * synchronization events (`seq`: block barriers that fence something, wave
 * synchronizations), an access records the count when it happened, and an
 * earlier access of the running block is ordered before the current one when
 * an event of the right kind came after it: a barrier fencing DV_FENCE_LOCAL
 * (shared memory) or DV_FENCE_GLOBAL (global memory), or a synchronization
 * of the wave both threads are lanes of.  Accesses of another block are never
 * ordered (global memory); shared memory's history is forgotten when a block
 * starts (a generation per shadow cell, so starting a block costs nothing).
 *
 * Shadow: a 32-byte cell (rc_cell) per aligned 4-byte word touched, which
 * holds the history of each of the word's bytes while they have the same one:
 * the last write and up to two readers since it (distinct threads), each as
 * 64 bits (the thread's id in the launch, block * block_threads + thread, in
 * 44 bits, and its instruction as a 20-bit index into the launch's interned
 * table of pcs) plus the 16-bit event count.  An access that covers a word
 * only in part (a byte, a short, an unaligned access) splits it: its four
 * bytes get cells of their own (the word's copied into each) and the word's
 * cell becomes a mark; an access of the whole word that leaves the four equal
 * joins them again (shadow words, as ThreadSanitizer keeps them, in their
 * simplest form: every answer is the per-byte one).  Two readers are enough
 * for the guarantee that matters: a write after reads by two other threads
 * reports one of them; a third reader replaces the one fewer later accesses
 * can conflict with.  A write clears the readers (any later access unordered
 * with one of them is unordered with the write too, or is its own thread's).
 *
 * Memory.  Global regions are shadowed lazily, per 4 KiB chunk of region on
 * first touch (1,024 word cells: 32 KiB), through a directory page of 512
 * chunk pointers per 2 MiB of region (4 KiB, on first touch) under a table of
 * 8 bytes per 2 MiB made at hk_race_new: 8 bytes of shadow per byte of each
 * chunk touched, so a launch that touches one byte of a big array pays one
 * chunk and one directory page.  A split global word's byte cells (128
 * bytes) come from a pool the launch shares, grown on demand, and go back to
 * it when the word joins.  The shared arena's word cells (8 bytes per byte)
 * and byte cells (32 bytes per byte, touched only where words split) are
 * made at hk_race_new.  A chunk, directory page or pool growth that cannot be
 * allocated later is marked dead or left unchecked (hk_race_degraded says
 * so); so are global accesses of a thread whose id needs more than 44 bits.
 *
 * The event count is 16 bits: before it overflows, the running block's
 * records are renumbered to 0 (ordered by a barrier), 1 (ordered only for
 * lanes of their wave) or 2 (not yet ordered), which keeps every answer, at
 * a cost of one pass over the launch's shadow per 65,534 events.
 *
 * Threads.  A launch's blocks run in parallel, one at a time per executor
 * thread: each executor has a view (hk_race) with its running block's
 * state and its own shared arena's shadow; the global shadow (rc_glob) is
 * the launch's.  A global word's cell (and its byte cells when split) is
 * read and written under its lock (one of RC_STRIPES spinlocks, by the
 * cell's cache line: two executors contend only on nearby words); directory pages
 * and chunks are made under `alloc` and published with a release store
 * (read without a lock, acquire); the split words' pool is segments that
 * never move (made and handed out under `alloc`); the pc table is under
 * `pcm` (each view caches the pcs it saw).  Lock order: a word's, then
 * `alloc` or `pcm`.  A view's records of other blocks are never ordered,
 * so renumbering touches only the view's block's records.
 */
#include <string.h>

#include "../../../core/core.h"
#include "../../../dialect/dialect.h"
#include "race_internal.h"

/* ---- pcs ---- */

/* A pc's index: a kernel's loop alternates a few instructions, which the
 * cache answers (an empty entry's key is NULL, whose index is RC_PC_NULL). */
static inline uint32_t rc_pc(hk_race *r, const void *pc) {
  uintptr_t u = (uintptr_t)pc;
  unsigned h = (unsigned)(u ^ (u >> 6)) & (RC_PC_CACHE - 1);
  if (r->pcc_key[h] != pc) {
    r->pcc_val[h] = rc_pc_slow(r, pc);
    r->pcc_key[h] = pc;
  }
  return r->pcc_val[h];
}

/* ---- records ---- */


/* The wave of thread t of the block. */
static inline int rc_wave(const hk_race *r, uint64_t t) {
  return (int)(r->wave_shift >= 0 ? t >> r->wave_shift : t / (uint64_t)r->wave);
}

/* Is record v (gid rg, event count s) of the running block ordered before an
 * access by thread t of the block?  last: the count of the last barrier of
 * the memory's fence; base: the gid of the block's thread 0. */
static inline bool rc_ordered(const hk_race *r, uint64_t rg, uint32_t s, uint32_t last,
                              uint64_t base, int t) {
  if (last > s) return true;
  int w = rc_wave(r, (uint64_t)t);
  return rc_wave(r, rg - base) == w && r->last_wave[w] > s;
}

/* Does record v (count s) conflict with an access by gid g, thread t? */
static inline bool rc_conflict(const hk_race *r, uint64_t v, uint32_t s, uint64_t g, uint32_t last,
                               uint64_t base, int t) {
  if (!v) return false;
  uint64_t rg = rc_gid(v);
  if (rg == g) return false;                     /* a thread's own access */
  if (rg - base >= (uint64_t)r->bt) return true; /* another block: never ordered */
  return !rc_ordered(r, rg, s, last, base, t);
}

/* How many later accesses can a reader record still conflict with: 3 every
 * one (another block's), 2 all but its own thread's, 1 some (ordered for its
 * wave only; or a global one ordered within its block, which later blocks
 * still race with), 0 none (shared, ordered by a barrier). */
static int rc_reach(const hk_race *r, uint64_t v, uint32_t s, uint32_t last, uint64_t base,
                    bool global) {
  uint64_t rg = rc_gid(v);
  if (rg - base >= (uint64_t)r->bt) return 3;
  if (last > s) return global ? 1 : 0;
  return r->last_wave[rc_wave(r, rg - base)] > s ? 1 : 2;
}

/* One access as the cells see it. */
typedef struct rc_ctx {
  uint64_t me, g, base; /* the record it leaves, its gid, the block's thread 0's */
  uint32_t last;        /* the count of the last barrier fencing its memory */
  uint16_t s, gen;      /* the event count now; the cells' generation */
  int t, wt;            /* its thread in the block, and the thread's wave */
  bool write, global;
} rc_ctx;

/* c has two readers other than x's thread: x's read replaces the one that
 * reaches less far (rc_reach); on a tie, keep the new one, and lanes of
 * different waves.  First the common cases: a shared reader ordered by a
 * barrier reaches nothing; readers of other blocks reach further than the
 * new one. */
static RC_INLINE void rc_replace_reader(const hk_race *r, rc_cell *c, const rc_ctx *x) {
  const uint64_t base = x->base;
  const uint32_t last = x->last;
  const bool global = x->global;
  int drop;
  if (!global && last > c->rs[0]) {
    drop = 0;
  } else if (!global && last > c->rs[1]) {
    drop = 1;
  } else {
    int k0 = rc_reach(r, c->r[0], c->rs[0], last, base, global);
    if (k0 == 3 && rc_gid(c->r[1]) - base >= (uint64_t)r->bt) return;
    int k1 = rc_reach(r, c->r[1], c->rs[1], last, base, global);
    if (k0 != k1) {
      drop = k0 < k1 ? 0 : 1;
    } else {
      int w0 = rc_wave(r, rc_gid(c->r[0]) - base);
      int w1 = rc_wave(r, rc_gid(c->r[1]) - base);
      drop = (w1 == x->wt && w0 != x->wt) ? 1 : 0;
    }
  }
  c->r[drop] = x->me;
  c->rs[drop] = x->s;
}

/* Record a read by x in c's readers (a free slot or its thread's own). */
static RC_INLINE void rc_add_reader(const hk_race *r, rc_cell *c, const rc_ctx *x) {
  int i = !c->r[0] || rc_gid(c->r[0]) == x->g ? 0 : !c->r[1] || rc_gid(c->r[1]) == x->g ? 1 : -1;
  if (DV_UNLIKELY(i < 0)) {
    rc_replace_reader(r, c, x);
    return;
  }
  c->r[i] = x->me;
  c->rs[i] = x->s;
}

/* Check (when `check`) and record x's access of cell c (of x's generation,
 * not a split word's).  Returns the conflicting earlier record, 0: none
 * (*write: it is the last write). */
static RC_INLINE uint64_t rc_op(const hk_race *r, rc_cell *c, const rc_ctx *x, bool check,
                                bool *write) {
  uint64_t v = 0;
  if (check) {
    if (rc_conflict(r, c->w, c->ws, x->g, x->last, x->base, x->t)) {
      v = c->w;
      *write = true;
    } else if (x->write) {
      for (int k = 0; k < 2 && !v; k++)
        if (rc_conflict(r, c->r[k], c->rs[k], x->g, x->last, x->base, x->t)) {
          v = c->r[k];
          *write = false;
        }
    }
  }
  if (x->write) {
    c->w = x->me;
    c->ws = x->s;
    c->r[0] = c->r[1] = 0;
  } else {
    rc_add_reader(r, c, x);
  }
  return v;
}

static void rc_fill_hit(const hk_race *r, hk_race_hit *hit, uint64_t v, bool write, size_t off,
                        bool global) {
  if (!hit) return;
  uint64_t rg = rc_gid(v);
  uint32_t pc = (uint32_t)(v & (RC_PC_LIMIT - 1));
  hit->prev.block = global ? rg / (uint64_t)r->bt : r->block;
  hit->prev.thread = global ? (int)(rg % (uint64_t)r->bt) : (int)rg;
  hit->prev.pc = rc_pc_at(r, pc);
  hit->prev.write = write;
  hit->off = off;
}

/* ---- split words ---- */

/* The byte cells of the word whose cell is c, splitting it if it is not
 * yet (each byte cell a copy of the word's); NULL: no memory (global only:
 * the bytes go unchecked, hk_race_degraded says so).  Global: under c's
 * lock. */
static rc_cell *rc_bytes(hk_race *r, rc_cell *c, bool global) {
  if (!global) {
    rc_cell *b = r->shared_b + 4 * (size_t)(c - r->shared);
    if (!rc_split(c)) {
      b[0] = b[1] = b[2] = b[3] = *c;
      c->w = UINT64_C(1) << RC_PC_BITS;
    }
    return b;
  }
  rc_glob *g = r->gl;
  if (rc_split(c)) return rc_group(g, (size_t)(rc_gid(c->w) - 1));
  size_t gi;
  if (!rc_pool_take(g, &gi)) {
    rc_degrade(r);
    return NULL;
  }
  rc_cell *b = rc_group(g, gi);
  b[0] = b[1] = b[2] = b[3] = *c;
  c->w = (uint64_t)(gi + 1) << RC_PC_BITS;
  return b;
}

/* After an access of the whole of split word c: its bytes' cells equal
 * again make it one cell. */
static void rc_join(hk_race *r, rc_cell *c, rc_cell *b, bool global) {
  if (memcmp(&b[0], &b[1], sizeof *b) || memcmp(&b[0], &b[2], sizeof *b) ||
      memcmp(&b[0], &b[3], sizeof *b))
    return;
  size_t gi = global ? (size_t)(rc_gid(c->w) - 1) : 0;
  *c = b[0];
  if (global) rc_pool_put(r->gl, gi);
}

/* Check and record x's access of bytes [in, in + n) of the words from wc (wc[0]
 * covers bytes 0 to 3: a chunk's first, or the arena's); off: byte in's offset
 * in the region or arena (for the hit).  `found`: a race was already reported
 * for this access (the rest is only recorded).  true: this call found one. */
static bool rc_span(hk_race *r, rc_cell *wc, size_t in, size_t n, size_t off, const rc_ctx *x,
                    bool found, hk_race_hit *hit) {
  bool now = false, memo = false, wr = false;
  rc_cell was, became; /* the last cell handled in full: before, after */
  for (size_t i = 0; i < n;) {
    const size_t b = in + i, k = b & 3, take = 4 - k < n - i ? 4 - k : n - i;
    rc_cell *c = wc + (b >> 2);
    rc_spin *lk = x->global ? rc_lock_of(r, c) : NULL;
    if (lk) rc_lock(lk);
    if (c->gen != x->gen) *c = (rc_cell){.gen = x->gen};
    rc_cell *cell = c, *end = c + 1;
    size_t at = off + i;
    rc_cell *bytes = NULL;
    if (take < 4 || rc_split(c)) {
      bytes = rc_bytes(r, c, x->global);
      if (!bytes) {
        if (lk) rc_unlock(lk);
        i += take;
        continue;
      }
      cell = bytes + k;
      end = cell + take;
    }
    /* the bytes of one earlier access have equal cells, and equal cells
     * give equal answers: the common case costs a compare and a copy */
    for (; cell < end; cell++, at++) {
      if (memo && memcmp(cell, &was, sizeof *cell) == 0) {
        *cell = became;
        continue;
      }
      was = *cell;
      memo = true;
      if (cell->gen != x->gen) *cell = (rc_cell){.gen = x->gen};
      uint64_t v = rc_op(r, cell, x, !found && !now, &wr);
      if (v) {
        rc_fill_hit(r, hit, v, wr, at, x->global);
        now = true;
      }
      became = *cell;
    }
    if (bytes && take == 4) rc_join(r, c, bytes, x->global);
    if (lk) rc_unlock(lk);
    i += take;
  }
  return now;
}

/* rc_span with x by value: the callers' x, whose address does not escape,
 * stays in registers. */
static RC_NOINLINE bool rc_span_v(hk_race *r, rc_cell *wc, size_t in, size_t n, size_t off,
                                  rc_ctx x, bool found, hk_race_hit *hit) {
  return rc_span(r, wc, in, n, off, &x, found, hit);
}

/* rc_span for one whole word at offset off (aligned): the commonest access. */
static RC_INLINE bool rc_word(hk_race *r, rc_cell *c, size_t off, const rc_ctx *x,
                              hk_race_hit *hit) {
  if (c->gen != x->gen) *c = (rc_cell){.gen = x->gen};
  if (DV_UNLIKELY(rc_split(c))) return rc_span_v(r, c, 0, 4, off, *x, false, hit);
  bool wr = false;
  uint64_t v = rc_op(r, c, x, true, &wr);
  if (DV_UNLIKELY(v)) rc_fill_hit(r, hit, v, wr, off, x->global);
  return v != 0;
}

/* ---- renumbering the event counts ---- */

static uint16_t rc_renum(const hk_race *r, uint64_t v, uint16_t s, uint32_t last, uint64_t base) {
  if (last > s) return 0;
  return r->last_wave[rc_wave(r, rc_gid(v) - base)] > s ? 1 : 2;
}

static void rc_renum_cell(const hk_race *r, rc_cell *c, uint32_t last, uint64_t base) {
  if (c->w && rc_gid(c->w) - base < (uint64_t)r->bt) c->ws = rc_renum(r, c->w, c->ws, last, base);
  for (int k = 0; k < 2; k++)
    if (c->r[k] && rc_gid(c->r[k]) - base < (uint64_t)r->bt)
      c->rs[k] = rc_renum(r, c->r[k], c->rs[k], last, base);
}

/* n word cells from c (of generation gen); a split one's byte cells. */
static void rc_renum_words(const hk_race *r, rc_cell *c, size_t n, uint16_t gen, uint32_t last,
                           uint64_t base, bool global) {
  for (size_t i = 0; i < n; i++, c++) {
    rc_spin *lk = global ? rc_lock_of(r, c) : NULL;
    if (lk) rc_lock(lk);
    if (c->gen != gen) {
    } else if (!rc_split(c)) {
      rc_renum_cell(r, c, last, base);
    } else {
      rc_cell *b = global ? rc_group(r->gl, (size_t)(rc_gid(c->w) - 1))
                          : r->shared_b + 4 * (c - r->shared);
      for (int k = 0; k < 4; k++) rc_renum_cell(r, b + k, last, base);
    }
    if (lk) rc_unlock(lk);
  }
}

/* The running block's counts are about to overflow: renumber its records so
 * that each answers as before, then restart the counts at 2.  Every chunk
 * is looked at (other executors' blocks touch them too), each word under
 * its lock. */
static void rc_renumber(hk_race *r) {
  rc_renum_words(r, r->shared, (r->shared_bytes + 3) / 4, r->gen, r->last_local, 0, false);
  for (size_t g = 0; g < r->nregions && r->gid_ok; g++) {
    rc_region *rg = &r->reg[g];
    for (size_t p = 0; p < rg->npages; p++) {
      rc_chunk **page = rc_page_get(rg, p);
      if (!page || page == RC_DEAD_PAGE) continue;
      for (size_t k = 0; k < ((size_t)1 << RC_PAGE_BITS); k++) {
        rc_chunk *ch = rc_chunk_get(page, k);
        if (!ch || ch == RC_DEAD_CHUNK) continue;
        rc_renum_words(r, ch->cell, RC_CHUNK_WORDS, 0, r->last_global, r->base, true);
      }
    }
  }
  r->last_local = r->last_global = 1;
  for (int w = 0; w < r->nwaves; w++) r->last_wave[w] = 2;
  r->seq = 2;
  r->dirty = true;
}

/* A synchronization event: the count its kind's `last` takes. */
static uint32_t rc_tick(hk_race *r) {
  if (r->dirty) {
    if (r->seq >= RC_SEQ_MAX) rc_renumber(r);
    r->seq++;
    r->dirty = false;
  }
  return r->seq;
}

/* ---- the interface ---- */

/* A view of g (which it then holds), for blocks of block_threads threads. */
static hk_race *rc_view_new(rc_glob *g, size_t shared_bytes, int block_threads, int wave) {
  hk_race *r = dv__calloc(1, sizeof *r);
  if (!r) return NULL;
  const size_t words = (shared_bytes + 3) / 4;
  r->gl = g;
  r->nregions = g->nregions;
  r->reg = g->reg;
  r->bt = block_threads;
  r->wave = wave;
  r->nwaves = (block_threads + wave - 1) / wave;
  r->wave_shift = (wave & (wave - 1)) == 0 ? __builtin_ctz((unsigned)wave) : -1;
  r->shared_bytes = shared_bytes;
  r->shared = dv__calloc(words, sizeof *r->shared);
  r->shared_b = dv__calloc(4 * words, sizeof *r->shared_b);
  r->last_wave = dv__calloc((size_t)r->nwaves, sizeof *r->last_wave);
  if (!r->shared || !r->shared_b || !r->last_wave) {
    dv__free(r->shared);
    dv__free(r->shared_b);
    dv__free(r->last_wave);
    dv__free(r);
    return NULL;
  }
  r->own = sizeof *r + 5 * words * sizeof *r->shared + (size_t)r->nwaves * sizeof *r->last_wave;
  rc_held(g, r->own);
  for (int i = 0; i < RC_PC_CACHE; i++) r->pcc_val[i] = RC_PC_NULL;
  r->gid_ok = true;
  atomic_fetch_add(&g->views, 1);
  return r;
}

hk_race *hk_race_new(size_t nregions, const size_t *bytes, size_t shared_bytes, int block_threads,
                     int wave) {
  if (block_threads < 1 || wave < 1 || (nregions && !bytes)) return NULL;
  if (shared_bytes > SIZE_MAX / sizeof(rc_cell) - 3 || nregions > SIZE_MAX / sizeof(rc_region))
    return NULL;
  rc_glob *g = rc_glob_new(nregions, bytes);
  if (!g) return NULL;
  hk_race *r = rc_view_new(g, shared_bytes, block_threads, wave);
  if (!r) rc_glob_free(g);
  return r;
}

hk_race *hk_race_view(hk_race *r) {
  return r ? rc_view_new(r->gl, r->shared_bytes, r->bt, r->wave) : NULL;
}

void hk_race_free(hk_race *r) {
  if (!r) return;
  rc_glob *g = r->gl;
  atomic_fetch_sub(&g->held, r->own);
  dv__free(r->shared);
  dv__free(r->shared_b);
  dv__free(r->last_wave);
  dv__free(r);
  if (atomic_fetch_sub(&g->views, 1) == 1) rc_glob_free(g);
}

void hk_race_block(hk_race *r, uint64_t block) {
  if (!r) return;
  r->block = block;
  uint64_t bt = (uint64_t)r->bt;
  r->gid_ok = block <= (RC_GID_MAX - (bt - 1)) / bt;
  r->base = r->gid_ok ? block * bt : 0;
  r->seq = r->last_local = r->last_global = 0;
  memset(r->last_wave, 0, (size_t)r->nwaves * sizeof *r->last_wave);
  r->dirty = false;
  if (++r->gen == 0) { /* generations wrapped: empty every shared cell once */
    memset(r->shared, 0, (r->shared_bytes + 3) / 4 * sizeof *r->shared);
    r->gen = 1;
  }
}

void hk_race_barrier(hk_race *r, int fence) {
  if (!r || !(fence & (DV_FENCE_LOCAL | DV_FENCE_GLOBAL))) return;
  uint32_t s = rc_tick(r);
  if (fence & DV_FENCE_LOCAL) r->last_local = s;
  if (fence & DV_FENCE_GLOBAL) r->last_global = s;
}

void hk_race_wave(hk_race *r, int w) {
  if (!r || w < 0 || w >= r->nwaves) return;
  r->last_wave[w] = rc_tick(r);
}

/* The chunk holding byte `off` of region rg; NULL: dead (no memory). */
static rc_chunk *rc_chunk_at(hk_race *r, rc_region *rg, size_t off) {
  size_t p = off >> RC_PAGE_SPAN_BITS;
  size_t k = (off >> RC_CHUNK_BITS) & (((size_t)1 << RC_PAGE_BITS) - 1);
  rc_chunk **page = rc_page_get(rg, p);
  if (DV_UNLIKELY(!page)) return rc_chunk_make(r, rg, p, k);
  if (page == RC_DEAD_PAGE) return NULL;
  rc_chunk *ch = rc_chunk_get(page, k);
  if (DV_UNLIKELY(!ch)) return rc_chunk_make(r, rg, p, k);
  return ch == RC_DEAD_CHUNK ? NULL : ch;
}

/* hk_race_global's access of [off, off + n) of rg, across chunks. */
static RC_NOINLINE bool rc_global_span(hk_race *r, rc_region *rg, size_t off, size_t n, rc_ctx x,
                                       hk_race_hit *hit) {
  bool found = false;
  while (n) {
    size_t in = off & (RC_CHUNK_BYTES - 1);
    size_t take = n < RC_CHUNK_BYTES - in ? n : RC_CHUNK_BYTES - in;
    rc_chunk *ch = rc_chunk_at(r, rg, off);
    if (ch) found |= rc_span(r, ch->cell, in, take, off, &x, found, hit);
    off += take;
    n -= take;
  }
  return found;
}

/* hk_race_global in general (rc_global_span). */
static RC_NOINLINE bool rc_global_any(hk_race *r, size_t g, size_t off, size_t n, const hk_acc *a,
                                      hk_race_hit *hit) {
  if (!r || !a || g >= r->nregions || a->thread < 0 || a->thread >= r->bt) return false;
  rc_region *rg = &r->reg[g];
  if (off >= rg->bytes || n == 0) return false;
  if (n > rg->bytes - off) n = rg->bytes - off;
  if (!r->gid_ok) {
    rc_degrade(r);
    return false;
  }
  const uint64_t gid = r->base + (uint64_t)a->thread;
  const rc_ctx x = {gid << RC_PC_BITS | rc_pc(r, a->pc),
                    gid,
                    r->base,
                    r->last_global,
                    (uint16_t)r->seq,
                    0,
                    a->thread,
                    rc_wave(r, (uint64_t)a->thread),
                    a->write,
                    true};
  r->dirty = true;
  return rc_global_span(r, rg, off, n, x, hit);
}

/* Is global record v (count s, of gid rg) ordered before an access by gid g,
 * thread t (wave wt) of the running block? */
static inline bool rc_global_ordered(const hk_race *r, uint64_t rg, uint16_t s, uint64_t g,
                                     int wt) {
  if (rg == g) return true;
  if (rg - r->base >= (uint64_t)r->bt) return false; /* another block */
  return r->last_global > s || (rc_wave(r, rg - r->base) == wt && r->last_wave[wt] > s);
}

/* rc_shared_word for global memory: a whole word of region g, its chunk
 * made, not split, racing with nothing.  false: nothing done. */
static RC_INLINE bool rc_global_word(hk_race *r, size_t g, size_t off, const hk_acc *a) {
  const rc_region *rg = &r->reg[g];
  rc_chunk **page = rc_page_get(rg, off >> RC_PAGE_SPAN_BITS);
  if (!page || page == RC_DEAD_PAGE) return false;
  rc_chunk *ch = rc_chunk_get(page, (off >> RC_CHUNK_BITS) & (((size_t)1 << RC_PAGE_BITS) - 1));
  if (!ch || ch == RC_DEAD_CHUNK) return false;
  rc_cell *c = ch->cell + ((off & (RC_CHUNK_BYTES - 1)) >> 2);
  const uint64_t gid = r->base + (uint64_t)a->thread;
  const int wt = rc_wave(r, (uint64_t)a->thread);
  const uint32_t pc = rc_pc(r, a->pc);
  rc_spin *l = rc_lock_of(r, c);
  rc_lock(l);
  if (rc_split(c) || (c->w && !rc_global_ordered(r, rc_gid(c->w), c->ws, gid, wt))) {
    rc_unlock(l);
    return false;
  }
  if (a->write)
    for (int k = 0; k < 2; k++)
      if (c->r[k] && !rc_global_ordered(r, rc_gid(c->r[k]), c->rs[k], gid, wt)) {
        rc_unlock(l);
        return false;
      }
  const rc_ctx x = {gid << RC_PC_BITS | pc,
                    gid,
                    r->base,
                    r->last_global,
                    (uint16_t)r->seq,
                    0,
                    a->thread,
                    wt,
                    a->write,
                    true};
  r->dirty = true;
  if (a->write) {
    c->w = x.me;
    c->ws = x.s;
    c->r[0] = c->r[1] = 0;
  } else {
    rc_add_reader(r, c, &x);
  }
  rc_unlock(l);
  return true;
}

bool hk_race_global(hk_race *r, size_t g, size_t off, size_t n, const hk_acc *a, hk_race_hit *hit) {
  if (DV_LIKELY(r && a && g < r->nregions && n == 4 && (off & 3) == 0 && off < r->reg[g].bytes &&
                r->reg[g].bytes - off >= 4 && a->thread >= 0 && a->thread < r->bt && r->gid_ok) &&
      rc_global_word(r, g, off, a))
    return false;
  return rc_global_any(r, g, off, n, a, hit);
}

/* hk_race_shared in general (rc_span; rc_word for a whole word). */
static RC_NOINLINE bool rc_shared_any(hk_race *r, size_t off, size_t n, const hk_acc *a,
                                      hk_race_hit *hit) {
  if (!r || !a || a->thread < 0 || a->thread >= r->bt) return false;
  if (off >= r->shared_bytes || n == 0) return false;
  if (n > r->shared_bytes - off) n = r->shared_bytes - off;
  const uint64_t t = (uint64_t)a->thread;
  const rc_ctx x = {t << RC_PC_BITS | rc_pc(r, a->pc),
                    t,
                    0,
                    r->last_local,
                    (uint16_t)r->seq,
                    r->gen,
                    a->thread,
                    rc_wave(r, (uint64_t)a->thread),
                    a->write,
                    false};
  r->dirty = true;
  if ((off & 3) == 0 && n == 4) return rc_word(r, r->shared + (off >> 2), off, &x, hit);
  return rc_span_v(r, r->shared, off, n, off, x, false, hit);
}

/* Is shared record v (count s, of thread rt) ordered before an access by
 * thread t (wave wt) of the block? */
static inline bool rc_shared_ordered(const hk_race *r, uint64_t rt, uint16_t s, uint64_t t,
                                     int wt) {
  return rt == t || r->last_local > s || (rc_wave(r, rt) == wt && r->last_wave[wt] > s);
}

/* The commonest shared access, a whole word whose cell is of this block and
 * not split, when it races with nothing: rc_op's work, in fewer steps.
 * false: it may race (or is not that case), nothing done (rc_shared_any). */
static RC_INLINE bool rc_shared_word(hk_race *r, size_t off, const hk_acc *a) {
  rc_cell *c = r->shared + (off >> 2);
  if (c->gen != r->gen || rc_split(c)) return false;
  const uint64_t t = (uint64_t)a->thread;
  const int wt = rc_wave(r, t);
  if (c->w && !rc_shared_ordered(r, rc_gid(c->w), c->ws, t, wt)) return false;
  const uint64_t me = t << RC_PC_BITS | rc_pc(r, a->pc);
  const uint16_t s = (uint16_t)r->seq;
  r->dirty = true;
  if (a->write) {
    for (int k = 0; k < 2; k++)
      if (c->r[k] && !rc_shared_ordered(r, rc_gid(c->r[k]), c->rs[k], t, wt)) return false;
    c->w = me;
    c->ws = s;
    c->r[0] = c->r[1] = 0;
    return true;
  }
  int i;
  if (!c->r[0] || rc_gid(c->r[0]) == t) {
    i = 0;
  } else if (!c->r[1] || rc_gid(c->r[1]) == t) {
    i = 1;
  } else { /* rc_replace_reader for a shared cell */
    const uint32_t last = r->last_local;
    if (last > c->rs[0]) {
      i = 0;
    } else if (last > c->rs[1]) {
      i = 1;
    } else {
      const int w0 = rc_wave(r, rc_gid(c->r[0])), w1 = rc_wave(r, rc_gid(c->r[1]));
      const int k0 = r->last_wave[w0] > c->rs[0] ? 1 : 2, k1 = r->last_wave[w1] > c->rs[1] ? 1 : 2;
      i = k0 != k1 ? k0 > k1 : (w1 == wt && w0 != wt);
    }
  }
  c->r[i] = me;
  c->rs[i] = s;
  return true;
}

bool hk_race_shared(hk_race *r, size_t off, size_t n, const hk_acc *a, hk_race_hit *hit) {
  if (DV_LIKELY(r && a && n == 4 && (off & 3) == 0 && off < r->shared_bytes &&
                r->shared_bytes - off >= 4 && a->thread >= 0 && a->thread < r->bt) &&
      rc_shared_word(r, off, a))
    return false;
  return rc_shared_any(r, off, n, a, hit);
}

bool hk_race_degraded(const hk_race *r) {
  return r && atomic_load_explicit(&r->gl->degraded, memory_order_relaxed);
}

size_t hk_race_shadow_bytes(const hk_race *r) {
  return r ? atomic_load_explicit(&r->gl->held, memory_order_relaxed) : 0;
}
