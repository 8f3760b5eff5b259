#!/bin/sh
# devarray's command line: exit statuses, the stream each message goes to and
# its text, and the files the tool writes.
#
#   cli_test.sh TOOL [usage|plot]
#
# usage (the default): --help and -h everywhere, --version, unknown commands
#   and options, malformed numbers and sizes, outputs that cannot be written,
#   gnuplot missing or failing (a stand-in gnuplot on PATH, so this part runs
#   the same with or without the real one), info --json read by Python's json.
# plot: bench --plot to .svg and .png with the gnuplot on PATH; without one
#   each case is reported as SKIP by name and the script exits 77, which CTest
#   shows as skipped (never as passed).
set -u
tool=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
section=${2:-usage}
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
mkdir "$d/cwd" # the tool runs here: a default output can never land in the caller's directory
failed=0
passed=0
skipped=0

pass() { passed=$((passed + 1)); echo "ok   $1"; }
skip() { skipped=$((skipped + 1)); echo "SKIP $1 ($2)"; }
fail() {
  failed=$((failed + 1))
  echo "FAIL $1: $2"
  echo "     stdout: $(head -c 400 "$d/out" | head -5)"
  echo "     stderr: $(head -c 400 "$d/err" | head -5)"
}

# Run the tool (with PATH=$tool_path); stdout in $d/out, stderr in $d/err,
# the status in $status.
tool_path=$PATH
run() {
  (cd "$d/cwd" && PATH="$tool_path" exec "$tool" "$@" >"$d/out" 2>"$d/err" </dev/null)
  status=$?
}

# ok NAME STDOUT_ERE ARGS...: exit 0, stdout matches, stderr empty.
ok() {
  name=$1 pattern=$2
  shift 2
  run "$@"
  if [ "$status" -ne 0 ]; then fail "$name" "exit status $status, expected 0"
  elif ! grep -Eq -- "$pattern" "$d/out"; then fail "$name" "stdout does not match /$pattern/"
  elif [ -s "$d/err" ]; then fail "$name" "stderr is not empty"
  else pass "$name"; fi
}

# usage NAME CMD MESSAGE_ERE ARGS...: exit 2, nothing on stdout, and on
# stderr exactly "devarray: CMD: MESSAGE" then "Try 'devarray CMD --help'."
# (CMD empty: the top level).
usage() {
  name=$1 cmd=$2 pattern=$3
  shift 3
  run "$@"
  prefix="devarray: ${cmd:+$cmd: }"
  try="Try 'devarray${cmd:+ $cmd} --help'."
  if [ "$status" -ne 2 ]; then fail "$name" "exit status $status, expected 2"
  elif [ -s "$d/out" ]; then fail "$name" "stdout is not empty"
  elif [ "$(wc -l <"$d/err")" -ne 2 ]; then fail "$name" "stderr is not two lines"
  elif ! head -1 "$d/err" | grep -Eq -- "^$prefix$pattern\$"; then
    fail "$name" "stderr's first line is not /^$prefix$pattern\$/"
  elif [ "$(tail -1 "$d/err")" != "$try" ]; then fail "$name" "stderr's last line is not \"$try\""
  else pass "$name"; fi
}

# failure NAME CMD MESSAGE_ERE ARGS...: exit 1, nothing on stdout, stderr
# starts with "devarray: CMD: MESSAGE".
failure() {
  name=$1 cmd=$2 pattern=$3
  shift 3
  run "$@"
  if [ "$status" -ne 1 ]; then fail "$name" "exit status $status, expected 1"
  elif [ -s "$d/out" ]; then fail "$name" "stdout is not empty"
  elif ! head -1 "$d/err" | grep -Eq -- "^devarray: $cmd: $pattern"; then
    fail "$name" "stderr's first line does not start /^devarray: $cmd: $pattern/"
  else pass "$name"; fi
}

