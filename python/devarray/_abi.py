"""What the binding mirrors of include/devarray.h: the C structs, the prototypes of every C
function it calls, the enum constants and macro values it uses. Data only: it loads no
library and imports nothing of the package, so that the checks can read it alone.

Checked against the header, so that a change there that the binding does not follow fails:
python/tests/test_abi.py parses include/devarray.h and compares every prototype (return
type, each parameter), every struct (fields' names, types, order) and every DV_* constant
below with it; python/tools/gen_abi_check.py writes a C file of static assertions (sizeof
and offsetof of each struct as ctypes lays it out, each constant's value) that the CMake
build compiles against the header (python/CMakeLists.txt, target devarray_abi_check).

Rules of the comparison (tests/test_abi.py, ``compatible``): a C pointer may be declared
c_void_p (ctypes passes any address through it; the per-call paths use that to skip
conversions), ``char *`` c_char_p, an enum c_int; a struct by its mirror of the same name; a
function pointer by a CFUNCTYPE of the same signature. STAND_INS names the C types the
binding passes as a plain integer of the same size and alignment.
"""

import ctypes
from ctypes import (CFUNCTYPE, POINTER, c_char, c_char_p, c_double, c_float, c_int, c_int64,
                    c_size_t, c_uint, c_uint32, c_uint64, c_void_p)

# ---- enum constants and macro values --------------------------------------------------------
# (each name as the header spells it; the tests compare the value)

DV_OK = 0
DV_ERR_INVALID_ARGUMENT = 100
DV_ERR_DTYPE_MISMATCH = 102
DV_ERR_INDEX = 107
DV_ERR_TOO_MANY_INDICES = 108
DV_ERR_OUT_OF_MEMORY = 200
DV_ERR_NOT_SUPPORTED = 300
DV_ERR_BACKEND_UNAVAILABLE = 301
DV_ERR_DRIVER = 400
DV_ERR_COMPILE = 403
DV_ERR_MISUSE = 600
DV_ERR_BUSY = 601

DV_MEM_DEVICE = 0
DV_MEM_HOST = 1
DV_MEM_PINNED = 2
DV_MEM_MAPPED = 3
DV_MEM_MANAGED = 4

DV_ARG_SCALAR = 1
DV_ARG_ARRAY = 2
DV_ARG_VIEW = 3
DV_ARG_SMART = 4
DV_ARG_SMART_VIEW = 5

DV_DIR_DEFAULT = 0
DV_DIR_IN = 1
DV_DIR_OUT = 2
DV_DIR_INOUT = 3

DV_PARAM_ARRAY = 1
DV_PARAM_VIEW = 2
DV_PARAM_SCALAR = 3

DV_WHERE_HOST = 0
DV_WHERE_DEVICE = 1

DV_IDX_SLICE = 0
DV_IDX_INT = 1

# dv_type_id, in order: the NumPy dtype names of ids 0, 1, ... (DV_BOOL ... DV_COMPLEX128)
DV_BOOL = 0
DV_INT8 = 1
DV_INT16 = 2
DV_INT32 = 3
DV_INT64 = 4
DV_UINT8 = 5
DV_UINT16 = 6
DV_UINT32 = 7
DV_UINT64 = 8
DV_FLOAT16 = 9
DV_FLOAT32 = 10
DV_FLOAT64 = 11
DV_COMPLEX64 = 12
DV_COMPLEX128 = 13
DV_RECORD = 14
DV_TYPE_COUNT = 15
TYPE_NAMES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
              "float16", "float32", "float64", "complex64", "complex128")

DV_STREAM_NON_BLOCKING = 0x1
DV_EVENT_TIMING = 0x1
DV_MAPPED_PORTABLE = 0x1
DV_MAPPED_WRITECOMBINED = 0x2
DV_SMART_COPY = 0x1
DV_DLPACK_IMPORT_READ_ONLY = 1
DV_IPC_HANDLE_SIZE = 128
DV_STATS_VERSION = 3
DV_MEMORY_MANAGER_VERSION = 1

# ---- structs ---------------------------------------------------------------------------------

