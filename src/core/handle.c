/*
 * Handles that cannot be used after release (issue 37, item 3).  Every
 * public handle (array, stream, event, module, context) begins with a
 * dv_handle: a magic word naming its kind while it is alive, the kind's
 * "released" word from the caller's last release on.  Each public entry
 * point checks it with dv__handle_check (one load and compare).
 *
 * In checked mode (host_mode=checked, the default in Debug builds) a
 * released handle's memory is not freed at once: dv__handle_retire keeps it
 * in a bounded, process-wide quarantine (the last DV_HANDLE_QUARANTINE
 * records, the oldest freed first; all of them at unload), so that a later
 * use reads the released word and is DV_ERR_MISUSE instead of a use after
 * free.  Under AddressSanitizer everything past the header is poisoned
 * while quarantined.  The quarantine stays reachable from a static array,
 * so LeakSanitizer never reports it.  In fast mode the memory is freed.
 */
#include <pthread.h>
#include <stdlib.h>

#include "core.h"

#if defined(__SANITIZE_ADDRESS__)
#define DV__ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define DV__ASAN 1
#endif
#endif
#ifdef DV__ASAN
void __asan_poison_memory_region(void const volatile *addr, size_t size);
void __asan_unpoison_memory_region(void const volatile *addr, size_t size);
#define DV__POISON(p, n) __asan_poison_memory_region((p), (n))
#define DV__UNPOISON(p, n) __asan_unpoison_memory_region((p), (n))
#else
#define DV__POISON(p, n) ((void)(p), (void)(n))
#define DV__UNPOISON(p, n) ((void)(p), (void)(n))
#endif

static const char *const dv__kind_names[DV_HANDLE_KINDS] = {"array", "stream", "event", "module",
                                                           "context"};

const char *dv__handle_kind_name(dv_handle_kind kind) {
  return (unsigned)kind < DV_HANDLE_KINDS ? dv__kind_names[kind] : "handle";
}

static dv_status dv__handle_message(const dv_handle *h, dv_handle_kind kind, const char *fn) {
  uint32_t m = atomic_load_explicit(&((dv_handle *)h)->magic, memory_order_acquire);
  const char *what = dv__handle_kind_name(kind);
  if (m == DV__HANDLE_RELEASED(kind))
    return dv__error(DV_ERR_MISUSE, "%s: %s was released (used after its last release)", fn, what);
  for (int k = 0; k < DV_HANDLE_KINDS; k++)
    if (m == DV__HANDLE_LIVE(k) || m == DV__HANDLE_RELEASED(k))
      return dv__error(DV_ERR_MISUSE, "%s: not a %s (a %s handle)", fn, what,
                       dv__handle_kind_name((dv_handle_kind)k));
  return dv__error(DV_ERR_MISUSE, "%s: not a %s (a pointer that is not a devarray %s, or one long freed)",
                   fn, what, what);
}

/* Each misuse is also a report for `devarray check` (report.c). */
dv_status dv__handle_error(const dv_handle *h, dv_handle_kind kind, const char *fn) {
  dv_status rc = dv__handle_message(h, kind, fn);
  dv__report("api", rc, dv_last_error());
  return rc;
}

void dv__handle_report(const dv_handle *h, dv_handle_kind kind, const char *fn) {
  if (atomic_load_explicit(&((dv_handle *)h)->magic, memory_order_acquire) == DV__HANDLE_RELEASED(kind))
    dv__error(DV_ERR_MISUSE, "%s: %s was released already (a double release: nothing changes)", fn,
              dv__handle_kind_name(kind));
  else
    dv__handle_message(h, kind, fn);
  dv__report("api", DV_ERR_MISUSE, dv_last_error());
  dv__log(DV_LOG_ERROR, "%s", dv_last_error());
}

/* ---- the quarantine ---- */

typedef struct dv_qrec {
  void *p;
  size_t size;
  void (*free_fn)(void *);
} dv_qrec;

static pthread_mutex_t dv__q_lock = PTHREAD_MUTEX_INITIALIZER;
static dv_qrec dv__q[DV_HANDLE_QUARANTINE]; /* a ring: reachable, so never a leak */
static size_t dv__q_next, dv__q_count;

static void dv__q_free(dv_qrec r) {
  if (!r.p) return;
  DV__UNPOISON(r.p, r.size);
  if (r.free_fn)
    r.free_fn(r.p);
  else
    dv__free(r.p);
}

void dv__handle_retire(void *p, size_t size, size_t hdr_off, bool checked, void (*free_fn)(void *)) {
  if (!p) return;
  if (!checked || size < hdr_off + sizeof(dv_handle)) {
    if (free_fn)
      free_fn(p);
    else
      dv__free(p);
    return;
  }
  DV__POISON(p, hdr_off);
  DV__POISON((char *)p + hdr_off + sizeof(dv_handle), size - hdr_off - sizeof(dv_handle));
  dv_qrec old = {0};
  pthread_mutex_lock(&dv__q_lock);
  old = dv__q[dv__q_next];
  dv__q[dv__q_next] = (dv_qrec){p, size, free_fn};
  dv__q_next = (dv__q_next + 1) % DV_HANDLE_QUARANTINE;
  if (dv__q_count < DV_HANDLE_QUARANTINE) dv__q_count++;
  pthread_mutex_unlock(&dv__q_lock);
  dv__q_free(old); /* the oldest, outside the lock */
}

/* The library's unload frees what is still quarantined. */
__attribute__((destructor)) static void dv__handle_quarantine_drain(void) {
  pthread_mutex_lock(&dv__q_lock);
  for (size_t i = 0; i < DV_HANDLE_QUARANTINE; i++) {
    dv__q_free(dv__q[i]);
    dv__q[i] = (dv_qrec){0};
  }
  dv__q_count = dv__q_next = 0;
  pthread_mutex_unlock(&dv__q_lock);
}
