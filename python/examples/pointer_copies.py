"""Numba's pointer-level API: raw byte copies and memsets through MemoryPointer views.

Written as Numba code is (``from numba.cuda.cudadrv import driver``); only the imports differ.
"""
import numpy as np

import devarray as cuda
from devarray import driver

a = np.arange(16, dtype=np.uint32)
d = cuda.device_array(16, dtype=np.uint32)
mem = d.gpu_data                       # the array's 64 bytes, as a MemoryPointer
driver.host_to_device(mem, a, a.nbytes)

head = mem.view(0, 16)                 # bytes 0..15: elements 0..3
tail = mem.view(32)                    # bytes 32..63: elements 8..15
assert driver.device_pointer(tail) - driver.device_pointer(mem) == 32
head.memset(0)                         # MemoryPointer.memset(byte, count=None)
driver.device_memset(tail, 0xff, 8)    # elements 8 and 9

half = cuda.device_array(8, dtype=np.uint32)
driver.device_to_device(half, tail, 32)

whole = np.empty(16, np.uint32)
driver.device_to_host(whole, mem, whole.nbytes)
expect = a.copy()
expect[:4] = 0
expect[8:10] = 0xffffffff
assert (whole == expect).all(), whole
assert (half.copy_to_host() == expect[8:]).all()
assert (d.copy_to_host() == expect).all()   # gpu_data shares the array's memory

# A mapped host array is device memory for the driver functions, and host memory for NumPy.
m = cuda.mapped_array(8, dtype=np.uint8)
driver.device_memset(m, 7, driver.device_memory_size(m))
assert (m == 7).all()
print("pointer copies on %s: ok" % cuda.current_context().backend)
