/*
 * cli.h -- what the devarray tool's commands share: messages and usage
 * errors (cli.c), option values (cli.c), output files (cli.c), JSON output
 * (cli.c), a JSON reader (json.c) and gnuplot (gnuplot.c).  Each command is
 * one file, cmd_<name>.c, exporting cmd_<name> and <name>_help for the
 * command table in main.c.
 *
 * Exit status of every command: 0 success, EXIT_FAILURE (1) failure,
 * EXIT_USAGE (2) usage error.
 */
#ifndef DV_TOOL_CLI_H
#define DV_TOOL_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "devarray.h"

#define EXIT_USAGE 2

/* ---- messages (cli.c) ---------------------------------------------------------- */

/* The command being run ("bench"), for the "devarray: bench: ..." prefix; NULL at the top level. */
extern const char *cmd_name;

/* "devarray: CMD: message" on stderr. */
void errorf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The second line of every usage error; returns EXIT_USAGE. */
int try_help(void);
/* A usage error (message, then try_help's line); returns EXIT_USAGE. */
int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- option values (cli.c) -------------------------------------------------------- */

/* A whole decimal number in [lo, hi].  0, or a usage error (printed). */
int parse_count(const char *opt, const char *s, long long lo, long long hi, long long *out);
/* "64K" for 65536: the largest exact K/M/G/T unit, as the options are written. */
void size_text(char *buf, size_t cap, uint64_t v);
/* Bytes with an optional K, M, G or T suffix in [lo, hi].  0, or a usage error (printed). */
int parse_size(const char *opt, const char *s, uint64_t lo, uint64_t hi, uint64_t *out);

/* ---- output files (cli.c) --------------------------------------------------------- */

/* A file named on the command line.  Each is opened before any work starts,
 * so a path that cannot be written fails at once, with nothing on stdout. */
typedef struct outfile {
  const char *path;
  FILE *f;
  bool created; /* it did not exist: remove it again if writing fails */
} outfile;

/* Open path for writing; 0 or EXIT_FAILURE (reported). */
int out_open(outfile *o, const char *path, const char *mode);
/* Create and open a new file STEM-XXXXXX.SUFFIX in $TMPDIR (else /tmp), its
 * name written to buf (o->path points there; buf outlives o); 0 or
 * EXIT_FAILURE (reported). */
int out_open_temp(outfile *o, char *buf, size_t bufsz, const char *stem, const char *suffix);
/* Close o; ok == false (the command failed) removes a file it created.  A
 * write error (a full disk) is reported and makes the result a failure. */
int out_close(outfile *o, bool ok);

/* ---- JSON output (cli.c) ---------------------------------------------------------- */

void json_string(FILE *f, const char *s);
/* A string, or null for NULL. */
void json_string_or_null(FILE *f, const char *s);
/* "key":v with three decimals, or "key":null for a non-finite v. */
void json_fixed3(FILE *f, const char *key, double v);

/* ---- a JSON reader (json.c) ------------------------------------------------------- */

/*
 * The pool's segments and blocks come only as JSON (dv_memory_snapshot_json:
 * the library has no struct for them).  This is a strict RFC 8259 reader
 * into a tree, so the segment map depends on the documented keys and value
 * types, not on the order or spelling of the text around them.
 */
typedef enum { J_NULL, J_BOOL, J_NUMBER, J_STRING, J_ARRAY, J_OBJECT } jtype;

typedef struct jval {
  jtype type;
  bool boolean;
  double number;
  bool is_uint; /* a non-negative integer that fits uint64_t exactly: see uint */
  uint64_t uint;
  char *string; /* J_STRING: decoded UTF-8, NUL-terminated */
  size_t n;     /* J_ARRAY, J_OBJECT: number of items */
  struct jval *item;
  char **key; /* J_OBJECT: the items' keys */
} jval;

void jfree(jval *v);
/* Parse text into *out (freed with jfree, also after a failure).  On failure
 * *err says what and *at is the byte offset. */
bool json_parse(const char *text, jval *out, const char **err, size_t *at);
/* obj[key] when obj is an object and the value has that type; else NULL. */
const jval *jget(const jval *obj, const char *key, jtype type);
/* obj[key] as a byte count, or false. */
bool jget_uint(const jval *obj, const char *key, uint64_t *out);

/* ---- gnuplot (gnuplot.c) ---------------------------------------------------------- */

#define GNUPLOT_HINT "gnuplot is needed (Debian: gnuplot-nox; scripts/setup installs it)"

/* Whether `name` is an executable file in a PATH directory. */
bool on_path(const char *name);
/* A string inside a single-quoted gnuplot string ('' is a quote). */
void gp_quoted(FILE *f, const char *s);
/* The terminal for a .png (pngcairo where built in, else libgd's png) or .svg file. */
void gp_terminal(FILE *f, bool svg, int width, int height);
/* Run gnuplot on `script` with its standard output going to `out`.  0 or EXIT_FAILURE. */
int run_gnuplot(const char *script, size_t len, outfile *out);

/* ---- the commands ----------------------------------------------------------------- */

int cmd_info(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_check(int argc, char **argv);
extern const char info_help[], bench_help[], report_help[], check_help[];

#endif
