"""to_device -> kernel -> copy_to_host (Numba's first example, on devarray)."""
import numpy as np

import devarray as cuda

SRC = """
DV_KERNEL(add_one, DV_ARRAY(float, a), int n) {
  DV_BIND(float, a);
  int i = (int)dv_global_id(0);
  if (i < n) a[i] += 1.0f;
}
"""
add_one = cuda.Module(SRC, name="add_one.dvk").get("add_one")
a = np.arange(1000, dtype=np.float32)
d = cuda.to_device(a)
add_one[(a.size + 127) // 128, 128](d, a.size)
out = d.copy_to_host()
assert (out == a + 1).all()
print("to_device -> kernel -> copy_to_host on %s: ok" % cuda.current_context().backend)
