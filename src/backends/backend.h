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

#include "devarray.h"

#define DV_BACKEND_VERSION 2 /* 2: managed_alloc, stream_builtin */

typedef struct dv_backend dv_backend;
typedef struct dv_bstream dv_bstream; /* backend stream */
typedef struct dv_bevent dv_bevent;   /* backend event */

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
  int host_guard;           /* host simulator guard bytes / poisoning */
  uint64_t fault_device_alloc, fault_copy;
  int host_strided;         /* host simulator: offer copy_strided */
  int64_t host_delay_us;    /* host simulator: delay before each queued op */
  const char *device;       /* backend-specific device selector, or "" */
  int require_gpu;          /* automatic selection: accept only GPU devices */
} dv_backend_config;

typedef void (*dv_bcallback_fn)(void *user, dv_status status);

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
};

/* The registry (registry.c): every backend compiled in, host first; the
 * automatic selection tries them from the last one back. */
extern const dv_backend dv__backend_host;
extern const dv_backend dv__backend_opencl;
extern const dv_backend dv__backend_cuda;
const dv_backend *dv__backend_find(const char *name);
const dv_backend *dv__backend_at(size_t i); /* NULL past the last */

/* ---- helpers the backends share (common.c) ---- */
/* A backend's stream_callback method. */
typedef dv_status (*dv_bcallback_queue_fn)(void *state, dv_bstream *s, dv_bcallback_fn fn, void *user);
/* Queue a host-to-host rect copy in stream order through `queue`, for
 * drivers that only copy to or from device memory. */
dv_status dv__host_rect_in_order(dv_bcallback_queue_fn queue, void *state, dv_bstream *s, const dv_rect *r);

#endif
