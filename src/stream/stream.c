/*
 * Streams and events: thin, reference-counted wrappers over the backend's,
 * released through the context's pending-deallocation queue (Numba queues
 * streams and events at 0 bytes).
 */
#include <stdio.h>
#include <string.h>

#include "stream.h"

_Thread_local unsigned dv__callback_depth;

__attribute__((cold, noinline)) dv_status dv__callback_refused(const char *what) {
  return dv__error(DV_ERR_MISUSE, "%s, called from inside a stream callback: a devarray call that reaches the "
                                  "device's driver is refused there on every backend (CUDA's rule: no driver "
                                  "call in a host function; it could also wait on the stream that runs the "
                                  "callback); signal another thread from the callback and make the call there",
                   what);
}

static dv_status dv__dtor_stream(dv_context *ctx, void *handle, void *aux) {
  (void)aux;
  dv_stream *s = handle;
  /* The layers above that keep a record per stream (the memory manager's,
   * through the memory layer) hear of its end through their keys. */
  dv_stream_state *st = ctx->streams;
  for (int k = 0; k < DV_STREAM_SLOTS; k++)
    if (st->keys[k].destroyed) st->keys[k].destroyed(ctx, s, dv__stream_slot(s, k), st->keys[k].arg);
  if (s->capture) { /* released while capturing: the capture ends, its graph goes */
    dv_bgraph *g = NULL;
    if (ctx->be->graph_end(ctx->bst, s->bs, &g) == DV_OK && g) ctx->be->graph_destroy(ctx->bst, g);
    dv__capture_free(s->capture);
    s->capture = NULL;
  }
  dv_status rc = ctx->be->stream_destroy(ctx->bst, s->bs);
  dv__handle_retire(s, sizeof *s, 0, ctx->handles_checked, NULL);
  return rc;
}

dv_status dv__stream_key_create(dv_context *ctx, dv_stream_slot_fn destroyed, void *arg, int *key) {
  dv_stream_state *st = ctx->streams;
  for (int k = 0; k < DV_STREAM_SLOTS; k++)
    if (!st->keys[k].used) {
      st->keys[k].used = true;
      st->keys[k].destroyed = destroyed;
      st->keys[k].arg = arg;
      *key = k;
      return DV_OK;
    }
  *key = -1;
  return dv__error(DV_ERR_NOT_SUPPORTED, "all %d stream slots are taken", DV_STREAM_SLOTS);
}

void dv__stream_key_delete(dv_context *ctx, int key) {
  if (key < 0 || key >= DV_STREAM_SLOTS) return;
  ctx->streams->keys[key].used = false;
  ctx->streams->keys[key].destroyed = NULL;
  ctx->streams->keys[key].arg = NULL;
}

static dv_status dv__dtor_event(dv_context *ctx, void *handle, void *aux) {
  (void)aux;
  dv_event *e = handle;
  dv_status rc = ctx->be->event_destroy(ctx->bst, e->be);
  dv__handle_retire(e, sizeof *e, 0, ctx->handles_checked, NULL);
  return rc;
}

dv_status dv_stream_create(dv_context *ctx, unsigned flags, dv_stream **out) {
  DV_CHECK_NULL(out);
  *out = NULL;
  DV_CHECK_NULL(ctx);
  DV_CHECK_HANDLE(ctx, DV_HANDLE_CONTEXT);
  DV_CHECK_NOT_IN_CALLBACK();
  if (flags & ~DV_STREAM_NON_BLOCKING)
    return dv__error(DV_ERR_INVALID_ARGUMENT, "unknown stream flags 0x%x", flags);
  dv_stream *s = dv__calloc(1, sizeof *s);
  if (!s) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate a stream");
  dv_status rc = ctx->be->stream_create(ctx->bst, flags, &s->bs);
  if (rc) {
    dv__free(s);
    return rc;
  }
  s->ctx = ctx;
  dv__handle_open(&s->hdr, DV_HANDLE_STREAM, ctx);
  atomic_store(&s->refs, 1);
  atomic_store(&s->user_refs, 1);
  atomic_fetch_add(&ctx->streams->live_streams, 1);
  *out = s;
  return DV_OK;
}

