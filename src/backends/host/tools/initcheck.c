/*
 * initcheck (issue 24): a read of shared memory none of whose bytes a thread
 * of the block has written since the block began (a read of some written
 * bytes is not reported: struct padding is read by every whole-struct copy).
 * One bit per byte of the block's shared arena, in 64-bit words (an access
 * tests or sets a mask), cleared when a block starts.
 */
#include <string.h>

#include "../../../core/core.h"
#include "check.h"

hk_init *hk_init_new(size_t bytes) {
  if (bytes > SIZE_MAX - 64) return NULL;
  hk_init *s = dv__malloc(sizeof *s + (bytes + 63) / 64 * sizeof *s->bits);
  if (!s) return NULL;
  s->bytes = bytes;
  hk_init_block(s);
  return s;
}

void hk_init_free(hk_init *s) { dv__free(s); }

void hk_init_block(hk_init *s) { memset(s->bits, 0, (s->bytes + 63) / 64 * sizeof *s->bits); }

/* The bits of bytes [lo, hi) of a word of bits (0 <= lo < hi <= 64). */
static inline uint64_t hk_init_mask(size_t lo, size_t hi) {
  return (hi - lo == 64 ? ~UINT64_C(0) : ((UINT64_C(1) << (hi - lo)) - 1)) << lo;
}

/* A range across words (or longer than one): [off, off + n), clipped. */
static void hk_init_write_words(hk_init *s, size_t off, size_t n) {
  if (off >= s->bytes) return;
  if (n > s->bytes - off) n = s->bytes - off;
  for (size_t b = off, end = off + n; b < end;) {
    size_t w = b >> 6, lo = b & 63, hi = end - (w << 6) < 64 ? end - (w << 6) : 64;
    s->bits[w] |= hk_init_mask(lo, hi);
    b = (w << 6) + hi;
  }
}

static bool hk_init_read_words(const hk_init *s, size_t off, size_t n, size_t *first) {
  if (off >= s->bytes) return false;
  if (n > s->bytes - off) n = s->bytes - off;
  for (size_t b = off, end = off + n; b < end;) {
    size_t w = b >> 6, lo = b & 63, hi = end - (w << 6) < 64 ? end - (w << 6) : 64;
    if (s->bits[w] & hk_init_mask(lo, hi)) return false;
    b = (w << 6) + hi;
  }
  if (first) *first = off;
  return n > 0;
}

void hk_init_write(hk_init *s, size_t off, size_t n) {
  if (hk_init_small(s, off, n))
    s->bits[off >> 6] |= hk_init_bits(off, n);
  else
    hk_init_write_words(s, off, n);
}

bool hk_init_read(const hk_init *s, size_t off, size_t n, size_t *first) {
  if (!hk_init_small(s, off, n)) return hk_init_read_words(s, off, n, first);
  if (s->bits[off >> 6] & hk_init_bits(off, n)) return false;
  if (first) *first = off;
  return true;
}
