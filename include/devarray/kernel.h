/*
 * devarray/kernel.h -- the kernel dialect: the reference.
 *
 * One kernel source compiles as CUDA C++ (NVRTC), HIP (hipRTC, hipcc), OpenCL
 * C 1.2+ (clBuildProgram) and C11 (the host simulator, with the system C
 * compiler).  This header states each construct of the dialect once: what it
 * does, its rules, and where a backend differs.  Its declarations let an
 * editor or IDE parse a kernel source (include it, or pass it with
 * `-include devarray/kernel.h`); nothing here is what a backend compiles.
 *
 * How a kernel is compiled.  Kernel sources include nothing: devarray
 * prepends the dialect's implementation (the library's src/dialect/,
 * embedded at build time, one section per backend) and a generated prelude
 * (the program's defines and constant arrays) to the source it is given,
 * then adds `#line 1 "<program name>"` so compiler messages point into the
 * user's own text.  The implementation defines this header's include guard,
 * so a kernel source that includes <devarray/kernel.h> compiles unchanged.
 * Host programs never include this header (they use <devarray.h>).
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
 *  - Names starting with dv__ or DV__ are the implementation's; kernels do
 *    not use them.
 *
 * docs/kernels.md has the table: construct -> CUDA C -> OpenCL C -> host C,
 * and what each backend cannot do.
 *
 * Sections: 1 version and backend markers; 2 types; 3 kernels, parameters
 * and views; 4 qualifiers; 5 indices; 6 shared, local and constant memory;
 * 7 barriers and fences; 8 wave operations; 9 atomics; 10 printf; 11 math;
 * 12 half precision.
 */
#ifndef DEVARRAY_KERNEL_H
#define DEVARRAY_KERNEL_H

#include <float.h>
#include <math.h>
#include <stddef.h>

/* ==== 1. Version and backend markers ===================================== */

/** The dialect's version: 2 added views, wave operations and dv_printf. */
#define DV_KERNEL_DIALECT_VERSION 2
/*
 * Exactly one of these is defined (to 1) while a backend compiles a kernel,
 * so that a source can say where it differs; none is defined here:
 *   DV_BACKEND_CUDA    NVRTC or nvcc
 *   DV_BACKEND_HIP     hipRTC or hipcc (HIP is CUDA's dialect with a few
 *                      names changed: every CUDA rule below holds unless HIP
 *                      is named)
 *   DV_BACKEND_OPENCL  an OpenCL C compiler (clBuildProgram)
 *   DV_BACKEND_HOST    the host simulator (the system C compiler, C11)
 */

/* ==== 2. Types ============================================================ */

/*
 * Fixed-size integers and floats with the same size on every backend.
 * dv_i64/dv_u64 are long long on CUDA, HIP and the host, long on OpenCL
 * (64 bits everywhere; print them with DV_PRId64 and friends).  dv_f64
 * exists on OpenCL only with cl_khr_fp64.
 */
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

/** Dimensions a DV_VIEW parameter carries (the library refuses more). */
#define DV_KVIEW_MAXDIMS 8
/** A DV_VIEW parameter's shape and strides (bytes), by value. */
typedef struct dv_kview {
  dv_i64 ndim;
  dv_i64 shape[DV_KVIEW_MAXDIMS];
  dv_i64 strides[DV_KVIEW_MAXDIMS]; /* bytes */
} dv_kview;

/* ==== 3. Kernels, parameters and views ==================================== */

/*
 * DV_KERNEL(name, params...) { body }: a kernel, launched by name
 * (dv_kernel_get, dv_launch).  At least one parameter.  Parameters are
 * scalars (by value) and arrays:
 *   DV_ARRAY(T, a)  an array of T (the launch passes a dv_array, or a
 *                   smart array); bind it with DV_BIND before use
 *   DV_VIEW(T, a)   the same, with its shape and byte strides (dv_kview),
 *                   read with DV_NDIM, DV_SHAPE, DV_STRIDE, DV_ITEM1..3
 *   DV_BIND(T, a)   at the top of the body, once per array parameter: `a`
 *                   becomes a T pointer to element 0 (restrict-qualified)
 * Backends: CUDA and HIP make an extern "C" __global__ function; OpenCL a
 * __kernel with two hidden trailing parameters (the constant buffer and the
 * dynamic local memory); the host simulator one function per simulated
 * thread and, where the library could read the parameter names, a block
 * function that runs a whole block (the kernel's body is the same text).
 */
