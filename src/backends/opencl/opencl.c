/*
 * The OpenCL backend: any OpenCL 1.2+ device (AMD, Intel, NVIDIA GPUs,
 * CPUs through PoCL) through the ICD loader, libOpenCL.so.1, which is loaded
 * with dlopen: the library neither links against it nor needs it to run.
 *
 *  - Device memory is a cl_mem buffer; views are (buffer, byte offset).
 *    Kernels take the buffer and the offset as arguments, so no sub-buffer
 *    is ever made and CL_DEVICE_MEM_BASE_ADDR_ALIGN never constrains a view.
 *  - A stream is an in-order command queue (with profiling, for event
 *    timing); an event is the marker of its last record.
 *  - A host callback is a marker whose completion callback runs the
 *    function and then completes a user event that a barrier on the queue
 *    waits for, so that later commands wait for the callback, as on CUDA.
 *  - Pinned memory is a CL_MEM_ALLOC_HOST_PTR buffer mapped once; mapped
 *    memory is the same buffer, whose handle is also the device view;
 *    registration wraps existing memory with CL_MEM_USE_HOST_PTR.
 *  - Device-to-device copies that rects cannot express use the strided-copy
 *    kernel (src/kernel/copy_kernels.dvk) built once per context on first
 *    use; programs, kernels and launches are in opencl_kernel.c.
 */
#include <dlfcn.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../../core/memops.h"
#include "opencl_internal.h"

#if DV_HAVE_OPENCL_HEADERS

/* ---- the dispatch table ------------------------------------------------------ */

static void *cl_lib;
static dv_status cl_load_status = DV_ERR_LIBRARY_LOAD;
static char cl_load_msg[512];
static pthread_once_t cl_once = PTHREAD_ONCE_INIT;

