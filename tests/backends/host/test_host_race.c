/*
 * The host simulator's data-race engine (issue 24, src/backends/host/
 * host_race.c), driven directly through host_check.h with scripted access
 * sequences, as the simulator's dispatcher calls it: every ordering rule
 * (block barriers by fence, waves, blocks), the granularity (bytes, partial
 * overlaps), the readers kept, a thread's own accesses, history per block
 * and per launch, the 16-bit event count renumbered, the hit's fields, the
 * shadow's cost on a big region, allocation failures, and views used by
 * threads at once (blocks in parallel).
 */
#include <pthread.h>

#include "common.h"
#include "backends/host/tools/check.h"
#include "core/core.h"
#include "dialect/dialect.h"

#define PC(n) ((const void *)(uintptr_t)(0x1000 + 16 * (n)))
#define LOCAL DV_FENCE_LOCAL
#define GLOBAL DV_FENCE_GLOBAL

static hk_acc acc(int t, int pc, bool write) {
  return (hk_acc){.block = 0, .thread = t, .pc = PC(pc), .write = write};
}

/* Shared accesses of [off, off + n) by thread t at instruction pc. */
static bool sw(hk_race *r, int t, size_t off, size_t n, int pc, hk_race_hit *h) {
  hk_acc a = acc(t, pc, true);
  return hk_race_shared(r, off, n, &a, h);
}
static bool sr(hk_race *r, int t, size_t off, size_t n, int pc, hk_race_hit *h) {
  hk_acc a = acc(t, pc, false);
  return hk_race_shared(r, off, n, &a, h);
}
static bool gw(hk_race *r, size_t g, int t, size_t off, size_t n, int pc, hk_race_hit *h) {
  hk_acc a = acc(t, pc, true);
  return hk_race_global(r, g, off, n, &a, h);
}
static bool gr(hk_race *r, size_t g, int t, size_t off, size_t n, int pc, hk_race_hit *h) {
  hk_acc a = acc(t, pc, false);
  return hk_race_global(r, g, off, n, &a, h);
}

static void assert_hit(const hk_race_hit *h, uint64_t block, int thread, int pc, bool write,
                       size_t off) {
  assert_int_equal(h->prev.block, block);
  assert_int_equal(h->prev.thread, thread);
  assert_ptr_equal(h->prev.pc, PC(pc));
  assert_int_equal(h->prev.write, write);
  assert_int_equal(h->off, off);
}

/* 64 threads in waves of 32, a 256-byte arena, one 4 KiB region. */
static hk_race *new_race(void) {
  size_t bytes[] = {4096};
  hk_race *r = hk_race_new(1, bytes, 256, 64, 32);
  assert_non_null(r);
  hk_race_block(r, 0);
  return r;
}

static void test_shared_write_write(void **state) {
  (void)state;
  hk_race *r = new_race();
  hk_race_hit h;
  assert_false(sw(r, 3, 16, 4, 1, &h));
  assert_true(sw(r, 7, 16, 4, 2, &h));
  assert_hit(&h, 0, 3, 1, true, 16);
  hk_race_free(r);
}

static void test_shared_read_then_write(void **state) {
  (void)state;
  hk_race *r = new_race();
  hk_race_hit h;
  assert_false(sr(r, 5, 8, 4, 1, &h));
  assert_false(sr(r, 6, 8, 4, 2, &h)); /* read-read never races */
  assert_true(sw(r, 5, 8, 4, 3, &h));
  assert_hit(&h, 0, 6, 2, false, 8);
  hk_race_free(r);
}

static void test_shared_write_then_read(void **state) {
  (void)state;
  hk_race *r = new_race();
  hk_race_hit h;
  assert_false(sw(r, 0, 0, 8, 1, &h));
  assert_true(sr(r, 1, 4, 4, 2, &h));
  assert_hit(&h, 0, 0, 1, true, 4);
  hk_race_free(r);
}

static void test_shared_ordered_by_local_barrier(void **state) {
  (void)state;
  hk_race *r = new_race();
  hk_race_hit h;
  for (int t = 0; t < 64; t++) assert_false(sw(r, t, (size_t)t * 4, 4, 1, &h));
  hk_race_barrier(r, LOCAL);
  /* a tree step: each thread reads its partner's slot, then writes its own */
  for (int t = 0; t < 32; t++) assert_false(sr(r, t, (size_t)(t + 32) * 4, 4, 2, &h));
  hk_race_barrier(r, LOCAL | GLOBAL);
  for (int t = 0; t < 32; t++) assert_false(sw(r, t + 32, (size_t)t * 4, 4, 3, &h));
  hk_race_free(r);
}

