#!/usr/bin/env bash
# A replica lost in the middle of a run, under load: 3 miniature kernels (3 build-IDs) served by a
# real debuginfod behind a slow link (tests/fleet/slow_proxy.py: every answer held until the test
# opens its gate), 3 real replicas behind nginx, 4 concurrent clients per kernel. While the
# replica that owns kernel 1 is fetching it (its answer held at the gate, so "while" holds however
# slowly this machine runs), it is killed (SIGKILL); then the gate opens. Every request is still
# answered, and right (nginx re-routes
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
fail() {
  echo "FAIL: $*"
  for f in "$work"/fleet/replica-*.log "$work"/fleet/proxy.log "$work"/slow.log "$work"/debuginfod.log "$work"/err-*; do
    [ -s "$f" ] && { echo "--- $f"; tail -5 "$f"; }
  done
  exit 1
}
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# wait_until SECONDS COMMAND...: polls COMMAND every 0.1 s until it succeeds (0) or SECONDS have
# gone by (1). The ceilings are generous: a loaded or sanitized machine may be slow, and only a
# condition that never comes should fail the test.
wait_until() {
  local deadline=$((SECONDS + $1))
  shift
  until "$@"; do
    [ "$SECONDS" -lt "$deadline" ] || return 1
    sleep 0.1
  done
}

mkdir -p "$work/served"
for k in 1 2 3; do mini_kernel "$work/served" "vmlinux-$k" "$k"; done
dport=$(free_port)
debuginfod -F "$work/served" -p "$dport" -d :memory: -t0 -g0 -c1 >"$work/debuginfod.log" 2>&1 &
pids+=($!)
# Until debuginfod has traversed -F once and scanned all it found: a request that raced the scan
# would be answered 404 (and the kernel remembered as unknown).
scanned() {
  curl -sf "http://127.0.0.1:$dport/metrics" 2>/dev/null | awk '
    /^thread_work_total\{role="traverse"\}/ { done = $NF >= 1 }
    /^thread_busy\{role="(traverse|scan)"\}/ || /^thread_work_pending\{role="scan"\}/ { busy += $NF }
    END { exit !(done && busy == 0) }'
}
wait_until 120 scanned || fail "debuginfod did not finish its first scan in 120 s: $(tail -5 "$work/debuginfod.log")"
# Every answer held until $work/gate exists (the proxy lets them go anyway 600 s after the
# request: a test that died before opening it does not leave the replicas waiting forever).
python3 "$src/tests/fleet/slow_proxy.py" 0 "127.0.0.1:$dport" --gate "$work/gate" --log "$work/slow.log" \
  --ready-file "$work/slow.port" &
pids+=($!)
wait_until 120 test -s "$work/slow.port" || fail "the slow proxy did not start"
slow=http://127.0.0.1:$(cat "$work/slow.port")

# --fetch-timeout (seconds without progress): far beyond how long the gate stays shut, so the
# replicas outwait the slow link however slowly the steps before the gate opens run.
# --fleet-index-jobs 3: a replica that owns two of the kernels fetches both at once; with one run
# at a time, kernel 1's run could wait behind another kernel's fetch, itself held at the shut gate.
"$src/deploy/fleet-up.sh" up "$work/fleet" --proxy nginx --symdexd "$bin/symdexd" --timeout 120 --no-debuginfod \
  --replica-arg --debuginfod-urls --replica-arg "$slow" --replica-arg --fetch-timeout --replica-arg 600 \
  --replica-arg --fleet-index-jobs --replica-arg 3 \
  >"$work/up.out" 2>"$work/up.log" || { cat "$work/up.log"; fail "fleet-up"; }
set -a; . "$work/fleet/fleet.env"; set +a

state_on() {  # state_on I BUILD_ID: that kernel's state on replica I ("" when absent or gone)
  "$bin/symdex" --connect "$(eval echo "\$SYMDEX_FLEET_REPLICA_$1")" --json --timeout 60 status 2>/dev/null |
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
    "$bin/symdex" --connect "$SYMDEX_FLEET_PROXY" --json --timeout 300 frames --kernel-build-id "$bid" --kaslr-offset 0x0 \
      "$addr" "alpha+0x1/0x10" >"$work/out-$k-$c" 2>"$work/err-$k-$c" &
    echo $! >"$work/pid-$k-$c"
  done
done
# Find the replica fetching kernel 1 (its index file appears in that replica's fleet cache when
# the run starts, before the slow fetch), and kill it while it is at it: the gate is shut, so its
# fetch is held at the proxy until after the kill.
bid1=$(build_id "$work/served/vmlinux-1")
victim=""
find_victim() {
  local i
  for i in 1 2 3; do [ -e "$work/fleet/replica-$i/fleet-cache/$bid1.db" ] && victim=$i; done
  [ -n "$victim" ]
}
wait_until 120 find_victim || fail "no replica was seen fetching kernel $bid1 in 120 s"
st=$(state_on "$victim" "$bid1")
[ "$st" = indexing ] || fail "replica $victim was not fetching kernel $bid1: state \"$st\" $("$bin/symdex" --connect "$(eval echo "\$SYMDEX_FLEET_REPLICA_$victim")" --json --timeout 60 status 2>&1 | head -c 600)"
! grep -qs released "$work/slow.log" || fail "an answer passed the shut gate: the test proves nothing"
vpid=$(eval echo "\$SYMDEX_FLEET_REPLICA_${victim}_PID")
vport=$(eval echo "\$SYMDEX_FLEET_REPLICA_$victim" | sed 's/.*://')
kill -KILL "$vpid"
# Gone: no process (a zombie has no /proc/PID/exe; fleet-up.sh's spawn leaves it to PID 1 to
# reap) and nothing accepting on its port.
gone() { ! readlink "/proc/$vpid/exe" >/dev/null 2>&1 && ! (exec 3<>"/dev/tcp/127.0.0.1/$vport") 2>/dev/null; }
wait_until 120 gone || fail "replica $victim (pid $vpid) still runs or accepts 120 s after SIGKILL"
echo "ok    replica $victim killed $((SECONDS - start)) s in, while fetching kernel $bid1"
# The slow transfers end: the survivors' fetches (and the re-routed ones) get their answers.
touch "$work/gate"

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
