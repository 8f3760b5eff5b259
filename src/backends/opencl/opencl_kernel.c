/*
 * The OpenCL backend's kernels: per-context setup (sub-groups), limits,
 * kernels, launches, constant buffers, native handles and foreign buffers.
 * Building and loading modules is opencl_program.c; the built-in strided
 * copy is opencl_copykernel.c; what they share is opencl_kernel.h.
 *
 *  - A module is a cl_program built for the context's device, plus the
 *    module's constant buffer: a read-only cl_mem created from the program's
 *    constant data (none when the program has no constants).  Every kernel
 *    written with DV_KERNEL has two hidden trailing parameters (kernel.h):
 *    `__constant uchar *dv__cbuf` (that buffer, or NULL) and
 *    `__local uchar *dv__dyn_shared` (the launch's dynamic local memory:
 *    max(dynamic_shared, 1) bytes, since OpenCL refuses a 0-byte local
 *    argument).
 *  - Arguments are checked by the kernel layer against the kernel's
 *    declaration before a launch gets here (src/kernel/contract.c).  Programs
 *    are built with -cl-kernel-arg-info; each parameter's address space and
 *    type name come back through kernel_params for debug builds'
 *    cross-check, and since drivers need not keep the address spaces in
 *    program binaries, the image devarray caches carries them.
 *  - Launches: one mutex per cl_kernel, held from the first clSetKernelArg
 *    to clEnqueueNDRangeKernel (the arguments are captured at enqueue), so
 *    launches may come from several threads.  The launch's event becomes the
 *    stream's last command (query, sync, callbacks, events).  A stream holds
 *    a bounded number of launches not yet run (clk_queue_bound).
 *  - DV_BUILD_DEBUG adds -cl-opt-disable (every OpenCL version has it).
 *  - dv_wavebarrier() is sub_group_barrier() where the device has
 *    sub-groups, else the work-group barrier (kernel.h): PoCL 3.1 has none.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "opencl_kernel.h"

#if DV_HAVE_OPENCL_HEADERS

/* src/kernel/copy_kernels.dvk, embedded at build time. */


/* ---- per-context setup -------------------------------------------------------------- */

static bool clk_has_ext(cl_device_id d, const char *ext) {
  size_t n = 0;
  if (cl.clGetDeviceInfo(d, CL_DEVICE_EXTENSIONS, 0, NULL, &n) != CL_SUCCESS || !n) return false;
  char *s = dv__malloc(n + 1);
  if (!s) return false;
  bool found = false;
  if (cl.clGetDeviceInfo(d, CL_DEVICE_EXTENSIONS, n, s, NULL) == CL_SUCCESS) {
    s[n] = 0;
    size_t k = strlen(ext);
    for (char *p = strstr(s, ext); p && !found; p = strstr(p + 1, ext))
      found = (p == s || p[-1] == ' ') && (p[k] == 0 || p[k] == ' ');
  }
  dv__free(s);
  return found;
}

