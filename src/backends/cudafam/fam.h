/*
 * The CUDA family's core (src/backends/cudafam/): what the files of the
 * core share, and what a driver (../cuda/, ../hip/) gives it.  The core is
 * written against a driver shaped like CUDA's driver API: the entry points
 * of fam_symbols.def with the types of fam_api.h.  fam.c holds open and
 * close, memory, streams and events; fam_managed.c managed memory; fam_copy.c copies; fam_kernel.c kernels, native
 * handles and the strided-copy kernels; fam_staging.c pageable copies
 * through pinned buffers; fam_ipc.c interop; fam_mempool.c the driver's
 * stream-ordered pool (the "async" manager); fam_common.c, below them all,
 * the entry points' scope and the error helpers.
 *
 * A driver's files may use the core (this header); the core never names a
 * driver, and the drivers never name each other (scripts/check-layers).
 */
#ifndef DV_CUDAFAM_H
#define DV_CUDAFAM_H

#include "../../core/core.h"
#include "../backend.h"
#include "fam_api.h"
#include "fam_status.h"

typedef struct dv_cu_api {
#define DV_CU(ret, symbol, cuda_name, hip_name, params) ret(*symbol) params;
#include "fam_symbols.def"
#undef DV_CU
  /* Optional (NULL where the driver lacks it): CUDA 12.4's parameter layout. */
  dv_CUresult (*cuFuncGetParamInfo)(dv_CUfunction f, size_t index, size_t *offset, size_t *size);
  /* Optional too (issue 36): whether host memory devarray did not pin is
   * page-locked by someone else (NULL on HIP: such memory is staged). */
  dv_CUresult (*cuPointerGetAttribute)(void *data, int attribute, dv_CUdeviceptr ptr);
  /* Optional: managed memory's hints as CUDA before 12.2 has them (a device
   * ordinal or CU_DEVICE_CPU), used where the _v2 entries of
   * fam_symbols.def are NULL; HIP's translations (fam_managed.c). */
  dv_CUresult (*cuMemPrefetchAsync)(dv_CUdeviceptr p, size_t bytes, dv_CUdevice where, dv_CUstream s);
  dv_CUresult (*cuMemAdvise)(dv_CUdeviceptr p, size_t bytes, dv_CUmem_advise advice, dv_CUdevice where);
} dv_cu_api;

/* The entries of fam_symbols.def by number: what a message names
 * (dv_cu_driver.names, each driver's column of the list; cu_fail). */
typedef enum dv_cu_entry {
  DV_CU_E_NONE = -1,
#define DV_CU(ret, symbol, cuda_name, hip_name, params) DV_CU_E_##symbol,
#include "fam_symbols.def"
#undef DV_CU
  DV_CU_E_COUNT
} dv_cu_entry;

/*
 * A driver shaped like CUDA's driver API: the entry points, how its
 * messages name it, its kernel compiler, its own per-context state.  The
 * CUDA backend runs on CUDA's own (../cuda/cuda.c's loader fills it); the
 * HIP backend (../hip/) runs the same code on AMD's runtime through a table
 * of translations with these prototypes (hip_driver.c), so that the two
 * backends share every mechanism -- fences, staging, pitch fallbacks, copy
 * kernels, IPC -- instead of keeping two copies.
 */
