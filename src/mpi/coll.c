/* Collectives: broadcast, allreduce, gather, allgather.
 *
 * Before data moves, every rank contributes its fields (operation, root,
 * dtype, shape, chunk size, reduction, and its local error if any) to one
 * MPI_Allreduce(MAX) of (fields, -fields, error): a field whose maximum is
 * not minus the maximum of its negation differs between ranks.  Every rank
 * sees the same result and returns the same status.
 *
 * Broadcast and allreduce move chunk by chunk with the non-blocking
 * collectives on every path (a blocking collective never matches a
 * non-blocking one, and ranks may take different paths).  Gather and
 * allgather use one blocking call on host memory (staged arrays through
 * one pinned buffer). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_internal.h"

enum { K_BCAST = 1, K_ALLREDUCE, K_GATHER, K_ALLGATHER };
enum { F_KIND, F_ROOT, F_DTYPE, F_ITEMSIZE, F_NDIM, F_SIZE, F_SHAPE, F_CHUNK, F_OP, F_COUNT };
static const char *const field_name[F_COUNT] = {
    "operation", "root", "dtype", "itemsize", "ndim", "size", "shape", "chunk size", "reduction"};

static int64_t shape_hash(const dv_array *a) {
  uint64_t h = 1469598103934665603ull;
  for (int d = 0; d < dv_array_ndim(a); d++) {
    h ^= (uint64_t)dv_array_shape(a)[d];
    h *= 1099511628211ull;
  }
  return (int64_t)(h >> 1);
}

/* The header exchange of a collective; `a` is the array whose dtype and
 * shape must agree (may be NULL when local != DV_OK). */
static dv_status check(dv_mpi_comm *c, int kind, int root, const dv_array *a, int op,
                       dv_status local, const char *lmsg) {
  if (c->flags & DV_MPI_NO_HEADER) return local == DV_OK ? DV_OK : dv_error_set(local, lmsg);
  int64_t v[2 * F_COUNT + 1];
  memset(v, 0, sizeof v);
  v[F_KIND] = kind;
  v[F_ROOT] = root;
  v[F_OP] = op;
  if (a) {
    v[F_DTYPE] = dv_dtype_id(dv_array_dtype(a));
    v[F_ITEMSIZE] = (int64_t)dv_dtype_itemsize(dv_array_dtype(a));
    v[F_NDIM] = dv_array_ndim(a);
    v[F_SIZE] = dv_array_size(a);
    v[F_SHAPE] = shape_hash(a);
    v[F_CHUNK] = dv_mpi__chunk_elems(c, dv_array_dtype(a));
  }
  int64_t mine[F_COUNT];
  memcpy(mine, v, sizeof mine);
  for (int i = 0; i < F_COUNT; i++) v[F_COUNT + i] = -v[i];
  v[2 * F_COUNT] = local;
  atomic_fetch_add(&c->headers, 1);
  int err = MPI_Allreduce(MPI_IN_PLACE, v, 2 * F_COUNT + 1, MPI_INT64_T, MPI_MAX, c->hdr);
  if (err != MPI_SUCCESS) return dv_mpi__mpi(err, "collective header exchange");
  if (local != DV_OK) return dv_error_set(local, lmsg);
  if (v[2 * F_COUNT] != 0) {
    atomic_fetch_add(&c->mismatches, 1);
    return dv_mpi__fail((dv_status)v[2 * F_COUNT],
                        "another rank of the communicator failed its own checks (%s)",
                        dv_status_name((dv_status)v[2 * F_COUNT]));
  }
  for (int i = 0; i < F_COUNT; i++) {
    if (v[i] == -v[F_COUNT + i]) continue;
    atomic_fetch_add(&c->mismatches, 1);
    dv_status s = i == F_DTYPE || i == F_ITEMSIZE              ? DV_ERR_DTYPE_MISMATCH
                  : i == F_NDIM || i == F_SIZE || i == F_SHAPE ? DV_ERR_SHAPE_MISMATCH
                                                               : DV_ERR_INVALID_ARGUMENT;
    if (i == F_SHAPE)
      return dv_mpi__fail(s, "shape mismatch between ranks (sizes %lld..%lld; this rank %lld)",
                          (long long)-v[F_COUNT + F_SIZE], (long long)v[F_SIZE],
                          (long long)mine[F_SIZE]);
    return dv_mpi__fail(s, "%s differs between ranks: from %lld to %lld (this rank: %lld)",
                        field_name[i], (long long)-v[F_COUNT + i], (long long)v[i],
                        (long long)mine[i]);
  }
  return DV_OK;
}

