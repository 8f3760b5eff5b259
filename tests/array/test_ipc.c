/* IPC handles across two real processes (fork + exec of tests/ipc_helper)
 * on the host simulator, and every refusal: a handle opened in the process
 * that exported it, from another backend, damaged, stale (the exporter
 * freed it, or exited); OpenCL's "not supported".  Backends: host,
 * host-pool (the handle names a pool segment and an offset), opencl, and
 * CUDA and HIP (issue 36 item 7): on a GPU the other process reads and
 * writes the exporter's memory; on the drivers' test doubles, which cannot
 * share memory between processes, its open is refused (NOT_SUPPORTED) with
 * a status and a message, and nothing changes; every refusal the library
 * makes itself is checked on them as on the simulator. */
#define _GNU_SOURCE /* fdopen, pipe2 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"

#ifndef DV_IPC_HELPER
#error "DV_IPC_HELPER: the path of the ipc_helper binary"
#endif

static bool is_pool(void) { return strstr(g_backend, "-pool") != NULL; }
static bool on_host_backend(void) { return strncmp(g_backend, "host", 4) == 0; }
static bool on_gpu_backend(void) { return strncmp(g_backend, "cuda", 4) == 0 || strncmp(g_backend, "hip", 3) == 0; }
/* The backend's name without a "-pool" suffix (the helper's IPC_BACKEND). */
static const char *backend_base(void) {
  return on_host_backend() ? "host" : strncmp(g_backend, "cuda", 4) == 0 ? "cuda" : strncmp(g_backend, "hip", 3) == 0 ? "hip" : "opencl";
}

/* A context of the backend under test with host_ipc on. */
static dv_context *ipc_context(void) {
  dv_context *c = NULL;
  assert_ok(test_context(&c, "host_ipc=on", NULL));
  return c;
}

typedef struct child {
  pid_t pid;
  FILE *in;  /* its stdin */
  FILE *out; /* its stdout */
} child;

static child spawn(const char *mode, const char *a1, const char *a2) {
  int to[2], from[2];
  assert_int_equal(pipe2(to, O_CLOEXEC), 0);
  assert_int_equal(pipe2(from, O_CLOEXEC), 0);
  child c;
  c.pid = fork();
  assert_true(c.pid >= 0);
  if (c.pid == 0) {
    dup2(to[0], 0);
    dup2(from[1], 1);
    if (is_pool()) setenv("IPC_MEMORY_MANAGER", "pool", 1);
    setenv("IPC_BACKEND", backend_base(), 1);
    char *argv[] = {(char *)DV_IPC_HELPER, (char *)mode, (char *)a1, (char *)a2, NULL};
    execv(DV_IPC_HELPER, argv);
    _exit(127);
  }
  close(to[0]), close(from[1]);
  c.in = fdopen(to[1], "w");
  c.out = fdopen(from[0], "r");
  assert_non_null(c.in);
  assert_non_null(c.out);
  return c;
}

static void say(child *c, const char *line) {
  fputs(line, c->in);
  fflush(c->in);
}

static void expect_line(child *c, const char *prefix, char *buf, size_t cap) {
  if (!fgets(buf, (int)cap, c->out)) fail_msg("ipc_helper closed its output (expected \"%s\")", prefix);
  if (strncmp(buf, prefix, strlen(prefix)) != 0) fail_msg("ipc_helper said \"%s\", expected \"%s\"", buf, prefix);
}

