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
 * (host_call.c) and is queued on the stream like a copy (host.c's enqueue).
 *
 * Running.  The stream's worker runs it (hk_run): it posts the launch to
 * the helper threads when it has more than one block and runs blocks
 * itself until none is left (host_exec.c).  A fault is the stream's error
 * (host_stream.c keeps it with its message): the launch returns it when
 * synchronous, else the stream's next synchronize.  With kernel_check, the
 * guard bytes of every buffer argument are checked after the kernel
 * (global out-of-bounds writes); when devarray is built with
 * AddressSanitizer, the buffers' guards are poisoned while the kernel runs,
 * so ASan reports a bad global access with its stack (and ends the
 * process, as ASan does).  dv_printf's output (host_rt.c) is written to
 * stdout in block and thread order when the launch has run.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "host_kernel_internal.h"

#if DV_HOST_ASAN
#include <sanitizer/asan_interface.h>
#endif

/* ========================================================================== */
/* State                                                                       */
/* ========================================================================== */

dv_status hk_open(hb_state *st, const dv_backend_config *cfg, const hk_services *sv,
                  hk_state **out) {
  *out = NULL;
  hk_state *k = dv__calloc(1, sizeof *k);
  if (!k) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate the host kernel state");
  k->st = st;
  k->sv = sv;
  k->guarded = cfg->host_guard != 0;
  k->fast = !cfg->host_checked;
  k->fission = cfg->host_fission != 0;
  k->check = cfg->kernel_check < 0 ? 0 : cfg->kernel_check > 2 ? 2 : cfg->kernel_check;
  k->check_auto = cfg->kernel_check_auto != 0;
  k->cc_option = dv__strdup(cfg->host_cc ? cfg->host_cc : "");
  k->cflags = dv__strdup(cfg->host_cflags ? cfg->host_cflags : "");
  long pg = sysconf(_SC_PAGESIZE);
  k->page = pg > 0 ? (size_t)pg : 4096;
  size_t fs = cfg->host_fiber_stack ? cfg->host_fiber_stack : ((size_t)128 << 10);
  if (fs < 16384) fs = 16384;
  k->fiber_stack = (fs + k->page - 1) & ~(k->page - 1);
  k->wave = cfg->host_wave_size > 0 ? cfg->host_wave_size : 32;
  k->printf_cap = cfg->host_printf_buffer ? cfg->host_printf_buffer : ((size_t)1 << 20);
  k->timeout = cfg->kernel_timeout > 0 ? cfg->kernel_timeout : 0;
  if (!k->cc_option || !k->cflags) {
    dv__free(k->cc_option);
    dv__free(k->cflags);
    dv__free(k);
    return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate the host kernel state");
  }
  pthread_mutex_init(&k->lock, NULL);
  pthread_mutex_init(&k->pm, NULL);
  pthread_cond_init(&k->pwork, NULL);
  pthread_cond_init(&k->pdone, NULL);
  pthread_mutex_init(&k->wm, NULL);
  pthread_condattr_t ca; /* the watchdog's deadlines are CLOCK_MONOTONIC's */
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&k->wc, &ca);
  pthread_condattr_destroy(&ca);
  *out = k;
  return DV_OK;
}

void hk_close(hk_state *k) {
  if (!k) return;
  pthread_mutex_lock(&k->pm);
  k->stop = true;
  pthread_cond_broadcast(&k->pwork);
  pthread_mutex_unlock(&k->pm);
  for (int i = 0; i < k->nhelpers; i++) pthread_join(k->helpers[i], NULL);
  dv__free(k->helpers);
  hk_wd_close(k);
  if (k->signals) hk_sig_release();
  hk_free_words(k->cc_argv);
  dv__free(k->ident);
  dv__free(k->cc_option);
  dv__free(k->cflags);
  pthread_mutex_destroy(&k->lock);
  pthread_mutex_destroy(&k->pm);
  pthread_cond_destroy(&k->pwork);
  pthread_cond_destroy(&k->pdone);
  pthread_mutex_destroy(&k->wm);
  pthread_cond_destroy(&k->wc);
  dv__free(k);
}


/* ========================================================================== */
/* Launches                                                                    */
/* ========================================================================== */