dv_stream *dv_stream_retain(dv_stream *s) {
  if (s && dv__handle_check(&s->hdr, DV_HANDLE_STREAM, __func__)) {
    dv__log(DV_LOG_ERROR, "%s", dv_last_error());
    return NULL;
  }
  if (s && !s->is_default) {
    atomic_fetch_add(&s->user_refs, 1);
    atomic_fetch_add(&s->refs, 1);
  }
  return s;
}

dv_stream *dv__stream_iretain(dv_stream *s) {
  if (s && !s->is_default) atomic_fetch_add(&s->refs, 1);
  return s;
}

void dv__stream_irelease(dv_stream *s) {
  if (!s || s->is_default || atomic_fetch_sub(&s->refs, 1) != 1) return;
  dv_status rc = dv__defer_free(s->ctx, dv__dtor_stream, s, NULL, 0);
  if (rc) dv__log(DV_LOG_ERROR, "releasing a stream: %s", dv_last_error());
}

void dv_stream_release(dv_stream *s) {
  if (!s) return;
  if (!dv__handle_live(&s->hdr, DV_HANDLE_STREAM)) {
    dv__handle_report(&s->hdr, DV_HANDLE_STREAM, __func__); /* a double release: nothing changes */
    return;
  }
  if (s->is_default) return;
  int u = atomic_load(&s->user_refs);
  do {
    if (u <= 0) { /* a release racing the last one */
      dv__handle_report(&s->hdr, DV_HANDLE_STREAM, __func__);
      return;
    }
  } while (!atomic_compare_exchange_weak(&s->user_refs, &u, u - 1));
  if (u == 1) {
    /* the user's last reference: from now on s is caught if used */
    dv__handle_close(&s->hdr, DV_HANDLE_STREAM);
    atomic_fetch_sub(&s->ctx->streams->live_streams, 1);
  }
  dv__stream_irelease(s);
}

dv_status dv_stream_synchronize(dv_stream *s) {
  DV_CHECK_NULL(s);
  DV_CHECK_HANDLE(s, DV_HANDLE_STREAM);
  DV_CHECK_NOT_IN_CALLBACK();
  if (s->capture) return dv__capture_refused("dv_stream_synchronize");
  return s->ctx->be->stream_sync(s->ctx->bst, s->bs);
}

dv_status dv_stream_query(dv_stream *s) {
  DV_CHECK_NULL(s);
  DV_CHECK_HANDLE(s, DV_HANDLE_STREAM);
  DV_CHECK_NOT_IN_CALLBACK();
  if (s->capture) return dv__capture_refused("dv_stream_query");
  return s->ctx->be->stream_query(s->ctx->bst, s->bs);
}

/* ---- the capture record (stream.h; the public API is graph.c's) -------------- */

__attribute__((cold, noinline)) dv_status dv__capture_refused(const char *what) {
  return dv__error(DV_ERR_MISUSE, "%s on a stream that is capturing a graph: it cannot be captured (nothing "
                                  "was queued or recorded, and the capture goes on)", what);
}

dv_status dv__capture_keep(dv_capture *c, void *obj, void (*release)(void *obj)) {
  if (c->nkeep == c->capkeep) {
    size_t ncap = c->capkeep ? c->capkeep * 2 : 16;
    dv_keep *n = dv__malloc(ncap * sizeof *n);
    if (!n) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "graph capture: no memory to keep what the graph uses");
    if (c->nkeep) memcpy(n, c->keep, c->nkeep * sizeof *n);
    dv__free(c->keep);
    c->keep = n;
    c->capkeep = ncap;
  }
  c->keep[c->nkeep++] = (dv_keep){obj, release};
  return DV_OK;
}

