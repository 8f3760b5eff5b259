/*
 * The OpenCL backend's kernels: programs built from source (or reloaded
 * from a binary image), kernels, launches, constant buffers, native handles,
 * foreign buffers, and the built-in strided-copy kernel.
 *
 *  - A module is a cl_program built for the context's device, plus the
 *    module's constant buffer: a read-only cl_mem created from the program's
 *    constant data (none when the program has no constants).  Every kernel
 *    written with DV_KERNEL has two hidden trailing parameters (kernel.h):
 *    `__constant uchar *dv__cbuf` (that buffer, or NULL) and
 *    `__local uchar *dv__dyn_shared` (the launch's dynamic local memory:
 *    max(dynamic_shared, 1) bytes, since OpenCL refuses a 0-byte local
 *    argument).
 *  - Programs are built with -cl-kernel-arg-info so that each parameter's
 *    address space is known: a launch that passes a buffer for a value (or
 *    the reverse) fails with DV_ERR_KERNEL_ARGUMENT instead of handing the
 *    driver a bogus cl_mem.  Drivers do not keep that information in
 *    program binaries, so the image devarray caches carries it.
 *  - Images: a header (magic, target hash, sizes, FNV-1a checksum), the
 *    kernels' parameter kinds, then CL_PROGRAM_BINARIES.  The checksum is
 *    verified before the driver sees the binary: PoCL 3.1 aborts or
 *    segfaults on a truncated or bit-flipped binary (measured).
 *  - Launches: one mutex per cl_kernel, held from the first clSetKernelArg
 *    to clEnqueueNDRangeKernel (the arguments are captured at enqueue), so
 *    launches may come from several threads.  The launch's event becomes the
 *    stream's last command (query, sync, callbacks, events).
 *  - DV_BUILD_DEBUG adds -cl-opt-disable (every OpenCL version has it).
 *  - dv_wavebarrier() is sub_group_barrier() where the device has
 *    sub-groups, else the work-group barrier (kernel.h): PoCL 3.1 has none.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "opencl_internal.h"

#if DV_HAVE_OPENCL_HEADERS

/* src/kernel/copy_kernels.dvk, embedded at build time. */

/* OpenCL 2.1 names (the headers hide them below CL_TARGET_OPENCL_VERSION 210). */
#define CLK_DEVICE_MAX_NUM_SUB_GROUPS 0x105C
#define CLK_KERNEL_MAX_SUB_GROUP_SIZE_FOR_NDRANGE 0x2033
#define CLK_DEVICE_SUB_GROUP_SIZES_INTEL 0x4108
typedef cl_int (*clk_subgroup_fn)(cl_kernel, cl_device_id, cl_uint, size_t, const void *, size_t, void *, size_t *);

/* Devarray's own options, ahead of the user's; part of the target id. */
#define CLK_OPTIONS "-cl-kernel-arg-info"
#define CLK_OPTIONS_DEBUG " -cl-opt-disable"
#define CLK_IMAGE_MAGIC "DVCLIMG1"
#define CLK_LOG_HEAD 700 /* bytes of build log quoted in the detail message */

static dv_status clk_fail(cl_int code, const char *what) {
  return dv__error(dv__cl_status(code), "OpenCL %s failed: %s (%d)", what, dv__cl_error_name(code), code);
}

/* ---- modules and kernels ---------------------------------------------------------- */

struct dv_bkernel {
  struct dv_bmodule *mod;
  cl_kernel k;
  pthread_mutex_t m; /* argument setting and enqueue */
  char *name;
  cl_uint nargs;     /* the user's parameters (the 2 hidden ones excluded) */
  const char *kinds; /* per user parameter: 'g' global, 'c' constant, 'l' local, 'p' value; NULL: unknown */
  size_t wg, static_local, priv;
  size_t local_limit; /* CL_DEVICE_LOCAL_MEM_SIZE */
  size_t dyn_set;     /* the dynamic local size last set (0: none yet); under m */
  int wave;
  struct dv_bkernel *next;
};

struct dv_bmodule {
  cl_program prog;
  cl_mem cbuf;   /* constant buffer, or NULL */
  size_t cbytes;
  char *name;
  char *meta;    /* "name kinds\n" per kernel (kinds include the hidden parameters) */
  pthread_mutex_t m; /* kernels */
  struct dv_bkernel *kernels;
};

/* FNV-1a, 64 bits: the image checksum and the target hash. */
static uint64_t clk_fnv(uint64_t h, const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
  return h;
}
#define CLK_FNV_INIT 0xcbf29ce484222325ull

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

static dv_status clk_unload(dv_bmodule *m);

