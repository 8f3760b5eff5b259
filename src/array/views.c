/*
 * Views of arrays: slices, reshape and ravel (views where NumPy gives one,
 * else a copy through dv__reshape_copy, copy.c), split and record fields.
 * A view is a new descriptor over the same allocation (dv__array_new).
 */
#include <string.h>

#include "array.h"

/* ---- views ------------------------------------------------------------------------ */

dv_status dv_array_slice(const dv_array *a, int nidx, const dv_index *idx, dv_array **out) {
  DV_CHECK_NULL(out);
  *out = NULL;
  DV_CHECK_NULL(a);
  DV_CHECK_ARRAY(a);
  if (nidx < 0) return dv__error(DV_ERR_INVALID_ARGUMENT, "negative index count %d", nidx);
  if (nidx > 0 && !idx) return dv__error(DV_ERR_NULL_ARGUMENT, "idx is NULL with %d entries", nidx);
  if (nidx > a->ndim)
    return dv__error(DV_ERR_TOO_MANY_INDICES, "too many indices for array: %d-dimensional, but %d were indexed",
                     a->ndim, nidx);
  int64_t shape[DV_MAXDIMS], strides[DV_MAXDIMS], offset = a->offset;
  int nd = 0;
  for (int i = 0; i < a->ndim; i++) {
    int64_t len = a->shape[i], st = a->strides[i];
    if (i >= nidx) {
      shape[nd] = len, strides[nd] = st, nd++;
      continue;
    }
    const dv_index *x = &idx[i];
    if (x->kind == DV_IDX_INT) {
      int64_t k = x->index;
      if (k < 0) k += len;
      if (k < 0 || k >= len)
        return dv__error(DV_ERR_INDEX, "index %lld is out of bounds for axis %d with size %lld",
                         (long long)x->index, i, (long long)len);
      offset += k * st;
      continue;
    }
    if (x->kind != DV_IDX_SLICE) return dv__error(DV_ERR_INVALID_ARGUMENT, "index %d has an unknown kind", i);
    int64_t step = x->step;
    if (step == 0) return dv__error(DV_ERR_BAD_STEP, "slice step cannot be zero (axis %d)", i);
    if (step == INT64_MIN) step = -INT64_MAX; /* keep -step representable */
    int64_t start = x->start, stop = x->stop;
    if (start == DV_NONE) start = step < 0 ? len - 1 : 0;
    else if (start < 0) {
      start += len;
      if (start < 0) start = step < 0 ? -1 : 0;
    } else if (start >= len) start = step < 0 ? len - 1 : len;
    if (stop == DV_NONE) stop = step < 0 ? -1 : len;
    else if (stop < 0) {
      stop += len;
      if (stop < 0) stop = step < 0 ? -1 : 0;
    } else if (stop >= len) stop = step < 0 ? len - 1 : len;
    int64_t n;
    if (step < 0) n = stop < start ? (start - stop - 1) / (-step) + 1 : 0;
    else n = start < stop ? (stop - start - 1) / step + 1 : 0;
    shape[nd] = n;
    /* NumPy's rule: an empty range behaves as if its step were 1 and its
     * start 0, so the dimension keeps the parent's stride and the view's
     * start does not move.  Otherwise the stride is step * stride, which
     * cannot overflow for n > 1 (it stays inside the allocation); for n == 1
     * it is never used to reach an element, so an overflow keeps the
     * parent's stride rather than failing. */
    int64_t ns = st;
    if (n > 0) {
      offset += start * st;
      if (dv__mul_overflow(step, st, &ns)) ns = st;
    }
    strides[nd] = ns;
    nd++;
  }
  return dv__array_new(a->alloc, a->dtype, nd, shape, strides, offset, out);
}


static dv_status dv__resolve_order(const dv_array *a, char order, char *eff) {
  if (order == 'C' || order == 'F') *eff = order;
  else if (order == 'A') *eff = (dv_array_is_f_contiguous(a) && !dv_array_is_c_contiguous(a)) ? 'F' : 'C';
  else
    return dv__error(DV_ERR_BAD_ORDER, "order must be 'C', 'F' or 'A', not '%c'",
                     (order >= 32 && order < 127) ? order : '?');
  return DV_OK;
}


dv_status dv_array_reshape(const dv_array *a, int ndim, const int64_t *shape, char order,
                           unsigned flags, dv_stream *stream, dv_array **out) {
  DV_CHECK_NULL(out);
  *out = NULL;
  DV_CHECK_NULL(a);
  DV_CHECK_ARRAY(a);
  if (ndim > 0) DV_CHECK_NULL(shape);
  dv_status rc = dv__check_stream(a->alloc->ctx, stream);
  if (rc) return rc;
  char eff = 'C';
  rc = dv__resolve_order(a, order, &eff);
  if (rc) return rc;
  int64_t nshape[DV_MAXDIMS], nst[DV_MAXDIMS];
  rc = dv__layout_resolve_shape(dv_array_size(a), ndim, shape, nshape);
  if (rc) return rc;
  /* An empty array may take any shape with a zero extent: its dense layout
   * (what a view or a copy of it gets) must not overflow either. */
  rc = dv__layout_dense(ndim, nshape, (int64_t)a->dtype->itemsize, eff, nst);
  if (rc) return rc;
  if (dv__layout_reshape_view(a->ndim, a->shape, a->strides, (int64_t)a->dtype->itemsize, ndim,
                              nshape, eff, nst))
    return dv__array_new(a->alloc, a->dtype, ndim, nshape, nst, a->offset, out);
  if (flags & DV_VIEW_ONLY)
    return dv__error(DV_ERR_COPY_NEEDED, "reshape of this layout to the new shape needs a copy");
  return dv__reshape_copy(a, ndim, nshape, eff, stream, out);
}

