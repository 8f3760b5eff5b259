#define _DEFAULT_SOURCE
/*
 * The kernel contract (issue 21): the same argument mistake gets the same
 * status and message on every backend, because the kernel layer checks each
 * launch against the kernel's DV_KERNEL declaration before the backend (or
 * the driver) sees it.  Every row of the table is here: a 4-byte
 * scalar for an 8-byte parameter, a float for an int, too few arguments, an
 * array of the wrong dtype, a strided device view for DV_ARRAY, a launch
 * after the module's release; and the rule for integers of the other
 * signedness, the scalar constructors (values checked where kernels run),
 * the kernel's parameter list as read, declarations the reader cannot read.
 * On the CUDA driver test double the checks run as everywhere (they come
 * before the driver); the values a kernel computed are checked where
 * kernels run, and skipped by name on the double.
 */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "common.h"

static char g_cache_dir[256];

#define BUILD(name, src, ...) test_build(g_ctx, name, src, NULL, ##__VA_ARGS__, NULL)

static dv_array *dev_i32(int64_t n) {
  dv_array *d = NULL;
  assert_ok(dv_device_array(g_ctx, 1, &n, dv_dtype_get(DV_INT32), NULL, 'C', NULL, &d));
  assert_ok(dv_array_memset(d, 0, NULL));
  return d;
}

static void contains(const char *needle) {
  if (!strstr(dv_last_error(), needle)) fail_msg("expected \"%s\" in: %s", needle, dv_last_error());
}

static const dv_launch_config one = {{1, 1, 1}, {1, 1, 1}, 0, NULL};

static const char *src_rows =
    "/* the issue's rows */\n"
    "DV_KERNEL(wide, DV_ARRAY(dv_i64, out), dv_i64 n) { DV_BIND(dv_i64, out); out[0] = n; }\n"
    "DV_KERNEL(intp, DV_ARRAY(int, out), int n) { DV_BIND(int, out); out[0] = n; }\n"
    "DV_KERNEL(five, DV_ARRAY(int, out), int a, int b, int c, int d) {\n"
    "  DV_BIND(int, out); out[0] = a + b + c + d;\n"
    "}\n"
    "DV_KERNEL(ints, DV_ARRAY(dv_i32, x)) { DV_BIND(dv_i32, x); x[dv_thread_idx(0)] = 7; }\n"
    "DV_KERNEL(fill, DV_ARRAY(int, x), int n) {\n"
    "  DV_BIND(int, x);\n"
    "  for (int i = 0; i < n; i++) x[i] = 100 + i;\n"
    "}\n"
    "DV_KERNEL(vfill, DV_VIEW(int, x)) {\n"
    "  DV_BIND(int, x);\n"
    "  for (int i = 0; i < DV_SHAPE(x, 0); i++) DV_ITEM1(x, i) = 100 + i;\n"
    "}\n"
    "DV_KERNEL(uns, DV_ARRAY(dv_i64, out), unsigned u, int s, dv_u8 b8) {\n"
    "  DV_BIND(dv_i64, out); out[0] = u; out[1] = s; out[2] = b8;\n"
    "}\n";

/* Row 1: DV_ARG_I32 for a dv_i64 parameter (OpenCL read stray memory for
 * the upper half; CUDA 8 bytes from a 4-byte argument). */
static void test_narrow_scalar_for_wide_parameter(void **state) {
  (void)state;
  dv_module *m = BUILD("rows.dvk", src_rows);
  dv_array *out = NULL;
  int64_t n = 1;
  assert_ok(dv_device_array(g_ctx, 1, &n, dv_dtype_get(DV_INT64), NULL, 'C', NULL, &out));
  dv_arg bad[] = {DV_ARG_ARRAY(out), DV_ARG_I32(5)};
  assert_status(dv_kernel_launch(test_kernel(m, "wide"), &one, 2, bad), DV_ERR_KERNEL_ARGUMENT);
  contains("kernel wide, parameter 2 of 2 (`dv_i64 n`): takes an int64 scalar (DV_ARG_I64); "
           "given an int32 scalar (DV_ARG_I32), and no conversion is made on any backend");
  dv_arg good[] = {DV_ARG_ARRAY(out), DV_ARG_I64(INT64_C(0x7f4f00000005))};
  assert_ok(dv_kernel_launch(test_kernel(m, "wide"), &one, 2, good));
  if (!test_on_cuda_double(g_ctx)) {
    int64_t v = 0;
    dv_array *h = NULL;
    assert_ok(dv_host_array_wrap(g_ctx, &v, 1, &n, dv_dtype_get(DV_INT64), NULL, &h));
    assert_ok(dv_copy_to_host(out, h, NULL, NULL));
    assert_true(v == INT64_C(0x7f4f00000005));
    dv_array_release(h);
  }
  dv_array_release(out);
  dv_module_release(m);
}

