/**
 * @file devarray.h
 * devarray.h - device arrays, transfers, host memory, streams and events for C.
 *
 * This one header is the reference for the library.  Conventions that hold
 * for every function unless its comment says otherwise:
 *
 *  - Every function that can fail returns a dv_status.  DV_OK is 0.  On
 *    failure, out-parameters are set to NULL/0 and nothing observable has
 *    changed (no array created, no memory leaked, no data copied, no
 *    statistic counted).  Buffers that receive data (an element, a field,
 *    JSON text) are left untouched instead; the JSON writers still report
 *    the length they need, and dv_stats.size stays the caller's.  A
 *    human-readable detail is available from dv_last_error() on the failing
 *    thread until the next failing call on that thread.
 *  - Handles are opaque.  Objects that are shared (contexts aside) are
 *    reference counted: *_retain adds a reference, *_release drops one, and
 *    releasing NULL is a no-op.  An object returned through an out-parameter
 *    carries one reference owned by the caller.
 *  - Threads: a context may be used from many threads at once.  Arrays are
 *    immutable descriptors and may be shared between threads freely.
 *    Streams serialize the work queued on them; queuing onto one stream from
 *    several threads is safe (the order between threads is the order in
 *    which the calls happen).  dv_config objects are not thread-safe.
 *  - Blocking: a function that takes a `dv_stream *stream` argument is
 *    synchronous when stream is NULL (it runs on the context's default
 *    stream and returns when the work is complete) and asynchronous when a
 *    stream is given (it queues the work and returns).  For asynchronous
 *    work the caller keeps every host buffer involved unchanged and alive
 *    until the stream reaches that point (dv_stream_synchronize, an event,
 *    or a callback says so).  A stream must belong to the context the work
 *    runs on (the destination's, for copies): DV_ERR_BACKEND_MISMATCH
 *    otherwise, before anything is allocated or queued.
 *  - Byte counts, offsets and strides are size_t or int64_t, never int.
 *    Strides are in bytes, as in NumPy.  All size arithmetic is checked for
 *    overflow (DV_ERR_OVERFLOW).
 *
 * Naming rules (every name below follows them; the exceptions are Numba's
 * names, and the deprecated old names kept so that no program breaks):
 *  - Prefixes: dv_ for functions and types, DV_ for macros and enumerators;
 *    dv__ and DV__ are the library's own (here only in the inline launch
 *    argument helpers): never call or define them.
 *  - Functions are dv_<object>_<verb or noun>[_<detail>]: the object (the
 *    handle type without dv_: context, config, array, stream, event, scope,
 *    program, module, kernel, smart, memory for the context's memory
 *    manager, backend for the driver beneath it) comes first, then what is
 *    done (dv_stream_synchronize, dv_event_record, dv_memory_trim) or read
 *    (dv_array_ndim, dv_memory_info).  The functions named after Numba's
 *    module functions keep Numba's words (dv_to_device, dv_copy_to_host,
 *    dv_device_array, dv_pinned_array, ...), and a transfer's argument order
 *    is Numba's (Transfers).
 *  - Lifetimes: *_create (or a Numba name) makes an object carrying one
 *    reference owned by the caller.  Shared objects are reference counted:
 *    *_retain adds a reference and returns its argument, *_release drops one
 *    (NULL: a no-op); objects with one owner are *_destroy'ed (context,
 *    config, program).  Scopes are *_begin / *_end; registrations are
 *    *_register / *_unregister.
 *  - Released handles (issue 37): an array, stream, event, module or
 *    context is "released" from its last *_release (a context: from
 *    dv_context_destroy).  In checked mode (the host_mode option, checked
 *    by default in Debug builds of devarray; it decides this on every
 *    backend) passing a released handle to any function is DV_ERR_MISUSE,
 *    the message naming the function and the kind ("dv_stream_synchronize:
 *    stream was released ..."); a function that cannot fail answers as for
 *    NULL (0, NULL, "none") and sets dv_last_error; a retain returns NULL;
 *    a second release (or destroy) is reported (dv_last_error, and logged
 *    as an error) and changes nothing.  A handle of another kind where one
 *    is expected is DV_ERR_MISUSE too ("not a stream (a event handle)").
 *    Checked mode keeps a released record's memory, poisoned, in a
 *    quarantine of the process's last 4096 released records, so a handle
 *    released longer ago than that is not caught.  In fast mode the same
 *    checks run (one load and compare each) but released memory is freed
 *    when the library is done with it, so what is caught is a use while
 *    the record is still held: an array made by a creation call (up to 4
 *    dimensions) while a view of its memory lives; a stream while arrays
 *    allocated on it hold it; a stream, event, module or such a device array
 *    released inside a dv_defer_cleanup_begin/end scope, until the flush
 *    after it.  Not caught in fast mode: a view's descriptor (freed at its
 *    release), a destroyed context, anything whose memory was freed or
 *    reused (an array's record is recycled for the thread's next array in
 *    builds without AddressSanitizer).  Never caught: a pointer that never was a
 *    handle, a release racing another use of the same handle.  Kernel
 *    handles follow their module (dv_kernel_retain).
 *  - Reading: *_info fills a struct or out-parameters and returns a status
 *    (dv_context_device_info, dv_memory_info); a bare noun returns the value
 *    itself and cannot fail (dv_array_size, dv_kernel_name); *_is_* and
 *    other yes/no answers are int 1 or 0; *_json writes JSON text as
 *    dv_context_stats_json does.
 *  - Statuses: a function that can fail returns dv_status, with its
 *    out-parameters last (dv_foo(in..., out)).  The statuses it can return
 *    beyond DV_ERR_NULL_ARGUMENT and DV_ERR_HOST_OUT_OF_MEMORY are named in
 *    its comment.
 *  - Deprecated names stay declared and exported, each documented as the old
 *    name of its successor, with the same signature and behaviour.
 *
 * Sections: status codes; opaque handles; options, configuration and
 * logging; backends and contexts; arrays and views (dtypes, arrays, views,
 * records); transfers; host memory; streams and events; memory managers and
 * statistics; kernels; smart arrays; interop (native handles, foreign
 * memory, DLPack, IPC); for extensions.  Backend policy (how a backend
 * implements a call, its options) is in docs/semantics.md, "Backend policy".
 */
#ifndef DEVARRAY_H
#define DEVARRAY_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Marks the library's public functions (exported from the shared library). */
#if defined(_WIN32) && defined(DV_SHARED_BUILD)
#define DV_API __declspec(dllexport)
#elif defined(__GNUC__) && __GNUC__ >= 4
#define DV_API __attribute__((visibility("default")))
#else
#define DV_API
#endif

#define DV_VERSION_MAJOR 0 /**< this header's major version (incompatible API changes) */
#define DV_VERSION_MINOR 2 /**< this header's minor version (compatible additions) */
#define DV_VERSION_PATCH 0 /**< this header's patch level (fixes) */
/** The library's version as "MAJOR.MINOR.PATCH" (static string). */
DV_API const char *dv_version(void);

/** Largest number of dimensions an array may have (NumPy's limit). */
#define DV_MAXDIMS 32

/* ======================================================================== */
/* Status codes                                                              */
/* ======================================================================== */

/** @defgroup status Status codes
 *  Every function that can fail returns a dv_status; dv_last_error() has the detail.
 *  @{ */

/**
 * The status codes: X(NAME, value, description) gives DV_NAME = value, and
 * dv_status_str() returns the description.  Groups by hundreds: 1xx bad
 * argument, 2xx out of memory, 3xx not supported, 4xx driver/device error,
 * 5xx library loading, 6xx misuse of the API.
 */
#define DV_STATUS_MAP(X)                                                            \
  X(OK, 0, "success")                                                               \
  X(ERR_INVALID_ARGUMENT, 100, "invalid argument")                                  \
  X(ERR_NULL_ARGUMENT, 101, "a required argument is NULL")                          \
  X(ERR_DTYPE_MISMATCH, 102, "dtypes do not match")                                 \
  X(ERR_SHAPE_MISMATCH, 103, "shapes do not match")                                 \
  X(ERR_BAD_SHAPE, 104, "invalid shape")                                            \
  X(ERR_BAD_STRIDES, 105, "invalid strides")                                        \
  X(ERR_BAD_ORDER, 106, "invalid order (expected 'C', 'F' or 'A')")                 \
  X(ERR_INDEX, 107, "index out of range")                                           \
  X(ERR_TOO_MANY_INDICES, 108, "too many indices for array")                        \
  X(ERR_OVERFLOW, 109, "size arithmetic overflows")                                 \
  X(ERR_RESHAPE_SIZE, 110, "reshape changes the size of the array")                 \
  X(ERR_UNKNOWN_FIELD, 111, "no such record field")                                 \
  X(ERR_COPY_NEEDED, 112, "a view is impossible and a copy was not allowed")        \
  X(ERR_BAD_DTYPE, 113, "invalid dtype")                                            \
  X(ERR_BAD_OPTION, 114, "unknown option or invalid option value")                  \
  X(ERR_BAD_STEP, 115, "slice step cannot be zero")                                 \
  X(ERR_LAUNCH_CONFIG, 116, "kernel launch configuration exceeds a device limit")     \
  X(ERR_KERNEL_ARGUMENT, 117, "kernel arguments do not match the kernel")           \
  X(ERR_OUT_OF_MEMORY, 200, "device out of memory")                                 \
  X(ERR_HOST_OUT_OF_MEMORY, 201, "host out of memory")                              \
  X(ERR_NOT_SUPPORTED, 300, "operation not supported")                              \
  X(ERR_BACKEND_UNAVAILABLE, 301, "backend not available")                          \
  X(ERR_DRIVER, 400, "driver or device error")                                      \
  X(ERR_DEVICE_LOST, 401, "device or queue lost")                                   \
  X(ERR_CORRUPTION, 402, "memory corruption detected (guard or poison bytes)")      \
  X(ERR_COMPILE, 403, "kernel source failed to compile (see the build log)")        \
  X(ERR_KERNEL_FAULT, 404, "a kernel faulted (divergent barrier, bad access, trap)") \
  X(ERR_IO, 405, "a file could not be read or written")                            \
  X(ERR_KERNEL_TIMEOUT, 406, "a kernel ran longer than the option kernel_timeout allows") \
  X(ERR_LIBRARY_LOAD, 500, "driver library could not be loaded")                    \
  X(ERR_SYMBOL_LOAD, 501, "driver library lacks a required entry point")            \
  X(ERR_NO_COMPILER, 502, "no kernel compiler found (NVRTC or a C compiler)")       \
  X(ERR_MISUSE, 600, "API misuse")                                                  \
  X(ERR_BUSY, 601, "object still in use")                                           \
  X(ERR_BACKEND_MISMATCH, 602, "objects belong to different contexts or backends")  \
  X(ERR_NOT_READY, 603, "work not yet complete")

/** A status: DV_OK (0) or one of the errors listed in DV_STATUS_MAP. */
typedef enum dv_status {
#define DV__STATUS_ENUM(name, value, desc) DV_##name = value,
  DV_STATUS_MAP(DV__STATUS_ENUM)
#undef DV__STATUS_ENUM
} dv_status;

/** "DV_ERR_SHAPE_MISMATCH" for DV_ERR_SHAPE_MISMATCH; "DV_UNKNOWN" otherwise. Static. */
DV_API const char *dv_status_name(dv_status s);
/** A static one-line description of the status. Never NULL. */
DV_API const char *dv_status_str(dv_status s);
/**
 * The detail message of the last failing call on this thread (which
 * argument, which shapes, the driver's code).  Empty string when none.
 * The pointer stays valid until the next failing call on the same thread.
 */
DV_API const char *dv_last_error(void);

/** @} */

/* ======================================================================== */
/* Opaque handles                                                            */
/* ======================================================================== */

/** @defgroup handles Opaque handles
 *  The library's objects, known to callers only through pointers.
 *  @{ */

/** A device opened through one backend: options, memory manager, default stream. */
typedef struct dv_context dv_context;
/** Options for dv_context_create (not thread-safe). */
typedef struct dv_config dv_config;
/** An array (shape, strides, dtype) over host or device memory; reference counted. */
typedef struct dv_array dv_array;
/** An in-order queue of device work; reference counted. */
typedef struct dv_stream dv_stream;
/** A marker recorded in a stream: ordering between streams, completion, timing. */
typedef struct dv_event dv_event;
/** An element type: a NumPy numeric type or a record with named fields. */
typedef struct dv_dtype dv_dtype;
/** A pinned or mapped host-memory scope (dv_pinned_scope_begin, dv_mapped_scope_begin). */
typedef struct dv_scope dv_scope;
/** A smart array: one array kept in host and device memory, moved only when stale. */
typedef struct dv_smart dv_smart;
/** A stream's captured work (dv_graph_capture_end); reference counted. */
typedef struct dv_graph dv_graph;
/** A graph made ready to launch (dv_graph_instantiate). */
typedef struct dv_graph_exec dv_graph_exec;

/** @} */

/* ======================================================================== */
/* Options, configuration and logging                                        */
/* ======================================================================== */

/* ---- options and configuration ----------------------------------------- */

/**
 * @defgroup options Options and configuration
 *
 * Options come from a descriptor table.  Each is read once per process from
 * its environment variable (DV_<NAME>, and for the deallocation limits also
 * Numba's NUMBA_CUDA_* names when the DV_ one is unset); an invalid value is
 * logged as a warning and the default is kept; values out of range are
 * clamped with a warning.  A dv_config passed to dv_context_create overrides
 * both for that context.  Sizes accept K, M, G, T suffixes (powers of 1024);
 * booleans accept 1/0, true/false, yes/no, on/off.  A string option (a
 * compiler, its flags, a directory, a device name) holds at most
 * DV_OPTION_STRING_MAX characters: a longer value is never cut short but
 * refused, by dv_config_set with DV_ERR_BAD_OPTION, and from the
 * environment with a warning (the default is kept).
 *
 * kernel_check (DV_KERNEL_CHECK; the host simulator): off, bounds (shared
 * redzones at barriers, the stack protector, global guard bytes, ASan for
 * kernels in ASan builds), on (bounds plus the access checks: every load
 * and store of a kernel checked at the access for out-of-bounds global
 * and shared memory, uninitialized shared reads and data races, each a
 * DV_ERR_KERNEL_FAULT naming the kernel, thread(s), line(s), array and
 * element; a checked launch runs its blocks in parallel, as others do) or auto (on in
 * checked mode, off in fast mode).  0/false/no mean off, 1/true/yes on.
 * Where the C compiler cannot instrument kernels, auto falls back to
 * bounds (logged) and an explicit on fails builds with
 * DV_ERR_NOT_SUPPORTED.  docs/kernels.md, "The access checks".
 * @{
 */

/** The most characters a string option holds (a longer value is refused). */
#define DV_OPTION_STRING_MAX 511

/** Where an option's value came from. */
typedef enum dv_option_source {
  DV_SOURCE_DEFAULT = 0, /**< the built-in default */
  DV_SOURCE_ENV = 1,     /**< the DV_ environment variable */
  DV_SOURCE_ENV_NUMBA = 2, /**< Numba's environment variable (fallback name) */
  DV_SOURCE_API = 3      /**< set through dv_config_set */
} dv_option_source;

/** One entry of the options table (dv_option_describe); every string is static. */
typedef struct dv_option_info {
  const char *name;        /**< e.g. "max_pending_deallocs_count" */
  const char *env;         /**< e.g. "DV_MAX_PENDING_DEALLOCS_COUNT" */
  const char *env_fallback;/**< Numba's name, or NULL */
  const char *type;        /**< "int", "size", "double", "bool", "string" */
  const char *default_value; /**< the built-in default, as text */
  const char *description; /**< one line for `devarray info` */
} dv_option_info;

/** Number of options in the table. */
DV_API size_t dv_option_count(void);
/** Describe option i (0 <= i < dv_option_count()); DV_ERR_INDEX otherwise. Strings are static. */
DV_API dv_status dv_option_describe(size_t i, dv_option_info *out);
/**
 * The process-wide value of option `name` (environment or default) as a
 * string written to buf (NUL-terminated, truncated to cap).  *source may be
 * NULL.  DV_ERR_BAD_OPTION for an unknown name.  Thread-safe.
 */
DV_API dv_status dv_option_get(const char *name, char *buf, size_t cap, dv_option_source *source);

/** Create an empty configuration (every option inherits the process value). */
DV_API dv_status dv_config_create(dv_config **out);
/**
 * Set option `name` to `value` for contexts created with this config.
 * Unlike environment values, a bad value here is an error:
 * DV_ERR_BAD_OPTION (unknown name, unparsable or out-of-range value, a
 * string longer than DV_OPTION_STRING_MAX), and the config is unchanged.
 * Not thread-safe on one config.
 */
DV_API dv_status dv_config_set(dv_config *cfg, const char *name, const char *value);
/** Destroy a config (NULL is a no-op).  Contexts created from it are unaffected. */
DV_API void dv_config_destroy(dv_config *cfg);

/** @} */

/* ---- logging ----------------------------------------------------------- */

/** @defgroup logging Logging
 *  Library messages go to stderr or to a callback; the `log_level` option filters them.
 *
 *  The report channel (`devarray check`): when the environment has
 *  DV_REPORT_FD, the number of an open file descriptor the process inherited,
 *  the library also writes every bug it finds in the program there, whether
 *  or not the program looks at the status: each host-simulator launch that
 *  fails with DV_ERR_KERNEL_FAULT or DV_ERR_KERNEL_TIMEOUT (the fault, or the
 *  access checks' report) and each released or wrong-kind handle passed to a
 *  function or released again (DV_ERR_MISUSE).  One line per report, written
 *  with one write() call of at most 4096 bytes (so reports of several threads
 *  never interleave on a pipe): `DVREPORT`, the category ("kernel" or "api"),
 *  the status's name and the message, separated by tabs, with backslash, tab
 *  and newline in the message written as backslash-backslash, backslash-t and
 *  backslash-n.  The variable is read once per process; a value that is not
 *  an open descriptor is a warning and no channel. `devarray check --
 *  PROGRAM` opens it (docs/kernels.md); programs need not.
 *  @{ */

/** Severity of a log message; also the values of the `log_level` option. */
typedef enum dv_log_level {
  DV_LOG_OFF = 0,   /**< "off": no messages */
  DV_LOG_ERROR = 1, /**< "error": a failure the library could not report as a status */
  DV_LOG_WARN = 2,  /**< "warn": e.g. an invalid option value in the environment */
  DV_LOG_INFO = 3,  /**< "info": contexts opened, devices chosen */
  DV_LOG_DEBUG = 4  /**< "debug": details for developers */
} dv_log_level;

/** A log sink: one message (no trailing newline) at `level`; calls are serialized. */
typedef void (*dv_log_fn)(dv_log_level level, const char *message, void *user);
/**
 * Route library log messages (at or below the `log_level` option,
 * DV_LOG_LEVEL, default "warn") to fn instead of stderr; fn == NULL restores
 * stderr.  The callback may be called from any thread, including stream
 * worker threads, and must not call back into devarray.  Thread-safe.
 */
DV_API void dv_set_log_callback(dv_log_fn fn, void *user);

/** @} */

/* ======================================================================== */
/* Backends and contexts                                                     */
/* ======================================================================== */

/** @defgroup contexts Backends and contexts
 *  A context is one device opened through one backend: host, opencl or cuda
 *  (hip, AMD's HIP runtime, is compiled in but not complete: it never opens yet).
 *  @{ */

/** Number of backends compiled in (host, opencl, cuda, hip). */
DV_API size_t dv_backend_count(void);
/** Name of backend i ("host", "opencl", "cuda", "hip"); NULL when out of range. */
DV_API const char *dv_backend_name(size_t i);
/**
 * Whether backend `name` can be opened on this machine.  DV_OK when it can;
 * otherwise the reason (e.g. DV_ERR_LIBRARY_LOAD, "libcuda.so.1: cannot open
 * shared object file") as the status and in reason (may be NULL).  Opens and
 * closes the driver; may take milliseconds.  Thread-safe.
 */
DV_API dv_status dv_backend_probe(const char *name, char *reason, size_t cap);

