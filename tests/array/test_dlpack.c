/* DLPack export and import (issue 14): round trips for every dtype and
 * layout, every malformed field refused, the producer's deleter called
 * exactly once, the export ordered on its stream.  Runs on each backend
 * given; without dlpack.h at build time the suite is skipped, by name. */
#define _DEFAULT_SOURCE /* usleep */
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <unistd.h>

#include "common.h"

#if !DV_HAVE_DLPACK
int main(void) {
  printf("SKIPPED: dlpack/dlpack.h was not found at build time (libdlpack-dev)\n");
  return 77;
}
#else
#include <dlpack/dlpack.h>

/* kDLBool came with DLPack 0.8 (DLPACK_VERSION 80); 1.x headers define
 * DLPACK_MAJOR_VERSION instead of DLPACK_VERSION. */
#if defined(DLPACK_MAJOR_VERSION)
#define HEADER_HAS_BOOL 1
#elif DLPACK_VERSION >= 80
#define HEADER_HAS_BOOL 1
#else
#define HEADER_HAS_BOOL 0
#endif

static bool on_host_backend(void) { return strncmp(g_backend, "host", 4) == 0; }
static bool on_opencl(void) { return strncmp(g_backend, "opencl", 6) == 0; }
static bool on_hip(void) { return strncmp(g_backend, "hip", 3) == 0; }

/* The device type devarray's device arrays get on the backend under test. */
static int device_type(void) {
  if (on_host_backend()) return kDLCPU;
  if (on_opencl()) return kDLOpenCL;
  if (on_hip()) return kDLROCM;
  return kDLCUDA;
}

/* A device array of the given layout filled with a pattern; the host copy
 * of the whole allocation is returned in *ref (dense C order of `shape`). */
static dv_array *dev_filled(int nd, const int64_t *shape, const dv_dtype *dt, unsigned seed,
                            void **ref) {
  dv_array *h = NULL, *d = NULL;
  assert_ok(dv_host_array(g_ctx, nd, shape, dt, NULL, 'C', &h));
  void *p = NULL;
  assert_ok(dv_array_host_data(h, &p));
  fill_pattern(p, (size_t)dv_array_nbytes(h), seed);
  assert_ok(dv_to_device(g_ctx, h, NULL, 1, NULL, &d));
  *ref = malloc((size_t)dv_array_nbytes(h) + 1);
  memcpy(*ref, p, (size_t)dv_array_nbytes(h));
  dv_array_release(h);
  return d;
}

/* The contents of any array, dense in C order (malloc'd). */
static void *contents(const dv_array *a) {
  dv_array *h = NULL;
  if (dv_array_memory(a) == DV_MEM_DEVICE || dv_array_memory(a) == DV_MEM_MANAGED)
    assert_ok(dv_copy_to_host(a, NULL, NULL, &h));
  else
    assert_ok(dv_array_copy_new(a, 'C', NULL, &h));
  dv_array *c = NULL;
  assert_ok(dv_array_copy_new(h, 'C', NULL, &c));
  void *p = NULL;
  assert_ok(dv_array_host_data(c, &p));
  size_t n = (size_t)dv_array_nbytes(c);
  void *out = malloc(n + 1);
  memcpy(out, p, n);
  dv_array_release(c), dv_array_release(h);
  return out;
}