/* Row 2: DV_ARG_F32(2.0f) for an int parameter (OpenCL saw 1073741824). */
static void test_float_for_int(void **state) {
  (void)state;
  dv_module *m = BUILD("rows.dvk", src_rows);
  dv_array *out = dev_i32(1);
  dv_arg bad[] = {DV_ARG_ARRAY(out), DV_ARG_F32(2.0f)};
  assert_status(dv_kernel_launch(test_kernel(m, "intp"), &one, 2, bad), DV_ERR_KERNEL_ARGUMENT);
  contains("parameter 2 of 2 (`int n`): takes an int32 scalar (DV_ARG_I32); given a float32 scalar "
           "(DV_ARG_F32)");
  dv_arg bad2[] = {DV_ARG_ARRAY(out), DV_ARG_F64(2.0)};
  assert_status(dv_kernel_launch(test_kernel(m, "intp"), &one, 2, bad2), DV_ERR_KERNEL_ARGUMENT);
  dv_array_release(out);
  dv_module_release(m);
}

/* Row 3: 4 arguments for 5 parameters (CUDA read zeros); one too many. */
static void test_argument_count(void **state) {
  (void)state;
  dv_module *m = BUILD("rows.dvk", src_rows);
  dv_array *out = dev_i32(1);
  dv_kernel *k = test_kernel(m, "five");
  dv_arg args[] = {DV_ARG_ARRAY(out), DV_ARG_I32(1), DV_ARG_I32(2), DV_ARG_I32(3), DV_ARG_I32(4),
                   DV_ARG_I32(5)};
  assert_status(dv_kernel_launch(k, &one, 4, args), DV_ERR_KERNEL_ARGUMENT);
  contains("kernel five takes 5 arguments; the launch passes 4 (the first missing is parameter 5, "
           "`int d`)");
  assert_status(dv_kernel_launch(k, &one, 6, args), DV_ERR_KERNEL_ARGUMENT);
  contains("kernel five takes 5 arguments; the launch passes 6");
  assert_status(dv_kernel_launch(k, &one, 0, NULL), DV_ERR_KERNEL_ARGUMENT);
  assert_ok(dv_kernel_launch(k, &one, 5, args));
  dv_array_release(out);
  dv_module_release(m);
}

/* Row 4: a float64 device array for DV_ARRAY(dv_i32, x); the kinds crossed. */
static void test_array_dtype_and_kind(void **state) {
  (void)state;
  dv_module *m = BUILD("rows.dvk", src_rows);
  dv_kernel *k = test_kernel(m, "ints");
  int64_t n = 4;
  dv_array *f8 = NULL, *u4 = NULL;
  assert_ok(dv_device_array(g_ctx, 1, &n, dv_dtype_get(DV_FLOAT64), NULL, 'C', NULL, &f8));
  assert_ok(dv_device_array(g_ctx, 1, &n, dv_dtype_get(DV_UINT32), NULL, 'C', NULL, &u4));
  dv_arg a[] = {DV_ARG_ARRAY(f8)};
  assert_status(dv_kernel_launch(k, &one, 1, a), DV_ERR_KERNEL_ARGUMENT);
  contains("kernel ints, parameter 1 of 1 (`DV_ARRAY(dv_i32, x)`): takes a C-contiguous int32 array "
           "(DV_ARG_ARRAY or DV_ARG_SMART); given a float64 device array (DV_ARG_ARRAY)");
  a[0] = DV_ARG_ARRAY(u4); /* the other signedness is another dtype for arrays */
  assert_status(dv_kernel_launch(k, &one, 1, a), DV_ERR_KERNEL_ARGUMENT);
  a[0] = DV_ARG_VIEW(f8);
  assert_status(dv_kernel_launch(k, &one, 1, a), DV_ERR_KERNEL_ARGUMENT);
  contains("given a float64 device array (DV_ARG_VIEW), which only a DV_VIEW(T, name) parameter takes");
  a[0] = DV_ARG_I32(1);
  assert_status(dv_kernel_launch(k, &one, 1, a), DV_ERR_KERNEL_ARGUMENT);
  contains("given an int32 scalar (DV_ARG_I32)");
  dv_array *d = dev_i32(4);
  dv_arg s[] = {DV_ARG_ARRAY(d), DV_ARG_I32(1)};
  assert_status(dv_kernel_launch(test_kernel(m, "intp"), &one, 2, (dv_arg[]){s[1], s[0]}),
                DV_ERR_KERNEL_ARGUMENT);
  contains("parameter 1 of 2 (`DV_ARRAY(int, out)`): takes a C-contiguous int32 array");
  dv_arg v[] = {DV_ARG_ARRAY(d)};
  assert_status(dv_kernel_launch(test_kernel(m, "vfill"), &one, 1, v), DV_ERR_KERNEL_ARGUMENT);
  contains("takes an int32 array with shape and strides (DV_ARG_VIEW or DV_ARG_SMART_VIEW)");
  dv_array_release(d);
  dv_array_release(f8);
  dv_array_release(u4);
  dv_module_release(m);
}

/* Row 5: a strided device view (x[::2]) as DV_ARG_ARRAY wrote outside the
 * view; refused, pointing to DV_ARG_VIEW.  The same view works as
 * DV_ARG_VIEW; a strided host view works through its dense temporary. */
