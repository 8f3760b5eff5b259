/* Graphs on OpenCL: the shared command recorder (../graphrec.h).  The
 * stream methods a capture records hand their work to it while the stream
 * captures (one test each otherwise); a launch of the graph queues the
 * recorded calls again.  OpenCL's command buffers (cl_khr_command_buffer)
 * are not used: few drivers have them, and a replay of the recorded calls
 * already skips the planning and checking of the layers above. */
#include "opencl_internal.h"

#if DV_HAVE_OPENCL_HEADERS

dv_status dv__clg_copy_rect(void *state, dv_bstream *s, const dv_rect *r) {
  DV_REC_HOOK(s, dv__rec_copy_rect(rec_, r));
  return dv__clb_copy_rect(state, s, r);
}
dv_status dv__clg_copy_strided(void *state, dv_bstream *s, const dv_strided *c) {
  DV_REC_HOOK(s, dv__rec_copy_strided(rec_, c));
  return dv__clk_copy_strided(state, s, c);
}
dv_status dv__clg_memset(void *state, dv_bstream *s, dv_memref dst, int value, size_t bytes) {
  DV_REC_HOOK(s, dv__rec_memset(rec_, dst, value, bytes));
  return dv__clb_memset(state, s, dst, value, bytes);
}
dv_status dv__clg_stream_callback(void *state, dv_bstream *s, dv_bcallback_fn fn, void *user) {
  DV_REC_HOOK(s, dv__rec_refuse(rec_, "a stream callback"));
  return dv__clb_stream_callback(state, s, fn, user);
}
dv_status dv__clg_event_record(void *state, dv_bevent *e, dv_bstream *s) {
  DV_REC_HOOK(s, dv__rec_event_record(rec_, e));
  return dv__clb_event_record(state, e, s);
}
dv_status dv__clg_event_wait(void *state, dv_bstream *s, dv_bevent *e) {
  DV_REC_HOOK(s, dv__rec_event_wait(rec_, e));
  return dv__clb_event_wait(state, s, e);
}
dv_status dv__clg_constant_write(void *state, dv_bmodule *m, dv_bstream *s, size_t offset,
                                 dv_memref src, size_t bytes) {
  DV_REC_HOOK(s, dv__rec_constant_write(rec_, m, offset, src, bytes));
  return dv__clk_constant_write(state, m, s, offset, src, bytes);
}
dv_status dv__clg_launch(void *state, dv_bstream *s, dv_bkernel *k, const dv_blaunch *l) {
  DV_REC_HOOK(s, dv__rec_launch(rec_, k, l));
  return dv__clk_launch(state, s, k, l);
}

static const dv_rec_ops cl_rec_ops = {
    .copy_rect = dv__clb_copy_rect,
    .copy_strided = dv__clk_copy_strided,
    .memset = dv__clb_memset,
    .launch = dv__clk_launch,
    .constant_write = dv__clk_constant_write,
    .event_record = dv__clb_event_record,
    .event_wait = dv__clb_event_wait,
    .stream_callback = dv__clb_stream_callback,
};

dv_status dv__clg_graph_begin(void *state, dv_bstream *s) {
  return dv__rec_begin(&cl_rec_ops, state, s);
}
dv_status dv__clg_graph_end(void *state, dv_bstream *s, dv_bgraph **out) {
  (void)state;
  return dv__rec_end(s, out);
}
dv_status dv__clg_graph_host_fn(void *state, dv_bstream *s, dv_bcallback_fn fn, void *user) {
  (void)state;
  dv_rec *r = dv__rec_of(s);
  if (!r)
    return dv__error(DV_ERR_MISUSE, "a graph's host function on a stream that is not capturing");
  return dv__rec_host_fn(r, fn, user);
}
dv_status dv__clg_graph_instantiate(void *state, dv_bgraph *g, dv_bgexec **out) {
  (void)state;
  return dv__rec_instantiate(g, out);
}
dv_status dv__clg_graph_launch(void *state, dv_bgexec *e, dv_bstream *s) {
  (void)state;
  return dv__rec_replay(e, s);
}
dv_status dv__clg_graph_exec_destroy(void *state, dv_bgexec *e) {
  (void)state;
  return dv__rec_exec_destroy(e);
}
dv_status dv__clg_graph_destroy(void *state, dv_bgraph *g) {
  (void)state;
  return dv__rec_graph_destroy(g);
}

#else
typedef int dv__opencl_graph_none; /* built without OpenCL headers: nothing here */
#endif /* DV_HAVE_OPENCL_HEADERS */