static void test_missing_barrier_in_reduction(void **state) {
  (void)state;
  hk_race *r = new_race();
  hk_race_hit h;
  for (int t = 0; t < 64; t++) assert_false(sw(r, t, (size_t)t * 4, 4, 1, &h));
  hk_race_barrier(r, LOCAL);
  /* s[t] += s[t + 16] for t < 16, then s[t] += s[t + 8] for t < 8, no barrier between */
  for (int t = 0; t < 16; t++) {
    assert_false(sr(r, t, (size_t)(t + 16) * 4, 4, 2, &h));
    assert_false(sr(r, t, (size_t)t * 4, 4, 2, &h));
    assert_false(sw(r, t, (size_t)t * 4, 4, 3, &h));
  }
  assert_true(sr(r, 0, 8 * 4, 4, 4, &h)); /* thread 0 reads s[8], which thread 8 wrote */
  assert_hit(&h, 0, 8, 3, true, 32);
  hk_race_free(r);
}

static void test_global_fence_does_not_order_shared(void **state) {
  (void)state;
  hk_race *r = new_race();
  hk_race_hit h;
  assert_false(sw(r, 0, 0, 4, 1, &h));
  hk_race_barrier(r, GLOBAL);
  assert_true(sr(r, 1, 0, 4, 2, &h));
  assert_hit(&h, 0, 0, 1, true, 0);
  /* a barrier fencing nothing orders nothing either */
  assert_false(sw(r, 2, 64, 4, 3, &h));
  hk_race_barrier(r, 0);
  assert_true(sw(r, 3, 64, 4, 4, &h));
  assert_hit(&h, 0, 2, 3, true, 64);
  hk_race_free(r);
}

static void test_local_fence_does_not_order_global(void **state) {
  (void)state;
  hk_race *r = new_race();
  hk_race_hit h;
  assert_false(gw(r, 0, 0, 100, 4, 1, &h));
  hk_race_barrier(r, LOCAL);
  assert_true(gr(r, 0, 1, 100, 4, 2, &h));
  assert_hit(&h, 0, 0, 1, true, 100);
  hk_race_free(r);
}

static void test_global_same_block_ordered_by_global_barrier(void **state) {
  (void)state;
  hk_race *r = new_race();
  hk_race_hit h;
  assert_false(gw(r, 0, 0, 100, 4, 1, &h));
  assert_false(gr(r, 0, 40, 200, 4, 1, &h));
  hk_race_barrier(r, GLOBAL);
  assert_false(gr(r, 0, 1, 100, 4, 2, &h));
  assert_false(gw(r, 0, 1, 200, 4, 2, &h));
  assert_true(gw(r, 0, 2, 100, 4, 3, &h)); /* after thread 1's read, ordered by nothing */
  assert_hit(&h, 0, 1, 2, false, 100);
  assert_true(gw(r, 0, 1, 100, 4, 4, &h)); /* and thread 2's write */
  assert_hit(&h, 0, 2, 3, true, 100);
  hk_race_free(r);
}

static void test_global_across_blocks(void **state) {
  (void)state;
  hk_race *r = new_race();
  hk_race_hit h;
  hk_race_block(r, 5);
  assert_false(gw(r, 0, 9, 40, 4, 1, &h)); /* a counter, incremented without an atomic */
  assert_false(gr(r, 0, 10, 80, 4, 1, &h));
  hk_race_barrier(r, LOCAL | GLOBAL);
  hk_race_wave(r, 0);
  hk_race_block(r, 6);
  hk_race_barrier(r, LOCAL | GLOBAL);
  assert_true(gr(r, 0, 9, 40, 4, 2, &h)); /* the same thread index, another block */
  assert_hit(&h, 5, 9, 1, true, 40);
  assert_false(gr(r, 0, 11, 80, 4, 2, &h)); /* read-read across blocks */
  assert_true(gw(r, 0, 11, 82, 1, 3, &h));
  assert_hit(&h, 5, 10, 1, false, 82);
  /* a global barrier of block 6 does not order block 5's accesses */
  assert_false(gw(r, 0, 1, 400, 4, 4, &h));
  hk_race_barrier(r, GLOBAL);
  hk_race_wave(r, 0);
  assert_true(gw(r, 0, 9, 40, 4, 5, &h));
  assert_hit(&h, 5, 9, 1, true, 40);
  hk_race_free(r);
}

