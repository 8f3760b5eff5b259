/*
 * White-box tests of the OpenCL backend's kernel methods (opencl_kernel.c),
 * called through the backend table with hand-made build requests: the
 * translation unit is <devarray/kernel.h> (as embedded in the library) + a
 * prelude + `#line 1 "name"` + the kernel source, as the kernel layer makes
 * it.  Run on PoCL in CI.
 *
 * Every barrier here is reached by the whole work-group: PoCL 3.1 crashes
 * the process on a divergent barrier, so no test ever launches one.
 */
#include <pthread.h>

#include "common.h"
#include "array/array.h"
#include "backends/opencl/opencl_internal.h"

#define BE (g_ctx->be)
#define BST (g_ctx->bst)
#define DS (dv__bstream(g_ctx, NULL))

/* ---- helpers --------------------------------------------------------------------- */

/* include/devarray/kernel.h as the library embeds it. */
extern const char dv__kernel_header[];

/* The translation unit: dialect header, prelude, #line, user source. */
static char *make_tu(const char *name, const char *prelude, const char *src) {
  size_t n = strlen(dv__kernel_header) + strlen(prelude) + strlen(name) + strlen(src) + 64;
  char *tu = malloc(n);
  assert_non_null(tu);
  snprintf(tu, n, "%s\n%s\n#line 1 \"%s\"\n%s", dv__kernel_header, prelude, name, src);
  return tu;
}

typedef struct built {
  dv_bmodule *m;
  void *image;
  size_t image_size;
  char *log;
} built;

static dv_status build_ex(const char *name, const char *prelude, const char *src, const char *opts, size_t cbytes,
                          const void *cinit, built *b) {
  char *tu = make_tu(name, prelude, src);
  dv_build_req req = {.name = name, .source = tu, .options = opts, .const_bytes = cbytes, .const_init = cinit};
  memset(b, 0, sizeof *b);
  dv_status rc = BE->module_build(BST, &req, &b->m, &b->image, &b->image_size, &b->log);
  free(tu);
  return rc;
}

static dv_bmodule *build(const char *name, const char *src) {
  built b;
  dv_status rc = build_ex(name, "", src, "", 0, NULL, &b);
  if (rc) fail_msg("build of %s: %s: %s\nlog:\n%s", name, dv_status_name(rc), dv_last_error(), b.log ? b.log : "");
  dv__free(b.image);
  dv__free(b.log);
  return b.m;
}

static dv_bkernel *kernel(dv_bmodule *m, const char *name) {
  dv_bkernel *k = NULL;
  assert_ok(BE->kernel_get(BST, m, name, &k));
  assert_non_null(k);
  return k;
}

static void *dalloc(size_t n) {
  void *b = NULL;
  assert_ok(BE->mem_alloc(BST, n, &b));
  return b;
}
static void dfree(void *b) { assert_ok(BE->mem_free(BST, b)); }

static void h2d(void *buf, size_t off, const void *h, size_t n) {
  dv_rect r = {.flags = DV_COPY_SYNC, .width = n, .height = 1, .depth = 1};
  r.src.ptr = (void *)h;
  r.dst.buf = buf, r.dst.offset = off;
  assert_ok(BE->copy_rect(BST, DS, &r));
}
static void d2h(void *h, const void *buf, size_t off, size_t n) {
  dv_rect r = {.flags = DV_COPY_SYNC, .width = n, .height = 1, .depth = 1};
  r.src.buf = (void *)buf, r.src.offset = off;
  r.dst.ptr = h;
  assert_ok(BE->copy_rect(BST, DS, &r));
}

#define A_BUF(b) ((dv_barg){.kind = DV_BARG_BUFFER, .buf = (b)})
#define A_I64(p) ((dv_barg){.kind = DV_BARG_VALUE, .type = DV_INT64, .value = (p), .size = sizeof(int64_t)})
#define A_I32(p) ((dv_barg){.kind = DV_BARG_VALUE, .type = DV_INT32, .value = (p), .size = sizeof(int32_t)})
#define A_F32(p) ((dv_barg){.kind = DV_BARG_VALUE, .type = DV_FLOAT32, .value = (p), .size = sizeof(float)})

static dv_blaunch cfg1(uint32_t grid, uint32_t block, size_t dyn, size_t nargs, const dv_barg *args) {
  dv_blaunch l = {.grid = {grid, 1, 1}, .block = {block, 1, 1}, .dynamic_shared = dyn, .nargs = nargs, .args = args};
  return l;
}

static void launch_sync(dv_bkernel *k, const dv_blaunch *l) {
  assert_ok(BE->launch(BST, DS, k, l));
  assert_ok(BE->stream_sync(BST, DS));
}

static const int64_t zero64 = 0;

/* ---- build and launch ----------------------------------------------------------------- */

static const char k_basic[] =
    "DV_KERNEL(saxpy, DV_ARRAY(const float, x), DV_ARRAY(float, y), float a, int n) {\n"
    "  DV_BIND(const float, x);\n"
    "  DV_BIND(float, y);\n"
    "  dv_i64 i = dv_global_id(0);\n"
    "  if (i < n) y[i] = a * x[i] + y[i];\n"
    "}\n"
    "DV_KERNEL(coords, DV_ARRAY(int, out), int w, int h) {\n"
    "  DV_BIND(int, out);\n"
    "  dv_i64 x = dv_global_id(0), y = dv_global_id(1);\n"
    "  if (x < w && y < h) out[y * w + x] = (int)(x + 1000 * y);\n"
    "  if (x == 0 && y == 0) {\n"
    "    out[w * h] = dv_grid_dim(0); out[w * h + 1] = dv_grid_dim(1);\n"
    "    out[w * h + 2] = dv_block_dim(0); out[w * h + 3] = dv_block_dim(1);\n"
    "    out[w * h + 4] = dv_grid_dim(2) * 10 + dv_block_dim(2);\n"
    "  }\n"
    "}\n"
    "DV_KERNEL(empty, int unused) { (void)unused; }\n";

typedef struct cb_rec {
  _Atomic int calls;
  dv_status status;
} cb_rec;
static void record_cb(void *user, dv_status status) {
  cb_rec *r = user;
  r->status = status;
  atomic_fetch_add(&r->calls, 1);
}

