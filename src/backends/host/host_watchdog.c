/*
 * The host simulator's watchdog (option kernel_timeout): a launch that
 * runs longer than the timeout is stopped, and fails with
 * DV_ERR_KERNEL_TIMEOUT saying where its threads were.
 *
 * One watchdog thread per kernel state (started by the first launch under
 * a timeout) keeps the launches that run under a deadline and, for each,
 * the executors (host_exec.c) running its blocks.  At the deadline it sets
 * the launch's abort (blocks not yet started are not started) and each of
 * those executors' wd_stop, then sends each executor's OS thread HK_WD_SIG
 * with pthread_kill, and again every HK_WD_KICK_MS until the executor has
 * left the launch.  Where the executor is when the signal comes:
 *   - in the kernel's own code (in_kernel): the handler records the
 *     interrupted pc and leaves the block through the faults' siglongjmp;
 *   - in the runtime (a barrier, a wave operation, dv_printf; host_rt.c):
 *     the runtime sees wd_stop on its way back to the kernel and stops the
 *     block there, with the kernel's call as the place;
 *   - in the scheduler or the runner between threads: they see wd_stop
 *     before they resume a thread.
 * The handler stops only a pc in the module's code (hk_module_text), where
 * the line is the kernel's; elsewhere in the kernel's window (libc's
 * formatting of a dv_printf, libm) the runtime's check or the next signal
 * stops it.  The repeated signal also covers the few instructions between
 * a check and the kernel's window opening.  Why a thread and pthread_kill rather than a
 * POSIX timer per executor (timer_create with SIGEV_THREAD_ID): under
 * ThreadSanitizer a timer's signal (SI_TIMER) is asynchronous and is held
 * until the thread enters an intercepted function, which a spinning kernel
 * (not instrumented) never does, while a signal one thread sends another
 * with pthread_kill, of a kind TSan counts as synchronous (SIGBUS), is
 * delivered at once; and one thread serves every executor without a timer
 * to arm and disarm per block (two system calls each).  The handler knows
 * the watchdog's signal from a real bus error by its si_code (SI_TKILL)
 * and sender (this process).
 *
 * The stopped executor records where its block's threads were
 * (hk_wd_block_stopped: grouped by state and line; in fast mode, what the
 * block function or region fission lets one know), abandons the block's
 * fibers as after a fault, and the stream's worker composes the message
 * when every executor has left the launch (hk_wd_result: the lines of
 * interrupted pcs come from host_lines.c then, on the worker, with no
 * signal in flight).
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "exec/exec_internal.h"

#define HK_WD_KICK_MS 20 /* a stopped launch's executors get the signal again this often */
#define HK_WD_GROUPS 6   /* groups of threads described per block */
#define HK_WD_BLOCKS 3   /* stopped blocks described per message */

/* How a group of a stopped block's threads was (HK_G_SKIP: said with the
 * running one). */
enum { HK_G_RUN, HK_G_READY, HK_G_BAR, HK_G_WAVE, HK_G_EXIT, HK_G_NEW, HK_G_SKIP };

typedef struct hk_wd_group {
  int kind, count, first;
  int line;        /* HK_G_BAR, HK_G_WAVE: the barrier's; HK_G_READY: the last one passed */
  int op;          /* HK_G_WAVE: the wave operation, -1 a wave barrier */
} hk_wd_group;

/* One stopped block. */
struct hk_wd_part {
  uint64_t block;
  const hk_mview *m;
  int ng, more;    /* more: threads of groups that did not fit */
  int mode;        /* 0: each thread's record; 1: fast mode's block function; 2: region fission */
  int run;         /* the running thread (mode 0, 1), or -1 */
  const void *pc;  /* where it ran (NULL: not known) */
  bool ret;        /* pc is a return address */
  hk_wd_group g[HK_WD_GROUPS];
};

/* ========================================================================== */
/* Time                                                                        */
/* ========================================================================== */

static void hk_ts_add_ns(struct timespec *t, int64_t ns) {
  int64_t s = ns / 1000000000, r = ns % 1000000000;
  t->tv_sec += (time_t)s;
  t->tv_nsec += (long)r;
  if (t->tv_nsec >= 1000000000) t->tv_sec++, t->tv_nsec -= 1000000000;
}