/* ---- the chunked non-blocking collectives ----------------------------------- */

typedef struct coll {
  dv_mpi_comm *c;
  int kind, root;
  MPI_Datatype type;
  MPI_Op op;
} coll;

static int coll_chunk(void *arg, int64_t k, void *buf, int count, MPI_Request *req) {
  coll *x = arg;
  (void)k;
  if (x->kind == K_BCAST) return MPI_Ibcast(buf, count, x->type, x->root, x->c->data, req);
  return MPI_Iallreduce(MPI_IN_PLACE, buf, count, x->type, x->op, x->c->data, req);
}

/* Broadcast or allreduce of `a` on any path, in two steps: prepare (every
 * local allocation, packing and copy; before the header check, so that a
 * failure there is reported to every rank) and run. */
typedef struct moving {
  dv_array *a, *dense;
  dv_stream *s;
  dv_mpi_path path;
  void *ptr;
  MPI_Datatype derived;
  int64_t n, chunk, nchunks;
  int in, out, use_pipe;
  dv_mpi_pipe pipe;
} moving;

/* src: the data to reduce when it is not a itself (allreduce's send). */
static dv_status move_prepare(coll *x, moving *m, dv_array *a, const dv_array *src, dv_stream *s) {
  dv_mpi_comm *c = x->c;
  dv_status st;
  m->a = a;
  m->s = s;
  m->path = dv_mpi__path(c, a, &m->ptr);
  m->n = dv_array_size(a);
  m->chunk = dv_mpi__chunk_elems(c, dv_array_dtype(a));
  m->nchunks = m->n ? (m->n + m->chunk - 1) / m->chunk : 0;
  m->in = x->kind != K_BCAST || c->rank == x->root;
  m->out = x->kind != K_BCAST || c->rank != x->root;
  const dv_array *from = src ? src : m->in ? a : NULL;
  int contiguous = dv_array_is_c_contiguous(a);
  if (!src && !contiguous && x->kind == K_BCAST && m->path == DV_MPI_PATH_HOST && m->nchunks <= 1 &&
      !(c->flags & DV_MPI_FORCE_PACK) && dv_array_nbytes(a) <= DV_MPI_DERIVED_MAX &&
      dv_mpi__derivable(a)) {
    if ((st = dv_mpi__derived(a, x->type, &m->derived)) != DV_OK) return st;
    atomic_fetch_add(&c->derived_types, 1);
  } else if (src || !contiguous) {
    if ((st = dv_mpi__dense_c(c, a, s, from, &m->dense)) != DV_OK) return st;
    dv_mpi__path(c, m->dense, &m->ptr);
  }
  if (m->path == DV_MPI_PATH_STAGED) {
    st = dv_mpi__pipe_start(&m->pipe, c, m->dense ? m->dense : a, s, m->chunk, m->in, m->out,
                            coll_chunk, x);
    if (st != DV_OK) return st;
    m->use_pipe = 1;
    return DV_OK;
  }
  return dv_stream_synchronize(s);
}

static dv_status move_run(coll *x, moving *m) {
  dv_mpi_comm *c = x->c;
  dv_status st = DV_OK;
  if (m->use_pipe) {
    st = dv_mpi__pipe_run(&m->pipe); /* frees the pipe, also on failure */
    m->use_pipe = 0;
  } else {
    size_t isz = dv_dtype_itemsize(dv_array_dtype(m->a));
    for (int64_t k = 0; k < m->nchunks && st == DV_OK; k++) {
      MPI_Request r;
      int err;
      if (m->derived != MPI_DATATYPE_NULL) {
        err = MPI_Ibcast(m->ptr, 1, m->derived, x->root, c->data, &r);
      } else {
        int64_t lo = k * m->chunk, cnt = m->n - lo < m->chunk ? m->n - lo : m->chunk;
        err = coll_chunk(x, k, (char *)m->ptr + (size_t)lo * isz, (int)cnt, &r);
      }
      if (err == MPI_SUCCESS) err = MPI_Wait(&r, MPI_STATUS_IGNORE);
      if (err != MPI_SUCCESS)
        st = dv_mpi__mpi(err, x->kind == K_BCAST ? "MPI_Ibcast" : "MPI_Iallreduce");
    }
  }
  if (st == DV_OK && m->out && m->dense) st = dv_array_copy(m->a, m->dense, m->s);
  if (st == DV_OK && m->dense) st = dv_stream_synchronize(m->s);
  if (st == DV_OK) dv_mpi__count(c, m->path, dv_array_nbytes(m->a));
  return st;
}