/** A device's description (dv_context_device_info); strings are NUL-terminated. */
typedef struct dv_device_info {
  char backend[16];        /**< "host", "opencl", "cuda", "hip" */
  char name[256];          /**< device name */
  char vendor[128];        /**< device vendor, as the driver names it */
  char driver_version[64]; /**< driver version, as the driver reports it */
  uint64_t total_memory;   /**< bytes of device memory */
  uint64_t max_allocation; /**< largest single allocation, bytes */
  uint64_t base_alignment; /**< alignment of allocations and of views' origins, bytes */
  int can_map_host_memory; /**< mapped arrays are supported */
  int managed_memory;      /**< managed (unified) arrays are supported */
  /** CUDA compute capability (major, minor); on HIP what the runtime
   *  reports as one (the GPU architecture's numbers); 0 elsewhere. @{ */
  int compute_major, compute_minor;
  /** @} */
  char pci_bus_id[32];     /**< empty when unknown */
  int peer_devices;        /**< other devices this one can access directly (peer access) */
} dv_device_info;

/**
 * Create a context: choose a backend and a device, read options, create the
 * default stream.  The backend is the `backend` option ("auto", "host",
 * "opencl", "cuda", "hip"; DV_BACKEND); in automatic mode the order is cuda,
 * then hip (AMD GPUs through AMD's HIP runtime, libamdhip64 of ROCm 5 or 6),
 * then an OpenCL GPU, then the host simulator, which is always there.  The
 * CUDA backend's device is the `cuda_device` option (DV_CUDA_DEVICE), the
 * HIP backend's `hip_device` (DV_HIP_DEVICE): ordinals, default 0 (its
 * kernels are compiled for `hip_arch`, DV_HIP_ARCH, when set, else the
 * device's gfx target; `hiprtc_library`, DV_HIPRTC_LIBRARY, names hipRTC); the
 * `device` option (DV_DEVICE) names the device of whichever backend is
 * chosen and yields to the backend's own option where that is set.  The OpenCL
 * backend's device is the `opencl_device` option (DV_OPENCL_DEVICE:
 * "platform:device" indices, an ordinal "n" — the n-th device counting GPUs
 * first, then the other types, simulators never, so "0" is the device an
 * empty setting picks — or a name substring); left empty, the first GPU,
 * or, when the backend was asked for by name, the first device of any type.
 * An OpenCL device that is a simulator (Oclgrind, which calls itself a GPU)
 * is never chosen without being named: not as the OpenCL backend's default
 * device, nor in automatic mode; `opencl_device=Oclgrind` selects it.  cfg
 * may be NULL.  Asking for an unavailable backend by name fails with its reason
 * (DV_ERR_BACKEND_UNAVAILABLE, DV_ERR_LIBRARY_LOAD, ...).  Thread-safe.
 */
DV_API dv_status dv_context_create(const dv_config *cfg, dv_context **out);
/**
 * Destroy a context.  DV_ERR_BUSY (and nothing changes) while arrays,
 * streams, events, scopes, kernel programs, kernel modules or graphs created
 * from it are still alive.  Otherwise waits
 * for all queued work, runs every pending deallocation, closes the backend.
 * NULL is a no-op returning DV_OK.  Must not race with other use of ctx.
 * A second destroy is DV_ERR_MISUSE ("dv_context_destroy: context was
 * released") in checked mode and changes nothing; in fast mode the
 * context's memory is gone and a second destroy is undefined (see
 * "Released handles").
 */
DV_API dv_status dv_context_destroy(dv_context *ctx);
/** The backend's name ("host", "opencl", "cuda", "hip").  Static string. */
DV_API const char *dv_context_backend(const dv_context *ctx);
/** Describe the context's device. */
DV_API dv_status dv_context_device_info(dv_context *ctx, dv_device_info *out);
/** Deprecated: the old name of dv_memory_info (same behaviour). */
DV_API dv_status dv_context_memory_info(dv_context *ctx, size_t *free_bytes, size_t *total_bytes);
/** Block until all work queued on every stream of the context is complete. */
DV_API dv_status dv_context_synchronize(dv_context *ctx);
/**
 * The driver's legacy default stream (CUDA's handle 1, which synchronizes
 * with blocking streams; HIP's NULL stream) and per-thread default stream
 * (handle 2; HIP's hipStreamPerThread, also 2).  Borrowed;
 * on backends without them, the context's default stream.  Passing one makes
 * work asynchronous on it, as with any stream.
 */
DV_API dv_stream *dv_context_legacy_stream(dv_context *ctx);
/** The per-thread default stream (CUDA's handle 2); see dv_context_legacy_stream(). */
DV_API dv_stream *dv_context_per_thread_stream(dv_context *ctx);
/**
 * The context's default stream (borrowed: do not release it).  Work given a
 * NULL stream runs here synchronously; passing this handle explicitly makes
 * the work asynchronous on it, as with any stream.
 */
DV_API dv_stream *dv_context_default_stream(dv_context *ctx);
/** The resolved value of option `name` for this context, as with dv_option_get. */
DV_API dv_status dv_context_option(dv_context *ctx, const char *name, char *buf, size_t cap,
                                   dv_option_source *source);

/** @} */

/* ======================================================================== */
/* Arrays and views                                                          */
/* ======================================================================== */

/* ---- dtypes ------------------------------------------------------------ */

/** @defgroup dtypes Dtypes
 *  Element types: every NumPy numeric type, and records (structured dtypes).
 *  @{ */

/** The kinds of dtype, named as NumPy names them. */
typedef enum dv_type_id {
  DV_BOOL = 0,   /**< bool (1 byte) */
  DV_INT8,       /**< int8 */
  DV_INT16,      /**< int16 */
  DV_INT32,      /**< int32 */
  DV_INT64,      /**< int64 */
  DV_UINT8,      /**< uint8 */
  DV_UINT16,     /**< uint16 */
  DV_UINT32,     /**< uint32 */
  DV_UINT64,     /**< uint64 */
  DV_FLOAT16,    /**< float16 (IEEE half precision) */
  DV_FLOAT32,    /**< float32 */
  DV_FLOAT64,    /**< float64 */
  DV_COMPLEX64,  /**< complex64 (two float32) */
  DV_COMPLEX128, /**< complex128 (two float64) */
  DV_RECORD,     /**< a record dtype (dv_dtype_record_create) */
  DV_TYPE_COUNT  /**< the number of ids; not a dtype */
} dv_type_id;

/** The built-in dtype for a numeric id (static; retain/release are no-ops). NULL for others. */
DV_API const dv_dtype *dv_dtype_get(dv_type_id id);
/** The built-in dtype named like NumPy ("float64", "f8", "<f8", "int32", "bool", "complex64"...). NULL if unknown. */
DV_API const dv_dtype *dv_dtype_from_name(const char *name);
/** The dtype's kind (DV_RECORD for records); DV_TYPE_COUNT for NULL. */
DV_API dv_type_id dv_dtype_id(const dv_dtype *dt);
/** Bytes per element (0 for NULL). */
DV_API size_t dv_dtype_itemsize(const dv_dtype *dt);
/** Required alignment of elements, in bytes: strides must be multiples of it (records: 1). */
DV_API size_t dv_dtype_alignment(const dv_dtype *dt);
/** "float64", ... or "record" for records.  Static or owned by the dtype. */
DV_API const char *dv_dtype_name(const dv_dtype *dt);
/** 1 when the dtypes describe the same layout (records: same fields, offsets, itemsize). */
DV_API int dv_dtype_equal(const dv_dtype *a, const dv_dtype *b);

/** One field of a record dtype: given to dv_dtype_record_create, read by dv_dtype_field. */
typedef struct dv_field_desc {
  const char *name;      /**< unique, non-empty; copied */
  const dv_dtype *dtype; /**< numeric or record; retained */
  size_t offset;         /**< byte offset inside the record */
  int ndim;              /**< 0 for a scalar field, else a sub-array field (C order) */
  const int64_t *shape;  /**< ndim positive extents (copied) */
} dv_field_desc;

/**
 * Create a record (structured) dtype.  itemsize 0 means "the end of the last
 * field".  Errors: DV_ERR_NULL_ARGUMENT, DV_ERR_BAD_DTYPE (no fields, empty
 * or duplicate name, field past itemsize, overlapping fields, bad sub-array
 * shape), DV_ERR_OVERFLOW (the itemsize, or a field's offset or end, offset
 * + itemsize x sub-array count, exceeds INT64_MAX).  The result has one
 * reference.
 */
DV_API dv_status dv_dtype_record_create(const dv_field_desc *fields, size_t nfields,
                                        size_t itemsize, dv_dtype **out);
/** Add a reference to a record dtype and return dt (a no-op for built-in dtypes). */
DV_API const dv_dtype *dv_dtype_retain(const dv_dtype *dt);
/**
 * Drop a reference; a record dtype is freed with its last one.  Arrays hold
 * their own references.  A no-op for built-in dtypes and NULL.
 */
DV_API void dv_dtype_release(const dv_dtype *dt);
/** Number of fields (0 for numeric dtypes). */
DV_API size_t dv_dtype_field_count(const dv_dtype *dt);
/** Field i of a record; the strings and dtype are borrowed from dt. */
DV_API dv_status dv_dtype_field(const dv_dtype *dt, size_t i, dv_field_desc *out);

/** @} */

/* ---- arrays ------------------------------------------------------------ */

/** @defgroup arrays Arrays
 *  Device and host arrays: creation, references, shape, strides and dtype.
 *  @{ */

/** Where an array's memory lives. */
typedef enum dv_memory_kind {
  DV_MEM_DEVICE = 0,   /**< device memory */
  DV_MEM_HOST = 1,     /**< pageable host memory (wrapped, or allocated by dv_copy_to_host) */
  DV_MEM_PINNED = 2,   /**< page-locked host memory */
  DV_MEM_MAPPED = 3,   /**< host memory that the device can address */
  DV_MEM_MANAGED = 4   /**< managed (unified) memory */
} dv_memory_kind;

/** Flag for dv_mapped_array: mapped in every context (passed to the driver where it has it). */
#define DV_MAPPED_PORTABLE 0x1u
/** Flag for dv_mapped_array: write-combined memory (passed to the driver where it has it). */
#define DV_MAPPED_WRITECOMBINED 0x2u

/**
 * A new uninitialised device array.  shape has ndim entries (ndim 0 gives a
 * 0-d array); dtype numeric or record; strides NULL for dense `order`
 * ('C' or 'F'), else ndim byte strides (possibly negative or zero); the
 * allocation is sized to span every element they reach.  Size 0 allocates
 * nothing.  Errors: DV_ERR_NULL_ARGUMENT, DV_ERR_BAD_SHAPE (negative extent
 * or ndim outside 0..DV_MAXDIMS), DV_ERR_BAD_ORDER, DV_ERR_BAD_STRIDES (a
 * stride that is not a multiple of the dtype's alignment), DV_ERR_OVERFLOW
 * (the size or the strides' byte span; as in NumPy, the product of the
 * non-zero extents times the itemsize must fit int64_t even beside a zero
 * extent, whatever the strides), DV_ERR_OUT_OF_MEMORY (after one
 * flush-and-retry).
 * stream: the stream the memory is for (NULL: the default stream); with
 * a stream-ordered manager (the pool) its free is ordered after that
 * stream's work, and after work queued on other streams that used it (see
 * "Memory managers").  The direct manager ignores it.
 */
DV_API dv_status dv_device_array(dv_context *ctx, int ndim, const int64_t *shape,
                                 const dv_dtype *dtype, const int64_t *strides, char order,
                                 dv_stream *stream, dv_array **out);
/**
 * A new uninitialised device array shaped like `a` (on a's context).  C- or
 * F-contiguous sources (or ndim <= 1) get a dense copy of the layout (F only
 * if F- and not C-contiguous); others get dense strides in the source's
 * stride order.
 */
DV_API dv_status dv_device_array_like(const dv_array *a, dv_stream *stream, dv_array **out);
/** A new 0-d device array of record dtype (Numba's DeviceRecord). */
DV_API dv_status dv_device_record(dv_context *ctx, const dv_dtype *dtype, dv_stream *stream,
                                  dv_array **out);
/**
 * Describe caller-owned host memory as an array (no copy; devarray never
 * frees it).  `data` points at element [0,...,0]; strides NULL means C order.
 * The caller keeps the memory alive while the array or any view of it lives.
 */
DV_API dv_status dv_host_array_wrap(dv_context *ctx, void *data, int ndim, const int64_t *shape,
                                    const dv_dtype *dtype, const int64_t *strides, dv_array **out);
/** A new pageable host array owned by devarray (freed when the last reference goes). */
DV_API dv_status dv_host_array(dv_context *ctx, int ndim, const int64_t *shape,
                               const dv_dtype *dtype, const int64_t *strides, char order,
                               dv_array **out);
/** A new page-locked host array (its free is queued at 0 bytes); from the
 *  pinned pool when the option pinned_pool is on (@ref pinnedpool). */
DV_API dv_status dv_pinned_array(dv_context *ctx, int ndim, const int64_t *shape,
                                 const dv_dtype *dtype, const int64_t *strides, char order,
                                 dv_array **out);
/**
 * A new mapped host array: host memory the device can address.  It behaves
 * as a host array for copies and dv_array_host_data; flags DV_MAPPED_PORTABLE
 * and DV_MAPPED_WRITECOMBINED go to the driver.  DV_ERR_NOT_SUPPORTED when the
 * device cannot map host memory.  Its free is queued with its bytes.
 */
DV_API dv_status dv_mapped_array(dv_context *ctx, int ndim, const int64_t *shape,
                                 const dv_dtype *dtype, const int64_t *strides, char order,
                                 unsigned flags, dv_array **out);

/**
 * A new managed (unified) array: one allocation addressable from the host
 * and the device (CUDA's cuMemAllocManaged; attach_global != 0 for
 * CU_MEM_ATTACH_GLOBAL, 0 for host attach).  dv_array_host_data gives its
 * host address; the host may read it only after a synchronize of the work
 * that wrote it.  Its free is queued with its bytes.  DV_ERR_NOT_SUPPORTED
 * on backends and devices without managed memory.
 */
DV_API dv_status dv_managed_array(dv_context *ctx, int ndim, const int64_t *shape,
                                  const dv_dtype *dtype, const int64_t *strides, char order,
                                  int attach_global, dv_array **out);

/**
 * Where managed memory is prefetched to (dv_array_prefetch), or the
 * processor an advice names (dv_array_advise).  Only these two values are
 * accepted; any other is DV_ERR_INVALID_ARGUMENT.
 */
typedef enum dv_location {
  DV_LOCATION_HOST = -1,  /**< the host's memory (CUDA's CU_DEVICE_CPU, HIP's hipCpuDeviceId) */
  DV_LOCATION_DEVICE = 0  /**< the device of the array's context (whatever its ordinal) */
} dv_location;

/**
 * A hint about how managed memory will be used (dv_array_advise): CUDA's
 * CUmem_advise and HIP's hipMemoryAdvise, with their values.
 */
typedef enum dv_mem_advice {
  DV_MEM_ADVISE_SET_READ_MOSTLY = 1,          /**< mostly read: processors that read it may keep a copy */
  DV_MEM_ADVISE_UNSET_READ_MOSTLY = 2,        /**< undo SET_READ_MOSTLY (the copies collapse to one) */
  DV_MEM_ADVISE_SET_PREFERRED_LOCATION = 3,   /**< keep the pages at `where` when possible */
  DV_MEM_ADVISE_UNSET_PREFERRED_LOCATION = 4, /**< no preferred location */
  DV_MEM_ADVISE_SET_ACCESSED_BY = 5,          /**< `where` will access it: keep it mapped there */
  DV_MEM_ADVISE_UNSET_ACCESSED_BY = 6         /**< undo SET_ACCESSED_BY for `where` */
} dv_mem_advice;

/**
 * Prefetch the bytes of managed array a to `where` (DV_LOCATION_HOST or
 * DV_LOCATION_DEVICE), queued on `stream` as the other work of a stream is
 * (CUDA's cuMemPrefetchAsync, HIP's hipMemPrefetchAsync).  The range is the
 * array's own bytes: for a view, from the lowest to the highest byte one of
 * its elements touches (the driver widens it to whole pages).  A hint: the
 * data stays coherent and readable wherever it is; the prefetch only moves
 * pages before they are needed.
 * Size 0: checked, nothing queued.  Releasing a meanwhile frees its memory
 * after the prefetch, as after a copy (dv_array_release).
 * Errors (nothing queued): DV_ERR_NULL_ARGUMENT; DV_ERR_INVALID_ARGUMENT
 * (a is not managed memory: the message names its memory kind; `where` is
 * neither location); DV_ERR_BACKEND_MISMATCH (a stream of another
 * context); DV_ERR_NOT_SUPPORTED (prefetching to the device where the
 * device has no concurrent managed access, CUDA's
 * CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS = 0: the driver refuses
 * it there; or a driver without the call); DV_ERR_MISUSE (from a stream
 * callback, or on a stream capturing a graph: a graph has no prefetch
 * node); the driver's failures as DV_ERR_DRIVER or the status their
 * code maps to, with the driver's name of the call.  Backends without
 * managed memory (host, OpenCL) have no managed arrays, so every call
 * there is DV_ERR_INVALID_ARGUMENT for the array's kind.
 * Blocking: with stream NULL (the default stream) returns once the
 * prefetch is done, as every NULL-stream call does; with a stream, returns
 * once it is queued.  Thread-safe.
 */
DV_API dv_status dv_array_prefetch(const dv_array *a, dv_location where, dv_stream *stream);

/**
 * Advise the driver how managed array a will be used (CUDA's cuMemAdvise,
 * HIP's hipMemAdvise) over the same range as dv_array_prefetch.  `where`
 * names the processor for SET_PREFERRED_LOCATION and SET/UNSET_ACCESSED_BY;
 * it is checked for the others too, which ignore it.  Not stream-ordered: the advice applies to the range
 * from the call on, for the work already queued too (the driver's rule).
 * Size 0: checked, nothing done.
 * Errors: DV_ERR_NULL_ARGUMENT; DV_ERR_INVALID_ARGUMENT (not managed
 * memory, naming its kind; an unknown advice or location);
 * DV_ERR_NOT_SUPPORTED (an advice naming the device, DV_LOCATION_DEVICE
 * with SET_PREFERRED_LOCATION or SET/UNSET_ACCESSED_BY, where the device
 * has no concurrent managed access; a driver without the call);
 * DV_ERR_MISUSE (from a stream callback); the driver's failures.
 * Blocking: does not wait for any stream.  Thread-safe.
 */
DV_API dv_status dv_array_advise(const dv_array *a, dv_mem_advice advice, dv_location where);

/** Add a reference to a and return a (NULL: returns NULL).  Thread-safe. */
DV_API dv_array *dv_array_retain(dv_array *a);
/** Drop a reference.  The memory is freed (through the deferred queue for
 *  device memory) when the last view of it goes; queued work that still uses
 *  it completes first, on whatever stream of the context it was queued: with
 *  a stream-ordered manager (the pool) the stream the memory was allocated
 *  for already waits for every copy, memset, element access, launch or
 *  constant upload queued on another stream (an event), so the block is not
 *  handed out again before that work is done.  NULL is a no-op.  A release
 *  after the last one (a double release) is reported as DV_ERR_MISUSE in
 *  dv_last_error and logged, and changes nothing (see "Released handles"). */
DV_API void dv_array_release(dv_array *a);

/** Number of dimensions (0 for a 0-d array). */
DV_API int dv_array_ndim(const dv_array *a);
/** The shape and strides arrays (ndim entries, borrowed from a; NULL for 0-d). */
DV_API const int64_t *dv_array_shape(const dv_array *a);
/** The byte strides (ndim entries, borrowed from a; NULL for 0-d); see dv_array_shape(). */
DV_API const int64_t *dv_array_strides(const dv_array *a);
/** The element type (borrowed from a: retain it to keep it longer than a). */
DV_API const dv_dtype *dv_array_dtype(const dv_array *a);
/** Number of elements (1 for 0-d). */
DV_API int64_t dv_array_size(const dv_array *a);
/** size * itemsize. */
DV_API int64_t dv_array_nbytes(const dv_array *a);
/** Where the memory lives; views share their base's kind. */
DV_API dv_memory_kind dv_array_memory(const dv_array *a);
/** The context the array was created on (not a new reference). */
DV_API dv_context *dv_array_context(const dv_array *a);
/**
 * 1 when a is C-contiguous, else 0.  NumPy's relaxed contiguity (0-d and
 * size 0 are both C and F; size-1 dims ignored).
 */