static void cl_load(void) {
  const char *names[] = {"libOpenCL.so.1", "libOpenCL.so"};
  for (size_t i = 0; i < 2 && !cl_lib; i++) cl_lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
  if (!cl_lib) {
    const char *e = dlerror();
    snprintf(cl_load_msg, sizeof cl_load_msg, "libOpenCL.so.1 could not be loaded: %s", e ? e : "not found");
    cl_load_status = DV_ERR_LIBRARY_LOAD;
    return;
  }
#define DV_CL(name)                                                                     \
  *(void **)&cl.name = dlsym(cl_lib, #name);                                            \
  if (!cl.name) {                                                                       \
    snprintf(cl_load_msg, sizeof cl_load_msg, "libOpenCL.so.1 lacks the entry point %s", #name); \
    cl_load_status = DV_ERR_SYMBOL_LOAD;                                                \
    return;                                                                             \
  }
#include "opencl_symbols.def"
#undef DV_CL
  cl_load_status = DV_OK;
}

static dv_status cl_ensure(void) {
  pthread_once(&cl_once, cl_load);
  if (cl_load_status) return dv__error(cl_load_status, "%s", cl_load_msg);
  return DV_OK;
}

/* A failed OpenCL call: the status it maps to, with the code and name kept. */
static dv_status cl_fail(int code, const char *what) {
  return dv__error(dv__cl_status(code), "OpenCL %s failed: %s (%d)", what, dv__cl_error_name(code), code);
}
#define CL_TRY(call, what)             \
  do {                                 \
    cl_int e_ = (call);                \
    if (e_ != CL_SUCCESS) return cl_fail(e_, what); \
  } while (0)

/* ---- state -------------------------------------------------------------------- */

typedef struct cl_host {
  cl_mem mem;
  void *ptr;
  size_t bytes;
} cl_host;

static dv_status clb_probe(char *reason, size_t cap) {
  dv_status rc = cl_ensure();
  cl_dev_entry devs[CL_MAX_DEVS];
  unsigned n = 0;
  if (!rc) rc = dv__cl_enumerate(devs, &n);
  if (rc) {
    if (reason && cap) snprintf(reason, cap, "%s", dv_last_error());
    return rc;
  }
  if (reason && cap) {
    size_t k = (size_t)snprintf(reason, cap, "%u device(s)", n);
    for (unsigned i = 0; i < n && k < cap; i++) {
      char plat[96] = "";
      cl_ulong gm = 0, ma = 0;
      cl_uint bits = 0;
      cl.clGetPlatformInfo(devs[i].p, CL_PLATFORM_NAME, sizeof plat, plat, NULL);
      cl.clGetDeviceInfo(devs[i].d, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof gm, &gm, NULL);
      cl.clGetDeviceInfo(devs[i].d, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof ma, &ma, NULL);
      cl.clGetDeviceInfo(devs[i].d, CL_DEVICE_MEM_BASE_ADDR_ALIGN, sizeof bits, &bits, NULL);
      k += (size_t)snprintf(reason + k, cap - k,
                            "\n      %u:%u %s [%s%s] on platform \"%s\": global memory %llu MiB, max allocation "
                            "%llu MiB, base alignment %u bytes",
                            devs[i].pi, devs[i].di, devs[i].name,
                            (devs[i].type & CL_DEVICE_TYPE_GPU) ? "GPU" : (devs[i].type & CL_DEVICE_TYPE_CPU) ? "CPU" : "other",
                            devs[i].simulator ? ", simulator: only when named" : "",
                            plat, (unsigned long long)(gm >> 20), (unsigned long long)(ma >> 20), bits / 8);
    }
  }
  return DV_OK;
}

static void cl_fill_info(cl_state *st) {
  dv_device_info *d = &st->info;
  memset(d, 0, sizeof *d);
  snprintf(d->backend, sizeof d->backend, "opencl");
  cl.clGetDeviceInfo(st->device, CL_DEVICE_NAME, sizeof d->name, d->name, NULL);
  cl.clGetDeviceInfo(st->device, CL_DEVICE_VENDOR, sizeof d->vendor, d->vendor, NULL);
  char ver[64] = "", plat[128] = "";
  cl.clGetDeviceInfo(st->device, CL_DRIVER_VERSION, sizeof ver, ver, NULL);
  cl.clGetPlatformInfo(st->platform, CL_PLATFORM_NAME, sizeof plat, plat, NULL);
  snprintf(d->driver_version, sizeof d->driver_version, "%s", ver);
  cl_ulong gm = 0, ma = 0;
  cl_uint align_bits = 0;
  cl_bool unified = CL_FALSE;
  cl.clGetDeviceInfo(st->device, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof gm, &gm, NULL);
  cl.clGetDeviceInfo(st->device, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof ma, &ma, NULL);
  cl.clGetDeviceInfo(st->device, CL_DEVICE_MEM_BASE_ADDR_ALIGN, sizeof align_bits, &align_bits, NULL);
  cl.clGetDeviceInfo(st->device, CL_DEVICE_HOST_UNIFIED_MEMORY, sizeof unified, &unified, NULL);
  d->total_memory = gm;
  d->max_allocation = ma;
  d->base_alignment = align_bits / 8;
  d->can_map_host_memory = 1; /* CL_MEM_ALLOC_HOST_PTR / USE_HOST_PTR are core OpenCL */
  d->managed_memory = 0;
  (void)unified;
  (void)plat;
}

static void *cl_cb_worker(void *arg);

static dv_status clb_open(const dv_backend_config *cfg, void **state) {
  *state = NULL;
  dv_status rc = cl_ensure();
  if (rc) return rc;
  cl_dev_entry dev;
  rc = dv__cl_choose(cfg, &dev);
  if (rc) return rc;
  cl_state *st = dv__calloc(1, sizeof *st);
  if (!st) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate the OpenCL state");
  st->platform = dev.p;
  st->device = dev.d;
  cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)dev.p, 0};
  cl_int e;
  st->ctx = cl.clCreateContext(props, 1, &dev.d, NULL, NULL, &e);
  if (!st->ctx) {
    dv__free(st);
    return cl_fail(e, "clCreateContext");
  }
  st->internal = cl.clCreateCommandQueue(st->ctx, dev.d, 0, &e);
  if (!st->internal) {
    cl.clReleaseContext(st->ctx);
    dv__free(st);
    return cl_fail(e, "clCreateCommandQueue");
  }
  pthread_mutex_init(&st->lock, NULL);
  pthread_mutex_init(&st->cb_m, NULL);
  pthread_cond_init(&st->cb_cv, NULL);
  if (pthread_create(&st->cb_thread, NULL, cl_cb_worker, st) != 0) {
    cl.clReleaseCommandQueue(st->internal);
    cl.clReleaseContext(st->ctx);
    pthread_mutex_destroy(&st->lock);
    pthread_mutex_destroy(&st->cb_m);
    pthread_cond_destroy(&st->cb_cv);
    dv__free(st);
    return dv__error(DV_ERR_DRIVER, "cannot start the OpenCL callback thread");
  }
  cl_fill_info(st);
  dv__cl_kernel_init(st);
  *state = st;
  return DV_OK;
}

static void clb_close(void *state) {
  cl_state *st = state;
  pthread_mutex_lock(&st->cb_m);
  st->cb_stop = true;
  pthread_cond_signal(&st->cb_cv);
  pthread_mutex_unlock(&st->cb_m);
  pthread_join(st->cb_thread, NULL);
  pthread_mutex_destroy(&st->cb_m);
  pthread_cond_destroy(&st->cb_cv);
  cl.clFinish(st->internal);
  dv__cl_kernel_fini(st);
  cl.clReleaseCommandQueue(st->internal);
  cl.clReleaseContext(st->ctx);
  pthread_mutex_destroy(&st->lock);
  dv__free(st->live);
  dv__free(st);
}

static dv_status clb_device_info(void *state, dv_device_info *out) {
  *out = ((cl_state *)state)->info;
  return DV_OK;
}

/* ---- device memory -------------------------------------------------------------- */

/* The live-buffer set (cl_state.live; caller holds st->lock). */
static size_t cl_live_slot(const cl_state *st, const void *mem) {
  uintptr_t h = (uintptr_t)mem;
  h ^= h >> 17;
  h *= (uintptr_t)0x9E3779B97F4A7C15ull;
  return (size_t)(h ^ (h >> 29)) & (st->live_cap - 1);
}

