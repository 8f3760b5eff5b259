/*
 * devarray._speedups: the binding's per-call paths compiled (issue 23).
 *
 * A CPython extension with three parts, used by python/devarray when it loads (else the
 * binding runs on ctypes alone, with the same behaviour):
 *
 * - _ArrayBase, the C base of DeviceNDArray: the slots _h (the dv_array*, an int, or None),
 *   shape, _strides, dtype, _base and stream, weak references, cyclic GC (traverse and clear:
 *   _base and stream can form cycles), and a deallocator that releases the handle as the
 *   pure-Python base's __del__ does: at once with the GIL released (the library may block,
 *   and an EMM plug-in in Python is called back from it), or, on a thread that is running a
 *   stream callback (set_in_callback), queued on _stream._deferred for _reap.
 * - device_array(cls, shape, dtype): the default-argument path of devarray.device_array.
 * - to_device(cls, obj, stream): devarray.to_device of an aligned, native-order NumPy array
 *   with copy and no stream (the caller checks those it can check cheaply), and
 *   _ArrayBase.copy_to_host without a stream (_speedups_host.c, issue 39).
 *
 * It does not link against libdevarray: init_library() is given the addresses of the
 * library functions that ctypes loaded (the very instance DEVARRAY_LIBRARY chose);
 * init_binding() the Python objects that build errors and dtypes, so that every error is the
 * one the ctypes path raises (the same class, the same words). devarray.h is included for
 * its prototypes and typedefs only.
 *
 * Thread safety: the state below is written by the two init calls (GIL held) and read
 * after; the dtype caches are read and written with the GIL held. Library calls run with the
 * GIL released, as ctypes makes them.
 */
#include "_speedups.h"

#include <structmember.h>
#include <string.h>

#define SP_API_VERSION 3

/* the library (init_library) */
sp_device_array_fn sp_device_array_c;
sp_wrap_fn sp_wrap_c;
sp_to_device_fn sp_to_device_c;
sp_copy_to_host_fn sp_copy_to_host_c;
sp_release_fn sp_release_c;
sp_ndim_fn sp_ndim_c;
sp_shape_fn sp_shape_c;
sp_is_c_fn sp_is_c_contiguous_c;

/* the binding (init_binding, init_host): _speedups.h says what each is */
PyObject *sp_error, *sp_shape_words, *sp_shape_tuple, *sp_dtype_pair, *sp_dv_dtype;
PyObject *sp_context_dict, *sp_current, *sp_deferred, *sp_release_obj;
PyObject *sp_ndarray, *sp_np_empty, *sp_registry;
PyObject *sp_str_ctx, *sp_str_handle, *sp_str_array_struct, *sp_str_dtype, *sp_str_copy_py;
PyObject *sp_where_device_array, *sp_where_host_array, *sp_where_to_device;
PyObject *sp_zero;

/* a stream callback runs on this thread (set by _stream._run): never release here */
static _Thread_local int sp_in_callback;

/* ---- identity caches of dtypes ------------------------------------------------------ */

static sp_dtype_entry sp_arg_cache[SP_DTYPE_CACHE];  /* device_array's dtype argument */
sp_dtype_entry sp_np_cache[SP_DTYPE_CACHE];          /* an ndarray's dtype */

const sp_dtype_entry *sp_cache_find(const sp_dtype_entry *cache, PyObject *key)
{
    for (int i = 0; i < SP_DTYPE_CACHE && cache[i].key; i++)
        if (cache[i].key == key)
            return &cache[i];
    return NULL;
}

/* Remember key -> (np, c) when there is room and key is hashable (immutable by convention:
 * an unhashable dtype argument, a list of fields, could change under the same identity). */
void sp_cache_add(sp_dtype_entry *cache, PyObject *key, PyObject *np, const dv_dtype *c)
{
    if (PyObject_Hash(key) == -1) {
        PyErr_Clear();
        return;
    }
    for (int i = 0; i < SP_DTYPE_CACHE; i++) {
        if (!cache[i].key) {
            Py_INCREF(key);
            Py_INCREF(np);
            cache[i].key = key;
            cache[i].np = np;
            cache[i].c = c;
            return;
        }
    }
}

int sp_pointer(PyObject *v, void **out)
{
    if (v == Py_None) {
        *out = NULL;
        return 0;
    }
    *out = PyLong_AsVoidPtr(v);
    return (*out == NULL && PyErr_Occurred()) ? -1 : 0;
}

