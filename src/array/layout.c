/*
 * Layout: pure functions over (ndim, shape, strides, itemsize).  No memory,
 * no context; every size, extent and offset is overflow-checked.  The rules
 * are NumPy's (relaxed contiguity, the no-copy reshape rule, Python slices).
 */
#include <string.h>

#include "array.h"

/* The product of the non-zero extents must fit int64_t even when another
 * extent is 0 (NumPy's rule): dv_array_size multiplies left to right, so
 * {INT64_MAX - 53, 7, 0} would overflow before it reaches the 0. */
dv_status dv__layout_size(int ndim, const int64_t *shape, int64_t *size) {
  int64_t n = 1;
  bool zero = false;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] < 0) return dv__error(DV_ERR_BAD_SHAPE, "negative extent %lld in dimension %d", (long long)shape[i], i);
    if (shape[i] == 0) zero = true;
  }
  for (int i = 0; i < ndim; i++)
    if (shape[i] != 0 && dv__mul_overflow(n, shape[i], &n))
      return dv__error(DV_ERR_OVERFLOW, zero ? "the shape's non-zero extents multiply past 64 bits"
                                             : "the shape's element count overflows 64 bits");
  *size = zero ? 0 : n;
  return DV_OK;
}

dv_status dv__layout_extent(int ndim, const int64_t *shape, const int64_t *strides,
                            int64_t itemsize, int64_t *lo, int64_t *hi) {
  int64_t l = 0, h = itemsize, e;
  for (int i = 0; i < ndim; i++)
    if (shape[i] == 0) {
      *lo = *hi = 0;
      return DV_OK;
    }
  for (int i = 0; i < ndim; i++) {
    if (dv__mul_overflow(shape[i] - 1, strides[i], &e))
      return dv__error(DV_ERR_OVERFLOW, "extent of dimension %d overflows", i);
    if (e < 0 ? dv__add_overflow(l, e, &l) : dv__add_overflow(h, e, &h))
      return dv__error(DV_ERR_OVERFLOW, "the array's byte extent overflows");
  }
  *lo = l;
  *hi = h;
  return DV_OK;
}

static bool dv__has_zero(int ndim, const int64_t *shape) {
  for (int i = 0; i < ndim; i++)
    if (shape[i] == 0) return true;
  return false;
}

bool dv__layout_is_c(int ndim, const int64_t *shape, const int64_t *strides, int64_t itemsize) {
  if (dv__has_zero(ndim, shape)) return true;
  int64_t expect = itemsize;
  for (int i = ndim - 1; i >= 0; i--) {
    if (shape[i] == 1) continue;
    if (strides[i] != expect) return false;
    expect *= shape[i];
  }
  return true;
}

bool dv__layout_is_f(int ndim, const int64_t *shape, const int64_t *strides, int64_t itemsize) {
  if (dv__has_zero(ndim, shape)) return true;
  int64_t expect = itemsize;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] == 1) continue;
    if (strides[i] != expect) return false;
    expect *= shape[i];
  }
  return true;
}

dv_status dv__layout_dense(int ndim, const int64_t *shape, int64_t itemsize, char order,
                           int64_t *strides) {
  int64_t s = itemsize;
  /* Dense strides past a zero extent do not matter, but must not overflow. */
  for (int k = 0; k < ndim; k++) {
    int i = order == 'F' ? k : ndim - 1 - k;
    strides[i] = s;
    int64_t ext = shape[i] > 0 ? shape[i] : 1;
    if (dv__mul_overflow(s, ext, &s))
      return dv__error(DV_ERR_OVERFLOW, "the array's byte size overflows");
  }
  return DV_OK;
}

void dv__layout_like(int ndim, const int64_t *shape, const int64_t *like, int64_t itemsize,
                     int64_t *strides) {
  /* Numba's rule (after NumPy's PyArray_NewLikeArrayWithShape): sort the
   * dimensions by increasing signed stride (stable); the smallest becomes
   * the innermost of a dense layout. */
  int perm[DV_MAXDIMS];
  for (int i = 0; i < ndim; i++) perm[i] = i;
  for (int i = 1; i < ndim; i++) {
    int p = perm[i], j = i;
    while (j > 0 && like[perm[j - 1]] > like[p]) {
      perm[j] = perm[j - 1];
      j--;
    }
    perm[j] = p;
  }
  int64_t s = itemsize;
  for (int k = 0; k < ndim; k++) {
    strides[perm[k]] = s;
    s *= shape[perm[k]] > 0 ? shape[perm[k]] : 1;
  }
}

