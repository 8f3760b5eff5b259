#!/bin/sh
# gpu.deps_bare (issue 36, item 2): the build dependencies bench/gpu/run.sh
# carries to a bare CUDA image, checked here so that the GPU call cannot rot
# between GPU sessions.
#
#   gpu_deps_check.sh SOURCE_DIR WORK_DIR CMAKE CTEST
#
# 1. the packages: bench/gpu/fetch-deps.sh into WORK_DIR/debs (Debian's
#    registry), else the carried SOURCE_DIR/.gpu-deps; neither: skipped (77),
#    with the reason;
# 2. a mount namespace (unshare -m as root, unshare -rm otherwise) in which
#    every file those packages hold is absent from the system (an overlay on
#    /usr with a whiteout for each), so only the unpacked copies can serve;
#    where no namespace or overlay can be made, the same run without the
#    hiding, and the checks of step 4 alone say where each piece came from;
# 3. inside, a clean environment (env -i) where bench/gpu/deps.sh's
#    gpu_deps_env, the very function run.sh uses, unpacks the packages into an
#    empty prefix and sets PATH, CPATH, LIBRARY_PATH, LD_LIBRARY_PATH and
#    PKG_CONFIG_PATH; then configure (against the CUDA driver test double),
#    build test_transfer, and run transfer.cuda;
# 4. checks: pkg-config is the prefix's, ffi.h was compiled from the prefix's
#    multiarch include, test_transfer loads libcmocka and libffi from the
#    prefix, and transfer.cuda passed.
set -u
src=$1
work=$2
cmake=$3
ctest=$4
skip() { echo "SKIPPED: $*"; exit 77; }
fail() { echo "FAILED: $*"; exit 1; }