#: C types the binding passes as an integer of the same size and alignment (the C check
#: asserts both): a union whose members the binding writes as their bits.
STAND_INS = {"dv_scalar": c_uint64}


class dv_counter(ctypes.Structure):
    _fields_ = [("current", c_uint64), ("peak", c_uint64), ("total", c_uint64)]


class dv_stats(ctypes.Structure):
    _fields_ = [("size", c_uint32), ("version", c_uint32), ("device", dv_counter),
                ("pinned", dv_counter), ("mapped", dv_counter), ("registered", dv_counter),
                ("managed", dv_counter), ("arrays", dv_counter),
                ("pending_deallocs", c_uint64), ("pending_bytes", c_uint64),
                ("pending_peak", c_uint64), ("flushes", c_uint64), ("oom_retries", c_uint64),
                ("failed_frees", c_uint64), ("copies", c_uint64), ("staged_copies", c_uint64),
                ("bytes_h2d", c_uint64), ("bytes_d2h", c_uint64), ("bytes_d2d", c_uint64),
                ("staging", dv_counter), ("staging_hits", c_uint64),
                ("staging_misses", c_uint64),
                ("transfers_h2d", c_uint64), ("transfers_d2h", c_uint64),
                ("transfers_d2d", c_uint64)]


class dv_pinned_stats(ctypes.Structure):
    _fields_ = [("enabled", c_int), ("held", dv_counter), ("in_use", dv_counter),
                ("cached", c_uint64), ("pending", c_uint64), ("free_blocks", c_uint64),
                ("hits", c_uint64), ("misses", c_uint64), ("uncached", c_uint64),
                ("waits", c_uint64), ("releases", c_uint64), ("reserve", c_uint64),
                ("limit", c_uint64)]


class dv_device_info(ctypes.Structure):
    _fields_ = [("backend", c_char * 16), ("name", c_char * 256),
                ("vendor", c_char * 128), ("driver_version", c_char * 64),
                ("total_memory", c_uint64), ("max_allocation", c_uint64),
                ("base_alignment", c_uint64), ("can_map_host_memory", c_int),
                ("managed_memory", c_int), ("compute_major", c_int),
                ("compute_minor", c_int), ("pci_bus_id", c_char * 32),
                ("peer_devices", c_int)]


class dv_field_desc(ctypes.Structure):
    _fields_ = [("name", c_char_p), ("dtype", c_void_p), ("offset", c_size_t), ("ndim", c_int),
                ("shape", POINTER(c_int64))]


class dv_index(ctypes.Structure):
    _fields_ = [("kind", c_int), ("start", c_int64), ("stop", c_int64), ("step", c_int64),
                ("index", c_int64)]


class dv_dim3(ctypes.Structure):
    _fields_ = [("x", c_uint32), ("y", c_uint32), ("z", c_uint32)]


class dv_launch_config(ctypes.Structure):
    _fields_ = [("grid", dv_dim3), ("block", dv_dim3), ("dynamic_shared", c_size_t),
                ("stream", c_void_p)]


class dv_arg(ctypes.Structure):
    _fields_ = [("kind", c_int), ("type", c_int), ("value", c_void_p), ("array", c_void_p),
                ("dir", c_int), ("smart", c_void_p), ("scalar", c_uint64)]


class dv_kernel_param(ctypes.Structure):
    _fields_ = [("kind", c_int), ("type", c_int), ("is_const", c_int), ("name", c_char_p),
                ("decl", c_char_p)]


class dv_block(ctypes.Structure):
    _fields_ = [("buf", c_void_p), ("offset", c_size_t), ("handle", c_void_p)]


# the memory manager plug-in table's entries the binding fills (the others stay NULL)
MM_INIT = CFUNCTYPE(c_int, c_void_p, c_void_p, POINTER(c_void_p))
MM_FINI = CFUNCTYPE(None, c_void_p)
MM_ALLOC = CFUNCTYPE(c_int, c_void_p, c_size_t, c_void_p, POINTER(dv_block))
MM_FREE = CFUNCTYPE(c_int, c_void_p, dv_block, c_size_t, c_void_p)
MM_MEM_INFO = CFUNCTYPE(c_int, c_void_p, POINTER(c_size_t), POINTER(c_size_t))