static void test_build_and_launch(void **state) {
  (void)state;
  built b;
  assert_ok(build_ex("basic.dvk", "", k_basic, "-DUNUSED_DEFINE=1", 0, NULL, &b));
  assert_non_null(b.m);
  assert_non_null(b.image); /* the binary for the cache */
  assert_true(b.image_size > 64);
  assert_non_null(b.log);   /* may be empty, never NULL on success here */
  dv__free(b.image);
  dv__free(b.log);
  dv_bkernel *k = kernel(b.m, "saxpy"), *k2 = NULL;
  assert_ok(BE->kernel_get(BST, b.m, "saxpy", &k2));
  assert_ptr_equal(k, k2); /* one kernel object per name */

  enum { N = 1000 };
  float x[N], y[N], out[N];
  for (int i = 0; i < N; i++) x[i] = (float)i, y[i] = (float)(2 * i + 1);
  /* Arrays at byte offsets inside their buffers (DV_BIND rebases). */
  void *bx = dalloc(N * 4 + 64), *by = dalloc(N * 4 + 128);
  h2d(bx, 64, x, sizeof x);
  h2d(by, 128, y, sizeof y);
  int64_t ox = 64, oy = 128;
  float a = 3.0f;
  int32_t n = N;
  dv_barg args[6] = {A_BUF(bx), A_I64(&ox), A_BUF(by), A_I64(&oy), A_F32(&a), A_I32(&n)};
  /* On a stream of its own, with a callback after it. */
  dv_bstream *s;
  assert_ok(BE->stream_create(BST, 0, &s));
  dv_blaunch l = cfg1((N + 127) / 128, 128, 0, 6, args);
  assert_ok(BE->launch(BST, s, k, &l));
  cb_rec rec = {0};
  assert_ok(BE->stream_callback(BST, s, record_cb, &rec));
  assert_ok(BE->stream_sync(BST, s));
  assert_ok(BE->stream_query(BST, s));
  /* (the stream waits for the callback's gate: it has run) */
  assert_int_equal(atomic_load(&rec.calls), 1);
  assert_int_equal(rec.status, DV_OK);
  assert_ok(BE->stream_destroy(BST, s));
  d2h(out, by, 128, sizeof out);
  for (int i = 0; i < N; i++) assert_true(out[i] == 3.0f * (float)i + (float)(2 * i + 1));

  /* 2-D grid and block. */
  dv_bkernel *kc = kernel(b.m, "coords");
  enum { W = 37, H = 21 };
  void *bo = dalloc((W * H + 5) * 4);
  int32_t w = W, h = H;
  dv_barg cargs[4] = {A_BUF(bo), A_I64(&zero64), A_I32(&w), A_I32(&h)};
  dv_blaunch lc = {.grid = {5, 3, 1}, .block = {8, 8, 1}, .nargs = 4, .args = cargs};
  launch_sync(kc, &lc);
  int co[W * H + 5];
  d2h(co, bo, 0, sizeof co);
  for (int yy = 0; yy < H; yy++)
    for (int xx = 0; xx < W; xx++) assert_int_equal(co[yy * W + xx], xx + 1000 * yy);
  assert_int_equal(co[W * H], 5);
  assert_int_equal(co[W * H + 1], 3);
  assert_int_equal(co[W * H + 2], 8);
  assert_int_equal(co[W * H + 3], 8);
  assert_int_equal(co[W * H + 4], 11);

  /* Attributes. */
  dv_kernel_attrs at;
  assert_ok(BE->kernel_attrs(BST, k, &at));
  dv_klimits lim;
  assert_ok(BE->kernel_limits(BST, &lim));
  assert_true(at.max_threads_per_block >= 1 && (uint32_t)at.max_threads_per_block <= lim.max_threads_per_block);
  assert_int_equal(at.static_shared_bytes, 0);
  assert_int_equal(at.max_dynamic_shared_bytes, lim.max_shared_per_block);
  assert_int_equal(at.constant_bytes, 0);
  assert_int_equal(at.registers, -1);
  assert_true(at.wave_size >= 1);
  dfree(bx), dfree(by), dfree(bo);
  assert_ok(BE->module_unload(BST, b.m));
}

static void test_limits_and_target(void **state) {
  (void)state;
  cl_state *st = BST;
  dv_klimits lim;
  assert_ok(BE->kernel_limits(BST, &lim));
  size_t wg = 0, params = 0;
  cl_ulong local = 0, cmax = 0;
  cl.clGetDeviceInfo(st->device, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof wg, &wg, NULL);
  cl.clGetDeviceInfo(st->device, CL_DEVICE_LOCAL_MEM_SIZE, sizeof local, &local, NULL);
  cl.clGetDeviceInfo(st->device, CL_DEVICE_MAX_CONSTANT_BUFFER_SIZE, sizeof cmax, &cmax, NULL);
  cl.clGetDeviceInfo(st->device, CL_DEVICE_MAX_PARAMETER_SIZE, sizeof params, &params, NULL);
  assert_int_equal(lim.max_threads_per_block, wg);
  assert_true(lim.max_block[0] >= 1 && lim.max_block[0] <= wg);
  assert_int_equal(lim.max_shared_per_block, local);
  assert_int_equal(lim.max_shared_per_block_optin, local);
  assert_int_equal(lim.max_constant_bytes, cmax);
  assert_true(lim.max_arg_bytes > 0 && lim.max_arg_bytes < params);
  assert_true(lim.max_grid[0] >= 65535);
  assert_true(lim.wave_size >= 1);
  char id[1024];
  assert_ok(BE->kernel_target_id(BST, id, sizeof id));
  dv_device_info di;
  assert_ok(dv_context_device_info(g_ctx, &di));
  assert_non_null(strstr(id, di.name));
  assert_non_null(strstr(id, di.driver_version));
  assert_non_null(strstr(id, "OpenCL C"));
  /* Too long for a small buffer: its start and a hash of the whole (so two
   * targets that differ only at the end still differ). */
  char small[80];
  assert_ok(BE->kernel_target_id(BST, small, sizeof small));
  assert_int_equal(strlen(small), sizeof small - 1);
  assert_memory_equal(small, id, 40);
  assert_non_null(strstr(small, "... #"));
  char tiny[8];
  assert_status(BE->kernel_target_id(BST, tiny, sizeof tiny), DV_ERR_INVALID_ARGUMENT);
}

/* ---- build errors ---------------------------------------------------------------------------- */

static void test_build_error_log(void **state) {
  (void)state;
  /* 40 errors: the log is far beyond the 2048 bytes the old code kept. */
  char src[8192];
  size_t n = (size_t)snprintf(src, sizeof src, "DV_KERNEL(bad, DV_ARRAY(int, o)) {\n  DV_BIND(int, o);\n");
  for (int i = 0; i < 40; i++)
    n += (size_t)snprintf(src + n, sizeof src - n, "  o[%d] = undeclared_identifier_number_%d;\n", i, i);
  snprintf(src + n, sizeof src - n, "}\n");
  built b;
  assert_status(build_ex("errors.dvk", "", src, "", 0, NULL, &b), DV_ERR_COMPILE);
  assert_null(b.m);
  assert_null(b.image);
  assert_int_equal(b.image_size, 0);
  assert_non_null(b.log);
  assert_true(strlen(b.log) > 2048);
  /* Line numbers are the user's (after #line): the first and the last error. */
  assert_non_null(strstr(b.log, "errors.dvk:3:"));
  assert_non_null(strstr(b.log, "errors.dvk:42:"));
  assert_non_null(strstr(b.log, "undeclared_identifier_number_39"));
  /* The detail message: the status, the program, the start of the log. */
  assert_non_null(strstr(dv_last_error(), "errors.dvk"));
  assert_non_null(strstr(dv_last_error(), "CL_BUILD_PROGRAM_FAILURE"));
  assert_non_null(strstr(dv_last_error(), "errors.dvk:3:"));
  dv__free(b.log);

  /* Unknown build options: the options are named. */
  assert_status(build_ex("ok.dvk", "", k_basic, "-no-such-option-xyz", 0, NULL, &b), DV_ERR_INVALID_ARGUMENT);
  assert_null(b.m);
  assert_non_null(strstr(dv_last_error(), "-no-such-option-xyz"));
  dv__free(b.log);

  /* A constant buffer over the device's limit. */
  dv_klimits lim;
  assert_ok(BE->kernel_limits(BST, &lim));
  char dummy = 0;
  assert_status(build_ex("big.dvk", "", k_basic, "", lim.max_constant_bytes + 1, &dummy, &b), DV_ERR_LAUNCH_CONFIG);
  assert_non_null(strstr(dv_last_error(), "CL_DEVICE_MAX_CONSTANT_BUFFER_SIZE"));
  assert_null(b.m);
}

/* ---- dynamic local memory ------------------------------------------------------------------------ */

static const char k_dyn[] =
    "DV_KERNEL(dyn, DV_ARRAY(int, out), int count) {\n"
    "  DV_BIND(int, out);\n"
    "  DV_SHARED(int, guard, 64);\n"
    "  DV_DYN_SHARED_BEGIN();\n"
    "  DV_DYN_SHARED_TAKE(int, buf, count);\n"
    "  int t = dv_thread_idx(0), b = dv_block_dim(0);\n"
    "  for (int i = t; i < 64; i += b) guard[i] = 0x5a5a0000 + i;\n"
    "  for (int i = t; i < count; i += b) buf[i] = i * 3 + dv_block_idx(0);\n"
    "  dv_syncthreads();\n"
    "  int sum = 0;\n"
    "  for (int i = t; i < count; i += b) sum += buf[count - 1 - i];\n"
    "  int ok = 1;\n"
    "  for (int i = 0; i < 64; i++) ok &= guard[i] == 0x5a5a0000 + i;\n"
    "  out[dv_global_id(0)] = ok ? sum : -1;\n"
    "}\n";

