/*
 * A strict test double of AMD's HIP runtime (libamdhip64): every entry
 * point of src/backends/hip/hip_symbols.def, built by the tests as
 * libamdhip64.so.5 in a folder of its own (with the links libamdhip64.so
 * and libhiprtc.so.6 to it) that the HIP test entries put first on
 * LD_LIBRARY_PATH (DV_HIP_DOUBLE_ENV), so that the backend's dlopen finds it
 * as it would find ROCm.  Never installed; the library knows nothing of it.
 *
 * It is the CUDA double's engine (tests/backends/cuda/cudadouble/libcuda_double.c,
 * compiled into this file with DVDOUBLE_HIP: its cu* functions are hidden
 * here) with HIP's entry points as thin translations, so every rule of that
 * double holds here with HIP's names and numbers (read its header comment):
 * device memory the host cannot touch, checked at the call and again when
 * queued work runs (use after free: hipErrorIllegalAddress, sticky);
 * pinned/registered/mapped host memory; streams with a worker each, the
 * legacy stream (NULL) synchronizing with blocking streams; copies with
 * pageable host memory synchronous, and aborting as the deadlock they are
 * when they would wait HIP_DOUBLE_BLOCK_S seconds (default 20); host
 * functions and callbacks serialized and unable to call the runtime; events;
 * capture (dvdouble_capture); the dvdouble_* controls.  What is HIP's:
 *  - hipInit first (hipErrorNotInitialized before it: stricter than HIP,
 *    which initializes itself); HIP_DOUBLE_INIT forces hipInit's result;
 *    HIP_DOUBLE_DEVICES devices (default 2; 0: hipInit says
 *    hipErrorInvalidDevice as ROCm 5 does without a GPU, hipErrorNoDevice as
 *    ROCm 6 does), HIP_DOUBLE_MEMORY bytes each.  A thread must make a
 *    context current (hipCtxSetCurrent) before calls that need one (stricter
 *    than HIP, whose threads start on device 0).
 *  - The ROCm it plays: HIP_DOUBLE_ROCM=5 (default) or 6, read at each call:
 *    hipRuntimeGetVersion says 50221153 (5.2) or 60032830 (6.0);
 *    hipMemcpyParam2DAsync takes hipMemoryType's numbers of that version
 *    (ROCm 5: Host 0, Device 1; ROCm 6: Host 1, Device 2; anything else,
 *    arrays and unified memory included, hipErrorInvalidValue);
 *    hipIpcOpenMemHandle's flags must be hipIpcMemLazyEnablePeerAccess,
 *    which is 0 in ROCm 5 (0 or 1 in ROCm 6); hipInit without devices above.
 *  - Streams: NULL is the legacy stream, (hipStream_t)2 the per-thread one;
 *    (hipStream_t)1 (CUDA's legacy handle) is no HIP stream:
 *    hipErrorInvalidHandle.  hipMemcpyPeerAsync takes device ordinals.
 *  - hipMalloc/hipHostMalloc of 0 bytes give NULL and hipSuccess; hipFree
 *    and hipHostFree of NULL succeed.  hipFree waits for the device first
 *    (ROCm: "an implicit hipDeviceSynchronize"), bounded as the pageable
 *    copies are, then frees; an unknown pointer is
 *    hipErrorInvalidDevicePointer; hipHostFree waits too.  hipHostMalloc's memory has a device
 *    address only with hipHostMallocMapped (stricter than ROCm, which maps
 *    all of it).
 *  - hipDeviceGetAttribute with HIP's numbers: warp size 64, 64 KiB of
 *    shared memory per block (opt-in too), 1024 threads per block and per
 *    block dimension, grids up to 2^31 - 1, compute capability 9.0
 *    (dvdouble_set_compute_capability), managed memory, concurrent managed
 *    access only for an "xnack+" architecture; the rest of HIP's numbers 0.
 *    hipGetDeviceProperties (not in hip_symbols.def: an optional entry
 *    point) fills ROCm 5.2's hipDeviceProp_t (792 bytes) with the name,
 *    totalGlobalMem, warpSize, maxThreadsPerBlock, sharedMemPerBlock,
 *    multiProcessorCount, major, minor and gcnArchName
 *    ("gfx90a:sramecc+:xnack-", HIP_DOUBLE_ARCH), zeros elsewhere.
 *  - Modules are AMDGPU code objects (hip_elf.c; anything else,
 *    hipErrorInvalidImage): kernels from their descriptors, globals backed
 *    by double device memory holding the image's bytes (zeros for .bss).
 *    hipModuleLaunchKernel checks the grid (each dimension's work-items
 *    below 2^32), the block (1024 threads), static plus dynamic shared
 *    memory (64 KiB) and params: each explicit argument the code object's
 *    metadata lists is read through its params entry with the size the
 *    metadata gives (a NULL entry is hipErrorInvalidValue, a pointer to
 *    fewer bytes a read past its end that ASan reports); without metadata
 *    params must be non-NULL when the kernel has a kernarg segment.  It runs
 *    host versions of devarray's copy kernels (dv_copy_w*_i32/_i64,
 *    parameters decoded as the CUDA double does) and records every other
 *    launch without running it (dvdouble_launches).  hipFuncGetAttribute
 *    answers from the descriptor (SHARED_SIZE_BYTES, LOCAL_SIZE_BYTES) and
 *    the metadata (NUM_REGS: .vgpr_count).
 *  - hipRTC: hiprtc_forward.c forwards to a real hipRTC, or fails.
 *
 * What it does NOT model: offload bundles (clang's
 * __CLANG_OFFLOAD_BUNDLE__ images: hipErrorInvalidImage here, ROCm takes
 * them); `extra` kernel arguments (HIP_LAUNCH_PARAM_*: refused); the
 * arguments' offsets and alignment (the metadata's .offset: params are read
 * one by one, as hipModuleLaunchKernel does); running any kernel but the
 * copy kernels; the descriptor's other fields (register counts, wave size,
 * dynamic stack) and the code object version's other details; an image
 * shorter than its ELF headers say (the image's size is not passed); IPC
 * across processes (each process has its own double: handles round-trip
 * through hipIpcGetMemHandle, opening one is refused: in the exporting
 * process hipErrorInvalidContext, elsewhere hipErrorNotSupported);
 * hipErrorNotPermitted (800: the double's answer to a runtime call from a
 * host function or callback; ROCm 5.2 has no such code); ROCm 6's larger
 * hipDeviceProp_t (hipGetDevicePropertiesR0600); per-device current devices
 * (hipSetDevice), graphs beyond capture mode, textures, arrays, 3-D copies.
 *
 * Test-only controls (dlsym): the CUDA double's dvdouble_* ones, and
 * hip_double_init_calls (how often hipInit ran), hip_double_hiprtc_path.
 */
