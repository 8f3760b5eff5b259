/* Native handles and wrapped memory: refusals that must change nothing (a
 * dead mapped view has no native memory; offsets and sizes beyond int64_t
 * are an overflow, not a misalignment). */
#include "common.h"

static int released;
static void on_release(void *user) { (void)user, released++; }

/* A device view of a mapped scope that has ended has no memory left:
 * dv_array_native refuses it and clears its outputs. */
static void test_native_of_dead_mapped_view(void **state) {
  (void)state;
  int32_t buf[16] = {0};
  int64_t n = 16;
  dv_array *h = NULL, *dv[1] = {NULL};
  assert_ok(dv_host_array_wrap(g_ctx, buf, 1, &n, dv_dtype_get(DV_INT32), NULL, &h));
  dv_scope *sc = NULL;
  dv_status rc = dv_mapped_scope_begin(g_ctx, 1, &h, dv, &sc);
  if (rc == DV_ERR_NOT_SUPPORTED) {
    dv_array_release(h);
    skip();
  }
  assert_ok(rc);
  void *nat = NULL;
  size_t off = 0;
  assert_ok(dv_array_native(dv[0], &nat, &off));
  assert_non_null(nat);
  assert_ok(dv_scope_end(sc));
  nat = (void *)1, off = 7;
  assert_status(dv_array_native(dv[0], &nat, &off), DV_ERR_INVALID_ARGUMENT);
  assert_null(nat);
  assert_int_equal(off, 0);
  dv_array_release(dv[0]);
  dv_array_release(h);
}

/* offset or bytes above INT64_MAX: DV_ERR_OVERFLOW, nothing made, the
 * owner's release never called. */
static void test_wrap_overflow(void **state) {
  (void)state;
  static double mem[8];
  int64_t n = 2;
  const dv_dtype *f8 = dv_dtype_get(DV_FLOAT64);
  dv_array *w = (dv_array *)1;
  released = 0;
  size_t big = (size_t)INT64_MAX + 1u; /* aligned to 8: not a misalignment */
  assert_status(dv_device_array_wrap(g_ctx, mem, big, sizeof mem, 1, &n, f8, NULL, on_release,
                                     NULL, &w),
                DV_ERR_OVERFLOW);
  assert_null(w);
  w = (dv_array *)1;
  assert_status(dv_device_array_wrap(g_ctx, mem, 0, SIZE_MAX, 1, &n, f8, NULL, on_release, NULL, &w),
                DV_ERR_OVERFLOW);
  assert_null(w);
  /* A misaligned offset is still reported as such. */
  assert_status(dv_device_array_wrap(g_ctx, mem, 4, sizeof mem, 1, &n, f8, NULL, on_release, NULL, &w),
                DV_ERR_BAD_STRIDES);
  assert_ok(dv_context_flush_deallocs(g_ctx));
  assert_int_equal(released, 0);
}

/* Plugged-in memory managers whose blocks are not the backend's memory
 * (issue 34): Numba's dummy EMM plug-in hands out an allocation count as
 * the device pointer.  The library must never give such a value to the
 * backend (the host simulator read a block record through it: a crash in
 * dv_array_native): the array is made and carried, its block goes back to
 * the manager's free, and every access is refused with a clear error. */
typedef struct fake_mm {
  dv_context *ctx;
  int allocs, frees;
  bool real;        /* hand out dv_backend_alloc blocks (a well-behaved plug-in) */
  int real_first;   /* or only the first real_first allocations real, the later ones made up */
  size_t skew;      /* real blocks: offset handed out, past the block's end when large */
  dv_block last_freed;
} fake_mm;
static fake_mm g_fake;
static dv_status fake_init(dv_context *ctx, void *user, void **state) {
  fake_mm *m = user;
  m->ctx = ctx;
  *state = m;
  return DV_OK;
}
static void fake_fini(void *state) { (void)state; }
static dv_status fake_alloc(void *state, size_t bytes, dv_stream *s, dv_block *out) {
  (void)s;
  fake_mm *m = state;
  m->allocs++;
  if (m->real || m->allocs <= m->real_first) {
    dv_status rc = dv_backend_alloc(m->ctx, bytes, out);
    if (!rc) out->offset = m->skew;
    out->handle = (void *)(uintptr_t)(1000 + m->allocs);
    return rc;
  }
  out->buf = (void *)(uintptr_t)m->allocs; /* Numba's dummy: c_void_p(alloc_count) */
  out->offset = 0;
  out->handle = (void *)(uintptr_t)(1000 + m->allocs);
  return DV_OK;
}
static dv_status fake_free(void *state, dv_block b, size_t bytes, dv_stream *s) {
  (void)s, (void)bytes;
  fake_mm *m = state;
  m->frees++;
  m->last_freed = b;
  if ((uintptr_t)b.buf >= 4096) { /* a real block (the made-up ones are small counts) */
    b.offset = 0;
    return dv_backend_free(m->ctx, b);
  }
  return DV_OK;
}
static dv_status fake_info(void *state, size_t *f, size_t *t) {
  (void)state;
  *f = 32, *t = 64;
  return DV_OK;
}