/* Export a, check the tensor against a, import it back and compare. */
static void round_trip(dv_array *a) {
  DLManagedTensor *t = NULL;
  assert_ok(dv_array_to_dlpack(a, NULL, NULL, &t));
  assert_non_null(t);
  const DLTensor *x = &t->dl_tensor;
  int nd = dv_array_ndim(a);
  size_t isz = dv_dtype_itemsize(dv_array_dtype(a));
  assert_int_equal(x->ndim, nd);
  assert_int_equal(x->dtype.lanes, 1);
  assert_int_equal(x->dtype.bits, isz * 8);
  assert_int_equal(x->device.device_type, device_type());
  assert_int_equal(x->device.device_id, 0);
  for (int i = 0; i < nd; i++) {
    assert_int_equal(x->shape[i], dv_array_shape(a)[i]);
    assert_int_equal(x->strides[i] * (int64_t)isz, dv_array_strides(a)[i]);
  }
  if (x->device.device_type == kDLCPU && dv_array_size(a) > 0) {
    /* A CPU consumer reads element 0 in place. */
    void *first = NULL;
    int64_t zero[DV_MAXDIMS] = {0};
    first = malloc(isz);
    assert_ok(dv_array_get_item(a, zero, first, isz, NULL));
    assert_memory_equal((char *)x->data + x->byte_offset, first, isz);
    free(first);
  }
  dv_array *b = NULL;
  assert_ok(dv_array_from_dlpack(g_ctx, t, &b));
  assert_int_equal(dv_array_ndim(b), nd);
  assert_true(dv_dtype_equal(dv_array_dtype(b), dv_array_dtype(a)));
  for (int i = 0; i < nd; i++) {
    assert_int_equal(dv_array_shape(b)[i], dv_array_shape(a)[i]);
    assert_int_equal(dv_array_strides(b)[i], dv_array_strides(a)[i]);
  }
  assert_int_equal(dv_array_memory(b), DV_MEM_DEVICE);
  if (dv_array_size(a) > 0) {
    void *pa = contents(a), *pb = contents(b);
    assert_memory_equal(pa, pb, (size_t)dv_array_nbytes(a));
    free(pa), free(pb);
    /* The same memory, not a copy. */
    void *na = NULL, *nb = NULL;
    size_t oa = 0, ob = 0;
    assert_ok(dv_array_native(a, &na, &oa));
    assert_ok(dv_array_native(b, &nb, &ob));
    if (on_opencl()) assert_ptr_equal(na, nb), assert_int_equal(oa, ob);
    else assert_ptr_equal((char *)na + oa, (char *)nb + ob);
  }
  dv_array_release(b); /* the tensor's deleter runs at the flush, releasing a's reference */
  assert_ok(dv_context_flush_deallocs(g_ctx));
}

static const dv_type_id numeric[] = {DV_INT8,    DV_INT16,   DV_INT32,     DV_INT64,
                                     DV_UINT8,   DV_UINT16,  DV_UINT32,    DV_UINT64,
                                     DV_FLOAT16, DV_FLOAT32, DV_FLOAT64,   DV_COMPLEX64,
                                     DV_COMPLEX128};

static void test_every_dtype(void **state) {
  (void)state;
  static const struct { unsigned code, bits; } want[] = {
      {kDLInt, 8},    {kDLInt, 16},   {kDLInt, 32},   {kDLInt, 64},       {kDLUInt, 8},
      {kDLUInt, 16},  {kDLUInt, 32},  {kDLUInt, 64},  {kDLFloat, 16},     {kDLFloat, 32},
      {kDLFloat, 64}, {kDLComplex, 64}, {kDLComplex, 128}};
  for (size_t i = 0; i < sizeof numeric / sizeof numeric[0]; i++) {
    int64_t shape[2] = {3, 5};
    void *ref = NULL;
    dv_array *a = dev_filled(2, shape, dv_dtype_get(numeric[i]), (unsigned)i + 1, &ref);
    DLManagedTensor *t = NULL;
    assert_ok(dv_array_to_dlpack(a, NULL, NULL, &t));
    assert_int_equal(t->dl_tensor.dtype.code, want[i].code);
    assert_int_equal(t->dl_tensor.dtype.bits, want[i].bits);
    t->deleter(t);
    round_trip(a);
    free(ref);
    dv_array_release(a);
  }
}

