#!/usr/bin/env bash
# The fleet topology on one machine, as the current user (no root), for tests and demos:
# a real debuginfod, N symdexd replicas (each its own index, fleet cache, debuginfod client cache
# and metrics port) and a consistent-hash proxy (nginx or HAProxy) in front, all on free
# loopback ports under WORKDIR. See deploy/README.md, "Fleet".
#
#   deploy/fleet-up.sh [up] WORKDIR [OPTIONS] [-- DEBUGINFOD_ARGS...]
#   deploy/fleet-up.sh down WORKDIR
#
# up options:
#   --replicas N          replicas (default 3)
#   --proxy nginx|haproxy the proxy (default nginx); its config is deploy/proxy/ rendered
#   --symdexd PATH        the daemon (default: $SYMDEXD, else build/bin/symdexd of this tree,
#                         else symdexd on PATH)
#   --replica-arg ARG     one more argument for every replica (repeatable)
#   --no-debuginfod       start no debuginfod; replicas get no DEBUGINFOD_URLS
#   --timeout SECONDS     how long to wait for each part to become healthy (default 30)
#   --wait-scan SECONDS   also wait (at most this long) until debuginfod has traversed its
#                         -F/-U paths once and scanned everything found, so that the first
#                         request does not race its scan (the Debian -dbg .deb: ~30 s).
#                         Only with -F/-U/-R paths: without them there is no scan to wait for
# Everything after `--` goes to debuginfod, e.g. `-- -U /srv/debs -F /srv/debug` (its
# `-d DB` and `-p PORT` are set here).
#
# The replicas get the fleet flags --fleet-cache WORKDIR/replica-I/fleet-cache (each kernel's
# index as <build-id>.db there). SYMDEX_FLEET_NO_CACHE_FLAGS=1 leaves them out, for a symdexd
# that predates them.
#
# On success: prints KEY=VALUE lines (proxy, each replica and its metrics URL, debuginfod) on
# stdout and writes the same to WORKDIR/fleet.env (`set -a; . WORKDIR/fleet.env`). Logs are
# WORKDIR/*.log. Every process started is recorded in WORKDIR/pids; `down` stops exactly those.
# On failure: stops what it started, names the log to read, exits 1 (2 for a usage error).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
src=$(dirname "$here")

usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }
die() { echo "fleet-up: error: $*" >&2; exit 1; }
log() { echo "fleet-up: $*" >&2; }

# --- down ---------------------------------------------------------------------------------------

# The recorded pid is signalled only while it still runs the program recorded with it, so a pid
# the kernel has since reused for something else is left alone.
still_ours() {  # still_ours PID EXE
  local exe
  exe=$(readlink "/proc/$1/exe" 2>/dev/null) || return 1
  [ "$(basename "${exe% (deleted)}")" = "$(basename "$2")" ]
}

down() {  # down WORKDIR
  local dir=$1 name pid exe left
  [ -f "$dir/pids" ] || { log "nothing recorded in $dir/pids"; return 0; }
  # Proxy first (no new requests), debuginfod last (replicas may be fetching).
  tac "$dir/pids" | while read -r name pid exe; do
    if still_ours "$pid" "$exe"; then kill -TERM "$pid" 2>/dev/null || true; fi
  done
  for _ in $(seq 1 100); do
    left=0
    while read -r name pid exe; do
      if still_ours "$pid" "$exe"; then left=1; fi
    done <"$dir/pids"
    [ "$left" = 0 ] && break
    sleep 0.1
  done
  while read -r name pid exe; do
    if still_ours "$pid" "$exe"; then
      log "$name (pid $pid) ignored SIGTERM for 10 s: SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
    fi
  done <"$dir/pids"
  rm -f "$dir/pids"
  log "stopped the fleet in $dir"
}

