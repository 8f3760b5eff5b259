/*
 * DLPack: arrays out of devarray (dv_array_to_dlpack) and tensors into it
 * (dv_array_from_dlpack), against the dlpack.h the system provides
 * (Debian's libdlpack-dev; CMake defines DV_HAVE_DLPACK when it finds it).
 * Without the header both functions exist and return DV_ERR_NOT_SUPPORTED.
 *
 * The DLPack structures are touched in two small functions only:
 * dv__dl_read_legacy (a DLManagedTensor into the neutral dv__dl_desc) and
 * dv__dl_write_legacy (the other way).  Everything else (validation, the
 * mapping of devices and dtypes, the views) works on dv__dl_desc; the
 * versioned structure of DLPack 1.x (DLManagedTensorVersioned, declared by
 * devarray_dlpack.h) has its own pair, dv__dl_read_versioned (which checks
 * the version and the read-only flag first) and dv__dl_write_versioned.
 *
 * A foreign tensor must never make devarray read or write outside it: the
 * layout's extent is computed with overflow checks, and the view devarray
 * makes covers exactly the bytes the layout reaches, no more.
 */
#include <stdlib.h>
#include <string.h>

#include "array.h"

#if DV_HAVE_DLPACK
#include "devarray_dlpack.h" /* dlpack.h and DLPack 1.x's versioned structure */

/* The system header's version: 0.x headers define DLPACK_VERSION (80 for
 * 0.8), 1.x headers DLPACK_MAJOR_VERSION and DLPACK_MINOR_VERSION instead.
 * kDLBool came with 0.8. */
#ifdef DLPACK_MAJOR_VERSION
#define DV__DL_HEADER_VERSION (DLPACK_MAJOR_VERSION * 100 + DLPACK_MINOR_VERSION * 10)
#else
#define DV__DL_HEADER_VERSION DLPACK_VERSION
#endif

/* The fields of a DLTensor, version-neutral. */
typedef struct dv__dl_desc {
  void *data;
  int device_type, device_id;
  int ndim;
  const int64_t *shape;   /* ndim entries */
  const int64_t *strides; /* ndim entries, in elements; NULL: C order */
  uint64_t byte_offset;
  unsigned code, bits, lanes;
} dv__dl_desc;

/* ---- the DLPack structures (legacy, unversioned) ------------------------------- */

/* A DLTensor (the same in every version) into the neutral descriptor. */
static void dv__dl_read_tensor(const DLTensor *x, dv__dl_desc *d) {
  d->data = x->data;
  d->device_type = (int)x->device.device_type;
  d->device_id = x->device.device_id;
  d->ndim = x->ndim;
  d->shape = x->shape;
  d->strides = x->strides;
  d->byte_offset = x->byte_offset;
  d->code = x->dtype.code;
  d->bits = x->dtype.bits;
  d->lanes = x->dtype.lanes;
}

static void dv__dl_read_legacy(const DLManagedTensor *t, dv__dl_desc *d) { dv__dl_read_tensor(&t->dl_tensor, d); }

/* What an exported tensor owns: the array it keeps alive and the shape and
 * strides its DLTensor points at; the tensor is mt (0.x) or mv (1.x). */
typedef struct dv__dl_export {
  union {
    DLManagedTensor mt;
    dv_dlpack_versioned mv;
  } u;
  dv_array *keep;
  int64_t shape[DV_MAXDIMS], strides[DV_MAXDIMS];
} dv__dl_export;

static void dv__dl_export_free(dv__dl_export *e) {
  dv_array_release(e->keep);
  dv__free(e);
}

static void dv__dl_deleter(DLManagedTensor *self) {
  if (self) dv__dl_export_free(self->manager_ctx);
}

static void dv__dl_deleter_versioned(dv_dlpack_versioned *self) {
  if (self) dv__dl_export_free(self->manager_ctx);
}

static void dv__dl_write_tensor(const dv__dl_desc *d, dv__dl_export *e, DLTensor *x) {
  x->data = d->data;
  x->device.device_type = (DLDeviceType)d->device_type;
  x->device.device_id = d->device_id;
  x->ndim = d->ndim;
  x->shape = e->shape;
  x->strides = e->strides;
  x->byte_offset = d->byte_offset;
  x->dtype.code = (uint8_t)d->code;
  x->dtype.bits = (uint8_t)d->bits;
  x->dtype.lanes = (uint16_t)d->lanes;
}

