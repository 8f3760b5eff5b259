/*
 * The host simulator's kernels: the kernel state of a context, launches,
 * and running a launch on the stream worker that takes it.  The compiler
 * and modules are host_build.c's, executors and signals host_exec.c's,
 * the call itself host_call.c's, the runtime kernels call host_rt.c's
 * (host_kernel_internal.h shows how they fit).
 *
 * Launches.  The kernel layer has checked a launch's arguments against the
 * kernel's declaration (src/kernel/contract.c); a launch checks the grid,
 * block and shared memory against the simulator's limits, takes a
 * reference on every buffer it uses, sorts its arguments for the call once
 * (host_call.c) and is queued on the stream as a task (device.h's
 * hb_enqueue_task: {hk_task_run, hk_task_free}).
 *
 * Running.  The stream's worker runs it (hk_task_run): it posts the launch to
 * the helper threads when it has more than one block and runs blocks
 * itself until none is left (host_exec.c).  A fault is the stream's error
 * (device/stream.c keeps it with its message): the launch returns it when
 * synchronous, else the stream's next synchronize.  A synchronous launch
 * on an idle stream is run by the calling thread instead, on the executor
 * the state lends it (lend.c), and returns its fault itself.  With kernel_check, the
 * guard bytes of every buffer argument are checked after the kernel
 * (global out-of-bounds writes); when devarray is built with
 * AddressSanitizer, the buffers' guards are poisoned while the kernel runs,
 * so ASan reports a bad global access with its stack (and ends the
 * process, as ASan does).  The tools (tools/: printf capture, ...) are
 * called through their hooks (hk_tool_add): a launch holds each one's
 * state of it, and is given to their finish hooks when it has run.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "exec_internal.h"


/* ========================================================================== */
/* State                                                                       */
/* ========================================================================== */

dv_status hk_open(const dv_backend_config *cfg, hk_state **out) {
  *out = NULL;
  hk_state *k = dv__calloc(1, sizeof *k);
  if (!k) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate the host kernel state");
  k->fast = !cfg->host_checked;
  long pg = sysconf(_SC_PAGESIZE);
  k->page = pg > 0 ? (size_t)pg : 4096;
  size_t fs = cfg->host_fiber_stack ? cfg->host_fiber_stack : ((size_t)128 << 10);
  if (fs < 16384) fs = 16384; /* toolchain/'s hk_tc_open: the same */
  k->fiber_stack = (fs + k->page - 1) & ~(k->page - 1);
  k->wave = cfg->host_wave_size > 0 ? cfg->host_wave_size : 32;
  hk_pool_init(k);
  *out = k;
  return DV_OK;
}

void hk_close(hk_state *k) {
  if (!k) return;
  hk_pool_close(k);
  hk_exec_lent_free(k);
  if (k->signals) hk_sig_release();
  dv__free(k);
}


/* The simulator's limits, for the kernel layer. */
dv_status hk_kernel_limits(hk_state *k, dv_klimits *out) {
  memset(out, 0, sizeof *out);
  out->max_threads_per_block = HK_MAX_THREADS;
  out->max_block[0] = 1024, out->max_block[1] = 1024, out->max_block[2] = 64;
  out->max_grid[0] = 2147483647u, out->max_grid[1] = 65535, out->max_grid[2] = 65535;
  out->max_shared_per_block = HK_SHARED_LIMIT;
  out->max_shared_per_block_optin = HK_SHARED_LIMIT;
  out->max_constant_bytes = HK_CONST_LIMIT;
  out->max_arg_bytes = 0;
  out->wave_size = k->wave;
  return DV_OK;
}

dv_status hk_kernel_attrs(hk_state *k, dv_bkernel *kn, dv_kernel_attrs *out) {
  const hk_kview *kv = hk_kernel_view(kn);
  memset(out, 0, sizeof *out);
  out->max_threads_per_block = HK_MAX_THREADS;
  out->static_shared_bytes = 0; /* known only when a block runs */
  out->max_dynamic_shared_bytes = HK_SHARED_LIMIT;
  out->local_bytes_per_thread = 0;
  out->constant_bytes = kv->m->cbytes;
  out->registers = -1;
  out->wave_size = k->wave;
  return DV_OK;
}

/* ========================================================================== */
/* Launches                                                                    */
/* ========================================================================== */

static void hk_launch_free(hk_job *l) {
  if (!l) return;
  for (size_t i = 0; i < l->nheld; i++) hb_block_unref(l->held[i]);
  pthread_mutex_destroy(&l->em);
  hk_tools_free(l); /* the tools' states of it */
  dv__free(l->types);
  dv__free(l->values);
  dv__free(l->vals);
  dv__free(l->views);
  dv__free(l->held);
  dv__free(l->held_param);
  dv__free(l);
}

static dv_status hk_task_run(void *task, char *msg, size_t cap);
static void hk_task_free(void *task) { hk_launch_free(task); }
/* A launch is a stream's task (device.h). */
static const hb_task_ops hk_task = {.run = hk_task_run, .free = hk_task_free};

