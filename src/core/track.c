/*
 * Tracking: every live handle with where it was made (issue 38 item 3(b),
 * issue 37 item 2's --leak-check).
 *
 * Off unless asked for (dv_tracking_enable, DV_TRACK=1, or DV_LEAK_CHECK=1,
 * which `devarray check --leak-check` sets); off, it is one relaxed load and
 * a branch where a handle is made or released (dv__handle_open/_close in
 * core.h).  On, each array, stream, event, module and context made for a
 * caller gets a record in a process-wide table: its kind, its context, a
 * creation number and its origin.  The origin is the thread's label when
 * one is set (dv_tracking_set_origin: the Python binding passes the
 * caller's file:line), else the return address of the first frame outside
 * libdevarray (backtrace(3)), which dladdr(3) turns into `module+0xoffset`
 * and `devarray check` into file:line with addr2line.
 *
 * A record that cannot be allocated is counted, never a failure of the
 * call that made the handle: tracking changes no status the program sees.
 * The listing (dv_tracking_snapshot_json, the pool's memory snapshot) and
 * the leak report say how many went untracked.
 *
 * The array layer describes its handles (dtype, shape, memory, bytes)
 * through a function it registers (dv__track_set_describer): the core
 * reads no array.
 */
#include <dlfcn.h>
#include <execinfo.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"

_Atomic int dv__tracking;

#define DV_TRACK_BUCKETS 1024
#define DV_TRACK_LABEL 160
#define DV_TRACK_PCS 4

typedef struct dv_track_rec {
  const void *h;
  dv_handle_kind kind;
  dv_context *ctx;
  uint64_t seq;
  void *pc[DV_TRACK_PCS];      /* the caller's return address (a static link: several), when no label */
  int npc;
  char label[DV_TRACK_LABEL];  /* the thread's origin label, or "" */
  struct dv_track_rec *next;
} dv_track_rec;

static pthread_mutex_t dv__track_lock = PTHREAD_MUTEX_INITIALIZER;
static dv_track_rec *dv__track_tab[DV_TRACK_BUCKETS];
static uint64_t dv__track_seq, dv__track_live, dv__track_lost;
static bool dv__track_leak_report; /* DV_LEAK_CHECK: report at unload */
static dv_track_describe_fn dv__track_describer;
static _Thread_local char dv__track_origin_tls[DV_TRACK_LABEL];

static size_t dv__track_bucket(const void *h) {
  uintptr_t x = (uintptr_t)h;
  x ^= x >> 17;
  x *= 0x9e3779b97f4a7c15ull;
  return (size_t)(x >> 40) % DV_TRACK_BUCKETS;
}

void dv__track_set_describer(dv_track_describe_fn fn) {
  pthread_mutex_lock(&dv__track_lock);
  dv__track_describer = fn;
  pthread_mutex_unlock(&dv__track_lock);
}

/* The first return address on the stack outside this library (the
 * public function's caller) into pc[0]; 1.  In a static link the library
 * cannot be told from the program by its object: the return addresses
 * above this file's caller, up to DV_TRACK_PCS of them. */
static const char dv__track_anchor = 0; /* an address inside this library */
static int dv__track_caller(void **pc) {
  void *fr[16]; /* the public entry is a few frames down: the unwinder's cost grows with depth */
  int n = backtrace(fr, 16);
  Dl_info self, di, prog;
  bool known = dladdr(&dv__track_anchor, &self) != 0;
  bool same_object = known && n > 0 && dladdr(fr[n - 1], &prog) && prog.dli_fbase == self.dli_fbase;
  if (known && !same_object) {
    for (int i = 1; i < n; i++)
      if (!dladdr(fr[i], &di) || di.dli_fbase != self.dli_fbase) {
        pc[0] = fr[i];
        return 1;
      }
    return 0;
  }
  int k = 0;
  for (int i = 3; i < n && k < DV_TRACK_PCS; i++) pc[k++] = fr[i]; /* past track_add and handle_open's caller */
  return k;
}

