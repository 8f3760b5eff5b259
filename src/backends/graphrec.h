/*
 * The command recorder (graphrec.c): graphs for backends whose driver has
 * none (the host simulator, OpenCL).  While a stream captures, each of its
 * stream methods hands its work to the recorder instead of queuing it:
 * the recorder keeps the backend call and a copy of its arguments (a
 * launch's argument bytes, a constant write's host bytes), nothing else.
 * A launch of the instantiated graph calls the same methods again, in
 * order, on the target stream: the planning, checking and lowering the
 * layers above did at capture are not done again.
 *
 * The seam's rule for a backend that uses it: `dv_rec *rec` is the first
 * member of its struct dv_bstream (NULL: not capturing), and each stream
 * method tests DV_REC_HOOK before it queues anything (one load and a
 * branch when not capturing; a synchronous path the stream layer never
 * uses under capture may come first).  stream_callback, stream_sync and stream_query on a
 * capturing stream are refused (dv__rec_refuse): a host callback is
 * captured through graph_host_fn, which the upper layer uses.
 *
 * Threads: a capturing stream is used by one thread at a time (the stream
 * layer's rule for captures); graphs and executable graphs are immutable
 * once made, so launches may come from several threads.
 */
#ifndef DV_GRAPHREC_H
#define DV_GRAPHREC_H

#include "backend.h"

typedef struct dv_rec dv_rec;

/* The recorder of stream s (NULL: s does not capture), read through the
 * first member of the backend's struct dv_bstream. */
static inline dv_rec *dv__rec_of(const dv_bstream *s) {
  return s ? *(dv_rec *const *)(const void *)s : NULL;
}
#define DV_REC_HOOK(s, call)                            \
  do {                                                  \
    dv_rec *rec_ = dv__rec_of(s);                       \
    if (__builtin_expect(rec_ != NULL, 0)) return call; \
  } while (0)

/* The backend's methods a launch of the graph calls: the ones that queue
 * the work (not the recording wrappers: the target stream does not
 * capture).  copy_peer may be NULL (no peer copies are recorded then). */
typedef struct dv_rec_ops {
  dv_status (*copy_rect)(void *state, dv_bstream *s, const dv_rect *r);
  dv_status (*copy_strided)(void *state, dv_bstream *s, const dv_strided *c);
  dv_status (*copy_peer)(void *state, dv_bstream *s, dv_memref dst, void *src_state, dv_memref src,
                         size_t bytes);
  dv_status (*memset)(void *state, dv_bstream *s, dv_memref dst, int value, size_t bytes);
  dv_status (*launch)(void *state, dv_bstream *s, dv_bkernel *k, const dv_blaunch *l);
  dv_status (*constant_write)(void *state, dv_bmodule *m, dv_bstream *s, size_t offset,
                              dv_memref src, size_t bytes);
  dv_status (*event_record)(void *state, dv_bevent *e, dv_bstream *s);
  dv_status (*event_wait)(void *state, dv_bstream *s, dv_bevent *e);
  dv_status (*stream_callback)(void *state, dv_bstream *s, dv_bcallback_fn fn, void *user);
} dv_rec_ops;

/* Start recording on s (ops, state: the backend's methods and its context
 * state, for the launches).  DV_ERR_MISUSE when s captures already. */
dv_status dv__rec_begin(const dv_rec_ops *ops, void *state, dv_bstream *s);
/* Stop: *out the graph of what was recorded (an empty one is a graph). */
dv_status dv__rec_end(dv_bstream *s, dv_bgraph **out);

dv_status dv__rec_copy_rect(dv_rec *r, const dv_rect *x);
dv_status dv__rec_copy_strided(dv_rec *r, const dv_strided *x);
dv_status dv__rec_copy_peer(dv_rec *r, dv_memref dst, void *src_state, dv_memref src, size_t bytes);
dv_status dv__rec_memset(dv_rec *r, dv_memref dst, int value, size_t bytes);
dv_status dv__rec_launch(dv_rec *r, dv_bkernel *k, const dv_blaunch *l);
dv_status dv__rec_constant_write(dv_rec *r, dv_bmodule *m, size_t offset, dv_memref src,
                                 size_t bytes);
dv_status dv__rec_event_record(dv_rec *r, dv_bevent *e);
dv_status dv__rec_event_wait(dv_rec *r, dv_bevent *e);
dv_status dv__rec_host_fn(dv_rec *r, dv_bcallback_fn fn, void *user);
/* DV_ERR_MISUSE: `what` cannot be captured (nothing recorded). */
dv_status dv__rec_refuse(dv_rec *r, const char *what);

dv_status dv__rec_instantiate(dv_bgraph *g, dv_bgexec **out);
dv_status dv__rec_replay(dv_bgexec *e, dv_bstream *s);
dv_status dv__rec_exec_destroy(dv_bgexec *e);
dv_status dv__rec_graph_destroy(dv_bgraph *g);

#endif
