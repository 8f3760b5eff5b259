/*
 * printf capture: a tool (tools.h) that keeps each launch's dv_printf
 * texts in a buffer of its own (option host_printf_buffer bytes per
 * launch; HKT_REC_COST more per call) and writes them to stdout when the
 * launch has run, in block and thread order, each line after its thread's
 * coordinates; then what did not fit.  A launch's buffer is made by its
 * first dv_printf (one that prints nothing costs nothing).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools_internal.h"

#define HKT_REC_COST 32 /* bytes of host_printf_buffer each call takes besides its text */

/* One dv_printf call's text in the launch's buffer. */
typedef struct hkt_rec {
  uint64_t block, seq;
  size_t off;
  uint32_t len;
  int thread;
} hkt_rec;

/* A launch's output. */
typedef struct hkt_out {
  pthread_mutex_t mu;
  char *out; /* the calls' texts, one after the other */
  size_t len, cap;
  size_t used; /* charged against host_printf_buffer */
  hkt_rec *recs;
  size_t nrecs, recs_cap;
  uint64_t dropped, dropped_bytes;
} hkt_out;

static bool hkt_grow(void **p, size_t *cap, size_t size, size_t need, size_t first) {
  if (need <= *cap) return true;
  size_t nc = *cap ? *cap : first;
  while (nc < need) nc *= 2;
  void *np = dv__malloc(nc * size);
  if (!np) return false;
  if (*cap) memcpy(np, *p, *cap * size);
  dv__free(*p);
  *p = np;
  *cap = nc;
  return true;
}

static void hkt_out_free(void *self, void *data) {
  (void)self;
  hkt_out *o = data;
  pthread_mutex_destroy(&o->mu);
  dv__free(o->out);
  dv__free(o->recs);
  dv__free(o);
}

/* The launch's buffer, made by the first call (NULL: no memory). */
static hkt_out *hkt_out_of(_Atomic(void *) *slot) {
  hkt_out *o = atomic_load_explicit(slot, memory_order_acquire);
  if (o) return o;
  hkt_out *n = dv__calloc(1, sizeof *n);
  if (!n) return NULL;
  pthread_mutex_init(&n->mu, NULL);
  void *want = NULL;
  if (atomic_compare_exchange_strong_explicit(slot, &want, n, memory_order_acq_rel,
                                              memory_order_acquire))
    return n;
  hkt_out_free(NULL, n); /* another executor's call made it first */
  return want;
}

static void hkt_print(void *self, _Atomic(void *) *slot, const hk_job *l, const hk_exec *ex,
                      const char *small, size_t small_cap, int n, const char *fmt, va_list ap) {
  (void)l;
  const hkt_printf *pf = self;
  hkt_out *o = hkt_out_of(slot);
  if (!o) return; /* no memory for the launch's buffer: the call is lost */
  pthread_mutex_lock(&o->mu);
  bool ok = n >= 0 && o->used + (size_t)n + HKT_REC_COST <= pf->cap;
  if (ok) ok = hkt_grow((void **)&o->out, &o->cap, 1, o->len + (size_t)n + 1, 4096);
  if (ok) ok = hkt_grow((void **)&o->recs, &o->recs_cap, sizeof *o->recs, o->nrecs + 1, 64);
  if (ok) {
    if ((size_t)n < small_cap)
      memcpy(o->out + o->len, small, (size_t)n + 1);
    else
      vsnprintf(o->out + o->len, (size_t)n + 1, fmt, ap);
    o->recs[o->nrecs] =
        (hkt_rec){hk_exec_block(ex), o->nrecs, o->len, (uint32_t)n, hk_exec_thread(ex)};
    o->nrecs++;
    o->len += (size_t)n;
    o->used += (size_t)n + HKT_REC_COST;
  } else {
    o->dropped++;
    if (n > 0) o->dropped_bytes += (uint64_t)n;
  }
  pthread_mutex_unlock(&o->mu);
}

static int hkt_rec_cmp(const void *a, const void *b) {
  const hkt_rec *x = a, *y = b;
  if (x->block != y->block) return x->block < y->block ? -1 : 1;
  if (x->thread != y->thread) return x->thread < y->thread ? -1 : 1;
  return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* The launch's output to stdout, then its buffer emptied. */
static dv_status hkt_flush(void *self, void *data, const hk_job *l, char *msg, size_t cap) {
  (void)msg, (void)cap;
  const hkt_printf *pf = self;
  hkt_out *o = data;
  const hk_jview *v = hk_job_view(l);
  if (!o->nrecs && !o->dropped) return DV_OK;
  qsort(o->recs, o->nrecs, sizeof *o->recs, hkt_rec_cmp);
  flockfile(stdout);
  for (size_t r = 0; r < o->nrecs; r++) {
    const hkt_rec *rec = &o->recs[r];
    unsigned b[3], t[3];
    hk_coords(rec->block, v->grid, b);
    hk_coords((uint64_t)rec->thread, v->block, t);
    const char *p = o->out + rec->off, *e = p + rec->len;
    while (p < e) {
      const char *nl = memchr(p, '\n', (size_t)(e - p));
      size_t len = nl ? (size_t)(nl - p) : (size_t)(e - p);
      fprintf(stdout, "[block (%u,%u,%u) thread (%u,%u,%u)] ", b[0], b[1], b[2], t[0], t[1], t[2]);
      fwrite(p, 1, len, stdout);
      fputc('\n', stdout);
      p += len + (nl ? 1 : 0);
    }
  }
  if (o->dropped)
    fprintf(stdout, "[devarray] kernel %s: %llu dv_printf call%s (%llu bytes) dropped: the "
            "launch's output is limited to %zu bytes, %d per call besides its text (option "
            "host_printf_buffer)\n", v->kern->name, (unsigned long long)o->dropped,
            o->dropped == 1 ? "" : "s", (unsigned long long)o->dropped_bytes, pf->cap,
            HKT_REC_COST);
  fflush(stdout);
  funlockfile(stdout);
  dv__free(o->out);
  dv__free(o->recs);
  o->out = NULL;
  o->recs = NULL;
  o->len = o->cap = o->used = o->nrecs = o->recs_cap = 0;
  o->dropped = o->dropped_bytes = 0;
  return DV_OK;
}

dv_status hkt_printf_open(const dv_backend_config *cfg, hk_state *k, hkt_printf *pf) {
  pf->cap = cfg->host_printf_buffer ? cfg->host_printf_buffer : ((size_t)1 << 20);
  const hk_tool t = {
      .name = "printf", .self = pf, .print = hkt_print, .finish = hkt_flush, .free = hkt_out_free};
  int at;
  return hk_tool_add(k, &t, &at);
}
