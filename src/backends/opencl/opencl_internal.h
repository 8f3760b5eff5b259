/*
 * Shared between the OpenCL backend's files, one mechanism each:
 *   opencl.c           loading libOpenCL.so.1, probe, open and close, the
 *                      backend table
 *   opencl_common.c    the entry points' table, error names and statuses
 *   opencl_select.c    device discovery and choice
 *   opencl_memory.c    device memory (the live-buffer set), host memory
 *   opencl_copy.c      rect copies and memset
 *   opencl_stream.c    streams, host callbacks (the callback thread)
 *   opencl_event.c     events
 *   opencl_kernel.c    kernels, launches, native handles
 *   opencl_program.c   building programs, the cached image
 *   opencl_copykernel.c  the built-in strided-copy kernel
 */
#ifndef DV_OPENCL_INTERNAL_H
#define DV_OPENCL_INTERNAL_H

#include "../../core/core.h"
#include "../backend.h"
#include "../graphrec.h"
#include "opencl.h"

#if DV_HAVE_OPENCL_HEADERS

/* The entry points loaded from libOpenCL.so.1 (opencl_symbols.def). */
typedef struct dv_cl_api {
#define DV_CL(name) __typeof__(&name) name;
#include "opencl_symbols.def"
#undef DV_CL
} dv_cl_api;

extern dv_cl_api dv__cl;
#define cl dv__cl /* every file calls cl.clFoo(...) */

/* A stream holds at most about CL_MARKS * CL_MARK_EVERY launches the driver
 * has not run (dv__clk_launch). */
#define CL_MARK_EVERY 256
#define CL_MARKS 4

struct dv_bstream {
  dv_rec *rec; /* first: the graph capture's recorder, NULL when none (../graphrec.h) */
  cl_command_queue q;
  struct dv_bstream *next;
  pthread_mutex_t m;
  cl_event last; /* event of the last command queued (for query), or NULL */
  /* The queue was handed out (dv_stream_native): work devarray does not
   * see may be queued on it, so a query enqueues a marker first. */
  _Atomic bool native;
  /* Launches queued since `last` without an event of their own (an event per
   * launch costs ~20% of an empty launch): a query enqueues a marker first. */
  _Atomic bool untracked;
  /* The launch queue's bound (opencl_kernel.c, dv__clk_launch), under m:
   * launches queued, and the events of every CL_MARK_EVERY-th one not yet
   * waited for (oldest at mark0). */
  unsigned launches;
  cl_event marks[CL_MARKS];
  int nmarks, mark0;
};

struct dv_bevent {
  pthread_mutex_t m;
  cl_event ev; /* the marker of the last record, or NULL */
  unsigned flags;
};

typedef struct cl_state {
  cl_platform_id platform;
  cl_device_id device;
  cl_context ctx;
  cl_command_queue internal; /* maps, unmaps */
  dv_device_info info;
  size_t used;               /* bytes allocated (OpenCL cannot report free memory) */
  /* The buffers mem_alloc made and mem_free has not freed, with their
   * sizes (under lock): an open-addressing set keyed by the cl_mem value,
   * so that buffer_check tells a cl_mem of ours from any other value
   * without handing that value to the driver, which would read through it. */
  struct cl_live *live;       /* (opencl_memory.c) */
  size_t live_cap, live_n;   /* live_cap: 0 or a power of two */
  pthread_mutex_t lock;      /* used, streams */
  dv_bstream *streams;
  /* Kernels (opencl_kernel.c): the built-in strided-copy module, built on
   * first use under kmu; copy_status remembers a failed build. */
  pthread_mutex_t kmu;
  struct dv_bmodule *copy_mod;
  dv_status copy_status;
  cl_uint addr_bits;  /* CL_DEVICE_ADDRESS_BITS */
  void *subgroup_fn;  /* clGetKernelSubGroupInfo(KHR) when the device has sub-groups */
  char *extensions;   /* CL_DEVICE_EXTENSIONS (dv__malloc'd; NULL if unreadable): the cl_ macros
                         the compiler defines, for the kernel layer's signature reader */
  int wave;           /* the device's sub-group size where known, else 1 */
  /* Host callbacks (opencl_stream.c) run on this thread, never inside an OpenCL call (PoCL
   * runs an event's callback on the calling thread when the event is
   * already complete, which would run user code, and block, there). */
  pthread_t cb_thread;
  pthread_mutex_t cb_m;
  pthread_cond_t cb_cv;
  struct cl_cb *cb_head, *cb_tail;
  bool cb_stop;
} cl_state;

