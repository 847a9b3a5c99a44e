#!/usr/bin/env bash
# kill -9 during `symdex index`, 10 times, on the real Debian cloud kernel (System.map, 1,121
# modules, the -dbg package's DWARF and the address map): after every kill the previous index is
# intact (PRAGMA integrity_check ok, the same answers byte for byte), no temporary address map is
# left for good (the next index run removes it), and a final index run completes.
#   tests/hardening/kill_during_index.sh build/bin/symdex [KILLS]
set -euo pipefail
symdex=$(readlink -f "$1")
kills=${2:-10}
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/bench/lib.sh
. "$here/../bench/lib.sh"
bench_corpus >/dev/null

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
db=$work/index.db
fail=0
index() { "$symdex" --db "$db" index -q --system-map "$MAP" --modules-dir "$MODS" --debug-dir "$DEBUG_DIR" --no-debuginfod "$@"; }
answers() {  # what must not change: duplicated names, one lookup each way, an address
  "$symdex" --db "$db" --local dups | tail -1
  "$symdex" --db "$db" --local which name_show
  "$symdex" --db "$db" --local resolve name_show@drivers/pnp/card.c
  "$symdex" --db "$db" --local addr 0xffffffff81760ed4
}

index
answers >"$work/before.txt"
# A re-index (symbols re-read and stored as a new generation, debug files reused by build-ID,
# the address map rebuilt: it is removed first) is what gets killed, at a random point of it.
rm -rf "$db-addrmaps"
start=$(date +%s.%N)
index
full=$(echo "$(date +%s.%N) - $start" | bc)
echo "re-index: ${full} s; killing $kills re-index runs at random points of their first 80%"
killed=0
i=0
while [ "$killed" -lt "$kills" ] && [ "$i" -lt $((kills * 3)) ]; do
  i=$((i + 1))
  rm -rf "$db-addrmaps"
  answers >"$work/before-$i.txt"
  delay=$(python3 -c "import random; print(round(random.uniform(0.05, 0.8) * $full, 2))")
  # symdex itself in the background, not a subshell running index(): $! must be symdex's pid,
  # or the kill hits the subshell and symdex runs on, orphaned (it did: the runs were never
  # killed, and the orphan's address maps raced the next iteration's rm).
  "$symdex" --db "$db" index -q --system-map "$MAP" --modules-dir "$MODS" --debug-dir "$DEBUG_DIR" --no-debuginfod \
    >/dev/null 2>&1 &
  pid=$!
  sleep "$delay"
  if kill -KILL "$pid" 2>/dev/null; then
    state="killed at ${delay} s"
    killed=$((killed + 1))
  else
    state="had finished before ${delay} s: not counted"
  fi
  wait "$pid" 2>/dev/null || true
  check=$(sqlite3 "$db" "PRAGMA integrity_check;")
  answers >"$work/after-$i.txt"
  if [ "$check" != "ok" ]; then
    echo "FAIL  run $i ($state): integrity_check: $check"; fail=1
  elif ! cmp -s "$work/before-$i.txt" "$work/after-$i.txt"; then
    echo "FAIL  run $i ($state): answers changed"; diff "$work/before-$i.txt" "$work/after-$i.txt" | head -20; fail=1
  else
    echo "ok    run $i ($state): integrity ok, answers unchanged"
  fi
done
if [ "$killed" -lt "$kills" ]; then echo "FAIL  only $killed of $kills runs were killed mid-way"; fail=1; fi
index
answers >"$work/final.txt"
if cmp -s "$work/before.txt" "$work/final.txt"; then echo "ok    final index: same answers as the first"; else
  echo "FAIL  final index: answers differ"; diff "$work/before.txt" "$work/final.txt" | head; fail=1; fi
left=$(find "$db-addrmaps" -name '*.tmp.*' 2>/dev/null | wc -l)
if [ "$left" -eq 0 ]; then echo "ok    no temporary address map left after the final index"; else
  echo "FAIL  $left temporary address map(s) left: $(ls "$db-addrmaps")"; fail=1; fi
exit $fail
