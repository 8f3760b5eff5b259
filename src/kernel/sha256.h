/*
 * SHA-256 (FIPS 180-4), written from the specification: the hash that names
 * compiled-module cache entries and checks their payloads.  Incremental
 * (init, update any number of times, final) and one-shot.  No allocation, no
 * global state: every function is thread-safe on distinct contexts.
 */
#ifndef DV_KERNEL_SHA256_H
#define DV_KERNEL_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define DV__SHA256_SIZE 32  /* bytes in a digest */
#define DV__SHA256_HEX 65   /* chars in its hex form, with the terminating NUL */

typedef struct dv__sha256_ctx {
  uint32_t h[8];       /* the intermediate hash value H(i) */
  uint64_t bytes;      /* message length so far, in bytes */
  uint8_t block[64];   /* the message block being filled */
  size_t fill;         /* bytes in block (< 64 between calls) */
} dv__sha256_ctx;

/* Start a hash. */
void dv__sha256_init(dv__sha256_ctx *s);
/* Feed n bytes (data may be NULL when n is 0). */
void dv__sha256_update(dv__sha256_ctx *s, const void *data, size_t n);
/*
 * Feed one field of a composite key: its length as 8 little-endian bytes,
 * then its bytes.  Fields fed this way cannot run into each other ("ab","c"
 * and "a","bc" hash differently), which plain concatenation does not
 * guarantee.  data may be NULL when n is 0.
 */
void dv__sha256_field(dv__sha256_ctx *s, const void *data, size_t n);
/* Finish: write the 32-byte digest.  s must be initialised again before reuse. */
void dv__sha256_final(dv__sha256_ctx *s, uint8_t digest[DV__SHA256_SIZE]);
/* One-shot digest of n bytes. */
void dv__sha256(const void *data, size_t n, uint8_t digest[DV__SHA256_SIZE]);
/* A digest as 64 lowercase hex digits and a NUL. */
void dv__sha256_hex(const uint8_t digest[DV__SHA256_SIZE], char hex[DV__SHA256_HEX]);

#endif
