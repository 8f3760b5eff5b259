/*
 * A copy team (copyteam.c): a few worker threads that share one host-memory
 * copy of rows (or one contiguous range) with the calling thread.  The
 * copy's bytes are cut into contiguous chunks (a few per thread); the
 * caller and every worker that is awake take chunks until none is left,
 * and the caller then waits for the workers that joined the copy (a worker
 * preempted inside it, where there are more threads than CPUs, holds the
 * caller up for a time slice).  Made for the CUDA
 * backend's pageable staging (one thread's memcpy is slower than a PCIe 5
 * DMA), usable by any layer: it calls nothing but pthreads and memcpy, so
 * it may run on a driver's callback thread.
 *
 * What it promises:
 *  - A copy never fails because of the team.  A team that could not be made
 *    (NULL), workers that could not be started, a team busy with another
 *    caller's copy, a copy smaller than the threshold, or a team of one
 *    thread: the caller copies alone, with memcpy.
 *  - Workers are started at the first copy that splits (none for a team
 *    never used), once; if fewer start than asked, the team works with those
 *    (none: it copies on the caller for good).  Nothing is allocated on a
 *    copy's path after that first one.
 *  - Several threads may copy through one team at once: one copy at a time
 *    has the workers; a caller that finds them busy copies alone at once
 *    (calls never wait for one another).
 *  - A split copy is never held up by a worker that is slow to wake: the
 *    caller copies what no worker took.
 *  - Waiting costs CPU for a short while only: after a copy a worker spins
 *    up to 200 us for the next one, then sleeps; a caller spins up to 100
 *    us for the chunks workers are copying, then sleeps (no one spins in a
 *    team of more threads than online CPUs).  An idle team's workers sleep.
 *  - dv__copy_team_destroy stops and joins the workers; no copy may be in
 *    progress on the team then.
 *  - Not fork-safe: a child has none of the workers, so it may copy
 *    through the team (every chunk falls to the caller) but must not
 *    destroy it (the join would wait for threads that are not there); the
 *    CUDA backend never touches its staging state in a child.
 *  - Whether to spin is decided from the online CPU count, not the
 *    affinity mask or a cgroup quota, and each team decides alone.
 */
#ifndef DV_COPYTEAM_H
#define DV_COPYTEAM_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct dv_copy_team dv_copy_team;

/* The most threads a team has, the calling thread included. */
#define DV_COPY_TEAM_MAX 64

/* A team of `threads` threads, the calling thread included (clamped to
 * 1..DV_COPY_TEAM_MAX; 1 copies on the caller alone), that splits copies of
 * at least min_bytes bytes.  Starts no thread.  NULL when it cannot be
 * allocated: every function below takes NULL as a team of one. */
dv_copy_team *dv__copy_team_create(int threads, size_t min_bytes);
/* Stop and join the workers, free the team (NULL: nothing). */
void dv__copy_team_destroy(dv_copy_team *t);

/* height rows of width bytes, from rows spitch bytes apart at src to rows
 * dpitch bytes apart at dst (pitches may be anything when height is 1).
 * Source and destination do not overlap.  Split when width * height >=
 * min_bytes: the bytes of all rows, laid end to end, are cut into 4
 * chunks per thread, multiples of 64 bytes, at most 256 KiB (a single row,
 * or a contiguous range, is cut by bytes; chunks may start and end
 * mid-row).  Returns when every byte is copied. */
void dv__copy_team_rows(dv_copy_team *t, void *dst, size_t dpitch, const void *src, size_t spitch,
                        size_t width, size_t height);
/* One contiguous range: dv__copy_team_rows with height 1. */
static inline void dv__copy_team_bytes(dv_copy_team *t, void *dst, const void *src, size_t n) {
  dv__copy_team_rows(t, dst, n, src, n, n, 1);
}

/* What a team did, for tests and reports. */
typedef struct dv_copy_team_info {
  int threads;          /* asked for, the caller included */
  int started;          /* workers running (threads - 1 when all started) */
  uint64_t split;       /* copies split over the team */
  uint64_t busy;        /* copies made alone because another call had the workers */
  uint64_t worker_chunks; /* chunks of split copies that workers copied */
} dv_copy_team_info;
void dv__copy_team_info(dv_copy_team *t, dv_copy_team_info *out);

/* Tests: at most n worker threads will be started, as though the next
 * pthread_create failed (n < 0: no limit).  Before the first split only. */
void dv__copy_team_test_spawn_limit(dv_copy_team *t, int n);
/* Tests: with on, a split copy waits until every worker has joined it
 * before the caller takes its first chunk, so that workers copy chunks of
 * every split copy however slowly they wake up. */
void dv__copy_team_test_lockstep(dv_copy_team *t, bool on);

#endif