#define DV_KERNEL(name, ...) void name(__VA_ARGS__)
#define DV_ARRAY(T, a) T *a##__base, dv_i64 a##__off
#define DV_VIEW(T, a) T *a##__base, dv_i64 a##__off, dv_kview a##__view
#define DV_BIND(T, a) T *DV_RESTRICT a = (T *)((char *)(a##__base) + (a##__off))

/* The number of dimensions, extent of dimension d and stride of dimension
 * d (bytes) of a DV_VIEW parameter a. */
#define DV_NDIM(a) ((int)a##__view.ndim)
#define DV_SHAPE(a, d) (a##__view.shape[d])
#define DV_STRIDE(a, d) (a##__view.strides[d])
/* Element (i), (i, j), (i, j, k) of a DV_VIEW array through its byte
 * strides (an lvalue). */
#define DV_ITEM1(a, i) (*(__typeof__(a))((char *)(a) + (dv_i64)(i) * DV_STRIDE(a, 0)))
#define DV_ITEM2(a, i, j) \
  (*(__typeof__(a))((char *)(a) + (dv_i64)(i) * DV_STRIDE(a, 0) + (dv_i64)(j) * DV_STRIDE(a, 1)))
#define DV_ITEM3(a, i, j, k)                                                            \
  (*(__typeof__(a))((char *)(a) + (dv_i64)(i) * DV_STRIDE(a, 0) +                      \
                    (dv_i64)(j) * DV_STRIDE(a, 1) + (dv_i64)(k) * DV_STRIDE(a, 2)))

/* ==== 4. Qualifiers ======================================================= */

/*
 * DV_GLOBAL_MEM, DV_SHARED_MEM, DV_CONSTANT_MEM: the address space of a
 * pointer a helper receives (OpenCL's __global, __local, __constant; empty
 * on the other backends).  A helper that takes a bound array writes
 * `DV_GLOBAL_MEM float *x`.
 * DV_DEVICE: a helper function callable from kernels (__device__ inline on
 * CUDA and HIP, static inline elsewhere).  On CUDA (-default-device) and HIP
 * a function without it is a device function too.
 * DV_RESTRICT: restrict (__restrict__ in C++).
 */
#define DV_GLOBAL_MEM
#define DV_SHARED_MEM
#define DV_CONSTANT_MEM
#define DV_DEVICE static inline
#ifdef __cplusplus
#define DV_RESTRICT __restrict__
#else
#define DV_RESTRICT restrict
#endif

/* ==== 5. Indices ========================================================== */

/*
 * d is 0, 1 or 2 (x, y, z).  dv_thread_idx: the thread's index in its block
 * (CUDA threadIdx, OpenCL get_local_id); dv_block_idx: the block's index in
 * the grid (blockIdx, get_group_id); dv_block_dim: threads per block
 * (blockDim, get_local_size); dv_grid_dim: blocks per grid (gridDim,
 * get_num_groups).  dv_global_id(d) = block index * block size + thread
 * index and dv_global_size(d) = grid * block size, both 64-bit.  The
 * OpenCL spellings dv_local_id, dv_group_id, dv_local_size and
 * dv_num_groups are the same four, readable on every backend.
 */
int dv_thread_idx(int d);
int dv_block_idx(int d);
int dv_block_dim(int d);
int dv_grid_dim(int d);
dv_i64 dv_global_id(int d);
dv_i64 dv_global_size(int d);
int dv_local_id(int d);
int dv_group_id(int d);
int dv_local_size(int d);
int dv_num_groups(int d);

