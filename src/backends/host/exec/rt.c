/*
 * The host simulator's kernels: the runtime they call (dv__rt, the table of
 * <devarray/kernel.h>'s dv__host_rt that every module's dv__rt points to),
 * on the executor of the calling OS thread (hk_cur; host_exec.c runs the
 * blocks).
 *
 * Shared memory.  Static shared arrays get their slot in a per-executor
 * arena on first use in a block, filled with 0xDF (read-before-write shows)
 * and followed by a 64-byte redzone holding a canary (host_exec.c checks
 * the canaries at every barrier and at the end of each block with
 * kernel_check or DV_BUILD_DEBUG, and a hit names the array and its line).
 * The dynamic area is one more slot; DV_DYN_SHARED_TAKE past the launch's
 * dynamic_shared is a fault, and so are static plus dynamic shared bytes
 * over 48 KiB (a GPU refuses such a kernel).  Shared redzones keep their
 * canary in every build, ASan's too: the fault is reported the same way
 * everywhere and the process goes on.
 *
 * Barriers.  A thread that waits at a barrier leaves its fiber; once every
 * thread has started, it switches straight to the next thread that can run
 * (one switch per thread and barrier, between two stacks at the same call
 * site, so the CPU predicts the returns); the last of a pass goes back to
 * the scheduler (host_exec.c), which decides whom a barrier releases.
 * Barrier sites are __COUNTER__ values, so two barriers on one line are
 * told apart.  A wave operation (shuffle, any, all, ballot) is a wave
 * barrier with an exchange: each lane leaves its value in a slot of its
 * own, waits, then reads its wave's slots (hk_rt_wave).
 *
 * dv_printf formats into a buffer of the launch, which host_kernel.c writes
 * to stdout in block and thread order when the launch has run.  A fault the
 * runtime finds (hk_fault) stops the calling thread's block: its fiber goes
 * back to the scheduler, which fails the launch with the message.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec_internal.h"

_Thread_local hk_exec *hk_cur; /* this OS thread's executor */

#ifndef NDEBUG
_Atomic int hk_test_fault;
static volatile uintptr_t hk_test_address = 16; /* unmapped (and not NULL: no UBSan report) */

void hk_test_fault_at(int where) {
  if (atomic_load_explicit(&hk_test_fault, memory_order_relaxed) != where) return;
  *(volatile int *)hk_test_address = 1;
}
#endif

void hk_coords(uint64_t lin, const uint32_t dim[3], unsigned c[3]) {
  c[0] = (unsigned)(lin % dim[0]);
  c[1] = (unsigned)((lin / dim[0]) % dim[1]);
  c[2] = (unsigned)(lin / ((uint64_t)dim[0] * dim[1]));
}

/* ---- the executor, for the tools (exec.h) ---- */

uint64_t hk_job_started(const hk_job *l) {
  uint64_t next = atomic_load(&l->next);
  return next < l->v.nblocks ? next : l->v.nblocks;
}

void hk_job_abort(hk_job *l) { atomic_store(&l->abort, 1); }

uint64_t hk_exec_block(const hk_exec *ex) { return ex->x.block; }
int hk_exec_thread(const hk_exec *ex) { return ex->x.cur; }

void hk_exec_stoppable(hk_exec *ex, uintptr_t lo, uintptr_t hi, bool stop) {
  ex->thread = pthread_self();
  ex->stop_lo = lo, ex->stop_hi = hi;
  atomic_store(&ex->stop, stop ? 1 : 0);
}

void hk_exec_unstoppable(hk_exec *ex) { atomic_store(&ex->stop, 0); }

void hk_exec_stop(hk_exec *ex) {
  atomic_store(&ex->stop, 1); /* before the signal: the handler reads it */
  pthread_kill(ex->thread, HK_STOP_SIG);
}

/* Linear index of the thread a block function's record names. */
static int hk_rec_index(const dv__hthread *t) {
  return t->tid[0] + t->bdim[0] * (t->tid[1] + t->bdim[1] * t->tid[2]);
}

