/*
 * Smart arrays: one array in two memory spaces (Numba's SmartArray).  A
 * smart array holds up to two arrays, the host copy and the device copy,
 * and a valid bit for each; at least one copy is always valid.  Data moves
 * only when a copy that is asked for is stale, through the public copy
 * (dv_array_copy), so every move is counted like any other transfer.  The
 * missing copy is allocated when first needed, dense in the layout
 * dv_device_array_like would give.
 *
 * The lock serialises the calls on one smart array; the copies' data is
 * the caller's to order, as for arrays.
 */
#include <stdlib.h>
#include <string.h>

#include "smart.h"

struct dv_smart {
  _Atomic int refs;
  dv_context *ctx;
  pthread_mutex_t lock;
  dv_array *copy[2]; /* [DV_WHERE_HOST], [DV_WHERE_DEVICE]; NULL until made */
  bool valid[2];
  /* The stream of the last work queued on the device copy (an upload, a
   * launch, a download), internally retained; NULL before any.  Work queued
   * on another stream waits for it first (an event), so a smart array is
   * safe to use from several streams without the caller's events. */
  dv_stream *dev_stream;
  /* An upload queued on a stream may still be reading the host copy:
   * dv_smart_get(host) waits for dev_stream before handing it out. */
  bool host_read_queued;
};

static const char *dv__where_name(dv_where w) { return w == DV_WHERE_HOST ? "host" : "device"; }

static dv_status dv__check_where(dv_where where) {
  if (where != DV_WHERE_HOST && where != DV_WHERE_DEVICE)
    return dv__error(DV_ERR_INVALID_ARGUMENT,
                     "where is %d: DV_WHERE_HOST (0) or DV_WHERE_DEVICE (1)", (int)where);
  return DV_OK;
}

/* Which copy an array can be: host, pinned and registered memory are the
 * host copy, device memory the device copy.  Mapped and managed memory is
 * addressed by the device already: a smart array over it would only copy
 * what needs no copying. */
static dv_status dv__copy_slot(const dv_array *a, dv_where *where) {
  switch (a->alloc->kind) {
    case DV_MEM_HOST:
    case DV_MEM_PINNED:
      *where = DV_WHERE_HOST;
      return DV_OK;
    case DV_MEM_DEVICE:
      if (!a->alloc->buf && dv_array_size(a) > 0)
        return dv__error(DV_ERR_INVALID_ARGUMENT,
                         "the array is a device view of host memory whose mapped scope has ended");
      if (a->alloc->opaque) return dv__opaque_error(a, "array");
      *where = DV_WHERE_DEVICE;
      return DV_OK;
    default:
      return dv__error(DV_ERR_MISUSE,
                       "a %s array needs no smart array: the device addresses it directly (pass it "
                       "to launches as it is)",
                       a->alloc->kind == DV_MEM_MAPPED ? "mapped" : "managed");
  }
}

/* Pinned memory the backend could not give (bad input is reported as it is). */
static bool dv__pinned_unavailable(dv_status rc) {
  return rc == DV_ERR_OUT_OF_MEMORY || rc == DV_ERR_HOST_OUT_OF_MEMORY ||
         rc == DV_ERR_NOT_SUPPORTED || rc == DV_ERR_DRIVER;
}

static dv_status dv__check_stream_of(const dv_smart *s, const dv_stream *stream) {
  if (stream) DV_CHECK_HANDLE(stream, DV_HANDLE_STREAM);
  if (stream && stream->ctx != s->ctx)
    return dv__error(DV_ERR_BACKEND_MISMATCH, "the stream belongs to another context than the smart array");
  return DV_OK;
}

/* A new smart array holding `a` (its reference is taken over) as the copy
 * in `where`, current. */
static dv_status dv__smart_wrap(dv_array *a, dv_where where, dv_smart **out) {
  dv_smart *s = dv__calloc(1, sizeof *s);
  if (!s) {
    dv_array_release(a);
    return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate a smart array");
  }
  atomic_init(&s->refs, 1);
  s->ctx = a->alloc->ctx;
  pthread_mutex_init(&s->lock, NULL);
  s->copy[where] = a;
  s->valid[where] = true;
  *out = s;
  return DV_OK;
}

