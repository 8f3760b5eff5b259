/* Internal entry points of the CUDA backend (used by its tests). */
#ifndef DV_CUDA_BACKEND_H
#define DV_CUDA_BACKEND_H
#include "devarray.h"
/* The devarray status for a CUresult. */
dv_status dv__cu_status(int cuda_result);
#endif
