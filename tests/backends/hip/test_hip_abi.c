/* devarray declares the HIP runtime's types and values itself
 * (src/backends/hip/hip_runtime.h) so that it builds without ROCm.  Where
 * ROCm's hip_runtime_api.h is present at build time (compiled with
 * -D__HIP_PLATFORM_AMD__), this test checks every declaration against it:
 * error codes, device and function attributes, flags, the memory types of
 * the installed ROCm's major version, hip_Memcpy2D's size and offsets, the
 * IPC handle's size, the per-thread stream's handle, and that every entry
 * point devarray loads is declared by the header (a missing one does not
 * compile).  Prototypes are not compared: devarray's handle types are its
 * own, so they would never match by type. */
#include <hip/hip_runtime_api.h>
#include <stddef.h>
#include <stdio.h>

#include "backends/cudafam/fam_api.h"
#include "backends/hip/hip_runtime.h"

#define SAME_OFFSET(f) (offsetof(dv_hip_Memcpy2D, f) == offsetof(hip_Memcpy2D, f))
_Static_assert(sizeof(dv_hip_Memcpy2D) == sizeof(hip_Memcpy2D), "hip_Memcpy2D size");
_Static_assert(SAME_OFFSET(srcXInBytes) && SAME_OFFSET(srcY) && SAME_OFFSET(srcMemoryType) &&
                   SAME_OFFSET(srcHost) && SAME_OFFSET(srcDevice) && SAME_OFFSET(srcArray) &&
                   SAME_OFFSET(srcPitch),
               "hip_Memcpy2D source fields");
_Static_assert(SAME_OFFSET(dstXInBytes) && SAME_OFFSET(dstY) && SAME_OFFSET(dstMemoryType) &&
                   SAME_OFFSET(dstHost) && SAME_OFFSET(dstDevice) && SAME_OFFSET(dstArray) &&
                   SAME_OFFSET(dstPitch),
               "hip_Memcpy2D destination fields");
_Static_assert(SAME_OFFSET(WidthInBytes) && SAME_OFFSET(Height), "hip_Memcpy2D extent");
_Static_assert(sizeof(((dv_hip_Memcpy2D *)0)->srcMemoryType) == sizeof(hipMemoryType),
               "hipMemoryType size");
/* The translations copy CUDA's 2-D descriptor field by field: the same layout. */
_Static_assert(sizeof(dv_hip_Memcpy2D) == sizeof(dv_CUDA_MEMCPY2D), "2-D descriptors");
_Static_assert(sizeof(dv_hipIpcMemHandle_t) == sizeof(hipIpcMemHandle_t), "hipIpcMemHandle_t");
_Static_assert(sizeof(dv_hipIpcMemHandle_t) == HIP_IPC_HANDLE_SIZE, "HIP_IPC_HANDLE_SIZE");
_Static_assert(sizeof(dv_hipError_t) == sizeof(hipError_t), "hipError_t size");
_Static_assert(sizeof(dv_hipDeviceAttribute_t) == sizeof(hipDeviceAttribute_t),
               "hipDeviceAttribute_t size");
_Static_assert(sizeof(dv_hipFunction_attribute) == sizeof(hipFunction_attribute),
               "hipFunction_attribute size");
_Static_assert(sizeof(dv_hipStreamCaptureStatus) == sizeof(hipStreamCaptureStatus),
               "hipStreamCaptureStatus size");
_Static_assert(sizeof(dv_hipDevice_t) == sizeof(hipDevice_t), "hipDevice_t");
_Static_assert(sizeof(dv_hipDeviceptr_t) == sizeof(hipDeviceptr_t), "hipDeviceptr_t");

/* Values of different enumerations, compared as the ints they are passed as. */
#define EQ(a, b) ((int)(a) == (int)(b))

/* Error codes (the ones devarray names, and those the translations map). */
_Static_assert(EQ(DV_HIP_SUCCESS, hipSuccess) &&
                   EQ(DV_HIP_ERROR_INVALID_VALUE, hipErrorInvalidValue),
               "err");
_Static_assert(EQ(DV_HIP_ERROR_OUT_OF_MEMORY, hipErrorOutOfMemory) &&
                   EQ(DV_HIP_ERROR_NOT_INITIALIZED, hipErrorNotInitialized),
               "err");
_Static_assert(EQ(DV_HIP_ERROR_NO_DEVICE, hipErrorNoDevice) &&
                   EQ(DV_HIP_ERROR_INVALID_DEVICE, hipErrorInvalidDevice),
               "err");
_Static_assert(EQ(DV_HIP_ERROR_INVALID_IMAGE, hipErrorInvalidImage) &&
                   EQ(DV_HIP_ERROR_INVALID_CONTEXT, hipErrorInvalidContext),
               "err");
