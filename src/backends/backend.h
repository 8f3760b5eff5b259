/*
 * The backend seam: one table of function pointers per backend, in the
 * manner of SQLite's sqlite3_vfs, its methods listed once in
 * backend_methods.def by group; each optional group is a capability bit the
 * table declares (DV_BCAP_*), and the core tests the bit before calling one
 * of its methods.
 *
 * Device addresses are (buffer handle, byte offset): OpenCL buffers are not
 * pointers, so nothing above this layer does pointer arithmetic on device
 * memory.  Host addresses are plain pointers.
 *
 * Every method returns a dv_status and, on failure, sets the thread's detail
 * message (dv__error) with the driver's own code and name.  Methods that take
 * a stream queue the work on it and return; the core waits when the caller
 * asked for a synchronous operation.
 */
#ifndef DV_BACKEND_H
#define DV_BACKEND_H

#include <stdbool.h>

#include "devarray.h"

typedef struct dv_backend dv_backend;
typedef struct dv_bstream dv_bstream; /* backend stream */
typedef struct dv_bevent dv_bevent;   /* backend event */
typedef struct dv_bmodule dv_bmodule; /* backend module (a built program) */
typedef struct dv_bkernel dv_bkernel; /* backend kernel (owned by its module) */
typedef struct dv_bgraph dv_bgraph;   /* a captured graph (GRAPHS) */
typedef struct dv_bgexec dv_bgexec;   /* an instantiated, launchable graph */

/* One side of a copy: device memory (buf != NULL: handle + offset) or host
 * memory (buf == NULL: ptr). */
typedef struct dv_memref {
  void *buf;
  size_t offset;
  void *ptr;
} dv_memref;

/*
 * A rectangular copy of depth x height rows of `width` bytes.  Row r of
 * slice z starts at base + z*slice + r*pitch on each side.  All pitches are
 * non-negative; for depth 1, slice is ignored; for height 1, pitch is
 * ignored.  Contiguous copies are width x 1 x 1.  Backends may refuse rect
 * layouts they cannot express (DV_ERR_NOT_SUPPORTED without a message) and
 * the planner then splits the copy.
 */
/* Copy flags. */
#define DV_COPY_SYNC 0x1u /* the caller waits for the stream right after: a
                             backend may run the copy inline (or blocking)
                             when the stream has nothing queued */

typedef struct dv_rect {
  dv_memref src, dst;
  unsigned flags;
  size_t width, height, depth;
  size_t src_pitch, src_slice, dst_pitch, dst_slice;
} dv_rect;

/*
 * A general strided copy of nd dims (innermost last) of itemsize-byte
 * elements; strides in bytes, any sign.  Optional method: backends that can
 * gather/scatter (the host simulator in its workers, GPUs with a kernel)
 * implement it; the planner uses it when rects cannot express the layout.
 */
typedef struct dv_strided {
  dv_memref src, dst;
  unsigned flags;
  int nd;
  size_t itemsize;
  int64_t shape[DV_MAXDIMS];
  int64_t src_strides[DV_MAXDIMS];
  int64_t dst_strides[DV_MAXDIMS];
} dv_strided;

/* Host memory flags for host_alloc / host_register. */
#define DV_HOSTMEM_MAPPED 0x1u   /* device-addressable */
#define DV_HOSTMEM_PORTABLE 0x2u /* visible to every context */
#define DV_HOSTMEM_WC 0x4u       /* write-combined */