static void test_waves(void **state) {
  (void)state;
  hk_race *r = new_race();
  hk_race_hit h;
  /* lanes of one wave, ordered by its synchronization */
  assert_false(sw(r, 0, 0, 4, 1, &h));
  assert_false(gw(r, 0, 0, 0, 4, 1, &h));
  hk_race_wave(r, 0);
  assert_false(sr(r, 31, 0, 4, 2, &h));
  assert_false(gr(r, 0, 31, 0, 4, 2, &h));
  /* not across waves */
  assert_true(sr(r, 32, 0, 4, 3, &h));
  assert_hit(&h, 0, 0, 1, true, 0);
  assert_true(gr(r, 0, 32, 0, 4, 3, &h));
  assert_hit(&h, 0, 0, 1, true, 0);
  /* another wave's synchronization orders nothing for wave 0 */
  assert_false(sw(r, 1, 8, 4, 4, &h));
  hk_race_wave(r, 1);
  assert_true(sr(r, 2, 8, 4, 5, &h));
  assert_hit(&h, 0, 1, 4, true, 8);
  /* wave 1's lanes: 33 wrote, wave 1 synchronized, 63 reads */
  assert_false(sw(r, 33, 12, 4, 6, &h));
  hk_race_wave(r, 1);
  assert_false(sr(r, 63, 12, 4, 7, &h));
  hk_race_wave(r, 7); /* a wave the block does not have: ignored */
  hk_race_wave(r, -1);
  hk_race_free(r);
}

static void test_adjacent_bytes(void **state) {
  (void)state;
  size_t bytes[] = {64 * 64};
  hk_race *r = hk_race_new(1, bytes, 64, 64, 32);
  assert_non_null(r);
  hk_race_hit h;
  for (uint64_t b = 0; b < 64; b++) {
    hk_race_block(r, b);
    for (int t = 0; t < 64; t++) {
      assert_false(sw(r, t, (size_t)t, 1, 1, &h));
      assert_false(gw(r, 0, t, (size_t)(b * 64 + (uint64_t)t), 1, 2, &h));
    }
    for (int t = 0; t < 64; t++) {
      assert_false(sr(r, t, (size_t)t, 1, 3, &h));
      assert_false(gr(r, 0, t, (size_t)(b * 64 + (uint64_t)t), 1, 4, &h));
    }
  }
  hk_race_free(r);
}

static void test_partial_overlap(void **state) {
  (void)state;
  hk_race *r = new_race();
  hk_race_hit h;
  assert_false(sw(r, 0, 0, 4, 1, &h));
  assert_false(sw(r, 1, 4, 1, 2, &h)); /* the byte after: no overlap */
  assert_true(sw(r, 2, 3, 1, 3, &h));  /* the last byte of thread 0's word */
  assert_hit(&h, 0, 0, 1, true, 3);
  /* a 1-byte write inside, then a 4-byte read over it */
  assert_false(sw(r, 5, 42, 1, 4, &h));
  assert_true(sr(r, 6, 40, 4, 5, &h));
  assert_hit(&h, 0, 5, 4, true, 42);
  /* the same in global memory */
  assert_false(gw(r, 0, 0, 1000, 4, 6, &h));
  assert_true(gw(r, 0, 9, 1002, 1, 7, &h));
  assert_hit(&h, 0, 0, 6, true, 1002);
  hk_race_free(r);
}

/* Words accessed in part and then whole (the shadow's split and joined
 * words): every answer stays the per-byte one, in shared and global memory. */
static void test_split_and_joined_words(void **state) {
  (void)state;
  hk_race *r = new_race();
  hk_race_hit h;
  for (int pass = 0; pass < 3; pass++) { /* again after a join, and in a new block */
    hk_race_block(r, (uint64_t)pass);
    /* four threads write a byte each of shared word 16 and of a global word g
     * (one per pass: global history stays, and blocks are never ordered) */
    const size_t g = 512 + 64 * (size_t)pass;
    for (int t = 0; t < 4; t++) {
      assert_false(sw(r, t, 16 + (size_t)t, 1, 1, &h));
      assert_false(gw(r, 0, t, g + (size_t)t, 1, 1, &h));
    }
    /* a whole-word read by thread 2 races with the first byte another thread wrote */
    assert_true(sr(r, 2, 16, 4, 2, &h));
    assert_hit(&h, (uint64_t)pass, 0, 1, true, 16);
    assert_true(gr(r, 0, 2, g, 4, 2, &h));
    assert_hit(&h, (uint64_t)pass, 0, 1, true, g);
    hk_race_barrier(r, LOCAL | GLOBAL);
    /* a whole-word write after the barrier: ordered, and the bytes join */
    assert_false(sw(r, 5, 16, 4, 3, &h));
    assert_false(gw(r, 0, 5, g, 4, 3, &h));
    /* a byte of it read by another thread: the word's writer, at that byte */
    assert_true(sr(r, 6, 18, 1, 4, &h));
    assert_hit(&h, (uint64_t)pass, 5, 3, true, 18);
    assert_true(gr(r, 0, 6, g + 3, 1, 4, &h));
    assert_hit(&h, (uint64_t)pass, 5, 3, true, g + 3);
    /* an unaligned 8-byte write over two words: the first byte that races */
    assert_true(sw(r, 7, 14, 8, 5, &h));
    assert_hit(&h, (uint64_t)pass, 5, 3, true, 16);
    hk_race_barrier(r, LOCAL | GLOBAL);
  }
  /* global history stays across blocks, split or not */
  hk_race_block(r, 9);
  assert_true(gr(r, 0, 0, 512 + 128 + 1, 1, 6, &h));
  assert_hit(&h, 2, 5, 3, true, 512 + 128 + 1);
  assert_false(hk_race_degraded(r));
  hk_race_free(r);
}

