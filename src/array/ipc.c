/*
 * IPC handles: a device array's memory shared with another process
 * (Numba's get_ipc_handle / open_ipc_array).  The handle is a fixed-size
 * blob: a header this file writes and reads (format version, backend,
 * exporting pid, where the array's allocation lies in the exported buffer,
 * element 0's offset) and a payload only the backend understands (CUDA's
 * cuIpcGetMemHandle handle, the host simulator's memfd).  A pool-allocated
 * array exports its pool segment (the backend buffer) and its offset in it,
 * as RMM and PyTorch do; the opener sees only the array's own bytes.
 *
 * An opened handle is a foreign allocation (as dv_device_array_wrap makes):
 * its release -- at the flush after the last view goes, once the device is
 * idle -- closes the backend's mapping.
 */
#include <string.h>
#include <unistd.h>

#include "array.h"

#define DV__IPC_MAGIC "dvIPC"
#define DV__IPC_VERSION 1

typedef struct dv__ipc_header {
  char magic[6];        /* "dvIPC\0" */
  uint16_t version;     /* DV__IPC_VERSION */
  char backend[8];      /* the exporting backend's name, NUL-padded */
  int64_t pid;          /* the exporting process */
  uint64_t range_offset; /* the allocation's bytes in the exported buffer: */
  uint64_t range_bytes;  /*   [range_offset, range_offset + range_bytes) */
  uint64_t elem_offset;  /* element 0 of the exported array, from range_offset */
  unsigned char reserved[16];
} dv__ipc_header;
_Static_assert(sizeof(dv__ipc_header) + DV_BIPC_PAYLOAD <= DV_IPC_HANDLE_SIZE,
               "the header and the backend payload must fit the handle");

/* The backend table has the version-4 methods. */
static bool dv__ipc_capable(const dv_backend *be) {
  return dv__be_has(be, DV_BCAP_IPC);
}

dv_status dv_ipc_export(const dv_array *a, dv_ipc_handle *out) {
  DV_CHECK_NULL(out);
  memset(out, 0, sizeof *out);
  DV_CHECK_NULL(a);
  DV_CHECK_ARRAY(a);
  DV_CHECK_NOT_IN_CALLBACK();
  const dv_alloc *al = a->alloc;
  dv_context *ctx = al->ctx;
  if (al->kind != DV_MEM_DEVICE)
    return dv__error(DV_ERR_MISUSE, "only device arrays can be shared between processes");
  if (al->keep)
    return dv__error(DV_ERR_MISUSE, "a device view of host memory (a mapped scope) cannot be "
                     "shared between processes");
  if (al->foreign || !al->owned)
    return dv__error(DV_ERR_MISUSE,
                     "the array's memory is not devarray's (wrapped, imported or opened from a "
                     "handle): only its owner can share it");
  dv_status rc = dv__check_live(a, "array");
  if (rc) return rc;
  if (!al->buf)
    return dv__error(DV_ERR_INVALID_ARGUMENT, "an empty array has no memory to share");
  if (!dv__ipc_capable(ctx->be))
    return dv__error(DV_ERR_NOT_SUPPORTED, "the %s backend cannot share device memory between "
                     "processes", ctx->be->name);
  unsigned char payload[DV_BIPC_PAYLOAD];
  memset(payload, 0, sizeof payload);
  rc = ctx->be->ipc_export(ctx->bst, al->buf, payload);
  if (rc) return rc;
  dv__ipc_header h;
  memset(&h, 0, sizeof h);
  memcpy(h.magic, DV__IPC_MAGIC, sizeof DV__IPC_MAGIC);
  h.version = DV__IPC_VERSION;
  size_t blen = strlen(ctx->be->name); /* NUL-padded, not NUL-terminated when 8 long */
  memcpy(h.backend, ctx->be->name, blen < sizeof h.backend ? blen : sizeof h.backend);
  h.pid = (int64_t)getpid();
  h.range_offset = al->buf_offset;
  h.range_bytes = al->bytes;
  h.elem_offset = (uint64_t)a->offset;
  memcpy(out->bytes, &h, sizeof h);
  memcpy(out->bytes + sizeof h, payload, sizeof payload);
  return DV_OK;
}

