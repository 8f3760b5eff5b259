/*
 * Data races (issue 24).  PLACEHOLDER while the engine is built on its own
 * branch: it records nothing and reports nothing.  host_check.h is the
 * interface.
 */
#include "../../core/core.h"
#include "host_check.h"

struct hk_race {
  int unused;
};

hk_race *hk_race_new(size_t nregions, const size_t *bytes, size_t shared_bytes,
                     int block_threads, int wave) {
  (void)nregions, (void)bytes, (void)shared_bytes, (void)block_threads, (void)wave;
  return dv__calloc(1, sizeof(hk_race));
}
void hk_race_free(hk_race *r) { dv__free(r); }
void hk_race_block(hk_race *r, uint64_t block) { (void)r, (void)block; }
void hk_race_barrier(hk_race *r, int fence) { (void)r, (void)fence; }
void hk_race_wave(hk_race *r, int w) { (void)r, (void)w; }
bool hk_race_global(hk_race *r, size_t g, size_t off, size_t n, const hk_acc *a,
                    hk_race_hit *hit) {
  (void)r, (void)g, (void)off, (void)n, (void)a, (void)hit;
  return false;
}
bool hk_race_shared(hk_race *r, size_t off, size_t n, const hk_acc *a, hk_race_hit *hit) {
  (void)r, (void)off, (void)n, (void)a, (void)hit;
  return false;
}
