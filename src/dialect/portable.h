/*
 * src/dialect/portable.h -- the part of the dialect written once, over
 * each backend's primitives (indices, views, wave operations, dv_printf, math
 * constants and classification, half precision).
 *
 * A part of the kernel dialect's implementation, included by dialect.h only
 * (which is embedded in the library as the text prepended to every kernel
 * source: CMakeLists.txt, cmake/embed.cmake).  The reference for kernel
 * authors is include/devarray/kernel.h.
 */

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