typedef struct cu_state cu_state;
typedef struct dv_cu_driver {
  const char *vendor;  /* "CUDA", "HIP": the word that starts every message */
  const char *backend; /* "cuda", "hip": the backend's name (options <backend>_device) */
  const dv_cu_api *api;
  /* Bytes of the driver's own per-context state (cu_state.drv_state,
   * zeroed, allocated with the family's): what only this driver keeps. */
  size_t state_bytes;
  /* After the shared fields of the device's description are filled: what
   * this driver says differently (vendor, driver version) and its own
   * options into drv_state; NULL: nothing. */
  void (*fill_info)(cu_state *st, const dv_backend_config *cfg);
  /* How its messages name each entry (DV_CU_E_COUNT names: its column of
   * fam_symbols.def; "cuMemAlloc" on CUDA, "hipMalloc" on HIP). */
  const char *const *names;
  /* The entries return the driver's own codes (so that its cuGetErrorName/
   * String name what it said, HIP's hipErrorRuntimeMemory say): this gives
   * the CUDA code of the same meaning, which the core compares and maps
   * (dv__cu_code); NULL: the codes are CUDA's. */
  dv_CUresult (*code)(dv_CUresult r);
  /* A copy between two contexts' devices, for a driver that names devices
   * rather than contexts (HIP: by ordinal, cu_state.dev); NULL: the entry
   * cuMemcpyPeerAsync with the two contexts. */
  dv_CUresult (*copy_peer)(cu_state *dst_st, dv_CUdeviceptr dst, cu_state *src_st, dv_CUdeviceptr src,
                           size_t bytes, dv_CUstream s);
  /* The driver's kernel compiler and images (fam_kernel.c calls them). */
  const struct dv_cu_kernel_ops *kops;
  /* The driver's legacy default stream is its NULL stream (HIP), not
   * CU_STREAM_LEGACY (0x1): the handle native_stream hands out for it. */
  bool legacy_is_null;
  /* Its host-memory free waits for the whole device first (HIP's
   * hipHostFree: an implicit device synchronize): idle staging buffers are
   * then kept up to staging_limit and freed at close, never trimmed on a
   * copy's path, which would wait for every stream (fam_stagebuf.c). */
  bool host_free_syncs;
  /* Nonzero in a child process after fork (set by the driver's atfork
   * handler, registered when it loaded): this driver's state does not
   * survive fork, so every entry of its contexts refuses (DV_ERR_MISUSE).
   * One flag per driver: a child may use the driver its parent never loaded. */
  atomic_int *forked;
} dv_cu_driver;

/* The entry points of the state `st` in scope (every function that calls
 * the driver has its context's state as `st`). */
#define cu (*st->drv->api)
/* A result of drv's entries as the CUDA code of the same meaning: what the
 * core compares a result with (cu_code: the state `st` in scope). */
static inline dv_CUresult dv__cu_code(const dv_cu_driver *drv, dv_CUresult r) {
  return drv->code ? drv->code(r) : r;
}
#define cu_code(r) dv__cu_code(st->drv, (r))

typedef struct dv_cu_staging dv_cu_staging;
typedef struct cu_stager cu_stager;

struct dv_bstream {
  dv_CUstream s;
  bool builtin; /* legacy / per-thread: never destroyed */
  /* Created streams (cuda.c's fences, under the context's fence_lock but
   * dirty, which the queueing paths set without it). */
  _Atomic int dirty;    /* work queued since the last fence */
  bool exported;        /* its native handle was handed out: always fenced */
  bool fence_pending;   /* fence recorded, not yet waited for */
  dv_CUevent fence;
  struct dv_bstream *next, *prev;
  /* Its staging thread (fam_stager.c), made at its first asynchronous
   * pageable copy; read and set under the context's stagers lock. */
  cu_stager *stager;
  /* While devarray captures a graph on it (fam_graph.c): the records of the
   * capture's host functions, handed to the graph at its end. */
  struct cu_hostfn *hostfns;
};

