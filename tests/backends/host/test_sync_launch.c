/*
 * A synchronous launch (stream NULL) on the host simulator runs on the
 * calling thread when the default stream is idle (src/backends/host/exec/
 * lend.c): the caller's thread is lent the state's executor for the length
 * of the launch, instead of handing the launch to the stream's sleeping
 * worker and waiting for it to come back.
 *
 * What would break each test: the launch still going to the worker
 * (test_runs_on_caller); the calling thread left with the executor, its
 * alternate signal stack or its signal mask changed, or a fault not caught
 * on a thread whose own alternate stack is too small (test_thread_state_kept);
 * a synchronous launch overtaking work queued before it on the default
 * stream (test_order_kept); a fault not returned, or returned and also left
 * behind as the stream's error (test_fault_returned); the lent executor
 * taken by two threads at once (test_concurrent_callers, and TSan's run).
 */
#define _XOPEN_SOURCE 700 /* sigaltstack, SS_DISABLE */
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <time.h>

#include "common.h"
#include "array/array.h"
#include "backends/host/exec/exec_internal.h" /* hk_cur, HK_ALTSTACK */

#if defined(__SANITIZE_THREAD__)
#define SL_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SL_TSAN 1
#endif
#endif

static const char *src_sync =
    /* The address of a thread-local variable: which OS thread ran block 0. */
    "static _Thread_local int dv_sl_here;\n"
    "DV_KERNEL(where, DV_ARRAY(dv_u64, a)) {\n"
    "  DV_BIND(dv_u64, a);\n"
    "  if (dv_global_id(0) == 0) a[0] = (dv_u64)(__UINTPTR_TYPE__)&dv_sl_here;\n"
    "}\n"
    "DV_KERNEL(inc, DV_ARRAY(int, a), int n) {\n"
    "  DV_BIND(int, a);\n"
    "  dv_i64 i = dv_global_id(0);\n"
    "  if (i < n) a[i] += 1;\n"
    "}\n"
    "DV_KERNEL(twice, DV_ARRAY(int, a), int n) {\n"
    "  DV_BIND(int, a);\n"
    "  dv_i64 i = dv_global_id(0);\n"
    "  if (i < n) a[i] *= 2;\n"
    "}\n"
    "DV_KERNEL(crash, DV_ARRAY(int, a), int who) {\n"
    "  DV_BIND(int, a);\n"
    "  int t = dv_thread_idx(0);\n"
    "  if (t == who) *(volatile int *)0 = 1;\n"
    "  a[t] = t;\n"
    "}\n"
    "DV_KERNEL(deep, DV_ARRAY(int, a), int n) {\n"
    "  DV_BIND(int, a);\n"
    "  DV_LOCAL_ARRAY(char, big, 1 << 20);\n"
    "  for (int i = 0; i < n; i++) big[i] = (char)i;\n"
    "  a[0] = big[n / 2];\n"
    "}\n";

static dv_launch_config cfg(uint32_t grid, uint32_t block, dv_stream *s) {
  dv_launch_config c;
  memset(&c, 0, sizeof c);
  c.grid.x = grid;
  c.block.x = block;
  c.stream = s;
  return c;
}

static dv_array *dev_new(dv_context *c, int64_t n, dv_type_id t) {
  dv_array *d = NULL;
  assert_ok(dv_device_array(c, 1, &n, dv_dtype_get(t), NULL, 'C', NULL, &d));
  return d;
}

static void assert_contains(const char *hay, const char *needle) {
  if (!strstr(hay, needle)) fail_msg("expected \"%s\" in: %s", needle, hay);
}

static void finish(dv_context *c, dv_module *m) {
  dv_module_release(m);
  assert_ok(dv_context_check_memory(c));
  assert_ok(dv_context_destroy(c));
}

/* Where kernel `where` ran (the thread-local's address), launched on s
 * (NULL: synchronously) and then waited for. */
static uint64_t where_ran(dv_kernel *k, dv_array *a, dv_stream *s) {
  dv_launch_config lc = cfg(1, 1, s);
  dv_arg args[] = {DV_ARG_ARRAY(a)};
  assert_ok(dv_kernel_launch(k, &lc, 1, args));
  if (s) assert_ok(dv_stream_synchronize(s));
  uint64_t v = 0;
  test_to_host(a, &v);
  assert_true(v != 0);
  return v;
}

typedef struct {
  dv_kernel *k;
  dv_array *a;
  uint64_t at;
} where_arg;

static void *where_thread(void *p) {
  where_arg *w = p;
  w->at = where_ran(w->k, w->a, NULL);
  return NULL;
}

/* A synchronous launch runs on the thread that makes it: from the main
 * thread and from another thread, not on the default stream's worker (where
 * an asynchronous launch on the default stream runs), in both modes. */