void dv__track_add(const void *h, dv_handle_kind kind, dv_context *ctx) {
  if (!atomic_load_explicit(&dv__tracking, memory_order_relaxed)) return;
  dv_track_rec *r = dv__malloc(sizeof *r);
  pthread_mutex_lock(&dv__track_lock);
  if (!r) {
    dv__track_lost++;
    pthread_mutex_unlock(&dv__track_lock);
    return;
  }
  r->seq = ++dv__track_seq;
  pthread_mutex_unlock(&dv__track_lock);
  r->h = h;
  r->kind = kind;
  r->ctx = ctx;
  r->npc = 0;
  snprintf(r->label, sizeof r->label, "%s", dv__track_origin_tls);
  if (!r->label[0]) r->npc = dv__track_caller(r->pc);
  size_t b = dv__track_bucket(h);
  pthread_mutex_lock(&dv__track_lock);
  if (!atomic_load(&dv__tracking)) { /* turned off meanwhile: its records are gone */
    pthread_mutex_unlock(&dv__track_lock);
    dv__free(r);
    return;
  }
  r->next = dv__track_tab[b];
  dv__track_tab[b] = r;
  dv__track_live++;
  pthread_mutex_unlock(&dv__track_lock);
}

void dv__track_remove(const void *h) {
  size_t b = dv__track_bucket(h);
  dv_track_rec *gone = NULL;
  pthread_mutex_lock(&dv__track_lock);
  for (dv_track_rec **p = &dv__track_tab[b]; *p; p = &(*p)->next)
    if ((*p)->h == h) {
      gone = *p;
      *p = gone->next;
      dv__track_live--;
      break;
    }
  pthread_mutex_unlock(&dv__track_lock);
  dv__free(gone);
}

void dv_tracking_forget(const void *handle) {
  if (handle) dv__track_remove(handle);
}

static void dv__track_clear_locked(void) {
  for (size_t b = 0; b < DV_TRACK_BUCKETS; b++)
    for (dv_track_rec *r = dv__track_tab[b], *n; r; r = n) {
      n = r->next;
      dv__free(r);
    }
  memset(dv__track_tab, 0, sizeof dv__track_tab);
  dv__track_live = dv__track_lost = 0;
}

dv_status dv_tracking_enable(int on) {
  pthread_mutex_lock(&dv__track_lock);
  if (!on) dv__track_clear_locked();
  atomic_store(&dv__tracking, on ? 1 : 0);
  pthread_mutex_unlock(&dv__track_lock);
  return DV_OK;
}

int dv_tracking_enabled(void) { return atomic_load(&dv__tracking); }

void dv_tracking_set_origin(const char *where) {
  snprintf(dv__track_origin_tls, sizeof dv__track_origin_tls, "%s", where ? where : "");
}

/* "module+0xoffset (symbol)" for each return address (" <- " between),
 * the label when there is one, "?" for none. */
static void dv__track_where(const dv_track_rec *r, char *out, size_t cap) {
  if (r->label[0]) {
    snprintf(out, cap, "%s", r->label);
    return;
  }
  snprintf(out, cap, "?");
  size_t n = 0;
  for (int i = 0; i < r->npc && n < cap; i++) {
    Dl_info di;
    const char *sep = i ? " <- " : "";
    int w;
    if (!dladdr(r->pc[i], &di) || !di.dli_fname) {
      w = snprintf(out + n, cap - n, "%s%p", sep, r->pc[i]);
    } else {
      const char *mod = di.dli_fname[0] ? di.dli_fname : "?";
      unsigned long long off = (unsigned long long)((uintptr_t)r->pc[i] - (uintptr_t)di.dli_fbase);
      if (di.dli_sname)
        w = snprintf(out + n, cap - n, "%s%s+0x%llx (%s)", sep, mod, off, di.dli_sname);
      else
        w = snprintf(out + n, cap - n, "%s%s+0x%llx", sep, mod, off);
    }
    if (w > 0) n += (size_t)w;
  }
}

static void dv__track_info(const dv_track_rec *r, dv_track_info *info) {
  memset(info, 0, sizeof *info);
  info->memory = -1;
  if (r->kind == DV_HANDLE_ARRAY && dv__track_describer) dv__track_describer(r->h, info);
}

