/* Statistics: current/peak/total counters per context, and a JSON dump. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>

#include "core.h"

static _Atomic uint64_t dv__stats_ids;
_Thread_local dv_stats_tls dv__stats_tl;

void dv__stats_init(dv_stats_state *s) {
  memset(s, 0, sizeof *s);
  pthread_mutex_init(&s->lock, NULL);
  s->id = atomic_fetch_add(&dv__stats_ids, 1) + 1;
}

void dv__stats_destroy(dv_stats_state *s) {
  for (dv_thread_stats *t = s->threads, *n; t; t = n) {
    n = t->next;
    free(t);
  }
  s->threads = NULL;
  pthread_mutex_destroy(&s->lock);
}

/* dv__stats_block (core.h).  Plain calloc: not the library's counted,
 * fault-injected allocator, so counting never changes which allocation an
 * injected fault hits. */
dv_thread_stats *dv__stats_block(dv_context *ctx) {
  dv_stats_state *s = &ctx->stats;
  pthread_t self = pthread_self();
  pthread_mutex_lock(&s->lock);
  dv_thread_stats *t = s->threads;
  while (t && !pthread_equal(t->owner, self)) t = t->next;
  if (!t && (t = calloc(1, sizeof *t)) != NULL) {
    t->owner = self;
    t->next = s->threads;
    s->threads = t;
  }
  pthread_mutex_unlock(&s->lock);
  if (t) dv__stats_tl.id = s->id, dv__stats_tl.t = t;
  return t;
}

void dv__stats_add(dv_context *ctx, dv_stat_kind k, uint64_t n) {
  dv_stats_state *s = &ctx->stats;
  if (k == DV_STAT_STAGING) {
    dv__counter_add(&s->c[k], n);
    return;
  }
  dv__spin_lock(&ctx->lock);
  dv__ctr_add_locked(&s->c[k], n);
  dv__spin_unlock(&ctx->lock);
}

void dv__counter_add(dv_atomic_counter *c, uint64_t n) {
  uint64_t cur = atomic_fetch_add_explicit(&c->current, n, memory_order_relaxed) + n;
  atomic_fetch_add_explicit(&c->total, n, memory_order_relaxed);
  uint64_t pk = atomic_load_explicit(&c->peak, memory_order_relaxed);
  while (cur > pk && !atomic_compare_exchange_weak_explicit(&c->peak, &pk, cur, memory_order_relaxed,
                                                            memory_order_relaxed)) {
  }
}

void dv__stats_sub(dv_context *ctx, dv_stat_kind k, uint64_t n) {
  dv_stats_state *s = &ctx->stats;
  if (k == DV_STAT_STAGING) {
    dv__counter_sub(&s->c[k], n);
    return;
  }
  dv__spin_lock(&ctx->lock);
  dv__ctr_sub_locked(&s->c[k], n);
  dv__spin_unlock(&ctx->lock);
}

void dv__stats_sub_locked(dv_context *ctx, dv_stat_kind k, uint64_t n) {
  dv__ctr_sub_locked(&ctx->stats.c[k], n);
}

void dv__counter_sub(dv_atomic_counter *c, uint64_t n) {
  atomic_fetch_sub_explicit(&c->current, n, memory_order_relaxed);
}

/* A counter's value; the peak is at least the current value read (they are
 * read one after the other, without a lock). */
static dv_counter dv__counter_get(dv_atomic_counter *c) {
  dv_counter r;
  r.current = atomic_load(&c->current);
  r.total = atomic_load(&c->total);
  r.peak = atomic_load(&c->peak);
  if (r.peak < r.current) r.peak = r.current;
  return r;
}

/* dv_stats only grows at its end: version 1 ended where `staging` begins.
 * A caller built against an older header passes its smaller size and gets
 * the fields its version has; one built against a newer header gets ours. */
#define DV__STATS_V1_SIZE offsetof(dv_stats, staging)
#define DV__STATS_V2_SIZE offsetof(dv_stats, transfers_h2d)

