/*
 * Programs: a kernel source with its defines, per-backend compiler options
 * and constant arrays; building one assembles a single translation unit
 * (the dialect header, a generated prelude, `#line 1 "<name>"`, the source),
 * looks it up in the compiled-module cache on disk, and otherwise asks the
 * backend to compile it.
 *
 * The cache key is SHA-256 over everything that changes the compiled image:
 * a format tag, devarray's version, the backend, the backend's target
 * identity (device or architecture, compiler and driver versions), the
 * build flags, the options and the whole translation unit.  Constant data
 * is not part of it: constants are uploaded after loading, so changing them
 * never recompiles.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cache.h"
#include "kernel_internal.h"
#include "sha256.h"

static const char *const dv__kbackend_names[DV__KBACKENDS] = {"host", "opencl", "cuda", "hip"};

static int dv__kbackend_index(const char *name) {
  for (int i = 0; i < DV__KBACKENDS; i++)
    if (name && strcmp(name, dv__kbackend_names[i]) == 0) return i;
  return -1;
}

const char *dv__kernel_ctype(dv_type_id id) {
  switch (id) {
    case DV_BOOL: return "dv_u8";
    case DV_INT8: return "dv_i8";
    case DV_INT16: return "dv_i16";
    case DV_INT32: return "dv_i32";
    case DV_INT64: return "dv_i64";
    case DV_UINT8: return "dv_u8";
    case DV_UINT16: return "dv_u16";
    case DV_UINT32: return "dv_u32";
    case DV_UINT64: return "dv_u64";
    case DV_FLOAT16: return "dv_f16";
    case DV_FLOAT32: return "dv_f32";
    case DV_FLOAT64: return "dv_f64";
    default: return NULL;
  }
}

static bool dv__is_identifier(const char *s) {
  if (!s || !(isalpha((unsigned char)*s) || *s == '_')) return false;
  for (const char *c = s + 1; *c; c++)
    if (!(isalnum((unsigned char)*c) || *c == '_')) return false;
  return strlen(s) < 256;
}

dv_status dv_program_create(dv_context *ctx, const char *name, const char *source,
                            dv_program **out) {
  DV_CHECK_NULL(out);
  *out = NULL;
  DV_CHECK_NULL(ctx);
  DV_CHECK_HANDLE(ctx, DV_HANDLE_CONTEXT);
  DV_CHECK_NULL(source);
  if (name) {
    bool bad = !*name || strlen(name) > 255;
    for (const char *c = name; *c && !bad; c++) bad = *c == '"' || *c == '\\' || (unsigned char)*c < 32;
    if (bad)
      return dv__error(DV_ERR_INVALID_ARGUMENT,
                       "program name must be 1 to 255 characters with no quote, backslash or "
                       "control character");
  }
  dv_program *p = dv__calloc(1, sizeof *p);
  if (!p) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate a program");
  p->ctx = ctx;
  atomic_fetch_add(&ctx->kernels->live_programs, 1);
  p->name = dv__strdup(name ? name : "kernel");
  p->source = dv__strdup(source);
  if (!p->name || !p->source) {
    dv_program_destroy(p);
    return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot copy the program source");
  }
  *out = p;
  return DV_OK;
}

void dv_program_destroy(dv_program *p) {
  if (!p) return;
  atomic_fetch_sub(&p->ctx->kernels->live_programs, 1);
  for (size_t i = 0; i < 2 * p->ndefines; i++) dv__free(p->defines[i]);
  dv__free(p->defines);
  for (int i = 0; i < DV__KBACKENDS; i++) dv__free(p->options[i]);
  for (size_t i = 0; i < p->nconsts; i++) dv__free(p->consts[i].name);
  dv__free(p->consts);
  dv__free(p->const_data);
  dv__free(p->log);
  dv__free(p->name);
  dv__free(p->source);
  dv__free(p);
}

const char *dv_program_log(const dv_program *p) { return p && p->log ? p->log : ""; }

static bool dv__program_has_name(const dv_program *p, const char *name) {
  for (size_t i = 0; i < p->ndefines; i++)
    if (strcmp(p->defines[2 * i], name) == 0) return true;
  for (size_t i = 0; i < p->nconsts; i++)
    if (strcmp(p->consts[i].name, name) == 0) return true;
  return false;
}

dv_status dv_program_define(dv_program *p, const char *name, const char *value) {
  DV_CHECK_NULL(p);
  DV_CHECK_NULL(name);
  if (!dv__is_identifier(name))
    return dv__error(DV_ERR_INVALID_ARGUMENT, "define name \"%s\" is not a C identifier", name);
  if (value && strchr(value, '\n'))
    return dv__error(DV_ERR_INVALID_ARGUMENT, "the value of define %s contains a newline", name);
  if (dv__program_has_name(p, name))
    return dv__error(DV_ERR_INVALID_ARGUMENT, "%s is already defined in program %s", name, p->name);
  char **nd = dv__malloc((2 * p->ndefines + 2) * sizeof *nd);
  char *n = dv__strdup(name), *v = dv__strdup(value ? value : "1");
  if (!nd || !n || !v) {
    dv__free(nd), dv__free(n), dv__free(v);
    return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot add a define");
  }
  if (p->ndefines) memcpy(nd, p->defines, 2 * p->ndefines * sizeof *nd);
  nd[2 * p->ndefines] = n;
  nd[2 * p->ndefines + 1] = v;
  dv__free(p->defines);
  p->defines = nd;
  p->ndefines++;
  return DV_OK;
}

dv_status dv_program_options(dv_program *p, const char *backend, const char *options) {
  DV_CHECK_NULL(p);
  DV_CHECK_NULL(options);
  int i = dv__kbackend_index(backend);
  if (i < 0)
    return dv__error(DV_ERR_INVALID_ARGUMENT,
                     "unknown backend \"%s\" for compiler options (host, opencl, cuda or hip)",
                     backend ? backend : "(null)");
  char *o = dv__strdup(options);
  if (!o) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot copy compiler options");
  dv__free(p->options[i]);
  p->options[i] = o;
  return DV_OK;
}

dv_status dv_program_constant(dv_program *p, const char *name, const dv_array *host) {
  DV_CHECK_NULL(p);
  DV_CHECK_NULL(name);
  DV_CHECK_NULL(host);
  DV_CHECK_ARRAY(host);
  if (!dv__is_identifier(name))
    return dv__error(DV_ERR_INVALID_ARGUMENT, "constant name \"%s\" is not a C identifier", name);
  if (dv__program_has_name(p, name))
    return dv__error(DV_ERR_INVALID_ARGUMENT, "%s is already declared in program %s", name, p->name);
  if (host->alloc->kind != DV_MEM_HOST && host->alloc->kind != DV_MEM_PINNED &&
      host->alloc->kind != DV_MEM_MAPPED)
    return dv__error(DV_ERR_INVALID_ARGUMENT, "constant %s: the data must be a host array", name);
  const char *ct = dv__kernel_ctype(host->dtype->id);
  if (!ct)
    return dv__error(DV_ERR_BAD_DTYPE,
                     "constant %s: dtype %s is not supported in kernels (bool, integers, "
                     "float32 and float64 are)", name, host->dtype->name);
  int64_t count = dv_array_size(host);
  if (count <= 0) return dv__error(DV_ERR_INVALID_ARGUMENT, "constant %s is empty", name);
  size_t isz = host->dtype->itemsize, bytes = (size_t)count * isz;
  size_t off = (p->const_bytes + 15) & ~(size_t)15; /* every constant 16-byte aligned */
  if (bytes / isz != (size_t)count || off + bytes < off)
    return dv__error(DV_ERR_OVERFLOW, "constant %s is too large", name);
  dv_kconst *nc = dv__malloc((p->nconsts + 1) * sizeof *nc);
  unsigned char *nd = dv__calloc(1, off + bytes);
  char *nm = dv__strdup(name);
  if (!nc || !nd || !nm) {
    dv__free(nc), dv__free(nd), dv__free(nm);
    return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot copy constant %s", name);
  }
  /* Copy the elements in C order whatever the host array's strides. */
  int64_t idx[DV_MAXDIMS] = {0};
  unsigned char *dst = nd + off;
  const unsigned char *base = (const unsigned char *)host->alloc->host + host->offset;
  for (int64_t e = 0; e < count; e++) {
    int64_t boff = 0;
    for (int d = 0; d < host->ndim; d++) boff += idx[d] * host->strides[d];
    memcpy(dst + (size_t)e * isz, base + boff, isz);
    for (int d = host->ndim - 1; d >= 0; d--) {
      if (++idx[d] < host->shape[d]) break;
      idx[d] = 0;
    }
  }
  if (p->nconsts) memcpy(nc, p->consts, p->nconsts * sizeof *nc);
  if (p->const_bytes) memcpy(nd, p->const_data, p->const_bytes);
  nc[p->nconsts] = (dv_kconst){nm, host->dtype->id, isz, count, off};
  dv__free(p->consts);
  dv__free(p->const_data);
  p->consts = nc;
  p->const_data = nd;
  p->nconsts++;
  p->const_bytes = off + bytes;
  return DV_OK;
}

