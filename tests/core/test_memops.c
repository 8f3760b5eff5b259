/* White-box tests of the host gather/scatter kernels (src/core/memops.c):
 * the cache-blocked transpose and the inline short-row loops against a
 * plain element-by-element reference, for every element size the kernels
 * specialise and the shapes around their tile and width boundaries, and
 * the streaming stores of long rect copies. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/memops.h"

/* The reference: one element at a time, odometer over nd dimensions. */
static void ref_copy(char *d, const int64_t *ds, const char *s, const int64_t *ss, const int64_t *n,
                     int nd, size_t isz) {
  int64_t idx[8] = {0};
  for (int i = 0; i < nd; i++)
    if (n[i] == 0) return;
  for (;;) {
    int64_t so = 0, dof = 0;
    for (int i = 0; i < nd; i++) so += idx[i] * ss[i], dof += idx[i] * ds[i];
    memcpy(d + dof, s + so, isz);
    int k = nd - 1;
    for (; k >= 0; k--) {
      if (++idx[k] < n[k]) break;
      idx[k] = 0;
    }
    if (k < 0) return;
  }
}

static void fill(unsigned char *p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++) p[i] = (unsigned char)(i * 131u + seed * 7u + (i >> 8));
}

/* Copy src (strides ss) into dst (strides ds) with both the kernel and the
 * reference, on buffers of span bytes with element 0 at offset off; every
 * byte of the destination buffers must agree (bytes between elements are
 * left alone by both). */
static void check_copy(const int64_t *n, int nd, const int64_t *ss, const int64_t *ds, size_t isz,
                       size_t span, size_t soff, size_t doff) {
  unsigned char *s = malloc(span), *d1 = malloc(span), *d2 = malloc(span);
  assert_non_null(s), assert_non_null(d1), assert_non_null(d2);
  fill(s, span, 1);
  fill(d1, span, 2);
  memcpy(d2, d1, span);
  dv__strided_copy(d1 + doff, ds, s + soff, ss, n, nd, isz);
  ref_copy((char *)d2 + doff, ds, (const char *)s + soff, ss, n, nd, isz);
  assert_memory_equal(d1, d2, span);
  free(s), free(d1), free(d2);
}

static void test_transpose_every_itemsize(void **state) {
  (void)state;
  size_t sizes[] = {1, 2, 4, 8, 16};
  int64_t dims[][2] = {{16, 16}, {17, 33}, {64, 64}, {100, 37}, {31, 130}};
  for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++)
    for (size_t j = 0; j < sizeof dims / sizeof *dims; j++) {
      int64_t isz = (int64_t)sizes[k], r = dims[j][0], c = dims[j][1];
      int64_t n[2] = {r, c};
      int64_t dense[2] = {c * isz, isz}, tr[2] = {isz, r * isz}; /* C order; a.T of (c, r) */
      size_t span = (size_t)(r * c * isz);
      check_copy(n, 2, tr, dense, (size_t)isz, span, 0, 0); /* gather a transpose */
      check_copy(n, 2, dense, tr, (size_t)isz, span, 0, 0); /* scatter into one */
    }
}

static void test_transpose_outer_dims_and_negative_strides(void **state) {
  (void)state;
  /* 3 stacked 40x24 float32 transposes. */
  int64_t n[3] = {3, 40, 24}, isz = 4;
  int64_t dense[3] = {40 * 24 * isz, 24 * isz, isz};
  int64_t tr[3] = {40 * 24 * isz, isz, 40 * isz};
  size_t span = (size_t)(3 * 40 * 24 * isz);
  check_copy(n, 3, tr, dense, 4, span, 0, 0);
  /* The transposed side read backwards along both dimensions. */
  int64_t neg[3] = {40 * 24 * isz, -isz, -40 * isz};
  size_t last = (size_t)(39 * isz + 23 * 40 * isz);
  check_copy(n, 3, neg, dense, 4, span, last, 0);
  /* Strided (not dense) on the other side: every other row. */
  int64_t n2[2] = {32, 48}, wide[2] = {2 * 48 * 8, 8}, tr2[2] = {8, 32 * 8};
  check_copy(n2, 2, tr2, wide, 8, (size_t)(2 * 32 * 48 * 8), 0, 0);
}

