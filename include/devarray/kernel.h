/*
 * devarray/kernel.h -- the kernel dialect: one kernel source that compiles as
 * CUDA C++ (NVRTC), OpenCL C 1.2+ (clBuildProgram) and C11 (the host
 * simulator, with the system C compiler); also as HIP for AMD GPUs (hipcc,
 * hipRTC: the CUDA section with DV_BACKEND_HIP; tests/test_hip_compile.c).
 *
 * Kernel sources include nothing: devarray prepends this header (and a
 * generated prelude with the program's defines and constant arrays) to the
 * source it is given, then adds `#line 1 "<program name>"` so compiler
 * messages point into the user's own text.  Host programs never include it.
 *
 * A kernel looks like this (Numba's tiled matrix multiply, docs/kernels.md):
 *
 *     #define TPB 16
 *     DV_KERNEL(matmul, DV_ARRAY(const float, A), DV_ARRAY(const float, B),
 *               DV_ARRAY(float, C), int n) {
 *       DV_BIND(const float, A); DV_BIND(const float, B); DV_BIND(float, C);
 *       DV_SHARED2(float, sA, TPB, TPB);
 *       DV_SHARED2(float, sB, TPB, TPB);
 *       int tx = dv_thread_idx(0), ty = dv_thread_idx(1);
 *       int x = dv_block_idx(0) * TPB + tx, y = dv_block_idx(1) * TPB + ty;
 *       float acc = 0;
 *       for (int t = 0; t < (n + TPB - 1) / TPB; t++) {
 *         sA[ty][tx] = ...; sB[ty][tx] = ...;
 *         dv_syncthreads();
 *         for (int j = 0; j < TPB; j++) acc += sA[ty][j] * sB[j][tx];
 *         dv_syncthreads();
 *       }
 *       if (y < n && x < n) C[y * n + x] = acc;
 *     }
 *
 * Rules that hold on every backend (the host simulator checks them):
 *  - Every kernel has at least one parameter.  Arrays are parameters
 *    DV_ARRAY(T, name) (or DV_VIEW(T, name) for shape and strides too) and
 *    must be bound once at the top of the body with DV_BIND(T, name) before
 *    use: OpenCL buffers cannot carry a byte offset, so an array arrives as
 *    (base, byte offset) and DV_BIND makes `name` point at element 0.
 *  - Shared arrays (DV_SHARED*, DV_DYN_SHARED_*) are declared at the
 *    outermost scope of the kernel body (OpenCL's rule), never in helpers.
 *  - Barriers are reached by every thread of the block, the same number of
 *    times, in uniform control flow (CUDA's and OpenCL's rule).  A divergent
 *    barrier hangs or corrupts a GPU and crashes some OpenCL CPU runtimes;
 *    the host simulator reports it as DV_ERR_KERNEL_FAULT.
 *  - Wave operations (dv_wave_shuffle_*, dv_wave_any/all/ballot) are
 *    reached by every lane of the wave, like wave barriers; the host
 *    simulator reports one that is not as DV_ERR_KERNEL_FAULT.
 *  - Constant arrays are declared by the host program
 *    (dv_program_constant) and read by name inside kernels; in OpenCL they
 *    are reachable only in kernel bodies (pass them to helpers as
 *    `DV_CONSTANT_MEM const T *`).
 *
 * docs/kernels.md has the table: construct -> CUDA C -> OpenCL C -> host C,
 * and what each backend cannot do.
 */
#ifndef DEVARRAY_KERNEL_H
#define DEVARRAY_KERNEL_H

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

/* ========================================================================== */
#if defined(__CUDACC_RTC__) || defined(__CUDACC__) || defined(__HIP__) || \
    defined(__HIPCC_RTC__) /* ---------------------------- CUDA C++ and HIP */
/* HIP (hipcc, hipRTC: clang's HIP front end for AMD GPUs) is CUDA's C++
 * dialect with a few names changed: this section serves both, and
 * DV_BACKEND_HIP marks the places where HIP differs (waves of 64 lanes on
 * CDNA, 32 on RDNA in wave32 mode -- warpSize, fixed per target when the
 * code object is compiled; no _sync wave operations; 64-bit signed atomic
 * min/max through clang's __hip_atomic builtins). */
#if defined(__HIP__) || defined(__HIPCC_RTC__)
#define DV_BACKEND_HIP 1
#ifndef __HIPCC_RTC__ /* hipRTC has the runtime's device functions built in; hipcc needs them */
#include <hip/hip_runtime.h>
#endif
#else
#define DV_BACKEND_CUDA 1
#endif

typedef signed char dv_i8;
typedef unsigned char dv_u8;
typedef short dv_i16;
typedef unsigned short dv_u16;
typedef int dv_i32;
typedef unsigned int dv_u32;
typedef long long dv_i64;
typedef unsigned long long dv_u64;
typedef float dv_f32;
typedef double dv_f64;
/* Bits of a float or double and back (dv_f16's conversions use them). */
#define dv__f32_as_u32(f) __float_as_uint(f)
#define dv__u32_as_f32(u) __uint_as_float(u)
#define dv__f64_as_u64(d) ((dv_u64)__double_as_longlong(d))

#define DV_GLOBAL_MEM
#define DV_SHARED_MEM
#define DV_CONSTANT_MEM
#define DV_DEVICE __device__ inline
#define DV_RESTRICT __restrict__
#define DV__TYPEOF(x) decltype(x)

typedef struct dv_kview {
  dv_i64 ndim;
  dv_i64 shape[DV_KVIEW_MAXDIMS];
  dv_i64 strides[DV_KVIEW_MAXDIMS]; /* bytes */
} dv_kview;

#define DV_KERNEL(name, ...) extern "C" __global__ void name(__VA_ARGS__)
#define DV_ARRAY(T, a) T *a##__base, dv_i64 a##__off
#define DV_VIEW(T, a) T *a##__base, dv_i64 a##__off, dv_kview a##__view
#define DV_BIND(T, a) T *DV_RESTRICT a = (T *)((char *)(a##__base) + (a##__off))

#define dv__dim(v, d) ((d) == 0 ? (int)(v).x : (d) == 1 ? (int)(v).y : (int)(v).z)
#define dv_thread_idx(d) dv__dim(threadIdx, d)
#define dv_block_idx(d) dv__dim(blockIdx, d)
#define dv_block_dim(d) dv__dim(blockDim, d)
#define dv_grid_dim(d) dv__dim(gridDim, d)
#define dv_wave_size() ((int)warpSize)

#define DV_SHARED(T, n, N) DV__POSITIVE(n, N); __shared__ T n[N]
#define DV_SHARED2(T, n, N0, N1) DV__POSITIVE2(n, N0, N1); __shared__ T n[N0][N1]
#define DV__DYN_BASE() (dv__dyn_shared)
#define DV_DYN_SHARED_BEGIN() \
  extern __shared__ __align__(16) unsigned char dv__dyn_shared[]; \
  unsigned long long dv__dyn_cur = 0
#define DV_DYN_SHARED_TAKE(T, n, count)                                                    \
  dv__dyn_cur = (dv__dyn_cur + __alignof__(T) - 1) & ~(unsigned long long)(__alignof__(T) - 1); \
  T *n = (T *)(dv__dyn_shared + dv__dyn_cur);                                              \
  dv__dyn_cur += (unsigned long long)(count) * sizeof(T)

#define DV_LOCAL_ARRAY(T, n, N) DV__POSITIVE(n, N); T n[N]
#define DV_LOCAL_ARRAY2(T, n, N0, N1) DV__POSITIVE2(n, N0, N1); T n[N0][N1]

#define dv_syncthreads() __syncthreads()
#define dv_barrier(scope) __syncthreads()
#ifdef DV_BACKEND_HIP
/* A wave runs in lock step on AMD GPUs: the wave barrier orders memory
 * between its lanes (a wave-scope fence) and keeps the compiler from moving
 * accesses across it. */
#define dv_wavebarrier()                                          \
  (__builtin_amdgcn_fence(__ATOMIC_RELEASE, "wavefront"),         \
   __builtin_amdgcn_wave_barrier(), __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "wavefront"))
#else
#define dv_wavebarrier() __syncwarp()
#endif
#define dv_threadfence() __threadfence()
#define dv_threadfence_block() __threadfence_block()

/* Wave (warp) operations: the _sync intrinsics with every lane in the mask. */
#define dv_lane_id() \
  ((int)((threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)) % warpSize))
#ifdef DV_BACKEND_HIP
/* HIP's shuffles take every lane of the wave (width warpSize) and give the
 * caller's own value where the source lane lies outside the wave. */
#define DV__CUDA_SHFL(T, CT)                                                         \
  DV_DEVICE CT dv__shfl_idx_##T(CT v, int lane) { return __shfl(v, lane); }          \
  DV_DEVICE CT dv__shfl_up_##T(CT v, int d) { return __shfl_up(v, (unsigned)d); }     \
  DV_DEVICE CT dv__shfl_down_##T(CT v, int d) { return __shfl_down(v, (unsigned)d); } \
  DV_DEVICE CT dv__shfl_xor_##T(CT v, int m) { return __shfl_xor(v, m); }
#else
#define DV__CUDA_SHFL(T, CT)                                                                  \
  DV_DEVICE CT dv__shfl_idx_##T(CT v, int lane) { return __shfl_sync(0xffffffffu, v, lane); } \
  DV_DEVICE CT dv__shfl_up_##T(CT v, int d) {                                                 \
    return __shfl_up_sync(0xffffffffu, v, (unsigned)d);                                       \
  }                                                                                           \
  DV_DEVICE CT dv__shfl_down_##T(CT v, int d) {                                               \
    return __shfl_down_sync(0xffffffffu, v, (unsigned)d);                                     \
  }                                                                                           \
  DV_DEVICE CT dv__shfl_xor_##T(CT v, int m) { return __shfl_xor_sync(0xffffffffu, v, m); }
#endif
DV__CUDA_SHFL(i32, dv_i32)
DV__CUDA_SHFL(u32, dv_u32)
DV__CUDA_SHFL(i64, dv_i64)
DV__CUDA_SHFL(u64, dv_u64)
DV__CUDA_SHFL(f32, dv_f32)
DV__CUDA_SHFL(f64, dv_f64)
#define DV__SHFL(OP, T, v, a) dv__shfl_##OP##_##T((v), (a))
#ifdef DV_BACKEND_HIP
#define dv_wave_any(p) ((int)(__any((p) != 0) != 0))
#define dv_wave_all(p) ((int)(__all((p) != 0) != 0))
#define dv_wave_ballot(p) ((dv_u64)__ballot((p) != 0)) /* 64 bits: every lane of a wave64 */
#else
#define dv_wave_any(p) ((int)(__any_sync(0xffffffffu, (p) != 0) != 0))
#define dv_wave_all(p) ((int)(__all_sync(0xffffffffu, (p) != 0) != 0))
#define dv_wave_ballot(p) ((dv_u64)__ballot_sync(0xffffffffu, (p) != 0))
#endif

/* printf: the device's, flushed to the host's stdout at synchronization. */
#define dv_printf(...) ((void)printf(__VA_ARGS__))
#define DV_PRId64 "lld"
#define DV_PRIu64 "llu"
#define DV_PRIx64 "llx"

/* Constant arrays: one module-wide buffer the library fills. */
#define DV__CONSTANT_BUFFER(bytes) __constant__ __align__(16) unsigned char dv__cbuf[bytes];
#define DV__CONST(T, off) ((const T *)(dv__cbuf + (off)))