/* ---- building ---------------------------------------------------------------- */

typedef struct dv_sbuf {
  char *s;
  size_t n, cap;
  bool failed;
} dv_sbuf;

static void dv__sb_add(dv_sbuf *b, const char *fmt, ...) DV_PRINTF(2, 3);
static void dv__sb_add(dv_sbuf *b, const char *fmt, ...) {
  if (b->failed) return;
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    size_t room = b->cap - b->n;
    int k = vsnprintf(b->s ? b->s + b->n : NULL, room, fmt, ap);
    va_end(ap);
    if (k < 0) {
      b->failed = true;
      return;
    }
    if ((size_t)k < room) {
      b->n += (size_t)k;
      return;
    }
    size_t ncap = (b->cap ? b->cap * 2 : 4096);
    while (ncap < b->n + (size_t)k + 1) ncap *= 2;
    char *ns = dv__malloc(ncap);
    if (!ns) {
      b->failed = true;
      return;
    }
    if (b->n) memcpy(ns, b->s, b->n);
    ns[b->n] = 0;
    dv__free(b->s);
    b->s = ns;
    b->cap = ncap;
  }
}

/* The whole translation unit handed to the backend's compiler (also used by
 * tests/backends/cuda/test_nvrtc.c, so that it compiles exactly what a build compiles). */
