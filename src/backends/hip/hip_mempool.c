/*
 * HIP's stream-ordered allocator (ROCm 5.2) as the CUDA driver API's memory
 * pools (../cudafam/fam_mempool.c, the "async" memory manager): the
 * translations of fam_symbols.def's pool entries, which
 * dv__hip_pools_install puts into hip_driver.c's table (above it: hip.c
 * calls it once the runtime is loaded).  HIP's pools take CUDA's
 * attribute numbers and CUmemPoolProps' layout (hip_runtime.h); streams
 * and results translate as everywhere (dv__hip_stream, HIP's own codes).
 * Where the runtime lacks any of the entries (they are optional, hip.c),
 * none is installed: the table's entries stay NULL and the manager is
 * refused, naming the call that is missing.
 */
#include <stdint.h>
#include <string.h>

#include "hip_internal.h"

#define H dv__hip_api
#define HP(p) ((dv_hipMemPool_t)(void *)(p))

_Static_assert(sizeof(dv_CUmemPoolProps) == sizeof(dv_hipMemPoolProps),
               "pool properties of one size");

static dv_CUresult t_cuMemAllocFromPoolAsync(dv_CUdeviceptr *p, size_t bytes, dv_CUmemoryPool pool,
                                             dv_CUstream s) {
  void *d = NULL;
  dv_CUresult r = (dv_CUresult)H.hipMallocFromPoolAsync(&d, bytes, HP(pool), dv__hip_stream(s));
  *p = r ? 0 : (dv_CUdeviceptr)(uintptr_t)d;
  return r;
}

static dv_CUresult t_cuMemFreeAsync(dv_CUdeviceptr p, dv_CUstream s) {
  return (dv_CUresult)H.hipFreeAsync((void *)(uintptr_t)p, dv__hip_stream(s));
}

static dv_CUresult t_cuMemPoolCreate(dv_CUmemoryPool *pool, const dv_CUmemPoolProps *props) {
  dv_hipMemPoolProps hp; /* the same numbers: allocation type, handle types, location */
  memset(&hp, 0, sizeof hp);
  hp.allocType = props->allocType;
  hp.handleTypes = props->handleTypes;
  hp.location.type = props->location.type;
  hp.location.id = props->location.id;
  hp.maxSize = props->maxSize;
  dv_hipMemPool_t h = NULL;
  dv_CUresult r = (dv_CUresult)H.hipMemPoolCreate(&h, &hp);
  *pool = r ? NULL : (dv_CUmemoryPool)(void *)h;
  return r;
}

static dv_CUresult t_cuMemPoolDestroy(dv_CUmemoryPool pool) {
  return (dv_CUresult)H.hipMemPoolDestroy(HP(pool));
}

static dv_CUresult t_cuMemPoolSetAttribute(dv_CUmemoryPool pool, dv_CUmemPool_attribute a,
                                           void *v) {
  return (dv_CUresult)H.hipMemPoolSetAttribute(HP(pool), a, v);
}

static dv_CUresult t_cuMemPoolGetAttribute(dv_CUmemoryPool pool, dv_CUmemPool_attribute a,
                                           void *v) {
  return (dv_CUresult)H.hipMemPoolGetAttribute(HP(pool), a, v);
}

static dv_CUresult t_cuMemPoolTrimTo(dv_CUmemoryPool pool, size_t keep) {
  return (dv_CUresult)H.hipMemPoolTrimTo(HP(pool), keep);
}

static dv_CUresult t_cuDeviceGetDefaultMemPool(dv_CUmemoryPool *pool, dv_CUdevice d) {
  dv_hipMemPool_t h = NULL;
  dv_CUresult r = (dv_CUresult)H.hipDeviceGetDefaultMemPool(&h, d);
  *pool = r ? NULL : (dv_CUmemoryPool)(void *)h;
  return r;
}

static dv_CUresult t_cuDeviceGetMemPool(dv_CUmemoryPool *pool, dv_CUdevice d) {
  dv_hipMemPool_t h = NULL;
  dv_CUresult r = (dv_CUresult)H.hipDeviceGetMemPool(&h, d);
  *pool = r ? NULL : (dv_CUmemoryPool)(void *)h;
  return r;
}

void dv__hip_pools_install(void) {
  if (!H.hipMallocFromPoolAsync || !H.hipFreeAsync || !H.hipMemPoolCreate || !H.hipMemPoolDestroy ||
      !H.hipMemPoolSetAttribute || !H.hipMemPoolGetAttribute || !H.hipMemPoolTrimTo ||
      !H.hipDeviceGetDefaultMemPool || !H.hipDeviceGetMemPool)
    return;
  dv_cu_api *t = &dv__hip_api_table;
  t->cuMemAllocFromPoolAsync = t_cuMemAllocFromPoolAsync;
  t->cuMemFreeAsync = t_cuMemFreeAsync;
  t->cuMemPoolCreate = t_cuMemPoolCreate;
  t->cuMemPoolDestroy = t_cuMemPoolDestroy;
  t->cuMemPoolSetAttribute = t_cuMemPoolSetAttribute;
  t->cuMemPoolGetAttribute = t_cuMemPoolGetAttribute;
  t->cuMemPoolTrimTo = t_cuMemPoolTrimTo;
  t->cuDeviceGetDefaultMemPool = t_cuDeviceGetDefaultMemPool;
  t->cuDeviceGetMemPool = t_cuDeviceGetMemPool;
}