static void test_dynamic_local(void **state) {
  (void)state;
  dv_bmodule *m = build("dyn.dvk", k_dyn);
  dv_bkernel *k = kernel(m, "dyn");
  dv_kernel_attrs a0, a1;
  assert_ok(BE->kernel_attrs(BST, k, &a0));
  assert_true(a0.static_shared_bytes >= 64 * sizeof(int));
  enum { GRID = 3 };
  /* The same kernel, dynamic sizes changing between launches (0 included). */
  const struct { uint32_t block; int count; } runs[] = {{16, 16}, {64, 1000}, {128, 8192}, {32, 0}, {256, 4}, {64, 3000}};
  void *bo = dalloc(GRID * 256 * sizeof(int));
  for (size_t r = 0; r < sizeof runs / sizeof runs[0]; r++) {
    int32_t count = runs[r].count;
    uint32_t block = runs[r].block;
    dv_barg args[3] = {A_BUF(bo), A_I64(&zero64), A_I32(&count)};
    dv_blaunch l = cfg1(GRID, block, (size_t)count * sizeof(int), 3, args);
    launch_sync(k, &l);
    int out[GRID * 256];
    d2h(out, bo, 0, GRID * block * sizeof(int));
    for (uint32_t g = 0; g < GRID; g++)
      for (uint32_t t = 0; t < block; t++) {
        int want = 0;
        for (int i = (int)t; i < count; i += (int)block) want += (count - 1 - i) * 3 + (int)g;
        if (out[g * block + t] != want)
          fail_msg("run %zu (block %u, %d ints): block %u thread %u: %d, want %d", r, block, count, g, t,
                   out[g * block + t], want);
      }
  }
  /* The static size does not grow with the last launch's dynamic size. */
  assert_ok(BE->kernel_attrs(BST, k, &a1));
  assert_int_equal(a1.static_shared_bytes, a0.static_shared_bytes);
  /* More than the device has: a launch configuration error, nothing queued. */
  dv_klimits lim;
  assert_ok(BE->kernel_limits(BST, &lim));
  int32_t count = 4;
  dv_barg args[3] = {A_BUF(bo), A_I64(&zero64), A_I32(&count)};
  dv_blaunch l = cfg1(1, 32, lim.max_shared_per_block + 4096, 3, args);
  assert_status(BE->launch(BST, DS, k, &l), DV_ERR_LAUNCH_CONFIG);
  assert_ok(BE->stream_sync(BST, DS));
  dfree(bo);
  assert_ok(BE->module_unload(BST, m));
}

/* ---- constant memory ------------------------------------------------------------------------------- */

static const char k_const_prelude[] =
    "DV__CONSTANT_BUFFER(256)\n"
    "#define table DV__CONST(float, 0)\n"
    "#define itab DV__CONST(int, 128)\n";
static const char k_const[] =
    "DV_KERNEL(readc, DV_ARRAY(float, out), DV_ARRAY(int, iout)) {\n"
    "  DV_BIND(float, out);\n"
    "  DV_BIND(int, iout);\n"
    "  int i = dv_thread_idx(0);\n"
    "  out[i] = table[i];\n"
    "  iout[i] = itab[31 - i];\n"
    "}\n";

typedef struct cdata {
  float f[32];
  int32_t i[32];
} cdata;

static void run_readc(dv_bkernel *k, void *bf, void *bi, cdata *got) {
  dv_barg args[4] = {A_BUF(bf), A_I64(&zero64), A_BUF(bi), A_I64(&zero64)};
  dv_blaunch l = cfg1(1, 32, 0, 4, args);
  launch_sync(k, &l);
  d2h(got->f, bf, 0, sizeof got->f);
  d2h(got->i, bi, 0, sizeof got->i);
}

static void test_constant_memory(void **state) {
  (void)state;
  cdata c0, got;
  for (int i = 0; i < 32; i++) c0.f[i] = 0.5f * (float)i, c0.i[i] = 100 + i;
  built b;
  assert_ok(build_ex("const.dvk", k_const_prelude, k_const, "", sizeof c0, &c0, &b));
  dv__free(b.log);
  dv_bkernel *k = kernel(b.m, "readc");
  dv_kernel_attrs at;
  assert_ok(BE->kernel_attrs(BST, k, &at));
  assert_int_equal(at.constant_bytes, sizeof c0);
  void *bf = dalloc(128), *bi = dalloc(128);
  run_readc(k, bf, bi, &got);
  for (int i = 0; i < 32; i++) {
    assert_true(got.f[i] == 0.5f * (float)i);
    assert_int_equal(got.i[i], 100 + 31 - i);
  }
  /* Host update ordered on the stream; the caller's bytes are copied at the
   * call (changed right after, before the stream ran). */
  dv_bstream *s;
  assert_ok(BE->stream_create(BST, 0, &s));
  float nf[32];
  for (int i = 0; i < 32; i++) nf[i] = -1.0f * (float)i;
  dv_memref src = {.ptr = nf};
  assert_ok(BE->constant_write(BST, b.m, s, 0, src, sizeof nf));
  for (int i = 0; i < 32; i++) nf[i] = 999.0f;
  assert_ok(BE->stream_sync(BST, s));
  /* Device update of the ints (from a device buffer at an offset). */
  int32_t ni[40];
  for (int i = 0; i < 40; i++) ni[i] = -7 * i;
  void *bsrc = dalloc(sizeof ni);
  h2d(bsrc, 0, ni, sizeof ni);
  dv_memref dsrc = {.buf = bsrc, .offset = 8 * sizeof(int32_t)};
  assert_ok(BE->constant_write(BST, b.m, s, 128, dsrc, 32 * sizeof(int32_t)));
  assert_ok(BE->stream_sync(BST, s));
  run_readc(k, bf, bi, &got);
  for (int i = 0; i < 32; i++) {
    assert_true(got.f[i] == -1.0f * (float)i);
    assert_int_equal(got.i[i], -7 * (8 + 31 - i));
  }
  /* Outside the buffer. */
  assert_status(BE->constant_write(BST, b.m, s, 200, src, 64), DV_ERR_INVALID_ARGUMENT);
  /* The image carries no constants: loading it takes the request's data. */
  dv_bmodule *m2;
  char *tu = make_tu("const.dvk", k_const_prelude, k_const);
  dv_build_req req = {.name = "const.dvk", .source = tu, .options = "", .const_bytes = sizeof c0, .const_init = &c0};
  assert_ok(BE->module_load(BST, &req, b.image, b.image_size, &m2, NULL));
  free(tu);
  run_readc(kernel(m2, "readc"), bf, bi, &got);
  for (int i = 0; i < 32; i++) assert_true(got.f[i] == 0.5f * (float)i);
  assert_ok(BE->module_unload(BST, m2));
  assert_ok(BE->stream_destroy(BST, s));
  dv__free(b.image);
  dfree(bf), dfree(bi), dfree(bsrc);
  assert_ok(BE->module_unload(BST, b.m));
}

/* ---- barriers -------------------------------------------------------------------------------------- */

static const char k_barrier[] =
    "DV_KERNEL(bar, DV_ARRAY(int, out), DV_ARRAY(int, scratch)) {\n"
    "  DV_BIND(int, out);\n"
    "  DV_BIND(int, scratch);\n"
    "  DV_SHARED(int, s, 256);\n"
    "  int t = dv_thread_idx(0), b = dv_block_dim(0);\n"
    "  dv_i64 g0 = (dv_i64)dv_block_idx(0) * b;\n"
    "  s[t] = t * 7 + 1;\n"
    "  dv_barrier(DV_FENCE_LOCAL);\n"
    "  int v1 = s[b - 1 - t];\n"
    "  scratch[g0 + t] = v1 * 3;\n"
    "  dv_barrier(DV_FENCE_GLOBAL);\n"
    "  int v2 = scratch[g0 + (t + 1) % b];\n"
    "  dv_barrier(DV_FENCE_LOCAL | DV_FENCE_GLOBAL);\n"
    "  s[t] = v2;\n"
    "  dv_syncthreads();\n"
    "  int v3 = s[(t + 5) % b];\n"
    "  out[3 * (g0 + t)] = v1;\n"
    "  out[3 * (g0 + t) + 1] = v2;\n"
    "  out[3 * (g0 + t) + 2] = v3;\n"
    "}\n";

