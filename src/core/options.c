/*
 * Options: one descriptor table.  Values are read once per process from the
 * environment (DV_<NAME>, then Numba's name where one exists), checked,
 * clamped and warned about; a dv_config overrides them per context.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core.h"

/* The host simulator's mode: fast in Release builds of devarray, checked in
 * debug builds (and so in its tests). */
#ifdef NDEBUG
#define DV__HOST_MODE_DEFAULT "fast"
#else
#define DV__HOST_MODE_DEFAULT "checked"
#endif

typedef enum { T_INT, T_SIZE, T_DOUBLE, T_BOOL, T_STRING, T_LEVEL } dv_opt_type;

typedef struct dv_opt_desc {
  const char *name, *env, *env_fallback;
  dv_opt_type type;
  const char *def;
  double min, max;
  const char *description;
} dv_opt_desc;

/* Order matches dv_opt_id. */
static const dv_opt_desc dv__opts[DV_OPT_COUNT] = {
    {"backend", "DV_BACKEND", NULL, T_STRING, "auto", 0, 0,
     "device backend: auto (cuda, then hip, then an OpenCL GPU, then host), host, opencl, cuda "
     "or hip (AMD GPUs through AMD's HIP runtime)"},
    {"log_level", "DV_LOG_LEVEL", NULL, T_LEVEL, "warn", 0, 4,
     "messages printed: off, error, warn, info or debug"},
    {"host_memory", "DV_HOST_MEMORY", NULL, T_SIZE, "1G", 1 << 20, 1099511627776.0,
     "capacity of the host simulator's device memory"},
    {"host_guard", "DV_HOST_GUARD", NULL, T_BOOL, "auto", 0, 1,
     "host simulator: guard bytes around allocations, fills of new ones, poisoning and quarantine "
     "of freed memory (auto: on in checked mode; off in fast mode, where the first launch that uses a block "
     "writes 8 canary bytes on each side, checked from then on, and freed blocks of "
     "64 KiB..16 MiB are cached for reuse; see host_mode)"},
    {"max_pending_deallocs_count", "DV_MAX_PENDING_DEALLOCS_COUNT",
     "NUMBA_CUDA_MAX_PENDING_DEALLOCS_COUNT", T_INT, "10", 0, 1e9,
     "pending frees above which the queue is flushed"},
    {"max_pending_deallocs_ratio", "DV_MAX_PENDING_DEALLOCS_RATIO",
     "NUMBA_CUDA_MAX_PENDING_DEALLOCS_RATIO", T_DOUBLE, "0.2", 0, 1,
     "pending bytes, as a fraction of device memory, above which the queue is flushed"},
    {"fault_device_alloc", "DV_FAULT_DEVICE_ALLOC", NULL, T_INT, "0", 0, 1e18,
     "host simulator: make the k-th device allocation fail (0: never)"},
    {"fault_host_alloc", "DV_FAULT_HOST_ALLOC", NULL, T_INT, "0", 0, 1e18,
     "make the k-th host allocation of the library fail (0: never)"},
    {"fault_copy", "DV_FAULT_COPY", NULL, T_INT, "0", 0, 1e18,
     "host simulator: make the k-th copy fail (0: never)"},
    {"opencl_device", "DV_OPENCL_DEVICE", NULL, T_STRING, "", 0, 0,
     "OpenCL device: \"platform:device\" indices, an ordinal n (GPUs first, then other types) "
     "or a name substring (a simulator such as Oclgrind only when named)"},
    {"cuda_device", "DV_CUDA_DEVICE", NULL, T_INT, "0", 0, 1024, "CUDA device ordinal"},
    {"host_strided", "DV_HOST_STRIDED", NULL, T_BOOL, "on", 0, 1,
     "host simulator: gather/scatter strided copies in the stream workers (off: the planner "
     "packs through staging buffers, as on devices without a strided-copy kernel)"},
    {"host_delay_us", "DV_HOST_DELAY_US", NULL, T_INT, "0", 0, 10000000,
     "host simulator: microseconds each queued operation waits before it runs"},
    {"memory_manager", "DV_MEMORY_MANAGER", NULL, T_STRING, "direct", 0, 0,
     "device memory manager: direct (driver allocations behind the deferred queue), pool "
     "(devarray's stream-ordered caching allocator) or async (the CUDA or HIP driver's "
     "stream-ordered pool, cuMemAllocFromPoolAsync; refused on the host simulator and OpenCL)"},
    {"pool_release_threshold", "DV_POOL_RELEASE_THRESHOLD", NULL, T_SIZE, "0", 0, 1099511627776.0,
     "pool: cached free bytes above which fully free segments go back to the device after a free "
     "(0: keep everything cached until dv_memory_trim or out-of-memory)"},
    {"pool_log", "DV_POOL_LOG", NULL, T_STRING, "", 0, 0,
     "pool: append every allocation and free to this CSV file (RMM's Thread,Time,Action,Pointer,Size,Stream)"},
    {"kernel_cache", "DV_KERNEL_CACHE", NULL, T_BOOL, "on", 0, 1,
     "keep compiled kernel modules in a cache on disk and reuse them"},
    {"kernel_cache_dir", "DV_KERNEL_CACHE_DIR", NULL, T_STRING, "", 0, 0,
     "directory of the kernel cache (empty: $XDG_CACHE_HOME/devarray/kernels, else "
     "~/.cache/devarray/kernels)"},
    {"kernel_check", "DV_KERNEL_CHECK", NULL, T_STRING, "auto", 0, 0,
     "host simulator: checks in kernels: off, bounds (shared-array redzones, the stack "
     "protector, guard bytes of global arrays), on (bounds plus the access checks: every load "
     "and store checked at the access for out-of-bounds global and shared memory, "
     "uninitialized shared reads and data races between threads and blocks) or auto (on in "
     "checked mode, off in fast mode; see host_mode); 0/false/no mean off, 1/true/yes on; "
     "divergent barriers are always reported"},
    {"host_cc", "DV_HOST_CC", NULL, T_STRING, "", 0, 0,
     "host simulator: C compiler for kernels (empty: $CC, then cc, gcc, clang)"},
    {"host_cflags", "DV_HOST_CFLAGS", NULL, T_STRING, "", 0, 0,
     "host simulator: flags for the kernel compiler (empty: -O3 -march=native in fast mode, -O2 "
     "in checked mode; devarray adds -shared -fPIC and its own)"},
    {"host_fiber_stack", "DV_HOST_FIBER_STACK", NULL, T_SIZE, "128K", 16384, 67108864.0,
     "host simulator: stack of each simulated GPU thread (local arrays live there)"},
    {"host_wave_size", "DV_HOST_WAVE_SIZE", NULL, T_INT, "32", 1, 1024,
     "host simulator: threads per wave (warp) for dv_wavebarrier and dv_wave_size"},
    {"nvrtc_library", "DV_NVRTC_LIBRARY", NULL, T_STRING, "", 0, 0,
     "CUDA: NVRTC library to load (empty: libnvrtc.so.<the driver's major>, older majors, "
     "libnvrtc.so); one newer than the driver is refused"},
    {"host_ipc", "DV_HOST_IPC", NULL, T_BOOL, "off", 0, 1,
     "host simulator: device memory in shared memory (one memfd per allocation) so that "
     "dv_ipc_export can share it with other processes"},
    {"staging_chunk", "DV_STAGING_CHUNK", NULL, T_SIZE, "4M", 4096, 1073741824.0,
     "CUDA and HIP: bytes per piece of a copy with pageable host memory, staged through two pinned "
     "buffers in turn"},
    {"device", "DV_DEVICE", NULL, T_STRING, "", 0, 0,
     "device of whichever backend is chosen: a CUDA or HIP ordinal, an OpenCL \"platform:device\" "
     "or name, the host simulator's one device 0 (empty: each backend's own option, cuda_device, "
     "hip_device or opencl_device, which win when set)"},
    {"staging_threads", "DV_STAGING_THREADS", NULL, T_INT, "0", 0, 64,
     "CUDA and HIP: threads, the calling one included, that copy each staged piece of a copy with "
     "pageable host memory into or out of its pinned buffer (0: min(4, online CPUs); 1: the calling "
     "thread alone)"},
    {"staging_thread_min", "DV_STAGING_THREAD_MIN", NULL, T_SIZE, "1M", 0, 1073741824.0,
     "CUDA and HIP: staged pieces smaller than this many bytes are copied by one thread"},
    {"host_printf_buffer", "DV_HOST_PRINTF_BUFFER", NULL, T_SIZE, "1M", 1024, 1073741824.0,
     "host simulator: bytes of dv_printf output kept per launch (each call: its text plus 32 "
     "bytes), written to stdout when the launch has run; calls that do not fit are dropped and "
     "counted"},
    {"staging_limit", "DV_STAGING_LIMIT", NULL, T_SIZE, "0", 0, 1099511627776.0,
     "CUDA and HIP: pinned bytes a context keeps for the staging buffers of copies with pageable host memory "
     "(0: four times staging_chunk; at least one chunk); an asynchronous copy above it waits for "
     "a buffer to come back"},
    {"host_mode", "DV_HOST_MODE", NULL, T_STRING, DV__HOST_MODE_DEFAULT, 0, 0,
     "host simulator: fast (kernels as loops over a block's threads, allocations without fills; "
     "the default in Release builds of devarray) or checked (per-thread bookkeeping, guard "
     "bytes, poison, quarantine and the kernel checks; the default in debug builds); the same "
     "results either way (docs/kernels.md)"},
    {"host_fission", "DV_HOST_FISSION", NULL, T_BOOL, "on", 0, 1,
     "host simulator, fast mode: region fission (kernels with barriers run a block as loops over "
     "its threads between barriers, where libclang can be loaded and the kernel qualifies; "
     "docs/kernels.md); off: fibers"},
    {"kernel_timeout", "DV_KERNEL_TIMEOUT", NULL, T_DOUBLE, "0", 0, 1e6,
     "host simulator: seconds a kernel launch may run (fractions allowed; 0: no limit); a launch "
     "running longer is stopped and fails with DV_ERR_KERNEL_TIMEOUT, saying where its threads "
     "were"},
    {"hip_device", "DV_HIP_DEVICE", NULL, T_INT, "0", 0, 1024, "HIP (AMD GPU) device ordinal"},
    {"hip_arch", "DV_HIP_ARCH", NULL, T_STRING, "", 0, 0,
     "HIP: the gfx target kernels are compiled for (\"gfx90a\", or with features, "
     "\"gfx90a:sramecc+:xnack-\"); empty: the device's, as the runtime reports it (ROCm 5) or "
     "the kernel driver's topology says (ROCm 6)"},
    {"hiprtc_library", "DV_HIPRTC_LIBRARY", NULL, T_STRING, "", 0, 0,
     "HIP: hipRTC library to load (empty: libhiprtc.so.6, libhiprtc.so, then the HIP runtime's "
     "own library, which holds hipRTC on ROCm 5)"},
    {"memory_limit", "DV_MEMORY_LIMIT", NULL, T_SIZE, "0", 0, 1125899906842624.0,
     "device memory a context may hold through its built-in manager (the pool's segments, cached "
     "ones included; the direct manager's allocations), at most: an allocation past it first has the "
     "pool give its cached memory back, then fails with DV_ERR_OUT_OF_MEMORY (0: no limit)"},
    {"memory_limit_fraction", "DV_MEMORY_LIMIT_FRACTION", NULL, T_DOUBLE, "0", 0, 1,
     "memory_limit as a fraction of the device's total memory (0: none; with both set, the smaller "
     "limit applies)"},
    {"pool_reserve", "DV_POOL_RESERVE", NULL, T_SIZE, "0", 0, 1125899906842624.0,
     "pool: bytes of device memory taken when the context is made and kept until it is destroyed "
     "(never returned by dv_memory_trim or the release threshold); allocations above 1 MiB are "
     "served from it (0: none)"},
    {"pinned_pool", "DV_PINNED_POOL", NULL, T_BOOL, "on", 0, 1,
     "cache the pinned and mapped arrays' page-locked memory for reuse (docs/pinned_pool.md): size "
     "classes of 1/8 of a power of two, reuse after the queued work that used a block; off: every "
     "pinned array is a driver allocation and its free"},
    {"pinned_pool_reserve", "DV_PINNED_POOL_RESERVE", NULL, T_SIZE, "0", 0, 1099511627776.0,
     "pinned pool: bytes of page-locked memory allocated when the context is made and kept until it "
     "goes, from which the first pinned arrays are carved"},
    {"pinned_pool_limit", "DV_PINNED_POOL_LIMIT", NULL, T_SIZE, "0", 0, 1099511627776.0,
     "pinned pool: the most bytes it holds, in use and cached (0: a quarter of the host's physical "
     "memory); requests past it are served outside the pool, as with pinned_pool=off"},
    {"async_pool", "DV_ASYNC_POOL", NULL, T_STRING, "private", 0, 0,
     "async manager (CUDA, HIP): the driver pool it allocates from: private (one made for the "
     "context and destroyed with it), default (the device's default pool) or current (the "
     "device's current pool, shared with whichever library made it current)"},
    {"async_release_threshold", "DV_ASYNC_RELEASE_THRESHOLD", NULL, T_SIZE, "1024T", 0,
     1125899906842624.0,
     "async manager: reserved bytes the driver pool keeps at each synchronization, giving the "
     "rest back to the device (the pool's release threshold; the default keeps everything; 0 "
     "returns all free memory at every synchronization); set on a private pool always, on a "
     "default or current one only when given"},
    {"nvtx", "DV_NVTX", NULL, T_BOOL, "on", 0, 1,
     "CUDA: tell a listening NVTX tool (compute-sanitizer, which sets NVTX_INJECTION64_PATH) of the "
     "pool's memory: segments as heaps, blocks as regions, so that memcheck checks each array's "
     "bounds inside a segment; nothing happens when no tool listens"},
    {"nvtx_ranges", "DV_NVTX_RANGES", NULL, T_BOOL, "off", 0, 1,
     "NVTX ranges (domain \"devarray\") around devarray's copies, memsets, launches and "
     "allocations, for a listening tool's timeline (Nsight Systems)"},
};