DV_API int dv_array_is_c_contiguous(const dv_array *a);
/** 1 when a is F-contiguous, else 0; see dv_array_is_c_contiguous(). */
DV_API int dv_array_is_f_contiguous(const dv_array *a);
/**
 * Host address of element [0,...,0] of a host, pinned, mapped or managed
 * array.  DV_ERR_MISUSE for device arrays (copy them instead).
 */
DV_API dv_status dv_array_host_data(const dv_array *a, void **ptr);

/** @} */

/* ---- views ------------------------------------------------------------- */

/** @defgroup views Views
 *  Slicing, element access, reshape, ravel and split, NumPy's way; no data moves for a view.
 *  @{ */

/** Sentinel for "omitted" slice start/stop (Python's None). */
#define DV_NONE INT64_MIN

/** The kind of a dv_index entry: DV_IDX_SLICE (a slice) or DV_IDX_INT (an integer). */
typedef enum dv_index_kind { DV_IDX_SLICE = 0, DV_IDX_INT = 1 } dv_index_kind;
/** One entry of an index: a slice (start, stop, step) or an integer. */
typedef struct dv_index {
  dv_index_kind kind;        /**< which of the two the entry is */
  /** Slice: DV_NONE for an omitted start or stop; step != 0. @{ */
  int64_t start, stop, step;
  /** @} */
  int64_t index;             /**< integer: negative counts from the end */
} dv_index;
/** The slice a:b:s (Python's `a:b:s`; DV_NONE for an omitted bound). */
#define DV_SLICE(a, b, s) ((dv_index){DV_IDX_SLICE, (a), (b), (s), 0})
/** The whole dimension (Python's `:`). */
#define DV_ALL ((dv_index){DV_IDX_SLICE, DV_NONE, DV_NONE, 1, 0})
/** The integer index i (negative counts from the end); its dimension is dropped. */
#define DV_AT(i) ((dv_index){DV_IDX_INT, 0, 0, 1, (i)})

/**
 * A view: nidx entries index the first nidx dimensions (NumPy basic
 * indexing); the remaining dimensions are kept whole.  Slices follow Python
 * (negative values count from the end, out-of-range clamps, empty ranges
 * allowed); integers drop their dimension.  Errors: DV_ERR_BAD_STEP (step 0),
 * DV_ERR_INDEX (integer out of range), DV_ERR_TOO_MANY_INDICES.  The view
 * keeps a's memory alive.  No data moves; works for any memory kind.
 */
DV_API dv_status dv_array_slice(const dv_array *a, int nidx, const dv_index *idx, dv_array **out);
/**
 * Read one element: a full integer index (ndim entries) copies the element
 * to out (outsize must be >= itemsize).  Synchronous when stream is NULL.
 */
DV_API dv_status dv_array_get_item(const dv_array *a, const int64_t *index, void *out,
                                   size_t outsize, dv_stream *stream);
/** Write one element from `value` (size >= itemsize bytes). */
DV_API dv_status dv_array_set_item(dv_array *a, const int64_t *index, const void *value,
                                   size_t size, dv_stream *stream);

/** Flag for dv_array_reshape / dv_array_ravel: fail with DV_ERR_COPY_NEEDED rather than copy. */
#define DV_VIEW_ONLY 0x1u

/**
 * Reshape to `shape` (one entry may be -1) reading elements in `order`
 * ('C', 'F', or 'A': F when a is F- and not C-contiguous).  Returns a view
 * whenever NumPy would (NumPy's no-copy rule, any strides); otherwise a new
 * device array filled on the device (in stream order), unless DV_VIEW_ONLY is
 * given, which fails with DV_ERR_COPY_NEEDED.  Errors: DV_ERR_BAD_SHAPE (two
 * -1, extent < -1, cannot infer), DV_ERR_RESHAPE_SIZE, DV_ERR_BAD_ORDER,
 * DV_ERR_OVERFLOW (the new shape's non-zero extents, or their bytes, past
 * int64_t: possible only for an empty array).
 */
DV_API dv_status dv_array_reshape(const dv_array *a, int ndim, const int64_t *shape, char order,
                                  unsigned flags, dv_stream *stream, dv_array **out);
/** 1-D view when `order` matches a's contiguity ('A' matches either), else a copy (or DV_ERR_COPY_NEEDED). */
DV_API dv_status dv_array_ravel(const dv_array *a, char order, unsigned flags, dv_stream *stream,
                                dv_array **out);
/**
 * Split a 1-D unit-stride array into ceil(size/section) views, the last one
 * shorter.  With views == NULL only *count is set.  Otherwise views must
 * hold cap entries (those not filled are set to NULL, all of them on
 * failure); DV_ERR_INVALID_ARGUMENT if cap is too small.  Other
 * layouts are DV_ERR_INVALID_ARGUMENT (Numba's contract); section <= 0 too.
 */
DV_API dv_status dv_array_split(const dv_array *a, int64_t section, dv_array **views, size_t cap,
                                size_t *count);

/** @} */

/* ---- records ----------------------------------------------------------- */

/** @defgroup records Records
 *  Fields of record arrays as views; fields of one record read and written.
 *  @{ */

/**
 * The view of field `name` of a record array (any ndim): a scalar field
 * gives an array of the field's dtype with a's shape; a nested record a
 * record array; a sub-array field appends its shape (C order).
 * DV_ERR_UNKNOWN_FIELD for a name that is not there, DV_ERR_BAD_DTYPE if a is
 * not a record array.
 */
DV_API dv_status dv_array_field(const dv_array *a, const char *name, dv_array **out);
/** Copy field `name` of a 0-d record to out (size >= the field's bytes). */
DV_API dv_status dv_record_get(const dv_array *rec, const char *name, void *out, size_t size,
                               dv_stream *stream);
/** Set field `name` of a 0-d record from value (size >= the field's bytes). */
DV_API dv_status dv_record_set(dv_array *rec, const char *name, const void *value, size_t size,
                               dv_stream *stream);

/** @} */

/* ======================================================================== */
/* Transfers                                                                 */
/* ======================================================================== */

/**
 * @defgroup transfers Transfers
 *
 * Copies between any two arrays, host or device, whatever their layouts.
 *
 * Argument order, one rule for every function here (Numba's): the array
 * the operation belongs to comes first, as `self` does in the Numba method
 * it mirrors; the other arguments follow in that method's order, and
 * out-parameters come last.  So dv_copy_to_host(src, dst, ...) is Numba's
 * `src.copy_to_host(dst)` and takes the device source first, while
 * dv_copy_to_device(dst, src, ...) is `dst.copy_to_device(src)` and takes
 * the device destination first.  dv_array_copy(dst, src, ...), the general
 * form of both, has no Numba method: it reads as copy_to_device does, into
 * its first argument (as memcpy).  dv_array_memset and dv_array_copy_new act
 * on their first argument.  dv_to_device mirrors the module function
 * `cuda.to_device(obj, stream, copy, to)`, so the context comes first.
 *
 * Pageable host memory on CUDA and HIP is copied through pinned staging
 * buffers, in pieces, on the copy's stream; the options staging_* set
 * the pieces, the buffers and the threads (docs/semantics.md, "Backend
 * policy: pageable copies on CUDA and HIP").  Pinned, mapped and registered
 * host memory (dv_pinned_array, dv_array_register, ...) is copied directly.
 * @{
 */

/**
 * Copy `src` into a device array of ctx.  When src is already a device array
 * of ctx it is returned (retained) unchanged, as Numba does; a device array of
 * another context (another device or backend) is copied through host
 * staging.  With `to` != NULL, the data
 * is copied into `to` (dtypes must be equal: DV_ERR_DTYPE_MISMATCH; shapes
 * equal after dropping size-1 dims: DV_ERR_SHAPE_MISMATCH) and `to` is
 * returned retained in *out (out may be NULL then).  With copy == 0 a new
 * array is allocated like src but not filled.  Any strided host view works,
 * negative and zero strides included.
 */
DV_API dv_status dv_to_device(dv_context *ctx, const dv_array *src, dv_stream *stream, int copy,
                              dv_array *to, dv_array **out);
/**
 * Copy a device array to the host.  With dst != NULL (host, pinned or mapped
 * array) exactly src's elements go into exactly dst's elements, whatever
 * either side's strides; *out (may be NULL) gets dst retained.  With dst ==
 * NULL a new host array with src's dense layout is allocated and returned.
 * DV_ERR_DTYPE_MISMATCH / DV_ERR_SHAPE_MISMATCH as for dv_to_device.
 */
DV_API dv_status dv_copy_to_host(const dv_array *src, dv_array *dst, dv_stream *stream,
                                 dv_array **out);
/** Copy src (host or device, any layout) into the device array dst.  Size 0 is a no-op. */
DV_API dv_status dv_copy_to_device(dv_array *dst, const dv_array *src, dv_stream *stream);
/**
 * Copy between any two arrays (host or device, any layouts).  Views of the
 * same memory may be copied when no byte is shared, however their rows
 * interleave; views that share a byte are DV_ERR_INVALID_ARGUMENT on every
 * backend (copy through a temporary array instead).  The general form of
 * the three above.  Arrays of two
 * different contexts (two devices, or two backends such as opencl and host)
 * are copied through a host staging buffer; such a copy is synchronous on the
 * source's side, and `stream` must belong to the destination's context
 * (DV_ERR_BACKEND_MISMATCH otherwise).
 */
DV_API dv_status dv_array_copy(dv_array *dst, const dv_array *src, dv_stream *stream);
/** Set every byte of every element of a device or host array to `value`. */
DV_API dv_status dv_array_memset(dv_array *a, int value, dv_stream *stream);
/**
 * A new dense copy of a, laid out in `order` ('C' or 'F'; DV_ERR_BAD_ORDER
 * otherwise), on a's context: a device array when a is device or managed
 * memory, a pageable host array owned by devarray when a is host, pinned or
 * mapped memory.
 */
DV_API dv_status dv_array_copy_new(const dv_array *a, char order, dv_stream *stream, dv_array **out);

/** @} */

/* ======================================================================== */
/* Host memory: pinned, mapped, registered                                   */
/* ======================================================================== */

/** @defgroup hostmem Host memory scopes
 *  Pinning (page-locking), mapping and registering host arrays that already exist.
 *  @{ */

/**
 * Register (page-lock) the memory of host arrays for the scope's life.  At
 * dv_scope_end the memory is unregistered at once, even inside a
 * defer-cleanup scope.  Arrays already pinned/mapped are left as they are.
 * On failure nothing stays registered.
 */
DV_API dv_status dv_pinned_scope_begin(dv_context *ctx, size_t n, dv_array *const *arrays,
                                       dv_scope **scope);
/**
 * Map host arrays into the device's address space for the scope's life.
 * device_views[i] receives a device-kind array over the same memory (owned
 * by the caller; release them before or after dv_scope_end; after the end
 * they must not be used).  DV_ERR_NOT_SUPPORTED if the device cannot map.
 */
DV_API dv_status dv_mapped_scope_begin(dv_context *ctx, size_t n, dv_array *const *arrays,
                                       dv_array **device_views, dv_scope **scope);
/** End a pinned or mapped scope (unregisters immediately).  NULL is a no-op. */
DV_API dv_status dv_scope_end(dv_scope *scope);
/** Register (ROC's register) a host array's memory until dv_array_unregister. */
DV_API dv_status dv_array_register(dv_array *a);
/**
 * Undo dv_array_register (ROC's deregister): waits for the work queued on
 * the array's context, then drops the registration.  DV_OK for memory that
 * is natively pinned; DV_ERR_MISUSE if it is not registered.
 */
DV_API dv_status dv_array_unregister(dv_array *a);
/** Deprecated: the old name of dv_array_unregister (same behaviour). */
DV_API dv_status dv_array_deregister(dv_array *a);
/** 1 when the host array's memory is pinned, mapped or registered. */
DV_API int dv_array_is_pinned(const dv_array *a);

/** @} */

/* ======================================================================== */
/* Streams and events                                                        */
/* ======================================================================== */

/** @defgroup streams Streams and events
 *  Ordering, waiting and timing of asynchronous work.
 *  @{ */

/** Flag for dv_stream_create: the stream does not synchronize with the legacy default stream. */
#define DV_STREAM_NON_BLOCKING 0x1u

/** A new in-order stream.  Released through the deferred queue. */
DV_API dv_status dv_stream_create(dv_context *ctx, unsigned flags, dv_stream **out);
/** Add a reference to s and return s (a no-op for the context's default stream). */
DV_API dv_stream *dv_stream_retain(dv_stream *s);
/** Drop a reference; queued work still completes.  The default stream is never released.
 *  A release after the last one is reported (DV_ERR_MISUSE in dv_last_error, logged) and
 *  changes nothing; a released stream passed to any function is DV_ERR_MISUSE in checked
 *  mode (see "Released handles"). */
DV_API void dv_stream_release(dv_stream *s);
/** Block until all work queued on s is complete.  Returns the first error a queued op hit since the last synchronize. */
DV_API dv_status dv_stream_synchronize(dv_stream *s);
/** DV_OK if all queued work is complete, DV_ERR_NOT_READY if not.  Never blocks. */
DV_API dv_status dv_stream_query(dv_stream *s);

/**
 * A stream callback.  `status` is DV_OK, or an error that earlier work on the
 * stream hit (CUDA and HIP pass the driver's status for the stream; a device
 * fault reads DV_ERR_DEVICE_LOST); dv_stream_synchronize reports such errors
 * in any case.
 */
typedef void (*dv_callback_fn)(dv_stream *stream, dv_status status, void *user);
/**
 * Call fn(stream, status, user) once all work queued before it is complete,
 * on a thread of the library's choosing; work queued on the stream after the
 * callback waits until fn returns.  fn must not block on the stream (wait
 * for a thread that waits for it), and must not release the last reference
 * to an array, stream or event: a release returns no status, so the free it
 * may start cannot be refused as below, and as with CUDA's host functions it
 * could wait on the very stream that runs fn.
 *
 * CUDA's rule, on every backend: no call of the driver inside a callback.
 * Every devarray call fn makes that would reach the device's driver is
 * refused with DV_ERR_MISUSE before anything is asked or changed, on the
 * host simulator, OpenCL, CUDA and HIP alike (never deferred: the call
 * returns at once; dv_last_error names the function, or the kind of work): anything that copies,
 * sets memory, launches, uploads constants or reads or writes elements;
 * allocates device, pinned, mapped or managed memory or registers host
 * memory (scopes included); creates, queries, records, waits for or
 * synchronizes streams and events, or adds a callback; builds a module or
 * gets a kernel; imports or exports DLPack or IPC handles, wraps native
 * memory; creates, destroys or synchronizes a context, or asks it for device
 * or memory information.  Calls that do not reach the driver work: array
 * metadata and views (shape, strides, dtype, slices, fields), dtypes,
 * statistics and options, the context's streams, native handles, host
 * arrays, dv_status_name and dv_last_error.  To act on a callback, signal
 * another thread from fn and make the call there.  The rule holds on the
 * thread that runs fn, while fn runs; other threads are not affected.
 *
 * On a stream capturing a graph through dv_graph_capture_begin the callback
 * is recorded as a host node of the graph: fn runs at each launch, with
 * status DV_OK (a graph's host nodes do not see the stream's errors).  On a
 * CUDA or HIP stream that captures outside devarray (the native stream under
 * cuStreamBeginCapture, or the legacy stream while a blocking stream
 * captures), DV_ERR_MISUSE and nothing queued: the driver cannot capture
 * stream callbacks, and asking it would invalidate the capture.  Copies that devarray stages through host callbacks (host to
 * host on a stream, pageable host memory) are refused there the same way.
 */
DV_API dv_status dv_stream_add_callback(dv_stream *s, dv_callback_fn fn, void *user);
/**
 * Auto-synchronize scope (Numba's stream.auto_synchronize()): end
 * synchronizes the stream.  They nest; each end synchronizes.
 */
DV_API dv_status dv_stream_auto_sync_begin(dv_stream *s);
/**
 * Close the innermost auto-synchronize scope of s and synchronize it (its
 * status is returned).  DV_ERR_MISUSE without a matching begin.
 */
DV_API dv_status dv_stream_auto_sync_end(dv_stream *s);

/** Flag for dv_event_create: the event records times (dv_event_elapsed_ms). */
#define DV_EVENT_TIMING 0x1u
/** A new event; with DV_EVENT_TIMING it records times for dv_event_elapsed_ms. */
DV_API dv_status dv_event_create(dv_context *ctx, unsigned flags, dv_event **out);
/** Add a reference to e and return e (NULL: NULL).  Thread-safe; never blocks. */
DV_API dv_event *dv_event_retain(dv_event *e);
/**
 * Drop a reference to e; the last one destroys the event through the
 * deferred queue (a pending record completes).  NULL: no-op.  Thread-safe.
 * A release after the last one is reported (DV_ERR_MISUSE in dv_last_error,
 * logged) and changes nothing (see "Released handles").
 */
DV_API void dv_event_release(dv_event *e);
/** Record e on s (NULL: the default stream).  Re-recording replaces the earlier record. */
DV_API dv_status dv_event_record(dv_event *e, dv_stream *s);
/** Make stream s wait (on the device side) for e's last record.  Never blocks the host. */
DV_API dv_status dv_stream_wait_event(dv_stream *s, dv_event *e);
/** DV_OK when e's record has completed (or e was never recorded), DV_ERR_NOT_READY otherwise. */
DV_API dv_status dv_event_query(dv_event *e);
/** Block until e's last record completes. */
DV_API dv_status dv_event_synchronize(dv_event *e);
/** Milliseconds between two completed timing events.  DV_ERR_NOT_READY if either is pending. */
DV_API dv_status dv_event_elapsed_ms(dv_event *start, dv_event *end, float *ms);

/** @} */

/** @defgroup graphs Graphs: capture and replay
 *
 * A stream's work, captured once and launched any number of times.
 * Between dv_graph_capture_begin(s) and dv_graph_capture_end(s) the work
 * queued on s is recorded, not run: copies, memsets, kernel launches,
 * constant uploads, event records and host callbacks
 * (dv_stream_add_callback).  dv_graph_instantiate makes the graph ready;
 * each dv_graph_launch queues all of it on a stream, with the arrays and
 * scalars it was captured with: a launch reads and writes the same memory
 * each time, the current contents of it.
 *
 * On CUDA and HIP this is the driver's stream capture
 * (cuStreamBeginCapture in relaxed mode, cuGraphInstantiate, cuGraphLaunch;
 * HIP's); on the host simulator and OpenCL a recorded list of the backend's
 * own calls, replayed without the planning and argument checks the layers
 * above made at capture (OpenCL's command buffers are not used).
 *
 * What a graph uses lives as long as the graph: the allocations of the
 * arrays its work uses (releasing an array during or after the capture
 * frees nothing while the graph, or a launch of it, needs the memory),
 * the modules of its launches, the events it records, the records of its
 * callbacks.  Each launch orders the streams that own the memory (the
 * pool's allocation streams) after itself, as a copy or launch does.
 *
 * What cannot be captured is refused with DV_ERR_MISUSE before anything is
 * queued or recorded, and the capture goes on: dv_stream_synchronize and
 * dv_stream_query of the capturing stream; work with pageable host memory
 * (host arrays that are not registered: CUDA's rule, on every backend);
 * copies staged through host memory, copies between views that may share
 * memory, memsets of views that are not dense; copies between contexts,
 * element and field access (dv_array_get_item, dv_record_get, ...),
 * constant uploads from host memory; launches with host or smart array
 * arguments; an allocation for the capturing stream from the "async"
 * manager (its memory would be the graph's).  dv_stream_wait_event on the capturing stream is
 * DV_ERR_NOT_SUPPORTED (a graph captures one stream's work).  A graph cannot
 * be launched on a stream that is capturing.
 *
 * Threads: a capturing stream is used by one thread at a time; graphs and
 * executable graphs may be launched from several threads at once.  None of
 * these may be called from a stream callback (DV_ERR_MISUSE).
 *  @{ */

