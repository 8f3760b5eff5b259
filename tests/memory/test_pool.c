/* The pool: stream-ordered reuse, cross-stream reuse only after the fence,
 * split/coalesce, trim, out-of-memory release-and-retry, statistics, the
 * snapshot and CSV log, a third-party manager, and a randomized model test. */
#define _DEFAULT_SOURCE
#include <pthread.h>
#include <unistd.h>

#include "common.h"

static dv_context *pool_ctx(const char *extra) {
  dv_context *c;
  assert_ok(test_context(&c, "memory_manager=pool", extra, NULL));
  assert_string_equal(dv_context_memory_manager(c), "pool");
  return c;
}

static dv_array *bytes_on(dv_context *c, int64_t n, dv_stream *s) {
  dv_array *a;
  assert_ok(dv_device_array(c, 1, &n, dv_dtype_get(DV_UINT8), NULL, 'C', s, &a));
  return a;
}

/* The device address of an array's first element (white-box: block identity). */
#include "array/array.h"
static uintptr_t addr_of(dv_array *a) { return (uintptr_t)a->alloc->buf + a->alloc->buf_offset + (uintptr_t)a->offset; }

static void release_now(dv_context *c, dv_array *a) {
  dv_array_release(a);
  assert_ok(dv_context_flush_deallocs(c));
}

static void test_same_stream_reuse(void **state) {
  (void)state;
  dv_context *c = pool_ctx(NULL);
  dv_stream *s;
  assert_ok(dv_stream_create(c, 0, &s));
  for (int64_t n = 1000; n <= (int64_t)8 << 20; n *= 7) {
    dv_array *a = bytes_on(c, n, s);
    uintptr_t x = addr_of(a);
    assert_ok(dv_array_memset(a, 1, s)); /* work still queued when freed is fine */
    release_now(c, a);
    dv_array *b = bytes_on(c, n, s);
    assert_int_equal(addr_of(b), x); /* at once, on the same stream */
    release_now(c, b);
  }
  dv_mm_stats st;
  assert_ok(dv_memory_stats(c, &st));
  assert_true(st.hits >= 5);
  assert_int_equal(st.allocated.current, 0);
  dv_stream_release(s);
  assert_ok(dv_context_destroy(c));
}

typedef struct gate {
  pthread_mutex_t m;
  pthread_cond_t cv;
  int open;
} gate;
static void gate_cb(dv_stream *s, dv_status st, void *u) {
  (void)s, (void)st;
  gate *g = u;
  pthread_mutex_lock(&g->m);
  while (!g->open) pthread_cond_wait(&g->cv, &g->m);
  pthread_mutex_unlock(&g->m);
}

/* A block freed on stream A while A's work on it is still queued must not be
 * given to stream B until A has passed the free; the simulator's real
 * asynchrony makes a wrong early reuse visible as corrupted data. */
static void test_cross_stream_reuse_waits(void **state) {
  (void)state;
  dv_context *c = pool_ctx(NULL);
  dv_stream *a, *b;
  assert_ok(dv_stream_create(c, 0, &a));
  assert_ok(dv_stream_create(c, 0, &b));
  enum { N = 4096 };
  uint8_t *out = malloc(N), *src = malloc(N);
  memset(src, 7, N);
  memset(out, 0, N);
  int64_t n = N;
  dv_array *hs, *ho;
  assert_ok(dv_host_array_wrap(c, src, 1, &n, dv_dtype_get(DV_UINT8), NULL, &hs));
  assert_ok(dv_host_array_wrap(c, out, 1, &n, dv_dtype_get(DV_UINT8), NULL, &ho));
  dv_array *x = bytes_on(c, N, a);
  assert_ok(dv_copy_to_device(x, hs, NULL)); /* x = 7s */
  uintptr_t xa = addr_of(x);
  gate g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
  assert_ok(dv_stream_add_callback(a, gate_cb, &g));
  assert_ok(dv_copy_to_host(x, ho, a, NULL)); /* queued behind the gate */
  release_now(c, x);                          /* freed on A, A's read still pending */
  dv_array *y = bytes_on(c, N, b);            /* must not be x's block */
  assert_true(addr_of(y) != xa);
  assert_ok(dv_array_memset(y, 0xEE, b)); /* runs at once on B */
  assert_ok(dv_stream_synchronize(b));
  pthread_mutex_lock(&g.m);
  g.open = 1;
  pthread_cond_broadcast(&g.cv);
  pthread_mutex_unlock(&g.m);
  assert_ok(dv_stream_synchronize(a));
  for (int i = 0; i < N; i++) assert_int_equal(out[i], 7); /* A read the data it wrote */
  /* once A has passed the free, B may have the block (found by a query of
   * the fence, never by a host synchronize inside the pool) */
  dv_array *z[50] = {0};
  int reused = 0, k = 0;
  for (; k < 50 && !reused; k++) {
    z[k] = bytes_on(c, N, b); /* kept alive, so that x's block is the candidate */
    reused = addr_of(z[k]) == xa;
  }
  assert_true(reused);
  for (int i = 0; i < k; i++) dv_array_release(z[i]);
  dv_array_release(y);
  dv_array_release(hs), dv_array_release(ho);
  dv_stream_release(a), dv_stream_release(b);
  free(out), free(src);
  assert_ok(dv_context_destroy(c));
}

