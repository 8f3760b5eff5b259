/*
 * The device's own records (device/): blocks, the device state, streams,
 * queued operations and events, for device/'s files and the white-box tests
 * (tests/backends/host/test_simulator.c, which corrupt memory on purpose).  Nothing
 * outside device/ includes it: the others see device.h.
 */
#ifndef DV_HOST_DEVICE_INTERNAL_H
#define DV_HOST_DEVICE_INTERNAL_H
#include <pthread.h>
#include <stdatomic.h>

#include "../../../core/spin.h"
#include "../../graphrec.h"
#include "device.h"

#define HB_FRONT 256 /* guard before the payload; keeps payloads 256-aligned */
#define HB_BACK 64   /* guard after the payload */

struct hb_block {
  _Atomic int refs;      /* owner (1 until freed) + queued operations */
  _Atomic bool freed;    /* mem_free was called */
  bool alias;            /* a device view of host memory (mapped): no guards, no capacity */
  size_t bytes;          /* payload bytes */
  size_t charged;        /* bytes counted against the capacity */
  size_t total;          /* bytes at base (guards included; the size class of a cacheable block) */
  unsigned char *base;   /* the read-write mapping's start (total bytes; guards included) */
  unsigned char *data;   /* payload */
  size_t color;          /* fast mode: bytes between the payload's slack and the end (mem.c) */
  void *map;             /* the mapping (PROT_NONE guard pages included), map_len bytes */
  size_t map_len;        /* == total: mapped without guard pages (mem.c's budget) */
  struct hb_block *prev, *next; /* block list (live or cached) / quarantine list */
  bool live;             /* handed out, not yet freed (under the state's lock) */
  hb_state *st;
  _Atomic int kernel_users; /* running kernels that use it (ASan: guards poisoned meanwhile) */
  /* Fast mode's canaries (mem.c): HB_CANARY_NONE until the first
   * launch that uses the block writes them; only written ones are checked. */
  _Atomic unsigned char canary;
  struct hb_shared *shared; /* option host_ipc: the memfd behind base (ipc.c), else NULL */
};

/* ---- ipc.c: device memory other processes can map ----
 * With option host_ipc each block lives in its own memfd mapping (base),
 * whose descriptor stays open until the block is destroyed; an IPC handle
 * names it as /proc/<pid>/fd/<fd> with its inode, so a handle whose block
 * is gone (or whose process exited) no longer opens. */
/* Map `total` bytes of a new memfd for b (sets b->shared); NULL on failure. */
unsigned char *hb_shared_alloc(hb_block *b, size_t total);
/* The block is freed: close its descriptor (handles to it are stale now). */
void hb_shared_revoke(hb_block *b);
/* Release a shared block's memory (b->shared set): revoke, munmap its memfd. */
void hb_shared_free(hb_block *b);

/* ---- mem.c: device memory ---- */
#define HB_GUARD_BYTE 0xAB
#define HB_POISON_BYTE 0xDF
/* Checked mode (host_guard on): freed blocks up to HB_QUARANTINE_MAX_BLOCK
 * stay poisoned in a quarantine of at most HB_QUARANTINE_MAX_BYTES. */
#define HB_QUARANTINE_MAX_BYTES ((size_t)64 << 20)
#define HB_QUARANTINE_MAX_BLOCK ((size_t)16 << 20)
/* Every block is a mapping of its own (mem.c), with HB_MAP_GUARD bytes of
 * PROT_NONE before and after it (within mem.c's budget of memory maps). */
#define HB_MAP_GUARD ((size_t)128 << 10)
/* Fast mode (host_guard off): freed blocks of up to HB_CACHE_MAX_BLOCK
 * bytes (guards included) are kept, at most HB_CACHE_SLOTS of them and
 * HB_CACHE_MAX_BYTES (or the capacity, if less) in all, for the next
 * allocation of their size class (whole pages; from HB_COLOR_MIN an eighth
 * of a power of two), so a repeated allocation makes no system call and
 * a repeated 1 MiB one does not fault in fresh pages each time. */
#define HB_COLOR_MIN ((size_t)64 << 10)
#define HB_COLORS 16 /* payload offsets of big cached blocks, 256 bytes apart (mem.c) */
#define HB_CACHE_MAX_BLOCK ((size_t)16 << 20)
#define HB_CACHE_MAX_BYTES ((size_t)64 << 20)
#define HB_CACHE_SLOTS 64
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
  void *user;   /* the caller's (hb_device_open; host.c: the other parts' states) */
  dv_spin lock; /* the memory fields below (short sections; checked mode's poison fill the longest) */
  size_t cap, used;
  bool guard; /* checked mode's memory: guards, fills, poison, quarantine */
  bool strided;
  bool ipc; /* option host_ipc: blocks in memfds (ipc.c) */
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

