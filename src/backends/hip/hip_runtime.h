/*
 * The parts of AMD's HIP runtime API (hip_runtime_api.h, hiprtc.h; ROCm 5
 * and 6) the HIP backend calls, declared here so that devarray builds with
 * no ROCm software present: libamdhip64 (and hipRTC) are loaded with dlopen
 * (hip.c) through the entry-point lists hip_symbols.def and
 * hiprtc_symbols.def.  Only types and values whose layout is the same in
 * ROCm 5 and 6 are declared here; what differs between them (hipMemoryType's
 * values) is chosen at run time from hipRuntimeGetVersion.  Not declared,
 * because their layout changed or is not the same as CUDA's:
 * hipDeviceProp_t (ROCm 6 changed it) and HIP_MEMCPY3D (32-bit fields in
 * ROCm 5): 3-D copies are done as 2-D copies per slice.
 */
#ifndef DV_HIP_RUNTIME_H
#define DV_HIP_RUNTIME_H
#include <stddef.h>
#include <stdint.h>

typedef int dv_hipError_t; /* hipError_t, an enum */
typedef int dv_hipDevice_t;
typedef void *dv_hipDeviceptr_t;
typedef struct dv_hipCtx_st *dv_hipCtx_t;
typedef struct dv_hipStream_st *dv_hipStream_t;
typedef struct dv_hipEvent_st *dv_hipEvent_t;
typedef struct dv_hipModule_st *dv_hipModule_t;
typedef struct dv_hipFunction_st *dv_hipFunction_t;
typedef void (*dv_hipHostFn_t)(void *user);
typedef void (*dv_hipStreamCallback_t)(dv_hipStream_t s, dv_hipError_t status, void *user);
typedef int dv_hipDeviceAttribute_t;   /* enum hipDeviceAttribute_t */
typedef int dv_hipFunction_attribute;  /* enum hipFunction_attribute: CUDA's values */
typedef int dv_hipJitOption;           /* enum hipJitOption */
typedef int dv_hipStreamCaptureStatus; /* enum: None 0, Active 1, Invalidated 2 */
typedef struct dv_hipGraph_st *dv_hipGraph_t;         /* hipGraph_t */
typedef struct dv_hipGraphExec_st *dv_hipGraphExec_t; /* hipGraphExec_t */

#define DV_HIP_SUCCESS 0
#define DV_HIP_ERROR_INVALID_VALUE 1
#define DV_HIP_ERROR_OUT_OF_MEMORY 2
#define DV_HIP_ERROR_NOT_INITIALIZED 3
#define DV_HIP_ERROR_NO_DEVICE 100      /* hipErrorNoDevice */
#define DV_HIP_ERROR_INVALID_DEVICE 101 /* hipErrorInvalidDevice: hipInit without a GPU (ROCm 5) */
#define DV_HIP_ERROR_INVALID_IMAGE 200
#define DV_HIP_ERROR_INVALID_CONTEXT 201
#define DV_HIP_ERROR_NO_BINARY_FOR_GPU 209
#define DV_HIP_ERROR_INVALID_HANDLE 400
#define DV_HIP_ERROR_NOT_FOUND 500
#define DV_HIP_ERROR_NOT_READY 600
#define DV_HIP_ERROR_ILLEGAL_ADDRESS 700
#define DV_HIP_ERROR_LAUNCH_OUT_OF_RESOURCES 701
#define DV_HIP_ERROR_HOST_MEMORY_ALREADY_REGISTERED 712
#define DV_HIP_ERROR_HOST_MEMORY_NOT_REGISTERED 713
#define DV_HIP_ERROR_LAUNCH_FAILURE 719
#define DV_HIP_ERROR_NOT_SUPPORTED 801
#define DV_HIP_ERROR_STREAM_CAPTURE_UNSUPPORTED 900

/* hipDeviceAttribute_t values devarray reads (the same in ROCm 5 and 6;
 * tests/backends/hip/test_hip_abi.c checks them against hip_runtime_api.h when present). */
enum {
  DV_HIP_ATTR_CAN_MAP_HOST_MEMORY = 3,
  DV_HIP_ATTR_CONCURRENT_MANAGED_ACCESS = 9,
  DV_HIP_ATTR_COMPUTE_CAPABILITY_MAJOR = 23,
  DV_HIP_ATTR_MANAGED_MEMORY = 24,
  DV_HIP_ATTR_MAX_BLOCK_DIM_X = 26,
  DV_HIP_ATTR_MAX_BLOCK_DIM_Y = 27,
  DV_HIP_ATTR_MAX_BLOCK_DIM_Z = 28,
  DV_HIP_ATTR_MAX_GRID_DIM_X = 29,
  DV_HIP_ATTR_MAX_GRID_DIM_Y = 30,
  DV_HIP_ATTR_MAX_GRID_DIM_Z = 31,
  DV_HIP_ATTR_MAX_THREADS_PER_BLOCK = 56,
  DV_HIP_ATTR_MAX_PITCH = 58,
  DV_HIP_ATTR_COMPUTE_CAPABILITY_MINOR = 61,
  DV_HIP_ATTR_MULTIPROCESSOR_COUNT = 63,
  DV_HIP_ATTR_MAX_SHARED_MEMORY_PER_BLOCK = 74,
  DV_HIP_ATTR_SHARED_MEM_PER_BLOCK_OPTIN = 75,
  DV_HIP_ATTR_TOTAL_CONSTANT_MEMORY = 83,
  DV_HIP_ATTR_UNIFIED_ADDRESSING = 85,
  DV_HIP_ATTR_WARP_SIZE = 87,
  DV_HIP_ATTR_MEMORY_POOLS_SUPPORTED = 88, /* the stream-ordered allocator */
  /* AMD's range: hipStreamWaitValue32/64 work (the staging threads' waits). */
  DV_HIP_ATTR_CAN_USE_STREAM_WAIT_VALUE = 10013,
};
/* hipStreamWaitValue64's flags: wait until (*ptr & mask) >= value. */
enum { DV_HIP_STREAM_WAIT_VALUE_GTE = 0 };

