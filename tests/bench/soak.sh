#!/usr/bin/env bash
# Soak: symdexd serving the Debian cloud kernel (vmlinux + 1,121 modules with DWARF) to 64 honest
# clients for SOAK_SECONDS while a hostile local user (uid nobody, member of a privileged group:
# it may symbolize) bursts every BURST_EVERY seconds: 500 ListDuplicates streams never read, 20
# SymbolizeStreams of 65,536 addresses never read, 200 connections of garbage bytes, each held
# 10 s (tests/hardening/hostile_client). The daemon's RSS is sampled every second.
#   tests/bench/soak.sh                  # 10 minutes (what README "Access and limits" quotes)
#   SOAK_SECONDS=60 tests/bench/soak.sh  # a short run
# Prints, per honest client group (Which / Resolve / Symbolize, 64 clients in all), calls/s,
# p50/p99/max and errors; the hostile bursts' outcomes; RSS min / median / max and VmHWM.
# Exits 1 if an honest call failed or the daemon died. Not part of CI (it runs for minutes).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
SYMDEX=${SYMDEX:-$top/build/bin/symdex}
SYMDEXD=${SYMDEXD:-$top/build/bin/symdexd}
DAEMON_LOAD=${DAEMON_LOAD:-$top/build/bin/daemon_load}
HOSTILE=${HOSTILE:-$top/build/bin/hostile_client}
SECS=${SOAK_SECONDS:-600}
BURST_EVERY=${BURST_EVERY:-30}
for b in "$SYMDEX" "$SYMDEXD" "$DAEMON_LOAD" "$HOSTILE"; do
  [ -x "$b" ] || { echo "soak.sh: $b not built (cmake --build build)" >&2; exit 2; }
done
[ "$(id -u)" = 0 ] || { echo "soak.sh: run as root (the hostile client runs as nobody through setpriv)" >&2; exit 2; }
# shellcheck source=tests/bench/lib.sh
. "$here/lib.sh"

work=$(mktemp -d)
chmod 0755 "$work"
daemon_pid=
cleanup() {
  if [ -n "$daemon_pid" ] && kill -0 "$daemon_pid" 2>/dev/null; then kill -KILL "$daemon_pid" 2>/dev/null || true; fi
  jobs -p | xargs -r kill 2>/dev/null || true
  if [ "${KEEP:-0}" = 1 ]; then echo "work dir kept: $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT

bench_corpus
echo "== indexing $KREL" >&2
bench_index "$SYMDEX" "$work/idx.db" >"$work/index.json"
TARGET=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["target"])' <"$work/index.json")
awk '$2=="t"||$2=="T"{print "0x"$1}' "$MAP" | sort -u | shuf --random-source=<(yes) >"$work/addrs.txt"
"$SYMDEX" --db "$work/idx.db" --json dups -t "$TARGET" |
  python3 -c 'import json,sys; [print(g["name"]) for g in json.load(sys.stdin)["duplicates"]]' >"$work/names.txt"
"$SYMDEX" --db "$work/idx.db" symbols --canonical --json -t "$TARGET" |
  python3 -c 'import json,sys; [print(s["canonical"]) for s in json.load(sys.stdin)["symbols"][::7]]' >"$work/specs.txt"
base=$(head -1 "$work/addrs.txt" | sed 's/^0x//')

sock=$work/symdexd.sock
"$SYMDEXD" --listen "unix:$sock" --socket-mode 0666 --privileged-group nogroup --db "$work/idx.db" \
  --no-index-live --modules-poll 0 >"$work/symdexd.log" 2>&1 &
daemon_pid=$!
for _ in $(seq 600); do [ -S "$sock" ] && break; sleep 0.1; done
[ -S "$sock" ] || { tail -n 30 "$work/symdexd.log" >&2; exit 1; }

# RSS every second.
( while kill -0 "$daemon_pid" 2>/dev/null; do
    awk '$1=="VmRSS:"{print $2}' "/proc/$daemon_pid/status" 2>/dev/null || true
    sleep 1
  done ) >"$work/rss.kb" &

