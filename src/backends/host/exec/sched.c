/*
 * The host simulator's kernels: executors, the OS threads that run blocks.
 *
 * Blocks of a launch are taken from a shared counter by the stream's worker
 * (host_kernel.c's hk_task_run) and by helper threads of a small per-context
 * pool (so blocks really run in parallel, as on a GPU, and can wait for
 * each other through atomics); each OS thread runs one block at a time on
 * its executor.  The threads of a block are fibers on that OS thread
 * (fiber.c), stacks of host_fiber_stack bytes mmap'ed with a PROT_NONE
 * guard page below each and reused across blocks.  Measured in the
 * research for this design: a fiber barrier is >= 21x cheaper than an OS
 * thread per GPU thread, and the scheduler sees every thread's state, so a
 * barrier that part of a block never reaches is an exact error, not a hang:
 * when no fiber can run, either every thread waits at the same barrier
 * (release them), or every thread of a wave waits at the same wave barrier
 * (release that wave), or the block is stopped and the launch fails with
 * DV_ERR_KERNEL_FAULT naming the kernel, block, threads and barriers.
 *
 * Fibers are made only as needed (HIP-CPU runs a block's threads plainly
 * until one reaches a barrier): a "runner" fiber runs thread 0, 1, 2, ...
 * one after the other; when the running thread stops at a barrier, that
 * fiber stays with it and a new runner goes on with the next thread.  A
 * kernel without barriers thus costs one fiber per block and no switch per
 * thread; threads run in the same order as with one fiber each from the
 * start.  Once every thread has started, the scheduler makes passes over
 * the threads that can run (a waiting one switches straight to the next:
 * host_rt.c's hk_wait) and applies the rules above.  With kernel_check (or
 * DV_BUILD_DEBUG) the shared arrays' redzone canaries are checked at every
 * barrier and at the end of each block.
 *
 * Faults.  SIGSEGV, SIGBUS, SIGFPE and SIGILL get a process-wide handler
 * (installed while some host context has launched kernels; it chains to the
 * previous handler for faults outside kernels).  A fault is the kernel's
 * only while the executor's in_kernel is set: for the call of the kernel
 * (host_call.c), minus the runtime it calls (host_rt.c, which clears it on
 * entry and sets it again on return).  A fault in the library's own code on
 * an executor (the runner, the scheduler, fiber switches, the runtime) is a
 * library bug and goes to the previous handler like any other: jumping out
 * of it could leave locks held and hang the process (a kernel that leaves
 * its thread too little stack for the runtime's frames is stopped at the
 * runtime's entry with its stack overflow).  Executor threads have an
 * alternate signal stack, so a fiber's stack overflow into its guard page
 * is handled too; the handler siglongjmps back to the block's scheduler and
 * the launch fails with DV_ERR_KERNEL_FAULT naming the signal, address,
 * block and thread (a fault in a guard page, or with the stack pointer
 * below the fiber's stack, is named a stack overflow, with the stack's
 * size and the host_fiber_stack option).  The process goes on; the fibers
 * of that block are abandoned (their stacks are reused).
 *
 * The watchdog (option kernel_timeout, tools/watchdog.c) stops a block the
 * same way: its SIGBUS, sent with pthread_kill (si_code SI_TKILL), jumps
 * out of the kernel's own code (siglongjmp value 2, no fault text), and
 * the runner and the scheduler check the executor's stop before they
 * resume a thread (hk_schedule returns 2); the block is then recorded
 * (the tools' stopped hook) and abandoned as after a fault.
 */
#include <dlfcn.h>
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include "exec_internal.h"

#if DV_HOST_ASAN
#include <sanitizer/asan_interface.h>
#endif

/* ========================================================================== */
/* Executors: an OS thread that runs blocks                                    */
/* ========================================================================== */

static void hk_unmap_stacks(hk_exec *ex) {
  if (!ex->x.stacks) return;
#if DV_HOST_ASAN
  ASAN_UNPOISON_MEMORY_REGION(ex->x.stacks, ex->x.map_bytes);
#endif
  munmap(ex->x.stacks, ex->x.map_bytes);
  ex->x.stacks = NULL;
  ex->nstacks = 0;
  ex->x.map_bytes = 0;
}

