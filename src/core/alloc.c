/*
 * The one internal host-allocation hook.  Every host allocation the library
 * makes goes through here so that tests can make the k-th one fail
 * (dv_fault_inject(DV_FAULT_HOST_ALLOC) or the fault_host_alloc option) and
 * prove that each error path returns the right status and leaks nothing.
 */
#include <stdlib.h>
#include <string.h>

#include "core.h"

/* 0: disarmed; k > 0: the k-th next allocation fails. */
static _Atomic uint64_t dv__host_fault;

void dv__fault_host_set(uint64_t k) { atomic_store(&dv__host_fault, k); }
int dv__fault_host_pending(void) { return atomic_load(&dv__host_fault) != 0; }

static bool dv__host_fault_fires(void) {
  uint64_t k = atomic_load(&dv__host_fault);
  while (k != 0) {
    if (atomic_compare_exchange_weak(&dv__host_fault, &k, k - 1)) return k == 1;
  }
  return false;
}

void *dv__malloc(size_t n) {
  if (DV_UNLIKELY(dv__host_fault_fires())) return NULL;
  return malloc(n ? n : 1);
}

void *dv__calloc(size_t n, size_t size) {
  if (DV_UNLIKELY(dv__host_fault_fires())) return NULL;
  return calloc(n ? n : 1, size ? size : 1);
}

void dv__free(void *p) { free(p); }

char *dv__strdup(const char *s) {
  size_t n = strlen(s) + 1;
  char *d = dv__malloc(n);
  if (d) memcpy(d, s, n);
  return d;
}