/* Former names, kept as aliases of the option and its environment variable
 * (issue 35: the CUDA family's staging options apply to HIP as well, so
 * they are named for what they do; the cuda_ names and DV_CUDA_ variables
 * still work, the new ones win where both are set). */
static const struct {
  const char *name, *env;
  dv_opt_id id;
} dv__opt_aliases[] = {
    {"cuda_staging_chunk", "DV_CUDA_STAGING_CHUNK", DV_OPT_STAGING_CHUNK},
    {"cuda_staging_threads", "DV_CUDA_STAGING_THREADS", DV_OPT_STAGING_THREADS},
    {"cuda_staging_thread_min", "DV_CUDA_STAGING_THREAD_MIN", DV_OPT_STAGING_THREAD_MIN},
    {"cuda_staging_limit", "DV_CUDA_STAGING_LIMIT", DV_OPT_STAGING_LIMIT},
};
#define DV_NALIASES (sizeof dv__opt_aliases / sizeof dv__opt_aliases[0])

int dv__option_lookup(const char *name) {
  if (!name) return -1;
  for (int i = 0; i < DV_OPT_COUNT; i++)
    if (strcmp(dv__opts[i].name, name) == 0) return i;
  for (size_t i = 0; i < DV_NALIASES; i++)
    if (strcmp(dv__opt_aliases[i].name, name) == 0) return (int)dv__opt_aliases[i].id;
  return -1;
}

