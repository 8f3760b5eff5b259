#!/bin/sh
# Build and install devarray (release, no sanitizers) into a temporary
# prefix, then build the README example against the installed copy through
# pkg-config and through find_package(devarray), and run them.
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake -S "$src" -B "$tmp/build" -DCMAKE_BUILD_TYPE=Release -DDV_BUILD_TESTS=OFF >/dev/null
cmake --build "$tmp/build" -j2 >/dev/null
cmake --install "$tmp/build" --prefix "$tmp/prefix" >/dev/null
libdir=$(ls -d "$tmp"/prefix/lib*)
for f in include/devarray.h; do test -f "$tmp/prefix/$f"; done
ls "$libdir"/libdevarray.so* "$libdir"/libdevarray.a "$libdir"/pkgconfig/devarray.pc "$libdir"/cmake/devarray/devarrayConfig.cmake >/dev/null
export PKG_CONFIG_PATH="$libdir/pkgconfig"
cc -std=c11 "$src/examples/basic.c" $(pkg-config --cflags --libs devarray) -o "$tmp/pc_shared"
# static: the archive from -L, then the private libraries pkg-config lists
private=$(pkg-config --static --libs-only-l devarray | sed 's/-ldevarray//')
cc -std=c11 "$src/examples/basic.c" $(pkg-config --cflags devarray) -o "$tmp/pc_static" \
  $(pkg-config --libs-only-L devarray) -Wl,-Bstatic -ldevarray -Wl,-Bdynamic $private
cmake -S "$src/tests/consumer" -B "$tmp/consumer" -DCMAKE_PREFIX_PATH="$tmp/prefix" -DEXAMPLE="$src/examples/basic.c" >/dev/null
cmake --build "$tmp/consumer" >/dev/null
export DV_BACKEND=host
LD_LIBRARY_PATH="$libdir" "$tmp/pc_shared"
"$tmp/pc_static"
LD_LIBRARY_PATH="$libdir" "$tmp/consumer/consumer_shared"
"$tmp/consumer/consumer_static"
# the static consumer really is static in devarray; the shared one is not
! nm "$tmp/consumer/consumer_shared" | grep -q " T dv_context_create"
nm "$tmp/consumer/consumer_static" | grep -q " T dv_context_create"
echo "install test: pkg-config (shared, static) and find_package (shared, static) consumers ran"
