"""defer_cleanup: frees wait until the block ends (Numba's deallocation behaviour)."""
import gc

import numpy as np

import devarray as cuda

ctx = cuda.current_context()
# start from an empty queue: what earlier code left (run_path'd examples) must not count; a
# flush may queue more (an array's stream is released with it), hence three
gc.collect()
for _ in range(3):
    ctx.deallocations.clear()
with cuda.defer_cleanup():
    for _ in range(20):
        d = cuda.to_device(np.zeros(1024))
        del d
    gc.collect()
    print("pending inside defer_cleanup:", len(ctx.deallocations))
    assert len(ctx.deallocations) == 20
ctx.deallocations.clear()
print("pending after clear():", len(ctx.deallocations))
assert len(ctx.deallocations) == 0
