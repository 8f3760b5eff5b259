/*
 * The HIP test double's own rules (tests/backends/hip/hipdouble), checked by calling it
 * directly: the double dlopen'ed by path (DV_HIP_DOUBLE_PATH), its entry
 * points taken with dlsym as the HIP backend takes them (hip_runtime.h's
 * tables).  Each rule of its header comment that the HIP backend relies on:
 * stream handles, hipMemoryType per ROCm version, synchronous pageable
 * copies (and the deadlock they are), use after free, IPC handles, code
 * objects (hipRTC's, and damaged ones refused cleanly), launches.
 *
 *   test_hip_double           every case; those that need a code object
 *                             compile one with the real hipRTC through the
 *                             double, and skip by name without it (exit 77);
 *   test_hip_double nortc     HIP_DOUBLE_HIPRTC names nothing: hipRTC fails
 *                             clearly; HIP_DOUBLE_DEVICES=0: hipInit fails;
 *   test_hip_double deadlock  (run by a case) a pageable copy behind a host
 *                             function that waits for the caller: aborts.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"
#include "backends/hip/hip_runtime.h"

#if defined(__has_include)
#if __has_include(<hip/hip_runtime_api.h>)
#define __HIP_PLATFORM_AMD__ 1
#include <hip/hip_runtime_api.h>
#define HAVE_ROCM_HEADER 1
#endif
#endif

static void *g_lib;
static dv_hip_api H;
static dv_hiprtc_api R;
static long (*launches)(void);
static long (*capture)(dv_hipStream_t, int);
static const char *(*rtc_path)(void);
static dv_hipError_t (*get_props)(void *, int);
static int g_skipped;
static dv_hipCtx_t g_c0;

#define OK(expr) assert_int_equal((expr), DV_HIP_SUCCESS)

static int load(void) {
  g_lib = dlopen(DV_HIP_DOUBLE_PATH, RTLD_NOW | RTLD_LOCAL);
  if (!g_lib) {
    fprintf(stderr, "cannot load the HIP double: %s\n", dlerror());
    return -1;
  }
#define DV_HIP(ret, name, params) *(void **)&H.name = dlsym(g_lib, #name);
#include "backends/hip/hip_symbols.def"
#undef DV_HIP
#define DV_HIPRTC(ret, name, params) *(void **)&R.name = dlsym(g_lib, #name);
#include "backends/hip/hiprtc_symbols.def"
#undef DV_HIPRTC
  *(void **)&launches = dlsym(g_lib, "dvdouble_launches");
  *(void **)&capture = dlsym(g_lib, "dvdouble_capture");
  *(void **)&rtc_path = dlsym(g_lib, "hip_double_hiprtc_path");
  *(void **)&get_props = dlsym(g_lib, "hipGetDeviceProperties");
  /* Every entry point hip_symbols.def lists is exported, none of CUDA's. */
  int missing = 0;
#define DV_HIP(ret, name, params) if (!H.name) fprintf(stderr, "missing %s\n", #name), missing++;
#include "backends/hip/hip_symbols.def"
#undef DV_HIP
#define DV_HIPRTC(ret, name, params) if (!R.name) fprintf(stderr, "missing %s\n", #name), missing++;
#include "backends/hip/hiprtc_symbols.def"
#undef DV_HIPRTC
  if (dlsym(g_lib, "cuInit") || dlsym(g_lib, "cuMemAlloc_v2")) fprintf(stderr, "exports cu*\n"), missing++;
  return missing || !launches || !capture || !rtc_path || !get_props ? -1 : 0;
}

static int setup(void **state) {
  (void)state;
  if (H.hipInit(0)) return -1;
  if (H.hipDevicePrimaryCtxRetain(&g_c0, 0) || H.hipCtxSetCurrent(g_c0)) return -1;
  return 0;
}

static int teardown(void **state) {
  (void)state;
  H.hipCtxSetCurrent(NULL);
  return H.hipDevicePrimaryCtxRelease(0) ? -1 : 0;
}

#define SKIP_CASE(why)                                   \
  do {                                                   \
    printf("SKIPPED: %s: %s\n", __func__, why);          \
    g_skipped++;                                         \
    skip();                                              \
  } while (0)

/* ---- versions, errors, devices ------------------------------------------------------------- */

static void test_versions(void **state) {
  (void)state;
  int v = 0;
  unsetenv("HIP_DOUBLE_ROCM");
  OK(H.hipRuntimeGetVersion(&v));
  assert_int_equal(v / 100000, 502); /* ROCm 5.2 by default */
  setenv("HIP_DOUBLE_ROCM", "6", 1);
  OK(H.hipRuntimeGetVersion(&v));
  assert_int_equal(v / 100000, 600);
  unsetenv("HIP_DOUBLE_ROCM");
  assert_int_equal(H.hipRuntimeGetVersion(NULL), DV_HIP_ERROR_INVALID_VALUE);
  assert_int_equal(H.hipInit(1), DV_HIP_ERROR_INVALID_VALUE);
  assert_string_equal(H.hipGetErrorName(DV_HIP_ERROR_INVALID_HANDLE), "hipErrorInvalidHandle");
  assert_string_equal(H.hipGetErrorName(DV_HIP_ERROR_ILLEGAL_ADDRESS), "hipErrorIllegalAddress");
  assert_string_equal(H.hipGetErrorName(12345), "hipErrorUnknown");
  int n = 0;
  OK(H.hipGetDeviceCount(&n));
  assert_int_equal(n, 2);
  char name[64];
  OK(H.hipDeviceGetName(name, sizeof name, 1));
  assert_string_equal(name, "HIP test double 1 (gfx90a)");
  assert_int_equal(H.hipDeviceGetName(name, sizeof name, 2), DV_HIP_ERROR_INVALID_DEVICE);
}