/**
 * Start capturing the work queued on s (a stream made by dv_stream_create;
 * not the context's default, legacy or per-thread stream, which devarray's
 * synchronous calls use: DV_ERR_INVALID_ARGUMENT).  DV_ERR_MISUSE if s
 * captures already; DV_ERR_NOT_SUPPORTED if the backend has no graphs (a
 * CUDA or HIP driver without the entry points).  Work queued on s before
 * stays queued and runs as usual.  Never blocks.
 */
DV_API dv_status dv_graph_capture_begin(dv_stream *s);
/**
 * End s's capture: *out the graph of what was captured (the caller's
 * reference; an empty capture is a graph with no work).  The capture ends
 * whatever the status; on failure (DV_ERR_MISUSE: s does not capture; the
 * driver's own error) *out is NULL and what was captured is dropped.
 */
DV_API dv_status dv_graph_capture_end(dv_stream *s, dv_graph **out);
/** Work items the graph holds (copies, memsets, launches, records, callbacks). */
DV_API dv_status dv_graph_work_count(const dv_graph *g, size_t *n);
/** Add a reference to g and return g (NULL: NULL). */
DV_API dv_graph *dv_graph_retain(dv_graph *g);
/**
 * Drop a reference to g.  The context is DV_ERR_BUSY for dv_context_destroy
 * while a graph lives.  The last one (the graph's executables hold one
 * each) lets go of what the graph kept alive; if the graph was launched,
 * it first waits for the context's device (the callbacks' records must
 * outlive every launch).  NULL: DV_OK.  DV_ERR_MISUSE from a stream
 * callback (nothing released).
 */
DV_API dv_status dv_graph_release(dv_graph *g);
/**
 * Make g ready to launch: *out holds a reference to g.  The driver's
 * instantiation errors are returned as they are (DV_ERR_DRIVER with its
 * message); DV_ERR_HOST_OUT_OF_MEMORY.  Never blocks.
 */
DV_API dv_status dv_graph_instantiate(dv_graph *g, dv_graph_exec **out);
/**
 * Queue all of e's work on s (NULL: the default stream, and wait for it, as
 * every devarray call with a NULL stream does).  s is a stream of e's
 * context that is not capturing (DV_ERR_BACKEND_MISMATCH, DV_ERR_MISUSE).
 * Errors of the work itself come as they would from the same calls: at
 * dv_stream_synchronize, or at once.  A launch that fails part way leaves
 * the work before the failure queued.
 */
DV_API dv_status dv_graph_launch(dv_graph_exec *e, dv_stream *s);
/**
 * Destroy e (launches already queued complete) and drop its reference to
 * its graph.  NULL: DV_OK.  DV_ERR_MISUSE from a stream callback.
 */
DV_API dv_status dv_graph_exec_destroy(dv_graph_exec *e);

/** @} */

/* ======================================================================== */
/* Memory managers and statistics                                            */
/* ======================================================================== */

/* ---- statistics -------------------------------------------------------- */

/** @defgroup stats Statistics
 *  Per-context counters of memory, queues and transfers, as a struct or as JSON.
 *  @{ */

/** One counter: what is held now, the most ever held, everything ever added. */
typedef struct dv_counter {
  uint64_t current; /**< bytes (or objects) held now */
  uint64_t peak;    /**< highest value of current */
  uint64_t total;   /**< sum of everything ever added */
} dv_counter;

/** The version of dv_stats this header describes (fields are only ever appended). */
#define DV_STATS_VERSION 3
/**
 * Counters of one context (dv_context_stats).  The struct grows at its end
 * from version to version: `size` tells the library how much of it the
 * caller has, `version` tells the caller which fields were filled.  Declare
 * it as `dv_stats st = {.size = sizeof st};`.
 */
typedef struct dv_stats {
  uint32_t size;      /**< in: sizeof(dv_stats) as the caller knows it; out: the bytes filled */
  uint32_t version;   /**< out: the version of the fields filled (DV_STATS_VERSION, or older) */
  dv_counter device;  /**< device memory bytes (allocated through the memory manager) */
  dv_counter pinned;  /**< pinned host memory bytes */
  dv_counter mapped;  /**< mapped host memory bytes */
  dv_counter registered; /**< registered (pinned-in-place) host bytes */
  dv_counter managed; /**< managed memory bytes */
  dv_counter arrays;  /**< live array descriptors (count) */
  uint64_t pending_deallocs;      /**< entries in the deallocation queue now */
  uint64_t pending_bytes;         /**< bytes those entries will free */
  uint64_t pending_peak;          /**< deepest the queue has been */
  uint64_t flushes;               /**< queue flushes performed */
  uint64_t oom_retries;           /**< allocations retried after out-of-memory */
  uint64_t failed_frees;          /**< frees that reported an error */
  uint64_t copies;                /**< transfer operations issued to the backend */
  uint64_t staged_copies;         /**< transfers that went through a staging buffer */
  /** Element bytes moved, host to device, device to host, device to device. @{ */
  uint64_t bytes_h2d, bytes_d2h, bytes_d2d;
  /** @} */
  /* appended in version 2 */
  /** Pinned staging bytes held (cached or in use): the planner's pool and,
   * on CUDA and HIP, the pageable path's buffers (staging_limit). */
  dv_counter staging;
  /** Staging buffers reused from the pool / newly pinned. @{ */
  uint64_t staging_hits, staging_misses;
  /** @} */
  /* appended in version 3 */
  /**
   * Transfers by direction, host to device, device to host, device to
   * device: one per copy the library makes for a caller, however many
   * backend operations (rows, chunks, staging phases) it takes.  A dv_*
   * copy call counts one; so does each array argument a launch copies in or
   * out, and each update of a smart array's copy.  Host-to-host copies count
   * in none.  A copy between two contexts counts a device-to-host on the
   * source's context and a host-to-device on the destination's; a copy
   * between views of one device buffer whose overlap cannot be decided goes
   * through host memory and counts one of each; a memset of a device view
   * that is not dense scatters a host pattern and counts one host to device.
   * The bytes_* counters above follow the same rules. @{ */
  uint64_t transfers_h2d, transfers_d2h, transfers_d2d;
  /** @} */
} dv_stats;

/**
 * Fill *out with the context's counters.  The caller sets out->size to the
 * size of its dv_stats (sizeof(dv_stats) in the header it was compiled
 * with).  The library fills the newest version of the struct that fits in
 * that size, so a program built against an older header keeps working, and
 * sets out->size to the bytes filled and out->version to their version;
 * bytes past them are not touched.  DV_ERR_INVALID_ARGUMENT when out->size is
 * smaller than the first version's struct (left 0, for instance); then the
 * out->size bytes the caller has are cleared, `size` aside.  Thread-safe;
 * does not wait for the device.  Every counter is exact for the calls that
 * happen before this one (the calling thread's, and those of threads it has
 * synchronized with, joined for instance); the copy counters are kept per
 * thread and summed here, so calls running meanwhile in other threads may
 * or may not be included.
 */
DV_API dv_status dv_context_stats(dv_context *ctx, dv_stats *out);
/**
 * The statistics as one JSON object, written to buf (NUL-terminated); the
 * length it needs (without the NUL) goes to *needed.  With buf == NULL or a
 * cap too small, nothing is written but *needed, and DV_ERR_INVALID_ARGUMENT
 * is returned when buf is not NULL.
 */
DV_API dv_status dv_context_stats_json(dv_context *ctx, char *buf, size_t cap, size_t *needed);

/** @} */

/* ---- deferred deallocation --------------------------------------------- */

/**
 * @defgroup deferred Deferred deallocation
 *
 * Releasing the last reference to device, mapped or managed memory queues
 * its free (with its bytes); pinned memory, streams and events are queued at
 * 0 bytes.  The queue is flushed inside the release that makes the count
 * strictly greater than `max_pending_deallocs_count` (default 10) or the
 * bytes strictly greater than `max_pending_deallocs_ratio` (default 0.2) of
 * total device memory.  A device allocation that fails for lack of memory
 * flushes the queue and retries once.  While a defer-cleanup scope is open no
 * flush happens.  A failing free is logged, counted, and does not stop the
 * other frees.  Both limits can be changed on a live context
 * (dv_context_set_dealloc_limits).
 * @{
 */

/** Open a defer-cleanup scope (they nest).  Thread-safe. */
DV_API dv_status dv_defer_cleanup_begin(dv_context *ctx);
/**
 * Close the innermost defer-cleanup scope.  Does not flush, even when it is
 * the outermost.  DV_ERR_MISUSE when no scope is open.
 */
DV_API dv_status dv_defer_cleanup_end(dv_context *ctx);
/**
 * Flush the pending-deallocation queue now (a no-op inside a defer-cleanup
 * scope).  Every queued free is attempted; the first failure's status is
 * returned, the others are logged.  Entries queued by the frees themselves
 * (releasing the last array bound to a stream releases the stream, which
 * queues it) are flushed too: the queue is drained until it is empty, as
 * Numba's deallocations.clear() does, for at most 64 rounds, so a free that
 * queues something every time cannot loop forever (what it left stays
 * queued).  Thread-safe; blocks while the frees run.
 */
DV_API dv_status dv_context_flush_deallocs(dv_context *ctx);
/** Entries and bytes waiting in the queue (either pointer may be NULL). */
DV_API dv_status dv_context_pending_deallocs(dv_context *ctx, size_t *count, size_t *bytes);
/**
 * Change the queue's limits on a live context: the count limit (the
 * option max_pending_deallocs_count, 0 to 1000000000) and the ratio of
 * total device memory (max_pending_deallocs_ratio, 0 to 1), what Numba's
 * CUDA_DEALLOCS_COUNT and CUDA_DEALLOCS_RATIO set.  Other contexts, and the
 * options of contexts created later, are unaffected.  The new limits are
 * checked at the next release that queues a free, as Numba checks its
 * config at each one: lowering them below what is queued flushes then, not
 * here; this call never runs a free and never waits.  dv_context_option
 * reports the new values (source DV_SOURCE_API).  DV_ERR_INVALID_ARGUMENT,
 * with nothing changed, for a count above 1000000000 or a ratio outside 0
 * to 1 (NaN included).  Thread-safe.
 */
DV_API dv_status dv_context_set_dealloc_limits(dv_context *ctx, size_t max_count, double max_ratio);
/**
 * The context's queue limits now: the count limit, the ratio, and the byte
 * limit the ratio gives (total device memory x ratio, rounded down, as
 * Numba's _max_pending_bytes).  Any pointer may be NULL.  Thread-safe,
 * non-blocking.
 */
DV_API dv_status dv_context_dealloc_limits(dv_context *ctx, size_t *max_count, double *max_ratio,
                                           size_t *max_bytes);

/** @} */

/* ---- memory managers and the pool -------------------------------------- */

/**
 * @defgroup managers Memory managers
 *
 * A memory manager decides how device memory is obtained for arrays.  Three
 * are built in: "direct" (every allocation is a driver allocation, every free
 * a driver free), "pool" (devarray's stream-ordered caching allocator) and
 * "async" (the driver's own stream-ordered pool, below).  The option
 * `memory_manager` (DV_MEMORY_MANAGER) picks one by name per context;
 * dv_config_set_memory_manager plugs in another one.  Frees still pass
 * through the pending-deallocation queue first (Numba's behaviour), then
 * reach the manager.
 *
 * "async" (CUDA and HIP; RMM's cuda_async_memory_resource, CuPy's
 * MemoryAsyncPool): every allocation is cuMemAllocFromPoolAsync
 * (hipMallocFromPoolAsync) on the array's stream, every free cuMemFreeAsync
 * (hipFreeAsync) queued on that stream when the pending-deallocation queue
 * runs; the driver caches and reuses.  Option `async_pool` names the pool:
 * "private" (the default: one made for the context with cuMemPoolCreate and
 * destroyed with it), "default" (the device's default pool) or "current"
 * (the device's current pool: memory shared with whichever library made its
 * own pool current, cuDeviceSetMemPool).  Option `async_release_threshold`
 * (bytes) is the pool's CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: what it keeps
 * reserved at each stream, event or context synchronization, the rest going
 * back to the device (default 2^50: everything kept until dv_memory_trim);
 * set on a private pool always, on a default or current one only when the
 * option is given (another library's setting is left alone otherwise).
 * Statistics: `allocated` counts requested bytes exactly; `active` and
 * `reserved` are the pool's used and reserved bytes and their peaks as the
 * driver reports them (no totals; a shared pool's include other users'
 * memory), `free_cached` their difference, `misses` every allocation,
 * `releases` the trims; hits, splits, merges, segments and largest_free are
 * 0.  dv_memory_trim waits for the device, then trims the pool to 0 bytes;
 * an allocation out of memory does the same once before the queue's flush
 * and retry.  The memory limit counts the bytes handed out.  Refused with
 * DV_ERR_NOT_SUPPORTED, when the context is made, on the host simulator and
 * OpenCL (no such pool; devarray does not substitute "pool", which is the
 * name to use there), on a driver without the entry points (CUDA before
 * 11.2, ROCm before 5.2) and on a device whose
 * CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED is 0; a driver failure of
 * cuMemPoolCreate or of setting the threshold fails the context creation
 * with the driver's status.  Memory of the per-thread default stream is
 * allocated and freed on the legacy stream.  Memory handed out natively
 * (dv_array_native, DLPack), and memory freed while its stream captures a
 * graph, is freed as the direct manager frees (the backend's cuMemFree
 * after the queued work of every stream it can wait for, held back while
 * the legacy stream would join a capture), never captured into a graph; a
 * cuMemFreeAsync that fails takes that path too, and its status is
 * reported.  An allocation for a stream that captures a graph
 * (dv_graph_capture_begin) is DV_ERR_MISUSE, before the driver is asked:
 * the driver would make it the graph's own allocation, memory that exists
 * only while a launch runs; allocate before the capture begins (the "pool"
 * and "direct" managers allocate there as anywhere).  Thread-safe as every
 * manager.
 *
 * Stream order: a manager other than "direct" may reuse a freed block at
 * once for later work on the stream the memory was allocated for (the pool
 * and the driver's pool do; on other streams they wait for that stream's
 * work).  devarray keeps
 * this safe for work queued on other streams: every copy, memset, element or
 * field access, launch and constant upload that uses device memory
 * allocated for another stream makes that stream wait for it (one event;
 * none when the streams are the same or the call is synchronous).  Later
 * work on the allocation stream therefore also waits for it.  Memory
 * exported through DLPack to a device consumer is freed only after the
 * device has finished its queued work (the consumer's own streams are
 * invisible to devarray).
 *
 * Device memory is addressed as a block: a backend buffer handle plus a byte
 * offset (OpenCL buffers are not pointers).  Managers obtain memory with
 * dv_backend_alloc / dv_backend_free, which bypass every manager.
 * @{
 */

/** A block of device memory: a backend buffer and a byte offset into it. */
typedef struct dv_block {
  void *buf;     /**< backend buffer handle */
  size_t offset; /**< byte offset of the block inside buf */
  void *handle;  /**< the manager's own record of the block (opaque to devarray; given back to free) */
} dv_block;

/** Manager statistics (all bytes; counters since creation; the built-in managers keep them exact, peaks included). */
typedef struct dv_mm_stats {
  dv_counter allocated;     /**< bytes handed out to arrays (requested sizes) */
  dv_counter active;        /**< bytes of blocks handed out (rounded sizes) */
  dv_counter reserved;      /**< bytes obtained from the driver (cached included) */
  /** Allocations served from the cache / needing the driver. @{ */
  uint64_t hits, misses;
  /** @} */
  /** Block splits / coalescings. @{ */
  uint64_t splits, merges;
  /** @} */
  uint64_t releases;        /**< segments returned to the driver */
  uint64_t largest_free;    /**< largest free block, bytes */
  uint64_t free_cached;     /**< bytes cached free */
  uint64_t segments;        /**< segments held now */
} dv_mm_stats;

/** The version of dv_memory_manager this header describes. */
#define DV_MEMORY_MANAGER_VERSION 1
/**
 * A memory manager: a versioned table of functions (append-only; optional
 * entries may be NULL; name, init, alloc, free and mem_info are required).
 * `state` is what init returned.  Every function may be called from several
 * threads at once and must be thread-safe.  `stream` is where the memory
 * will be used (NULL: the default stream); a manager may ignore it.
 */
typedef struct dv_memory_manager {
  uint32_t version; /**< DV_MEMORY_MANAGER_VERSION */
  const char *name; /**< the manager's name, as dv_memory_manager_name() returns it */
  void *user;       /**< passed to init */
  /** Set up a manager for a new context; *state is passed to every other entry. */
  dv_status (*init)(dv_context *ctx, void *user, void **state);
  /** Optional: tear it down at context destruction, after every pending free has run. */
  void (*fini)(void *state);
  /** Allocate bytes (> 0) usable in stream order on `stream`; DV_ERR_OUT_OF_MEMORY when none. */
  dv_status (*alloc)(void *state, size_t bytes, dv_stream *stream, dv_block *out);
  /** Free a block of `bytes` allocated for `stream` (its work may still be queued there). */
  dv_status (*free)(void *state, dv_block block, size_t bytes, dv_stream *stream);
  /** Free and total device memory as the manager sees it (dv_memory_info). */
  dv_status (*mem_info)(void *state, size_t *free_bytes, size_t *total_bytes);
  /** Optional: the manager's statistics (dv_memory_stats). */
  dv_status (*stats)(void *state, dv_mm_stats *out);
  /** Optional: return cached memory to the driver. */
  dv_status (*trim)(void *state);
  /** Optional: a stream is about to be destroyed; forget it (its work is complete). */
  void (*stream_destroyed)(void *state, dv_stream *stream);
  /** Optional: export an IPC handle for a block (CUDA IPC; NULL: not supported). */
  dv_status (*ipc_handle)(void *state, dv_block block, void *handle, size_t cap);
} dv_memory_manager;

/**
 * Contexts created with cfg use mm (copied; mm->user must outlive them).
 * DV_ERR_INVALID_ARGUMENT for a wrong version or missing required entries.
 */
DV_API dv_status dv_config_set_memory_manager(dv_config *cfg, const dv_memory_manager *mm);
/** The built-in managers ("direct", "pool", "async"); NULL for another name. */
DV_API const dv_memory_manager *dv_memory_manager_builtin(const char *name);
/** Name of the context's memory manager (static string; "none" for a NULL ctx). */
DV_API const char *dv_memory_manager_name(const dv_context *ctx);
/** Deprecated: the old name of dv_memory_manager_name (same behaviour). */
DV_API const char *dv_context_memory_manager(const dv_context *ctx);
/**
 * Allocate (bytes > 0) / free device memory from the driver, bypassing every
 * manager: what a plugged-in manager builds on.  The caller owns the block
 * and must free it with dv_backend_free.  Statuses as the driver's
 * (DV_ERR_OUT_OF_MEMORY with no retry, DV_ERR_INVALID_ARGUMENT for 0 bytes or
 * a NULL buffer).  They block as the driver does (cuMemFree waits for the
 * device).  Thread-safe.
 */
DV_API dv_status dv_backend_alloc(dv_context *ctx, size_t bytes, dv_block *out);
/** Free a block from dv_backend_alloc(), bypassing every manager; see there. */
DV_API dv_status dv_backend_free(dv_context *ctx, dv_block block);
/** The driver's free and total device memory (either pointer may be NULL). */
DV_API dv_status dv_backend_memory_info(dv_context *ctx, size_t *free_bytes, size_t *total_bytes);
/**
 * Free and total device memory in bytes as the context's memory manager
 * reports them (its mem_info entry: the built-in ones ask the driver;
 * Numba's get_memory_info).  Either pointer may be NULL; both are 0 on
 * failure.  Thread-safe; does not block.
 */
DV_API dv_status dv_memory_info(dv_context *ctx, size_t *free_bytes, size_t *total_bytes);
/** The manager's statistics into *out (DV_ERR_NOT_SUPPORTED if it keeps none). Thread-safe, non-blocking. */
DV_API dv_status dv_memory_stats(dv_context *ctx, dv_mm_stats *out);
/** Return cached device memory to the driver (a no-op for "direct"; the host
 *  simulator in fast mode also frees the blocks it keeps for reuse), and the
 *  pinned pool's cached blocks (dv_pinned_pool_trim). Blocks until work that
 *  used the returned memory is complete. */