static void dv__dl_write_legacy(const dv__dl_desc *d, dv__dl_export *e) {
  dv__dl_write_tensor(d, e, &e->u.mt.dl_tensor);
  e->u.mt.manager_ctx = e;
  e->u.mt.deleter = dv__dl_deleter;
}

static void dv__dl_release_legacy(void *user) {
  DLManagedTensor *t = user;
  if (t->deleter) t->deleter(t);
}

/* ---- the DLPack 1.x structures (DLManagedTensorVersioned) ---------------------- */

static void dv__dl_write_versioned(const dv__dl_desc *d, uint64_t flags, dv__dl_export *e) {
  dv__dl_write_tensor(d, e, &e->u.mv.dl_tensor);
  e->u.mv.version.major = DV_DLPACK_MAJOR;
  e->u.mv.version.minor = DV_DLPACK_MINOR;
  e->u.mv.flags = flags;
  e->u.mv.manager_ctx = e;
  e->u.mv.deleter = dv__dl_deleter_versioned;
}

/* The version and flags first: a new major version may have moved every
 * field after the deleter, so nothing else is read then. */
static dv_status dv__dl_read_versioned(const dv_dlpack_versioned *t, unsigned flags,
                                       dv__dl_desc *d) {
  if (t->version.major != DV_DLPACK_MAJOR)
    return dv__error(DV_ERR_NOT_SUPPORTED,
                     "a DLPack %u.%u tensor (devarray reads DLPack %d.x: a new major version "
                     "changes the structure)",
                     (unsigned)t->version.major, (unsigned)t->version.minor, DV_DLPACK_MAJOR);
  if ((t->flags & DV_DLPACK_FLAG_READ_ONLY) && !(flags & DV_DLPACK_IMPORT_READ_ONLY))
    return dv__error(DV_ERR_INVALID_ARGUMENT,
                     "the DLPack tensor is read-only (DLPACK_FLAG_BITMASK_READ_ONLY) and devarray "
                     "arrays are writable: pass DV_DLPACK_IMPORT_READ_ONLY to import it anyway "
                     "and not write it");
  dv__dl_read_tensor(&t->dl_tensor, d);
  return DV_OK;
}

static void dv__dl_release_versioned(void *user) {
  dv_dlpack_versioned *t = user;
  if (t->deleter) t->deleter(t);
}

/* ---- dtypes -------------------------------------------------------------------- */

static const struct {
  dv_type_id id;
  unsigned code, bits;
} dv__dl_types[] = {
    {DV_INT8, kDLInt, 8},         {DV_INT16, kDLInt, 16},       {DV_INT32, kDLInt, 32},
    {DV_INT64, kDLInt, 64},       {DV_UINT8, kDLUInt, 8},       {DV_UINT16, kDLUInt, 16},
    {DV_UINT32, kDLUInt, 32},     {DV_UINT64, kDLUInt, 64},     {DV_FLOAT16, kDLFloat, 16},
    {DV_FLOAT32, kDLFloat, 32},   {DV_FLOAT64, kDLFloat, 64},   {DV_COMPLEX64, kDLComplex, 64},
    {DV_COMPLEX128, kDLComplex, 128},
#if DV__DL_HEADER_VERSION >= 80
    {DV_BOOL, kDLBool, 8},
#endif
};
#define DV__DL_NTYPES (sizeof dv__dl_types / sizeof dv__dl_types[0])

static dv_status dv__dl_dtype_out(const dv_dtype *dt, unsigned *code, unsigned *bits) {
  for (size_t i = 0; i < DV__DL_NTYPES; i++)
    if (dv__dl_types[i].id == dt->id) {
      *code = dv__dl_types[i].code;
      *bits = dv__dl_types[i].bits;
      return DV_OK;
    }
  if (dt->id == DV_BOOL)
    return dv__error(DV_ERR_BAD_DTYPE, "DLPack %d (this build's dlpack.h) has no bool type",
                     DV__DL_HEADER_VERSION);
  return dv__error(DV_ERR_BAD_DTYPE, "DLPack has no type for the dtype %s", dt->name);
}

