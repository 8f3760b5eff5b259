/*
 * The few CUDA driver API types and constants devarray uses, declared from
 * the driver API's documentation so that the library builds with no CUDA
 * software installed.  Names carry a dv_ prefix so that they can sit beside
 * the toolkit's cuda.h, against which tests/backends/cuda/test_cuda_abi.c checks every
 * size, offset and value when the toolkit is present at build time.
 */
#ifndef DV_CUDA_DRIVER_H
#define DV_CUDA_DRIVER_H
#include <stddef.h>

typedef int dv_CUresult;
typedef int dv_CUdevice;
typedef unsigned long long dv_CUdeviceptr;
typedef struct dv_CUctx_st *dv_CUcontext;
typedef struct dv_CUstream_st *dv_CUstream;
typedef struct dv_CUevent_st *dv_CUevent;
typedef struct dv_CUmod_st *dv_CUmodule;
typedef struct dv_CUfunc_st *dv_CUfunction;
typedef struct dv_CUmemPoolHandle_st *dv_CUmemoryPool;
typedef struct dv_CUgraph_st *dv_CUgraph;         /* stream capture's graph (issue 40) */
typedef struct dv_CUgraphExec_st *dv_CUgraphExec; /* an instantiated graph */
typedef void (*dv_CUhostFn)(void *user);
typedef void (*dv_CUstreamCallback)(dv_CUstream s, dv_CUresult status, void *user);
/* Enumerations passed by value (int-sized, as the ABI passes cuda.h's enums). */
typedef int dv_CUdevice_attribute;
typedef int dv_CUfunction_attribute;
typedef int dv_CUjit_option;
typedef int dv_CUmemPool_attribute;
typedef int dv_CUstreamCaptureMode;

enum {
  DV_CUDA_SUCCESS = 0,
  DV_CUDA_ERROR_INVALID_VALUE = 1,
  DV_CUDA_ERROR_OUT_OF_MEMORY = 2,
  DV_CUDA_ERROR_NOT_INITIALIZED = 3,
  DV_CUDA_ERROR_DEINITIALIZED = 4,
  DV_CUDA_ERROR_NO_DEVICE = 100,
  DV_CUDA_ERROR_INVALID_DEVICE = 101,
  DV_CUDA_ERROR_INVALID_IMAGE = 200,
  DV_CUDA_ERROR_INVALID_CONTEXT = 201,
  DV_CUDA_ERROR_NO_BINARY_FOR_GPU = 209,
  DV_CUDA_ERROR_INVALID_PTX = 218,
  DV_CUDA_ERROR_JIT_COMPILER_NOT_FOUND = 221,
  DV_CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222,
  DV_CUDA_ERROR_INVALID_HANDLE = 400,
  DV_CUDA_ERROR_ILLEGAL_STATE = 401,
  DV_CUDA_ERROR_NOT_FOUND = 500,
  DV_CUDA_ERROR_NOT_READY = 600,
  DV_CUDA_ERROR_ILLEGAL_ADDRESS = 700,
  DV_CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES = 701,
  DV_CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED = 712,
  DV_CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED = 713,
  DV_CUDA_ERROR_LAUNCH_FAILED = 719,
  DV_CUDA_ERROR_NOT_SUPPORTED = 801,
  DV_CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED = 900,
  DV_CUDA_ERROR_STREAM_CAPTURE_INVALIDATED = 901,
  DV_CUDA_ERROR_STREAM_CAPTURE_IMPLICIT = 906,
};

/* cuStreamBeginCapture's mode: relaxed (devarray refuses what cannot be
 * captured itself; the other modes forbid calls on every thread). */
enum { DV_CU_STREAM_CAPTURE_MODE_RELAXED = 2 };

/* cuStreamIsCapturing's answer (an enumeration written through a pointer:
 * declared as one, so that the prototype matches cuda.h's). */
typedef enum dv_CUstreamCaptureStatus {
  DV_CU_STREAM_CAPTURE_STATUS_NONE = 0,
  DV_CU_STREAM_CAPTURE_STATUS_ACTIVE = 1,
  DV_CU_STREAM_CAPTURE_STATUS_INVALIDATED = 2,
} dv_CUstreamCaptureStatus;

enum {
  DV_CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 1,
  DV_CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X = 2,
  DV_CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y = 3,
  DV_CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z = 4,
  DV_CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X = 5,
  DV_CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y = 6,
  DV_CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z = 7,
  DV_CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK = 8,
  DV_CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY = 9,
  DV_CU_DEVICE_ATTRIBUTE_WARP_SIZE = 10,
  DV_CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
  DV_CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY = 19,
  DV_CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING = 41,
  DV_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
  DV_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
  DV_CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY = 83,
  DV_CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS = 89,
  DV_CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97,
  /* The v2 stream memory operations' 64-bit waits (cuStreamWaitValue64). */
  /* The stream-ordered allocator (cuMemAllocFromPoolAsync, memory pools). */
  DV_CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED = 115,
  DV_CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS = 122,
};

enum {
  DV_CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0,
  DV_CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1,
  DV_CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES = 2,
  DV_CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES = 3,
  DV_CU_FUNC_ATTRIBUTE_NUM_REGS = 4,
  DV_CU_FUNC_ATTRIBUTE_PTX_VERSION = 5,
  DV_CU_FUNC_ATTRIBUTE_BINARY_VERSION = 6,
  DV_CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8,
};

enum {
  DV_CU_JIT_INFO_LOG_BUFFER = 3,
  DV_CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES = 4,
  DV_CU_JIT_ERROR_LOG_BUFFER = 5,
  DV_CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6,
  DV_CU_JIT_LOG_VERBOSE = 12,
};

