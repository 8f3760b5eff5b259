/*
 * The CUDA family's staging threads (fam_stager.c, issue 36): the host side
 * of an asynchronous pageable copy -- its rows into a pinned staging buffer,
 * or out of one -- done by a thread of devarray's own per stream, which
 * waits on events, instead of by stream callbacks, which a driver may run
 * one at a time for the whole process (a user's slow callback on another
 * stream would hold the copy up).  The stream waits for the thread with a
 * stream memory operation (cuStreamWaitValue64 on a word of mapped pinned
 * memory the thread writes), so later work on the stream still runs after
 * the host side.  Used where the device has 64-bit stream memory
 * operations and maps host memory (dv__cu_stager_on); elsewhere, and when
 * a stream's thread cannot be made, the copy paths use callbacks as before.
 *
 * Jobs of one stream run in the order queued; a stream's submissions are
 * serialized by dv__cu_stager_begin/end (a job's position in the thread's
 * queue and its wait on the stream must agree, or the two would wait for
 * each other).
 */
#ifndef DV_CUDAFAM_STAGER_H
#define DV_CUDAFAM_STAGER_H

#include "fam_stagebuf.h"

typedef struct cu_stager cu_stager;

/* At open, after the staging buffers: whether this context uses staging
 * threads (the driver's answer), and the list they are kept in.  Close
 * joins every thread (after the context was synchronized), first. */
dv_status dv__cu_stagers_open(cu_state *st);
void dv__cu_stagers_close(cu_state *st);
bool dv__cu_stager_on(const cu_state *st);
/* A stream goes: its thread finishes what is queued, then ends (joined by
 * a later detach or by close). */
void dv__cu_stager_detach(cu_state *st, dv_bstream *s);

/* The stream's thread (made at first use), its submissions locked until
 * dv__cu_stager_end; NULL when it cannot be made (the caller uses
 * callbacks).  s's stager is shared by every thread's per-thread stream. */
cu_stager *dv__cu_stager_begin(cu_state *st, dv_bstream *s);
void dv__cu_stager_end(cu_stager *t);

/* Host to device, the stream busy at the call: an event recorded on the
 * stream now, which the fills of this copy wait for (*pre; 0 on failure:
 * the status says). */
dv_status dv__cu_stager_mark(cu_state *st, dv_bstream *s, cu_stager *t, void **pre);
/* Fill b with k rows of w bytes from host (rows hpitch apart) once *pre is
 * done, then let the stream go on (it waits here for the fill): the DMA
 * from b is queued after this returns DV_OK. */
dv_status dv__cu_stager_fill(cu_state *st, dv_bstream *s, cu_stager *t, void *pre, cu_stage *b,
                             char *host, size_t hpitch, size_t w, size_t k);
/* b comes back to the free list once the stream is past what is queued
 * now (its DMA); recorded: the buffer's event was recorded after it, else
 * (the record failed, or nothing was queued) as soon as the jobs before
 * it are done. */
void dv__cu_stager_put_back(cu_stager *t, cu_stage *b, bool recorded);
/* Device to host: once b's event (recorded after its DMA; not recorded:
 * the DMA is done) completes, its rows go out to host and b comes back.
 * dv__cu_stager_order then makes the stream wait for every drain queued so
 * far (or, when it cannot, waits for them here). */
dv_status dv__cu_stager_drain(cu_stager *t, cu_stage *b, bool recorded, char *host, size_t hpitch,
                              size_t w, size_t k);
dv_status dv__cu_stager_order(cu_state *st, dv_bstream *s, cu_stager *t);
/* The buffer's event, made at first use (the calling thread's). */
dv_status dv__cu_stage_event(cu_state *st, cu_stage *b);

#endif
