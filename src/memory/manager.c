/*
 * Memory managers: the direct manager (every allocation a driver allocation,
 * every free a driver free), the plug-in entry points, and dv__device_alloc,
 * which adds Numba's out-of-memory rule on top of any manager: flush the
 * pending-deallocation queue and retry once.  Both built-in managers get
 * their memory from device.c, below them; this file knows the pool only by
 * its table and its snapshot.
 */
#include <stdio.h>
#include <string.h>

#include "memory.h"

static dv_status dv__direct_init(dv_context *ctx, void *user, void **state) {
  (void)user;
  *state = ctx;
  return DV_OK;
}
static void dv__direct_fini(void *state) { (void)state; }

/* The backend's own calls, without dv_backend_alloc's argument checks (the
 * manager's caller has made them; issue 23 counts every call on this path). */
/* Under a memory limit: count first, so that two threads cannot both pass it. */
static __attribute__((noinline)) dv_status dv__direct_alloc_limited(dv_context *ctx, size_t bytes, dv_block *out) {
  dv_memory_state *m = ctx->memory;
  size_t held = atomic_fetch_add(&m->direct_held, bytes);
  dv_status rc = dv__mm_limit_check(ctx, held, 0, bytes);
  if (!rc) rc = ctx->be->mem_alloc(ctx->bst, bytes, &out->buf);
  if (rc) atomic_fetch_sub(&m->direct_held, bytes);
  else out->handle = (void *)(uintptr_t)1; /* counted in direct_held */
  return rc;
}

static dv_status dv__direct_alloc(void *state, size_t bytes, dv_stream *stream, dv_block *out) {
  (void)stream;
  dv_context *ctx = state;
  *out = (dv_block){NULL, 0, NULL};
  if (bytes == 0) return dv__error(DV_ERR_INVALID_ARGUMENT, "allocation of 0 bytes");
  if (DV_UNLIKELY(atomic_load_explicit(&ctx->memory->limit, memory_order_relaxed) != 0))
    return dv__direct_alloc_limited(ctx, bytes, out);
  return ctx->be->mem_alloc(ctx->bst, bytes, &out->buf);
}

static dv_status dv__direct_free(void *state, dv_block block, size_t bytes, dv_stream *stream) {
  (void)stream;
  dv_context *ctx = state;
  if (!block.buf) return dv__error(DV_ERR_INVALID_ARGUMENT, "free of a NULL device buffer");
  if (block.handle) atomic_fetch_sub(&ctx->memory->direct_held, bytes);
  return ctx->be->mem_free(ctx->bst, block.buf);
}

/* min of the two limits' nonzero values (0: none) */
static size_t dv__limit_of(size_t bytes, double fraction, size_t total) {
  size_t f = fraction > 0 ? (size_t)(fraction * (double)total) : 0;
  if (fraction > 0 && f == 0) f = 1;
  return !bytes ? f : !f ? bytes : bytes < f ? bytes : f;
}

static dv_status dv__limit_set(dv_context *ctx, size_t limit) {
  dv_memory_state *m = ctx->memory;
  if (m->mm.init != dv__mm_direct.init && m->mm.init != dv__mm_pool.init &&
      m->mm.init != dv__mm_async.init)
    return dv__error(DV_ERR_NOT_SUPPORTED, "memory limits are kept by the built-in managers; this context uses \"%s\"",
                     m->mm.name);
  atomic_store(&m->limit, limit);
  return DV_OK;
}

dv_status dv_memory_set_limit(dv_context *ctx, size_t bytes) {
  DV_CHECK_NULL(ctx);
  DV_CHECK_HANDLE(ctx, DV_HANDLE_CONTEXT);
  return dv__limit_set(ctx, bytes);
}

dv_status dv_memory_set_limit_fraction(dv_context *ctx, double fraction) {
  DV_CHECK_NULL(ctx);
  DV_CHECK_HANDLE(ctx, DV_HANDLE_CONTEXT);
  if (!(fraction >= 0 && fraction <= 1)) return dv__error(DV_ERR_INVALID_ARGUMENT, "fraction %g is not in [0, 1]", fraction);
  return dv__limit_set(ctx, dv__limit_of(0, fraction, ctx->total_memory));
}