static struct cl_live *cl_live_find(const cl_state *st, const void *mem) {
  if (!st->live_cap) return NULL;
  for (size_t i = cl_live_slot(st, mem);; i = (i + 1) & (st->live_cap - 1)) {
    if (!st->live[i].mem) return NULL;
    if (st->live[i].mem == mem) return &st->live[i];
  }
}

static bool cl_live_add(cl_state *st, void *mem, size_t bytes) {
  if ((st->live_n + 1) * 2 > st->live_cap) { /* at most half full */
    size_t cap = st->live_cap ? st->live_cap * 2 : 64;
    struct cl_live *t = dv__calloc(cap, sizeof *t);
    if (!t) return false;
    struct cl_live *old = st->live;
    size_t ocap = st->live_cap;
    st->live = t;
    st->live_cap = cap;
    for (size_t i = 0; i < ocap; i++) {
      if (!old[i].mem) continue;
      size_t j = cl_live_slot(st, old[i].mem);
      while (t[j].mem) j = (j + 1) & (cap - 1);
      t[j] = old[i];
    }
    dv__free(old);
  }
  size_t j = cl_live_slot(st, mem);
  while (st->live[j].mem) j = (j + 1) & (st->live_cap - 1);
  st->live[j].mem = mem;
  st->live[j].bytes = bytes;
  st->live_n++;
  return true;
}

/* Backward-shift deletion: the entries after the hole that belong at or
 * before it move up, so that no lookup stops at the hole too early. */
static void cl_live_remove(cl_state *st, const void *mem) {
  struct cl_live *e = cl_live_find(st, mem);
  if (!e) return;
  size_t mask = st->live_cap - 1, hole = (size_t)(e - st->live);
  for (size_t i = (hole + 1) & mask; st->live[i].mem; i = (i + 1) & mask) {
    size_t home = cl_live_slot(st, st->live[i].mem);
    /* movable unless its home lies cyclically in (hole, i] */
    bool stays = hole <= i ? (hole < home && home <= i) : (hole < home || home <= i);
    if (stays) continue;
    st->live[hole] = st->live[i];
    hole = i;
  }
  st->live[hole].mem = NULL;
  st->live[hole].bytes = 0;
  st->live_n--;
}

static dv_status clb_mem_alloc(void *state, size_t bytes, void **buf) {
  cl_state *st = state;
  *buf = NULL;
  if (bytes > st->info.max_allocation)
    return dv__error(DV_ERR_OUT_OF_MEMORY, "%zu bytes exceed the device's largest allocation (%llu, CL_DEVICE_MAX_MEM_ALLOC_SIZE)",
                     bytes, (unsigned long long)st->info.max_allocation);
  /* OpenCL allocates lazily and cannot report free memory: account here so
   * that out-of-memory (and the pending-deallocation ratio) are real. */
  pthread_mutex_lock(&st->lock);
  if (bytes > st->info.total_memory - st->used) {
    size_t f = st->info.total_memory - st->used;
    pthread_mutex_unlock(&st->lock);
    return dv__error(DV_ERR_OUT_OF_MEMORY, "OpenCL: %zu bytes requested, %zu of %llu free", bytes, f,
                     (unsigned long long)st->info.total_memory);
  }
  st->used += bytes;
  pthread_mutex_unlock(&st->lock);
  cl_int e;
  cl_mem m = cl.clCreateBuffer(st->ctx, CL_MEM_READ_WRITE, bytes, NULL, &e);
  if (!m) {
    pthread_mutex_lock(&st->lock);
    st->used -= bytes;
    pthread_mutex_unlock(&st->lock);
    return cl_fail(e, "clCreateBuffer");
  }
  pthread_mutex_lock(&st->lock);
  bool added = cl_live_add(st, m, bytes);
  if (!added) st->used -= bytes;
  pthread_mutex_unlock(&st->lock);
  if (!added) {
    cl.clReleaseMemObject(m);
    return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot record a new OpenCL buffer");
  }
  *buf = m;
  return DV_OK;
}

static dv_status clb_mem_free(void *state, void *buf) {
  cl_state *st = state;
  size_t sz = 0;
  cl.clGetMemObjectInfo((cl_mem)buf, CL_MEM_SIZE, sizeof sz, &sz, NULL);
  /* Out of the live set before the release: the driver may hand the same
   * handle value to a clCreateBuffer on another thread right after it. */
  pthread_mutex_lock(&st->lock);
  cl_live_remove(st, buf);
  pthread_mutex_unlock(&st->lock);
  cl_int e = cl.clReleaseMemObject((cl_mem)buf);
  if (e) {
    pthread_mutex_lock(&st->lock); /* still ours (best effort: a failed add only forgets it) */
    if (!cl_live_add(st, buf, sz)) dv__log(DV_LOG_WARN, "OpenCL: buffer %p no longer recorded", buf);
    pthread_mutex_unlock(&st->lock);
    return cl_fail(e, "clReleaseMemObject");
  }
  pthread_mutex_lock(&st->lock);
  st->used -= sz < st->used ? sz : st->used;
  pthread_mutex_unlock(&st->lock);
  return DV_OK;
}

/* Version 8: a buffer of ours is in the live set; nothing else is handed to
 * the driver (a cl_mem is a pointer the ICD reads through).  The native
 * handle of a buffer is the cl_mem itself. */