case "${5:-}" in
  inner) ;;
  *)
    rm -rf "$work" && mkdir -p "$work/home" "$work/tmp" || fail "cannot make $work"
    for t in dpkg-deb sh; do command -v $t >/dev/null 2>&1 || skip "no $t on this machine"; done
    # 1. the packages
    if timeout 120 sh "$src/bench/gpu/fetch-deps.sh" "$work/debs" >"$work/fetch.log" 2>&1; then
      echo "packages: downloaded by bench/gpu/fetch-deps.sh:" $(cd "$work/debs" && ls *.deb)
    elif ls "$src/.gpu-deps"/*.deb >/dev/null 2>&1; then
      mkdir -p "$work/debs" && cp "$src/.gpu-deps"/*.deb "$work/debs/" || fail "cannot copy .gpu-deps"
      echo "packages: the carried .gpu-deps (the download failed: $(tail -1 "$work/fetch.log"))"
    else
      cat "$work/fetch.log"
      skip "the packages cannot be obtained: bench/gpu/fetch-deps.sh failed (no network or no apt-get) and no .gpu-deps is carried"
    fi
    # 2. hide the system's copies in a mount namespace of our own
    ns=
    if unshare -m true 2>/dev/null; then ns="unshare -m"
    elif unshare -rm true 2>/dev/null; then ns="unshare -rm"
    fi
    if [ -n "$ns" ]; then
      echo "system copies: hidden ($ns)"
      $ns sh "$0" "$src" "$work" "$cmake" "$ctest" inner
    else
      echo "system copies: NOT hidden (no mount namespace here: unshare -m and -rm refused); the path checks below still apply"
      NO_HIDE=1 sh "$0" "$src" "$work" "$cmake" "$ctest" inner
    fi
    exit $?
    ;;
esac

# ---- inside the namespace
prefix=$work/prefix
if [ -z "${NO_HIDE:-}" ]; then
  # An overlay on /usr whose upper layer (a tmpfs) holds a whiteout for every
  # path of the packages: those files are absent, as on a bare image (an
  # empty file bound over them would not do: gcc searches the system's
  # library folders before LIBRARY_PATH, and an empty libffi.so is read as an
  # empty linker script).
  ovl=$work/ovl
  mkdir -p "$ovl" && mount -t tmpfs tmpfs "$ovl" && mkdir -p "$ovl/upper" "$ovl/work" ||
    fail "cannot mount a tmpfs in the namespace"
  hidden=0
  for f in "$work"/debs/*.deb; do
    for p in $(dpkg-deb -c "$f" | awk '{print $6}' | sed 's|^\./|/|'); do
      case "$p" in */ | /usr) continue ;; /usr/*) ;; *) continue ;; esac
      [ -e "$p" ] || [ -L "$p" ] || continue
      [ -d "$p" ] && [ ! -L "$p" ] && continue
      rel=${p#/usr/}
      mkdir -p "$ovl/upper/$(dirname "$rel")" && mknod "$ovl/upper/$rel" c 0 0 2>/dev/null && hidden=$((hidden + 1))
    done
  done
  if mount -t overlay overlay -o "lowerdir=/usr,upperdir=$ovl/upper,workdir=$ovl/work" /usr 2>"$work/overlay.err"; then
    echo "hidden: $hidden system files the packages also hold (overlay on /usr)"
    # The proof that hiding works: the system's copies are gone.
    for p in /usr/include/cmocka.h /usr/include/x86_64-linux-gnu/ffi.h /usr/bin/pkg-config; do
      [ -e "$p" ] && fail "$p is still visible"
    done
  else
    echo "system copies: NOT hidden (the overlay on /usr was refused: $(cat "$work/overlay.err")); the path checks below still apply"
  fi
fi

bindir=$(dirname "$cmake")
env -i HOME="$work/home" TMPDIR="$work/tmp" LANG=C PATH="$bindir:/usr/local/bin:/usr/bin:/bin" \
  SRC="$src" WORK="$work" PREFIX="$prefix" CMAKE="$cmake" CTEST="$ctest" sh -c '
  . "$SRC/bench/gpu/deps.sh" || exit 1
  gpu_deps_env "$WORK/debs" "$PREFIX" || exit 1
  echo "env: PATH=$PATH"
  echo "env: CPATH=$CPATH"
  echo "env: LIBRARY_PATH=$LIBRARY_PATH"
  echo "env: PKG_CONFIG_PATH=$PKG_CONFIG_PATH"
  pc=$(command -v pkg-config)
  [ "$pc" = "$PREFIX/usr/bin/pkg-config" ] || { echo "FAILED: pkg-config is $pc, not the prefix'"'"'s"; exit 1; }
  echo "pkg-config: $pc $(pkg-config --version); cmocka $(pkg-config --modversion cmocka), libffi $(pkg-config --modversion libffi)" || exit 1
  "$CMAKE" --log-level=ERROR -S "$SRC" -B "$WORK/build" -DCMAKE_BUILD_TYPE=Debug -DDV_CUDA_DOUBLE=ON \
    -DDV_WERROR=OFF >"$WORK/configure.log" 2>&1 || { tail -30 "$WORK/configure.log"; echo "FAILED: configure"; exit 1; }
  "$CMAKE" --build "$WORK/build" -j2 --target test_transfer cuda_double >"$WORK/build.log" 2>&1 ||
    { grep -m5 -E "error|Error" "$WORK/build.log"; tail -20 "$WORK/build.log"; echo "FAILED: build"; exit 1; }
  echo "built: test_transfer, cuda_double"
  # where each piece came from
  grep -rqs "$PREFIX/usr/include/x86_64-linux-gnu/ffi.h" "$WORK/build/CMakeFiles" ||
    { echo "FAILED: no object was compiled with the prefix'"'"'s ffi.h"; exit 1; }
  echo "ffi.h: $PREFIX/usr/include/x86_64-linux-gnu/ffi.h"
  t="$WORK/build/tests/test_transfer"
  for lib in libcmocka.so.0 libffi.so.8; do
    at=$(ldd "$t" | awk -v l=$lib "\$1 == l {print \$3}")
    case "$at" in "$PREFIX"/*) echo "$lib: $at" ;; *) echo "FAILED: test_transfer loads $lib from ${at:-nowhere}"; exit 1 ;; esac
  done
  "$CTEST" --test-dir "$WORK/build" -R "^transfer[.]cuda\$" --output-on-failure >"$WORK/ctest.log" 2>&1
  rc=$?
  tail -4 "$WORK/ctest.log"
  grep -q "100% tests passed, 0 tests failed out of 1" "$WORK/ctest.log" || { cat "$WORK/ctest.log"; echo "FAILED: transfer.cuda"; exit 1; }
  [ $rc -eq 0 ] || exit 1
  echo "PASSED: built and tested against the carried packages alone"
'
