/*
 * The CUDA family's core (issue 35): the backend methods of CUDA (../cuda/)
 * and HIP (../hip/), written once against a driver shaped like CUDA's driver
 * API (fam.h's dv_cu_driver: the entry points of fam_symbols.def, typed in
 * fam_api.h).  Each driver loads its library, probes and opens through
 * dv__cu_open; this file holds open and close, memory, frees, streams
 * and events; fam_copy.c the copies.
 *
 *  - One primary context per device (cuDevicePrimaryCtxRetain), made
 *    current on the calling thread at every entry.
 *  - Device addresses are CUdeviceptr values carried in the buffer handle;
 *    views add their byte offset.
 *  - Copies: contiguous with cuMemcpy{HtoD,DtoH,DtoD}Async, rects with
 *    cuMemcpy2DAsync / cuMemcpy3DAsync (3-D needs slice pitches that are
 *    multiples of the row pitch, else the planner splits), host-to-host in
 *    stream order through cuStreamAddCallback.  Device-to-device layouts rects
 *    cannot express run the built-in strided-copy kernels (fam_kernel.c).
 *  - Pinned memory: cuMemHostAlloc (PORTABLE, DEVICEMAP, WRITECOMBINED
 *    honoured); registration: cuMemHostRegister; managed memory: fam_managed.c.
 *  - Streams: cuStreamCreate (blocking or non-blocking); the legacy and
 *    per-thread default streams are the driver's handles 0x1 and 0x2.
 *  - Kernels, native handles, foreign memory: fam_kernel.c (the compiler is
 *    the driver's: dv_cu_driver.kops).
 */
#include <limits.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fam.h"
#include "fam_stager.h"

struct dv_bevent {
  dv_CUevent e;
  unsigned flags;
  bool recorded;
};


/* ---- open, close ------------------------------------------------------------------------ */

static void cu_fill_info(cu_state *st, const dv_backend_config *cfg) {
  dv_device_info *d = &st->info;
  memset(d, 0, sizeof *d);
  snprintf(d->backend, sizeof d->backend, "%s", st->drv->backend);
  cu.cuDeviceGetName(d->name, sizeof d->name, st->dev);
  snprintf(d->vendor, sizeof d->vendor, "NVIDIA");
  int v = 0;
  cu.cuDriverGetVersion(&v);
  snprintf(d->driver_version, sizeof d->driver_version, "CUDA driver API %d.%d", v / 1000, (v % 1000) / 10);
  size_t total = 0;
  cu.cuDeviceTotalMem_v2(&total, st->dev);
  d->total_memory = total;
  d->max_allocation = total;
  d->base_alignment = 256; /* cuMemAlloc's documented alignment */
  int x = 0;
  cu.cuDeviceGetAttribute(&x, DV_CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY, st->dev);
  d->can_map_host_memory = x;
  x = 0;
  cu.cuDeviceGetAttribute(&x, DV_CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY, st->dev);
  d->managed_memory = x;
  x = 0; /* prefetching to the device needs it (fam_managed.c) */
  cu.cuDeviceGetAttribute(&x, DV_CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, st->dev);
  st->concurrent_managed = x != 0;
  cu.cuDeviceGetAttribute(&d->compute_major, DV_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, st->dev);
  cu.cuDeviceGetAttribute(&d->compute_minor, DV_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, st->dev);
  cu.cuDeviceGetPCIBusId(d->pci_bus_id, sizeof d->pci_bus_id, st->dev);
  int n = 0;
  cu.cuDeviceGetCount(&n);
  for (int i = 0; i < n; i++) {
    dv_CUdevice o;
    int can = 0;
    if (i != st->ordinal && cu.cuDeviceGet(&o, i) == DV_CUDA_SUCCESS &&
        cu.cuDeviceCanAccessPeer(&can, st->dev, o) == DV_CUDA_SUCCESS && can)
      d->peer_devices++;
  }
  if (st->drv->fill_info) st->drv->fill_info(st, cfg);
}