/* Checked mode's guards, or fast mode's canaries where written, intact. */
bool hb_guards_ok(const hb_block *b);
/* Fast mode: write the block's canaries if no launch has yet (hb_kernel_begin). */
void hb_guards_arm(hb_block *b);
hb_block *hb_alias_new(hb_state *st, void *ptr, size_t bytes);

dv_status hb_cache_trim(void *state);


/* ---- stream.c and copy.c ---- */
/* Tasks (launches) a stream holds before it has run them: one more waits for the
 * stream to run one, as a GPU's launch queue makes it wait.  Each queued
 * launch keeps ~2 KiB (its record, argument lists, buffer references); with
 * no bound, 11,000 asynchronous launches ahead of a slower worker kept
 * ~22 MiB, which malloc then kept too (issue 22 #15). */
#define HB_TASK_QUEUE 1024

typedef enum { OP_RECT, OP_STRIDED, OP_MEMSET, OP_CALLBACK, OP_RECORD, OP_WAIT, OP_TASK } hb_opkind;

struct dv_bevent {
  _Atomic int refs; /* owner + queued record/wait operations */
  pthread_mutex_t m;
  pthread_cond_t cv;
  uint64_t recorded, completed; /* generations */
  double t_ms;
  unsigned flags;
};

typedef struct hb_op {
  hb_opkind kind;
  struct hb_op *next;
  hb_block *b1, *b2; /* blocks the op holds a reference on */
  union {
    dv_rect rect;
    dv_strided strided;
    struct { dv_memref dst; int value; size_t bytes; } set;
    struct { dv_bcallback_fn fn; void *user; } cb;
    struct { dv_bevent *e; uint64_t gen; } ev;
    struct { const hb_task_ops *ops; void *task; } task; /* hb_enqueue_task */
  } u;
} hb_op;

struct dv_bstream {
  dv_rec *rec; /* first: the graph capture's recorder, NULL when none (../graphrec.h) */
  hb_state *st;
  pthread_mutex_t m;
  pthread_cond_t cv_work, cv_done;
  hb_op *head, *tail;
  /* Operations queued / completed, and the first error since the last
   * synchronize: changed only under m, read without it by the synchronize
   * of an idle stream (hb_stream_sync's fast path). */
  _Atomic uint64_t queued, done;
  bool stop;
  int tasks; /* OP_TASK queued and not finished (HB_TASK_QUEUE) */
  /* The stream's claim word: CLAIM_INLINE while a synchronous op runs on
   * its caller's thread, plus CLAIM_OP per queued operation not finished and
   * CLAIM_WAITER per thread waiting in hb_stream_sync.  An idle stream (0)
   * is claimed for an inline op with one compare-and-swap; the ops and
   * waiters are added under m, so the inline op's release takes m only
   * when one of them came meanwhile. */
  _Atomic uint32_t claim;
  int waiters;           /* threads in hb_stream_sync (an inline op wakes only them) */
  _Atomic dv_status error; /* first error since the last synchronize */
  char errmsg[768];      /* its detail message */
  pthread_t thread;
};

#define CLAIM_INLINE 1u
#define CLAIM_OP 2u
#define CLAIM_WAITER (1u << 24)

/* Claim an idle stream for an operation run on the calling thread (one
 * compare-and-swap); hb_claim_release gives it back. */
static inline bool hb_claim_inline(dv_bstream *s) {
  uint32_t idle = 0;
  return atomic_compare_exchange_strong(&s->claim, &idle, CLAIM_INLINE);
}
void hb_claim_release(dv_bstream *s); /* stream.c */

/* A memory reference's host address (device blocks are host memory). */
static inline unsigned char *hb_addr(dv_memref r) {
  return r.buf ? ((hb_block *)r.buf)->data + r.offset : (unsigned char *)r.ptr;
}

/* stream.c: queued operations */
size_t hb_op_size(hb_opkind kind); /* the bytes an operation of this kind needs */
hb_op *hb_op_new(hb_opkind kind);
void hb_enqueue(dv_bstream *s, hb_op *op);
/* True on a stream's worker thread (waiting for the device there would
 * deadlock). */
bool hb_on_worker(void);
/* Run a synchronous operation on the calling thread when the stream is idle
 * (claimed with one compare-and-swap); false when it is not. */
bool hb_try_inline(dv_bstream *s, hb_op *op);

#endif