_Static_assert(EQ(DV_HIP_ERROR_NO_BINARY_FOR_GPU, hipErrorNoBinaryForGpu) &&
                   EQ(DV_HIP_ERROR_INVALID_HANDLE, hipErrorInvalidHandle),
               "err");
_Static_assert(EQ(DV_HIP_ERROR_NOT_FOUND, hipErrorNotFound) &&
                   EQ(DV_HIP_ERROR_NOT_READY, hipErrorNotReady),
               "err");
_Static_assert(EQ(DV_HIP_ERROR_ILLEGAL_ADDRESS, hipErrorIllegalAddress), "err");
_Static_assert(EQ(DV_HIP_ERROR_LAUNCH_OUT_OF_RESOURCES, hipErrorLaunchOutOfResources), "err");
_Static_assert(EQ(DV_HIP_ERROR_HOST_MEMORY_ALREADY_REGISTERED, hipErrorHostMemoryAlreadyRegistered),
               "err");
_Static_assert(EQ(DV_HIP_ERROR_HOST_MEMORY_NOT_REGISTERED, hipErrorHostMemoryNotRegistered), "err");
_Static_assert(EQ(DV_HIP_ERROR_LAUNCH_FAILURE, hipErrorLaunchFailure) &&
                   EQ(DV_HIP_ERROR_NOT_SUPPORTED, hipErrorNotSupported),
               "err");
_Static_assert(EQ(DV_HIP_ERROR_STREAM_CAPTURE_UNSUPPORTED, hipErrorStreamCaptureUnsupported),
               "err");
/* The codes HIP shares with CUDA, which the translations pass unchanged. */
_Static_assert(EQ(hipErrorDeinitialized, DV_CUDA_ERROR_DEINITIALIZED) &&
                   EQ(hipErrorInvalidKernelFile, DV_CUDA_ERROR_INVALID_PTX),
               "shared");
_Static_assert(EQ(hipErrorInvalidValue, DV_CUDA_ERROR_INVALID_VALUE) &&
                   EQ(hipErrorOutOfMemory, DV_CUDA_ERROR_OUT_OF_MEMORY),
               "shared");
_Static_assert(EQ(hipErrorNoDevice, DV_CUDA_ERROR_NO_DEVICE) &&
                   EQ(hipErrorInvalidDevice, DV_CUDA_ERROR_INVALID_DEVICE),
               "shared");
_Static_assert(EQ(hipErrorInvalidContext, DV_CUDA_ERROR_INVALID_CONTEXT) &&
                   EQ(hipErrorInvalidHandle, DV_CUDA_ERROR_INVALID_HANDLE),
               "shared");
_Static_assert(EQ(hipErrorNotReady, DV_CUDA_ERROR_NOT_READY) &&
                   EQ(hipErrorIllegalAddress, DV_CUDA_ERROR_ILLEGAL_ADDRESS),
               "shared");
_Static_assert(EQ(hipErrorLaunchFailure, DV_CUDA_ERROR_LAUNCH_FAILED) &&
                   EQ(hipErrorNotSupported, DV_CUDA_ERROR_NOT_SUPPORTED),
               "shared");
_Static_assert(EQ(hipErrorLaunchOutOfResources, DV_CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES), "shared");
_Static_assert(EQ(hipErrorHostMemoryAlreadyRegistered,
                  DV_CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED),
               "shared");
_Static_assert(EQ(hipErrorHostMemoryNotRegistered, DV_CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED),
               "shared");
_Static_assert(EQ(hipErrorStreamCaptureImplicit, DV_CUDA_ERROR_STREAM_CAPTURE_IMPLICIT), "shared");
_Static_assert(EQ(hipErrorPeerAccessAlreadyEnabled, 704) && EQ(hipErrorContextIsDestroyed, 709),
               "shared");
/* HIP's own codes, which hip_driver.c's dv__hip_result maps by number. */
_Static_assert(EQ(hipErrorInvalidConfiguration, 9) && EQ(hipErrorInvalidPitchValue, 12) &&
                   EQ(hipErrorInvalidSymbol, 13),
               "own");
_Static_assert(EQ(hipErrorInvalidDevicePointer, 17) && EQ(hipErrorInvalidMemcpyDirection, 21),
               "own");
_Static_assert(EQ(hipErrorPriorLaunchFailure, 53) && EQ(hipErrorInvalidDeviceFunction, 98), "own");
_Static_assert(EQ(hipErrorRuntimeMemory, 1052) && EQ(hipErrorRuntimeOther, 1053), "own");

