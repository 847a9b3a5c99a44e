#!/usr/bin/env bash
# Latency and throughput of the Prometheus endpoint (server/metrics/http_server) on loopback.
#
#   tests/bench/metrics_bench.sh [METRICS_SERVE]      (default: build/bin/metrics_serve)
#   N=5000 CONC="1 8 32" tests/bench/metrics_bench.sh
#
# Starts tests/bench/metrics_serve (the endpoint with a registry shaped like symdexd's, ~70
# series) on 127.0.0.1:<ephemeral>, then for each concurrency in CONC sends N GET /metrics with
# ApacheBench (apt-get install apache2-utils) — or, without ab, a sequential curl loop (which
# mostly measures curl's own start-up) — and prints one line per run. Every request opens a new
# connection, as Prometheus' scrapes of this endpoint do (the server answers Connection: close).
# "server cpu" is the server process's user+system CPU time per request (from /proc/PID/stat):
# unlike the latencies, it hardly moves when other work shares the machine.
# Only loopback traffic; bounded by N; the server is stopped on exit.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
serve=${1:-$here/../../build/bin/metrics_serve}
N=${N:-5000}
CONC=${CONC:-1 8 32}
[[ -x $serve ]] || { echo "metrics_bench: $serve not built (cmake --build --preset default --target metrics_serve)" >&2; exit 3; }

out=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -rf "$out"' EXIT
"$serve" 127.0.0.1:0 >"$out/serve.out" 2>"$out/serve.err" &
pid=$!
for _ in $(seq 100); do grep -q ready "$out/serve.out" 2>/dev/null && break; sleep 0.05; done
grep -q ready "$out/serve.out" || { echo "metrics_bench: server did not start: $(cat "$out/serve.err")" >&2; exit 3; }
port=$(head -1 "$out/serve.out")
url=http://127.0.0.1:$port/metrics
bytes=$(curl -s "$url" | wc -c)
echo "server: $serve  body: $bytes bytes  requests per run: $N"

# utime + stime of the server, in clock ticks.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
hz=$(getconf CLK_TCK)

if command -v ab >/dev/null; then
  for c in $CONC; do
    t0=$(cpu_ticks)
    ab -q -n "$N" -c "$c" "$url" >"$out/ab.txt" 2>&1 || { cat "$out/ab.txt" >&2; exit 1; }
    t1=$(cpu_ticks)
    awk -v c="$c" -v ticks=$((t1 - t0)) -v hz="$hz" -v n="$N" '
      /^Failed requests:/ {failed=$3}
      /^Non-2xx responses:/ {non2xx=$3}
      /^Requests per second:/ {rps=$4}
      /^Time per request:/ && /\(mean\)/ {mean=$4}
      /^  50%/ {p50=$2} /^  99%/ {p99=$2} /^ 100%/ {max=$2}
      END {printf "ab -c %-3s %6.0f req/s  mean %6.3f ms  p50 %s ms  p99 %s ms  max %s ms  server cpu %5.1f us/req  failed %d  non-2xx %d\n",
                  c, rps, mean, p50, p99, max, ticks * 1e6 / hz / n, failed, non2xx}' "$out/ab.txt"
  done
else
  n=$(( N < 500 ? N : 500 ))
  start=$(date +%s.%N)
  for _ in $(seq "$n"); do curl -sf -o /dev/null "$url"; done
  end=$(date +%s.%N)
  awk -v n="$n" -v s="$start" -v e="$end" 'BEGIN {printf "curl loop: %d requests, %.3f ms each (incl. curl start-up)\n", n, (e-s)*1000/n}'
fi
