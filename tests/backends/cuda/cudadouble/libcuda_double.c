/*
 * A strict test double of the CUDA driver API: every entry point of
 * src/backends/cudafam/fam_symbols.def, built by the tests as a shared library
 * named libcuda.so.1 in its own build folder.  The cuda and cuda-pool CTest
 * entries put that folder first on LD_LIBRARY_PATH, so the backend's
 * dlopen("libcuda.so.1") finds it, exactly as it would find a real driver.
 * It is never installed and the library knows nothing about it: it is a
 * test tool, not a fallback.  It is also the engine of the HIP runtime
 * double (tests/backends/hip/hipdouble/libamdhip64_double.c compiles this file again with
 * DVDOUBLE_HIP: the cu* functions hidden, AMD's limits, HIP's names in
 * messages; see the DBL_* macros below).
 *
 * What it models, from the driver API reference:
 *  - cuInit first (CUDA_ERROR_NOT_INITIALIZED before it), two devices by
 *    default (CUDA_DOUBLE_DEVICES=1..4), each with DV_DOUBLE_MEMORY bytes of
 *    device memory (default 1 GiB) and peer access between them.
 *  - Primary contexts, retained and released with a count; the calling
 *    thread's current context (cuCtxSetCurrent/GetCurrent); a call that
 *    needs a context fails with CUDA_ERROR_INVALID_CONTEXT when there is
 *    none or it was released.  Released to zero, a primary context frees
 *    everything it owned; retained again it starts clean.
 *  - Device memory lives in host memory the double tracks, at addresses of
 *    its own that the host cannot dereference (so a library that touches
 *    device memory directly crashes here too).  Every CUdeviceptr is checked
 *    against the allocations when a call is made and again when the queued
 *    operation runs: an unknown address or a range past the end is
 *    CUDA_ERROR_INVALID_VALUE at the call; memory freed while queued work
 *    still used it is CUDA_ERROR_ILLEGAL_ADDRESS, sticky for the context
 *    (as an unrecoverable device fault is).
 *  - Pinned memory (cuMemHostAlloc) and registered ranges
 *    (cuMemHostRegister: CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED on any
 *    overlap, NOT_REGISTERED on unregistering what was not); mapped pointers
 *    (cuMemHostGetDevicePointer) only for DEVICEMAP memory.
 *  - Streams run their operations in order on a worker thread each; the
 *    legacy default stream (NULL or 0x1) waits for every blocking stream of
 *    its context and they wait for it; the per-thread default stream (0x2)
 *    is a stream per thread and context.  Copies to or from pageable host
 *    memory are synchronous as the reference says: host to device waits for
 *    the stream, copies, and returns; device to pageable host returns only
 *    when the copy is done.  A pageable copy that would wait for more than
 *    CUDA_DOUBLE_BLOCK_S seconds (default 20) is reported on stderr as the
 *    deadlock it is on a real GPU and the process is aborted.
 *  - Host functions (cuLaunchHostFunc) and stream callbacks
 *    (cuStreamAddCallback) run on the stream's worker and may not call the
 *    driver (CUDA_ERROR_NOT_PERMITTED).  They run one at a time in the
 *    whole process, as the reference allows ("callbacks ... may be
 *    serialized"): a host function that blocks holds every other one back.
 *  - cuEventDestroy of an event whose record is still queued returns at
 *    once; the event goes when the record completes (waits already queued
 *    on it still wait).
 *  - Graph capture, as far as a stream under capture refuses what cannot be
 *    captured: dvdouble_capture(stream, 1) puts a created stream in capture
 *    mode (what cuStreamBeginCapture would); work queued on it is counted,
 *    not run; cuStreamAddCallback, a copy with pageable host memory,
 *    cuStreamSynchronize and cuStreamQuery on it, and cuCtxSynchronize while
 *    any stream of the context captures, fail with
 *    CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidate the capture; work
 *    on the legacy stream while a blocking stream captures fails with
 *    CUDA_ERROR_STREAM_CAPTURE_IMPLICIT; a wait for an event (cuStreamWaitEvent)
 *    is CUDA_ERROR_STREAM_CAPTURE_ISOLATION.  cuStreamIsCapturing reports it.
 *    cuStreamBeginCapture / cuStreamEndCapture do the same and keep the
 *    captured operations as a graph, which cuGraphInstantiateWithFlags
 *    copies and cuGraphLaunch queues again on its stream (see "graphs").
 *  - cuMemcpy2D/3D: pitches below the width or above the device's maximum
 *    pitch (2^31 - 1 bytes, CU_DEVICE_ATTRIBUTE_MAX_PITCH) are
 *    CUDA_ERROR_INVALID_VALUE; a device-to-device 2-D/3-D copy whose pitches
 *    are not multiples of 4 bytes is refused as the reference allows
 *    ("may fail for pitches not computed by cuMemAllocPitch").
 *  - Modules: PTX is parsed for its .entry names and parameter sizes and its
 *    .global/.const variables; launches are checked (dimensions, shared
 *    memory, parameters read with the sizes the PTX declares).  The double
 *    cannot run PTX: it runs host versions of devarray's own strided-copy
 *    kernels (dv_copy_w*_i32/_i64) and records every other launch without
 *    running it.  dvdouble_launches() says how many it skipped.  A launch
 *    waits while its stream holds 1,024 operations not yet done, as a
 *    driver's full launch queue makes it wait.
 *
 * Test-only controls (dlsym on the same libcuda.so.1): dvdouble_is_double,
 * dvdouble_hold(1/0) holds every stream's worker before its next operation,
 * dvdouble_launches, dvdouble_set_free_limit, dvdouble_set_driver_version
 * (what cuDriverGetVersion says: 13.0 unless CUDA_DOUBLE_DRIVER_VERSION
 * says otherwise) and dvdouble_set_compute_capability (99.0 by default);
 * dvdouble_pinned (page-locked bytes of cuMemHostAlloc now, and their peak
 * since dvdouble_pinned_reset_peak), dvdouble_calls (how often a few entry
 * points were called: cuCtxSynchronize, cuMemFree_v2, cuMemFreeHost,
 * cuMemHostUnregister, cuMemHostAlloc, cuStreamAddCallback), dvdouble_capture
 * (above), dvdouble_set_max_pitch (CU_DEVICE_ATTRIBUTE_MAX_PITCH and the
 * pitch check of 2-D/3-D copies; 0: 2^31 - 1 again) and dvdouble_set_uva
 * (0: no unified addressing, CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING is 0 and
 * mapped host memory has a different device address on each device, host
 * address + device * 2^56, as the reference allows without it; 1: back);
 * dvdouble_set_memops(0/1): stream memory operations (cuStreamWaitValue64
 * and CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS; on by default, as
 * on every CUDA 12+ driver) -- off, the attribute is 0 and the call says
 * CUDA_ERROR_NOT_SUPPORTED; contexts read the attribute when they open
 * (CUDA_DOUBLE_MEMOPS=0 starts with them off).
 *  - Fail points: dvdouble_fail(name, k, result) makes the k-th next call
 *    of an entry point that has one (FAILPOINT) return result, once;
 *    dvdouble_fail_calls(name) counts its calls.  Fault sweeps fail each
 *    such call in turn.
 *  - Managed memory's hints (cuMemPrefetchAsync[_v2], cuMemAdvise[_v2];
 *    issue 40): the reference's argument rules, the prefetch queued on its
 *    stream, the hints kept per allocation (dvdouble_managed_hints,
 *    dvdouble_managed_range read them back), CU_DEVICE_ATTRIBUTE_
 *    CONCURRENT_MANAGED_ACCESS from dvdouble_set_concurrent_managed (see
 *    the section after cuMemAllocManaged).
 *  - cuStreamWaitValue64 waits (GEQ, wrapping as the reference says) on a
 *    word of device or mapped pinned memory; the stream's worker polls it
 *    (every 50 us) and a context with a sticky error skips the wait.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../../../../src/backends/cudafam/fam_api.h"

/* The engine serves two doubles: this file is libcuda.so.1, and
 * tests/backends/hip/hipdouble/libamdhip64_double.c compiles it again with DVDOUBLE_HIP
 * defined, where the cu* entry points are the engine of the hip* ones and
 * are not exported (only the dvdouble_* controls are, CONTROL). */
#ifdef DVDOUBLE_HIP
#define DBL_HIP 1
#define EXPORT __attribute__((visibility("hidden")))
#define DBL_ENV(name) "HIP_DOUBLE_" name
#define DBL_NAME "hip test double"
#define DBL_ILLEGAL "hipErrorIllegalAddress"
#define DBL_MAX_BLOCK_Z 1024u        /* AMD: 1024 threads in any dimension */
#define DBL_MAX_GRID_YZ 2147483647u  /* AMD: grid dimensions up to 2^31 - 1 */
#define DBL_SHARED_STATIC (64 * 1024) /* AMD: 64 KiB of LDS per block, no opt-in beyond */
#define DBL_CC_MAJOR 9                /* gfx90a */
#else
#define DBL_HIP 0
#define EXPORT __attribute__((visibility("default")))
#define DBL_ENV(name) "CUDA_DOUBLE_" name
#define DBL_NAME "cuda test double"
#define DBL_ILLEGAL "CUDA_ERROR_ILLEGAL_ADDRESS"
#define DBL_MAX_BLOCK_Z 64u
#define DBL_MAX_GRID_YZ 65535u
#define DBL_SHARED_STATIC (48 * 1024)
#define DBL_CC_MAJOR 99 /* newer than any NVRTC (PTX) */
#endif
#define CONTROL __attribute__((visibility("default")))
#define NOT_PERMITTED 800
#define CAPTURE_UNSUPPORTED 900
#define CAPTURE_INVALIDATED 901
#define CAPTURE_IMPLICIT 906
#define CAPTURE_ISOLATION 905
#define ILLEGAL_STATE 401
#define CONTEXT_IS_DESTROYED 709
#define MAX_DEV 4
#define MAX_PITCH ((size_t)2147483647)
#define BLOCK_OPTIN (227 * 1024)
#define LAUNCH_QUEUE 1024 /* operations a stream holds before a launch waits */

typedef int CUresult;

/* Every entry point with the prototype the backend calls it through. */
#define DV_CU(ret, symbol, cuda_name, hip_name, params) EXPORT ret symbol params;
#include "../../../../src/backends/cudafam/fam_symbols.def"
#undef DV_CU
CONTROL int dvdouble_is_double(void);
EXPORT CUresult cuGetExportTable(const void **table, const void *uuid);
EXPORT CUresult cuEventElapsedTime(float *ms, dv_CUevent a, dv_CUevent b);
EXPORT CUresult cuMemcpyHtoD_v2(dv_CUdeviceptr d, const void *hp, size_t n);
EXPORT CUresult cuMemcpyDtoH_v2(void *hp, dv_CUdeviceptr d, size_t n);
CONTROL void dvdouble_hold(int on);
CONTROL long dvdouble_launches(void);
CONTROL void dvdouble_set_pinned_limit(size_t bytes);
CONTROL long dvdouble_peer_copies(void);
CONTROL void dvdouble_fault(int device);
CONTROL long dvdouble_faults(void);
CONTROL void dvdouble_set_driver_version(int version);
CONTROL void dvdouble_set_compute_capability(int major, int minor);
CONTROL size_t dvdouble_pinned(size_t *peak);
CONTROL void dvdouble_pinned_reset_peak(void);
CONTROL long dvdouble_calls(const char *name);
CONTROL long dvdouble_capture(dv_CUstream h, int on);
CONTROL void dvdouble_set_max_pitch(size_t bytes);
CONTROL void dvdouble_set_uva(int on);
CONTROL void dvdouble_set_memops(int on);
CONTROL void dvdouble_fail(const char *name, long k, int result);
CONTROL long dvdouble_fail_calls(const char *name);
EXPORT CUresult cuMemPrefetchAsync(dv_CUdeviceptr p, size_t n, dv_CUdevice where, dv_CUstream s);
EXPORT CUresult cuMemAdvise(dv_CUdeviceptr p, size_t n, dv_CUmem_advise advice, dv_CUdevice where);
CONTROL void dvdouble_set_concurrent_managed(int on);
CONTROL int dvdouble_managed_hints(uint64_t addr, int *last_prefetch, int *preferred, int *read_mostly,
                                   unsigned *accessed_by, long *prefetches);
CONTROL int dvdouble_managed_range(uint64_t addr, uint64_t *start, size_t *bytes);
CONTROL void *dvdouble_pool_current(int device, int fresh);
CONTROL void *dvdouble_pool_default(int device);
CONTROL int dvdouble_pool_stats(void *pool, uint64_t out[4]);
CONTROL void dvdouble_set_mempools(int on);

/* ---- state ------------------------------------------------------------------------------ */

static pthread_mutex_t L = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t C = PTHREAD_COND_INITIALIZER;
static int g_init, g_ndev = 2;
static size_t g_dev_mem = (size_t)1 << 30;
static int g_hold;
static long g_launches_skipped, g_peer_copies, g_faults;
static int g_block_s = 20;
static int g_cb_busy;                 /* a host function or callback is running (they are serialized) */
static size_t g_max_pitch = MAX_PITCH; /* dvdouble_set_max_pitch */
static int g_no_uva;                  /* dvdouble_set_uva(0) */
static int g_no_memops;               /* dvdouble_set_memops(0) */
static int g_no_mempools;             /* dvdouble_set_mempools(0) */
/* Calls counted for dvdouble_calls. */
enum { C_CTXSYNC, C_MEMFREE, C_FREEHOST, C_UNREGISTER, C_HOSTALLOC, C_ADDCALLBACK, C_COUNT };
static const char *const g_call_names[C_COUNT] = {"cuCtxSynchronize", "cuMemFree_v2", "cuMemFreeHost",
                                                   "cuMemHostUnregister", "cuMemHostAlloc", "cuStreamAddCallback"};
static long g_calls[C_COUNT];

/* Fail points (dvdouble_fail): an entry point that calls FAILPOINT("name")
 * first returns `result` at its k-th call from arming (1: the next one),
 * once, and counts its calls (dvdouble_fail_calls).  Entries that have one
 * are the ones fault sweeps go through: each fails in turn, k = 1, 2, ...,
 * until a run meets no armed call. */
#define FAIL_POINTS 64
static struct {
  const char *name; /* a string literal of the entry point: compared by content */
  long calls, armed_at;
  int result;
} g_fail[FAIL_POINTS];
static int g_nfail;
static pthread_mutex_t g_fail_lock = PTHREAD_MUTEX_INITIALIZER;

static int fail_slot(const char *name) { /* g_fail_lock held; -1: table full */
  for (int i = 0; i < g_nfail; i++)
    if (!strcmp(g_fail[i].name, name)) return i;
  if (g_nfail == FAIL_POINTS) return -1;
  g_fail[g_nfail].name = name;
  return g_nfail++;
}

/* 0 (go on) or the armed result for this call of `name`. */
static int failpoint(const char *name) {
  pthread_mutex_lock(&g_fail_lock);
  int i = fail_slot(name), r = 0;
  if (i >= 0) {
    g_fail[i].calls++;
    if (g_fail[i].armed_at && g_fail[i].calls == g_fail[i].armed_at) {
      r = g_fail[i].result;
      g_fail[i].armed_at = 0;
    }
  }
  pthread_mutex_unlock(&g_fail_lock);
  return r;
}
#define FAILPOINT(name)                \
  do {                                 \
    int fp_ = failpoint(name);         \
    if (fp_) return (CUresult)fp_;     \
  } while (0)

struct dv_CUctx_st;
typedef struct alloc {
  struct alloc *next;
  int kind;            /* 1 device, 2 managed, 3 pinned (cuMemHostAlloc), 4 registered, 5 pool block */
  uint64_t addr;       /* the device address (managed, mapped: the host address) */
  char *host;          /* the bytes */
  size_t size;
  unsigned flags;
  struct dv_CUctx_st *ctx;
  /* Managed memory's hints (cuMemPrefetchAsync, cuMemAdvise), for the whole
   * allocation: locations as 0 none, 1 host, 2 + d device d. */
  int last_prefetch, preferred, read_mostly;
  unsigned accessed_by; /* bit 1 << location */
  long prefetches;      /* prefetches run */
  uint64_t hint_addr;   /* the range of the last prefetch or advice asked for */
  size_t hint_bytes;
  /* kind 5, a block of a memory pool: its pool, PB_* state, the stream its
   * queued free is on and a number that changes at each reuse */
  struct dv_CUmemPoolHandle_st *pool;
  int pstate;
  struct dv_CUstream_st *fstream;
  uint64_t gen;
} alloc;

typedef struct op op;
typedef struct dv_CUstream_st stream;
struct op {
  op *next;
  int kind; /* 1 copy, 2 memset, 3 host fn, 4 wait (stream, seq), 5 record, 6 copy kernel, 7 nop, 8 stream callback,
             * 9 wait for a value (daddr, wval), 10 prefetch managed memory (daddr, width; word: the location),
             * 11 a pool block's free (user: the block, wval: its gen) */
  /* copy: sides (device address or host pointer) */
  int sdev, ddev;
  uint64_t saddr, daddr;
  size_t width, height, depth, spitch, sheight, dpitch, dheight;
  unsigned char value;
  dv_CUhostFn fn;
  dv_CUstreamCallback cb;
  stream *cb_stream;
  void *user;
  stream *wait_s;
  uint64_t wait_seq;
  uint64_t wval;
  struct dv_CUevent_st *ev;
  unsigned char kparams[7 * 136];
  size_t word;
  uint64_t seq;
};

struct dv_CUstream_st {
  struct dv_CUstream_st *next_all;
  struct dv_CUctx_st *ctx;
  unsigned flags;
  int kind; /* 0 created, 1 legacy, 2 per-thread */
  pthread_t thread;
  op *head, *tail;
  uint64_t enq, done;
  int destroyed, running, quit;
  pthread_t owner; /* per-thread streams */
  int capturing, invalidated; /* cuStreamBeginCapture, dvdouble_capture */
  long captured;              /* operations captured (not run) */
  op *cap_head, *cap_tail;    /* them, for cuStreamEndCapture's graph */
};

