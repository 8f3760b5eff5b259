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
  int wave; /* the simulated wave's lanes (option host_wave_size) */
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

/* An executor as a tool sees it: hk_exec's first member (hk_exec_view),
 * written by exec only (but acc_pc and tool[]), read by the tools from
 * the executor's own thread while it runs the launch's blocks. */
#define HK_ARENA_BYTES ((size_t)128 << 10) /* the block's shared arena: limit + redzones + alignment */
#define HK_MAX_SLOTS 256
#define HK_MAX_TAKES 16
#define HK_TOOLS 4
/* A shared array of the running block (or a dynamic array taken from the
 * dynamic area), at arena offset off. */
typedef struct hk_slot {
  size_t off, bytes;
  size_t item;      /* its element's bytes (instrumented modules; else 1) */
  const char *name; /* static string of the kernel's module */
  int line;
} hk_slot;
typedef struct hk_xview {
  hk_job *l;         /* the launch it runs (hk_job_view) */
  const hk_mview *m; /* its module */
  uint64_t block;    /* the running block (linear index) */
  int cur;           /* its running simulated thread (linear index in the block) */
  /* Memory of its own: the fibers' stacks, [stacks, stacks + map_bytes),
   * and the block's shared arena, HK_ARENA_BYTES from arena. */
  unsigned char *stacks;
  size_t map_bytes;
  unsigned char *arena;
  /* The running block's shared arrays (slot 0: the dynamic area, dyn_bytes
   * of it) and the dynamic arrays its threads took (instrumented modules). */
  hk_slot slots[HK_MAX_SLOTS];
  int nslots;
  hk_slot takes[HK_MAX_TAKES];
  int ntakes;
  size_t dyn_bytes;
  /* A tool's runtime entry (hk_exec_lib_enter) sets it: the kernel's
   * instruction it checks (a return address), where a stop that lands in
   * the tool's code says the thread was. */
  const void *volatile acc_pc;
  /* Each tool's state of this executor's share of the running launch
   * (hk_tool_add's index): the tool's enter hook sets it, its leave hook
   * clears it. */
  void *tool[HK_TOOLS];
} hk_xview;
static inline const hk_xview *hk_exec_view(const hk_exec *ex) {
  return (const hk_xview *)(const void *)ex;
}
/* The same, for a tool's writes of acc_pc and its tool[] entry. */
static inline hk_xview *hk_exec_tool_view(hk_exec *ex) { return (hk_xview *)(void *)ex; }

/* This OS thread's executor (NULL: none): a tool's runtime entries find
 * the calling kernel thread's here. */
extern _Thread_local hk_exec *hk_cur;
/* Is p in the threads' records of ex's running block or in its module's
 * dv__self (memory the runtime owns, not the kernel's)? */
bool hk_exec_records(const hk_exec *ex, uintptr_t p);
/* A tool's runtime entry, called from the kernel's code on ex's thread,
 * runs library code between these: enter closes the kernel's fault window
 * (a fault from here on is the library's; a kernel that left too little
 * stack is stopped with its stack overflow first); leave opens it again
 * before the kernel's instruction pc, and stops the block there if a stop
 * is on its way (hk_exec_stop). */
void hk_exec_lib_enter(hk_exec *ex);
void hk_exec_lib_leave(hk_exec *ex, const void *pc);
/* Stop ex's running block (on ex's thread, between hk_exec_lib_enter and
 * leave, or in a hook on it) with the fault msg: the launch fails with
 * DV_ERR_KERNEL_FAULT and msg; the stream and context go on. */
__attribute__((noreturn)) void hk_exec_fault(hk_exec *ex, const char *msg);
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
 * the launch's, one per tool).  A hook left NULL is not called; but for
 * make, start and print (which may set the state), a hook is called only
 * for a tool with a state of the launch, so a launch no tool watches costs
 * a test per tool and hook kind (the block events below: one test per
 * event). */
/* What a start hook may ask of the launch's run (*want |= ...). */
enum {
  HK_WANT_ONE = 1,   /* executors take its blocks one at a time (hk_job_started is exact) */
  HK_WANT_LINES = 2, /* each thread's record keeps the line it last waited at */
};
typedef struct hk_tool {
  const char *name;
  void *self;
  /* The launch is made (hk_launch, on the caller's thread, its arguments
   * as the backend table gives them; before it is queued).  An error
   * (made with dv__error) fails the launch; its free hooks follow. */
  dv_status (*make)(void *self, _Atomic(void *) *slot, hk_job *l, const dv_blaunch *bl);
  /* The launch starts to run (on the stream's worker, before its blocks;
   * lanes: the executors that may run them at once).  An error (its
   * message in msg) fails the launch before any block runs; the tools
   * started before it get their stop hooks. */
  dv_status (*start)(void *self, _Atomic(void *) *slot, hk_job *l, int lanes, unsigned *want,
                     char *msg, size_t cap);
  /* An executor joins / leaves the launch's run (on its own thread; it may
   * set / clears its hk_xview.tool[] entry).  enter false: ex runs none of
   * the launch's blocks (the tools that entered before leave). */
  bool (*enter)(void *self, void *data, hk_exec *ex);
  void (*leave)(void *self, void *data, hk_exec *ex);
  /* The block events, on ex's thread: a block starts; every thread of it
   * passed a barrier (fence: the DV_FENCE_* each named); every lane of
   * wave w passed a wave barrier; a barrier interval ends (a barrier
   * releases the block, or it ends), where pending may stop the block
   * with a fault (true, its report in msg). */
  void (*block)(void *self, void *data, hk_exec *ex);
  void (*barrier)(void *self, void *data, hk_exec *ex, int fence);
  void (*wave)(void *self, void *data, hk_exec *ex, int w);
  bool (*pending)(void *self, void *data, hk_exec *ex, char *msg, size_t cap);
  /* ex's block was stopped (hk_exec_stop), before its fibers go. */
  void (*stopped)(void *self, void *data, const hk_exec *ex);
  /* Every executor has left the launch (before its buffers' guards are
   * checked), or a later tool's start failed. */
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
 * any launch.  *at: its index (its hk_xview.tool[] entry).  DV_ERR_MISUSE
 * when HK_TOOLS are in already. */
dv_status hk_tool_add(hk_state *k, const hk_tool *t, int *at);

#endif