static int hk_ts_cmp(const struct timespec *a, const struct timespec *b) {
  if (a->tv_sec != b->tv_sec) return a->tv_sec < b->tv_sec ? -1 : 1;
  return a->tv_nsec < b->tv_nsec ? -1 : a->tv_nsec > b->tv_nsec;
}

/* ========================================================================== */
/* The watchdog thread                                                         */
/* ========================================================================== */

/* Stop every executor of l (k->wm held). */
static void hk_wd_kick(hk_job *l) {
  for (hk_exec *ex = l->wd_execs; ex; ex = ex->wd_next) {
    atomic_store(&ex->wd_stop, 1); /* before the signal: the handler reads it */
    pthread_kill(ex->wd_thread, HK_WD_SIG);
  }
}

static void *hk_wd_main(void *arg) {
  hk_state *k = arg;
  pthread_mutex_lock(&k->wm);
  while (!k->wd_quit) {
    struct timespec now, wake = {0, 0};
    clock_gettime(CLOCK_MONOTONIC, &now);
    bool any = false;
    for (hk_job *l = k->wd_jobs; l; l = l->wd_next) {
      if (!atomic_load(&l->wd_fired) && hk_ts_cmp(&l->wd_deadline, &now) <= 0) {
        atomic_store(&l->abort, 1); /* blocks not started stay so */
        atomic_store(&l->wd_fired, 1);
        l->wd_kick = now;
      }
      struct timespec due = l->wd_deadline;
      if (atomic_load(&l->wd_fired)) {
        if (hk_ts_cmp(&l->wd_kick, &now) <= 0) {
          hk_wd_kick(l);
          l->wd_kick = now;
          hk_ts_add_ns(&l->wd_kick, (int64_t)HK_WD_KICK_MS * 1000000);
        }
        due = l->wd_kick;
      }
      if (!any || hk_ts_cmp(&due, &wake) < 0) wake = due;
      any = true;
    }
    if (any)
      pthread_cond_timedwait(&k->wc, &k->wm, &wake);
    else
      pthread_cond_wait(&k->wc, &k->wm);
  }
  pthread_mutex_unlock(&k->wm);
  return NULL;
}

/* Start the watchdog thread (k->wm held); false: it cannot start. */
static bool hk_wd_start(hk_state *k) {
  if (k->wd_started) return true;
  /* The thread takes no signal of the process's: all blocked in it. */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int e = pthread_create(&k->wd, NULL, hk_wd_main, k);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (e) {
    dv__log(DV_LOG_WARN, "host simulator: the kernel watchdog thread did not start (%s): "
            "launches run without kernel_timeout", strerror(e));
    return false;
  }
  k->wd_started = true;
  return true;
}

void hk_wd_close(hk_state *k) {
  pthread_mutex_lock(&k->wm);
  k->wd_quit = true;
  pthread_cond_broadcast(&k->wc);
  bool join = k->wd_started;
  pthread_mutex_unlock(&k->wm);
  if (join) pthread_join(k->wd, NULL);
  k->wd_started = false;
}

/* ========================================================================== */
/* Launches and executors                                                      */
/* ========================================================================== */

void hk_wd_begin(hk_job *l) {
  hk_state *k = l->k;
  if (!(k->timeout > 0)) return;
  uintptr_t lo, hi;
  hk_module_text(l->v.kern->m, &lo, &hi);
  pthread_mutex_lock(&k->wm);
  if (hk_wd_start(k)) {
    l->wd_on = true;
    l->wd_lo = lo, l->wd_hi = hi;
    clock_gettime(CLOCK_MONOTONIC, &l->wd_deadline);
    hk_ts_add_ns(&l->wd_deadline, (int64_t)(k->timeout * 1e9));
    /* Deadlines come in order (one timeout for all): the watchdog needs
     * waking only when it waits for none. */
    bool wake = k->wd_jobs == NULL;
    l->wd_next = k->wd_jobs;
    k->wd_jobs = l;
    if (wake) pthread_cond_signal(&k->wc);
  }
  pthread_mutex_unlock(&k->wm);
}

