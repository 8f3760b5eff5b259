#!/bin/sh
# Per-backend summary of the last CTest run: which backends ran how many
# suites and tests, and which were skipped and why.
log="${1:-.}/Testing/Temporary/LastTest.log"
[ -f "$log" ] || { echo "no CTest log at $log"; exit 0; }
awk '
  /^suite [a-z_]+ on backend [a-z-]+: [0-9]+ tests/ {
    b = $5; sub(":", "", b); suites[b]++; tests[b] += $6; seen[b] = 1 }
  /^SKIPPED: suite [a-z_]+ on backend [a-z-]+:/ {
    b = $6; sub(":", "", b); skipped[b]++; seen[b] = 1
    r = $0; sub(/^SKIPPED: suite [a-z_]+ on backend [a-z-]+: /, "", r); reason[b] = r }
  END {
    for (b in seen) {
      if (suites[b]) printf "backend %-12s %2d suites, %3d tests ran", b, suites[b], tests[b]
      else printf "backend %-12s  0 suites ran", b
      if (skipped[b]) printf "; %d suites skipped: %s", skipped[b], reason[b]
      printf "\n"
    }
  }' "$log" | sort