dv_status dv__cu_open(const dv_cu_driver *drv, const dv_backend_config *cfg, void **state) {
  *state = NULL;
  const dv_cu_api *api = drv->api;
  dv_status rc;
  int n = 0, ordinal = 0;
  if (cfg->device && *cfg->device) {
    char *end = NULL;
    errno = 0;
    long v = strtol(cfg->device, &end, 10);
    if (errno || end == cfg->device || *end || v < 0 || v > INT_MAX)
      return dv__error(DV_ERR_INVALID_ARGUMENT,
                       "%s device \"%s\" is not an ordinal (options device / %s_device)", drv->vendor,
                       cfg->device, drv->backend);
    ordinal = (int)v;
  }
  dv_CUresult rn = api->cuDeviceGetCount(&n);
  if (rn) return dv__cu_fail(drv, rn, DV_CU_E_cuDeviceGetCount, "");
  if (n == 0) return dv__error(DV_ERR_BACKEND_UNAVAILABLE, "the %s driver reports no device", drv->vendor);
  if (ordinal >= n)
    return dv__error(DV_ERR_BACKEND_UNAVAILABLE, "no %s device %d (%d device(s); options device / %s_device)",
                     drv->vendor, ordinal, n, drv->backend);
  /* The driver's own state (drv->state_bytes, zeroed) right after the
   * family's, in one allocation. */
  cu_state *st = dv__calloc(1, sizeof *st + drv->state_bytes);
  if (!st) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate the %s state", drv->vendor);
  st->drv = drv;
  st->drv_state = drv->state_bytes ? (void *)(st + 1) : NULL;
  st->ordinal = ordinal;
  /* The default streams, by the handles the driver's own callers know them
   * by (what native_stream hands out); the translations of a driver whose
   * legacy stream is NULL map CU_STREAM_LEGACY to it. */
  st->legacy.s = drv->legacy_is_null ? NULL : DV_CU_STREAM_LEGACY;
  st->legacy.builtin = true;
  st->per_thread.s = DV_CU_STREAM_PER_THREAD;
  st->per_thread.builtin = true;
  pthread_mutex_init(&st->fence_lock, NULL);
  dv_CUresult r = cu.cuDeviceGet(&st->dev, ordinal);
  if (!r) r = cu.cuDevicePrimaryCtxRetain(&st->ctx, st->dev);
  if (r) {
    pthread_mutex_destroy(&st->fence_lock);
    dv__free(st);
    return cu_fail(r, DV_CU_E_cuDevicePrimaryCtxRetain, "");
  }
  CU_SCOPE(sc);
  if ((rc = dv__cu_enter_scope(st, &sc)) != DV_OK) {
    cu.cuDevicePrimaryCtxRelease_v2(st->dev);
    pthread_mutex_destroy(&st->fence_lock);
    dv__free(st);
    return rc;
  }
  cu_fill_info(st, cfg);
  int mp = 0;
  if (cu.cuDeviceGetAttribute(&mp, 11 /* CU_DEVICE_ATTRIBUTE_MAX_PITCH */, st->dev) || mp <= 0) mp = 0x7fffffff;
  st->max_pitch = (size_t)mp;
  if ((rc = dv__cu_staging_open(st, cfg)) != DV_OK) {
    cu.cuDevicePrimaryCtxRelease_v2(st->dev);
    pthread_mutex_destroy(&st->fence_lock);
    dv__free(st);
    return rc;
  }
  if ((rc = dv__cu_kernel_open(st)) != DV_OK) {
    dv__cu_staging_close(st);
    cu.cuDevicePrimaryCtxRelease_v2(st->dev);
    pthread_mutex_destroy(&st->fence_lock);
    dv__free(st);
    return rc;
  }
  *state = st;
  return DV_OK;
}

static dv_CUresult cu_free_kept(cu_state *st);

void dv__cub_close(void *state) {
  cu_state *st = state;
  if (atomic_load(st->drv->forked)) {
    /* A child after fork: the driver's objects are the parent's; touch none
     * (the staging buffers' records and the kernel state are left). */
    dv__free(st);
    return;
  }
  CU_SCOPE(sc);
  if (dv__cu_enter_scope(st, &sc) == DV_OK) {
    cu.cuCtxSynchronize(); /* every stream of the context */
    cu_free_kept(st);      /* frees a graph capture held back */
  }
  dv__free(st->kept);
  dv__cu_staging_close(st);
  dv__cu_kernel_close(st);
  if (st->legacy_fence) cu.cuEventDestroy_v2(st->legacy_fence);
  for (size_t i = 0; i < st->norphans; i++) cu.cuEventDestroy_v2(st->orphans[i]);
  dv__free(st->orphans);
  dv__free(st->exported);
  pthread_mutex_destroy(&st->fence_lock);
  cu.cuDevicePrimaryCtxRelease_v2(st->dev);
  dv__free(st);
}

dv_status dv__cub_device_info(void *state, dv_device_info *out) {
  *out = ((cu_state *)state)->info;
  return DV_OK;
}

/* ---- memory ----------------------------------------------------------------------------- */

dv_status dv__cub_mem_alloc(void *state, size_t bytes, void **buf) {
  *buf = NULL;
  cu_state *st = state;
  CU_ENTER(st);
  dv_CUdeviceptr p = 0;
  CU_TRY(cu.cuMemAlloc_v2(&p, bytes), DV_CU_E_cuMemAlloc_v2, "");
  *buf = (void *)(uintptr_t)p;
  return DV_OK;
}

