/*
 * The context, the top of the library: creating one resolves the options,
 * chooses and opens a backend, and has each layer make its part of the
 * record from the bottom up (streams, memory, arrays, kernels: each defined
 * in its layer's header, hung off core/core.h's record by a pointer);
 * destroying one takes them down in the reverse order.  Everything else
 * reads the record that this file fills.
 */
#include <stdio.h>
#include <string.h>

#include "../backends/backend.h"
#include "../core/core.h"
#include "../memory/memory.h"
#include "../stream/stream.h"
#include "../array/array.h"
#include "../kernel/kernel_internal.h"

static void dv__backend_config(const dv_optval *opt, const dv_backend *be, bool automatic,
                               dv_backend_config *bc, char *devbuf, size_t cap) {
  memset(bc, 0, sizeof *bc);
  bc->host_memory = (size_t)opt[DV_OPT_HOST_MEMORY].i;
  /* host_mode; what follows it is resolved already (dv__resolve_host_mode). */
  bc->host_checked = strcmp(opt[DV_OPT_HOST_MODE].s, "fast") != 0;
  bc->host_fission = (int)opt[DV_OPT_HOST_FISSION].i;
  bc->host_guard = (int)opt[DV_OPT_HOST_GUARD].i;
  bc->fault_device_alloc = (uint64_t)opt[DV_OPT_FAULT_DEVICE_ALLOC].i;
  bc->fault_copy = (uint64_t)opt[DV_OPT_FAULT_COPY].i;
  bc->host_delay_us = opt[DV_OPT_HOST_DELAY_US].i;
  bc->host_strided = (int)opt[DV_OPT_HOST_STRIDED].i;
  bc->kernel_check = (int)opt[DV_OPT_KERNEL_CHECK].i;
  bc->kernel_check_auto = opt[DV_OPT_KERNEL_CHECK].d != 0;
  bc->host_cc = opt[DV_OPT_HOST_CC].s;
  bc->host_cflags = opt[DV_OPT_HOST_CFLAGS].s;
  bc->host_fiber_stack = (size_t)opt[DV_OPT_HOST_FIBER_STACK].i;
  bc->host_wave_size = (int)opt[DV_OPT_HOST_WAVE_SIZE].i;
  bc->nvrtc_library = opt[DV_OPT_NVRTC_LIBRARY].s;
  bc->hip_arch = opt[DV_OPT_HIP_ARCH].s;
  bc->hiprtc_library = opt[DV_OPT_HIPRTC_LIBRARY].s;
  bc->host_ipc = (int)opt[DV_OPT_HOST_IPC].i;
  bc->staging_chunk = (size_t)opt[DV_OPT_STAGING_CHUNK].i;
  bc->staging_threads = (int)opt[DV_OPT_STAGING_THREADS].i;
  bc->staging_thread_min = (size_t)opt[DV_OPT_STAGING_THREAD_MIN].i;
  bc->host_printf_buffer = (size_t)opt[DV_OPT_HOST_PRINTF_BUFFER].i;
  bc->staging_limit = (size_t)opt[DV_OPT_STAGING_LIMIT].i;
  bc->kernel_timeout = opt[DV_OPT_KERNEL_TIMEOUT].d;
  devbuf[0] = 0;
  /* The backend's own option wins where it was set; then `device`
   * (DV_DEVICE), which names the device of whichever backend is chosen. */
  const dv_optval *any = &opt[DV_OPT_DEVICE];
  if (strcmp(be->name, "opencl") == 0) {
    const dv_optval *own = &opt[DV_OPT_OPENCL_DEVICE];
    snprintf(devbuf, cap, "%s", own->source == DV_SOURCE_DEFAULT && any->s[0] ? any->s : own->s);
  } else if (strcmp(be->name, "cuda") == 0 || strcmp(be->name, "hip") == 0) {
    const dv_optval *own = &opt[strcmp(be->name, "hip") == 0 ? DV_OPT_HIP_DEVICE : DV_OPT_CUDA_DEVICE];
    if (own->source == DV_SOURCE_DEFAULT && any->s[0])
      snprintf(devbuf, cap, "%s", any->s);
    else
      snprintf(devbuf, cap, "%lld", (long long)own->i);
  } else {
    snprintf(devbuf, cap, "%s", any->s); /* the host simulator checks it names its one device */
  }
  bc->device = devbuf;
  /* In automatic mode an OpenCL CPU device is not preferred to the host
   * simulator unless a device was named explicitly. */
  bc->require_gpu = automatic && devbuf[0] == 0;
}

/* Where a backend counts staging memory of its own (the counters are
 * zeroed by dv__stats_init after open; the backend stages nothing before). */
static void dv__backend_counters(dv_context *ctx, dv_backend_config *bc) {
  bc->staging_bytes = &ctx->stats.c[DV_STAT_STAGING];
  bc->staging_hits = &ctx->stats.staging_hits;
  bc->staging_misses = &ctx->stats.staging_misses;
}

