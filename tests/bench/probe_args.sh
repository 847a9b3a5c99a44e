#!/usr/bin/env bash
# Probe arguments by name against perf probe, on a large sample: for N functions with a unique
# name in each of Debian's 6.1 cloud vmlinux (x86-64, arm64), `symdex kprobe -n FUNC '$params'`
# against `perf probe -k VMLINUX -D 'FUNC $params'` fetch arg for fetch arg, and `symdex vars` against
# `perf probe -V` on a part of them (tests/integration/compare_perf_probe.py); with the time per
# definition of each — symdex a new CLI process per definition, perf one run per 50 definitions
# (it reads the DWARF once per run; alone it takes seconds per definition).
#
# And lines of the body: N functions probed at a random line 1-12 of their body, `--rel-line`
# against perf's FUNC:RLN, every place and its `$vars` compared (--lines N).
#
# And inlined places: N functions declared inline (their verdict says so), `--inlined FUNC
# '$params'` against perf's `FUNC $params` (which probes the inlined places too), place by place
# where both put one (--inlined N; tests/integration/compare_perf_inlined.py). And the same with
# the modules indexed: N functions (vmlinux's and the modules'), each module's places against
# `perf probe -m MODULE.ko` (--module-inlined N).
#
#   tests/bench/probe_args.sh [--sample N] [--vars N] [--lines N] [--inlined N] [--module-inlined N]
#                             [--out FILE] [SYMDEX_BIN]
#
# Prints one markdown table and writes it to --out; exit 1 when a row misses its goal.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$here/../..
SAMPLE=300
VARS=40
LINES=300
INLINED=60
MODULE_INLINED=40
OUT=
while [ $# -gt 0 ]; do
  case $1 in
    --sample) SAMPLE=$2; shift 2 ;;
    --vars) VARS=$2; shift 2 ;;
    --lines) LINES=$2; shift 2 ;;
    --inlined) INLINED=$2; shift 2 ;;
    --module-inlined) MODULE_INLINED=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "probe_args: unknown option $1" >&2; exit 2 ;;
    *) break ;;
  esac
