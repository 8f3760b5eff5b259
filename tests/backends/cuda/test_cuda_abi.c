/* devarray declares the CUDA driver and NVRTC types itself (src/backends/
 * cuda/cuda_driver.h, nvrtc.h) so that it builds without CUDA.  Where the
 * toolkit's cuda.h and nvrtc.h are present at build time, this test checks
 * every declaration against them: struct sizes and field offsets, enum values
 * and flags, and the prototype of every entry point devarray loads (each is
 * redeclared with the toolkit's type names: a mismatch does not compile). */
#include <cuda.h>
#include <cudaTypedefs.h>
#include <nvrtc.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "backends/backend.h"
#include "backends/cudafam/fam_api.h"
#include "backends/cudafam/fam_status.h"
#include "backends/cuda/nvrtc.h"

#define SAME_OFFSET(T1, T2, f) (offsetof(T1, f) == offsetof(T2, f))
_Static_assert(sizeof(dv_CUDA_MEMCPY2D) == sizeof(CUDA_MEMCPY2D), "CUDA_MEMCPY2D size");
_Static_assert(sizeof(dv_CUDA_MEMCPY3D) == sizeof(CUDA_MEMCPY3D), "CUDA_MEMCPY3D size");
_Static_assert(sizeof(dv_CUipcMemHandle) == sizeof(CUipcMemHandle) && DV_CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS == CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS, "CUipcMemHandle");
_Static_assert(sizeof(dv_CUdeviceptr) == sizeof(CUdeviceptr), "CUdeviceptr");
_Static_assert(sizeof(dv_CUresult) == sizeof(CUresult), "CUresult");
_Static_assert(DV_CU_STREAM_CAPTURE_MODE_RELAXED == CU_STREAM_CAPTURE_MODE_RELAXED &&
                   DV_CUDA_ERROR_ILLEGAL_STATE == CUDA_ERROR_ILLEGAL_STATE &&
                   sizeof(dv_CUstreamCaptureMode) == sizeof(CUstreamCaptureMode),
               "graphs (issue 40)");
_Static_assert(DV_CU_MEMORYTYPE_HOST == CU_MEMORYTYPE_HOST && DV_CU_MEMORYTYPE_DEVICE == CU_MEMORYTYPE_DEVICE, "memtype");
_Static_assert(DV_CU_POINTER_ATTRIBUTE_MEMORY_TYPE == CU_POINTER_ATTRIBUTE_MEMORY_TYPE &&
                   DV_CU_POINTER_ATTRIBUTE_RANGE_START_ADDR == CU_POINTER_ATTRIBUTE_RANGE_START_ADDR &&
                   DV_CU_POINTER_ATTRIBUTE_RANGE_SIZE == CU_POINTER_ATTRIBUTE_RANGE_SIZE,
               "pointer attributes");
