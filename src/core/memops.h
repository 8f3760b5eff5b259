#ifndef DV_MEMOPS_H
#define DV_MEMOPS_H
#include <stddef.h>
#include <stdint.h>
/* Copy an nd-dimensional strided region (byte strides, any sign) of
 * itemsize-byte elements from src to dst; pointers address element 0. */
void dv__strided_copy(void *dst, const int64_t *dst_strides, const void *src,
                      const int64_t *src_strides, const int64_t *shape, int nd, size_t itemsize);
/* A rectangular copy (see dv_rect) between host addresses. */
void dv__rect_copy(void *dst, size_t dpitch, size_t dslice, const void *src, size_t spitch,
                   size_t sslice, size_t width, size_t height, size_t depth);

#include "../backends/backend.h"
/* The backend's stream_callback method. */
typedef dv_status (*dv_bcallback_queue_fn)(void *state, dv_bstream *s, dv_bcallback_fn fn, void *user);
/* Queue a host-to-host rect copy in stream order through `queue`. */
dv_status dv__host_rect_in_order(dv_bcallback_queue_fn queue, void *state, dv_bstream *s, const dv_rect *r);
#endif