static dv_status clb_buffer_check(void *state, void *buf, bool native, size_t offset, size_t bytes) {
  (void)native;
  cl_state *st = state;
  pthread_mutex_lock(&st->lock);
  const struct cl_live *e = cl_live_find(st, buf);
  size_t have = e ? e->bytes : 0;
  pthread_mutex_unlock(&st->lock);
  if (!e)
    return dv__error(DV_ERR_INVALID_ARGUMENT,
                     "%p is not a live OpenCL buffer of this context (not one its mem_alloc made)", buf);
  if (offset > have || bytes > have - offset)
    return dv__error(DV_ERR_INVALID_ARGUMENT,
                     "bytes [%zu, %zu) lie outside the %zu-byte OpenCL buffer %p", offset,
                     offset + bytes, have, buf);
  return DV_OK;
}

static dv_status clb_mem_info(void *state, size_t *free_bytes, size_t *total_bytes) {
  cl_state *st = state;
  pthread_mutex_lock(&st->lock);
  *total_bytes = st->info.total_memory;
  *free_bytes = st->info.total_memory - st->used;
  pthread_mutex_unlock(&st->lock);
  return DV_OK;
}

/* ---- host memory ---------------------------------------------------------------- */

static dv_status cl_host_new(cl_state *st, void *user_ptr, size_t bytes, void **handle, void **ptr, void **dev_buf) {
  cl_host *h = dv__calloc(1, sizeof *h);
  if (!h) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate a host-memory record");
  cl_int e;
  cl_mem_flags fl = CL_MEM_READ_WRITE | (user_ptr ? CL_MEM_USE_HOST_PTR : CL_MEM_ALLOC_HOST_PTR);
  h->mem = cl.clCreateBuffer(st->ctx, fl, bytes, user_ptr, &e);
  if (!h->mem) {
    dv__free(h);
    return cl_fail(e, user_ptr ? "clCreateBuffer(CL_MEM_USE_HOST_PTR)" : "clCreateBuffer(CL_MEM_ALLOC_HOST_PTR)");
  }
  h->bytes = bytes;
  if (user_ptr) {
    h->ptr = user_ptr;
  } else {
    /* Mapped once, for the buffer's life: the host view of pinned memory. */
    h->ptr = cl.clEnqueueMapBuffer(st->internal, h->mem, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0, bytes, 0, NULL,
                                   NULL, &e);
    if (!h->ptr) {
      cl.clReleaseMemObject(h->mem);
      dv__free(h);
      return cl_fail(e, "clEnqueueMapBuffer");
    }
  }
  *handle = h;
  if (ptr) *ptr = h->ptr;
  if (dev_buf) *dev_buf = h->mem;
  return DV_OK;
}

static dv_status cl_host_release(cl_state *st, cl_host *h) {
  if (!h) return dv__error(DV_ERR_INVALID_ARGUMENT, "NULL host-memory handle");
  cl_int e = CL_SUCCESS;
  /* Pinned memory was mapped at creation: unmap before releasing. */
  cl_mem_flags fl = 0;
  cl.clGetMemObjectInfo(h->mem, CL_MEM_FLAGS, sizeof fl, &fl, NULL);
  if (fl & CL_MEM_ALLOC_HOST_PTR) {
    e = cl.clEnqueueUnmapMemObject(st->internal, h->mem, h->ptr, 0, NULL, NULL);
    cl.clFinish(st->internal);
  }
  cl_int e2 = cl.clReleaseMemObject(h->mem);
  dv__free(h);
  if (e) return cl_fail(e, "clEnqueueUnmapMemObject");
  if (e2) return cl_fail(e2, "clReleaseMemObject");
  return DV_OK;
}

static dv_status cl_sync_all(cl_state *st);

static dv_status clb_host_alloc(void *state, size_t bytes, unsigned flags, void **handle, void **ptr, void **dev_buf) {
  *handle = *ptr = NULL;
  if (dev_buf) *dev_buf = NULL;
  (void)flags; /* portable and write-combined have no OpenCL equivalent */
  return cl_host_new(state, NULL, bytes, handle, ptr, dev_buf);
}

static dv_status clb_host_free(void *state, void *handle) {
  cl_sync_all(state); /* queued copies may still use the memory */
  return cl_host_release(state, handle);
}

static dv_status clb_host_register(void *state, void *ptr, size_t bytes, unsigned flags, void **handle, void **dev_buf) {
  (void)flags;
  *handle = NULL;
  if (dev_buf) *dev_buf = NULL;
  if (!ptr || !bytes) return dv__error(DV_ERR_INVALID_ARGUMENT, "register of an empty range");
  return cl_host_new(state, ptr, bytes, handle, NULL, dev_buf);
}

static dv_status clb_host_unregister(void *state, void *handle) {
  cl_sync_all(state);
  return cl_host_release(state, handle);
}

/* ---- streams ------------------------------------------------------------------------ */

