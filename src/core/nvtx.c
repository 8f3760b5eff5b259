/*
 * NVTX through its dynamic injection (issue 40 item 4): what an NVIDIA tool
 * (compute-sanitizer, Nsight Systems) hears of devarray's memory and, as an
 * option, of its operations, without a link to anything.
 *
 * A tool that listens names its library in NVTX_INJECTION64_PATH (it sets
 * the variable when it starts the program).  At the first use devarray
 * loads that library and hands it NVTX's two entry points, as NVTX's own
 * header-only client does: InitializeInjectionNvtx2 gets the export-table
 * function, through which the tool fills the tables of the core modules
 * (devarray calls three entries of CORE2: a domain, range push and pop);
 * InitializeInjectionNvtxExtension gets the memory extension's module
 * (its one segment of function slots, which the tool fills).  The layouts
 * are NVTX's published ABI (nvToolsExt.h, nvToolsExtMem.h, the NVTX v3
 * export tables), declared here; no NVTX code or header is used.  Without
 * the variable, or when the library or its entry points are missing,
 * nothing is loaded and every function below does nothing.
 *
 * Thread-safe: the load runs once (pthread_once); the tool's functions are
 * called from any thread, as NVTX allows.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"

/* ---- NVTX's ABI ---------------------------------------------------------------- */

typedef void (*nv_fn)(void);
enum { NV_ETID_CALLBACKS = 1, NV_ETID_VERSIONINFO = 3 };
enum {
  NV_MODULE_CORE = 1,
  NV_MODULE_CUDA = 2,
  NV_MODULE_OPENCL = 3,
  NV_MODULE_CUDART = 4,
  NV_MODULE_CORE2 = 5,
  NV_MODULE_SYNC = 6
};
/* each module's callback count (its table has one more, NULL, entry) */
enum {
  NV_CORE_SIZE = 16,
  NV_CUDA_SIZE = 9,
  NV_OPENCL_SIZE = 15,
  NV_CUDART_SIZE = 7,
  NV_CORE2_SIZE = 16,
  NV_SYNC_SIZE = 7
};
enum {
  NV_CORE2_RANGE_PUSH_EX = 4,
  NV_CORE2_RANGE_POP = 5,
  NV_CORE2_DOMAIN_CREATE_A = 12,
  NV_CORE2_DOMAIN_DESTROY = 14
};

typedef struct nv_callbacks {
  size_t struct_size;
  int (*get_module_function_table)(int module, nv_fn ***out_table, unsigned *out_size);
} nv_callbacks;
typedef struct nv_version_info {
  size_t struct_size;
  uint32_t version, reserved0;
  void (*set_injection_nvtx_version)(uint32_t version);
} nv_version_info;
typedef int (*nv_init_core_fn)(const void *(*get_export_table)(uint32_t id));

/* The memory extension (nvToolsExtMem.h): module 1, compatibility 0x0102. */
enum { NV_MEM_MODULE = 1, NV_MEM_COMPAT = 0x0102, NV_MEM_SLOTS = 63 };
enum {
  NV_MEM_HEAP_REGISTER = 0,
  NV_MEM_HEAP_UNREGISTER = 1,
  NV_MEM_REGIONS_REGISTER = 3,
  NV_MEM_REGIONS_UNREGISTER = 5
};
enum {
  NV_MEM_USAGE_SUB_ALLOCATOR = 1,
  NV_MEM_TYPE_VIRTUAL_ADDRESS = 1,
  NV_MEM_REF_POINTER = 1,
  NV_MESSAGE_ASCII = 1
};
typedef struct nv_segment {
  size_t segment_id, slot_count;
  intptr_t *slots;
} nv_segment;
typedef struct nv_module_info {
  uint16_t nvtx_ver, struct_size, module_id, compat_id;
  size_t segments_count;
  nv_segment *segments;
  intptr_t (*get_export_function)(uint32_t id);
  const void *ext_info;
} nv_module_info;
typedef int (*nv_init_ext_fn)(nv_module_info *info);
typedef struct nv_range {
  size_t size;
  const void *ptr;
} nv_range;
typedef struct nv_heap_desc {
  uint16_t compat, struct_size;
  uint32_t reserved0, usage, type;
  size_t type_desc_size;
  const void *type_desc;
  uint32_t category, message_type;
  const char *message; /* nvtxMessageValue_t: its ascii member */
} nv_heap_desc;
typedef struct nv_regions_register {
  uint16_t compat, struct_size;
  uint32_t region_type;
  void *heap;
  size_t count, element_size;
  const void *elements;
  void **handles_out;
} nv_regions_register;
typedef struct nv_regions_unregister {
  uint16_t compat, struct_size;
  uint32_t ref_type;
  size_t count, element_size;
  const void *const *refs; /* nvtxMemRegionRef_t: its pointer member */
} nv_regions_unregister;
typedef struct nv_event_attributes {
  uint16_t version, size;
  uint32_t category;
  int32_t color_type;
  uint32_t color;
  int32_t payload_type, reserved0;
  uint64_t payload;
  int32_t message_type;
  const char *message;
} nv_event_attributes;

