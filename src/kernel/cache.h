/* The compiled-module cache on disk.  Placeholder interface; the implementation lands separately. */
#ifndef DV_KCACHE_H
#define DV_KCACHE_H
#include "../core/internal.h"
typedef struct dv__kcache dv__kcache;
dv_status dv__kcache_open(const char *dir_option, dv__kcache **out);
void dv__kcache_close(dv__kcache *c);
dv_status dv__kcache_get(dv__kcache *c, const uint8_t key[32], void **image, size_t *size);
dv_status dv__kcache_put(dv__kcache *c, const uint8_t key[32], const void *image, size_t size);
#endif