void hk_exec_stopped_at(const hk_exec *ex, hk_xstop *p) {
  memset(p, 0, sizeof *p);
  p->block = ex->x.block;
  p->m = ex->x.m;
  p->n = ex->n;
  p->run = -1;
  p->pc = ex->stop_pc;
  p->ret = ex->stop_ret;
  /* A signal in an instrumented module (kernel_check=on) lands mostly in
   * the access hooks kernel.h defines: the thread was at its last access. */
  if (ex->stop_at == HK_STOP_SIGNAL && ex->x.m && ex->x.m->access && ex->x.acc_pc)
    p->pc = ex->x.acc_pc, p->ret = true;
  const hk_fib *fb = ex->rfib;
  const bool running = ex->stop_at == HK_STOP_SIGNAL || ex->stop_at == HK_STOP_RUNTIME;
  if (running && fb && fb->loop && ex->in_fis) {
    p->mode = 2;
  } else if (running && fb && fb->loop && ex->stop_at == HK_STOP_SIGNAL && ex->self &&
             *ex->self) {
    /* In the block function: its record may lag the thread it runs. */
    p->mode = 1;
    p->run = hk_rec_index(*ex->self);
    p->loop_from = fb->loop_done;
    if (p->run < p->loop_from) p->run = p->loop_from;
  } else if (running) {
    p->run = ex->x.cur;
  }
  if (!running) p->pc = NULL;
}

void hk_exec_thread_at(const hk_exec *ex, int j, int *state, int *line, int *op) {
  *line = 0, *op = -1;
  if (!ex->states_valid) { /* fast mode, no thread entered the runtime */
    *state = j < ex->next_thread ? HK_T_EXIT : HK_T_NEW;
    return;
  }
  const hk_thr *t = &ex->thr[j];
  *state = t->state;
  *line = t->line;
  *op = t->op;
}

int hk_where(const hk_exec *ex, char *buf, size_t cap) {
  unsigned b[3];
  hk_coords(ex->x.block, ex->x.l->v.grid, b);
  return snprintf(buf, cap, "kernel %s, block (%u,%u,%u)", ex->x.l->v.kern->name, b[0], b[1], b[2]);
}

void hk_thread_name(const hk_exec *ex, int i, char *buf, size_t cap) {
  unsigned t[3];
  hk_coords((uint64_t)i, ex->x.l->v.block, t);
  snprintf(buf, cap, "thread (%u,%u,%u)", t[0], t[1], t[2]);
}

/* The threads' records of a fission function's block, made when needed,
 * as hk_loop_sync makes them for a block function: the threads before the
 * running one ended, those after it are new. */
static void hk_states_make(hk_exec *ex) {
  if (ex->states_valid) return;
  for (int j = 0; j < ex->n; j++) {
    hk_thr *h = &ex->thr[j];
    h->state = j < ex->x.cur ? HK_T_EXIT : HK_T_NEW, h->fib = NULL, h->op = -1, h->wphase = 0;
    h->self = NULL;
  }
  hk_thr *h = &ex->thr[ex->x.cur];
  h->state = HK_T_RUN;
  h->fib = ex->rfib;
  h->self = ex->self ? *ex->self : NULL;
  ex->states_valid = true;
}

void hk_fault_stop(hk_exec *ex) {
  hk_states_make(ex);
  ex->thr[ex->x.cur].state = HK_T_FAULT;
  fb_yield(&ex->rfib->f, true); /* not `done`: its stack is abandoned */
  __builtin_trap();             /* never resumed */
}

void hk_exec_fault(hk_exec *ex, const char *msg) {
  if (msg != ex->fault) hk_fmt(ex->fault, sizeof ex->fault, "%s", msg);
  hk_fault_stop(ex);
}