dv_status hk_launch(hk_state *k, dv_bstream *s, dv_bkernel *bk, const dv_blaunch *bl) {
  const hk_kview *kn = bk ? hk_kernel_view(bk) : NULL;
  if (!s || !kn || !bl) return dv__error(DV_ERR_NULL_ARGUMENT, "launch without stream, kernel or config");
  uint64_t threads = 1, blocks = 1;
  static const uint32_t maxb[3] = {1024, 1024, 64}, maxg[3] = {2147483647u, 65535, 65535};
  for (int d = 0; d < 3; d++) {
    if (bl->block[d] < 1 || bl->block[d] > maxb[d] || bl->grid[d] < 1 || bl->grid[d] > maxg[d])
      return dv__error(DV_ERR_LAUNCH_CONFIG,
                       "kernel %s: grid (%u,%u,%u) of blocks (%u,%u,%u) is outside the host "
                       "simulator's limits", kn->name, bl->grid[0], bl->grid[1], bl->grid[2],
                       bl->block[0], bl->block[1], bl->block[2]);
    threads *= bl->block[d];
    blocks *= bl->grid[d];
  }
  if (threads > HK_MAX_THREADS)
    return dv__error(DV_ERR_LAUNCH_CONFIG, "kernel %s: %llu threads per block; the limit is %d",
                     kn->name, (unsigned long long)threads, HK_MAX_THREADS);
  if (bl->dynamic_shared > HK_SHARED_LIMIT)
    return dv__error(DV_ERR_LAUNCH_CONFIG,
                     "kernel %s: %zu bytes of dynamic shared memory; the limit is %zu", kn->name,
                     bl->dynamic_shared, HK_SHARED_LIMIT);
  if (bl->nargs && !bl->args) return dv__error(DV_ERR_NULL_ARGUMENT, "launch arguments are NULL");

  hk_job *l = dv__calloc(1, sizeof *l);
  size_t na = bl->nargs ? bl->nargs : 1;
  if (l) {
    l->k = k;
    pthread_mutex_init(&l->em, NULL);
    l->types = dv__calloc(na, sizeof *l->types);
    l->values = dv__calloc(na, sizeof *l->values);
    l->vals = dv__calloc(na, sizeof *l->vals);
    l->views = dv__calloc(na, sizeof *l->views);
    l->held = dv__calloc(na, sizeof *l->held);
    l->held_param = dv__calloc(na, sizeof *l->held_param);
  }
  if (!l || !l->types || !l->values || !l->vals || !l->views || !l->held || !l->held_param) {
    hk_launch_free(l);
    return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate a kernel launch");
  }
  dv_status rc = hk_arg_types(kn, bl, l->types);
  if (rc) {
    hk_launch_free(l);
    return rc;
  }
  l->v.kern = kn;
  /* The access checks run the per-thread path (no block function). */
  l->blk = k->fast && !kn->m->access ? kn->blk : NULL;
  memcpy(l->v.grid, bl->grid, sizeof l->v.grid);
  memcpy(l->v.block, bl->block, sizeof l->v.block);
  l->dyn = bl->dynamic_shared;
  l->v.nblocks = blocks;
  l->v.nthreads = (int)threads;
  l->v.wave = k->wave;
  l->nargs = bl->nargs;
  int param = -1;
  for (size_t j = 0; j < bl->nargs; j++) {
    const dv_barg *a = &bl->args[j];
    /* A buffer starts an array argument (its offset and view follow); any
     * other value starts a scalar one. */
    if (a->kind == DV_BARG_BUFFER ||
        (a->kind == DV_BARG_VALUE && !(j > 0 && bl->args[j - 1].kind == DV_BARG_BUFFER)))
      param++;
    switch (a->kind) {
      case DV_BARG_BUFFER: {
        hb_block *b = a->buf;
        if (!b) { /* an empty array owns no memory */
          l->vals[j].p = NULL;
          l->values[j] = &l->vals[j];
          break;
        }
        unsigned char *data;
        if (!hb_block_hold(b, &data)) {
          hk_launch_free(l);
          return dv__error(DV_ERR_INVALID_ARGUMENT, "kernel %s, argument %d: its device buffer "
                           "was freed", kn->name, param);
        }
        l->held_param[l->nheld] = param;
        l->held[l->nheld++] = b;
        l->vals[j].p = data;
        l->values[j] = &l->vals[j];
        break;
      }
      case DV_BARG_VALUE:
        memcpy(l->vals[j].raw, a->value, a->size);
        l->values[j] = &l->vals[j];
        break;
      case DV_BARG_VIEW:
        memcpy(&l->views[j], a->value, sizeof(dv_bkview));
        l->values[j] = &l->views[j];
        break;
    }
  }
  if (ffi_prep_cif(&l->cif, FFI_DEFAULT_ABI, (unsigned)l->nargs, &ffi_type_void, l->types) !=
      FFI_OK) {
    hk_launch_free(l);
    return dv__error(DV_ERR_KERNEL_ARGUMENT, "kernel %s: libffi cannot build this call",
                     kn->name);
  }
  hk_flat_build(l);
  rc = hk_tools_make(l, bl); /* the access checks: the launch's arrays */
  if (rc) {
    hk_launch_free(l);
    return rc;
  }
  /* A synchronous launch on an idle stream runs here (lend.c says why). */
  if (bl->flags & DV_COPY_SYNC) {
    hk_lend save;
    int lent = hk_exec_lend(k, &save);
    if (lent < 0) { /* reported, never swallowed (test_host_alloc_failures) */
      hk_launch_free(l);
      return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "kernel %s: the host simulator cannot set up "
                       "the calling thread to run it", kn->name);
    }
    if (lent) {
      char msg[768];
      msg[0] = 0;
      bool ran = hb_task_try_inline(s, &hk_task, l, msg, sizeof msg, &rc);
      hk_exec_unlend(k, &save);
      if (ran) {
        hk_launch_free(l);
        return rc ? dv__error(rc, "%s", msg) : DV_OK;
      }
    }
  }
  rc = hb_enqueue_task(s, &hk_task, l);
  if (rc) hk_launch_free(l);
  return rc;
}