static void test_layouts(void **state) {
  (void)state;
  const dv_dtype *f8 = dv_dtype_get(DV_FLOAT64);
  int64_t shape[3] = {4, 6, 5};
  void *ref = NULL;
  dv_array *a = dev_filled(3, shape, f8, 7, &ref);
  round_trip(a); /* C order */
  /* steps, negative steps, an integer index */
  dv_index idx[3] = {DV_SLICE(DV_NONE, DV_NONE, 2), DV_SLICE(DV_NONE, DV_NONE, -1), DV_AT(3)};
  dv_array *v = NULL;
  assert_ok(dv_array_slice(a, 3, idx, &v));
  assert_true(dv_array_strides(v)[1] < 0);
  round_trip(v);
  dv_array_release(v);
  /* 0-d: one element */
  dv_index one[3] = {DV_AT(1), DV_AT(2), DV_AT(3)};
  assert_ok(dv_array_slice(a, 3, one, &v));
  assert_int_equal(dv_array_ndim(v), 0);
  round_trip(v);
  dv_array_release(v);
  /* size 0 (a view and an array of its own) */
  dv_index none[1] = {DV_SLICE(2, 2, 1)};
  assert_ok(dv_array_slice(a, 1, none, &v));
  assert_int_equal(dv_array_size(v), 0);
  round_trip(v);
  dv_array_release(v);
  int64_t empty[2] = {3, 0};
  assert_ok(dv_device_array(g_ctx, 2, empty, f8, NULL, 'C', NULL, &v));
  round_trip(v);
  dv_array_release(v);
  /* Fortran order */
  assert_ok(dv_device_array(g_ctx, 3, shape, f8, NULL, 'F', NULL, &v));
  assert_ok(dv_array_memset(v, 3, NULL));
  round_trip(v);
  dv_array_release(v);
  free(ref);
  dv_array_release(a);
}

/* Layouts DLPack cannot express, and dtypes it has no code for. */
static void test_export_refusals(void **state) {
  (void)state;
  dv_array *a = NULL;
  DLManagedTensor *t = (DLManagedTensor *)1;
  /* complex64: alignment 4, itemsize 8; a 12-byte stride is 1.5 elements */
  int64_t n = 4, st = 12;
  assert_ok(dv_device_array(g_ctx, 1, &n, dv_dtype_get(DV_COMPLEX64), &st, 'C', NULL, &a));
  assert_status(dv_array_to_dlpack(a, NULL, NULL, &t), DV_ERR_BAD_STRIDES);
  assert_null(t);
  dv_array_release(a);
  t = (DLManagedTensor *)1;
  assert_ok(dv_device_array(g_ctx, 1, &n, dv_dtype_get(DV_BOOL), NULL, 'C', NULL, &a));
  assert_status(dv_array_to_dlpack(a, NULL, NULL, &t), HEADER_HAS_BOOL ? DV_OK : DV_ERR_BAD_DTYPE);
  if (t) t->deleter(t);
  dv_array_release(a);
  dv_field_desc f[2] = {{"x", dv_dtype_get(DV_FLOAT32), 0, 0, NULL}, {"y", dv_dtype_get(DV_INT32), 4, 0, NULL}};
  dv_dtype *rec = NULL;
  assert_ok(dv_dtype_record_create(f, 2, 0, &rec));
  assert_ok(dv_device_array(g_ctx, 1, &n, rec, NULL, 'C', NULL, &a));
  t = (DLManagedTensor *)1;
  assert_status(dv_array_to_dlpack(a, NULL, NULL, &t), DV_ERR_BAD_DTYPE);
  assert_null(t);
  /* A field of a record array is expressible (stride 8 = 2 float32). */
  dv_array *fx = NULL;
  assert_ok(dv_array_field(a, "x", &fx));
  assert_ok(dv_array_to_dlpack(fx, NULL, NULL, &t));
  assert_int_equal(t->dl_tensor.strides[0], 2);
  t->deleter(t);
  dv_array_release(fx);
  dv_array_release(a);
  dv_dtype_release(rec);
  assert_status(dv_array_to_dlpack(NULL, NULL, NULL, &t), DV_ERR_NULL_ARGUMENT);
  /* A stream of another context. */
  dv_context *other = NULL;
  assert_ok(test_context(&other, NULL));
  dv_stream *s = NULL;
  assert_ok(dv_stream_create(other, 0, &s));
  assert_ok(dv_device_array(g_ctx, 1, &n, dv_dtype_get(DV_INT32), NULL, 'C', NULL, &a));
  t = (DLManagedTensor *)1;
  assert_status(dv_array_to_dlpack(a, s, NULL, &t), DV_ERR_BACKEND_MISMATCH);
  assert_null(t);
  if (device_type() == kDLCPU) /* a CPU tensor takes no consumer stream */
    assert_status(dv_array_to_dlpack(a, NULL, (void *)0x2, &t), DV_ERR_INVALID_ARGUMENT);
  assert_ok(dv_array_to_dlpack(a, NULL, DV_DLPACK_NO_SYNC, &t)); /* orders nothing */
  t->deleter(t);
  dv_array_release(a);
  dv_stream_release(s);
  assert_ok(dv_context_destroy(other));
}

