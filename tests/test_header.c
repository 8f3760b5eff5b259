/* The public header compiles alone, as strict C11. */
#include "devarray.h"
int main(void) { return dv_status_str(DV_OK)[0] == 's' ? 0 : 1; }
