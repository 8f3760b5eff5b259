/*
 * The CUDA family's staging buffers (fam_stagebuf.c): the pinned host
 * buffers pageable copies go through, kept on a free list per context
 * within the option staging_limit, and the copy team that moves the host
 * rows.  Used by the copy paths (fam_staging.c) and the staging threads
 * (fam_stager.c); the state is reference counted, so a piece in flight
 * keeps it after its context closed.
 */
#ifndef DV_CUDAFAM_STAGEBUF_H
#define DV_CUDAFAM_STAGEBUF_H

#include "../../core/copyteam.h"
#include "fam.h"

typedef struct cu_stage {
  struct cu_stage *next;
  void *ptr;
  size_t size;
  dv_CUevent ev; /* the piece's DMA is done (made at first use; the buffer's holder records it) */
  bool over;     /* taken beyond the limit by a synchronous copy: freed when it comes back */
  bool wait_ev;  /* a staging thread gives it back once ev completes (fam_stager.c) */
} cu_stage;

/* Open (the options staging_chunk, staging_limit, staging_threads,
 * staging_thread_min) and the context's last reference (close): idle
 * buffers freed with the driver. */
dv_status dv__cu_stagebuf_open(cu_state *st, const dv_backend_config *cfg);
void dv__cu_stagebuf_close(cu_state *st);
/* A reference for a piece in flight, and its release (driver_ok: the caller
 * may call the driver, never true in a stream callback). */
void dv__cu_stagebuf_ref(dv_cu_staging *g);
void dv__cu_stagebuf_unref(dv_cu_staging *g, bool driver_ok);

/* Every pageable copy starts here: idle buffers beyond two chunks' worth go. */
void dv__cu_stage_trim(dv_cu_staging *g);
/* A buffer of at least n bytes (n <= the chunk): an idle one, else a new
 * one while the limit allows.  At the limit an asynchronous copy (sync
 * false) waits for a buffer to come back; a synchronous one gets
 * DV_ERR_NOT_READY when `own` of its pieces are in flight (it finishes one
 * and asks again), else a buffer beyond the limit. */
dv_status dv__cu_stage_get(dv_cu_staging *g, size_t n, bool sync, int own, cu_stage **out);
/* Back to the free list; with driver_ok one beyond the limit is freed. */
void dv__cu_stage_put(dv_cu_staging *g, cu_stage *b, bool driver_ok);
/* The copy team of the host rows (NULL: one thread) and the chunk size. */
dv_copy_team *dv__cu_stage_team(dv_cu_staging *g);
size_t dv__cu_stage_chunk(dv_cu_staging *g);
const dv_cu_driver *dv__cu_stage_driver(dv_cu_staging *g);

#endif
