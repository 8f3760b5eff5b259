"""Numba's tiled matrix multiply with shared memory and barriers (examples/matmul.dvk)."""
import os

import numpy as np

import devarray as cuda

TPB = 16
here = os.path.dirname(os.path.abspath(__file__))
src = open(os.path.join(here, "..", "..", "examples", "matmul.dvk")).read()
fast_matmul = cuda.Module(src, name="matmul.dvk", defines={"TPB": TPB}).get("fast_matmul")
n = 100
A = np.random.default_rng(0).random((n, n), dtype=np.float32)
B = np.random.default_rng(1).random((n, n), dtype=np.float32)
dA, dB = cuda.to_device(A), cuda.to_device(B)
dC = cuda.device_array((n, n), np.float32)
blocks = (n + TPB - 1) // TPB
fast_matmul[(blocks, blocks), (TPB, TPB)](dA, dB, dC, n)
C = dC.copy_to_host()
assert np.allclose(C, A @ B, rtol=1e-4)
print("tiled matmul %dx%d on %s: ok" % (n, n, cuda.current_context().backend))
