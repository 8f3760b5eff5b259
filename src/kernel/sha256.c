/*
 * SHA-256 from FIPS 180-4 (August 2015).  Section numbers in the comments
 * refer to that document.  Written for clarity over speed: the cache hashes
 * kernel sources and compiled modules of a few hundred KiB at most, once per
 * build, next to a compile that takes milliseconds to seconds.
 */
#include "sha256.h"

#include <string.h>

/* 4.2.2: the first 32 bits of the fractional parts of the cube roots of the
 * first 64 primes. */
static const uint32_t K[64] = {
    0x428a2f98u, 0x71374491u, 0xb5c0fbcfu, 0xe9b5dba5u, 0x3956c25bu, 0x59f111f1u, 0x923f82a4u,
    0xab1c5ed5u, 0xd807aa98u, 0x12835b01u, 0x243185beu, 0x550c7dc3u, 0x72be5d74u, 0x80deb1feu,
    0x9bdc06a7u, 0xc19bf174u, 0xe49b69c1u, 0xefbe4786u, 0x0fc19dc6u, 0x240ca1ccu, 0x2de92c6fu,
    0x4a7484aau, 0x5cb0a9dcu, 0x76f988dau, 0x983e5152u, 0xa831c66du, 0xb00327c8u, 0xbf597fc7u,
    0xc6e00bf3u, 0xd5a79147u, 0x06ca6351u, 0x14292967u, 0x27b70a85u, 0x2e1b2138u, 0x4d2c6dfcu,
    0x53380d13u, 0x650a7354u, 0x766a0abbu, 0x81c2c92eu, 0x92722c85u, 0xa2bfe8a1u, 0xa81a664bu,
    0xc24b8b70u, 0xc76c51a3u, 0xd192e819u, 0xd6990624u, 0xf40e3585u, 0x106aa070u, 0x19a4c116u,
    0x1e376c08u, 0x2748774cu, 0x34b0bcb5u, 0x391c0cb3u, 0x4ed8aa4au, 0x5b9cca4fu, 0x682e6ff3u,
    0x748f82eeu, 0x78a5636fu, 0x84c87814u, 0x8cc70208u, 0x90befffau, 0xa4506cebu, 0xbef9a3f7u,
    0xc67178f2u};

/* 3.2 ROTR^n and 4.1.2 the six logical functions. */
static inline uint32_t rotr(uint32_t x, unsigned n) { return (x >> n) | (x << (32u - n)); }
static inline uint32_t ch(uint32_t x, uint32_t y, uint32_t z) { return (x & y) ^ (~x & z); }
static inline uint32_t maj(uint32_t x, uint32_t y, uint32_t z) { return (x & y) ^ (x & z) ^ (y & z); }
static inline uint32_t big_sigma0(uint32_t x) { return rotr(x, 2) ^ rotr(x, 13) ^ rotr(x, 22); }
static inline uint32_t big_sigma1(uint32_t x) { return rotr(x, 6) ^ rotr(x, 11) ^ rotr(x, 25); }
static inline uint32_t small_sigma0(uint32_t x) { return rotr(x, 7) ^ rotr(x, 18) ^ (x >> 3); }
static inline uint32_t small_sigma1(uint32_t x) { return rotr(x, 17) ^ rotr(x, 19) ^ (x >> 10); }

/* 6.2.2: process one 512-bit block.  Words are big-endian (3.1), read byte
 * by byte so that neither the host's byte order nor alignment matters. */
static void compress(uint32_t h[8], const uint8_t m[64]) {
  uint32_t w[64];
  for (int t = 0; t < 16; t++)
    w[t] = (uint32_t)m[4 * t] << 24 | (uint32_t)m[4 * t + 1] << 16 | (uint32_t)m[4 * t + 2] << 8 |
           (uint32_t)m[4 * t + 3];
  for (int t = 16; t < 64; t++)
    w[t] = small_sigma1(w[t - 2]) + w[t - 7] + small_sigma0(w[t - 15]) + w[t - 16];
  uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
  for (int t = 0; t < 64; t++) {
    uint32_t t1 = hh + big_sigma1(e) + ch(e, f, g) + K[t] + w[t];
    uint32_t t2 = big_sigma0(a) + maj(a, b, c);
    hh = g;
    g = f;
    f = e;
    e = d + t1;
    d = c;
    c = b;
    b = a;
    a = t1 + t2;
  }
  h[0] += a;
  h[1] += b;
  h[2] += c;
  h[3] += d;
  h[4] += e;
  h[5] += f;
  h[6] += g;
  h[7] += hh;
}

