/*
 * Fiber switching for the host simulator (see fiber.h).
 *
 * Why not only ucontext: glibc's swapcontext saves and restores the signal
 * mask, one rt_sigprocmask system call per switch (strace shows it), and a
 * barrier costs a switch per simulated thread.  The x86-64 switch below
 * saves what the System V ABI says a callee keeps (rbx, rbp, r12-r15, the
 * MXCSR and x87 control words) and nothing else.  Signal masks are restored
 * where they can change: the fault path leaves a signal handler with
 * siglongjmp.  The control words are loaded only when they differ from the
 * running context's (ldmxcsr and fldcw serialise; they almost never
 * differ).  Elsewhere (and with -DDV_FIBER_UCONTEXT) swapcontext is used;
 * measured here, a barrier then costs about 10x more, and AddressSanitizer
 * prints its one-time "doesn't fully support makecontext/swapcontext"
 * warning (its interceptor does, annotations or not) though the fiber
 * annotations keep it correct: both suites pass that way too.
 */
#include "fiber.h"

#include <stdint.h>
#include <string.h>

#if DV_FIBER_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif
#if DV_FIBER_TSAN
#include <sanitizer/tsan_interface.h>
#endif

/* Not instrumented by ThreadSanitizer at all (no function entry either):
 * a fiber's first and last frame, which never returns. */
#if DV_FIBER_TSAN && defined(__clang__)
#define FB_NO_TSAN __attribute__((disable_sanitizer_instrumentation))
#elif DV_FIBER_TSAN
#define FB_NO_TSAN __attribute__((no_sanitize_thread))
#else
#define FB_NO_TSAN
#endif

/* Runs first on a new fiber: tell the sanitizers where we are, then run. */
static void fb_entry(fb_fiber *f) __attribute__((noreturn, used)) FB_NO_TSAN;

#if DV_FIBER_ASM && defined(__x86_64__)
/* void fb_switch_asm(void **save_sp, void *new_sp) */
void fb_switch_asm(void **save_sp, void *new_sp);
void fb_start_asm(void);
__asm__(
    ".text\n"
    ".p2align 4\n"
    ".type fb_switch_asm,@function\n"
    "fb_switch_asm:\n"
    "  pushq %rbp\n"
    "  pushq %rbx\n"
    "  pushq %r12\n"
    "  pushq %r13\n"
    "  pushq %r14\n"
    "  pushq %r15\n"
    "  subq $8, %rsp\n"
    "  stmxcsr (%rsp)\n"
    "  fnstcw 4(%rsp)\n"
    "  movl (%rsp), %eax\n"      /* this context's MXCSR */
    "  movzwl 4(%rsp), %ecx\n"   /* and x87 control word */
    "  movq %rsp, (%rdi)\n"
    "  movq %rsi, %rsp\n"
    /* ldmxcsr and fldcw are slow (they serialise): load them only when the
     * control bits differ.  The MXCSR's low six bits are exception flags,
     * which the ABI does not ask a callee to keep: they follow the OS
     * thread. */
    "  xorl (%rsp), %eax\n"
    "  movzwl 4(%rsp), %edx\n"
    "  xorl %edx, %ecx\n"
    "  andl $-64, %eax\n"
    "  orl %ecx, %eax\n"
    "  jnz 2f\n"
    "1:\n"
    "  addq $8, %rsp\n"
    "  popq %r15\n"
    "  popq %r14\n"
    "  popq %r13\n"
    "  popq %r12\n"
    "  popq %rbx\n"
    "  popq %rbp\n"
    "  ret\n"
    "2:\n"
    "  ldmxcsr (%rsp)\n"
    "  fldcw 4(%rsp)\n"
    "  jmp 1b\n"
    ".size fb_switch_asm, .-fb_switch_asm\n"
    /* A new fiber 'returns' here from its first switch; r12 holds the fiber. */
    ".p2align 4\n"
    ".type fb_start_asm,@function\n"
    "fb_start_asm:\n"
    "  movq %r12, %rdi\n"
    "  xorl %ebp, %ebp\n"
    "  andq $-16, %rsp\n"
    "  call fb_entry\n"
    "  ud2\n"
    ".size fb_start_asm, .-fb_start_asm\n");