void dv__cl_kernel_init(cl_state *st) {
  pthread_mutex_init(&st->kmu, NULL);
  st->extensions = NULL;
  size_t en = 0;
  if (cl.clGetDeviceInfo(st->device, CL_DEVICE_EXTENSIONS, 0, NULL, &en) == CL_SUCCESS && en &&
      (st->extensions = dv__malloc(en + 1)) != NULL) {
    if (cl.clGetDeviceInfo(st->device, CL_DEVICE_EXTENSIONS, en, st->extensions, NULL) == CL_SUCCESS) {
      st->extensions[en] = 0;
    } else {
      dv__free(st->extensions);
      st->extensions = NULL;
    }
  }
  st->copy_mod = NULL;
  st->copy_status = DV_OK;
  st->addr_bits = 64;
  cl.clGetDeviceInfo(st->device, CL_DEVICE_ADDRESS_BITS, sizeof st->addr_bits, &st->addr_bits, NULL);
  st->wave = 1;
  st->subgroup_fn = NULL;
  /* Sub-groups: cl_khr_subgroups (an extension function) or OpenCL 2.1+
   * core (CL_DEVICE_MAX_NUM_SUB_GROUPS > 0; clGetKernelSubGroupInfo is then
   * looked up in the already loaded ICD loader, which need not export it). */
  if (clk_has_ext(st->device, "cl_khr_subgroups"))
    st->subgroup_fn = cl.clGetExtensionFunctionAddressForPlatform(st->platform, "clGetKernelSubGroupInfoKHR");
  cl_uint nsub = 0;
  if (!st->subgroup_fn &&
      cl.clGetDeviceInfo(st->device, CLK_DEVICE_MAX_NUM_SUB_GROUPS, sizeof nsub, &nsub, NULL) == CL_SUCCESS &&
      nsub > 0) {
    const char *names[] = {"libOpenCL.so.1", "libOpenCL.so"};
    for (size_t i = 0; i < 2 && !st->subgroup_fn; i++) {
      void *h = dlopen(names[i], RTLD_NOW | RTLD_NOLOAD);
      if (h) {
        st->subgroup_fn = dlsym(h, "clGetKernelSubGroupInfo");
        dlclose(h); /* the backend's own handle keeps the library loaded */
      }
    }
  }
  if (st->subgroup_fn) {
    size_t sizes[16], n = 0;
    if (cl.clGetDeviceInfo(st->device, CLK_DEVICE_SUB_GROUP_SIZES_INTEL, sizeof sizes, sizes, &n) == CL_SUCCESS)
      for (size_t i = 0; i < n / sizeof(size_t) && i < 16; i++)
        if ((int)sizes[i] > st->wave) st->wave = (int)sizes[i];
  }
}

void dv__cl_kernel_fini(cl_state *st) {
  if (st->copy_mod) dv__clk_unload(st->copy_mod);
  st->copy_mod = NULL;
  pthread_mutex_destroy(&st->kmu);
  dv__free(st->extensions);
  st->extensions = NULL;
}

/* ---- limits and target ------------------------------------------------------------------ */

dv_status dv__clk_kernel_limits(void *state, dv_klimits *out) {
  cl_state *st = state;
  memset(out, 0, sizeof *out);
  size_t wg = 0, sizes[3] = {0, 0, 0}, params = 0;
  cl_uint dims = 0;
  cl_ulong local = 0, cmax = 0;
  cl_int e = cl.clGetDeviceInfo(st->device, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof wg, &wg, NULL);
  if (!e) e = cl.clGetDeviceInfo(st->device, CL_DEVICE_MAX_WORK_ITEM_DIMENSIONS, sizeof dims, &dims, NULL);
  if (!e && dims >= 3) {
    size_t *all = dv__calloc(dims, sizeof *all);
    if (!all) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate %u work-item sizes", dims);
    e = cl.clGetDeviceInfo(st->device, CL_DEVICE_MAX_WORK_ITEM_SIZES, dims * sizeof *all, all, NULL);
    memcpy(sizes, all, sizeof sizes);
    dv__free(all);
  }
  if (!e) e = cl.clGetDeviceInfo(st->device, CL_DEVICE_LOCAL_MEM_SIZE, sizeof local, &local, NULL);
  if (!e) e = cl.clGetDeviceInfo(st->device, CL_DEVICE_MAX_CONSTANT_BUFFER_SIZE, sizeof cmax, &cmax, NULL);
  if (!e) e = cl.clGetDeviceInfo(st->device, CL_DEVICE_MAX_PARAMETER_SIZE, sizeof params, &params, NULL);
  if (e) return dv__clk_fail(e, "clGetDeviceInfo (kernel limits)");
  out->max_threads_per_block = wg > UINT32_MAX ? UINT32_MAX : (uint32_t)wg;
  for (int i = 0; i < 3; i++) {
    size_t b = sizes[i] < wg ? sizes[i] : wg;
    out->max_block[i] = b > UINT32_MAX ? UINT32_MAX : (uint32_t)b;
    /* dv_block_idx() is an int; the global size grid * block is checked at launch */
    out->max_grid[i] = INT32_MAX;
  }
  out->max_shared_per_block = out->max_shared_per_block_optin = (size_t)local;
  out->max_constant_bytes = (size_t)cmax;
  /* CL_DEVICE_MAX_PARAMETER_SIZE covers every parameter, the two hidden
   * pointers (constant buffer, dynamic local memory) included. */
  size_t hidden = 2 * (st->addr_bits / 8);
  out->max_arg_bytes = params > hidden ? params - hidden : 0; /* the launch's own arguments */
  out->wave_size = st->wave;
  out->predefined = st->extensions;
  return DV_OK;
}


