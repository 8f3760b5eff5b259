/*
 * The executor a state lends to the thread that makes a synchronous launch.
 * Such a launch on an idle stream runs on the caller's thread (launch.c,
 * device.h's hb_task_try_inline): the caller would only wait for the
 * stream's worker, and handing the launch to a sleeping worker and back
 * costs two thread wake-ups (tens of microseconds each on a virtual machine
 * whose other CPU is idle, against a few for the launch itself).
 *
 * The caller's own thread keeps no executor of ours: one per state
 * (hk_state.lent), made on first use, freed with the state, lent to one
 * thread at a time.  For the length of the launch it is the thread's hk_cur
 * (the runtime, the signal handler and the tools find it there), its
 * alternate signal stack is the thread's unless the thread has a big enough
 * one (a fault on a fiber's guard page needs one), the fault signals are
 * unblocked (a thread of the program's may block them; a fault's signal
 * blocked kills the process, the watchdog's would never stop the kernel),
 * and its scheduler fiber is the thread's for ThreadSanitizer; everything
 * is put back after.
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>

#include "exec_internal.h"

int hk_exec_lend(hk_state *k, hk_lend *save) {
  bool busy = false;
  if (!atomic_compare_exchange_strong(&k->lent_busy, &busy, true)) return 0;
  if (!k->lent && !(k->lent = hk_exec_new(k, false))) {
    atomic_store(&k->lent_busy, false);
    return -1;
  }
  hk_exec *ex = k->lent;
  save->prev = hk_cur;
  save->alt_set = false;
  stack_t cur;
  if (ex->alt && sigaltstack(NULL, &cur) == 0 &&
      ((cur.ss_flags & SS_DISABLE) || cur.ss_size < HK_ALTSTACK)) {
    stack_t ss = {.ss_sp = ex->alt, .ss_flags = 0, .ss_size = HK_ALTSTACK};
    if (sigaltstack(&ss, &save->alt_old) == 0) save->alt_set = true;
  }
  sigset_t faults, blocked; /* the mask is put back only if it blocked one of them */
  hk_sig_fault_set(&faults);
  save->mask_set = pthread_sigmask(SIG_UNBLOCK, &faults, &save->mask_old) == 0 &&
                   sigandset(&blocked, &faults, &save->mask_old) == 0 && !sigisemptyset(&blocked);
  fb_sched_bind(&ex->sched);
  hk_cur = ex;
  return 1;
}

void hk_exec_unlend(hk_state *k, hk_lend *save) {
  hk_cur = save->prev;
  if (save->mask_set) pthread_sigmask(SIG_SETMASK, &save->mask_old, NULL);
  if (save->alt_set) sigaltstack(&save->alt_old, NULL);
  atomic_store(&k->lent_busy, false);
}

void hk_exec_lent_free(hk_state *k) {
  hk_exec_free(k->lent); /* no thread has it: hk_close runs after every launch */
  k->lent = NULL;
}