void dv__cl_kernel_fini(cl_state *st) {
  if (st->copy_mod) clk_unload(st->copy_mod);
  st->copy_mod = NULL;
  pthread_mutex_destroy(&st->kmu);
}

/* ---- limits and target ------------------------------------------------------------------ */

dv_status dv__clk_limits(void *state, dv_klimits *out) {
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
  if (e) return clk_fail(e, "clGetDeviceInfo (kernel limits)");
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
  return DV_OK;
}

static void clk_device_str(cl_state *st, cl_device_info what, char *buf, size_t cap) {
  buf[0] = 0;
  if (cl.clGetDeviceInfo(st->device, what, cap, buf, NULL) != CL_SUCCESS) buf[0] = 0;
  buf[cap - 1] = 0;
}

/* The full description of what an image depends on (may be long). */
static void clk_target_full(cl_state *st, char *buf, size_t cap) {
  char pname[256] = "", pver[256] = "", dname[256] = "", dver[256] = "", drv[256] = "", clc[256] = "";
  cl.clGetPlatformInfo(st->platform, CL_PLATFORM_NAME, sizeof pname, pname, NULL);
  cl.clGetPlatformInfo(st->platform, CL_PLATFORM_VERSION, sizeof pver, pver, NULL);
  pname[sizeof pname - 1] = pver[sizeof pver - 1] = 0;
  clk_device_str(st, CL_DEVICE_NAME, dname, sizeof dname);
  clk_device_str(st, CL_DEVICE_VERSION, dver, sizeof dver);
  clk_device_str(st, CL_DRIVER_VERSION, drv, sizeof drv);
  clk_device_str(st, CL_DEVICE_OPENCL_C_VERSION, clc, sizeof clc);
  snprintf(buf, cap,
           "opencl backend 1 (image %s, options \"%s\"); device: %s, %s; driver: %s; %s; address bits %u; "
           "platform: %s, %s",
           CLK_IMAGE_MAGIC, CLK_OPTIONS, dname, dver, drv, clc, st->addr_bits, pname, pver);
}

dv_status dv__clk_target_id(void *state, char *buf, size_t cap) {
  cl_state *st = state;
  char full[2048];
  clk_target_full(st, full, sizeof full);
  size_t n = strlen(full);
  if (n < cap) {
    memcpy(buf, full, n + 1);
    return DV_OK;
  }
  /* Too long for the caller: its start and a hash of the whole. */
  if (cap < 64)
    return dv__error(DV_ERR_INVALID_ARGUMENT, "the OpenCL target id needs at least 64 bytes, the buffer has %zu", cap);
  char tail[32];
  int t = snprintf(tail, sizeof tail, "... #%016llx", (unsigned long long)clk_fnv(CLK_FNV_INIT, full, n));
  memcpy(buf, full, cap - (size_t)t - 1);
  memcpy(buf + cap - (size_t)t - 1, tail, (size_t)t + 1);
  return DV_OK;
}

static uint64_t clk_target_hash(cl_state *st) {
  char id[2048];
  clk_target_full(st, id, sizeof id);
  return clk_fnv(CLK_FNV_INIT, id, strlen(id));
}

/* ---- building ------------------------------------------------------------------------- */

/* The whole build log (its size asked first), dv__malloc'd; NULL if unreadable. */
static char *clk_build_log(cl_program p, cl_device_id d) {
  size_t n = 0;
  if (cl.clGetProgramBuildInfo(p, d, CL_PROGRAM_BUILD_LOG, 0, NULL, &n) != CL_SUCCESS) return NULL;
  char *log = dv__malloc(n + 1);
  if (!log) return NULL;
  if (n && cl.clGetProgramBuildInfo(p, d, CL_PROGRAM_BUILD_LOG, n, log, NULL) != CL_SUCCESS) n = 0;
  log[n] = 0;
  for (size_t k = strlen(log); k > 0 && (log[k - 1] == '\n' || log[k - 1] == ' '); k--) log[k - 1] = 0;
  return log;
}

/* Build p (from source or binary); *log receives the whole log. */
static dv_status clk_build(cl_state *st, cl_program p, const char *options, const char *name, char **log,
                           dv_status compile_status) {
  cl_int e = cl.clBuildProgram(p, 1, &st->device, options, NULL, NULL);
  char *text = clk_build_log(p, st->device);
  dv_status rc = DV_OK;
  if (e != CL_SUCCESS) {
    dv_status s = e == CL_BUILD_PROGRAM_FAILURE ? compile_status
                  : e == CL_INVALID_BUILD_OPTIONS ? DV_ERR_INVALID_ARGUMENT
                  : e == CL_COMPILER_NOT_AVAILABLE ? DV_ERR_NO_COMPILER
                  : e == CL_INVALID_BINARY ? DV_ERR_INVALID_ARGUMENT
                                           : dv__cl_status(e);
    size_t n = text ? strlen(text) : 0;
    rc = dv__error(s, "OpenCL build of \"%s\" failed: %s (%d)%s%s; build log (%zu bytes)%s:\n%.*s", name,
                   dv__cl_error_name(e), e, e == CL_INVALID_BUILD_OPTIONS ? "; options: " : "",
                   e == CL_INVALID_BUILD_OPTIONS ? options : "", n, n > CLK_LOG_HEAD ? ", first lines" : "",
                   (int)(n > CLK_LOG_HEAD ? CLK_LOG_HEAD : n), text ? text : "");
  }
  if (log) *log = text;
  else dv__free(text);
  return rc;
}

