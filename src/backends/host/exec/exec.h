/* The host simulator's kernel execution (launches, executors, the runtime:
 * exec/exec_internal.h) as the parts above it see it.  host.c: its open
 * and close and the backend table's launch methods, each on the kernel
 * part's own state (host.c keeps it with the device's and the toolchain's:
 * device.h's hb_user).  tools/ (printf capture, the watchdog, the access
 * checks): the hook list below, with a read-only view of a launch and of
 * an executor's running block. */
#ifndef DV_HOST_EXEC_H
#define DV_HOST_EXEC_H
#include <stdarg.h>

#include "../../../core/core.h"
#include "../../backend.h"
#include "../device/device.h"
#include "../toolchain/toolchain.h"

typedef struct hk_state hk_state; /* the kernel part of the simulator's state */

dv_status hk_open(const dv_backend_config *cfg, hk_state **out);
/* The runtime every module's dv__rt points to (toolchain/'s hk_tc_open is given it). */
const dv__host_rt *hk_runtime(void);
void hk_close(hk_state *k);

dv_status hk_kernel_limits(hk_state *k, dv_klimits *out);
dv_status hk_kernel_attrs(hk_state *k, dv_bkernel *kn, dv_kernel_attrs *out);
dv_status hk_launch(hk_state *k, dv_bstream *s, dv_bkernel *kn, const dv_blaunch *bl);

/* ========================================================================== */
/* The tools' interface                                                        */
/* ========================================================================== */

typedef struct hk_job hk_job;   /* one launch */
typedef struct hk_exec hk_exec; /* an executor: an OS thread that runs blocks */

/* A launch as a tool sees it: set when it is made, read-only after
 * (hk_job's first member: hk_job_view). */
typedef struct hk_jview {
  const hk_kview *kern; /* toolchain/'s view of the kernel */
  uint32_t grid[3], block[3];
  uint64_t nblocks;
  int nthreads;
} hk_jview;
static inline const hk_jview *hk_job_view(const hk_job *l) { return (const hk_jview *)(const void *)l; }

/* The running block of an executor (linear index) and its running
 * simulated thread (linear index in the block). */
uint64_t hk_exec_block(const hk_exec *ex);
int hk_exec_thread(const hk_exec *ex);
/* Linear index lin as coordinates in a grid or block of extents dim. */
void hk_coords(uint64_t lin, const uint32_t dim[3], unsigned c[3]);

/* A tool: hooks the executor calls, each given the tool's own `self` and
 * its state of the launch (*slot, NULL until the tool sets it; the slot is
 * the launch's, one per tool).  A hook left NULL is not called; a tool
 * without a state of a launch costs that launch one test per hook. */
#define HK_TOOLS 4
typedef struct hk_tool {
  const char *name;
  void *self;
  /* dv_printf (from the runtime, on an executor, inside the launch's run):
   * the text of one call, n bytes (negative: it cannot be formatted);
   * `small` holds it when n < small_cap, else format fmt with ap again. */
  void (*print)(void *self, _Atomic(void *) *slot, const hk_job *l, const hk_exec *ex,
                const char *small, size_t small_cap, int n, const char *fmt, va_list ap);
  /* The launch has run (on the stream's worker, every executor out of it). */
  void (*finish)(void *self, void *data, const hk_job *l);
  /* The launch is freed. */
  void (*free)(void *self, void *data);
} hk_tool;
/* Plug tool t in (copied) for the launches of k; hk_open's caller, before
 * any launch.  DV_ERR_MISUSE when HK_TOOLS are in already. */
dv_status hk_tool_add(hk_state *k, const hk_tool *t);

#endif