static dv_status dv__dl_dtype_in(const dv__dl_desc *d, const dv_dtype **out) {
  if (d->lanes != 1)
    return dv__error(DV_ERR_BAD_DTYPE, "DLPack dtype with %u lanes (devarray has no vector dtypes)",
                     d->lanes);
  for (size_t i = 0; i < DV__DL_NTYPES; i++)
    if (dv__dl_types[i].code == d->code && dv__dl_types[i].bits == d->bits) {
      *out = dv_dtype_get(dv__dl_types[i].id);
      return DV_OK;
    }
  return dv__error(DV_ERR_BAD_DTYPE, "DLPack dtype code %u with %u bits has no devarray dtype",
                   d->code, d->bits);
}

/* ---- devices -------------------------------------------------------------------- */

typedef enum { DV__BE_HOST, DV__BE_CUDA, DV__BE_HIP, DV__BE_OPENCL, DV__BE_OTHER } dv__be_kind;

static dv__be_kind dv__be_of(const dv_context *ctx) {
  const char *n = ctx->be->name;
  if (strcmp(n, "host") == 0) return DV__BE_HOST;
  if (strcmp(n, "cuda") == 0) return DV__BE_CUDA;
  if (strcmp(n, "hip") == 0) return DV__BE_HIP;
  if (strcmp(n, "opencl") == 0) return DV__BE_OPENCL;
  return DV__BE_OTHER;
}

static const char *dv__dl_device_name(int t) {
  switch (t) {
    case kDLCPU: return "kDLCPU";
    case kDLCUDA: return "kDLCUDA";
    case kDLCUDAHost: return "kDLCUDAHost";
    case kDLOpenCL: return "kDLOpenCL";
    case kDLCUDAManaged: return "kDLCUDAManaged";
    case kDLROCM: return "kDLROCM";
    case kDLROCMHost: return "kDLROCMHost";
    default: return "another device";
  }
}

/* The ordinal of a CUDA or HIP context's device: the backend's own option
 * where it was set, else the `device` option, else the own option's
 * default (as the context chose it). */
static int dv__dl_ordinal(const dv_context *ctx, dv__be_kind be) {
  const dv_optval *own = &ctx->opt[be == DV__BE_HIP ? DV_OPT_HIP_DEVICE : DV_OPT_CUDA_DEVICE];
  const dv_optval *any = &ctx->opt[DV_OPT_DEVICE];
  if (own->source == DV_SOURCE_DEFAULT && any->s[0]) return atoi(any->s);
  return (int)own->i;
}

/* Where a tensor on (type, id) goes in ctx: device memory or host memory,
 * addressed by pointer (else the data is a cl_mem). */
static dv_status dv__dl_placement(const dv_context *ctx, int type, int id, bool *device,
                                  bool *pointer) {
  dv__be_kind be = dv__be_of(ctx);
  *pointer = true;
  *device = false;
  bool ok = false, id_ok = id == 0;
  switch (be) {
    case DV__BE_HOST: /* the simulator's device memory is host memory */
      ok = type == kDLCPU;
      *device = true;
      break;
    case DV__BE_CUDA:
      if (type == kDLCUDA || type == kDLCUDAManaged) {
        ok = true;
        *device = true;
        id_ok = id == dv__dl_ordinal(ctx, be);
      } else {
        ok = type == kDLCPU || type == kDLCUDAHost;
      }
      break;
    case DV__BE_HIP: /* DLPack has no ROCm managed type: managed memory is kDLROCM */
      if (type == kDLROCM) {
        ok = true;
        *device = true;
        id_ok = id == dv__dl_ordinal(ctx, be);
      } else {
        ok = type == kDLCPU || type == kDLROCMHost;
      }
      break;
    case DV__BE_OPENCL:
      if (type == kDLOpenCL) ok = true, *device = true, *pointer = false;
      else ok = type == kDLCPU;
      break;
    case DV__BE_OTHER: break;
  }
  if (!ok)
    return dv__error(DV_ERR_BACKEND_MISMATCH,
                     "a tensor on DLPack device type %d (%s) cannot be used by a %s context", type,
                     dv__dl_device_name(type), ctx->be->name);
  if (!id_ok)
    return dv__error(DV_ERR_BACKEND_MISMATCH,
                     "the tensor is on %s device %d; this %s context uses device %d",
                     dv__dl_device_name(type), id, ctx->be->name,
                     be == DV__BE_CUDA || be == DV__BE_HIP ? dv__dl_ordinal(ctx, be) : 0);
  return DV_OK;
}

/* ---- import --------------------------------------------------------------------- */

