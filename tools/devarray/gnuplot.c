/*
 * Running gnuplot for the plots of `devarray bench` and `devarray report`.
 */
#define _DEFAULT_SOURCE
#include <errno.h>
#include <limits.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"

extern char **environ;

/* ---- gnuplot ---------------------------------------------------------------------- */

/* Whether `name` is an executable file in a PATH directory (as posix_spawnp
 * will look for it). */
bool on_path(const char *name) {
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
void gp_quoted(FILE *f, const char *s) {
  fputc('\'', f);
  for (; *s; s++) {
    if (*s == '\'') fputc('\'', f);
    if (*s != '\n' && *s != '\r') fputc(*s, f);
  }
  fputc('\'', f);
}

/* The terminal for a .png (pngcairo where built in, else libgd's png) or .svg file. */
void gp_terminal(FILE *f, bool svg, int width, int height) {
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
int run_gnuplot(const char *script, size_t len, outfile *out) {
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
