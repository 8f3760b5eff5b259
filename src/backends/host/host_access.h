/*
 * The access checks' launch state (issue 24), shared by the dispatch
 * (host_access.c) and memcheck's reports (host_memcheck.c).  The rest of
 * the simulator sees only host_kernel_internal.h's hk_access_* functions.
 */
#ifndef DV_HOST_ACCESS_H
#define DV_HOST_ACCESS_H
#include "host_check.h"
#include "exec/exec_internal.h"

/* One array argument of the launch. */
typedef struct hk_garg {
  int param;        /* its position in the kernel's parameter list (0-based) */
  int region;       /* its buffer's region (-1: none, an empty array) */
  uintptr_t base;   /* its element 0 (the buffer's data plus its offset) */
  uintptr_t lo, hi; /* the bytes it spans */
  size_t item;      /* its element's bytes */
  char name[48];    /* the parameter's name */
} hk_garg;

/* One device buffer the launch uses (arguments on one buffer share it). */
typedef struct hk_region {
  uintptr_t lo, hi;
} hk_region;

/* What one executor thread's blocks of the launch need (its lane): its
 * view of the race state, its shared arena's init bits, its caches. */
struct hk_lane {
  hk_race *race;
  hk_init *init;
  int last;    /* the argument the last global access fell in */
  int slot[2]; /* the shared arrays (hk_exec's slots) two last shared accesses fell in */
  int slot_next; /* which of them the next new one replaces */
  /* The block's first read of uninitialized shared memory, reported at the
   * barrier that ends its interval or at the block's end (hk_access_pending)
   * unless a race report comes first: a thread that writes those bytes
   * later in the same interval makes it a race (a missing barrier), which
   * says more than "uninitialized". */
  bool uninit;
  char uninit_msg[512];
};

struct hk_access {
  size_t nregions, nargs;
  hk_region *regions;
  hk_garg *args;
  /* While the launch runs (hk_access_start): a lane per executor that may
   * run its blocks, taken in turn (hk_access_lane). */
  hk_lane *lanes;
  int nlanes;
  atomic_int lanes_taken;
};

/* ---- host_memcheck.c ---- */
/* "shared array 'tile' element 17" (or the dynamic area's) for arena
 * offset off of ex's running block.  Returns the slot (-1: in none). */
int hk_mc_shared_name(const hk_exec *ex, size_t off, char *buf, size_t cap);
/* "argument 1 'out' element 3" for byte off of region g. */
void hk_mc_global_name(const hk_access *a, int g, size_t off, char *buf, size_t cap);
/* "thread (x,y,z) of block (x,y,z)" of thread t of linear block b. */
void hk_mc_who(const hk_exec *ex, uint64_t block, int t, char *buf, size_t cap);
/* The report of an access of [p, p + n) outside every shared array (in
 * the arena) / outside every array of the launch, into ex->fault. */
void hk_mc_shared_fault(hk_exec *ex, uintptr_t p, size_t n, bool write, const void *pc);
void hk_mc_global_fault(hk_exec *ex, const hk_access *a, uintptr_t p, size_t n, bool write,
                        const void *pc);

#endif