void hk_wd_end(hk_job *l) {
  if (!l->wd_on) return;
  hk_state *k = l->k;
  pthread_mutex_lock(&k->wm);
  for (hk_job **pp = &k->wd_jobs; *pp; pp = &(*pp)->wd_next)
    if (*pp == l) {
      *pp = l->wd_next;
      break;
    }
  l->wd_next = NULL;
  pthread_mutex_unlock(&k->wm);
}

void hk_wd_enter(hk_exec *ex, hk_job *l) {
  if (!l->wd_on) return;
  pthread_mutex_lock(&l->k->wm);
  ex->wd_thread = pthread_self();
  ex->wd_lo = l->wd_lo, ex->wd_hi = l->wd_hi;
  atomic_store(&ex->wd_stop, atomic_load(&l->wd_fired));
  ex->wd_next = l->wd_execs;
  l->wd_execs = ex;
  pthread_mutex_unlock(&l->k->wm);
}

void hk_wd_leave(hk_exec *ex, hk_job *l) {
  if (!l->wd_on) return;
  pthread_mutex_lock(&l->k->wm);
  for (hk_exec **pp = &l->wd_execs; *pp; pp = &(*pp)->wd_next)
    if (*pp == ex) {
      *pp = ex->wd_next;
      break;
    }
  ex->wd_next = NULL;
  /* Off the list, so not set again: a signal still on its way finds it
   * clear and is ignored (the next launch may not be watched). */
  atomic_store(&ex->wd_stop, 0);
  pthread_mutex_unlock(&l->k->wm);
}

void hk_wd_free(hk_job *l) {
  dv__free(l->wd_parts);
  l->wd_parts = NULL;
  l->wd_nparts = l->wd_cap = 0;
}

/* ========================================================================== */
/* Where a stopped block's threads were                                        */
/* ========================================================================== */

/* Linear index of the thread a block function's record names. */
static int hk_rec_index(const dv__hthread *t) {
  return t->tid[0] + t->bdim[0] * (t->tid[1] + t->bdim[1] * t->tid[2]);
}

/* Thread j's group key: kind, line, wave operation. */
static void hk_wd_kind(const hk_exec *ex, const struct hk_wd_part *p, int loop_from, int j,
                       hk_wd_group *g) {
  g->line = 0, g->op = -1;
  if (p->mode == 1 && j >= loop_from) { /* the block function runs them in order */
    g->kind = j == p->run ? HK_G_RUN : HK_G_SKIP;
    return;
  }
  if (!ex->states_valid) { /* fast mode, no thread entered the runtime */
    g->kind = j < ex->next_thread ? HK_G_EXIT : HK_G_NEW;
    return;
  }
  const hk_thr *t = &ex->thr[j];
  switch (t->state) {
    case HK_T_RUN:
      if (j == p->run) {
        g->kind = HK_G_RUN;
      } else {
        g->kind = HK_G_READY;
        g->line = t->line;
      }
      break;
    case HK_T_BAR: g->kind = HK_G_BAR, g->line = t->line; break;
    case HK_T_WAVE: g->kind = HK_G_WAVE, g->line = t->line, g->op = t->op; break;
    case HK_T_NEW: g->kind = HK_G_NEW; break;
    default: g->kind = HK_G_EXIT; break;
  }
}

