#!/bin/sh
# cl_missing_extension.sh CLANG DIALECT (the embedded dialect text): a 64-bit atomic in an OpenCL C
# compiler without cl_khr_int64_base_atomics / _extended_atomics is a compile
# error naming the missing extension (PoCL has both and refuses options that
# turn them off, so clang's OpenCL front end stands in).  Skipped (77) without
# clang.
clang="$1"; header="$2"
if [ -z "$clang" ] || ! command -v "$clang" >/dev/null 2>&1; then
  echo "SKIPPED: cl_missing_extension: no clang to compile OpenCL C"; exit 77
fi
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
{ cat "$header"; cat <<'K'
DV_KERNEL(k, DV_ARRAY(dv_u64, a)) {
  DV_BIND(dv_u64, a);
  dv_atomic_add_u64(&a[0], 1);
  dv_atomic_inc_u64(&a[1], 5);
  dv_atomic_or_u64(&a[2], 1);
}
K
} >"$tmp/k.cl"
cl="-x cl -cl-std=CL1.2 -Xclang -finclude-default-header -fsyntax-only"
# With the extensions (clang's default target has them): it compiles.
if ! "$clang" $cl "$tmp/k.cl" >"$tmp/ok.log" 2>&1; then
  if grep -q "finclude-default-header\|unknown argument" "$tmp/ok.log"; then
    echo "SKIPPED: cl_missing_extension: $clang cannot compile OpenCL C"; cat "$tmp/ok.log"; exit 77
  fi
  echo "FAIL: the kernel does not compile with the extensions"; cat "$tmp/ok.log"; exit 1
fi
# Without them: errors naming each extension the kernel needs, nothing else.
"$clang" $cl -Xclang -cl-ext=-cl_khr_int64_base_atomics,-cl_khr_int64_extended_atomics \
  "$tmp/k.cl" >"$tmp/err.log" 2>&1 && { echo "FAIL: compiled without the extensions"; exit 1; }
cat "$tmp/err.log"
base=$(grep -c "error: .*dv__missing_extension_cl_khr_int64_base_atomics" "$tmp/err.log")
ext=$(grep -c "error: .*dv__missing_extension_cl_khr_int64_extended_atomics" "$tmp/err.log")
all=$(grep -c "error:" "$tmp/err.log")
if [ "$base" -eq 2 ] && [ "$ext" -eq 1 ] && [ "$all" -eq 3 ]; then
  echo "PASS: each missing extension is named"; exit 0
fi
echo "FAIL: expected 2 errors naming cl_khr_int64_base_atomics and 1 naming cl_khr_int64_extended_atomics"
exit 1
