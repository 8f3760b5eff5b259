/*
 * The host simulator's device memory: blocks, capacity, and the two ways a
 * freed block goes.
 *
 *  - Every block is a mapping of its own (never the C heap, issue 37): its
 *    HB_MAP_GUARD bytes before and after are reserved PROT_NONE, and the
 *    payload ends at most its tail slack (under 256 bytes, plus the colour
 *    of a big fast-mode block) before the back guard, so a kernel's access
 *    past the end or before the start of a buffer by up to 64 KiB is a
 *    SIGSEGV the launch reports (exec/signal.c), never a write into the
 *    program's memory.  Each such block costs two memory maps; past
 *    hb_map_budget of them (vm.max_map_count) new blocks are mapped
 *    without guards of their own (their neighbours are then mostly other
 *    device blocks) and the canaries remain.
 *  - Every block is host RAM owned by the simulator, charged against the
 *    capacity (option host_memory) in 256-byte units; it is live until its
 *    last reference (the owner's, then queued operations') is gone.  Its
 *    record is on the state's block list from its making until it is
 *    freed or quarantined: live, or (fast mode) waiting in the cache, so
 *    that reusing a cached block moves no list links (issue 23: unlinking
 *    wrote to two other blocks' records, cold by then, at every free).
 *  - Checked mode (host_guard on): guard bytes fill HB_FRONT before and at
 *    least HB_BACK after the payload, fresh payloads are filled with 0xCD,
 *    freed blocks are poisoned and kept in a quarantine whose poison is
 *    checked on eviction and by dv_context_check_memory.  O(size) per
 *    allocation and free, on purpose.
 *  - Fast mode (host_guard off): no fill, no poison, no quarantine.  The
 *    HB_CANARY bytes on either side of the payload are set by the first
 *    launch that uses the block and checked from then on (O(1), after
 *    every launch that uses it, whatever kernel_check says), which catches
 *    a kernel's usual one-element overrun inside the tail slack.  Freed blocks
 *    of up to HB_CACHE_MAX_BLOCK bytes are kept in a small cache by
 *    size class (bounded in count and bytes; emptied by dv_memory_trim, at
 *    close, and before retrying an allocation the system refused), so a
 *    loop that allocates and frees 1 MiB reuses warm pages instead of
 *    faulting in 256 fresh ones each time, and a small block costs no
 *    system call either.  Cached blocks
 *    are free device memory: the capacity and the statistics do not count
 *    them.  option host_ipc blocks (memfds whose handles a free revokes) are
 *    never cached.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "device_internal.h"

#if DV_HOST_ASAN
#include <sanitizer/asan_interface.h>
#endif
#ifndef ASAN_POISON_MEMORY_REGION
#define ASAN_POISON_MEMORY_REGION(a, n) ((void)(a), (void)(n))
#define ASAN_UNPOISON_MEMORY_REGION(a, n) ((void)(a), (void)(n))
#endif

bool hb_fault_fires(hb_state *st, dv_fault_kind k) {
  uint64_t v = atomic_load(&st->fault[k]);
  while (v != 0)
    if (atomic_compare_exchange_weak(&st->fault[k], &v, v - 1)) return v == 1;
  return false;
}

static void hb_list_insert(hb_block *head, hb_block *b) {
  b->next = head;
  b->prev = head->prev;
  head->prev->next = b;
  head->prev = b;
}

static void hb_list_remove(hb_block *b) {
  b->prev->next = b->next;
  b->next->prev = b->prev;
  b->next = b->prev = NULL;
}

/* Not instrumented: while a kernel runs, an ASan build poisons the guards of
 * its arguments (host_kernel.c), and checks may read them meanwhile. */
DV_NO_ASAN static bool hb_all(const unsigned char *p, size_t n, unsigned char v) {
  /* Eight bytes at a time (fast mode's canaries are one word each side). */
  const uint64_t w = 0x0101010101010101ull * v;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t x;
    __builtin_memcpy(&x, p + i, 8);
    if (x != w) return false;
  }
  for (; i < n; i++)
    if (p[i] != v) return false;
  return true;
}

