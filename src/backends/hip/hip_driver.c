/*
 * The HIP driver (issue 26): a dv_cu_driver whose entry points are
 * translations with the CUDA driver API's prototypes that call AMD's HIP
 * runtime, so that the CUDA family's core (../cudafam/: fences, staging,
 * pitch fallbacks, IPC, the backend table) runs on AMD GPUs unchanged.
 * What differs from a rename:
 *
 *  - Results: HIP's own error codes (the ones HIP shares with CUDA are the
 *    same numbers), so that messages name HIP's error with HIP's words; the
 *    core reads their meaning through the driver's code (dv__hip_result:
 *    HIP's own codes as the CUDA code of the same meaning).  Messages name
 *    the HIP calls (fam_symbols.def's hip_name column).
 *  - Streams: CUDA's pseudo-handles, the legacy stream 0x1 and the
 *    per-thread stream 0x2, are HIP's NULL stream and hipStreamPerThread.
 *  - Device attributes: CUDA's numbers as HIP's (dv__hip_attribute); AMD has
 *    no opt-in for LDS beyond a default: the opt-in limit is the LDS size
 *    (kops.no_shared_optin), and there is no cuFuncSetAttribute.
 *  - 2-D copies: hipMemcpyParam2DAsync with hipMemoryType's numbers of the
 *    runtime's version (ROCm 5 and 6 differ); 3-D copies: one 2-D copy per
 *    slice (HIP_MEMCPY3D's fields are 32 bits wide in ROCm 5).
 *  - Contexts: HIP's primary contexts; cuCtxSynchronize is
 *    hipDeviceSynchronize (the context is current: the shared code enters
 *    it first); peer copies name devices by ordinal (the driver's copy_peer,
 *    with each context's device; no cuMemcpyPeerAsync).
 *  - Modules: hipModuleLoadData (HIP has no JIT log: the log buffers come
 *    back empty); cuFuncGetParamInfo is absent (NULL: the shared code says
 *    it cannot tell).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hip_internal.h"
#include "hiprtc.h"

dv_hip_api dv__hip_api;
atomic_int dv__hip_forked;
dv_hipError_t (*dv__hip_get_props)(void *prop, int device);
const char *dv__hip_lib_name = "libamdhip64";
static int hip_version;

#define H dv__hip_api

_Static_assert(sizeof(dv_CUipcMemHandle) == sizeof(dv_hipIpcMemHandle_t), "IPC handles of one size");
_Static_assert(sizeof(dv_CUDA_MEMCPY2D) == sizeof(dv_hip_Memcpy2D), "2-D descriptors of one layout");

dv_status dv__hip_driver_init(void) {
  int v = 0;
  dv_hipError_t r = H.hipRuntimeGetVersion(&v);
  if (r != DV_HIP_SUCCESS || v <= 0)
    return dv__error(DV_ERR_DRIVER, "HIP hipRuntimeGetVersion failed (%d): the runtime's version decides how "
                                    "copies name memory types", r);
  hip_version = v;
  return DV_OK;
}

int dv__hip_runtime_version(void) { return hip_version; }

/* ---- results ------------------------------------------------------------------------------ */

/* The translations return HIP's own error (the codes HIP shares with CUDA
 * are the same numbers), so that cuGetErrorName/String below name what HIP
 * said; the core reads a result's meaning through the driver's code
 * (dv__hip_result: HIP's own codes as the CUDA code of the same meaning). */
dv_CUresult dv__hip_result(dv_hipError_t e) {
  switch (e) {
    case 9:  /* hipErrorInvalidConfiguration */
    case 12: /* hipErrorInvalidPitchValue */
    case 13: /* hipErrorInvalidSymbol */
    case 17: /* hipErrorInvalidDevicePointer */
    case 21: /* hipErrorInvalidMemcpyDirection */
      return DV_CUDA_ERROR_INVALID_VALUE;
    case 53: return DV_CUDA_ERROR_LAUNCH_FAILED;    /* hipErrorPriorLaunchFailure */
    case 98: return DV_CUDA_ERROR_INVALID_HANDLE;   /* hipErrorInvalidDeviceFunction */
    case 1052: return DV_CUDA_ERROR_OUT_OF_MEMORY;  /* hipErrorRuntimeMemory (HSA) */
    case 1053: return 999;                          /* hipErrorRuntimeOther: CUDA_ERROR_UNKNOWN */
    default: return e;
  }
}

/* HIP's result as the translation's.  A result a translation makes itself,
 * without HIP (bad arguments, no memory), is a CUDA code HIP shares
 * (invalid value, out of memory, invalid device or context, not supported). */
static dv_CUresult R(dv_hipError_t e) { return (dv_CUresult)e; }

static dv_CUresult hip_code(dv_CUresult r) { return dv__hip_result(r); }

static dv_CUresult t_cuGetErrorName(dv_CUresult e, const char **s) {
  *s = H.hipGetErrorName(e);
  return *s ? DV_CUDA_SUCCESS : DV_CUDA_ERROR_INVALID_VALUE;
}