void hk_exec_free(hk_exec *ex) {
  if (!ex) return;
  for (size_t i = 0; i < ex->cap; i++) fb_release(&ex->fib[i].f);
  hk_unmap_stacks(ex);
  if (ex->alt_set) {
    stack_t cur;
    /* Put back what was there (or nothing). */
    if (sigaltstack(NULL, &cur) == 0 && cur.ss_sp == ex->alt) sigaltstack(&ex->alt_old, NULL);
  }
  if (ex->alt) munmap(ex->alt, HK_ALTSTACK);
  fb_sched_fini(&ex->sched);
  dv__free(ex->thr);
  dv__free(ex->ht);
  dv__free(ex->fib);
  dv__free(ex->x.arena);
  dv__free(ex->site_slot);
  dv__free(ex);
}

hk_exec *hk_exec_new(hk_state *k, bool bind_alt) {
  hk_exec *ex = dv__calloc(1, sizeof *ex);
  if (!ex) return NULL;
  ex->k = k;
  ex->rt_room = k->fiber_stack / 4 < HK_RT_HEADROOM ? k->fiber_stack / 4 : HK_RT_HEADROOM;
  fb_sched_init(&ex->sched);
  ex->x.arena = dv__malloc(HK_ARENA_BYTES);
  if (!ex->x.arena) {
    hk_exec_free(ex);
    return NULL;
  }
  /* An alternate signal stack, unless the thread has a big enough one
   * (one lent to other threads maps its own, installed only while lent:
   * lend.c). */
  stack_t cur;
  if (!bind_alt || (sigaltstack(NULL, &cur) == 0 &&
                    ((cur.ss_flags & SS_DISABLE) || cur.ss_size < HK_ALTSTACK))) {
    void *p = mmap(NULL, HK_ALTSTACK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p != MAP_FAILED) {
      ex->alt = p;
      stack_t ss = {.ss_sp = p, .ss_flags = 0, .ss_size = HK_ALTSTACK};
      if (bind_alt && sigaltstack(&ss, &ex->alt_old) == 0) ex->alt_set = true;
    }
  }
  return ex;
}

/* Room for n simulated threads, fibers and fiber stacks. */
static bool hk_exec_reserve(hk_exec *ex, int n) {
  int nf = n;
  if ((size_t)n > ex->cap) {
    hk_thr *t = dv__calloc((size_t)n, sizeof *t);
    dv__hthread *h = dv__calloc((size_t)n, sizeof *h);
    hk_fib *f = dv__calloc((size_t)n, sizeof *f);
    if (!t || !h || !f) {
      dv__free(t);
      dv__free(h);
      dv__free(f);
      return false;
    }
    if (ex->cap) memcpy(f, ex->fib, ex->cap * sizeof *f); /* keeps ThreadSanitizer's fibers */
    dv__free(ex->thr);
    dv__free(ex->ht);
    dv__free(ex->fib);
    ex->thr = t;
    ex->ht = h;
    ex->fib = f;
    ex->cap = (size_t)n;
  }
  size_t page = ex->k->page;
  size_t stride = ex->k->fiber_stack + page;
  if ((size_t)nf > ex->nstacks || stride != ex->stride) {
    hk_unmap_stacks(ex);
    size_t bytes = stride * (size_t)nf;
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
    if (p == MAP_FAILED) return false;
    ex->x.stacks = p;
    ex->x.map_bytes = bytes;
    ex->stride = stride;
    ex->nstacks = (size_t)nf;
    for (int i = 0; i < nf; i++) mprotect(ex->x.stacks + (size_t)i * stride, page, PROT_NONE);
  }
  return true;
}

/* ---- the runner: threads one after the other -------------------------------- */

/* The thread record a block function or fission function starts from:
 * block ex->x.block of launch l, thread `first` (linear index). */
static void hk_block_record(const hk_exec *ex, const hk_job *l, int first, dv__hthread *t) {
  unsigned bc[3], tc[3];
  hk_coords(ex->x.block, l->v.grid, bc);
  hk_coords((uint64_t)first, l->v.block, tc);
  memset(t, 0, sizeof *t);
  for (int d = 0; d < 3; d++) {
    t->tid[d] = (int)tc[d];
    t->bid[d] = (int)bc[d];
    t->bdim[d] = (int)l->v.block[d];
    t->gdim[d] = (int)l->v.grid[d];
  }
  t->block = (void *)ex;
}

