/*
 * The CUDA driver (issue 35: one of the CUDA family's two drivers, beside
 * ../hip/): NVIDIA GPUs through the CUDA driver API, loaded at run time with
 * dlopen("libcuda.so.1") through the entry list ../cudafam/fam_symbols.def.
 * The library never links against libcuda or libcudart and builds with no
 * CUDA software present (the types are declared in ../cudafam/fam_api.h).
 *
 * This file loads the driver, probes it, opens contexts through the family
 * core (../cudafam/: every other method of the table), and gives the core
 * what is CUDA's own: kernels compiled by NVRTC (nvrtc.c) to PTX or CUBIN,
 * the built-in copy kernels as PTX (copy_kernels.ptx, embedded at build
 * time), and the per-context state that holds the nvrtc_library option.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../dynlib.h"
#include "../cudafam/fam.h"
#include "nvrtc.h"

/* The built-in copy kernels as PTX (copy_kernels.ptx, embedded at build
 * time by cmake/embed.cmake; scripts/gen-cuda-ptx.sh makes the file). */
extern const char dv__cuda_copy_ptx[];

/* What a CUDA context keeps of its own (cu_state.drv_state). */
typedef struct cuda_ctx {
  char nvrtc_library[DV_OPTION_STRING_MAX + 1]; /* the option's value ("": search) */
} cuda_ctx;
#define CUDA_CTX(st) ((cuda_ctx *)(st)->drv_state)

static const struct dv_cu_kernel_ops cuda_kernel_ops;

static void *cu_lib;
/* CUDA's own entry points, as loaded (the contexts reach them through cuda_driver). */
static dv_cu_api cuda_api;
static atomic_int cuda_forked;
static void cuda_fill_info(cu_state *st, const dv_backend_config *cfg);
/* How CUDA's messages name each entry (fam_symbols.def's cuda_name column). */
static const char *const cuda_names[DV_CU_E_COUNT] = {
#define DV_CU(ret, symbol, cuda_name, hip_name, params) [DV_CU_E_##symbol] = cuda_name,
#include "../cudafam/fam_symbols.def"
#undef DV_CU
};
static const dv_cu_driver cuda_driver = {.vendor = "CUDA",
                                         .backend = "cuda",
                                         .api = &cuda_api,
                                         .names = cuda_names,
                                         .state_bytes = sizeof(cuda_ctx),
                                         .fill_info = cuda_fill_info,
                                         .kops = &cuda_kernel_ops,
                                         .forked = &cuda_forked};
static dv_status cu_load_status;
static char cu_load_msg[512];
static pthread_once_t cu_once = PTHREAD_ONCE_INIT;

static void cu_after_fork_child(void) { atomic_store(&cuda_forked, 1); }

/* The driver's entry points (../cudafam/fam_symbols.def).  cuEventElapsedTime_v2 falls
 * back to the old name, which has the same prototype, and so does
 * cuStreamWaitValue64_v2, which may be missing too (the staging threads are
 * then not used); cuFuncGetParamInfo (CUDA 12.4) may be missing, and so may
 * the managed-memory hints (cuMemPrefetchAsync[_v2], cuMemAdvise[_v2]), and the memory-pool
 * entries (CUDA 11.2; the "async" manager is then refused). */
#define DV_CU(ret, symbol, cuda_name, hip_name, params) {#symbol, NULL, (void **)&cuda_api.symbol, 0},
static dv_dynsym cu_syms[] = { /* written once, in cu_load */
#include "../cudafam/fam_symbols.def"
    {"cuFuncGetParamInfo", NULL, (void **)&cuda_api.cuFuncGetParamInfo, 1},
    {"cuPointerGetAttribute", NULL, (void **)&cuda_api.cuPointerGetAttribute, 1},
    {"cuMemPrefetchAsync", NULL, (void **)&cuda_api.cuMemPrefetchAsync, 1},
    {"cuMemAdvise", NULL, (void **)&cuda_api.cuMemAdvise, 1},
};
#undef DV_CU

