#!/usr/bin/env bash
# What a hostile local user costs honest clients: symdexd serving the Debian cloud kernel
# (vmlinux + 1,121 modules with DWARF) to CLIENTS honest clients (Which, Resolve and Symbolize
# x64, a third each) for SECONDS, first alone ("quiet"), then while a hostile peer (uid nobody,
# member of a privileged group: it may symbolize) holds 500 ListDuplicates streams never read,
# 20 SymbolizeStreams of 65,536 addresses never read and sends 200 connections of garbage
# (tests/hardening/hostile_client, its calls held until the loud run is over) ("loud").
#   tests/bench/hostile_latency.sh            # as root (the hostile client runs through setpriv)
#   SECONDS_PER_RUN=10 CLIENTS=16 tests/bench/hostile_latency.sh
# Prints each RPC's calls/s and p99 quiet and loud and their ratio. The test
# (tests/hardening/daemon_hostile_test.cc) holds the limits and that no honest call fails; this is
# where the latency figure is measured, on a machine doing nothing else. Exits 1 if an honest call
# failed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
SYMDEX=${SYMDEX:-$top/build/bin/symdex}
SYMDEXD=${SYMDEXD:-$top/build/bin/symdexd}
DAEMON_LOAD=${DAEMON_LOAD:-$top/build/bin/daemon_load}
HOSTILE=${HOSTILE:-$top/build/bin/hostile_client}
SECS=${SECONDS_PER_RUN:-10}
CLIENTS=${CLIENTS:-16}
for b in "$SYMDEX" "$SYMDEXD" "$DAEMON_LOAD" "$HOSTILE"; do
  [ -x "$b" ] || { echo "hostile_latency.sh: $b not built (cmake --build build)" >&2; exit 2; }
done
[ "$(id -u)" = 0 ] || { echo "hostile_latency.sh: run as root (the hostile client runs as nobody)" >&2; exit 2; }
# shellcheck source=tests/bench/lib.sh
. "$here/lib.sh"

work=$(mktemp -d)
chmod 0755 "$work"
daemon_pid=
cleanup() {
  touch "$work/gates/release" 2>/dev/null || true
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

third=$(((CLIENTS + 2) / 3))
run() {  # run LABEL: the three honest loads side by side for SECS
  local label=$1 pids=()
  load() {
    "$DAEMON_LOAD" --connect "unix:$sock" --target "$TARGET" --clients "$third" --seconds "$SECS" --json \
      --max-metadata-kb 1024 "${@:2}" >"$work/$label-$1.json" 2>"$work/$label-$1.err" || true
  }
  load which --rpc which --inputs "$work/names.txt" &
  pids+=($!)
  load resolve --rpc resolve --inputs "$work/specs.txt" &
  pids+=($!)
  load symbolize --rpc symbolize --batch 64 --inputs "$work/addrs.txt" &
  pids+=($!)
  wait "${pids[@]}"
}
echo "== quiet: $CLIENTS honest clients for $SECS s" >&2
"$DAEMON_LOAD" --connect "unix:$sock" --target "$TARGET" --clients 4 --seconds 2 --rpc which \
  --inputs "$work/names.txt" >/dev/null 2>&1 || true  # warm the caches
run quiet
echo "== loud: the same, with the hostile peer's calls held" >&2
mkdir -m 0777 "$work/gates"
h="setpriv --reuid=65534 --regid=65534 --clear-groups $HOSTILE --connect unix:$sock --base $base --release $work/gates/release"
hostile=()
$h --ready "$work/gates/dups" abandon-dups 500 >"$work/hostile-dups.json" 2>&1 &
hostile+=($!)
$h --ready "$work/gates/streams" unread-streams 20 65536 >"$work/hostile-streams.json" 2>&1 &
hostile+=($!)
$h --ready "$work/gates/garbage" garbage 200 >"$work/hostile-garbage.json" 2>&1 &
hostile+=($!)
for _ in $(seq 6000); do
  [ -e "$work/gates/dups" ] && [ -e "$work/gates/streams" ] && [ -e "$work/gates/garbage" ] && break
  sleep 0.02
done
run loud
touch "$work/gates/release"
wait "${hostile[@]}"
kill -TERM "$daemon_pid"
wait "$daemon_pid" 2>/dev/null || true

python3 - "$work" <<'EOF'
import json, sys
w = sys.argv[1]
failed = False
print(f"{'rpc':10} {'quiet/s':>8} {'loud/s':>8} {'quiet p99':>10} {'loud p99':>9} {'p99 ratio':>9}")
for name in ("which", "resolve", "symbolize"):
    r = {}
    for label in ("quiet", "loud"):
        try:
            j = json.load(open(f"{w}/{label}-{name}.json"))
        except Exception as e:
            print(f"{name} {label}: no result ({e}): {open(f'{w}/{label}-{name}.err').read()[-300:]}")
            failed = True
            continue
        failed |= j.get("failures", 0) > 0
        r[label] = (j.get("qps", 0), j.get("latency_us", {}).get("p99", 0) / 1000)
    if len(r) == 2:
        q, l = r["quiet"], r["loud"]
        print(f"{name:10} {q[0]:8.0f} {l[0]:8.0f} {q[1]:8.2f}ms {l[1]:7.2f}ms {l[1] / q[1] if q[1] else 0:9.2f}")
for mode in ("dups", "streams", "garbage"):
    print(f"hostile {mode}: {open(f'{w}/hostile-{mode}.json').read().strip()}")
sys.exit(1 if failed else 0)
EOF
