/* The public header compiles alone, as strict C11 (-Wall -Wextra -Wpedantic
 * -Werror), and every DV_ARG_* constructor compiles there without a warning
 * and holds what it was given. */
#include "devarray.h"

int main(void) {
  dv_array *a = NULL;
  dv_smart *s = NULL;
  dv_arg args[] = {DV_ARG_I8(-1),        DV_ARG_U8(2),          DV_ARG_I16(-3),
                   DV_ARG_U16(4),        DV_ARG_I32(-5),        DV_ARG_U32(6),
                   DV_ARG_I64(-7),       DV_ARG_U64(8),         DV_ARG_F32(9.5f),
                   DV_ARG_F64(10.5),     DV_ARG_BOOL(11),       DV_ARG_F16(1.0f),
                   DV_ARG_ARRAY(a),      DV_ARG_VIEW(a),        DV_ARG_ARRAY_IN(a),
                   DV_ARG_ARRAY_OUT(a),  DV_ARG_ARRAY_INOUT(a), DV_ARG_VIEW_IN(a),
                   DV_ARG_VIEW_OUT(a),   DV_ARG_VIEW_INOUT(a),  DV_ARG_SMART(s),
                   DV_ARG_SMART_IN(s),   DV_ARG_SMART_OUT(s),   DV_ARG_SMART_VIEW(s),
                   DV_ARG_SMART_VIEW_IN(s), DV_ARG_SMART_VIEW_OUT(s)};
  int bad = 0;
  bad |= args[0].scalar.i8 != -1 || args[0].type != DV_INT8 || args[0].value != NULL;
  bad |= args[3].scalar.u16 != 4 || args[6].scalar.i64 != -7 || args[8].scalar.f32 != 9.5f;
  bad |= args[9].scalar.f64 != 10.5 || args[10].scalar.u8 != 1 || args[10].type != DV_BOOL;
  bad |= args[11].scalar.f16 != 0x3c00 || args[11].type != DV_FLOAT16;
  bad |= args[14].kind != DV_ARG_ARRAY || args[14].dir != DV_DIR_IN || args[13].kind != DV_ARG_VIEW;
  bad |= args[21].kind != DV_ARG_SMART || args[21].dir != DV_DIR_IN || args[25].dir != DV_DIR_OUT;
  return bad || dv_status_str(DV_OK)[0] != 's';
}