#define DVDOUBLE_HIP 1
#include "../../cuda/cudadouble/libcuda_double.c"

#include "../../../../src/backends/hip/hip_runtime.h"
#include "hip_elf.h"

#define API __attribute__((visibility("default")))
#define HIP_INVALID_DEVICE_POINTER 17
#define HIP_PROP_SIZE 792 /* sizeof(hipDeviceProp_t), ROCm 5.2 */
/* Offsets in ROCm 5.2's hipDeviceProp_t, from offsetof with its
 * hip_runtime_api.h (tests/backends/hip/test_hip_double.c checks them where it is). */
enum {
  PROP_NAME = 0,            /* char[256] */
  PROP_TOTAL_GLOBAL_MEM = 256,
  PROP_SHARED_MEM_PER_BLOCK = 264,
  PROP_WARP_SIZE = 276,
  PROP_MAX_THREADS_PER_BLOCK = 280,
  PROP_MAJOR = 328,
  PROP_MINOR = 332,
  PROP_MULTIPROCESSOR_COUNT = 336,
  PROP_GCN_ARCH_NAME = 396, /* char[256] */
};

#define DV_HIP(ret, name, params) API ret name params;
#include "../../../../src/backends/hip/hip_symbols.def"
#undef DV_HIP
API dv_hipError_t hipGetDeviceProperties(void *prop, int device);
API int hip_double_init_calls(void);

static int g_init_calls;

static int rocm(void) {
  const char *e = getenv("HIP_DOUBLE_ROCM");
  return e && atoi(e) == 6 ? 6 : 5;
}

static const char *arch(void) {
  const char *e = getenv("HIP_DOUBLE_ARCH");
  return e && *e ? e : "gfx90a:sramecc+:xnack-";
}
/* Concurrent managed access, the engine's default (dvdouble_set_concurrent_managed). */
static int hip_xnack_on(void) { return strstr(arch(), "xnack+") != NULL; }

/* ---- initialization, errors, devices --------------------------------------------------------- */

API int hip_double_init_calls(void) { return __atomic_load_n(&g_init_calls, __ATOMIC_RELAXED); }

API dv_hipError_t hipInit(unsigned flags) {
  __atomic_fetch_add(&g_init_calls, 1, __ATOMIC_RELAXED);
  if (flags) return DV_HIP_ERROR_INVALID_VALUE; /* HIP: flags must be 0 */
  const char *e = getenv("HIP_DOUBLE_INIT");
  if (e && *e && atoi(e)) return atoi(e);
  CUresult r = cuInit(0);
  if (r == DV_HIP_ERROR_NO_DEVICE && rocm() == 5) return DV_HIP_ERROR_INVALID_DEVICE;
  return r;
}

API dv_hipError_t hipRuntimeGetVersion(int *v) {
  if (!v) return DV_HIP_ERROR_INVALID_VALUE;
  *v = rocm() == 6 ? 60032830 : 50221153; /* major * 10^7 + minor * 10^5 + patch */
  return DV_HIP_SUCCESS;
}

API dv_hipError_t hipDriverGetVersion(int *v) { return hipRuntimeGetVersion(v); }

static const struct {
  int code;
  const char *name, *text;
} herrs[] = {
    {0, "hipSuccess", "no error"},
    {1, "hipErrorInvalidValue", "invalid argument"},
    {2, "hipErrorOutOfMemory", "out of memory"},
    {3, "hipErrorNotInitialized", "initialization error"},
    {17, "hipErrorInvalidDevicePointer", "invalid device pointer"},
    {100, "hipErrorNoDevice", "no ROCm-capable device is detected"},
    {101, "hipErrorInvalidDevice", "invalid device ordinal"},
    {200, "hipErrorInvalidImage", "device kernel image is invalid"},
    {201, "hipErrorInvalidContext", "invalid device context"},
    {209, "hipErrorNoBinaryForGpu", "no kernel image is available for execution on the device"},
    {400, "hipErrorInvalidHandle", "invalid resource handle"},
    {500, "hipErrorNotFound", "named symbol not found"},
    {600, "hipErrorNotReady", "device not ready"},
    {700, "hipErrorIllegalAddress", "an illegal memory access was encountered"},
    {701, "hipErrorLaunchOutOfResources", "too many resources requested for launch"},
    {704, "hipErrorPeerAccessAlreadyEnabled", "peer access is already enabled"},
    {709, "hipErrorContextIsDestroyed", "context is destroyed"},
    {712, "hipErrorHostMemoryAlreadyRegistered", "part or all of the requested memory range is already mapped"},
    {713, "hipErrorHostMemoryNotRegistered", "pointer does not correspond to a registered memory region"},
    {719, "hipErrorLaunchFailure", "unspecified launch failure"},
    {800, "hipErrorNotPermitted", "operation not permitted (the HIP test double: a runtime call from a callback)"},
    {801, "hipErrorNotSupported", "operation not supported"},
    {900, "hipErrorStreamCaptureUnsupported", "operation not permitted when stream is capturing"},
    {901, "hipErrorStreamCaptureInvalidated", "operation failed due to a previous error during capture"},
    {906, "hipErrorStreamCaptureImplicit",
     "operation would make the legacy stream depend on a capturing blocking stream"},
};