static dv_status clb_stream_create(void *state, unsigned flags, dv_bstream **out) {
  cl_state *st = state;
  (void)flags;
  *out = NULL;
  dv_bstream *s = dv__calloc(1, sizeof *s);
  if (!s) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate a stream");
  cl_int e;
  s->q = cl.clCreateCommandQueue(st->ctx, st->device, CL_QUEUE_PROFILING_ENABLE, &e);
  if (!s->q) {
    dv__free(s);
    return cl_fail(e, "clCreateCommandQueue");
  }
  pthread_mutex_init(&s->m, NULL);
  pthread_mutex_lock(&st->lock);
  s->next = st->streams;
  st->streams = s;
  pthread_mutex_unlock(&st->lock);
  *out = s;
  return DV_OK;
}

static dv_status clb_stream_destroy(void *state, dv_bstream *s) {
  cl_state *st = state;
  pthread_mutex_lock(&st->lock);
  for (dv_bstream **p = &st->streams; *p; p = &(*p)->next)
    if (*p == s) {
      *p = s->next;
      break;
    }
  pthread_mutex_unlock(&st->lock);
  cl_int e = cl.clFinish(s->q);
  cl_int e2 = cl.clReleaseCommandQueue(s->q);
  if (s->last) cl.clReleaseEvent(s->last);
  for (int i = 0; i < s->nmarks; i++) cl.clReleaseEvent(s->marks[(s->mark0 + i) % CL_MARKS]);
  pthread_mutex_destroy(&s->m);
  dv__free(s);
  if (e) return cl_fail(e, "clFinish");
  if (e2) return cl_fail(e2, "clReleaseCommandQueue");
  return DV_OK;
}

static dv_status cl_sync_all(cl_state *st) {
  /* Queues are only destroyed through the context, never while a sync of
   * the whole device runs on another thread of the same context's owner;
   * hold the lock while finishing each queue. */
  dv_status first = DV_OK;
  pthread_mutex_lock(&st->lock);
  for (dv_bstream *s = st->streams; s; s = s->next) {
    atomic_store(&s->untracked, false);
    cl_int e = cl.clFinish(s->q);
    if (e && !first) first = cl_fail(e, "clFinish");
  }
  pthread_mutex_unlock(&st->lock);
  return first;
}

static dv_status clb_stream_sync(void *state, dv_bstream *s) {
  if (!s) return cl_sync_all(state);
  /* Everything queued so far is done when clFinish returns; a launch queued
   * meanwhile sets the flag again. */
  atomic_store(&s->untracked, false);
  CL_TRY(cl.clFinish(s->q), "clFinish");
  return DV_OK;
}

static dv_status clb_stream_query(void *state, dv_bstream *s) {
  (void)state;
  cl_int status = CL_COMPLETE, e = CL_SUCCESS;
  bool native = atomic_load(&s->native);
  if (native || atomic_exchange(&s->untracked, false)) {
    /* Work we did not track (the caller's own on a native queue, or
     * launches queued without events): ask a fresh marker.  For a native
     * queue give it a moment to pass an idle queue (the answer may still be
     * NOT_READY just after the work is done). */
    cl_event ev;
    CL_TRY(cl.clEnqueueMarkerWithWaitList(s->q, 0, NULL, &ev), "clEnqueueMarkerWithWaitList");
    cl.clFlush(s->q);
    for (int i = 0; native && i < 100; i++) {
      if (cl.clGetEventInfo(ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, NULL) != CL_SUCCESS ||
          status <= CL_COMPLETE)
        break;
      sched_yield();
    }
    cl_track(s, ev);
  }
  pthread_mutex_lock(&s->m);
  if (s->last) e = cl.clGetEventInfo(s->last, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, NULL);
  pthread_mutex_unlock(&s->m);
  if (e) return cl_fail(e, "clGetEventInfo");
  if (status < 0) return cl_fail(status, "a queued command");
  return status == CL_COMPLETE ? DV_OK : DV_ERR_NOT_READY;
}

typedef struct cl_cb {
  dv_bcallback_fn fn;
  void *user;
  cl_event gate; /* user event the queue's barrier waits on */
  dv_status status;
  cl_state *st;
  struct cl_cb *next;
} cl_cb;

/* OpenCL's callback: hand the work to the callback thread and return. */
static void CL_CALLBACK cl_cb_trampoline(cl_event ev, cl_int status, void *arg) {
  (void)ev;
  cl_cb *c = arg;
  cl_state *st = c->st;
  c->status = status == CL_COMPLETE ? DV_OK : dv__cl_status(status);
  c->next = NULL;
  pthread_mutex_lock(&st->cb_m);
  if (st->cb_tail) st->cb_tail->next = c;
  else st->cb_head = c;
  st->cb_tail = c;
  pthread_cond_signal(&st->cb_cv);
  pthread_mutex_unlock(&st->cb_m);
}

static void *cl_cb_worker(void *arg) {
  cl_state *st = arg;
  pthread_mutex_lock(&st->cb_m);
  for (;;) {
    while (!st->cb_head && !st->cb_stop) pthread_cond_wait(&st->cb_cv, &st->cb_m);
    cl_cb *c = st->cb_head;
    if (!c) break;
    st->cb_head = c->next;
    if (!st->cb_head) st->cb_tail = NULL;
    pthread_mutex_unlock(&st->cb_m);
    c->fn(c->user, c->status);
    cl.clSetUserEventStatus(c->gate, CL_COMPLETE); /* later commands may go on */
    cl.clReleaseEvent(c->gate);
    dv__free(c);
    pthread_mutex_lock(&st->cb_m);
  }
  pthread_mutex_unlock(&st->cb_m);
  return NULL;
}