/* Checked mode's guards: all of the block's mapping before and after the payload. */
static size_t hb_tail(const hb_block *b) { return (size_t)(b->base + b->total - b->data) - b->bytes; }

static bool hb_full_guards_ok(const hb_block *b) {
  return hb_all(b->base, (size_t)(b->data - b->base), HB_GUARD_BYTE) &&
         hb_all(b->data + b->bytes, hb_tail(b), HB_GUARD_BYTE);
}

/* Fast mode's guard: HB_CANARY bytes on either side of the payload, once a
 * launch has written them (HB_CANARY_SET; the acquire pairs with
 * hb_guards_arm's release, so a launch still writing them on another
 * stream's worker is not mistaken for an overrun). */
static bool hb_canaries_ok(const hb_block *b) {
  if (atomic_load_explicit(&b->canary, memory_order_acquire) != HB_CANARY_SET) return true;
  return hb_all(b->data - HB_CANARY, HB_CANARY, HB_GUARD_BYTE) &&
         hb_all(b->data + b->bytes, HB_CANARY, HB_GUARD_BYTE);
}

bool hb_guards_ok(const hb_block *b) {
  if (b->alias) return true;
  return b->st->guard ? hb_full_guards_ok(b) : hb_canaries_ok(b);
}

/* The first launch to use a fast-mode block writes its canaries (one
 * writer: the exchange from HB_CANARY_NONE); a launch that finds them being
 * written waits the few instructions until they are, so that an overrun it
 * makes cannot be overwritten by them (review of issue 23). */
void hb_guards_arm(hb_block *b) {
  if (b->alias || b->st->guard) return;
  unsigned char seen = atomic_load_explicit(&b->canary, memory_order_acquire);
  if (seen == HB_CANARY_SET) return;
  if (seen == HB_CANARY_NONE &&
      atomic_compare_exchange_strong_explicit(&b->canary, &seen, HB_CANARY_WRITING,
                                              memory_order_acquire, memory_order_acquire)) {
    memset(b->data - HB_CANARY, HB_GUARD_BYTE, HB_CANARY);
    memset(b->data + b->bytes, HB_GUARD_BYTE, HB_CANARY);
    atomic_store_explicit(&b->canary, HB_CANARY_SET, memory_order_release);
    return;
  }
  while (atomic_load_explicit(&b->canary, memory_order_acquire) != HB_CANARY_SET) sched_yield();
}

static void hb_corruption(hb_state *st, const hb_block *b, const char *what) {
  atomic_fetch_add(&st->corruptions, 1);
  dv__log(DV_LOG_ERROR, "host simulator: %s of the %zu-byte block at %p", what, b->bytes,
          (void *)b->data);
}

/* ---- the mappings behind blocks ---- */

static size_t hb_page(void) {
  static _Atomic size_t page;
  size_t p = atomic_load_explicit(&page, memory_order_relaxed);
  if (!p) {
    long v = sysconf(_SC_PAGESIZE);
    p = v > 0 ? (size_t)v : 4096;
    atomic_store_explicit(&page, p, memory_order_relaxed);
  }
  return p;
}

static size_t hb_round_page(size_t n) { return (n + hb_page() - 1) & ~(hb_page() - 1); }

/* Blocks mapped with guards of their own, in the whole process (each costs
 * two of vm.max_map_count's maps: its own and the guard it shares with a
 * neighbour's), and how many may be: a third of the limit, leaving the
 * rest to the program (a Python process uses a few hundred). */
static _Atomic long hb_guarded_maps;
static long hb_map_budget(void) {
  static _Atomic long budget;
  long b = atomic_load_explicit(&budget, memory_order_relaxed);
  if (b) return b;
  long limit = 65530;
  FILE *f = fopen("/proc/sys/vm/max_map_count", "r");
  if (f) {
    long v;
    if (fscanf(f, "%ld", &v) == 1 && v > 0) limit = v;
    fclose(f);
  }
  b = limit / 3 > 1 ? limit / 3 : 1;
  atomic_store_explicit(&budget, b, memory_order_relaxed);
  return b;
}