static void test_two_readers_then_write(void **state) {
  (void)state;
  hk_race *r = new_race();
  hk_race_hit h;
  assert_false(sr(r, 1, 0, 4, 1, &h));
  assert_false(sr(r, 2, 0, 4, 2, &h));
  assert_true(sw(r, 1, 0, 4, 3, &h)); /* its own read does not count; thread 2's does */
  assert_hit(&h, 0, 2, 2, false, 0);
  assert_false(sr(r, 1, 16, 4, 1, &h));
  assert_false(sr(r, 2, 16, 4, 2, &h));
  assert_true(sw(r, 2, 16, 4, 3, &h));
  assert_hit(&h, 0, 1, 1, false, 16);
  /* three readers: a write by any of them still reports another */
  for (int w = 1; w <= 3; w++) {
    hk_race_block(r, (uint64_t)w);
    for (int t = 1; t <= 3; t++) assert_false(sr(r, t, 32, 4, t, &h));
    assert_true(sw(r, w, 32, 4, 9, &h));
    assert_int_not_equal(h.prev.thread, w);
    assert_false(h.prev.write);
    assert_ptr_equal(h.prev.pc, PC(h.prev.thread));
  }
  /* a third reader replaces one that fewer later accesses can race with:
   * threads 1 and 2 (wave 0) are ordered for wave 0 by its synchronization,
   * thread 40 (wave 1) is not, so thread 3's write reports thread 40 */
  hk_race_block(r, 4);
  assert_false(sr(r, 1, 48, 4, 1, &h));
  assert_false(sr(r, 2, 48, 4, 2, &h));
  hk_race_wave(r, 0);
  assert_false(sr(r, 40, 48, 4, 3, &h));
  assert_true(sw(r, 3, 48, 4, 4, &h));
  assert_hit(&h, 4, 40, 3, false, 48);
  /* all unordered: the kept two are lanes of different waves, so a later
   * synchronization of one wave leaves the other's reader to report */
  hk_race_block(r, 5);
  assert_false(sr(r, 1, 48, 4, 1, &h));
  assert_false(sr(r, 33, 48, 4, 2, &h));
  assert_false(sr(r, 34, 48, 4, 3, &h));
  hk_race_wave(r, 1);
  assert_true(sw(r, 35, 48, 4, 4, &h));
  assert_hit(&h, 5, 1, 1, false, 48);
  /* the same across blocks in global memory: two readers of block 0 */
  hk_race_block(r, 10);
  assert_false(gr(r, 0, 1, 0, 4, 1, &h));
  assert_false(gr(r, 0, 2, 0, 4, 2, &h));
  hk_race_block(r, 11);
  assert_false(gr(r, 0, 1, 0, 4, 3, &h)); /* a third reader: the two of block 10 are kept */
  assert_true(gw(r, 0, 1, 0, 4, 4, &h));
  assert_int_equal(h.prev.block, 10);
  assert_false(h.prev.write);
  hk_race_free(r);
}

static void test_own_accesses(void **state) {
  (void)state;
  hk_race *r = new_race();
  hk_race_hit h;
  for (int i = 0; i < 4; i++) {
    assert_false(sw(r, 9, 0, 8, 1, &h));
    assert_false(sr(r, 9, 2, 4, 2, &h));
    assert_false(gr(r, 0, 9, 0, 8, 3, &h));
    assert_false(gw(r, 0, 9, 4, 4, 4, &h));
  }
  hk_race_free(r);
}

