/*
 * The kernel-signature reader (src/kernel/signature.c), white-box, with no
 * device: what it finds in sources written every way the dialect allows,
 * what it refuses to guess, and the debug builds' cross-check against what
 * a driver reports (a reader mistake must show up there, not as a silent
 * launch).  Also the host's float16 conversions behind DV_ARG_F16.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <string.h>
#include <time.h>

#include "common.h"
#include "kernel/signature.h"

static dv_ksigs scan(const char *src, char *const *defines, size_t nd, const char *options,
                     const char *backend) {
  dv_ksigs s;
  assert_ok(dv__ksig_scan(src, defines, nd, options, backend, NULL, &s));
  return s;
}

static const dv_ksig *find(const dv_ksigs *s, const char *name) {
  const dv_ksig *k = dv__ksig_find(s, name);
  if (!k) fail_msg("kernel %s not found", name);
  return k;
}

static void test_what_is_read(void **state) {
  (void)state;
  const char *src =
      "/* DV_KERNEL(in_comment, int x) */\n"
      "const char *s = \"DV_KERNEL(in_string, int x)\";\n"
      "#define GEN(n) DV_KERNEL(n, int x) { }\n"
      "#define LONGER DV_KERNEL(in_define, \\\n"
      "   int x)\n"
      "#if 0\n"
      "DV_KERNEL(dead, int x) { }\n"
      "#elif 1\n"
      "DV_KERNEL(alive, int x) { }\n"
      "#else\n"
      "DV_KERNEL(dead2, int x) { }\n"
      "#endif\n"
      "typedef unsigned long long u64_t;\n"
      "typedef struct { int a; } rec_t;\n"
      "#define T double\n"
      "#undef T\n"
      "#define T float\n"
      "DV_KERNEL(k1,\n"
      "          DV_ARRAY( const T , a ),   // trailing comment, (with parens\n"
      "          DV_VIEW(rec_t, r), u64_t big, DV_RESTRICT const int * p,\n"
      "          dv_f16 h, unsigned short us, char c) {\n"
      "}\n";
  dv_ksigs s = scan(src, NULL, 0, NULL, "host");
  assert_null(dv__ksig_find(&s, "in_comment"));
  assert_null(dv__ksig_find(&s, "in_string"));
  assert_null(dv__ksig_find(&s, "n"));
  assert_null(dv__ksig_find(&s, "in_define"));
  assert_null(dv__ksig_find(&s, "dead"));
  assert_null(dv__ksig_find(&s, "dead2"));
  assert_non_null(dv__ksig_find(&s, "alive"));
  const dv_ksig *k = find(&s, "k1");
  assert_int_equal(k->nparams, 7);
  assert_int_equal(k->line, 18);
  assert_int_equal(k->params[0].kind, DV_PARAM_ARRAY);
  assert_int_equal(k->params[0].type.id, DV_FLOAT32);
  assert_true(k->params[0].is_const);
  assert_string_equal(k->params[0].name, "a");
  assert_string_equal(k->params[0].decl, "DV_ARRAY( const T , a )");
  assert_int_equal(k->params[1].kind, DV_PARAM_VIEW);
  assert_int_equal(k->params[1].type.id, DV_TYPE_COUNT); /* a struct: unknown */
  assert_int_equal(k->params[2].type.id, DV_UINT64);
  assert_string_equal(k->params[2].name, "big");
  assert_true(k->params[3].type.pointer);
  assert_string_equal(k->params[3].name, "p");
  assert_int_equal(k->params[4].type.id, DV_FLOAT16);
  assert_int_equal(k->params[5].type.id, DV_UINT16);
  assert_int_equal(k->params[6].type.id, DV_INT8);
  assert_true(k->params[6].type.plain_char);
  dv__ksigs_free(&s);
}