API const char *hipGetErrorName(dv_hipError_t e) {
  for (size_t i = 0; i < sizeof herrs / sizeof herrs[0]; i++)
    if (herrs[i].code == e) return herrs[i].name;
  return "hipErrorUnknown";
}

API const char *hipGetErrorString(dv_hipError_t e) {
  for (size_t i = 0; i < sizeof herrs / sizeof herrs[0]; i++)
    if (herrs[i].code == e) return herrs[i].text;
  return "unknown error";
}

API dv_hipError_t hipGetDeviceCount(int *n) {
  CUresult r = cuDeviceGetCount(n);
  return !r && *n == 0 ? DV_HIP_ERROR_NO_DEVICE : r;
}

API dv_hipError_t hipDeviceGet(dv_hipDevice_t *d, int ordinal) { return cuDeviceGet(d, ordinal); }

API dv_hipError_t hipDeviceGetName(char *name, int len, dv_hipDevice_t d) {
  ENTER();
  if (!name || len <= 0) return unlock_ret(DV_HIP_ERROR_INVALID_VALUE);
  if (!DEV_OK(d)) return unlock_ret(DV_HIP_ERROR_INVALID_DEVICE);
  const char *a = arch();
  snprintf(name, (size_t)len, "HIP test double %d (%.*s)", d, (int)strcspn(a, ":"), a);
  return unlock_ret(DV_HIP_SUCCESS);
}

API dv_hipError_t hipDeviceTotalMem(size_t *bytes, dv_hipDevice_t d) { return cuDeviceTotalMem_v2(bytes, d); }

API dv_hipError_t hipDeviceGetAttribute(int *v, dv_hipDeviceAttribute_t a, int d) {
  ENTER();
  if (!v) return unlock_ret(DV_HIP_ERROR_INVALID_VALUE);
  if (!DEV_OK(d)) return unlock_ret(DV_HIP_ERROR_INVALID_DEVICE);
  int x = 0;
  switch (a) {
    case DV_HIP_ATTR_CAN_MAP_HOST_MEMORY: x = can_map_host(); break;
    case DV_HIP_ATTR_CONCURRENT_MANAGED_ACCESS: x = concurrent_managed(); break; /* xnack+, or the control's */
    case DV_HIP_ATTR_COMPUTE_CAPABILITY_MAJOR: x = g_cc[0]; break;
    case DV_HIP_ATTR_COMPUTE_CAPABILITY_MINOR: x = g_cc[1]; break;
    case DV_HIP_ATTR_MANAGED_MEMORY: x = 1; break;
    case DV_HIP_ATTR_MAX_BLOCK_DIM_X:
    case DV_HIP_ATTR_MAX_BLOCK_DIM_Y:
    case DV_HIP_ATTR_MAX_BLOCK_DIM_Z:
    case DV_HIP_ATTR_MAX_THREADS_PER_BLOCK: x = 1024; break;
    case DV_HIP_ATTR_MAX_GRID_DIM_X:
    case DV_HIP_ATTR_MAX_GRID_DIM_Y:
    case DV_HIP_ATTR_MAX_GRID_DIM_Z: x = 2147483647; break;
    case DV_HIP_ATTR_MAX_PITCH: x = (int)g_max_pitch; break;
    case DV_HIP_ATTR_MULTIPROCESSOR_COUNT: x = 4; break;
    case DV_HIP_ATTR_MAX_SHARED_MEMORY_PER_BLOCK:
    case DV_HIP_ATTR_SHARED_MEM_PER_BLOCK_OPTIN:
    case DV_HIP_ATTR_TOTAL_CONSTANT_MEMORY: x = 64 * 1024; break;
    case DV_HIP_ATTR_UNIFIED_ADDRESSING: x = !g_no_uva; break;
    case DV_HIP_ATTR_WARP_SIZE: x = 64; break;
    case DV_HIP_ATTR_CAN_USE_STREAM_WAIT_VALUE: x = !g_no_memops; break;
    case DV_HIP_ATTR_MEMORY_POOLS_SUPPORTED: x = !g_no_mempools; break;
    default:
      /* HIP's ranges: CUDA-compatible 0..9999, AMD-specific 10000..19999. */
      if (a < 0 || a > 19999) return unlock_ret(DV_HIP_ERROR_INVALID_VALUE);
  }
  *v = x;
  return unlock_ret(DV_HIP_SUCCESS);
}

static void put_i32(void *prop, size_t off, int v) { memcpy((char *)prop + off, &v, sizeof v); }

