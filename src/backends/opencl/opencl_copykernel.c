/*
 * The OpenCL backend's strided copies through devarray's built-in copy
 * kernel (src/kernel/copy_kernels.dvk, built from source once per context on
 * first use): device views of any layout, and host<->device transfers whose
 * device side needs a gather or scatter (through a dense device temporary).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "opencl_kernel.h"

#if DV_HAVE_OPENCL_HEADERS

/* ---- the strided-copy kernel --------------------------------------------------------------- */

/* The built-in copy module, built on first use; NOT_SUPPORTED (the planner
 * then stages through host memory) if it cannot be built. */
static dv_status clk_copy_module(cl_state *st, dv_bmodule **out) {
  pthread_mutex_lock(&st->kmu);
  if (!st->copy_mod && st->copy_status == DV_OK) {
    static const char line[] = "\n#line 1 \"copy_kernels.dvk\"\n";
    size_t n = strlen(dv__kernel_header) + strlen(line) + strlen(dv__copy_kernels_source) + 1;
    char *tu = dv__malloc(n);
    dv_status rc;
    if (!tu) {
      rc = dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate the copy kernels' source");
    } else {
      snprintf(tu, n, "%s%s%s", dv__kernel_header, line, dv__copy_kernels_source);
      dv_build_req req = {.name = "copy_kernels.dvk", .source = tu, .options = ""};
      rc = dv__clk_module_build(st, &req, &st->copy_mod, NULL, NULL, NULL);
      dv__free(tu);
    }
    if (rc) {
      st->copy_status = rc;
      dv__log(DV_LOG_WARN, "OpenCL: the strided-copy kernel is unavailable (%s: %s); such copies are staged through host memory",
              dv_status_name(rc), dv_last_error());
    }
  }
  *out = st->copy_mod;
  dv_status rc = st->copy_status;
  pthread_mutex_unlock(&st->kmu);
  return rc ? DV_ERR_NOT_SUPPORTED : DV_OK;
}

/* A device-to-device copy prepared for the kernel: word size, dimensions
 * of words (merged), the kernel. */
typedef struct clk_copy {
  dv_bkernel *k;
  dv_bkview sv, dv;
  int64_t words;
} clk_copy;

/* Plan c (offsets soff/doff on the device buffers it will use) for the
 * kernel; NOT_SUPPORTED where the kernel cannot do it. */
static dv_status clk_copy_plan(cl_state *st, const dv_strided *c, size_t soff, size_t doff, clk_copy *p) {
  /* Word size: the widest power of two (<= 16 and the base alignment) that
   * divides the item size, both offsets and every stride. */
  uint64_t bits = (uint64_t)c->itemsize | (uint64_t)soff | (uint64_t)doff | 16;
  uint64_t count = 1;
  for (int i = 0; i < c->nd; i++) {
    count *= (uint64_t)c->shape[i];
    if (c->shape[i] > 1) {
      bits |= (uint64_t)(c->src_strides[i] < 0 ? -c->src_strides[i] : c->src_strides[i]);
      bits |= (uint64_t)(c->dst_strides[i] < 0 ? -c->dst_strides[i] : c->dst_strides[i]);
    }
  }
  uint64_t w = bits & (~bits + 1);
  while (w > 1 && st->info.base_alignment && w > st->info.base_alignment) w >>= 1;
  /* Dimensions of words, outermost first: drop extents of 1, append the
   * words of one element, merge what is contiguous on both sides. */
  int64_t n[DV_MAXDIMS + 1], ss[DV_MAXDIMS + 1], ds[DV_MAXDIMS + 1];
  int nd = 0;
  for (int i = 0; i <= c->nd; i++) {
    int64_t e, a, b;
    if (i < c->nd) {
      if (c->shape[i] == 1) continue;
      e = c->shape[i], a = c->src_strides[i], b = c->dst_strides[i];
    } else {
      if (c->itemsize == w) break;
      e = (int64_t)(c->itemsize / w), a = b = (int64_t)w;
    }
    if (nd > 0 && ss[nd - 1] == a * e && ds[nd - 1] == b * e) {
      n[nd - 1] *= e, ss[nd - 1] = a, ds[nd - 1] = b;
      continue;
    }
    n[nd] = e, ss[nd] = a, ds[nd] = b;
    nd++;
  }
  if (nd == 0) n[0] = 1, ss[0] = ds[0] = 0, nd = 1;
  if (nd > DV_BKVIEW_MAXDIMS) return DV_ERR_NOT_SUPPORTED; /* the planner stages it */
  p->words = (int64_t)(count * (c->itemsize / w));
  dv_bmodule *m;
  dv_status rc = clk_copy_module(st, &m);
  if (rc) return rc;
  char name[32];
  snprintf(name, sizeof name, "dv_copy_w%u_i%d", (unsigned)w, (uint64_t)p->words < ((uint64_t)1 << 31) ? 32 : 64);
  rc = dv__clk_kernel_get(st, m, name, &p->k);
  if (rc) return rc;
  memset(&p->sv, 0, sizeof p->sv);
  memset(&p->dv, 0, sizeof p->dv);
  p->sv.ndim = p->dv.ndim = nd;
  for (int i = 0; i < nd; i++)
    p->sv.shape[i] = p->dv.shape[i] = n[i], p->sv.strides[i] = ss[i], p->dv.strides[i] = ds[i];
  return DV_OK;
}

