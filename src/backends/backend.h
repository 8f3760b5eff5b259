/*
 * The backend seam: one versioned table of function pointers per backend, in
 * the manner of SQLite's sqlite3_vfs.  Methods are only ever appended; each
 * addition bumps DV_BACKEND_VERSION; optional methods may be NULL and the
 * core checks before calling them.
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

#define DV_BACKEND_VERSION 8 /* 2: managed_alloc, stream_builtin; 3: kernels, native handles; 4: interop; 5: copy_peer; 6: kernel_params; 7: mem_trim; 8: buffer_check */

typedef struct dv_backend dv_backend;
typedef struct dv_bstream dv_bstream; /* backend stream */
typedef struct dv_bevent dv_bevent;   /* backend event */
typedef struct dv_bmodule dv_bmodule; /* backend module (a built program) */
typedef struct dv_bkernel dv_bkernel; /* backend kernel (owned by its module) */

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
  size_t cuda_staging_chunk; /* CUDA: bytes per staged piece of a pageable copy */
  int cuda_staging_threads;  /* CUDA: threads copying a piece to/from staging (0: min(4, CPUs)) */
  size_t cuda_staging_thread_min; /* CUDA: pieces below this many bytes are copied by one thread */
  size_t host_printf_buffer; /* host simulator: dv_printf bytes kept per launch */
  size_t cuda_staging_limit; /* CUDA: pinned staging bytes per context (0: 4 chunks) */
  double kernel_timeout;     /* host simulator: seconds a launch may run (0: no limit) */
  /* The context's counters of pinned staging memory (dv_stats `staging`,
   * staging_hits, staging_misses) for a backend that stages on its own
   * (CUDA's pageable path); NULL: not counted.  Valid until close. */
  struct dv_atomic_counter *staging_bytes;
  _Atomic uint64_t *staging_hits, *staging_misses;
} dv_backend_config;


