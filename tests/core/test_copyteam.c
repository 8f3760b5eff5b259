/*
 * White-box tests of the copy team (src/core/copyteam.c): every way a copy
 * is split (a contiguous range by bytes, many rows, fewer rows than
 * threads, widths and totals that do not divide, pitches wider than the
 * rows), the threshold, a team of one and no team, callers on several
 * threads at once, destroy before and after use, and the fallbacks when the
 * workers cannot be allocated or started.  Every copy is checked byte for
 * byte against a plain one, the bytes between rows and around the buffers
 * included (they must be left alone).  Runs under ASan+UBSan with the other
 * tests and under ThreadSanitizer in `make tsan`.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "core/copyteam.h"
#include "core/core.h"

/* Worker threads of every team in this process ("dv-copy" in /proc). */
static int team_threads(void) {
  DIR *d = opendir("/proc/self/task");
  if (!d) return -1;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    char path[300], name[32] = "";
    snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
    FILE *f = fopen(path, "r");
    if (!f) continue;
    if (fgets(name, sizeof name, f) && strncmp(name, "dv-copy", 7) == 0) n++;
    fclose(f);
  }
  closedir(d);
  return n;
}

/* team_threads() once it is want: a joined thread may still be listed for
 * a moment after pthread_join returns (its tid is cleared before the
 * kernel lets it go).  Polls for up to two seconds. */
static int team_threads_settle(int want) {
  int n = team_threads();
  for (int i = 0; i < 200 && n != want; i++) {
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, NULL);
    n = team_threads();
  }
  return n;
}

static void fill(unsigned char *p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++) p[i] = (unsigned char)(i * 131u + seed * 7u + (i >> 9) + 1);
}

/* Copy height rows of width bytes with the team and with plain memcpy,
 * between buffers with the pitches given and 100 guard bytes before and
 * after; the destinations must agree on every byte. */
static void check_rows(dv_copy_team *t, size_t width, size_t height, size_t dpitch, size_t spitch,
                       unsigned seed) {
  size_t dspan = height ? (height - 1) * dpitch + width : 0, sspan = height ? (height - 1) * spitch + width : 0;
  size_t g = 100;
  unsigned char *s = malloc(sspan + 2 * g), *d1 = malloc(dspan + 2 * g), *d2 = malloc(dspan + 2 * g);
  assert_non_null(s), assert_non_null(d1), assert_non_null(d2);
  fill(s, sspan + 2 * g, seed);
  fill(d1, dspan + 2 * g, seed + 1000);
  memcpy(d2, d1, dspan + 2 * g);
  dv__copy_team_rows(t, d1 + g, dpitch, s + g, spitch, width, height);
  for (size_t y = 0; y < height; y++) memcpy(d2 + g + y * dpitch, s + g + y * spitch, width);
  if (memcmp(d1, d2, dspan + 2 * g)) {
    size_t i = 0;
    while (d1[i] == d2[i]) i++;
    fail_msg("width %zu height %zu dpitch %zu spitch %zu: byte %zd of the destination differs", width, height,
             dpitch, spitch, (ptrdiff_t)i - (ptrdiff_t)g);
  }
  free(s), free(d1), free(d2);
}

static dv_copy_team_info info(dv_copy_team *t) {
  dv_copy_team_info i;
  dv__copy_team_info(t, &i);
  return i;
}

/* A team whose workers join every split copy before the caller starts
 * (lockstep), so that the checks below cover chunks copied by workers
 * however slowly they wake on a loaded machine. */
static dv_copy_team *lockstep_team(int threads) {
  dv_copy_team *t = dv__copy_team_create(threads, 0);
  assert_non_null(t);
  dv__copy_team_test_lockstep(t, true);
  return t;
}

/* One contiguous range (height 1), cut by bytes: sizes that divide by
 * nothing, by the thread count, around multiples of 64, and the split is
 * counted. */
static void test_bytes(void **state) {
  (void)state;
  const size_t sizes[] = {1, 63, 64, 65, 127, 1000, 4096, 65537, 1 << 20, (3 << 20) + 13};
  for (int th = 2; th <= 5; th++) {
    dv_copy_team *t = lockstep_team(th);
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
      check_rows(t, sizes[k], 1, sizes[k], sizes[k], (unsigned)k);
      /* dv__copy_team_bytes is the same copy. */
      size_t n = sizes[k];
      unsigned char *a = malloc(n), *b = malloc(n);
      fill(a, n, 5), memset(b, 0, n);
      dv__copy_team_bytes(t, b, a, n);
      assert_memory_equal(a, b, n);
      free(a), free(b);
    }
    dv_copy_team_info i = info(t);
    assert_int_equal(i.threads, th);
    assert_int_equal(i.started, th - 1);
    assert_int_equal(i.split, 2 * sizeof sizes / sizeof *sizes);
    assert_true(i.worker_chunks > 0);
    dv__copy_team_destroy(t);
  }
}

