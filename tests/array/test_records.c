/* Record dtypes and device records: creation errors, field views (scalar,
 * nested record, sub-array), get/set, unknown fields. */
#include "common.h"

#pragma pack(push, 1)
typedef struct inner { int16_t a; float b; } inner;
typedef struct rec { double x; int32_t v[2][3]; inner in; uint8_t flag; } rec;
#pragma pack(pop)

static dv_dtype *make_inner(void) {
  dv_field_desc f[2] = {{"a", dv_dtype_get(DV_INT16), offsetof(inner, a), 0, NULL},
                        {"b", dv_dtype_get(DV_FLOAT32), offsetof(inner, b), 0, NULL}};
  dv_dtype *dt = NULL;
  assert_ok(dv_dtype_record_create(f, 2, sizeof(inner), &dt));
  return dt;
}

static dv_dtype *make_rec(dv_dtype *in) {
  int64_t sub[2] = {2, 3};
  dv_field_desc f[4] = {{"x", dv_dtype_get(DV_FLOAT64), offsetof(rec, x), 0, NULL},
                        {"v", dv_dtype_get(DV_INT32), offsetof(rec, v), 2, sub},
                        {"in", in, offsetof(rec, in), 0, NULL},
                        {"flag", dv_dtype_get(DV_UINT8), offsetof(rec, flag), 0, NULL}};
  dv_dtype *dt = NULL;
  assert_ok(dv_dtype_record_create(f, 4, 0, &dt));
  assert_int_equal(dv_dtype_itemsize(dt), sizeof(rec));
  return dt;
}

static void test_dtype_errors(void **state) {
  (void)state;
  dv_dtype *dt = (dv_dtype *)1;
  dv_field_desc dup[2] = {{"a", dv_dtype_get(DV_INT8), 0, 0, NULL}, {"a", dv_dtype_get(DV_INT8), 1, 0, NULL}};
  assert_status(dv_dtype_record_create(dup, 2, 0, &dt), DV_ERR_BAD_DTYPE);
  assert_null(dt);
  dv_field_desc over[2] = {{"a", dv_dtype_get(DV_INT32), 0, 0, NULL}, {"b", dv_dtype_get(DV_INT8), 2, 0, NULL}};
  assert_status(dv_dtype_record_create(over, 2, 0, &dt), DV_ERR_BAD_DTYPE);
  dv_field_desc one[1] = {{"a", dv_dtype_get(DV_INT32), 0, 0, NULL}};
  assert_status(dv_dtype_record_create(one, 1, 2, &dt), DV_ERR_BAD_DTYPE);
  assert_status(dv_dtype_record_create(one, 0, 0, &dt), DV_ERR_BAD_DTYPE);
  dv_field_desc noname[1] = {{"", dv_dtype_get(DV_INT32), 0, 0, NULL}};
  assert_status(dv_dtype_record_create(noname, 1, 0, &dt), DV_ERR_BAD_DTYPE);
  int64_t badsub[1] = {0};
  dv_field_desc sub[1] = {{"s", dv_dtype_get(DV_INT32), 0, 1, badsub}};
  assert_status(dv_dtype_record_create(sub, 1, 0, &dt), DV_ERR_BAD_DTYPE);
  assert_status(dv_dtype_record_create(NULL, 1, 0, &dt), DV_ERR_NULL_ARGUMENT);
  /* names and codes */
  assert_ptr_equal(dv_dtype_from_name("<f8"), dv_dtype_get(DV_FLOAT64));
  assert_ptr_equal(dv_dtype_from_name("complex64"), dv_dtype_get(DV_COMPLEX64));
  assert_ptr_equal(dv_dtype_from_name("u2"), dv_dtype_get(DV_UINT16));
  assert_null(dv_dtype_from_name("float128"));
  assert_int_equal(dv_dtype_itemsize(dv_dtype_get(DV_COMPLEX128)), 16);
  assert_int_equal(dv_dtype_itemsize(dv_dtype_get(DV_FLOAT16)), 2);
  assert_null(dv_dtype_get(DV_RECORD));
}

