/*
 * src/context/deprecated.c -- the public API's deprecated names (issue 35):
 * each is its successor under the old name, kept declared and exported so
 * that no program, and no binding that looks functions up by name, breaks.
 * include/devarray.h documents each next to its successor.  New code calls
 * the successors; nothing in the library calls these.
 */
#include "devarray.h"

/* register/deregister became register/unregister (the internals' word). */
dv_status dv_array_deregister(dv_array *a) { return dv_array_unregister(a); }

/* The memory-information family is dv_memory_* (the context's manager). */
dv_status dv_context_memory_info(dv_context *ctx, size_t *free_bytes, size_t *total_bytes) {
  return dv_memory_info(ctx, free_bytes, total_bytes);
}

const char *dv_context_memory_manager(const dv_context *ctx) { return dv_memory_manager_name(ctx); }
