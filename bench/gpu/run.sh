#!/bin/sh
# The CUDA backend on a lent GPU machine in ONE call of the device tool
# (bench/gpu/README.md says how to call it and how to read its files):
#
#   bench/gpu/fetch-deps.sh        HERE first (needs Debian's registry): the
#                                  .debs a bare CUDA image lacks, into .gpu-deps/
#   bench/gpu/run.sh               THERE, carry [".gpu-deps"], timeout_s 540:
#                                  environment, build (assertions on), the CUDA
#                                  CTest entries, a short bench_cuda and
#                                  bench_kernels, one compute-sanitizer memcheck
#                                  pass; under one deadline of 480 s; 7 files
#   bench/gpu/run.sh dry           the same here, on the CUDA driver test double
#                                  (no GPU), to keep the script from rotting
#   bench/gpu/run.sh hip           the same shape for an AMD GPU (ROCm)
#   bench/gpu/run.sh hip-dry       that one here, on the HIP runtime's test double
#
# Longer steps, opt-in, for a lease that allows more than one call (each
# needs the build the one step leaves in build-gpu/ on the same, still warm,
# machine; on a fresh one they say so and exit 2):
#
#   bench/gpu/run.sh tests         the whole suite
#   bench/gpu/run.sh memcheck      compute-sanitizer memcheck on every CUDA suite
#   bench/gpu/run.sh bench         the whole transfer sweep (1 GiB), small calls,
#                                  allocation, kernels, the copy team, examples
#   bench/gpu/run.sh peers         numba-cuda, CuPy, PyTorch on the same machine
#   bench/gpu/run.sh build         configure and build build-gpu/ only
#
# Variables: OUT (where the files go; the device tool sets it; else
# bench/results/gpu-DATE, or BUILD/out for dry), DV_GPU_DEADLINE (seconds,
# at most and by default 480), DV_GPU_BUILD (the build folder; build-gpu,
# build-gpu-dry for dry, build-hip for hip), DV_GPU_JOBS (parallel jobs).
set -u
cd "$(dirname "$0")/../.."
root=$PWD
mode="${1:-check}"
t0=$(date +%s)
jobs=${DV_GPU_JOBS:-$(nproc)}
. "$root/bench/gpu/deps.sh"

case "$mode" in
  dry) build="${DV_GPU_BUILD:-build-gpu-dry}" ;;
  hip) build="${DV_GPU_BUILD:-build-hip}" ;;
  hip-dry) build="${DV_GPU_BUILD:-build-hip-dry}" ;;
  *) build="${DV_GPU_BUILD:-build-gpu}" ;;