if [ "${1:-}" = "down" ]; then
  [ $# -eq 2 ] || usage
  down "$2"
  exit 0
fi
[ "${1:-}" = "up" ] && shift
[ $# -ge 1 ] || usage
case $1 in -h | --help) usage ;; esac
work=$1
shift

# --- options ------------------------------------------------------------------------------------

replicas=3
proxy=nginx
symdexd=${SYMDEXD:-}
replica_args=()
with_debuginfod=1
timeout=30
wait_scan=0
while [ $# -gt 0 ]; do
  case $1 in
    --replicas) replicas=${2:?--replicas needs a number}; shift 2 ;;
    --proxy) proxy=${2:?--proxy needs nginx or haproxy}; shift 2 ;;
    --symdexd) symdexd=${2:?--symdexd needs a path}; shift 2 ;;
    --replica-arg) replica_args+=("${2?--replica-arg needs an argument}"); shift 2 ;;
    --no-debuginfod) with_debuginfod=0; shift ;;
    --timeout) timeout=${2:?--timeout needs seconds}; shift 2 ;;
    --wait-scan) wait_scan=${2:?--wait-scan needs seconds}; shift 2 ;;
    --) shift; break ;;
    -h | --help) usage ;;
    *) echo "fleet-up: unknown option '$1'" >&2; usage ;;
  esac
done
debuginfod_args=("$@")
[[ $replicas =~ ^[1-9][0-9]?$ ]] || die "--replicas must be 1-99, not '$replicas'"
[[ $timeout =~ ^[1-9][0-9]*$ ]] || die "--timeout must be whole seconds, not '$timeout'"
[[ $wait_scan =~ ^[0-9]+$ ]] || die "--wait-scan must be whole seconds, not '$wait_scan'"
case $proxy in nginx | haproxy) ;; *) die "--proxy must be nginx or haproxy, not '$proxy'" ;; esac
if [ -z "$symdexd" ]; then
  if [ -x "$src/build/bin/symdexd" ]; then symdexd=$src/build/bin/symdexd; else symdexd=$(command -v symdexd || true); fi
fi
{ [ -n "$symdexd" ] && [ -x "$symdexd" ]; } || die "no symdexd binary: build it (cmake --build --preset default --target symdexd) or pass --symdexd PATH"
proxy_bin=$(command -v "$proxy" || true)
[ -z "$proxy_bin" ] && [ -x "/usr/sbin/$proxy" ] && proxy_bin=/usr/sbin/$proxy
[ -n "$proxy_bin" ] || die "$proxy is not installed (apt-get install ${proxy/nginx/nginx-light}; scripts/setup-deps.sh has it)"
if [ "$with_debuginfod" = 1 ]; then
  command -v debuginfod >/dev/null || die "debuginfod is not installed (apt-get install debuginfod), or pass --no-debuginfod"
fi
# The health checks speak gRPC: Debian's python3-grpcio belongs to /usr/bin/python3.
py=""
for p in ${SYMDEX_PYTHON:-} /usr/bin/python3 python3; do
  if "$p" -c 'import grpc' 2>/dev/null; then py=$p; break; fi
done
[ -n "$py" ] || die "no python3 with grpc for the health checks (apt-get install python3-grpcio)"

mkdir -p "$work"
work=$(cd "$work" && pwd)
if [ -f "$work/pids" ]; then
  die "$work/pids exists: a fleet may be running there; run '$0 down $work' first"
fi

# --- start, with cleanup on any failure ---------------------------------------------------------

started=0
failed_log=""
# shellcheck disable=SC2317  # run by the EXIT trap
on_exit() {
  local rc=$?
  if [ "$started" = 0 ]; then
    [ -n "$failed_log" ] && { log "last lines of $failed_log:"; tail -n 20 "$failed_log" >&2 || true; }
    if [ -n "$failed_log" ] && grep -q 'not expected.*--fleet-cache' "$failed_log" 2>/dev/null; then
      log "this symdexd predates the fleet flags: SYMDEX_FLEET_NO_CACHE_FLAGS=1 starts it without them"
    fi
    down "$work" 2>/dev/null || true
    [ "$rc" = 0 ] && rc=1
  fi
  exit "$rc"
}
trap on_exit EXIT
trap 'exit 130' INT TERM

# N free loopback ports at once (bound together, so distinct). Another process may take one
# between here and the bind below; the health wait then fails naming the log, rather than
# talking to a stranger.
mapfile -t ports < <("$py" - "$((2 * replicas + 2))" <<'EOF'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
for s in socks:
    print(s.getsockname()[1])
EOF
)
proxy_port=${ports[0]}
debuginfod_port=${ports[1]}

spawn() {  # spawn NAME LOG EXE ARGS...: detached from this shell's session, pid recorded
  local name=$1 logf=$2; shift 2
  # setsid execs in place (this non-interactive shell's children lead no process group), so $!
  # is the program's own pid; its own session keeps a terminal's hangup away from it.
  setsid "$@" </dev/null >"$logf" 2>&1 &
  echo "$name $! $(readlink -f "$1")" >>"$work/pids"
  echo "$!"
}

