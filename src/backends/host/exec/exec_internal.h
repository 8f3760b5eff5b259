/*
 * The host simulator's kernel execution, private to exec/ (host.c reaches
 * it through exec.h's entry points; tools/ through exec.h's hook list and
 * views).  It uses the parts below it through each part's one header:
 * device/device.h (blocks, streams' opaque tasks), toolchain/toolchain.h
 * (the read-only views of modules and kernels, the lines of code
 * addresses).  One file per mechanism:
 *
 *   launch.c  the kernel state, limits, launches and running them as a
 *             stream's task
 *   sched.c   executors (OS threads that run blocks), the runner and
 *             block scheduler (fibers)
 *   pool.c    the helper threads that join launches of many blocks
 *   signal.c  the signal handler: faults in a kernel's code, the stop
 *             signal (hk_exec_stop)
 *   call.c    calling a kernel: argument types, the System V "flat"
 *             path, libffi
 *   rt.c      the runtime kernels call (dv__rt): shared memory,
 *             barriers, wave operations, printf, faults; the library-code
 *             window tools' runtime entries use
 *   fiber.c   the fibers (fiber.h)
 *   hooks.c   the tools' hook list (exec.h's hk_tool; tools/ plugs them in)
 */
#ifndef DV_HOST_KERNEL_INTERNAL_H
#define DV_HOST_KERNEL_INTERNAL_H
#include <ffi.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <time.h>

#include "../../../core/core.h"
#include "../../backend.h"
#include "../../../dialect/dialect.h"
#include "../toolchain/toolchain.h"
#include "exec.h"
#include "fiber.h"

#define HK_MAX_THREADS 1024
#define HK_SHARED_LIMIT ((size_t)48 << 10) /* static + dynamic shared bytes per block */
#define HK_CONST_LIMIT ((size_t)64 << 10) /* a module's constant buffer (kernel_limits) */
#define HK_REDZONE 64
#define HK_CANARY 0xFD
#define HK_POISON 0xDF
#define HK_ALTSTACK ((size_t)64 << 10)
/* Stack the runtime's own frames may need below its entry point (a shared
 * array may allocate; a fault formats its message): host_rt.c's
 * hk_rt_enter.  At most a quarter of the fiber's stack. */
#if DV_HOST_ASAN
#define HK_RT_HEADROOM ((size_t)16 << 10)
#else
#define HK_RT_HEADROOM ((size_t)8 << 10)
#endif

/* ========================================================================== */
/* State                                                                       */
/* ========================================================================== */

struct hk_state {
  bool fast;          /* option host_mode is fast: kernels run as loops over threads */
  size_t fiber_stack; /* usable bytes per fiber (page multiple) */
  size_t page;
  int wave;           /* option host_wave_size */
  /* The tools plugged in (hk_tool_add; tools/tools.h): their hooks, in order. */
  hk_tool tools[HK_TOOLS];
  int ntools;

  /* Helper threads that join launches with more than one block (pool.c). */
  struct hk_pool {
    pthread_mutex_t m;
    pthread_cond_t work, done;
    hk_job *jobs;
    pthread_t *helpers;
    int nhelpers;
    bool started, stop;
  } pool;
  bool signals; /* this state counts in the signal handler's users */
  /* The executor lent to a caller's thread for a synchronous launch
   * (lend.c): made on first use, freed by hk_close; lent to one thread
   * at a time (busy). */
  hk_exec *lent;
  _Atomic bool lent_busy;
};

/* ========================================================================== */
/* Launches                                                                    */
/* ========================================================================== */

typedef union hk_val {
  void *p;
  uint64_t u;
  double d;
  unsigned char raw[8];
} hk_val;

/* The System V x86-64 calling convention, done by hand: a kernel's
 * arguments are the same for every thread of a launch, so they are sorted
 * once into the registers and stack slots the ABI gives them (integers and
 * pointers: rdi, rsi, rdx, rcx, r8, r9; float and double: xmm0-7; the rest
 * and structs by value: 8-byte stack slots in order) and each thread is a
 * plain call through a prototype with all of those (a callee ignores the
 * registers and slots past its own parameters; the caller pops them).
 * libffi classifies and copies every argument on every call, which cost
 * more than a thread of a small kernel.  Elsewhere, or for an argument
 * this does not know, libffi makes every call. */
