"""devarray.driver: the names of Numba's ``numba.cuda.cudadrv.driver`` that concern memory,
for code written as ``from numba.cuda.cudadrv import driver``::

    from devarray import driver
    mem = devarray.current_context().memalloc(1024)
    driver.device_memset(mem, 0xab, 1024)

Pointer objects come from devarray._memory, the functions from devarray._driver (see their
docstrings and docs/semantics.md, "Python binding", for what differs from Numba).
"""

from ._memory import (MemoryPointer, AutoFreePointer, MappedMemory, PinnedMemory,
                      ManagedMemory, OwnedPointer, MappedOwnedPointer, ManagedOwnedPointer,
                      MemoryInfo)
from ._driver import (host_to_device, device_to_host, device_to_device, device_memset,
                      device_memory_size, host_memory_extents, host_memory_size, host_pointer,
                      is_device_memory, require_device_memory, device_pointer,
                      device_ctypes_pointer, device_extents, profile_start, profile_stop,
                      profiling)
from ._stream import Stream
from ._context import Event
from ._devices import driver

#: Numba's switch between its ctypes binding and NVIDIA's cuda-python: devarray's pointers
#: are ctypes values, as with Numba's ctypes binding.
USE_NV_BINDING = False

__all__ = ["MemoryPointer", "AutoFreePointer", "MappedMemory", "PinnedMemory", "ManagedMemory",
           "OwnedPointer", "MappedOwnedPointer", "ManagedOwnedPointer", "MemoryInfo",
           "host_to_device", "device_to_host", "device_to_device", "device_memset",
           "device_memory_size", "host_memory_extents", "host_memory_size", "host_pointer",
           "is_device_memory", "require_device_memory", "device_pointer",
           "device_ctypes_pointer", "device_extents", "Stream", "Event", "USE_NV_BINDING",
           "profile_start", "profile_stop", "profiling",
           "driver"]
