#define _DEFAULT_SOURCE /* mkdtemp, setenv */
#include "common.h"

#include <unistd.h>

dv_context *g_ctx;
const char *g_backend = "host";

/* A context for the backend under test (g_backend: "NAME-pool" is backend NAME with the pool
 * as memory manager, "NAME-async" with the driver's pool (the async manager), "host-staged" the simulator without its strided copies) with n options
 * "name=value". */
static dv_status context_with(dv_context **out, const char *const *opts, int n) {
  dv_config *cfg = NULL;
  *out = NULL;
  dv_status rc = dv_config_create(&cfg);
  if (rc) return rc;
  char be[32];
  snprintf(be, sizeof be, "%s", g_backend);
  char *dash = strchr(be, '-');
  if (dash && strcmp(dash, "-pool") == 0) {
    *dash = 0;
    dv_config_set(cfg, "memory_manager", "pool");
  } else if (dash && strcmp(dash, "-async") == 0) { /* the driver's stream-ordered pool (CUDA, HIP) */
    *dash = 0;
    dv_config_set(cfg, "memory_manager", "async");
  } else if (strcmp(be, "host-staged") == 0) {
    be[4] = 0;
    dv_config_set(cfg, "host_strided", "off");
  }
  rc = dv_config_set(cfg, "backend", be);
  for (int i = 0; !rc && i < n; i++) {
    const char *kv = opts[i];
    char name[128];
    const char *eq = strchr(kv, '=');
    if (!eq || (size_t)(eq - kv) >= sizeof name) {
      rc = DV_ERR_INVALID_ARGUMENT;
      break;
    }
    memcpy(name, kv, (size_t)(eq - kv));
    name[eq - kv] = 0;
    rc = dv_config_set(cfg, name, eq + 1);
  }
  if (!rc) rc = dv_context_create(cfg, out);
  dv_config_destroy(cfg);
  return rc;
}

/* The options of a NULL-terminated list (at most 32) into opts; their number. */
static int collect(const char **opts, const char *first, va_list ap) {
  int n = 0;
  for (const char *o = first; o && n < 32; o = va_arg(ap, const char *)) opts[n++] = o;
  return n;
}

dv_status test_context(dv_context **out, ...) {
  const char *opts[32];
  va_list ap;
  va_start(ap, out);
  int n = collect(opts, va_arg(ap, const char *), ap);
  va_end(ap);
  return context_with(out, opts, n);
}

dv_context *test_context_or_fail(const char *opt, ...) {
  const char *opts[32];
  va_list ap;
  va_start(ap, opt);
  int n = collect(opts, opt, ap);
  va_end(ap);
  dv_context *c = NULL;
  dv_status rc = context_with(&c, opts, n);
  if (rc) fail_msg("context: %s: %s", dv_status_name(rc), dv_last_error());
  return c;
}

int ctx_setup(void **state) {
  (void)state;
  dv_status rc = test_context(&g_ctx, NULL);
  if (rc) {
    fprintf(stderr, "context on %s: %s: %s\n", g_backend, dv_status_name(rc), dv_last_error());
    return -1;
  }
  return 0;
}

int ctx_teardown(void **state) {
  (void)state;
  dv_status rc = dv_context_check_memory(g_ctx);
  if (rc) {
    fprintf(stderr, "memory check failed: %s: %s\n", dv_status_name(rc), dv_last_error());
    return -1;
  }
  rc = dv_context_destroy(g_ctx);
  if (rc) {
    fprintf(stderr, "context destroy failed: %s: %s\n", dv_status_name(rc), dv_last_error());
    return -1;
  }
  g_ctx = NULL;
  return 0;
}

int test_main(int argc, char **argv, const char *suite, const struct CMUnitTest *tests, size_t n) {
  if (argc > 1) g_backend = argv[1];
  char probe[32];
  snprintf(probe, sizeof probe, "%s", g_backend);
  if (strchr(probe, '-')) *strchr(probe, '-') = 0;
  char reason[512];
  dv_status rc = dv_backend_probe(probe, reason, sizeof reason);
  if (rc == DV_OK) {
    /* The probe can succeed while opening still fails (e.g. only a CPU
     * OpenCL device); the skip decision is made on an actual open. */
    dv_context *c = NULL;
    rc = test_context(&c, NULL);
    if (rc) snprintf(reason, sizeof reason, "%s", dv_last_error());
    dv_context_destroy(c);
  }
  if (rc) {
    printf("SKIPPED: suite %s on backend %s: %s (%s)\n", suite, g_backend, reason, dv_status_name(rc));
    return 77;
  }
  char name[128];
  snprintf(name, sizeof name, "%s[%s]", suite, g_backend);
  printf("suite %s on backend %s: %zu tests\n", suite, g_backend, n);
  return _cmocka_run_group_tests(name, tests, n, NULL, NULL);
}

void ref_copy(void *dst, const int64_t *dst_strides, const void *src, const int64_t *src_strides,
              const int64_t *shape, int nd, size_t itemsize) {
  int64_t total = 1;
  for (int i = 0; i < nd; i++) total *= shape[i];
  for (int64_t lin = 0; lin < total; lin++) {
    int64_t rem = lin, doff = 0, soff = 0;
    for (int i = nd - 1; i >= 0; i--) {
      int64_t k = rem % shape[i];
      rem /= shape[i];
      doff += k * dst_strides[i];
      soff += k * src_strides[i];
    }
    memcpy((char *)dst + doff, (const char *)src + soff, itemsize);
  }
}