dv_status dv__capture_after(dv_capture *c, dv_stream *const *owners, size_t n) {
  for (size_t i = 0; i < n; i++) {
    dv_stream *o = owners[i];
    bool seen = !o;
    for (size_t j = 0; j < c->nafter && !seen; j++) seen = c->after[j] == o;
    if (seen) continue;
    if (c->nafter == c->capafter) {
      size_t ncap = c->capafter ? c->capafter * 2 : 4;
      dv_stream **m = dv__malloc(ncap * sizeof *m);
      if (!m) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "graph capture: no memory for its stream order");
      if (c->nafter) memcpy(m, c->after, c->nafter * sizeof *m);
      dv__free(c->after);
      c->after = m;
      c->capafter = ncap;
    }
    c->after[c->nafter++] = dv__stream_iretain(o);
  }
  return DV_OK;
}

void dv__capture_free(dv_capture *c) {
  if (!c) return;
  for (size_t i = c->nkeep; i-- > 0;) c->keep[i].release(c->keep[i].obj);
  for (size_t i = 0; i < c->nafter; i++) dv__stream_irelease(c->after[i]);
  dv__free(c->keep);
  dv__free(c->after);
  dv__free(c);
}

dv_status dv__stream_submit_captured(dv_context *ctx, dv_stream *stream, const dv__op *op) {
  if (dv__in_callback()) return dv__callback_refused("a copy, memset, launch or constant upload");
  if (op->flags & DV_OP_WAIT)
    return dv__capture_refused("a call whose operands live only until it returns (a copy between contexts, "
                               "an element or field access, a copy through a temporary)");
  dv_capture *c = stream->capture;
  if (c->oom || c->refuse) {
    const char *why = c->refuse;
    c->oom = false;
    c->refuse = NULL;
    if (why) return dv__capture_refused(why);
    return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "graph capture: no memory to keep the arrays the work uses");
  }
  dv_status rc = dv__capture_after(c, op->after, op->nafter);
  if (rc) return rc;
  rc = DV_ERR_NOT_SUPPORTED;
  if (op->copy) {
    op->copy->flags = 0;
    rc = ctx->be->copy_rect(ctx->bst, stream->bs, op->copy);
  }
  if (rc == DV_ERR_NOT_SUPPORTED && op->run) {
    dv__op_tally t;
    t.n = 0;
    rc = op->run(ctx, stream, stream->bs, 0, op, &t);
  }
  if (!rc) c->ops++;
  return rc;
}

typedef struct dv_user_cb {
  dv_stream *stream;
  dv_callback_fn fn;
  void *user;
} dv_user_cb;

static void dv__user_cb_run(dv_user_cb *c, dv_status status) {
  dv__callback_depth++; /* devarray calls in fn that reach the backend: refused (stream.h) */
  dv__stats_forget_thread(); /* so that submissions take dv__stream_admit, which refuses */
  c->fn(c->stream, status, c->user);
  dv__callback_depth--;
}

static void dv__user_cb(void *arg, dv_status status) {
  dv__user_cb_run(arg, status);
  dv__free(arg);
}

/* A callback in a graph: its record is the graph's (kept), run at each launch. */
static void dv__user_cb_kept(void *arg, dv_status status) { dv__user_cb_run(arg, status); }

static void dv__keep_free(void *p) { dv__free(p); }
static void dv__keep_event(void *e) { dv_event_release(e); }

/* dv_stream_add_callback on a capturing stream: a host node of the graph. */
static dv_status dv__capture_callback(dv_stream *s, dv_user_cb *c) {
  dv_status rc = dv__capture_keep(s->capture, c, dv__keep_free);
  if (rc) {
    dv__free(c);
    return rc;
  }
  rc = s->ctx->be->graph_host_fn(s->ctx->bst, s->bs, dv__user_cb_kept, c);
  if (rc) { /* not recorded: the record goes now */
    s->capture->nkeep--;
    dv__free(c);
    return rc;
  }
  s->capture->ops++;
  return DV_OK;
}

dv_status dv__stream_admit(dv_context *ctx, dv_thread_stats **ts) {
  *ts = NULL;
  if (dv__in_callback()) return dv__callback_refused("a copy, memset, launch or constant upload");
  dv_thread_stats *t = dv__stats_block(ctx);
  if (!t) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "no memory for the calling thread's copy counters");
  *ts = t;
  return DV_OK;
}