_Static_assert(DV_CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY == CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY, "attr");
_Static_assert(DV_CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING == CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, "attr");
_Static_assert(DV_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, "attr");
_Static_assert(DV_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, "attr");
_Static_assert(DV_CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY == CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY, "attr");
_Static_assert(DV_CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS == CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, "attr");
_Static_assert(DV_CUDA_ERROR_OUT_OF_MEMORY == CUDA_ERROR_OUT_OF_MEMORY && DV_CUDA_ERROR_NOT_READY == CUDA_ERROR_NOT_READY, "err");
_Static_assert(DV_CUDA_ERROR_INVALID_VALUE == CUDA_ERROR_INVALID_VALUE && DV_CUDA_ERROR_NO_DEVICE == CUDA_ERROR_NO_DEVICE, "err");
_Static_assert(DV_CUDA_ERROR_ILLEGAL_ADDRESS == CUDA_ERROR_ILLEGAL_ADDRESS && DV_CUDA_ERROR_LAUNCH_FAILED == CUDA_ERROR_LAUNCH_FAILED, "err");
_Static_assert(DV_CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED == CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, "err");
_Static_assert(DV_CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED == CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, "err");
_Static_assert(DV_CUDA_ERROR_INVALID_CONTEXT == CUDA_ERROR_INVALID_CONTEXT && DV_CUDA_ERROR_DEINITIALIZED == CUDA_ERROR_DEINITIALIZED, "err");
_Static_assert(DV_CUDA_ERROR_NOT_SUPPORTED == CUDA_ERROR_NOT_SUPPORTED && DV_CUDA_ERROR_INVALID_HANDLE == CUDA_ERROR_INVALID_HANDLE, "err");
_Static_assert(DV_CU_MEMHOSTALLOC_PORTABLE == CU_MEMHOSTALLOC_PORTABLE && DV_CU_MEMHOSTALLOC_DEVICEMAP == CU_MEMHOSTALLOC_DEVICEMAP, "flags");
_Static_assert(DV_CU_MEMHOSTALLOC_WRITECOMBINED == CU_MEMHOSTALLOC_WRITECOMBINED, "flags");
_Static_assert(DV_CU_MEMHOSTREGISTER_PORTABLE == CU_MEMHOSTREGISTER_PORTABLE && DV_CU_MEMHOSTREGISTER_DEVICEMAP == CU_MEMHOSTREGISTER_DEVICEMAP, "flags");
_Static_assert(DV_CU_STREAM_NON_BLOCKING == CU_STREAM_NON_BLOCKING && DV_CU_EVENT_DISABLE_TIMING == CU_EVENT_DISABLE_TIMING, "flags");
_Static_assert(DV_CU_MEM_ATTACH_GLOBAL == CU_MEM_ATTACH_GLOBAL && DV_CU_MEM_ATTACH_HOST == CU_MEM_ATTACH_HOST, "flags");
/* Managed memory's hints (issue 40): advice values, locations, CU_DEVICE_CPU. */
_Static_assert(sizeof(dv_CUmem_advise) == sizeof(CUmem_advise) &&
                   DV_CU_MEM_ADVISE_SET_READ_MOSTLY == CU_MEM_ADVISE_SET_READ_MOSTLY &&
                   DV_CU_MEM_ADVISE_UNSET_READ_MOSTLY == CU_MEM_ADVISE_UNSET_READ_MOSTLY &&
                   DV_CU_MEM_ADVISE_SET_PREFERRED_LOCATION == CU_MEM_ADVISE_SET_PREFERRED_LOCATION &&
                   DV_CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION == CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION &&
                   DV_CU_MEM_ADVISE_SET_ACCESSED_BY == CU_MEM_ADVISE_SET_ACCESSED_BY &&
                   DV_CU_MEM_ADVISE_UNSET_ACCESSED_BY == CU_MEM_ADVISE_UNSET_ACCESSED_BY,
               "advice");
_Static_assert((int)DV_MEM_ADVISE_SET_READ_MOSTLY == CU_MEM_ADVISE_SET_READ_MOSTLY &&
                   (int)DV_MEM_ADVISE_UNSET_ACCESSED_BY == CU_MEM_ADVISE_UNSET_ACCESSED_BY &&
                   (int)DV_LOCATION_HOST == CU_DEVICE_CPU && DV_CU_DEVICE_CPU == CU_DEVICE_CPU,
               "devarray.h's advice and host location are CUDA's");
_Static_assert(sizeof(dv_CUmemLocation) == sizeof(CUmemLocation) && offsetof(dv_CUmemLocation, id) == offsetof(CUmemLocation, id) &&
                   DV_CU_MEM_LOCATION_TYPE_DEVICE == CU_MEM_LOCATION_TYPE_DEVICE &&
                   DV_CU_MEM_LOCATION_TYPE_HOST == CU_MEM_LOCATION_TYPE_HOST,
               "CUmemLocation");