/* A captured graph and an instantiated one: the captured operations, in
 * order (cuGraphLaunch queues a copy of each on its stream). */
struct dv_CUgraph_st {
  struct dv_CUgraph_st *next_all;
  struct dv_CUctx_st *ctx;
  op *head;
  long n;
};
struct dv_CUgraphExec_st {
  struct dv_CUgraphExec_st *next_all;
  struct dv_CUctx_st *ctx;
  op *head;
  long n;
};

struct dv_CUctx_st {
  int dev;
  int refs;
  int active;
  CUresult sticky;
  stream *legacy;
  size_t used;
  unsigned peers; /* bit d: peer access to device d's primary context enabled */
};

struct dv_CUevent_st {
  struct dv_CUevent_st *next_all;
  struct dv_CUctx_st *ctx;
  unsigned flags;
  stream *s;
  uint64_t seq;
  int recorded;
  struct timespec when;
  int when_set;
  int destroyed; /* destroyed with its record still queued: the record frees it */
};

typedef struct fn_rec {
  char name[512];
  /* HIP: from the kernel descriptor, and args_known where the code
   * object's metadata gave nparams and psize (and vgprs). */
  unsigned group_seg, private_seg, kernarg_size, vgprs;
  int args_known;
  int nparams;
  size_t psize[64];
} fn_rec;

struct dv_CUfunc_st {
  struct dv_CUmod_st *mod;
  fn_rec r;
  int max_dyn_shared;
};

typedef struct var_rec {
  char name[512];
  size_t size;
  uint64_t addr;
} var_rec;

struct dv_CUmod_st {
  struct dv_CUmod_st *next_all;
  struct dv_CUctx_st *ctx;
  int nfn, nvar;
  struct dv_CUfunc_st *fn;
  var_rec *var;
};

static struct dv_CUctx_st g_ctx[MAX_DEV];
static alloc *g_allocs;
static stream *g_streams;
static struct dv_CUevent_st *g_events;
static struct dv_CUmod_st *g_mods;
static struct dv_CUgraph_st *g_graphs;
static struct dv_CUgraphExec_st *g_execs;
static uint64_t g_next_addr[MAX_DEV];
/* initial-exec: no __tls_get_addr, whose interception by GCC 12's
 * ThreadSanitizer fails ("failed to allocate ... bytes") the first time a
 * thread the library made (a staging thread) reaches this loaded library's
 * TLS. */
#define DBL_TLS __thread __attribute__((tls_model("initial-exec")))
static DBL_TLS struct dv_CUctx_st *t_cur;
static DBL_TLS int t_in_callback;
static size_t g_pinned_used, g_pinned_peak, g_pinned_limit = (size_t)4 << 30;

static void *worker(void *arg);
static void run_prefetch(struct dv_CUctx_st *c, op *o); /* managed memory, after cuMemAllocManaged */
static int concurrent_managed(void);                    /* CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS */
/* Memory pools (after cuMemFree_v2): the pool states, a block's queued free, a synchronization point. */
enum { PB_LIVE = 0, PB_PENDING = 1, PB_CACHED = 2 };
static void pool_free_ran(op *o);
static void pool_sync_point(int dev);
static int pool_block_free(alloc *x, struct dv_CUctx_st *c);

/* ---- helpers (called with L held unless said) ---------------------------------------------------- */

#define ENTER()                                          \
  pthread_mutex_lock(&L);                                \
  do {                                                   \
    if (t_in_callback) return unlock_ret(NOT_PERMITTED); \
    if (!g_init) return unlock_ret(DV_CUDA_ERROR_NOT_INITIALIZED); \
  } while (0)

static CUresult unlock_ret(CUresult r) {
  pthread_mutex_unlock(&L);
  return r;
}

/* The current context, usable: else the error to return. */
static CUresult need_ctx(struct dv_CUctx_st **out) {
  struct dv_CUctx_st *c = t_cur;
  if (!c || !c->active) return DV_CUDA_ERROR_INVALID_CONTEXT;
  if (c->sticky) return c->sticky;
  *out = c;
  return DV_CUDA_SUCCESS;
}

#define CTX(c)                             \
  struct dv_CUctx_st *c = NULL;            \
  do {                                     \
    CUresult r_ = need_ctx(&c);            \
    if (r_) return unlock_ret(r_);         \
  } while (0)

/* The device address of mapped host memory on device dev: the host
 * address with unified addressing, else one of the device's own. */
static uint64_t map_off(int dev) { return g_no_uva ? (uint64_t)dev << 56 : 0; }

/* The allocation holding [a, a + n) as device `dev` addresses it. */
static alloc *find_dev(int dev, uint64_t a, size_t n) {
  for (alloc *x = g_allocs; x; x = x->next) {
    uint64_t base = x->addr;
    if (x->kind == 5 && x->pstate == PB_CACHED) continue; /* freed: the pool's, no address of the program's */
    if (x->kind == 3 || x->kind == 4) {
      if (!(x->flags & DV_CU_MEMHOSTALLOC_DEVICEMAP)) continue; /* not mapped: no device address */
      base += map_off(dev);
    }
    if (a >= base && a - base < x->size) {
      if (n > x->size - (a - base)) return NULL;
      return x;
    }
  }
  return NULL;
}

/* The host bytes behind device address a (of allocation x, found by find_dev). */
static char *dev_bytes(int dev, alloc *x, uint64_t a) {
  uint64_t base = x->addr + ((x->kind == 3 || x->kind == 4) ? map_off(dev) : 0);
  return x->host + (a - base);
}

/* A host range inside pinned or registered memory (or managed: the driver
 * treats it as device-accessible memory, never pageable). */
static int host_pinned(const void *p, size_t n) {
  uintptr_t a = (uintptr_t)p;
  for (alloc *x = g_allocs; x; x = x->next) {
    if (x->kind == 1 || x->kind == 5) continue;
    uintptr_t b = (uintptr_t)x->host;
    if (a >= b && a - b < x->size) return n <= x->size - (a - b);
  }
  return 0;
}

/* A host pointer that is one of the double's device addresses: the wrong kind. */
static int is_dev_addr(const void *p) {
  uintptr_t a = (uintptr_t)p;
  for (alloc *x = g_allocs; x; x = x->next)
    if ((x->kind == 1 || x->kind == 5) && a >= x->addr && a - x->addr < x->size) return 1;
  return 0;
}

static stream *stream_new(struct dv_CUctx_st *c, unsigned flags, int kind) {
  stream *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  s->ctx = c, s->flags = flags, s->kind = kind;
  s->owner = pthread_self();
  if (pthread_create(&s->thread, NULL, worker, s)) {
    free(s);
    return NULL;
  }
  s->next_all = g_streams;
  g_streams = s;
  return s;
}

static int stream_known(stream *s) {
  for (stream *x = g_streams; x; x = x->next_all)
    if (x == s && !x->destroyed) return 1;
  return 0;
}

/* The stream a handle names in context c, created on first use for the
 * defaults; NULL: invalid handle. */
static stream *resolve_stream(struct dv_CUctx_st *c, dv_CUstream h, CUresult *err) {
  *err = DV_CUDA_SUCCESS;
  if (!h || (h == DV_CU_STREAM_LEGACY && !DBL_HIP)) { /* HIP: 0x1 is no stream */
    if (!c->legacy && !(c->legacy = stream_new(c, 0, 1))) *err = DV_CUDA_ERROR_OUT_OF_MEMORY;
    return c->legacy;
  }
  if (h == DV_CU_STREAM_PER_THREAD) {
    pthread_t me = pthread_self();
    for (stream *x = g_streams; x; x = x->next_all)
      if (x->kind == 2 && !x->destroyed && x->ctx == c && pthread_equal(x->owner, me)) return x;
    stream *s = stream_new(c, 0, 2);
    if (!s) *err = DV_CUDA_ERROR_OUT_OF_MEMORY;
    return s;
  }
  stream *s = (stream *)h;
  if (!stream_known(s)) {
    *err = DV_CUDA_ERROR_INVALID_HANDLE;
    return NULL;
  }
  if (s->ctx != c) {
    *err = DV_CUDA_ERROR_INVALID_HANDLE; /* a stream of another context */
    return NULL;
  }
  return s;
}

static void push(stream *s, op *o) {
  o->seq = ++s->enq;
  if (s->tail) s->tail->next = o;
  else s->head = o;
  s->tail = o;
  pthread_cond_broadcast(&C);
}

static op *op_new(int kind) {
  op *o = calloc(1, sizeof *o);
  if (o) o->kind = kind;
  return o;
}

/* The legacy stream's implicit synchronization: work on it waits for every
 * blocking stream of the context, work on a blocking stream waits for it.
 * Work on the legacy stream while a blocking stream captures would join
 * the capture implicitly: refused, and the capture invalidated. */
static CUresult legacy_deps(stream *s) {
  if (s->flags & DV_CU_STREAM_NON_BLOCKING) return DV_CUDA_SUCCESS;
  if (s->kind == 1) {
    for (stream *x = g_streams; x; x = x->next_all)
      if (x != s && x->ctx == s->ctx && !x->destroyed && x->capturing && !(x->flags & DV_CU_STREAM_NON_BLOCKING)) {
        x->invalidated = 1;
        return CAPTURE_IMPLICIT;
      }
    for (stream *x = g_streams; x; x = x->next_all) {
      if (x == s || x->ctx != s->ctx || x->destroyed || (x->flags & DV_CU_STREAM_NON_BLOCKING)) continue;
      if (x->done >= x->enq) continue;
      op *w = op_new(4);
      if (!w) return DV_CUDA_ERROR_OUT_OF_MEMORY;
      w->wait_s = x, w->wait_seq = x->enq;
      push(s, w);
    }
  } else if (s->ctx->legacy && s->ctx->legacy->done < s->ctx->legacy->enq) {
    op *w = op_new(4);
    if (!w) return DV_CUDA_ERROR_OUT_OF_MEMORY;
    w->wait_s = s->ctx->legacy, w->wait_seq = s->ctx->legacy->enq;
    push(s, w);
  }
  return DV_CUDA_SUCCESS;
}

/* A capture refuses what it cannot capture (r), and is invalidated by it. */
static CUresult capture_refuse(stream *s, CUresult r) {
  s->invalidated = 1;
  return r;
}

static void ops_free(op *o) {
  while (o) {
    op *n = o->next;
    free(o);
    o = n;
  }
}

static CUresult enqueue(stream *s, op *o) {
  if (s->capturing) {
    /* Captured into the graph, not run. */
    if (s->invalidated) {
      free(o);
      return CAPTURE_INVALIDATED;
    }
    o->next = NULL;
    if (s->cap_tail) s->cap_tail->next = o;
    else s->cap_head = o;
    s->cap_tail = o;
    s->captured++;
    return DV_CUDA_SUCCESS;
  }
  CUresult r = legacy_deps(s);
  if (r) {
    free(o);
    return r;
  }
  push(s, o);
  return DV_CUDA_SUCCESS;
}

/* Wait (L held) until stream s has done everything queued so far; a bounded
 * wait for the synchronous pageable copies. */
static int wait_stream(stream *s, uint64_t seq, int bounded) {
  struct timespec dl;
  clock_gettime(CLOCK_REALTIME, &dl);
  dl.tv_sec += g_block_s;
  while (s->done < seq) {
    if (!bounded) pthread_cond_wait(&C, &L);
    else if (pthread_cond_timedwait(&C, &L, &dl) == ETIMEDOUT && s->done < seq) return -1;
  }
  return 0;
}

static void deadlock(const char *what) {
  fprintf(stderr,
          DBL_NAME ": %s with pageable host memory waited %d s for its stream: the driver runs this "
          "copy synchronously, so on a real GPU this call deadlocks (the work ahead of it waits for the caller)\n",
          what, g_block_s);
  abort();
}

static void fault(struct dv_CUctx_st *c, const char *what) {
  g_faults++;
  if (!c->sticky) {
    fprintf(stderr, DBL_NAME ": %s: an address that is no longer (or never was) allocated: " DBL_ILLEGAL
                    ", sticky for the context\n", what);
    c->sticky = DV_CUDA_ERROR_ILLEGAL_ADDRESS;
  }
}

/* The bytes of one side of a copy at run time (L held); NULL: fault. */
static char *side(struct dv_CUctx_st *c, int dev, uint64_t a, size_t span) {
  if (!dev) return (char *)(uintptr_t)a;
  alloc *x = find_dev(c->dev, a, span);
  if (!x) {
    if (getenv(DBL_ENV("DEBUG"))) fprintf(stderr, DBL_NAME ": no allocation holds [%#llx, +%zu)\n", (unsigned long long)a, span);
    fault(c, "a queued copy");
    return NULL;
  }
  return dev_bytes(c->dev, x, a);
}

static size_t span3(size_t w, size_t h, size_t d, size_t pitch, size_t rows) {
  if (!w || !h || !d) return 0;
  return (d - 1) * pitch * rows + (h - 1) * pitch + w;
}

static void run_copy(struct dv_CUctx_st *c, op *o) {
  char *s = side(c, o->sdev, o->saddr, span3(o->width, o->height, o->depth, o->spitch, o->sheight));
  char *d = side(c, o->ddev, o->daddr, span3(o->width, o->height, o->depth, o->dpitch, o->dheight));
  if (!s || !d) return;
  for (size_t z = 0; z < o->depth; z++)
    for (size_t y = 0; y < o->height; y++)
      memmove(d + z * o->dpitch * o->dheight + y * o->dpitch, s + z * o->spitch * o->sheight + y * o->spitch, o->width);
}

/* devarray's strided copy kernel on the host: parameters sbase, soff, sview,
 * dbase, doff, dview, count (src/kernel/copy_kernels.dvk). */
typedef struct kview {
  int64_t ndim, shape[8], strides[8];
} kview;

static int64_t view_off(const kview *v, int64_t i) {
  int64_t off = 0;
  for (int64_t k = v->ndim - 1; k >= 0; k--) {
    int64_t e = v->shape[k] ? v->shape[k] : 1;
    off += (i % e) * v->strides[k];
    i /= e;
  }
  return off;
}

static void run_copy_kernel(struct dv_CUctx_st *c, op *o) {
  const unsigned char *p = o->kparams;
  uint64_t sbase, dbase;
  int64_t soff, doff, count;
  kview sv, dv;
  memcpy(&sbase, p, 8), memcpy(&soff, p + 8, 8), memcpy(&sv, p + 16, 136);
  memcpy(&dbase, p + 152, 8), memcpy(&doff, p + 160, 8), memcpy(&dv, p + 168, 136), memcpy(&count, p + 304, 8);
  alloc *sa = find_dev(c->dev, sbase, 1), *da = find_dev(c->dev, dbase, 1);
  if (sv.ndim < 1 || sv.ndim > 8 || dv.ndim < 1 || dv.ndim > 8 || !sa || !da) {
    fault(c, "a strided-copy kernel");
    return;
  }
  /* Where each allocation starts as this device addresses it. */
  uint64_t sa0 = sbase - (uint64_t)(dev_bytes(c->dev, sa, sbase) - sa->host);
  uint64_t da0 = dbase - (uint64_t)(dev_bytes(c->dev, da, dbase) - da->host);
  for (int64_t i = 0; i < count; i++) {
    uint64_t s = sbase + (uint64_t)(soff + view_off(&sv, i)), d = dbase + (uint64_t)(doff + view_off(&dv, i));
    if (s < sa0 || s - sa0 > sa->size - o->word || d < da0 || d - da0 > da->size - o->word) {
      fault(c, "a strided-copy kernel (out of bounds)");
      return;
    }
    memcpy(da->host + (d - da0), sa->host + (s - sa0), o->word);
  }
}

/* A wait for a value: the word's bytes, NULL when no allocation holds it
 * any more (a fault: the wait ends). */
static int value_reached(stream *s, op *o) {
  struct dv_CUctx_st *c = s->ctx;
  if (c->sticky) return 1;
  alloc *x = find_dev(c->dev, o->daddr, 8);
  if (!x) {
    fault(c, "cuStreamWaitValue64 (its word was freed)");
    return 1;
  }
  uint64_t v = __atomic_load_n((uint64_t *)(void *)dev_bytes(c->dev, x, o->daddr), __ATOMIC_ACQUIRE);
  return (int64_t)(v - o->wval) >= 0;
}

static int op_ready(stream *s, op *o) {
  if (o->kind == 4) return !o->wait_s || o->wait_s->done >= o->wait_seq;
  if (o->kind == 9) return value_reached(s, o);
  return 1;
}

static void *worker(void *arg) {
  stream *s = arg;
  pthread_mutex_lock(&L);
  for (;;) {
    while (!s->quit && (!s->head || g_hold || !op_ready(s, s->head))) {
      if (s->head && s->head->kind == 9 && !g_hold) {
        /* A host thread's store ends the wait, and signals nothing: poll. */
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        t.tv_nsec += 50000;
        if (t.tv_nsec >= 1000000000L) t.tv_sec++, t.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&C, &L, &t);
      } else {
        pthread_cond_wait(&C, &L);
      }
    }
    if (s->quit && !s->head) break;
    op *o = s->head;
    struct dv_CUctx_st *c = s->ctx;
    int failed = c->sticky != 0;
    switch (o->kind) {
      case 1:
        if (!failed) run_copy(c, o);
        break;
      case 2:
        if (!failed) {
          char *d = side(c, 1, o->daddr, o->width);
          if (d) memset(d, o->value, o->width);
        }
        break;
      case 3:
      case 8: {
        /* Host functions and callbacks run one at a time in the process
         * (the reference: they "may be serialized"). */
        while (g_cb_busy) pthread_cond_wait(&C, &L);
        /* Host functions run even after a fault?  The reference: after an
         * error the stream's remaining work is not run.  Skip them.
         * cuStreamAddCallback's run after a fault too, with its status. */
        CUresult st = c->sticky;
        if (o->kind == 3 && st) break;
        g_cb_busy = 1;
        pthread_mutex_unlock(&L);
        t_in_callback = 1;
        if (o->kind == 3) o->fn(o->user);
        else o->cb(o->cb_stream, st, o->user);
        t_in_callback = 0;
        pthread_mutex_lock(&L);
        g_cb_busy = 0;
        break;
      }
      case 5:
        clock_gettime(CLOCK_MONOTONIC, &o->ev->when);
        o->ev->when_set = 1;
        if (o->ev->destroyed) free(o->ev);
        break;
      case 6:
        if (!failed) run_copy_kernel(c, o);
        break;
      case 10:
        if (!failed) run_prefetch(c, o);
        break;
      case 11: pool_free_ran(o); break;
      default: break;
    }
    s->head = o->next;
    if (!s->head) s->tail = NULL;
    s->done = o->seq;
    free(o);
    pthread_cond_broadcast(&C);
  }
  pthread_mutex_unlock(&L);
  return NULL;
}

