/*
 * The backend seam (src/backends/backend.h, backend_methods.def): every
 * table compiled in fills exactly the groups its capabilities declare
 * (dv__backend_check), and the check catches a table that does not: a
 * declared group with a method left NULL, an undeclared group with one
 * set, a base declared only in part.
 */
#include "common.h"
#include "backends/backend.h"

static void test_every_table_keeps_its_groups(void **state) {
  (void)state;
  assert_true(dv_backend_count() >= 4);
  for (size_t i = 0; i < dv_backend_count(); i++) {
    const dv_backend *be = dv__backend_find(dv_backend_name(i));
    assert_non_null(be);
    assert_ok(dv__backend_check(be));
    /* A table that can open a context has the whole base; OpenCL built
     * without its headers is a placeholder (ENTRY only). */
    assert_true(dv__be_has(be, DV_BCAP_BASE) || be->caps == DV_BCAP_ENTRY);
  }
  /* The groups each backend declares today. */
  assert_true(dv__be_has(dv__backend_find("host"), DV_BCAP_KERNELS | DV_BCAP_IPC | DV_BCAP_FAULTS | DV_BCAP_TRIM));
  assert_false(dv__be_has(dv__backend_find("host"), DV_BCAP_MANAGED));
  assert_true(dv__be_has(dv__backend_find("cuda"), DV_BCAP_MANAGED | DV_BCAP_PEER | DV_BCAP_ORDER_NATIVE));
  assert_false(dv__be_has(dv__backend_find("cuda"), DV_BCAP_BUFFER_CHECK));
  assert_int_equal(dv__backend_find("hip")->caps, dv__backend_find("cuda")->caps);
}

static dv_status no_trim(void *state) {
  (void)state;
  return DV_OK;
}

static void test_check_catches_a_planted_violation(void **state) {
  (void)state;
  const dv_backend *host = dv__backend_find("host");
  dv_backend t = *host;
  t.ipc_open = NULL; /* a declared group (IPC) missing a method */
  assert_status(dv__backend_check(&t), DV_ERR_MISUSE);
  assert_non_null(strstr(dv_last_error(), "ipc_open"));
  t = *host;
  t.caps &= ~(unsigned)DV_BCAP_TRIM; /* an undeclared group with its method set */
  assert_status(dv__backend_check(&t), DV_ERR_MISUSE);
  assert_non_null(strstr(dv_last_error(), "mem_trim"));
  t = *dv__backend_find("cuda");
  t.mem_trim = no_trim; /* the same, the other way round */
  assert_status(dv__backend_check(&t), DV_ERR_MISUSE);
  t = *host;
  t.caps &= ~(unsigned)DV_BCAP_EVENTS; /* part of the base */
  assert_status(dv__backend_check(&t), DV_ERR_MISUSE);
  t = *host;
  t.caps = DV_BCAP_ENTRY; /* a placeholder must have nothing but probe and open */
  assert_status(dv__backend_check(&t), DV_ERR_MISUSE);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_table_keeps_its_groups),
      cmocka_unit_test(test_check_catches_a_planted_violation),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