/* Stop the calling simulated thread's block with a fault; never returns. */
__attribute__((noreturn, format(printf, 2, 3))) static void hk_fault(hk_exec *ex, const char *fmt,
                                                                     ...) {
  char what[480], where[160], who[64];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  hk_where(ex, where, sizeof where);
  hk_thread_name(ex, ex->x.cur, who, sizeof who);
  hk_fmt(ex->fault, sizeof ex->fault, "%s, %s: %s", where, who, what);
  hk_fault_stop(ex);
}

/* A canary, not ASan poison, even in ASan builds: a poisoned redzone would
 * make ASan abort the process at the bad write, where every other build
 * reports the array and block and goes on (and the kernel suite checks
 * that report in the ASan build too). */
void hk_fill_redzone(unsigned char *p) { memset(p, HK_CANARY, HK_REDZONE); }

/* A kernel that left its thread less stack than the runtime's frames need:
 * its stack overflow, made here as the fault of its guard page while the
 * kernel's window is still open (the signal handler names it; reporting it
 * takes no stack of this thread's, of which there may be none left). */
DV_NO_ASAN void hk_rt_overflow(const hk_exec *ex) {
  *(volatile unsigned char *)(ex->rfib->f.stack_lo - 1) = 0;
}

/* The runtime is library code: the signal handler takes a fault on an
 * executor for the kernel's only while in_kernel is set (host_exec.c), so
 * each entry point clears it and sets it again on the way back to the
 * kernel (after a barrier, on the fiber of whichever thread goes on: each
 * one left its kernel through here).  The fences keep the compiler from
 * moving the runtime's own accesses across the flag.  First, a kernel that
 * left its thread too little stack for the runtime is stopped with its
 * stack overflow (in the runtime's frames the guard page would be hit
 * outside the kernel's window: the process would end). */
static inline hk_exec *hk_rt_enter(void) {
  hk_exec *ex = hk_cur;
  if (ex->rfib->loop) hk_loop_sync(ex);
  if ((uintptr_t)__builtin_frame_address(0) < (uintptr_t)ex->rfib->f.stack_lo + ex->rt_room)
    hk_rt_overflow(ex);
  atomic_signal_fence(memory_order_seq_cst);
  ex->in_kernel = 0;
  atomic_signal_fence(memory_order_seq_cst);
  return ex;
}

void hk_loop_sync(hk_exec *ex) {
  hk_fib *fb = ex->rfib;
  dv__hthread *t = *ex->self; /* the block function's record */
  const int i = t->tid[0] + t->bdim[0] * (t->tid[1] + t->bdim[1] * t->tid[2]);
  if (ex->in_fis && !ex->states_valid) {
    /* A fission function: no thread ever waits (its barriers are the ends of
     * its loops), so only the running thread's index is kept; the records
     * are made if a thread faults (hk_fault_stop) or waits after all
     * (hk_wait, hk_wave_op: never from a fission function).  Making them
     * here cost three passes over the block's threads a block, a light
     * kernel's most expensive part (issue 23's reduction). */
    fb->loop_done = i;
    ex->x.cur = i;
    return;
  }
  if (!ex->states_valid) { /* the block's first runtime call: the threads before i ended */
    for (int j = 0; j < ex->n; j++) {
      hk_thr *h = &ex->thr[j];
      h->state = j < i ? HK_T_EXIT : HK_T_NEW, h->fib = NULL, h->op = -1, h->wphase = 0;
      h->self = NULL;
    }
    ex->states_valid = true;
  } else {
    for (int j = fb->loop_done; j < i; j++) ex->thr[j].state = HK_T_EXIT;
  }
  hk_thr *h = &ex->thr[i];
  h->state = HK_T_RUN;
  h->fib = fb;
  h->self = t;
  fb->loop_done = i;
  ex->x.cur = i;
}

/* A stop (hk_exec_stop; the watchdog, tools/watchdog.c): the calling thread's
 * block stops on its way back to the kernel, whose call (pc, a return
 * address) is where it was. */
