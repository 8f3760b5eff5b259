/*
 * The array layer's edge to memory devarray did not allocate: native
 * handles of arrays, and arrays over foreign device memory.  A foreign
 * allocation is a borrowed block: nothing else in the library knows it is
 * foreign except its release, which drops the backend's wrapper and calls
 * the owner's release function instead of freeing.
 */
#include <string.h>

#include "array.h"

dv_status dv_array_native(const dv_array *a, void **buffer, size_t *offset) {
  if (buffer) *buffer = NULL;
  if (offset) *offset = 0;
  DV_CHECK_NULL(a);
  DV_CHECK_ARRAY(a);
  dv_context *ctx = a->alloc->ctx;
  dv_memory_kind k = a->alloc->kind;
  if (k != DV_MEM_DEVICE && k != DV_MEM_MANAGED && k != DV_MEM_MAPPED)
    return dv__error(DV_ERR_MISUSE, "dv_array_native: a host array has no device memory");
  dv_status live = dv__check_live(a, "array");
  if (live) return live;
  if (!a->alloc->buf) {
    /* An empty array owns no memory. */
    return DV_OK;
  }
  if (!dv__be_has(ctx->be, DV_BCAP_NATIVE))
    return dv__error(DV_ERR_NOT_SUPPORTED, "the %s backend has no native buffers", ctx->be->name);
  void *nat = NULL;
  dv_status rc = ctx->be->native_buffer(ctx->bst, a->alloc->buf, &nat);
  if (rc) return rc;
  if (buffer) *buffer = nat;
  if (offset) *offset = a->alloc->buf_offset + (size_t)a->offset;
  return DV_OK;
}

dv_status dv_array_block(const dv_array *a, dv_block *block, size_t *offset, int *usable) {
  if (block) memset(block, 0, sizeof *block);
  if (offset) *offset = 0;
  if (usable) *usable = 0;
  DV_CHECK_NULL(a);
  DV_CHECK_ARRAY(a);
  const dv_alloc *al = a->alloc;
  /* A manager's block: device memory devarray allocated and frees (mapped
   * views, wrapped and IPC memory are not owned). */
  if (al->kind != DV_MEM_DEVICE || !al->owned || al->foreign)
    return dv__error(DV_ERR_MISUSE, "dv_array_block: the array's memory is not a memory manager's block");
  if (block) {
    block->buf = al->buf;
    block->offset = al->buf_offset;
    block->handle = al->mm_handle;
  }
  if (offset) *offset = al->buf ? (size_t)a->offset : 0;
  if (usable) *usable = !al->opaque;
  return DV_OK;
}

dv_status dv_context_check_native(dv_context *ctx, void *native, size_t offset, size_t bytes) {
  DV_CHECK_NULL(ctx);
  DV_CHECK_HANDLE(ctx, DV_HANDLE_CONTEXT);
  DV_CHECK_NOT_IN_CALLBACK();
  if (!dv__be_has(ctx->be, DV_BCAP_BUFFER_CHECK))
    return dv__error(DV_ERR_NOT_SUPPORTED, "the %s backend's device pointers are checked by its driver on use",
                     ctx->be->name);
  return ctx->be->buffer_check(ctx->bst, native, true, offset, bytes);
}

dv_status dv_device_array_wrap(dv_context *ctx, void *buffer, size_t offset, size_t bytes,
                               int ndim, const int64_t *shape, const dv_dtype *dtype,
                               const int64_t *strides, dv_release_fn release, void *user,
                               dv_array **out) {
  DV_CHECK_NULL(out);
  *out = NULL;
  DV_CHECK_NULL(ctx);
  DV_CHECK_HANDLE(ctx, DV_HANDLE_CONTEXT);
  DV_CHECK_NOT_IN_CALLBACK();
  DV_CHECK_NULL(buffer);
  DV_CHECK_NULL(dtype);
  if (!dv__be_has(ctx->be, DV_BCAP_NATIVE))
    return dv__error(DV_ERR_NOT_SUPPORTED, "the %s backend cannot wrap foreign memory",
                     ctx->be->name);
  /* The checks every array constructor makes (shape, dtype, strides'
   * alignment, overflow), then the layout must fit the buffer. */
  int64_t st[DV_MAXDIMS], span = 0, lo_off = 0;
  dv_status rc = dv__check_layout(ndim, shape, dtype, strides, 'C', st, &span, &lo_off);
  if (rc) return rc;
  int64_t al = (int64_t)dtype->alignment;
  if (offset > (size_t)INT64_MAX || bytes > (size_t)INT64_MAX)
    return dv__error(DV_ERR_OVERFLOW, "offset %zu or size %zu exceeds INT64_MAX", offset, bytes);
  if ((int64_t)offset % al != 0)
    return dv__error(DV_ERR_BAD_STRIDES,
                     "element 0 at byte offset %zu is not aligned to the %s alignment %lld",
                     offset, dtype->name, (long long)al);
  /* The layout covers [offset - lo_off, offset - lo_off + span). */
  int64_t first = (int64_t)offset - lo_off, end = 0;
  if (first < 0 || dv__add_overflow(first, span, &end) || end > (int64_t)bytes)
    return dv__error(DV_ERR_BAD_STRIDES,
                     "the layout reaches bytes [%lld, %lld + %lld) of a %zu-byte buffer (element 0 "
                     "at byte %zu)", (long long)first, (long long)first, (long long)span, bytes,
                     offset);
  void *buf = NULL;
  rc = ctx->be->buffer_wrap(ctx->bst, buffer, bytes, &buf);
  if (rc) return rc;
  dv_alloc *a = dv__alloc_new(ctx, DV_MEM_DEVICE);
  if (!a) {
    ctx->be->buffer_unwrap(ctx->bst, buf);
    return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate an allocation record");
  }
  a->owned = false;
  a->foreign = true;
  a->buf = buf;
  a->bytes = bytes;
  a->release = release;
  a->release_user = user;
  rc = dv__array_new(a, dtype, ndim, shape, st, (int64_t)offset, out);
  if (rc) {
    /* Undo without calling the owner's release: the call failed. */
    a->release = NULL;
    dv__alloc_release(a);
    return rc;
  }
  dv__alloc_release(a); /* the descriptor holds it */
  return DV_OK;
}
