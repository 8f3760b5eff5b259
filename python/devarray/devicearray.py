"""devarray.devicearray: the names of Numba's ``numba.cuda.cudadrv.devicearray``.

The array classes (DeviceNDArray, DeviceRecord; MappedNDArray from devarray._mapped) come from devarray._array, the module functions (auto_device,
from_record_like, array_core, is_contiguous, sentry_contiguous,
verify_cuda_ndarray_interface, errmsg_contiguous_buffer) from devarray._create.
"""

from ._array import DeviceNDArray, DeviceRecord
from ._mapped import MappedNDArray
from ._create import (device_array, device_array_like, to_device, is_cuda_array,
                      is_device_array, from_record_like, auto_device, array_core,
                      is_contiguous, sentry_contiguous, verify_cuda_ndarray_interface,
                      errmsg_contiguous_buffer)

__all__ = ["DeviceNDArray", "DeviceRecord", "MappedNDArray", "device_array", "device_array_like", "to_device",
           "is_cuda_array", "is_device_array", "from_record_like", "auto_device", "array_core",
           "is_contiguous", "sentry_contiguous", "verify_cuda_ndarray_interface",
           "errmsg_contiguous_buffer"]
