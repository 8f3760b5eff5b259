/* Communicators, options, statistics, MPI error mapping, dtype mapping,
 * path choice, the cache of pinned staging buffers, and the point-to-point
 * headers: their fields and comparison, the cache of headers a peer
 * accepted, and the rejection notices of eager messages. */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>
#if defined(OPEN_MPI) && OPEN_MPI
#include <mpi-ext.h>
#endif

#include "mpi_internal.h"

#define DV_MPI_CACHE_MAX 8

dv_status dv_mpi__fail(dv_status s, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return dv_error_set(s, msg);
}

dv_status dv_mpi_status_from_mpi(int err, const char *what) {
  if (err == MPI_SUCCESS) return DV_OK;
  char msg[MPI_MAX_ERROR_STRING + 1] = "";
  int len = 0, cls = MPI_ERR_OTHER;
  if (MPI_Error_string(err, msg, &len) != MPI_SUCCESS)
    snprintf(msg, sizeof msg, "MPI error %d", err);
  MPI_Error_class(err, &cls);
  dv_status s = DV_ERR_DRIVER;
  switch (cls) {
    case MPI_ERR_TRUNCATE: s = DV_ERR_SHAPE_MISMATCH; break;
    case MPI_ERR_TYPE: s = DV_ERR_BAD_DTYPE; break;
    case MPI_ERR_COUNT:
    case MPI_ERR_RANK:
    case MPI_ERR_TAG:
    case MPI_ERR_ROOT:
    case MPI_ERR_ARG:
    case MPI_ERR_COMM:
    case MPI_ERR_OP:
    case MPI_ERR_BUFFER: s = DV_ERR_INVALID_ARGUMENT; break;
    case MPI_ERR_NO_MEM: s = DV_ERR_HOST_OUT_OF_MEMORY; break;
    case MPI_ERR_UNSUPPORTED_OPERATION: s = DV_ERR_NOT_SUPPORTED; break;
    default: break;
  }
  return dv_mpi__fail(s, "%s: %s", what ? what : "MPI", msg);
}

dv_status dv_mpi__mpi(int err, const char *what) { return dv_mpi_status_from_mpi(err, what); }

/* ---- options ------------------------------------------------------------ */

static int env_bool(const char *name, int *out) {
  const char *v = getenv(name);
  if (!v || !*v) return 0;
  if (!strcmp(v, "1") || !strcmp(v, "yes") || !strcmp(v, "on") || !strcmp(v, "true"))
    *out = 1;
  else if (!strcmp(v, "0") || !strcmp(v, "no") || !strcmp(v, "off") || !strcmp(v, "false"))
    *out = 0;
  else
    return 0;
  return 1;
}

static size_t env_size(const char *name, size_t dflt) {
  const char *v = getenv(name);
  if (!v || !*v) return dflt;
  char *end = NULL;
  unsigned long long n = strtoull(v, &end, 10);
  if (end == v) return dflt;
  switch (toupper((unsigned char)*end)) {
    case 'K': n <<= 10; break;
    case 'M': n <<= 20; break;
    case 'G': n <<= 30; break;
    default: break;
  }
  return n ? (size_t)n : dflt;
}

static unsigned env_flags(void) {
  unsigned f = 0;
  int b;
  if (env_bool("DV_MPI_STAGED", &b) && b) f |= DV_MPI_FORCE_STAGED;
  if (env_bool("DV_MPI_HEADER", &b) && !b) f |= DV_MPI_NO_HEADER;
  if (env_bool("DV_MPI_PACK", &b) && b) f |= DV_MPI_FORCE_PACK;
  if (env_bool("DV_MPI_PIPELINE", &b) && !b) f |= DV_MPI_NO_PIPELINE;
  return f;
}

/* ---- communicators ------------------------------------------------------- */

static int dup_returning(MPI_Comm comm, MPI_Comm *out) {
  int err = MPI_Comm_dup(comm, out);
  if (err != MPI_SUCCESS) return err;
  return MPI_Comm_set_errhandler(*out, MPI_ERRORS_RETURN);
}