esac
case "$build" in /*) ;; *) build="$root/$build" ;; esac
if [ -n "${OUT:-}" ]; then out=$OUT
elif [ "$mode" = dry ] || [ "$mode" = hip-dry ]; then out="$build/out"
else out="$root/bench/results/gpu-$(date -u +%Y%m%d-%H%M)"
fi
# Nothing to run on this machine: said, and no file written.
if [ "$mode" = hip ] && [ ! -e /dev/kfd ]; then
  echo "hip: no AMD GPU on this machine (/dev/kfd is missing): nothing run ('bench/gpu/run.sh hip-dry' plays it on the HIP test double)"
  exit 0
fi
if [ "$mode" = check ] && ! { command -v nvidia-smi >/dev/null 2>&1 || [ -e /dev/nvidiactl ] ||
  [ -e /proc/driver/nvidia/version ] || ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1'; }; then
  echo "no NVIDIA driver on this machine (no nvidia-smi, no libcuda.so.1): nothing run; 'bench/gpu/run.sh dry' runs the same on the test double"
  exit 1
fi
mkdir -p "$out" || exit 1

# ---------------------------------------------------------------- deadline
budget=${DV_GPU_DEADLINE:-480}
case "$budget" in '' | *[!0-9]*) budget=480 ;; esac
[ "$budget" -gt 480 ] && budget=480
deadline=$((t0 + budget))
summary="$out/summary.txt"
note() { echo "$*" | tee -a "$summary"; }
left() { echo $((deadline - $(date +%s))); }
# part NAME CAP MIN [RESERVE]: starts the part NAME when at least MIN
# seconds remain after RESERVE (kept for the parts after it; at most half of
# what remains); its limit (part_end) is CAP seconds or what remains less
# RESERVE, whichever is less.
# A part that cannot start says "NAME: not run (time)" and returns 1.
part() {
  p_name=$1
  p_left=$(left)
  p_res=${4:-0}
  # The reserve is at most half of what is left (a short deadline still runs
  # each part, shorter).
  [ "$p_res" -gt $((p_left / 2)) ] && p_res=$((p_left / 2))
  p_lim=$((p_left - p_res))
  [ "$p_lim" -gt "$2" ] && p_lim=$2
  if [ "$p_lim" -lt "$3" ]; then
    note "$p_name: not run (time)"
    return 1
  fi
  p_start=$(date +%s)
  part_end=$((p_start + p_lim))
}
# pleft: seconds left of the current part (at least 1).
pleft() {
  l=$((part_end - $(date +%s)))
  [ "$l" -lt 1 ] && l=1
  echo "$l"
}
# done_part STATUS-TEXT: the part's line in summary.txt.
done_part() { note "$p_name: $* ($(($(date +%s) - p_start)) s of $p_lim)"; }
# tmo CMD...: CMD under what is left of the part (exit 124 when it ran out).
tmo() { timeout -k 5 "$(pleft)" "$@"; }

# ------------------------------------------------------------ dependencies
# The carried .debs (bench/gpu/fetch-deps.sh) into a private prefix, and
# PATH, CPATH, LIBRARY_PATH, LD_LIBRARY_PATH, PKG_CONFIG_PATH for them; where
# none were carried, the machine's own cmocka, libffi and pkg-config.
deps() {
  if ls "$root/.gpu-deps"/*.deb >/dev/null 2>&1; then
    gpu_deps_env "$root/.gpu-deps" "$root/.gpu-deps/root" || return 1
    echo "deps: carried ($(cd "$root/.gpu-deps" && ls *.deb | tr '\n' ' '))"
  elif pkg-config --exists cmocka libffi 2>/dev/null; then
    echo "deps: the machine's own (no .gpu-deps carried)"
  else
    echo "deps: no cmocka/libffi/pkg-config here: run bench/gpu/fetch-deps.sh where Debian's registry is reachable and name .gpu-deps in the call's carry"
    return 1
  fi
}

# NVRTC for the kernel suites: where ldconfig does not list it, the
# toolkit's copy, else the pip wheel's (nvidia-cuda-nvrtc).
find_nvrtc() {
  if [ -z "${DV_NVRTC_LIBRARY:-}" ] && ! ldconfig -p 2>/dev/null | grep -q 'libnvrtc\.so'; then
    wheel=$(python3 -c 'import glob, os, nvidia.cuda_nvrtc as m; print(" ".join(sorted(glob.glob(os.path.join(list(m.__path__)[0], "lib", "libnvrtc.so*")))))' 2>/dev/null)
    for f in /usr/local/cuda/lib64/libnvrtc.so.13 /usr/local/cuda/lib64/libnvrtc.so.12 /usr/local/cuda/lib64/libnvrtc.so $wheel; do
      if [ -e "$f" ]; then DV_NVRTC_LIBRARY="$f"; export DV_NVRTC_LIBRARY; break; fi
    done
  fi
}

find_sanitizer() {
  for s in "${DV_GPU_SANITIZER:-}" "$(command -v compute-sanitizer 2>/dev/null)" \
    /usr/local/cuda/bin/compute-sanitizer /usr/local/cuda/compute-sanitizer/compute-sanitizer; do
    if [ -n "$s" ] && [ -x "$s" ]; then echo "$s"; return 0; fi
  done
  return 1
}

# Everything env.txt says about the machine: driver, NVRTC, tools.
capture_env() {
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "command: bench/gpu/run.sh $mode (deadline ${budget} s)"
  echo "commit: $(git -C "$root" rev-parse HEAD 2>/dev/null || echo 'unknown (no .git)')"
  echo "uname: $(uname -a)"
  echo "cpus: $(nproc); $(grep -m1 'model name' /proc/cpuinfo 2>/dev/null)"
  echo "memory: $(free -g 2>/dev/null | awk '/^Mem/ {print $2 " GiB"}')"
  [ -r /etc/os-release ] && echo "os: $(. /etc/os-release && echo "$PRETTY_NAME")"
  echo "--- driver"
  if command -v nvidia-smi >/dev/null 2>&1; then
    timeout 20 nvidia-smi --query-gpu=name,driver_version,memory.total,pci.bus_id,compute_cap --format=csv 2>&1
    timeout 20 nvidia-smi 2>&1 | grep -m1 'CUDA Version'
  else
    echo "nvidia-smi: not found"
  fi
  [ -r /proc/driver/nvidia/version ] && head -1 /proc/driver/nvidia/version
  ldconfig -p 2>/dev/null | grep -E 'libcuda\.so|libnvrtc\.so' | sed 's/^/ldconfig: /'
  echo "nvrtc: ${DV_NVRTC_LIBRARY:-as ldconfig finds it}"
  echo "--- tools"
  for t in cc gcc c++ cmake make ninja pkg-config python3 nvcc compute-sanitizer dpkg-deb valgrind hipcc rocminfo; do
    p=$(command -v $t 2>/dev/null) || { echo "$t: not found"; continue; }
    case $t in
      nvcc) v=$(nvcc --version 2>&1 | tail -1) ;;
      compute-sanitizer | rocminfo) v= ;;
      *) v=$($t --version 2>&1 | head -1) ;;
    esac
    echo "$t: $p $v"
  done
  s=$(find_sanitizer) && echo "sanitizer: $s $($s --version 2>&1 | grep -m1 -i version)" || echo "sanitizer: none"
  echo "--- environment"
  env | grep -E '^(CUDA|NVIDIA|DV_|LD_LIBRARY_PATH|CPATH|LIBRARY_PATH|PKG_CONFIG_PATH|PATH)=' | sort
}

# configure and build $build: RelWithDebInfo without -DNDEBUG (the
# assertions, the param-info cross-check of src/kernel/launch.c, stay on);
# $1: ON (the driver test double) or OFF (the real driver).  Keeps going past
# a target that fails, so one broken target costs its own tests only.
configure_build() {
  dbl=$1
  log=$2
  echo "== configure $(date -u +%H:%M:%S)" >"$log"
  # python.cuda (a build against the real driver): the python3 on PATH (the
  # GPU image's has NumPy and pytest; CMake's own search takes /usr/bin's).
  py=
  [ "$dbl" = OFF ] && p3=$(command -v python3 2>/dev/null) && py="-DDV_PYTHON3=$p3"
  if ! tmo cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O2 -g" "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g" \
    -DDV_CUDA_DOUBLE="$dbl" -DDV_WERROR=OFF $py >>"$log" 2>&1; then
    return 2
  fi
  if grep -rqs -- '-DNDEBUG' "$build/CMakeFiles/devarray_objects.dir/flags.make"; then
    echo "assertions: OFF (-DNDEBUG in the flags)" >>"$log"
  else
    echo "assertions: on" >>"$log"
  fi
  echo "== build -j$jobs $(date -u +%H:%M:%S)" >>"$log"
  k="-k"
  grep -qs 'CMAKE_GENERATOR:INTERNAL=Ninja' "$build/CMakeCache.txt" && k="-k0"
  tmo cmake --build "$build" -j"$jobs" -- $k >>"$log" 2>&1
  rc=$?
  echo "== build exit $rc $(date -u +%H:%M:%S)" >>"$log"
  return $rc
}

# ------------------------------------------------------ the one step (CUDA)
one_step() {
  dry=$1
  rm -f "$out/env.txt" "$out/build.txt" "$out/ctest.txt" "$out/bench_cuda.txt" \
    "$out/bench_kernels.txt" "$out/memcheck.txt" "$summary"
  note "bench/gpu/run.sh $mode: deadline ${budget} s, files in $out"

  # 1. environment (env.txt)
  if part env 30 5; then
    d=$(deps 2>&1)
    drc=$?
    find_nvrtc
    { capture_env; echo "--- dependencies"; echo "$d"; } >"$out/env.txt" 2>&1
    drv=$(timeout 20 nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)
    done_part "${drv:-no nvidia-smi}; nvrtc ${DV_NVRTC_LIBRARY:-as ldconfig finds it}; $d"
    [ $drc -eq 0 ] || { note "build: not run (no dependencies)"; return 1; }
  fi

  # 2. build (build.txt): the double for dry, the real driver otherwise
  built=0
  if part build 300 60 150; then
    dbl=OFF
    [ "$dry" = 1 ] && dbl=ON
    configure_build $dbl "$out/build.txt"
    rc=$?
    if [ $rc -eq 2 ]; then done_part "configure FAILED (build.txt)"
    elif [ $rc -eq 0 ]; then built=1; done_part "ok, $(grep -m1 '^assertions' "$out/build.txt")"
    elif [ $rc -eq 124 ]; then built=1; done_part "over its limit: ran out of time (what was built is used)"
    else built=1; done_part "FAILED in some targets (kept going; $(grep -c 'error:' "$out/build.txt") errors, the first: $(grep -m1 'error:' "$out/build.txt"))"
    fi
  fi
  if [ $built = 0 ]; then
    for p in ctest bench_cuda bench_kernels memcheck; do note "$p: not run (no build)"; done
    return 1
  fi
  dbl_env=
  [ "$dry" = 1 ] && dbl_env="LD_LIBRARY_PATH=$build/tests/cudadouble${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  if [ -x "$build/devarray" ]; then
    { echo "--- devarray info (this build)"; timeout 20 env $dbl_env "$build/devarray" info 2>&1 | head -60; } >>"$out/env.txt"
  fi

  # 3. the CUDA CTest entries, in parallel (ctest.txt); --stop-time ends
  #    them, with ctest's own report, 10 s before the part's limit.
  if part ctest 240 30 120; then
    cj=$jobs
    [ "$cj" -gt 8 ] && cj=8
    stop=$(date -d "@$((part_end - 10))" +%H:%M:%S)
    tmo ctest --test-dir "$build" -R 'cuda' -E '^hip[.]' -j"$cj" --output-on-failure \
      --timeout 180 --stop-time "$stop" >"$out/ctest.txt" 2>&1
    rc=$?
    res=$(grep -E 'tests passed|tests failed' "$out/ctest.txt" | tail -1)
    failed=$(sed -n '/The following tests FAILED/,$p' "$out/ctest.txt" | grep -E '^[[:space:]]+[0-9]+ - ' | sed 's/^[[:space:]]*[0-9]* - //' | tr '\n' ';')
    skipped=$(grep -c '(Skipped)' "$out/ctest.txt")
    done_part "exit $rc: ${res:-no summary (timed out?)}; $skipped skipped${failed:+; FAILED: $failed}"
  fi

  # Line-buffered, so that a part stopped at its limit keeps what it printed.
  lb=
  command -v stdbuf >/dev/null 2>&1 && lb="stdbuf -oL"
  # 4. bench_cuda up to 256 MiB (bench_cuda.txt), bench_kernels (bench_kernels.txt)
  if part bench_cuda 100 20 70; then
    tmo env $dbl_env $lb "$build/bench/bench_cuda" --max 268435456 --trials 3 >"$out/bench_cuda.txt" 2>&1
    rc=$?
    done_part "exit $rc; $(grep -c -E '^(h2d|d2h)' "$out/bench_cuda.txt") transfer rows"
  fi
  if part bench_kernels 45 10 50; then
    # n = 512: the launch rows are what this part is for; the matmul rows'
    # plain C reference at n = 2048 alone takes most of a minute.
    tmo env $dbl_env $lb "$build/bench/bench_kernels" --backend cuda --n 512 --reps 5 >"$out/bench_kernels.txt" 2>&1
    rc=$?
    # a captured sequence of 10 small launches and copies replayed (issue 40)
    tmo env $dbl_env $lb "$build/bench/bench_graph" --backend cuda --batches 7 --reps 100 >>"$out/bench_kernels.txt" 2>&1
    grc=$?
    done_part "exit $rc, graphs $grc; $(grep -m1 'launch, queued' "$out/bench_kernels.txt" | tr -s ' '); $(grep -m1 'issue/replay' "$out/bench_kernels.txt")"
  fi

  # 5. one compute-sanitizer memcheck pass over the transfer and kernel
  #    suites (memcheck.txt).  --report-api-errors no: the CUDA API errors
  #    devarray provokes on purpose (cuModuleGetGlobal's NOT_FOUND for an
  #    unused constant, the OOM tests) are not memory errors.
  if part memcheck 170 30 5; then
    san=$(find_sanitizer)
    kind="compute-sanitizer"
    if [ -z "$san" ] && [ "$dry" = 1 ]; then
      san="$root/bench/gpu/sanitizer-standin.sh"
      kind="stand-in (no compute-sanitizer here: the suites run as the sanitizer would start them)"
    fi
    if [ -z "$san" ]; then
      echo "no compute-sanitizer found" >"$out/memcheck.txt"
      done_part "skipped: no compute-sanitizer"
    else
      : >"$out/memcheck.txt"
      res=
      for t in transfer kernels; do
        if [ "$(pleft)" -lt 15 ]; then res="$res $t: not run (time);"; continue; fi
        echo "== memcheck test_$t cuda ($kind) $(date -u +%H:%M:%S)" >>"$out/memcheck.txt"
        tmo env $dbl_env "$san" --tool memcheck --report-api-errors no --leak-check full \
          --error-exitcode 9 "$build/tests/test_$t" cuda >>"$out/memcheck.txt" 2>&1
        rc=$?
        echo "== exit $rc" >>"$out/memcheck.txt"
        errs=$(grep 'ERROR SUMMARY' "$out/memcheck.txt" | tail -1 | sed 's/.*ERROR SUMMARY: //')
        res="$res $t: exit $rc, ${errs:-no summary};"
      done
      # the planted write inside a pool segment (issue 40): found with the
      # pool's NVTX annotations (nvtx=on, the default), missed without them
      for nv in on off; do
        if [ "$(pleft)" -lt 10 ]; then res="$res overrun nvtx=$nv: not run (time);"; continue; fi
        echo "== memcheck test_nvtx overrun, nvtx=$nv ($kind) $(date -u +%H:%M:%S)" >>"$out/memcheck.txt"
        tmo env $dbl_env DV_NVTX=$nv "$san" --tool memcheck --error-exitcode 9 \
          "$build/tests/test_nvtx" overrun cuda >>"$out/memcheck.txt" 2>&1
        rc=$?
        echo "== exit $rc" >>"$out/memcheck.txt"
        res="$res overrun nvtx=$nv: exit $rc;"
      done
      done_part "$kind:$res"
    fi
  fi
  note "total: $(($(date +%s) - t0)) s of ${budget}"
  echo "--- tail of ctest.txt"
  tail -15 "$out/ctest.txt" 2>/dev/null
  echo "--- bench_cuda.txt"
  grep -E 'device|pinned|pageable' "$out/bench_cuda.txt" 2>/dev/null | head -40
  echo "logs in $out"
}

# ------------------------------------------------------- the one step (HIP)
# AMD GPUs (issue 26): the HIP backend on the real runtime, never the test
# double (-DDV_HIP_DOUBLE=OFF), in a build of its own, in the one step's
# shape: env, build, the HIP entries, bench_alloc and bench_kernels, 7 files.
# `hip-dry` plays it here on the HIP runtime's test double (tests/backends/hip/hipdouble:
# -DDV_HIP_DOUBLE=ON; hip.gfx_compile, three minutes of hipcc, left out).
one_step_hip() {
  hdry=$1
  rm -f "$out"/hip_*.txt "$summary"
  note "bench/gpu/run.sh $mode: deadline ${budget} s, files in $out"
  if [ "$hdry" = 0 ] && [ ! -e /dev/kfd ]; then
    note "hip: no AMD GPU on this machine (/dev/kfd is missing): nothing run ('bench/gpu/run.sh hip-dry' plays it on the HIP test double)"
    return 0
  fi
  hdbl=OFF hexcl='^$'
  [ "$hdry" = 1 ] && hdbl=ON hexcl='gfx_compile'
  hip_env=
  [ "$hdry" = 1 ] && hip_env="LD_LIBRARY_PATH=$build/tests/hipdouble${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  if part env 30 5; then
    d=$(deps 2>&1)
    drc=$?
    {
      capture_env
      echo "--- rocm"
      rocminfo 2>/dev/null | grep -E 'Marketing Name|Name: +gfx' | sort -u
      hipconfig --version 2>/dev/null; echo
      echo "--- dependencies"; echo "$d"
    } >"$out/hip_env.txt" 2>&1
    done_part "$d"
    [ $drc -eq 0 ] || { note "build: not run (no dependencies)"; return 1; }
  fi
  built=0
  if part build 300 60 150; then
    echo "== configure" >"$out/hip_build.txt"
    if tmo cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O2 -g" \
      -DDV_HIP_DOUBLE=$hdbl -DDV_WERROR=OFF >>"$out/hip_build.txt" 2>&1; then
      tmo cmake --build "$build" -j"$jobs" -- -k >>"$out/hip_build.txt" 2>&1
      rc=$?
      built=1
      if grep -qs -- '-DNDEBUG' "$build/CMakeFiles/devarray_objects.dir/flags.make"; then a="assertions: OFF"; else a="assertions: on"; fi
      done_part "exit $rc, $a"
    else
      done_part "configure FAILED (hip_build.txt)"
    fi
  fi
  if [ $built = 0 ]; then
    for p in ctest bench_alloc bench_kernels; do note "$p: not run (no build)"; done
    return 1
  fi
  if part ctest 240 60 60; then
    stop=$(date -d "@$((part_end - 10))" +%H:%M:%S)
    cj=$jobs
    [ "$cj" -gt 8 ] && cj=8
    tmo ctest --test-dir "$build" -R '[.]hip(-pool)?$|^hip[.]' -E "$hexcl" -j"$cj" --output-on-failure --timeout 180 \
      --stop-time "$stop" >"$out/hip_ctest.txt" 2>&1
    rc=$?
    done_part "exit $rc: $(grep -E 'tests passed|tests failed' "$out/hip_ctest.txt" | tail -1)"
  fi
  if part bench_alloc 40 10 25; then
    tmo env $hip_env "$build/bench/bench_alloc" --backend hip >"$out/hip_bench_alloc.txt" 2>&1
    done_part "exit $?"
  fi
  if part bench_kernels 40 10 5; then
    tmo env $hip_env "$build/bench/bench_kernels" --backend hip --n 512 --reps 5 >"$out/hip_bench_kernels.txt" 2>&1
    done_part "exit $?; $(grep -m1 'launch, queued' "$out/hip_bench_kernels.txt" | tr -s ' ')"
  fi
  note "total: $(($(date +%s) - t0)) s of ${budget}"
}

# ------------------------------------------------- the longer, opt-in steps
need_build() {
  if [ ! -x "$build/tests/test_transfer" ]; then
    echo "no build in $build (a fresh machine?): run 'bench/gpu/run.sh' (or 'run.sh build') in this lease first"
    exit 2
  fi
}

# Seconds left of this step's 560 (so that it ends inside a 10-minute call
# whatever its parts take), at most $1; 0 when nothing is left.
sleft() {
  l=$((sdeadline - $(date +%s)))
  [ "$l" -gt "$1" ] && l=$1
  [ "$l" -gt 0 ] || l=0
  echo "$l"
}
# timeout for one part: its own limit or what is left, whichever is less;
# a part with nothing left is not started, and says so.
stmo() {
  t=$(sleft "$1")
  shift
  if [ "$t" -eq 0 ]; then echo "not run (time): $*"; return 124; fi
  timeout -k 5 "$t" "$@"
}

do_build() {
  capture_env >"$out/env.txt" 2>&1
  part_end=$(($(date +%s) + 540))
  if ! configure_build OFF "$out/build.txt"; then
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
  timeout 540 scripts/run-tests "$build" -j4 --output-on-failure --timeout 300 >"$out/ctest_all.txt" 2>&1
  echo "ctest exit $?"
  tail -12 "$out/ctest_all.txt"
}

do_memcheck() {
  need_build
  san=$(find_sanitizer) || { echo "no compute-sanitizer"; return 0; }
  start=$(date +%s)
  for t in transfer views records memory hostmem streams errors threads cuda_double kernels; do
    [ -x "$build/tests/test_$t" ] || continue
    # 60 s a suite, and nothing started after 480 s.
    [ $(($(date +%s) - start)) -lt 480 ] || { echo "== test_$t: not run (time)"; continue; }
    echo "== memcheck test_$t cuda"
    timeout -k 5 60 "$san" --tool memcheck --report-api-errors no --leak-check full --error-exitcode 9 \
      "$build/tests/test_$t" cuda 2>&1 | grep -E 'ERROR SUMMARY|PASSED|FAILED|Invalid|leak' | head -20
    echo "exit $? (124: over its 60 s)"
  done >"$out/memcheck_all.txt" 2>&1
  cat "$out/memcheck_all.txt"
}

do_bench() {
  need_build
  sdeadline=$(($(date +%s) + 560))
  {
    echo "== bench_cuda (1 GiB)"
    stmo 240 "$build/bench/bench_cuda"
    echo "== devarray bench --backend cuda --json"
    stmo 60 "$build/devarray" bench --backend cuda --json
    echo "== bench_alloc"
    stmo 60 "$build/bench/bench_alloc" --backend cuda
    echo "== bench_smart"
    stmo 60 "$build/bench/bench_smart" --backend cuda --n 1048576 --iters 50 --reps 7
    # The copy team of the pageable staging path (issue 13): 1..8 threads back to back, and 1..4
    # with the workers asleep between copies (docs/benchmarks.md, "Copy team").
    echo "== bench_copyteam, nproc $(nproc)"
    lscpu | grep -E 'Model name|^Socket|NUMA node\(s\)'
    stmo 60 "$build/bench/bench_copyteam" --quick --threads 8
    stmo 30 "$build/bench/bench_copyteam" --quick --threads 4 --gap-us 1000
    for ex in matmul dynamic_shared local_array constant_memory barriers smart half_axpy; do
      echo "== example_$ex"
      stmo 20 "$build/examples/example_$ex" --backend cuda
    done
  } >"$out/bench_all.txt" 2>&1
  grep -E '^==|pinned|pageable|not run' "$out/bench_all.txt" | head -80
}

do_peers() {
  need_build
  {
    PYTHONUNBUFFERED=1 timeout 420 python3 bench/gpu/peers.py
    echo "peers exit $?"
    # The Python binding's per-call overhead against numba-cuda and CuPy (issue 15).
    PYTHONPATH=python DEVARRAY_LIBRARY="$build/libdevarray.so" DV_BACKEND=cuda \
      timeout 90 python3 bench/python/bench_python.py --peers gpu --json
    echo "bench_python exit $?"
  } >"$out/peers.txt" 2>&1
  tail -40 "$out/peers.txt"
}

case "$mode" in
  check) one_step 0 ;;
  dry) one_step 1 ;;
  hip) one_step_hip 0 ;;
  hip-dry) one_step_hip 1 ;;
  build | tests | memcheck | bench | peers)
    deps || exit 1
    find_nvrtc
    "do_$mode"
    echo "logs in $out"
    ;;
  *)
    echo "usage: bench/gpu/run.sh [check|dry|hip|hip-dry|build|tests|memcheck|bench|peers] (bench/gpu/README.md)"
    exit 2
    ;;
esac