static void test_runs_on_caller(void **state) {
  (void)state;
  const char *modes[] = {"host_mode=checked", "host_mode=fast"};
  for (int m = 0; m < 2; m++) {
    dv_context *c = test_context_or_fail("kernel_cache=off", modes[m], NULL);
    dv_module *mod = test_build(c, "sync.dvk", src_sync, NULL, NULL);
    dv_kernel *k = test_kernel(mod, "where");
    dv_array *a = dev_new(c, 1, DV_UINT64);
    uint64_t worker = where_ran(k, a, dv_context_default_stream(c));
    uint64_t here = where_ran(k, a, NULL);
    where_arg w = {k, a, 0};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, where_thread, &w), 0);
    pthread_join(th, NULL);
    if (here == worker || w.at == worker || w.at == here)
      fail_msg("%s: synchronous launches ran at %llx (main) and %llx (a thread), the worker at %llx",
               modes[m], (unsigned long long)here, (unsigned long long)w.at, (unsigned long long)worker);
    /* Again on the main thread: the same thread, the same place. */
    assert_true(where_ran(k, a, NULL) == here);
    dv_array_release(a);
    finish(c, mod);
  }
}

/* ---- the calling thread's state ---------------------------------------------- */

typedef struct {
  stack_t ss;
  sigset_t mask;
  hk_exec *cur;
} thread_state;

static thread_state state_now(void) {
  thread_state t;
  memset(&t, 0, sizeof t);
  assert_int_equal(sigaltstack(NULL, &t.ss), 0);
  assert_int_equal(pthread_sigmask(SIG_SETMASK, NULL, &t.mask), 0);
  t.cur = hk_cur;
  return t;
}

static void assert_state_is(const thread_state *want, const char *when) {
  thread_state now = state_now();
  if (now.cur != want->cur) fail_msg("%s: the thread's executor changed", when);
  if ((now.ss.ss_flags & SS_DISABLE) != (want->ss.ss_flags & SS_DISABLE) ||
      (!(want->ss.ss_flags & SS_DISABLE) && (now.ss.ss_sp != want->ss.ss_sp || now.ss.ss_size != want->ss.ss_size)))
    fail_msg("%s: the thread's alternate signal stack changed (%p, %zu bytes, flags %d; was %p, %zu, %d)", when,
             now.ss.ss_sp, now.ss.ss_size, now.ss.ss_flags, want->ss.ss_sp, want->ss.ss_size, want->ss.ss_flags);
  static const int sigs[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGUSR1};
  for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++)
    if (sigismember(&now.mask, sigs[i]) != sigismember(&want->mask, sigs[i]))
      fail_msg("%s: signal %d's blocking changed", when, sigs[i]);
}

typedef struct {
  dv_module *m;
  dv_array *a;
} state_arg;

/* Synchronous launches that succeed, fault and overflow their fiber's stack
 * with the thread's alternate stack as found, then with one of the
 * program's too small for the simulator (the lent one is used, then the
 * program's put back), then with one big enough (kept), and with the fault
 * signals blocked by the program (unblocked for the launch, blocked again
 * after): each returns what it should and leaves the thread as it was. */
static void launches_keep_state(dv_module *m, dv_array *a) {
  dv_kernel *inc = test_kernel(m, "inc"), *crash = test_kernel(m, "crash"), *deep = test_kernel(m, "deep");
  dv_launch_config lc = cfg(1, 32, NULL);
  dv_arg ok[] = {DV_ARG_ARRAY(a), DV_ARG_I32(-1)};
  dv_arg bad[] = {DV_ARG_ARRAY(a), DV_ARG_I32(5)};
  dv_arg overflow[] = {DV_ARG_ARRAY(a), DV_ARG_I32(1 << 20)};
  thread_state orig = state_now();
  char *small = malloc(16 << 10), *big = malloc(HK_ALTSTACK * 2);
  assert_non_null(small);
  assert_non_null(big);
  for (int round = 0; round < 4; round++) {
    const char *when = round == 0 ? "as found" : round == 1 ? "a small alternate stack"
                     : round == 2 ? "a big alternate stack" : "fault signals blocked";
    if (round == 1 || round == 2) {
      stack_t ss = {.ss_sp = round == 1 ? small : big, .ss_flags = 0,
                    .ss_size = round == 1 ? (size_t)16 << 10 : HK_ALTSTACK * 2};
      assert_int_equal(sigaltstack(&ss, NULL), 0);
    } else if (round == 3) {
      assert_int_equal(sigaltstack(&orig.ss, NULL), 0);
      sigset_t block;
      sigemptyset(&block);
      sigaddset(&block, SIGSEGV), sigaddset(&block, SIGBUS), sigaddset(&block, SIGUSR1);
      assert_int_equal(pthread_sigmask(SIG_BLOCK, &block, NULL), 0);
    }
    thread_state before = state_now();
    assert_ok(dv_kernel_launch(inc, &lc, 2, ok));
    assert_state_is(&before, when);
    assert_status(dv_kernel_launch(crash, &lc, 2, bad), DV_ERR_KERNEL_FAULT);
    assert_contains(dv_last_error(), "kernel crash, block (0,0,0), thread (5,0,0): SIGSEGV");
    assert_state_is(&before, when);
#if !defined(SL_TSAN) /* test_host_kernels.c's test_stack_overflow_named says why */
    assert_status(dv_kernel_launch(deep, &lc, 2, overflow), DV_ERR_KERNEL_FAULT);
    assert_contains(dv_last_error(), "stack overflow");
    assert_state_is(&before, when);
#else
    (void)deep, (void)overflow;
#endif
    assert_ok(dv_kernel_launch(crash, &lc, 2, ok));
    assert_state_is(&before, when);
  }
  assert_int_equal(pthread_sigmask(SIG_SETMASK, &orig.mask, NULL), 0);
  assert_state_is(&orig, "at the end");
  free(small);
  free(big);
}

