/*
 * The host compiler's log in the program's words (toolchain/'s build.c
 * calls these on every build's log): the prelude's wrapper names and the
 * runtime table's calls as the program names them, the unit's temporary
 * file as "<devarray dialect>", and a symbol the loader finds defined
 * nowhere as the compile error every other backend's compiler gives.
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "toolchain_internal.h"

/* The compiler's log in the program's words, in place: a kernel's function
 * is dv__kb_NAME in the translation unit (the prelude's wrapper), named in
 * the program as NAME ("In function 'dv__kb_k'" becomes "In kernel 'k'");
 * the dialect's calls through the runtime table are named as the program
 * calls them (dv__rt->print is dv_printf, dv__rt->barrier dv_barrier); the
 * unit's temporary file, gone once the build returns, is "<devarray
 * dialect>" (only the dialect's own lines are reported under it: the
 * program's lines are under its name, by #line). */
/* A line of the compiler's own words, not its excerpt of the source
 * ("  12 | a[i] = b;", "     |   ^"): the excerpt is the text as written. */
static bool hk_diagnostic_line(const char *line) {
  while (*line == ' ' || (*line >= '0' && *line <= '9')) line++;
  return *line != '|';
}

/* Each from in log as to, in place (to is no longer than from: the text only
 * shrinks); only in the compiler's own lines when diag_only. */
static void hk_replace(char *log, const char *from, const char *to, bool diag_only) {
  size_t fl = strlen(from), tl = strlen(to);
  if (!fl || tl > fl) return;
  char *r = log, *w = log;
  while (*r) {
    char *end = strchr(r, '\n');
    end = end ? end + 1 : r + strlen(r);
    bool rewrite = !diag_only || hk_diagnostic_line(r);
    while (r < end) { /* one line, r..end */
      char *hit = rewrite ? strstr(r, from) : NULL;
      if (!hit || hit + fl > end) hit = end;
      memmove(w, r, (size_t)(hit - r));
      w += hit - r;
      r = hit;
      if (hit == end) break;
      memcpy(w, to, tl);
      w += tl;
      r += fl;
    }
  }
  *w = 0;
}

void hk_user_words(char *log, const char *unit_path) {
  static const char *const from[] = {"function \xe2\x80\x98" "dv__kb_", "function 'dv__kb_", "dv__kb_",
                                     "dv__rt->print", "dv__rt->"};
  static const char *const to[] = {"kernel \xe2\x80\x98", "kernel '", "", "dv_printf", "dv_"};
  for (size_t i = 0; i < sizeof from / sizeof *from; i++) hk_replace(log, from[i], to[i], i >= 3);
  hk_replace(log, unit_path, "<devarray dialect>", false);
}

/* The first lines of a compiler log, for the detail message. */
void hk_log_head(const char *log, char *buf, size_t cap) {
  size_t n = 0;
  int lines = 0;
  while (log[n] && n + 1 < cap && lines < 6) {
    if (log[n] == '\n') lines++;
    n++;
  }
  memcpy(buf, log, n);
  buf[n] = 0;
}

/* Where the compiler's log (the program's words: hk_user_words) shows the
 * call of sym, "name:line:col", from its implicit-declaration warning; ""
 * when it does not (a variable declared extern and defined nowhere). */
static void hk_symbol_place(const char *log, const char *sym, char *buf, size_t cap) {
  buf[0] = 0;
  static const char *const quotes[][2] = {{"function \xe2\x80\x98", "\xe2\x80\x99"}, {"function '", "'"}};
  for (size_t q = 0; q < 2 && log; q++) {
    char pat[200];
    snprintf(pat, sizeof pat, "%s%s%s", quotes[q][0], sym, quotes[q][1]);
    const char *hit = strstr(log, pat);
    if (!hit) continue;
    const char *line = hit;
    while (line > log && line[-1] != '\n') line--;
    const char *w = strstr(line, ": warning: ");
    if (!w || w > hit) w = strstr(line, ": error: ");
    if (!w || w > hit || (size_t)(w - line) >= cap) continue;
    memcpy(buf, line, (size_t)(w - line));
    buf[w - line] = 0;
    return;
  }
}

/* A module that compiled and linked but does not load for a symbol defined
 * nowhere (a C compiler accepts a call to an undeclared function only with a
 * warning, and a shared object may leave symbols to its loader) is what
 * every other backend's compiler refuses: a compile error naming the
 * symbol and, where the compiler's warning shows it, the call's line.  That
 * error heads the build log, ahead of the compiler's warnings (the first
 * cc_len bytes of *logtxt); the region-fission notes after them go, as for
 * any program that does not compile.  Any other load failure stands as it
 * is (DV_ERR_LIBRARY_LOAD). */
dv_status hk_undefined_symbol(const dv_build_req *req, char **logtxt, size_t cc_len) {
  const char *why = dv_last_error();
  const char *u = strstr(why, "undefined symbol: ");
  if (!u) return DV_ERR_LIBRARY_LOAD;
  u += strlen("undefined symbol: ");
  char sym[128];
  size_t n = strcspn(u, " \n(");
  if (n == 0 || n >= sizeof sym) return DV_ERR_LIBRARY_LOAD;
  memcpy(sym, u, n);
  sym[n] = 0;
  const char *name = req->name ? req->name : "kernel";
  char place[300];
  hk_symbol_place(*logtxt, sym, place, sizeof place);
  char msg[600];
  snprintf(msg, sizeof msg,
           "%s: error: undefined symbol '%s': the program calls a function (or names a variable) "
           "that neither it nor the kernel dialect defines\n",
           place[0] ? place : name, sym);
  size_t ll = *logtxt ? strlen(*logtxt) : 0, ml = strlen(msg);
  if (ll > cc_len) ll = cc_len;
  char *both = dv__malloc(ml + ll + 1);
  if (!both) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot assemble the compiler's log");
  memcpy(both, msg, ml);
  if (ll) memcpy(both + ml, *logtxt, ll);
  both[ml + ll] = 0;
  dv__free(*logtxt);
  *logtxt = both;
  msg[ml - 1] = 0;
  return dv__error(DV_ERR_COMPILE, "program %s failed to compile:\n%s", name, msg);
}