char *dv__program_unit(const dv_program *p, const dv_ksigs *sigs) {
  dv_sbuf b = {0};
  dv__sb_add(&b, "%s\n/* ---- devarray prelude ---- */\n", dv__kernel_header);
  for (size_t i = 0; i < p->ndefines; i++)
    dv__sb_add(&b, "#define %s %s\n", p->defines[2 * i], p->defines[2 * i + 1]);
  /* Each kernel's lowered argument names, for a backend whose DV_KERNEL
   * wraps the body in functions of its own (the host simulator's block
   * functions, kernel.h): only where the reader is sure of them -- one
   * declaration's names (or several that agree), each name whole, and
   * every scalar's type read (where it is not, the reader may have taken
   * another word of the declaration, an attribute macro say, for the
   * name).  Elsewhere the kernel keeps the one call per thread. */
  for (size_t i = 0; sigs && i < sigs->n; i++) {
    const dv_ksig *g = &sigs->v[i];
    bool ok = !g->ambiguous && !g->names_differ && g->nparams > 0;
    for (int j = 0; ok && j < g->nparams; j++) {
      const dv_kparam *q = &g->params[j];
      ok = q->name[0] != 0 && strlen(q->name) < sizeof q->name - 1 &&
           (q->kind != DV_PARAM_SCALAR || (q->type.id != DV_TYPE_COUNT && !q->type.uncertain));
    }
    if (!ok) continue;
    dv__sb_add(&b, "#define DV__HAS_FWD_%s DV__PROBE\n#define DV__FWD_%s ", g->kernel, g->kernel);
    for (int j = 0; j < g->nparams; j++) {
      const dv_kparam *q = &g->params[j];
      if (q->kind == DV_PARAM_SCALAR)
        dv__sb_add(&b, "%s%s", j ? ", " : "", q->name);
      else
        dv__sb_add(&b, "%s%s__base, %s__off%s%s%s", j ? ", " : "", q->name, q->name,
                   q->kind == DV_PARAM_VIEW ? ", " : "", q->kind == DV_PARAM_VIEW ? q->name : "",
                   q->kind == DV_PARAM_VIEW ? "__view" : "");
    }
    dv__sb_add(&b, "\n");
  }
  if (p->const_bytes) dv__sb_add(&b, "DV__CONSTANT_BUFFER(%zu)\n", p->const_bytes);
  for (size_t i = 0; i < p->nconsts; i++)
    dv__sb_add(&b, "#define %s DV__CONST(%s, %zu)\n", p->consts[i].name,
               dv__kernel_ctype(p->consts[i].type), p->consts[i].offset);
  dv__sb_add(&b, "#line 1 \"%s\"\n%s\n", p->name, p->source);
  if (b.failed) {
    dv__free(b.s);
    return NULL;
  }
  return b.s;
}

dv_status dv__program_assemble(const dv_program *p, const char *backend, const char *predefined,
                               dv_ksigs *sigs, char **unit, const char **options) {
  *unit = NULL;
  *options = "";
  /* The kernels' declarations, read for this backend (signature.h): the
   * prelude names their arguments, and launches are checked against them. */
  int bi = dv__kbackend_index(backend);
  dv_status rc = dv__ksig_scan(p->source, p->defines, p->ndefines, bi >= 0 ? p->options[bi] : NULL,
                               backend, predefined, sigs);
  if (rc) return rc;
  *unit = dv__program_unit(p, sigs);
  if (!*unit) {
    dv__ksigs_free(sigs);
    return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot assemble program %s", p->name);
  }
  if (bi >= 0 && p->options[bi]) *options = p->options[bi];
  return DV_OK;
}