struct cu_state {
  const dv_cu_driver *drv; /* CUDA's, or HIP's translations */
  void *drv_state;         /* the driver's own (drv->state_bytes; NULL for 0) */
  dv_CUdevice dev;
  int ordinal;
  dv_CUcontext ctx;
  dv_device_info info;
  /* CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, read at open: managed
   * memory can be prefetched to the device (fam_managed.c). */
  bool concurrent_managed;
  /* Kernels (fam_kernel.c). */
  dv_klimits klimits;
  int driver_version;
  int sm_count;
  pthread_mutex_t copy_lock;
  int copy_state; /* built-in copy kernels: 0 not loaded yet, 1 loaded, -1 unusable */
  dv_CUmodule copy_module;
  dv_CUfunction copy_fn[5][2]; /* 1-, 2-, 4-, 8-, 16-byte words; 32-, 64-bit indices */
  /* Copies (fam_staging.c): pinned staging for pageable host memory; the
   * device's largest pitch for cuMemcpy2D/3D (CU_DEVICE_ATTRIBUTE_MAX_PITCH). */
  dv_cu_staging *staging;
  struct dv_cu_stagers *stagers; /* the staging threads (fam_stager.c) */
  size_t max_pitch;
  /* Module loading (fam_kernel.c): a private non-blocking stream for the
   * constants' upload, made at first use (under copy_lock). */
  dv_CUstream load_stream;
  /* Frees (cuda.c): ordered by events on this context's streams that had
   * work queued since the last fence, not by cuCtxSynchronize.  Under
   * fence_lock: the created streams, the legacy stream's fence (the legacy
   * and per-thread streams, which the legacy stream waits for), fences of
   * destroyed streams whose work may still run, and the buffers handed out
   * natively (foreign streams may use them: their frees wait for the
   * whole context). */
  pthread_mutex_t fence_lock;
  struct dv_bstream *streams;
  _Atomic int builtin_dirty; /* work queued on the legacy or a per-thread stream since the last fence */
  dv_CUevent legacy_fence;
  bool legacy_pending;
  dv_CUevent *orphans;
  size_t norphans, corphans;
  void **exported;
  size_t nexported, cexported;
  bool exported_lost; /* one could not be listed (no memory): every free waits for the context */
  /* Device buffers whose free a graph capture holds back (cuda.c, issue 36):
   * freed by the first free that can fence again, or by close. */
  void **kept;
  size_t nkept, ckept;
  bool kept_sync; /* one of them was handed out natively: freed after a cuCtxSynchronize */
  /* The legacy and per-thread default streams (stream_builtin). */
  struct dv_bstream legacy, per_thread;
};


/* Work was queued on s (called after queueing it: a fence that clears the
 * flag then records after the work).  Frees wait only for such streams. */
static inline void dv__cu_used(cu_state *st, dv_bstream *s) {
  if (s->builtin) atomic_store_explicit(&st->builtin_dirty, 1, memory_order_release);
  else atomic_store_explicit(&s->dirty, 1, memory_order_release);
}
/* A buffer handed out natively (dv_array_native, DLPack): its free waits
 * for the whole context (fam.c reads the list; fam_common.c). */
void dv__cu_exported(cu_state *st, void *buf);
/* A table of n elements (elem bytes each, *cap of room) with room for one
 * more: the same, or a larger copy (the old one freed, *cap doubled, or
 * `first` for an empty one); NULL when there is no memory. */
void *dv__cu_grow(void *table, size_t n, size_t *cap, size_t elem, size_t first);

/* A failed driver call: devarray's status, with the driver's name and code
 * kept, and a message "<vendor> <entry's name><note> failed: <error>"
 * (note: "", " (staging)", ...; cu_fail: with the state `st` in scope). */
dv_status dv__cu_fail(const dv_cu_driver *drv, dv_CUresult r, dv_cu_entry e, const char *note);
/* The same for a step of several calls: "<vendor> <doing> (<e1> / <e2>)
 * failed: ..." (e2 DV_CU_E_NONE: "(<e1>)"). */
dv_status dv__cu_fail_in(const dv_cu_driver *drv, dv_CUresult r, const char *doing, dv_cu_entry e1,
                         dv_cu_entry e2);
/* How the driver names entry e in a message of its own ("cuMemHostAlloc",
 * "hipHostMalloc"). */
const char *dv__cu_name(const dv_cu_driver *drv, dv_cu_entry e);
/*
 * Make the context current on this thread for the length of one backend
 * call, and put back what was current before when the call returns: the
 * caller's own CUDA code (CuPy, Numba, a context it pushed) keeps its
 * current context, and no context of devarray stays current after close.
 * CU_ENTER declares the saved state with a cleanup that restores it on every
 * return path (GCC and Clang's cleanup attribute).
 */
