#!/bin/sh
# devarray check (tools/devarray/cmd_check.c): each seeded bug of
# bench/kernels/seeded.dvk is reported, with its check's name, the kernel,
# thread and line, by a program that ignores every status; its corrected
# twin gives 0 errors; the summary line and the exit status; --tool,
# --json, --print-limit, --log-file, --error-exitcode; API bugs (released
# handles); usage errors; a program that cannot be run; the program's own
# exit status passed through.
# Usage: check_test.sh DEVARRAY CHECK_TARGET SEEDED.dvk | DEVARRAY - - python PYTHON
#        | DEVARRAY - - examples PROGRAM...
set -u
tool="$1" target="$2" seeded="$3"
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
# expect STATUS PATTERN... -- ARGS: run devarray check ARGS, check the exit
# status and that each pattern is a line of its output.
expect() {
  want=$1
  shift
  pats=""
  while [ "$1" != "--" ]; do pats="$pats
$1"
    shift
  done
  shift
  "$tool" check "$@" >"$d/out" 2>"$d/err"
  got=$?
  [ "$got" = "$want" ] || fail "devarray check $*: exit $got, expected $want: $(cat "$d/out" "$d/err")"
  echo "$pats" | while IFS= read -r p; do
    [ -z "$p" ] && continue
    grep -q -e "$p" "$d/out" || { echo "FAIL: devarray check $*: no line matching '$p' in:"; cat "$d/out"; echo x >>"$d/fails"; }
  done
}

# Examples mode (check_test.sh DEVARRAY - - examples PROGRAM...): the
# project's clean examples give 0 errors and exit 0 under the checks (the
# kernel examples take --backend host; streams reads DV_BACKEND).
if [ "${4:-}" = examples ]; then
  shift 4
  for ex in "$@"; do
    case "$ex" in *streams*) set -- ;; *) set -- --backend host ;; esac
    expect 0 "ERROR SUMMARY: 0 errors" -- -- "$ex" "$@"
    echo "$(basename "$ex"): 0 errors"
  done
  [ -f "$d/fails" ] && fails=$((fails + $(wc -l <"$d/fails")))
  [ "$fails" -gt 0 ] && { echo "$fails check(s) failed"; exit 1; }
  echo "devarray check on the examples: all clean"
  exit 0
fi

# Python mode (check_test.sh DEVARRAY - - python PYTHON): a Python program
# whose kernels (the C dialect's, and a @jit one where Numba is installed)
# write past their arrays and which swallows every exception.
if [ "${4:-}" = python ]; then
  py=$5
  cat >"$d/prog.py" <<'PYEOF'
import numpy as np
import devarray as cuda
mod = cuda.Module("""
DV_KERNEL(fill_all, DV_ARRAY(float, a)) {
  DV_BIND(float, a);
  a[dv_global_id(0)] = 1.0f; /* no if (i < n) */
}
""", name="careless.dvk")
d = cuda.to_device(np.zeros(10, np.float32))
try:
    mod.get("fill_all")[4, 256](d)
except Exception:
    pass
try:
    import numba  # noqa: F401
except ImportError:
    print("no numba")
else:
    @cuda.jit
    def fill_jit(a):
        i = cuda.grid(1)
        a[i] = 1.0
    try:
        fill_jit[4, 256](d)
    except Exception:
        pass
PYEOF
  if "$py" -c "import numba" 2>/dev/null; then n=2; else n=1; fi
  expect 1 "^========= memcheck: DV_ERR_KERNEL_FAULT" "kernel fill_all" "ERROR SUMMARY: $n errors*$" -- -- "$py" "$d/prog.py"
  [ "$n" = 2 ] && { grep -q "kernel fill_jit: write outside argument 0 'a'.*prog.py:[0-9]" "$d/out" || fail "the @jit kernel's fault not reported: $(cat "$d/out")"; }
  cat "$d/out"
  "$tool" check -- "$py" -c "import devarray as cuda, numpy as np; cuda.to_device(np.ones(4)).copy_to_host()" >"$d/out" 2>&1
  [ $? = 0 ] && grep -q "ERROR SUMMARY: 0 errors" "$d/out" || fail "a clean Python program: $(cat "$d/out")"
  # --leak-check: a C reference the program never drops is named by its Python line; the
  # arrays Python frees and the binding's own context are not leaks
  cat >"$d/leak.py" <<'PYEOF'
import ctypes
import numpy as np
import devarray as cuda
from devarray._lib import lib
kept = cuda.to_device(np.ones(4))
freed = cuda.to_device(np.ones(8))
s = cuda.stream()
held = lib.dv_array_retain(kept.handle)  # a C reference never released
PYEOF
  expect 1 "device array never released: float64 (4,) (32 bytes of device memory); made at .*leak.py:5 (<module>)" \
    "LEAK SUMMARY: 1 handle never released" "ERROR SUMMARY: 1 error$" -- --leak-check full -- "$py" "$d/leak.py"
  grep -q "context never released" "$d/out" && fail "the binding's context reported as a leak: $(cat "$d/out")"
  [ -f "$d/fails" ] && fails=$((fails + $(wc -l <"$d/fails")))
  [ "$fails" -gt 0 ] && { echo "$fails check(s) failed"; exit 1; }
  echo "devarray check on Python programs: all cases passed"
  exit 0
fi

