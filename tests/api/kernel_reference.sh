#!/bin/sh
# kernel_reference.sh ROOT DIALECT: include/devarray/kernel.h (the installed
# reference) against the dialect's implementation (DIALECT: the text the
# library embeds, build/generated/devarray_kernel_dialect.h).
#  1. Every public name (dv_*, DV_*; not dv__/DV__, not the DV_BACKEND_*
#     markers) the implementation has, on any backend, is declared by the
#     reference, and the reference declares nothing else.
#  2. An editor can parse a kernel with the reference alone: every kernel of
#     examples/ and tests/kernels/ that needs nothing from its host program
#     (defines, constant arrays) compiles with -fsyntax-only as C11 under
#     -include <devarray/kernel.h>.
set -u
root="$1"; dialect="$2"
ref="$root/include/devarray/kernel.h"
cc=${CC:-cc}
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0
names() { # the public names in a C text, comments removed
  "$cc" -fpreprocessed -dD -E -P -x c "$1" 2>/dev/null | grep -oE '\b(dv|DV)_[A-Za-z0-9_]*' |
    grep -vE '^(dv__|DV__|DV_BACKEND_)|_$' | sort -u
}
names "$dialect" >"$tmp/impl"
names "$ref" >"$tmp/ref"
# The reference generates the typed families (shuffles, atomics) with a macro: expand it.
"$cc" -E -P -x c "$ref" 2>/dev/null | grep -oE '\b(dv|DV)_[A-Za-z0-9_]*' |
  grep -vE '^(dv__|DV__|DV_BACKEND_)' >>"$tmp/ref"
sort -u -o "$tmp/ref" "$tmp/ref"
[ -s "$tmp/impl" ] && [ -s "$tmp/ref" ] || { echo "FAIL: no names read (cc: $cc)"; exit 1; }
missing=$(comm -23 "$tmp/impl" "$tmp/ref")
extra=$(comm -13 "$tmp/impl" "$tmp/ref")
if [ -n "$missing" ]; then echo "FAIL: the implementation has names the reference lacks:"; echo "$missing"; fail=1; fi
if [ -n "$extra" ]; then echo "FAIL: the reference declares names the implementation lacks:"; echo "$extra"; fail=1; fi
[ $fail = 0 ] && echo "ok: the same $(wc -l <"$tmp/impl") public names"
# Kernels that read defines or constant arrays their host program supplies,
# or that are meant not to compile.
skip="constant_memory.dvk constant.dvk dialect.dvk error.dvk modes.dvk"
n=0
for f in "$root"/examples/*.dvk "$root"/tests/kernels/*.dvk "$root"/src/kernel/copy_kernels.dvk; do
  case " $skip " in *" $(basename "$f") "*) continue ;; esac
  if ! "$cc" -std=gnu11 -fsyntax-only -Wno-implicit-function-declaration -include "$ref" -x c "$f" \
       >"$tmp/log" 2>&1; then
    echo "FAIL: $f does not parse with the reference alone:"; head -5 "$tmp/log"; fail=1
  fi
  n=$((n + 1))
done
[ $fail = 0 ] && echo "ok: $n kernels parse with the reference alone"
exit $fail