API dv_hipError_t hipGetDeviceProperties(void *prop, int d) {
  ENTER();
  if (!prop) return unlock_ret(DV_HIP_ERROR_INVALID_VALUE);
  if (!DEV_OK(d)) return unlock_ret(DV_HIP_ERROR_INVALID_DEVICE);
  memset(prop, 0, HIP_PROP_SIZE);
  const char *a = arch();
  snprintf((char *)prop + PROP_NAME, 256, "HIP test double %d (%.*s)", d, (int)strcspn(a, ":"), a);
  snprintf((char *)prop + PROP_GCN_ARCH_NAME, 256, "%s", a);
  size_t total = g_dev_mem, shm = 64 * 1024;
  memcpy((char *)prop + PROP_TOTAL_GLOBAL_MEM, &total, sizeof total);
  memcpy((char *)prop + PROP_SHARED_MEM_PER_BLOCK, &shm, sizeof shm);
  put_i32(prop, PROP_WARP_SIZE, 64);
  put_i32(prop, PROP_MAX_THREADS_PER_BLOCK, 1024);
  put_i32(prop, PROP_MAJOR, g_cc[0]);
  put_i32(prop, PROP_MINOR, g_cc[1]);
  put_i32(prop, PROP_MULTIPROCESSOR_COUNT, 4);
  return unlock_ret(DV_HIP_SUCCESS);
}

API dv_hipError_t hipDeviceGetPCIBusId(char *id, int len, int d) { return cuDeviceGetPCIBusId(id, len, d); }

API dv_hipError_t hipDeviceCanAccessPeer(int *can, int d, int peer) { return cuDeviceCanAccessPeer(can, d, peer); }

/* ---- contexts ------------------------------------------------------------------------------- */

API dv_hipError_t hipDevicePrimaryCtxRetain(dv_hipCtx_t *c, dv_hipDevice_t d) {
  return cuDevicePrimaryCtxRetain((dv_CUcontext *)(void *)c, d);
}
API dv_hipError_t hipDevicePrimaryCtxRelease(dv_hipDevice_t d) { return cuDevicePrimaryCtxRelease_v2(d); }
API dv_hipError_t hipCtxSetCurrent(dv_hipCtx_t c) { return cuCtxSetCurrent((dv_CUcontext)(void *)c); }
API dv_hipError_t hipCtxGetCurrent(dv_hipCtx_t *c) { return cuCtxGetCurrent((dv_CUcontext *)(void *)c); }
API dv_hipError_t hipCtxSynchronize(void) { return cuCtxSynchronize(); }
/* The current device: every stream of its (primary) context. */
API dv_hipError_t hipDeviceSynchronize(void) { return cuCtxSynchronize(); }
API dv_hipError_t hipCtxEnablePeerAccess(dv_hipCtx_t peer, unsigned flags) {
  return cuCtxEnablePeerAccess((dv_CUcontext)(void *)peer, flags);
}

/* ---- memory --------------------------------------------------------------------------------- */

#define DPTR(p) ((dv_CUdeviceptr)(uintptr_t)(p))
#define HPTR(u) ((void *)(uintptr_t)(u))

/* An entry point's own answer before the engine's: initialized, not in a callback. */
static CUresult ready(void) {
  pthread_mutex_lock(&L);
  CUresult r = t_in_callback ? NOT_PERMITTED : !g_init ? DV_HIP_ERROR_NOT_INITIALIZED : DV_HIP_SUCCESS;
  pthread_mutex_unlock(&L);
  return r;
}

API dv_hipError_t hipMalloc(void **p, size_t bytes) {
  if (!p) return DV_HIP_ERROR_INVALID_VALUE;
  *p = NULL;
  if (!bytes) return ready(); /* HIP: no memory, NULL, hipSuccess */
  dv_CUdeviceptr u = 0;
  CUresult r = cuMemAlloc_v2(&u, bytes);
  *p = HPTR(u);
  return r;
}

/* hipFree and hipHostFree wait for the device first (ROCm: "an implicit
 * hipDeviceSynchronize"), bounded like a pageable copy: 0, or the error. */
static CUresult device_sync(const char *what) {
  ENTER();
  CTX(c);
  for (stream *x = g_streams; x; x = x->next_all)
    if (x->ctx == c && !x->capturing && wait_stream(x, x->enq, 1)) {
      fprintf(stderr,
              DBL_NAME ": %s waited %d s for the device (it synchronizes the device first)%s\n", what, g_block_s,
              g_hold ? " while dvdouble_hold held the streams" : ": on a real GPU this call never returns");
      abort();
    }
  return unlock_ret(DV_HIP_SUCCESS);
}

API dv_hipError_t hipFree(void *p) {
  if (!p) return ready();
  CUresult r = device_sync("hipFree");
  if (!r) r = cuMemFree_v2(DPTR(p));
  return r == DV_HIP_ERROR_INVALID_VALUE ? HIP_INVALID_DEVICE_POINTER : r;
}

/* The stream-ordered allocator: the engine's memory pools (hipMemPool_t is
 * its CUmemoryPool; hipMemPoolProps has CUmemPoolProps' layout and numbers). */
