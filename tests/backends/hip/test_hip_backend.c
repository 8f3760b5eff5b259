/*
 * The HIP backend (issue 26): libamdhip64 loaded with dlopen through the
 * shared loader (src/backends/dynlib.c), a probe that says what it found or
 * why nothing, the CUDA backend's code on the HIP driver's translations
 * (src/backends/hip/hip_driver.c), and automatic selection that tries it
 * after CUDA and before OpenCL.
 *
 *   test_hip_backend double   against tests/backends/hip/hipdouble (LD_LIBRARY_PATH set
 *                             by CTest; HIP_DOUBLE_DEVICES=2): a runtime
 *                             with devices, opened by name and by auto;
 *   test_hip_backend system   whatever this machine has (no ROCm, ROCm
 *                             without a GPU, or an AMD GPU).
 *
 * Both check the translations' pure parts with no runtime: result codes,
 * attributes, memory types by ROCm version, stream handles, 2-D and 3-D
 * descriptors, the names in messages, and that every entry point the
 * shared code calls has a translation.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <dlfcn.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "common.h"
#include "backends/dynlib.h"
#include "backends/hip/hip_internal.h"

static bool g_double;

static void *hip_loaded(void) {
  void *h = dlopen("libamdhip64.so", RTLD_NOW | RTLD_NOLOAD);
  if (!h) h = dlopen("libamdhip64.so.6", RTLD_NOW | RTLD_NOLOAD);
  if (!h) h = dlopen("libamdhip64.so.5", RTLD_NOW | RTLD_NOLOAD);
  return h;
}

/* Automatic selection tries HIP after CUDA: where CUDA does not open, the
 * HIP runtime is loaded (when there is one); with the double's devices HIP
 * is chosen.  Runs first: nothing in this process has touched HIP yet. */
static void test_auto_tries_hip(void **state) {
  (void)state;
  assert_null(hip_loaded());
  dv_context *c = NULL;
  assert_ok(dv_context_create(NULL, &c));
  char be[16];
  snprintf(be, sizeof be, "%s", dv_context_backend(c));
  assert_ok(dv_context_destroy(c));
  print_message("[ info ] auto: %s\n", be);
  if (g_double) assert_string_equal(be, "hip");
  bool cuda = strcmp(be, "cuda") == 0;
  if (cuda) return; /* chosen before HIP was tried */
  void *h = hip_loaded();
  void *any = h ? NULL : dlopen("libamdhip64.so", RTLD_NOW | RTLD_LOCAL);
  if (!any) any = h ? NULL : dlopen("libamdhip64.so.6", RTLD_NOW | RTLD_LOCAL);
  if (!any) any = h ? NULL : dlopen("libamdhip64.so.5", RTLD_NOW | RTLD_LOCAL);
  if (any) {
    dlclose(any);
    fail_msg("automatic selection did not try the HIP runtime this machine has");
  }
  if (h) dlclose(h);
}

/* The probe: DV_OK with the runtime and the devices, or why not. */
static void test_probe(void **state) {
  (void)state;
  char reason[1024];
  dv_status rc = dv_backend_probe("hip", reason, sizeof reason);
  print_message("[ info ] hip: %s (%s)\n", reason, dv_status_name(rc));
  assert_true(reason[0] != 0);
  if (g_double) {
    assert_ok(rc);
    /* The double plays ROCm 5.2, or 6.0 with HIP_DOUBLE_ROCM=6. */
    assert_true(strstr(reason, "HIP runtime 5.2 ") || strstr(reason, "HIP runtime 6.0 "));
    assert_non_null(strstr(reason,
                           " (libamdhip64.so), 2 device(s): 0: HIP test double 0 (gfx90a), 1: HIP "
                           "test double 1 (gfx90a)"));
    int (*calls)(void) = NULL;
    void *h = hip_loaded();
    assert_non_null(h);
    *(void **)&calls = dlsym(h, "hip_double_init_calls");
    assert_non_null(calls);
    assert_int_equal(calls(), 1); /* once per process */
    assert_ok(dv_backend_probe("hip", NULL, 0));
    assert_int_equal(calls(), 1);
    dlclose(h);
  } else if (rc == DV_OK) {
    assert_non_null(strstr(reason, "HIP runtime "));
    assert_non_null(strstr(reason, " device(s): 0: "));
  } else {
    /* No runtime, or a runtime without a GPU. */
    assert_true(rc == DV_ERR_LIBRARY_LOAD || rc == DV_ERR_SYMBOL_LOAD ||
                rc == DV_ERR_BACKEND_UNAVAILABLE || rc == DV_ERR_DRIVER);
    if (rc == DV_ERR_LIBRARY_LOAD) assert_non_null(strstr(reason, "libamdhip64.so"));
    if (rc == DV_ERR_BACKEND_UNAVAILABLE)
      assert_true(strstr(reason, "no AMD GPU") || strstr(reason, "no device"));
  }
}