/* Kernels: modules, functions, launch limits, JIT options, load errors. */
_Static_assert(sizeof(dv_CUmodule) == sizeof(CUmodule) && sizeof(dv_CUfunction) == sizeof(CUfunction), "handles");
_Static_assert(sizeof(dv_CUdevice_attribute) == sizeof(CUdevice_attribute), "enum size");
_Static_assert(sizeof(dv_CUfunction_attribute) == sizeof(CUfunction_attribute), "enum size");
_Static_assert(sizeof(dv_CUjit_option) == sizeof(CUjit_option), "enum size");
_Static_assert(DV_CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK == CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, "attr");
_Static_assert(DV_CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X == CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X, "attr");
_Static_assert(DV_CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y == CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y, "attr");
_Static_assert(DV_CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z == CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z, "attr");
_Static_assert(DV_CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X == CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X, "attr");
_Static_assert(DV_CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y == CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y, "attr");
_Static_assert(DV_CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z == CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z, "attr");
_Static_assert(DV_CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK == CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, "attr");
_Static_assert(DV_CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN == CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, "attr");
_Static_assert(DV_CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY == CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY, "attr");
_Static_assert(DV_CU_DEVICE_ATTRIBUTE_WARP_SIZE == CU_DEVICE_ATTRIBUTE_WARP_SIZE, "attr");
_Static_assert(DV_CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT == CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, "attr");
_Static_assert(DV_CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK == CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, "fattr");
_Static_assert(DV_CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES == CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, "fattr");
_Static_assert(DV_CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES == CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES, "fattr");
_Static_assert(DV_CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES == CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, "fattr");
_Static_assert(DV_CU_FUNC_ATTRIBUTE_NUM_REGS == CU_FUNC_ATTRIBUTE_NUM_REGS, "fattr");
_Static_assert(DV_CU_FUNC_ATTRIBUTE_PTX_VERSION == CU_FUNC_ATTRIBUTE_PTX_VERSION, "fattr");
_Static_assert(DV_CU_FUNC_ATTRIBUTE_BINARY_VERSION == CU_FUNC_ATTRIBUTE_BINARY_VERSION, "fattr");
_Static_assert(DV_CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, "fattr");
_Static_assert(DV_CU_JIT_INFO_LOG_BUFFER == CU_JIT_INFO_LOG_BUFFER && DV_CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES == CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES, "jit");
_Static_assert(DV_CU_JIT_ERROR_LOG_BUFFER == CU_JIT_ERROR_LOG_BUFFER && DV_CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, "jit");
_Static_assert(DV_CU_JIT_LOG_VERBOSE == CU_JIT_LOG_VERBOSE, "jit");
_Static_assert(DV_CUDA_ERROR_INVALID_IMAGE == CUDA_ERROR_INVALID_IMAGE && DV_CUDA_ERROR_NO_BINARY_FOR_GPU == CUDA_ERROR_NO_BINARY_FOR_GPU, "err");
_Static_assert(DV_CUDA_ERROR_INVALID_PTX == CUDA_ERROR_INVALID_PTX && DV_CUDA_ERROR_UNSUPPORTED_PTX_VERSION == CUDA_ERROR_UNSUPPORTED_PTX_VERSION, "err");
_Static_assert(DV_CUDA_ERROR_JIT_COMPILER_NOT_FOUND == CUDA_ERROR_JIT_COMPILER_NOT_FOUND && DV_CUDA_ERROR_NOT_FOUND == CUDA_ERROR_NOT_FOUND, "err");
_Static_assert(DV_CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES == CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, "err");
_Static_assert(DV_CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED == CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED &&
               DV_CUDA_ERROR_STREAM_CAPTURE_INVALIDATED == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED &&
               DV_CUDA_ERROR_STREAM_CAPTURE_IMPLICIT == CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, "err");
_Static_assert(sizeof(dv_CUstreamCaptureStatus) == sizeof(CUstreamCaptureStatus) &&
               DV_CU_STREAM_CAPTURE_STATUS_NONE == CU_STREAM_CAPTURE_STATUS_NONE &&
               DV_CU_STREAM_CAPTURE_STATUS_ACTIVE == CU_STREAM_CAPTURE_STATUS_ACTIVE &&
               DV_CU_STREAM_CAPTURE_STATUS_INVALIDATED == CU_STREAM_CAPTURE_STATUS_INVALIDATED, "capture");