static void fb_ctx_make(fb_fiber *f) {
  uintptr_t top = ((uintptr_t)(f->stack_lo + f->stack_size)) & ~(uintptr_t)15;
  uint64_t *sp = (uint64_t *)top;
  *--sp = 0;                        /* padding: keeps the frame 16-byte aligned */
  *--sp = (uint64_t)(uintptr_t)fb_start_asm; /* return address of the first switch */
  *--sp = 0;                        /* rbp */
  *--sp = 0;                        /* rbx */
  *--sp = (uint64_t)(uintptr_t)f;   /* r12: the fiber */
  *--sp = 0;                        /* r13 */
  *--sp = 0;                        /* r14 */
  *--sp = 0;                        /* r15 */
  *--sp = (uint64_t)0x037F << 32 | 0x1F80; /* x87 control word, MXCSR: the defaults */
  f->sp = sp;
}

/* Always inlined: fb_entry's last switch must add no instrumented frame. */
static inline __attribute__((always_inline)) void fb_ctx_switch(fb_fiber *from, fb_fiber *to) {
  fb_switch_asm(&from->sp, to->sp);
}

#else /* ucontext */
FB_NO_TSAN static void fb_start_uc(unsigned hi, unsigned lo) {
  uintptr_t p = ((uintptr_t)hi << 16 << 16) | (uintptr_t)lo;
  fb_entry((fb_fiber *)p);
}

static void fb_ctx_make(fb_fiber *f) {
  getcontext(&f->uc);
  f->uc.uc_stack.ss_sp = f->stack_lo;
  f->uc.uc_stack.ss_size = f->stack_size;
  f->uc.uc_link = NULL;
  uintptr_t p = (uintptr_t)f;
  makecontext(&f->uc, (void (*)(void))fb_start_uc, 2, (unsigned)(p >> 16 >> 16),
              (unsigned)(p & 0xFFFFFFFFu));
}

static inline __attribute__((always_inline)) void fb_ctx_switch(fb_fiber *from, fb_fiber *to) {
  swapcontext(&from->uc, &to->uc);
}
#endif

void fb_sched_init(fb_fiber *sched) {
  memset(sched, 0, sizeof *sched);
#if DV_FIBER_TSAN
  sched->tsan = __tsan_get_current_fiber();
#endif
}

void fb_sched_fini(fb_fiber *sched) { (void)sched; }

void fb_sched_bind(fb_fiber *sched) {
#if DV_FIBER_TSAN
  sched->tsan = __tsan_get_current_fiber();
#endif
  (void)sched;
}

int fb_prepare(fb_fiber *f, fb_fiber *sched, unsigned char *stack_lo, size_t size, fb_fn fn,
               void *arg) {
  f->stack_lo = stack_lo;
  f->stack_size = size;
  f->fn = fn;
  f->arg = arg;
  f->sched = sched;
  f->asan_fake = NULL;
#if DV_FIBER_TSAN
  if (!f->tsan) {
    f->tsan = __tsan_create_fiber(0);
    if (!f->tsan) return -1;
    f->tsan_owned = true;
  }
#endif
#if DV_FIBER_ASAN
  /* A fiber that ended left the redzones of its last frames (entry, body,
   * yield: the top of its stack) poisoned; deeper frames returned. */
  size_t top = size < ((size_t)32 << 10) ? size : ((size_t)32 << 10);
  ASAN_UNPOISON_MEMORY_REGION(stack_lo + size - top, top);
#endif
  fb_ctx_make(f);
  return 0;
}

