#!/usr/bin/env bash
# The test suite on a busy machine: two CPU hogs (busy loops, one per core of a 2-core machine)
# run beside it the whole time, the way a shared build machine looks. The suite must pass so:
# its tests wait on events and conditions, never on how fast the machine is. Run it before a
# change that touches how a test waits.
#
#   scripts/test-busy.sh [-n RUNS] [-k HOGS] [COMMAND...]
#     -n RUNS   run COMMAND this many times in a row; stop at the first failure (default 1)
#     -k HOGS   busy loops beside it (default 2)
#     COMMAND   default: scripts/test.sh (README command 2: every test, sanitized build, fuzzers);
#               e.g. `SYMDEX_QUICK=1 scripts/test.sh` or `ctest --preset default -R Daemon`
#
# Exit: 0 every run passed, else the failing run's exit code. Each run's output goes to
# test-busy.N.log in $TMPDIR (kept), the last lines of a failing one to stderr.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=1
hogs=2
while getopts "n:k:h" opt; do
  case $opt in
    n) runs=$OPTARG ;;
    k) hogs=$OPTARG ;;
    *) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ $# -gt 0 ] || set -- scripts/test.sh

pids=()
stop_hogs() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap stop_hogs EXIT
for ((i = 0; i < hogs; i++)); do
  # A shell busy loop: all CPU, no memory, no I/O; at the same priority as the suite.
  bash -c 'while :; do :; done' &
  pids+=($!)
done
echo "test-busy: $hogs busy loops (pids ${pids[*]}) beside $runs run(s) of: $*"
logdir=${TMPDIR:-/tmp}
for ((r = 1; r <= runs; r++)); do
  log=$logdir/test-busy.$r.log
  start=$(date +%s)
  status=0
  "$@" >"$log" 2>&1 || status=$?
  echo "test-busy: run $r of $runs: exit $status after $(($(date +%s) - start)) s (log: $log)"
  if [ "$status" -ne 0 ]; then
    tail -n 40 "$log" >&2
    exit "$status"
  fi
done
echo "test-busy: all $runs run(s) passed with $hogs busy loops beside them"
