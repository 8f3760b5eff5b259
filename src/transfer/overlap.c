/*
 * Whether two strided views of the same memory share a byte.
 *
 * The bounding boxes of their bytes decide most cases at once.  When the
 * boxes meet, the question is exact and bounded: element starts of one view
 * are lo1 + sum |s_k| x_k (0 <= x_k < n_k), those of the other, counted from
 * its top, hi2 - itemsize - sum |t_k| y_k, and a byte is shared when
 *
 *     sum |s_k| x_k + sum |t_k| y_k + u + v = hi2 - 1 - lo1,  0 <= u, v < itemsize
 *
 * has a solution: a linear Diophantine equation with positive coefficients
 * and bounded unknowns (the formulation of NumPy's mem_overlap.c, after
 * Pugh's analysis of array dependences).  It is solved by depth-first
 * search, largest coefficient first, with two prunings: the remaining terms
 * can only reach [0, their maximum] and only multiples of their gcd, so each
 * unknown runs over one residue class inside a window.  Layouts that come
 * from slicing solve in a handful of steps; a work limit stops contrived
 * ones, and the caller then copies through a temporary, which is right
 * either way.
 */
#include <stdlib.h>

#include "transfer.h"

_Atomic int64_t dv__overlap_max_work = 1 << 14;

/* Products of two values below 2^63, reduced modulo one of them, need 128
 * bits (a GNU C extension that GCC and Clang share). */
__extension__ typedef __int128 dv_i128;

typedef struct dv_term {
  int64_t a, ub; /* coefficient (> 0) and bound of its unknown (>= 1) */
} dv_term;

typedef struct dv_search {
  const dv_term *t;
  int m;
  int64_t rest[2 * DV_MAXDIMS + 2]; /* rest[i]: the most terms i+1.. can add */
  int64_t g[2 * DV_MAXDIMS + 2];    /* g[i]: gcd of the coefficients of terms i+1.. */
  int64_t work, max_work;
} dv_search;

static int64_t dv__gcd(int64_t a, int64_t b) {
  while (b) {
    int64_t r = a % b;
    a = b;
    b = r;
  }
  return a;
}

/* The inverse of a modulo m (gcd(a, m) == 1, m >= 1), by extended Euclid;
 * 128-bit intermediates because m may be close to 2^63. */
static int64_t dv__inverse(int64_t a, int64_t m) {
  dv_i128 t = 0, nt = 1, r = m, nr = a % m;
  while (nr != 0) {
    dv_i128 q = r / nr, x = t - q * nt;
    t = nt, nt = x;
    x = r - q * nr;
    r = nr, nr = x;
  }
  if (t < 0) t += m;
  return (int64_t)t;
}

/* Is sum_{k >= i} a_k x_k == r solvable?  1 yes, 0 no, -1 out of work. */
static int dv__solve(dv_search *s, int i, int64_t r) {
  if (++s->work > s->max_work) return -1;
  const dv_term *t = &s->t[i];
  if (i == s->m - 1) return r % t->a == 0 && r / t->a <= t->ub;
  int64_t hi = r / t->a, lo = 0;
  if (hi > t->ub) hi = t->ub;
  if (r > s->rest[i]) lo = (r - s->rest[i] + t->a - 1) / t->a;
  if (lo > hi) return 0;
  /* The remaining terms make multiples of G only: a x == r (mod G), so x
   * runs over one residue class modulo G / gcd(a, G). */
  int64_t G = s->g[i], d = dv__gcd(t->a % G, G);
  if (r % d != 0) return 0;
  int64_t M = G / d, x0 = 0;
  if (M > 1) x0 = (int64_t)((dv_i128)((r / d) % M) * dv__inverse((t->a / d) % M, M) % M);
  int64_t x = hi - ((hi - x0) % M + M) % M; /* the largest x <= hi in the class */
  for (; x >= lo; x -= M) {
    int res = dv__solve(s, i + 1, r - t->a * x);
    if (res) return res;
  }
  return 0;
}

static int dv__term_cmp(const void *x, const void *y) {
  const dv_term *a = x, *b = y;
  return a->a < b->a ? 1 : a->a > b->a ? -1 : 0;
}

dv_overlap dv__overlap(int nd, const int64_t *n, int64_t a0, const int64_t *as, int64_t b0,
                       const int64_t *bs, int64_t itemsize) {
  /* Byte ranges [lo, hi) of both views; they lie inside one allocation, so
   * nothing here overflows. */
  int64_t alo = a0, ahi = a0 + itemsize, blo = b0, bhi = b0 + itemsize;
  for (int k = 0; k < nd; k++) {
    if (n[k] == 0) return DV_OVERLAP_NO;
    int64_t ea = (n[k] - 1) * as[k], eb = (n[k] - 1) * bs[k];
    if (ea < 0) alo += ea; else ahi += ea;
    if (eb < 0) blo += eb; else bhi += eb;
  }
  if (ahi <= blo || bhi <= alo) return DV_OVERLAP_NO;
  int64_t rhs = bhi - 1 - alo, rhs2 = ahi - 1 - blo;
  if (rhs2 < rhs) rhs = rhs2;
  /* The terms: one per dimension and view, plus the two byte offsets inside
   * an element; bounds clamped to rhs / a, equal coefficients merged. */
  dv_term t[2 * DV_MAXDIMS + 2];
  int m = 0;
  for (int k = 0; k < nd; k++) {
    if (n[k] < 2) continue;
    if (as[k]) t[m++] = (dv_term){as[k] < 0 ? -as[k] : as[k], n[k] - 1};
    if (bs[k]) t[m++] = (dv_term){bs[k] < 0 ? -bs[k] : bs[k], n[k] - 1};
  }
  if (itemsize > 1) t[m++] = (dv_term){1, 2 * (itemsize - 1)};
  qsort(t, (size_t)m, sizeof t[0], dv__term_cmp);
  int w = 0;
  for (int k = 0; k < m; k++) {
    int64_t cap = rhs / t[k].a, ub = t[k].ub < cap ? t[k].ub : cap;
    if (ub == 0) continue;
    if (w > 0 && t[w - 1].a == t[k].a) {
      t[w - 1].ub = t[w - 1].ub > cap - ub ? cap : t[w - 1].ub + ub;
      continue;
    }
    t[w++] = (dv_term){t[k].a, ub};
  }
  if (w == 0) return rhs == 0 ? DV_OVERLAP_YES : DV_OVERLAP_NO;
  dv_search s = {.t = t, .m = w, .max_work = atomic_load(&dv__overlap_max_work)};
  s.rest[w - 1] = 0;
  s.g[w - 1] = 0;
  for (int k = w - 2; k >= 0; k--) {
    int64_t add = t[k + 1].a * t[k + 1].ub; /* <= rhs: bounds were clamped */
    s.rest[k] = s.rest[k + 1] > INT64_MAX - add ? INT64_MAX : s.rest[k + 1] + add;
    s.g[k] = dv__gcd(t[k + 1].a, s.g[k + 1]);
  }
  int res = dv__solve(&s, 0, rhs);
  return res < 0 ? DV_OVERLAP_UNKNOWN : res ? DV_OVERLAP_YES : DV_OVERLAP_NO;
}
