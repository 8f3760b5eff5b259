"""devarray.config: Numba's CUDA_DEALLOCS_COUNT and CUDA_DEALLOCS_RATIO, live.

``devarray.config`` is a module object whose two names, when assigned, change the
pending-deallocation limits of every live context and of the contexts made later
(dv_context_set_dealloc_limits). ``track(module)`` makes assignments to the same names on
another module (Numba's ``numba.core.config``) do the same.
"""

import ctypes
import math
import numbers
import sys
import threading
import types
import weakref

from . import _current
from ._lib import lib, check

COUNT, RATIO = "CUDA_DEALLOCS_COUNT", "CUDA_DEALLOCS_RATIO"
_NAMES = (COUNT, RATIO)
_MAX_COUNT = 1000000000  # the option's maximum, as the C call checks it


_lock = threading.RLock()
_assigned = False          # whether a value was assigned (then new contexts get it)
_tracked = []              # weak references to the modules track() was given


def _process_option(name):
    buf = ctypes.create_string_buffer(64)
    check(lib.dv_option_get(name.encode(), buf, len(buf), None), "config")
    return buf.value.decode()


def _validate(name, value):
    if name == COUNT:
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise TypeError("%s must be an integer, not %s" % (name, type(value).__name__))
        value = int(value)
        if not 0 <= value <= _MAX_COUNT:
            raise ValueError("%s must be between 0 and %d, got %d" % (name, _MAX_COUNT, value))
        return value
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError("%s must be a real number, not %s" % (name, type(value).__name__))
    value = float(value)
    if math.isnan(value) or not 0.0 <= value <= 1.0:
        raise ValueError("%s must be a fraction of device memory between 0 and 1, got %r"
                         % (name, value))
    return value


def limits():
    """(count, ratio) as devarray.config holds them now."""
    d = config.__dict__
    return d[COUNT], d[RATIO]


def _assign(name, value):
    global _assigned
    value = _validate(name, value)
    with _lock:
        count, ratio = limits()
        if name == COUNT:
            count = value
        else:
            ratio = value
        _current.apply_dealloc_limits(count, ratio)  # every live context
        _assigned = True
        config.__dict__[name] = value
        for ref in list(_tracked):
            m = ref()
            if m is None:
                _tracked.remove(ref)
            else:
                m.__dict__[name] = value


def apply_to(ctx):
    """Give a new context the assigned limits (none assigned: it keeps its options)."""
    if _assigned:
        ctx._apply_dealloc_limits(*limits())


class _ConfigModule(types.ModuleType):
    """A module whose CUDA_DEALLOCS_* assignments reach the library."""

    def __setattr__(self, name, value):
        if name in _NAMES:
            _assign(name, value)
        else:
            super().__setattr__(name, value)

    def __delattr__(self, name):
        if name in _NAMES:
            raise AttributeError("%s cannot be deleted" % name)
        super().__delattr__(name)


def _tracked_setattr(self, name, value):
    if name in _NAMES:
        _assign(name, value)
    else:
        type(self).__mro__[1].__setattr__(self, name, value)


def track(module):
    """Make assignments to CUDA_DEALLOCS_COUNT / CUDA_DEALLOCS_RATIO on `module` (Numba's
    ``numba.core.config``, say) apply to devarray as assignments to devarray.config do.

    The module's class becomes a subclass of its own with a ``__setattr__`` that forwards
    those two names, and the module's two values are set to devarray's, so reading either
    gives the limits in force. Calling it again on the same module changes nothing more.
    """
    if not isinstance(module, types.ModuleType):
        raise TypeError("track() needs a module, not %s" % type(module).__name__)
    with _lock:
        cls = type(module)
        if not cls.__dict__.get("_devarray_tracked", False):
            sub = type("Tracked" + cls.__name__, (cls,),
                       {"__setattr__": _tracked_setattr, "_devarray_tracked": True,
                        "__module__": cls.__module__})
            module.__class__ = sub
            _tracked.append(weakref.ref(module))
        count, ratio = limits()
        module.__dict__[COUNT] = count
        module.__dict__[RATIO] = ratio
    return module


config = _ConfigModule("devarray.config", __doc__)
config.__dict__[COUNT] = int(_process_option("max_pending_deallocs_count"))
config.__dict__[RATIO] = float(_process_option("max_pending_deallocs_ratio"))
config.__dict__["track"] = track
config.__dict__["limits"] = limits
sys.modules.setdefault("devarray.config", config)
