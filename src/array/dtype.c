/* Dtypes: NumPy's numeric types (static, immortal) and record dtypes
 * (reference counted, with named fields, offsets, nesting and sub-arrays). */
#include <string.h>

#include "array.h"

#define DV_STATIC_DTYPE(ID, SIZE, NAME) {-1, ID, SIZE, SIZE, NAME, 0, NULL}
static const dv_dtype dv__builtin[DV_RECORD] = {
    DV_STATIC_DTYPE(DV_BOOL, 1, "bool"),
    DV_STATIC_DTYPE(DV_INT8, 1, "int8"),
    DV_STATIC_DTYPE(DV_INT16, 2, "int16"),
    DV_STATIC_DTYPE(DV_INT32, 4, "int32"),
    DV_STATIC_DTYPE(DV_INT64, 8, "int64"),
    DV_STATIC_DTYPE(DV_UINT8, 1, "uint8"),
    DV_STATIC_DTYPE(DV_UINT16, 2, "uint16"),
    DV_STATIC_DTYPE(DV_UINT32, 4, "uint32"),
    DV_STATIC_DTYPE(DV_UINT64, 8, "uint64"),
    DV_STATIC_DTYPE(DV_FLOAT16, 2, "float16"),
    DV_STATIC_DTYPE(DV_FLOAT32, 4, "float32"),
    DV_STATIC_DTYPE(DV_FLOAT64, 8, "float64"),
    {-1, DV_COMPLEX64, 8, 4, "complex64", 0, NULL},
    {-1, DV_COMPLEX128, 16, 8, "complex128", 0, NULL},
};

const dv_dtype *dv_dtype_get(dv_type_id id) {
  return ((unsigned)id < DV_RECORD) ? &dv__builtin[id] : NULL;
}

const dv_dtype *dv_dtype_from_name(const char *name) {
  if (!name) return NULL;
  static const struct { const char *code; dv_type_id id; } codes[] = {
      {"?", DV_BOOL},   {"b1", DV_BOOL},   {"i1", DV_INT8},   {"i2", DV_INT16},
      {"i4", DV_INT32}, {"i8", DV_INT64},  {"u1", DV_UINT8},  {"u2", DV_UINT16},
      {"u4", DV_UINT32}, {"u8", DV_UINT64}, {"f2", DV_FLOAT16}, {"f4", DV_FLOAT32},
      {"f8", DV_FLOAT64}, {"c8", DV_COMPLEX64}, {"c16", DV_COMPLEX128},
      {"double", DV_FLOAT64}, {"float", DV_FLOAT32}, {"half", DV_FLOAT16},
  };
  for (int i = 0; i < DV_RECORD; i++)
    if (strcmp(name, dv__builtin[i].name) == 0) return &dv__builtin[i];
  const char *code = name;
  if (*code == '<' || *code == '=' || *code == '|') code++; /* little-endian or native */
  for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++)
    if (strcmp(code, codes[i].code) == 0) return &dv__builtin[codes[i].id];
  return NULL;
}

dv_type_id dv_dtype_id(const dv_dtype *dt) { return dt ? dt->id : DV_TYPE_COUNT; }
size_t dv_dtype_itemsize(const dv_dtype *dt) { return dt ? dt->itemsize : 0; }
size_t dv_dtype_alignment(const dv_dtype *dt) { return dt ? dt->alignment : 0; }
const char *dv_dtype_name(const dv_dtype *dt) { return dt ? dt->name : "(null)"; }
size_t dv_dtype_field_count(const dv_dtype *dt) { return dt ? dt->nfields : 0; }

int dv_dtype_equal(const dv_dtype *a, const dv_dtype *b) {
  if (a == b) return 1;
  if (!a || !b || a->id != b->id || a->itemsize != b->itemsize) return 0;
  if (a->id != DV_RECORD) return 1;
  if (a->nfields != b->nfields) return 0;
  for (size_t i = 0; i < a->nfields; i++) {
    const dv_field *x = &a->fields[i], *y = &b->fields[i];
    if (strcmp(x->name, y->name) || x->offset != y->offset || x->ndim != y->ndim ||
        !dv_dtype_equal(x->dtype, y->dtype))
      return 0;
    for (int k = 0; k < x->ndim; k++)
      if (x->shape[k] != y->shape[k]) return 0;
  }
  return 1;
}

const dv_dtype *dv_dtype_retain(const dv_dtype *dt) {
  if (dt && dt->refs >= 0) atomic_fetch_add(&((dv_dtype *)dt)->refs, 1);
  return dt;
}

static void dv__dtype_free(dv_dtype *dt) {
  for (size_t i = 0; i < dt->nfields; i++) {
    dv__free(dt->fields[i].name);
    dv_dtype_release(dt->fields[i].dtype);
  }
  dv__free(dt->fields);
  dv__free(dt);
}

void dv_dtype_release(const dv_dtype *dt) {
  if (!dt || dt->refs < 0) return;
  if (atomic_fetch_sub(&((dv_dtype *)dt)->refs, 1) == 1) dv__dtype_free((dv_dtype *)dt);
}

const dv_field *dv__dtype_find_field(const dv_dtype *dt, const char *name) {
  for (size_t i = 0; i < dt->nfields; i++)
    if (strcmp(dt->fields[i].name, name) == 0) return &dt->fields[i];
  return NULL;
}