static void move_end(moving *m) {
  if (m->use_pipe) dv_mpi__pipe_abort(&m->pipe);
  if (m->derived != MPI_DATATYPE_NULL) MPI_Type_free(&m->derived);
  dv_array_release(m->dense);
}

DV_API dv_status dv_mpi_bcast(dv_mpi_comm *c, dv_array *a, int root, dv_stream *stream) {
  if (!c) return dv_mpi__fail(DV_ERR_NULL_ARGUMENT, "dv_mpi_bcast: c is NULL");
  dv_status local = DV_OK;
  char msg[512] = "";
  coll x = {c, K_BCAST, root, MPI_DATATYPE_NULL, MPI_OP_NULL};
  moving m;
  memset(&m, 0, sizeof m);
  m.derived = MPI_DATATYPE_NULL;
  int owned = 0;
  if (!a) {
    local = DV_ERR_NULL_ARGUMENT;
    snprintf(msg, sizeof msg, "dv_mpi_bcast: array is NULL");
  } else if (root < 0 || root >= c->size) {
    local = DV_ERR_INVALID_ARGUMENT;
    snprintf(msg, sizeof msg, "dv_mpi_bcast: root %d outside the communicator (size %d)", root,
             c->size);
  } else if ((local = dv_mpi__type(dv_array_dtype(a), &x.type, &owned)) != DV_OK ||
             (local = move_prepare(&x, &m, a, NULL, dv_mpi__stream(a, stream))) != DV_OK) {
    snprintf(msg, sizeof msg, "%s", dv_last_error());
  }
  dv_status s = check(c, K_BCAST, root, a, 0, local, msg);
  if (s == DV_OK) s = move_run(&x, &m);
  move_end(&m);
  if (owned) MPI_Type_free(&x.type);
  return s;
}

/* ---- float16 reductions (MPI has no half type) -------------------------------- */

static float h2f(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu, f;
  if (exp == 0) {
    if (man == 0) {
      f = sign;
    } else {
      exp = 127 - 15 + 1;
      while (!(man & 0x400u)) {
        man <<= 1;
        exp--;
      }
      f = sign | (exp << 23) | ((man & 0x3ffu) << 13);
    }
  } else if (exp == 31) {
    f = sign | 0x7f800000u | (man << 13);
  } else {
    f = sign | ((exp + 127 - 15) << 23) | (man << 13);
  }
  float out;
  memcpy(&out, &f, sizeof out);
  return out;
}

static uint16_t f2h(float x) {
  uint32_t f;
  memcpy(&f, &x, sizeof f);
  uint32_t sign = (f >> 16) & 0x8000u, man = f & 0x7fffffu;
  int32_t e = (int32_t)((f >> 23) & 0xffu);
  if (e == 0xff) return (uint16_t)(sign | 0x7c00u | (man ? 0x200u : 0));
  int32_t exp = e - 127 + 15;
  if (exp >= 31) return (uint16_t)(sign | 0x7c00u);
  if (exp <= 0) {
    if (exp < -10) return (uint16_t)sign;
    man |= 0x800000u;
    uint32_t shift = (uint32_t)(14 - exp);
    uint32_t h = man >> shift, rem = man & ((1u << shift) - 1), mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (h & 1u))) h++;
    return (uint16_t)(sign | h);
  }
  uint32_t h = sign | ((uint32_t)exp << 10) | (man >> 13), rem = man & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++;
  return (uint16_t)h;
}

#define DV_MPI_HALF_OP(name, expr)                                      \
  static void name(void *in, void *inout, int *len, MPI_Datatype *dt) { \
    (void)dt;                                                           \
    const uint16_t *a = in;                                             \
    uint16_t *b = inout;                                                \
    for (int i = 0; i < *len; i++) {                                    \
      float x = h2f(a[i]), y = h2f(b[i]);                               \
      b[i] = f2h(expr);                                                 \
    }                                                                   \
  }