/* ---- _ArrayBase ------------------------------------------------------------------------ */


static PyTypeObject sp_array_type;

/* Release the handle as the pure-Python base's __del__ does. Called with the GIL held, maybe
 * with an exception pending (a dealloc during unwinding): it is kept. */
static void sp_release_handle(sp_array *self)
{
    PyObject *h = self->h;
    PyObject *et, *ev, *tb;
    self->h = NULL;
    if (h == NULL || h == Py_None) {
        Py_XDECREF(h);
        return;
    }
    PyErr_Fetch(&et, &ev, &tb);
    void *p = PyLong_AsVoidPtr(h);
    if (p == NULL && PyErr_Occurred()) {
        PyErr_WriteUnraisable(h);
    } else if (p != NULL && sp_release_c != NULL) {
        if (sp_in_callback && sp_deferred != NULL) {
            /* the library forbids frees inside a stream callback: _reap frees it later */
            PyObject *pair = PyTuple_Pack(2, sp_release_obj, h);
            if (pair == NULL || PyList_Append(sp_deferred, pair) < 0)
                PyErr_WriteUnraisable(h);  /* leaked, never freed on this thread */
            Py_XDECREF(pair);
        } else {
            dv_array *a = p;
            Py_BEGIN_ALLOW_THREADS
            sp_release_c(a);
            Py_END_ALLOW_THREADS
        }
    }
    PyErr_Restore(et, ev, tb);
    Py_DECREF(h);
}

static int sp_array_traverse(sp_array *self, visitproc visit, void *arg)
{
    Py_VISIT(self->shape);
    Py_VISIT(self->strides);
    Py_VISIT(self->dtype);
    Py_VISIT(self->base);
    Py_VISIT(self->stream);
    return 0;
}

static int sp_array_clear(sp_array *self)
{
    Py_CLEAR(self->base);
    Py_CLEAR(self->stream);
    Py_CLEAR(self->shape);
    Py_CLEAR(self->strides);
    Py_CLEAR(self->dtype);
    return 0;
}

static void sp_array_dealloc(sp_array *self)
{
    PyObject_GC_UnTrack(self);
    /* The handle first, as the Python base's __del__ runs before its weak
     * references are cleared: a callback sees the same queue either way. */
    sp_release_handle(self);
    if (self->weakrefs != NULL)
        PyObject_ClearWeakRefs((PyObject *)self);
    sp_array_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMemberDef sp_array_members[] = {
    {"_h", T_OBJECT_EX, offsetof(sp_array, h), 0, "the C dv_array* (an int), or None"},
    {"shape", T_OBJECT_EX, offsetof(sp_array, shape), 0, "the shape (a tuple)"},
    {"_strides", T_OBJECT_EX, offsetof(sp_array, strides), 0,
     "byte strides once read from the library, else None"},
    {"dtype", T_OBJECT_EX, offsetof(sp_array, dtype), 0, "the NumPy dtype"},
    {"_base", T_OBJECT_EX, offsetof(sp_array, base), 0, "what the array keeps alive"},
    {"stream", T_OBJECT_EX, offsetof(sp_array, stream), 0, "the array's stream (0: none)"},
    {NULL, 0, 0, 0, NULL}
};

static PyTypeObject sp_array_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "devarray._speedups._ArrayBase",
    .tp_doc = PyDoc_STR("The compiled base of DeviceNDArray: its slots, weak references, "
                        "cyclic GC and the release of its handle."),
    .tp_basicsize = sizeof(sp_array),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_dealloc = (destructor)sp_array_dealloc,
    .tp_traverse = (traverseproc)sp_array_traverse,
    .tp_clear = (inquiry)sp_array_clear,
    .tp_weaklistoffset = offsetof(sp_array, weakrefs),
    .tp_members = sp_array_members,
};

/* Release h on an error path: with the GIL released, and the pending exception kept aside
 * meanwhile (the release may flush the queue into a Python memory-manager plug-in, which
 * must not run with an exception set). */
void sp_release_on_error(dv_array *h)
{
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    Py_BEGIN_ALLOW_THREADS
    sp_release_c(h);
    Py_END_ALLOW_THREADS
    PyErr_Restore(et, ev, tb);
}

/* A new instance of cls (a subtype of _ArrayBase) over handle h (a new reference, taken: it
 * is released if the instance cannot be made). */
