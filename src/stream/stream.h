/* Streams and events (stream.c): the layer above the backends. */
#ifndef DV_STREAM_H
#define DV_STREAM_H

#include "../backends/backend.h"
#include "../core/core.h"

struct dv_stream {
  _Atomic int refs;      /* every reference: the user's and the library's */
  _Atomic int user_refs; /* the user's (they make the context BUSY) */
  dv_context *ctx;
  dv_bstream *bs;
  bool is_default;
  _Atomic int auto_sync_depth;
  void *_Atomic pool_slot; /* the pool's per-stream record, set once */
};

struct dv_event {
  dv_context *ctx;
  dv_bevent *be;
  unsigned flags;
};

/* The backend stream to use for `s` (NULL: the default stream). */
static inline dv_bstream *dv__bstream(dv_context *ctx, dv_stream *s) {
  return s ? s->bs : ctx->default_stream->bs;
}

/* The context's default stream and the driver's built-in ones (legacy,
 * per-thread; the default stream stands in where the backend has none). */
dv_status dv__streams_open(dv_context *ctx);
void dv__streams_close(dv_context *ctx);

/* Internal stream references (an allocation made for a stream keeps it). */
dv_stream *dv__stream_iretain(dv_stream *s);
void dv__stream_irelease(dv_stream *s);

/* Wait for the default stream after queuing synchronous work (s NULL). */
dv_status dv__sync_if_null(dv_context *ctx, dv_stream *s);

#endif
