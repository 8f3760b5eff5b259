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

/* ---- watchdog.c (option kernel_timeout) ---- */
typedef struct hkt_wjob hkt_wjob; /* a launch under a deadline */
typedef struct hkt_watchdog {
  double timeout;  /* seconds a launch may run (0: no limit) */
  pthread_mutex_t m; /* the lists: jobs, each one's execs */
  pthread_cond_t c;  /* CLOCK_MONOTONIC */
  pthread_t thread;
  bool inited, started, quit;
  hkt_wjob *jobs;  /* launches running under a deadline */
} hkt_watchdog;
dv_status hkt_watchdog_open(const dv_backend_config *cfg, hk_state *k, hkt_watchdog *wd);
/* Stop the watchdog thread (no launch is left). */
void hkt_watchdog_close(hkt_watchdog *wd);

/* ---- access.c (kernel_check=on: memcheck, initcheck, race detection) ---- */
dv_status hkt_access_open(const dv_backend_config *cfg, hk_state *k);

struct hkt_state {
  hkt_printf printf;
  hkt_watchdog watchdog;
};

#endif