/* Wait for the child: its exit status. */
static int finish(child *c) {
  fclose(c->in);
  int st = 0;
  while (waitpid(c->pid, &st, 0) < 0 && errno == EINTR) {}
  fclose(c->out);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void to_hex(const dv_ipc_handle *h, char *hex) {
  for (int i = 0; i < DV_IPC_HANDLE_SIZE; i++) sprintf(hex + 2 * i, "%02x", h->bytes[i]);
}

static void from_hex(const char *hex, dv_ipc_handle *h) {
  for (int i = 0; i < DV_IPC_HANDLE_SIZE; i++) {
    unsigned v = 0;
    assert_int_equal(sscanf(hex + 2 * i, "%2x", &v), 1);
    h->bytes[i] = (unsigned char)v;
  }
}

/* int32[n] = 3i+1 on the device of c; with a leading int32[pad] allocated
 * first (so that a pool hands out an offset inside a segment). */
static dv_array *exported_array(dv_context *c, int64_t n) {
  dv_array *h = NULL, *d = NULL;
  assert_ok(dv_host_array(c, 1, &n, dv_dtype_get(DV_INT32), NULL, 'C', &h));
  int32_t *p = NULL;
  assert_ok(dv_array_host_data(h, (void **)&p));
  for (int64_t i = 0; i < n; i++) p[i] = (int32_t)(3 * i + 1);
  assert_ok(dv_to_device(c, h, NULL, 1, NULL, &d));
  dv_array_release(h);
  return d;
}

static void test_two_processes(void **state) {
  (void)state;
  if (!on_host_backend() && !on_gpu_backend()) skip();
  dv_context *c = ipc_context();
  bool refused = on_gpu_backend() && test_on_cuda_double(c); /* it cannot share memory */
  int64_t pad = 1000, n = 1000; /* same size: the pool puts both in one segment */
  dv_array *first = NULL;
  assert_ok(dv_device_array(c, 1, &pad, dv_dtype_get(DV_INT32), NULL, 'C', NULL, &first));
  dv_array *d = exported_array(c, n);
  if (is_pool()) { /* d sits at an offset inside a segment: the handle names both */
    void *nat = NULL;
    size_t off = 0;
    assert_ok(dv_array_native(d, &nat, &off));
    assert_true(off > 0);
  }
  dv_ipc_handle h;
  assert_ok(dv_ipc_export(d, &h));
  char hex[2 * DV_IPC_HANDLE_SIZE + 1], nbuf[32], line[256];
  to_hex(&h, hex);
  snprintf(nbuf, sizeof nbuf, "%lld", (long long)n);
  child ch = spawn("open", hex, nbuf);
  if (refused) {
    /* a status and the driver's words, nothing opened */
    expect_line(&ch, "refused DV_ERR_NOT_SUPPORTED: ", line, sizeof line);
    if (strlen(line) < 60) fail_msg("the refusal says too little: %s", line);
  } else {
    expect_line(&ch, "ok", line, sizeof line);
  }
  assert_int_equal(finish(&ch), 0);
  /* the other process's writes are in our memory (refused: unchanged) */
  dv_array *back = NULL;
  assert_ok(dv_copy_to_host(d, NULL, NULL, &back));
  int32_t *p = NULL;
  assert_ok(dv_array_host_data(back, (void **)&p));
  for (int64_t i = 0; i < n; i++) assert_int_equal(p[i], refused ? (int32_t)(3 * i + 1) : (int32_t)-i);
  dv_array_release(back);
  dv_array_release(d), dv_array_release(first);
  assert_ok(dv_context_destroy(c));
}

/* The exporter frees while the other process has the memory open: that
 * mapping stays readable; a later open of the same handle is refused. */
static void test_exporter_frees_first(void **state) {
  (void)state;
  if (!on_host_backend()) skip();
  dv_context *c = ipc_context();
  int64_t n = 256;
  dv_array *d = exported_array(c, n);
  dv_ipc_handle h;
  assert_ok(dv_ipc_export(d, &h));
  char hex[2 * DV_IPC_HANDLE_SIZE + 1], line[256];
  to_hex(&h, hex);
  child ch = spawn("hold", hex, "256");
  expect_line(&ch, "opened", line, sizeof line);
  dv_array_release(d);
  assert_ok(dv_context_flush_deallocs(c));
  if (is_pool()) assert_ok(dv_memory_trim(c)); /* the segment goes back to the simulator */
  say(&ch, "go\n");
  expect_line(&ch, "ok", line, sizeof line);
  assert_int_equal(finish(&ch), 0);
  child st = spawn("stale", hex, "256");
  expect_line(&st, "refused", line, sizeof line);
  assert_int_equal(finish(&st), 0);
  assert_ok(dv_context_destroy(c));
}

/* The other direction: this process opens what a child exported, then the
 * child exits and the handle is stale.  A layout larger than the exported
 * array is refused (and unmaps). */
static void test_exporter_exits(void **state) {
  (void)state;
  if (!on_host_backend() && !on_gpu_backend()) skip();
  char line[2 * DV_IPC_HANDLE_SIZE + 16];
  child ch = spawn("export", "100", NULL);
  expect_line(&ch, "", line, sizeof line);
  dv_ipc_handle h;
  from_hex(line, &h);
  int64_t n = 100, big = 101;
  dv_array *a = (dv_array *)1;
  if (on_gpu_backend()) {
    /* The handle names this backend; on the doubles the driver cannot open
     * another process's memory: refused with its words, nothing returned.
     * On a GPU the other process's memory reads as it wrote it. */
    dv_status rc = dv_ipc_open(g_ctx, &h, 1, &n, dv_dtype_get(DV_INT32), NULL, &a);
    if (test_on_cuda_double(g_ctx)) {
      assert_status(rc, DV_ERR_NOT_SUPPORTED);
      assert_null(a);
    } else {
      assert_ok(rc);
      dv_array *back = NULL;
      assert_ok(dv_copy_to_host(a, NULL, NULL, &back));
      int32_t *p = NULL;
      assert_ok(dv_array_host_data(back, (void **)&p));
      for (int64_t i = 0; i < n; i++) assert_int_equal(p[i], (int32_t)(3 * i + 1));
      dv_array_release(back);
      assert_ok(dv_ipc_close(a));
    }
    say(&ch, "exit\n");
    assert_int_equal(finish(&ch), 0);
    return;
  }
  assert_status(dv_ipc_open(g_ctx, &h, 1, &big, dv_dtype_get(DV_INT32), NULL, &a), DV_ERR_BAD_STRIDES);
  assert_null(a);
  assert_ok(dv_ipc_open(g_ctx, &h, 1, &n, dv_dtype_get(DV_INT32), NULL, &a));
  assert_int_equal(dv_array_memory(a), DV_MEM_DEVICE);
  dv_array *back = NULL;
  assert_ok(dv_copy_to_host(a, NULL, NULL, &back));
  int32_t *p = NULL;
  assert_ok(dv_array_host_data(back, (void **)&p));
  for (int64_t i = 0; i < n; i++) assert_int_equal(p[i], (int32_t)(3 * i + 1));
  dv_array_release(back);
  /* a view keeps the mapping; closing the original then the view unmaps */
  dv_index idx[1] = {DV_SLICE(10, 20, 1)};
  dv_array *v = NULL;
  assert_ok(dv_array_slice(a, 1, idx, &v));
  assert_ok(dv_ipc_close(a));
  int32_t x = 0;
  int64_t zero = 0;
  assert_ok(dv_array_get_item(v, &zero, &x, sizeof x, NULL));
  assert_int_equal(x, 31);
  assert_ok(dv_ipc_close(v));
  say(&ch, "exit\n");
  assert_int_equal(finish(&ch), 0);
  a = (dv_array *)1;
  assert_status(dv_ipc_open(g_ctx, &h, 1, &n, dv_dtype_get(DV_INT32), NULL, &a), DV_ERR_INVALID_ARGUMENT);
  assert_null(a);
  assert_non_null(strstr(dv_last_error(), "stale"));
}

static void test_refusals(void **state) {
  (void)state;
  int64_t n = 16;
  dv_array *d = NULL, *a = (dv_array *)1;
  dv_ipc_handle h;
  const dv_dtype *i4 = dv_dtype_get(DV_INT32);
  assert_ok(dv_device_array(g_ctx, 1, &n, i4, NULL, 'C', NULL, &d));
  dv_status rc = dv_ipc_export(d, &h);
  if (!on_host_backend() && !on_gpu_backend()) {
    /* OpenCL: no IPC */
    assert_status(rc, DV_ERR_NOT_SUPPORTED);
    for (int i = 0; i < DV_IPC_HANDLE_SIZE; i++) assert_int_equal(h.bytes[i], 0);
    dv_array_release(d);
    return;
  }
  if (on_host_backend()) {
    /* the simulator without host_ipc cannot share */
    assert_status(rc, DV_ERR_NOT_SUPPORTED);
    assert_non_null(strstr(dv_last_error(), "host_ipc"));
  } else {
    assert_ok(rc); /* CUDA and HIP share device memory as it is */
  }
  dv_array_release(d);
  dv_context *c = ipc_context();
  assert_ok(dv_device_array(c, 1, &n, i4, NULL, 'C', NULL, &d));
  assert_ok(dv_ipc_export(d, &h));
  /* opened by the process that exported it */
  assert_status(dv_ipc_open(c, &h, 1, &n, i4, NULL, &a), DV_ERR_MISUSE);
  assert_null(a);
  /* from another backend */
  dv_ipc_handle other = h;
  memcpy(other.bytes + 8, on_host_backend() ? "cuda\0\0\0\0" : "host\0\0\0\0", 8);
  a = (dv_array *)1;
  assert_status(dv_ipc_open(c, &other, 1, &n, i4, NULL, &a), DV_ERR_BACKEND_MISMATCH);
  assert_null(a);
  dv_context *ocl = NULL;
  dv_config *cfg = NULL;
  assert_ok(dv_config_create(&cfg));
  assert_ok(dv_config_set(cfg, "backend", "opencl"));
  if (dv_context_create(cfg, &ocl) == DV_OK) {
    assert_status(dv_ipc_open(ocl, &h, 1, &n, i4, NULL, &a), DV_ERR_BACKEND_MISMATCH);
    assert_ok(dv_context_destroy(ocl));
  }
  dv_config_destroy(cfg);
  /* damaged */
  dv_ipc_handle bad = h;
  bad.bytes[0] ^= 0xff;
  assert_status(dv_ipc_open(c, &bad, 1, &n, i4, NULL, &a), DV_ERR_INVALID_ARGUMENT);
  bad = h;
  bad.bytes[6] ^= 0x7f; /* format version */
  assert_status(dv_ipc_open(c, &bad, 1, &n, i4, NULL, &a), DV_ERR_INVALID_ARGUMENT);
  assert_null(a);
  assert_status(dv_ipc_open(c, NULL, 1, &n, i4, NULL, &a), DV_ERR_NULL_ARGUMENT);
  /* not shareable: host arrays, wrapped memory, empty arrays; closing a non-IPC array */
  dv_array *hst = NULL, *w = NULL, *e = NULL;
  assert_ok(dv_host_array(c, 1, &n, i4, NULL, 'C', &hst));
  assert_status(dv_ipc_export(hst, &h), DV_ERR_MISUSE);
  static int32_t mine[16];
  void *wrapped = mine; /* the simulator's device addresses are host addresses */
  size_t woff = 0;
  if (!on_host_backend()) assert_ok(dv_array_native(d, &wrapped, &woff)); /* a device address */
  assert_ok(dv_device_array_wrap(c, wrapped, woff, sizeof mine, 1, &n, i4, NULL, NULL, NULL, &w));
  assert_status(dv_ipc_export(w, &h), DV_ERR_MISUSE);
  int64_t zero = 0;
  assert_ok(dv_device_array(c, 1, &zero, i4, NULL, 'C', NULL, &e));
  assert_status(dv_ipc_export(e, &h), DV_ERR_INVALID_ARGUMENT);
  assert_status(dv_ipc_close(d), DV_ERR_MISUSE);
  dv_array *views[1] = {NULL};
  dv_scope *sc = NULL;
  assert_ok(dv_mapped_scope_begin(c, 1, &hst, views, &sc));
  assert_status(dv_ipc_export(views[0], &h), DV_ERR_MISUSE); /* a device view of host memory */
  assert_ok(dv_scope_end(sc));
  dv_array_release(views[0]);
  assert_status(dv_ipc_export(NULL, &h), DV_ERR_NULL_ARGUMENT);
  dv_array_release(hst), dv_array_release(w), dv_array_release(e), dv_array_release(d);
  assert_ok(dv_context_destroy(c));
}

/* A handle whose header names bytes outside the exported buffer (damaged,
 * or forged) is refused by the opening process before anything is
 * addressed: the allocation's range past the buffer, its offset or size
 * at the 64-bit limits (sums that would wrap), element 0 past the range. */
static void test_damaged_ranges(void **state) {
  (void)state;
  /* On CUDA and HIP the range is checked against the buffer the driver
   * opened: not on the doubles, which open nothing of another process's. */
  if (!on_host_backend() && !(on_gpu_backend() && !test_on_cuda_double(g_ctx))) skip();
  dv_context *c = ipc_context();
  int64_t n = 64;
  dv_array *d = exported_array(c, n);
  dv_ipc_handle h;
  assert_ok(dv_ipc_export(d, &h));
  /* The header's layout (src/array/ipc.c): range_offset at byte 24,
   * range_bytes at 32, elem_offset at 40, this machine's byte order. */
  uint64_t ro, rb;
  memcpy(&ro, h.bytes + 24, 8);
  memcpy(&rb, h.bytes + 32, 8);
  assert_true(rb >= (uint64_t)n * 4);
  const struct {
    size_t at;
    uint64_t v;
    const char *what;
  } cases[] = {
      {24, UINT64_MAX, "range_offset at the limit"},
      {24, ro + ((uint64_t)1 << 40), "range past the buffer's end"},
      {32, UINT64_MAX - ro, "range_bytes wrapping with range_offset"},
      {32, rb + ((uint64_t)1 << 40), "range_bytes past the buffer"},
      {40, rb + 4, "element 0 past the range"},
  };
  char hex[2 * DV_IPC_HANDLE_SIZE + 1], nbuf[32], line[512];
  snprintf(nbuf, sizeof nbuf, "%lld", (long long)n);
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    dv_ipc_handle bad = h;
    memcpy(bad.bytes + cases[i].at, &cases[i].v, 8);
    to_hex(&bad, hex);
    child ch = spawn("stale", hex, nbuf);
    if (!fgets(line, sizeof line, ch.out)) line[0] = 0;
    int st = finish(&ch);
    if (st != 0 || strncmp(line, "refused", 7) != 0)
      fail_msg("%s: the damaged handle was not refused (helper exit %d, said \"%s\")", cases[i].what,
               st, line);
  }
  dv_array_release(d);
  assert_ok(dv_context_destroy(c));
}

static const struct CMUnitTest tests[] = {T(test_two_processes), T(test_exporter_frees_first),
                                          T(test_exporter_exits), T(test_refusals),
                                          T(test_damaged_ranges)};
TEST_MAIN("ipc", tests)
