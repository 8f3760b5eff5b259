/*
 * devarray/kernel.h -- the kernel dialect: one kernel source that compiles as
 * CUDA C++ (NVRTC), OpenCL C 1.2+ (clBuildProgram) and C11 (the host
 * simulator, with the system C compiler).
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

#define DV_KERNEL_DIALECT_VERSION 1
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
#if defined(__CUDACC_RTC__) || defined(__CUDACC__) /* ------------- CUDA C++ */
#define DV_BACKEND_CUDA 1

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
#define dv_wavebarrier() __syncwarp()
#define dv_threadfence() __threadfence()
#define dv_threadfence_block() __threadfence_block()

/* Wave (warp) operations: the _sync intrinsics with every lane in the mask. */
#define dv_lane_id() \
  ((int)((threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)) % warpSize))
#define DV__CUDA_SHFL(T, CT)                                                                  \
  DV_DEVICE CT dv__shfl_idx_##T(CT v, int lane) { return __shfl_sync(0xffffffffu, v, lane); } \
  DV_DEVICE CT dv__shfl_up_##T(CT v, int d) {                                                 \
    return __shfl_up_sync(0xffffffffu, v, (unsigned)d);                                       \
  }                                                                                           \
  DV_DEVICE CT dv__shfl_down_##T(CT v, int d) {                                               \
    return __shfl_down_sync(0xffffffffu, v, (unsigned)d);                                     \
  }                                                                                           \
  DV_DEVICE CT dv__shfl_xor_##T(CT v, int m) { return __shfl_xor_sync(0xffffffffu, v, m); }
DV__CUDA_SHFL(i32, dv_i32)
DV__CUDA_SHFL(u32, dv_u32)
DV__CUDA_SHFL(i64, dv_i64)
DV__CUDA_SHFL(u64, dv_u64)
DV__CUDA_SHFL(f32, dv_f32)
DV__CUDA_SHFL(f64, dv_f64)
#define DV__SHFL(OP, T, v, a) dv__shfl_##OP##_##T((v), (a))
#define dv_wave_any(p) ((int)(__any_sync(0xffffffffu, (p) != 0) != 0))
#define dv_wave_all(p) ((int)(__all_sync(0xffffffffu, (p) != 0) != 0))
#define dv_wave_ballot(p) ((dv_u64)__ballot_sync(0xffffffffu, (p) != 0))

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
DV_DEVICE dv_i64 dv_atomic_min_i64(dv_i64 *p, dv_i64 v) { return atomicMin(p, v); }
DV_DEVICE dv_u64 dv_atomic_min_u64(dv_u64 *p, dv_u64 v) { return atomicMin(p, v); }
DV_DEVICE dv_i32 dv_atomic_max_i32(dv_i32 *p, dv_i32 v) { return atomicMax(p, v); }
DV_DEVICE dv_u32 dv_atomic_max_u32(dv_u32 *p, dv_u32 v) { return atomicMax(p, v); }
DV_DEVICE dv_i64 dv_atomic_max_i64(dv_i64 *p, dv_i64 v) { return atomicMax(p, v); }
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

/* C99 float names that OpenCL C spells without the suffix. */
#define sqrtf sqrt
#define expf exp
#define logf log
#define powf pow
#define sinf sin
#define cosf cos
#define tanf tan
#define tanhf tanh
#define fabsf fabs
#define floorf floor
#define ceilf ceil
#define fminf fmin
#define fmaxf fmax
#define fmaf fma
#define exp2f exp2
#define log2f log2
#define rsqrtf rsqrt

/* Atomics: return the old value; overloaded for __global and __local. */
#define dv_atomic_add_i32(p, v) atomic_add((p), (int)(v))
#define dv_atomic_add_u32(p, v) atomic_add((p), (uint)(v))
#define dv_atomic_add_i64(p, v) atom_add((p), (long)(v))
#define dv_atomic_add_u64(p, v) atom_add((p), (ulong)(v))
#define dv_atomic_min_i32(p, v) atomic_min((p), (int)(v))
#define dv_atomic_min_u32(p, v) atomic_min((p), (uint)(v))
#define dv_atomic_min_i64(p, v) atom_min((p), (long)(v))
#define dv_atomic_min_u64(p, v) atom_min((p), (ulong)(v))
#define dv_atomic_max_i32(p, v) atomic_max((p), (int)(v))
#define dv_atomic_max_u32(p, v) atomic_max((p), (uint)(v))
#define dv_atomic_max_i64(p, v) atom_max((p), (long)(v))
#define dv_atomic_max_u64(p, v) atom_max((p), (ulong)(v))
#define dv_atomic_xchg_i32(p, v) atomic_xchg((p), (int)(v))
#define dv_atomic_xchg_u32(p, v) atomic_xchg((p), (uint)(v))
#define dv_atomic_xchg_i64(p, v) atom_xchg((p), (long)(v))
#define dv_atomic_xchg_u64(p, v) atom_xchg((p), (ulong)(v))
#define dv_atomic_xchg_f32(p, v) atomic_xchg((p), (float)(v))
#define dv_atomic_cas_i32(p, c, v) atomic_cmpxchg((p), (int)(c), (int)(v))
#define dv_atomic_cas_u32(p, c, v) atomic_cmpxchg((p), (uint)(c), (uint)(v))
#define dv_atomic_cas_i64(p, c, v) atom_cmpxchg((p), (long)(c), (long)(v))
#define dv_atomic_cas_u64(p, c, v) atom_cmpxchg((p), (ulong)(c), (ulong)(v))
#define DV__CL_FLOAT_RMW(NAME, AS, EXPR)                                                  \
  __attribute__((overloadable, unused)) static inline float NAME(volatile AS float *p, float v) { \
    volatile AS uint *u = (volatile AS uint *)p;                                          \
    uint old = *u, assumed;                                                               \
    do {                                                                                  \
      assumed = old;                                                                      \
      float cur = as_float(assumed);                                                      \
      float nv = (EXPR);                                                                  \
      if (as_uint(nv) == assumed) break;                                                  \
      old = atomic_cmpxchg(u, assumed, as_uint(nv));                                      \
    } while (old != assumed);                                                             \
    return as_float(old);                                                                 \
  }
