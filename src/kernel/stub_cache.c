/* TEMPORARY: stands in for the cache and SHA-256 until they are merged (not a hash). */
#include <string.h>
#include "cache.h"
#include "sha256.h"
void dv__sha256_init(dv__sha256_ctx *c) { memset(c, 0, sizeof *c); }
void dv__sha256_update(dv__sha256_ctx *c, const void *data, size_t n) {
  const uint8_t *p = data;
  for (size_t i = 0; i < n; i++) c->h[i % 8] = c->h[i % 8] * 16777619u ^ p[i];
  c->len += n;
}
void dv__sha256_final(dv__sha256_ctx *c, uint8_t out[32]) { memcpy(out, c->h, 32); }
dv_status dv__kcache_open(const char *dir_option, dv__kcache **out) {
  (void)dir_option;
  *out = NULL;
  return dv__error(DV_ERR_NOT_SUPPORTED, "kernel cache not built");
}
void dv__kcache_close(dv__kcache *c) { (void)c; }
dv_status dv__kcache_get(dv__kcache *c, const uint8_t key[32], void **image, size_t *size) {
  (void)c, (void)key;
  *image = NULL, *size = 0;
  return DV_OK;
}
dv_status dv__kcache_put(dv__kcache *c, const uint8_t key[32], const void *image, size_t size) {
  (void)c, (void)key, (void)image, (void)size;
  return DV_OK;
}