dv_status dv__cl_build(void *state, const char *source, const char *options, void **program, char **log) {
  cl_state *st = state;
  *program = NULL;
  if (log) *log = NULL;
  cl_int e;
  cl_program p = cl.clCreateProgramWithSource(st->ctx, 1, &source, NULL, &e);
  if (!p) return clk_fail(e, "clCreateProgramWithSource");
  dv_status rc = clk_build(st, p, options, "kernel", log, DV_ERR_DRIVER);
  if (rc) {
    cl.clReleaseProgram(p);
    return rc;
  }
  *program = p;
  return DV_OK;
}

void dv__cl_program_release(void *program) {
  if (program) cl.clReleaseProgram(program);
}

static char *clk_options(const dv_build_req *req) {
  const char *user = req->options ? req->options : "";
  size_t n = strlen(CLK_OPTIONS) + strlen(CLK_OPTIONS_DEBUG) + strlen(user) + 2;
  char *o = dv__malloc(n);
  if (o) snprintf(o, n, "%s%s%s%s", CLK_OPTIONS, (req->flags & DV_BUILD_DEBUG) ? CLK_OPTIONS_DEBUG : "",
                  *user ? " " : "", user);
  return o;
}

/* The kernels' parameter kinds: "name kinds\n" per kernel ('?' where the
 * driver does not say). */
static dv_status clk_meta_collect(cl_program p, char **out) {
  *out = NULL;
  size_t n = 0;
  cl_int e = cl.clGetProgramInfo(p, CL_PROGRAM_KERNEL_NAMES, 0, NULL, &n);
  if (e) return clk_fail(e, "clGetProgramInfo(CL_PROGRAM_KERNEL_NAMES)");
  char *names = dv__malloc(n + 1);
  if (!names) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate the kernel names");
  e = cl.clGetProgramInfo(p, CL_PROGRAM_KERNEL_NAMES, n, names, NULL);
  names[n] = 0;
  if (e) {
    dv__free(names);
    return clk_fail(e, "clGetProgramInfo(CL_PROGRAM_KERNEL_NAMES)");
  }
  size_t cap = 64, len = 0;
  char *meta = dv__malloc(cap);
  dv_status rc = meta ? DV_OK : dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate kernel metadata");
  if (meta) meta[0] = 0;
  for (char *save = NULL, *name = strtok_r(names, ";", &save); name && !rc; name = strtok_r(NULL, ";", &save)) {
    cl_kernel k = cl.clCreateKernel(p, name, &e);
    if (!k) {
      rc = clk_fail(e, "clCreateKernel");
      break;
    }
    cl_uint na = 0;
    e = cl.clGetKernelInfo(k, CL_KERNEL_NUM_ARGS, sizeof na, &na, NULL);
    size_t need = len + strlen(name) + na + 3;
    if (!e && need > cap) {
      while (cap < need) cap *= 2;
      char *m2 = dv__malloc(cap);
      if (!m2) {
        rc = dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate kernel metadata");
      } else {
        memcpy(m2, meta, len + 1);
        dv__free(meta);
        meta = m2;
      }
    }
    if (e) rc = clk_fail(e, "clGetKernelInfo(CL_KERNEL_NUM_ARGS)");
    if (!rc) {
      len += (size_t)sprintf(meta + len, "%s ", name);
      for (cl_uint i = 0; i < na; i++) {
        cl_kernel_arg_address_qualifier q = 0;
        char c = '?';
        if (cl.clGetKernelArgInfo(k, i, CL_KERNEL_ARG_ADDRESS_QUALIFIER, sizeof q, &q, NULL) == CL_SUCCESS)
          c = q == CL_KERNEL_ARG_ADDRESS_GLOBAL ? 'g' : q == CL_KERNEL_ARG_ADDRESS_CONSTANT ? 'c'
            : q == CL_KERNEL_ARG_ADDRESS_LOCAL ? 'l' : 'p';
        meta[len++] = c;
      }
      meta[len++] = '\n';
      meta[len] = 0;
    }
    cl.clReleaseKernel(k);
  }
  dv__free(names);
  if (rc) {
    dv__free(meta);
    return rc;
  }
  *out = meta;
  return DV_OK;
}

