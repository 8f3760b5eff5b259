/*
 * Host-memory gather/scatter over strided layouts.  Used by the host
 * simulator's stream workers (its "device" copies) and by the transfer
 * planner to pack and unpack host views through staging buffers.
 */
#include <stdbool.h>
#include <string.h>

#include "devarray.h" /* DV_MAXDIMS */
#include "memops.h"

/* One 16-byte word, as a register load and store. */
static inline void dv__cp16(char *d, const char *s) {
  uint64_t a, b;
  memcpy(&a, s, 8);
  memcpy(&b, s + 8, 8);
  memcpy(d, &a, 8);
  memcpy(d + 8, &b, 8);
}

/* Copy one row of n elements; the itemsize switch lets the compiler emit
 * plain loads and stores for the common sizes. */
static void dv__row(char *d, int64_t ds, const char *s, int64_t ss, int64_t n, size_t isz) {
  if (ds == (int64_t)isz && ss == (int64_t)isz) {
    memmove(d, s, (size_t)n * isz);
    return;
  }
#define DV_ROW(T)                                             \
  for (int64_t i = 0; i < n; i++) {                           \
    T v;                                                      \
    memcpy(&v, s + i * ss, sizeof v);                         \
    memcpy(d + i * ds, &v, sizeof v);                         \
  }                                                           \
  return;
  typedef struct { uint64_t a, b; } u128;
  /* W 16-byte words and an 8-byte tail of TAIL bytes (0 or 8), W constant. */
#define DV_ROWW(W, TAIL)                                      \
  for (int64_t i = 0; i < n; i++) {                           \
    char *dd = d + i * ds;                                    \
    const char *sp = s + i * ss;                              \
    for (int k = 0; k < W; k++) dv__cp16(dd + 16 * k, sp + 16 * k); \
    if (TAIL) {                                               \
      uint64_t t;                                             \
      memcpy(&t, sp + 16 * W, sizeof t);                      \
      memcpy(dd + 16 * W, &t, sizeof t);                      \
    }                                                         \
  }                                                           \
  return;
  switch (isz) {
    case 1: DV_ROW(uint8_t)
    case 2: DV_ROW(uint16_t)
    case 4: DV_ROW(uint32_t)
    case 8: DV_ROW(uint64_t)
    case 16: DV_ROW(u128)
    case 24: DV_ROWW(1, 8)
    case 32: DV_ROWW(2, 0)
    case 48: DV_ROWW(3, 0)
    case 64: DV_ROWW(4, 0)
    default:
      /* Short rows of other widths (runs of a few elements): 16- or 8-byte
       * words and a typed tail, inline instead of a library call per row. */
      if (isz <= 256 && isz % 8 == 0) {
        size_t w16 = isz / 16, tail = isz % 16;
        for (int64_t i = 0; i < n; i++) {
          char *dd = d + i * ds;
          const char *sp = s + i * ss;
          for (size_t k = 0; k < w16; k++) {
            u128 v;
            memcpy(&v, sp + 16 * k, sizeof v);
            memcpy(dd + 16 * k, &v, sizeof v);
          }
          if (tail) {
            uint64_t v;
            memcpy(&v, sp + 16 * w16, sizeof v);
            memcpy(dd + 16 * w16, &v, sizeof v);
          }
        }
        return;
      }
      for (int64_t i = 0; i < n; i++) memmove(d + i * ds, s + i * ss, isz);
  }
#undef DV_ROW
#undef DV_ROWW
}

/* A 2-D copy of nr x nc elements, element (i, j) at s + i*sr + j*sc and
 * d + i*dr + j*dc, in square tiles, so that a transpose (one side walks
 * its rows, the other its columns) touches each cache line once per tile
 * rather than once per element. */