/* ==== 6. Shared, local and constant memory ================================ */

/*
 * DV_SHARED(T, n, N), DV_SHARED2(T, n, N0, N1): a block's shared array of
 * N (N0 x N1) T (CUDA __shared__, OpenCL __local), at the outermost scope of
 * the kernel body.  The lengths are positive compile-time constants
 * (Numba's rule: anything else is a compile error naming dv__length_of_n).
 * Shared memory is uninitialized.
 * DV_DYN_SHARED_BEGIN(); then DV_DYN_SHARED_TAKE(T, n, count): the launch's
 * dynamic shared memory (dv_launch_config.shared_bytes), carved in order,
 * each piece aligned for its T; taking past its end is a fault on the host
 * simulator and undefined on a GPU.
 * DV_LOCAL_ARRAY(T, n, N), DV_LOCAL_ARRAY2(T, n, N0, N1): a per-thread
 * array, same length rule.
 * Constant arrays: declared by the host (dv_program_constant), read by
 * name, one module-wide buffer the library fills before the first launch;
 * on OpenCL reachable only in kernel bodies.
 */
#define DV_SHARED(T, n, N) T n[N]
#define DV_SHARED2(T, n, N0, N1) T n[N0][N1]
#define DV_DYN_SHARED_BEGIN() unsigned long long dv__dyn_cur = 0
#define DV_DYN_SHARED_TAKE(T, n, count) T *n = (T *)0
#define DV_LOCAL_ARRAY(T, n, N) T n[N]
#define DV_LOCAL_ARRAY2(T, n, N0, N1) T n[N0][N1]

/* ==== 7. Barriers and fences ============================================== */

/*
 * dv_syncthreads(): the block barrier (every thread of the block, uniform
 * control flow: see the rules above); it orders shared and global memory.
 * dv_barrier(scope): the block barrier ordering the memory of scope, a
 * mask of DV_FENCE_LOCAL (shared) and DV_FENCE_GLOBAL (global): ROC's
 * barrier(scope); CUDA and HIP order both whatever the scope.
 * dv_wavebarrier(): the wave's barrier (CUDA __syncwarp; HIP a wave-scope
 * fence; OpenCL sub_group_barrier, or the work-group barrier without
 * sub-groups, which then needs the whole work-group to reach it).
 * dv_threadfence(): orders the caller's global memory accesses for every
 * thread of the device; dv_threadfence_block(): for the block.
 */
#define DV_FENCE_LOCAL 1  /**< order shared (work-group local) memory */
#define DV_FENCE_GLOBAL 2 /**< order global memory */
void dv_syncthreads(void);
void dv_barrier(int scope);
void dv_wavebarrier(void);
void dv_threadfence(void);
void dv_threadfence_block(void);

/* ==== 8. Wave operations ================================================== */

/*
 * Numba's cuda.shfl_sync, shfl_up_sync, shfl_down_sync, shfl_xor_sync,
 * any_sync, all_sync, ballot_sync, laneid, for a FULL wave: every lane of
 * the caller's wave calls the same operation (the mask is every lane), in
 * uniform control flow; the host simulator reports a lane that does not as
 * DV_ERR_KERNEL_FAULT.
 *   dv_wave_size(): lanes per wave (CUDA 32; HIP warpSize, 64 on CDNA, 32
 *     on RDNA in wave32 mode; OpenCL the sub-group size, 1 without
 *     sub-groups; the host simulator its option host_wave_size, 32 by default);
 *   dv_lane_id(): the caller's lane, its linear thread index in the block
 *     (x fastest) modulo dv_wave_size() (OpenCL: get_sub_group_local_id());
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
 *     (waves of at most 64 lanes; CUDA's 32 bits zero-extended).
 * A wave of one lane (OpenCL without sub-groups, e.g. PoCL 3.1) gives every
 * lane its own value (ballot: its predicate in bit 0): sums over a wave
 * built from shuffles stay right for any wave size.  Blocks whose size is a
 * multiple of the wave size are the portable choice: a GPU's partial last
 * wave is undefined with a full mask (the host gives lanes past the block's
 * end nothing: reads from them return the caller's value, their ballot bits
 * are 0).  HIP's shuffles are the non-_sync ones (every lane of the wave).
 */