/* Map `total` (a page multiple) read-write bytes for b, between
 * HB_MAP_GUARD bytes of PROT_NONE on either side while the budget lasts;
 * NULL when the system refuses. */
static unsigned char *hb_map_new(hb_block *b, size_t total) {
  const size_t g = hb_round_page(HB_MAP_GUARD);
  if (atomic_fetch_add_explicit(&hb_guarded_maps, 1, memory_order_relaxed) < hb_map_budget()) {
    size_t len = total + 2 * g;
    void *m = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m != MAP_FAILED) {
      unsigned char *rw = (unsigned char *)m + g;
      if (mprotect(rw, total, PROT_READ | PROT_WRITE) == 0) {
        b->map = m;
        b->map_len = len;
        return rw;
      }
      munmap(m, len);
    }
  }
  atomic_fetch_sub_explicit(&hb_guarded_maps, 1, memory_order_relaxed);
  /* Over the budget (or the guarded mapping was refused): no guards of its own. */
  void *m = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return NULL;
  b->map = m;
  b->map_len = total;
  return m;
}

/* Unmap a block's own mapping (its guard pages included). */
static void hb_map_free(hb_block *b) {
  if (!b->map) return;
  if (b->map_len != b->total) atomic_fetch_sub_explicit(&hb_guarded_maps, 1, memory_order_relaxed);
  munmap(b->map, b->map_len);
  b->map = NULL;
}

/* Whether blocks of this state go to the cache when freed. */
static bool hb_cacheable(const hb_state *st) { return !st->guard && !st->ipc; }

/* Read-write bytes behind a block charged `charged` (HB_FRONT, the
 * payload, its back guard or canary rounded to 256, and for a big fast-mode
 * block room for any colour), whole pages; those of HB_COLOR_MIN bytes or
 * more that the cache may keep are rounded up to their size class: an
 * eighth of the power of two below them (at most 12.5% more). */
static size_t hb_total(const hb_state *st, size_t charged) {
  size_t need = HB_FRONT + charged + 256;
  const bool big = hb_cacheable(st) && need >= HB_COLOR_MIN && need <= HB_CACHE_MAX_BLOCK;
  if (big) need += (HB_COLORS - 1) * 256;
  size_t total = hb_round_page(need);
  if (!big) return total;
  int lg = 63 - __builtin_clzll((unsigned long long)total);
  size_t step = (size_t)1 << (lg - 3);
  return hb_round_page((total + step - 1) & ~(step - 1));
}

static void hb_record_free(hb_block *b) {
  if (b->shared)
    hb_shared_free(b);
  else
    hb_map_free(b);
  free(b);
}

/* Free a chain of evicted cache entries (linked through next), after the
 * lock is released. */
static void hb_free_chain(hb_block *b) {
  while (b) {
    hb_block *n = b->next;
    hb_record_free(b);
    b = n;
  }
}

/* Take the oldest cache entries out until at most keep_bytes and keep_slots
 * remain (caller holds st->lock); returns them as a chain to free. */
static hb_block *hb_cache_drain(hb_state *st, size_t keep_bytes, int keep_slots) {
  hb_block *chain = NULL;
  int drop = 0;
  size_t bytes = st->cache_bytes;
  while (drop < st->ncache && (bytes > keep_bytes || st->ncache - drop > keep_slots)) {
    hb_cached *e = &st->cache[drop++];
    bytes -= e->total;
    ASAN_UNPOISON_MEMORY_REGION(e->b->base, e->total);
    hb_list_remove(e->b);
    e->b->next = chain;
    chain = e->b;
  }
  if (drop) memmove(st->cache, st->cache + drop, (size_t)(st->ncache - drop) * sizeof st->cache[0]);
  st->ncache -= drop;
  st->cache_bytes = bytes;
  return chain;
}