#if defined(__x86_64__) && defined(__linux__)
#define HK_FLAT 1
#define HK_FLAT_STACK 40
typedef struct hk_flat {
  bool ok;
  uint64_t g[6], x[8], s[HK_FLAT_STACK];
} hk_flat;
#endif


struct hk_job {
  hk_jview v; /* what the tools see: kernel, grid, block (exec.h) */
  hk_state *k;
  void (*blk)(void); /* fast mode: the kernel's block function; NULL: a call per thread */
  size_t dyn;
#if HK_FLAT
  hk_flat flat;
#endif
  ffi_cif cif;
  size_t nargs;
  ffi_type **types;
  void **values;
  hk_val *vals;
  dv_bkview *views;
  hb_block **held; /* one reference each */
  int *held_param; /* which parameter */
  size_t nheld;

  /* While it runs. */
  _Atomic uint64_t next; /* next block to take */
  uint64_t chunk;        /* blocks an executor takes at once (hk_claim) */
  _Atomic int abort;     /* a block faulted: take no more */
  pthread_mutex_t em;
  dv_status err;
  uint64_t err_block;
  char msg[768];
  /* Helper threads (pool.c, under hk_state.pool.m). */
  int want, joined, active;
  hk_job *jnext;
  bool listed;
  /* Each tool's state of the launch (hk_state.tools' order; NULL: none). */
  _Atomic(void *) tool[HK_TOOLS];
  unsigned tflags; /* what the tools' start hooks asked for (HK_WANT_*) */
  bool tevents;    /* a tool with a state of it has block event hooks (hk_tools_start) */
};

/* ========================================================================== */
/* Executors: an OS thread that runs blocks                                    */
/* ========================================================================== */

typedef struct hk_fib hk_fib;

/* A simulated thread of the running block. */
typedef struct hk_thr {
  int state; /* hk_tstate */
  int site, line;
  int op;      /* HK_T_WAVE: the wave operation (dv__wave_*), -1 a wave barrier */
  unsigned wphase; /* wave operations done: its parity picks the slot of wv */
  dv_u64 wv[2];    /* the value given to a wave operation (two slots: see hk_rt_wave) */
  hk_fib *fib; /* the fiber it runs on */
  dv__hthread *self; /* its record (the module's dv__self while it runs) */
} hk_thr;

/* A fiber: a runner (threads one after the other) until its thread waits
 * at a barrier; from then on that thread's. */
struct hk_fib {
  fb_fiber f;
  bool taken; /* its thread waited at a barrier: run no other thread */
  bool done;  /* returned (its stack holds nothing) */
  /* Fast mode: the block function (kernel.h) runs on this fiber and no
   * thread has taken it (the running thread's record is then the module's
   * dv__self); the first of its threads not yet marked as exited. */
  bool loop;
  int loop_done;
  int owner; /* the thread that took it (fast mode) */
};

