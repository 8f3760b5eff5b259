/* Helpers shared by the kernel examples: checked calls, options, reading a
 * kernel source, building it.  Each example is otherwise self-contained. */
#ifndef KERNEL_EXAMPLE_H
#define KERNEL_EXAMPLE_H
#include <devarray.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TRY(call)                                                                    \
  do {                                                                               \
    dv_status s_ = (call);                                                           \
    if (s_) {                                                                        \
      fprintf(stderr, "%s: %s: %s\n", #call, dv_status_name(s_), dv_last_error());   \
      exit(1);                                                                       \
    }                                                                                \
  } while (0)

#ifndef EXAMPLES_DIR
#define EXAMPLES_DIR "."
#endif

/* --backend NAME (default: automatic), --n N, --source FILE. */
typedef struct ex_opts {
  const char *backend;
  long n;
  const char *source;
} ex_opts;

static inline void ex_parse(int argc, char **argv, ex_opts *o, const char *usage) {
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      printf("usage: %s [--backend host|opencl|cuda] [--n N] [--source FILE]\n%s\n", argv[0], usage);
      exit(0);
    } else if (!strcmp(argv[i], "--backend") && i + 1 < argc) {
      o->backend = argv[++i];
    } else if (!strcmp(argv[i], "--n") && i + 1 < argc) {
      char *end;
      o->n = strtol(argv[++i], &end, 10);
      if (*end || o->n <= 0) {
        fprintf(stderr, "%s: --n needs a positive integer\n", argv[0]);
        exit(2);
      }
    } else if (!strcmp(argv[i], "--source") && i + 1 < argc) {
      o->source = argv[++i];
    } else {
      fprintf(stderr, "%s: unknown argument %s (try --help)\n", argv[0], argv[i]);
      exit(2);
    }
  }
}

static inline dv_context *ex_context(const ex_opts *o) {
  dv_config *cfg;
  dv_context *ctx;
  TRY(dv_config_create(&cfg));
  if (o->backend) TRY(dv_config_set(cfg, "backend", o->backend));
  TRY(dv_context_create(cfg, &ctx));
  dv_config_destroy(cfg);
  return ctx;
}

static inline char *ex_read(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "cannot open kernel source %s\n", path);
    exit(1);
  }
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *s = malloc((size_t)n + 1);
  if (!s || fread(s, 1, (size_t)n, f) != (size_t)n) {
    fprintf(stderr, "cannot read %s\n", path);
    exit(1);
  }
  s[n] = 0;
  fclose(f);
  return s;
}

/* Read examples/<file> (or --source) into a new program. */
static inline dv_program *ex_program(dv_context *ctx, const ex_opts *o, const char *file) {
  char path[1024];
  if (o->source)
    snprintf(path, sizeof path, "%s", o->source);
  else
    snprintf(path, sizeof path, "%s/%s", EXAMPLES_DIR, file);
  char *src = ex_read(path);
  dv_program *p;
  TRY(dv_program_create(ctx, file, src, &p));
  free(src);
  return p;
}

static inline dv_module *ex_build(dv_program *p) {
  dv_module *m;
  dv_status rc = dv_program_build(p, 0, &m);
  if (rc) {
    fprintf(stderr, "build failed: %s: %s\n%s\n", dv_status_name(rc), dv_last_error(),
            dv_program_log(p));
    exit(1);
  }
  return m;
}
#endif