dv_status dv_smart_create(dv_context *ctx, int ndim, const int64_t *shape, const dv_dtype *dtype,
                          const int64_t *strides, char order, dv_where where, dv_stream *stream,
                          dv_smart **out) {
  DV_CHECK_NULL(out);
  *out = NULL;
  DV_CHECK_NULL(ctx);
  DV_CHECK_HANDLE(ctx, DV_HANDLE_CONTEXT);
  dv_status rc = dv__check_where(where);
  if (rc) return rc;
  if (stream) DV_CHECK_HANDLE(stream, DV_HANDLE_STREAM);
  if (stream && stream->ctx != ctx)
    return dv__error(DV_ERR_BACKEND_MISMATCH, "the stream belongs to another context");
  dv_array *a = NULL;
  if (where == DV_WHERE_DEVICE)
    rc = dv_device_array(ctx, ndim, shape, dtype, strides, order, stream, &a);
  else {
    rc = dv_pinned_array(ctx, ndim, shape, dtype, strides, order, &a);
    if (dv__pinned_unavailable(rc)) rc = dv_host_array(ctx, ndim, shape, dtype, strides, order, &a);
  }
  if (rc) return rc;
  return dv__smart_wrap(a, where, out);
}

dv_status dv_smart_from_array(dv_array *a, unsigned flags, dv_stream *stream, dv_smart **out) {
  DV_CHECK_NULL(out);
  *out = NULL;
  DV_CHECK_NULL(a);
  DV_CHECK_ARRAY(a);
  if (flags & ~DV_SMART_COPY)
    return dv__error(DV_ERR_INVALID_ARGUMENT, "unknown flags 0x%x for dv_smart_from_array", flags);
  if (stream) DV_CHECK_HANDLE(stream, DV_HANDLE_STREAM);
  if (stream && stream->ctx != a->alloc->ctx)
    return dv__error(DV_ERR_BACKEND_MISMATCH, "the stream belongs to another context than the array");
  dv_where where = DV_WHERE_HOST;
  dv_status rc = dv__copy_slot(a, &where);
  if (rc) return rc;
  dv_array *mine = NULL;
  if (flags & DV_SMART_COPY) {
    int64_t isz = (int64_t)a->dtype->itemsize;
    bool c = dv__layout_is_c(a->ndim, a->shape, a->strides, isz);
    bool f = dv__layout_is_f(a->ndim, a->shape, a->strides, isz);
    rc = dv_array_copy_new(a, (f && !c) ? 'F' : 'C', stream, &mine);
    /* A host copy is read by the host as soon as dv_smart_get returns
     * (nothing is waited for when it is current): the copy must be done. */
    if (!rc && stream && where == DV_WHERE_HOST) rc = dv_stream_synchronize(stream);
    if (rc) {
      dv_array_release(mine);
      return rc;
    }
  } else {
    mine = dv_array_retain(a);
  }
  rc = dv__smart_wrap(mine, where, out);
  /* The copy is the last work queued on the copy: later work on other
   * streams waits for it (dv__smart_order). */
  if (!rc && (flags & DV_SMART_COPY) && stream && where == DV_WHERE_DEVICE)
    (*out)->dev_stream = dv__stream_iretain(stream);
  return rc;
}

dv_status dv_smart_attach(dv_smart *s, dv_array *a) {
  DV_CHECK_NULL(s);
  DV_CHECK_NULL(a);
  DV_CHECK_ARRAY(a);
  dv_where where = DV_WHERE_HOST;
  dv_status rc = dv__copy_slot(a, &where);
  if (rc) return rc;
  if (a->alloc->ctx != s->ctx)
    return dv__error(DV_ERR_BACKEND_MISMATCH, "the array belongs to another context than the smart array");
  pthread_mutex_lock(&s->lock);
  const dv_array *have = s->copy[!where];
  if (s->copy[where]) {
    rc = dv__error(DV_ERR_MISUSE, "the smart array already has a %s copy", dv__where_name(where));
  } else if (!dv_dtype_equal(a->dtype, have->dtype)) {
    rc = dv__error(DV_ERR_DTYPE_MISMATCH, "the smart array has dtype %s; the array has %s",
                   have->dtype->name, a->dtype->name);
  } else {
    bool same = a->ndim == have->ndim;
    for (int i = 0; same && i < a->ndim; i++) same = a->shape[i] == have->shape[i];
    if (!same)
      rc = dv__error(DV_ERR_SHAPE_MISMATCH,
                     "the array's shape differs from the smart array's (%d dimensions, %d given)",
                     have->ndim, a->ndim);
  }
  if (!rc) {
    s->copy[where] = dv_array_retain(a);
    s->valid[where] = false;
  }
  pthread_mutex_unlock(&s->lock);
  return rc;
}

/* Allocate the copy in `where` if s has none: dense, laid out as
 * dv_device_array_like lays out the other copy.  Host copies are pinned
 * when the backend gives pinned memory (faster, and copies on a stream need
 * no staging), else pageable.  Called with the lock held. */