/* The image: header, metadata, program binary. */
typedef struct clk_head {
  char magic[8];
  uint64_t target;    /* hash of the target id */
  uint64_t meta_size; /* bytes of metadata (with its NUL) */
  uint64_t bin_size;
  uint64_t sum;       /* FNV-1a of the header (sum = 0), metadata and binary */
} clk_head;

static dv_status clk_image_make(cl_state *st, cl_program p, const char *meta, void **image, size_t *image_size) {
  size_t bsz = 0;
  cl_int e = cl.clGetProgramInfo(p, CL_PROGRAM_BINARY_SIZES, sizeof bsz, &bsz, NULL);
  if (e) return clk_fail(e, "clGetProgramInfo(CL_PROGRAM_BINARY_SIZES)");
  if (bsz == 0) return DV_OK; /* no binary: nothing to cache */
  size_t msz = strlen(meta) + 1, total = sizeof(clk_head) + msz + bsz;
  unsigned char *img = dv__malloc(total);
  if (!img) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate a %zu-byte program image", total);
  unsigned char *bin = img + sizeof(clk_head) + msz;
  e = cl.clGetProgramInfo(p, CL_PROGRAM_BINARIES, sizeof bin, &bin, NULL);
  if (e) {
    dv__free(img);
    return clk_fail(e, "clGetProgramInfo(CL_PROGRAM_BINARIES)");
  }
  clk_head h;
  memset(&h, 0, sizeof h);
  memcpy(h.magic, CLK_IMAGE_MAGIC, 8);
  h.target = clk_target_hash(st);
  h.meta_size = msz;
  h.bin_size = bsz;
  memcpy(img, &h, sizeof h);
  memcpy(img + sizeof h, meta, msz);
  h.sum = clk_fnv(CLK_FNV_INIT, img, total);
  memcpy(img, &h, sizeof h);
  *image = img;
  *image_size = total;
  return DV_OK;
}

/* Check an image; on success *meta and *bin point into it. */
static dv_status clk_image_check(cl_state *st, const void *image, size_t size, const char **meta,
                                 const unsigned char **bin, size_t *bin_size) {
  clk_head h;
  if (!image || size < sizeof h) return dv__error(DV_ERR_INVALID_ARGUMENT, "OpenCL program image of %zu bytes is too short", size);
  memcpy(&h, image, sizeof h);
  if (memcmp(h.magic, CLK_IMAGE_MAGIC, 8) != 0)
    return dv__error(DV_ERR_INVALID_ARGUMENT, "not a devarray OpenCL program image (bad magic)");
  if (h.meta_size == 0 || h.bin_size == 0 || h.meta_size > size || h.bin_size > size ||
      sizeof h + h.meta_size + h.bin_size != size)
    return dv__error(DV_ERR_INVALID_ARGUMENT, "damaged OpenCL program image (sizes %llu + %llu do not add up to %zu)",
                     (unsigned long long)h.meta_size, (unsigned long long)h.bin_size, size);
  uint64_t want = h.sum;
  h.sum = 0;
  uint64_t got = clk_fnv(clk_fnv(CLK_FNV_INIT, &h, sizeof h), (const char *)image + sizeof h, size - sizeof h);
  if (got != want) return dv__error(DV_ERR_INVALID_ARGUMENT, "damaged OpenCL program image (checksum mismatch)");
  if (h.target != clk_target_hash(st))
    return dv__error(DV_ERR_INVALID_ARGUMENT, "OpenCL program image built for another device, driver or devarray version");
  const char *m = (const char *)image + sizeof h;
  if (m[h.meta_size - 1] != 0) return dv__error(DV_ERR_INVALID_ARGUMENT, "damaged OpenCL program image (metadata)");
  *meta = m;
  *bin = (const unsigned char *)m + h.meta_size;
  *bin_size = (size_t)h.bin_size;
  return DV_OK;
}

/* A module around a built program (takes p; on failure releases it). */
static dv_status clk_module_new(cl_state *st, const dv_build_req *req, cl_program p, const char *meta,
                                dv_bmodule **out) {
  dv_bmodule *m = dv__calloc(1, sizeof *m);
  char *name = dv__strdup(req->name ? req->name : "kernel"), *mcopy = dv__strdup(meta);
  if (!m || !name || !mcopy) {
    dv__free(m), dv__free(name), dv__free(mcopy);
    cl.clReleaseProgram(p);
    return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate a module");
  }
  if (req->const_bytes) {
    cl_int e;
    m->cbuf = cl.clCreateBuffer(st->ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, req->const_bytes,
                                (void *)req->const_init, &e);
    if (!m->cbuf) {
      dv__free(m), dv__free(name), dv__free(mcopy);
      cl.clReleaseProgram(p);
      return clk_fail(e, "clCreateBuffer (the constant buffer)");
    }
  }
  m->prog = p;
  m->cbytes = req->const_bytes;
  m->name = name;
  m->meta = mcopy;
  pthread_mutex_init(&m->m, NULL);
  *out = m;
  return DV_OK;
}