/* What an opened handle's release closes. */
typedef struct dv__ipc_open_rec {
  dv_context *ctx;
  void *token;
} dv__ipc_open_rec;

static void dv__ipc_release(void *user) {
  dv__ipc_open_rec *r = user;
  dv_status rc = r->ctx->be->ipc_close(r->ctx->bst, r->token);
  if (rc) dv__log(DV_LOG_ERROR, "closing an IPC mapping: %s", dv_last_error());
  dv__free(r);
}

dv_status dv_ipc_open(dv_context *ctx, const dv_ipc_handle *handle, int ndim, const int64_t *shape,
                      const dv_dtype *dtype, const int64_t *strides, dv_array **out) {
  DV_CHECK_NULL(out);
  *out = NULL;
  DV_CHECK_NULL(ctx);
  DV_CHECK_HANDLE(ctx, DV_HANDLE_CONTEXT);
  DV_CHECK_NOT_IN_CALLBACK();
  DV_CHECK_NULL(handle);
  DV_CHECK_NULL(dtype);
  dv__ipc_header h;
  memcpy(&h, handle->bytes, sizeof h);
  if (memcmp(h.magic, DV__IPC_MAGIC, sizeof DV__IPC_MAGIC) != 0)
    return dv__error(DV_ERR_INVALID_ARGUMENT, "not a devarray IPC handle");
  if (h.version != DV__IPC_VERSION)
    return dv__error(DV_ERR_INVALID_ARGUMENT, "IPC handle format %u; this devarray reads %d",
                     (unsigned)h.version, DV__IPC_VERSION);
  char be[sizeof h.backend + 1];
  memcpy(be, h.backend, sizeof h.backend);
  be[sizeof h.backend] = 0;
  if (strcmp(be, ctx->be->name) != 0)
    return dv__error(DV_ERR_BACKEND_MISMATCH, "the IPC handle comes from the %s backend; this "
                     "context is %s", be, ctx->be->name);
  if (h.pid == (int64_t)getpid())
    return dv__error(DV_ERR_MISUSE, "the IPC handle was exported by this process: use the array "
                     "itself (or a view of it)");
  if (!dv__ipc_capable(ctx->be))
    return dv__error(DV_ERR_NOT_SUPPORTED, "the %s backend cannot share device memory between "
                     "processes", ctx->be->name);
  dv__ipc_open_rec *rec = dv__malloc(sizeof *rec);
  if (!rec) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate an IPC record");
  void *native = NULL;
  size_t bytes = 0;
  dv_status rc = ctx->be->ipc_open(ctx->bst, handle->bytes + sizeof h, &native, &bytes, &rec->token);
  if (rc) {
    dv__free(rec);
    return rc;
  }
  rec->ctx = ctx;
  if (h.range_offset > bytes || h.range_bytes > bytes - h.range_offset ||
      h.elem_offset > h.range_bytes) {
    rc = dv__error(DV_ERR_INVALID_ARGUMENT, "the IPC handle names bytes [%llu, %llu + %llu) of a "
                   "%zu-byte buffer (damaged handle?)", (unsigned long long)h.range_offset,
                   (unsigned long long)h.range_offset, (unsigned long long)h.range_bytes, bytes);
  } else {
    /* The layout must fit the exported allocation, not the whole buffer. */
    rc = dv_device_array_wrap(ctx, (char *)native + h.range_offset, (size_t)h.elem_offset,
                              (size_t)h.range_bytes, ndim, shape, dtype, strides, dv__ipc_release,
                              rec, out);
  }
  if (rc) {
    ctx->be->ipc_close(ctx->bst, rec->token);
    dv__free(rec);
    return rc;
  }
  return DV_OK;
}

dv_status dv_ipc_close(dv_array *a) {
  DV_CHECK_NULL(a);
  DV_CHECK_ARRAY(a);
  DV_CHECK_NOT_IN_CALLBACK();
  if (!a->alloc->foreign || a->alloc->release != dv__ipc_release)
    return dv__error(DV_ERR_MISUSE, "the array was not opened with dv_ipc_open");
  dv_context *ctx = a->alloc->ctx;
  dv_array_release(a);
  return dv__flush(ctx); /* unmaps now unless other views remain */
}
