/*
 * The OpenCL backend: any OpenCL 1.2+ device (AMD, Intel, NVIDIA GPUs,
 * CPUs through PoCL) through the ICD loader, libOpenCL.so.1, which is loaded
 * with dlopen: the library neither links against it nor needs it to run.
 *
 *  - Device memory is a cl_mem buffer; views are (buffer, byte offset).
 *    Kernels take the buffer and the offset as arguments, so no sub-buffer
 *    is ever made and CL_DEVICE_MEM_BASE_ADDR_ALIGN never constrains a view.
 *  - A stream is an in-order command queue (with profiling, for event
 *    timing); an event is the marker of its last record.
 *  - A host callback is a marker whose completion callback runs the
 *    function and then completes a user event that a barrier on the queue
 *    waits for, so that later commands wait for the callback, as on CUDA.
 *  - Pinned memory is a CL_MEM_ALLOC_HOST_PTR buffer mapped once; mapped
 *    memory is the same buffer, whose handle is also the device view;
 *    registration wraps existing memory with CL_MEM_USE_HOST_PTR.
 *  - Device-to-device copies that rects cannot express use the strided-copy
 *    kernel (src/kernel/copy_kernels.dvk) built once per context on first
 *    use; programs, kernels and launches are in opencl_kernel.c.
 *
 * This file: loading libOpenCL.so.1, probe, opening and closing a device,
 * and the backend table.  The other methods: device and host memory in
 * opencl_memory.c, copies in opencl_copy.c, streams and host callbacks in
 * opencl_stream.c, events in opencl_event.c (opencl_internal.h lists all).
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "opencl_internal.h"

#if DV_HAVE_OPENCL_HEADERS

/* ---- the dispatch table ------------------------------------------------------ */

static void *cl_lib;
static dv_status cl_load_status = DV_ERR_LIBRARY_LOAD;
static char cl_load_msg[512];
static pthread_once_t cl_once = PTHREAD_ONCE_INIT;