static void test_strided_view(void **state) {
  (void)state;
  dv_module *m = BUILD("rows.dvk", src_rows);
  dv_array *d = dev_i32(8), *v = NULL;
  assert_ok(dv_array_slice(d, 1, &DV_SLICE(0, 8, 2), &v));
  dv_arg a[] = {DV_ARG_ARRAY(v), DV_ARG_I32(4)};
  assert_status(dv_kernel_launch(test_kernel(m, "fill"), &one, 2, a), DV_ERR_KERNEL_ARGUMENT);
  contains("given an int32 device array (DV_ARG_ARRAY), with shape (4) and byte strides (8), not "
           "C-contiguous: pass it with DV_ARG_VIEW to a DV_VIEW(T, name) parameter");
  dv_arg b[] = {DV_ARG_VIEW(v)};
  assert_ok(dv_kernel_launch(test_kernel(m, "vfill"), &one, 1, b));
  /* A host view of every other element: a dense temporary, written back. */
  int host[8] = {0};
  int64_t n8 = 8;
  dv_array *h = NULL, *hv = NULL;
  assert_ok(dv_host_array_wrap(g_ctx, host, 1, &n8, dv_dtype_get(DV_INT32), NULL, &h));
  assert_ok(dv_array_slice(h, 1, &DV_SLICE(1, 8, 2), &hv));
  dv_arg c[] = {DV_ARG_ARRAY(hv), DV_ARG_I32(4)};
  assert_ok(dv_kernel_launch(test_kernel(m, "fill"), &one, 2, c));
  if (!test_on_cuda_double(g_ctx)) {
    int got[8];
    dv_array *hg = NULL;
    assert_ok(dv_host_array_wrap(g_ctx, got, 1, &n8, dv_dtype_get(DV_INT32), NULL, &hg));
    assert_ok(dv_copy_to_host(d, hg, NULL, NULL));
    for (int i = 0; i < 8; i++) assert_int_equal(got[i], i % 2 ? 0 : 100 + i / 2);
    for (int i = 0; i < 8; i++) assert_int_equal(host[i], i % 2 ? 100 + i / 2 : 0);
    dv_array_release(hg);
  }
  dv_array_release(hv), dv_array_release(h);
  dv_array_release(v), dv_array_release(d);
  dv_module_release(m);
}

/* A DV_ARRAY parameter reads element i at base + i: an F-ordered host array
 * reaches it in C order (its temporary is C-ordered), a smart array whose
 * device copy is a strided view is refused. */
static const char *src_order =
    "DV_KERNEL(index, DV_ARRAY(int, y), int n) {\n"
    "  DV_BIND(int, y);\n"
    "  for (int i = 0; i < n; i++) y[i] = i;\n"
    "}\n";

static void test_layouts_for_dv_array(void **state) {
  (void)state;
  dv_module *m = BUILD("order.dvk", src_order);
  dv_kernel *k = test_kernel(m, "index");
  int host[6] = {0};
  int64_t shape[2] = {2, 3}, fstr[2] = {4, 8}; /* F order */
  dv_array *h = NULL;
  assert_ok(dv_host_array_wrap(g_ctx, host, 2, shape, dv_dtype_get(DV_INT32), fstr, &h));
  dv_arg a[] = {DV_ARG_ARRAY_OUT(h), DV_ARG_I32(6)};
  assert_ok(dv_kernel_launch(k, &one, 2, a));
  if (!test_on_cuda_double(g_ctx)) /* element (i, j) got C index 3 i + j; it lives at host[i + 2 j] */
    for (int i = 0; i < 2; i++)
      for (int j = 0; j < 3; j++) assert_int_equal(host[i + 2 * j], 3 * i + j);
  /* A smart array adopting a strided device view. */
  dv_array *d = dev_i32(8), *v = NULL;
  assert_ok(dv_array_slice(d, 1, &DV_SLICE(0, 8, 2), &v));
  dv_smart *sm = NULL;
  assert_ok(dv_smart_from_array(v, 0, NULL, &sm));
  dv_arg b[] = {DV_ARG_SMART(sm), DV_ARG_I32(4)};
  assert_status(dv_kernel_launch(k, &one, 2, b), DV_ERR_KERNEL_ARGUMENT);
  contains("whose device copy is not C-contiguous");
  dv_smart_release(sm);
  /* A hand-made bool argument holding 2. */
  dv_arg c[] = {DV_ARG_ARRAY(d), {.kind = DV_ARG_SCALAR, .type = DV_BOOL, .scalar = {.u8 = 2}}};
  assert_status(dv_kernel_launch(k, &one, 2, c), DV_ERR_KERNEL_ARGUMENT);
  contains("whose byte is neither 0 nor 1");
  dv_array_release(v), dv_array_release(d), dv_array_release(h);
  dv_module_release(m);
}

/* Row 6: a launch after dv_module_release crashed.  A held kernel keeps its
 * module loaded; a borrowed one is caught as misuse, before and after the
 * flush that unloads the module. */
