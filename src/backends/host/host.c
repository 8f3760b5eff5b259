/*
 * The host simulator: a device model, not a stub.  This file is the only
 * one that names every part: it opens and closes them and builds the
 * backend table.  The parts (each folder's header says what it owns):
 * device/ (memory, streams running opaque tasks, copies, IPC: device.h),
 * toolchain/ (compiler, modules), exec/ (launches, executors, the runtime:
 * exec.h), tools/ (plug-ins over exec's hooks: tools.h) and the access
 * checks and the watchdog still at host/'s top.
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
 *    operations too (a stream's opaque tasks, hb_enqueue_task): compiled
 *    with the system C compiler, run by the stream's worker and a few
 *    helper threads, with the checks a GPU does not make.  A stream holds
 *    at most HB_TASK_QUEUE of them.
 */
#include <stdio.h>
#include <string.h>

#include "device/device.h"
#include "exec/exec.h"
#include "tools/tools.h"
#include "../graphrec.h"

/* ---- open and close --------------------------------------------------------- */

/* The device's state is the backend's state; the other parts' hang off it
 * (hb_user), for the wrappers below. */
typedef struct host_parts {
  hk_state *k; /* launches, executors, the runtime, the checks */
  hk_tc *tc;   /* toolchain/ */
  hkt_state *tools; /* tools/: plugged into k (hk_tool_add) */
} host_parts;
#define HK(state) (((host_parts *)hb_user(state))->k)
#define TC(state) (((host_parts *)hb_user(state))->tc)

static void host_parts_free(host_parts *p) {
  if (!p) return;
  hk_close(p->k);
  hkt_close(p->tools); /* after the launches' part: none is left */
  hk_tc_close(p->tc);
  dv__free(p);
}

static dv_status host_open(const dv_backend_config *cfg, void **state) {
  *state = NULL;
  host_parts *p = dv__calloc(1, sizeof *p);
  if (!p) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate the host simulator");
  dv_status rc = hk_tc_open(cfg, hk_runtime(), &p->tc);
  if (!rc) rc = hk_open(cfg, &p->k);
  if (!rc) rc = hkt_open(cfg, p->k, &p->tools);
  hb_state *st = NULL;
  if (!rc) rc = hb_device_open(cfg, p, &st);
  if (rc) {
    host_parts_free(p);
    return rc;
  }
  *state = st;
  return DV_OK;
}

static void host_close(void *state) {
  host_parts *p = hb_user(state);
  hb_stream_sync(state, NULL);
  hk_close(p->k); /* after the streams: queued launches have run */
  p->k = NULL;
  hkt_close(p->tools);
  p->tools = NULL;
  hb_device_close(state);
  host_parts_free(p);
}

/* ---- the kernel part's methods: its state, from the device's ------------------ */

static dv_status host_kernel_limits(void *state, dv_klimits *out) {
  return hk_kernel_limits(HK(state), out);
}
static dv_status host_kernel_target_id(void *state, char *buf, size_t cap) {
  return hk_kernel_target_id(TC(state), buf, cap);
}
static dv_status host_module_build(void *state, const dv_build_req *req, dv_bmodule **out,
                                   void **image, size_t *image_size, char **log) {
  return hk_module_build(TC(state), req, out, image, image_size, log);
}
static dv_status host_module_load(void *state, const dv_build_req *req, const void *image,
                                  size_t image_size, dv_bmodule **out, char **log) {
  return hk_module_load(TC(state), req, image, image_size, out, log);
}
static dv_status host_module_unload(void *state, dv_bmodule *m) {
  return hk_module_unload(TC(state), m);
}
static dv_status host_kernel_get(void *state, dv_bmodule *m, const char *name, dv_bkernel **out) {
  return hk_kernel_get(TC(state), m, name, out);
}
static dv_status host_kernel_attrs(void *state, dv_bkernel *k, dv_kernel_attrs *out) {
  return hk_kernel_attrs(HK(state), k, out);
}
static dv_status host_kernel_params(void *state, dv_bkernel *k, dv_bparam *out, size_t cap,
                                    size_t *n, const char **sig) {
  return hk_kernel_params(TC(state), k, out, cap, n, sig);
}
static dv_status host_launch(void *state, dv_bstream *s, dv_bkernel *k, const dv_blaunch *l) {
  DV_REC_HOOK(s, dv__rec_launch(rec_, k, l));
  return hk_launch(HK(state), s, k, l);
}

