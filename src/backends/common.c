/* Helpers that more than one backend uses. */
#include "../core/core.h"
#include "../core/memops.h"
#include "backend.h"

/* A host-to-host rect copy run by a stream callback, for backends whose
 * driver only copies to or from device memory. */
typedef struct dv_host_rect_job {
  dv_rect r;
} dv_host_rect_job;

static void dv__host_rect_cb(void *user, dv_status status) {
  dv_host_rect_job *j = user;
  if (status == DV_OK)
    dv__rect_copy(j->r.dst.ptr, j->r.dst_pitch, j->r.dst_slice, j->r.src.ptr, j->r.src_pitch, j->r.src_slice,
                  j->r.width, j->r.height, j->r.depth);
  dv__free(j);
}

dv_status dv__host_rect_in_order(dv_bcallback_queue_fn queue, void *state, dv_bstream *s, const dv_rect *r) {
  dv_host_rect_job *j = dv__malloc(sizeof *j);
  if (!j) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate a copy record");
  j->r = *r;
  dv_status rc = queue(state, s, dv__host_rect_cb, j);
  if (rc) dv__free(j);
  return rc;
}