dv_status dv_mpi_comm_create(MPI_Comm comm, unsigned flags, dv_mpi_comm **out) {
  if (!out) return dv_mpi__fail(DV_ERR_NULL_ARGUMENT, "dv_mpi_comm_create: out is NULL");
  *out = NULL;
  int inited = 0, finalized = 0;
  MPI_Initialized(&inited);
  MPI_Finalized(&finalized);
  if (!inited || finalized)
    return dv_mpi__fail(DV_ERR_MISUSE,
                        "dv_mpi_comm_create: MPI is not initialised (call MPI_Init first)");
  if (comm == MPI_COMM_NULL)
    return dv_mpi__fail(DV_ERR_NULL_ARGUMENT, "dv_mpi_comm_create: comm is MPI_COMM_NULL");
  dv_mpi_comm *c = calloc(1, sizeof *c);
  if (!c) return dv_mpi__fail(DV_ERR_HOST_OUT_OF_MEMORY, "dv_mpi_comm_create: no memory");
  c->data = c->hdr = c->ack = c->note = MPI_COMM_NULL;
  int err = dup_returning(comm, &c->data);
  if (err == MPI_SUCCESS) err = dup_returning(comm, &c->hdr);
  if (err == MPI_SUCCESS) err = dup_returning(comm, &c->ack);
  if (err == MPI_SUCCESS) err = dup_returning(comm, &c->note);
  if (err == MPI_SUCCESS) err = MPI_Comm_rank(c->data, &c->rank);
  if (err == MPI_SUCCESS) err = MPI_Comm_size(c->data, &c->size);
  dv_status s = err == MPI_SUCCESS ? DV_OK : dv_mpi__mpi(err, "dv_mpi_comm_create: MPI_Comm_dup");
  if (s == DV_OK) {
    c->notes_sent = calloc((size_t)c->size, sizeof *c->notes_sent);
    c->notes_got = calloc((size_t)c->size, sizeof *c->notes_got);
    if (!c->notes_sent || !c->notes_got)
      s = dv_mpi__fail(DV_ERR_HOST_OUT_OF_MEMORY, "dv_mpi_comm_create: no memory");
  }
  if (s != DV_OK) {
    if (c->data != MPI_COMM_NULL) MPI_Comm_free(&c->data);
    if (c->hdr != MPI_COMM_NULL) MPI_Comm_free(&c->hdr);
    if (c->ack != MPI_COMM_NULL) MPI_Comm_free(&c->ack);
    if (c->note != MPI_COMM_NULL) MPI_Comm_free(&c->note);
    free(c->notes_sent);
    free(c->notes_got);
    free(c);
    return s;
  }
  c->flags = flags | env_flags();
  c->chunk_bytes = env_size("DV_MPI_CHUNK", (size_t)1 << 20);
  *out = c;
  return DV_OK;
}

static void stage_free(dv_mpi_stage *st) {
  for (int i = 0; i < DV_MPI_DEPTH; i++) {
    dv_array_release(st->buf[i]);
    dv_event_release(st->ev_in[i]);
    dv_event_release(st->ev_out[i]);
  }
  dv_dtype_release(st->dtype);
  free(st);
}

/* The rejection notices sent to this rank that it has not taken yet: every
 * rank tells every other how many it sent, and the rest are received here.
 * DV_OK, or the first one's status (its message set). */
static dv_status drain_notices(dv_mpi_comm *c) {
  int *due = calloc((size_t)c->size, sizeof *due);
  if (!due) return dv_mpi__fail(DV_ERR_HOST_OUT_OF_MEMORY, "dv_mpi_comm_destroy: no memory");
  int err = MPI_Alltoall(c->notes_sent, 1, MPI_INT, due, 1, MPI_INT, c->note);
  dv_status first = err == MPI_SUCCESS ? DV_OK : dv_mpi__mpi(err, "dv_mpi_comm_destroy");
  char msg[1024] = "";
  for (int p = 0; p < c->size && err == MPI_SUCCESS; p++) {
    while (c->notes_got[p] < due[p]) {
      char m[1024];
      /* blocks: the notice was sent before its sender reached this call */
      MPI_Status st;
      err = MPI_Probe(p, MPI_ANY_TAG, c->note, &st);
      if (err != MPI_SUCCESS) break;
      dv_status s = dv_mpi__notice_take(c, p, m, sizeof m);
      if (s != DV_OK && first == DV_OK) {
        first = s;
        snprintf(msg, sizeof msg, "dv_mpi_comm_destroy: %.900s", m);
      }
    }
  }
  free(due);
  if (first != DV_OK && msg[0]) dv_error_set(first, msg);
  return first;
}