/* Memory pools (the "async" manager). */
_Static_assert(sizeof(dv_CUmemoryPool) == sizeof(CUmemoryPool) && sizeof(dv_CUmemPool_attribute) == sizeof(CUmemPool_attribute), "pool");
_Static_assert(DV_CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED == CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, "pool");
_Static_assert(DV_CU_MEMPOOL_ATTR_RELEASE_THRESHOLD == CU_MEMPOOL_ATTR_RELEASE_THRESHOLD &&
               DV_CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT == CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT &&
               DV_CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH == CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH &&
               DV_CU_MEMPOOL_ATTR_USED_MEM_CURRENT == CU_MEMPOOL_ATTR_USED_MEM_CURRENT &&
               DV_CU_MEMPOOL_ATTR_USED_MEM_HIGH == CU_MEMPOOL_ATTR_USED_MEM_HIGH &&
               DV_CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC == CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC, "pool attr");
_Static_assert(DV_CU_MEM_ALLOCATION_TYPE_PINNED == CU_MEM_ALLOCATION_TYPE_PINNED &&
               DV_CU_MEM_LOCATION_TYPE_DEVICE == CU_MEM_LOCATION_TYPE_DEVICE &&
               DV_CU_MEM_HANDLE_TYPE_NONE == CU_MEM_HANDLE_TYPE_NONE, "pool props");
_Static_assert(sizeof(dv_CUmemPoolProps) == sizeof(CUmemPoolProps) &&
               SAME_OFFSET(dv_CUmemPoolProps, CUmemPoolProps, location) &&
               SAME_OFFSET(dv_CUmemPoolProps, CUmemPoolProps, win32SecurityAttributes) &&
               SAME_OFFSET(dv_CUmemPoolProps, CUmemPoolProps, maxSize) &&
               SAME_OFFSET(dv_CUmemPoolProps, CUmemPoolProps, usage) &&
               SAME_OFFSET(dv_CUmemPoolProps, CUmemPoolProps, reserved), "CUmemPoolProps layout");
_Static_assert(sizeof(dv_CUmemLocation) == sizeof(CUmemLocation), "CUmemLocation");
/* NVRTC. */
_Static_assert(sizeof(dv_nvrtcResult) == sizeof(nvrtcResult) && sizeof(dv_nvrtcProgram) == sizeof(nvrtcProgram), "nvrtc");
_Static_assert(DV_NVRTC_SUCCESS == NVRTC_SUCCESS && DV_NVRTC_ERROR_OUT_OF_MEMORY == NVRTC_ERROR_OUT_OF_MEMORY, "nvrtc");
_Static_assert(DV_NVRTC_ERROR_INVALID_OPTION == NVRTC_ERROR_INVALID_OPTION && DV_NVRTC_ERROR_COMPILATION == NVRTC_ERROR_COMPILATION, "nvrtc");
/* The kernel-side view (kernel.h's dv_kview, passed by value to CUDA kernels)
 * has the layout the backend fills: 64-bit fields only. */
_Static_assert(sizeof(dv_bkview) == 8 + 2 * 8 * DV_BKVIEW_MAXDIMS && offsetof(dv_bkview, strides) == 8 + 8 * DV_BKVIEW_MAXDIMS, "view");

/* Every entry point, redeclared with the toolkit's types: the compiler
 * rejects a redeclaration whose parameters or result differ from cuda.h's
 * (and nvrtc.h's) prototype.  Names that cuda.h maps (cuMemAlloc ->
 * cuMemAlloc_v2) are declared under the mapped name there, as here. */