PyObject *sp_new_array(PyTypeObject *cls, dv_array *h, PyObject *shape, PyObject *dtype,
                              PyObject *stream)
{
    PyObject *hobj = PyLong_FromVoidPtr(h);
    sp_array *self = hobj ? (sp_array *)cls->tp_alloc(cls, 0) : NULL;
    if (self == NULL) {
        Py_XDECREF(hobj);
        sp_release_on_error(h);
        return NULL;
    }
    self->h = hobj;
    Py_INCREF(shape);
    self->shape = shape;
    Py_INCREF(Py_None);
    self->strides = Py_None;  /* read from the library on first use */
    Py_INCREF(dtype);
    self->dtype = dtype;
    Py_INCREF(Py_None);
    self->base = Py_None;
    Py_INCREF(stream);
    self->stream = stream;
    return (PyObject *)self;
}

/* ---- shared pieces of the fast paths ---------------------------------------------------- */

int sp_ready(PyObject *cls)
{
    if (sp_release_c == NULL || sp_error == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "devarray._speedups: not initialised");
        return -1;
    }
    if (!PyType_Check(cls) || !PyType_IsSubtype((PyTypeObject *)cls, &sp_array_type)) {
        PyErr_SetString(PyExc_TypeError, "devarray._speedups: cls must derive from _ArrayBase");
        return -1;
    }
    return 0;
}

/* The current context's handle, as the binding finds it: _current.ctx, else
 * current_context() (which opens one); its .handle (None after close: NULL). */
int sp_context(dv_context **out)
{
    PyObject *ctx = PyDict_GetItemWithError(sp_context_dict, sp_str_ctx);  /* borrowed */
    if (ctx == NULL && PyErr_Occurred())
        return -1;
    if (ctx == NULL || ctx == Py_None) {
        ctx = PyObject_CallNoArgs(sp_current);
        if (ctx == NULL)
            return -1;
    } else {
        Py_INCREF(ctx);  /* held while its attribute is read: that may run Python code */
    }
    PyObject *h = PyObject_GetAttr(ctx, sp_str_handle);
    Py_DECREF(ctx);
    if (h == NULL)
        return -1;
    void *p;
    int r = sp_pointer(h, &p);
    Py_DECREF(h);
    *out = p;
    return r;
}

/* Raise where(st[, shape]) built by the binding's own Python error builders. */
PyObject *sp_raise(dv_status st, PyObject *where, PyObject *shape)
{
    PyObject *exc = PyObject_CallFunction(sp_error, "iO", (int)st, where);
    if (exc != NULL && shape != NULL) {
        PyObject *e2 = PyObject_CallFunctionObjArgs(sp_shape_words, exc, shape, NULL);
        Py_DECREF(exc);
        exc = e2;
    }
    if (exc != NULL) {
        PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
        Py_DECREF(exc);
    }
    return NULL;
}

/* shape as a tuple of ints (an int, a tuple of ints; anything else through _shape_tuple,
 * the ctypes path's own conversion, so that what it accepts and refuses is the same) */
static PyObject *sp_shape(PyObject *shape)
{
    if (PyLong_CheckExact(shape))
        return PyTuple_Pack(1, shape);
    if (PyTuple_CheckExact(shape)) {
        Py_ssize_t n = PyTuple_GET_SIZE(shape);
        Py_ssize_t i = 0;
        while (i < n && PyLong_CheckExact(PyTuple_GET_ITEM(shape, i)))
            i++;
        if (i == n) {
            Py_INCREF(shape);
            return shape;
        }
    }
    return PyObject_CallOneArg(sp_shape_tuple, shape);
}

/* The shape's extents as int64 (false, with the ctypes path's OverflowError, if one does not
 * fit); more than DV_MAXDIMS: *too_many set, the library refuses the count as it does. */
static int sp_pack(PyObject *shape, int64_t *dims, int *too_many)
{
    Py_ssize_t n = PyTuple_GET_SIZE(shape);
    *too_many = n > DV_MAXDIMS;
    for (Py_ssize_t i = 0; i < n && !*too_many; i++) {
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(PyTuple_GET_ITEM(shape, i), &overflow);
        if (v == -1 && PyErr_Occurred())
            return -1;
        if (overflow) {
            PyErr_Format(PyExc_OverflowError, "devarray: shape or strides %R do not fit int64",
                         shape);
            return -1;
        }
        dims[i] = (int64_t)v;
    }
    return 0;
}

/* ---- device_array ---------------------------------------------------------------------- */