static void test_conditions(void **state) {
  (void)state;
  const char *src =
      "#if defined(DV_BACKEND_OPENCL)\n"
      "DV_KERNEL(k, DV_ARRAY(float, x)) {}\n"
      "#elif defined DV_BACKEND_CUDA\n"
      "DV_KERNEL(k, DV_ARRAY(double, x)) {}\n"
      "#else\n"
      "DV_KERNEL(k, DV_ARRAY(int, x)) {}\n"
      "#endif\n"
      "#ifndef WIDE\n"
      "DV_KERNEL(w, int n) {}\n"
      "#else\n"
      "DV_KERNEL(w, long n) {}\n"
      "#endif\n"
      "#ifdef __SOMETHING_THE_COMPILER_DEFINES\n"
      "DV_KERNEL(amb, int n) {}\n"
      "#else\n"
      "DV_KERNEL(amb, float n) {}\n"
      "#endif\n"
      "#ifdef __SOMETHING_ELSE\n"
      "DV_KERNEL(same, int n) {}\n"
      "#else\n"
      "DV_KERNEL(same, int n) {}\n"
      "#endif\n";
  const char *bes[] = {"opencl", "cuda", "host"};
  const dv_type_id want[] = {DV_FLOAT32, DV_FLOAT64, DV_INT32};
  for (int b = 0; b < 3; b++) {
    dv_ksigs s = scan(src, NULL, 0, NULL, bes[b]);
    const dv_ksig *k = find(&s, "k");
    assert_false(k->ambiguous);
    assert_int_equal(k->params[0].type.id, want[b]);
    assert_int_equal(find(&s, "w")->params[0].type.id, DV_INT32);
    assert_true(find(&s, "amb")->ambiguous);
    assert_false(find(&s, "same")->ambiguous);
    dv__ksigs_free(&s);
  }
  /* WIDE from the program's defines, or from -D in the options. */
  char *defs[] = {"WIDE", "1"};
  dv_ksigs s = scan(src, defs, 1, NULL, "host");
  assert_int_equal(find(&s, "w")->params[0].type.id, DV_INT64);
  dv__ksigs_free(&s);
  s = scan(src, NULL, 0, "-O2 -DWIDE -DOTHER=3", "host");
  assert_int_equal(find(&s, "w")->params[0].type.id, DV_INT64);
  dv__ksigs_free(&s);
  /* A program define names a type. */
  char *tdef[] = {"REAL", "double"};
  s = scan("DV_KERNEL(r, DV_ARRAY(REAL, x), REAL a) {}", tdef, 1, NULL, "host");
  assert_int_equal(find(&s, "r")->params[0].type.id, DV_FLOAT64);
  assert_int_equal(find(&s, "r")->params[1].type.id, DV_FLOAT64);
  dv__ksigs_free(&s);
}

/* What a review found the first reader got wrong, each now read as the
 * compiler reads it, or marked instead of guessed. */