/* Device attributes. */
_Static_assert(EQ(DV_HIP_ATTR_CAN_MAP_HOST_MEMORY, hipDeviceAttributeCanMapHostMemory), "attr");
_Static_assert(EQ(DV_HIP_ATTR_CONCURRENT_MANAGED_ACCESS, hipDeviceAttributeConcurrentManagedAccess),
               "attr");
_Static_assert(EQ(DV_HIP_ATTR_COMPUTE_CAPABILITY_MAJOR, hipDeviceAttributeComputeCapabilityMajor),
               "attr");
_Static_assert(EQ(DV_HIP_ATTR_COMPUTE_CAPABILITY_MINOR, hipDeviceAttributeComputeCapabilityMinor),
               "attr");
_Static_assert(EQ(DV_HIP_ATTR_MANAGED_MEMORY, hipDeviceAttributeManagedMemory), "attr");
_Static_assert(EQ(DV_HIP_ATTR_MAX_BLOCK_DIM_X, hipDeviceAttributeMaxBlockDimX), "attr");
_Static_assert(EQ(DV_HIP_ATTR_MAX_BLOCK_DIM_Y, hipDeviceAttributeMaxBlockDimY), "attr");
_Static_assert(EQ(DV_HIP_ATTR_MAX_BLOCK_DIM_Z, hipDeviceAttributeMaxBlockDimZ), "attr");
_Static_assert(EQ(DV_HIP_ATTR_MAX_GRID_DIM_X, hipDeviceAttributeMaxGridDimX), "attr");
_Static_assert(EQ(DV_HIP_ATTR_MAX_GRID_DIM_Y, hipDeviceAttributeMaxGridDimY), "attr");
_Static_assert(EQ(DV_HIP_ATTR_MAX_GRID_DIM_Z, hipDeviceAttributeMaxGridDimZ), "attr");
_Static_assert(EQ(DV_HIP_ATTR_MAX_THREADS_PER_BLOCK, hipDeviceAttributeMaxThreadsPerBlock), "attr");
_Static_assert(EQ(DV_HIP_ATTR_MAX_PITCH, hipDeviceAttributeMaxPitch), "attr");
_Static_assert(EQ(DV_HIP_ATTR_MULTIPROCESSOR_COUNT, hipDeviceAttributeMultiprocessorCount), "attr");
_Static_assert(EQ(DV_HIP_ATTR_MAX_SHARED_MEMORY_PER_BLOCK,
                  hipDeviceAttributeMaxSharedMemoryPerBlock),
               "attr");
_Static_assert(EQ(DV_HIP_ATTR_SHARED_MEM_PER_BLOCK_OPTIN, hipDeviceAttributeSharedMemPerBlockOptin),
               "attr");
_Static_assert(EQ(DV_HIP_ATTR_TOTAL_CONSTANT_MEMORY, hipDeviceAttributeTotalConstantMemory),
               "attr");
_Static_assert(EQ(DV_HIP_ATTR_UNIFIED_ADDRESSING, hipDeviceAttributeUnifiedAddressing), "attr");
_Static_assert(EQ(DV_HIP_ATTR_WARP_SIZE, hipDeviceAttributeWarpSize), "attr");

/* Function attributes: CUDA's numbers (cuFuncGetAttribute passes them on). */
_Static_assert(EQ(HIP_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
                  DV_CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK),
               "fattr");
_Static_assert(EQ(HIP_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, DV_CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES),
               "fattr");
_Static_assert(EQ(HIP_FUNC_ATTRIBUTE_CONST_SIZE_BYTES, DV_CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES),
               "fattr");
_Static_assert(EQ(HIP_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, DV_CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES),
               "fattr");
_Static_assert(EQ(HIP_FUNC_ATTRIBUTE_NUM_REGS, DV_CU_FUNC_ATTRIBUTE_NUM_REGS), "fattr");
_Static_assert(EQ(HIP_FUNC_ATTRIBUTE_PTX_VERSION, DV_CU_FUNC_ATTRIBUTE_PTX_VERSION), "fattr");
_Static_assert(EQ(HIP_FUNC_ATTRIBUTE_BINARY_VERSION, DV_CU_FUNC_ATTRIBUTE_BINARY_VERSION), "fattr");
_Static_assert(EQ(HIP_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                  DV_CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES),
               "fattr");

/* Flags: HIP's, and that they are CUDA's bits (the translations pass them). */
_Static_assert(EQ(DV_HIP_STREAM_NON_BLOCKING, hipStreamNonBlocking) &&
                   EQ(hipStreamNonBlocking, DV_CU_STREAM_NON_BLOCKING),
               "flags");
