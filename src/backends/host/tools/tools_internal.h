/*
 * The host simulator's tools, private to tools/ (the rest of the simulator
 * sees tools.h): each tool's state and its open.
 */
#ifndef DV_HOST_TOOLS_INTERNAL_H
#define DV_HOST_TOOLS_INTERNAL_H
#include <pthread.h>
#include <stdarg.h>

#include "tools.h"

/* ---- printf.c ---- */
typedef struct hkt_printf {
  size_t cap; /* option host_printf_buffer: dv_printf bytes per launch */
} hkt_printf;
dv_status hkt_printf_open(const dv_backend_config *cfg, hk_state *k, hkt_printf *pf);

struct hkt_state {
  hkt_printf printf;
};

#endif