PyDoc_STRVAR(sp_device_array_doc,
"device_array(cls, shape, dtype) -> a new cls over a new uninitialised device array\n\n"
"devarray.device_array with strides None, order 'C' and no stream; errors as its ctypes "
"path raises them.");

static PyObject *sp_device_array_py(PyObject *mod, PyObject *const *args, Py_ssize_t nargs)
{
    (void)mod;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "device_array(cls, shape, dtype)");
        return NULL;
    }
    if (sp_ready(args[0]) < 0)
        return NULL;
    PyObject *shape = sp_shape(args[1]);
    if (shape == NULL)
        return NULL;
    PyObject *result = NULL, *pair = NULL, *npdt;
    const dv_dtype *cdt;
    const sp_dtype_entry *e = sp_cache_find(sp_arg_cache, args[2]);
    if (e != NULL) {
        npdt = e->np;
        cdt = e->c;
    } else {
        pair = PyObject_CallOneArg(sp_dtype_pair, args[2]);
        if (pair == NULL)
            goto out;
        void *p;
        if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2 ||
            sp_pointer(PyTuple_GET_ITEM(pair, 1), &p) < 0) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_TypeError, "devarray._speedups: bad dtype pair");
            goto out;
        }
        npdt = PyTuple_GET_ITEM(pair, 0);
        cdt = p;
        /* a record dtype's field names can be changed in place (dtype.names = ...): those
         * are looked up by value each time, as the ctypes path does */
        PyObject *names = PyObject_GetAttrString(npdt, "names");
        if (names == NULL)
            PyErr_Clear();
        else if (names == Py_None)
            sp_cache_add(sp_arg_cache, args[2], npdt, cdt);
        Py_XDECREF(names);
    }
    dv_context *ctx;
    if (sp_context(&ctx) < 0)
        goto out;
    int64_t dims[DV_MAXDIMS];
    int too_many;
    if (sp_pack(shape, dims, &too_many) < 0)
        goto out;
    int nd = (int)PyTuple_GET_SIZE(shape);
    dv_array *h = NULL;
    dv_status st;
    Py_BEGIN_ALLOW_THREADS
    st = sp_device_array_c(ctx, nd, too_many ? NULL : dims, cdt, NULL, 'C', NULL, &h);
    Py_END_ALLOW_THREADS
    if (st) {
        sp_raise(st, sp_where_device_array, shape);
        goto out;
    }
    result = sp_new_array((PyTypeObject *)args[0], h, shape, npdt, sp_zero);
out:
    Py_XDECREF(pair);
    Py_DECREF(shape);
    return result;
}

/* ---- set-up ------------------------------------------------------------------------------ */

PyDoc_STRVAR(sp_init_library_doc,
"init_library(device_array, host_array_wrap, to_device, array_release, array_ndim, "
"array_shape, copy_to_host, array_is_c_contiguous)\n\n"
"The addresses (ints) of those dv_* functions in the libdevarray ctypes loaded. ValueError "
"for a zero address; RuntimeError when called again with other addresses.");

static PyObject *sp_init_library(PyObject *mod, PyObject *args)
{
    (void)mod;
    enum { N = 8 };
    PyObject *o[N];
    void *p[N];
    if (!PyArg_ParseTuple(args, "OOOOOOOO:init_library", &o[0], &o[1], &o[2], &o[3], &o[4],
                          &o[5], &o[6], &o[7]))
        return NULL;
    for (int i = 0; i < N; i++) {
        p[i] = PyLong_AsVoidPtr(o[i]);
        if (p[i] == NULL) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_ValueError, "init_library: argument %d is a null address",
                             i + 1);
            return NULL;
        }
    }
    if (sp_release_c != NULL) {
        /* one library for the process: handles from one must never reach another */
        if (memcmp(&p[0], &sp_device_array_c, sizeof p[0]) ||
            memcmp(&p[3], &sp_release_c, sizeof p[3])) {
            PyErr_SetString(PyExc_RuntimeError, "devarray._speedups: already initialised "
                            "with another libdevarray");
            return NULL;
        }
        Py_RETURN_NONE;
    }
    /* object pointer -> function pointer: the addresses come from dlsym, through ctypes */
    memcpy(&sp_device_array_c, &p[0], sizeof p[0]);
    memcpy(&sp_wrap_c, &p[1], sizeof p[1]);
    memcpy(&sp_to_device_c, &p[2], sizeof p[2]);
    memcpy(&sp_ndim_c, &p[4], sizeof p[4]);
    memcpy(&sp_shape_c, &p[5], sizeof p[5]);
    memcpy(&sp_copy_to_host_c, &p[6], sizeof p[6]);
    memcpy(&sp_is_c_contiguous_c, &p[7], sizeof p[7]);
    memcpy(&sp_release_c, &p[3], sizeof p[3]);
    Py_RETURN_NONE;
}

