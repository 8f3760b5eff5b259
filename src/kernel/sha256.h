/* SHA-256 (FIPS 180-4).  Placeholder interface; the implementation lands with the cache. */
#ifndef DV_SHA256_H
#define DV_SHA256_H
#include <stddef.h>
#include <stdint.h>
typedef struct dv__sha256_ctx {
  uint32_t h[8];
  uint64_t len;
  uint8_t buf[64];
  size_t fill;
} dv__sha256_ctx;
void dv__sha256_init(dv__sha256_ctx *c);
void dv__sha256_update(dv__sha256_ctx *c, const void *data, size_t n);
void dv__sha256_final(dv__sha256_ctx *c, uint8_t out[32]);
#endif
