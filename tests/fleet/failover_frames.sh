#!/usr/bin/env bash
# A fleet replica lost: frames for a kernel known only by build-ID, through nginx in front of 3
# real replicas fed by a real debuginfod (-F over a compiled miniature kernel). The replica that
# fetched and indexed the kernel is killed (SIGKILL); the same request is re-routed to a survivor,
# which fetches and indexes it in turn and answers byte-for-byte the same. Here the replica is
# killed between requests; failover_midrun.sh kills one in the middle of its fetch, under load.
#   failover_frames.sh SOURCE_DIR BIN_DIR        exit 0 pass, 1 fail, 77 skip
set -euo pipefail
src=$1
bin=$2
. "$src/tests/fleet/lib.sh"
for t in gcc nm readelf debuginfod nginx curl; do
  command -v "$t" >/dev/null || [ -x "/usr/sbin/$t" ] || { echo "SKIP: $t missing"; exit 77; }
done
[ -x "$bin/symdexd" ] && [ -x "$bin/symdex" ] || { echo "FAIL: $bin/symdexd or symdex not built"; exit 1; }
work=$(mktemp -d)
trap '"$src/deploy/fleet-up.sh" down "$work/fleet" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
mkdir -p "$work/served"
mini_kernel "$work/served" vmlinux
bid=$(build_id "$work/served/vmlinux")
addr=$(symbol_addr "$work/served/vmlinux" beta)

# Ceilings, not expectations: fleet-up returns as soon as every part is healthy and the scan done.
"$src/deploy/fleet-up.sh" up "$work/fleet" --proxy nginx --symdexd "$bin/symdexd" --timeout 120 --wait-scan 120 \
  -- -F "$work/served" >"$work/up.out" 2>"$work/up.log" || { cat "$work/up.log"; echo "FAIL: fleet-up"; exit 1; }
set -a; . "$work/fleet/fleet.env"; set +a
ask() { "$bin/symdex" --connect "$SYMDEX_FLEET_PROXY" --json frames --kernel-build-id "$bid" --kaslr-offset 0x0 \
          "$addr" "beta+0x1/0x10"; }
runs() {  # runs I: index runs of replica I (empty when it is gone)
  curl -sf "$(eval echo "\$SYMDEX_FLEET_REPLICA_${1}_METRICS")" |
    awk '$1 == "symdex_fleet_index_runs_total{result=\"ok\"}" {print $2}'
}
first=$(ask) || { echo "FAIL: the first request failed: $first"; exit 1; }
echo "$first" | grep -q '"symbol": "beta"' || { echo "FAIL: not answered: $first"; exit 1; }
victim=""
for i in 1 2 3; do [ "$(runs "$i")" = 1 ] && victim=$i; done
[ -n "$victim" ] || { echo "FAIL: no replica indexed the kernel"; exit 1; }
echo "ok    replica $victim fetched and indexed kernel $bid and answered"
vpid=$(eval echo "\$SYMDEX_FLEET_REPLICA_${victim}_PID")
vport=$(eval echo "\$SYMDEX_FLEET_REPLICA_$victim" | sed 's/.*://')
kill -KILL "$vpid"
# Asked before the replica is gone, the request could still be answered by it. Gone: no process
# (a zombie has no /proc/PID/exe; fleet-up.sh's spawn leaves it to PID 1 to reap) and nothing
# accepting on its port. Polled, with a generous ceiling.
gone() { ! readlink "/proc/$vpid/exe" >/dev/null 2>&1 && ! (exec 3<>"/dev/tcp/127.0.0.1/$vport") 2>/dev/null; }
deadline=$((SECONDS + 120))
until gone; do
  [ "$SECONDS" -lt "$deadline" ] || { echo "FAIL: replica $victim (pid $vpid) still runs or accepts 120 s after SIGKILL"; exit 1; }
  sleep 0.1
done
second=$(ask) || { echo "FAIL: after replica $victim was killed the request failed"; exit 1; }
[ "$second" = "$first" ] || { echo "FAIL: the survivor answered differently"; diff <(echo "$first") <(echo "$second"); exit 1; }
heir=""
for i in 1 2 3; do [ "$i" != "$victim" ] && [ "$(runs "$i")" = 1 ] && heir=$i; done
[ -n "$heir" ] || { echo "FAIL: no survivor indexed the kernel"; exit 1; }
echo "ok    replica $victim killed: re-routed to replica $heir, which indexed it and answered the same bytes"
third=$(ask)
[ "$third" = "$first" ] && [ "$(runs "$heir")" = 1 ] || { echo "FAIL: the kernel did not stay on replica $heir"; exit 1; }
echo "ok    it stays there (no second index run)"
echo PASS
