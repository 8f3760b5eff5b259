#define _DEFAULT_SOURCE
/*
 * Memory over many launches (issue 22 #15), on every backend that builds
 * kernels: asynchronous launches of one kernel in stretches, each ended by
 * a synchronize.  The heap in use (the allocator's count: malloc's, or the
 * sanitizer's) must be flat after a warm-up:
 *  - after each synchronize, within 8 bytes per launch since the first
 *    stretch (a leak of 16 bytes per launch exceeds that twice over);
 *  - while launches are queued, within 4 MiB of the settled heap: a stream
 *    holds a bounded number of launches it has not run (include/devarray.h,
 *    dv_kernel_launch), so what queued launches keep does not grow with the
 *    number queued (before the bound the host simulator kept ~2 KiB per
 *    launch ahead of its worker: ~50 MiB for a stretch of 25,000; PoCL
 *    ~0.5-0.8 KiB: ~20 MiB).
 * The kernel does some work per launch (calibrated: about five times a
 * launch call's time), so the device falls behind and the queue fills.
 * 1e5 launches; 4e4 under a sanitizer (each launch costs several times more
 * there), said in the output.  The values are checked:
 * every launch ran (not on the CUDA driver test double, which does not run
 * kernels; skipped there by name).
 */
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "common.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SOAK_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SOAK_SANITIZER 1
#endif
#endif
#if SOAK_SANITIZER
/* The sanitizers' allocator (sanitizer/allocator_interface.h, which GCC does not install). */
size_t __sanitizer_get_current_allocated_bytes(void);
#else
#include <malloc.h>
#endif

#ifndef DV_TEST_KERNELS_DIR
#error "DV_TEST_KERNELS_DIR must name tests/kernels"
#endif

static char g_cache_dir[256];

/* Bytes of heap in use, or -1 where this cannot be measured. */
static long long heap_in_use(void) {
#if SOAK_SANITIZER
  return (long long)__sanitizer_get_current_allocated_bytes();
#elif defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
  struct mallinfo2 mi = mallinfo2(); /* every arena; mmap'ed chunks too */
  return (long long)(mi.uordblks + mi.hblkhd);
#else
  return -1;
#endif
}

static bool is_cuda_double(dv_context *ctx) { return test_on_cuda_double(ctx); }

/* x -> x * 1664525 + 1013904223 (mod 2^32), applied `times` times. */
static uint32_t lcg_power(uint32_t x, uint64_t times) {
  uint32_t a = 1664525u, c = 1013904223u; /* the step, as x -> a x + c */
  uint32_t ra = 1u, rc = 0u;              /* the result so far */
  for (; times; times >>= 1) {
    if (times & 1) rc = a * rc + c, ra = a * ra; /* step after result */
    c = a * c + c, a = a * a;                    /* step twice */
  }
  return ra * x + rc;
}

#define SOAK_N 256 /* elements, one block */
/* What the launches queued on one stream may hold: a bound keeps at most
 * about 1,024 of them (host simulator ~2.3 KiB each, PoCL ~0.5-0.8 KiB); with no
 * bound a stretch of 10,000 kept ~5 MiB on PoCL, ~20 MiB on the host. */
#define SOAK_QUEUED (4ll << 20)

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Launch `count` times (steps += count * iters); the seconds the launch
 * calls took go to *calls, the whole (to the synchronize) is returned. */
static double launch_batch(dv_kernel *k, const dv_launch_config *lc, dv_array *d, int iters,
                           int count, uint64_t *steps, double *calls) {
  dv_arg args[] = {DV_ARG_ARRAY(d), DV_ARG_I32(SOAK_N), DV_ARG_I32(iters)};
  double t0 = now_s(), in_calls = 0;
  for (int i = 0; i < count; i++) {
    double c0 = now_s();
    assert_ok(dv_kernel_launch(k, lc, 3, args));
    in_calls += now_s() - c0;
  }
  assert_ok(dv_stream_synchronize(lc->stream));
  *steps += (uint64_t)count * (uint64_t)iters;
  if (calls) *calls = in_calls;
  return now_s() - t0;
}