__attribute__((noreturn, noinline)) void hk_rt_timeout(hk_exec *ex, const void *pc) {
  ex->in_kernel = 0;
  ex->stop_at = HK_STOP_RUNTIME;
  ex->stop_pc = pc;
  ex->stop_ret = true;
  fb_yield(&ex->rfib->f, true); /* not `done`: its stack is abandoned */
  __builtin_trap();             /* never resumed */
}

/* A tool's runtime entries (exec.h): the same window as the runtime's own
 * (hk_rt_enter, hk_rt_leave); the kernel's instruction pc is the caller's
 * to give.  No fast-mode block function calls them (an instrumented module
 * runs a call per thread). */
void hk_exec_lib_enter(hk_exec *ex) {
  if ((uintptr_t)__builtin_frame_address(0) < (uintptr_t)ex->rfib->f.stack_lo + ex->rt_room)
    hk_rt_overflow(ex);
  atomic_signal_fence(memory_order_seq_cst);
  ex->in_kernel = 0;
  atomic_signal_fence(memory_order_seq_cst);
}

void hk_exec_lib_leave(hk_exec *ex, const void *pc) {
  atomic_signal_fence(memory_order_seq_cst);
  ex->in_kernel = 1;
  atomic_signal_fence(memory_order_seq_cst);
  if (__builtin_expect(atomic_load_explicit(&ex->stop, memory_order_relaxed), 0))
    hk_rt_timeout(ex, pc);
}

bool hk_exec_records(const hk_exec *ex, uintptr_t p) {
  return p - (uintptr_t)ex->ht < ex->cap * sizeof *ex->ht ||
         p - (uintptr_t)ex->self < sizeof *ex->self; /* dv__self (thread-local) */
}

/* Always inlined: __builtin_return_address(0) is then the kernel's call of
 * the entry point.  The window opens before stop is read, so a watchdog
 * signal after the read finds it open. */
static inline __attribute__((always_inline)) void hk_rt_leave(hk_exec *ex) {
  atomic_signal_fence(memory_order_seq_cst);
  ex->in_kernel = 1;
  atomic_signal_fence(memory_order_seq_cst);
  if (__builtin_expect(atomic_load_explicit(&ex->stop, memory_order_relaxed), 0))
    hk_rt_timeout(ex, __builtin_return_address(0));
}

static void *hk_shared(hk_exec *ex, int site, size_t bytes, size_t align, size_t item,
                       const char *name, int line) {
  if (site < 0 || site >= (1 << 20)) hk_fault(ex, "shared array %s: bad site id %d", name, site);
  if (site >= ex->site_cap) {
    int ncap = ex->site_cap ? ex->site_cap : 64;
    while (ncap <= site) ncap *= 2;
    int *ns = dv__calloc((size_t)ncap, sizeof *ns);
    if (!ns) hk_fault(ex, "out of host memory for shared array %s", name);
    if (ex->site_cap) memcpy(ns, ex->site_slot, (size_t)ex->site_cap * sizeof *ns);
    dv__free(ex->site_slot);
    ex->site_slot = ns;
    ex->site_cap = ncap;
  }
  int s = ex->site_slot[site];
  if (s) {
    hk_slot *sl = &ex->x.slots[s - 1];
    if (sl->bytes != bytes)
      hk_fault(ex, "shared array %s (%s:%d) is declared with %zu bytes here but %zu bytes by "
               "another thread", name, ex->x.m->name, line, bytes, sl->bytes);
    return ex->x.arena + sl->off;
  }
  /* First use in this block: a fresh slot, poisoned, with a redzone. */
  if (ex->static_bytes + bytes < bytes || ex->static_bytes + bytes + ex->x.dyn_bytes > HK_SHARED_LIMIT)
    hk_fault(ex, "shared memory exceeds the device's %zu bytes per block: %zu bytes of static "
             "arrays up to %s (%s:%d) plus %zu bytes of dynamic shared memory", HK_SHARED_LIMIT,
             ex->static_bytes + bytes, name, ex->x.m->name, line, ex->x.dyn_bytes);
  if (align < 16) align = 16;
  if (align & (align - 1)) hk_fault(ex, "shared array %s: alignment %zu", name, align);
  size_t off = (ex->arena_used + align - 1) & ~(align - 1);
  if (ex->x.nslots >= HK_MAX_SLOTS || off + bytes + HK_REDZONE > HK_ARENA_BYTES)
    hk_fault(ex, "too many shared arrays (at most %d per block)", HK_MAX_SLOTS);
  memset(ex->x.arena + off, HK_POISON, bytes);
  hk_fill_redzone(ex->x.arena + off + bytes);
  hk_slot *sl = &ex->x.slots[ex->x.nslots++];
  sl->off = off;
  sl->bytes = bytes;
  sl->item = item ? item : 1;
  sl->name = name;
  sl->line = line;
  ex->site_slot[site] = ex->x.nslots;
  ex->arena_used = off + bytes + HK_REDZONE;
  ex->static_bytes += bytes;
  return ex->x.arena + off;
}

