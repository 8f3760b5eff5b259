"""The device memory limit in CuPy's words: ``get_default_memory_pool()`` gives the current
context's MemoryPool, whose ``set_limit(size=, fraction=)``, ``get_limit()``, ``used_bytes()``,
``total_bytes()``, ``free_bytes()`` and ``free_all_blocks()`` are CuPy's. It works with either
built-in manager (for "direct", what devarray holds is what its arrays hold: nothing is cached).
The options ``memory_limit``, ``memory_limit_fraction`` and ``pool_reserve`` (DV_MEMORY_LIMIT,
DV_MEMORY_LIMIT_FRACTION, DV_POOL_RESERVE) set the same when a context is made."""

import ctypes

from ._context import current_context
from ._lib import lib, check

__all__ = ["MemoryPool", "get_default_memory_pool"]


class MemoryPool:
    """The device memory a context's manager holds, and its limit."""

    def __init__(self, context):
        self._ctx = context

    def _limit(self):
        lim, held, cached = ctypes.c_size_t(), ctypes.c_size_t(), ctypes.c_size_t()
        check(lib.dv_memory_limit(self._ctx.handle, ctypes.byref(lim), ctypes.byref(held),
                                  ctypes.byref(cached)), "MemoryPool")
        return lim.value, held.value, cached.value

    def set_limit(self, size=None, fraction=None):
        """Limit what the context's manager may hold to `size` bytes, or to `fraction` of the
        device's memory (one of the two; 0 or neither: no limit). An allocation past it first
        has the pool give back what it caches, then raises (out of memory)."""
        if size is not None and fraction is not None:
            raise ValueError("set_limit: give size or fraction, not both")
        if fraction is not None:
            check(lib.dv_memory_set_limit_fraction(self._ctx.handle, float(fraction)), "set_limit")
        else:
            if size is not None and int(size) < 0:
                raise ValueError("set_limit: size must be >= 0, not %r" % (size,))
            check(lib.dv_memory_set_limit(self._ctx.handle, int(size or 0)), "set_limit")

    def get_limit(self):
        """The limit in bytes (0: none)."""
        return self._limit()[0]

    def total_bytes(self):
        """Bytes the manager holds from the driver, cached free ones included (with the direct
        manager counted only while a limit is set)."""
        return self._limit()[1]

    def free_bytes(self):
        """Bytes held but cached free (the pool's; 0 for the direct manager)."""
        return self._limit()[2]

    def used_bytes(self):
        """Bytes held for arrays: total_bytes() - free_bytes()."""
        _, held, cached = self._limit()
        return held - cached

    def free_all_blocks(self):
        """Give every cached block back to the device (dv_memory_trim; the pool's reserve is
        kept)."""
        check(lib.dv_memory_trim(self._ctx.handle), "free_all_blocks")


def get_default_memory_pool():
    """The current context's MemoryPool (CuPy's cupy.get_default_memory_pool())."""
    return MemoryPool(current_context())
