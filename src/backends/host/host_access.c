/*
 * The access checks' dispatch (issue 24, kernel_check=on; host_check.h has
 * the plan).  A module compiled for them (host_build.c: -fsanitize=thread
 * and DV__ACCESS_CHECK) calls kernel.h's hooks around every load, store and
 * atomic of the kernel's code, and each hook calls the runtime's `access`
 * (or `memop` for memcpy, memmove and memset): the table this file gives
 * such a module in place of host_rt.c's (the same entries plus these).
 *
 * An access is classified by its address, cheapest first: the running
 * thread's or any fiber's stack, the threads' records, the module's own
 * memory (its segments: constants, data, string literals; dv__self, its
 * thread-local) and the runtime's table need nothing.  The block's shared
 * arena: the access must lie inside one static shared array or the
 * dynamic area (else memcheck's fault, at the access, host_memcheck.c); a
 * read of bytes no thread of the block wrote is initcheck's fault
 * (host_initcheck.c), a write marks them; then race detection
 * (host_race.c) unless atomic.  One of the launch's arrays: it must lie
 * inside one argument's span, then race detection across the launch
 * unless atomic.  Anything else (past an array's end into no other, a
 * wild pointer) is memcheck's fault.  A fault stops the block as every
 * runtime fault does (host_rt.c's hk_fault_stop): the launch fails with
 * DV_ERR_KERNEL_FAULT and the message, the stream and context go on.
 *
 * The launch's blocks run in parallel, each executor thread one at a time
 * (host_kernel.c), on the per-thread path (no block function, no region
 * fission).  Each executor takes a lane of its own when it joins the
 * launch (hk_access_lane): the state of the block it runs (its view of the
 * race state, init bits, caches), which needs no lock; the launch's arrays
 * and regions are only read; the global race shadow is host_race.c's to
 * guard.  host_exec.c tells a lane when a block starts, when a barrier
 * releases the block and when a wave is released.
 */
#include <dlfcn.h>
#include <link.h>
#include <string.h>

#include "host_access.h"

/* ---- the module ----------------------------------------------------------- */

/* The runtime instrumented modules call: host_rt.c's, plus access and
 * memop (filled once). */
static dv__host_rt hk_acc_rt;
static pthread_once_t hk_acc_once = PTHREAD_ONCE_INIT;
static void hk_rt_access(const void *p, size_t n, int flags, const void *pc);
static void *hk_rt_memop(int op, void *dst, const void *src, int c, size_t n, const void *pc);

static void hk_acc_rt_init(void) {
  hk_acc_rt = hk_rt;
  hk_acc_rt.access = hk_rt_access;
  hk_acc_rt.memop = hk_rt_memop;
}

/* The module's first launch: its segments, and the runtime with the checks
 * (toolchain/). */
static dv_status hk_access_module(const hk_mview *m) {
  pthread_once(&hk_acc_once, hk_acc_rt_init);
  return hk_module_segments(m, &hk_acc_rt);
}

/* ---- a launch -------------------------------------------------------------- */

/* The parameter's name from its text ("DV_ARRAY(float, out)" -> "out"). */
static void hk_param_name(const char *text, char *buf, size_t cap) {
  const char *e = strrchr(text, ')');
  if (!e) e = text + strlen(text);
  while (e > text && !(e[-1] == '_' || (e[-1] >= 'a' && e[-1] <= 'z') ||
                       (e[-1] >= 'A' && e[-1] <= 'Z') || (e[-1] >= '0' && e[-1] <= '9')))
    e--;
  const char *b = e;
  while (b > text && (b[-1] == '_' || (b[-1] >= 'a' && b[-1] <= 'z') ||
                      (b[-1] >= 'A' && b[-1] <= 'Z') || (b[-1] >= '0' && b[-1] <= '9')))
    b--;
  hk_fmt(buf, cap, "%.*s", (int)(e - b), b);
}

void hk_access_free(hk_access *a) {
  if (!a) return;
  hk_access_stop(a);
  dv__free(a->regions);
  dv__free(a->args);
  dv__free(a);
}

dv_status hk_access_new(hk_job *l, const dv_blaunch *bl) {
  dv_status rc = hk_access_module(l->v.kern->m);
  if (rc) return rc;
  size_t na = bl->nargs ? bl->nargs : 1;
  hk_access *a = dv__calloc(1, sizeof *a);
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
    hk_garg *ga = &a->args[a->nargs++];
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
        a->regions[r] = (hk_region){(uintptr_t)hb_block_data(b),
                                    (uintptr_t)hb_block_data(b) + bytes[r]};
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
    hk_param_text(l->v.kern->sig, param, text, sizeof text);
    hk_param_name(text, ga->name, sizeof ga->name);
  }
  dv__free(bytes);
  dv__free(blk);
  l->acc = a;
  return DV_OK;