static void test_history_per_block(void **state) {
  (void)state;
  hk_race *r = new_race();
  hk_race_hit h;
  assert_false(sw(r, 0, 0, 4, 1, &h));
  assert_false(gw(r, 0, 0, 0, 4, 2, &h));
  hk_race_block(r, 1);
  assert_false(sw(r, 1, 0, 4, 3, &h));   /* shared: a new block's arena */
  assert_true(gw(r, 0, 1, 0, 4, 4, &h)); /* global: kept */
  assert_hit(&h, 0, 0, 2, true, 0);
  assert_false(sw(r, 1, 100, 4, 3, &h));
  /* shared generations wrap after 65,535 blocks: the arena is then cleared
   * once, so block 65536 (block 1's generation again) does not see block 1's */
  for (uint64_t b = 2; b < 70000; b++) {
    hk_race_block(r, b);
    if (b == 65534 || b == 65535 || b == 65536) assert_false(sw(r, (int)(b % 64), 0, 4, 5, &h));
    if (b == 65536) assert_false(sw(r, 2, 100, 4, 5, &h));
  }
  hk_race_block(r, 70000);
  assert_false(sw(r, 63, 0, 4, 6, &h));
  hk_race_free(r);
}

static void test_big_region_far_offset(void **state) {
  (void)state;
  size_t big = (size_t)1 << 34; /* 16 GiB, never allocated: only its shadow's table */
  size_t bytes[] = {4096, big};
  hk_race *r = hk_race_new(2, bytes, 0, 256, 32);
  assert_non_null(r);
  size_t start = hk_race_shadow_bytes(r);
  assert_true(start < 128 * 1024); /* 8 bytes per 2 MiB of region, and the tables */
  hk_race_block(r, 0);
  hk_race_hit h;
  size_t far = big - 6;
  assert_false(gw(r, 1, 3, far, 4, 1, &h));
  assert_false(gw(r, 1, 3, far, 4, 1, &h));
  size_t after = hk_race_shadow_bytes(r);
  assert_true(after - start <= 32 * 4096 + 8 + 4096); /* one chunk, one directory page */
  hk_race_block(r, 1);
  assert_true(gr(r, 1, 3, far + 2, 8, 2, &h)); /* clipped to the region's end */
  assert_hit(&h, 0, 3, 1, true, far + 2);
  /* an access across a chunk boundary touches two chunks */
  assert_false(gw(r, 1, 4, 8192 - 2, 4, 3, &h));
  assert_true(hk_race_shadow_bytes(r) - after <= 2 * (32 * 4096 + 8) + 4096);
  hk_race_block(r, 2);
  assert_true(gr(r, 1, 0, 8192, 1, 4, &h));
  assert_hit(&h, 1, 4, 3, true, 8192);
  assert_false(hk_race_degraded(r));
  hk_race_free(r);
}

static void test_hit_fields(void **state) {
  (void)state;
  size_t bytes[] = {1 << 20};
  hk_race *r = hk_race_new(1, bytes, 1024, 1024, 64);
  assert_non_null(r);
  hk_race_hit h;
  hk_race_block(r, 123456789);
  hk_acc a = {.block = 123456789, .thread = 1000, .pc = PC(77), .write = true};
  assert_false(hk_race_global(r, 0, 4096 * 3 + 5, 2, &a, &h));
  assert_false(hk_race_shared(r, 1020, 4, &a, &h));
  hk_race_block(r, 123456790);
  hk_acc b = {.block = 123456790, .thread = 999, .pc = NULL, .write = false};
  memset(&h, 0xA5, sizeof h);
  assert_true(hk_race_global(r, 0, 4096 * 3 + 4, 4, &b, &h));
  assert_int_equal(h.prev.block, 123456789);
  assert_int_equal(h.prev.thread, 1000);
  assert_ptr_equal(h.prev.pc, PC(77));
  assert_true(h.prev.write);
  assert_int_equal(h.off, 4096 * 3 + 5);
  /* the earlier access had a NULL pc: named as NULL */
  hk_acc c = {.block = 123456790, .thread = 5, .pc = PC(1), .write = true};
  assert_true(hk_race_global(r, 0, 4096 * 3 + 4, 1, &c, &h));
  assert_int_equal(h.prev.block, 123456790);
  assert_int_equal(h.prev.thread, 999);
  assert_null(h.prev.pc);
  assert_false(h.prev.write);
  /* shared: the running block, and a NULL hit is allowed */
  assert_false(hk_race_shared(r, 1020, 4, &c, NULL));
  assert_true(hk_race_shared(r, 1022, 4, &b, &h));
  assert_int_equal(h.prev.block, 123456790);
  assert_int_equal(h.prev.thread, 5);
  assert_ptr_equal(h.prev.pc, PC(1));
  assert_int_equal(h.off, 1022);
  assert_true(hk_race_shared(r, 1020, 1, &b, NULL));
  hk_race_free(r);
}