static void test_review_cases(void **state) {
  (void)state;
  char why[200];
  (void)why;
  /* A type defined under a condition the reader cannot evaluate is unknown
   * (and says why), not the last definition seen. */
  dv_ksigs s = scan("#ifdef __GNUC__\ntypedef double real;\n#else\ntypedef float real;\n#endif\n"
                    "DV_KERNEL(k, DV_ARRAY(real, x), real a) {}\n", NULL, 0, NULL, "host");
  const dv_ksig *k = find(&s, "k");
  assert_int_equal(k->params[0].type.id, DV_TYPE_COUNT);
  assert_true(k->params[1].type.uncertain);
  dv__ksigs_free(&s);
  /* OpenCL's extension macros come from the device's list; other backends have none. */
  const char *fp = "#ifdef cl_khr_fp64\ntypedef double real;\n#else\ntypedef float real;\n#endif\n"
                   "DV_KERNEL(k, DV_ARRAY(real, x)) {}\n";
  s = scan(fp, NULL, 0, NULL, "host");
  assert_int_equal(find(&s, "k")->params[0].type.id, DV_FLOAT32);
  dv__ksigs_free(&s);
  assert_ok(dv__ksig_scan(fp, NULL, 0, NULL, "opencl", "cl_khr_int64_base_atomics cl_khr_fp64", &s));
  assert_int_equal(find(&s, "k")->params[0].type.id, DV_FLOAT64);
  dv__ksigs_free(&s);
  assert_ok(dv__ksig_scan(fp, NULL, 0, NULL, "opencl", "cl_khr_fp16", &s));
  assert_int_equal(find(&s, "k")->params[0].type.id, DV_FLOAT32);
  dv__ksigs_free(&s);
  /* #if with || and &&, and a define's value. */
  s = scan("#define F64 1\n#if !defined(DV_BACKEND_OPENCL) || defined(cl_khr_fp64)\n#define X 1\n"
           "#else\n#define X 0\n#endif\n#if X && F64\nDV_KERNEL(yes, int n) {}\n#endif\n"
           "#if X && NOT_DEFINED\nDV_KERNEL(no, int n) {}\n#endif\n", NULL, 0, NULL, "host");
  assert_non_null(dv__ksig_find(&s, "yes"));
  assert_null(dv__ksig_find(&s, "no"));
  dv__ksigs_free(&s);
  /* -D NAME (a separate word), --define-macro, -U. */
  const char *wd = "#ifdef WIDE\nDV_KERNEL(w, long n) {}\n#else\nDV_KERNEL(w, int n) {}\n#endif\n";
  const char *opts[] = {"-D WIDE", "--define-macro=WIDE", "--define-macro WIDE=2", "-DWIDE -UWIDE -DWIDE"};
  for (int i = 0; i < 4; i++) {
    s = scan(wd, NULL, 0, opts[i], "host");
    assert_int_equal(find(&s, "w")->params[0].type.id, DV_INT64);
    dv__ksigs_free(&s);
  }
  s = scan(wd, NULL, 0, "-DWIDE -U WIDE", "host");
  assert_int_equal(find(&s, "w")->params[0].type.id, DV_INT32);
  dv__ksigs_free(&s);
  /* Directives inside the parameter list. */
  const char *in = "DV_KERNEL(k, DV_ARRAY(int, x)\n#ifdef WITH_N\n , int n\n#endif\n) {}\n"
                   "#if 0\nDV_KERNEL(old, int a\n#endif\nDV_KERNEL(after, int b) {}\n";
  s = scan(in, NULL, 0, NULL, "host");
  assert_int_equal(find(&s, "k")->nparams, 1);
  assert_false(find(&s, "k")->ambiguous);
  assert_non_null(dv__ksig_find(&s, "after"));
  assert_null(dv__ksig_find(&s, "old"));
  dv__ksigs_free(&s);
  s = scan(in, NULL, 0, "-DWITH_N", "host");
  assert_int_equal(find(&s, "k")->nparams, 2);
  dv__ksigs_free(&s);
  s = scan("DV_KERNEL(k, DV_ARRAY(int, x)\n#ifdef __UNKNOWN\n , int n\n#endif\n) {}\n", NULL, 0,
           NULL, "host");
  assert_true(find(&s, "k")->ambiguous);
  dv__ksigs_free(&s);
  /* A prototype with other names, or `int` for `dv_i32`, is the same kernel. */
  s = scan("DV_KERNEL(k, DV_ARRAY(float, x), int n);\nDV_KERNEL(k, DV_ARRAY(float, out), dv_i32 count) {}\n",
           NULL, 0, NULL, "host");
  assert_false(find(&s, "k")->ambiguous);
  dv__ksigs_free(&s);
  /* A typedef in a block does not reach file scope. */
  s = scan("typedef double real;\nDV_KERNEL(a, int n) { typedef float real; }\n"
           "DV_KERNEL(b, DV_ARRAY(real, x)) {}\n", NULL, 0, NULL, "host");
  assert_int_equal(find(&s, "b")->params[0].type.id, DV_FLOAT64);
  dv__ksigs_free(&s);
  /* C's specifiers in any order. */
  s = scan("DV_KERNEL(k, long unsigned a, short unsigned b, char unsigned c, int long d, "
           "unsigned long long int e, long double f, signed g) {}", NULL, 0, NULL, "host");
  k = find(&s, "k");
  const dv_type_id want[] = {DV_UINT64, DV_UINT16, DV_UINT8, DV_INT64, DV_UINT64, DV_TYPE_COUNT, DV_INT32};
  for (int i = 0; i < 7; i++)
    if (k->params[i].type.id != want[i]) fail_msg("parameter %d (`%s`): %d", i + 1, k->params[i].decl, (int)k->params[i].type.id);
  dv__ksigs_free(&s);
  /* CRLF, a "/" "*" inside a string in a directive, a directive after a comment. */
  s = scan("#define OLD \\\r\ntypedef double real;\r\n#define S \"/*\"\r\n"
           "/* c */ #define T double\r\nDV_KERNEL(k, DV_ARRAY(real, x), T t) {}\r\n"
           "// a comment \\\r\nDV_KERNEL(hidden, int n) {}\r\n", NULL, 0, NULL, "host");
  k = find(&s, "k");
  assert_int_equal(k->params[0].type.id, DV_TYPE_COUNT); /* real: only inside OLD's text */
  assert_int_equal(k->params[1].type.id, DV_FLOAT64);
  assert_null(dv__ksig_find(&s, "hidden"));
  dv__ksigs_free(&s);
  /* A function-like macro as a type is unknown, not "a pointer". */
  s = scan("DV_KERNEL(k, VEC(float) v) {}", NULL, 0, NULL, "host");
  assert_false(find(&s, "k")->params[0].type.pointer);
  assert_int_equal(find(&s, "k")->params[0].type.id, DV_TYPE_COUNT);
  dv__ksigs_free(&s);
}