dv_status dv_array_ravel(const dv_array *a, char order, unsigned flags, dv_stream *stream,
                         dv_array **out) {
  DV_CHECK_NULL(out);
  *out = NULL;
  DV_CHECK_NULL(a);
  DV_CHECK_ARRAY(a);
  dv_status rc = dv__check_stream(a->alloc->ctx, stream);
  if (rc) return rc;
  bool c = dv_array_is_c_contiguous(a), f = dv_array_is_f_contiguous(a);
  char eff = 'C';
  rc = dv__resolve_order(a, order, &eff);
  if (rc) return rc;
  int64_t n = dv_array_size(a), st = (int64_t)a->dtype->itemsize;
  bool view = (order == 'C' && c) || (order == 'F' && f) || (order == 'A' && (c || f));
  if (view) return dv__array_new(a->alloc, a->dtype, 1, &n, &st, a->offset, out);
  if (flags & DV_VIEW_ONLY)
    return dv__error(DV_ERR_COPY_NEEDED, "ravel of a non-contiguous array in order '%c' needs a copy", order);
  return dv__reshape_copy(a, 1, &n, eff, stream, out);
}

dv_status dv_array_split(const dv_array *a, int64_t section, dv_array **views, size_t cap,
                         size_t *count) {
  DV_CHECK_NULL(count);
  *count = 0;
  /* views has cap entries: all NULL unless they receive a view */
  if (views)
    for (size_t i = 0; i < cap; i++) views[i] = NULL;
  DV_CHECK_NULL(a);
  DV_CHECK_ARRAY(a);
  if (a->ndim != 1) return dv__error(DV_ERR_INVALID_ARGUMENT, "only support 1d array (got %d dims)", a->ndim);
  if (a->strides[0] != (int64_t)a->dtype->itemsize)
    return dv__error(DV_ERR_INVALID_ARGUMENT, "only support unit stride (stride %lld, itemsize %zu)",
                     (long long)a->strides[0], a->dtype->itemsize);
  if (section <= 0) return dv__error(DV_ERR_INVALID_ARGUMENT, "section must be positive, not %lld", (long long)section);
  int64_t size = a->shape[0];
  size_t n = (size_t)(size / section + (size % section != 0));
  if (!views) {
    *count = n;
    return DV_OK;
  }
  if (cap < n) return dv__error(DV_ERR_INVALID_ARGUMENT, "%zu views need room, cap is %zu", n, cap);
  for (size_t i = 0; i < n; i++) {
    int64_t begin = (int64_t)i * section, len = size - begin < section ? size - begin : section;
    dv_status rc = dv__array_new(a->alloc, a->dtype, 1, &len, a->strides,
                                 a->offset + begin * a->strides[0], &views[i]);
    if (rc) {
      for (size_t j = 0; j < i; j++) dv_array_release(views[j]), views[j] = NULL;
      return rc;
    }
  }
  *count = n;
  return DV_OK;
}

/* ---- records --------------------------------------------------------------------- */

dv_status dv_array_field(const dv_array *a, const char *name, dv_array **out) {
  DV_CHECK_NULL(out);
  *out = NULL;
  DV_CHECK_NULL(a);
  DV_CHECK_ARRAY(a);
  DV_CHECK_NULL(name);
  if (a->dtype->id != DV_RECORD)
    return dv__error(DV_ERR_BAD_DTYPE, "field access needs a record array, not %s", a->dtype->name);
  const dv_field *f = dv__dtype_find_field(a->dtype, name);
  if (!f) return dv__error(DV_ERR_UNKNOWN_FIELD, "no field named \"%s\"", name);
  if (a->ndim + f->ndim > DV_MAXDIMS)
    return dv__error(DV_ERR_BAD_SHAPE, "field view would have more than %d dimensions", DV_MAXDIMS);
  int64_t shape[DV_MAXDIMS], st[DV_MAXDIMS];
  int nd = 0;
  for (int i = 0; i < a->ndim; i++) shape[nd] = a->shape[i], st[nd] = a->strides[i], nd++;
  dv__layout_dense(f->ndim, f->shape, (int64_t)f->dtype->itemsize, 'C', st + nd);
  for (int i = 0; i < f->ndim; i++) shape[nd + i] = f->shape[i];
  nd += f->ndim;
  return dv__array_new(a->alloc, f->dtype, nd, shape, st, a->offset + (int64_t)f->offset, out);
}
