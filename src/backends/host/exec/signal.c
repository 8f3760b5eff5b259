/*
 * The host simulator's signal handler (split from host_exec.c): SIGSEGV,
 * SIGBUS, SIGFPE and SIGILL in a simulated thread's own code (the
 * executor's in_kernel) leave its block through siglongjmp to the
 * executor's jump buffer (host_exec.c's hk_schedule_guarded) and become
 * DV_ERR_KERNEL_FAULT; the watchdog's SIGBUS (tools/watchdog.c: SI_TKILL from
 * this process) stops a block that runs past its launch's deadline.  Any
 * other signal goes to whoever handled it before.  Installed while some
 * state that launched holds it (hk_sig_acquire / hk_sig_release).
 */
#include <signal.h>
#include <string.h>
#include <ucontext.h>
#include <unistd.h>

#include "exec_internal.h"

static const int hk_sigs[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL};
#define HK_NSIGS ((int)(sizeof hk_sigs / sizeof *hk_sigs))
static struct sigaction hk_sig_old[HK_NSIGS];
static pthread_mutex_t hk_sig_lock = PTHREAD_MUTEX_INITIALIZER;
static int hk_sig_users;

void hk_sig_fault_set(sigset_t *out) {
  sigemptyset(out);
  for (int i = 0; i < HK_NSIGS; i++) sigaddset(out, hk_sigs[i]);
}

/* The interrupted pc, where the platform says. */
static const void *hk_uc_pc(void *uc) {
#if defined(__linux__) && defined(__x86_64__)
  return uc ? (const void *)((ucontext_t *)uc)->uc_mcontext.gregs[REG_RIP] : NULL;
#elif defined(__linux__) && defined(__aarch64__)
  return uc ? (const void *)((ucontext_t *)uc)->uc_mcontext.pc : NULL;
#else
  (void)uc;
  return NULL;
#endif
}

/* The stack pointer of the interrupted code, where the platform says. */
static void *hk_uc_sp(void *uc) {
#if defined(__linux__) && defined(__x86_64__)
  return uc ? (void *)((ucontext_t *)uc)->uc_mcontext.gregs[REG_RSP] : NULL;
#elif defined(__linux__) && defined(__aarch64__)
  return uc ? (void *)((ucontext_t *)uc)->uc_mcontext.sp : NULL;
#else
  (void)uc;
  return NULL;
#endif
}

static void hk_on_signal(int sig, siginfo_t *si, void *uc) {
  hk_exec *ex = hk_cur;
  if (sig == HK_STOP_SIG && si && si->si_code == SI_TKILL && si->si_pid == getpid()) {
    /* The watchdog's (tools/watchdog.c): in the kernel's code, the block
     * stops here; elsewhere the runtime, the runner or the scheduler sees
     * stop before the kernel runs again.  One that comes late (the
     * executor left the launch: stop is clear) is ignored. */
    const void *pc = hk_uc_pc(uc);
    /* Only in the module's own code (elsewhere, as in libc's formatting
     * of a dv_printf, the place would say little; the runtime's check or
     * the next signal stops it): where the module's code is not known,
     * anywhere in the kernel's window. */
    bool there = !ex || ex->stop_hi <= ex->stop_lo ||
                 ((uintptr_t)pc >= ex->stop_lo && (uintptr_t)pc < ex->stop_hi);
    if (ex && ex->in_kernel && there &&
        atomic_load_explicit(&ex->stop, memory_order_relaxed)) {
      ex->in_kernel = 0;
      ex->stop_at = HK_STOP_SIGNAL;
      ex->stop_pc = pc;
      ex->stop_ret = false;
      fb_escape(&ex->rfib->f);
      siglongjmp(ex->jb, 2);
    }
    return;
  }
  if (ex && ex->in_kernel) {
    ex->in_kernel = 0;
    ex->sig = sig;
    ex->sig_code = si ? si->si_code : 0;
    ex->sig_addr = si ? si->si_addr : NULL;
    ex->sig_sp = hk_uc_sp(uc);
    fb_escape(&ex->rfib->f);
    siglongjmp(ex->jb, 1);
  }
  /* Not ours: whoever handled it before. */
  for (int i = 0; i < HK_NSIGS; i++) {
    if (hk_sigs[i] != sig) continue;
    const struct sigaction *old = &hk_sig_old[i];
    if ((old->sa_flags & SA_SIGINFO) && old->sa_sigaction) {
      old->sa_sigaction(sig, si, uc);
    } else if (old->sa_handler == SIG_IGN) {
      return;
    } else if (old->sa_handler == SIG_DFL) {
      signal(sig, SIG_DFL);
      raise(sig); /* delivered when this handler returns (or the fault repeats) */
    } else {
      old->sa_handler(sig);
    }
    return;
  }
}

/* A SIGSEGV's address near one of the launch's arrays (the guard pages
 * around each device block, device/mem.c): which argument's buffer it
 * missed and by how much, as " (...)"; nothing when none is within 1 MiB. */
void hk_fault_array(const hk_exec *ex, char *buf, size_t cap) {
  const hk_job *l = ex->x.l;
  if (!cap) return;
  buf[0] = 0;
  if (!l || !ex->sig_addr) return;
  long long best = -1, off = 0, o;
  size_t at = 0;
  for (size_t i = 0; i < l->nheld; i++) {
    if (!hb_block_miss(l->held[i], ex->sig_addr, &o)) return; /* inside an array */
    long long dist = o < 0 ? -o : o - (long long)hb_block_bytes(l->held[i]);
    if (best < 0 || dist < best) best = dist, off = o, at = i;
  }
  if (best < 0 || best > (1 << 20)) return;
  char decl[96];
  hk_param_text(l->v.kern->sig, l->held_param[at], decl, sizeof decl);
  hk_fmt(buf, cap, ", byte offset %lld of the %zu-byte device buffer of argument %d (`%s`), %s",
         off, hb_block_bytes(l->held[at]), l->held_param[at], decl,
         off < 0 ? "before its start" : "past its end");
}

void hk_sig_acquire(hk_state *k) {
  pthread_mutex_lock(&hk_sig_lock);
  if (!k->signals) {
    k->signals = true;
    if (hk_sig_users++ == 0) {
      struct sigaction sa;
      memset(&sa, 0, sizeof sa);
      sa.sa_sigaction = hk_on_signal;
      sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART; /* the watchdog's signal may interrupt a call */
      sigemptyset(&sa.sa_mask);
      for (int i = 0; i < HK_NSIGS; i++) sigaction(hk_sigs[i], &sa, &hk_sig_old[i]);
    }
  }
  pthread_mutex_unlock(&hk_sig_lock);
}

void hk_sig_release(void) {
  pthread_mutex_lock(&hk_sig_lock);
  if (--hk_sig_users == 0) {
    for (int i = 0; i < HK_NSIGS; i++) {
      struct sigaction cur;
      if (sigaction(hk_sigs[i], NULL, &cur) == 0 && (cur.sa_flags & SA_SIGINFO) &&
          cur.sa_sigaction == hk_on_signal)
        sigaction(hk_sigs[i], &hk_sig_old[i], NULL);
    }
  }
  pthread_mutex_unlock(&hk_sig_lock);
}

