/*
 * The access checks' state (issue 24, kernel_check=on), private to tools/:
 * shared by the tool (access.c) and memcheck's reports (memcheck.c).  The
 * simulator sees only the tool's hooks (exec/exec.h's hk_tool), plugged
 * in by tools.c.
 */
#ifndef DV_HOST_TOOLS_ACCESS_H
#define DV_HOST_TOOLS_ACCESS_H
#include <stdatomic.h>

#include "../exec/exec.h"
#include "check.h"

/* One array argument of the launch. */
typedef struct hkt_garg {
  int param;        /* its position in the kernel's parameter list (0-based) */
  int region;       /* its buffer's region (-1: none, an empty array) */
  uintptr_t base;   /* its element 0 (the buffer's data plus its offset) */
  uintptr_t lo, hi; /* the bytes it spans */
  size_t item;      /* its element's bytes */
  char name[48];    /* the parameter's name */
} hkt_garg;

/* One device buffer the launch uses (arguments on one buffer share it). */
typedef struct hkt_region {
  uintptr_t lo, hi;
} hkt_region;

/* What one executor's blocks of the launch need (its lane, its
 * hk_xview.tool[] entry while it runs them): its view of the race state,
 * its shared arena's init bits, its caches. */
typedef struct hkt_lane {
  struct hkt_access *a; /* the launch's */
  hk_race *race;
  hk_init *init;
  int last;      /* the argument the last global access fell in */
  int slot[2];   /* the shared arrays (hk_xview's slots) two last shared accesses fell in */
  int slot_next; /* which of them the next new one replaces */
  /* The block's first read of uninitialized shared memory, reported at the
   * barrier that ends its interval or at the block's end (the pending
   * hook) unless a race report comes first: a thread that writes those
   * bytes later in the same interval makes it a race (a missing barrier),
   * which says more than "uninitialized". */
  bool uninit;
  char uninit_msg[512];
} hkt_lane;

/* The tool's state of one launch (its slot). */
typedef struct hkt_access {
  size_t nregions, nargs;
  hkt_region *regions;
  hkt_garg *args;
  /* While the launch runs (its start hook to its stop hook): a lane per
   * executor that may run its blocks, taken in turn (the enter hook). */
  hkt_lane *lanes;
  int nlanes;
  atomic_int lanes_taken;
  bool degraded; /* some global memory went unchecked for races (no memory for its shadow) */
} hkt_access;

/* ---- memcheck.c ---- */
/* "shared array 'tile' element 17" (or the dynamic area's) for arena
 * offset off of ex's running block.  Returns the slot (-1: in none). */
int hkt_mc_shared_name(const hk_exec *ex, size_t off, char *buf, size_t cap);
/* "argument 1 'out' element 3" for byte off of region g. */
void hkt_mc_global_name(const hkt_access *a, int g, size_t off, char *buf, size_t cap);
/* "thread (x,y,z) of block (x,y,z)" of thread t of linear block b. */
void hkt_mc_who(const hk_exec *ex, uint64_t block, int t, char *buf, size_t cap);
/* The report of an access of [p, p + n) outside every shared array (in
 * the arena) / outside every array of the launch, into msg. */
void hkt_mc_shared_fault(const hk_exec *ex, uintptr_t p, size_t n, bool write, const void *pc,
                         char *msg, size_t cap);
void hkt_mc_global_fault(const hk_exec *ex, const hkt_access *a, uintptr_t p, size_t n, bool write,
                         const void *pc, char *msg, size_t cap);

#endif
