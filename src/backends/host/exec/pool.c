/*
 * The helper threads of a context's kernel part and their whole protocol:
 * a launch with more than one block is posted (hk_pool_post) to up to
 * `want` helpers, each of which joins it (an executor of its own:
 * sched.c's hk_exec_here, hk_run_blocks) until its blocks are taken; the
 * launch's own thread runs blocks meanwhile and then waits until no helper
 * is still in it (hk_pool_done).  The pool's fields (hk_pool) and a job's
 * part of them (want, joined, active, jnext, listed) are written here only,
 * under hk_pool.m.
 */
#include <string.h>
#include <unistd.h>

#include "exec_internal.h"

void hk_pool_init(hk_state *k) {
  pthread_mutex_init(&k->pool.m, NULL);
  pthread_cond_init(&k->pool.work, NULL);
  pthread_cond_init(&k->pool.done, NULL);
}

void hk_pool_close(hk_state *k) {
  pthread_mutex_lock(&k->pool.m);
  k->pool.stop = true;
  pthread_cond_broadcast(&k->pool.work);
  pthread_mutex_unlock(&k->pool.m);
  for (int i = 0; i < k->pool.nhelpers; i++) pthread_join(k->pool.helpers[i], NULL);
  dv__free(k->pool.helpers);
  pthread_mutex_destroy(&k->pool.m);
  pthread_cond_destroy(&k->pool.work);
  pthread_cond_destroy(&k->pool.done);
}

int hk_pool_want(hk_state *k, uint64_t nblocks) {
  if (nblocks <= 1) return 0;
  pthread_mutex_lock(&k->pool.m);
  int want = nblocks - 1 < (uint64_t)k->pool.nhelpers ? (int)(nblocks - 1) : k->pool.nhelpers;
  pthread_mutex_unlock(&k->pool.m);
  return want;
}

bool hk_pool_post(hk_state *k, hk_job *l, int want) {
  bool posted = false;
  pthread_mutex_lock(&k->pool.m);
  if (k->pool.nhelpers > 0) {
    l->want = want;
    l->jnext = k->pool.jobs;
    k->pool.jobs = l;
    l->listed = true;
    posted = true;
    pthread_cond_broadcast(&k->pool.work);
  }
  pthread_mutex_unlock(&k->pool.m);
  return posted;
}

void hk_pool_done(hk_state *k, hk_job *l) {
  pthread_mutex_lock(&k->pool.m);
  if (l->listed) {
    for (hk_job **pp = &k->pool.jobs; *pp; pp = &(*pp)->jnext)
      if (*pp == l) {
        *pp = l->jnext;
        break;
      }
    l->listed = false;
  }
  while (l->active) pthread_cond_wait(&k->pool.done, &k->pool.m);
  pthread_mutex_unlock(&k->pool.m);
}

static void *hk_helper(void *arg) {
  hk_state *k = arg;
  pthread_mutex_lock(&k->pool.m);
  for (;;) {
    hk_job *job = NULL;
    while (!k->pool.stop) {
      for (hk_job **pp = &k->pool.jobs; *pp; pp = &(*pp)->jnext)
        if ((*pp)->joined < (*pp)->want) {
          job = *pp;
          if (++job->joined >= job->want) { /* full: off the list */
            *pp = job->jnext;
            job->listed = false;
          }
          break;
        }
      if (job) break;
      pthread_cond_wait(&k->pool.work, &k->pool.m);
    }
    if (!job) break;
    job->active++;
    pthread_mutex_unlock(&k->pool.m);
    hk_exec *ex = hk_exec_here(k);
    if (ex) {
      hk_run_blocks(ex, job);
    } else {
      pthread_mutex_lock(&job->em);
      if (!job->err) {
        job->err = DV_ERR_HOST_OUT_OF_MEMORY;
        hk_fmt(job->msg, sizeof job->msg, "kernel %s: no memory to set up a helper thread",
               job->v.kern->name);
      }
      pthread_mutex_unlock(&job->em);
      atomic_store(&job->abort, 1);
    }
    pthread_mutex_lock(&k->pool.m);
    if (--job->active == 0) pthread_cond_broadcast(&k->pool.done);
  }
  pthread_mutex_unlock(&k->pool.m);
  return NULL; /* its executor goes with the thread (hk_exec_dtor) */
}

/* Start the helpers once (one per extra core, at least one, so that blocks
 * can wait for each other even on one core).  False: no memory (try again
 * at the next launch). */
bool hk_pool_start(hk_state *k) {
  bool ok = true;
  pthread_mutex_lock(&k->pool.m);
  if (!k->pool.started && !k->pool.stop) {
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    int want = ncpu > 1 ? (int)ncpu - 1 : 1;
    if (want > 63) want = 63;
    k->pool.helpers = dv__calloc((size_t)want, sizeof *k->pool.helpers);
    ok = k->pool.helpers != NULL;
    k->pool.started = ok;
    for (int i = 0; ok && i < want; i++) {
      int e = pthread_create(&k->pool.helpers[i], NULL, hk_helper, k);
      if (e) {
        dv__log(DV_LOG_WARN, "host simulator: %d of %d kernel helper threads started: %s",
                k->pool.nhelpers, want, strerror(e));
        break;
      }
      k->pool.nhelpers++;
    }
  }
  pthread_mutex_unlock(&k->pool.m);
  return ok;
}