dv_status dv_stream_add_callback(dv_stream *s, dv_callback_fn fn, void *user) {
  DV_CHECK_NULL(s);
  DV_CHECK_HANDLE(s, DV_HANDLE_STREAM);
  DV_CHECK_NULL(fn);
  DV_CHECK_NOT_IN_CALLBACK();
  dv_user_cb *c = dv__malloc(sizeof *c);
  if (!c) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate a callback record");
  c->stream = s;
  c->fn = fn;
  c->user = user;
  if (s->capture) return dv__capture_callback(s, c);
  dv_status rc = s->ctx->be->stream_callback(s->ctx->bst, s->bs, dv__user_cb, c);
  if (rc) dv__free(c);
  return rc;
}

dv_status dv_stream_auto_sync_begin(dv_stream *s) {
  DV_CHECK_NULL(s);
  DV_CHECK_HANDLE(s, DV_HANDLE_STREAM);
  atomic_fetch_add(&s->auto_sync_depth, 1);
  return DV_OK;
}

dv_status dv_stream_auto_sync_end(dv_stream *s) {
  DV_CHECK_NULL(s);
  DV_CHECK_HANDLE(s, DV_HANDLE_STREAM);
  DV_CHECK_NOT_IN_CALLBACK();
  int d = atomic_load(&s->auto_sync_depth);
  do {
    if (d == 0) return dv__error(DV_ERR_MISUSE, "dv_stream_auto_sync_end without a matching begin");
  } while (!atomic_compare_exchange_weak(&s->auto_sync_depth, &d, d - 1));
  return dv_stream_synchronize(s);
}

dv_status dv_event_create(dv_context *ctx, unsigned flags, dv_event **out) {
  DV_CHECK_NULL(out);
  *out = NULL;
  DV_CHECK_NULL(ctx);
  DV_CHECK_HANDLE(ctx, DV_HANDLE_CONTEXT);
  DV_CHECK_NOT_IN_CALLBACK();
  if (flags & ~DV_EVENT_TIMING) return dv__error(DV_ERR_INVALID_ARGUMENT, "unknown event flags 0x%x", flags);
  dv_event *e = dv__calloc(1, sizeof *e);
  if (!e) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate an event");
  dv_status rc = ctx->be->event_create(ctx->bst, flags, &e->be);
  if (rc) {
    dv__free(e);
    return rc;
  }
  e->ctx = ctx;
  dv__handle_open(&e->hdr, DV_HANDLE_EVENT, ctx);
  e->flags = flags;
  atomic_init(&e->refs, 1);
  atomic_fetch_add(&ctx->streams->live_events, 1);
  *out = e;
  return DV_OK;
}

dv_event *dv_event_retain(dv_event *e) {
  if (e && dv__handle_check(&e->hdr, DV_HANDLE_EVENT, __func__)) {
    dv__log(DV_LOG_ERROR, "%s", dv_last_error());
    return NULL;
  }
  if (e) atomic_fetch_add(&e->refs, 1);
  return e;
}

void dv_event_release(dv_event *e) {
  if (!e) return;
  /* the header first: a released handle's other fields are not to be read */
  int r = dv__handle_live(&e->hdr, DV_HANDLE_EVENT) ? atomic_load(&e->refs) : 0;
  do {
    if (r <= 0) {
      dv__handle_report(&e->hdr, DV_HANDLE_EVENT, __func__); /* a double release: nothing changes */
      return;
    }
  } while (!atomic_compare_exchange_weak(&e->refs, &r, r - 1));
  if (r > 1) return;
  dv__handle_close(&e->hdr, DV_HANDLE_EVENT);
  dv_context *ctx = e->ctx;
  atomic_fetch_sub(&ctx->streams->live_events, 1);
  dv_status rc = dv__defer_free(ctx, dv__dtor_event, e, NULL, 0);
  if (rc) dv__log(DV_LOG_ERROR, "releasing an event: %s", dv_last_error());
}

static dv_status dv__same_ctx(dv_context *a, dv_context *b) {
  if (a != b) return dv__error(DV_ERR_BACKEND_MISMATCH, "the event and the stream belong to different contexts");
  return DV_OK;
}