/* Keep b (`total` bytes at b->base) for a later allocation of its class,
 * evicting the oldest entries as needed.  Caller holds st->lock; false when
 * b does not fit (the caller frees it); *evicted gets what to free. */
static bool hb_cache_put(hb_state *st, hb_block *b, size_t total, hb_block **evicted) {
  *evicted = NULL;
  if (total > HB_CACHE_MAX_BLOCK || total > st->cache_limit) return false;
  if (st->ncache >= HB_CACHE_SLOTS || st->cache_bytes + total > st->cache_limit)
    *evicted = hb_cache_drain(st, st->cache_limit - total, HB_CACHE_SLOTS - 1);
  /* a use of freed memory still shows under ASan (its colour's bytes too) */
  ASAN_POISON_MEMORY_REGION(b->base, total);
  st->cache[st->ncache++] = (hb_cached){b, total};
  st->cache_bytes += total;
  return true;
}

/* The newest cached block of exactly `total` bytes, or NULL.  Caller holds
 * st->lock. */
static hb_block *hb_cache_take(hb_state *st, size_t total) {
  for (int i = st->ncache - 1; i >= 0; i--) {
    if (st->cache[i].total != total) continue;
    hb_block *b = st->cache[i].b;
    if (i != st->ncache - 1) /* the newest, usually */
      memmove(st->cache + i, st->cache + i + 1, (size_t)(st->ncache - i - 1) * sizeof st->cache[0]);
    st->ncache--;
    st->cache_bytes -= total;
    st->cache_hits++;
    ASAN_UNPOISON_MEMORY_REGION(b->base, total);
    return b;
  }
  return NULL;
}

/* Take quarantined blocks out (oldest first) until under the byte limit
 * (caller holds st->lock); returns them as a chain for hb_quarantine_free. */
static hb_block *hb_quarantine_trim(hb_state *st, size_t limit) {
  hb_block *chain = NULL, **tail = &chain;
  while (st->quarantine_bytes > limit && st->quarantine.next != &st->quarantine) {
    hb_block *b = st->quarantine.next;
    hb_list_remove(b);
    st->quarantine_bytes -= b->bytes;
    b->next = NULL;
    *tail = b;
    tail = &b->next;
  }
  return chain;
}

/* Check the poison of blocks out of the quarantine and free them, after the
 * lock (the scan is O(size) and a corruption is logged). */
static void hb_quarantine_free(hb_state *st, hb_block *b) {
  while (b) {
    hb_block *n = b->next;
    if (!hb_all(b->data, b->bytes, HB_POISON_BYTE)) hb_corruption(st, b, "write after free");
    hb_record_free(b);
    b = n;
  }
}

/* The last reference is gone: check guards, return capacity, then poison
 * and quarantine (checked mode), cache (fast mode) or free. */
static dv_status hb_block_destroy(hb_block *b) {
  hb_state *st = b->st;
  dv_status rc = DV_OK;
  if (b->alias) {
    if (st) { /* (NULL: its state closed first, hb_mem_close) */
      dv__spin_lock(&st->lock);
      hb_list_remove(b);
      dv__spin_unlock(&st->lock);
    }
    free(b);
    return DV_OK;
  }
  if (!hb_guards_ok(b)) {
    hb_corruption(st, b, "guard bytes overwritten (out-of-bounds write)");
    rc = dv__error(DV_ERR_CORRUPTION, "guard bytes of the %zu-byte block at %p were overwritten",
                   b->bytes, (void *)b->data);
  }
  if (b->shared) hb_shared_revoke(b); /* handles to it no longer open */
  hb_block *evicted = NULL, *unquarantined = NULL;
  /* Poisoned before the lock: nothing reaches the payload of a block whose
   * last reference is gone (dv_context_check_memory reads live blocks'
   * guards, not their payloads). */
  const bool quarantine = st->guard && b->bytes <= HB_QUARANTINE_MAX_BLOCK;
  if (quarantine) memset(b->data, HB_POISON_BYTE, b->bytes);
  dv__spin_lock(&st->lock);
  st->used -= b->charged;
  b->live = false;
  if (quarantine) {
    hb_list_remove(b);
    hb_list_insert(&st->quarantine, b);
    st->quarantine_bytes += b->bytes;
    unquarantined = hb_quarantine_trim(st, HB_QUARANTINE_MAX_BYTES);
    b = NULL;
  } else if (hb_cacheable(st) && hb_cache_put(st, b, b->total, &evicted)) {
    b = NULL; /* it stays on the block list, not live */
  } else {
    hb_list_remove(b);
  }
  dv__spin_unlock(&st->lock);
  if (evicted) hb_free_chain(evicted);
  if (unquarantined) hb_quarantine_free(st, unquarantined);
  if (b) hb_record_free(b);
  return rc;
}

