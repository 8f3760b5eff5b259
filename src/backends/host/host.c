/*
 * The host simulator: a device model, not a stub.  This file: host memory,
 * the backend table, open and close; device memory is host_mem.c, streams
 * and events host_stream.c, copies host_copy.c, kernels host_kernel.c.
 *
 *  - Device memory is host RAM owned by the simulator (never the caller's),
 *    bounded by a capacity (option host_memory), so out-of-memory and the
 *    pending-deallocation ratio limit are real.
 *  - Each stream is a worker thread executing its queue in order, so
 *    asynchronous work really happens later: a missing synchronize shows.
 *  - In checked mode allocations carry guard bytes on both sides; freed
 *    memory is poisoned and kept a while in a quarantine whose poison is
 *    checked, so stray writes (before, after or after-free) are reported as
 *    DV_ERR_CORRUPTION.  Fast mode checks a few canary bytes on each side
 *    of blocks kernels have used and reuses freed blocks (host_mem.c).
 *  - Copies are bounds-checked against their allocations when queued.
 *  - Faults can be injected: the k-th device allocation, copy or free fails.
 *  - Blocks are reference counted by the queued operations that use them, so
 *    memory freed while work is queued is reclaimed when that work is done.
 *  - Kernels (host_kernel.c and the files it names, fiber.c) are queued
 *    operations too (OP_KERNEL): compiled with the system C compiler, run by
 *    the stream's worker and a few helper threads, with the checks a GPU
 *    does not make.  A stream holds at most HB_KERNEL_QUEUE of them.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../../core/core.h"
#include "../backend.h"
#include "../../core/memops.h"
#include "host_stream.h"

/* ---- host memory ---------------------------------------------------------- */

typedef struct hb_host {
  void *ptr;
  bool owned;
  hb_block *alias; /* device view when mapped */
} hb_host;

static dv_status hb_host_alloc(void *state, size_t bytes, unsigned flags, void **handle,
                               void **ptr, void **dev_buf) {
  hb_state *st = state;
  *handle = *ptr = NULL;
  if (dev_buf) *dev_buf = NULL;
  hb_host *h = dv__calloc(1, sizeof *h);
  void *p = h ? dv__malloc(bytes) : NULL;
  hb_block *alias = NULL;
  if (p && (flags & DV_HOSTMEM_MAPPED)) alias = hb_alias_new(st, p, bytes);
  if (!h || !p || ((flags & DV_HOSTMEM_MAPPED) && !alias)) {
    dv__free(p);
    dv__free(h);
    return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate %zu bytes of pinned host memory", bytes);
  }
  h->ptr = p;
  h->owned = true;
  h->alias = alias;
  *handle = h;
  *ptr = p;
  if (dev_buf) *dev_buf = alias;
  return DV_OK;
}

/* Like cuMemFreeHost, releasing host memory first waits for queued work, so
 * an asynchronous copy never reads freed memory.  (Not from a worker thread,
 * where waiting would deadlock: callbacks must not drop the last reference
 * to host memory still used by queued work.) */
static dv_status hb_host_release(hb_state *st, hb_host *h) {
  if (!h) return dv__error(DV_ERR_INVALID_ARGUMENT, "NULL host-memory handle");
  if (!hb_on_worker()) hb_stream_sync(st, NULL);
  if (h->alias) {
    atomic_store(&h->alias->freed, true);
    hb_block_unref(h->alias);
  }
  if (h->owned) dv__free(h->ptr);
  dv__free(h);
  return DV_OK;
}

static dv_status hb_host_free(void *state, void *handle) {
  return hb_host_release(state, handle);
}

static dv_status hb_host_register(void *state, void *ptr, size_t bytes, unsigned flags,
                                  void **handle, void **dev_buf) {
  hb_state *st = state;
  *handle = NULL;
  if (dev_buf) *dev_buf = NULL;
  if (!ptr || !bytes) return dv__error(DV_ERR_INVALID_ARGUMENT, "register of an empty range");
  hb_host *h = dv__calloc(1, sizeof *h);
  hb_block *alias = (h && (flags & DV_HOSTMEM_MAPPED)) ? hb_alias_new(st, ptr, bytes) : NULL;
  if (!h || ((flags & DV_HOSTMEM_MAPPED) && !alias)) {
    dv__free(h);
    return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate a registration record");
  }
  h->ptr = ptr;
  h->alias = alias;
  *handle = h;
  if (dev_buf) *dev_buf = alias;
  return DV_OK;
}

static dv_status hb_host_unregister(void *state, void *handle) {
  return hb_host_release(state, handle);
}

/* ---- the rest ------------------------------------------------------------- */

/* ---- for host_kernel.c (host_internal.h) ----------------------------------- */

static dv_status hb_enqueue_kernel(dv_bstream *s, hk_job *l) {
  hb_op *op = hb_op_new(OP_KERNEL);
  if (!op) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot queue a kernel launch");
  op->u.kernel = l;
  hb_enqueue(s, op);
  return DV_OK;
}

static const hk_services hb_services = {
    .block_unref = hb_block_unref,
    .guards_ok = hb_guards_ok,
    .guards_arm = hb_guards_arm,
    .alias_new = hb_alias_new,
    .enqueue = hb_enqueue_kernel,
    .copy_rect = hb_copy_rect,
};

static dv_status hb_probe(char *reason, size_t cap) {
  if (reason && cap) snprintf(reason, cap, "always available");
  return DV_OK;
}

