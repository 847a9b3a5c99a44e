#!/usr/bin/env bash
# An index run of the real Debian cloud kernel (System.map, 1,121 modules, the -dbg package's
# DWARF, the address maps) killed with SIGKILL at every named point of its pipeline — and at a
# random position inside each — loses nothing: after every kill the previous index is intact
# (PRAGMA integrity_check ok, the same answers byte for byte), and an index run afterwards
# completes with the answers of one never interrupted.
#
#   tests/hardening/kill_during_index.sh build/bin/symdex-faults [EXTRA_KILLS]
#
# The run kills itself: symdex-faults (tests/hardening/fault_main.cc) is symdex with the fault
# points of server/common/fault_point.h armed by SYMDEX_FAULT_KILL=POINT#N[@AFTER], so a kill
# lands at the point it names whatever the machine's speed or load; a run that ends without
# reaching its point fails the test. One traced run of each kind first counts how often each
# point is reached; positions are drawn from those counts (KILL_SEED=N repeats a draw).
#
# Two kinds of run, each from the same bytes every time (a copy), so the counts hold:
#   re-index   the index holds this kernel; symbols read again, debug files reused by build-ID,
#              the address maps rebuilt (removed first), the target replaced in one commit.
#   first      the index holds the kernel without debug info; every debug file is parsed and
#              stored (vmlinux as it is read, in its own transaction; each module in its own).
set -euo pipefail
symdex=$(readlink -f "$1")
extra=${2:-4}
seed=${KILL_SEED:-$RANDOM}
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/bench/lib.sh
. "$here/../bench/lib.sh"
bench_corpus >/dev/null

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0
index() {  # index DB [flags...]
  local db=$1
  shift
  "$symdex" --db "$db" index -q --system-map "$MAP" --modules-dir "$MODS" --debug-dir "$DEBUG_DIR" --no-debuginfod "$@"
}
answers() {  # what must not change: duplicated names, one lookup each way, an address
  local q out rc
  for q in "dups" "which name_show" "resolve name_show@drivers/pnp/card.c" "addr 0xffffffff81760ed4"; do
    # shellcheck disable=SC2086  # the query's words
    out=$("$symdex" --db "$1" --local $q 2>&1) && rc=0 || rc=$?
    printf '%s\nexit %s\n' "$(tail -n 12 <<<"$out")" "$rc"
  done
}
fresh_copy() {  # fresh_copy FROM TO: the index in one file (its WAL checkpointed), no address maps
  sqlite3 "$1" 'PRAGMA wal_checkpoint(TRUNCATE);' >/dev/null
  rm -rf "$2" "$2-wal" "$2-shm" "$2-addrmaps"
  cp "$1" "$2"
}

# The two starting points.
index "$work/full.db"
answers "$work/full.db" >"$work/full.txt"
index "$work/bare.db" --no-debuginfo
answers "$work/bare.db" >"$work/bare.txt"
cmp -s "$work/full.txt" "$work/bare.txt" && { echo "FAIL  answers with and without debug info are the same: the check below could not tell"; exit 1; }

# One traced run of each kind: every point reached, in order, run-length encoded.
fresh_copy "$work/full.db" "$work/run.db"
SYMDEX_FAULT_TRACE=$work/trace.reindex index "$work/run.db"
fresh_copy "$work/bare.db" "$work/run.db"
SYMDEX_FAULT_TRACE=$work/trace.first index "$work/run.db"

# The stages: KIND POINT[@AFTER] — what is killed, and what must survive it.
stages=(
  "reindex symbols-read"                     # symbols read, nothing written yet
  "reindex symbols-joined"                   # the DWARF join done, in memory
  "reindex probes-judged"                    # the probe verdicts done, in memory
  "reindex target-module-row"                # inside the target's transaction: module rows
  "reindex target-symbol-row"                # ... symbol rows
  "reindex target-commit"                    # all rows in, the commit next
  "reindex sqlite-wal-write@target-commit"   # the commit writing the WAL
  "reindex target-committed"                 # committed, the WAL not yet checkpointed
  "reindex sqlite-db-write@target-committed" # the checkpoint writing the database file
  "reindex checkpointed"
  "reindex addr-map-temp"                    # an address map written, not yet renamed into place
  "reindex addr-map-installed"               # an address map in place, the run not finished
  "first debug-file-parsed"                  # a module's DWARF parsed, not stored
  "first debug-rows-streamed"                # vmlinux's rows going in, its transaction open
  "first debug-file-stored"                  # a debug file committed under its build-ID
)