/* ---- the client's tables -------------------------------------------------------- */

static nv_fn nv_core2[NV_CORE2_SIZE];
static nv_fn nv_other[NV_CORE_SIZE + NV_CUDA_SIZE + NV_OPENCL_SIZE + NV_CUDART_SIZE + NV_SYNC_SIZE];
static nv_fn *nv_tab_core2[NV_CORE2_SIZE + 1], *nv_tab_core[NV_CORE_SIZE + 1],
    *nv_tab_cuda[NV_CUDA_SIZE + 1], *nv_tab_opencl[NV_OPENCL_SIZE + 1],
    *nv_tab_cudart[NV_CUDART_SIZE + 1], *nv_tab_sync[NV_SYNC_SIZE + 1];
static intptr_t nv_mem[NV_MEM_SLOTS];

/* A module's table: entry 0 (invalid) and the last NULL, the others the
 * client's slots for the tool's functions.  Only CORE2's are called; the
 * others are kept for a tool that fills every module. */
static int nv_get_module_function_table(int module, nv_fn ***out_table, unsigned *out_size) {
  nv_fn **t;
  unsigned n;
  switch (module) {
    case NV_MODULE_CORE2: t = nv_tab_core2, n = NV_CORE2_SIZE; break;
    case NV_MODULE_CORE: t = nv_tab_core, n = NV_CORE_SIZE; break;
    case NV_MODULE_CUDA: t = nv_tab_cuda, n = NV_CUDA_SIZE; break;
    case NV_MODULE_OPENCL: t = nv_tab_opencl, n = NV_OPENCL_SIZE; break;
    case NV_MODULE_CUDART: t = nv_tab_cudart, n = NV_CUDART_SIZE; break;
    case NV_MODULE_SYNC: t = nv_tab_sync, n = NV_SYNC_SIZE; break;
    default: return 0;
  }
  if (out_table) *out_table = t;
  if (out_size) *out_size = n;
  return 1;
}

static void nv_set_injection_version(uint32_t v) { (void)v; }

static const nv_callbacks nv_etbl_callbacks = {sizeof(nv_callbacks), nv_get_module_function_table};
static const nv_version_info nv_etbl_version = {sizeof(nv_version_info), 3, 0,
                                                nv_set_injection_version};

static const void *nv_get_export_table(uint32_t id) {
  if (id == NV_ETID_CALLBACKS) return &nv_etbl_callbacks;
  if (id == NV_ETID_VERSIONINFO) return &nv_etbl_version;
  return NULL;
}

static void nv_tables_init(void) {
  size_t k = 0;
  for (unsigned i = 1; i < NV_CORE2_SIZE; i++) nv_tab_core2[i] = &nv_core2[i];
  struct {
    nv_fn **t;
    unsigned n;
  } others[] = {{nv_tab_core, NV_CORE_SIZE},
                {nv_tab_cuda, NV_CUDA_SIZE},
                {nv_tab_opencl, NV_OPENCL_SIZE},
                {nv_tab_cudart, NV_CUDART_SIZE},
                {nv_tab_sync, NV_SYNC_SIZE}};
  for (size_t m = 0; m < sizeof others / sizeof others[0]; m++)
    for (unsigned i = 1; i < others[m].n; i++) others[m].t[i] = &nv_other[k++];
}

/* ---- loading --------------------------------------------------------------------- */

atomic_bool dv__nvtx_ranges_enabled;
static pthread_once_t nv_once = PTHREAD_ONCE_INIT;
static atomic_bool nv_mem_on, nv_core_on;
static void *nv_domain; /* "devarray" (NULL: the default domain) */

