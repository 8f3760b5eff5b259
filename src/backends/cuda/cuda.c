/* The cuda backend: not built yet (see the issue tracker); it reports itself
 * unavailable so that automatic selection falls through to the next one. */
#include <stdio.h>

#include "../../core/internal.h"

static dv_status probe(char *reason, size_t cap) {
  if (reason && cap) snprintf(reason, cap, "the cuda backend is not implemented in this build");
  return DV_ERR_BACKEND_UNAVAILABLE;
}

static dv_status open_(const dv_backend_config *cfg, void **state) {
  (void)cfg;
  *state = NULL;
  return dv__error(DV_ERR_BACKEND_UNAVAILABLE, "the cuda backend is not implemented in this build");
}

const dv_backend dv__backend_cuda = {.version = DV_BACKEND_VERSION, .name = "cuda", .probe = probe, .open = open_};