dv_status hb_block_unref(hb_block *b) {
  if (b && dv__ref_drop(&b->refs)) return hb_block_destroy(b);
  return DV_OK;
}

/* A block's fields for a new allocation (b->base set; b->shared as
 * hb_shared_alloc left it), its guards or canaries written.  The payload
 * ends its guard or canary (rounded to 256 bytes) and its colour before the
 * end of the mapping, where the back guard pages start. */
static void hb_block_init(hb_state *st, hb_block *b, size_t bytes, size_t charged, size_t total) {
  b->st = st;
  b->alias = false;
  b->bytes = bytes;
  b->charged = charged;
  b->total = total;
  const size_t back = ((bytes + (st->guard ? HB_BACK : HB_CANARY) + 255) & ~(size_t)255);
  size_t color = b->color; /* a cached block of the class may hold a bigger payload now */
  if (color > total - HB_FRONT - back) color = (total - HB_FRONT - back) & ~(size_t)255;
  b->data = b->base + total - color - back;
  /* Not yet shared (the caller publishes it under the state's lock or by
   * returning it): plain stores, not three locked exchanges. */
  atomic_store_explicit(&b->refs, 1, memory_order_relaxed);
  atomic_store_explicit(&b->freed, false, memory_order_relaxed);
  atomic_store_explicit(&b->kernel_users, 0, memory_order_relaxed);
  atomic_store_explicit(&b->canary, HB_CANARY_NONE, memory_order_relaxed);
  b->live = true; /* published under st->lock (or not yet at all) */
  if (st->guard) {
    memset(b->base, HB_GUARD_BYTE, (size_t)(b->data - b->base));
    memset(b->data + bytes, HB_GUARD_BYTE, hb_tail(b));
    /* Fresh device memory is not zero on a GPU either. */
    memset(b->data, 0xCD, bytes);
  }
}

static dv_status hb_mem_refused(hb_state *st, size_t charged, size_t total) {
  dv__spin_lock(&st->lock);
  st->used -= charged;
  dv__spin_unlock(&st->lock);
  return dv__error(DV_ERR_OUT_OF_MEMORY, "host simulator: the system could not provide %zu bytes",
                   total);
}