static void test_kernel_outlives_module(void **state) {
  (void)state;
  dv_module *m = BUILD("rows.dvk", src_rows), *m2 = BUILD("rows.dvk", src_rows);
  dv_kernel *held = dv_kernel_retain(test_kernel(m, "intp"));
  /* A borrowed kernel of a module a hold keeps loaded stays valid ... */
  dv_kernel *sibling = test_kernel(m, "five");
  /* ... one of a module with no reference left does not. */
  dv_kernel *borrowed = test_kernel(m2, "five");
  dv_module_release(m);
  dv_module_release(m2);
  assert_ok(dv_context_flush_deallocs(g_ctx));
  dv_array *out = dev_i32(1);
  dv_arg a[] = {DV_ARG_ARRAY(out), DV_ARG_I32(42)};
  assert_ok(dv_kernel_launch(held, &one, 2, a));
  dv_kernel_attrs at;
  assert_ok(dv_kernel_attributes(held, &at));
  assert_int_equal(dv_kernel_num_params(held), 2);
  dv_arg b[] = {DV_ARG_ARRAY(out), DV_ARG_I32(1), DV_ARG_I32(2), DV_ARG_I32(3), DV_ARG_I32(4)};
  dv_array *out2 = dev_i32(1);
  b[0] = DV_ARG_ARRAY(out2);
  assert_ok(dv_kernel_launch(sibling, &one, 5, b));
  dv_array_release(out2);
  assert_status(dv_kernel_launch(borrowed, &one, 5, b), DV_ERR_MISUSE);
  contains("kernel five is used after the last reference to its module was released");
  if (!test_on_cuda_double(g_ctx)) {
    int v = 0;
    int64_t n = 1;
    dv_array *h = NULL;
    assert_ok(dv_host_array_wrap(g_ctx, &v, 1, &n, dv_dtype_get(DV_INT32), NULL, &h));
    assert_ok(dv_copy_to_host(out, h, NULL, NULL));
    assert_int_equal(v, 42);
    dv_array_release(h);
  }
  /* The last hold goes: now the held kernel is caught too, after the unload ran. */
  dv_kernel_release(held);
  assert_ok(dv_context_flush_deallocs(g_ctx));
  assert_status(dv_kernel_launch(held, &one, 2, a), DV_ERR_MISUSE);
  assert_status(dv_kernel_attributes(held, &at), DV_ERR_MISUSE);
  dv_kernel_param kp;
  assert_status(dv_kernel_param_info(held, 0, &kp), DV_ERR_MISUSE);
  assert_int_equal(dv_kernel_num_params(held), -1);
  dv_kernel_release(held); /* no hold left: logged, nothing changes */
  assert_null(dv_kernel_retain(NULL));
  dv_kernel_release(NULL);
  dv_array_release(out);
}

/* The rule for same-size integers of the other signedness: accepted when
 * the value fits the parameter's type, refused (with the value) otherwise;
 * a bool is a one-byte unsigned integer. */
static void test_signedness_rule(void **state) {
  (void)state;
  dv_module *m = BUILD("rows.dvk", src_rows);
  dv_kernel *k = test_kernel(m, "uns");
  int64_t n = 3;
  dv_array *out = NULL;
  assert_ok(dv_device_array(g_ctx, 1, &n, dv_dtype_get(DV_INT64), NULL, 'C', NULL, &out));
  dv_arg ok[] = {DV_ARG_ARRAY(out), DV_ARG_I32(2147483647), DV_ARG_U32(2147483647u), DV_ARG_BOOL(7)};
  assert_ok(dv_kernel_launch(k, &one, 4, ok));
  if (!test_on_cuda_double(g_ctx)) {
    int64_t v[3];
    dv_array *h = NULL;
    assert_ok(dv_host_array_wrap(g_ctx, v, 1, &n, dv_dtype_get(DV_INT64), NULL, &h));
    assert_ok(dv_copy_to_host(out, h, NULL, NULL));
    assert_true(v[0] == 2147483647 && v[1] == 2147483647 && v[2] == 1);
    dv_array_release(h);
  }
  dv_arg neg[] = {DV_ARG_ARRAY(out), DV_ARG_I32(-1), DV_ARG_I32(0), DV_ARG_U8(0)};
  assert_status(dv_kernel_launch(k, &one, 4, neg), DV_ERR_KERNEL_ARGUMENT);
  contains("parameter 2 of 4 (`unsigned u`): takes a uint32 scalar (DV_ARG_U32); given an int32 "
           "scalar (DV_ARG_I32), of value -1, which a uint32 parameter cannot hold");
  dv_arg big[] = {DV_ARG_ARRAY(out), DV_ARG_U32(0), DV_ARG_U32(2147483648u), DV_ARG_U8(0)};
  assert_status(dv_kernel_launch(k, &one, 4, big), DV_ERR_KERNEL_ARGUMENT);
  contains("of value 2147483648, which an int32 parameter cannot hold");
  dv_arg i8[] = {DV_ARG_ARRAY(out), DV_ARG_U32(0), DV_ARG_I32(0), DV_ARG_I8(-3)};
  assert_status(dv_kernel_launch(k, &one, 4, i8), DV_ERR_KERNEL_ARGUMENT);
  contains("of value -3, which a uint8 parameter cannot hold");
  dv_arg i8ok[] = {DV_ARG_ARRAY(out), DV_ARG_U32(0), DV_ARG_I32(0), DV_ARG_I8(3)};
  assert_ok(dv_kernel_launch(k, &one, 4, i8ok));
  dv_arg wide[] = {DV_ARG_ARRAY(out), DV_ARG_U64(1), DV_ARG_I32(0), DV_ARG_U8(0)};
  assert_status(dv_kernel_launch(k, &one, 4, wide), DV_ERR_KERNEL_ARGUMENT);
  dv_array_release(out);
  dv_module_release(m);
}

