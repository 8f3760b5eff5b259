/* The tools' open and close (tools.h). */
#include "tools_internal.h"

dv_status hkt_open(const dv_backend_config *cfg, hk_state *k, hkt_state **out) {
  *out = NULL;
  hkt_state *t = dv__calloc(1, sizeof *t);
  if (!t) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate the host simulator's tools");
  /* In this order: a launch's printf output is written before the
   * watchdog's report is made (their finish hooks); a timeout is the
   * launch's error before the access checks' shadow that ran out of
   * memory; the access checks' index is the same in every simulator. */
  dv_status rc = hkt_printf_open(cfg, k, &t->printf);
  if (!rc) rc = hkt_watchdog_open(cfg, k, &t->watchdog);
  if (!rc) rc = hkt_access_open(cfg, k);
  if (rc) {
    hkt_close(t);
    return rc;
  }
  *out = t;
  return DV_OK;
}

void hkt_close(hkt_state *t) {
  if (!t) return;
  hkt_watchdog_close(&t->watchdog);
  dv__free(t);
}