/* Atomics: return the old value. */
DV_DEVICE dv_i32 dv_atomic_add_i32(dv_i32 *p, dv_i32 v) { return atomicAdd(p, v); }
DV_DEVICE dv_u32 dv_atomic_add_u32(dv_u32 *p, dv_u32 v) { return atomicAdd(p, v); }
DV_DEVICE dv_i64 dv_atomic_add_i64(dv_i64 *p, dv_i64 v) {
  return (dv_i64)atomicAdd((unsigned long long *)p, (unsigned long long)v);
}
DV_DEVICE dv_u64 dv_atomic_add_u64(dv_u64 *p, dv_u64 v) { return atomicAdd(p, v); }
DV_DEVICE float dv_atomic_add_f32(float *p, float v) { return atomicAdd(p, v); }
DV_DEVICE dv_i32 dv_atomic_min_i32(dv_i32 *p, dv_i32 v) { return atomicMin(p, v); }
DV_DEVICE dv_u32 dv_atomic_min_u32(dv_u32 *p, dv_u32 v) { return atomicMin(p, v); }
#ifdef DV_BACKEND_HIP /* HIP has no atomicMin/atomicMax for long long */
DV_DEVICE dv_i64 dv_atomic_min_i64(dv_i64 *p, dv_i64 v) {
  return __hip_atomic_fetch_min(p, v, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT);
}
#else
DV_DEVICE dv_i64 dv_atomic_min_i64(dv_i64 *p, dv_i64 v) { return atomicMin(p, v); }
#endif
DV_DEVICE dv_u64 dv_atomic_min_u64(dv_u64 *p, dv_u64 v) { return atomicMin(p, v); }
DV_DEVICE dv_i32 dv_atomic_max_i32(dv_i32 *p, dv_i32 v) { return atomicMax(p, v); }
DV_DEVICE dv_u32 dv_atomic_max_u32(dv_u32 *p, dv_u32 v) { return atomicMax(p, v); }
#ifdef DV_BACKEND_HIP
DV_DEVICE dv_i64 dv_atomic_max_i64(dv_i64 *p, dv_i64 v) {
  return __hip_atomic_fetch_max(p, v, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT);
}
#else
DV_DEVICE dv_i64 dv_atomic_max_i64(dv_i64 *p, dv_i64 v) { return atomicMax(p, v); }
#endif
DV_DEVICE dv_u64 dv_atomic_max_u64(dv_u64 *p, dv_u64 v) { return atomicMax(p, v); }
DV_DEVICE dv_i32 dv_atomic_xchg_i32(dv_i32 *p, dv_i32 v) { return atomicExch(p, v); }
DV_DEVICE dv_u32 dv_atomic_xchg_u32(dv_u32 *p, dv_u32 v) { return atomicExch(p, v); }
DV_DEVICE dv_i64 dv_atomic_xchg_i64(dv_i64 *p, dv_i64 v) {
  return (dv_i64)atomicExch((unsigned long long *)p, (unsigned long long)v);
}
DV_DEVICE dv_u64 dv_atomic_xchg_u64(dv_u64 *p, dv_u64 v) { return atomicExch(p, v); }
DV_DEVICE float dv_atomic_xchg_f32(float *p, float v) { return atomicExch(p, v); }
DV_DEVICE dv_i32 dv_atomic_cas_i32(dv_i32 *p, dv_i32 cmp, dv_i32 v) { return atomicCAS(p, cmp, v); }
DV_DEVICE dv_u32 dv_atomic_cas_u32(dv_u32 *p, dv_u32 cmp, dv_u32 v) { return atomicCAS(p, cmp, v); }
DV_DEVICE dv_i64 dv_atomic_cas_i64(dv_i64 *p, dv_i64 cmp, dv_i64 v) {
  return (dv_i64)atomicCAS((unsigned long long *)p, (unsigned long long)cmp, (unsigned long long)v);
}
DV_DEVICE dv_u64 dv_atomic_cas_u64(dv_u64 *p, dv_u64 cmp, dv_u64 v) { return atomicCAS(p, cmp, v); }
DV_DEVICE float dv_atomic_min_f32(float *p, float v) {
  unsigned int *u = (unsigned int *)p, old = *u, assumed;
  do {
    assumed = old;
    if (__uint_as_float(assumed) <= v) break;
    old = atomicCAS(u, assumed, __float_as_uint(v));
  } while (old != assumed);
  return __uint_as_float(old);
}
DV_DEVICE float dv_atomic_max_f32(float *p, float v) {
  unsigned int *u = (unsigned int *)p, old = *u, assumed;
  do {
    assumed = old;
    if (__uint_as_float(assumed) >= v) break;
    old = atomicCAS(u, assumed, __float_as_uint(v));
  } while (old != assumed);
  return __uint_as_float(old);
}
#define DV__CUDA_BITOPS(op, fn)                                                          \
  DV_DEVICE dv_i32 dv_atomic_##op##_i32(dv_i32 *p, dv_i32 v) { return fn(p, v); }        \
  DV_DEVICE dv_u32 dv_atomic_##op##_u32(dv_u32 *p, dv_u32 v) { return fn(p, v); }        \
  DV_DEVICE dv_i64 dv_atomic_##op##_i64(dv_i64 *p, dv_i64 v) {                           \
    return (dv_i64)fn((unsigned long long *)p, (unsigned long long)v);                   \
  }                                                                                      \
  DV_DEVICE dv_u64 dv_atomic_##op##_u64(dv_u64 *p, dv_u64 v) { return fn(p, v); }
DV__CUDA_BITOPS(and, atomicAnd)
DV__CUDA_BITOPS(or, atomicOr)
DV__CUDA_BITOPS(xor, atomicXor)
/* Numba's and CUDA's wrapping counters: inc gives old >= v ? 0 : old + 1,
 * dec gives (old == 0 || old > v) ? v : old - 1.  64-bit: a CAS loop. */
DV_DEVICE dv_u32 dv_atomic_inc_u32(dv_u32 *p, dv_u32 v) { return atomicInc(p, v); }
DV_DEVICE dv_u32 dv_atomic_dec_u32(dv_u32 *p, dv_u32 v) { return atomicDec(p, v); }
DV_DEVICE dv_u64 dv_atomic_inc_u64(dv_u64 *p, dv_u64 v) {
  dv_u64 old = *p, assumed;
  do {
    assumed = old;
    old = atomicCAS(p, assumed, assumed >= v ? 0ull : assumed + 1);
  } while (old != assumed);
  return old;
}
DV_DEVICE dv_u64 dv_atomic_dec_u64(dv_u64 *p, dv_u64 v) {
  dv_u64 old = *p, assumed;
  do {
    assumed = old;
    old = atomicCAS(p, assumed, assumed == 0 || assumed > v ? v : assumed - 1);
  } while (old != assumed);
  return old;
}
DV_DEVICE double dv_atomic_add_f64(double *p, double v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 600 /* atomicAdd(double *) is sm_60+ */
  unsigned long long *u = (unsigned long long *)p, old = *u, assumed;
  do {
    assumed = old;
    old = atomicCAS(u, assumed,
                    (unsigned long long)__double_as_longlong(__longlong_as_double((long long)assumed) + v));
  } while (old != assumed);
  return __longlong_as_double((long long)old);
#else
  return atomicAdd(p, v);
#endif
}
DV_DEVICE double dv_atomic_xchg_f64(double *p, double v) {
  return __longlong_as_double(
      (long long)atomicExch((unsigned long long *)p, (unsigned long long)__double_as_longlong(v)));
}
/* Floating-point compare-and-swap compares bits: -0.0 is not 0.0, a NaN matches itself. */
DV_DEVICE float dv_atomic_cas_f32(float *p, float cmp, float v) {
  return __uint_as_float(atomicCAS((unsigned int *)p, __float_as_uint(cmp), __float_as_uint(v)));
}
DV_DEVICE double dv_atomic_cas_f64(double *p, double cmp, double v) {
  return __longlong_as_double((long long)atomicCAS((unsigned long long *)p,
                                                   (unsigned long long)__double_as_longlong(cmp),
                                                   (unsigned long long)__double_as_longlong(v)));
}

/* ========================================================================== */
#elif defined(__OPENCL_C_VERSION__) || defined(__OPENCL_VERSION__) /* OpenCL C */
#define DV_BACKEND_OPENCL 1

#ifdef cl_khr_fp64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#endif
#ifdef cl_khr_int64_base_atomics
#pragma OPENCL EXTENSION cl_khr_int64_base_atomics : enable
#endif
#ifdef cl_khr_int64_extended_atomics
#pragma OPENCL EXTENSION cl_khr_int64_extended_atomics : enable
#endif
#ifdef cl_khr_subgroups
#pragma OPENCL EXTENSION cl_khr_subgroups : enable
#endif

typedef char dv_i8;
typedef uchar dv_u8;
typedef short dv_i16;
typedef ushort dv_u16;
typedef int dv_i32;
typedef uint dv_u32;
typedef long dv_i64;
typedef ulong dv_u64;
typedef float dv_f32;
#ifdef cl_khr_fp64
typedef double dv_f64;
#endif
#define dv__f32_as_u32(f) as_uint(f)
#define dv__u32_as_f32(u) as_float(u)
#define dv__f64_as_u64(d) as_ulong(d)

#define DV_GLOBAL_MEM __global
#define DV_SHARED_MEM __local
#define DV_CONSTANT_MEM __constant
#define DV_DEVICE static inline
#define DV_RESTRICT restrict
#define DV__TYPEOF(x) __typeof__(x)

typedef struct dv_kview {
  dv_i64 ndim;
  dv_i64 shape[DV_KVIEW_MAXDIMS];
  dv_i64 strides[DV_KVIEW_MAXDIMS];
} dv_kview;

/* Every kernel gets two hidden trailing parameters: the module's constant
 * buffer and the launch's dynamic local memory. */
#define DV_KERNEL(name, ...) \
  __kernel void name(__VA_ARGS__, __constant uchar *dv__cbuf, __local uchar *dv__dyn_shared)
#define DV_ARRAY(T, a) __global T *a##__base, long a##__off
#define DV_VIEW(T, a) __global T *a##__base, long a##__off, dv_kview a##__view
#define DV_BIND(T, a) \
  __global T *DV_RESTRICT a = (__global T *)((__global char *)(a##__base) + (a##__off))

#define dv_thread_idx(d) ((int)get_local_id(d))
#define dv_block_idx(d) ((int)get_group_id(d))
#define dv_block_dim(d) ((int)get_local_size(d))
#define dv_grid_dim(d) ((int)get_num_groups(d))
#if defined(cl_khr_subgroups) || defined(__opencl_c_subgroups)
#define dv_wave_size() ((int)get_max_sub_group_size())
#else
#define dv_wave_size() 1
#endif

#define DV_SHARED(T, n, N) DV__POSITIVE(n, N); __local T n[N]
#define DV_SHARED2(T, n, N0, N1) DV__POSITIVE2(n, N0, N1); __local T n[N0][N1]
#define DV_DYN_SHARED_BEGIN() ulong dv__dyn_cur = 0
#define DV_DYN_SHARED_TAKE(T, n, count)                                           \
  dv__dyn_cur = (dv__dyn_cur + __alignof__(T) - 1) & ~(ulong)(__alignof__(T) - 1); \
  __local T *n = (__local T *)(dv__dyn_shared + dv__dyn_cur);                     \
  dv__dyn_cur += (ulong)(count) * sizeof(T)

#define DV_LOCAL_ARRAY(T, n, N) DV__POSITIVE(n, N); T n[N]
#define DV_LOCAL_ARRAY2(T, n, N0, N1) DV__POSITIVE2(n, N0, N1); T n[N0][N1]

#define dv_syncthreads() barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE)
#define dv_barrier(scope)                                         \
  barrier(((scope) & DV_FENCE_LOCAL ? CLK_LOCAL_MEM_FENCE : 0) |  \
          ((scope) & DV_FENCE_GLOBAL ? CLK_GLOBAL_MEM_FENCE : 0))
#if defined(cl_khr_subgroups) || defined(__opencl_c_subgroups)
#define dv_wavebarrier() sub_group_barrier(CLK_LOCAL_MEM_FENCE)
#else
/* No sub-groups (PoCL 3.1): the work-group barrier is the documented,
 * stronger fallback; it needs the whole work-group to reach it. */
#define dv_wavebarrier() barrier(CLK_LOCAL_MEM_FENCE)
#endif
#define dv_threadfence() mem_fence(CLK_GLOBAL_MEM_FENCE)
#define dv_threadfence_block() mem_fence(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE)

/* Wave operations.  With sub-groups: the sub-group built-ins; a shuffle is
 * one read of another lane's value (sub_group_shuffle, else
 * intel_sub_group_shuffle, else one sub_group_broadcast per lane), up, down
 * and xor compute the source lane and keep the caller's value out of range.
 * Without sub-groups (PoCL 3.1) the wave is the work-item alone: every
 * operation gives the caller's own value (ballot: its predicate in bit 0). */
#if defined(cl_khr_subgroups) || defined(__opencl_c_subgroups)
#define dv_lane_id() ((int)get_sub_group_local_id())
#define dv_wave_any(p) (sub_group_any((p) != 0) != 0)
#define dv_wave_all(p) (sub_group_all((p) != 0) != 0)
#if defined(cl_khr_subgroup_ballot)
DV_DEVICE dv_u64 dv__cl_ballot(int p) {
  uint4 b = sub_group_ballot(p);
  return (ulong)b.x | ((ulong)b.y << 32);
}
#else
DV_DEVICE dv_u64 dv__cl_ballot(int p) {
  uint l = get_sub_group_local_id();
  return sub_group_reduce_add(p && l < 64 ? (ulong)1 << l : (ulong)0);
}
#endif
#define dv_wave_ballot(p) dv__cl_ballot((p) != 0)
#if defined(cl_khr_subgroup_shuffle)
#define DV__CL_PICK(CT) \
  DV_DEVICE CT dv__cl_pick_##CT(CT v, uint src) { return sub_group_shuffle(v, src); }
#elif defined(cl_intel_subgroups)
#define DV__CL_PICK(CT) \
  DV_DEVICE CT dv__cl_pick_##CT(CT v, uint src) { return intel_sub_group_shuffle(v, src); }
#else
#define DV__CL_PICK(CT)                                        \
  DV_DEVICE CT dv__cl_pick_##CT(CT v, uint src) {              \
    CT r = v;                                                  \
    for (uint j = 0; j < get_sub_group_size(); j++) {          \
      CT x = sub_group_broadcast(v, j);                        \
      if (j == src) r = x;                                     \
    }                                                          \
    return r;                                                  \
  }
#endif
#define DV__CL_SHFL(T, CT)                                                           \
  DV__CL_PICK(CT)                                                                    \
  DV_DEVICE CT dv__shfl_idx_##T(CT v, int lane) {                                   \
    int w = (int)get_max_sub_group_size(), s = ((lane % w) + w) % w;                 \
    uint me = get_sub_group_local_id();                                              \
    return dv__cl_pick_##CT(v, (uint)s < get_sub_group_size() ? (uint)s : me);       \
  }                                                                                  \
  DV_DEVICE CT dv__shfl_up_##T(CT v, int d) {                                       \
    uint me = get_sub_group_local_id();                                              \
    int s = (int)me - d;                                                             \
    return dv__cl_pick_##CT(v, d >= 0 && s >= 0 ? (uint)s : me);                     \
  }                                                                                  \
  DV_DEVICE CT dv__shfl_down_##T(CT v, int d) {                                     \
    uint me = get_sub_group_local_id(), s = me + (uint)d;                            \
    return dv__cl_pick_##CT(v, d >= 0 && s < get_sub_group_size() ? s : me);         \
  }                                                                                  \
  DV_DEVICE CT dv__shfl_xor_##T(CT v, int m) {                                      \
    uint me = get_sub_group_local_id(), s = me ^ (uint)m;                            \
    return dv__cl_pick_##CT(v, s < get_sub_group_size() ? s : me);                   \
  }