dv_status dv_mpi_comm_destroy(dv_mpi_comm *c) {
  if (!c) return DV_OK;
  if (atomic_load(&c->pending) > 0)
    return dv_mpi__fail(DV_ERR_BUSY, "dv_mpi_comm_destroy: %d requests are still pending",
                        atomic_load(&c->pending));
  dv_status s = drain_notices(c);
  while (c->cache) {
    dv_mpi_stage *st = c->cache;
    c->cache = st->next;
    stage_free(st);
  }
  while (c->spare) {
    dv_mpi_spare *sp = c->spare;
    c->spare = sp->next;
    free(sp);
  }
  MPI_Comm_free(&c->data);
  MPI_Comm_free(&c->hdr);
  MPI_Comm_free(&c->ack);
  MPI_Comm_free(&c->note);
  free(c->notes_sent);
  free(c->notes_got);
  free(c);
  return s;
}

dv_status dv_mpi_comm_set_flags(dv_mpi_comm *c, unsigned flags) {
  if (!c) return dv_mpi__fail(DV_ERR_NULL_ARGUMENT, "dv_mpi_comm_set_flags: c is NULL");
  c->flags = flags;
  return DV_OK;
}

unsigned dv_mpi_comm_flags(const dv_mpi_comm *c) { return c ? c->flags : 0; }

dv_status dv_mpi_comm_set_chunk(dv_mpi_comm *c, size_t bytes) {
  if (!c) return dv_mpi__fail(DV_ERR_NULL_ARGUMENT, "dv_mpi_comm_set_chunk: c is NULL");
  if (!bytes) return dv_mpi__fail(DV_ERR_INVALID_ARGUMENT, "dv_mpi_comm_set_chunk: chunk size 0");
  c->chunk_bytes = bytes;
  return DV_OK;
}

int dv_mpi_comm_rank(const dv_mpi_comm *c) { return c ? c->rank : -1; }
int dv_mpi_comm_size(const dv_mpi_comm *c) { return c ? c->size : 0; }

dv_status dv_mpi_stats_get(const dv_mpi_comm *c, dv_mpi_stats *out) {
  if (!c || !out) return dv_mpi__fail(DV_ERR_NULL_ARGUMENT, "dv_mpi_stats_get: c or out is NULL");
  dv_mpi_comm *m = (dv_mpi_comm *)c;
  /* The caller's struct: out->size bytes of it (0, or less than version 1's
   * size: version 1's, as a program built before version 2 zeroed it). */
  const size_t v1 = offsetof(dv_mpi_stats, eager);
  size_t have = out->size < v1 ? v1 : out->size > sizeof *out ? sizeof *out : out->size;
  dv_mpi_stats r;
  memset(&r, 0, sizeof r);
  r.version = have >= sizeof r ? DV_MPI_STATS_VERSION : 1;
  r.size = (uint32_t)have;
  for (int i = 0; i < DV_MPI_PATH_COUNT; i++) {
    r.calls[i] = atomic_load(&m->calls[i]);
    r.bytes[i] = atomic_load(&m->bytes[i]);
  }
  r.chunks = atomic_load(&m->chunks);
  r.device_packs = atomic_load(&m->device_packs);
  r.host_packs = atomic_load(&m->host_packs);
  r.derived_types = atomic_load(&m->derived_types);
  r.headers = atomic_load(&m->headers);
  r.mismatches = atomic_load(&m->mismatches);
  r.eager = atomic_load(&m->eager);
  r.late_rejections = atomic_load(&m->late);
  memcpy(out, &r, have);
  return DV_OK;
}

void dv_mpi__count(dv_mpi_comm *c, dv_mpi_path p, int64_t bytes) {
  atomic_fetch_add(&c->calls[p], 1);
  atomic_fetch_add(&c->bytes[p], (uint64_t)(bytes > 0 ? bytes : 0));
}

/* Drive MPI's progress engine (Open MPI progresses non-blocking operations
 * only inside MPI calls). */
void dv_mpi__progress(dv_mpi_comm *c) {
  int flag = 0;
  MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, c->ack, &flag, MPI_STATUS_IGNORE);
}

/* ---- CUDA awareness and paths -------------------------------------------- */

