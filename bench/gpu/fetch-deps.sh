#!/bin/sh
# Run HERE (a machine with Debian's package registry), not on the GPU
# machine: downloads the Debian packages the test build needs that the GPU
# image lacks (cmocka), into .gpu-deps/ (ignored by git), to be carried to
# the GPU machine, where run.sh unpacks them into a private prefix and
# rewrites their pkg-config files to point there.  Every device-tool call
# names .gpu-deps in its carry.
set -eu
cd "$(dirname "$0")/../.."
mkdir -p .gpu-deps
cd .gpu-deps
apt-get download libcmocka0 libcmocka-dev libffi-dev >/dev/null
ls -1 *.deb
