/*
 * A stand-in NVTX tool for tests/memory/test_nvtx.c: a library that takes
 * NVTX's injection as compute-sanitizer's does (InitializeInjectionNvtx2
 * for the core's ranges and domains, InitializeInjectionNvtxExtension for
 * the memory extension), written from NVTX's published ABI, and records
 * what devarray tells it: heaps, regions, ranges.  Every call is checked
 * against the ABI (compatibility id, structure sizes, a region inside its
 * heap, an unregister of something registered); what does not hold counts
 * as an error (nvtxtool_errors).  The test reaches the counters through
 * dlopen of the same library (the one NVTX_INJECTION64_PATH names).
 */
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

typedef void (*fn)(void);
typedef struct callbacks {
  size_t struct_size;
  int (*get_module_function_table)(int module, fn ***out_table, unsigned *out_size);
} callbacks;
typedef struct segment {
  size_t id, slot_count;
  intptr_t *slots;
} segment;
typedef struct module_info {
  uint16_t nvtx_ver, struct_size, module_id, compat_id;
  size_t segments_count;
  segment *segments;
  intptr_t (*get_export_function)(uint32_t id);
  const void *ext_info;
} module_info;
typedef struct range_desc {
  size_t size;
  const void *ptr;
} range_desc;
typedef struct heap_desc {
  uint16_t compat, struct_size;
  uint32_t reserved0, usage, type;
  size_t type_desc_size;
  const void *type_desc;
  uint32_t category, message_type;
  const char *message;
} heap_desc;
typedef struct regions_register {
  uint16_t compat, struct_size;
  uint32_t region_type;
  void *heap;
  size_t count, element_size;
  const void *elements;
  void **handles_out;
} regions_register;
typedef struct regions_unregister {
  uint16_t compat, struct_size;
  uint32_t ref_type;
  size_t count, element_size;
  const void *const *refs;
} regions_unregister;

enum { MAXH = 256, MAXR = 4096 };
static pthread_mutex_t L = PTHREAD_MUTEX_INITIALIZER;
static struct {
  uintptr_t lo, hi;
  int live;
} g_heaps[MAXH];
static struct {
  uintptr_t lo;
  size_t size;
  int heap, live;
} g_regions[MAXR];
static long g_errors, g_pushes, g_pops, g_heaps_made, g_regions_made;
static char g_domain[64];
static int g_depth;

static void *t_domain_create(const char *name) {
  pthread_mutex_lock(&L);
  if (name) strncpy(g_domain, name, sizeof g_domain - 1);
  pthread_mutex_unlock(&L);
  return (void *)(uintptr_t)0xd0;
}
static int t_range_push(void *domain, const void *attr) {
  const uint16_t *v = attr; /* version 3, size 48 */
  pthread_mutex_lock(&L);
  if (!attr || v[0] != 3 || v[1] != 48 || domain != (void *)(uintptr_t)0xd0) g_errors++;
  g_pushes++;
  int d = ++g_depth;
  pthread_mutex_unlock(&L);
  return d;
}
static int t_range_pop(void *domain) {
  pthread_mutex_lock(&L);
  if (domain != (void *)(uintptr_t)0xd0 || g_depth == 0) g_errors++;
  g_pops++;
  int d = g_depth--;
  pthread_mutex_unlock(&L);
  return d;
}