dv_status hb_mem_alloc(void *state, size_t bytes, void **buf) {
  hb_state *st = state;
  *buf = NULL;
  if (hb_fault_fires(st, DV_FAULT_DEVICE_ALLOC))
    return dv__error(DV_ERR_OUT_OF_MEMORY, "injected fault: device allocation of %zu bytes", bytes);
  size_t charged = (bytes + 255) & ~(size_t)255;
  if (charged < bytes) return dv__error(DV_ERR_OUT_OF_MEMORY, "allocation of %zu bytes", bytes);
  dv__spin_lock(&st->lock);
  if (charged > st->cap - st->used) {
    size_t free_b = st->cap - st->used;
    dv__spin_unlock(&st->lock);
    return dv__error(DV_ERR_OUT_OF_MEMORY,
                     "host simulator: %zu bytes requested, %zu free of %zu (option host_memory)",
                     bytes, free_b, st->cap);
  }
  st->used += charged;
  size_t total = hb_total(st, charged); /* charged <= cap (at most 1 TiB): no overflow */
  hb_block *b = st->ncache ? hb_cache_take(st, total) : NULL;
  if (b) { /* fast mode, a warm block of this class: one lock, no system call */
    hb_block_init(st, b, bytes, charged, total); /* on the block list already */
    dv__spin_unlock(&st->lock);
    *buf = b;
    return DV_OK;
  }
  /* A new block: the live ones and the cached ones together stay within the
   * capacity (host_memory is what the simulated device holds, in whatever
   * state), so the oldest cached blocks go first. */
  hb_block *over = NULL;
  if (st->ncache && st->used + st->cache_bytes > st->cap)
    over = hb_cache_drain(st, st->cap - st->used, HB_CACHE_SLOTS);
  dv__spin_unlock(&st->lock);
  hb_free_chain(over);
  b = calloc(1, sizeof *b);
  if (!b) return hb_mem_refused(st, charged, total);
  /* Blocks the cache keeps are big and their sizes round numbers, so the
   * lines at their ends (the canaries, the records a program keeps at the
   * start) would all fall in the same cache sets: a few blocks in turn (the
   * deferred frees keep ten) would evict each other.  Each new one starts
   * its payload at one of HB_COLORS offsets, 256 bytes apart. */
  if (hb_cacheable(st) && total - HB_FRONT - charged - 256 >= (HB_COLORS - 1) * 256 &&
      total >= HB_COLOR_MIN && total <= HB_CACHE_MAX_BLOCK)
    b->color = (size_t)(atomic_fetch_add_explicit(&st->color_next, 1, memory_order_relaxed) %
                        HB_COLORS) * 256;
  unsigned char *base =
      st->ipc ? hb_shared_alloc(b, total) : hb_map_new(b, total);
  if (!base) { /* the system refused: give the cache back, try once more */
    hb_cache_trim(st);
    base = st->ipc ? hb_shared_alloc(b, total) : hb_map_new(b, total);
  }
  if (!base) {
    free(b);
    return hb_mem_refused(st, charged, total);
  }
  b->base = base;
  hb_block_init(st, b, bytes, charged, total);
  dv__spin_lock(&st->lock);
  hb_list_insert(&st->blocks, b);
  dv__spin_unlock(&st->lock);
  *buf = b;
  return DV_OK;
}

dv_status hb_mem_free(void *state, void *buf) {
  hb_state *st = state;
  hb_block *b = buf;
  if (!b) return dv__error(DV_ERR_INVALID_ARGUMENT, "free of a NULL device buffer");
  /* A second free of a block still known (cached, or held by queued work)
   * is refused; frees of one block racing on two threads are the caller's
   * data race, not checked with a locked exchange on every free. */
  if (atomic_load_explicit(&b->freed, memory_order_relaxed))
    return dv__error(DV_ERR_INVALID_ARGUMENT, "double free of the device buffer %p", buf);
  atomic_store_explicit(&b->freed, true, memory_order_relaxed);
  bool fault = hb_fault_fires(st, DV_FAULT_FREE);
  dv_status rc = hb_block_unref(b);
  if (fault) return dv__error(DV_ERR_DRIVER, "injected fault: device free of %p", buf);
  return rc;
}

/* Whether buf (a block, or with `native` an address inside one's payload,
 * or inside live mapped or wrapped memory the device addresses) is one of
 * this state's live blocks holding [offset, offset + bytes): looked up on
 * the block lists by address, never read through, so any value a plugged-in
 * memory manager or a foreign array interface hands over is safe to ask
 * about. */