/* The kinds of kernel `name` from the module's metadata (dv__malloc'd), or NULL. */
static char *clk_meta_kinds(const char *meta, const char *name) {
  size_t n = strlen(name);
  for (const char *line = meta; line && *line;) {
    const char *end = strchr(line, '\n');
    if (!end) break;
    if (strncmp(line, name, n) == 0 && line[n] == ' ') {
      size_t k = (size_t)(end - (line + n + 1));
      char *out = dv__malloc(k + 1);
      if (out) {
        memcpy(out, line + n + 1, k);
        out[k] = 0;
      }
      return out;
    }
    line = end + 1;
  }
  return NULL;
}

dv_status dv__clk_kernel_get(void *state, dv_bmodule *m, const char *name, dv_bkernel **out) {
  cl_state *st = state;
  *out = NULL;
  if (!m || !name) return dv__error(DV_ERR_NULL_ARGUMENT, "kernel lookup without a module or a name");
  pthread_mutex_lock(&m->m);
  for (dv_bkernel *k = m->kernels; k; k = k->next)
    if (strcmp(k->name, name) == 0) {
      *out = k;
      pthread_mutex_unlock(&m->m);
      return DV_OK;
    }
  dv_status rc = DV_OK;
  cl_int e;
  dv_bkernel *k = NULL;
  cl_kernel ck = cl.clCreateKernel(m->prog, name, &e);
  if (!ck) {
    rc = e == CL_INVALID_KERNEL_NAME
             ? dv__error(DV_ERR_INVALID_ARGUMENT, "module \"%s\" has no kernel \"%s\"", m->name, name)
             : dv__clk_fail(e, "clCreateKernel");
    goto done;
  }
  k = dv__calloc(1, sizeof *k);
  char *kname = dv__strdup(name), *kinds = clk_meta_kinds(m->meta, name);
  if (!k || !kname) {
    dv__free(kname), dv__free(kinds);
    rc = dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate a kernel");
    goto done;
  }
  k->name = kname;
  cl_uint na = 0;
  cl_ulong local = 0, priv = 0, dev_local = 0;
  size_t wg = 0;
  e = cl.clGetKernelInfo(ck, CL_KERNEL_NUM_ARGS, sizeof na, &na, NULL);
  if (!e) e = cl.clGetDeviceInfo(st->device, CL_DEVICE_LOCAL_MEM_SIZE, sizeof dev_local, &dev_local, NULL);
  /* Asked now, before any argument is set: CL_KERNEL_LOCAL_MEM_SIZE then
   * counts only the local memory the source declares (later it includes the
   * last launch's dynamic local memory). */
  if (!e) e = cl.clGetKernelWorkGroupInfo(ck, st->device, CL_KERNEL_WORK_GROUP_SIZE, sizeof wg, &wg, NULL);
  if (!e) e = cl.clGetKernelWorkGroupInfo(ck, st->device, CL_KERNEL_LOCAL_MEM_SIZE, sizeof local, &local, NULL);
  if (!e) e = cl.clGetKernelWorkGroupInfo(ck, st->device, CL_KERNEL_PRIVATE_MEM_SIZE, sizeof priv, &priv, NULL);
  if (e) {
    dv__free(kinds);
    rc = dv__clk_fail(e, "clGetKernelInfo");
    goto done;
  }
  /* Written with DV_KERNEL: the last two parameters are the hidden ones. */
  bool known = kinds && strlen(kinds) == na && !strchr(kinds, '?');
  if (na < 2 || (known && (kinds[na - 2] != 'c' || kinds[na - 1] != 'l'))) {
    dv__free(kinds);
    rc = dv__error(DV_ERR_KERNEL_ARGUMENT,
                   "kernel \"%s\" of \"%s\" was not declared with DV_KERNEL (it lacks devarray's two hidden trailing "
                   "parameters, __constant and __local)",
                   name, m->name);
    goto done;
  }
  if (known) {
    kinds[na - 2] = 0;
    k->kinds = kinds;
  } else {
    dv__free(kinds);
  }
  k->nargs = na - 2;
  k->wg = wg;
  k->static_local = (size_t)local;
  k->priv = (size_t)priv;
  k->local_limit = (size_t)dev_local;
  k->wave = 1;
  if (st->subgroup_fn) {
    size_t lsz[3] = {wg, 1, 1}, sg = 0;
    clk_subgroup_fn fn;
    memcpy(&fn, &st->subgroup_fn, sizeof fn); /* a function pointer kept as void * */
    if (fn(ck, st->device, CLK_KERNEL_MAX_SUB_GROUP_SIZE_FOR_NDRANGE, sizeof lsz,
                                           lsz, sizeof sg, &sg, NULL) == CL_SUCCESS && sg > 0)
      k->wave = (int)sg;
  }
  /* The constant buffer never changes: set it once, here. */
  e = cl.clSetKernelArg(ck, na - 2, sizeof(cl_mem), m->cbuf ? &m->cbuf : NULL);
  if (e) {
    rc = dv__clk_fail(e, "clSetKernelArg (the constant buffer)");
    goto done;
  }
  k->mod = m;
  k->k = ck;
  pthread_mutex_init(&k->m, NULL);
  k->next = m->kernels;
  m->kernels = k;
  *out = k;
  ck = NULL;
  k = NULL;
done:
  if (ck) cl.clReleaseKernel(ck);
  if (k) {
    dv__free(k->name);
    dv__free((char *)k->kinds);
    dv__free(k);
  }
  pthread_mutex_unlock(&m->m);
  return rc;
}