done
SYMDEX=$(realpath "${1:-$root/build/bin/symdex}")
unset DEBUGINFOD_URLS
command -v perf >/dev/null || { echo "probe_args: needs perf (apt-get install linux-perf)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
rows=()
failed=0
row() {  # row KERNEL MEASURE SYMDEX PEER RATIO GOAL MET
  rows+=("| $1 | $2 | $3 | $4 | $5 | $6 | $7 |")
  [ "$7" = no ] && failed=1
  printf '  %-22s %-58s %-10s %-10s %-8s %-8s %s\n' "$@" >&2
}
for arch in amd64 arm64; do
  eval "$(SYMDEX_KERNEL_ARCH=$arch "$root/tests/corpus/fetch-debian-kernel.sh" dbg)"
  export SYMDEX_DB=$work/$arch.db
  "$SYMDEX" index -q --system-map "$ROOT/usr/lib/debug/boot/System.map-$KREL" --debug-dir "$ROOT/usr/lib/debug" \
    --name "$arch" >/dev/null 2>&1
  "$root/tests/integration/compare_perf_probe.py" "$SYMDEX" "$ROOT/usr/lib/debug/boot/vmlinux-$KREL" \
    --sample "$SAMPLE" --vars "$VARS" --seed 11 --summary "$work/$arch.json" --show 5 >&2 || true
  read -r n refused cmp agree inl sms pms vc va vt < <(python3 -c "
import json; d = json.load(open('$work/$arch.json'))
print(d['probes'], d['perf_refused'], d['compared'], d['agree'], d['perf_inlined'], '%.1f' % d['symdex_ms'],
      '%.1f' % d['perf_ms'], d['vars_compared'], d['vars_agree'], d['vars_types'])")
  k="debian-6.1-$arch"
  row "$k" "\`kprobe FUNC '\$params'\`: fetch args as perf's ($cmp of $n; perf gave none for $refused)" \
    "$agree" "$cmp" "$(python3 -c "print(f'{100*$agree/max($cmp,1):.2f}%')")" "100%" \
    "$([ "$agree" = "$cmp" ] && [ "$cmp" -gt 0 ] && echo yes || echo no)"
  row "$k" "  ... of them where perf adds the parameters of functions inlined at the entry" "$inl" "-" - - -
  row "$k" "time per definition (symdex: a new process each; perf: batches of 50)" "$sms ms" "$pms ms" \
    "$(python3 -c "print(f'{$sms/$pms:.3f}')")" "<= 0.1" "$(python3 -c "print('yes' if $sms <= 0.1 * $pms else 'no')")"
  row "$k" "\`vars FUNC\`: the entry's variables among perf -V's, same types" "$vt" "$vc" \
    "$(python3 -c "print(f'{100*$vt/max($vc,1):.2f}%')")" "100%" "$([ "$vt" = "$vc" ] && [ "$vc" -gt 0 ] && echo yes || echo no)"
  "$root/tests/integration/compare_perf_probe.py" "$SYMDEX" "$ROOT/usr/lib/debug/boot/vmlinux-$KREL" \
    --sample "$LINES" --seed 5 --lines --summary "$work/$arch-lines.json" --show 5 >&2 || true
  read -r n refused cmp agree fop < <(python3 -c "
import json; d = json.load(open('$work/$arch-lines.json'))
print(d['probes'], d['perf_refused'], d['compared'], d['agree'], d['perf_first_op'])")
  row "$k" "\`kprobe --rel-line N FUNC '\$vars'\`: every place and fetch as perf's FUNC:N ($cmp of $n; perf gave none for $refused)" \
    "$agree" "$cmp" "$(python3 -c "print(f'{100*$agree/max($cmp,1):.2f}%')")" "100%" \
    "$([ "$agree" = "$cmp" ] && [ "$cmp" -gt 0 ] && echo yes || echo no)"
  "$root/tests/integration/compare_perf_inlined.py" "$SYMDEX" "$ROOT/usr/lib/debug/boot/vmlinux-$KREL" \
    --sample "$INLINED" --seed 3 --summary "$work/$arch-inlined.json" --show 5 >&2 || true
  read -r n with cmp agree nested computed fop magic pieces < <(python3 -c "
import json; d = json.load(open('$work/$arch-inlined.json'))
print(d['functions'], d['with_places'], d['compared'], d['agree'], d['nested'], d['computed'], d['first_op'],
      d['perf_magic'] + d['magic_here'], d['pieces'])")
  row "$k" "\`kprobe --inlined FUNC '\$params'\`: fetch args as perf's at each place both give ($cmp places of $with of $n functions)" \
    "$agree" "$cmp" "$(python3 -c "print(f'{100*$agree/max($cmp,1):.2f}%')")" "100%" \
    "$([ "$agree" = "$cmp" ] && [ "$cmp" -gt 0 ] && echo yes || echo no)"
  row "$k" "  ... of them where perf adds nested inlined parameters / reads a computed value as memory / reads the first operation only / the first of several pieces" \
    "$nested / $computed / $fop / $pieces" "-" - - -
  row "$k" "  places where perf fetches its magic 0xdeade12d (no location; symdex leaves it out)" "-" "$magic" - - -
  if [ "$MODULE_INLINED" -gt 0 ]; then
    export SYMDEX_DB=$work/$arch-modules.db
    "$SYMDEX" index -q --system-map "$ROOT/usr/lib/debug/boot/System.map-$KREL" \
      --modules-dir "$ROOT/usr/lib/debug/lib/modules" --debug-dir "$ROOT/usr/lib/debug" --name "$arch" >/dev/null 2>&1
    "$root/tests/integration/compare_perf_inlined.py" "$SYMDEX" "$ROOT/usr/lib/debug/boot/vmlinux-$KREL" \
      --sample "$MODULE_INLINED" --seed 11 --module-debug "$ROOT/usr/lib/debug" \
      --summary "$work/$arch-modules.json" --show 5 >&2 || true
    read -r n with cmp agree mods < <(python3 -c "
import json; d = json.load(open('$work/$arch-modules.json'))
print(d['functions'], d['with_places'], d['compared'], d['agree'], d['module_places'])")
    row "$k" "\`kprobe --inlined FUNC '\$params'\` with the modules: as perf's (\`-m MODULE.ko\` for a module's places) at each place both give ($cmp places, $mods in modules, of $with of $n functions)" \
      "$agree" "$cmp" "$(python3 -c "print(f'{100*$agree/max($cmp,1):.2f}%')")" "100%" \
      "$([ "$agree" = "$cmp" ] && [ "$mods" -gt 0 ] && echo yes || echo no)"
  fi
done
{
  echo "Probe arguments, $(date -u +%Y-%m-%d), $(nproc) cores ($(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)), $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?'): \`tests/bench/probe_args.sh --sample $SAMPLE --vars $VARS --lines $LINES --inlined $INLINED --module-inlined $MODULE_INLINED\`"
  echo
  echo "| kernel | measure | symdex | perf probe | ratio | goal | met |"
  echo "|---|---|---|---|---|---|---|"
  printf '%s\n' "${rows[@]}"
} | tee "${OUT:-/dev/null}"
exit "$failed"