static dv_CUresult t_cuGetErrorString(dv_CUresult e, const char **s) {
  *s = H.hipGetErrorString(e);
  return *s ? DV_CUDA_SUCCESS : DV_CUDA_ERROR_INVALID_VALUE;
}

/* ---- pure translations -------------------------------------------------------------------- */

int dv__hip_attribute(int a) {
  switch (a) {
    case DV_CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: return DV_HIP_ATTR_MAX_THREADS_PER_BLOCK;
    case DV_CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X: return DV_HIP_ATTR_MAX_BLOCK_DIM_X;
    case DV_CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: return DV_HIP_ATTR_MAX_BLOCK_DIM_Y;
    case DV_CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: return DV_HIP_ATTR_MAX_BLOCK_DIM_Z;
    case DV_CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: return DV_HIP_ATTR_MAX_GRID_DIM_X;
    case DV_CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y: return DV_HIP_ATTR_MAX_GRID_DIM_Y;
    case DV_CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: return DV_HIP_ATTR_MAX_GRID_DIM_Z;
    case DV_CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: return DV_HIP_ATTR_MAX_SHARED_MEMORY_PER_BLOCK;
    case DV_CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY: return DV_HIP_ATTR_TOTAL_CONSTANT_MEMORY;
    case DV_CU_DEVICE_ATTRIBUTE_WARP_SIZE: return DV_HIP_ATTR_WARP_SIZE;
    case 11 /* CU_DEVICE_ATTRIBUTE_MAX_PITCH */: return DV_HIP_ATTR_MAX_PITCH;
    case DV_CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: return DV_HIP_ATTR_MULTIPROCESSOR_COUNT;
    case DV_CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY: return DV_HIP_ATTR_CAN_MAP_HOST_MEMORY;
    case DV_CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: return DV_HIP_ATTR_UNIFIED_ADDRESSING;
    case DV_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: return DV_HIP_ATTR_COMPUTE_CAPABILITY_MAJOR;
    case DV_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: return DV_HIP_ATTR_COMPUTE_CAPABILITY_MINOR;
    case DV_CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY: return DV_HIP_ATTR_MANAGED_MEMORY;
    case DV_CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS: return DV_HIP_ATTR_CONCURRENT_MANAGED_ACCESS;
    case DV_CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: return DV_HIP_ATTR_SHARED_MEM_PER_BLOCK_OPTIN;
    case DV_CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS: return DV_HIP_ATTR_CAN_USE_STREAM_WAIT_VALUE;
    case DV_CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED: return DV_HIP_ATTR_MEMORY_POOLS_SUPPORTED;
    default: return -1;
  }
}

int dv__hip_memory_type(int cu_type, int version) {
  bool rocm6 = version >= 60000000;
  if (cu_type == DV_CU_MEMORYTYPE_HOST) return rocm6 ? DV_HIP6_MEMORYTYPE_HOST : DV_HIP5_MEMORYTYPE_HOST;
  if (cu_type == DV_CU_MEMORYTYPE_DEVICE) return rocm6 ? DV_HIP6_MEMORYTYPE_DEVICE : DV_HIP5_MEMORYTYPE_DEVICE;
  return -1;
}