static void test_short_rows_every_width(void **state) {
  (void)state;
  /* Rows of w bytes (elements of w bytes, or runs of w/4 float32) at a
   * pitch of 2w + 8, for the widths with their own loops and a few without. */
  size_t widths[] = {1, 2, 4, 8, 12, 16, 24, 32, 40, 48, 56, 64, 72, 128, 248, 256, 264, 300};
  for (size_t k = 0; k < sizeof widths / sizeof *widths; k++) {
    size_t w = widths[k];
    int64_t rows = 37, pitch = (int64_t)(2 * w + 8);
    size_t span = (size_t)(rows * pitch);
    /* As one dimension of w-byte elements. */
    int64_t n1[1] = {rows}, sp[1] = {pitch}, dn[1] = {(int64_t)w};
    check_copy(n1, 1, sp, dn, w, span, 0, 0);
    check_copy(n1, 1, dn, sp, w, span, 0, 0);
    /* As a rectangle of rows (the host backend's rect copies). */
    unsigned char *s = malloc(span), *d1 = malloc(span), *d2 = malloc(span);
    assert_non_null(s), assert_non_null(d1), assert_non_null(d2);
    fill(s, span, 3);
    fill(d1, span, 4);
    memcpy(d2, d1, span);
    dv__rect_copy(d1, w, 0, s, (size_t)pitch, 0, w, (size_t)rows, 1);
    for (int64_t i = 0; i < rows; i++) memcpy(d2 + (size_t)i * w, s + i * pitch, w);
    assert_memory_equal(d1, d2, span);
    free(s), free(d1), free(d2);
  }
}

/* Rows of 16, 32, 48, 64 and 256 bytes have unrolled loops (4, 2 or 1 rows a
 * step), and with AVX2 rows of 16 gathered into a dense destination are
 * stored two at a time: every remainder of the unrolling (0 to 9 rows),
 * gather (dense destination), scatter (dense source) and both strided, in
 * both the AVX2 loops (where the processor has them) and the portable ones,
 * against a row-by-row memcpy; no byte outside the rows may change. */
static void test_short_rows_unrolled_both_paths(void **state) {
  (void)state;
  size_t widths[] = {16, 32, 48, 64, 128, 256};
  bool was = dv__memops_portable(false);
  for (int portable = 0; portable < 2; portable++) {
    dv__memops_portable(portable != 0);
    for (size_t k = 0; k < sizeof widths / sizeof *widths; k++)
      for (int64_t rows = 0; rows <= 9; rows++)
        for (int kind = 0; kind < 3; kind++) { /* gather, scatter, both strided */
          size_t w = widths[k], wide = 2 * w + 16;
          size_t dp = kind == 0 ? w : wide + 8, sp = kind == 1 ? w : wide;
          size_t span = (size_t)(rows + 1) * (wide + 8) + 64;
          unsigned char *s = malloc(span), *d1 = malloc(span), *d2 = malloc(span);
          assert_non_null(s), assert_non_null(d1), assert_non_null(d2);
          fill(s, span, (unsigned)(rows + 5));
          fill(d1, span, 9);
          memcpy(d2, d1, span);
          /* Odd offsets: nothing in the loops may assume alignment. */
          dv__rect_copy(d1 + 3, dp, 0, s + 5, sp, 0, w, (size_t)rows, 1);
          for (int64_t i = 0; i < rows; i++)
            memcpy(d2 + 3 + (size_t)i * dp, s + 5 + (size_t)i * sp, w);
          assert_memory_equal(d1, d2, span);
          free(s), free(d1), free(d2);
        }
  }
  dv__memops_portable(was);
}

/* The unrolled loops with negative strides on either side (record dtypes
 * of 16..256 bytes reach them through dv__strided_copy with a view's own
 * strides), a dense destination with a reversed source (the AVX2 pairing),
 * and a source stride of 0 (broadcast), on both paths. */
static void test_short_rows_negative_and_zero_strides(void **state) {
  (void)state;
  size_t widths[] = {16, 32, 48, 64, 128, 256};
  bool was = dv__memops_portable(false);
  for (int portable = 0; portable < 2; portable++) {
    dv__memops_portable(portable != 0);
    for (size_t k = 0; k < sizeof widths / sizeof *widths; k++)
      for (int64_t rows = 1; rows <= 9; rows++)
        for (int kind = 0; kind < 5; kind++) {
          int64_t w = (int64_t)widths[k], gap = w + 16;
          int64_t ss, ds;
          switch (kind) {
            case 0: ds = w, ss = -w; break; /* reversed gather into dense */
            case 1: ds = -w, ss = w; break; /* dense into reversed */
            case 2: ds = -gap, ss = -gap - 8; break;
            case 3: ds = w, ss = 0; break; /* broadcast source */
            default: ds = gap, ss = -gap; break;
          }
          size_t span = (size_t)(rows + 2) * (size_t)(gap + 8) * 2 + 64;
          size_t mid = span / 2;
          int64_t n[1] = {rows}, sst[1] = {ss}, dst[1] = {ds};
          check_copy(n, 1, sst, dst, (size_t)w, span, mid + 5, mid + 3);
        }
  }
  dv__memops_portable(was);
}

