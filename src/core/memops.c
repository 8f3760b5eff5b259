/*
 * Host-memory gather/scatter over strided layouts.  Used by the host
 * simulator's stream workers (its "device" copies) and by the transfer
 * planner to pack and unpack host views through staging buffers.
 */
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#define DV_MEMOPS_X86 1
#include <immintrin.h>
#else
#define DV_MEMOPS_X86 0
#endif

#include "devarray.h" /* DV_MAXDIMS */
#include "memops.h"

/* One 16-byte word, as a register load and store (one 16-byte move on
 * x86-64: copied as a whole struct, not as two 8-byte halves). */
typedef struct { uint64_t a, b; } dv__u128;
static inline void dv__cp16(char *d, const char *s) {
  dv__u128 v;
  memcpy(&v, s, sizeof v);
  memcpy(d, &v, sizeof v);
}

/* W bytes (a multiple of 16, constant at each use) as 16-byte words. */
#define DV_CPW(d, s, W)                                        \
  do {                                                         \
    for (int k_ = 0; k_ < (W) / 16; k_++) dv__cp16((d) + 16 * k_, (s) + 16 * k_); \
  } while (0)

/* The widths with their own loops below (dv__rows16, dv__rows16_avx2). */
static inline bool dv__rows16_width(size_t w) {
  /* Not 128: neither 32-byte words nor 16-byte words unrolled beat the
   * plain word loop at that width (docs/benchmarks.md, third pass). */
  return w == 16 || w == 32 || w == 48 || w == 64 || w == 256;
}

/* n rows of W bytes (a multiple of 16), U rows per loop iteration: the
 * loop's own work is paid once per U rows, which is what short rows are
 * bound by.  Rows are addressed by index (no pointer is formed past the
 * last row, whatever the strides' signs). */
#define DV_ROWS_UNROLLED(W, U)                                 \
  {                                                            \
    int64_t i = 0;                                             \
    for (; i + (U) <= n; i += (U))                             \
      for (int u_ = 0; u_ < (U); u_++) DV_CPW(d + (i + u_) * ds, s + (i + u_) * ss, W); \
    for (; i < n; i++) DV_CPW(d + i * ds, s + i * ss, W);      \
    return;                                                    \
  }

/* Rows of 16, 32, 48, 64 or 256 bytes (runs of 4, 8, 12, 16 and 64
 * float32, the short runs of a sliced view) with 16-byte words, unrolled. */
static void dv__rows16(char *d, int64_t ds, const char *s, int64_t ss, int64_t n, size_t w) {
  switch (w) {
    case 16: DV_ROWS_UNROLLED(16, 4)
    case 32: DV_ROWS_UNROLLED(32, 4)
    case 48: DV_ROWS_UNROLLED(48, 2)
    case 64: DV_ROWS_UNROLLED(64, 2)
    case 256: DV_ROWS_UNROLLED(256, 1)
    default: /* not reached: dv__rows16_width */
      for (int64_t i = 0; i < n; i++) memmove(d + i * ds, s + i * ss, w);
  }
}

#if DV_MEMOPS_X86
/* The same with AVX2 where the processor has it: 32-byte words, and rows of
 * 16 bytes gathered into a dense destination two to a 32-byte store (stores
 * are what a gather of short runs runs out of first). */
