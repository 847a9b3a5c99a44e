#!/usr/bin/env bash
# A replica lost in the middle of a run, under load: 3 miniature kernels (3 build-IDs) served by a
# real debuginfod behind a slow link (tests/fleet/slow_proxy.py: every answer held 3 s), 3 real
# replicas behind nginx, 4 concurrent clients per kernel. While the replica that owns kernel 1 is
# fetching it, it is killed (SIGKILL). Every request is still answered, and right (nginx re-routes
# the requests that were in flight on the dead replica: `grpc_next_upstream ... non_idempotent`,
# every symdex RPC being read-only); each kernel ends up indexed on exactly one surviving replica,
# once; the kernels of the other replicas are not disturbed.
#   failover_midrun.sh SOURCE_DIR BIN_DIR        exit 0 pass, 1 fail, 77 skip
set -euo pipefail
src=$1
bin=$2
. "$src/tests/fleet/lib.sh"
for t in gcc nm readelf debuginfod nginx curl python3; do
  command -v "$t" >/dev/null || [ -x "/usr/sbin/$t" ] || { echo "SKIP: $t missing"; exit 77; }
done
[ -x "$bin/symdexd" ] && [ -x "$bin/symdex" ] || { echo "FAIL: $bin/symdexd or symdex not built"; exit 1; }
work=$(mktemp -d)
pids=()
cleanup() {
  "$src/deploy/fleet-up.sh" down "$work/fleet" >/dev/null 2>&1 || true
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; for f in "$work"/fleet/replica-*.log; do echo "--- $f"; tail -5 "$f"; done; exit 1; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

mkdir -p "$work/served"
for k in 1 2 3; do mini_kernel "$work/served" "vmlinux-$k" "$k"; done
dport=$(free_port)
debuginfod -F "$work/served" -p "$dport" -d :memory: -t0 -g0 -c1 >"$work/debuginfod.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 100); do
  curl -sf "http://127.0.0.1:$dport/metrics" 2>/dev/null | grep -q 'thread_work_total{role="traverse"} 1' && break
  sleep 0.1
done
python3 "$src/tests/fleet/slow_proxy.py" 0 "127.0.0.1:$dport" --delay 3 --ready-file "$work/slow.port" &
pids+=($!)
for _ in $(seq 1 50); do [ -s "$work/slow.port" ] && break; sleep 0.1; done
[ -s "$work/slow.port" ] || fail "the slow proxy did not start"
slow=http://127.0.0.1:$(cat "$work/slow.port")

"$src/deploy/fleet-up.sh" up "$work/fleet" --proxy nginx --symdexd "$bin/symdexd" --timeout 30 --no-debuginfod \
  --replica-arg --debuginfod-urls --replica-arg "$slow" --replica-arg --fetch-timeout --replica-arg 30 \
  >"$work/up.out" 2>"$work/up.log" || { cat "$work/up.log"; fail "fleet-up"; }
set -a; . "$work/fleet/fleet.env"; set +a

state_on() {  # state_on I BUILD_ID: that kernel's state on replica I ("" when absent or gone)
  "$bin/symdex" --connect "$(eval echo "\$SYMDEX_FLEET_REPLICA_$1")" --json --timeout 2 status 2>/dev/null |
    python3 -c 'import json,sys
try: d = json.load(sys.stdin)
except Exception: sys.exit(0)
print(" ".join(k["state"] for k in d.get("fleet", {}).get("kernels", []) if k["build_id"] == sys.argv[1]))' "$2" ||
    true  # a replica that does not answer has no state (under set -e -o pipefail this must not end the test)
}

start=$SECONDS
for k in 1 2 3; do
  bid=$(build_id "$work/served/vmlinux-$k")
  addr=$(symbol_addr "$work/served/vmlinux-$k" beta)
  for c in 1 2 3 4; do
    "$bin/symdex" --connect "$SYMDEX_FLEET_PROXY" --json frames --kernel-build-id "$bid" --kaslr-offset 0x0 \
      "$addr" "alpha+0x1/0x10" >"$work/out-$k-$c" 2>"$work/err-$k-$c" &
    echo $! >"$work/pid-$k-$c"
  done
done
# Find the replica fetching kernel 1 (its index file appears in that replica's fleet cache when
# the run starts, before the slow fetch), and kill it while it is at it.
bid1=$(build_id "$work/served/vmlinux-1")
victim=""
for _ in $(seq 1 200); do
  for i in 1 2 3; do [ -e "$work/fleet/replica-$i/fleet-cache/$bid1.db" ] && victim=$i; done
  [ -n "$victim" ] && break
  sleep 0.02
done
[ -n "$victim" ] || fail "no replica was seen fetching kernel $bid1"
st=$(state_on "$victim" "$bid1")
[ "$st" = indexing ] || fail "replica $victim was not fetching kernel $bid1 any more: state \"$st\" $("$bin/symdex" --connect "$(eval echo "\$SYMDEX_FLEET_REPLICA_$victim")" --json --timeout 2 status 2>&1 | head -c 600)"
kill -KILL "$(eval echo "\$SYMDEX_FLEET_REPLICA_${victim}_PID")"
echo "ok    replica $victim killed $((SECONDS - start)) s in, while fetching kernel $bid1"

for k in 1 2 3; do
  for c in 1 2 3 4; do
    rc=0
    wait "$(cat "$work/pid-$k-$c")" || rc=$?
    [ "$rc" = 0 ] || fail "kernel $k client $c: exit $rc: $(cat "$work/out-$k-$c" "$work/err-$k-$c")"
    grep -q '"symbol": "beta"' "$work/out-$k-$c" && grep -q '"symbol": "alpha"' "$work/out-$k-$c" ||
      fail "kernel $k client $c not answered: $(cat "$work/out-$k-$c")"
    cmp -s "$work/out-$k-1" "$work/out-$k-$c" || fail "kernel $k: clients 1 and $c were answered differently"
  done
done
echo "ok    all 12 requests answered ($((SECONDS - start)) s), the same bytes per kernel"
# Each kernel on exactly one survivor (its index file there), indexed there once.
for k in 1 2 3; do
  bid=$(build_id "$work/served/vmlinux-$k")
  holders=()
  for i in 1 2 3; do
    [ "$i" != "$victim" ] && [ -e "$work/fleet/replica-$i/fleet-cache/$bid.db" ] && holders+=("$i")
  done
  [ "${#holders[@]}" = 1 ] || fail "kernel $k ($bid): expected on exactly one survivor, found on: ${holders[*]:-none}"
  [ "$(state_on "${holders[0]}" "$bid")" = indexed ] || fail "kernel $k: not indexed on replica ${holders[0]}"
  echo "ok    kernel $k indexed on replica ${holders[0]} only"
done
runs=0
for i in 1 2 3; do
  [ "$i" = "$victim" ] && continue
  r=$(curl -sf "$(eval echo "\$SYMDEX_FLEET_REPLICA_${i}_METRICS")" |
    awk '$1 == "symdex_fleet_index_runs_total{result=\"ok\"}" {print $2}')
  runs=$((runs + ${r:-0}))
done
[ "$runs" = 3 ] || fail "the survivors ran $runs index runs for 3 kernels"
echo "ok    3 index runs on the survivors for 3 kernels"
echo PASS
