/*
 * The OpenCL backend's device and host memory: buffers (accounted here,
 * since OpenCL cannot report free memory), the set of live buffers that
 * buffer_check consults, pinned and registered host memory.
 */
#include "opencl_internal.h"

#if DV_HAVE_OPENCL_HEADERS

/* An entry of the live-buffer set (cl_state.live). */
struct cl_live {
  void *mem;
  size_t bytes;
};

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

dv_status dv__clb_mem_alloc(void *state, size_t bytes, void **buf) {
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
    return dv__clk_fail(e, "clCreateBuffer");
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

dv_status dv__clb_mem_free(void *state, void *buf) {
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
    return dv__clk_fail(e, "clReleaseMemObject");
  }
  pthread_mutex_lock(&st->lock);
  st->used -= sz < st->used ? sz : st->used;
  pthread_mutex_unlock(&st->lock);
  return DV_OK;
}

/* Version 8: a buffer of ours is in the live set; nothing else is handed to
 * the driver (a cl_mem is a pointer the ICD reads through).  The native
 * handle of a buffer is the cl_mem itself. */
dv_status dv__clb_buffer_check(void *state, void *buf, bool native, size_t offset, size_t bytes) {
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

dv_status dv__clb_mem_info(void *state, size_t *free_bytes, size_t *total_bytes) {
  cl_state *st = state;
  pthread_mutex_lock(&st->lock);
  *total_bytes = st->info.total_memory;
  *free_bytes = st->info.total_memory - st->used;
  pthread_mutex_unlock(&st->lock);
  return DV_OK;
}

/* ---- host memory ---------------------------------------------------------------- */

/* Pinned or registered host memory: the buffer and its host address. */
typedef struct cl_host {
  cl_mem mem;
  void *ptr;
  size_t bytes;
} cl_host;

static dv_status cl_host_new(cl_state *st, void *user_ptr, size_t bytes, void **handle, void **ptr, void **dev_buf) {
  cl_host *h = dv__calloc(1, sizeof *h);
  if (!h) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate a host-memory record");
  cl_int e;
  cl_mem_flags fl = CL_MEM_READ_WRITE | (user_ptr ? CL_MEM_USE_HOST_PTR : CL_MEM_ALLOC_HOST_PTR);
  h->mem = cl.clCreateBuffer(st->ctx, fl, bytes, user_ptr, &e);
  if (!h->mem) {
    dv__free(h);
    return dv__clk_fail(e, user_ptr ? "clCreateBuffer(CL_MEM_USE_HOST_PTR)" : "clCreateBuffer(CL_MEM_ALLOC_HOST_PTR)");
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
      return dv__clk_fail(e, "clEnqueueMapBuffer");
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
  if (e) return dv__clk_fail(e, "clEnqueueUnmapMemObject");
  if (e2) return dv__clk_fail(e2, "clReleaseMemObject");
  return DV_OK;
}


dv_status dv__clb_host_alloc(void *state, size_t bytes, unsigned flags, void **handle, void **ptr, void **dev_buf) {
  *handle = *ptr = NULL;
  if (dev_buf) *dev_buf = NULL;
  (void)flags; /* portable and write-combined have no OpenCL equivalent */
  return cl_host_new(state, NULL, bytes, handle, ptr, dev_buf);
}

dv_status dv__clb_host_free(void *state, void *handle) {
  dv__cl_sync_all(state); /* queued copies may still use the memory */
  return cl_host_release(state, handle);
}

dv_status dv__clb_host_register(void *state, void *ptr, size_t bytes, unsigned flags, void **handle, void **dev_buf) {
  (void)flags;
  *handle = NULL;
  if (dev_buf) *dev_buf = NULL;
  if (!ptr || !bytes) return dv__error(DV_ERR_INVALID_ARGUMENT, "register of an empty range");
  return cl_host_new(state, ptr, bytes, handle, NULL, dev_buf);
}

dv_status dv__clb_host_unregister(void *state, void *handle) {
  dv__cl_sync_all(state);
  return cl_host_release(state, handle);
}

#else
typedef int dv__opencl_memory_none; /* built without OpenCL headers: nothing here */
#endif /* DV_HAVE_OPENCL_HEADERS */