static dv_context *fake_context_opt(bool real, size_t skew, int real_first, const char *strided) {
  memset(&g_fake, 0, sizeof g_fake);
  g_fake.real = real;
  g_fake.skew = skew;
  g_fake.real_first = real_first;
  dv_memory_manager mm = {DV_MEMORY_MANAGER_VERSION, "fake", &g_fake, fake_init, fake_fini, fake_alloc,
                          fake_free, fake_info, NULL, NULL, NULL, NULL};
  dv_config *cfg;
  assert_ok(dv_config_create(&cfg));
  assert_ok(dv_config_set_memory_manager(cfg, &mm));
  char be[32];
  snprintf(be, sizeof be, "%s", g_backend);
  if (strchr(be, '-')) *strchr(be, '-') = 0;
  assert_ok(dv_config_set(cfg, "backend", be));
  if (strided) assert_ok(dv_config_set(cfg, "host_strided", strided));
  dv_context *c = NULL;
  assert_ok(dv_context_create(cfg, &c));
  dv_config_destroy(cfg);
  return c;
}

static dv_context *fake_context(bool real, size_t skew) { return fake_context_opt(real, skew, 0, NULL); }

static void assert_refused(dv_status rc) {
  assert_status(rc, DV_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(dv_last_error(), "memory manager \"fake\""));
}

static void test_manager_foreign_block(void **state) {
  (void)state;
  if (test_on_cuda_double(g_ctx)) skip(); /* CUDA pointers are the driver's to check */
  dv_context *c = fake_context(false, 0);
  int64_t n = 4;
  const dv_dtype *i8 = dv_dtype_get(DV_INT64);
  dv_array *d = NULL, *h = NULL;
  assert_ok(dv_device_array(c, 1, &n, i8, NULL, 'C', NULL, &d));
  assert_int_equal(g_fake.allocs, 1);
  dv_block blk;
  size_t off = 9;
  int usable = 7;
  assert_ok(dv_array_block(d, &blk, &off, &usable));
  assert_ptr_equal(blk.buf, (void *)1);
  assert_ptr_equal(blk.handle, (void *)1001);
  assert_int_equal(off, 0);
  assert_int_equal(usable, 0);
  /* the crash: dv_array_native asked the backend about buffer 0x1 */
  void *nat = (void *)5;
  off = 5;
  assert_refused(dv_array_native(d, &nat, &off));
  assert_null(nat);
  assert_int_equal(off, 0);
  int64_t v[4] = {1, 2, 3, 4};
  assert_ok(dv_host_array_wrap(c, v, 1, &n, i8, NULL, &h));
  assert_refused(dv_copy_to_device(d, h, NULL));
  assert_refused(dv_copy_to_host(d, h, NULL, NULL));
  assert_refused(dv_array_memset(d, 0, NULL));
  dv_ipc_handle ipc;
  assert_refused(dv_ipc_export(d, &ipc));
  /* a view carries the same memory, refused the same way */
  dv_index ix = {.kind = DV_IDX_SLICE, .start = 1, .stop = 3, .step = 1};
  dv_array *v1 = NULL;
  assert_ok(dv_array_slice(d, 1, &ix, &v1));
  assert_refused(dv_array_native(v1, NULL, NULL));
  assert_ok(dv_array_block(v1, NULL, &off, NULL));
  assert_int_equal(off, 8);
  dv_array_release(v1);
  assert_true(v[0] == 1 && v[3] == 4); /* nothing written */
  /* the block goes back to the manager, as it gave it */
  dv_array_release(d);
  assert_ok(dv_context_flush_deallocs(c));
  assert_int_equal(g_fake.frees, 1);
  assert_ptr_equal(g_fake.last_freed.buf, (void *)1);
  assert_ptr_equal(g_fake.last_freed.handle, (void *)1001);
  /* host memory has no manager's block */
  assert_status(dv_array_block(h, &blk, &off, &usable), DV_ERR_MISUSE);
  assert_null(blk.buf);
  dv_array_release(h);
  assert_ok(dv_context_destroy(c));
}