dv_status dv_memory_limit(dv_context *ctx, size_t *bytes, size_t *held, size_t *cached) {
  if (bytes) *bytes = 0;
  if (held) *held = 0;
  if (cached) *cached = 0;
  DV_CHECK_NULL(ctx);
  DV_CHECK_HANDLE(ctx, DV_HANDLE_CONTEXT);
  dv_memory_state *m = ctx->memory;
  uint64_t h = 0, c = 0;
  if (m->mm.init == dv__mm_pool.init) dv__pool_held(m->mm_state, &h, &c);
  else if (m->mm.init == dv__mm_direct.init) h = atomic_load(&m->direct_held);
  else if (m->mm.init == dv__mm_async.init) dv__async_held(m->mm_state, &h);
  else return dv__error(DV_ERR_NOT_SUPPORTED, "memory limits are kept by the built-in managers; this context uses \"%s\"", m->mm.name);
  if (bytes) *bytes = atomic_load(&m->limit);
  if (held) *held = (size_t)h;
  if (cached) *cached = (size_t)c;
  return DV_OK;
}

static dv_status dv__direct_info(void *state, size_t *free_bytes, size_t *total_bytes) {
  return dv_backend_memory_info(state, free_bytes, total_bytes);
}

const dv_memory_manager dv__mm_direct = {
    .version = DV_MEMORY_MANAGER_VERSION,
    .name = "direct",
    .init = dv__direct_init,
    .fini = dv__direct_fini,
    .alloc = dv__direct_alloc,
    .free = dv__direct_free,
    .mem_info = dv__direct_info,
};

const dv_memory_manager *dv_memory_manager_builtin(const char *name) {
  if (!name) return NULL;
  if (strcmp(name, "direct") == 0) return &dv__mm_direct;
  if (strcmp(name, "pool") == 0) return &dv__mm_pool;
  if (strcmp(name, "async") == 0) return &dv__mm_async;
  return NULL;
}

/* ---- the layer's state ---- */

/* A stream is going: the manager may forget it once its work is done. */
static void dv__mm_stream_gone(dv_context *ctx, dv_stream *s, void *value, void *arg) {
  (void)value;
  dv_memory_state *m = arg;
  ctx->be->stream_sync(ctx->bst, s->bs);
  m->mm.stream_destroyed(m->mm_state, s);
}

dv_status dv__memory_init(dv_context *ctx, const dv_config *cfg) {
  dv_memory_state *m = dv__calloc(1, sizeof *m);
  if (!m) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate the memory layer's state");
  m->hook_key = -1;
  if (cfg && cfg->has_mm) m->mm = cfg->mm;
  else m->mm = *dv_memory_manager_builtin(ctx->opt[DV_OPT_MEMORY_MANAGER].s);
  if (!(cfg && cfg->has_mm))
    m->limit = dv__limit_of((size_t)ctx->opt[DV_OPT_MEMORY_LIMIT].i, ctx->opt[DV_OPT_MEMORY_LIMIT_FRACTION].d,
                            ctx->total_memory);
  dv_status rc = DV_OK;
  if (m->mm.stream_destroyed) rc = dv__stream_key_create(ctx, dv__mm_stream_gone, m, &m->hook_key);
  if (rc) {
    dv__free(m);
    return rc;
  }
  dv__staging_init(&m->staging);
  dv__mem_events_init(&m->events);
  ctx->memory = m; /* the manager's init may ask for the context's manager */
  rc = dv__pinned_init(ctx, &m->pinned);
  if (!rc) {
    rc = m->mm.init(ctx, m->mm.user, &m->mm_state);
    if (rc) dv__pinned_fini(ctx, &m->pinned);
  }
  if (rc) {
    ctx->memory = NULL;
    dv__staging_fini(ctx, &m->staging);
    dv__mem_events_fini(&m->events);
    dv__stream_key_delete(ctx, m->hook_key);
    dv__free(m);
  }
  return rc;
}

