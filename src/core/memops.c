/*
 * Host-memory gather/scatter over strided layouts.  Used by the host
 * simulator's stream workers (its "device" copies) and by the transfer
 * planner to pack and unpack host views through staging buffers.
 */
#include <string.h>

#include "devarray.h" /* DV_MAXDIMS */
#include "memops.h"

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
  switch (isz) {
    case 1: DV_ROW(uint8_t)
    case 2: DV_ROW(uint16_t)
    case 4: DV_ROW(uint32_t)
    case 8: DV_ROW(uint64_t)
    case 16: DV_ROW(u128)
    default:
      for (int64_t i = 0; i < n; i++) memmove(d + i * ds, s + i * ss, isz);
  }
#undef DV_ROW
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
  int last = nd - 1;
  char *d = dst;
  const char *s = src;
  for (;;) {
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
