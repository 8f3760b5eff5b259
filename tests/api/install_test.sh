#!/bin/sh
# install_test.sh SOURCE WORK EXAMPLE: build devarray (release, no
# sanitizers), install it into WORK/prefix, then build the README's program
# (EXAMPLE) against the installed copy as a user would (pkg-config, shared
# and static; find_package, shared and static) and run each one, with no
# LD_LIBRARY_PATH: the way the README says to link is the way that is tested.
# WORK persists under the build tree, so a second run rebuilds only what
# changed.
set -eu
src="$1"
work="$2"
example="$3"
prefix="$work/prefix"
mkdir -p "$work"
quiet="--log-level=ERROR"
# shellcheck disable=SC2086
cmake -S "$src" -B "$work/build" $quiet -DCMAKE_BUILD_TYPE=Release -DDV_BUILD_TESTS=OFF \
  -DCMAKE_INSTALL_PREFIX="$prefix" >/dev/null
sh "$src/scripts/build" "$work/build" -j2 --target devarray devarray_static devarray_tool
# libdevarray_mpi is configured (and then installed) only where MPI was found.
mpi=0
if [ -f "$work/build/devarray-mpi.pc" ]; then
  mpi=1
  sh "$src/scripts/build" "$work/build" -j2 --target devarray_mpi
fi
# The build tree's own devarray.pc names this build's library and the
# source's headers: a program builds and runs against it without installing.
tree_pc=$(PKG_CONFIG_PATH="$work/build" pkg-config --cflags --libs devarray)
# shellcheck disable=SC2086
cc -std=c11 "$example" $tree_pc -Wl,-rpath,"$work/build" -o "$work/tree_shared"
DV_BACKEND=host "$work/tree_shared" >/dev/null
for dir in $(PKG_CONFIG_PATH="$work/build" pkg-config --variable=libdir devarray) \
  $(PKG_CONFIG_PATH="$work/build" pkg-config --variable=includedir devarray); do
  [ -d "$dir" ] || { echo "FAIL: the build tree's devarray.pc names $dir, which does not exist"; exit 1; }
done
if [ "$mpi" = 1 ]; then
  PKG_CONFIG_PATH="$work/build" pkg-config --cflags --libs devarray-mpi >/dev/null
fi
cmake --install "$work/build" >/dev/null
test -f "$prefix/include/devarray.h"
test -f "$prefix/include/devarray_dlpack.h"
pc=$(find "$prefix" -name devarray.pc)
export PKG_CONFIG_PATH="${pc%/devarray.pc}"
libdir=$(pkg-config --variable=libdir devarray)
ls "$libdir"/libdevarray.so.0 "$libdir"/libdevarray.a "$libdir"/cmake/devarray/devarrayConfig.cmake >/dev/null

# stale OUT INPUT...: OUT is missing or older than one of the inputs.
stale() {
  out="$1"
  shift
  [ -e "$out" ] || return 0
  for f in "$@"; do [ "$f" -nt "$out" ] && return 0; done
  return 1
}
inputs="$example $pc $prefix/include/devarray.h $libdir/libdevarray.a $libdir/libdevarray.so.0"
# Shared, as the README says for a prefix outside the system's: an rpath to libdir.
# shellcheck disable=SC2086
if stale "$work/pc_shared" $inputs; then
  cc -std=c11 "$example" $(pkg-config --cflags --libs devarray) -Wl,-rpath,"$libdir" -o "$work/pc_shared"
fi
# Static: the archive, then the private libraries pkg-config lists.
# shellcheck disable=SC2086
if stale "$work/pc_static" $inputs; then
  cc -std=c11 "$example" $(pkg-config --cflags devarray) -o "$work/pc_static" "$libdir/libdevarray.a" \
    $(pkg-config --static --libs-only-l devarray | sed 's/-ldevarray//')
fi
# shellcheck disable=SC2086
cmake -S "$src/tests/api/consumer" -B "$work/consumer" $quiet -DCMAKE_PREFIX_PATH="$prefix" \
  -DEXAMPLE="$example" >/dev/null
sh "$src/scripts/build" "$work/consumer"

