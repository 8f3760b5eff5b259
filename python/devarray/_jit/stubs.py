"""The names a Python kernel uses: Numba's own stubs where Numba has them, devarray's for ROC.

A kernel written for ``numba.cuda`` calls ``cuda.threadIdx.x``, ``cuda.shared.array(...)``,
``cuda.syncthreads()``, ``cuda.atomic.add(...)``. After ``import devarray as cuda`` those
attributes are these objects: Numba's stub classes (``numba.cuda.stubs``) themselves, so that
Numba's CUDA typing rules (``numba.cuda.cudadecl``) type them unchanged. The warp functions
Numba writes as device functions in Python (``shfl_sync``, ``all_sync``, ...) and the ROC
chapter's names (``get_local_id``, ``barrier``, ``wavebarrier``, ...) have stubs of their own
here, typed in ``typingctx``. Stubs do nothing when called from Python: they are names for the
compiler.
"""

from numba.cuda import stubs as _nb

from .._jitnames import NUMBA_NAMES

# Numba's own stubs: the objects numba.cuda exports under these names.
NUMBA = {n: getattr(_nb, n) for n in NUMBA_NAMES if hasattr(_nb, n)}


class Stub:
    """A name only a kernel can call."""
    _description_ = "<stub>"

    def __new__(cls):
        raise NotImplementedError("%s is a kernel function: call it inside a kernel" % cls.__name__)


def _stub(name, doc):
    return type(name, (Stub,), {"__doc__": doc, "_description_": "<%s()>" % name})


# Numba writes these as device functions over intrinsics; devarray types them directly.
WARP = {
    "shfl_sync": _stub("shfl_sync", "shfl_sync(mask, value, src_lane): value of lane src_lane."),
    "shfl_up_sync": _stub("shfl_up_sync", "shfl_up_sync(mask, value, delta): lane - delta."),
    "shfl_down_sync": _stub("shfl_down_sync", "shfl_down_sync(mask, value, delta): lane + delta."),
    "shfl_xor_sync": _stub("shfl_xor_sync", "shfl_xor_sync(mask, value, lane_mask): lane ^ mask."),
    "all_sync": _stub("all_sync", "all_sync(mask, predicate): every lane's predicate is true."),
    "any_sync": _stub("any_sync", "any_sync(mask, predicate): some lane's predicate is true."),
    "eq_sync": _stub("eq_sync", "eq_sync(mask, predicate): every lane's predicate is the same."),
    "ballot_sync": _stub("ballot_sync", "ballot_sync(mask, predicate): the lanes' bits."),
}

# The ROC chapter's kernel names (numba.roc, removed from Numba in 0.54).
ROC = {
    "get_local_id": _stub("get_local_id", "get_local_id(dim): the work-item's id in its group."),
    "get_global_id": _stub("get_global_id", "get_global_id(dim): the work-item's global id."),
    "get_group_id": _stub("get_group_id", "get_group_id(dim): the work-group's id."),
    "get_local_size": _stub("get_local_size", "get_local_size(dim): the work-group's size."),
    "get_global_size": _stub("get_global_size", "get_global_size(dim): the grid's work-items."),
    "get_num_groups": _stub("get_num_groups", "get_num_groups(dim): the grid's work-groups."),
    "get_work_dim": _stub("get_work_dim", "get_work_dim(): the launch's dimensions (1 to 3)."),
    "barrier": _stub("barrier", "barrier(flags=CLK_GLOBAL_MEM_FENCE): the group's barrier."),
    "mem_fence": _stub("mem_fence", "mem_fence(flags): a memory fence."),
    "wavebarrier": _stub("wavebarrier", "wavebarrier(): a barrier of the wave."),
}
# ROC's fence flags (Numba's values).
CLK_LOCAL_MEM_FENCE = 0
CLK_GLOBAL_MEM_FENCE = 1

ALL = dict(NUMBA)
ALL.update(WARP)
