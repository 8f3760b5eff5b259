/* The options of a run-time GPU compiler, shared by NVRTC and hipRTC (rtcopts.h). */
#include "rtcopts.h"

#include <ctype.h>
#include <stdio.h>

bool dv__rtc_split_options(char *text, const char **opts, int *n, int max) {
  for (char *p = text; *p;) {
    while (*p && isspace((unsigned char)*p)) *p++ = 0;
    if (!*p) break;
    if (*n == max) return false;
    opts[(*n)++] = p;
    while (*p && !isspace((unsigned char)*p)) p++;
  }
  return true;
}

void dv__rtc_rejected_note(char *buf, size_t cap, const char *compiler, int major, int minor,
                           const char *const *opts, int n) {
  if (!cap) return;
  size_t k = (size_t)snprintf(buf, cap, "%s %d.%d rejected an option:", compiler, major, minor);
  for (int i = 0; i < n && k < cap; i++) k += (size_t)snprintf(buf + k, cap - k, " %s", opts[i]);
  if (k < cap) snprintf(buf + k, cap - k, "\n");
}