/* ---- kernels (version 3) ------------------------------------------------------
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

struct dv_backend {
  int version;      /* DV_BACKEND_VERSION this table was written against */
  const char *name; /* "host", "opencl", "cuda" */

  /* Probe: can this backend open a device here?  Fills reason on failure. */
  dv_status (*probe)(char *reason, size_t cap);
  /* Open a device; *state is the backend's per-context state. */
  dv_status (*open)(const dv_backend_config *cfg, void **state);
  void (*close)(void *state);
  dv_status (*device_info)(void *state, dv_device_info *out);

  /* Device memory. */
  dv_status (*mem_alloc)(void *state, size_t bytes, void **buf);
  dv_status (*mem_free)(void *state, void *buf);
  dv_status (*mem_info)(void *state, size_t *free_bytes, size_t *total_bytes);

  /* Host memory: page-locked allocations (optionally mapped) and
   * registration of existing memory.  *dev_buf receives the device handle of
   * mapped memory (else NULL).  *handle is what host_free/unregister take. */
  dv_status (*host_alloc)(void *state, size_t bytes, unsigned flags, void **handle, void **ptr,
                          void **dev_buf);
  dv_status (*host_free)(void *state, void *handle);
  dv_status (*host_register)(void *state, void *ptr, size_t bytes, unsigned flags, void **handle,
                             void **dev_buf);
  dv_status (*host_unregister)(void *state, void *handle);

  /* Copies and memset, queued on a stream. */
  dv_status (*copy_rect)(void *state, dv_bstream *s, const dv_rect *r);
  dv_status (*copy_strided)(void *state, dv_bstream *s, const dv_strided *c); /* optional */
  dv_status (*memset)(void *state, dv_bstream *s, dv_memref dst, int value, size_t bytes);

  /* Streams. */
  dv_status (*stream_create)(void *state, unsigned flags, dv_bstream **out);
  dv_status (*stream_destroy)(void *state, dv_bstream *s);
  dv_status (*stream_sync)(void *state, dv_bstream *s); /* s == NULL: every stream */
  dv_status (*stream_query)(void *state, dv_bstream *s); /* DV_OK or DV_ERR_NOT_READY */
  /* Call fn(user, status) once the stream reaches this point; status is the
   * first error seen on the stream so far (DV_OK if none). */
  dv_status (*stream_callback)(void *state, dv_bstream *s, dv_bcallback_fn fn, void *user);

  /* Events. */
  dv_status (*event_create)(void *state, unsigned flags, dv_bevent **out);
  dv_status (*event_destroy)(void *state, dv_bevent *e);
  dv_status (*event_record)(void *state, dv_bevent *e, dv_bstream *s);
  dv_status (*event_wait)(void *state, dv_bstream *s, dv_bevent *e);
  dv_status (*event_query)(void *state, dv_bevent *e);
  dv_status (*event_sync)(void *state, dv_bevent *e);
  dv_status (*event_elapsed)(void *state, dv_bevent *start, dv_bevent *end, float *ms);

  /* Fault injection (host simulator); optional. */
  dv_status (*fault_inject)(void *state, dv_fault_kind kind, uint64_t k);
  int (*fault_pending)(void *state, dv_fault_kind kind);
  /* Integrity check of live and recently freed allocations; optional. */
  dv_status (*check_memory)(void *state);

  /* Version 2. */
  /* Managed (unified) memory; optional (NULL: not supported). */
  dv_status (*managed_alloc)(void *state, size_t bytes, int attach_global, void **buf);
  /* The driver's own default streams: which = 1 legacy, 2 per-thread;
   * optional (NULL: the context's default stream stands in). */
  dv_status (*stream_builtin)(void *state, int which, dv_bstream **out);

  /* Version 3: kernels (all optional together: NULL module_build means the
   * backend cannot run kernels), native handles, foreign memory. */
  dv_status (*kernel_limits)(void *state, dv_klimits *out);
  /* A string that changes whenever the same source would compile to a
   * different image: device or architecture, compiler and driver versions. */
  dv_status (*kernel_target_id)(void *state, char *buf, size_t cap);
  /* Compile req and load it.  *image / *image_size: a dv__malloc'd copy of
   * the compiled image for the cache (NULL, 0 when the backend has none);
   * *log: a dv__malloc'd, NUL-terminated compiler log (may be NULL), set on
   * success and on failure (DV_ERR_COMPILE). */
  dv_status (*module_build)(void *state, const dv_build_req *req, dv_bmodule **out, void **image,
                            size_t *image_size, char **log);
  /* Load an image module_build returned earlier (possibly in another
   * process).  A damaged or foreign image fails (any status); the caller
   * then builds from source. */
  dv_status (*module_load)(void *state, const dv_build_req *req, const void *image,
                           size_t image_size, dv_bmodule **out, char **log);
  /* Unload; the caller guarantees no queued launch still uses it. */
  dv_status (*module_unload)(void *state, dv_bmodule *m);
  /* The kernel `name` (DV_ERR_INVALID_ARGUMENT if the module has none). */
  dv_status (*kernel_get)(void *state, dv_bmodule *m, const char *name, dv_bkernel **out);
  dv_status (*kernel_attrs)(void *state, dv_bkernel *k, dv_kernel_attrs *out);
  /* Copy `bytes` from src (host pointer or device buffer) into the module's
   * constant buffer at `offset`, queued on s. */
  dv_status (*constant_write)(void *state, dv_bmodule *m, dv_bstream *s, size_t offset,
                              dv_memref src, size_t bytes);
  /* Queue a launch on s.  Argument count and kinds already match what the
   * kernel layer could check; the backend checks what only it can (OpenCL's
   * CL_KERNEL_NUM_ARGS, the host module's signature). */
  dv_status (*launch)(void *state, dv_bstream *s, dv_bkernel *k, const dv_blaunch *l);
  /* Native handles (see dv_context_native, dv_stream_native, dv_array_native). */
  dv_status (*native_context)(void *state, void **context, void **device);
  dv_status (*native_stream)(void *state, dv_bstream *s, void **handle);
  dv_status (*native_buffer)(void *state, void *buf, void **native);
  /* A buffer handle over foreign memory; buffer_unwrap drops it without
   * freeing the memory.  Accesses are checked against `bytes` where the
   * backend checks anything. */
  dv_status (*buffer_wrap)(void *state, void *native, size_t bytes, void **buf);
  dv_status (*buffer_unwrap)(void *state, void *buf);

  /* Version 4: interoperability (src/array/dlpack.c, src/array/ipc.c); every
   * method optional (NULL: not supported). */
  /* Make the native stream `native` (CUstream, cl_command_queue) wait for
   * the work queued on s so far, without blocking the caller. */
  dv_status (*stream_order_native)(void *state, dv_bstream *s, void *native);
  /* IPC: describe device buffer buf (as mem_alloc returned it) in
   * DV_BIPC_PAYLOAD bytes another process of the same user can open. */
  dv_status (*ipc_export)(void *state, void *buf, unsigned char *payload);
  /* Map a buffer another process exported: *native is what buffer_wrap
   * takes, *bytes its size, *token what ipc_close takes.  A payload whose
   * buffer is gone (freed, its process exited) is DV_ERR_INVALID_ARGUMENT. */
  dv_status (*ipc_open)(void *state, const unsigned char *payload, void **native, size_t *bytes,
                        void **token);
  /* Unmap what ipc_open mapped; the caller guarantees nothing uses it. */
  dv_status (*ipc_close)(void *state, void *token);
  /* Version 5, optional: copy `bytes` contiguous bytes from device memory of
   * another context of the same backend (src_state: that context's state)
   * into device memory of this one, queued on s (this context's stream).
   * The source's queued work is waited for first.  DV_ERR_NOT_SUPPORTED:
   * the caller stages through the host instead. */
  dv_status (*copy_peer)(void *state, dv_bstream *s, dv_memref dst, void *src_state, dv_memref src,
                         size_t bytes);
  /* Version 6, optional: what the driver itself knows of kernel k's
   * parameters, for debug builds' cross-check of the signature the kernel
   * layer read from the source (src/kernel/signature.c).  Either *sig: the
   * parameter list as written (the host simulator's exported DV_KERNEL text),
   * or out[0 .. *n): one entry per lowered parameter (an array is a buffer
   * and an int64 offset, a view adds its dv_kview), at most cap.
   * DV_ERR_NOT_SUPPORTED: the driver cannot tell. */
  dv_status (*kernel_params)(void *state, dv_bkernel *k, dv_bparam *out, size_t cap, size_t *n,
                             const char **sig);
  /* Version 7, optional: give memory the backend keeps for reuse (freed
   * blocks it caches) back to the system; dv_memory_trim calls it after the
   * manager's own trim. */
  dv_status (*mem_trim)(void *state);
  /* Version 8, optional: whether bytes [offset, offset + bytes) of `buf`
   * lie in a live device buffer of this backend (one mem_alloc made and
   * mem_free has not freed): DV_OK, else DV_ERR_INVALID_ARGUMENT.  `buf` is
   * a buffer handle as mem_alloc returns it, or with `native` what
   * native_buffer gives for one (a host simulator block's data address,
   * anywhere inside the block).  It must not read through buf, which may be
   * any value: what a plugged-in memory manager handed out
   * (dv_memory_manager.alloc), a foreign __cuda_array_interface__ pointer.
   * NULL where a buffer is a device address the driver validates itself
   * (CUDA): never dereferenced by the backend, a bad one is the driver's error. */
  dv_status (*buffer_check)(void *state, void *buf, bool native, size_t offset, size_t bytes);
};
#define DV_BIPC_PAYLOAD 64 /* bytes of a backend's IPC payload (CUDA's handle is 64) */
#define DV_BKMAXPARAMS 64 /* most kernel parameters (as declared) a launch may pass */

/* The registry (registry.c): every backend compiled in, host first (the
 * public order of dv_backend_name). */
extern const dv_backend dv__backend_host;
extern const dv_backend dv__backend_opencl;
extern const dv_backend dv__backend_cuda;
extern const dv_backend dv__backend_hip;
const dv_backend *dv__backend_find(const char *name);
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