oom:
  dv__free(bytes);
  dv__free(blk);
  hk_access_free(a);
  return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "kernel %s: no memory for the access checks' "
                   "state (kernel_check=on)", l->v.kern->name);
}

/* The shadows exist only while the launch runs (a queue of launches holds
 * their arguments only: the shared arena's race shadow is 5 MiB a lane). */
dv_status hk_access_start(hk_job *l, int lanes) {
  hk_access *a = l->acc;
  if (lanes < 1) lanes = 1;
  size_t *bytes = dv__calloc(a->nregions ? a->nregions : 1, sizeof *bytes);
  a->lanes = dv__calloc((size_t)lanes, sizeof *a->lanes);
  bool ok = bytes && a->lanes;
  if (ok) {
    a->nlanes = lanes;
    for (size_t r = 0; r < a->nregions; r++) bytes[r] = a->regions[r].hi - a->regions[r].lo;
    for (int i = 0; ok && i < lanes; i++) {
      hk_lane *ln = &a->lanes[i];
      ln->race = i == 0 ? hk_race_new(a->nregions, bytes, HK_ARENA_BYTES, l->v.nthreads, l->k->wave)
                        : hk_race_view(a->lanes[0].race);
      ln->init = hk_init_new(HK_ARENA_BYTES);
      ok = ln->race && ln->init;
    }
  }
  dv__free(bytes);
  atomic_store(&a->lanes_taken, 0);
  if (ok) return DV_OK;
  hk_access_stop(a);
  return DV_ERR_HOST_OUT_OF_MEMORY;
}

void hk_access_stop(hk_access *a) {
  if (!a) return;
  for (int i = 0; a->lanes && i < a->nlanes; i++) {
    hk_race_free(a->lanes[i].race);
    hk_init_free(a->lanes[i].init);
  }
  dv__free(a->lanes);
  a->lanes = NULL;
  a->nlanes = 0;
}

bool hk_access_lane(hk_exec *ex, hk_job *l) {
  hk_access *a = l->acc;
  int i = atomic_fetch_add(&a->lanes_taken, 1);
  ex->lane = i < a->nlanes ? &a->lanes[i] : NULL;
  return ex->lane != NULL;
}

bool hk_access_degraded(const hk_access *a) {
  return a && a->lanes && hk_race_degraded(a->lanes[0].race);
}

/* ---- the block's events (host_exec.c) -------------------------------------- */

void hk_access_block(hk_exec *ex) {
  hk_lane *ln = ex->lane;
  hk_race_block(ln->race, ex->block);
  hk_init_block(ln->init);
  ln->uninit = false;
  ex->acc_pc = NULL;
}

void hk_access_barrier(hk_exec *ex, int fence) { hk_race_barrier(ex->lane->race, fence); }

bool hk_access_pending(hk_exec *ex) {
  hk_lane *ln = ex->lane;
  if (!ln->uninit) return false;
  ln->uninit = false;
  hk_fmt(ex->fault, sizeof ex->fault, "%s", ln->uninit_msg);
  return true;
}

void hk_access_wave(hk_exec *ex, int w) { hk_race_wave(ex->lane->race, w); }

/* ---- an access --------------------------------------------------------------- */

/* Library code from here on (host_rt.c's hk_rt_enter): a fault in it is
 * not the kernel's; a kernel that left too little stack for our frames is
 * stopped with its stack overflow first. */
static inline void hk_acc_enter(hk_exec *ex) {
  if ((uintptr_t)__builtin_frame_address(0) < (uintptr_t)ex->rfib->f.stack_lo + ex->rt_room)
    hk_rt_overflow(ex);
  atomic_signal_fence(memory_order_seq_cst);
  ex->in_kernel = 0;
  atomic_signal_fence(memory_order_seq_cst);
}

/* Back to the kernel's code at pc; where the watchdog stopped the launch
 * (host_watchdog.c), the block stops here, at the kernel's access. */
static inline void hk_acc_leave(hk_exec *ex, const void *pc) {
  atomic_signal_fence(memory_order_seq_cst);
  ex->in_kernel = 1;
  atomic_signal_fence(memory_order_seq_cst);
  if (__builtin_expect(atomic_load_explicit(&ex->stop, memory_order_relaxed), 0))
    hk_rt_timeout(ex, pc);
}

