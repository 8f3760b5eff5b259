# Sourced (". bench/gpu/deps.sh"), never run: the carried build
# dependencies of a bare CUDA image, shared by run.sh (on the GPU machine)
# and tests/backends/gpu_deps_check.sh (the CTest entry gpu.deps_bare, here), so
# that what the GPU call relies on is what the tests check.
#
#   gpu_deps_env DEBDIR PREFIX
#
# unpacks every .deb of DEBDIR (bench/gpu/fetch-deps.sh downloads them:
# cmocka, libffi with its runtime, pkgconf with libpkgconf) into PREFIX,
# once (PREFIX/.unpacked marks it done for that PREFIX and those .debs), rewrites their pkg-config files to
# point there (Debian's say /usr), and exports what the compiler, the
# linker, pkg-config and the programs need to find them:
#
#   PATH             PREFIX/usr/bin first (pkgconf's pkg-config)
#   CPATH            PREFIX/usr/include and its multiarch folder (ffi.h is in
#                    usr/include/x86_64-linux-gnu, which only the system's own
#                    /usr/include gets from gcc by default)
#   LIBRARY_PATH     the multiarch lib folder: the linker's -lffi (libffi.pc
#                    names no -L, and the linker ignores LD_LIBRARY_PATH)
#   LD_LIBRARY_PATH  the same folder at run time (libffi.so.8, libcmocka.so.0,
#                    libpkgconf.so.3)
#   PKG_CONFIG_PATH  the rewritten .pc files
#
# Returns 1, with a message on stderr, when DEBDIR holds no .deb or one
# cannot be unpacked (dpkg-deb, else ar + tar).
gpu_deps_env() {
  gd_debs=$1
  gd_prefix=$2
  if ! ls "$gd_debs"/*.deb >/dev/null 2>&1; then
    echo "gpu_deps_env: no .deb in $gd_debs (run bench/gpu/fetch-deps.sh where Debian's registry is reachable)" >&2
    return 1
  fi
  # .unpacked names the prefix it was made for (the .pc files hold it): a
  # prefix carried from elsewhere, or made from other .debs, is made again.
  gd_stamp="$gd_prefix $(ls -l "$gd_debs"/*.deb | md5sum)"
  if [ "$(cat "$gd_prefix/.unpacked" 2>/dev/null)" != "$gd_stamp" ]; then
    rm -rf "$gd_prefix" && mkdir -p "$gd_prefix" || return 1
    for gd_f in "$gd_debs"/*.deb; do
      if command -v dpkg-deb >/dev/null 2>&1; then
        dpkg-deb -x "$gd_f" "$gd_prefix" || { echo "gpu_deps_env: cannot unpack $gd_f" >&2; return 1; }
      else
        # No dpkg: a .deb is an ar archive whose data.tar.* holds the files.
        gd_member=$(ar t "$gd_f" 2>/dev/null | grep '^data[.]tar')
        case "$gd_member" in
          *.xz) gd_z=-J ;; *.gz) gd_z=-z ;; *.zst) gd_z=--zstd ;; *.tar) gd_z= ;;
          *) echo "gpu_deps_env: cannot unpack $gd_f (no dpkg-deb, and no data.tar in it for ar)" >&2; return 1 ;;
        esac
        (cd "$gd_prefix" && ar p "$gd_f" "$gd_member" | tar -x $gd_z -f -) ||
          { echo "gpu_deps_env: cannot unpack $gd_f (ar + tar)" >&2; return 1; }
      fi
    done
    for gd_pc in $(find "$gd_prefix" -name '*.pc'); do
      sed -i -e "s|=/usr|=$gd_prefix/usr|g" -e "s|-L/usr|-L$gd_prefix/usr|g" \
        -e "s|-I/usr|-I$gd_prefix/usr|g" "$gd_pc" || return 1
    done
    echo "$gd_stamp" > "$gd_prefix/.unpacked"
  fi
  gd_lib=$gd_prefix/usr/lib/x86_64-linux-gnu
  PATH="$gd_prefix/usr/bin:$PATH"
  CPATH="$gd_prefix/usr/include:$gd_prefix/usr/include/x86_64-linux-gnu${CPATH:+:$CPATH}"
  LIBRARY_PATH="$gd_lib${LIBRARY_PATH:+:$LIBRARY_PATH}"
  LD_LIBRARY_PATH="$gd_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  PKG_CONFIG_PATH="$gd_lib/pkgconfig:$gd_prefix/usr/share/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
  export PATH CPATH LIBRARY_PATH LD_LIBRARY_PATH PKG_CONFIG_PATH
  return 0
}
