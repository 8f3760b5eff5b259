/*
 * Kernels in the CUDA family's core, native handles, foreign memory, and the
 * built-in strided-copy kernels.
 *
 *  - Build: the driver's compiler (st->drv->kops: NVRTC in ../cuda/cuda.c,
 *    to CUBIN, or PTX when the device is newer than NVRTC; hipRTC in
 *    ../hip/hiprtc.c, to HSACO) gives an image of a kind the module cache
 *    keeps with a marker saying which.
 *  - Load: cuModuleLoadDataEx with the JIT error log captured; then the
 *    constant buffer dv__cbuf (declared by the prelude) is found with
 *    cuModuleGetGlobal and filled with the program's constant data on the
 *    context's private non-blocking stream (never the legacy stream, which
 *    would wait for every blocking stream of the primary context).
 *  - Launch: one pointer per parameter (cuLaunchKernel copies the values);
 *    static plus dynamic shared memory beyond the device's default per-block
 *    limit opts in with CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, up
 *    to the opt-in limit (not on a driver with kops->no_shared_optin).
 *  - Strided copies between device buffers run src/kernel/copy_kernels.dvk,
 *    precompiled (CUDA: ../cuda/copy_kernels.ptx, embedded) or compiled once
 *    per process (HIP) -- the driver's kops->copy_image -- and loaded once
 *    per context.  If that module cannot be loaded (a driver older than the
 *    PTX), the planner's staging through the host stands in.
 */
#include <stdio.h>
#include <string.h>

#include "fam.h"

struct dv_bkernel {
  struct dv_bkernel *next;
  struct dv_bmodule *m;
  dv_CUfunction f;
  char *name;
  size_t static_shared;
  pthread_mutex_t lock; /* dyn_attr */
  _Atomic size_t dyn_attr; /* the function's MAX_DYNAMIC_SHARED_SIZE_BYTES now */
};

struct dv_bmodule {
  dv_CUmodule mod;
  dv_CUdeviceptr cbuf; /* the constant buffer (0: none in the module) */
  size_t cbuf_bytes;   /* its size when present */
  size_t const_bytes;  /* the program's constant arrays */
  int kind; /* DV_CU_IMAGE_* */
  pthread_mutex_t lock; /* kernels */
  dv_bkernel *kernels;
};

/* The thread's detail message, copied (dv__error formats into the buffer
 * dv_last_error returns, so it cannot be an argument of dv__error). */
typedef struct cu_why {
  char s[768];
} cu_why;
static cu_why cu_last(void) {
  cu_why w;
  snprintf(w.s, sizeof w.s, "%s", dv_last_error());
  return w;
}

/* ---- per-context state -------------------------------------------------------------- */

static int cu_attr(cu_state *st, dv_CUdevice_attribute a) {
  int v = 0;
  if (cu.cuDeviceGetAttribute(&v, a, st->dev) != DV_CUDA_SUCCESS) v = 0;
  return v;
}