/* Managed memory (allocation, prefetch, advice): fam_managed.c. */

/* ---- frees, ordered by events ------------------------------------------------------------ */

/*
 * The driver does not promise that cuMemFree (cuMemFreeHost,
 * cuMemHostUnregister) waits for queued work that still uses the memory,
 * and devarray's deferred frees come from any thread: a free first waits
 * for every stream of this context that had work queued since the last
 * fence (dv__cu_used), by an event recorded there: its created streams,
 * and the legacy stream for work on the legacy or a per-thread stream (it
 * waits for every blocking stream of the context, those included).  Streams
 * of other code in the process (CuPy's, PyTorch's) are not waited for:
 * devarray's memory is used there only through native handles, and a
 * buffer handed out natively (dv__cu_exported) is freed after a
 * cuCtxSynchronize, as every free was before.  A stream whose native
 * handle was handed out is fenced at every free.  A destroyed stream's
 * pending fence is kept (its work still runs) until a free waits for it.
 * Streams capturing a graph are not fenced (nothing queued there runs).
 * The free is made even when a wait fails (a device error): the memory
 * goes back if the driver can take it, and the first error is returned.
 */
/* Whether work queued on s would be captured into a graph, or would join
 * (and so invalidate) one: s captures (or its capture was invalidated), or
 * s is the legacy stream while a blocking stream captures, which the driver
 * reports as CUDA_ERROR_STREAM_CAPTURE_IMPLICIT (issue 36: that used to
 * count as "not capturing", and the fence recorded there invalidated the
 * capture). */
static bool cu_capturing(cu_state *st, dv_CUstream s) {
  (void)st;
  dv_CUstreamCaptureStatus cs = DV_CU_STREAM_CAPTURE_STATUS_NONE;
  dv_CUresult r = cu.cuStreamIsCapturing(s, &cs);
  if (cu_code(r) == DV_CUDA_ERROR_STREAM_CAPTURE_IMPLICIT) return true;
  return r == DV_CUDA_SUCCESS && cs != DV_CU_STREAM_CAPTURE_STATUS_NONE;
}

/* Whether any stream of this context captures a graph (or the legacy
 * stream would join one): a cuCtxSynchronize now would invalidate it.
 * fence_lock held. */
static bool cu_any_capture(cu_state *st) {
  for (dv_bstream *x = st->streams; x; x = x->next)
    if (cu_capturing(st, x->s)) return true;
  return cu_capturing(st, DV_CU_STREAM_LEGACY);
}

/* Free the buffers a capture held back (fence_lock held, every fence
 * waited for).  The first failure, as a driver result. */
static dv_CUresult cu_free_kept(cu_state *st) {
  dv_CUresult first = DV_CUDA_SUCCESS;
  for (size_t i = 0; i < st->nkept; i++) {
    dv_CUresult r = cu.cuMemFree_v2((dv_CUdeviceptr)(uintptr_t)st->kept[i]);
    if (r && !first) first = r;
  }
  st->nkept = 0;
  return first;
}

/* Record a fence on h into *ev (made at first use); fence_lock held. */
static dv_CUresult cu_fence_record(cu_state *st, dv_CUevent *ev, dv_CUstream h) {
  dv_CUresult r = *ev ? DV_CUDA_SUCCESS : cu.cuEventCreate(ev, DV_CU_EVENT_DISABLE_TIMING);
  if (r) {
    *ev = NULL;
    return r;
  }
  if (cu_capturing(st, h)) return DV_CUDA_ERROR_NOT_READY; /* not fenced: see above */
  return cu.cuEventRecord(*ev, h);
}

/* Whether buf was handed out natively (and forget it: it is being freed).
 * After one could not be listed, every buffer may have been. */
static bool cu_take_exported(cu_state *st, void *buf) {
  bool yes = st->exported_lost;
  for (size_t i = 0; i < st->nexported; i++)
    if (st->exported[i] == buf) {
      st->exported[i] = st->exported[--st->nexported];
      yes = true;
      break;
    }
  return yes;
}

/* Wait until no queued work of this context can use memory being freed
 * (buf: its device address, or NULL).  The first failure, as a status.
 * *held (when not NULL) is set when a graph capture keeps a stream that has
 * work queued since the last fence from being fenced (a fence there, or a
 * cuCtxSynchronize, would invalidate the capture): nothing was recorded
 * there, and the caller must not free now.  With held NULL the free goes on
 * unfenced for such a stream (host memory, whose record is already gone). */
