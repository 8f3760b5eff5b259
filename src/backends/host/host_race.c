/*
 * Data races (issue 24): two accesses to one byte by two threads, at least
 * one a write, neither atomic, not ordered by a synchronization both passed.
 * host_check.h is the interface; host_access.c calls it for every access of
 * a checked kernel.
 *
 * Order.  Blocks run one after the other and a block's threads one at a
 * time, so "not ordered" needs no vector clocks: a block counts its
 * synchronization events (`seq`: block barriers that fence something, wave
 * synchronizations), an access records the count when it happened, and an
 * earlier access of the running block is ordered before the current one when
 * an event of the right kind came after it: a barrier fencing DV_FENCE_LOCAL
 * (shared memory) or DV_FENCE_GLOBAL (global memory), or a synchronization
 * of the wave both threads are lanes of.  Accesses of another block are never
 * ordered (global memory); shared memory's history is forgotten when a block
 * starts (a generation per shadow cell, so starting a block costs nothing).
 *
 * Shadow: a 32-byte cell per byte touched (rc_cell): the last write and up
 * to two readers since it (distinct threads), each as 64 bits (the thread's
 * id in the launch, block * block_threads + thread, in 44 bits, and its
 * instruction as a 20-bit index into the launch's interned table of pcs)
 * plus the 16-bit event count.  Two readers are enough for the guarantee
 * that matters: a write after reads by two other threads reports one of
 * them; a third reader replaces the one fewer later accesses can conflict
 * with.  A write clears the readers (any later access unordered with one of
 * them is unordered with the write too, or is its own thread's).
 *
 * Memory.  Global regions are shadowed lazily, per 4 KiB chunk of region on
 * first touch (4 KiB * 32 + 8 bytes), through a directory page of 512 chunk
 * pointers per 2 MiB of region (4 KiB, on first touch) under a table of 8
 * bytes per 2 MiB made at hk_race_new: 32 bytes of shadow per byte of each
 * chunk touched, so a launch that touches one byte of a big array pays one
 * chunk (128 KiB) and one directory page.  The shared arena's shadow, 32
 * bytes per byte, is made at hk_race_new.  A chunk or page that cannot be
 * allocated later is marked dead and never checked (hk_race_degraded says
 * so); so are global accesses of a thread whose id needs more than 44 bits.
 *
 * The event count is 16 bits: before it overflows, the running block's
 * records are renumbered to 0 (ordered by a barrier), 1 (ordered only for
 * lanes of their wave) or 2 (not yet ordered), which keeps every answer, at
 * a cost of one pass over the shadow the block touched per 65,534 events.
 *
 * No locks: one launch, one OS thread at a time (host_check.h).
 */
#include <string.h>

#include "../../core/core.h"
#include "devarray/kernel.h"
#include "host_check.h"

#define RC_PC_BITS 20
#define RC_PC_LIMIT (1u << RC_PC_BITS) /* indices 0 .. RC_PC_LIMIT - 1 */
#define RC_PC_NONE 0u                  /* an empty record */
#define RC_PC_NULL 1u                  /* a NULL pc, or one past the table */
#define RC_GID_BITS 44
#define RC_GID_MAX ((UINT64_C(1) << RC_GID_BITS) - 1)
#define RC_SEQ_MAX 0xFFFEu /* the last count an event may reach */
#define RC_CHUNK_BITS 12   /* bytes of region per shadow chunk: 4 KiB */
#define RC_CHUNK_BYTES ((size_t)1 << RC_CHUNK_BITS)
#define RC_PAGE_BITS 9 /* chunk pointers per directory page: 512 */
#define RC_PAGE_SPAN_BITS (RC_CHUNK_BITS + RC_PAGE_BITS)

/* The shadow of one byte. */
typedef struct rc_cell {
  uint64_t w, r[2];   /* last write, readers since: gid << RC_PC_BITS | pc; 0: none */
  uint16_t ws, rs[2]; /* the block's event count at each */
  uint16_t gen;       /* shared cells: the block generation they belong to */
} rc_cell;
_Static_assert(sizeof(rc_cell) == 32, "a shadow cell is 32 bytes");

typedef struct rc_chunk {
  uint64_t stamp; /* the ordinal of the last block that touched it */
  rc_cell cell[RC_CHUNK_BYTES];
} rc_chunk;

