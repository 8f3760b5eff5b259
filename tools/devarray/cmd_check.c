/*
 * devarray check: run a program that uses devarray under the host
 * simulator's checks and report every bug the library finds in it, whether
 * or not the program looks at the statuses (as compute-sanitizer does for
 * CUDA programs).
 *
 * The program runs as a child with DV_HOST_MODE=checked, DV_KERNEL_CHECK=on
 * and DV_BACKEND=host (unless --backend names another) and DV_REPORT_FD the
 * write end of a pipe: the library's report channel (src/core/report.c)
 * writes one line per report there, which this command reads, classifies,
 * prints and counts.  The child's own output is left alone.
 */
#define _DEFAULT_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"

const char check_help[] =
    "Usage: devarray check [OPTIONS] -- PROGRAM [ARGS...]\n"
    "\n"
    "Run PROGRAM (C, C++ or Python; unchanged) with its kernels on the host\n"
    "simulator in checked mode with the access checks on, and report every\n"
    "bug the library finds: out-of-bounds and wild accesses, reads of\n"
    "uninitialized shared memory, data races, divergent barriers, kernels that\n"
    "run past --timeout, and released handles used or released again.  Each\n"
    "report names the kernel, block, thread, file:line, array and element where\n"
    "the check knows them; reports come whether or not PROGRAM looks at the\n"
    "statuses.  Then 'ERROR SUMMARY: N errors'.\n"
    "\n"
    "Options:\n"
    "  --tool LIST           memcheck, racecheck, initcheck, synccheck, api or all\n"
    "                        (default), comma-separated: the reports counted and\n"
    "                        printed (all checks run either way)\n"
    "  --backend NAME        keep another backend (opencl, cuda, hip): only its own\n"
    "                        checks and the handle checks apply (default host)\n"
    "  --timeout SECONDS     stop a kernel launch running longer (default 0: never)\n"
    "  --error-exitcode N    exit status when errors were found (default 1)\n"
    "  --leak-check full|no  full: at PROGRAM's exit, list every array, pinned or\n"
    "                        mapped allocation, stream, event, module and context it\n"
    "                        never released, with where it was made (file:line from\n"
    "                        addr2line where the module has debug information; the\n"
    "                        Python line for the binding); each is an error\n"
    "                        (default no)\n"
    "  --print-limit N       print at most N reports; all are counted (default 100)\n"
    "  --log-file FILE       write the reports and the summary to FILE, not stdout\n"
    "  --json                one JSON object per report, then a summary object\n"
    "  -h, --help            print this help and exit\n"
    "\n"
    "Exit status: --error-exitcode when errors were found; otherwise PROGRAM's\n"
    "own (128 + the signal's number when a signal ended it); 2 for a usage error,\n"
    "127 when PROGRAM cannot be run.\n";

enum { TOOL_MEMCHECK = 1, TOOL_RACECHECK = 2, TOOL_INITCHECK = 4, TOOL_SYNCCHECK = 8, TOOL_API = 16, TOOL_LEAK = 32 };
#define TOOL_ALL (TOOL_MEMCHECK | TOOL_RACECHECK | TOOL_INITCHECK | TOOL_SYNCCHECK | TOOL_API)

static const struct {
  const char *name;
  unsigned bit;
} tools[] = {{"memcheck", TOOL_MEMCHECK},   {"racecheck", TOOL_RACECHECK}, {"initcheck", TOOL_INITCHECK},
             {"synccheck", TOOL_SYNCCHECK}, {"api", TOOL_API},             {"all", TOOL_ALL},
             {"leakcheck", TOOL_LEAK}};

static const char *tool_name(unsigned bit) {
  for (size_t i = 0; i < sizeof tools / sizeof tools[0]; i++)
    if (tools[i].bit == bit) return tools[i].name;
  return "memcheck";
}