static void test_device_record(void **state) {
  (void)state;
  dv_dtype *in = make_inner(), *rt = make_rec(in);
  assert_int_equal(dv_dtype_field_count(rt), 4);
  dv_field_desc fd;
  assert_ok(dv_dtype_field(rt, 1, &fd));
  assert_string_equal(fd.name, "v");
  assert_int_equal(fd.ndim, 2);
  dv_array *r;
  assert_status(dv_device_record(g_ctx, dv_dtype_get(DV_INT32), NULL, &r), DV_ERR_BAD_DTYPE);
  assert_ok(dv_device_record(g_ctx, rt, NULL, &r));
  assert_int_equal(dv_array_ndim(r), 0);
  assert_true(dv_array_is_c_contiguous(r) && dv_array_is_f_contiguous(r));
  assert_int_equal(dv_array_nbytes(r), sizeof(rec));
  /* a whole host record to the device */
  rec h = {.x = 2.5, .in = {7, 1.5f}, .flag = 9};
  for (int i = 0; i < 6; i++) h.v[i / 3][i % 3] = i * 11;
  dv_array *hr;
  assert_ok(dv_host_array_wrap(g_ctx, &h, 0, NULL, rt, NULL, &hr));
  assert_ok(dv_copy_to_device(r, hr, NULL));
  double x = 0;
  assert_ok(dv_record_get(r, "x", &x, sizeof x, NULL));
  assert_true(x == 2.5);
  int32_t v[2][3];
  assert_ok(dv_record_get(r, "v", v, sizeof v, NULL));
  assert_int_equal(v[1][2], 55);
  assert_status(dv_record_get(r, "v", v, 4, NULL), DV_ERR_INVALID_ARGUMENT);
  /* nested record: a record view */
  dv_array *inv, *bv;
  assert_ok(dv_array_field(r, "in", &inv));
  assert_int_equal(dv_dtype_id(dv_array_dtype(inv)), DV_RECORD);
  float b = 0;
  assert_ok(dv_record_get(inv, "b", &b, sizeof b, NULL));
  assert_true(b == 1.5f);
  /* sub-array field view is C-ordered with the field's shape */
  assert_ok(dv_array_field(r, "v", &bv));
  assert_int_equal(dv_array_ndim(bv), 2);
  assert_int_equal(dv_array_strides(bv)[0], 12);
  /* set */
  float nb = -4.25f;
  assert_ok(dv_record_set(inv, "b", &nb, sizeof nb, NULL));
  uint8_t fl = 200;
  assert_ok(dv_record_set(r, "flag", &fl, 1, NULL));
  rec back;
  memset(&back, 0, sizeof back);
  dv_array *hb;
  assert_ok(dv_host_array_wrap(g_ctx, &back, 0, NULL, rt, NULL, &hb));
  assert_ok(dv_copy_to_host(r, hb, NULL, NULL));
  assert_true(back.in.b == -4.25f && back.flag == 200 && back.x == 2.5 && back.in.a == 7);
  /* unknown field; field of a non-record */
  dv_array *u = (dv_array *)1;
  assert_status(dv_array_field(r, "nope", &u), DV_ERR_UNKNOWN_FIELD);
  assert_null(u);
  assert_non_null(strstr(dv_last_error(), "nope"));
  assert_status(dv_record_get(r, "nope", &x, sizeof x, NULL), DV_ERR_UNKNOWN_FIELD);
  assert_status(dv_array_field(bv, "x", &u), DV_ERR_BAD_DTYPE);
  dv_array_release(r), dv_array_release(hr), dv_array_release(inv), dv_array_release(bv), dv_array_release(hb);
  dv_dtype_release(rt);
  dv_dtype_release(in);
}

static void test_record_arrays(void **state) {
  (void)state;
  dv_dtype *in = make_inner(), *rt = make_rec(in);
  rec hs[5];
  memset(hs, 0, sizeof hs);
  for (int i = 0; i < 5; i++) hs[i].x = i, hs[i].in.a = (int16_t)(100 + i);
  int64_t n = 5;
  dv_array *h, *d, *fx, *fa, *inv;
  assert_ok(dv_host_array_wrap(g_ctx, hs, 1, &n, rt, NULL, &h));
  assert_ok(dv_to_device(g_ctx, h, NULL, 1, NULL, &d));
  /* the field of a record array is a strided view */
  assert_ok(dv_array_field(d, "x", &fx));
  assert_int_equal(dv_array_strides(fx)[0], sizeof(rec));
  double xs[5];
  dv_array *hx;
  assert_ok(dv_host_array_wrap(g_ctx, xs, 1, &n, dv_dtype_get(DV_FLOAT64), NULL, &hx));
  assert_ok(dv_copy_to_host(fx, hx, NULL, NULL));
  for (int i = 0; i < 5; i++) assert_true(xs[i] == i);
  assert_ok(dv_array_field(d, "in", &inv));
  assert_ok(dv_array_field(inv, "a", &fa));
  int16_t as[5];
  dv_array *ha;
  assert_ok(dv_host_array_wrap(g_ctx, as, 1, &n, dv_dtype_get(DV_INT16), NULL, &ha));
  assert_ok(dv_copy_to_host(fa, ha, NULL, NULL));
  for (int i = 0; i < 5; i++) assert_int_equal(as[i], 100 + i);
  /* record_get wants a 0-d record */
  double x;
  assert_status(dv_record_get(d, "x", &x, sizeof x, NULL), DV_ERR_INVALID_ARGUMENT);
  dv_array_release(h), dv_array_release(d), dv_array_release(fx), dv_array_release(fa);
  dv_array_release(inv), dv_array_release(hx), dv_array_release(ha);
  dv_dtype_release(rt);
  dv_dtype_release(in);
}