DV__CL_SHFL(i32, int)
DV__CL_SHFL(u32, uint)
DV__CL_SHFL(i64, long)
DV__CL_SHFL(u64, ulong)
DV__CL_SHFL(f32, float)
#ifdef cl_khr_fp64
DV__CL_SHFL(f64, double)
#endif
#define DV__SHFL(OP, T, v, a) dv__shfl_##OP##_##T((v), (a))
#else
#define dv_lane_id() 0
#define dv_wave_any(p) ((p) != 0)
#define dv_wave_all(p) ((p) != 0)
#define dv_wave_ballot(p) ((dv_u64)((p) != 0))
#define DV__SHFL(OP, T, v, a) ((void)(a), (dv_##T)(v))
#endif

/* printf: OpenCL's, written to stdout when the kernel has finished. */
#define dv_printf(...) ((void)printf(__VA_ARGS__))
#define DV_PRId64 "ld"
#define DV_PRIu64 "lu"
#define DV_PRIx64 "lx"

#define DV__CONSTANT_BUFFER(bytes)
#define DV__CONST(T, off) ((__constant const T *)(dv__cbuf + (off)))

/* C99 float names that OpenCL C spells without the suffix: each is the
 * overload, its arguments converted to float as C converts them. */
#define acosf(x) acos((float)(x))
#define acoshf(x) acosh((float)(x))
#define asinf(x) asin((float)(x))
#define asinhf(x) asinh((float)(x))
#define atanf(x) atan((float)(x))
#define atan2f(y, x) atan2((float)(y), (float)(x))
#define atanhf(x) atanh((float)(x))
#define cbrtf(x) cbrt((float)(x))
#define ceilf(x) ceil((float)(x))
#define copysignf(x, y) copysign((float)(x), (float)(y))
#define cosf(x) cos((float)(x))
#define coshf(x) cosh((float)(x))
#define erff(x) erf((float)(x))
#define erfcf(x) erfc((float)(x))
#define expf(x) exp((float)(x))
#define exp2f(x) exp2((float)(x))
#define exp10f(x) exp10((float)(x))
#define expm1f(x) expm1((float)(x))
#define fabsf(x) fabs((float)(x))
#define fdimf(x, y) fdim((float)(x), (float)(y))
#define floorf(x) floor((float)(x))
#define fmaf(x, y, z) fma((float)(x), (float)(y), (float)(z))
#define fmaxf(x, y) fmax((float)(x), (float)(y))
#define fminf(x, y) fmin((float)(x), (float)(y))
#define fmodf(x, y) fmod((float)(x), (float)(y))
#define frexpf(x, e) frexp((float)(x), (e))
#define hypotf(x, y) hypot((float)(x), (float)(y))
#define ilogbf(x) ilogb((float)(x))
#define ldexpf(x, n) ldexp((float)(x), (int)(n))
#define lgammaf(x) lgamma((float)(x))
#define logf(x) log((float)(x))
#define log10f(x) log10((float)(x))
#define log1pf(x) log1p((float)(x))
#define log2f(x) log2((float)(x))
#define logbf(x) logb((float)(x))
#define modff(x, i) modf((float)(x), (i))
#define nextafterf(x, y) nextafter((float)(x), (float)(y))
#define powf(x, y) pow((float)(x), (float)(y))
#define remainderf(x, y) remainder((float)(x), (float)(y))
#define remquof(x, y, q) remquo((float)(x), (float)(y), (q))
#define rintf(x) rint((float)(x))
#define roundf(x) round((float)(x))
#define rsqrtf(x) rsqrt((float)(x))
#define sinf(x) sin((float)(x))
#define sinhf(x) sinh((float)(x))
#define sqrtf(x) sqrt((float)(x))
#define tanf(x) tan((float)(x))
#define tanhf(x) tanh((float)(x))
#define tgammaf(x) tgamma((float)(x))
#define truncf(x) trunc((float)(x))
/* C99 names OpenCL C lacks.  One rounding mode (to nearest even) and no
 * floating-point exceptions: nearbyint is rint, the l/ll conversions are
 * rint or round and a conversion to long (64 bits, C's long long too). */
#define nearbyintf(x) rint((float)(x))
#define nearbyint(x) rint(x)
#define lrintf(x) ((long)rint((float)(x)))
#define lrint(x) ((long)rint(x))
#define llrintf(x) ((long)rint((float)(x)))
#define llrint(x) ((long)rint(x))
#define lroundf(x) ((long)round((float)(x)))
#define lround(x) ((long)round(x))
#define llroundf(x) ((long)round((float)(x)))
#define llround(x) ((long)round(x))
#define scalbnf(x, n) ldexp((float)(x), (int)(n))
#define scalbn(x, n) ldexp((x), (int)(n))
/* Past +-65536 every float and double result is 0 or infinite already. */
#define scalblnf(x, n) ldexp((float)(x), (int)clamp((long)(n), -65536L, 65536L))
#define scalbln(x, n) ldexp((x), (int)clamp((long)(n), -65536L, 65536L))
/* C's names with C's signatures where OpenCL C's differ (helpers first: they
 * call the built-ins, which some runtimes, PoCL among them, spell as macros).
 * nan(tag): OpenCL's takes an integer code; the tag is not used. */
#undef nan
#define nanf(tag) NAN
#define nan(tag) ((double)NAN)
/* sincos(x, &s, &c) as in C (OpenCL's returns the sine); both pointers in
 * one address space. */
#define DV__CL_SINCOS(T, AS)                                                                 \
  __attribute__((overloadable, unused)) static inline void dv__sincos(T x, AS T *s, AS T *c) { \
    T cv;                                                                                    \
    *s = sincos(x, &cv);                                                                     \
    *c = cv;                                                                                 \
  }
DV__CL_SINCOS(float, __private)
DV__CL_SINCOS(float, __global)
DV__CL_SINCOS(float, __local)
#ifdef cl_khr_fp64
DV__CL_SINCOS(double, __private)
DV__CL_SINCOS(double, __global)
DV__CL_SINCOS(double, __local)
#endif
#undef sincos
#define sincosf(x, s, c) dv__sincos((float)(x), (s), (c))
#define sincos(x, s, c) dv__sincos((x), (s), (c))
/* abs returns the signed type, as in C and CUDA (OpenCL's returns the
 * unsigned one: abs(x) > -1 would be false); labs and llabs are 64-bit. */
#define DV__CL_ABS(T)                                                                          \
  __attribute__((overloadable, unused)) static inline T dv__abs(T x) { return (T)abs(x); }
DV__CL_ABS(int)
DV__CL_ABS(long)
DV__CL_ABS(uint)
DV__CL_ABS(ulong)
#undef abs
#define abs(x) dv__abs(x)
#define labs(x) dv__abs((long)(x))
#define llabs(x) dv__abs((long)(x))

/* Atomics: return the old value; overloaded for __global and __local.
 * 64-bit ones need cl_khr_int64_base_atomics (add, xchg, cas, inc, dec) or
 * cl_khr_int64_extended_atomics (min, max, and, or, xor); without them a use
 * is a compile error naming the missing extension. */
#ifdef cl_khr_int64_base_atomics
#define DV__CL_INT64_BASE(e) e
#else
#define DV__CL_INT64_BASE(e) dv__missing_extension_cl_khr_int64_base_atomics
#endif
#ifdef cl_khr_int64_extended_atomics
#define DV__CL_INT64_EXTENDED(e) e
#else
#define DV__CL_INT64_EXTENDED(e) dv__missing_extension_cl_khr_int64_extended_atomics
#endif
#define dv_atomic_add_i32(p, v) atomic_add((p), (int)(v))
#define dv_atomic_add_u32(p, v) atomic_add((p), (uint)(v))
#define dv_atomic_add_i64(p, v) DV__CL_INT64_BASE(atom_add((p), (long)(v)))
#define dv_atomic_add_u64(p, v) DV__CL_INT64_BASE(atom_add((p), (ulong)(v)))
#define dv_atomic_min_i32(p, v) atomic_min((p), (int)(v))
#define dv_atomic_min_u32(p, v) atomic_min((p), (uint)(v))
#define dv_atomic_min_i64(p, v) DV__CL_INT64_EXTENDED(atom_min((p), (long)(v)))
#define dv_atomic_min_u64(p, v) DV__CL_INT64_EXTENDED(atom_min((p), (ulong)(v)))
#define dv_atomic_max_i32(p, v) atomic_max((p), (int)(v))
#define dv_atomic_max_u32(p, v) atomic_max((p), (uint)(v))
#define dv_atomic_max_i64(p, v) DV__CL_INT64_EXTENDED(atom_max((p), (long)(v)))
#define dv_atomic_max_u64(p, v) DV__CL_INT64_EXTENDED(atom_max((p), (ulong)(v)))
#define dv_atomic_and_i32(p, v) atomic_and((p), (int)(v))
#define dv_atomic_and_u32(p, v) atomic_and((p), (uint)(v))
#define dv_atomic_and_i64(p, v) DV__CL_INT64_EXTENDED(atom_and((p), (long)(v)))
#define dv_atomic_and_u64(p, v) DV__CL_INT64_EXTENDED(atom_and((p), (ulong)(v)))
#define dv_atomic_or_i32(p, v) atomic_or((p), (int)(v))
#define dv_atomic_or_u32(p, v) atomic_or((p), (uint)(v))
#define dv_atomic_or_i64(p, v) DV__CL_INT64_EXTENDED(atom_or((p), (long)(v)))
#define dv_atomic_or_u64(p, v) DV__CL_INT64_EXTENDED(atom_or((p), (ulong)(v)))
#define dv_atomic_xor_i32(p, v) atomic_xor((p), (int)(v))
#define dv_atomic_xor_u32(p, v) atomic_xor((p), (uint)(v))
#define dv_atomic_xor_i64(p, v) DV__CL_INT64_EXTENDED(atom_xor((p), (long)(v)))
#define dv_atomic_xor_u64(p, v) DV__CL_INT64_EXTENDED(atom_xor((p), (ulong)(v)))
#define dv_atomic_xchg_i32(p, v) atomic_xchg((p), (int)(v))
#define dv_atomic_xchg_u32(p, v) atomic_xchg((p), (uint)(v))
#define dv_atomic_xchg_i64(p, v) DV__CL_INT64_BASE(atom_xchg((p), (long)(v)))
#define dv_atomic_xchg_u64(p, v) DV__CL_INT64_BASE(atom_xchg((p), (ulong)(v)))
#define dv_atomic_xchg_f32(p, v) atomic_xchg((p), (float)(v))
#define dv_atomic_cas_i32(p, c, v) atomic_cmpxchg((p), (int)(c), (int)(v))
#define dv_atomic_cas_u32(p, c, v) atomic_cmpxchg((p), (uint)(c), (uint)(v))
#define dv_atomic_cas_i64(p, c, v) DV__CL_INT64_BASE(atom_cmpxchg((p), (long)(c), (long)(v)))
#define dv_atomic_cas_u64(p, c, v) DV__CL_INT64_BASE(atom_cmpxchg((p), (ulong)(c), (ulong)(v)))
/* A read-modify-write as a compare-and-swap loop on U, the bits of T (for
 * integers U is T and TO_U, TO_T are DV__CL_SAME); no store when nothing changes. */