/* A plug-in that delegates to dv_backend_alloc hands out the backend's own
 * buffers: usable as any device memory; a block that reaches past the end of
 * its buffer is not. */
static void test_manager_backend_block(void **state) {
  (void)state;
  if (test_on_cuda_double(g_ctx)) skip();
  dv_context *c = fake_context(true, 0);
  int64_t n = 4;
  const dv_dtype *i8 = dv_dtype_get(DV_INT64);
  int64_t v[4] = {1, 2, 3, 4}, w[4] = {0};
  dv_array *d = NULL, *h = NULL, *g = NULL;
  assert_ok(dv_host_array_wrap(c, v, 1, &n, i8, NULL, &h));
  assert_ok(dv_host_array_wrap(c, w, 1, &n, i8, NULL, &g));
  assert_ok(dv_to_device(c, h, NULL, 1, NULL, &d));
  int usable = 0;
  assert_ok(dv_array_block(d, NULL, NULL, &usable));
  assert_int_equal(usable, 1);
  assert_ok(dv_array_native(d, NULL, NULL));
  assert_ok(dv_copy_to_host(d, g, NULL, NULL));
  assert_true(w[0] == 1 && w[3] == 4);
  dv_array_release(d);
  assert_ok(dv_context_flush_deallocs(c));
  assert_int_equal(g_fake.frees, 1);
  dv_array_release(h);
  dv_array_release(g);
  assert_ok(dv_context_destroy(c));
  c = fake_context(true, 4096); /* offset past the 32-byte buffer */
  assert_ok(dv_host_array_wrap(c, v, 1, &n, i8, NULL, &h));
  assert_ok(dv_device_array(c, 1, &n, i8, NULL, 'C', NULL, &d));
  assert_ok(dv_array_block(d, NULL, NULL, &usable));
  assert_int_equal(usable, 0);
  assert_refused(dv_copy_to_device(d, h, NULL));
  dv_array_release(d);
  dv_array_release(h);
  assert_ok(dv_context_flush_deallocs(c));
  assert_int_equal(g_fake.frees, 1);
  assert_ok(dv_context_destroy(c));
}

/* The planner's packing temporary comes from the manager too: a made-up
 * one is given back (to the manager's free) and the copy goes by rows,
 * correct, instead of the backend's strided copy reading through it. */
static void test_manager_foreign_temporary(void **state) {
  (void)state;
  bool host = !strcmp(dv_context_backend(g_ctx), "host");
  /* OpenCL packs with its strided-copy kernel; the simulator without its worker-side strided
   * copies asks for the temporary too (and its strided copy then refuses it) */
  dv_context *c = fake_context_opt(false, 0, 1, host ? "off" : NULL);
  int64_t shape[4] = {4, 4, 4, 4}, n = 256, sub[4] = {2, 2, 2, 2};
  int32_t src[256], out[16];
  for (int i = 0; i < 256; i++) src[i] = i;
  dv_array *d, *hs, *ho, *v, *flat;
  assert_ok(dv_device_array(c, 4, shape, dv_dtype_get(DV_INT32), NULL, 'C', NULL, &d)); /* real */
  assert_ok(dv_host_array_wrap(c, src, 1, &n, dv_dtype_get(DV_INT32), NULL, &hs));
  assert_ok(dv_array_reshape(d, 1, &n, 'C', DV_VIEW_ONLY, NULL, &flat));
  assert_ok(dv_copy_to_device(flat, hs, NULL));
  dv_index every2[4] = {DV_SLICE(0, 4, 2), DV_SLICE(0, 4, 2), DV_SLICE(0, 4, 2), DV_SLICE(0, 4, 2)};
  assert_ok(dv_array_slice(d, 4, every2, &v));
  assert_ok(dv_host_array_wrap(c, out, 4, sub, dv_dtype_get(DV_INT32), NULL, &ho));
  int allocs = g_fake.allocs;
  assert_ok(dv_copy_to_host(v, ho, NULL, NULL));
  if (host || g_fake.allocs > allocs) { /* (OpenCL may copy it without packing) */
    assert_int_equal(g_fake.allocs, allocs + 1); /* the temporary was asked for, */
    assert_int_equal(g_fake.frees, 1);           /* made up, given back at once */
    assert_ptr_equal(g_fake.last_freed.buf, (void *)(uintptr_t)g_fake.allocs);
  }
  int k = 0;
  for (int a = 0; a < 4; a += 2)
    for (int b = 0; b < 4; b += 2)
      for (int e = 0; e < 4; e += 2)
        for (int f = 0; f < 4; f += 2) assert_int_equal(out[k++], ((a * 4 + b) * 4 + e) * 4 + f);
  dv_array_release(v), dv_array_release(ho), dv_array_release(flat), dv_array_release(hs),
      dv_array_release(d);
  assert_ok(dv_context_flush_deallocs(c));
  assert_int_equal(g_fake.frees, g_fake.allocs); /* everything given back */
  assert_ok(dv_context_destroy(c));
}