dv_status dv_context_stats(dv_context *ctx, dv_stats *out) {
  DV_CHECK_NULL(out);
  if (!ctx || out->size < DV__STATS_V1_SIZE) {
    /* Cleared on failure: every byte the caller's struct holds (out->size
     * says how many) except `size`, which is the caller's. */
    size_t have = out->size < sizeof *out ? out->size : sizeof *out;
    if (have > sizeof out->size) memset((char *)out + sizeof out->size, 0, have - sizeof out->size);
    DV_CHECK_NULL(ctx);
    DV_CHECK_HANDLE(ctx, DV_HANDLE_CONTEXT);
    return dv__error(DV_ERR_INVALID_ARGUMENT,
                     "dv_stats.size is %u, smaller than any version of dv_stats (set it to sizeof(dv_stats))",
                     out->size);
  }
  size_t filled = out->size >= sizeof(dv_stats)     ? sizeof(dv_stats)
                  : out->size >= DV__STATS_V2_SIZE ? DV__STATS_V2_SIZE
                                                   : DV__STATS_V1_SIZE;
  dv_stats r;
  memset(&r, 0, sizeof r);
  r.size = (uint32_t)filled;
  r.version = filled == sizeof(dv_stats) ? DV_STATS_VERSION : filled == DV__STATS_V2_SIZE ? 2 : 1;
  dv_stats_state *s = &ctx->stats;
  dv__spin_lock(&ctx->lock);
  r.pending_deallocs = ctx->pending.count;
  r.pending_bytes = ctx->pending.bytes;
  r.pending_peak = s->pending_peak;
  r.flushes = s->flushes;
  /* one moment for the queue and every counter but staging */
  r.device = dv__counter_get(&s->c[DV_STAT_DEVICE]);
  r.pinned = dv__counter_get(&s->c[DV_STAT_PINNED]);
  r.mapped = dv__counter_get(&s->c[DV_STAT_MAPPED]);
  r.registered = dv__counter_get(&s->c[DV_STAT_REGISTERED]);
  r.managed = dv__counter_get(&s->c[DV_STAT_MANAGED]);
  r.arrays = dv__counter_get(&s->c[DV_STAT_ARRAYS]);
  dv__spin_unlock(&ctx->lock);
  pthread_mutex_lock(&s->lock);
  r.staging = dv__counter_get(&s->c[DV_STAT_STAGING]);
  r.oom_retries = s->oom_retries;
  r.failed_frees = s->failed_frees;
  for (dv_thread_stats *t = s->threads; t; t = t->next) {
    r.copies += atomic_load_explicit(&t->copies, memory_order_relaxed);
    r.bytes_h2d += atomic_load_explicit(&t->bytes[0], memory_order_relaxed);
    r.bytes_d2h += atomic_load_explicit(&t->bytes[1], memory_order_relaxed);
    r.bytes_d2d += atomic_load_explicit(&t->bytes[2], memory_order_relaxed);
    r.transfers_h2d += atomic_load_explicit(&t->n[0], memory_order_relaxed);
    r.transfers_d2h += atomic_load_explicit(&t->n[1], memory_order_relaxed);
    r.transfers_d2d += atomic_load_explicit(&t->n[2], memory_order_relaxed);
  }
  pthread_mutex_unlock(&s->lock);
  r.staging_hits = atomic_load(&s->staging_hits);
  r.staging_misses = atomic_load(&s->staging_misses);
  r.copies += atomic_load(&s->copies);
  r.staged_copies = atomic_load(&s->staged_copies);
  r.bytes_h2d += atomic_load(&s->bytes_h2d);
  r.bytes_d2h += atomic_load(&s->bytes_d2h);
  r.bytes_d2d += atomic_load(&s->bytes_d2d);
  r.transfers_h2d += atomic_load(&s->n_h2d);
  r.transfers_d2h += atomic_load(&s->n_d2h);
  r.transfers_d2d += atomic_load(&s->n_d2d);
  memcpy(out, &r, filled);
  return DV_OK;
}

dv_status dv_context_stats_json(dv_context *ctx, char *buf, size_t cap, size_t *needed) {
  DV_CHECK_NULL(needed);
  *needed = 0;
  DV_CHECK_NULL(ctx);
  DV_CHECK_HANDLE(ctx, DV_HANDLE_CONTEXT);
  dv_stats st = {.size = sizeof st};
  dv_status rc = dv_context_stats(ctx, &st);
  if (rc) return rc;
  char tmp[2560];
  int n = 0;
#define C(name) st.name.current, st.name.peak, st.name.total
#define CF "{\"current\":%llu,\"peak\":%llu,\"total\":%llu}"
  n = snprintf(tmp, sizeof tmp,
               "{\"version\":%u,\"backend\":\"%s\",\"device\":" CF ",\"pinned\":" CF
               ",\"mapped\":" CF ",\"registered\":" CF ",\"managed\":" CF ",\"arrays\":" CF
               ",\"pending_deallocs\":%llu,\"pending_bytes\":%llu,\"pending_peak\":%llu,"
               "\"flushes\":%llu,\"oom_retries\":%llu,\"failed_frees\":%llu,\"copies\":%llu,"
               "\"staged_copies\":%llu,\"bytes_h2d\":%llu,\"bytes_d2h\":%llu,\"bytes_d2d\":%llu,"
               "\"staging\":" CF ",\"staging_hits\":%llu,\"staging_misses\":%llu,"
               "\"transfers_h2d\":%llu,\"transfers_d2h\":%llu,\"transfers_d2d\":%llu}",
               st.version, ctx->backend_name, (unsigned long long)st.device.current,
               (unsigned long long)st.device.peak, (unsigned long long)st.device.total,
               (unsigned long long)st.pinned.current, (unsigned long long)st.pinned.peak,
               (unsigned long long)st.pinned.total, (unsigned long long)st.mapped.current,
               (unsigned long long)st.mapped.peak, (unsigned long long)st.mapped.total,
               (unsigned long long)st.registered.current, (unsigned long long)st.registered.peak,
               (unsigned long long)st.registered.total, (unsigned long long)st.managed.current,
               (unsigned long long)st.managed.peak, (unsigned long long)st.managed.total,
               (unsigned long long)st.arrays.current, (unsigned long long)st.arrays.peak,
               (unsigned long long)st.arrays.total, (unsigned long long)st.pending_deallocs,
               (unsigned long long)st.pending_bytes, (unsigned long long)st.pending_peak,
               (unsigned long long)st.flushes, (unsigned long long)st.oom_retries,
               (unsigned long long)st.failed_frees, (unsigned long long)st.copies,
               (unsigned long long)st.staged_copies, (unsigned long long)st.bytes_h2d,
               (unsigned long long)st.bytes_d2h, (unsigned long long)st.bytes_d2d,
               (unsigned long long)st.staging.current, (unsigned long long)st.staging.peak,
               (unsigned long long)st.staging.total, (unsigned long long)st.staging_hits,
               (unsigned long long)st.staging_misses, (unsigned long long)st.transfers_h2d,
               (unsigned long long)st.transfers_d2h, (unsigned long long)st.transfers_d2d);
#undef C
#undef CF
  *needed = (size_t)n;
  if (!buf) return DV_OK;
  if (cap <= (size_t)n)
    return dv__error(DV_ERR_INVALID_ARGUMENT, "buffer of %zu bytes is too small; %d needed", cap, n + 1);
  memcpy(buf, tmp, (size_t)n + 1);
  return DV_OK;
}
