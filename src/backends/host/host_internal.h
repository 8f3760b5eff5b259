/* The host simulator's block layout, shared with its white-box tests
 * (tests/test_simulator.c), which corrupt memory on purpose. */
#ifndef DV_HOST_INTERNAL_H
#define DV_HOST_INTERNAL_H
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct hb_state hb_state;

typedef struct hb_block {
  _Atomic int refs;      /* owner (1 until freed) + queued operations */
  _Atomic bool freed;    /* mem_free was called */
  bool alias;            /* a device view of host memory (mapped): no guards, no capacity */
  size_t bytes;          /* payload bytes */
  size_t charged;        /* bytes counted against the capacity */
  unsigned char *base;   /* allocation start (guards included) */
  unsigned char *data;   /* payload */
  struct hb_block *prev, *next; /* live list / quarantine list */
  hb_state *st;
} hb_block;

#endif
