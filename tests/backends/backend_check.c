/* Whether a context opens with the options in the environment (DV_BACKEND,
 * DV_MEMORY_MANAGER, ...): exit 0 if it does; otherwise print the reason and
 * exit 77, which the tests report as skipped.  Used by readme_test.sh. */
#include <devarray.h>
#include <stdio.h>
#include <stdlib.h>

int main(void) {
  const char *be = getenv("DV_BACKEND");
  char reason[512] = "";
  dv_status rc = be ? dv_backend_probe(be, reason, sizeof reason) : DV_OK;
  if (rc == DV_OK) {
    /* The probe can pass while opening fails (as in tests/common.c). */
    dv_context *ctx = NULL;
    rc = dv_context_create(NULL, &ctx);
    if (rc) snprintf(reason, sizeof reason, "%s", dv_last_error());
    if (dv_context_destroy(ctx) != DV_OK) {
      printf("dv_context_destroy: %s\n", dv_last_error());
      return 1;
    }
  }
  if (rc == DV_OK) return 0;
  printf("%s (%s)\n", reason, dv_status_name(rc));
  return 77;
}