/* Stop a stream's worker and free it (L held; the stream is drained first). */
static void stream_reap(stream *s) {
  s->quit = 1;
  pthread_cond_broadcast(&C);
  pthread_t t = s->thread;
  pthread_mutex_unlock(&L);
  pthread_join(t, NULL);
  pthread_mutex_lock(&L);
  for (stream **pp = &g_streams; *pp; pp = &(*pp)->next_all)
    if (*pp == s) {
      *pp = s->next_all;
      break;
    }
  /* Waits queued on other streams for its work (an event recorded here)
   * are satisfied: it drained before it went. */
  for (stream *x = g_streams; x; x = x->next_all)
    for (op *o = x->head; o; o = o->next)
      if (o->kind == 4 && o->wait_s == s) o->wait_s = NULL;
  for (struct dv_CUevent_st *e = g_events; e; e = e->next_all)
    if (e->s == s) e->s = NULL; /* its record completed */
  ops_free(s->cap_head); /* a capture never ended: its graph goes */
  free(s);
}

static void mod_free(struct dv_CUmod_st *m);

/* A primary context released to zero: everything it owned goes. */
static void ctx_teardown(struct dv_CUctx_st *c) {
  for (stream *x = g_streams; x; x = x->next_all)
    if (x->ctx == c) wait_stream(x, x->enq, 0);
  for (;;) {
    stream *x = g_streams;
    while (x && x->ctx != c) x = x->next_all;
    if (!x) break;
    stream_reap(x);
  }
  c->legacy = NULL;
  for (alloc **pp = &g_allocs; *pp;) {
    alloc *x = *pp;
    if (x->ctx == c && x->kind != 4 && x->kind != 5) { /* pool blocks outlive contexts */
      *pp = x->next;
      if (x->kind == 3) g_pinned_used -= x->size;
      free(x->host);
      free(x);
    } else if (x->ctx == c && x->kind == 4 && !(x->flags & DV_CU_MEMHOSTREGISTER_PORTABLE)) {
      *pp = x->next;
      free(x);
    } else {
      pp = &x->next;
    }
  }
  for (struct dv_CUevent_st **pp = &g_events; *pp;) {
    if ((*pp)->ctx == c) {
      struct dv_CUevent_st *e = *pp;
      *pp = e->next_all;
      free(e);
    } else {
      pp = &(*pp)->next_all;
    }
  }
  for (struct dv_CUmod_st **pp = &g_mods; *pp;) {
    if ((*pp)->ctx == c) {
      struct dv_CUmod_st *m = *pp;
      *pp = m->next_all;
      mod_free(m);
    } else {
      pp = &(*pp)->next_all;
    }
  }
  c->used = 0;
  c->peers = 0;
  for (int i = 0; i < MAX_DEV; i++) g_ctx[i].peers &= ~(1u << c->dev);
  c->sticky = 0;
  c->active = 0;
}

/* ---- initialization, devices ------------------------------------------------------------- */

EXPORT CUresult cuInit(unsigned flags) {
  if (flags) return DV_CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&L);
  if (!g_init) {
    const char *e = getenv(DBL_ENV("DEVICES"));
    if (e && atoi(e) >= 0 && atoi(e) <= MAX_DEV) g_ndev = atoi(e);
    if ((e = getenv(DBL_ENV("MEMORY"))) && strtoull(e, NULL, 10)) g_dev_mem = (size_t)strtoull(e, NULL, 10);
    if ((e = getenv(DBL_ENV("BLOCK_S"))) && atoi(e) > 0) g_block_s = atoi(e);
    if ((e = getenv(DBL_ENV("MEMOPS"))) && !strcmp(e, "0")) g_no_memops = 1; /* as dvdouble_set_memops(0) */
    for (int i = 0; i < MAX_DEV; i++) g_ctx[i].dev = i, g_next_addr[i] = 0x0a0000000000ull + (uint64_t)i * 0x010000000000ull;
    g_init = 1;
  }
  int n = g_ndev;
  pthread_mutex_unlock(&L);
  return n ? DV_CUDA_SUCCESS : DV_CUDA_ERROR_NO_DEVICE;
}

/* The driver version it plays: dvdouble_set_driver_version's, else
 * CUDA_DOUBLE_DRIVER_VERSION's (1000 * major + 10 * minor), else 13.0.
 * Read at every call (the real driver allows it before cuInit). */
static int g_driver_version;

EXPORT CUresult cuDriverGetVersion(int *v) {
  if (!v) return DV_CUDA_ERROR_INVALID_VALUE;
  int d = __atomic_load_n(&g_driver_version, __ATOMIC_RELAXED);
  if (d <= 0) {
    const char *e = getenv("CUDA_DOUBLE_DRIVER_VERSION");
    d = e && atoi(e) > 0 ? atoi(e) : 13000;
  }
  *v = d;
  return DV_CUDA_SUCCESS;
}