DV__CL_FLOAT_RMW(dv_atomic_add_f32, __global, cur + v)
DV__CL_FLOAT_RMW(dv_atomic_add_f32, __local, cur + v)
DV__CL_FLOAT_RMW(dv_atomic_min_f32, __global, cur <= v ? cur : v)
DV__CL_FLOAT_RMW(dv_atomic_min_f32, __local, cur <= v ? cur : v)
DV__CL_FLOAT_RMW(dv_atomic_max_f32, __global, cur >= v ? cur : v)
DV__CL_FLOAT_RMW(dv_atomic_max_f32, __local, cur >= v ? cur : v)

/* ========================================================================== */
#else /* ------------------------------------------------ host simulator, C11 */
#define DV_BACKEND_HOST 1

#include <math.h>
#include <stddef.h>
#include <stdint.h>

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
} dv__host_rt;

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

#define DV_KERNEL(name, ...)                                         \
  DV__EXPORT const char dv__sig_##name[] = #__VA_ARGS__;            \
  DV__EXPORT void name(__VA_ARGS__)
#define DV_ARRAY(T, a) T *a##__base, long long a##__off
#define DV_VIEW(T, a) T *a##__base, long long a##__off, dv_kview a##__view
#define DV_BIND(T, a) T *DV_RESTRICT a = (T *)((char *)(a##__base) + (a##__off))

#define dv_thread_idx(d) (dv__self->tid[d])
#define dv_block_idx(d) (dv__self->bid[d])
#define dv_block_dim(d) (dv__self->bdim[d])
#define dv_grid_dim(d) (dv__self->gdim[d])
#define dv_wave_size() (dv__rt->wave_size())

#define DV_SHARED(T, n, N) \
  DV__POSITIVE(n, N);      \
  T *n = (T *)dv__rt->shared(__COUNTER__, sizeof(T) * (size_t)(N), _Alignof(T), #n, __LINE__)
#define DV_SHARED2(T, n, N0, N1)                                                               \
  DV__POSITIVE2(n, N0, N1);                                                                    \
  T(*n)[N1] = (T(*)[N1])dv__rt->shared(__COUNTER__, sizeof(T) * (size_t)(N0) * (size_t)(N1), \
                                       _Alignof(T), #n, __LINE__)
#define DV_DYN_SHARED_BEGIN() size_t dv__dyn_cur = 0
#define DV_DYN_SHARED_TAKE(T, n, count) \
  T *n = (T *)dv__rt->dyn_take(&dv__dyn_cur, sizeof(T) * (size_t)(count), _Alignof(T), #n, __LINE__)

#define DV_LOCAL_ARRAY(T, n, N) DV__POSITIVE(n, N); T n[N]
#define DV_LOCAL_ARRAY2(T, n, N0, N1) DV__POSITIVE2(n, N0, N1); T n[N0][N1]

#define dv_syncthreads() dv__rt->barrier(__COUNTER__, DV_FENCE_LOCAL | DV_FENCE_GLOBAL, __LINE__)
#define dv_barrier(scope) dv__rt->barrier(__COUNTER__, (scope), __LINE__)
#define dv_wavebarrier() dv__rt->wavebarrier(__COUNTER__, __LINE__)
#define dv_threadfence() __atomic_thread_fence(__ATOMIC_SEQ_CST)
#define dv_threadfence_block() __atomic_thread_fence(__ATOMIC_SEQ_CST)

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
#define DV__HOST_FLOAT_RMW(name, EXPR)                                                      \
  static inline float name(float *p, float v) {                                             \
    float old, nv;                                                                          \
    __atomic_load(p, &old, __ATOMIC_RELAXED);                                   \
    do {                                                                                    \
      float cur = old;                                                                      \
      nv = (EXPR);                                                                          \
    } while (!__atomic_compare_exchange(p, &old, &nv, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)); \
    return old;                                                                             \
  }
DV__HOST_FLOAT_RMW(dv_atomic_add_f32, cur + v)
DV__HOST_FLOAT_RMW(dv_atomic_min_f32, cur <= v ? cur : v)
DV__HOST_FLOAT_RMW(dv_atomic_max_f32, cur >= v ? cur : v)
static inline float dv_atomic_xchg_f32(float *p, float v) {
  float old;
  __atomic_exchange(p, &v, &old, __ATOMIC_RELAXED);
  return old;
}

#endif /* backends */
/* ========================================================================== */

/* Common to every backend. */
#define dv_global_id(d) ((dv_i64)dv_block_idx(d) * dv_block_dim(d) + dv_thread_idx(d))
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

#endif /* DEVARRAY_KERNEL_H */
