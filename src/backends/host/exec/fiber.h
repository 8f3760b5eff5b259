/*
 * Fibers for the host simulator's kernels: one per simulated GPU thread of
 * a block, all run by one OS thread (the block's scheduler).  A fiber runs
 * until it reaches a barrier or returns, then switches back to the
 * scheduler; the scheduler decides whom to resume next.
 *
 * The switch is a small assembly routine on x86-64 (it saves
 * the callee-saved registers and the floating-point control words, nothing
 * else: no system call), and ucontext's swapcontext elsewhere.  Every
 * switch is announced to AddressSanitizer (__sanitizer_start/
 * finish_switch_fiber) and ThreadSanitizer (__tsan_switch_to_fiber) when
 * devarray is built with them, so both keep working across switches.
 */
#ifndef DV_HOST_FIBER_H
#define DV_HOST_FIBER_H

#include <stdbool.h>
#include <stddef.h>

#if defined(__SANITIZE_ADDRESS__)
#define DV_FIBER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define DV_FIBER_ASAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define DV_FIBER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define DV_FIBER_TSAN 1
#endif
#endif

#if defined(__x86_64__) && !defined(DV_FIBER_UCONTEXT)
#define DV_FIBER_ASM 1
#else
#include <ucontext.h>
#endif

typedef void (*fb_fn)(void *arg);

/* A context: a fiber, or the scheduler (the OS thread's own stack). */
typedef struct fb_fiber {
#if DV_FIBER_ASM
  void *sp; /* saved stack pointer while switched out */
#else
  ucontext_t uc;
#endif
  unsigned char *stack_lo; /* usable stack (guard page excluded); NULL: the thread's own */
  size_t stack_size;
  fb_fn fn;
  void *arg;
  struct fb_fiber *sched; /* whom this fiber returns to */
  void *asan_fake;        /* AddressSanitizer's fake stack while switched out */
  void *tsan;             /* ThreadSanitizer's fiber (the thread's own for the scheduler) */
  bool tsan_owned;
} fb_fiber;

/* The calling thread's scheduler context (call once per thread, before fb_resume). */
void fb_sched_init(fb_fiber *sched);
void fb_sched_fini(fb_fiber *sched);
/* The scheduler's fiber moved to the calling thread (an executor lent to
 * it, lend.c): ThreadSanitizer's fiber of the thread.  No fiber of it may
 * be suspended. */
void fb_sched_bind(fb_fiber *sched);

/* Set up f to run fn(arg) on [stack_lo, stack_lo + size) when first
 * resumed.  When fn returns, f switches to its scheduler for good (as
 * fb_yield(f, true) does, but leaving no frame of its own behind: the
 * normal end; fb_yield(f, true) is for a fiber stopped inside fn). */
int fb_prepare(fb_fiber *f, fb_fiber *sched, unsigned char *stack_lo, size_t size, fb_fn fn,
               void *arg);
/* Release what fb_prepare took (ThreadSanitizer's fiber). */
void fb_release(fb_fiber *f);

/* Scheduler -> f; returns when f yields. */
void fb_resume(fb_fiber *sched, fb_fiber *f);
/* f -> its scheduler.  exiting: f never runs again (until prepared anew). */
void fb_yield(fb_fiber *f, bool exiting);
/* Fiber from -> fiber to (both of one scheduler, to already started);
 * returns when something switches back to from. */
void fb_switch(fb_fiber *from, fb_fiber *to);

/* f was left suspended for good (its block was stopped): forget the state
 * the sanitizers keep for its stack before the stack is reused. */
void fb_abandon(fb_fiber *f);

/* Around a non-local jump from fiber f (a signal handler) back into the
 * scheduler's own stack: call fb_escape before siglongjmp, fb_escaped in
 * the scheduler when sigsetjmp returns again. */
void fb_escape(fb_fiber *f);
void fb_escaped(fb_fiber *sched);

#endif