static void test_attributes(void **state) {
  (void)state;
  static const struct {
    int attr, want;
  } want[] = {{DV_HIP_ATTR_WARP_SIZE, 64},
              {DV_HIP_ATTR_MAX_SHARED_MEMORY_PER_BLOCK, 64 * 1024},
              {DV_HIP_ATTR_SHARED_MEM_PER_BLOCK_OPTIN, 64 * 1024},
              {DV_HIP_ATTR_MAX_THREADS_PER_BLOCK, 1024},
              {DV_HIP_ATTR_MAX_BLOCK_DIM_Z, 1024},
              {DV_HIP_ATTR_MAX_GRID_DIM_Y, 2147483647},
              {DV_HIP_ATTR_COMPUTE_CAPABILITY_MAJOR, 9},
              {DV_HIP_ATTR_COMPUTE_CAPABILITY_MINOR, 0},
              {DV_HIP_ATTR_MANAGED_MEMORY, 1},
              {DV_HIP_ATTR_CONCURRENT_MANAGED_ACCESS, 0}, /* xnack- */
              {DV_HIP_ATTR_UNIFIED_ADDRESSING, 1},
              {DV_HIP_ATTR_MAX_PITCH, 2147483647}};
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    int v = -1;
    OK(H.hipDeviceGetAttribute(&v, want[i].attr, 0));
    if (v != want[i].want) fail_msg("attribute %d: %d, expected %d", want[i].attr, v, want[i].want);
  }
  int v;
  assert_int_equal(H.hipDeviceGetAttribute(&v, DV_HIP_ATTR_WARP_SIZE, 2), DV_HIP_ERROR_INVALID_DEVICE);
  assert_int_equal(H.hipDeviceGetAttribute(&v, 20000, 0), DV_HIP_ERROR_INVALID_VALUE);
  assert_int_equal(H.hipDeviceGetAttribute(NULL, DV_HIP_ATTR_WARP_SIZE, 0), DV_HIP_ERROR_INVALID_VALUE);
}

static void test_properties(void **state) {
  (void)state;
  unsigned char buf[792 + 16];
  memset(buf, 0xEE, sizeof buf);
  OK(get_props(buf, 0));
  for (size_t i = 792; i < sizeof buf; i++) assert_int_equal(buf[i], 0xEE); /* ROCm 5.2's size, no more */
  assert_string_equal((char *)buf, "HIP test double 0 (gfx90a)");
  assert_string_equal((char *)buf + 396, "gfx90a:sramecc+:xnack-");
  size_t total = 0, want = 0;
  memcpy(&total, buf + 256, sizeof total);
  OK(H.hipDeviceTotalMem(&want, 0));
  assert_true(total == want && total > 0);
  setenv("HIP_DOUBLE_ARCH", "gfx942:sramecc+:xnack+", 1);
  OK(get_props(buf, 1));
  unsetenv("HIP_DOUBLE_ARCH");
  assert_string_equal((char *)buf + 396, "gfx942:sramecc+:xnack+");
  assert_string_equal((char *)buf, "HIP test double 1 (gfx942)");
  assert_int_equal(get_props(buf, 9), DV_HIP_ERROR_INVALID_DEVICE);
#ifdef HAVE_ROCM_HEADER
  /* The offsets the double writes at are the installed header's. */
  hipDeviceProp_t p;
  assert_int_equal(sizeof p, 792);
  OK(get_props(&p, 0));
  assert_string_equal(p.name, "HIP test double 0 (gfx90a)");
  assert_string_equal(p.gcnArchName, "gfx90a:sramecc+:xnack-");
  assert_true(p.totalGlobalMem == want);
  assert_int_equal(p.warpSize, 64);
  assert_int_equal(p.maxThreadsPerBlock, 1024);
  assert_int_equal(p.major, 9);
  assert_int_equal(p.minor, 0);
  assert_int_equal(p.sharedMemPerBlock, 64 * 1024);
  assert_int_equal(offsetof(hipDeviceProp_t, gcnArchName), 396);
  assert_int_equal(offsetof(hipDeviceProp_t, totalGlobalMem), 256);
  assert_int_equal(hipMemoryTypeHost, DV_HIP5_MEMORYTYPE_HOST);
  assert_int_equal(hipMemoryTypeDevice, DV_HIP5_MEMORYTYPE_DEVICE);
#else
  printf("[ info ] no <hip/hip_runtime_api.h>: hipDeviceProp_t offsets not compared with ROCm's\n");
#endif
}

/* ---- streams -------------------------------------------------------------------------------- */

static void test_stream_handles(void **state) {
  (void)state;
  dv_hipStream_t one = (dv_hipStream_t)1, s = NULL;
  assert_int_equal(H.hipStreamSynchronize(one), DV_HIP_ERROR_INVALID_HANDLE); /* CUDA's legacy handle */
  assert_int_equal(H.hipStreamQuery(one), DV_HIP_ERROR_INVALID_HANDLE);
  OK(H.hipStreamSynchronize(NULL));                  /* the legacy stream */
  OK(H.hipStreamSynchronize(DV_HIP_STREAM_PER_THREAD)); /* the per-thread one */
  void *d = NULL;
  char host[16] = {0};
  OK(H.hipMalloc(&d, 16));
  assert_int_equal(H.hipMemcpyHtoDAsync(d, host, 16, one), DV_HIP_ERROR_INVALID_HANDLE);
  assert_int_equal(H.hipMemsetD8Async(d, 1, 16, one), DV_HIP_ERROR_INVALID_HANDLE);
  assert_int_equal(H.hipStreamCreateWithFlags(&s, 4), DV_HIP_ERROR_INVALID_VALUE);
  OK(H.hipStreamCreateWithFlags(&s, DV_HIP_STREAM_NON_BLOCKING));
  OK(H.hipMemsetD8Async(d, 7, 16, s));
  OK(H.hipStreamSynchronize(s));
  OK(H.hipStreamDestroy(s));
  assert_int_equal(H.hipStreamSynchronize(s), DV_HIP_ERROR_INVALID_HANDLE); /* destroyed */
  assert_int_equal(H.hipStreamDestroy(NULL), DV_HIP_ERROR_INVALID_HANDLE);
  OK(H.hipMemcpyDtoHAsync(host, d, 16, NULL));
  assert_int_equal(host[15], 7);
  OK(H.hipFree(d));
}