static void test_barriers(void **state) {
  (void)state;
  dv_bmodule *m = build("barrier.dvk", k_barrier);
  dv_bkernel *k = kernel(m, "bar");
  enum { G = 4, B = 256 };
  void *bo = dalloc(3 * G * B * sizeof(int)), *bs = dalloc(G * B * sizeof(int));
  dv_barg args[4] = {A_BUF(bo), A_I64(&zero64), A_BUF(bs), A_I64(&zero64)};
  dv_blaunch l = cfg1(G, B, 0, 4, args);
  launch_sync(k, &l);
  static int out[3 * G * B];
  d2h(out, bo, 0, sizeof out);
#define V1(t) (((B) - 1 - (t)) * 7 + 1)
#define V2(t) (V1(((t) + 1) % (B)) * 3)
  for (int g = 0; g < G; g++)
    for (int t = 0; t < B; t++) {
      const int *o = out + 3 * (g * B + t);
      assert_int_equal(o[0], V1(t));
      assert_int_equal(o[1], V2(t));
      assert_int_equal(o[2], V2((t + 5) % B));
    }
#undef V1
#undef V2
  dfree(bo), dfree(bs);
  assert_ok(BE->module_unload(BST, m));
}

static const char k_wave[] =
    "DV_KERNEL(wave, DV_ARRAY(int, out), DV_ARRAY(int, ws)) {\n"
    "  DV_BIND(int, out);\n"
    "  DV_BIND(int, ws);\n"
    "  DV_SHARED(int, s, 256);\n"
    "  int t = dv_thread_idx(0);\n"
    "#if defined(cl_khr_subgroups) || defined(__opencl_c_subgroups)\n"
    "  int span = dv_wave_size();\n"
    "#else\n"
    "  int span = dv_block_dim(0); /* the documented fallback: the whole work-group */\n"
    "#endif\n"
    "  int base = t / span * span;\n"
    "  s[t] = t + 1 + 1000 * dv_block_idx(0);\n"
    "  dv_wavebarrier();\n"
    "  out[dv_global_id(0)] = s[base + (span - 1 - (t - base))];\n"
    "  if (dv_global_id(0) == 0) { ws[0] = dv_wave_size(); ws[1] = span; }\n"
    "}\n";

static void test_wavebarrier_fallback(void **state) {
  (void)state;
  dv_klimits lim;
  assert_ok(BE->kernel_limits(BST, &lim));
  dv_bmodule *m = build("wave.dvk", k_wave);
  dv_bkernel *k = kernel(m, "wave");
  dv_kernel_attrs at;
  assert_ok(BE->kernel_attrs(BST, k, &at));
  enum { G = 3, B = 256 };
  void *bo = dalloc(G * B * sizeof(int)), *bw = dalloc(2 * sizeof(int));
  dv_barg args[4] = {A_BUF(bo), A_I64(&zero64), A_BUF(bw), A_I64(&zero64)};
  dv_blaunch l = cfg1(G, B, 0, 4, args);
  launch_sync(k, &l);
  int out[G * B], ws[2];
  d2h(out, bo, 0, sizeof out);
  d2h(ws, bw, 0, sizeof ws);
  cl_state *st = BST;
  if (!st->subgroup_fn) {
    /* No sub-groups (PoCL 3.1): wave size 1 everywhere, and the wave
     * barrier orders the whole work-group. */
    assert_int_equal(lim.wave_size, 1);
    assert_int_equal(at.wave_size, 1);
    assert_int_equal(ws[0], 1);
    assert_int_equal(ws[1], B);
  }
  int span = ws[1];
  assert_true(span >= 1 && B % span == 0);
  for (int g = 0; g < G; g++)
    for (int t = 0; t < B; t++) {
      int base = t / span * span;
      assert_int_equal(out[g * B + t], base + (span - 1 - (t - base)) + 1 + 1000 * g);
    }
  dfree(bo), dfree(bw);
  assert_ok(BE->module_unload(BST, m));
}

/* ---- atomics ----------------------------------------------------------------------------------------- */

static const char k_atomics[] =
    "DV_KERNEL(atom, DV_ARRAY(dv_i32, i32), DV_ARRAY(dv_i64, i64), DV_ARRAY(float, f32), DV_ARRAY(dv_u32, u32),\n"
    "          DV_ARRAY(int, hist)) {\n"
    "  DV_BIND(dv_i32, i32); DV_BIND(dv_i64, i64); DV_BIND(float, f32); DV_BIND(dv_u32, u32); DV_BIND(int, hist);\n"
    "  DV_SHARED(int, lh, 16);\n"
    "  DV_SHARED(float, lf, 1);\n"
    "  int t = dv_thread_idx(0);\n"
    "  dv_i64 g = dv_global_id(0);\n"
    "  if (t < 16) lh[t] = 0;\n"
    "  if (t == 0) lf[0] = 0.0f;\n"
    "  dv_syncthreads();\n"
    "  dv_i32 v = (dv_i32)(g * 7919 % 100003) - 50000;\n"
    "  dv_atomic_add_i32(&i32[0], 1);\n"
    "  dv_atomic_min_i32(&i32[1], v);\n"
    "  dv_atomic_max_i32(&i32[2], v);\n"
    "  if (dv_atomic_cas_i32(&i32[3], 0, (dv_i32)g + 1) == 0) dv_atomic_add_i32(&i32[4], 1);\n"
    "  dv_atomic_add_i64(&i64[0], ((dv_i64)1 << 33) + 1);\n"
    "  dv_atomic_min_i64(&i64[1], -(g << 32) - 5);\n"
    "  dv_atomic_max_i64(&i64[2], (g << 32) + 3);\n"
    "  dv_atomic_add_f32(&f32[0], 1.0f);\n"
    "  dv_atomic_add_f32(&f32[1], 0.5f);\n"
    "  dv_atomic_min_f32(&f32[2], (float)g * -0.25f);\n"
    "  dv_atomic_max_f32(&f32[3], (float)g * 0.25f);\n"
    "  dv_atomic_add_u32(&u32[0], 3u);\n"
    "  dv_atomic_max_u32(&u32[1], (dv_u32)g | 0x80000000u);\n"
    "  dv_atomic_add_i32(&lh[g % 16], 1);\n"
    "  dv_atomic_add_f32(&lf[0], 1.0f);\n"
    "  dv_syncthreads();\n"
    "  if (t < 16) dv_atomic_add_i32(&hist[t], lh[t]);\n"
    "  if (t == 0) dv_atomic_add_f32(&f32[4], lf[0]);\n"
    "}\n";

