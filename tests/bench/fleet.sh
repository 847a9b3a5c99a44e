#!/usr/bin/env bash
# The fleet's figures, all from one run on this machine:
#   1. first request for an unseen kernel through the fleet (proxy -> replica: fetch from a
#      loopback debuginfod + index + answer 10,000 frames) vs the peer path a user has today
#      (debuginfod-find debuginfo + llvm-symbolizer-14 over the same addresses), both from cold
#      client caches, the server warm; then both warm: from a new CLI process, and from a frontend
#      holding a gRPC connection (build/bin/daemon_load --rpc frames-all).
#   2. warm frames/s through the proxy with 3 replicas, 4 concurrent clients, 3 kernels mixed.
#   3. index-layer cache-hit ratio over the same mixed stream, consistent hashing (the
#      `symdex-build-id` header) vs the proxy's round-robin (no header), each on a fresh fleet.
# The 3 kernels are Debian's cloud-amd64, amd64 and rt-amd64 flavours of 6.1.0-57 (three
# build-IDs); the last two (~1.9 GB of .debs) are downloaded once into
# ${SYMDEX_FLEET_DEBS:-~/.cache/symdex-fleet-debs}. Takes ~15 minutes on 2 cores.
#   tests/bench/fleet.sh [build/bin]
# Needs: debuginfod, bsdtar, nginx, python3-grpcio, protoc, llvm-symbolizer-14, sqlite3 (all in
# scripts/setup-deps.sh).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
BIN=$(cd "${1:-$src/build/bin}" && pwd)
. "$here/lib.sh"
for t in debuginfod debuginfod-find bsdtar llvm-symbolizer-14 sqlite3 protoc nginx; do
  command -v "$t" >/dev/null || [ -x "/usr/sbin/$t" ] || { echo "fleet.sh: $t missing (scripts/setup-deps.sh)" >&2; exit 2; }
done
bench_corpus  # the cloud kernel: $DBG, $VML, $MAP, $KREL
corpus_debs=$(dirname "$DBG")/debs
more=${SYMDEX_FLEET_DEBS:-$HOME/.cache/symdex-fleet-debs}
mkdir -p "$more"
ver=$(basename "$DBG" | sed 's/.*-dbg_//')
for flavour in amd64 rt-amd64; do
  for pkg in "linux-image-${KREL%-cloud-amd64}-$flavour-dbg" "linux-image-${KREL%-cloud-amd64}-$flavour-unsigned"; do
    ls "$more/${pkg}_"*.deb >/dev/null 2>&1 && continue
    echo "== downloading $pkg=$ver into $more" >&2
    (cd "$more" && apt-get download -q "$pkg=$ver" >&2)
  done
done
work=$(mktemp -d)
# The binaries as they are now: a rebuild during the run does not change what is measured.
mkdir -p "$work/bin"
cp "$BIN/symdex" "$BIN/symdexd" "$BIN/symdex-debuginfo-worker" "$BIN/symdex-remote.so" "$BIN/daemon_load" "$work/bin/"
BIN=$work/bin
fleets=()
cleanup() {
  for f in "${fleets[@]}"; do "$src/deploy/fleet-up.sh" down "$f" >/dev/null 2>&1 || true; done
  rm -rf "$work"
}
trap cleanup EXIT

up() {  # up NAME: a fresh fleet (3 replicas + nginx + debuginfod over both .deb dirs), env in $work/NAME.env
  local dir=$work/$1
  fleets+=("$dir")
  "$src/deploy/fleet-up.sh" up "$dir" --proxy nginx --symdexd "$BIN/symdexd" --timeout 60 --wait-scan 1800 \
    -- -U "$corpus_debs" "$more" >"$work/$1.up" 2>"$work/$1.up.log" ||
    { cat "$work/$1.up.log" >&2; exit 1; }
  cp "$dir/fleet.env" "$work/$1.env"
}
sum_metric() {  # sum_metric ENVFILE SERIES: the series summed over the fleet's replicas
  local total=0 v
  for url in $(grep -o 'SYMDEX_FLEET_REPLICA_[0-9]*_METRICS=.*' "$1" | cut -d= -f2); do
    v=$(curl -s "$url" | awk -v s="$2" '$1 == s {print $2}')
    total=$(echo "$total + ${v:-0}" | bc)
  done
  echo "$total"
}

