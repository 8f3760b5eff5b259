/*
 * What the HIP backend's two files share: hip.c (loading, probe, open, the
 * backend table) and hip_driver.c (below it: the loaded entry points and
 * the translations that let the CUDA backend's code run on them).
 *
 * The HIP backend is the CUDA family's core (../cudafam/) on a dv_cu_driver
 * whose api table holds translations with CUDA driver-API prototypes that
 * call AMD's HIP runtime.  The helpers below are the translations' pure
 * parts, exposed for tests/backends/hip/test_hip_backend.c, which checks them with no
 * runtime loaded.
 */
#ifndef DV_HIP_INTERNAL_H
#define DV_HIP_INTERNAL_H

#include "../cudafam/fam.h"
#include "hip_runtime.h"

/* The runtime's entry points (hip.c's loader fills them, once) and the
 * name of the library that was loaded ("libamdhip64.so.5"). */
extern dv_hip_api dv__hip_api;
extern const char *dv__hip_lib_name;

/* hipGetDeviceProperties, optional (NULL where the runtime lacks it), called
 * with ROCm 5's hipDeviceProp_t layout: ROCm 6 keeps that entry point for
 * binaries built against ROCm 5 (its own layout is hipGetDevicePropertiesR0600).
 * Only gcnArchName is read, at DV_HIP5_PROP_GCN_ARCH_NAME (tests/backends/hip/test_hip_abi.c
 * checks the offset against ROCm 5's header). */
extern dv_hipError_t (*dv__hip_get_props)(void *prop, int device);
#define DV_HIP5_PROP_GCN_ARCH_NAME 396
#define DV_HIP5_PROP_BYTES 4096 /* more than ROCm 5's 792-byte struct */

/* The gfx target of HIP device `ordinal` from the kernel driver's topology
 * (/sys/class/kfd/kfd/topology/nodes/N/properties, gfx_target_version
 * 90010 -> "gfx90a"): the GPU nodes in order, the CPU nodes skipped.  False
 * when there is no such node or a *_VISIBLE_DEVICES variable renumbers the
 * devices.  `root` is the topology folder (tests pass their own). */
bool dv__hip_kfd_arch(const char *root, int ordinal, char *buf, size_t cap);
/* "gfx" + the version's major (decimal), minor and stepping (hex digits). */
bool dv__hip_gfx_name(unsigned long version, char *buf, size_t cap);

/* Set in a child after fork (hip.c's atfork handler): HIP contexts refuse. */
extern atomic_int dv__hip_forked;

/*
 * What a HIP context keeps of its own (cu_state.drv_state; the family's
 * state has no HIP field), set by the driver's fill_info, which dv__cu_open
 * calls before the kernel state is opened: arch: the device's gfx target as
 * the runtime names it, features too ("gfx90a:sramecc+:xnack-":
 * hipDeviceProp_t.gcnArchName, or the hip_arch option where the runtime
 * cannot say; "": unknown, and kernels are refused with DV_ERR_NO_COMPILER);
 * rtc_library: the hiprtc_library option ("": search); runtime_library: the
 * runtime file that loaded (libamdhip64.so.5 holds hipRTC on ROCm 5; "":
 * the default names); rocm_major: the runtime's major version (5, 6).
 */
typedef struct dv_hip_ctx {
  char arch[64];
  char rtc_library[DV_OPTION_STRING_MAX + 1]; /* never truncated: hiprtc.c refuses a long one */
  char runtime_library[64];
  int rocm_major;
} dv_hip_ctx;
#define DV_HIP_CTX(st) ((dv_hip_ctx *)(st)->drv_state)

/* The HIP driver: vendor "HIP", backend "hip", the translations. */
extern const dv_cu_driver dv__hip_driver;

/* After the runtime is loaded and hipInit succeeded: read the runtime's
 * version once (the memory-type numbers of copies depend on it).  Not
 * thread-safe: hip.c calls it inside its pthread_once. */
dv_status dv__hip_driver_init(void);
/* The version read (HIP_VERSION: major * 10^7 + minor * 10^5 + patch). */
int dv__hip_runtime_version(void);

/* ---- the stream-ordered allocator (hip_mempool.c) ---- */
/* The HIP driver's entry points (hip_driver.c's translations). */
extern dv_cu_api dv__hip_api_table;
/* Put the pool entries' translations into dv__hip_api_table where the
 * runtime has every one of them (they are optional: ROCm 5.2); else they
 * stay NULL and the "async" manager is refused.  hip.c calls it once,
 * after loading, before any context. */
void dv__hip_pools_install(void);

/* ---- the translations' pure parts (tests/backends/hip/test_hip_backend.c) ---- */

/* A HIP error as the CUresult the shared code tests: the numbers HIP shares
 * with CUDA unchanged; HIP's own (invalid pitch, symbol, device pointer,
 * memcpy direction, configuration; prior launch failure; invalid device
 * function; the HSA runtime's memory and other failures) as the CUDA code
 * of the same meaning. */
dv_CUresult dv__hip_result(dv_hipError_t e);
/* CUDA's name of a device attribute (CU_DEVICE_ATTRIBUTE_*) as HIP's
 * hipDeviceAttribute_t; -1 for one the HIP backend does not translate. */
int dv__hip_attribute(int cu_attr);
/* CU_MEMORYTYPE_HOST / _DEVICE as hipMemoryType of the runtime version
 * (ROCm 5: host 0, device 1; ROCm 6: host 1, device 2); -1 for others. */
int dv__hip_memory_type(int cu_type, int runtime_version);
/* A CUDA stream handle as HIP's: the legacy default stream (0x1) is HIP's
 * NULL stream, the per-thread one (0x2) hipStreamPerThread. */
dv_hipStream_t dv__hip_stream(dv_CUstream s);
/* cuIpcOpenMemHandle's flags as hipIpcOpenMemHandle's of the runtime
 * version (CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS: 0 in ROCm 5, 1 in ROCm 6). */
unsigned dv__hip_ipc_flags(unsigned cu_flags, int runtime_version);
/* Slice z of a 3-D copy as a 2-D copy (HIP's 3-D descriptor has 32-bit
 * fields in ROCm 5: the HIP backend copies 3-D rectangles slice by slice):
 * the start addresses advanced to the slice, X and Y folded into them.
 * DV_CUDA_SUCCESS, or DV_CUDA_ERROR_INVALID_VALUE for what it cannot
 * express (arrays, a level of detail, an unknown memory type, overflow). */
dv_CUresult dv__hip_slice2d(const dv_CUDA_MEMCPY3D *c, size_t z, int runtime_version,
                            dv_hip_Memcpy2D *out);
/* A 2-D copy's descriptor in HIP's terms (memory types by version). */
dv_CUresult dv__hip_copy2d(const dv_CUDA_MEMCPY2D *c, int runtime_version, dv_hip_Memcpy2D *out);

#endif
