/* The other process of cuda.rules' IPC test (tests/backends/cuda/test_cuda_rules.c starts
 * it with fork + exec; issue 36): on the CUDA backend,
 *   open HEX N   open the handle as int32[N], check a[i] == 3i+1, write
 *                a[i] = -i, close; prints "ok", or "refused STATUS: message"
 *                when the driver refuses to open it (the CUDA test double
 *                cannot share memory between processes: NOT_SUPPORTED).
 * Exit status 0 for "ok" or a refusal, 1 otherwise (the reason on stderr). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "devarray.h"

static int fail(const char *what, dv_status rc) {
  fprintf(stderr, "cuda_ipc_helper: %s: %s: %s\n", what, dv_status_name(rc), dv_last_error());
  return 1;
}

int main(int argc, char **argv) {
  if (argc != 4 || strcmp(argv[1], "open") || strlen(argv[2]) != 2 * DV_IPC_HANDLE_SIZE) return 2;
  dv_ipc_handle hd;
  for (int i = 0; i < DV_IPC_HANDLE_SIZE; i++) {
    unsigned v;
    if (sscanf(argv[2] + 2 * i, "%2x", &v) != 1) return 2;
    hd.bytes[i] = (unsigned char)v;
  }
  int64_t n = atoll(argv[3]);
  dv_config *cfg = NULL;
  dv_context *ctx = NULL;
  dv_status rc = dv_config_create(&cfg);
  if (!rc) rc = dv_config_set(cfg, "backend", "cuda");
  if (!rc) rc = dv_context_create(cfg, &ctx);
  dv_config_destroy(cfg);
  if (rc) return fail("context", rc);
  dv_array *a = NULL;
  rc = dv_ipc_open(ctx, &hd, 1, &n, dv_dtype_get(DV_INT32), NULL, &a);
  int bad = 0;
  if (rc) {
    printf("refused %s: %s\n", dv_status_name(rc), dv_last_error());
    if (a) bad = fail("a refused open left an array", rc);
  } else {
    dv_array *h = NULL;
    rc = dv_copy_to_host(a, NULL, NULL, &h);
    if (rc) return fail("copy_to_host", rc);
    int32_t *p = NULL;
    dv_array_host_data(h, (void **)&p);
    for (int64_t i = 0; i < n; i++) {
      if (p[i] != (int32_t)(3 * i + 1)) bad = 1;
      p[i] = (int32_t)-i;
    }
    if (bad) fprintf(stderr, "cuda_ipc_helper: unexpected contents\n");
    rc = dv_copy_to_device(a, h, NULL);
    if (rc) bad = fail("copy_to_device", rc);
    dv_array_release(h);
    rc = dv_ipc_close(a);
    if (rc) bad = fail("ipc_close", rc);
    if (!bad) printf("ok\n");
  }
  fflush(stdout);
  rc = dv_context_destroy(ctx);
  if (rc) bad = fail("destroy", rc);
  return bad;
}
