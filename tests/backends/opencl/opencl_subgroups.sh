#!/bin/sh
# opencl_subgroups.sh ROOT DIALECT: the dialect's OpenCL branches that PoCL 3.1 (no
# sub-groups) never compiles, compiled by clang's OpenCL C front end (SPIR,
# syntax and code generation, nothing runs): tests/kernels/wave.dvk and
# printf.dvk with sub-groups and khr shuffles and ballot, with
# cl_intel_subgroups only, with bare cl_khr_subgroups (one broadcast per
# lane), and without sub-groups (OpenCL C 1.2; the others 2.0, where clang
# has sub-groups); each variant must call the built-ins it promises.  Exit 77 (skipped) without clang.
set -u
root="$1"
dialect="$2" # the embedded dialect text (build/generated/devarray_kernel_dialect.h)
command -v clang >/dev/null 2>&1 || { echo "skipped: clang (OpenCL C front end) not found"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
check() { # name, OpenCL C version, -cl-ext value, #undefs, built-ins that must be called
  { printf '%b' "$4"; cat "$dialect" "$root/tests/kernels/wave.dvk" \
      "$root/tests/kernels/printf.dvk"; } > "$tmp/$1.cl"
  if ! clang -cc1 -triple spir64-unknown-unknown -cl-std="$2" -finclude-default-header \
       -cl-ext="$3" -emit-llvm -O1 -o "$tmp/$1.ll" "$tmp/$1.cl" > "$tmp/$1.log" 2>&1; then
    echo "FAIL: $1: does not compile:"; head -20 "$tmp/$1.log"; fail=1; return
  fi
  for f in $5; do
    if ! grep -q "@$f" "$tmp/$1.ll"; then echo "FAIL: $1: no call to $f"; fail=1; return; fi
  done
  echo "ok: $1 ($5)"
}
# clang defines cl_khr_subgroup_shuffle and _ballot wherever it has sub-groups.
undef='#undef cl_khr_subgroup_shuffle\n#undef cl_khr_subgroup_ballot\n'
check khr CL2.0 -all,+cl_khr_subgroups,+cl_khr_fp64 '' \
  "_Z17sub_group_shuffledj _Z16sub_group_balloti _Z13sub_group_anyi _Z13sub_group_alli"
check intel CL2.0 -all,+cl_khr_subgroups,+cl_intel_subgroups,+cl_khr_fp64 "$undef" \
  "_Z23intel_sub_group_shuffleij _Z20sub_group_reduce_addm"
check broadcast CL2.0 -all,+cl_khr_subgroups,+cl_khr_fp64 "$undef" \
  "_Z19sub_group_broadcastmj _Z20sub_group_reduce_addm"
check none CL1.2 -all,+cl_khr_fp64 '' "printf"
check none_no_fp64 CL1.2 -all '' "printf"
exit $fail
