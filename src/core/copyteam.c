/*
 * The copy team (copyteam.h says what it promises).  A caller that wins the
 * team (busy == false, under the lock) publishes the job (open), resets the
 * chunk counter, bumps the generation and wakes the workers that sleep;
 * then it takes chunks (an atomic counter) until none is left, closes the
 * job under the lock and waits until no worker is inside it.  A worker
 * joins a new generation only while it is open (under the lock, counting
 * itself in `active`), takes chunks the same way and counts itself out.
 * A worker that wakes after the job closed leaves it alone; one that
 * joined takes its chunks from this job's counter, which the next job
 * resets only after every joined worker has left.
 *
 * Why these choices:
 *  - A busy team is not waited for: the callers are the CUDA staging paths
 *    (a thread's copy at the call and a stream's callback thread), and a
 *    callback waiting for another thread's copy would hold up its stream
 *    for nothing a core of its own could not do meanwhile.
 *  - Chunks taken by whoever is awake, rather than one part per thread,
 *    because waking a sleeping thread is slow: on the machine the defaults
 *    were measured on (a 2-core KVM guest; docs/benchmarks.md, "Copy
 *    team") a copy that waited for its sleeping worker's part took about
 *    300 us longer (20 times memcpy's time at 256 KiB, 2.3 times at 4
 *    MiB); taking chunks, such copies take 0.8-1.2 times memcpy's time.
 *    Chunks are at most CHUNK_MAX, so a worker that joins late holds the
 *    caller up for one short chunk at most, and multiples of 64 bytes of
 *    the copy (cache lines, for an aligned destination), so two threads
 *    rarely write one line.
 *  - Both sides spin a while before they sleep, for the same reason: with
 *    both waits sleeping, a 256 KiB copy over 2 threads took 4.3 times
 *    memcpy's time (splitting paid from 16 MiB only); with the spins,
 *    back-to-back copies over 2 threads take 1.0 times memcpy's time at
 *    256-512 KiB and 0.76-0.85 from 1 MiB.  The caller spins at most
 *    SPIN_CALLER_NS for workers' chunks (it has nothing else to do); a
 *    worker spins at most SPIN_WORKER_NS for the next job (a staged copy's
 *    pieces come one after another, a DMA apart), then sleeps, so an idle
 *    team costs nothing.  Nobody spins in a team of more threads than
 *    online CPUs: a spinning thread there takes the CPU from one that has
 *    work (4 threads on 2 CPUs: a 256 KiB copy took 22 times memcpy's time
 *    spinning, 4 times without).
 *  - The first split starts the workers.  Whatever fails there (the worker
 *    records' allocation, every pthread_create) leaves the team copying on
 *    its callers for good, said once in the log; a partial start keeps the
 *    workers that did start.
 *  - Workers start with every signal blocked (the application's handlers
 *    run on its own threads) and are named "dv-copy".
 */
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "copyteam.h"
#include "core.h"
#include "memops.h"

#define SPIN_CALLER_NS 100000 /* 100 us */
#define SPIN_WORKER_NS 200000 /* 200 us */
#define CHUNKS_PER_THREAD 4
#define CHUNK_MAX ((size_t)256 << 10) /* 256 KiB */

typedef struct dv_copy_job {
  char *dst;
  const char *src;
  size_t dpitch, spitch, width, height, total;
  size_t chunk, nchunks; /* the rows' bytes laid end to end, in chunks (multiples of 64) */
} dv_copy_job;

typedef struct dv_copy_worker {
  dv_copy_team *team;
  pthread_t thread;
} dv_copy_worker;

struct dv_copy_team {
  pthread_mutex_t lock;
  pthread_cond_t work; /* a new generation, or stop */
  pthread_cond_t done; /* no worker left in the job; in lockstep, every worker joined */
  int threads;         /* asked for, the caller included */
  size_t min_bytes;
  int spawn_limit;     /* tests: workers that may start (-1: any) */
  bool lockstep;       /* tests: every worker joins every job before the caller copies */
  int state;           /* 0 not started, 1 workers running, -1 copying on the callers for good */
  int nworkers;
  dv_copy_worker *workers;
  bool busy;          /* a caller has the team */
  bool open;          /* its job may still be joined */
  atomic_bool stop;
  _Atomic uint64_t gen;
  atomic_size_t next; /* the job's next chunk */
  atomic_int active;  /* workers that joined the job and have not left it */
  int sleepers;       /* workers waiting on `work` */
  int joined;         /* workers that joined the job (for lockstep) */
  dv_copy_job job;
  uint64_t split, busy_count;
  _Atomic uint64_t worker_chunks;
  int64_t spin_caller_ns, spin_worker_ns; /* 0 when there are more threads than CPUs */
};

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ volatile("yield");
#endif
}

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Bytes [a, b) of the rows laid end to end. */
static void copy_range(const dv_copy_job *j, size_t a, size_t b) {
  if (a >= b) return;
  size_t y = a / j->width, x = a % j->width;
  while (a < b) {
    size_t n = j->width - x < b - a ? j->width - x : b - a;
    memcpy(j->dst + y * j->dpitch + x, j->src + y * j->spitch + x, n);
    a += n, y++, x = 0;
  }
}