static void test_atomics(void **state) {
  (void)state;
  dv_bmodule *m = build("atomics.dvk", k_atomics);
  dv_bkernel *k = kernel(m, "atom");
  enum { G = 64, B = 256, N = G * B };
  int32_t i32[5] = {0, INT32_MAX, INT32_MIN, 0, 0};
  int64_t i64[3] = {0, INT64_MAX, INT64_MIN};
  float f32[5] = {0, 0, 1e30f, -1e30f, 0};
  uint32_t u32[2] = {0, 0};
  int32_t hist[16] = {0};
  void *b1 = dalloc(sizeof i32), *b2 = dalloc(sizeof i64), *b3 = dalloc(sizeof f32), *b4 = dalloc(sizeof u32),
       *b5 = dalloc(sizeof hist);
  h2d(b1, 0, i32, sizeof i32), h2d(b2, 0, i64, sizeof i64), h2d(b3, 0, f32, sizeof f32);
  h2d(b4, 0, u32, sizeof u32), h2d(b5, 0, hist, sizeof hist);
  dv_barg args[10] = {A_BUF(b1), A_I64(&zero64), A_BUF(b2), A_I64(&zero64), A_BUF(b3),
                      A_I64(&zero64), A_BUF(b4), A_I64(&zero64), A_BUF(b5), A_I64(&zero64)};
  dv_blaunch l = cfg1(G, B, 0, 10, args);
  launch_sync(k, &l);
  d2h(i32, b1, 0, sizeof i32), d2h(i64, b2, 0, sizeof i64), d2h(f32, b3, 0, sizeof f32);
  d2h(u32, b4, 0, sizeof u32), d2h(hist, b5, 0, sizeof hist);
  int32_t vmin = INT32_MAX, vmax = INT32_MIN;
  for (int64_t g = 0; g < N; g++) {
    int32_t v = (int32_t)(g * 7919 % 100003) - 50000;
    vmin = v < vmin ? v : vmin, vmax = v > vmax ? v : vmax;
  }
  assert_int_equal(i32[0], N);
  assert_int_equal(i32[1], vmin);
  assert_int_equal(i32[2], vmax);
  assert_true(i32[3] >= 1 && i32[3] <= N); /* one thread won the CAS ... */
  assert_int_equal(i32[4], 1);              /* ... exactly one */
  assert_true(i64[0] == (int64_t)N * ((INT64_C(1) << 33) + 1));
  assert_true(i64[1] == -((int64_t)(N - 1) << 32) - 5);
  assert_true(i64[2] == ((int64_t)(N - 1) << 32) + 3);
  assert_true(f32[0] == (float)N); /* exact: every add through the CAS loop counted */
  assert_true(f32[1] == 0.5f * (float)N);
  assert_true(f32[2] == -0.25f * (float)(N - 1));
  assert_true(f32[3] == 0.25f * (float)(N - 1));
  assert_true(f32[4] == (float)N); /* __local float adds, then global */
  assert_int_equal(u32[0], 3u * N);
  assert_int_equal(u32[1], (uint32_t)(N - 1) | 0x80000000u);
  for (int i = 0; i < 16; i++) assert_int_equal(hist[i], N / 16);
  dfree(b1), dfree(b2), dfree(b3), dfree(b4), dfree(b5);
  assert_ok(BE->module_unload(BST, m));
}

/* ---- argument checks ------------------------------------------------------------------------------------- */

static const char k_raw[] =
    "DV_KERNEL(good, DV_ARRAY(int, x)) { DV_BIND(int, x); x[0] = 1; }\n"
    "__kernel void raw(__global int *x) { x[0] = 1; }\n";

static void test_argument_errors(void **state) {
  (void)state;
  dv_bmodule *m = build("args.dvk", k_basic);
  dv_bkernel *k = kernel(m, "saxpy");
  void *bx = dalloc(64), *by = dalloc(64);
  float a = 1;
  int32_t n = 4;
  /* One argument short. */
  dv_barg args[7] = {A_BUF(bx), A_I64(&zero64), A_BUF(by), A_I64(&zero64), A_F32(&a), A_I32(&n), A_I32(&n)};
  dv_blaunch l = cfg1(1, 4, 0, 5, args);
  assert_status(BE->launch(BST, DS, k, &l), DV_ERR_KERNEL_ARGUMENT);
  assert_non_null(strstr(dv_last_error(), "saxpy"));
  assert_non_null(strstr(dv_last_error(), "6"));
  assert_non_null(strstr(dv_last_error(), "5"));
  /* One too many. */
  l.nargs = 7;
  assert_status(BE->launch(BST, DS, k, &l), DV_ERR_KERNEL_ARGUMENT);
  assert_non_null(strstr(dv_last_error(), "7"));
  /* (A value where a buffer goes, or a buffer where a value goes, is refused
   * before the backend by the kernel layer: tests/kernel/test_contract.c.) */
  /* A value of the wrong size: the driver's own check. */
  dv_barg wrong_size[6] = {A_BUF(bx), A_I32(&n), A_BUF(by), A_I64(&zero64), A_F32(&a), A_I32(&n)};
  l.nargs = 6;
  l.args = wrong_size;
  assert_status(BE->launch(BST, DS, k, &l), DV_ERR_KERNEL_ARGUMENT);
  assert_non_null(strstr(dv_last_error(), "argument 1"));
  /* The same launch, right, still works afterwards. */
  l.args = args;
  launch_sync(k, &l);
  /* Missing kernel; a kernel not declared with DV_KERNEL. */
  dv_bkernel *kk = (dv_bkernel *)1;
  assert_status(BE->kernel_get(BST, m, "no_such_kernel", &kk), DV_ERR_INVALID_ARGUMENT);
  assert_null(kk);
  assert_non_null(strstr(dv_last_error(), "no_such_kernel"));
  dv_bmodule *m2 = build("raw.dvk", k_raw);
  kernel(m2, "good");
  assert_status(BE->kernel_get(BST, m2, "raw", &kk), DV_ERR_KERNEL_ARGUMENT);
  assert_non_null(strstr(dv_last_error(), "DV_KERNEL"));
  dfree(bx), dfree(by);
  assert_ok(BE->module_unload(BST, m2));
  assert_ok(BE->module_unload(BST, m));
}

/* ---- binary images ---------------------------------------------------------------------------------------- */

static dv_status try_load(const void *img, size_t n, dv_bmodule **out) {
  char *tu = make_tu("basic.dvk", "", k_basic);
  dv_build_req req = {.name = "basic.dvk", .source = tu, .options = ""};
  char *log = NULL;
  dv_status rc = BE->module_load(BST, &req, img, n, out, &log);
  free(tu);
  dv__free(log);
  return rc;
}

static void test_binary_roundtrip(void **state) {
  (void)state;
  built b;
  assert_ok(build_ex("basic.dvk", "", k_basic, "", 0, NULL, &b));
  dv__free(b.log);
  assert_ok(BE->module_unload(BST, b.m));
  /* Reload in a fresh module and run it. */
  dv_bmodule *m = NULL;
  assert_ok(try_load(b.image, b.image_size, &m));
  assert_non_null(m);
  dv_bkernel *k = kernel(m, "saxpy");
  float x[8], y[8];
  for (int i = 0; i < 8; i++) x[i] = (float)i, y[i] = 1;
  void *bx = dalloc(sizeof x), *by = dalloc(sizeof y);
  h2d(bx, 0, x, sizeof x), h2d(by, 0, y, sizeof y);
  float a = 2;
  int32_t n = 8;
  dv_barg args[6] = {A_BUF(bx), A_I64(&zero64), A_BUF(by), A_I64(&zero64), A_F32(&a), A_I32(&n)};
  dv_blaunch l = cfg1(1, 8, 0, 6, args);
  launch_sync(k, &l);
  d2h(y, by, 0, sizeof y);
  for (int i = 0; i < 8; i++) assert_true(y[i] == 2.0f * (float)i + 1.0f);
  /* Parameter kinds survive the round trip (the driver forgets them): the
   * kernel layer's cross-check reads them through kernel_params. */
  dv_bparam bp[8];
  size_t nbp = 0;
  const char *sigtext = (const char *)1;
  assert_ok(BE->kernel_params(BST, k, bp, 8, &nbp, &sigtext));
  assert_null(sigtext);
  assert_int_equal(nbp, 6);
  const char kinds[] = "bvbvvv";
  for (size_t i = 0; i < 6; i++) assert_int_equal(bp[i].kind, kinds[i]);
  /* Type names too, where the driver keeps them across the binary (PoCL does). */
  const char *const types[] = {"float*", "long", "float*", "long", "float", "int"};
  for (size_t i = 0; i < 6; i++)
    if (bp[i].type[0] && strcmp(bp[i].type, types[i]) != 0)
      fail_msg("parameter %zu: the driver says `%s`, expected `%s`", i, bp[i].type, types[i]);
  assert_ok(BE->module_unload(BST, m));
  /* Damaged images fail cleanly (the driver never sees them: PoCL aborts on
   * a damaged binary). */
  unsigned char *bad = malloc(b.image_size);
  assert_non_null(bad);
  size_t probes[] = {0, 3, 8, 20, 41, 60, b.image_size / 2, b.image_size - 1};
  for (size_t i = 0; i < sizeof probes / sizeof probes[0]; i++) {
    memcpy(bad, b.image, b.image_size);
    bad[probes[i]] ^= 0x40;
    m = (dv_bmodule *)1;
    dv_status rc = try_load(bad, b.image_size, &m);
    if (rc == DV_OK) fail_msg("an image with byte %zu flipped loaded", probes[i]);
    assert_null(m);
    assert_true(dv_last_error()[0] != 0);
  }
  memcpy(bad, b.image, b.image_size);
  assert_int_not_equal(try_load(bad, b.image_size / 2, &m), DV_OK); /* truncated */
  assert_int_not_equal(try_load(bad, 10, &m), DV_OK);
  assert_int_not_equal(try_load(bad, 0, &m), DV_OK);
  assert_int_not_equal(try_load(NULL, 0, &m), DV_OK);
  /* Another target: the header's target hash changed, checksum made right. */
  memcpy(bad, b.image, b.image_size);
  bad[8] ^= 1;
  uint64_t sum = 0xcbf29ce484222325ull;
  memset(bad + 32, 0, 8);
  for (size_t i = 0; i < b.image_size; i++) sum = (sum ^ bad[i]) * 0x100000001b3ull;
  memcpy(bad + 32, &sum, 8);
  assert_status(try_load(bad, b.image_size, &m), DV_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(dv_last_error(), "another device"));
  free(bad);
  dv__free(b.image);
  dfree(bx), dfree(by);
}