/* A module's constant buffer is written by a copy on the stream (queued in
 * order with the launches that read it). */
static dv_status host_constant_queue(void *state, dv_bmodule *m, dv_bstream *s, size_t offset, dv_memref src,
                                     size_t bytes);
static dv_status host_constant_write(void *state, dv_bmodule *m, dv_bstream *s, size_t offset,
                                     dv_memref src, size_t bytes) {
  if (!m || !s) return dv__error(DV_ERR_NULL_ARGUMENT, "constant write without module or stream");
  DV_REC_HOOK(s, dv__rec_constant_write(rec_, m, offset, src, bytes));
  return host_constant_queue(state, m, s, offset, src, bytes);
}
static dv_status host_constant_queue(void *state, dv_bmodule *m, dv_bstream *s, size_t offset, dv_memref src,
                                     size_t bytes) {
  unsigned char *cbuf;
  size_t cbytes;
  const char *name = hk_module_constants(m, &cbuf, &cbytes);
  if (offset > cbytes || bytes > cbytes - offset)
    return dv__error(DV_ERR_INVALID_ARGUMENT,
                     "constant write of %zu bytes at offset %zu outside the %zu-byte constant "
                     "buffer of program %s", bytes, offset, cbytes, name);
  if (!bytes) return DV_OK;
  dv_rect r;
  memset(&r, 0, sizeof r);
  r.src = src;
  r.dst.ptr = cbuf + offset;
  r.width = bytes;
  r.height = 1;
  r.depth = 1;
  return hb_copy_rect(state, s, &r);
}

/* ---- graphs: the shared recorder (../graphrec.h) ------------------------------------
 * While a stream captures, its work goes to the recorder: these wrappers
 * are the table's stream methods, one test each when not capturing (the
 * copy_rect method, the hottest, tests it itself after its synchronous
 * run: device/copy.c). */
static dv_status host_copy_strided(void *state, dv_bstream *s, const dv_strided *c) {
  DV_REC_HOOK(s, dv__rec_copy_strided(rec_, c));
  return hb_copy_strided(state, s, c);
}
static dv_status host_memset(void *state, dv_bstream *s, dv_memref dst, int value, size_t bytes) {
  DV_REC_HOOK(s, dv__rec_memset(rec_, dst, value, bytes));
  return hb_memset(state, s, dst, value, bytes);
}
static dv_status host_stream_callback(void *state, dv_bstream *s, dv_bcallback_fn fn, void *user) {
  DV_REC_HOOK(s, dv__rec_refuse(rec_, "a stream callback"));
  return hb_stream_callback(state, s, fn, user);
}
static dv_status host_event_record(void *state, dv_bevent *e, dv_bstream *s) {
  DV_REC_HOOK(s, dv__rec_event_record(rec_, e));
  return hb_event_record(state, e, s);
}
static dv_status host_event_wait(void *state, dv_bstream *s, dv_bevent *e) {
  DV_REC_HOOK(s, dv__rec_event_wait(rec_, e));
  return hb_event_wait(state, s, e);
}
static dv_status host_launch(void *state, dv_bstream *s, dv_bkernel *k, const dv_blaunch *l);
static dv_status host_constant_queue(void *state, dv_bmodule *m, dv_bstream *s, size_t offset, dv_memref src,
                                     size_t bytes);