typedef struct dv_backend_config {
  size_t host_memory;       /* host simulator capacity */
  int host_checked;         /* host simulator: option host_mode is checked (0: fast) */
  int host_fission;         /* host simulator: option host_fission (fast mode's region fission) */
  int host_guard;           /* host simulator guard bytes / poisoning (resolved: 0 or 1) */
  uint64_t fault_device_alloc, fault_copy;
  int host_strided;         /* host simulator: offer copy_strided */
  int64_t host_delay_us;    /* host simulator: delay before each queued op */
  const char *device;       /* backend-specific device selector, or "" */
  int require_gpu;          /* automatic selection: accept only GPU devices */
  /* Kernels (the strings live as long as the context). */
  int kernel_check;         /* host simulator: checks in kernels (resolved option kernel_check:
                             * 0 off, 1 bounds, 2 on = bounds and the access checks) */
  int kernel_check_auto;    /* kernel_check 2 came from "auto": where the compiler cannot
                             * instrument kernels, fall back to 1 (a log line), not an error */
  const char *host_cc;      /* host simulator: C compiler ("" : search) */
  const char *host_cflags;  /* host simulator: compiler flags */
  size_t host_fiber_stack;  /* host simulator: stack bytes per simulated thread */
  int host_wave_size;       /* host simulator: threads per wave */
  const char *nvrtc_library; /* CUDA: NVRTC to load ("": search) */
  const char *hip_arch;       /* HIP: the gfx target for kernels ("": the device's) */
  const char *hiprtc_library; /* HIP: hipRTC to load ("": search) */
  int host_ipc;             /* host simulator: device memory in memfds (dv_ipc_export) */
  size_t staging_chunk;      /* CUDA, HIP: bytes per staged piece of a pageable copy (option staging_chunk) */
  int staging_threads;       /* CUDA, HIP: threads copying a piece to/from staging (0: min(4, CPUs)) */
  size_t staging_thread_min; /* CUDA, HIP: pieces below this many bytes are copied by one thread */
  size_t host_printf_buffer; /* host simulator: dv_printf bytes kept per launch */
  size_t staging_limit;      /* CUDA, HIP: pinned staging bytes per context (0: 4 chunks) */
  double kernel_timeout;     /* host simulator: seconds a launch may run (0: no limit) */
  /* The context's counters of pinned staging memory (dv_stats `staging`,
   * staging_hits, staging_misses) for a backend that stages on its own
   * (CUDA's pageable path); NULL: not counted.  Valid until close. */
  struct dv_atomic_counter *staging_bytes;
  _Atomic uint64_t *staging_hits, *staging_misses;
} dv_backend_config;


/* ---- kernels (DV_BCAP_KERNELS) ------------------------------------------------------
 *
 * The kernel layer (src/kernel/) hands a backend one complete translation
 * unit: <devarray/kernel.h>, then a generated prelude (the program's
 * defines, DV__CONSTANT_BUFFER(n) and one `#define name DV__CONST(T, off)`
 * per constant array), then `#line 1 "<name>"` and the user's source.  The
 * backend compiles it with its own compiler (NVRTC, clBuildProgram, the
 * system C compiler), loads it, and returns the compiled image so the
 * kernel layer can keep it in the cache on disk; module_load takes such an
 * image back.  The backend never reads or writes the cache itself.
 */
typedef struct dv_build_req {
  const char *name;     /* the program's name, for messages */
  const char *source;   /* the complete translation unit (NUL-terminated) */
  const char *options;  /* the user's extra options for this backend, or "" */
  unsigned flags;       /* DV_BUILD_* */
  size_t const_bytes;   /* size of the constant buffer (0: none) */
  const void *const_init; /* its initial contents (const_bytes bytes) */
} dv_build_req;

/* One argument of a launch, as the backend receives it: a buffer (the
 * native memory of buf, passed as a pointer / cl_mem) or a value of `size`
 * bytes.  An array argument arrives as a buffer followed by its byte offset
 * (an int64 value), then for DV_VIEW a dv_kview value (DV_BARG_VIEW). */
typedef enum dv_barg_kind {
  DV_BARG_BUFFER = 1, /* buf: device buffer handle; NULL for an empty array (the kernel gets NULL) */
  DV_BARG_VALUE = 2,  /* value/size; type says how a host call passes it */
  DV_BARG_VIEW = 3    /* value points at a struct dv_bkview (size = sizeof) */
} dv_barg_kind;

typedef struct dv_barg {
  dv_barg_kind kind;
  dv_type_id type;  /* DV_BARG_VALUE: the scalar's dtype (int64 for offsets) */
  void *buf;        /* DV_BARG_BUFFER */
  const void *value;
  size_t size;
} dv_barg;