static dv_status clb_stream_callback(void *state, dv_bstream *s, dv_bcallback_fn fn, void *user) {
  cl_state *st = state;
  cl_cb *c = dv__malloc(sizeof *c);
  if (!c) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate a callback record");
  cl_int e;
  c->fn = fn, c->user = user, c->st = st;
  c->gate = cl.clCreateUserEvent(st->ctx, &e);
  if (!c->gate) {
    dv__free(c);
    return cl_fail(e, "clCreateUserEvent");
  }
  cl_event marker;
  e = cl.clEnqueueMarkerWithWaitList(s->q, 0, NULL, &marker);
  if (e) {
    cl.clReleaseEvent(c->gate);
    dv__free(c);
    return cl_fail(e, "clEnqueueMarkerWithWaitList");
  }
  /* Later commands wait for the callback's user event. */
  cl_event barrier = NULL;
  e = cl.clEnqueueBarrierWithWaitList(s->q, 1, &c->gate, &barrier);
  if (e) {
    /* The marker is queued: complete the gate ourselves and drop the record. */
    cl.clSetUserEventStatus(c->gate, CL_COMPLETE);
    cl.clReleaseEvent(c->gate);
    cl.clReleaseEvent(marker);
    dv__free(c);
    return cl_fail(e, "clEnqueueBarrierWithWaitList");
  }
  cl_track(s, barrier);
  e = cl.clSetEventCallback(marker, CL_COMPLETE, cl_cb_trampoline, c);
  cl.clReleaseEvent(marker);
  if (e) {
    cl.clSetUserEventStatus(c->gate, CL_COMPLETE);
    cl.clReleaseEvent(c->gate);
    dv__free(c);
    return cl_fail(e, "clSetEventCallback");
  }
  cl.clFlush(s->q);
  return DV_OK;
}

/* ---- copies -------------------------------------------------------------------------- */

/* OpenCL's rect rules: a slice pitch is a multiple of the row pitch and
 * holds `height` rows. */
static bool cl_rect_ok(size_t pitch, size_t slice, size_t height, size_t depth) {
  return depth <= 1 || (pitch && slice % pitch == 0 && slice >= pitch * height);
}

static void cl_origin(size_t off, size_t pitch, size_t slice, size_t o[3]) {
  o[2] = slice ? off / slice : 0;
  off -= o[2] * slice;
  o[1] = pitch ? off / pitch : 0;
  o[0] = off - o[1] * pitch;
}

static dv_status clb_copy_rect(void *state, dv_bstream *s, const dv_rect *r) {
  cl_state *st = state;
  if (!r->width || !r->height || !r->depth) return DV_OK;
  bool sd = r->src.buf != NULL, dd = r->dst.buf != NULL;
  cl_bool blocking = (r->flags & DV_COPY_SYNC) ? CL_TRUE : CL_FALSE;
  size_t sp = r->height > 1 ? r->src_pitch : r->width, dp = r->height > 1 ? r->dst_pitch : r->width;
  size_t ss = r->depth > 1 ? r->src_slice : sp * r->height, ds = r->depth > 1 ? r->dst_slice : dp * r->height;
  if (!sd && !dd) return dv__host_rect_in_order(clb_stream_callback, st, s, r); /* host to host */
  if (!cl_rect_ok(sp, ss, r->height, r->depth) || !cl_rect_ok(dp, ds, r->height, r->depth)) return DV_ERR_NOT_SUPPORTED;
  /* Within one buffer (pool blocks share segments) OpenCL wants equal
   * pitches on both sides; otherwise let the planner use the kernel. */
  if (sd && dd && r->src.buf == r->dst.buf && (r->height > 1 || r->depth > 1) && (sp != dp || ss != ds))
    return DV_ERR_NOT_SUPPORTED;
  bool flat = r->height == 1 && r->depth == 1;
  /* Within one buffer OpenCL refuses a rect copy (CL_MEM_COPY_OVERLAP) when
   * the two regions overlap as its specification's test sees them: that
   * test compares linear ranges from each origin to origin + depth x slice
   * + height x pitch + width, far past the bytes the rows touch (PoCL
   * follows it; other drivers compare bounding boxes).  The planner has
   * refused views whose elements share bytes, so such a copy is right but
   * would be refused: leave it to the strided-copy kernel, which moves
   * exactly the elements.  A flat copy's range is its bytes. */
  if (sd && dd && r->src.buf == r->dst.buf && !flat) {
    size_t s0 = r->src.offset, s1 = s0 + r->depth * ss + r->height * sp + r->width;
    size_t d0 = r->dst.offset, d1 = d0 + r->depth * ds + r->height * dp + r->width;
    if (s0 < d1 && d0 < s1) return DV_ERR_NOT_SUPPORTED;
  }
  size_t region[3] = {r->width, r->height, r->depth}, so[3], dofs[3], zero[3] = {0, 0, 0};
  if (sd && dd) {
    if (flat) {
      CL_TRY(cl.clEnqueueCopyBuffer(s->q, r->src.buf, r->dst.buf, r->src.offset, r->dst.offset, r->width, 0, NULL, NULL),
             "clEnqueueCopyBuffer");
    } else {
      cl_origin(r->src.offset, sp, ss, so);
      cl_origin(r->dst.offset, dp, ds, dofs);
      CL_TRY(cl.clEnqueueCopyBufferRect(s->q, r->src.buf, r->dst.buf, so, dofs, region, sp, ss, dp, ds, 0, NULL, NULL),
             "clEnqueueCopyBufferRect");
    }
    if (blocking) CL_TRY(cl.clFinish(s->q), "clFinish");
  } else if (dd) {
    if (flat) {
      CL_TRY(cl.clEnqueueWriteBuffer(s->q, r->dst.buf, blocking, r->dst.offset, r->width, r->src.ptr, 0, NULL, NULL),
             "clEnqueueWriteBuffer");
    } else {
      cl_origin(r->dst.offset, dp, ds, dofs);
      CL_TRY(cl.clEnqueueWriteBufferRect(s->q, r->dst.buf, blocking, dofs, zero, region, dp, ds, sp, ss, r->src.ptr, 0,
                                         NULL, NULL),
             "clEnqueueWriteBufferRect");
    }
  } else {
    if (flat) {
      CL_TRY(cl.clEnqueueReadBuffer(s->q, r->src.buf, blocking, r->src.offset, r->width, r->dst.ptr, 0, NULL, NULL),
             "clEnqueueReadBuffer");
    } else {
      cl_origin(r->src.offset, sp, ss, so);
      CL_TRY(cl.clEnqueueReadBufferRect(s->q, r->src.buf, blocking, so, zero, region, sp, ss, dp, ds, r->dst.ptr, 0, NULL,
                                        NULL),
             "clEnqueueReadBufferRect");
    }
  }
  if (!blocking) {
    cl_event ev;
    if (cl.clEnqueueMarkerWithWaitList(s->q, 0, NULL, &ev) == CL_SUCCESS) cl_track(s, ev);
    cl.clFlush(s->q);
  }
  return DV_OK;
}