void hk_wd_block_stopped(hk_exec *ex) {
  hk_job *l = ex->l;
  struct hk_wd_part p;
  memset(&p, 0, sizeof p);
  p.block = ex->block;
  p.m = ex->m;
  p.run = -1;
  p.pc = ex->wd_pc;
  p.ret = ex->wd_ret;
  /* A signal in an instrumented module (kernel_check=on) lands mostly in
   * the access hooks kernel.h defines: the thread was at its last access. */
  if (ex->wd_hit == HK_WD_SIGNAL && ex->m && ex->m->access && ex->acc_pc)
    p.pc = ex->acc_pc, p.ret = true;
  const hk_fib *fb = ex->rfib;
  const bool running = ex->wd_hit == HK_WD_SIGNAL || ex->wd_hit == HK_WD_RUNTIME;
  int loop_from = 0;
  if (running && fb && fb->loop && ex->in_fis) {
    p.mode = 2;
  } else if (running && fb && fb->loop && ex->wd_hit == HK_WD_SIGNAL && ex->self && *ex->self) {
    /* In the block function: its record may lag the thread it runs. */
    p.mode = 1;
    p.run = hk_rec_index(*ex->self);
    loop_from = fb->loop_done;
    if (p.run < loop_from) p.run = loop_from;
  } else if (running) {
    p.run = ex->cur;
  }
  if (!running) p.pc = NULL;
  if (p.mode == 2) {
    p.ng = 1;
    p.g[0] = (hk_wd_group){HK_G_RUN, ex->n, 0, 0, -1};
  } else {
    for (int j = 0; j < ex->n; j++) {
      hk_wd_group key;
      hk_wd_kind(ex, &p, loop_from, j, &key);
      if (key.kind == HK_G_SKIP) continue;
      int i = 0;
      /* The running thread is a group of its own. */
      while (i < p.ng && !(key.kind != HK_G_RUN && p.g[i].kind == key.kind &&
                           p.g[i].line == key.line && p.g[i].op == key.op))
        i++;
      if (i == p.ng) {
        if (p.ng == HK_WD_GROUPS) {
          p.more++;
          continue;
        }
        p.g[p.ng++] = (hk_wd_group){key.kind, 0, j, key.line, key.op};
      }
      p.g[i].count++;
    }
  }
  pthread_mutex_lock(&l->em);
  if (l->wd_nparts == l->wd_cap) {
    size_t nc = l->wd_cap ? 2 * l->wd_cap : 8;
    struct hk_wd_part *np = dv__malloc(nc * sizeof *np);
    if (np) {
      if (l->wd_nparts) memcpy(np, l->wd_parts, l->wd_nparts * sizeof *np);
      dv__free(l->wd_parts);
      l->wd_parts = np;
      l->wd_cap = nc;
    }
  }
  if (l->wd_nparts < l->wd_cap)
    l->wd_parts[l->wd_nparts++] = p;
  else
    l->wd_lost++;
  pthread_mutex_unlock(&l->em);
}

/* ========================================================================== */
/* The message                                                                 */
/* ========================================================================== */

static int hk_part_cmp(const void *a, const void *b) {
  const struct hk_wd_part *x = a, *y = b;
  return x->block < y->block ? -1 : x->block > y->block;
}

typedef struct hk_sb {
  char *buf;
  size_t cap, n;
} hk_sb;

__attribute__((format(printf, 2, 3))) static void hk_sb_add(hk_sb *b, const char *fmt, ...) {
  if (b->n + 1 >= b->cap) return;
  va_list ap;
  va_start(ap, fmt);
  int w = vsnprintf(b->buf + b->n, b->cap - b->n, fmt, ap);
  va_end(ap);
  if (w > 0) b->n = b->n + (size_t)w < b->cap ? b->n + (size_t)w : b->cap - 1;
}