static dv_status dv__smart_alloc(dv_smart *s, dv_where where, dv_stream *stream) {
  if (s->copy[where]) return DV_OK;
  const dv_array *o = s->copy[!where];
  if (where == DV_WHERE_DEVICE) return dv_device_array_like(o, stream, &s->copy[where]);
  int64_t isz = (int64_t)o->dtype->itemsize, st[DV_MAXDIMS];
  bool c = dv__layout_is_c(o->ndim, o->shape, o->strides, isz);
  bool f = dv__layout_is_f(o->ndim, o->shape, o->strides, isz);
  if (o->ndim <= 1 || c || f)
    dv__layout_dense(o->ndim, o->shape, isz, (f && !c) ? 'F' : 'C', st); /* fits: o exists */
  else
    dv__layout_like(o->ndim, o->shape, o->strides, isz, st);
  dv_status rc = dv_pinned_array(s->ctx, o->ndim, o->shape, o->dtype, st, 'C', &s->copy[where]);
  if (dv__pinned_unavailable(rc)) {
    dv__log(DV_LOG_DEBUG, "smart array: no pinned host copy (%s); using pageable memory",
            dv_last_error());
    rc = dv_host_array(s->ctx, o->ndim, o->shape, o->dtype, st, 'C', &s->copy[where]);
  }
  return rc;
}

/* The stream work queued with `stream` goes to (NULL: the default stream). */
static dv_stream *dv__smart_stream(const dv_smart *s, dv_stream *stream) {
  return stream ? stream : dv__default_stream(s->ctx);
}

/* Order work about to be queued on `stream` that uses the device copy after
 * the last work queued on it on another stream.  Lock held. */
static dv_status dv__smart_order(dv_smart *s, dv_stream *stream) {
  dv_stream *next = dv__smart_stream(s, stream);
  if (!s->dev_stream || s->dev_stream == next) return DV_OK;
  dv_event *e = NULL;
  dv_status rc = dv_event_create(s->ctx, 0, &e);
  if (!rc) rc = dv_event_record(e, s->dev_stream);
  if (!rc) rc = dv_stream_wait_event(next, e);
  dv_event_release(e);
  return rc;
}

/* Work that uses the device copy was queued on `stream`.  Lock held. */
static void dv__smart_touched(dv_smart *s, dv_stream *stream) {
  dv_stream *next = dv__smart_stream(s, stream);
  if (s->dev_stream == next) return;
  dv__stream_irelease(s->dev_stream);
  s->dev_stream = dv__stream_iretain(next);
}

/* Make the copy in `where` current (allocating it first), transferring
 * from the other copy on `stream` if it is stale.  Lock held. */
static dv_status dv__smart_update(dv_smart *s, dv_where where, dv_stream *stream, bool *moved) {
  *moved = false;
  dv_status rc = dv__smart_alloc(s, where, stream);
  if (rc || s->valid[where]) return rc;
  rc = dv__smart_order(s, stream);
  if (!rc) rc = dv_array_copy(s->copy[where], s->copy[!where], stream);
  if (rc) return rc;
  dv__smart_touched(s, stream);
  s->valid[where] = true;
  *moved = true;
  if (where == DV_WHERE_DEVICE && stream) s->host_read_queued = true; /* NULL: synchronous */
  return DV_OK;
}

dv_status dv_smart_get(dv_smart *s, dv_where where, dv_stream *stream, dv_array **out) {
  DV_CHECK_NULL(out);
  *out = NULL;
  DV_CHECK_NULL(s);
  dv_status rc = dv__check_where(where);
  if (!rc) rc = dv__check_stream_of(s, stream);
  if (rc) return rc;
  where = where == DV_WHERE_DEVICE ? DV_WHERE_DEVICE : DV_WHERE_HOST; /* checked; for the compiler */
  pthread_mutex_lock(&s->lock);
  bool moved;
  rc = dv__smart_update(s, where, stream, &moved);
  /* The host reads its copy as soon as this returns: wait for the download
   * (a NULL stream was synchronous already).  And the caller may write it
   * as soon as this returns: an upload still reading it is waited for. */
  if (!rc && moved && where == DV_WHERE_HOST && stream) rc = dv_stream_synchronize(stream);
  if (!rc && where == DV_WHERE_HOST && s->host_read_queued) {
    rc = dv_stream_synchronize(s->dev_stream); /* its work waited for earlier streams' */
    if (!rc) s->host_read_queued = false;
  }
  if (!rc && moved && where == DV_WHERE_HOST) s->host_read_queued = false;
  if (!rc) *out = s->copy[where];
  pthread_mutex_unlock(&s->lock);
  return rc;
}

dv_status dv_smart_mark_changed(dv_smart *s, dv_where where) {
  DV_CHECK_NULL(s);
  dv_status rc = dv__check_where(where);
  if (rc) return rc;
  int w = where == DV_WHERE_DEVICE; /* checked: 0 or 1 */
  pthread_mutex_lock(&s->lock);
  if (!s->valid[w]) {
    rc = dv__error(DV_ERR_MISUSE,
                   "the smart array's %s copy is stale: get it (dv_smart_get) before writing it, or "
                   "the data only the other copy holds is lost", dv__where_name(where));
  } else {
    s->valid[!w] = false;
  }
  pthread_mutex_unlock(&s->lock);
  return rc;
}