/* What follows host_mode where it was left to it: host_guard and
 * kernel_check at "auto", host_cflags empty.  The context keeps the values
 * it runs with, so dv_context_option says them (not "auto"). */
static void dv__resolve_host_mode(dv_optval *opt) {
  bool checked = strcmp(opt[DV_OPT_HOST_MODE].s, "fast") != 0;
  if (opt[DV_OPT_HOST_GUARD].i < 0) opt[DV_OPT_HOST_GUARD].i = checked;
  /* kernel_check: auto is on (bounds and the access checks) in checked mode,
   * off in fast mode; the value says which (d marks one resolved from auto:
   * where the compiler cannot instrument kernels, the host simulator falls
   * back to bounds instead of failing the build). */
  dv_optval *kc = &opt[DV_OPT_KERNEL_CHECK];
  if (kc->i < 0) {
    kc->i = checked ? 2 : 0;
    kc->d = 1;
    snprintf(kc->s, sizeof kc->s, "%s", checked ? "on" : "off");
  }
  if (!opt[DV_OPT_HOST_CFLAGS].s[0])
    snprintf(opt[DV_OPT_HOST_CFLAGS].s, sizeof opt[DV_OPT_HOST_CFLAGS].s, "%s",
             checked ? "-O2" : "-O3 -march=native");
}

static dv_status dv__open_backend(dv_context *ctx) {
  const char *want = ctx->opt[DV_OPT_BACKEND].s;
  char devbuf[sizeof ((dv_optval *)0)->s];
  dv_backend_config bc;
  if (strcmp(want, "auto") != 0) {
    const dv_backend *be = dv__backend_find(want);
    if (!be) return dv__error(DV_ERR_BACKEND_UNAVAILABLE, "no backend named \"%s\"", want);
    dv__backend_config(ctx->opt, be, false, &bc, devbuf, sizeof devbuf);
    dv__backend_counters(ctx, &bc);
    dv_status rc = be->open(&bc, &ctx->bst);
    if (rc) return rc; /* the backend set the detail */
    ctx->be = be;
    ctx->backend_name = be->name;
    return DV_OK;
  }
  /* Automatic: cuda, hip, then an OpenCL GPU, then the host simulator. */
  const dv_backend *be;
  for (size_t i = 0; (be = dv__backend_auto_at(i)) != NULL; i++) {
    dv__backend_config(ctx->opt, be, true, &bc, devbuf, sizeof devbuf);
    dv__backend_counters(ctx, &bc);
    dv_status rc = be->open(&bc, &ctx->bst);
    if (rc == DV_OK) {
      ctx->be = be;
      ctx->backend_name = be->name;
      return DV_OK;
    }
    dv__log(DV_LOG_INFO, "backend %s not used: %s", be->name, dv_last_error());
    if (rc == DV_ERR_HOST_OUT_OF_MEMORY) return rc;
  }
  return dv__error(DV_ERR_BACKEND_UNAVAILABLE, "no backend could be opened");
}

dv_status dv_context_create(const dv_config *cfg, dv_context **out) {
  DV_CHECK_NULL(out);
  *out = NULL;
  DV_CHECK_NOT_IN_CALLBACK();
  dv_context *ctx = dv__calloc(1, sizeof *ctx);
  if (!ctx) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate a context");
  dv__options_resolve(cfg, ctx->opt);
  dv__resolve_host_mode(ctx->opt);
  /* checked mode keeps released handles in the quarantine (core/handle.c) */
  ctx->handles_checked = strcmp(ctx->opt[DV_OPT_HOST_MODE].s, "fast") != 0;
  if (ctx->opt[DV_OPT_LOG_LEVEL].source == DV_SOURCE_API)
    dv__log_set_level((dv_log_level)ctx->opt[DV_OPT_LOG_LEVEL].i);
  /* host-allocation faults are process-wide; a config arms them too */
  if (ctx->opt[DV_OPT_FAULT_HOST_ALLOC].source == DV_SOURCE_API && ctx->opt[DV_OPT_FAULT_HOST_ALLOC].i > 0)
    dv__fault_host_set((uint64_t)ctx->opt[DV_OPT_FAULT_HOST_ALLOC].i);
  dv_status rc = dv__open_backend(ctx);
  if (rc) {
    dv__free(ctx);
    return rc;
  }
  size_t free_b = 0, total_b = 0;
  rc = ctx->be->mem_info(ctx->bst, &free_b, &total_b);
  if (rc) goto fail_backend;
  ctx->total_memory = total_b;
  if (ctx->opt[DV_OPT_NVTX_RANGES].i) dv__nvtx_ranges_enable(); /* a tool listening: ranges from now on */
  dv__pending_limits_set(ctx);
  dv__spin_init(&ctx->lock);
  dv__stats_init(&ctx->stats);
  /* The layers' parts, from the bottom up (each init leaves nothing when
   * it fails; each fini undoes its init). */
  rc = dv__streams_open(ctx);
  if (rc) goto fail_stats;
  rc = dv__memory_init(ctx, cfg);
  if (rc) goto fail_streams;
  rc = dv__arrays_init(ctx);
  if (rc) goto fail_memory;
  rc = dv__kernel_state_init(ctx);
  if (rc) goto fail_arrays;
  dv__log(DV_LOG_INFO, "context on backend %s", ctx->be->name);
  dv__handle_open(&ctx->hdr, DV_HANDLE_CONTEXT, ctx);
  *out = ctx;
  return DV_OK;
fail_arrays:
  dv__arrays_fini(ctx);
fail_memory:
  dv__memory_fini(ctx);
fail_streams:
  dv__streams_close(ctx);
fail_stats:
  dv__stats_destroy(&ctx->stats);
fail_backend:
  ctx->be->close(ctx->bst);
  dv__free(ctx);
  return rc;
}