# expect NAME CONDITION...: a check on what the last run left behind.
expect() {
  name=$1
  shift
  if "$@"; then pass "$name"; else fail "$name" "$* is false"; fi
}

if [ "$section" = plot ]; then
  if ! command -v gnuplot >/dev/null 2>&1; then
    skip "bench --plot FILE.svg" "gnuplot is not installed; scripts/setup installs gnuplot-nox"
    skip "bench --plot FILE.png" "gnuplot is not installed; scripts/setup installs gnuplot-nox"
    skip "bench --json --plot FILE.png" "gnuplot is not installed; scripts/setup installs gnuplot-nox"
    exit 77
  fi
  run bench --quick --max 64K --reps 1 --plot "$d/sweep.svg"
  if [ "$status" -ne 0 ]; then fail "bench --plot FILE.svg" "exit status $status"
  elif ! grep -q "^h2d  *pinned  *65536 " "$d/out"; then fail "bench --plot FILE.svg" "no table on stdout"
  elif ! grep -q "^devarray: bench: plot: $d/sweep.svg\$" "$d/err"; then fail "bench --plot FILE.svg" "no note on stderr"
  elif ! python3 -c '
import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
sys.exit(root.tag != "{http://www.w3.org/2000/svg}svg")' "$d/sweep.svg" 2>/dev/null; then
    fail "bench --plot FILE.svg" "the file's root element is not <svg>"
  else pass "bench --plot FILE.svg"; fi
  run bench --quick --max 64K --reps 1 --plot "$d/sweep.png"
  if [ "$status" -ne 0 ]; then fail "bench --plot FILE.png" "exit status $status"
  elif ! head -c 8 "$d/sweep.png" | od -An -tx1 | grep -q "89 50 4e 47 0d 0a 1a 0a"; then
    fail "bench --plot FILE.png" "the file does not start with PNG's signature"
  else pass "bench --plot FILE.png"; fi
  run bench --quick --max 16K --reps 1 --json --plot "$d/json.PNG"
  if [ "$status" -ne 0 ]; then fail "bench --json --plot FILE.png" "exit status $status"
  elif ! python3 -c 'import json, sys; r = json.load(sys.stdin)["results"]; sys.exit(len(r) != 16)' <"$d/out" 2>/dev/null; then
    fail "bench --json --plot FILE.png" "stdout is not the JSON results"
  elif ! head -c 4 "$d/json.PNG" | od -An -tx1 | grep -q "89 50 4e 47"; then
    fail "bench --json --plot FILE.png" "no PNG written"
  else pass "bench --json --plot FILE.png"; fi
  echo "$passed passed, $failed failed, $skipped skipped"
  [ "$failed" -eq 0 ]
  exit
fi

# ---- help and version: stdout, exit 0 ---------------------------------------------
ok "--help" "^Usage: devarray " --help
ok "-h" "^Usage: devarray " -h
ok "help" "^Usage: devarray " help
for cmd in info bench report; do
  ok "$cmd --help" "^Usage: devarray $cmd" "$cmd" --help
  ok "$cmd -h" "^Usage: devarray $cmd" "$cmd" -h
  ok "help $cmd" "^Usage: devarray $cmd" help "$cmd"
done
ok "info --json --help" "^Usage: devarray info" info --json --help
ok "bench --quick --help" "^Usage: devarray bench" bench --quick --reps 3 --help
ok "report --steps 5 --help" "^Usage: devarray report" report --steps 5 --help
ok "--version" '^devarray [0-9]+\.[0-9]+\.[0-9]+$' --version
ok "-V" '^devarray [0-9]+\.[0-9]+\.[0-9]+$' -V
ok "version" '^devarray [0-9]+\.[0-9]+\.[0-9]+$' version

