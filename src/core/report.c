/* The report channel: where `devarray check` (tools/devarray/cmd_check.c)
 * collects the program bugs the library finds, whether or not the program
 * looks at the statuses.
 *
 * The channel is open when the environment has DV_REPORT_FD, the number of
 * a file descriptor the process inherited (the tool's pipe); it is read
 * once per process.  Each report is one line written with one write() call
 * (at most DV_REPORT_MAX bytes, so that reports of several threads never
 * interleave on a pipe):
 *
 *     DVREPORT <TAB> category <TAB> status name <TAB> message <NEWLINE>
 *
 * with backslash, tab and newline in the message written \\, \t and \n.
 * Categories: "kernel" (a launch's fault or timeout, from the host
 * simulator's checks) and "api" (a released handle used or released again).
 * With no channel dv__report is one load and a branch. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core.h"

static pthread_once_t dv__report_once = PTHREAD_ONCE_INIT;
static int dv__report_fd = -1;

static void dv__report_open(void) {
  const char *s = getenv("DV_REPORT_FD");
  if (!s || !*s) return;
  char *end = NULL;
  errno = 0;
  long fd = strtol(s, &end, 10);
  if (errno || *end || fd < 0 || fd > 1 << 20 || fcntl((int)fd, F_GETFD) == -1) {
    dv__log(DV_LOG_WARN, "DV_REPORT_FD=%s is not an open file descriptor: no reports are sent", s);
    return;
  }
  dv__report_fd = (int)fd;
}

bool dv__report_open_p(void) {
  pthread_once(&dv__report_once, dv__report_open);
  return dv__report_fd >= 0;
}

void dv__report(const char *category, dv_status s, const char *msg) {
  if (!dv__report_open_p()) return;
  char line[DV_REPORT_MAX];
  size_t cap = sizeof line - 2, n = 0; /* room for the newline */
  const char *head[] = {"DVREPORT\t", category, "\t", dv_status_name(s), "\t"};
  for (size_t i = 0; i < sizeof head / sizeof head[0]; i++)
    for (const char *p = head[i]; *p && n < cap; p++) line[n++] = *p;
  for (const char *p = msg ? msg : ""; *p && n + 2 <= cap; p++) {
    char c = *p, e = c == '\\' ? '\\' : c == '\t' ? 't' : c == '\n' ? 'n' : 0;
    if (e) {
      line[n++] = '\\';
      line[n++] = e;
    } else {
      line[n++] = c;
    }
  }
  line[n++] = '\n';
  ssize_t w;
  do w = write(dv__report_fd, line, n);
  while (w < 0 && errno == EINTR);
  /* A reader that went away is not the program's failure: nothing more. */
}