typedef struct cu_scope {
  const dv_cu_api *api;
  dv_CUcontext prev;
  bool set;
} cu_scope;
dv_status dv__cu_enter_scope(cu_state *st, cu_scope *sc);
void dv__cu_leave(cu_scope *sc);
#define cu_fail(r, e, note) dv__cu_fail(st->drv, (r), (e), (note))
#define cu_fail_in(r, doing, e1, e2) dv__cu_fail_in(st->drv, (r), (doing), (e1), (e2))
#define CU_SCOPE(name) cu_scope name __attribute__((cleanup(dv__cu_leave))) = {NULL, NULL, false}

#define CU_TRY(call, e, note)                                \
  do {                                                       \
    dv_CUresult r_ = (call);                                 \
    if (r_ != DV_CUDA_SUCCESS) return cu_fail(r_, e, note);  \
  } while (0)
#define CU_ENTER(st)                                   \
  CU_SCOPE(cu_scope_);                                 \
  do {                                                 \
    dv_status e_ = dv__cu_enter_scope(st, &cu_scope_); \
    if (e_) return e_;                                 \
  } while (0)

static inline dv_CUdeviceptr cu_ptr(dv_memref r) {
  return (dv_CUdeviceptr)(uintptr_t)r.buf + r.offset;
}

/* Open a context of the driver's device (cfg->device: an ordinal): the
 * backend tables' open, for CUDA (cuda.c) and HIP (../hip/hip.c), once the
 * driver is loaded; dv__cub_close closes it. */
dv_status dv__cu_open(const dv_cu_driver *drv, const dv_backend_config *cfg, void **state);

/* fam_kernel.c: per-context kernel state, set up by open and torn down by close. */
dv_status dv__cu_kernel_open(cu_state *st);
void dv__cu_kernel_close(cu_state *st);

/*
 * Every method of the backend seam (../backend_methods.def) as
 * dv__cub_<method>, declared by expanding the list: the CUDA backend's table
 * (../cuda/cuda.c) and the HIP backend's (../hip/hip.c) both take every
 * method but probe and open from DV_CU_BACKEND_METHODS below, so that the
 * two can never drift apart.  Defined for the groups of DV_CU_BACKEND_CAPS:
 * memory, host memory, streams and events in fam.c; managed memory in fam_managed.c;
 * copies in fam_copy.c; kernels, native
 * handles and strided copies in fam_kernel.c; interop in fam_ipc.c; graphs in fam_graph.c; the
 * driver's stream-ordered pool in fam_mempool.c.
 */
#define DV_BE_METHOD(group, ret, method, params) ret dv__cub_##method params;
#include "../backend_methods.def"
#undef DV_BE_METHOD
/* The groups both tables fill (backend.h's DV_BCAP_*). */
#define DV_CU_BACKEND_CAPS                                                                                  \
  (DV_BCAP_BASE | DV_BCAP_STRIDED | DV_BCAP_PEER | DV_BCAP_MANAGED | DV_BCAP_BUILTIN_STREAMS | DV_BCAP_KERNELS | \
   DV_BCAP_NATIVE | DV_BCAP_ORDER_NATIVE | DV_BCAP_IPC | DV_BCAP_DRIVER_POOL | DV_BCAP_GRAPHS)
