/*
 * devarray._speedups, the paths that read or write a NumPy array's memory (issues 23, 39):
 * to_device of a plain NumPy array, and DeviceNDArray.copy_to_host without a stream into a
 * plain NumPy array or a new one. Each wraps the host array from its __array_struct__ capsule
 * (no dict built), copies and releases the wrapper in one GIL-released stretch: three library
 * calls, no ctypes. Anything else, and every error, goes to the ctypes path, which raises what
 * it raises (copy_to_host calls self._copy_to_host_py with the same arguments: a failed copy
 * changed nothing, so the Python path finds the same failure and words it).
 */
#include "_speedups.h"

/* ---- to_device ------------------------------------------------------------------------- */

/* NumPy's PyArrayInterface (the __array_struct__ capsule), as _hostmem._PyArrayInterface */
typedef struct {
    int two;
    int nd;
    char typekind;
    int itemsize;
    int flags;
    Py_intptr_t *shape;
    Py_intptr_t *strides;
    void *data;
    PyObject *descr;
} sp_array_interface;

#define SP_C_CONTIGUOUS 0x1
#define SP_ALIGNED 0x100
#define SP_NOTSWAPPED 0x200

/* The C dtype of an ndarray's dtype (the identity cache, else _convert's conversion):
 * -1 with the exception set. */
static int sp_np_dtype(PyObject *npdt, const dv_dtype **out)
{
    const sp_dtype_entry *e = sp_cache_find(sp_np_cache, npdt);
    if (e != NULL) {
        *out = e->c;
        return 0;
    }
    PyObject *c = PyObject_CallOneArg(sp_dv_dtype, npdt);
    void *p;
    if (c == NULL)
        return -1;
    int r = sp_pointer(c, &p);
    Py_DECREF(c);
    if (r < 0)
        return -1;
    *out = p;
    sp_cache_add(sp_np_cache, npdt, npdt, *out);
    return 0;
}

/* The array's extents and byte strides as int64; returns 1, or 0 when an extent is 0. */
static int64_t sp_layout(const sp_array_interface *ai, int64_t *dims, int64_t *strides)
{
    int64_t nonempty = 1;
    for (int i = 0; i < ai->nd; i++) {
        dims[i] = (int64_t)ai->shape[i];
        strides[i] = (int64_t)ai->strides[i];
        nonempty &= dims[i] != 0;
    }
    return nonempty;
}

const char sp_to_device_doc[] =
"to_device(cls, obj, stream) -> a new cls holding a device copy of obj, or None\n\n"
"devarray.to_device(obj) for a NumPy array (type exactly numpy.ndarray) with copy and no "
"stream, when no pinned or mapped host array is registered: None when obj is not aligned, "
"not in native byte order, has more than DV_MAXDIMS dimensions or a void (record) dtype "
"(the caller then takes the ctypes path); errors as that path raises them.";