echo "== $SECS s: 64 honest clients (22 Which, 21 Resolve, 21 Symbolize x64), hostile bursts every $BURST_EVERY s" >&2
load() {  # NAME CLIENTS daemon_load-args...
  local name=$1 n=$2
  shift 2
  "$DAEMON_LOAD" --connect "unix:$sock" --target "$TARGET" --clients "$n" --seconds "$SECS" --json \
    --max-metadata-kb 1024 "$@" >"$work/$name.json" 2>"$work/$name.err" || echo $? >"$work/$name.rc"
}
load which 22 --rpc which --inputs "$work/names.txt" &
l1=$!
load resolve 21 --rpc resolve --inputs "$work/specs.txt" &
l2=$!
load symbolize 21 --rpc symbolize --batch 64 --inputs "$work/addrs.txt" &
l3=$!

bursts=0
start=$(date +%s)
while [ $(( $(date +%s) - start )) -lt $(( SECS - 15 )) ]; do
  sleep "$BURST_EVERY"
  bursts=$((bursts + 1))
  h="setpriv --reuid=65534 --regid=65534 --clear-groups $HOSTILE --connect unix:$sock --hold 10 --base $base"
  $h abandon-dups 500 >>"$work/hostile.jsonl" 2>&1 &
  $h unread-streams 20 65536 >>"$work/hostile.jsonl" 2>&1 &
  $h garbage 200 >>"$work/hostile.jsonl" 2>&1 &
  kill -0 "$daemon_pid" 2>/dev/null || { echo "symdexd died" >&2; tail -n 30 "$work/symdexd.log" >&2; exit 1; }
done
wait "$l1" "$l2" "$l3" || true
sleep 12  # the last burst's hold
hwm=$(awk '$1=="VmHWM:"{print $2}' "/proc/$daemon_pid/status")
kill -TERM "$daemon_pid"
wait "$daemon_pid" 2>/dev/null && drc=0 || drc=$?

python3 - "$work" "$hwm" "$bursts" "$drc" <<'EOF'
import json, statistics, sys
w, hwm, bursts, drc = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
failed = False
print(f"{'rpc':10} {'clients':>7} {'calls/s':>9} {'p50 ms':>7} {'p99 ms':>7} {'max ms':>8} {'errors':>7}")
for name, n in (("which", 22), ("resolve", 21), ("symbolize", 21)):
    try:
        j = json.load(open(f"{w}/{name}.json"))
    except Exception as e:
        print(f"{name}: no result ({e}); stderr: {open(f'{w}/{name}.err').read()[-500:]}")
        failed = True
        continue
    lat = {k: v / 1000 for k, v in j.get("latency_us", {}).items()}
    errors = j.get("failures", 0)
    failed |= errors > 0
    print(f"{name:10} {n:7} {j.get('qps', 0):9.0f} {lat.get('p50', 0):7.2f} {lat.get('p99', 0):7.2f} "
          f"{lat.get('max', 0):8.1f} {errors:7}  {j.get('codes')}")
codes = {}
for line in open(f"{w}/hostile.jsonl"):
    try:
        h = json.loads(line)
    except ValueError:
        continue
    for k, v in h["codes"].items():
        codes[(h["mode"], k)] = codes.get((h["mode"], k), 0) + v
print(f"hostile bursts: {bursts}; outcomes: " + ", ".join(f"{m} {k} {v}" for (m, k), v in sorted(codes.items())))
rss = [int(x) for x in open(f"{w}/rss.kb") if x.strip()]
if rss:
    print(f"daemon RSS: min {min(rss)//1024} MB, median {statistics.median(rss)//1024:.0f} MB, "
          f"max {max(rss)//1024} MB; VmHWM {hwm//1024} MB; samples {len(rss)}")
print(f"symdexd exit after SIGTERM: {drc}")
failed |= drc != 0
sys.exit(1 if failed else 0)
EOF