static dv_status clb_memset(void *state, dv_bstream *s, dv_memref dst, int value, size_t bytes) {
  (void)state;
  if (!bytes) return DV_OK;
  if (!dst.buf) return DV_ERR_NOT_SUPPORTED;
  cl_uchar pattern = (cl_uchar)value;
  cl_event ev;
  CL_TRY(cl.clEnqueueFillBuffer(s->q, dst.buf, &pattern, 1, dst.offset, bytes, 0, NULL, &ev), "clEnqueueFillBuffer");
  cl_track(s, ev);
  cl.clFlush(s->q);
  return DV_OK;
}

/* ---- events --------------------------------------------------------------------------- */

static dv_status clb_event_create(void *state, unsigned flags, dv_bevent **out) {
  (void)state;
  dv_bevent *e = dv__calloc(1, sizeof *e);
  if (!e) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate an event");
  pthread_mutex_init(&e->m, NULL);
  e->flags = flags;
  *out = e;
  return DV_OK;
}

static dv_status clb_event_destroy(void *state, dv_bevent *e) {
  (void)state;
  if (e->ev) cl.clReleaseEvent(e->ev);
  pthread_mutex_destroy(&e->m);
  dv__free(e);
  return DV_OK;
}

static dv_status clb_event_record(void *state, dv_bevent *e, dv_bstream *s) {
  (void)state;
  cl_event ev;
  CL_TRY(cl.clEnqueueMarkerWithWaitList(s->q, 0, NULL, &ev), "clEnqueueMarkerWithWaitList");
  cl.clFlush(s->q);
  pthread_mutex_lock(&e->m);
  cl_event old = e->ev;
  e->ev = ev;
  pthread_mutex_unlock(&e->m);
  if (old) cl.clReleaseEvent(old);
  return DV_OK;
}

static dv_status clb_event_wait(void *state, dv_bstream *s, dv_bevent *e) {
  (void)state;
  cl_event ev = NULL;
  pthread_mutex_lock(&e->m);
  cl_int err = e->ev ? cl.clEnqueueBarrierWithWaitList(s->q, 1, &e->ev, &ev) : CL_SUCCESS;
  pthread_mutex_unlock(&e->m);
  if (err) return cl_fail(err, "clEnqueueBarrierWithWaitList");
  if (ev) cl_track(s, ev);
  return DV_OK;
}

static dv_status clb_event_query(void *state, dv_bevent *e) {
  (void)state;
  pthread_mutex_lock(&e->m);
  cl_int status = CL_COMPLETE, err = CL_SUCCESS;
  if (e->ev) err = cl.clGetEventInfo(e->ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, NULL);
  pthread_mutex_unlock(&e->m);
  if (err) return cl_fail(err, "clGetEventInfo");
  if (status < 0) return cl_fail(status, "the recorded work");
  return status == CL_COMPLETE ? DV_OK : DV_ERR_NOT_READY;
}

static dv_status clb_event_sync(void *state, dv_bevent *e) {
  (void)state;
  pthread_mutex_lock(&e->m);
  cl_int err = e->ev ? cl.clWaitForEvents(1, &e->ev) : CL_SUCCESS;
  pthread_mutex_unlock(&e->m);
  if (err) return cl_fail(err, "clWaitForEvents");
  return DV_OK;
}