static void *hk_rt_shared(int site, size_t bytes, size_t align, const char *name, int line) {
  hk_exec *ex = hk_rt_enter();
  void *p = hk_shared(ex, site, bytes, align, 1, name, line);
  hk_rt_leave(ex);
  return p;
}

static void *hk_rt_shared_item(int site, size_t bytes, size_t align, size_t item,
                               const char *name, int line) {
  hk_exec *ex = hk_rt_enter();
  void *p = hk_shared(ex, site, bytes, align, item, name, line);
  hk_rt_leave(ex);
  return p;
}

/* (Reads only: the kernel's own code, as far as faults go.) */
static unsigned char *hk_rt_dyn(size_t *bytes) {
  hk_exec *ex = hk_cur;
  if (bytes) *bytes = ex->x.dyn_bytes;
  return ex->dyn;
}

static void *hk_dyn_take(hk_exec *ex, size_t *cursor, size_t bytes, size_t align, size_t item,
                         const char *name, int line) {
  if (!align || (align & (align - 1))) align = 1;
  size_t c = (*cursor + align - 1) & ~(align - 1);
  if (c < *cursor || c + bytes < c || c + bytes > ex->x.dyn_bytes)
    hk_fault(ex, "dynamic shared array %s (%s:%d) needs bytes [%zu, %zu) of dynamic shared "
             "memory, but the launch gave %zu bytes (dynamic_shared)", name, ex->x.m->name, line, c,
             c + bytes, ex->x.dyn_bytes);
  *cursor = c + bytes;
  /* The access checks name the take an access falls in (the first threads' takes). */
  if (item) {
    int i = 0;
    while (i < ex->x.ntakes && !(ex->x.takes[i].off == c && ex->x.takes[i].name == name)) i++;
    if (i == ex->x.ntakes && i < HK_MAX_TAKES)
      ex->x.takes[ex->x.ntakes++] = (hk_slot){c, bytes, item, name, line};
  }
  return ex->dyn + c;
}

static void *hk_rt_dyn_take(size_t *cursor, size_t bytes, size_t align, const char *name,
                            int line) {
  hk_exec *ex = hk_rt_enter();
  void *p = hk_dyn_take(ex, cursor, bytes, align, 0, name, line);
  hk_rt_leave(ex);
  return p;
}

static void *hk_rt_dyn_take_item(size_t *cursor, size_t bytes, size_t align, size_t item,
                                 const char *name, int line) {
  hk_exec *ex = hk_rt_enter();
  void *p = hk_dyn_take(ex, cursor, bytes, align, item ? item : 1, name, line);
  hk_rt_leave(ex);
  return p;
}

/* The running thread waits at a barrier.  Once every thread has its fiber,
 * it switches straight to the next thread of the scheduler's pass (one
 * switch per thread and barrier, not two, and both sides of the switch have
 * the same call stack); the last one of the pass goes back to the
 * scheduler, which decides whom a barrier releases. */