PyObject *sp_to_device_py(PyObject *mod, PyObject *const *args, Py_ssize_t nargs)
{
    (void)mod;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "to_device(cls, obj, stream)");
        return NULL;
    }
    if (sp_ready(args[0]) < 0)
        return NULL;
    PyObject *obj = args[1];
    PyObject *cap = PyObject_GetAttr(obj, sp_str_array_struct);
    if (cap == NULL)
        return NULL;
    PyObject *result = NULL, *npdt = NULL, *shape = NULL;
    const sp_array_interface *ai = PyCapsule_GetPointer(cap, NULL);
    if (ai == NULL)
        goto out;
    if (ai->two != 2 || (ai->flags & (SP_ALIGNED | SP_NOTSWAPPED)) != (SP_ALIGNED | SP_NOTSWAPPED)
        || ai->nd > DV_MAXDIMS || ai->nd < 0 || ai->typekind == 'V' ||
        (ai->nd > 0 && (ai->shape == NULL || ai->strides == NULL))) {
        result = Py_None;  /* the ctypes path's business */
        Py_INCREF(result);
        goto out;
    }
    npdt = PyObject_GetAttr(obj, sp_str_dtype);
    if (npdt == NULL)
        goto out;
    const dv_dtype *cdt;
    if (sp_np_dtype(npdt, &cdt) < 0)
        goto out;
    dv_context *ctx;
    if (sp_context(&ctx) < 0)
        goto out;
    int nd = ai->nd;
    int64_t dims[DV_MAXDIMS], strides[DV_MAXDIMS];
    int64_t size = sp_layout(ai, dims, strides); /* 0: an extent is 0 */
    int contiguous = (ai->flags & SP_C_CONTIGUOUS) != 0;
    dv_array *wrap = NULL, *h = NULL;
    dv_status st, st_wrap;
    Py_BEGIN_ALLOW_THREADS
    st_wrap = sp_wrap_c(ctx, ai->data, nd, dims, cdt, contiguous ? NULL : strides, &wrap);
    st = st_wrap;
    if (!st_wrap) {
        st = sp_to_device_c(ctx, wrap, NULL, 1, NULL, &h);
        sp_release_c(wrap);
    }
    Py_END_ALLOW_THREADS
    if (st_wrap) {
        sp_raise(st_wrap, sp_where_host_array, NULL);
        goto out;
    }
    if (st) {
        sp_raise(st, sp_where_to_device, NULL);
        goto out;
    }
    if (!(contiguous && nd && size)) {
        /* as _from_handle: the shape the library gave the new array */
        nd = sp_ndim_c(h);
        const int64_t *s = nd ? sp_shape_c(h) : NULL;
        for (int i = 0; i < nd; i++)
            dims[i] = s[i];
    }
    shape = PyTuple_New(nd);
    for (int i = 0; shape != NULL && i < nd; i++) {
        PyObject *v = PyLong_FromLongLong(dims[i]);
        if (v == NULL)
            Py_CLEAR(shape);
        else
            PyTuple_SET_ITEM(shape, i, v);
    }
    if (shape == NULL) {
        sp_release_on_error(h);
        goto out;
    }
    result = sp_new_array((PyTypeObject *)args[0], h, shape, npdt, args[2]);
out:
    Py_XDECREF(shape);
    Py_XDECREF(npdt);
    Py_DECREF(cap);
    return result;
}


/* ---- copy_to_host -------------------------------------------------------------------- */

#define SP_WRITEABLE 0x400

/* The Python path, with the caller's arguments. */
static PyObject *sp_copy_slow(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                              PyObject *kwnames)
{
    PyObject *m = PyObject_GetAttr(self, sp_str_copy_py);
    if (m == NULL)
        return NULL;
    PyObject *r = PyObject_Vectorcall(m, args, (size_t)nargs, kwnames);
    Py_DECREF(m);
    return r;
}