/*
 * Issue 22, item 1: work queued on another stream than an array's allocation
 * stream still uses the array when it is released.  The released block goes
 * back to the allocation stream, where the pool may hand it out again at
 * once; the library must order that stream after the queued use, or the use
 * reads the new owner's data or writes into it.
 *
 * Each case: `a` on stream A (its allocation stream), filled with 1s; a use
 * of `a` queued on stream B behind a gate (a callback that blocks B); `a`
 * released and flushed; `b` allocated on A (the same block, same-stream
 * reuse) and set to 0x77 bytes on A; then the gate opens.  Without the
 * ordering, A's memset runs while B is held (the test waits for it, up to
 * 200 ms), and B's use then runs on b's memory.
 */
typedef enum use_kind {
  USE_TO_HOST,         /* dv_copy_to_host(a, h, B): reads a */
  USE_TO_HOST_STRIDED, /* every other element of a, through the planner */
  USE_FROM_HOST,       /* dv_copy_to_device(a, h, B): writes a */
  USE_D2D_SRC,         /* dv_array_copy(o, a, B): reads a */
  USE_D2D_DST,         /* dv_array_copy(a, o, B): writes a */
  USE_MEMSET,          /* dv_array_memset(a, 5, B): writes a */
  USE_SET_ITEM,        /* dv_array_set_item(a, {7}, 9, B): writes a */
  USE_GET_ITEM,        /* dv_array_get_item(a, {7}, &x, B): reads a */
  USE_RAVEL,           /* dv_array_ravel of a strided view of a on B: reads a */
  USE_KINDS
} use_kind;
static const char *const use_names[USE_KINDS] = {"copy to host", "strided copy to host", "copy to device",
                                                  "device copy from a", "device copy into a", "memset",
                                                  "set_item", "get_item", "ravel"};

static void gate_open(gate *g) {
  pthread_mutex_lock(&g->m);
  g->open = 1;
  pthread_cond_broadcast(&g->cv);
  pthread_mutex_unlock(&g->m);
}

static dv_array *ints_on(dv_context *c, int64_t n, dv_stream *s) {
  dv_array *a;
  assert_ok(dv_device_array(c, 1, &n, dv_dtype_get(DV_INT32), NULL, 'C', s, &a));
  return a;
}

/* A host array of n int32 (pinned: a device-to-pageable copy is synchronous
 * on CUDA, which would wait for the gate). */
static dv_array *host_ints(dv_context *c, int64_t n, int32_t v) {
  dv_array *h;
  assert_ok(dv_pinned_array(c, 1, &n, dv_dtype_get(DV_INT32), NULL, 'C', &h));
  int32_t *p;
  assert_ok(dv_array_host_data(h, (void **)&p));
  for (int64_t i = 0; i < n; i++) p[i] = v;
  return h;
}

static void expect_ints(dv_array *a, int32_t v, const char *what, const char *use) {
  int64_t n = dv_array_size(a);
  dv_context *c = dv_array_context(a);
  dv_array *h = host_ints(c, n, 0);
  assert_ok(dv_copy_to_host(a, h, NULL, NULL));
  int32_t *p;
  assert_ok(dv_array_host_data(h, (void **)&p));
  for (int64_t i = 0; i < n; i++)
    if (p[i] != v) fail_msg("%s: %s[%lld] is 0x%08x, not 0x%08x", use, what, (long long)i, (unsigned)p[i], (unsigned)v);
  dv_array_release(h);
}

