/* The command recorder: graphs for the host simulator and OpenCL
 * (graphrec.h).  A graph is an array of commands, each a backend stream
 * method and a copy of its arguments; an executable graph is its own copy
 * (the graph may be destroyed first, as with CUDA's), replayed in order. */
#include <string.h>

#include "../core/core.h"
#include "graphrec.h"

typedef enum {
  REC_RECT,
  REC_STRIDED,
  REC_PEER,
  REC_MEMSET,
  REC_LAUNCH,
  REC_CONSTANT,
  REC_RECORD,
  REC_WAIT,
  REC_HOST_FN
} rec_kind;

typedef struct rec_cmd {
  rec_kind kind;
  union {
    dv_rect rect;
    dv_strided strided;
    struct {
      dv_memref dst, src;
      void *src_state;
      size_t bytes;
    } peer;
    struct {
      dv_memref dst;
      int value;
      size_t bytes;
    } memset;
    struct {
      dv_bkernel *k;
      dv_blaunch l; /* l.args: this command's own array (args), every value in blob */
    } launch;
    struct {
      dv_bmodule *m;
      size_t offset, bytes;
      dv_memref src;
    } constant;
    dv_bevent *event;
    struct {
      dv_bcallback_fn fn;
      void *user;
    } host_fn;
  } u;
  dv_barg *args;       /* REC_LAUNCH: nargs entries */
  unsigned char *blob; /* the bytes the command's pointers point into (NULL: none) */
  size_t blob_bytes;
} rec_cmd;

/* A capture in progress, a captured graph and an executable one share the
 * layout: the backend, its state and the commands. */
typedef struct rec_list {
  const dv_rec_ops *be;
  void *state;
  rec_cmd *cmds;
  size_t n, cap;
} rec_list;

struct dv_rec {
  rec_list list;
  dv_bstream *s;
};
struct dv_bgraph {
  rec_list list;
};
struct dv_bgexec {
  rec_list list;
};

static void cmd_free(rec_cmd *c) {
  dv__free(c->args);
  dv__free(c->blob);
}

static void list_free(rec_list *l) {
  for (size_t i = 0; i < l->n; i++) cmd_free(&l->cmds[i]);
  dv__free(l->cmds);
  l->cmds = NULL;
  l->n = l->cap = 0;
}

/* A new zeroed command at the end of l (NULL: no memory, nothing added). */
static rec_cmd *push(rec_list *l, rec_kind kind) {
  if (l->n == l->cap) {
    size_t ncap = l->cap ? l->cap * 2 : 16;
    rec_cmd *n = dv__malloc(ncap * sizeof *n);
    if (!n) return NULL;
    if (l->n) memcpy(n, l->cmds, l->n * sizeof *n);
    dv__free(l->cmds);
    l->cmds = n;
    l->cap = ncap;
  }
  rec_cmd *c = &l->cmds[l->n++];
  memset(c, 0, sizeof *c);
  c->kind = kind;
  return c;
}

static dv_status oom(void) {
  return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "graph capture: no memory for a command's record");
}

/* c, the last command of l, could not be completed: dropped. */
static dv_status no_memory(rec_list *l, rec_cmd *c) {
  cmd_free(c);
  l->n--;
  return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "graph capture: no memory for a command's record");
}

dv_status dv__rec_begin(const dv_rec_ops *be, void *state, dv_bstream *s) {
  if (!s) return dv__error(DV_ERR_NULL_ARGUMENT, "graph capture needs a stream");
  if (dv__rec_of(s)) return dv__error(DV_ERR_MISUSE, "the stream is capturing a graph already");
  dv_rec *r = dv__calloc(1, sizeof *r);
  if (!r) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "graph capture: no memory for its record");
  r->list.be = be;
  r->list.state = state;
  r->s = s;
  *(dv_rec **)(void *)s = r;
  return DV_OK;
}

dv_status dv__rec_end(dv_bstream *s, dv_bgraph **out) {
  *out = NULL;
  dv_rec *r = dv__rec_of(s);
  if (!r) return dv__error(DV_ERR_MISUSE, "the stream is not capturing a graph");
  *(dv_rec **)(void *)s = NULL; /* the capture ends whatever happens next */
  dv_bgraph *g = dv__malloc(sizeof *g);
  if (!g) {
    list_free(&r->list);
    dv__free(r);
    return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "graph capture: no memory for the graph");
  }
  g->list = r->list; /* the commands move over */
  dv__free(r);
  *out = g;
  return DV_OK;
}