/* The exported tensor keeps the array's memory: the array may be released
 * first; the deleter frees it (the teardown finds nothing leaked). */
static void test_export_keeps_alive(void **state) {
  (void)state;
  int64_t n = 64;
  void *ref = NULL;
  dv_array *a = dev_filled(1, &n, dv_dtype_get(DV_INT32), 3, &ref);
  DLManagedTensor *t = NULL;
  assert_ok(dv_array_to_dlpack(a, NULL, NULL, &t));
  dv_array_release(a);
  assert_ok(dv_context_flush_deallocs(g_ctx));
  assert_status(dv_context_destroy(g_ctx), DV_ERR_BUSY); /* the tensor holds it */
  if (t->dl_tensor.device.device_type == kDLCPU)
    assert_memory_equal((char *)t->dl_tensor.data + t->dl_tensor.byte_offset, ref, 64 * 4);
  t->deleter(t);
  free(ref);
}

/* Host-side arrays are kDLCPU on the host simulator and OpenCL, read in
 * place; a mapped scope's device view that has ended is refused. */
static void test_export_host_side(void **state) {
  (void)state;
  int64_t n = 32;
  dv_array *h = NULL, *m = NULL;
  assert_ok(dv_host_array(g_ctx, 1, &n, dv_dtype_get(DV_INT16), NULL, 'C', &h));
  int16_t *p = NULL;
  assert_ok(dv_array_host_data(h, (void **)&p));
  for (int i = 0; i < n; i++) p[i] = (int16_t)(7 * i);
  DLManagedTensor *t = NULL;
  assert_ok(dv_array_to_dlpack(h, NULL, NULL, &t));
  assert_int_equal(t->dl_tensor.device.device_type, kDLCPU);
  assert_ptr_equal(t->dl_tensor.data, p);
  t->deleter(t);
  if (dv_mapped_array(g_ctx, 1, &n, dv_dtype_get(DV_INT16), NULL, 'C', 0, &m) == DV_OK) {
    assert_ok(dv_array_to_dlpack(m, NULL, NULL, &t));
    /* Mapped memory is host memory: kDLCPU, except on CUDA and HIP where
     * DLPack has its own type for page-locked host memory the device can reach. */
    const char *be = dv_context_backend(g_ctx);
    int want = strcmp(be, "cuda") == 0 ? kDLCUDAHost : strcmp(be, "hip") == 0 ? kDLROCMHost : kDLCPU;
    assert_int_equal(t->dl_tensor.device.device_type, want);
    void *mp = NULL;
    assert_ok(dv_array_host_data(m, &mp));
    assert_ptr_equal(t->dl_tensor.data, mp);
    t->deleter(t);
    dv_array_release(m);
  }
  dv_array *views[1] = {NULL};
  dv_scope *sc = NULL;
  if (dv_mapped_scope_begin(g_ctx, 1, &h, views, &sc) == DV_OK) {
    assert_ok(dv_array_to_dlpack(views[0], NULL, NULL, &t));
    t->deleter(t);
    assert_ok(dv_scope_end(sc));
    t = (DLManagedTensor *)1;
    assert_status(dv_array_to_dlpack(views[0], NULL, NULL, &t), DV_ERR_INVALID_ARGUMENT);
    assert_null(t);
    dv_array_release(views[0]);
  }
  dv_array_release(h);
}

/* "Ordered": with no consumer stream the export waits for the producer's
 * stream, so the data a slow queued copy writes is there when it returns. */