int dv_mpi_cuda_aware(void) {
#if defined(MPIX_CUDA_AWARE_SUPPORT)
  /* The compile-time macro says what the headers were built with; the run-
   * time query what the loaded library supports (a rebuilt Open MPI may
   * differ).  Unverified on a GPU here. */
  return MPIX_Query_cuda_support() ? 1 : 0;
#else
  return 0;
#endif
}

dv_mpi_path dv_mpi__path(const dv_mpi_comm *c, const dv_array *a, void **ptr) {
  void *p = NULL;
  dv_mpi_path path = DV_MPI_PATH_STAGED;
  dv_memory_kind mem = dv_array_memory(a);
  if (mem != DV_MEM_DEVICE) {
    if (dv_array_host_data(a, &p) == DV_OK) path = DV_MPI_PATH_HOST;
  } else {
    const char *be = dv_context_backend(dv_array_context(a));
    void *buf = NULL;
    size_t off = 0;
    if (be && !strcmp(be, "host")) {
      if (dv_array_native(a, &buf, &off) == DV_OK) {
        p = buf ? (char *)buf + off : NULL;
        path = DV_MPI_PATH_HOST;
      }
    } else if (be && !strcmp(be, "cuda") && dv_mpi_cuda_aware()) {
      if (dv_array_native(a, &buf, &off) == DV_OK) {
        p = buf ? (char *)buf + off : NULL;
        path = DV_MPI_PATH_DIRECT;
      }
    }
  }
  if (c->flags & DV_MPI_FORCE_STAGED) path = DV_MPI_PATH_STAGED;
  if (ptr) *ptr = path == DV_MPI_PATH_STAGED ? NULL : p;
  return path;
}

dv_mpi_path dv_mpi_path_of(const dv_mpi_comm *c, const dv_array *a) {
  if (!c || !a) return DV_MPI_PATH_COUNT;
  return dv_mpi__path(c, a, NULL);
}

dv_stream *dv_mpi__stream(const dv_array *a, dv_stream *s) {
  return s ? s : dv_context_default_stream(dv_array_context(a));
}

/* ---- dtypes ---------------------------------------------------------------- */

dv_status dv_mpi__type(const dv_dtype *dt, MPI_Datatype *out, int *owned) {
  *owned = 0;
  switch (dv_dtype_id(dt)) {
    case DV_BOOL: *out = MPI_C_BOOL; return DV_OK;
    case DV_INT8: *out = MPI_INT8_T; return DV_OK;
    case DV_INT16: *out = MPI_INT16_T; return DV_OK;
    case DV_INT32: *out = MPI_INT32_T; return DV_OK;
    case DV_INT64: *out = MPI_INT64_T; return DV_OK;
    case DV_UINT8: *out = MPI_UINT8_T; return DV_OK;
    case DV_UINT16: *out = MPI_UINT16_T; return DV_OK;
    case DV_UINT32: *out = MPI_UINT32_T; return DV_OK;
    case DV_UINT64: *out = MPI_UINT64_T; return DV_OK;
    case DV_FLOAT16: *out = MPI_UINT16_T; return DV_OK; /* moved as bits; reduced by a user op */
    case DV_FLOAT32: *out = MPI_FLOAT; return DV_OK;
    case DV_FLOAT64: *out = MPI_DOUBLE; return DV_OK;
    case DV_COMPLEX64: *out = MPI_C_FLOAT_COMPLEX; return DV_OK;
    case DV_COMPLEX128: *out = MPI_C_DOUBLE_COMPLEX; return DV_OK;
    default: break;
  }
  size_t isz = dv_dtype_itemsize(dt);
  if (!isz || isz > (size_t)INT32_MAX)
    return dv_mpi__fail(DV_ERR_BAD_DTYPE, "dtype %s has no MPI equivalent", dv_dtype_name(dt));
  int err = MPI_Type_contiguous((int)isz, MPI_BYTE, out);
  if (err == MPI_SUCCESS) err = MPI_Type_commit(out);
  if (err != MPI_SUCCESS) return dv_mpi__mpi(err, "MPI_Type_contiguous (record dtype)");
  *owned = 1;
  return DV_OK;
}

int64_t dv_mpi__chunk_elems(const dv_mpi_comm *c, const dv_dtype *dt) {
  size_t isz = dv_dtype_itemsize(dt);
  int64_t n = (int64_t)(c->chunk_bytes / (isz ? isz : 1));
  if (n < 1) n = 1;
  if (n > INT32_MAX) n = INT32_MAX;
  return n;
}

