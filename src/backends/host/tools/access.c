/*
 * The access checks' dispatch (issue 24, kernel_check=on; check.h has
 * the plan).  A module compiled for them (toolchain/build.c: -fsanitize=thread
 * and DV__ACCESS_CHECK) calls kernel.h's hooks around every load, store and
 * atomic of the kernel's code, and each hook calls the runtime's `access`
 * (or `memop` for memcpy, memmove and memset): the table this file gives
 * such a module in place of exec's (hk_runtime) (the same entries plus these).
 *
 * An access is classified by its address, cheapest first: the running
 * thread's or any fiber's stack, the threads' records, the module's own
 * memory (its segments: constants, data, string literals; dv__self, its
 * thread-local) and the runtime's table need nothing.  The block's shared
 * arena: the access must lie inside one static shared array or the
 * dynamic area (else memcheck's fault, at the access, memcheck.c); a
 * read of bytes no thread of the block wrote is initcheck's fault
 * (initcheck.c), a write marks them; then race detection
 * (race.c) unless atomic.  One of the launch's arrays: it must lie
 * inside one argument's span, then race detection across the launch
 * unless atomic.  Anything else (past an array's end into no other, a
 * wild pointer) is memcheck's fault.  A fault stops the block as every
 * runtime fault does (exec.h's hk_exec_fault): the launch fails with
 * DV_ERR_KERNEL_FAULT and the message, the stream and context go on.
 *
 * It is a tool (exec/exec.h's hk_tool): its make hook reads the launch's
 * arrays, its start hook makes the shadows, and the executor's block
 * events (a block starts, a barrier or a wave barrier releases, a barrier
 * interval ends) drive the checks' state.  The launch's blocks run in
 * parallel, each executor thread one at a time (it asks HK_WANT_ONE), on
 * the per-thread path (no block function, no region fission: exec runs an
 * instrumented module so).  Each executor takes a lane of its own when it
 * joins the launch (the enter hook, into its hk_xview.tool[] entry): the
 * state of the block it runs (its view of the race state, init bits,
 * caches), which needs no lock; the launch's arrays and regions are only
 * read; the global race shadow is race.c's to guard.
 */
#include <dlfcn.h>
#include <link.h>
#include <string.h>

#include "access.h"
#include "tools_internal.h"

/* The tool's index (hk_tool_add), its hk_xview.tool[] entry: the same in
 * every simulator (tools.c plugs the tools in in one order). */
static atomic_int hkt_acc_at = -1;

static inline hkt_lane *hkt_lane_of(const hk_xview *x) {
  return x->tool[atomic_load_explicit(&hkt_acc_at, memory_order_relaxed)];
}

/* ---- the module ----------------------------------------------------------- */

/* The runtime instrumented modules call: exec's (hk_runtime), plus access
 * and memop (filled once). */
static dv__host_rt hkt_acc_rt;
static pthread_once_t hkt_acc_once = PTHREAD_ONCE_INIT;
static void hkt_rt_access(const void *p, size_t n, int flags, const void *pc);
static void *hkt_rt_memop(int op, void *dst, const void *src, int c, size_t n, const void *pc);

static void hkt_acc_rt_init(void) {
  hkt_acc_rt = *hk_runtime();
  hkt_acc_rt.access = hkt_rt_access;
  hkt_acc_rt.memop = hkt_rt_memop;
}

/* The module's first launch: its segments, and the runtime with the checks
 * (toolchain/). */
static dv_status hkt_access_module(const hk_mview *m) {
  pthread_once(&hkt_acc_once, hkt_acc_rt_init);
  return hk_module_segments(m, &hkt_acc_rt);
}

/* ---- a launch -------------------------------------------------------------- */