/* Validate d for ctx and make a view of it; release(user) is called once the
 * last view is gone (through the deferred-deallocation queue).  On failure
 * nothing is made and release is not called. */
static dv_status dv__dl_import(dv_context *ctx, const dv__dl_desc *d, dv_release_fn release,
                               void *user, dv_array **out) {
  DV_CHECK_NOT_IN_CALLBACK();
  if (d->ndim < 0 || d->ndim > DV_MAXDIMS)
    return dv__error(DV_ERR_BAD_SHAPE, "DLPack tensor with ndim %d (devarray allows 0..%d)", d->ndim,
                     DV_MAXDIMS);
  if (d->ndim > 0 && !d->shape)
    return dv__error(DV_ERR_BAD_SHAPE, "DLPack tensor with ndim %d and a NULL shape", d->ndim);
  for (int i = 0; i < d->ndim; i++)
    if (d->shape[i] < 0)
      return dv__error(DV_ERR_BAD_SHAPE, "DLPack tensor with extent %lld in dimension %d",
                       (long long)d->shape[i], i);
  int64_t size = 0;
  dv_status rc = dv__layout_size(d->ndim, d->shape, &size);
  if (rc) return rc;
  const dv_dtype *dt = NULL;
  rc = dv__dl_dtype_in(d, &dt);
  if (rc) return rc;
  int64_t isz = (int64_t)dt->itemsize, st[DV_MAXDIMS], nbytes = 0;
  if (dv__mul_overflow(size, isz, &nbytes))
    return dv__error(DV_ERR_OVERFLOW, "%lld elements of %lld bytes overflow", (long long)size,
                     (long long)isz);
  /* The dense layout of the shape must be expressible whatever the strides
   * (the non-zero extents times the itemsize fit int64_t: see
   * dv__check_layout); C order unless the tensor has strides. */
  rc = dv__layout_dense(d->ndim, d->shape, isz, 'C', st);
  if (rc) return rc;
  if (d->strides)
    for (int i = 0; i < d->ndim; i++)
      if (dv__mul_overflow(d->strides[i], isz, &st[i]))
        return dv__error(DV_ERR_OVERFLOW,
                         "DLPack stride %lld (elements) of dimension %d overflows in bytes",
                         (long long)d->strides[i], i);
  bool device = false, pointer = true;
  rc = dv__dl_placement(ctx, d->device_type, d->device_id, &device, &pointer);
  if (rc) return rc;
  if (!d->data && size > 0)
    return dv__error(DV_ERR_NULL_ARGUMENT, "DLPack tensor of %lld elements with NULL data",
                     (long long)size);
  if (d->byte_offset > (uint64_t)INT64_MAX)
    return dv__error(DV_ERR_OVERFLOW, "DLPack byte_offset %llu exceeds INT64_MAX",
                     (unsigned long long)d->byte_offset);
  /* The bytes the layout reaches, relative to element 0: [lo, hi). */
  int64_t lo = 0, hi = 0;
  rc = dv__layout_extent(d->ndim, d->shape, st, isz, &lo, &hi);
  if (rc) return rc;
  int64_t span = 0;
  if (lo == INT64_MIN || dv__add_overflow(hi, -lo, &span))
    return dv__error(DV_ERR_OVERFLOW, "the DLPack tensor's byte span overflows");
  /* Element strides times the itemsize are multiples of the alignment. */
  int64_t al = (int64_t)dt->alignment;
  void *native = NULL;  /* what the backend wraps */
  int64_t offset = 0;   /* byte offset of element 0 in it */
  char *host = NULL;
  if (pointer) {
    uintptr_t p0 = 0;
    if (d->data) {
      if (d->byte_offset > UINTPTR_MAX - (uintptr_t)d->data)
        return dv__error(DV_ERR_OVERFLOW, "DLPack data + byte_offset wraps around the address space");
      p0 = (uintptr_t)d->data + (uintptr_t)d->byte_offset;
      if (p0 % (uintptr_t)al != 0)
        return dv__error(DV_ERR_BAD_STRIDES,
                         "element 0 of the DLPack tensor (%p + %llu) is not aligned to the %s "
                         "alignment %lld", d->data, (unsigned long long)d->byte_offset, dt->name,
                         (long long)al);
      if ((uintptr_t)-lo > p0 || (uintptr_t)hi > UINTPTR_MAX - p0)
        return dv__error(DV_ERR_OVERFLOW,
                         "the DLPack tensor's layout reaches outside the address space");
    }
    native = size > 0 ? (void *)(p0 - (uintptr_t)-lo) : (void *)p0;
    host = native;
    offset = size > 0 ? -lo : 0;
    if (size == 0) span = 0;
  } else {
    if ((int64_t)d->byte_offset % al != 0)
      return dv__error(DV_ERR_BAD_STRIDES, "DLPack byte_offset %llu is not aligned to the %s alignment %lld",
                       (unsigned long long)d->byte_offset, dt->name, (long long)al);
    offset = (int64_t)d->byte_offset;
    if (size > 0 && offset + lo < 0)
      return dv__error(DV_ERR_BAD_STRIDES,
                       "the DLPack tensor's strides reach %lld bytes before its buffer",
                       (long long)-(offset + lo));
    native = d->data;
    if (size > 0 && dv__add_overflow(offset, hi, &span))
      return dv__error(DV_ERR_OVERFLOW, "byte_offset + extent overflows");
    if (size == 0) span = 0;
  }
  /* The view: an allocation record that never frees (foreign), whose
   * release calls the producer's deleter. */
  void *buf = NULL;
  if (device && native && span > 0) {
    if (!dv__be_has(ctx->be, DV_BCAP_NATIVE))
      return dv__error(DV_ERR_NOT_SUPPORTED, "the %s backend cannot wrap foreign memory",
                       ctx->be->name);
    rc = ctx->be->buffer_wrap(ctx->bst, native, (size_t)span, &buf);
    if (rc) return rc;
  }
  dv_alloc *a = dv__alloc_new(ctx, device ? DV_MEM_DEVICE : DV_MEM_HOST);
  if (!a) {
    if (buf) ctx->be->buffer_unwrap(ctx->bst, buf);
    return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate an allocation record");
  }
  a->owned = false;
  a->foreign = true;
  a->buf = buf;
  a->host = device ? NULL : host;
  a->bytes = (size_t)span;
  a->release = release;
  a->release_user = user;
  rc = dv__array_new(a, dt, d->ndim, d->shape, st, offset, out);
  if (rc) {
    a->release = NULL; /* the call failed: the producer keeps its tensor */
    dv__alloc_release(a);
    return rc;
  }
  dv__alloc_release(a); /* the descriptor holds it */
  return DV_OK;
}