/* The environment variable that sets option id: its own, else a former
 * name's (*envname: which one). */
static const char *dv__option_env(int id, const char **envname) {
  const char *text = getenv(dv__opts[id].env);
  *envname = dv__opts[id].env;
  for (size_t i = 0; (!text || !*text) && i < DV_NALIASES; i++)
    if ((int)dv__opt_aliases[i].id == id) {
      text = getenv(dv__opt_aliases[i].env);
      *envname = dv__opt_aliases[i].env;
    }
  return text;
}

int dv__parse_size(const char *s, int64_t *out) {
  while (isspace((unsigned char)*s)) s++;
  if (!*s || *s == '-') return -1;
  errno = 0;
  char *end;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || end == s) return -1;
  int shift = 0;
  switch (toupper((unsigned char)*end)) {
    case 'K': shift = 10; end++; break;
    case 'M': shift = 20; end++; break;
    case 'G': shift = 30; end++; break;
    case 'T': shift = 40; end++; break;
    default: break;
  }
  if (shift && (*end == 'i' || *end == 'I')) end++;
  if (shift && (*end == 'B' || *end == 'b')) end++;
  while (isspace((unsigned char)*end)) end++;
  if (*end) return -1;
  if (v > ((unsigned long long)INT64_MAX >> shift)) return -1;
  *out = (int64_t)(v << shift);
  return 0;
}