# ---- usage errors: stderr, exit 2 -------------------------------------------------
run
if [ "$status" -eq 2 ] && [ ! -s "$d/out" ] && grep -q "^Usage: devarray " "$d/err"; then pass "no command"
else fail "no command" "expected exit status 2 and the usage on stderr only"; fi
usage "unknown command" "" "unknown command 'frobnicate'" frobnicate
usage "help for an unknown command" "" "help: unknown command 'frobnicate'" help frobnicate
usage "unknown top-level option" "" "unrecognized option '--frobnicate'" --frobnicate
usage "info: unknown option" info "unrecognized option '--frobnicate'" info --frobnicate
usage "info: an argument" info "unexpected argument 'extra'" info extra
usage "info --json=1" info "option '--json' doesn't allow an argument" info --json=1
usage "bench: unknown option" bench "unrecognized option '--frobnicate'" bench --frobnicate
usage "bench: unknown short option" bench "invalid option -- 'x'" bench -x
usage "bench --reps without a value" bench "option '--reps' requires an argument" bench --reps
usage "report: unknown option" report "unrecognized option '--frobnicate'" report --frobnicate
usage "report: an argument" report "unexpected argument 'extra'" report extra

# ---- malformed numbers and sizes: exit 2, nothing run ------------------------------
usage "bench --reps abc" bench "--reps: 'abc' is not a whole number" bench --reps abc
usage "bench --reps=abc" bench "--reps: 'abc' is not a whole number" bench --reps=abc
usage "bench --reps -3" bench "--reps: -3 is out of range \(1 to 1000000\)" bench --reps -3
usage "bench --reps 0" bench "--reps: 0 is out of range \(1 to 1000000\)" bench --reps 0
usage "bench --reps 1.5" bench "--reps: '1.5' is not a whole number" bench --reps 1.5
usage "bench --reps ''" bench "--reps: '' is not a whole number" bench --reps ""
usage "bench --reps 99999999999999999999" bench "--reps: 99999999999999999999 is out of range.*" \
  bench --reps 99999999999999999999
usage "bench --max abc" bench "--max: 'abc' is not a size .*" bench --max abc
usage "bench --max 12Q" bench "--max: '12Q' is not a size .*" bench --max 12Q
usage "bench --max 4KX" bench "--max: '4KX' is not a size .*" bench --max 4KX
usage "bench --max 1.5M" bench "--max: '1.5M' is not a size .*" bench --max 1.5M
usage "bench --max -1" bench "--max: '-1' is not a size .*" bench --max -1
usage "bench --max 0" bench "--max: 0 is out of range \(8 to 64G\)" bench --max 0
usage "bench --max 1T" bench "--max: 1T is out of range \(8 to 64G\)" bench --max 1T
usage "bench --min 4 (too small)" bench "--min: 4 is out of range \(8 to 64G\)" bench --min 4
usage "bench --min above --max" bench "--min \(1M\) is larger than --max \(64K\)" bench --min 1M --max 64K
usage "bench --backend nope" bench "--backend: .*nope.*" bench --backend nope
usage "bench --plot with another format" bench "--plot: '.*x.pdf' is neither a .png nor a .svg name" \
  bench --plot "$d/x.pdf"
usage "report --steps abc" report "--steps: 'abc' is not a whole number" report --steps abc
usage "report --steps -1" report "--steps: -1 is out of range \(0 to 100000000\)" report --steps -1
usage "report --max 0" report "--max: 0 is out of range \(1 to 64G\)" report --max 0
usage "report --max 3MX" report "--max: '3MX' is not a size .*" report --max 3MX
usage "report --backend nope" report "--backend: .*nope.*" report --backend nope
expect "nothing written for a usage error" test ! -e "$d/x.pdf"

