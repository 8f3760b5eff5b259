/*
 * The parts of AMD's HIP runtime API (hip_runtime_api.h, ROCm 5 and 6) the
 * HIP backend calls, declared here so that devarray builds with no ROCm
 * software present: libamdhip64 is loaded with dlopen (hip.c) through the
 * entry-point list hip_symbols.def.  Only types and values whose layout is
 * the same in ROCm 5 and 6 are declared (no hipDeviceProp_t: its layout
 * changed in ROCm 6).
 */
#ifndef DV_HIP_RUNTIME_H
#define DV_HIP_RUNTIME_H
#include <stddef.h>

typedef int dv_hipError_t; /* hipError_t, an enum */
typedef int dv_hipDevice_t;

#define DV_HIP_SUCCESS 0
#define DV_HIP_ERROR_NO_DEVICE 100      /* hipErrorNoDevice */
#define DV_HIP_ERROR_INVALID_DEVICE 101 /* hipErrorInvalidDevice: hipInit without a GPU */

/* The entry points, filled by hip.c's loader. */
typedef struct dv_hip_api {
#define DV_HIP(ret, name, params) ret(*name) params;
#include "hip_symbols.def"
#undef DV_HIP
} dv_hip_api;

#endif
