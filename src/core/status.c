/* Status names and descriptions (from DV_STATUS_MAP) and the thread-local
 * detail message. */
#include <stdio.h>
#include <string.h>

#include "core.h"

static _Thread_local char dv__msg[1024];

const char *dv_status_name(dv_status s) {
  switch (s) {
#define DV__NAME(name, value, desc) \
  case DV_##name:                   \
    return "DV_" #name;
    DV_STATUS_MAP(DV__NAME)
#undef DV__NAME
  }
  return "DV_UNKNOWN";
}

const char *dv_status_str(dv_status s) {
  switch (s) {
#define DV__DESC(name, value, desc) \
  case DV_##name:                   \
    return desc;
    DV_STATUS_MAP(DV__DESC)
#undef DV__DESC
  }
  return "unknown status";
}

const char *dv_last_error(void) { return dv__msg; }

dv_status dv__error(dv_status s, const char *fmt, ...) {
  if (fmt) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(dv__msg, sizeof dv__msg, fmt, ap);
    va_end(ap);
  } else {
    snprintf(dv__msg, sizeof dv__msg, "%s", dv_status_str(s));
  }
  dv__log(DV_LOG_DEBUG, "%s: %s", dv_status_name(s), dv__msg);
  return s;
}

const char *dv_version(void) { return "0.2.0"; }

dv_status dv_error_set(dv_status s, const char *message) {
  if (message) return dv__error(s, "%s", message);
  return dv__error(s, NULL);
}
