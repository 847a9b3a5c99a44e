#!/usr/bin/env bash
# Benchmark for `symdex addr`: the 46k vmlinux text-symbol addresses of the Debian
# cloud kernel (System.map t/T), symbolized by
#   - llvm-symbolizer-14 --obj=vmlinux             (the peer tool: fresh process, one batch)
#   - symdex addr -  with the vmlinux address map   (what `symdex index` leaves; embedded, no daemon)
#   - symdex addr -  without it                     (the libdw path, for reference)
# in the same run, each RUNS times; prints medians and the ratio llvm / symdex. Checks that the
# two symdex paths print byte-identical answers. Page cache warm for all: CPU, not disk.
#   tests/bench/addr.sh [build/bin/symdex] [RUNS=5]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
SYMDEX=${1:-$here/../../build/bin/symdex}
RUNS=${2:-5}
# shellcheck source=tests/bench/lib.sh
. "$here/lib.sh"
command -v llvm-symbolizer-14 >/dev/null || { echo "addr.sh: llvm-symbolizer-14 missing" >&2; exit 2; }
bench_corpus  # KREL, MAP, VML, MODS, DEBUG_DIR
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "== indexing $KREL (System.map + modules + -dbg DWARF)" >&2
bench_index "$SYMDEX" "$work/i.db" >"$work/index.json"
maps=$work/i.db-addrmaps
map_file=$(ls "$maps"/*.addrmap)
map_s=$(/usr/bin/python3 -c "import json,sys; print(json.load(sys.stdin)['addr_map_seconds'])" <"$work/index.json")
awk '$2=="t"||$2=="T"{print "0x"$1}' "$MAP" | sort -u >"$work/addrs"
n=$(wc -l <"$work/addrs")
cat "$VML" "$map_file" "$work/i.db" >/dev/null

timed() {  # timed OUTFILE CMD... -> seconds on stdout
  local out=$1 s e
  shift
  # symdex addr exits 1 when some address is in no function (the end markers of code regions,
  # e.g. __sched_text_end, are listed as text symbols): an answer, not a failure.
  s=$(now); "$@" <"$work/addrs" >"$out" || [ $? = 1 ]; e=$(now)
  echo "$e - $s" | bc
}
for i in $(seq "$RUNS"); do
  echo "== run $i/$RUNS" >&2
  timed "$work/llvm.out" llvm-symbolizer-14 --obj="$VML" >>"$work/t_llvm"
  timed "$work/map.out" "$SYMDEX" --db "$work/i.db" addr - >>"$work/t_map"
  mv "$maps" "$maps.off"
  timed "$work/dw.out" "$SYMDEX" --db "$work/i.db" addr - >>"$work/t_dw"
  mv "$maps.off" "$maps"
done
cmp -s "$work/map.out" "$work/dw.out" || { echo "addr.sh: address-map and libdw answers differ" >&2; diff "$work/map.out" "$work/dw.out" | head >&2; exit 1; }
rss_map=$( { /usr/bin/time -f '%M' "$SYMDEX" --db "$work/i.db" addr - <"$work/addrs" >/dev/null || true; } 2>&1 | tail -1)
rss_llvm=$( { /usr/bin/time -f '%M' llvm-symbolizer-14 --obj="$VML" <"$work/addrs" >/dev/null; } 2>&1 | tail -1)

ll=$(median <"$work/t_llvm"); mp=$(median <"$work/t_map"); dw=$(median <"$work/t_dw")
echo "kernel $KREL: symbolize $n vmlinux text-symbol addresses, $(nproc) cores, median of $RUNS runs"
printf '  llvm-symbolizer-14 --obj=vmlinux:         %6.3f s  peak RSS %4d MB\n' "$ll" $((rss_llvm / 1024))
printf '  symdex addr (address map, embedded):     %6.3f s  peak RSS %4d MB\n' "$mp" $((rss_map / 1024))
printf '  symdex addr (no address map: libdw):     %6.3f s\n' "$dw"
printf '  address map: %d MB, built by symdex index in %.2f s\n' $(( $(stat -c %s "$map_file") / 1048576 )) "$map_s"
printf '  ratio llvm-symbolizer / symdex addr:            %5.1fx (target >= 10x)\n' "$(echo "$ll / $mp" | bc -l)"
printf '  ratio llvm-symbolizer / symdex addr, no map:    %5.1fx\n' "$(echo "$ll / $dw" | bc -l)"