static void nv_load(void) {
  const char *path = getenv("NVTX_INJECTION64_PATH");
  if (!path || !path[0]) return; /* no tool listens: nothing happens */
  void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    dv__log(DV_LOG_WARN, "NVTX: cannot load the tool's library NVTX_INJECTION64_PATH=%s: %s", path,
            dlerror());
    return;
  }
  nv_tables_init();
  nv_init_core_fn init_core = (nv_init_core_fn)(uintptr_t)dlsym(lib, "InitializeInjectionNvtx2");
  if (init_core && init_core(nv_get_export_table)) {
    atomic_store(&nv_core_on, true);
    typedef void *(*create_fn)(const char *);
    create_fn create = (create_fn)(uintptr_t)nv_core2[NV_CORE2_DOMAIN_CREATE_A];
    if (create) nv_domain = create("devarray");
  }
  nv_init_ext_fn init_ext =
      (nv_init_ext_fn)(uintptr_t)dlsym(lib, "InitializeInjectionNvtxExtension");
  nv_segment seg = {1, NV_MEM_SLOTS, nv_mem};
  nv_module_info info = {3, sizeof info, NV_MEM_MODULE, NV_MEM_COMPAT, 1, &seg, NULL, NULL};
  if (init_ext && init_ext(&info) && nv_mem[NV_MEM_HEAP_REGISTER] &&
      nv_mem[NV_MEM_REGIONS_REGISTER])
    atomic_store(&nv_mem_on, true);
  /* the library stays loaded: the tool's functions are called until exit */
  dv__log(DV_LOG_DEBUG, "NVTX: tool %s attached (core %s, memory %s)", path,
          atomic_load(&nv_core_on) ? "yes" : "no", atomic_load(&nv_mem_on) ? "yes" : "no");
}

bool dv__nvtx_memory_on(void) {
  pthread_once(&nv_once, nv_load);
  return atomic_load_explicit(&nv_mem_on, memory_order_relaxed);
}

bool dv__nvtx_ranges_on(void) {
  pthread_once(&nv_once, nv_load);
  return atomic_load_explicit(&nv_core_on, memory_order_relaxed) &&
         nv_core2[NV_CORE2_RANGE_PUSH_EX] && nv_core2[NV_CORE2_RANGE_POP];
}

/* ---- memory --------------------------------------------------------------------- */

void *dv__nvtx_heap_register(const void *ptr, size_t bytes, const char *name) {
  if (!dv__nvtx_memory_on() || !ptr || !bytes) return NULL;
  nv_range r = {bytes, ptr};
  nv_heap_desc d = {
      NV_MEM_COMPAT, sizeof d, 0, NV_MEM_USAGE_SUB_ALLOCATOR, NV_MEM_TYPE_VIRTUAL_ADDRESS,
      sizeof r,      &r,       0, NV_MESSAGE_ASCII,           name};
  typedef void *(*fn)(void *, const nv_heap_desc *);
  return ((fn)(uintptr_t)nv_mem[NV_MEM_HEAP_REGISTER])(nv_domain, &d);
}

void dv__nvtx_heap_unregister(void *heap) {
  if (!heap || !atomic_load(&nv_mem_on) || !nv_mem[NV_MEM_HEAP_UNREGISTER]) return;
  typedef void (*fn)(void *, void *);
  ((fn)(uintptr_t)nv_mem[NV_MEM_HEAP_UNREGISTER])(nv_domain, heap);
}

void dv__nvtx_region_register(void *heap, const void *ptr, size_t bytes) {
  if (!heap || !bytes || !atomic_load(&nv_mem_on)) return;
  nv_range r = {bytes, ptr};
  nv_regions_register b = {
      NV_MEM_COMPAT, sizeof b, NV_MEM_TYPE_VIRTUAL_ADDRESS, heap, 1, sizeof r, &r, NULL};
  typedef void (*fn)(void *, const nv_regions_register *);
  ((fn)(uintptr_t)nv_mem[NV_MEM_REGIONS_REGISTER])(nv_domain, &b);
}

void dv__nvtx_region_unregister(const void *ptr) {
  if (!atomic_load(&nv_mem_on) || !nv_mem[NV_MEM_REGIONS_UNREGISTER]) return;
  const void *ref = ptr;
  nv_regions_unregister b = {NV_MEM_COMPAT, sizeof b, NV_MEM_REF_POINTER, 1, sizeof ref, &ref};
  typedef void (*fn)(void *, const nv_regions_unregister *);
  ((fn)(uintptr_t)nv_mem[NV_MEM_REGIONS_UNREGISTER])(nv_domain, &b);
}

/* ---- ranges --------------------------------------------------------------------- */

void dv__nvtx_push(const char *name) {
  nv_event_attributes a;
  memset(&a, 0, sizeof a);
  a.version = 3;
  a.size = sizeof a;
  a.message_type = NV_MESSAGE_ASCII;
  a.message = name;
  typedef int (*fn)(void *, const nv_event_attributes *);
  ((fn)nv_core2[NV_CORE2_RANGE_PUSH_EX])(nv_domain, &a);
}

void dv__nvtx_pop(void) {
  typedef int (*fn)(void *);
  ((fn)nv_core2[NV_CORE2_RANGE_POP])(nv_domain);
}

void dv__nvtx_ranges_enable(void) {
  if (dv__nvtx_ranges_on()) atomic_store(&dv__nvtx_ranges_enabled, true);
}

int dv_nvtx_attached(void) {
  return (dv__nvtx_memory_on() ? 1 : 0) | (dv__nvtx_ranges_on() ? 2 : 0);
}