/* ========================================================================== */
/* Running a launch on the stream's worker                                     */
/* ========================================================================== */

/* The buffers a launch uses, around its run: device.h's hb_kernel_begin
 * and hb_kernel_end (the guards poisoned for ASan in checked mode, fast
 * mode's canaries written by a block's first launch); with checks on, a
 * guard (or fast mode's canary) written is this launch's fault. */
static void hk_guards_begin(hk_job *l) {
  for (size_t i = 0; i < l->nheld; i++) hb_kernel_begin(l->held[i]);
}

static void hk_guards_end(hk_job *l, bool check) {
  for (size_t i = 0; i < l->nheld; i++) {
    hb_block *b = l->held[i];
    if (hb_kernel_end(b, check)) continue;
    char decl[96];
    hk_param_text(l->v.kern->sig, l->held_param[i], decl, sizeof decl);
    char msg[600];
    hk_fmt(msg, sizeof msg,
             "kernel %s wrote outside the %zu-byte device buffer of argument %d (`%s`): its guard "
             "bytes were overwritten (found after the kernel; the block and thread are unknown)",
             l->v.kern->name, hb_block_bytes(b), l->held_param[i], decl);
    pthread_mutex_lock(&l->em);
    if (!l->err) {
      l->err = DV_ERR_KERNEL_FAULT;
      hk_fmt(l->msg, sizeof l->msg, "%s", msg);
    }
    pthread_mutex_unlock(&l->em);
  }
}

static dv_status hk_task_run(void *task, char *msg, size_t cap) {
  hk_job *l = task;
  hk_state *k = l->k;
  hk_exec *ex = hk_exec_here(k);
  if (!ex) {
    snprintf(msg, cap, "kernel %s: the host simulator cannot set up a thread to run it",
             l->v.kern->name);
    return DV_ERR_HOST_OUT_OF_MEMORY;
  }
  if (l->v.nblocks > 1 && !hk_pool_start(k)) {
    snprintf(msg, cap, "kernel %s: no memory to start the host simulator's helper threads",
             l->v.kern->name);
    return DV_ERR_HOST_OUT_OF_MEMORY;
  }
  /* The helpers that will join, and the tools (the access checks: a lane
   * for each executor; the watchdog: the deadline counts from here). */
  int want = hk_pool_want(k, l->v.nblocks);
  dv_status trc = hk_tools_start(l, 1 + want, msg, cap);
  if (trc) return trc;
  hk_sig_acquire(k);
  hk_guards_begin(l);
  bool posted = false;
  /* Blocks taken a chunk at a time (hk_claim): up to 4,096 threads' worth,
   * at most 64 blocks, and at least eight chunks per executor so that the
   * last ones even out.  One at a time when a tool asks (the watchdog: its
   * report says which blocks had started, hk_job_started; the access
   * checks). */
  l->chunk = 1;
  if (!(l->tflags & HK_WANT_ONE)) {
    uint64_t c = 4096 / (uint64_t)(l->v.nthreads > 0 ? l->v.nthreads : 1);
    uint64_t even = l->v.nblocks / (8 * (uint64_t)(1 + want));
    if (c > 64) c = 64;
    if (c > even) c = even;
    l->chunk = c ? c : 1;
  }
  if (want > 0) posted = hk_pool_post(k, l, want);
  hk_run_blocks(ex, l);
  if (posted) hk_pool_done(k, l);
  hk_tools_stop(l);
  hk_guards_end(l, l->v.kern->m->check);
  trc = hk_tools_finish(l, msg, cap);
  if (l->err) {
    snprintf(msg, cap, "%s", l->msg);
    trc = l->err;
  }
  /* A bug in the kernel is a report for `devarray check` too, whether or
   * not the program reads the status (core's report channel). */
  if (trc == DV_ERR_KERNEL_FAULT || trc == DV_ERR_KERNEL_TIMEOUT) dv__report("kernel", trc, msg);
  return trc;
}