/* The next block for this executor: the rest of the blocks it took, else
 * l->chunk more from the launch's counter.  Taking blocks one at a time
 * made every block of a light kernel (saxpy: 256 threads, ~3 KiB of memory
 * traffic) an atomic on a line the executors pass between them, which cost
 * more than the block: two cores ran saxpy slower than one. */
static bool hk_claim(hk_exec *ex, hk_job *l, uint64_t *b) {
  if (ex->cnext < ex->cend) {
    *b = ex->cnext++;
    return true;
  }
  uint64_t first = atomic_fetch_add(&l->next, l->chunk);
  if (first >= l->v.nblocks) return false;
  ex->cnext = first + 1;
  ex->cend = l->v.nblocks - first > l->chunk ? first + l->chunk : l->v.nblocks;
  *b = first;
  return true;
}

/* Fast mode: the block function runs the threads from ex->next_thread on,
 * in order, in one call (kernel.h), on its copy of the record made here;
 * the runtime learns which thread calls it from that copy (hk_loop_sync)
 * and, when one waits at a barrier, leaves this fiber to it and stops the
 * loop after it (host_rt.c's hk_wait): a new runner goes on with the next. */
static void hk_runner_loop(hk_fib *fb, hk_exec *ex, hk_job *l) {
  int first = ex->next_thread;
  for (;;) {
    dv__hthread t;
    hk_block_record(ex, l, first, &t);
    fb->loop = true;
    fb->loop_done = first;
    fb->owner = -1;
    ex->x.cur = first;
    *ex->self = &t;
    hk_call(l, l->blk, &ex->in_kernel);
    if (!fb->loop) { /* its thread waited at a barrier, then ran to its end */
      ex->thr[fb->owner].state = HK_T_EXIT;
      return;
    }
    /* No thread took it: every thread from first on ran to its end. */
    fb->loop = false;
    ex->next_thread = ex->n;
    if (ex->states_valid) {
      for (int j = fb->loop_done; j < ex->n; j++) ex->thr[j].state = HK_T_EXIT;
      return;
    }
    /* No thread of the block entered the runtime, so it used nothing of the
     * executor's (shared memory, thread records): the next block of the
     * launch runs here at once, without a way back through the scheduler,
     * a new fiber and the block's setup (a few hundred nanoseconds a block,
     * which a light kernel's blocks of 256 threads felt). */
    if (first != 0 || atomic_load(&l->abort)) return;
    uint64_t b;
    if (!hk_claim(ex, l, &b)) return;
    ex->x.block = b;
    ex->next_thread = 0;
  }
}

/* Fast mode with region fission (host_fission.c): the kernel's fission
 * function runs the whole block in one call, on this runner (no barrier
 * ever waits: the regions between barriers are loops over the threads),
 * with the record of thread 0 as the block function gets it; the runtime
 * learns the running thread from it as from a block function's.  False:
 * it declined (its threads' state does not fit its stack), and nothing ran. */
static bool hk_runner_fis(hk_fib *fb, hk_exec *ex, hk_job *l) {
  dv__hthread t;
  hk_block_record(ex, l, 0, &t);
  fb->loop = true;
  fb->loop_done = 0;
  fb->owner = -1;
  ex->x.cur = 0;
  *ex->self = &t;
  ex->in_fis = true;
  hk_call(l, l->v.kern->fis, &ex->in_kernel);
  ex->in_fis = false;
  fb->loop = false;
  if (t.stop == 3) { /* some threads returned before a barrier the others reached */
    struct { int site, line, n; unsigned char done[HK_MAX_THREADS]; } *div;
    void *sym = dlsym(l->v.kern->m->dl, "dv__fis_div"); /* this OS thread's copy */
    memcpy(&div, &sym, sizeof div);
    if (!div || div->n != ex->n) { /* never: the module defines it with the function */
      hk_fmt(ex->fault, sizeof ex->fault, "kernel %s: divergent barrier", l->v.kern->name);
      ex->states_valid = true;
      for (int j = 0; j < ex->n; j++) ex->thr[j].state = j ? HK_T_EXIT : HK_T_FAULT;
      ex->x.cur = 0, ex->next_thread = ex->n;
      return true;
    }
    ex->nbar = 0;
    for (int j = 0; j < ex->n; j++) {
      hk_thr *h = &ex->thr[j];
      h->state = div->done[j] ? HK_T_EXIT : HK_T_BAR, h->fib = NULL, h->op = -1;
      h->site = div->site, h->line = div->line;
      ex->nbar += !div->done[j];
    }
    ex->bar_mixed = false;
    ex->states_valid = true; /* the scheduler reports the divergent barrier */
    ex->next_thread = ex->n;
    return true;
  }
  if (t.stop) return false;
  if (ex->states_valid)
    for (int j = 0; j < ex->n; j++) ex->thr[j].state = HK_T_EXIT;
  ex->next_thread = ex->n;
  return true;
}