/* A race: the report, then the block stops. */
__attribute__((noreturn)) static void hk_race_fault(hk_exec *ex, const char *what,
                                                    const hk_acc *cur, const hk_race_hit *hit) {
  /* Blocks in parallel: two blocks' accesses are told as a run of the
   * blocks in order finds them, the later block's first, whichever came
   * first here. */
  if (hit->prev.block > cur->block) {
    hk_race_hit h = *hit;
    hk_acc c = h.prev;
    h.prev = *cur;
    hk_race_fault(ex, what, &c, &h);
  }
  char this_who[96], prev_who[96], this_at[160], prev_at[160];
  hk_mc_who(ex, cur->block, cur->thread, this_who, sizeof this_who);
  hk_mc_who(ex, hit->prev.block, hit->prev.thread, prev_who, sizeof prev_who);
  hk_line_of(ex->m, cur->pc, this_at, sizeof this_at);
  hk_line_of(ex->m, hit->prev.pc, prev_at, sizeof prev_at);
  hk_fmt(ex->fault, sizeof ex->fault, "kernel %s: %s race on %s: %s %s it at %s, %s %s it at %s; %s",
         ex->l->v.kern->name, cur->write && hit->prev.write ? "write-write" : "read-write", what,
         this_who, cur->write ? "wrote" : "read", this_at, prev_who,
         hit->prev.write ? "wrote" : "read", prev_at,
         cur->block != hit->prev.block ? "nothing orders the blocks of a launch"
                                       : "no barrier between");
  hk_fault_stop(ex);
}

/* The first read of uninitialized shared memory of the interval (initcheck):
 * its report, kept until the interval ends. */
static __attribute__((noinline)) void hk_acc_uninit(hk_exec *ex, hk_lane *a, size_t first,
                                                    const void *pc) {
  char what[200], who[96], at[160];
  hk_mc_shared_name(ex, first, what, sizeof what);
  hk_mc_who(ex, ex->block, ex->cur, who, sizeof who);
  hk_line_of(ex->m, pc, at, sizeof at);
  hk_fmt(a->uninit_msg, sizeof a->uninit_msg, "kernel %s: read of uninitialized %s by %s at "
         "%s (no thread of the block wrote it before, nor later in that barrier interval)",
         ex->l->v.kern->name, what, who, at);
  a->uninit = true; /* reported at the interval's end, unless a race is first */
}

static __attribute__((noinline, noreturn)) void hk_acc_shared_race(hk_exec *ex, const hk_acc *cur,
                                                                   const hk_race_hit *hit) {
  char what[200];
  hk_mc_shared_name(ex, hit->off, what, sizeof what);
  hk_race_fault(ex, what, cur, hit);
}

/* Does slot s of the running block hold all of [off, off + n)? */
static inline bool hk_acc_in_slot(const hk_exec *ex, int s, size_t off, size_t n) {
  const hk_slot *sl = &ex->slots[s];
  return s < ex->nslots && off >= sl->off && off - sl->off < sl->bytes &&
         n <= sl->bytes - (off - sl->off);
}

static inline void hk_acc_shared(hk_exec *ex, hk_lane *a, uintptr_t p, size_t n, int flags,
                                 const void *pc) {
  const size_t off = p - (uintptr_t)ex->arena;
  /* Inside one shared array (slot 0: the dynamic area)?  The two last found
   * first: a kernel's loop takes turns between a few arrays. */
  if (!hk_acc_in_slot(ex, a->slot[0], off, n) && !hk_acc_in_slot(ex, a->slot[1], off, n)) {
    int s = 0;
    while (s < ex->nslots && !hk_acc_in_slot(ex, s, off, n)) s++;
    if (s == ex->nslots) {
      hk_mc_shared_fault(ex, p, n, flags & dv__acc_write, pc);
      hk_fault_stop(ex);
    }
    a->slot[a->slot_next] = s;
    a->slot_next ^= 1;
  }
  const bool write = flags & dv__acc_write;
  size_t first;
  if (write)
    hk_init_write_i(a->init, off, n);
  else if (!a->uninit && hk_init_read_i(a->init, off, n, &first))
    hk_acc_uninit(ex, a, first, pc);
  if (flags & dv__acc_atomic) return;
  hk_acc cur = {ex->block, ex->cur, pc, write};
  hk_race_hit hit;
  if (DV_UNLIKELY(hk_race_shared(a->race, off, n, &cur, &hit))) hk_acc_shared_race(ex, &cur, &hit);
}

/* Outside the launch's arrays but not a wild pointer (a cold path, before a
 * report): the module's thread-locals (this thread's block of them), and
 * the data of any loaded object (the C library's, another library's), which
 * a kernel's own code may read or write like any C code. */
static bool hk_acc_elsewhere(const hk_exec *ex, uintptr_t p) {
  void *tls = NULL;
  if (ex->m->tls_bytes && dlinfo(ex->m->dl, RTLD_DI_TLS_DATA, &tls) == 0 && tls &&
      p - (uintptr_t)tls < ex->m->tls_bytes)
    return true;
  Dl_info di;
  return dladdr((const void *)p, &di) != 0;
}