/* Every scalar constructor reaches its parameter with its exact value. */
static const char *src_scalars =
    "DV_KERNEL(every, DV_ARRAY(double, out), dv_i8 a, dv_u8 b, dv_i16 c, dv_u16 d, int e,\n"
    "          unsigned f, dv_i64 g, dv_u64 h, float i, double j, unsigned char k) {\n"
    "  DV_BIND(double, out);\n"
    "  out[0] = a; out[1] = b; out[2] = c; out[3] = d; out[4] = e; out[5] = f;\n"
    "  out[6] = (double)g; out[7] = (double)h; out[8] = i; out[9] = j; out[10] = k;\n"
    "}\n";

static void test_scalar_constructors(void **state) {
  (void)state;
  dv_module *m = BUILD("scalars.dvk", src_scalars);
  int64_t n = 11;
  dv_array *out = NULL;
  assert_ok(dv_device_array(g_ctx, 1, &n, dv_dtype_get(DV_FLOAT64), NULL, 'C', NULL, &out));
  dv_arg args[] = {DV_ARG_ARRAY(out), DV_ARG_I8(-100), DV_ARG_U8(200), DV_ARG_I16(-30000),
                   DV_ARG_U16(60000), DV_ARG_I32(-2000000000), DV_ARG_U32(4000000000u),
                   DV_ARG_I64(-(INT64_C(1) << 40)), DV_ARG_U64(UINT64_C(1) << 50),
                   DV_ARG_F32(0.25f), DV_ARG_F64(-1.5), DV_ARG_BOOL(1)};
  dv_kernel *k = test_kernel(m, "every");
  assert_ok(dv_kernel_launch(k, &one, 12, args));
  /* The pointer form (dv_arg.value) still works, and wins over .scalar. */
  int8_t v8 = -7;
  args[1] = (dv_arg){.kind = DV_ARG_SCALAR, .type = DV_INT8, .value = &v8, .scalar = {.i8 = 1}};
  assert_ok(dv_kernel_launch(k, &one, 12, args));
  if (!test_on_cuda_double(g_ctx)) {
    double r[11];
    dv_array *h = NULL;
    assert_ok(dv_host_array_wrap(g_ctx, r, 1, &n, dv_dtype_get(DV_FLOAT64), NULL, &h));
    assert_ok(dv_copy_to_host(out, h, NULL, NULL));
    const double want[11] = {-7, 200, -30000, 60000, -2000000000.0, 4000000000.0,
                             -1099511627776.0, 1125899906842624.0, 0.25, -1.5, 1};
    for (int i = 0; i < 11; i++)
      if (r[i] != want[i]) fail_msg("parameter %d: %g, expected %g", i + 1, r[i], want[i]);
    dv_array_release(h);
  } else {
    printf("SKIPPED: %s: values (the CUDA test double does not execute kernels)\n", __func__);
  }
  dv_array_release(out);
  dv_module_release(m);
}

/* Half precision: DV_ARG_F16 for a dv_f16 parameter, DV_FLOAT16 arrays for
 * DV_ARRAY(dv_f16, x); float32 for either is refused. */
static const char *src_half =
    "DV_KERNEL(half_arg, DV_ARRAY(float, out), DV_ARRAY(const dv_f16, x), dv_f16 h) {\n"
    "  DV_BIND(float, out); DV_BIND(const dv_f16, x);\n"
    "  out[0] = dv_f16_to_f32(h); out[1] = dv_f16_to_f32(x[1]);\n"
    "}\n";

static void test_half_arguments(void **state) {
  (void)state;
  dv_module *m = BUILD("half.dvk", src_half);
  dv_kernel *k = test_kernel(m, "half_arg");
  int64_t n = 2;
  uint16_t xh[2] = {dv_half_from_float(0.5f), dv_half_from_float(-2.25f)};
  dv_array *out = NULL, *hx = NULL, *x = NULL, *f4 = NULL;
  assert_ok(dv_device_array(g_ctx, 1, &n, dv_dtype_get(DV_FLOAT32), NULL, 'C', NULL, &out));
  assert_ok(dv_device_array(g_ctx, 1, &n, dv_dtype_get(DV_FLOAT32), NULL, 'C', NULL, &f4));
  assert_ok(dv_host_array_wrap(g_ctx, xh, 1, &n, dv_dtype_get(DV_FLOAT16), NULL, &hx));
  assert_ok(dv_to_device(g_ctx, hx, NULL, 1, NULL, &x));
  dv_arg a[] = {DV_ARG_ARRAY(out), DV_ARG_ARRAY(x), DV_ARG_F16(1.5f)};
  assert_ok(dv_kernel_launch(k, &one, 3, a));
  a[2] = DV_ARG_F32(1.5f);
  assert_status(dv_kernel_launch(k, &one, 3, a), DV_ERR_KERNEL_ARGUMENT);
  contains("takes a float16 scalar (DV_ARG_F16); given a float32 scalar (DV_ARG_F32)");
  a[2] = DV_ARG_F16(1.5f);
  a[1] = DV_ARG_ARRAY(f4);
  assert_status(dv_kernel_launch(k, &one, 3, a), DV_ERR_KERNEL_ARGUMENT);
  contains("takes a C-contiguous float16 array");
  if (!test_on_cuda_double(g_ctx)) {
    float r[2];
    dv_array *h = NULL;
    assert_ok(dv_host_array_wrap(g_ctx, r, 1, &n, dv_dtype_get(DV_FLOAT32), NULL, &h));
    assert_ok(dv_copy_to_host(out, h, NULL, NULL));
    assert_true(r[0] == 1.5f && r[1] == -2.25f);
    dv_array_release(h);
  }
  dv_array_release(x), dv_array_release(hx), dv_array_release(f4), dv_array_release(out);
  dv_module_release(m);
}