class dv_memory_manager(ctypes.Structure):
    _fields_ = [("version", c_uint32), ("name", c_char_p), ("user", c_void_p),
                ("init", MM_INIT), ("fini", MM_FINI), ("alloc", MM_ALLOC), ("free", MM_FREE),
                ("mem_info", MM_MEM_INFO), ("stats", c_void_p), ("trim", c_void_p),
                ("stream_destroyed", c_void_p), ("ipc_handle", c_void_p)]


#: The enums the binding passes as c_int (the C check asserts that each is an int's size).
class dv_memory_event(ctypes.Structure):
    _fields_ = [("event", c_int), ("memory", c_int), ("bytes", c_size_t), ("address", c_void_p),
                ("offset", c_size_t), ("stream", c_void_p), ("manager", c_char_p)]


class dv_scope_counter(ctypes.Structure):
    _fields_ = [("current", c_int64), ("peak", c_int64), ("total", c_int64)]


class dv_memory_counts(ctypes.Structure):
    _fields_ = [("bytes", dv_scope_counter), ("allocations", dv_scope_counter)]


class dv_memory_scope_stats(ctypes.Structure):
    _fields_ = [("device", dv_memory_counts), ("pinned", dv_memory_counts),
                ("mapped", dv_memory_counts), ("managed", dv_memory_counts)]


DV_MEMORY_ALLOC = 0
DV_MEMORY_FREE = 1

ENUM_TYPES = ("dv_status", "dv_type_id", "dv_memory_kind", "dv_index_kind", "dv_param_kind",
              "dv_arg_kind", "dv_arg_dir", "dv_where", "dv_memory_event_kind")

STRUCTS = (dv_counter, dv_stats, dv_pinned_stats, dv_device_info, dv_field_desc, dv_index, dv_dim3,
           dv_launch_config, dv_arg, dv_kernel_param, dv_block, dv_memory_manager,
           dv_memory_event, dv_scope_counter, dv_memory_counts, dv_memory_scope_stats)

# dv_memory_hook_fn and dv_oom_fn (memory hooks, the out-of-memory handler)
MEMORY_HOOK_FN = CFUNCTYPE(None, c_void_p, POINTER(dv_memory_event), c_void_p)
OOM_FN = CFUNCTYPE(c_int, c_void_p, c_size_t, c_int, c_void_p)

# dv_callback_fn: a stream callback
CALLBACK_FN = CFUNCTYPE(None, c_void_p, c_int, c_void_p)

# ---- prototypes ------------------------------------------------------------------------------

_P = c_void_p          # a handle, or any pointer passed as an address
_S = c_int             # dv_status
_I64P = POINTER(c_int64)