# How often a run of KIND reaches POINT (after AFTER's first time), from its trace.
reached() {  # reached KIND POINT [AFTER]
  awk -v p="$2" -v a="${3:-}" 'a == "" || seen { if ($1 == p) n += $2 } $1 == a { seen = 1 } END { print n + 0 }' \
    "$work/trace.$1"
}

kill_run() {  # kill_run KIND POINT[@AFTER] N
  local kind=$1 stage=$2 n=$3 point after spec db=$work/run.db status=0 state
  point=${stage%@*}
  after=$([ "$point" != "$stage" ] && echo "${stage#*@}" || true)
  spec="$point#$n${after:+@$after}"
  if [ "$kind" = reindex ]; then fresh_copy "$work/full.db" "$db"; else fresh_copy "$work/bare.db" "$db"; fi
  rm -f "$work/fault.log"
  SYMDEX_FAULT_KILL=$spec SYMDEX_FAULT_LOG=$work/fault.log index "$db" >"$work/run.out" 2>&1 || status=$?
  if [ "$status" -ne 137 ] || ! grep -qxF "killed at $spec" "$work/fault.log" 2>/dev/null; then
    echo "FAIL  $kind $spec: not killed there (exit $status: $(tail -c 300 "$work/run.out"))"
    fail=1
    return
  fi
  state=$(sqlite3 "$db" "PRAGMA integrity_check;")
  answers "$db" >"$work/after.txt"
  local want=$work/full.txt
  [ "$kind" = first ] && want=$work/bare.txt
  if [ "$state" != ok ]; then
    echo "FAIL  $kind killed at $spec: integrity_check: $state"
    fail=1
  elif ! cmp -s "$want" "$work/after.txt"; then
    echo "FAIL  $kind killed at $spec: answers changed"
    diff "$want" "$work/after.txt" | head -20 || true
    fail=1
  else
    echo "ok    $kind killed at $spec: integrity ok, answers unchanged"
  fi
}

echo "seed $seed (KILL_SEED=$seed repeats these positions)"
RANDOM=$seed
runs=()
for s in "${stages[@]}"; do runs+=("$s"); done
for ((i = 0; i < extra; i++)); do runs+=("${stages[RANDOM % ${#stages[@]}]}"); done
for r in "${runs[@]}"; do
  read -r kind stage <<<"$r"
  point=${stage%@*}
  after=$([ "$point" != "$stage" ] && echo "${stage#*@}" || true)
  count=$(reached "$kind" "$point" "$after")
  if [ "$count" -eq 0 ]; then
    echo "FAIL  $kind $stage: the traced run never reached it"
    fail=1
    continue
  fi
  # Positions spread over the whole stage: (RANDOM * 32768 + RANDOM) covers counts past 32767.
  kill_run "$kind" "$stage" $(((RANDOM * 32768 + RANDOM) % count + 1))
done

# A run killed with a debug file half stored, then completed: the files stored by the killed
# run are reused, and the answers are those of an index never interrupted.
count=$(reached first debug-file-stored)
kill_run first debug-file-stored $((count / 2 + 1))
index "$work/run.db"
answers "$work/run.db" >"$work/after.txt"
if cmp -s "$work/full.txt" "$work/after.txt"; then echo "ok    first run completed after a kill: the answers of one never killed"; else
  echo "FAIL  first run completed after a kill: answers differ"; diff "$work/full.txt" "$work/after.txt" | head || true; fail=1; fi

# A run killed with an address map's temporary file written, then completed (maps kept): the
# temporary file is removed and the answers are the same.
count=$(reached reindex addr-map-temp)
kill_run reindex addr-map-temp $((count / 2 + 1))
left=$(find "$work/run.db-addrmaps" -name '*.tmp.*' | wc -l)
[ "$left" -gt 0 ] || { echo "FAIL  a run killed at addr-map-temp left no temporary file: the check below could not tell"; fail=1; }
index "$work/run.db"
answers "$work/run.db" >"$work/after.txt"
if cmp -s "$work/full.txt" "$work/after.txt"; then echo "ok    re-index completed after a kill: same answers"; else
  echo "FAIL  re-index completed after a kill: answers differ"; diff "$work/full.txt" "$work/after.txt" | head || true; fail=1; fi
left=$(find "$work/run.db-addrmaps" -name '*.tmp.*' | wc -l)
if [ "$left" -eq 0 ]; then echo "ok    no temporary address map left after the completed run"; else
  echo "FAIL  $left temporary address map(s) left: $(ls "$work/run.db-addrmaps")"; fail=1; fi
exit $fail