DV_API dv_status dv_memory_trim(dv_context *ctx);

/**
 * Whether an NVTX tool listens (compute-sanitizer, Nsight Systems: the tool
 * names its library in NVTX_INJECTION64_PATH when it starts the program):
 * bit 0, it took NVTX's memory extension, so the pool of every CUDA context
 * made with option nvtx=on (the default) tells it of its memory (each
 * segment a sub-allocator heap, each array's bytes a region, unregistered
 * at free and trim), and memcheck reports an access outside an array inside
 * a pool segment; bit 1, it took NVTX's ranges (option nvtx_ranges=on puts
 * devarray's copies, memsets, launches and device allocations in ranges of the
 * domain "devarray").  0 when no tool listens: nothing is loaded, nothing
 * happens.  The tool's library is loaded once, at the first call or pool;
 * nothing is linked.  Thread-safe; never fails.
 */
DV_API int dv_nvtx_attached(void);
/**
 * The pool's segments and blocks as JSON ({"segments":[{"size":..,"kind":
 * "small|large","class":..,"blocks":[{"offset":..,"size":..,"state":
 * "allocated|free","stream":ID,"any_stream":true|false}]}],"stats":{...}}),
 * written like dv_context_stats_json.  `stream` is the block's stream (-1:
 * none); `any_stream` tells whether a free block is known to be reusable on
 * other streams already.  With tracking on (dv_tracking_enable), a
 * "tracking" member follows "stats": dv_tracking_snapshot_json's document
 * for ctx (its live arrays with their origins), for any manager; with
 * tracking off, DV_ERR_NOT_SUPPORTED for managers other than "pool".
 */
DV_API dv_status dv_memory_snapshot_json(dv_context *ctx, char *buf, size_t cap, size_t *needed);

/**
 * Limit the device memory ctx's manager may hold to `bytes` (0: no limit;
 * the option `memory_limit`, DV_MEMORY_LIMIT, sets it at creation; CuPy's
 * MemoryPool.set_limit(size=)).  What is held: the pool's segments, cached
 * free ones included; the direct manager's allocations; the async
 * manager's allocations (requested bytes; the driver's pool may reserve
 * more, which the limit does not see).  An allocation
 * that would pass the limit first has the pool give its cached segments
 * back (after the device finishes queued work), with devarray's flush of
 * the pending-deallocation queue and the out-of-memory handler as for any
 * out-of-memory, then fails with DV_ERR_OUT_OF_MEMORY saying the limit,
 * what is held and what is cached.  A limit below what is held now frees
 * nothing: allocations that need more from the driver fail until enough is
 * freed (the pool still serves from what it caches).  DV_ERR_NOT_SUPPORTED for a
 * plugged-in manager.  Thread-safe; does not block.
 */
DV_API dv_status dv_memory_set_limit(dv_context *ctx, size_t bytes);
/**
 * dv_memory_set_limit with `fraction` (0..1; 0: no limit) of the device's
 * total memory as read when the context was made (the option
 * `memory_limit_fraction`; CuPy's set_limit(fraction=)).
 * DV_ERR_INVALID_ARGUMENT outside [0, 1].
 */
DV_API dv_status dv_memory_set_limit_fraction(dv_context *ctx, double fraction);
/**
 * The limit (0: none), the bytes ctx's manager holds and how many of them
 * are cached free (the pool's; 0 for the direct manager); any pointer may
 * be NULL.  The direct manager counts what it holds only while a limit is
 * set.  DV_ERR_NOT_SUPPORTED for a plugged-in manager.  Thread-safe.
 */
DV_API dv_status dv_memory_limit(dv_context *ctx, size_t *bytes, size_t *held, size_t *cached);

/** @} */

/* ---- memory hooks, scoped statistics, the out-of-memory handler ------- */

/**
 * @defgroup memhooks Memory hooks, scoped statistics, out-of-memory handler
 *
 * What a program can hear of its context's memory (docs/memory_hooks.md):
 * a hook called on every allocation and free of device, pinned, mapped and
 * managed memory (CuPy's memory hooks, RMM's logging adaptor); statistics
 * per scope, nested (RMM's statistics adaptor's push/pop); and a handler
 * that may free or spill memory when a device allocation fails and ask for
 * a retry (RMM's failure-callback adaptor).  None costs anything until one
 * is installed: the paths test one counter.
 *
 * An allocation is an array's memory as it is made (dv_device_array,
 * dv_to_device, dv_pinned_array, dv_mapped_array, dv_managed_array, ...) and
 * the device temporaries the transfer planner takes from the manager; a
 * free is the program's last release of that memory (its last array).  The
 * memory itself goes back to the manager or the driver when the
 * pending-deallocation queue is flushed (Numba's deferred deallocation), so
 * a free event may come before the driver's free.  Wrapped memory
 * (dv_host_array_wrap, dv_device_array_wrap, DLPack imports) and registered
 * host memory are the program's own and make no event.
 * @{
 */

/** Which way memory went in a dv_memory_event. */
typedef enum dv_memory_event_kind {
  DV_MEMORY_ALLOC = 0, /**< memory was allocated */
  DV_MEMORY_FREE = 1   /**< the program let go of it */
} dv_memory_event_kind;

/** One allocation or free, as a hook hears it (valid during the call only). */
typedef struct dv_memory_event {
  dv_memory_event_kind event; /**< DV_MEMORY_ALLOC or DV_MEMORY_FREE */
  dv_memory_kind memory;      /**< DV_MEM_DEVICE, DV_MEM_PINNED, DV_MEM_MAPPED or DV_MEM_MANAGED */
  size_t bytes;               /**< the allocation's size */
  /** Device memory: the block's backend buffer (a device pointer on CUDA and
   *  HIP, a cl_mem on OpenCL); host-side memory: its host address.  The same
   *  value in an allocation's ALLOC and FREE events. */
  void *address;
  size_t offset;            /**< device memory: the block's offset in `address`; 0 otherwise */
  dv_stream *stream;        /**< the stream the device memory was allocated for; NULL: none (or not device memory) */
  const char *manager;      /**< device memory: the memory manager's name; "driver" otherwise */
} dv_memory_event;

/** A memory hook: called after each allocation and at each free (see the group). */
typedef void (*dv_memory_hook_fn)(dv_context *ctx, const dv_memory_event *event, void *user);

/**
 * Install fn(ctx, event, user) on ctx: called after every allocation and at
 * every free of device, pinned, mapped and managed memory of the context,
 * on the thread that makes the allocation or the release (any thread,
 * including stream callbacks' threads), until dv_memory_hook_remove.  Hooks
 * run in the order they were added, one call at a time per context (a
 * hook needs no lock of its own; an allocation on another thread waits
 * while one runs).  fn must not add or remove hooks or push or pop scopes (that is
 * DV_ERR_MISUSE); allocations fn makes itself through devarray are not
 * reported to the hooks.  *id gets the hook's number for
 * dv_memory_hook_remove.
 * DV_ERR_NULL_ARGUMENT for a NULL ctx, fn or id; DV_ERR_HOST_OUT_OF_MEMORY
 * (nothing installed).  Thread-safe.
 */
DV_API dv_status dv_memory_hook_add(dv_context *ctx, dv_memory_hook_fn fn, void *user, int *id);
/**
 * Remove the hook `id` gave.  When it returns, the hook is not running and
 * will not be called again.  DV_ERR_INVALID_ARGUMENT for an id that is not
 * installed (removed already).  Blocks while a call of a hook is running.
 */
DV_API dv_status dv_memory_hook_remove(dv_context *ctx, int id);

/** A scoped counter: may go below 0 in a scope that frees what was allocated before it. */
typedef struct dv_scope_counter {
  int64_t current; /**< net value within the scope (allocated minus freed) */
  int64_t peak;    /**< highest value of current within the scope */
  int64_t total;   /**< everything allocated within the scope */
} dv_scope_counter;
/** Bytes and allocations of one kind of memory within a scope. */
typedef struct dv_memory_counts {
  dv_scope_counter bytes;       /**< bytes */
  dv_scope_counter allocations; /**< allocations */
} dv_memory_counts;
/** What a scope saw (dv_memory_scope_pop). */
typedef struct dv_memory_scope_stats {
  dv_memory_counts device;  /**< device memory (arrays and the planner's temporaries) */
  dv_memory_counts pinned;  /**< pinned host memory */
  dv_memory_counts mapped;  /**< mapped host memory */
  dv_memory_counts managed; /**< managed memory */
} dv_memory_scope_stats;

/**
 * Open a statistics scope on ctx (RMM's push_counters): from now on every
 * allocation and free of the context, on any thread, counts in it.  Scopes
 * nest (at most 64 deep: DV_ERR_INVALID_ARGUMENT beyond).
 * DV_ERR_HOST_OUT_OF_MEMORY (no scope opened).  Thread-safe.
 */
DV_API dv_status dv_memory_scope_push(dv_context *ctx);
/**
 * Close the innermost scope, its counts into *out (which may be NULL); the
 * enclosing scope, if any, takes them in: its current grows by the scope's
 * current, its total by the scope's total, its peak to at least its current
 * at the push plus the scope's peak.  DV_ERR_INVALID_ARGUMENT when no scope
 * is open (*out cleared).  Thread-safe.
 */
DV_API dv_status dv_memory_scope_pop(dv_context *ctx, dv_memory_scope_stats *out);

/**
 * An out-of-memory handler: a device allocation of `bytes` failed after
 * devarray's own flush of the pending-deallocation queue; this is the
 * handler's `attempt`-th call for it (from 1).  It may release arrays,
 * spill them to the host, call dv_memory_trim; nonzero asks for another try
 * (after a flush), 0 gives up.
 */
typedef int (*dv_oom_fn)(dv_context *ctx, size_t bytes, int attempt, void *user);
/**
 * Install fn as ctx's out-of-memory handler (NULL removes it): when a
 * device allocation fails with DV_ERR_OUT_OF_MEMORY after the flush and
 * retry devarray always makes, fn is called on the allocating thread; while
 * it returns nonzero the queue is flushed and the allocation tried again,
 * at most max_retries times (1..1000); then the allocation fails with
 * DV_ERR_OUT_OF_MEMORY as usual, its message saying how often fn was asked.
 * fn may call devarray (it holds no lock of the library).
 * DV_ERR_INVALID_ARGUMENT for max_retries out of range.  Thread-safe; an
 * allocation already in its handler finishes with the handler it had.
 */
DV_API dv_status dv_memory_set_oom_handler(dv_context *ctx, dv_oom_fn fn, void *user, int max_retries);

/** @} */

/* ---- tracking ----------------------------------------------------------- */

/**
 * @defgroup tracking Tracking: live handles and where they were made
 *
 * With tracking on, every array, stream, event, module and context the
 * library makes for a caller is listed until its last release, with where
 * it was made: the return address of the first caller outside libdevarray
 * (printed as `module+0xoffset (symbol)`, which `addr2line -e module
 * offset` turns into file:line when the module has debug information), or
 * the thread's origin label when one is set (the Python binding sets the
 * caller's `file.py:line`).  `devarray check --leak-check` lists at exit
 * what was never released; dv_memory_snapshot_json adds the live list.
 * Turned on by dv_tracking_enable, or DV_TRACK=1 (or DV_LEAK_CHECK=1) in the
 * environment when the library is loaded.  Handles made while it was off
 * are not listed.  Off, the cost is one load and a branch per handle made
 * or released; on, a record and a stack walk per handle (microseconds).  A
 * record that cannot be allocated is counted ("untracked"), never a failure
 * of the call that made the handle.
 * @{
 */

/** Turn tracking on (nonzero) or off (0: every record is dropped). Process-wide; thread-safe. Always DV_OK. */
DV_API dv_status dv_tracking_enable(int on);
/** Whether tracking is on. */
DV_API int dv_tracking_enabled(void);
/**
 * The calling thread's origin label (at most 159 bytes kept) for the handles
 * it makes from now on, instead of the caller's return address; NULL or ""
 * goes back to addresses.  For bindings: the Python binding sets the
 * caller's file:line around each call that makes handles.
 */
DV_API void dv_tracking_set_origin(const char *where);
/**
 * Stop listing `handle` (an array, stream, event, module or context; one
 * not tracked is ignored): for a binding whose own handles outlive the
 * program by design (the Python binding's contexts, as Numba's primary
 * context), so that --leak-check lists only the program's.  Thread-safe.
 */
DV_API void dv_tracking_forget(const void *handle);
/**
 * The tracked live handles of ctx (of every context for NULL) as JSON:
 * {"enabled":true|false,"untracked":N,"live":[{"kind":"array|stream|event|
 * module|context","seq":N,"origin":"...",("memory":"device|host|pinned|
 * mapped|managed","bytes":N,"what":"float32 (3, 4)")}]} in creation order
 * (seq), written like dv_context_stats_json (buf NULL: *needed only; the
 * whole document or nothing).  Thread-safe.
 */
DV_API dv_status dv_tracking_snapshot_json(dv_context *ctx, char *buf, size_t cap, size_t *needed);

/** @} */

/* ---- the pinned pool --------------------------------------------------- */

/**
 * @defgroup pinnedpool The pinned pool
 *
 * A cache of the page-locked host memory behind dv_pinned_array and
 * dv_mapped_array (and the binding's pinned_array, mapped_array), per
 * context, on every backend (docs/pinned_pool.md).  With the option
 * pinned_pool on (DV_PINNED_POOL; the default, decided by measurement on
 * the host backend: a pinned array's second allocation 1.35-1.59x faster
 * than a direct one at 4 KiB to 16 MiB, an allocate-release-free cycle
 * 1.40-1.52x, never slower beyond noise; docs/benchmarks.md, "Pinned
 * pool"), a released array's memory goes back
 * to the pool when its queued free runs (the pending-deallocation queue, as
 * before) and a later array of the same size class and kind takes it
 * instead of a driver allocation; off, every pinned array is a driver
 * allocation and a driver free, which waits for the device.
 *
 * Classes: requests up to 512 bytes take 512; larger ones the next multiple
 * of 2^e/8 above them (2^e < request <= 2^(e+1)), so a block holds at most
 * 1/8 more than was asked, never the next power of two.  A block is reused
 * for the same class and the same kind (pinned, or mapped with the same
 * DV_MAPPED_* flags) only.
 *
 * Order: memory that queued work may still read or write is reused only
 * after that work: the asynchronous streams that used a pinned or mapped
 * array (its copies, memsets, element access, launches) are recorded, an
 * event is recorded on each when its free runs, and the block is handed out
 * again only once those events have completed (queried, never waited for).
 * An array used on more than four streams, or exported through DLPack to a
 * device consumer, is reused after a wait for the whole device.  Work on
 * the default stream (NULL) has finished when its call returns.  Memory the
 * program reaches around devarray (dv_array_host_data with its own
 * asynchronous copies on native streams) is not seen: release such an array
 * after that work is done.
 *
 * Options: pinned_pool_reserve (bytes allocated with the context and kept
 * until it goes, carved into the first pinned arrays: RMM's initial pool
 * size); pinned_pool_limit (the most bytes the pool holds, in use and
 * cached; 0: a quarter of physical memory; a request past it frees cached
 * blocks, largest first, and else is served outside the pool, as with the
 * pool off).  Requests over 1 TiB are served outside the pool.  A driver
 * allocation that fails for lack of page-locked memory empties the cache
 * and is retried once.  dv_stats.pinned and .mapped count what the arrays
 * hold, as without the pool; what the pool holds is dv_pinned_pool_stats.
 * The planner's staging buffers (dv_stats.staging) are a pool of their own.
 * @{
 */

/** The pinned pool's statistics (dv_pinned_pool_stats); bytes are blocks' (class sizes). */
typedef struct dv_pinned_stats {
  int enabled;          /**< 1 when the context's pinned and mapped arrays come from the pool */
  dv_counter held;      /**< bytes the pool holds: blocks in use and cached, the reserve included */
  dv_counter in_use;    /**< bytes of blocks handed out to arrays */
  uint64_t cached;      /**< bytes of free blocks (those still waiting for queued work included) */
  uint64_t pending;     /**< of those, bytes of blocks whose queued work was not yet seen complete */
  uint64_t free_blocks; /**< free blocks (CuPy's n_free_blocks) */
  /** Allocations served from the cache / by a new block (the driver's or the reserve's). @{ */
  uint64_t hits, misses;
  /** @} */
  uint64_t uncached;    /**< allocations served outside the pool (past the limit, or over 1 TiB) */
  uint64_t waits;       /**< allocations that waited for the device (blocks used on many streams) */
  uint64_t releases;    /**< cached blocks given back to the driver (trims, the limit, out of memory) */
  uint64_t reserve;     /**< bytes of the reserve (option pinned_pool_reserve) */
  uint64_t limit;       /**< the most bytes the pool holds (pinned_pool_limit, dv_pinned_pool_set_limit) */
} dv_pinned_stats;

/**
 * The pinned pool's statistics into *out (all zero, enabled 0, with the
 * pool off).  DV_ERR_NULL_ARGUMENT for a NULL ctx or out.  Thread-safe;
 * does not wait for the device (free blocks are counted as pending until an
 * allocation has seen their work complete).
 */
DV_API dv_status dv_pinned_pool_stats(dv_context *ctx, dv_pinned_stats *out);
/**
 * Flush the pending-deallocation queue (released arrays go back to the
 * pool), then give every cached block back to the driver but those carved
 * from the reserve (CuPy's free_all_blocks).  Blocks until queued work that
 * used the freed memory is done (the driver's free waits).  A no-op with the
 * pool off.  dv_memory_trim trims the pinned pool too.  Thread-safe.
 */
DV_API dv_status dv_pinned_pool_trim(dv_context *ctx);
/**
 * Change the pool's limit on a live context (0: a quarter of physical
 * memory), freeing cached blocks, largest first, until the pool holds no
 * more than the new limit if it can; blocks in use stay.  Later requests
 * that do not fit are served outside the pool.  DV_ERR_INVALID_ARGUMENT,
 * nothing changed, for a limit below the reserve; DV_ERR_NOT_SUPPORTED with
 * the pool off.  Blocks while freed memory's queued work finishes.
 * Thread-safe.
 */
DV_API dv_status dv_pinned_pool_set_limit(dv_context *ctx, size_t limit);

/** @} */

/* ---- memory checks ----------------------------------------------------- */

/** @defgroup memcheck Memory (allocation-level) access
 *  Checks over every allocation of a context. */

/** @ingroup memcheck
 * Check the integrity of every live allocation of the context: on the host
 * simulator, guard bytes around device allocations and the poison of
 * recently freed ones (DV_ERR_CORRUPTION with the address in the message);
 * in fast mode (host_guard off) the canary bytes around the allocations
 * kernels have used, the only ones that have them.  Corruptions found
 * earlier (at a free) are reported again.  Other backends return DV_OK.
 * Blocks until queued work is complete.
 */
DV_API dv_status dv_context_check_memory(dv_context *ctx);

/* ---- fault injection --------------------------------------------------- */

/** @defgroup faults Fault injection
 *  Make the k-th allocation, copy or free fail, so that tests reach every error path.
 *  @{ */

/** What dv_fault_inject() makes fail. */
typedef enum dv_fault_kind {
  DV_FAULT_DEVICE_ALLOC = 0, /**< the k-th device allocation fails: DV_ERR_OUT_OF_MEMORY */
  DV_FAULT_HOST_ALLOC = 1,   /**< the k-th library host allocation fails: DV_ERR_HOST_OUT_OF_MEMORY */
  DV_FAULT_COPY = 2,         /**< the k-th copy issued to the backend fails: DV_ERR_DRIVER */
  DV_FAULT_FREE = 3          /**< the k-th device free fails: DV_ERR_DRIVER (memory still freed) */
} dv_fault_kind;

/**
 * Make the k-th next operation of `kind` fail (k = 1: the next one); k = 0
 * disarms.  DV_FAULT_HOST_ALLOC counts every host allocation the library
 * makes, process-wide (ctx may be NULL); the others count per context and
 * are supported by the host backend only (DV_ERR_NOT_SUPPORTED elsewhere).
 * The same can be set with the options fault_device_alloc, fault_host_alloc
 * (process-wide: armed when the environment is read, or when a context is
 * created from a config that sets it), fault_copy.  Thread-safe.
 */