static void hk_runner_main(void *arg) {
  hk_fib *fb = arg;
  hk_exec *ex = hk_cur;
  hk_job *l = ex->x.l;
  /* Not with kernel_check (or DV_BUILD_DEBUG): it checks the shared arrays'
   * redzones at every barrier, which a fission function does not stop at. */
  if (l->blk && l->v.kern->fis && !ex->x.m->check && !fb->taken && ex->next_thread == 0 &&
      hk_runner_fis(fb, ex, l)) {
  } else if (l->blk && !fb->taken && ex->next_thread < ex->n) {
    hk_runner_loop(fb, ex, l);
  }
  while (!fb->taken && ex->next_thread < ex->n) {
    if (atomic_load_explicit(&ex->stop, memory_order_relaxed)) { /* the watchdog (tools/watchdog.c) */
      ex->stop_at = HK_STOP_SCHED;
      fb_yield(&fb->f, true); /* not `done`: abandoned */
    }
    int i = ex->next_thread++;
    hk_thr *t = &ex->thr[i];
    t->fib = fb;
    t->state = HK_T_RUN;
    ex->x.cur = i;
    *ex->self = &ex->ht[i];
    hk_call(l, l->v.kern->fn, &ex->in_kernel);
    t->state = HK_T_EXIT;
  }
  HK_TEST_FAULT(HK_TEST_FAULT_RUNNER);
  fb->done = true; /* returning ends the fiber (fiber.c's fb_entry) */
}

/* ---- the block scheduler -------------------------------------------------- */

/* Index of the first shared slot whose redzone was written, or -1. */
static int hk_bad_redzone(const hk_exec *ex) {
  for (int s = 0; s < ex->x.nslots; s++) {
    const unsigned char *rz = ex->x.arena + ex->x.slots[s].off + ex->x.slots[s].bytes;
    for (int i = 0; i < HK_REDZONE; i++)
      if (rz[i] != HK_CANARY) return s;
  }
  return -1;
}

static void hk_redzone_fault(hk_exec *ex, int s, const char *when) {
  char where[160];
  hk_where(ex, where, sizeof where);
  const hk_slot *sl = &ex->x.slots[s];
  if (sl->line > 0)
    hk_fmt(ex->fault, sizeof ex->fault,
             "%s: shared array %s (%s:%d, %zu bytes) was written past its end (its redzone was "
             "overwritten; found %s)", where, sl->name, ex->x.m->name, sl->line, sl->bytes, when);
  else
    hk_fmt(ex->fault, sizeof ex->fault,
             "%s: %s (%zu bytes) was written past its end (its redzone was overwritten; found %s)",
             where, sl->name, sl->bytes, when);
}

typedef struct hk_group {
  int state, site, line, count, first, op;
} hk_group;

