#!/bin/sh
# On a GPU machine, in steps that each fit one 10-minute call of the device
# tool (bench/gpu/README.md tells the calls; every step has its own time
# limits and ends well inside 10 minutes):
#
#   bench/gpu/fetch-deps.sh            # HERE first: cmocka (and libffi-dev) .debs into .gpu-deps/
#   bench/gpu/run.sh build             # there: unpack .gpu-deps, configure, build (stops on failure)
#   bench/gpu/run.sh tests             # the whole suite, the CUDA suites on the real driver
#   bench/gpu/run.sh memcheck          # compute-sanitizer memcheck on the CUDA suites
#   bench/gpu/run.sh bench             # transfer sweep, small calls, allocation, kernels
#   bench/gpu/run.sh peers             # numba-cuda, CuPy, PyTorch on the same machine
#   bench/gpu/run.sh hip               # an AMD GPU (ROCm): build, the HIP suites, benchmarks
#   bench/gpu/run.sh all               # every step in order (only where one call may run longer)
#
# Every call of the device tool names .gpu-deps in carry (it is git-ignored,
# so it travels only when carried); build-gpu/ stays on the machine between
# calls while it is held warm; a step finding no build says so and exits 2.
# Logs go to $OUT (the device tool's folder, fetched back) or
# bench/results/gpu-DATE here.
set -u
cd "$(dirname "$0")/../.."
step="${1:-all}"
out="${OUT:-bench/results/gpu-$(date -u +%Y%m%d-%H%M)}"
mkdir -p "$out"
jobs=$(nproc)
root="$PWD"