/* The driver's view of the parameters (kernel arguments info; programs are
 * built with -cl-kernel-arg-info), for the kernel layer's cross-check. */
dv_status dv__clk_kernel_params(void *state, dv_bkernel *k, dv_bparam *out, size_t cap, size_t *n,
                                const char **sig) {
  (void)state;
  *n = 0;
  *sig = NULL;
  if (k->nargs > cap) return dv__error(DV_ERR_NOT_SUPPORTED, "too many parameters to report");
  for (cl_uint i = 0; i < k->nargs; i++) {
    dv_bparam *b = &out[i];
    char c = k->kinds ? k->kinds[i] : '?';
    b->kind = c == 'g' || c == 'c' ? 'b' : c == 'p' ? 'v' : '?';
    b->size = 0;
    b->type[0] = 0;
    if (cl.clGetKernelArgInfo(k->k, i, CL_KERNEL_ARG_TYPE_NAME, sizeof b->type, b->type, NULL) != CL_SUCCESS)
      b->type[0] = 0;
    b->type[sizeof b->type - 1] = 0;
  }
  *n = k->nargs;
  return DV_OK;
}

dv_status dv__clk_kernel_attrs(void *state, dv_bkernel *k, dv_kernel_attrs *out) {
  (void)state;
  memset(out, 0, sizeof *out);
  size_t local = k->local_limit;
  out->max_threads_per_block = k->wg > INT32_MAX ? INT32_MAX : (int)k->wg;
  out->static_shared_bytes = k->static_local;
  out->max_dynamic_shared_bytes = local > k->static_local ? local - k->static_local : 0;
  out->local_bytes_per_thread = k->priv;
  out->constant_bytes = k->mod->cbytes;
  out->registers = -1;
  out->wave_size = k->wave;
  return DV_OK;
}

/* ---- constants ------------------------------------------------------------------------- */

static void CL_CALLBACK clk_free_cb(cl_event ev, cl_int status, void *p) {
  (void)ev, (void)status;
  dv__free(p);
}