dv_status dv__cu_kernel_open(cu_state *st) {
  pthread_mutex_init(&st->copy_lock, NULL);
  st->copy_state = 0;
  st->copy_module = NULL;
  st->driver_version = 0;
  cu.cuDriverGetVersion(&st->driver_version);
  dv_klimits *L = &st->klimits;
  memset(L, 0, sizeof *L);
  L->max_threads_per_block = (uint32_t)cu_attr(st, DV_CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
  L->max_block[0] = (uint32_t)cu_attr(st, DV_CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X);
  L->max_block[1] = (uint32_t)cu_attr(st, DV_CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y);
  L->max_block[2] = (uint32_t)cu_attr(st, DV_CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z);
  L->max_grid[0] = (uint32_t)cu_attr(st, DV_CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X);
  L->max_grid[1] = (uint32_t)cu_attr(st, DV_CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y);
  L->max_grid[2] = (uint32_t)cu_attr(st, DV_CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z);
  L->max_shared_per_block = (size_t)cu_attr(st, DV_CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK);
  L->max_shared_per_block_optin =
      (size_t)cu_attr(st, DV_CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
  if (L->max_shared_per_block_optin < L->max_shared_per_block)
    L->max_shared_per_block_optin = L->max_shared_per_block;
  L->max_constant_bytes = (size_t)cu_attr(st, DV_CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY);
  /* Kernel parameters, all of a launch together: 4096 bytes, or 32764 from
   * driver 12.1 on for Volta (compute capability 7.0) and newer ("CUDA 12.1
   * Supports Large Kernel Parameters", NVIDIA's blog; older drivers refuse
   * such launches with CUDA_ERROR_NOT_SUPPORTED).  Compiling a kernel whose
   * parameters pass 4 KiB also needs NVRTC 12.1 or later, which an older
   * NVRTC enforces by refusing to compile it. */
  L->max_arg_bytes = st->driver_version >= 12010 && st->info.compute_major >= 7 ? 32764 : 4096;
  st->sm_count = cu_attr(st, DV_CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  L->wave_size = cu_attr(st, DV_CU_DEVICE_ATTRIBUTE_WARP_SIZE);
  if (L->wave_size < 1) L->wave_size = 32;
  const struct dv_cu_kernel_ops *ko = st->drv->kops;
  if (ko->no_shared_optin) L->max_shared_per_block_optin = L->max_shared_per_block;
  if (ko->limits) ko->limits(st, L);
  return DV_OK;
}

void dv__cu_kernel_close(cu_state *st) {
  if (st->copy_module) cu.cuModuleUnload(st->copy_module);
  st->copy_module = NULL;
  if (st->load_stream) cu.cuStreamDestroy_v2(st->load_stream);
  st->load_stream = NULL;
  pthread_mutex_destroy(&st->copy_lock);
}

dv_status dv__cub_kernel_limits(void *state, dv_klimits *out) {
  *out = ((cu_state *)state)->klimits;
  return DV_OK;
}

dv_status dv__cub_kernel_target_id(void *state, char *buf, size_t cap) {
  cu_state *st = state;
  return st->drv->kops->target_id(st, buf, cap);
}

/* ---- images -------------------------------------------------------------------------- */

#define DV__CU_IMAGE_MAGIC "DVCUMOD1"
#define DV__CU_IMAGE_HEADER 16

static const char *const cu_image_tags[3] = {"CUBIN", "PTX", "HSACO"};

dv_status dv__cu_image_pack(const void *data, size_t size, int kind, void **image,
                            size_t *image_size) {
  *image = NULL;
  *image_size = 0;
  if (kind < DV_CU_IMAGE_CUBIN || kind > DV_CU_IMAGE_HSACO)
    return dv__error(DV_ERR_INVALID_ARGUMENT, "unknown module image kind %d", kind);
  if (size > SIZE_MAX - DV__CU_IMAGE_HEADER)
    return dv__error(DV_ERR_OVERFLOW, "a compiled module of %zu bytes is too large", size);
  unsigned char *p = dv__calloc(1, DV__CU_IMAGE_HEADER + size);
  if (!p) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate a module image");
  memcpy(p, DV__CU_IMAGE_MAGIC, 8);
  memcpy(p + 8, cu_image_tags[kind], strlen(cu_image_tags[kind]));
  if (size) memcpy(p + DV__CU_IMAGE_HEADER, data, size);
  *image = p;
  *image_size = DV__CU_IMAGE_HEADER + size;
  return DV_OK;
}

dv_status dv__cu_image_unpack(const void *image, size_t image_size, const void **data,
                              size_t *size, int *kind) {
  const unsigned char *p = image;
  *data = NULL;
  *size = 0;
  *kind = 0;
  if (!p || image_size <= DV__CU_IMAGE_HEADER || memcmp(p, DV__CU_IMAGE_MAGIC, 8) != 0)
    return dv__error(DV_ERR_INVALID_ARGUMENT, "not a devarray CUDA module image");
  const unsigned char *payload = p + DV__CU_IMAGE_HEADER;
  size_t n = image_size - DV__CU_IMAGE_HEADER;
  int k = -1;
  for (int i = 0; i < 3; i++) {
    char tag[8] = {0};
    memcpy(tag, cu_image_tags[i], strlen(cu_image_tags[i]));
    if (memcmp(p + 8, tag, 8) == 0) k = i;
  }
  if (k < 0) return dv__error(DV_ERR_INVALID_ARGUMENT, "a CUDA module image of an unknown kind");
  if (k == DV_CU_IMAGE_PTX) {
    if (payload[n - 1] != 0)
      return dv__error(DV_ERR_INVALID_ARGUMENT, "a CUDA module image whose PTX is not terminated");
  } else if (n < 4 || memcmp(payload, "\x7f" "ELF", 4) != 0) {
    return dv__error(DV_ERR_INVALID_ARGUMENT, "a module image whose %s is not an ELF file",
                     cu_image_tags[k]);
  }
  *kind = k;
  *data = payload;
  *size = n;
  return DV_OK;
}

dv_status dv__cu_image_accept(const dv_cu_driver *drv, int kind) {
  if (kind >= 0 && kind <= DV_CU_IMAGE_HSACO && (drv->kops->image_kinds & 1u << kind)) return DV_OK;
  return dv__error(DV_ERR_INVALID_ARGUMENT, "a module image of %s code cannot be loaded by the %s driver",
                   kind >= 0 && kind <= DV_CU_IMAGE_HSACO ? cu_image_tags[kind] : "unknown",
                   drv->vendor);
}

/* ---- modules --------------------------------------------------------------------------- */

/* a + "\n" + b, either may be NULL or empty; frees both (returns one of them
 * when the other is empty). */
static char *cu_join(char *a, char *b) {
  if (!b || !*b) {
    dv__free(b);
    return a;
  }
  if (!a || !*a) {
    dv__free(a);
    return b;
  }
  size_t na = strlen(a), nb = strlen(b);
  char *s = dv__malloc(na + nb + 2);
  if (!s) {
    dv__free(b);
    return a;
  }
  memcpy(s, a, na);
  s[na] = '\n';
  memcpy(s + na + 1, b, nb + 1);
  dv__free(a);
  dv__free(b);
  return s;
}

#define DV__CU_JIT_LOG 16384

/* Load CUBIN or PTX (NUL-terminated) with the JIT's logs captured.  *log
 * receives the JIT's messages (dv__malloc'd) or NULL. */
static dv_status cu_load_image(cu_state *st, const void *data, int kind, const char *what,
                               dv_CUmodule *out, char **log) {
  *out = NULL;
  *log = NULL;
  char *err = dv__calloc(1, DV__CU_JIT_LOG), *info = dv__calloc(1, DV__CU_JIT_LOG);
  if (!err || !info) {
    dv__free(err), dv__free(info);
    return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate the JIT logs");
  }
  dv_CUjit_option opts[4] = {DV_CU_JIT_ERROR_LOG_BUFFER, DV_CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                             DV_CU_JIT_INFO_LOG_BUFFER, DV_CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES};
  void *vals[4] = {err, (void *)(uintptr_t)(DV__CU_JIT_LOG - 1), info,
                   (void *)(uintptr_t)(DV__CU_JIT_LOG - 1)};
  dv_CUresult r = cu.cuModuleLoadDataEx(out, data, 4, opts, vals);
  err[DV__CU_JIT_LOG - 1] = info[DV__CU_JIT_LOG - 1] = 0;
  if (r != DV_CUDA_SUCCESS) {
    *out = NULL;
    const char *hint = "";
    if (cu_code(r) == DV_CUDA_ERROR_UNSUPPORTED_PTX_VERSION)
      hint = " (the PTX is newer than this driver: update the driver, or use an NVRTC no newer "
             "than the driver)";
    else if (cu_code(r) == DV_CUDA_ERROR_NO_BINARY_FOR_GPU || cu_code(r) == DV_CUDA_ERROR_INVALID_IMAGE)
      hint = " (compiled for another architecture)";
    cu_fail(r, DV_CU_E_cuModuleLoadDataEx, "");
    cu_why why = cu_last();
    dv_status rc = dv__error(dv__cu_status(cu_code(r)) == DV_ERR_INVALID_ARGUMENT ? DV_ERR_DRIVER : dv__cu_status(cu_code(r)),
                             "%s: loading the %s failed%s: %s%s%.2048s", what,
                             kind == DV_CU_IMAGE_HSACO ? "code object" : cu_image_tags[kind], hint,
                             why.s, *err ? "\nJIT log:\n" : "", err);
    *log = cu_join(err, NULL);
    dv__free(info);
    return rc;
  }
  (void)st;
  *log = cu_join(err, info);
  return DV_OK;
}

/* The context's stream for module loading: non-blocking, made at first use. */
static dv_CUresult cu_load_stream(cu_state *st, dv_CUstream *out) {
  dv_CUresult r = DV_CUDA_SUCCESS;
  pthread_mutex_lock(&st->copy_lock);
  if (!st->load_stream) r = cu.cuStreamCreate(&st->load_stream, DV_CU_STREAM_NON_BLOCKING);
  if (r) st->load_stream = NULL;
  *out = st->load_stream;
  pthread_mutex_unlock(&st->copy_lock);
  return r;
}

static dv_status cu_module_from(cu_state *st, const dv_build_req *req, const void *data, int kind,
                                dv_bmodule **out, char **log) {
  *out = NULL;
  CU_ENTER(st);
  dv_bmodule *m = dv__calloc(1, sizeof *m);
  if (!m) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate a module");
  char *jit = NULL;
  dv_status rc = cu_load_image(st, data, kind, req->name, &m->mod, &jit);
  if (log) *log = cu_join(*log, jit);
  else dv__free(jit);
  if (rc) {
    dv__free(m);
    return rc;
  }
  m->kind = kind;
  if (req->const_bytes) {
    dv_CUdeviceptr p = 0;
    size_t n = 0;
    dv_CUresult r = cu.cuModuleGetGlobal_v2(&p, &n, m->mod, "dv__cbuf");
    m->const_bytes = req->const_bytes;
    if (cu_code(r) == DV_CUDA_ERROR_NOT_FOUND) {
      /* No kernel reads the constants and the compiler dropped them: there
       * is nothing to fill, and updates have no reader. */
      dv__log(DV_LOG_DEBUG, "program %s: no constant buffer in the module (unused)", req->name);
    } else if (r != DV_CUDA_SUCCESS || n < req->const_bytes) {
      cu_why why = {""};
      if (r) {
        cu_fail(r, DV_CU_E_cuModuleGetGlobal_v2, "(dv__cbuf)");
        why = cu_last();
      }
      rc = dv__error(DV_ERR_DRIVER, "program %s: the module has no constant buffer of %zu bytes%s%s",
                     req->name, req->const_bytes, r ? ": " : "", why.s);
    } else {
      m->cbuf = p;
      m->cbuf_bytes = req->const_bytes;
      if (req->const_init) {
        /* On the context's private non-blocking stream, waited for: the
         * data is in place before any launch can use the module, and
         * nothing else is waited for (the legacy stream would wait for
         * every blocking stream of the primary context, other code's too). */
        dv_CUstream ls = NULL;
        r = cu_load_stream(st, &ls);
        if (!r) r = cu.cuMemcpyHtoDAsync_v2(p, req->const_init, req->const_bytes, ls);
        if (!r) r = cu.cuStreamSynchronize(ls);
        if (r) rc = cu_fail_in(r, "uploading the constant arrays", DV_CU_E_cuMemcpyHtoDAsync_v2, DV_CU_E_NONE);
      }
    }
    if (rc) {
      cu.cuModuleUnload(m->mod);
      dv__free(m);
      return rc;
    }
  }
  pthread_mutex_init(&m->lock, NULL);
  *out = m;
  return DV_OK;
}

dv_status dv__cub_module_build(void *state, const dv_build_req *req, dv_bmodule **out,
                               void **image, size_t *image_size, char **log) {
  cu_state *st = state;
  *out = NULL;
  *image = NULL;
  *image_size = 0;
  *log = NULL;
  void *img = NULL;
  size_t n = 0;
  int kind = -1;
  dv_status rc = st->drv->kops->compile(st, req, &img, &n, &kind, log);
  if (rc) {
    dv__free(img);
    return rc;
  }
  rc = cu_module_from(st, req, img, kind, out, log);
  if (!rc && dv__cu_image_pack(img, n, kind, image, image_size) != DV_OK)
    dv__log(DV_LOG_INFO, "program %s: no image for the module cache: %s", req->name, dv_last_error());
  dv__free(img);
  return rc;
}

dv_status dv__cub_module_load(void *state, const dv_build_req *req, const void *image,
                              size_t image_size, dv_bmodule **out, char **log) {
  *out = NULL;
  *log = NULL;
  const void *data = NULL;
  size_t n = 0;
  int kind = 0;
  dv_status rc = dv__cu_image_unpack(image, image_size, &data, &n, &kind);
  if (!rc) rc = dv__cu_image_accept(((cu_state *)state)->drv, kind);
  if (rc) return rc;
  return cu_module_from(state, req, data, kind, out, log);
}

dv_status dv__cub_module_unload(void *state, dv_bmodule *m) {
  if (!m) return DV_OK;
  cu_state *st = state;
  CU_SCOPE(sc);
  dv_status rc = dv__cu_enter_scope(st, &sc);
  dv_CUresult r = rc ? DV_CUDA_SUCCESS : cu.cuModuleUnload(m->mod);
  for (dv_bkernel *k = m->kernels, *next; k; k = next) {
    next = k->next;
    pthread_mutex_destroy(&k->lock);
    dv__free(k->name);
    dv__free(k);
  }
  pthread_mutex_destroy(&m->lock);
  dv__free(m);
  if (rc) return rc;
  if (r) return cu_fail(r, DV_CU_E_cuModuleUnload, "");
  return DV_OK;
}

/* ---- kernels ------------------------------------------------------------------------------ */

static dv_status cu_func_attr(cu_state *st, dv_CUfunction f, dv_CUfunction_attribute a, int *v) {
  *v = 0;
  CU_TRY(cu.cuFuncGetAttribute(v, a, f), DV_CU_E_cuFuncGetAttribute, "");
  return DV_OK;
}

dv_status dv__cub_kernel_get(void *state, dv_bmodule *m, const char *name, dv_bkernel **out) {
  *out = NULL;
  cu_state *st = state;
  CU_ENTER(st);
  dv_CUfunction f = NULL;
  dv_CUresult r = cu.cuModuleGetFunction(&f, m->mod, name);
  if (cu_code(r) == DV_CUDA_ERROR_NOT_FOUND)
    return dv__error(DV_ERR_INVALID_ARGUMENT, "the module has no kernel %s (declare it with DV_KERNEL)",
                     name);
  if (r) return cu_fail(r, DV_CU_E_cuModuleGetFunction, "");
  int stat = 0, dyn = 0;
  dv_status rc = cu_func_attr(st, f, DV_CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, &stat);
  if (!rc) rc = cu_func_attr(st, f, DV_CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, &dyn);
  if (rc) return rc;
  dv_bkernel *k = dv__calloc(1, sizeof *k);
  char *nm = dv__strdup(name);
  if (!k || !nm) {
    dv__free(k), dv__free(nm);
    return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate a kernel");
  }
  k->m = m;
  k->f = f;
  k->name = nm;
  k->static_shared = (size_t)stat;
  atomic_store(&k->dyn_attr, (size_t)dyn);
  pthread_mutex_init(&k->lock, NULL);
  pthread_mutex_lock(&m->lock);
  k->next = m->kernels;
  m->kernels = k;
  pthread_mutex_unlock(&m->lock);
  *out = k;
  return DV_OK;
}

/* The parameter sizes the driver reports (cuFuncGetParamInfo, CUDA 12.4),
 * for the kernel layer's cross-check; kinds and type names it cannot tell. */
dv_status dv__cub_kernel_params(void *state, dv_bkernel *k, dv_bparam *out, size_t cap, size_t *n,
                                const char **sig) {
  cu_state *st = state;
  *n = 0;
  *sig = NULL;
  if (!cu.cuFuncGetParamInfo) return dv__error(DV_ERR_NOT_SUPPORTED, "no cuFuncGetParamInfo");
  CU_ENTER(st);
  size_t i = 0;
  for (; i <= cap; i++) {
    size_t off = 0, size = 0;
    if (cu.cuFuncGetParamInfo(k->f, i, &off, &size) != DV_CUDA_SUCCESS) break;
    if (i == cap) return dv__error(DV_ERR_NOT_SUPPORTED, "too many parameters to report");
    out[i].kind = '?';
    out[i].size = size;
    out[i].type[0] = 0;
  }
  *n = i;
  return DV_OK;
}

dv_status dv__cub_kernel_attrs(void *state, dv_bkernel *k, dv_kernel_attrs *out) {
  cu_state *st = state;
  memset(out, 0, sizeof *out);
  CU_ENTER(st);
  int maxt = 0, stat = 0, local = 0, regs = 0;
  dv_status rc = cu_func_attr(st, k->f, DV_CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, &maxt);
  if (!rc) rc = cu_func_attr(st, k->f, DV_CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, &stat);
  if (!rc) rc = cu_func_attr(st, k->f, DV_CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, &local);
  if (!rc) rc = cu_func_attr(st, k->f, DV_CU_FUNC_ATTRIBUTE_NUM_REGS, &regs);
  if (rc) return rc;
  size_t optin = st->klimits.max_shared_per_block_optin;
  out->max_threads_per_block = maxt;
  out->static_shared_bytes = (size_t)stat;
  /* devarray opts in by itself: a launch may ask for up to the opt-in limit. */
  out->max_dynamic_shared_bytes = optin > (size_t)stat ? optin - (size_t)stat : 0;
  out->local_bytes_per_thread = (size_t)local;
  out->constant_bytes = k->m->const_bytes;
  out->registers = regs;
  out->wave_size = st->klimits.wave_size;
  return DV_OK;
}

dv_status dv__cub_constant_write(void *state, dv_bmodule *m, dv_bstream *s, size_t offset,
                                 dv_memref src, size_t bytes) {
  if (!bytes) return DV_OK;
  if (offset > m->const_bytes || bytes > m->const_bytes - offset)
    return dv__error(DV_ERR_INVALID_ARGUMENT,
                     "constant write of %zu bytes at %zu is outside the %zu-byte constant buffer",
                     bytes, offset, m->const_bytes);
  if (!m->cbuf) return DV_OK; /* no kernel of the module reads constants */
  cu_state *st = state;
  CU_ENTER(st);
  dv_CUdeviceptr dst = m->cbuf + offset;
  if (src.buf)
    CU_TRY(cu.cuMemcpyDtoDAsync_v2(dst, cu_ptr(src), bytes, s->s), DV_CU_E_cuMemcpyDtoDAsync_v2, " (constants)");
  else
    CU_TRY(cu.cuMemcpyHtoDAsync_v2(dst, src.ptr, bytes, s->s), DV_CU_E_cuMemcpyHtoDAsync_v2, " (constants)");
  dv__cu_used(state, s);
  return DV_OK;
}

#define DV__CU_MAXPARAMS 256

/* Parameters the caller did not pass read zeros rather than stray memory
 * (the driver reads one pointer per parameter of the kernel). */
static const unsigned char cu_zero_param[256];

/* Dynamic shared memory for one launch of k: refused past the opt-in limit;
 * beyond the function's current maximum (at first the default per-block
 * limit less its static shared memory) the maximum is raised. */
static dv_status cu_dynamic_shared(cu_state *st, dv_bkernel *k, size_t dyn) {
  size_t stat = k->static_shared, optin = st->klimits.max_shared_per_block_optin;
  if (dyn > optin || stat + dyn > optin || dyn > (size_t)INT32_MAX)
    return dv__error(DV_ERR_LAUNCH_CONFIG,
                     "kernel %s: %zu bytes of static plus %zu bytes of dynamic shared memory exceed "
                     "the device's limit of %zu bytes per block (with opt-in)", k->name, stat, dyn,
                     optin);
  if (stat + dyn <= st->klimits.max_shared_per_block &&
      (dyn <= atomic_load(&k->dyn_attr) || st->drv->kops->no_shared_optin))
    return DV_OK; /* within the default limit (no opt-in on drivers without one) */
  pthread_mutex_lock(&k->lock);
  dv_CUresult r = DV_CUDA_SUCCESS;
  if (dyn > atomic_load(&k->dyn_attr)) {
    r = cu.cuFuncSetAttribute(k->f, DV_CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)dyn);
    if (!r) atomic_store(&k->dyn_attr, dyn);
  }
  pthread_mutex_unlock(&k->lock);
  if (r) {
    cu_fail(r, DV_CU_E_cuFuncSetAttribute, "(MAX_DYNAMIC_SHARED_SIZE_BYTES)");
    cu_why why = cu_last();
    return dv__error(DV_ERR_LAUNCH_CONFIG,
                     "kernel %s: cannot opt in to %zu bytes of dynamic shared memory: %s", k->name,
                     dyn, why.s);
  }
  return DV_OK;
}

dv_status dv__cub_launch(void *state, dv_bstream *s, dv_bkernel *k, const dv_blaunch *l) {
  cu_state *st = state;
  if (l->nargs > DV__CU_MAXPARAMS)
    return dv__error(DV_ERR_KERNEL_ARGUMENT, "kernel %s: %zu parameters; CUDA takes at most %d here",
                     k->name, l->nargs, DV__CU_MAXPARAMS);
  CU_ENTER(st);
  dv_status rc = cu_dynamic_shared(st, k, l->dynamic_shared);
  if (rc) return rc;
  void *params[DV__CU_MAXPARAMS];
  dv_CUdeviceptr ptrs[DV__CU_MAXPARAMS];
  size_t i = 0;
  for (; i < l->nargs; i++) {
    const dv_barg *a = &l->args[i];
    if (a->kind == DV_BARG_BUFFER) {
      ptrs[i] = (dv_CUdeviceptr)(uintptr_t)a->buf;
      params[i] = &ptrs[i];
    } else {
      params[i] = (void *)(uintptr_t)a->value;
    }
  }
  for (; i < DV__CU_MAXPARAMS; i++) params[i] = (void *)(uintptr_t)cu_zero_param;
  dv_CUresult r = cu.cuLaunchKernel(k->f, l->grid[0], l->grid[1], l->grid[2], l->block[0], l->block[1],
                                    l->block[2], (unsigned)l->dynamic_shared, s->s, params, NULL);
  if (r == DV_CUDA_SUCCESS) dv__cu_used(st, s);
  if (cu_code(r) == DV_CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES)
    return dv__error(DV_ERR_LAUNCH_CONFIG,
                     "kernel %s: a block of %u x %u x %u threads needs more registers than the "
                     "device has (CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES); use smaller blocks",
                     k->name, l->block[0], l->block[1], l->block[2]);
  if (r) {
    cu_fail(r, DV_CU_E_cuLaunchKernel, "");
    cu_why why = cu_last();
    return dv__error(dv__cu_status(cu_code(r)), "kernel %s: %s", k->name, why.s);
  }
  return DV_OK;
}

/* ---- native handles, foreign memory ------------------------------------------------------- */

dv_status dv__cub_native_context(void *state, void **context, void **device) {
  cu_state *st = state;
  if (context) *context = st->ctx;
  if (device) *device = (void *)(intptr_t)st->dev;
  return DV_OK;
}

dv_status dv__cub_native_stream(void *state, dv_bstream *s, void **handle) {
  cu_state *st = state;
  if (!s->builtin) {
    /* Foreign work may be queued on it now: fenced at every free (cuda.c). */
    pthread_mutex_lock(&st->fence_lock);
    s->exported = true;
    pthread_mutex_unlock(&st->fence_lock);
  }
  *handle = s->s;
  return DV_OK;
}

dv_status dv__cub_native_buffer(void *state, void *buf, void **native) {
  /* Foreign streams may use it: its free waits for the whole context (cuda.c). */
  dv__cu_exported(state, buf);
  *native = buf; /* the buffer handle is the CUdeviceptr */
  return DV_OK;
}

/* Where the driver knows the allocation that holds `native`, the wrapped
 * range must lie inside it (a DLPack tensor or a caller's size that runs
 * past its allocation is refused, not read).  Where it does not (memory the
 * driver does not track as an allocation of this context), nothing can be
 * checked and the caller's size is trusted, as the header says. */
dv_status dv__cub_buffer_wrap(void *state, void *native, size_t bytes, void **buf) {
  cu_state *st = state;
  *buf = NULL;
  if (!native) return dv__error(DV_ERR_INVALID_ARGUMENT, "a CUdeviceptr of 0 cannot be wrapped");
  dv_CUdeviceptr p = (dv_CUdeviceptr)(uintptr_t)native, base = 0;
  size_t size = 0;
  dv_CUresult r;
  {
    CU_ENTER(st);
    r = cu.cuMemGetAddressRange_v2(&base, &size, p);
  }
  if (r == DV_CUDA_SUCCESS && (p - base > size || bytes > size - (size_t)(p - base)))
    return dv__error(DV_ERR_INVALID_ARGUMENT,
                     "the wrapped range (%zu bytes at 0x%llx) runs past its CUDA allocation (%zu bytes "
                     "at 0x%llx)", bytes, (unsigned long long)p, size, (unsigned long long)base);
  *buf = native;
  return DV_OK;
}

dv_status dv__cub_buffer_unwrap(void *state, void *buf) {
  (void)state;
  (void)buf; /* the memory is its owner's; nothing was allocated */
  return DV_OK;
}

/* ---- the built-in strided copy ------------------------------------------------------------- */

/* dv_copy_w<W>_i32 below 2^31 words, _i64 from there. */
static const char *const cu_copy_names[5][2] = {
    {"dv_copy_w1_i32", "dv_copy_w1_i64"}, {"dv_copy_w2_i32", "dv_copy_w2_i64"},
    {"dv_copy_w4_i32", "dv_copy_w4_i64"}, {"dv_copy_w8_i32", "dv_copy_w8_i64"},
    {"dv_copy_w16_i32", "dv_copy_w16_i64"}};

/* The copy kernels of this context, loaded on first use.  False when they
 * cannot be (logged once): the caller then falls back to staging. */
static bool cu_copy_kernels(cu_state *st) {
  pthread_mutex_lock(&st->copy_lock);
  if (st->copy_state == 0) {
    char *log = NULL;
    dv_CUmodule mod = NULL;
    const void *img = NULL;
    size_t isz = 0;
    int kind = -1;
    dv_status rc = st->drv->kops->copy_image(st, &img, &isz, &kind);
    if (!rc) rc = cu_load_image(st, img, kind, "devarray's strided-copy kernels", &mod, &log);
    for (int i = 0; !rc && i < 10; i++) {
      dv_CUresult r = cu.cuModuleGetFunction(&st->copy_fn[i / 2][i % 2], mod, cu_copy_names[i / 2][i % 2]);
      if (r) rc = cu_fail(r, DV_CU_E_cuModuleGetFunction, " (copy kernels)");
    }
    if (rc) {
      dv__log(DV_LOG_DEBUG, "%s: strided copies stage through the host: %s", st->drv->backend,
              dv_last_error());
      if (mod) cu.cuModuleUnload(mod);
      st->copy_state = -1;
    } else {
      st->copy_module = mod;
      st->copy_state = 1;
    }
    dv__free(log);
  }
  bool ok = st->copy_state == 1;
  pthread_mutex_unlock(&st->copy_lock);
  return ok;
}

static uint64_t cu_abs64(int64_t v) { return v < 0 ? 0 - (uint64_t)v : (uint64_t)v; }

bool dv__cu_copy_plan(const dv_strided *c, uint64_t src_addr, uint64_t dst_addr, dv_cu_copy_plan *p) {
  memset(p, 0, sizeof *p);
  if (c->nd < 0 || c->nd > DV_MAXDIMS || !c->itemsize) return false;
  uint64_t count = 1;
  for (int i = 0; i < c->nd; i++) {
    if (c->shape[i] < 0) return false;
    if (c->shape[i] == 0) return true; /* nothing to copy: count 0 */
    if (count > UINT64_MAX / (uint64_t)c->shape[i]) return false;
    count *= (uint64_t)c->shape[i];
  }
  /* The widest word dividing the item size, both addresses and every stride
   * (of a dimension longer than 1). */
  uint64_t bits = (uint64_t)c->itemsize | src_addr | dst_addr;
  for (int i = 0; i < c->nd; i++)
    if (c->shape[i] > 1) bits |= cu_abs64(c->src_strides[i]) | cu_abs64(c->dst_strides[i]);
  size_t w = 16;
  int wi = 4;
  while (w > 1 && (bits & (w - 1))) w >>= 1, wi--;
  uint64_t words = c->itemsize / w;
  if (count > UINT64_MAX / words || count * words > (uint64_t)INT64_MAX) return false;
  /* Dimensions of words, outermost first: extents of 1 dropped, the words of
   * an item appended, dimensions contiguous on both sides merged. */
  int nd = 0;
  for (int i = 0; i <= c->nd; i++) {
    int64_t e, a, b;
    if (i < c->nd) {
      if (c->shape[i] == 1) continue;
      e = c->shape[i], a = c->src_strides[i], b = c->dst_strides[i];
    } else {
      if (words == 1) break;
      e = (int64_t)words, a = b = (int64_t)w;
    }
    if (nd > 0 && p->src.strides[nd - 1] == a * e && p->dst.strides[nd - 1] == b * e) {
      p->src.shape[nd - 1] *= e;
      p->src.strides[nd - 1] = a, p->dst.strides[nd - 1] = b;
      continue;
    }
    if (nd == DV_BKVIEW_MAXDIMS) return false; /* more than the kernels take: staging */
    p->src.shape[nd] = e, p->src.strides[nd] = a, p->dst.strides[nd] = b;
    nd++;
  }
  if (nd == 0) p->src.shape[0] = 1, nd = 1; /* one word */
  for (int i = 0; i < nd; i++) p->dst.shape[i] = p->src.shape[i];
  p->src.ndim = p->dst.ndim = nd;
  p->word = w;
  p->word_index = wi;
  p->count = (int64_t)(count * words);
  p->wide_index = (uint64_t)p->count >= ((uint64_t)1 << 31);
  return true;
}

dv_status dv__cub_copy_strided(void *state, dv_bstream *s, const dv_strided *c) {
  cu_state *st = state;
  /* Device to device only: a host side is packed or unpacked by the planner. */
  if (!c->src.buf || !c->dst.buf) return DV_ERR_NOT_SUPPORTED;
  dv_cu_copy_plan p;
  if (!dv__cu_copy_plan(c, cu_ptr(c->src), cu_ptr(c->dst), &p)) return DV_ERR_NOT_SUPPORTED;
  if (p.count == 0) return DV_OK;
  CU_ENTER(st);
  if (!cu_copy_kernels(st)) return DV_ERR_NOT_SUPPORTED;
  /* DV_VIEW(const W, src), DV_VIEW(W, dst), count: base, offset and view each. */
  dv_CUdeviceptr dbase = (dv_CUdeviceptr)(uintptr_t)c->dst.buf, sbase = (dv_CUdeviceptr)(uintptr_t)c->src.buf;
  int64_t doff = (int64_t)c->dst.offset, soff = (int64_t)c->src.offset;
  void *params[7] = {&sbase, &soff, &p.src, &dbase, &doff, &p.dst, &p.count};
  /* A grid-stride loop: enough blocks to fill the device, no more. */
  unsigned threads = 256;
  uint64_t blocks = ((uint64_t)p.count + threads - 1) / threads;
  uint64_t cap = st->sm_count > 0 ? (uint64_t)st->sm_count * 32 : 4096;
  if (blocks > cap) blocks = cap;
  CU_TRY(cu.cuLaunchKernel(st->copy_fn[p.word_index][p.wide_index], (unsigned)blocks, 1, 1, threads, 1, 1, 0, s->s,
                           params, NULL),
         DV_CU_E_cuLaunchKernel, " (strided copy)");
  dv__cu_used(st, s);
  if (c->flags & DV_COPY_SYNC) CU_TRY(cu.cuStreamSynchronize(s->s), DV_CU_E_cuStreamSynchronize, "");
  return DV_OK;
}
