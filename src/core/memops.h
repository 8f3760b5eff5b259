/* Host-memory gather/scatter: plain copies between host addresses, used by
 * the host simulator's stream workers and by the planner's CPU repack. */
#ifndef DV_MEMOPS_H
#define DV_MEMOPS_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
/* Copy an nd-dimensional strided region (byte strides, any sign) of
 * itemsize-byte elements from src to dst; pointers address element 0.
 * The two regions must not share a byte unless both are dense with the same
 * layout (callers copy overlapping views through a temporary): short rows
 * are copied several at a time. */
void dv__strided_copy(void *dst, const int64_t *dst_strides, const void *src,
                      const int64_t *src_strides, const int64_t *shape, int nd, size_t itemsize);
/* A rectangular copy (see dv_rect in backends/backend.h) between host
 * addresses.  No destination byte is written by two rows (as every rect the
 * planner makes): a long copy's rows may be copied by two threads at once,
 * in any order. */
void dv__rect_copy(void *dst, size_t dpitch, size_t dslice, const void *src, size_t spitch,
                   size_t sslice, size_t width, size_t height, size_t depth);
/* Tests: with on, the portable loops even where the processor has AVX2;
 * returns the previous setting (always true where the build has no AVX2
 * loops: other than x86 or other than GCC and Clang). */
bool dv__memops_portable(bool on);
/* Tests: rect copies of at least `bytes` bytes use streaming stores where
 * their layout allows (memops.c, DV_STREAM_MIN by default); returns the
 * previous setting (SIZE_MAX where the build has no streaming stores). */
size_t dv__memops_stream_min(size_t bytes);
/* Streamed rect copies of at least `bytes` bytes (16 MiB by default) are
 * shared with a helper thread made for the copy (memops.c); returns the
 * previous setting (SIZE_MAX where the build has no streaming stores). */
size_t dv__memops_split_min(size_t bytes);
/* 1: never split; 0 (the default): split where two CPUs are online; 2:
 * split.  Returns the previous setting. */
int dv__memops_threads(int n);
/* Copies split so far (tests). */
uint64_t dv__memops_splits(void);
#endif