static void test_many_pcs(void **state) {
  (void)state;
  size_t bytes[] = {64 * 1024};
  hk_race *r = hk_race_new(1, bytes, 0, 2, 1);
  assert_non_null(r);
  hk_race_block(r, 0);
  hk_race_hit h;
  for (int i = 0; i < 10000; i++) assert_false(gw(r, 0, 0, (size_t)i * 4, 4, i + 1, &h));
  for (int i = 0; i < 10000; i += 7) {
    assert_true(gr(r, 0, 1, (size_t)i * 4, 4, 1, &h));
    assert_hit(&h, 0, 0, i + 1, true, (size_t)i * 4);
  }
  hk_race_free(r);
}

/* The 16-bit event count overflows after 65,534 events of one block: the
 * answers stay as they were. */
static void test_event_count_renumbered(void **state) {
  (void)state;
  hk_race *r = new_race();
  hk_race_hit h;
  hk_race_block(r, 1);
  assert_false(sw(r, 0, 0, 4, 1, &h));    /* before a local barrier */
  assert_false(gw(r, 0, 0, 0, 4, 1, &h)); /* before a global barrier */
  hk_race_barrier(r, GLOBAL);
  assert_false(gw(r, 0, 0, 64, 4, 1, &h)); /* before a local barrier only */
  hk_race_barrier(r, LOCAL);
  assert_false(sw(r, 0, 8, 4, 2, &h));       /* after every barrier */
  assert_false(gw(r, 0, 40, 128, 4, 9, &h)); /* after every barrier, wave 1 */
  for (int i = 0; i < 200000; i++) {
    assert_false(sw(r, 40, 16, 4, 3, &h)); /* wave 1, then its synchronization */
    hk_race_wave(r, 1);
  }
  assert_false(sw(r, 41, 24, 4, 4, &h)); /* wave 1, after its last synchronization */
  assert_false(gw(r, 0, 41, 256, 4, 4, &h));
  assert_false(sr(r, 1, 0, 4, 5, &h));    /* ordered by the local barrier */
  assert_false(gr(r, 0, 1, 0, 4, 5, &h)); /* ordered by the global barrier */
  assert_true(gr(r, 0, 1, 64, 4, 5, &h)); /* a local barrier does not order global */
  assert_hit(&h, 1, 0, 1, true, 64);
  assert_true(sr(r, 1, 8, 4, 6, &h)); /* same wave, no wave 0 synchronization */
  assert_hit(&h, 1, 0, 2, true, 8);
  assert_false(gr(r, 0, 41, 128, 4, 6, &h)); /* same wave as the writer, synchronized */
  assert_true(gr(r, 0, 20, 128, 4, 6, &h));  /* another wave */
  assert_hit(&h, 1, 40, 9, true, 128);
  assert_false(sr(r, 41, 16, 4, 7, &h)); /* same wave, synchronized */
  assert_true(sr(r, 0, 16, 4, 8, &h));   /* another wave */
  assert_hit(&h, 1, 40, 3, true, 16);
  assert_true(sr(r, 42, 24, 4, 9, &h)); /* same wave, not synchronized since */
  assert_hit(&h, 1, 41, 4, true, 24);
  assert_true(gr(r, 0, 42, 256, 4, 9, &h));
  assert_hit(&h, 1, 41, 4, true, 256);
  hk_race_barrier(r, LOCAL | GLOBAL);
  assert_false(sw(r, 5, 24, 4, 10, &h));
  assert_false(gw(r, 0, 5, 256, 4, 10, &h));
  /* and one more pass past the limit, with barriers this time */
  for (int i = 0; i < 70000; i++) {
    assert_false(sw(r, i % 64, 32, 4, 11, &h));
    hk_race_barrier(r, LOCAL);
  }
  assert_false(sr(r, 5, 32, 4, 12, &h)); /* thread 47 wrote it last, then a barrier */
  assert_false(gw(r, 0, 6, 1000, 4, 12, &h));
  assert_true(gw(r, 0, 7, 1000, 4, 13, &h));
  assert_hit(&h, 1, 6, 12, true, 1000);
  hk_race_free(r);
}

static void test_thread_ids_past_44_bits(void **state) {
  (void)state;
  size_t bytes[] = {64};
  hk_race *r = hk_race_new(1, bytes, 64, 1024, 32);
  assert_non_null(r);
  hk_race_hit h;
  hk_race_block(r, UINT64_C(1) << 40); /* 2^50 threads in: global goes unchecked */
  assert_false(gw(r, 0, 0, 0, 4, 1, &h));
  assert_false(gw(r, 0, 1, 0, 4, 1, &h));
  assert_true(hk_race_degraded(r));
  assert_false(sw(r, 0, 0, 4, 1, &h)); /* shared is still checked */
  assert_true(sw(r, 1, 0, 4, 2, &h));
  assert_hit(&h, UINT64_C(1) << 40, 0, 1, true, 0);
  hk_race_free(r);
}