# ---- outputs that cannot be written: exit 1 before any work, nothing on stdout ----
# A stand-in gnuplot, so these cases do not depend on the real one.
mkdir "$d/bin" "$d/nobin"
printf '#!/bin/sh\ncat >/dev/null\necho "line 1: a stand-in gnuplot fails" >&2\nexit 1\n' >"$d/bin/gnuplot"
chmod +x "$d/bin/gnuplot"
PATH="$d/bin:$PATH"
export PATH
tool_path=$PATH
failure "report --png /nonexistent/x.png" report "cannot write '/nonexistent/x.png': No such file" \
  report --png /nonexistent/x.png
failure "report --json /nonexistent/x.json" report "cannot write '/nonexistent/x.json': No such file" \
  report --json /nonexistent/x.json
failure "report --csv /nonexistent/x.csv" report "cannot write '/nonexistent/x.csv': No such file" \
  report --csv /nonexistent/x.csv
failure "report --json DIRECTORY" report "cannot write '$d': Is a directory" report --json "$d"
failure "bench --plot /nonexistent/x.svg" bench "cannot write '/nonexistent/x.svg': No such file" \
  bench --quick --plot /nonexistent/x.svg
failure "bench --plot /nonexistent/x.png" bench "cannot write '/nonexistent/x.png': No such file" \
  bench --quick --plot /nonexistent/x.png
if [ -w /dev/full ]; then
  (cd "$d/cwd" && exec "$tool" info >/dev/full 2>"$d/err")
  status=$?
  if [ "$status" -eq 1 ] && grep -q "^devarray: write error on standard output" "$d/err"; then
    pass "info >/dev/full"
  else fail "info >/dev/full" "exit status $status, expected 1 and a write error"; fi
  run report --steps 20 --json /dev/full
  if [ "$status" -eq 1 ] && grep -q "^devarray: report: cannot write '/dev/full': No space left" "$d/err"; then
    pass "report --json /dev/full"
  else fail "report --json /dev/full" "exit status $status, expected 1 and a write error"; fi
else
  skip "info >/dev/full" "no /dev/full"
  skip "report --json /dev/full" "no /dev/full"
fi

# ---- gnuplot failing or missing: exit 1, a clear message, no file left --------------
run bench --quick --max 16K --reps 1 --plot "$d/fails.svg"
if [ "$status" -ne 1 ]; then fail "bench --plot, gnuplot fails" "exit status $status, expected 1"
elif ! grep -q "^devarray: bench: gnuplot failed (exit status 1) drawing '$d/fails.svg'" "$d/err"; then
  fail "bench --plot, gnuplot fails" "no message naming the file"
elif ! grep -q "^devarray: bench: gnuplot: line 1: a stand-in gnuplot fails" "$d/err"; then
  fail "bench --plot, gnuplot fails" "gnuplot's own message is not shown"
elif [ -e "$d/fails.svg" ]; then fail "bench --plot, gnuplot fails" "the file was left behind"
else pass "bench --plot, gnuplot fails"; fi
tool_path="$d/nobin"
failure "bench --plot, no gnuplot" bench "--plot: gnuplot was not found on PATH" \
  bench --quick --plot "$d/nogp.svg"
expect "bench --plot, no gnuplot: no file" test ! -e "$d/nogp.svg"
failure "report --png, no gnuplot" report "--png: gnuplot was not found on PATH" \
  report --png "$d/nogp.png"
tool_path=$PATH
tool_path="$d/nobin"
run report --steps 50
tool_path=$PATH
if [ "$status" -eq 0 ] && grep -q "^segment map: not drawn" "$d/out" && [ ! -e "$d/cwd/devarray-segments.png" ]; then
  pass "report without --png, no gnuplot: a note"
else fail "report without --png, no gnuplot: a note" "exit status $status"; fi