/* A 2-D copy with hipMemoryType's numbers: only the version played takes them. */
static dv_hipError_t copy2d(void *dst, int dtype, const void *src, int stype, size_t w, size_t h) {
  dv_hip_Memcpy2D c;
  memset(&c, 0, sizeof c);
  c.srcMemoryType = stype, c.dstMemoryType = dtype;
  if (stype == DV_HIP5_MEMORYTYPE_HOST + (getenv("HIP_DOUBLE_ROCM") ? 1 : 0)) c.srcHost = src;
  else c.srcDevice = (dv_hipDeviceptr_t)src;
  if (dtype == DV_HIP5_MEMORYTYPE_HOST + (getenv("HIP_DOUBLE_ROCM") ? 1 : 0)) c.dstHost = dst;
  else c.dstDevice = dst;
  c.srcPitch = c.dstPitch = w, c.WidthInBytes = w, c.Height = h;
  dv_hipError_t r = H.hipMemcpyParam2DAsync(&c, NULL);
  return r ? r : H.hipStreamSynchronize(NULL);
}

static void test_memory_types(void **state) {
  (void)state;
  void *d = NULL, *pinned = NULL;
  OK(H.hipMalloc(&d, 256));
  OK(H.hipHostMalloc(&pinned, 256, 0));
  unsigned char *p = pinned;
  for (int i = 0; i < 256; i++) p[i] = (unsigned char)i;
  unsetenv("HIP_DOUBLE_ROCM"); /* ROCm 5: Host 0, Device 1 */
  OK(copy2d(d, 1, pinned, 0, 16, 16));
  /* ROCm 6's numbers mean Device and Array here: refused. */
  assert_int_equal(copy2d(d, 2, pinned, 1, 16, 16), DV_HIP_ERROR_INVALID_VALUE);
  memset(p, 0, 256);
  OK(copy2d(pinned, 0, d, 1, 16, 16));
  for (int i = 0; i < 256; i++) assert_int_equal(p[i], i);
  setenv("HIP_DOUBLE_ROCM", "6", 1); /* ROCm 6: Host 1, Device 2 */
  memset(p, 0, 256);
  OK(copy2d(pinned, 1, d, 2, 16, 16));
  for (int i = 0; i < 256; i++) assert_int_equal(p[i], i);
  assert_int_equal(copy2d(pinned, 0, d, 1, 16, 16), DV_HIP_ERROR_INVALID_VALUE); /* 0: unregistered */
  unsetenv("HIP_DOUBLE_ROCM");
  /* A device pointer given as a host side is the wrong kind. */
  assert_int_equal(copy2d(pinned, 0, d, 0, 16, 16), DV_HIP_ERROR_INVALID_VALUE);
  OK(H.hipHostFree(pinned));
  OK(H.hipFree(d));
}

static atomic_int g_flag;

static void slow_set(void *user) {
  (void)user;
  usleep(200 * 1000);
  atomic_store(&g_flag, 1);
}

/* Copies with pageable memory are synchronous; hipFree waits for the device. */
static void test_pageable_sync(void **state) {
  (void)state;
  void *d = NULL, *d2 = NULL;
  OK(H.hipMalloc(&d, 64));
  OK(H.hipMalloc(&d2, 64));
  dv_hipStream_t s = NULL;
  OK(H.hipStreamCreateWithFlags(&s, 0));
  char *pageable = malloc(64);
  assert_non_null(pageable);
  memset(pageable, 3, 64);
  atomic_store(&g_flag, 0);
  OK(H.hipLaunchHostFunc(s, slow_set, NULL));
  OK(H.hipMemcpyHtoDAsync(d, pageable, 64, s));
  assert_int_equal(atomic_load(&g_flag), 1); /* returned after the work ahead of it */
  memset(pageable, 0, 64);
  OK(H.hipMemcpyDtoHAsync(pageable, d, 64, s));
  assert_int_equal(pageable[63], 3); /* done when it returns */
  atomic_store(&g_flag, 0);
  OK(H.hipLaunchHostFunc(s, slow_set, NULL));
  OK(H.hipFree(d2)); /* an implicit device synchronization */
  assert_int_equal(atomic_load(&g_flag), 1);
  OK(H.hipStreamDestroy(s));
  free(pageable);
  OK(H.hipFree(d));
}

static atomic_int g_release;

static void wait_for_caller(void *user) {
  (void)user;
  while (!atomic_load(&g_release)) usleep(1000);
}

/* Child mode: a pageable copy behind a host function that waits for the
 * caller (released only after the copy returns): a deadlock on a GPU. */
static int deadlock_child(void) {
  dv_hipCtx_t c;
  void *d = NULL;
  dv_hipStream_t s = NULL;
  char buf[16] = {0};
  if (H.hipInit(0) || H.hipDevicePrimaryCtxRetain(&c, 0) || H.hipCtxSetCurrent(c) || H.hipMalloc(&d, 16) ||
      H.hipStreamCreateWithFlags(&s, 0) || H.hipLaunchHostFunc(s, wait_for_caller, NULL))
    return 3;
  H.hipMemcpyHtoDAsync(d, buf, 16, s);
  atomic_store(&g_release, 1);
  return 0; /* not reached: the double aborts */
}