typedef struct rc_region {
  size_t bytes;
  size_t npages;
  rc_chunk ***page; /* npages directory pages of 2^RC_PAGE_BITS chunks; NULL: untouched */
} rc_region;

/* What a chunk or directory page that could not be allocated points to. */
static uint64_t rc_dead_marker;
#define RC_DEAD_CHUNK ((rc_chunk *)(void *)&rc_dead_marker)
#define RC_DEAD_PAGE ((rc_chunk **)(void *)&rc_dead_marker)

struct hk_race {
  size_t nregions;
  rc_region *reg;
  size_t shared_bytes;
  rc_cell *shared;
  size_t held; /* bytes allocated (hk_race_shadow_bytes) */
  int bt, wave, nwaves;
  /* the running block */
  uint64_t block, ordinal, base; /* base: block * bt, the gid of its thread 0 */
  bool gid_ok;                   /* every thread of the block has a 44-bit gid */
  uint16_t gen;                  /* shared cells of another generation are empty */
  uint32_t seq, last_local, last_global, *last_wave;
  bool dirty; /* an access was recorded at the current seq */
  bool degraded;
  /* pcs, interned: pcs[i] is index i's; an open-addressing table finds them */
  const void **pcs;
  uint32_t npcs, pcs_cap;
  const void **hkey;
  uint32_t *hval;
  uint32_t hcap;
  const void *last_pc;
  uint32_t last_idx;
};

/* ---- pcs ---- */

static uint32_t rc_hash(const void *pc, uint32_t mask) {
  uint64_t h = (uint64_t)(uintptr_t)pc * UINT64_C(0x9E3779B97F4A7C15);
  return (uint32_t)(h >> 32) & mask;
}

/* Room for one more pc; false: no memory (the pc then goes unnamed). */
static bool rc_pc_grow(hk_race *r) {
  if (r->npcs == r->pcs_cap) {
    uint32_t cap = r->pcs_cap * 2;
    const void **p = dv__malloc(cap * sizeof *p);
    if (!p) return false;
    memcpy(p, r->pcs, r->npcs * sizeof *p);
    dv__free(r->pcs);
    r->pcs = p;
    r->held += (size_t)(cap - r->pcs_cap) * sizeof *p;
    r->pcs_cap = cap;
  }
  if ((size_t)(r->npcs + 1) * 2 > r->hcap) {
    uint32_t cap = r->hcap * 2, mask = cap - 1;
    const void **k = dv__calloc(cap, sizeof *k);
    uint32_t *v = dv__malloc(cap * sizeof *v);
    if (!k || !v) {
      dv__free(k);
      dv__free(v);
      return false;
    }
    for (uint32_t i = 0; i < r->hcap; i++) {
      if (!r->hkey[i]) continue;
      uint32_t j = rc_hash(r->hkey[i], mask);
      while (k[j]) j = (j + 1) & mask;
      k[j] = r->hkey[i];
      v[j] = r->hval[i];
    }
    dv__free(r->hkey);
    dv__free(r->hval);
    r->hkey = k;
    r->hval = v;
    r->held += (size_t)(cap - r->hcap) * (sizeof *k + sizeof *v);
    r->hcap = cap;
  }
  return true;
}

static uint32_t rc_pc_slow(hk_race *r, const void *pc) {
  if (!pc) return RC_PC_NULL;
  uint32_t mask = r->hcap - 1, j = rc_hash(pc, mask);
  for (; r->hkey[j]; j = (j + 1) & mask)
    if (r->hkey[j] == pc) return r->hval[j];
  if (r->npcs >= RC_PC_LIMIT || !rc_pc_grow(r)) return RC_PC_NULL;
  mask = r->hcap - 1;
  for (j = rc_hash(pc, mask); r->hkey[j];) j = (j + 1) & mask;
  uint32_t idx = r->npcs++;
  r->pcs[idx] = pc;
  r->hkey[j] = pc;
  r->hval[j] = idx;
  return idx;
}

static inline uint32_t rc_pc(hk_race *r, const void *pc) {
  if (pc != r->last_pc) {
    r->last_idx = rc_pc_slow(r, pc);
    r->last_pc = pc;
  }
  return r->last_idx;
}

/* ---- records ---- */

static inline uint64_t rc_gid(uint64_t v) { return v >> RC_PC_BITS; }