/* A rect of width 0 copies nothing (a first version of the unrolled loops'
 * dispatch took width 0 for one of its widths and wrote 64 or 256 bytes a
 * row). */
static void test_rect_width_zero_copies_nothing(void **state) {
  (void)state;
  bool was = dv__memops_portable(false);
  for (int portable = 0; portable < 2; portable++) {
    dv__memops_portable(portable != 0);
    unsigned char *s = malloc(4 * 300), *d = malloc(4 * 300), *ref = malloc(4 * 300);
    memset(s, 1, 4 * 300), memset(d, 2, 4 * 300), memset(ref, 2, 4 * 300);
    dv__rect_copy(d, 300, 0, s, 300, 0, 0, 4, 1);
    assert_memory_equal(d, ref, 4 * 300);
    free(s), free(d), free(ref);
  }
  dv__memops_portable(was);
}

/* The transpose's tiles (1 KiB of the source dense side by 32 elements)
 * and its SSE2 blocks (4 x 4 of 4 bytes, 2 x 2 of 8): shapes that end
 * mid-tile and mid-block on both sides, stacked (3-D) and read backwards,
 * every element size, gather and scatter, on both the SIMD blocks and the
 * portable element loop. */
static void test_transpose_tile_and_block_edges(void **state) {
  (void)state;
  size_t sizes[] = {1, 2, 4, 8, 16};
  int64_t dims[][2] = {{257, 33}, {33, 257}, {1030, 19}, {18, 1027}, {130, 66}};
  bool was = dv__memops_portable(false);
  for (int portable = 0; portable < 2; portable++) {
    dv__memops_portable(portable != 0);
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++)
      for (size_t j = 0; j < sizeof dims / sizeof *dims; j++) {
        int64_t isz = (int64_t)sizes[k], r = dims[j][0], c = dims[j][1];
        int64_t n[2] = {r, c};
        int64_t dense[2] = {c * isz, isz}, tr[2] = {isz, r * isz};
        size_t span = (size_t)(r * c * isz);
        check_copy(n, 2, tr, dense, (size_t)isz, span, 0, 0);
        check_copy(n, 2, dense, tr, (size_t)isz, span, 0, 0);
      }
    /* 2 stacked 261 x 23 transposes of 4 and 8 bytes, the transposed side
     * read backwards along both dimensions and the outer one reversed. */
    for (int64_t isz = 4; isz <= 8; isz += 4) {
      int64_t n[3] = {2, 261, 23};
      int64_t dense[3] = {261 * 23 * isz, 23 * isz, isz};
      int64_t neg[3] = {-261 * 23 * isz, -isz, -261 * isz};
      size_t span = (size_t)(2 * 261 * 23 * isz);
      check_copy(n, 3, neg, dense, (size_t)isz, span, span - (size_t)isz, 0);
      check_copy(n, 3, dense, neg, (size_t)isz, span, 0, span - (size_t)isz);
    }
  }
  dv__memops_portable(was);
}

/* Streaming stores (rect copies of at least dv__memops_stream_min bytes,
 * here 0): a dense destination at 16- and 32-byte alignment, rows of 16
 * (stored two at a time) to 256 bytes and of 8 (two to a 16-byte store),
 * odd and even row counts; rows of at
 * least 256 bytes of any width into a strided destination at any
 * alignment (whole lines streamed, partial ones plain); slices (depth 3);
 * layouts that do not stream (short rows into a strided destination, a
 * misaligned dense destination).  Against a row-by-row memcpy; no byte
 * outside the rows may change. */