# ---- info --json ----------------------------------------------------------------------
run info --json
if [ "$status" -ne 0 ] || [ -s "$d/err" ]; then fail "info --json" "exit status $status, or stderr not empty"
elif ! python3 -c 'import json, sys; json.load(sys.stdin)' <"$d/out" 2>/dev/null; then fail "info --json" "not JSON"
else pass "info --json is JSON"; fi
cp "$d/out" "$d/info.json"
run info
cp "$d/out" "$d/info.txt"
if python3 - "$d/info.json" "$d/info.txt" <<'EOF'; then pass "info --json keys"; else fail "info --json keys" "see above"; fi
import json, re, sys
info = json.load(open(sys.argv[1]))
text = open(sys.argv[2]).read()
def need(cond, what):
    if not cond:
        print("     " + what)
        sys.exit(1)
for key in ("version", "backends", "devices", "default_backend", "kernel_cache", "options"):
    need(key in info, "no key " + key)
kc = info["kernel_cache"]
need(("error" in kc) != (kc["path"] is not None), "kernel_cache: a path or an error")
if kc["path"] is not None:
    need(isinstance(kc["entries"], int) and isinstance(kc["bytes"], int), "kernel_cache sizes")
    need("kernel cache: " + kc["path"] in text, "kernel cache path differs from devarray info")
need(re.match(r"\d+\.\d+\.\d+$", info["version"]), "version")
names = [b["name"] for b in info["backends"]]
need("host" in names, "no host backend")
for b in info["backends"]:
    need(set(b) >= {"name", "available", "status", "reason", "device"}, "backend keys: %s" % sorted(b))
    need(isinstance(b["available"], bool), "available is not a boolean")
    need((b["status"] == "DV_OK") == b["available"], "status and available disagree")
    if b["device"] is not None:
        dev = info["devices"][b["device"]]
        need(dev["backend"] == b["name"], "device %d is not %s's" % (b["device"], b["name"]))
host = next(b for b in info["backends"] if b["name"] == "host")
need(host["available"] and host["device"] is not None, "the host simulator is not available")
for dev in info["devices"]:
    for key in ("name", "vendor", "driver_version", "total_memory", "max_allocation", "base_alignment",
                "can_map_host_memory", "managed_memory", "compute_capability", "pci_bus_id", "peer_devices"):
        need(key in dev, "device key " + key)
    need(isinstance(dev["total_memory"], int) and dev["total_memory"] > 0, "total_memory")
need(info["default_backend"] in names, "default_backend")
# the host simulator's mode (issue 23): the option's value, in both listings
hm = {x["name"]: x for x in info["options"]}["host_mode"]["value"]
need(info.get("host_mode") == hm and hm in ("fast", "checked"), "host_mode %r / %r" % (info.get("host_mode"), hm))
need(re.search(r"^    mode: +%s \(option host_mode" % hm, text, re.M), "devarray info shows no host mode line")
# the same options, in the same order, as the human-readable listing
listed = re.findall(r"^  (\S+) +(DV_\S+) += ", text, re.M)
need([(o["name"], o["env"]) for o in info["options"]] == listed, "options differ from devarray info")
for o in info["options"]:
    need(set(o) >= {"name", "env", "env_fallback", "type", "default", "value", "source", "description"},
         "option keys: %s" % sorted(o))
    need(o["source"] in ("default", "env", "env_numba", "api"), "source " + o["source"])
EOF
for m in fast checked; do
  DV_HOST_MODE=$m
  export DV_HOST_MODE
  run info
  unset DV_HOST_MODE
  if grep -q "^    mode: *$m (option host_mode" "$d/out"; then pass "info: host_mode=$m shown"
  else fail "info: host_mode=$m shown" "no mode line saying $m"; fi
done
DV_LOG_LEVEL=debug
export DV_LOG_LEVEL
run info --json
unset DV_LOG_LEVEL
if python3 -c '
import json, sys
o = {x["name"]: x for x in json.load(sys.stdin)["options"]}["log_level"]
sys.exit(not (o["value"] == "debug" and o["source"] == "env"))' <"$d/out" 2>/dev/null; then
  pass "info --json: an option from the environment"
else fail "info --json: an option from the environment" "log_level is not debug from env"; fi

echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