dv_status dv_event_record(dv_event *e, dv_stream *s) {
  DV_CHECK_NULL(e);
  DV_CHECK_HANDLE(e, DV_HANDLE_EVENT);
  DV_CHECK_NOT_IN_CALLBACK();
  if (s) {
    DV_CHECK_HANDLE(s, DV_HANDLE_STREAM);
    dv_status rc = dv__same_ctx(e->ctx, s->ctx);
    if (rc) return rc;
  }
  if (s && s->capture) { /* an event record node: the graph keeps the event */
    dv_status rc = dv__capture_keep(s->capture, e, dv__keep_event);
    if (rc) return rc;
    atomic_fetch_add(&e->refs, 1);
    rc = e->ctx->be->event_record(e->ctx->bst, e->be, s->bs);
    if (rc) {
      s->capture->nkeep--;
      atomic_fetch_sub(&e->refs, 1);
      return rc;
    }
    s->capture->ops++;
    return DV_OK;
  }
  return e->ctx->be->event_record(e->ctx->bst, e->be, dv__bstream(e->ctx, s));
}

dv_status dv_stream_wait_event(dv_stream *s, dv_event *e) {
  DV_CHECK_NULL(s);
  DV_CHECK_NULL(e);
  DV_CHECK_HANDLE(s, DV_HANDLE_STREAM);
  DV_CHECK_HANDLE(e, DV_HANDLE_EVENT);
  DV_CHECK_NOT_IN_CALLBACK();
  dv_status rc = dv__same_ctx(e->ctx, s->ctx);
  if (rc) return rc;
  if (s->capture) /* one stream's work only: no dependency on work outside the capture */
    return dv__error(DV_ERR_NOT_SUPPORTED, "dv_stream_wait_event on a stream that is capturing a graph: a graph "
                                           "captures one stream's work, and cannot wait for other work (nothing "
                                           "was queued or recorded, and the capture goes on)");
  return e->ctx->be->event_wait(e->ctx->bst, s->bs, e->be);
}

dv_status dv_event_query(dv_event *e) {
  DV_CHECK_NULL(e);
  DV_CHECK_HANDLE(e, DV_HANDLE_EVENT);
  DV_CHECK_NOT_IN_CALLBACK();
  return e->ctx->be->event_query(e->ctx->bst, e->be);
}

dv_status dv_event_synchronize(dv_event *e) {
  DV_CHECK_NULL(e);
  DV_CHECK_HANDLE(e, DV_HANDLE_EVENT);
  DV_CHECK_NOT_IN_CALLBACK();
  return e->ctx->be->event_sync(e->ctx->bst, e->be);
}

dv_status dv_event_elapsed_ms(dv_event *start, dv_event *end, float *ms) {
  DV_CHECK_NULL(ms);
  *ms = 0;
  DV_CHECK_NULL(start);
  DV_CHECK_NULL(end);
  DV_CHECK_HANDLE(start, DV_HANDLE_EVENT);
  DV_CHECK_HANDLE(end, DV_HANDLE_EVENT);
  DV_CHECK_NOT_IN_CALLBACK();
  dv_status rc = dv__same_ctx(start->ctx, end->ctx);
  if (rc) return rc;
  return start->ctx->be->event_elapsed(start->ctx->bst, start->be, end->be, ms);
}

dv_status dv__streams_open(dv_context *ctx) {
  /* One block for the layer's state and the three records: the default
   * stream, and the legacy and per-thread streams, which are the default
   * one where the backend has no built-in streams. */
  dv_stream_state *st = dv__calloc(1, sizeof *st);
  if (!st) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate the default streams");
  dv_stream *s = st->std;
  dv_status rc = ctx->be->stream_create(ctx->bst, 0, &s[0].bs);
  if (rc) {
    dv__free(st);
    return rc;
  }
  s[0].ctx = ctx;
  s[0].is_default = true;
  dv__handle_init(&s[0].hdr, DV_HANDLE_STREAM);
  atomic_store(&s[0].refs, 1);
  s[1] = s[0];
  s[2] = s[0];
  if (dv__be_has(ctx->be, DV_BCAP_BUILTIN_STREAMS)) {
    ctx->be->stream_builtin(ctx->bst, 1, &s[1].bs);
    ctx->be->stream_builtin(ctx->bst, 2, &s[2].bs);
  }
  ctx->streams = st;
  return DV_OK;
}