PyDoc_STRVAR(sp_init_host_doc,
"init_host(ndarray, empty, registry)\n\n"
"numpy.ndarray, numpy.empty and _hostmem._registry (the dict of registered host arrays: "
"while it holds any, copy_to_host takes the Python path, which finds them). A later call "
"replaces them.");

static PyObject *sp_init_host(PyObject *mod, PyObject *args)
{
    (void)mod;
    PyObject *nd, *empty, *reg;
    if (!PyArg_ParseTuple(args, "O!OO!:init_host", &PyType_Type, &nd, &empty, &PyDict_Type, &reg))
        return NULL;
    if (!PyCallable_Check(empty)) {
        PyErr_SetString(PyExc_TypeError, "init_host: empty is not callable");
        return NULL;
    }
    Py_INCREF(nd);
    Py_XSETREF(sp_ndarray, nd);
    Py_INCREF(empty);
    Py_XSETREF(sp_np_empty, empty);
    Py_INCREF(reg);
    Py_XSETREF(sp_registry, reg);
    Py_RETURN_NONE;
}

PyDoc_STRVAR(sp_init_binding_doc,
"init_binding(error, shape_words, shape_tuple, dtype_pair, dv_dtype, context_module, "
"current_context, deferred, release)\n\n"
"The binding's Python pieces the fast paths use: its error builders, its shape and dtype "
"conversions, the registry module _current (its ctx), current_context, _stream._deferred and the "
"ctypes dv_array_release _reap calls. A later call (the package imported again) replaces them.");

static PyObject *sp_init_binding(PyObject *mod, PyObject *args)
{
    (void)mod;
    PyObject *o[9];
    if (!PyArg_ParseTuple(args, "OOOOOOOO!O:init_binding", &o[0], &o[1], &o[2], &o[3], &o[4],
                          &o[5], &o[6], &PyList_Type, &o[7], &o[8]))
        return NULL;
    for (int i = 0; i < 7; i++) {
        if (i != 5 && !PyCallable_Check(o[i])) {
            PyErr_Format(PyExc_TypeError, "init_binding: argument %d is not callable", i + 1);
            return NULL;
        }
    }
    if (!PyModule_Check(o[5])) {
        PyErr_SetString(PyExc_TypeError, "init_binding: argument 6 must be a module");
        return NULL;
    }
    /* Every call replaces them: a package imported again (its modules
     * dropped from sys.modules) gets its own error classes, context and
     * deferred list on the compiled paths too. */
    PyObject *cdict = PyModule_GetDict(o[5]);  /* borrowed */
    PyObject **slots[9] = {&sp_error, &sp_shape_words, &sp_shape_tuple, &sp_dtype_pair,
                           &sp_dv_dtype, &sp_context_dict, &sp_current, &sp_deferred,
                           &sp_release_obj};
    for (int i = 0; i < 9; i++) {
        PyObject *v = i == 5 ? cdict : o[i];
        Py_INCREF(v);
        Py_XSETREF(*slots[i], v);
    }
    Py_RETURN_NONE;
}

PyDoc_STRVAR(sp_set_in_callback_doc,
"set_in_callback(flag) -> the previous flag\n\n"
"Whether this thread runs a stream callback (_stream._run sets and clears it): an array "
"deallocated there is queued on _stream._deferred instead of released.");

static PyObject *sp_set_in_callback(PyObject *mod, PyObject *flag)
{
    (void)mod;
    int v = PyObject_IsTrue(flag);
    if (v < 0)
        return NULL;
    int was = sp_in_callback;
    sp_in_callback = v;
    return PyBool_FromLong(was);
}

/* The destructor of a DLPack capsule the binding made (_dlpack.to_capsule): a capsule no
 * consumer took (still named "dltensor") calls its tensor's deleter.  In C because it can
 * run with an exception pending -- NumPy 1.24's from_dlpack destroys a capsule of a device
 * it refuses with its own error set -- where a ctypes destructor loses that exception
 * (the consumer then raises SystemError) and prints its own.  PyCapsule_IsValid never
 * touches the error indicator, nor PyCapsule_GetPointer for a capsule IsValid accepted. */