/* The records of ctx (every context's for NULL) in creation order; *n set.
 * NULL when there are none or no memory for the list. */
static dv_track_rec **dv__track_sorted(dv_context *ctx, size_t *n) {
  *n = 0;
  size_t cap = (size_t)dv__track_live, k = 0;
  if (!cap) return NULL;
  dv_track_rec **v = malloc(cap * sizeof *v); /* not the counted allocator: reading changes nothing */
  if (!v) return NULL;
  for (size_t b = 0; b < DV_TRACK_BUCKETS; b++)
    for (dv_track_rec *r = dv__track_tab[b]; r; r = r->next)
      if (k < cap && (!ctx || r->ctx == ctx)) v[k++] = r;
  for (size_t i = 1; i < k; i++) /* insertion sort by seq: listings are short */
    for (size_t j = i; j > 0 && v[j - 1]->seq > v[j]->seq; j--) {
      dv_track_rec *t = v[j];
      v[j] = v[j - 1];
      v[j - 1] = t;
    }
  *n = k;
  return v;
}

static const char *const dv__mem_names[] = {"device", "host", "pinned", "mapped", "managed"};
static const char *dv__track_mem_name(int m) {
  return m >= 0 && m < (int)(sizeof dv__mem_names / sizeof dv__mem_names[0]) ? dv__mem_names[m] : "";
}

/* snprintf into buf at *len, measuring past cap. */
static void dv__track_put(char *buf, size_t cap, size_t *len, const char *fmt, ...) DV_PRINTF(4, 5);
static void dv__track_put(char *buf, size_t cap, size_t *len, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf && *len < cap ? buf + *len : NULL, buf && *len < cap ? cap - *len : 0, fmt, ap);
  va_end(ap);
  if (n > 0) *len += (size_t)n;
}

static void dv__track_put_str(char *buf, size_t cap, size_t *len, const char *s) {
  dv__track_put(buf, cap, len, "\"");
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p == '"' || *p == '\\') dv__track_put(buf, cap, len, "\\%c", *p);
    else if (*p < 0x20) dv__track_put(buf, cap, len, "\\u%04x", *p);
    else dv__track_put(buf, cap, len, "%c", *p);
  }
  dv__track_put(buf, cap, len, "\"");
}

size_t dv__track_json(dv_context *ctx, char *buf, size_t cap) {
  size_t len = 0, n = 0;
  if (buf && cap) buf[0] = 0;
  pthread_mutex_lock(&dv__track_lock);
  dv_track_rec **v = dv__track_sorted(ctx, &n);
  dv__track_put(buf, cap, &len, "{\"enabled\":%s,\"untracked\":%llu,\"live\":[",
                atomic_load(&dv__tracking) ? "true" : "false", (unsigned long long)dv__track_lost);
  for (size_t i = 0; i < n; i++) {
    dv_track_rec *r = v[i];
    dv_track_info info;
    dv__track_info(r, &info);
    char where[512];
    dv__track_where(r, where, sizeof where);
    dv__track_put(buf, cap, &len, "%s{\"kind\":\"%s\",\"seq\":%llu,\"origin\":", i ? "," : "",
                  dv__handle_kind_name(r->kind), (unsigned long long)r->seq);
    dv__track_put_str(buf, cap, &len, where);
    if (r->kind == DV_HANDLE_ARRAY && info.memory >= 0) {
      dv__track_put(buf, cap, &len, ",\"memory\":\"%s\",\"bytes\":%llu,\"what\":", dv__track_mem_name(info.memory),
                    (unsigned long long)info.bytes);
      dv__track_put_str(buf, cap, &len, info.what);
    }
    dv__track_put(buf, cap, &len, "}");
  }
  dv__track_put(buf, cap, &len, "]}");
  pthread_mutex_unlock(&dv__track_lock);
  free(v);
  return len;
}