#: name: (return type, [parameter types]); _lib gives the library's functions these.
FUNCTIONS = {
    "dv_version": (c_char_p, []),
    "dv_status_name": (c_char_p, [c_int]),
    "dv_status_str": (c_char_p, [c_int]),
    "dv_last_error": (c_char_p, []),
    # options and configuration
    "dv_option_get": (_S, [c_char_p, c_char_p, c_size_t, _P]),
    "dv_config_create": (_S, [POINTER(_P)]),
    "dv_config_set": (_S, [_P, c_char_p, c_char_p]),
    "dv_config_destroy": (None, [_P]),
    # backends and contexts
    "dv_backend_count": (c_size_t, []),
    "dv_backend_name": (c_char_p, [c_size_t]),
    "dv_backend_probe": (_S, [c_char_p, c_char_p, c_size_t]),
    "dv_context_create": (_S, [_P, POINTER(_P)]),
    "dv_context_destroy": (_S, [_P]),
    "dv_context_backend": (c_char_p, [_P]),
    "dv_context_device_info": (_S, [_P, POINTER(dv_device_info)]),
    "dv_context_memory_info": (_S, [_P, POINTER(c_size_t), POINTER(c_size_t)]),
    "dv_context_synchronize": (_S, [_P]),
    "dv_context_default_stream": (_P, [_P]),
    "dv_context_legacy_stream": (_P, [_P]),
    "dv_context_per_thread_stream": (_P, [_P]),
    "dv_context_option": (_S, [_P, c_char_p, c_char_p, c_size_t, _P]),
    "dv_context_stats": (_S, [_P, POINTER(dv_stats)]),
    "dv_context_stats_json": (_S, [_P, c_char_p, c_size_t, POINTER(c_size_t)]),
    # deferred deallocation
    "dv_defer_cleanup_begin": (_S, [_P]),
    "dv_defer_cleanup_end": (_S, [_P]),
    "dv_context_flush_deallocs": (_S, [_P]),
    "dv_context_pending_deallocs": (_S, [_P, POINTER(c_size_t), POINTER(c_size_t)]),
    "dv_context_set_dealloc_limits": (_S, [_P, c_size_t, c_double]),
    "dv_context_dealloc_limits": (_S, [_P, POINTER(c_size_t), POINTER(c_double),
                                       POINTER(c_size_t)]),
    # memory managers
    "dv_context_memory_manager": (c_char_p, [_P]),
    "dv_config_set_memory_manager": (_S, [_P, POINTER(dv_memory_manager)]),
    "dv_backend_alloc": (_S, [_P, c_size_t, POINTER(dv_block)]),
    "dv_backend_free": (_S, [_P, dv_block]),
    "dv_backend_memory_info": (_S, [_P, POINTER(c_size_t), POINTER(c_size_t)]),
    # the pinned pool
    "dv_pinned_pool_stats": (_S, [_P, POINTER(dv_pinned_stats)]),
    "dv_pinned_pool_trim": (_S, [_P]),
    "dv_pinned_pool_set_limit": (_S, [_P, c_size_t]),
    # dtypes
    "dv_dtype_from_name": (_P, [c_char_p]),
    "dv_dtype_id": (c_int, [_P]),
    "dv_dtype_itemsize": (c_size_t, [_P]),
    "dv_dtype_name": (c_char_p, [_P]),
    "dv_dtype_record_create": (_S, [POINTER(dv_field_desc), c_size_t, c_size_t, POINTER(_P)]),
    "dv_dtype_retain": (_P, [_P]),
    "dv_dtype_release": (None, [_P]),
    "dv_dtype_field_count": (c_size_t, [_P]),
    "dv_dtype_field": (_S, [_P, c_size_t, POINTER(dv_field_desc)]),
    # arrays
    "dv_device_array": (_S, [_P, c_int, _I64P, _P, _I64P, c_char, _P, POINTER(_P)]),
    "dv_device_array_like": (_S, [_P, _P, POINTER(_P)]),
    "dv_device_record": (_S, [_P, _P, _P, POINTER(_P)]),
    "dv_host_array_wrap": (_S, [_P, c_void_p, c_int, _I64P, _P, _I64P, POINTER(_P)]),
    "dv_pinned_array": (_S, [_P, c_int, _I64P, _P, _I64P, c_char, POINTER(_P)]),
    "dv_mapped_array": (_S, [_P, c_int, _I64P, _P, _I64P, c_char, c_uint, POINTER(_P)]),
    "dv_managed_array": (_S, [_P, c_int, _I64P, _P, _I64P, c_char, c_int, POINTER(_P)]),
    "dv_array_retain": (_P, [_P]),
    "dv_array_release": (None, [_P]),
    "dv_array_ndim": (c_int, [_P]),
    "dv_array_shape": (_I64P, [_P]),
    "dv_array_strides": (_I64P, [_P]),
    "dv_array_dtype": (_P, [_P]),
    "dv_array_memory": (c_int, [_P]),
    "dv_array_context": (_P, [_P]),
    "dv_array_nbytes": (c_int64, [_P]),
    "dv_array_is_c_contiguous": (c_int, [_P]),
    "dv_array_is_f_contiguous": (c_int, [_P]),
    "dv_array_host_data": (_S, [_P, POINTER(c_void_p)]),
    # transfers, views, elements
    "dv_to_device": (_S, [_P, _P, _P, c_int, _P, POINTER(_P)]),
    "dv_copy_to_host": (_S, [_P, _P, _P, POINTER(_P)]),
    "dv_copy_to_device": (_S, [_P, _P, _P]),
    "dv_array_copy": (_S, [_P, _P, _P]),
    "dv_array_memset": (_S, [_P, c_int, _P]),
    "dv_array_copy_new": (_S, [_P, c_char, _P, POINTER(_P)]),
    "dv_array_slice": (_S, [_P, c_int, POINTER(dv_index), POINTER(_P)]),
    "dv_array_get_item": (_S, [_P, _I64P, c_void_p, c_size_t, _P]),
    "dv_array_set_item": (_S, [_P, _I64P, c_void_p, c_size_t, _P]),
    "dv_array_reshape": (_S, [_P, c_int, _I64P, c_char, c_uint, _P, POINTER(_P)]),
    "dv_array_ravel": (_S, [_P, c_char, c_uint, _P, POINTER(_P)]),
    "dv_array_split": (_S, [_P, c_int64, POINTER(_P), c_size_t, POINTER(c_size_t)]),
    "dv_array_field": (_S, [_P, c_char_p, POINTER(_P)]),
    "dv_record_get": (_S, [_P, c_char_p, c_void_p, c_size_t, _P]),
    "dv_record_set": (_S, [_P, c_char_p, c_void_p, c_size_t, _P]),
    # host memory scopes
    "dv_pinned_scope_begin": (_S, [_P, c_size_t, POINTER(_P), POINTER(_P)]),
    "dv_mapped_scope_begin": (_S, [_P, c_size_t, POINTER(_P), POINTER(_P), POINTER(_P)]),
    "dv_scope_end": (_S, [_P]),
    "dv_array_register": (_S, [_P]),
    "dv_array_deregister": (_S, [_P]),
    "dv_array_is_pinned": (c_int, [_P]),
    # streams and events
    "dv_stream_create": (_S, [_P, c_uint, POINTER(_P)]),
    "dv_stream_release": (None, [_P]),
    "dv_stream_synchronize": (_S, [_P]),
    "dv_stream_query": (_S, [_P]),
    "dv_stream_add_callback": (_S, [_P, CALLBACK_FN, _P]),
    "dv_stream_auto_sync_begin": (_S, [_P]),
    "dv_stream_auto_sync_end": (_S, [_P]),
    "dv_event_create": (_S, [_P, c_uint, POINTER(_P)]),
    "dv_event_release": (None, [_P]),
    "dv_event_record": (_S, [_P, _P]),
    "dv_stream_wait_event": (_S, [_P, _P]),
    "dv_event_query": (_S, [_P]),
    "dv_event_synchronize": (_S, [_P]),
    # graphs
    "dv_graph_capture_begin": (_S, [_P]),
    "dv_graph_capture_end": (_S, [_P, POINTER(_P)]),
    "dv_graph_work_count": (_S, [_P, POINTER(c_size_t)]),
    "dv_graph_release": (_S, [_P]),
    "dv_graph_instantiate": (_S, [_P, POINTER(_P)]),
    "dv_graph_launch": (_S, [_P, _P]),
    "dv_graph_exec_destroy": (_S, [_P]),
    "dv_event_elapsed_ms": (_S, [_P, _P, POINTER(c_float)]),
    # kernels
    "dv_program_create": (_S, [_P, c_char_p, c_char_p, POINTER(_P)]),
    "dv_program_define": (_S, [_P, c_char_p, c_char_p]),
    "dv_program_options": (_S, [_P, c_char_p, c_char_p]),
    "dv_program_constant": (_S, [_P, c_char_p, _P]),
    "dv_program_build": (_S, [_P, c_uint, POINTER(_P)]),
    "dv_program_log": (c_char_p, [_P]),
    "dv_program_destroy": (None, [_P]),
    "dv_module_release": (None, [_P]),
    "dv_module_kernel": (_S, [_P, c_char_p, POINTER(_P)]),
    "dv_module_set_constant": (_S, [_P, c_char_p, _P, _P]),
    "dv_kernel_name": (c_char_p, [_P]),
    "dv_kernel_num_params": (c_int, [_P]),
    "dv_kernel_param_info": (_S, [_P, c_int, POINTER(dv_kernel_param)]),
    "dv_kernel_launch": (_S, [_P, POINTER(dv_launch_config), c_size_t, POINTER(dv_arg)]),
    # smart arrays
    "dv_smart_create": (_S, [_P, c_int, _I64P, _P, _I64P, c_char, c_int, _P, POINTER(_P)]),
    "dv_smart_from_array": (_S, [_P, c_uint, _P, POINTER(_P)]),
    "dv_smart_get": (_S, [_P, c_int, _P, POINTER(_P)]),
    "dv_smart_mark_changed": (_S, [_P, c_int]),
    "dv_smart_is_current": (c_int, [_P, c_int]),
    "dv_smart_dtype": (_P, [_P]),
    "dv_smart_ndim": (c_int, [_P]),
    "dv_smart_shape": (_I64P, [_P]),
    "dv_smart_release": (None, [_P]),
    # native handles and foreign memory
    "dv_stream_native": (_S, [_P, POINTER(_P)]),
    "dv_array_native": (_S, [_P, POINTER(c_void_p), POINTER(c_size_t)]),
    "dv_array_block": (_S, [_P, POINTER(dv_block), POINTER(c_size_t), POINTER(c_int)]),
    "dv_context_check_native": (_S, [_P, _P, c_size_t, c_size_t]),
    "dv_device_array_wrap": (_S, [_P, c_void_p, c_size_t, c_size_t, c_int, _I64P, _P, _I64P,
                                  c_void_p, c_void_p, POINTER(_P)]),
    # DLPack (0.x and 1.x; a library older than 1.x support lacks the versioned two: _lib.has
    # says; a build without dlpack.h has all four, returning DV_ERR_NOT_SUPPORTED)
    "dv_array_to_dlpack": (_S, [_P, _P, _P, POINTER(_P)]),
    "dv_array_from_dlpack": (_S, [_P, _P, POINTER(_P)]),
    "dv_array_to_dlpack_versioned": (_S, [_P, _P, _P, c_uint64, POINTER(_P)]),
    "dv_array_from_dlpack_versioned": (_S, [_P, _P, c_uint, POINTER(_P)]),
    # memory hooks, scoped statistics, the out-of-memory handler, tracking
    "dv_memory_hook_add": (_S, [_P, MEMORY_HOOK_FN, _P, POINTER(c_int)]),
    "dv_memory_hook_remove": (_S, [_P, c_int]),
    "dv_memory_scope_push": (_S, [_P]),
    "dv_memory_scope_pop": (_S, [_P, POINTER(dv_memory_scope_stats)]),
    "dv_memory_set_oom_handler": (_S, [_P, OOM_FN, _P, c_int]),
    "dv_memory_snapshot_json": (_S, [_P, c_char_p, c_size_t, POINTER(c_size_t)]),
    "dv_memory_set_limit": (_S, [_P, c_size_t]),
    "dv_memory_trim": (_S, [_P]),
    "dv_memory_set_limit_fraction": (_S, [_P, c_double]),
    "dv_memory_limit": (_S, [_P, POINTER(c_size_t), POINTER(c_size_t), POINTER(c_size_t)]),
    "dv_tracking_enable": (_S, [c_int]),
    "dv_tracking_enabled": (c_int, []),
    "dv_tracking_set_origin": (None, [c_char_p]),
    "dv_tracking_forget": (None, [_P]),
    "dv_tracking_snapshot_json": (_S, [_P, c_char_p, c_size_t, POINTER(c_size_t)]),
    # IPC (the handle passed as the address of its bytes)
    "dv_ipc_export": (_S, [_P, _P]),
    "dv_ipc_open": (_S, [_P, _P, c_int, _P, _P, _P, _P]),
    "dv_ipc_close": (_S, [_P]),
}

#: Second function objects for the per-call paths: the same C function with every pointer
#: passed as an address (no ctypes conversion of a shape array, a byref for the result).
#: name: (return type, [parameter types]); _lib.lean(name) gives one.
LEAN = {
    "dv_device_array": (_S, [_P, c_int, _P, _P, _P, c_char, _P, _P]),
    "dv_to_device": (_S, [_P, _P, _P, c_int, _P, _P]),
    "dv_host_array_wrap": (_S, [_P, _P, c_int, _P, _P, _P, _P]),
}