/* Asked for by name: a context on the HIP driver where the probe found
 * devices (its description in AMD's words), else no context and a reason;
 * a device ordinal past the last is refused by name. */
static void test_open(void **state) {
  (void)state;
  dv_status probe = dv_backend_probe("hip", NULL, 0);
  dv_config *cfg = NULL;
  assert_ok(dv_config_create(&cfg));
  assert_ok(dv_config_set(cfg, "backend", "hip"));
  dv_context *c = (dv_context *)1;
  dv_status rc = dv_context_create(cfg, &c);
  if (probe == DV_OK) {
    assert_ok(rc);
    assert_string_equal(dv_context_backend(c), "hip");
    dv_device_info info;
    assert_ok(dv_context_device_info(c, &info));
    assert_string_equal(info.backend, "hip");
    assert_string_equal(info.vendor, "AMD");
    assert_non_null(strstr(info.driver_version, "HIP runtime "));
    assert_ok(dv_context_destroy(c));
    assert_ok(dv_config_set(cfg, "hip_device", "1000"));
    c = (dv_context *)1;
    assert_status(dv_context_create(cfg, &c), DV_ERR_BACKEND_UNAVAILABLE);
    assert_null(c);
    assert_non_null(strstr(dv_last_error(), "no HIP device 1000"));
    assert_non_null(strstr(dv_last_error(), "hip_device"));
  } else {
    assert_int_not_equal(rc, DV_OK);
    assert_null(c);
  }
  dv_config_destroy(cfg);
  /* backend=hip is a known value (a misspelling is not). */
  assert_ok(dv_config_create(&cfg));
  assert_status(dv_config_set(cfg, "backend", "hipp"), DV_ERR_BAD_OPTION);
  dv_config_destroy(cfg);
}

static dv_context *ctx_of(const char *backend) {
  dv_config *cfg = NULL;
  dv_context *c = NULL;
  assert_ok(dv_config_create(&cfg));
  assert_ok(dv_config_set(cfg, "backend", backend));
  dv_status rc = dv_context_create(cfg, &c);
  dv_config_destroy(cfg);
  return rc ? NULL : c;
}

/* CUDA and HIP contexts in one process (both doubles on the library path):
 * one host buffer registered through each is registered with each driver
 * and released by each (the registry of pinned ranges is process-wide;
 * its records say whose driver pinned them). */
static void test_registered_by_both_drivers(void **state) {
  (void)state;
  dv_context *cc = ctx_of("cuda"), *hc = ctx_of("hip");
  if (!cc || !hc) {
    if (cc) dv_context_destroy(cc);
    if (hc) dv_context_destroy(hc);
    print_message("SKIPPED: test_registered_by_both_drivers: the CUDA test double is not on the "
                  "library path\n");
    skip();
  }
  static float buf[4096];
  int64_t n = 4096;
  const dv_dtype *dt = dv_dtype_get(DV_FLOAT32);
  dv_array *a = NULL, *b = NULL, *d = NULL;
  assert_ok(dv_host_array_wrap(cc, buf, 1, &n, dt, NULL, &a));
  assert_ok(dv_host_array_wrap(hc, buf, 1, &n, dt, NULL, &b));
  assert_ok(dv_array_register(a));
  assert_ok(dv_array_register(b)); /* HIP's own registration, not CUDA's record */
  assert_true(dv_array_is_pinned(a) && dv_array_is_pinned(b));
  for (int i = 0; i < 4096; i++) buf[i] = (float)i;
  assert_ok(dv_to_device(hc, b, NULL, 1, NULL, &d));
  float back[4096];
  dv_array *hb = NULL;
  assert_ok(dv_host_array_wrap(hc, back, 1, &n, dt, NULL, &hb));
  assert_ok(dv_copy_to_host(d, hb, NULL, NULL));
  assert_memory_equal(back, buf, sizeof buf);
  assert_ok(dv_array_deregister(a)); /* CUDA's, through CUDA */
  assert_ok(dv_array_deregister(b)); /* HIP's, through HIP (refused if HIP never pinned it) */
  dv_array_release(hb), dv_array_release(d), dv_array_release(a), dv_array_release(b);
  assert_ok(dv_context_destroy(cc));
  assert_ok(dv_context_destroy(hc));
}

/* A dense copy between two HIP devices is one hipMemcpyPeerAsync naming
 * the two devices by ordinal (the driver's copy_peer, each context's
 * device: no table of contexts). */