static void hk_wait(hk_exec *ex, int state, int site, int line) {
  hk_states_make(ex); /* never needed: a fission function has no waits */
  int i = ex->x.cur;
  hk_thr *thr = ex->thr, *t = &thr[i];
  hk_fib *lf = ex->rfib;
  if (lf->loop) { /* fast mode: this fiber stays with thread i; a new runner takes i + 1 on */
    (*ex->self)->stop = 1;
    lf->loop = false;
    lf->owner = i;
    ex->next_thread = i + 1;
  }
  t->state = state;
  t->site = site;
  t->line = line;
  if (state == HK_T_BAR) {
    if (ex->nbar++ == 0)
      ex->bar_site = site;
    else if (site != ex->bar_site)
      ex->bar_mixed = true;
  } else {
    ex->nwave++;
  }
  hk_fib *from = ex->rfib;
  if (ex->direct) {
    const int n = ex->n;
    for (int j = i + 1; j < n; j++) {
      if (thr[j].state != HK_T_RUN) continue;
      hk_fib *to = thr[j].fib;
      ex->x.cur = j;
      ex->rfib = to;
      *ex->self = thr[j].self;
      fb_switch(&from->f, &to->f);
      return;
    }
  }
  fb_yield(&from->f, false);
}

static void hk_rt_barrier(int site, int fence, int line) {
  /* The threads of a block share one OS thread: memory is coherent.  The
   * access checks' race detection orders what the fences of every thread
   * that arrives name (hk_schedule passes them on when it releases). */
  hk_exec *ex = hk_rt_enter();
  HK_TEST_FAULT(HK_TEST_FAULT_BARRIER);
  ex->bar_fence = ex->nbar ? ex->bar_fence & fence : fence;
  hk_wait(ex, HK_T_BAR, site, line);
  hk_rt_leave(ex);
}

static void hk_rt_wavebarrier(int site, int line) {
  hk_exec *ex = hk_rt_enter();
  hk_wait(ex, HK_T_WAVE, site, line);
  hk_rt_leave(ex);
}

static int hk_rt_wave_size(void) { return hk_cur->k->wave; }

const char *const hk_wave_names[HK_NWAVE_OPS] = {
    "dv_wave_shuffle_idx", "dv_wave_shuffle_up", "dv_wave_shuffle_down", "dv_wave_shuffle_xor",
    "dv_wave_any",         "dv_wave_all",        "dv_wave_ballot"};

/* A wave operation: the caller's lane leaves v in its slot and waits at the
 * wave barrier `site` (hk_schedule releases the wave when every lane of it
 * waits there, and reports it divergent otherwise); then it reads the
 * slots of its wave.  Two slots per thread, used in turn: a lane released
 * from operation k that reaches operation k + 1 before a slower lane has
 * read the values of k writes the other slot, and operation k + 2 cannot
 * begin before every lane has passed k + 1, so a value is never
 * overwritten before the whole wave read it.  A wave of one lane (the
 * block's partial last wave, or host_wave_size 1) needs no wait. */