static void cu_load(void) {
  static const char *const names[] = {"libcuda.so.1", "libcuda.so"};
  const size_t nsyms = sizeof cu_syms / sizeof cu_syms[0];
  for (size_t i = 0; i < nsyms; i++) {
    if (!strcmp(cu_syms[i].name, "cuEventElapsedTime_v2")) cu_syms[i].alt = "cuEventElapsedTime";
    if (!strcmp(cu_syms[i].name, "cuStreamWaitValue64_v2")) cu_syms[i].alt = "cuStreamWaitValue64", cu_syms[i].optional = 1;
    /* the stream-ordered allocator (CUDA 11.2): the "async" manager is refused without it */
    if (strstr(cu_syms[i].name, "MemPool") || !strcmp(cu_syms[i].name, "cuMemAllocFromPoolAsync") ||
        !strcmp(cu_syms[i].name, "cuMemFreeAsync"))
      cu_syms[i].optional = 1;
    /* graphs (CUDA 10 to 11.4): without them, graphs are refused */
    static const char *const graph_entries[] = {"cuStreamBeginCapture_v2", "cuStreamEndCapture",
                                                "cuGraphInstantiateWithFlags", "cuGraphLaunch",
                                                "cuGraphExecDestroy", "cuGraphDestroy"};
    for (size_t g = 0; g < sizeof graph_entries / sizeof graph_entries[0]; g++)
      if (!strcmp(cu_syms[i].name, graph_entries[g])) cu_syms[i].optional = 1;
    /* Managed memory's hints (fam_managed.c): the _v2 entries (CUDA 12.2+)
     * or the first ones (below); without either, DV_ERR_NOT_SUPPORTED. */
    if (!strcmp(cu_syms[i].name, "cuMemPrefetchAsync_v2") || !strcmp(cu_syms[i].name, "cuMemAdvise_v2"))
      cu_syms[i].optional = 1;
  }
  const char *which = NULL;
  cu_load_status = dv__dynlib_open("CUDA driver", names, 2, cu_syms, nsyms, &cu_lib, &which, cu_load_msg,
                                   sizeof cu_load_msg);
  if (cu_load_status) return;
  dv_CUresult r = cuda_api.cuInit(0);
  if (r != DV_CUDA_SUCCESS) {
    const char *n = NULL;
    cuda_api.cuGetErrorName(r, &n);
    snprintf(cu_load_msg, sizeof cu_load_msg, "cuInit failed: %s (%d)", n ? n : "?", r);
    cu_load_status = r == DV_CUDA_ERROR_NO_DEVICE ? DV_ERR_BACKEND_UNAVAILABLE : DV_ERR_DRIVER;
    return;
  }
  pthread_atfork(NULL, NULL, cu_after_fork_child);
  cu_load_status = DV_OK;
}

static dv_status cu_ensure(void) {
  pthread_once(&cu_once, cu_load);
  if (cu_load_status) return dv__error(cu_load_status, "%s", cu_load_msg);
  return DV_OK;
}

/* ---- probe, open ------------------------------------------------------------------------ */

static dv_status cub_probe(char *reason, size_t cap) {
  dv_status rc = cu_ensure();
  int n = 0;
  if (!rc && cuda_api.cuDeviceGetCount(&n) != DV_CUDA_SUCCESS) rc = dv__error(DV_ERR_DRIVER, "cuDeviceGetCount failed");
  if (!rc && n == 0) rc = dv__error(DV_ERR_BACKEND_UNAVAILABLE, "the CUDA driver reports no device");
  if (rc) {
    if (reason && cap) snprintf(reason, cap, "%s", dv_last_error());
    return rc;
  }
  if (reason && cap) {
    int v = 0;
    cuda_api.cuDriverGetVersion(&v);
    size_t k = (size_t)snprintf(reason, cap, "driver %d.%d, %d device(s)", v / 1000, (v % 1000) / 10, n);
    for (int i = 0; i < n && k < cap; i++) {
      dv_CUdevice d;
      char name[128] = "";
      if (cuda_api.cuDeviceGet(&d, i) == DV_CUDA_SUCCESS) cuda_api.cuDeviceGetName(name, sizeof name, d);
      k += (size_t)snprintf(reason + k, cap - k, "\n      %d: %s", i, name);
    }
  }
  return DV_OK;
}

