/*
 * Host-memory gather/scatter over strided layouts.  Used by the host
 * simulator's stream workers (its "device" copies) and by the transfer
 * planner to pack and unpack host views through staging buffers.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#if (defined(__x86_64__) || (defined(__i386__) && defined(__SSE2__))) && \
    (defined(__GNUC__) || defined(__clang__))
#define DV_MEMOPS_X86 1
#include <immintrin.h>
#else
#define DV_MEMOPS_X86 0
#endif

#include "devarray.h" /* DV_MAXDIMS */
#include "memops.h"

/* One 16-byte word, as a register load and store (one 16-byte move on
 * x86-64: copied as a whole struct, not as two 8-byte halves). */
typedef struct {
  uint64_t a, b;
} dv__u128;
static inline void dv__cp16(char *d, const char *s) {
  dv__u128 v;
  memcpy(&v, s, sizeof v);
  memcpy(d, &v, sizeof v);
}

/* W bytes (a multiple of 16, constant at each use) as 16-byte words. */
#define DV_CPW(d, s, W)                                                           \
  do {                                                                            \
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
#define DV_ROWS_UNROLLED(W, U)                                                          \
  {                                                                                     \
    int64_t i = 0;                                                                      \
    for (; i + (U) <= n; i += (U))                                                      \
      for (int u_ = 0; u_ < (U); u_++) DV_CPW(d + (i + u_) * ds, s + (i + u_) * ss, W); \
    for (; i < n; i++) DV_CPW(d + i * ds, s + i * ss, W);                               \
    return;                                                                             \
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
__attribute__((target("avx2"))) static void dv__rows16_avx2(char *d, int64_t ds, const char *s,
                                                            int64_t ss, int64_t n, size_t w) {
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
    default: /* not reached: dv__rows16_width */ dv__rows16(d, ds, s, ss, n, w); return;
  }
#undef DV_LD16
#undef DV_LD32
#undef DV_ST16
#undef DV_ST32
#undef DV_PAIR
}

/* The AVX2 loops, the SSE2 transpose blocks and the streaming stores run
 * unless a test asked for the portable loops (dv__memops_portable); the
 * AVX2 loops also need the processor to have AVX2. */
static _Atomic int dv__portable_only;
static bool dv__use_simd(void) {
  return !atomic_load_explicit(&dv__portable_only, memory_order_relaxed);
}
static bool dv__use_avx2(void) { return dv__use_simd() && __builtin_cpu_supports("avx2"); }
bool dv__memops_portable(bool on) { return atomic_exchange(&dv__portable_only, on ? 1 : 0) != 0; }

/*
 * Streaming (non-temporal) stores for long copies of rows: a copy of at
 * least dv__stream_min bytes (default DV_STREAM_MIN) writes its destination
 * around the caches, a cache line at a time, rather than reading each line
 * in before writing it (what an ordinary store does), so that a gather or
 * scatter moves about the bytes memcpy moves.  Two layouts stream: a dense
 * destination (rows one after another, 16-byte aligned, rows of 8 bytes or
 * a multiple of 16), and rows of at least DV_STREAM_ROW bytes with any alignment,
 * whose whole cache lines stream and whose partial first and last lines are
 * ordinary stores (a line partly written around the caches costs more than
 * the read it saves: rows of 64 bytes 64-byte misaligned took 1.3x longer
 * streamed).  A store fence at the end orders the streamed lines before
 * what the caller publishes next (a stream's completion).  Shorter copies
 * stay in the caches for whoever reads them next.
 */
#define DV_STREAM_MIN ((size_t)8 << 20)
#define DV_STREAM_ROW 256
static _Atomic size_t dv__stream_min = DV_STREAM_MIN;
size_t dv__memops_stream_min(size_t bytes) { return atomic_exchange(&dv__stream_min, bytes); }

enum { DV_STREAM_NO, DV_STREAM_DENSE, DV_STREAM_LINES };
static int dv__stream_kind(const char *d, size_t dp, size_t dslice, size_t w, size_t h,
                           size_t depth) {
  if (!dv__use_simd() || h < 2) return DV_STREAM_NO;
  size_t rows, bytes; /* the rect's bytes exist, so no product overflows; checked anyway */
  if (!__builtin_mul_overflow(h, depth, &rows) && !__builtin_mul_overflow(rows, w, &bytes) &&
      bytes < atomic_load_explicit(&dv__stream_min, memory_order_relaxed))
    return DV_STREAM_NO;
  if (dp == w && (w % 16 == 0 || w == 8) && (uintptr_t)d % 16 == 0 &&
      (depth < 2 || dslice % 16 == 0))
    return DV_STREAM_DENSE;
  return w >= DV_STREAM_ROW ? DV_STREAM_LINES : DV_STREAM_NO;
}

/* Gathers of rows of 64 bytes and more prefetch the source row about 4 KiB
 * ahead (how many rows ahead: 0 for none): the processor's own prefetcher
 * stops at each page, which a gather leaves every few rows.  Rows of 1 KiB
 * from rows of 2 KiB took 1.2-1.4 times memcpy's time without, 1.05-1.13
 * with; rows of 64 bytes from rows of 128, 1.42-1.53 without and 1.24-1.36
 * with (docs/benchmarks.md, issue 39). */
static inline size_t dv__prefetch_rows(size_t sp, size_t w) {
  return w < 64 || sp <= w ? 0 : (4096 + sp - 1) / sp;
}
static inline void dv__prefetch(const char *row, size_t w) {
  for (size_t k = 0; k < w; k += 64) _mm_prefetch(row + k, _MM_HINT_T0);
}

static void dv__rows_stream_sse2(char *d, size_t dp, const char *s, size_t sp, size_t n, size_t w) {
  size_t ahead = dv__prefetch_rows(sp, w);
  for (size_t i = 0; i < n; i++) {
    char *q = d + i * dp;
    const char *r = s + i * sp;
    if (ahead && i + ahead < n) dv__prefetch(s + (i + ahead) * sp, w);
    for (size_t k = 0; k < w; k += 16)
      _mm_stream_si128((__m128i *)(void *)(q + k),
                       _mm_loadu_si128((const __m128i *)(const void *)(r + k)));
  }
}

/* 32-byte streams: the destination rows 32-byte aligned; rows of 16 bytes
 * into a dense destination two to a store. */
__attribute__((target("avx2"))) static void dv__rows_stream_avx2(char *d, size_t dp, const char *s,
                                                                 size_t sp, size_t n, size_t w) {
#define DV_LD16(p) _mm_loadu_si128((const __m128i *)(const void *)(p))
  if (w == 16) { /* dp == 16 */
    size_t i = 0;
    for (; i + 2 <= n; i += 2) {
      const char *r = s + i * sp;
      __m256i a = _mm256_inserti128_si256(_mm256_castsi128_si256(DV_LD16(r)), DV_LD16(r + sp), 1);
      _mm256_stream_si256((__m256i *)(void *)(d + i * 16), a);
    }
    if (i < n) _mm_stream_si128((__m128i *)(void *)(d + i * 16), DV_LD16(s + i * sp));
    return;
  }
  size_t ahead = dv__prefetch_rows(sp, w);
  for (size_t i = 0; i < n; i++) { /* w % 32 == 0 */
    char *q = d + i * dp;
    const char *r = s + i * sp;
    if (ahead && i + ahead < n) dv__prefetch(s + (i + ahead) * sp, w);
    for (size_t k = 0; k < w; k += 32)
      _mm256_stream_si256((__m256i *)(void *)(q + k),
                          _mm256_loadu_si256((const __m256i *)(const void *)(r + k)));
  }
#undef DV_LD16
}

/* Rows of at least DV_STREAM_ROW bytes, any alignment: each row's whole
 * lines streamed, its partial first and last lines copied plainly. */
static void dv__rows_stream_lines(char *d, size_t dp, const char *s, size_t sp, size_t n,
                                  size_t w) {
  size_t ahead = dv__prefetch_rows(sp, w);
  for (size_t i = 0; i < n; i++) {
    char *q = d + i * dp;
    const char *r = s + i * sp;
    if (ahead && i + ahead < n) dv__prefetch(s + (i + ahead) * sp, w);
    size_t head = (64 - (uintptr_t)q % 64) % 64, body = (w - head) / 64 * 64;
    memcpy(q, r, head);
    dv__rows_stream_sse2(q + head, 0, r + head, 0, 1, body);
    memcpy(q + head + body, r + head + body, w - head - body);
  }
}

/* Rows of 8 bytes into a dense destination, two to a 16-byte store (an
 * odd last row plainly). */
static void dv__rows_stream_pairs8(char *d, const char *s, size_t sp, size_t n) {
  size_t i = 0;
  for (; i + 2 <= n; i += 2) {
    __m128i a = _mm_loadl_epi64((const __m128i *)(const void *)(s + i * sp));
    __m128i b = _mm_loadl_epi64((const __m128i *)(const void *)(s + (i + 1) * sp));
    _mm_stream_si128((__m128i *)(void *)(d + i * 8), _mm_unpacklo_epi64(a, b));
  }
  if (i < n) memcpy(d + i * 8, s + i * sp, 8);
}

static void dv__rows_stream(int kind, char *d, size_t dp, const char *s, size_t sp, size_t n,
                            size_t w) {
  if (w == 8) /* dense */
    dv__rows_stream_pairs8(d, s, sp, n);
  else if (kind == DV_STREAM_LINES)
    dv__rows_stream_lines(d, dp, s, sp, n, w);
  else if (dv__use_avx2() && (uintptr_t)d % 32 == 0 && (w % 32 == 0 || w == 16))
    dv__rows_stream_avx2(d, dp, s, sp, n, w); /* dense: dp == w, so dp % 32 == 0 too (or w == 16) */
  else
    dv__rows_stream_sse2(d, dp, s, sp, n, w);
}

/*
 * Long streamed copies over two threads (issue 39): one core does not draw
 * the memory bandwidth a long gather or scatter needs (rows of 64 bytes from
 * rows of 128: 1.35x memcpy's time on one thread, 0.8x on two, on the
 * 2-core machine of docs/benchmarks.md).  A streamed rect copy of at least
 * dv__split_min bytes (16 MiB) is cut into chunks of whole rows (about an
 * eighth of it, at most 1 MiB each) that the caller and one helper thread,
 * made for the copy, take in turn; the caller joins it.  Where the thread
 * cannot be made, or one CPU is online, or dv__memops_threads(1) was set,
 * the caller copies alone: never an error.  Nothing here allocates.
 */
static _Atomic size_t dv__split_min = (size_t)16 << 20;
static _Atomic int dv__split_threads; /* 0: 2 where two CPUs are online; 1: never split */
static _Atomic uint64_t dv__splits;

size_t dv__memops_split_min(size_t bytes) { return atomic_exchange(&dv__split_min, bytes); }
int dv__memops_threads(int n) { return atomic_exchange(&dv__split_threads, n); }
uint64_t dv__memops_splits(void) { return atomic_load(&dv__splits); }

typedef struct {
  int kind;
  char *d;
  const char *s;
  size_t dp, dslice, sp, sslice, w, h, rows_per_chunk, per_slice, nchunks;
  _Atomic size_t next;
} dv__split_job;

/* Chunk c: rows [y, y + rows_per_chunk) of slice z (c = z * per_slice + y / rows_per_chunk). */
static void dv__split_chunk(const dv__split_job *j, size_t c) {
  size_t z = c / j->per_slice, y = (c % j->per_slice) * j->rows_per_chunk;
  size_t n = j->h - y < j->rows_per_chunk ? j->h - y : j->rows_per_chunk;
  dv__rows_stream(j->kind, j->d + z * j->dslice + y * j->dp, j->dp, j->s + z * j->sslice + y * j->sp,
                  j->sp, n, j->w);
}

static void dv__split_run(dv__split_job *j) {
  for (size_t c; (c = atomic_fetch_add(&j->next, 1)) < j->nchunks;) dv__split_chunk(j, c);
  _mm_sfence(); /* this thread's streamed lines, before the join publishes them */
}

static void *dv__split_helper(void *arg) {
  dv__split_run(arg);
  return NULL;
}

static bool dv__rect_split(int kind, char *d, size_t dp, size_t dslice, const char *s, size_t sp,
                           size_t sslice, size_t w, size_t h, size_t depth) {
  int threads = atomic_load_explicit(&dv__split_threads, memory_order_relaxed);
  static _Atomic long online; /* read once (glibc reads a file for it) */
  long cpus = atomic_load_explicit(&online, memory_order_relaxed);
  if (threads == 0 && !cpus) atomic_store(&online, cpus = sysconf(_SC_NPROCESSORS_ONLN));
  if (threads == 1 || (threads == 0 && cpus < 2)) return false;
  size_t rows = h * depth, bytes = rows * w; /* both exist as memory: no overflow */
  if (bytes < atomic_load_explicit(&dv__split_min, memory_order_relaxed) || rows < 2) return false;
  size_t chunk = bytes / 8 < ((size_t)1 << 20) ? bytes / 8 : ((size_t)1 << 20);
  size_t per = chunk / w ? chunk / w : 1;
  if (per > h) per = h; /* a chunk is whole rows of one slice */
  dv__split_job j = {.kind = kind, .d = d, .s = s, .dp = dp, .dslice = dslice, .sp = sp,
                     .sslice = sslice, .w = w, .h = h, .rows_per_chunk = per,
                     .per_slice = (h + per - 1) / per};
  j.nchunks = j.per_slice * depth;
  if (j.nchunks < 2) return false;
  atomic_init(&j.next, 0);
  pthread_t t;
  if (pthread_create(&t, NULL, dv__split_helper, &j)) return false;
  dv__split_run(&j);
  pthread_join(t, NULL);
  atomic_fetch_add_explicit(&dv__splits, 1, memory_order_relaxed);
  return true;
}
#else
bool dv__memops_portable(bool on) {
  (void)on;
  return true;
}
size_t dv__memops_stream_min(size_t bytes) {
  (void)bytes;
  return SIZE_MAX;
}
size_t dv__memops_split_min(size_t bytes) {
  (void)bytes;
  return SIZE_MAX;
}
int dv__memops_threads(int n) {
  (void)n;
  return 1;
}
uint64_t dv__memops_splits(void) { return 0; }
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
#define DV_ROW(T)                     \
  for (int64_t i = 0; i < n; i++) {   \
    T v;                              \
    memcpy(&v, s + i * ss, sizeof v); \
    memcpy(d + i * ds, &v, sizeof v); \
  }                                   \
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

/*
 * A transpose of m x n elements, element (i, j) at s + i*isz + j*sc (the
 * source dense along i) to d + i*dr + j*isz (the destination dense along
 * j), in tiles of DV_TILE_I x DV_TILE_J: a tile reads DV_TILE_J source
 * runs of 1 KiB and writes DV_TILE_I destination runs of DV_TILE_J
 * elements, so each source line, destination line and page is touched
 * once per tile, and the tile's source (32 KiB) stays in L1 while it is
 * read down its columns.  Square 32 x 32 tiles took 1.6-1.8 times as long
 * on 4096 x 4096 float32 (docs/benchmarks.md, issue 39): each tile read 32
 * pages for 128 bytes of each.  Elements of 4 and 8 bytes go through 4 x 4
 * and 2 x 2 blocks transposed in SSE2 registers (x86), the others (and the
 * tiles' edges) one element at a time.
 */
#define DV_TILE 32 /* the fewest elements along either side for a tiled copy: half of this */
#define DV_TILE_J 32
#define DV_TILE_BYTES_I 1024
#define DV_TILED_ELEM(T, i, j)                                     \
  do {                                                             \
    T v_;                                                          \
    memcpy(&v_, s + (i) * (int64_t)sizeof(T) + (j)*sc, sizeof v_); \
    memcpy(d + (i)*dr + (j) * (int64_t)sizeof(T), &v_, sizeof v_); \
  } while (0)
/* One tile [i0, i1) x [j0, j1): K x K blocks by BLK (K = 1: one element), then the edges. */
#define DV_TILE_BODY(T, K, BLK)                                               \
  {                                                                           \
    int64_t ib = i0 + (i1 - i0) / (K) * (K), jb = j0 + (j1 - j0) / (K) * (K); \
    for (int64_t i = i0; i < ib; i += (K)) {                                  \
      for (int64_t j = j0; j < jb; j += (K)) BLK;                             \
      for (int64_t j = jb; j < j1; j++)                                       \
        for (int64_t u = i; u < i + (K); u++) DV_TILED_ELEM(T, u, j);         \
    }                                                                         \
    for (int64_t i = ib; i < i1; i++)                                         \
      for (int64_t j = j0; j < j1; j++) DV_TILED_ELEM(T, i, j);               \
  }
#define DV_TILES(T, K, BLK)                                 \
  for (int64_t i0 = 0; i0 < m; i0 += ti) {                  \
    int64_t i1 = i0 + ti < m ? i0 + ti : m;                 \
    for (int64_t j0 = 0; j0 < n; j0 += DV_TILE_J) {         \
      int64_t j1 = j0 + DV_TILE_J < n ? j0 + DV_TILE_J : n; \
      DV_TILE_BODY(T, K, BLK)                               \
    }                                                       \
  }                                                         \
  return;

#if DV_MEMOPS_X86
#define DV_LDI(p) _mm_loadu_si128((const __m128i *)(const void *)(p))
#define DV_STI(p, v) _mm_storeu_si128((__m128i *)(void *)(p), v)
/* Elements (i..i+3, j..j+3) of 4 bytes: four source runs in, four
 * destination runs out. */
static inline void dv__tr4x4(char *d, int64_t dr, const char *s, int64_t sc) {
  __m128i r0 = DV_LDI(s), r1 = DV_LDI(s + sc), r2 = DV_LDI(s + 2 * sc), r3 = DV_LDI(s + 3 * sc);
  __m128i t0 = _mm_unpacklo_epi32(r0, r1), t1 = _mm_unpacklo_epi32(r2, r3);
  __m128i t2 = _mm_unpackhi_epi32(r0, r1), t3 = _mm_unpackhi_epi32(r2, r3);
  DV_STI(d, _mm_unpacklo_epi64(t0, t1));
  DV_STI(d + dr, _mm_unpackhi_epi64(t0, t1));
  DV_STI(d + 2 * dr, _mm_unpacklo_epi64(t2, t3));
  DV_STI(d + 3 * dr, _mm_unpackhi_epi64(t2, t3));
}
/* Elements (i..i+1, j..j+1) of 8 bytes. */
static inline void dv__tr2x2(char *d, int64_t dr, const char *s, int64_t sc) {
  __m128i r0 = DV_LDI(s), r1 = DV_LDI(s + sc);
  DV_STI(d, _mm_unpacklo_epi64(r0, r1));
  DV_STI(d + dr, _mm_unpackhi_epi64(r0, r1));
}
#undef DV_LDI
#undef DV_STI
#endif

static void dv__transpose(char *d, int64_t dr, const char *s, int64_t sc, int64_t m, int64_t n,
                          size_t isz) {
  int64_t ti = DV_TILE_BYTES_I / (int64_t)isz;
#if DV_MEMOPS_X86
  if (dv__use_simd()) {
    if (isz == 4) {
      DV_TILES(uint32_t, 4, dv__tr4x4(d + i * dr + j * 4, dr, s + i * 4 + j * sc, sc))
    }
    if (isz == 8) {
      DV_TILES(uint64_t, 2, dv__tr2x2(d + i * dr + j * 8, dr, s + i * 8 + j * sc, sc))
    }
  }
#endif
  switch (isz) {
    case 1: DV_TILES(uint8_t, 1, DV_TILED_ELEM(uint8_t, i, j))
    case 2: DV_TILES(uint16_t, 1, DV_TILED_ELEM(uint16_t, i, j))
    case 4: DV_TILES(uint32_t, 1, DV_TILED_ELEM(uint32_t, i, j))
    case 8: DV_TILES(uint64_t, 1, DV_TILED_ELEM(uint64_t, i, j))
    default: DV_TILES(dv__u128, 1, DV_TILED_ELEM(dv__u128, i, j)) /* only 16 reaches here */
  }
}
#undef DV_TILES
#undef DV_TILE_BODY
#undef DV_TILED_ELEM

/* A 2-D copy of nr x nc elements, element (i, j) at s + i*sr + j*sc and
 * d + i*dr + j*dc, one side dense along i and the other along j
 * (dv__is_transpose): dv__transpose with i and j named so that the
 * destination is the one dense along j. */
static void dv__tiled(char *d, int64_t dr, int64_t dc, const char *s, int64_t sr, int64_t sc,
                      int64_t nr, int64_t nc, size_t isz) {
  if (dc == (int64_t)isz && sr == (int64_t)isz)
    dv__transpose(d, dr, s, sc, nr, nc, isz);
  else /* sc == isz && dr == isz */
    dv__transpose(d, dc, s, sr, nc, nr, isz);
}

/* The last two dimensions form a transpose: one side dense along the last,
 * the other dense along the one before it, both long enough to tile. */
static bool dv__is_transpose(const int64_t *dst_strides, const int64_t *src_strides,
                             const int64_t *shape, int nd, size_t itemsize) {
  if (nd < 2 ||
      !(itemsize == 1 || itemsize == 2 || itemsize == 4 || itemsize == 8 || itemsize == 16))
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
#if DV_MEMOPS_X86
  /* Long copies of rows, other than one dense range into another (which may
   * overlap: dv__row's memmove), with streaming stores. */
  int kind = dpitch == width && spitch == width
                 ? DV_STREAM_NO
                 : dv__stream_kind(dst, dpitch, dslice, width, height, depth);
  if (kind != DV_STREAM_NO) {
    if (dv__rect_split(kind, dst, dpitch, dslice, src, spitch, sslice, width, height, depth)) return;
    for (size_t z = 0; z < depth; z++)
      dv__rows_stream(kind, (char *)dst + z * dslice, dpitch, (const char *)src + z * sslice,
                      spitch, height, width);
    _mm_sfence();
    return;
  }
#endif
  /* Each slice is `height` elements of `width` bytes: the same row kernel as
   * strided copies (typed loads for narrow widths, memmove for wide ones). */
  for (size_t z = 0; z < depth; z++)
    dv__row((char *)dst + z * dslice, (int64_t)dpitch, (const char *)src + z * sslice,
            (int64_t)spitch, (int64_t)height, width);
}