static void *t_heap_register(void *domain, const heap_desc *d) {
  (void)domain;
  pthread_mutex_lock(&L);
  void *h = NULL;
  if (!d || d->compat != 0x0102 || d->struct_size != sizeof *d || d->usage != 1 || d->type != 1 ||
      d->type_desc_size != sizeof(range_desc) || !d->type_desc) {
    g_errors++;
  } else {
    const range_desc *r = d->type_desc;
    for (int i = 0; i < MAXH; i++)
      if (!g_heaps[i].live) {
        g_heaps[i].lo = (uintptr_t)r->ptr, g_heaps[i].hi = (uintptr_t)r->ptr + r->size,
        g_heaps[i].live = 1;
        g_heaps_made++;
        h = (void *)(uintptr_t)(i + 1);
        break;
      }
    if (!h) g_errors++;
  }
  pthread_mutex_unlock(&L);
  return h;
}
static void t_heap_unregister(void *domain, void *heap) {
  (void)domain;
  int i = (int)(uintptr_t)heap - 1;
  pthread_mutex_lock(&L);
  if (i < 0 || i >= MAXH || !g_heaps[i].live)
    g_errors++;
  else
    g_heaps[i].live = 0;
  for (int r = 0; r < MAXR; r++)
    if (g_regions[r].live && g_regions[r].heap == i)
      g_errors++, g_regions[r].live = 0; /* a block still out */
  pthread_mutex_unlock(&L);
}
static void t_regions_register(void *domain, const regions_register *b) {
  (void)domain;
  pthread_mutex_lock(&L);
  int h = (int)(uintptr_t)(b ? b->heap : NULL) - 1;
  if (!b || b->compat != 0x0102 || b->struct_size != sizeof *b || b->region_type != 1 ||
      b->count != 1 || b->element_size != sizeof(range_desc) || h < 0 || h >= MAXH ||
      !g_heaps[h].live) {
    g_errors++;
  } else {
    const range_desc *r = b->elements;
    uintptr_t lo = (uintptr_t)r->ptr;
    if (lo < g_heaps[h].lo || lo + r->size > g_heaps[h].hi) g_errors++;
    int done = 0;
    for (int i = 0; i < MAXR && !done; i++)
      if (!g_regions[i].live)
        g_regions[i].lo = lo, g_regions[i].size = r->size, g_regions[i].heap = h,
        g_regions[i].live = 1, done = 1;
    if (!done) g_errors++;
    g_regions_made++;
  }
  pthread_mutex_unlock(&L);
}
static void t_regions_unregister(void *domain, const regions_unregister *b) {
  (void)domain;
  pthread_mutex_lock(&L);
  if (!b || b->compat != 0x0102 || b->struct_size != sizeof *b || b->ref_type != 1 ||
      b->count != 1) {
    g_errors++;
  } else {
    uintptr_t p = (uintptr_t)b->refs[0];
    int found = 0;
    for (int i = 0; i < MAXR && !found; i++)
      if (g_regions[i].live && g_regions[i].lo == p) g_regions[i].live = 0, found = 1;
    if (!found) g_errors++;
  }
  pthread_mutex_unlock(&L);
}

EXPORT int InitializeInjectionNvtx2(const void *(*get_export_table)(uint32_t id)) {
  const callbacks *cb = get_export_table ? get_export_table(1) : NULL;
  fn **t = NULL;
  unsigned n = 0;
  if (!cb || cb->struct_size != sizeof *cb || !cb->get_module_function_table(5, &t, &n) || n < 15)
    return 0;
  *t[12] = (fn)t_domain_create;
  *t[4] = (fn)t_range_push;
  *t[5] = (fn)t_range_pop;
  return 1;
}

EXPORT int InitializeInjectionNvtxExtension(module_info *info) {
  if (!info || info->module_id != 1 || info->compat_id != 0x0102 || info->nvtx_ver != 3 ||
      info->struct_size != sizeof *info || info->segments_count != 1 ||
      info->segments[0].slot_count < 6)
    return 0;
  intptr_t *s = info->segments[0].slots;
  s[0] = (intptr_t)t_heap_register;
  s[1] = (intptr_t)t_heap_unregister;
  s[3] = (intptr_t)t_regions_register;
  s[5] = (intptr_t)t_regions_unregister;
  return 1;
}

/* The test's view. */
EXPORT long nvtxtool_live_heaps(void) {
  long n = 0;
  pthread_mutex_lock(&L);
  for (int i = 0; i < MAXH; i++) n += g_heaps[i].live;
  pthread_mutex_unlock(&L);
  return n;
}
EXPORT long nvtxtool_live_regions(void) {
  long n = 0;
  pthread_mutex_lock(&L);
  for (int i = 0; i < MAXR; i++) n += g_regions[i].live;
  pthread_mutex_unlock(&L);
  return n;
}
/* The size of the live region starting at p, or -1. */
EXPORT long nvtxtool_region_size(const void *p) {
  long n = -1;
  pthread_mutex_lock(&L);
  for (int i = 0; i < MAXR; i++)
    if (g_regions[i].live && g_regions[i].lo == (uintptr_t)p) n = (long)g_regions[i].size;
  pthread_mutex_unlock(&L);
  return n;
}
EXPORT long nvtxtool_count(const char *what) {
  long n = -1;
  pthread_mutex_lock(&L);
  if (!strcmp(what, "errors"))
    n = g_errors;
  else if (!strcmp(what, "pushes"))
    n = g_pushes;
  else if (!strcmp(what, "pops"))
    n = g_pops;
  else if (!strcmp(what, "heaps_made"))
    n = g_heaps_made;
  else if (!strcmp(what, "regions_made"))
    n = g_regions_made;
  pthread_mutex_unlock(&L);
  return n;
}
EXPORT const char *nvtxtool_domain(void) { return g_domain; }