#define DV_CU_BACKEND_METHODS \
  .close = dv__cub_close, \
  .device_info = dv__cub_device_info, \
  .mem_alloc = dv__cub_mem_alloc, \
  .mem_free = dv__cub_mem_free, \
  .mem_info = dv__cub_mem_info, \
  .host_alloc = dv__cub_host_alloc, \
  .host_free = dv__cub_host_free, \
  .host_register = dv__cub_host_register, \
  .host_unregister = dv__cub_host_unregister, \
  .copy_rect = dv__cub_copy_rect, \
  .copy_strided = dv__cub_copy_strided, \
  .memset = dv__cub_memset, \
  .stream_create = dv__cub_stream_create, \
  .stream_destroy = dv__cub_stream_destroy, \
  .stream_sync = dv__cub_stream_sync, \
  .stream_query = dv__cub_stream_query, \
  .stream_callback = dv__cub_stream_callback, \
  .event_create = dv__cub_event_create, \
  .event_destroy = dv__cub_event_destroy, \
  .event_record = dv__cub_event_record, \
  .event_wait = dv__cub_event_wait, \
  .event_query = dv__cub_event_query, \
  .event_sync = dv__cub_event_sync, \
  .event_elapsed = dv__cub_event_elapsed, \
  .managed_alloc = dv__cub_managed_alloc, \
  .managed_prefetch = dv__cub_managed_prefetch, \
  .managed_advise = dv__cub_managed_advise, \
  .stream_builtin = dv__cub_stream_builtin, \
  .kernel_limits = dv__cub_kernel_limits, \
  .kernel_target_id = dv__cub_kernel_target_id, \
  .module_build = dv__cub_module_build, \
  .module_load = dv__cub_module_load, \
  .module_unload = dv__cub_module_unload, \
  .kernel_get = dv__cub_kernel_get, \
  .kernel_attrs = dv__cub_kernel_attrs, \
  .kernel_params = dv__cub_kernel_params, \
  .constant_write = dv__cub_constant_write, \
  .launch = dv__cub_launch, \
  .native_context = dv__cub_native_context, \
  .native_stream = dv__cub_native_stream, \
  .native_buffer = dv__cub_native_buffer, \
  .buffer_wrap = dv__cub_buffer_wrap, \
  .buffer_unwrap = dv__cub_buffer_unwrap, \
  .stream_order_native = dv__cub_stream_order_native, \
  .ipc_export = dv__cub_ipc_export, \
  .ipc_open = dv__cub_ipc_open, \
  .ipc_close = dv__cub_ipc_close, \
  .copy_peer = dv__cub_copy_peer, \
  .pool_open = dv__cub_pool_open, \
  .pool_close = dv__cub_pool_close, \
  .alloc_async = dv__cub_alloc_async, \
  .free_async = dv__cub_free_async, \
  .pool_trim = dv__cub_pool_trim, \
  .pool_stats = dv__cub_pool_stats, \
  .graph_begin = dv__cub_graph_begin, \
  .graph_end = dv__cub_graph_end, \
  .graph_host_fn = dv__cub_graph_host_fn, \
  .graph_instantiate = dv__cub_graph_instantiate, \
  .graph_launch = dv__cub_graph_launch, \
  .graph_exec_destroy = dv__cub_graph_exec_destroy, \
  .graph_destroy = dv__cub_graph_destroy,

/*
 * A strided copy as the built-in copy kernels take it (src/kernel/
 * copy_kernels.dvk): the widest word (1, 2, 4, 8 or 16 bytes; word_index
 * 0..4) dividing the item size, both start addresses and every stride; the
 * views in words (extents of 1 dropped, an item of several words adds an
 * innermost dimension, dimensions contiguous on both sides merged); the
 * number of words and whether it needs 64-bit indices.  False when the
 * kernels cannot do it (more than 8 dimensions left, a negative shape): the
 * planner then stages.
 */
typedef struct dv_cu_copy_plan {
  size_t word;
  int word_index;
  int wide_index; /* 1: the _i64 kernels (2^31 words or more) */
  int64_t count;
  dv_bkview dst, src;
} dv_cu_copy_plan;
bool dv__cu_copy_plan(const dv_strided *c, uint64_t src_addr, uint64_t dst_addr, dv_cu_copy_plan *p);

/*
 * The compiled image devarray keeps in its module cache: a 16-byte header
 * ("DVCUMOD1", then "CUBIN", "PTX" or "HSACO" -- an AMDGPU code object --
 * NUL-padded to 8 bytes; kind: DV_CU_IMAGE_*) and the bytes the driver's
 * cuModuleLoadData takes (PTX with its terminating NUL; CUBIN and HSACO are
 * ELF files).  Unpack refuses anything else with DV_ERR_INVALID_ARGUMENT.
 */
enum { DV_CU_IMAGE_CUBIN = 0, DV_CU_IMAGE_PTX = 1, DV_CU_IMAGE_HSACO = 2 };
dv_status dv__cu_image_pack(const void *data, size_t size, int kind, void **image,
                            size_t *image_size);
