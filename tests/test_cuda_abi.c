/* devarray declares the CUDA driver types itself (src/backends/cuda/
 * cuda_driver.h) so that it builds without CUDA.  Where the toolkit's cuda.h
 * is present at build time, this test checks every declaration against it:
 * struct sizes and field offsets, enum values and flags. */
#include <cuda.h>
#include <stddef.h>
#include <stdio.h>

#include "backends/cuda/cuda_driver.h"
#include "backends/cuda/cuda_backend.h"

#define SAME_OFFSET(T1, T2, f) (offsetof(T1, f) == offsetof(T2, f))
_Static_assert(sizeof(dv_CUDA_MEMCPY2D) == sizeof(CUDA_MEMCPY2D), "CUDA_MEMCPY2D size");
_Static_assert(sizeof(dv_CUDA_MEMCPY3D) == sizeof(CUDA_MEMCPY3D), "CUDA_MEMCPY3D size");
_Static_assert(sizeof(dv_CUdeviceptr) == sizeof(CUdeviceptr), "CUdeviceptr");
_Static_assert(sizeof(dv_CUresult) == sizeof(CUresult), "CUresult");
_Static_assert(DV_CU_MEMORYTYPE_HOST == CU_MEMORYTYPE_HOST && DV_CU_MEMORYTYPE_DEVICE == CU_MEMORYTYPE_DEVICE, "memtype");
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
  printf("CUDA driver declarations %s cuda.h (CUDA %d)\n", ok ? "match" : "DO NOT MATCH", CUDA_VERSION);
  return ok ? 0 : 1;
}