dv_status dv__rec_copy_rect(dv_rec *r, const dv_rect *x) {
  rec_cmd *c = push(&r->list, REC_RECT);
  if (!c) return oom();
  c->u.rect = *x;
  c->u.rect.flags &= ~DV_COPY_SYNC; /* a replay is queued, never run inline */
  return DV_OK;
}

dv_status dv__rec_copy_strided(dv_rec *r, const dv_strided *x) {
  rec_cmd *c = push(&r->list, REC_STRIDED);
  if (!c) return oom();
  c->u.strided = *x;
  c->u.strided.flags &= ~DV_COPY_SYNC;
  return DV_OK;
}

dv_status dv__rec_copy_peer(dv_rec *r, dv_memref dst, void *src_state, dv_memref src,
                            size_t bytes) {
  if (!r->list.be->copy_peer)
    return dv__error(DV_ERR_NOT_SUPPORTED, "graph capture: this backend records no peer copies");
  rec_cmd *c = push(&r->list, REC_PEER);
  if (!c) return oom();
  c->u.peer.dst = dst;
  c->u.peer.src = src;
  c->u.peer.src_state = src_state;
  c->u.peer.bytes = bytes;
  return DV_OK;
}

dv_status dv__rec_memset(dv_rec *r, dv_memref dst, int value, size_t bytes) {
  rec_cmd *c = push(&r->list, REC_MEMSET);
  if (!c) return oom();
  c->u.memset.dst = dst;
  c->u.memset.value = value;
  c->u.memset.bytes = bytes;
  return DV_OK;
}

/* The bytes an argument's value points at (a view's struct, a scalar, a
 * buffer's dv_barray). */
static size_t arg_value_bytes(const dv_barg *a) {
  if (!a->value) return 0;
  if (a->kind == DV_BARG_BUFFER) return sizeof(dv_barray);
  return a->size;
}

dv_status dv__rec_launch(dv_rec *r, dv_bkernel *k, const dv_blaunch *l) {
  size_t total = 0;
  for (size_t i = 0; i < l->nargs; i++) {
    size_t b = (arg_value_bytes(&l->args[i]) + 15) & ~(size_t)15;
    if (b < arg_value_bytes(&l->args[i]) || total + b < total)
      return dv__error(DV_ERR_OVERFLOW, "graph capture: a launch's arguments are too large");
    total += b;
  }
  rec_cmd *c = push(&r->list, REC_LAUNCH);
  if (!c) return oom();
  if (l->nargs && !(c->args = dv__malloc(l->nargs * sizeof *c->args)))
    return no_memory(&r->list, c);
  if (total && !(c->blob = dv__malloc(total))) return no_memory(&r->list, c);
  c->blob_bytes = total;
  size_t at = 0;
  for (size_t i = 0; i < l->nargs; i++) {
    c->args[i] = l->args[i];
    size_t b = arg_value_bytes(&l->args[i]);
    if (b) {
      memcpy(c->blob + at, l->args[i].value, b);
      c->args[i].value = c->blob + at;
      at += (b + 15) & ~(size_t)15;
    }
  }
  c->u.launch.k = k;
  c->u.launch.l = *l;
  c->u.launch.l.args = c->args;
  c->u.launch.l.flags = 0; /* a replay is queued, never run inline */
  return DV_OK;
}

dv_status dv__rec_constant_write(dv_rec *r, dv_bmodule *m, size_t offset, dv_memref src,
                                 size_t bytes) {
  rec_cmd *c = push(&r->list, REC_CONSTANT);
  if (!c) return oom();
  c->u.constant.m = m;
  c->u.constant.offset = offset;
  c->u.constant.bytes = bytes;
  c->u.constant.src = src; /* read at each launch, as a copy's source is */
  return DV_OK;
}

dv_status dv__rec_event_record(dv_rec *r, dv_bevent *e) {
  rec_cmd *c = push(&r->list, REC_RECORD);
  if (!c) return oom();
  c->u.event = e;
  return DV_OK;
}

dv_status dv__rec_event_wait(dv_rec *r, dv_bevent *e) {
  rec_cmd *c = push(&r->list, REC_WAIT);
  if (!c) return oom();
  c->u.event = e;
  return DV_OK;
}