/* The parameter list as read: kinds, types through #define and typedef,
 * const, names; a program define chooses a branch. */
static const char *src_reflect =
    "typedef float real;\n"
    "#define INDEX int\n"
    "#ifdef USE_DOUBLE\n"
    "#define ELEM double\n"
    "#else\n"
    "#define ELEM float\n"
    "#endif\n"
    "// DV_KERNEL(commented, int x) is not a kernel\n"
    "DV_KERNEL(refl, DV_ARRAY(const real, x), /* a comment, with a comma */ DV_VIEW(ELEM, y),\n"
    "          INDEX n, const dv_u16 w) {\n"
    "  DV_BIND(const real, x); DV_BIND(ELEM, y);\n"
    "  if (n > 0) y[0] = (ELEM)(x[0] + w);\n"
    "}\n";

static void test_parameters_as_read(void **state) {
  (void)state;
  for (int dbl = 0; dbl < 2; dbl++) {
    dv_module *m = dbl ? BUILD("refl.dvk", src_reflect, "USE_DOUBLE") : BUILD("refl.dvk", src_reflect);
    dv_kernel *k = test_kernel(m, "refl");
    assert_int_equal(dv_kernel_num_params(k), 4);
    dv_kernel_param p;
    assert_ok(dv_kernel_param_info(k, 0, &p));
    assert_int_equal(p.kind, DV_PARAM_ARRAY);
    assert_int_equal(p.type, DV_FLOAT32);
    assert_int_equal(p.is_const, 1);
    assert_string_equal(p.name, "x");
    assert_string_equal(p.decl, "DV_ARRAY(const real, x)");
    assert_ok(dv_kernel_param_info(k, 1, &p));
    assert_int_equal(p.kind, DV_PARAM_VIEW);
    assert_int_equal(p.type, dbl ? DV_FLOAT64 : DV_FLOAT32);
    assert_int_equal(p.is_const, 0);
    assert_ok(dv_kernel_param_info(k, 2, &p));
    assert_int_equal(p.kind, DV_PARAM_SCALAR);
    assert_int_equal(p.type, DV_INT32);
    assert_string_equal(p.name, "n");
    assert_ok(dv_kernel_param_info(k, 3, &p));
    assert_int_equal(p.type, DV_UINT16);
    assert_status(dv_kernel_param_info(k, 4, &p), DV_ERR_INVALID_ARGUMENT);
    assert_int_equal(p.kind, 0);
    assert_status(dv_kernel_param_info(k, -1, &p), DV_ERR_INVALID_ARGUMENT);
    assert_status(dv_kernel_param_info(NULL, 0, &p), DV_ERR_NULL_ARGUMENT);
    assert_int_equal(dv_kernel_num_params(NULL), -1);
    dv_kernel *none = (dv_kernel *)&p;
    assert_status(dv_module_kernel(m, "commented", &none), DV_ERR_INVALID_ARGUMENT);
    assert_null(none);
    dv_module_release(m);
  }
}

/* What the reader cannot read is refused at lookup, on every backend. */
static const char *src_unreadable =
    "#define MAKE(name, T) DV_KERNEL(name##_k, DV_ARRAY(T, x)) { DV_BIND(T, x); x[0] = 1; }\n"
    "MAKE(made, float)\n"
    "#define MAKEV(name, ...) DV_KERNEL(name, __VA_ARGS__) { }\n"
    "MAKEV(variadic, DV_ARRAY(int, x))\n"
    "#ifdef cl_khr_fp64\n"
    "DV_KERNEL(either, DV_ARRAY(double, x)) { DV_BIND(double, x); x[0] = 1; }\n"
    "#else\n"
    "DV_KERNEL(either, DV_ARRAY(float, x)) { DV_BIND(float, x); x[0] = 1; }\n"
    "#endif\n"
    "#ifdef __GNUC__\n"
    "DV_KERNEL(unsure, DV_ARRAY(double, x)) { DV_BIND(double, x); x[0] = 1; }\n"
    "#else\n"
    "DV_KERNEL(unsure, DV_ARRAY(float, x)) { DV_BIND(float, x); x[0] = 1; }\n"
    "#endif\n"
    "#if 0\n"
    "DV_KERNEL(fine, DV_ARRAY(double, x)) { DV_BIND(double, x); x[0] = 1; }\n"
    "#else\n"
    "DV_KERNEL(fine, DV_ARRAY(float, x)) { DV_BIND(float, x); x[0] = 1; }\n"
    "#endif\n";