static void hk_acc_global(hk_exec *ex, hk_access *a, uintptr_t p, size_t n, int flags,
                          const void *pc) {
  /* Inside one argument's span (the last one hit first)? */
  hk_lane *ln = ex->lane;
  const hk_garg *ga = &a->args[ln->last];
  if (!(a->nargs && ga->region >= 0 && p >= ga->lo && p < ga->hi && n <= ga->hi - p)) {
    ga = NULL;
    for (size_t i = 0; i < a->nargs; i++) {
      const hk_garg *g = &a->args[i];
      if (g->region >= 0 && p >= g->lo && p < g->hi && n <= g->hi - p) {
        ga = g;
        ln->last = (int)i;
        break;
      }
    }
  }
  const bool write = flags & dv__acc_write;
  if (!ga && hk_acc_elsewhere(ex, p)) return;
  if (!ga) {
    hk_mc_global_fault(ex, a, p, n, write, pc);
    hk_fault_stop(ex);
  }
  if (flags & dv__acc_atomic) return;
  const hk_region *r = &a->regions[ga->region];
  hk_acc cur = {ex->block, ex->cur, pc, write};
  hk_race_hit hit;
  if (hk_race_global(ln->race, (size_t)ga->region, p - r->lo, n, &cur, &hit)) {
    char what[200];
    hk_mc_global_name(a, ga->region, hit.off, what, sizeof what);
    hk_race_fault(ex, what, &cur, &hit);
  }
}

/* Memory of the running thread, of the threads' records, of the module or
 * of the runtime: nothing to check. */
static inline bool hk_acc_own(const hk_exec *ex, uintptr_t p) {
  if (p - (uintptr_t)ex->stacks < ex->map_bytes) return true;
  if (p - (uintptr_t)ex->ht < ex->cap * sizeof *ex->ht) return true;
  if (p - (uintptr_t)ex->self < sizeof *ex->self) return true; /* dv__self (thread-local) */
  if (p - (uintptr_t)&hk_acc_rt < sizeof hk_acc_rt) return true;
  const hk_mview *m = ex->m;
  for (int i = 0; i < m->nseg; i++)
    if (p >= m->seg_lo[i] && p < m->seg_hi[i]) return true;
  return false;
}

static void hk_check(hk_exec *ex, uintptr_t p, size_t n, int flags, const void *pc) {
  if (!n) return;
  if (p - (uintptr_t)ex->arena < HK_ARENA_BYTES) {
    hk_acc_shared(ex, ex->lane, p, n, flags, pc);
    return;
  }
  if (hk_acc_own(ex, p)) return;
  hk_acc_global(ex, ex->l->acc, p, n, flags, pc);
}

static void hk_rt_access(const void *ptr, size_t n, int flags, const void *pc) {
  hk_exec *ex = hk_cur;
  if (!ex) return; /* not on an executor (a constructor of the module) */
  ex->acc_pc = pc;
  const uintptr_t p = (uintptr_t)ptr;
  /* The commonest: the thread's own stack, then shared memory, then the
   * thread's record and dv__self. */
  if (p - (uintptr_t)ex->stacks < ex->map_bytes) return;
  hk_lane *a = ex->l && ex->l->acc ? ex->lane : NULL;
  if (!a) return; /* not in a checked launch (never: modules are per launch) */
  if (p - (uintptr_t)ex->arena < HK_ARENA_BYTES && n) {
    hk_acc_enter(ex);
    hk_acc_shared(ex, a, p, n, flags, pc);
    hk_acc_leave(ex, pc);
    return;
  }
  if (p - (uintptr_t)ex->ht < ex->cap * sizeof *ex->ht) return;
  if (p - (uintptr_t)ex->self < sizeof *ex->self) return;
  hk_acc_enter(ex);
  hk_check(ex, p, n, flags, pc);
  hk_acc_leave(ex, pc);
}

static void *hk_rt_memop(int op, void *dst, const void *src, int c, size_t n, const void *pc) {
  hk_exec *ex = hk_cur;
  if (ex && ex->l && ex->l->acc && n) {
    ex->acc_pc = pc;
    hk_acc_enter(ex);
    if (op != dv__mem_set) hk_check(ex, (uintptr_t)src, n, 0, pc);
    hk_check(ex, (uintptr_t)dst, n, dv__acc_write, pc);
    hk_acc_leave(ex, pc);
  }
  /* The work, in the kernel's window again (its ranges were checked). */
  if (op == dv__mem_set) return memset(dst, c, n);
  if (op == dv__mem_move) return memmove(dst, src, n);
  return memcpy(dst, src, n);
}
