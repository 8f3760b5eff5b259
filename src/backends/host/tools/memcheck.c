/*
 * memcheck's reports (issue 24, kernel_check=on): an access outside every
 * array is reported at the access (access.c finds it), naming the
 * kernel, the thread, the source line, the nearest array (the shared array
 * it ran past, or the argument whose span is closest, with its name and
 * position from the kernel's signature), the element index and the
 * array's extent.  Also the names the other checks' reports use: a shared
 * array's or an argument's element for an offset.
 */
#include <stdio.h>
#include <string.h>

#include "access.h"

void hkt_mc_who(const hk_exec *ex, uint64_t block, int t, char *buf, size_t cap) {
  unsigned b[3], c[3];
  hk_coords(block, hk_job_view(hk_exec_view(ex)->l)->grid, b);
  hk_coords((uint64_t)t, hk_job_view(hk_exec_view(ex)->l)->block, c);
  hk_fmt(buf, cap, "thread (%u,%u,%u) of block (%u,%u,%u)", c[0], c[1], c[2], b[0], b[1], b[2]);
}

/* The dynamic area's take (DV_DYN_SHARED_TAKE) holding offset off, or NULL. */
static const hk_slot *hkt_mc_take(const hk_exec *ex, size_t off) {
  for (int i = 0; i < hk_exec_view(ex)->ntakes; i++)
    if (off >= hk_exec_view(ex)->takes[i].off &&
        off - hk_exec_view(ex)->takes[i].off < hk_exec_view(ex)->takes[i].bytes)
      return &hk_exec_view(ex)->takes[i];
  return NULL;
}

int hkt_mc_shared_name(const hk_exec *ex, size_t off, char *buf, size_t cap) {
  for (int s = 0; s < hk_exec_view(ex)->nslots; s++) {
    const hk_slot *sl = &hk_exec_view(ex)->slots[s];
    if (off < sl->off || off - sl->off >= sl->bytes) continue;
    if (s == 0) { /* the dynamic area */
      const hk_slot *t = hkt_mc_take(ex, off);
      if (t)
        hk_fmt(buf, cap, "dynamic shared array '%s' element %zu", t->name,
               (off - t->off) / t->item);
      else
        hk_fmt(buf, cap, "dynamic shared memory byte %zu", off);
    } else {
      hk_fmt(buf, cap, "shared array '%s' element %zu", sl->name, (off - sl->off) / sl->item);
    }
    return s;
  }
  hk_fmt(buf, cap, "shared memory byte %zu", off);
  return -1;
}

void hkt_mc_global_name(const hkt_access *a, int g, size_t off, char *buf, size_t cap) {
  const uintptr_t p = a->regions[g].lo + off;
  for (size_t i = 0; i < a->nargs; i++) {
    const hkt_garg *ga = &a->args[i];
    if (ga->region != g || p < ga->lo || p >= ga->hi) continue;
    hk_fmt(buf, cap, "argument %d '%s' element %lld", ga->param, ga->name,
           (long long)((int64_t)(p - ga->base) / (int64_t)ga->item));
    return;
  }
  hk_fmt(buf, cap, "byte %zu of a device buffer", off);
}

/* Floor division (an index before element 0 is negative). */
static long long hkt_mc_index(intptr_t d, size_t item) {
  long long q = (long long)d / (long long)item;
  if (d < 0 && (long long)d % (long long)item) q--;
  return q;
}