static void check_use_then_reuse(use_kind k) {
  dv_context *c = pool_ctx(NULL);
  dv_stream *A, *B;
  assert_ok(dv_stream_create(c, 0, &A));
  assert_ok(dv_stream_create(c, 0, &B));
  enum { N = 4096 };
  int64_t half = N / 2;
  dv_array *a = ints_on(c, N, A);
  dv_array *ones = host_ints(c, N, 1);
  assert_ok(dv_copy_to_device(a, ones, A));
  dv_array *o = ints_on(c, N, B); /* the other side of device copies: 3s */
  dv_array *threes = host_ints(c, N, 3);
  assert_ok(dv_copy_to_device(o, threes, B));
  dv_array *h = host_ints(c, N, k == USE_FROM_HOST ? 2 : 0);
  dv_array *hh = host_ints(c, half, 0), *view = NULL, *rav = NULL;
  assert_ok(dv_context_synchronize(c));
  uintptr_t at = addr_of(a);
  int32_t item = 0, nine = 9;
  int64_t seven = 7;

  gate g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
  assert_ok(dv_stream_add_callback(B, gate_cb, &g));
  switch (k) { /* queued on B behind the gate */
    case USE_TO_HOST: assert_ok(dv_copy_to_host(a, h, B, NULL)); break;
    case USE_TO_HOST_STRIDED: {
      dv_index ix = {.start = 0, .stop = N, .step = 2};
      assert_ok(dv_array_slice(a, 1, &ix, &view));
      assert_ok(dv_copy_to_host(view, hh, B, NULL));
      break;
    }
    case USE_FROM_HOST: assert_ok(dv_copy_to_device(a, h, B)); break;
    case USE_D2D_SRC: assert_ok(dv_array_copy(o, a, B)); break;
    case USE_D2D_DST: assert_ok(dv_array_copy(a, o, B)); break;
    case USE_MEMSET: assert_ok(dv_array_memset(a, 5, B)); break;
    case USE_SET_ITEM: assert_ok(dv_array_set_item(a, &seven, &nine, sizeof nine, B)); break;
    case USE_GET_ITEM: assert_ok(dv_array_get_item(a, &seven, &item, sizeof item, B)); break;
    case USE_RAVEL: {
      dv_index ix = {.start = 0, .stop = N, .step = 2};
      assert_ok(dv_array_slice(a, 1, &ix, &view));
      assert_ok(dv_array_ravel(view, 'C', 0, B, &rav)); /* a new array on B, read from a */
      break;
    }
    case USE_KINDS: break;
  }
  dv_array_release(view);
  release_now(c, a); /* B's use is still queued */
  dv_array *b = ints_on(c, N, A);
  assert_true(addr_of(b) == at); /* a's block, at once, on its stream */
  assert_ok(dv_array_memset(b, 0x77, A));
  /* Unordered, A's memset completes now; give it the time to. */
  for (int i = 0; i < 200 && dv_stream_query(A) == DV_ERR_NOT_READY; i++) usleep(1000);
  gate_open(&g);
  assert_ok(dv_context_synchronize(c));
  const char *use = use_names[k];
  expect_ints(b, 0x77777777, "the new array", use); /* B's use wrote nothing into it */
  int32_t *p;
  switch (k) { /* ... and read a's data, not b's */
    case USE_TO_HOST:
      assert_ok(dv_array_host_data(h, (void **)&p));
      for (int i = 0; i < N; i++)
        if (p[i] != 1) fail_msg("%s: h[%d] is 0x%08x, not 1", use, i, (unsigned)p[i]);
      break;
    case USE_TO_HOST_STRIDED:
      assert_ok(dv_array_host_data(hh, (void **)&p));
      for (int i = 0; i < N / 2; i++)
        if (p[i] != 1) fail_msg("%s: h[%d] is 0x%08x, not 1", use, i, (unsigned)p[i]);
      break;
    case USE_D2D_SRC: expect_ints(o, 1, "the copy", use); break;
    case USE_GET_ITEM:
      if (item != 1) fail_msg("%s: read 0x%08x, not 1", use, (unsigned)item);
      break;
    case USE_RAVEL: expect_ints(rav, 1, "the ravelled copy", use); break;
    default: break;
  }
  dv_array_release(rav);
  dv_array_release(b), dv_array_release(o), dv_array_release(h), dv_array_release(hh);
  dv_array_release(ones), dv_array_release(threes);
  dv_stream_release(A), dv_stream_release(B);
  assert_ok(dv_context_check_memory(c));
  assert_ok(dv_context_destroy(c));
}

static void test_use_on_other_stream_then_reuse(void **state) { check_use_then_reuse(*(use_kind *)*state); }
static use_kind g_uses[USE_KINDS] = {USE_TO_HOST, USE_TO_HOST_STRIDED, USE_FROM_HOST, USE_D2D_SRC, USE_D2D_DST,
                                     USE_MEMSET, USE_SET_ITEM, USE_GET_ITEM, USE_RAVEL};
#define USE_TEST(k, name) {"test_use_on_other_stream_then_reuse: " name, test_use_on_other_stream_then_reuse, NULL, NULL, &g_uses[k]}

/* Issue 22's reproducer: the simulator's delay makes queued work lag; no gate. */
static void test_issue22_reproducer(void **state) {
  (void)state;
  if (strcmp(g_backend, "host") != 0) skip(); /* host_delay_us is the simulator's */
  dv_context *ctx = pool_ctx("host_delay_us=20000");
  dv_stream *sa, *sb;
  assert_ok(dv_stream_create(ctx, 0, &sa));
  assert_ok(dv_stream_create(ctx, 0, &sb));
  enum { N = 1024 };
  int32_t hv[N];
  int64_t n = N;
  dv_array *a, *b, *h;
  assert_ok(dv_device_array(ctx, 1, &n, dv_dtype_get(DV_INT32), NULL, 'C', sa, &a));
  assert_ok(dv_host_array_wrap(ctx, hv, 1, &n, dv_dtype_get(DV_INT32), NULL, &h));
  for (int i = 0; i < N; i++) hv[i] = 1;
  assert_ok(dv_copy_to_device(a, h, sa));
  assert_ok(dv_stream_synchronize(sa));
  memset(hv, 0, sizeof hv);
  /* sb is busy: its copy starts one delay after sa's memset below (with sb
   * idle both start together, and which runs first is a race) */
  dv_array *busy = bytes_on(ctx, 64, sb);
  assert_ok(dv_array_memset(busy, 0, sb));
  assert_ok(dv_copy_to_host(a, h, sb, NULL)); /* queued on sb: reads a */
  dv_array_release(a);
  assert_ok(dv_context_flush_deallocs(ctx));
  assert_ok(dv_device_array(ctx, 1, &n, dv_dtype_get(DV_INT32), NULL, 'C', sa, &b)); /* gets a's block */
  assert_ok(dv_array_memset(b, 0x77, sa));
  assert_ok(dv_stream_synchronize(sb));
  for (int i = 0; i < N; i++)
    if (hv[i] != 1) fail_msg("h[%d] is 0x%08x, not 1 (the direct manager's answer)", i, (unsigned)hv[i]);
  assert_ok(dv_context_synchronize(ctx));
  dv_array_release(b), dv_array_release(h), dv_array_release(busy);
  dv_stream_release(sa), dv_stream_release(sb);
  assert_ok(dv_context_destroy(ctx));
}

