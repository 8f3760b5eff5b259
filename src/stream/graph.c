/*
 * Graphs (devarray.h, "Graphs: capture and replay"): the public API over
 * the backend's GRAPHS methods and the stream layer's capture record
 * (stream.h).  A graph owns the backend's graph and the capture record (what
 * its work keeps alive, the streams to order after each launch); an
 * executable owns the backend's executable and a reference to its graph.
 */
#include "stream.h"

#define DV_GRAPH_MAGIC 0x68707267u      /* "grph" */
#define DV_GRAPH_EXEC_MAGIC 0x63657867u /* "gxec" */

struct dv_graph {
  uint32_t magic;
  _Atomic int refs; /* the user's and one per executable */
  _Atomic bool launched;
  dv_context *ctx;
  dv_bgraph *bg;
  dv_capture *cap;
};

struct dv_graph_exec {
  uint32_t magic;
  dv_graph *g;
  dv_bgexec *be;
};

static dv_status dv__check_graph(const dv_graph *g, const char *fn) {
  if (!g) return dv__error(DV_ERR_NULL_ARGUMENT, "%s: graph is NULL", fn);
  if (g->magic != DV_GRAPH_MAGIC) return dv__error(DV_ERR_MISUSE, "%s: not a live graph", fn);
  return DV_OK;
}

static dv_status dv__check_capture_stream(dv_stream *s, const char *fn) {
  DV_CHECK_NULL(s);
  DV_CHECK_HANDLE(s, DV_HANDLE_STREAM);
  if (dv__in_callback()) return dv__callback_refused(fn);
  if (s->is_default)
    return dv__error(
        DV_ERR_INVALID_ARGUMENT,
        "%s: the context's default, legacy and per-thread streams cannot capture (devarray's "
        "synchronous calls use them); capture on a stream made by dv_stream_create",
        fn);
  if (!dv__be_has(s->ctx->be, DV_BCAP_GRAPHS))
    return dv__error(DV_ERR_NOT_SUPPORTED,
                     "%s: the %s backend has no graphs here (its driver lacks stream "
                     "capture)",
                     fn, s->ctx->be->name);
  return DV_OK;
}

dv_status dv_graph_capture_begin(dv_stream *s) {
  dv_status rc = dv__check_capture_stream(s, __func__);
  if (rc) return rc;
  if (s->capture)
    return dv__error(DV_ERR_MISUSE, "dv_graph_capture_begin: the stream is capturing already");
  dv_capture *c = dv__calloc(1, sizeof *c);
  if (!c)
    return dv__error(DV_ERR_HOST_OUT_OF_MEMORY,
                     "dv_graph_capture_begin: no memory for the capture");
  dv_context *ctx = s->ctx;
  rc = ctx->be->graph_begin(ctx->bst, s->bs);
  if (rc) {
    dv__free(c);
    return rc;
  }
  s->capture = c;
  return DV_OK;
}

dv_status dv_graph_capture_end(dv_stream *s, dv_graph **out) {
  DV_CHECK_NULL(out);
  *out = NULL;
  dv_status rc = dv__check_capture_stream(s, __func__);
  if (rc) return rc;
  dv_capture *c = s->capture;
  if (!c) return dv__error(DV_ERR_MISUSE, "dv_graph_capture_end: the stream is not capturing");
  dv_context *ctx = s->ctx;
  s->capture = NULL; /* the capture ends whatever happens next */
  dv_bgraph *bg = NULL;
  rc = ctx->be->graph_end(ctx->bst, s->bs, &bg);
  dv_graph *g = NULL;
  if (!rc && !(g = dv__calloc(1, sizeof *g)))
    rc = dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "dv_graph_capture_end: no memory for the graph");
  if (rc) {
    if (bg) ctx->be->graph_destroy(ctx->bst, bg);
    dv__capture_free(c);
    return rc;
  }
  g->magic = DV_GRAPH_MAGIC;
  atomic_init(&g->refs, 1);
  atomic_init(&g->launched, false);
  g->ctx = ctx;
  g->bg = bg;
  g->cap = c;
  atomic_fetch_add(&ctx->streams->live_graphs, 1); /* the context is BUSY while it lives */
  *out = g;
  return DV_OK;
}

dv_status dv_graph_work_count(const dv_graph *g, size_t *n) {
  DV_CHECK_NULL(n);
  *n = 0;
  dv_status rc = dv__check_graph(g, __func__);
  if (rc) return rc;
  *n = g->cap->ops;
  return DV_OK;
}

