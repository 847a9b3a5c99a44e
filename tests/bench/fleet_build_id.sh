#!/usr/bin/env bash
# A kernel never seen before, known only by its vmlinux build-ID, served
# by a real debuginfod (`debuginfod -U` over the Debian -dbg and image .deb files, as a distro's
# server holds them), and a batch of 10,000 addresses of it to symbolize. Two paths, same run:
#   peer:   debuginfod-find debuginfo BUILD-ID  +  llvm-symbolizer-14 --obj=FILE  (what a user has)
#   symdex: symdex index --build-id BUILD-ID (fetch + index)  +  symdex addr --build-id BUILD-ID -
# each from a cold client cache (a fresh DEBUGINFOD_CACHE_PATH), the server warm. Prints both
# times and the ratio; checks the two name the same function for each address.
#   tests/bench/fleet_build_id.sh [build/bin/symdex]
# Needs debuginfod, libarchive-tools (bsdtar: debuginfod -U reads .debs with it), llvm-symbolizer-14.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
SYMDEX=${1:-$here/../../build/bin/symdex}
. "$here/lib.sh"
for t in debuginfod debuginfod-find bsdtar llvm-symbolizer-14 curl; do
  command -v "$t" >/dev/null || { echo "fleet_build_id.sh: $t missing (scripts/setup-deps.sh)" >&2; exit 2; }
done
bench_corpus
debs=$(dirname "$DBG")/debs
[ -d "$debs" ] || { echo "fleet_build_id.sh: no .deb files in $debs" >&2; exit 2; }
work=$(mktemp -d)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
debuginfod -U "$debs" -p "$port" -d "$work/server.sqlite" -t0 -g0 >"$work/server.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null; rm -rf "$work"' EXIT
url=http://127.0.0.1:$port
bid=$(readelf -n "$VML" | awk '/Build ID/ {print $3}')
echo "== debuginfod -U $debs: scanning (the server's one-time cost, not timed) ..." >&2
for _ in $(seq 600); do
  code=$(curl -s -o /dev/null -w '%{http_code}' -r 0-0 "$url/buildid/$bid/debuginfo" || true)
  [ "$code" = 200 ] || [ "$code" = 206 ] && break
  sleep 1
done
[ "$code" = 200 ] || [ "$code" = 206 ] || { echo "debuginfod never served $bid (HTTP $code)" >&2; exit 1; }
awk '$2=="t"||$2=="T"{print "0x"$1}' "$MAP" | sort -u | shuf -n 10000 --random-source=<(yes) >"$work/addrs"

echo "== peer: debuginfod-find + llvm-symbolizer-14" >&2
s=$(now)
f=$(DEBUGINFOD_URLS=$url DEBUGINFOD_CACHE_PATH=$work/c1 debuginfod-find debuginfo "$bid")
llvm-symbolizer-14 --obj="$f" --functions=linkage <"$work/addrs" >"$work/llvm.out"
e=$(now); peer=$(echo "$e - $s" | bc)

echo "== symdex: index --build-id + addr --build-id" >&2
s=$(now)
DEBUGINFOD_URLS=$url DEBUGINFOD_CACHE_PATH=$work/c2 "$SYMDEX" --db "$work/i.db" index -q --build-id "$bid" \
  --no-addr-map >/dev/null
"$SYMDEX" --db "$work/i.db" --json addr --build-id "$bid" - <"$work/addrs" >"$work/symdex.json" || [ $? = 1 ]
e=$(now); ours=$(echo "$e - $s" | bc)

python3 - "$work/addrs" "$work/llvm.out" "$work/symdex.json" "$peer" "$ours" "$bid" <<'PY'
import json, sys
addrs = open(sys.argv[1]).read().split()
blocks = open(sys.argv[2]).read().strip().split("\n\n")
llvm = [b.split("\n")[-2] for b in blocks]  # outermost frame's function (linkage name)
res = json.load(open(sys.argv[3]))["results"]
same = sum(1 for l, r in zip(llvm, res) if r.get("symbol") and r["symbol"].split(".")[0] == l.split(".")[0])
peer, ours = float(sys.argv[4]), float(sys.argv[5])
print(f"kernel {sys.argv[6]}, {len(addrs)} addresses, cold client caches, warm server")
print(f"peer   debuginfod-find + llvm-symbolizer-14: {peer:6.2f} s")
print(f"symdex index --build-id + addr --build-id:   {ours:6.2f} s   (ratio peer/symdex {peer / ours:.2f}x)")
print(f"same function as llvm-symbolizer: {same}/{len(res)}")
PY
