/*
 * The driver's stream-ordered allocator (the DRIVER_POOL group of
 * ../backend_methods.def), beneath the "async" memory manager
 * (src/memory/async.c): CUDA 11.2's memory pools, cuMemAllocFromPoolAsync
 * and cuMemFreeAsync, and HIP's (ROCm 5.2) through hip_driver.c's
 * translations.  The pool is the device's default one, its current one
 * (whatever pool another library made current: memory shared with it), or
 * one made for the context (cuMemPoolCreate, destroyed at close).
 *
 * Frees: cuMemFreeAsync on the stream the memory belongs to, after the work
 * queued there (the memory layer has ordered every other stream's use onto
 * that stream).  Two cases go through mem_free's fenced path instead
 * (cuMemFree takes stream-ordered memory too, without synchronizing): a
 * buffer handed out natively, which foreign streams may use (its free waits
 * for the whole context, as for any buffer), and a stream under graph
 * capture, where a cuMemFreeAsync would be captured into the graph rather
 * than run (mem_free fences what it can without breaking the capture, and
 * holds the free back while the legacy stream would join one).
 * A cuMemFreeAsync that fails takes the same path, so that the memory still
 * goes back (the failure is reported).
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "fam.h"

typedef struct cu_pool {
  dv_CUmemoryPool pool;
  bool owned; /* made by pool_open (cuMemPoolCreate): destroyed by pool_close */
} cu_pool;

/* The first pool entry the driver lacks, or DV_CU_E_NONE. */
static dv_cu_entry cu_pool_missing(const cu_state *st) {
  const dv_cu_api *a = st->drv->api;
  if (!a->cuMemAllocFromPoolAsync) return DV_CU_E_cuMemAllocFromPoolAsync;
  if (!a->cuMemFreeAsync) return DV_CU_E_cuMemFreeAsync;
  if (!a->cuMemPoolCreate) return DV_CU_E_cuMemPoolCreate;
  if (!a->cuMemPoolDestroy) return DV_CU_E_cuMemPoolDestroy;
  if (!a->cuMemPoolSetAttribute) return DV_CU_E_cuMemPoolSetAttribute;
  if (!a->cuMemPoolGetAttribute) return DV_CU_E_cuMemPoolGetAttribute;
  if (!a->cuMemPoolTrimTo) return DV_CU_E_cuMemPoolTrimTo;
  if (!a->cuDeviceGetDefaultMemPool) return DV_CU_E_cuDeviceGetDefaultMemPool;
  if (!a->cuDeviceGetMemPool) return DV_CU_E_cuDeviceGetMemPool;
  return DV_CU_E_NONE;
}

dv_status dv__cub_pool_open(void *state, const dv_bpool_config *c, void **out) {
  *out = NULL;
  cu_state *st = state;
  CU_ENTER(st);
  dv_cu_entry miss = cu_pool_missing(st);
  if (miss != DV_CU_E_NONE)
    return dv__error(
        DV_ERR_NOT_SUPPORTED,
        "the %s driver has no stream-ordered allocator (no %s; CUDA 11.2 and ROCm 5.2 have it): "
        "memory_manager=async needs it; use memory_manager=pool",
        st->drv->vendor, dv__cu_name(st->drv, miss));
  int sup = 0;
  dv_CUresult r =
      cu.cuDeviceGetAttribute(&sup, DV_CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, st->dev);
  if (r) return cu_fail(r, DV_CU_E_cuDeviceGetAttribute, " (memory pools supported)");
  if (!sup)
    return dv__error(
        DV_ERR_NOT_SUPPORTED,
        "%s device %d (%s) does not support memory pools: memory_manager=async needs them; use "
        "memory_manager=pool",
        st->drv->vendor, st->ordinal, st->info.name);
  cu_pool *p = dv__calloc(1, sizeof *p);
  if (!p) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate the driver pool's record");
  dv_cu_entry e;
  if (c->kind == DV_BPOOL_PRIVATE) {
    dv_CUmemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = DV_CU_MEM_ALLOCATION_TYPE_PINNED;
    props.handleTypes = DV_CU_MEM_HANDLE_TYPE_NONE;
    props.location.type = DV_CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = st->dev;
    r = cu.cuMemPoolCreate(&p->pool, &props), e = DV_CU_E_cuMemPoolCreate;
    p->owned = r == DV_CUDA_SUCCESS;
  } else if (c->kind == DV_BPOOL_DEFAULT) {
    r = cu.cuDeviceGetDefaultMemPool(&p->pool, st->dev), e = DV_CU_E_cuDeviceGetDefaultMemPool;
  } else {
    r = cu.cuDeviceGetMemPool(&p->pool, st->dev), e = DV_CU_E_cuDeviceGetMemPool;
  }
  if (!r && c->set_threshold) {
    uint64_t v = c->release_threshold;
    r = cu.cuMemPoolSetAttribute(p->pool, DV_CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &v);
    e = DV_CU_E_cuMemPoolSetAttribute;
  }
  if (r) {
    dv_status rc = cu_fail(r, e, e == DV_CU_E_cuMemPoolSetAttribute ? " (release threshold)" : "");
    if (p->owned) cu.cuMemPoolDestroy(p->pool);
    dv__free(p);
    return rc;
  }
  *out = p;
  return DV_OK;
}

