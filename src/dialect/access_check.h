/*
 * src/dialect/access_check.h -- the host simulator's access checks'
 * entry points (kernel_check=on; DV__ACCESS_CHECK): the ThreadSanitizer hooks
 * a checked host module defines, handing each access to the runtime (runtime_abi.h).
 *
 * A part of the kernel dialect's implementation, included by dialect.h only
 * (which is embedded in the library as the text prepended to every kernel
 * source: CMakeLists.txt, cmake/embed.cmake).  The reference for kernel
 * authors is include/devarray/kernel.h.
 */

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
 *
 * The hooks are the same for every kernel and take most of a checked
 * kernel's compile time, so they are compiled once per toolchain state into
 * an object of their own (this text with DV__ACCESS_HOOKS defined and no
 * kernel: toolchain/access_hooks.c) and linked into every checked
 * module beside the kernel's object, where the kernel's calls bind to them
 * (hidden symbols of one link).  The kernel's own unit, without
 * DV__ACCESS_HOOKS, only marks the module as checked.
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
#ifndef DV__ACCESS_HOOKS /* a kernel's unit */
DV__EXPORT const int dv__access_checked = 1; /* the library's sign that the module is */
#else /* the hooks' own unit */
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
#endif /* DV__ACCESS_HOOKS */
#endif /* DV__ACCESS_CHECK */