static void test_unreadable_declarations(void **state) {
  (void)state;
  dv_module *m = BUILD("unreadable.dvk", src_unreadable);
  /* A function-like macro that declares a kernel is read through its expansion. */
  dv_kernel *k = test_kernel(m, "made_k");
  dv_kernel_param p;
  assert_ok(dv_kernel_param_info(k, 0, &p));
  assert_int_equal(p.type, DV_FLOAT32);
  assert_string_equal(p.decl, "DV_ARRAY(float, x)");
  /* A variadic one is not: refused at lookup, the same way twice (the
   * backend's kernel is kept, not remade). */
  k = (dv_kernel *)&k;
  assert_status(dv_module_kernel(m, "variadic", &k), DV_ERR_KERNEL_ARGUMENT);
  assert_null(k);
  contains("program unreadable.dvk, kernel variadic: its DV_KERNEL declaration is not in the "
           "program's source as written (declared through a macro?)");
  assert_status(dv_module_kernel(m, "variadic", &k), DV_ERR_KERNEL_ARGUMENT);
  /* cl_khr_fp64 is known exactly: OpenCL's device says (PoCL has it), the
   * other backends have no cl_ macros. */
  k = test_kernel(m, "either");
  assert_ok(dv_kernel_param_info(k, 0, &p));
  assert_int_equal(p.type, strncmp(g_backend, "opencl", 6) == 0 ? DV_FLOAT64 : DV_FLOAT32);
  /* A name only the compiler knows: both readings possible, refused. */
  assert_status(dv_module_kernel(m, "unsure", &k), DV_ERR_KERNEL_ARGUMENT);
  contains("declared more than once with different parameter lists");
  k = test_kernel(m, "fine");
  assert_ok(dv_kernel_param_info(k, 0, &p));
  assert_int_equal(p.type, DV_FLOAT32);
  dv_module_release(m);
}

/* The parameter space: PoCL allows 1024 bytes of kernel arguments (1008 for
 * the launch's own, after devarray's two hidden ones); seven views take
 * 1064.  (CUDA's 4 KiB before driver 12.1: cuda.backend's
 * test_param_limit_by_driver has the limits, this check is the same code.) */
static const char *src_views =
    "DV_KERNEL(seven, DV_VIEW(int, a), DV_VIEW(int, b), DV_VIEW(int, c), DV_VIEW(int, d),\n"
    "          DV_VIEW(int, e), DV_VIEW(int, f), DV_VIEW(int, g)) {\n"
    "  DV_BIND(int, a); DV_BIND(int, b); DV_BIND(int, c); DV_BIND(int, d);\n"
    "  DV_BIND(int, e); DV_BIND(int, f); DV_BIND(int, g);\n"
    "  a[0] = b[0] + c[0] + d[0] + e[0] + f[0] + g[0];\n"
    "}\n";

static void test_parameter_space(void **state) {
  (void)state;
  dv_module *m = BUILD("views.dvk", src_views);
  dv_array *d = dev_i32(1);
  dv_arg a[7];
  for (int i = 0; i < 7; i++) a[i] = DV_ARG_VIEW(d);
  dv_status rc = dv_kernel_launch(test_kernel(m, "seven"), &one, 7, a);
  if (strncmp(g_backend, "opencl", 6) == 0) {
    assert_int_equal(rc, DV_ERR_KERNEL_ARGUMENT);
    contains("kernel seven: its 7 parameters take 1064 bytes; the device allows");
  } else {
    assert_ok(rc);
  }
  dv_array_release(d);
  dv_module_release(m);
}

/* Declarations no launch could satisfy, or some backend cannot compile, are
 * refused at build on every backend with the same words (issue 37: the host
 * built them, OpenCL refused them with its compiler's words): no parameter,
 * a pointer parameter.  The program's log says the same; nothing is loaded. */
static void build_refused(const char *name, const char *src, const char *words) {
  dv_program *p = NULL;
  dv_module *m = (dv_module *)&p;
  assert_ok(dv_program_create(g_ctx, name, src, &p));
  assert_status(dv_program_build(p, 0, &m), DV_ERR_COMPILE);
  assert_null(m);
  contains(words);
  if (!strstr(dv_program_log(p), words)) fail_msg("expected \"%s\" in the log: %s", words, dv_program_log(p));
  dv_program_destroy(p);
}

static void test_declarations_refused_everywhere(void **state) {
  (void)state;
  build_refused("none.dvk", "/* none */\nDV_KERNEL(k) { }\n",
                "none.dvk:2: kernel k declares no parameter: a kernel takes at least one on every "
                "backend");
  build_refused("ptr.dvk", "DV_KERNEL(k, float *x, int n) { if (n) x[0] = 1; }\n",
                "ptr.dvk:1: kernel k, parameter 1 of 2 (`float *x`): a pointer, which no argument "
                "can be (and OpenCL C refuses): declare arrays as DV_ARRAY(T, x) or DV_VIEW(T, x)");
  /* The first refused kernel is named, where others are fine. */
  build_refused("mixed.dvk",
                "DV_KERNEL(fine, DV_ARRAY(int, a)) { DV_BIND(int, a); a[0] = 1; }\n"
                "DV_KERNEL(bad, DV_ARRAY(int, a), int *p) { DV_BIND(int, a); a[0] = *p; }\n",
                "mixed.dvk:2: kernel bad, parameter 2 of 2 (`int *p`)");
}

/* A call to a function defined nowhere is a compile error on every backend
 * (the host built it and failed to load it, DV_ERR_LIBRARY_LOAD), naming the
 * function; the compiler's words come first, once, in the program's names
 * (no dv__kb_ wrapper, no region-fission note on a program that does not
 * compile).  Where kernels compile here: host and OpenCL. */
