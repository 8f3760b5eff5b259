/*
 * src/dialect/dialect.h -- the kernel dialect as every backend's compiler
 * receives it.  The build (CMakeLists.txt, cmake/embed.cmake with INLINE=ON)
 * replaces each #include "..." line below by that file's text and embeds the
 * result in the library as dv__kernel_header, which the kernel layer
 * (src/kernel/program.c), the OpenCL backend's copy kernels and hipRTC prepend
 * to every kernel source.  The host simulator's library side includes this file
 * as C for the runtime ABI and dv_kview.
 *
 * The reference for kernel authors is include/devarray/kernel.h (installed);
 * this file and its parts are not installed.  Both use the include guard
 * DEVARRAY_KERNEL_H, so a kernel source that includes <devarray/kernel.h>
 * gets nothing twice.
 *
 * Parts, in order:
 *   prologue.h      version, view rank, positive lengths, fence scopes
 *   cuda_hip.h      CUDA C++ (NVRTC) and HIP (hipRTC, hipcc)
 *   opencl.h        OpenCL C
 *   host.h          C11 for the host simulator (with runtime_abi.h and
 *                   access_check.h)
 *   portable.h      written once over the backend's primitives
 */
#ifndef DEVARRAY_KERNEL_H
#define DEVARRAY_KERNEL_H

#include "prologue.h"

/* ========================================================================== */
#if defined(__CUDACC_RTC__) || defined(__CUDACC__) || defined(__HIP__) || \
    defined(__HIPCC_RTC__) /* ---------------------------- CUDA C++ and HIP */
#include "cuda_hip.h"
/* ========================================================================== */
#elif defined(__OPENCL_C_VERSION__) || defined(__OPENCL_VERSION__) /* OpenCL C */
#include "opencl.h"
/* ========================================================================== */
#else /* ------------------------------------------------ host simulator, C11 */
#include "host.h"
#endif /* backends */
/* ========================================================================== */

#include "portable.h"

#endif /* DEVARRAY_KERNEL_H */
