"""Numba's front end, up to typed IR: bytecode analysis, Numba IR, its rewrites and type
inference, with Numba's CUDA typing rules (``typingctx``).

``typed_ir(pyfunc, argtypes)`` runs Numba's untyped pipeline (the same passes ``numba.cuda``
runs: bytecode to IR, closure inlining, constant rewrites, literal unrolling, SSA) and its
type inference, then strips the SSA phis into assignments, and returns the IR with its types.
Numba's errors (``TypingError``, ``UnsupportedError``, ...) come out unchanged: they name the
construct and the Python file and line. The dialect's lowering (``lower``) reads the result.
"""

from types import SimpleNamespace

from numba.core import compiler
from numba.core.compiler import CompilerBase, DefaultPassBuilder, Flags
from numba.core.compiler_lock import global_compiler_lock
from numba.core.compiler_machinery import PassManager, register_pass, LoweringPass
from numba.core.registry import cpu_target
from numba.core.typed_passes import NopythonTypeInference, NopythonRewrites, PreLowerStripPhis

from .typingctx import typing_context


@register_pass(mutates_CFG=False, analysis_only=True)
class DialectCapture(LoweringPass):
    """The last pass: keeps the typed IR (no machine code is made by Numba)."""
    _name = "devarray_dialect_capture"

    def __init__(self):
        LoweringPass.__init__(self)

    def run_pass(self, state):
        state.cr = SimpleNamespace(func_ir=state.func_ir, typemap=state.typemap,
                                   calltypes=state.calltypes, return_type=state.return_type,
                                   args=state.args, func_id=state.func_id)
        return False


class DialectCompiler(CompilerBase):
    def define_pipelines(self):
        pm = PassManager("devarray")
        pm.passes.extend(DefaultPassBuilder.define_untyped_pipeline(self.state).passes)
        pm.add_pass(NopythonTypeInference, "nopython frontend")
        pm.add_pass(NopythonRewrites, "nopython rewrites")
        pm.add_pass(PreLowerStripPhis, "remove phis")
        pm.add_pass(DialectCapture, "capture typed IR")
        pm.finalize()
        return [pm]


@global_compiler_lock
def typed_ir(pyfunc, argtypes, return_type=None):
    """Numba's typed IR of `pyfunc` for `argtypes` (a tuple of Numba types)."""
    flags = Flags()
    flags.no_compile = True
    flags.no_cpython_wrapper = True
    flags.no_cfunc_wrapper = True
    flags.error_model = "numpy"
    # Without SSA the IR keeps the source's variables (`i`, `tmp`), which become the C
    # variables: the generated source reads like the kernel, and a loop's condition can be
    # recognised when Python 3.11 duplicates it (structure.py).
    flags.enable_ssa = False
    return compiler.compile_extra(typingctx=typing_context(),
                                  targetctx=cpu_target.target_context, func=pyfunc,
                                  args=tuple(argtypes), return_type=return_type, flags=flags,
                                  locals={}, pipeline_class=DialectCompiler)
