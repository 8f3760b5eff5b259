/*
 * src/dialect/cuda_hip.h -- the dialect as CUDA C++ (NVRTC, nvcc) and
 * HIP (hipRTC, hipcc): the CUDA backend and the HIP backend.
 *
 * A part of the kernel dialect's implementation, included by dialect.h only
 * (which is embedded in the library as the text prepended to every kernel
 * source: CMakeLists.txt, cmake/embed.cmake).  The reference for kernel
 * authors is include/devarray/kernel.h.
 */

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
