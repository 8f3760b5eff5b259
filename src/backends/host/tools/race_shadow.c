/*
 * The race checks' shared shadow state (race_internal.h): what a
 * launch's views share and allocate while blocks run in parallel: the pc
 * table (under `pcm`), the global regions' directory pages and chunks (made
 * under `alloc`, published with release stores) and the split words' pool
 * (segments that double and never move, handed out under `alloc`).
 */
#include <string.h>

#include "../../../core/core.h"
#include "race_internal.h"

uint64_t dv__rc_dead_marker;

/* ---- pcs ---- */

static uint32_t rc_hash(const void *pc, uint32_t mask) {
  uint64_t h = (uint64_t)(uintptr_t)pc * UINT64_C(0x9E3779B97F4A7C15);
  return (uint32_t)(h >> 32) & mask;
}

/* Room for one more pc; false: no memory (the pc then goes unnamed). */
static bool rc_pc_grow(rc_glob *r) {
  if (r->npcs == r->pcs_cap) {
    uint32_t cap = r->pcs_cap * 2;
    const void **p = dv__malloc(cap * sizeof *p);
    if (!p) return false;
    memcpy(p, r->pcs, r->npcs * sizeof *p);
    dv__free(r->pcs);
    r->pcs = p;
    rc_held(r, (size_t)(cap - r->pcs_cap) * sizeof *p);
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
    rc_held(r, (size_t)(cap - r->hcap) * (sizeof *k + sizeof *v));
    r->hcap = cap;
  }
  return true;
}

uint32_t rc_pc_slow(hk_race *v, const void *pc) {
  if (!pc) return RC_PC_NULL;
  rc_glob *r = v->gl;
  pthread_mutex_lock(&r->pcm);
  uint32_t mask = r->hcap - 1, j = rc_hash(pc, mask), idx = RC_PC_NULL;
  for (; r->hkey[j]; j = (j + 1) & mask)
    if (r->hkey[j] == pc) {
      idx = r->hval[j];
      goto out;
    }
  if (r->npcs >= RC_PC_LIMIT || !rc_pc_grow(r)) goto out;
  mask = r->hcap - 1;
  for (j = rc_hash(pc, mask); r->hkey[j];) j = (j + 1) & mask;
  idx = r->npcs++;
  r->pcs[idx] = pc;
  r->hkey[j] = pc;
  r->hval[j] = idx;
out:
  pthread_mutex_unlock(&r->pcm);
  return idx;
}

/* The pc of index i (NULL: none). */
const void *rc_pc_at(const hk_race *v, uint32_t i) {
  rc_glob *r = v->gl;
  pthread_mutex_lock(&r->pcm);
  const void *pc = i < r->npcs ? r->pcs[i] : NULL;
  pthread_mutex_unlock(&r->pcm);
  return pc;
}

/* ---- the launch's state ---- */

void rc_glob_free(rc_glob *g) {
  for (size_t i = 0; g->reg && i < g->nregions; i++) {
    rc_region *rg = &g->reg[i];
    for (size_t p = 0; rg->page && p < rg->npages; p++) {
      rc_chunk **page = rg->page[p];
      if (!page || page == RC_DEAD_PAGE) continue;
      for (size_t k = 0; k < ((size_t)1 << RC_PAGE_BITS); k++)
        if (page[k] != RC_DEAD_CHUNK) dv__free(page[k]);
      dv__free(page);
    }
    dv__free(rg->page);
  }
  for (size_t si = 0; g->seg && si < RC_SEGS; si++) dv__free(atomic_load(&g->seg[si]));
  dv__free(g->seg);
  dv__free(g->reg);
  dv__free(g->pcs);
  dv__free(g->hkey);
  dv__free(g->hval);
  pthread_mutex_destroy(&g->alloc);
  pthread_mutex_destroy(&g->pcm);
  dv__free(g);
}