static void test_copy_between_devices(void **state) {
  (void)state;
  if (!g_double) skip();
  dv_config *cfg = NULL;
  dv_context *c0 = NULL, *c1 = NULL;
  assert_ok(dv_config_create(&cfg));
  assert_ok(dv_config_set(cfg, "backend", "hip"));
  assert_ok(dv_context_create(cfg, &c0));
  assert_ok(dv_config_set(cfg, "hip_device", "1"));
  assert_ok(dv_context_create(cfg, &c1));
  dv_config_destroy(cfg);
  int64_t n = 3000;
  const dv_dtype *dt = dv_dtype_get(DV_INT32);
  int32_t src[3000], out[3000];
  for (int64_t i = 0; i < n; i++) src[i] = (int32_t)(i * 5 + 2), out[i] = -1;
  dv_array *hs, *ho, *d1, *d0;
  assert_ok(dv_host_array_wrap(c1, src, 1, &n, dt, NULL, &hs));
  assert_ok(dv_to_device(c1, hs, NULL, 1, NULL, &d1));
  assert_ok(dv_device_array(c0, 1, &n, dt, NULL, 'C', NULL, &d0));
  typedef long (*count_fn)(void);
  void *lib = hip_loaded();
  count_fn peers = lib ? (count_fn)dlsym(lib, "dvdouble_peer_copies") : NULL;
  assert_non_null(peers);
  long before = peers();
  assert_ok(dv_array_copy(d0, d1, NULL)); /* device 1 -> device 0 */
  assert_int_equal(peers(), before + 1);
  assert_ok(dv_host_array_wrap(c0, out, 1, &n, dt, NULL, &ho));
  assert_ok(dv_copy_to_host(d0, ho, NULL, NULL));
  assert_memory_equal(out, src, sizeof src);
  dv_array_release(hs), dv_array_release(ho), dv_array_release(d0), dv_array_release(d1);
  assert_ok(dv_context_destroy(c1));
  assert_ok(dv_context_destroy(c0));
}

/* ---- the translations, with no runtime ---- */

/* Every CUDA entry point the shared code may call on HIP has a
 * translation; the ones it never calls there have none: peer copies name
 * devices (the driver's copy_peer), there is no opt-in for LDS, and HIP has
 * managed memory's hints only as CUDA's first entries (no _v2: HIP takes
 * device ordinals, issue 40). */