static dv_status cu_fence_wait(cu_state *st, void *buf, bool *held) {
  dv_CUresult first = DV_CUDA_SUCCESS;
  dv_cu_entry call = DV_CU_E_NONE; /* the first failure: which entry, and why it was called */
  const char *note = NULL;
  if (held) *held = false;
  pthread_mutex_lock(&st->fence_lock);
  if (buf && cu_take_exported(st, buf)) {
    if (held && cu_any_capture(st)) {
      *held = true;
      st->kept_sync = true; /* the caller keeps it; its free waits for the whole context */
      pthread_mutex_unlock(&st->fence_lock);
      return DV_OK;
    }
    dv_CUresult r = cu.cuCtxSynchronize();
    if (!r) r = cu_free_kept(st), st->kept_sync = false;
    pthread_mutex_unlock(&st->fence_lock);
    return r ? cu_fail(r, DV_CU_E_cuCtxSynchronize, " (before freeing memory handed out natively)") : DV_OK;
  }
  for (dv_bstream *x = st->streams; x; x = x->next) {
    if (atomic_exchange_explicit(&x->dirty, 0, memory_order_acq_rel) || x->exported) {
      dv_CUresult r = cu_fence_record(st, &x->fence, x->s);
      x->fence_pending = r == DV_CUDA_SUCCESS;
      if (r && cu_code(r) != DV_CUDA_ERROR_NOT_READY && !first) first = r, call = DV_CU_E_cuEventRecord, note = " (fence before a free)";
    }
    if (x->fence_pending) {
      dv_CUresult r = cu.cuEventSynchronize(x->fence);
      x->fence_pending = false;
      if (r && !first) first = r, call = DV_CU_E_cuEventSynchronize, note = " (fence before a free)";
    }
  }
  bool legacy_held = false;
  if (atomic_exchange_explicit(&st->builtin_dirty, 0, memory_order_acq_rel)) {
    dv_CUresult r = cu_fence_record(st, &st->legacy_fence, DV_CU_STREAM_LEGACY);
    st->legacy_pending = r == DV_CUDA_SUCCESS;
    if (cu_code(r) == DV_CUDA_ERROR_NOT_READY) {
      /* Not fenced: the legacy stream would join a capture (or captures).  Its
       * work still runs: still to be fenced by the next free. */
      atomic_store_explicit(&st->builtin_dirty, 1, memory_order_release);
      legacy_held = true;
    }
    if (r && cu_code(r) != DV_CUDA_ERROR_NOT_READY && !first) first = r, call = DV_CU_E_cuEventRecord, note = " (fence before a free)";
  }
  if (st->legacy_pending) {
    dv_CUresult r = cu.cuEventSynchronize(st->legacy_fence);
    st->legacy_pending = false;
    if (r && !first) first = r, call = DV_CU_E_cuEventSynchronize, note = " (fence before a free)";
  }
  for (size_t i = 0; i < st->norphans; i++) {
    dv_CUresult r = cu.cuEventSynchronize(st->orphans[i]);
    if (r && !first) first = r, call = DV_CU_E_cuEventSynchronize, note = " (fence of a destroyed stream)";
    cu.cuEventDestroy_v2(st->orphans[i]);
  }
  st->norphans = 0;
  if (legacy_held && held) *held = true;
  else if (!legacy_held && st->nkept && !(st->kept_sync && cu_any_capture(st))) {
    /* Every stream fenced again; a kept buffer that was handed out natively
     * waits for the whole context first (as its free would have). */
    dv_CUresult r = st->kept_sync ? cu.cuCtxSynchronize() : DV_CUDA_SUCCESS;
    if (r && !first) first = r, call = DV_CU_E_cuCtxSynchronize, note = " (before a free a graph capture held back)";
    if (!r) {
      st->kept_sync = false;
      r = cu_free_kept(st);
      if (r && !first) first = r, call = DV_CU_E_cuMemFree_v2, note = " (a free a graph capture held back)";
    }
  }
  pthread_mutex_unlock(&st->fence_lock);
  return first ? cu_fail(first, call, note) : DV_OK;
}

dv_status dv__cub_mem_free(void *state, void *buf) {
  cu_state *st = state;
  CU_ENTER(st);
  bool held = false;
  dv_status wrc = cu_fence_wait(st, buf, &held);
  if (held) {
    /* A graph capture keeps the legacy stream (or the context) from being
     * waited for: the buffer is kept, and freed by the first free that can
     * fence again, or by close. */
    pthread_mutex_lock(&st->fence_lock);
    void **t = dv__cu_grow(st->kept, st->nkept, &st->ckept, sizeof *t, 8);
    if (!t) {
      pthread_mutex_unlock(&st->fence_lock);
      return dv__error(DV_ERR_HOST_OUT_OF_MEMORY,
                       "cannot keep a device free while a graph capture is on (no memory for its record)");
    }
    st->kept = t;
    st->kept[st->nkept++] = buf;
    pthread_mutex_unlock(&st->fence_lock);
    return wrc;
  }
  /* Freed even when the wait failed: the memory goes back if the driver can take it. */
  dv_CUresult r = cu.cuMemFree_v2((dv_CUdeviceptr)(uintptr_t)buf);
  if (r) return cu_fail(r, DV_CU_E_cuMemFree_v2, "");
  return wrc;
}