rc_glob *rc_glob_new(size_t nregions, const size_t *bytes) {
  rc_glob *g = dv__calloc(1, sizeof *g);
  if (!g) return NULL;
  pthread_mutex_init(&g->alloc, NULL);
  pthread_mutex_init(&g->pcm, NULL);
  g->nregions = nregions;
  g->reg = dv__calloc(nregions, sizeof *g->reg);
  g->seg = dv__calloc(RC_SEGS, sizeof *g->seg);
  g->pcs_cap = 64;
  g->hcap = 128;
  g->pcs = dv__malloc(g->pcs_cap * sizeof *g->pcs);
  g->hkey = dv__calloc(g->hcap, sizeof *g->hkey);
  g->hval = dv__malloc(g->hcap * sizeof *g->hval);
  bool ok = g->reg && g->seg && g->pcs && g->hkey && g->hval;
  size_t held = sizeof *g + nregions * sizeof *g->reg + RC_SEGS * sizeof *g->seg +
                g->pcs_cap * sizeof *g->pcs + g->hcap * (sizeof *g->hkey + sizeof *g->hval);
  for (size_t i = 0; ok && i < nregions; i++) {
    rc_region *rg = &g->reg[i];
    rg->bytes = bytes[i];
    rg->npages = (bytes[i] >> RC_PAGE_SPAN_BITS) +
                 ((bytes[i] & (((size_t)1 << RC_PAGE_SPAN_BITS) - 1)) != 0);
    if (!rg->npages) continue;
    rg->page = dv__calloc(rg->npages, sizeof *rg->page);
    ok = rg->page != NULL;
    held += rg->npages * sizeof *rg->page;
  }
  if (!ok) {
    rc_glob_free(g);
    return NULL;
  }
  atomic_store(&g->held, held);
  g->npcs = 2; /* RC_PC_NONE, RC_PC_NULL */
  g->pcs[RC_PC_NONE] = g->pcs[RC_PC_NULL] = NULL;
  return g;
}

/* ---- chunks and the pool ---- */

/* rc_chunk_at's work when the page or chunk is not there yet: made under
 * `alloc` (another executor may be making it), then published. */
rc_chunk *rc_chunk_make(hk_race *r, rc_region *rg, size_t p, size_t k) {
  rc_glob *g = r->gl;
  pthread_mutex_lock(&g->alloc);
  rc_chunk **page = rg->page[p];
  if (!page) {
    page = dv__calloc((size_t)1 << RC_PAGE_BITS, sizeof *page);
    if (!page) {
      rc_degrade(r);
      page = RC_DEAD_PAGE;
    } else {
      rc_held(g, ((size_t)1 << RC_PAGE_BITS) * sizeof *page);
    }
    __atomic_store_n(&rg->page[p], page, __ATOMIC_RELEASE);
  }
  rc_chunk *ch = NULL;
  if (page != RC_DEAD_PAGE) {
    ch = page[k];
    if (!ch) {
      ch = dv__calloc(1, sizeof *ch);
      if (!ch) {
        rc_degrade(r);
        ch = RC_DEAD_CHUNK;
      } else {
        rc_held(g, sizeof *ch);
      }
      __atomic_store_n(&page[k], ch, __ATOMIC_RELEASE);
    }
  }
  pthread_mutex_unlock(&g->alloc);
  return !ch || ch == RC_DEAD_CHUNK ? NULL : ch;
}

bool rc_pool_take(rc_glob *g, size_t *gi) {
  pthread_mutex_lock(&g->alloc);
  if (!g->pool_free) {
    const size_t si = (size_t)(63 - __builtin_clzll((unsigned long long)(
                          (g->pool_groups >> RC_SEG_BITS) + 1)));
    const size_t n = (size_t)1 << (RC_SEG_BITS + si);
    rc_cell *p = si < RC_SEGS ? dv__malloc(n * 4 * sizeof *p) : NULL;
    if (!p) {
      pthread_mutex_unlock(&g->alloc);
      return false;
    }
    for (size_t i = 0; i < n; i++)
      p[4 * i].w = i + 1 < n ? g->pool_groups + i + 2 : 0;
    g->pool_free = g->pool_groups + 1;
    g->pool_groups += n;
    rc_held(g, n * 4 * sizeof *p);
    atomic_store_explicit(&g->seg[si], p, memory_order_release);
  }
  *gi = g->pool_free - 1;
  g->pool_free = (size_t)rc_group(g, *gi)[0].w;
  pthread_mutex_unlock(&g->alloc);
  return true;
}

void rc_pool_put(rc_glob *g, size_t gi) {
  pthread_mutex_lock(&g->alloc);
  rc_group(g, gi)[0].w = g->pool_free;
  g->pool_free = gi + 1;
  pthread_mutex_unlock(&g->alloc);
}