/* Many defines and kernels: the reader's tables are hashed (a quadratic
 * reader took seconds here). */
static void test_large_source(void **state) {
  (void)state;
  size_t cap = 64u << 20, n = 0;
  char *src = malloc(cap);
  assert_non_null(src);
  for (int i = 0; i < 40000; i++) n += (size_t)snprintf(src + n, cap - n, "#define NAME_%d %d\n", i, i);
  for (int i = 0; i < 20000; i++)
    n += (size_t)snprintf(src + n, cap - n, "DV_KERNEL(k%d, DV_ARRAY(float, x), int n) {}\n", i);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  dv_ksigs s = scan(src, NULL, 0, NULL, "host");
  clock_gettime(CLOCK_MONOTONIC, &t1);
  assert_int_equal(s.n, 20000);
  assert_non_null(dv__ksig_find(&s, "k19999"));
  double secs = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
  printf("large source: %zu bytes read in %.3f s\n", n, secs); /* reported, not asserted */
  dv__ksigs_free(&s);
  free(src);
}

/* The debug builds' cross-check: the host's exported text, and lowered
 * parameters as OpenCL (kinds and type names) and CUDA (sizes) report them. */
static void test_cross_check(void **state) {
  (void)state;
  dv_ksigs s = scan("DV_KERNEL(k, DV_ARRAY(const float, x), DV_VIEW(int, v), dv_i64 n, char c) {}",
                    NULL, 0, NULL, "opencl");
  const dv_ksig *k = find(&s, "k");
  char why[300];
  dv_ksig ex;
  assert_ok(dv__ksig_parse_list("DV_ARRAY(const float, x), DV_VIEW(int, v), dv_i64 n, char c", &ex));
  assert_true(dv__ksig_same(k, &ex, why, sizeof why));
  dv__ksig_clear(&ex);
  assert_ok(dv__ksig_parse_list("DV_ARRAY(const float, x), DV_ARRAY(int, v), dv_i64 n, char c", &ex));
  assert_false(dv__ksig_same(k, &ex, why, sizeof why));
  assert_non_null(strstr(why, "parameter 2"));
  dv__ksig_clear(&ex);
  assert_ok(dv__ksig_parse_list("DV_ARRAY(const float, x), DV_VIEW(int, v), dv_i64 n", &ex));
  assert_false(dv__ksig_same(k, &ex, why, sizeof why));
  dv__ksig_clear(&ex);

  /* OpenCL: kinds and type names. */
  dv_bparam cl[8] = {{'b', 0, "float*"}, {'v', 0, "long"}, {'b', 0, "int*"}, {'v', 0, "long"},
                     {'v', 0, "dv_kview"}, {'v', 0, "long"}, {'v', 0, "char"}};
  assert_true(dv__ksig_lowered_same(k, cl, 7, why, sizeof why));
  dv_bparam wrong[8];
  memcpy(wrong, cl, sizeof cl);
  snprintf(wrong[2].type, sizeof wrong[2].type, "float*"); /* the reader said int */
  assert_false(dv__ksig_lowered_same(k, wrong, 7, why, sizeof why));
  assert_non_null(strstr(why, "parameter 2"));
  memcpy(wrong, cl, sizeof cl);
  wrong[5].kind = 'b'; /* a value read as a buffer */
  assert_false(dv__ksig_lowered_same(k, wrong, 7, why, sizeof why));
  memcpy(wrong, cl, sizeof cl);
  snprintf(wrong[5].type, sizeof wrong[5].type, "int"); /* dv_i64 n read wrongly */
  assert_false(dv__ksig_lowered_same(k, wrong, 7, why, sizeof why));
  assert_false(dv__ksig_lowered_same(k, cl, 6, why, sizeof why)); /* one missing */
  assert_false(dv__ksig_lowered_same(k, cl, 8, why, sizeof why)); /* one more */
  /* CUDA: sizes only. */
  dv_bparam cu[7] = {{'?', 8, ""}, {'?', 8, ""}, {'?', 8, ""}, {'?', 8, ""}, {'?', 136, ""},
                     {'?', 8, ""}, {'?', 1, ""}};
  assert_true(dv__ksig_lowered_same(k, cu, 7, why, sizeof why));
  cu[5].size = 4;
  assert_false(dv__ksig_lowered_same(k, cu, 7, why, sizeof why));
  assert_non_null(strstr(why, "`dv_i64 n`"));
  dv__ksigs_free(&s);
}

