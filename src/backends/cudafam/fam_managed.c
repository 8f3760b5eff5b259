/*
 * The CUDA family's managed memory (issue 40): allocation
 * (cuMemAllocManaged), prefetch (cuMemPrefetchAsync) and advice
 * (cuMemAdvise), for CUDA and HIP alike.
 *
 *  - The hints are optional entries: CUDA 12.2+ drivers have the _v2
 *    entries (fam_symbols.def), which take a CUmemLocation, and they are
 *    used when present (CUDA 13's cuda.h maps both names to them); older
 *    ones have only the first (dv_cu_api.cuMemPrefetchAsync, cuMemAdvise),
 *    which take a device ordinal or CU_DEVICE_CPU, and so does HIP
 *    (hipMemPrefetchAsync, hipMemAdvise, hipCpuDeviceId).
 *    A driver with neither: DV_ERR_NOT_SUPPORTED.
 *  - A device without concurrent managed access
 *    (CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS = 0, read at open) is
 *    refused by the driver as a prefetch's destination and as the device an
 *    advice names: devarray says DV_ERR_NOT_SUPPORTED itself, with the
 *    reason, and calls nothing.  Prefetches to the host and the read-mostly
 *    advice go to the driver, which decides.
 *  - A prefetch marks its stream used (dv__cu_used), so a free of the
 *    memory waits for it, as for a copy (fam.c's fences).
 */
#include <stdio.h>

#include "fam.h"

dv_status dv__cub_managed_alloc(void *state, size_t bytes, int attach_global, void **buf) {
  *buf = NULL;
  cu_state *st = state;
  CU_ENTER(st);
  if (!st->info.managed_memory)
    return dv__error(DV_ERR_NOT_SUPPORTED, "device %s has no managed memory", st->info.name);
  dv_CUdeviceptr p = 0;
  CU_TRY(cu.cuMemAllocManaged(&p, bytes,
                              attach_global ? DV_CU_MEM_ATTACH_GLOBAL : DV_CU_MEM_ATTACH_HOST),
         DV_CU_E_cuMemAllocManaged, "");
  *buf = (void *)(uintptr_t)p;
  return DV_OK;
}

/* DV_ERR_NOT_SUPPORTED for the device as `what` when it has no concurrent
 * managed access. */
static dv_status cu_no_concurrent(const cu_state *st, const char *what) {
  return dv__error(DV_ERR_NOT_SUPPORTED,
                   "%s device %s has no concurrent managed access "
                   "(CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS "
                   "is 0): the driver cannot take it as %s",
                   st->drv->vendor, st->info.name, what);
}

static dv_CUmemLocation cu_location(const cu_state *st, int where) {
  dv_CUmemLocation l = {DV_CU_MEM_LOCATION_TYPE_HOST, 0};
  if (where == DV_LOCATION_DEVICE) l.type = DV_CU_MEM_LOCATION_TYPE_DEVICE, l.id = st->ordinal;
  return l;
}

static dv_CUdevice cu_device_or_cpu(const cu_state *st, int where) {
  return where == DV_LOCATION_DEVICE ? st->dev : DV_CU_DEVICE_CPU;
}

dv_status dv__cub_managed_prefetch(void *state, dv_bstream *s, dv_memref mem, size_t bytes,
                                   int where) {
  cu_state *st = state;
  if (where == DV_LOCATION_DEVICE && !st->concurrent_managed)
    return cu_no_concurrent(st, "a prefetch's destination");
  if (!cu.cuMemPrefetchAsync_v2 && !cu.cuMemPrefetchAsync)
    return dv__error(DV_ERR_NOT_SUPPORTED, "the %s driver has no %s", st->drv->vendor,
                     dv__cu_name(st->drv, DV_CU_E_cuMemPrefetchAsync_v2));
  CU_ENTER(st);
  if (cu.cuMemPrefetchAsync_v2)
    CU_TRY(cu.cuMemPrefetchAsync_v2(cu_ptr(mem), bytes, cu_location(st, where), 0, s->s),
           DV_CU_E_cuMemPrefetchAsync_v2, "");
  else
    CU_TRY(cu.cuMemPrefetchAsync(cu_ptr(mem), bytes, cu_device_or_cpu(st, where), s->s),
           DV_CU_E_cuMemPrefetchAsync_v2, "");
  dv__cu_used(st, s);
  return DV_OK;
}

dv_status dv__cub_managed_advise(void *state, dv_memref mem, size_t bytes, int advice, int where) {
  cu_state *st = state;
  bool names_device = advice == DV_MEM_ADVISE_SET_PREFERRED_LOCATION ||
                      advice == DV_MEM_ADVISE_SET_ACCESSED_BY ||
                      advice == DV_MEM_ADVISE_UNSET_ACCESSED_BY;
  if (names_device && where == DV_LOCATION_DEVICE && !st->concurrent_managed)
    return cu_no_concurrent(st, "the device an advice names");
  if (!cu.cuMemAdvise_v2 && !cu.cuMemAdvise)
    return dv__error(DV_ERR_NOT_SUPPORTED, "the %s driver has no %s", st->drv->vendor,
                     dv__cu_name(st->drv, DV_CU_E_cuMemAdvise_v2));
  CU_ENTER(st);
  if (cu.cuMemAdvise_v2)
    CU_TRY(cu.cuMemAdvise_v2(cu_ptr(mem), bytes, (dv_CUmem_advise)advice, cu_location(st, where)),
           DV_CU_E_cuMemAdvise_v2, "");
  else
    CU_TRY(cu.cuMemAdvise(cu_ptr(mem), bytes, (dv_CUmem_advise)advice, cu_device_or_cpu(st, where)),
           DV_CU_E_cuMemAdvise_v2, "");
  return DV_OK;
}