/* What a DV_BARG_BUFFER's value points at (NULL: not known): the array the
 * kernel is given, for the host simulator's access checks (kernel_check=on:
 * their bounds and the element a report names).  lo and hi are the bytes it
 * spans relative to its element 0 (the buffer plus the offset argument that
 * follows), lo <= 0 <= hi; itemsize its element's bytes (0: the span is not known). */
typedef struct dv_barray {
  int64_t lo, hi;
  size_t itemsize;
} dv_barray;

/* The kernel's view struct (kernel.h's dv_kview), 64-bit fields only so that
 * host, CUDA and OpenCL agree on its layout. */
#define DV_BKVIEW_MAXDIMS 8
typedef struct dv_bkview {
  int64_t ndim;
  int64_t shape[DV_BKVIEW_MAXDIMS];
  int64_t strides[DV_BKVIEW_MAXDIMS];
} dv_bkview;

typedef struct dv_blaunch {
  uint32_t grid[3], block[3]; /* all >= 1, checked against the limits */
  size_t dynamic_shared;
  size_t nargs;
  const dv_barg *args;        /* valid only during the call: copy what a queued launch needs */
  unsigned flags;             /* DV_COPY_SYNC: the caller waits for the stream right after (the
                               * host simulator may then run it on the caller's thread) */
} dv_blaunch;

/* Device-wide launch limits (filled once per context). */
typedef struct dv_klimits {
  uint32_t max_threads_per_block;
  uint32_t max_block[3];
  uint32_t max_grid[3];
  size_t max_shared_per_block;       /* without opt-in */
  size_t max_shared_per_block_optin; /* with opt-in (CUDA); = max_shared_per_block elsewhere */
  size_t max_constant_bytes;
  size_t max_arg_bytes;              /* the most bytes of kernel parameters a launch may
                                        pass (hidden ones excluded); 0: no limit known */
  int wave_size;                     /* warp / sub-group size; 1 when none */
  /* Names the backend's compiler predefines for this device, space-separated
   * (OpenCL: the device's extensions, so the cl_ names are known exactly);
   * NULL: not known.  Owned by the backend, valid while the context lives. */
  const char *predefined;
} dv_klimits;

/* The text of include/devarray/kernel.h and of src/kernel/copy_kernels.dvk,
 * embedded at build time (in the build tree): the kernel layer prepends the
 * first to every program; backends build their copy kernels from both. */
extern const char dv__kernel_header[];
extern const char dv__copy_kernels_source[];

typedef void (*dv_bcallback_fn)(void *user, dv_status status);

/* One lowered kernel parameter as the driver reports it (kernel_params). */
typedef struct dv_bparam {
  char kind;     /* 'b' a buffer (a global or constant pointer), 'v' a value, '?' unknown */
  size_t size;   /* bytes of a value; 0 unknown */
  char type[48]; /* the driver's type name ("float*", "long", "dv_kview"); "" unknown */
} dv_bparam;

/* Which driver pool pool_open readies (DRIVER_POOL; option async_pool). */
typedef enum dv_bpool_kind {
  DV_BPOOL_PRIVATE = 0, /* one made for the context (cuMemPoolCreate), destroyed at close */
  DV_BPOOL_DEFAULT = 1, /* the device's default pool (cuDeviceGetDefaultMemPool) */
  DV_BPOOL_CURRENT = 2, /* the device's current pool (cuDeviceGetMemPool): whatever another library set */
} dv_bpool_kind;
typedef struct dv_bpool_config {
  dv_bpool_kind kind;
  bool set_threshold;         /* set the release threshold (else the pool keeps its own) */
  uint64_t release_threshold; /* bytes the pool keeps reserved at synchronizations */
} dv_bpool_config;
/* A driver pool's own figures (bytes; *_high: peaks since it was made). */
typedef struct dv_bpool_stats {
  uint64_t reserved, reserved_high, used, used_high, release_threshold;
} dv_bpool_stats;

/*
 * The capabilities: one bit per group of backend_methods.def.  A table
 * declares in `caps` the groups it fills; dv__backend_check (registry.c)
 * holds every table to it: a declared group has all of its methods, an
 * undeclared one none.  Callers test a bit (dv__be_has), not a pointer.
 */