/* Describe why threads [lo, hi) cannot go on. */
static void hk_divergence(hk_exec *ex, int lo, int hi, const char *what) {
  hk_group g[4];
  int ng = 0, more = 0, nexit = 0, first_exit = -1;
  for (int i = lo; i < hi; i++) {
    const hk_thr *t = &ex->thr[i];
    if (t->state == HK_T_EXIT) {
      if (!nexit++) first_exit = i;
      continue;
    }
    int j = 0;
    while (j < ng && !(g[j].state == t->state && g[j].site == t->site)) j++;
    if (j == ng) {
      if (ng == 4) {
        more++;
        continue;
      }
      g[ng++] = (hk_group){t->state, t->site, t->line, 0, i, t->state == HK_T_WAVE ? t->op : -1};
    }
    g[j].count++;
  }
  char buf[700];
  size_t n = (size_t)hk_where(ex, buf, sizeof buf);
#define HK_ADD(...)                                                              \
  do {                                                                           \
    if (n < sizeof buf) {                                                        \
      int w_ = snprintf(buf + n, sizeof buf - n, __VA_ARGS__);                   \
      if (w_ > 0) n += (size_t)w_;                                               \
    }                                                                            \
  } while (0)
  HK_ADD(": %s: ", what);
  for (int j = 0; j < ng; j++) {
    char who[64];
    hk_thread_name(ex, g[j].first, who, sizeof who);
    bool again = false; /* another barrier on the same line */
    for (int q = 0; q < j; q++)
      if (g[q].line == g[j].line) again = true;
    char kind[48];
    if (g[j].state == HK_T_WAVE && g[j].op >= 0 && g[j].op < HK_NWAVE_OPS)
      hk_fmt(kind, sizeof kind, "wave operation %s", hk_wave_names[g[j].op]);
    else
      hk_fmt(kind, sizeof kind, "%sbarrier", g[j].state == HK_T_WAVE ? "wave " : "");
    HK_ADD("%s%d thread%s wait%s at %s%s at %s:%d (first: %s)", j ? ", " : "", g[j].count,
           g[j].count == 1 ? "" : "s", g[j].count == 1 ? "s" : "", again ? "another " : "the ",
           kind, ex->x.m->name, g[j].line, who);
  }
  if (more) HK_ADD(", %d more thread%s wait elsewhere", more, more == 1 ? "" : "s");
  if (nexit) {
    char who[64];
    hk_thread_name(ex, first_exit, who, sizeof who);
    HK_ADD(", %d thread%s exited (first: %s)", nexit, nexit == 1 ? "" : "s", who);
  }
#undef HK_ADD
  hk_fmt(ex->fault, sizeof ex->fault, "%s", buf);
}

/* The watchdog stopped the launch (tools/watchdog.c): seen here between threads. */
#define HK_STOPPED(ex)                                                           \
  (atomic_load_explicit(&(ex)->stop, memory_order_relaxed) ? ((ex)->stop_at = HK_STOP_SCHED, 1) \
                                                               : 0)

/* Run the fibers of the block until all have returned.  0: done; 1: fault
 * (ex->fault says what); 2: the watchdog stopped it (ex->stop_at says where). */
