/*
 * The CUDA backend's interop methods (backend table version 4): IPC
 * handles through the driver's cuIpc* calls, and ordering a consumer's
 * native stream after devarray's work (DLPack's stream handshake).
 *
 * Not run in CI (no GPU there): written against the driver API's
 * documented contract.  cuIpcGetMemHandle describes the whole allocation
 * containing the pointer; devarray passes the allocation's base (a device
 * buffer is a cuMemAlloc result, a pool segment for pooled arrays), and the
 * array layer's handle header carries the array's offset in it.
 * cuIpcOpenMemHandle maps the allocation once per process and context;
 * opening the same handle twice in one process is the driver's business
 * (it refuses or shares the mapping, by version).  Opening in the
 * exporting process is refused before the driver sees it (the driver
 * refuses too).
 */
#include <string.h>

#include "fam.h"

_Static_assert(sizeof(dv_CUipcMemHandle) == 64 && sizeof(dv_CUipcMemHandle) <= DV_BIPC_PAYLOAD,
               "cuIpcMemHandle is CU_IPC_HANDLE_SIZE (64) bytes");

dv_status dv__cub_stream_order_native(void *state, dv_bstream *s, void *native) {
  cu_state *st = state;
  CU_ENTER(st);
  dv_CUevent e = NULL;
  CU_TRY(cu.cuEventCreate(&e, DV_CU_EVENT_DISABLE_TIMING), DV_CU_E_cuEventCreate, "");
  dv_CUresult r = cu.cuEventRecord(e, s ? s->s : NULL);
  if (r == DV_CUDA_SUCCESS) r = cu.cuStreamWaitEvent((dv_CUstream)native, e, 0);
  /* The wait holds what it needs: the event can go now. */
  cu.cuEventDestroy_v2(e);
  if (r != DV_CUDA_SUCCESS) return cu_fail_in(r, "ordering the consumer's stream", DV_CU_E_cuEventRecord, DV_CU_E_cuStreamWaitEvent);
  return DV_OK;
}

dv_status dv__cub_ipc_export(void *state, void *buf, unsigned char *payload) {
  cu_state *st = state;
  CU_ENTER(st);
  dv_CUipcMemHandle h;
  memset(&h, 0, sizeof h);
  CU_TRY(cu.cuIpcGetMemHandle(&h, (dv_CUdeviceptr)(uintptr_t)buf), DV_CU_E_cuIpcGetMemHandle, "");
  memset(payload, 0, DV_BIPC_PAYLOAD);
  memcpy(payload, &h, sizeof h);
  return DV_OK;
}

dv_status dv__cub_ipc_open(void *state, const unsigned char *payload, void **native, size_t *bytes,
                           void **token) {
  cu_state *st = state;
  *native = NULL, *bytes = 0, *token = NULL;
  CU_ENTER(st);
  dv_CUipcMemHandle h;
  memcpy(&h, payload, sizeof h);
  dv_CUdeviceptr p = 0;
  dv_CUresult r = cu.cuIpcOpenMemHandle_v2(&p, h, DV_CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
  if (cu_code(r) == DV_CUDA_ERROR_INVALID_VALUE || cu_code(r) == DV_CUDA_ERROR_INVALID_HANDLE) {
    const char *name = NULL;
    cu.cuGetErrorName(r, &name);
    return dv__error(DV_ERR_INVALID_ARGUMENT,
                     "%s refused the IPC handle (%s): stale (the exporter freed the memory or "
                     "exited), or from another device", st->drv->vendor, name ? name : "?");
  }
  if (r != DV_CUDA_SUCCESS) return cu_fail(r, DV_CU_E_cuIpcOpenMemHandle_v2, "");
  dv_CUdeviceptr base = 0;
  size_t size = 0;
  r = cu.cuMemGetAddressRange_v2(&base, &size, p);
  if (r != DV_CUDA_SUCCESS) {
    cu.cuIpcCloseMemHandle(p);
    return cu_fail(r, DV_CU_E_cuMemGetAddressRange_v2, "");
  }
  *native = (void *)(uintptr_t)p;
  *bytes = size - (size_t)(p - base);
  *token = (void *)(uintptr_t)p;
  return DV_OK;
}

dv_status dv__cub_ipc_close(void *state, void *token) {
  cu_state *st = state;
  CU_ENTER(st);
  CU_TRY(cu.cuIpcCloseMemHandle((dv_CUdeviceptr)(uintptr_t)token), DV_CU_E_cuIpcCloseMemHandle, "");
  return DV_OK;
}