unset LD_LIBRARY_PATH
export DV_BACKEND=host
for p in "$work/pc_shared" "$work/pc_static" "$work/consumer/consumer_shared" "$work/consumer/consumer_static"; do
  "$p" >/dev/null
done
# The shared programs load the installed library, found through their rpath.
installed=$(readlink -f "$libdir/libdevarray.so.0")
for p in pc_shared consumer/consumer_shared; do
  loaded=$(ldd "$work/$p" | sed -n 's/^[[:space:]]*libdevarray\.so\.0 => \(.*\) (0x.*$/\1/p')
  if [ -z "$loaded" ] || [ "$(readlink -f "$loaded")" != "$installed" ]; then
    echo "FAIL: $p loads '${loaded:-nothing}', not $installed"
    exit 1
  fi
done
# The static programs really are static in devarray; the shared ones are not.
# (Not `! cmd`, which set -e ignores.)
for p in consumer/consumer_shared pc_shared; do
  if nm "$work/$p" | grep -q " T dv_context_create"; then
    echo "FAIL: $p contains the library"
    exit 1
  fi
done
nm "$work/consumer/consumer_static" | grep -q " T dv_context_create"
nm "$work/pc_static" | grep -q " T dv_context_create"
# The Python package (issue 15) imports from the install and loads the installed library,
# found through _installed.py (no DEVARRAY_LIBRARY); skipped where NumPy is missing.
if /usr/bin/python3 -c "import numpy" 2>/dev/null; then
  pydir=$(dirname "$(find "$prefix" -path '*/site-packages/devarray/__init__.py' | head -n 1)")
  test -f "$pydir/_installed.py"
  pylib=$(cd / && env -u DEVARRAY_LIBRARY PYTHONPATH="$(dirname "$pydir")" /usr/bin/python3 -c \
    "import devarray, numpy as np; d = devarray.to_device(np.arange(3.0)); assert (d.copy_to_host() == np.arange(3.0)).all(); print(devarray.library_path)")
  # the compiled per-call paths, where the build made them, load from the installed package
  if ls "$pydir"/_speedups*.so >/dev/null 2>&1; then
    (cd / && env -u DEVARRAY_LIBRARY -u DEVARRAY_SPEEDUPS PYTHONPATH="$(dirname "$pydir")" /usr/bin/python3 -c \
      "import os, devarray._lib as l; assert l.speedups is not None and os.path.dirname(l.speedups.__file__) == os.path.dirname(l.__file__), l.speedups") ||
      { echo "FAIL: the installed Python package did not load its _speedups"; exit 1; }
  fi
  if [ "$(readlink -f "$pylib")" != "$installed" ]; then
    echo "FAIL: the installed Python package loads '$pylib', not $installed"
    exit 1
  fi
fi
# The installed tool runs as installed (it links the static library).
"$prefix/bin/devarray" info >/dev/null
echo "install test: pkg-config (shared, static) and find_package (shared, static) consumers and the Python package ran from $prefix"

# libdevarray_mpi: a pkg-config and a find_package consumer, run as MPI
# singletons (one rank, no mpirun).
if [ "$mpi" = 1 ]; then
  test -f "$prefix/include/devarray_mpi.h"
  mpi_example="$src/tests/mpi/consumer/consumer_mpi.c"
  # shellcheck disable=SC2086
  if stale "$work/pc_mpi" "$mpi_example" "$libdir/libdevarray_mpi.so.0"; then
    cc -std=c11 "$mpi_example" $(pkg-config --cflags --libs devarray-mpi) -Wl,-rpath,"$libdir" -o "$work/pc_mpi"
  fi
  # shellcheck disable=SC2086
  cmake -S "$src/tests/mpi/consumer" -B "$work/consumer_mpi" $quiet -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
  sh "$src/scripts/build" "$work/consumer_mpi"
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  for p in "$work/pc_mpi" "$work/consumer_mpi/consumer_mpi"; do
    "$p" >/dev/null
  done
  echo "install test: libdevarray_mpi consumers (pkg-config devarray-mpi, find_package(devarray_mpi)) ran"
fi