static const struct {
  int code;
  const char *name, *text;
} errs[] = {
    {0, "CUDA_SUCCESS", "no error"},
    {1, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {2, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {3, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {4, "CUDA_ERROR_DEINITIALIZED", "driver shutting down"},
    {100, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {101, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {200, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
    {201, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {218, "CUDA_ERROR_INVALID_PTX", "a PTX JIT compilation failed"},
    {400, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {500, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {600, "CUDA_ERROR_NOT_READY", "device not ready"},
    {700, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
    {701, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", "too many resources requested for launch"},
    {709, "CUDA_ERROR_CONTEXT_IS_DESTROYED", "context is destroyed"},
    {704, "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED", "peer access is already enabled"},
    {712, "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED", "part or all of the requested memory range is already mapped"},
    {713, "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED", "pointer does not correspond to a registered memory region"},
    {719, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
    {800, "CUDA_ERROR_NOT_PERMITTED", "operation not permitted"},
    {801, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {900, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", "operation not permitted when stream is capturing"},
    {901, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED", "operation failed due to a previous error during capture"},
    {906, "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT",
     "operation would make the legacy stream depend on a capturing blocking stream"},
};

EXPORT CUresult cuGetErrorName(CUresult e, const char **s) {
  if (!s) return DV_CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < sizeof errs / sizeof errs[0]; i++)
    if (errs[i].code == e) {
      *s = errs[i].name;
      return DV_CUDA_SUCCESS;
    }
  *s = NULL;
  return DV_CUDA_ERROR_INVALID_VALUE;
}

EXPORT CUresult cuGetErrorString(CUresult e, const char **s) {
  if (!s) return DV_CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < sizeof errs / sizeof errs[0]; i++)
    if (errs[i].code == e) {
      *s = errs[i].text;
      return DV_CUDA_SUCCESS;
    }
  *s = NULL;
  return DV_CUDA_ERROR_INVALID_VALUE;
}

EXPORT CUresult cuDeviceGetCount(int *n) {
  ENTER();
  if (!n) return unlock_ret(DV_CUDA_ERROR_INVALID_VALUE);
  *n = g_ndev;
  return unlock_ret(DV_CUDA_SUCCESS);
}

EXPORT CUresult cuDeviceGet(dv_CUdevice *d, int ordinal) {
  ENTER();
  if (!d) return unlock_ret(DV_CUDA_ERROR_INVALID_VALUE);
  if (ordinal < 0 || ordinal >= g_ndev) return unlock_ret(DV_CUDA_ERROR_INVALID_DEVICE);
  *d = ordinal;
  return unlock_ret(DV_CUDA_SUCCESS);
}

#define DEV_OK(d) ((d) >= 0 && (d) < g_ndev)

EXPORT CUresult cuDeviceGetName(char *name, int len, dv_CUdevice d) {
  ENTER();
  if (!name || len <= 0) return unlock_ret(DV_CUDA_ERROR_INVALID_VALUE);
  if (!DEV_OK(d)) return unlock_ret(DV_CUDA_ERROR_INVALID_DEVICE);
  snprintf(name, (size_t)len, "devarray CUDA test double %d", d);
  return unlock_ret(DV_CUDA_SUCCESS);
}

EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, dv_CUdevice d) {
  ENTER();
  if (!bytes) return unlock_ret(DV_CUDA_ERROR_INVALID_VALUE);
  if (!DEV_OK(d)) return unlock_ret(DV_CUDA_ERROR_INVALID_DEVICE);
  *bytes = g_dev_mem;
  return unlock_ret(DV_CUDA_SUCCESS);
}

/* Compute capability of every device (dvdouble_set_compute_capability). */
static int g_cc[2] = {DBL_CC_MAJOR, 0};

static int can_map_host(void); /* dvdouble_set_can_map_host_memory, at the end */

EXPORT CUresult cuDeviceGetAttribute(int *v, dv_CUdevice_attribute a, dv_CUdevice d) {
  ENTER();
  if (!v) return unlock_ret(DV_CUDA_ERROR_INVALID_VALUE);
  if (!DEV_OK(d)) return unlock_ret(DV_CUDA_ERROR_INVALID_DEVICE);
  int x;
  switch (a) {
    case 1: x = 1024; break;             /* max threads per block */
    case 2: case 3: x = 1024; break;     /* block x, y */
    case 4: x = 64; break;               /* block z */
    case 5: x = 2147483647; break;       /* grid x */
    case 6: case 7: x = 65535; break;    /* grid y, z */
    case 8: x = 48 * 1024; break;        /* shared per block */
    case 9: x = 64 * 1024; break;        /* constant memory */
    case 10: x = 32; break;              /* warp */
    case 11: x = (int)g_max_pitch; break; /* max pitch (dvdouble_set_max_pitch) */
    case 16: x = 4; break;               /* SMs */
    case 19: x = can_map_host(); break;  /* can map host memory */
    case 41: x = !g_no_uva; break;       /* unified addressing (dvdouble_set_uva) */
    case 115: x = !g_no_mempools; break; /* memory pools (dvdouble_set_mempools) */
    case 122: x = !g_no_memops; break;   /* 64-bit stream memory operations (dvdouble_set_memops) */
    case 75: x = g_cc[0]; break;         /* 99 by default: newer than any NVRTC (PTX) */
    case 76: x = g_cc[1]; break;
    case 83: x = 1; break;               /* managed memory */
    case 89: x = concurrent_managed(); break; /* dvdouble_set_concurrent_managed */
    case 97: x = BLOCK_OPTIN; break;
    default:
      if (a <= 0 || a > 140) return unlock_ret(DV_CUDA_ERROR_INVALID_VALUE);
      x = 0;
  }
  *v = x;
  return unlock_ret(DV_CUDA_SUCCESS);
}

EXPORT CUresult cuDeviceGetPCIBusId(char *id, int len, dv_CUdevice d) {
  ENTER();
  if (!id || len <= 0) return unlock_ret(DV_CUDA_ERROR_INVALID_VALUE);
  if (!DEV_OK(d)) return unlock_ret(DV_CUDA_ERROR_INVALID_DEVICE);
  snprintf(id, (size_t)len, "0000:%02x:00.0", 0x10 + d);
  return unlock_ret(DV_CUDA_SUCCESS);
}

EXPORT CUresult cuDeviceCanAccessPeer(int *can, dv_CUdevice d, dv_CUdevice peer) {
  ENTER();
  if (!can) return unlock_ret(DV_CUDA_ERROR_INVALID_VALUE);
  if (!DEV_OK(d) || !DEV_OK(peer)) return unlock_ret(DV_CUDA_ERROR_INVALID_DEVICE);
  *can = d != peer;
  return unlock_ret(DV_CUDA_SUCCESS);
}

/* ---- contexts --------------------------------------------------------------------------------- */

EXPORT CUresult cuDevicePrimaryCtxRetain(dv_CUcontext *c, dv_CUdevice d) {
  ENTER();
  if (!c) return unlock_ret(DV_CUDA_ERROR_INVALID_VALUE);
  if (!DEV_OK(d)) return unlock_ret(DV_CUDA_ERROR_INVALID_DEVICE);
  g_ctx[d].refs++;
  g_ctx[d].active = 1;
  *c = &g_ctx[d];
  return unlock_ret(DV_CUDA_SUCCESS);
}

EXPORT CUresult cuDevicePrimaryCtxRelease_v2(dv_CUdevice d) {
  ENTER();
  if (!DEV_OK(d)) return unlock_ret(DV_CUDA_ERROR_INVALID_DEVICE);
  if (g_ctx[d].refs <= 0) return unlock_ret(DV_CUDA_ERROR_INVALID_CONTEXT);
  if (--g_ctx[d].refs == 0) ctx_teardown(&g_ctx[d]);
  return unlock_ret(DV_CUDA_SUCCESS);
}

static int ctx_known(dv_CUcontext c) {
  for (int i = 0; i < g_ndev; i++)
    if (c == &g_ctx[i]) return 1;
  return 0;
}

EXPORT CUresult cuCtxSetCurrent(dv_CUcontext c) {
  ENTER();
  if (c && !ctx_known(c)) return unlock_ret(DV_CUDA_ERROR_INVALID_CONTEXT);
  if (c && !c->active) return unlock_ret(CONTEXT_IS_DESTROYED);
  t_cur = c;
  return unlock_ret(DV_CUDA_SUCCESS);
}

EXPORT CUresult cuCtxGetCurrent(dv_CUcontext *c) {
  ENTER();
  if (!c) return unlock_ret(DV_CUDA_ERROR_INVALID_VALUE);
  *c = t_cur;
  return unlock_ret(DV_CUDA_SUCCESS);
}

EXPORT CUresult cuCtxSynchronize(void) {
  ENTER();
  g_calls[C_CTXSYNC]++;
  CTX(c);
  int capturing = 0;
  for (stream *x = g_streams; x; x = x->next_all)
    if (x->ctx == c && !x->destroyed && x->capturing) capturing = 1, x->invalidated = 1;
  if (capturing) return unlock_ret(CAPTURE_UNSUPPORTED);
  for (stream *x = g_streams; x; x = x->next_all)
    if (x->ctx == c) wait_stream(x, x->enq, 0);
  pool_sync_point(c->dev);
  return unlock_ret(c->sticky);
}

/* ---- memory ------------------------------------------------------------------------------------ */

static uint64_t take_addr(int dev, size_t bytes) {
  uint64_t a = g_next_addr[dev];
  g_next_addr[dev] += (bytes + 511) / 512 * 512 + 512; /* a gap: ranges never touch */
  return a;
}

EXPORT CUresult cuMemAlloc_v2(dv_CUdeviceptr *p, size_t bytes) {
  ENTER();
  if (!p) return unlock_ret(DV_CUDA_ERROR_INVALID_VALUE);
  *p = 0;
  CTX(c);
  if (!bytes) return unlock_ret(DV_CUDA_ERROR_INVALID_VALUE);
  if (bytes > g_dev_mem - c->used) return unlock_ret(DV_CUDA_ERROR_OUT_OF_MEMORY);
  alloc *x = calloc(1, sizeof *x);
  char *h = x ? malloc(bytes) : NULL;
  if (!h) {
    free(x);
    return unlock_ret(DV_CUDA_ERROR_OUT_OF_MEMORY);
  }
  memset(h, 0xA5, bytes); /* device memory is not zeroed */
  x->kind = 1, x->host = h, x->size = bytes, x->ctx = c, x->addr = take_addr(c->dev, bytes);
  x->next = g_allocs;
  g_allocs = x;
  c->used += bytes;
  *p = x->addr;
  return unlock_ret(DV_CUDA_SUCCESS);
}

EXPORT CUresult cuMemAllocManaged(dv_CUdeviceptr *p, size_t bytes, unsigned flags) {
  ENTER();
  if (!p) return unlock_ret(DV_CUDA_ERROR_INVALID_VALUE);
  *p = 0;
  CTX(c);
  if (!bytes || (flags != DV_CU_MEM_ATTACH_GLOBAL && flags != DV_CU_MEM_ATTACH_HOST))
    return unlock_ret(DV_CUDA_ERROR_INVALID_VALUE);
  if (bytes > g_dev_mem - c->used) return unlock_ret(DV_CUDA_ERROR_OUT_OF_MEMORY);
  alloc *x = calloc(1, sizeof *x);
  char *h = NULL;
  if (!x || posix_memalign((void **)&h, 4096, bytes)) {
    free(x);
    return unlock_ret(DV_CUDA_ERROR_OUT_OF_MEMORY);
  }
  x->kind = 2, x->host = h, x->size = bytes, x->ctx = c, x->addr = (uint64_t)(uintptr_t)h;
  x->flags = DV_CU_MEMHOSTALLOC_DEVICEMAP;
  x->next = g_allocs;
  g_allocs = x;
  c->used += bytes;
  *p = x->addr;
  return unlock_ret(DV_CUDA_SUCCESS);
}

/* ---- managed memory's hints (cuMemPrefetchAsync, cuMemAdvise; issue 40) ---------------------
 * The reference's rules: the range must lie in managed memory
 * (cuMemAllocManaged), else CUDA_ERROR_INVALID_VALUE, as is a count of 0 or
 * flags other than 0; a device location must be a device
 * (CUDA_ERROR_INVALID_DEVICE) with concurrent managed access
 * (CUDA_ERROR_INVALID_DEVICE without it); a prefetch is queued on the
 * stream and checks its range again when it runs (freed meanwhile: the
 * sticky CUDA_ERROR_ILLEGAL_ADDRESS of any queued use); a stream that
 * captures a graph refuses it (no graph node prefetches:
 * CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, the capture invalidated).  The double keeps
 * each allocation's hints whole (the driver keeps them per page), which
 * dvdouble_managed_hints reads back.  dvdouble_set_concurrent_managed(0/1)
 * sets the attribute (-1: the device's own, CUDA 1, HIP an xnack+
 * architecture); contexts read it when they open. */
static int g_concurrent_managed = -1;
#if DBL_HIP
static int hip_xnack_on(void); /* the HIP double's: its architecture is xnack+ */
static int concurrent_managed(void) { return g_concurrent_managed >= 0 ? g_concurrent_managed : hip_xnack_on(); }
#else
static int concurrent_managed(void) { return g_concurrent_managed >= 0 ? g_concurrent_managed : 1; }
#endif

CONTROL void dvdouble_set_concurrent_managed(int on) {
  pthread_mutex_lock(&L);
  g_concurrent_managed = on < 0 ? -1 : on != 0;
  pthread_mutex_unlock(&L);
}

/* The managed allocation holding [p, p + n), or NULL (L held). */
static alloc *managed_range(struct dv_CUctx_st *c, uint64_t p, size_t n) {
  alloc *x = n ? find_dev(c->dev, p, n) : NULL;
  return x && x->kind == 2 ? x : NULL;
}

/* A location as the double keeps it (1 host, 2 + d device d), or the error. */
static CUresult location_code(dv_CUmemLocation l, int *code) {
  if (l.type == DV_CU_MEM_LOCATION_TYPE_HOST) {
    *code = 1;
    return DV_CUDA_SUCCESS;
  }
  if (l.type != DV_CU_MEM_LOCATION_TYPE_DEVICE) return DV_CUDA_ERROR_INVALID_VALUE;
  if (!DEV_OK(l.id) || !concurrent_managed()) return DV_CUDA_ERROR_INVALID_DEVICE;
  *code = 2 + l.id;
  return DV_CUDA_SUCCESS;
}

static dv_CUmemLocation device_location(dv_CUdevice d) {
  dv_CUmemLocation l = {DV_CU_MEM_LOCATION_TYPE_HOST, 0};
  if (d != DV_CU_DEVICE_CPU) l.type = DV_CU_MEM_LOCATION_TYPE_DEVICE, l.id = d;
  return l;
}

static void run_prefetch(struct dv_CUctx_st *c, op *o) {
  alloc *x = managed_range(c, o->daddr, o->width);
  if (!x) {
    fault(c, "a queued prefetch");
    return;
  }
  x->last_prefetch = (int)o->word;
  x->prefetches++;
}

static CUresult prefetch(dv_CUdeviceptr p, size_t n, dv_CUmemLocation where, unsigned flags, dv_CUstream h) {
  ENTER();
  CTX(c);
  if (flags || !managed_range(c, p, n)) return unlock_ret(DV_CUDA_ERROR_INVALID_VALUE);
  int code = 0;
  CUresult r = location_code(where, &code);
  if (r) return unlock_ret(r);
  stream *s = resolve_stream(c, h, &r);
  if (!s) return unlock_ret(r);
  if (s->capturing) return unlock_ret(capture_refuse(s, CAPTURE_UNSUPPORTED)); /* graphs have no prefetch node */
  op *o = op_new(10);
  if (!o) return unlock_ret(DV_CUDA_ERROR_OUT_OF_MEMORY);
  o->daddr = p, o->width = n, o->word = (size_t)code;
  r = enqueue(s, o);
  if (!r) {
    alloc *x = managed_range(c, p, n);
    x->hint_addr = p, x->hint_bytes = n;
  }
  return unlock_ret(r);
}

/* DVDOUBLE_NO_V2_HINTS: a driver before CUDA 12.2, without the _v2 entries
 * (tests/CMakeLists.txt's cuda_double_v1, managed_hints.cuda-v1). */
#ifndef DVDOUBLE_NO_V2_HINTS
EXPORT CUresult cuMemPrefetchAsync_v2(dv_CUdeviceptr p, size_t n, dv_CUmemLocation where, unsigned flags,
                                      dv_CUstream s) {
  FAILPOINT("cuMemPrefetchAsync_v2");
  return prefetch(p, n, where, flags, s);
}
#endif

EXPORT CUresult cuMemPrefetchAsync(dv_CUdeviceptr p, size_t n, dv_CUdevice where, dv_CUstream s) {
  FAILPOINT("cuMemPrefetchAsync");
  return prefetch(p, n, device_location(where), 0, s);
}

static CUresult advise(dv_CUdeviceptr p, size_t n, int advice, dv_CUmemLocation where) {
  ENTER();
  CTX(c);
  alloc *x = managed_range(c, p, n);
  if (!x || advice < DV_CU_MEM_ADVISE_SET_READ_MOSTLY || advice > DV_CU_MEM_ADVISE_UNSET_ACCESSED_BY)
    return unlock_ret(DV_CUDA_ERROR_INVALID_VALUE);
  int code = 0; /* read-mostly and unsetting the preferred location ignore the location */
  if (advice == DV_CU_MEM_ADVISE_SET_PREFERRED_LOCATION || advice == DV_CU_MEM_ADVISE_SET_ACCESSED_BY ||
      advice == DV_CU_MEM_ADVISE_UNSET_ACCESSED_BY) {
    CUresult r = location_code(where, &code);
    if (r) return unlock_ret(r);
  }
  switch (advice) {
    case DV_CU_MEM_ADVISE_SET_READ_MOSTLY: x->read_mostly = 1; break;
    case DV_CU_MEM_ADVISE_UNSET_READ_MOSTLY: x->read_mostly = 0; break;
    case DV_CU_MEM_ADVISE_SET_PREFERRED_LOCATION: x->preferred = code; break;
    case DV_CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION: x->preferred = 0; break;
    case DV_CU_MEM_ADVISE_SET_ACCESSED_BY: x->accessed_by |= 1u << code; break;
    default: x->accessed_by &= ~(1u << code); break;
  }
  x->hint_addr = p, x->hint_bytes = n;
  return unlock_ret(DV_CUDA_SUCCESS);
}

#ifndef DVDOUBLE_NO_V2_HINTS
EXPORT CUresult cuMemAdvise_v2(dv_CUdeviceptr p, size_t n, dv_CUmem_advise advice, dv_CUmemLocation where) {
  FAILPOINT("cuMemAdvise_v2");
  return advise(p, n, (int)advice, where);
}
#endif

EXPORT CUresult cuMemAdvise(dv_CUdeviceptr p, size_t n, dv_CUmem_advise advice, dv_CUdevice where) {
  FAILPOINT("cuMemAdvise");
  return advise(p, n, (int)advice, device_location(where));
}

/* The hints of the managed allocation holding addr, as locations -2 none,
 * -1 host, d device d (accessed_by: bit 0 the host, bit 1 + d device d);
 * 0, or -1 when no managed allocation holds addr. */
CONTROL int dvdouble_managed_hints(uint64_t addr, int *last_prefetch, int *preferred, int *read_mostly,
                                   unsigned *accessed_by, long *prefetches) {
  pthread_mutex_lock(&L);
  alloc *x = NULL;
  for (alloc *y = g_allocs; y && !x; y = y->next)
    if (y->kind == 2 && addr >= y->addr && addr - y->addr < y->size) x = y;
  if (x) {
    if (last_prefetch) *last_prefetch = x->last_prefetch - 2;
    if (preferred) *preferred = x->preferred - 2;
    if (read_mostly) *read_mostly = x->read_mostly;
    if (accessed_by) *accessed_by = x->accessed_by >> 1;
    if (prefetches) *prefetches = x->prefetches;
  }
  pthread_mutex_unlock(&L);
  return x ? 0 : -1;
}

/* The range [*start, *start + *bytes) of the last prefetch or advice asked
 * for on the managed allocation holding addr (0, 0 before any); -1 when no
 * managed allocation holds addr. */
CONTROL int dvdouble_managed_range(uint64_t addr, uint64_t *start, size_t *bytes) {
  pthread_mutex_lock(&L);
  alloc *x = NULL;
  for (alloc *y = g_allocs; y && !x; y = y->next)
    if (y->kind == 2 && addr >= y->addr && addr - y->addr < y->size) x = y;
  if (x) *start = x->hint_addr, *bytes = x->hint_bytes;
  pthread_mutex_unlock(&L);
  return x ? 0 : -1;
}

EXPORT CUresult cuMemFree_v2(dv_CUdeviceptr p) {
  ENTER();
  g_calls[C_MEMFREE]++;
  CTX(c);
  for (alloc **pp = &g_allocs; *pp; pp = &(*pp)->next) {
    alloc *x = *pp;
    if (x->kind == 5 && x->addr == p && x->pstate == PB_LIVE) return unlock_ret(pool_block_free(x, c));
    if ((x->kind == 1 || x->kind == 2) && x->addr == p) {
      if (x->ctx != c) return unlock_ret(DV_CUDA_ERROR_INVALID_VALUE); /* another context's memory */
      if (getenv(DBL_ENV("DEBUG"))) fprintf(stderr, DBL_NAME ": cuMemFree [%#llx, +%zu)\n", (unsigned long long)p, x->size);
      *pp = x->next;
      x->ctx->used -= x->size;
      free(x->host);
      free(x);
      return unlock_ret(DV_CUDA_SUCCESS);
    }
  }
  return unlock_ret(DV_CUDA_ERROR_INVALID_VALUE); /* not an allocation's start: double free, wrong kind */
}

/* ---- memory pools: the stream-ordered allocator --------------------------------------------------
 * cuMemAllocFromPoolAsync / cuMemFreeAsync by the reference's rules, each
 * block an allocation of kind 5 (g_allocs) of its pool, in one of three
 * states: live (handed out), pending (cuMemFreeAsync queued on stream
 * fstream, its free not yet run there) and cached (the free has run: kept
 * by the pool, reserved, but no address of the program's any more: queued
 * work that touches it then is the use after free it is).  An allocation on
 * stream s takes the smallest block that fits among the pool's cached
 * blocks (reuse of completed frees, the default
 * CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC) and the blocks pending on s
 * itself (in stream order), else new device memory (the request rounded up
 * to 512 bytes; CUDA_ERROR_OUT_OF_MEMORY past the device's memory).  A
 * block is used whole (no splitting).  Reserved bytes: every block;
 * used: the live ones.  Release threshold: at cuStreamSynchronize,
 * cuEventSynchronize and cuCtxSynchronize, cached blocks go back to the
 * device while the pool reserves more than its threshold (default 0);
 * cuMemPoolTrimTo(keep) does the same down to keep.  cuMemFree takes a live
 * block too (cached at once, no implicit synchronization, as the reference
 * says).  Pools outlive contexts; each device has a default pool, its
 * current pool unless dvdouble_pool_current made another current (what
 * cuDeviceSetMemPool does).  dvdouble_set_mempools(0): the device attribute
 * CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED reads 0 and every pool entry
 * says CUDA_ERROR_NOT_SUPPORTED. */
struct dv_CUmemPoolHandle_st {
  struct dv_CUmemPoolHandle_st *next_all;
  int dev, owned, destroyed;
  int reuse[4]; /* the int attributes 1..3 (1 by default) */
  uint64_t threshold, reserved, reserved_high, used, used_high;
};
static struct dv_CUmemPoolHandle_st *g_pools;
static struct dv_CUmemPoolHandle_st g_default_pool[MAX_DEV];
static struct dv_CUmemPoolHandle_st *g_current_pool[MAX_DEV];

static struct dv_CUmemPoolHandle_st *pool_default(int dev) {
  struct dv_CUmemPoolHandle_st *p = &g_default_pool[dev];
  if (!p->reuse[1]) p->dev = dev, p->reuse[1] = p->reuse[2] = p->reuse[3] = 1;
  return p;
}

static int pool_known(struct dv_CUmemPoolHandle_st *p) {
  for (int d = 0; d < MAX_DEV; d++)
    if (p == &g_default_pool[d]) return 1;
  for (struct dv_CUmemPoolHandle_st *x = g_pools; x; x = x->next_all)
    if (x == p && !x->destroyed) return 1;
  return 0;
}

/* Give cached block x (unlinked by the caller) back to the device. */
static void pool_release_block(alloc *x) {
  struct dv_CUmemPoolHandle_st *p = x->pool;
  p->reserved -= x->size;
  g_ctx[p->dev].used -= x->size;
  free(x->host);
  free(x);
}

/* Release the cached blocks of pool p while it reserves more than keep. */
static void pool_shrink(struct dv_CUmemPoolHandle_st *p, uint64_t keep) {
  for (alloc **pp = &g_allocs; *pp && p->reserved > keep;) {
    alloc *x = *pp;
    if (x->kind == 5 && x->pool == p && x->pstate == PB_CACHED) {
      *pp = x->next;
      pool_release_block(x);
    } else {
      pp = &x->next;
    }
  }
}

/* A synchronization point: every pool of device dev above its threshold shrinks to it. */
static void pool_sync_point(int dev) {
  pool_shrink(pool_default(dev), g_default_pool[dev].threshold);
  for (struct dv_CUmemPoolHandle_st *x = g_pools; x; x = x->next_all)
    if (x->dev == dev) pool_shrink(x, x->destroyed ? 0 : x->threshold);
}

/* The free op of a pending block ran on its stream (L held; the worker). */
static void pool_free_ran(op *o) {
  alloc *x = o->user;
  if (x->pstate != PB_PENDING || x->gen != o->wval) return; /* reused on its stream since */
  x->pstate = PB_CACHED;
  x->fstream = NULL;
  if (x->pool->destroyed) pool_shrink(x->pool, 0);
}

/* A live block goes back to its pool: pending on s (NULL: cached at once). */
static void pool_unuse(alloc *x, stream *s) {
  x->pool->used -= x->size;
  x->pstate = s ? PB_PENDING : PB_CACHED;
  x->fstream = s;
  x->gen++;
}

static int pools_off(void) { return g_no_mempools; }

/* cuMemFree of a live block (L held): cached at once. */
static int pool_block_free(alloc *x, struct dv_CUctx_st *c) {
  (void)c;
  pool_unuse(x, NULL);
  if (x->pool->destroyed) pool_shrink(x->pool, 0);
  return DV_CUDA_SUCCESS;
}

EXPORT CUresult cuMemAllocFromPoolAsync(dv_CUdeviceptr *p, size_t bytes, dv_CUmemoryPool pool, dv_CUstream h) {
  FAILPOINT("cuMemAllocFromPoolAsync");
  ENTER();
  if (pools_off()) return unlock_ret(DV_CUDA_ERROR_NOT_SUPPORTED);
  if (!p) return unlock_ret(DV_CUDA_ERROR_INVALID_VALUE);
  *p = 0;
  CTX(c);
  if (!bytes || !pool || !pool_known(pool)) return unlock_ret(DV_CUDA_ERROR_INVALID_VALUE);
  if (pool->dev != c->dev) return unlock_ret(DV_CUDA_ERROR_INVALID_VALUE); /* accessible from its device only */
  CUresult r;
  stream *s = resolve_stream(c, h, &r);
  if (!s) return unlock_ret(r);
  size_t size = (bytes + 511) / 512 * 512;
  if (size < bytes) return unlock_ret(DV_CUDA_ERROR_OUT_OF_MEMORY);
  alloc *best = NULL;
  for (alloc *x = g_allocs; x; x = x->next)
    if (x->kind == 5 && x->pool == pool && x->size >= size &&
        (x->pstate == PB_CACHED || (x->pstate == PB_PENDING && x->fstream == s)) && (!best || x->size < best->size))
      best = x;
  if (!best) {
    if (size > g_dev_mem - c->used) return unlock_ret(DV_CUDA_ERROR_OUT_OF_MEMORY);
    best = calloc(1, sizeof *best);
    char *m = best ? malloc(size) : NULL;
    if (!m) {
      free(best);
      return unlock_ret(DV_CUDA_ERROR_OUT_OF_MEMORY);
    }
    memset(m, 0xA5, size);
    best->kind = 5, best->host = m, best->size = size, best->ctx = c, best->addr = take_addr(c->dev, size);
    best->pool = pool;
    best->next = g_allocs;
    g_allocs = best;
    c->used += size;
    pool->reserved += size;
    if (pool->reserved > pool->reserved_high) pool->reserved_high = pool->reserved;
  }
  best->pstate = PB_LIVE;
  best->fstream = NULL;
  best->gen++;
  best->ctx = c;
  pool->used += best->size;
  if (pool->used > pool->used_high) pool->used_high = pool->used;
  *p = best->addr;
  return unlock_ret(DV_CUDA_SUCCESS);
}

EXPORT CUresult cuMemFreeAsync(dv_CUdeviceptr p, dv_CUstream h) {
  FAILPOINT("cuMemFreeAsync");
  ENTER();
  if (pools_off()) return unlock_ret(DV_CUDA_ERROR_NOT_SUPPORTED);
  CTX(c);
  CUresult r;
  stream *s = resolve_stream(c, h, &r);
  if (!s) return unlock_ret(r);
  alloc *x = g_allocs;
  while (x && !(x->kind == 5 && x->addr == p && x->pstate == PB_LIVE)) x = x->next;
  if (!x) return unlock_ret(DV_CUDA_ERROR_INVALID_VALUE); /* not live pool memory: a double free, cuMemAlloc's */
  op *o = op_new(11);
  if (!o) return unlock_ret(DV_CUDA_ERROR_OUT_OF_MEMORY);
  pool_unuse(x, s);
  o->user = x, o->wval = x->gen;
  r = enqueue(s, o);
  if (r) { /* not queued: the block stays live */
    x->pool->used += x->size;
    x->pstate = PB_LIVE;
    x->fstream = NULL;
  }
  return unlock_ret(r);
}

EXPORT CUresult cuMemPoolCreate(dv_CUmemoryPool *pool, const dv_CUmemPoolProps *props) {
  FAILPOINT("cuMemPoolCreate");
  ENTER();
  if (pools_off()) return unlock_ret(DV_CUDA_ERROR_NOT_SUPPORTED);
  if (!pool || !props) return unlock_ret(DV_CUDA_ERROR_INVALID_VALUE);
  *pool = NULL;
  static const unsigned char zero[sizeof props->reserved];
  if (props->allocType != DV_CU_MEM_ALLOCATION_TYPE_PINNED || props->handleTypes != DV_CU_MEM_HANDLE_TYPE_NONE ||
      props->location.type != DV_CU_MEM_LOCATION_TYPE_DEVICE || !DEV_OK(props->location.id) ||
      props->win32SecurityAttributes || memcmp(props->reserved, zero, sizeof zero))
    return unlock_ret(DV_CUDA_ERROR_INVALID_VALUE);
  struct dv_CUmemPoolHandle_st *x = calloc(1, sizeof *x);
  if (!x) return unlock_ret(DV_CUDA_ERROR_OUT_OF_MEMORY);
  x->dev = props->location.id, x->owned = 1, x->reuse[1] = x->reuse[2] = x->reuse[3] = 1;
  x->next_all = g_pools;
  g_pools = x;
  *pool = x;
  return unlock_ret(DV_CUDA_SUCCESS);
}

EXPORT CUresult cuMemPoolDestroy(dv_CUmemoryPool pool) {
  FAILPOINT("cuMemPoolDestroy");
  ENTER();
  if (pools_off()) return unlock_ret(DV_CUDA_ERROR_NOT_SUPPORTED);
  if (!pool || !pool_known(pool) || !pool->owned) return unlock_ret(DV_CUDA_ERROR_INVALID_VALUE);
  for (int d = 0; d < MAX_DEV; d++)
    if (g_current_pool[d] == pool) g_current_pool[d] = NULL; /* the device's default is current again */
  /* Returns at once; live and pending blocks go back when freed. */
  pool->destroyed = 1;
  pool_shrink(pool, 0);
  return unlock_ret(DV_CUDA_SUCCESS);
}

EXPORT CUresult cuMemPoolSetAttribute(dv_CUmemoryPool pool, dv_CUmemPool_attribute a, void *v) {
  FAILPOINT("cuMemPoolSetAttribute");
  ENTER();
  if (pools_off()) return unlock_ret(DV_CUDA_ERROR_NOT_SUPPORTED);
  if (!pool || !pool_known(pool) || !v) return unlock_ret(DV_CUDA_ERROR_INVALID_VALUE);
  uint64_t u = 0;
  if (a >= 4) memcpy(&u, v, sizeof u);
  switch (a) {
    case 1: case 2: case 3: pool->reuse[a] = *(int *)v != 0; break;
    case DV_CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: pool->threshold = u; break;
    case DV_CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
    case DV_CU_MEMPOOL_ATTR_USED_MEM_HIGH: /* high watermarks: reset to 0 only */
      if (u) return unlock_ret(DV_CUDA_ERROR_INVALID_VALUE);
      if (a == DV_CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH) pool->reserved_high = pool->reserved;
      else pool->used_high = pool->used;
      break;
    default: return unlock_ret(DV_CUDA_ERROR_INVALID_VALUE); /* the current figures are read-only */
  }
  return unlock_ret(DV_CUDA_SUCCESS);
}

EXPORT CUresult cuMemPoolGetAttribute(dv_CUmemoryPool pool, dv_CUmemPool_attribute a, void *v) {
  FAILPOINT("cuMemPoolGetAttribute");
  ENTER();
  if (pools_off()) return unlock_ret(DV_CUDA_ERROR_NOT_SUPPORTED);
  if (!pool || !pool_known(pool) || !v) return unlock_ret(DV_CUDA_ERROR_INVALID_VALUE);
  uint64_t u;
  switch (a) {
    case 1: case 2: case 3: *(int *)v = pool->reuse[a]; return unlock_ret(DV_CUDA_SUCCESS);
    case DV_CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: u = pool->threshold; break;
    case DV_CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT: u = pool->reserved; break;
    case DV_CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH: u = pool->reserved_high; break;
    case DV_CU_MEMPOOL_ATTR_USED_MEM_CURRENT: u = pool->used; break;
    case DV_CU_MEMPOOL_ATTR_USED_MEM_HIGH: u = pool->used_high; break;
    default: return unlock_ret(DV_CUDA_ERROR_INVALID_VALUE);
  }
  memcpy(v, &u, sizeof u);
  return unlock_ret(DV_CUDA_SUCCESS);
}

EXPORT CUresult cuMemPoolTrimTo(dv_CUmemoryPool pool, size_t keep) {
  FAILPOINT("cuMemPoolTrimTo");
  ENTER();
  if (pools_off()) return unlock_ret(DV_CUDA_ERROR_NOT_SUPPORTED);
  if (!pool || !pool_known(pool)) return unlock_ret(DV_CUDA_ERROR_INVALID_VALUE);
  pool_shrink(pool, keep); /* pending frees are not done yet: not released */
  return unlock_ret(DV_CUDA_SUCCESS);
}

EXPORT CUresult cuDeviceGetDefaultMemPool(dv_CUmemoryPool *pool, dv_CUdevice d) {
  FAILPOINT("cuDeviceGetDefaultMemPool");
  ENTER();
  if (pools_off()) return unlock_ret(DV_CUDA_ERROR_NOT_SUPPORTED);
  if (!pool) return unlock_ret(DV_CUDA_ERROR_INVALID_VALUE);
  if (!DEV_OK(d)) return unlock_ret(DV_CUDA_ERROR_INVALID_DEVICE);
  *pool = pool_default(d);
  return unlock_ret(DV_CUDA_SUCCESS);
}

EXPORT CUresult cuDeviceGetMemPool(dv_CUmemoryPool *pool, dv_CUdevice d) {
  FAILPOINT("cuDeviceGetMemPool");
  ENTER();
  if (pools_off()) return unlock_ret(DV_CUDA_ERROR_NOT_SUPPORTED);
  if (!pool) return unlock_ret(DV_CUDA_ERROR_INVALID_VALUE);
  if (!DEV_OK(d)) return unlock_ret(DV_CUDA_ERROR_INVALID_DEVICE);
  *pool = g_current_pool[d] ? g_current_pool[d] : pool_default(d);
  return unlock_ret(DV_CUDA_SUCCESS);
}

/* Make a new pool device d's current one (fresh 1; what another library's
 * cuDeviceSetMemPool would do) or the default pool again (0); the current pool. */
CONTROL void *dvdouble_pool_current(int d, int fresh) {
  pthread_mutex_lock(&L);
  struct dv_CUmemPoolHandle_st *x = NULL;
  if (d >= 0 && d < MAX_DEV) {
    if (fresh && (x = calloc(1, sizeof *x))) {
      x->dev = d, x->owned = 1, x->reuse[1] = x->reuse[2] = x->reuse[3] = 1;
      x->next_all = g_pools;
      g_pools = x;
    }
    g_current_pool[d] = x;
    if (!x) x = pool_default(d);
  }
  pthread_mutex_unlock(&L);
  return x;
}
CONTROL void *dvdouble_pool_default(int d) {
  pthread_mutex_lock(&L);
  void *x = d >= 0 && d < MAX_DEV ? pool_default(d) : NULL;
  pthread_mutex_unlock(&L);
  return x;
}
/* Pool p's figures: reserved, used, release threshold, cached blocks; -1: no such pool.
 * p NULL: every pool's reserved and used bytes, 0, and the created pools not destroyed. */
CONTROL int dvdouble_pool_stats(void *p, uint64_t out[4]) {
  pthread_mutex_lock(&L);
  if (!p) {
    memset(out, 0, 4 * sizeof out[0]);
    for (int d = 0; d < MAX_DEV; d++) out[0] += g_default_pool[d].reserved, out[1] += g_default_pool[d].used;
    for (struct dv_CUmemPoolHandle_st *x = g_pools; x; x = x->next_all) {
      out[0] += x->reserved, out[1] += x->used;
      if (!x->destroyed) out[3]++;
    }
    pthread_mutex_unlock(&L);
    return 0;
  }
  struct dv_CUmemPoolHandle_st *x = p;
  int ok = pool_known(x);
  if (ok) {
    out[0] = x->reserved, out[1] = x->used, out[2] = x->threshold, out[3] = 0;
    for (alloc *a = g_allocs; a; a = a->next)
      if (a->kind == 5 && a->pool == x && a->pstate == PB_CACHED) out[3]++;
  }
  pthread_mutex_unlock(&L);
  return ok ? 0 : -1;
}
CONTROL void dvdouble_set_mempools(int on) {
  pthread_mutex_lock(&L);
  g_no_mempools = !on;
  pthread_mutex_unlock(&L);
}

EXPORT CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total_bytes) {
  ENTER();
  if (!free_bytes || !total_bytes) return unlock_ret(DV_CUDA_ERROR_INVALID_VALUE);
  CTX(c);
  *free_bytes = g_dev_mem - c->used;
  *total_bytes = g_dev_mem;
  return unlock_ret(DV_CUDA_SUCCESS);
}

EXPORT CUresult cuMemHostAlloc(void **p, size_t bytes, unsigned flags) {
  ENTER();
  g_calls[C_HOSTALLOC]++;
  if (!p) return unlock_ret(DV_CUDA_ERROR_INVALID_VALUE);
  *p = NULL;
  CTX(c);
  if (!bytes || (flags & ~7u)) return unlock_ret(DV_CUDA_ERROR_INVALID_VALUE);
  if (bytes > g_pinned_limit - g_pinned_used) return unlock_ret(DV_CUDA_ERROR_OUT_OF_MEMORY);
  alloc *x = calloc(1, sizeof *x);
  char *h = NULL;
  if (!x || posix_memalign((void **)&h, 4096, bytes)) {
    free(x);
    return unlock_ret(DV_CUDA_ERROR_OUT_OF_MEMORY);
  }
  x->kind = 3, x->host = h, x->size = bytes, x->ctx = c, x->flags = flags, x->addr = (uint64_t)(uintptr_t)h;
  x->next = g_allocs;
  g_allocs = x;
  g_pinned_used += bytes;
  if (g_pinned_used > g_pinned_peak) g_pinned_peak = g_pinned_used;
  *p = h;
  return unlock_ret(DV_CUDA_SUCCESS);
}

EXPORT CUresult cuMemFreeHost(void *p) {
  ENTER();
  g_calls[C_FREEHOST]++;
  CTX(c);
  (void)c;
  for (alloc **pp = &g_allocs; *pp; pp = &(*pp)->next) {
    alloc *x = *pp;
    if (x->kind == 3 && x->host == p) {
      *pp = x->next;
      g_pinned_used -= x->size;
      free(x->host);
      free(x);
      return unlock_ret(DV_CUDA_SUCCESS);
    }
  }
  return unlock_ret(DV_CUDA_ERROR_INVALID_VALUE);
}

EXPORT CUresult cuMemHostGetDevicePointer_v2(dv_CUdeviceptr *d, void *p, unsigned flags) {
  ENTER();
  if (!d || flags) return unlock_ret(DV_CUDA_ERROR_INVALID_VALUE);
  *d = 0;
  CTX(c);
  uintptr_t a = (uintptr_t)p;
  for (alloc *x = g_allocs; x; x = x->next) {
    if (x->kind != 3 && x->kind != 4) continue;
    uintptr_t b = (uintptr_t)x->host;
    if (a >= b && a - b < x->size) {
      if (!(x->flags & DV_CU_MEMHOSTALLOC_DEVICEMAP)) return unlock_ret(DV_CUDA_ERROR_INVALID_VALUE);
      *d = (dv_CUdeviceptr)a + map_off(c->dev); /* this device's address of it */
      return unlock_ret(DV_CUDA_SUCCESS);
    }
  }
  return unlock_ret(DV_CUDA_ERROR_INVALID_VALUE);
}

/* Pointer attributes (issue 36; optional for the backend, so declared here,
 * not in the .def): the memory type, and the allocation's range, of device
 * memory (its device address), pinned and registered host memory (any byte
 * of it, by its host address).  Anything else, pageable host memory
 * included: INVALID_VALUE, as a driver with unified addressing answers. */
EXPORT CUresult cuPointerGetAttribute(void *data, int attribute, dv_CUdeviceptr ptr);
EXPORT CUresult cuPointerGetAttribute(void *data, int attribute, dv_CUdeviceptr ptr) {
  ENTER();
  if (!data) return unlock_ret(DV_CUDA_ERROR_INVALID_VALUE);
  for (alloc *x = g_allocs; x; x = x->next) {
    int host = x->kind == 3 || x->kind == 4;
    uint64_t base = host ? (uint64_t)(uintptr_t)x->host : x->addr;
    if (ptr < base || ptr - base >= x->size) continue;
    switch (attribute) {
      case 2: /* CU_POINTER_ATTRIBUTE_MEMORY_TYPE */
        *(unsigned *)data = host ? DV_CU_MEMORYTYPE_HOST : DV_CU_MEMORYTYPE_DEVICE;
        return unlock_ret(DV_CUDA_SUCCESS);
      case 11: /* CU_POINTER_ATTRIBUTE_RANGE_START_ADDR */
        *(dv_CUdeviceptr *)data = base;
        return unlock_ret(DV_CUDA_SUCCESS);
      case 12: /* CU_POINTER_ATTRIBUTE_RANGE_SIZE */
        *(size_t *)data = x->size;
        return unlock_ret(DV_CUDA_SUCCESS);
      default: return unlock_ret(DV_CUDA_ERROR_INVALID_VALUE);
    }
  }
  return unlock_ret(DV_CUDA_ERROR_INVALID_VALUE);
}

EXPORT CUresult cuMemHostRegister_v2(void *p, size_t bytes, unsigned flags) {
  ENTER();
  CTX(c);
  if (!p || !bytes || (flags & ~0xFu)) return unlock_ret(DV_CUDA_ERROR_INVALID_VALUE);
  if (is_dev_addr(p)) return unlock_ret(DV_CUDA_ERROR_INVALID_VALUE);
  uintptr_t a = (uintptr_t)p;
  for (alloc *x = g_allocs; x; x = x->next) {
    if (x->kind != 3 && x->kind != 4) continue;
    uintptr_t b = (uintptr_t)x->host;
    if (a < b + x->size && b < a + bytes) return unlock_ret(DV_CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
  }
  alloc *x = calloc(1, sizeof *x);
  if (!x) return unlock_ret(DV_CUDA_ERROR_OUT_OF_MEMORY);
  x->kind = 4, x->host = p, x->size = bytes, x->ctx = c, x->flags = flags, x->addr = a;
  x->next = g_allocs;
  g_allocs = x;
  return unlock_ret(DV_CUDA_SUCCESS);
}

EXPORT CUresult cuMemHostUnregister(void *p) {
  ENTER();
  g_calls[C_UNREGISTER]++;
  CTX(c);
  (void)c;
  for (alloc **pp = &g_allocs; *pp; pp = &(*pp)->next) {
    alloc *x = *pp;
    if (x->kind == 4 && x->host == p) {
      *pp = x->next;
      free(x);
      return unlock_ret(DV_CUDA_SUCCESS);
    }
  }
  return unlock_ret(DV_CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
}

/* ---- copies -------------------------------------------------------------------------------------- */

/* Queue a copy, or run it synchronously as the reference says for pageable
 * host memory.  Sides are checked now; device sides again when it runs. */
static CUresult do_copy(op *o, dv_CUstream h, const char *what) {
  CTX(c);
  CUresult r;
  stream *s = resolve_stream(c, h, &r);
  if (!s) {
    free(o);
    return unlock_ret(r);
  }
  size_t ss = span3(o->width, o->height, o->depth, o->spitch, o->sheight);
  size_t ds = span3(o->width, o->height, o->depth, o->dpitch, o->dheight);
  if (ss && ((o->sdev && !find_dev(c->dev, o->saddr, ss)) || (!o->sdev && (!o->saddr || is_dev_addr((void *)(uintptr_t)o->saddr))))) {
    free(o);
    return unlock_ret(DV_CUDA_ERROR_INVALID_VALUE);
  }
  if (ds && ((o->ddev && !find_dev(c->dev, o->daddr, ds)) || (!o->ddev && (!o->daddr || is_dev_addr((void *)(uintptr_t)o->daddr))))) {
    free(o);
    return unlock_ret(DV_CUDA_ERROR_INVALID_VALUE);
  }
  if (!ss) {
    free(o);
    return unlock_ret(DV_CUDA_SUCCESS);
  }
  int pageable_src = !o->sdev && !host_pinned((void *)(uintptr_t)o->saddr, ss);
  int pageable_dst = !o->ddev && !host_pinned((void *)(uintptr_t)o->daddr, ds);
  if (s->capturing && (pageable_src || pageable_dst)) {
    /* A copy the driver runs synchronously cannot be captured. */
    free(o);
    return unlock_ret(capture_refuse(s, CAPTURE_UNSUPPORTED));
  }
  if ((r = enqueue(s, o)) != DV_CUDA_SUCCESS) return unlock_ret(r);
  if (pageable_src || pageable_dst) {
    /* Host to device from pageable memory: the stream is synchronized, the
     * bytes taken, and the call returns; device to pageable host: returns
     * when the copy is done.  Either way the caller waits for the stream. */
    if (wait_stream(s, o->seq, 1)) deadlock(what);
  }
  return unlock_ret(DV_CUDA_SUCCESS);
}

EXPORT CUresult cuMemcpyHtoDAsync_v2(dv_CUdeviceptr d, const void *hp, size_t n, dv_CUstream s) {
  ENTER();
  op *o = op_new(1);
  if (!o) return unlock_ret(DV_CUDA_ERROR_OUT_OF_MEMORY);
  o->ddev = 1, o->daddr = d, o->saddr = (uint64_t)(uintptr_t)hp;
  o->width = n, o->height = o->depth = 1;
  return do_copy(o, s, DBL_HIP ? "hipMemcpyHtoDAsync" : "cuMemcpyHtoDAsync");
}

EXPORT CUresult cuMemcpyDtoHAsync_v2(void *hp, dv_CUdeviceptr d, size_t n, dv_CUstream s) {
  ENTER();
  op *o = op_new(1);
  if (!o) return unlock_ret(DV_CUDA_ERROR_OUT_OF_MEMORY);
  o->sdev = 1, o->saddr = d, o->daddr = (uint64_t)(uintptr_t)hp;
  o->width = n, o->height = o->depth = 1;
  return do_copy(o, s, DBL_HIP ? "hipMemcpyDtoHAsync" : "cuMemcpyDtoHAsync");
}

EXPORT CUresult cuMemcpyDtoDAsync_v2(dv_CUdeviceptr d, dv_CUdeviceptr src, size_t n, dv_CUstream s) {
  ENTER();
  op *o = op_new(1);
  if (!o) return unlock_ret(DV_CUDA_ERROR_OUT_OF_MEMORY);
  o->sdev = o->ddev = 1, o->saddr = src, o->daddr = d;
  o->width = n, o->height = o->depth = 1;
  return do_copy(o, s, DBL_HIP ? "hipMemcpyDtoDAsync" : "cuMemcpyDtoDAsync");
}

/* One side of a 2-D/3-D copy description: 0 or the error. */
static CUresult rect_side(int type, const void *host, dv_CUdeviceptr dev, const void *array, size_t x, size_t y,
                          size_t z, size_t pitch, size_t rows, int *is_dev, uint64_t *addr) {
  if (array) return DV_CUDA_ERROR_INVALID_VALUE; /* CUDA arrays: not modelled */
  if (type == DV_CU_MEMORYTYPE_HOST) {
    if (!host) return DV_CUDA_ERROR_INVALID_VALUE;
    *is_dev = 0, *addr = (uint64_t)(uintptr_t)host;
  } else if (type == DV_CU_MEMORYTYPE_DEVICE) {
    if (!dev) return DV_CUDA_ERROR_INVALID_VALUE;
    *is_dev = 1, *addr = dev;
  } else {
    return DV_CUDA_ERROR_INVALID_VALUE; /* arrays, unified: not modelled */
  }
  if (pitch > g_max_pitch) return DV_CUDA_ERROR_INVALID_VALUE;
  *addr += z * pitch * rows + y * pitch + x;
  return DV_CUDA_SUCCESS;
}

EXPORT CUresult cuMemcpy2DAsync_v2(const dv_CUDA_MEMCPY2D *p, dv_CUstream s) {
  ENTER();
  if (!p) return unlock_ret(DV_CUDA_ERROR_INVALID_VALUE);
  op *o = op_new(1);
  if (!o) return unlock_ret(DV_CUDA_ERROR_OUT_OF_MEMORY);
  CUresult r = rect_side(p->srcMemoryType, p->srcHost, p->srcDevice, p->srcArray, p->srcXInBytes, p->srcY, 0,
                         p->srcPitch, 0, &o->sdev, &o->saddr);
  if (!r) r = rect_side(p->dstMemoryType, p->dstHost, p->dstDevice, p->dstArray, p->dstXInBytes, p->dstY, 0,
                        p->dstPitch, 0, &o->ddev, &o->daddr);
  if (!r && p->Height > 1 && (p->srcPitch < p->WidthInBytes + p->srcXInBytes || p->dstPitch < p->WidthInBytes + p->dstXInBytes))
    r = DV_CUDA_ERROR_INVALID_VALUE;
  if (!r && o->sdev && o->ddev && p->Height > 1 && ((p->srcPitch % 4) || (p->dstPitch % 4)))
    r = DV_CUDA_ERROR_INVALID_VALUE; /* "may fail for pitches not computed by cuMemAllocPitch" */
  if (r) {
    free(o);
    return unlock_ret(r);
  }
  o->width = p->WidthInBytes, o->height = p->Height, o->depth = 1;
  o->spitch = p->srcPitch, o->dpitch = p->dstPitch, o->sheight = o->dheight = p->Height;
  return do_copy(o, s, DBL_HIP ? "hipMemcpyParam2DAsync" : "cuMemcpy2DAsync");
}

EXPORT CUresult cuMemcpy3DAsync_v2(const dv_CUDA_MEMCPY3D *p, dv_CUstream s) {
  ENTER();
  if (!p) return unlock_ret(DV_CUDA_ERROR_INVALID_VALUE);
  if (p->reserved0 || p->reserved1 || p->srcLOD || p->dstLOD) return unlock_ret(DV_CUDA_ERROR_INVALID_VALUE);
  op *o = op_new(1);
  if (!o) return unlock_ret(DV_CUDA_ERROR_OUT_OF_MEMORY);
  CUresult r = rect_side(p->srcMemoryType, p->srcHost, p->srcDevice, p->srcArray, p->srcXInBytes, p->srcY, p->srcZ,
                         p->srcPitch, p->srcHeight, &o->sdev, &o->saddr);
  if (!r) r = rect_side(p->dstMemoryType, p->dstHost, p->dstDevice, p->dstArray, p->dstXInBytes, p->dstY, p->dstZ,
                        p->dstPitch, p->dstHeight, &o->ddev, &o->daddr);
  if (!r && (p->Height > 1 || p->Depth > 1) &&
      (p->srcPitch < p->WidthInBytes + p->srcXInBytes || p->dstPitch < p->WidthInBytes + p->dstXInBytes))
    r = DV_CUDA_ERROR_INVALID_VALUE;
  if (!r && p->Depth > 1 && (p->srcHeight < p->Height + p->srcY || p->dstHeight < p->Height + p->dstY))
    r = DV_CUDA_ERROR_INVALID_VALUE;
  if (!r && o->sdev && o->ddev && (p->Height > 1 || p->Depth > 1) && ((p->srcPitch % 4) || (p->dstPitch % 4)))
    r = DV_CUDA_ERROR_INVALID_VALUE;
  if (r) {
    free(o);
    return unlock_ret(r);
  }
  o->width = p->WidthInBytes, o->height = p->Height, o->depth = p->Depth;
  o->spitch = p->srcPitch, o->dpitch = p->dstPitch, o->sheight = p->srcHeight, o->dheight = p->dstHeight;
  return do_copy(o, s, "cuMemcpy3DAsync");
}

EXPORT CUresult cuMemsetD8Async(dv_CUdeviceptr d, unsigned char v, size_t n, dv_CUstream h) {
  ENTER();
  CTX(c);
  CUresult r;
  stream *s = resolve_stream(c, h, &r);
  if (!s) return unlock_ret(r);
  if (!n) return unlock_ret(DV_CUDA_SUCCESS);
  if (!find_dev(c->dev, d, n)) return unlock_ret(DV_CUDA_ERROR_INVALID_VALUE);
  op *o = op_new(2);
  if (!o) return unlock_ret(DV_CUDA_ERROR_OUT_OF_MEMORY);
  o->daddr = d, o->width = n, o->value = v;
  return unlock_ret(enqueue(s, o));
}

/* Peer copies: both ranges must be device memory of the contexts named
 * (the double's address ranges are per device, so a wrong context is
 * caught); queued on a stream of the current context. */
EXPORT CUresult cuMemcpyPeerAsync(dv_CUdeviceptr d, dv_CUcontext dctx, dv_CUdeviceptr src, dv_CUcontext sctx, size_t n,
                                  dv_CUstream s) {
  ENTER();
  if (!ctx_known(dctx) || !ctx_known(sctx) || !dctx->active || !sctx->active)
    return unlock_ret(DV_CUDA_ERROR_INVALID_CONTEXT);
  alloc *da = find_dev(dctx->dev, d, n ? n : 1), *sa = find_dev(sctx->dev, src, n ? n : 1);
  if (n && (!da || !sa || da->ctx != dctx || sa->ctx != sctx)) return unlock_ret(DV_CUDA_ERROR_INVALID_VALUE);
  op *o = op_new(1);
  if (!o) return unlock_ret(DV_CUDA_ERROR_OUT_OF_MEMORY);
  o->sdev = o->ddev = 1, o->saddr = src, o->daddr = d;
  o->width = n, o->height = o->depth = 1;
  g_peer_copies++;
  return do_copy(o, s, DBL_HIP ? "hipMemcpyPeerAsync" : "cuMemcpyPeerAsync");
}

EXPORT CUresult cuCtxEnablePeerAccess(dv_CUcontext peer, unsigned flags) {
  ENTER();
  CTX(c);
  if (flags) return unlock_ret(DV_CUDA_ERROR_INVALID_VALUE);
  if (!ctx_known(peer) || !peer->active) return unlock_ret(DV_CUDA_ERROR_INVALID_CONTEXT);
  if (peer == c) return unlock_ret(DV_CUDA_ERROR_INVALID_DEVICE); /* a context cannot be its own peer */
  if (c->peers & (1u << peer->dev)) return unlock_ret(704); /* PEER_ACCESS_ALREADY_ENABLED */
  c->peers |= 1u << peer->dev;
  return unlock_ret(DV_CUDA_SUCCESS);
}

/* IPC: the double cannot share its memory with another process (each has
 * its own double), so it hands out handles that name (process, address,
 * size) and refuses to open them: in the exporting process as the driver
 * does (a process cannot open its own handle), elsewhere as not supported. */
typedef struct ipc_payload {
  char magic[8];
  uint64_t pid, addr, size;
} ipc_payload;

EXPORT CUresult cuIpcGetMemHandle(dv_CUipcMemHandle *h, dv_CUdeviceptr p) {
  ENTER();
  if (!h) return unlock_ret(DV_CUDA_ERROR_INVALID_VALUE);
  CTX(c);
  for (alloc *x = g_allocs; x; x = x->next)
    if (x->kind == 1 && x->addr == p && x->ctx == c) {
      ipc_payload pl = {"DVDOUBL", (uint64_t)getpid(), x->addr, x->size};
      _Static_assert(sizeof pl <= sizeof *h, "payload fits the handle");
      memset(h, 0, sizeof *h);
      memcpy(h, &pl, sizeof pl);
      return unlock_ret(DV_CUDA_SUCCESS);
    }
  return unlock_ret(DV_CUDA_ERROR_INVALID_VALUE);
}

EXPORT CUresult cuIpcOpenMemHandle_v2(dv_CUdeviceptr *p, dv_CUipcMemHandle h, unsigned flags) {
  ENTER();
  if (!p || flags > 1) return unlock_ret(DV_CUDA_ERROR_INVALID_VALUE);
  *p = 0;
  CTX(c);
  (void)c;
  ipc_payload pl;
  memcpy(&pl, &h, sizeof pl);
  if (memcmp(pl.magic, "DVDOUBL", 8)) return unlock_ret(DV_CUDA_ERROR_INVALID_VALUE);
  if (pl.pid == (uint64_t)getpid()) return unlock_ret(DV_CUDA_ERROR_INVALID_CONTEXT);
  return unlock_ret(DV_CUDA_ERROR_NOT_SUPPORTED);
}

EXPORT CUresult cuIpcCloseMemHandle(dv_CUdeviceptr p) {
  ENTER();
  CTX(c);
  (void)c, (void)p;
  return unlock_ret(DV_CUDA_ERROR_INVALID_VALUE); /* nothing is ever opened */
}

EXPORT CUresult cuMemGetAddressRange_v2(dv_CUdeviceptr *base, size_t *bytes, dv_CUdeviceptr p) {
  ENTER();
  CTX(c);
  alloc *x = find_dev(c->dev, p, 1);
  if (!x) return unlock_ret(DV_CUDA_ERROR_NOT_FOUND);
  if (base) *base = p - (uint64_t)(dev_bytes(c->dev, x, p) - x->host);
  if (bytes) *bytes = x->size;
  return unlock_ret(DV_CUDA_SUCCESS);
}

/* ---- streams, events ------------------------------------------------------------------------------- */

EXPORT CUresult cuStreamCreate(dv_CUstream *out, unsigned flags) {
  ENTER();
  if (!out) return unlock_ret(DV_CUDA_ERROR_INVALID_VALUE);
  *out = NULL;
  CTX(c);
  if (flags & ~1u) return unlock_ret(DV_CUDA_ERROR_INVALID_VALUE);
  stream *s = stream_new(c, flags, 0);
  if (!s) return unlock_ret(DV_CUDA_ERROR_OUT_OF_MEMORY);
  *out = s;
  return unlock_ret(DV_CUDA_SUCCESS);
}

EXPORT CUresult cuStreamDestroy_v2(dv_CUstream h) {
  ENTER();
  CTX(c);
  stream *s = (stream *)h;
  if (!h || h == DV_CU_STREAM_LEGACY || h == DV_CU_STREAM_PER_THREAD || !stream_known(s) || s->ctx != c)
    return unlock_ret(DV_CUDA_ERROR_INVALID_HANDLE);
  /* Returns at once; the work already queued still runs. */
  s->destroyed = 1;
  wait_stream(s, s->enq, 0);
  stream_reap(s);
  return unlock_ret(DV_CUDA_SUCCESS);
}

EXPORT CUresult cuStreamSynchronize(dv_CUstream h) {
  ENTER();
  CTX(c);
  CUresult r;
  stream *s = resolve_stream(c, h, &r);
  if (!s) return unlock_ret(r);
  if (s->capturing) return unlock_ret(capture_refuse(s, CAPTURE_UNSUPPORTED));
  wait_stream(s, s->enq, 0);
  pool_sync_point(c->dev);
  return unlock_ret(c->sticky);
}

EXPORT CUresult cuStreamQuery(dv_CUstream h) {
  ENTER();
  CTX(c);
  CUresult r;
  stream *s = resolve_stream(c, h, &r);
  if (!s) return unlock_ret(r);
  if (s->capturing) return unlock_ret(capture_refuse(s, CAPTURE_UNSUPPORTED));
  return unlock_ret(s->done >= s->enq ? DV_CUDA_SUCCESS : DV_CUDA_ERROR_NOT_READY);
}

EXPORT CUresult cuStreamIsCapturing(dv_CUstream h, dv_CUstreamCaptureStatus *status) {
  ENTER();
  if (!status) return unlock_ret(DV_CUDA_ERROR_INVALID_VALUE);
  CTX(c);
  CUresult r;
  stream *s = resolve_stream(c, h, &r);
  if (!s) return unlock_ret(r);
  if (s->kind == 1 && !(s->flags & DV_CU_STREAM_NON_BLOCKING))
    for (stream *x = g_streams; x; x = x->next_all)
      if (x->ctx == c && x != s && !x->destroyed && x->capturing && !(x->flags & DV_CU_STREAM_NON_BLOCKING))
        return unlock_ret(CAPTURE_IMPLICIT); /* the legacy stream, a blocking stream capturing */
  *status = !s->capturing     ? DV_CU_STREAM_CAPTURE_STATUS_NONE
            : s->invalidated ? DV_CU_STREAM_CAPTURE_STATUS_INVALIDATED
                             : DV_CU_STREAM_CAPTURE_STATUS_ACTIVE;
  return unlock_ret(DV_CUDA_SUCCESS);
}

static int event_known(struct dv_CUevent_st *e) {
  for (struct dv_CUevent_st *x = g_events; x; x = x->next_all)
    if (x == e) return 1;
  return 0;
}

EXPORT CUresult cuStreamWaitEvent(dv_CUstream h, dv_CUevent e, unsigned flags) {
  ENTER();
  CTX(c);
  if (flags) return unlock_ret(DV_CUDA_ERROR_INVALID_VALUE);
  if (!event_known(e)) return unlock_ret(DV_CUDA_ERROR_INVALID_HANDLE);
  CUresult r;
  stream *s = resolve_stream(c, h, &r);
  if (!s) return unlock_ret(r);
  /* A capture waits only for its own work: an event recorded outside it is
   * the isolation error, and invalidates the capture. */
  if (s->capturing) return unlock_ret(capture_refuse(s, CAPTURE_ISOLATION));
  if (!e->recorded || !e->s || e->s->done >= e->seq) return unlock_ret(DV_CUDA_SUCCESS);
  op *o = op_new(4);
  if (!o) return unlock_ret(DV_CUDA_ERROR_OUT_OF_MEMORY);
  o->wait_s = e->s, o->wait_seq = e->seq;
  return unlock_ret(enqueue(s, o));
}

EXPORT CUresult cuLaunchHostFunc(dv_CUstream h, dv_CUhostFn fn, void *user) {
  ENTER();
  CTX(c);
  if (!fn) return unlock_ret(DV_CUDA_ERROR_INVALID_VALUE);
  CUresult r;
  stream *s = resolve_stream(c, h, &r);
  if (!s) return unlock_ret(r);
  op *o = op_new(3);
  if (!o) return unlock_ret(DV_CUDA_ERROR_OUT_OF_MEMORY);
  o->fn = fn, o->user = user;
  return unlock_ret(enqueue(s, o));
}

EXPORT CUresult cuStreamWaitValue64_v2(dv_CUstream h, dv_CUdeviceptr addr, uint64_t value, unsigned flags) {
  ENTER();
  CTX(c);
  if (g_no_memops) return unlock_ret(DV_CUDA_ERROR_NOT_SUPPORTED);
  if (flags != 0 /* GEQ; the others are not played */ || (addr & 7)) return unlock_ret(DV_CUDA_ERROR_INVALID_VALUE);
  alloc *x = find_dev(c->dev, addr, 8);
  if (!x || x->kind == 2) return unlock_ret(DV_CUDA_ERROR_INVALID_VALUE); /* not managed memory, the reference says */
  CUresult r;
  stream *s = resolve_stream(c, h, &r);
  if (!s) return unlock_ret(r);
  op *o = op_new(9);
  if (!o) return unlock_ret(DV_CUDA_ERROR_OUT_OF_MEMORY);
  o->daddr = addr, o->wval = value;
  return unlock_ret(enqueue(s, o));
}

EXPORT CUresult cuStreamAddCallback(dv_CUstream h, dv_CUstreamCallback fn, void *user, unsigned flags) {
  ENTER();
  g_calls[C_ADDCALLBACK]++;
  CTX(c);
  if (!fn || flags) return unlock_ret(DV_CUDA_ERROR_INVALID_VALUE);
  CUresult r;
  stream *s = resolve_stream(c, h, &r);
  if (!s) return unlock_ret(r);
  if (s->capturing) return unlock_ret(capture_refuse(s, CAPTURE_UNSUPPORTED)); /* not capturable */
  op *o = op_new(8);
  if (!o) return unlock_ret(DV_CUDA_ERROR_OUT_OF_MEMORY);
  o->cb = fn, o->cb_stream = h, o->user = user;
  return unlock_ret(enqueue(s, o));
}

EXPORT CUresult cuEventCreate(dv_CUevent *out, unsigned flags) {
  ENTER();
  if (!out) return unlock_ret(DV_CUDA_ERROR_INVALID_VALUE);
  *out = NULL;
  CTX(c);
  if (flags & ~0xFu) return unlock_ret(DV_CUDA_ERROR_INVALID_VALUE);
  struct dv_CUevent_st *e = calloc(1, sizeof *e);
  if (!e) return unlock_ret(DV_CUDA_ERROR_OUT_OF_MEMORY);
  e->ctx = c, e->flags = flags;
  e->next_all = g_events;
  g_events = e;
  *out = e;
  return unlock_ret(DV_CUDA_SUCCESS);
}

EXPORT CUresult cuEventDestroy_v2(dv_CUevent e) {
  ENTER();
  CTX(c);
  (void)c;
  for (struct dv_CUevent_st **pp = &g_events; *pp; pp = &(*pp)->next_all)
    if (*pp == e) {
      *pp = e->next_all;
      /* As the reference says: with a record still queued the call returns
       * at once, and the event goes when the record completes (the record
       * refers to it: it frees it then). */
      if (e->recorded && e->s && e->s->done < e->seq)
        e->destroyed = 1;
      else
        free(e);
      return unlock_ret(DV_CUDA_SUCCESS);
    }
  return unlock_ret(DV_CUDA_ERROR_INVALID_HANDLE);
}

EXPORT CUresult cuEventRecord(dv_CUevent e, dv_CUstream h) {
  ENTER();
  CTX(c);
  if (!event_known(e)) return unlock_ret(DV_CUDA_ERROR_INVALID_HANDLE);
  if (e->ctx != c) return unlock_ret(DV_CUDA_ERROR_INVALID_HANDLE);
  CUresult r;
  stream *s = resolve_stream(c, h, &r);
  if (!s) return unlock_ret(r);
  if (s->capturing) { /* a record node of the graph: the event itself is not recorded now */
    op *o = op_new(5);
    if (o) o->ev = e;
    return unlock_ret(o ? enqueue(s, o) : DV_CUDA_ERROR_OUT_OF_MEMORY);
  }
  /* A record replaced before it ran: wait for the old one (keeps it simple). */
  if (e->recorded && e->s) wait_stream(e->s, e->seq, 0);
  op *o = op_new(5);
  if (!o) return unlock_ret(DV_CUDA_ERROR_OUT_OF_MEMORY);
  o->ev = e;
  e->when_set = 0;
  if ((r = enqueue(s, o)) != DV_CUDA_SUCCESS) return unlock_ret(r);
  e->s = s, e->seq = o->seq, e->recorded = 1;
  return unlock_ret(DV_CUDA_SUCCESS);
}

EXPORT CUresult cuEventQuery(dv_CUevent e) {
  ENTER();
  CTX(c);
  (void)c;
  if (!event_known(e)) return unlock_ret(DV_CUDA_ERROR_INVALID_HANDLE);
  if (!e->recorded) return unlock_ret(DV_CUDA_SUCCESS);
  return unlock_ret(!e->s || e->s->done >= e->seq ? DV_CUDA_SUCCESS : DV_CUDA_ERROR_NOT_READY);
}

EXPORT CUresult cuEventSynchronize(dv_CUevent e) {
  ENTER();
  CTX(c);
  if (!event_known(e)) return unlock_ret(DV_CUDA_ERROR_INVALID_HANDLE);
  if (e->recorded && e->s) wait_stream(e->s, e->seq, 0);
  pool_sync_point(c->dev);
  return unlock_ret(c->sticky);
}

EXPORT CUresult cuEventElapsedTime_v2(float *ms, dv_CUevent a, dv_CUevent b) {
  ENTER();
  CTX(c);
  (void)c;
  if (!ms) return unlock_ret(DV_CUDA_ERROR_INVALID_VALUE);
  if (!event_known(a) || !event_known(b)) return unlock_ret(DV_CUDA_ERROR_INVALID_HANDLE);
  if ((a->flags & DV_CU_EVENT_DISABLE_TIMING) || (b->flags & DV_CU_EVENT_DISABLE_TIMING) || !a->recorded ||
      !b->recorded)
    return unlock_ret(DV_CUDA_ERROR_INVALID_HANDLE);
  if (!a->when_set || !b->when_set) return unlock_ret(DV_CUDA_ERROR_NOT_READY);
  *ms = (float)((double)(b->when.tv_sec - a->when.tv_sec) * 1e3 + (double)(b->when.tv_nsec - a->when.tv_nsec) / 1e6);
  return unlock_ret(DV_CUDA_SUCCESS);
}

/* ---- modules, kernels ------------------------------------------------------------------------------- */

static void mod_free(struct dv_CUmod_st *m) {
  for (int i = 0; i < m->nvar; i++)
    for (alloc **pp = &g_allocs; *pp; pp = &(*pp)->next)
      if ((*pp)->addr == m->var[i].addr && (*pp)->kind == 1) {
        alloc *x = *pp;
        *pp = x->next;
        free(x->host);
        free(x);
        break;
      }
  free(m->fn);
  free(m->var);
  free(m);
}

static size_t type_size(const char *t) {
  if (!strncmp(t, ".u8", 3) || !strncmp(t, ".s8", 3) || !strncmp(t, ".b8", 3)) return 1;
  if (!strncmp(t, ".u16", 4) || !strncmp(t, ".s16", 4) || !strncmp(t, ".b16", 4) || !strncmp(t, ".f16", 4)) return 2;
  if (!strncmp(t, ".u32", 4) || !strncmp(t, ".s32", 4) || !strncmp(t, ".b32", 4) || !strncmp(t, ".f32", 4)) return 4;
  if (!strncmp(t, ".u64", 4) || !strncmp(t, ".s64", 4) || !strncmp(t, ".b64", 4) || !strncmp(t, ".f64", 4)) return 8;
  return 0;
}

/* ".param .u64 name" / ".param .align 8 .b8 name[136]" / ".const .align 4 .b8 name[64]": the size. */
static size_t decl_size(const char *p, const char *end, char *name, size_t cap) {
  size_t unit = 0;
  while (p < end) {
    while (p < end && (*p == ' ' || *p == '\t')) p++;
    if (p >= end) break;
    const char *w = p;
    while (p < end && *p != ' ' && *p != '\t' && *p != ',' && *p != ';' && *p != ')' && *p != '=') p++;
    if (*w == '.') {
      size_t u = type_size(w);
      if (u && (size_t)(p - w) <= 4) unit = u;
      continue;
    }
    if (*w >= '0' && *w <= '9') continue; /* the .align value */
    /* the name, maybe [count] */
    const char *br = memchr(w, '[', (size_t)(p - w));
    size_t nl = (size_t)((br ? br : p) - w);
    if (nl >= cap) nl = cap - 1;
    memcpy(name, w, nl);
    name[nl] = 0;
    size_t count = br ? (size_t)strtoull(br + 1, NULL, 10) : 1;
    return unit * (count ? count : 1);
  }
  return 0;
}

static CUresult ptx_parse(const char *ptx, struct dv_CUmod_st *m, struct dv_CUctx_st *c) {
  int cap_fn = 0, cap_var = 0;
  for (const char *p = ptx; (p = strstr(p, ".entry ")); p++) cap_fn++;
  for (const char *p = ptx; (p = strstr(p, ".global ")); p++) cap_var++;
  for (const char *p = ptx; (p = strstr(p, ".const ")); p++) cap_var++;
  m->fn = calloc((size_t)cap_fn + 1, sizeof *m->fn);
  m->var = calloc((size_t)cap_var + 1, sizeof *m->var);
  if (!m->fn || !m->var) return DV_CUDA_ERROR_OUT_OF_MEMORY;
  for (const char *p = ptx; (p = strstr(p, ".entry ")); p++) {
    struct dv_CUfunc_st *f = &m->fn[m->nfn];
    const char *n = p + 7;
    while (*n == ' ') n++;
    size_t k = strcspn(n, "( \t\n");
    if (!k || k >= sizeof f->r.name) return DV_CUDA_ERROR_INVALID_PTX;
    memcpy(f->r.name, n, k);
    f->mod = m;
    const char *open = n + k;
    while (*open == ' ' || *open == '\n' || *open == '\t') open++;
    if (*open == '(') {
      const char *close = strchr(open, ')');
      if (!close) return DV_CUDA_ERROR_INVALID_PTX;
      for (const char *q = open; (q = strstr(q, ".param")) && q < close; q += 6) {
        const char *e = q + 6;
        while (e < close && *e != ',') e++;
        char pname[128];
        if (f->r.nparams == (int)(sizeof f->r.psize / sizeof f->r.psize[0])) return DV_CUDA_ERROR_INVALID_PTX;
        f->r.psize[f->r.nparams++] = decl_size(q + 6, e, pname, sizeof pname);
      }
    }
    m->nfn++;
  }
  const char *kinds[2] = {".global ", ".const "};
  for (int kk = 0; kk < 2; kk++)
    for (const char *p = ptx; (p = strstr(p, kinds[kk])); p++) {
      if (p > ptx && p[-1] != ' ' && p[-1] != '\n' && p[-1] != '\t') continue;
      const char *e = strchr(p, ';');
      const char *nl = strchr(p, '\n');
      if (!e || (nl && nl < e)) continue; /* not a declaration on one line */
      const char *eq = memchr(p, '=', (size_t)(e - p));
      var_rec *v = &m->var[m->nvar];
      size_t sz = decl_size(p + strlen(kinds[kk]), eq ? eq : e, v->name, sizeof v->name);
      if (!sz || !v->name[0]) continue;
      alloc *x = calloc(1, sizeof *x);
      char *h = x ? calloc(1, sz) : NULL;
      if (!h) {
        free(x);
        return DV_CUDA_ERROR_OUT_OF_MEMORY;
      }
      x->kind = 1, x->host = h, x->size = sz, x->ctx = c, x->addr = take_addr(c->dev, sz);
      x->next = g_allocs;
      g_allocs = x;
      v->size = sz, v->addr = x->addr;
      m->nvar++;
    }
  return DV_CUDA_SUCCESS;
}

EXPORT CUresult cuModuleLoadDataEx(dv_CUmodule *out, const void *image, unsigned n, dv_CUjit_option *options,
                                   void **values) {
  ENTER();
  if (!out) return unlock_ret(DV_CUDA_ERROR_INVALID_VALUE);
  *out = NULL;
  CTX(c);
  if (!image || (n && (!options || !values))) return unlock_ret(DV_CUDA_ERROR_INVALID_VALUE);
  const char *ptx = image;
  if (!memcmp(ptx, "\x7f" "ELF", 4)) return unlock_ret(DV_CUDA_ERROR_NO_BINARY_FOR_GPU); /* cubins: not for this "GPU" */
  if (!strstr(ptx, ".version") || !strstr(ptx, ".target")) return unlock_ret(DV_CUDA_ERROR_INVALID_IMAGE);
  for (unsigned i = 0; i < n; i++) {
    /* Logs: write an empty string where a buffer was given. */
    if (options[i] == DV_CU_JIT_INFO_LOG_BUFFER || options[i] == DV_CU_JIT_ERROR_LOG_BUFFER)
      if (values[i]) *(char *)values[i] = 0;
  }
  struct dv_CUmod_st *m = calloc(1, sizeof *m);
  if (!m) return unlock_ret(DV_CUDA_ERROR_OUT_OF_MEMORY);
  m->ctx = c;
  CUresult r = ptx_parse(ptx, m, c);
  if (r) {
    mod_free(m);
    return unlock_ret(r);
  }
  m->next_all = g_mods;
  g_mods = m;
  *out = m;
  return unlock_ret(DV_CUDA_SUCCESS);
}

EXPORT CUresult cuModuleLoadData(dv_CUmodule *out, const void *image) {
  return cuModuleLoadDataEx(out, image, 0, NULL, NULL);
}

static int mod_known(struct dv_CUmod_st *m) {
  for (struct dv_CUmod_st *x = g_mods; x; x = x->next_all)
    if (x == m) return 1;
  return 0;
}

EXPORT CUresult cuModuleUnload(dv_CUmodule m) {
  ENTER();
  CTX(c);
  (void)c;
  for (struct dv_CUmod_st **pp = &g_mods; *pp; pp = &(*pp)->next_all)
    if (*pp == m) {
      *pp = m->next_all;
      /* Launches still queued use its functions: let them finish. */
      for (stream *x = g_streams; x; x = x->next_all)
        if (x->ctx == m->ctx) wait_stream(x, x->enq, 0);
      mod_free(m);
      return unlock_ret(DV_CUDA_SUCCESS);
    }
  return unlock_ret(DV_CUDA_ERROR_INVALID_HANDLE);
}

EXPORT CUresult cuModuleGetFunction(dv_CUfunction *f, dv_CUmodule m, const char *name) {
  ENTER();
  if (!f || !name) return unlock_ret(DV_CUDA_ERROR_INVALID_VALUE);
  *f = NULL;
  CTX(c);
  (void)c;
  if (!mod_known(m)) return unlock_ret(DV_CUDA_ERROR_INVALID_HANDLE);
  for (int i = 0; i < m->nfn; i++)
    if (!strcmp(m->fn[i].r.name, name)) {
      *f = &m->fn[i];
      return unlock_ret(DV_CUDA_SUCCESS);
    }
  return unlock_ret(DV_CUDA_ERROR_NOT_FOUND);
}

/* CUDA 12.4's parameter layout query: offset and size of parameter index,
 * from the sizes the PTX declares (each aligned to its size, at most 8). */
EXPORT CUresult cuFuncGetParamInfo(dv_CUfunction f, size_t index, size_t *offset, size_t *size);
EXPORT CUresult cuFuncGetParamInfo(dv_CUfunction f, size_t index, size_t *offset, size_t *size) {
  ENTER();
  if (!f || (int)index < 0 || index >= (size_t)f->r.nparams) return unlock_ret(DV_CUDA_ERROR_INVALID_VALUE);
  size_t off = 0;
  for (size_t i = 0; i <= index; i++) {
    size_t sz = f->r.psize[i], al = sz >= 8 ? 8 : sz ? sz : 1;
    off = (off + al - 1) / al * al;
    if (i == index) {
      if (offset) *offset = off;
      if (size) *size = sz;
    }
    off += sz;
  }
  return unlock_ret(DV_CUDA_SUCCESS);
}

EXPORT CUresult cuModuleGetGlobal_v2(dv_CUdeviceptr *p, size_t *bytes, dv_CUmodule m, const char *name) {
  ENTER();
  if (!name) return unlock_ret(DV_CUDA_ERROR_INVALID_VALUE);
  CTX(c);
  (void)c;
  if (!mod_known(m)) return unlock_ret(DV_CUDA_ERROR_INVALID_HANDLE);
  for (int i = 0; i < m->nvar; i++)
    if (!strcmp(m->var[i].name, name)) {
      if (p) *p = m->var[i].addr;
      if (bytes) *bytes = m->var[i].size;
      return unlock_ret(DV_CUDA_SUCCESS);
    }
  return unlock_ret(DV_CUDA_ERROR_NOT_FOUND);
}

static struct dv_CUfunc_st *func_known(dv_CUfunction f) {
  for (struct dv_CUmod_st *x = g_mods; x; x = x->next_all)
    if (f >= x->fn && f < x->fn + x->nfn) return f;
  return NULL;
}

EXPORT CUresult cuFuncGetAttribute(int *v, dv_CUfunction_attribute a, dv_CUfunction f) {
  ENTER();
  if (!v) return unlock_ret(DV_CUDA_ERROR_INVALID_VALUE);
  CTX(c);
  (void)c;
  if (!func_known(f)) return unlock_ret(DV_CUDA_ERROR_INVALID_HANDLE);
  switch (a) {
    case 0: *v = 1024; break;
    case 1: case 2: case 3: *v = 0; break;
    case 4: *v = 32; break;
    case 5: *v = 80; break;
    case 6: *v = 90; break;
    case 8: *v = f->max_dyn_shared; break;
    default:
      if (a < 0 || a > 16) return unlock_ret(DV_CUDA_ERROR_INVALID_VALUE);
      *v = 0;
  }
  return unlock_ret(DV_CUDA_SUCCESS);
}

EXPORT CUresult cuFuncSetAttribute(dv_CUfunction f, dv_CUfunction_attribute a, int v) {
  ENTER();
  CTX(c);
  (void)c;
  if (!func_known(f)) return unlock_ret(DV_CUDA_ERROR_INVALID_HANDLE);
  if (a != DV_CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES && a != 9)
    return unlock_ret(DV_CUDA_ERROR_INVALID_VALUE);
  if (a == 8) {
    if (v < 0 || v > BLOCK_OPTIN) return unlock_ret(DV_CUDA_ERROR_INVALID_VALUE);
    f->max_dyn_shared = v;
  }
  return unlock_ret(DV_CUDA_SUCCESS);
}

EXPORT CUresult cuLaunchKernel(dv_CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                               unsigned bz, unsigned shared_bytes, dv_CUstream h, void **params, void **extra) {
  ENTER();
  CTX(c);
  if (!func_known(f)) return unlock_ret(DV_CUDA_ERROR_INVALID_HANDLE);
  if (f->mod->ctx != c) return unlock_ret(DV_CUDA_ERROR_INVALID_CONTEXT);
  if (!gx || !gy || !gz || !bx || !by || !bz || gy > DBL_MAX_GRID_YZ || gz > DBL_MAX_GRID_YZ || bx > 1024 || by > 1024 || bz > DBL_MAX_BLOCK_Z ||
      (unsigned long long)bx * by * bz > 1024)
    return unlock_ret(DV_CUDA_ERROR_INVALID_VALUE);
  if (shared_bytes > DBL_SHARED_STATIC && shared_bytes > (unsigned)f->max_dyn_shared)
    return unlock_ret(DV_CUDA_ERROR_INVALID_VALUE);
  if (extra || (f->r.nparams && !params)) return unlock_ret(DV_CUDA_ERROR_INVALID_VALUE);
  CUresult r;
  stream *s = resolve_stream(c, h, &r);
  if (!s) return unlock_ret(r);
  /* A driver's launch queue is bounded: a launch waits while its stream
   * holds LAUNCH_QUEUE operations not yet done (not while dvdouble_hold
   * holds the workers).  Unbounded, the double's records (~1 KiB each) were
   * the heap a soak of asynchronous launches saw grow (tests/kernel/test_soak.c). */
  while (s->enq - s->done >= LAUNCH_QUEUE && !g_hold && !s->destroyed) pthread_cond_wait(&C, &L);
  /* Read every parameter with the size the PTX declares (as the driver does:
   * a pointer to fewer bytes is a read past its end, which ASan reports). */
  unsigned char buf[7 * 136];
  size_t off = 0;
  int is_copy = !strncmp(f->r.name, "dv_copy_w", 9);
  for (int i = 0; i < f->r.nparams; i++) {
    if (!params[i]) return unlock_ret(DV_CUDA_ERROR_INVALID_VALUE);
    volatile unsigned char sink = 0;
    for (size_t b = 0; b < f->r.psize[i]; b++) sink ^= ((const unsigned char *)params[i])[b];
    (void)sink;
    if (is_copy && off + f->r.psize[i] <= sizeof buf) memcpy(buf + off, params[i], f->r.psize[i]), off += f->r.psize[i];
  }
  op *o;
  if (is_copy && off == 5 * 8 + 2 * 136) {
    o = op_new(6);
    if (!o) return unlock_ret(DV_CUDA_ERROR_OUT_OF_MEMORY);
    memcpy(o->kparams, buf, off);
    o->word = (size_t)strtoul(f->r.name + 9, NULL, 10);
  } else {
    o = op_new(7);
    if (!o) return unlock_ret(DV_CUDA_ERROR_OUT_OF_MEMORY);
    g_launches_skipped++;
  }
  return unlock_ret(enqueue(s, o));
}

/* ---- graphs: stream capture and replay ----------------------------------------------------------
 * cuStreamBeginCapture puts a created stream in capture (any mode; the
 * legacy and per-thread streams cannot capture: CAPTURE_UNSUPPORTED; a
 * capturing one: ILLEGAL_STATE); its work is kept, not run (enqueue);
 * cuStreamEndCapture gives it as a graph (an invalidated capture:
 * CAPTURE_INVALIDATED, nothing); cuGraphInstantiateWithFlags copies it
 * (flags 0); cuGraphLaunch queues a copy of each operation on its stream,
 * as if it were called again (an event record records the event there). */
static op *ops_copy(const op *h, int *oom) {
  op *head = NULL, **tail = &head;
  *oom = 0;
  for (; h; h = h->next) {
    op *o = malloc(sizeof *o);
    if (!o) {
      ops_free(head);
      *oom = 1;
      return NULL;
    }
    *o = *h;
    o->next = NULL;
    *tail = o;
    tail = &o->next;
  }
  return head;
}

static int graph_known(const struct dv_CUgraph_st *g) {
  for (const struct dv_CUgraph_st *x = g_graphs; x; x = x->next_all)
    if (x == g) return 1;
  return 0;
}
static int exec_known(const struct dv_CUgraphExec_st *e) {
  for (const struct dv_CUgraphExec_st *x = g_execs; x; x = x->next_all)
    if (x == e) return 1;
  return 0;
}

EXPORT CUresult cuStreamBeginCapture_v2(dv_CUstream h, int mode) {
  FAILPOINT("cuStreamBeginCapture_v2");
  ENTER();
  CTX(c);
  if (mode < 0 || mode > 2) return unlock_ret(DV_CUDA_ERROR_INVALID_VALUE);
  CUresult r;
  stream *s = resolve_stream(c, h, &r);
  if (!s) return unlock_ret(r);
  if (s->kind != 0) return unlock_ret(CAPTURE_UNSUPPORTED);
  if (s->capturing) return unlock_ret(ILLEGAL_STATE);
  s->capturing = 1;
  s->invalidated = 0;
  s->captured = 0;
  s->cap_head = s->cap_tail = NULL;
  return unlock_ret(DV_CUDA_SUCCESS);
}

EXPORT CUresult cuStreamEndCapture(dv_CUstream h, dv_CUgraph *g) {
  FAILPOINT("cuStreamEndCapture");
  ENTER();
  CTX(c);
  if (!g) return unlock_ret(DV_CUDA_ERROR_INVALID_VALUE);
  *g = NULL;
  CUresult r;
  stream *s = resolve_stream(c, h, &r);
  if (!s) return unlock_ret(r);
  if (!s->capturing) return unlock_ret(ILLEGAL_STATE);
  op *list = s->cap_head;
  long n = s->captured;
  int invalid = s->invalidated;
  s->capturing = s->invalidated = 0;
  s->cap_head = s->cap_tail = NULL;
  if (invalid) {
    ops_free(list);
    return unlock_ret(CAPTURE_INVALIDATED);
  }
  struct dv_CUgraph_st *gr = calloc(1, sizeof *gr);
  if (!gr) {
    ops_free(list);
    return unlock_ret(DV_CUDA_ERROR_OUT_OF_MEMORY);
  }
  gr->ctx = c, gr->head = list, gr->n = n;
  gr->next_all = g_graphs;
  g_graphs = gr;
  *g = gr;
  return unlock_ret(DV_CUDA_SUCCESS);
}

EXPORT CUresult cuGraphInstantiateWithFlags(dv_CUgraphExec *e, dv_CUgraph g, unsigned long long flags) {
  FAILPOINT("cuGraphInstantiateWithFlags");
  ENTER();
  CTX(c);
  if (!e || flags) return unlock_ret(DV_CUDA_ERROR_INVALID_VALUE);
  *e = NULL;
  if (!graph_known(g)) return unlock_ret(DV_CUDA_ERROR_INVALID_HANDLE);
  if (g->ctx != c) return unlock_ret(DV_CUDA_ERROR_INVALID_CONTEXT);
  struct dv_CUgraphExec_st *x = calloc(1, sizeof *x);
  int oom = 0;
  if (x) x->head = ops_copy(g->head, &oom);
  if (!x || oom) {
    free(x);
    return unlock_ret(DV_CUDA_ERROR_OUT_OF_MEMORY);
  }
  x->ctx = c, x->n = g->n;
  x->next_all = g_execs;
  g_execs = x;
  *e = x;
  return unlock_ret(DV_CUDA_SUCCESS);
}

EXPORT CUresult cuGraphLaunch(dv_CUgraphExec e, dv_CUstream h) {
  FAILPOINT("cuGraphLaunch");
  ENTER();
  CTX(c);
  if (!exec_known(e)) return unlock_ret(DV_CUDA_ERROR_INVALID_HANDLE);
  if (e->ctx != c) return unlock_ret(DV_CUDA_ERROR_INVALID_CONTEXT);
  CUresult r;
  stream *s = resolve_stream(c, h, &r);
  if (!s) return unlock_ret(r);
  for (const op *g = e->head; g; g = g->next) {
    op *o = malloc(sizeof *o);
    if (!o) return unlock_ret(DV_CUDA_ERROR_OUT_OF_MEMORY);
    *o = *g;
    o->next = NULL;
    if (o->kind == 5 && o->ev) o->ev->when_set = 0;
    if ((r = enqueue(s, o)) != DV_CUDA_SUCCESS) return unlock_ret(r);
    if (o->kind == 5 && o->ev && !s->capturing) o->ev->s = s, o->ev->seq = o->seq, o->ev->recorded = 1;
    if (o->kind == 7) g_launches_skipped++;
  }
  return unlock_ret(DV_CUDA_SUCCESS);
}

EXPORT CUresult cuGraphExecDestroy(dv_CUgraphExec e) {
  FAILPOINT("cuGraphExecDestroy");
  ENTER();
  for (struct dv_CUgraphExec_st **pp = &g_execs; *pp; pp = &(*pp)->next_all)
    if (*pp == e) {
      *pp = e->next_all;
      ops_free(e->head); /* launches queued their own copies */
      free(e);
      return unlock_ret(DV_CUDA_SUCCESS);
    }
  return unlock_ret(DV_CUDA_ERROR_INVALID_HANDLE);
}

EXPORT CUresult cuGraphDestroy(dv_CUgraph g) {
  FAILPOINT("cuGraphDestroy");
  ENTER();
  for (struct dv_CUgraph_st **pp = &g_graphs; *pp; pp = &(*pp)->next_all)
    if (*pp == g) {
      *pp = g->next_all;
      ops_free(g->head);
      free(g);
      return unlock_ret(DV_CUDA_SUCCESS);
    }
  return unlock_ret(DV_CUDA_ERROR_INVALID_HANDLE);
}

/* The old name, kept by drivers that have _v2 (same prototype). */
EXPORT CUresult cuEventElapsedTime(float *ms, dv_CUevent a, dv_CUevent b) { return cuEventElapsedTime_v2(ms, a, b); }

/* Not in cuda_symbols.def: the synchronous copies bench/bench_cuda.c times
 * as the raw baseline (on the legacy stream, returning when done). */
EXPORT CUresult cuMemcpyHtoD_v2(dv_CUdeviceptr d, const void *hp, size_t n) {
  CUresult r = cuMemcpyHtoDAsync_v2(d, hp, n, NULL);
  return r ? r : cuStreamSynchronize(NULL);
}

EXPORT CUresult cuMemcpyDtoH_v2(void *hp, dv_CUdeviceptr d, size_t n) {
  CUresult r = cuMemcpyDtoHAsync_v2(hp, d, n, NULL);
  return r ? r : cuStreamSynchronize(NULL);
}

/* Not in cuda_symbols.def: NVRTC looks it up in libcuda.so.1 (private
 * tables of the real driver).  None here. */
EXPORT CUresult cuGetExportTable(const void **table, const void *uuid) {
  (void)uuid;
  if (table) *table = NULL;
  return DV_CUDA_ERROR_NOT_FOUND;
}

/* ---- test-only controls ---------------------------------------------------------------------------- */

CONTROL int dvdouble_is_double(void) { return 1; }

CONTROL void dvdouble_hold(int on) {
  pthread_mutex_lock(&L);
  g_hold = on;
  pthread_cond_broadcast(&C);
  pthread_mutex_unlock(&L);
}

CONTROL long dvdouble_launches(void) {
  pthread_mutex_lock(&L);
  long n = g_launches_skipped;
  pthread_mutex_unlock(&L);
  return n;
}

CONTROL void dvdouble_set_pinned_limit(size_t bytes) {
  pthread_mutex_lock(&L);
  g_pinned_limit = bytes;
  pthread_mutex_unlock(&L);
}

CONTROL long dvdouble_peer_copies(void) {
  pthread_mutex_lock(&L);
  long n = g_peer_copies;
  pthread_mutex_unlock(&L);
  return n;
}

/* A device fault on device `device`'s primary context, as a kernel's
 * illegal access would leave: sticky CUDA_ERROR_ILLEGAL_ADDRESS. */
CONTROL void dvdouble_fault(int device) {
  pthread_mutex_lock(&L);
  if (device >= 0 && device < MAX_DEV) fault(&g_ctx[device], "dvdouble_fault");
  pthread_mutex_unlock(&L);
}

/* The version cuDriverGetVersion reports from now on (0: back to
 * CUDA_DOUBLE_DRIVER_VERSION or 13.0). */
CONTROL void dvdouble_set_driver_version(int version) {
  __atomic_store_n(&g_driver_version, version, __ATOMIC_RELAXED);
}

/* The compute capability every device reports from now on (0, 0: back to
 * 99.0).  Contexts read it when they open. */
CONTROL void dvdouble_set_compute_capability(int major, int minor) {
  pthread_mutex_lock(&L);
  g_cc[0] = major || minor ? major : DBL_CC_MAJOR;
  g_cc[1] = major || minor ? minor : 0;
  pthread_mutex_unlock(&L);
}

/* Page-locked bytes of cuMemHostAlloc now; *peak (may be NULL): the most
 * since dvdouble_pinned_reset_peak (or the start). */
CONTROL size_t dvdouble_pinned(size_t *peak) {
  pthread_mutex_lock(&L);
  size_t n = g_pinned_used;
  if (peak) *peak = g_pinned_peak;
  pthread_mutex_unlock(&L);
  return n;
}

CONTROL void dvdouble_pinned_reset_peak(void) {
  pthread_mutex_lock(&L);
  g_pinned_peak = g_pinned_used;
  pthread_mutex_unlock(&L);
}

/* Calls so far of one of the entry points counted (-1: not counted). */
CONTROL long dvdouble_calls(const char *name) {
  long n = -1;
  pthread_mutex_lock(&L);
  for (int i = 0; i < C_COUNT; i++)
    if (name && !strcmp(name, g_call_names[i])) n = g_calls[i];
  pthread_mutex_unlock(&L);
  return n;
}

/* Arm a fail point: the k-th next call (1: the next one) of the entry point
 * `name` (its CUDA name; the HIP double's translations call the same
 * engine, so HIP tests arm the CUDA names) returns `result` (a CUresult,
 * 0 disarms).  Only entries with FAILPOINT are affected. */
CONTROL void dvdouble_fail(const char *name, long k, int result) {
  if (!name) return;
  pthread_mutex_lock(&g_fail_lock);
  int i = fail_slot(name);
  if (i >= 0 && g_fail[i].name == name) { /* a new slot: keep a copy the caller cannot free */
    char *copy = strdup(name);
    g_fail[i].name = copy ? copy : "";
  }
  if (i >= 0) {
    g_fail[i].armed_at = result && k > 0 ? g_fail[i].calls + k : 0;
    g_fail[i].result = result;
  }
  pthread_mutex_unlock(&g_fail_lock);
}

/* Calls of entry `name` so far (through FAILPOINT), or -1 if none yet. */
CONTROL long dvdouble_fail_calls(const char *name) {
  long n = -1;
  if (!name) return n;
  pthread_mutex_lock(&g_fail_lock);
  for (int i = 0; i < g_nfail; i++)
    if (!strcmp(g_fail[i].name, name)) n = g_fail[i].calls;
  pthread_mutex_unlock(&g_fail_lock);
  return n;
}

/* Capture mode on a created stream (on: what cuStreamBeginCapture does;
 * off: cuStreamEndCapture, the graph dropped).  Returns the operations
 * captured so far (counted from on), -1 if invalidated, -2 for a handle
 * that is not a created stream. */
CONTROL long dvdouble_capture(dv_CUstream h, int on) {
  pthread_mutex_lock(&L);
  stream *s = (stream *)h;
  long n = -2;
  if (h && h != DV_CU_STREAM_LEGACY && h != DV_CU_STREAM_PER_THREAD && stream_known(s) && s->kind == 0) {
    n = s->invalidated ? -1 : s->captured;
    if (on && !s->capturing) s->captured = 0, s->invalidated = 0;
    if (!on) { /* the graph dropped */
      ops_free(s->cap_head);
      s->cap_head = s->cap_tail = NULL;
    }
    s->capturing = on != 0;
  }
  pthread_mutex_unlock(&L);
  return n;
}

/* CU_DEVICE_ATTRIBUTE_MAX_PITCH from now on (contexts read it when they
 * open), and the largest pitch 2-D/3-D copies take; 0: 2^31 - 1. */
CONTROL void dvdouble_set_max_pitch(size_t bytes) {
  pthread_mutex_lock(&L);
  g_max_pitch = bytes && bytes < MAX_PITCH ? bytes : MAX_PITCH;
  pthread_mutex_unlock(&L);
}

/* Unified addressing on (1, the default) or off (0): off, mapped host
 * memory has another device address on each device. */
CONTROL void dvdouble_set_uva(int on) {
  pthread_mutex_lock(&L);
  g_no_uva = !on;
  pthread_mutex_unlock(&L);
}

/* Stream memory operations on (1, the default) or off (0). */
CONTROL void dvdouble_set_memops(int on) {
  pthread_mutex_lock(&L);
  g_no_memops = !on;
  pthread_mutex_unlock(&L);
}

/* Faults so far: queued work that found its memory freed, and injected ones. */
CONTROL long dvdouble_faults(void) {
  pthread_mutex_lock(&L);
  long n = g_faults;
  pthread_mutex_unlock(&L);
  return n;
}

/* CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY of every device from now on (1 by
 * default; 0 plays a device that cannot map host memory).  Contexts read it
 * when they open. */
static int g_can_map_host = 1;
static int can_map_host(void) { return __atomic_load_n(&g_can_map_host, __ATOMIC_RELAXED); }
CONTROL void dvdouble_set_can_map_host_memory(int can);
CONTROL void dvdouble_set_can_map_host_memory(int can) {
  __atomic_store_n(&g_can_map_host, can != 0, __ATOMIC_RELAXED);
}