static void test_pageable_deadlock(void **state) {
  (void)state;
  int fds[2];
  assert_int_equal(pipe(fds), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    dup2(fds[1], 2);
    close(fds[0]);
    execl("/proc/self/exe", "test_hip_double", "deadlock", (char *)NULL);
    _exit(127);
  }
  close(fds[1]);
  char out[4096];
  size_t n = 0;
  ssize_t k;
  while ((k = read(fds[0], out + n, sizeof out - 1 - n)) > 0) n += (size_t)k;
  out[n] = 0;
  close(fds[0]);
  int st = 0;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGABRT) fail_msg("the child was not aborted (status %#x): %s", st, out);
  assert_non_null(strstr(out, "hip test double: hipMemcpyHtoDAsync with pageable host memory waited 3 s"));
}

/* ---- memory --------------------------------------------------------------------------------- */

static void test_memory_rules(void **state) {
  (void)state;
  void *p = (void *)1;
  OK(H.hipMalloc(&p, 0)); /* no memory, NULL */
  assert_null(p);
  OK(H.hipFree(NULL));
  OK(H.hipHostFree(NULL));
  OK(H.hipHostMalloc(&p, 0, 0));
  assert_null(p);
  assert_int_equal(H.hipHostMalloc(&p, 64, 0x8), DV_HIP_ERROR_INVALID_VALUE);
  assert_int_equal(H.hipHostMalloc(&p, 64, 0xC0000000u), DV_HIP_ERROR_INVALID_VALUE); /* coherent and not */
  void *d = NULL, *d2 = NULL, *h = NULL, *m = NULL, *mapped = NULL;
  OK(H.hipMalloc(&d, 100));
  OK(H.hipMalloc(&d2, 100));
  OK(H.hipHostMalloc(&h, 100, 0));
  assert_int_equal(H.hipHostGetDevicePointer(&mapped, h, 0), DV_HIP_ERROR_INVALID_VALUE); /* not mapped */
  assert_int_equal(H.hipFree(h), 17); /* hipErrorInvalidDevicePointer: host memory */
  assert_int_equal(H.hipHostFree(d), DV_HIP_ERROR_INVALID_VALUE);
  OK(H.hipMallocManaged(&m, 64, DV_HIP_MEM_ATTACH_GLOBAL));
  memset(m, 1, 64); /* managed memory is host-accessible */
  dv_hipDeviceptr_t base = NULL;
  size_t size = 0;
  OK(H.hipMemGetAddressRange(&base, &size, (char *)d + 10));
  assert_ptr_equal(base, d);
  assert_int_equal(size, 100);
  /* Out of range, then use after free at the call. */
  char buf[128];
  assert_int_equal(H.hipMemcpyDtoHAsync(buf, (char *)d + 50, 51, NULL), DV_HIP_ERROR_INVALID_VALUE);
  OK(H.hipFree(d));
  assert_int_equal(H.hipMemcpyDtoDAsync(d2, d, 8, NULL), DV_HIP_ERROR_INVALID_VALUE);
  assert_int_equal(H.hipFree(d), 17); /* twice */
  OK(H.hipFree(m));
  OK(H.hipFree(d2));
  OK(H.hipHostFree(h));
}

/* Registered memory unregistered while a queued copy still uses its device
 * address: hipErrorIllegalAddress when the copy runs, sticky. */
static void test_use_after_free_sticky(void **state) {
  (void)state;
  void (*hold)(int) = NULL;
  *(void **)&hold = dlsym(g_lib, "dvdouble_hold");
  assert_non_null(hold);
  char *reg = aligned_alloc(4096, 4096);
  assert_non_null(reg);
  void *d = NULL, *dev = NULL;
  OK(H.hipMalloc(&d, 64));
  OK(H.hipHostRegister(reg, 4096, DV_HIP_HOST_REGISTER_MAPPED));
  OK(H.hipHostGetDevicePointer(&dev, reg, 0));
  hold(1);
  OK(H.hipMemcpyDtoDAsync(d, dev, 64, NULL)); /* valid now */
  OK(H.hipHostUnregister(reg));
  hold(0);
  assert_int_equal(H.hipStreamSynchronize(NULL), DV_HIP_ERROR_ILLEGAL_ADDRESS);
  void *x = NULL;
  assert_int_equal(H.hipMalloc(&x, 16), DV_HIP_ERROR_ILLEGAL_ADDRESS); /* sticky */
  assert_int_equal(H.hipCtxSynchronize(), DV_HIP_ERROR_ILLEGAL_ADDRESS);
  free(reg);
  /* Released to zero, the primary context starts clean (teardown retains
   * nothing: set up again here). */
  OK(H.hipCtxSetCurrent(NULL));
  OK(H.hipDevicePrimaryCtxRelease(0));
  OK(H.hipDevicePrimaryCtxRetain(&g_c0, 0));
  OK(H.hipCtxSetCurrent(g_c0));
  OK(H.hipMalloc(&x, 16));
  OK(H.hipFree(x));
}

