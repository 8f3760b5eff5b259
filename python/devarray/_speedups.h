/*
 * What the two files of devarray._speedups share (_speedups.c: the module, _ArrayBase,
 * device_array, the set-up; _speedups_host.c: the paths that read a NumPy array's memory,
 * to_device and DeviceNDArray.copy_to_host): the library's functions (init_library), the
 * binding's Python pieces (init_binding, init_host), the dtype caches and the helpers.
 * Internal to the module: hidden, never exported from the extension.
 */
#ifndef DV_SPEEDUPS_H
#define DV_SPEEDUPS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>

#include "devarray.h"

#define SP_HIDDEN __attribute__((visibility("hidden")))
#define SP_DTYPE_CACHE 32

typedef dv_status (*sp_device_array_fn)(dv_context *, int, const int64_t *, const dv_dtype *,
                                        const int64_t *, char, dv_stream *, dv_array **);
typedef dv_status (*sp_wrap_fn)(dv_context *, void *, int, const int64_t *, const dv_dtype *,
                                const int64_t *, dv_array **);
typedef dv_status (*sp_to_device_fn)(dv_context *, const dv_array *, dv_stream *, int,
                                     dv_array *, dv_array **);
typedef dv_status (*sp_copy_to_host_fn)(const dv_array *, dv_array *, dv_stream *, dv_array **);
typedef void (*sp_release_fn)(dv_array *);
typedef int (*sp_ndim_fn)(const dv_array *);
typedef const int64_t *(*sp_shape_fn)(const dv_array *);
typedef int (*sp_is_c_fn)(const dv_array *);

/* the library (init_library) */
SP_HIDDEN extern sp_device_array_fn sp_device_array_c;
SP_HIDDEN extern sp_wrap_fn sp_wrap_c;
SP_HIDDEN extern sp_to_device_fn sp_to_device_c;
SP_HIDDEN extern sp_copy_to_host_fn sp_copy_to_host_c;
SP_HIDDEN extern sp_release_fn sp_release_c;
SP_HIDDEN extern sp_ndim_fn sp_ndim_c;
SP_HIDDEN extern sp_shape_fn sp_shape_c;
SP_HIDDEN extern sp_is_c_fn sp_is_c_contiguous_c;

/* the binding (init_binding, init_host): all strong references, kept for the process */
SP_HIDDEN extern PyObject *sp_error;        /* _lib.error(status, where) -> exception */
SP_HIDDEN extern PyObject *sp_shape_words;  /* _words._shape_words(exc, shape) -> exception */
SP_HIDDEN extern PyObject *sp_shape_tuple;  /* _convert._shape_tuple(shape) -> tuple of ints */
SP_HIDDEN extern PyObject *sp_dtype_pair;   /* _convert._dtype_pair(arg) -> (np.dtype, C dtype) */
SP_HIDDEN extern PyObject *sp_dv_dtype;     /* _convert._dv_dtype(np.dtype) -> C dtype */
SP_HIDDEN extern PyObject *sp_context_dict; /* the registry _current's module dict (its ctx) */
SP_HIDDEN extern PyObject *sp_current;      /* _context.current_context() */
SP_HIDDEN extern PyObject *sp_deferred;     /* _stream._deferred: (release, handle) pairs for _reap */
SP_HIDDEN extern PyObject *sp_release_obj;  /* the ctypes lib.dv_array_release _reap calls */
SP_HIDDEN extern PyObject *sp_ndarray;      /* numpy.ndarray (init_host) */
SP_HIDDEN extern PyObject *sp_np_empty;     /* numpy.empty (init_host) */
SP_HIDDEN extern PyObject *sp_registry;     /* _hostmem._registry: registered host arrays */
SP_HIDDEN extern PyObject *sp_str_ctx, *sp_str_handle, *sp_str_array_struct, *sp_str_dtype;
SP_HIDDEN extern PyObject *sp_str_copy_py;  /* "_copy_to_host_py" */
SP_HIDDEN extern PyObject *sp_where_device_array, *sp_where_host_array, *sp_where_to_device;
SP_HIDDEN extern PyObject *sp_zero; /* the int 0: a new array's stream */

/* key (held) -> NumPy dtype (held) and C dtype (owned by _convert's cache for the process) */
typedef struct {
    PyObject *key;
    PyObject *np;
    const dv_dtype *c;
} sp_dtype_entry;
SP_HIDDEN extern sp_dtype_entry sp_np_cache[SP_DTYPE_CACHE]; /* an ndarray's dtype */
SP_HIDDEN const sp_dtype_entry *sp_cache_find(const sp_dtype_entry *cache, PyObject *key);
SP_HIDDEN void sp_cache_add(sp_dtype_entry *cache, PyObject *key, PyObject *np, const dv_dtype *c);

/* _ArrayBase's instance */
typedef struct {
    PyObject_HEAD
    PyObject *h;        /* _h: the dv_array* as an int, or None */
    PyObject *shape;
    PyObject *strides;  /* _strides */
    PyObject *dtype;
    PyObject *base;     /* _base */
    PyObject *stream;
    PyObject *weakrefs;
} sp_array;

SP_HIDDEN int sp_pointer(PyObject *v, void **out);
SP_HIDDEN int sp_ready(PyObject *cls);
SP_HIDDEN int sp_context(dv_context **out);
SP_HIDDEN PyObject *sp_raise(dv_status st, PyObject *where, PyObject *shape);
SP_HIDDEN void sp_release_on_error(dv_array *h);
SP_HIDDEN PyObject *sp_new_array(PyTypeObject *cls, dv_array *h, PyObject *shape, PyObject *dtype,
                                 PyObject *stream);

/* _speedups_host.c */
SP_HIDDEN extern const char sp_to_device_doc[];
SP_HIDDEN PyObject *sp_to_device_py(PyObject *mod, PyObject *const *args, Py_ssize_t nargs);
SP_HIDDEN extern PyMethodDef sp_array_methods[]; /* _ArrayBase.copy_to_host */

#endif