enum { DV_CU_MEMORYTYPE_HOST = 1, DV_CU_MEMORYTYPE_DEVICE = 2 };
/* cuPointerGetAttribute's (CUpointer_attribute). */
enum {
  DV_CU_POINTER_ATTRIBUTE_MEMORY_TYPE = 2,
  DV_CU_POINTER_ATTRIBUTE_RANGE_START_ADDR = 11,
  DV_CU_POINTER_ATTRIBUTE_RANGE_SIZE = 12
};
enum { DV_CU_STREAM_NON_BLOCKING = 1 };
enum { DV_CU_EVENT_BLOCKING_SYNC = 1, DV_CU_EVENT_DISABLE_TIMING = 2 };
/* cuStreamWaitValue64's: wait until (int64_t)(*addr - value) >= 0. */
enum { DV_CU_STREAM_WAIT_VALUE_GEQ = 0 };
enum { DV_CU_MEM_ATTACH_GLOBAL = 1, DV_CU_MEM_ATTACH_HOST = 2 };
/* Managed memory's hints (cuMemPrefetchAsync, cuMemAdvise): CUmem_advise's
 * values (devarray.h's dv_mem_advice has the same), the first entries'
 * CU_DEVICE_CPU, and the _v2 entries' CUmemLocation (CUDA 12.2+). */
typedef enum dv_CUmem_advise {
  DV_CU_MEM_ADVISE_SET_READ_MOSTLY = 1,
  DV_CU_MEM_ADVISE_UNSET_READ_MOSTLY = 2,
  DV_CU_MEM_ADVISE_SET_PREFERRED_LOCATION = 3,
  DV_CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION = 4,
  DV_CU_MEM_ADVISE_SET_ACCESSED_BY = 5,
  DV_CU_MEM_ADVISE_UNSET_ACCESSED_BY = 6
} dv_CUmem_advise;
#define DV_CU_DEVICE_CPU ((dv_CUdevice)-1)
typedef enum dv_CUmemLocationType {
  DV_CU_MEM_LOCATION_TYPE_INVALID = 0,
  DV_CU_MEM_LOCATION_TYPE_DEVICE = 1,
  DV_CU_MEM_LOCATION_TYPE_HOST = 2
} dv_CUmemLocationType;
typedef struct dv_CUmemLocation {
  dv_CUmemLocationType type;
  int id; /* a device ordinal (DEVICE); ignored for HOST */
} dv_CUmemLocation;
#define DV_CU_MEMHOSTALLOC_PORTABLE 0x01
#define DV_CU_MEMHOSTALLOC_DEVICEMAP 0x02
#define DV_CU_MEMHOSTALLOC_WRITECOMBINED 0x04
#define DV_CU_MEMHOSTREGISTER_PORTABLE 0x01
#define DV_CU_MEMHOSTREGISTER_DEVICEMAP 0x02
#define DV_CU_STREAM_LEGACY ((dv_CUstream)0x1)
#define DV_CU_STREAM_PER_THREAD ((dv_CUstream)0x2)

typedef struct dv_CUDA_MEMCPY2D {
  size_t srcXInBytes, srcY;
  int srcMemoryType;
  const void *srcHost;
  dv_CUdeviceptr srcDevice;
  void *srcArray;
  size_t srcPitch;
  size_t dstXInBytes, dstY;
  int dstMemoryType;
  void *dstHost;
  dv_CUdeviceptr dstDevice;
  void *dstArray;
  size_t dstPitch;
  size_t WidthInBytes, Height;
} dv_CUDA_MEMCPY2D;

typedef struct dv_CUDA_MEMCPY3D {
  size_t srcXInBytes, srcY, srcZ, srcLOD;
  int srcMemoryType;
  const void *srcHost;
  dv_CUdeviceptr srcDevice;
  void *srcArray;
  void *reserved0;
  size_t srcPitch, srcHeight;
  size_t dstXInBytes, dstY, dstZ, dstLOD;
  int dstMemoryType;
  void *dstHost;
  dv_CUdeviceptr dstDevice;
  void *dstArray;
  void *reserved1;
  size_t dstPitch, dstHeight;
  size_t WidthInBytes, Height, Depth;
} dv_CUDA_MEMCPY3D;
/* cuIpcGetMemHandle's handle (CU_IPC_HANDLE_SIZE bytes), passed by value to
 * cuIpcOpenMemHandle. */
typedef struct dv_CUipcMemHandle {
  char reserved[64];
} dv_CUipcMemHandle;
#define DV_CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS 0x1

/* Memory pools (the "async" manager, fam_mempool.c): CUmemPool_attribute's
 * values (int-valued 1..3, the rest cuuint64_t) and cuMemPoolCreate's
 * properties (CUmemPoolProps: 88 bytes; reserved must be zero). */
enum {
  DV_CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES = 1,
  DV_CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC = 2,
  DV_CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES = 3,
  DV_CU_MEMPOOL_ATTR_RELEASE_THRESHOLD = 4,
  DV_CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT = 5,
  DV_CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH = 6,
  DV_CU_MEMPOOL_ATTR_USED_MEM_CURRENT = 7,
  DV_CU_MEMPOOL_ATTR_USED_MEM_HIGH = 8,
};
/* (dv_CUmemLocation: above, with the managed-memory hints) */
enum { DV_CU_MEM_ALLOCATION_TYPE_PINNED = 1, DV_CU_MEM_HANDLE_TYPE_NONE = 0 };
typedef struct dv_CUmemPoolProps {
  int allocType;   /* CUmemAllocationType */
  int handleTypes; /* CUmemAllocationHandleType */
  dv_CUmemLocation location;
  void *win32SecurityAttributes;
  size_t maxSize; /* 0: the system's */
  unsigned short usage;
  unsigned char reserved[54];
} dv_CUmemPoolProps;

#endif