/* Is record v (gid rg, event count s) of the running block ordered before an
 * access by thread t of the block?  last: the count of the last barrier of
 * the memory's fence; base: the gid of the block's thread 0. */
static inline bool rc_ordered(const hk_race *r, uint64_t rg, uint32_t s, uint32_t last,
                              uint64_t base, int t) {
  if (last > s) return true;
  int w = t / r->wave;
  return (int)((rg - base) / (uint64_t)r->wave) == w && r->last_wave[w] > s;
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
  int w = (int)((rg - base) / (uint64_t)r->wave);
  return r->last_wave[w] > s ? 1 : 2;
}

/* Record a read by `me` (gid g, thread t) in c's readers. */
static void rc_add_reader(const hk_race *r, rc_cell *c, uint64_t me, uint64_t g, uint32_t last,
                          uint64_t base, int t, bool global) {
  uint16_t s = (uint16_t)r->seq;
  for (int i = 0; i < 2; i++)
    if (!c->r[i] || rc_gid(c->r[i]) == g) {
      c->r[i] = me;
      c->rs[i] = s;
      return;
    }
  /* Two other readers: keep the two of the three that reach further; on a
   * tie, keep the new one, and lanes of different waves. */
  int k0 = rc_reach(r, c->r[0], c->rs[0], last, base, global);
  int k1 = rc_reach(r, c->r[1], c->rs[1], last, base, global);
  int kn = 2;
  if (kn < k0 && kn < k1) return;
  int drop;
  if (k0 != k1) {
    drop = k0 < k1 ? 0 : 1;
  } else {
    int w = t / r->wave;
    int w0 = (int)((rc_gid(c->r[0]) - base) / (uint64_t)r->wave);
    int w1 = (int)((rc_gid(c->r[1]) - base) / (uint64_t)r->wave);
    drop = (w1 == w && w0 != w) ? 1 : 0;
  }
  c->r[drop] = me;
  c->rs[drop] = s;
}

static void rc_fill_hit(const hk_race *r, hk_race_hit *hit, uint64_t v, bool write, size_t off,
                        bool global) {
  if (!hit) return;
  uint64_t rg = rc_gid(v);
  uint32_t pc = (uint32_t)(v & (RC_PC_LIMIT - 1));
  hit->prev.block = global ? rg / (uint64_t)r->bt : r->block;
  hit->prev.thread = global ? (int)(rg % (uint64_t)r->bt) : (int)rg;
  hit->prev.pc = pc < r->npcs ? r->pcs[pc] : NULL;
  hit->prev.write = write;
  hit->off = off;
}

/* Check and record an access of n cells from c (the first at offset off) by
 * gid g, thread t; `found`: a race was already reported for this access (the
 * rest is only recorded).  true: this call found one (*hit). */
static bool rc_cells(hk_race *r, rc_cell *c, size_t n, size_t off, uint16_t gen, uint64_t g, int t,
                     uint32_t pc, bool write, bool global, bool found, hk_race_hit *hit) {
  uint64_t me = g << RC_PC_BITS | pc;
  uint64_t base = global ? r->base : 0;
  uint32_t last = global ? r->last_global : r->last_local;
  uint16_t s = (uint16_t)r->seq;
  bool now = false;
  for (size_t i = 0; i < n; i++, c++) {
    if (c->gen != gen) *c = (rc_cell){.gen = gen};
    if (!found && !now) {
      if (rc_conflict(r, c->w, c->ws, g, last, base, t)) {
        rc_fill_hit(r, hit, c->w, true, off + i, global);
        now = true;
      } else if (write) {
        for (int k = 0; k < 2 && !now; k++)
          if (rc_conflict(r, c->r[k], c->rs[k], g, last, base, t)) {
            rc_fill_hit(r, hit, c->r[k], false, off + i, global);
            now = true;
          }
      }
    }
    if (write) {
      c->w = me;
      c->ws = s;
      c->r[0] = c->r[1] = 0;
    } else {
      rc_add_reader(r, c, me, g, last, base, t, global);
    }
  }
  return now;
}

/* ---- renumbering the event counts ---- */