static int parse_tools(const char *s, unsigned *out) {
  *out = 0;
  const char *p = s;
  while (*p) {
    size_t n = strcspn(p, ",");
    bool found = false;
    for (size_t i = 0; i < sizeof tools / sizeof tools[0]; i++)
      if (strlen(tools[i].name) == n && !strncmp(tools[i].name, p, n)) *out |= tools[i].bit, found = true;
    if (!found) return usage_error("--tool: unknown tool '%.*s' (memcheck, racecheck, initcheck, synccheck, api, all)", (int)n, p);
    p += n;
    if (*p == ',') p++;
  }
  if (!*out) return usage_error("--tool: no tool named");
  return 0;
}

/* Which check a kernel report comes from, by the words the host
 * simulator's checks write (docs/kernels.md, "The access checks"). */
static unsigned classify(const char *category, const char *msg) {
  if (!strcmp(category, "api")) return TOOL_API;
  if (!strcmp(category, "leak")) return TOOL_LEAK;
  if (strstr(msg, " race on ")) return TOOL_RACECHECK;
  if (strstr(msg, "uninitialized")) return TOOL_INITCHECK;
  if (strstr(msg, "barrier")) return TOOL_SYNCCHECK;
  return TOOL_MEMCHECK;
}

/* Undo the channel's escapes (\\, \t, \n) in place. */
static void unescape(char *s) {
  char *w = s;
  for (char *r = s; *r; r++) {
    if (*r == '\\' && r[1]) {
      r++;
      *w++ = *r == 't' ? '\t' : *r == 'n' ? '\n' : *r;
    } else {
      *w++ = *r;
    }
  }
  *w = 0;
}

#define DV_CHECK_LINE 8192

typedef struct check_run {
  unsigned want;
  long long print_limit;
  bool json;
  FILE *out;
  long long errors, printed;
} check_run;

/* file:line of offset `off` in module `mod` (addr2line, no shell), or "" */
static void source_line(const char *mod, const char *off, char *out, size_t cap) {
  out[0] = 0;
  int fds[2];
  if (pipe(fds)) return;
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]), close(fds[1]);
    return;
  }
  if (pid == 0) {
    dup2(fds[1], 1);
    int devnull = open("/dev/null", O_WRONLY);
    if (devnull >= 0) dup2(devnull, 2);
    close(fds[0]), close(fds[1]);
    /* a return address: the call is the byte before it */
    char addr[40];
    snprintf(addr, sizeof addr, "0x%llx", strtoull(off, NULL, 16) - 1);
    execlp("addr2line", "addr2line", "-e", mod, addr, (char *)NULL);
    _exit(127);
  }
  close(fds[1]);
  size_t n = 0;
  ssize_t got;
  while (n + 1 < cap && ((got = read(fds[0], out + n, cap - 1 - n)) > 0 || (got < 0 && errno == EINTR)))
    if (got > 0) n += (size_t)got;
  out[n] = 0;
  close(fds[0]);
  int st;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  out[strcspn(out, "\n")] = 0;
  /* "??:0", "??:?" or "file:?": nothing known */
  if (!WIFEXITED(st) || WEXITSTATUS(st) || !strncmp(out, "??", 2) || strstr(out, ":?")) out[0] = 0;
  char *disc = strstr(out, " (discriminator");
  if (disc) *disc = 0;
}

/* A leak report's origins, "MODULE+0xOFF", with file:line after each where
 * addr2line knows it: "MODULE+0xOFF (sym) [prog.c:17]". */
