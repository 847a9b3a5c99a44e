#!/usr/bin/env bash
# The kernel matrix: the same checks over every kernel build symdex claims to read, each against
# llvm-symbolizer-14 measured in the same run.
#
#   tests/bench/kernel_matrix.sh [--boot] [--flavours | --only-flavours] [--kernels K1,K2,...] [--out FILE] [SYMDEX_BIN]
#
# Kernels (default: these; --flavours adds Debian's other flavours of both releases and
# architectures, --only-flavours runs those alone, --kernels names any):
#   debian-6.1-amd64   Debian 12's cloud kernel (gcc 12, DWARF 5)
#   debian-6.1-arm64   the same release for arm64
#   debian-6.12-amd64  Debian 12's 6.12 cloud kernel (__pfx_ padding, IBT, .ko.xz modules)
#   debian-6.12-arm64  the same release for arm64 (CONFIG_DYNAMIC_FTRACE_WITH_CALL_OPS)
#   debian-R-A-F       (--flavours) R 6.1 or 6.12, A amd64 or arm64, F generic or rt, and
#                      debian-6.12-arm64-16k: ~1 GB to download and up to 5.4 GB unpacked each
#   clang-6.1-amd64    linux-source-6.1 built with LLVM=1 (clang's DWARF 5; tests/corpus/build-clang-kernel.sh)
#   zlib-6.1-amd64     debian-6.1-amd64 with vmlinux's debug sections compressed by objcopy (zlib)
#   zstd-6.1-amd64     the same with zstd
# Per kernel: a cold whole-kernel index (System.map + every module + every debug file: time, peak
# RSS, debug files used, which reader read vmlinux); a cold vmlinux-only index against
# llvm-symbolizer's batch over the vmlinux text symbols (time and peak RSS); entry lines of every
# vmlinux text symbol and of every instance of a duplicated name against llvm-symbolizer; 5,000
# random in-function addresses against llvm-symbolizer; every text symbol's canonical spec
# resolved back to itself. --boot also boots the kernel under qemu (tests/e2e/qemu_kprobes.sh:
# definitions accepted, refusals predicted, verdicts = the guest's lists) where it boots (not the
# compressed copies: their running kernel is debian-6.1-amd64's).
# Prints one table (markdown) and writes it to --out; exits 1 if any check fails.
# Corpora are fetched or built once into ~/.cache/symdex-corpus (several GB; the clang kernel
# took 11-13 min to build on 2 cores): outside CI's budget.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$here/../..
BOOT=0
KERNELS=debian-6.1-amd64,debian-6.1-arm64,debian-6.12-amd64,debian-6.12-arm64,clang-6.1-amd64,zlib-6.1-amd64,zstd-6.1-amd64
ALL_KERNELS=$KERNELS
FLAVOURS=debian-6.1-amd64-generic,debian-6.1-amd64-rt,debian-6.1-arm64-generic,debian-6.1-arm64-rt
FLAVOURS=$FLAVOURS,debian-6.12-amd64-generic,debian-6.12-amd64-rt,debian-6.12-arm64-generic,debian-6.12-arm64-rt
FLAVOURS=$FLAVOURS,debian-6.12-arm64-16k
OUT=
while [ $# -gt 0 ]; do
  case $1 in
    --boot) BOOT=1; shift ;;
    --kernels) KERNELS=$2; shift 2 ;;
    --flavours) KERNELS=$ALL_KERNELS,$FLAVOURS; ALL_KERNELS=$KERNELS; FLAVOURS_ASKED=" --flavours"; shift ;;
    --only-flavours) KERNELS=$FLAVOURS; ALL_KERNELS=$KERNELS; FLAVOURS_ASKED=" --only-flavours"; shift ;;
    --out) OUT=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "kernel_matrix: unknown option $1" >&2; exit 2 ;;
    *) break ;;
  esac
