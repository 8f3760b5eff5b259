/* The host simulator's block layout, shared with its white-box tests
 * (tests/test_simulator.c), which corrupt memory on purpose, and the seam
 * between host.c, host_mem.c and host_stream.c (memory, streams) and the
 * kernel files (host_kernel.c, host_build.c, host_exec.c, ...:
 * host_kernel_internal.h). */
#ifndef DV_HOST_INTERNAL_H
#define DV_HOST_INTERNAL_H
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "../../core/core.h"
#include "../backend.h"

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

typedef struct hb_state hb_state;

#define HB_FRONT 256 /* guard before the payload; keeps payloads 256-aligned */
#define HB_BACK 64   /* guard after the payload */

typedef struct hb_block {
  _Atomic int refs;      /* owner (1 until freed) + queued operations */
  _Atomic bool freed;    /* mem_free was called */
  bool alias;            /* a device view of host memory (mapped): no guards, no capacity */
  size_t bytes;          /* payload bytes */
  size_t charged;        /* bytes counted against the capacity */
  size_t total;          /* bytes at base (guards included; the size class of a cacheable block) */
  unsigned char *base;   /* allocation start (guards included) */
  unsigned char *data;   /* payload */
  size_t color;          /* fast mode: bytes between the front guard and data (host_mem.c) */
  struct hb_block *prev, *next; /* block list (live or cached) / quarantine list */
  bool live;             /* handed out, not yet freed (under the state's lock) */
  hb_state *st;
  _Atomic int kernel_users; /* running kernels that use it (ASan: guards poisoned meanwhile) */
  /* Fast mode's canaries (host_mem.c): HB_CANARY_NONE until the first
   * launch that uses the block writes them; only written ones are checked. */
  _Atomic unsigned char canary;
  struct hb_shared *shared; /* option host_ipc: the memfd behind base (host_ipc.c), else NULL */
} hb_block;

/* ---- host_ipc.c, for host.c: device memory other processes can map ----
 * With option host_ipc each block lives in its own memfd mapping (base),
 * whose descriptor stays open until the block is destroyed; an IPC handle
 * names it as /proc/<pid>/fd/<fd> with its inode, so a handle whose block
 * is gone (or whose process exited) no longer opens. */
/* Map `total` bytes of a new memfd for b (sets b->shared); NULL on failure. */
unsigned char *hb_shared_alloc(hb_block *b, size_t total);
/* The block is freed: close its descriptor (handles to it are stale now). */
void hb_shared_revoke(hb_block *b);
/* Release b->base: free() or, for a shared block, munmap. */
void hb_base_free(hb_block *b);
dv_status hb_ipc_export(void *state, void *buf, unsigned char *payload);
dv_status hb_ipc_open(void *state, const unsigned char *payload, void **native, size_t *bytes,
                      void **token);
dv_status hb_ipc_close(void *state, void *token);

/* ---- host.c, host_mem.c and host_stream.c, for the kernel files ----
 * Those files call the kernel files (host.c opens and closes them,
 * host_stream.c's workers run launches); the kernel files reach blocks and
 * streams only through this table, which host.c hands to hk_open (so the
 * files never call each other in a circle: scripts/check-layers). */
typedef struct hk_state hk_state; /* the kernel part of the simulator's state */
typedef struct hk_job hk_job;     /* one queued launch */

typedef struct hk_services {
  dv_status (*block_unref)(hb_block *b);
  /* The block's guards (checked mode) or written canaries (fast mode) are intact. */
  bool (*guards_ok)(const hb_block *b);
  /* A launch is about to use the block: fast mode writes its canaries the
   * first time (checked mode's guards are always there). */
  void (*guards_arm)(hb_block *b);
  hb_block *(*alias_new)(hb_state *st, void *ptr, size_t bytes);
  dv_status (*enqueue)(dv_bstream *s, hk_job *l);            /* queue an OP_KERNEL */
  dv_status (*copy_rect)(void *state, dv_bstream *s, const dv_rect *r);
} hk_services;

/* hb_state begins with this, so the kernel files find their part. */
typedef struct hb_state_head {
  hk_state *k;
} hb_state_head;

/* ---- the kernel files, for host.c and host_stream.c (host_exec.c:
 * hk_thread_exit; host_build.c: compiler, modules, kernels; host_kernel.c:
 * the rest) ---- */
dv_status hk_open(hb_state *st, const dv_backend_config *cfg, const hk_services *sv,
                  hk_state **out);
void hk_close(hk_state *k);
/* Run a queued launch on the calling stream worker; msg gets the fault. */
dv_status hk_run(hk_job *l, char *msg, size_t cap);
void hk_launch_free(hk_job *l);
/* A stream worker ends: free the kernel executor it may have set up. */
void hk_thread_exit(void);

dv_status hk_kernel_limits(void *state, dv_klimits *out);
dv_status hk_kernel_target_id(void *state, char *buf, size_t cap);
dv_status hk_module_build(void *state, const dv_build_req *req, dv_bmodule **out, void **image,
                          size_t *image_size, char **log);
dv_status hk_module_load(void *state, const dv_build_req *req, const void *image,
                         size_t image_size, dv_bmodule **out, char **log);
dv_status hk_module_unload(void *state, dv_bmodule *m);
dv_status hk_kernel_get(void *state, dv_bmodule *m, const char *name, dv_bkernel **out);
dv_status hk_kernel_attrs(void *state, dv_bkernel *k, dv_kernel_attrs *out);
dv_status hk_kernel_params(void *state, dv_bkernel *k, dv_bparam *out, size_t cap, size_t *n,
                           const char **sig);
dv_status hk_constant_write(void *state, dv_bmodule *m, dv_bstream *s, size_t offset,
                            dv_memref src, size_t bytes);
dv_status hk_launch(void *state, dv_bstream *s, dv_bkernel *k, const dv_blaunch *l);
dv_status hk_native_context(void *state, void **context, void **device);
dv_status hk_native_stream(void *state, dv_bstream *s, void **handle);
dv_status hk_native_buffer(void *state, void *buf, void **native);
dv_status hk_buffer_wrap(void *state, void *native, size_t bytes, void **buf);
dv_status hk_buffer_unwrap(void *state, void *buf);

#endif