#define dv_CUresult CUresult
#define dv_CUdevice CUdevice
#define dv_CUdeviceptr CUdeviceptr
#define dv_CUcontext CUcontext
#define dv_CUstream CUstream
#define dv_CUevent CUevent
#define dv_CUmodule CUmodule
#define dv_CUfunction CUfunction
#define dv_CUhostFn CUhostFn
#define dv_CUstreamCallback CUstreamCallback
#define dv_CUdevice_attribute CUdevice_attribute
#define dv_CUfunction_attribute CUfunction_attribute
#define dv_CUjit_option CUjit_option
#define dv_CUDA_MEMCPY2D CUDA_MEMCPY2D
#define dv_CUDA_MEMCPY3D CUDA_MEMCPY3D
#define dv_CUipcMemHandle CUipcMemHandle
#define dv_CUstreamCaptureStatus CUstreamCaptureStatus
#define dv_CUmem_advise CUmem_advise
#define dv_CUmemLocation CUmemLocation
#define dv_CUmemoryPool CUmemoryPool
#define dv_CUmemPool_attribute CUmemPool_attribute
#define dv_CUmemPoolProps CUmemPoolProps
#define dv_CUstreamCaptureMode CUstreamCaptureMode
#define dv_CUgraph CUgraph
#define dv_CUgraphExec CUgraphExec
#define DV_CU(ret, symbol, cuda_name, hip_name, params) extern ret CUDAAPI symbol params;
#include "backends/cudafam/fam_symbols.def"
#undef DV_CU
/* The first entries of managed memory's hints (fam.h's dv_cu_api, loaded by
 * their own names): cuda.h declares only the _v2 prototypes under those
 * names, cudaTypedefs.h the first ones. */
extern PFN_cuMemPrefetchAsync_v8000 dv_abi_prefetch_v1;
extern dv_CUresult (CUDAAPI *dv_abi_prefetch_v1)(dv_CUdeviceptr p, size_t bytes, dv_CUdevice where, dv_CUstream s);
extern PFN_cuMemAdvise_v8000 dv_abi_advise_v1;
extern dv_CUresult (CUDAAPI *dv_abi_advise_v1)(dv_CUdeviceptr p, size_t bytes, dv_CUmem_advise advice, dv_CUdevice where);
#define dv_nvrtcResult nvrtcResult
#define dv_nvrtcProgram nvrtcProgram
#define DV_NVRTC(ret, name, params, optional) extern ret name params;
#include "backends/cuda/nvrtc_symbols.def"
#undef DV_NVRTC
#undef dv_CUresult
#undef dv_CUdevice
#undef dv_CUdeviceptr
#undef dv_CUcontext
#undef dv_CUstream
#undef dv_CUevent
#undef dv_CUmodule
#undef dv_CUfunction
#undef dv_CUhostFn
#undef dv_CUstreamCallback
#undef dv_CUdevice_attribute
#undef dv_CUfunction_attribute
#undef dv_CUjit_option
#undef dv_CUDA_MEMCPY2D
#undef dv_CUDA_MEMCPY3D
#undef dv_CUipcMemHandle
#undef dv_CUstreamCaptureStatus
#undef dv_CUmem_advise
#undef dv_CUmemLocation
#undef dv_nvrtcResult
#undef dv_nvrtcProgram

#define F2(f) SAME_OFFSET(dv_CUDA_MEMCPY2D, CUDA_MEMCPY2D, f)
#define F3(f) SAME_OFFSET(dv_CUDA_MEMCPY3D, CUDA_MEMCPY3D, f)