static uint16_t rc_renum(const hk_race *r, uint64_t v, uint16_t s, uint32_t last, uint64_t base) {
  if (last > s) return 0;
  int w = (int)((rc_gid(v) - base) / (uint64_t)r->wave);
  return r->last_wave[w] > s ? 1 : 2;
}

static void rc_renum_cells(const hk_race *r, rc_cell *c, size_t n, uint16_t gen, uint32_t last,
                           uint64_t base) {
  for (size_t i = 0; i < n; i++, c++) {
    if (c->gen != gen) continue;
    if (c->w && rc_gid(c->w) - base < (uint64_t)r->bt) c->ws = rc_renum(r, c->w, c->ws, last, base);
    for (int k = 0; k < 2; k++)
      if (c->r[k] && rc_gid(c->r[k]) - base < (uint64_t)r->bt)
        c->rs[k] = rc_renum(r, c->r[k], c->rs[k], last, base);
  }
}

/* The running block's counts are about to overflow: renumber its records so
 * that each answers as before, then restart the counts at 2. */
static void rc_renumber(hk_race *r) {
  rc_renum_cells(r, r->shared, r->shared_bytes, r->gen, r->last_local, 0);
  for (size_t g = 0; g < r->nregions && r->gid_ok; g++) {
    rc_region *rg = &r->reg[g];
    for (size_t p = 0; p < rg->npages; p++) {
      rc_chunk **page = rg->page[p];
      if (!page || page == RC_DEAD_PAGE) continue;
      for (size_t k = 0; k < ((size_t)1 << RC_PAGE_BITS); k++) {
        rc_chunk *ch = page[k];
        if (!ch || ch == RC_DEAD_CHUNK || ch->stamp != r->ordinal) continue;
        rc_renum_cells(r, ch->cell, RC_CHUNK_BYTES, 0, r->last_global, r->base);
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

hk_race *hk_race_new(size_t nregions, const size_t *bytes, size_t shared_bytes, int block_threads,
                     int wave) {
  if (block_threads < 1 || wave < 1 || (nregions && !bytes)) return NULL;
  if (shared_bytes > SIZE_MAX / sizeof(rc_cell) || nregions > SIZE_MAX / sizeof(rc_region))
    return NULL;
  hk_race *r = dv__calloc(1, sizeof *r);
  if (!r) return NULL;
  r->bt = block_threads;
  r->wave = wave;
  r->nwaves = (block_threads + wave - 1) / wave;
  r->nregions = nregions;
  r->shared_bytes = shared_bytes;
  r->reg = dv__calloc(nregions, sizeof *r->reg);
  r->shared = dv__calloc(shared_bytes, sizeof *r->shared);
  r->last_wave = dv__calloc((size_t)r->nwaves, sizeof *r->last_wave);
  r->pcs_cap = 64;
  r->hcap = 128;
  r->pcs = dv__malloc(r->pcs_cap * sizeof *r->pcs);
  r->hkey = dv__calloc(r->hcap, sizeof *r->hkey);
  r->hval = dv__malloc(r->hcap * sizeof *r->hval);
  bool ok = r->reg && r->shared && r->last_wave && r->pcs && r->hkey && r->hval;
  r->held = sizeof *r + nregions * sizeof *r->reg + shared_bytes * sizeof *r->shared +
            (size_t)r->nwaves * sizeof *r->last_wave + r->pcs_cap * sizeof *r->pcs +
            r->hcap * (sizeof *r->hkey + sizeof *r->hval);
  for (size_t g = 0; ok && g < nregions; g++) {
    rc_region *rg = &r->reg[g];
    rg->bytes = bytes[g];
    rg->npages = (bytes[g] >> RC_PAGE_SPAN_BITS) +
                 ((bytes[g] & (((size_t)1 << RC_PAGE_SPAN_BITS) - 1)) != 0);
    if (!rg->npages) continue;
    rg->page = dv__calloc(rg->npages, sizeof *rg->page);
    ok = rg->page != NULL;
    r->held += rg->npages * sizeof *rg->page;
  }
  if (!ok) {
    hk_race_free(r);
    return NULL;
  }
  r->npcs = 2; /* RC_PC_NONE, RC_PC_NULL */
  r->pcs[RC_PC_NONE] = r->pcs[RC_PC_NULL] = NULL;
  r->last_idx = RC_PC_NULL;
  r->gid_ok = true;
  return r;
}

void hk_race_free(hk_race *r) {
  if (!r) return;
  for (size_t g = 0; r->reg && g < r->nregions; g++) {
    rc_region *rg = &r->reg[g];
    for (size_t p = 0; rg->page && p < rg->npages; p++) {
      rc_chunk **page = rg->page[p];
      if (!page || page == RC_DEAD_PAGE) continue;
      for (size_t k = 0; k < ((size_t)1 << RC_PAGE_BITS); k++)
        if (page[k] != RC_DEAD_CHUNK) dv__free(page[k]);
      dv__free(page);
    }
    dv__free(rg->page);
  }
  dv__free(r->reg);
  dv__free(r->shared);
  dv__free(r->last_wave);
  dv__free(r->pcs);
  dv__free(r->hkey);
  dv__free(r->hval);
  dv__free(r);
}

void hk_race_block(hk_race *r, uint64_t block) {
  if (!r) return;
  r->block = block;
  r->ordinal++;
  uint64_t bt = (uint64_t)r->bt;
  r->gid_ok = block <= (RC_GID_MAX - (bt - 1)) / bt;
  r->base = r->gid_ok ? block * bt : 0;
  r->seq = r->last_local = r->last_global = 0;
  memset(r->last_wave, 0, (size_t)r->nwaves * sizeof *r->last_wave);
  r->dirty = false;
  if (++r->gen == 0) { /* generations wrapped: empty every shared cell once */
    memset(r->shared, 0, r->shared_bytes * sizeof *r->shared);
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
  rc_chunk **page = rg->page[p];
  if (DV_UNLIKELY(!page)) {
    page = dv__calloc((size_t)1 << RC_PAGE_BITS, sizeof *page);
    if (!page) {
      r->degraded = true;
      page = RC_DEAD_PAGE;
    } else {
      r->held += ((size_t)1 << RC_PAGE_BITS) * sizeof *page;
    }
    rg->page[p] = page;
  }
  if (page == RC_DEAD_PAGE) return NULL;
  rc_chunk *ch = page[k];
  if (DV_UNLIKELY(!ch)) {
    ch = dv__calloc(1, sizeof *ch);
    if (!ch) {
      r->degraded = true;
      ch = RC_DEAD_CHUNK;
    } else {
      r->held += sizeof *ch;
    }
    page[k] = ch;
  }
  return ch == RC_DEAD_CHUNK ? NULL : ch;
}

bool hk_race_global(hk_race *r, size_t g, size_t off, size_t n, const hk_acc *a, hk_race_hit *hit) {
  if (!r || !a || g >= r->nregions || a->thread < 0 || a->thread >= r->bt) return false;
  rc_region *rg = &r->reg[g];
  if (off >= rg->bytes || n == 0) return false;
  if (n > rg->bytes - off) n = rg->bytes - off;
  if (!r->gid_ok) {
    r->degraded = true;
    return false;
  }
  uint64_t gid = r->base + (uint64_t)a->thread;
  uint32_t pc = rc_pc(r, a->pc);
  r->dirty = true;
  bool found = false;
  while (n) {
    size_t in = off & (RC_CHUNK_BYTES - 1);
    size_t take = n < RC_CHUNK_BYTES - in ? n : RC_CHUNK_BYTES - in;
    rc_chunk *ch = rc_chunk_at(r, rg, off);
    if (ch) {
      ch->stamp = r->ordinal;
      found |=
          rc_cells(r, ch->cell + in, take, off, 0, gid, a->thread, pc, a->write, true, found, hit);
    }
    off += take;
    n -= take;
  }
  return found;
}

bool hk_race_shared(hk_race *r, size_t off, size_t n, const hk_acc *a, hk_race_hit *hit) {
  if (!r || !a || a->thread < 0 || a->thread >= r->bt) return false;
  if (off >= r->shared_bytes || n == 0) return false;
  if (n > r->shared_bytes - off) n = r->shared_bytes - off;
  uint32_t pc = rc_pc(r, a->pc);
  r->dirty = true;
  return rc_cells(r, r->shared + off, n, off, r->gen, (uint64_t)a->thread, a->thread, pc, a->write,
                  false, false, hit);
}

bool hk_race_degraded(const hk_race *r) { return r && r->degraded; }

size_t hk_race_shadow_bytes(const hk_race *r) { return r ? r->held : 0; }
