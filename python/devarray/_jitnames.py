"""The kernel language's names, known without importing Numba (devarray's module
__getattr__ loads ``stubs`` only for these)."""

NUMBA_NAMES = ("threadIdx", "blockIdx", "blockDim", "gridDim", "warpsize", "laneid", "grid",
               "gridsize", "shared", "local", "const", "syncthreads", "syncthreads_count",
               "syncthreads_and", "syncthreads_or", "syncwarp", "threadfence",
               "threadfence_block", "threadfence_system", "atomic", "popc", "brev", "clz",
               "ffs", "fma", "cbrt", "selp", "activemask", "lanemask_lt", "fp16", "cg",
               "nanosleep", "match_any_sync", "match_all_sync", "shfl_sync_intrinsic",
               "vote_sync_intrinsic")
WARP_NAMES = ("shfl_sync", "shfl_up_sync", "shfl_down_sync", "shfl_xor_sync", "all_sync",
              "any_sync", "eq_sync", "ballot_sync")
ROC_NAMES = ("get_local_id", "get_global_id", "get_group_id", "get_local_size",
             "get_global_size", "get_num_groups", "get_work_dim", "barrier", "mem_fence",
             "wavebarrier")
KERNEL_NAMES = frozenset(NUMBA_NAMES + WARP_NAMES)
# names of devarray._jit the package exports (loaded with it)
JIT_NAMES = ("jit", "compile_ptx", "compile_ptx_for_current_device")
