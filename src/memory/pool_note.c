/*
 * What the pool tells beyond itself (pool_internal.h): its allocation log
 * (option pool_log: RMM's CSV columns) and, while an NVTX tool listens
 * (compute-sanitizer; src/core/nvtx.c), its memory as the tool's memory
 * extension describes a sub-allocator: each segment a heap, each block
 * handed out a region of exactly the bytes asked for, unregistered when it
 * is freed and the heap when the segment goes back to the device (a trim,
 * a release threshold, the pool's end).  memcheck then reports an access
 * outside an array even inside a segment.  CUDA only: its buffers are the
 * device addresses the tool knows.  Both force the pool's slow paths.
 */
#include <stdio.h>
#include <time.h>

#include "pool_internal.h"

static const void *addr_of(const dv_block *blk) { return (const char *)blk->buf + blk->offset; }

void dv__pool_note(pool *p, const char *action, const dv_block *blk, const pool_block *b,
                   size_t size, const pool_stream *ps) {
  if (p->nvtx && b && b->seg->nvtx_heap) {
    if (action[0] == 'a')
      dv__nvtx_region_register(b->seg->nvtx_heap, addr_of(blk), size);
    else
      dv__nvtx_region_unregister(addr_of(blk));
  }
  if (!p->log) return;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  pthread_mutex_lock(&p->log_m);
  fprintf(p->log, "%lu,%lld.%09ld,%s,%p,%zu,%d\n", (unsigned long)pthread_self(),
          (long long)ts.tv_sec, ts.tv_nsec, action, addr_of(blk), size, ps ? ps->id : 0);
  pthread_mutex_unlock(&p->log_m);
}

void dv__pool_note_segment(pool *p, pool_segment *seg, bool made) {
  (void)p;
  if (made) {
    seg->nvtx_heap = dv__nvtx_heap_register(addr_of(&seg->mem), seg->size, "devarray pool segment");
  } else if (seg->nvtx_heap) {
    dv__nvtx_heap_unregister(seg->nvtx_heap);
    seg->nvtx_heap = NULL;
  }
}