static int hk_schedule(hk_exec *ex) {
  const int n = ex->n, W = ex->k->wave;
  const bool check = ex->x.m->check;
  /* First every thread runs, in order, on runners made as they are needed. */
  while (ex->next_thread < n) {
    if (HK_STOPPED(ex)) return 2;
    hk_fib *fb = &ex->fib[ex->nfib];
    fb->taken = fb->done = false;
    if (fb_prepare(&fb->f, &ex->sched, ex->x.stacks + (size_t)ex->nfib * ex->stride + ex->k->page,
                   ex->k->fiber_stack, hk_runner_main, fb) != 0) {
      int w = hk_where(ex, ex->fault, sizeof ex->fault);
      if (w > 0 && (size_t)w < sizeof ex->fault)
        hk_fmt(ex->fault + w, sizeof ex->fault - (size_t)w, ": cannot set up a fiber");
      fb->done = true;
      return 1;
    }
    ex->nfib++;
    ex->rfib = fb;
    fb->loop = false;
    fb_resume(&ex->sched, &fb->f);
    if (ex->stop_at) return 2;
    if (ex->states_valid && ex->thr[ex->x.cur].state == HK_T_FAULT) return 1;
    if (!fb->done) fb->taken = true; /* its thread waits at a barrier */
  }
  if (!ex->states_valid) { /* fast mode: no thread entered the runtime; all ran to the end */
    int bad = check ? hk_bad_redzone(ex) : -1;
    if (bad >= 0) {
      hk_redzone_fault(ex, bad, "at the end of the block");
      return 1;
    }
    return 0;
  }
  /* Then passes over the threads that can run, in order: the scheduler
   * resumes the first, each one that waits switches to the next (host_rt.c's hk_wait),
   * and control comes back here when one returns, faults, or waits with
   * none after it. */
  ex->direct = true;
  for (;;) {
    for (int i = 0; i < n;) {
      hk_thr *t = &ex->thr[i];
      if (t->state != HK_T_RUN) {
        i++;
        continue;
      }
      if (HK_STOPPED(ex)) return 2;
      ex->x.cur = i;
      ex->rfib = t->fib;
      *ex->self = t->self;
      fb_resume(&ex->sched, &ex->rfib->f);
      if (ex->stop_at) return 2;
      if (ex->thr[ex->x.cur].state == HK_T_FAULT) return 1;
      i = ex->x.cur + 1;
    }
    /* A pass leaves no thread runnable: each one returned or waits. */
    const int nbar = ex->nbar, nwave = ex->nwave;
    if (!nbar && !nwave) {
      int bad = check ? hk_bad_redzone(ex) : -1;
      if (bad >= 0) {
        hk_redzone_fault(ex, bad, "at the end of the block");
        return 1;
      }
      if (ex->x.l->tevents && hk_tools_pending(ex, ex->x.l, ex->fault, sizeof ex->fault))
        return 1; /* initcheck */
      return 0;
    }
    /* Whole waves waiting at one wave barrier go on. */
    bool released = false;
    for (int w0 = 0; nwave && w0 < n; w0 += W) {
      int w1 = w0 + W < n ? w0 + W : n;
      bool all = true;
      for (int i = w0; i < w1 && all; i++)
        all = ex->thr[i].state == HK_T_WAVE && ex->thr[i].site == ex->thr[w0].site;
      if (!all) continue;
      for (int i = w0; i < w1; i++) ex->thr[i].state = HK_T_RUN;
      ex->nwave -= w1 - w0;
      released = true;
      if (ex->x.l->tevents) hk_tools_wave(ex, ex->x.l, w0 / W); /* the access checks */
    }
    if (released) continue;
    /* The whole block waiting at one barrier goes on. */
    if (nbar == n) {
      if (!ex->bar_mixed) {
        int bad = check ? hk_bad_redzone(ex) : -1;
        if (bad >= 0) {
          char when[160];
          hk_fmt(when, sizeof when, "at the barrier at %s:%d", ex->x.m->name, ex->thr[0].line);
          hk_redzone_fault(ex, bad, when);
          return 1;
        }
        if (ex->x.l->tevents && hk_tools_pending(ex, ex->x.l, ex->fault, sizeof ex->fault))
          return 1; /* initcheck */
        for (int i = 0; i < n; i++) ex->thr[i].state = HK_T_RUN;
        ex->nbar = 0;
        if (ex->x.l->tevents) hk_tools_barrier(ex, ex->x.l, ex->bar_fence); /* the access checks */
        continue;
      }
    }
    /* Stuck: a divergent barrier. */
    if (nwave) {
      for (int w0 = 0; w0 < n; w0 += W) {
        int w1 = w0 + W < n ? w0 + W : n;
        bool has = false, op = false;
        for (int i = w0; i < w1; i++) {
          has |= ex->thr[i].state == HK_T_WAVE;
          op |= ex->thr[i].state == HK_T_WAVE && ex->thr[i].op >= 0;
        }
        if (!has) continue;
        char what[96];
        hk_fmt(what, sizeof what, "divergent wave %s in wave %d (threads %d-%d)",
               op ? "operation" : "barrier", w0 / W, w0, w1 - 1);
        hk_divergence(ex, w0, w1, what);
        return 1;
      }
    }
    hk_divergence(ex, 0, n, "divergent barrier");
    return 1;
  }
}