dv_status dv_array_from_dlpack(dv_context *ctx, struct DLManagedTensor *tensor, dv_array **out) {
  DV_CHECK_NULL(out);
  *out = NULL;
  DV_CHECK_NULL(ctx);
  DV_CHECK_HANDLE(ctx, DV_HANDLE_CONTEXT);
  DV_CHECK_NULL(tensor);
  dv__dl_desc d;
  dv__dl_read_legacy(tensor, &d);
  return dv__dl_import(ctx, &d, dv__dl_release_legacy, tensor, out);
}

dv_status dv_array_from_dlpack_versioned(dv_context *ctx, struct dv_dlpack_versioned *tensor,
                                         unsigned flags, dv_array **out) {
  DV_CHECK_NULL(out);
  *out = NULL;
  DV_CHECK_NULL(ctx);
  DV_CHECK_HANDLE(ctx, DV_HANDLE_CONTEXT);
  DV_CHECK_NULL(tensor);
  if (flags & ~DV_DLPACK_IMPORT_READ_ONLY)
    return dv__error(DV_ERR_INVALID_ARGUMENT,
                     "dv_array_from_dlpack_versioned: unknown flags 0x%x (only "
                     "DV_DLPACK_IMPORT_READ_ONLY)", flags);
  dv__dl_desc d;
  memset(&d, 0, sizeof d);
  dv_status rc = dv__dl_read_versioned(tensor, flags, &d);
  if (rc) return rc;
  return dv__dl_import(ctx, &d, dv__dl_release_versioned, tensor, out);
}

/* ---- export --------------------------------------------------------------------- */

