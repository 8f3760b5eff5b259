/* A program for `devarray check` (tests/tools/check_test.sh) that ignores
 * every status, as careless programs do:
 *
 *   check_target SEEDED.dvk KERNEL   launch KERNEL of bench/kernels/seeded.dvk once
 *   check_target - use-after-release a launch on an array already released
 *   check_target - double-release    an array released twice
 *   check_target - clean             a copy there and back, nothing wrong
 *   check_target - leak              a device array, a pinned array, a stream
 *                                    and an event never released, nor the context
 *
 * It exits 0 whatever happened: only the checker's channel can tell. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "devarray.h"

#define N 4096

static char *read_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
  if (s && fread(s, 1, (size_t)n, f) != (size_t)n) {
    free(s);
    s = NULL;
  }
  if (s) s[n] = 0;
  fclose(f);
  return s;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: check_target SEEDED.dvk KERNEL | - use-after-release|double-release|clean|leak\n");
    return 2;
  }
  static int in[N], out[N + 1];
  for (int i = 0; i < N; i++) in[i] = i % 97 + 1;
  dv_context *ctx = NULL;
  dv_context_create(NULL, &ctx);
  const dv_dtype *i32 = dv_dtype_get(DV_INT32);
  int64_t nin = N, nout = N + 1;
  dv_array *hi = NULL, *ho = NULL, *di = NULL, *dout = NULL;
  dv_host_array_wrap(ctx, in, 1, &nin, i32, NULL, &hi);
  dv_host_array_wrap(ctx, out, 1, &nout, i32, NULL, &ho);
  dv_to_device(ctx, hi, NULL, 1, NULL, &di);
  dv_to_device(ctx, ho, NULL, 1, NULL, &dout);
  const char *what = argv[2];
  if (strcmp(argv[1], "-")) {
    char *src = read_file(argv[1]);
    dv_program *p = NULL;
    dv_module *m = NULL;
    dv_kernel *k = NULL;
    dv_program_create(ctx, "seeded.dvk", src ? src : "", &p);
    dv_program_build(p, 0, &m);
    dv_module_kernel(m, what, &k);
    int reduce = strstr(what, "reduce") != NULL;
    dv_launch_config lc = {{reduce ? 16 : 64, 1, 1}, {reduce ? 256 : 64, 1, 1}, 0, NULL};
    dv_arg args[] = {DV_ARG_ARRAY(di), DV_ARG_ARRAY(dout), DV_ARG_I32(N)};
    dv_kernel_launch(k, &lc, 3, args);
    dv_context_synchronize(ctx);
    dv_module_release(m);
    dv_program_destroy(p);
    free(src);
  } else if (!strcmp(what, "use-after-release")) {
    dv_array *gone = di;
    dv_array_release(di);
    di = NULL;
    dv_copy_to_host(gone, hi, NULL, NULL); /* a use after the last release */
  } else if (!strcmp(what, "double-release")) {
    dv_array_release(di);
    dv_array_release(di); /* the second release */
    di = NULL;
  } else if (!strcmp(what, "leak")) {
    dv_array *lost = NULL, *pinned = NULL;
    dv_stream *s = NULL;
    dv_event *e = NULL;
    int64_t shape[2] = {10, 25};
    dv_device_array(ctx, 2, shape, dv_dtype_get(DV_FLOAT32), NULL, 'C', NULL, &lost); /* LEAK: array */
    dv_pinned_array(ctx, 1, shape, dv_dtype_get(DV_INT8), NULL, 'C', &pinned);          /* LEAK: pinned */
    dv_stream_create(ctx, 0, &s);                                                        /* LEAK: stream */
    dv_event_create(ctx, 0, &e);                                                         /* LEAK: event */
    return 0; /* nor the context, nor the arrays above */
  } else {
    dv_copy_to_host(dout, ho, NULL, NULL);
  }
  dv_array_release(hi), dv_array_release(ho), dv_array_release(di), dv_array_release(dout);
  dv_context_destroy(ctx);
  return 0;
}
