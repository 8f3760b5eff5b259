/*
 * The host simulator's watchdog (option kernel_timeout): a launch that
 * runs longer than the timeout is stopped, and fails with
 * DV_ERR_KERNEL_TIMEOUT saying where its threads were.
 *
 A tool (tools.h): all of its state is here, hkt_watchdog (one per
 * simulator) and hkt_wjob (one per launch under a deadline, the launch's
 * tool slot); it sees the executor through exec/exec.h only.  One
 * watchdog thread per simulator (started by the first launch under a
 * timeout) keeps the launches that run under a deadline and, for each,
 * the executors running its blocks (its enter and leave hooks).  At the
 * deadline it stops the launch taking blocks (hk_job_abort: blocks not yet
 * started are not started) and stops each of those executors
 * (hk_exec_stop: a flag, then exec's stop signal sent to its OS thread
 * with pthread_kill), and again every HK_WD_KICK_MS until the executor has
 * left the launch.  Where the executor is when the signal comes:
 *   - in the kernel's own code (in_kernel): the handler records the
 *     interrupted pc and leaves the block through the faults' siglongjmp;
 *   - in the runtime (a barrier, a wave operation, dv_printf; exec/rt.c):
 *     the runtime sees the stop on its way back to the kernel and stops the
 *     block there, with the kernel's call as the place;
 *   - in the scheduler or the runner between threads: they see the stop
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
 * The stopped executor records where its block's threads were (the
 * stopped hook, hkt_wd_stopped: grouped by state and line; in fast mode,
 * what the block function or region fission lets one know:
 * hk_exec_stopped_at), abandons the block's fibers as after a fault, and
 * the stream's worker composes the message when every executor has left
 * the launch (the finish hook, hkt_wd_result: the lines of interrupted pcs
 * come from toolchain/lines.c then, on the worker, with no signal in
 * flight).
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tools_internal.h"

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
typedef struct hkt_wd_part {
  hk_xstop at;   /* where (exec's view) */
  int ng, more;  /* more: threads of groups that did not fit */
  hk_wd_group g[HK_WD_GROUPS];
} hkt_wd_part;

/* A launch under a deadline (its tool slot). */
typedef struct hkt_wjob {
  hk_job *l;
  struct timespec deadline, kick; /* CLOCK_MONOTONIC */
  _Atomic int fired;   /* the deadline passed: executors are being stopped */
  uintptr_t lo, hi;    /* the module's code (hk_module_text) */
  struct hkt_wjob *next; /* wd->jobs */
  hk_exec **execs;     /* running its blocks now (wd->m) */
  int nexecs, cap;     /* cap: the lanes its start hook was given */
  pthread_mutex_t pm;  /* the parts */
  hkt_wd_part *parts;  /* the blocks it stopped */
  size_t nparts, pcap;
  uint64_t lost;       /* stopped blocks not recorded (no memory) */
} hkt_wjob;

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

/* Stop every executor of j (wd->m held). */
static void hkt_wd_kick(hkt_wjob *j) {
  for (int i = 0; i < j->nexecs; i++) hk_exec_stop(j->execs[i]);
}

static void *hkt_wd_main(void *arg) {
  hkt_watchdog *wd = arg;
  pthread_mutex_lock(&wd->m);
  while (!wd->quit) {
    struct timespec now, wake = {0, 0};
    clock_gettime(CLOCK_MONOTONIC, &now);
    bool any = false;
    for (hkt_wjob *j = wd->jobs; j; j = j->next) {
      if (!atomic_load(&j->fired) && hk_ts_cmp(&j->deadline, &now) <= 0) {
        hk_job_abort(j->l); /* blocks not started stay so */
        atomic_store(&j->fired, 1);
        j->kick = now;
      }
      struct timespec due = j->deadline;
      if (atomic_load(&j->fired)) {
        if (hk_ts_cmp(&j->kick, &now) <= 0) {
          hkt_wd_kick(j);
          j->kick = now;
          hk_ts_add_ns(&j->kick, (int64_t)HK_WD_KICK_MS * 1000000);
        }
        due = j->kick;
      }
      if (!any || hk_ts_cmp(&due, &wake) < 0) wake = due;
      any = true;
    }
    if (any)
      pthread_cond_timedwait(&wd->c, &wd->m, &wake);
    else
      pthread_cond_wait(&wd->c, &wd->m);
  }
  pthread_mutex_unlock(&wd->m);
  return NULL;
}