dv_status dv__clk_constant_write(void *state, dv_bmodule *m, dv_bstream *s, size_t offset, dv_memref src,
                                 size_t bytes) {
  (void)state;
  if (!bytes) return DV_OK;
  if (!m->cbuf || offset > m->cbytes || bytes > m->cbytes - offset)
    return dv__error(DV_ERR_INVALID_ARGUMENT, "constant write of %zu bytes at %zu past the %zu-byte constant buffer of \"%s\"",
                     bytes, offset, m->cbytes, m->name);
  cl_event ev = NULL;
  cl_int e;
  if (src.buf) {
    e = cl.clEnqueueCopyBuffer(s->q, src.buf, m->cbuf, src.offset, offset, bytes, 0, NULL, &ev);
    if (e) return dv__clk_fail(e, "clEnqueueCopyBuffer (into the constant buffer)");
  } else {
    /* A snapshot of the host bytes, freed when the write is done: the
     * caller's memory may change as soon as this returns. */
    void *copy = dv__malloc(bytes);
    if (!copy) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate %zu bytes of constant data", bytes);
    memcpy(copy, src.ptr, bytes);
    e = cl.clEnqueueWriteBuffer(s->q, m->cbuf, CL_FALSE, offset, bytes, copy, 0, NULL, &ev);
    if (e) {
      dv__free(copy);
      return dv__clk_fail(e, "clEnqueueWriteBuffer (into the constant buffer)");
    }
    if (cl.clSetEventCallback(ev, CL_COMPLETE, clk_free_cb, copy) != CL_SUCCESS) {
      cl.clWaitForEvents(1, &ev);
      dv__free(copy);
    }
  }
  cl_track(s, ev);
  cl.clFlush(s->q);
  return DV_OK;
}

/* ---- launches ----------------------------------------------------------------------------- */

/* The launch queue's bound: a driver keeps host memory for every command it
 * has not run (PoCL ~0.5-0.8 KiB), so with no bound 25,000 asynchronous
 * launches ahead of the device kept ~20 MiB (issue 22 #15).  Every
 * CL_MARK_EVERY-th launch on a stream takes an event; the one that would
 * keep more than CL_MARKS of them first waits for the oldest, as a GPU's
 * full launch queue makes the launching thread wait.  Returns whether this
 * launch takes an event. */
static bool clk_queue_bound(dv_bstream *s) {
  cl_event oldest = NULL;
  pthread_mutex_lock(&s->m);
  bool mark = ++s->launches % CL_MARK_EVERY == 0;
  if (mark && s->nmarks == CL_MARKS) {
    oldest = s->marks[s->mark0];
    s->mark0 = (s->mark0 + 1) % CL_MARKS;
    s->nmarks--;
  }
  pthread_mutex_unlock(&s->m);
  if (oldest) {
    (void)cl.clWaitForEvents(1, &oldest); /* a failed command is the queue's error (synchronize) */
    cl.clReleaseEvent(oldest);
  }
  return mark;
}

/* Keep a launch's event for clk_queue_bound. */
static void clk_queue_mark(dv_bstream *s, cl_event ev) {
  cl_event oldest = NULL;
  pthread_mutex_lock(&s->m);
  if (s->nmarks == CL_MARKS) { /* another thread's launch took the room meanwhile */
    oldest = s->marks[s->mark0];
    s->mark0 = (s->mark0 + 1) % CL_MARKS;
    s->nmarks--;
  }
  s->marks[(s->mark0 + s->nmarks) % CL_MARKS] = ev;
  s->nmarks++;
  pthread_mutex_unlock(&s->m);
  if (oldest) {
    (void)cl.clWaitForEvents(1, &oldest);
    cl.clReleaseEvent(oldest);
  }
}

static dv_status clk_arg_error(const dv_bkernel *k, size_t i, cl_int e) {
  if (e == CL_INVALID_ARG_SIZE || e == CL_INVALID_ARG_VALUE || e == CL_INVALID_MEM_OBJECT)
    return dv__error(DV_ERR_KERNEL_ARGUMENT, "argument %zu of kernel \"%s\" does not fit its parameter: %s (%d)", i,
                     k->name, dv__cl_error_name(e), e);
  return dv__clk_fail(e, "clSetKernelArg");
}