int dv_wave_size(void);
int dv_lane_id(void);
#define DV__REF_SHUFFLES(T)                                \
  dv_##T dv_wave_shuffle_idx_##T(dv_##T v, int lane);      \
  dv_##T dv_wave_shuffle_up_##T(dv_##T v, int delta);      \
  dv_##T dv_wave_shuffle_down_##T(dv_##T v, int delta);    \
  dv_##T dv_wave_shuffle_xor_##T(dv_##T v, int mask);
DV__REF_SHUFFLES(i32)
DV__REF_SHUFFLES(u32)
DV__REF_SHUFFLES(i64)
DV__REF_SHUFFLES(u64)
DV__REF_SHUFFLES(f32)
DV__REF_SHUFFLES(f64)
#undef DV__REF_SHUFFLES
int dv_wave_any(int p);
int dv_wave_all(int p);
dv_u64 dv_wave_ballot(int p);

/* ==== 9. Atomics ========================================================== */

/*
 * dv_atomic_OP_T(p, v) on a global or shared T at p; each returns the old
 * value, relaxed (no ordering of other memory: use a fence).
 *   add  i32 u32 i64 u64 f32 f64     *p += v
 *   min, max  i32 u32 i64 u64 f32    *p = min/max(*p, v)  (f32: NaN as
 *                                    CUDA and Numba order it)
 *   and, or, xor  i32 u32 i64 u64    bitwise
 *   xchg  i32 u32 i64 u64 f32 f64    *p = v
 *   inc  u32 u64   Numba's and CUDA's wrapping counter: old >= v ? 0 : old + 1
 *   dec  u32 u64   (old == 0 || old > v) ? v : old - 1
 *   cas  i32 u32 i64 u64 f32 f64     dv_atomic_cas_T(p, cmp, v): *p = v
 *                                    where *p == cmp (floats: by bits)
 * Backends: OpenCL's 64-bit atomics need cl_khr_int64_base_atomics (add,
 * xchg, cas, inc, dec) or cl_khr_int64_extended_atomics (min, max, and, or,
 * xor); without them a use is a compile error naming the missing extension
 * (dv__missing_extension_<name>).  Float add, min, max, xchg and 64-bit
 * float operations on OpenCL, HIP's 64-bit signed min/max, and CUDA's f64
 * add before sm_60 are compare-and-swap loops.
 */
#define DV__REF_ATOMIC(OP, T) dv_##T dv_atomic_##OP##_##T(dv_##T *p, dv_##T v);
#define DV__REF_ATOMIC_CAS(T) dv_##T dv_atomic_cas_##T(dv_##T *p, dv_##T cmp, dv_##T v);
DV__REF_ATOMIC(add, i32) DV__REF_ATOMIC(add, u32) DV__REF_ATOMIC(add, i64)
DV__REF_ATOMIC(add, u64) DV__REF_ATOMIC(add, f32) DV__REF_ATOMIC(add, f64)
DV__REF_ATOMIC(min, i32) DV__REF_ATOMIC(min, u32) DV__REF_ATOMIC(min, i64)
DV__REF_ATOMIC(min, u64) DV__REF_ATOMIC(min, f32)
DV__REF_ATOMIC(max, i32) DV__REF_ATOMIC(max, u32) DV__REF_ATOMIC(max, i64)
DV__REF_ATOMIC(max, u64) DV__REF_ATOMIC(max, f32)
DV__REF_ATOMIC(and, i32) DV__REF_ATOMIC(and, u32) DV__REF_ATOMIC(and, i64)
DV__REF_ATOMIC(and, u64)
DV__REF_ATOMIC(or, i32) DV__REF_ATOMIC(or, u32) DV__REF_ATOMIC(or, i64) DV__REF_ATOMIC(or, u64)
DV__REF_ATOMIC(xor, i32) DV__REF_ATOMIC(xor, u32) DV__REF_ATOMIC(xor, i64)
DV__REF_ATOMIC(xor, u64)
DV__REF_ATOMIC(xchg, i32) DV__REF_ATOMIC(xchg, u32) DV__REF_ATOMIC(xchg, i64)
DV__REF_ATOMIC(xchg, u64) DV__REF_ATOMIC(xchg, f32) DV__REF_ATOMIC(xchg, f64)
DV__REF_ATOMIC(inc, u32) DV__REF_ATOMIC(inc, u64)
DV__REF_ATOMIC(dec, u32) DV__REF_ATOMIC(dec, u64)
DV__REF_ATOMIC_CAS(i32) DV__REF_ATOMIC_CAS(u32) DV__REF_ATOMIC_CAS(i64)
DV__REF_ATOMIC_CAS(u64) DV__REF_ATOMIC_CAS(f32) DV__REF_ATOMIC_CAS(f64)
#undef DV__REF_ATOMIC
#undef DV__REF_ATOMIC_CAS

