/*
 * src/dialect/opencl.h -- the dialect as OpenCL C 1.2+ (clBuildProgram):
 * the OpenCL backend.
 *
 * A part of the kernel dialect's implementation, included by dialect.h only
 * (which is embedded in the library as the text prepended to every kernel
 * source: CMakeLists.txt, cmake/embed.cmake).  The reference for kernel
 * authors is include/devarray/kernel.h.
 */

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