/* ---- native handles and wrapped buffers -------------------------------------------------------------------- */

static void test_native_roundtrip(void **state) {
  (void)state;
  void *ctxh = NULL, *devh = NULL, *qh = NULL;
  assert_ok(BE->native_context(BST, &ctxh, &devh));
  assert_non_null(ctxh);
  assert_non_null(devh);
  cl_device_id cd = devh;
  dv_device_info di;
  char dname[256] = "";
  assert_ok(dv_context_device_info(g_ctx, &di));
  assert_int_equal(cl.clGetDeviceInfo(cd, CL_DEVICE_NAME, sizeof dname, dname, NULL), CL_SUCCESS);
  assert_string_equal(dname, di.name);
  dv_bstream *s;
  assert_ok(BE->stream_create(BST, 0, &s));
  assert_ok(BE->native_stream(BST, s, &qh));
  assert_non_null(qh);

  /* A cl_mem made with the raw API, filled with the raw API. */
  enum { N = 256 };
  int32_t h[N], back[N];
  for (int i = 0; i < N; i++) h[i] = i * 11 - 7;
  cl_int e;
  cl_mem mine = cl.clCreateBuffer(ctxh, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof h, h, &e);
  assert_non_null(mine);
  void *wrapped = NULL;
  assert_ok(BE->buffer_wrap(BST, mine, sizeof h, &wrapped));
  cl_uint refs = 0;
  cl.clGetMemObjectInfo(mine, CL_MEM_REFERENCE_COUNT, sizeof refs, &refs, NULL);
  assert_int_equal(refs, 2);
  void *nat = NULL;
  assert_ok(BE->native_buffer(BST, wrapped, &nat));
  assert_ptr_equal(nat, mine);
  /* devarray copies out of it (the strided kernel: every other element,
   * reversed) into its own buffer, then back into the second half. */
  void *own = dalloc(sizeof h);
  dv_strided c = {.nd = 1, .itemsize = 4, .shape = {N / 2}, .src_strides = {8}, .dst_strides = {-4}};
  c.src.buf = wrapped, c.src.offset = 0;
  c.dst.buf = own, c.dst.offset = (N / 2 - 1) * 4;
  assert_ok(BE->copy_strided(BST, s, &c));
  dv_strided c2 = {.nd = 1, .itemsize = 4, .shape = {N / 2}, .src_strides = {4}, .dst_strides = {4}};
  c2.src.buf = own, c2.dst.buf = wrapped, c2.dst.offset = N / 2 * 4;
  dv_rect r = {.width = N / 2 * 4, .height = 1, .depth = 1};
  r.src = c2.src, r.dst = c2.dst;
  assert_ok(BE->copy_rect(BST, s, &r));
  /* Read back with the raw API on the native queue (in order after
   * devarray's work; a queue of another context would refuse the buffer). */
  assert_int_equal(cl.clEnqueueReadBuffer(qh, mine, CL_TRUE, 0, sizeof back, back, 0, NULL, NULL), CL_SUCCESS);
  for (int i = 0; i < N / 2; i++) assert_int_equal(back[i], h[i]);
  for (int i = 0; i < N / 2; i++) assert_int_equal(back[N / 2 + i], h[2 * (N / 2 - 1 - i)]);
  /* Work queued directly on the native queue is seen by stream queries. */
  cl_event gate = cl.clCreateUserEvent(ctxh, &e);
  assert_non_null(gate);
  assert_int_equal(cl.clEnqueueMarkerWithWaitList(qh, 1, &gate, NULL), CL_SUCCESS);
  assert_status(BE->stream_query(BST, s), DV_ERR_NOT_READY);
  cl.clSetUserEventStatus(gate, CL_COMPLETE);
  cl.clReleaseEvent(gate);
  assert_ok(BE->stream_sync(BST, s));
  dv_status q = DV_ERR_NOT_READY;
  for (int i = 0; i < 100000 && q == DV_ERR_NOT_READY; i++) q = BE->stream_query(BST, s);
  assert_ok(q); /* a fresh marker each time: OK once the queue is idle */
  /* Unwrap drops devarray's reference only. */
  assert_ok(BE->buffer_unwrap(BST, wrapped));
  cl.clGetMemObjectInfo(mine, CL_MEM_REFERENCE_COUNT, sizeof refs, &refs, NULL);
  assert_int_equal(refs, 1);
  /* Wrapping more bytes than the buffer has; a buffer of another context. */
  assert_status(BE->buffer_wrap(BST, mine, sizeof h + 1, &wrapped), DV_ERR_INVALID_ARGUMENT);
  assert_null(wrapped);
  cl_context other = cl.clCreateContext(NULL, 1, &cd, NULL, NULL, &e);
  assert_non_null(other);
  cl_mem foreign = cl.clCreateBuffer(other, CL_MEM_READ_WRITE, 64, NULL, &e);
  assert_non_null(foreign);
  assert_status(BE->buffer_wrap(BST, foreign, 64, &wrapped), DV_ERR_BACKEND_MISMATCH);
  cl.clReleaseMemObject(foreign);
  cl.clReleaseContext(other);
  cl.clReleaseMemObject(mine);
  dfree(own);
  assert_ok(BE->stream_destroy(BST, s));
}

/* ---- the strided-copy kernel ----------------------------------------------------------------------------------- */

/* One side of a random layout: strides (gaps, any order, any sign) for
 * shape n[], element 0 at *off; returns the bytes the view spans. */
static size_t random_side(int nd, const int64_t *n, size_t isz, int64_t *strides, int64_t *off) {
  int perm[DV_MAXDIMS];
  for (int i = 0; i < nd; i++) perm[i] = i;
  for (int i = nd - 1; i > 0; i--) {
    int j = (int)rnd_range(0, i), t = perm[i];
    perm[i] = perm[j], perm[j] = t;
  }
  int64_t s = (int64_t)isz * rnd_range(1, 2);
  for (int k = nd - 1; k >= 0; k--) {
    int i = perm[k];
    strides[i] = s;
    s *= n[i] * rnd_range(1, 2);
  }
  static const int64_t bases[] = {0, 1, 2, 3, 4, 8, 16, 24, 40};
  int64_t base = bases[rnd_range(0, 8)], lo = 0, hi = 0;
  for (int i = 0; i < nd; i++) {
    if (rnd() & 1) strides[i] = -strides[i];
    int64_t ext = (n[i] - 1) * strides[i];
    if (ext < 0) lo += ext;
    else hi += ext;
  }
  *off = base - lo;
  return (size_t)(base - lo + hi + (int64_t)isz);
}

/* Copy with the kernel (white-box: copy_strided must take it) and check
 * every byte of the destination buffer against the host reference. */