static void *state_thread(void *p) {
  state_arg *s = p;
  launches_keep_state(s->m, s->a);
  return NULL;
}

static void test_thread_state_kept(void **state) {
  (void)state;
  dv_context *c = test_context_or_fail("kernel_cache=off", "kernel_check=bounds", "host_mode=checked", NULL);
  dv_module *m = test_build(c, "sync.dvk", src_sync, NULL, NULL);
  dv_array *a = dev_new(c, 32, DV_INT32);
  launches_keep_state(m, a);
  /* A thread of the program's own (a check that fails there ends the
   * process, which CTest reports as the suite's failure). */
  state_arg s = {m, a};
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, state_thread, &s), 0);
  pthread_join(th, NULL);
  dv_array_release(a);
  finish(c, m);
}

/* ---- order with work queued before ------------------------------------------- */

typedef struct {
  sem_t go;
  int waited;
} gate;

static void gate_callback(dv_stream *s, dv_status st, void *user) {
  (void)s, (void)st;
  gate *g = user;
  sem_wait(&g->go);
  g->waited = 1;
}

static void *open_gate(void *p) {
  struct timespec ts = {0, 30 * 1000 * 1000};
  nanosleep(&ts, NULL);
  sem_post(&((gate *)p)->go);
  return NULL;
}

/* Work queued on the default stream, held back by a callback that waits 30 ms
 * for another thread: a synchronous launch made meanwhile runs after it
 * ((0 + 1) * 2, not 0 * 2 + 1) and returns only once all of it is done. */
static void test_order_kept(void **state) {
  (void)state;
  dv_context *c = test_context_or_fail("kernel_cache=off", NULL);
  dv_module *m = test_build(c, "sync.dvk", src_sync, NULL, NULL);
  enum { N = 1000 };
  int zero[N] = {0};
  dv_array *a = test_dev_from(c, zero, N, DV_INT32);
  dv_stream *def = dv_context_default_stream(c);
  for (int rep = 0; rep < 3; rep++) {
    gate g;
    assert_int_equal(sem_init(&g.go, 0, 0), 0);
    g.waited = 0;
    assert_ok(dv_stream_add_callback(def, gate_callback, &g));
    dv_launch_config q = cfg(4, 256, def), now = cfg(4, 256, NULL);
    dv_arg args[] = {DV_ARG_ARRAY(a), DV_ARG_I32(N)};
    assert_ok(dv_kernel_launch(test_kernel(m, "inc"), &q, 2, args));
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, open_gate, &g), 0);
    assert_ok(dv_kernel_launch(test_kernel(m, "twice"), &now, 2, args));
    assert_int_equal(g.waited, 1);
    pthread_join(th, NULL);
    sem_destroy(&g.go);
    int r[N];
    test_to_host(a, r);
    int want = rep == 0 ? 2 : rep == 1 ? 6 : 14;
    for (int i = 0; i < N; i++)
      if (r[i] != want) fail_msg("round %d: a[%d] = %d, want %d", rep, i, r[i], want);
  }
  dv_array_release(a);
  finish(c, m);
}

/* ---- faults ------------------------------------------------------------------ */

/* A fault in a synchronous launch is its return and the stream's error no
 * longer: the next synchronize of the default stream and of the context
 * succeed, and the next launch runs. */