healthy_grpc() {  # healthy_grpc HOST:PORT: exit 0 when grpc.health.v1 says SERVING
  # Each check may take 10 s: a loaded machine (or a sanitized build) answers slowly, and a
  # check that always ran out of time would never pass. A refused connection fails at once.
  "$py" - "$1" <<'EOF' >/dev/null 2>&1
import sys, grpc
with grpc.insecure_channel(sys.argv[1]) as ch:
    check = ch.unary_unary("/grpc.health.v1.Health/Check",
                           request_serializer=lambda m: m, response_deserializer=lambda m: m)
    sys.exit(0 if check(b"", timeout=10) == b"\x08\x01" else 1)  # status: SERVING
EOF
}

wait_for() {  # wait_for WHAT PID LOG COMMAND...: until COMMAND succeeds, the process dies or time runs out
  local what=$1 pid=$2 logf=$3; shift 3
  local deadline=$((SECONDS + timeout))
  until "$@"; do
    # /proc/PID/exe, not kill -0: a child that died is a zombie (kill -0 succeeds) until a
    # reaper collects it, and after this script's subshells it has none but PID 1.
    if ! readlink "/proc/$pid/exe" >/dev/null 2>&1; then failed_log=$logf; die "$what exited before it was healthy: see $logf"; fi
    if [ "$SECONDS" -ge "$deadline" ]; then failed_log=$logf; die "$what not healthy after ${timeout}s: see $logf"; fi
    sleep 0.2
  done
}

# debuginfod. Not the caller's DEBUGINFOD_URLS: debuginfod would forward misses there, and the
# replicas ask only the local one (or, with --no-debuginfod, none).
unset DEBUGINFOD_URLS
rpids=()
env_lines=("SYMDEX_FLEET_WORKDIR=$work" "SYMDEX_FLEET_REPLICA_COUNT=$replicas")
debuginfod_url=""
if [ "$with_debuginfod" = 1 ]; then
  mkdir -p "$work/debuginfod"
  dlog=$work/debuginfod.log
  dpid=$(spawn debuginfod "$dlog" "$(command -v debuginfod)" -p "$debuginfod_port" -d "$work/debuginfod/index.sqlite" \
    "${debuginfod_args[@]}")
  debuginfod_url=http://127.0.0.1:$debuginfod_port
  wait_for debuginfod "$dpid" "$dlog" curl -sf -o /dev/null "$debuginfod_url/metrics"
  export DEBUGINFOD_URLS=$debuginfod_url
  if [ "$wait_scan" -gt 0 ]; then
    scanned() {  # one traversal done, nothing traversing, queued or being scanned
      curl -sf "$debuginfod_url/metrics" | awk '
        /^thread_work_total\{role="traverse"\}/ { done = $NF >= 1 }
        /^thread_busy\{role="(traverse|scan)"\}/ || /^thread_work_pending\{role="scan"\}/ { busy += $NF }
        END { exit !(done && busy == 0) }'
    }
    saved=$timeout
    timeout=$wait_scan
    wait_for "debuginfod's first scan" "$dpid" "$dlog" scanned
    timeout=$saved
    log "debuginfod: scan done, $(curl -sf "$debuginfod_url/metrics" | awk '/^scanned_files_total/ {n += $NF} END {print n + 0}') files"
  fi
  env_lines+=("DEBUGINFOD_URLS=$debuginfod_url" "SYMDEX_FLEET_DEBUGINFOD_METRICS=$debuginfod_url/metrics"
    "SYMDEX_FLEET_DEBUGINFOD_PID=$dpid")
fi

