"""Numba's CUDA typing rules, for kernels that name devarray.

The typing context installs Numba's own CUDA registries (``numba.cuda.cudadecl``,
``cudamath``, and Numba's ``cmath`` and ``enum`` declarations), so a kernel is typed exactly
as ``numba.cuda`` types it: ``cuda.threadIdx.x`` is an int32, ``cuda.grid(1)`` an int32,
``shared.array`` needs literal shapes, the atomics take what Numba's take. What it adds:

- the modules ``devarray`` and ``devarray.roc`` typed as ``numba.cuda`` (their attributes are
  Numba's stubs: see ``stubs``);
- the warp functions Numba writes in Python (``shfl_sync`` ...) and the ROC names
  (``get_local_id`` ...), typed here;
- devarray's device functions (``jit(device=True)``), typed by compiling them for the
  argument types of each call.
"""

import types as pytypes

from numba.core import types, typing
from numba.core.dispatcher import Dispatcher as _NumbaDispatcher
from numba.core.typing import cmathdecl, enumdecl
from numba.core.typing.templates import (AttributeTemplate, ConcreteTemplate, AbstractTemplate,
                                         Registry, signature)
from numba.cuda import cudadecl, cudamath

from . import stubs

registry = Registry()


def _template(name, ns):
    """A typing template registered for its stub both as a function and as a global value (so
    the stub types wherever it is reached from: devarray, devarray.roc, numba.cuda's shim)."""
    t = type(name, (ConcreteTemplate,), ns)
    registry.register(t)
    registry.register_global(ns["key"], types.Function(t))
    return t

_INTS = (types.int32, types.uint32, types.int64, types.uint64)
_SHFL = _INTS + (types.float32, types.float64)


def _register_warp():
    for name in ("shfl_sync", "shfl_up_sync", "shfl_down_sync", "shfl_xor_sync"):
        _template("Dv_" + name, {
            "key": stubs.WARP[name],
            "cases": [signature(t, types.i4, t, types.i4) for t in _SHFL]})
    for name in ("all_sync", "any_sync", "eq_sync"):
        _template("Dv_" + name, {
            "key": stubs.WARP[name],
            "cases": [signature(types.b1, types.i4, types.b1)]})
    _template("Dv_ballot_sync", {
        "key": stubs.WARP["ballot_sync"],
        "cases": [signature(types.uint32, types.i4, types.b1)]})


def _register_roc():
    for name in ("get_local_id", "get_global_id", "get_group_id", "get_local_size",
                 "get_global_size", "get_num_groups"):
        _template("Dv_roc_" + name, {
            "key": stubs.ROC[name], "cases": [signature(types.intp, types.uint32)]})
    _template("Dv_roc_get_work_dim", {
        "key": stubs.ROC["get_work_dim"], "cases": [signature(types.uint32)]})
    for name in ("barrier", "mem_fence"):
        _template("Dv_roc_" + name, {
            "key": stubs.ROC[name],
            "cases": [signature(types.void, types.uint32), signature(types.void)]})
    _template("Dv_roc_wavebarrier", {
        "key": stubs.ROC["wavebarrier"], "cases": [signature(types.void)]})


_register_warp()
_register_roc()

_templates = {}


def module_template(module):
    """An attribute template typing `module` (devarray or devarray.roc) as numba.cuda: its
    kernel names resolve to the types Numba gives its stubs."""
    key = types.Module(module)
    t = _templates.get(key)
    if t is not None:
        return t
    base = cudadecl.CudaModuleTemplate

    def resolver(value):
        def resolve(self, mod):
            return types.Function(value) if isinstance(value, type) and issubclass(
                value, AbstractTemplate) else value
        return resolve

    ns = {"key": key}
    for name, stub in stubs.WARP.items():
        ns["resolve_" + name] = resolver(_function_type(stub))
    if getattr(module, "__name__", "").endswith(".roc"):
        for name, stub in stubs.ROC.items():
            ns["resolve_" + name] = resolver(_function_type(stub))
    t = type("Dv_module_" + module.__name__.replace(".", "_"), (base,), ns)
    _templates[key] = t
    return t


def _function_type(stub):
    for tmpl in registry.functions:
        if tmpl.key is stub:
            return types.Function(tmpl)
    raise KeyError(stub)


class DialectTypingContext(typing.BaseContext):
    """Numba's CUDA typing (``numba.cuda.target.CUDATypingContext``'s registries), for the
    dialect's compiler."""

    def load_additional_registries(self):
        self.install_registry(cudadecl.registry)
        self.install_registry(cudamath.registry)
        self.install_registry(cmathdecl.registry)
        self.install_registry(enumdecl.registry)
        self.install_registry(registry)

    def resolve_value_type(self, val):
        if isinstance(val, _NumbaDispatcher):
            # a CPU function (@njit) called from a kernel: a device function of its Python
            # function, as Numba's CUDA target does. Imported here: typing that call compiles
            # the function (dispatcher -> frontend -> this typing context), a recursion of the
            # compiler itself, which Numba's CUDA target also closes at this point.
            from .dispatcher import device_function_of  # the compiler's own recursion
            val = device_function_of(val)
        if isinstance(val, pytypes.ModuleType):
            name = getattr(val, "__name__", "")
            if name == "devarray" or name == "devarray.roc":
                self._install_module(val)
        return super().resolve_value_type(val)

    def _install_module(self, mod):
        key = types.Module(mod)
        if key in self._installed_modules:
            return
        self._installed_modules.add(key)
        self.insert_attributes(module_template(mod)(self))

    @property
    def _installed_modules(self):
        s = self.__dict__.get("_dv_modules")
        if s is None:
            s = self.__dict__["_dv_modules"] = set()
        return s


_ctx = None


def typing_context():
    """The process's one typing context (Numba's contexts cache their templates)."""
    global _ctx
    if _ctx is None:
        _ctx = DialectTypingContext()
    return _ctx