/*
 * Randomized, for item 1: several streams, the pool, random allocations,
 * memsets, copies (device to host, host to device, device to device, dense
 * and strided) and releases on random streams, and flushes; streams are
 * held back at random (a callback that sleeps) and, on the simulator, every
 * queued operation is delayed, so queued work lags behind the calls.  The
 * program is race-free as a user writes it: two uses of one live array on
 * different streams are ordered by the test's own events, but nothing orders
 * a released array's queued work before its block's next owner: that is the
 * library's promise.  Every byte read back is checked against a model.
 * DV_POOL_RACE_SEEDS and DV_POOL_RACE_OPS scale it (defaults: 12 seeds of
 * 250 operations, a few seconds).
 */
enum { RACE_LIVE = 8, RACE_NS = 3, RACE_PEND = 96 };
typedef struct race_slot {
  dv_array *a;
  dv_stream *owner; /* the stream it was allocated for */
  dv_stream *last;  /* the stream of the last work queued on it */
  uint8_t *model;
  int64_t n;
} race_slot;
typedef struct race_read {
  dv_array *h;
  uint8_t *expect; /* NULL: an upload's source, kept until it is done */
  void *own;       /* pageable memory under h, freed with it */
} race_read;
typedef struct race {
  dv_context *c;
  dv_stream *s[RACE_NS]; /* s[0]: the context's default stream, explicitly */
  race_slot slot[RACE_LIVE];
  race_read rd[RACE_PEND];
  int nrd;
  unsigned long seed;
  long op;
} race;

static void race_sleep_cb(dv_stream *s, dv_status st, void *u) {
  (void)s, (void)st;
  usleep((useconds_t)(uintptr_t)u);
}

/* Now and then, hold s back a while before queuing work on it. */
static void race_hold(race *r, dv_stream *s) {
  (void)r;
  if (rnd() % 4 == 0)
    assert_ok(dv_stream_add_callback(s, race_sleep_cb, (void *)(uintptr_t)rnd_range(200, 3000)));
}

/* The caller's ordering: work on `s` that uses slot k waits for k's last work. */
static void race_order(race *r, int k, dv_stream *s) {
  race_slot *x = &r->slot[k];
  if (x->last != s) {
    dv_event *e;
    assert_ok(dv_event_create(r->c, 0, &e));
    assert_ok(dv_event_record(e, x->last));
    assert_ok(dv_stream_wait_event(s, e));
    dv_event_release(e);
  }
  x->last = s;
}

/* A host array of n bytes, pinned or pageable at random. */
static race_read race_host(race *r, int64_t n) {
  race_read h = {0};
  if (rnd() % 2) {
    assert_ok(dv_pinned_array(r->c, 1, &n, dv_dtype_get(DV_UINT8), NULL, 'C', &h.h));
  } else {
    h.own = malloc((size_t)n);
    assert_ok(dv_host_array_wrap(r->c, h.own, 1, &n, dv_dtype_get(DV_UINT8), NULL, &h.h));
  }
  return h;
}
static uint8_t *host_bytes(dv_array *h) {
  void *p;
  assert_ok(dv_array_host_data(h, &p));
  return p;
}

/* A view of slot k: all of it, or every other byte. */
static dv_array *race_view(race *r, int k, bool strided, int64_t m) {
  dv_index ix = {.start = 0, .stop = strided ? 2 * m - 1 : m, .step = strided ? 2 : 1};
  dv_array *v;
  assert_ok(dv_array_slice(r->slot[k].a, 1, &ix, &v));
  return v;
}

/* Wait for everything, then check the reads and every live array. */
static void race_check(race *r) {
  assert_ok(dv_context_synchronize(r->c));
  for (int i = 0; i < r->nrd; i++) {
    race_read *x = &r->rd[i];
    if (x->expect) {
      const uint8_t *got = host_bytes(x->h);
      int64_t n = dv_array_size(x->h);
      for (int64_t j = 0; j < n; j++)
        if (got[j] != x->expect[j])
          fail_msg("seed %lu, before op %ld: a read back has byte %lld = 0x%02x, not 0x%02x (the "
                   "array's block went to a new owner while the read was queued)",
                   r->seed, r->op, (long long)j, got[j], x->expect[j]);
    }
    dv_array_release(x->h);
    free(x->own), free(x->expect);
  }
  r->nrd = 0;
  for (int k = 0; k < RACE_LIVE; k++) {
    race_slot *x = &r->slot[k];
    if (!x->a) continue;
    uint8_t *got = malloc((size_t)x->n);
    dv_array *h;
    assert_ok(dv_host_array_wrap(r->c, got, 1, &x->n, dv_dtype_get(DV_UINT8), NULL, &h));
    assert_ok(dv_copy_to_host(x->a, h, NULL, NULL));
    for (int64_t j = 0; j < x->n; j++)
      if (got[j] != x->model[j])
        fail_msg("seed %lu, before op %ld: live array %d byte %lld = 0x%02x, not 0x%02x (work queued "
                 "on a released array wrote into it)",
                 r->seed, r->op, k, (long long)j, got[j], x->model[j]);
    dv_array_release(h);
    free(got);
  }
}

