/*
 * Smart arrays (smart.c): one array kept in host and device memory with a
 * valid bit per copy.  The kernel layer asks a smart argument for its
 * device copy before a launch and tells it afterwards what the kernel did.
 */
#ifndef DV_SMART_H
#define DV_SMART_H

#include "array.h"

/* The context the smart array belongs to. */
dv_context *dv__smart_context(const dv_smart *s);
/* Make sure s has a device copy (allocated for `stream`; nothing moves). */
dv_status dv__smart_reserve(dv_smart *s, dv_stream *stream);
/* The device copy of s (reserved before), made current on `stream` first
 * unless `upload` is false (the kernel overwrites it).  *dev is borrowed. */
dv_status dv__smart_for_launch(dv_smart *s, dv_stream *stream, bool upload, dv_array **dev);
/* Whether the device copy, or the one a launch would make (laid out as
 * dv_device_array_like lays out the host copy), is C-contiguous: what a
 * DV_ARRAY parameter needs (the contract, src/kernel/contract.c). */
bool dv__smart_device_c_contiguous(dv_smart *s);
/* A launch that wrote the device copy was queued: the host copy is stale. */
void dv__smart_device_written(dv_smart *s);

#endif
