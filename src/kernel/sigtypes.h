/*
 * The kernel-signature reader's two halves (src/kernel/): signature.c scans
 * a source; sigtypes.c reads a parameter list and its types, and compares
 * signatures.  The scan calls the parameter reader, never the reverse (the
 * reader looks aliases up through dv_kaliases).
 */
#ifndef DV_KERNEL_SIGTYPES_H
#define DV_KERNEL_SIGTYPES_H

#include <ctype.h>
#include <string.h>

#include "signature.h"

static inline bool dv__ident_start(char c) { return isalpha((unsigned char)c) || c == '_'; }
static inline bool dv__ident_char(char c) { return isalnum((unsigned char)c) || c == '_'; }
static inline bool dv__is_word(const char *s, size_t len, const char *word) {
  return strlen(word) == len && memcmp(s, word, len) == 0;
}

/* How the parameter reader resolves a name: its text (NULL when it has none
 * a type can come from) and whether it was defined under a condition the
 * scan cannot evaluate. */
typedef struct dv_kaliases {
  const char *(*find)(void *ctx, const char *name, size_t len, bool *uncertain);
  void *ctx;
} dv_kaliases;

/* Parse the parameter list [s, e) into out (params allocated); al NULL:
 * names are not resolved. */
dv_status dv__ksig_parse_params(const dv_kaliases *al, const char *s, const char *e, dv_ksig *out);
/* Same kinds and types (names may differ: a prototype and its definition). */
bool dv__ksig_params_equal(const dv_ksig *a, const dv_ksig *b);
/* Blanks trimmed off [*a, *b); the end of the top-level item at s (a ',' at
 * depth 0, or e). */
void dv__ktrim(const char **a, const char **b);
const char *dv__kitem_end(const char *s, const char *e);

#endif