/* Many rows, rows with gaps on either side or both, a width that divides
 * by no thread count. */
static void test_rows_and_pitches(void **state) {
  (void)state;
  dv_copy_team *t = lockstep_team(4);
  check_rows(t, 1000, 1000, 1000, 1000, 1); /* dense: one range */
  check_rows(t, 1000, 1000, 1100, 1031, 2); /* gaps on both sides */
  check_rows(t, 1001, 997, 1001, 4096, 3);  /* gaps in the source only */
  check_rows(t, 1001, 997, 2048, 1001, 4);  /* in the destination only */
  check_rows(t, 3, 100003, 5, 7, 5);        /* short rows: chunks cut rows */
  check_rows(t, 12345, 7, 12400, 12345, 6);
  assert_int_equal(info(t).split, 6);
  assert_true(info(t).worker_chunks > 0);
  dv__copy_team_destroy(t);
}

/* Fewer rows than threads: rows are cut into chunks. */
static void test_fewer_rows_than_threads(void **state) {
  (void)state;
  dv_copy_team *t = lockstep_team(8);
  for (size_t h = 1; h < 8; h++) check_rows(t, 100003, h, 100100, 100200, (unsigned)h);
  assert_int_equal(info(t).split, 7);
  assert_true(info(t).worker_chunks > 0);
  dv__copy_team_destroy(t);
}

/* Every small shape against every thread count: a single 64-byte chunk,
 * chunks shorter than a row, chunks that start and end mid-row, a last
 * chunk shorter than the others. */
static void test_every_small_shape(void **state) {
  (void)state;
  for (int th = 2; th <= 6; th++) {
    dv_copy_team *t = lockstep_team(th);
    for (size_t w = 1; w <= 140; w += (w < 70 ? 1 : 13))
      for (size_t h = 1; h <= 6; h++) check_rows(t, w, h, w + (h & 1) * 3, w + (h & 2) * 5, (unsigned)(w * 7 + h));
    assert_true(info(t).worker_chunks > 0);
    dv__copy_team_destroy(t);
  }
}

/* Nothing to copy: nothing touched, no worker started. */
static void test_zero_size(void **state) {
  (void)state;
  dv_copy_team *t = dv__copy_team_create(4, 0);
  assert_non_null(t);
  check_rows(t, 0, 10, 16, 16, 1);
  check_rows(t, 10, 0, 16, 16, 2);
  dv__copy_team_bytes(t, NULL, NULL, 0);
  dv_copy_team_info i = info(t);
  assert_int_equal(i.split, 0);
  assert_int_equal(i.started, 0);
  dv__copy_team_destroy(t);
}

/* Below the threshold the caller copies alone (and starts nothing); at it
 * the copy is split; the threshold counts the bytes of all rows. */
static void test_threshold_boundary(void **state) {
  (void)state;
  int before = team_threads_settle(0);
  dv_copy_team *t = dv__copy_team_create(3, 65536);
  assert_non_null(t);
  check_rows(t, 65535, 1, 65535, 65535, 1);
  check_rows(t, 255, 257, 300, 256, 2); /* 65535 bytes in rows */
  assert_int_equal(info(t).split, 0);
  assert_int_equal(info(t).started, 0);
  assert_int_equal(team_threads(), before);
  check_rows(t, 65536, 1, 65536, 65536, 3);
  assert_int_equal(info(t).split, 1);
  assert_int_equal(info(t).started, 2);
  assert_int_equal(team_threads(), before + 2);
  check_rows(t, 256, 256, 300, 256, 4); /* 65536 bytes in rows */
  assert_int_equal(info(t).split, 2);
  dv__copy_team_destroy(t);
  assert_int_equal(team_threads_settle(before), before);
}