dv_status dv__clk_launch(void *state, dv_bstream *s, dv_bkernel *k, const dv_blaunch *l) {
  cl_state *st = state;
  /* The arguments were checked against the kernel's declaration by the
   * kernel layer (src/kernel/contract.c); the driver checks sizes again. */
  if (l->nargs != k->nargs)
    return dv__error(DV_ERR_KERNEL_ARGUMENT, "kernel \"%s\": %zu lowered arguments for %u parameters",
                     k->name, l->nargs, k->nargs);
  size_t global[3], local[3];
  cl_uint dims = 1;
  uint64_t limit = st->addr_bits >= 64 ? (uint64_t)SIZE_MAX : ((uint64_t)1 << st->addr_bits) - 1;
  for (int d = 0; d < 3; d++) {
    uint64_t g = (uint64_t)l->grid[d] * l->block[d];
    if (l->grid[d] == 0 || l->block[d] == 0 || g > limit)
      return dv__error(DV_ERR_LAUNCH_CONFIG, "grid %u x block %u in dimension %d: %llu work-items (the device's limit is %llu)",
                       l->grid[d], l->block[d], d, (unsigned long long)g, (unsigned long long)limit);
    global[d] = (size_t)g;
    local[d] = l->block[d];
    if (g > 1) dims = (cl_uint)d + 1;
  }
  /* Some drivers (PoCL) take any size: check here, with both numbers. */
  if (l->dynamic_shared > k->local_limit - (k->static_local < k->local_limit ? k->static_local : k->local_limit))
    return dv__error(DV_ERR_LAUNCH_CONFIG,
                     "kernel \"%s\": %zu bytes of static and %zu of dynamic local memory exceed the device's %zu "
                     "(CL_DEVICE_LOCAL_MEM_SIZE)",
                     k->name, k->static_local, l->dynamic_shared, k->local_limit);
  size_t dyn = l->dynamic_shared ? l->dynamic_shared : 1; /* OpenCL refuses 0-byte local arguments */

  cl_int e = CL_SUCCESS;
  dv_status rc = DV_OK;
  cl_event ev = NULL;
  bool mark = clk_queue_bound(s);
  pthread_mutex_lock(&k->m);
  for (size_t i = 0; i < l->nargs && !rc; i++) {
    const dv_barg *a = &l->args[i];
    switch (a->kind) {
      case DV_BARG_BUFFER:
        e = cl.clSetKernelArg(k->k, (cl_uint)i, sizeof(cl_mem), &a->buf);
        break;
      case DV_BARG_VALUE:
        e = cl.clSetKernelArg(k->k, (cl_uint)i, a->size, a->value);
        break;
      case DV_BARG_VIEW:
        e = cl.clSetKernelArg(k->k, (cl_uint)i, sizeof(dv_bkview), a->value);
        break;
      default:
        rc = dv__error(DV_ERR_KERNEL_ARGUMENT, "argument %zu of kernel \"%s\" has an unknown kind %d", i, k->name,
                       (int)a->kind);
    }
    if (!rc && e) rc = clk_arg_error(k, i, e);
  }
  /* (the constant buffer was set once by kernel_get) */
  if (!rc && dyn != k->dyn_set) {
    e = cl.clSetKernelArg(k->k, k->nargs + 1, dyn, NULL);
    if (!e) k->dyn_set = dyn;
    if (e) rc = dv__error(e == CL_INVALID_ARG_SIZE ? DV_ERR_LAUNCH_CONFIG : dv__cl_status(e),
                          "kernel \"%s\": %zu bytes of dynamic local memory refused: %s (%d)", k->name, l->dynamic_shared,
                          dv__cl_error_name(e), e);
  }
  if (!rc) e = cl.clEnqueueNDRangeKernel(s->q, k->k, dims, NULL, global, local, 0, NULL, mark ? &ev : NULL);
  pthread_mutex_unlock(&k->m);
  if (rc) return rc;
  if (e == CL_SUCCESS && ev) clk_queue_mark(s, ev);
  switch (e) {
    case CL_SUCCESS:
      break;
    case CL_INVALID_WORK_GROUP_SIZE:
    case CL_INVALID_WORK_ITEM_SIZE:
    case CL_INVALID_GLOBAL_WORK_SIZE:
    case CL_OUT_OF_RESOURCES:
      return dv__error(DV_ERR_LAUNCH_CONFIG,
                       "OpenCL refused the launch of \"%s\" (grid %ux%ux%u, block %ux%ux%u, %zu bytes of dynamic local "
                       "memory): %s (%d)",
                       k->name, l->grid[0], l->grid[1], l->grid[2], l->block[0], l->block[1], l->block[2],
                       l->dynamic_shared, dv__cl_error_name(e), e);
    case CL_INVALID_KERNEL_ARGS:
      return dv__error(DV_ERR_KERNEL_ARGUMENT, "kernel \"%s\": arguments not all set: %s (%d)", k->name,
                       dv__cl_error_name(e), e);
    default:
      return dv__clk_fail(e, "clEnqueueNDRangeKernel");
  }
  /* No event: the next query enqueues a marker instead (see untracked). */
  atomic_store(&s->untracked, true);
  cl.clFlush(s->q);
  return DV_OK;
}

