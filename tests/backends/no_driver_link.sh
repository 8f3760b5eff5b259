#!/bin/sh
# The library must not depend on any GPU driver at link time (they are
# dlopen'd), and `devarray info` must explain a missing CUDA driver and say
# what it found of AMD's HIP runtime (never "available": that backend is not
# complete yet, issue 26).
set -eu
lib="$1"
tool="$2"
needed=$(readelf -d "$lib" | grep NEEDED || true)
echo "$needed"
if echo "$needed" | grep -Eiq "cuda|nvidia|OpenCL|nvrtc|amdhip|hiprtc|rocm"; then
  echo "FAIL: $lib links a GPU driver"; exit 1
fi
if nm -D --undefined-only "$lib" | grep -Eq " (cu[A-Z]|cl[A-Z]|hip[A-Z])"; then
  echo "FAIL: $lib has undefined driver symbols:"; nm -D --undefined-only "$lib" | grep -E " (cu[A-Z]|cl[A-Z]|hip[A-Z])"; exit 1
fi
info=$("$tool" info)
line=$(echo "$info" | grep -E "^  cuda " || true)
echo "$line"
case "$line" in
  *"cuda    available"*) echo "a CUDA driver is present here" ;;
  *"libcuda.so.1"*|*"no device"*|*"cuInit"*) echo "devarray info explains the missing CUDA driver" ;;
  *) echo "FAIL: devarray info gives no reason for cuda"; exit 1 ;;
esac
line=$(echo "$info" | grep -E "^  hip " || true)
echo "$line"
case "$line" in
  *"hip     unavailable: "*"libamdhip64"*) echo "devarray info says what it found of the HIP runtime" ;;
  *) echo "FAIL: devarray info gives no reason for hip"; exit 1 ;;
esac
echo "no link-time driver dependency"