/* 1 when a strided host view may travel as MPI derived datatypes: no
 * negative stride (Open MPI 4.1's datatype engine mis-orders nested
 * hvectors with negative strides, seen in tests/mpi: such views are packed
 * instead).  Point-to-point uses them at any size (one datatype per chunk,
 * dv_mpi__derived_range); collectives up to DV_MPI_DERIVED_MAX and one chunk. */
int dv_mpi__derivable(const dv_array *a) {
  for (int d = 0; d < dv_array_ndim(a); d++)
    if (dv_array_strides(a)[d] < 0 && dv_array_shape(a)[d] > 1) return 0;
  return 1;
}

/* An MPI datatype that walks a's elements in C order from element 0. */
dv_status dv_mpi__derived(const dv_array *a, MPI_Datatype elem, MPI_Datatype *out) {
  int nd = dv_array_ndim(a);
  const int64_t *sh = dv_array_shape(a), *st = dv_array_strides(a);
  MPI_Datatype t = elem;
  int owned = 0;
  for (int d = nd - 1; d >= 0; d--) {
    if (sh[d] == 1) continue;
    if (sh[d] > INT32_MAX) {
      if (owned) MPI_Type_free(&t);
      return dv_mpi__fail(DV_ERR_OVERFLOW, "extent %lld exceeds MPI's int count", (long long)sh[d]);
    }
    MPI_Datatype nt;
    int err = MPI_Type_create_hvector((int)sh[d], 1, (MPI_Aint)st[d], t, &nt);
    if (owned) MPI_Type_free(&t);
    if (err != MPI_SUCCESS) return dv_mpi__mpi(err, "MPI_Type_create_hvector");
    t = nt;
    owned = 1;
  }
  if (!owned) {
    int err = MPI_Type_dup(elem, &t);
    if (err != MPI_SUCCESS) return dv_mpi__mpi(err, "MPI_Type_dup");
  }
  int err = MPI_Type_commit(&t);
  if (err != MPI_SUCCESS) {
    MPI_Type_free(&t);
    return dv_mpi__mpi(err, "MPI_Type_commit");
  }
  *out = t;
  return DV_OK;
}

/* The elements [lo, lo + cnt) in C order of the (nd, shape, strides) block
 * at byte 0, as a new datatype (not committed). */
static int range_type(int nd, const int64_t *sh, const int64_t *st, MPI_Datatype elem, int64_t lo,
                      int64_t cnt, MPI_Datatype *out) {
  while (nd > 0 && sh[0] == 1) nd--, sh++, st++; /* a size-1 dimension adds nothing */
  if (nd == 0) return MPI_Type_dup(elem, out);
  int64_t inner = 1;
  for (int d = 1; d < nd; d++) inner *= sh[d];
  int64_t end = lo + cnt, i0 = lo / inner, o0 = lo % inner, i1 = end / inner, o1 = end % inner;
  if (i0 == i1 || (i0 + 1 == i1 && o1 == 0 && o0 > 0)) { /* within one row of dimension 0 */
    MPI_Datatype t;
    int err = range_type(nd - 1, sh + 1, st + 1, elem, o0, cnt, &t);
    if (err != MPI_SUCCESS) return err;
    MPI_Aint disp = (MPI_Aint)(i0 * st[0]);
    int one = 1;
    err = MPI_Type_create_struct(1, &one, &disp, &t, out);
    MPI_Type_free(&t);
    return err;
  }
  MPI_Datatype part[3];
  MPI_Aint disp[3];
  int len[3] = {1, 1, 1}, np = 0, err = MPI_SUCCESS;
  int64_t full_lo = i0;
  if (o0 > 0) { /* the head: the end of row i0 */
    err = range_type(nd - 1, sh + 1, st + 1, elem, o0, inner - o0, &part[np]);
    disp[np++] = (MPI_Aint)(i0 * st[0]);
    full_lo = i0 + 1;
  }
  if (err == MPI_SUCCESS && i1 > full_lo) { /* whole rows */
    MPI_Datatype row;
    err = range_type(nd - 1, sh + 1, st + 1, elem, 0, inner, &row);
    if (err == MPI_SUCCESS) {
      err = MPI_Type_create_hvector((int)(i1 - full_lo), 1, (MPI_Aint)st[0], row, &part[np]);
      MPI_Type_free(&row);
      if (err == MPI_SUCCESS) disp[np++] = (MPI_Aint)(full_lo * st[0]);
    }
  }
  if (err == MPI_SUCCESS && o1 > 0) { /* the tail: the start of row i1 */
    err = range_type(nd - 1, sh + 1, st + 1, elem, 0, o1, &part[np]);
    if (err == MPI_SUCCESS) disp[np++] = (MPI_Aint)(i1 * st[0]);
  }
  if (err == MPI_SUCCESS) err = MPI_Type_create_struct(np, len, disp, part, out);
  for (int i = 0; i < np; i++) MPI_Type_free(&part[i]);
  return err;
}