__attribute__((target("avx2"))) static void dv__rows16_avx2(char *d, int64_t ds, const char *s, int64_t ss,
                                                            int64_t n, size_t w) {
#define DV_LD16(p) _mm_loadu_si128((const __m128i *)(const void *)(p))
#define DV_LD32(p) _mm256_loadu_si256((const __m256i *)(const void *)(p))
#define DV_ST16(p, v) _mm_storeu_si128((__m128i *)(void *)(p), v)
#define DV_ST32(p, v) _mm256_storeu_si256((__m256i *)(void *)(p), v)
#define DV_PAIR(p, q) _mm256_inserti128_si256(_mm256_castsi128_si256(DV_LD16(p)), DV_LD16(q), 1)
  int64_t i = 0;
  switch (w) {
    case 16:
      if (ds == 16)
        for (; i + 4 <= n; i += 4) {
          const char *r = s + i * ss;
          __m256i a = DV_PAIR(r, r + ss), b = DV_PAIR(r + 2 * ss, r + 3 * ss);
          DV_ST32(d + i * 16, a);
          DV_ST32(d + i * 16 + 32, b);
        }
      else
        for (; i + 4 <= n; i += 4)
          for (int u = 0; u < 4; u++) DV_ST16(d + (i + u) * ds, DV_LD16(s + (i + u) * ss));
      for (; i < n; i++) DV_ST16(d + i * ds, DV_LD16(s + i * ss));
      return;
    case 32:
      for (; i + 4 <= n; i += 4)
        for (int u = 0; u < 4; u++) DV_ST32(d + (i + u) * ds, DV_LD32(s + (i + u) * ss));
      for (; i < n; i++) DV_ST32(d + i * ds, DV_LD32(s + i * ss));
      return;
    case 48:
      for (; i < n; i++) {
        const char *r = s + i * ss;
        __m256i a = DV_LD32(r);
        __m128i b = DV_LD16(r + 32);
        DV_ST32(d + i * ds, a);
        DV_ST16(d + i * ds + 32, b);
      }
      return;
    case 64:
      for (; i + 2 <= n; i += 2)
        for (int u = 0; u < 2; u++) {
          const char *r = s + (i + u) * ss;
          __m256i a = DV_LD32(r), b = DV_LD32(r + 32);
          DV_ST32(d + (i + u) * ds, a);
          DV_ST32(d + (i + u) * ds + 32, b);
        }
      for (; i < n; i++) {
        __m256i a = DV_LD32(s + i * ss), b = DV_LD32(s + i * ss + 32);
        DV_ST32(d + i * ds, a);
        DV_ST32(d + i * ds + 32, b);
      }
      return;
    case 256:
      for (; i < n; i++)
        for (int k = 0; k < 256; k += 64) {
          const char *r = s + i * ss + k;
          __m256i a = DV_LD32(r), b = DV_LD32(r + 32);
          DV_ST32(d + i * ds + k, a);
          DV_ST32(d + i * ds + k + 32, b);
        }
      return;
    default: /* not reached: dv__rows16_width */
      dv__rows16(d, ds, s, ss, n, w);
      return;
  }
#undef DV_LD16
#undef DV_LD32
#undef DV_ST16
#undef DV_ST32
#undef DV_PAIR
}

/* The AVX2 loops run unless the processor lacks AVX2 or a test asked for
 * the portable ones (dv__memops_portable). */
static _Atomic int dv__portable_only;
static bool dv__use_avx2(void) {
  return !atomic_load_explicit(&dv__portable_only, memory_order_relaxed) && __builtin_cpu_supports("avx2");
}
bool dv__memops_portable(bool on) {
  return atomic_exchange(&dv__portable_only, on ? 1 : 0) != 0;
}
#else
bool dv__memops_portable(bool on) {
  (void)on;
  return true;
}
#endif

/* Copy one row of n elements; the itemsize switch lets the compiler emit
 * plain loads and stores for the common sizes. */
static void dv__row(char *d, int64_t ds, const char *s, int64_t ss, int64_t n, size_t isz) {
  if (ds == (int64_t)isz && ss == (int64_t)isz) {
    memmove(d, s, (size_t)n * isz);
    return;
  }
  if (dv__rows16_width(isz)) {
#if DV_MEMOPS_X86
    if (dv__use_avx2()) {
      dv__rows16_avx2(d, ds, s, ss, n, isz);
      return;
    }
#endif
    dv__rows16(d, ds, s, ss, n, isz);
    return;
  }
#define DV_ROW(T)                                             \
  for (int64_t i = 0; i < n; i++) {                           \
    T v;                                                      \
    memcpy(&v, s + i * ss, sizeof v);                         \
    memcpy(d + i * ds, &v, sizeof v);                         \
  }                                                           \
  return;
  switch (isz) {
    case 1: DV_ROW(uint8_t)
    case 2: DV_ROW(uint16_t)
    case 4: DV_ROW(uint32_t)
    case 8: DV_ROW(uint64_t)
    case 24:
      for (int64_t i = 0; i < n; i++) {
        uint64_t t;
        dv__cp16(d + i * ds, s + i * ss);
        memcpy(&t, s + i * ss + 16, sizeof t);
        memcpy(d + i * ds + 16, &t, sizeof t);
      }
      return;
    default:
      /* Short rows of other widths (runs of a few elements): 16- or 8-byte
       * words and a typed tail, inline instead of a library call per row. */
      if (isz <= 256 && isz % 8 == 0) {
        size_t w16 = isz / 16, tail = isz % 16;
        for (int64_t i = 0; i < n; i++) {
          char *dd = d + i * ds;
          const char *sp = s + i * ss;
          for (size_t k = 0; k < w16; k++) dv__cp16(dd + 16 * k, sp + 16 * k);
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
  switch (isz) {
    case 1: DV_TILED(uint8_t)
    case 2: DV_TILED(uint16_t)
    case 4: DV_TILED(uint32_t)
    case 8: DV_TILED(uint64_t)
    default: DV_TILED(dv__u128) /* only 16 reaches here */
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
