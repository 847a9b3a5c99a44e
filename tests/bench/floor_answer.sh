#!/usr/bin/env bash
# What each part of symdexd's Resolve answer costs the transport: four
# floor_server processes (tests/bench/load/floor_server.cc: symdexd's own answers served by gRPC
# alone) answering with the whole answer, without target_info, without target_info and the
# trailer, and with nothing; ROUNDS rounds, the four alternating, each a Health/Check run then a
# Resolve run of SECS seconds with 16 clients (build/bin/daemon_load). Prints each server's median
# Resolve / Health calls/s ratio, its range, and the median p99 ratio.
#   tests/bench/floor_answer.sh [SECS=4] [ROUNDS=8]
# Index: vmlinux only (System.map + the -dbg package's vmlinux), the 4,096 specs: canonical specs of
# its text symbols, shuffled with a fixed seed (as daemon_load.sh's warmed set).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
SECS=${1:-4}
ROUNDS=${2:-8}
B=$top/build/bin
for b in symdex symdexd daemon_load floor_server; do
  [ -x "$B/$b" ] || { echo "floor_answer.sh: $B/$b not built (cmake --build build)" >&2; exit 2; }
done
# shellcheck source=tests/bench/lib.sh
. "$here/lib.sh"
bench_corpus
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

"$B/symdex" --db "$work/v.db" index -q --json --system-map "$MAP" --debug-dir "$DEBUG_DIR" >"$work/index.json"
TARGET=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["target"])' <"$work/index.json")
"$B/symdex" --db "$work/v.db" symbols --canonical --json -t "$TARGET" | python3 -c '
import json, random, sys
specs = sorted({s["canonical"] for s in json.load(sys.stdin)["symbols"]})
random.Random(1).shuffle(specs)
print("\n".join(specs[:4096]))' >"$work/specs.txt"

"$B/symdexd" --listen "unix:$work/d.sock" --db "$work/v.db" --no-index-live --modules-poll 0 >"$work/d.log" 2>&1 &
dpid=$!
pids+=("$dpid")
for _ in $(seq 300); do [ -S "$work/d.sock" ] && break; sleep 0.1; done
variants=(whole no_target_info no_target_info_no_trailer nothing)
declare -A without=([whole]="" [no_target_info]="--without TARGET_INFO"
  [no_target_info_no_trailer]="--without TARGET_INFO --without TRAILER"
  [nothing]="--without TARGET_INFO --without TRAILER --without MATCH")
for v in "${variants[@]}"; do
  # shellcheck disable=SC2086  # the --without flags are words
  "$B/floor_server" --listen "unix:$work/$v.sock" --upstream "unix:$work/d.sock" --target "$TARGET" \
    --inputs "$work/specs.txt" ${without[$v]} 2>"$work/$v.log" &
  pids+=("$!")
done
for v in "${variants[@]}"; do
  for _ in $(seq 300); do [ -S "$work/$v.sock" ] && break; sleep 0.1; done
  [ -S "$work/$v.sock" ] || { echo "floor_server ($v) did not start:" >&2; cat "$work/$v.log" >&2; exit 1; }
done
kill "$dpid"  # the answers are kept; symdexd would only share the CPUs from here on

one() {  # one VARIANT RPC [args]: "calls/s p99_us" of a run
  local v=$1 rpc=$2
  shift 2
  "$B/daemon_load" --connect "unix:$work/$v.sock" --target "$TARGET" --rpc "$rpc" --seconds "$SECS" \
    --clients 16 --json "$@" 2>/dev/null |
    python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["qps"], d["latency_us"]["p99"])'
}
for r in $(seq "$ROUNDS"); do
  for v in "${variants[@]}"; do
    h=$(one "$v" health)
    x=$(one "$v" resolve --inputs "$work/specs.txt")
    echo "$r $v $h $x" >>"$work/results"
    echo "$r $v $h $x" | awk '{printf "  round %s %-26s Health %6.0f/s  Resolve %6.0f/s  ratio %.2f  p99 ratio %.2f\n",
                                    $1, $2, $3, $5, $5 / $3, $6 / $4}' >&2
  done
done
python3 - "$work" "$KREL" "$SECS" "$ROUNDS" "${variants[@]}" <<'EOF'
import re, statistics, sys
w, krel, secs, rounds, *variants = sys.argv[1:]
rows = [l.split() for l in open(f'{w}/results')]
size = {}
for v in variants:
    m = re.search(r'([\d.]+) bytes each', open(f'{w}/{v}.log').read())
    size[v] = m.group(1) if m else '?'
print(f"floor_server answering Resolve for vmlinux of {krel}: {rounds} rounds, Health/Check then Resolve, {secs} s each, 16 clients")
print(f"  {'answer':<28} {'bytes':>6}  {'Resolve/Health calls/s: median (range)':<40} p99 ratio median")
for v in variants:
    q = [float(r[4]) / float(r[2]) for r in rows if r[1] == v]
    p = [float(r[5]) / float(r[3]) for r in rows if r[1] == v]
    print(f"  {v:<28} {size[v]:>6}  {statistics.median(q):4.2f} ({min(q):.2f}-{max(q):.2f}){'':<26} {statistics.median(p):4.2f}")
print("  (the goal: symdexd's Resolve at >= 0.9x Health/Check's calls/s; these servers run no symdex code)")
EOF
