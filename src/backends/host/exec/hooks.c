/*
 * The tools' hook list (exec.h's hk_tool; tools/ plugs them in): the
 * tools of a state, and calling each kind of hook for a launch.  The rest
 * of exec calls the tools only through these.  A tool's state of a launch
 * is the launch's slot for it (hk_job.tool); every hook but make, start
 * and print is called only for a tool that has one, so a launch no tool
 * watches costs a test per tool and hook kind, and the block events
 * (block, barrier, wave, pending) a test per event (hk_job.tevents).
 */
#include <stdio.h>

#include "exec_internal.h"

dv_status hk_tool_add(hk_state *k, const hk_tool *t, int *at) {
  if (k->ntools == HK_TOOLS)
    return dv__error(DV_ERR_MISUSE, "host simulator: no room for tool %s (%d are in)", t->name,
                     HK_TOOLS);
  *at = k->ntools;
  k->tools[k->ntools++] = *t;
  return DV_OK;
}

/* The tools' hooks (exec.h): start for every tool, the others only for a
 * tool with a state of the launch (hk_data). */
static void *hk_data(const hk_job *l, int i) {
  return atomic_load_explicit(&l->tool[i], memory_order_relaxed);
}

dv_status hk_tools_make(hk_job *l, const dv_blaunch *bl) {
  const hk_state *k = l->k;
  for (int i = 0; i < k->ntools; i++) {
    if (!k->tools[i].make) continue;
    dv_status rc = k->tools[i].make(k->tools[i].self, &l->tool[i], l, bl);
    if (rc) return rc;
  }
  return DV_OK;
}

/* Whether a tool with a state of l has a block event's hook (l->tevents):
 * the scheduler tests that once per event. */
static bool hk_has_events(const hk_tool *t) {
  return t->block || t->barrier || t->wave || t->pending;
}

dv_status hk_tools_start(hk_job *l, int lanes, char *msg, size_t cap) {
  const hk_state *k = l->k;
  for (int i = 0; i < k->ntools; i++) {
    if (!k->tools[i].start) continue;
    dv_status rc = k->tools[i].start(k->tools[i].self, &l->tool[i], l, lanes, &l->tflags, msg, cap);
    if (rc) {
      hk_tools_stop(l);
      return rc;
    }
  }
  l->tevents = false;
  for (int i = 0; i < k->ntools; i++)
    if (hk_data(l, i) && hk_has_events(&k->tools[i])) l->tevents = true;
  return DV_OK;
}

bool hk_tools_enter(hk_exec *ex, hk_job *l) {
  const hk_state *k = l->k;
  for (int i = 0; i < k->ntools; i++) {
    void *d = hk_data(l, i);
    if (d && k->tools[i].enter && !k->tools[i].enter(k->tools[i].self, d, ex)) {
      for (int j = 0; j < i; j++) { /* those that entered leave */
        void *dj = hk_data(l, j);
        if (dj && k->tools[j].leave) k->tools[j].leave(k->tools[j].self, dj, ex);
      }
      return false;
    }
  }
  return true;
}

void hk_tools_block(hk_exec *ex, hk_job *l) {
  const hk_state *k = l->k;
  for (int i = 0; i < k->ntools; i++) {
    void *d = hk_data(l, i);
    if (d && k->tools[i].block) k->tools[i].block(k->tools[i].self, d, ex);
  }
}

void hk_tools_barrier(hk_exec *ex, hk_job *l, int fence) {
  const hk_state *k = l->k;
  for (int i = 0; i < k->ntools; i++) {
    void *d = hk_data(l, i);
    if (d && k->tools[i].barrier) k->tools[i].barrier(k->tools[i].self, d, ex, fence);
  }
}

void hk_tools_wave(hk_exec *ex, hk_job *l, int w) {
  const hk_state *k = l->k;
  for (int i = 0; i < k->ntools; i++) {
    void *d = hk_data(l, i);
    if (d && k->tools[i].wave) k->tools[i].wave(k->tools[i].self, d, ex, w);
  }
}

bool hk_tools_pending(hk_exec *ex, hk_job *l, char *msg, size_t cap) {
  const hk_state *k = l->k;
  for (int i = 0; i < k->ntools; i++) {
    void *d = hk_data(l, i);
    if (d && k->tools[i].pending && k->tools[i].pending(k->tools[i].self, d, ex, msg, cap))
      return true;
  }
  return false;
}

void hk_tools_leave(hk_exec *ex, hk_job *l) {
  const hk_state *k = l->k;
  for (int i = 0; i < k->ntools; i++) {
    void *d = hk_data(l, i);
    if (d && k->tools[i].leave) k->tools[i].leave(k->tools[i].self, d, ex);
  }
}

void hk_tools_stopped(hk_exec *ex, hk_job *l) {
  const hk_state *k = l->k;
  for (int i = 0; i < k->ntools; i++) {
    void *d = hk_data(l, i);
    if (d && k->tools[i].stopped) k->tools[i].stopped(k->tools[i].self, d, ex);
  }
}

void hk_tools_stop(hk_job *l) {
  const hk_state *k = l->k;
  for (int i = 0; i < k->ntools; i++) {
    void *d = hk_data(l, i);
    if (d && k->tools[i].stop) k->tools[i].stop(k->tools[i].self, d, l);
  }
}

/* The launch has run: each tool's finish hook in order (printf capture
 * writes the output; the watchdog's report); the first error is the
 * result, with its message in msg. */
dv_status hk_tools_finish(hk_job *l, char *msg, size_t cap) {
  const hk_state *k = l->k;
  dv_status rc = DV_OK;
  for (int i = 0; i < k->ntools; i++) {
    void *d = hk_data(l, i);
    if (!d || !k->tools[i].finish) continue;
    char spare[8];
    dv_status r =
        k->tools[i].finish(k->tools[i].self, d, l, rc ? spare : msg, rc ? sizeof spare : cap);
    if (!rc) rc = r;
  }
  return rc;
}

void hk_tools_free(hk_job *l) {
  const hk_state *k = l->k;
  for (int i = 0; i < k->ntools; i++) {
    void *d = hk_data(l, i);
    if (d && k->tools[i].free) k->tools[i].free(k->tools[i].self, d);
  }
}
