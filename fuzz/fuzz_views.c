/*
 * libFuzzer target: arbitrary shapes, strides, indices, reshape targets and
 * orders against the array layer.  Every call must return a status (never
 * crash, never overflow, never read outside the described memory): views
 * are made over a host buffer large enough for any layout the library
 * accepts, and each accepted view is read element by element through
 * dv_array_get_item, which copies exactly one element.
 *   build: cmake -DDV_FUZZ=ON with clang; run: fuzz_views -runs=N
 */
#include <stdint.h>
#include <string.h>

#include "devarray.h"

static dv_context *ctx;
static unsigned char arena[1 << 16];

static int64_t take(const uint8_t **p, size_t *n, int bytes) {
  int64_t v = 0;
  for (int i = 0; i < bytes; i++) {
    v = (v << 8) | (*n ? **p : 0);
    if (*n) (*p)++, (*n)--;
  }
  return v;
}

#include <stdio.h>
#include <stdlib.h>
static void show(const char *what, dv_array *a) {
  if (!getenv("FUZZ_DEBUG")) return;
  fprintf(stderr, "%s: nd=%d isz=%zu shape", what, dv_array_ndim(a), dv_dtype_itemsize(dv_array_dtype(a)));
  for (int i = 0; i < dv_array_ndim(a); i++) fprintf(stderr, " %lld", (long long)dv_array_shape(a)[i]);
  fprintf(stderr, " strides");
  for (int i = 0; i < dv_array_ndim(a); i++) fprintf(stderr, " %lld", (long long)dv_array_strides(a)[i]);
  void *p;
  dv_array_host_data(a, &p);
  fprintf(stderr, " data-arena %lld\n", (long long)((unsigned char *)p - arena));
}

static void touch(dv_array *a) {
  show("touch", a);
  /* read a few elements of an accepted view; indices in range by construction */
  int nd = dv_array_ndim(a);
  if (dv_array_size(a) == 0 || nd > 8) return;
  int64_t idx[8] = {0};
  unsigned char out[64];
  dv_array_get_item(a, idx, out, sizeof out, NULL);
  for (int i = 0; i < nd; i++) idx[i] = dv_array_shape(a)[i] - 1;
  dv_array_get_item(a, idx, out, sizeof out, NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!ctx) {
    dv_config *cfg;
    dv_config_create(&cfg);
    dv_config_set(cfg, "backend", "host");
    dv_config_set(cfg, "log_level", "off");
    if (dv_context_create(cfg, &ctx)) return 0;
    dv_config_destroy(cfg);
  }
  const uint8_t *p = data;
  size_t n = size;
  int nd = (int)(take(&p, &n, 1) % 7) - 1; /* -1 .. 5 */
  int64_t shape[8], strides[8];
  for (int i = 0; i < 8; i++) shape[i] = (int64_t)(int8_t)take(&p, &n, 1) % 9;
  for (int i = 0; i < 8; i++) strides[i] = (int64_t)(int16_t)take(&p, &n, 2);
  const dv_dtype *dt = dv_dtype_get((dv_type_id)(take(&p, &n, 1) % DV_RECORD));
  dv_array *a = NULL;
  /* the wrap validates the layout; point into the middle of the arena so
   * that negative strides stay inside it, and keep only small extents */
  if (dv_host_array_wrap(ctx, arena + sizeof arena / 2, nd, shape, dt, (take(&p, &n, 1) & 1) ? strides : NULL, &a))
    return 0;
  /* the wrapped memory must hold the layout the library accepted */
  int64_t reach = 16; /* the largest itemsize */
  for (int i = 0; i < dv_array_ndim(a); i++) {
    int64_t e = (dv_array_shape(a)[i] > 0 ? dv_array_shape(a)[i] - 1 : 0) * dv_array_strides(a)[i];
    reach += e < 0 ? -e : e;
  }
  if (reach >= (int64_t)sizeof arena / 2) {
    dv_array_release(a);
    return 0;
  }
  touch(a);
  dv_array_is_c_contiguous(a), dv_array_is_f_contiguous(a);
  /* slicing */
  dv_index idx[8];
  int k = (int)(take(&p, &n, 1) % 8);
  for (int i = 0; i < k; i++) {
    if (take(&p, &n, 1) & 1)
      idx[i] = DV_AT((int64_t)(int8_t)take(&p, &n, 1));
    else {
      int64_t s0 = (int64_t)(int8_t)take(&p, &n, 1), s1 = (int64_t)(int8_t)take(&p, &n, 1);
      int64_t st = (int64_t)(int8_t)take(&p, &n, 1);
      idx[i] = DV_SLICE(s0 == -128 ? DV_NONE : s0, s1 == -128 ? DV_NONE : s1, st);
    }
  }
  dv_array *v = NULL;
  if (dv_array_slice(a, k, idx, &v) == DV_OK) {
    touch(v);
    /* reshape (views only: this arena is host memory) and ravel */
    int64_t ns[8];
    int nnd = (int)(take(&p, &n, 1) % 9) - 1;
    for (int i = 0; i < 8; i++) ns[i] = (int64_t)(int8_t)take(&p, &n, 1) % 7;
    const char orders[] = "CFAX";
    char o = orders[take(&p, &n, 1) % 4];
    dv_array *r = NULL;
    if (dv_array_reshape(v, nnd, ns, o, DV_VIEW_ONLY, NULL, &r) == DV_OK) touch(r);
    dv_array_release(r);
    r = NULL;
    if (dv_array_ravel(v, o, DV_VIEW_ONLY, NULL, &r) == DV_OK) touch(r);
    dv_array_release(r);
    size_t cnt = 0;
    dv_array *parts[64];
    int64_t section = (int64_t)(int8_t)take(&p, &n, 1);
    if (dv_array_split(v, section, NULL, 0, &cnt) == DV_OK && cnt <= 64 &&
        dv_array_split(v, section, parts, 64, &cnt) == DV_OK)
      for (size_t i = 0; i < cnt; i++) touch(parts[i]), dv_array_release(parts[i]);
  }
  dv_array_release(v);
  dv_array_release(a);
  return 0;
}