/* Take chunks of the job until none is left; returns how many. */
static uint64_t run_chunks(dv_copy_team *t, const dv_copy_job *j) {
  uint64_t n = 0;
  for (size_t i; (i = atomic_fetch_add(&t->next, 1)) < j->nchunks; n++) {
    size_t a = i * j->chunk, left = j->total - a;
    copy_range(j, a, a + (left < j->chunk ? left : j->chunk));
  }
  return n;
}

/* The copy on the calling thread alone: memops' row loops (one memmove
 * when both sides are dense). */
static void copy_alone(char *dst, size_t dpitch, const char *src, size_t spitch, size_t width, size_t height) {
  dv__rect_copy(dst, dpitch, 0, src, spitch, 0, width, height, 1);
}

static void *worker_main(void *arg) {
  dv_copy_worker *w = arg;
  dv_copy_team *t = w->team;
  uint64_t seen = 0;
  for (;;) {
    /* A while for the next job without sleeping: a staged copy's pieces come one after another. */
    int64_t end = t->spin_worker_ns ? now_ns() + t->spin_worker_ns : 0;
    for (int i = 1; end && atomic_load(&t->gen) == seen && !atomic_load(&t->stop); i++) {
      cpu_relax();
      if (!(i & 63) && now_ns() > end) break;
    }
    pthread_mutex_lock(&t->lock);
    while (atomic_load(&t->gen) == seen && !atomic_load(&t->stop)) {
      t->sleepers++;
      pthread_cond_wait(&t->work, &t->lock);
      t->sleepers--;
    }
    if (atomic_load(&t->stop)) {
      pthread_mutex_unlock(&t->lock);
      break;
    }
    seen = atomic_load(&t->gen);
    if (!t->open) { /* woken too late: the caller copied it all */
      pthread_mutex_unlock(&t->lock);
      continue;
    }
    dv_copy_job job = t->job;
    atomic_fetch_add(&t->active, 1);
    if (++t->joined == t->nworkers && t->lockstep) pthread_cond_broadcast(&t->done);
    pthread_mutex_unlock(&t->lock);
    uint64_t n = run_chunks(t, &job);
    if (n) atomic_fetch_add(&t->worker_chunks, n);
    if (atomic_fetch_sub(&t->active, 1) == 1) {
      pthread_mutex_lock(&t->lock);
      pthread_cond_signal(&t->done);
      pthread_mutex_unlock(&t->lock);
    }
  }
  return NULL;
}

/* Under t->lock, once: allocate the worker records and start the workers. */
static void start_workers(dv_copy_team *t) {
  int want = t->threads - 1;
  if (t->spawn_limit >= 0 && t->spawn_limit < want) want = t->spawn_limit;
  t->workers = dv__calloc((size_t)(t->threads - 1), sizeof *t->workers);
  if (!t->workers) {
    t->state = -1;
    dv__log(DV_LOG_WARN, "copy team: cannot allocate %d worker records; copies run on the calling thread",
            t->threads - 1);
    return;
  }
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int e = 0;
  for (int i = 0; i < t->threads - 1; i++) {
    dv_copy_worker *w = &t->workers[i];
    w->team = t;
    e = i < want ? pthread_create(&w->thread, NULL, worker_main, w) : EAGAIN;
    if (e) break;
#if defined(__GLIBC__)
    pthread_setname_np(w->thread, "dv-copy");
#endif
    t->nworkers++;
  }
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (e)
    dv__log(DV_LOG_WARN, "copy team: %d of %d worker threads started (%s)%s", t->nworkers, t->threads - 1,
            strerror(e), t->nworkers ? "" : "; copies run on the calling thread");
  if (t->nworkers == 0) {
    dv__free(t->workers);
    t->workers = NULL;
    t->state = -1;
  } else {
    t->state = 1;
  }
}

