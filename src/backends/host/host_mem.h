/* The host simulator's state record, and its device memory (host_mem.c) for
 * host.c, host_stream.c and host_copy.c (streams, copies, events).  Private
 * to those files and to the white-box tests (tests/test_simulator.c); the kernel
 * files see the state only through host_internal.h. */
#ifndef DV_HOST_MEM_H
#define DV_HOST_MEM_H
#include <pthread.h>

#include "host_internal.h"
#include "../../core/spin.h"

#define HB_GUARD_BYTE 0xAB
#define HB_POISON_BYTE 0xDF
/* Checked mode (host_guard on): freed blocks up to HB_QUARANTINE_MAX_BLOCK
 * stay poisoned in a quarantine of at most HB_QUARANTINE_MAX_BYTES. */
#define HB_QUARANTINE_MAX_BYTES ((size_t)64 << 20)
#define HB_QUARANTINE_MAX_BLOCK ((size_t)16 << 20)
/* Fast mode (host_guard off): freed blocks of HB_CACHE_MIN .. HB_CACHE_MAX_BLOCK
 * bytes (guards included) are kept, at most HB_CACHE_SLOTS of them and
 * HB_CACHE_MAX_BYTES (or the capacity, if less) in all, for the next
 * allocation of their size class (an eighth of a power of two), so a
 * repeated 1 MiB allocation does not fault in fresh pages each time.
 * Smaller blocks are malloc's (its bins reuse them already). */
#define HB_CACHE_MIN ((size_t)64 << 10)
#define HB_COLORS 16 /* payload offsets of cached blocks, 256 bytes apart (host_mem.c) */
#define HB_CACHE_MAX_BLOCK ((size_t)16 << 20)
#define HB_CACHE_MAX_BYTES ((size_t)64 << 20)
#define HB_CACHE_SLOTS 16
/* Fast mode's guard: this many bytes on each side of the payload, written
 * by the first kernel launch that uses the block and from then on checked
 * after launches (kernel_check on), when the block is freed and by
 * dv_context_check_memory (O(1) per block).  A block no kernel has used has
 * none: an allocation and free touch none of the block's memory (issue 23;
 * the deferred frees keep ten blocks in turn, whose end lines were cold). */
#define HB_CANARY 8
enum { HB_CANARY_NONE, HB_CANARY_WRITING, HB_CANARY_SET }; /* hb_block.canary */

typedef struct hb_cached {
  hb_block *b;  /* record and base kept together */
  size_t total; /* bytes at b->base (its size class) */
} hb_cached;

struct hb_state {
  hb_state_head head;   /* first: the kernel state (host_internal.h) */
  dv_spin lock; /* the memory fields below (short sections; checked mode's poison fill the longest) */
  size_t cap, used;
  bool guard; /* checked mode's memory: guards, fills, poison, quarantine */
  bool strided;
  bool ipc; /* option host_ipc: blocks in memfds (host_ipc.c) */
  int64_t delay_us;
  hb_block blocks;     /* sentinel of the block list: live blocks and cached ones */
  hb_block quarantine; /* sentinel; oldest first */
  hb_block aliases;    /* sentinel of the live aliases (mapped memory, wrapped memory) */
  size_t quarantine_bytes;
  hb_cached cache[HB_CACHE_SLOTS]; /* fast mode's freed blocks, oldest first */
  int ncache;
  size_t cache_bytes, cache_limit;
  uint64_t cache_hits; /* allocations served from the cache (under lock) */
  _Atomic unsigned color_next; /* the next new cacheable block's color */
  _Atomic uint64_t fault[4];
  _Atomic uint64_t corruptions;
  /* Device-wide synchronisation: operations queued on any stream. */
  pthread_mutex_t idle_m;
  pthread_cond_t idle_cv;
  _Atomic uint64_t outstanding; /* changed without idle_m; idle_m only to wait and wake */
  _Atomic int idle_waiters;     /* threads waiting for the whole device */
};

/* Whether the k-th fault of kind k fires now (counts it down). */
bool hb_fault_fires(hb_state *st, dv_fault_kind k);
/* The memory part of open / close (close frees the cache, the quarantine
 * and, with a warning, blocks still live). */
void hb_mem_open(hb_state *st, const dv_backend_config *cfg);
void hb_mem_close(hb_state *st);

dv_status hb_block_unref(hb_block *b);
/* Checked mode's guards, or fast mode's canaries where written, intact. */
bool hb_guards_ok(const hb_block *b);
/* Fast mode: write the block's canaries if no launch has yet (hk_services). */
void hb_guards_arm(hb_block *b);
hb_block *hb_alias_new(hb_state *st, void *ptr, size_t bytes);

dv_status hb_mem_alloc(void *state, size_t bytes, void **buf);
dv_status hb_mem_free(void *state, void *buf);
dv_status hb_mem_info(void *state, size_t *free_bytes, size_t *total_bytes);
/* Backend version 8: buf is a live block of st, or inside one's payload (looked up, not read). */
dv_status hb_buffer_check(void *state, void *buf, bool native, size_t offset, size_t bytes);
dv_status hb_mem_trim(void *state);
dv_status hb_check_memory(void *state);

#endif