static void resolve_origins(const char *msg, char *out, size_t cap) {
  size_t n = 0;
  const char *p = msg;
  out[0] = 0;
  while (*p && n + 1 < cap) {
    const char *plus = strstr(p, "+0x");
    if (!plus) break;
    const char *start = plus;
    while (start > p && start[-1] != ' ') start--;
    const char *hex = plus + 3, *end = hex;
    while ((*end >= '0' && *end <= '9') || (*end >= 'a' && *end <= 'f')) end++;
    /* the token and what follows up to the next " <- " or the end */
    const char *stop = strstr(end, " <- ");
    if (!stop) stop = end + strlen(end);
    n += (size_t)snprintf(out + n, cap - n, "%.*s", (int)(stop - p), p);
    if (n >= cap) break;
    char mod[1024], off[32], line[1024];
    snprintf(mod, sizeof mod, "%.*s", (int)(plus - start), start);
    snprintf(off, sizeof off, "%.*s", (int)(end - hex), hex);
    if (end > hex && access(mod, R_OK) == 0) {
      source_line(mod, off, line, sizeof line);
      if (line[0]) n += (size_t)snprintf(out + n, cap - n, " [%s]", line);
    }
    p = stop;
  }
  if (n < cap) snprintf(out + n, cap - n, "%s", p);
}

/* One line from the channel: DVREPORT \t category \t status \t message. */
static void take_line(check_run *r, char *line) {
  char *f[4] = {0};
  char *p = line;
  for (int i = 0; i < 3; i++) {
    char *t = strchr(p, '\t');
    if (!t) return; /* not a report: ignored */
    *t = 0;
    f[i] = p;
    p = t + 1;
  }
  f[3] = p;
  if (strcmp(f[0], "DVREPORT")) return;
  unescape(f[3]);
  if (!strcmp(f[1], "leak-summary")) {
    if (r->want & TOOL_LEAK) {
      if (r->json) {
        fputs("{\"leak_summary\":", r->out);
        json_string(r->out, f[3]);
        fputs("}\n", r->out);
      } else {
        fprintf(r->out, "========= LEAK SUMMARY: %s\n", f[3]);
      }
    }
    return;
  }
  unsigned tool = classify(f[1], f[3]);
  if (!(r->want & tool)) return;
  char resolved[DV_CHECK_LINE];
  if (tool == TOOL_LEAK) {
    resolve_origins(f[3], resolved, sizeof resolved);
    f[3] = resolved;
    f[2] = (char *)"never released";
  }
  r->errors++;
  if (r->printed >= r->print_limit) return;
  r->printed++;
  if (r->json) {
    fputs("{\"tool\":", r->out);
    json_string(r->out, tool_name(tool));
    fputs(",\"status\":", r->out);
    json_string(r->out, f[2]);
    fputs(",\"message\":", r->out);
    json_string(r->out, f[3]);
    fputs("}\n", r->out);
  } else {
    fprintf(r->out, "========= %s: %s\n=========     %s\n", tool_name(tool), f[2], f[3]);
  }
  fflush(r->out);
}