dv_status dv_mpi__derived_range(const dv_array *a, MPI_Datatype elem, int64_t lo, int64_t cnt,
                                MPI_Datatype *out) {
  int nd = dv_array_ndim(a);
  const int64_t *sh = dv_array_shape(a);
  for (int d = 0; d < nd; d++)
    if (sh[d] > INT32_MAX)
      return dv_mpi__fail(DV_ERR_OVERFLOW, "extent %lld exceeds MPI's int count", (long long)sh[d]);
  int err = range_type(nd, sh, dv_array_strides(a), elem, lo, cnt, out);
  if (err == MPI_SUCCESS) {
    err = MPI_Type_commit(out);
    if (err != MPI_SUCCESS) MPI_Type_free(out);
  }
  return err == MPI_SUCCESS ? DV_OK : dv_mpi__mpi(err, "MPI datatype of a chunk");
}

/* A C-dense array like a (device memory when a is device memory), filled
 * from `from` (a itself, or an array of a's shape) unless it is NULL. */
dv_status dv_mpi__dense_c(dv_mpi_comm *c, const dv_array *a, dv_stream *s, const dv_array *from,
                          dv_array **out) {
  *out = NULL;
  dv_context *ctx = dv_array_context(a);
  int nd = dv_array_ndim(a);
  dv_status st;
  int dev = dv_array_memory(a) == DV_MEM_DEVICE || dv_array_memory(a) == DV_MEM_MANAGED;
  if (dev)
    st = dv_device_array(ctx, nd, dv_array_shape(a), dv_array_dtype(a), NULL, 'C', s, out);
  else
    st = dv_host_array(ctx, nd, dv_array_shape(a), dv_array_dtype(a), NULL, 'C', out);
  if (st != DV_OK) return st;
  atomic_fetch_add(dev ? &c->device_packs : &c->host_packs, 1);
  if (from) {
    st = dv_array_copy(*out, from, s);
    if (st != DV_OK) {
      dv_array_release(*out);
      *out = NULL;
    }
  }
  return st;
}

/* ---- the staging cache ------------------------------------------------------ */

dv_status dv_mpi__stage_get(dv_mpi_comm *c, dv_context *ctx, const dv_dtype *dt, int64_t chunk,
                            dv_mpi_stage **out) {
  *out = NULL;
  for (dv_mpi_stage **pp = &c->cache; *pp; pp = &(*pp)->next) {
    dv_mpi_stage *st = *pp;
    if (st->ctx == ctx && st->chunk == chunk && dv_dtype_equal(st->dtype, dt)) {
      *pp = st->next;
      c->ncache--;
      st->next = NULL;
      *out = st;
      return DV_OK;
    }
  }
  dv_mpi_stage *st = calloc(1, sizeof *st);
  if (!st) return dv_mpi__fail(DV_ERR_HOST_OUT_OF_MEMORY, "staging buffers: no memory");
  st->ctx = ctx;
  st->dtype = dv_dtype_retain(dt);
  st->chunk = chunk;
  dv_status s = DV_OK;
  for (int i = 0; i < DV_MPI_DEPTH && s == DV_OK; i++) {
    s = dv_pinned_array(ctx, 1, &chunk, dt, NULL, 'C', &st->buf[i]);
    if (s == DV_OK) s = dv_array_host_data(st->buf[i], &st->host[i]);
    if (s == DV_OK) s = dv_event_create(ctx, 0, &st->ev_in[i]);
    if (s == DV_OK) s = dv_event_create(ctx, 0, &st->ev_out[i]);
  }
  if (s != DV_OK) {
    stage_free(st);
    return s;
  }
  *out = st;
  return DV_OK;
}