#define HPOOL(p) ((dv_CUmemoryPool)(void *)(p))
API dv_hipError_t hipMallocFromPoolAsync(void **p, size_t bytes, dv_hipMemPool_t pool, dv_hipStream_t s) {
  if (!p) return DV_HIP_ERROR_INVALID_VALUE;
  dv_CUdeviceptr u = 0;
  CUresult r = cuMemAllocFromPoolAsync(&u, bytes, HPOOL(pool), (dv_CUstream)(void *)s);
  *p = HPTR(u);
  return r;
}
API dv_hipError_t hipFreeAsync(void *p, dv_hipStream_t s) {
  CUresult r = cuMemFreeAsync(DPTR(p), (dv_CUstream)(void *)s);
  return r == DV_HIP_ERROR_INVALID_VALUE ? HIP_INVALID_DEVICE_POINTER : r;
}
API dv_hipError_t hipMemPoolCreate(dv_hipMemPool_t *pool, const dv_hipMemPoolProps *props) {
  _Static_assert(sizeof(dv_hipMemPoolProps) == sizeof(dv_CUmemPoolProps), "pool properties");
  if (!props) return DV_HIP_ERROR_INVALID_VALUE;
  dv_CUmemPoolProps cp;
  memcpy(&cp, props, sizeof cp); /* the same layout; HIP's reserved bytes cover CUDA's usage field */
  return cuMemPoolCreate((dv_CUmemoryPool *)(void *)pool, &cp);
}
API dv_hipError_t hipMemPoolDestroy(dv_hipMemPool_t pool) { return cuMemPoolDestroy(HPOOL(pool)); }
API dv_hipError_t hipMemPoolSetAttribute(dv_hipMemPool_t pool, int a, void *v) {
  return cuMemPoolSetAttribute(HPOOL(pool), a, v);
}
API dv_hipError_t hipMemPoolGetAttribute(dv_hipMemPool_t pool, int a, void *v) {
  return cuMemPoolGetAttribute(HPOOL(pool), a, v);
}
API dv_hipError_t hipMemPoolTrimTo(dv_hipMemPool_t pool, size_t keep) { return cuMemPoolTrimTo(HPOOL(pool), keep); }
API dv_hipError_t hipDeviceGetDefaultMemPool(dv_hipMemPool_t *pool, int d) {
  return cuDeviceGetDefaultMemPool((dv_CUmemoryPool *)(void *)pool, d);
}
API dv_hipError_t hipDeviceGetMemPool(dv_hipMemPool_t *pool, int d) {
  return cuDeviceGetMemPool((dv_CUmemoryPool *)(void *)pool, d);
}

API dv_hipError_t hipMemGetInfo(size_t *free_bytes, size_t *total_bytes) {
  return cuMemGetInfo_v2(free_bytes, total_bytes);
}

API dv_hipError_t hipMallocManaged(void **p, size_t bytes, unsigned flags) {
  if (!p) return DV_HIP_ERROR_INVALID_VALUE;
  *p = NULL;
  dv_CUdeviceptr u = 0;
  CUresult r = cuMemAllocManaged(&u, bytes, flags);
  *p = HPTR(u);
  return r;
}

#define HOST_MALLOC_FLAGS (0x1u | 0x2u | 0x4u | 0x20000000u | 0x40000000u | 0x80000000u)

API dv_hipError_t hipHostMalloc(void **p, size_t bytes, unsigned flags) {
  if (!p) return DV_HIP_ERROR_INVALID_VALUE;
  *p = NULL;
  if ((flags & ~HOST_MALLOC_FLAGS) || ((flags & 0x40000000u) && (flags & 0x80000000u)))
    return DV_HIP_ERROR_INVALID_VALUE; /* unknown flags, or coherent and non-coherent */
  if (!bytes) return ready();
  return cuMemHostAlloc(p, bytes, flags & 7u);
}

API dv_hipError_t hipHostFree(void *p) {
  if (!p) return ready();
  CUresult r = device_sync("hipHostFree");
  return r ? r : cuMemFreeHost(p);
}

API dv_hipError_t hipHostGetDevicePointer(void **d, void *p, unsigned flags) {
  if (!d) return DV_HIP_ERROR_INVALID_VALUE;
  dv_CUdeviceptr u = 0;
  CUresult r = cuMemHostGetDevicePointer_v2(&u, p, flags);
  *d = HPTR(u);
  return r;
}

API dv_hipError_t hipHostRegister(void *p, size_t bytes, unsigned flags) {
  return cuMemHostRegister_v2(p, bytes, flags);
}

API dv_hipError_t hipHostUnregister(void *p) { return cuMemHostUnregister(p); }

API dv_hipError_t hipMemGetAddressRange(dv_hipDeviceptr_t *base, size_t *bytes, dv_hipDeviceptr_t p) {
  dv_CUdeviceptr b = 0;
  CUresult r = cuMemGetAddressRange_v2(base ? &b : NULL, bytes, DPTR(p));
  if (base) *base = HPTR(b);
  return r;
}

/* ---- copies --------------------------------------------------------------------------------- */

#define STREAM(s) ((dv_CUstream)(void *)(s))

API dv_hipError_t hipMemcpyHtoDAsync(dv_hipDeviceptr_t d, void *h, size_t n, dv_hipStream_t s) {
  return cuMemcpyHtoDAsync_v2(DPTR(d), h, n, STREAM(s));
}

API dv_hipError_t hipMemcpyDtoHAsync(void *h, dv_hipDeviceptr_t d, size_t n, dv_hipStream_t s) {
  return cuMemcpyDtoHAsync_v2(h, DPTR(d), n, STREAM(s));
}

API dv_hipError_t hipMemcpyDtoDAsync(dv_hipDeviceptr_t d, dv_hipDeviceptr_t src, size_t n, dv_hipStream_t s) {
  return cuMemcpyDtoDAsync_v2(DPTR(d), DPTR(src), n, STREAM(s));
}

/* hipMemoryType of the ROCm played -> the engine's (CUDA's) numbers; 0: none. */
static int mem_type(int t) {
  int host = rocm() == 6 ? DV_HIP6_MEMORYTYPE_HOST : DV_HIP5_MEMORYTYPE_HOST;
  int dev = rocm() == 6 ? DV_HIP6_MEMORYTYPE_DEVICE : DV_HIP5_MEMORYTYPE_DEVICE;
  return t == host ? DV_CU_MEMORYTYPE_HOST : t == dev ? DV_CU_MEMORYTYPE_DEVICE : 0;
}