enum {
  DV_BCAP_ENTRY = 1u << 0,           /* probe, open: every table */
  DV_BCAP_DEVICE = 1u << 1,          /* close, device_info */
  DV_BCAP_MEMORY = 1u << 2,          /* device memory */
  DV_BCAP_HOSTMEM = 1u << 3,         /* page-locked and registered host memory */
  DV_BCAP_COPIES = 1u << 4,          /* copy_rect, memset */
  DV_BCAP_STREAMS = 1u << 5,         /* streams and stream callbacks */
  DV_BCAP_EVENTS = 1u << 6,          /* events */
  DV_BCAP_STRIDED = 1u << 7,         /* copy_strided */
  DV_BCAP_PEER = 1u << 8,            /* copy_peer */
  DV_BCAP_MANAGED = 1u << 9,         /* managed_alloc */
  DV_BCAP_BUILTIN_STREAMS = 1u << 10, /* stream_builtin */
  DV_BCAP_KERNELS = 1u << 11,        /* modules, kernels, launches */
  DV_BCAP_NATIVE = 1u << 12,         /* native handles, buffers over foreign memory */
  DV_BCAP_ORDER_NATIVE = 1u << 13,   /* stream_order_native */
  DV_BCAP_IPC = 1u << 14,            /* ipc_export, ipc_open, ipc_close */
  DV_BCAP_FAULTS = 1u << 15,         /* fault injection, check_memory */
  DV_BCAP_TRIM = 1u << 16,           /* mem_trim */
  DV_BCAP_BUFFER_CHECK = 1u << 17,   /* buffer_check */
  DV_BCAP_DRIVER_POOL = 1u << 20,    /* the driver's stream-ordered pool (the "async" manager) */
  DV_BCAP_GRAPHS = 1u << 24,         /* graph capture and replay */
};
/* What every backend that can open a context has.  A table with ENTRY alone
 * is a placeholder (OpenCL built without its headers): its open fails. */
#define DV_BCAP_BASE \
  (DV_BCAP_ENTRY | DV_BCAP_DEVICE | DV_BCAP_MEMORY | DV_BCAP_HOSTMEM | DV_BCAP_COPIES | DV_BCAP_STREAMS | \
   DV_BCAP_EVENTS)

/* The table: name, capabilities, and one pointer per method of
 * backend_methods.def (which documents each). */
struct dv_backend {
  const char *name; /* "host", "opencl", "cuda", "hip" */
  unsigned caps;    /* DV_BCAP_* */
#define DV_BE_METHOD(group, ret, method, params) ret(*method) params;
#include "backend_methods.def"
#undef DV_BE_METHOD
};

/* Whether backend be has every group of `caps`. */
static inline bool dv__be_has(const dv_backend *be, unsigned caps) { return (be->caps & caps) == caps; }

#define DV_BIPC_PAYLOAD 64 /* bytes of a backend's IPC payload (CUDA's handle is 64) */
#define DV_BKMAXPARAMS 64 /* most kernel parameters (as declared) a launch may pass */

/* The registry (registry.c): every backend compiled in, host first (the
 * public order of dv_backend_name). */
extern const dv_backend dv__backend_host;
extern const dv_backend dv__backend_opencl;
extern const dv_backend dv__backend_cuda;
extern const dv_backend dv__backend_hip;
const dv_backend *dv__backend_find(const char *name);
/* Whether table be keeps its capabilities: DV_OK, else DV_ERR_MISUSE
 * naming the group and method that disagree (tests/backends/test_backend_seam.c
 * checks every table compiled in). */
dv_status dv__backend_check(const dv_backend *be);
/* The i-th backend automatic selection tries: cuda, hip, opencl, host;
 * NULL past the last. */
const dv_backend *dv__backend_auto_at(size_t i);

/* ---- helpers the backends share (common.c) ---- */
/* A backend's stream_callback method. */
typedef dv_status (*dv_bcallback_queue_fn)(void *state, dv_bstream *s, dv_bcallback_fn fn, void *user);
/* Queue a host-to-host rect copy in stream order through `queue`, for
 * drivers that only copy to or from device memory. */
dv_status dv__host_rect_in_order(dv_bcallback_queue_fn queue, void *state, dv_bstream *s, const dv_rect *r);

#endif