DV_API dv_status dv_fault_inject(dv_context *ctx, dv_fault_kind kind, uint64_t k);
/** Whether an armed fault of `kind` is still waiting (1) or fired/disarmed (0). */
DV_API int dv_fault_pending(dv_context *ctx, dv_fault_kind kind);

/** @} */

/* ======================================================================== */
/* Kernels: programs, modules, launches                                      */
/* ======================================================================== */

/*
 * A kernel source is written once in the dialect of <devarray/kernel.h>
 * (docs/kernels.md) and compiled at run time for the context's backend:
 * NVRTC on CUDA, hipRTC on HIP (for the device's gfx target; the option
 * hiprtc_library names the file, else libhiprtc.so.6, libhiprtc.so, then the
 * HIP runtime's own library, which holds hipRTC on ROCm 5), the OpenCL
 * driver's compiler, the system C compiler on the host simulator.  A
 * dv_program holds the source, defines, compiler options
 * and constant arrays; dv_program_build turns it into a dv_module loaded on
 * the program's context (from the compiled-module cache on disk when it can);
 * kernels are looked up in a module by name and launched on a stream.
 *
 * Threads: a program is used by one thread at a time.  Modules and kernels
 * may be used (looked up, launched) from many threads at once.
 */

/** Source, defines, options and constants of a kernel program.  Not shared. */
typedef struct dv_program dv_program;
/** A program built and loaded for one context.  Reference-counted. */
typedef struct dv_module dv_module;
/** An entry point of a module.  Owned by the module: valid while it lives. */
typedef struct dv_kernel dv_kernel;

/**
 * A new program for ctx.  `name` names the source in compiler messages
 * ("matmul.dvk"; NULL: "kernel"; 1 to 255 characters, no quote, backslash or
 * control character); `source` is copied.  The program keeps its context
 * BUSY until destroyed.  Errors: DV_ERR_NULL_ARGUMENT,
 * DV_ERR_INVALID_ARGUMENT (the name), DV_ERR_HOST_OUT_OF_MEMORY.  *out is
 * NULL on failure.
 */
DV_API dv_status dv_program_create(dv_context *ctx, const char *name, const char *source,
                                   dv_program **out);
/**
 * `#define name value` before the source (value NULL: "1").  A name must be a
 * C identifier and is defined once (DV_ERR_INVALID_ARGUMENT otherwise; also
 * for a value with a newline).  Both strings are copied.  Defines are part of
 * the cache key.  Errors: DV_ERR_NULL_ARGUMENT, DV_ERR_INVALID_ARGUMENT,
 * DV_ERR_HOST_OUT_OF_MEMORY; a failed call changes nothing.  A program is
 * not thread-safe: one thread at a time may call the dv_program_* functions
 * on it.
 */
DV_API dv_status dv_program_define(dv_program *p, const char *name, const char *value);
/**
 * Extra options for one backend's compiler ("cuda": NVRTC options, "hip":
 * hipRTC options, "opencl": clBuildProgram options, "host": C compiler
 * flags), appended to devarray's own; they apply only when the program is
 * built on that backend.  Replaces earlier options for the same backend;
 * the string is copied.  Errors:
 * DV_ERR_NULL_ARGUMENT (p or options), DV_ERR_INVALID_ARGUMENT (unknown
 * backend name), DV_ERR_HOST_OUT_OF_MEMORY; a failed call changes nothing.
 * Options the compiler rejects are reported by dv_program_build.
 */
DV_API dv_status dv_program_options(dv_program *p, const char *backend, const char *options);
/**
 * Declare a constant array `name` (Numba's cuda.const.array_like): inside
 * kernels, `name` is a read-only array of the host array's dtype and size
 * (numeric dtypes; C order of its elements).  The data is copied now and
 * uploaded when the program is built; dv_module_set_constant changes it
 * later.  All constants of a program share one constant buffer, limited by
 * the device (64 KiB on CUDA; CL_DEVICE_MAX_CONSTANT_BUFFER_SIZE on OpenCL);
 * a build over the limit fails with DV_ERR_LAUNCH_CONFIG naming it.
 * Errors: DV_ERR_NULL_ARGUMENT, DV_ERR_INVALID_ARGUMENT (not a C identifier,
 * declared twice, not a host array, empty), DV_ERR_BAD_DTYPE (records).
 */
DV_API dv_status dv_program_constant(dv_program *p, const char *name, const dv_array *host);

/* Build flags. */
#define DV_BUILD_DEBUG 0x1u    /**< debug information (CUDA -G, HIP -O0 -g, host -g); host: checks always on */
#define DV_BUILD_NO_CACHE 0x2u /**< neither read nor write the compiled-module cache */

/**
 * Compile and load the program for its context.  On a compile error returns
 * DV_ERR_COMPILE: dv_program_log has the compiler's whole log (line numbers
 * refer to the user's source) and the detail message its first lines.  A
 * missing compiler is DV_ERR_NO_COMPILER naming what was tried.  The
 * compiled module is read from and written to the cache on disk unless
 * DV_BUILD_NO_CACHE or the kernel_cache option is off.  Blocks the caller
 * while compiling.  Other errors: DV_ERR_NOT_SUPPORTED (the backend cannot
 * run kernels), DV_ERR_INVALID_ARGUMENT (unknown flags or compiler options),
 * DV_ERR_LAUNCH_CONFIG (constant arrays over the device's limit),
 * DV_ERR_HOST_OUT_OF_MEMORY.  *out (one reference) is NULL on failure.
 */
DV_API dv_status dv_program_build(dv_program *p, unsigned flags, dv_module **out);
/**
 * The compiler log of the last build ("" when none, or p NULL).  Owned by the
 * program: valid until its next dv_program_build or dv_program_destroy.
 */
DV_API const char *dv_program_log(const dv_program *p);
/** Free the program (modules built from it live on).  NULL is a no-op. */
DV_API void dv_program_destroy(dv_program *p);

/** Another reference to m; returns m (NULL stays NULL).  Thread-safe; does not block. */
DV_API dv_module *dv_module_retain(dv_module *m);
/**
 * Drop a reference.  The last one unloads the module through the context's
 * deferred-deallocation queue, after launches already queued have run (the
 * flush that runs it waits for the device; this call itself does not block).
 * NULL is a no-op.  Thread-safe; kernels of m must not be used after the
 * caller's last reference is gone.  A release after the last one is
 * reported (DV_ERR_MISUSE in dv_last_error, logged) and changes nothing
 * (see "Released handles").
 */
DV_API void dv_module_release(dv_module *m);
/**
 * The kernel `name` of the module (borrowed: valid while the module lives;
 * dv_kernel_retain holds it, and its module, longer).  Its parameter list is
 * the one devarray read from the program's source when it was built (see
 * dv_kernel_launch).  Errors: DV_ERR_INVALID_ARGUMENT names the missing
 * kernel; DV_ERR_KERNEL_ARGUMENT when the entry point was not declared with
 * DV_KERNEL (OpenCL can tell), when its DV_KERNEL declaration is not in the
 * source as written (declared through a variadic or object-like macro;
 * function-like macros that declare kernels are read through their
 * expansion: devarray checks every launch against the declaration), or when it
 * is declared twice with different parameter lists under preprocessor
 * conditions devarray cannot evaluate (an ifdef on a name defined outside the
 * program).  In debug builds of devarray the parameters the driver reports
 * (OpenCL's kernel argument info, CUDA's cuFuncGetParamInfo, the host
 * simulator's exported list) are compared with the declaration devarray
 * read: a disagreement (a devarray defect, never a user's) is
 * DV_ERR_KERNEL_ARGUMENT naming both.  Thread-safe.
 */
DV_API dv_status dv_module_kernel(dv_module *m, const char *name, dv_kernel **out);
/**
 * Replace the contents of constant array `name` with `src` (a host or device
 * array of the declared dtype and number of elements, any layout), ordered on
 * `stream` (NULL: synchronous on the default stream): launches queued on
 * that stream before see the old contents, launches queued after see the
 * new ones.  Launches on other streams are ordered with it only through
 * events.  A C-contiguous src may be read when the stream gets to the write:
 * keep its contents until then (as for any copy on a stream).  Another layout
 * is first copied to a dense temporary and the call waits for the stream.
 * Errors: DV_ERR_NULL_ARGUMENT, DV_ERR_INVALID_ARGUMENT (unknown name),
 * DV_ERR_DTYPE_MISMATCH, DV_ERR_SHAPE_MISMATCH (element count),
 * DV_ERR_BACKEND_MISMATCH (array or stream of another context).  Thread-safe
 * with respect to other modules; concurrent writes of one constant race as
 * copies into one array do.
 */
DV_API dv_status dv_module_set_constant(dv_module *m, const char *name, const dv_array *src,
                                        dv_stream *stream);
/**
 * Whether the module came from the compiled-module cache on disk (1) or was
 * compiled (0; also for m NULL).  Thread-safe.
 */
DV_API int dv_module_from_cache(const dv_module *m);

/** What a kernel needs and allows on its device. */
typedef struct dv_kernel_attrs {
  int max_threads_per_block;  /**< largest block this kernel can be launched with */
  size_t static_shared_bytes; /**< shared (OpenCL: local) memory declared in the source */
  size_t max_dynamic_shared_bytes; /**< largest dynamic shared size a launch may ask for */
  size_t local_bytes_per_thread;   /**< per-thread local memory; 0 when unknown */
  size_t constant_bytes;      /**< the module's constant arrays */
  int registers;              /**< registers per thread; -1 when the backend does not say */
  int wave_size;              /**< warp / wavefront / sub-group size; 1 when none */
} dv_kernel_attrs;

/**
 * Fill *out with k's attributes (read when the kernel was looked up; cleared
 * on failure).  Errors: DV_ERR_NULL_ARGUMENT.  Thread-safe; does not block.
 */
DV_API dv_status dv_kernel_attributes(dv_kernel *k, dv_kernel_attrs *out);
/** The kernel's name (owned by the kernel; "" for k NULL).  Thread-safe. */
DV_API const char *dv_kernel_name(const dv_kernel *k);
/**
 * Hold k beyond its module's last reference: a held kernel keeps its module
 * loaded, so dv_module_release while kernels from it are held defers the
 * unload until the last dv_kernel_release (OpenCL's rule for kernels and
 * programs).  Returns k (NULL stays NULL).  Thread-safe; does not block.
 *
 * Without a hold, dv_module_kernel's kernel is borrowed: valid while the
 * module lives.  What is caught, cheaply, as DV_ERR_MISUSE instead of a
 * crash: a launch (or dv_kernel_attributes, dv_kernel_param_info) through a
 * kernel whose module's last reference is gone, from that moment on (not
 * only once the unload has run), for the last 1024 such kernels of the
 * context; a dv_kernel_release with no hold left (logged, nothing changes).
 * What is not caught: a kernel used after its context is destroyed, or a
 * pointer that never was a kernel.
 */
DV_API dv_kernel *dv_kernel_retain(dv_kernel *k);
/**
 * Drop a hold taken with dv_kernel_retain (NULL is a no-op); the last hold
 * of a released module queues its unload on the deferred queue, as
 * dv_module_release does.  A release with no hold left is logged and
 * changes nothing.  Thread-safe; does not block.
 */
DV_API void dv_kernel_release(dv_kernel *k);

/** What a kernel parameter is (dv_kernel_param_info). */
typedef enum dv_param_kind {
  DV_PARAM_ARRAY = 1, /**< DV_ARRAY(T, name): takes DV_ARG_ARRAY* or DV_ARG_SMART* */
  DV_PARAM_VIEW = 2,  /**< DV_VIEW(T, name): takes DV_ARG_VIEW* or DV_ARG_SMART_VIEW* */
  DV_PARAM_SCALAR = 3 /**< `T name`: takes a scalar, DV_ARG_I32 ... DV_ARG_F16 */
} dv_param_kind;

/** One parameter of a kernel, as devarray read it from the kernel's DV_KERNEL declaration. */
typedef struct dv_kernel_param {
  dv_param_kind kind; /**< array, view or scalar */
  dv_type_id type;    /**< element type (arrays, views) or value type (scalars); DV_TYPE_COUNT
                           where devarray cannot tell (a struct, a macro with arguments) */
  int is_const;       /**< arrays and views: the elements are declared const */
  const char *name;   /**< the parameter's name (owned by the kernel) */
  const char *decl;   /**< the declaration as written, blanks collapsed (owned by the kernel) */
} dv_kernel_param;

/**
 * The number of parameters of k's DV_KERNEL declaration (-1 for k NULL or
 * a kernel caught as misused).  Thread-safe; does not block.
 */
DV_API int dv_kernel_num_params(const dv_kernel *k);
/**
 * Parameter i (0-based) of k.  Errors: DV_ERR_NULL_ARGUMENT,
 * DV_ERR_INVALID_ARGUMENT (i out of range), DV_ERR_MISUSE (see
 * dv_kernel_retain).  *out is zeroed on failure; its strings are owned by
 * the kernel (valid while its module is loaded).  Thread-safe; does not
 * block.
 */
DV_API dv_status dv_kernel_param_info(const dv_kernel *k, int i, dv_kernel_param *out);

/** Three extents; 0 means 1 in dv_launch_config (so {n} is a 1-D grid). */
typedef struct dv_dim3 {
  uint32_t x; /**< extent in x */
  uint32_t y; /**< extent in y */
  uint32_t z; /**< extent in z */
} dv_dim3;

/** A launch: grid of blocks, threads per block, dynamic shared bytes, stream. */
typedef struct dv_launch_config {
  dv_dim3 grid;          /**< blocks per grid in x, y, z (0 is read as 1) */
  dv_dim3 block;         /**< threads per block in x, y, z (0 is read as 1) */
  size_t dynamic_shared; /**< bytes of dynamic shared memory (DV_DYN_SHARED_*) */
  dv_stream *stream;     /**< NULL: synchronous on the default stream */
} dv_launch_config;

/** How a kernel argument is passed. */
typedef enum dv_arg_kind {
  DV_ARG_SCALAR = 1, /**< a value of a numeric dtype (parameter `T name`) */
  DV_ARG_ARRAY = 2,  /**< an array: parameter DV_ARRAY(T, name) */
  DV_ARG_VIEW = 3,   /**< an array with shape and strides: DV_VIEW(T, name) */
  DV_ARG_SMART = 4,  /**< a smart array (dv_arg.smart) for a DV_ARRAY(T, name) parameter */
  DV_ARG_SMART_VIEW = 5 /**< a smart array for a DV_VIEW(T, name) parameter */
} dv_arg_kind;

/**
 * What a kernel does with an array argument, so that a launch moves only
 * the data it needs (host arrays, smart arrays; device, mapped and managed
 * arrays are never copied and ignore it).  The zero value is the
 * conservative default: copied in and out.
 */
typedef enum dv_arg_dir {
  DV_DIR_DEFAULT = 0, /**< as DV_DIR_INOUT (every constructor without a direction) */
  DV_DIR_IN = 1,      /**< the kernel only reads it: copied in, never back */
  DV_DIR_OUT = 2,     /**< the kernel writes every element and reads none: never copied in */
  DV_DIR_INOUT = 3    /**< read and written: copied in before and back after */
} dv_arg_dir;

/**
 * A scalar kernel argument's value, held in the argument itself (dv_arg.scalar):
 * the member named by dv_arg.type (float16: its IEEE bits).
 */
typedef union dv_scalar {
  int8_t i8;     /**< DV_INT8 */
  uint8_t u8;    /**< DV_UINT8, DV_BOOL (0 or 1) */
  int16_t i16;   /**< DV_INT16 */
  uint16_t u16;  /**< DV_UINT16 */
  uint16_t f16;  /**< DV_FLOAT16: the half-precision bits (dv_half_from_float) */
  int32_t i32;   /**< DV_INT32 */
  uint32_t u32;  /**< DV_UINT32 */
  int64_t i64;   /**< DV_INT64 */
  uint64_t u64;  /**< DV_UINT64 */
  float f32;     /**< DV_FLOAT32 */
  double f64;    /**< DV_FLOAT64 */
} dv_scalar;

/**
 * One kernel argument.  Use the DV_ARG_* constructors.  The fields after
 * `array` were appended with smart arrays, `scalar` with the kernel contract;
 * a constructor (or an initializer) that leaves them out gets
 * DV_DIR_DEFAULT, no smart array and a zero scalar.  A scalar's value is
 * read from `value` when it is not NULL, else from `scalar` (the
 * constructors use `scalar`, so an argument array can outlive the
 * expressions that made it).
 */
typedef struct dv_arg {
  dv_arg_kind kind;     /**< scalar, array, view, smart array */
  dv_type_id type;      /**< scalars: the value's dtype */
  const void *value;    /**< scalars: points at the value (copied at launch), or NULL: `scalar` */
  const dv_array *array; /**< arrays: memory of the kernel's context (host arrays are copied) */
  dv_arg_dir dir;       /**< arrays and smart arrays: direction hint (0: in and out) */
  dv_smart *smart;      /**< DV_ARG_SMART, DV_ARG_SMART_VIEW: the smart array */
  dv_scalar scalar;     /**< scalars with `value` NULL: the value itself */
} dv_arg;

/**
 * The float16 (IEEE binary16) nearest to f, ties to even, as NumPy's
 * float16(f) rounds: overflow gives infinity, NaN stays NaN (quiet, sign
 * and the top payload bits kept).  Thread-safe; no context needed.
 */
DV_API uint16_t dv_half_from_float(float f);
/** The float whose value is the float16 with bits h (exact; NaN payloads kept).  Thread-safe. */
DV_API float dv_half_to_float(uint16_t h);

/* The constructors.  C: compound literals with designated initializers (they
 * live until the end of the enclosing block); C++: inline functions that
 * return the argument by value.  Either way the value is held in the
 * argument (dv_arg.scalar), and every macro compiles without warnings under
 * -Wall -Wextra in C11 and C++17. */
#ifdef __cplusplus
#define DV__ARG_FN(F, CT, T)                                                  \
  static inline dv_arg dv__arg_##F(CT v) {                                    \
    dv_arg a = dv_arg();                                                      \
    a.kind = DV_ARG_SCALAR;                                                   \
    a.type = T;                                                               \
    a.scalar.F = v;                                                           \
    return a;                                                                 \
  }
DV__ARG_FN(i8, int8_t, DV_INT8)
DV__ARG_FN(u8, uint8_t, DV_UINT8)
DV__ARG_FN(i16, int16_t, DV_INT16)
DV__ARG_FN(u16, uint16_t, DV_UINT16)
DV__ARG_FN(i32, int32_t, DV_INT32)
DV__ARG_FN(u32, uint32_t, DV_UINT32)
DV__ARG_FN(i64, int64_t, DV_INT64)
DV__ARG_FN(u64, uint64_t, DV_UINT64)
DV__ARG_FN(f32, float, DV_FLOAT32)
DV__ARG_FN(f64, double, DV_FLOAT64)
#undef DV__ARG_FN
static inline dv_arg dv__arg_b(int v) {
  dv_arg a = dv__arg_u8((uint8_t)(v != 0));
  a.type = DV_BOOL;
  return a;
}
static inline dv_arg dv__arg_f16(float v) {
  dv_arg a = dv_arg();
  a.kind = DV_ARG_SCALAR;
  a.type = DV_FLOAT16;
  a.scalar.f16 = dv_half_from_float(v);
  return a;
}
static inline dv_arg dv__arg_mem(dv_arg_kind k, const dv_array *arr, dv_smart *s, dv_arg_dir d) {
  dv_arg a = dv_arg();
  a.kind = k;
  a.type = DV_BOOL;
  a.array = arr;
  a.smart = s;
  a.dir = d;
  return a;
}
#define DV__ARG_SCALAR(T, F, v) dv__arg_##F(v)
#define DV__ARG_BOOL(v) dv__arg_b((v) ? 1 : 0)
#define DV__ARG_F16(v) dv__arg_f16(v)
#define DV__ARG_MEM(K, a, s, d) dv__arg_mem(K, a, s, d)
#else
#define DV__ARG_SCALAR(T, F, v) ((dv_arg){.kind = DV_ARG_SCALAR, .type = (T), .scalar = {.F = (v)}})
#define DV__ARG_BOOL(v) ((dv_arg){.kind = DV_ARG_SCALAR, .type = DV_BOOL, .scalar = {.u8 = (v) ? 1 : 0}})
#define DV__ARG_F16(v) \
  ((dv_arg){.kind = DV_ARG_SCALAR, .type = DV_FLOAT16, .scalar = {.f16 = dv_half_from_float(v)}})