dv_status dv_context_destroy(dv_context *ctx) {
  if (!ctx) return DV_OK;
  DV_CHECK_HANDLE(ctx, DV_HANDLE_CONTEXT); /* a second destroy: DV_ERR_MISUSE */
  DV_CHECK_NOT_IN_CALLBACK();
  int64_t arrays = (int64_t)atomic_load(&ctx->stats.c[DV_STAT_ARRAYS].current), streams = atomic_load(&ctx->streams->live_streams),
          events = atomic_load(&ctx->streams->live_events), scopes = atomic_load(&ctx->arrays->live_scopes),
          modules = atomic_load(&ctx->kernels->live_modules), programs = atomic_load(&ctx->kernels->live_programs),
          graphs = atomic_load(&ctx->streams->live_graphs);
  if (arrays || streams || events || scopes || modules || programs || graphs)
    return dv__error(DV_ERR_BUSY,
                     "context still has %lld array(s), %lld stream(s), %lld event(s), %lld scope(s), "
                     "%lld kernel program(s), %lld kernel module(s), %lld graph(s)",
                     (long long)arrays, (long long)streams, (long long)events, (long long)scopes,
                     (long long)programs, (long long)modules, (long long)graphs);
  dv_status rc = dv__stream_wait(ctx, NULL);
  dv__spin_lock(&ctx->lock);
  ctx->defer_depth = 0; /* destruction runs every pending free */
  dv__spin_unlock(&ctx->lock);
  /* A flush can queue more (a freed allocation drops its stream): repeat. */
  for (;;) {
    dv_status frc = dv__flush(ctx);
    if (!rc) rc = frc;
    size_t left = 0;
    dv_context_pending_deallocs(ctx, &left, NULL);
    if (left == 0) break;
  }
  /* The layers' parts, from the top down. */
  dv__kernel_state_fini(ctx);
  dv__arrays_fini(ctx);
  dv__memory_fini(ctx); /* the manager returns every cached segment */
  dv__streams_close(ctx);
  ctx->be->close(ctx->bst);
  dv__free(ctx->pending.items);
  dv__stats_destroy(&ctx->stats);
  dv__handle_close(&ctx->hdr, DV_HANDLE_CONTEXT);
  dv__handle_retire(ctx, sizeof *ctx, 0, ctx->handles_checked, NULL);
  return rc;
}

/* The accessors that cannot fail answer as for NULL on a destroyed context. */
static inline bool dv__ctx_ok(const dv_context *ctx, const char *fn) {
  return ctx && !dv__handle_check(&ctx->hdr, DV_HANDLE_CONTEXT, fn);
}

const char *dv_context_backend(const dv_context *ctx) { return dv__ctx_ok(ctx, __func__) ? ctx->be->name : "none"; }

dv_status dv_context_device_info(dv_context *ctx, dv_device_info *out) {
  DV_CHECK_NULL(out);
  memset(out, 0, sizeof *out);
  DV_CHECK_NULL(ctx);
  DV_CHECK_HANDLE(ctx, DV_HANDLE_CONTEXT);
  DV_CHECK_NOT_IN_CALLBACK();
  dv_status rc = ctx->be->device_info(ctx->bst, out);
  if (rc) memset(out, 0, sizeof *out);
  return rc;
}

dv_status dv_memory_info(dv_context *ctx, size_t *free_bytes, size_t *total_bytes) {
  if (free_bytes) *free_bytes = 0;
  if (total_bytes) *total_bytes = 0;
  DV_CHECK_NULL(ctx);
  DV_CHECK_HANDLE(ctx, DV_HANDLE_CONTEXT);
  DV_CHECK_NOT_IN_CALLBACK();
  size_t f = 0, t = 0;
  dv_status rc = ctx->memory->mm.mem_info(ctx->memory->mm_state, &f, &t);
  if (free_bytes) *free_bytes = rc ? 0 : f;
  if (total_bytes) *total_bytes = rc ? 0 : t;
  return rc;
}

