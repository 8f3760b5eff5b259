"""Streams with auto_synchronize: copies and a kernel ordered on one stream."""
import numpy as np

import devarray as cuda

SRC = """
DV_KERNEL(scale, DV_ARRAY(float, a), float f, int n) {
  DV_BIND(float, a);
  int i = (int)dv_global_id(0);
  if (i < n) a[i] *= f;
}
"""
scale = cuda.Module(SRC, name="scale.dvk").get("scale")
a = cuda.pinned_array(4096, np.float32)
a[:] = np.arange(a.size)
out = cuda.pinned_array(a.shape, np.float32)
s = cuda.stream()
with s.auto_synchronize():  # the block's end waits for the stream
    d = cuda.to_device(a, stream=s)
    scale[(a.size + 255) // 256, 256, s](d, np.float32(0.5), a.size)
    d.copy_to_host(out, stream=s)
assert (out == a * 0.5).all()
print("stream with auto_synchronize on %s: ok" % cuda.current_context().backend)
