/*
 * Host arrays pinned or mapped for a while: the pinned and mapped scopes,
 * and ROC's register/deregister.  One registration (the memory layer's
 * dv__host_register) per allocation, counted: scopes and dv_array_register
 * share it, and the last holder unregisters at once (never through the
 * deferred queue: Numba's rule that temporary pins are never deferred).
 */
#include <string.h>

#include "array.h"

struct dv_scope {
  dv_context *ctx;
  size_t n;
  dv_array **arrays; /* retained host arrays whose allocation we registered */
  dv_alloc **views;  /* mapped scope: the device views' allocations (retained) */
};

dv_status dv__arrays_init(dv_context *ctx) {
  dv_array_state *st = dv__calloc(1, sizeof *st);
  if (!st) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate the array layer's state");
  ctx->arrays = st;
  dv__arrays_track_init(); /* how tracking lists arrays (once would do; it is idempotent) */
  return DV_OK;
}

void dv__arrays_fini(dv_context *ctx) {
  dv__free(ctx->arrays);
  ctx->arrays = NULL;
}

/* Take one registration reference on a's allocation (registering if first). */
static dv_status dv__reg_acquire(dv_alloc *a) {
  dv_context *ctx = a->ctx;
  pthread_mutex_lock(&a->reg_lock);
  dv_status rc = DV_OK;
  if (a->reg_count == 0) {
    if (a->bytes == 0) {
      a->reg_handle = NULL; /* nothing to page-lock */
    } else {
      rc = dv__host_register(ctx, a->host, a->bytes, &a->reg_handle, &a->reg_buf);
    }
  }
  if (!rc) a->reg_count++;
  pthread_mutex_unlock(&a->reg_lock);
  return rc;
}

static dv_status dv__reg_drop(dv_alloc *a) {
  dv_context *ctx = a->ctx;
  dv_status rc = DV_OK;
  pthread_mutex_lock(&a->reg_lock);
  if (a->reg_count > 0 && --a->reg_count == 0 && a->reg_handle) {
    rc = dv__host_unregister(ctx, a->reg_handle, a->bytes);
    a->reg_handle = NULL;
    a->reg_buf = NULL;
  }
  pthread_mutex_unlock(&a->reg_lock);
  return rc;
}

static bool dv__natively_pinned(const dv_alloc *a) {
  return a->kind == DV_MEM_PINNED || a->kind == DV_MEM_MAPPED;
}

static dv_status dv__scope_new(dv_context *ctx, size_t n, dv_scope **out) {
  dv_scope *s = dv__calloc(1, sizeof *s);
  dv_array **arr = s ? dv__calloc(n ? n : 1, sizeof *arr) : NULL;
  dv_alloc **views = arr ? dv__calloc(n ? n : 1, sizeof *views) : NULL;
  if (!s || !arr || !views) {
    dv__free(s);
    dv__free(arr);
    dv__free(views);
    return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate a scope");
  }
  s->ctx = ctx;
  s->arrays = arr;
  s->views = views;
  *out = s;
  return DV_OK;
}

/* Undo the first s->n registrations and free the scope. */
static dv_status dv__scope_close(dv_scope *s) {
  dv_status first = DV_OK;
  /* Device views of mapped memory die with the scope: their later use is an
   * error (the planner refuses device arrays without memory), not a crash. */
  for (size_t i = 0; i < s->n; i++) {
    if (!s->views[i]) continue;
    s->views[i]->buf = NULL;
    dv__alloc_release(s->views[i]);
  }
  for (size_t i = 0; i < s->n; i++) {
    dv_array *a = s->arrays[i];
    if (!dv__natively_pinned(a->alloc)) {
      dv_status rc = dv__reg_drop(a->alloc);
      if (rc && !first) first = rc;
    }
    dv_array_release(a);
  }
  dv__free(s->arrays);
  dv__free(s->views);
  dv__free(s);
  return first;
}

static dv_status dv__check_host_arrays(dv_context *ctx, size_t n, dv_array *const *arrays) {
  if (n > 0 && !arrays) return dv__error(DV_ERR_NULL_ARGUMENT, "arrays is NULL with n = %zu", n);
  for (size_t i = 0; i < n; i++) {
    if (!arrays[i]) return dv__error(DV_ERR_NULL_ARGUMENT, "arrays[%zu] is NULL", i);
    if (arrays[i]->alloc->ctx != ctx)
      return dv__error(DV_ERR_BACKEND_MISMATCH, "arrays[%zu] belongs to another context", i);
    if (!dv__is_host_side(arrays[i]))
      return dv__error(DV_ERR_INVALID_ARGUMENT, "arrays[%zu] is a device array, not host memory", i);
  }
  return DV_OK;
}

static dv_status dv__scope_fill(dv_scope *s, size_t n, dv_array *const *arrays) {
  for (size_t i = 0; i < n; i++) {
    dv_alloc *a = arrays[i]->alloc;
    if (!dv__natively_pinned(a)) {
      dv_status rc = dv__reg_acquire(a);
      if (rc) return rc;
    }
    s->arrays[s->n++] = dv_array_retain(arrays[i]);
  }
  return DV_OK;
}