static void race_run(unsigned long seed, long ops) {
  race r;
  memset(&r, 0, sizeof r);
  r.seed = seed;
  rnd_seed(seed * 0x9E3779B97F4A7C15ull + 1);
  if (strcmp(g_backend, "host") == 0)
    assert_ok(test_context(&r.c, "memory_manager=pool", "host_delay_us=100", NULL));
  else
    r.c = pool_ctx(NULL);
  r.s[0] = dv_context_default_stream(r.c);
  for (int i = 1; i < RACE_NS; i++) assert_ok(dv_stream_create(r.c, 0, &r.s[i]));
  static const int64_t sizes[] = {1, 100, 512, 4096, 5000, 65536};
  /* The pattern of item 1 comes up often: the slot just used is released
   * next, and a new array often has the size and stream of the last one
   * released (the pool then hands its block out at once). */
  int prev = -1;
  int64_t rel_n = 0;
  dv_stream *rel_s = NULL;
  for (r.op = 0; r.op < ops; r.op++) {
    if (r.nrd > RACE_PEND - 4 || r.op % 80 == 79) race_check(&r);
    int k = prev >= 0 && rnd() % 4 == 0 ? prev : (int)(rnd() % RACE_LIVE);
    race_slot *x = &r.slot[k];
    dv_stream *s = r.s[rnd() % RACE_NS];
    unsigned what = k == prev ? 0 : (unsigned)(rnd() % 100);
    prev = k;
    if (!x->a) { /* allocate on s, set on s */
      x->n = rnd() % 25 == 0 ? (int64_t)rnd_range(1 << 20, 3 << 20) : sizes[rnd() % 6];
      if (rel_s && rnd() % 2) x->n = rel_n, s = rel_s;
      assert_ok(dv_device_array(r.c, 1, &x->n, dv_dtype_get(DV_UINT8), NULL, 'C', s, &x->a));
      x->owner = s;
      prev = -1;
      x->model = malloc((size_t)x->n);
      uint8_t v = (uint8_t)rnd();
      memset(x->model, v, (size_t)x->n);
      assert_ok(dv_array_memset(x->a, v, s));
      x->last = s;
    } else if (what < 14) { /* release, whatever is still queued on it */
      rel_n = x->n, rel_s = x->owner;
      dv_array_release(x->a);
      free(x->model);
      memset(x, 0, sizeof *x);
      if (rnd() % 2) assert_ok(dv_context_flush_deallocs(r.c)); /* the block is free at once */
      prev = -1;
    } else if (what < 28) { /* memset */
      race_hold(&r, s);
      race_order(&r, k, s);
      uint8_t v = (uint8_t)rnd();
      memset(x->model, v, (size_t)x->n);
      assert_ok(dv_array_memset(x->a, v, s));
    } else if (what < 50) { /* read it back on s, checked later */
      race_hold(&r, s);
      race_order(&r, k, s);
      bool strided = x->n > 1 && rnd() % 3 == 0;
      int64_t m = strided ? (x->n + 1) / 2 : x->n;
      race_read h = race_host(&r, m);
      h.expect = malloc((size_t)m);
      for (int64_t j = 0; j < m; j++) h.expect[j] = x->model[strided ? 2 * j : j];
      dv_array *v = strided ? race_view(&r, k, true, m) : dv_array_retain(x->a);
      assert_ok(dv_copy_to_host(v, h.h, s, NULL));
      dv_array_release(v);
      r.rd[r.nrd++] = h;
    } else if (what < 66) { /* write it from the host on s */
      race_hold(&r, s);
      race_order(&r, k, s);
      bool strided = x->n > 1 && rnd() % 3 == 0;
      int64_t m = strided ? (x->n + 1) / 2 : x->n;
      race_read h = race_host(&r, m);
      uint8_t *p = host_bytes(h.h);
      for (int64_t j = 0; j < m; j++) p[j] = (uint8_t)rnd(), x->model[strided ? 2 * j : j] = p[j];
      dv_array *v = strided ? race_view(&r, k, true, m) : dv_array_retain(x->a);
      assert_ok(dv_copy_to_device(v, h.h, s));
      dv_array_release(v);
      r.rd[r.nrd++] = h;
    } else if (what < 82) { /* copy slot k2 into slot k on s */
      int k2 = (int)(rnd() % RACE_LIVE);
      race_slot *y = &r.slot[k2];
      if (k2 == k || !y->a) continue;
      race_hold(&r, s);
      race_order(&r, k, s);
      race_order(&r, k2, s);
      bool strided = rnd() % 3 == 0;
      int64_t m = x->n < y->n ? x->n : y->n;
      if (strided) m = (m + 1) / 2;
      dv_array *dv = race_view(&r, k, strided, m), *sv = race_view(&r, k2, strided, m);
      for (int64_t j = 0; j < m; j++) x->model[strided ? 2 * j : j] = y->model[strided ? 2 * j : j];
      assert_ok(dv_array_copy(dv, sv, s));
      dv_array_release(dv), dv_array_release(sv);
    } else if (what < 90) { /* hold s back a while */
      assert_ok(dv_stream_add_callback(s, race_sleep_cb, (void *)(uintptr_t)rnd_range(200, 4000)));
    } else {
      assert_ok(dv_context_flush_deallocs(r.c));
    }
  }
  race_check(&r);
  for (int k = 0; k < RACE_LIVE; k++) dv_array_release(r.slot[k].a), free(r.slot[k].model);
  for (int i = 1; i < RACE_NS; i++) dv_stream_release(r.s[i]);
  assert_ok(dv_context_check_memory(r.c));
  assert_ok(dv_context_destroy(r.c));
}