static void test_fault_returned(void **state) {
  (void)state;
  dv_context *c = test_context_or_fail("kernel_cache=off", "host_mode=checked", NULL);
  dv_module *m = test_build(c, "sync.dvk", src_sync, NULL, NULL);
  dv_array *a = dev_new(c, 64, DV_INT32);
  dv_launch_config lc = cfg(1, 32, NULL);
  dv_arg bad[] = {DV_ARG_ARRAY(a), DV_ARG_I32(7)}, ok[] = {DV_ARG_ARRAY(a), DV_ARG_I32(-1)};
  assert_status(dv_kernel_launch(test_kernel(m, "crash"), &lc, 2, bad), DV_ERR_KERNEL_FAULT);
  /* checked mode's access check words it (a write outside every array). */
  assert_contains(dv_last_error(), "kernel crash: write outside every array of the launch: address (nil)");
  assert_contains(dv_last_error(), "by thread (7,0,0) of block (0,0,0)");
  assert_ok(dv_stream_synchronize(dv_context_default_stream(c)));
  assert_ok(dv_context_synchronize(c));
  assert_ok(dv_kernel_launch(test_kernel(m, "crash"), &lc, 2, ok));
  /* An asynchronous launch on the default stream faults; once the stream is
   * idle, a synchronous launch that would fault too returns the first fault
   * (the stream's), not its own, and leaves nothing behind. */
  dv_launch_config on_default = cfg(1, 32, dv_context_default_stream(c));
  dv_arg bad9[] = {DV_ARG_ARRAY(a), DV_ARG_I32(9)};
  assert_ok(dv_kernel_launch(test_kernel(m, "crash"), &on_default, 2, bad));
  nanosleep(&(struct timespec){0, 200000000L}, NULL); /* idle by then (were it not, the launch is queued: the same answer) */
  assert_status(dv_kernel_launch(test_kernel(m, "crash"), &lc, 2, bad9), DV_ERR_KERNEL_FAULT);
  assert_contains(dv_last_error(), "by thread (7,0,0) of block (0,0,0)");
  assert_ok(dv_stream_synchronize(dv_context_default_stream(c)));
  assert_ok(dv_kernel_launch(test_kernel(m, "crash"), &lc, 2, ok));
  int r[64];
  test_to_host(a, r);
  for (int i = 0; i < 32; i++) assert_int_equal(r[i], i);
  dv_array_release(a);
  finish(c, m);
}

/* ---- threads at once --------------------------------------------------------- */

enum { CALLERS = 4, ROUNDS = 40, LEN = 300 };

typedef struct {
  dv_kernel *inc;
  dv_array *a;
  dv_stream *s; /* NULL: synchronous launches */
  int ok;
} caller_arg;

static void *caller_thread(void *p) {
  caller_arg *ca = p;
  dv_launch_config lc = cfg(3, 128, ca->s);
  dv_arg args[] = {DV_ARG_ARRAY(ca->a), DV_ARG_I32(LEN)};
  for (int i = 0; i < ROUNDS; i++)
    if (dv_kernel_launch(ca->inc, &lc, 2, args) != DV_OK) return NULL;
  if (ca->s && dv_stream_synchronize(ca->s) != DV_OK) return NULL;
  ca->ok = 1;
  return NULL;
}

/* Threads making synchronous launches at once (one runs on the lent
 * executor, the others' go to the stream's worker), with one more queueing
 * on the default stream: every launch runs once, on its own array. */
static void test_concurrent_callers(void **state) {
  (void)state;
  dv_context *c = test_context_or_fail("kernel_cache=off", NULL);
  dv_module *m = test_build(c, "sync.dvk", src_sync, NULL, NULL);
  int zero[LEN] = {0};
  caller_arg ca[CALLERS + 1];
  pthread_t th[CALLERS + 1];
  for (int i = 0; i <= CALLERS; i++) {
    ca[i] = (caller_arg){test_kernel(m, "inc"), test_dev_from(c, zero, LEN, DV_INT32),
                         i == CALLERS ? dv_context_default_stream(c) : NULL, 0};
    assert_int_equal(pthread_create(&th[i], NULL, caller_thread, &ca[i]), 0);
  }
  for (int i = 0; i <= CALLERS; i++) pthread_join(th[i], NULL);
  for (int i = 0; i <= CALLERS; i++) {
    assert_int_equal(ca[i].ok, 1);
    int r[LEN];
    test_to_host(ca[i].a, r);
    for (int j = 0; j < LEN; j++)
      if (r[j] != ROUNDS) fail_msg("caller %d: a[%d] = %d, want %d", i, j, r[j], ROUNDS);
    dv_array_release(ca[i].a);
  }
  finish(c, m);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_runs_on_caller),
      cmocka_unit_test(test_thread_state_kept),
      cmocka_unit_test(test_order_kept),
      cmocka_unit_test(test_fault_returned),
      cmocka_unit_test(test_concurrent_callers),
  };
  char *host_argv[] = {argv[0], (char *)"host", NULL};
  if (argc < 2) argc = 2, argv = host_argv;
  return test_main(argc, argv, "sync_launch", tests, sizeof tests / sizeof tests[0]);
}