#define DV_TILE 32
static void dv__tiled(char *d, int64_t dr, int64_t dc, const char *s, int64_t sr, int64_t sc,
                      int64_t nr, int64_t nc, size_t isz) {
#define DV_TILED(T)                                                             \
  for (int64_t i0 = 0; i0 < nr; i0 += DV_TILE) {                                \
    int64_t i1 = i0 + DV_TILE < nr ? i0 + DV_TILE : nr;                         \
    for (int64_t j0 = 0; j0 < nc; j0 += DV_TILE) {                              \
      int64_t j1 = j0 + DV_TILE < nc ? j0 + DV_TILE : nc;                       \
      for (int64_t i = i0; i < i1; i++) {                                       \
        char *dd = d + i * dr;                                                  \
        const char *sp = s + i * sr;                                            \
        for (int64_t j = j0; j < j1; j++) {                                     \
          T v;                                                                  \
          memcpy(&v, sp + j * sc, sizeof v);                                    \
          memcpy(dd + j * dc, &v, sizeof v);                                    \
        }                                                                       \
      }                                                                         \
    }                                                                           \
  }                                                                             \
  return;
  typedef struct { uint64_t a, b; } u128;
  switch (isz) {
    case 1: DV_TILED(uint8_t)
    case 2: DV_TILED(uint16_t)
    case 4: DV_TILED(uint32_t)
    case 8: DV_TILED(uint64_t)
    default: DV_TILED(u128) /* only 16 reaches here */
  }
#undef DV_TILED
}

/* The last two dimensions form a transpose: one side dense along the last,
 * the other dense along the one before it, both long enough to tile. */
static bool dv__is_transpose(const int64_t *dst_strides, const int64_t *src_strides,
                             const int64_t *shape, int nd, size_t itemsize) {
  if (nd < 2 || !(itemsize == 1 || itemsize == 2 || itemsize == 4 || itemsize == 8 || itemsize == 16))
    return false;
  int a = nd - 2, b = nd - 1;
  int64_t isz = (int64_t)itemsize;
  if (shape[a] < DV_TILE / 2 || shape[b] < DV_TILE / 2) return false;
  return (dst_strides[b] == isz && src_strides[a] == isz) ||
         (src_strides[b] == isz && dst_strides[a] == isz);
}

void dv__strided_copy(void *dst, const int64_t *dst_strides, const void *src,
                      const int64_t *src_strides, const int64_t *shape, int nd, size_t itemsize) {
  if (nd == 0) {
    memmove(dst, src, itemsize);
    return;
  }
  for (int i = 0; i < nd; i++)
    if (shape[i] == 0) return;
  int64_t idx[DV_MAXDIMS] = {0};
  bool tiled = dv__is_transpose(dst_strides, src_strides, shape, nd, itemsize);
  int last = tiled ? nd - 2 : nd - 1; /* tiled: the last two dimensions at once */
  char *d = dst;
  const char *s = src;
  for (;;) {
    if (tiled)
      dv__tiled(d, dst_strides[last], dst_strides[last + 1], s, src_strides[last],
                src_strides[last + 1], shape[last], shape[last + 1], itemsize);
    else
      dv__row(d, dst_strides[last], s, src_strides[last], shape[last], itemsize);
    /* Advance the odometer over the outer dimensions. */
    int k = last - 1;
    for (; k >= 0; k--) {
      d += dst_strides[k];
      s += src_strides[k];
      if (++idx[k] < shape[k]) break;
      d -= dst_strides[k] * shape[k];
      s -= src_strides[k] * shape[k];
      idx[k] = 0;
    }
    if (k < 0) return;
  }
}

void dv__rect_copy(void *dst, size_t dpitch, size_t dslice, const void *src, size_t spitch,
                   size_t sslice, size_t width, size_t height, size_t depth) {
  /* Each slice is `height` elements of `width` bytes: the same row kernel as
   * strided copies (typed loads for narrow widths, memmove for wide ones). */
  for (size_t z = 0; z < depth; z++)
    dv__row((char *)dst + z * dslice, (int64_t)dpitch, (const char *)src + z * sslice,
            (int64_t)spitch, (int64_t)height, width);
}