/* Start the watchdog thread (wd->m held); false: it cannot start. */
static bool hkt_wd_thread(hkt_watchdog *wd) {
  if (wd->started) return true;
  /* The thread takes no signal of the process's: all blocked in it. */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int e = pthread_create(&wd->thread, NULL, hkt_wd_main, wd);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (e) {
    dv__log(DV_LOG_WARN, "host simulator: the kernel watchdog thread did not start (%s): "
            "launches run without kernel_timeout", strerror(e));
    return false;
  }
  wd->started = true;
  return true;
}

/* ========================================================================== */
/* Launches and executors (the hooks)                                          */
/* ========================================================================== */

static void hkt_wjob_free(void *self, void *data) {
  (void)self;
  hkt_wjob *j = data;
  pthread_mutex_destroy(&j->pm);
  dv__free(j->execs);
  dv__free(j->parts);
  dv__free(j);
}

/* The launch starts: under its deadline (starting the watchdog thread on
 * first use; without it, the launch runs unwatched and a warning is
 * logged).  No memory for its record: the launch fails. */
static dv_status hkt_wd_start(void *self, _Atomic(void *) *slot, hk_job *l, int lanes,
                              unsigned *want, char *msg, size_t cap) {
  hkt_watchdog *wd = self;
  if (!(wd->timeout > 0)) return DV_OK;
  const hk_jview *v = hk_job_view(l);
  hkt_wjob *j = dv__calloc(1, sizeof *j);
  hk_exec **ex = dv__calloc(lanes > 0 ? (size_t)lanes : 1, sizeof *ex);
  if (!j || !ex) {
    dv__free(j);
    dv__free(ex);
    snprintf(msg, cap, "kernel %s: no host memory for the kernel watchdog's record of the "
             "launch (kernel_timeout)", v->kern->name);
    return DV_ERR_HOST_OUT_OF_MEMORY;
  }
  j->l = l;
  j->execs = ex;
  j->cap = lanes > 0 ? lanes : 1;
  pthread_mutex_init(&j->pm, NULL);
  hk_module_text(v->kern->m, &j->lo, &j->hi);
  pthread_mutex_lock(&wd->m);
  bool on = hkt_wd_thread(wd);
  if (on) {
    clock_gettime(CLOCK_MONOTONIC, &j->deadline);
    hk_ts_add_ns(&j->deadline, (int64_t)(wd->timeout * 1e9));
    /* Deadlines come in order (one timeout for all): the watchdog needs
     * waking only when it waits for none. */
    bool wake = wd->jobs == NULL;
    j->next = wd->jobs;
    wd->jobs = j;
    if (wake) pthread_cond_signal(&wd->c);
  }
  pthread_mutex_unlock(&wd->m);
  if (!on) {
    hkt_wjob_free(NULL, j);
    return DV_OK;
  }
  atomic_store_explicit(slot, j, memory_order_relaxed);
  /* Its report says which blocks had started, and the lines threads waited at. */
  *want |= HK_WANT_ONE | HK_WANT_LINES;
  return DV_OK;
}

/* Every executor has left: off the watchdog's list. */
static void hkt_wd_stop(void *self, void *data, hk_job *l) {
  (void)l;
  hkt_watchdog *wd = self;
  hkt_wjob *j = data;
  pthread_mutex_lock(&wd->m);
  for (hkt_wjob **pp = &wd->jobs; *pp; pp = &(*pp)->next)
    if (*pp == j) {
      *pp = j->next;
      break;
    }
  j->next = NULL;
  pthread_mutex_unlock(&wd->m);
}