dv_status dv_context_synchronize(dv_context *ctx) {
  DV_CHECK_NULL(ctx);
  DV_CHECK_HANDLE(ctx, DV_HANDLE_CONTEXT);
  DV_CHECK_NOT_IN_CALLBACK();
  /* Streams are independent on every backend; the default stream plus the
   * backend's device-wide wait (stream_sync with NULL) covers all of them. */
  return dv__bstream_wait(ctx, NULL);
}

dv_stream *dv_context_default_stream(dv_context *ctx) {
  return dv__ctx_ok(ctx, __func__) ? dv__default_stream(ctx) : NULL;
}
dv_stream *dv_context_legacy_stream(dv_context *ctx) {
  return dv__ctx_ok(ctx, __func__) ? dv__legacy_stream(ctx) : NULL;
}
dv_stream *dv_context_per_thread_stream(dv_context *ctx) {
  return dv__ctx_ok(ctx, __func__) ? dv__per_thread_stream(ctx) : NULL;
}

dv_status dv_context_option(dv_context *ctx, const char *name, char *buf, size_t cap,
                            dv_option_source *source) {
  if (buf && cap) buf[0] = 0;
  if (source) *source = DV_SOURCE_DEFAULT;
  DV_CHECK_NULL(ctx);
  DV_CHECK_HANDLE(ctx, DV_HANDLE_CONTEXT);
  DV_CHECK_NULL(name);
  DV_CHECK_NULL(buf);
  int id = dv__option_lookup(name);
  if (id < 0) return dv__error(DV_ERR_BAD_OPTION, "unknown option \"%s\"", name);
  /* under the lock: the deallocation limits change while the context lives */
  dv__spin_lock(&ctx->lock);
  dv_optval v = ctx->opt[id];
  dv__spin_unlock(&ctx->lock);
  dv__option_format((dv_opt_id)id, &v, buf, cap);
  if (source) *source = v.source;
  return DV_OK;
}

dv_status dv_fault_inject(dv_context *ctx, dv_fault_kind kind, uint64_t k) {
  if (kind == DV_FAULT_HOST_ALLOC) {
    dv__fault_host_set(k);
    return DV_OK;
  }
  DV_CHECK_NULL(ctx);
  DV_CHECK_HANDLE(ctx, DV_HANDLE_CONTEXT);
  if ((unsigned)kind > DV_FAULT_FREE)
    return dv__error(DV_ERR_INVALID_ARGUMENT, "unknown fault kind %d", (int)kind);
  if (!dv__be_has(ctx->be, DV_BCAP_FAULTS))
    return dv__error(DV_ERR_NOT_SUPPORTED, "backend %s has no fault injection", ctx->be->name);
  return ctx->be->fault_inject(ctx->bst, kind, k);
}

int dv_fault_pending(dv_context *ctx, dv_fault_kind kind) {
  /* Backends keep one counter per known kind: an unknown one is never
   * pending, and must not index their tables. */
  if ((unsigned)kind > DV_FAULT_FREE) return 0;
  if (kind == DV_FAULT_HOST_ALLOC) return dv__fault_host_pending();
  if (!dv__ctx_ok(ctx, __func__) || !dv__be_has(ctx->be, DV_BCAP_FAULTS)) return 0;
  return ctx->be->fault_pending(ctx->bst, kind);
}

dv_status dv_context_check_memory(dv_context *ctx) {
  DV_CHECK_NULL(ctx);
  DV_CHECK_HANDLE(ctx, DV_HANDLE_CONTEXT);
  DV_CHECK_NOT_IN_CALLBACK();
  dv_status rc = dv__bstream_wait(ctx, NULL);
  if (rc) return rc;
  return dv__be_has(ctx->be, DV_BCAP_FAULTS) ? ctx->be->check_memory(ctx->bst) : DV_OK;
}

dv_status dv_context_native(dv_context *ctx, void **context, void **device) {
  if (context) *context = NULL;
  if (device) *device = NULL;
  DV_CHECK_NULL(ctx);
  DV_CHECK_HANDLE(ctx, DV_HANDLE_CONTEXT);
  if (!dv__be_has(ctx->be, DV_BCAP_NATIVE))
    return dv__error(DV_ERR_NOT_SUPPORTED, "the %s backend has no native context", ctx->be->name);
  void *c = NULL, *d = NULL;
  dv_status rc = ctx->be->native_context(ctx->bst, &c, &d);
  if (rc) return rc;
  if (context) *context = c;
  if (device) *device = d;
  return DV_OK;
}