_Static_assert(EQ(DV_HIP_EVENT_DISABLE_TIMING, hipEventDisableTiming) &&
                   EQ(hipEventDisableTiming, DV_CU_EVENT_DISABLE_TIMING),
               "flags");
_Static_assert(EQ(DV_HIP_HOST_MALLOC_PORTABLE, hipHostMallocPortable) &&
                   EQ(hipHostMallocPortable, DV_CU_MEMHOSTALLOC_PORTABLE),
               "flags");
_Static_assert(EQ(DV_HIP_HOST_MALLOC_MAPPED, hipHostMallocMapped) &&
                   EQ(hipHostMallocMapped, DV_CU_MEMHOSTALLOC_DEVICEMAP),
               "flags");
_Static_assert(EQ(DV_HIP_HOST_MALLOC_WRITE_COMBINED, hipHostMallocWriteCombined) &&
                   EQ(hipHostMallocWriteCombined, DV_CU_MEMHOSTALLOC_WRITECOMBINED),
               "flags");
_Static_assert(EQ(DV_HIP_HOST_REGISTER_PORTABLE, hipHostRegisterPortable) &&
                   EQ(hipHostRegisterPortable, DV_CU_MEMHOSTREGISTER_PORTABLE),
               "flags");
_Static_assert(EQ(DV_HIP_HOST_REGISTER_MAPPED, hipHostRegisterMapped) &&
                   EQ(hipHostRegisterMapped, DV_CU_MEMHOSTREGISTER_DEVICEMAP),
               "flags");
_Static_assert(EQ(DV_HIP_MEM_ATTACH_GLOBAL, hipMemAttachGlobal) &&
                   EQ(hipMemAttachGlobal, DV_CU_MEM_ATTACH_GLOBAL),
               "flags");
_Static_assert(EQ(DV_HIP_MEM_ATTACH_HOST, hipMemAttachHost) &&
                   EQ(hipMemAttachHost, DV_CU_MEM_ATTACH_HOST),
               "flags");
_Static_assert(EQ(hipStreamCaptureStatusNone, DV_CU_STREAM_CAPTURE_STATUS_NONE) &&
                   EQ(hipStreamCaptureStatusActive, DV_CU_STREAM_CAPTURE_STATUS_ACTIVE) &&
                   EQ(hipStreamCaptureStatusInvalidated, DV_CU_STREAM_CAPTURE_STATUS_INVALIDATED),
               "capture");

/* Every entry point devarray loads is declared (sizeof: nothing is linked;
 * the context functions are deprecated in ROCm, which is not the point). */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#define DV_HIP(ret, name, params) _Static_assert(sizeof(&name) == sizeof(void (*)(void)), #name);
#include "backends/hip/hip_symbols.def"
#undef DV_HIP

int main(void) {
  int failed = 0;
  /* Memory types by the installed ROCm's major version (hip_runtime.h keeps both). */
  /* The same for IPC's flag (0 in ROCm 5, 1 from ROCm 6). */
#if HIP_VERSION_MAJOR >= 6
  const int host = DV_HIP6_MEMORYTYPE_HOST, device = DV_HIP6_MEMORYTYPE_DEVICE;
  const int lazy = DV_HIP6_IPC_MEM_LAZY_ENABLE_PEER_ACCESS;
#else
  const int host = DV_HIP5_MEMORYTYPE_HOST, device = DV_HIP5_MEMORYTYPE_DEVICE;
  const int lazy = DV_HIP5_IPC_MEM_LAZY_ENABLE_PEER_ACCESS;
#endif
  if ((int)hipMemoryTypeHost != host || (int)hipMemoryTypeDevice != device) {
    printf("hipMemoryType: Host %d, Device %d differ from hip_runtime.h's ROCm %d values\n",
           (int)hipMemoryTypeHost, (int)hipMemoryTypeDevice, HIP_VERSION_MAJOR);
    failed = 1;
  }
  if (hipIpcMemLazyEnablePeerAccess != lazy) {
    printf("hipIpcMemLazyEnablePeerAccess %d differs from hip_runtime.h's ROCm %d value\n",
           (int)hipIpcMemLazyEnablePeerAccess, HIP_VERSION_MAJOR);
    failed = 1;
  }
  /* The per-thread stream's handle (a macro cast, not a constant expression). */
  if ((void *)DV_HIP_STREAM_PER_THREAD != (void *)hipStreamPerThread) {
    printf("hipStreamPerThread differs\n");
    failed = 1;
  }
  if (!failed)
    printf("HIP ABI (ROCm %d.%d headers): declarations match\n", HIP_VERSION_MAJOR,
           HIP_VERSION_MINOR);
  return failed;
}