/* Whether stream means "no stream": absent, None, or the int 0 (or False). */
static int sp_no_stream(PyObject *stream)
{
    if (stream == NULL || stream == Py_None)
        return 1;
    if (!PyLong_Check(stream))
        return 0;
    int overflow = 0;
    long v = PyLong_AsLongAndOverflow(stream, &overflow);
    if (v == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    return !overflow && v == 0;
}

static PyObject *sp_array_copy_to_host(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                                       PyObject *kwnames)
{
    PyObject *ary = nargs >= 1 ? args[0] : Py_None, *stream = nargs >= 2 ? args[1] : NULL;
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    if (nargs > 2)
        return sp_copy_slow(self, args, nargs, kwnames);
    for (Py_ssize_t i = 0; i < nkw; i++) {
        PyObject *k = PyTuple_GET_ITEM(kwnames, i);
        if (nargs < 1 && PyUnicode_CompareWithASCIIString(k, "ary") == 0)
            ary = args[nargs + i];
        else if (nargs < 2 && PyUnicode_CompareWithASCIIString(k, "stream") == 0)
            stream = args[nargs + i];
        else
            return sp_copy_slow(self, args, nargs, kwnames); /* its TypeError */
    }
    sp_array *a = (sp_array *)self;
    void *dp;
    if (sp_copy_to_host_c == NULL || sp_ndarray == NULL || sp_error == NULL ||
        PyDict_GET_SIZE(sp_registry) || !sp_no_stream(stream) || a->h == NULL ||
        a->h == Py_None || sp_pointer(a->h, &dp) < 0)
        goto slow;
    dv_array *dev = dp;
    PyObject *out;
    if (ary == Py_None) {
        /* the dense layout: C order here; F order (and no order) through Python */
        if (!sp_is_c_contiguous_c(dev) || a->shape == NULL || a->dtype == NULL)
            goto slow;
        out = PyObject_CallFunctionObjArgs(sp_np_empty, a->shape, a->dtype, NULL);
        if (out == NULL)
            return NULL;
    } else if (Py_TYPE(ary) == (PyTypeObject *)sp_ndarray) {
        Py_INCREF(ary);
        out = ary;
    } else {
        goto slow;
    }
    PyObject *cap = PyObject_GetAttr(out, sp_str_array_struct), *npdt = NULL;
    const sp_array_interface *ai = cap ? PyCapsule_GetPointer(cap, NULL) : NULL;
    const int need = SP_ALIGNED | SP_NOTSWAPPED | SP_WRITEABLE;
    if (ai == NULL || ai->two != 2 || (ai->flags & need) != need || ai->nd > DV_MAXDIMS ||
        ai->nd < 0 || ai->typekind == 'V' || ai->data == NULL ||
        (ai->nd > 0 && (ai->shape == NULL || ai->strides == NULL)))
        goto slow_out;
    npdt = PyObject_GetAttr(out, sp_str_dtype);
    if (npdt == NULL)
        goto slow_out;
    const dv_dtype *cdt;
    if (sp_np_dtype(npdt, &cdt) < 0)
        goto slow_out;
    dv_context *ctx;
    if (sp_context(&ctx) < 0)
        goto slow_out;
    int nd = ai->nd;
    int64_t dims[DV_MAXDIMS], strides[DV_MAXDIMS];
    sp_layout(ai, dims, strides);
    int contiguous = (ai->flags & SP_C_CONTIGUOUS) != 0;
    dv_array *wrap = NULL;
    dv_status st;
    Py_BEGIN_ALLOW_THREADS
    st = sp_wrap_c(ctx, ai->data, nd, dims, cdt, contiguous ? NULL : strides, &wrap);
    if (!st) {
        st = sp_copy_to_host_c(dev, wrap, NULL, NULL);
        sp_release_c(wrap);
    }
    Py_END_ALLOW_THREADS
    if (st)
        goto slow_out; /* nothing was copied: the Python path words the failure */
    Py_DECREF(npdt);
    Py_DECREF(cap);
    return out;
slow_out:
    Py_XDECREF(npdt);
    Py_XDECREF(cap);
    Py_DECREF(out);
slow:
    if (PyErr_Occurred())
        PyErr_Clear(); /* the Python path raises what is wrong, in its words */
    return sp_copy_slow(self, args, nargs, kwnames);
}

PyMethodDef sp_array_methods[] = {
    {"copy_to_host", (PyCFunction)(void (*)(void))sp_array_copy_to_host,
     METH_FASTCALL | METH_KEYWORDS,
     PyDoc_STR("copy_to_host(ary=None, stream=0): copy to `ary` (a writeable NumPy array of the "
               "same dtype and shape, any layout) or to a new NumPy array with this array's "
               "dense layout; returns it. With a stream the copy is asynchronous: read the "
               "result after stream.synchronize(). ValueError for a read-only, misaligned or "
               "byte-swapped `ary`. (Compiled: devarray._speedups; the same as "
               "_copy_to_host_py.)")},
    {NULL, NULL, 0, NULL}
};
