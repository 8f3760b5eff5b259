/* The README example: a 3x4 array to the device, its third column back. */
#include <devarray.h>
#include <stdio.h>

#define TRY(call)                                                                        \
  do {                                                                                   \
    dv_status s_ = (call);                                                               \
    if (s_) {                                                                            \
      fprintf(stderr, "%s: %s: %s\n", #call, dv_status_name(s_), dv_last_error());       \
      return 1;                                                                          \
    }                                                                                    \
  } while (0)

int main(void) {
  double a[3][4] = {{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9, 10, 11}}, out[3];
  int64_t shape[2] = {3, 4}, n = 3;
  dv_context *ctx;
  dv_array *h, *d, *col, *o;
  TRY(dv_context_create(NULL, &ctx)); /* cuda, an OpenCL GPU, or the host simulator */
  TRY(dv_host_array_wrap(ctx, a, 2, shape, dv_dtype_get(DV_FLOAT64), NULL, &h));
  TRY(dv_to_device(ctx, h, NULL, 1, NULL, &d)); /* synchronous: NULL stream */
  dv_index idx[2] = {DV_ALL, DV_AT(2)};         /* d[:, 2] */
  TRY(dv_array_slice(d, 2, idx, &col));
  TRY(dv_host_array_wrap(ctx, out, 1, &n, dv_dtype_get(DV_FLOAT64), NULL, &o));
  TRY(dv_copy_to_host(col, o, NULL, NULL));
  printf("%s: %g %g %g\n", dv_context_backend(ctx), out[0], out[1], out[2]);
  dv_array_release(o), dv_array_release(col), dv_array_release(d), dv_array_release(h);
  TRY(dv_context_destroy(ctx));
  return (out[0] == 2 && out[1] == 6 && out[2] == 10) ? 0 : 1;
}
