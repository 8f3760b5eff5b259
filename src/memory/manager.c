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
static dv_status dv__direct_alloc(void *state, size_t bytes, dv_stream *stream, dv_block *out) {
  (void)stream;
  dv_context *ctx = state;
  *out = (dv_block){NULL, 0, NULL};
  if (bytes == 0) return dv__error(DV_ERR_INVALID_ARGUMENT, "allocation of 0 bytes");
  return ctx->be->mem_alloc(ctx->bst, bytes, &out->buf);
}

static dv_status dv__direct_free(void *state, dv_block block, size_t bytes, dv_stream *stream) {
  (void)bytes;
  (void)stream;
  dv_context *ctx = state;
  if (!block.buf) return dv__error(DV_ERR_INVALID_ARGUMENT, "free of a NULL device buffer");
  return ctx->be->mem_free(ctx->bst, block.buf);
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
  dv_status rc = DV_OK;
  if (m->mm.stream_destroyed) rc = dv__stream_key_create(ctx, dv__mm_stream_gone, m, &m->hook_key);
  if (rc) {
    dv__free(m);
    return rc;
  }
  dv__staging_init(&m->staging);
  ctx->memory = m; /* the manager's init may ask for the context's manager */
  rc = m->mm.init(ctx, m->mm.user, &m->mm_state);
  if (rc) {
    ctx->memory = NULL;
    dv__staging_fini(ctx, &m->staging);
    dv__stream_key_delete(ctx, m->hook_key);
    dv__free(m);
  }
  return rc;
}

void dv__memory_fini(dv_context *ctx) {
  dv_memory_state *m = ctx->memory;
  if (!m) return;
  if (m->mm.fini) m->mm.fini(m->mm_state); /* returns every cached segment */
  dv__staging_fini(ctx, &m->staging);
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
  return rc ? rc : r2 ? r2 : r3;
}

dv_status dv_memory_snapshot_json(dv_context *ctx, char *buf, size_t cap, size_t *needed) {
  DV_CHECK_NULL(needed);
  *needed = 0;
  DV_CHECK_NULL(ctx);
  DV_CHECK_HANDLE(ctx, DV_HANDLE_CONTEXT);
  dv_memory_state *m = ctx->memory;
  if (m->mm.init != dv__mm_pool.init)
    return dv__error(DV_ERR_NOT_SUPPORTED, "snapshots are kept by the pool; this context uses \"%s\"", m->mm.name);
  return dv__pool_snapshot(m->mm_state, buf, cap, needed);
}

dv_status dv__device_alloc(dv_context *ctx, size_t bytes, dv_stream *stream, dv_block *out) {
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
  if (rc == DV_ERR_OUT_OF_MEMORY) {
    char detail[768];
    snprintf(detail, sizeof detail, "%s", dv_last_error());
    size_t f = 0, t = 0;
    m->mm.mem_info(m->mm_state, &f, &t);
    return dv__error(DV_ERR_OUT_OF_MEMORY,
                     "cannot allocate %zu bytes of device memory (%zu free of %zu, after one "
                     "flush of the pending-deallocation queue): %s",
                     bytes, f, t, detail);
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