API dv_hipError_t hipMemcpyParam2DAsync(const dv_hip_Memcpy2D *c, dv_hipStream_t s) {
  if (!c) return DV_HIP_ERROR_INVALID_VALUE;
  dv_CUDA_MEMCPY2D m;
  memset(&m, 0, sizeof m);
  m.srcMemoryType = mem_type(c->srcMemoryType), m.dstMemoryType = mem_type(c->dstMemoryType);
  if (!m.srcMemoryType || !m.dstMemoryType) return DV_HIP_ERROR_INVALID_VALUE; /* arrays, unified, wrong version */
  m.srcXInBytes = c->srcXInBytes, m.srcY = c->srcY, m.srcHost = c->srcHost, m.srcDevice = DPTR(c->srcDevice);
  m.srcArray = c->srcArray, m.srcPitch = c->srcPitch;
  m.dstXInBytes = c->dstXInBytes, m.dstY = c->dstY, m.dstHost = c->dstHost, m.dstDevice = DPTR(c->dstDevice);
  m.dstArray = c->dstArray, m.dstPitch = c->dstPitch;
  m.WidthInBytes = c->WidthInBytes, m.Height = c->Height;
  return cuMemcpy2DAsync_v2(&m, STREAM(s));
}

API dv_hipError_t hipMemsetD8Async(dv_hipDeviceptr_t d, unsigned char v, size_t n, dv_hipStream_t s) {
  return cuMemsetD8Async(DPTR(d), v, n, STREAM(s));
}

/* Managed memory's hints: the engine's first CUDA entries (device ordinal,
 * or hipCpuDeviceId -1 = CU_DEVICE_CPU), with their fail points. */
API dv_hipError_t hipMemPrefetchAsync(const void *p, size_t n, int device, dv_hipStream_t s) {
  return cuMemPrefetchAsync(DPTR(p), n, device, STREAM(s));
}
API dv_hipError_t hipMemAdvise(const void *p, size_t n, int advice, int device) {
  return cuMemAdvise(DPTR(p), n, (dv_CUmem_advise)advice, device);
}

/* Device ordinals, not contexts: an ordinal past the devices is
 * hipErrorInvalidDevice; a device whose primary context is not retained
 * holds no memory, so its pointer is invalid. */
API dv_hipError_t hipMemcpyPeerAsync(void *dst, int ddev, const void *src, int sdev, size_t n, dv_hipStream_t s) {
  ENTER();
  if (!DEV_OK(ddev) || !DEV_OK(sdev)) return unlock_ret(DV_HIP_ERROR_INVALID_DEVICE);
  if (!g_ctx[ddev].active || !g_ctx[sdev].active) return unlock_ret(DV_HIP_ERROR_INVALID_VALUE);
  pthread_mutex_unlock(&L);
  return cuMemcpyPeerAsync(DPTR(dst), &g_ctx[ddev], DPTR(src), &g_ctx[sdev], n, STREAM(s));
}

/* ---- streams, events ------------------------------------------------------------------------ */

API dv_hipError_t hipStreamCreateWithFlags(dv_hipStream_t *s, unsigned flags) {
  return cuStreamCreate((dv_CUstream *)(void *)s, flags);
}
API dv_hipError_t hipStreamDestroy(dv_hipStream_t s) { return cuStreamDestroy_v2(STREAM(s)); }
API dv_hipError_t hipStreamSynchronize(dv_hipStream_t s) { return cuStreamSynchronize(STREAM(s)); }
API dv_hipError_t hipStreamQuery(dv_hipStream_t s) { return cuStreamQuery(STREAM(s)); }
API dv_hipError_t hipStreamWaitEvent(dv_hipStream_t s, dv_hipEvent_t e, unsigned flags) {
  return cuStreamWaitEvent(STREAM(s), (dv_CUevent)(void *)e, flags);
}
API dv_hipError_t hipLaunchHostFunc(dv_hipStream_t s, dv_hipHostFn_t fn, void *user) {
  return cuLaunchHostFunc(STREAM(s), fn, user);
}
API dv_hipError_t hipStreamWaitValue64(dv_hipStream_t s, void *ptr, uint64_t value, unsigned flags, uint64_t mask) {
  /* Gte (0) on the whole word is what the engine plays (CUDA's GEQ, which
   * wraps where HIP's does not: the same below 2^63). */
  if (mask != ~(uint64_t)0) return DV_HIP_ERROR_INVALID_VALUE;
  return cuStreamWaitValue64_v2(STREAM(s), (dv_CUdeviceptr)(uintptr_t)ptr, value, flags);
}
/* The callback's prototype is CUDA's with HIP's handle types (the same ABI). */
API dv_hipError_t hipStreamAddCallback(dv_hipStream_t s, dv_hipStreamCallback_t fn, void *user, unsigned flags) {
  return cuStreamAddCallback(STREAM(s), (dv_CUstreamCallback)(void (*)(void))fn, user, flags);
}
API dv_hipError_t hipStreamIsCapturing(dv_hipStream_t s, dv_hipStreamCaptureStatus *status) {
  if (!status) return DV_HIP_ERROR_INVALID_VALUE;
  dv_CUstreamCaptureStatus st = DV_CU_STREAM_CAPTURE_STATUS_NONE;
  CUresult r = cuStreamIsCapturing(STREAM(s), &st);
  if (!r) *status = (int)st; /* None 0, Active 1, Invalidated 2: CUDA's numbers */
  return r;
}

/* Graphs: the engine's capture and graphs (HIP's handle types, CUDA's
 * arguments and numbers). */
