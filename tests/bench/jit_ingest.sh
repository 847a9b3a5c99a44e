#!/usr/bin/env bash
# Ingest rate of `symdex jit ingest` on a >= 100 MB jitdump, and of `perf inject -j` on a real
# Node perf.data + jitdump, in MB of jitdump per second. Rerunnable: the work dir is reused.
#   tests/bench/jit_ingest.sh [WORKDIR]      (default /tmp/symdex-jit-bench; SYMDEX=build/bin/symdex)
# The big dump is synthetic: the CODE_LOAD (+ DEBUG_INFO/UNWINDING_INFO) records of a real
# `node --perf-prof --interpreted-frames-native-stack` run, repeated with fresh code_index values
# and increasing timestamps until it passes 100 MB.
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
symdex=${SYMDEX:-$here/build/bin/symdex}
work=${1:-/tmp/symdex-jit-bench}
mkdir -p "$work" && cd "$work"

cat > workload.js <<'JS'
const fns = [];
for (let i = 0; i < 300; i++) fns.push(new Function(`return function fn_${i}(x) { return x * ${i} + 1; }`)());
let sum = 0;
for (let round = 0; round < 3000; round++) for (const f of fns) sum += f(round);
console.log(sum);
JS

if [ ! -s perf.data ] || ! ls jit-*.dump >/dev/null 2>&1; then
  rm -f jit-*.dump perf.data
  if command -v perf >/dev/null && perf record -k 1 -e cpu-clock -o perf.data -q \
       node --perf-prof --interpreted-frames-native-stack workload.js >/dev/null 2>perf-record.err; then
    :
  else
    echo "perf record unavailable here ($(head -c 200 perf-record.err 2>/dev/null)); running node alone" >&2
    rm -f perf.data
    node --perf-prof --interpreted-frames-native-stack workload.js >/dev/null
  fi
fi
real_dump=$(ls -S jit-*.dump | head -1)

if [ ! -s big/jit-999999.dump ]; then
  mkdir -p big
  python3 - "$real_dump" big/jit-999999.dump <<'PY'
import struct, sys
src, dst = sys.argv[1], sys.argv[2]
b = open(src, 'rb').read()
hsize = struct.unpack_from('<I', b, 8)[0]
header = bytearray(b[:hsize]); struct.pack_into('<I', header, 20, 999999)  # pid
recs, off = [], hsize
while off + 16 <= len(b):
    rid, size, ts = struct.unpack_from('<IIQ', b, off)
    if size < 16 or off + size > len(b): break
    if rid in (0, 2, 4): recs.append(bytearray(b[off:off + size]))
    off += size
out = open(dst, 'wb'); out.write(header); total = len(header); index = 0; ts = 1
while total < 100 * 1024 * 1024:
    for r in recs:
        rid = struct.unpack_from('<I', r, 0)[0]
        struct.pack_into('<Q', r, 8, ts); ts += 1
        if rid == 0:
            struct.pack_into('<I', r, 16, 999999)
            struct.pack_into('<Q', r, 48, index); index += 1
        out.write(r); total += len(r)
out.close()
PY
fi
big=big/jit-999999.dump
mb=$(python3 -c "import os;print(os.path.getsize('$big')/1e6)")
rm -f bench.db
start=$(date +%s.%N)
"$symdex" --db bench.db jit ingest "$big" >/dev/null
end=$(date +%s.%N)
symdex_s=$(python3 -c "print($end-$start)")
symdex_rate=$(python3 -c "print(round($mb/($end-$start),1))")
echo "symdex jit ingest: ${mb} MB in ${symdex_s} s = ${symdex_rate} MB/s ($(sqlite3 bench.db 'select count(*) from jit_loads') loads)"
start=$(date +%s.%N)
"$symdex" --db bench.db jit ingest "$big" >/dev/null
end=$(date +%s.%N)
echo "symdex jit ingest again (nothing new): $(python3 -c "print(round($end-$start,2))") s"

if [ -s perf.data ]; then
  real_mb=$(python3 -c "import os;print(os.path.getsize('$real_dump')/1e6)")
  rm -f perf.jit.data jitted-*.so
  start=$(date +%s.%N)
  perf inject -j -i perf.data -o perf.jit.data 2>/dev/null
  end=$(date +%s.%N)
  perf_rate=$(python3 -c "print(round($real_mb/($end-$start),1))")
  echo "perf inject -j: ${real_mb} MB jitdump ($(ls jitted-*.so | wc -l) DSOs written) in $(python3 -c "print(round($end-$start,2))") s = ${perf_rate} MB/s"
  rm -f bench-small.db
  start=$(date +%s.%N)
  "$symdex" --db bench-small.db jit ingest "$real_dump" >/dev/null
  end=$(date +%s.%N)
  small_rate=$(python3 -c "print(round($real_mb/($end-$start),1))")
  echo "symdex jit ingest on the same ${real_mb} MB dump: ${small_rate} MB/s"
  echo "ratio symdex/perf (same file): $(python3 -c "print(round($small_rate/$perf_rate,1))")x; (100 MB dump vs perf): $(python3 -c "print(round($symdex_rate/$perf_rate,1))")x"
fi
