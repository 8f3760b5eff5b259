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
/* A synchronous task (the caller waits for the stream right after) run at
 * once on the calling thread when the stream is idle, as a synchronous
 * copy is (stream.c's hb_try_inline): true when it ran (*rc its status, msg
 * its detail; not the stream's error: the caller returns it), false when
 * the stream was busy, holds an earlier error (its synchronize returns that
 * first) or the option host_delay_us is set (nothing done: queue it).  The
 * task stays the caller's either way. */
bool hb_task_try_inline(dv_bstream *s, const hb_task_ops *ops, void *task, char *msg, size_t cap,
                        dv_status *rc);

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

/* ---- the backend table's device methods (host.c names them) ----
 * Declared from the one list of methods (../../backend_methods.def) as hb_<method>: every
 * method of the groups the device implements whole, and of the groups it shares with host.c
 * (ENTRY, DEVICE, NATIVE: open, close and native_context concern the kernel part too and are
 * host.c's) the ones picked below.  The kernel groups are host.c's. */
#define DV_HB_ALL(m, decl) decl
#define DV_HB_NONE(m, decl)
#define DV_HB_SHARED(m, decl) DV_HB_PICK_##m(decl)
#define DV_HB_PICK_probe(decl) decl
#define DV_HB_PICK_open(decl)
#define DV_HB_PICK_close(decl)
#define DV_HB_PICK_device_info(decl) decl
#define DV_HB_PICK_native_context(decl)
#define DV_HB_PICK_native_stream(decl) decl
#define DV_HB_PICK_native_buffer(decl) decl
#define DV_HB_PICK_buffer_wrap(decl) decl
#define DV_HB_PICK_buffer_unwrap(decl) decl
#define DV_HB_ENTRY DV_HB_SHARED
#define DV_HB_DEVICE DV_HB_SHARED
#define DV_HB_NATIVE DV_HB_SHARED
#define DV_HB_MEMORY DV_HB_ALL
#define DV_HB_HOSTMEM DV_HB_ALL
#define DV_HB_COPIES DV_HB_ALL
#define DV_HB_STREAMS DV_HB_ALL
#define DV_HB_EVENTS DV_HB_ALL
#define DV_HB_STRIDED DV_HB_ALL
#define DV_HB_IPC DV_HB_ALL
#define DV_HB_FAULTS DV_HB_ALL
#define DV_HB_TRIM DV_HB_ALL
#define DV_HB_BUFFER_CHECK DV_HB_ALL
#define DV_HB_PEER DV_HB_NONE
#define DV_HB_MANAGED DV_HB_NONE
#define DV_HB_BUILTIN_STREAMS DV_HB_NONE
#define DV_HB_KERNELS DV_HB_NONE
#define DV_HB_ORDER_NATIVE DV_HB_NONE
#define DV_HB_DRIVER_POOL DV_HB_NONE
#define DV_HB_GRAPHS DV_HB_NONE
#define DV_BE_METHOD(group, ret, name, params) DV_HB_##group(name, ret hb_##name params;)
#include "../../backend_methods.def"
#undef DV_BE_METHOD

#endif