static void test_export_ordered(void **state) {
  (void)state;
  if (!on_host_backend()) skip(); /* reads the tensor in place */
  dv_context *c = NULL;
  assert_ok(test_context(&c, "host_delay_us=20000", NULL));
  dv_stream *s = NULL;
  assert_ok(dv_stream_create(c, 0, &s));
  int64_t n = 1024;
  dv_array *h = NULL, *d = NULL;
  assert_ok(dv_host_array(c, 1, &n, dv_dtype_get(DV_INT32), NULL, 'C', &h));
  int32_t *p = NULL;
  assert_ok(dv_array_host_data(h, (void **)&p));
  for (int i = 0; i < n; i++) p[i] = 3 * i + 1;
  assert_ok(dv_device_array(c, 1, &n, dv_dtype_get(DV_INT32), NULL, 'C', s, &d));
  assert_ok(dv_array_memset(d, 0, NULL));
  assert_ok(dv_copy_to_device(d, h, s)); /* queued: runs 20 ms later */
  DLManagedTensor *t = NULL;
  assert_ok(dv_array_to_dlpack(d, s, NULL, &t));
  assert_memory_equal(t->dl_tensor.data, p, (size_t)n * 4);
  t->deleter(t);
  dv_array_release(d), dv_array_release(h);
  dv_stream_release(s);
  assert_ok(dv_context_destroy(c));
}

/* Issue 22, item 1: a device consumer's own work on an exported array of
 * pool memory.  The consumer (the CUDA test double's raw cuMemcpyDtoHAsync
 * on its native stream, held back by a callback that lets go after 0.3 s)
 * still reads the tensor when it calls the deleter and the array is
 * released; the pool must not hand the block out again (a new array on the
 * same stream, written at once) before that read is done. */
static _Atomic int g_consumer_gate;
static void consumer_gate(dv_stream *s, dv_status st, void *u) {
  (void)s, (void)st, (void)u;
  for (int i = 0; i < 300 && !atomic_load(&g_consumer_gate); i++) usleep(1000);
}

static void test_export_pool_waits_for_consumer(void **state) {
  (void)state;
  if (strcmp(g_backend, "cuda") != 0) skip(); /* the consumer is raw CUDA */
  void *drv = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  typedef int (*d2h_fn)(void *, uint64_t, size_t, void *);
  d2h_fn d2h = drv && dlsym(drv, "dvdouble_is_double") ? (d2h_fn)dlsym(drv, "cuMemcpyDtoHAsync_v2") : NULL;
  if (!d2h) {
    printf("SKIPPED: test_export_pool_waits_for_consumer: needs the CUDA test double\n");
    skip();
  }
  enum { N = 4096 };
  int64_t n = N;
  dv_context *c = NULL;
  assert_ok(test_context(&c, "memory_manager=pool", NULL));
  dv_stream *a_s, *consumer;
  assert_ok(dv_stream_create(c, 0, &a_s));
  assert_ok(dv_stream_create(c, 0, &consumer));
  dv_array *a, *b, *h;
  assert_ok(dv_device_array(c, 1, &n, dv_dtype_get(DV_INT32), NULL, 'C', a_s, &a));
  assert_ok(dv_pinned_array(c, 1, &n, dv_dtype_get(DV_INT32), NULL, 'C', &h));
  int32_t *hp;
  assert_ok(dv_array_host_data(h, (void **)&hp));
  for (int i = 0; i < N; i++) hp[i] = 1;
  assert_ok(dv_copy_to_device(a, h, NULL));
  memset(hp, 0, N * sizeof *hp);
  void *cs = NULL, *blk_a = NULL, *blk_b = NULL;
  size_t off_a = 0, off_b = 0;
  assert_ok(dv_stream_native(consumer, &cs));
  assert_ok(dv_array_native(a, &blk_a, &off_a));
  atomic_store(&g_consumer_gate, 0);
  assert_ok(dv_stream_add_callback(consumer, consumer_gate, NULL));
  DLManagedTensor *t = NULL;
  assert_ok(dv_array_to_dlpack(a, a_s, cs, &t));
  typedef int (*set_ctx_fn)(void *);
  set_ctx_fn set_ctx = (set_ctx_fn)dlsym(drv, "cuCtxSetCurrent");
  void *cu_ctx = NULL, *cu_dev = NULL;
  assert_ok(dv_context_native(c, &cu_ctx, &cu_dev));
  assert_int_equal(set_ctx(cu_ctx), 0);
  assert_int_equal(d2h(hp, (uint64_t)(uintptr_t)t->dl_tensor.data, N * sizeof *hp, cs), 0);
  t->deleter(t); /* the consumer lets go; its read is still queued */
  dv_array_release(a);
  assert_ok(dv_context_flush_deallocs(c));
  assert_ok(dv_device_array(c, 1, &n, dv_dtype_get(DV_INT32), NULL, 'C', a_s, &b));
  assert_ok(dv_array_native(b, &blk_b, &off_b));
  if (blk_a != blk_b || off_a != off_b) printf("note: the pool did not hand the block out again\n");
  assert_ok(dv_array_memset(b, 0x77, a_s));
  for (int i = 0; i < 200 && dv_stream_query(a_s) == DV_ERR_NOT_READY; i++) usleep(1000);
  atomic_store(&g_consumer_gate, 1);
  assert_ok(dv_context_synchronize(c));
  for (int i = 0; i < N; i++)
    if (hp[i] != 1) fail_msg("the consumer read 0x%08x at %d, not 1: the pool handed the block out while its read was queued", (unsigned)hp[i], i);
  dv_array_release(b), dv_array_release(h);
  dv_stream_release(a_s), dv_stream_release(consumer);
  assert_ok(dv_context_destroy(c));
}

