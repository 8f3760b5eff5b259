/* Logging: a level (option log_level) and a sink (stderr or a callback). */
#include <stdio.h>

#include "core.h"

static _Atomic int dv__level = DV_LOG_WARN;
static pthread_mutex_t dv__log_lock = PTHREAD_MUTEX_INITIALIZER;
static dv_log_fn dv__sink;
static void *dv__sink_user;

void dv__log_set_level(dv_log_level level) { atomic_store(&dv__level, (int)level); }
dv_log_level dv__log_level(void) { return (dv_log_level)atomic_load(&dv__level); }

void dv_set_log_callback(dv_log_fn fn, void *user) {
  pthread_mutex_lock(&dv__log_lock);
  dv__sink = fn;
  dv__sink_user = user;
  pthread_mutex_unlock(&dv__log_lock);
}

void dv__log(dv_log_level level, const char *fmt, ...) {
  if ((int)level > atomic_load(&dv__level) || level == DV_LOG_OFF) return;
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  static const char *const names[] = {"off", "error", "warning", "info", "debug"};
  pthread_mutex_lock(&dv__log_lock);
  if (dv__sink)
    dv__sink(level, buf, dv__sink_user);
  else
    fprintf(stderr, "devarray %s: %s\n", names[level], buf);
  pthread_mutex_unlock(&dv__log_lock);
}