/* Every size in a record dtype fits int64_t (byte counts and offsets are
 * int64_t everywhere else): the itemsize, each field's offset and end
 * (offset + itemsize x sub-array count), nested records included.  Before
 * this was checked, a field at offset 2^63 made a dtype whose byte counts
 * went negative, and dv_record_set on a wrapped 1-byte buffer wrote 2^63
 * bytes away from it. */
static void test_dtype_size_overflow(void **state) {
  (void)state;
  const dv_dtype *i1 = dv_dtype_get(DV_INT8), *i4 = dv_dtype_get(DV_INT32);
  const size_t big = (size_t)INT64_MAX;
  dv_dtype *dt = (dv_dtype *)1;
  dv_field_desc far[1] = {{"f", i1, (size_t)1 << 63, 0, NULL}};
  assert_status(dv_dtype_record_create(far, 1, 0, &dt), DV_ERR_OVERFLOW);
  assert_null(dt);
  dv_field_desc end[1] = {{"f", i1, big, 0, NULL}}; /* ends at 2^63 */
  assert_status(dv_dtype_record_create(end, 1, 0, &dt), DV_ERR_OVERFLOW);
  dv_field_desc end4[1] = {{"f", i4, big - 3, 0, NULL}};
  assert_status(dv_dtype_record_create(end4, 1, 0, &dt), DV_ERR_OVERFLOW);
  dv_field_desc wrap[1] = {{"f", i4, SIZE_MAX - 1, 0, NULL}};
  assert_status(dv_dtype_record_create(wrap, 1, 0, &dt), DV_ERR_OVERFLOW);
  dv_field_desc small[1] = {{"f", i1, 0, 0, NULL}};
  assert_status(dv_dtype_record_create(small, 1, big + 1, &dt), DV_ERR_OVERFLOW);
  assert_status(dv_dtype_record_create(small, 1, SIZE_MAX, &dt), DV_ERR_OVERFLOW);
  int64_t sub[2] = {(int64_t)1 << 40, (int64_t)1 << 21};
  dv_field_desc subs[1] = {{"s", i4, 0, 2, sub}}; /* 2^61 elements of 4 bytes */
  assert_status(dv_dtype_record_create(subs, 1, 0, &dt), DV_ERR_OVERFLOW);
  assert_null(dt);
  /* the largest legal record ends exactly at INT64_MAX... */
  dv_dtype *huge = NULL;
  dv_field_desc last[1] = {{"f", i1, big - 1, 0, NULL}};
  assert_ok(dv_dtype_record_create(last, 1, 0, &huge));
  assert_int_equal(dv_dtype_itemsize(huge), big);
  /* ...and nothing can be placed after it, nor two of it side by side */
  dv_field_desc nest[2] = {{"a", i1, 0, 0, NULL}, {"h", huge, 1, 0, NULL}};
  assert_status(dv_dtype_record_create(nest, 2, 0, &dt), DV_ERR_OVERFLOW);
  int64_t two = 2;
  dv_field_desc pair[1] = {{"h", huge, 0, 1, &two}};
  assert_status(dv_dtype_record_create(pair, 1, 0, &dt), DV_ERR_OVERFLOW);
  assert_null(dt);
  /* a device record of it is simply too large for the device */
  dv_array *r = (dv_array *)1;
  assert_status(dv_device_record(g_ctx, huge, NULL, &r), DV_ERR_OUT_OF_MEMORY);
  assert_null(r);
  dv_dtype_release(huge);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {T(test_dtype_errors), T(test_device_record), T(test_record_arrays),
                                     T(test_dtype_size_overflow)};
  return test_main(argc, argv, "records", tests, sizeof tests / sizeof tests[0]);
}