static dv_status hb_open(const dv_backend_config *cfg, void **state) {
  *state = NULL;
  /* One device, 0: any other selector is refused, as the other backends
   * refuse a device they do not have. */
  const char *dev = cfg->device ? cfg->device : "";
  if (*dev) {
    char *end = NULL;
    errno = 0;
    long v = strtol(dev, &end, 10);
    if (errno || end == dev || *end || v < 0)
      return dv__error(DV_ERR_INVALID_ARGUMENT,
                       "host simulator device \"%s\" is not an ordinal (option device; its one "
                       "device is 0)", dev);
    if (v != 0)
      return dv__error(DV_ERR_BACKEND_UNAVAILABLE,
                       "no host simulator device %ld (it has one device, 0; option device)", v);
  }
  hb_state *st = dv__calloc(1, sizeof *st);
  if (!st) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate the host simulator");
  hb_mem_open(st, cfg);
  pthread_mutex_init(&st->idle_m, NULL);
  pthread_cond_init(&st->idle_cv, NULL);
  st->delay_us = cfg->host_delay_us;
  st->strided = cfg->host_strided != 0;
  atomic_store(&st->fault[DV_FAULT_COPY], cfg->fault_copy);
  dv_status rc = hk_open(st, cfg, &hb_services, &st->head.k);
  if (rc) {
    pthread_mutex_destroy(&st->idle_m);
    pthread_cond_destroy(&st->idle_cv);
    dv__free(st);
    return rc;
  }
  *state = st;
  return DV_OK;
}

static void hb_close(void *state) {
  hb_state *st = state;
  hb_stream_sync(st, NULL);
  hk_close(st->head.k); /* after the streams: queued launches have run */
  hb_mem_close(st);
  pthread_mutex_destroy(&st->idle_m);
  pthread_cond_destroy(&st->idle_cv);
  dv__free(st);
}

static dv_status hb_device_info(void *state, dv_device_info *out) {
  hb_state *st = state;
  snprintf(out->backend, sizeof out->backend, "host");
  snprintf(out->name, sizeof out->name, "devarray host simulator");
  snprintf(out->vendor, sizeof out->vendor, "devarray");
  snprintf(out->driver_version, sizeof out->driver_version, "%s", dv_version());
  out->total_memory = st->cap;
  out->max_allocation = st->cap;
  out->base_alignment = 256;
  out->can_map_host_memory = 1;
  out->managed_memory = 0;
  return DV_OK;
}

static dv_status hb_fault_inject(void *state, dv_fault_kind kind, uint64_t k) {
  hb_state *st = state;
  if ((unsigned)kind >= sizeof st->fault / sizeof st->fault[0])
    return dv__error(DV_ERR_INVALID_ARGUMENT, "unknown fault kind %d", (int)kind);
  atomic_store(&st->fault[kind], k);
  return DV_OK;
}

static int hb_fault_pending(void *state, dv_fault_kind kind) {
  hb_state *st = state;
  if ((unsigned)kind >= sizeof st->fault / sizeof st->fault[0]) return 0;
  return atomic_load(&st->fault[kind]) != 0;
}

/* dv_memory_trim: the blocks that queued work still holds come back to the
 * cache when that work ends, so wait for it first (the header promises that
 * trim returns what work that used the memory held); the internal trim of a
 * refused allocation (host_mem.c) does not wait. */
static dv_status hb_trim(void *state) {
  if (!hb_on_worker()) hb_stream_sync(state, NULL);
  return hb_mem_trim(state);
}

const dv_backend dv__backend_host = {
    .name = "host",
    .caps = DV_BCAP_BASE | DV_BCAP_STRIDED | DV_BCAP_KERNELS | DV_BCAP_NATIVE | DV_BCAP_IPC | DV_BCAP_FAULTS |
            DV_BCAP_TRIM | DV_BCAP_BUFFER_CHECK,
    .probe = hb_probe,
    .open = hb_open,
    .close = hb_close,
    .device_info = hb_device_info,
    .mem_alloc = hb_mem_alloc,
    .mem_free = hb_mem_free,
    .mem_info = hb_mem_info,
    .host_alloc = hb_host_alloc,
    .host_free = hb_host_free,
    .host_register = hb_host_register,
    .host_unregister = hb_host_unregister,
    .copy_rect = hb_copy_rect,
    .copy_strided = hb_copy_strided,
    .memset = hb_memset,
    .stream_create = hb_stream_create,
    .stream_destroy = hb_stream_destroy,
    .stream_sync = hb_stream_sync,
    .stream_query = hb_stream_query,
    .stream_callback = hb_stream_callback,
    .event_create = hb_event_create,
    .event_destroy = hb_event_destroy,
    .event_record = hb_event_record,
    .event_wait = hb_event_wait,
    .event_query = hb_event_query,
    .event_sync = hb_event_sync,
    .event_elapsed = hb_event_elapsed,
    .fault_inject = hb_fault_inject,
    .fault_pending = hb_fault_pending,
    .check_memory = hb_check_memory,
    /* Kernels and native handles (host_kernel.c). */
    .kernel_limits = hk_kernel_limits,
    .kernel_target_id = hk_kernel_target_id,
    .module_build = hk_module_build,
    .module_load = hk_module_load,
    .module_unload = hk_module_unload,
    .kernel_get = hk_kernel_get,
    .kernel_attrs = hk_kernel_attrs,
    .constant_write = hk_constant_write,
    .launch = hk_launch,
    .native_context = hk_native_context,
    .native_stream = hk_native_stream,
    .native_buffer = hk_native_buffer,
    .buffer_wrap = hk_buffer_wrap,
    .buffer_unwrap = hk_buffer_unwrap,
    .ipc_export = hb_ipc_export,
    .ipc_open = hb_ipc_open,
    .ipc_close = hb_ipc_close,
    .kernel_params = hk_kernel_params,
    .mem_trim = hb_trim,
    .buffer_check = hb_buffer_check,
};
