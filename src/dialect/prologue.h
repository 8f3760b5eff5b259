/*
 * src/dialect/prologue.h -- what every backend's section builds on:
 * the dialect's version, the view rank, Numba's positive-length rule and the
 * fence scopes.
 *
 * A part of the kernel dialect's implementation, included by dialect.h only
 * (which is embedded in the library as the text prepended to every kernel
 * source: CMakeLists.txt, cmake/embed.cmake).  The reference for kernel
 * authors is include/devarray/kernel.h.
 */

#define DV_KERNEL_DIALECT_VERSION 2
/** Dimensions a DV_VIEW parameter carries (the library refuses more). */
#define DV_KVIEW_MAXDIMS 8

/* Numba's rule: a shared or local array has a positive length, known when
 * the kernel is compiled; anything else is a compile error naming the array
 * (dv__length_of_<name>). */
#define DV__POSITIVE(n, N) typedef char dv__length_of_##n[(N) > 0 ? 1 : -1] __attribute__((unused))
#define DV__POSITIVE2(n, N0, N1) \
  typedef char dv__length_of_##n[(N0) > 0 && (N1) > 0 ? 1 : -1] __attribute__((unused))

/* Fence scopes for dv_barrier (ROC's barrier(scope)). */
#define DV_FENCE_LOCAL 1  /**< order shared (work-group local) memory */
#define DV_FENCE_GLOBAL 2 /**< order global memory */