static dv_status clk_copy_run(cl_state *st, dv_bstream *s, const clk_copy *p, void *src, size_t soff, void *dst,
                              size_t doff) {
  int64_t so = (int64_t)soff, dof = (int64_t)doff, cnt = p->words;
  dv_barg args[7] = {
      {.kind = DV_BARG_BUFFER, .buf = src},
      {.kind = DV_BARG_VALUE, .type = DV_INT64, .value = &so, .size = sizeof so},
      {.kind = DV_BARG_VIEW, .value = &p->sv, .size = sizeof p->sv},
      {.kind = DV_BARG_BUFFER, .buf = dst},
      {.kind = DV_BARG_VALUE, .type = DV_INT64, .value = &dof, .size = sizeof dof},
      {.kind = DV_BARG_VIEW, .value = &p->dv, .size = sizeof p->dv},
      {.kind = DV_BARG_VALUE, .type = DV_INT64, .value = &cnt, .size = sizeof cnt},
  };
  dv_kernel_attrs at;
  dv_status rc = dv__clk_kernel_attrs(st, p->k, &at);
  if (rc) return rc;
  uint64_t wg = at.max_threads_per_block > 0 ? (uint64_t)at.max_threads_per_block : 1;
  uint64_t block = wg < 256 ? wg : 256, grid = ((uint64_t)p->words + block - 1) / block;
  if (grid > 8192) grid = 8192; /* the loop strides over the rest */
  dv_blaunch l = {.grid = {(uint32_t)grid, 1, 1}, .block = {(uint32_t)block, 1, 1}, .nargs = 7, .args = args};
  return dv__clk_launch(st, s, p->k, &l);
}

/* Whether a host view is dense (its elements fill one block of
 * count * itemsize bytes, in any order and direction); *lo: the block's
 * start relative to element 0 (<= 0). */
static bool clk_dense(const dv_strided *c, const int64_t *strides, int64_t *lo) {
  int idx[DV_MAXDIMS], k = 0;
  *lo = 0;
  for (int i = 0; i < c->nd; i++) {
    if (c->shape[i] == 1) continue;
    if (strides[i] < 0) *lo += (c->shape[i] - 1) * strides[i];
    int j = k++;
    int64_t a = strides[i] < 0 ? -strides[i] : strides[i];
    while (j > 0 && (strides[idx[j - 1]] < 0 ? -strides[idx[j - 1]] : strides[idx[j - 1]]) > a) idx[j] = idx[j - 1], j--;
    idx[j] = i;
  }
  int64_t want = (int64_t)c->itemsize;
  for (int j = 0; j < k; j++) {
    int64_t a = strides[idx[j]] < 0 ? -strides[idx[j]] : strides[idx[j]];
    if (a != want) return false;
    want *= c->shape[idx[j]];
  }
  return true;
}