dv_status dv__cub_mem_info(void *state, size_t *free_bytes, size_t *total_bytes) {
  cu_state *st = state;
  CU_ENTER(st);
  CU_TRY(cu.cuMemGetInfo_v2(free_bytes, total_bytes), DV_CU_E_cuMemGetInfo_v2, "");
  return DV_OK;
}

dv_status dv__cub_host_alloc(void *state, size_t bytes, unsigned flags, void **handle, void **ptr, void **dev_buf) {
  cu_state *st = state;
  *handle = *ptr = NULL;
  if (dev_buf) *dev_buf = NULL;
  CU_ENTER(st);
  unsigned f = 0;
  if (flags & DV_HOSTMEM_MAPPED) {
    if (!st->info.can_map_host_memory) return dv__error(DV_ERR_NOT_SUPPORTED, "device %s cannot map host memory", st->info.name);
    f |= DV_CU_MEMHOSTALLOC_DEVICEMAP;
  }
  if (flags & DV_HOSTMEM_PORTABLE) f |= DV_CU_MEMHOSTALLOC_PORTABLE;
  if (flags & DV_HOSTMEM_WC) f |= DV_CU_MEMHOSTALLOC_WRITECOMBINED;
  dv_cu_host *h = dv__calloc(1, sizeof *h);
  if (!h) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate a host-memory record");
  dv_CUresult r = cu.cuMemHostAlloc(&h->ptr, bytes, f);
  if (r) {
    dv__free(h);
    if (cu_code(r) == DV_CUDA_ERROR_OUT_OF_MEMORY) /* page-locked host memory, not the device's */
      return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "%s %s of %zu bytes failed: out of page-locked host memory",
                       st->drv->vendor, dv__cu_name(st->drv, DV_CU_E_cuMemHostAlloc), bytes);
    return cu_fail(r, DV_CU_E_cuMemHostAlloc, "");
  }
  h->bytes = bytes;
  h->drv = st->drv;
  if (flags & DV_HOSTMEM_MAPPED) {
    dv_CUdeviceptr d = 0;
    r = cu.cuMemHostGetDevicePointer_v2(&d, h->ptr, 0);
    if (r) {
      cu.cuMemFreeHost(h->ptr);
      dv__free(h);
      return cu_fail(r, DV_CU_E_cuMemHostGetDevicePointer_v2, "");
    }
    if (dev_buf) *dev_buf = (void *)(uintptr_t)d;
    h->dev = d;
  }
  dv__cu_host_add(h);
  *handle = h;
  *ptr = h->ptr;
  return DV_OK;
}

/* Whether host range [p, p + n), which devarray did not pin, is page-locked
 * by someone else for this driver (cuMemHostAlloc or cuMemHostRegister of
 * other code in the process: CuPy, PyTorch, a benchmark's raw calls; issue
 * 36): the driver's pointer attributes say host memory, and its allocation
 * range (where the driver gives one) holds the whole range, else the last
 * byte is host memory too.  False where the driver cannot be asked (HIP) or
 * says anything else: such memory is staged as pageable. */
bool dv__cu_foreign_pinned(cu_state *st, const void *p, size_t n) {
  (void)st;
  if (!cu.cuPointerGetAttribute || !n) return false;
  unsigned type = 0;
  dv_CUdeviceptr a = (dv_CUdeviceptr)(uintptr_t)p;
  if (cu.cuPointerGetAttribute(&type, DV_CU_POINTER_ATTRIBUTE_MEMORY_TYPE, a) != DV_CUDA_SUCCESS ||
      type != DV_CU_MEMORYTYPE_HOST)
    return false;
  dv_CUdeviceptr start = 0;
  size_t size = 0;
  if (cu.cuPointerGetAttribute(&start, DV_CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, a) == DV_CUDA_SUCCESS &&
      cu.cuPointerGetAttribute(&size, DV_CU_POINTER_ATTRIBUTE_RANGE_SIZE, a) == DV_CUDA_SUCCESS && size)
    return a >= start && n <= size - (size_t)(a - start);
  type = 0;
  return cu.cuPointerGetAttribute(&type, DV_CU_POINTER_ATTRIBUTE_MEMORY_TYPE, a + n - 1) == DV_CUDA_SUCCESS &&
         type == DV_CU_MEMORYTYPE_HOST;
}