API dv_hipError_t hipStreamBeginCapture(dv_hipStream_t s, int mode) { return cuStreamBeginCapture_v2(STREAM(s), mode); }
API dv_hipError_t hipStreamEndCapture(dv_hipStream_t s, dv_hipGraph_t *g) {
  return cuStreamEndCapture(STREAM(s), (dv_CUgraph *)(void *)g);
}
API dv_hipError_t hipGraphInstantiateWithFlags(dv_hipGraphExec_t *e, dv_hipGraph_t g, unsigned long long flags) {
  return cuGraphInstantiateWithFlags((dv_CUgraphExec *)(void *)e, (dv_CUgraph)(void *)g, flags);
}
API dv_hipError_t hipGraphLaunch(dv_hipGraphExec_t e, dv_hipStream_t s) {
  return cuGraphLaunch((dv_CUgraphExec)(void *)e, STREAM(s));
}
API dv_hipError_t hipGraphExecDestroy(dv_hipGraphExec_t e) { return cuGraphExecDestroy((dv_CUgraphExec)(void *)e); }
API dv_hipError_t hipGraphDestroy(dv_hipGraph_t g) { return cuGraphDestroy((dv_CUgraph)(void *)g); }

#define EVENT_FLAGS (0x1u | 0x2u | 0x4u | 0x40000000u | 0x80000000u)

API dv_hipError_t hipEventCreateWithFlags(dv_hipEvent_t *e, unsigned flags) {
  if (!e) return DV_HIP_ERROR_INVALID_VALUE;
  *e = NULL;
  if ((flags & ~EVENT_FLAGS) || ((flags & 0x40000000u) && (flags & 0x80000000u)) ||
      ((flags & 0x4u) && !(flags & DV_HIP_EVENT_DISABLE_TIMING)))
    return DV_HIP_ERROR_INVALID_VALUE; /* interprocess events must disable timing */
  return cuEventCreate((dv_CUevent *)(void *)e, flags & 7u);
}
#define EVENT(e) ((dv_CUevent)(void *)(e))
API dv_hipError_t hipEventDestroy(dv_hipEvent_t e) { return cuEventDestroy_v2(EVENT(e)); }
API dv_hipError_t hipEventRecord(dv_hipEvent_t e, dv_hipStream_t s) { return cuEventRecord(EVENT(e), STREAM(s)); }
API dv_hipError_t hipEventQuery(dv_hipEvent_t e) { return cuEventQuery(EVENT(e)); }
API dv_hipError_t hipEventSynchronize(dv_hipEvent_t e) { return cuEventSynchronize(EVENT(e)); }
API dv_hipError_t hipEventElapsedTime(float *ms, dv_hipEvent_t a, dv_hipEvent_t b) {
  return cuEventElapsedTime_v2(ms, EVENT(a), EVENT(b));
}

/* ---- modules, kernels ----------------------------------------------------------------------- */

/* devarray's copy kernels (src/kernel/copy_kernels.dvk): base, offset and
 * view (136 bytes) of each side, then the count; the engine runs them. */
static const size_t copy_params[7] = {8, 8, 136, 8, 8, 136, 8};
#define COPY_KERNARG (5 * 8 + 2 * 136)

API dv_hipError_t hipModuleLoadData(dv_hipModule_t *out, const void *image) {
  ENTER();
  if (!out) return unlock_ret(DV_HIP_ERROR_INVALID_VALUE);
  *out = NULL;
  CTX(c);
  if (!image) return unlock_ret(DV_HIP_ERROR_INVALID_VALUE);
  hipelf_module em;
  const char *why = NULL;
  int er = hipelf_read(image, &em, &why);
  if (er) {
    if (er == HIPELF_INVALID && getenv(DBL_ENV("DEBUG"))) fprintf(stderr, DBL_NAME ": hipModuleLoadData: %s\n", why);
    return unlock_ret(er == HIPELF_INVALID ? DV_HIP_ERROR_INVALID_IMAGE : DV_HIP_ERROR_OUT_OF_MEMORY);
  }
  struct dv_CUmod_st *m = calloc(1, sizeof *m);
  CUresult r = DV_HIP_SUCCESS;
  if (m) {
    m->ctx = c;
    m->fn = calloc((size_t)em.nkernels + 1, sizeof *m->fn);
    m->var = calloc((size_t)em.nglobals + 1, sizeof *m->var);
  }
  if (!m || !m->fn || !m->var) r = DV_HIP_ERROR_OUT_OF_MEMORY;
  for (int i = 0; !r && i < em.nkernels; i++) {
    struct dv_CUfunc_st *f = &m->fn[m->nfn++];
    const hipelf_kernel *k = &em.kernels[i];
    _Static_assert(sizeof f->r.name >= HIPELF_NAME_MAX, "kernel names fit");
    f->mod = m;
    snprintf(f->r.name, sizeof f->r.name, "%s", k->name);
    f->r.group_seg = k->group_seg, f->r.private_seg = k->private_seg, f->r.kernarg_size = k->kernarg_size;
    _Static_assert(sizeof f->r.psize / sizeof f->r.psize[0] >= HIPELF_MAX_ARGS, "arguments fit");
    f->r.vgprs = k->vgprs;
    if (k->nargs >= 0) {
      /* The metadata's explicit arguments: each params entry is read with its size. */
      f->r.args_known = 1, f->r.nparams = k->nargs;
      for (int a = 0; a < k->nargs; a++) f->r.psize[a] = k->arg_size[a];
    } else if (!strncmp(k->name, "dv_copy_w", 9) && k->kernarg_size >= COPY_KERNARG) {
      f->r.nparams = 7;
      memcpy(f->r.psize, copy_params, sizeof copy_params);
    }
  }
  for (int i = 0; !r && i < em.nglobals; i++) {
    const hipelf_global *g = &em.globals[i];
    if (g->size > g_dev_mem - c->used) {
      r = DV_HIP_ERROR_OUT_OF_MEMORY;
      break;
    }
    alloc *x = calloc(1, sizeof *x);
    char *h = x ? calloc(1, (size_t)g->size) : NULL;
    if (!h) {
      free(x);
      r = DV_HIP_ERROR_OUT_OF_MEMORY;
      break;
    }
    if (g->init) memcpy(h, g->init, (size_t)g->size);
    x->kind = 1, x->host = h, x->size = (size_t)g->size, x->ctx = c, x->addr = take_addr(c->dev, x->size);
    x->next = g_allocs;
    g_allocs = x;
    var_rec *v = &m->var[m->nvar++];
    _Static_assert(sizeof v->name >= HIPELF_NAME_MAX, "variable names fit");
    snprintf(v->name, sizeof v->name, "%s", g->name);
    v->size = x->size, v->addr = x->addr;
  }
  hipelf_free(&em);
  if (r) {
    if (m) mod_free(m);
    return unlock_ret(r);
  }
  m->next_all = g_mods;
  g_mods = m;
  *out = (dv_hipModule_t)(void *)m;
  return unlock_ret(DV_HIP_SUCCESS);
}