void fill_pattern(void *p, size_t n, unsigned seed) {
  unsigned char *c = p;
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; i++) {
    x ^= x << 13, x ^= x >> 17, x ^= x << 5;
    c[i] = (unsigned char)(x % 255 + 1);
  }
}

static uint64_t g_rnd = 88172645463325252ull;
void rnd_seed(uint64_t s) { g_rnd = s ? s : 88172645463325252ull; }
uint64_t rnd(void) {
  g_rnd ^= g_rnd << 13;
  g_rnd ^= g_rnd >> 7;
  g_rnd ^= g_rnd << 17;
  return g_rnd;
}
int64_t rnd_range(int64_t lo, int64_t hi) { return lo + (int64_t)(rnd() % (uint64_t)(hi - lo + 1)); }

char *read_text_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) fail_msg("cannot open %s", path);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *s = malloc((size_t)n + 1);
  assert_non_null(s);
  assert_int_equal(fread(s, 1, (size_t)n, f), (size_t)n);
  s[n] = 0;
  fclose(f);
  return s;
}

int kernel_suite_begin(int argc, char **argv, const char *suite, const char *sub, char *dir,
                       size_t cap) {
  const char *tmp = getenv("TMPDIR");
  snprintf(dir, cap, "%s/dvk-%s-XXXXXX", tmp ? tmp : "/tmp", suite);
  if (!mkdtemp(dir)) return 1;
  char env[600];
  if (sub)
    snprintf(env, sizeof env, "%s/%s", dir, sub);
  else
    snprintf(env, sizeof env, "%s", dir);
  setenv("DV_KERNEL_CACHE_DIR", env, 1);
  if (argc < 2) return 0;
  g_backend = argv[1];
  dv_context *c = NULL;
  if (test_context(&c, NULL) != DV_OK) return 0; /* test_main reports the backend missing */
  dv_program *p = NULL;
  dv_module *m = NULL;
  dv_status rc = dv_program_create(c, "probe", "DV_KERNEL(probe, int x) { (void)x; }", &p);
  if (!rc) rc = dv_program_build(p, DV_BUILD_NO_CACHE, &m);
  if (rc == DV_ERR_NOT_SUPPORTED || rc == DV_ERR_NO_COMPILER)
    printf("SKIPPED: suite %s on backend %s: kernels cannot be built: %s (%s)\n", suite, g_backend,
           dv_last_error(), dv_status_name(rc));
  dv_module_release(m);
  dv_program_destroy(p);
  dv_context_destroy(c);
  if (rc == DV_ERR_NOT_SUPPORTED || rc == DV_ERR_NO_COMPILER) return kernel_suite_end(dir, 77);
  return 0;
}

int kernel_suite_end(const char *dir, int rc) {
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
  return rc;
}

bool test_on_cuda_double(dv_context *ctx) {
  dv_device_info di;
  const char *be = dv_context_backend(ctx);
  return (strcmp(be, "cuda") == 0 || strcmp(be, "hip") == 0) && dv_context_device_info(ctx, &di) == DV_OK &&
         (strstr(di.name, "CUDA test double") != NULL || strstr(di.name, "HIP test double") != NULL);
}

char *test_kernel_source(const char *name) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", DV_TEST_KERNELS_DIR, name);
  return read_text_file(path);
}

dv_module *test_build(dv_context *ctx, const char *name, const char *src, const char *host_opts,
                      ...) {
  char *file = src ? NULL : test_kernel_source(name);
  dv_program *p = NULL;
  assert_ok(dv_program_create(ctx, name, src ? src : file, &p));
  free(file);
  if (host_opts) assert_ok(dv_program_options(p, "host", host_opts));
  va_list ap;
  va_start(ap, host_opts);
  for (const char *kv; (kv = va_arg(ap, const char *)) != NULL;) {
    char def[128];
    const char *eq = strchr(kv, '=');
    snprintf(def, sizeof def, "%.*s", (int)(eq ? (size_t)(eq - kv) : strlen(kv)), kv);
    assert_ok(dv_program_define(p, def, eq ? eq + 1 : NULL));
  }
  va_end(ap);
  dv_module *m = NULL;
  dv_status rc = dv_program_build(p, 0, &m);
  if (rc)
    fail_msg("build %s: %s: %s\nlog:\n%s", name, dv_status_name(rc), dv_last_error(),
             dv_program_log(p));
  dv_program_destroy(p);
  return m;
}

dv_kernel *test_kernel(dv_module *m, const char *name) {
  dv_kernel *k = NULL;
  assert_ok(dv_module_kernel(m, name, &k));
  assert_non_null(k);
  return k;
}

dv_array *test_dev_from(dv_context *ctx, const void *data, int64_t n, dv_type_id t) {
  dv_array *h = NULL, *d = NULL;
  assert_ok(dv_host_array_wrap(ctx, (void *)data, 1, &n, dv_dtype_get(t), NULL, &h));
  assert_ok(dv_to_device(ctx, h, NULL, 1, NULL, &d));
  dv_array_release(h);
  return d;
}

void test_to_host(const dv_array *d, void *data) {
  dv_array *h = NULL;
  assert_ok(dv_host_array_wrap(dv_array_context(d), data, dv_array_ndim(d), dv_array_shape(d),
                               dv_array_dtype(d), NULL, &h));
  assert_ok(dv_copy_to_host(d, h, NULL, NULL));
  dv_array_release(h);
}

bool test_host_fast(dv_context *ctx) {
  char mode[32] = "";
  return strcmp(dv_context_backend(ctx), "host") == 0 &&
         dv_context_option(ctx, "host_mode", mode, sizeof mode, NULL) == DV_OK &&
         strcmp(mode, "fast") == 0;
}
