#!/bin/sh
# scripts/check-layers fails on a planted violation of each of its rules, and passes on the
# tree as it is.  Each case copies the tree's src/, include/, tools/, python/ and the script
# into a temporary folder, plants one violation there (never in the real files), and expects
# exit status 1 with the rule's message.
#
#   sh tests/tools/check_layers_test.sh [CC]
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
cc=${1:-cc}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0
failed=0

fresh() {
  rm -rf "$tmp/tree"
  mkdir -p "$tmp/tree"
  (cd "$root" && cp -r scripts src include tools python "$tmp/tree/")
  find "$tmp/tree" -name __pycache__ -prune -exec rm -rf {} +
}

# expect NAME STATUS PATTERN [OBJECTS...]: check-layers on the planted copy exits STATUS
# and (for 1) prints a line matching PATTERN.
expect() {
  name=$1 want=$2 pattern=$3
  shift 3
  out=$(sh "$tmp/tree/scripts/check-layers" "$@" 2>&1)
  got=$?
  if [ "$got" = "$want" ] && { [ "$want" = 0 ] || echo "$out" | grep -q -- "$pattern"; }; then
    echo "ok: $name"
    passed=$((passed + 1))
  else
    echo "FAILED: $name (exit $got, wanted $want and /$pattern/):"
    echo "$out" | sed 's/^/    /'
    failed=$((failed + 1))
  fi
}

fresh
expect "the tree as it is" 0 ""

fresh
printf '#include "../array/array.h"\n' >> "$tmp/tree/src/core/status.c"
expect "an include that runs up a layer" 1 "src/core/status.c (layer 8) uses src/array/array.h"

fresh
printf '#include "../opencl/opencl_internal.h"\n' >> "$tmp/tree/src/backends/host/host.c"
expect "a backend including another backend" 1 "another backend"

fresh
printf '#include "../memory/pool_internal.h"\n' >> "$tmp/tree/src/array/array.c"
expect "a folder's private header included from another folder" 1 "pool_internal.h is private to src/memory/"

fresh
printf '#include "nowhere.h"\n' >> "$tmp/tree/src/array/array.c"
expect "an include that is not a file of the tree" 1 "is not a file of this tree"

fresh
printf '#include "../../include/devarray.h"\n' >> "$tmp/tree/src/mpi/comm.c"
printf '#include "../core/core.h"\n' >> "$tmp/tree/src/mpi/comm.c"
expect "libdevarray_mpi using the library's insides" 1 "src/mpi/ sits above the public API"

fresh
i=0
while [ $i -lt 801 ]; do echo "/* line */"; i=$((i + 1)); done >> "$tmp/tree/src/stream/stream.c"
expect "a file past 800 lines" 1 "src/stream/stream.c has [0-9]* lines (more than 800"

fresh
i=0
while [ $i -lt 801 ]; do echo "# line"; i=$((i + 1)); done > "$tmp/tree/python/devarray/_long.py"
expect "a Python module past 800 lines" 1 "python/devarray/_long.py has"

# Calls between objects (nm): one from the core up to the array layer, and two files of
# one layer calling each other.
if command -v nm > /dev/null 2>&1 && command -v "$cc" > /dev/null 2>&1; then
  fresh
  o="$tmp/obj"
  mkdir -p "$o/src/core" "$o/src/array"
  printf 'int dv_planted_array(void) { return 1; }\n' > "$tmp/a.c"
  printf 'int dv_planted_array(void);\nint dv_planted_core(void) { return dv_planted_array(); }\n' > "$tmp/c.c"
  "$cc" -c "$tmp/a.c" -o "$o/src/array/planted_a.c.o" && "$cc" -c "$tmp/c.c" -o "$o/src/core/planted_c.c.o"
  expect "a call that runs up a layer" 1 "calls dv_planted_array" "$o/src/array/planted_a.c.o" "$o/src/core/planted_c.c.o"

  mkdir -p "$o/src/stream"
  printf 'int dv_planted_y(void);\nint dv_planted_x(int n) { return n ? dv_planted_y() : 0; }\n' > "$tmp/x.c"
  printf 'int dv_planted_x(int);\nint dv_planted_y(void) { return dv_planted_x(0); }\n' > "$tmp/y.c"
  "$cc" -c "$tmp/x.c" -o "$o/src/stream/planted_x.c.o" && "$cc" -c "$tmp/y.c" -o "$o/src/stream/planted_y.c.o"
  expect "two files calling each other in a circle" 1 "in a circle" "$o/src/stream/planted_x.c.o" "$o/src/stream/planted_y.c.o"
else
  echo "skipped: the cases of calls between objects (nm or $cc not found)"
fi

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