dv_status dv__cub_host_free(void *state, void *handle) {
  cu_state *st = state;
  CU_ENTER(st);
  dv_cu_host *h = handle;
  if (!dv__cu_host_drop(h)) return DV_OK; /* registered through another context too */
  /* Queued copies may still read or write it (as dv__cub_mem_free); done even
   * when the wait fails, so that a registration never outlives its record. */
  dv_CUdeviceptr mapped = 0; /* this device's address of it, which may have been handed out */
  if (h->dev && cu.cuMemHostGetDevicePointer_v2(&mapped, h->ptr, 0)) mapped = h->dev;
  dv_status wrc = cu_fence_wait(st, mapped ? (void *)(uintptr_t)mapped : NULL, NULL);
  dv_CUresult r = h->foreign      ? DV_CUDA_SUCCESS /* someone else's: theirs to unpin */
                 : h->registered ? cu.cuMemHostUnregister(h->ptr)
                                 : cu.cuMemFreeHost(h->ptr);
  bool registered = h->registered;
  dv__free(h);
  if (r) return cu_fail(r, registered ? DV_CU_E_cuMemHostUnregister : DV_CU_E_cuMemFreeHost, "");
  return wrc;
}

dv_status dv__cub_host_register(void *state, void *ptr, size_t bytes, unsigned flags, void **handle, void **dev_buf) {
  cu_state *st = state;
  *handle = NULL;
  if (dev_buf) *dev_buf = NULL;
  if (!ptr || !bytes) return dv__error(DV_ERR_INVALID_ARGUMENT, "register of an empty range");
  CU_ENTER(st);
  unsigned f = DV_CU_MEMHOSTREGISTER_PORTABLE;
  bool map = (flags & DV_HOSTMEM_MAPPED) && st->info.can_map_host_memory;
  if (map) f |= DV_CU_MEMHOSTREGISTER_DEVICEMAP;
  /* Registered already (through another devarray context: the primary
   * context is shared and PORTABLE registrations are process-wide): share it. */
  dv_cu_host *h = dv__cu_host_find_registered(st->drv, ptr, bytes, map);
  if (h) {
    if (map && dev_buf) {
      /* The mapping's address on this context's device: without unified
       * addressing each device has its own (the record keeps the first's). */
      dv_CUdeviceptr d = 0;
      dv_CUresult r = cu.cuMemHostGetDevicePointer_v2(&d, ptr, 0);
      if (r) {
        if (dv__cu_host_drop(h)) { /* the other holder let go meanwhile */
          cu.cuMemHostUnregister(h->ptr);
          dv__free(h);
        }
        return cu_fail(r, DV_CU_E_cuMemHostGetDevicePointer_v2, " (a registration shared with another context)");
      }
      *dev_buf = (void *)(uintptr_t)d;
    }
    *handle = h;
    return DV_OK;
  }
  h = dv__calloc(1, sizeof *h);
  if (!h) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate a registration record");
  dv_CUresult r = cu.cuMemHostRegister_v2(ptr, bytes, f);
  if (cu_code(r) == DV_CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED && dv__cu_foreign_pinned(st, ptr, bytes)) {
    /* Pinned already by someone else, the whole range (issue 36): accepted
     * as it is; copies with it go straight to the driver, and devarray never
     * unpins it.  Mapped where the driver has a device address for it (its
     * owner pinned it mapped; unified addressing); else registered unmapped
     * (a mapped scope over it then says the backend cannot map it). */
    h->ptr = ptr;
    h->bytes = bytes;
    h->drv = st->drv;
    h->registered = h->foreign = true;
    dv_CUdeviceptr d = 0;
    if (map && cu.cuMemHostGetDevicePointer_v2(&d, ptr, 0) == DV_CUDA_SUCCESS) {
      h->dev = d;
      if (dev_buf) *dev_buf = (void *)(uintptr_t)d;
    }
    dv__cu_host_add(h);
    *handle = h;
    return DV_OK;
  }
  if (r) {
    dv__free(h);
    if (cu_code(r) == DV_CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED)
      return dv__error(DV_ERR_MISUSE, "%s %s failed: part of [%p, +%zu) is already registered, but not the "
                                      "whole range (page-locked by another registration of devarray or by "
                                      "other code in this process: overlapping registrations are refused by "
                                      "the driver)",
                       st->drv->vendor, dv__cu_name(st->drv, DV_CU_E_cuMemHostRegister_v2), ptr, bytes);
    if (cu_code(r) == DV_CUDA_ERROR_OUT_OF_MEMORY)
      return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "%s %s of %zu bytes failed: out of page-locked host memory",
                       st->drv->vendor, dv__cu_name(st->drv, DV_CU_E_cuMemHostRegister_v2), bytes);
    return cu_fail(r, DV_CU_E_cuMemHostRegister_v2, "");
  }
  h->ptr = ptr;
  h->bytes = bytes;
  h->drv = st->drv;
  h->registered = true;
  if (map) {
    dv_CUdeviceptr d = 0;
    r = cu.cuMemHostGetDevicePointer_v2(&d, ptr, 0);
    if (r) { /* reported, not dropped: the caller asked for a mapping */
      cu.cuMemHostUnregister(ptr);
      dv__free(h);
      return cu_fail(r, DV_CU_E_cuMemHostGetDevicePointer_v2, " (registered memory)");
    }
    h->dev = d;
    if (dev_buf) *dev_buf = (void *)(uintptr_t)d;
  }
  dv__cu_host_add(h);
  *handle = h;
  return DV_OK;
}