echo "== fleet A (consistent hashing): debuginfod -U scanning $corpus_debs $more (not timed) ..." >&2
up A
set -a; . "$work/A.env"; set +a
# The three kernels' vmlinux build-IDs, as debuginfod indexed them.
mapfile -t kernels < <(sqlite3 "$SYMDEX_FLEET_WORKDIR/debuginfod/index.sqlite" \
  "select distinct buildid from buildids9_query_d where source1 like '%/boot/vmlinux-%' order by source1")
[ "${#kernels[@]}" -ge 3 ] || { echo "fleet.sh: debuginfod indexed ${#kernels[@]} vmlinux files, want 3" >&2; exit 1; }
addrs=()
for k in "${kernels[@]}"; do
  # Each kernel's text addresses, from its debug file (fetched once here, untimed: this also warms
  # the server, whose first extraction from a .deb is its own cost, not the client's).
  f=$(DEBUGINFOD_CACHE_PATH=$work/c0 debuginfod-find debuginfo "$k")
  nm "$f" | awk '$2=="t"||$2=="T"{print "0x"$1}' | sort -u | shuf -n 10000 --random-source=<(yes) >"$work/$k.addrs"
  addrs+=("$k=$work/$k.addrs")
done
k1=${kernels[0]}
echo "== 1. peer, cold: debuginfod-find + llvm-symbolizer-14 (kernel $k1)" >&2
s=$(now)
f=$(DEBUGINFOD_CACHE_PATH=$work/c1 debuginfod-find debuginfo "$k1")
llvm-symbolizer-14 --obj="$f" --functions=linkage <"$work/$k1.addrs" >"$work/llvm.out"
peer_cold=$(echo "$(now) - $s" | bc)
s=$(now)
f=$(DEBUGINFOD_CACHE_PATH=$work/c1 debuginfod-find debuginfo "$k1")
llvm-symbolizer-14 --obj="$f" --functions=linkage <"$work/$k1.addrs" >/dev/null
peer_warm=$(echo "$(now) - $s" | bc)
frames() {  # frames KERNEL OUT [--json]: the text answer (what llvm-symbolizer prints too), or JSON
  "$BIN/symdex" --connect "$SYMDEX_FLEET_PROXY" ${3:-} frames --kernel-build-id "$1" --kaslr-offset 0 - \
    <"$work/$1.addrs" >"$2" || [ $? = 1 ]
}
echo "== 1. symdex, cold: frames through the proxy (fetch + index + answer)" >&2
s=$(now); frames "$k1" "$work/cold.txt"; ours_cold=$(echo "$(now) - $s" | bc)
s=$(now); frames "$k1" "$work/warm.txt"; ours_warm=$(echo "$(now) - $s" | bc)
# A frontend holding one gRPC connection to the proxy (daemon_load --rpc frames-all, C++): the same
# 10,000 frames as one SymbolizeFrames request, 7 times (median), and as a SymbolizeFramesStream of
# 1,000-frame batches (pipelined). What a profiler or tracing frontend pays per batch, without a
# CLI process's start-up, decoding into its own types and printing.
frontend() {  # frontend [--stream --batch N]: the median wall time of 7 passes
  "$BIN/daemon_load" --connect "$SYMDEX_FLEET_PROXY" --rpc frames-all --inputs "$work/$k1.addrs" \
    --kernel-build-id "$k1" --passes 7 --json "$@" 2>/dev/null |
    python3 -c "import json,statistics,sys; p=json.load(sys.stdin)['passes']; assert all(x['failed_calls']==0 and x['with_symbol']==x['results'] for x in p), p; print(statistics.median(x['wall_s'] for x in p))"
}
server_warm=$(frontend)
stream_warm=$(frontend --stream --batch 1000)
s=$(now); frames "$k1" "$work/cold.json" --json; ours_warm_json=$(echo "$(now) - $s" | bc)
same=$(python3 - "$work/llvm.out" "$work/cold.json" <<'PY'
import json, sys
blocks = open(sys.argv[1]).read().strip().split("\n\n")
llvm = [b.split("\n")[-2] for b in blocks]
res = json.load(open(sys.argv[2]))["results"]
print(sum(1 for l, r in zip(llvm, res) if r.get("symbol") and r["symbol"].split(".")[0] == l.split(".")[0]))
PY
)
echo "== the other two kernels, cold through the proxy" >&2
others=""
for k in "${kernels[@]:1:2}"; do
  s=$(now); frames "$k" "$work/o.txt"; others+=" $(echo "$(now) - $s" | bc)"