/* Out of memory anywhere in the scan is a status, never a crash or a leak. */
static void test_scan_out_of_memory(void **state) {
  (void)state;
  const char *src = "typedef float real;\n#define N 4\nDV_KERNEL(a, DV_ARRAY(real, x), int n) {}\n"
                    "DV_KERNEL(b, DV_VIEW(double, y)) {}\n";
  int failures = 0;
  for (uint64_t k = 1; k < 200; k++) {
    dv__fault_host_set(k);
    dv_ksigs s;
    dv_status rc = dv__ksig_scan(src, NULL, 0, NULL, "host", NULL, &s);
    bool fired = !dv__fault_host_pending();
    dv__fault_host_set(0);
    if (rc) {
      assert_int_equal(rc, DV_ERR_HOST_OUT_OF_MEMORY);
      assert_null(s.v);
      failures++;
      continue;
    }
    assert_false(fired);
    assert_non_null(dv__ksig_find(&s, "b"));
    dv__ksigs_free(&s);
    break;
  }
  assert_true(failures > 3);
}

/* dv_half_from_float / dv_half_to_float (DV_ARG_F16): exact both ways. */
static void test_half_conversions(void **state) {
  (void)state;
  for (uint32_t h = 0; h < 65536; h++) {
    float f = dv_half_to_float((uint16_t)h);
    uint16_t back = dv_half_from_float(f);
    if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) { /* NaN: stays NaN, payload kept */
      assert_true(isnan(f));
      assert_int_equal(back, h);
    } else if (back != h) {
      fail_msg("half 0x%04x -> %a -> 0x%04x", h, (double)f, back);
    }
  }
  assert_true(dv_half_to_float(0x3c00) == 1.0f);
  assert_true(dv_half_to_float(0x0001) == ldexpf(1, -24));
  assert_true(dv_half_to_float(0x7bff) == 65504.0f);
  /* Ties to even, at both ends of the range. */
  assert_int_equal(dv_half_from_float(1.0f + ldexpf(1, -11)), 0x3c00);          /* tie: even */
  assert_int_equal(dv_half_from_float(1.0f + 3 * ldexpf(1, -11)), 0x3c02);      /* tie: up */
  assert_int_equal(dv_half_from_float(nextafterf(1.0f + ldexpf(1, -11), 2)), 0x3c01);
  assert_int_equal(dv_half_from_float(65519.0f), 0x7bff);
  assert_int_equal(dv_half_from_float(65520.0f), 0x7c00); /* tie with an odd 65504: infinity */
  assert_int_equal(dv_half_from_float(-1e10f), 0xfc00);
  assert_int_equal(dv_half_from_float(ldexpf(1, -25)), 0x0000);           /* tie: zero */
  assert_int_equal(dv_half_from_float(nextafterf(ldexpf(1, -25), 1)), 0x0001);
  assert_int_equal(dv_half_from_float(3 * ldexpf(1, -25)), 0x0002);       /* tie: even */
  assert_int_equal(dv_half_from_float(-0.0f), 0x8000);
  assert_int_equal(dv_half_from_float(ldexpf(1023, -24) + ldexpf(1, -25)), 0x0400); /* to normal */
  float qnan, snan_low;
  uint32_t q = 0x7fc00000u, sl = 0x7f800001u;
  memcpy(&qnan, &q, 4);
  memcpy(&snan_low, &sl, 4);
  assert_int_equal(dv_half_from_float(qnan), 0x7e00);
  assert_int_equal(dv_half_from_float(snan_low), 0x7c01); /* no payload bit left: still NaN */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_what_is_read), cmocka_unit_test(test_conditions),
      cmocka_unit_test(test_cross_check), cmocka_unit_test(test_scan_out_of_memory),
      cmocka_unit_test(test_review_cases), cmocka_unit_test(test_large_source),
      cmocka_unit_test(test_half_conversions),
  };
  return cmocka_run_group_tests_name("signature", tests, NULL, NULL);
}
