/*
 * The host simulator's device as a whole: its open and close, what it says
 * of itself, injected faults, host memory (pinned, registered, mapped),
 * native handles and wrapped foreign memory.  Device memory is mem.c,
 * streams and events stream.c, copies copy.c, IPC ipc.c (device.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device_internal.h"

dv_status hb_device_open(const dv_backend_config *cfg, void *user, hb_state **out) {
  *out = NULL;
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
  st->user = user;
  hb_mem_open(st, cfg);
  pthread_mutex_init(&st->idle_m, NULL);
  pthread_cond_init(&st->idle_cv, NULL);
  st->delay_us = cfg->host_delay_us;
  st->strided = cfg->host_strided != 0;
  atomic_store(&st->fault[DV_FAULT_COPY], cfg->fault_copy);
  *out = st;
  return DV_OK;
}

void hb_device_close(hb_state *st) {
  if (!st) return;
  hb_stream_sync(st, NULL);
  hb_mem_close(st);
  pthread_mutex_destroy(&st->idle_m);
  pthread_cond_destroy(&st->idle_cv);
  dv__free(st);
}

void *hb_user(const void *state) { return ((const hb_state *)state)->user; }

/* ---- host memory ---------------------------------------------------------- */

typedef struct hb_host {
  void *ptr;
  bool owned;
  hb_block *alias; /* device view when mapped */
} hb_host;

dv_status hb_host_alloc(void *state, size_t bytes, unsigned flags, void **handle,
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

dv_status hb_host_free(void *state, void *handle) {
  return hb_host_release(state, handle);
}

dv_status hb_host_register(void *state, void *ptr, size_t bytes, unsigned flags,
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

dv_status hb_host_unregister(void *state, void *handle) {
  return hb_host_release(state, handle);
}

/* ---- the device ------------------------------------------------------------ */

dv_status hb_probe(char *reason, size_t cap) {
  if (reason && cap) snprintf(reason, cap, "always available");
  return DV_OK;
}

dv_status hb_device_info(void *state, dv_device_info *out) {
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

dv_status hb_fault_inject(void *state, dv_fault_kind kind, uint64_t k) {
  hb_state *st = state;
  if ((unsigned)kind >= sizeof st->fault / sizeof st->fault[0])
    return dv__error(DV_ERR_INVALID_ARGUMENT, "unknown fault kind %d", (int)kind);
  atomic_store(&st->fault[kind], k);
  return DV_OK;
}

int hb_fault_pending(void *state, dv_fault_kind kind) {
  hb_state *st = state;
  if ((unsigned)kind >= sizeof st->fault / sizeof st->fault[0]) return 0;
  return atomic_load(&st->fault[kind]) != 0;
}

/* dv_memory_trim: the blocks that queued work still holds come back to the
 * cache when that work ends, so wait for it first (the header promises that
 * trim returns what work that used the memory held); the internal trim of a
 * refused allocation (host_mem.c) does not wait. */
dv_status hb_mem_trim(void *state) {
  if (!hb_on_worker()) hb_stream_sync(state, NULL);
  return hb_cache_trim(state);
}

/* ---- native handles, foreign memory ------------------------------------------- */

dv_status hb_native_stream(void *state, dv_bstream *s, void **handle) {
  (void)state;
  (void)s;
  if (handle) *handle = NULL;
  return dv__error(DV_ERR_NOT_SUPPORTED,
                   "the host simulator's streams are worker threads with no native handle");
}

dv_status hb_native_buffer(void *state, void *buf, void **native) {
  (void)state;
  if (!buf) return dv__error(DV_ERR_NULL_ARGUMENT, "buffer is NULL");
  *native = ((hb_block *)buf)->data;
  return DV_OK;
}

dv_status hb_buffer_wrap(void *state, void *native, size_t bytes, void **buf) {
  *buf = NULL;
  if (!native && bytes)
    return dv__error(DV_ERR_INVALID_ARGUMENT, "cannot wrap a NULL pointer of %zu bytes", bytes);
  hb_block *b = hb_alias_new(state, native, bytes);
  if (!b) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate a wrapped buffer");
  *buf = b;
  return DV_OK;
}

dv_status hb_buffer_unwrap(void *state, void *buf) {
  (void)state;
  hb_block *b = buf;
  if (!b || !b->alias)
    return dv__error(DV_ERR_INVALID_ARGUMENT, "buffer %p was not made by buffer_wrap", buf);
  atomic_store(&b->freed, true);
  return hb_block_unref(b); /* queued work keeps its own refs */
}
