/*
 * The host simulator's tools: plug-ins over the executor (exec/exec.h's
 * hook list and its read-only views of a launch and of an executor's
 * running block), each owning its state.  host.c opens them after the
 * kernel part (hk_open) and closes them after it (hk_close): hkt_open
 * plugs each one in with hk_tool_add.
 *
 *   printf.c  printf capture: dv_printf's texts kept per launch (option
 *             host_printf_buffer) and written to stdout in block and
 *             thread order when the launch has run
 *   watchdog.c the watchdog (option kernel_timeout): stops a launch that
 *             runs too long and says where its threads were
 *   access.c  the access checks (option kernel_check=on, an instrumented
 *             module): memcheck (memcheck.c), initcheck (initcheck.c) and
 *             race detection (race.c, race_shadow.c) behind check.h
 */
#ifndef DV_HOST_TOOLS_H
#define DV_HOST_TOOLS_H
#include "../../../core/core.h"
#include "../../backend.h"
#include "../exec/exec.h"

typedef struct hkt_state hkt_state; /* the tools of one simulator */

/* Open the tools for the launches of k (cfg: their options) and plug them in. */
dv_status hkt_open(const dv_backend_config *cfg, hk_state *k, hkt_state **out);
/* After hk_close(k) (no launch is left). */
void hkt_close(hkt_state *t);

#endif
