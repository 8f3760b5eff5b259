#!/bin/sh
# devarray report: statistics table, segment map PNG, snapshot JSON, RMM CSV.
set -eu
tool="$1"
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
# A map asked for by name needs gnuplot (without it, that is an error).
if command -v gnuplot >/dev/null 2>&1; then png="--png $d/map.png"; else png=""; fi
# shellcheck disable=SC2086
out=$(cd "$d" && "$tool" report --backend host --steps 600 $png --json "$d/snap.json" --csv "$d/log.csv")
echo "$out"
echo "$out" | grep -q "^allocated "
echo "$out" | grep -q "^reserved "
echo "$out" | grep -q "fragmentation"
grep -q '"segments":\[{"size":' "$d/snap.json"
head -1 "$d/log.csv" | grep -qx "Thread,Time,Action,Pointer,Size,Stream"
grep -q ",allocate,0x" "$d/log.csv"
if [ -n "$png" ]; then
  head -c 8 "$d/map.png" | od -An -tx1 | grep -q "89 50 4e 47 0d 0a 1a 0a"
  echo "$out" | grep -q "^segment map: $d/map.png ([0-9]* segments)"
  echo "segment map is a PNG"
else
  echo "$out" | grep -q "^segment map: not drawn"
  echo "gnuplot missing: the map was not drawn (scripts/setup installs gnuplot-nox)"
fi

# With no --png, the map goes to a new temporary file it names (in $TMPDIR),
# never into the current directory.
mkdir "$d/cwd" "$d/tmp"
out=$(cd "$d/cwd" && TMPDIR="$d/tmp" "$tool" report --backend host --steps 200)
[ -z "$(ls -A "$d/cwd")" ] || { echo "report wrote into the current directory: $(ls -A "$d/cwd")"; exit 1; }
if command -v gnuplot >/dev/null 2>&1; then
  map=$(echo "$out" | sed -n 's/^segment map: \(.*\) ([0-9]* segments)$/\1/p')
  case "$map" in "$d/tmp/devarray-segments-"??????".png") ;; *) echo "default map not in TMPDIR: '$map'"; exit 1 ;; esac
  head -c 8 "$map" | od -An -tx1 | grep -q "89 50 4e 47 0d 0a 1a 0a"
  echo "default map: a new PNG in TMPDIR, named"
else
  [ -z "$(ls -A "$d/tmp")" ]
  echo "$out" | grep -q "^segment map: not drawn"
fi