void dv_mpi__stage_put(dv_mpi_comm *c, dv_mpi_stage *st) {
  if (!st) return;
  if (c->ncache >= DV_MPI_CACHE_MAX) {
    stage_free(st);
    return;
  }
  st->next = c->cache;
  c->cache = st;
  c->ncache++;
}

/* ---- point-to-point headers ------------------------------------------------- */

void dv_mpi__hdr_fill(int64_t *h, const dv_array *a, int64_t chunk, dv_status err, int64_t mode) {
  h[HDR_MAGIC] = DV_MPI_HDR_MAGIC;
  h[HDR_ERR] = err;
  h[HDR_MODE] = mode;
  h[HDR_DTYPE] = h[HDR_ITEMSIZE] = h[HDR_CHUNK] = h[HDR_NDIM] = 0;
  if (!a) return;
  h[HDR_DTYPE] = dv_dtype_id(dv_array_dtype(a));
  h[HDR_ITEMSIZE] = (int64_t)dv_dtype_itemsize(dv_array_dtype(a));
  h[HDR_CHUNK] = chunk;
  h[HDR_NDIM] = dv_array_ndim(a);
  for (int d = 0; d < dv_array_ndim(a); d++) h[HDR_SHAPE + d] = dv_array_shape(a)[d];
}

int dv_mpi__hdr_len(const int64_t *h) {
  int64_t nd = h[HDR_NDIM];
  return HDR_SHAPE + (nd < 0 ? 0 : nd > DV_MAXDIMS ? DV_MAXDIMS : (int)nd);
}

static void shape_str(const int64_t *h, char *buf, size_t cap) {
  size_t o = 0;
  o += (size_t)snprintf(buf + o, cap - o, "(");
  for (int64_t d = 0; d < h[HDR_NDIM] && d < DV_MAXDIMS && o < cap; d++)
    o += (size_t)snprintf(buf + o, cap - o, "%s%lld", d ? ", " : "", (long long)h[HDR_SHAPE + d]);
  if (o < cap) snprintf(buf + o, cap - o, ")");
}

static const char *dtype_str(const int64_t *h) {
  const dv_dtype *dt = dv_dtype_get((dv_type_id)h[HDR_DTYPE]);
  return dt ? dv_dtype_name(dt) : "record";
}

void dv_mpi__hdr_describe(const int64_t *h, char *buf, size_t cap) {
  char sh[200];
  shape_str(h, sh, sizeof sh);
  if (h[HDR_ERR])
    snprintf(buf, cap, "(failed its own checks)");
  else
    snprintf(buf, cap, "%s %s", dtype_str(h), sh);
}

dv_status dv_mpi__hdr_compare(const int64_t *sent, const int64_t *mine, int sender, int receiver,
                              char *msg, size_t cap) {
  char s1[256], s2[256];
  if (sent[HDR_MAGIC] != DV_MPI_HDR_MAGIC) {
    snprintf(msg, cap,
             "rank %d sent a message that is not a devarray header (is DV_MPI_NO_HEADER set on one "
             "side only?)",
             sender);
    return DV_ERR_INVALID_ARGUMENT;
  }
  if (sent[HDR_ERR]) {
    if (sent[HDR_MODE] == DV_MPI_LATE)
      snprintf(msg, cap,
               "rank %d reports that its earlier message to rank %d was rejected there (%s); this "
               "message fails on both ranks and moves nothing",
               sender, receiver, dv_status_name((dv_status)sent[HDR_ERR]));
    else
      snprintf(msg, cap, "sender rank %d failed its own checks (%s)", sender,
               dv_status_name((dv_status)sent[HDR_ERR]));
    return (dv_status)sent[HDR_ERR];
  }
  if (mine[HDR_ERR]) {
    snprintf(msg, cap, "receiver rank %d failed its own checks (%s)", receiver,
             dv_status_name((dv_status)mine[HDR_ERR]));
    return (dv_status)mine[HDR_ERR];
  }
  if (sent[HDR_DTYPE] != mine[HDR_DTYPE] || sent[HDR_ITEMSIZE] != mine[HDR_ITEMSIZE]) {
    snprintf(msg, cap,
             "dtype mismatch: rank %d sends %s (%lld bytes), rank %d receives %s (%lld bytes)",
             sender, dtype_str(sent), (long long)sent[HDR_ITEMSIZE], receiver, dtype_str(mine),
             (long long)mine[HDR_ITEMSIZE]);
    return DV_ERR_DTYPE_MISMATCH;
  }
  int same = sent[HDR_NDIM] == mine[HDR_NDIM];
  for (int64_t d = 0; same && d < sent[HDR_NDIM] && d < DV_MAXDIMS; d++)
    same = sent[HDR_SHAPE + d] == mine[HDR_SHAPE + d];
  if (!same) {
    shape_str(sent, s1, sizeof s1);
    shape_str(mine, s2, sizeof s2);
    snprintf(msg, cap, "shape mismatch: rank %d sends %.120s, rank %d receives %.120s", sender, s1,
             receiver, s2);
    return DV_ERR_SHAPE_MISMATCH;
  }
  return DV_OK;
}