static dv_status clk_req_check(cl_state *st, const dv_build_req *req) {
  if (!req || !req->source) return dv__error(DV_ERR_NULL_ARGUMENT, "OpenCL build request without source");
  if (req->const_bytes && !req->const_init)
    return dv__error(DV_ERR_NULL_ARGUMENT, "OpenCL build request with %zu constant bytes and no data", req->const_bytes);
  cl_ulong cmax = 0;
  cl.clGetDeviceInfo(st->device, CL_DEVICE_MAX_CONSTANT_BUFFER_SIZE, sizeof cmax, &cmax, NULL);
  if (req->const_bytes > cmax)
    return dv__error(DV_ERR_LAUNCH_CONFIG,
                     "constant arrays of \"%s\" take %zu bytes, over the device's %llu (CL_DEVICE_MAX_CONSTANT_BUFFER_SIZE)",
                     req->name ? req->name : "kernel", req->const_bytes, (unsigned long long)cmax);
  return DV_OK;
}

dv_status dv__clk_module_build(void *state, const dv_build_req *req, dv_bmodule **out, void **image,
                               size_t *image_size, char **log) {
  cl_state *st = state;
  *out = NULL;
  if (image) *image = NULL;
  if (image_size) *image_size = 0;
  if (log) *log = NULL;
  dv_status rc = clk_req_check(st, req);
  if (rc) return rc;
  char *opts = clk_options(req);
  if (!opts) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate build options");
  cl_int e;
  const char *src = req->source;
  cl_program p = cl.clCreateProgramWithSource(st->ctx, 1, &src, NULL, &e);
  if (!p) {
    dv__free(opts);
    return clk_fail(e, "clCreateProgramWithSource");
  }
  rc = clk_build(st, p, opts, req->name ? req->name : "kernel", log, DV_ERR_COMPILE);
  dv__free(opts);
  char *meta = NULL;
  if (!rc) rc = clk_meta_collect(p, &meta);
  if (!rc && image && image_size) rc = clk_image_make(st, p, meta, image, image_size);
  if (rc) {
    cl.clReleaseProgram(p);
    dv__free(meta);
    return rc;
  }
  rc = clk_module_new(st, req, p, meta, out);
  dv__free(meta);
  if (rc && image) {
    dv__free(*image);
    *image = NULL;
    if (image_size) *image_size = 0;
  }
  return rc;
}

dv_status dv__clk_module_load(void *state, const dv_build_req *req, const void *image, size_t image_size,
                              dv_bmodule **out, char **log) {
  cl_state *st = state;
  *out = NULL;
  if (log) *log = NULL;
  dv_status rc = clk_req_check(st, req);
  if (rc) return rc;
  const char *meta = NULL;
  const unsigned char *bin = NULL;
  size_t bsz = 0;
  rc = clk_image_check(st, image, image_size, &meta, &bin, &bsz);
  if (rc) return rc;
  cl_int e, bst = CL_SUCCESS;
  cl_program p = cl.clCreateProgramWithBinary(st->ctx, 1, &st->device, &bsz, &bin, &bst, &e);
  if (!p || bst != CL_SUCCESS) {
    if (p) cl.clReleaseProgram(p);
    cl_int code = p ? bst : e;
    return dv__error(DV_ERR_INVALID_ARGUMENT, "OpenCL refused the program image of \"%s\": %s (%d)",
                     req->name ? req->name : "kernel", dv__cl_error_name(code), code);
  }
  char *opts = clk_options(req);
  if (!opts) {
    cl.clReleaseProgram(p);
    return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate build options");
  }
  rc = clk_build(st, p, opts, req->name ? req->name : "kernel", log, DV_ERR_INVALID_ARGUMENT);
  dv__free(opts);
  if (rc) {
    cl.clReleaseProgram(p);
    return rc;
  }
  return clk_module_new(st, req, p, meta, out);
}