struct hk_exec {
  hk_xview x; /* what the tools see: the running block, its memory (exec.h) */
  hk_state *k;
  fb_fiber sched;
  /* Fiber stacks (x.stacks, x.map_bytes): nstacks of `stride` bytes, a
   * guard page at the bottom of each. */
  size_t nstacks, stride;
  hk_thr *thr;
  dv__hthread *ht;
  hk_fib *fib;
  size_t cap; /* entries of thr, ht and fib */
  /* Alternate signal stack. */
  void *alt;
  stack_t alt_old;
  bool alt_set;
  int *site_slot; /* site -> slot + 1 */
  int site_cap;
  size_t arena_used, static_bytes;
  unsigned char *dyn;
  /* The running block (and x: its launch, module, block, thread). */
  uint64_t cnext, cend; /* the rest of the blocks this executor took (hk_claim) */
  int n;           /* threads */
  int nfib;        /* fibers made for this block */
  int next_thread; /* the next one a runner takes */
  hk_fib *rfib;    /* the fiber running */
  bool direct;     /* every thread has its fiber: a waiting one switches to the next */
  /* The threads' records (thr) say where each one is.  In fast mode they
   * are set only once a thread of the block enters the runtime
   * (hk_loop_sync): a block that never does costs nothing per thread. */
  bool states_valid;
  /* Threads waiting at a barrier (HK_T_BAR) and at a wave barrier, counted
   * as they arrive; bar_mixed: not all of the former at bar_site. */
  int nbar, nwave, bar_site;
  int bar_fence; /* the fences every thread at the barrier named (DV_FENCE_*) */
  bool bar_mixed;
  dv__hthread **self;
  sigjmp_buf jb;   /* saved without the signal mask: */
  sigset_t sigmask; /* the thread's, saved once per launch (hk_run_blocks) */
  /* The kernel's own code runs (hk_call sets it, the runtime clears it
   * while it runs): the signal handler takes a fault for the kernel's only
   * then.  Never set in the scheduler, the runner's or the runtime's code. */
  volatile sig_atomic_t in_kernel;
  volatile int sig, sig_code;
  void *volatile sig_addr;
  void *volatile sig_sp; /* the interrupted stack pointer (NULL: unknown here) */
  char fault[700];
  size_t rt_room; /* HK_RT_HEADROOM for this fiber stack size */
  /* A stop (hk_exec_stop: the watchdog, tools/watchdog.c).  stop: set by
   * the stopping thread (before its signal); the block stops where this
   * executor notices it (HK_STOP_*: stop_at says where, stop_pc the code
   * address when known, stop_ret: a return address). */
  _Atomic int stop;
  int stop_at;
  const void *volatile stop_pc;
  bool stop_ret;
  bool in_fis;       /* fast mode: the fission function runs (sched.c) */
  pthread_t thread;  /* its OS thread (hk_exec_stoppable): HK_STOP_SIG goes there */
  uintptr_t stop_lo, stop_hi; /* the launch's module's code: the signal stops only a pc there */
};
/* Where an executor noticed a stop. */
enum { HK_STOP_NONE, HK_STOP_SIGNAL, HK_STOP_RUNTIME, HK_STOP_SCHED };

/* ========================================================================== */
/* Across the files                                                            */
/* ========================================================================== */

/* ---- host_call.c ---- */
/* Each lowered argument's libffi type; an error for what cannot be passed. */
dv_status hk_arg_types(const hk_kview *kn, const dv_blaunch *bl, ffi_type **types);
/* Sort the launch's arguments for hk_call's flat path (l->types and
 * l->values are set). */
void hk_flat_build(hk_job *l);
/* fn (the kernel, or its block function) with the launch's arguments,
 * with *in_kernel set for the call's duration. */
void hk_call(hk_job *l, void (*fn)(void), volatile sig_atomic_t *in_kernel);

/* ---- host_rt.c ---- */
/* "kernel K, block (x,y,z)" of the executor's running block. */
int hk_where(const hk_exec *ex, char *buf, size_t cap);
/* signal.c: the device buffer a SIGSEGV's address missed, as ", ..." (or nothing). */
void hk_fault_array(const hk_exec *ex, char *buf, size_t cap);
/* "thread (x,y,z)" of simulated thread i of the running block. */
void hk_thread_name(const hk_exec *ex, int i, char *buf, size_t cap);
/* Fast mode: the thread the block function runs on the executor's fiber
 * becomes the current one (ex->cur, its record), the threads it ran before
 * exited; call on entry to the runtime when ex->rfib->loop is set. */
void hk_loop_sync(hk_exec *ex);
/* A stop (hk_exec_stop): the calling thread's block stops here,
 * at the kernel's call pc (a return address); from the runtime only. */
__attribute__((noreturn)) void hk_rt_timeout(hk_exec *ex, const void *pc);
/* Fill a shared slot's redzone with its canary. */
void hk_fill_redzone(unsigned char *p);
/* Stop the running thread's block with the fault ex->fault says (never
 * returns). */
__attribute__((noreturn)) void hk_fault_stop(hk_exec *ex);
/* The running kernel left its thread less stack than the runtime needs:
 * its stack overflow (call with in_kernel still set). */
void hk_rt_overflow(const hk_exec *ex);
#ifndef NDEBUG
/* Test hook, in debug builds only (tests/backends/host/test_host_kernels.c): a fault in
 * the library's own code on an executor, outside the kernel body, which
 * must end the process as a library bug would (not be taken for the
 * kernel's).  hk_test_fault names the place; HK_TEST_FAULT(where) there
 * writes to an unmapped address when it matches. */