dv_status dv__cub_host_unregister(void *state, void *handle) { return dv__cub_host_free(state, handle); }

/* ---- streams -------------------------------------------------------------------------------- */

dv_status dv__cub_stream_create(void *state, unsigned flags, dv_bstream **out) {
  *out = NULL;
  cu_state *st = state;
  CU_ENTER(st);
  dv_bstream *s = dv__calloc(1, sizeof *s);
  if (!s) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate a stream");
  dv_CUresult r = cu.cuStreamCreate(&s->s, (flags & DV_STREAM_NON_BLOCKING) ? DV_CU_STREAM_NON_BLOCKING : 0);
  if (r) {
    dv__free(s);
    return cu_fail(r, DV_CU_E_cuStreamCreate, "");
  }
  pthread_mutex_lock(&st->fence_lock);
  s->next = st->streams;
  if (st->streams) st->streams->prev = s;
  st->streams = s;
  pthread_mutex_unlock(&st->fence_lock);
  *out = s;
  return DV_OK;
}

dv_status dv__cub_stream_destroy(void *state, dv_bstream *s) {
  if (s->builtin) return DV_OK;
  cu_state *st = state;
  CU_ENTER(st);
  pthread_mutex_lock(&st->fence_lock);
  if (s->prev) s->prev->next = s->next;
  else st->streams = s->next;
  if (s->next) s->next->prev = s->prev;
  /* Its queued work still runs after the destroy: a fence for the next free. */
  if (atomic_load(&s->dirty) || s->exported) s->fence_pending = cu_fence_record(st, &s->fence, s->s) == DV_CUDA_SUCCESS;
  dv_CUevent *t = s->fence_pending ? dv__cu_grow(st->orphans, st->norphans, &st->corphans, sizeof *t, 8) : NULL;
  if (t) {
    st->orphans = t;
    st->orphans[st->norphans++] = s->fence;
  } else if (s->fence) {
    if (s->fence_pending) cu.cuEventSynchronize(s->fence); /* no room to keep it: wait now */
    cu.cuEventDestroy_v2(s->fence);
  }
  pthread_mutex_unlock(&st->fence_lock);
  dv__cu_stager_detach(st, s); /* its staging thread finishes what is queued */
  dv_CUresult r = cu.cuStreamDestroy_v2(s->s);
  dv__free(s);
  if (r) return cu_fail(r, DV_CU_E_cuStreamDestroy_v2, "");
  return DV_OK;
}

dv_status dv__cub_stream_sync(void *state, dv_bstream *s) {
  cu_state *st = state;
  CU_ENTER(st);
  if (!s) {
    CU_TRY(cu.cuCtxSynchronize(), DV_CU_E_cuCtxSynchronize, "");
    return DV_OK;
  }
  CU_TRY(cu.cuStreamSynchronize(s->s), DV_CU_E_cuStreamSynchronize, "");
  return DV_OK;
}

/* A query's result: DV_OK (complete), DV_ERR_NOT_READY, or the failure. */
static dv_status cu_query(cu_state *st, dv_CUresult r, dv_cu_entry what) {
  if (cu_code(r) == DV_CUDA_ERROR_NOT_READY) return DV_ERR_NOT_READY;
  return r ? cu_fail(r, what, "") : DV_OK;
}

dv_status dv__cub_stream_query(void *state, dv_bstream *s) {
  cu_state *st = state;
  CU_ENTER(st);
  return cu_query(st, cu.cuStreamQuery(s->s), DV_CU_E_cuStreamQuery);
}

dv_status dv__cub_stream_builtin(void *state, int which, dv_bstream **out) {
  cu_state *st = state;
  *out = which == 1 ? &st->legacy : &st->per_thread;
  return DV_OK;
}

typedef struct cu_cb {
  dv_bcallback_fn fn;
  void *user;
} cu_cb;