/* Key fields are length-prefixed, so that ("ab","c") and ("a","bc") differ. */
static void dv__hash_str(dv__sha256_ctx *h, const char *s) { dv__sha256_field(h, s, strlen(s)); }

static double dv__now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Keep the compiler's log in the program and put its first lines in the
 * thread's detail message. */
static dv_status dv__compile_failed(dv_program *p, dv_status rc) {
  char head[1024];
  const char *log = dv_program_log(p);
  size_t n = 0;
  int lines = 0;
  while (log[n] && n < sizeof head - 1 && lines < 8) {
    if (log[n] == '\n') lines++;
    n++;
  }
  memcpy(head, log, n);
  head[n] = 0;
  if (rc == DV_ERR_COMPILE)
    return dv__error(rc, "program %s failed to compile on %s:\n%s", p->name, p->ctx->be->name,
                     head);
  return rc; /* the backend's own message stands */
}

/* Takes sigs (freed on failure too). */
static dv_status dv__module_new(dv_program *p, dv_bmodule *bm, const dv_klimits *lim,
                                int from_cache, dv_ksigs sigs, dv_module **out) {
  char *program = dv__strdup(p->name);
  dv_module *m = program ? dv__calloc(1, sizeof *m) : NULL;
  if (!m) {
    dv__free(program);
    dv__ksigs_free(&sigs);
    return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate a module");
  }
  dv_kconst *consts = p->nconsts ? dv__calloc(p->nconsts, sizeof *consts) : NULL;
  bool ok = m && (!p->nconsts || consts);
  for (size_t i = 0; ok && i < p->nconsts; i++) {
    consts[i] = p->consts[i];
    consts[i].name = dv__strdup(p->consts[i].name);
    if (!consts[i].name) ok = false;
  }
  if (!ok) {
    if (consts)
      for (size_t i = 0; i < p->nconsts; i++) dv__free(consts[i].name);
    dv__free(consts);
    dv__free(m);
    dv__free(program);
    dv__ksigs_free(&sigs);
    return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate a module");
  }
  dv__handle_open(&m->hdr, DV_HANDLE_MODULE, p->ctx);
  atomic_store(&m->refs, 1);
  m->ctx = p->ctx;
  m->bm = bm;
  m->limits = *lim;
  m->consts = consts;
  m->nconsts = p->nconsts;
  m->const_bytes = p->const_bytes;
  m->from_cache = from_cache;
  m->program = program;
  m->sigs = sigs;
  pthread_mutex_init(&m->lock, NULL);
  atomic_fetch_add(&p->ctx->kernels->live_modules, 1);
  *out = m;
  return DV_OK;
}

static _Atomic int dv__cache_warned;

