/*
 * A spinlock for critical sections of a few dozen instructions in the
 * common case (the context's queue, the pool's small classes, the host
 * simulator's block lists and cache): one locked exchange to take it and a
 * plain release store to give it back, where a mutex costs a locked
 * operation each way and ~40 instructions a pair.  Under contention a
 * waiter yields the CPU between tries, so a holder that was preempted is
 * not spun against.  No section logs or calls code that could take the lock
 * again; the long ones are rare and bounded: the pool's refill of a class
 * from the driver (a new slab) and dv_context_check_memory's scan of the
 * simulator's quarantine.  Not for sections that block or run long in the
 * common case.
 */
#ifndef DV_CORE_SPIN_H
#define DV_CORE_SPIN_H

#include <sched.h>
#include <stdatomic.h>

typedef struct dv_spin {
  atomic_flag f;
} dv_spin;

#define DV_SPIN_INIT {ATOMIC_FLAG_INIT}

static inline void dv__spin_init(dv_spin *l) { atomic_flag_clear_explicit(&l->f, memory_order_relaxed); }

static __attribute__((noinline)) void dv__spin_wait(dv_spin *l) {
  do sched_yield();
  while (atomic_flag_test_and_set_explicit(&l->f, memory_order_acquire));
}

static inline void dv__spin_lock(dv_spin *l) {
  if (__builtin_expect(atomic_flag_test_and_set_explicit(&l->f, memory_order_acquire), 0))
    dv__spin_wait(l);
}

static inline void dv__spin_unlock(dv_spin *l) {
  atomic_flag_clear_explicit(&l->f, memory_order_release);
}

#endif
