#!/bin/sh
# run_mpi.sh MPIRUN NP PROGRAM ARGS...: run PROGRAM on NP ranks of this
# machine.  Skipped (77) without mpirun.  As root (CI containers) Open MPI
# wants --allow-run-as-root; --oversubscribe lets 4 ranks share 2 cores.
# Under AddressSanitizer, Open MPI's own leaks are suppressed through
# tests/lsan.supp (DV_MPI_LSAN_SUPP); devarray's never are.
set -u
mpirun="$1"
np="$2"
shift 2
if [ -z "$mpirun" ] || ! command -v "$mpirun" >/dev/null 2>&1; then
  echo "SKIPPED: mpirun not found (scripts/setup installs openmpi-bin)"
  exit 77
fi
root=""
if [ "$(id -u)" = 0 ]; then
  root="--allow-run-as-root"
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
if [ -n "${DV_MPI_LSAN_SUPP:-}" ]; then
  export LSAN_OPTIONS="suppressions=$DV_MPI_LSAN_SUPP:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
fi
export ASAN_OPTIONS="fast_unwind_on_malloc=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
# Containers often forbid the cross-memory-attach syscalls that the shared-
# memory transport would use for large messages; copy through the buffer.
export OMPI_MCA_btl_vader_single_copy_mechanism=none
# Quiet the "no network interface" style warnings of a bare container.
export OMPI_MCA_btl_base_warn_component_unused=0
# shellcheck disable=SC2086
exec "$mpirun" $root --oversubscribe --bind-to none -np "$np" "$@"
