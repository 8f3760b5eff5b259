#!/bin/sh
# Run HERE (a machine with Debian's package registry), not on the GPU
# machine (it has no network): downloads the Debian packages the build needs
# that a bare CUDA image lacks, into DIR (default .gpu-deps/, ignored by
# git), to be carried to the GPU machine (every device-tool call names
# .gpu-deps in its carry), where run.sh unpacks them into a private prefix
# (bench/gpu/deps.sh):
#
#   libcmocka0 libcmocka-dev   the tests' framework
#   libffi8 libffi-dev         the host simulator's calls (the library links
#                              -lffi; libffi-dev's libffi.so points at the
#                              runtime libffi.so.8, which is libffi8's)
#   pkgconf pkgconf-bin libpkgconf3
#                              pkg-config itself (CMake's FindPkgConfig), with
#                              the library pkgconf runs on
#
#   bench/gpu/fetch-deps.sh [DIR]
#
# Exit 0 with the files listed; 1 when a package cannot be downloaded (no
# network, no apt-get): DIR is then left as it was.
set -eu
here=$(cd "$(dirname "$0")/../.." && pwd)
dir=${1:-$here/.gpu-deps}
pkgs="libcmocka0 libcmocka-dev libffi8 libffi-dev pkgconf pkgconf-bin libpkgconf3"
command -v apt-get >/dev/null 2>&1 || { echo "fetch-deps: no apt-get on this machine" >&2; exit 1; }
mkdir -p "$dir"
tmp=$(mktemp -d "$dir/.fetch.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# apt-get download writes into the current folder; as root it warns that
# the _apt user cannot write there, which is harmless.
if ! (cd "$tmp" && apt-get download $pkgs >"$tmp/log" 2>&1); then
  echo "fetch-deps: apt-get download failed:" >&2
  grep -v '^W: Download is performed unsandboxed' "$tmp/log" | tail -5 >&2
  exit 1
fi
for p in $pkgs; do
  ls "$tmp/${p}_"*.deb >/dev/null 2>&1 || { echo "fetch-deps: $p was not downloaded" >&2; exit 1; }
done
# Replace the previous set only once the whole new one is here.
rm -f "$dir"/*.deb
mv "$tmp"/*.deb "$dir"/
ls -1 "$dir"/*.deb
