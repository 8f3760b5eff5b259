/* The other process of the IPC tests (tests/array/test_ipc.c starts it with
 * fork + exec).  Modes, each printing one line per step on stdout:
 *   open HEX N    open the handle as int32[N], check a[i] == 3i+1, write
 *                 a[i] = -i, close: "ok"; where the driver cannot open
 *                 another process's memory (the CUDA and HIP test doubles:
 *                 NOT_SUPPORTED) "refused STATUS: message", exit 0
 *   hold HEX N    open, print "opened", wait for a line on stdin (the
 *                 exporter frees meanwhile), read again (no crash), close: "ok"
 *   stale HEX N   opening must fail with DV_ERR_INVALID_ARGUMENT: "refused"
 *   export N      export int32[N] = 3i+1 from a host_ipc context, print the
 *                 handle in hex, then exit at the next line on stdin
 * The backend is IPC_BACKEND's (default host), the memory manager
 * IPC_MEMORY_MANAGER's.  Exit status 0 on success, 1 otherwise (with the
 * reason on stderr). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "devarray.h"

static int fail(const char *what, dv_status rc) {
  fprintf(stderr, "ipc_helper: %s: %s: %s\n", what, dv_status_name(rc), dv_last_error());
  return 1;
}

static int context(dv_context **ctx, int ipc) {
  dv_config *cfg = NULL;
  dv_status rc = dv_config_create(&cfg);
  const char *be = getenv("IPC_BACKEND");
  if (!be) be = "host";
  if (!rc) rc = dv_config_set(cfg, "backend", be);
  if (!rc && ipc && strcmp(be, "host") == 0) rc = dv_config_set(cfg, "host_ipc", "on");
  const char *mm = getenv("IPC_MEMORY_MANAGER");
  if (!rc && mm) rc = dv_config_set(cfg, "memory_manager", mm);
  if (!rc) rc = dv_context_create(cfg, ctx);
  dv_config_destroy(cfg);
  return rc ? fail("context", rc) : 0;
}

static int decode(const char *hex, dv_ipc_handle *h) {
  if (strlen(hex) != 2 * DV_IPC_HANDLE_SIZE) return 1;
  for (int i = 0; i < DV_IPC_HANDLE_SIZE; i++) {
    unsigned v;
    if (sscanf(hex + 2 * i, "%2x", &v) != 1) return 1;
    h->bytes[i] = (unsigned char)v;
  }
  return 0;
}

/* Read the array into host memory and compare with 3i+1 (want != 0) or -i. */
static int check(dv_array *a, int64_t n, int plus) {
  dv_array *h = NULL;
  dv_status rc = dv_copy_to_host(a, NULL, NULL, &h);
  if (rc) return fail("copy_to_host", rc);
  int32_t *p = NULL;
  dv_array_host_data(h, (void **)&p);
  int bad = 0;
  for (int64_t i = 0; i < n; i++)
    if (p[i] != (plus ? (int32_t)(3 * i + 1) : (int32_t)-i)) bad = 1;
  dv_array_release(h);
  if (bad) fprintf(stderr, "ipc_helper: unexpected contents\n");
  return bad;
}

int main(int argc, char **argv) {
  if (argc < 3) return 2;
  const char *mode = argv[1];
  dv_context *ctx = NULL;
  if (strcmp(mode, "export") == 0) {
    int64_t n = atoll(argv[2]);
    if (context(&ctx, 1)) return 1;
    dv_array *h = NULL, *d = NULL;
    dv_status rc = dv_host_array(ctx, 1, &n, dv_dtype_get(DV_INT32), NULL, 'C', &h);
    if (rc) return fail("host_array", rc);
    int32_t *p = NULL;
    dv_array_host_data(h, (void **)&p);
    for (int64_t i = 0; i < n; i++) p[i] = (int32_t)(3 * i + 1);
    rc = dv_to_device(ctx, h, NULL, 1, NULL, &d);
    if (rc) return fail("to_device", rc);
    dv_ipc_handle hd;
    rc = dv_ipc_export(d, &hd);
    if (rc) return fail("export", rc);
    for (int i = 0; i < DV_IPC_HANDLE_SIZE; i++) printf("%02x", hd.bytes[i]);
    printf("\n");
    fflush(stdout);
    char line[64];
    if (!fgets(line, sizeof line, stdin)) { /* the parent went away */ }
    dv_array_release(d), dv_array_release(h);
    rc = dv_context_destroy(ctx);
    return rc ? fail("destroy", rc) : 0;
  }
  if (argc < 4) return 2;
  dv_ipc_handle hd;
  if (decode(argv[2], &hd)) return fail("decode", DV_ERR_INVALID_ARGUMENT);
  int64_t n = atoll(argv[3]);
  if (context(&ctx, 0)) return 1;
  dv_array *a = NULL;
  dv_status rc = dv_ipc_open(ctx, &hd, 1, &n, dv_dtype_get(DV_INT32), NULL, &a);
  int bad = 0;
  if (strcmp(mode, "stale") == 0) {
    if (rc != DV_ERR_INVALID_ARGUMENT || a) {
      fprintf(stderr, "ipc_helper: a stale handle opened: %s\n", dv_status_name(rc));
      bad = 1;
    } else {
      printf("refused: %s\n", dv_last_error());
    }
    dv_array_release(a);
  } else if (rc == DV_ERR_NOT_SUPPORTED && strcmp(mode, "open") == 0) {
    printf("refused %s: %s\n", dv_status_name(rc), dv_last_error());
  } else {
    if (rc) return fail("open", rc);
    if (strcmp(mode, "hold") == 0) {
      printf("opened\n");
      fflush(stdout);
      char line[64];
      if (!fgets(line, sizeof line, stdin)) bad = 1;
      dv_array *h = NULL; /* the exporter has freed: the mapping still reads */
      rc = dv_copy_to_host(a, NULL, NULL, &h);
      if (rc) bad = fail("read after the exporter freed", rc);
      dv_array_release(h);
    } else {
      bad = check(a, n, 1);
      dv_array *h = NULL, *w = NULL;
      if (!bad) rc = dv_host_array(ctx, 1, &n, dv_dtype_get(DV_INT32), NULL, 'C', &h);
      if (!bad && !rc) {
        int32_t *p = NULL;
        dv_array_host_data(h, (void **)&p);
        for (int64_t i = 0; i < n; i++) p[i] = (int32_t)-i;
        rc = dv_copy_to_device(a, h, NULL);
        if (rc) bad = fail("write", rc);
      }
      dv_array_release(h), dv_array_release(w);
      if (!bad) bad = check(a, n, 0);
    }
    rc = dv_ipc_close(a);
    if (rc) bad = fail("close", rc);
    if (!bad) printf("ok\n");
  }
  rc = dv_context_destroy(ctx);
  if (rc) bad = fail("destroy", rc);
  return bad;
}
