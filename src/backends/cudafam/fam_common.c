/*
 * What every file of the CUDA family's core uses (fam.c: devices, memory,
 * copies, streams; fam_kernel.c: kernels, native handles, the copy kernels;
 * fam_staging.c, fam_ipc.c): the driver's errors as devarray statuses, and
 * making a context current.  A file of its
 * own so that the two above call down into it and never each other in a
 * circle (scripts/check-layers).
 */
#include <stdio.h>
#include <string.h>

#include "fam.h"

dv_status dv__cu_status(int r) {
  switch (r) {
    case DV_CUDA_SUCCESS: return DV_OK;
    case DV_CUDA_ERROR_OUT_OF_MEMORY: return DV_ERR_OUT_OF_MEMORY;
    case DV_CUDA_ERROR_NOT_READY: return DV_ERR_NOT_READY;
    case DV_CUDA_ERROR_INVALID_VALUE:
    case DV_CUDA_ERROR_INVALID_HANDLE: return DV_ERR_INVALID_ARGUMENT;
    case DV_CUDA_ERROR_NO_DEVICE:
    case DV_CUDA_ERROR_INVALID_DEVICE: return DV_ERR_BACKEND_UNAVAILABLE;
    /* No usable context on the thread, or one released: a use after
     * close, never the device's fault. */
    case DV_CUDA_ERROR_INVALID_CONTEXT:
    case 709: /* CUDA_ERROR_CONTEXT_IS_DESTROYED */
      return DV_ERR_MISUSE;
    /* Faults that leave the context unusable (the reference: "the process
     * must be terminated and relaunched"), and a driver shutting down. */
    case DV_CUDA_ERROR_DEINITIALIZED:
    case DV_CUDA_ERROR_ILLEGAL_ADDRESS:
    case 702: /* LAUNCH_TIMEOUT */
    case 214: /* ECC_UNCORRECTABLE */
    case 714: /* HARDWARE_STACK_ERROR */
    case 715: /* ILLEGAL_INSTRUCTION */
    case 716: /* MISALIGNED_ADDRESS */
    case 717: /* INVALID_ADDRESS_SPACE */
    case 718: /* INVALID_PC */
    case DV_CUDA_ERROR_LAUNCH_FAILED: return DV_ERR_DEVICE_LOST;
    case DV_CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED:
    case DV_CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED: return DV_ERR_MISUSE;
    case DV_CUDA_ERROR_NOT_SUPPORTED: return DV_ERR_NOT_SUPPORTED;
    case DV_CUDA_ERROR_NOT_FOUND: return DV_ERR_INVALID_ARGUMENT;
    case DV_CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES: return DV_ERR_LAUNCH_CONFIG;
    default: return DV_ERR_DRIVER;
  }
}

const char *dv__cu_name(const dv_cu_driver *drv, dv_cu_entry e) {
  return e >= 0 && e < DV_CU_E_COUNT && drv->names[e] ? drv->names[e] : "?";
}

/* The driver's own name and text for r (its cuGetErrorName/String, given
 * the driver's own code), as "NAME (code): text", with the status and the
 * number of the CUDA code of the same meaning. */
static dv_status cu_failed(const dv_cu_driver *drv, dv_CUresult r, const char *what) {
  const char *name = NULL, *text = NULL;
  const dv_cu_api *api = drv->api;
  if (api->cuGetErrorName) api->cuGetErrorName(r, &name);
  if (api->cuGetErrorString) api->cuGetErrorString(r, &text);
  dv_CUresult c = dv__cu_code(drv, r);
  return dv__error(dv__cu_status(c), "%s %s failed: %s (%d): %s", drv->vendor, what,
                   name ? name : "unknown error", c, text ? text : "");
}

/* A failed driver call: devarray's status, with the driver's name and code kept. */
dv_status dv__cu_fail(const dv_cu_driver *drv, dv_CUresult r, dv_cu_entry e, const char *note) {
  char what[256];
  snprintf(what, sizeof what, "%s%s", dv__cu_name(drv, e), note ? note : "");
  return cu_failed(drv, r, what);
}

dv_status dv__cu_fail_in(const dv_cu_driver *drv, dv_CUresult r, const char *doing, dv_cu_entry e1,
                         dv_cu_entry e2) {
  char what[256];
  if (e2 == DV_CU_E_NONE) snprintf(what, sizeof what, "%s (%s)", doing, dv__cu_name(drv, e1));
  else snprintf(what, sizeof what, "%s (%s / %s)", doing, dv__cu_name(drv, e1), dv__cu_name(drv, e2));
  return cu_failed(drv, r, what);
}

/* Make the context current for one call (cheap when it already is). */
dv_status dv__cu_enter_scope(cu_state *st, cu_scope *sc) {
  dv_CUcontext cur = NULL;
  sc->set = false;
  if (atomic_load(st->drv->forked))
    return dv__error(DV_ERR_MISUSE, "a %s context made before fork() used in the child process: the %s driver "
                                    "does not support that; create contexts after fork (or use spawn)",
                     st->drv->vendor, st->drv->vendor);
  if (cu.cuCtxGetCurrent(&cur) == DV_CUDA_SUCCESS && cur == st->ctx) return DV_OK;
  CU_TRY(cu.cuCtxSetCurrent(st->ctx), DV_CU_E_cuCtxSetCurrent, "");
  sc->api = st->drv->api;
  sc->prev = cur;
  sc->set = true;
  return DV_OK;
}

/* Put back the context that was current before (a released one too: it is
 * the caller's; cuCtxSetCurrent refuses nothing devarray made). */
void dv__cu_leave(cu_scope *sc) {
  if (sc->set) sc->api->cuCtxSetCurrent(sc->prev);
  sc->set = false;
}

/* A table of n elements with room for one more: the same, or a larger copy
 * (the old one freed; *cap updated); NULL when there is no memory. */
void *dv__cu_grow(void *table, size_t n, size_t *cap, size_t elem, size_t first) {
  if (n < *cap) return table;
  size_t want = *cap ? 2 * *cap : first;
  void *a = dv__malloc(want * elem);
  if (!a) return NULL;
  if (n) memcpy(a, table, n * elem);
  dv__free(table);
  *cap = want;
  return a;
}

void dv__cu_exported(cu_state *st, void *buf) {
  pthread_mutex_lock(&st->fence_lock);
  bool have = false;
  for (size_t i = 0; i < st->nexported && !have; i++) have = st->exported[i] == buf;
  void **t = have ? NULL : dv__cu_grow(st->exported, st->nexported, &st->cexported, sizeof *t, 16);
  if (t) {
    st->exported = t;
    st->exported[st->nexported++] = buf;
  } else if (!have) {
    st->exported_lost = true; /* no memory to list it: every free waits for the whole context */
  }
  pthread_mutex_unlock(&st->fence_lock);
}