static void test_ipc(void **state) {
  (void)state;
  void *d = NULL, *opened = (void *)1;
  dv_hipIpcMemHandle_t hd, zero;
  memset(&zero, 0, sizeof zero);
  OK(H.hipMalloc(&d, 4096));
  assert_int_equal(H.hipIpcGetMemHandle(&hd, (char *)d + 64), DV_HIP_ERROR_INVALID_VALUE); /* not the base */
  OK(H.hipIpcGetMemHandle(&hd, d));
  assert_memory_not_equal(&hd, &zero, sizeof hd);
  /* ROCm 5: the flag must be hipIpcMemLazyEnablePeerAccess, 0 there. */
  assert_int_equal(H.hipIpcOpenMemHandle(&opened, hd, 1), DV_HIP_ERROR_INVALID_VALUE);
  assert_null(opened);
  /* The exporting process cannot open its own handle. */
  assert_int_equal(H.hipIpcOpenMemHandle(&opened, hd, 0), DV_HIP_ERROR_INVALID_CONTEXT);
  assert_int_equal(H.hipIpcOpenMemHandle(&opened, zero, 0), DV_HIP_ERROR_INVALID_VALUE); /* not a handle */
  setenv("HIP_DOUBLE_ROCM", "6", 1);
  assert_int_equal(H.hipIpcOpenMemHandle(&opened, hd, 1), DV_HIP_ERROR_INVALID_CONTEXT); /* ROCm 6 takes 1 */
  unsetenv("HIP_DOUBLE_ROCM");
  assert_int_equal(H.hipIpcCloseMemHandle(d), DV_HIP_ERROR_INVALID_VALUE); /* never opened */
  OK(H.hipFree(d));
}

static void stream_cb(dv_hipStream_t s, dv_hipError_t status, void *user) {
  (void)s, (void)status;
  void *p = NULL;
  *(int *)user = H.hipMalloc(&p, 16); /* the runtime may not be called here */
}