/* A team of one, and no team at all, copy on the caller. */
static void test_team_disabled(void **state) {
  (void)state;
  int before = team_threads_settle(0);
  dv_copy_team *t = dv__copy_team_create(1, 0);
  assert_non_null(t);
  check_rows(t, 1 << 20, 1, 1 << 20, 1 << 20, 1);
  check_rows(t, 1000, 1000, 1024, 1000, 2);
  dv_copy_team_info i = info(t);
  assert_int_equal(i.threads, 1);
  assert_int_equal(i.split, 0);
  assert_int_equal(i.started, 0);
  assert_int_equal(team_threads(), before);
  dv__copy_team_destroy(t);
  check_rows(NULL, 1 << 20, 1, 1 << 20, 1 << 20, 3);
  check_rows(NULL, 1000, 1000, 1024, 1000, 4);
  dv__copy_team_info(NULL, &i);
  assert_int_equal(i.threads, 1);
  dv__copy_team_destroy(NULL);
  /* Out-of-range thread counts are clamped. */
  t = dv__copy_team_create(0, 0);
  assert_int_equal(info(t).threads, 1);
  dv__copy_team_destroy(t);
  t = dv__copy_team_create(1000, 0);
  assert_int_equal(info(t).threads, DV_COPY_TEAM_MAX);
  dv__copy_team_destroy(t);
}

/* Several threads copy through one team at once: every copy is right, and
 * each was either split or made alone because the team was busy. */
typedef struct caller_arg {
  dv_copy_team *t;
  unsigned seed;
  int bad;
} caller_arg;

enum { CALLERS = 4, CALLS = 60 };

static void *caller_main(void *p) {
  caller_arg *a = p;
  size_t n = 256 * 1024 + a->seed * 64 + 5;
  unsigned char *s = malloc(n), *d = malloc(n);
  if (!s || !d) {
    a->bad = 1;
  } else {
    for (int i = 0; i < CALLS && !a->bad; i++) {
      fill(s, n, a->seed * 1000 + (unsigned)i);
      memset(d, 0, n);
      if (i & 1) dv__copy_team_bytes(a->t, d, s, n);
      else dv__copy_team_rows(a->t, d, 1000, s, 1000, 1000, n / 1000);
      size_t m = (i & 1) ? n : n / 1000 * 1000;
      if (memcmp(d, s, m)) a->bad = 1;
    }
  }
  free(s), free(d);
  return NULL;
}

static void test_concurrent_callers(void **state) {
  (void)state;
  dv_copy_team *t = dv__copy_team_create(3, 4096);
  assert_non_null(t);
  pthread_t th[CALLERS];
  caller_arg a[CALLERS];
  for (int i = 0; i < CALLERS; i++) {
    a[i] = (caller_arg){t, (unsigned)i + 1, 0};
    assert_int_equal(pthread_create(&th[i], NULL, caller_main, &a[i]), 0);
  }
  for (int i = 0; i < CALLERS; i++) {
    pthread_join(th[i], NULL);
    if (a[i].bad) fail_msg("caller %d: a copy differs", i);
  }
  dv_copy_team_info i = info(t);
  assert_int_equal(i.split + i.busy, CALLERS * CALLS);
  assert_true(i.split > 0);
  print_message("concurrent callers: %llu copies split, %llu made alone (team busy)\n",
                (unsigned long long)i.split, (unsigned long long)i.busy);
  dv__copy_team_destroy(t);
}

/* Destroy with no use (no thread was ever started) and after use (the
 * workers are joined: none is left). */
static void test_destroy(void **state) {
  (void)state;
  int before = team_threads_settle(0);
  dv__copy_team_destroy(dv__copy_team_create(4, 0));
  assert_int_equal(team_threads_settle(before), before);
  dv_copy_team *t = dv__copy_team_create(4, 0);
  assert_non_null(t);
  check_rows(t, 1 << 16, 4, 1 << 16, 1 << 16, 1);
  assert_int_equal(team_threads(), before + 3);
  dv__copy_team_destroy(t);
  assert_int_equal(team_threads_settle(before), before);
}

/* The workers cannot start: none (the caller copies alone, for good), or
 * some (the team splits over those that did); no memory for their
 * records (alone, for good).  No copy fails. */