void fb_release(fb_fiber *f) {
#if DV_FIBER_TSAN
  if (f->tsan && f->tsan_owned) __tsan_destroy_fiber(f->tsan);
#endif
  f->tsan = NULL;
  f->tsan_owned = false;
}

FB_NO_TSAN static void fb_entry(fb_fiber *f) {
#if DV_FIBER_ASAN
  /* First arrival: no fake stack of ours yet; learn the scheduler's stack. */
  const void *lo = NULL;
  size_t sz = 0;
  __sanitizer_finish_switch_fiber(NULL, &lo, &sz);
  f->sched->stack_lo = (unsigned char *)(uintptr_t)lo;
  f->sched->stack_size = sz;
#endif
  f->fn(f->arg);
  /* fn returned: the fiber ends, switching away for good.  Here, not in an
   * instrumented fb_yield: a frame that never returns stays on
   * ThreadSanitizer's shadow call stack of the fiber, which is reused for
   * the next block, so such frames piled up, three a block, until TSan's
   * stack depot failed at 65,536 (in the switch out of a finished runner:
   * the hang of issue 22 #5 under TSan).  fn's own frame has returned. */
#if DV_FIBER_ASAN
  __sanitizer_start_switch_fiber(NULL, f->sched->stack_lo, f->sched->stack_size);
#endif
#if DV_FIBER_TSAN
  __tsan_switch_to_fiber(f->sched->tsan, 0);
#endif
  fb_ctx_switch(f, f->sched);
  __builtin_trap(); /* never resumed */
}

void fb_yield(fb_fiber *f, bool exiting) {
  fb_fiber *sched = f->sched;
#if DV_FIBER_ASAN
  __sanitizer_start_switch_fiber(exiting ? NULL : &f->asan_fake, sched->stack_lo,
                                 sched->stack_size);
#else
  (void)exiting;
#endif
#if DV_FIBER_TSAN
  __tsan_switch_to_fiber(sched->tsan, 0);
#endif
  fb_ctx_switch(f, sched);
#if DV_FIBER_ASAN
  /* Resumed by the scheduler or by another fiber (fb_switch): the
   * scheduler's stack is the one fb_entry learnt. */
  __sanitizer_finish_switch_fiber(f->asan_fake, NULL, NULL);
#endif
}

void fb_switch(fb_fiber *from, fb_fiber *to) {
#if DV_FIBER_ASAN
  __sanitizer_start_switch_fiber(&from->asan_fake, to->stack_lo, to->stack_size);
#endif
#if DV_FIBER_TSAN
  __tsan_switch_to_fiber(to->tsan, 0);
#endif
  fb_ctx_switch(from, to);
#if DV_FIBER_ASAN
  __sanitizer_finish_switch_fiber(from->asan_fake, NULL, NULL);
#endif
}

/* The scheduler resuming a fiber is one fiber switching to another. */
void fb_resume(fb_fiber *sched, fb_fiber *f) { fb_switch(sched, f); }

void fb_abandon(fb_fiber *f) {
#if DV_FIBER_ASAN
  /* Frames that never returned left their redzones poisoned. */
  ASAN_UNPOISON_MEMORY_REGION(f->stack_lo, f->stack_size);
  f->asan_fake = NULL;
#endif
#if DV_FIBER_TSAN
  /* Its shadow call stack still holds the frames that never returned. */
  fb_release(f);
#endif
  (void)f;
}

void fb_escape(fb_fiber *f) {
#if DV_FIBER_ASAN
  __sanitizer_start_switch_fiber(NULL, f->sched->stack_lo, f->sched->stack_size);
#endif
#if DV_FIBER_TSAN
  __tsan_switch_to_fiber(f->sched->tsan, 0);
#endif
  (void)f;
}

void fb_escaped(fb_fiber *sched) {
#if DV_FIBER_ASAN
  __sanitizer_finish_switch_fiber(NULL, NULL, NULL);
#endif
  (void)sched;
}