static void check_strided(dv_bstream *s, int nd, const int64_t *n, size_t isz, const int64_t *ss, int64_t soff,
                          size_t sbytes, const int64_t *ds, int64_t doff, size_t dbytes) {
  unsigned char *hs = malloc(sbytes), *hd = malloc(dbytes), *got = malloc(dbytes);
  assert_true(hs && hd && got);
  fill_pattern(hs, sbytes, (unsigned)rnd());
  fill_pattern(hd, dbytes, (unsigned)rnd());
  void *bs = dalloc(sbytes), *bd = dalloc(dbytes);
  h2d(bs, 0, hs, sbytes);
  h2d(bd, 0, hd, dbytes);
  dv_strided c = {.nd = nd, .itemsize = isz, .flags = s ? 0 : DV_COPY_SYNC};
  c.src.buf = bs, c.src.offset = (size_t)soff;
  c.dst.buf = bd, c.dst.offset = (size_t)doff;
  memcpy(c.shape, n, (size_t)nd * sizeof *n);
  memcpy(c.src_strides, ss, (size_t)nd * sizeof *ss);
  memcpy(c.dst_strides, ds, (size_t)nd * sizeof *ds);
  assert_ok(BE->copy_strided(BST, s ? s : DS, &c));
  if (s) assert_ok(BE->stream_sync(BST, s));
  d2h(got, bd, 0, dbytes);
  ref_copy(hd + doff, ds, hs + soff, ss, n, nd, isz);
  if (memcmp(got, hd, dbytes) != 0) {
    size_t i = 0;
    while (got[i] == hd[i]) i++;
    fail_msg("strided copy: nd %d itemsize %zu: byte %zu of %zu differs (%u, want %u)", nd, isz, i, dbytes, got[i],
             hd[i]);
  }
  dfree(bs), dfree(bd);
  free(hs), free(hd), free(got);
}

static void test_strided_kernel(void **state) {
  (void)state;
  rnd_seed(12345);
  static const size_t items[] = {1, 2, 3, 4, 6, 8, 12, 16, 24, 32};
  dv_bstream *s;
  assert_ok(BE->stream_create(BST, 0, &s));
  for (int trial = 0; trial < 120; trial++) {
    int nd = (int)rnd_range(1, 5);
    size_t isz = items[rnd_range(0, 9)];
    int64_t n[DV_MAXDIMS], ss[DV_MAXDIMS], ds[DV_MAXDIMS], so, doff;
    for (int i = 0; i < nd; i++) n[i] = rnd_range(1, nd > 3 ? 6 : 40);
    size_t sb = random_side(nd, n, isz, ss, &so), db = random_side(nd, n, isz, ds, &doff);
    check_strided(trial % 3 == 0 ? s : NULL, nd, n, isz, ss, so, sb, ds, doff, db);
  }
  /* Eight dimensions that cannot merge: the kernel's maximum. */
  int64_t n8[8], s8[8], d8[8];
  for (int i = 0; i < 8; i++) n8[i] = 2;
  for (int i = 7; i >= 0; i--) s8[i] = i == 7 ? 8 : s8[i + 1] * 4, d8[i] = i == 7 ? -12 : d8[i + 1] * 3;
  int64_t doff8 = 0;
  for (int i = 0; i < 8; i++) doff8 += -d8[i];
  check_strided(NULL, 8, n8, 4, s8, 0, (size_t)(s8[0] * 2), d8, doff8, (size_t)doff8 + 4);
  /* Nine: not for the kernel (the planner then stages through the host). */
  int64_t n9[9], s9[9];
  for (int i = 0; i < 9; i++) n9[i] = 2;
  for (int i = 8; i >= 0; i--) s9[i] = i == 8 ? 8 : s9[i + 1] * 4;
  void *b9 = dalloc((size_t)s9[0] * 2);
  dv_strided c9 = {.nd = 9, .itemsize = 4, .flags = DV_COPY_SYNC};
  c9.src.buf = c9.dst.buf = b9;
  c9.dst.offset = 4;
  memcpy(c9.shape, n9, sizeof n9), memcpy(c9.src_strides, s9, sizeof s9), memcpy(c9.dst_strides, s9, sizeof s9);
  assert_int_equal(BE->copy_strided(BST, DS, &c9), DV_ERR_NOT_SUPPORTED);
  /* Host sides: not for the kernel either. */
  int hostmem[4];
  dv_strided ch = {.nd = 1, .itemsize = 4, .shape = {2}, .src_strides = {8}, .dst_strides = {4}};
  ch.src.ptr = hostmem, ch.dst.buf = b9;
  assert_int_equal(BE->copy_strided(BST, DS, &ch), DV_ERR_NOT_SUPPORTED);
  dfree(b9);
  /* The 64-bit index kernels (chosen from 2^31 words up) give the same result. */
  cl_state *st = BST;
  assert_non_null(st->copy_mod);
  static const char *wide[] = {"dv_copy_w1_i64", "dv_copy_w2_i64", "dv_copy_w4_i64", "dv_copy_w8_i64",
                               "dv_copy_w16_i64"};
  for (int w = 0; w < 5; w++) {
    size_t word = (size_t)1 << w;
    enum { M = 100 };
    unsigned char hsrc[M * 16 * 2], hdst[M * 16], want[M * 16];
    fill_pattern(hsrc, sizeof hsrc, 7u + (unsigned)w);
    memset(hdst, 0, sizeof hdst);
    void *bs = dalloc(sizeof hsrc), *bd = dalloc(sizeof hdst);
    h2d(bs, 0, hsrc, sizeof hsrc), h2d(bd, 0, hdst, sizeof hdst);
    dv_bkview sv = {.ndim = 1, .shape = {M}, .strides = {(int64_t)(2 * word)}};
    dv_bkview dv = {.ndim = 1, .shape = {M}, .strides = {(int64_t)word}};
    int64_t cnt = M;
    dv_barg args[7] = {A_BUF(bs), A_I64(&zero64), {.kind = DV_BARG_VIEW, .value = &sv, .size = sizeof sv},
                       A_BUF(bd), A_I64(&zero64), {.kind = DV_BARG_VIEW, .value = &dv, .size = sizeof dv}, A_I64(&cnt)};
    dv_blaunch l = cfg1(2, 32, 0, 7, args);
    launch_sync(kernel(st->copy_mod, wide[w]), &l);
    d2h(hdst, bd, 0, sizeof hdst);
    memset(want, 0, sizeof want);
    for (int i = 0; i < M; i++) memcpy(want + i * word, hsrc + 2 * i * word, word);
    assert_memory_equal(hdst, want, sizeof want);
    dfree(bs), dfree(bd);
  }
  assert_ok(BE->stream_destroy(BST, s));
}

/* A dense host side: a permutation of C-order strides, some negated;
 * element 0 at *off. */
static size_t dense_side(int nd, const int64_t *n, size_t isz, int64_t *strides, int64_t *off) {
  int perm[DV_MAXDIMS];
  for (int i = 0; i < nd; i++) perm[i] = i;
  for (int i = nd - 1; i > 0; i--) {
    int j = (int)rnd_range(0, i), t = perm[i];
    perm[i] = perm[j], perm[j] = t;
  }
  int64_t st = (int64_t)isz, lo = 0;
  for (int k = nd - 1; k >= 0; k--) {
    int i = perm[k];
    strides[i] = (rnd() & 1) ? -st : st;
    if (strides[i] < 0) lo += (n[i] - 1) * strides[i];
    st *= n[i];
  }
  *off = -lo;
  return (size_t)st;
}

/* Strided host <-> device copies with a dense host side: one contiguous
 * transfer and the kernel on the device (copy_strided takes them), checked
 * byte for byte on both sides; a host side with gaps is left to the
 * planner's staging. */