dv_status hb_buffer_check(void *state, void *buf, bool native, size_t offset, size_t bytes) {
  hb_state *st = state;
  bool found = false, fits = false;
  uintptr_t p = (uintptr_t)buf;
  dv__spin_lock(&st->lock);
  for (int list = 0; list < (native ? 2 : 1) && !fits; list++) {
    hb_block *head = list ? &st->aliases : &st->blocks;
    for (hb_block *b = head->next; b != head; b = b->next) {
      if ((!list && !b->live) || atomic_load_explicit(&b->freed, memory_order_relaxed)) continue;
      uintptr_t d = (uintptr_t)b->data;
      if (native ? (p < d || p - d > b->bytes) : b != buf) continue;
      size_t base = native ? (size_t)(p - d) : 0; /* buf's offset in the payload */
      found = true;
      fits = offset <= b->bytes - base && bytes <= b->bytes - base - offset;
      if (fits || !native) break;
    }
  }
  dv__spin_unlock(&st->lock);
  if (!found)
    return dv__error(DV_ERR_INVALID_ARGUMENT, "%p is not %s live device buffer of the host simulator", buf,
                     native ? "inside a" : "a");
  if (!fits)
    return dv__error(DV_ERR_INVALID_ARGUMENT,
                     "bytes [%zu, %zu) from %p lie outside the host simulator's device buffer", offset,
                     offset + bytes, buf);
  return DV_OK;
}

dv_status hb_mem_info(void *state, size_t *free_bytes, size_t *total_bytes) {
  hb_state *st = state;
  dv__spin_lock(&st->lock);
  *free_bytes = st->cap - st->used;
  *total_bytes = st->cap;
  dv__spin_unlock(&st->lock);
  return DV_OK;
}

/* dv_memory_trim: give fast mode's cached blocks back to the system. */
dv_status hb_cache_trim(void *state) {
  hb_state *st = state;
  dv__spin_lock(&st->lock);
  hb_block *chain = hb_cache_drain(st, 0, 0);
  dv__spin_unlock(&st->lock);
  hb_free_chain(chain);
  return DV_OK;
}

/* ---- blocks, for a kernel launch (device.h) ---- */

bool hb_block_hold(hb_block *b, unsigned char **data) {
  if (atomic_load(&b->freed)) return false;
  atomic_fetch_add(&b->refs, 1);
  *data = b->data;
  return true;
}

size_t hb_block_bytes(const hb_block *b) { return b->bytes; }

bool hb_block_miss(const hb_block *b, const void *addr, long long *off) {
  if (b->alias) return false;
  *off = (long long)((intptr_t)addr - (intptr_t)b->data);
  return *off < 0 || (unsigned long long)*off >= b->bytes;
}
unsigned char *hb_block_data(const hb_block *b) { return b->data; }

DV_NO_ASAN static void hb_guard_fill(unsigned char *p, size_t n) {
  volatile unsigned char *v = p;
  for (size_t i = 0; i < n; i++) v[i] = HB_GUARD_BYTE;
}

void hb_kernel_begin(hb_block *b) {
  if (b->alias) return;
  if (!b->st->guard) {
    hb_guards_arm(b);
    return;
  }
#if DV_HOST_ASAN
  if (atomic_fetch_add(&b->kernel_users, 1) != 0) return;
  ASAN_POISON_MEMORY_REGION(b->data - HB_FRONT, HB_FRONT);
  ASAN_POISON_MEMORY_REGION(b->data + b->bytes, HB_BACK);
#endif
}

bool hb_kernel_end(hb_block *b, bool check) {
  if (b->alias) return true;
  const bool guarded = b->st->guard;
  if (!guarded) check = true; /* fast mode's canaries: O(1), after every launch */
#if DV_HOST_ASAN
  if (guarded && atomic_fetch_sub(&b->kernel_users, 1) == 1) {
    ASAN_UNPOISON_MEMORY_REGION(b->data - HB_FRONT, HB_FRONT);
    ASAN_UNPOISON_MEMORY_REGION(b->data + b->bytes, HB_BACK);
  }
#endif
  if (!check || hb_guards_ok(b)) return true;
  /* Reported by the launch; put the guards back so the free does not report it again. */
  if (guarded) {
    hb_guard_fill(b->base, (size_t)(b->data - b->base));
    hb_guard_fill(b->data + b->bytes, hb_tail(b));
  } else {
    hb_guard_fill(b->data - HB_CANARY, HB_CANARY);
    hb_guard_fill(b->data + b->bytes, HB_CANARY);
  }
  return false;
}

