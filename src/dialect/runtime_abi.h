/*
 * src/dialect/runtime_abi.h -- the host simulator's private runtime ABI:
 * the table (dv__host_rt) and the per-thread state (dv__hthread) a host module
 * reaches through dv__rt and dv__self.  Shared by host.h (the module's side) and
 * src/backends/host/ (the library's side, which includes dialect.h whole).
 * A change of layout is a change of dv__host_rt.version.
 *
 * A part of the kernel dialect's implementation, included by dialect.h only
 * (which is embedded in the library as the text prepended to every kernel
 * source: CMakeLists.txt, cmake/embed.cmake).  The reference for kernel
 * authors is include/devarray/kernel.h.
 */

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