/* Remember ev as the stream's last command (takes ownership of ev). */
static inline void cl_track(dv_bstream *s, cl_event ev) {
  pthread_mutex_lock(&s->m);
  cl_event old = s->last;
  s->last = ev;
  pthread_mutex_unlock(&s->m);
  if (old) cl.clReleaseEvent(old);
}

/* opencl_kernel.c: per-context setup and teardown of the kernel state. */
void dv__cl_kernel_init(cl_state *st);
void dv__cl_kernel_fini(cl_state *st);

/* The backend table's methods (opencl.c's dv__backend_opencl), declared by
 * expanding ../backend_methods.def twice.  As dv__clb_<method>: memory and
 * host memory (opencl_memory.c, with buffer_check), copies (opencl_copy.c),
 * streams (opencl_stream.c), events (opencl_event.c); probe, open, close
 * and device_info are opencl.c's own (static clb_<method>).  As
 * dv__clk_<method>: kernels, native handles and the strided copy
 * (opencl_kernel.c, opencl_program.c, opencl_copykernel.c).  Each file
 * defines only its groups' methods.  As dv__clg_<method> (opencl_graph.c):
 * the graph group, and the stream methods a capture records (each hands
 * its work to the recorder while the stream captures, else calls the
 * dv__clb_ or dv__clk_ method). */
#define DV_BE_METHOD(group, ret, method, params) ret dv__clg_##method params;
#include "../backend_methods.def"
#undef DV_BE_METHOD
#define DV_BE_METHOD(group, ret, method, params) ret dv__clb_##method params;
#include "../backend_methods.def"
#undef DV_BE_METHOD
#define DV_BE_METHOD(group, ret, method, params) ret dv__clk_##method params;
#include "../backend_methods.def"
#undef DV_BE_METHOD
/* A failed OpenCL call as a status and message naming it (opencl_common.c). */
dv_status dv__clk_fail(cl_int code, const char *what);
#define CL_TRY(call, what)                                  \
  do {                                                      \
    cl_int e_ = (call);                                     \
    if (e_ != CL_SUCCESS) return dv__clk_fail(e_, what);    \
  } while (0)

/* Finish every stream of the context (opencl_stream.c; stream_sync of NULL,
 * and before host memory is freed). */
dv_status dv__cl_sync_all(cl_state *st);
/* Start and stop the context's callback thread (opencl_stream.c; open, close). */
dv_status dv__cl_callbacks_start(cl_state *st);
void dv__cl_callbacks_stop(cl_state *st);
/* FNV-1a, 64 bits (opencl_common.c): the image checksum and the target hash. */
#define CLK_FNV_INIT 0xcbf29ce484222325ull
uint64_t dv__clk_fnv(uint64_t h, const void *p, size_t n);

/* ---- device discovery and choice (opencl_select.c) ---- */

#define CL_MAX_DEVS 64

typedef struct cl_dev_entry {
  cl_platform_id p;
  cl_device_id d;
  unsigned pi, di;
  cl_device_type type;
  bool simulator; /* an interpreter such as Oclgrind: never chosen automatically */
  char name[256];
} cl_dev_entry;

/* Every device of every platform, at most CL_MAX_DEVS, with their types,
 * names and whether each is a simulator; DV_ERR_BACKEND_UNAVAILABLE when
 * there are none. */
dv_status dv__cl_enumerate(cl_dev_entry *out, unsigned *n);
/* The device cfg->device names ("p:d", an ordinal, a name substring) or,
 * empty, the default choice; DV_ERR_BACKEND_UNAVAILABLE with the reason. */
dv_status dv__cl_choose(const dv_backend_config *cfg, cl_dev_entry *chosen);

#endif /* DV_HAVE_OPENCL_HEADERS */
#endif
