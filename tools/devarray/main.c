/*
 * devarray - the command-line tool.
 *
 *   devarray info [--json]      backends, devices, capacities, options
 *   devarray bench [options]    transfer sweep against memcpy of the same bytes (table, JSON, plot)
 *   devarray report [options]   the pool after a random workload: statistics, segment map (PNG),
 *                               snapshot (JSON), allocation log (CSV)
 *   devarray check [options] -- PROGRAM [ARGS...]
 *                               run PROGRAM under the host simulator's checks and report
 *                               every bug found (cmd_check.c; its own exit status)
 *
 * Results go to stdout; progress, warnings and errors to stderr.  Exit
 * status: 0 success, 1 failure (a backend, an output file, gnuplot), 2 usage
 * error (an unknown command or option, a malformed value).  Every command
 * parses its options with getopt_long and prints its help to stdout.
 *
 * This file is the dispatch: the top-level options, `help` and `version`,
 * and the command table.  Each command is a file of its own (cmd_*.c); the
 * parts they share are declared in cli.h.
 */
#define _DEFAULT_SOURCE
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* ---- main ----------------------------------------------------------------------- */

static const char main_help[] =
    "Usage: devarray [--help | --version] COMMAND [OPTIONS]\n"
    "\n"
    "The devarray tool: GPU device arrays with Numba's memory model, on CUDA,\n"
    "OpenCL or the host simulator.\n"
    "\n"
    "Commands:\n"
    "  info      backends, devices, capacities and options (--json for scripts)\n"
    "  bench     transfer sweep against memcpy of the same bytes (table, JSON, plot)\n"
    "  report    the pool after a random workload: statistics, segment map (PNG),\n"
    "            snapshot (JSON), allocation log (CSV)\n"
    "  check     run a program under the kernel and handle checks, report every\n"
    "            bug found, then an error summary (exit status: see its --help)\n"
    "  help [COMMAND]  this help, or a command's\n"
    "  version   print the version\n"
    "\n"
    "Options:\n"
    "  -h, --help     print this help and exit\n"
    "  -V, --version  print the version and exit\n"
    "\n"
    "'devarray COMMAND --help' describes a command's options.  Results go to\n"
    "stdout, progress and errors to stderr.  Exit status: 0 success, 1 failure,\n"
    "2 usage error.\n";

typedef struct command {
  const char *name;
  int (*run)(int argc, char **argv);
  const char *help;
} command;

static const command commands[] = {
    {"info", cmd_info, info_help},
    {"bench", cmd_bench, bench_help},
    {"report", cmd_report, report_help},
    {"check", cmd_check, check_help},
};

static const command *find_command(const char *name) {
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    if (!strcmp(commands[i].name, name)) return &commands[i];
  return NULL;
}

/* A result on stdout that could not be written (a full disk, a closed pipe
 * reader) is a failure too. */
static int finish(int status) {
  if ((fflush(stdout) || ferror(stdout)) && status == 0) {
    cmd_name = NULL;
    errorf("write error on standard output: %s", errno ? strerror(errno) : "I/O error");
    return EXIT_FAILURE;
  }
  return status;
}

int main(int argc, char **argv) {
  /* getopt prefixes its messages with argv[0]: "devarray", and for a
   * command "devarray: bench", so they read like the tool's own. */
  static char prog[] = "devarray";
  static char label[64];
  static const struct option opts[] = {
      {"help", no_argument, NULL, 'h'}, {"version", no_argument, NULL, 'V'}, {NULL, 0, NULL, 0}};
  if (argc < 1) return EXIT_USAGE;
  argv[0] = prog;
  int c;
  optind = 0;
  while ((c = getopt_long(argc, argv, "+hV", opts, NULL)) != -1) {
    switch (c) {
      case 'h': fputs(main_help, stdout); return finish(0);
      case 'V': printf("devarray %s\n", dv_version()); return finish(0);
      default: return try_help();
    }
  }
  if (optind == argc) {
    fputs(main_help, stderr);
    return EXIT_USAGE;
  }
  const char *name = argv[optind];
  if (!strcmp(name, "version")) {
    if (optind + 1 < argc)
      return usage_error("version: unexpected argument '%s'", argv[optind + 1]);
    printf("devarray %s\n", dv_version());
    return finish(0);
  }
  if (!strcmp(name, "help")) {
    if (optind + 2 < argc) return usage_error("help: unexpected argument '%s'", argv[optind + 2]);
    if (optind + 1 == argc) {
      fputs(main_help, stdout);
      return finish(0);
    }
    const command *cmd = find_command(argv[optind + 1]);
    if (!cmd) return usage_error("help: unknown command '%s'", argv[optind + 1]);
    fputs(cmd->help, stdout);
    return finish(0);
  }
  const command *cmd = find_command(name);
  if (!cmd) return usage_error("unknown command '%s'", name);
  cmd_name = cmd->name;
  snprintf(label, sizeof label, "devarray: %s", cmd->name);
  argv[optind] = label;
  argc -= optind, argv += optind;
  optind = 0; /* glibc: start afresh on the new argument vector */
  return finish(cmd->run(argc, argv));
}