/* ---- import: a hand-made tensor over our own memory ---------------------------- */

static int deleted;
static void count_deleter(DLManagedTensor *self) {
  (void)self;
  deleted++;
}

static _Alignas(64) float mem[64];
static int64_t t_shape[DV_MAXDIMS + 2], t_strides[DV_MAXDIMS + 2];

static DLManagedTensor good_tensor(void) {
  DLManagedTensor t;
  memset(&t, 0, sizeof t);
  t_shape[0] = 4, t_shape[1] = 8;
  t_strides[0] = 8, t_strides[1] = 1;
  t.dl_tensor.data = mem;
  t.dl_tensor.device.device_type = kDLCPU;
  t.dl_tensor.ndim = 2;
  t.dl_tensor.dtype.code = kDLFloat;
  t.dl_tensor.dtype.bits = 32;
  t.dl_tensor.dtype.lanes = 1;
  t.dl_tensor.shape = t_shape;
  t.dl_tensor.strides = t_strides;
  t.deleter = count_deleter;
  return t;
}

/* Host-pointer tensors are importable on every backend (kDLCPU). */
static void test_import_and_deleter_once(void **state) {
  (void)state;
  for (int i = 0; i < 64; i++) mem[i] = (float)i;
  deleted = 0;
  DLManagedTensor t = good_tensor();
  t.dl_tensor.byte_offset = 8 * 4; /* row 1 */
  t_shape[0] = 3;
  dv_array *a = NULL;
  assert_ok(dv_array_from_dlpack(g_ctx, &t, &a));
  assert_int_equal(dv_array_memory(a), on_host_backend() ? DV_MEM_DEVICE : DV_MEM_HOST);
  float got = 0;
  int64_t ix[2] = {2, 7};
  assert_ok(dv_array_get_item(a, ix, &got, sizeof got, NULL));
  assert_true(got == 31.0f);
  /* devarray writes land in the producer's memory (no copy) */
  float v = -1.5f;
  assert_ok(dv_array_set_item(a, ix, &v, sizeof v, NULL));
  assert_true(mem[31] == -1.5f);
  /* a view outlives the import; the deleter waits for the last one */
  dv_index idx[1] = {DV_AT(1)};
  dv_array *row = NULL;
  assert_ok(dv_array_slice(a, 1, idx, &row));
  dv_array_release(a);
  assert_ok(dv_context_flush_deallocs(g_ctx));
  assert_int_equal(deleted, 0);
  dv_array_release(row);
  assert_ok(dv_context_flush_deallocs(g_ctx));
  assert_int_equal(deleted, 1);
  assert_ok(dv_context_flush_deallocs(g_ctx));
  assert_int_equal(deleted, 1);
  /* strides NULL: C order; a NULL deleter is allowed */
  t = good_tensor();
  t.dl_tensor.strides = NULL;
  t.deleter = NULL;
  assert_ok(dv_array_from_dlpack(g_ctx, &t, &a));
  assert_int_equal(dv_array_strides(a)[0], 32);
  assert_int_equal(dv_array_strides(a)[1], 4);
  dv_array_release(a);
  assert_ok(dv_context_flush_deallocs(g_ctx)); /* t is reused: its deleter must have run */
  /* negative strides: the view reaches back from element 0 */
  deleted = 0;
  t = good_tensor();
  t.dl_tensor.data = &mem[63];
  t_strides[0] = -8, t_strides[1] = -1;
  assert_ok(dv_array_from_dlpack(g_ctx, &t, &a));
  int64_t z[2] = {0, 0};
  assert_ok(dv_array_get_item(a, z, &got, sizeof got, NULL));
  assert_true(got == 63.0f);
  int64_t last[2] = {3, 7};
  assert_ok(dv_array_get_item(a, last, &got, sizeof got, NULL));
  assert_true(got == 32.0f);
  dv_array_release(a);
  assert_ok(dv_context_flush_deallocs(g_ctx)); /* t is reused: its deleter must have run */
  /* size 0 with NULL data */
  t = good_tensor();
  t.dl_tensor.data = NULL;
  t_shape[1] = 0;
  assert_ok(dv_array_from_dlpack(g_ctx, &t, &a));
  assert_int_equal(dv_array_size(a), 0);
  dv_array_release(a);
  assert_ok(dv_context_flush_deallocs(g_ctx)); /* t is reused: its deleter must have run */
  /* 0-d */
  t = good_tensor();
  t.dl_tensor.ndim = 0;
  t.dl_tensor.shape = NULL;
  t.dl_tensor.strides = NULL;
  t.dl_tensor.data = &mem[5];
  assert_ok(dv_array_from_dlpack(g_ctx, &t, &a));
  assert_ok(dv_array_get_item(a, NULL, &got, sizeof got, NULL));
  assert_true(got == 5.0f);
  dv_array_release(a);
  assert_ok(dv_context_flush_deallocs(g_ctx)); /* t is reused: its deleter must have run */
  assert_ok(dv_context_flush_deallocs(g_ctx));
  assert_int_equal(deleted, 3);
}