static dv_u64 hk_wave_op(hk_exec *ex, int op, dv_u64 v, int arg, int site, int line) {
  hk_states_make(ex); /* never needed: a fission function has no wave operations */
  const int W = ex->k->wave, n = ex->n, i = ex->x.cur;
  if (op < 0 || op >= HK_NWAVE_OPS)
    hk_fault(ex, "unknown wave operation %d (%s:%d)", op, ex->x.m->name, line);
  const char *name = hk_wave_names[op];
  if ((op == dv__wave_up || op == dv__wave_down || op == dv__wave_xor) && (arg < 0 || arg >= W))
    hk_fault(ex, "%s (%s:%d): %s %d is outside [0, %d), the wave size (host_wave_size)", name,
             ex->x.m->name, line, op == dv__wave_xor ? "lane mask" : "delta", arg, W);
  if (op == dv__wave_ballot && W > 64)
    hk_fault(ex, "dv_wave_ballot (%s:%d): its 64-bit mask cannot hold a wave of %d threads "
             "(host_wave_size)", ex->x.m->name, line, W);
  const int w0 = i - i % W, cnt = (w0 + W < n ? w0 + W : n) - w0, lane = i - w0;
  hk_thr *t = &ex->thr[i];
  const unsigned p = t->wphase++ & 1u;
  t->wv[p] = v;
  if (cnt > 1) {
    t->op = op;
    hk_wait(ex, HK_T_WAVE, site, line);
    t = &ex->thr[i];
    t->op = -1;
  }
  const hk_thr *w = &ex->thr[w0];
  int src = lane;
  switch (op) {
    case dv__wave_idx: src = ((arg % W) + W) % W; break;
    case dv__wave_up: src = lane - arg; break;
    case dv__wave_down: src = lane + arg; break;
    case dv__wave_xor: src = lane ^ arg; break;
    case dv__wave_any:
      for (int j = 0; j < cnt; j++)
        if (w[j].wv[p]) return 1;
      return 0;
    case dv__wave_all:
      for (int j = 0; j < cnt; j++)
        if (!w[j].wv[p]) return 0;
      return 1;
    default: { /* ballot */
      dv_u64 bits = 0;
      for (int j = 0; j < cnt; j++)
        if (w[j].wv[p]) bits |= (dv_u64)1 << j;
      return bits;
    }
  }
  return src >= 0 && src < cnt ? w[src].wv[p] : v;
}

static dv_u64 hk_rt_wave(int op, dv_u64 v, int arg, int site, int line) {
  hk_exec *ex = hk_rt_enter();
  dv_u64 r = hk_wave_op(ex, op, v, arg, site, line);
  hk_rt_leave(ex);
  return r;
}

/* *p (of *cap items of `size` bytes) with room for `need` items, doubling
 * from `first`.  False: no memory (*p is unchanged). */
/* dv_printf: the text goes to the tools' print hooks (tools/ printf capture
 * keeps it for the launch's end).  The first formatting reads the kernel's
 * arguments (a bad %s pointer is the kernel's fault) and holds no lock: it
 * stays in the kernel's window. */
__attribute__((format(printf, 1, 2))) static void hk_rt_printf(const char *fmt, ...) {
  hk_exec *ex = hk_cur;
  hk_job *l = ex->x.l;
  char small[256];
  va_list ap, ap2;
  va_start(ap, fmt);
  va_copy(ap2, ap);
  int n = vsnprintf(small, sizeof small, fmt, ap);
  va_end(ap);
  ex = hk_rt_enter();
  const hk_state *k = l->k;
  for (int i = 0; i < k->ntools; i++)
    if (k->tools[i].print) {
      va_list ap3;
      va_copy(ap3, ap2);
      k->tools[i].print(k->tools[i].self, &l->tool[i], l, ex, small, sizeof small, n, fmt, ap3);
      va_end(ap3);
    }
  va_end(ap2);
  hk_rt_leave(ex);
}

static void hk_rt_fault(const char *what, int line) {
  hk_exec *ex = hk_rt_enter();
  if (line > 0) hk_fault(ex, "%s (%s:%d)", what, ex->x.m->name, line);
  hk_fault(ex, "%s", what);
}

const dv__host_rt hk_rt = {
    .version = 3, /* access and memop: tools/access.c's table for instrumented modules */
    .shared = hk_rt_shared,
    .dyn = hk_rt_dyn,
    .dyn_take = hk_rt_dyn_take,
    .barrier = hk_rt_barrier,
    .wavebarrier = hk_rt_wavebarrier,
    .wave_size = hk_rt_wave_size,
    .fault = hk_rt_fault,
    .wave = hk_rt_wave,
    .print = hk_rt_printf,
    .shared_item = hk_rt_shared_item,
    .dyn_take_item = hk_rt_dyn_take_item,
};

const dv__host_rt *hk_runtime(void) { return &hk_rt; }