dv_status dv__cu_image_unpack(const void *image, size_t image_size, const void **data,
                              size_t *size, int *kind);
/* Whether `drv` loads images of `kind` (its kops->image_kinds):
 * DV_ERR_INVALID_ARGUMENT naming both
 * (a cache entry of another backend's kind is refused, then rebuilt). */
dv_status dv__cu_image_accept(const dv_cu_driver *drv, int kind);

/*
 * Page-locked host memory (fam_staging.c): one process-wide registry of
 * the ranges this backend pinned or registered, with reference counts (a
 * host buffer registered through two devarray contexts is registered with
 * the driver once).  Used to tell pageable host memory from pinned.
 */
typedef struct dv_cu_host {
  struct dv_cu_host *next;
  const dv_cu_driver *drv; /* whose driver pinned it (CUDA and HIP contexts share the registry) */
  void *ptr;
  size_t bytes;
  bool registered; /* cuMemHostRegister; else cuMemHostAlloc */
  bool foreign;    /* registered: pinned by someone else already (issue 36); never unregistered by devarray */
  int refs;
  dv_CUdeviceptr dev; /* mapped: the device address */
} dv_cu_host;
bool dv__cu_host_pinned(const dv_cu_driver *drv, const void *p, size_t n);
/* Whether [p, p + n) is host memory the driver reports page-locked though
 * devarray did not pin it (issue 36; fam.c, used by fam_copy.c too). */
bool dv__cu_foreign_pinned(cu_state *st, const void *p, size_t n);
void dv__cu_host_add(dv_cu_host *h); /* refs = 1; h->drv set by the caller */
dv_cu_host *dv__cu_host_find_registered(const dv_cu_driver *drv, void *p, size_t n,
                                        bool mapped); /* +1 ref, or NULL */
bool dv__cu_host_drop(dv_cu_host *h);                                /* -1 ref; true: last, unlinked */

/* Pageable host memory through pinned staging, ordered on the stream
 * (fam_staging.c's comment tells how); open takes the option staging_chunk. */
dv_status dv__cu_staging_open(cu_state *st, const dv_backend_config *cfg);
void dv__cu_staging_close(cu_state *st);
dv_status dv__cu_copy_pageable(cu_state *st, dv_bstream *s, const dv_rect *r);
size_t dv__cu_staging_chunk(cu_state *st);

/*
 * A driver's kernel compiler and images (dv_cu_driver.kops): CUDA's in
 * ../cuda/cuda.c (NVRTC; PTX and CUBIN), HIP's in ../hip/hiprtc.c (hipRTC;
 * HSACO).  Loading, constants and launches are the core's.
 */
struct dv_cu_kernel_ops {
  unsigned image_kinds; /* 1u << DV_CU_IMAGE_*: what the driver loads (the module cache's images) */
  /* The compiler and target for the module cache's key (CUDA: "cc 9.0 nvrtc
   * 12.4 driver 12040 cubin sm_90"; HIP: "hip gfx90a:sramecc+:xnack- runtime
   * 50221153 hiprtc 9.0 libamdhip64.so"). */
  dv_status (*target_id)(cu_state *st, char *buf, size_t cap);
  /* Compile req's unit for the device: the image (dv__malloc'd, of *kind)
   * and the compiler's log (dv__malloc'd or NULL), also on failure
   * (DV_ERR_COMPILE: the log says why). */
  dv_status (*compile)(cu_state *st, const dv_build_req *req, void **image, size_t *size, int *kind,
                       char **log);
  /* The built-in strided-copy kernels' image (of *kind), valid for the
   * life of the process; a failure makes strided copies stage. */
  dv_status (*copy_image)(cu_state *st, const void **image, size_t *size, int *kind);
  /* After the shared limits are read from the device's attributes; NULL: none. */
  void (*limits)(cu_state *st, dv_klimits *L);
  /* No opt-in beyond the per-block shared memory (AMD's LDS: 64 KiB, all
   * of it available without asking; no cuFuncSetAttribute call). */
  int no_shared_optin;
};

#endif
