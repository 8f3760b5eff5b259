/* Asynchronous copies on a stream with pinned memory, timed with events. */
#include <devarray.h>
#include <stdio.h>

#define TRY(call)                                                                  \
  do {                                                                             \
    dv_status s_ = (call);                                                         \
    if (s_) {                                                                      \
      fprintf(stderr, "%s: %s: %s\n", #call, dv_status_name(s_), dv_last_error()); \
      return 1;                                                                    \
    }                                                                              \
  } while (0)

int main(void) {
  enum { N = 1 << 20 };
  int64_t n = N;
  dv_context *ctx;
  dv_stream *s;
  dv_event *t0, *t1;
  dv_array *pin, *dev;
  TRY(dv_context_create(NULL, &ctx));
  TRY(dv_stream_create(ctx, 0, &s));
  TRY(dv_event_create(ctx, DV_EVENT_TIMING, &t0));
  TRY(dv_event_create(ctx, DV_EVENT_TIMING, &t1));
  TRY(dv_pinned_array(ctx, 1, &n, dv_dtype_get(DV_FLOAT32), NULL, 'C', &pin));
  float *p;
  TRY(dv_array_host_data(pin, (void **)&p));
  for (int i = 0; i < N; i++) p[i] = (float)i;
  TRY(dv_event_record(t0, s));
  TRY(dv_to_device(ctx, pin, s, 1, NULL, &dev)); /* queued, returns at once */
  TRY(dv_array_memset(pin, 0, s));               /* ordered after the upload */
  TRY(dv_copy_to_host(dev, pin, s, NULL));       /* and back */
  TRY(dv_event_record(t1, s));
  TRY(dv_stream_synchronize(s)); /* the host buffer may be read only now */
  float ms;
  TRY(dv_event_elapsed_ms(t0, t1, &ms));
  int ok = p[0] == 0.0f && p[N - 1] == (float)(N - 1);
  printf("%s: round trip of %d floats in %.3f ms: %s\n", dv_context_backend(ctx), N, ms, ok ? "ok" : "WRONG");
  dv_array_release(dev), dv_array_release(pin);
  dv_event_release(t0), dv_event_release(t1), dv_stream_release(s);
  TRY(dv_context_destroy(ctx));
  return ok ? 0 : 1;
}
