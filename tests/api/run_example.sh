#!/bin/sh
# run_example.sh BACKEND PROGRAM [ARGS...]: run a kernel example on BACKEND;
# exit 77 (skipped) when the backend is not available here or cannot run
# kernels, with the reason on stdout.
be="$1"; prog="$2"; shift 2
dir=$(dirname "$prog")
out=$("$prog" --backend "$be" "$@" 2>&1); rc=$?
echo "$out"
if [ $rc -ne 0 ]; then
  case "$out" in
    *"context_create"*"DV_ERR_BACKEND_UNAVAILABLE"*|*"context_create"*"DV_ERR_LIBRARY_LOAD"*|\
    *"DV_ERR_NOT_SUPPORTED"*"cannot run kernels"*|*"DV_ERR_NO_COMPILER"*)
      echo "skipped: $be is not available for kernels here"; exit 77 ;;
  esac
fi
exit $rc