dv_status dv_pinned_scope_begin(dv_context *ctx, size_t n, dv_array *const *arrays, dv_scope **scope) {
  DV_CHECK_NULL(scope);
  *scope = NULL;
  DV_CHECK_NULL(ctx);
  DV_CHECK_HANDLE(ctx, DV_HANDLE_CONTEXT);
  DV_CHECK_NOT_IN_CALLBACK();
  dv_status rc = dv__check_host_arrays(ctx, n, arrays);
  if (rc) return rc;
  dv_scope *s;
  rc = dv__scope_new(ctx, n, &s);
  if (rc) return rc;
  rc = dv__scope_fill(s, n, arrays);
  if (rc) {
    dv__scope_close(s);
    return rc;
  }
  atomic_fetch_add(&ctx->arrays->live_scopes, 1);
  *scope = s;
  return DV_OK;
}

dv_status dv_mapped_scope_begin(dv_context *ctx, size_t n, dv_array *const *arrays,
                                dv_array **device_views, dv_scope **scope) {
  DV_CHECK_NULL(scope);
  *scope = NULL;
  if (device_views)
    for (size_t i = 0; i < n; i++) device_views[i] = NULL;
  DV_CHECK_NULL(ctx);
  DV_CHECK_HANDLE(ctx, DV_HANDLE_CONTEXT);
  DV_CHECK_NOT_IN_CALLBACK();
  if (n > 0) DV_CHECK_NULL(device_views);
  dv_status rc = dv__check_host_arrays(ctx, n, arrays);
  if (rc) return rc;
  for (size_t i = 0; i < n; i++)
    if (arrays[i]->alloc->kind == DV_MEM_PINNED)
      return dv__error(DV_ERR_NOT_SUPPORTED, "arrays[%zu] is pinned but not mapped; use dv_mapped_array", i);
  dv_scope *s;
  rc = dv__scope_new(ctx, n, &s);
  if (rc) return rc;
  rc = dv__scope_fill(s, n, arrays);
  for (size_t i = 0; i < n && !rc; i++) {
    dv_array *h = arrays[i];
    void *buf = h->alloc->kind == DV_MEM_MAPPED ? h->alloc->buf : h->alloc->reg_buf;
    if (!buf && h->alloc->bytes > 0) {
      rc = dv__error(DV_ERR_NOT_SUPPORTED, "backend %s cannot map host memory", ctx->be->name);
      break;
    }
    dv_alloc *d = dv__alloc_new(ctx, DV_MEM_DEVICE);
    if (!d) {
      rc = dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate a mapped view");
      break;
    }
    d->buf = buf;
    d->bytes = h->alloc->bytes;
    d->keep = dv_array_retain(h);
    s->views[i] = d; /* the scope's reference */
    rc = dv__array_new(d, h->dtype, h->ndim, h->shape, h->strides, h->offset, &device_views[i]);
  }
  if (rc) {
    for (size_t i = 0; i < n; i++) dv_array_release(device_views[i]), device_views[i] = NULL;
    dv__scope_close(s);
    return rc;
  }
  atomic_fetch_add(&ctx->arrays->live_scopes, 1);
  *scope = s;
  return DV_OK;
}

dv_status dv_scope_end(dv_scope *scope) {
  if (!scope) return DV_OK;
  DV_CHECK_NOT_IN_CALLBACK();
  dv_context *ctx = scope->ctx;
  /* Queued work may still read the memory: wait, then unregister at once. */
  dv_status rc = dv__bstream_wait(ctx, NULL);
  dv_status r2 = dv__scope_close(scope);
  atomic_fetch_sub(&ctx->arrays->live_scopes, 1);
  return rc ? rc : r2;
}

dv_status dv_array_register(dv_array *a) {
  DV_CHECK_NULL(a);
  DV_CHECK_ARRAY(a);
  DV_CHECK_NOT_IN_CALLBACK();
  if (!dv__is_host_side(a)) return dv__error(DV_ERR_INVALID_ARGUMENT, "only host arrays can be registered");
  dv_alloc *al = a->alloc;
  if (dv__natively_pinned(al)) return DV_OK;
  pthread_mutex_lock(&al->reg_lock);
  bool already = al->user_registered;
  pthread_mutex_unlock(&al->reg_lock);
  if (already) return dv__error(DV_ERR_MISUSE, "the array's memory is already registered");
  dv_status rc = dv__reg_acquire(al);
  if (rc) return rc;
  pthread_mutex_lock(&al->reg_lock);
  al->user_registered = true;
  pthread_mutex_unlock(&al->reg_lock);
  return DV_OK;
}

dv_status dv_array_unregister(dv_array *a) {
  DV_CHECK_NULL(a);
  DV_CHECK_ARRAY(a);
  DV_CHECK_NOT_IN_CALLBACK();
  dv_alloc *al = a->alloc;
  if (dv__natively_pinned(al)) return DV_OK;
  pthread_mutex_lock(&al->reg_lock);
  bool was = al->user_registered;
  al->user_registered = false;
  pthread_mutex_unlock(&al->reg_lock);
  if (!was) return dv__error(DV_ERR_MISUSE, "the array's memory is not registered");
  dv_context *ctx = al->ctx;
  dv_status rc = dv__bstream_wait(ctx, NULL);
  dv_status r2 = dv__reg_drop(al);
  return rc ? rc : r2;
}

int dv_array_is_pinned(const dv_array *a) {
  if (!a || dv__handle_check(&a->hdr, DV_HANDLE_ARRAY, __func__) || !dv__is_host_side(a)) return 0;
  if (dv__natively_pinned(a->alloc)) return 1;
  pthread_mutex_lock(&a->alloc->reg_lock);
  int r = a->alloc->reg_count > 0;
  pthread_mutex_unlock(&a->alloc->reg_lock);
  return r;
}