void hkt_mc_shared_fault(const hk_exec *ex, uintptr_t p, size_t n, bool write, const void *pc,
                         char *msg, size_t cap) {
  char who[96], at[160], what[220];
  hkt_mc_who(ex, hk_exec_view(ex)->block, hk_exec_view(ex)->cur, who, sizeof who);
  hk_line_of(hk_exec_view(ex)->m, pc, at, sizeof at);
  const size_t off = p - (uintptr_t)hk_exec_view(ex)->arena;
  /* The array it ran past (or into): the last that starts at or before it. */
  const hk_slot *near = NULL;
  int ns = -1;
  for (int s = 0; s < hk_exec_view(ex)->nslots; s++)
    if (hk_exec_view(ex)->slots[s].off <= off &&
        (!near || hk_exec_view(ex)->slots[s].off >= near->off))
      near = &hk_exec_view(ex)->slots[s], ns = s;
  if (ns == 0) { /* the dynamic area: its last take, if any */
    const hk_slot *t = NULL;
    for (int i = 0; i < hk_exec_view(ex)->ntakes; i++)
      if (hk_exec_view(ex)->takes[i].off <= off && (!t || hk_exec_view(ex)->takes[i].off >= t->off))
        t = &hk_exec_view(ex)->takes[i];
    if (t)
      hk_fmt(what, sizeof what,
             "dynamic shared array '%s' (%zu elements of %zu bytes; the "
             "launch gave %zu bytes of dynamic shared memory): element %lld",
             t->name, t->bytes / t->item, t->item, hk_exec_view(ex)->dyn_bytes,
             hkt_mc_index((intptr_t)(off - t->off), t->item));
    else
      hk_fmt(what, sizeof what, "dynamic shared memory (%zu bytes): byte %zu",
             hk_exec_view(ex)->dyn_bytes, off);
  } else if (near) {
    hk_fmt(what, sizeof what, "shared array '%s' (%zu elements of %zu bytes, %s:%d): element %lld",
           near->name, near->bytes / near->item, near->item, hk_exec_view(ex)->m->name, near->line,
           hkt_mc_index((intptr_t)(off - near->off), near->item));
  } else {
    hk_fmt(what, sizeof what, "every shared array: shared memory byte %zu", off);
  }
  (void)n;
  hk_fmt(msg, cap, "kernel %s: %s outside %s, by %s at %s",
         hk_job_view(hk_exec_view(ex)->l)->kern->name, write ? "write" : "read", what, who, at);
}

void hkt_mc_global_fault(const hk_exec *ex, const hkt_access *a, uintptr_t p, size_t n, bool write,
                         const void *pc, char *msg, size_t cap) {
  char who[96], at[160], what[300];
  hkt_mc_who(ex, hk_exec_view(ex)->block, hk_exec_view(ex)->cur, who, sizeof who);
  hk_line_of(hk_exec_view(ex)->m, pc, at, sizeof at);
  /* The nearest argument: the one whose span is closest to the access. */
  const hkt_garg *near = NULL;
  uintptr_t best = UINTPTR_MAX;
  for (size_t i = 0; i < a->nargs; i++) {
    const hkt_garg *g = &a->args[i];
    uintptr_t d = p < g->lo ? g->lo - p : p >= g->hi ? p - g->hi + 1 : 0;
    if (d < best) best = d, near = g;
  }
  if (near && best <= ((uintptr_t)1 << 20)) {
    size_t elems = (size_t)(near->hi - near->lo) / near->item;
    /* an access that starts inside and runs past the end: its first byte
     * outside names the element */
    const uintptr_t q = p >= near->lo && p < near->hi ? near->hi : p;
    char from[80] = "";
    if (q != p)
      hk_fmt(from, sizeof from, " (%zu bytes from element %lld)", n,
             hkt_mc_index((intptr_t)(p - near->base), near->item));
    hk_fmt(what, sizeof what, "argument %d '%s' (%zu element%s of %zu bytes): element %lld%s",
           near->param, near->name, elems, elems == 1 ? "" : "s", near->item,
           hkt_mc_index((intptr_t)(q - near->base), near->item), from);
  } else {
    hk_fmt(what, sizeof what, "every array of the launch: address %p (a wild pointer)", (void *)p);
  }
  hk_fmt(msg, cap, "kernel %s: %s outside %s, by %s at %s",
         hk_job_view(hk_exec_view(ex)->l)->kern->name, write ? "write" : "read", what, who, at);
}