static const char *const dv__levels[] = {"off", "error", "warn", "info", "debug"};

/* Parse text for option id.  0 ok, -1 unparsable, -2 too long for a
 * string (DV_OPTION_STRING_MAX), 1 clamped. */
static int dv__parse(int id, const char *text, dv_optval *v) {
  const dv_opt_desc *d = &dv__opts[id];
  int clamped = 0;
  memset(v, 0, sizeof *v);
  switch (d->type) {
    case T_STRING:
      if (strlen(text) > DV_OPTION_STRING_MAX) return -2;
      strcpy(v->s, text);
      if (id == DV_OPT_BACKEND && strcmp(text, "auto") && strcmp(text, "host") &&
          strcmp(text, "opencl") && strcmp(text, "cuda") && strcmp(text, "hip"))
        return -1;
      if (id == DV_OPT_MEMORY_MANAGER && strcmp(text, "direct") && strcmp(text, "pool") &&
          strcmp(text, "async"))
        return -1;
      if (id == DV_OPT_ASYNC_POOL && strcmp(text, "private") && strcmp(text, "default") &&
          strcmp(text, "current"))
        return -1;
      if (id == DV_OPT_HOST_MODE && strcmp(text, "fast") && strcmp(text, "checked")) return -1;
      if (id == DV_OPT_KERNEL_CHECK) { /* a level; the old booleans mean off and on */
        static const char *const lv[] = {"off", "bounds", "on"};
        int l = -2;
        if (!strcasecmp(text, "auto")) l = -1;
        for (int i = 0; i < 3; i++)
          if (!strcasecmp(text, lv[i])) l = i;
        if (!strcasecmp(text, "0") || !strcasecmp(text, "false") || !strcasecmp(text, "no")) l = 0;
        if (!strcasecmp(text, "1") || !strcasecmp(text, "true") || !strcasecmp(text, "yes")) l = 2;
        if (l == -2) return -1;
        snprintf(v->s, sizeof v->s, "%s", l < 0 ? "auto" : lv[l]);
        v->i = l;
      }
      break;
    case T_LEVEL: {
      int found = -1;
      for (int i = 0; i < 5; i++)
        if (strcasecmp(text, dv__levels[i]) == 0) found = i;
      if (found < 0) {
        char *end;
        long l = strtol(text, &end, 10);
        if (*text && !*end && l >= 0 && l <= 4) found = (int)l;
      }
      if (found < 0) return -1;
      v->i = found;
      break;
    }
    case T_BOOL:
      if (!strcasecmp(text, "auto") && !strcmp(d->def, "auto"))
        v->i = -1; /* follows another option (the description says which) */
      else if (!strcasecmp(text, "1") || !strcasecmp(text, "true") || !strcasecmp(text, "yes") ||
          !strcasecmp(text, "on"))
        v->i = 1;
      else if (!strcasecmp(text, "0") || !strcasecmp(text, "false") || !strcasecmp(text, "no") ||
               !strcasecmp(text, "off"))
        v->i = 0;
      else
        return -1;
      break;
    case T_INT: {
      char *end;
      errno = 0;
      long long l = strtoll(text, &end, 10);
      if (errno || end == text || *end) return -1;
      if ((double)l < d->min) l = (long long)d->min, clamped = 1;
      if ((double)l > d->max) l = (long long)d->max, clamped = 1;
      v->i = l;
      break;
    }
    case T_SIZE: {
      int64_t s;
      if (dv__parse_size(text, &s)) return -1;
      if ((double)s < d->min) s = (int64_t)d->min, clamped = 1;
      if ((double)s > d->max) s = (int64_t)d->max, clamped = 1;
      v->i = s;
      break;
    }
    case T_DOUBLE: {
      char *end;
      errno = 0;
      double x = strtod(text, &end);
      if (errno || end == text || *end || isnan(x)) return -1;
      if (x < d->min) x = d->min, clamped = 1;
      if (x > d->max) x = d->max, clamped = 1;
      v->d = x;
      break;
    }
  }
  v->set = 1;
  return clamped;
}