/* cuStreamAddCallback's: runs after a device error too, with its status
 * (mapped without calling the driver, which callbacks may not do). */
static void cu_cb_trampoline(dv_CUstream s, dv_CUresult status, void *arg) {
  (void)s;
  cu_cb *c = arg;
  c->fn(c->user, dv__cu_status(status));
  dv__free(c);
}

dv_status dv__cub_stream_callback(void *state, dv_bstream *s, dv_bcallback_fn fn, void *user) {
  cu_state *st = state;
  CU_ENTER(st);
  /* cuStreamAddCallback cannot be captured: the driver refuses it there and
   * invalidates the capture (issue 36).  Refused first, the capture kept. */
  if (cu_capturing(st, s->s))
    return dv__error(DV_ERR_MISUSE,
                     "a stream callback on a %s stream that is capturing a %s graph (or would join one: the "
                     "legacy stream while a blocking stream captures) cannot be captured: this is the user's "
                     "dv_stream_add_callback, or devarray's own staging of a copy through host memory; queue "
                     "it after the capture ends",
                     st->drv->vendor, st->drv->vendor);
  cu_cb *c = dv__malloc(sizeof *c);
  if (!c) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate a callback record");
  c->fn = fn, c->user = user;
  dv_CUresult r = cu.cuStreamAddCallback(s->s, cu_cb_trampoline, c, 0);
  if (r) {
    dv__free(c);
    return cu_fail(r, DV_CU_E_cuStreamAddCallback, "");
  }
  return DV_OK;
}

/* ---- events ---------------------------------------------------------------------------------------- */

dv_status dv__cub_event_create(void *state, unsigned flags, dv_bevent **out) {
  *out = NULL;
  cu_state *st = state;
  CU_ENTER(st);
  dv_bevent *e = dv__calloc(1, sizeof *e);
  if (!e) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate an event");
  dv_CUresult r = cu.cuEventCreate(&e->e, (flags & DV_EVENT_TIMING) ? 0 : DV_CU_EVENT_DISABLE_TIMING);
  if (r) {
    dv__free(e);
    return cu_fail(r, DV_CU_E_cuEventCreate, "");
  }
  e->flags = flags;
  *out = e;
  return DV_OK;
}

dv_status dv__cub_event_destroy(void *state, dv_bevent *e) {
  cu_state *st = state;
  CU_ENTER(st);
  dv_CUresult r = cu.cuEventDestroy_v2(e->e);
  dv__free(e);
  if (r) return cu_fail(r, DV_CU_E_cuEventDestroy_v2, "");
  return DV_OK;
}

dv_status dv__cub_event_record(void *state, dv_bevent *e, dv_bstream *s) {
  cu_state *st = state;
  CU_ENTER(st);
  CU_TRY(cu.cuEventRecord(e->e, s->s), DV_CU_E_cuEventRecord, "");
  e->recorded = true;
  return DV_OK;
}

dv_status dv__cub_event_wait(void *state, dv_bstream *s, dv_bevent *e) {
  cu_state *st = state;
  CU_ENTER(st);
  CU_TRY(cu.cuStreamWaitEvent(s->s, e->e, 0), DV_CU_E_cuStreamWaitEvent, "");
  return DV_OK;
}

dv_status dv__cub_event_query(void *state, dv_bevent *e) {
  cu_state *st = state;
  CU_ENTER(st);
  return cu_query(st, cu.cuEventQuery(e->e), DV_CU_E_cuEventQuery);
}

dv_status dv__cub_event_sync(void *state, dv_bevent *e) {
  cu_state *st = state;
  CU_ENTER(st);
  CU_TRY(cu.cuEventSynchronize(e->e), DV_CU_E_cuEventSynchronize, "");
  return DV_OK;
}

dv_status dv__cub_event_elapsed(void *state, dv_bevent *a, dv_bevent *b, float *ms) {
  if (!(a->flags & DV_EVENT_TIMING) || !(b->flags & DV_EVENT_TIMING))
    return dv__error(DV_ERR_INVALID_ARGUMENT, "elapsed time needs two events created with DV_EVENT_TIMING");
  if (!a->recorded || !b->recorded) return dv__error(DV_ERR_MISUSE, "elapsed time of an event that was never recorded");
  cu_state *st = state;
  CU_ENTER(st);
  dv_CUresult r = cu.cuEventElapsedTime_v2(ms, a->e, b->e);
  if (cu_code(r) == DV_CUDA_ERROR_NOT_READY) return dv__error(DV_ERR_NOT_READY, "an event has not completed yet");
  if (r) return cu_fail(r, DV_CU_E_cuEventElapsedTime_v2, "");
  return DV_OK;
}
