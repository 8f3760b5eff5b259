// The public header compiles as C++ and its macros work there.
#include "devarray.h"

int main() {
  dv_index idx[2] = {DV_ALL, DV_AT(1)};
  (void)idx;
  const dv_dtype *dt = dv_dtype_get(DV_FLOAT32);
  return (dv_dtype_itemsize(dt) == 4 && dv_status_name(DV_OK)[0] == 'D') ? 0 : 1;
}