#define MODULE(m) ((dv_CUmodule)(void *)(m))
API dv_hipError_t hipModuleUnload(dv_hipModule_t m) { return cuModuleUnload(MODULE(m)); }
API dv_hipError_t hipModuleGetFunction(dv_hipFunction_t *f, dv_hipModule_t m, const char *name) {
  return cuModuleGetFunction((dv_CUfunction *)(void *)f, MODULE(m), name);
}
API dv_hipError_t hipModuleGetGlobal(dv_hipDeviceptr_t *p, size_t *bytes, dv_hipModule_t m, const char *name) {
  dv_CUdeviceptr u = 0;
  CUresult r = cuModuleGetGlobal_v2(p ? &u : NULL, bytes, MODULE(m), name);
  if (p && !r) *p = HPTR(u);
  return r;
}

#define LDS_MAX (64u * 1024u)

API dv_hipError_t hipFuncGetAttribute(int *v, dv_hipFunction_attribute a, dv_hipFunction_t h) {
  ENTER();
  if (!v) return unlock_ret(DV_HIP_ERROR_INVALID_VALUE);
  CTX(c);
  (void)c;
  struct dv_CUfunc_st *f = func_known((dv_CUfunction)(void *)h);
  if (!f) return unlock_ret(DV_HIP_ERROR_INVALID_HANDLE);
  switch (a) {
    case 0: *v = 1024; break;                       /* MAX_THREADS_PER_BLOCK */
    case 1: *v = (int)f->r.group_seg; break;        /* SHARED_SIZE_BYTES: static LDS */
    case 2: *v = 0; break;                          /* CONST_SIZE_BYTES */
    case 3: *v = (int)f->r.private_seg; break;      /* LOCAL_SIZE_BYTES: scratch per work-item */
    case 4: *v = (int)f->r.vgprs; break;            /* NUM_REGS: the metadata's .vgpr_count */
    case 5: case 6: *v = g_cc[0] * 10 + g_cc[1]; break; /* PTX, BINARY_VERSION */
    case 7: *v = 0; break;
    case 8: *v = f->r.group_seg < LDS_MAX ? (int)(LDS_MAX - f->r.group_seg) : 0; break; /* MAX_DYNAMIC_SHARED */
    case 9: *v = 0; break;
    default: return unlock_ret(DV_HIP_ERROR_INVALID_VALUE);
  }
  return unlock_ret(DV_HIP_SUCCESS);
}

API dv_hipError_t hipModuleLaunchKernel(dv_hipFunction_t h, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                        unsigned by, unsigned bz, unsigned shared_bytes, dv_hipStream_t s,
                                        void **params, void **extra) {
  ENTER();
  CTX(c);
  (void)c;
  struct dv_CUfunc_st *f = func_known((dv_CUfunction)(void *)h);
  if (!f) return unlock_ret(DV_HIP_ERROR_INVALID_HANDLE);
  /* AMD: each dimension's work-items (grid * block) below 2^32; static
   * plus dynamic LDS within 64 KiB; arguments through params. */
  if ((uint64_t)gx * bx > UINT32_MAX || (uint64_t)gy * by > UINT32_MAX || (uint64_t)gz * bz > UINT32_MAX ||
      (uint64_t)f->r.group_seg + shared_bytes > LDS_MAX || (!params && !f->r.args_known && f->r.kernarg_size))
    return unlock_ret(DV_HIP_ERROR_INVALID_VALUE);
  pthread_mutex_unlock(&L);
  return cuLaunchKernel((dv_CUfunction)(void *)h, gx, gy, gz, bx, by, bz, shared_bytes, STREAM(s), params, extra);
}

/* ---- IPC ------------------------------------------------------------------------------------ */

API dv_hipError_t hipIpcGetMemHandle(dv_hipIpcMemHandle_t *h, void *p) {
  _Static_assert(sizeof(dv_hipIpcMemHandle_t) == sizeof(dv_CUipcMemHandle), "HIP's handle is CUDA's size");
  return cuIpcGetMemHandle((dv_CUipcMemHandle *)(void *)h, DPTR(p));
}

API dv_hipError_t hipIpcOpenMemHandle(void **p, dv_hipIpcMemHandle_t h, unsigned flags) {
  if (!p) return DV_HIP_ERROR_INVALID_VALUE;
  *p = NULL;
  /* hipIpcMemLazyEnablePeerAccess, as the reference requires: 0 in ROCm 5's header, 1 in ROCm 6's. */
  if (rocm() == 5 ? flags != 0 : flags > 1) return DV_HIP_ERROR_INVALID_VALUE;
  dv_CUipcMemHandle ch;
  memcpy(&ch, &h, sizeof ch);
  dv_CUdeviceptr u = 0;
  CUresult r = cuIpcOpenMemHandle_v2(&u, ch, 0);
  *p = HPTR(u);
  return r;
}

API dv_hipError_t hipIpcCloseMemHandle(void *p) { return cuIpcCloseMemHandle(DPTR(p)); }