/* ---- native handles and foreign buffers ------------------------------------------------------ */

dv_status dv__clk_native_context(void *state, void **context, void **device) {
  cl_state *st = state;
  if (context) *context = st->ctx;
  if (device) *device = st->device;
  return DV_OK;
}

dv_status dv__clk_native_stream(void *state, dv_bstream *s, void **handle) {
  (void)state;
  atomic_store(&s->native, true);
  *handle = s->q;
  return DV_OK;
}

dv_status dv__clk_native_buffer(void *state, void *buf, void **native) {
  (void)state;
  *native = buf; /* a buffer handle is the cl_mem itself */
  return DV_OK;
}

dv_status dv__clk_buffer_wrap(void *state, void *native, size_t bytes, void **buf) {
  cl_state *st = state;
  *buf = NULL;
  if (!native) return dv__error(DV_ERR_NULL_ARGUMENT, "the cl_mem to wrap is NULL");
  cl_context c = NULL;
  size_t size = 0;
  cl_mem_object_type type = 0;
  cl_int e = cl.clGetMemObjectInfo(native, CL_MEM_TYPE, sizeof type, &type, NULL);
  if (!e) e = cl.clGetMemObjectInfo(native, CL_MEM_CONTEXT, sizeof c, &c, NULL);
  if (!e) e = cl.clGetMemObjectInfo(native, CL_MEM_SIZE, sizeof size, &size, NULL);
  if (e) return dv__error(DV_ERR_INVALID_ARGUMENT, "not a usable cl_mem: clGetMemObjectInfo failed: %s (%d)",
                          dv__cl_error_name(e), e);
  if (type != CL_MEM_OBJECT_BUFFER) return dv__error(DV_ERR_INVALID_ARGUMENT, "the cl_mem to wrap is not a buffer");
  if (c != st->ctx)
    return dv__error(DV_ERR_BACKEND_MISMATCH, "the cl_mem belongs to another OpenCL context than devarray's");
  if (bytes > size)
    return dv__error(DV_ERR_INVALID_ARGUMENT, "wrapping %zu bytes of a %zu-byte cl_mem", bytes, size);
  e = cl.clRetainMemObject(native);
  if (e) return dv__clk_fail(e, "clRetainMemObject");
  *buf = native;
  return DV_OK;
}

dv_status dv__clk_buffer_unwrap(void *state, void *buf) {
  (void)state;
  cl_int e = cl.clReleaseMemObject(buf); /* our retain only */
  if (e) return dv__clk_fail(e, "clReleaseMemObject");
  return DV_OK;
}
#else
typedef int dv__opencl_kernel_none; /* built without OpenCL headers: nothing here */
#endif /* DV_HAVE_OPENCL_HEADERS */
