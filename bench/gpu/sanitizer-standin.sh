#!/bin/sh
# A stand-in for compute-sanitizer in `bench/gpu/run.sh dry` only (no GPU,
# no toolkit sanitizer): it takes the options run.sh gives the real one,
# refuses any it would not know (so a mistyped option fails here, not in the
# GPU lease), runs the program as the sanitizer would start it, and prints
# the summary line run.sh reads.  It checks NO memory: its "0 errors" says
# only that the program ran.
#
#   sanitizer-standin.sh --tool memcheck --report-api-errors no \
#       --leak-check full --error-exitcode N PROGRAM [ARGS...]
set -u
tool=
while [ $# -gt 0 ]; do
  case "$1" in
    --tool)
      case "${2:-}" in memcheck | racecheck | initcheck | synccheck) tool=$2 ;; *) echo "stand-in: bad --tool '${2:-}'" >&2; exit 2 ;; esac
      shift 2 ;;
    --report-api-errors)
      case "${2:-}" in all | explicit | no) ;; *) echo "stand-in: bad --report-api-errors '${2:-}'" >&2; exit 2 ;; esac
      shift 2 ;;
    --leak-check)
      case "${2:-}" in full | no) ;; *) echo "stand-in: bad --leak-check '${2:-}'" >&2; exit 2 ;; esac
      shift 2 ;;
    --error-exitcode)
      case "${2:-}" in '' | *[!0-9]*) echo "stand-in: bad --error-exitcode '${2:-}'" >&2; exit 2 ;; esac
      shift 2 ;;
    --*) echo "stand-in: option $1 is not one run.sh uses" >&2; exit 2 ;;
    *) break ;;
  esac
done
[ -n "$tool" ] || { echo "stand-in: no --tool" >&2; exit 2; }
[ $# -gt 0 ] || { echo "stand-in: no program" >&2; exit 2; }
echo "========= COMPUTE-SANITIZER stand-in ($tool; checks nothing)"
"$@"
rc=$?
echo "========= ERROR SUMMARY: 0 errors (stand-in)"
exit $rc