void hk_launch_free(hk_job *l) {
  if (!l) return;
  hk_access_free(l->acc);
  for (size_t i = 0; i < l->nheld; i++) l->k->sv->block_unref(l->held[i]);
  pthread_mutex_destroy(&l->em);
  pthread_mutex_destroy(&l->pmu);
  dv__free(l->out);
  dv__free(l->recs);
  dv__free(l->types);
  dv__free(l->values);
  dv__free(l->vals);
  dv__free(l->views);
  dv__free(l->held);
  dv__free(l->held_param);
  hk_wd_free(l);
  dv__free(l);
}

dv_status hk_launch(void *state, dv_bstream *s, dv_bkernel *kn, const dv_blaunch *bl) {
  hk_state *k = ((hb_state_head *)state)->k;
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
    pthread_mutex_init(&l->em, NULL);
    pthread_mutex_init(&l->pmu, NULL);
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
  l->k = k;
  l->kern = kn;
  /* The access checks run the per-thread path (no block function). */
  l->blk = k->fast && !kn->m->access ? kn->blk : NULL;
  memcpy(l->grid, bl->grid, sizeof l->grid);
  memcpy(l->block, bl->block, sizeof l->block);
  l->dyn = bl->dynamic_shared;
  l->nblocks = blocks;
  l->nthreads = (int)threads;
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
        if (atomic_load(&b->freed)) {
          hk_launch_free(l);
          return dv__error(DV_ERR_INVALID_ARGUMENT, "kernel %s, argument %d: its device buffer "
                           "was freed", kn->name, param);
        }
        atomic_fetch_add(&b->refs, 1);
        l->held_param[l->nheld] = param;
        l->held[l->nheld++] = b;
        l->vals[j].p = b->data;
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
  if (kn->m->access) {
    rc = hk_access_new(l, bl);
    if (rc) {
      hk_launch_free(l);
      return rc;
    }
  }
  rc = k->sv->enqueue(s, l);
  if (rc) hk_launch_free(l);
  return rc;
}

/* ========================================================================== */
/* Running a launch on the stream's worker                                     */
/* ========================================================================== */

DV_NO_ASAN static void hk_guard_fill(unsigned char *p, size_t n) {
  volatile unsigned char *v = p;
  for (size_t i = 0; i < n; i++) v[i] = HK_GUARD_BYTE;
}

/* The guards of the buffers a launch uses: poisoned for ASan while it runs
 * (checked mode); fast mode's canaries written by a block's first launch. */
static void hk_guards_begin(hk_job *l) {
  if (!l->k->guarded) {
    for (size_t i = 0; i < l->nheld; i++) l->k->sv->guards_arm(l->held[i]);
    return;
  }
#if DV_HOST_ASAN
  for (size_t i = 0; i < l->nheld; i++) {
    hb_block *b = l->held[i];
    if (b->alias || atomic_fetch_add(&b->kernel_users, 1) != 0) continue;
    ASAN_POISON_MEMORY_REGION(b->data - HB_FRONT, HB_FRONT);
    ASAN_POISON_MEMORY_REGION(b->data + b->bytes, HB_BACK);
  }
#else
  (void)l;
#endif
}

/* After the kernel: with checks on, a guard (or fast mode's canary) written
 * is this launch's fault. */
static void hk_guards_end(hk_job *l, bool check) {
  const bool guarded = l->k->guarded;
  if (!guarded && !check) return;
  for (size_t i = 0; i < l->nheld; i++) {
    hb_block *b = l->held[i];
    if (b->alias) continue;
#if DV_HOST_ASAN
    if (guarded && atomic_fetch_sub(&b->kernel_users, 1) == 1) {
      ASAN_UNPOISON_MEMORY_REGION(b->data - HB_FRONT, HB_FRONT);
      ASAN_UNPOISON_MEMORY_REGION(b->data + b->bytes, HB_BACK);
    }
#endif
    if (!check || l->k->sv->guards_ok(b)) continue;
    char decl[96];
    hk_param_text(l->kern->sig, l->held_param[i], decl, sizeof decl);
    char msg[600];
    hk_fmt(msg, sizeof msg,
             "kernel %s wrote outside the %zu-byte device buffer of argument %d (`%s`): its guard "
             "bytes were overwritten (found after the kernel; the block and thread are unknown)",
             l->kern->name, b->bytes, l->held_param[i], decl);
    pthread_mutex_lock(&l->em);
    if (!l->err) {
      l->err = DV_ERR_KERNEL_FAULT;
      hk_fmt(l->msg, sizeof l->msg, "%s", msg);
    }
    pthread_mutex_unlock(&l->em);
    /* Reported here; put the guards back so the free does not report it again. */
    hk_guard_fill(b->data - HB_FRONT, HB_FRONT);
    hk_guard_fill(b->data + b->bytes, HB_BACK);
  }
}