DV_MPI_HALF_OP(half_sum, x + y)
DV_MPI_HALF_OP(half_prod, x *y)
DV_MPI_HALF_OP(half_min, y < x ? y : x)
DV_MPI_HALF_OP(half_max, y > x ? y : x)

/* The MPI type and operation for op on dt; *user_op when created here. */
static dv_status reduction(const dv_dtype *dt, dv_mpi_op op, MPI_Datatype *type, MPI_Op *mop,
                           int *user_op) {
  *user_op = 0;
  dv_type_id id = dv_dtype_id(dt);
  if (op < DV_MPI_SUM || op > DV_MPI_MAX)
    return dv_mpi__fail(DV_ERR_INVALID_ARGUMENT, "dv_mpi_allreduce: unknown reduction %d", (int)op);
  if (id == DV_RECORD || id >= DV_TYPE_COUNT)
    return dv_mpi__fail(DV_ERR_NOT_SUPPORTED, "dv_mpi_allreduce: record dtypes cannot be reduced");
  if ((id == DV_COMPLEX64 || id == DV_COMPLEX128) && (op == DV_MPI_MIN || op == DV_MPI_MAX))
    return dv_mpi__fail(DV_ERR_NOT_SUPPORTED,
                        "dv_mpi_allreduce: %s has no order (min/max undefined)", dv_dtype_name(dt));
  int owned = 0;
  dv_status s = dv_mpi__type(dt, type, &owned);
  if (s != DV_OK) return s;
  if (id == DV_FLOAT16) {
    MPI_User_function *fn = op == DV_MPI_SUM    ? half_sum
                            : op == DV_MPI_PROD ? half_prod
                            : op == DV_MPI_MIN  ? half_min
                                                : half_max;
    int err = MPI_Op_create(fn, 1, mop);
    if (err != MPI_SUCCESS) return dv_mpi__mpi(err, "MPI_Op_create (float16)");
    *user_op = 1;
    return DV_OK;
  }
  if (id == DV_BOOL) {
    *mop = op == DV_MPI_SUM || op == DV_MPI_MAX ? MPI_LOR : MPI_LAND;
    return DV_OK;
  }
  *mop = op == DV_MPI_SUM    ? MPI_SUM
         : op == DV_MPI_PROD ? MPI_PROD
         : op == DV_MPI_MIN  ? MPI_MIN
                             : MPI_MAX;
  return DV_OK;
}

static int same_shape(const dv_array *a, const dv_array *b) {
  if (dv_array_ndim(a) != dv_array_ndim(b)) return 0;
  for (int d = 0; d < dv_array_ndim(a); d++)
    if (dv_array_shape(a)[d] != dv_array_shape(b)[d]) return 0;
  return 1;
}

