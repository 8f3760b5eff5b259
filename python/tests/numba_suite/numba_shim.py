"""Point ``numba.cuda`` at devarray, the way Numba's own simulator installs itself.

Numba's simulator (numba/cuda/simulator/__init__.py) replaces the modules
``numba.cuda.cudadrv``, ``...devicearray``, ``...devices``, ``...driver`` and friends in
``sys.modules`` so that code importing them gets the simulator's objects. :func:`install`
does the same with devarray's objects, one step earlier: it also puts a module of its own
in ``sys.modules['numba.cuda']``, because the real ``numba/cuda/__init__.py`` would load
Numba's CUDA target (device_init.py), not an API over another library.

What stays Numba's own: ``numba.core.config`` (``ENABLE_CUDASIM`` stays 0, so
``numba.cuda.testing`` does not think it runs on the simulator and skips nothing for that
reason), ``numba.cuda.testing`` and the test modules themselves, loaded unchanged from the
installed Numba (the shim's ``numba.cuda`` carries the real package's ``__path__``).

How a name resolves: each shim module looks it up in an ordered list of devarray modules
(``SOURCES`` below: a public devarray module of Numba's name where one exists, then the
binding's private modules that hold that concern, then the package); a name found nowhere
raises ``AttributeError`` naming the Numba module, the name and where the shim looked, so a
test that needs an API devarray lacks fails with that message instead of the harness failing.
Assigning a name on a shim module (Numba's tests do ``driver._memory_manager = None``) sets it
on the devarray module the shim resolves it from (the first in its list that has it).

Besides devarray's names the shim adds only what describes Numba's world rather than
devarray's API (``SHIM_NAMES``): Numba's own identities between its modules
(``devices.get_context`` is ``current_context``, ``devices.reset`` is what ``close`` calls),
the fact that no NVIDIA cuda-python binding is in use (``driver.USE_NV_BINDING = False``), and
Numba's ctypes declarations of CUDA driver types (``drvapi.cu_device_ptr`` and friends, which
Numba's tests compare devarray's objects against). Nothing is faked: ``cuda.jit`` is
devarray.jit (Python kernels compiled to devarray's dialect), NVVM and PTX stay absent; ``driver.driver`` is devarray's own reduced object
(get_device_count, cuMemGetInfo: docs/semantics.md, "Python binding").
"""

import ctypes
import importlib
import os
import sys
import types

__all__ = ["install", "installed", "SOURCES", "SHIM_NAMES"]

# numba module name -> devarray modules searched in order (missing ones are passed over).
SOURCES = {
    "numba.cuda": ["devarray"],
    "numba.cuda.cudadrv.driver": ["devarray.driver", "devarray._driver", "devarray._memory",
                                  "devarray._emm", "devarray._context", "devarray._stream",
                                  "devarray"],
    "numba.cuda.cudadrv.devicearray": ["devarray.devicearray", "devarray._array",
                                       "devarray._create", "devarray._hostmem", "devarray"],
    "numba.cuda.cudadrv.devices": ["devarray.devices", "devarray._context", "devarray"],
    "numba.cuda.cudadrv.drvapi": ["devarray.drvapi", "devarray._memory", "devarray._driver"],
    "numba.cuda.cudadrv.error": ["devarray.error"],
    "numba.cuda.cudadrv.runtime": ["devarray.runtime"],
    "numba.cuda.cudadrv.nvvm": ["devarray.nvvm"],
    "numba.cuda.cudadrv.libs": ["devarray.libs"],
}

# Numba's declarations of CUDA driver types (numba/cuda/cudadrv/drvapi.py): the reference
# Numba's tests check devarray's ctypes objects against, not devarray API.
_DRVAPI_TYPES = {
    "cu_device": ctypes.c_int,
    "cu_context": ctypes.c_void_p,
    "cu_device_ptr": ctypes.c_size_t,
    "cu_stream": ctypes.c_void_p,
    "cu_event": ctypes.c_void_p,
}

# name -> ("alias", devarray name) | ("value", value): see the module docstring.
SHIM_NAMES = {
    "numba.cuda.cudadrv.devices": {
        "get_context": ("alias", "current_context"),  # numba.cuda.current_context is this
        "reset": ("alias", "close"),                  # numba.cuda.close() calls this
    },
    "numba.cuda.cudadrv.driver": {
        # Numba's switch for NVIDIA's cuda-python binding; devarray does not use it.
        "USE_NV_BINDING": ("value", False),
    },
    "numba.cuda.cudadrv.drvapi": {k: ("value", v) for k, v in _DRVAPI_TYPES.items()},
}

_SUBMODULES = ("driver", "devicearray", "devices", "drvapi", "error", "runtime", "nvvm", "libs")


_absent = set()


def _module(name):
    if name in _absent:
        return None
    try:
        return importlib.import_module(name)
    except ImportError as e:
        if getattr(e, "name", None) == name:  # the module does not exist: pass it over
            _absent.add(name)
            return None
        raise