hb_block *hb_alias_new(hb_state *st, void *ptr, size_t bytes) {
  hb_block *b = dv__calloc(1, sizeof *b);
  if (!b) return NULL;
  b->st = st;
  b->alias = true;
  b->bytes = bytes;
  b->data = ptr;
  atomic_store(&b->refs, 1);
  dv__spin_lock(&st->lock);
  hb_list_insert(&st->aliases, b); /* for hb_buffer_check */
  dv__spin_unlock(&st->lock);
  return b;
}

void hb_mem_open(hb_state *st, const dv_backend_config *cfg) {
  dv__spin_init(&st->lock);
  st->cap = cfg->host_memory;
  st->guard = cfg->host_guard != 0;
  st->ipc = cfg->host_ipc != 0;
  st->blocks.next = st->blocks.prev = &st->blocks;
  st->quarantine.next = st->quarantine.prev = &st->quarantine;
  st->aliases.next = st->aliases.prev = &st->aliases;
  st->cache_limit = st->cap < HB_CACHE_MAX_BYTES ? st->cap : HB_CACHE_MAX_BYTES;
  atomic_store(&st->fault[DV_FAULT_DEVICE_ALLOC], cfg->fault_device_alloc);
}

void hb_mem_close(hb_state *st) {
  hb_cache_trim(st); /* the cached blocks: the list holds live ones only now */
  dv__spin_lock(&st->lock);
  hb_block *unquarantined = hb_quarantine_trim(st, 0);
  /* Blocks still live here were leaked by the caller (or by devarray):
   * detached here, logged and freed after the lock. */
  hb_block *leaked = st->blocks.next != &st->blocks ? st->blocks.next : NULL;
  if (leaked) {
    st->blocks.prev->next = NULL;
    st->blocks.next = st->blocks.prev = &st->blocks;
  }
  /* Aliases still referenced (none should be) outlive the state: they
   * forget it, so that their destroy does not take its lock. */
  for (hb_block *a = st->aliases.next, *n; a != &st->aliases; a = n) {
    n = a->next;
    a->st = NULL;
    a->next = a->prev = a;
  }
  st->aliases.next = st->aliases.prev = &st->aliases;
  dv__spin_unlock(&st->lock);
  hb_quarantine_free(st, unquarantined);
  for (hb_block *b = leaked; b;) {
    hb_block *n = b->next;
    dv__log(DV_LOG_WARN, "host simulator: %zu-byte device block %p still allocated at close",
            b->bytes, (void *)b->data);
    hb_record_free(b);
    b = n;
  }
}

dv_status hb_check_memory(void *state) {
  hb_state *st = state;
  uint64_t bad = 0;
  const hb_block *where = NULL;
  dv__spin_lock(&st->lock);
  for (hb_block *b = st->blocks.next; b != &st->blocks; b = b->next)
    if (b->live && !hb_guards_ok(b)) bad++, where = b;
  if (st->guard)
    for (hb_block *b = st->quarantine.next; b != &st->quarantine; b = b->next)
      if (!hb_all(b->data, b->bytes, HB_POISON_BYTE)) bad++, where = b;
  dv__spin_unlock(&st->lock);
  uint64_t earlier = atomic_load(&st->corruptions);
  if (bad)
    return dv__error(DV_ERR_CORRUPTION, "%llu corrupted block(s), e.g. the one at %p",
                     (unsigned long long)bad, where ? (void *)where->data : NULL);
  if (earlier)
    return dv__error(DV_ERR_CORRUPTION, "%llu corruption(s) detected earlier (see the log)",
                     (unsigned long long)earlier);
  return DV_OK;
}