DV_API dv_status dv_mpi_allreduce(dv_mpi_comm *c, const dv_array *send, dv_array *recv,
                                  dv_mpi_op op, dv_stream *stream) {
  if (!c) return dv_mpi__fail(DV_ERR_NULL_ARGUMENT, "dv_mpi_allreduce: c is NULL");
  dv_status local = DV_OK;
  char msg[512] = "";
  coll x = {c, K_ALLREDUCE, 0, MPI_DATATYPE_NULL, MPI_OP_NULL};
  int user_op = 0;
  if (send == recv) send = NULL;
  if (!recv) {
    local = DV_ERR_NULL_ARGUMENT;
    snprintf(msg, sizeof msg, "dv_mpi_allreduce: recv is NULL");
  } else if (send && !dv_dtype_equal(dv_array_dtype(send), dv_array_dtype(recv))) {
    local = DV_ERR_DTYPE_MISMATCH;
    snprintf(msg, sizeof msg, "dv_mpi_allreduce: send is %s, recv is %s",
             dv_dtype_name(dv_array_dtype(send)), dv_dtype_name(dv_array_dtype(recv)));
  } else if (send && !same_shape(send, recv)) {
    local = DV_ERR_SHAPE_MISMATCH;
    snprintf(msg, sizeof msg, "dv_mpi_allreduce: send and recv have different shapes");
  } else if ((local = reduction(dv_array_dtype(recv), op, &x.type, &x.op, &user_op)) != DV_OK) {
    snprintf(msg, sizeof msg, "%s", dv_last_error());
  }
  /* both in host memory and dense: straight to MPI, no copy at all */
  dv_stream *st = recv ? dv_mpi__stream(recv, stream) : NULL;
  void *sp = NULL, *rp = NULL;
  int direct = local == DV_OK && send && dv_mpi__path(c, send, &sp) == DV_MPI_PATH_HOST &&
               dv_mpi__path(c, recv, &rp) == DV_MPI_PATH_HOST && dv_array_is_c_contiguous(send) &&
               dv_array_is_c_contiguous(recv);
  moving m;
  memset(&m, 0, sizeof m);
  m.derived = MPI_DATATYPE_NULL;
  if (local == DV_OK && !direct && (local = move_prepare(&x, &m, recv, send, st)) != DV_OK)
    snprintf(msg, sizeof msg, "%s", dv_last_error());
  dv_status s = check(c, K_ALLREDUCE, 0, recv, (int)op, local, msg);
  if (s == DV_OK && !direct) {
    s = move_run(&x, &m);
  } else if (s == DV_OK) {
    int64_t n = dv_array_size(recv), chunk = dv_mpi__chunk_elems(c, dv_array_dtype(recv));
    size_t isz = dv_dtype_itemsize(dv_array_dtype(recv));
    s = dv_stream_synchronize(st);
    for (int64_t lo = 0; lo < n && s == DV_OK; lo += chunk) {
      int cnt = (int)(n - lo < chunk ? n - lo : chunk);
      MPI_Request r;
      int err = MPI_Iallreduce((char *)sp + (size_t)lo * isz, (char *)rp + (size_t)lo * isz, cnt,
                               x.type, x.op, c->data, &r);
      if (err == MPI_SUCCESS) err = MPI_Wait(&r, MPI_STATUS_IGNORE);
      if (err != MPI_SUCCESS) s = dv_mpi__mpi(err, "MPI_Iallreduce");
    }
    if (s == DV_OK) dv_mpi__count(c, DV_MPI_PATH_HOST, dv_array_nbytes(recv));
  }
  move_end(&m);
  if (user_op) MPI_Op_free(&x.op);
  return s;
}

/* ---- gather ---------------------------------------------------------------------- */

/* Host memory for a's elements in C order: a's own (contiguous, host path)
 * or a pinned buffer (filled from a when fill).  *tmp is the buffer or NULL. */
static dv_status host_view(dv_mpi_comm *c, const dv_array *a, dv_stream *s, int fill,
                           dv_array **tmp, void **ptr) {
  *tmp = NULL;
  dv_mpi_path path = dv_mpi__path(c, a, ptr);
  if (path == DV_MPI_PATH_HOST && dv_array_is_c_contiguous(a)) return dv_stream_synchronize(s);
  if (path == DV_MPI_PATH_DIRECT && dv_array_is_c_contiguous(a)) return dv_stream_synchronize(s);
  int64_t n = dv_array_size(a);
  dv_status st = dv_pinned_array(dv_array_context(a), 1, &n, dv_array_dtype(a), NULL, 'C', tmp);
  if (st == DV_OK) st = dv_array_host_data(*tmp, ptr);
  if (st == DV_OK && fill) {
    dv_array *flat = NULL;
    st = dv_array_reshape(*tmp, dv_array_ndim(a), dv_array_shape(a), 'C', DV_VIEW_ONLY, s, &flat);
    if (st == DV_OK) st = dv_array_copy(flat, a, s);
    dv_array_release(flat);
  }
  if (st == DV_OK) st = dv_stream_synchronize(s);
  if (st != DV_OK) {
    dv_array_release(*tmp);
    *tmp = NULL;
  } else {
    if (path == DV_MPI_PATH_HOST) atomic_fetch_add(&c->host_packs, 1);
  }
  return st;
}