static bool hkt_wd_enter(void *self, void *data, hk_exec *ex) {
  hkt_watchdog *wd = self;
  hkt_wjob *j = data;
  pthread_mutex_lock(&wd->m);
  if (j->nexecs < j->cap) { /* a lane each: always (the pool posts to lanes - 1 helpers) */
    hk_exec_stoppable(ex, j->lo, j->hi, atomic_load(&j->fired));
    j->execs[j->nexecs++] = ex;
  }
  pthread_mutex_unlock(&wd->m);
  return true;
}

static void hkt_wd_leave(void *self, void *data, hk_exec *ex) {
  hkt_watchdog *wd = self;
  hkt_wjob *j = data;
  pthread_mutex_lock(&wd->m);
  for (int i = 0; i < j->nexecs; i++)
    if (j->execs[i] == ex) {
      j->execs[i] = j->execs[--j->nexecs];
      /* Off the list, so not set again: a signal still on its way finds it
       * clear and is ignored (the next launch may not be watched). */
      hk_exec_unstoppable(ex);
      break;
    }
  pthread_mutex_unlock(&wd->m);
}

/* ========================================================================== */
/* Where a stopped block's threads were                                        */
/* ========================================================================== */

/* Thread t's group key: kind, line, wave operation. */
static void hkt_wd_kind(const hk_exec *ex, const hk_xstop *at, int t, hk_wd_group *g) {
  g->line = 0, g->op = -1;
  if (at->mode == 1 && t >= at->loop_from) { /* the block function runs them in order */
    g->kind = t == at->run ? HK_G_RUN : HK_G_SKIP;
    return;
  }
  int state, line, op;
  hk_exec_thread_at(ex, t, &state, &line, &op);
  switch (state) {
    case HK_T_RUN:
      if (t == at->run) {
        g->kind = HK_G_RUN;
      } else {
        g->kind = HK_G_READY;
        g->line = line;
      }
      break;
    case HK_T_BAR: g->kind = HK_G_BAR, g->line = line; break;
    case HK_T_WAVE: g->kind = HK_G_WAVE, g->line = line, g->op = op; break;
    case HK_T_NEW: g->kind = HK_G_NEW; break;
    default: g->kind = HK_G_EXIT; break;
  }
}

static void hkt_wd_stopped(void *self, void *data, const hk_exec *ex) {
  (void)self;
  hkt_wjob *j = data;
  hkt_wd_part p;
  memset(&p, 0, sizeof p);
  hk_exec_stopped_at(ex, &p.at);
  if (p.at.mode == 2) {
    p.ng = 1;
    p.g[0] = (hk_wd_group){HK_G_RUN, p.at.n, 0, 0, -1};
  } else {
    for (int t = 0; t < p.at.n; t++) {
      hk_wd_group key;
      hkt_wd_kind(ex, &p.at, t, &key);
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
        p.g[p.ng++] = (hk_wd_group){key.kind, 0, t, key.line, key.op};
      }
      p.g[i].count++;
    }
  }
  pthread_mutex_lock(&j->pm);
  if (j->nparts == j->pcap) {
    size_t nc = j->pcap ? 2 * j->pcap : 8;
    hkt_wd_part *np = dv__malloc(nc * sizeof *np);
    if (np) {
      if (j->nparts) memcpy(np, j->parts, j->nparts * sizeof *np);
      dv__free(j->parts);
      j->parts = np;
      j->pcap = nc;
    }
  }
  if (j->nparts < j->pcap)
    j->parts[j->nparts++] = p;
  else
    j->lost++;
  pthread_mutex_unlock(&j->pm);
}

/* ========================================================================== */
/* The message                                                                 */
/* ========================================================================== */