dv_status dv_dtype_field(const dv_dtype *dt, size_t i, dv_field_desc *out) {
  DV_CHECK_NULL(out);
  memset(out, 0, sizeof *out);
  DV_CHECK_NULL(dt);
  if (i >= dt->nfields)
    return dv__error(DV_ERR_INDEX, "field index %zu out of range (%zu fields)", i, dt->nfields);
  const dv_field *f = &dt->fields[i];
  out->name = f->name;
  out->dtype = f->dtype;
  out->offset = f->offset;
  out->ndim = f->ndim;
  out->shape = f->ndim ? f->shape : NULL;
  return DV_OK;
}

dv_status dv_dtype_record_create(const dv_field_desc *fields, size_t nfields, size_t itemsize,
                                 dv_dtype **out) {
  DV_CHECK_NULL(out);
  *out = NULL;
  DV_CHECK_NULL(fields);
  if (nfields == 0) return dv__error(DV_ERR_BAD_DTYPE, "a record dtype needs at least one field");
  size_t end = 0, align = 1;
  size_t sizes[256];
  size_t *fsz = nfields <= 256 ? sizes : dv__malloc(nfields * sizeof *fsz);
  if (!fsz) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate a record dtype");
  dv_status rc = DV_OK;
  for (size_t i = 0; i < nfields && !rc; i++) {
    const dv_field_desc *f = &fields[i];
    if (!f->name || !*f->name) rc = dv__error(DV_ERR_BAD_DTYPE, "field %zu has no name", i);
    else if (!f->dtype) rc = dv__error(DV_ERR_BAD_DTYPE, "field \"%s\" has no dtype", f->name);
    else if (f->ndim < 0 || f->ndim > DV_MAXDIMS || (f->ndim && !f->shape))
      rc = dv__error(DV_ERR_BAD_DTYPE, "field \"%s\" has a bad sub-array rank %d", f->name, f->ndim);
    for (size_t j = 0; j < i && !rc; j++)
      if (strcmp(fields[j].name, f->name) == 0)
        rc = dv__error(DV_ERR_BAD_DTYPE, "duplicate field name \"%s\"", f->name);
    if (rc) break;
    int64_t n = 1;
    for (int k = 0; k < f->ndim && !rc; k++)
      if (f->shape[k] <= 0 || dv__mul_overflow(n, f->shape[k], &n))
        rc = dv__error(DV_ERR_BAD_DTYPE, "field \"%s\" has a bad sub-array shape", f->name);
    /* Every size of a dtype fits int64_t, as byte counts and offsets do
     * everywhere else: the field's bytes (itemsize x sub-array count), its
     * offset and its end.  Nested records were checked when they were made,
     * so their itemsize fits too. */
    if (rc) break;
    int64_t sz = 0, fend = 0;
    if (f->dtype->itemsize > (size_t)INT64_MAX || dv__mul_overflow(n, (int64_t)f->dtype->itemsize, &sz))
      rc = dv__error(DV_ERR_OVERFLOW, "field \"%s\" is too large", f->name);
    else if (f->offset > (size_t)INT64_MAX || dv__add_overflow((int64_t)f->offset, sz, &fend))
      rc = dv__error(DV_ERR_OVERFLOW, "field \"%s\" at offset %zu ends past the largest byte count (%lld)",
                     f->name, f->offset, (long long)INT64_MAX);
    if (rc) break;
    fsz[i] = (size_t)sz;
    if ((size_t)fend > end) end = (size_t)fend;
    if (f->dtype->alignment > align) align = f->dtype->alignment;
  }
  if (!rc && itemsize > (size_t)INT64_MAX)
    rc = dv__error(DV_ERR_OVERFLOW, "itemsize %zu exceeds the largest byte count (%lld)", itemsize, (long long)INT64_MAX);
  /* Overlapping fields: NumPy refuses them for records holding objects only,
   * but for device data an overlap is almost surely a mistake. */
  for (size_t i = 0; i < nfields && !rc; i++)
    for (size_t j = i + 1; j < nfields && !rc; j++) {
      size_t a0 = fields[i].offset, a1 = a0 + fsz[i], b0 = fields[j].offset, b1 = b0 + fsz[j];
      if (a0 < b1 && b0 < a1 && fsz[i] && fsz[j])
        rc = dv__error(DV_ERR_BAD_DTYPE, "fields \"%s\" and \"%s\" overlap", fields[i].name,
                       fields[j].name);
    }
  if (!rc && itemsize && itemsize < end)
    rc = dv__error(DV_ERR_BAD_DTYPE, "itemsize %zu is smaller than the fields' end %zu", itemsize, end);
  if (fsz != sizes) dv__free(fsz);
  if (rc) return rc;
  dv_dtype *dt = dv__calloc(1, sizeof *dt);
  dv_field *fl = dt ? dv__calloc(nfields, sizeof *fl) : NULL;
  if (!dt || !fl) {
    dv__free(dt);
    dv__free(fl);
    return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate a record dtype");
  }
  dt->id = DV_RECORD;
  dt->name = "record";
  dt->itemsize = itemsize ? itemsize : end;
  /* Records are packed, as NumPy's default (align=False) makes them. */
  dt->alignment = 1;
  (void)align;
  dt->fields = fl;
  atomic_store(&dt->refs, 1);
  for (size_t i = 0; i < nfields; i++) {
    fl[i].name = dv__strdup(fields[i].name);
    if (!fl[i].name) {
      dt->nfields = i;
      dv__dtype_free(dt);
      return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate a record dtype");
    }
    fl[i].dtype = dv_dtype_retain(fields[i].dtype);
    fl[i].offset = fields[i].offset;
    fl[i].ndim = fields[i].ndim;
    for (int k = 0; k < fields[i].ndim; k++) fl[i].shape[k] = fields[i].shape[k];
    dt->nfields = i + 1;
  }
  *out = dt;
  return DV_OK;
}