bool dv__layout_reshape_view(int ndim, const int64_t *shape, const int64_t *strides,
                             int64_t itemsize, int nnd, const int64_t *nshape, char order,
                             int64_t *nstrides) {
  bool f = order == 'F';
  int64_t size = 1;
  for (int i = 0; i < ndim; i++) size *= shape[i];
  /* A contiguous source in the requested order (size 0 included) is a
   * plain reinterpretation with dense strides. */
  if (size == 0 || (f ? dv__layout_is_f(ndim, shape, strides, itemsize)
                      : dv__layout_is_c(ndim, shape, strides, itemsize))) {
    dv__layout_dense(nnd, nshape, itemsize, f ? 'F' : 'C', nstrides);
    return true;
  }
  /* Otherwise match groups of old axes to groups of new axes with equal
   * products; each old group must be contiguous within itself. */
  int64_t od[DV_MAXDIMS], os[DV_MAXDIMS];
  int ond = 0;
  for (int i = 0; i < ndim; i++)
    if (shape[i] != 1) od[ond] = shape[i], os[ond] = strides[i], ond++;
  int oi = 0, oj = 1, ni = 0, nj = 1;
  while (ni < nnd && oi < ond) {
    int64_t np_ = nshape[ni], op = od[oi];
    while (np_ != op) {
      if (np_ < op) {
        if (nj >= nnd) return false;
        np_ *= nshape[nj++];
      } else {
        if (oj >= ond) return false;
        op *= od[oj++];
      }
    }
    for (int k = oi; k < oj - 1; k++) {
      if (f ? os[k + 1] != od[k] * os[k] : os[k] != od[k + 1] * os[k + 1]) return false;
    }
    if (f) {
      nstrides[ni] = os[oi];
      for (int k = ni + 1; k < nj; k++) nstrides[k] = nstrides[k - 1] * nshape[k - 1];
    } else {
      nstrides[nj - 1] = os[oj - 1];
      for (int k = nj - 1; k > ni; k--) nstrides[k - 1] = nstrides[k] * nshape[k];
    }
    ni = nj++;
    oi = oj++;
  }
  /* Trailing new axes (all of extent 1). */
  int64_t last = ni >= 1 ? nstrides[ni - 1] : itemsize;
  if (f && ni >= 1) last *= nshape[ni - 1];
  for (int k = ni; k < nnd; k++) nstrides[k] = last;
  return true;
}

dv_status dv__layout_resolve_shape(int64_t size, int nnd, const int64_t *in, int64_t *out) {
  int unknown = -1;
  int64_t known = 1;
  if (nnd < 0 || nnd > DV_MAXDIMS)
    return dv__error(DV_ERR_BAD_SHAPE, "ndim %d is outside 0..%d", nnd, DV_MAXDIMS);
  for (int i = 0; i < nnd; i++) {
    if (in[i] == -1) {
      if (unknown >= 0) return dv__error(DV_ERR_BAD_SHAPE, "can only specify one unknown dimension");
      unknown = i;
      continue;
    }
    if (in[i] < 0) return dv__error(DV_ERR_BAD_SHAPE, "negative extent %lld in the new shape", (long long)in[i]);
    out[i] = in[i];
  }
  /* The product of the known extents; that of the non-zero ones must fit
   * too (see dv__layout_size). */
  bool zero = false;
  for (int i = 0; i < nnd; i++) {
    if (i == unknown) continue;
    if (in[i] == 0) {
      zero = true;
      continue;
    }
    if (dv__mul_overflow(known, in[i], &known))
      return dv__error(DV_ERR_OVERFLOW, "the new shape's element count overflows");
  }
  if (zero) known = 0;
  if (unknown >= 0) {
    if (known == 0 || size % known != 0)
      return dv__error(known == 0 ? DV_ERR_BAD_SHAPE : DV_ERR_RESHAPE_SIZE,
                       "cannot infer valid shape for unknown dimension (size %lld, known %lld)",
                       (long long)size, (long long)known);
    out[unknown] = size / known;
    known = size;
  }
  if (known != size)
    return dv__error(DV_ERR_RESHAPE_SIZE, "reshape changes the size of the array (%lld to %lld)",
                     (long long)size, (long long)known);
  return DV_OK;
}

int dv__layout_squeeze(int ndim, const int64_t *shape, const int64_t *strides, int64_t *oshape,
                       int64_t *ostrides) {
  int n = 0;
  for (int i = 0; i < ndim; i++)
    if (shape[i] != 1) {
      oshape[n] = shape[i];
      if (ostrides) ostrides[n] = strides[i];
      n++;
    }
  return n;
}

dv_status dv__check_order(char order) {
  if (order == 'C' || order == 'F') return DV_OK;
  return dv__error(DV_ERR_BAD_ORDER, "order must be 'C' or 'F', not '%c' (0x%02x)",
                   (order >= 32 && order < 127) ? order : '?', (unsigned char)order);
}