# replicas
servers_nginx=""
servers_haproxy=""
for i in $(seq 1 "$replicas"); do
  port=${ports[$((2 * i))]}
  mport=${ports[$((2 * i + 1))]}
  rdir=$work/replica-$i
  mkdir -p "$rdir/debuginfod-cache"
  args=(--listen "127.0.0.1:$port" --insecure-tcp --db "$rdir/index.db" --no-index-live --modules-poll 0
    --metrics-listen "127.0.0.1:$mport" --drain-seconds 2)
  if [ "${SYMDEX_FLEET_NO_CACHE_FLAGS:-0}" != 1 ]; then
    mkdir -p "$rdir/fleet-cache"
    args+=(--fleet-cache "$rdir/fleet-cache")
  fi
  args+=("${replica_args[@]}")
  rlog=$work/replica-$i.log
  # Each replica its own debuginfod client cache: they share nothing but the server.
  rpid=$(DEBUGINFOD_CACHE_PATH=$rdir/debuginfod-cache spawn "replica-$i" "$rlog" "$symdexd" "${args[@]}")
  rpids+=("$rpid")
  env_lines+=("SYMDEX_FLEET_REPLICA_$i=127.0.0.1:$port" "SYMDEX_FLEET_REPLICA_${i}_METRICS=http://127.0.0.1:$mport/metrics"
    "SYMDEX_FLEET_REPLICA_${i}_DB=$rdir/index.db" "SYMDEX_FLEET_REPLICA_${i}_PID=$rpid" "SYMDEX_FLEET_REPLICA_${i}_LOG=$rlog")
  # Server names are fixed per replica number, not per port: nginx's ring is keyed by the
  # written address and HAProxy's by `id`, and each keeps its position however ports change.
  servers_nginx+="        server 127.0.0.1:$port max_fails=1 fail_timeout=10s;"$'\n'
  servers_haproxy+="    server replica$i 127.0.0.1:$port id $i"$'\n'
done
for i in $(seq 1 "$replicas"); do
  wait_for "replica $i" "${rpids[$((i - 1))]}" "$work/replica-$i.log" healthy_grpc "127.0.0.1:${ports[$((2 * i))]}"
done

# proxy: the shipped config with the listener and the server list replaced
render() {  # render TEMPLATE OUT MARKER NEWLINE SERVERS
  "$py" - "$@" <<'EOF'
import sys
tpl, out, marker, new_line, servers = sys.argv[1:]
lines, skipping, seen = [], False, set()
for line in open(tpl):
    s = line.strip()
    if s == "# BEGIN servers":
        lines.append(line + servers); skipping = True; seen.add("begin"); continue
    if s == "# END servers":
        skipping = False; seen.add("end")
    if skipping:
        continue
    if line.rstrip().endswith(marker):
        line = new_line + "\n"; seen.add("listen")
    lines.append(line)
if seen != {"begin", "end", "listen"}:
    sys.exit(f"{tpl}: markers missing (# BEGIN servers, # END servers, {marker}): found {sorted(seen)}")
open(out, "w").write("".join(lines))
EOF
}
plog=$work/proxy.log
if [ "$proxy" = nginx ]; then
  mkdir -p "$work/nginx/tmp"
  conf=$work/nginx/nginx.conf
  render "$here/proxy/nginx.conf" "$conf" "# fleet: listen" \
    "        listen 127.0.0.1:$proxy_port http2; # fleet: listen" "$servers_nginx"
  printf 'daemon off;\n' >>"$conf"  # foreground: the recorded pid is nginx's master
  "$proxy_bin" -e stderr -p "$work/nginx/" -c "$conf" -t >"$plog" 2>&1 || { failed_log=$plog; die "nginx rejected $conf: see $plog"; }
  ppid_=$(spawn proxy "$plog" "$proxy_bin" -e stderr -p "$work/nginx/" -c "$conf")
else
  mkdir -p "$work/haproxy"
  conf=$work/haproxy/haproxy.cfg
  render "$here/proxy/haproxy.cfg" "$conf" "# fleet: bind" \
    "    bind 127.0.0.1:$proxy_port proto h2 # fleet: bind" "$servers_haproxy"
  "$proxy_bin" -c -q -f "$conf" >"$plog" 2>&1 || { failed_log=$plog; die "haproxy rejected $conf: see $plog"; }
  ppid_=$(spawn proxy "$plog" "$proxy_bin" -db -f "$conf")
fi
wait_for "$proxy" "$ppid_" "$plog" healthy_grpc "127.0.0.1:$proxy_port"
env_lines=("SYMDEX_FLEET_PROXY=127.0.0.1:$proxy_port" "SYMDEX_FLEET_PROXY_KIND=$proxy"
  "SYMDEX_FLEET_PROXY_CONFIG=$conf" "SYMDEX_FLEET_PROXY_PID=$ppid_" "${env_lines[@]}")

printf '%s\n' "${env_lines[@]}" >"$work/fleet.env"
printf '%s\n' "${env_lines[@]}"
log "up: $replicas replicas behind $proxy at 127.0.0.1:$proxy_port; stop with: $0 down $work"
started=1