static void test_bad_input(void **state) {
  (void)state;
  size_t bytes[] = {16};
  assert_null(hk_race_new(1, bytes, 0, 0, 32));
  assert_null(hk_race_new(1, bytes, 0, 32, 0));
  assert_null(hk_race_new(1, NULL, 0, 32, 32));
  assert_null(hk_race_new(0, NULL, SIZE_MAX / 2, 32, 32));
  hk_race_free(NULL);
  hk_race_hit h;
  hk_acc a = acc(0, 1, true);
  assert_false(hk_race_global(NULL, 0, 0, 4, &a, &h));
  assert_false(hk_race_shared(NULL, 0, 4, &a, &h));
  assert_false(hk_race_degraded(NULL));
  hk_race *r = hk_race_new(1, bytes, 8, 32, 32);
  assert_non_null(r);
  hk_race_block(r, 0);
  assert_false(hk_race_global(r, 1, 0, 4, &a, &h));  /* no region 1 */
  assert_false(hk_race_global(r, 0, 16, 4, &a, &h)); /* past the region */
  assert_false(hk_race_shared(r, 8, 4, &a, &h));     /* past the arena */
  hk_acc bad = acc(32, 1, true);
  assert_false(hk_race_shared(r, 0, 4, &bad, &h)); /* a thread outside the block */
  assert_false(hk_race_global(r, 0, 0, 4, &bad, &h));
  assert_false(hk_race_shared(r, 0, 4, NULL, &h));
  /* what was ignored was not recorded */
  assert_false(sw(r, 1, 0, 8, 2, &h));
  assert_false(gw(r, 0, 1, 0, 16, 2, &h));
  assert_false(hk_race_degraded(r));
  hk_race_free(r);
}

static void test_out_of_memory(void **state) {
  (void)state;
  size_t bytes[] = {1 << 16, 1 << 22};
  /* hk_race_new: every allocation failing in turn gives NULL and leaks nothing */
  for (uint64_t k = 1;; k++) {
    dv__fault_host_set(k);
    hk_race *r = hk_race_new(2, bytes, 512, 64, 32);
    bool fired = !dv__fault_host_pending();
    dv__fault_host_set(0);
    if (!fired) {
      assert_non_null(r);
      hk_race_free(r);
      break;
    }
    assert_null(r);
    assert_true(k < 50);
  }
  /* a chunk that cannot be allocated: not checked, remembered, nothing else lost */
  hk_race *r = hk_race_new(2, bytes, 512, 64, 32);
  assert_non_null(r);
  hk_race_block(r, 0);
  hk_race_hit h;
  assert_false(gw(r, 0, 0, 0, 4, 1, &h)); /* page and chunk of region 0 */
  dv__fault_host_set(1);
  assert_false(gw(r, 0, 0, 8192, 4, 2, &h)); /* chunk 2 of region 0 fails */
  dv__fault_host_set(0);
  assert_true(hk_race_degraded(r));
  assert_false(gw(r, 0, 1, 8192, 4, 3, &h)); /* unchecked from now on */
  assert_true(gw(r, 0, 1, 0, 4, 4, &h));     /* chunk 0 still is */
  assert_hit(&h, 0, 0, 1, true, 0);
  dv__fault_host_set(1);
  assert_false(gw(r, 1, 0, 1 << 21, 4, 5, &h)); /* a directory page fails */
  dv__fault_host_set(0);
  assert_false(gw(r, 1, 1, (1 << 21) + 4096, 4, 6, &h)); /* the page's chunks unchecked */
  assert_false(gw(r, 1, 1, 1 << 21, 4, 6, &h));
  assert_false(gw(r, 1, 0, 0, 4, 7, &h));
  assert_true(gw(r, 1, 1, 0, 4, 8, &h));
  /* a pc table that cannot grow: pcs go unnamed, races are still found */
  dv__fault_host_set(0);
  int fails = 0;
  for (int i = 0; i < 200; i++) {
    dv__fault_host_set(1);
    bool raced = sw(r, 2, (size_t)i % 256, 1, 100 + i, &h);
    dv__fault_host_set(0);
    assert_false(raced);
    raced = sw(r, 3, (size_t)i % 256, 1, 400, &h);
    assert_true(raced);
    assert_int_equal(h.prev.thread, 2);
    if (h.prev.pc == NULL)
      fails++;
    else
      assert_ptr_equal(h.prev.pc, PC(100 + i));
    hk_race_block(r, (uint64_t)i + 1);
  }
  assert_true(fails > 0);
  hk_race_free(r);
}