static int hk_rec_cmp(const void *a, const void *b) {
  const hk_rec *x = a, *y = b;
  if (x->block != y->block) return x->block < y->block ? -1 : 1;
  if (x->thread != y->thread) return x->thread < y->thread ? -1 : 1;
  return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* The launch's dv_printf output to stdout: block then thread order, each
 * line after its thread's coordinates; then what did not fit. */
static void hk_print_flush(hk_job *l) {
  if (!l->nrecs && !l->dropped) return;
  qsort(l->recs, l->nrecs, sizeof *l->recs, hk_rec_cmp);
  flockfile(stdout);
  for (size_t r = 0; r < l->nrecs; r++) {
    const hk_rec *rec = &l->recs[r];
    unsigned b[3], t[3];
    hk_coords(rec->block, l->grid, b);
    hk_coords((uint64_t)rec->thread, l->block, t);
    const char *p = l->out + rec->off, *e = p + rec->len;
    while (p < e) {
      const char *nl = memchr(p, '\n', (size_t)(e - p));
      size_t len = nl ? (size_t)(nl - p) : (size_t)(e - p);
      fprintf(stdout, "[block (%u,%u,%u) thread (%u,%u,%u)] ", b[0], b[1], b[2], t[0], t[1], t[2]);
      fwrite(p, 1, len, stdout);
      fputc('\n', stdout);
      p += len + (nl ? 1 : 0);
    }
  }
  if (l->dropped)
    fprintf(stdout, "[devarray] kernel %s: %llu dv_printf call%s (%llu bytes) dropped: the "
            "launch's output is limited to %zu bytes, %d per call besides its text (option "
            "host_printf_buffer)\n", l->kern->name, (unsigned long long)l->dropped,
            l->dropped == 1 ? "" : "s", (unsigned long long)l->dropped_bytes, l->k->printf_cap,
            HK_REC_COST);
  fflush(stdout);
  funlockfile(stdout);
  dv__free(l->out);
  dv__free(l->recs);
  l->out = NULL;
  l->recs = NULL;
  l->out_len = l->out_cap = l->out_used = l->nrecs = l->recs_cap = 0;
  l->dropped = l->dropped_bytes = 0;
}

dv_status hk_run(hk_job *l, char *msg, size_t cap) {
  hk_state *k = l->k;
  hk_exec *ex = hk_exec_here(k);
  if (!ex) {
    snprintf(msg, cap, "kernel %s: the host simulator cannot set up a thread to run it",
             l->kern->name);
    return DV_ERR_HOST_OUT_OF_MEMORY;
  }
  if (l->nblocks > 1 && !hk_pool_start(k)) {
    snprintf(msg, cap, "kernel %s: no memory to start the host simulator's helper threads",
             l->kern->name);
    return DV_ERR_HOST_OUT_OF_MEMORY;
  }
  /* The helpers that will join: with the access checks, a lane each. */
  int want = 0;
  if (l->nblocks > 1) {
    pthread_mutex_lock(&k->pm);
    want = l->nblocks - 1 < (uint64_t)k->nhelpers ? (int)(l->nblocks - 1) : k->nhelpers;
    pthread_mutex_unlock(&k->pm);
  }
  if (l->acc && hk_access_start(l, 1 + want)) {
    snprintf(msg, cap, "kernel %s: no host memory for the access checks' shadow "
             "(kernel_check=on)", l->kern->name);
    return DV_ERR_HOST_OUT_OF_MEMORY;
  }
  hk_sig_acquire(k);
  hk_guards_begin(l);
  bool posted = false;
  hk_wd_begin(l); /* option kernel_timeout: the deadline counts from here */
  /* Blocks taken a chunk at a time (hk_claim): up to 4,096 threads' worth,
   * at most 64 blocks, and at least eight chunks per executor so that the
   * last ones even out.  One at a time with the watchdog (its report says
   * which blocks had started: l->next) and the access checks. */
  l->chunk = 1;
  if (!l->wd_on && !l->acc) {
    uint64_t c = 4096 / (uint64_t)(l->nthreads > 0 ? l->nthreads : 1);
    uint64_t even = l->nblocks / (8 * (uint64_t)(1 + want));
    if (c > 64) c = 64;
    if (c > even) c = even;
    l->chunk = c ? c : 1;
  }
  if (want > 0) {
    pthread_mutex_lock(&k->pm);
    if (k->nhelpers > 0) {
      l->want = want;
      l->jnext = k->jobs;
      k->jobs = l;
      l->listed = true;
      posted = true;
      pthread_cond_broadcast(&k->pwork);
    }
    pthread_mutex_unlock(&k->pm);
  }
  hk_run_blocks(ex, l);
  if (posted) {
    pthread_mutex_lock(&k->pm);
    if (l->listed) {
      for (hk_job **pp = &k->jobs; *pp; pp = &(*pp)->jnext)
        if (*pp == l) {
          *pp = l->jnext;
          break;
        }
      l->listed = false;
    }
    while (l->active) pthread_cond_wait(&k->pdone, &k->pm);
    pthread_mutex_unlock(&k->pm);
  }
  hk_wd_end(l);
  hk_guards_end(l, l->kern->m->check);
  /* No memory is a status, also for the race checks' shadow (the launch ran
   * with part of global memory unchecked). */
  if (!l->err && hk_access_degraded(l->acc)) {
    l->err = DV_ERR_HOST_OUT_OF_MEMORY;
    hk_fmt(l->msg, sizeof l->msg, "kernel %s: no host memory for the race checks' shadow "
           "(kernel_check=on): the launch ran, but part of global memory went unchecked",
           l->kern->name);
  }
  hk_access_stop(l->acc);
  hk_print_flush(l);
  if (l->err) {
    snprintf(msg, cap, "%s", l->msg);
    return l->err;
  }
  return hk_wd_result(l, msg, cap);
}

/* ========================================================================== */
/* Constants, native handles, foreign memory                                   */
/* ========================================================================== */

dv_status hk_constant_write(void *state, dv_bmodule *m, dv_bstream *s, size_t offset,
                            dv_memref src, size_t bytes) {
  if (!m || !s) return dv__error(DV_ERR_NULL_ARGUMENT, "constant write without module or stream");
  if (offset > m->cbytes || bytes > m->cbytes - offset)
    return dv__error(DV_ERR_INVALID_ARGUMENT,
                     "constant write of %zu bytes at offset %zu outside the %zu-byte constant "
                     "buffer of program %s", bytes, offset, m->cbytes, m->name);
  if (!bytes) return DV_OK;
  dv_rect r;
  memset(&r, 0, sizeof r);
  r.src = src;
  r.dst.ptr = m->cbuf + offset;
  r.width = bytes;
  r.height = 1;
  r.depth = 1;
  return ((hb_state_head *)state)->k->sv->copy_rect(state, s, &r);
}

dv_status hk_native_context(void *state, void **context, void **device) {
  (void)state;
  if (context) *context = NULL;
  if (device) *device = NULL;
  return DV_OK;
}

dv_status hk_native_stream(void *state, dv_bstream *s, void **handle) {
  (void)state;
  (void)s;
  if (handle) *handle = NULL;
  return dv__error(DV_ERR_NOT_SUPPORTED,
                   "the host simulator's streams are worker threads with no native handle");
}

dv_status hk_native_buffer(void *state, void *buf, void **native) {
  (void)state;
  if (!buf) return dv__error(DV_ERR_NULL_ARGUMENT, "buffer is NULL");
  *native = ((hb_block *)buf)->data;
  return DV_OK;
}

dv_status hk_buffer_wrap(void *state, void *native, size_t bytes, void **buf) {
  *buf = NULL;
  if (!native && bytes)
    return dv__error(DV_ERR_INVALID_ARGUMENT, "cannot wrap a NULL pointer of %zu bytes", bytes);
  hb_block *b = ((hb_state_head *)state)->k->sv->alias_new(state, native, bytes);
  if (!b) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate a wrapped buffer");
  *buf = b;
  return DV_OK;
}

dv_status hk_buffer_unwrap(void *state, void *buf) {
  hb_block *b = buf;
  if (!b || !b->alias)
    return dv__error(DV_ERR_INVALID_ARGUMENT, "buffer %p was not made by buffer_wrap", buf);
  atomic_store(&b->freed, true);
  return ((hb_state_head *)state)->k->sv->block_unref(b); /* queued work keeps its own refs */
}
