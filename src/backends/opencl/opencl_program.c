/*
 * The OpenCL backend's modules: building a program from the translation unit
 * the kernel layer assembles (devarray's options first: -cl-kernel-arg-info,
 * and -cl-opt-disable for debug builds), the image it caches (a header, the
 * kernels' parameter kinds, the program binary, with a checksum checked
 * before the driver sees it: PoCL crashes on damaged binaries), loading
 * such an image, and unloading.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "opencl_kernel.h"

#if DV_HAVE_OPENCL_HEADERS

/* ---- the target: what a compiled image is for ---------------------------------------- */

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

dv_status dv__clk_kernel_target_id(void *state, char *buf, size_t cap) {
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
  int t = snprintf(tail, sizeof tail, "... #%016llx", (unsigned long long)dv__clk_fnv(CLK_FNV_INIT, full, n));
  memcpy(buf, full, cap - (size_t)t - 1);
  memcpy(buf + cap - (size_t)t - 1, tail, (size_t)t + 1);
  return DV_OK;
}

uint64_t dv__clk_target_hash(cl_state *st) {
  char id[2048];
  clk_target_full(st, id, sizeof id);
  return dv__clk_fnv(CLK_FNV_INIT, id, strlen(id));
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
  if (!p) return dv__clk_fail(e, "clCreateProgramWithSource");
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
  if (e) return dv__clk_fail(e, "clGetProgramInfo(CL_PROGRAM_KERNEL_NAMES)");
  char *names = dv__malloc(n + 1);
  if (!names) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate the kernel names");
  e = cl.clGetProgramInfo(p, CL_PROGRAM_KERNEL_NAMES, n, names, NULL);
  names[n] = 0;
  if (e) {
    dv__free(names);
    return dv__clk_fail(e, "clGetProgramInfo(CL_PROGRAM_KERNEL_NAMES)");
  }
  size_t cap = 64, len = 0;
  char *meta = dv__malloc(cap);
  dv_status rc = meta ? DV_OK : dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate kernel metadata");
  if (meta) meta[0] = 0;
  for (char *save = NULL, *name = strtok_r(names, ";", &save); name && !rc; name = strtok_r(NULL, ";", &save)) {
    cl_kernel k = cl.clCreateKernel(p, name, &e);
    if (!k) {
      rc = dv__clk_fail(e, "clCreateKernel");
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
    if (e) rc = dv__clk_fail(e, "clGetKernelInfo(CL_KERNEL_NUM_ARGS)");
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
  if (e) return dv__clk_fail(e, "clGetProgramInfo(CL_PROGRAM_BINARY_SIZES)");
  if (bsz == 0) return DV_OK; /* no binary: nothing to cache */
  size_t msz = strlen(meta) + 1, total = sizeof(clk_head) + msz + bsz;
  unsigned char *img = dv__malloc(total);
  if (!img) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate a %zu-byte program image", total);
  unsigned char *bin = img + sizeof(clk_head) + msz;
  e = cl.clGetProgramInfo(p, CL_PROGRAM_BINARIES, sizeof bin, &bin, NULL);
  if (e) {
    dv__free(img);
    return dv__clk_fail(e, "clGetProgramInfo(CL_PROGRAM_BINARIES)");
  }
  clk_head h;
  memset(&h, 0, sizeof h);
  memcpy(h.magic, CLK_IMAGE_MAGIC, 8);
  h.target = dv__clk_target_hash(st);
  h.meta_size = msz;
  h.bin_size = bsz;
  memcpy(img, &h, sizeof h);
  memcpy(img + sizeof h, meta, msz);
  h.sum = dv__clk_fnv(CLK_FNV_INIT, img, total);
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
  uint64_t got = dv__clk_fnv(dv__clk_fnv(CLK_FNV_INIT, &h, sizeof h), (const char *)image + sizeof h, size - sizeof h);
  if (got != want) return dv__error(DV_ERR_INVALID_ARGUMENT, "damaged OpenCL program image (checksum mismatch)");
  if (h.target != dv__clk_target_hash(st))
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
      return dv__clk_fail(e, "clCreateBuffer (the constant buffer)");
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
    return dv__clk_fail(e, "clCreateProgramWithSource");
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

dv_status dv__clk_unload(dv_bmodule *m) {
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
  if (e1) return dv__clk_fail(e1, "clReleaseMemObject (the constant buffer)");
  if (e2) return dv__clk_fail(e2, "clReleaseProgram");
  return DV_OK;
}

dv_status dv__clk_module_unload(void *state, dv_bmodule *m) {
  (void)state;
  if (!m) return DV_OK;
  return dv__clk_unload(m);
}

#else
typedef int dv__opencl_program_none; /* built without OpenCL headers: nothing here */
#endif /* DV_HAVE_OPENCL_HEADERS */