/* Two views in two threads, as two executors run a launch's blocks: each
 * view's blocks write their own words of one region (whole words, and bytes
 * that split them), making its chunks and the split words' pool at the same
 * time as the other, and the same shared offsets in their own arenas.
 * Nothing races; then a write over the other view's word does. */
typedef struct view_job {
  hk_race *r;
  int first; /* blocks first, first + 2, ... */
  int raced; /* races reported (none expected) */
} view_job;

#define VIEW_BYTES (64 * 4096)

static void *view_run(void *arg) {
  view_job *j = arg;
  hk_race_hit h;
  for (int b = j->first; b < 64; b += 2) {
    hk_race_block(j->r, (uint64_t)b);
    for (int t = 0; t < 64; t++) {
      hk_acc a = {.block = (uint64_t)b, .thread = t, .pc = PC(t % 7), .write = true};
      /* word k of the region belongs to view k % 2 */
      size_t word = 2 * ((size_t)b / 2 * 64 + (size_t)t) + (size_t)j->first;
      size_t off = word * 64; /* one word in 16: every chunk of the region */
      j->raced += hk_race_global(j->r, 0, off, t % 3 ? 4 : 1, &a, &h);
      a.write = false;
      j->raced += hk_race_global(j->r, 0, off, 4, &a, &h);
      a.write = true;
      j->raced += hk_race_shared(j->r, 4 * (size_t)t, 4, &a, &h);
    }
    hk_race_barrier(j->r, LOCAL | GLOBAL);
  }
  return NULL;
}

static void test_views_in_parallel(void **state) {
  (void)state;
  size_t bytes[] = {VIEW_BYTES};
  hk_race *r0 = hk_race_new(1, bytes, 256, 64, 32);
  assert_non_null(r0);
  assert_null(hk_race_view(NULL));
  hk_race *r1 = hk_race_view(r0);
  assert_non_null(r1);
  view_job j[2] = {{r0, 0, 0}, {r1, 1, 0}};
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, view_run, &j[1]), 0);
  view_run(&j[0]);
  assert_int_equal(pthread_join(th, NULL), 0);
  assert_int_equal(j[0].raced, 0);
  assert_int_equal(j[1].raced, 0);
  assert_false(hk_race_degraded(r0));
  /* word 0 is view 0's (block 0, thread 0, pc 0): view 1's block 99 races */
  hk_race_block(r1, 99);
  hk_race_hit h;
  hk_acc a = {.block = 99, .thread = 5, .pc = PC(9), .write = true};
  assert_true(hk_race_global(r1, 0, 0, 4, &a, &h));
  assert_int_equal(h.prev.block % 2, 0);
  assert_int_equal(h.off, 0);
  /* the arena is the view's own: view 1 saw none of view 0's shared writes */
  assert_false(sw(r1, 7, 0, 4, 3, &h));
  hk_race_free(r0); /* either order: the last view frees the launch's shadow */
  hk_race_free(r1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_shared_write_write),
      cmocka_unit_test(test_shared_read_then_write),
      cmocka_unit_test(test_shared_write_then_read),
      cmocka_unit_test(test_shared_ordered_by_local_barrier),
      cmocka_unit_test(test_missing_barrier_in_reduction),
      cmocka_unit_test(test_global_fence_does_not_order_shared),
      cmocka_unit_test(test_local_fence_does_not_order_global),
      cmocka_unit_test(test_global_same_block_ordered_by_global_barrier),
      cmocka_unit_test(test_global_across_blocks),
      cmocka_unit_test(test_waves),
      cmocka_unit_test(test_adjacent_bytes),
      cmocka_unit_test(test_partial_overlap),
      cmocka_unit_test(test_split_and_joined_words),
      cmocka_unit_test(test_two_readers_then_write),
      cmocka_unit_test(test_own_accesses),
      cmocka_unit_test(test_history_per_block),
      cmocka_unit_test(test_big_region_far_offset),
      cmocka_unit_test(test_hit_fields),
      cmocka_unit_test(test_many_pcs),
      cmocka_unit_test(test_event_count_renumbered),
      cmocka_unit_test(test_thread_ids_past_44_bits),
      cmocka_unit_test(test_bad_input),
      cmocka_unit_test(test_out_of_memory),
      cmocka_unit_test(test_views_in_parallel),
  };
  return cmocka_run_group_tests_name("host_race", tests, NULL, NULL);
}
