#!/bin/sh
# On a GPU machine: build devarray, run the whole test suite (the *.cuda
# suites run there), compute-sanitizer's memcheck on the CUDA suites, and the
# benchmarks (bench_cuda against the raw driver; numba-cuda and CuPy).
# Raw logs go to $OUT (the device tool's folder) or bench/results/gpu-DATE.
#   bench/gpu/fetch-deps.sh        # here, first (cmocka for the tests)
#   bench/gpu/run.sh               # there, with .gpu-deps carried
set -u
cd "$(dirname "$0")/../.."
out="${OUT:-bench/results/gpu-$(date -u +%Y%m%d-%H%M)}"
mkdir -p "$out"
jobs=$(nproc)
{
  echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
  echo "command: bench/gpu/run.sh"
  nvidia-smi --query-gpu=name,driver_version,memory.total,pci.bus_id --format=csv || true
  nvcc --version | tail -1 || true
  uname -a
} > "$out/env.txt" 2>&1
cat "$out/env.txt"

# cmocka from carried Debian packages, unpacked into a private prefix
prefix="$PWD/.gpu-deps/root"
if [ -d .gpu-deps ] && ls .gpu-deps/*.deb >/dev/null 2>&1; then
  for f in .gpu-deps/*.deb; do dpkg -x "$f" "$prefix"; done
  export PKG_CONFIG_PATH="$prefix/usr/lib/x86_64-linux-gnu/pkgconfig"
  export LD_LIBRARY_PATH="$prefix/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
  export CFLAGS="-I$prefix/usr/include"
fi

# NVRTC for the kernel suites: where ldconfig does not list it, the toolkit's
# copy, else the pip wheel's (nvidia-cuda-nvrtc); the copy kernels need none.
if ! ldconfig -p 2>/dev/null | grep -q 'libnvrtc\.so'; then
  wheel=$(python3 -c 'import glob, os, nvidia.cuda_nvrtc as m; print(" ".join(sorted(glob.glob(os.path.join(list(m.__path__)[0], "lib", "libnvrtc.so*")))))' 2>/dev/null)
  for f in /usr/local/cuda/lib64/libnvrtc.so.13 /usr/local/cuda/lib64/libnvrtc.so.12 $wheel; do
    if [ -e "$f" ]; then DV_NVRTC_LIBRARY="$f"; export DV_NVRTC_LIBRARY; break; fi
  done
fi
echo "nvrtc: ${DV_NVRTC_LIBRARY:-found by ldconfig}" >> "$out/env.txt"

cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=RelWithDebInfo > "$out/build.txt" 2>&1 &&
  cmake --build build-gpu -j"$jobs" >> "$out/build.txt" 2>&1 || { tail -30 "$out/build.txt"; echo "build failed"; }

# 1. the whole suite; the cuda suites run here
scripts/run-tests build-gpu -j4 --output-on-failure --timeout 600 > "$out/ctest.txt" 2>&1
echo "ctest exit $?"; tail -8 "$out/ctest.txt"

# 2. compute-sanitizer memcheck on the CUDA suites
for t in transfer views records memory hostmem streams errors threads kernels; do
  if [ -x build-gpu/tests/test_$t ]; then
    echo "== memcheck test_$t cuda"
    compute-sanitizer --tool memcheck --leak-check full --error-exitcode 9 build-gpu/tests/test_$t cuda 2>&1 | tail -4
  fi
done > "$out/memcheck.txt" 2>&1
grep -E "^==|ERROR SUMMARY|PASSED|FAILED" "$out/memcheck.txt" | head -40

# 3. benchmarks
build-gpu/bench/bench_cuda > "$out/bench_cuda.txt" 2>&1; tail -40 "$out/bench_cuda.txt"
build-gpu/devarray bench --backend cuda --json > "$out/devarray_bench_cuda.json" 2>/dev/null
build-gpu/bench/bench_alloc --backend cuda > "$out/bench_alloc.txt" 2>&1; tail -14 "$out/bench_alloc.txt"
build-gpu/bench/bench_kernels --backend cuda --n 2048 > "$out/bench_kernels.txt" 2>&1; cat "$out/bench_kernels.txt"
for ex in matmul dynamic_shared local_array constant_memory barriers; do
  build-gpu/examples/example_$ex --backend cuda
done > "$out/examples.txt" 2>&1; cat "$out/examples.txt"
(cd /tmp && valgrind --version >/dev/null 2>&1 && valgrind --tool=callgrind --toggle-collect=fastpath_loop \
  "$OLDPWD/build-gpu/bench/bench_alloc" --backend cuda --fastpath-only 100000 2>&1 | grep Collected) >> "$out/bench_alloc.txt" 2>&1
PYTHONUNBUFFERED=1 python3 bench/gpu/peers.py > "$out/peers.txt" 2>&1; tail -30 "$out/peers.txt"
echo "logs in $out"