static void hk_wd_describe(const hk_job *l, const struct hk_wd_part *p, hk_sb *b) {
  unsigned bc[3];
  hk_coords(p->block, l->v.grid, bc);
  hk_sb_add(b, "block (%u,%u,%u): ", bc[0], bc[1], bc[2]);
  const char *file = p->m->name;
  for (int i = 0; i < p->ng; i++) {
    const hk_wd_group *g = &p->g[i];
    const char *s = g->count == 1 ? "" : "s";
    if (i) hk_sb_add(b, ", ");
    char where[200] = "an unknown place";
    if (g->kind == HK_G_RUN && p->pc) {
      if (p->ret)
        hk_line_of(p->m, p->pc, where, sizeof where);
      else
        hk_line_of_pc(p->m, p->pc, where, sizeof where);
    }
    switch (g->kind) {
      case HK_G_RUN:
        if (p->mode == 2) {
          /* The fission function's own lines are its generated code's. */
          size_t fl = strlen(file);
          bool user = !strncmp(where, file, fl) && where[fl] == ':';
          if (user)
            hk_sb_add(b, "%d thread%s at %s (running in fast mode's region fission, which runs "
                      "the block's threads as loops between barriers; host_mode=checked names "
                      "each thread)", g->count, s, where);
          else
            hk_sb_add(b, "%d thread%s running in fast mode's region fission (which runs the "
                      "block's threads as loops between barriers; its generated code, at %s; "
                      "host_mode=checked names each thread and line)", g->count, s, where);
        } else if (p->mode == 1) {
          char who[64];
          unsigned tc[3];
          hk_coords((uint64_t)g->first, l->v.block, tc);
          hk_fmt(who, sizeof who, "thread (%u,%u,%u)", tc[0], tc[1], tc[2]);
          hk_sb_add(b, "1 thread at %s (running: %s or one after it, in fast mode's block "
                    "function, which runs the block's threads in turn: those before it "
                    "finished, those after it did not start; host_mode=checked names it)",
                    where, who);
        } else {
          hk_sb_add(b, "1 thread at %s (running)", where);
        }
        break;
      case HK_G_READY:
        if (g->line > 0)
          hk_sb_add(b, "%d thread%s past %s:%d (ready to run)", g->count, s, file, g->line);
        else
          hk_sb_add(b, "%d thread%s ready to run", g->count, s);
        break;
      case HK_G_BAR:
        hk_sb_add(b, "%d thread%s at %s:%d (barrier)", g->count, s, file, g->line);
        break;
      case HK_G_WAVE:
        if (g->op >= 0 && g->op < HK_NWAVE_OPS)
          hk_sb_add(b, "%d thread%s at %s:%d (%s)", g->count, s, file, g->line,
                    hk_wave_names[g->op]);
        else
          hk_sb_add(b, "%d thread%s at %s:%d (wave barrier)", g->count, s, file, g->line);
        break;
      case HK_G_EXIT: hk_sb_add(b, "%d thread%s finished", g->count, s); break;
      default: hk_sb_add(b, "%d thread%s not started", g->count, s); break;
    }
  }
  if (p->more) hk_sb_add(b, ", %d more thread%s elsewhere", p->more, p->more == 1 ? "" : "s");
}

dv_status hk_wd_result(hk_job *l, char *msg, size_t cap) {
  if (!l->wd_on || !atomic_load(&l->wd_fired)) return DV_OK;
  uint64_t next = atomic_load(&l->next);
  uint64_t started = next < l->v.nblocks ? next : l->v.nblocks;
  uint64_t stopped = l->wd_nparts + l->wd_lost;
  if (!stopped && started == l->v.nblocks) return DV_OK; /* it ended as the watchdog fired */
  qsort(l->wd_parts, l->wd_nparts, sizeof *l->wd_parts, hk_part_cmp);
  hk_sb b = {msg, cap, 0};
  if (cap) msg[0] = 0;
  hk_sb_add(&b, "kernel %s timed out after %g s (option kernel_timeout)", l->v.kern->name,
            l->k->timeout);
  size_t shown = l->wd_nparts < HK_WD_BLOCKS ? l->wd_nparts : HK_WD_BLOCKS;
  for (size_t i = 0; i < shown; i++) {
    hk_sb_add(&b, i ? "; " : ": ");
    hk_wd_describe(l, &l->wd_parts[i], &b);
  }
  if (stopped > shown)
    hk_sb_add(&b, "; %llu more block%s stopped", (unsigned long long)(stopped - shown),
              stopped - shown == 1 ? "" : "s");
  uint64_t finished = started > stopped ? started - stopped : 0;
  if (finished)
    hk_sb_add(&b, "; %llu block%s finished", (unsigned long long)finished,
              finished == 1 ? "" : "s");
  if (started < l->v.nblocks) {
    unsigned c[3];
    hk_coords(started, l->v.grid, c);
    uint64_t left = l->v.nblocks - started;
    if (left == 1)
      hk_sb_add(&b, "; block (%u,%u,%u) not started", c[0], c[1], c[2]);
    else
      hk_sb_add(&b, "; blocks (%u,%u,%u).. not started (%llu)", c[0], c[1], c[2],
                (unsigned long long)left);
  }
  return DV_ERR_KERNEL_TIMEOUT;
}