/* dv_context_check_native: native memory (what dv_array_native gives) that
 * lies in a live device buffer passes; anything else (a made-up value,
 * host memory, past the end, freed memory) is refused without being read. */
static void test_check_native(void **state) {
  (void)state;
  if (test_on_cuda_double(g_ctx)) skip();
  int64_t n = 8;
  dv_array *d = NULL, *h = NULL;
  static int64_t hv[8];
  assert_ok(dv_device_array(g_ctx, 1, &n, dv_dtype_get(DV_INT64), NULL, 'C', NULL, &d));
  void *nat = NULL;
  size_t off = 0;
  assert_ok(dv_array_native(d, &nat, &off));
  assert_ok(dv_context_check_native(g_ctx, nat, off, 64));
  assert_ok(dv_context_check_native(g_ctx, nat, off + 8, 56));
  assert_status(dv_context_check_native(g_ctx, nat, off + 8, 57), DV_ERR_INVALID_ARGUMENT);
  assert_status(dv_context_check_native(g_ctx, (void *)1, 0, 8), DV_ERR_INVALID_ARGUMENT);
  assert_status(dv_context_check_native(g_ctx, hv, 0, 8), DV_ERR_INVALID_ARGUMENT);
  assert_status(dv_context_check_native(NULL, nat, 0, 8), DV_ERR_NULL_ARGUMENT);
  assert_ok(dv_host_array_wrap(g_ctx, hv, 1, &n, dv_dtype_get(DV_INT64), NULL, &h));
  dv_array_release(h);
  dv_array_release(d);
  assert_ok(dv_context_flush_deallocs(g_ctx));
  assert_ok(dv_memory_trim(g_ctx));
  if (strcmp(dv_context_backend(g_ctx), "host")) return; /* a freed cl_mem may be reused at once */
  assert_status(dv_context_check_native(g_ctx, nat, off, 8), DV_ERR_INVALID_ARGUMENT);
  /* the simulator's device also addresses mapped and wrapped host memory, while it lives
   * (the driver's own mapped allocation: the pinned pool would hand out, and keep, a larger
   * block of its class) */
  dv_array *m = NULL, *w = NULL;
  dv_context *c2 = test_context_or_fail("pinned_pool=off", NULL);
  assert_ok(dv_mapped_array(c2, 1, &n, dv_dtype_get(DV_INT64), NULL, 'C', 0, &m));
  assert_ok(dv_array_native(m, &nat, &off));
  assert_ok(dv_context_check_native(c2, nat, off + 8, 56));
  assert_status(dv_context_check_native(c2, nat, off + 8, 64), DV_ERR_INVALID_ARGUMENT);
  dv_array_release(m);
  assert_ok(dv_context_flush_deallocs(c2));
  assert_status(dv_context_check_native(c2, nat, off, 8), DV_ERR_INVALID_ARGUMENT);
  assert_ok(dv_context_destroy(c2));
  assert_ok(dv_device_array_wrap(g_ctx, hv, 0, sizeof hv, 1, &n, dv_dtype_get(DV_INT64), NULL, NULL,
                                 NULL, &w));
  assert_ok(dv_context_check_native(g_ctx, hv, 16, 48));
  dv_array_release(w);
  assert_ok(dv_context_flush_deallocs(g_ctx));
  assert_status(dv_context_check_native(g_ctx, hv, 0, 8), DV_ERR_INVALID_ARGUMENT);
}

static const struct CMUnitTest tests[] = {T(test_native_of_dead_mapped_view), T(test_wrap_overflow),
                                          T(test_manager_foreign_block), T(test_manager_backend_block),
                                          T(test_manager_foreign_temporary), T(test_check_native)};
TEST_MAIN("foreign", tests)