void dv__sha256_init(dv__sha256_ctx *s) {
  /* 5.3.3: the first 32 bits of the fractional parts of the square roots of
   * the first 8 primes. */
  static const uint32_t h0[8] = {0x6a09e667u, 0xbb67ae85u, 0x3c6ef372u, 0xa54ff53au,
                                 0x510e527fu, 0x9b05688cu, 0x1f83d9abu, 0x5be0cd19u};
  memcpy(s->h, h0, sizeof h0);
  s->bytes = 0;
  s->fill = 0;
}

void dv__sha256_update(dv__sha256_ctx *s, const void *data, size_t n) {
  if (n == 0) return; /* data may be NULL then, which memcpy must not see */
  const uint8_t *p = data;
  s->bytes += n;
  if (s->fill) {
    size_t take = 64 - s->fill < n ? 64 - s->fill : n;
    memcpy(s->block + s->fill, p, take);
    s->fill += take;
    p += take;
    n -= take;
    if (s->fill < 64) return;
    compress(s->h, s->block);
    s->fill = 0;
  }
  for (; n >= 64; p += 64, n -= 64) compress(s->h, p);
  if (n) memcpy(s->block, p, n);
  s->fill = n;
}

void dv__sha256_field(dv__sha256_ctx *s, const void *data, size_t n) {
  uint8_t len[8];
  uint64_t v = (uint64_t)n;
  for (int i = 0; i < 8; i++) len[i] = (uint8_t)(v >> (8 * i));
  dv__sha256_update(s, len, sizeof len);
  dv__sha256_update(s, data, n);
}

void dv__sha256_final(dv__sha256_ctx *s, uint8_t digest[DV__SHA256_SIZE]) {
  /* 5.1.1: append the bit 1, then zeros up to 56 mod 64 bytes, then the
   * message length in bits as a 64-bit big-endian integer.  The message is
   * < 2^61 bytes in practice, so the length in bits fits in 64 bits. */
  uint64_t bits = s->bytes * 8u;
  s->block[s->fill++] = 0x80;
  if (s->fill > 56) {
    memset(s->block + s->fill, 0, 64 - s->fill);
    compress(s->h, s->block);
    s->fill = 0;
  }
  memset(s->block + s->fill, 0, 56 - s->fill);
  for (int i = 0; i < 8; i++) s->block[56 + i] = (uint8_t)(bits >> (56 - 8 * i));
  compress(s->h, s->block);
  /* 6.2.2 step 4: H(N) is the digest, each word big-endian. */
  for (int i = 0; i < 8; i++) {
    digest[4 * i] = (uint8_t)(s->h[i] >> 24);
    digest[4 * i + 1] = (uint8_t)(s->h[i] >> 16);
    digest[4 * i + 2] = (uint8_t)(s->h[i] >> 8);
    digest[4 * i + 3] = (uint8_t)s->h[i];
  }
  /* Nothing of the message stays behind in the context. */
  memset(s->block, 0, sizeof s->block);
  s->fill = 0;
}

void dv__sha256(const void *data, size_t n, uint8_t digest[DV__SHA256_SIZE]) {
  dv__sha256_ctx s;
  dv__sha256_init(&s);
  dv__sha256_update(&s, data, n);
  dv__sha256_final(&s, digest);
}

void dv__sha256_hex(const uint8_t digest[DV__SHA256_SIZE], char hex[DV__SHA256_HEX]) {
  static const char digits[] = "0123456789abcdef";
  for (int i = 0; i < DV__SHA256_SIZE; i++) {
    hex[2 * i] = digits[digest[i] >> 4];
    hex[2 * i + 1] = digits[digest[i] & 15];
  }
  hex[2 * DV__SHA256_SIZE] = 0;
}
