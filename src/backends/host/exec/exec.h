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

/* Blocks of the launch taken so far (at most nblocks). */
uint64_t hk_job_started(const hk_job *l);
/* Take no more blocks of the launch (those running go on). */
void hk_job_abort(hk_job *l);

/* The running block of an executor (linear index) and its running
 * simulated thread (linear index in the block). */
uint64_t hk_exec_block(const hk_exec *ex);
int hk_exec_thread(const hk_exec *ex);
/* Linear index lin as coordinates in a grid or block of extents dim. */
void hk_coords(uint64_t lin, const uint32_t dim[3], unsigned c[3]);
#define HK_NWAVE_OPS 7
/* The wave operations' names, by dv__wave_* number. */
extern const char *const hk_wave_names[HK_NWAVE_OPS];

/* Stopping an executor's block (the watchdog).  On ex's own thread as it
 * joins a launch (an enter hook): from now on hk_exec_stop may stop it; its
 * signal stops the kernel's code only at a pc in [lo, hi) (lo == hi:
 * anywhere); stop: stop at once.  As it leaves (a leave hook): a stop on
 * its way is ignored.  hk_exec_stop, from another thread: ex's block stops
 * where ex notices it (the runtime, the runner and the scheduler look; its
 * signal stops the kernel's own code); repeat it until ex has left. */
void hk_exec_stoppable(hk_exec *ex, uintptr_t lo, uintptr_t hi, bool stop);
void hk_exec_unstoppable(hk_exec *ex);
void hk_exec_stop(hk_exec *ex);

/* A simulated thread's state. */
typedef enum { HK_T_NEW, HK_T_RUN, HK_T_BAR, HK_T_WAVE, HK_T_EXIT, HK_T_FAULT } hk_tstate;
/* Where a stopped block was (a stopped hook; read-only). */
typedef struct hk_xstop {
  uint64_t block;
  const hk_mview *m;
  int n;         /* its threads */
  int mode;      /* 0: each thread's record says; 1: fast mode's block function runs threads
                    loop_from.. in order, `run` running; 2: region fission ran them */
  int run;       /* the running thread (mode 0, 1), or -1 */
  int loop_from;
  const void *pc; /* where it ran (NULL: not known) */
  bool ret;       /* pc is a return address */
} hk_xstop;
void hk_exec_stopped_at(const hk_exec *ex, hk_xstop *out);
/* Thread j of ex's running block: its state (hk_tstate; HK_T_EXIT or
 * HK_T_NEW when fast mode kept no records), the line it last waited at
 * (with HK_WANT_LINES) and its wave operation (HK_T_WAVE; -1 a wave
 * barrier). */
void hk_exec_thread_at(const hk_exec *ex, int j, int *state, int *line, int *op);

/* A tool: hooks the executor calls, each given the tool's own `self` and
 * its state of the launch (*slot, NULL until the tool sets it; the slot is
 * the launch's, one per tool).  A hook left NULL is not called; a tool
 * without a state of a launch costs that launch one test per hook. */
#define HK_TOOLS 4
/* What a start hook may ask of the launch's run (*want |= ...). */
enum {
  HK_WANT_ONE = 1,   /* executors take its blocks one at a time (hk_job_started is exact) */
  HK_WANT_LINES = 2, /* each thread's record keeps the line it last waited at */
};
typedef struct hk_tool {
  const char *name;
  void *self;
  /* The launch starts to run (on the stream's worker, before its blocks;
   * lanes: the executors that may run them at once).  An error (its
   * message in msg) fails the launch before any block runs; the tools
   * started before it get their stop hooks. */
  dv_status (*start)(void *self, _Atomic(void *) *slot, hk_job *l, int lanes, unsigned *want,
                     char *msg, size_t cap);
  /* An executor joins / leaves the launch's run (on its own thread). */
  void (*enter)(void *self, void *data, hk_exec *ex);
  void (*leave)(void *self, void *data, hk_exec *ex);
  /* ex's block was stopped (hk_exec_stop), before its fibers go. */
  void (*stopped)(void *self, void *data, const hk_exec *ex);
  /* Every executor has left the launch (before its buffers' guards are checked). */
  void (*stop)(void *self, void *data, hk_job *l);
  /* dv_printf (from the runtime, on an executor, inside the launch's run):
   * the text of one call, n bytes (negative: it cannot be formatted);
   * `small` holds it when n < small_cap, else format fmt with ap again. */
  void (*print)(void *self, _Atomic(void *) *slot, const hk_job *l, const hk_exec *ex,
                const char *small, size_t small_cap, int n, const char *fmt, va_list ap);
  /* The launch has run (on the stream's worker, every executor out of it,
   * in the tools' order): its result (an error with its message in msg),
   * unless the launch failed on its own. */
  dv_status (*finish)(void *self, void *data, const hk_job *l, char *msg, size_t cap);
  /* The launch is freed. */
  void (*free)(void *self, void *data);
} hk_tool;
/* Plug tool t in (copied) for the launches of k; hk_open's caller, before
 * any launch.  DV_ERR_MISUSE when HK_TOOLS are in already. */
dv_status hk_tool_add(hk_state *k, const hk_tool *t);

#endif