static void hk_signal_text(hk_exec *ex) {
  char where[160], who[64], what[300];
  hk_where(ex, where, sizeof where);
  const dv__hthread *lt = ex->rfib && ex->rfib->loop && ex->self ? *ex->self : NULL;
  if (lt) /* fast mode, in the block function: its record may lag the thread it runs */
    hk_fmt(who, sizeof who, "thread (%d,%d,%d) or one after it (host_mode=checked names it)",
           lt->tid[0], lt->tid[1], lt->tid[2]);
  else
    hk_thread_name(ex, ex->x.cur, who, sizeof who);
  /* A stack overflow: the address is in a guard page (kernels are compiled
   * with -fstack-clash-protection, so a big frame touches the guard below
   * its stack before anything past it), or the stack pointer itself is
   * below the running fiber's stack (a compiler without that option: the
   * frame jumped the guard). */
  uintptr_t a = (uintptr_t)ex->sig_addr, s0 = (uintptr_t)ex->x.stacks;
  bool guard =
      ex->x.stacks && a >= s0 && a < s0 + ex->x.map_bytes && (a - s0) % ex->stride < ex->k->page;
  uintptr_t sp = (uintptr_t)ex->sig_sp;
  const fb_fiber *rf = ex->rfib ? &ex->rfib->f : NULL;
  if (sp && rf && rf->stack_lo && sp < (uintptr_t)rf->stack_lo &&
      (uintptr_t)rf->stack_lo - sp < ((uintptr_t)1 << 40))
    guard = true;
  switch (ex->sig) {
    case SIGSEGV:
    case SIGBUS:
      if (guard) {
        hk_fmt(what, sizeof what, "stack overflow: the thread needs more than its %zu bytes of "
                 "stack (option host_fiber_stack; local arrays live there)", ex->k->fiber_stack);
        break;
      }
      if (ex->sig == SIGBUS) {
        hk_fmt(what, sizeof what, "SIGBUS (bus error) at address %p", ex->sig_addr);
        break;
      }
      hk_fmt(what, sizeof what, "SIGSEGV (invalid memory access) at address %p", ex->sig_addr);
      hk_fault_array(ex, what + strlen(what), sizeof what - strlen(what));
      break;
    case SIGFPE:
      hk_fmt(what, sizeof what, "SIGFPE (%s)",
               ex->sig_code == FPE_INTDIV ? "integer division by zero"
               : ex->sig_code == FPE_INTOVF ? "integer overflow" : "arithmetic exception");
      break;
    case SIGILL:
      hk_fmt(what, sizeof what, "SIGILL (illegal instruction or trap) at %p", ex->sig_addr);
      break;
    default:
      hk_fmt(what, sizeof what, "signal %d", ex->sig);
  }
  hk_fmt(ex->fault, sizeof ex->fault, "%s, %s: %s", where, who, what);
}