typedef struct refusal {
  const char *what;
  dv_status want;
} refusal;

/* Make the k-th malformed tensor; returns its expected status, or -1 past the last. */
static int malformed(int k, DLManagedTensor *t, const char **what) {
  *t = good_tensor();
  DLTensor *x = &t->dl_tensor;
  switch (k) {
    case 0: *what = "ndim -1"; x->ndim = -1; return DV_ERR_BAD_SHAPE;
    case 1: *what = "ndim 33"; x->ndim = DV_MAXDIMS + 1; return DV_ERR_BAD_SHAPE;
    case 2: *what = "NULL shape"; x->shape = NULL; return DV_ERR_BAD_SHAPE;
    case 3: *what = "negative extent"; t_shape[1] = -1; return DV_ERR_BAD_SHAPE;
    case 4: *what = "lanes 4"; x->dtype.lanes = 4; return DV_ERR_BAD_DTYPE;
    case 5: *what = "lanes 0"; x->dtype.lanes = 0; return DV_ERR_BAD_DTYPE;
    case 6: *what = "float 24 bits"; x->dtype.bits = 24; return DV_ERR_BAD_DTYPE;
    case 7: *what = "opaque handle"; x->dtype.code = kDLOpaqueHandle; x->dtype.bits = 64; return DV_ERR_BAD_DTYPE;
    case 8: *what = "bfloat16"; x->dtype.code = kDLBfloat; x->dtype.bits = 16; return DV_ERR_BAD_DTYPE;
    case 9: *what = "code 99"; x->dtype.code = 99; return DV_ERR_BAD_DTYPE;
    case 10: *what = "Vulkan device"; x->device.device_type = kDLVulkan; return DV_ERR_BACKEND_MISMATCH;
    case 11: *what = "CPU device 1"; x->device.device_id = 1; return DV_ERR_BACKEND_MISMATCH;
    case 12: /* another GPU runtime's device memory */
      *what = on_hip() ? "CUDA device" : "ROCm device";
      x->device.device_type = on_hip() ? kDLCUDA : kDLROCM;
      return DV_ERR_BACKEND_MISMATCH;
    case 13: *what = "NULL data"; x->data = NULL; return DV_ERR_NULL_ARGUMENT;
    case 14: *what = "misaligned byte_offset"; x->byte_offset = 2; return DV_ERR_BAD_STRIDES;
    case 15: *what = "misaligned data"; x->data = (char *)mem + 1; return DV_ERR_BAD_STRIDES;
    case 16: *what = "byte_offset > INT64_MAX"; x->byte_offset = (uint64_t)INT64_MAX + 1; return DV_ERR_OVERFLOW;
    case 17: *what = "stride overflows in bytes"; t_strides[0] = INT64_MAX / 2; return DV_ERR_OVERFLOW;
    case 18: *what = "extent overflows"; t_strides[0] = INT64_MAX / 8; t_shape[0] = 16; return DV_ERR_OVERFLOW;
    case 19: *what = "element count overflows"; t_shape[0] = INT64_MAX / 2; t_shape[1] = 4; return DV_ERR_OVERFLOW;
    case 20: *what = "bytes overflow (stride 0)"; t_shape[0] = INT64_MAX / 2; t_shape[1] = 1; t_strides[0] = 0; return DV_ERR_OVERFLOW;
    case 21: *what = "reaches below address 0"; x->data = (void *)(uintptr_t)64; t_strides[0] = -1000; return DV_ERR_OVERFLOW;
    case 22: *what = "reaches past the address space"; x->data = (void *)(UINTPTR_MAX - 63); t_strides[0] = 1000; return DV_ERR_OVERFLOW;
    case 23: *what = "data + byte_offset wraps"; x->data = (void *)(UINTPTR_MAX - 63); x->byte_offset = 128; return DV_ERR_OVERFLOW;
    /* a zero extent beside extents whose product (elements, then bytes) overflows */
    case 24: *what = "non-zero extents overflow beside a 0"; x->ndim = 3; t_shape[0] = INT64_MAX - 53; t_shape[1] = 7; t_shape[2] = 0; t_strides[2] = 1; return DV_ERR_OVERFLOW;
    case 25: *what = "non-zero bytes overflow beside a 0"; x->ndim = 3; t_shape[0] = (int64_t)1 << 61; t_shape[1] = 2; t_shape[2] = 0; t_strides[2] = 1; return DV_ERR_OVERFLOW;
    default: return -1;
  }
}