void dv__memory_fini(dv_context *ctx) {
  dv_memory_state *m = ctx->memory;
  if (!m) return;
  if (m->mm.fini) m->mm.fini(m->mm_state); /* returns every cached segment */
  dv__pinned_fini(ctx, &m->pinned);
  dv__staging_fini(ctx, &m->staging);
  dv__mem_events_fini(&m->events);
  dv__stream_key_delete(ctx, m->hook_key);
  dv__free(m);
  ctx->memory = NULL;
}

/* ---- plug-ins ---- */

dv_status dv_config_set_memory_manager(dv_config *cfg, const dv_memory_manager *mm) {
  DV_CHECK_NULL(cfg);
  DV_CHECK_NULL(mm);
  if (mm->version != DV_MEMORY_MANAGER_VERSION)
    return dv__error(DV_ERR_INVALID_ARGUMENT, "memory manager \"%s\" has version %u; version %d required",
                     mm->name ? mm->name : "?", mm->version, DV_MEMORY_MANAGER_VERSION);
  if (!mm->name || !mm->init || !mm->alloc || !mm->free || !mm->mem_info)
    return dv__error(DV_ERR_INVALID_ARGUMENT, "a memory manager needs name, init, alloc, free and mem_info");
  cfg->mm = *mm;
  cfg->has_mm = true;
  return DV_OK;
}

const char *dv_memory_manager_name(const dv_context *ctx) { return ctx ? ctx->memory->mm.name : "none"; }

dv_status dv_memory_stats(dv_context *ctx, dv_mm_stats *out) {
  DV_CHECK_NULL(out);
  memset(out, 0, sizeof *out);
  DV_CHECK_NULL(ctx);
  DV_CHECK_HANDLE(ctx, DV_HANDLE_CONTEXT);
  dv_memory_state *m = ctx->memory;
  if (!m->mm.stats) return dv__error(DV_ERR_NOT_SUPPORTED, "memory manager \"%s\" keeps no statistics", m->mm.name);
  dv_status rc = m->mm.stats(m->mm_state, out);
  if (rc) memset(out, 0, sizeof *out); /* a plugged-in manager may have filled part of it */
  return rc;
}

dv_status dv_memory_trim(dv_context *ctx) {
  DV_CHECK_NULL(ctx);
  DV_CHECK_HANDLE(ctx, DV_HANDLE_CONTEXT);
  DV_CHECK_NOT_IN_CALLBACK();
  dv_status rc = dv__flush(ctx);
  dv_memory_state *m = ctx->memory;
  dv_status r2 = m->mm.trim ? m->mm.trim(m->mm_state) : DV_OK;
  /* then what the backend itself keeps (the host simulator's block cache) */
  dv_status r3 = dv__be_has(ctx->be, DV_BCAP_TRIM) ? ctx->be->mem_trim(ctx->bst) : DV_OK;
  dv_status r4 = dv__pinned_trim(ctx); /* and the pinned pool's cached blocks */
  return rc ? rc : r2 ? r2 : r3 ? r3 : r4;
}

dv_status dv_memory_snapshot_json(dv_context *ctx, char *buf, size_t cap, size_t *needed) {
  DV_CHECK_NULL(needed);
  *needed = 0;
  DV_CHECK_NULL(ctx);
  DV_CHECK_HANDLE(ctx, DV_HANDLE_CONTEXT);
  dv_memory_state *m = ctx->memory;
  if (m->mm.init == dv__mm_pool.init) return dv__pool_snapshot(m->mm_state, buf, cap, needed);
  if (!dv_tracking_enabled())
    return dv__error(DV_ERR_NOT_SUPPORTED,
                     "snapshots are kept by the pool (or by tracking: dv_tracking_enable); this context uses \"%s\"",
                     m->mm.name);
  /* {"manager":NAME,"tracking":LISTING}, the whole document or nothing */
  char head[160];
  int hn = snprintf(head, sizeof head, "{\"manager\":\"%.100s\",\"tracking\":", m->mm.name);
  size_t len = (size_t)hn + dv__track_json(ctx, NULL, 0) + 1;
  for (int tries = 0; tries < 8; tries++) {
    size_t room = len + 64;
    char *w = dv__malloc(room);
    if (!w) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate %zu bytes for the snapshot", room);
    memcpy(w, head, (size_t)hn);
    size_t got = (size_t)hn + dv__track_json(ctx, w + hn, room - (size_t)hn);
    if (got + 1 < room) {
      w[got++] = '}';
      w[got] = 0;
      *needed = got;
      dv_status rc = DV_OK;
      if (buf && got >= cap) rc = dv__error(DV_ERR_INVALID_ARGUMENT, "buffer of %zu bytes is too small; %zu needed", cap, got + 1);
      else if (buf) memcpy(buf, w, got + 1);
      dv__free(w);
      return rc;
    }
    dv__free(w);
    len = got + 1;
  }
  return dv__error(DV_ERR_BUSY, "the handles changed too fast to list them");
}

