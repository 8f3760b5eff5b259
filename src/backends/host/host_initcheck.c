/*
 * initcheck (issue 24): a read of shared memory none of whose bytes a thread
 * of the block has written since the block began (a read of some written
 * bytes is not reported: struct padding is read by every whole-struct copy).  One bit per byte of the block's shared
 * arena, cleared when a block starts.
 */
#include <string.h>

#include "../../core/core.h"
#include "host_check.h"

struct hk_init {
  size_t bytes;
  unsigned char bits[]; /* bit b of byte b / 8: byte b written */
};

hk_init *hk_init_new(size_t bytes) {
  hk_init *s = dv__malloc(sizeof *s + (bytes + 7) / 8);
  if (!s) return NULL;
  s->bytes = bytes;
  hk_init_block(s);
  return s;
}

void hk_init_free(hk_init *s) { dv__free(s); }

void hk_init_block(hk_init *s) { memset(s->bits, 0, (s->bytes + 7) / 8); }

void hk_init_write(hk_init *s, size_t off, size_t n) {
  if (off >= s->bytes) return;
  if (n > s->bytes - off) n = s->bytes - off;
  for (size_t b = off; b < off + n; b++) s->bits[b >> 3] |= (unsigned char)(1u << (b & 7));
}

bool hk_init_read(const hk_init *s, size_t off, size_t n, size_t *first) {
  if (off >= s->bytes) return false;
  if (n > s->bytes - off) n = s->bytes - off;
  for (size_t b = off; b < off + n; b++)
    if (s->bits[b >> 3] & (1u << (b & 7))) return false;
  if (first) *first = off;
  return n > 0;
}