static void test_callbacks_capture(void **state) {
  (void)state;
  dv_hipStream_t s = NULL;
  OK(H.hipStreamCreateWithFlags(&s, 0));
  int from_cb = -1;
  assert_int_equal(H.hipStreamAddCallback(s, stream_cb, &from_cb, 1), DV_HIP_ERROR_INVALID_VALUE);
  OK(H.hipStreamAddCallback(s, stream_cb, &from_cb, 0));
  OK(H.hipStreamSynchronize(s));
  assert_int_equal(from_cb, 800);
  dv_hipStreamCaptureStatus st = -1;
  OK(H.hipStreamIsCapturing(s, &st));
  assert_int_equal(st, 0);
  assert_int_equal(capture(s, 1), 0);
  OK(H.hipStreamIsCapturing(s, &st));
  assert_int_equal(st, 1);
  void *d = NULL;
  OK(H.hipMalloc(&d, 16));
  char pageable[16];
  assert_int_equal(H.hipMemcpyHtoDAsync(d, pageable, 16, s), DV_HIP_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  OK(H.hipStreamIsCapturing(s, &st));
  assert_int_equal(st, 2); /* invalidated */
  assert_int_equal(capture(s, 0), -1);
  OK(H.hipStreamDestroy(s));
  OK(H.hipFree(d));
}

static void test_peer(void **state) {
  (void)state;
  dv_hipCtx_t c1;
  OK(H.hipDevicePrimaryCtxRetain(&c1, 1));
  void *d0 = NULL, *d1 = NULL;
  OK(H.hipMalloc(&d0, 32));
  OK(H.hipMemsetD8Async(d0, 9, 32, NULL));
  OK(H.hipCtxSetCurrent(c1));
  OK(H.hipMalloc(&d1, 32));
  OK(H.hipCtxSetCurrent(g_c0));
  assert_int_equal(H.hipMemcpyPeerAsync(d1, 2, d0, 0, 32, NULL), DV_HIP_ERROR_INVALID_DEVICE);
  assert_int_equal(H.hipMemcpyPeerAsync(d1, 0, d0, 0, 32, NULL), DV_HIP_ERROR_INVALID_VALUE); /* d1 is device 1's */
  OK(H.hipMemcpyPeerAsync(d1, 1, d0, 0, 32, NULL));
  OK(H.hipStreamSynchronize(NULL));
  OK(H.hipCtxSetCurrent(c1));
  char out[32] = {0};
  OK(H.hipMemcpyDtoHAsync(out, d1, 32, NULL));
  assert_int_equal(out[31], 9);
  OK(H.hipFree(d1));
  OK(H.hipCtxSetCurrent(g_c0));
  OK(H.hipDevicePrimaryCtxRelease(1));
  OK(H.hipFree(d0));
}

/* ---- code objects --------------------------------------------------------------------------- */

/* Kernels with static shared memory, a devarray copy kernel's signature,
 * and module globals: compiled by the real hipRTC through the double. */
static const char *const k_src =
    "struct dv_view { long long ndim, shape[8], strides[8]; };\n"
    "extern \"C\" __global__ void k(int *p, long n) {\n"
    "  __shared__ int t[100];\n"
    "  t[threadIdx.x] = (int)n; __syncthreads(); p[threadIdx.x] = t[(threadIdx.x + 1) % 100];\n"
    "}\n"
    "extern \"C\" __global__ void dv_copy_w4_i32(const unsigned *sb, long long so, dv_view sv, unsigned *db,\n"
    "                                           long long dof, dv_view dv, long long count) {\n"
    "  if (threadIdx.x < count) db[dof / 4 + threadIdx.x] = sb[so / 4 + threadIdx.x] + sv.ndim + dv.ndim;\n"
    "}\n"
    "__constant__ int cv[16] = {1, 2, 3};\n"
    "__device__ double gv[4];\n";

static char *g_co;
static size_t g_co_size;

static int compile(const char *src, char **code, size_t *size, char *log, size_t cap) {
  dv_hiprtcProgram p = NULL;
  int r = R.hiprtcCreateProgram(&p, src, "t.hip", 0, NULL, NULL);
  if (r) {
    snprintf(log, cap, "%s", R.hiprtcGetErrorString(r));
    return r;
  }
  const char *opts[] = {"--gpu-architecture=gfx90a", "-O3"};
  r = R.hiprtcCompileProgram(p, 2, opts);
  size_t n = 0;
  if (!R.hiprtcGetProgramLogSize(p, &n) && n && n < cap) R.hiprtcGetProgramLog(p, log);
  if (!r && !(r = R.hiprtcGetCodeSize(p, size)) && (*code = malloc(*size))) r = R.hiprtcGetCode(p, *code);
  R.hiprtcDestroyProgram(&p);
  return r;
}

/* The code object, compiled once; NULL without a real hipRTC. */
static const char *code_object(void) {
  if (!g_co && rtc_path()) {
    char log[4096] = "";
    int r = compile(k_src, &g_co, &g_co_size, log, sizeof log);
    if (r) fail_msg("hipRTC failed (%d): %s", r, log);
  }
  return g_co;
}

#define NEED_CODE_OBJECT()                                                          \
  const char *co = code_object();                                                   \
  if (!co) SKIP_CASE("no real hipRTC to compile a code object (HIP_DOUBLE_HIPRTC)")

static void test_hiprtc_forwarding(void **state) {
  (void)state;
  if (!rtc_path()) SKIP_CASE("no real hipRTC to forward to");
  int major = 0, minor = -1;
  OK(R.hiprtcVersion(&major, &minor));
  assert_true(major >= 5 && minor >= 0);
  char *code = NULL;
  size_t size = 0;
  char log[4096] = "";
  assert_int_equal(compile("extern \"C\" __global__ void bad() { undeclared(); }", &code, &size, log, sizeof log),
                   6); /* HIPRTC_ERROR_COMPILATION */
  assert_non_null(strstr(log, "undeclared"));
  assert_null(code);
  assert_non_null(code_object());
  assert_true(g_co_size > 64 && !memcmp(g_co, "\x7f" "ELF", 4));
}

static void test_module(void **state) {
  (void)state;
  NEED_CODE_OBJECT();
  dv_hipModule_t m = NULL;
  OK(H.hipModuleLoadData(&m, co));
  dv_hipFunction_t k = NULL, cp = NULL;
  OK(H.hipModuleGetFunction(&k, m, "k"));
  OK(H.hipModuleGetFunction(&cp, m, "dv_copy_w4_i32"));
  assert_int_equal(H.hipModuleGetFunction(&k, m, "k.kd"), DV_HIP_ERROR_NOT_FOUND);
  assert_int_equal(H.hipModuleGetFunction(&k, m, "cv"), DV_HIP_ERROR_NOT_FOUND);
  OK(H.hipModuleGetFunction(&k, m, "k"));
  int v = -1;
  OK(H.hipFuncGetAttribute(&v, 1, k)); /* SHARED_SIZE_BYTES */
  assert_int_equal(v, 400);
  OK(H.hipFuncGetAttribute(&v, 0, k));
  assert_int_equal(v, 1024);
  OK(H.hipFuncGetAttribute(&v, 3, k)); /* LOCAL_SIZE_BYTES */
  assert_true(v >= 0);
  assert_int_equal(H.hipFuncGetAttribute(&v, 99, k), DV_HIP_ERROR_INVALID_VALUE);
  OK(H.hipFuncGetAttribute(&v, 4, k)); /* NUM_REGS: the metadata's VGPRs */
  assert_true(v > 0 && v <= 512);
  /* Globals: the image's bytes, or zeros. */
  dv_hipDeviceptr_t g = NULL;
  size_t size = 0;
  OK(H.hipModuleGetGlobal(&g, &size, m, "cv"));
  assert_int_equal(size, 64);
  int cv[16];
  OK(H.hipMemcpyDtoHAsync(cv, g, sizeof cv, NULL));
  assert_int_equal(cv[0], 1);
  assert_int_equal(cv[2], 3);
  assert_int_equal(cv[15], 0);
  OK(H.hipModuleGetGlobal(&g, &size, m, "gv"));
  assert_int_equal(size, 32);
  double gv[4] = {1, 1, 1, 1};
  OK(H.hipMemcpyDtoHAsync(gv, g, sizeof gv, NULL));
  assert_true(gv[0] == 0 && gv[3] == 0);
  assert_int_equal(H.hipModuleGetGlobal(&g, &size, m, "nope"), DV_HIP_ERROR_NOT_FOUND);
  /* Launch checks. */
  void *d = NULL;
  OK(H.hipMalloc(&d, 4096));
  long n = 5;
  void *params[] = {&d, &n};
  long before = launches();
  assert_int_equal(H.hipModuleLaunchKernel(k, 1, 1, 1, 1025, 1, 1, 0, NULL, params, NULL), DV_HIP_ERROR_INVALID_VALUE);
  assert_int_equal(H.hipModuleLaunchKernel(k, 1, 1, 1, 1, 1, 1025, 0, NULL, params, NULL), DV_HIP_ERROR_INVALID_VALUE);
  assert_int_equal(H.hipModuleLaunchKernel(k, 1, 1, 1, 64, 1, 1, 65536 - 400 + 1, NULL, params, NULL),
                   DV_HIP_ERROR_INVALID_VALUE); /* static + dynamic shared past 64 KiB */
  assert_int_equal(H.hipModuleLaunchKernel(k, 1u << 23, 1, 1, 1024, 1, 1, 0, NULL, params, NULL),
                   DV_HIP_ERROR_INVALID_VALUE); /* 2^33 work-items in x */
  assert_int_equal(H.hipModuleLaunchKernel(k, 1, 1, 1, 64, 1, 1, 0, NULL, NULL, NULL), DV_HIP_ERROR_INVALID_VALUE);
  void *short_params[] = {&d, NULL}; /* the metadata says k takes two arguments */
  assert_int_equal(H.hipModuleLaunchKernel(k, 1, 1, 1, 64, 1, 1, 0, NULL, short_params, NULL),
                   DV_HIP_ERROR_INVALID_VALUE);
  assert_int_equal(H.hipModuleLaunchKernel(k, 1, 1, 1, 64, 1, 1, 0, (dv_hipStream_t)1, params, NULL),
                   DV_HIP_ERROR_INVALID_HANDLE);
  assert_int_equal(launches(), before);
  OK(H.hipModuleLaunchKernel(k, 1, 1, 1, 1, 1, 1024, 65536 - 400, NULL, params, NULL)); /* AMD: z up to 1024 */
  OK(H.hipStreamSynchronize(NULL));
  assert_int_equal(launches(), before + 1); /* recorded, not run */
  OK(H.hipFree(d));
  OK(H.hipModuleUnload(m));
  assert_int_equal(H.hipModuleUnload(m), DV_HIP_ERROR_INVALID_HANDLE);
  assert_int_equal(H.hipModuleGetFunction(&k, m, "k"), DV_HIP_ERROR_INVALID_HANDLE);
}

typedef struct kview {
  int64_t ndim, shape[8], strides[8];
} kview;

/* devarray's copy kernel runs (host version), parameters as the backend passes them. */
static void test_copy_kernel(void **state) {
  (void)state;
  NEED_CODE_OBJECT();
  dv_hipModule_t m = NULL;
  dv_hipFunction_t f = NULL;
  OK(H.hipModuleLoadData(&m, co));
  OK(H.hipModuleGetFunction(&f, m, "dv_copy_w4_i32"));
  enum { N = 64 };
  uint32_t in[N], out[N];
  for (int i = 0; i < N; i++) in[i] = 1000u + (uint32_t)i;
  void *src = NULL, *dst = NULL;
  OK(H.hipMalloc(&src, sizeof in));
  OK(H.hipMalloc(&dst, sizeof in));
  OK(H.hipMemcpyHtoDAsync(src, in, sizeof in, NULL));
  OK(H.hipMemsetD8Async(dst, 0, sizeof in, NULL));
  /* Every other element of src, reversed into the first N/2 of dst. */
  kview sv = {1, {N / 2}, {-8}}, dv = {1, {N / 2}, {4}};
  int64_t soff = (N - 2) * 4, doff = 0, count = N / 2;
  void *params[] = {&src, &soff, &sv, &dst, &doff, &dv, &count};
  long before = launches();
  OK(H.hipModuleLaunchKernel(f, 1, 1, 1, 64, 1, 1, 0, NULL, params, NULL));
  OK(H.hipMemcpyDtoHAsync(out, dst, sizeof out, NULL));
  for (int i = 0; i < N / 2; i++) assert_int_equal(out[i], in[N - 2 - 2 * i]);
  for (int i = N / 2; i < N; i++) assert_int_equal(out[i], 0);
  assert_int_equal(launches(), before); /* run, not merely recorded */
  /* Out of bounds at run time: an illegal address, sticky. */
  sv.shape[0] = dv.shape[0] = N, count = N; /* reads below src's start */
  OK(H.hipModuleLaunchKernel(f, 1, 1, 1, 64, 1, 1, 0, NULL, params, NULL));
  assert_int_equal(H.hipStreamSynchronize(NULL), DV_HIP_ERROR_ILLEGAL_ADDRESS);
  assert_int_equal(H.hipMalloc(&src, 4), DV_HIP_ERROR_ILLEGAL_ADDRESS);
  OK(H.hipCtxSetCurrent(NULL));
  OK(H.hipDevicePrimaryCtxRelease(0)); /* everything goes with the context */
  OK(H.hipDevicePrimaryCtxRetain(&g_c0, 0));
  OK(H.hipCtxSetCurrent(g_c0));
}

/* Damaged and foreign images are refused cleanly (ASan watches the reads). */
static void test_bad_images(void **state) {
  (void)state;
  dv_hipModule_t m = (dv_hipModule_t)1;
  assert_int_equal(H.hipModuleLoadData(&m, NULL), DV_HIP_ERROR_INVALID_VALUE);
  assert_null(m);
  assert_int_equal(H.hipModuleLoadData(NULL, "x"), DV_HIP_ERROR_INVALID_VALUE);
  assert_int_equal(H.hipModuleLoadData(&m, "hello"), DV_HIP_ERROR_INVALID_IMAGE);
  assert_int_equal(H.hipModuleLoadData(&m, ".version 8.0\n.target sm_90\n"), DV_HIP_ERROR_INVALID_IMAGE); /* PTX */
  /* This very program: an x86-64 ELF. */
  FILE *fp = fopen("/proc/self/exe", "rb");
  assert_non_null(fp);
  unsigned char exe[64];
  assert_int_equal(fread(exe, 1, sizeof exe, fp), sizeof exe);
  fclose(fp);
  assert_int_equal(H.hipModuleLoadData(&m, exe), DV_HIP_ERROR_INVALID_IMAGE);
  NEED_CODE_OBJECT();
  unsigned char *img = malloc(g_co_size);
  assert_non_null(img);
#define DAMAGED(off, width, value)                                                    \
  do {                                                                                \
    memcpy(img, co, g_co_size);                                                       \
    uint64_t v_ = (value);                                                            \
    memcpy(img + (off), &v_, (width));                                                \
    m = (dv_hipModule_t)1;                                                            \
    assert_int_equal(H.hipModuleLoadData(&m, img), DV_HIP_ERROR_INVALID_IMAGE);       \
    assert_null(m);                                                                   \
  } while (0)
  DAMAGED(4, 1, 1);                  /* 32-bit */
  DAMAGED(5, 1, 2);                  /* big-endian */
  DAMAGED(18, 2, 62);                /* x86-64 */
  DAMAGED(40, 8, (uint64_t)1 << 40); /* section headers far past the end */
  DAMAGED(60, 2, 0);                 /* no sections */
  uint64_t shoff;
  memcpy(&shoff, co + 40, 8);
  uint16_t shnum;
  memcpy(&shnum, co + 60, 2);
  /* Each section in turn placed past the image's end. */
  for (unsigned i = 1; i < shnum; i++) {
    uint32_t type;
    memcpy(&type, co + shoff + i * 64 + 4, 4);
    if (type == 8) continue; /* .bss holds no bytes */
    DAMAGED(shoff + i * 64 + 24, 8, g_co_size);
  }
  /* The metadata note: malformed msgpack, or a note longer than its section. */
  int notes = 0;
  for (unsigned i = 1; i < shnum; i++) {
    uint32_t type;
    uint64_t off;
    memcpy(&type, co + shoff + i * 64 + 4, 4);
    memcpy(&off, co + shoff + i * 64 + 24, 8);
    if (type != 7) continue; /* SHT_NOTE: namesz, descsz, type, "AMDGPU\0" padded to 8, then msgpack */
    notes++;
    DAMAGED(off + 20, 1, 0xc1);       /* a byte msgpack never uses */
    DAMAGED(off + 20, 1, 0xdf);       /* a map claiming 2^32-ish entries */
    DAMAGED(off + 4, 4, 0x7fffffff);  /* descsz past the section */
  }
  assert_true(notes > 0);
  /* Random damage: each image loads or is refused, never read out of
   * bounds.  Not in the fields that give the image's extent (e_shoff,
   * e_shentsize, e_shnum): hipModuleLoadData takes no size, so an image
   * whose header claims more bytes than it has cannot be told (nor by HIP). */
  srand(26);
  int loaded = 0, refused = 0;
  for (int round = 0; round < 3000; round++) {
    memcpy(img, co, g_co_size);
    int flips = 1 + rand() % 8;
    for (int j = 0; j < flips; j++) {
      size_t at = (size_t)rand() % g_co_size;
      if ((at < 40 || at >= 48) && (at < 58 || at >= 62)) img[at] = (unsigned char)rand();
    }
    m = NULL;
    int r = H.hipModuleLoadData(&m, img);
    if (r == DV_HIP_SUCCESS) {
      loaded++;
      OK(H.hipModuleUnload(m));
    } else if (r == DV_HIP_ERROR_INVALID_IMAGE || r == DV_HIP_ERROR_OUT_OF_MEMORY) {
      refused++;
      assert_null(m);
    } else {
      fail_msg("round %d: %d", round, r);
    }
  }
  print_message("[ info ] damaged images: %d loaded, %d refused\n", loaded, refused);
  assert_true(loaded > 0 && refused > 0);
  free(img);
}

/* ---- without hipRTC, without devices (hip.double-nortc) ----------------------------------- */

static void test_nortc(void **state) {
  (void)state;
  assert_null(rtc_path());
  dv_hiprtcProgram p = (dv_hiprtcProgram)1;
  int r = R.hiprtcCreateProgram(&p, "extern \"C\" __global__ void k() {}", "k.hip", 0, NULL, NULL);
  assert_int_equal(r, 11); /* HIPRTC_ERROR_INTERNAL_ERROR */
  assert_null(p);
  const char *why = R.hiprtcGetErrorString(r);
  assert_non_null(strstr(why, "HIPRTC_ERROR_INTERNAL_ERROR"));
  assert_non_null(strstr(why, "/nonexistent/libhiprtc.so"));
  int major = 0, minor = 0;
  assert_int_equal(R.hiprtcVersion(&major, &minor), 11);
  size_t n = 0;
  assert_int_equal(R.hiprtcGetCodeSize(NULL, &n), 4); /* HIPRTC_ERROR_INVALID_PROGRAM */
}

static void test_no_devices(void **state) {
  (void)state;
  /* HIP_DOUBLE_DEVICES=0: ROCm 5 without a GPU says hipErrorInvalidDevice, ROCm 6 hipErrorNoDevice. */
  assert_int_equal(H.hipInit(0), DV_HIP_ERROR_INVALID_DEVICE);
  setenv("HIP_DOUBLE_ROCM", "6", 1);
  assert_int_equal(H.hipInit(0), DV_HIP_ERROR_NO_DEVICE);
  unsetenv("HIP_DOUBLE_ROCM");
  int n = -1;
  assert_int_equal(H.hipGetDeviceCount(&n), DV_HIP_ERROR_NO_DEVICE);
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "";
  if (load()) return 1;
  if (!strcmp(mode, "deadlock")) return deadlock_child();
  int failed;
  if (!strcmp(mode, "nortc")) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_nortc), cmocka_unit_test(test_no_devices)};
    failed = cmocka_run_group_tests_name("hip_double.nortc", tests, NULL, NULL);
  } else {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_versions),
        cmocka_unit_test(test_attributes),
        cmocka_unit_test(test_properties),
        cmocka_unit_test(test_stream_handles),
        cmocka_unit_test(test_memory_types),
        cmocka_unit_test(test_pageable_sync),
        cmocka_unit_test(test_pageable_deadlock),
        cmocka_unit_test(test_memory_rules),
        cmocka_unit_test(test_use_after_free_sticky),
        cmocka_unit_test(test_ipc),
        cmocka_unit_test(test_callbacks_capture),
        cmocka_unit_test(test_peer),
        cmocka_unit_test(test_hiprtc_forwarding),
        cmocka_unit_test(test_module),
        cmocka_unit_test(test_copy_kernel),
        cmocka_unit_test(test_bad_images),
    };
    failed = cmocka_run_group_tests_name("hip_double", tests, setup, teardown);
  }
  free(g_co);
  return failed ? 1 : g_skipped ? 77 : 0;
}