static dv_status dv__device_alloc_in(dv_context *ctx, size_t bytes, dv_stream *stream, dv_block *out);
/* dv__device_alloc in an NVTX range (ranges on: nvtx.c). */
static __attribute__((noinline, cold)) dv_status dv__device_alloc_ranged(dv_context *ctx, size_t bytes,
                                                                        dv_stream *stream, dv_block *out) {
  dv__nvtx_push("devarray allocation");
  dv_status rc = dv__device_alloc_in(ctx, bytes, stream, out);
  dv__nvtx_pop();
  return rc;
}
dv_status dv__device_alloc(dv_context *ctx, size_t bytes, dv_stream *stream, dv_block *out) {
  if (DV_NVTX_RANGES()) return dv__device_alloc_ranged(ctx, bytes, stream, out);
  return dv__device_alloc_in(ctx, bytes, stream, out);
}
static inline __attribute__((always_inline)) dv_status dv__device_alloc_in(dv_context *ctx, size_t bytes,
                                                                          dv_stream *stream, dv_block *out) {
  out->buf = NULL;
  out->offset = 0;
  /* Refused in a stream callback whichever manager would serve it (a pool
   * hit reaches no driver, a miss does: the rule does not depend on that). */
  if (dv__in_callback()) return dv__callback_refused("an allocation of device memory");
  dv_memory_state *m = ctx->memory;
  dv_status rc = m->mm.alloc(m->mm_state, bytes, stream, out);
  if (rc != DV_ERR_OUT_OF_MEMORY) return rc;
  pthread_mutex_lock(&ctx->stats.lock);
  ctx->stats.oom_retries++;
  pthread_mutex_unlock(&ctx->stats.lock);
  dv_status frc = dv__flush(ctx);
  if (frc) dv__log(DV_LOG_ERROR, "flush before retrying the allocation failed");
  rc = m->mm.alloc(m->mm_state, bytes, stream, out);
  int asked = 0;
  if (rc == DV_ERR_OUT_OF_MEMORY) rc = dv__mem_oom_retry(ctx, bytes, stream, out, &asked);
  if (rc == DV_ERR_OUT_OF_MEMORY) {
    char detail[768], handler[96] = "";
    snprintf(detail, sizeof detail, "%s", dv_last_error());
    if (asked) snprintf(handler, sizeof handler, "; the out-of-memory handler was asked %d time%s", asked, asked == 1 ? "" : "s");
    size_t f = 0, t = 0;
    m->mm.mem_info(m->mm_state, &f, &t);
    return dv__error(DV_ERR_OUT_OF_MEMORY,
                     "cannot allocate %zu bytes of device memory (%zu free of %zu, after one "
                     "flush of the pending-deallocation queue%s): %s",
                     bytes, f, t, handler, detail);
  }
  return rc;
}

bool dv__mm_block_check(dv_context *ctx, dv_block blk, size_t bytes) {
  const dv_memory_manager *mm = &ctx->memory->mm;
  if (!dv__be_has(ctx->be, DV_BCAP_BUFFER_CHECK)) return true;
  char saved[1024];
  snprintf(saved, sizeof saved, "%s", dv_last_error());
  dv_status rc = ctx->be->buffer_check(ctx->bst, blk.buf, false, blk.offset, bytes);
  if (rc) {
    dv__log(DV_LOG_DEBUG, "memory manager \"%s\": block %p+%zu is not the backend's memory (%s)",
            mm->name ? mm->name : "?", blk.buf, blk.offset, dv_last_error());
    dv__error(DV_OK, "%s", saved); /* the allocation succeeded: keep the thread's message */
  }
  return rc == DV_OK;
}
