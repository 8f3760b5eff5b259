/*
 * The kernel-signature scanner's state and the preprocessor it follows
 * (sigpp.c: aliases, #if conditions, comments and literals, directives,
 * function-like macros that declare kernels), shared by sigpp.c and the scan
 * of declarations (signature.c).  Private to src/kernel/.
 */
#ifndef DV_KERNEL_SIGSCAN_H
#define DV_KERNEL_SIGSCAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "signature.h"
#include "sigtypes.h"

/* ---- aliases: object-like #defines, typedefs, the program's defines --------------- */

typedef struct dv_kalias {
  char *name;
  char *text; /* NULL: defined, with no usable text (function-like, or #undef'd: see gone) */
  bool gone;  /* #undef */
  bool uncertain; /* set (or undefined) under a condition the reader cannot evaluate */
} dv_kalias;

/* A function-like macro whose body declares kernels:
 * `#define SHUFFLES(T, CT) DV_KERNEL(shuffles_##T, DV_ARRAY(CT, out), ...)`. */
#define DV__KMACRO_PARAMS 16
typedef struct dv_kmacro {
  char *name;
  int nparams;
  char *params[DV__KMACRO_PARAMS];
  char *body;
} dv_kmacro;

typedef struct dv_kscan {
  const char *s;
  size_t n, i;
  int line;
  /* #if nesting: per level the current branch (1 taken, 0 not, -1 unknown)
   * and whether an earlier branch was taken (same values). */
  signed char cur[64], seen[64];
  int depth, overflow;
  dv_kalias *al;
  size_t nal, capal;
  uint32_t *tab; /* open addressing over al: index + 1, 0 empty; tabcap a power of two */
  size_t tabcap;
  const char *backend;
  const char *predefined; /* names the backend's compiler defines here (space-separated) */
  dv_ksigs out;
  size_t capout;
  bool oom;
  uint32_t *ktab; /* open addressing over out.v: index + 1 */
  size_t ktabcap;
  dv_kmacro *km;
  size_t nkm, capkm;
  int expanding;  /* depth of macro expansion being scanned (at most 4) */
  int fixed_line; /* within an expansion: the invocation's line */
  dv_kaliases aliases; /* how the parameter reader (sigtypes.c) looks names up */
} dv_kscan;

/* ---- the preprocessor (sigpp.c) ------------------------------------------------------ */

/* Whether the text at the scan's position is compiled (1), not (0) or unknown (-1), as far
 * as the #if levels from `from` on say (dv__kpp_active: all of them). */
int dv__kpp_active(const dv_kscan *sc);
int dv__kpp_active_from(const dv_kscan *sc, int from);
/* The alias NAME (NULL: none); NAME means `text` from here on (has_text false: defined with
 * no usable text); the lookup the parameter reader calls through dv_kaliases. */
dv_kalias *dv__kpp_alias_find(dv_kscan *sc, const char *name, size_t len);
void dv__kpp_alias_set(dv_kscan *sc, const char *name, size_t len, const char *text, size_t tlen,
                       bool has_text);
const char *dv__kpp_alias_text(void *ctx, const char *name, size_t len, bool *uncertain);
/* The length of a backslash-newline at s[i] (LF or CRLF), 0 if none. */
size_t dv__kpp_continuation(const char *s, size_t i, size_t n);
/* The directive at the scan's position ('#' at the start of a line), followed. */
void dv__kpp_directive(dv_kscan *sc);
/* Skip a comment or a literal at the scan's position; returns whether it did. */
bool dv__kpp_skip_noncode(dv_kscan *sc);
void dv__kpp_macro_free(dv_kmacro *m);
/* A bigger copy of p (old bytes kept; p freed only on success); a copy of s[0..n); FNV-1a. */
void *dv__kpp_grow(void *p, size_t old_bytes, size_t new_bytes);
char *dv__kpp_strndup(const char *s, size_t n);
uint32_t dv__kpp_hash(const char *s, size_t n);

#endif
