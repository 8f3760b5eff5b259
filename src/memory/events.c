/*
 * What a program hears of its context's memory (issue 38 item 3): memory
 * hooks (a), scoped statistics (c) and the out-of-memory handler (d).  The
 * array layer and the planner tell this file of each allocation and free
 * through dv__mem_note (memory.h), which tests one counter, `on` (hooks
 * installed plus scopes open), before it builds an event: with nothing
 * installed that is the whole cost.
 *
 * Hooks are an array under a mutex, held while they run (one thread's
 * hooks at a time: they need no locking of their own), so that a removed
 * hook is neither running nor called again once removal returns.
 * A thread-local flag marks a thread inside a hook: the events of its own
 * allocations are not dispatched (no recursion), and changes to the hooks
 * or the scopes from there are DV_ERR_MISUSE (a remove would wait for
 * itself).  Scopes are a stack per context under a mutex.
 */
#include <string.h>

#include "memory.h"

#define DV_SCOPES_MAX 64

static _Thread_local bool dv__in_mem_hook;

void dv__mem_events_init(dv_mem_events *e) {
  memset(e, 0, sizeof *e);
  pthread_mutex_init(&e->hooks_lock, NULL);
  pthread_mutex_init(&e->scope_lock, NULL);
  pthread_mutex_init(&e->oom_lock, NULL);
}

void dv__mem_events_fini(dv_mem_events *e) {
  dv__free(e->hooks);
  dv__free(e->scopes);
  pthread_mutex_destroy(&e->hooks_lock);
  pthread_mutex_destroy(&e->scope_lock);
  pthread_mutex_destroy(&e->oom_lock);
}

static dv_memory_counts *dv__scope_counts(dv_memory_scope_stats *s, dv_memory_kind k) {
  switch (k) {
    case DV_MEM_PINNED: return &s->pinned;
    case DV_MEM_MAPPED: return &s->mapped;
    case DV_MEM_MANAGED: return &s->managed;
    default: return &s->device;
  }
}

static void dv__scope_count(dv_scope_counter *c, int64_t n) {
  c->current += n;
  if (n > 0) c->total += n;
  if (c->current > c->peak) c->peak = c->current;
}

void dv__mem_dispatch(dv_context *ctx, const dv_memory_event *ev) {
  dv_mem_events *e = &ctx->memory->events;
  if (dv__in_mem_hook) return; /* a hook's own allocations */
  if (atomic_load_explicit(&e->depth, memory_order_relaxed) > 0) {
    int64_t sign = ev->event == DV_MEMORY_ALLOC ? 1 : -1;
    pthread_mutex_lock(&e->scope_lock);
    if (e->ndepth > 0) {
      dv_memory_counts *c = dv__scope_counts(&e->scopes[e->ndepth - 1], ev->memory);
      dv__scope_count(&c->bytes, sign * (int64_t)ev->bytes);
      dv__scope_count(&c->allocations, sign);
    }
    pthread_mutex_unlock(&e->scope_lock);
  }
  if (atomic_load_explicit(&e->nhooks_on, memory_order_relaxed) > 0) {
    pthread_mutex_lock(&e->hooks_lock);
    dv__in_mem_hook = true;
    for (int i = 0; i < e->nhooks; i++) e->hooks[i].fn(ctx, ev, e->hooks[i].user);
    dv__in_mem_hook = false;
    pthread_mutex_unlock(&e->hooks_lock);
  }
}

static dv_status dv__mem_not_in_hook(const char *fn) {
  if (dv__in_mem_hook)
    return dv__error(DV_ERR_MISUSE, "%s: called from a memory hook (hooks cannot change the hooks or the scopes)", fn);
  return DV_OK;
}

dv_status dv_memory_hook_add(dv_context *ctx, dv_memory_hook_fn fn, void *user, int *id) {
  DV_CHECK_NULL(id);
  *id = 0;
  DV_CHECK_NULL(ctx);
  DV_CHECK_HANDLE(ctx, DV_HANDLE_CONTEXT);
  DV_CHECK_NULL(fn);
  dv_status rc = dv__mem_not_in_hook(__func__);
  if (rc) return rc;
  dv_mem_events *e = &ctx->memory->events;
  pthread_mutex_lock(&e->hooks_lock);
  if (e->nhooks == e->cap) {
    int cap = e->cap ? 2 * e->cap : 4;
    dv_mem_hook *h = dv__malloc((size_t)cap * sizeof *h);
    if (!h) {
      pthread_mutex_unlock(&e->hooks_lock);
      return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate room for %d memory hooks", cap);
    }
    if (e->nhooks) memcpy(h, e->hooks, (size_t)e->nhooks * sizeof *h);
    dv__free(e->hooks);
    e->hooks = h;
    e->cap = cap;
  }
  int n = ++e->next_id;
  e->hooks[e->nhooks++] = (dv_mem_hook){n, fn, user};
  atomic_store(&e->nhooks_on, e->nhooks);
  dv__mem_events_count(ctx->memory, 1);
  pthread_mutex_unlock(&e->hooks_lock);
  *id = n;
  return DV_OK;
}