#define DV__ARG_MEM(K, a, s, d) \
  ((dv_arg){.kind = (K), .type = DV_BOOL, .array = (a), .dir = (d), .smart = (s)})
#endif
/** A scalar int8 argument (`dv_i8`, `signed char`). */
#define DV_ARG_I8(v) DV__ARG_SCALAR(DV_INT8, i8, v)
/** A scalar uint8 argument (`dv_u8`, `unsigned char`). */
#define DV_ARG_U8(v) DV__ARG_SCALAR(DV_UINT8, u8, v)
/** A scalar int16 argument (`dv_i16`, `short`). */
#define DV_ARG_I16(v) DV__ARG_SCALAR(DV_INT16, i16, v)
/** A scalar uint16 argument (`dv_u16`, `unsigned short`). */
#define DV_ARG_U16(v) DV__ARG_SCALAR(DV_UINT16, u16, v)
/** A scalar `int` (int32) argument. */
#define DV_ARG_I32(v) DV__ARG_SCALAR(DV_INT32, i32, v)
/** A scalar `unsigned` (uint32) argument. */
#define DV_ARG_U32(v) DV__ARG_SCALAR(DV_UINT32, u32, v)
/** A scalar int64 argument (`dv_i64` in kernels). */
#define DV_ARG_I64(v) DV__ARG_SCALAR(DV_INT64, i64, v)
/** A scalar uint64 argument (`dv_u64` in kernels). */
#define DV_ARG_U64(v) DV__ARG_SCALAR(DV_UINT64, u64, v)
/** A scalar `float` argument. */
#define DV_ARG_F32(v) DV__ARG_SCALAR(DV_FLOAT32, f32, v)
/** A scalar `double` argument (OpenCL devices need cl_khr_fp64). */
#define DV_ARG_F64(v) DV__ARG_SCALAR(DV_FLOAT64, f64, v)
/** A scalar `bool` argument (a `bool`/`_Bool` parameter; any non-zero v is 1). */
#define DV_ARG_BOOL(v) DV__ARG_BOOL(v)
/** A scalar half-precision argument for a `dv_f16` parameter: the float v rounded as dv_half_from_float does. */
#define DV_ARG_F16(v) DV__ARG_F16(v)
/** An array for a DV_ARRAY(T, name) parameter. */
#define DV_ARG_ARRAY(a) DV__ARG_MEM(DV_ARG_ARRAY, a, NULL, DV_DIR_DEFAULT)
/** An array for a DV_VIEW(T, name) parameter (shape and strides too; at most 8 dimensions). */
#define DV_ARG_VIEW(a) DV__ARG_MEM(DV_ARG_VIEW, a, NULL, DV_DIR_DEFAULT)
/** An array the kernel only reads (a host array is copied in, not back). */
#define DV_ARG_ARRAY_IN(a) DV__ARG_MEM(DV_ARG_ARRAY, a, NULL, DV_DIR_IN)
/** An array the kernel only writes, every element (a host array is copied back, not in). */
#define DV_ARG_ARRAY_OUT(a) DV__ARG_MEM(DV_ARG_ARRAY, a, NULL, DV_DIR_OUT)
/** An array the kernel reads and writes (the default: a host array is copied in and back). */
#define DV_ARG_ARRAY_INOUT(a) DV__ARG_MEM(DV_ARG_ARRAY, a, NULL, DV_DIR_INOUT)
/** DV_ARG_VIEW, read only; see DV_ARG_ARRAY_IN. */
#define DV_ARG_VIEW_IN(a) DV__ARG_MEM(DV_ARG_VIEW, a, NULL, DV_DIR_IN)
/** DV_ARG_VIEW, written only; see DV_ARG_ARRAY_OUT. */
#define DV_ARG_VIEW_OUT(a) DV__ARG_MEM(DV_ARG_VIEW, a, NULL, DV_DIR_OUT)
/** DV_ARG_VIEW, read and written; see DV_ARG_ARRAY_INOUT. */
#define DV_ARG_VIEW_INOUT(a) DV__ARG_MEM(DV_ARG_VIEW, a, NULL, DV_DIR_INOUT)
/** A smart array for a DV_ARRAY(T, name) parameter, read and written (the default). */
#define DV_ARG_SMART(s) DV__ARG_MEM(DV_ARG_SMART, NULL, s, DV_DIR_INOUT)
/** A smart array the kernel only reads: made current on the device, not marked changed. */
#define DV_ARG_SMART_IN(s) DV__ARG_MEM(DV_ARG_SMART, NULL, s, DV_DIR_IN)
/** A smart array the kernel overwrites: never uploaded, marked changed on the device. */
#define DV_ARG_SMART_OUT(s) DV__ARG_MEM(DV_ARG_SMART, NULL, s, DV_DIR_OUT)
/** A smart array for a DV_VIEW(T, name) parameter, read and written. */
#define DV_ARG_SMART_VIEW(s) DV__ARG_MEM(DV_ARG_SMART_VIEW, NULL, s, DV_DIR_INOUT)
/** DV_ARG_SMART_VIEW, read only. */
#define DV_ARG_SMART_VIEW_IN(s) DV__ARG_MEM(DV_ARG_SMART_VIEW, NULL, s, DV_DIR_IN)
/** DV_ARG_SMART_VIEW, overwritten. */
#define DV_ARG_SMART_VIEW_OUT(s) DV__ARG_MEM(DV_ARG_SMART_VIEW, NULL, s, DV_DIR_OUT)

/**
 * Launch k over cfg->grid blocks of cfg->block threads with `nargs`
 * arguments.  The configuration is checked against the kernel and device
 * before anything is queued: a block over max_threads_per_block or a
 * per-dimension limit, an empty or oversized grid, static plus dynamic shared
 * memory over the device's limit all fail with DV_ERR_LAUNCH_CONFIG naming
 * the limit and both numbers.  Arguments: arrays and smart arrays must
 * belong to k's context (DV_ERR_BACKEND_MISMATCH); a DV_VIEW array has at
 * most 8 dimensions; an unknown kind or direction is DV_ERR_KERNEL_ARGUMENT.
 *
 * The kernel's DV_KERNEL declaration is the contract, the same on every
 * backend: devarray read it from the source when the program was built
 * (dv_kernel_param_info shows what it read) and checks every argument
 * against it before anything is allocated, copied or queued, with
 * DV_ERR_KERNEL_ARGUMENT and one message format naming the kernel, the
 * parameter (position, 1-based, and declaration), what it takes and what
 * it was given:
 *  - as many arguments as parameters;
 *  - DV_ARRAY(T, x) takes DV_ARG_ARRAY* or DV_ARG_SMART*; DV_VIEW(T, x)
 *    takes DV_ARG_VIEW* or DV_ARG_SMART_VIEW*; `T x` takes a scalar;
 *  - a scalar's dtype has the parameter's size and kind (integer or
 *    floating point): devarray converts nothing, on any backend.  An integer
 *    of the same size and the other signedness is taken when its value fits
 *    the parameter's type (DV_ARG_I32(n) for an `unsigned` parameter with n
 *    >= 0; DV_ARG_I32(-1) is refused, naming the value); a `bool` parameter
 *    takes DV_ARG_BOOL or a one-byte integer 0 or 1;
 *  - an array's dtype is the parameter's element type (a `char` parameter
 *    takes int8, uint8 and bool arrays, an `unsigned char` one uint8 and
 *    bool); an element type devarray cannot resolve (a struct) is not
 *    checked;
 *  - a DV_ARRAY parameter reads element i at base + i: a device, mapped or
 *    managed array must be C-contiguous (a strided view is refused: pass it
 *    with DV_ARG_VIEW to a DV_VIEW parameter).  Host arrays reach the kernel
 *    through a dense, C-ordered device temporary (below), so any layout of
 *    those is taken; a smart array's device copy (laid out as its host copy,
 *    or adopted) must be C-contiguous too;
 *  - the parameters fit the device's parameter space (CUDA before 12.1:
 *    4 KiB; an array takes 16 bytes, a view 152).
 * A kernel caught as used after its module's release (dv_kernel_retain) is
 * DV_ERR_MISUSE.  Scalars are copied: the
 * caller's values may change as soon as this returns.
 *
 * Host arrays (pageable, pinned or registered) are moved for the kernel, as
 * Numba does: each is copied to a temporary device array (dense: C-ordered
 * for a DV_ARRAY parameter, whatever the host array's layout; laid out as
 * dv_device_array_like would for a DV_VIEW parameter, which sees its shape
 * and strides) on cfg->stream before the kernel, unless its direction is
 * DV_DIR_OUT, and copied back into the host array after the kernel, unless
 * its direction is DV_DIR_IN.  With DV_DIR_OUT the temporary starts
 * uninitialised and all of it is copied back: the kernel must write every
 * element.  The temporaries go back through the deferred-release path once
 * the work is queued.  A host array given twice gets two temporaries (they
 * do not alias), copied back in argument order.  On a stream the host
 * array is read and written in stream order: do not touch it, and keep its
 * memory alive, until the stream has passed the launch (as for
 * dv_array_copy on a stream).  Mapped
 * arrays are passed with no copy (on every backend the device addresses
 * them), as are device and managed arrays.  Smart arrays: see
 * dv_smart_get; the launch makes the device copy current on cfg->stream
 * first (unless DV_DIR_OUT, which only allocates it) and marks it changed
 * afterwards (unless DV_DIR_IN).  Each copy counts in dv_stats.transfers_*.
 * The temporaries (and smart arrays' missing device copies) are all
 * allocated before anything is queued, so running out of memory queues
 * nothing; a failure after the kernel is queued (a copy back) is returned,
 * and a synchronous launch still waits for the stream.
 *
 * Asynchronous on cfg->stream (NULL: synchronous on the default stream); the
 * launch takes part in stream order, events and callbacks like a copy, and
 * arrays released while it is queued are reclaimed only after it has run.
 * A stream holds a bounded number of launches it has not run, as a GPU's
 * launch queue does (host simulator: 1,024; OpenCL: about 1,024 to 1,280;
 * CUDA: the driver's own queue): a launch past that waits until the stream
 * has run one, so what queued launches keep does not grow with their
 * number.  Do not queue that many behind a stream callback that waits for
 * the launching thread.
 * Faults found while the kernel runs (the host simulator's divergent-barrier
 * and out-of-bounds reports) come back from the stream's next synchronize
 * as DV_ERR_KERNEL_FAULT, or from this call when it is synchronous.
 * Host simulator: with the option kernel_timeout (seconds, fractions
 * allowed; 0, the default, is no limit) a launch that runs longer, counted
 * from when the stream starts running it, is stopped: its running blocks
 * are interrupted where they are, blocks not yet started never start, and
 * it comes back the same way as DV_ERR_KERNEL_TIMEOUT, whose message names
 * each stopped block and where its threads were (`file:line` and running,
 * waiting at a barrier, finished, not started; docs/kernels.md).  The
 * stream and the context stay usable, as after a fault.
 * Host simulator, a synchronous launch: when the default stream has nothing
 * queued or running (and host_delay_us is unset), the calling thread runs
 * the kernel itself (with the helper threads for its other blocks) instead
 * of waiting for the stream's worker to run it; for the length of the call
 * the thread gets an alternate signal stack of the simulator's if its own
 * is smaller than 64 KiB, and SIGSEGV, SIGBUS, SIGFPE and SIGILL unblocked;
 * both are as they were when it returns.  Otherwise (work queued, an
 * earlier asynchronous fault not yet returned by a synchronize, or another
 * thread running a synchronous launch of the context at that moment) the
 * launch is queued and waited for: the order, and the error returned (the
 * stream's first), are the same either way.
 */
DV_API dv_status dv_kernel_launch(dv_kernel *k, const dv_launch_config *cfg, size_t nargs,
                                  const dv_arg *args);

/* ---- the compiled-module cache ----------------------------------------- */

/**
 * Where the compiled-module cache is for contexts made with cfg (NULL: the
 * environment's options), and how many entries and bytes it holds.  Creates
 * nothing: a cache that does not exist yet has 0 entries.  *path gets the
 * directory (DV_ERR_INVALID_ARGUMENT if cap is too small).  Outputs may be
 * NULL except path; cleared on failure.  Errors: DV_ERR_NULL_ARGUMENT,
 * DV_ERR_INVALID_ARGUMENT (cap too small, or the directory is a file),
 * DV_ERR_IO.  Reads the directory; thread-safe.
 */
DV_API dv_status dv_kernel_cache_info(const dv_config *cfg, char *path, size_t cap,
                                      uint64_t *entries, uint64_t *bytes);
/**
 * Remove every entry of the compiled-module cache of contexts made with cfg
 * (NULL: the environment's options).  Only the cache's own files are
 * removed.  A cache that does not exist is already clear.  Errors:
 * DV_ERR_INVALID_ARGUMENT (not a directory), DV_ERR_IO (a file could not be
 * removed; the others still are).  Safe while other threads and processes
 * use the cache: their builds miss and rebuild.  Blocks on the file system.
 */
DV_API dv_status dv_kernel_cache_clear(const dv_config *cfg);

/* ======================================================================== */
/* Smart arrays                                                              */
/* ======================================================================== */

/**
 * @defgroup smart Smart arrays
 *
 * One array kept in two memory spaces, host and device, with a valid bit
 * for each copy (Numba's SmartArray).  Data moves only when the copy asked
 * for is stale: dv_smart_get(s, DV_WHERE_DEVICE, ...) uploads only if the
 * host copy changed since, and a chain of launches on a smart array
 * transfers nothing until the host asks for the result.  Writers say what
 * they wrote with dv_smart_mark_changed; the other copy becomes stale.
 *
 * Both copies have the same shape and dtype; their layouts may differ (a
 * copy the smart array allocates is dense, laid out as
 * dv_device_array_like lays out the existing one).  Host copies the smart
 * array allocates (dv_smart_create, a missing host copy) are pinned memory
 * when the backend gives it, else pageable; a DV_SMART_COPY copy is the
 * pageable array dv_array_copy_new makes.
 *
 * Thread safety: every function here may be called from any thread; calls
 * on one smart array are serialised by its lock.  The data itself is not:
 * two threads writing a copy, or one writing while a launch reads, need the
 * caller's own ordering, as for arrays.
 *
 * What cannot be detected: a copy written without dv_smart_mark_changed
 * (the write is lost at the next transfer the other way, or the other copy
 * is used stale); a copy written through an array obtained before the last
 * dv_smart_get of the other side, by a kernel or copy still running, or
 * through another view of adopted memory; work the caller queued on a copy
 * directly, on another stream, while dv_smart_get updates it.  What is detected:
 * dv_smart_mark_changed of a copy that is stale (it was never made current,
 * so a partial write would lose data) is DV_ERR_MISUSE; adopting arrays
 * whose shapes or dtypes differ is DV_ERR_SHAPE_MISMATCH or
 * DV_ERR_DTYPE_MISMATCH; a mapped or managed array (the device addresses it
 * already) is DV_ERR_MISUSE.
 * @{
 */

/** A memory space of a smart array. */
typedef enum dv_where {
  DV_WHERE_HOST = 0,  /**< host memory: the CPU reads and writes it */
  DV_WHERE_DEVICE = 1 /**< device memory: kernels read and write it */
} dv_where;

/** Flag for dv_smart_from_array: copy the array instead of adopting it. */
#define DV_SMART_COPY 0x1u

/**
 * A new smart array with one copy, in `where`, allocated (uninitialised)
 * with the given layout: shape has ndim entries, strides NULL for dense
 * `order` ('C' or 'F') or ndim byte strides, as dv_device_array and
 * dv_host_array.  That copy is current; the other is made when first asked
 * for.  *out gets one reference (release with dv_smart_release); NULL on
 * failure.  Errors: those of dv_device_array / dv_pinned_array,
 * DV_ERR_INVALID_ARGUMENT (where), DV_ERR_BACKEND_MISMATCH (stream).  A
 * device copy is allocated for `stream` (stream-ordered managers); does not
 * block.
 */
DV_API dv_status dv_smart_create(dv_context *ctx, int ndim, const int64_t *shape,
                                 const dv_dtype *dtype, const int64_t *strides, char order,
                                 dv_where where, dv_stream *stream, dv_smart **out);
/**
 * A new smart array over an existing array of any layout.  A host array
 * (pageable, pinned or registered) becomes the host copy, a device array
 * the device copy; that copy is current.  Without DV_SMART_COPY the array is
 * adopted: the smart array holds a reference to it (the caller keeps its
 * own) and uses its memory, so the caller may read and write it through the
 * smart array's rules (dv_smart_get, then dv_smart_mark_changed).  With
 * DV_SMART_COPY a new dense copy is made and `a` is not kept: the copy is
 * queued on `stream` as dv_array_copy_new does (do not change `a` until the
 * stream has passed it; NULL: synchronous); the smart array's later work on
 * other streams waits for it, and a copy of a host array is waited for
 * before the call returns (the host reads a current host copy at once).
 * *out gets one reference;
 * NULL on failure.  Errors: DV_ERR_NULL_ARGUMENT, DV_ERR_MISUSE (a mapped or
 * managed array), DV_ERR_INVALID_ARGUMENT (unknown flags, a dead mapped
 * view), DV_ERR_BACKEND_MISMATCH (stream), allocation failures.
 */
DV_API dv_status dv_smart_from_array(dv_array *a, unsigned flags, dv_stream *stream,
                                     dv_smart **out);
/**
 * Adopt `a` as the copy s does not have yet (a host array for the host
 * copy, a device array for the device copy), for instance a device buffer
 * the program already has.  It is stale until dv_smart_get moves data into
 * it.  Errors: DV_ERR_DTYPE_MISMATCH, DV_ERR_SHAPE_MISMATCH (shapes must be
 * equal, size-1 dimensions included), DV_ERR_BACKEND_MISMATCH (another
 * context), DV_ERR_MISUSE (s already has that copy; a mapped or managed
 * array); nothing changes on failure.  Retains a; does not block.
 */
DV_API dv_status dv_smart_attach(dv_smart *s, dv_array *a);
/**
 * The copy of s in `where`, made current: if it is stale the other copy is
 * copied into it on `stream` (allocating it first if s has none), else
 * nothing moves.  *out is borrowed: owned by s and valid while s lives (the
 * array object never changes; retain it to keep it longer); NULL on
 * failure.
 *
 * Blocking: DV_WHERE_DEVICE does not wait: the upload is queued on `stream`
 * (NULL: synchronous on the default stream), and work that uses the device
 * copy must follow it in that stream's order (same stream, or an event).
 * DV_WHERE_HOST returns when the host copy is readable: when a download was
 * needed it is queued on `stream` after the work already queued there, and
 * this call waits for the stream.  Streams: every transfer and launch a
 * smart array queues on its device copy waits first for the last one it
 * queued there, on whatever stream (an event), so launches on one stream
 * and a get on another need no events from the caller; work the caller
 * queued on the device copy directly (a copy into the array this returns)
 * is ordered by the caller.  When the host copy is already current, the
 * call waits only for an upload from it that a stream may still be reading
 * (so the caller may write it as soon as this returns); otherwise nothing
 * is waited for.  Getting does not mark anything changed:
 * write, then call dv_smart_mark_changed.  Errors: DV_ERR_NULL_ARGUMENT,
 * DV_ERR_INVALID_ARGUMENT (where), DV_ERR_BACKEND_MISMATCH (stream),
 * allocation and transfer failures (then the copy stays stale).
 * Each transfer counts in dv_stats.transfers_*.
 */
DV_API dv_status dv_smart_get(dv_smart *s, dv_where where, dv_stream *stream, dv_array **out);
/**
 * Record that the copy in `where` was written: the other copy becomes
 * stale and is updated only when asked for (a device-side change is not
 * copied to the host until dv_smart_get(host)).  The copy must be current:
 * DV_ERR_MISUSE when it is stale or absent (get it first), and nothing
 * changes.  DV_ERR_INVALID_ARGUMENT for an unknown `where`.  Does not block.
 */