static dv_status clb_event_elapsed(void *state, dv_bevent *a, dv_bevent *b, float *ms) {
  (void)state;
  if (!(a->flags & DV_EVENT_TIMING) || !(b->flags & DV_EVENT_TIMING))
    return dv__error(DV_ERR_INVALID_ARGUMENT, "elapsed time needs two events created with DV_EVENT_TIMING");
  pthread_mutex_lock(&a->m);
  pthread_mutex_lock(&b->m);
  dv_status rc = DV_OK;
  if (!a->ev || !b->ev) {
    rc = dv__error(DV_ERR_MISUSE, "elapsed time of an event that was never recorded");
  } else {
    cl_int sa = 0, sb = 0;
    cl.clGetEventInfo(a->ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof sa, &sa, NULL);
    cl.clGetEventInfo(b->ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof sb, &sb, NULL);
    if (sa != CL_COMPLETE || sb != CL_COMPLETE) {
      rc = dv__error(DV_ERR_NOT_READY, "an event has not completed yet");
    } else {
      cl_ulong t0 = 0, t1 = 0;
      cl_int e1 = cl.clGetEventProfilingInfo(a->ev, CL_PROFILING_COMMAND_END, sizeof t0, &t0, NULL);
      cl_int e2 = cl.clGetEventProfilingInfo(b->ev, CL_PROFILING_COMMAND_END, sizeof t1, &t1, NULL);
      if (e1 || e2) rc = cl_fail(e1 ? e1 : e2, "clGetEventProfilingInfo");
      else *ms = (float)((double)((cl_long)(t1 - t0)) / 1e6);
    }
  }
  pthread_mutex_unlock(&b->m);
  pthread_mutex_unlock(&a->m);
  return rc;
}

const dv_backend dv__backend_opencl = {
    .name = "opencl",
    .caps = DV_BCAP_BASE | DV_BCAP_STRIDED | DV_BCAP_KERNELS | DV_BCAP_NATIVE | DV_BCAP_BUFFER_CHECK,
    .probe = clb_probe,
    .open = clb_open,
    .close = clb_close,
    .device_info = clb_device_info,
    .mem_alloc = clb_mem_alloc,
    .mem_free = clb_mem_free,
    .mem_info = clb_mem_info,
    .host_alloc = clb_host_alloc,
    .host_free = clb_host_free,
    .host_register = clb_host_register,
    .host_unregister = clb_host_unregister,
    .copy_rect = clb_copy_rect,
    .copy_strided = dv__clk_copy_strided,
    .memset = clb_memset,
    .stream_create = clb_stream_create,
    .stream_destroy = clb_stream_destroy,
    .stream_sync = clb_stream_sync,
    .stream_query = clb_stream_query,
    .stream_callback = clb_stream_callback,
    .event_create = clb_event_create,
    .event_destroy = clb_event_destroy,
    .event_record = clb_event_record,
    .event_wait = clb_event_wait,
    .event_query = clb_event_query,
    .event_sync = clb_event_sync,
    .event_elapsed = clb_event_elapsed,
    .kernel_limits = dv__clk_kernel_limits,
    .kernel_target_id = dv__clk_kernel_target_id,
    .module_build = dv__clk_module_build,
    .module_load = dv__clk_module_load,
    .module_unload = dv__clk_module_unload,
    .kernel_get = dv__clk_kernel_get,
    .kernel_attrs = dv__clk_kernel_attrs,
    .constant_write = dv__clk_constant_write,
    .launch = dv__clk_launch,
    .native_context = dv__clk_native_context,
    .native_stream = dv__clk_native_stream,
    .native_buffer = dv__clk_native_buffer,
    .buffer_wrap = dv__clk_buffer_wrap,
    .buffer_unwrap = dv__clk_buffer_unwrap,
    .kernel_params = dv__clk_kernel_params,
    .buffer_check = clb_buffer_check,
};

#else /* no OpenCL headers at build time */

static dv_status clb_probe(char *reason, size_t cap) {
  if (reason && cap) snprintf(reason, cap, "built without OpenCL headers (install opencl-headers and rebuild)");
  return DV_ERR_BACKEND_UNAVAILABLE;
}
static dv_status clb_open(const dv_backend_config *cfg, void **state) {
  (void)cfg;
  *state = NULL;
  return dv__error(DV_ERR_BACKEND_UNAVAILABLE, "built without OpenCL headers (install opencl-headers and rebuild)");
}
/* A placeholder (DV_BCAP_ENTRY alone): open always fails. */
const dv_backend dv__backend_opencl = {.name = "opencl", .caps = DV_BCAP_ENTRY, .probe = clb_probe, .open = clb_open};
dv_status dv__cl_build(void *state, const char *source, const char *options, void **program, char **log) {
  (void)state, (void)source, (void)options;
  *program = NULL;
  if (log) *log = NULL;
  return dv__error(DV_ERR_BACKEND_UNAVAILABLE, "built without OpenCL headers");
}
void dv__cl_program_release(void *program) { (void)program; }
#endif