#define DV__CL_SAME(x) (x)
#define DV__CL_CAS_RMW(NAME, AS, T, U, CAS, TO_U, TO_T, EXPR)                              \
  __attribute__((overloadable, unused)) static inline T NAME(volatile AS T *p, T v) {      \
    volatile AS U *u = (volatile AS U *)p;                                                \
    U old = *u, assumed;                                                                  \
    do {                                                                                  \
      assumed = old;                                                                      \
      T cur = TO_T(assumed);                                                              \
      T nv = (EXPR);                                                                      \
      if (TO_U(nv) == assumed) break;                                                     \
      old = CAS(u, assumed, TO_U(nv));                                                    \
    } while (old != assumed);                                                             \
    return TO_T(old);                                                                     \
  }
/* Compare-and-swap and exchange of a floating-point T through its bits U. */
#define DV__CL_BITS_CAS(NAME, AS, T, U, CAS, TO_U, TO_T)                                   \
  __attribute__((overloadable, unused)) static inline T NAME(volatile AS T *p, T c, T v) { \
    return TO_T(CAS((volatile AS U *)p, TO_U(c), TO_U(v)));                               \
  }
#define DV__CL_BITS_XCHG(NAME, AS, T, U, XCHG, TO_U, TO_T)                                 \
  __attribute__((overloadable, unused)) static inline T NAME(volatile AS T *p, T v) {      \
    return TO_T(XCHG((volatile AS U *)p, TO_U(v)));                                       \
  }
#define DV__CL_F32_RMW(NAME, AS, EXPR) \
  DV__CL_CAS_RMW(NAME, AS, float, uint, atomic_cmpxchg, as_uint, as_float, EXPR)
DV__CL_F32_RMW(dv_atomic_add_f32, __global, cur + v)
DV__CL_F32_RMW(dv_atomic_add_f32, __local, cur + v)
DV__CL_F32_RMW(dv_atomic_min_f32, __global, cur <= v ? cur : v)
DV__CL_F32_RMW(dv_atomic_min_f32, __local, cur <= v ? cur : v)
DV__CL_F32_RMW(dv_atomic_max_f32, __global, cur >= v ? cur : v)
DV__CL_F32_RMW(dv_atomic_max_f32, __local, cur >= v ? cur : v)
DV__CL_BITS_CAS(dv_atomic_cas_f32, __global, float, uint, atomic_cmpxchg, as_uint, as_float)
DV__CL_BITS_CAS(dv_atomic_cas_f32, __local, float, uint, atomic_cmpxchg, as_uint, as_float)
/* Numba's and CUDA's wrapping counters: inc gives old >= v ? 0 : old + 1,
 * dec gives (old == 0 || old > v) ? v : old - 1. */
#define DV__CL_INC(cur, v) ((cur) >= (v) ? 0 : (cur) + 1)
#define DV__CL_DEC(cur, v) ((cur) == 0 || (cur) > (v) ? (v) : (cur) - 1)
DV__CL_CAS_RMW(dv_atomic_inc_u32, __global, uint, uint, atomic_cmpxchg, DV__CL_SAME, DV__CL_SAME,
               DV__CL_INC(cur, v))
DV__CL_CAS_RMW(dv_atomic_inc_u32, __local, uint, uint, atomic_cmpxchg, DV__CL_SAME, DV__CL_SAME,
               DV__CL_INC(cur, v))
DV__CL_CAS_RMW(dv_atomic_dec_u32, __global, uint, uint, atomic_cmpxchg, DV__CL_SAME, DV__CL_SAME,
               DV__CL_DEC(cur, v))
DV__CL_CAS_RMW(dv_atomic_dec_u32, __local, uint, uint, atomic_cmpxchg, DV__CL_SAME, DV__CL_SAME,
               DV__CL_DEC(cur, v))
#ifdef cl_khr_int64_base_atomics
DV__CL_CAS_RMW(dv_atomic_inc_u64, __global, ulong, ulong, atom_cmpxchg, DV__CL_SAME, DV__CL_SAME,
               DV__CL_INC(cur, v))
DV__CL_CAS_RMW(dv_atomic_inc_u64, __local, ulong, ulong, atom_cmpxchg, DV__CL_SAME, DV__CL_SAME,
               DV__CL_INC(cur, v))
DV__CL_CAS_RMW(dv_atomic_dec_u64, __global, ulong, ulong, atom_cmpxchg, DV__CL_SAME, DV__CL_SAME,
               DV__CL_DEC(cur, v))
DV__CL_CAS_RMW(dv_atomic_dec_u64, __local, ulong, ulong, atom_cmpxchg, DV__CL_SAME, DV__CL_SAME,
               DV__CL_DEC(cur, v))
#ifdef cl_khr_fp64
DV__CL_CAS_RMW(dv_atomic_add_f64, __global, double, ulong, atom_cmpxchg, as_ulong, as_double, cur + v)
DV__CL_CAS_RMW(dv_atomic_add_f64, __local, double, ulong, atom_cmpxchg, as_ulong, as_double, cur + v)
DV__CL_BITS_XCHG(dv_atomic_xchg_f64, __global, double, ulong, atom_xchg, as_ulong, as_double)
DV__CL_BITS_XCHG(dv_atomic_xchg_f64, __local, double, ulong, atom_xchg, as_ulong, as_double)
DV__CL_BITS_CAS(dv_atomic_cas_f64, __global, double, ulong, atom_cmpxchg, as_ulong, as_double)
DV__CL_BITS_CAS(dv_atomic_cas_f64, __local, double, ulong, atom_cmpxchg, as_ulong, as_double)
#endif
#else
#define dv_atomic_inc_u64(p, v) dv__missing_extension_cl_khr_int64_base_atomics
#define dv_atomic_dec_u64(p, v) dv__missing_extension_cl_khr_int64_base_atomics
#define dv_atomic_add_f64(p, v) dv__missing_extension_cl_khr_int64_base_atomics
#define dv_atomic_xchg_f64(p, v) dv__missing_extension_cl_khr_int64_base_atomics
#define dv_atomic_cas_f64(p, c, v) dv__missing_extension_cl_khr_int64_base_atomics
#endif

/* ========================================================================== */
#else /* ------------------------------------------------ host simulator, C11 */
#define DV_BACKEND_HOST 1

#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

typedef int8_t dv_i8;
typedef uint8_t dv_u8;
typedef int16_t dv_i16;
typedef uint16_t dv_u16;
typedef int32_t dv_i32;
typedef uint32_t dv_u32;
typedef long long dv_i64;
typedef unsigned long long dv_u64;
typedef float dv_f32;
typedef double dv_f64;
static inline dv_u32 dv__f32_as_u32(float f) {
  union { float f; dv_u32 u; } c;
  c.f = f;
  return c.u;
}
static inline float dv__u32_as_f32(dv_u32 u) {
  union { float f; dv_u32 u; } c;
  c.u = u;
  return c.f;
}
static inline dv_u64 dv__f64_as_u64(double d) {
  union { double d; dv_u64 u; } c;
  c.d = d;
  return c.u;
}

#define DV_GLOBAL_MEM
#define DV_SHARED_MEM
#define DV_CONSTANT_MEM
#define DV_DEVICE static inline
#define DV_RESTRICT restrict
#define DV__TYPEOF(x) __typeof__(x)
#define DV__EXPORT __attribute__((visibility("default")))

typedef struct dv_kview {
  dv_i64 ndim;
  dv_i64 shape[DV_KVIEW_MAXDIMS];
  dv_i64 strides[DV_KVIEW_MAXDIMS];
} dv_kview;

/*
 * The simulator's runtime, reached through two symbols every host module
 * exports: dv__rt (a table the library fills after dlopen) and the current
 * thread's state (one per simulated GPU thread; the scheduler switches it).
 * The layout is private to devarray: kernels use the macros below only.
 */
typedef struct dv__hthread {
  int tid[3], bid[3], bdim[3], gdim[3];
  void *block; /* the scheduler's block state */
  int stop;    /* a block function's loop stops after this thread (its thread waited) */
} dv__hthread;

typedef struct dv__host_rt {
  int version;
  /* The block's copy of a static shared array (site: a unique id per declaration). */
  void *(*shared)(int site, size_t bytes, size_t align, const char *name, int line);
  /* Base and size of the launch's dynamic shared memory. */
  unsigned char *(*dyn)(size_t *bytes);
  /* Reserve [*cursor, *cursor + bytes) of the dynamic area (aligned); faults past its end. */
  void *(*dyn_take)(size_t *cursor, size_t bytes, size_t align, const char *name, int line);
  void (*barrier)(int site, int fence, int line);
  void (*wavebarrier)(int site, int line);
  int (*wave_size)(void);
  /* Stop the calling thread's block with a fault (never returns). */
  void (*fault)(const char *what, int line);
  /* Version 2.  A wave operation (dv__wave_*): every lane of the caller's
   * wave gives its value at the wave barrier `site`; returns this lane's
   * result (the bits of a shuffled value, or any/all/ballot). */
  dv_u64 (*wave)(int op, dv_u64 value, int arg, int site, int line);
  /* dv_printf: formatted into the launch's buffer, written at its end. */
  void (*print)(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
  /* Version 3: the access checks (kernel_check=on: modules compiled with
   * DV__ACCESS_CHECK and the compiler's thread-sanitizer instrumentation;
   * see below).  One load or store of n bytes at p (flags: dv__acc_*) by
   * the instruction before pc; returns when it may go on, else stops the
   * block with a fault. */
  void (*access)(const void *p, size_t n, int flags, const void *pc);
  /* memcpy (dv__mem_copy), memmove (dv__mem_move) or memset (dv__mem_set,
   * byte c) of an instrumented module: both ranges checked, then done. */
  void *(*memop)(int op, void *dst, const void *src, int c, size_t n, const void *pc);
  /* shared and dyn_take with the element's size (the checks' reports name
   * an element). */
  void *(*shared_item)(int site, size_t bytes, size_t align, size_t item, const char *name,
                       int line);
  void *(*dyn_take_item)(size_t *cursor, size_t bytes, size_t align, size_t item,
                         const char *name, int line);
} dv__host_rt;

enum { dv__acc_write = 1, dv__acc_atomic = 2 };
enum { dv__mem_copy, dv__mem_move, dv__mem_set };

/* Wave operations of the runtime's wave(). */
enum {
  dv__wave_idx,
  dv__wave_up,
  dv__wave_down,
  dv__wave_xor,
  dv__wave_any,
  dv__wave_all,
  dv__wave_ballot
};

DV__EXPORT extern const dv__host_rt *dv__rt;
DV__EXPORT extern _Thread_local dv__hthread *dv__self;

#ifdef DV__ACCESS_CHECK
/*
 * The access checks' entry points (kernel_check=on).  The module is
 * compiled with -fsanitize=thread, so gcc and clang call __tsan_read4,
 * __tsan_write8, __tsan_atomic32_fetch_add, ... around every load, store
 * and atomic of the kernel's code; they are defined here, hidden (the
 * module's calls bind to them, never to a ThreadSanitizer runtime, which
 * is not linked: host_build.c links the module in a step of its own) and
 * left uninstrumented themselves.  Each hands the access to the runtime
 * (dv__rt->access) with its return address, which names the kernel's
 * instruction; an atomic is done here (sequentially consistent whatever
 * order it asked for) after the runtime has checked its address.
 * memcpy, memmove and memset called by the kernel's code are defined here
 * too and go to the runtime, which checks both ranges and does them.
 */
#if defined(__has_attribute)
#if __has_attribute(disable_sanitizer_instrumentation) /* clang >= 14: no hooks at all */
#define DV__NOTSAN_BODY __attribute__((disable_sanitizer_instrumentation))
#elif defined(__GNUC__) && !defined(__clang__) /* gcc: no_sanitize_thread leaves atomics too */
#define DV__NOTSAN_BODY __attribute__((no_sanitize_thread))
#endif
#endif
#ifdef DV__NOTSAN_BODY
#define DV__NOTSAN __attribute__((visibility("hidden"), noinline)) DV__NOTSAN_BODY
#else
#error "kernel_check=on needs gcc or clang >= 14 (their thread-sanitizer instrumentation)"
#endif
DV__EXPORT const int dv__access_checked = 1; /* the library's sign that the module is */
#define DV__RA __builtin_return_address(0)
#define DV__ACC(p, n, f) dv__rt->access((const void *)(p), (n), (f), DV__RA)
DV__NOTSAN void __tsan_init(void) {}
DV__NOTSAN void __tsan_func_entry(void *pc) { (void)pc; }
DV__NOTSAN void __tsan_func_exit(void) {}
DV__NOTSAN void __tsan_read_range(void *p, unsigned long n) { DV__ACC(p, n, 0); }
DV__NOTSAN void __tsan_write_range(void *p, unsigned long n) { DV__ACC(p, n, dv__acc_write); }
#define DV__TSAN_RW(n)                                                                      \
  DV__NOTSAN void __tsan_read##n(void *p) { DV__ACC(p, n, 0); }                             \
  DV__NOTSAN void __tsan_write##n(void *p) { DV__ACC(p, n, dv__acc_write); }                \
  DV__NOTSAN void __tsan_unaligned_read##n(void *p) { DV__ACC(p, n, 0); }                   \
  DV__NOTSAN void __tsan_unaligned_write##n(void *p) { DV__ACC(p, n, dv__acc_write); }      \
  DV__NOTSAN void __tsan_volatile_read##n(void *p) { DV__ACC(p, n, 0); }                    \
  DV__NOTSAN void __tsan_volatile_write##n(void *p) { DV__ACC(p, n, dv__acc_write); }       \
  DV__NOTSAN void __tsan_unaligned_volatile_read##n(void *p) { DV__ACC(p, n, 0); }          \
  DV__NOTSAN void __tsan_unaligned_volatile_write##n(void *p) { DV__ACC(p, n, dv__acc_write); } \
  DV__NOTSAN void __tsan_read##n##_pc(void *p, void *pc) {                                  \
    dv__rt->access(p, n, 0, (const char *)pc + 1);                                          \
  }                                                                                         \
  DV__NOTSAN void __tsan_write##n##_pc(void *p, void *pc) {                                 \
    dv__rt->access(p, n, dv__acc_write, (const char *)pc + 1);                              \
  }
