/*
 * devarray - the command-line tool.
 *
 *   devarray info [--json]      backends, devices, capacities, options
 *   devarray bench [options]    transfer sweep against memcpy of the same bytes (table, JSON, plot)
 *   devarray report [options]   the pool after a random workload: statistics, segment map (PNG),
 *                               snapshot (JSON), allocation log (CSV)
 *
 * Results go to stdout; progress, warnings and errors to stderr.  Exit
 * status: 0 success, 1 failure (a backend, an output file, gnuplot), 2 usage
 * error (an unknown command or option, a malformed value).  Every command
 * parses its options with getopt_long and prints its help to stdout.
 */
#define _DEFAULT_SOURCE
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "devarray.h"

extern char **environ;

#define EXIT_USAGE 2

/* ---- messages ------------------------------------------------------------------ */

/* The command being run ("bench"), for the "devarray: bench: ..." prefix; NULL at the top level. */
static const char *cmd_name;

static void errorf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void errorf(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "devarray: ");
  if (cmd_name) fprintf(stderr, "%s: ", cmd_name);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

/* The second line of every usage error. */
static int try_help(void) {
  fprintf(stderr, "Try 'devarray%s%s --help'.\n", cmd_name ? " " : "", cmd_name ? cmd_name : "");
  return EXIT_USAGE;
}

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_error(const char *fmt, ...) {
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
static int parse_count(const char *opt, const char *s, long long lo, long long hi, long long *out) {
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
static void size_text(char *buf, size_t cap, uint64_t v) {
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
static int parse_size(const char *opt, const char *s, uint64_t lo, uint64_t hi, uint64_t *out) {
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

/* A file named on the command line.  Each is opened before any work starts,
 * so a path that cannot be written fails at once, with nothing on stdout. */
typedef struct outfile {
  const char *path;
  FILE *f;
  bool created; /* it did not exist: remove it again if writing fails */
} outfile;

static int out_open(outfile *o, const char *path, const char *mode) {
  o->path = path;
  o->created = access(path, F_OK) != 0;
  o->f = fopen(path, mode);
  if (!o->f) {
    errorf("cannot write '%s': %s", path, strerror(errno));
    return EXIT_FAILURE;
  }
  return 0;
}

/* Close o; ok == false (the command failed) removes a file it created.  A
 * write error (a full disk) is reported and makes the result a failure. */
static int out_close(outfile *o, bool ok) {
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

static void json_string(FILE *f, const char *s) {
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
static void json_string_or_null(FILE *f, const char *s) {
  if (s)
    json_string(f, s);
  else
    fputs("null", f);
}

/* "key":v with three decimals; JSON has no infinities, so a transfer too
 * quick for the clock gives null. */
static void json_fixed3(FILE *f, const char *key, double v) {
  json_string(f, key);
  if (isfinite(v))
    fprintf(f, ":%.3f", v);
  else
    fputs(":null", f);
}

/* ---- a JSON reader (the pool snapshot) ---------------------------------------------- */

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

typedef struct jreader {
  const char *text, *p;
  int depth;
  const char *err;
} jreader;

#define JSON_MAX_DEPTH 64

static void jfree(jval *v) {
  free(v->string);
  for (size_t i = 0; i < v->n; i++) {
    jfree(&v->item[i]);
    if (v->key) free(v->key[i]);
  }
  free(v->item);
  free(v->key);
  memset(v, 0, sizeof *v);
}

static bool jfail(jreader *r, const char *what) {
  if (!r->err) r->err = what;
  return false;
}

static void jspace(jreader *r) {
  while (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r') r->p++;
}

static int jhex4(const char *s) {
  int v = 0;
  for (int i = 0; i < 4; i++) {
    int c = tolower((unsigned char)s[i]);
    if (isdigit(c))
      v = v * 16 + (c - '0');
    else if (c >= 'a' && c <= 'f')
      v = v * 16 + (c - 'a' + 10);
    else
      return -1;
  }
  return v;
}

static char *jutf8(char *o, unsigned cp) {
  if (cp < 0x80)
    *o++ = (char)cp;
  else if (cp < 0x800)
    *o++ = (char)(0xc0 | cp >> 6), *o++ = (char)(0x80 | (cp & 0x3f));
  else if (cp < 0x10000)
    *o++ = (char)(0xe0 | cp >> 12), *o++ = (char)(0x80 | ((cp >> 6) & 0x3f)),
    *o++ = (char)(0x80 | (cp & 0x3f));
  else
    *o++ = (char)(0xf0 | cp >> 18), *o++ = (char)(0x80 | ((cp >> 12) & 0x3f)),
    *o++ = (char)(0x80 | ((cp >> 6) & 0x3f)), *o++ = (char)(0x80 | (cp & 0x3f));
  return o;
}

/* At an opening quote.  The decoded text is never longer than the quoted one. */
static bool jstring(jreader *r, char **out) {
  const char *s = ++r->p, *e = s;
  while (*e && *e != '"') e += (*e == '\\' && e[1]) ? 2 : 1;
  if (*e != '"') return jfail(r, "unterminated string");
  char *buf = malloc((size_t)(e - s) + 1), *o = buf;
  if (!buf) return jfail(r, "out of memory");
  while (r->p < e) {
    unsigned char c = (unsigned char)*r->p++;
    if (c < 0x20) goto bad;
    if (c != '\\') {
      *o++ = (char)c;
      continue;
    }
    switch (*r->p++) {
      case '"': *o++ = '"'; break;
      case '\\': *o++ = '\\'; break;
      case '/': *o++ = '/'; break;
      case 'b': *o++ = '\b'; break;
      case 'f': *o++ = '\f'; break;
      case 'n': *o++ = '\n'; break;
      case 'r': *o++ = '\r'; break;
      case 't': *o++ = '\t'; break;
      case 'u': {
        int hi = e - r->p >= 4 ? jhex4(r->p) : -1;
        if (hi <= 0) goto bad; /* \u0000 would cut the C string */
        r->p += 4;
        unsigned cp = (unsigned)hi;
        if (hi >= 0xd800 && hi < 0xdc00) {
          int lo = e - r->p >= 6 && r->p[0] == '\\' && r->p[1] == 'u' ? jhex4(r->p + 2) : -1;
          if (lo < 0xdc00 || lo >= 0xe000) goto bad;
          r->p += 6;
          cp = 0x10000 + (((unsigned)hi - 0xd800) << 10) + ((unsigned)lo - 0xdc00);
        } else if (hi >= 0xdc00 && hi < 0xe000) {
          goto bad;
        }
        o = jutf8(o, cp);
        break;
      }
      default: goto bad;
    }
  }
  *o = 0;
  r->p = e + 1;
  *out = buf;
  return true;
bad:
  free(buf);
  return jfail(r, "bad string");
}

static bool jnumber(jreader *r, jval *v) {
  const char *s = r->p, *p = s;
  bool integer = true;
  if (*p == '-') p++, integer = false;
  if (*p == '0')
    p++;
  else if (isdigit((unsigned char)*p))
    while (isdigit((unsigned char)*p)) p++;
  else
    return jfail(r, "bad number");
  if (*p == '.') {
    integer = false, p++;
    if (!isdigit((unsigned char)*p)) return jfail(r, "bad number");
    while (isdigit((unsigned char)*p)) p++;
  }
  if (*p == 'e' || *p == 'E') {
    integer = false, p++;
    if (*p == '+' || *p == '-') p++;
    if (!isdigit((unsigned char)*p)) return jfail(r, "bad number");
    while (isdigit((unsigned char)*p)) p++;
  }
  char buf[400];
  if ((size_t)(p - s) >= sizeof buf) return jfail(r, "number too long");
  memcpy(buf, s, (size_t)(p - s));
  buf[p - s] = 0;
  v->type = J_NUMBER;
  v->number = strtod(buf, NULL);
  if (integer) {
    errno = 0;
    unsigned long long u = strtoull(buf, NULL, 10);
    if (errno != ERANGE) v->is_uint = true, v->uint = u;
  }
  r->p = p;
  return true;
}

static bool jvalue(jreader *r, jval *v);

/* An array or an object: items separated by commas, up to `close`. */
static bool jcontainer(jreader *r, jval *v, bool object) {
  char close = object ? '}' : ']';
  size_t cap = 0;
  v->type = object ? J_OBJECT : J_ARRAY;
  if (++r->depth > JSON_MAX_DEPTH) return jfail(r, "nested too deeply");
  r->p++;
  jspace(r);
  if (*r->p == close) {
    r->p++, r->depth--;
    return true;
  }
  for (;;) {
    if (v->n == cap) {
      cap = cap ? 2 * cap : 8;
      jval *item = realloc(v->item, cap * sizeof *item);
      if (!item) return jfail(r, "out of memory");
      v->item = item;
      if (object) {
        char **key = realloc(v->key, cap * sizeof *key);
        if (!key) return jfail(r, "out of memory");
        v->key = key;
      }
    }
    jval *it = &v->item[v->n];
    memset(it, 0, sizeof *it);
    char *key = NULL;
    if (object) {
      jspace(r);
      if (*r->p != '"') return jfail(r, "expected a key");
      if (!jstring(r, &key)) return false;
      jspace(r);
      if (*r->p != ':') {
        free(key);
        return jfail(r, "expected ':'");
      }
      r->p++;
    }
    bool ok = jvalue(r, it);
    if (object) v->key[v->n] = key;
    v->n++; /* jfree cleans up a half-read item too */
    if (!ok) return false;
    jspace(r);
    if (*r->p == ',') {
      r->p++;
      continue;
    }
    if (*r->p != close) return jfail(r, object ? "expected ',' or '}'" : "expected ',' or ']'");
    r->p++, r->depth--;
    return true;
  }
}

static bool jvalue(jreader *r, jval *v) {
  jspace(r);
  switch (*r->p) {
    case '{': return jcontainer(r, v, true);
    case '[': return jcontainer(r, v, false);
    case '"': v->type = J_STRING; return jstring(r, &v->string);
    case 't':
      if (strncmp(r->p, "true", 4)) break;
      r->p += 4, v->type = J_BOOL, v->boolean = true;
      return true;
    case 'f':
      if (strncmp(r->p, "false", 5)) break;
      r->p += 5, v->type = J_BOOL;
      return true;
    case 'n':
      if (strncmp(r->p, "null", 4)) break;
      r->p += 4, v->type = J_NULL;
      return true;
    default:
      if (*r->p == '-' || isdigit((unsigned char)*r->p)) return jnumber(r, v);
      break;
  }
  return jfail(r, "expected a value");
}

/* Parse text into *out (freed with jfree, also after a failure).  On failure
 * *err says what and *at is the byte offset. */
static bool json_parse(const char *text, jval *out, const char **err, size_t *at) {
  jreader r = {text, text, 0, NULL};
  memset(out, 0, sizeof *out);
  bool ok = jvalue(&r, out);
  if (ok) {
    jspace(&r);
    if (*r.p) ok = jfail(&r, "text after the value");
  }
  *err = r.err;
  *at = (size_t)(r.p - text);
  return ok;
}

/* obj[key] when obj is an object and the value has that type; else NULL. */
static const jval *jget(const jval *obj, const char *key, jtype type) {
  if (!obj || obj->type != J_OBJECT) return NULL;
  for (size_t i = 0; i < obj->n; i++)
    if (!strcmp(obj->key[i], key)) return obj->item[i].type == type ? &obj->item[i] : NULL;
  return NULL;
}

/* obj[key] as a byte count, or false. */
static bool jget_uint(const jval *obj, const char *key, uint64_t *out) {
  const jval *v = jget(obj, key, J_NUMBER);
  if (!v || !v->is_uint) return false;
  *out = v->uint;
  return true;
}

/* ---- gnuplot ---------------------------------------------------------------------- */

#define GNUPLOT_HINT "gnuplot is needed (Debian: gnuplot-nox; scripts/setup installs it)"

/* Whether `name` is an executable file in a PATH directory (as posix_spawnp
 * will look for it). */
static bool on_path(const char *name) {
  const char *path = getenv("PATH");
  if (!path) path = "/bin:/usr/bin";
  for (const char *p = path;;) {
    const char *colon = strchr(p, ':');
    size_t n = colon ? (size_t)(colon - p) : strlen(p);
    char file[PATH_MAX];
    if (snprintf(file, sizeof file, "%.*s/%s", (int)(n ? n : 1), n ? p : ".", name) <
            (int)sizeof file &&
        access(file, X_OK) == 0)
      return true;
    if (!colon) return false;
    p = colon + 1;
  }
}

/* A string inside a single-quoted gnuplot string ('' is a quote). */
static void gp_quoted(FILE *f, const char *s) {
  fputc('\'', f);
  for (; *s; s++) {
    if (*s == '\'') fputc('\'', f);
    if (*s != '\n' && *s != '\r') fputc(*s, f);
  }
  fputc('\'', f);
}

/* The terminal for a .png (pngcairo where built in, else libgd's png) or .svg file. */
static void gp_terminal(FILE *f, bool svg, int width, int height) {
  if (svg)
    fprintf(
        f, "set terminal svg size %d,%d dynamic noenhanced font 'sans,11' background rgb 'white'\n",
        width, height);
  else
    fprintf(f,
            "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {\n"
            "  set terminal pngcairo size %d,%d noenhanced font 'sans,10'\n"
            "} else {\n"
            "  set terminal png size %d,%d noenhanced\n"
            "}\n",
            width, height, width, height);
}

/*
 * Run gnuplot on `script` with its standard output going to `out`.  The
 * script never says `set output`: the tool opens the file itself, so a path
 * gnuplot could not open can never send the image to our stdout, and quotes
 * in a file name need no escaping.  gnuplot's messages are kept in a
 * temporary file and shown only when it fails.  0 or EXIT_FAILURE.
 */
static int run_gnuplot(const char *script, size_t len, outfile *out) {
  FILE *in = tmpfile(), *err = tmpfile();
  int rc = EXIT_FAILURE;
  if (!in || !err) {
    errorf("cannot create a temporary file for gnuplot: %s", strerror(errno));
    goto done;
  }
  if (fwrite(script, 1, len, in) != len || fflush(in) || fseek(in, 0, SEEK_SET)) {
    errorf("cannot write gnuplot's script to a temporary file: %s", strerror(errno));
    goto done;
  }
  fflush(out->f);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fileno(in), 0);
  posix_spawn_file_actions_adddup2(&fa, fileno(out->f), 1);
  posix_spawn_file_actions_adddup2(&fa, fileno(err), 2);
  static char arg0[] = "gnuplot", arg1[] = "--default-settings";
  char *argv[] = {arg0, arg1, NULL};
  pid_t pid;
  int e = posix_spawnp(&pid, "gnuplot", &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (e) {
    errorf("cannot run gnuplot: %s; " GNUPLOT_HINT, strerror(e));
    goto done;
  }
  int status;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) {
      errorf("waiting for gnuplot: %s", strerror(errno));
      goto done;
    }
  off_t written = lseek(fileno(out->f), 0, SEEK_END); /* -1 for a pipe: not known */
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && written != 0) {
    rc = 0;
    goto done;
  }
  if (WIFEXITED(status))
    errorf("gnuplot failed (exit status %d) drawing '%s'%s", WEXITSTATUS(status), out->path,
           WEXITSTATUS(status) == 0 ? ": it wrote nothing" : "");
  else
    errorf("gnuplot was killed (signal %d) drawing '%s'",
           WIFSIGNALED(status) ? WTERMSIG(status) : 0, out->path);
  char line[512];
  rewind(err);
  while (fgets(line, sizeof line, err)) {
    line[strcspn(line, "\n")] = 0;
    if (line[strspn(line, " ^")]) errorf("gnuplot: %s", line);
  }
done:
  if (in) fclose(in);
  if (err) fclose(err);
  return rc;
}

/* ---- info ------------------------------------------------------------------------- */

static const char *source_name(dv_option_source s) {
  switch (s) {
    case DV_SOURCE_DEFAULT: return "default";
    case DV_SOURCE_ENV: return "environment";
    case DV_SOURCE_ENV_NUMBA: return "environment (Numba name)";
    case DV_SOURCE_API: return "api";
  }
  return "?";
}

/* The same, as a key for scripts. */
static const char *source_key(dv_option_source s) {
  switch (s) {
    case DV_SOURCE_DEFAULT: return "default";
    case DV_SOURCE_ENV: return "env";
    case DV_SOURCE_ENV_NUMBA: return "env_numba";
    case DV_SOURCE_API: return "api";
  }
  return "unknown";
}

static void print_size(char *buf, size_t cap, double bytes) {
  const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int i = 0;
  while (bytes >= 1024 && i < 4) bytes /= 1024, i++;
  snprintf(buf, cap, i ? "%.1f %s" : "%.0f %s", bytes, u[i]);
}

static void print_device(const dv_device_info *d) {
  char mem[32], maxa[32];
  print_size(mem, sizeof mem, (double)d->total_memory);
  print_size(maxa, sizeof maxa, (double)d->max_allocation);
  printf("    device:          %s (%s)\n", d->name, d->vendor);
  printf("    driver:          %s\n", d->driver_version);
  printf("    memory:          %s, largest allocation %s, alignment %llu bytes\n", mem, maxa,
         (unsigned long long)d->base_alignment);
  printf("    mapped memory:   %s; managed memory: %s\n", d->can_map_host_memory ? "yes" : "no",
         d->managed_memory ? "yes" : "no");
  if (d->compute_major) printf("    compute:         %d.%d\n", d->compute_major, d->compute_minor);
  if (d->pci_bus_id[0]) printf("    PCI bus id:      %s\n", d->pci_bus_id);
  printf("    peer access:     %d other device(s)\n", d->peer_devices);
}

static void json_device(FILE *f, const dv_device_info *d) {
  fputs("{\"backend\":", f), json_string(f, d->backend);
  fputs(",\"name\":", f), json_string(f, d->name);
  fputs(",\"vendor\":", f), json_string(f, d->vendor);
  fputs(",\"driver_version\":", f), json_string(f, d->driver_version);
  fprintf(f, ",\"total_memory\":%llu,\"max_allocation\":%llu,\"base_alignment\":%llu",
          (unsigned long long)d->total_memory, (unsigned long long)d->max_allocation,
          (unsigned long long)d->base_alignment);
  fprintf(f, ",\"can_map_host_memory\":%s,\"managed_memory\":%s",
          d->can_map_host_memory ? "true" : "false", d->managed_memory ? "true" : "false");
  if (d->compute_major)
    fprintf(f, ",\"compute_capability\":\"%d.%d\"", d->compute_major, d->compute_minor);
  else
    fputs(",\"compute_capability\":null", f);
  fputs(",\"pci_bus_id\":", f), json_string_or_null(f, d->pci_bus_id[0] ? d->pci_bus_id : NULL);
  fprintf(f, ",\"peer_devices\":%d}", d->peer_devices);
}

/* One compiled-in backend as this machine sees it. */
typedef struct backend_row {
  const char *name;
  dv_status status;  /* DV_OK: a context opened on it */
  char reason[1024]; /* the probe's description, or why the backend is unavailable */
  bool have_device;
  dv_device_info device;
} backend_row;

static void probe_backend(backend_row *b, const char *name) {
  memset(b, 0, sizeof *b);
  b->name = name;
  b->status = dv_backend_probe(name, b->reason, sizeof b->reason);
  if (b->status) return;
  dv_config *cfg = NULL;
  dv_context *ctx = NULL;
  b->status = dv_config_create(&cfg);
  if (!b->status) b->status = dv_config_set(cfg, "backend", name);
  if (!b->status) b->status = dv_context_create(cfg, &ctx);
  dv_config_destroy(cfg);
  if (b->status) {
    snprintf(b->reason, sizeof b->reason, "%s", dv_last_error());
    return;
  }
  b->have_device = dv_context_device_info(ctx, &b->device) == DV_OK;
  dv_context_destroy(ctx);
}

static const char info_help[] =
    "Usage: devarray info [--json]\n"
    "\n"
    "The backends compiled in and whether each can be opened on this machine (and\n"
    "why not), their devices and capacities, the backend chosen by default, and\n"
    "every option with its environment variable, value and source.\n"
    "\n"
    "Options:\n"
    "      --json    the same as one JSON object, for scripts: version, backends\n"
    "                (name, available, status, reason, device), devices,\n"
    "                default_backend, kernel_cache (path, entries, bytes, or\n"
    "                error), options (name, env, env_fallback, type, default,\n"
    "                value, source, description)\n"
    "  -h, --help    print this help and exit\n";

static int cmd_info(int argc, char **argv) {
  enum { OPT_JSON = 256 };
  static const struct option opts[] = {
      {"json", no_argument, NULL, OPT_JSON}, {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
  bool json = false;
  int c;
  while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    switch (c) {
      case 'h': fputs(info_help, stdout); return 0;
      case OPT_JSON: json = true; break;
      default: return try_help(); /* getopt said what was wrong */
    }
  }
  if (optind < argc) return usage_error("unexpected argument '%s'", argv[optind]);

  size_t nb = dv_backend_count();
  backend_row *rows = calloc(nb ? nb : 1, sizeof *rows);
  if (!rows) {
    errorf("out of memory");
    return EXIT_FAILURE;
  }
  for (size_t i = 0; i < nb; i++) probe_backend(&rows[i], dv_backend_name(i));
  dv_context *ctx = NULL;
  const char *default_backend = NULL;
  char default_error[1024] = "";
  if (dv_context_create(NULL, &ctx) == DV_OK)
    default_backend = dv_context_backend(ctx);
  else
    snprintf(default_error, sizeof default_error, "%s", dv_last_error());
  /* The compiled-module cache of kernels: where, how big (nothing created). */
  char cache_path[4096] = "", cache_error[1024] = "";
  uint64_t cache_entries = 0, cache_bytes = 0;
  if (dv_kernel_cache_info(NULL, cache_path, sizeof cache_path, &cache_entries, &cache_bytes))
    snprintf(cache_error, sizeof cache_error, "%s", dv_last_error());

  if (json) {
    printf("{\"version\":");
    json_string(stdout, dv_version());
    printf(",\"backends\":[");
    int dev = 0;
    for (size_t i = 0; i < nb; i++) {
      const backend_row *b = &rows[i];
      printf("%s{\"name\":", i ? "," : "");
      json_string(stdout, b->name);
      printf(",\"available\":%s,\"status\":\"%s\",\"reason\":", b->status ? "false" : "true",
             dv_status_name(b->status));
      json_string(stdout, b->reason);
      if (b->have_device)
        printf(",\"device\":%d}", dev++);
      else
        printf(",\"device\":null}");
    }
    printf("],\"devices\":[");
    dev = 0;
    for (size_t i = 0; i < nb; i++)
      if (rows[i].have_device) {
        if (dev++) putchar(',');
        json_device(stdout, &rows[i].device);
      }
    {
      char mode[32] = "";
      dv_option_get("host_mode", mode, sizeof mode, NULL);
      printf("],\"host_mode\":");
      json_string(stdout, mode);
    }
    printf(",\"default_backend\":");
    json_string_or_null(stdout, default_backend);
    if (!default_backend) printf(",\"default_error\":"), json_string(stdout, default_error);
    printf(",\"kernel_cache\":{\"path\":");
    json_string_or_null(stdout, cache_error[0] ? NULL : cache_path);
    if (cache_error[0])
      printf(",\"error\":"), json_string(stdout, cache_error);
    else
      printf(",\"entries\":%llu,\"bytes\":%llu", (unsigned long long)cache_entries,
             (unsigned long long)cache_bytes);
    printf("}");
    printf(",\"options\":[");
    for (size_t i = 0, first = 1; i < dv_option_count(); i++) {
      dv_option_info oi;
      char val[1024] = "";
      dv_option_source src = DV_SOURCE_DEFAULT;
      if (dv_option_describe(i, &oi)) continue;
      dv_option_get(oi.name, val, sizeof val, &src);
      printf("%s{\"name\":", first ? "" : ",");
      first = 0;
      json_string(stdout, oi.name);
      printf(",\"env\":"), json_string(stdout, oi.env);
      printf(",\"env_fallback\":"), json_string_or_null(stdout, oi.env_fallback);
      printf(",\"type\":"), json_string(stdout, oi.type);
      printf(",\"default\":"), json_string(stdout, oi.default_value);
      printf(",\"value\":"), json_string(stdout, val);
      printf(",\"source\":\"%s\",\"description\":", source_key(src));
      json_string(stdout, oi.description);
      putchar('}');
    }
    printf("]}\n");
  } else {
    printf("devarray %s\n\nbackends:\n", dv_version());
    for (size_t i = 0; i < nb; i++) {
      const backend_row *b = &rows[i];
      if (b->status) {
        printf("  %-7s unavailable: %s (%s)\n", b->name, b->reason, dv_status_name(b->status));
        continue;
      }
      printf("  %-7s available: %s\n", b->name, b->reason);
      if (b->have_device) print_device(&b->device);
      if (strcmp(b->name, "host") == 0) {
        char mode[32] = "";
        dv_option_get("host_mode", mode, sizeof mode, NULL);
        printf("    mode:            %s (option host_mode: %s)\n", mode,
               strcmp(mode, "fast") == 0
                   ? "kernels as loops over a block's threads, no guard bytes or fills; "
                     "host_mode=checked adds the checks"
                   : "per-thread bookkeeping, guard bytes, poison, quarantine and kernel "
                     "checks; host_mode=fast runs at CPU speed");
      }
    }
    if (default_backend)
      printf(
          "\ndefault backend (backend option \"auto\" picks cuda, hip, an OpenCL GPU, then host): %s\n",
          default_backend);
    else
      printf("\nno default context: %s\n", default_error);
    if (cache_error[0])
      printf("\nkernel cache: unavailable: %s\n", cache_error);
    else
      printf("\nkernel cache: %s (%llu module%s, %.1f KiB)\n", cache_path,
             (unsigned long long)cache_entries, cache_entries == 1 ? "" : "s",
             (double)cache_bytes / 1024.0);
    printf("\noptions (environment variable, value, source):\n");
    for (size_t i = 0; i < dv_option_count(); i++) {
      dv_option_info oi;
      char val[1024] = "";
      dv_option_source src = DV_SOURCE_DEFAULT;
      if (dv_option_describe(i, &oi)) continue;
      dv_option_get(oi.name, val, sizeof val, &src);
      printf("  %-34s %-30s = %-12s (%s)\n", oi.name, oi.env, val[0] ? val : "\"\"",
             source_name(src));
      printf("  %-34s %s%s%s\n", "", oi.description, oi.env_fallback ? "; also " : "",
             oi.env_fallback ? oi.env_fallback : "");
    }
  }
  dv_context_destroy(ctx);
  free(rows);
  return 0;
}

/* ---- bench ------------------------------------------------------------------- */

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* GB/s; 0 when the clock saw no time pass. */
static double gbps(size_t bytes, double seconds) {
  return seconds > 0 ? (double)bytes / seconds / 1e9 : 0;
}

typedef enum { H2D, D2H, D2D, H2D_STRIDED, D2H_STRIDED, D2D_STRIDED } direction;
static const char *dir_name[] = {"h2d", "d2h", "d2d", "h2d-strided", "d2h-strided", "d2d-strided"};

typedef struct result {
  direction dir;
  int pinned;
  size_t bytes;
  double t_dv, t_memcpy;
} result;

static void progress(int done, int total, const char *what) {
  if (!isatty(2)) {
    if (done == total) fprintf(stderr, "devarray: bench: %d/%d done\n", done, total);
    return;
  }
  int width = 30, fill = total ? done * width / total : width;
  fprintf(stderr, "\r[%.*s%*s] %3d/%d %-28s", fill, "##############################", width - fill,
          "", done, total, what);
  if (done == total) fprintf(stderr, "\n");
}

/* One measurement: median over reps of a synchronous devarray transfer and
 * of memcpy of the same number of bytes between two host buffers.  bytes >= 8. */
static dv_status measure(dv_context *ctx, direction dir, int pinned, size_t bytes, int reps,
                         result *r) {
  const dv_dtype *f8 = dv_dtype_get(DV_FLOAT64);
  int64_t n = (int64_t)(bytes / 8);
  bool strided = dir == H2D_STRIDED || dir == D2H_STRIDED || dir == D2D_STRIDED;
  /* strided: a (rows, 2*cols) host array viewed as [:, ::2] */
  int64_t cols = n < 512 ? n : 512, rows = n / cols;
  int64_t shape2[2] = {rows, cols}, wide[2] = {rows, 2 * cols};
  dv_array *host = NULL, *view = NULL, *dev = NULL, *dev2 = NULL;
  void *plain = NULL;
  char *m1 = NULL, *m2 = NULL;
  double *td = NULL, *tm = NULL;
  dv_status rc = DV_OK;
#define TRY(call)      \
  do {                 \
    rc = (call);       \
    if (rc) goto done; \
  } while (0)
#define TRY_ALLOC(p)                  \
  do {                                \
    if (!(p)) {                       \
      rc = DV_ERR_HOST_OUT_OF_MEMORY; \
      goto done;                      \
    }                                 \
  } while (0)
  if (strided) {
    if (pinned) {
      TRY(dv_pinned_array(ctx, 2, wide, f8, NULL, 'C', &host));
    } else {
      TRY_ALLOC(plain = malloc((size_t)(rows * 2 * cols * 8)));
      TRY(dv_host_array_wrap(ctx, plain, 2, wide, f8, NULL, &host));
    }
    dv_index idx[2] = {DV_ALL, DV_SLICE(DV_NONE, DV_NONE, 2)};
    TRY(dv_array_slice(host, 2, idx, &view));
    TRY(dv_device_array(ctx, 2, shape2, f8, NULL, 'C', NULL, &dev));
    if (dir == D2D_STRIDED) { /* the wide array on the device, its every other column */
      dv_array *wide_dev = NULL;
      TRY(dv_device_array(ctx, 2, wide, f8, NULL, 'C', NULL, &wide_dev));
      rc = dv_array_slice(wide_dev, 2, idx, &dev2);
      dv_array_release(wide_dev);
      if (rc) goto done;
    }
  } else {
    if (pinned) {
      TRY(dv_pinned_array(ctx, 1, &n, f8, NULL, 'C', &host));
    } else {
      TRY_ALLOC(plain = malloc(bytes));
      TRY(dv_host_array_wrap(ctx, plain, 1, &n, f8, NULL, &host));
    }
    view = dv_array_retain(host);
    TRY(dv_device_array(ctx, 1, &n, f8, NULL, 'C', NULL, &dev));
    if (dir == D2D) TRY(dv_device_array(ctx, 1, &n, f8, NULL, 'C', NULL, &dev2));
  }
  void *hp;
  TRY(dv_array_host_data(host, &hp));
  memset(hp, 1, (size_t)dv_array_nbytes(host));
  TRY(dv_array_memset(dev, 2, NULL));
  if (dev2) TRY(dv_array_memset(dev2, 3, NULL));
  size_t moved = (size_t)dv_array_nbytes(dev);
  TRY_ALLOC(m1 = malloc(moved));
  TRY_ALLOC(m2 = malloc(moved));
  TRY_ALLOC(td = malloc(sizeof(double) * (size_t)reps));
  TRY_ALLOC(tm = malloc(sizeof(double) * (size_t)reps));
  memset(m1, 1, moved), memset(m2, 2, moved);
  for (int i = -1; i < reps; i++) { /* i = -1: warm-up */
    double t0 = now_s();
    switch (dir) {
      case H2D:
      case H2D_STRIDED: TRY(dv_copy_to_device(dev, view, NULL)); break;
      case D2H:
      case D2H_STRIDED: TRY(dv_copy_to_host(dev, view, NULL, NULL)); break;
      case D2D: TRY(dv_array_copy(dev2, dev, NULL)); break;
      case D2D_STRIDED: TRY(dv_array_copy(dev, dev2, NULL)); break;
    }
    double t1 = now_s();
    memcpy(m2, m1, moved);
    double t2 = now_s();
    if (i >= 0) td[i] = t1 - t0, tm[i] = t2 - t1;
  }
  r->dir = dir;
  r->pinned = pinned;
  r->bytes = moved;
  r->t_dv = median(td, reps);
  r->t_memcpy = median(tm, reps);
#undef TRY
#undef TRY_ALLOC
done:
  free(td), free(tm), free(m1), free(m2);
  dv_array_release(view), dv_array_release(host), dv_array_release(dev), dv_array_release(dev2);
  free(plain);
  return rc;
}

/* The sweep as GB/s against bytes: one line per direction and host memory,
 * and memcpy of the same bytes (the median over the directions) dashed. */
static int plot_bench(outfile *out, bool svg, const char *backend, const char *device, int reps,
                      const result *res, int nplan, int ns) {
  char *script = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&script, &len);
  if (!f) {
    errorf("out of memory");
    return EXIT_FAILURE;
  }
  gp_terminal(f, svg, 960, 600);
  fputs("set title ", f);
  char title[600];
  snprintf(title, sizeof title, "devarray bench: backend %s, device %s; median of %d", backend,
           device, reps);
  gp_quoted(f, title);
  fputs(
      "\nset xlabel 'bytes per transfer'\nset ylabel 'GB/s'\n"
      "set logscale xy 2\nset format x '%.0b %BB'\nset format y '%g'\n"
      "set grid\nset key outside right top\nset pointsize 0.8\n",
      f);
  for (int p = 0; p < nplan; p++) {
    fprintf(f, "$d%d << EOD\n", p);
    for (int s = 0; s < ns; s++) {
      const result *r = &res[p * ns + s];
      double g = gbps(r->bytes, r->t_dv);
      if (g > 0 && isfinite(g)) fprintf(f, "%zu %.6g\n", r->bytes, g);
    }
    fputs("EOD\n", f);
  }
  fputs("$memcpy << EOD\n", f);
  double *g = malloc(sizeof(double) * (size_t)(nplan ? nplan : 1));
  for (int s = 0; g && s < ns; s++) {
    int k = 0;
    for (int p = 0; p < nplan; p++) {
      double v = gbps(res[p * ns + s].bytes, res[p * ns + s].t_memcpy);
      if (v > 0 && isfinite(v)) g[k++] = v;
    }
    if (k) fprintf(f, "%zu %.6g\n", res[s].bytes, median(g, k));
  }
  free(g);
  fputs("EOD\nplot ", f);
  for (int p = 0; p < nplan; p++) {
    const result *r = &res[p * ns];
    fprintf(f, "$d%d using 1:2 with linespoints lw 1.5 title '%s %s', ", p, dir_name[r->dir],
            r->pinned ? "pinned" : "pageable");
  }
  fputs("$memcpy using 1:2 with lines dt 2 lw 2 lc rgb 'black' title 'memcpy (same bytes)'\n", f);
  if (fclose(f) || !script) {
    free(script);
    errorf("out of memory");
    return EXIT_FAILURE;
  }
  int rc = run_gnuplot(script, len, out);
  free(script);
  return rc;
}

/* The plot's format from its name: .png or .svg.  -1 for anything else. */
static int plot_format(const char *path) {
  const char *dot = strrchr(path, '.');
  if (dot && !strcasecmp(dot, ".svg")) return 1;
  if (dot && !strcasecmp(dot, ".png")) return 0;
  return -1;
}

static const char bench_help[] =
    "Usage: devarray bench [OPTIONS]\n"
    "\n"
    "Time synchronous transfers -- host to device, device to host and device to\n"
    "device; pageable and pinned host memory; contiguous and every other column of\n"
    "a 2-D float64 array -- at sizes from --min to --max growing by 4x, against\n"
    "memcpy of the same bytes.  Each figure is the median of --reps repetitions\n"
    "after one warm-up; ratio = memcpy time / devarray time.\n"
    "\n"
    "Options:\n"
    "      --backend NAME  auto, host, opencl, cuda or hip (default: the backend option,\n"
    "                      DV_BACKEND, which defaults to auto)\n"
    "      --quick         a short sweep: up to 16M, 5 repetitions (an explicit\n"
    "                      --max or --reps wins)\n"
    "      --reps N        repetitions per measurement, 1 to 1000000 (default 11)\n"
    "      --min BYTES     smallest transfer, at least 8 (default 4K)\n"
    "      --max BYTES     largest transfer, at most 64G (default 256M)\n"
    "      --json          print the results as one JSON object instead of a table\n"
    "      --plot FILE     also draw GB/s against bytes to FILE, a .png or .svg\n"
    "                      (needs gnuplot)\n"
    "  -h, --help          print this help and exit\n"
    "\n"
    "BYTES is a whole number with an optional K, M, G or T suffix (powers of 1024).\n"
    "Progress goes to stderr; the table or JSON to stdout.\n";

static int cmd_bench(int argc, char **argv) {
  enum { OPT_JSON = 256, OPT_QUICK, OPT_BACKEND, OPT_REPS, OPT_MIN, OPT_MAX, OPT_PLOT };
  static const struct option opts[] = {{"json", no_argument, NULL, OPT_JSON},
                                       {"quick", no_argument, NULL, OPT_QUICK},
                                       {"backend", required_argument, NULL, OPT_BACKEND},
                                       {"reps", required_argument, NULL, OPT_REPS},
                                       {"min", required_argument, NULL, OPT_MIN},
                                       {"max", required_argument, NULL, OPT_MAX},
                                       {"plot", required_argument, NULL, OPT_PLOT},
                                       {"help", no_argument, NULL, 'h'},
                                       {NULL, 0, NULL, 0}};
  bool json = false, quick = false;
  long long reps = 0;
  const char *backend = NULL, *plot = NULL;
  uint64_t min = 4096, max = 0;
  int c, bad = 0;
  while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    switch (c) {
      case 'h': fputs(bench_help, stdout); return 0;
      case OPT_JSON: json = true; break;
      case OPT_QUICK: quick = true; break;
      case OPT_BACKEND: backend = optarg; break;
      case OPT_REPS: bad = parse_count("--reps", optarg, 1, 1000000, &reps); break;
      case OPT_MIN: bad = parse_size("--min", optarg, 8, (uint64_t)64 << 30, &min); break;
      case OPT_MAX: bad = parse_size("--max", optarg, 8, (uint64_t)64 << 30, &max); break;
      case OPT_PLOT: plot = optarg; break;
      default: return try_help(); /* getopt said what was wrong */
    }
    if (bad) return bad;
  }
  if (optind < argc) return usage_error("unexpected argument '%s'", argv[optind]);
  if (!max) max = quick ? (uint64_t)16 << 20 : (uint64_t)256 << 20;
  if (!reps) reps = quick ? 5 : 11;
  if (min > max) {
    char a[32], b[32];
    size_text(a, sizeof a, min), size_text(b, sizeof b, max);
    return usage_error("--min (%s) is larger than --max (%s)", a, b);
  }
  int svg = plot ? plot_format(plot) : 0;
  if (svg < 0) return usage_error("--plot: '%s' is neither a .png nor a .svg name", plot);
  dv_config *cfg = NULL;
  dv_context *ctx = NULL;
  if (dv_config_create(&cfg)) {
    errorf("%s", dv_last_error());
    return EXIT_FAILURE;
  }
  if (backend && dv_config_set(cfg, "backend", backend)) {
    errorf("--backend: %s", dv_last_error());
    dv_config_destroy(cfg);
    return try_help();
  }

  /* What can fail before the work does: gnuplot, the plot's file. */
  outfile plot_file = {0};
  if (plot && !on_path("gnuplot")) {
    errorf("--plot: gnuplot was not found on PATH; " GNUPLOT_HINT);
    dv_config_destroy(cfg);
    return EXIT_FAILURE;
  }
  if (plot && out_open(&plot_file, plot, "wb")) {
    dv_config_destroy(cfg);
    return EXIT_FAILURE;
  }

  /* the sweep needs room for two device arrays of the largest size */
  char mem[32];
  snprintf(mem, sizeof mem, "%llu", (unsigned long long)(4 * max + ((uint64_t)64 << 20)));
  dv_config_set(cfg, "host_memory", mem);
  dv_config_set(cfg, "host_guard", "off"); /* measure copies, not the guard checks */
  dv_status rc = dv_context_create(cfg, &ctx);
  dv_config_destroy(cfg);
  if (rc) {
    errorf("%s: %s", dv_status_name(rc), dv_last_error());
    return out_close(&plot_file, false), EXIT_FAILURE;
  }
  dv_device_info di;
  if (dv_context_device_info(ctx, &di)) snprintf(di.name, sizeof di.name, "?");
  size_t sizes[32];
  int ns = 0;
  for (uint64_t s = min; s <= max && ns < 32; s *= 4) sizes[ns++] = (size_t)s;
  struct {
    direction d;
    int pinned;
  } plan[] = {{H2D, 0}, {H2D, 1},         {D2H, 0},         {D2H, 1},
              {D2D, 0}, {H2D_STRIDED, 0}, {D2H_STRIDED, 0}, {D2D_STRIDED, 0}};
  int nplan = (int)(sizeof plan / sizeof plan[0]), total = nplan * ns, done = 0;
  result *res = calloc((size_t)total, sizeof *res);
  if (!res) {
    errorf("out of memory");
    dv_context_destroy(ctx);
    return out_close(&plot_file, false), EXIT_FAILURE;
  }
  for (int p = 0; p < nplan; p++)
    for (int s = 0; s < ns; s++) {
      char what[64];
      snprintf(what, sizeof what, "%s%s %zu B", dir_name[plan[p].d],
               plan[p].pinned ? " pinned" : "", sizes[s]);
      progress(done, total, what);
      rc = measure(ctx, plan[p].d, plan[p].pinned, sizes[s], (int)reps, &res[done]);
      if (rc) {
        if (isatty(2)) fputc('\n', stderr);
        errorf("%s: %s: %s", what, dv_status_name(rc),
               *dv_last_error() ? dv_last_error() : dv_status_str(rc));
        free(res);
        dv_context_destroy(ctx);
        return out_close(&plot_file, false), EXIT_FAILURE;
      }
      done++;
    }
  progress(done, total, "done");
  const char *be = dv_context_backend(ctx);
  if (json) {
    printf("{\"backend\":");
    json_string(stdout, be);
    printf(",\"device\":");
    json_string(stdout, di.name);
    printf(",\"reps\":%lld,\"statistic\":\"median\",\"results\":[", reps);
    for (int i = 0; i < total; i++) {
      const result *r = &res[i];
      printf(
          "%s{\"direction\":\"%s\",\"host\":\"%s\",\"bytes\":%zu,\"devarray_s\":%.9f,\"memcpy_s\":%"
          ".9f,",
          i ? "," : "", dir_name[r->dir], r->pinned ? "pinned" : "pageable", r->bytes, r->t_dv,
          r->t_memcpy);
      json_fixed3(stdout, "devarray_GBps", gbps(r->bytes, r->t_dv));
      putchar(',');
      json_fixed3(stdout, "memcpy_GBps", gbps(r->bytes, r->t_memcpy));
      putchar(',');
      json_fixed3(stdout, "ratio", r->t_memcpy / r->t_dv);
      putchar('}');
    }
    printf("]}\n");
  } else {
    printf(
        "backend %s, device %s; median of %lld; ratio = memcpy time / devarray time (1.0 = as fast "
        "as memcpy)\n\n",
        be, di.name, reps);
    printf("%-12s %-9s %12s %12s %12s %8s\n", "direction", "host", "bytes", "devarray GB/s",
           "memcpy GB/s", "ratio");
    for (int i = 0; i < total; i++)
      printf("%-12s %-9s %12zu %12.2f %12.2f %8.3f\n", dir_name[res[i].dir],
             res[i].pinned ? "pinned" : "pageable", res[i].bytes, gbps(res[i].bytes, res[i].t_dv),
             gbps(res[i].bytes, res[i].t_memcpy), res[i].t_memcpy / res[i].t_dv);
  }
  int status = 0;
  if (plot) {
    /* The table is out first: a failing plot does not lose the measurements. */
    fflush(stdout);
    status = plot_bench(&plot_file, svg, be, di.name, (int)reps, res, nplan, ns);
    status = out_close(&plot_file, status == 0);
    if (!status) fprintf(stderr, "devarray: bench: plot: %s\n", plot);
  }
  free(res);
  dv_context_destroy(ctx);
  return status;
}

/* ---- report ------------------------------------------------------------------- */

/* RMM's random_allocations rule: 73% allocate while under n live, else free
 * a random live one; sizes uniform in [1, max_mib] MiB (here in bytes, so
 * small blocks appear too when max_mib is small). */
static unsigned long long rng_state = 0x9E3779B97F4A7C15ull;
static unsigned long long rng(void) {
  rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
  return rng_state;
}

static void map_run(FILE *f, double x0, double x1, int seg, const char *state) {
  fprintf(f, "%g %g %d %d\n", (x0 + x1) / 2, (x1 - x0) / 2, seg,
          strcmp(state, "free") ? 0xd62728 : 0x2ca02c);
}

/* Draw the segment map from the pool's snapshot (dv_memory_snapshot_json)
 * into out as a PNG.  The number of segments, or -1 (said why). */
static int draw_map(const char *snapshot, outfile *out) {
  jval root;
  const char *err;
  size_t at;
  if (!json_parse(snapshot, &root, &err, &at)) {
    errorf("the pool's snapshot is not valid JSON (%s at byte %zu)", err, at);
    jfree(&root);
    return -1;
  }
  const jval *segs = jget(&root, "segments", J_ARRAY);
  char *script = NULL;
  size_t len = 0;
  FILE *f = segs ? open_memstream(&script, &len) : NULL;
  if (!f) {
    if (segs)
      errorf("out of memory");
    else
      errorf("the pool's snapshot has no \"segments\" array");
    jfree(&root);
    return -1;
  }
  int nseg = (int)segs->n;
  double maxx = 0;
  bool ok = true;
  gp_terminal(f, false, 1000, 200 + 18 * nseg);
  fprintf(f,
          "set title 'devarray pool: segments (rows) and blocks; red allocated, green free'\n"
          "set xlabel 'offset in segment (MiB)'\nset ylabel 'segment'\nset yrange [-1:%d]\n"
          "set style fill solid 0.8 border -1\nunset key\n$map << EOD\n",
          nseg);
  for (int s = 0; ok && s < nseg; s++) {
    const jval *seg = &segs->item[s], *blocks = jget(seg, "blocks", J_ARRAY);
    uint64_t ssize;
    if (!blocks || !jget_uint(seg, "size", &ssize)) {
      ok = false;
      break;
    }
    /* merge runs of blocks in the same state for drawing */
    double run0 = -1, run1 = 0;
    const char *runstate = "";
    for (size_t b = 0; b < blocks->n; b++) {
      const jval *blk = &blocks->item[b], *st = jget(blk, "state", J_STRING);
      uint64_t off, sz;
      if (!st || !jget_uint(blk, "offset", &off) || !jget_uint(blk, "size", &sz)) {
        ok = false;
        break;
      }
      double x0 = (double)off / 1048576.0, x1 = (double)(off + sz) / 1048576.0;
      if (run0 >= 0 && !strcmp(st->string, runstate) && x0 <= run1 + 1e-9) {
        run1 = x1;
      } else {
        if (run0 >= 0) map_run(f, run0, run1, s, runstate);
        run0 = x0, run1 = x1, runstate = st->string;
      }
    }
    if (ok && run0 >= 0) map_run(f, run0, run1, s, runstate);
    if ((double)ssize / 1048576.0 > maxx) maxx = (double)ssize / 1048576.0;
  }
  /* An empty pool still gets a (blank) map: gnuplot needs one point to plot. */
  fprintf(f, "EOD\nset xrange [0:%g]\nplot %s\n", maxx > 0 ? maxx : 1,
          nseg ? "$map using 1:3:2:(0.4):4 with boxxyerror lc rgb variable" : "NaN notitle");
  bool closed = fclose(f) == 0 && script;
  jfree(&root);
  if (!ok)
    errorf("the pool's snapshot lacks a segment's size or a block's offset, size or state");
  else if (!closed)
    errorf("out of memory");
  int rc = ok && closed ? run_gnuplot(script, len, out) : EXIT_FAILURE;
  free(script);
  return rc ? -1 : nseg;
}

static const char report_help[] =
    "Usage: devarray report [OPTIONS]\n"
    "\n"
    "Run a random workload on the pool memory manager (RMM's random_allocations:\n"
    "73% of steps allocate while fewer than 120 arrays are live, the others free a\n"
    "random live one; sizes uniform in 1..--max bytes), then print the pool's\n"
    "statistics and draw its segments and blocks.\n"
    "\n"
    "Options:\n"
    "      --backend NAME  auto, host, opencl, cuda or hip (default: the backend option)\n"
    "      --steps N       workload steps, 0 to 100000000 (default 1500)\n"
    "      --max BYTES     largest allocation, 1 to 64G (default 3M)\n"
    "      --png FILE      the segment map as a PNG (default devarray-segments.png;\n"
    "                      needs gnuplot: without it the default map is skipped\n"
    "                      with a note, a map asked for by name is an error)\n"
    "      --json FILE     the pool's snapshot (segments, blocks, statistics) as JSON\n"
    "      --csv FILE      append every allocation and free in RMM's CSV format\n"
    "  -h, --help          print this help and exit\n"
    "\n"
    "BYTES is a whole number with an optional K, M, G or T suffix (powers of 1024).\n";

static int cmd_report(int argc, char **argv) {
  enum { OPT_BACKEND = 256, OPT_PNG, OPT_JSON, OPT_CSV, OPT_STEPS, OPT_MAX };
  static const struct option opts[] = {{"backend", required_argument, NULL, OPT_BACKEND},
                                       {"png", required_argument, NULL, OPT_PNG},
                                       {"json", required_argument, NULL, OPT_JSON},
                                       {"csv", required_argument, NULL, OPT_CSV},
                                       {"steps", required_argument, NULL, OPT_STEPS},
                                       {"max", required_argument, NULL, OPT_MAX},
                                       {"help", no_argument, NULL, 'h'},
                                       {NULL, 0, NULL, 0}};
  const char *backend = NULL, *png = NULL, *json = NULL, *csv = NULL;
  long long steps = 1500;
  int live_max = 120;
  uint64_t max_bytes = (uint64_t)3 << 20;
  int c, bad = 0;
  while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    switch (c) {
      case 'h': fputs(report_help, stdout); return 0;
      case OPT_BACKEND: backend = optarg; break;
      case OPT_PNG: png = optarg; break;
      case OPT_JSON: json = optarg; break;
      case OPT_CSV: csv = optarg; break;
      case OPT_STEPS: bad = parse_count("--steps", optarg, 0, 100000000, &steps); break;
      case OPT_MAX: bad = parse_size("--max", optarg, 1, (uint64_t)64 << 30, &max_bytes); break;
      default: return try_help(); /* getopt said what was wrong */
    }
    if (bad) return bad;
  }
  if (optind < argc) return usage_error("unexpected argument '%s'", argv[optind]);
  dv_config *cfg = NULL;
  dv_context *ctx = NULL;
  if (dv_config_create(&cfg) || dv_config_set(cfg, "memory_manager", "pool")) {
    errorf("%s", dv_last_error());
    dv_config_destroy(cfg);
    return EXIT_FAILURE;
  }
  if (backend && dv_config_set(cfg, "backend", backend)) {
    errorf("--backend: %s", dv_last_error());
    dv_config_destroy(cfg);
    return try_help();
  }
  if (csv && dv_config_set(cfg, "pool_log", csv)) {
    errorf("--csv: %s", dv_last_error());
    dv_config_destroy(cfg);
    return try_help();
  }

  /* Every output is opened before the work starts.  The CSV log is the
   * library's (it appends, and only warns when it cannot open the file), so
   * the tool checks that it can append to it. */
  bool draw = true;
  if (!on_path("gnuplot")) {
    if (png) {
      errorf("--png: gnuplot was not found on PATH; " GNUPLOT_HINT);
      dv_config_destroy(cfg);
      return EXIT_FAILURE;
    }
    draw = false;
  }
  outfile png_file = {0}, json_file = {0}, csv_file = {0};
  int status = 0;
  if (draw) status = out_open(&png_file, png ? png : "devarray-segments.png", "wb");
  if (!status && json) status = out_open(&json_file, json, "w");
  if (!status && csv) status = out_open(&csv_file, csv, "a");
  if (!status && csv) status = out_close(&csv_file, true);
  if (status) {
    out_close(&png_file, false), out_close(&json_file, false);
    dv_config_destroy(cfg);
    return EXIT_FAILURE;
  }

  dv_status rc = dv_context_create(cfg, &ctx);
  dv_config_destroy(cfg);
  dv_array **live = rc ? NULL : calloc((size_t)live_max, sizeof *live);
  if (rc || !live) {
    if (rc)
      errorf("%s: %s", dv_status_name(rc), dv_last_error());
    else
      errorf("out of memory");
    dv_context_destroy(ctx);
    out_close(&png_file, false), out_close(&json_file, false);
    if (csv_file.created) remove(csv);
    return EXIT_FAILURE;
  }
  /* a workload that leaves allocated and cached blocks behind */
  int nlive = 0;
  for (long long i = 0; i < steps; i++) {
    if (nlive < live_max && (rng() % 100 < 73 || nlive == 0)) {
      int64_t n = (int64_t)(1 + rng() % max_bytes);
      if (dv_device_array(ctx, 1, &n, dv_dtype_get(DV_UINT8), NULL, 'C', NULL, &live[nlive]) ==
          DV_OK)
        nlive++;
    } else if (nlive) {
      int k = (int)(rng() % (unsigned)nlive);
      dv_array_release(live[k]);
      live[k] = live[--nlive];
    }
  }
  dv_context_flush_deallocs(ctx);
  dv_mm_stats ms;
  memset(&ms, 0, sizeof ms);
  dv_memory_stats(ctx, &ms);
  double frag = ms.free_cached ? 1.0 - (double)ms.largest_free / (double)ms.free_cached : 0.0;
  printf("pool on backend %s after %lld random steps (%d arrays live)\n\n", dv_context_backend(ctx),
         steps, nlive);
  printf("%-12s %14s %14s %14s\n", "bytes", "current", "peak", "total");
  printf("%-12s %14llu %14llu %14llu\n", "allocated", (unsigned long long)ms.allocated.current,
         (unsigned long long)ms.allocated.peak, (unsigned long long)ms.allocated.total);
  printf("%-12s %14llu %14llu %14llu\n", "active", (unsigned long long)ms.active.current,
         (unsigned long long)ms.active.peak, (unsigned long long)ms.active.total);
  printf("%-12s %14llu %14llu %14llu\n", "reserved", (unsigned long long)ms.reserved.current,
         (unsigned long long)ms.reserved.peak, (unsigned long long)ms.reserved.total);
  printf(
      "\nhits %llu, misses %llu, splits %llu, merges %llu, releases %llu; %llu segments; cached "
      "free %llu "
      "bytes, largest free block %llu, fragmentation %.3f\n",
      (unsigned long long)ms.hits, (unsigned long long)ms.misses, (unsigned long long)ms.splits,
      (unsigned long long)ms.merges, (unsigned long long)ms.releases,
      (unsigned long long)ms.segments, (unsigned long long)ms.free_cached,
      (unsigned long long)ms.largest_free, frag);
  fflush(stdout);

  /* The snapshot: asked for its length, then written (a bigger buffer if the pool grew in between).
   */
  char *snap = NULL;
  size_t need = 0;
  rc = dv_memory_snapshot_json(ctx, NULL, 0, &need);
  for (int tries = 0; !rc && tries < 3; tries++) {
    free(snap);
    snap = malloc(need + 1);
    if (!snap) {
      rc = DV_ERR_HOST_OUT_OF_MEMORY;
      break;
    }
    rc = dv_memory_snapshot_json(ctx, snap, need + 1, &need);
    if (rc != DV_ERR_INVALID_ARGUMENT) break;
  }
  if (rc) {
    errorf("snapshot: %s: %s", dv_status_name(rc), dv_last_error());
    status = EXIT_FAILURE;
  }
  if (!status && json_file.f) {
    fputs(snap, json_file.f), fputc('\n', json_file.f);
    status = out_close(&json_file, true);
    if (!status) printf("snapshot: %s\n", json);
  }
  if (!status && draw) {
    int segs = draw_map(snap, &png_file);
    status = out_close(&png_file, segs >= 0);
    if (!status) printf("segment map: %s (%d segments)\n", png_file.path, segs);
  } else if (!status) {
    printf(
        "segment map: not drawn (gnuplot with the pngcairo terminal is needed: Debian's "
        "gnuplot-nox)\n");
  }
  out_close(&png_file, !status), out_close(&json_file, !status);
  free(snap);
  for (int i = 0; i < nlive; i++) dv_array_release(live[i]);
  free(live);
  dv_context_destroy(ctx);
  /* The library has written and closed the log by now. */
  if (!status && csv) printf("allocation log (RMM format): %s\n", csv);
  return status;
}

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