static void streaming_rect_copies(void) {
  size_t was_min = dv__memops_stream_min(0);
  bool was = dv__memops_portable(false);
  size_t widths[] = {8, 16, 32, 48, 64, 80, 128, 256, 300, 1024, 1031};
  size_t offs[] = {0, 3, 16, 32, 48};
  for (size_t k = 0; k < sizeof widths / sizeof *widths; k++)
    for (size_t o = 0; o < sizeof offs / sizeof *offs; o++)
      for (int kind = 0; kind < 3; kind++) /* gather to dense, scatter to strided, both strided */
        for (size_t rows = 1; rows <= 6; rows++) {
          size_t w = widths[k], wide = 2 * w + 24, depth = 3;
          size_t dp = kind == 0 ? w : wide + 40, sp = kind == 1 ? w : wide;
          /* slices one after another (rows + 1 rows each): no destination row is
           * written twice, so the result does not depend on the order of the rows
           * (a split copy's two threads take them in any order) */
          size_t dsl = dp * (rows + 1) + (kind == 0 ? 0 : 64), ssl = sp * (rows + 1) + 16;
          size_t span = depth * (dsl > ssl ? dsl : ssl) + 2 * wide + 256;
          unsigned char *raw_s = malloc(span + 64), *raw1 = malloc(span + 64),
                        *raw2 = malloc(span + 64);
          assert_non_null(raw_s), assert_non_null(raw1), assert_non_null(raw2);
          /* 64-byte aligned bases, then the offset under test. */
          unsigned char *s = raw_s + (64 - (uintptr_t)raw_s % 64) % 64;
          unsigned char *d1 = raw1 + (64 - (uintptr_t)raw1 % 64) % 64,
                        *d2 = raw2 + (64 - (uintptr_t)raw2 % 64) % 64;
          fill(s, span, (unsigned)(w + rows));
          fill(d1, span, 11);
          memcpy(d2, d1, span);
          for (size_t dep = 1; dep <= depth; dep += 2) {
            dv__rect_copy(d1 + offs[o], dp, dsl, s + 5, sp, ssl, w, rows + 1, dep);
            for (size_t z = 0; z < dep; z++)
              for (size_t i = 0; i < rows + 1; i++)
                memcpy(d2 + offs[o] + z * dsl + i * dp, s + 5 + z * ssl + i * sp, w);
            assert_memory_equal(d1, d2, span);
          }
          free(raw_s), free(raw1), free(raw2);
        }
  dv__memops_portable(was);
  dv__memops_stream_min(was_min);
}

static void test_streaming_rect_copies(void **state) {
  (void)state;
  int was = dv__memops_threads(1); /* one thread */
  uint64_t before = dv__memops_splits();
  streaming_rect_copies();
  assert_int_equal(dv__memops_splits(), before);
  dv__memops_threads(was);
}

/* The same copies shared with a helper thread (issue 39; every streamed copy
 * of two rows or more splits with the threshold at 0): chunks of whole rows
 * slice by slice, odd row counts, depth 3, the same bytes; and that they did
 * split where the build streams. */
static void test_streaming_rect_copies_split(void **state) {
  (void)state;
  int was = dv__memops_threads(2);
  size_t was_min = dv__memops_split_min(0);
  uint64_t before = dv__memops_splits();
  streaming_rect_copies();
  if (was_min != SIZE_MAX) assert_true(dv__memops_splits() > before);
  /* a long gather at the default threshold: split, the same bytes */
  dv__memops_split_min(was_min);
  size_t rows = (size_t)1 << 18, w = 64, sp = 128; /* 16 MiB kept */
  unsigned char *src = malloc(rows * sp + 16), *d1 = NULL, *d2 = malloc(rows * w);
  assert_int_equal(posix_memalign((void **)&d1, 64, rows * w), 0);
  assert_non_null(src), assert_non_null(d2);
  fill(src, rows * sp + 16, 7);
  before = dv__memops_splits();
  dv__rect_copy(d1, w, 0, src + 16, sp, 0, w, rows, 1);
  for (size_t i = 0; i < rows; i++) memcpy(d2 + i * w, src + 16 + i * sp, w);
  assert_memory_equal(d1, d2, rows * w);
  if (was_min != SIZE_MAX) assert_int_equal(dv__memops_splits(), before + 1);
  free(src), free(d1), free(d2);
  dv__memops_threads(was);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_transpose_every_itemsize),
      cmocka_unit_test(test_transpose_outer_dims_and_negative_strides),
      cmocka_unit_test(test_short_rows_every_width),
      cmocka_unit_test(test_short_rows_unrolled_both_paths),
      cmocka_unit_test(test_short_rows_negative_and_zero_strides),
      cmocka_unit_test(test_rect_width_zero_copies_nothing),
      cmocka_unit_test(test_transpose_tile_and_block_edges),
      cmocka_unit_test(test_streaming_rect_copies),
      cmocka_unit_test(test_streaming_rect_copies_split),
  };
  return cmocka_run_group_tests_name("memops", tests, NULL, NULL);
}
