#!/usr/bin/env bash
# Benchmark: index the Debian cloud kernel offline (System.map + all 1,121 modules) with symdex,
# and, in the same run, the peer pipeline a kas_alias-style tool uses for the same answer
# (binutils nm over System.map's binary + every .ko, then sort | uniq -c). Prints medians of
# N runs, symdex's peak RSS, and the ratio.
#   tests/bench/index_offline.sh [build/bin/symdex] [RUNS=5]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
SYMDEX=${1:-$here/../../build/bin/symdex}
RUNS=${2:-5}
# shellcheck source=tests/bench/lib.sh
. "$here/lib.sh"
bench_corpus  # KREL, MAP, MODS; now, median
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Warm the page cache once so both sides read from memory.
cat "$MAP" >/dev/null; find "$MODS" -name '*.ko' -print0 | xargs -0 cat >/dev/null

for i in $(seq "$RUNS"); do
  rm -rf "$work"/idx.db*
  s=$(now); "$SYMDEX" --db "$work/idx.db" index -q --system-map "$MAP" --modules-dir "$MODS"; e=$(now)
  echo "$e - $s" | bc >>"$work/symdex"
  s=$(now); "$SYMDEX" --db "$work/idx.db" index -q --system-map "$MAP" --modules-dir "$MODS"; e=$(now)
  echo "$e - $s" | bc >>"$work/symdex_reindex"
  s=$(now)
  { awk '$2=="t"||$2=="T"{print $3}' "$MAP"
    find "$MODS" -name '*.ko' -print0 | xargs -0 nm 2>/dev/null | awk 'NF==3 && ($2=="t"||$2=="T"){print $3}'
  } | sort | uniq -c | awk '$1>1' >/dev/null
  e=$(now)
  echo "$e - $s" | bc >>"$work/nm"
done
rss=$( { /usr/bin/time -f '%M' "$SYMDEX" --db "$work/rss.db" index -q --system-map "$MAP" --modules-dir "$MODS"; } 2>&1 | tail -1)
sym=$(median <"$work/symdex"); re=$(median <"$work/symdex_reindex"); nm=$(median <"$work/nm")
echo "kernel $KREL, $(find "$MODS" -name '*.ko' | wc -l) modules, $(nproc) cores, median of $RUNS runs"
printf '  symdex index (new db)        %6.2f s   peak RSS %d MB\n' "$sym" $((rss / 1024))
printf '  symdex index (re-index)      %6.2f s\n' "$re"
printf '  nm | sort | uniq -c (dups)   %6.2f s\n' "$nm"
printf '  ratio symdex/nm-pipeline     %6.2f   (symdex also stores a queryable index)\n' "$(echo "$sym / $nm" | bc -l)"