static void cl_load(void) {
  const char *names[] = {"libOpenCL.so.1", "libOpenCL.so"};
  for (size_t i = 0; i < 2 && !cl_lib; i++) cl_lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
  if (!cl_lib) {
    const char *e = dlerror();
    snprintf(cl_load_msg, sizeof cl_load_msg, "libOpenCL.so.1 could not be loaded: %s", e ? e : "not found");
    cl_load_status = DV_ERR_LIBRARY_LOAD;
    return;
  }
#define DV_CL(name)                                                                     \
  *(void **)&cl.name = dlsym(cl_lib, #name);                                            \
  if (!cl.name) {                                                                       \
    snprintf(cl_load_msg, sizeof cl_load_msg, "libOpenCL.so.1 lacks the entry point %s", #name); \
    cl_load_status = DV_ERR_SYMBOL_LOAD;                                                \
    return;                                                                             \
  }
#include "opencl_symbols.def"
#undef DV_CL
  cl_load_status = DV_OK;
}

static dv_status cl_ensure(void) {
  pthread_once(&cl_once, cl_load);
  if (cl_load_status) return dv__error(cl_load_status, "%s", cl_load_msg);
  return DV_OK;
}

/* ---- probe, open and close ------------------------------------------------------ */

static dv_status clb_probe(char *reason, size_t cap) {
  dv_status rc = cl_ensure();
  cl_dev_entry devs[CL_MAX_DEVS];
  unsigned n = 0;
  if (!rc) rc = dv__cl_enumerate(devs, &n);
  if (rc) {
    if (reason && cap) snprintf(reason, cap, "%s", dv_last_error());
    return rc;
  }
  if (reason && cap) {
    size_t k = (size_t)snprintf(reason, cap, "%u device(s)", n);
    for (unsigned i = 0; i < n && k < cap; i++) {
      char plat[96] = "";
      cl_ulong gm = 0, ma = 0;
      cl_uint bits = 0;
      cl.clGetPlatformInfo(devs[i].p, CL_PLATFORM_NAME, sizeof plat, plat, NULL);
      cl.clGetDeviceInfo(devs[i].d, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof gm, &gm, NULL);
      cl.clGetDeviceInfo(devs[i].d, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof ma, &ma, NULL);
      cl.clGetDeviceInfo(devs[i].d, CL_DEVICE_MEM_BASE_ADDR_ALIGN, sizeof bits, &bits, NULL);
      k += (size_t)snprintf(reason + k, cap - k,
                            "\n      %u:%u %s [%s%s] on platform \"%s\": global memory %llu MiB, max allocation "
                            "%llu MiB, base alignment %u bytes",
                            devs[i].pi, devs[i].di, devs[i].name,
                            (devs[i].type & CL_DEVICE_TYPE_GPU) ? "GPU" : (devs[i].type & CL_DEVICE_TYPE_CPU) ? "CPU" : "other",
                            devs[i].simulator ? ", simulator: only when named" : "",
                            plat, (unsigned long long)(gm >> 20), (unsigned long long)(ma >> 20), bits / 8);
    }
  }
  return DV_OK;
}

static void cl_fill_info(cl_state *st) {
  dv_device_info *d = &st->info;
  memset(d, 0, sizeof *d);
  snprintf(d->backend, sizeof d->backend, "opencl");
  cl.clGetDeviceInfo(st->device, CL_DEVICE_NAME, sizeof d->name, d->name, NULL);
  cl.clGetDeviceInfo(st->device, CL_DEVICE_VENDOR, sizeof d->vendor, d->vendor, NULL);
  char ver[64] = "", plat[128] = "";
  cl.clGetDeviceInfo(st->device, CL_DRIVER_VERSION, sizeof ver, ver, NULL);
  cl.clGetPlatformInfo(st->platform, CL_PLATFORM_NAME, sizeof plat, plat, NULL);
  snprintf(d->driver_version, sizeof d->driver_version, "%s", ver);
  cl_ulong gm = 0, ma = 0;
  cl_uint align_bits = 0;
  cl_bool unified = CL_FALSE;
  cl.clGetDeviceInfo(st->device, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof gm, &gm, NULL);
  cl.clGetDeviceInfo(st->device, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof ma, &ma, NULL);
  cl.clGetDeviceInfo(st->device, CL_DEVICE_MEM_BASE_ADDR_ALIGN, sizeof align_bits, &align_bits, NULL);
  cl.clGetDeviceInfo(st->device, CL_DEVICE_HOST_UNIFIED_MEMORY, sizeof unified, &unified, NULL);
  d->total_memory = gm;
  d->max_allocation = ma;
  d->base_alignment = align_bits / 8;
  d->can_map_host_memory = 1; /* CL_MEM_ALLOC_HOST_PTR / USE_HOST_PTR are core OpenCL */
  d->managed_memory = 0;
  (void)unified;
  (void)plat;
}

static dv_status clb_open(const dv_backend_config *cfg, void **state) {
  *state = NULL;
  dv_status rc = cl_ensure();
  if (rc) return rc;
  cl_dev_entry dev;
  rc = dv__cl_choose(cfg, &dev);
  if (rc) return rc;
  cl_state *st = dv__calloc(1, sizeof *st);
  if (!st) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate the OpenCL state");
  st->platform = dev.p;
  st->device = dev.d;
  cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)dev.p, 0};
  cl_int e;
  st->ctx = cl.clCreateContext(props, 1, &dev.d, NULL, NULL, &e);
  if (!st->ctx) {
    dv__free(st);
    return dv__clk_fail(e, "clCreateContext");
  }
  st->internal = cl.clCreateCommandQueue(st->ctx, dev.d, 0, &e);
  if (!st->internal) {
    cl.clReleaseContext(st->ctx);
    dv__free(st);
    return dv__clk_fail(e, "clCreateCommandQueue");
  }
  pthread_mutex_init(&st->lock, NULL);
  rc = dv__cl_callbacks_start(st);
  if (rc) {
    cl.clReleaseCommandQueue(st->internal);
    cl.clReleaseContext(st->ctx);
    pthread_mutex_destroy(&st->lock);
    dv__free(st);
    return rc;
  }
  cl_fill_info(st);
  dv__cl_kernel_init(st);
  *state = st;
  return DV_OK;
}

static void clb_close(void *state) {
  cl_state *st = state;
  dv__cl_callbacks_stop(st);
  cl.clFinish(st->internal);
  dv__cl_kernel_fini(st);
  cl.clReleaseCommandQueue(st->internal);
  cl.clReleaseContext(st->ctx);
  pthread_mutex_destroy(&st->lock);
  dv__free(st->live);
  dv__free(st);
}

