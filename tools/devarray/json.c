/*
 * The tool's JSON reader (the pool snapshot of `devarray report`).
 */
#define _DEFAULT_SOURCE
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* ---- a JSON reader (the pool snapshot) ---------------------------------------------- */

typedef struct jreader {
  const char *text, *p;
  int depth;
  const char *err;
} jreader;

#define JSON_MAX_DEPTH 64

void jfree(jval *v) {
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
bool json_parse(const char *text, jval *out, const char **err, size_t *at) {
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
const jval *jget(const jval *obj, const char *key, jtype type) {
  if (!obj || obj->type != J_OBJECT) return NULL;
  for (size_t i = 0; i < obj->n; i++)
    if (!strcmp(obj->key[i], key)) return obj->item[i].type == type ? &obj->item[i] : NULL;
  return NULL;
}

/* obj[key] as a byte count, or false. */
bool jget_uint(const jval *obj, const char *key, uint64_t *out) {
  const jval *v = jget(obj, key, J_NUMBER);
  if (!v || !v->is_uint) return false;
  *out = v->uint;
  return true;
}