dv_status dv__rec_host_fn(dv_rec *r, dv_bcallback_fn fn, void *user) {
  rec_cmd *c = push(&r->list, REC_HOST_FN);
  if (!c) return oom();
  c->u.host_fn.fn = fn;
  c->u.host_fn.user = user;
  return DV_OK;
}

dv_status dv__rec_refuse(dv_rec *r, const char *what) {
  (void)r;
  return dv__error(DV_ERR_MISUSE, "%s on a stream that is capturing a graph: it cannot be captured",
                   what);
}

/* A deep copy of src's commands into dst (dst empty). */
static dv_status list_copy(rec_list *dst, const rec_list *src) {
  dst->be = src->be;
  dst->state = src->state;
  dst->n = dst->cap = 0;
  dst->cmds = NULL;
  if (!src->n) return DV_OK;
  if (!(dst->cmds = dv__malloc(src->n * sizeof *dst->cmds))) goto oom;
  dst->cap = src->n;
  for (size_t i = 0; i < src->n; i++) {
    const rec_cmd *s = &src->cmds[i];
    rec_cmd *d = &dst->cmds[dst->n];
    *d = *s;
    d->args = NULL;
    d->blob = NULL;
    if (s->blob && !(d->blob = dv__malloc(s->blob_bytes))) goto oom;
    if (s->blob) memcpy(d->blob, s->blob, s->blob_bytes);
    if (s->kind == REC_LAUNCH && s->u.launch.l.nargs) {
      size_t na = s->u.launch.l.nargs;
      if (!(d->args = dv__malloc(na * sizeof *d->args))) {
        dv__free(d->blob);
        goto oom;
      }
      for (size_t a = 0; a < na; a++) {
        d->args[a] = s->args[a];
        if (s->args[a].value) /* into this copy's blob */
          d->args[a].value = d->blob + ((const unsigned char *)s->args[a].value - s->blob);
      }
      d->u.launch.l.args = d->args;
    }
    dst->n++;
  }
  return DV_OK;
oom:
  list_free(dst);
  return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "graph instantiate: no memory for the commands");
}

dv_status dv__rec_instantiate(dv_bgraph *g, dv_bgexec **out) {
  *out = NULL;
  dv_bgexec *e = dv__malloc(sizeof *e);
  if (!e) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "graph instantiate: no memory");
  dv_status rc = list_copy(&e->list, &g->list);
  if (rc) {
    dv__free(e);
    return rc;
  }
  *out = e;
  return DV_OK;
}

/* Queue every command on s, in order; the first failure stops the replay
 * (what was queued before it stays queued, as a failed launch leaves the
 * work queued before it). */
dv_status dv__rec_replay(dv_bgexec *e, dv_bstream *s) {
  const dv_rec_ops *be = e->list.be;
  void *st = e->list.state;
  for (size_t i = 0; i < e->list.n; i++) {
    const rec_cmd *c = &e->list.cmds[i];
    dv_status rc = DV_OK;
    switch (c->kind) {
      case REC_RECT: rc = be->copy_rect(st, s, &c->u.rect); break;
      case REC_STRIDED: rc = be->copy_strided(st, s, &c->u.strided); break;
      case REC_PEER:
        rc = be->copy_peer(st, s, c->u.peer.dst, c->u.peer.src_state, c->u.peer.src,
                           c->u.peer.bytes);
        break;
      case REC_MEMSET:
        rc = be->memset(st, s, c->u.memset.dst, c->u.memset.value, c->u.memset.bytes);
        break;
      case REC_LAUNCH: rc = be->launch(st, s, c->u.launch.k, &c->u.launch.l); break;
      case REC_CONSTANT:
        rc = be->constant_write(st, c->u.constant.m, s, c->u.constant.offset, c->u.constant.src,
                                c->u.constant.bytes);
        break;
      case REC_RECORD: rc = be->event_record(st, c->u.event, s); break;
      case REC_WAIT: rc = be->event_wait(st, s, c->u.event); break;
      case REC_HOST_FN: rc = be->stream_callback(st, s, c->u.host_fn.fn, c->u.host_fn.user); break;
    }
    if (rc) return rc;
  }
  return DV_OK;
}

dv_status dv__rec_exec_destroy(dv_bgexec *e) {
  if (!e) return DV_OK;
  list_free(&e->list);
  dv__free(e);
  return DV_OK;
}

dv_status dv__rec_graph_destroy(dv_bgraph *g) {
  if (!g) return DV_OK;
  list_free(&g->list);
  dv__free(g);
  return DV_OK;
}