static const dv_rec_ops host_rec_ops = {
    .copy_rect = hb_copy_rect,
    .copy_strided = hb_copy_strided,
    .memset = hb_memset,
    .launch = host_launch, /* a replay's target stream does not capture: the hook passes */
    .constant_write = host_constant_queue,
    .event_record = hb_event_record,
    .event_wait = hb_event_wait,
    .stream_callback = hb_stream_callback,
};
static dv_status host_graph_begin(void *state, dv_bstream *s) { return dv__rec_begin(&host_rec_ops, state, s); }
static dv_status host_graph_end(void *state, dv_bstream *s, dv_bgraph **out) {
  (void)state;
  return dv__rec_end(s, out);
}
static dv_status host_graph_host_fn(void *state, dv_bstream *s, dv_bcallback_fn fn, void *user) {
  (void)state;
  dv_rec *r = dv__rec_of(s);
  if (!r) return dv__error(DV_ERR_MISUSE, "a graph's host function on a stream that is not capturing");
  return dv__rec_host_fn(r, fn, user);
}
static dv_status host_graph_instantiate(void *state, dv_bgraph *g, dv_bgexec **out) {
  (void)state;
  return dv__rec_instantiate(g, out);
}
static dv_status host_graph_launch(void *state, dv_bgexec *e, dv_bstream *s) {
  (void)state;
  return dv__rec_replay(e, s);
}
static dv_status host_graph_exec_destroy(void *state, dv_bgexec *e) {
  (void)state;
  return dv__rec_exec_destroy(e);
}
static dv_status host_graph_destroy(void *state, dv_bgraph *g) {
  (void)state;
  return dv__rec_graph_destroy(g);
}

static dv_status host_native_context(void *state, void **context, void **device) {
  (void)state;
  if (context) *context = NULL;
  if (device) *device = NULL;
  return DV_OK;
}

const dv_backend dv__backend_host = {
    .name = "host",
    .caps = DV_BCAP_BASE | DV_BCAP_STRIDED | DV_BCAP_KERNELS | DV_BCAP_NATIVE | DV_BCAP_IPC | DV_BCAP_FAULTS |
            DV_BCAP_TRIM | DV_BCAP_BUFFER_CHECK | DV_BCAP_GRAPHS,
    .probe = hb_probe,
    .open = host_open,
    .close = host_close,
    .device_info = hb_device_info,
    .mem_alloc = hb_mem_alloc,
    .mem_free = hb_mem_free,
    .mem_info = hb_mem_info,
    .host_alloc = hb_host_alloc,
    .host_free = hb_host_free,
    .host_register = hb_host_register,
    .host_unregister = hb_host_unregister,
    .copy_rect = hb_copy_rect, /* records on a capturing stream itself (device/copy.c) */
    .copy_strided = host_copy_strided,
    .memset = host_memset,
    .stream_create = hb_stream_create,
    .stream_destroy = hb_stream_destroy,
    .stream_sync = hb_stream_sync,
    .stream_query = hb_stream_query,
    .stream_callback = host_stream_callback,
    .event_create = hb_event_create,
    .event_destroy = hb_event_destroy,
    .event_record = host_event_record,
    .event_wait = host_event_wait,
    .event_query = hb_event_query,
    .event_sync = hb_event_sync,
    .event_elapsed = hb_event_elapsed,
    .fault_inject = hb_fault_inject,
    .fault_pending = hb_fault_pending,
    .check_memory = hb_check_memory,
    /* Kernels and native handles (the kernel files, through the wrappers above). */
    .kernel_limits = host_kernel_limits,
    .kernel_target_id = host_kernel_target_id,
    .module_build = host_module_build,
    .module_load = host_module_load,
    .module_unload = host_module_unload,
    .kernel_get = host_kernel_get,
    .kernel_attrs = host_kernel_attrs,
    .constant_write = host_constant_write,
    .launch = host_launch,
    .native_context = host_native_context,
    .native_stream = hb_native_stream,
    .native_buffer = hb_native_buffer,
    .buffer_wrap = hb_buffer_wrap,
    .buffer_unwrap = hb_buffer_unwrap,
    .ipc_export = hb_ipc_export,
    .ipc_open = hb_ipc_open,
    .ipc_close = hb_ipc_close,
    .kernel_params = host_kernel_params,
    .mem_trim = hb_mem_trim,
    .buffer_check = hb_buffer_check,
    .graph_begin = host_graph_begin,
    .graph_end = host_graph_end,
    .graph_host_fn = host_graph_host_fn,
    .graph_instantiate = host_graph_instantiate,
    .graph_launch = host_graph_launch,
    .graph_exec_destroy = host_graph_exec_destroy,
    .graph_destroy = host_graph_destroy,
};