done
echo "== 2. warm frames/s: 4 clients, 3 kernels mixed, 1,000 frames per request" >&2
/usr/bin/python3 "$here/fleet_traffic.py" --proxy "$SYMDEX_FLEET_PROXY" --src "$src" --addrs "$(IFS=,; echo "${addrs[*]}")" \
  --requests 120 --frames 1000 --concurrency 4 >"$work/warm_traffic.json"
# 3. the mixed stream's index-layer hits, consistent hashing: fleet A served the same stream
# (above) after its cold requests; count from its metrics.
hits_a=$(sum_metric "$work/A.env" 'symdex_fleet_requests_total{result="hit"}')
miss_a=$(sum_metric "$work/A.env" 'symdex_fleet_requests_total{result="miss"}')
runs_a=$(sum_metric "$work/A.env" 'symdex_fleet_index_runs_total{result="ok"}')
waits_a=$(sum_metric "$work/A.env" 'symdex_fleet_requests_total{result="waited"}')
"$src/deploy/fleet-up.sh" down "$SYMDEX_FLEET_WORKDIR" >/dev/null 2>&1
echo "== 3. fleet B (round-robin: no header), a fresh fleet, the same mixed stream from cold" >&2
up B
set -a; . "$work/B.env"; set +a
/usr/bin/python3 "$here/fleet_traffic.py" --proxy "$SYMDEX_FLEET_PROXY" --src "$src" --addrs "$(IFS=,; echo "${addrs[*]}")" \
  --requests 120 --frames 1000 --concurrency 4 --no-header >"$work/rr_traffic.json"
hits_b=$(sum_metric "$work/B.env" 'symdex_fleet_requests_total{result="hit"}')
miss_b=$(sum_metric "$work/B.env" 'symdex_fleet_requests_total{result="miss"}')
runs_b=$(sum_metric "$work/B.env" 'symdex_fleet_index_runs_total{result="ok"}')
waits_b=$(sum_metric "$work/B.env" 'symdex_fleet_requests_total{result="waited"}')

python3 - "$peer_cold" "$peer_warm" "$ours_cold" "$ours_warm" "$same" "$k1" "$others" "$work/warm_traffic.json" \
  "$work/rr_traffic.json" "$hits_a" "$miss_a" "$runs_a" "$waits_a" "$hits_b" "$miss_b" "$runs_b" "$waits_b" \
  "$ours_warm_json" "$server_warm" "$stream_warm" <<'PY'
import json, sys
a = sys.argv
peer_cold, peer_warm, ours_cold, ours_warm = map(float, a[1:5])
print(f"kernels: 3 Debian 6.1.0-57 flavours (cloud-amd64, amd64, rt-amd64) from a loopback debuginfod -U")
print(f"1. kernel {a[6]}, 10,000 addresses ({a[5]} name the same function as llvm-symbolizer)")
print(f"   cold: peer debuginfod-find + llvm-symbolizer-14 {peer_cold:7.2f} s | symdex fleet (fetch+index+answer) "
      f"{ours_cold:7.2f} s | peer/symdex {peer_cold / ours_cold:5.2f}x (target >= 1)")
print(f"   warm: peer {peer_warm:7.2f} s | symdex {ours_warm:7.2f} s | peer/symdex {peer_warm / ours_warm:5.1f}x "
      f"(target >= 20); symdex --json {float(a[18]):.2f} s")
print(f"   warm, a frontend holding a gRPC connection (daemon_load frames-all, median of 7): one request "
      f"{float(a[19]) * 1000:.0f} ms, peer/frontend {peer_warm / float(a[19]):.1f}x (target >= 20); streamed in "
      f"1,000-frame batches {float(a[20]) * 1000:.0f} ms, {peer_warm / float(a[20]):.1f}x")
print(f"   the other two kernels, cold through the proxy: {a[7].strip()} s")
w, r = json.load(open(a[8])), json.load(open(a[9]))
print(f"2. warm, 3 replicas behind nginx, 4 clients, 3 kernels mixed: {w['frames_per_second']:.0f} frames/s "
      f"({w['frames']} frames in {w['seconds']} s, {len(w['errors'])} errors)")
def ratio(h, m, wt):
    h, m, wt = float(h), float(m), float(wt)
    return h / (h + m + wt) if h + m + wt else 0
print(f"3. index-layer hit ratio over {w['requests']} requests: consistent hashing {ratio(a[10], a[11], a[13]):.1%} "
      f"({float(a[12]):.0f} index runs fleet-wide) vs round-robin {ratio(a[14], a[15], a[17]):.1%} "
      f"({float(a[16]):.0f} index runs; {r['seconds']} s for the stream from cold, {len(r['errors'])} errors)")
PY
