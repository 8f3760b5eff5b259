// The public header compiles as C++17 (-Wall -Wextra -Werror) and its macros
// work there: DV_INDEX constructors and every DV_ARG_* constructor (inline
// functions in C++, holding the value in the argument).
#include "devarray.h"

int main() {
  dv_index idx[2] = {DV_ALL, DV_AT(1)};
  (void)idx;
  const dv_dtype *dt = dv_dtype_get(DV_FLOAT32);
  dv_array *a = nullptr;
  dv_smart *s = nullptr;
  int n = 5;
  dv_arg args[] = {DV_ARG_I8(-1),        DV_ARG_U8(2),          DV_ARG_I16(-3),
                   DV_ARG_U16(4),        DV_ARG_I32(-n),        DV_ARG_U32(6),
                   DV_ARG_I64(-7),       DV_ARG_U64(8),         DV_ARG_F32(9.5f),
                   DV_ARG_F64(10.5),     DV_ARG_BOOL(true),     DV_ARG_F16(1.0f),
                   DV_ARG_ARRAY(a),      DV_ARG_VIEW(a),        DV_ARG_ARRAY_IN(a),
                   DV_ARG_ARRAY_OUT(a),  DV_ARG_ARRAY_INOUT(a), DV_ARG_VIEW_IN(a),
                   DV_ARG_VIEW_OUT(a),   DV_ARG_VIEW_INOUT(a),  DV_ARG_SMART(s),
                   DV_ARG_SMART_IN(s),   DV_ARG_SMART_OUT(s),   DV_ARG_SMART_VIEW(s),
                   DV_ARG_SMART_VIEW_IN(s), DV_ARG_SMART_VIEW_OUT(s)};
  bool bad = false;
  bad |= args[0].scalar.i8 != -1 || args[0].type != DV_INT8 || args[0].value != nullptr;
  bad |= args[4].scalar.i32 != -5 || args[6].scalar.i64 != -7 || args[8].scalar.f32 != 9.5f;
  bad |= args[10].scalar.u8 != 1 || args[11].scalar.f16 != 0x3c00;
  bad |= args[14].kind != DV_ARG_ARRAY || args[14].dir != DV_DIR_IN;
  bad |= args[25].kind != DV_ARG_SMART_VIEW || args[25].dir != DV_DIR_OUT;
  return (!bad && dv_dtype_itemsize(dt) == 4 && dv_status_name(DV_OK)[0] == 'D') ? 0 : 1;
}
