#!/bin/sh
# readme_test.sh CHECK EXAMPLE VARIANT: run the README's program (built from
# the README by the build) on one backend variant, as the device suites name
# them: host, host-staged, host-pool, opencl, opencl-pool, cuda, cuda-pool.
# A backend this machine lacks is skipped (exit 77), never passed.
set -u
check="$1"
example="$2"
variant="$3"
case "$variant" in
  *-pool) export DV_BACKEND="${variant%-pool}" DV_MEMORY_MANAGER=pool ;;
  host-staged) export DV_BACKEND=host DV_HOST_STRIDED=off ;;
  *) export DV_BACKEND="$variant" ;;
esac
reason=$("$check")
status=$?
if [ "$status" != 0 ]; then
  if [ "$status" = 77 ]; then
    echo "SKIPPED: suite readme on backend $variant: $reason"
  else
    echo "$reason"
  fi
  exit "$status"
fi
echo "suite readme on backend $variant: 1 tests"
out=$("$example")
status=$?
echo "$out"
if [ "$status" != 0 ]; then
  echo "FAIL: the README program exited with status $status"
  exit 1
fi
case "$out" in
  *"out = {2, 6, 10}"*) ;;
  *) echo "FAIL: the README program did not print out = {2, 6, 10}"; exit 1 ;;
esac