static void test_race_model(void **state) {
  (void)state;
  long seeds = getenv("DV_POOL_RACE_SEEDS") ? atol(getenv("DV_POOL_RACE_SEEDS")) : 12;
  long ops = getenv("DV_POOL_RACE_OPS") ? atol(getenv("DV_POOL_RACE_OPS")) : 250;
  unsigned long first = getenv("DV_POOL_RACE_FIRST") ? strtoul(getenv("DV_POOL_RACE_FIRST"), NULL, 10) : 1;
  for (unsigned long seed = first; seed < first + (unsigned long)seeds; seed++) race_run(seed, ops);
}

static void test_split_coalesce_trim(void **state) {
  (void)state;
  dv_context *c = pool_ctx("host_memory=256M");
  dv_array *big = bytes_on(c, 24 << 20, NULL);
  release_now(c, big);
  dv_mm_stats st;
  assert_ok(dv_memory_stats(c, &st));
  assert_int_equal(st.reserved.current, 24 << 20);
  assert_int_equal(st.segments, 1);
  /* three 6 MiB blocks carved from the cached 24 MiB segment: splits */
  dv_array *p[3];
  for (int i = 0; i < 3; i++) p[i] = bytes_on(c, 6 << 20, NULL);
  assert_ok(dv_memory_stats(c, &st));
  assert_int_equal(st.reserved.current, 24 << 20);
  assert_true(st.splits >= 3);
  assert_int_equal(st.largest_free, 6 << 20);
  /* free the middle one, then its neighbours: they coalesce back */
  release_now(c, p[1]);
  release_now(c, p[0]);
  release_now(c, p[2]);
  assert_ok(dv_memory_stats(c, &st));
  assert_true(st.merges >= 2);
  assert_int_equal(st.largest_free, 24 << 20);
  assert_int_equal(st.allocated.current, 0);
  /* the snapshot shows one free segment */
  size_t need = 0;
  assert_ok(dv_memory_snapshot_json(c, NULL, 0, &need));
  char *js = malloc(need + 1);
  assert_ok(dv_memory_snapshot_json(c, js, need + 1, &need));
  assert_non_null(strstr(js, "\"kind\":\"large\""));
  assert_non_null(strstr(js, "\"state\":\"free\""));
  assert_null(strstr(js, "\"state\":\"allocated\""));
  free(js);
  /* trim gives it back */
  assert_ok(dv_memory_trim(c));
  assert_ok(dv_memory_stats(c, &st));
  assert_int_equal(st.reserved.current, 0);
  assert_int_equal(st.segments, 0);
  assert_true(st.releases >= 1);
  size_t f, t;
  assert_ok(dv_backend_memory_info(c, &f, &t));
  assert_int_equal(f, t);
  assert_ok(dv_context_destroy(c));
}

/* Cached memory of one size is returned when another size runs out. */
static void test_oom_releases_cache(void **state) {
  (void)state;
  if (strncmp(g_backend, "host", 4) != 0) skip(); /* needs a small device */
  dv_context *c = pool_ctx("host_memory=32M");
  dv_array *a = bytes_on(c, 20 << 20, NULL);
  release_now(c, a); /* 20 MiB cached */
  /* 512 KiB blocks come from 2 MiB slabs; 16 of them need 4 slabs = 8 MiB:
   * only 12 MiB are free on the device... then 24 MiB needs the cache back */
  dv_array *b = bytes_on(c, 24 << 20, NULL);
  dv_mm_stats st;
  assert_ok(dv_memory_stats(c, &st));
  assert_true(st.releases >= 1);
  assert_int_equal(st.reserved.current, 24 << 20);
  /* a request no release can satisfy: the message tells the story */
  dv_array *x = (dv_array *)1;
  int64_t n = 16 << 20;
  assert_status(dv_device_array(c, 1, &n, dv_dtype_get(DV_UINT8), NULL, 'C', NULL, &x), DV_ERR_OUT_OF_MEMORY);
  assert_null(x);
  const char *m = dv_last_error();
  assert_non_null(strstr(m, "16777216 bytes requested"));
  assert_non_null(strstr(m, "largest free block"));
  assert_non_null(strstr(m, "fragmentation"));
  dv_array_release(b);
  assert_ok(dv_context_destroy(c));
}

static void test_log_and_release_threshold(void **state) {
  (void)state;
  char path[] = "/tmp/dv_pool_log_XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  remove(path);
  char opt[64];
  snprintf(opt, sizeof opt, "pool_log=%s", path);
  dv_context *c;
  assert_ok(test_context(&c, "memory_manager=pool", opt, "pool_release_threshold=1M", NULL));
  dv_array *a = bytes_on(c, 3 << 20, NULL);
  release_now(c, a); /* 4 MiB cached > 1 MiB threshold: given back at the free */
  dv_mm_stats st;
  assert_ok(dv_memory_stats(c, &st));
  assert_int_equal(st.reserved.current, 0);
  assert_ok(dv_context_destroy(c));
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  char line[256];
  assert_non_null(fgets(line, sizeof line, f));
  assert_string_equal(line, "Thread,Time,Action,Pointer,Size,Stream\n");
  assert_non_null(fgets(line, sizeof line, f));
  assert_non_null(strstr(line, ",allocate,"));
  assert_non_null(strstr(line, ",3145728,"));
  assert_non_null(fgets(line, sizeof line, f));
  assert_non_null(strstr(line, ",free,"));
  fclose(f);
  remove(path);
}

