/*
 * What the OpenCL backend's kernel files share (opencl_kernel.c: kernels,
 * launches, constants, native handles; opencl_program.c: building, loading
 * and unloading modules, the cached image; opencl_copykernel.c: the
 * built-in strided copy): the module and kernel records and a few helpers.
 */
#ifndef DV_OPENCL_KERNEL_H
#define DV_OPENCL_KERNEL_H

#include "opencl_internal.h"

#if DV_HAVE_OPENCL_HEADERS

/* OpenCL 2.1 names (the headers hide them below CL_TARGET_OPENCL_VERSION 210). */
#define CLK_DEVICE_MAX_NUM_SUB_GROUPS 0x105C
#define CLK_KERNEL_MAX_SUB_GROUP_SIZE_FOR_NDRANGE 0x2033
#define CLK_DEVICE_SUB_GROUP_SIZES_INTEL 0x4108
typedef cl_int (*clk_subgroup_fn)(cl_kernel, cl_device_id, cl_uint, size_t, const void *, size_t, void *, size_t *);

/* Devarray's own options, ahead of the user's; part of the target id. */
#define CLK_OPTIONS "-cl-kernel-arg-info"
#define CLK_OPTIONS_DEBUG " -cl-opt-disable"
#define CLK_IMAGE_MAGIC "DVCLIMG1"
#define CLK_LOG_HEAD 700 /* bytes of build log quoted in the detail message */

/* ---- modules and kernels ---------------------------------------------------------- */

struct dv_bkernel {
  struct dv_bmodule *mod;
  cl_kernel k;
  pthread_mutex_t m; /* argument setting and enqueue */
  char *name;
  cl_uint nargs;     /* the user's parameters (the 2 hidden ones excluded) */
  const char *kinds; /* per user parameter: 'g' global, 'c' constant, 'l' local, 'p' value; NULL: unknown */
  size_t wg, static_local, priv;
  size_t local_limit; /* CL_DEVICE_LOCAL_MEM_SIZE */
  size_t dyn_set;     /* the dynamic local size last set (0: none yet); under m */
  int wave;
  struct dv_bkernel *next;
};

struct dv_bmodule {
  cl_program prog;
  cl_mem cbuf;   /* constant buffer, or NULL */
  size_t cbytes;
  char *name;
  char *meta;    /* "name kinds\n" per kernel (kinds include the hidden parameters) */
  pthread_mutex_t m; /* kernels */
  struct dv_bkernel *kernels;
};

/* A hash of the device, driver and options a compiled image is for (opencl_program.c). */
uint64_t dv__clk_target_hash(cl_state *st);
/* Free a module and its kernels; the caller guarantees no launch uses it (opencl_program.c). */
dv_status dv__clk_unload(dv_bmodule *m);

#endif /* DV_HAVE_OPENCL_HEADERS */
#endif
