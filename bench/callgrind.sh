#!/bin/sh
# Instructions per call on the per-call-overhead paths (issue 13), counted by
# callgrind over N calls inside one function (--toggle-collect), after a few
# warm-up calls.  Usage: bench/callgrind.sh [BUILD_DIR] [N]   (default build-rel, 10000)
set -eu
B=${1:-build-rel}
N=${2:-10000}
command -v valgrind >/dev/null || { echo "callgrind.sh: valgrind not installed, skipped"; exit 0; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
count() { # label, function, program args...
  label=$1 fn=$2
  shift 2
  valgrind --tool=callgrind --toggle-collect="$fn" --callgrind-out-file="$T/out" "$@" >/dev/null 2>"$T/err" ||
    { echo "$label: failed"; cat "$T/err"; return 1; }
  ir=$(callgrind_annotate "$T/out" 2>/dev/null | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1; exit }')
  awk -v l="$label" -v ir="$ir" -v n="$N" 'BEGIN { printf "%-46s %10.0f instructions/call\n", l, ir / n }'
}
echo "callgrind, $N calls each, $B"
count "memcpy 64 B (reference)" count_loop "$B/bench/bench_overhead" --count memcpy64 "$N"
count "dv_copy_to_device 64 B contiguous" count_loop "$B/bench/bench_overhead" --count copy64 "$N"
count "dv_to_device 64 B, pool manager" count_loop "$B/bench/bench_overhead" --count todev64 "$N"
count "dv_to_device 64 B, direct manager" count_loop "$B/bench/bench_overhead" --count todev64-direct "$N"
count "dv_copy_to_device 64 B on a stream, pool" count_loop "$B/bench/bench_overhead" --count async64 "$N"
count "dv_copy_to_device 64 B on a stream, direct" count_loop "$B/bench/bench_overhead" --count async64-direct "$N"
count "... array of another stream, pool" count_loop "$B/bench/bench_overhead" --count async64-other "$N"
count "pool allocate+free pair, 1 KiB" fastpath_loop "$B/bench/bench_alloc" --fastpath-only "$N"