/* The DLPack device and data address of a's element 0. */
static dv_status dv__dl_locate(const dv_array *a, dv__dl_desc *d) {
  dv_context *ctx = a->alloc->ctx;
  dv__be_kind be = dv__be_of(ctx);
  dv_memory_kind k = a->alloc->kind;
  d->device_id = 0;
  d->byte_offset = 0;
  if (dv__is_host_side(a)) {
    bool pinned = k == DV_MEM_PINNED || k == DV_MEM_MAPPED;
    d->device_type = be == DV__BE_CUDA && pinned ? kDLCUDAHost : be == DV__BE_HIP && pinned ? kDLROCMHost : kDLCPU;
    d->data = a->alloc->host ? (char *)a->alloc->host + a->offset : NULL;
    return DV_OK;
  }
  dv_status rc = dv__check_live(a, "array");
  if (rc) return rc;
  switch (be) {
    case DV__BE_HOST: d->device_type = kDLCPU; break;
    case DV__BE_CUDA:
      d->device_type = k == DV_MEM_MANAGED ? kDLCUDAManaged : kDLCUDA;
      d->device_id = dv__dl_ordinal(ctx, be);
      break;
    case DV__BE_HIP:
      d->device_type = kDLROCM;
      d->device_id = dv__dl_ordinal(ctx, be);
      break;
    case DV__BE_OPENCL: d->device_type = kDLOpenCL; break;
    case DV__BE_OTHER:
      return dv__error(DV_ERR_NOT_SUPPORTED, "no DLPack device type for the %s backend", ctx->be->name);
  }
  if (!a->alloc->buf) { /* an empty array owns no memory */
    d->data = NULL;
    return DV_OK;
  }
  if (!dv__be_has(ctx->be, DV_BCAP_NATIVE))
    return dv__error(DV_ERR_NOT_SUPPORTED, "the %s backend has no native buffers", ctx->be->name);
  void *nat = NULL;
  rc = ctx->be->native_buffer(ctx->bst, a->alloc->buf, &nat);
  if (rc) return rc;
  uint64_t off = (uint64_t)a->alloc->buf_offset + (uint64_t)a->offset;
  if (be == DV__BE_OPENCL) { /* a cl_mem is not a pointer: the offset stays apart */
    d->data = nat;
    d->byte_offset = off;
  } else {
    d->data = (void *)((uintptr_t)nat + (uintptr_t)off);
  }
  return DV_OK;
}

/* Order the export for the consumer: see dv_array_to_dlpack. */
static dv_status dv__dl_order(dv_context *ctx, dv_stream *stream, void *consumer, int device_type) {
  dv_bstream *bs = dv__bstream(ctx, stream);
  if (consumer == DV_DLPACK_NO_SYNC) return DV_OK; /* the consumer's choice */
  if (consumer && device_type == kDLCPU)
    return dv__error(DV_ERR_INVALID_ARGUMENT,
                     "a kDLCPU tensor has no consumer stream (pass NULL: the export then waits)");
  if (consumer && dv__be_has(ctx->be, DV_BCAP_ORDER_NATIVE))
    return ctx->be->stream_order_native(ctx->bst, bs, consumer);
  return dv__bstream_wait(ctx, bs);
}

/* The export of a (both versions): the tensor's fields in *d, the record
 * that owns the shape and strides in *ep (its tensor left to the caller). */
static dv_status dv__dl_export_new(dv_array *a, dv_stream *stream, void *consumer_stream,
                                   dv__dl_desc *dp, dv__dl_export **ep, const char *fn) {
  *ep = NULL;
  dv_status rc = dv__handle_check(&a->hdr, DV_HANDLE_ARRAY, fn);
  if (!rc && stream) rc = dv__handle_check(&stream->hdr, DV_HANDLE_STREAM, fn);
  if (rc) return rc;
  if (dv__in_callback()) return dv__callback_refused(fn);
  dv_context *ctx = a->alloc->ctx;
  if (stream && stream->ctx != ctx)
    return dv__error(DV_ERR_BACKEND_MISMATCH, "the stream belongs to another context");
  dv__dl_desc d;
  memset(&d, 0, sizeof d);
  rc = dv__dl_dtype_out(a->dtype, &d.code, &d.bits);
  if (rc) return rc;
  d.lanes = 1;
  d.ndim = a->ndim;
  int64_t isz = (int64_t)a->dtype->itemsize;
  int64_t est[DV_MAXDIMS];
  for (int i = 0; i < a->ndim; i++) {
    if (a->strides[i] % isz != 0)
      return dv__error(DV_ERR_BAD_STRIDES,
                       "byte stride %lld of dimension %d is not a multiple of the %lld-byte "
                       "itemsize: DLPack strides count elements",
                       (long long)a->strides[i], i, (long long)isz);
    est[i] = a->strides[i] / isz;
  }
  rc = dv__dl_locate(a, &d);
  if (rc) return rc;
  rc = dv__dl_order(ctx, stream, consumer_stream, d.device_type);
  if (rc) return rc;
  dv__dl_export *e = dv__calloc(1, sizeof *e);
  if (!e) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate a DLPack tensor");
  /* A device consumer queues work on streams of its own, which devarray
   * cannot order its allocation streams after (its deleter comes when the
   * consumer lets go, not when that work is done): the memory's free waits
   * for the device (dv__dtor_device) where the manager would otherwise hand
   * the block out again in stream order; so does the pinned pool's reuse
   * of its pinned memory (kDLCUDAHost, kDLROCMHost).  A kDLCPU consumer
   * reads and writes on the host, done before its deleter. */
  if (d.device_type != kDLCPU && ((a->alloc->kind == DV_MEM_DEVICE && a->alloc->owned) || a->alloc->pooled))
    atomic_store(&a->alloc->outside, true);
  for (int i = 0; i < a->ndim; i++) e->shape[i] = a->shape[i], e->strides[i] = est[i];
  e->keep = dv_array_retain(a);
  *dp = d;
  *ep = e;
  return DV_OK;
}