enum { HK_TEST_FAULT_NONE, HK_TEST_FAULT_RUNNER, HK_TEST_FAULT_BARRIER };
extern _Atomic int hk_test_fault;
void hk_test_fault_at(int where);
#define HK_TEST_FAULT(where) hk_test_fault_at(where)
#else
#define HK_TEST_FAULT(where) ((void)0)
#endif

/* ---- the stop signal (hk_exec_stop) ---- */
/* The signal hk_exec_stop sends an executor (pthread_kill; signal.c's
 * handler takes it when si_code is SI_TKILL from this process). */
#define HK_STOP_SIG SIGBUS

/* ---- host_signal.c ---- */
/* The signal handler, installed while some state that launched holds it. */
void hk_sig_acquire(hk_state *k);
void hk_sig_release(void);
/* The signals the handler takes (a kernel's faults and the watchdog's stop) into *out. */
void hk_sig_fault_set(sigset_t *out);

/* ---- host_exec.c ---- */
/* The calling OS thread's executor for state k (made on first use); NULL:
 * no memory. */
hk_exec *hk_exec_here(hk_state *k);
/* A new executor for state k and its end (hk_exec_here's; lend.c's).
 * bind_alt: install its alternate signal stack on this thread now, unless
 * the thread has a big enough one; false: map one, installed by whoever
 * runs it (lend.c). */
hk_exec *hk_exec_new(hk_state *k, bool bind_alt);
void hk_exec_free(hk_exec *ex);
/* Run blocks of l on this executor until none is left or one faulted. */
void hk_run_blocks(hk_exec *ex, hk_job *l);

/* ---- lend.c: the state's executor, lent to the calling thread ----
 * hk_exec_lend makes it the calling thread's (hk_cur), with its alternate
 * signal stack unless the thread has a big enough one, and the fault
 * signals (the watchdog's among them) unblocked: 1.  0: another
 * thread has it (run the launch on the stream's worker then); -1: no
 * memory to make it (nothing done).  hk_exec_unlend gives back what the
 * thread had. */
typedef struct hk_lend {
  hk_exec *prev;
  stack_t alt_old;
  sigset_t mask_old;
  bool alt_set, mask_set;
} hk_lend;
int hk_exec_lend(hk_state *k, hk_lend *save);
void hk_exec_unlend(hk_state *k, hk_lend *save);
void hk_exec_lent_free(hk_state *k);

/* ---- hooks.c: the tools' hooks of each kind, for launch l (exec.h) ---- */
/* Every tool's make: the launch is made from bl; the first error. */
dv_status hk_tools_make(hk_job *l, const dv_blaunch *bl);
/* Every tool's start: the launch is about to run, on lanes executors; the
 * first error, with its message in msg (the tools started get their stop). */
dv_status hk_tools_start(hk_job *l, int lanes, char *msg, size_t cap);
/* These, only for a tool with a state of l: */
/* false: a tool's enter refused ex (those entered before it left). */
bool hk_tools_enter(hk_exec *ex, hk_job *l);
/* The block events (only when l->tevents): pending true, with the report in msg. */
void hk_tools_block(hk_exec *ex, hk_job *l);
void hk_tools_barrier(hk_exec *ex, hk_job *l, int fence);
void hk_tools_wave(hk_exec *ex, hk_job *l, int w);
bool hk_tools_pending(hk_exec *ex, hk_job *l, char *msg, size_t cap);
void hk_tools_leave(hk_exec *ex, hk_job *l);
void hk_tools_stopped(hk_exec *ex, hk_job *l);
void hk_tools_stop(hk_job *l);
/* The first error of their finish hooks, its message in msg. */
dv_status hk_tools_finish(hk_job *l, char *msg, size_t cap);
void hk_tools_free(hk_job *l);

/* ---- pool.c: the helper threads ---- */
void hk_pool_init(hk_state *k);
/* Stop and join the helpers (hk_close). */
void hk_pool_close(hk_state *k);
/* Start the helper threads once; false: no memory (try again later). */
bool hk_pool_start(hk_state *k);
/* The helpers a launch of nblocks blocks may have (0 for one block). */
int hk_pool_want(hk_state *k, uint64_t nblocks);
/* Post l to `want` helpers; false: there are none (l runs alone). */
bool hk_pool_post(hk_state *k, hk_job *l, int want);
/* After l's own thread ran out of blocks: take it off the list and wait
 * until no helper is still in it. */
void hk_pool_done(hk_state *k, hk_job *l);


#endif
