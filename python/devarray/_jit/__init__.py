"""devarray.jit: Python kernels (Numba's ``@cuda.jit`` language) compiled to devarray's C
dialect with Numba's own front end, and launched on every backend.

Needs Numba (Debian: python3-numba); without it ``devarray.jit`` raises one clear error and
the rest of the binding works. The parts: ``stubs`` (the names kernels call), ``typingctx``
(Numba's CUDA typing rules), ``frontend`` (Numba's pipeline up to typed IR), ``structure``
(the control-flow graph as structured C), ``lower`` and ``ops`` (typed IR to the dialect),
``dispatcher`` (specialization, cache, launches). docs/python.md says what is Numba's and
what differs.
"""

from numba.core import config as _config

if _config.ENABLE_CUDASIM:
    raise ImportError("NUMBA_ENABLE_CUDASIM=1: this process runs Numba's simulator as "
                      "numba.cuda, whose names are not Numba's CUDA stubs; devarray.jit "
                      "needs NUMBA_ENABLE_CUDASIM unset (run the simulator in another process)")

from .dispatcher import (jit, Dispatcher, DeviceFunction, typeof_arg,  # noqa: F401
                         compile_ptx, compile_ptx_for_current_device)
from .values import LoweringError  # noqa: F401
from . import stubs  # noqa: F401