static void test_launch_memory_flat(void **state) {
  (void)state;
  if (heap_in_use() < 0) {
    printf("SKIPPED: %s: no way to read the heap in use here\n", __func__);
    skip();
  }
#if SOAK_SANITIZER
  const int total = 40000;
  printf("under a sanitizer: %d launches (1e5 without)\n", total);
#else
  const int total = 100000;
#endif
  const int stretches = 4, stretch = total / stretches;
  char path[512];
  snprintf(path, sizeof path, "%s/soak.dvk", DV_TEST_KERNELS_DIR);
  char *src = read_text_file(path);
  dv_program *p = NULL;
  assert_ok(dv_program_create(g_ctx, "soak.dvk", src, &p));
  free(src);
  dv_module *m = NULL;
  dv_status rc = dv_program_build(p, 0, &m);
  if (rc)
    fail_msg("build soak.dvk: %s: %s\n%s", dv_status_name(rc), dv_last_error(), dv_program_log(p));
  dv_program_destroy(p);
  dv_kernel *k = NULL;
  assert_ok(dv_module_kernel(m, "lcg_steps", &k));
  uint32_t init[SOAK_N], out[SOAK_N];
  for (int i = 0; i < SOAK_N; i++) init[i] = (uint32_t)i * 2654435761u;
  int64_t n = SOAK_N;
  dv_array *h = NULL, *d = NULL;
  assert_ok(dv_host_array_wrap(g_ctx, init, 1, &n, dv_dtype_get(DV_UINT32), NULL, &h));
  assert_ok(dv_to_device(g_ctx, h, NULL, 1, NULL, &d));
  dv_array_release(h);
  dv_stream *s = NULL;
  assert_ok(dv_stream_create(g_ctx, 0, &s));
  dv_launch_config lc;
  memset(&lc, 0, sizeof lc);
  lc.grid.x = 1;
  lc.block.x = SOAK_N;
  lc.stream = s;
  uint64_t steps = 0;

  /* Work per launch: enough that the device takes about five times as
   * long as a launch call, so queued launches pile up (without a bound, by
   * about four fifths of each stretch) and the run stays a few seconds.  (No
   * more than 8 doublings: the CUDA test double runs nothing.) */
  int iters = 8;
  for (int round = 0; round < 8; round++) {
    double calls = 0, whole = launch_batch(k, &lc, d, iters, 300, &steps, &calls);
    if (whole >= 5 * calls) break;
    iters *= 2;
  }
  /* Warm-up: caches, threads, a full queue once. */
  launch_batch(k, &lc, d, iters, 3000, &steps, NULL);
  printf("%d steps per launch\n", iters);

  dv_arg args[] = {DV_ARG_ARRAY(d), DV_ARG_I32(SOAK_N), DV_ARG_I32(iters)};
  long long settled[4], first = heap_in_use(), queued_max = 0;
  for (int r = 0; r < stretches; r++) {
    long long before = heap_in_use(), peak = before;
    double t0 = now_s();
    for (int i = 1; i <= stretch; i++) {
      assert_ok(dv_kernel_launch(k, &lc, 3, args));
      if (i % 250 == 0) {
        long long u = heap_in_use();
        if (u > peak) peak = u;
      }
    }
    assert_ok(dv_stream_synchronize(s));
    steps += (uint64_t)stretch * (uint64_t)iters;
    settled[r] = heap_in_use();
    if (peak - before > queued_max) queued_max = peak - before;
    printf("stretch %d: %d launches in %.2f s; heap while queued %+lld bytes, settled %+lld\n", r,
           stretch, now_s() - t0, peak - before, settled[r] - first);
  }
  long long growth = settled[stretches - 1] - settled[0];
  long long allowed = 8ll * stretch * (stretches - 1);
  if (growth > allowed)
    fail_msg("the heap grew by %lld bytes over %d launches after the first stretch (%.1f per "
             "launch; allowed %lld)", growth, stretch * (stretches - 1),
             (double)growth / (stretch * (stretches - 1)), allowed);
  if (queued_max > SOAK_QUEUED)
    fail_msg("launches queued on one stream held %lld bytes of heap (allowed %lld): the queue is "
             "not bounded", queued_max, SOAK_QUEUED);

  dv_array *ho = NULL;
  assert_ok(dv_host_array_wrap(g_ctx, out, 1, &n, dv_dtype_get(DV_UINT32), NULL, &ho));
  assert_ok(dv_copy_to_host(d, ho, NULL, NULL));
  dv_array_release(ho);
  if (is_cuda_double(g_ctx)) {
    printf("SKIPPED: %s: the values (the CUDA test double does not execute kernels)\n", __func__);
  } else {
    for (int i = 0; i < SOAK_N; i++)
      if (out[i] != lcg_power(init[i], steps))
        fail_msg("element %d: %u, expected %u after %llu steps", i, out[i],
                 lcg_power(init[i], steps), (unsigned long long)steps);
  }
  dv_stream_release(s);
  dv_array_release(d);
  dv_module_release(m);
}

int main(int argc, char **argv) {
  int begin = kernel_suite_begin(argc, argv, "soak", NULL, g_cache_dir, sizeof g_cache_dir);
  if (begin) return begin;
  const struct CMUnitTest tests[] = {T(test_launch_memory_flat)};
  return kernel_suite_end(g_cache_dir,
                          test_main(argc, argv, "soak", tests, sizeof tests / sizeof tests[0]));
}