done
SYMDEX=$(realpath "${1:-$root/build/bin/symdex}")
WORKER=$(dirname "$SYMDEX")/symdex-debuginfo-worker
unset DEBUGINFOD_URLS
command -v llvm-symbolizer-14 >/dev/null || { echo "kernel_matrix: needs llvm-symbolizer-14 (apt-get install llvm-14)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
CACHE=${SYMDEX_CORPUS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/symdex-corpus}
# shellcheck source=tests/integration/lib.sh
. "$root/tests/integration/lib.sh"  # roundtrip_mismatches
now() { date +%s.%N; }
log() { printf '[kernel_matrix] %s\n' "$*" >&2; }
rows=()
failed=0
row() {  # row KERNEL CHECK SYMDEX PEER RATIO PASS(yes|no|-)
  rows+=("| $1 | $2 | $3 | $4 | $5 | $6 |")
  [ "$6" = no ] && failed=1
  printf '  %-20s %-58s %s / %s = %s %s\n' "$1" "$2" "$3" "$4" "$5" "$( [ "$6" = no ] && echo FAIL || true)" >&2
}
pct() { python3 -c "import sys; print(f'{100*$1/max($2,1):.2f}%')"; }
# "A/B" -> A/B as a fraction with 4 decimals ("-" when B is 0 or missing).
frac() { python3 -c "a,_,b='$1'.partition('/'); print(f'{100*int(a)/int(b):.3f}%' if a.strip().isdigit() and b.strip().isdigit() and int(b) else '-')"; }

# shellcheck source=tests/bench/kernels.sh
. "$here/kernels.sh"  # kernel K -> KREL DBG IMG MAP VML MODS ARCH BOOTENV PEER_VML PEER_NOTE

# The e2e driver's verdicts in one cell: probes placed where symdex said, sampled verdicts equal
# to the kernel's, available_filter_functions lines predicted, blacklist missed/extra, decode.
boot_summary() {
  python3 - "$1" <<'PY'
import json, re, sys
t = open(sys.argv[1], errors="replace").read()
out = []
m = re.search(r"(\d+)/(\d+) probes placed at the intended instance", t)
out.append(f"probes {m.group(1)}/{m.group(2)}" if m else "probes ?")
m = re.search(r"(\d+)/(\d+) sampled instances: symdex and the kernel agree", t)
out.append(f"verdicts {m.group(1)}/{m.group(2)}" if m else "verdicts ?")
m = re.search(r'ftrace agreement .*?: (\{.*\})', t)
if m:
    d = json.loads(m.group(1))
    other = d["listed_lines"] - d["predicted"]  # orphan __weak bodies, addresses in no symbol
    out.append(f"ftrace lines predicted {d['predicted']}/{d['listed_lines']}"
               + (f" (+{other} orphan/unsymbolized)" if other else "") + f", {d['disagreements']} disagree")
m = re.search(r'kprobe blacklist .*?: (\{.*\})', t)
if m:
    d = json.loads(m.group(1))
    out.append(f"blacklist missed {d['missed']} extra {d['extra']}")
m = re.search(r"wrong: (\d+)", t)
if m:
    out.append(f"decode wrong {m.group(1)}")
if "e2e PASSED" not in t:
    out.append("FAILED: " + (re.findall(r"^(?:FAIL|SKIP).*$", t, re.M) or ["see log"])[-1][:120])
print("; ".join(out))
PY
}

IFS=, read -r -a list <<<"$KERNELS"
for k in "${list[@]}"; do
  log "== $k"
  kernel "$k"
  db=$work/$k.db
  export SYMDEX_DB=$db
  nko=$(find "$MODS" -name '*.ko*' | wc -l)
  cat "$VML" "$MAP" >/dev/null  # the page cache warm for every reader alike

  # Whole kernel, cold.
  rm -rf "$db"*
  s=$(now)
  /usr/bin/time -f %M -o "$work/peak" "$SYMDEX" index -q --json --system-map "$MAP" --modules-dir "$MODS" \
    --debug-dir "$DBG/usr/lib/debug" --name "$k" >"$work/all.json" 2>"$work/all.err" || true
  e=$(now)
  all=$(echo "$e - $s" | bc)
  "$SYMDEX" status --json >"$work/status.json"
  used=$(python3 -c "import json; d=json.load(open('$work/status.json')); print(sum(1 for x in d['targets'][0]['debuginfo'] if x['status'] in ('used','cached')))")
  # The peer: one llvm-symbolizer-14 batch over vmlinux's text-symbol addresses, timed here.
  awk '$2=="t"||$2=="T"{print "0x"$1}' "$MAP" | sort -u >"$work/addrs"
  s=$(now)
  /usr/bin/time -f %M -o "$work/lpeak" llvm-symbolizer-14 --obj="$PEER_VML" <"$work/addrs" >/dev/null
  e=$(now)
  lsec=$(echo "$e - $s" | bc)
  lbatch=$(printf 'llvm-symbolizer-14 batch (%d addresses)%s: %.2f s, peak RSS %d MiB' "$(wc -l <"$work/addrs")" \
    "$PEER_NOTE" "$lsec" $(($(cat "$work/lpeak") / 1024)))
  row "$k" "whole kernel cold index ($nko modules)" \
    "$(printf '%.2f s, peak RSS %d MiB' "$all" $(($(cat "$work/peak") / 1024)))" "$lbatch" \
    "$(printf '%.2f' "$(echo "$all / $lsec" | bc -l)")" -
  row "$k" "debug files used (vmlinux + every module)" "$used" "$((nko + 1)) on disk" "$(frac "$used/$((nko + 1))")" \
    "$([ "$used" = $((nko + 1)) ] && echo yes || echo no)"

  # Which reader read vmlinux: symdex's DIE scanner for every unit, or libdw for the file.
  scan=$("$WORKER" --print -j "$(nproc)" "$VML" | sed -n 's/.* units=\([0-9]*\) .* scanned=\([0-9]*\)$/\2\/\1/p')
  row "$k" "vmlinux units read by symdex's own DIE scanner (no libdw fallback)" "${scan%/*}" \
    "${scan#*/} units in vmlinux" "$(frac "$scan")" \
    "$([ -n "$scan" ] && [ "${scan%/*}" = "${scan#*/}" ] && echo yes || echo no)"

  # vmlinux alone, cold, against the llvm-symbolizer batch.
  rm -rf "$work/v.db"*
  /usr/bin/time -f %M -o "$work/vpeak" "$SYMDEX" --db "$work/v.db" index -q --json --system-map "$MAP" \
    --debug-dir "$DBG/usr/lib/debug" --name "$k" >"$work/v.json"
  vsec=$(python3 -c "import json; print(json.load(open('$work/v.json'))['seconds'])")
  ratio=$(echo "$vsec / $lsec" | bc -l)
  row "$k" "vmlinux cold index" "$(printf '%.2f s, peak RSS %d MiB' "$vsec" $(($(cat "$work/vpeak") / 1024)))" \
    "$lbatch" "$(printf '%.2f' "$ratio")" "$(python3 -c "print('yes' if $ratio <= 1.0 else 'no')")"

  # Entry lines: every vmlinux text symbol, every instance of a duplicated name.
  "$root/tests/integration/compare_llvm_symbolizer.py" "$SYMDEX" "$PEER_VML" --min-agree 0 --dups-min-agree 0 --show 3 \
    >"$work/lines.out" 2>&1 || true
  all_l=$(sed -n 's/.*text symbols: \([0-9]*\); entry file:line agree with llvm-symbolizer-14: \([0-9]*\) .*/\2\/\1/p' "$work/lines.out")
  dup_l=$(sed -n 's/.*instances of duplicated names: \([0-9]*\); agree: \([0-9]*\) .*/\2\/\1/p' "$work/lines.out")
  row "$k" "entry lines of duplicated-name instances" "${dup_l%/*} agree" "llvm-symbolizer-14: ${dup_l#*/}" \
    "$(frac "$dup_l")" "$([ -n "$dup_l" ] && [ "${dup_l%/*}" = "${dup_l#*/}" ] && echo yes || echo no)"
  row "$k" "entry lines of every vmlinux text symbol" "${all_l%/*} agree" "llvm-symbolizer-14: ${all_l#*/}" \
    "$(frac "$all_l")" -

  # Random in-function addresses (function, file, line, inline chain).
  "$root/tests/integration/compare_addr_llvm.py" "$SYMDEX" "$PEER_VML" "$MAP" --count 5000 --min-agree 99.9 --show 3 \
    >"$work/addr.out" 2>&1 && ok=yes || ok=no
  agree=$(grep -Eo '[0-9]+ \([0-9.]+%\)' "$work/addr.out" | head -1 | cut -d' ' -f1)
  row "$k" "random in-function addresses: function, file, line, inline chain (>= 99.9%)" "${agree:-?} agree" \
    "llvm-symbolizer-14: 5000" "$(frac "${agree:-0}/5000")" "$ok"

  # Round trip.
  "$SYMDEX" symbols --canonical >"$work/canonical.tsv"
  cut -f1 "$work/canonical.tsv" | "$SYMDEX" resolve --json - >"$work/roundtrip.json" || true
  bad=$(roundtrip_mismatches "$work")
  total=$(wc -l <"$work/canonical.tsv")
  row "$k" "canonical specs resolving back to their symbol" "$((total - bad))" "$total symbols" \
    "$(frac "$((total - bad))/$total")" "$([ "$bad" = 0 ] && echo yes || echo no)"

  if [ "$BOOT" = 1 ] && [ "$BOOTENV" != none ]; then
    log "booting $k"
    args=()
    [ "$ARCH" = arm64 ] && args=(--arch arm64)
    if env $BOOTENV "$root/tests/e2e/qemu_kprobes.sh" "${args[@]}" "$SYMDEX" >"$work/boot.out" 2>&1; then ok=yes; else ok=no; fi
    [ -n "$OUT" ] && cp "$work/boot.out" "$OUT.boot-$k.log"
    row "$k" "booted guest (tests/e2e/qemu_kprobes.sh)" "$(boot_summary "$work/boot.out")" \
      "the booted kernel (tracefs, kprobes list)" - "$ok"
  fi
done
unset SYMDEX_DB

{
  echo "Kernel matrix, $(date -u +%Y-%m-%d), $(nproc) cores ($(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)), $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?'): \`tests/bench/kernel_matrix.sh$([ "$BOOT" = 1 ] && echo " --boot")${FLAVOURS_ASKED:-}$([ "$KERNELS" != "$ALL_KERNELS" ] && echo " --kernels $KERNELS")\`"
  echo
  echo "| kernel | check | symdex | peer (same run) | ratio | pass |"
  echo "|---|---|---|---|---|---|"
  printf '%s\n' "${rows[@]}"
} | tee "${OUT:-/dev/null}"
exit $failed
