/* Internal entry points of the OpenCL backend (used by its tests). */
#ifndef DV_OPENCL_H
#define DV_OPENCL_H
#include "devarray.h"

#if DV_HAVE_OPENCL_HEADERS
#define CL_TARGET_OPENCL_VERSION 120
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#include <CL/cl.h>
#include <CL/cl_ext.h>
#endif

/* The devarray status for an OpenCL error code, and the code's name. */
dv_status dv__cl_status(int code);
const char *dv__cl_error_name(int code);
/* Build a program from source on the context's device; a failed build
 * returns DV_ERR_DRIVER with the start of the build log in the message.
 * *log (if log is not NULL): the whole build log, dv__malloc'd, on success
 * and on failure (NULL if it could not be read). */
dv_status dv__cl_build(void *state, const char *source, const char *options, void **program, char **log);
void dv__cl_program_release(void *program);
#endif