dv_status dv_array_to_dlpack(dv_array *a, dv_stream *stream, void *consumer_stream,
                             struct DLManagedTensor **out) {
  DV_CHECK_NULL(out);
  *out = NULL;
  DV_CHECK_NULL(a);
  dv__dl_desc d;
  dv__dl_export *e = NULL;
  dv_status rc = dv__dl_export_new(a, stream, consumer_stream, &d, &e, __func__);
  if (rc) return rc;
  dv__dl_write_legacy(&d, e);
  *out = &e->u.mt;
  return DV_OK;
}

dv_status dv_array_to_dlpack_versioned(dv_array *a, dv_stream *stream, void *consumer_stream,
                                       uint64_t flags, struct dv_dlpack_versioned **out) {
  DV_CHECK_NULL(out);
  *out = NULL;
  DV_CHECK_NULL(a);
  const uint64_t known = DV_DLPACK_FLAG_READ_ONLY | DV_DLPACK_FLAG_IS_COPIED;
  if (flags & ~known)
    return dv__error(DV_ERR_INVALID_ARGUMENT,
                     "dv_array_to_dlpack_versioned: flags 0x%llx beyond DV_DLPACK_FLAG_READ_ONLY "
                     "and DV_DLPACK_FLAG_IS_COPIED", (unsigned long long)flags);
  dv__dl_desc d;
  dv__dl_export *e = NULL;
  dv_status rc = dv__dl_export_new(a, stream, consumer_stream, &d, &e, __func__);
  if (rc) return rc;
  dv__dl_write_versioned(&d, flags, e);
  *out = &e->u.mv;
  return DV_OK;
}

#else /* !DV_HAVE_DLPACK */

dv_status dv_array_to_dlpack(dv_array *a, dv_stream *stream, void *consumer_stream,
                             struct DLManagedTensor **out) {
  (void)a, (void)stream, (void)consumer_stream;
  if (out) *out = NULL;
  return dv__error(DV_ERR_NOT_SUPPORTED, "devarray was built without dlpack.h (libdlpack-dev)");
}

dv_status dv_array_from_dlpack(dv_context *ctx, struct DLManagedTensor *tensor, dv_array **out) {
  (void)ctx, (void)tensor;
  if (out) *out = NULL;
  return dv__error(DV_ERR_NOT_SUPPORTED, "devarray was built without dlpack.h (libdlpack-dev)");
}

dv_status dv_array_to_dlpack_versioned(dv_array *a, dv_stream *stream, void *consumer_stream,
                                       uint64_t flags, struct dv_dlpack_versioned **out) {
  (void)a, (void)stream, (void)consumer_stream, (void)flags;
  if (out) *out = NULL;
  return dv__error(DV_ERR_NOT_SUPPORTED, "devarray was built without dlpack.h (libdlpack-dev)");
}

dv_status dv_array_from_dlpack_versioned(dv_context *ctx, struct dv_dlpack_versioned *tensor,
                                         unsigned flags, dv_array **out) {
  (void)ctx, (void)tensor, (void)flags;
  if (out) *out = NULL;
  return dv__error(DV_ERR_NOT_SUPPORTED, "devarray was built without dlpack.h (libdlpack-dev)");
}

#endif
