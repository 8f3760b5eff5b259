/*
 * IEEE binary16 (float16) conversions on the host: dv_half_from_float
 * rounds to nearest, ties to even, as NumPy's float32 -> float16 does (NaN
 * keeps its sign and the top ten payload bits, and stays NaN when none of
 * them is set); dv_half_to_float is exact.  The kernel dialect's
 * dv_f32_to_f16 / dv_f16_to_f32 give the same bits on every backend.
 */
#include <string.h>

#include "core.h"

uint16_t dv_half_from_float(float f) {
  uint32_t x;
  memcpy(&x, &f, sizeof x);
  uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
  uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) { /* infinity, NaN */
    if (ax == 0x7f800000u) return sign | 0x7c00u;
    uint16_t h = (uint16_t)(0x7c00u | ((ax & 0x7fffffu) >> 13));
    return sign | (h == 0x7c00u ? 0x7c01u : h);
  }
  if (ax >= 0x47800000u) return sign | 0x7c00u; /* 2^16 and up: past the largest finite */
  if (ax < 0x33000000u) return sign;             /* below half the smallest subnormal */
  int he = (int)(ax >> 23) - 112;                 /* the half's biased exponent */
  uint32_t m = (ax & 0x7fffffu) | 0x800000u;     /* 24 significant bits */
  int shift = he >= 1 ? 13 : 14 - he;            /* 13 .. 24 bits dropped */
  uint32_t keep = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1);
  if (rem > half || (rem == half && (keep & 1u))) keep++;
  /* Normal: the implicit bit of keep adds one to the exponent field, and a
   * carry out of the significand moves it on (to infinity past 65504).
   * Subnormal: keep is the field (0x400 is the smallest normal). */
  return sign | (uint16_t)(he >= 1 ? ((uint32_t)(he - 1) << 10) + keep : keep);
}

float dv_half_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, x;
  if (e == 0x1f) {
    x = sign | 0x7f800000u | (m << 13);
  } else if (e) {
    x = sign | ((e + 112u) << 23) | (m << 13);
  } else if (!m) {
    x = sign;
  } else { /* subnormal: m * 2^-24, normalised */
    uint32_t s = 0;
    while (!(m & 0x400u)) m <<= 1, s++;
    x = sign | ((113u - s) << 23) | ((m & 0x3ffu) << 13);
  }
  float f;
  memcpy(&f, &x, sizeof f);
  return f;
}