dv_status dv_tracking_snapshot_json(dv_context *ctx, char *buf, size_t cap, size_t *needed) {
  DV_CHECK_NULL(needed);
  *needed = 0;
  if (ctx) DV_CHECK_HANDLE(ctx, DV_HANDLE_CONTEXT);
  if (!buf) {
    *needed = dv__track_json(ctx, NULL, 0);
    return DV_OK;
  }
  /* The whole document or nothing: rendered apart first (other threads may
   * make or release handles between a measure and the copy). */
  size_t len = dv__track_json(ctx, NULL, 0);
  for (int tries = 0; tries < 8; tries++) {
    char *w = dv__malloc(len + 64);
    if (!w) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate %zu bytes for the listing", len + 64);
    size_t got = dv__track_json(ctx, w, len + 64);
    if (got < len + 64) {
      *needed = got;
      if (got >= cap) {
        dv__free(w);
        return dv__error(DV_ERR_INVALID_ARGUMENT, "buffer of %zu bytes is too small; %zu needed", cap, got + 1);
      }
      memcpy(buf, w, got + 1);
      dv__free(w);
      return DV_OK;
    }
    dv__free(w);
    len = got;
  }
  return dv__error(DV_ERR_BUSY, "the handles changed too fast to list them");
}

/* ---- the leak report at unload (DV_LEAK_CHECK) ---- */

static void dv__track_at_exit(void);

/* At load: DV_TRACK or DV_LEAK_CHECK turn tracking on; DV_LEAK_CHECK also
 * registers the report at exit.  atexit, not a destructor: it runs before
 * the handlers registered earlier (LeakSanitizer's, which may end the
 * process) and while every other part of the library is still there. */
__attribute__((constructor)) static void dv__track_from_env(void) {
  const char *t = getenv("DV_TRACK"), *l = getenv("DV_LEAK_CHECK");
  bool leak = l && *l && strcmp(l, "0") != 0;
  if (leak || (t && *t && strcmp(t, "0") != 0)) atomic_store(&dv__tracking, 1);
  dv__track_leak_report = leak && atexit(dv__track_at_exit) == 0;
}

/* At exit: each handle still live is a "leak" report on the channel, in
 * creation order, then one summary.  The table itself stays reachable from
 * its static array (never a leak). */
static void dv__track_at_exit(void) {
  if (!dv__track_leak_report || !dv__report_open_p()) return;
  size_t n = 0;
  pthread_mutex_lock(&dv__track_lock);
  dv_track_rec **v = dv__track_sorted(NULL, &n);
  uint64_t bytes = 0;
  for (size_t i = 0; i < n; i++) {
    dv_track_rec *r = v[i];
    dv_track_info info;
    dv__track_info(r, &info);
    char where[512], msg[DV_REPORT_MAX - 128];
    dv__track_where(r, where, sizeof where);
    if (r->kind == DV_HANDLE_ARRAY && info.memory >= 0) {
      /* bytes once per allocation: the first live descriptor of it owns them */
      bool first = true;
      for (size_t j = 0; j < i && first; j++)
        if (v[j]->kind == DV_HANDLE_ARRAY) {
          dv_track_info o;
          dv__track_info(v[j], &o);
          if (o.alloc == info.alloc) first = false;
        }
      if (first && info.memory != 1 /* host */) bytes += info.bytes;
      snprintf(msg, sizeof msg, "%s array never released: %s (%llu bytes of %s memory); made at %s",
               dv__track_mem_name(info.memory), info.what, (unsigned long long)info.bytes,
               dv__track_mem_name(info.memory), where);
    } else {
      snprintf(msg, sizeof msg, "%s never released; made at %s", dv__handle_kind_name(r->kind), where);
    }
    dv__report("leak", DV_OK, msg);
  }
  char sum[256];
  snprintf(sum, sizeof sum, "%zu handle%s never released, holding %llu bytes of device, pinned, mapped or "
           "managed memory; %llu not tracked (no memory for their records)",
           n, n == 1 ? "" : "s", (unsigned long long)bytes, (unsigned long long)dv__track_lost);
  dv__report("leak-summary", DV_OK, sum);
  pthread_mutex_unlock(&dv__track_lock);
  free(v);
}