static void test_api_complete(void **state) {
  (void)state;
  const dv_cu_api *api = dv__hip_driver.api;
  /* the stream-ordered allocator's entries: installed (all of them) once a
   * runtime that has them is loaded (hip_mempool.c), else all NULL */
  int pool_entries = 0, pool_set = 0;
#define DV_CU(ret, symbol, cuda_name, hip_name, params)                                            \
  if (strstr(#symbol, "MemPool") || !strcmp(#symbol, "cuMemAllocFromPoolAsync") ||               \
      !strcmp(#symbol, "cuMemFreeAsync"))                                                         \
    pool_entries++, pool_set += api->symbol != NULL;                                              \
  else if (!api->symbol && DV_CU_E_##symbol != DV_CU_E_cuMemcpyPeerAsync &&                      \
           DV_CU_E_##symbol != DV_CU_E_cuFuncSetAttribute &&                                     \
           DV_CU_E_##symbol != DV_CU_E_cuMemPrefetchAsync_v2 && DV_CU_E_##symbol != DV_CU_E_cuMemAdvise_v2) \
    fail_msg("the HIP driver has no translation of %s", #symbol);
#include "backends/cudafam/fam_symbols.def"
#undef DV_CU
  assert_int_equal(pool_entries, 9);
  if (pool_set != 0 && pool_set != pool_entries) fail_msg("%d of the 9 pool entries installed", pool_set);
  assert_null(api->cuMemcpyPeerAsync);
  assert_non_null(dv__hip_driver.copy_peer);
  assert_null(api->cuFuncSetAttribute);
  assert_true(dv__hip_driver.kops->no_shared_optin);
  assert_null(api->cuFuncGetParamInfo); /* optional: HIP cannot tell */
  assert_null(api->cuMemPrefetchAsync_v2);
  assert_null(api->cuMemAdvise_v2);
  assert_non_null(api->cuMemPrefetchAsync); /* hipMemPrefetchAsync, hipMemAdvise */
  assert_non_null(api->cuMemAdvise);
  assert_string_equal(dv__hip_driver.vendor, "HIP");
  assert_string_equal(dv__hip_driver.backend, "hip");
  assert_non_null(dv__hip_driver.fill_info);
  assert_non_null(dv__hip_driver.names);
  assert_non_null(dv__hip_driver.code);
}

static void test_results(void **state) {
  (void)state;
  /* Shared with CUDA: the same numbers. */
  const int same[] = {0,   1,   2,   3,   4,   100, 101, 200, 201, 209, 218, 400,
                      500, 600, 700, 701, 704, 709, 712, 713, 719, 801, 906, 999};
  for (size_t i = 0; i < sizeof same / sizeof same[0]; i++)
    assert_int_equal(dv__hip_result(same[i]), same[i]);
  /* HIP's own, as the CUDA code of the same meaning (and devarray's status). */
  assert_int_equal(dv__hip_result(17),
                   DV_CUDA_ERROR_INVALID_VALUE); /* hipErrorInvalidDevicePointer */
  assert_int_equal(dv__hip_result(12), DV_CUDA_ERROR_INVALID_VALUE); /* hipErrorInvalidPitchValue */
  assert_int_equal(dv__hip_result(21),
                   DV_CUDA_ERROR_INVALID_VALUE); /* hipErrorInvalidMemcpyDirection */
  assert_int_equal(dv__hip_result(9),
                   DV_CUDA_ERROR_INVALID_VALUE); /* hipErrorInvalidConfiguration */
  assert_int_equal(dv__hip_result(53),
                   DV_CUDA_ERROR_LAUNCH_FAILED); /* hipErrorPriorLaunchFailure */
  assert_int_equal(dv__hip_result(98),
                   DV_CUDA_ERROR_INVALID_HANDLE); /* hipErrorInvalidDeviceFunction */
  assert_int_equal(dv__hip_result(1052), DV_CUDA_ERROR_OUT_OF_MEMORY); /* hipErrorRuntimeMemory */
  assert_int_equal(dv__cu_status(dv__hip_result(1052)), DV_ERR_OUT_OF_MEMORY);
  assert_int_equal(dv__cu_status(dv__hip_result(53)), DV_ERR_DEVICE_LOST);
  assert_int_equal(dv__cu_status(dv__hip_result(1053)), DV_ERR_DRIVER);
}

static void test_attributes(void **state) {
  (void)state;
  assert_int_equal(dv__hip_attribute(DV_CU_DEVICE_ATTRIBUTE_WARP_SIZE), 87);
  assert_int_equal(dv__hip_attribute(DV_CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK), 56);
  assert_int_equal(dv__hip_attribute(11 /* MAX_PITCH */), 58);
  assert_int_equal(dv__hip_attribute(DV_CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK), 74);
  assert_int_equal(dv__hip_attribute(DV_CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN), 75);
  assert_int_equal(dv__hip_attribute(DV_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR), 23);
  assert_int_equal(dv__hip_attribute(DV_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR), 61);
  assert_int_equal(dv__hip_attribute(DV_CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY), 3);
  assert_int_equal(dv__hip_attribute(DV_CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY), 24);
  assert_int_equal(dv__hip_attribute(DV_CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT), 63);
  assert_int_equal(dv__hip_attribute(12345), -1);
  /* Every attribute the CUDA code reads has one. */
  const int used[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 16, 19, 41, 75, 76, 83, 89, 97};
  for (size_t i = 0; i < sizeof used / sizeof used[0]; i++)
    assert_true(dv__hip_attribute(used[i]) >= 0);
}

static void test_memory_types_and_streams(void **state) {
  (void)state;
  const int rocm5 = 50221153, rocm6 = 60032830;
  assert_int_equal(dv__hip_memory_type(DV_CU_MEMORYTYPE_HOST, rocm5), 0);
  assert_int_equal(dv__hip_memory_type(DV_CU_MEMORYTYPE_DEVICE, rocm5), 1);
  assert_int_equal(dv__hip_memory_type(DV_CU_MEMORYTYPE_HOST, rocm6), 1);
  assert_int_equal(dv__hip_memory_type(DV_CU_MEMORYTYPE_DEVICE, rocm6), 2);
  assert_int_equal(dv__hip_memory_type(3 /* CU_MEMORYTYPE_ARRAY */, rocm6), -1);
  assert_int_equal(dv__hip_ipc_flags(DV_CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS, rocm5), 0);
  assert_int_equal(dv__hip_ipc_flags(DV_CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS, rocm6), 1);
  assert_int_equal(dv__hip_ipc_flags(0, rocm6), 0);
  assert_null(dv__hip_stream(DV_CU_STREAM_LEGACY));
  assert_ptr_equal(dv__hip_stream(DV_CU_STREAM_PER_THREAD), (void *)2);
  assert_null(dv__hip_stream(NULL));
  dv_CUstream mine = (dv_CUstream)(void *)0x5000;
  assert_ptr_equal(dv__hip_stream(mine), (void *)0x5000);
}

static void test_copy2d(void **state) {
  (void)state;
  char host[64];
  dv_CUDA_MEMCPY2D c;
  memset(&c, 0, sizeof c);
  c.srcXInBytes = 3, c.srcY = 2, c.srcMemoryType = DV_CU_MEMORYTYPE_HOST, c.srcHost = host,
  c.srcPitch = 16;
  c.dstMemoryType = DV_CU_MEMORYTYPE_DEVICE, c.dstDevice = 0x10000, c.dstPitch = 256;
  c.WidthInBytes = 8, c.Height = 3;
  dv_hip_Memcpy2D h;
  assert_int_equal(dv__hip_copy2d(&c, 50221153, &h), DV_CUDA_SUCCESS);
  assert_int_equal(h.srcMemoryType, 0);
  assert_int_equal(h.dstMemoryType, 1);
  assert_ptr_equal(h.srcHost, host);
  assert_int_equal(h.srcXInBytes, 3);
  assert_int_equal(h.srcY, 2);
  assert_ptr_equal(h.dstDevice, (void *)0x10000);
  assert_int_equal(h.srcPitch, 16);
  assert_int_equal(h.dstPitch, 256);
  assert_int_equal(h.WidthInBytes, 8);
  assert_int_equal(h.Height, 3);
  assert_int_equal(dv__hip_copy2d(&c, 60032830, &h), DV_CUDA_SUCCESS);
  assert_int_equal(h.srcMemoryType, 1);
  assert_int_equal(h.dstMemoryType, 2);
  c.srcArray = host; /* CUDA arrays: not a thing devarray copies */
  assert_int_equal(dv__hip_copy2d(&c, 60032830, &h), DV_CUDA_ERROR_INVALID_VALUE);
}

/* A 3-D copy, slice by slice: each slice's 2-D copy starts where the 3-D
 * copy's slice starts on both sides (X, Y, Z and the slice heights folded
 * into the addresses), with the pitches and the rectangle kept. */
static void test_slices(void **state) {
  (void)state;
  static char host[4096];
  dv_CUDA_MEMCPY3D c;
  memset(&c, 0, sizeof c);
  c.srcMemoryType = DV_CU_MEMORYTYPE_DEVICE, c.srcDevice = 0x100000, c.srcPitch = 128,
  c.srcHeight = 8;
  c.srcXInBytes = 4, c.srcY = 1, c.srcZ = 2;
  c.dstMemoryType = DV_CU_MEMORYTYPE_HOST, c.dstHost = host, c.dstPitch = 32, c.dstHeight = 5;
  c.WidthInBytes = 24, c.Height = 4, c.Depth = 3;
  for (size_t z = 0; z < 3; z++) {
    dv_hip_Memcpy2D h;
    assert_int_equal(dv__hip_slice2d(&c, z, 50221153, &h), DV_CUDA_SUCCESS);
    assert_int_equal(h.srcMemoryType, 1); /* ROCm 5: device */
    assert_int_equal(h.dstMemoryType, 0); /* host */
    assert_ptr_equal(h.srcDevice, (void *)(uintptr_t)(0x100000 + ((2 + z) * 8 + 1) * 128 + 4));
    assert_null(h.srcHost);
    assert_ptr_equal(h.dstHost, host + z * 5 * 32);
    assert_null(h.dstDevice);
    assert_int_equal(h.srcXInBytes + h.srcY + h.dstXInBytes + h.dstY, 0);
    assert_int_equal(h.srcPitch, 128);
    assert_int_equal(h.dstPitch, 32);
    assert_int_equal(h.WidthInBytes, 24);
    assert_int_equal(h.Height, 4);
  }
  dv_hip_Memcpy2D h;
  assert_int_equal(dv__hip_slice2d(&c, 3, 60032830, &h),
                   DV_CUDA_ERROR_INVALID_VALUE); /* past the last */
  c.srcLOD = 1;
  assert_int_equal(dv__hip_slice2d(&c, 0, 60032830, &h), DV_CUDA_ERROR_INVALID_VALUE);
  c.srcLOD = 0;
  c.srcHeight = SIZE_MAX / 2; /* an offset that overflows */
  assert_int_equal(dv__hip_slice2d(&c, 2, 60032830, &h), DV_CUDA_ERROR_INVALID_VALUE);
}

/* Translations that return a pointer HIP wrote hand back that pointer (a
 * stand-in entry point for the call; the loaded table restored after). */
static dv_hipError_t fake_malloc(void **p, size_t n) {
  *p = (void *)(uintptr_t)(0x10000 + n);
  return DV_HIP_SUCCESS;
}
static dv_hipError_t fake_managed(void **p, size_t n, unsigned f) {
  *p = (void *)(uintptr_t)(0x20000 + n + f);
  return DV_HIP_SUCCESS;
}
static dv_hipError_t fake_mapped(void **d, void *p, unsigned f) {
  *d = (char *)p + 0x100 + f;
  return DV_HIP_SUCCESS;
}
static dv_hipError_t fake_failing_malloc(void **p, size_t n) {
  (void)n;
  *p = (void *)0x1;
  return 17; /* hipErrorInvalidDevicePointer */
}

static void test_out_pointers(void **state) {
  (void)state;
  dv_hip_api saved = dv__hip_api;
  const dv_cu_api *api = dv__hip_driver.api;
  dv__hip_api.hipMalloc = fake_malloc;
  dv__hip_api.hipMallocManaged = fake_managed;
  dv__hip_api.hipHostGetDevicePointer = fake_mapped;
  dv_CUdeviceptr p = 0;
  dv_CUresult r1 = api->cuMemAlloc_v2(&p, 64);
  dv_CUdeviceptr m = 0;
  dv_CUresult r2 = api->cuMemAllocManaged(&m, 32, DV_CU_MEM_ATTACH_GLOBAL);
  dv_CUdeviceptr d = 0;
  char host[8];
  dv_CUresult r3 = api->cuMemHostGetDevicePointer_v2(&d, host, 0);
  dv__hip_api.hipMalloc = fake_failing_malloc;
  dv_CUdeviceptr q = 5;
  dv_CUresult r4 = api->cuMemAlloc_v2(&q, 8);
  dv__hip_api = saved;
  assert_int_equal(r1, DV_CUDA_SUCCESS);
  assert_int_equal(p, 0x10000 + 64);
  assert_int_equal(r2, DV_CUDA_SUCCESS);
  assert_int_equal(m, 0x20000 + 32 + 1);
  assert_int_equal(r3, DV_CUDA_SUCCESS);
  assert_int_equal(d, (dv_CUdeviceptr)(uintptr_t)(host + 0x100));
  assert_int_equal(r4, 17); /* HIP's own code (hipErrorInvalidDevicePointer) */
  assert_int_equal(dv__cu_code(&dv__hip_driver, r4), DV_CUDA_ERROR_INVALID_VALUE); /* its meaning */
  assert_int_equal(q, 0);                            /* nothing handed out on failure */
}

/* Whether s has a word "cu<Capital>..." (a CUDA call's name). */
static bool has_cu_word(const char *s) {
  for (const char *p = s; *p; p++) {
    bool start = p == s || !(isalnum((unsigned char)p[-1]) || p[-1] == '_');
    if (start && p[0] == 'c' && p[1] == 'u' && isupper((unsigned char)p[2])) return true;
  }
  return false;
}

static const char *fake_hip_name(dv_hipError_t e) {
  return e == 1052 ? "hipErrorRuntimeMemory" : e == 17 ? "hipErrorInvalidDevicePointer" : "hipErrorInvalidValue";
}
static const char *fake_hip_string(dv_hipError_t e) { return e == 1052 ? "runtime memory" : "invalid argument"; }
static dv_CUresult fake_cu_name(dv_CUresult e, const char **s) {
  (void)e;
  *s = "CUDA_ERROR_INVALID_VALUE";
  return DV_CUDA_SUCCESS;
}
static dv_CUresult fake_cu_string(dv_CUresult e, const char **s) {
  (void)e;
  *s = "invalid argument";
  return DV_CUDA_SUCCESS;
}

/* How messages name the calls: fam_symbols.def's columns.  CUDA's is the
 * symbol without its version (_v2); HIP's names the HIP call and never a
 * CUDA one (none for cuFuncSetAttribute: AMD has no opt-in); the HIP
 * driver's table is HIP's column; and the messages made of them. */
static void test_call_names(void **state) {
  (void)state;
  static const struct {
    const char *symbol, *cuda, *hip;
  } col[] = {
#define DV_CU(ret, symbol, cuda_name, hip_name, params) {#symbol, cuda_name, hip_name},
#include "backends/cudafam/fam_symbols.def"
#undef DV_CU
  };
  static const char *cuda_names[DV_CU_E_COUNT];
  assert_int_equal(sizeof col / sizeof col[0], DV_CU_E_COUNT);
  for (int e = 0; e < DV_CU_E_COUNT; e++) {
    size_t n = strlen(col[e].symbol);
    if (n > 3 && !strcmp(col[e].symbol + n - 3, "_v2")) n -= 3;
    if (strlen(col[e].cuda) != n || strncmp(col[e].cuda, col[e].symbol, n))
      fail_msg("%s: CUDA's messages name it %s", col[e].symbol, col[e].cuda);
    if (!col[e].hip) {
      assert_int_equal(e, DV_CU_E_cuFuncSetAttribute); /* no such HIP call */
      assert_null(dv__hip_driver.names[e]);
      assert_string_equal(dv__cu_name(&dv__hip_driver, e), "?");
    } else {
      if (has_cu_word(col[e].hip) || strncmp(col[e].hip, "hip", 3))
        fail_msg("%s: HIP's messages name it %s", col[e].symbol, col[e].hip);
      assert_string_equal(dv__hip_driver.names[e], col[e].hip);
    }
    cuda_names[e] = col[e].cuda;
  }
  assert_string_equal(dv__hip_driver.names[DV_CU_E_cuMemAlloc_v2], "hipMalloc");
  assert_string_equal(dv__hip_driver.names[DV_CU_E_cuCtxSynchronize], "hipDeviceSynchronize");
  assert_string_equal(dv__hip_driver.names[DV_CU_E_cuStreamCreate], "hipStreamCreateWithFlags");
  assert_string_equal(dv__hip_driver.names[DV_CU_E_cuMemcpy2DAsync_v2], "hipMemcpyParam2DAsync");
  assert_string_equal(dv__hip_driver.names[DV_CU_E_cuLaunchKernel], "hipModuleLaunchKernel");

  /* The messages: HIP's name HIP's calls and HIP's error, CUDA's CUDA's. */
  dv_hip_api saved = dv__hip_api;
  dv__hip_api.hipGetErrorName = fake_hip_name;
  dv__hip_api.hipGetErrorString = fake_hip_string;
  dv_cu_api capi = {.cuGetErrorName = fake_cu_name, .cuGetErrorString = fake_cu_string};
  dv_cu_driver cuda = {.vendor = "CUDA", .backend = "cuda", .api = &capi, .names = cuda_names};
  char want[256];
  for (int e = 0; e < DV_CU_E_COUNT; e++) {
    if (!col[e].hip) continue;
    assert_int_equal(dv__cu_fail(&dv__hip_driver, DV_CUDA_ERROR_INVALID_VALUE, e, " (staging)"),
                     DV_ERR_INVALID_ARGUMENT);
    snprintf(want, sizeof want, "HIP %s (staging) failed: hipErrorInvalidValue (1): invalid argument",
             col[e].hip);
    assert_string_equal(dv_last_error(), want);
    assert_false(has_cu_word(dv_last_error()));
    assert_int_equal(dv__cu_fail(&cuda, DV_CUDA_ERROR_INVALID_VALUE, e, ""), DV_ERR_INVALID_ARGUMENT);
    snprintf(want, sizeof want, "CUDA %s failed: CUDA_ERROR_INVALID_VALUE (1): invalid argument", col[e].cuda);
    assert_string_equal(dv_last_error(), want);
  }
  dv__cu_fail_in(&dv__hip_driver, DV_CUDA_ERROR_INVALID_VALUE, "waiting for the stream before a staged copy",
                 DV_CU_E_cuEventRecord, DV_CU_E_cuEventSynchronize);
  assert_string_equal(dv_last_error(), "HIP waiting for the stream before a staged copy (hipEventRecord / "
                                       "hipEventSynchronize) failed: hipErrorInvalidValue (1): invalid argument");
  dv__cu_fail_in(&cuda, DV_CUDA_ERROR_INVALID_VALUE, "uploading the constant arrays",
                 DV_CU_E_cuMemcpyHtoDAsync_v2, DV_CU_E_NONE);
  assert_string_equal(dv_last_error(), "CUDA uploading the constant arrays (cuMemcpyHtoDAsync) failed: "
                                       "CUDA_ERROR_INVALID_VALUE (1): invalid argument");
  dv__cu_fail(&dv__hip_driver, DV_CUDA_ERROR_INVALID_VALUE, DV_CU_E_cuModuleGetGlobal_v2, "(dv__cbuf)");
  assert_non_null(strstr(dv_last_error(), "HIP hipModuleGetGlobal(dv__cbuf) failed: "));
  assert_string_equal(dv__cu_name(&dv__hip_driver, DV_CU_E_cuMemHostAlloc), "hipHostMalloc");
  /* HIP's own codes: named by HIP, with the status and number of their
   * CUDA meaning (no side channel: the result is HIP's code itself), also
   * after other calls succeeded on this thread. */
  assert_int_equal(dv__cu_fail(&dv__hip_driver, 1052, DV_CU_E_cuMemAlloc_v2, ""), DV_ERR_OUT_OF_MEMORY);
  assert_string_equal(dv_last_error(), "HIP hipMalloc failed: hipErrorRuntimeMemory (2): runtime memory");
  assert_int_equal(dv__cu_fail(&dv__hip_driver, 17, DV_CU_E_cuMemFree_v2, ""), DV_ERR_INVALID_ARGUMENT);
  assert_string_equal(dv_last_error(), "HIP hipFree failed: hipErrorInvalidDevicePointer (1): invalid argument");
  assert_string_equal(dv__cu_name(&cuda, DV_CU_E_cuMemHostRegister_v2), "cuMemHostRegister");
  dv__hip_api = saved;
}

/* The shared loader (dynlib.c): the names tried, a missing entry point
 * named, another name with the same prototype, an optional entry point. */
/* The kernels' gfx target from a version number and from the KFD topology. */
static void test_gfx_target(void **state) {
  (void)state;
  char b[32];
  assert_true(dv__hip_gfx_name(90010, b, sizeof b));
  assert_string_equal(b, "gfx90a");
  assert_true(dv__hip_gfx_name(100300, b, sizeof b));
  assert_string_equal(b, "gfx1030");
  assert_true(dv__hip_gfx_name(90402, b, sizeof b));
  assert_string_equal(b, "gfx942");
  assert_true(dv__hip_gfx_name(110000, b, sizeof b));
  assert_string_equal(b, "gfx1100");
  assert_false(dv__hip_gfx_name(0, b, sizeof b));     /* a CPU node */
  assert_false(dv__hip_gfx_name(91600, b, sizeof b)); /* minor 16: no hex digit */
  assert_false(dv__hip_gfx_name(90010, b, 4));        /* no room */
  /* A topology: node 0 a CPU, then two GPUs. */
  char root[] = "/tmp/dv_kfd_XXXXXX";
  assert_non_null(mkdtemp(root));
  const unsigned long vers[3] = {0, 90010, 100300};
  for (int n = 0; n < 3; n++) {
    char path[128];
    snprintf(path, sizeof path, "%s/%d", root, n);
    assert_int_equal(mkdir(path, 0700), 0);
    snprintf(path, sizeof path, "%s/%d/properties", root, n);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "cpu_cores_count %d\ngfx_target_version %lu\nsimd_count 4\n", n ? 0 : 8, vers[n]);
    fclose(f);
  }
  unsetenv("HIP_VISIBLE_DEVICES"), unsetenv("ROCR_VISIBLE_DEVICES"), unsetenv("CUDA_VISIBLE_DEVICES");
  assert_true(dv__hip_kfd_arch(root, 0, b, sizeof b));
  assert_string_equal(b, "gfx90a");
  assert_true(dv__hip_kfd_arch(root, 1, b, sizeof b));
  assert_string_equal(b, "gfx1030");
  assert_false(dv__hip_kfd_arch(root, 2, b, sizeof b)); /* no third GPU */
  assert_false(dv__hip_kfd_arch("/nonexistent/kfd", 0, b, sizeof b));
  setenv("HIP_VISIBLE_DEVICES", "1", 1); /* renumbered: the topology cannot say */
  assert_false(dv__hip_kfd_arch(root, 0, b, sizeof b));
  unsetenv("HIP_VISIBLE_DEVICES");
  char cmd[160];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  assert_int_equal(system(cmd), 0);
}

static void test_dynlib(void **state) {
  (void)state;
  char msg[512] = "";
  void *lib = (void *)1, *slot = NULL, *slot2 = NULL, *slot3 = (void *)1;
  const char *which = "x";
  const char *const none[] = {"libdv_no_such_a.so.1", "libdv_no_such_b.so"};
  dv_dynsym one = {"malloc", NULL, &slot, 0};
  assert_int_equal(dv__dynlib_open("test library", none, 2, &one, 1, &lib, &which, msg, sizeof msg),
                   DV_ERR_LIBRARY_LOAD);
  assert_null(lib);
  assert_null(which);
  assert_non_null(strstr(
      msg, "no test library: libdv_no_such_a.so.1 or libdv_no_such_b.so could not be loaded"));
  assert_non_null(strstr(msg, "libdv_no_such_a.so.1: cannot open"));
  const char *const libc[] = {"libdv_no_such_a.so.1", "libc.so.6"};
  dv_dynsym syms[] = {{"malloc", NULL, &slot, 0},
                      {"dv_no_such_function", "free", &slot2, 0},
                      {"dv_no_such_optional", NULL, &slot3, 1}};
  assert_int_equal(dv__dynlib_open("C library", libc, 2, syms, 3, &lib, &which, msg, sizeof msg),
                   DV_OK);
  assert_non_null(lib);
  assert_string_equal(which, "libc.so.6");
  assert_ptr_equal(slot, dlsym(lib, "malloc"));
  assert_ptr_equal(slot2, dlsym(lib, "free"));
  assert_null(slot3);
  dlclose(lib);
  dv_dynsym missing[] = {{"malloc", NULL, &slot, 0}, {"dv_no_such_function", NULL, &slot2, 0}};
  assert_int_equal(dv__dynlib_open("C library", libc, 2, missing, 2, &lib, &which, msg, sizeof msg),
                   DV_ERR_SYMBOL_LOAD);
  assert_string_equal(msg,
                      "libc.so.6 lacks the entry point dv_no_such_function (C library too old?)");
  assert_null(slot2);
  dlclose(lib);
}

int main(int argc, char **argv) {
  g_double = argc > 1 && strcmp(argv[1], "double") == 0;
  g_backend = "host";
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_auto_tries_hip), cmocka_unit_test(test_probe),
      cmocka_unit_test(test_open),           cmocka_unit_test(test_dynlib),
      cmocka_unit_test(test_api_complete),   cmocka_unit_test(test_results),
      cmocka_unit_test(test_attributes),     cmocka_unit_test(test_memory_types_and_streams),
      cmocka_unit_test(test_copy2d),         cmocka_unit_test(test_slices),
      cmocka_unit_test(test_call_names),     cmocka_unit_test(test_out_pointers),
      cmocka_unit_test(test_gfx_target),     cmocka_unit_test(test_copy_between_devices),
  };
  if (argc > 1 && strcmp(argv[1], "beside-cuda") == 0) { /* both doubles on the library path */
    g_double = true;
    const struct CMUnitTest both[] = {cmocka_unit_test(test_registered_by_both_drivers)};
    return cmocka_run_group_tests_name("hip_backend.beside_cuda", both, NULL, NULL);
  }
  return cmocka_run_group_tests_name(g_double ? "hip_backend.double" : "hip_backend.system", tests,
                                     NULL, NULL);
}