/* A third memory manager, written here: counts calls, delegates to the driver. */
typedef struct counting {
  dv_context *ctx;
  int allocs, frees, inits;
} counting;
static counting g_counting;
static dv_status cnt_init(dv_context *ctx, void *user, void **state) {
  counting *k = user;
  k->ctx = ctx;
  k->inits++;
  *state = k;
  return DV_OK;
}
static void cnt_fini(void *state) { (void)state; }
static dv_status cnt_alloc(void *state, size_t bytes, dv_stream *s, dv_block *out) {
  (void)s;
  counting *k = state;
  k->allocs++;
  return dv_backend_alloc(k->ctx, bytes, out);
}
static dv_status cnt_free(void *state, dv_block b, size_t bytes, dv_stream *s) {
  (void)s, (void)bytes;
  counting *k = state;
  k->frees++;
  return dv_backend_free(k->ctx, b);
}
static dv_status cnt_info(void *state, size_t *f, size_t *t) {
  counting *k = state;
  return dv_backend_memory_info(k->ctx, f, t);
}

static void test_third_party_manager(void **state) {
  (void)state;
  dv_memory_manager mm = {DV_MEMORY_MANAGER_VERSION, "counting", &g_counting, cnt_init, cnt_fini, cnt_alloc,
                          cnt_free, cnt_info, NULL, NULL, NULL, NULL};
  dv_config *cfg;
  assert_ok(dv_config_create(&cfg));
  dv_memory_manager bad = mm;
  bad.version = 99;
  assert_status(dv_config_set_memory_manager(cfg, &bad), DV_ERR_INVALID_ARGUMENT);
  bad = mm;
  bad.alloc = NULL;
  assert_status(dv_config_set_memory_manager(cfg, &bad), DV_ERR_INVALID_ARGUMENT);
  assert_ok(dv_config_set_memory_manager(cfg, &mm));
  char be[32];
  snprintf(be, sizeof be, "%s", g_backend);
  if (strchr(be, '-')) *strchr(be, '-') = 0;
  assert_ok(dv_config_set(cfg, "backend", be));
  dv_context *c;
  assert_ok(dv_context_create(cfg, &c));
  dv_config_destroy(cfg);
  assert_string_equal(dv_context_memory_manager(c), "counting");
  assert_int_equal(g_counting.inits, 1);
  double v[64];
  for (int i = 0; i < 64; i++) v[i] = i;
  int64_t n = 64;
  dv_array *h, *d;
  assert_ok(dv_host_array_wrap(c, v, 1, &n, dv_dtype_get(DV_FLOAT64), NULL, &h));
  assert_ok(dv_to_device(c, h, NULL, 1, NULL, &d));
  memset(v, 0, sizeof v);
  assert_ok(dv_copy_to_host(d, h, NULL, NULL));
  assert_true(v[63] == 63);
  assert_int_equal(g_counting.allocs, 1);
  dv_array_release(d);
  assert_ok(dv_context_flush_deallocs(c));
  assert_int_equal(g_counting.frees, 1);
  dv_mm_stats st;
  assert_status(dv_memory_stats(c, &st), DV_ERR_NOT_SUPPORTED);
  assert_ok(dv_memory_trim(c)); /* no trim entry: a no-op */
  dv_array_release(h);
  assert_ok(dv_context_destroy(c));
  assert_ptr_equal(dv_memory_manager_builtin("pool")->name, dv_memory_manager_builtin("pool")->name);
  assert_null(dv_memory_manager_builtin("nope"));
}

/*
 * Randomized model test: random allocations (sizes across both the class and
 * the bin allocators), frees and stream switches; every live array is filled
 * with its own byte on its stream; periodically every live array is read
 * back and must still hold its byte (two live arrays sharing memory would
 * fail); statistics must match the model; the simulator checks its guard
 * bytes; at the end everything is freed and trimmed and all counters are 0.
 */