void dv__streams_close(dv_context *ctx) {
  dv_stream_state *st = ctx->streams;
  if (!st) return;
  ctx->be->stream_destroy(ctx->bst, st->std[0].bs);
  dv__free(st);
  ctx->streams = NULL;
}

dv_status dv__sync_if_null(dv_context *ctx, dv_stream *s) {
  if (s) return DV_OK;
  return ctx->be->stream_sync(ctx->bst, ctx->streams->std[0].bs);
}

dv_status dv__stream_wait(dv_context *ctx, dv_stream *s) {
  return ctx->be->stream_sync(ctx->bst, dv__bstream(ctx, s));
}

dv_status dv__bstream_wait(dv_context *ctx, dv_bstream *bs) { return ctx->be->stream_sync(ctx->bst, bs); }

/* ---- the one submission path ------------------------------------------------ */

dv_status dv__stream_order_after(dv_context *ctx, dv_stream *used, dv_stream *const *owners, size_t n) {
  dv_bstream *ubs = dv__bstream(ctx, used);
  dv_bevent *ev = NULL;
  dv_status rc = DV_OK;
  bool host_wait = false;
  for (size_t i = 0; i < n && !rc; i++) {
    if (!owners[i]) continue;
    if (owners[i]->capture) { /* a wait there would go into its graph: the host waits for the work instead */
      host_wait = host_wait || owners[i]->bs != ubs;
      continue;
    }
    dv_bstream *obs = owners[i]->bs;
    bool seen = obs == ubs;
    for (size_t j = 0; j < i && !seen; j++) seen = owners[j] && owners[j]->bs == obs;
    if (seen) continue;
    if (!ev) { /* made only when some owner needs it */
      rc = ctx->be->event_create(ctx->bst, 0, &ev);
      if (rc) {
        ev = NULL;
        break;
      }
      rc = ctx->be->event_record(ctx->bst, ev, ubs);
      if (rc) break;
    }
    rc = ctx->be->event_wait(ctx->bst, obs, ev);
  }
  /* Destroying the event after the waits are queued is allowed: they keep
   * what they wait for. */
  if (ev) {
    dv_status r2 = ctx->be->event_destroy(ctx->bst, ev);
    if (r2) dv__log(DV_LOG_WARN, "destroying an ordering event failed: %s", dv_last_error());
  }
  if (!rc && host_wait) rc = ctx->be->stream_sync(ctx->bst, ubs);
  if (!rc) return DV_OK;
  char msg[512];
  snprintf(msg, sizeof msg, "%s", dv_last_error());
  dv_status src = ctx->be->stream_sync(ctx->bst, ubs);
  if (!src) {
    dv__log(DV_LOG_WARN, "ordering the streams of memory in use after work on another stream failed "
            "(%s); waited for that work instead", msg);
    return DV_OK;
  }
  return dv__error(rc, "work was queued, but neither ordering the streams of the memory it uses after "
                   "it (%s) nor waiting for it worked", msg);
}

dv_status dv_stream_native(dv_stream *s, void **handle) {
  DV_CHECK_NULL(handle);
  *handle = NULL;
  DV_CHECK_NULL(s);
  DV_CHECK_HANDLE(s, DV_HANDLE_STREAM);
  dv_context *ctx = s->ctx;
  if (!dv__be_has(ctx->be, DV_BCAP_NATIVE))
    return dv__error(DV_ERR_NOT_SUPPORTED, "the %s backend has no native streams", ctx->be->name);
  void *h = NULL;
  dv_status rc = ctx->be->native_stream(ctx->bst, s->bs, &h);
  if (rc) return rc;
  *handle = h;
  return DV_OK;
}