DV__TSAN_RW(1)
DV__TSAN_RW(2)
DV__TSAN_RW(4)
DV__TSAN_RW(8)
DV__TSAN_RW(16)
/* Atomics of N bits on T: the runtime checks the address (an atomic access
 * is bounds-checked, never a race), then the operation is done.  OP names
 * how: DV__ATOMIC_* with the __atomic builtins, DV__PLAIN_* for 128 bits
 * (no libatomic in a module; the threads of a block share one OS thread). */
#define DV__ATOMIC_LOAD(T, a) __atomic_load_n((const volatile T *)(a), __ATOMIC_SEQ_CST)
#define DV__ATOMIC_STORE(T, a, v) __atomic_store_n((volatile T *)(a), (v), __ATOMIC_SEQ_CST)
#define DV__ATOMIC_XCHG(T, a, v) __atomic_exchange_n((volatile T *)(a), (v), __ATOMIC_SEQ_CST)
#define DV__ATOMIC_RMW(T, a, v, op) __atomic_fetch_##op((volatile T *)(a), (v), __ATOMIC_SEQ_CST)
#define DV__ATOMIC_CAS(T, a, c, v)                                                          \
  __atomic_compare_exchange_n((volatile T *)(a), (c), (v), 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)
#define DV__PLAIN_LOAD(T, a) (*(const volatile T *)(a))
#define DV__PLAIN_STORE(T, a, v) (void)(*(volatile T *)(a) = (v))
#define DV__PLAIN_XCHG(T, a, v) dv__plain_xchg_##T((volatile T *)(a), (v))
#define DV__PLAIN_RMW(T, a, v, op) dv__plain_##op##_##T((volatile T *)(a), (v))
#define DV__PLAIN_CAS(T, a, c, v) dv__plain_cas_##T((volatile T *)(a), (c), (v))
#define DV__TSAN_ATOMIC_RMW(N, T, OP, op)                                                   \
  DV__NOTSAN T __tsan_atomic##N##_fetch_##op(volatile void *a, T v, int mo) {              \
    (void)mo;                                                                               \
    DV__ACC(a, sizeof(T), dv__acc_atomic | dv__acc_write);                                  \
    return OP##_RMW(T, a, v, op);                                                           \
  }
#define DV__TSAN_ATOMICS(N, T, OP)                                                          \
  DV__NOTSAN T __tsan_atomic##N##_load(const volatile void *a, int mo) {                   \
    (void)mo;                                                                               \
    DV__ACC(a, sizeof(T), dv__acc_atomic);                                                  \
    return OP##_LOAD(T, a);                                                                 \
  }                                                                                         \
  DV__NOTSAN void __tsan_atomic##N##_store(volatile void *a, T v, int mo) {                \
    (void)mo;                                                                               \
    DV__ACC(a, sizeof(T), dv__acc_atomic | dv__acc_write);                                  \
    OP##_STORE(T, a, v);                                                                    \
  }                                                                                         \
  DV__NOTSAN T __tsan_atomic##N##_exchange(volatile void *a, T v, int mo) {                \
    (void)mo;                                                                               \
    DV__ACC(a, sizeof(T), dv__acc_atomic | dv__acc_write);                                  \
    return OP##_XCHG(T, a, v);                                                              \
  }                                                                                         \
  DV__TSAN_ATOMIC_RMW(N, T, OP, add)                                                        \
  DV__TSAN_ATOMIC_RMW(N, T, OP, sub)                                                        \
  DV__TSAN_ATOMIC_RMW(N, T, OP, and)                                                        \
  DV__TSAN_ATOMIC_RMW(N, T, OP, or)                                                         \
  DV__TSAN_ATOMIC_RMW(N, T, OP, xor)                                                        \
  DV__TSAN_ATOMIC_RMW(N, T, OP, nand)                                                       \
  DV__NOTSAN _Bool __tsan_atomic##N##_compare_exchange_strong(volatile void *a, T *c, T v,  \
                                                              int mo, int fmo) {           \
    (void)mo, (void)fmo;                                                                    \
    DV__ACC(a, sizeof(T), dv__acc_atomic | dv__acc_write);                                  \
    return OP##_CAS(T, a, c, v);                                                            \
  }                                                                                         \
  DV__NOTSAN _Bool __tsan_atomic##N##_compare_exchange_weak(volatile void *a, T *c, T v,    \
                                                            int mo, int fmo) {             \
    (void)mo, (void)fmo;                                                                    \
    DV__ACC(a, sizeof(T), dv__acc_atomic | dv__acc_write);                                  \
    return OP##_CAS(T, a, c, v);                                                            \
  }                                                                                         \
  DV__NOTSAN T __tsan_atomic##N##_compare_exchange_val(volatile void *a, T c, T v, int mo,  \
                                                       int fmo) {                           \
    (void)mo, (void)fmo;                                                                    \
    DV__ACC(a, sizeof(T), dv__acc_atomic | dv__acc_write);                                  \
    OP##_CAS(T, a, &c, v);                                                                  \
    return c;                                                                               \
  }
DV__TSAN_ATOMICS(8, uint8_t, DV__ATOMIC)
DV__TSAN_ATOMICS(16, uint16_t, DV__ATOMIC)
DV__TSAN_ATOMICS(32, uint32_t, DV__ATOMIC)
DV__TSAN_ATOMICS(64, uint64_t, DV__ATOMIC)
#ifdef __SIZEOF_INT128__
typedef unsigned __int128 dv__u128;
#define DV__PLAIN_OP(op, e)                                                                 \
  DV__NOTSAN_BODY static inline dv__u128 dv__plain_##op##_dv__u128(volatile dv__u128 *a,         \
                                                              dv__u128 v) {                 \
    dv__u128 o = *a;                                                                        \
    *a = (e);                                                                               \
    return o;                                                                               \
  }
DV__PLAIN_OP(xchg, v)
DV__PLAIN_OP(add, o + v)
DV__PLAIN_OP(sub, o - v)
DV__PLAIN_OP(and, o & v)
DV__PLAIN_OP(or, o | v)
DV__PLAIN_OP(xor, o ^ v)
DV__PLAIN_OP(nand, ~(o & v))
DV__NOTSAN_BODY static inline _Bool dv__plain_cas_dv__u128(volatile dv__u128 *a, dv__u128 *c,
                                                      dv__u128 v) {
  dv__u128 o = *a;
  if (o == *c) {
    *a = v;
    return 1;
  }
  *c = o;
  return 0;
}
DV__TSAN_ATOMICS(128, dv__u128, DV__PLAIN)
#endif
DV__NOTSAN void __tsan_atomic_thread_fence(int mo) {
  (void)mo;
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
}
DV__NOTSAN void __tsan_atomic_signal_fence(int mo) {
  (void)mo;
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
}
/* The C library's memory functions, as the kernel's code calls them (and as
 * the compiler calls them for struct copies and clears): hidden in the
 * module, so ranges are checked too (a shared array filled by memset is
 * written); the runtime does the work (no call back into the module). */
DV__NOTSAN void *memcpy(void *restrict d, const void *restrict s, size_t n) {
  return dv__rt->memop(dv__mem_copy, d, s, 0, n, DV__RA);
}
DV__NOTSAN void *memmove(void *d, const void *s, size_t n) {
  return dv__rt->memop(dv__mem_move, d, s, 0, n, DV__RA);
}
DV__NOTSAN void *memset(void *d, int c, size_t n) {
  return dv__rt->memop(dv__mem_set, d, (const void *)0, c, n, DV__RA);
}
DV__NOTSAN void *__tsan_memcpy(void *d, const void *s, size_t n) {
  return dv__rt->memop(dv__mem_copy, d, s, 0, n, DV__RA);
}
DV__NOTSAN void *__tsan_memmove(void *d, const void *s, size_t n) {
  return dv__rt->memop(dv__mem_move, d, s, 0, n, DV__RA);
}
DV__NOTSAN void *__tsan_memset(void *d, int c, size_t n) {
  return dv__rt->memop(dv__mem_set, d, (const void *)0, c, n, DV__RA);
}
#endif /* DV__ACCESS_CHECK */

/*
 * A kernel on the host.  `name` is the kernel of one simulated thread (the
 * checked mode calls it once per thread).  Where the kernel layer could
 * read the kernel's parameter names (its prelude then defines
 * DV__HAS_FWD_<name> and DV__FWD_<name>, the lowered argument names; a
 * kernel name that is a macro is looked up expanded), the body is a static
 * inline function (the compiler inlines it where it can: not a body that
 * calls setjmp, nor one that calls alloca, whose memory would then pile up
 * over the loop's threads) and the module also exports
 * dv__blk_<name>, the block function fast mode calls: the body in a
 * loop over the block's threads, from the thread dv__self names to the
 * block's last, so the C compiler can vectorize across threads.  It runs
 * them on a local copy of that record and points dv__self to it (the
 * runtime finds the running thread there).  Inside the body the thread is
 * the parameter dv__self (it shadows the thread-local of that name, which
 * device functions read, and which points to the same record).  The loop
 * stops after a thread that waited at a barrier: the runtime sets its
 * `stop` (host_rt.c) and runs the threads after it elsewhere.
 */
#define DV__CAT(a, b) DV__CAT_(a, b)
#define DV__CAT_(a, b) a##b
#define DV__SECOND(a, b, ...) b
#define DV__IS_PROBE(...) DV__SECOND(__VA_ARGS__, 0, ~)
#define DV__PROBE ~, 1
#define DV_KERNEL(name, ...)                                                   \
  DV__EXPORT const char dv__sig_##name[] = #__VA_ARGS__;                       \
  DV__CAT(DV__HOST_KERNEL_, DV__IS_PROBE(DV__CAT(DV__HAS_FWD_, name)))(name, __VA_ARGS__)
#define DV__HOST_KERNEL_0(name, ...) DV__EXPORT void name(__VA_ARGS__)
#define DV__HOST_KERNEL_1(name, ...)                                                   \
  static inline void dv__kb_##name(const dv__hthread *const dv__self, __VA_ARGS__);    \
  DV__EXPORT void name(__VA_ARGS__) { dv__kb_##name(dv__self, DV__FWD_##name); }      \
  DV__EXPORT void dv__blk_##name(__VA_ARGS__) {                                        \
    dv__hthread dv__l = *dv__self, *const dv__t = &dv__l; /* a local: it vectorizes */ \
    dv__self = dv__t;                                                                  \
    const int dv__bx = dv__t->bdim[0], dv__by = dv__t->bdim[1], dv__bz = dv__t->bdim[2]; \
    int dv__x = dv__t->tid[0], dv__y = dv__t->tid[1];                                  \
    for (int dv__z = dv__t->tid[2]; dv__z < dv__bz; dv__z++, dv__y = 0) {              \
      dv__t->tid[2] = dv__z;                                                           \
      for (; dv__y < dv__by; dv__y++, dv__x = 0) {                                     \
        dv__t->tid[1] = dv__y;                                                         \
        for (; dv__x < dv__bx; dv__x++) {                                              \
          dv__t->tid[0] = dv__x;                                                       \
          dv__kb_##name(dv__t, DV__FWD_##name);                                        \
          if (__builtin_expect(dv__t->stop, 0)) return;                                \
        }                                                                              \
      }                                                                                \
    }                                                                                  \
  }                                                                                    \
  static inline void dv__kb_##name(const dv__hthread *const dv__self, __VA_ARGS__)