class ShimModule(types.ModuleType):
    """A module whose names are devarray's (see the module docstring)."""

    def __init__(self, name, doc=None):
        super().__init__(name, doc)
        object.__setattr__(self, "_shim_sources", SOURCES.get(name, []))
        object.__setattr__(self, "_shim_names", SHIM_NAMES.get(name, {}))

    def _shim_lookup(self, attr):
        """(module, value) for attr in the first source that has it, else (None, None)."""
        for src in self._shim_sources:
            mod = _module(src)
            if mod is None or mod is self:
                continue
            v = mod.__dict__.get(attr, _NOTHING)
            if v is _NOTHING and src == "devarray":
                # the kernel language (jit, threadIdx, shared, ...): devarray's module
                # __getattr__ loads it on first use
                try:
                    v = getattr(mod, attr)
                except AttributeError:
                    v = _NOTHING
            if v is _NOTHING or isinstance(v, types.ModuleType):
                continue  # a submodule of devarray is not a Numba name
            return mod, v
        return None, None

    def __getattr__(self, attr):
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)
        mod, v = self._shim_lookup(attr)
        if mod is not None:
            return v
        special = self._shim_names.get(attr)
        if special is not None:
            kind, what = special
            if kind == "value":
                return what
            return getattr(_module("devarray"), what)
        looked = ", ".join(self._shim_sources) or "nowhere (no devarray counterpart)"
        raise AttributeError("%s.%s: devarray has no such name (numba shim looked in %s)"
                             % (self.__name__, attr, looked))

    def __setattr__(self, attr, value):
        mod, _ = self._shim_lookup(attr)
        if mod is not None:
            setattr(mod, attr, value)
        else:
            object.__setattr__(self, attr, value)

    def __dir__(self):
        names = set(self.__dict__)
        for src in self._shim_sources:
            mod = _module(src)
            if mod is not None:
                names.update(n for n, v in mod.__dict__.items()
                             if not isinstance(v, types.ModuleType))
        names.update(self._shim_names)
        return sorted(names)


_NOTHING = object()
_installed = None


def installed():
    """The shim's numba.cuda module when install() has run, else None."""
    return _installed


def install():
    """Make ``numba.cuda`` and its ``cudadrv`` modules resolve to devarray; idempotent.

    Must run before anything imports ``numba.cuda`` (raises RuntimeError otherwise) and with
    NUMBA_ENABLE_CUDASIM unset or 0. Returns the shim's ``numba.cuda`` module. When devarray
    has ``config.track``, Numba's config module is tracked, so the tests' assignments to
    ``numba.core.config.CUDA_DEALLOCS_*`` reach devarray's live contexts.
    """
    global _installed
    if _installed is not None:
        return _installed
    if "numba.cuda" in sys.modules:
        raise RuntimeError("numba.cuda was imported before the devarray shim was installed")
    import numba
    from numba.core import config
    if config.ENABLE_CUDASIM:
        raise RuntimeError("NUMBA_ENABLE_CUDASIM is set: the shim replaces the real "
                           "numba.cuda, not the simulator")
    import devarray  # noqa: F401  (the sources import it anyway; fail here if it cannot load)

    real_dir = os.path.join(os.path.dirname(numba.__file__), "cuda")
    cuda = ShimModule("numba.cuda", "numba.cuda resolved to devarray (numba_shim.py)")
    object.__setattr__(cuda, "__path__", [real_dir])  # testing.py, tests/ load from Numba
    object.__setattr__(cuda, "__package__", "numba.cuda")
    cudadrv = ShimModule("numba.cuda.cudadrv", "numba.cuda.cudadrv resolved to devarray")
    object.__setattr__(cudadrv, "__path__", [])  # other submodules: ModuleNotFoundError
    object.__setattr__(cudadrv, "__package__", "numba.cuda.cudadrv")
    sys.modules["numba.cuda"] = cuda
    sys.modules["numba.cuda.cudadrv"] = cudadrv
    for sub in _SUBMODULES:
        name = "numba.cuda.cudadrv." + sub
        m = ShimModule(name, "%s resolved to devarray (numba_shim.py)" % name)
        object.__setattr__(m, "__package__", "numba.cuda.cudadrv")
        sys.modules[name] = m
        object.__setattr__(cudadrv, sub, m)
    object.__setattr__(cuda, "cudadrv", cudadrv)
    # numba/cuda/__init__.py exposes the cudadrv module as numba.cuda.devicearray too
    object.__setattr__(cuda, "devicearray", sys.modules["numba.cuda.cudadrv.devicearray"])
    object.__setattr__(numba, "cuda", cuda)

    tracker = getattr(getattr(devarray, "config", None), "track", None)
    if tracker is not None:
        tracker(config)
    _installed = cuda
    return cuda


def config_tracked():
    """True when devarray.config.track exists (install() then tracked Numba's config)."""
    import devarray
    return getattr(getattr(devarray, "config", None), "track", None) is not None
