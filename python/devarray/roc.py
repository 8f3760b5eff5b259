"""Numba's ROC spelling (``numba.roc``, removed from Numba in 0.54), over devarray.

A program written for the ROC chapter runs with ``import devarray.roc as roc``: kernels with
``@roc.jit``, ``roc.get_local_id(0)``, ``roc.get_group_id``, ``roc.get_global_id``,
``roc.get_local_size``, ``roc.get_num_groups``, ``roc.get_global_size``, ``roc.shared.array``,
``roc.barrier(roc.CLK_LOCAL_MEM_FENCE | roc.CLK_GLOBAL_MEM_FENCE)``, ``roc.wavebarrier()``,
``roc.atomic.add``; memory with ``roc.to_device``, ``roc.device_array(_like)``,
``roc.register``/``deregister`` (``with roc.register(a, b):`` too), ``roc.stream()``. Kernels
are compiled as ``devarray.jit`` compiles them (docs/python.md) and run on every backend.
The kernel names need Numba, as devarray.jit does.
"""

import devarray as _dv
from devarray import (to_device, device_array, device_array_like, register, deregister,  # noqa
                      stream, synchronize, select_device, close, is_available)

CLK_LOCAL_MEM_FENCE = 0
CLK_GLOBAL_MEM_FENCE = 1

_NAMES = ("get_local_id", "get_global_id", "get_group_id", "get_local_size",
          "get_global_size", "get_num_groups", "get_work_dim", "barrier", "mem_fence",
          "wavebarrier")


def __getattr__(name):
    if name == "jit":
        return _dv.jit
    if name in ("shared", "atomic"):
        return getattr(_dv, name)
    if name in _NAMES:
        from devarray._jit import stubs  # optional: needs Numba (loaded on first use)
        return stubs.ROC[name]
    raise AttributeError("module 'devarray.roc' has no attribute %r" % name)