void dv__cub_pool_close(void *state, void *pool) {
  cu_state *st = state;
  cu_pool *p = pool;
  CU_SCOPE(sc);
  if (p->owned && dv__cu_enter_scope(st, &sc) == DV_OK) {
    dv_CUresult r = cu.cuMemPoolDestroy(p->pool);
    if (r) { /* once more once the device is idle (its frees done), else the pool is lost */
      cu.cuCtxSynchronize();
      r = cu.cuMemPoolDestroy(p->pool);
    }
    if (r) {
      cu_fail(r, DV_CU_E_cuMemPoolDestroy, "");
      dv__log(DV_LOG_WARN, "%s", dv_last_error());
    }
  }
  dv__free(p);
}

dv_status dv__cub_alloc_async(void *state, void *pool, dv_bstream *s, size_t bytes, void **buf) {
  *buf = NULL;
  cu_state *st = state;
  cu_pool *p = pool;
  CU_ENTER(st);
  dv_CUdeviceptr d = 0;
  CU_TRY(cu.cuMemAllocFromPoolAsync(&d, bytes, p->pool, s->s), DV_CU_E_cuMemAllocFromPoolAsync, "");
  *buf = (void *)(uintptr_t)d;
  return DV_OK;
}

/* Whether buf was handed out natively (fam.c keeps the list; a free takes
 * it off there). */
static bool cu_is_exported(cu_state *st, void *buf) {
  pthread_mutex_lock(&st->fence_lock);
  bool yes = st->exported_lost;
  for (size_t i = 0; !yes && i < st->nexported; i++) yes = st->exported[i] == buf;
  pthread_mutex_unlock(&st->fence_lock);
  return yes;
}

dv_status dv__cub_free_async(void *state, dv_bstream *s, void *buf) {
  cu_state *st = state;
  CU_ENTER(st);
  dv_CUstreamCaptureStatus cs = DV_CU_STREAM_CAPTURE_STATUS_NONE;
  dv_CUresult r = cu.cuStreamIsCapturing(s->s, &cs);
  bool capturing = cu_code(r) == DV_CUDA_ERROR_STREAM_CAPTURE_IMPLICIT ||
                   (r == DV_CUDA_SUCCESS && cs != DV_CU_STREAM_CAPTURE_STATUS_NONE);
  if (capturing || cu_is_exported(st, buf)) return dv__cub_mem_free(state, buf);
  r = cu.cuMemFreeAsync((dv_CUdeviceptr)(uintptr_t)buf, s->s);
  if (!r) return DV_OK;
  /* Not queued: the memory still goes back, through the fenced free (after
   * every stream's queued work); the failure is reported all the same. */
  dv_status rc = cu_fail(r, DV_CU_E_cuMemFreeAsync, "");
  char why[512];
  snprintf(why, sizeof why, "%s", dv_last_error());
  dv_status r2 = dv__cub_mem_free(state, buf);
  if (r2) dv__log(DV_LOG_ERROR, "after %s: %s", why, dv_last_error());
  return dv__error(rc, "%s (the memory was freed after the device's queued work)", why);
}

dv_status dv__cub_pool_trim(void *state, void *pool, size_t keep) {
  cu_state *st = state;
  cu_pool *p = pool;
  CU_ENTER(st);
  CU_TRY(cu.cuMemPoolTrimTo(p->pool, keep), DV_CU_E_cuMemPoolTrimTo, "");
  return DV_OK;
}

dv_status dv__cub_pool_stats(void *state, void *pool, dv_bpool_stats *out) {
  memset(out, 0, sizeof *out);
  cu_state *st = state;
  cu_pool *p = pool;
  CU_ENTER(st);
  static const int attrs[5] = {
      DV_CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, DV_CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH,
      DV_CU_MEMPOOL_ATTR_USED_MEM_CURRENT, DV_CU_MEMPOOL_ATTR_USED_MEM_HIGH,
      DV_CU_MEMPOOL_ATTR_RELEASE_THRESHOLD};
  uint64_t v[5] = {0};
  for (int i = 0; i < 5; i++) {
    dv_CUresult r = cu.cuMemPoolGetAttribute(p->pool, attrs[i], &v[i]);
    if (r) return cu_fail(r, DV_CU_E_cuMemPoolGetAttribute, "");
  }
  *out = (dv_bpool_stats){v[0], v[1], v[2], v[3], v[4]};
  return DV_OK;
}