static int hk_part_cmp(const void *a, const void *b) {
  const hkt_wd_part *x = a, *y = b;
  return x->at.block < y->at.block ? -1 : x->at.block > y->at.block;
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

static void hk_wd_describe(const hk_jview *v, const hkt_wd_part *pt, hk_sb *b) {
  const hk_xstop *p = &pt->at;
  unsigned bc[3];
  hk_coords(p->block, v->grid, bc);
  hk_sb_add(b, "block (%u,%u,%u): ", bc[0], bc[1], bc[2]);
  const char *file = p->m->name;
  for (int i = 0; i < pt->ng; i++) {
    const hk_wd_group *g = &pt->g[i];
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
          hk_coords((uint64_t)g->first, v->block, tc);
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
  if (pt->more) hk_sb_add(b, ", %d more thread%s elsewhere", pt->more, pt->more == 1 ? "" : "s");
}

/* After the launch ran (the finish hook): DV_ERR_KERNEL_TIMEOUT with the
 * message when the watchdog stopped it. */
static dv_status hkt_wd_result(void *self, void *data, const hk_job *l, char *msg, size_t cap) {
  const hkt_watchdog *wd = self;
  hkt_wjob *j = data;
  const hk_jview *v = hk_job_view(l);
  if (!atomic_load(&j->fired)) return DV_OK;
  uint64_t started = hk_job_started(l);
  uint64_t stopped = j->nparts + j->lost;
  if (!stopped && started == v->nblocks) return DV_OK; /* it ended as the watchdog fired */
  qsort(j->parts, j->nparts, sizeof *j->parts, hk_part_cmp);
  hk_sb b = {msg, cap, 0};
  if (cap) msg[0] = 0;
  hk_sb_add(&b, "kernel %s timed out after %g s (option kernel_timeout)", v->kern->name,
            wd->timeout);
  size_t shown = j->nparts < HK_WD_BLOCKS ? j->nparts : HK_WD_BLOCKS;
  for (size_t i = 0; i < shown; i++) {
    hk_sb_add(&b, i ? "; " : ": ");
    hk_wd_describe(v, &j->parts[i], &b);
  }
  if (stopped > shown)
    hk_sb_add(&b, "; %llu more block%s stopped", (unsigned long long)(stopped - shown),
              stopped - shown == 1 ? "" : "s");
  uint64_t finished = started > stopped ? started - stopped : 0;
  if (finished)
    hk_sb_add(&b, "; %llu block%s finished", (unsigned long long)finished,
              finished == 1 ? "" : "s");
  if (started < v->nblocks) {
    unsigned c[3];
    hk_coords(started, v->grid, c);
    uint64_t left = v->nblocks - started;
    if (left == 1)
      hk_sb_add(&b, "; block (%u,%u,%u) not started", c[0], c[1], c[2]);
    else
      hk_sb_add(&b, "; blocks (%u,%u,%u).. not started (%llu)", c[0], c[1], c[2],
                (unsigned long long)left);
  }
  return DV_ERR_KERNEL_TIMEOUT;
}

/* ========================================================================== */
/* Open and close                                                              */
/* ========================================================================== */

dv_status hkt_watchdog_open(const dv_backend_config *cfg, hk_state *k, hkt_watchdog *wd) {
  wd->timeout = cfg->kernel_timeout > 0 ? cfg->kernel_timeout : 0;
  pthread_mutex_init(&wd->m, NULL);
  pthread_condattr_t ca; /* the deadlines are CLOCK_MONOTONIC's */
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&wd->c, &ca);
  pthread_condattr_destroy(&ca);
  wd->inited = true;
  const hk_tool t = {.name = "watchdog", .self = wd, .start = hkt_wd_start,
                     .enter = hkt_wd_enter, .leave = hkt_wd_leave, .stopped = hkt_wd_stopped,
                     .stop = hkt_wd_stop, .finish = hkt_wd_result, .free = hkt_wjob_free};
  int at;
  return hk_tool_add(k, &t, &at);
}

void hkt_watchdog_close(hkt_watchdog *wd) {
  if (!wd->inited) return;
  pthread_mutex_lock(&wd->m);
  wd->quit = true;
  pthread_cond_broadcast(&wd->c);
  bool join = wd->started;
  pthread_mutex_unlock(&wd->m);
  if (join) pthread_join(wd->thread, NULL);
  wd->started = false;
  pthread_mutex_destroy(&wd->m);
  pthread_cond_destroy(&wd->c);
  wd->inited = false;
}