static void test_model(void **state) {
  (void)state;
  dv_context *c = pool_ctx("host_memory=512M");
  enum { LIVE = 256, NS = 3 };
  long ops = getenv("DV_MODEL_OPS") ? atol(getenv("DV_MODEL_OPS")) : 100000;
  dv_stream *streams[NS] = {NULL};
  for (int i = 1; i < NS; i++) assert_ok(dv_stream_create(c, 0, &streams[i]));
  dv_array *live[LIVE] = {0};
  uint8_t val[LIVE];
  int64_t sz[LIVE];
  uint64_t model_bytes = 0;
  rnd_seed(4242);
  uint8_t *buf = malloc((size_t)8 << 20);
  for (long op = 0; op < ops; op++) {
    int k = (int)(rnd() % LIVE);
    if (!live[k]) {
      int64_t n = (rnd() % 10 == 0) ? rnd_range(1 << 20, 6 << 20) : rnd_range(1, 64 << 10);
      dv_stream *s = streams[rnd() % NS];
      dv_status rc = dv_device_array(c, 1, &n, dv_dtype_get(DV_UINT8), NULL, 'C', s, &live[k]);
      if (rc == DV_ERR_OUT_OF_MEMORY) continue;
      assert_ok(rc);
      val[k] = (uint8_t)(op * 31 + 1);
      sz[k] = n;
      model_bytes += (uint64_t)n;
      assert_ok(dv_array_memset(live[k], val[k], s));
    } else {
      dv_array_release(live[k]);
      live[k] = NULL;
      model_bytes -= (uint64_t)sz[k];
    }
    if (op % 5000 == 4999 || op == ops - 1) {
      assert_ok(dv_context_synchronize(c));
      for (int i = 0; i < LIVE; i++) {
        if (!live[i]) continue;
        dv_array *h;
        assert_ok(dv_host_array_wrap(c, buf, 1, &sz[i], dv_dtype_get(DV_UINT8), NULL, &h));
        assert_ok(dv_copy_to_host(live[i], h, NULL, NULL));
        dv_array_release(h);
        for (int64_t j = 0; j < sz[i]; j += 97)
          if (buf[j] != val[i]) fail_msg("op %ld: array %d byte %lld is %u, not %u", op, i, (long long)j, buf[j], val[i]);
        if (buf[sz[i] - 1] != val[i]) fail_msg("op %ld: array %d last byte", op, i);
      }
      assert_ok(dv_context_flush_deallocs(c));
      dv_mm_stats st;
      assert_ok(dv_memory_stats(c, &st));
      assert_int_equal(st.allocated.current, model_bytes); /* zero divergence */
      assert_true(st.allocated.current <= st.active.current);
      assert_true(st.active.current <= st.reserved.current);
      assert_ok(dv_context_check_memory(c));
    }
  }
  for (int i = 0; i < LIVE; i++) dv_array_release(live[i]);
  for (int i = 1; i < NS; i++) dv_stream_release(streams[i]);
  assert_ok(dv_memory_trim(c));
  dv_mm_stats st;
  assert_ok(dv_memory_stats(c, &st));
  assert_int_equal(st.allocated.current, 0);
  assert_int_equal(st.active.current, 0);
  assert_int_equal(st.reserved.current, 0);
  assert_true(st.hits > st.misses);
  free(buf);
  assert_ok(dv_context_destroy(c));
}

/* The JSON writers follow snprintf's contract as the header states it: with
 * a buffer too small they return DV_ERR_INVALID_ARGUMENT, report the length
 * needed, and write nothing at all into the buffer. */
typedef dv_status (*json_fn)(dv_context *, char *, size_t, size_t *);
static void check_json_writer(dv_context *c, json_fn fn, const char *what) {
  size_t need = 0;
  assert_ok(fn(c, NULL, 0, &need));
  assert_true(need > 10);
  char *buf = malloc(need + 2);
  size_t caps[] = {1, 2, need / 2, need - 1, need};
  for (size_t i = 0; i < sizeof caps / sizeof caps[0]; i++) {
    memset(buf, 'Z', need + 2);
    size_t got = 0;
    assert_status(fn(c, buf, caps[i], &got), DV_ERR_INVALID_ARGUMENT);
    assert_int_equal(got, need);
    for (size_t j = 0; j < need + 2; j++)
      if (buf[j] != 'Z') fail_msg("%s wrote byte %zu of a %zu-byte buffer (cap %zu)", what, j, need + 2, caps[i]);
  }
  memset(buf, 'Z', need + 2);
  assert_ok(fn(c, buf, need + 1, &need));
  assert_int_equal(strlen(buf), need);
  assert_int_equal(buf[need + 1], 'Z');
  /* a NULL context or needed changes nothing either */
  memset(buf, 'Z', need + 2);
  assert_status(fn(NULL, buf, need + 1, &need), DV_ERR_NULL_ARGUMENT);
  assert_status(fn(c, buf, need + 1, NULL), DV_ERR_NULL_ARGUMENT);
  assert_int_equal(buf[0], 'Z');
  free(buf);
}

static void test_json_small_buffers(void **state) {
  (void)state;
  dv_context *c = pool_ctx(NULL);
  dv_array *a = bytes_on(c, 1000, NULL), *b = bytes_on(c, 3 << 20, NULL);
  check_json_writer(c, dv_memory_snapshot_json, "dv_memory_snapshot_json");
  check_json_writer(c, dv_context_stats_json, "dv_context_stats_json");
  dv_array_release(a);
  dv_array_release(b);
  assert_ok(dv_context_destroy(c));
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_same_stream_reuse), cmocka_unit_test(test_cross_stream_reuse_waits),
      cmocka_unit_test(test_issue22_reproducer), USE_TEST(0, "copy to host"),
      USE_TEST(1, "strided copy to host"), USE_TEST(2, "copy to device"), USE_TEST(3, "device copy from a"),
      USE_TEST(4, "device copy into a"), USE_TEST(5, "memset"), USE_TEST(6, "set_item"), USE_TEST(7, "get_item"),
      USE_TEST(8, "ravel"),
      cmocka_unit_test(test_split_coalesce_trim), cmocka_unit_test(test_oom_releases_cache),
      cmocka_unit_test(test_log_and_release_threshold), cmocka_unit_test(test_third_party_manager),
      cmocka_unit_test(test_model), cmocka_unit_test(test_race_model),
      cmocka_unit_test(test_json_small_buffers),
  };
  return test_main(argc, argv, "pool", tests, sizeof tests / sizeof tests[0]);
}