dv_copy_team *dv__copy_team_create(int threads, size_t min_bytes) {
  dv_copy_team *t = dv__calloc(1, sizeof *t);
  if (!t) return NULL;
  if (threads < 1) threads = 1;
  if (threads > DV_COPY_TEAM_MAX) threads = DV_COPY_TEAM_MAX;
  pthread_mutex_init(&t->lock, NULL);
  pthread_cond_init(&t->work, NULL);
  pthread_cond_init(&t->done, NULL);
  t->threads = threads;
  t->min_bytes = min_bytes;
  t->spawn_limit = -1;
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  if (ncpu >= threads) t->spin_caller_ns = SPIN_CALLER_NS, t->spin_worker_ns = SPIN_WORKER_NS;
  return t;
}

void dv__copy_team_destroy(dv_copy_team *t) {
  if (!t) return;
  pthread_mutex_lock(&t->lock);
  atomic_store(&t->stop, true);
  pthread_cond_broadcast(&t->work);
  pthread_mutex_unlock(&t->lock);
  for (int i = 0; i < t->nworkers; i++) pthread_join(t->workers[i].thread, NULL);
  dv__free(t->workers);
  pthread_cond_destroy(&t->done);
  pthread_cond_destroy(&t->work);
  pthread_mutex_destroy(&t->lock);
  dv__free(t);
}

void dv__copy_team_rows(dv_copy_team *t, void *dst, size_t dpitch, const void *src, size_t spitch,
                        size_t width, size_t height) {
  if (!width || !height) return;
  /* width * height fits: the caller's rows are in memory.  Checked all the
   * same, since a wrapped product would only shrink the copy. */
  size_t total;
  if (__builtin_mul_overflow(width, height, &total) || !t || t->threads < 2 || total < t->min_bytes) {
    copy_alone(dst, dpitch, src, spitch, width, height);
    return;
  }
  pthread_mutex_lock(&t->lock);
  if (t->state == 0 && !t->busy) start_workers(t);
  if (t->busy || t->state != 1) {
    if (t->busy) t->busy_count++;
    pthread_mutex_unlock(&t->lock);
    copy_alone(dst, dpitch, src, spitch, width, height);
    return;
  }
  t->busy = true;
  /* CHUNKS_PER_THREAD chunks a thread, a multiple of 64 bytes, at most CHUNK_MAX. */
  size_t parts = (size_t)(t->nworkers + 1) * CHUNKS_PER_THREAD;
  size_t chunk = ((total / parts + (total % parts != 0)) + 63) & ~(size_t)63;
  if (chunk > CHUNK_MAX) chunk = CHUNK_MAX;
  dv_copy_job job = {dst, src, dpitch, spitch, width, height, total, chunk, total / chunk + (total % chunk != 0)};
  t->job = job;
  t->open = true;
  t->joined = 0;
  atomic_store(&t->next, 0);
  atomic_fetch_add(&t->gen, 1);
  t->split++;
  if (t->sleepers) pthread_cond_broadcast(&t->work);
  while (t->lockstep && t->joined < t->nworkers) pthread_cond_wait(&t->done, &t->lock);
  pthread_mutex_unlock(&t->lock);
  run_chunks(t, &job);
  /* Every chunk is taken: close the job to workers still waking up, and
   * wait for those copying a chunk they took. */
  pthread_mutex_lock(&t->lock);
  t->open = false;
  pthread_mutex_unlock(&t->lock);
  int64_t end = t->spin_caller_ns ? now_ns() + t->spin_caller_ns : 0;
  for (int i = 1; end && atomic_load(&t->active) != 0; i++) {
    cpu_relax();
    if (!(i & 63) && now_ns() > end) break;
  }
  pthread_mutex_lock(&t->lock);
  while (atomic_load(&t->active) != 0) pthread_cond_wait(&t->done, &t->lock);
  t->busy = false;
  pthread_mutex_unlock(&t->lock);
}

void dv__copy_team_info(dv_copy_team *t, dv_copy_team_info *out) {
  memset(out, 0, sizeof *out);
  if (!t) {
    out->threads = 1;
    return;
  }
  pthread_mutex_lock(&t->lock);
  out->threads = t->threads;
  out->started = t->nworkers;
  out->split = t->split;
  out->busy = t->busy_count;
  out->worker_chunks = atomic_load(&t->worker_chunks);
  pthread_mutex_unlock(&t->lock);
}

void dv__copy_team_test_spawn_limit(dv_copy_team *t, int n) {
  if (!t) return;
  pthread_mutex_lock(&t->lock);
  t->spawn_limit = n;
  pthread_mutex_unlock(&t->lock);
}

void dv__copy_team_test_lockstep(dv_copy_team *t, bool on) {
  if (!t) return;
  pthread_mutex_lock(&t->lock);
  t->lockstep = on;
  pthread_mutex_unlock(&t->lock);
}