static void test_compile_errors_in_users_words(void **state) {
  (void)state;
  if (strcmp(g_backend, "host") != 0 && strncmp(g_backend, "opencl", 6) != 0) skip();
  build_refused("undef.dvk", "DV_KERNEL(k, int n) { (void)n; undefined_fn(n); }\n", "undefined_fn");
  /* With a loop region fission takes (fast mode): the error comes first, at
   * the call's line, with no note of the pass (it came after the compiler's
   * warning and the pass's note, without a line). */
  {
    dv_program *u = NULL;
    dv_module *um = NULL;
    assert_ok(dv_program_create(g_ctx, "undef2.dvk",
                                "DV_KERNEL(k, DV_ARRAY(float, a), int n) {\n  DV_BIND(float, a);\n"
                                "  for (int i = 0; i < n; i++) a[i] = undefined_fn(i);\n}\n", &u));
    assert_status(dv_program_build(u, 0, &um), DV_ERR_COMPILE);
    const char *msg = dv_last_error(), *log = dv_program_log(u);
    const char *err = strstr(log, "undefined_fn"), *warn = strstr(log, "warning");
    if (!strstr(msg, "undef2.dvk:3:") || !strstr(msg, "undefined_fn"))
      fail_msg("the call's line and name are not in: %s", msg);
    if (strstr(msg, "region fission") || strstr(log, "region fission") || strstr(log, "dv__kb_"))
      fail_msg("internal words in: %s", log);
    if (!err || (warn && warn < err)) fail_msg("the error does not come first: %s", log);
    dv_program_destroy(u);
  }
  dv_program *p = NULL;
  dv_module *m = NULL;
  assert_ok(dv_program_create(g_ctx, "typo.dvk",
                              "DV_KERNEL(k, DV_ARRAY(float, a), int n) {\n  DV_BIND(float, a);\n"
                              "  for (int i = 0; i < n; i++) a[i] = b;\n}\n", &p));
  assert_status(dv_program_build(p, 0, &m), DV_ERR_COMPILE);
  const char *msg = dv_last_error();
  if (strstr(msg, "dv__kb_") || strstr(msg, "region fission")) fail_msg("internal words in: %s", msg);
  if (!strstr(msg, "typo.dvk:3:")) fail_msg("the error's line is not the program's: %s", msg);
  if (strcmp(g_backend, "host") == 0 && !strstr(msg, "kernel \xe2\x80\x98k\xe2\x80\x99") &&
      !strstr(msg, "kernel 'k'"))
    fail_msg("the kernel is not named as the program names it: %s", msg);
  const char *first = strstr(msg, "typo.dvk:3:");
  if (strstr(first + 1, "typo.dvk:3:") && strstr(strstr(first + 1, "typo.dvk:3:") + 1, "typo.dvk:3:"))
    fail_msg("the error is said more than once: %s", msg);
  dv_program_destroy(p);
  /* A diagnostic inside a dialect macro names it as the program calls it
   * (dv_printf, not the runtime table's dv__rt->print) and the dialect's
   * lines as "<devarray dialect>", not the unit's deleted temporary file.
   * (The host's C compiler only warns here; OpenCL C refuses it.) */
  assert_ok(dv_program_create(g_ctx, "print.dvk",
                              "DV_KERNEL(k, DV_ARRAY(float, a), int n) {\n  DV_BIND(float, a);\n"
                              "  a[0] = n;\n  dv_printf(n);\n}\n", &p));
  dv_status st = dv_program_build(p, DV_BUILD_NO_CACHE, &m);
  const char *log = dv_program_log(p);
  if (strcmp(g_backend, "host") == 0) {
    assert_ok(st);
    if (!strstr(log, "dv_printf")) fail_msg("dv_printf is not named: %s", log);
  } else {
    assert_status(st, DV_ERR_COMPILE);
    m = NULL;
  }
  /* The compiler's own lines, not its excerpts of the dialect's text (" 12 | ..."). */
  for (const char *line = log; *line; line += strcspn(line, "\n") + (line[strcspn(line, "\n")] != 0)) {
    const char *c = line + strspn(line, " 0123456789");
    size_t n = strcspn(line, "\n");
    char one[512];
    snprintf(one, sizeof one, "%.*s", (int)n, line);
    if (*c != '|' && (strstr(one, "dv__rt") || strstr(one, "/devarray-kernel-") || strstr(one, "dv__kb_")))
      fail_msg("internal words in: %s", one);
  }
  dv_module_release(m);
  dv_program_destroy(p);
}

int main(int argc, char **argv) {
  int begin = kernel_suite_begin(argc, argv, "contract", NULL, g_cache_dir, sizeof g_cache_dir);
  if (begin) return begin;
  const struct CMUnitTest tests[] = {
      T(test_narrow_scalar_for_wide_parameter), T(test_float_for_int), T(test_argument_count),
      T(test_array_dtype_and_kind), T(test_strided_view), T(test_kernel_outlives_module),
      T(test_signedness_rule), T(test_scalar_constructors), T(test_parameters_as_read),
      T(test_unreadable_declarations), T(test_parameter_space), T(test_half_arguments), T(test_layouts_for_dv_array),
      T(test_declarations_refused_everywhere), T(test_compile_errors_in_users_words),
  };
  return kernel_suite_end(g_cache_dir, test_main(argc, argv, "contract", tests, sizeof tests / sizeof tests[0]));
}