#define DV_ARRAY(T, a) T *a##__base, long long a##__off
#define DV_VIEW(T, a) T *a##__base, long long a##__off, dv_kview a##__view
#define DV_BIND(T, a) T *DV_RESTRICT a = (T *)((char *)(a##__base) + (a##__off))

#define dv_thread_idx(d) (dv__self->tid[d])
#define dv_block_idx(d) (dv__self->bid[d])
#define dv_block_dim(d) (dv__self->bdim[d])
#define dv_grid_dim(d) (dv__self->gdim[d])
#define dv_wave_size() (dv__rt->wave_size())

#ifdef DV__ACCESS_CHECK /* the checks' reports name an element: they need its size */
#define DV_SHARED(T, n, N) \
  DV__POSITIVE(n, N);      \
  T *n = (T *)dv__rt->shared_item(__COUNTER__, sizeof(T) * (size_t)(N), _Alignof(T), sizeof(T), \
                                  #n, __LINE__)
#define DV_SHARED2(T, n, N0, N1)                                                              \
  DV__POSITIVE2(n, N0, N1);                                                                   \
  T(*n)[N1] = (T(*)[N1])dv__rt->shared_item(__COUNTER__,                                      \
                                            sizeof(T) * (size_t)(N0) * (size_t)(N1),          \
                                            _Alignof(T), sizeof(T), #n, __LINE__)
#define DV_DYN_SHARED_TAKE(T, n, count)                                                       \
  T *n = (T *)dv__rt->dyn_take_item(&dv__dyn_cur, sizeof(T) * (size_t)(count), _Alignof(T),  \
                                    sizeof(T), #n, __LINE__)
#else
#define DV_SHARED(T, n, N) \
  DV__POSITIVE(n, N);      \
  T *n = (T *)dv__rt->shared(__COUNTER__, sizeof(T) * (size_t)(N), _Alignof(T), #n, __LINE__)
#define DV_SHARED2(T, n, N0, N1)                                                               \
  DV__POSITIVE2(n, N0, N1);                                                                    \
  T(*n)[N1] = (T(*)[N1])dv__rt->shared(__COUNTER__, sizeof(T) * (size_t)(N0) * (size_t)(N1), \
                                       _Alignof(T), #n, __LINE__)
#define DV_DYN_SHARED_TAKE(T, n, count) \
  T *n = (T *)dv__rt->dyn_take(&dv__dyn_cur, sizeof(T) * (size_t)(count), _Alignof(T), #n, __LINE__)
#endif
#define DV_DYN_SHARED_BEGIN() size_t dv__dyn_cur = 0

#define DV_LOCAL_ARRAY(T, n, N) DV__POSITIVE(n, N); T n[N]
#define DV_LOCAL_ARRAY2(T, n, N0, N1) DV__POSITIVE2(n, N0, N1); T n[N0][N1]

#define dv_syncthreads() dv__rt->barrier(__COUNTER__, DV_FENCE_LOCAL | DV_FENCE_GLOBAL, __LINE__)
#define dv_barrier(scope) dv__rt->barrier(__COUNTER__, (scope), __LINE__)
#define dv_wavebarrier() dv__rt->wavebarrier(__COUNTER__, __LINE__)
#ifdef DV__ACCESS_CHECK /* gcc warns that it does not instrument fences */
void __tsan_atomic_thread_fence(int mo);
#define dv_threadfence() __tsan_atomic_thread_fence(__ATOMIC_SEQ_CST)
#define dv_threadfence_block() __tsan_atomic_thread_fence(__ATOMIC_SEQ_CST)
#else
#define dv_threadfence() __atomic_thread_fence(__ATOMIC_SEQ_CST)
#define dv_threadfence_block() __atomic_thread_fence(__ATOMIC_SEQ_CST)
#endif

/* Wave operations: an exchange among the lanes of one wave, checked like a
 * wave barrier (every lane of the wave reaches the same one). */
#define dv_lane_id()                                                                    \
  ((dv__self->tid[0] + dv__self->bdim[0] * (dv__self->tid[1] + dv__self->bdim[1] *     \
                                             dv__self->tid[2])) % dv_wave_size())
#define DV__HOST_SHFL(T, CT, U)                                                          \
  static inline CT dv__hshfl_##T(int op, CT v, int a, int site, int line) {              \
    union { CT v; U u; } x_;                                                             \
    x_.v = v;                                                                            \
    x_.u = (U)dv__rt->wave(op, (dv_u64)x_.u, a, site, line);                             \
    return x_.v;                                                                         \
  }
DV__HOST_SHFL(i32, dv_i32, dv_u32)
DV__HOST_SHFL(u32, dv_u32, dv_u32)
DV__HOST_SHFL(i64, dv_i64, dv_u64)
DV__HOST_SHFL(u64, dv_u64, dv_u64)
DV__HOST_SHFL(f32, dv_f32, dv_u32)
DV__HOST_SHFL(f64, dv_f64, dv_u64)
#define DV__SHFL(OP, T, v, a) dv__hshfl_##T(dv__wave_##OP, (v), (a), __COUNTER__, __LINE__)
#define dv_wave_any(p) ((int)dv__rt->wave(dv__wave_any, (p) != 0, 0, __COUNTER__, __LINE__))
#define dv_wave_all(p) ((int)dv__rt->wave(dv__wave_all, (p) != 0, 0, __COUNTER__, __LINE__))
#define dv_wave_ballot(p) (dv__rt->wave(dv__wave_ballot, (p) != 0, 0, __COUNTER__, __LINE__))

/* printf: kept per launch, written to stdout at its end (docs/kernels.md). */
#define dv_printf(...) dv__rt->print(__VA_ARGS__)
#define DV_PRId64 "lld"
#define DV_PRIu64 "llu"
#define DV_PRIx64 "llx"

#define DV__CONSTANT_BUFFER(bytes) \
  DV__EXPORT _Alignas(16) unsigned char dv__cbuf[bytes];
#define DV__CONST(T, off) ((const T *)(dv__cbuf + (off)))

/* CUDA's and OpenCL's reciprocal square root, for the same source everywhere. */
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
static inline double rsqrt(double x) { return 1.0 / sqrt(x); }
/* sincos and exp10, which CUDA and OpenCL have and C11 does not declare. */
static inline void dv__sincosf(float x, float *s, float *c) {
  *s = sinf(x);
  *c = cosf(x);
}
static inline void dv__sincos(double x, double *s, double *c) {
  *s = sin(x);
  *c = cos(x);
}
static inline float dv__exp10f(float x) { return (float)pow(10.0, (double)x); }
static inline double dv__exp10(double x) { return pow(10.0, x); }
#define sincosf(x, s, c) dv__sincosf((x), (s), (c))
#define sincos(x, s, c) dv__sincos((x), (s), (c))
#define exp10f(x) dv__exp10f(x)
#define exp10(x) dv__exp10(x)
/* The classification macros give 0 or 1, as on CUDA and OpenCL (glibc's
 * isinf(-INFINITY) is -1, its signbit any nonzero value). */
#define DV__HOST_CLASSIFY(name)                                                \
  static inline int dv__##name##_f(float x) { return name(x) != 0; }           \
  static inline int dv__##name##_d(double x) { return name(x) != 0; }          \
  static inline int dv__##name##_ld(long double x) { return name(x) != 0; }
DV__HOST_CLASSIFY(isnan)
DV__HOST_CLASSIFY(isinf)
DV__HOST_CLASSIFY(isfinite)
DV__HOST_CLASSIFY(isnormal)
DV__HOST_CLASSIFY(signbit)
#define DV__HOST_CLASSIFIED(name, x) \
  _Generic((x), float: dv__##name##_f, long double: dv__##name##_ld, default: dv__##name##_d)(x)
#undef isnan
#undef isinf
#undef isfinite
#undef isnormal
#undef signbit
#define isnan(x) DV__HOST_CLASSIFIED(isnan, x)
#define isinf(x) DV__HOST_CLASSIFIED(isinf, x)
#define isfinite(x) DV__HOST_CLASSIFIED(isfinite, x)
#define isnormal(x) DV__HOST_CLASSIFIED(isnormal, x)
#define signbit(x) DV__HOST_CLASSIFIED(signbit, x)
/* Integer abs, min and max as CUDA's and OpenCL's overloads: abs keeps a
 * 64-bit argument's width; min and max take the arguments' common type (on
 * floats: fminf, fmin). */
#define abs(x) _Generic((x) + 0, long: labs, long long: llabs, default: abs)(x)
#define DV__HOST_INT_MINMAX(T, s)                                              \
  static inline T dv__min_##s(T a, T b) { return b < a ? b : a; }              \
  static inline T dv__max_##s(T a, T b) { return a < b ? b : a; }
DV__HOST_INT_MINMAX(int, i)
DV__HOST_INT_MINMAX(unsigned, u)
DV__HOST_INT_MINMAX(long, l)
DV__HOST_INT_MINMAX(unsigned long, ul)
DV__HOST_INT_MINMAX(long long, ll)
DV__HOST_INT_MINMAX(unsigned long long, ull)
#define DV__HOST_PICK(op, a, b)                                                                \
  _Generic((a) + (b), int: dv__##op##_i, unsigned: dv__##op##_u, long: dv__##op##_l,          \
           unsigned long: dv__##op##_ul, long long: dv__##op##_ll,                            \
           unsigned long long: dv__##op##_ull, float: f##op##f, double: f##op)((a), (b))
#define min(a, b) DV__HOST_PICK(min, a, b)
#define max(a, b) DV__HOST_PICK(max, a, b)

#define DV__HOST_RMW(name, T, op)                                              \
  static inline T name(T *p, T v) { return op(p, v, __ATOMIC_RELAXED); }
DV__HOST_RMW(dv_atomic_add_i32, dv_i32, __atomic_fetch_add)
DV__HOST_RMW(dv_atomic_add_u32, dv_u32, __atomic_fetch_add)
DV__HOST_RMW(dv_atomic_add_i64, dv_i64, __atomic_fetch_add)
DV__HOST_RMW(dv_atomic_add_u64, dv_u64, __atomic_fetch_add)
DV__HOST_RMW(dv_atomic_xchg_i32, dv_i32, __atomic_exchange_n)
DV__HOST_RMW(dv_atomic_xchg_u32, dv_u32, __atomic_exchange_n)
DV__HOST_RMW(dv_atomic_xchg_i64, dv_i64, __atomic_exchange_n)
DV__HOST_RMW(dv_atomic_xchg_u64, dv_u64, __atomic_exchange_n)
#define DV__HOST_MINMAX(name, T, cmp)                                                   \
  static inline T name(T *p, T v) {                                                     \
    T old = __atomic_load_n(p, __ATOMIC_RELAXED);                                       \
    while (!(old cmp v) &&                                                              \
           !__atomic_compare_exchange_n(p, &old, v, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) \
      ;                                                                                 \
    return old;                                                                         \
  }
DV__HOST_MINMAX(dv_atomic_min_i32, dv_i32, <=)
DV__HOST_MINMAX(dv_atomic_min_u32, dv_u32, <=)
DV__HOST_MINMAX(dv_atomic_min_i64, dv_i64, <=)
DV__HOST_MINMAX(dv_atomic_min_u64, dv_u64, <=)
DV__HOST_MINMAX(dv_atomic_max_i32, dv_i32, >=)
DV__HOST_MINMAX(dv_atomic_max_u32, dv_u32, >=)
DV__HOST_MINMAX(dv_atomic_max_i64, dv_i64, >=)
DV__HOST_MINMAX(dv_atomic_max_u64, dv_u64, >=)
#define DV__HOST_CAS(name, T)                                                            \
  static inline T name(T *p, T cmp, T v) {                                               \
    __atomic_compare_exchange_n(p, &cmp, v, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED);      \
    return cmp;                                                                          \
  }
DV__HOST_CAS(dv_atomic_cas_i32, dv_i32)
DV__HOST_CAS(dv_atomic_cas_u32, dv_u32)
DV__HOST_CAS(dv_atomic_cas_i64, dv_i64)
DV__HOST_CAS(dv_atomic_cas_u64, dv_u64)
DV__HOST_RMW(dv_atomic_and_i32, dv_i32, __atomic_fetch_and)
DV__HOST_RMW(dv_atomic_and_u32, dv_u32, __atomic_fetch_and)
DV__HOST_RMW(dv_atomic_and_i64, dv_i64, __atomic_fetch_and)
DV__HOST_RMW(dv_atomic_and_u64, dv_u64, __atomic_fetch_and)
DV__HOST_RMW(dv_atomic_or_i32, dv_i32, __atomic_fetch_or)
DV__HOST_RMW(dv_atomic_or_u32, dv_u32, __atomic_fetch_or)
DV__HOST_RMW(dv_atomic_or_i64, dv_i64, __atomic_fetch_or)
DV__HOST_RMW(dv_atomic_or_u64, dv_u64, __atomic_fetch_or)
DV__HOST_RMW(dv_atomic_xor_i32, dv_i32, __atomic_fetch_xor)
DV__HOST_RMW(dv_atomic_xor_u32, dv_u32, __atomic_fetch_xor)
DV__HOST_RMW(dv_atomic_xor_i64, dv_i64, __atomic_fetch_xor)
DV__HOST_RMW(dv_atomic_xor_u64, dv_u64, __atomic_fetch_xor)
/* A read-modify-write as a compare-and-swap loop (any T; floating-point
 * values are compared by their bits, as on the devices). */
#define DV__HOST_CAS_RMW(name, T, EXPR)                                                     \
  static inline T name(T *p, T v) {                                                         \
    T old, nv;                                                                              \
    __atomic_load(p, &old, __ATOMIC_RELAXED);                                               \
    do {                                                                                    \
      T cur = old;                                                                          \
      nv = (EXPR);                                                                          \
    } while (!__atomic_compare_exchange(p, &old, &nv, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)); \
    return old;                                                                             \
  }
DV__HOST_CAS_RMW(dv_atomic_add_f32, float, cur + v)
DV__HOST_CAS_RMW(dv_atomic_min_f32, float, cur <= v ? cur : v)
DV__HOST_CAS_RMW(dv_atomic_max_f32, float, cur >= v ? cur : v)
DV__HOST_CAS_RMW(dv_atomic_add_f64, double, cur + v)
/* Numba's and CUDA's wrapping counters: inc gives old >= v ? 0 : old + 1,
 * dec gives (old == 0 || old > v) ? v : old - 1. */
DV__HOST_CAS_RMW(dv_atomic_inc_u32, dv_u32, cur >= v ? 0 : cur + 1)
DV__HOST_CAS_RMW(dv_atomic_inc_u64, dv_u64, cur >= v ? 0 : cur + 1)
DV__HOST_CAS_RMW(dv_atomic_dec_u32, dv_u32, cur == 0 || cur > v ? v : cur - 1)
DV__HOST_CAS_RMW(dv_atomic_dec_u64, dv_u64, cur == 0 || cur > v ? v : cur - 1)
#define DV__HOST_XCHG(name, T)                  \
  static inline T name(T *p, T v) {             \
    T old;                                      \
    __atomic_exchange(p, &v, &old, __ATOMIC_RELAXED); \
    return old;                                 \
  }
DV__HOST_XCHG(dv_atomic_xchg_f32, float)
DV__HOST_XCHG(dv_atomic_xchg_f64, double)
/* Floating-point compare-and-swap compares bits: -0.0 is not 0.0, a NaN matches itself. */
#define DV__HOST_CAS_BITS(name, T)                                                          \
  static inline T name(T *p, T cmp, T v) {                                                  \
    __atomic_compare_exchange(p, &cmp, &v, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED);          \
    return cmp;                                                                             \
  }
DV__HOST_CAS_BITS(dv_atomic_cas_f32, float)
DV__HOST_CAS_BITS(dv_atomic_cas_f64, double)

#endif /* backends */
/* ========================================================================== */

/* Common to every backend. */
#ifdef DV_BACKEND_HOST
/* The host simulator's region fission (host_fission_gen.c) declares dv__gidt
 * int inside its block functions, which it runs only for launches whose
 * threads per dimension fit an int: the index is then affine in the
 * thread's, and the loops over a block's threads vectorize. */
typedef dv_i64 dv__gidt;
#define dv_global_id(d) ((dv_i64)((dv__gidt)dv_block_idx(d) * dv_block_dim(d) + dv_thread_idx(d)))
#else
#define dv_global_id(d) ((dv_i64)dv_block_idx(d) * dv_block_dim(d) + dv_thread_idx(d))
#endif
#define dv_global_size(d) ((dv_i64)dv_grid_dim(d) * dv_block_dim(d))
/* OpenCL spellings, readable on every backend. */
#define dv_local_id(d) dv_thread_idx(d)
#define dv_group_id(d) dv_block_idx(d)
#define dv_local_size(d) dv_block_dim(d)
#define dv_num_groups(d) dv_grid_dim(d)

#define DV_NDIM(a) ((int)a##__view.ndim)
#define DV_SHAPE(a, d) (a##__view.shape[d])
#define DV_STRIDE(a, d) (a##__view.strides[d]) /* bytes */
/* Element (i), (i, j), (i, j, k) of a DV_VIEW array through its byte strides. */
#define DV_ITEM1(a, i) \
  (*(DV__TYPEOF(a))((DV_GLOBAL_MEM char *)(a) + (dv_i64)(i) * DV_STRIDE(a, 0)))
#define DV_ITEM2(a, i, j)                                                                 \
  (*(DV__TYPEOF(a))((DV_GLOBAL_MEM char *)(a) + (dv_i64)(i) * DV_STRIDE(a, 0) + \
                    (dv_i64)(j) * DV_STRIDE(a, 1)))
#define DV_ITEM3(a, i, j, k)                                                               \
  (*(DV__TYPEOF(a))((DV_GLOBAL_MEM char *)(a) + (dv_i64)(i) * DV_STRIDE(a, 0) +  \
                    (dv_i64)(j) * DV_STRIDE(a, 1) + (dv_i64)(k) * DV_STRIDE(a, 2)))

/* Wave operations (Numba's cuda.shfl_sync, shfl_up_sync, shfl_down_sync,
 * shfl_xor_sync, any_sync, all_sync, ballot_sync, laneid), for a FULL wave:
 * every lane of the caller's wave calls the same operation (the mask is
 * every lane), in uniform control flow, as Numba's examples do; the host
 * simulator reports a lane that does not as DV_ERR_KERNEL_FAULT.
 *   dv_wave_shuffle_idx_T(v, lane): v of lane `lane` modulo dv_wave_size();
 *   dv_wave_shuffle_up_T(v, delta): v of lane (lane id - delta), or the
 *     caller's own v where that is below lane 0;
 *   dv_wave_shuffle_down_T(v, delta): v of lane (lane id + delta), or the
 *     caller's own v past the wave's last lane;
 *   dv_wave_shuffle_xor_T(v, mask): v of lane (lane id ^ mask), or the
 *     caller's own v past the last lane;
 * for T in i32, u32, i64, u64, f32, f64; delta and mask lie in
 * [0, dv_wave_size()) (CUDA uses their low 5 bits; the host reports others).
 *   dv_wave_any(p), dv_wave_all(p): 1 if p is non-zero in any / every lane;
 *   dv_wave_ballot(p): a dv_u64 with bit i set where lane i's p is non-zero
 *     (waves of at most 64 lanes; CUDA's 32 bits zero-extended);
 *   dv_lane_id(): the caller's lane, its linear thread index in the block
 *     (x fastest) modulo dv_wave_size() (OpenCL: get_sub_group_local_id()).
 * A wave of one lane (OpenCL without sub-groups, e.g. PoCL 3.1) gives every
 * lane its own value: sums over a wave built from shuffles stay right for
 * any wave size.  Blocks whose size is a multiple of the wave size are the
 * portable choice: a GPU's partial last wave is undefined with a full mask
 * (the host gives lanes past the block's end nothing: reads from them return
 * the caller's value, their ballot bits are 0). */
#define dv_wave_shuffle_idx_i32(v, lane) DV__SHFL(idx, i32, v, lane)
#define dv_wave_shuffle_idx_u32(v, lane) DV__SHFL(idx, u32, v, lane)
#define dv_wave_shuffle_idx_i64(v, lane) DV__SHFL(idx, i64, v, lane)
#define dv_wave_shuffle_idx_u64(v, lane) DV__SHFL(idx, u64, v, lane)
#define dv_wave_shuffle_idx_f32(v, lane) DV__SHFL(idx, f32, v, lane)
#define dv_wave_shuffle_idx_f64(v, lane) DV__SHFL(idx, f64, v, lane)
#define dv_wave_shuffle_up_i32(v, delta) DV__SHFL(up, i32, v, delta)
#define dv_wave_shuffle_up_u32(v, delta) DV__SHFL(up, u32, v, delta)
#define dv_wave_shuffle_up_i64(v, delta) DV__SHFL(up, i64, v, delta)
#define dv_wave_shuffle_up_u64(v, delta) DV__SHFL(up, u64, v, delta)
#define dv_wave_shuffle_up_f32(v, delta) DV__SHFL(up, f32, v, delta)
#define dv_wave_shuffle_up_f64(v, delta) DV__SHFL(up, f64, v, delta)
#define dv_wave_shuffle_down_i32(v, delta) DV__SHFL(down, i32, v, delta)
#define dv_wave_shuffle_down_u32(v, delta) DV__SHFL(down, u32, v, delta)
#define dv_wave_shuffle_down_i64(v, delta) DV__SHFL(down, i64, v, delta)
#define dv_wave_shuffle_down_u64(v, delta) DV__SHFL(down, u64, v, delta)
#define dv_wave_shuffle_down_f32(v, delta) DV__SHFL(down, f32, v, delta)
#define dv_wave_shuffle_down_f64(v, delta) DV__SHFL(down, f64, v, delta)
#define dv_wave_shuffle_xor_i32(v, mask) DV__SHFL(xor, i32, v, mask)
#define dv_wave_shuffle_xor_u32(v, mask) DV__SHFL(xor, u32, v, mask)
#define dv_wave_shuffle_xor_i64(v, mask) DV__SHFL(xor, i64, v, mask)
#define dv_wave_shuffle_xor_u64(v, mask) DV__SHFL(xor, u64, v, mask)
#define dv_wave_shuffle_xor_f32(v, mask) DV__SHFL(xor, f32, v, mask)
#define dv_wave_shuffle_xor_f64(v, mask) DV__SHFL(xor, f64, v, mask)

/* dv_printf(format, ...): printf from a kernel, on every backend.  The
 * format is a string literal; %d %u %x %f %e %g %c %s (literal strings)
 * and %% mean the same everywhere; 64-bit integers use DV_PRId64,
 * DV_PRIu64, DV_PRIx64 ("%" DV_PRId64: long long on CUDA and the host,
 * long on OpenCL); doubles need a device with fp64.  It has no value.
 * Limits and order:
 *  - CUDA: the device's circular buffer (cudaLimitPrintfFifoSize, 1 MiB by
 *    default; older output is overwritten when it is full), written to
 *    stdout when the host synchronizes with the launch; order between
 *    threads is unspecified.
 *  - OpenCL: the runtime's buffer (CL_DEVICE_PRINTF_BUFFER_SIZE; PoCL: 16
 *    MiB), written to stdout when the kernel has finished; order unspecified.
 *  - Host simulator: each call's text goes to a buffer of the launch
 *    (option host_printf_buffer, 1 MiB by default; each call takes its
 *    length plus 32 bytes of it) and is written to stdout when the launch
 *    has run, in block then thread order (a thread's calls in the order it
 *    made them), every line starting with "[block (x,y,z) thread (x,y,z)] "
 *    and a call's text ended with a newline if it has none.  Calls that do
 *    not fit are dropped and counted in a last line that names the option.
 *    The output of a launch that faults is written too. */

#define DV_MIN(a, b) ((a) < (b) ? (a) : (b))
#define DV_MAX(a, b) ((a) > (b) ? (a) : (b))

/* ---- Math: <float.h> and <math.h> constants and classification on every
 * backend.  The host has the system's headers, OpenCL C most of these built
 * in, NVRTC none: what a backend lacks is defined here with its exact value
 * (hex literals; the FP_ classes have glibc's values).  docs/kernels.md,
 * "Math in kernels", has the table. */
#if (defined(DV_BACKEND_CUDA) || defined(__HIPCC_RTC__)) && !defined(INFINITY) /* NVRTC, hipRTC */
#if defined(__has_builtin)
#if __has_builtin(__builtin_bit_cast)
#define INFINITY __builtin_bit_cast(float, 0x7f800000u)
#define NAN __builtin_bit_cast(float, 0x7fc00000u)
#define HUGE_VAL __builtin_bit_cast(double, 0x7ff0000000000000ull)
#endif
#endif
#ifndef INFINITY /* an NVRTC without __builtin_bit_cast */
#define INFINITY (1.0f / 0.0f)
#define NAN __int_as_float(0x7fc00000)
#define HUGE_VAL (1.0 / 0.0)
#endif
#endif
#ifndef HUGE_VALF
#define HUGE_VALF INFINITY
#endif
#ifndef HUGE_VAL
#define HUGE_VAL ((double)INFINITY)
#endif
#ifndef FLT_RADIX
#define FLT_RADIX 2
#endif
#ifndef FLT_MANT_DIG
#define FLT_MANT_DIG 24
#endif
#ifndef FLT_DIG
#define FLT_DIG 6
#endif
#ifndef FLT_MIN_EXP
#define FLT_MIN_EXP (-125)
#endif
#ifndef FLT_MAX_EXP
#define FLT_MAX_EXP 128
#endif
#ifndef FLT_MIN_10_EXP
#define FLT_MIN_10_EXP (-37)
#endif
#ifndef FLT_MAX_10_EXP
#define FLT_MAX_10_EXP 38
#endif
#ifndef FLT_MAX
#define FLT_MAX 0x1.fffffep+127f
#endif
#ifndef FLT_MIN
#define FLT_MIN 0x1p-126f
#endif
#ifndef FLT_TRUE_MIN
#define FLT_TRUE_MIN 0x1p-149f
#endif
#ifndef FLT_EPSILON
#define FLT_EPSILON 0x1p-23f
#endif
#ifndef MAXFLOAT
#define MAXFLOAT FLT_MAX
#endif
#ifndef DBL_MANT_DIG
#define DBL_MANT_DIG 53
#endif
#ifndef DBL_DIG
#define DBL_DIG 15
#endif
#ifndef DBL_MIN_EXP
#define DBL_MIN_EXP (-1021)
#endif
#ifndef DBL_MAX_EXP
#define DBL_MAX_EXP 1024
#endif
#ifndef DBL_MIN_10_EXP
#define DBL_MIN_10_EXP (-307)
#endif
#ifndef DBL_MAX_10_EXP
#define DBL_MAX_10_EXP 308
#endif
#ifndef DBL_MAX
#define DBL_MAX 0x1.fffffffffffffp+1023
#endif
#ifndef DBL_MIN
#define DBL_MIN 0x1p-1022
#endif
#ifndef DBL_TRUE_MIN
#define DBL_TRUE_MIN 0x1p-1074
#endif
#ifndef DBL_EPSILON
#define DBL_EPSILON 0x1p-52
#endif
/* M_PI and kin (double), M_PI_F and kin (float, OpenCL's names). */
#ifndef M_E
#define M_E 0x1.5bf0a8b145769p+1
#endif
#ifndef M_LOG2E
#define M_LOG2E 0x1.71547652b82fep+0
#endif
#ifndef M_LOG10E
#define M_LOG10E 0x1.bcb7b1526e50ep-2
#endif
#ifndef M_LN2
#define M_LN2 0x1.62e42fefa39efp-1
#endif
#ifndef M_LN10
#define M_LN10 0x1.26bb1bbb55516p+1
#endif
#ifndef M_PI
#define M_PI 0x1.921fb54442d18p+1
#endif
#ifndef M_PI_2
#define M_PI_2 0x1.921fb54442d18p+0
#endif
#ifndef M_PI_4
#define M_PI_4 0x1.921fb54442d18p-1
#endif
#ifndef M_1_PI
#define M_1_PI 0x1.45f306dc9c883p-2
#endif
#ifndef M_2_PI
#define M_2_PI 0x1.45f306dc9c883p-1
#endif
#ifndef M_2_SQRTPI
#define M_2_SQRTPI 0x1.20dd750429b6dp+0
#endif
#ifndef M_SQRT2
#define M_SQRT2 0x1.6a09e667f3bcdp+0
#endif
#ifndef M_SQRT1_2
#define M_SQRT1_2 0x1.6a09e667f3bcdp-1
#endif
#ifndef M_E_F
#define M_E_F 0x1.5bf0a8p+1f
#endif
#ifndef M_LOG2E_F
#define M_LOG2E_F 0x1.715476p+0f
#endif
#ifndef M_LOG10E_F
#define M_LOG10E_F 0x1.bcb7b2p-2f
#endif
#ifndef M_LN2_F
#define M_LN2_F 0x1.62e43p-1f
#endif
#ifndef M_LN10_F
#define M_LN10_F 0x1.26bb1cp+1f
#endif
#ifndef M_PI_F
#define M_PI_F 0x1.921fb6p+1f
#endif
#ifndef M_PI_2_F
#define M_PI_2_F 0x1.921fb6p+0f
#endif
#ifndef M_PI_4_F
#define M_PI_4_F 0x1.921fb6p-1f
#endif
#ifndef M_1_PI_F
#define M_1_PI_F 0x1.45f306p-2f
#endif
#ifndef M_2_PI_F
#define M_2_PI_F 0x1.45f306p-1f
#endif
#ifndef M_2_SQRTPI_F
#define M_2_SQRTPI_F 0x1.20dd76p+0f
#endif
#ifndef M_SQRT2_F
#define M_SQRT2_F 0x1.6a09e6p+0f
#endif
#ifndef M_SQRT1_2_F
#define M_SQRT1_2_F 0x1.6a09e6p-1f
#endif
#ifndef FP_NAN
#define FP_NAN 0
#define FP_INFINITE 1
#define FP_ZERO 2
#define FP_SUBNORMAL 3
#define FP_NORMAL 4
#endif
#ifndef FP_ILOGB0 /* CUDA's ilogb(0) and ilogb(NaN) */
#define FP_ILOGB0 (-2147483647 - 1)
#define FP_ILOGBNAN (-2147483647 - 1)
#endif

#if defined(DV_BACKEND_OPENCL) /* fpclassify, which OpenCL C lacks */
#define DV__CL_FPCLASSIFY(T)                                                      \
  __attribute__((overloadable, unused)) static inline int dv__fpclassify(T x) { \
    return isnan(x) ? FP_NAN : isinf(x) ? FP_INFINITE : x == 0 ? FP_ZERO        \
           : isnormal(x) ? FP_NORMAL : FP_SUBNORMAL;                              \
  }
DV__CL_FPCLASSIFY(float)
#ifdef cl_khr_fp64
DV__CL_FPCLASSIFY(double)
#endif
#define fpclassify(x) dv__fpclassify(x)
#elif defined(__CUDACC_RTC__) || defined(__HIPCC_RTC__)
/* What NVRTC and hipRTC lack of <math.h>'s classification and comparison
 * macros (nvcc and hipcc have the host's headers). */
#define DV__CU_CLASSIFY(T, MIN)                                                          \
  DV_DEVICE int dv__isnormal(T x) { return isfinite(x) && (x < 0 ? -x : x) >= MIN; } \
  DV_DEVICE int dv__fpclassify(T x) {                                                 \
    return isnan(x) ? FP_NAN : isinf(x) ? FP_INFINITE : x == 0 ? FP_ZERO               \
           : dv__isnormal(x) ? FP_NORMAL : FP_SUBNORMAL;                               \
  }                                                                                   \
  DV_DEVICE int dv__isgreater(T x, T y) { return x > y; }                             \
  DV_DEVICE int dv__isgreaterequal(T x, T y) { return x >= y; }                       \
  DV_DEVICE int dv__isless(T x, T y) { return x < y; }                                \
  DV_DEVICE int dv__islessequal(T x, T y) { return x <= y; }                          \
  DV_DEVICE int dv__islessgreater(T x, T y) { return x < y || x > y; }                \
  DV_DEVICE int dv__isunordered(T x, T y) { return isnan(x) || isnan(y); }
DV__CU_CLASSIFY(float, FLT_MIN)
DV__CU_CLASSIFY(double, DBL_MIN)
#define isnormal(x) dv__isnormal(x)
#define fpclassify(x) dv__fpclassify(x)
#define isgreater(x, y) dv__isgreater((x), (y))
#define isgreaterequal(x, y) dv__isgreaterequal((x), (y))
#define isless(x, y) dv__isless((x), (y))
#define islessequal(x, y) dv__islessequal((x), (y))
#define islessgreater(x, y) dv__islessgreater((x), (y))
#define isunordered(x, y) dv__isunordered((x), (y))
#endif

/* ---- Half precision ------------------------------------------------------
 * dv_f16 is IEEE binary16 storage (NumPy's float16, a DV_FLOAT16 array's
 * element: DV_ARRAY(dv_f16, x), x[i] is a dv_f16); arithmetic is done in
 * float.  The conversions are integer code, the same on every backend, and
 * give NumPy's bits for every input: round to nearest even (subnormals
 * included, overflow to infinity), a NaN keeps its sign and the top bits of
 * its payload, quiet or signalling (a payload that would vanish becomes 1).
 * Hardware conversions are not used: x86's F16C quiets signalling NaNs, and
 * neither PTX's cvt.rn.f16.f32 nor OpenCL's vstore_half_rte promises NumPy's
 * payload rule.  dv_f64_to_f16 rounds once, from the double, as NumPy does
 * (never through float). */
typedef struct dv_f16 {
  dv_u16 bits;
} dv_f16;

DV_DEVICE dv_f16 dv_f16_from_bits(dv_u16 bits) {
  dv_f16 h;
  h.bits = bits;
  return h;
}
DV_DEVICE dv_u16 dv_f16_bits(dv_f16 h) { return h.bits; }

DV_DEVICE float dv_f16_to_f32(dv_f16 h) {
  dv_u32 sign = (dv_u32)(h.bits & 0x8000u) << 16, e = (h.bits >> 10) & 0x1fu, m = h.bits & 0x3ffu;
  if (e == 0x1fu) return dv__u32_as_f32(sign | 0x7f800000u | (m << 13)); /* inf, NaN */
  if (e != 0) return dv__u32_as_f32(sign | ((e + 112u) << 23) | (m << 13));
  if (m == 0) return dv__u32_as_f32(sign);
  e = 113u; /* subnormal: m * 2^-24, normalised */
  while (!(m & 0x400u)) {
    m <<= 1;
    e--;
  }
  return dv__u32_as_f32(sign | (e << 23) | ((m & 0x3ffu) << 13));
}

/* q rounded to nearest even, given the bits shifted out (rest) and half of their weight. */
#define DV__RNE(q, rest, halfway) ((q) + ((rest) > (halfway) || ((rest) == (halfway) && ((q) & 1u))))

DV_DEVICE dv_f16 dv_f32_to_f16(float f) {
  dv_u32 x = dv__f32_as_u32(f), a = x & 0x7fffffffu;
  dv_u32 sign = (x >> 16) & 0x8000u, bits;
  if (a >= 0x7f800000u) { /* inf, NaN */
    dv_u32 m = (a & 0x7fffffu) >> 13;
    bits = 0x7c00u | m | (a > 0x7f800000u && m == 0);
  } else if (a >= 0x47800000u) { /* 2^16 and above: inf (65520 rounds up to it below) */
    bits = 0x7c00u;
  } else if (a >= 0x38800000u) { /* 2^-14 and above: normal; a carry may reach inf */
    dv_u32 r = a - 0x38000000u;
    bits = DV__RNE(r >> 13, r & 0x1fffu, 0x1000u);
  } else if (a > 0x33000000u) { /* above 2^-25: a subnormal, or 2^-14 by rounding */
    dv_u32 m = (a & 0x7fffffu) | 0x800000u, s = 126u - (a >> 23); /* 14..24 */
    bits = DV__RNE(m >> s, m & ((1u << s) - 1u), 1u << (s - 1u));
  } else {
    bits = 0; /* 2^-25 (a tie, to even) and below */
  }
  return dv_f16_from_bits((dv_u16)(sign | bits));
}

#if !defined(DV_BACKEND_OPENCL) || defined(cl_khr_fp64)
DV_DEVICE dv_f16 dv_f64_to_f16(double d) {
  dv_u64 x = dv__f64_as_u64(d), a = x & 0x7fffffffffffffff;
  dv_u32 sign = (dv_u32)(x >> 48) & 0x8000u, bits;
  if (a >= 0x7ff0000000000000) {
    dv_u32 m = (dv_u32)((a & 0xfffffffffffff) >> 42);
    bits = 0x7c00u | m | (a > 0x7ff0000000000000 && m == 0);
  } else if (a >= 0x40f0000000000000) {
    bits = 0x7c00u;
  } else if (a >= 0x3f10000000000000) {
    dv_u64 r = a - 0x3f00000000000000;
    bits = (dv_u32)DV__RNE(r >> 42, r & 0x3ffffffffff, 0x20000000000);
  } else if (a > 0x3e60000000000000) {
    dv_u64 m = (a & 0xfffffffffffff) | 0x10000000000000;
    dv_u32 s = 1051u - (dv_u32)(a >> 52); /* 43..53 */
    bits = (dv_u32)DV__RNE(m >> s, m & (((dv_u64)1 << s) - 1u), (dv_u64)1 << (s - 1u));
  } else {
    bits = 0;
  }
  return dv_f16_from_bits((dv_u16)(sign | bits));
}
#endif

#ifdef DV_BACKEND_HIP
/* Functions a kernel source declares without DV_DEVICE are device functions
 * (NVRTC's -default-device; hipRTC and hipcc have no such option).  The
 * library compiles device code only, so host-and-device is device here. */
#pragma clang force_cuda_host_device begin
#endif

#endif /* DEVARRAY_KERNEL_H */