/* The options CUDA reads itself (the family's cu_fill_info calls this after
 * the shared fields of the device's description). */
static void cuda_fill_info(cu_state *st, const dv_backend_config *cfg) {
  snprintf(CUDA_CTX(st)->nvrtc_library, sizeof CUDA_CTX(st)->nvrtc_library, "%s",
           cfg && cfg->nvrtc_library ? cfg->nvrtc_library : "");
}

static dv_status cub_open(const dv_backend_config *cfg, void **state) {
  *state = NULL;
  dv_status rc = cu_ensure();
  if (rc) return rc;
  return dv__cu_open(&cuda_driver, cfg, state);
}

/* ---- kernels: NVRTC, PTX and CUBIN ------------------------------------------------------ */

static int cuda_cc(const cu_state *st) { return st->info.compute_major * 10 + st->info.compute_minor; }

static dv_status cudak_target_id(cu_state *st, char *buf, size_t cap) {
  const dv_nvrtc *nv = NULL;
  dv_status rc = dv__nvrtc_load(CUDA_CTX(st)->nvrtc_library, st->driver_version, &nv);
  if (rc) return rc;
  char arch[32];
  int is_ptx = 0;
  rc = dv__nvrtc_target(nv, cuda_cc(st), arch, sizeof arch, &is_ptx);
  if (rc) return rc;
  snprintf(buf, cap, "cc %d.%d nvrtc %d.%d driver %d %s %s", st->info.compute_major,
           st->info.compute_minor, nv->major, nv->minor, st->driver_version,
           is_ptx ? "ptx" : "cubin", arch);
  return DV_OK;
}

/* NVRTC compiles for the device's architecture: CUBIN, or PTX where NVRTC
 * is older than the device (dv__nvrtc_target). */
static dv_status cudak_compile(cu_state *st, const dv_build_req *req, void **image, size_t *size, int *kind,
                               char **log) {
  *image = NULL, *size = 0, *log = NULL;
  const dv_nvrtc *nv = NULL;
  dv_status rc = dv__nvrtc_load(CUDA_CTX(st)->nvrtc_library, st->driver_version, &nv);
  if (rc) return rc;
  char arch[32];
  int is_ptx = 0;
  rc = dv__nvrtc_target(nv, cuda_cc(st), arch, sizeof arch, &is_ptx);
  if (rc) return rc;
  dv_nvrtc_out o;
  rc = dv__nvrtc_compile(nv, req->name, req->source, arch, req->flags, req->options, &o);
  *log = o.log;
  o.log = NULL;
  if (rc) {
    dv__nvrtc_out_free(&o);
    return rc;
  }
  *image = o.image, *size = o.size, *kind = o.is_ptx ? DV_CU_IMAGE_PTX : DV_CU_IMAGE_CUBIN;
  o.image = NULL;
  dv__nvrtc_out_free(&o);
  return DV_OK;
}

static dv_status cudak_copy_image(cu_state *st, const void **image, size_t *size, int *kind) {
  (void)st;
  *image = dv__cuda_copy_ptx, *size = 0, *kind = DV_CU_IMAGE_PTX;
  return DV_OK;
}

static const struct dv_cu_kernel_ops cuda_kernel_ops = {
    .image_kinds = 1u << DV_CU_IMAGE_CUBIN | 1u << DV_CU_IMAGE_PTX,
    .target_id = cudak_target_id,
    .compile = cudak_compile,
    .copy_image = cudak_copy_image,
};

/* Every method but probe and open is the CUDA family's (DV_CU_BACKEND_METHODS). */
const dv_backend dv__backend_cuda = {
    .name = "cuda",
    .caps = DV_CU_BACKEND_CAPS,
    .probe = cub_probe,
    .open = cub_open,
    DV_CU_BACKEND_METHODS
};