unsigned dv__hip_ipc_flags(unsigned f, int version) {
  unsigned lazy = version >= 60000000 ? DV_HIP6_IPC_MEM_LAZY_ENABLE_PEER_ACCESS : DV_HIP5_IPC_MEM_LAZY_ENABLE_PEER_ACCESS;
  return (f & DV_CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS ? lazy : 0) | (f & ~(unsigned)DV_CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
}

dv_hipStream_t dv__hip_stream(dv_CUstream s) {
  if (s == DV_CU_STREAM_LEGACY) return NULL;
  if (s == DV_CU_STREAM_PER_THREAD) return DV_HIP_STREAM_PER_THREAD;
  return (dv_hipStream_t)(void *)s;
}
#define HS(s) dv__hip_stream(s)

dv_CUresult dv__hip_copy2d(const dv_CUDA_MEMCPY2D *c, int version, dv_hip_Memcpy2D *o) {
  memset(o, 0, sizeof *o);
  if (c->srcArray || c->dstArray) return DV_CUDA_ERROR_INVALID_VALUE;
  o->srcMemoryType = dv__hip_memory_type(c->srcMemoryType, version);
  o->dstMemoryType = dv__hip_memory_type(c->dstMemoryType, version);
  if (o->srcMemoryType < 0 || o->dstMemoryType < 0) return DV_CUDA_ERROR_INVALID_VALUE;
  o->srcXInBytes = c->srcXInBytes, o->srcY = c->srcY;
  o->srcHost = c->srcHost, o->srcDevice = (void *)(uintptr_t)c->srcDevice, o->srcPitch = c->srcPitch;
  o->dstXInBytes = c->dstXInBytes, o->dstY = c->dstY;
  o->dstHost = c->dstHost, o->dstDevice = (void *)(uintptr_t)c->dstDevice, o->dstPitch = c->dstPitch;
  o->WidthInBytes = c->WidthInBytes, o->Height = c->Height;
  return DV_CUDA_SUCCESS;
}

/* The byte offset of (x, y, z) in rows of `pitch` bytes, slices of
 * `height` rows; false on overflow. */
static bool hip_offset(size_t x, size_t y, size_t z, size_t pitch, size_t height, size_t *off) {
  size_t rows, bytes;
  if (__builtin_mul_overflow(z, height, &rows) || __builtin_add_overflow(rows, y, &rows) ||
      __builtin_mul_overflow(rows, pitch, &bytes) || __builtin_add_overflow(bytes, x, off))
    return false;
  return true;
}

dv_CUresult dv__hip_slice2d(const dv_CUDA_MEMCPY3D *c, size_t z, int version, dv_hip_Memcpy2D *o) {
  memset(o, 0, sizeof *o);
  if (c->srcArray || c->dstArray || c->srcLOD || c->dstLOD || z >= c->Depth) return DV_CUDA_ERROR_INVALID_VALUE;
  o->srcMemoryType = dv__hip_memory_type(c->srcMemoryType, version);
  o->dstMemoryType = dv__hip_memory_type(c->dstMemoryType, version);
  if (o->srcMemoryType < 0 || o->dstMemoryType < 0) return DV_CUDA_ERROR_INVALID_VALUE;
  size_t so, dof, sz, dz;
  if (__builtin_add_overflow(c->srcZ, z, &sz) || __builtin_add_overflow(c->dstZ, z, &dz) ||
      !hip_offset(c->srcXInBytes, c->srcY, sz, c->srcPitch, c->srcHeight, &so) ||
      !hip_offset(c->dstXInBytes, c->dstY, dz, c->dstPitch, c->dstHeight, &dof))
    return DV_CUDA_ERROR_INVALID_VALUE;
  if (c->srcMemoryType == DV_CU_MEMORYTYPE_HOST) o->srcHost = (const char *)c->srcHost + so;
  else o->srcDevice = (void *)(uintptr_t)(c->srcDevice + so);
  if (c->dstMemoryType == DV_CU_MEMORYTYPE_HOST) o->dstHost = (char *)c->dstHost + dof;
  else o->dstDevice = (void *)(uintptr_t)(c->dstDevice + dof);
  o->srcPitch = c->srcPitch, o->dstPitch = c->dstPitch;
  o->WidthInBytes = c->WidthInBytes, o->Height = c->Height;
  return DV_CUDA_SUCCESS;
}

/* ---- contexts and devices -------------------------------------------------------------------- */

static dv_CUresult t_cuDevicePrimaryCtxRetain(dv_CUcontext *c, dv_CUdevice d) {
  dv_hipCtx_t h = NULL;
  dv_CUresult r = R(H.hipDevicePrimaryCtxRetain(&h, d));
  *c = r ? NULL : (dv_CUcontext)(void *)h;
  return r;
}

static dv_CUresult t_cuInit(unsigned f) { return R(H.hipInit(f)); }
static dv_CUresult t_cuDriverGetVersion(int *v) { return R(H.hipDriverGetVersion(v)); }
static dv_CUresult t_cuDeviceGetCount(int *n) { return R(H.hipGetDeviceCount(n)); }
static dv_CUresult t_cuDeviceGet(dv_CUdevice *d, int o) { return R(H.hipDeviceGet(d, o)); }
static dv_CUresult t_cuDeviceGetName(char *s, int len, dv_CUdevice d) { return R(H.hipDeviceGetName(s, len, d)); }
static dv_CUresult t_cuDeviceTotalMem_v2(size_t *b, dv_CUdevice d) { return R(H.hipDeviceTotalMem(b, d)); }

static dv_CUresult t_cuDeviceGetAttribute(int *v, dv_CUdevice_attribute a, dv_CUdevice d) {
  int h = dv__hip_attribute(a);
  if (h < 0) return DV_CUDA_ERROR_INVALID_VALUE;
  dv_CUresult r = R(H.hipDeviceGetAttribute(v, h, d));
  if (a == DV_CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN && (r || *v <= 0)) {
    /* No opt-in on AMD: the limit is the LDS a block may use. */
    r = R(H.hipDeviceGetAttribute(v, DV_HIP_ATTR_MAX_SHARED_MEMORY_PER_BLOCK, d));
  }
  return r;
}

static dv_CUresult t_cuDeviceGetPCIBusId(char *s, int len, dv_CUdevice d) { return R(H.hipDeviceGetPCIBusId(s, len, d)); }
static dv_CUresult t_cuDeviceCanAccessPeer(int *can, dv_CUdevice d, dv_CUdevice p) {
  return R(H.hipDeviceCanAccessPeer(can, d, p));
}
static dv_CUresult t_cuDevicePrimaryCtxRelease_v2(dv_CUdevice d) { return R(H.hipDevicePrimaryCtxRelease(d)); }
static dv_CUresult t_cuCtxSetCurrent(dv_CUcontext c) { return R(H.hipCtxSetCurrent((dv_hipCtx_t)(void *)c)); }
static dv_CUresult t_cuCtxGetCurrent(dv_CUcontext *c) {
  dv_hipCtx_t h = NULL;
  dv_CUresult r = R(H.hipCtxGetCurrent(&h));
  *c = r ? NULL : (dv_CUcontext)(void *)h;
  return r;
}
static dv_CUresult t_cuCtxSynchronize(void) { return R(H.hipDeviceSynchronize()); }
static dv_CUresult t_cuCtxEnablePeerAccess(dv_CUcontext peer, unsigned f) {
  return R(H.hipCtxEnablePeerAccess((dv_hipCtx_t)(void *)peer, f));
}

/* ---- memory ----------------------------------------------------------------------------------- */

/* The pointer a HIP call wrote to *p, as a CUdeviceptr.  p is read here,
 * after the call (an argument `d` beside the call `f(&d)` could be read
 * before it: C leaves the order of argument evaluation unspecified). */
static dv_CUresult hip_out_ptr(dv_hipError_t e, void *const *p, dv_CUdeviceptr *out) {
  dv_CUresult r = R(e);
  *out = r ? 0 : (dv_CUdeviceptr)(uintptr_t)*p;
  return r;
}

static dv_CUresult t_cuMemAlloc_v2(dv_CUdeviceptr *p, size_t n) {
  void *d = NULL;
  return hip_out_ptr(H.hipMalloc(&d, n), &d, p);
}
static dv_CUresult t_cuMemFree_v2(dv_CUdeviceptr p) { return R(H.hipFree((void *)(uintptr_t)p)); }
static dv_CUresult t_cuMemGetInfo_v2(size_t *f, size_t *t) { return R(H.hipMemGetInfo(f, t)); }
static dv_CUresult t_cuMemAllocManaged(dv_CUdeviceptr *p, size_t n, unsigned f) {
  void *d = NULL; /* flags: CU_MEM_ATTACH_GLOBAL / HOST are hipMemAttachGlobal / Host */
  return hip_out_ptr(H.hipMallocManaged(&d, n, f), &d, p);
}
/* Managed memory's hints: HIP has the first CUDA prototypes (a device
 * ordinal, or hipCpuDeviceId -1 = CU_DEVICE_CPU; hipMemoryAdvise's values
 * are CUmem_advise's), no _v2. */
static dv_CUresult t_cuMemPrefetchAsync(dv_CUdeviceptr p, size_t n, dv_CUdevice where, dv_CUstream s) {
  if (!H.hipMemPrefetchAsync) return DV_CUDA_ERROR_NOT_SUPPORTED;
  return R(H.hipMemPrefetchAsync((const void *)(uintptr_t)p, n, (int)where, HS(s)));
}
static dv_CUresult t_cuMemAdvise(dv_CUdeviceptr p, size_t n, dv_CUmem_advise advice, dv_CUdevice where) {
  if (!H.hipMemAdvise) return DV_CUDA_ERROR_NOT_SUPPORTED;
  return R(H.hipMemAdvise((const void *)(uintptr_t)p, n, (int)advice, (int)where));
}
#define t_cuMemPrefetchAsync_v2 NULL
#define t_cuMemAdvise_v2 NULL
/* Flags PORTABLE, DEVICEMAP, WRITECOMBINED are hipHostMalloc's Portable,
 * Mapped, WriteCombined (the same bits). */
static dv_CUresult t_cuMemHostAlloc(void **p, size_t n, unsigned f) { return R(H.hipHostMalloc(p, n, f)); }
static dv_CUresult t_cuMemFreeHost(void *p) { return R(H.hipHostFree(p)); }
static dv_CUresult t_cuMemHostGetDevicePointer_v2(dv_CUdeviceptr *d, void *p, unsigned f) {
  void *x = NULL;
  return hip_out_ptr(H.hipHostGetDevicePointer(&x, p, f), &x, d);
}
static dv_CUresult t_cuMemHostRegister_v2(void *p, size_t n, unsigned f) { return R(H.hipHostRegister(p, n, f)); }
static dv_CUresult t_cuMemHostUnregister(void *p) { return R(H.hipHostUnregister(p)); }
static dv_CUresult t_cuMemGetAddressRange_v2(dv_CUdeviceptr *base, size_t *n, dv_CUdeviceptr p) {
  dv_hipDeviceptr_t b = NULL;
  dv_CUresult r = R(H.hipMemGetAddressRange(&b, n, (void *)(uintptr_t)p));
  if (base) *base = r ? 0 : (dv_CUdeviceptr)(uintptr_t)b;
  return r;
}

/* ---- copies ----------------------------------------------------------------------------------- */

static dv_CUresult t_cuMemcpyHtoDAsync_v2(dv_CUdeviceptr d, const void *h, size_t n, dv_CUstream s) {
  /* HIP's prototype takes a non-const source it never writes. */
  return R(H.hipMemcpyHtoDAsync((void *)(uintptr_t)d, (void *)(uintptr_t)h, n, HS(s)));
}
static dv_CUresult t_cuMemcpyDtoHAsync_v2(void *h, dv_CUdeviceptr d, size_t n, dv_CUstream s) {
  return R(H.hipMemcpyDtoHAsync(h, (void *)(uintptr_t)d, n, HS(s)));
}
static dv_CUresult t_cuMemcpyDtoDAsync_v2(dv_CUdeviceptr d, dv_CUdeviceptr x, size_t n, dv_CUstream s) {
  return R(H.hipMemcpyDtoDAsync((void *)(uintptr_t)d, (void *)(uintptr_t)x, n, HS(s)));
}
static dv_CUresult t_cuMemcpy2DAsync_v2(const dv_CUDA_MEMCPY2D *c, dv_CUstream s) {
  dv_hip_Memcpy2D h;
  dv_CUresult r = dv__hip_copy2d(c, hip_version, &h);
  return r ? r : R(H.hipMemcpyParam2DAsync(&h, HS(s)));
}
static dv_CUresult t_cuMemcpy3DAsync_v2(const dv_CUDA_MEMCPY3D *c, dv_CUstream s) {
  for (size_t z = 0; z < c->Depth; z++) {
    dv_hip_Memcpy2D h;
    dv_CUresult r = dv__hip_slice2d(c, z, hip_version, &h);
    r = r ? r : R(H.hipMemcpyParam2DAsync(&h, HS(s)));
    if (r) return r;
  }
  return DV_CUDA_SUCCESS;
}
static dv_CUresult t_cuMemsetD8Async(dv_CUdeviceptr d, unsigned char v, size_t n, dv_CUstream s) {
  return R(H.hipMemsetD8Async((void *)(uintptr_t)d, v, n, HS(s)));
}
/* The driver's copy_peer: HIP names the two devices by ordinal (each
 * context's device, cu_state.dev: hipDeviceGet's is the ordinal). */
static dv_CUresult hip_copy_peer(cu_state *dst_st, dv_CUdeviceptr d, cu_state *src_st, dv_CUdeviceptr x, size_t n,
                                 dv_CUstream s) {
  return R(H.hipMemcpyPeerAsync((void *)(uintptr_t)d, dst_st->dev, (void *)(uintptr_t)x, src_st->dev, n, HS(s)));
}

/* ---- streams and events ------------------------------------------------------------------------ */

static dv_CUresult t_cuStreamCreate(dv_CUstream *s, unsigned f) {
  dv_hipStream_t h = NULL; /* CU_STREAM_NON_BLOCKING is hipStreamNonBlocking */
  dv_CUresult r = R(H.hipStreamCreateWithFlags(&h, f));
  *s = r ? NULL : (dv_CUstream)(void *)h;
  return r;
}
static dv_CUresult t_cuStreamDestroy_v2(dv_CUstream s) { return R(H.hipStreamDestroy(HS(s))); }
static dv_CUresult t_cuStreamSynchronize(dv_CUstream s) { return R(H.hipStreamSynchronize(HS(s))); }
static dv_CUresult t_cuStreamQuery(dv_CUstream s) { return R(H.hipStreamQuery(HS(s))); }
static dv_CUresult t_cuStreamWaitEvent(dv_CUstream s, dv_CUevent e, unsigned f) {
  return R(H.hipStreamWaitEvent(HS(s), (dv_hipEvent_t)(void *)e, f));
}
static dv_CUresult t_cuStreamAddCallback(dv_CUstream s, dv_CUstreamCallback fn, void *user, unsigned f);

/* The staging threads' waits on a word of mapped pinned memory: HIP takes
 * its address as a pointer and a mask; its >= does not wrap, which the
 * 64-bit numbers never need. */
static dv_CUresult t_cuStreamWaitValue64_v2(dv_CUstream s, dv_CUdeviceptr addr, uint64_t value, unsigned flags) {
  if (!H.hipStreamWaitValue64) return DV_CUDA_ERROR_NOT_SUPPORTED;
  if (flags != DV_CU_STREAM_WAIT_VALUE_GEQ) return DV_CUDA_ERROR_INVALID_VALUE;
  return R(H.hipStreamWaitValue64(HS(s), (void *)(uintptr_t)addr, value, DV_HIP_STREAM_WAIT_VALUE_GTE, ~(uint64_t)0));
}

/* Without hipLaunchHostFunc (ROCm before 5.3): a stream callback that
 * calls the function only when the stream had no error, as CUDA's host
 * functions are skipped after one. */
typedef struct hip_hostfn {
  dv_CUhostFn fn;
  void *user;
} hip_hostfn;

static void hip_hostfn_trampoline(dv_CUstream s, dv_CUresult status, void *arg) {
  (void)s;
  hip_hostfn h = *(hip_hostfn *)arg;
  dv__free(arg);
  if (status == DV_CUDA_SUCCESS) h.fn(h.user);
}

static dv_CUresult t_cuLaunchHostFunc(dv_CUstream s, dv_CUhostFn fn, void *user) {
  /* ROCm 5.2 declares hipLaunchHostFunc as beta (graph capture): the
   * callback path below until ROCm 5.3, where it became a stream operation. */
  if (H.hipLaunchHostFunc && hip_version >= 50300000) return R(H.hipLaunchHostFunc(HS(s), fn, user));
  /* a callback cannot be captured (the runtime would invalidate the capture) */
  dv_hipStreamCaptureStatus cs = 0;
  if (H.hipStreamIsCapturing(HS(s), &cs) == DV_HIP_SUCCESS && cs != 0) return DV_CUDA_ERROR_NOT_SUPPORTED;
  hip_hostfn *h = dv__malloc(sizeof *h);
  if (!h) return DV_CUDA_ERROR_OUT_OF_MEMORY;
  h->fn = fn, h->user = user;
  dv_CUresult r = t_cuStreamAddCallback(s, hip_hostfn_trampoline, h, 0);
  if (r) dv__free(h);
  return r;
}

/* hipStreamAddCallback's function gets HIP's stream and error: the
 * caller's with CUDA's. */
typedef struct hip_cb {
  dv_CUstreamCallback fn;
  void *user;
  dv_CUstream s;
} hip_cb;

static void hip_cb_trampoline(dv_hipStream_t s, dv_hipError_t status, void *arg) {
  (void)s;
  hip_cb c = *(hip_cb *)arg;
  dv__free(arg);
  c.fn(c.s, dv__hip_result(status), c.user);
}

static dv_CUresult t_cuStreamAddCallback(dv_CUstream s, dv_CUstreamCallback fn, void *user, unsigned f) {
  hip_cb *c = dv__malloc(sizeof *c);
  if (!c) return DV_CUDA_ERROR_OUT_OF_MEMORY;
  c->fn = fn, c->user = user, c->s = s;
  dv_CUresult r = R(H.hipStreamAddCallback(HS(s), hip_cb_trampoline, c, f));
  if (r) dv__free(c);
  return r;
}

static dv_CUresult t_cuStreamIsCapturing(dv_CUstream s, dv_CUstreamCaptureStatus *cs) {
  dv_hipStreamCaptureStatus h = 0; /* None 0, Active 1, Invalidated 2: CUDA's */
  dv_CUresult r = R(H.hipStreamIsCapturing(HS(s), &h));
  *cs = r ? DV_CU_STREAM_CAPTURE_STATUS_NONE : (dv_CUstreamCaptureStatus)h;
  return r;
}

/* Graphs (issue 40): HIP's capture and graphs take CUDA's arguments. */
static dv_CUresult t_cuStreamBeginCapture_v2(dv_CUstream s, int mode) {
  return H.hipStreamBeginCapture ? R(H.hipStreamBeginCapture(HS(s), mode)) : DV_CUDA_ERROR_NOT_SUPPORTED;
}
static dv_CUresult t_cuStreamEndCapture(dv_CUstream s, dv_CUgraph *g) {
  return H.hipStreamEndCapture ? R(H.hipStreamEndCapture(HS(s), (dv_hipGraph_t *)(void *)g))
                               : DV_CUDA_ERROR_NOT_SUPPORTED;
}
static dv_CUresult t_cuGraphInstantiateWithFlags(dv_CUgraphExec *e, dv_CUgraph g, unsigned long long f) {
  return H.hipGraphInstantiateWithFlags
             ? R(H.hipGraphInstantiateWithFlags((dv_hipGraphExec_t *)(void *)e, (dv_hipGraph_t)(void *)g, f))
             : DV_CUDA_ERROR_NOT_SUPPORTED;
}
static dv_CUresult t_cuGraphLaunch(dv_CUgraphExec e, dv_CUstream s) {
  return H.hipGraphLaunch ? R(H.hipGraphLaunch((dv_hipGraphExec_t)(void *)e, HS(s))) : DV_CUDA_ERROR_NOT_SUPPORTED;
}
static dv_CUresult t_cuGraphExecDestroy(dv_CUgraphExec e) {
  return H.hipGraphExecDestroy ? R(H.hipGraphExecDestroy((dv_hipGraphExec_t)(void *)e)) : DV_CUDA_ERROR_NOT_SUPPORTED;
}
static dv_CUresult t_cuGraphDestroy(dv_CUgraph g) {
  return H.hipGraphDestroy ? R(H.hipGraphDestroy((dv_hipGraph_t)(void *)g)) : DV_CUDA_ERROR_NOT_SUPPORTED;
}

static dv_CUresult t_cuEventCreate(dv_CUevent *e, unsigned f) {
  dv_hipEvent_t h = NULL; /* CU_EVENT_DISABLE_TIMING is hipEventDisableTiming */
  dv_CUresult r = R(H.hipEventCreateWithFlags(&h, f));
  *e = r ? NULL : (dv_CUevent)(void *)h;
  return r;
}
#define HE(e) ((dv_hipEvent_t)(void *)(e))
static dv_CUresult t_cuEventDestroy_v2(dv_CUevent e) { return R(H.hipEventDestroy(HE(e))); }
static dv_CUresult t_cuEventRecord(dv_CUevent e, dv_CUstream s) { return R(H.hipEventRecord(HE(e), HS(s))); }
static dv_CUresult t_cuEventQuery(dv_CUevent e) { return R(H.hipEventQuery(HE(e))); }
static dv_CUresult t_cuEventSynchronize(dv_CUevent e) { return R(H.hipEventSynchronize(HE(e))); }
static dv_CUresult t_cuEventElapsedTime_v2(float *ms, dv_CUevent a, dv_CUevent b) {
  return R(H.hipEventElapsedTime(ms, HE(a), HE(b)));
}

/* ---- modules and kernels ---------------------------------------------------------------------- */

#define HM(m) ((dv_hipModule_t)(void *)(m))
#define HF(f) ((dv_hipFunction_t)(void *)(f))

static dv_CUresult t_cuModuleLoadData(dv_CUmodule *m, const void *image) {
  dv_hipModule_t h = NULL;
  dv_CUresult r = R(H.hipModuleLoadData(&h, image));
  *m = r ? NULL : (dv_CUmodule)(void *)h;
  return r;
}

/* HIP loads code objects with no JIT: the log buffers asked for come back
 * empty (and their sizes, which CUDA sets to the bytes written, 0). */
static dv_CUresult t_cuModuleLoadDataEx(dv_CUmodule *m, const void *image, unsigned n, dv_CUjit_option *o,
                                        void **v) {
  for (unsigned i = 0; i < n; i++) {
    if (o[i] == DV_CU_JIT_INFO_LOG_BUFFER || o[i] == DV_CU_JIT_ERROR_LOG_BUFFER) {
      int size_opt = o[i] == DV_CU_JIT_INFO_LOG_BUFFER ? DV_CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES
                                                       : DV_CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES;
      for (unsigned j = 0; j < n; j++)
        if (o[j] == size_opt && (uintptr_t)v[j] > 0 && v[i]) ((char *)v[i])[0] = 0;
    }
  }
  for (unsigned i = 0; i < n; i++)
    if (o[i] == DV_CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES || o[i] == DV_CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES) v[i] = 0;
  return t_cuModuleLoadData(m, image);
}

static dv_CUresult t_cuModuleUnload(dv_CUmodule m) { return R(H.hipModuleUnload(HM(m))); }
static dv_CUresult t_cuModuleGetFunction(dv_CUfunction *f, dv_CUmodule m, const char *name) {
  dv_hipFunction_t h = NULL;
  dv_CUresult r = R(H.hipModuleGetFunction(&h, HM(m), name));
  *f = r ? NULL : (dv_CUfunction)(void *)h;
  return r;
}
static dv_CUresult t_cuModuleGetGlobal_v2(dv_CUdeviceptr *p, size_t *n, dv_CUmodule m, const char *name) {
  dv_hipDeviceptr_t d = NULL;
  dv_CUresult r = R(H.hipModuleGetGlobal(&d, n, HM(m), name));
  if (p) *p = r ? 0 : (dv_CUdeviceptr)(uintptr_t)d;
  return r;
}
/* hipFunction_attribute takes CUDA's numbers. */
static dv_CUresult t_cuFuncGetAttribute(int *v, dv_CUfunction_attribute a, dv_CUfunction f) {
  return R(H.hipFuncGetAttribute(v, a, HF(f)));
}

static dv_CUresult t_cuLaunchKernel(dv_CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                    unsigned by, unsigned bz, unsigned shared, dv_CUstream s, void **params,
                                    void **extra) {
  return R(H.hipModuleLaunchKernel(HF(f), gx, gy, gz, bx, by, bz, shared, HS(s), params, extra));
}

/* ---- IPC (handles of the same 64 bytes) --------------------------------------------------------- */

static dv_CUresult t_cuIpcGetMemHandle(dv_CUipcMemHandle *h, dv_CUdeviceptr p) {
  dv_hipIpcMemHandle_t x;
  dv_CUresult r = R(H.hipIpcGetMemHandle(&x, (void *)(uintptr_t)p));
  if (!r) memcpy(h, &x, sizeof *h);
  return r;
}
static dv_CUresult t_cuIpcOpenMemHandle_v2(dv_CUdeviceptr *p, dv_CUipcMemHandle h, unsigned f) {
  dv_hipIpcMemHandle_t x;
  memcpy(&x, &h, sizeof x);
  void *d = NULL;
  return hip_out_ptr(H.hipIpcOpenMemHandle(&d, x, dv__hip_ipc_flags(f, hip_version)), &d, p);
}
static dv_CUresult t_cuIpcCloseMemHandle(dv_CUdeviceptr p) { return R(H.hipIpcCloseMemHandle((void *)(uintptr_t)p)); }

/* ---- the driver ----------------------------------------------------------------------------------- */

/* Entries HIP has no call for, which the core never calls on HIP: a peer
 * copy names devices (hip_copy_peer, the driver's copy_peer); AMD has no
 * opt-in for dynamic LDS (kops.no_shared_optin: sizes within the per-block
 * LDS need none, larger ones are refused before the driver is asked). */
#define t_cuMemcpyPeerAsync NULL
#define t_cuFuncSetAttribute NULL
/* The stream-ordered allocator: NULL here; hip_mempool.c installs its
 * translations where the runtime has the entries (hip.c, at loading). */
#define t_cuMemAllocFromPoolAsync NULL
#define t_cuMemFreeAsync NULL
#define t_cuMemPoolCreate NULL
#define t_cuMemPoolDestroy NULL
#define t_cuMemPoolSetAttribute NULL
#define t_cuMemPoolGetAttribute NULL
#define t_cuMemPoolTrimTo NULL
#define t_cuDeviceGetDefaultMemPool NULL
#define t_cuDeviceGetMemPool NULL

/* Written only by hip_mempool.c's dv__hip_pools_install, once, before any context. */
dv_cu_api dv__hip_api_table = {
#define DV_CU(ret, symbol, cuda_name, hip_name, params) .symbol = t_##symbol,
#include "../cudafam/fam_symbols.def"
#undef DV_CU
    .cuFuncGetParamInfo = NULL, /* HIP cannot tell a function's parameter layout */
    .cuMemPrefetchAsync = t_cuMemPrefetchAsync,
    .cuMemAdvise = t_cuMemAdvise,
};

/* How HIP's messages name each entry: the HIP call behind its translation
 * (fam_symbols.def's hip_name column). */
static const char *const hip_names[DV_CU_E_COUNT] = {
#define DV_CU(ret, symbol, cuda_name, hip_name, params) [DV_CU_E_##symbol] = hip_name,
#include "../cudafam/fam_symbols.def"
#undef DV_CU
};

bool dv__hip_gfx_name(unsigned long v, char *buf, size_t cap) {
  unsigned long major = v / 10000, minor = (v / 100) % 100, step = v % 100;
  if (!major || minor > 15 || step > 15) return false;
  int n = snprintf(buf, cap, "gfx%lu%lx%lx", major, minor, step);
  return n > 0 && (size_t)n < cap;
}

bool dv__hip_kfd_arch(const char *root, int ordinal, char *buf, size_t cap) {
  if (getenv("HIP_VISIBLE_DEVICES") || getenv("ROCR_VISIBLE_DEVICES") || getenv("CUDA_VISIBLE_DEVICES") ||
      getenv("GPU_DEVICE_ORDINAL"))
    return false; /* renumbered: the topology's order is not the runtime's */
  int gpu = 0;
  for (int node = 0; node < 256; node++) {
    char path[512], line[256];
    snprintf(path, sizeof path, "%s/%d/properties", root, node);
    FILE *f = fopen(path, "r");
    if (!f) return false; /* nodes are numbered without gaps */
    unsigned long v = 0;
    while (fgets(line, sizeof line, f))
      if (!strncmp(line, "gfx_target_version ", 19)) v = strtoul(line + 19, NULL, 10);
    fclose(f);
    if (!v) continue; /* a CPU node */
    if (gpu++ == ordinal) return dv__hip_gfx_name(v, buf, cap);
  }
  return false;
}

/* The gfx target kernels are compiled for: the hip_arch option, else the
 * runtime's gcnArchName (with the device's features), else the kernel
 * driver's topology (without them: code for either setting), else unknown
 * ("": builds are refused, naming the option). */
static void hip_read_arch(cu_state *st, const dv_backend_config *cfg) {
  dv_hip_ctx *h = DV_HIP_CTX(st);
  h->arch[0] = 0;
  if (cfg && cfg->hip_arch && cfg->hip_arch[0]) {
    snprintf(h->arch, sizeof h->arch, "%s", cfg->hip_arch);
    return;
  }
  if (dv__hip_get_props) {
    unsigned char *prop = dv__calloc(1, DV_HIP5_PROP_BYTES);
    if (prop && dv__hip_get_props(prop, st->ordinal) == DV_HIP_SUCCESS) {
      const char *name = (const char *)prop + DV_HIP5_PROP_GCN_ARCH_NAME;
      if (!strncmp(name, "gfx", 3) && memchr(name, 0, 256)) snprintf(h->arch, sizeof h->arch, "%s", name);
    }
    dv__free(prop);
    if (h->arch[0]) return;
  }
  dv__hip_kfd_arch("/sys/class/kfd/kfd/topology/nodes", st->ordinal, h->arch, sizeof h->arch);
}

/* The device's description in HIP's words (after the shared fields), and
 * what its kernels need (the context's dv_hip_ctx): the target, hipRTC's
 * file, the runtime's file. */
static void hip_fill_info(cu_state *st, const dv_backend_config *cfg) {
  dv_device_info *d = &st->info;
  dv_hip_ctx *h = DV_HIP_CTX(st);
  snprintf(d->vendor, sizeof d->vendor, "AMD");
  snprintf(d->driver_version, sizeof d->driver_version, "HIP runtime %d.%d (%s)", hip_version / 10000000,
           (hip_version / 100000) % 100, dv__hip_lib_name);
  hip_read_arch(st, cfg);
  snprintf(h->rtc_library, sizeof h->rtc_library, "%s", cfg && cfg->hiprtc_library ? cfg->hiprtc_library : "");
  snprintf(h->runtime_library, sizeof h->runtime_library, "%s", dv__hip_lib_name ? dv__hip_lib_name : "");
  h->rocm_major = hip_version / 10000000;
}

const dv_cu_driver dv__hip_driver = {
    .vendor = "HIP",
    .backend = "hip",
    .api = &dv__hip_api_table,
    .state_bytes = sizeof(dv_hip_ctx),
    .fill_info = hip_fill_info,
    .names = hip_names,
    .code = hip_code,
    .copy_peer = hip_copy_peer,
    .kops = &dv__hip_kernel_ops, /* hipRTC (hiprtc.c) */
    .legacy_is_null = true,
    .host_free_syncs = true,
    .forked = &dv__hip_forked,
};