static void test_strided_host_device(void **state) {
  (void)state;
  rnd_seed(777);
  static const size_t items[] = {1, 2, 4, 8, 12, 16};
  dv_bstream *s;
  assert_ok(BE->stream_create(BST, 0, &s));
  for (int trial = 0; trial < 60; trial++) {
    int nd = (int)rnd_range(1, 4);
    size_t isz = items[rnd_range(0, 5)];
    int64_t n[DV_MAXDIMS], hs[DV_MAXDIMS], ds[DV_MAXDIMS], hoff, doff;
    for (int i = 0; i < nd; i++) n[i] = rnd_range(1, 12);
    size_t hb = dense_side(nd, n, isz, hs, &hoff), db = random_side(nd, n, isz, ds, &doff);
    bool to_dev = trial % 2 == 0;
    dv_bstream *q = trial % 3 == 0 ? s : DS;
    unsigned char *host = malloc(hb), *want_host = malloc(hb), *dev0 = malloc(db), *want_dev = malloc(db),
                  *got = malloc(db > hb ? db : hb);
    assert_true(host && want_host && dev0 && want_dev && got);
    fill_pattern(host, hb, (unsigned)rnd());
    fill_pattern(dev0, db, (unsigned)rnd());
    memcpy(want_host, host, hb);
    memcpy(want_dev, dev0, db);
    void *bd = dalloc(db);
    h2d(bd, 0, dev0, db);
    dv_strided c = {.nd = nd, .itemsize = isz, .flags = q == s ? 0 : DV_COPY_SYNC};
    memcpy(c.shape, n, (size_t)nd * sizeof *n);
    if (to_dev) {
      c.src.ptr = host + hoff, c.dst.buf = bd, c.dst.offset = (size_t)doff;
      memcpy(c.src_strides, hs, (size_t)nd * sizeof *hs), memcpy(c.dst_strides, ds, (size_t)nd * sizeof *ds);
      ref_copy(want_dev + doff, ds, host + hoff, hs, n, nd, isz);
    } else {
      c.src.buf = bd, c.src.offset = (size_t)doff, c.dst.ptr = host + hoff;
      memcpy(c.src_strides, ds, (size_t)nd * sizeof *ds), memcpy(c.dst_strides, hs, (size_t)nd * sizeof *hs);
      ref_copy(want_host + hoff, hs, dev0 + doff, ds, n, nd, isz);
    }
    assert_ok(BE->copy_strided(BST, q, &c));
    if (q == s) assert_ok(BE->stream_sync(BST, s));
    d2h(got, bd, 0, db);
    if (memcmp(got, want_dev, db) != 0) fail_msg("trial %d (%s, nd %d, itemsize %zu): device bytes differ", trial, to_dev ? "H2D" : "D2H", nd, isz);
    if (memcmp(host, want_host, hb) != 0) fail_msg("trial %d (%s, nd %d, itemsize %zu): host bytes differ", trial, to_dev ? "H2D" : "D2H", nd, isz);
    dfree(bd);
    free(host), free(want_host), free(dev0), free(want_dev), free(got);
  }
  assert_ok(BE->stream_destroy(BST, s));
  /* A host side with gaps: not for the backend. */
  int hostmem[8];
  void *b = dalloc(64);
  dv_strided cg = {.nd = 1, .itemsize = 4, .shape = {4}, .src_strides = {8}, .dst_strides = {12}};
  cg.src.ptr = hostmem, cg.dst.buf = b;
  assert_int_equal(BE->copy_strided(BST, DS, &cg), DV_ERR_NOT_SUPPORTED);
  dfree(b);

  /* Through the public API: a C-order host array into a transposed,
   * reversed device view and back is not staged through host memory. */
  enum { R = 37, C = 29 };
  static double h[R][C], back[R][C];
  for (int i = 0; i < R; i++)
    for (int j = 0; j < C; j++) h[i][j] = i * 100.0 + j;
  int64_t shp[2] = {R, C};
  dv_array *ha, *da, *hb2;
  assert_ok(dv_host_array_wrap(g_ctx, h, 2, shp, dv_dtype_get(DV_FLOAT64), NULL, &ha));
  assert_ok(dv_host_array_wrap(g_ctx, back, 2, shp, dv_dtype_get(DV_FLOAT64), NULL, &hb2));
  assert_ok(dv_device_array(g_ctx, 2, shp, dv_dtype_get(DV_FLOAT64), NULL, 'F', NULL, &da)); /* strides (8, 8R) */
  dv_index rev[2] = {DV_SLICE(DV_NONE, DV_NONE, -1), DV_SLICE(DV_NONE, DV_NONE, 1)};
  dv_array *dr;
  assert_ok(dv_array_slice(da, 2, rev, &dr)); /* strides (-8, 8R) */
  dv_stats st0 = {.size = sizeof st0}, st1 = {.size = sizeof st1};
  assert_ok(dv_context_stats(g_ctx, &st0));
  assert_ok(dv_array_copy(dr, ha, NULL));
  assert_ok(dv_array_copy(hb2, dr, NULL));
  assert_ok(dv_context_stats(g_ctx, &st1));
  assert_memory_equal(back, h, sizeof h);
  assert_int_equal(st1.staged_copies, st0.staged_copies);
  assert_int_equal(st1.bytes_h2d - st0.bytes_h2d, sizeof h);
  dv_array_release(dr), dv_array_release(da), dv_array_release(ha), dv_array_release(hb2);
}

/* ---- launches from several threads --------------------------------------------------------------------------------- */

typedef struct thr {
  dv_bkernel *k;
  int id;
  dv_status rc;
  int bad;
} thr;

static void *launcher(void *arg) {
  thr *t = arg;
  enum { N = 512, ROUNDS = 40 };
  float x[N], y[N];
  for (int i = 0; i < N; i++) x[i] = 1, y[i] = 0;
  void *bx = NULL, *by = NULL;
  dv_bstream *s = NULL;
  t->rc = BE->mem_alloc(BST, sizeof x, &bx);
  if (!t->rc) t->rc = BE->mem_alloc(BST, sizeof y, &by);
  if (!t->rc) t->rc = BE->stream_create(BST, 0, &s);
  dv_rect r = {.width = sizeof x, .height = 1, .depth = 1};
  r.src.ptr = x, r.dst.buf = bx;
  if (!t->rc) t->rc = BE->copy_rect(BST, s, &r);
  r.src.ptr = y, r.dst.buf = by;
  if (!t->rc) t->rc = BE->copy_rect(BST, s, &r);
  float a = (float)(t->id + 1);
  int32_t n = N;
  dv_barg args[6] = {A_BUF(bx), A_I64(&zero64), A_BUF(by), A_I64(&zero64), A_F32(&a), A_I32(&n)};
  dv_blaunch l = cfg1(N / 64, 64, 0, 6, args);
  for (int i = 0; i < ROUNDS && !t->rc; i++) t->rc = BE->launch(BST, s, t->k, &l);
  if (!t->rc) {
    dv_rect rb = {.width = sizeof y, .height = 1, .depth = 1};
    rb.src.buf = by, rb.dst.ptr = y;
    t->rc = BE->copy_rect(BST, s, &rb);
  }
  if (!t->rc) t->rc = BE->stream_sync(BST, s);
  for (int i = 0; i < N && !t->rc; i++) t->bad += y[i] != a * ROUNDS;
  if (s) BE->stream_destroy(BST, s);
  if (bx) BE->mem_free(BST, bx);
  if (by) BE->mem_free(BST, by);
  return NULL;
}

static void test_launch_threads(void **state) {
  (void)state;
  dv_bmodule *m = build("threads.dvk", k_basic);
  dv_bkernel *k = kernel(m, "saxpy");
  enum { T = 4 };
  pthread_t th[T];
  thr t[T];
  for (int i = 0; i < T; i++) {
    t[i] = (thr){.k = k, .id = i};
    assert_int_equal(pthread_create(&th[i], NULL, launcher, &t[i]), 0);
  }
  for (int i = 0; i < T; i++) pthread_join(th[i], NULL);
  for (int i = 0; i < T; i++) {
    if (t[i].rc) fail_msg("thread %d: %s", i, dv_status_name(t[i].rc));
    assert_int_equal(t[i].bad, 0);
  }
  assert_ok(BE->module_unload(BST, m));
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "opencl") != 0) {
    printf("SKIPPED: suite opencl_kernels on backend %s: OpenCL-only tests\n", argv[1]);
    return 77;
  }
  const struct CMUnitTest tests[] = {
      T(test_build_and_launch), T(test_limits_and_target), T(test_build_error_log), T(test_dynamic_local),
      T(test_constant_memory),  T(test_barriers),          T(test_wavebarrier_fallback), T(test_atomics),
      T(test_argument_errors),  T(test_binary_roundtrip),  T(test_native_roundtrip),     T(test_strided_kernel),
      T(test_strided_host_device), T(test_launch_threads),
  };
  return test_main(argc, argv, "opencl_kernels", tests, sizeof tests / sizeof tests[0]);
}
