/*
 * What every file of the OpenCL backend uses: the table of entry points
 * (filled by opencl.c's loader), and OpenCL error codes as names and
 * devarray statuses.  A file of its own so that the backend's files call
 * down into it and never each other in a circle.
 */
#include "opencl_internal.h"

#if DV_HAVE_OPENCL_HEADERS

dv_cl_api dv__cl;

const char *dv__cl_error_name(int code) {
  switch (code) {
#define DV_CLE(n) \
  case n:         \
    return #n;
#include "cl_errors.def"
#undef DV_CLE
  }
  return "CL_UNKNOWN_ERROR";
}

dv_status dv__cl_status(int code) {
  switch (code) {
    case CL_SUCCESS: return DV_OK;
    case CL_MEM_OBJECT_ALLOCATION_FAILURE:
    case CL_OUT_OF_RESOURCES:
    case CL_INVALID_BUFFER_SIZE: return DV_ERR_OUT_OF_MEMORY;
    case CL_OUT_OF_HOST_MEMORY: return DV_ERR_HOST_OUT_OF_MEMORY;
    case CL_INVALID_COMMAND_QUEUE:
    case CL_DEVICE_NOT_AVAILABLE:
    case CL_INVALID_CONTEXT:
    case CL_INVALID_DEVICE: return DV_ERR_DEVICE_LOST;
    case CL_INVALID_VALUE:
    case CL_INVALID_MEM_OBJECT:
    case CL_MEM_COPY_OVERLAP:
    case CL_INVALID_HOST_PTR: return DV_ERR_INVALID_ARGUMENT;
    default: return DV_ERR_DRIVER;
  }
}


/* FNV-1a, 64 bits: the OpenCL image checksum and target hash. */
uint64_t dv__clk_fnv(uint64_t h, const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
  return h;
}

dv_status dv__clk_fail(cl_int code, const char *what) {
  return dv__error(dv__cl_status(code), "OpenCL %s failed: %s (%d)", what, dv__cl_error_name(code), code);
}

#else

dv_status dv__cl_status(int code) { return code ? DV_ERR_DRIVER : DV_OK; }
const char *dv__cl_error_name(int code) { return code ? "CL_UNKNOWN_ERROR" : "CL_SUCCESS"; }

#endif