# Each seeded bug: one error, named by its check; the twin: none.
for c in "ww racecheck write-write race" "reduce racecheck read-write race" \
         "counter racecheck read-write race" "uninit initcheck read of uninitialized shared" \
         "shared_oob memcheck write outside shared" "global_read memcheck read outside argument 0" \
         "divergent racecheck read-write race" "global_write memcheck write outside argument 1"; do
  set -- $c
  k=$1 check=$2
  shift 2
  expect 1 "^========= $check: DV_ERR_KERNEL_FAULT" "kernel bug_$k: $*" "thread ([0-9]*,0,0) of block" \
    "seeded.dvk:[0-9]" "ERROR SUMMARY: 1 error$" -- -- "$target" "$seeded" "bug_$k"
  expect 0 "ERROR SUMMARY: 0 errors" -- -- "$target" "$seeded" "fix_$k"
  echo "bug_$k: reported by $check; fix_$k: 0 errors"
done

# API bugs: a released array used, an array released twice; a clean run.
expect 1 "^========= api: DV_ERR_MISUSE" "dv_copy_to_host: array was released" "ERROR SUMMARY: 1 error" \
  -- -- "$target" - use-after-release
expect 1 "released already (a double release" "ERROR SUMMARY: 1 error" -- -- "$target" - double-release
expect 0 "ERROR SUMMARY: 0 errors" -- -- "$target" - clean
echo "api: use after release and double release reported; a clean program: 0 errors"

# --leak-check full: what the program never released, with file:line from
# addr2line (check_target is built with debug information); each is an
# error.  LeakSanitizer is off for these runs: its own report at exit would
# end the program before the library's.  A clean program: 0 errors.
line_of() { grep -n "LEAK: $1" "$src_dir/check_target.c" | cut -d: -f1; }
src_dir=$(dirname "$0")
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
expect 1 "^========= leakcheck: never released" \
  "device array never released: float32 (10, 25) (1000 bytes of device memory); made at .*check_target.c:$(line_of array)" \
  "pinned array never released: int8 (10,) (10 bytes of pinned memory); made at .*check_target.c:$(line_of pinned)" \
  "stream never released; made at .*check_target.c:$(line_of stream)" \
  "event never released; made at .*check_target.c:$(line_of event)" \
  "context never released; made at .*check_target" \
  "LEAK SUMMARY: 9 handles never released, holding 33782 bytes" \
  "ERROR SUMMARY: 9 errors" -- --leak-check full -- "$target" - leak
expect 0 "ERROR SUMMARY: 0 errors" -- --leak-check full -- "$target" - clean
grep -q "LEAK SUMMARY: 0 handles never released" "$d/out" || fail "--leak-check on a clean program: $(cat "$d/out")"
expect 0 "ERROR SUMMARY: 0 errors" -- --leak-check no -- "$target" - leak
grep -q "leakcheck" "$d/out" && fail "--leak-check no reported leaks: $(cat "$d/out")"
expect 0 "ERROR SUMMARY: 0 errors" -- -- "$target" - leak
expect 1 '^{"tool":"leakcheck","status":"never released","message":"stream never released' \
  '^{"leak_summary":"9 handles never released' -- --json --leak-check full -- "$target" - leak
expect 2 -- --leak-check yes -- true
grep -q "'yes' is not full or no" "$d/err" || fail "--leak-check yes: $(cat "$d/err")"
echo "--leak-check: every handle never released, with its file:line; a clean program: none"

# --tool filters what is counted; --error-exitcode; --print-limit; --json; --log-file.
expect 0 "ERROR SUMMARY: 0 errors" -- --tool memcheck,initcheck -- "$target" "$seeded" bug_ww
expect 1 "ERROR SUMMARY: 1 error" -- --tool racecheck -- "$target" "$seeded" bug_ww
expect 7 "ERROR SUMMARY: 1 error" -- --error-exitcode 7 -- "$target" "$seeded" bug_global_write
expect 1 "1 report not printed (--print-limit 0)" "ERROR SUMMARY: 1 error" -- --print-limit 0 -- "$target" - double-release
expect 1 '^{"tool":"memcheck","status":"DV_ERR_KERNEL_FAULT","message":"kernel bug_global_read: read outside' \
  '^{"summary":{"errors":1,"printed":1,"program_status":0}}$' -- --json -- "$target" "$seeded" bug_global_read
expect 1 -- --log-file "$d/log" -- "$target" "$seeded" bug_uninit
grep -q "ERROR SUMMARY: 1 error" "$d/log" && grep -q "^========= initcheck" "$d/log" || fail "--log-file: $(cat "$d/log")"
[ -s "$d/out" ] && grep -q "=========" "$d/out" && fail "--log-file: reports also on stdout"
echo "--tool, --error-exitcode, --print-limit, --json, --log-file"

# The program's own status; a program that cannot be run; usage errors.
expect 3 "ERROR SUMMARY: 0 errors" -- -- sh -c "exit 3"
expect 127 -- -- "$d/no-such-program"
grep -q "cannot run $d/no-such-program" "$d/err" || fail "no message for a program that cannot run"
expect 2 -- --tool nosuch -- true
grep -q "unknown tool 'nosuch'" "$d/err" || fail "--tool nosuch: $(cat "$d/err")"
expect 2 --
grep -q "no program to run" "$d/err" || fail "no program: $(cat "$d/err")"
expect 2 -- --error-exitcode 300 -- true
"$tool" check --help | grep -q "^Usage: devarray check" || fail "check --help"
echo "exit statuses and usage errors"

[ -f "$d/fails" ] && fails=$((fails + $(wc -l <"$d/fails")))
if [ "$fails" -gt 0 ]; then
  echo "$fails check(s) failed"
  exit 1
fi
echo "devarray check: all cases passed"