static dv_status clk_unload(dv_bmodule *m) {
  for (dv_bkernel *k = m->kernels, *next; k; k = next) {
    next = k->next;
    cl.clReleaseKernel(k->k);
    pthread_mutex_destroy(&k->m);
    dv__free(k->name);
    dv__free((char *)k->kinds);
    dv__free(k);
  }
  cl_int e1 = m->cbuf ? cl.clReleaseMemObject(m->cbuf) : CL_SUCCESS;
  cl_int e2 = cl.clReleaseProgram(m->prog);
  pthread_mutex_destroy(&m->m);
  dv__free(m->name);
  dv__free(m->meta);
  dv__free(m);
  if (e1) return clk_fail(e1, "clReleaseMemObject (the constant buffer)");
  if (e2) return clk_fail(e2, "clReleaseProgram");
  return DV_OK;
}

dv_status dv__clk_module_unload(void *state, dv_bmodule *m) {
  (void)state;
  if (!m) return DV_OK;
  return clk_unload(m);
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
             : clk_fail(e, "clCreateKernel");
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
    rc = clk_fail(e, "clGetKernelInfo");
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
    rc = clk_fail(e, "clSetKernelArg (the constant buffer)");
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
    if (e) return clk_fail(e, "clEnqueueCopyBuffer (into the constant buffer)");
  } else {
    /* A snapshot of the host bytes, freed when the write is done: the
     * caller's memory may change as soon as this returns. */
    void *copy = dv__malloc(bytes);
    if (!copy) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate %zu bytes of constant data", bytes);
    memcpy(copy, src.ptr, bytes);
    e = cl.clEnqueueWriteBuffer(s->q, m->cbuf, CL_FALSE, offset, bytes, copy, 0, NULL, &ev);
    if (e) {
      dv__free(copy);
      return clk_fail(e, "clEnqueueWriteBuffer (into the constant buffer)");
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

static dv_status clk_arg_error(const dv_bkernel *k, size_t i, cl_int e) {
  if (e == CL_INVALID_ARG_SIZE || e == CL_INVALID_ARG_VALUE || e == CL_INVALID_MEM_OBJECT)
    return dv__error(DV_ERR_KERNEL_ARGUMENT, "argument %zu of kernel \"%s\" does not fit its parameter: %s (%d)", i,
                     k->name, dv__cl_error_name(e), e);
  return clk_fail(e, "clSetKernelArg");
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
  if (!rc) e = cl.clEnqueueNDRangeKernel(s->q, k->k, dims, NULL, global, local, 0, NULL, NULL);
  pthread_mutex_unlock(&k->m);
  if (rc) return rc;
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
      return clk_fail(e, "clEnqueueNDRangeKernel");
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
  if (e) return clk_fail(e, "clRetainMemObject");
  *buf = native;
  return DV_OK;
}

dv_status dv__clk_buffer_unwrap(void *state, void *buf) {
  (void)state;
  cl_int e = cl.clReleaseMemObject(buf); /* our retain only */
  if (e) return clk_fail(e, "clReleaseMemObject");
  return DV_OK;
}

/* ---- the strided-copy kernel --------------------------------------------------------------- */

/* The built-in copy module, built on first use; NOT_SUPPORTED (the planner
 * then stages through host memory) if it cannot be built. */
static dv_status clk_copy_module(cl_state *st, dv_bmodule **out) {
  pthread_mutex_lock(&st->kmu);
  if (!st->copy_mod && st->copy_status == DV_OK) {
    static const char line[] = "\n#line 1 \"copy_kernels.dvk\"\n";
    size_t n = strlen(dv__kernel_header) + strlen(line) + strlen(dv__copy_kernels_source) + 1;
    char *tu = dv__malloc(n);
    dv_status rc;
    if (!tu) {
      rc = dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate the copy kernels' source");
    } else {
      snprintf(tu, n, "%s%s%s", dv__kernel_header, line, dv__copy_kernels_source);
      dv_build_req req = {.name = "copy_kernels.dvk", .source = tu, .options = ""};
      rc = dv__clk_module_build(st, &req, &st->copy_mod, NULL, NULL, NULL);
      dv__free(tu);
    }
    if (rc) {
      st->copy_status = rc;
      dv__log(DV_LOG_WARN, "OpenCL: the strided-copy kernel is unavailable (%s: %s); such copies are staged through host memory",
              dv_status_name(rc), dv_last_error());
    }
  }
  *out = st->copy_mod;
  dv_status rc = st->copy_status;
  pthread_mutex_unlock(&st->kmu);
  return rc ? DV_ERR_NOT_SUPPORTED : DV_OK;
}

/* A device-to-device copy prepared for the kernel: word size, dimensions
 * of words (merged), the kernel. */
typedef struct clk_copy {
  dv_bkernel *k;
  dv_bkview sv, dv;
  int64_t words;
} clk_copy;

/* Plan c (offsets soff/doff on the device buffers it will use) for the
 * kernel; NOT_SUPPORTED where the kernel cannot do it. */
static dv_status clk_copy_plan(cl_state *st, const dv_strided *c, size_t soff, size_t doff, clk_copy *p) {
  /* Word size: the widest power of two (<= 16 and the base alignment) that
   * divides the item size, both offsets and every stride. */
  uint64_t bits = (uint64_t)c->itemsize | (uint64_t)soff | (uint64_t)doff | 16;
  uint64_t count = 1;
  for (int i = 0; i < c->nd; i++) {
    count *= (uint64_t)c->shape[i];
    if (c->shape[i] > 1) {
      bits |= (uint64_t)(c->src_strides[i] < 0 ? -c->src_strides[i] : c->src_strides[i]);
      bits |= (uint64_t)(c->dst_strides[i] < 0 ? -c->dst_strides[i] : c->dst_strides[i]);
    }
  }
  uint64_t w = bits & (~bits + 1);
  while (w > 1 && st->info.base_alignment && w > st->info.base_alignment) w >>= 1;
  /* Dimensions of words, outermost first: drop extents of 1, append the
   * words of one element, merge what is contiguous on both sides. */
  int64_t n[DV_MAXDIMS + 1], ss[DV_MAXDIMS + 1], ds[DV_MAXDIMS + 1];
  int nd = 0;
  for (int i = 0; i <= c->nd; i++) {
    int64_t e, a, b;
    if (i < c->nd) {
      if (c->shape[i] == 1) continue;
      e = c->shape[i], a = c->src_strides[i], b = c->dst_strides[i];
    } else {
      if (c->itemsize == w) break;
      e = (int64_t)(c->itemsize / w), a = b = (int64_t)w;
    }
    if (nd > 0 && ss[nd - 1] == a * e && ds[nd - 1] == b * e) {
      n[nd - 1] *= e, ss[nd - 1] = a, ds[nd - 1] = b;
      continue;
    }
    n[nd] = e, ss[nd] = a, ds[nd] = b;
    nd++;
  }
  if (nd == 0) n[0] = 1, ss[0] = ds[0] = 0, nd = 1;
  if (nd > DV_BKVIEW_MAXDIMS) return DV_ERR_NOT_SUPPORTED; /* the planner stages it */
  p->words = (int64_t)(count * (c->itemsize / w));
  dv_bmodule *m;
  dv_status rc = clk_copy_module(st, &m);
  if (rc) return rc;
  char name[32];
  snprintf(name, sizeof name, "dv_copy_w%u_i%d", (unsigned)w, (uint64_t)p->words < ((uint64_t)1 << 31) ? 32 : 64);
  rc = dv__clk_kernel_get(st, m, name, &p->k);
  if (rc) return rc;
  memset(&p->sv, 0, sizeof p->sv);
  memset(&p->dv, 0, sizeof p->dv);
  p->sv.ndim = p->dv.ndim = nd;
  for (int i = 0; i < nd; i++)
    p->sv.shape[i] = p->dv.shape[i] = n[i], p->sv.strides[i] = ss[i], p->dv.strides[i] = ds[i];
  return DV_OK;
}

static dv_status clk_copy_run(cl_state *st, dv_bstream *s, const clk_copy *p, void *src, size_t soff, void *dst,
                              size_t doff) {
  int64_t so = (int64_t)soff, dof = (int64_t)doff, cnt = p->words;
  dv_barg args[7] = {
      {.kind = DV_BARG_BUFFER, .buf = src},
      {.kind = DV_BARG_VALUE, .type = DV_INT64, .value = &so, .size = sizeof so},
      {.kind = DV_BARG_VIEW, .value = &p->sv, .size = sizeof p->sv},
      {.kind = DV_BARG_BUFFER, .buf = dst},
      {.kind = DV_BARG_VALUE, .type = DV_INT64, .value = &dof, .size = sizeof dof},
      {.kind = DV_BARG_VIEW, .value = &p->dv, .size = sizeof p->dv},
      {.kind = DV_BARG_VALUE, .type = DV_INT64, .value = &cnt, .size = sizeof cnt},
  };
  uint64_t block = p->k->wg < 256 ? p->k->wg : 256, grid = ((uint64_t)p->words + block - 1) / block;
  if (grid > 8192) grid = 8192; /* the loop strides over the rest */
  dv_blaunch l = {.grid = {(uint32_t)grid, 1, 1}, .block = {(uint32_t)block, 1, 1}, .nargs = 7, .args = args};
  return dv__clk_launch(st, s, p->k, &l);
}

/* Whether a host view is dense (its elements fill one block of
 * count * itemsize bytes, in any order and direction); *lo: the block's
 * start relative to element 0 (<= 0). */
static bool clk_dense(const dv_strided *c, const int64_t *strides, int64_t *lo) {
  int idx[DV_MAXDIMS], k = 0;
  *lo = 0;
  for (int i = 0; i < c->nd; i++) {
    if (c->shape[i] == 1) continue;
    if (strides[i] < 0) *lo += (c->shape[i] - 1) * strides[i];
    int j = k++;
    int64_t a = strides[i] < 0 ? -strides[i] : strides[i];
    while (j > 0 && (strides[idx[j - 1]] < 0 ? -strides[idx[j - 1]] : strides[idx[j - 1]]) > a) idx[j] = idx[j - 1], j--;
    idx[j] = i;
  }
  int64_t want = (int64_t)c->itemsize;
  for (int j = 0; j < k; j++) {
    int64_t a = strides[idx[j]] < 0 ? -strides[idx[j]] : strides[idx[j]];
    if (a != want) return false;
    want *= c->shape[idx[j]];
  }
  return true;
}

/*
 * Strided copies on the device.  Device to device: the copy kernel.  Host
 * to device and back, where the host view is dense (the elements fill one
 * block, in any order): the block crosses the bus as one contiguous write or
 * read into a temporary device buffer, and the kernel packs or unpacks the
 * device view, so no host staging or repack is needed.  Anything else is
 * NOT_SUPPORTED and the planner stages it through host memory.
 */
dv_status dv__clk_copy_strided(void *state, dv_bstream *s, const dv_strided *c) {
  cl_state *st = state;
  if ((!c->src.buf && !c->dst.buf) || c->nd < 0 || c->nd > DV_MAXDIMS || !c->itemsize) return DV_ERR_NOT_SUPPORTED;
  uint64_t count = 1;
  for (int i = 0; i < c->nd; i++) {
    if (c->shape[i] <= 0) return DV_OK;
    count *= (uint64_t)c->shape[i];
  }
  bool sync = (c->flags & DV_COPY_SYNC) != 0;
  clk_copy p;
  dv_status rc;
  if (c->src.buf && c->dst.buf) {
    rc = clk_copy_plan(st, c, c->src.offset, c->dst.offset, &p);
    if (rc) return rc;
    rc = clk_copy_run(st, s, &p, c->src.buf, c->src.offset, c->dst.buf, c->dst.offset);
  } else {
    bool h2d = c->dst.buf != NULL;
    int64_t lo;
    size_t bytes = (size_t)count * c->itemsize;
    if (!clk_dense(c, h2d ? c->src_strides : c->dst_strides, &lo) || bytes > st->info.max_allocation)
      return DV_ERR_NOT_SUPPORTED;
    size_t toff = (size_t)-lo; /* element 0 in the temporary buffer */
    rc = h2d ? clk_copy_plan(st, c, toff, c->dst.offset, &p) : clk_copy_plan(st, c, c->src.offset, toff, &p);
    if (rc) return rc;
    cl_int e;
    cl_mem tmp = cl.clCreateBuffer(st->ctx, CL_MEM_READ_WRITE, bytes, NULL, &e);
    if (!tmp) return DV_ERR_NOT_SUPPORTED; /* no room: the planner stages through host memory */
    if (h2d) {
      e = cl.clEnqueueWriteBuffer(s->q, tmp, CL_FALSE, 0, bytes, (const char *)c->src.ptr + lo, 0, NULL, NULL);
      rc = e ? clk_fail(e, "clEnqueueWriteBuffer") : clk_copy_run(st, s, &p, tmp, toff, c->dst.buf, c->dst.offset);
    } else {
      rc = clk_copy_run(st, s, &p, c->src.buf, c->src.offset, tmp, toff);
      cl_event ev = NULL;
      if (!rc) {
        e = cl.clEnqueueReadBuffer(s->q, tmp, sync ? CL_TRUE : CL_FALSE, 0, bytes, (char *)c->dst.ptr + lo, 0, NULL,
                                   &ev);
        if (e) rc = clk_fail(e, "clEnqueueReadBuffer");
        else cl_track(s, ev);
      }
    }
    /* Released now, deleted by OpenCL once the queued commands using it are done. */
    cl.clReleaseMemObject(tmp);
  }
  if (rc) {
    cl.clFinish(s->q); /* part of it may be queued: leave nothing half done behind */
    return rc;
  }
  if (sync) {
    cl_int e = cl.clFinish(s->q);
    if (e) return clk_fail(e, "clFinish");
  } else {
    cl.clFlush(s->q);
  }
  return DV_OK;
}

#else
typedef int dv__opencl_kernel_none; /* built without OpenCL headers: nothing here */
#endif /* DV_HAVE_OPENCL_HEADERS */
