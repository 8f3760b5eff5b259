/* The host simulator's streams and queued operations (host_stream.c) and
 * copies (host_copy.c), for host.c and each other.  Private to those three
 * files: the kernel files reach streams only through hk_services. */
#ifndef DV_HOST_STREAM_H
#define DV_HOST_STREAM_H
#include "host_mem.h"

/* Launches a stream holds before it has run them: one more waits for the
 * stream to run one, as a GPU's launch queue makes it wait.  Each queued
 * launch keeps ~2 KiB (its record, argument lists, buffer references); with
 * no bound, 11,000 asynchronous launches ahead of a slower worker kept
 * ~22 MiB, which malloc then kept too (issue 22 #15). */
#define HB_KERNEL_QUEUE 1024

typedef enum { OP_RECT, OP_STRIDED, OP_MEMSET, OP_CALLBACK, OP_RECORD, OP_WAIT, OP_KERNEL } hb_opkind;

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
    hk_job *kernel; /* host_kernel.c */
  } u;
} hb_op;

struct dv_bstream {
  hb_state *st;
  pthread_mutex_t m;
  pthread_cond_t cv_work, cv_done;
  hb_op *head, *tail;
  /* Operations queued / completed, and the first error since the last
   * synchronize: changed only under m, read without it by the synchronize
   * of an idle stream (hb_stream_sync's fast path). */
  _Atomic uint64_t queued, done;
  bool stop;
  int kernels; /* OP_KERNEL queued and not finished (HB_KERNEL_QUEUE) */
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
void hb_claim_release(dv_bstream *s); /* host_stream.c */

/* A memory reference's host address (device blocks are host memory). */
static inline unsigned char *hb_addr(dv_memref r) {
  return r.buf ? ((hb_block *)r.buf)->data + r.offset : (unsigned char *)r.ptr;
}

/* host_stream.c: queued operations */
size_t hb_op_size(hb_opkind kind); /* the bytes an operation of this kind needs */
hb_op *hb_op_new(hb_opkind kind);
void hb_enqueue(dv_bstream *s, hb_op *op);
/* True on a stream's worker thread (waiting for the device there would
 * deadlock). */
bool hb_on_worker(void);
/* Run a synchronous operation on the calling thread when the stream is idle
 * (claimed with one compare-and-swap); false when it is not. */
bool hb_try_inline(dv_bstream *s, hb_op *op);

/* host_stream.c: the backend table's stream and event methods */
dv_status hb_stream_create(void *state, unsigned flags, dv_bstream **out);
dv_status hb_stream_destroy(void *state, dv_bstream *s);
dv_status hb_stream_sync(void *state, dv_bstream *s);
dv_status hb_stream_query(void *state, dv_bstream *s);
dv_status hb_stream_callback(void *state, dv_bstream *s, dv_bcallback_fn fn, void *user);
dv_status hb_event_create(void *state, unsigned flags, dv_bevent **out);
dv_status hb_event_destroy(void *state, dv_bevent *e);
dv_status hb_event_record(void *state, dv_bevent *e, dv_bstream *s);
dv_status hb_event_wait(void *state, dv_bstream *s, dv_bevent *e);
dv_status hb_event_query(void *state, dv_bevent *e);
dv_status hb_event_sync(void *state, dv_bevent *e);
dv_status hb_event_elapsed(void *state, dv_bevent *a, dv_bevent *b, float *ms);

/* host_copy.c: the backend table's copies */
dv_status hb_copy_rect(void *state, dv_bstream *s, const dv_rect *r);
dv_status hb_copy_strided(void *state, dv_bstream *s, const dv_strided *c);
dv_status hb_memset(void *state, dv_bstream *s, dv_memref dst, int value, size_t bytes);

#endif