/*
 * Strided copies on the device.  Device to device: the copy kernel.  Host
 * to device and back, where the host view is dense (the elements fill one
 * block, in any order): the block crosses the bus as one contiguous write or
 * read into a temporary device buffer, and the kernel packs or unpacks the
 * device view, so no host staging or repack is needed.  Anything else is
 * NOT_SUPPORTED and the planner stages it through host memory.
 */
dv_status dv__clk_copy_strided(void *state, dv_bstream *s, const dv_strided *c) {
  cl_state *st = state;
  if ((!c->src.buf && !c->dst.buf) || c->nd < 0 || c->nd > DV_MAXDIMS || !c->itemsize) return DV_ERR_NOT_SUPPORTED;
  uint64_t count = 1;
  for (int i = 0; i < c->nd; i++) {
    if (c->shape[i] <= 0) return DV_OK;
    count *= (uint64_t)c->shape[i];
  }
  bool sync = (c->flags & DV_COPY_SYNC) != 0;
  clk_copy p;
  dv_status rc;
  if (c->src.buf && c->dst.buf) {
    rc = clk_copy_plan(st, c, c->src.offset, c->dst.offset, &p);
    if (rc) return rc;
    rc = clk_copy_run(st, s, &p, c->src.buf, c->src.offset, c->dst.buf, c->dst.offset);
  } else {
    bool h2d = c->dst.buf != NULL;
    int64_t lo;
    size_t bytes = (size_t)count * c->itemsize;
    if (!clk_dense(c, h2d ? c->src_strides : c->dst_strides, &lo) || bytes > st->info.max_allocation)
      return DV_ERR_NOT_SUPPORTED;
    size_t toff = (size_t)-lo; /* element 0 in the temporary buffer */
    rc = h2d ? clk_copy_plan(st, c, toff, c->dst.offset, &p) : clk_copy_plan(st, c, c->src.offset, toff, &p);
    if (rc) return rc;
    cl_int e;
    cl_mem tmp = cl.clCreateBuffer(st->ctx, CL_MEM_READ_WRITE, bytes, NULL, &e);
    if (!tmp) return DV_ERR_NOT_SUPPORTED; /* no room: the planner stages through host memory */
    if (h2d) {
      e = cl.clEnqueueWriteBuffer(s->q, tmp, CL_FALSE, 0, bytes, (const char *)c->src.ptr + lo, 0, NULL, NULL);
      rc = e ? dv__clk_fail(e, "clEnqueueWriteBuffer") : clk_copy_run(st, s, &p, tmp, toff, c->dst.buf, c->dst.offset);
    } else {
      rc = clk_copy_run(st, s, &p, c->src.buf, c->src.offset, tmp, toff);
      cl_event ev = NULL;
      if (!rc) {
        e = cl.clEnqueueReadBuffer(s->q, tmp, sync ? CL_TRUE : CL_FALSE, 0, bytes, (char *)c->dst.ptr + lo, 0, NULL,
                                   &ev);
        if (e) rc = dv__clk_fail(e, "clEnqueueReadBuffer");
        else cl_track(s, ev);
      }
    }
    /* Released now, deleted by OpenCL once the queued commands using it are done. */
    cl.clReleaseMemObject(tmp);
  }
  if (rc) {
    cl.clFinish(s->q); /* part of it may be queued: leave nothing half done behind */
    return rc;
  }
  if (sync) {
    cl_int e = cl.clFinish(s->q);
    if (e) return dv__clk_fail(e, "clFinish");
  } else {
    cl.clFlush(s->q);
  }
  return DV_OK;
}

#else
typedef int dv__opencl_copykernel_none; /* built without OpenCL headers: nothing here */
#endif /* DV_HAVE_OPENCL_HEADERS */
