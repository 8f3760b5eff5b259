/*
 * Graphs on the CUDA family (issue 40): devarray's captures are the
 * driver's stream capture, in relaxed mode (devarray refuses what cannot be
 * captured before the driver is asked; the global and thread-local modes
 * would also forbid other threads' calls), and its graphs the driver's:
 * cuStreamEndCapture, cuGraphInstantiateWithFlags, cuGraphLaunch (HIP's
 * translations the same).  A host function of the graph (graph_host_fn) is
 * a cuLaunchHostFunc node whose record (the function and its argument)
 * lives as long as the graph: the records are the stream's during the
 * capture, the graph's after it.
 */
#include "fam.h"

typedef struct cu_hostfn {
  struct cu_hostfn *next;
  dv_bcallback_fn fn;
  void *user;
} cu_hostfn;

struct dv_bgraph {
  dv_CUgraph g;
  cu_hostfn *hostfns;
};

struct dv_bgexec {
  dv_CUgraphExec e;
};

static void cu_hostfns_free(cu_hostfn *h) {
  while (h) {
    cu_hostfn *n = h->next;
    dv__free(h);
    h = n;
  }
}

static dv_status cu_no_graphs(cu_state *st) {
  return dv__error(DV_ERR_NOT_SUPPORTED,
                   "%s: this driver has no stream capture and graphs (%s or %s missing)",
                   st->drv->vendor, dv__cu_name(st->drv, DV_CU_E_cuStreamBeginCapture_v2),
                   dv__cu_name(st->drv, DV_CU_E_cuGraphInstantiateWithFlags));
}

dv_status dv__cub_graph_begin(void *state, dv_bstream *s) {
  cu_state *st = state;
  if (!cu.cuStreamBeginCapture_v2 || !cu.cuStreamEndCapture || !cu.cuGraphInstantiateWithFlags ||
      !cu.cuGraphLaunch || !cu.cuGraphExecDestroy || !cu.cuGraphDestroy)
    return cu_no_graphs(st);
  if (s->builtin)
    return dv__error(DV_ERR_INVALID_ARGUMENT,
                     "%s: the legacy and per-thread streams cannot capture a graph",
                     st->drv->vendor);
  CU_ENTER(st);
  CU_TRY(cu.cuStreamBeginCapture_v2(s->s, DV_CU_STREAM_CAPTURE_MODE_RELAXED),
         DV_CU_E_cuStreamBeginCapture_v2, "");
  s->hostfns = NULL;
  return DV_OK;
}

dv_status dv__cub_graph_end(void *state, dv_bstream *s, dv_bgraph **out) {
  *out = NULL;
  cu_state *st = state;
  cu_hostfn *h = s->hostfns;
  s->hostfns = NULL;
  CU_ENTER(st);
  dv_CUgraph g = NULL;
  dv_CUresult r = cu.cuStreamEndCapture(s->s, &g);
  if (r) {
    cu_hostfns_free(h);
    return cu_fail(r, DV_CU_E_cuStreamEndCapture, "");
  }
  dv_bgraph *bg = dv__malloc(sizeof *bg);
  if (!bg) {
    cu.cuGraphDestroy(g);
    cu_hostfns_free(h);
    return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate a graph record");
  }
  bg->g = g;
  bg->hostfns = h;
  *out = bg;
  return DV_OK;
}

static void cu_hostfn_trampoline(void *arg) {
  cu_hostfn *h = arg;
  h->fn(h->user, DV_OK); /* a graph's host node sees no stream status */
}

dv_status dv__cub_graph_host_fn(void *state, dv_bstream *s, dv_bcallback_fn fn, void *user) {
  cu_state *st = state;
  CU_ENTER(st);
  cu_hostfn *h = dv__malloc(sizeof *h);
  if (!h) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate a host function record");
  h->fn = fn;
  h->user = user;
  dv_CUresult r = cu.cuLaunchHostFunc(s->s, cu_hostfn_trampoline, h);
  if (r) {
    dv__free(h);
    return cu_fail(r, DV_CU_E_cuLaunchHostFunc, " (a graph's host function)");
  }
  h->next = s->hostfns;
  s->hostfns = h;
  return DV_OK;
}

dv_status dv__cub_graph_instantiate(void *state, dv_bgraph *g, dv_bgexec **out) {
  *out = NULL;
  cu_state *st = state;
  CU_ENTER(st);
  dv_bgexec *e = dv__malloc(sizeof *e);
  if (!e) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate an executable graph record");
  dv_CUresult r = cu.cuGraphInstantiateWithFlags(&e->e, g->g, 0);
  if (r) {
    dv__free(e);
    return cu_fail(r, DV_CU_E_cuGraphInstantiateWithFlags, "");
  }
  *out = e;
  return DV_OK;
}

dv_status dv__cub_graph_launch(void *state, dv_bgexec *e, dv_bstream *s) {
  cu_state *st = state;
  CU_ENTER(st);
  CU_TRY(cu.cuGraphLaunch(e->e, s->s), DV_CU_E_cuGraphLaunch, "");
  dv__cu_used(st, s); /* a later free waits for the launch (fences) */
  return DV_OK;
}

dv_status dv__cub_graph_exec_destroy(void *state, dv_bgexec *e) {
  cu_state *st = state;
  CU_ENTER(st);
  dv_CUresult r =
      cu.cuGraphExecDestroy(e->e); /* a launch in flight completes first (the driver's rule) */
  dv__free(e);
  return r ? cu_fail(r, DV_CU_E_cuGraphExecDestroy, "") : DV_OK;
}

dv_status dv__cub_graph_destroy(void *state, dv_bgraph *g) {
  cu_state *st = state;
  CU_ENTER(st);
  dv_CUresult r = cu.cuGraphDestroy(g->g);
  cu_hostfns_free(g->hostfns);
  dv__free(g);
  return r ? cu_fail(r, DV_CU_E_cuGraphDestroy, "") : DV_OK;
}