int main(void) {
  int ok = F2(srcXInBytes) && F2(srcY) && F2(srcMemoryType) && F2(srcHost) && F2(srcDevice) && F2(srcArray) &&
           F2(srcPitch) && F2(dstXInBytes) && F2(dstY) && F2(dstMemoryType) && F2(dstHost) && F2(dstDevice) &&
           F2(dstArray) && F2(dstPitch) && F2(WidthInBytes) && F2(Height);
  ok = ok && F3(srcXInBytes) && F3(srcY) && F3(srcZ) && F3(srcLOD) && F3(srcMemoryType) && F3(srcHost) &&
       F3(srcDevice) && F3(srcArray) && F3(reserved0) && F3(srcPitch) && F3(srcHeight) && F3(dstXInBytes) &&
       F3(dstY) && F3(dstZ) && F3(dstLOD) && F3(dstMemoryType) && F3(dstHost) && F3(dstDevice) && F3(dstArray) &&
       F3(reserved1) && F3(dstPitch) && F3(dstHeight) && F3(WidthInBytes) && F3(Height) && F3(Depth);
  ok = ok && (void *)DV_CU_STREAM_LEGACY == (void *)CU_STREAM_LEGACY &&
       (void *)DV_CU_STREAM_PER_THREAD == (void *)CU_STREAM_PER_THREAD;
  /* the status mapping */
  ok = ok && dv__cu_status(CUDA_SUCCESS) == DV_OK && dv__cu_status(CUDA_ERROR_OUT_OF_MEMORY) == DV_ERR_OUT_OF_MEMORY &&
       dv__cu_status(CUDA_ERROR_NOT_READY) == DV_ERR_NOT_READY &&
       dv__cu_status(CUDA_ERROR_ILLEGAL_ADDRESS) == DV_ERR_DEVICE_LOST &&
       dv__cu_status(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED) == DV_ERR_MISUSE &&
       dv__cu_status(CUDA_ERROR_UNKNOWN) == DV_ERR_DRIVER;
  ok = ok && dv__cu_status(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES) == DV_ERR_LAUNCH_CONFIG &&
       dv__cu_status(CUDA_ERROR_NOT_FOUND) == DV_ERR_INVALID_ARGUMENT;
  /* The names loaded are the ones cuda.h maps to (CUDA 13 maps
   * cuEventElapsedTime to cuEventElapsedTime_v2): a name cuda.h redefines
   * would load the old entry point.  Issue 13 #7. */
#define DV_ABI_STR(x) #x
#define DV_ABI_XSTR(x) DV_ABI_STR(x)
  static const char *const names[][2] = {
#define DV_CU(ret, symbol, cuda_name, hip_name, params) {#symbol, DV_ABI_XSTR(symbol)},
#include "backends/cudafam/fam_symbols.def"
#undef DV_CU
  };
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (strcmp(names[i][0], names[i][1])) {
      printf("cuda_symbols.def loads %s, but cuda.h maps it to %s\n", names[i][0], names[i][1]);
      ok = 0;
    }
  /* Error mapping (issue 13 #6): no context is misuse, not a lost device;
   * faults that leave the context unusable are a lost device. */
  ok = ok && dv__cu_status(CUDA_ERROR_INVALID_CONTEXT) == DV_ERR_MISUSE &&
       dv__cu_status(CUDA_ERROR_CONTEXT_IS_DESTROYED) == DV_ERR_MISUSE &&
       dv__cu_status(CUDA_ERROR_MISALIGNED_ADDRESS) == DV_ERR_DEVICE_LOST &&
       dv__cu_status(CUDA_ERROR_ILLEGAL_INSTRUCTION) == DV_ERR_DEVICE_LOST &&
       dv__cu_status(CUDA_ERROR_HARDWARE_STACK_ERROR) == DV_ERR_DEVICE_LOST &&
       dv__cu_status(CUDA_ERROR_LAUNCH_TIMEOUT) == DV_ERR_DEVICE_LOST &&
       dv__cu_status(CUDA_ERROR_ECC_UNCORRECTABLE) == DV_ERR_DEVICE_LOST;
  if (!ok) printf("dv__cu_status maps INVALID_CONTEXT %d, MISALIGNED_ADDRESS %d\n", dv__cu_status(CUDA_ERROR_INVALID_CONTEXT),
                  dv__cu_status(CUDA_ERROR_MISALIGNED_ADDRESS));
  printf("CUDA driver and NVRTC declarations %s cuda.h and nvrtc.h (CUDA %d)\n", ok ? "match" : "DO NOT MATCH",
         CUDA_VERSION);
  return ok ? 0 : 1;
}
