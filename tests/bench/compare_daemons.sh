#!/usr/bin/env bash
# Two builds' symdexd on one index, alternated, under the same load: what a refactoring that must
# not slow the daemon is held to (its product figures are tests/bench/daemon_load.sh's).
#   tests/bench/compare_daemons.sh OLD_BIN_DIR NEW_BIN_DIR INDEX [ROUNDS]
# Each round starts each build's symdexd in turn and runs build/bin/daemon_load against it:
# Symbolize (16 clients, batches of 64 of the index's vmlinux text addresses) and Which (16
# clients, the text symbols' names), SECONDS_PER_RPC (10) each. Prints calls/s per build and round,
# and the new/old ratio of their sums.
set -euo pipefail
[ $# -ge 3 ] || { sed -n 2,8p "$0" >&2; exit 2; }
old=$1 new=$2 db=$3 rounds=${4:-3}
top=$(cd "$(dirname "$0")/../.." && pwd)
load=${DAEMON_LOAD:-$top/build/bin/daemon_load}
secs=${SECONDS_PER_RPC:-10}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$new/symdex" --db "$db" kallsyms 2>/dev/null | awk '$2=="t"||$2=="T"{print "0x"$1 > "'"$work"'/addrs.txt"; print $3 > "'"$work"'/names.txt"}'
qps() { python3 -c 'import json,sys; print(json.load(sys.stdin)["qps"])'; }
declare -A sum
for round in $(seq "$rounds"); do
  for tag in old new; do
    bin=$old; [ "$tag" = new ] && bin=$new
    sock=$work/$tag.sock
    "$bin/symdexd" --listen "unix:$sock" --db "$db" --no-index-live --modules-poll 0 >"$work/$tag.log" 2>&1 &
    pid=$!
    for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
    s=$("$load" --connect "unix:$sock" --rpc symbolize --clients 16 --seconds "$secs" --warmup 2 \
          --inputs "$work/addrs.txt" --batch 64 --json 2>/dev/null | qps)
    w=$("$load" --connect "unix:$sock" --rpc which --clients 16 --seconds "$secs" --warmup 2 \
          --inputs "$work/names.txt" --json 2>/dev/null | qps)
    kill "$pid"; wait "$pid" || true
    echo "round $round $tag: symbolize $s calls/s, which $w calls/s"
    sum[$tag.s]=$(python3 -c "print(${sum[$tag.s]:-0} + $s)")
    sum[$tag.w]=$(python3 -c "print(${sum[$tag.w]:-0} + $w)")
  done
done
python3 -c "print(f'new/old: symbolize {${sum[new.s]}/${sum[old.s]}:.3f}, which {${sum[new.w]}/${sum[old.w]}:.3f}')"