/* Where the scheduler comes back to when a signal stops the block. */
static int hk_schedule_guarded(hk_exec *ex) {
  /* Without the signal mask (saving it is a system call per block): the
   * mask hk_run_blocks saved once per launch comes back here (the handler
   * ran with its signal, and whatever its sa_mask said, blocked). */
  /* 1: a fault's signal; 2: the watchdog's (tools/watchdog.c). */
#if DV_FIBER_TSAN
  /* ThreadSanitizer lost the jump buffer saved without the mask when a
   * stack overflow's handler jumped back ("can't find longjmp buf"). */
  switch (sigsetjmp(ex->jb, 1)) {
#else
  switch (sigsetjmp(ex->jb, 0)) {
#endif
    case 0:
      return hk_schedule(ex);
    case 2:
      fb_escaped(&ex->sched);
      ex->in_kernel = 0;
      pthread_sigmask(SIG_SETMASK, &ex->sigmask, NULL);
      return 2;
    default:
      fb_escaped(&ex->sched);
      ex->in_kernel = 0;
      pthread_sigmask(SIG_SETMASK, &ex->sigmask, NULL);
      hk_signal_text(ex);
      return 1;
  }
}

static void hk_launch_fail(hk_job *l, uint64_t block, const char *msg) {
  pthread_mutex_lock(&l->em);
  if (!l->err || block < l->err_block) {
    l->err = DV_ERR_KERNEL_FAULT;
    l->err_block = block;
    hk_fmt(l->msg, sizeof l->msg, "%s", msg);
  }
  pthread_mutex_unlock(&l->em);
  atomic_store(&l->abort, 1);
}

static void hk_run_block(hk_exec *ex, hk_job *l, uint64_t b) {
  const int n = l->v.nthreads;
  if (!hk_exec_reserve(ex, n)) {
    pthread_mutex_lock(&l->em);
    if (!l->err) {
      l->err = DV_ERR_HOST_OUT_OF_MEMORY;
      hk_fmt(l->msg, sizeof l->msg, "kernel %s: no memory for %d fiber stacks of %zu bytes",
               l->v.kern->name, n, ex->k->fiber_stack);
    }
    pthread_mutex_unlock(&l->em);
    atomic_store(&l->abort, 1);
    return;
  }
  ex->x.l = l;
  ex->x.m = l->v.kern->m;
  ex->x.block = b;
  ex->n = n;
  ex->stop_at = HK_STOP_NONE;
  ex->in_fis = false;
  /* Under the watchdog: the line a thread last waited at is reported. */
  for (int i = 0; (l->tflags & HK_WANT_LINES) && i < n; i++) ex->thr[i].line = 0;
  ex->nfib = 0;
  ex->next_thread = 0;
  ex->direct = false;
  unsigned bc[3];
  hk_coords(b, l->v.grid, bc);
  for (int i = 0; !l->blk && i < n; i++) {
    dv__hthread *h = &ex->ht[i];
    unsigned tc[3];
    hk_coords((uint64_t)i, l->v.block, tc);
    for (int d = 0; d < 3; d++) {
      h->tid[d] = (int)tc[d];
      h->bid[d] = (int)bc[d];
      h->bdim[d] = (int)l->v.block[d];
      h->gdim[d] = (int)l->v.grid[d];
    }
    h->block = ex;
  }
  /* Shared memory: the dynamic area first, then static arrays as they come. */
  if (ex->site_cap) memset(ex->site_slot, 0, (size_t)ex->site_cap * sizeof *ex->site_slot);
  ex->x.nslots = 0;
  ex->static_bytes = 0;
  ex->dyn = ex->x.arena;
  ex->x.dyn_bytes = l->dyn;
  if (!ex->k->fast) memset(ex->dyn, HK_POISON, l->dyn); /* checked mode: poison */
  hk_fill_redzone(ex->x.arena + l->dyn);
  ex->x.slots[0] = (hk_slot){0, l->dyn, 1, "dynamic shared memory", 0};
  ex->x.nslots = 1;
  ex->arena_used = l->dyn + HK_REDZONE;
  ex->self = ex->x.m->self_slot();
  ex->fault[0] = 0;
  /* Fast mode: the threads' records are set when one enters the runtime. */
  ex->states_valid = !l->blk;
  for (int i = 0; !l->blk && i < n; i++) {
    hk_thr *t = &ex->thr[i];
    t->state = HK_T_NEW, t->fib = NULL, t->op = -1, t->wphase = 0, t->self = &ex->ht[i];
  }
  ex->nbar = ex->nwave = 0;
  ex->bar_mixed = false;
  ex->x.cur = 0;
  ex->x.ntakes = 0;
  if (l->tevents) hk_tools_block(ex, l); /* the access checks: a new block */
  int rc = hk_schedule_guarded(ex);
  if (rc == 2) hk_tools_stopped(ex, l); /* while its fibers' records are there */
  for (int f = 0; f < ex->nfib; f++)
    if (!ex->fib[f].done) fb_abandon(&ex->fib[f].f);
  *ex->self = NULL;
  /* The runner may have gone on to later blocks: ex->x.block is the one. */
  if (rc == 1) hk_launch_fail(l, ex->x.block, ex->fault);
}

void hk_run_blocks(hk_exec *ex, hk_job *l) {
  /* The tools (the access checks: each executor of the launch takes a
   * lane of its own, made for the launch's thread and each helper that may
   * join; none left, it runs none of the blocks). */
  if (!hk_tools_enter(ex, l)) return;
  pthread_sigmask(SIG_SETMASK, NULL, &ex->sigmask); /* hk_schedule_guarded restores it */
  ex->cnext = ex->cend = 0;
  uint64_t b;
  while (!atomic_load(&l->abort) && hk_claim(ex, l, &b)) hk_run_block(ex, l, b);
  hk_tools_leave(ex, l);
}

/* ========================================================================== */
/* The executor of each thread, and the helper threads                        */
/* ========================================================================== */

/* A thread's executor is freed when the thread ends (a stream's worker, a
 * helper): the key's destructor, so that no other part need say when. */
static pthread_key_t hk_exec_key;
static pthread_once_t hk_exec_once = PTHREAD_ONCE_INIT;
static bool hk_exec_key_ok;

static void hk_exec_dtor(void *p) {
  if (hk_cur == p) hk_cur = NULL;
  hk_exec_free(p);
}

static void hk_exec_key_make(void) {
  hk_exec_key_ok = pthread_key_create(&hk_exec_key, hk_exec_dtor) == 0;
}

hk_exec *hk_exec_here(hk_state *k) {
  if (hk_cur && hk_cur->k == k) return hk_cur;
  pthread_once(&hk_exec_once, hk_exec_key_make);
  if (!hk_exec_key_ok) return NULL;
  if (hk_cur) {
    pthread_setspecific(hk_exec_key, NULL);
    hk_exec_free(hk_cur);
    hk_cur = NULL;
  }
  hk_exec *ex = hk_exec_new(k, true);
  if (ex && pthread_setspecific(hk_exec_key, ex) != 0) {
    hk_exec_free(ex);
    ex = NULL;
  }
  hk_cur = ex;
  return ex;
}