dv_status dv_memory_hook_remove(dv_context *ctx, int id) {
  DV_CHECK_NULL(ctx);
  DV_CHECK_HANDLE(ctx, DV_HANDLE_CONTEXT);
  dv_status rc = dv__mem_not_in_hook(__func__);
  if (rc) return rc;
  dv_mem_events *e = &ctx->memory->events;
  pthread_mutex_lock(&e->hooks_lock);
  int i = 0;
  while (i < e->nhooks && e->hooks[i].id != id) i++;
  if (i == e->nhooks) {
    pthread_mutex_unlock(&e->hooks_lock);
    return dv__error(DV_ERR_INVALID_ARGUMENT, "no memory hook %d is installed on this context", id);
  }
  memmove(&e->hooks[i], &e->hooks[i + 1], (size_t)(e->nhooks - i - 1) * sizeof *e->hooks);
  e->nhooks--;
  atomic_store(&e->nhooks_on, e->nhooks);
  dv__mem_events_count(ctx->memory, -1);
  pthread_mutex_unlock(&e->hooks_lock);
  return DV_OK;
}

dv_status dv_memory_scope_push(dv_context *ctx) {
  DV_CHECK_NULL(ctx);
  DV_CHECK_HANDLE(ctx, DV_HANDLE_CONTEXT);
  dv_status rc = dv__mem_not_in_hook(__func__);
  if (rc) return rc;
  dv_mem_events *e = &ctx->memory->events;
  pthread_mutex_lock(&e->scope_lock);
  if (e->ndepth == DV_SCOPES_MAX) {
    pthread_mutex_unlock(&e->scope_lock);
    return dv__error(DV_ERR_INVALID_ARGUMENT, "memory scopes nest at most %d deep", DV_SCOPES_MAX);
  }
  if (!e->scopes) {
    e->scopes = dv__calloc(DV_SCOPES_MAX, sizeof *e->scopes);
    if (!e->scopes) {
      pthread_mutex_unlock(&e->scope_lock);
      return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate the memory scopes");
    }
  }
  memset(&e->scopes[e->ndepth++], 0, sizeof *e->scopes);
  atomic_store(&e->depth, e->ndepth);
  dv__mem_events_count(ctx->memory, 1);
  pthread_mutex_unlock(&e->scope_lock);
  return DV_OK;
}

static void dv__scope_fold(dv_scope_counter *parent, const dv_scope_counter *child) {
  if (parent->current + child->peak > parent->peak) parent->peak = parent->current + child->peak;
  parent->current += child->current;
  parent->total += child->total;
}

dv_status dv_memory_scope_pop(dv_context *ctx, dv_memory_scope_stats *out) {
  if (out) memset(out, 0, sizeof *out);
  DV_CHECK_NULL(ctx);
  DV_CHECK_HANDLE(ctx, DV_HANDLE_CONTEXT);
  dv_status rc = dv__mem_not_in_hook(__func__);
  if (rc) return rc;
  dv_mem_events *e = &ctx->memory->events;
  pthread_mutex_lock(&e->scope_lock);
  if (e->ndepth == 0) {
    pthread_mutex_unlock(&e->scope_lock);
    return dv__error(DV_ERR_INVALID_ARGUMENT, "no memory scope is open on this context");
  }
  dv_memory_scope_stats top = e->scopes[--e->ndepth];
  if (e->ndepth > 0) {
    dv_memory_scope_stats *p = &e->scopes[e->ndepth - 1];
    dv_memory_counts *pc[] = {&p->device, &p->pinned, &p->mapped, &p->managed};
    const dv_memory_counts *cc[] = {&top.device, &top.pinned, &top.mapped, &top.managed};
    for (int i = 0; i < 4; i++) {
      dv__scope_fold(&pc[i]->bytes, &cc[i]->bytes);
      dv__scope_fold(&pc[i]->allocations, &cc[i]->allocations);
    }
  }
  atomic_store(&e->depth, e->ndepth);
  dv__mem_events_count(ctx->memory, -1);
  pthread_mutex_unlock(&e->scope_lock);
  if (out) *out = top;
  return DV_OK;
}

dv_status dv_memory_set_oom_handler(dv_context *ctx, dv_oom_fn fn, void *user, int max_retries) {
  DV_CHECK_NULL(ctx);
  DV_CHECK_HANDLE(ctx, DV_HANDLE_CONTEXT);
  if (fn && (max_retries < 1 || max_retries > 1000))
    return dv__error(DV_ERR_INVALID_ARGUMENT, "max_retries %d is not in 1..1000", max_retries);
  dv_mem_events *e = &ctx->memory->events;
  pthread_mutex_lock(&e->oom_lock);
  e->oom = fn;
  e->oom_user = user;
  e->oom_max = fn ? max_retries : 0;
  pthread_mutex_unlock(&e->oom_lock);
  return DV_OK;
}

dv_status dv__mem_oom_retry(dv_context *ctx, size_t bytes, dv_stream *stream, dv_block *out, int *asked) {
  dv_mem_events *e = &ctx->memory->events;
  pthread_mutex_lock(&e->oom_lock);
  dv_oom_fn fn = e->oom;
  void *user = e->oom_user;
  int max = e->oom_max;
  pthread_mutex_unlock(&e->oom_lock);
  dv_memory_state *m = ctx->memory;
  dv_status rc = DV_ERR_OUT_OF_MEMORY;
  *asked = 0;
  for (int attempt = 1; fn && attempt <= max; attempt++) {
    *asked = attempt;
    if (!fn(ctx, bytes, attempt, user)) break;
    dv_status frc = dv__flush(ctx);
    if (frc) dv__log(DV_LOG_ERROR, "flush before retrying the allocation failed");
    rc = m->mm.alloc(m->mm_state, bytes, stream, out);
    if (rc != DV_ERR_OUT_OF_MEMORY) break;
  }
  return rc;
}