/* hipMemoryType: ROCm 5 numbers Host 0, Device 1; ROCm 6 took CUDA's
 * (Unregistered 0, Host 1, Device 2).  hip.c picks by the runtime's version. */
enum { DV_HIP5_MEMORYTYPE_HOST = 0, DV_HIP5_MEMORYTYPE_DEVICE = 1 };
enum { DV_HIP6_MEMORYTYPE_HOST = 1, DV_HIP6_MEMORYTYPE_DEVICE = 2 };

/* Flags: the same values as CUDA's. */
#define DV_HIP_STREAM_NON_BLOCKING 0x01
#define DV_HIP_EVENT_DISABLE_TIMING 0x02
#define DV_HIP_HOST_MALLOC_PORTABLE 0x1
#define DV_HIP_HOST_MALLOC_MAPPED 0x2
#define DV_HIP_HOST_MALLOC_WRITE_COMBINED 0x4
#define DV_HIP_HOST_REGISTER_PORTABLE 0x1
#define DV_HIP_HOST_REGISTER_MAPPED 0x2
#define DV_HIP_MEM_ATTACH_GLOBAL 0x1
#define DV_HIP_MEM_ATTACH_HOST 0x2
/* hipIpcOpenMemHandle's one flag: 0 in ROCm 5, CUDA's 0x1 from ROCm 6. */
#define DV_HIP5_IPC_MEM_LAZY_ENABLE_PEER_ACCESS 0x0
#define DV_HIP6_IPC_MEM_LAZY_ENABLE_PEER_ACCESS 0x1
/* The per-thread default stream; the legacy default stream is NULL. */
#define DV_HIP_STREAM_PER_THREAD ((dv_hipStream_t)2)

/* hip_Memcpy2D: CUDA_MEMCPY2D's layout, with hipMemoryType's values. */
typedef struct dv_hip_Memcpy2D {
  size_t srcXInBytes, srcY;
  int srcMemoryType;
  const void *srcHost;
  dv_hipDeviceptr_t srcDevice;
  void *srcArray;
  size_t srcPitch;
  size_t dstXInBytes, dstY;
  int dstMemoryType;
  void *dstHost;
  dv_hipDeviceptr_t dstDevice;
  void *dstArray;
  size_t dstPitch;
  size_t WidthInBytes, Height;
} dv_hip_Memcpy2D;

/* hipIpcMemHandle_t (HIP_IPC_HANDLE_SIZE bytes), passed by value. */
typedef struct dv_hipIpcMemHandle_t {
  char reserved[64];
} dv_hipIpcMemHandle_t;

/* The stream-ordered allocator (ROCm 5.2): hipMemPool_t, and
 * hipMemPoolProps (CUDA's layout, 88 bytes: allocType hipMemAllocationTypePinned
 * 1, handleTypes none 0, location {hipMemLocationTypeDevice 1, ordinal},
 * win32SecurityAttributes, maxSize, reserved).  hipMemPoolAttr takes CUDA's
 * numbers (release threshold 4, reserved current/high 5/6, used 7/8). */
typedef struct dv_hipMemPool_st *dv_hipMemPool_t;
typedef struct dv_hipMemPoolProps {
  int allocType, handleTypes;
  struct {
    int type, id;
  } location;
  void *win32SecurityAttributes;
  size_t maxSize;
  unsigned char reserved[56];
} dv_hipMemPoolProps;

/* hipRTC (hiprtc.h). */
typedef int dv_hiprtcResult; /* HIPRTC_SUCCESS 0 */
typedef struct dv_hiprtcProgram_st *dv_hiprtcProgram;
#define DV_HIPRTC_SUCCESS 0

/* The entry points, filled by hip.c's loader. */
typedef struct dv_hip_api {
#define DV_HIP(ret, name, params) ret(*name) params;
#include "hip_symbols.def"
#undef DV_HIP
} dv_hip_api;

typedef struct dv_hiprtc_api {
#define DV_HIPRTC(ret, name, params) ret(*name) params;
#include "hiprtc_symbols.def"
#undef DV_HIPRTC
} dv_hiprtc_api;

#endif