int cmd_check(int argc, char **argv) {
  static const struct option opts[] = {{"tool", required_argument, NULL, 't'},
                                       {"backend", required_argument, NULL, 'b'},
                                       {"timeout", required_argument, NULL, 'T'},
                                       {"error-exitcode", required_argument, NULL, 'e'},
                                       {"print-limit", required_argument, NULL, 'p'},
                                       {"log-file", required_argument, NULL, 'l'},
                                       {"json", no_argument, NULL, 'j'},
                                       {"leak-check", required_argument, NULL, 'L'},
                                       {"help", no_argument, NULL, 'h'},
                                       {NULL, 0, NULL, 0}};
  check_run r = {.want = TOOL_ALL, .print_limit = 100, .out = stdout};
  const char *backend = "host", *log_path = NULL, *timeout = NULL;
  long long exitcode = 1;
  bool leak = false;
  int c;
  while ((c = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
    switch (c) {
      case 't':
        if (parse_tools(optarg, &r.want)) return EXIT_USAGE;
        break;
      case 'b':
        if (strcmp(optarg, "host") && strcmp(optarg, "opencl") && strcmp(optarg, "cuda") && strcmp(optarg, "hip"))
          return usage_error("--backend: unknown backend '%s' (host, opencl, cuda, hip)", optarg);
        backend = optarg;
        break;
      case 'T': {
        char *end = NULL;
        double t = strtod(optarg, &end);
        if (!*optarg || *end || !(t >= 0 && t <= 1e6)) return usage_error("--timeout: '%s' is not a number of seconds in [0, 1e6]", optarg);
        timeout = optarg;
        break;
      }
      case 'e':
        if (parse_count("--error-exitcode", optarg, 0, 255, &exitcode)) return EXIT_USAGE;
        break;
      case 'p':
        if (parse_count("--print-limit", optarg, 0, 1000000000, &r.print_limit)) return EXIT_USAGE;
        break;
      case 'l': log_path = optarg; break;
      case 'j': r.json = true; break;
      case 'L':
        if (strcmp(optarg, "full") && strcmp(optarg, "no"))
          return usage_error("--leak-check: '%s' is not full or no", optarg);
        leak = !strcmp(optarg, "full");
        break;
      case 'h': fputs(check_help, stdout); return 0;
      default: return try_help();
    }
  }
  if (optind == argc) return usage_error("no program to run (devarray check [OPTIONS] -- PROGRAM [ARGS...])");
  if (leak) r.want |= TOOL_LEAK;
  outfile log = {0};
  if (log_path) {
    if (out_open(&log, log_path, "we")) return EXIT_FAILURE; /* close-on-exec: not PROGRAM's */
    r.out = log.f;
  }
  int fds[2];
  if (pipe(fds)) {
    errorf("cannot make a pipe: %s", strerror(errno));
    if (log_path) out_close(&log, false);
    return EXIT_FAILURE;
  }
  fcntl(fds[0], F_SETFD, FD_CLOEXEC);
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) {
    errorf("cannot start %s: %s", argv[optind], strerror(errno));
    close(fds[0]), close(fds[1]);
    if (log_path) out_close(&log, false);
    return EXIT_FAILURE;
  }
  if (pid == 0) {
    char fdtext[16];
    snprintf(fdtext, sizeof fdtext, "%d", fds[1]);
    setenv("DV_REPORT_FD", fdtext, 1);
    setenv("DV_BACKEND", backend, 1);
    setenv("DV_HOST_MODE", "checked", 1);
    setenv("DV_KERNEL_CHECK", "on", 1);
    if (timeout) setenv("DV_KERNEL_TIMEOUT", timeout, 1);
    if (leak) setenv("DV_LEAK_CHECK", "1", 1);
    execvp(argv[optind], argv + optind);
    fprintf(stderr, "devarray: check: cannot run %s: %s\n", argv[optind], strerror(errno));
    _exit(127);
  }
  close(fds[1]);
  /* Lines from the channel; a line longer than the library writes is cut. */
  char buf[8192];
  size_t have = 0;
  for (;;) {
    ssize_t n = read(fds[0], buf + have, sizeof buf - 1 - have);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    have += (size_t)n;
    buf[have] = 0;
    char *start = buf, *nl;
    while ((nl = memchr(start, '\n', have - (size_t)(start - buf)))) {
      *nl = 0;
      take_line(&r, start);
      start = nl + 1;
    }
    have -= (size_t)(start - buf);
    memmove(buf, start, have);
    if (have == sizeof buf - 1) { /* no newline in a full buffer */
      buf[have] = 0;
      take_line(&r, buf);
      have = 0;
    }
  }
  close(fds[0]);
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  int prog = WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : 1;
  if (r.json) {
    fprintf(r.out, "{\"summary\":{\"errors\":%lld,\"printed\":%lld,\"program_status\":%d}}\n", r.errors,
            r.printed, prog);
  } else {
    if (r.printed < r.errors)
      fprintf(r.out, "========= %lld report%s not printed (--print-limit %lld)\n", r.errors - r.printed,
              r.errors - r.printed == 1 ? "" : "s", r.print_limit);
    fprintf(r.out, "========= ERROR SUMMARY: %lld error%s\n", r.errors, r.errors == 1 ? "" : "s");
  }
  if (log_path && out_close(&log, true)) return EXIT_FAILURE;
  if (r.errors > 0) return (int)exitcode;
  return prog;
}
