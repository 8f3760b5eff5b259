/*
 * The host simulator's device (src/backends/host/device/): device memory
 * (mem.c), IPC blocks (ipc.c), streams and events (stream.c), copies
 * (copy.c), host memory, the device's open and close and the rest of the
 * backend table's device methods (device.c).  It knows nothing of kernels:
 * a stream runs opaque tasks {run, free} (hb_enqueue_task), which exec/
 * queues for its launches, and a launch reaches the blocks it uses only
 * through the hb_block_* functions below.  The structs are device/'s own
 * (device_internal.h, for its files and the white-box tests).
 */
#ifndef DV_HOST_DEVICE_H
#define DV_HOST_DEVICE_H
#include <stdbool.h>
#include <stddef.h>

#include "../../../core/core.h"
#include "../../backend.h"

#if defined(__SANITIZE_ADDRESS__)
#define DV_HOST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define DV_HOST_ASAN 1
#endif
#endif
#if DV_HOST_ASAN
#define DV_NO_ASAN __attribute__((no_sanitize_address))
#else
#define DV_NO_ASAN
#endif

typedef struct hb_state hb_state; /* the device: memory, streams (device_internal.h) */
typedef struct hb_block hb_block; /* a device buffer (dv_memref.buf) */

/* ---- open and close (host.c) ---- */
/* The device for a context (option device must name device 0).  user: the
 * caller's pointer, kept for it (hb_user): host.c keeps the other parts'
 * states there. */
dv_status hb_device_open(const dv_backend_config *cfg, void *user, hb_state **out);
/* Waits for all queued work first. */
void hb_device_close(hb_state *st);
void *hb_user(const void *state);

/* ---- tasks: a stream's opaque operations ----
 * run is called on the stream's worker in the stream's order; a non-zero
 * status is the stream's error (msg: its detail, as a failed copy's is);
 * free is called once the task has run or was never run (the stream owns
 * the task from a successful hb_enqueue_task on).  A stream holds at most
 * HB_TASK_QUEUE tasks not yet run: one more waits for it to run one, as a
 * GPU's launch queue makes it wait. */
typedef struct hb_task_ops {
  dv_status (*run)(void *task, char *msg, size_t cap);
  void (*free)(void *task);
} hb_task_ops;
dv_status hb_enqueue_task(dv_bstream *s, const hb_task_ops *ops, void *task);

/* ---- blocks, for a kernel launch (exec/) and the access checks ----
 * hold: take a reference on b for the launch and give its payload (false:
 * b was freed; no reference taken).  unref: the reference goes. */
bool hb_block_hold(hb_block *b, unsigned char **data);
dv_status hb_block_unref(hb_block *b);
size_t hb_block_bytes(const hb_block *b);
unsigned char *hb_block_data(const hb_block *b);
/* Around a launch that uses b: kernel_begin arms fast mode's canaries (the
 * first launch writes them) or, in checked mode under AddressSanitizer,
 * poisons the guards while the kernel runs; kernel_end undoes that and,
 * with check, checks the guards: false when the kernel wrote one (they are
 * written again, so the free does not report it twice). */
void hb_kernel_begin(hb_block *b);
bool hb_kernel_end(hb_block *b, bool check);
/* A fault's address against b (exec/signal.c names the array a kernel
 * missed): its byte offset from b's payload in *off; true when that is
 * outside the payload (false inside, or for a mapped view). */
bool hb_block_miss(const hb_block *b, const void *addr, long long *off);

/* ---- the backend table's device methods (host.c names them) ---- */
dv_status hb_probe(char *reason, size_t cap);
dv_status hb_device_info(void *state, dv_device_info *out);
dv_status hb_fault_inject(void *state, dv_fault_kind kind, uint64_t k);
int hb_fault_pending(void *state, dv_fault_kind kind);
dv_status hb_trim(void *state);
dv_status hb_check_memory(void *state);
dv_status hb_mem_alloc(void *state, size_t bytes, void **buf);
dv_status hb_mem_free(void *state, void *buf);
dv_status hb_mem_info(void *state, size_t *free_bytes, size_t *total_bytes);
/* Backend version 8: buf is a live block of st, or inside one's payload (looked up, not read). */
dv_status hb_buffer_check(void *state, void *buf, bool native, size_t offset, size_t bytes);
dv_status hb_host_alloc(void *state, size_t bytes, unsigned flags, void **handle, void **ptr,
                        void **dev_buf);
dv_status hb_host_free(void *state, void *handle);
dv_status hb_host_register(void *state, void *ptr, size_t bytes, unsigned flags, void **handle,
                           void **dev_buf);
dv_status hb_host_unregister(void *state, void *handle);
dv_status hb_native_stream(void *state, dv_bstream *s, void **handle);
dv_status hb_native_buffer(void *state, void *buf, void **native);
dv_status hb_buffer_wrap(void *state, void *native, size_t bytes, void **buf);
dv_status hb_buffer_unwrap(void *state, void *buf);
dv_status hb_ipc_export(void *state, void *buf, unsigned char *payload);
dv_status hb_ipc_open(void *state, const unsigned char *payload, void **native, size_t *bytes,
                      void **token);
dv_status hb_ipc_close(void *state, void *token);
dv_status hb_copy_rect(void *state, dv_bstream *s, const dv_rect *r);
dv_status hb_copy_strided(void *state, dv_bstream *s, const dv_strided *c);
dv_status hb_memset(void *state, dv_bstream *s, dv_memref dst, int value, size_t bytes);
dv_status hb_stream_create(void *state, unsigned flags, dv_bstream **out);
dv_status hb_stream_destroy(void *state, dv_bstream *s);
dv_status hb_stream_sync(void *state, dv_bstream *s);
dv_status hb_stream_query(void *state, dv_bstream *s);
dv_status hb_stream_callback(void *state, dv_bstream *s, dv_bcallback_fn fn, void *user);
dv_status hb_event_create(void *state, unsigned flags, dv_bevent **out);
dv_status hb_event_destroy(void *state, dv_bevent *e);
dv_status hb_event_record(void *state, dv_bevent *e, dv_bstream *s);
dv_status hb_event_wait(void *state, dv_bstream *s, dv_bevent *e);
dv_status hb_event_query(void *state, dv_bevent *e);
dv_status hb_event_sync(void *state, dv_bevent *e);
dv_status hb_event_elapsed(void *state, dv_bevent *a, dv_bevent *b, float *ms);

#endif