/* ---- the acceptance cache (sender side) ------------------------------------------ */

/* Equal for the cache: dtype, itemsize, chunk size, ndim and shape (not the mode). */
static int same_header(const int64_t *a, const int64_t *b) {
  if (a[HDR_ERR] || b[HDR_ERR] || a[HDR_NDIM] != b[HDR_NDIM]) return 0;
  int n = dv_mpi__hdr_len(a);
  return !memcmp(a + HDR_DTYPE, b + HDR_DTYPE, sizeof(int64_t) * (size_t)(n - HDR_DTYPE));
}

int dv_mpi__seen(const dv_mpi_comm *c, int peer, int tag, const int64_t *h) {
  for (int i = 0; i < DV_MPI_SEEN_MAX; i++) {
    const dv_mpi_seen *e = &c->seen[i];
    if (e->used && e->peer == peer && e->tag == tag && same_header(e->hdr, h)) return 1;
  }
  return 0;
}

void dv_mpi__seen_add(dv_mpi_comm *c, int peer, int tag, const int64_t *h) {
  dv_mpi_seen *slot = NULL;
  for (int i = 0; i < DV_MPI_SEEN_MAX && !slot; i++) /* one entry per (peer, tag) */
    if (c->seen[i].used && c->seen[i].peer == peer && c->seen[i].tag == tag) slot = &c->seen[i];
  if (!slot) {
    slot = &c->seen[c->seen_next];
    c->seen_next = (c->seen_next + 1) % DV_MPI_SEEN_MAX;
  }
  slot->used = 1;
  slot->peer = peer;
  slot->tag = tag;
  memcpy(slot->hdr, h, sizeof(int64_t) * (size_t)dv_mpi__hdr_len(h));
}

/* ---- rejection notices ------------------------------------------------------------- */

dv_status dv_mpi__notice_take(dv_mpi_comm *c, int peer, char *msg, size_t cap) {
  dv_status first = DV_OK;
  for (;;) {
    int flag = 0;
    MPI_Status st;
    int err = MPI_Iprobe(peer, MPI_ANY_TAG, c->note, &flag, &st);
    if (err != MPI_SUCCESS || !flag) return first;
    int64_t note[DV_MPI_NOTE_LEN];
    err = MPI_Recv(note, DV_MPI_NOTE_LEN, MPI_INT64_T, st.MPI_SOURCE, st.MPI_TAG, c->note,
                   MPI_STATUS_IGNORE);
    if (err != MPI_SUCCESS) return first != DV_OK ? first : dv_mpi__mpi(err, "rejection notice");
    int src = st.MPI_SOURCE;
    c->notes_got[src]++;
    atomic_fetch_add(&c->late, 1);
    for (int i = 0; i < DV_MPI_SEEN_MAX; i++)
      if (c->seen[i].peer == src) c->seen[i].used = 0;
    if (first == DV_OK) {
      char sent[256], theirs[256];
      first = note[0] ? (dv_status)note[0] : DV_ERR_INVALID_ARGUMENT;
      dv_mpi__hdr_describe(note + 1, sent, sizeof sent);
      dv_mpi__hdr_describe(note + 1 + DV_MPI_HDR_LEN, theirs, sizeof theirs);
      snprintf(msg, cap,
               "rank %d rejected an earlier message of rank %d with tag %d (%s), sent without a "
               "round trip once that header had been accepted: sent %s, receiver has %s",
               src, c->rank, st.MPI_TAG, dv_status_name(first), sent, theirs);
    }
  }
}