dv_graph *dv_graph_retain(dv_graph *g) {
  if (!g) return NULL;
  if (dv__check_graph(g, __func__)) {
    dv__log(DV_LOG_ERROR, "%s", dv_last_error());
    return NULL;
  }
  atomic_fetch_add(&g->refs, 1);
  return g;
}

static dv_status dv__graph_unref(dv_graph *g) {
  if (atomic_fetch_sub(&g->refs, 1) != 1) return DV_OK;
  dv_context *ctx = g->ctx;
  /* A launch's host nodes run the callbacks' records: every launch
   * completes before they go (and the memory the graph kept). */
  dv_status rc = atomic_load(&g->launched) ? dv__bstream_wait(ctx, NULL) : DV_OK;
  dv_status r2 = ctx->be->graph_destroy(ctx->bst, g->bg);
  dv__capture_free(g->cap);
  g->magic = 0;
  dv__free(g);
  atomic_fetch_sub(&ctx->streams->live_graphs, 1);
  return rc ? rc : r2;
}

dv_status dv_graph_release(dv_graph *g) {
  if (!g) return DV_OK;
  dv_status rc = dv__check_graph(g, __func__);
  if (rc) return rc;
  if (dv__in_callback()) return dv__callback_refused(__func__);
  return dv__graph_unref(g);
}

dv_status dv_graph_instantiate(dv_graph *g, dv_graph_exec **out) {
  DV_CHECK_NULL(out);
  *out = NULL;
  dv_status rc = dv__check_graph(g, __func__);
  if (rc) return rc;
  if (dv__in_callback()) return dv__callback_refused(__func__);
  dv_graph_exec *e = dv__calloc(1, sizeof *e);
  if (!e) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "dv_graph_instantiate: no memory");
  dv_context *ctx = g->ctx;
  rc = ctx->be->graph_instantiate(ctx->bst, g->bg, &e->be);
  if (rc) {
    dv__free(e);
    return rc;
  }
  e->magic = DV_GRAPH_EXEC_MAGIC;
  e->g = g;
  atomic_fetch_add(&g->refs, 1);
  *out = e;
  return DV_OK;
}

dv_status dv_graph_launch(dv_graph_exec *e, dv_stream *s) {
  if (!e) return dv__error(DV_ERR_NULL_ARGUMENT, "dv_graph_launch: exec is NULL");
  if (e->magic != DV_GRAPH_EXEC_MAGIC)
    return dv__error(DV_ERR_MISUSE, "dv_graph_launch: not a live executable graph");
  if (dv__in_callback()) return dv__callback_refused(__func__);
  dv_graph *g = e->g;
  dv_context *ctx = g->ctx;
  if (s) {
    DV_CHECK_HANDLE(s, DV_HANDLE_STREAM);
    if (s->ctx != ctx)
      return dv__error(DV_ERR_BACKEND_MISMATCH,
                       "dv_graph_launch: the stream belongs to another context than the graph");
    if (s->capture)
      return dv__error(DV_ERR_MISUSE,
                       "dv_graph_launch: the stream is capturing a graph (a graph is not launched "
                       "inside another)");
  }
  atomic_store(&g->launched, true);
  dv_bstream *bs = dv__bstream(ctx, s);
  dv_status rc = ctx->be->graph_launch(ctx->bst, e->be, bs);
  dv_status r2 = DV_OK;
  if (!s)
    r2 = dv__bstream_wait(ctx, bs);
  else if (g->cap->nafter)
    r2 = dv__stream_order_after(ctx, s, g->cap->after, g->cap->nafter);
  return rc ? rc : r2;
}

dv_status dv_graph_exec_destroy(dv_graph_exec *e) {
  if (!e) return DV_OK;
  if (e->magic != DV_GRAPH_EXEC_MAGIC)
    return dv__error(DV_ERR_MISUSE, "dv_graph_exec_destroy: not a live executable graph");
  if (dv__in_callback()) return dv__callback_refused(__func__);
  dv_graph *g = e->g;
  dv_status rc = g->ctx->be->graph_exec_destroy(g->ctx->bst, e->be);
  e->magic = 0;
  dv__free(e);
  dv_status r2 = dv__graph_unref(g);
  return rc ? rc : r2;
}