typedef struct sp_dl_managed {
    unsigned char dl_tensor[48]; /* DLTensor: data, device, ndim, dtype, shape, strides, offset */
    void *manager_ctx;
    void (*deleter)(struct sp_dl_managed *self);
} sp_dl_managed;

static void sp_capsule_destructor(PyObject *capsule)
{
    if (!PyCapsule_IsValid(capsule, "dltensor"))
        return;
    sp_dl_managed *t = PyCapsule_GetPointer(capsule, "dltensor");
    if (t != NULL && t->deleter != NULL)
        t->deleter(t);
}

/* The same for a DLPack 1.x capsule ("dltensor_versioned", DLManagedTensorVersioned). */
typedef struct sp_dl_versioned {
    uint32_t major, minor;
    void *manager_ctx;
    void (*deleter)(struct sp_dl_versioned *self);
    uint64_t flags;
    unsigned char dl_tensor[48];
} sp_dl_versioned;

static void sp_capsule_destructor_versioned(PyObject *capsule)
{
    if (!PyCapsule_IsValid(capsule, "dltensor_versioned"))
        return;
    sp_dl_versioned *t = PyCapsule_GetPointer(capsule, "dltensor_versioned");
    if (t != NULL && t->deleter != NULL)
        t->deleter(t);
}

static PyMethodDef sp_methods[] = {
    {"device_array", (PyCFunction)(void (*)(void))sp_device_array_py, METH_FASTCALL,
     sp_device_array_doc},
    {"to_device", (PyCFunction)(void (*)(void))sp_to_device_py, METH_FASTCALL,
     sp_to_device_doc},
    {"init_library", sp_init_library, METH_VARARGS, sp_init_library_doc},
    {"init_binding", sp_init_binding, METH_VARARGS, sp_init_binding_doc},
    {"init_host", sp_init_host, METH_VARARGS, sp_init_host_doc},
    {"set_in_callback", sp_set_in_callback, METH_O, sp_set_in_callback_doc},
    {NULL, NULL, 0, NULL}
};

static struct PyModuleDef sp_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "devarray._speedups",
    .m_doc = PyDoc_STR("The binding's per-call paths compiled: DeviceNDArray's base, "
                       "device_array and to_device (see python/devarray/_speedups.c)."),
    .m_size = -1,
    .m_methods = sp_methods,
};

PyMODINIT_FUNC PyInit__speedups(void);

PyMODINIT_FUNC PyInit__speedups(void)
{
    sp_array_type.tp_methods = sp_array_methods; /* copy_to_host (_speedups_host.c) */
    if (PyType_Ready(&sp_array_type) < 0)
        return NULL;
    if (sp_zero == NULL && (sp_zero = PyLong_FromLong(0)) == NULL)
        return NULL;
    static const char *const names[] = {"ctx",         "handle",     "__array_struct__",
                                        "dtype",       "device_array", "host array",
                                        "to_device",   "_copy_to_host_py"};
    PyObject **strs[] = {&sp_str_ctx,           &sp_str_handle,       &sp_str_array_struct,
                         &sp_str_dtype,         &sp_where_device_array, &sp_where_host_array,
                         &sp_where_to_device,   &sp_str_copy_py};
    for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++) {
        if (*strs[i] == NULL && (*strs[i] = PyUnicode_InternFromString(names[i])) == NULL)
            return NULL;
    }
    PyObject *m = PyModule_Create(&sp_module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&sp_array_type);
    if (PyModule_AddObject(m, "_ArrayBase", (PyObject *)&sp_array_type) < 0) {
        Py_DECREF(&sp_array_type);
        Py_DECREF(m);
        return NULL;
    }
    if (PyModule_AddIntConstant(m, "API_VERSION", SP_API_VERSION) < 0 ||
        PyModule_AddIntConstant(m, "MAXDIMS", DV_MAXDIMS) < 0 ||
        PyModule_AddObject(m, "CAPSULE_DESTRUCTOR",
                           PyLong_FromVoidPtr((void *)(uintptr_t)sp_capsule_destructor)) < 0 ||
        PyModule_AddObject(m, "CAPSULE_DESTRUCTOR_VERSIONED",
                           PyLong_FromVoidPtr((void *)(uintptr_t)sp_capsule_destructor_versioned)) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