static dv_optval dv__process[DV_OPT_COUNT];
static pthread_once_t dv__once = PTHREAD_ONCE_INIT;

static void dv__options_read(void) {
  for (int i = 0; i < DV_OPT_COUNT; i++) {
    const dv_opt_desc *d = &dv__opts[i];
    dv_optval v;
    dv__parse(i, d->def, &v);
    v.source = DV_SOURCE_DEFAULT;
    dv__process[i] = v;
  }
  /* The log level first, so that warnings about the others obey it. */
  for (int pass = 0; pass < 2; pass++) {
    for (int i = 0; i < DV_OPT_COUNT; i++) {
      if ((pass == 0) != (i == DV_OPT_LOG_LEVEL)) continue;
      const dv_opt_desc *d = &dv__opts[i];
      const char *envname;
      const char *text = dv__option_env(i, &envname);
      dv_option_source src = DV_SOURCE_ENV;
      if ((!text || !*text) && d->env_fallback) {
        text = getenv(d->env_fallback);
        src = DV_SOURCE_ENV_NUMBA;
        envname = d->env_fallback;
      }
      if (!text || !*text) continue;
      dv_optval v;
      int r = dv__parse(i, text, &v);
      if (r == -2) {
        dv__log(DV_LOG_WARN, "%s has %zu characters; string options hold at most %d: using the "
                "default \"%s\" for %s", envname, strlen(text), DV_OPTION_STRING_MAX, d->def, d->name);
        continue;
      }
      if (r < 0) {
        dv__log(DV_LOG_WARN, "%s=\"%s\" is not a valid %s; using the default %s", envname, text,
                d->name, d->def);
        continue;
      }
      if (r > 0) dv__log(DV_LOG_WARN, "%s=\"%s\" is out of range; clamped", envname, text);
      v.source = src;
      dv__process[i] = v;
      if (i == DV_OPT_LOG_LEVEL) dv__log_set_level((dv_log_level)v.i);
    }
  }
  if (dv__process[DV_OPT_FAULT_HOST_ALLOC].i > 0)
    dv__fault_host_set((uint64_t)dv__process[DV_OPT_FAULT_HOST_ALLOC].i);
}

