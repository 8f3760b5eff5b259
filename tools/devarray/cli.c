/*
 * The tool's common parts: messages, option values, output files, JSON output.
 */
#define _DEFAULT_SOURCE
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

/* ---- messages ------------------------------------------------------------------ */

const char *cmd_name;

void errorf(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "devarray: ");
  if (cmd_name) fprintf(stderr, "%s: ", cmd_name);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

/* The second line of every usage error. */
int try_help(void) {
  fprintf(stderr, "Try 'devarray%s%s --help'.\n", cmd_name ? " " : "", cmd_name ? cmd_name : "");
  return EXIT_USAGE;
}

int usage_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "devarray: ");
  if (cmd_name) fprintf(stderr, "%s: ", cmd_name);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  return try_help();
}

/* ---- option values --------------------------------------------------------------- */

/* A whole decimal number in [lo, hi].  0, or a usage error (printed). */
int parse_count(const char *opt, const char *s, long long lo, long long hi, long long *out) {
  const char *d = s[0] == '-' ? s + 1 : s;
  char *end;
  errno = 0;
  long long v = isdigit((unsigned char)d[0]) ? strtoll(s, &end, 10) : 0;
  if (!isdigit((unsigned char)d[0]) || *end)
    return usage_error("%s: '%s' is not a whole number", opt, s);
  if (errno == ERANGE || v < lo || v > hi)
    return usage_error("%s: %s is out of range (%lld to %lld)", opt, s, lo, hi);
  *out = v;
  return 0;
}

/* "64K" for 65536: the largest exact K/M/G/T unit, as the options are written. */
void size_text(char *buf, size_t cap, uint64_t v) {
  const char *unit = "KMGT";
  int i = -1;
  while (i < 3 && v && v % 1024 == 0) v /= 1024, i++;
  if (i < 0)
    snprintf(buf, cap, "%llu", (unsigned long long)v);
  else
    snprintf(buf, cap, "%llu%c", (unsigned long long)v, unit[i]);
}

/* Bytes: a whole number with an optional K, M, G or T suffix (powers of
 * 1024; "KiB" and "KB" too), as the library reads its size options.  0, or a
 * usage error (printed). */
int parse_size(const char *opt, const char *s, uint64_t lo, uint64_t hi, uint64_t *out) {
  char *end;
  errno = 0;
  unsigned long long v = isdigit((unsigned char)s[0]) ? strtoull(s, &end, 10) : 0;
  bool overflow = errno == ERANGE;
  int shift = 0;
  if (isdigit((unsigned char)s[0]) && !overflow) {
    switch (toupper((unsigned char)*end)) {
      case 'K': shift = 10; break;
      case 'M': shift = 20; break;
      case 'G': shift = 30; break;
      case 'T': shift = 40; break;
      default: break;
    }
    if (shift) {
      end++;
      if (*end == 'i' || *end == 'I') end++;
      if (*end == 'B' || *end == 'b') end++;
    } else if (*end == 'B' || *end == 'b') {
      end++;
    }
  }
  if (!isdigit((unsigned char)s[0]) || (!overflow && *end))
    return usage_error("%s: '%s' is not a size (bytes, optionally with a K, M, G or T suffix)", opt,
                       s);
  char a[32], b[32];
  size_text(a, sizeof a, lo), size_text(b, sizeof b, hi);
  if (overflow || v > (hi >> shift) || (v << shift) < lo)
    return usage_error("%s: %s is out of range (%s to %s)", opt, s, a, b);
  *out = (uint64_t)v << shift;
  return 0;
}

/* ---- output files ------------------------------------------------------------------ */

int out_open(outfile *o, const char *path, const char *mode) {
  o->path = path;
  o->created = access(path, F_OK) != 0;
  o->f = fopen(path, mode);
  if (!o->f) {
    errorf("cannot write '%s': %s", path, strerror(errno));
    return EXIT_FAILURE;
  }
  return 0;
}

int out_open_temp(outfile *o, char *buf, size_t bufsz, const char *stem, const char *suffix) {
  const char *dir = getenv("TMPDIR");
  if (!dir || !*dir) dir = "/tmp";
  int n = snprintf(buf, bufsz, "%s/%s-XXXXXX.%s", dir, stem, suffix);
  if (n < 0 || (size_t)n >= bufsz) {
    errorf("cannot make a temporary file name in '%s': too long", dir);
    return EXIT_FAILURE;
  }
  int fd = mkstemps(buf, (int)strlen(suffix) + 1);
  if (fd < 0) {
    errorf("cannot create a temporary file in '%s': %s", dir, strerror(errno));
    return EXIT_FAILURE;
  }
  o->path = buf;
  o->created = true;
  o->f = fdopen(fd, "wb");
  if (!o->f) {
    errorf("cannot write '%s': %s", buf, strerror(errno));
    close(fd);
    remove(buf);
    return EXIT_FAILURE;
  }
  return 0;
}

/* Close o; ok == false (the command failed) removes a file it created.  A
 * write error (a full disk) is reported and makes the result a failure. */
int out_close(outfile *o, bool ok) {
  if (!o->f) return ok ? 0 : EXIT_FAILURE;
  int err = 0;
  if (fflush(o->f))
    err = errno;
  else if (ferror(o->f))
    err = EIO;
  if (fclose(o->f) && !err) err = errno;
  o->f = NULL;
  if (ok && err) {
    errorf("cannot write '%s': %s", o->path, strerror(err));
    ok = false;
  }
  if (!ok && o->created) remove(o->path);
  return ok ? 0 : EXIT_FAILURE;
}

/* ---- JSON output ------------------------------------------------------------------ */

void json_string(FILE *f, const char *s) {
  fputc('"', f);
  for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
    if (*p == '"' || *p == '\\')
      fprintf(f, "\\%c", *p);
    else if (*p == '\n')
      fputs("\\n", f);
    else if (*p == '\t')
      fputs("\\t", f);
    else if (*p < 0x20 || *p == 0x7f)
      fprintf(f, "\\u%04x", *p);
    else
      fputc(*p, f);
  }
  fputc('"', f);
}

/* A string, or null for NULL. */
void json_string_or_null(FILE *f, const char *s) {
  if (s)
    json_string(f, s);
  else
    fputs("null", f);
}

/* "key":v with three decimals; JSON has no infinities, so a transfer too
 * quick for the clock gives null. */
void json_fixed3(FILE *f, const char *key, double v) {
  json_string(f, key);
  if (isfinite(v))
    fprintf(f, ":%.3f", v);
  else
    fputs(":null", f);
}
