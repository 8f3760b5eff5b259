/*
 * src/dialect/host.h -- the dialect as C11 for the host simulator (the
 * system C compiler; src/backends/host/ builds and runs the module).  The
 * runtime it calls is in runtime_abi.h, the access checks' entry points in
 * access_check.h.
 *
 * A part of the kernel dialect's implementation, included by dialect.h only
 * (which is embedded in the library as the text prepended to every kernel
 * source: CMakeLists.txt, cmake/embed.cmake).  The reference for kernel
 * authors is include/devarray/kernel.h.
 */

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

#include "runtime_abi.h"
#include "access_check.h"

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