int dv_smart_is_current(const dv_smart *s, dv_where where) {
  if (!s || (where != DV_WHERE_HOST && where != DV_WHERE_DEVICE)) return 0;
  dv_smart *m = (dv_smart *)s; /* the lock is not part of the value */
  pthread_mutex_lock(&m->lock);
  int v = m->valid[where] ? 1 : 0;
  pthread_mutex_unlock(&m->lock);
  return v;
}

/* The copy that always exists (the first one): shape and dtype of both. */
static const dv_array *dv__smart_any(const dv_smart *s) {
  /* Under the lock: another thread may be storing the copy it is making. */
  dv_smart *m = (dv_smart *)s;
  pthread_mutex_lock(&m->lock);
  const dv_array *a = m->copy[DV_WHERE_HOST] ? m->copy[DV_WHERE_HOST] : m->copy[DV_WHERE_DEVICE];
  pthread_mutex_unlock(&m->lock);
  return a;
}

const dv_dtype *dv_smart_dtype(const dv_smart *s) { return s ? dv__smart_any(s)->dtype : NULL; }

int dv_smart_ndim(const dv_smart *s) { return s ? dv__smart_any(s)->ndim : 0; }

const int64_t *dv_smart_shape(const dv_smart *s) {
  const dv_array *a = s ? dv__smart_any(s) : NULL;
  return a && a->ndim > 0 ? a->shape : NULL;
}

dv_smart *dv_smart_retain(dv_smart *s) {
  if (s) atomic_fetch_add(&s->refs, 1);
  return s;
}

void dv_smart_release(dv_smart *s) {
  if (!s || atomic_fetch_sub(&s->refs, 1) != 1) return;
  dv_array_release(s->copy[DV_WHERE_HOST]);
  dv_array_release(s->copy[DV_WHERE_DEVICE]);
  dv__stream_irelease(s->dev_stream);
  pthread_mutex_destroy(&s->lock);
  dv__free(s);
}

/* ---- for the kernel layer ----------------------------------------------------- */

dv_context *dv__smart_context(const dv_smart *s) { return s->ctx; }

bool dv__smart_device_c_contiguous(dv_smart *s) {
  pthread_mutex_lock(&s->lock);
  const dv_array *d = s->copy[DV_WHERE_DEVICE], *o = d ? d : s->copy[DV_WHERE_HOST];
  int64_t isz = (int64_t)o->dtype->itemsize;
  /* An existing copy as it is; one to be made is dense (any 1-D one is C). */
  bool c = (!d && o->ndim <= 1) || dv__layout_is_c(o->ndim, o->shape, o->strides, isz);
  if (!c && !d && !dv__layout_is_f(o->ndim, o->shape, o->strides, isz)) {
    /* Neither: the copy made is dense in the host copy's stride order,
     * which is C's when the extents > 1 have decreasing strides. */
    c = true;
    int64_t prev = INT64_MAX;
    for (int i = 0; i < o->ndim && c; i++) {
      if (o->shape[i] <= 1) continue;
      int64_t st = o->strides[i] < 0 ? -o->strides[i] : o->strides[i];
      c = st < prev;
      prev = st;
    }
  }
  pthread_mutex_unlock(&s->lock);
  return c;
}

dv_status dv__smart_reserve(dv_smart *s, dv_stream *stream) {
  pthread_mutex_lock(&s->lock);
  dv_status rc = dv__smart_alloc(s, DV_WHERE_DEVICE, stream);
  pthread_mutex_unlock(&s->lock);
  return rc;
}

dv_status dv__smart_for_launch(dv_smart *s, dv_stream *stream, bool upload, dv_array **dev) {
  *dev = NULL;
  pthread_mutex_lock(&s->lock);
  dv_status rc = DV_OK;
  bool moved;
  if (upload) rc = dv__smart_update(s, DV_WHERE_DEVICE, stream, &moved);
  /* The kernel is queued on `stream` next: after earlier work on the copy. */
  if (!rc) rc = dv__smart_order(s, stream);
  if (!rc && s->copy[DV_WHERE_DEVICE]) dv__smart_touched(s, stream);
  if (!rc) *dev = s->copy[DV_WHERE_DEVICE];
  pthread_mutex_unlock(&s->lock);
  if (!rc && !*dev) rc = dv__error(DV_ERR_MISUSE, "smart array: no device copy was reserved");
  return rc;
}

void dv__smart_device_written(dv_smart *s) {
  pthread_mutex_lock(&s->lock);
  s->valid[DV_WHERE_DEVICE] = true;
  s->valid[DV_WHERE_HOST] = false;
  pthread_mutex_unlock(&s->lock);
}
