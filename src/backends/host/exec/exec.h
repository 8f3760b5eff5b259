/* The host simulator's kernel part (compiler, modules, launches,
 * executors, the runtime and the checks: exec/exec_internal.h) as host.c
 * sees it: its open and close and the backend table's launch methods, each
 * on the kernel part's own state (host.c keeps it with the device's and
 * the toolchain's: device.h's hb_user). */
#ifndef DV_HOST_EXEC_H
#define DV_HOST_EXEC_H
#include "../../../core/core.h"
#include "../../backend.h"
#include "../device/device.h"
#include "../toolchain/toolchain.h"

typedef struct hk_state hk_state; /* the kernel part of the simulator's state */

dv_status hk_open(const dv_backend_config *cfg, hk_state **out);
/* The runtime every module's dv__rt points to (toolchain/'s hk_tc_open is given it). */
const dv__host_rt *hk_runtime(void);
void hk_close(hk_state *k);

dv_status hk_kernel_limits(hk_state *k, dv_klimits *out);
dv_status hk_kernel_attrs(hk_state *k, dv_bkernel *kn, dv_kernel_attrs *out);
dv_status hk_launch(hk_state *k, dv_bstream *s, dv_bkernel *kn, const dv_blaunch *bl);

#endif