const dv_optval *dv__options_process(void) {
  pthread_once(&dv__once, dv__options_read);
  return dv__process;
}

void dv__options_resolve(const dv_config *cfg, dv_optval *out) {
  const dv_optval *p = dv__options_process();
  for (int i = 0; i < DV_OPT_COUNT; i++) out[i] = (cfg && cfg->v[i].set) ? cfg->v[i] : p[i];
}

void dv__option_format(dv_opt_id id, const dv_optval *v, char *buf, size_t cap) {
  const dv_opt_desc *d = &dv__opts[id];
  switch (d->type) {
    case T_STRING: snprintf(buf, cap, "%s", v->s); break;
    case T_LEVEL: snprintf(buf, cap, "%s", dv__levels[v->i]); break;
    case T_BOOL: snprintf(buf, cap, "%s", v->i < 0 ? "auto" : v->i ? "on" : "off"); break;
    case T_INT: case T_SIZE: snprintf(buf, cap, "%lld", (long long)v->i); break;
    case T_DOUBLE: snprintf(buf, cap, "%g", v->d); break;
  }
}

size_t dv_option_count(void) { return DV_OPT_COUNT; }

dv_status dv_option_describe(size_t i, dv_option_info *out) {
  DV_CHECK_NULL(out);
  memset(out, 0, sizeof *out);
  if (i >= DV_OPT_COUNT) return dv__error(DV_ERR_INDEX, "option index %zu >= %d", i, DV_OPT_COUNT);
  static const char *const types[] = {"int", "size", "double", "bool", "string", "level"};
  const dv_opt_desc *d = &dv__opts[i];
  out->name = d->name;
  out->env = d->env;
  out->env_fallback = d->env_fallback;
  out->type = types[d->type];
  out->default_value = d->def;
  out->description = d->description;
  return DV_OK;
}