static void test_import_refusals(void **state) {
  (void)state;
  deleted = 0;
  int k = 0;
  for (;; k++) {
    DLManagedTensor t;
    const char *what = "";
    int want = malformed(k, &t, &what);
    if (want < 0) break;
    dv_array *a = (dv_array *)1;
    dv_status rc = dv_array_from_dlpack(g_ctx, &t, &a);
    if (rc != (dv_status)want)
      fail_msg("%s: %s (%s), expected %s", what, dv_status_name(rc), dv_last_error(),
               dv_status_name((dv_status)want));
    assert_true(dv_last_error()[0] != 0);
    assert_null(a);
  }
  assert_true(k >= 26);
  DLManagedTensor t = good_tensor();
  dv_array *a = (dv_array *)1;
  assert_status(dv_array_from_dlpack(NULL, &t, &a), DV_ERR_NULL_ARGUMENT);
  assert_null(a);
  assert_status(dv_array_from_dlpack(g_ctx, NULL, &a), DV_ERR_NULL_ARGUMENT);
  assert_ok(dv_context_flush_deallocs(g_ctx));
  assert_int_equal(deleted, 0); /* a refused tensor stays the caller's */
}

static const struct CMUnitTest tests[] = {
    T(test_every_dtype),         T(test_layouts),        T(test_export_refusals),
    T(test_export_keeps_alive),  T(test_export_ordered), T(test_export_host_side),
    cmocka_unit_test(test_export_pool_waits_for_consumer), T(test_import_and_deleter_once),
    T(test_import_refusals),
};
TEST_MAIN("dlpack", tests)
#endif