DV_API dv_status dv_smart_mark_changed(dv_smart *s, dv_where where);
/** 1 when s has a current copy in `where`, 0 when it is stale or absent (or s is NULL). */
DV_API int dv_smart_is_current(const dv_smart *s, dv_where where);
/** The dtype of s (borrowed from s). */
DV_API const dv_dtype *dv_smart_dtype(const dv_smart *s);
/** Number of dimensions of s (0 for a 0-d array or NULL). */
DV_API int dv_smart_ndim(const dv_smart *s);
/** The shape of s (ndim entries, borrowed from s; NULL for 0-d or NULL). */
DV_API const int64_t *dv_smart_shape(const dv_smart *s);
/** Add a reference to s and return s (NULL: returns NULL).  Thread-safe. */
DV_API dv_smart *dv_smart_retain(dv_smart *s);
/**
 * Drop a reference; the last one releases both copies (adopted arrays lose
 * the smart array's reference only), through the deferred path as for
 * arrays: queued work that uses them completes first.  NULL is a no-op.
 * The context is DV_ERR_BUSY while a smart array's copies live.
 */
DV_API void dv_smart_release(dv_smart *s);

/** @} */

/* ======================================================================== */
/* Interop: native handles, foreign memory, DLPack, IPC                      */
/* ======================================================================== */

/* ---- native handles and foreign memory --------------------------------- */

/**
 * The backend's own context and device: CUDA (CUcontext, CUdevice cast to
 * a pointer-sized integer), HIP (hipCtx_t, the device ordinal), OpenCL (cl_context, cl_device_id), host (NULL,
 * NULL).  Borrowed: never release them.  Outputs may be NULL (cleared on
 * failure).  DV_ERR_NULL_ARGUMENT for a NULL ctx.  Thread-safe; does not
 * block.
 */
DV_API dv_status dv_context_native(dv_context *ctx, void **context, void **device);
/**
 * The native stream (CUstream / hipStream_t / cl_command_queue) behind s
 * (HIP's legacy default stream is NULL, a valid result) (for the default
 * stream pass dv_context_default_stream(ctx)).  Borrowed.  Work the caller queues there directly is
 * ordered with devarray's work on s.  Host simulator: DV_ERR_NOT_SUPPORTED.
 * *handle is NULL on failure.  Thread-safe; does not block.
 */
DV_API dv_status dv_stream_native(dv_stream *s, void **handle);
/**
 * The native memory of a device, mapped or managed array: CUDA (the
 * CUdeviceptr of the allocation, as a pointer), HIP (the device pointer),
 * OpenCL (the cl_mem), host
 * simulator (a host pointer); *offset is the byte offset of element 0 in it.
 * Borrowed: valid while the array lives.  Host arrays: DV_ERR_MISUSE; an
 * empty array gives NULL and 0.  Outputs may be NULL (cleared on failure).
 * Thread-safe; does not block.
 */
DV_API dv_status dv_array_native(const dv_array *a, void **buffer, size_t *offset);
/**
 * The memory manager's block behind device array a, as the manager's alloc
 * returned it (buffer, offset and the manager's own handle: what a plugged-in
 * manager uses to find its record of the memory), and in *offset the byte
 * offset of a's element 0 from the block's start.  *usable is 1 when the
 * block is device memory of the backend, 0 when a plugged-in manager handed
 * out a buffer the backend did not allocate (the array is then carried, and
 * given back to the manager's free, but every copy, launch or export of it
 * is refused with DV_ERR_INVALID_ARGUMENT; see dv_memory_manager).
 * DV_ERR_MISUSE for an array whose memory no manager gave (host, pinned,
 * mapped, managed, wrapped or IPC memory); an empty array gives a zeroed
 * block.  Outputs may be NULL (cleared on failure).  Thread-safe; does not block.
 */
DV_API dv_status dv_array_block(const dv_array *a, dv_block *block, size_t *offset, int *usable);
/**
 * Whether bytes [offset, offset + bytes) from `native` (native memory as
 * dv_array_native gives it: a host simulator address, an OpenCL cl_mem)
 * lie in a live device buffer of ctx's backend: DV_OK, else
 * DV_ERR_INVALID_ARGUMENT (the memory is never read: any value may be
 * asked about, such as a foreign __cuda_array_interface__ pointer, before
 * dv_device_array_wrap is given it).  DV_ERR_NOT_SUPPORTED where the backend
 * cannot tell: CUDA and HIP device pointers, which the driver checks itself
 * on every use.  Thread-safe; does not block.
 */
DV_API dv_status dv_context_check_native(dv_context *ctx, void *native, size_t offset, size_t bytes);
/** Called once when devarray no longer uses wrapped memory. */
typedef void (*dv_release_fn)(void *user);
/**
 * An array over device memory devarray did not allocate: `buffer` (a
 * CUdeviceptr, a HIP device pointer, a cl_mem, or on the host simulator a
 * host pointer) of `bytes`
 * bytes, element 0 at byte `offset`, with the given layout (strides NULL:
 * C order; byte strides multiples of the dtype's alignment, offset aligned
 * too) that must fit inside it.  devarray never frees the memory.  When the
 * last array over it is released, the release joins the context's
 * pending-deallocation queue like a device free: at the next flush (the
 * queue's count limit, dv_context_flush_deallocs, an out-of-memory retry,
 * dv_context_destroy), on the thread that flushes and after the device is
 * idle, devarray calls release(user) if release is not NULL; release must
 * not call devarray functions of this context.  On failure release is not
 * called.  devarray trusts `bytes` where it cannot check it; on CUDA a range
 * that runs past the driver's allocation holding `buffer` is refused
 * (DV_ERR_INVALID_ARGUMENT).  Errors: as dv_device_array (DV_ERR_BAD_SHAPE,
 * DV_ERR_BAD_STRIDES, DV_ERR_OVERFLOW, ...), DV_ERR_INVALID_ARGUMENT,
 * DV_ERR_NOT_SUPPORTED where the backend cannot wrap.  *out is one
 * reference (NULL on failure).  Does not block; thread-safe.
 */
DV_API dv_status dv_device_array_wrap(dv_context *ctx, void *buffer, size_t offset, size_t bytes,
                                      int ndim, const int64_t *shape, const dv_dtype *dtype,
                                      const int64_t *strides, dv_release_fn release, void *user,
                                      dv_array **out);

/* ---- DLPack ------------------------------------------------------------ */

/**
 * @defgroup dlpack DLPack
 * Arrays to and from other libraries (NumPy, CuPy, PyTorch, JAX) through
 * DLPack's `DLManagedTensor` (the unversioned structure of DLPack 0.x, as
 * `<dlpack/dlpack.h>` declares it: kept for old consumers) and DLPack 1.x's
 * `DLManagedTensorVersioned` (as `<devarray_dlpack.h>` declares it, under
 * the name dv_dlpack_versioned, so that it is there whichever version the
 * system's dlpack.h is; with a 1.x dlpack.h the two layouts are checked
 * equal at compile time and the pointers may be cast).  This header
 * includes neither: the functions take and return pointers to the
 * forward-declared `struct DLManagedTensor` and `struct
 * dv_dlpack_versioned`, which callers with the headers use as is and
 * callers without them (a ctypes binding) pass around as pointers.  A
 * devarray built without dlpack.h (CMake says so) has all four functions,
 * and they return DV_ERR_NOT_SUPPORTED.
 * @{ */

struct DLManagedTensor;

/** consumer_stream value for "do not order anything" (DLPack's stream -1): the consumer synchronizes itself. */
#define DV_DLPACK_NO_SYNC ((void *)(intptr_t)-1)

/**
 * Export a as a new DLPack tensor (*out) that views a's memory (no copy).
 *
 * Device: the host simulator's device and managed arrays and every host
 * array are `kDLCPU` (the simulator's device memory is host memory, so a CPU
 * consumer such as NumPy reads it); on CUDA device arrays are `kDLCUDA`
 * (device id: the context's device), managed arrays `kDLCUDAManaged`,
 * pinned and mapped arrays `kDLCUDAHost`; on HIP device and managed arrays
 * are `kDLROCM` (DLPack has no ROCm managed type; device id: the context's
 * device), pinned and mapped arrays `kDLROCMHost`; on OpenCL device arrays are
 * `kDLOpenCL` (device id 0) with `data` the cl_mem and `byte_offset` the
 * offset of element 0 in it.  Elsewhere `data` is the address of element 0
 * and `byte_offset` 0.  `strides` are always given (in elements; negative
 * ones as in a); the dtype is `kDLInt`/`kDLUInt`/`kDLFloat`/`kDLComplex`
 * with lanes 1.
 *
 * Ordering ("stream"): `stream` is the devarray stream whose work on a the
 * consumer must see (NULL: the context's default stream).  With
 * `consumer_stream` NULL the call blocks until `stream` has finished
 * everything queued on it so far, so the tensor may then be used anywhere.
 * With a native `consumer_stream` (a CUstream on CUDA, including DLPack's 1
 * and 2 for the legacy and per-thread default streams), devarray records an
 * event on `stream` and makes `consumer_stream` wait for it: work queued on
 * consumer_stream after the call runs after that work; the call does not
 * block.  Backends without that ability (OpenCL) block as for NULL.
 * DV_DLPACK_NO_SYNC orders nothing and never blocks.  A `kDLCPU` tensor
 * takes no consumer stream other than NULL or DV_DLPACK_NO_SYNC
 * (DV_ERR_INVALID_ARGUMENT).  (For `__dlpack__(stream=None)` on CUDA a
 * binding passes `(void *)1`, the legacy default stream, as the protocol
 * says.)
 *
 * Ownership: the tensor holds a reference to a (so the memory and the
 * context live) until the consumer calls its `deleter`, exactly once, from
 * any thread; releasing a meanwhile is fine.  A consumer may still have
 * work queued on its own streams when it calls the deleter: with a
 * stream-ordered manager (the pool), device memory exported as a non-CPU
 * tensor is freed only after the device has finished everything queued
 * (on CUDA that includes the consumer's streams of the same context).  Errors (nothing is made, *out
 * NULL): DV_ERR_NULL_ARGUMENT; DV_ERR_BAD_DTYPE (records, and bool with
 * DLPack 0.x, which has no bool type); DV_ERR_BAD_STRIDES (a byte stride
 * that is not a multiple of the itemsize: DLPack counts strides in
 * elements); DV_ERR_INVALID_ARGUMENT (a device view whose mapped scope
 * ended); DV_ERR_BACKEND_MISMATCH (stream of another context); the stream's
 * pending error; DV_ERR_NOT_SUPPORTED (no dlpack.h at build time).
 * Thread-safe.
 */
DV_API dv_status dv_array_to_dlpack(dv_array *a, dv_stream *stream, void *consumer_stream,
                                    struct DLManagedTensor **out);
/**
 * Import a DLPack tensor as an array that views its memory (no copy).
 *
 * Where it lands: on the host simulator a `kDLCPU` tensor becomes a device
 * array (kernels and copies use it in place); on CUDA a `kDLCUDA` or
 * `kDLCUDAManaged` tensor of the context's device becomes a device array,
 * and `kDLCPU`/`kDLCUDAHost` tensors host arrays; on HIP a `kDLROCM` tensor
 * of the context's device becomes a device array, and `kDLCPU`/`kDLROCMHost`
 * tensors host arrays; on OpenCL a `kDLOpenCL`
 * tensor (device id 0; `data` a cl_mem of the context) becomes a device
 * array and a `kDLCPU` tensor a host array.  The producer must have ordered
 * its work before the call (DLPack's contract: the consumer names its
 * stream to the producer); devarray reads nothing at import.
 *
 * Every field is checked, each refusal with its status: ndim outside
 * 0..DV_MAXDIMS, a NULL shape with ndim > 0, a negative extent
 * (DV_ERR_BAD_SHAPE); lanes other than 1, a code/bits pair with no devarray
 * dtype (DV_ERR_BAD_DTYPE); a device type this context cannot use or
 * another device id (DV_ERR_BACKEND_MISMATCH); NULL data with elements
 * (DV_ERR_NULL_ARGUMENT); element 0 (data + byte_offset) not aligned to the
 * dtype (DV_ERR_BAD_STRIDES); the element count or byte size (of the
 * non-zero extents, even beside a zero one), strides in bytes, the
 * layout's extent or data + byte_offset + extent overflowing, byte_offset
 * above INT64_MAX (DV_ERR_OVERFLOW); `strides` NULL means C order.  The
 * view covers exactly the bytes its layout reaches.
 *
 * Ownership: on success devarray owns the tensor and calls its deleter
 * (when not NULL) exactly once after the last array over it is released:
 * the release joins the pending-deallocation queue (see
 * dv_device_array_wrap), so the deleter runs at the next flush, after the
 * device is idle, on the flushing thread.  On failure the caller still
 * owns the tensor (the deleter is not called) and *out is NULL.  Does not
 * block.  Thread-safe.
 */
DV_API dv_status dv_array_from_dlpack(dv_context *ctx, struct DLManagedTensor *tensor,
                                      dv_array **out);

/* DLPack 1.x: the versioned structure (DLManagedTensorVersioned), declared
 * as struct dv_dlpack_versioned by <devarray_dlpack.h> (it includes
 * dlpack.h), with its flags DV_DLPACK_FLAG_*. */
struct dv_dlpack_versioned;

/** dv_array_from_dlpack_versioned: accept a tensor with DV_DLPACK_FLAG_READ_ONLY (the caller then must not write the array). */
#define DV_DLPACK_IMPORT_READ_ONLY 1u

/**
 * Export a as a new DLPack 1.x tensor (DLManagedTensorVersioned, *out):
 * everything as dv_array_to_dlpack (device, dtype, strides, ordering,
 * ownership: the tensor holds a reference to a until its deleter is called,
 * exactly once, from any thread), with `version` {DV_DLPACK_MAJOR,
 * DV_DLPACK_MINOR} (1.0) and `flags` as given: DV_DLPACK_FLAG_READ_ONLY
 * (the consumer must not write: devarray arrays are all writable, so the
 * flag is the caller's to give, e.g. for a view it only lends to be read),
 * DV_DLPACK_FLAG_IS_COPIED (a is a copy made for this exchange), or 0.
 * Errors: those of dv_array_to_dlpack; DV_ERR_INVALID_ARGUMENT for other
 * flag bits (nothing is made, *out NULL).  Blocks as dv_array_to_dlpack
 * does (only with consumer_stream NULL).  Thread-safe.
 */
DV_API dv_status dv_array_to_dlpack_versioned(dv_array *a, dv_stream *stream,
                                              void *consumer_stream, uint64_t flags,
                                              struct dv_dlpack_versioned **out);
/**
 * Import a DLPack 1.x tensor (DLManagedTensorVersioned) as an array that
 * views its memory (no copy): placement, field checks and their statuses,
 * and ownership as for dv_array_from_dlpack (on success devarray calls the
 * tensor's deleter exactly once, after the last array over it is released,
 * at the next deallocation flush; on failure the caller keeps the tensor and
 * the deleter is not called).
 *
 * Versions: a major version other than 1 is refused (DV_ERR_NOT_SUPPORTED,
 * naming both versions: a new major version changes the layout, so no
 * other field is read); any minor version of 1 is accepted (minor versions
 * only add).  Flags: devarray has no read-only arrays (kernels and copies
 * may write any array), so a tensor with DV_DLPACK_FLAG_READ_ONLY is
 * refused with DV_ERR_INVALID_ARGUMENT naming the flag unless `flags` has
 * DV_DLPACK_IMPORT_READ_ONLY, by which the caller promises not to write the
 * array (devarray does not enforce it).  DV_DLPACK_FLAG_IS_COPIED and
 * unknown bits are ignored.  `flags` bits other than
 * DV_DLPACK_IMPORT_READ_ONLY are DV_ERR_INVALID_ARGUMENT.  Does not block.
 * Thread-safe.
 */
DV_API dv_status dv_array_from_dlpack_versioned(dv_context *ctx,
                                                struct dv_dlpack_versioned *tensor,
                                                unsigned flags, dv_array **out);
/** @} */

/* ---- IPC handles ------------------------------------------------------- */

/**
 * @defgroup ipc IPC handles
 * A device array's memory shared with another process of the same user on
 * the same machine (Numba's `get_ipc_handle` / `open_ipc_array`).  CUDA
 * uses the driver's IPC (cuIpcGetMemHandle / cuIpcOpenMemHandle); a
 * pool-allocated array exports its pool segment and its offset in it, and
 * the opener sees only the array's bytes.  The host simulator shares its
 * device memory through memfds, in contexts created with the option
 * `host_ipc=on` (each allocation then holds a file descriptor).  OpenCL
 * has no IPC: DV_ERR_NOT_SUPPORTED.
 * @{ */

/** Bytes in an IPC handle. */
#define DV_IPC_HANDLE_SIZE 128
/** An IPC handle: plain bytes, copyable and sendable as they are (a pipe, a file, MPI). */
typedef struct dv_ipc_handle {
  unsigned char bytes[DV_IPC_HANDLE_SIZE]; /**< opaque; all of them travel */
} dv_ipc_handle;

/**
 * Describe device array a's memory in *out for dv_ipc_open in another
 * process.  The handle is valid while a's memory lives (until the last
 * view of a is released and its deferred free has run); the exporter must
 * keep a alive while other processes use it, as with Numba.  Does not
 * wait: synchronize the stream that wrote a before the other process
 * reads.  Errors (*out zeroed): DV_ERR_NULL_ARGUMENT; DV_ERR_MISUSE (not a
 * device array, a mapped scope's device view, or memory devarray does not
 * own: wrapped, DLPack-imported, opened from a handle); DV_ERR_INVALID_ARGUMENT (an empty array, a device
 * view whose mapped scope ended); DV_ERR_NOT_SUPPORTED (OpenCL; the host
 * simulator without host_ipc=on); the driver's error.  Thread-safe.
 */
DV_API dv_status dv_ipc_export(const dv_array *a, dv_ipc_handle *out);
/**
 * Open a handle another process exported, as a device array with the
 * given layout (strides NULL: C order), element 0 where the exported
 * array's element 0 is; the layout must fit inside the exported array's
 * allocation (DV_ERR_BAD_STRIDES otherwise).  The memory is mapped until
 * the last view of *out is released (dv_ipc_close or dv_array_release;
 * the unmap joins the deferred-deallocation queue and runs once the device
 * is idle).  Refusals (*out NULL): DV_ERR_INVALID_ARGUMENT (not a devarray
 * handle or another format version; a stale handle: the exporter freed
 * the memory or exited -- the host simulator detects both, CUDA reports
 * what the driver says); DV_ERR_BACKEND_MISMATCH (a handle from another
 * backend); DV_ERR_MISUSE (the handle was exported by this process: use
 * the array itself -- CUDA refuses this too); DV_ERR_NOT_SUPPORTED
 * (OpenCL); layout errors as dv_device_array_wrap.  Does not block (it
 * maps memory; the driver may take a while).  Thread-safe.
 */
DV_API dv_status dv_ipc_open(dv_context *ctx, const dv_ipc_handle *handle, int ndim,
                             const int64_t *shape, const dv_dtype *dtype, const int64_t *strides,
                             dv_array **out);
/**
 * Release the caller's reference to an array dv_ipc_open made (or a view
 * of it) and flush the deferred deallocations, so the mapping closes now
 * when no other view remains (later, with the last view, otherwise; inside
 * dv_defer_cleanup_begin/end, at the first flush after the scope).
 * DV_ERR_MISUSE (and nothing changes) for any other array; otherwise the
 * status of the flush.  May block while the device finishes work that uses
 * the mapping.  Thread-safe (a reference is released, as dv_array_release).
 */
DV_API dv_status dv_ipc_close(dv_array *a);
/** @} */

/* ======================================================================== */
/* For extensions                                                            */
/* ======================================================================== */

/**
 * For libraries built on devarray's public API (libdevarray_mpi): set this
 * thread's dv_last_error() message to `message` (NULL: the status's
 * description) and return `s`, so that an extension's failures read like
 * devarray's own.  Thread-safe (the message is thread-local); never blocks.
 */
DV_API dv_status dv_error_set(dv_status s, const char *message);

#ifdef __cplusplus
}
#endif
#endif /* DEVARRAY_H */
