#!/usr/bin/env bash
# Benchmark: where a cold `symdex index` holds its memory. Indexes the Debian
# cloud kernel into a new database and samples every process of the run every 0.1 s
# (/proc/PID/status: VmHWM, RssAnon, RssFile), so the peak of each DWARF worker (the index
# worker, the address-map worker) is told apart from the CLI's; /usr/bin/time gives the run's peak
# (the largest process, file-backed pages included). Target: <= 300 MB.
#   tests/bench/index_memory.sh [build/bin/symdex] [JOBS=2] [all|vmlinux]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
SYMDEX=$(readlink -f "${1:-$here/../../build/bin/symdex}")
JOBS=${2:-2}
INPUT=${3:-all}
# shellcheck source=tests/bench/lib.sh
. "$here/lib.sh"
bench_corpus  # KREL, MAP, VML, MODS, DEBUG_DIR
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
args=(--db "$work/i.db" index -q --json --system-map "$MAP" --debug-dir "$DEBUG_DIR" --no-debuginfod -j "$JOBS")
[ "$INPUT" = all ] && args+=(--modules-dir "$MODS")
/usr/bin/time -f '%e %M' -o "$work/time" "$SYMDEX" "${args[@]}" >"$work/index.json" 2>/dev/null &
run=$!
: >"$work/samples"
while kill -0 "$run" 2>/dev/null; do
  for p in $(pgrep -x 'symdex|symdex-debuginf' || true); do  # comm: 15 characters
    awk -v p="$p" -v c="$(tr -d '\0' </proc/"$p"/comm 2>/dev/null)" \
      '/^(VmHWM|RssAnon|RssFile):/ {v[$1]=$2} END {if (v["VmHWM:"]) print p, c, v["VmHWM:"], v["RssAnon:"], v["RssFile:"]}' \
      /proc/"$p"/status 2>/dev/null || true
  done >>"$work/samples"
  sleep 0.1
done
wait "$run"
read -r wall peak <"$work/time"
echo "symdex index ($INPUT, -j $JOBS), kernel $KREL: ${wall} s, peak RSS $((peak / 1024)) MB (target <= 300 MB)"
echo "per process (sampled every 0.1 s; a peak shorter than that shows only in VmHWM):"
awk '{ if ($3 > h[$1]) h[$1] = $3; if ($4 > a[$1]) a[$1] = $4; if ($5 > f[$1]) f[$1] = $5; c[$1] = $2 }
     END { for (p in h) printf "  pid %-8s %-24s VmHWM %4d MB  max anon %4d MB  max file %4d MB\n", p, c[p], h[p]/1024, a[p]/1024, f[p]/1024 }' \
  "$work/samples" | sort -k5 -n