static dv_status clb_device_info(void *state, dv_device_info *out) {
  *out = ((cl_state *)state)->info;
  return DV_OK;
}

const dv_backend dv__backend_opencl = {
    .name = "opencl",
    .caps = DV_BCAP_BASE | DV_BCAP_STRIDED | DV_BCAP_KERNELS | DV_BCAP_NATIVE | DV_BCAP_BUFFER_CHECK | DV_BCAP_GRAPHS,
    .probe = clb_probe,
    .open = clb_open,
    .close = clb_close,
    .device_info = clb_device_info,
    .mem_alloc = dv__clb_mem_alloc,
    .mem_free = dv__clb_mem_free,
    .mem_info = dv__clb_mem_info,
    .host_alloc = dv__clb_host_alloc,
    .host_free = dv__clb_host_free,
    .host_register = dv__clb_host_register,
    .host_unregister = dv__clb_host_unregister,
    .copy_rect = dv__clg_copy_rect,
    .copy_strided = dv__clg_copy_strided,
    .memset = dv__clg_memset,
    .stream_create = dv__clb_stream_create,
    .stream_destroy = dv__clb_stream_destroy,
    .stream_sync = dv__clb_stream_sync,
    .stream_query = dv__clb_stream_query,
    .stream_callback = dv__clg_stream_callback,
    .event_create = dv__clb_event_create,
    .event_destroy = dv__clb_event_destroy,
    .event_record = dv__clg_event_record,
    .event_wait = dv__clg_event_wait,
    .event_query = dv__clb_event_query,
    .event_sync = dv__clb_event_sync,
    .event_elapsed = dv__clb_event_elapsed,
    .kernel_limits = dv__clk_kernel_limits,
    .kernel_target_id = dv__clk_kernel_target_id,
    .module_build = dv__clk_module_build,
    .module_load = dv__clk_module_load,
    .module_unload = dv__clk_module_unload,
    .kernel_get = dv__clk_kernel_get,
    .kernel_attrs = dv__clk_kernel_attrs,
    .constant_write = dv__clg_constant_write,
    .launch = dv__clg_launch,
    .native_context = dv__clk_native_context,
    .native_stream = dv__clk_native_stream,
    .native_buffer = dv__clk_native_buffer,
    .buffer_wrap = dv__clk_buffer_wrap,
    .buffer_unwrap = dv__clk_buffer_unwrap,
    .kernel_params = dv__clk_kernel_params,
    .buffer_check = dv__clb_buffer_check,
    .graph_begin = dv__clg_graph_begin,
    .graph_end = dv__clg_graph_end,
    .graph_host_fn = dv__clg_graph_host_fn,
    .graph_instantiate = dv__clg_graph_instantiate,
    .graph_launch = dv__clg_graph_launch,
    .graph_exec_destroy = dv__clg_graph_exec_destroy,
    .graph_destroy = dv__clg_graph_destroy,
};

#else /* no OpenCL headers at build time */

static dv_status clb_probe(char *reason, size_t cap) {
  if (reason && cap) snprintf(reason, cap, "built without OpenCL headers (install opencl-headers and rebuild)");
  return DV_ERR_BACKEND_UNAVAILABLE;
}
static dv_status clb_open(const dv_backend_config *cfg, void **state) {
  (void)cfg;
  *state = NULL;
  return dv__error(DV_ERR_BACKEND_UNAVAILABLE, "built without OpenCL headers (install opencl-headers and rebuild)");
}
/* A placeholder (DV_BCAP_ENTRY alone): open always fails. */
const dv_backend dv__backend_opencl = {.name = "opencl", .caps = DV_BCAP_ENTRY, .probe = clb_probe, .open = clb_open};
dv_status dv__cl_build(void *state, const char *source, const char *options, void **program, char **log) {
  (void)state, (void)source, (void)options;
  *program = NULL;
  if (log) *log = NULL;
  return dv__error(DV_ERR_BACKEND_UNAVAILABLE, "built without OpenCL headers");
}
void dv__cl_program_release(void *program) { (void)program; }
#endif
