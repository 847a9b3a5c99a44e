#!/usr/bin/env bash
# Ingest rate of `symdex jit ingest` on a >= 100 MB jitdump, and of `perf inject -j` on a real
# Node perf.data + jitdump, in MB of jitdump per second. Rerunnable: the work dir is reused.
#   tests/bench/jit_ingest.sh [WORKDIR]      (default /tmp/symdex-jit-bench; SYMDEX=build/bin/symdex)
# The big dump is synthetic: the CODE_LOAD (+ DEBUG_INFO/UNWINDING_INFO) records of a real
# `node --perf-prof --interpreted-frames-native-stack` run, repeated with fresh code_index values
# and increasing timestamps until it passes 100 MB.
# Then the same-file comparison on that big dump: tests/bench/jit/jitdump_mapper.c (compiled here
# with cc) runs under `perf record -k 1`, rewrites the dump as its own ./jit-<pid>.dump (its pid,
# CLOCK_MONOTONIC timestamps) and mmaps it PROT_EXEC like V8/JVMTI agents, so `perf inject -j`
# processes it; both tools are timed on that one file. Skipped, with the reason, if perf record or
# cc do not work here. perf's build-ID cache goes to a temp dir; everything is removed afterwards.
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
  rm -rf perf.jit.data jitted-*.so buildid-cache
  start=$(date +%s.%N)
  perf --buildid-dir "$PWD/buildid-cache" inject -j -i perf.data -o perf.jit.data 2>/dev/null
  end=$(date +%s.%N)
  rm -rf buildid-cache
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

# perf inject -j and symdex jit ingest on the same >= 100 MB jitdump.
skip=
if ! command -v perf >/dev/null; then skip="no perf"
elif ! perf record -e cpu-clock -o probe.data -q true >/dev/null 2>probe.err; then
  skip="perf record fails: $(head -c 200 probe.err)"
elif ! command -v cc >/dev/null; then skip="no cc"
elif ! cc -O2 -o jitdump_mapper "$here/tests/bench/jit/jitdump_mapper.c" 2>cc.err; then
  skip="cc failed: $(head -c 200 cc.err)"
fi
rm -f probe.data probe.err cc.err
if [ -n "$skip" ]; then
  echo "same-file perf inject -j comparison skipped: $skip" >&2
  exit 0
fi
wd=$PWD
rm -rf inject && mkdir inject && cd inject
perf --buildid-dir "$wd/inject/buildid-cache" record -k 1 -e cpu-clock -o perf.data -q \
  ../jitdump_mapper "$wd/$big" >mapper.out 2>mapper.err
dump=$(cat mapper.out)
read -r _ mapper_loads _ < <(tail -1 mapper.err)
dump_mb=$(python3 -c "import os;print(os.path.getsize('$dump')/1e6)")
sync  # neither timed step pays for the other's (or the mapper's) dirty-page writeback
start=$(date +%s.%N)
perf --buildid-dir "$wd/inject/buildid-cache" inject -j -i perf.data -o perf.jit.data 2>inject.err
end=$(date +%s.%N)
inject_s=$(python3 -c "print(round($end-$start,2))")
inject_rate=$(python3 -c "print(round($dump_mb/($end-$start),1))")
dsos=$(find . -maxdepth 1 -name 'jitted-*.so' | wc -l)
echo "perf inject -j: ${dump_mb} MB jitdump $dump (${mapper_loads} CODE_LOADs, ${dsos} DSOs written) in ${inject_s} s = ${inject_rate} MB/s"
rm -f ../inject.db
sync
start=$(date +%s.%N)
"$symdex" --db ../inject.db jit ingest "$dump" >/dev/null
end=$(date +%s.%N)
same_s=$(python3 -c "print(round($end-$start,2))")
same_rate=$(python3 -c "print(round($dump_mb/($end-$start),1))")
echo "symdex jit ingest on the same ${dump_mb} MB dump: ${same_s} s = ${same_rate} MB/s ($(sqlite3 ../inject.db 'select count(*) from jit_loads') loads)"
echo "ratio symdex/perf inject -j (same ${dump_mb} MB file): $(python3 -c "print(round($same_rate/$inject_rate,1))")x"
cd "$wd" && rm -rf inject inject.db
