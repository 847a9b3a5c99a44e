#!/usr/bin/env bash
# Benchmark: how `symdex index` time and memory grow with the work. Three inputs
# from the Debian cloud kernel, each indexed into a new database with 1 and with 2 threads:
#   vmlinux          System.map + vmlinux's DWARF (no modules)
#   + half modules   ... + every other module (sorted by path) and its debug file
#   + all modules    ... + all 1,121 modules and their debug files
# Prints a table: input (symbols, debug bytes read), wall seconds, CPU seconds, peak RSS, and
# each row's time and memory relative to the vmlinux row with the same thread count.
#   tests/bench/index_scaling.sh [build/bin/symdex] [RUNS=1]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
SYMDEX=$(readlink -f "${1:-$here/../../build/bin/symdex}")
RUNS=${2:-1}
# shellcheck source=tests/bench/lib.sh
. "$here/lib.sh"
bench_corpus  # KREL, MAP, VML, MODS, DEBUG_DIR
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The half-modules input: a directory of links to every other module.
half=$work/half-modules
mkdir -p "$half"
find "$MODS" -name '*.ko*' | sort | awk 'NR % 2 == 1' | while read -r m; do ln -s "$m" "$half/$(basename "$m")"; done
n_all=$(find "$MODS" -name '*.ko*' | wc -l)
n_half=$(find "$half" -name '*.ko*' | wc -l)
# Debug bytes each input reads: vmlinux, plus the -dbg package's .ko of each module indexed.
dbg_bytes() {  # dbg_bytes MODULE_DIR|-  -> bytes of vmlinux + those modules' debug files
  local dir=$1 total
  total=$(stat -c %s "$VML")
  if [ "$dir" != - ]; then
    total=$((total + $(find "$dir" -name '*.ko*' -printf '%f\n' | sed 's/\.ko.*$/.ko/' | sort >"$work/names" &&
      find "$DEBUG_DIR/lib/modules" -name '*.ko' -printf '%f %s\n' | sort |
      join - "$work/names" | awk '{s+=$2} END{print s+0}')))
  fi
  echo "$total"
}
# Warm the page cache: CPU and memory, not disk.
cat "$VML" "$MAP" >/dev/null
find "$DEBUG_DIR/lib/modules" "$MODS" -name '*.ko*' -print0 | xargs -0 cat >/dev/null

run() {  # run LABEL JOBS [modules dir] -> "wall cpu rss_kb symbols" (best wall of RUNS)
  local label=$1 jobs=$2 mods=${3:-} best="" i
  for i in $(seq "$RUNS"); do
    rm -rf "$work"/i.db*
    local args=(--db "$work/i.db" index -q --json --system-map "$MAP" --debug-dir "$DEBUG_DIR" --no-debuginfod -j "$jobs")
    [ -n "$mods" ] && args+=(--modules-dir "$mods")
    /usr/bin/time -f '%e %U %S %M' -o "$work/time" "$SYMDEX" "${args[@]}" >"$work/index.json"
    read -r wall user sys rss <"$work/time"
    local syms
    syms=$(python3 -c "import json,sys; print(json.load(sys.stdin)['symbols'])" <"$work/index.json")
    local line
    line="$wall $(echo "$user + $sys" | bc) $rss $syms"
    if [ -z "$best" ] || [ "$(echo "$wall < ${best%% *}" | bc)" = 1 ]; then best=$line; fi
  done
  echo "$best"
}

echo "kernel $KREL, $(nproc) cores, best of $RUNS run(s) each; page cache warm" >&2
declare -A R
for jobs in 1 2; do
  echo "== -j $jobs: vmlinux" >&2
  R[v$jobs]=$(run vmlinux "$jobs")
  echo "== -j $jobs: + half the modules ($n_half)" >&2
  R[h$jobs]=$(run half "$jobs" "$half")
  echo "== -j $jobs: + all modules ($n_all)" >&2
  R[a$jobs]=$(run all "$jobs" "$MODS")
done
bv=$(dbg_bytes -)
bh=$(dbg_bytes "$half")
ba=$(dbg_bytes "$MODS")

echo
echo "symdex index scaling: kernel $KREL, $(nproc) cores (peak RSS as /usr/bin/time reports it)"
printf '%-22s %4s %9s %10s %8s %8s %8s %9s %8s\n' input jobs symbols "debug MB" wall_s cpu_s rss_MB "wall/vml" "rss/vml"
for jobs in 1 2; do
  read -r vw _ vr _ <<<"${R[v$jobs]}"
  for k in v h a; do
    read -r w c r s <<<"${R[$k$jobs]}"
    case $k in
      v) label="vmlinux"; b=$bv ;;
      h) label="+ $n_half modules"; b=$bh ;;
      a) label="+ $n_all modules"; b=$ba ;;
    esac
    printf '%-22s %4d %9d %10.0f %8.2f %8.2f %8d %8.2fx %7.2fx\n' "$label" "$jobs" "$s" "$(echo "$b / 1048576" | bc -l)" \
      "$w" "$c" $((r / 1024)) "$(echo "$w / $vw" | bc -l)" "$(echo "$r / $vr" | bc -l)"
  done
done
read -r w1 _ _ _ <<<"${R[a1]}"
read -r w2 _ _ _ <<<"${R[a2]}"
printf 'all modules, 1 -> 2 threads: %.2fx faster\n' "$(echo "$w1 / $w2" | bc -l)"