/* The parameter's name from its text ("DV_ARRAY(float, out)" -> "out"). */
static bool hkt_ident(char c) {
  return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

static void hkt_param_name(const char *text, char *buf, size_t cap) {
  const char *e = strrchr(text, ')');
  if (!e) e = text + strlen(text);
  while (e > text && !hkt_ident(e[-1])) e--;
  const char *b = e;
  while (b > text && hkt_ident(b[-1])) b--;
  hk_fmt(buf, cap, "%.*s", (int)(e - b), b);
}

/* The shadows exist only while the launch runs (a queue of launches holds
 * their arguments only: the shared arena's race shadow is 5 MiB a lane). */
static void hkt_lanes_free(hkt_access *a) {
  for (int i = 0; a->lanes && i < a->nlanes; i++) {
    hk_race_free(a->lanes[i].race);
    hk_init_free(a->lanes[i].init);
  }
  dv__free(a->lanes);
  a->lanes = NULL;
  a->nlanes = 0;
}

static void hkt_access_free(void *self, void *data) {
  (void)self;
  hkt_access *a = data;
  if (!a) return;
  hkt_lanes_free(a);
  dv__free(a->regions);
  dv__free(a->args);
  dv__free(a);
}

/* A launch of an instrumented module: its arrays, from its arguments as
 * the backend table gives them. */
static dv_status hkt_access_make(void *self, _Atomic(void *) *slot, hk_job *l,
                                 const dv_blaunch *bl) {
  const hk_jview *v = hk_job_view(l);
  if (!v->kern->m->access) return DV_OK;
  dv_status rc = hkt_access_module(v->kern->m);
  if (rc) return rc;
  size_t na = bl->nargs ? bl->nargs : 1;
  hkt_access *a = dv__calloc(1, sizeof *a);
  size_t *bytes = dv__calloc(na, sizeof *bytes);
  hb_block **blk = dv__calloc(na, sizeof *blk);
  if (a) {
    a->regions = dv__calloc(na, sizeof *a->regions);
    a->args = dv__calloc(na, sizeof *a->args);
  }
  if (!a || !bytes || !blk || !a->regions || !a->args) goto oom;
  int param = -1;
  for (size_t j = 0; j < bl->nargs; j++) {
    const dv_barg *g = &bl->args[j];
    if (g->kind == DV_BARG_BUFFER ||
        (g->kind == DV_BARG_VALUE && !(j > 0 && bl->args[j - 1].kind == DV_BARG_BUFFER)))
      param++;
    if (g->kind != DV_BARG_BUFFER) continue;
    hkt_garg *ga = &a->args[a->nargs++];
    ga->param = param;
    ga->region = -1;
    hb_block *b = g->buf;
    uintptr_t data = 0;
    if (b) {
      size_t r = 0;
      while (r < a->nregions && blk[r] != b) r++;
      if (r == a->nregions) {
        blk[r] = b;
        bytes[r] = hb_block_bytes(b);
        a->regions[r] =
            (hkt_region){(uintptr_t)hb_block_data(b), (uintptr_t)hb_block_data(b) + bytes[r]};
        a->nregions++;
      }
      ga->region = (int)r;
      data = (uintptr_t)hb_block_data(b);
    }
    int64_t off = 0;
    if (j + 1 < bl->nargs && bl->args[j + 1].kind == DV_BARG_VALUE && bl->args[j + 1].value &&
        bl->args[j + 1].size == sizeof off)
      memcpy(&off, bl->args[j + 1].value, sizeof off);
    ga->base = data + (uintptr_t)off;
    const dv_barray *sp = g->value && g->size == sizeof(dv_barray) ? g->value : NULL;
    if (sp && sp->itemsize && sp->lo <= 0 && sp->hi >= 0) {
      ga->lo = ga->base + (uintptr_t)sp->lo; /* lo <= 0: wraps to base - |lo| */
      ga->hi = ga->base + (uintptr_t)sp->hi;
      ga->item = sp->itemsize;
    } else { /* not known: the whole buffer from the offset on */
      ga->lo = ga->base;
      ga->hi = b ? data + hb_block_bytes(b) : ga->base;
      ga->item = 1;
    }
    char text[128];
    hk_param_text(v->kern->sig, param, text, sizeof text);
    hkt_param_name(text, ga->name, sizeof ga->name);
  }
  dv__free(bytes);
  dv__free(blk);
  atomic_store_explicit(slot, a, memory_order_relaxed);
  (void)self;
  return DV_OK;
oom:
  dv__free(bytes);
  dv__free(blk);
  hkt_access_free(self, a);
  return dv__error(DV_ERR_HOST_OUT_OF_MEMORY,
                   "kernel %s: no memory for the access checks' "
                   "state (kernel_check=on)",
                   v->kern->name);
}

static dv_status hkt_access_start(void *self, _Atomic(void *) *slot, hk_job *l, int lanes,
                                  unsigned *want, char *msg, size_t cap) {
  (void)self;
  hkt_access *a = atomic_load_explicit(slot, memory_order_relaxed);
  if (!a) return DV_OK;
  const hk_jview *v = hk_job_view(l);
  *want |= HK_WANT_ONE; /* a block at a time: the race reports order blocks */
  if (lanes < 1) lanes = 1;
  size_t *bytes = dv__calloc(a->nregions ? a->nregions : 1, sizeof *bytes);
  a->lanes = dv__calloc((size_t)lanes, sizeof *a->lanes);
  a->degraded = false;
  bool ok = bytes && a->lanes;
  if (ok) {
    a->nlanes = lanes;
    for (size_t r = 0; r < a->nregions; r++) bytes[r] = a->regions[r].hi - a->regions[r].lo;
    for (int i = 0; ok && i < lanes; i++) {
      hkt_lane *ln = &a->lanes[i];
      ln->a = a;
      ln->race = i == 0 ? hk_race_new(a->nregions, bytes, HK_ARENA_BYTES, v->nthreads, v->wave)
                        : hk_race_view(a->lanes[0].race);
      ln->init = hk_init_new(HK_ARENA_BYTES);
      ok = ln->race && ln->init;
    }
  }
  dv__free(bytes);
  atomic_store(&a->lanes_taken, 0);
  if (ok) return DV_OK;
  hkt_lanes_free(a);
  snprintf(msg, cap,
           "kernel %s: no host memory for the access checks' shadow "
           "(kernel_check=on)",
           v->kern->name);
  return DV_ERR_HOST_OUT_OF_MEMORY;
}

/* Every executor has left: whether part of global memory went unchecked,
 * then the shadows go. */
static void hkt_access_stop(void *self, void *data, hk_job *l) {
  (void)self, (void)l;
  hkt_access *a = data;
  a->degraded = a->lanes && hk_race_degraded(a->lanes[0].race);
  hkt_lanes_free(a);
}

/* No memory is a status, also for the race checks' shadow (the launch ran
 * with part of global memory unchecked). */
static dv_status hkt_access_finish(void *self, void *data, const hk_job *l, char *msg, size_t cap) {
  (void)self;
  const hkt_access *a = data;
  if (!a->degraded) return DV_OK;
  snprintf(msg, cap,
           "kernel %s: no host memory for the race checks' shadow (kernel_check=on): "
           "the launch ran, but part of global memory went unchecked",
           hk_job_view(l)->kern->name);
  return DV_ERR_HOST_OUT_OF_MEMORY;
}

/* An executor joins the running launch: a lane of its own, or none (it
 * runs none of the launch's blocks: the start hook made one for the
 * launch's thread and each helper that may join). */
static bool hkt_access_enter(void *self, void *data, hk_exec *ex) {
  (void)self;
  hkt_access *a = data;
  int i = atomic_fetch_add(&a->lanes_taken, 1);
  hkt_lane *ln = i < a->nlanes ? &a->lanes[i] : NULL;
  hk_exec_tool_view(ex)->tool[atomic_load_explicit(&hkt_acc_at, memory_order_relaxed)] = ln;
  return ln != NULL;
}

static void hkt_access_leave(void *self, void *data, hk_exec *ex) {
  (void)self, (void)data;
  hk_exec_tool_view(ex)->tool[atomic_load_explicit(&hkt_acc_at, memory_order_relaxed)] = NULL;
}

/* ---- the block's events (exec's scheduler) --------------------------------- */

static void hkt_access_block(void *self, void *data, hk_exec *ex) {
  (void)self, (void)data;
  hk_xview *x = hk_exec_tool_view(ex);
  hkt_lane *ln = hkt_lane_of(x);
  hk_race_block(ln->race, x->block);
  hk_init_block(ln->init);
  ln->uninit = false;
  x->acc_pc = NULL;
}

static void hkt_access_barrier(void *self, void *data, hk_exec *ex, int fence) {
  (void)self, (void)data;
  hk_race_barrier(hkt_lane_of(hk_exec_view(ex))->race, fence);
}

static void hkt_access_wave(void *self, void *data, hk_exec *ex, int w) {
  (void)self, (void)data;
  hk_race_wave(hkt_lane_of(hk_exec_view(ex))->race, w);
}

/* A barrier interval ended: initcheck's report of a read no thread's
 * write came before (one later in the interval would have been a race). */
static bool hkt_access_pending(void *self, void *data, hk_exec *ex, char *msg, size_t cap) {
  (void)self, (void)data;
  hkt_lane *ln = hkt_lane_of(hk_exec_view(ex));
  if (!ln->uninit) return false;
  ln->uninit = false;
  hk_fmt(msg, cap, "%s", ln->uninit_msg);
  return true;
}

dv_status hkt_access_open(const dv_backend_config *cfg, hk_state *k) {
  (void)cfg;
  hk_tool t = {.name = "access checks",
               .make = hkt_access_make,
               .start = hkt_access_start,
               .enter = hkt_access_enter,
               .leave = hkt_access_leave,
               .block = hkt_access_block,
               .barrier = hkt_access_barrier,
               .wave = hkt_access_wave,
               .pending = hkt_access_pending,
               .stop = hkt_access_stop,
               .finish = hkt_access_finish,
               .free = hkt_access_free};
  int at;
  dv_status rc = hk_tool_add(k, &t, &at);
  if (rc) return rc;
  int was = -1;
  if (!atomic_compare_exchange_strong(&hkt_acc_at, &was, at) && was != at)
    return dv__error(DV_ERR_MISUSE,
                     "host simulator: the access checks are tool %d here, "
                     "tool %d in another simulator",
                     at, was);
  return DV_OK;
}

/* ---- an access --------------------------------------------------------------- */

/* A race: the report, then the block stops. */
__attribute__((noreturn)) static void hkt_race_fault(hk_exec *ex, const char *what,
                                                     const hk_acc *cur, const hk_race_hit *hit) {
  /* Blocks in parallel: two blocks' accesses are told as a run of the
   * blocks in order finds them, the later block's first, whichever came
   * first here. */
  if (hit->prev.block > cur->block) {
    hk_race_hit h = *hit;
    hk_acc c = h.prev;
    h.prev = *cur;
    hkt_race_fault(ex, what, &c, &h);
  }
  const hk_xview *x = hk_exec_view(ex);
  char this_who[96], prev_who[96], this_at[160], prev_at[160], msg[700];
  hkt_mc_who(ex, cur->block, cur->thread, this_who, sizeof this_who);
  hkt_mc_who(ex, hit->prev.block, hit->prev.thread, prev_who, sizeof prev_who);
  hk_line_of(x->m, cur->pc, this_at, sizeof this_at);
  hk_line_of(x->m, hit->prev.pc, prev_at, sizeof prev_at);
  hk_fmt(msg, sizeof msg, "kernel %s: %s race on %s: %s %s it at %s, %s %s it at %s; %s",
         hk_job_view(x->l)->kern->name,
         cur->write && hit->prev.write ? "write-write" : "read-write", what, this_who,
         cur->write ? "wrote" : "read", this_at, prev_who, hit->prev.write ? "wrote" : "read",
         prev_at,
         cur->block != hit->prev.block ? "nothing orders the blocks of a launch"
                                       : "no barrier between");
  hk_exec_fault(ex, msg);
}

/* The first read of uninitialized shared memory of the interval (initcheck):
 * its report, kept until the interval ends. */
static __attribute__((noinline)) void hkt_acc_uninit(const hk_exec *ex, hkt_lane *a, size_t first,
                                                     const void *pc) {
  const hk_xview *x = hk_exec_view(ex);
  char what[200], who[96], at[160];
  hkt_mc_shared_name(ex, first, what, sizeof what);
  hkt_mc_who(ex, x->block, x->cur, who, sizeof who);
  hk_line_of(x->m, pc, at, sizeof at);
  hk_fmt(a->uninit_msg, sizeof a->uninit_msg,
         "kernel %s: read of uninitialized %s by %s at "
         "%s (no thread of the block wrote it before, nor later in that barrier interval)",
         hk_job_view(x->l)->kern->name, what, who, at);
  a->uninit = true; /* reported at the interval's end, unless a race is first */
}

static __attribute__((noinline, noreturn)) void hkt_acc_shared_race(hk_exec *ex, const hk_acc *cur,
                                                                    const hk_race_hit *hit) {
  char what[200];
  hkt_mc_shared_name(ex, hit->off, what, sizeof what);
  hkt_race_fault(ex, what, cur, hit);
}

static __attribute__((noinline, noreturn)) void hkt_acc_fault_shared(hk_exec *ex, uintptr_t p,
                                                                     size_t n, bool write,
                                                                     const void *pc) {
  char msg[700];
  hkt_mc_shared_fault(ex, p, n, write, pc, msg, sizeof msg);
  hk_exec_fault(ex, msg);
}

/* Does slot s of the running block hold all of [off, off + n)? */
static inline bool hkt_acc_in_slot(const hk_xview *x, int s, size_t off, size_t n) {
  const hk_slot *sl = &x->slots[s];
  return s < x->nslots && off >= sl->off && off - sl->off < sl->bytes &&
         n <= sl->bytes - (off - sl->off);
}

static inline void hkt_acc_shared(hk_exec *ex, hkt_lane *a, uintptr_t p, size_t n, int flags,
                                  const void *pc) {
  const hk_xview *x = hk_exec_view(ex);
  const size_t off = p - (uintptr_t)x->arena;
  /* Inside one shared array (slot 0: the dynamic area)?  The two last found
   * first: a kernel's loop takes turns between a few arrays. */
  if (!hkt_acc_in_slot(x, a->slot[0], off, n) && !hkt_acc_in_slot(x, a->slot[1], off, n)) {
    int s = 0;
    while (s < x->nslots && !hkt_acc_in_slot(x, s, off, n)) s++;
    if (s == x->nslots) hkt_acc_fault_shared(ex, p, n, flags & dv__acc_write, pc);
    a->slot[a->slot_next] = s;
    a->slot_next ^= 1;
  }
  const bool write = flags & dv__acc_write;
  size_t first;
  if (write)
    hk_init_write_i(a->init, off, n);
  else if (!a->uninit && hk_init_read_i(a->init, off, n, &first))
    hkt_acc_uninit(ex, a, first, pc);
  if (flags & dv__acc_atomic) return;
  hk_acc cur = {x->block, x->cur, pc, write};
  hk_race_hit hit;
  if (DV_UNLIKELY(hk_race_shared(a->race, off, n, &cur, &hit))) hkt_acc_shared_race(ex, &cur, &hit);
}

/* Outside the launch's arrays but not a wild pointer (a cold path, before a
 * report): the module's thread-locals (this thread's block of them), and
 * the data of any loaded object (the C library's, another library's), which
 * a kernel's own code may read or write like any C code. */
static bool hkt_acc_elsewhere(const hk_xview *x, uintptr_t p) {
  void *tls = NULL;
  if (x->m->tls_bytes && dlinfo(x->m->dl, RTLD_DI_TLS_DATA, &tls) == 0 && tls &&
      p - (uintptr_t)tls < x->m->tls_bytes)
    return true;
  Dl_info di;
  return dladdr((const void *)p, &di) != 0;
}

static void hkt_acc_global(hk_exec *ex, hkt_lane *ln, uintptr_t p, size_t n, int flags,
                           const void *pc) {
  const hkt_access *a = ln->a;
  /* Inside one argument's span (the last one hit first)? */
  const hkt_garg *ga = &a->args[ln->last];
  if (!(a->nargs && ga->region >= 0 && p >= ga->lo && p < ga->hi && n <= ga->hi - p)) {
    ga = NULL;
    for (size_t i = 0; i < a->nargs; i++) {
      const hkt_garg *g = &a->args[i];
      if (g->region >= 0 && p >= g->lo && p < g->hi && n <= g->hi - p) {
        ga = g;
        ln->last = (int)i;
        break;
      }
    }
  }
  const bool write = flags & dv__acc_write;
  const hk_xview *x = hk_exec_view(ex);
  if (!ga && hkt_acc_elsewhere(x, p)) return;
  if (!ga) {
    char msg[700];
    hkt_mc_global_fault(ex, a, p, n, write, pc, msg, sizeof msg);
    hk_exec_fault(ex, msg);
  }
  if (flags & dv__acc_atomic) return;
  const hkt_region *r = &a->regions[ga->region];
  hk_acc cur = {x->block, x->cur, pc, write};
  hk_race_hit hit;
  if (hk_race_global(ln->race, (size_t)ga->region, p - r->lo, n, &cur, &hit)) {
    char what[200];
    hkt_mc_global_name(a, ga->region, hit.off, what, sizeof what);
    hkt_race_fault(ex, what, &cur, &hit);
  }
}

/* Memory of the running thread, of the threads' records, of the module or
 * of the runtime: nothing to check. */
static inline bool hkt_acc_own(const hk_exec *ex, uintptr_t p) {
  const hk_xview *x = hk_exec_view(ex);
  if (p - (uintptr_t)x->stacks < x->map_bytes) return true;
  if (hk_exec_records(ex, p)) return true;
  if (p - (uintptr_t)&hkt_acc_rt < sizeof hkt_acc_rt) return true;
  const hk_mview *m = x->m;
  for (int i = 0; i < m->nseg; i++)
    if (p >= m->seg_lo[i] && p < m->seg_hi[i]) return true;
  return false;
}

static void hkt_check(hk_exec *ex, hkt_lane *ln, uintptr_t p, size_t n, int flags, const void *pc) {
  if (!n) return;
  if (p - (uintptr_t)hk_exec_view(ex)->arena < HK_ARENA_BYTES) {
    hkt_acc_shared(ex, ln, p, n, flags, pc);
    return;
  }
  if (hkt_acc_own(ex, p)) return;
  hkt_acc_global(ex, ln, p, n, flags, pc);
}

static void hkt_rt_access(const void *ptr, size_t n, int flags, const void *pc) {
  hk_exec *ex = hk_cur;
  if (!ex) return; /* not on an executor (a constructor of the module) */
  hk_xview *x = hk_exec_tool_view(ex);
  x->acc_pc = pc;
  const uintptr_t p = (uintptr_t)ptr;
  /* The commonest: the thread's own stack, then shared memory, then the
   * thread's record and dv__self. */
  if (p - (uintptr_t)x->stacks < x->map_bytes) return;
  hkt_lane *ln = hkt_lane_of(x);
  if (!ln) return; /* not in a checked launch (never: modules are per launch) */
  if (p - (uintptr_t)x->arena < HK_ARENA_BYTES && n) {
    hk_exec_lib_enter(ex);
    hkt_acc_shared(ex, ln, p, n, flags, pc);
    hk_exec_lib_leave(ex, pc);
    return;
  }
  if (hk_exec_records(ex, p)) return;
  hk_exec_lib_enter(ex);
  hkt_check(ex, ln, p, n, flags, pc);
  hk_exec_lib_leave(ex, pc);
}

static void *hkt_rt_memop(int op, void *dst, const void *src, int c, size_t n, const void *pc) {
  hk_exec *ex = hk_cur;
  hkt_lane *ln = ex ? hkt_lane_of(hk_exec_view(ex)) : NULL;
  if (ln && n) {
    hk_exec_tool_view(ex)->acc_pc = pc;
    hk_exec_lib_enter(ex);
    if (op != dv__mem_set) hkt_check(ex, ln, (uintptr_t)src, n, 0, pc);
    hkt_check(ex, ln, (uintptr_t)dst, n, dv__acc_write, pc);
    hk_exec_lib_leave(ex, pc);
  }
  /* The work, in the kernel's window again (its ranges were checked). */
  if (op == dv__mem_set) return memset(dst, c, n);
  if (op == dv__mem_move) return memmove(dst, src, n);
  return memcpy(dst, src, n);
}