static dv_status gather(dv_mpi_comm *c, const dv_array *send, dv_array *recv, int root, int all,
                        dv_stream *stream) {
  const char *fn = all ? "dv_mpi_allgather" : "dv_mpi_gather";
  if (!c) return dv_mpi__fail(DV_ERR_NULL_ARGUMENT, "%s: c is NULL", fn);
  int receives = all || c->rank == root;
  dv_status local = DV_OK;
  char msg[512] = "";
  if (!send) {
    local = DV_ERR_NULL_ARGUMENT;
    snprintf(msg, sizeof msg, "%s: send is NULL", fn);
  } else if (!all && (root < 0 || root >= c->size)) {
    local = DV_ERR_INVALID_ARGUMENT;
    snprintf(msg, sizeof msg, "%s: root %d outside the communicator (size %d)", fn, root, c->size);
  } else if (dv_array_size(send) > INT32_MAX) {
    local = DV_ERR_OVERFLOW;
    snprintf(msg, sizeof msg, "%s: %lld elements per rank: more than MPI can count", fn,
             (long long)dv_array_size(send));
  } else if (receives && !recv) {
    local = DV_ERR_NULL_ARGUMENT;
    snprintf(msg, sizeof msg, "%s: recv is NULL on a receiving rank", fn);
  } else if (receives && !dv_dtype_equal(dv_array_dtype(send), dv_array_dtype(recv))) {
    local = DV_ERR_DTYPE_MISMATCH;
    snprintf(msg, sizeof msg, "%s: send is %s, recv is %s", fn, dv_dtype_name(dv_array_dtype(send)),
             dv_dtype_name(dv_array_dtype(recv)));
  } else if (receives && dv_array_size(recv) != dv_array_size(send) * c->size) {
    local = DV_ERR_SHAPE_MISMATCH;
    snprintf(msg, sizeof msg, "%s: recv has %lld elements, %d ranks x %lld are gathered", fn,
             (long long)dv_array_size(recv), c->size, (long long)dv_array_size(send));
  } else if (receives && dv_array_size(recv) > 1) {
    for (int d = 0; d < dv_array_ndim(recv); d++)
      if (dv_array_strides(recv)[d] == 0 && dv_array_shape(recv)[d] > 1) {
        local = DV_ERR_INVALID_ARGUMENT;
        snprintf(msg, sizeof msg, "%s: cannot receive into a view with a zero stride", fn);
      }
  }
  /* local preparations first: their failure is reported to every rank */
  MPI_Datatype type = MPI_DATATYPE_NULL;
  int owned = 0;
  dv_array *stmp = NULL, *rtmp = NULL;
  void *sp = NULL, *rp = NULL;
  if (local == DV_OK) {
    if ((local = dv_mpi__type(dv_array_dtype(send), &type, &owned)) == DV_OK &&
        (local = host_view(c, send, dv_mpi__stream(send, stream), 1, &stmp, &sp)) == DV_OK &&
        receives)
      local = host_view(c, recv, dv_mpi__stream(recv, stream), 0, &rtmp, &rp);
    if (local != DV_OK) snprintf(msg, sizeof msg, "%s", dv_last_error());
  }
  dv_status s = check(c, all ? K_ALLGATHER : K_GATHER, all ? 0 : root, send, 0, local, msg);
  int n = send ? (int)dv_array_size(send) : 0;
  if (s == DV_OK) {
    int err = all ? MPI_Allgather(sp, n, type, rp, n, type, c->data)
                  : MPI_Gather(sp, n, type, rp, n, type, root, c->data);
    if (err != MPI_SUCCESS) s = dv_mpi__mpi(err, all ? "MPI_Allgather" : "MPI_Gather");
  }
  if (s == DV_OK && rtmp) {
    dv_stream *rs = dv_mpi__stream(recv, stream);
    dv_array *shaped = NULL;
    s = dv_array_reshape(rtmp, dv_array_ndim(recv), dv_array_shape(recv), 'C', DV_VIEW_ONLY, rs,
                         &shaped);
    if (s == DV_OK) s = dv_array_copy(recv, shaped, rs);
    if (s == DV_OK) s = dv_stream_synchronize(rs);
    dv_array_release(shaped);
  }
  if (s == DV_OK) {
    dv_mpi__count(c, dv_mpi__path(c, send, NULL), dv_array_nbytes(send));
    if (receives) dv_mpi__count(c, dv_mpi__path(c, recv, NULL), dv_array_nbytes(recv));
  }
  dv_array_release(stmp);
  dv_array_release(rtmp);
  if (owned) MPI_Type_free(&type);
  return s;
}

DV_API dv_status dv_mpi_gather(dv_mpi_comm *c, const dv_array *send, dv_array *recv, int root,
                               dv_stream *stream) {
  return gather(c, send, recv, root, 0, stream);
}

DV_API dv_status dv_mpi_allgather(dv_mpi_comm *c, const dv_array *send, dv_array *recv,
                                  dv_stream *stream) {
  return gather(c, send, recv, 0, 1, stream);
}