# The carried packages, unpacked into a private prefix; their pkg-config
# files are rewritten to point there (the Debian files say prefix=/usr).
deps() {
  prefix="$root/.gpu-deps/root"
  if [ -d .gpu-deps ] && ls .gpu-deps/*.deb >/dev/null 2>&1; then
    if [ ! -d "$prefix" ]; then
      for f in .gpu-deps/*.deb; do dpkg -x "$f" "$prefix" || return 1; done
      for pc in $(find "$prefix" -name '*.pc'); do sed -i "s|=/usr|=$prefix/usr|g" "$pc"; done
    fi
    PKG_CONFIG_PATH="$prefix/usr/lib/x86_64-linux-gnu/pkgconfig:$prefix/usr/share/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
    LD_LIBRARY_PATH="$prefix/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    CPATH="$prefix/usr/include${CPATH:+:$CPATH}"
    export PKG_CONFIG_PATH LD_LIBRARY_PATH CPATH
  elif ! pkg-config --exists cmocka 2>/dev/null; then
    echo "no cmocka: run bench/gpu/fetch-deps.sh here and name .gpu-deps in the call's carry"
    return 1
  fi
  # NVRTC for the kernel suites: where ldconfig does not list it, the
  # toolkit's copy, else the pip wheel's (nvidia-cuda-nvrtc).
  if ! ldconfig -p 2>/dev/null | grep -q 'libnvrtc\.so'; then
    wheel=$(python3 -c 'import glob, os, nvidia.cuda_nvrtc as m; print(" ".join(sorted(glob.glob(os.path.join(list(m.__path__)[0], "lib", "libnvrtc.so*")))))' 2>/dev/null)
    for f in /usr/local/cuda/lib64/libnvrtc.so.13 /usr/local/cuda/lib64/libnvrtc.so.12 $wheel; do
      if [ -e "$f" ]; then DV_NVRTC_LIBRARY="$f"; export DV_NVRTC_LIBRARY; break; fi
    done
  fi
}

need_build() {
  if [ ! -x build-gpu/tests/test_transfer ]; then
    echo "no build in build-gpu/ (a fresh machine?): run 'bench/gpu/run.sh build' in this lease first"
    exit 2
  fi
}

do_build() {
  {
    echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
    echo "command: bench/gpu/run.sh build"
    nvidia-smi --query-gpu=name,driver_version,memory.total,pci.bus_id --format=csv || true
    nvcc --version | tail -1 || true
    uname -a
    echo "nvrtc: ${DV_NVRTC_LIBRARY:-found by ldconfig}"
  } > "$out/env.txt" 2>&1
  cat "$out/env.txt"
  # The real driver, never the test double (-DDV_CUDA_DOUBLE=OFF).
  if ! timeout 120 cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDV_CUDA_DOUBLE=OFF > "$out/build.txt" 2>&1 ||
     ! timeout 420 cmake --build build-gpu -j"$jobs" >> "$out/build.txt" 2>&1; then
    tail -30 "$out/build.txt"
    echo "build failed: stopping"
    exit 1
  fi
  echo "build ok"
}

do_tests() {
  need_build
  # 540 s in all: the suites' own CTest limits are 120-600 s each, far
  # above what they take; the outer limit keeps the call inside 10 minutes.
  timeout 540 scripts/run-tests build-gpu -j4 --output-on-failure --timeout 300 > "$out/ctest.txt" 2>&1
  echo "ctest exit $?"
  tail -12 "$out/ctest.txt"
}

do_memcheck() {
  need_build
  if ! command -v compute-sanitizer >/dev/null; then echo "no compute-sanitizer"; return 0; fi
  start=$(date +%s)
  for t in transfer views records memory hostmem streams errors threads cuda_double kernels; do
    [ -x build-gpu/tests/test_$t ] || continue
    # 60 s a suite, and nothing started after 480 s.
    [ $(( $(date +%s) - start )) -lt 480 ] || { echo "== test_$t: not run (time)"; continue; }
    echo "== memcheck test_$t cuda"
    timeout -k 5 60 compute-sanitizer --tool memcheck --leak-check full --error-exitcode 9 \
      build-gpu/tests/test_$t cuda > "$out/memcheck_$t.txt" 2>&1
    rc=$?
    tail -4 "$out/memcheck_$t.txt"
    echo "exit $rc (124: over its 60 s)"
  done > "$out/memcheck.txt" 2>&1
  grep -E "^==|ERROR SUMMARY|PASSED|FAILED|exit|not run" "$out/memcheck.txt" | head -60
}

# Seconds left of this step's 560 (so that it ends inside a 10-minute call
# whatever its parts take), at most $1; 0 when nothing is left.
left() {
  l=$(( deadline - $(date +%s) ))
  [ "$l" -gt "$1" ] && l=$1
  [ "$l" -gt 0 ] || l=0
  echo "$l"
}
# timeout for one part: its own limit or what is left, whichever is less;
# a part with nothing left is not started, and says so.
tmo() {
  t=$(left "$1")
  shift
  if [ "$t" -eq 0 ]; then echo "not run (the step's 560 s are spent): $*"; return 124; fi
  timeout -k 5 "$t" "$@"
}

do_bench() {
  need_build
  deadline=$(( $(date +%s) + 560 ))
  tmo 240 build-gpu/bench/bench_cuda > "$out/bench_cuda.txt" 2>&1; tail -40 "$out/bench_cuda.txt"
  tmo 60 build-gpu/devarray bench --backend cuda --json > "$out/devarray_bench_cuda.json" 2>/dev/null
  tmo 60 build-gpu/bench/bench_alloc --backend cuda > "$out/bench_alloc.txt" 2>&1; tail -14 "$out/bench_alloc.txt"
  tmo 60 build-gpu/bench/bench_kernels --backend cuda --n 2048 > "$out/bench_kernels.txt" 2>&1; cat "$out/bench_kernels.txt"
  tmo 60 build-gpu/bench/bench_smart --backend cuda --n 1048576 --iters 50 --reps 7 > "$out/bench_smart.txt" 2>&1; tail -12 "$out/bench_smart.txt"
  # The copy team of the pageable staging path (issue 13): 1..8 threads back to back, and 1..4
  # with the workers asleep between copies (the defaults cuda_staging_threads and
  # cuda_staging_thread_min come from a 2-core machine; docs/benchmarks.md, "Copy team").
  { echo "nproc $(nproc)"; lscpu | grep -E 'Model name|^Socket|NUMA node\(s\)';
    tmo 60 build-gpu/bench/bench_copyteam --quick --threads 8;
    tmo 30 build-gpu/bench/bench_copyteam --quick --threads 4 --gap-us 1000; } > "$out/bench_copyteam.txt" 2>&1
  cat "$out/bench_copyteam.txt"
  for ex in matmul dynamic_shared local_array constant_memory barriers smart half_axpy; do
    tmo 20 build-gpu/examples/example_$ex --backend cuda
  done > "$out/examples.txt" 2>&1; cat "$out/examples.txt"
  if valgrind --version >/dev/null 2>&1; then
    (cd /tmp && tmo 90 valgrind --tool=callgrind --toggle-collect=fastpath_loop \
      "$root/build-gpu/bench/bench_alloc" --backend cuda --fastpath-only 100000 2>&1 | grep Collected) >> "$out/bench_alloc.txt" 2>&1
  fi
}

do_peers() {
  need_build
  PYTHONUNBUFFERED=1 timeout 480 python3 bench/gpu/peers.py > "$out/peers.txt" 2>&1
  echo "peers exit $?"
  tail -30 "$out/peers.txt"
  # The Python binding's per-call overhead against numba-cuda and CuPy (issue 15).
  PYTHONPATH=python DEVARRAY_LIBRARY="$root/build-gpu/libdevarray.so" DV_BACKEND=cuda \
    timeout 90 python3 bench/python/bench_python.py --peers gpu --json > "$out/bench_python.txt" 2>&1
  echo "bench_python exit $?"
  tail -20 "$out/bench_python.txt"
}

# AMD GPUs (issue 26): the HIP backend on the real runtime, never the test
# double (-DDV_HIP_DOUBLE=OFF), in a build of its own; one call, 560 s.  No
# AMD machine has been lent so far (the device tool offers NVIDIA GPUs only):
# on one, this step is the whole of what to run.
do_hip() {
  if [ ! -e /dev/kfd ]; then
    echo "hip: no AMD GPU on this machine (/dev/kfd is missing): nothing run"
    return 0
  fi
  deadline=$(( $(date +%s) + 560 ))
  {
    echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
    echo "command: bench/gpu/run.sh hip"
    rocminfo 2>/dev/null | grep -E 'Marketing Name|Name: +gfx' | sort -u
    hipconfig --version 2>/dev/null; echo
    uname -a
  } > "$out/hip_env.txt" 2>&1
  cat "$out/hip_env.txt"
  if ! tmo 120 cmake -S . -B build-hip -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDV_HIP_DOUBLE=OFF > "$out/hip_build.txt" 2>&1 ||
     ! tmo 300 cmake --build build-hip -j"$jobs" >> "$out/hip_build.txt" 2>&1; then
    tail -30 "$out/hip_build.txt"
    echo "hip build failed: stopping"
    return 1
  fi
  # The HIP entries: every device suite as *.hip / *.hip-pool, and hip.*.
  tmo 300 ctest --test-dir build-hip -R '[.]hip(-pool)?$|^hip[.]' -j4 --output-on-failure --timeout 120 \
    > "$out/hip_ctest.txt" 2>&1
  echo "hip ctest exit $?"
  tail -12 "$out/hip_ctest.txt"
  tmo 60 build-hip/bench/bench_alloc --backend hip > "$out/hip_bench_alloc.txt" 2>&1; tail -14 "$out/hip_bench_alloc.txt"
  tmo 60 build-hip/bench/bench_kernels --backend hip --n 2048 > "$out/hip_bench_kernels.txt" 2>&1
  cat "$out/hip_bench_kernels.txt"
  tmo 40 build-hip/devarray bench --backend hip --json > "$out/hip_devarray_bench.json" 2>/dev/null
  for ex in matmul dynamic_shared local_array constant_memory barriers smart half_axpy wave_reduce; do
    tmo 20 build-hip/examples/example_$ex --backend hip
  done > "$out/hip_examples.txt" 2>&1; cat "$out/hip_examples.txt"
}

deps || exit 1
case "$step" in
  build) do_build ;;
  tests) do_tests ;;
  memcheck) do_memcheck ;;
  bench) do_bench ;;
  peers) do_peers ;;
  hip) do_hip ;;
  all) do_build; do_tests; do_memcheck; do_bench; do_peers ;;
  *) echo "usage: bench/gpu/run.sh build|tests|memcheck|bench|peers|hip|all"; exit 2 ;;
esac
echo "logs in $out"