/* ==== 10. printf ========================================================== */

/*
 * dv_printf(format, ...): printf from a kernel, on every backend.  The
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
 *    The output of a launch that faults is written too.
 */
void dv_printf(const char *format, ...);
#define DV_PRId64 "lld"
#define DV_PRIu64 "llu"
#define DV_PRIx64 "llx"

/* ==== 11. Math ============================================================ */

/*
 * <math.h>'s functions with C's names and signatures on every backend
 * (float versions with the f suffix; OpenCL's overloads are given C's
 * names, nan(tag), sincos(x, &s, &c), abs/labs/llabs as in C), and
 * <float.h>'s and <math.h>'s constants and classification macros
 * (INFINITY, NAN, HUGE_VAL[F], FLT_*, DBL_*, M_* and their _F float forms,
 * FP_* classes with glibc's values, isnan, isinf, isfinite, isnormal,
 * signbit, fpclassify, isgreater and the other comparisons): what a backend
 * lacks (NVRTC and hipRTC have no headers, OpenCL C no fpclassify) is
 * defined by the dialect with its exact value.  One rounding mode (to
 * nearest even) and no floating-point exceptions on OpenCL.
 * docs/kernels.md, "Math in kernels", has the table.
 * DV_MIN(a, b), DV_MAX(a, b): the smaller / larger (each argument is
 * evaluated twice).
 */
/* The float constants OpenCL C spells with _F, and MAXFLOAT, on every backend. */
#ifndef MAXFLOAT
#define MAXFLOAT FLT_MAX
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
#define DV_MIN(a, b) ((a) < (b) ? (a) : (b))
#define DV_MAX(a, b) ((a) > (b) ? (a) : (b))

/* ==== 12. Half precision ================================================== */

/*
 * dv_f16 is IEEE binary16 storage (NumPy's float16, a DV_FLOAT16 array's
 * element: DV_ARRAY(dv_f16, x), x[i] is a dv_f16); arithmetic is done in
 * float.  The conversions are integer code, the same on every backend, and
 * give NumPy's bits for every input: round to nearest even (subnormals
 * included, overflow to infinity), a NaN keeps its sign and the top bits of
 * its payload, quiet or signalling (a payload that would vanish becomes 1).
 * dv_f64_to_f16 rounds once, from the double, as NumPy does (never through
 * float); it needs fp64 on OpenCL.
 */
typedef struct dv_f16 {
  dv_u16 bits;
} dv_f16;
dv_f16 dv_f16_from_bits(dv_u16 bits);
dv_u16 dv_f16_bits(dv_f16 h);
float dv_f16_to_f32(dv_f16 h);
dv_f16 dv_f32_to_f16(float f);
dv_f16 dv_f64_to_f16(double d);

#endif /* DEVARRAY_KERNEL_H */