dv_status dv_option_get(const char *name, char *buf, size_t cap, dv_option_source *source) {
  if (buf && cap) buf[0] = 0;
  if (source) *source = DV_SOURCE_DEFAULT;
  DV_CHECK_NULL(name);
  DV_CHECK_NULL(buf);
  int id = dv__option_lookup(name);
  if (id < 0) return dv__error(DV_ERR_BAD_OPTION, "unknown option \"%s\"", name);
  const dv_optval *v = &dv__options_process()[id];
  dv__option_format((dv_opt_id)id, v, buf, cap);
  if (source) *source = v->source;
  return DV_OK;
}

dv_status dv_config_create(dv_config **out) {
  DV_CHECK_NULL(out);
  *out = dv__calloc(1, sizeof(dv_config));
  if (!*out) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate a dv_config");
  return DV_OK;
}

dv_status dv_config_set(dv_config *cfg, const char *name, const char *value) {
  DV_CHECK_NULL(cfg);
  DV_CHECK_NULL(name);
  DV_CHECK_NULL(value);
  int id = dv__option_lookup(name);
  if (id < 0) return dv__error(DV_ERR_BAD_OPTION, "unknown option \"%s\"", name);
  dv_optval v;
  int r = dv__parse(id, value, &v);
  if (r == -2)
    return dv__error(DV_ERR_BAD_OPTION, "option %s: a value of %zu characters is too long (string "
                     "options hold at most %d)", name, strlen(value), DV_OPTION_STRING_MAX);
  if (r != 0)
    return dv__error(DV_ERR_BAD_OPTION, "option %s: \"%s\" is %s", name, value,
                     r < 0 ? "not a valid value" : "out of range");
  v.source = DV_SOURCE_API;
  cfg->v[id] = v;
  return DV_OK;
}

void dv_config_destroy(dv_config *cfg) { dv__free(cfg); }