dv_status dv_program_build(dv_program *p, unsigned flags, dv_module **out) {
  DV_CHECK_NULL(out);
  *out = NULL;
  DV_CHECK_NULL(p);
  DV_CHECK_NOT_IN_CALLBACK();
  if (flags & ~(DV_BUILD_DEBUG | DV_BUILD_NO_CACHE))
    return dv__error(DV_ERR_INVALID_ARGUMENT, "unknown build flags 0x%x", flags);
  dv_context *ctx = p->ctx;
  const dv_backend *be = ctx->be;
  if (!dv__be_has(be, DV_BCAP_KERNELS))
    return dv__error(DV_ERR_NOT_SUPPORTED, "the %s backend cannot run kernels", be->name);
  dv_klimits lim;
  memset(&lim, 0, sizeof lim);
  dv_status rc = be->kernel_limits(ctx->bst, &lim);
  if (rc) return rc;
  if (p->const_bytes > lim.max_constant_bytes)
    return dv__error(DV_ERR_LAUNCH_CONFIG,
                     "program %s declares %zu bytes of constant arrays; the device allows %zu",
                     p->name, p->const_bytes, lim.max_constant_bytes);
  char target[512] = "";
  rc = be->kernel_target_id(ctx->bst, target, sizeof target);
  if (rc) return rc;
  dv_ksigs sigs;
  char *unit = NULL;
  const char *options = "";
  rc = dv__program_assemble(p, be->name, lim.predefined, &sigs, &unit, &options);
  if (rc) return rc;
  char *refused = NULL;
  rc = dv__check_declarations(p->name, &sigs, &refused);
  if (rc) {
    dv__free(p->log);
    p->log = refused;
    dv__free(unit);
    dv__ksigs_free(&sigs);
    return rc;
  }
  dv_build_req req = {p->name, unit, options, flags, p->const_bytes, p->const_data};

  /* The cache key. */
  uint8_t key[32];
  dv__sha256_ctx h;
  dv__sha256_init(&h);
  dv__hash_str(&h, "devarray kernel cache 1");
  dv__hash_str(&h, dv_version());
  dv__hash_str(&h, be->name);
  dv__hash_str(&h, target);
  unsigned kf = flags & DV_BUILD_DEBUG;
  dv__sha256_field(&h, &kf, sizeof kf);
  dv__hash_str(&h, options);
  dv__hash_str(&h, unit);
  dv__sha256_final(&h, key);

  dv__kcache *cache = NULL;
  if (ctx->opt[DV_OPT_KERNEL_CACHE].i && !(flags & DV_BUILD_NO_CACHE)) {
    if (dv__kcache_open(ctx->opt[DV_OPT_KERNEL_CACHE_DIR].s, &cache) != DV_OK) {
      cache = NULL;
      if (atomic_exchange(&dv__cache_warned, 1) == 0)
        dv__log(DV_LOG_WARN, "kernel cache disabled: %s", dv_last_error());
    }
  }

  dv_bmodule *bm = NULL;
  char *log = NULL;
  int from_cache = 0;
  if (cache) {
    void *image = NULL;
    size_t isz = 0;
    if (dv__kcache_get(cache, key, &image, &isz) == DV_OK && image) {
      if (be->module_load(ctx->bst, &req, image, isz, &bm, &log) == DV_OK) {
        from_cache = 1;
      } else {
        dv__log(DV_LOG_INFO, "kernel cache: entry for %s could not be loaded (%s); rebuilding",
                p->name, dv_last_error());
        bm = NULL;
      }
      dv__free(log);
      log = NULL;
    }
    dv__free(image);
  }
  if (!bm) {
    void *image = NULL;
    size_t isz = 0;
    double t0 = dv__now_ms();
    rc = be->module_build(ctx->bst, &req, &bm, &image, &isz, &log);
    dv__free(p->log);
    p->log = log;
    log = NULL;
    if (rc) {
      dv__free(image);
      dv__kcache_close(cache);
      dv__free(unit);
      dv__ksigs_free(&sigs);
      return dv__compile_failed(p, rc);
    }
    dv__log(DV_LOG_DEBUG, "program %s compiled on %s in %.1f ms", p->name, be->name,
            dv__now_ms() - t0);
    if (cache && image && dv__kcache_put(cache, key, image, isz) != DV_OK)
      dv__log(DV_LOG_INFO, "kernel cache: cannot store %s: %s", p->name, dv_last_error());
    dv__free(image);
  } else {
    dv__free(p->log);
    p->log = NULL;
  }
  dv__kcache_close(cache);
  dv__free(unit);
  rc = dv__module_new(p, bm, &lim, from_cache, sigs, out);
  if (rc) {
    dv_status keep = rc;
    be->module_unload(ctx->bst, bm);
    return keep;
  }
  return DV_OK;
}

/* ---- the cache, for tools ------------------------------------------------------ */

static void dv__cache_dir_option(const dv_config *cfg, char *dir, size_t cap) {
  dv_optval opt[DV_OPT_COUNT];
  dv__options_resolve(cfg, opt);
  snprintf(dir, cap, "%s", opt[DV_OPT_KERNEL_CACHE_DIR].s);
}

dv_status dv_kernel_cache_info(const dv_config *cfg, char *path, size_t cap, uint64_t *entries,
                               uint64_t *bytes) {
  if (path && cap) path[0] = 0;
  if (entries) *entries = 0;
  if (bytes) *bytes = 0;
  DV_CHECK_NULL(path);
  char dir[sizeof ((dv_optval *)0)->s];
  dv__cache_dir_option(cfg, dir, sizeof dir);
  uint64_t e = 0, b = 0;
  dv_status rc = dv__kcache_usage(dir, &e, &b, path, cap);
  if (rc) return rc;
  if (entries) *entries = e;
  if (bytes) *bytes = b;
  return DV_OK;
}

dv_status dv_kernel_cache_clear(const dv_config *cfg) {
  char dir[sizeof ((dv_optval *)0)->s];
  dv__cache_dir_option(cfg, dir, sizeof dir);
  return dv__kcache_clear(dir);
}