static void test_start_failures(void **state) {
  (void)state;
  int before = team_threads_settle(0);
  dv_copy_team *t = dv__copy_team_create(4, 0);
  assert_non_null(t);
  dv__copy_team_test_spawn_limit(t, 0);
  check_rows(t, 100000, 3, 100000, 100100, 1);
  check_rows(t, 1 << 20, 1, 1 << 20, 1 << 20, 2);
  dv_copy_team_info i = info(t);
  assert_int_equal(i.started, 0);
  assert_int_equal(i.split, 0);
  assert_int_equal(team_threads(), before);
  dv__copy_team_destroy(t);

  t = dv__copy_team_create(4, 0);
  dv__copy_team_test_spawn_limit(t, 1);
  check_rows(t, 100000, 3, 100000, 100100, 3);
  check_rows(t, 1 << 20, 1, 1 << 20, 1 << 20, 4);
  i = info(t);
  assert_int_equal(i.started, 1);
  assert_int_equal(i.split, 2);
  assert_int_equal(team_threads(), before + 1);
  dv__copy_team_destroy(t);
  assert_int_equal(team_threads_settle(before), before);

  t = dv__copy_team_create(4, 0);
  assert_non_null(t);
  dv__fault_host_set(1); /* the worker records */
  check_rows(t, 1 << 20, 1, 1 << 20, 1 << 20, 5);
  assert_false(dv__fault_host_pending());
  check_rows(t, 1 << 20, 1, 1 << 20, 1 << 20, 6);
  i = info(t);
  assert_int_equal(i.started, 0);
  assert_int_equal(i.split, 0);
  dv__copy_team_destroy(t);

  dv__fault_host_set(1); /* the team itself: NULL, a team of one */
  t = dv__copy_team_create(4, 0);
  assert_null(t);
  check_rows(t, 1 << 20, 1, 1 << 20, 1 << 20, 7);
  assert_int_equal(team_threads(), before);
}

/* Back-to-back split copies without lockstep, from 3 callers (1,000 each), of shapes
 * that change every call (a worker left over from a previous job would copy
 * with the wrong chunk size or into the wrong buffer). */
typedef struct stress_arg { dv_copy_team *t; unsigned seed; int bad; } stress_arg;
static void *stress_main(void *p) {
  stress_arg *a = p;
  size_t cap = 3 << 20;
  unsigned char *s = malloc(cap), *d = malloc(cap);
  if (!s || !d) {
    free(s), free(d);
    a->bad = 2;
    return NULL;
  }
  unsigned r = a->seed;
  for (int i = 0; i < 1000 && !a->bad; i++) {
    r = r * 1103515245u + 12345u;
    size_t w = 1 + (r >> 8) % 5000, h = 1 + (r >> 20) % 300, dp = w + (r & 7), sp = w + ((r >> 3) & 15);
    if ((h - 1) * (dp > sp ? dp : sp) + w > cap) h = 1;
    fill(s, (h - 1) * sp + w, r);
    memset(d, 0, (h - 1) * dp + w);
    dv__copy_team_rows(a->t, d, dp, s, sp, w, h);
    for (size_t y = 0; y < h; y++)
      if (memcmp(d + y * dp, s + y * sp, w)) a->bad = 1;
  }
  free(s), free(d);
  return NULL;
}
static void test_stress_changing_shapes(void **state) {
  (void)state;
  for (int th = 2; th <= 4; th++) {
    dv_copy_team *t = dv__copy_team_create(th, 0);
    pthread_t id[3];
    stress_arg a[3];
    assert_non_null(t);
    for (int i = 0; i < 3; i++) {
      a[i] = (stress_arg){t, 17u * (unsigned)i + (unsigned)th, 0};
      assert_int_equal(pthread_create(&id[i], NULL, stress_main, &a[i]), 0);
    }
    for (int i = 0; i < 3; i++) pthread_join(id[i], NULL), assert_int_equal(a[i].bad, 0);
    dv_copy_team_info i = info(t);
    print_message("stress %d: split %llu busy %llu worker chunks %llu\n", th, (unsigned long long)i.split,
                  (unsigned long long)i.busy, (unsigned long long)i.worker_chunks);
    dv__copy_team_destroy(t);
  }
}

int main(void) {
  dv__log_set_level(DV_LOG_ERROR); /* the start failures warn, as they should */
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bytes),
      cmocka_unit_test(test_rows_and_pitches),
      cmocka_unit_test(test_fewer_rows_than_threads),
      cmocka_unit_test(test_every_small_shape),
      cmocka_unit_test(test_zero_size),
      cmocka_unit_test(test_threshold_boundary),
      cmocka_unit_test(test_team_disabled),
      cmocka_unit_test(test_concurrent_callers),
      cmocka_unit_test(test_destroy),
      cmocka_unit_test(test_start_failures),
      cmocka_unit_test(test_stress_changing_shapes),
  };
  return cmocka_run_group_tests_name("copyteam", tests, NULL, NULL);
}
