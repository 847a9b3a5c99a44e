#!/usr/bin/env bash
# A whole Debian kernel flavour indexed cold, against llvm-symbolizer-14's one batch over every text
# function of the same kernel (vmlinux and every module), measured in the same run:
#
#   tests/bench/flavour_index.sh [--kernels K1,K2,...] [--out FILE] [SYMDEX_BIN]
#
# Kernels: tests/bench/kernels.sh's names (default debian-6.1-amd64-generic: 4,022 modules, 5.4 GB
# of debug files). Per kernel:
#   - symdex: `symdex index` of System.map + every module + every debug file into a new database:
#     wall time, and the peak anonymous memory (RssAnon, sampled every 50 ms) of each process
#     of the run — the CLI and each debug-file worker — reported as the largest. Goal: <= 0.25x
#     the batch's time, <= 128 MiB per process.
#   - the peer: one llvm-symbolizer-14 process over every text function's start, vmlinux's at
#     their link-time addresses in vmlinux's debug file, each module's at its offset in `.text`
#     of the module's debug file: its wall time and peak RSS (/usr/bin/time %M). The peer does
#     less than symdex (no symbol tables joined, nothing stored), on the same functions.
# Prints one markdown table and writes it to --out. Corpora are fetched once into
# ~/.cache/symdex-corpus (~1 GB to download and 5.4 GB unpacked for the generic flavour); the peer
# over the generic kernel holds ~24 GB at its peak: run it on a machine with that much memory.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$here/../..
KERNELS=debian-6.1-amd64-generic
OUT=
while [ $# -gt 0 ]; do
  case $1 in
    --kernels) KERNELS=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "flavour_index: unknown option $1" >&2; exit 2 ;;
    *) break ;;
  esac
done
SYMDEX=$(realpath "${1:-$root/build/bin/symdex}")
unset DEBUGINFOD_URLS
command -v llvm-symbolizer-14 >/dev/null || { echo "flavour_index: needs llvm-symbolizer-14 (apt-get install llvm-14)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
CACHE=${SYMDEX_CORPUS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/symdex-corpus}
log() { printf '[flavour_index] %s\n' "$*" >&2; }
now() { date +%s.%N; }
. "$here/kernels.sh"

# The largest RssAnon (KiB) the process `pid` or any of its children (the debug-file workers)
# reached while it ran: /proc sampled every 50 ms into $work/anon.
sample_anon() {
  local pid=$1 max=0 v p
  while kill -0 "$pid" 2>/dev/null; do
    for p in "$pid" $(pgrep -P "$pid"); do
      v=$(awk '/^RssAnon:/{print $2}' "/proc/$p/status" 2>/dev/null || true)
      [ -n "$v" ] && [ "$v" -gt "$max" ] && max=$v
    done
    echo "$max" >"$work/anon"
    sleep 0.05
  done
}

rows=()
failed=0
row() {  # row KERNEL MEASURE SYMDEX PEER RATIO GOAL MET
  rows+=("| $1 | $2 | $3 | $4 | $5 | $6 | $7 |")
  [ "$7" = no ] && failed=1
  printf '  %-26s %-44s %-12s %-12s %-6s %-8s %s\n' "$@" >&2
}

IFS=, read -r -a list <<<"$KERNELS"
for k in "${list[@]}"; do
  log "== $k"
  kernel "$k"
  DEBUG=$DBG/usr/lib/debug
  # The peer's input: "FILE ADDR" lines, vmlinux's text symbols and each module debug file's
  # text functions (STT_FUNC in .text) at their offsets.
  awk -v f="$VML" '$2=="t"||$2=="T"{print f " 0x" $1}' "$MAP" | sort -u >"$work/peer.in"
  python3 - "$DEBUG/lib/modules/$KREL" "$root/tests/e2e" >>"$work/peer.in" <<'PY'
import os, struct, sys
sys.path.insert(0, sys.argv[2])
from verdicts import elf_sections  # [(name, type, addr, offset, size, link, flags)]
for d, _s, files in os.walk(sys.argv[1]):
    for n in files:
        if not n.endswith(".ko"):
            continue
        p = os.path.join(d, n)
        with open(p, "rb") as f:
            secs = elf_sections(f)
            text = [i for i, s in enumerate(secs) if s[0] == ".text"]
            sym = next((s for s in secs if s[1] == 2), None)  # SHT_SYMTAB
            if not text or sym is None:
                continue
            f.seek(sym[3])
            tab = f.read(sym[4])
            for _n, info, _o, shndx, value, _sz in struct.iter_unpack("<IBBHQQ", tab):
                if info & 0xF == 2 and shndx == text[0]:  # STT_FUNC in .text
                    print(f"{p} {value:#x}")
PY
  nfun=$(wc -l <"$work/peer.in")
  nko=$(find "$MODS" -name '*.ko*' | wc -l)
  log "warming the page cache: every debug file, the module files"
  find -L "$DEBUG" "$MODS" -type f -print0 | xargs -0 cat >/dev/null 2>&1 || true

  log "symdex index: System.map + $nko modules + their debug files"
  rm -rf "$work/db"*
  echo 0 >"$work/anon"
  s=$(now)
  "$SYMDEX" --db "$work/db" index -q --json --system-map "$MAP" --modules-dir "$MODS" --debug-dir "$DEBUG" \
    --no-addr-map --name "$k" >"$work/index.json" 2>"$work/index.err" &
  ipid=$!
  sample_anon "$ipid" &
  spid=$!
  rc=0; wait "$ipid" || rc=$?
  e=$(now)
  wait "$spid" || true
  [ "$rc" = 0 ] || { cat "$work/index.err" >&2; log "symdex index failed ($rc)"; exit 1; }
  sym_s=$(echo "$e - $s" | bc)
  sym_anon=$(( $(cat "$work/anon") / 1024 ))
  used=$(python3 -c 'import json,sys; d=json.load(sys.stdin)["debug_files"]; print(d["indexed"] + d["cached"])' <"$work/index.json")

  log "llvm-symbolizer-14: one batch over $nfun text functions"
  s=$(now)
  /usr/bin/time -f %M -o "$work/peer-peak" llvm-symbolizer-14 <"$work/peer.in" >"$work/peer.out" 2>/dev/null || true
  e=$(now)
  peer_s=$(echo "$e - $s" | bc)
  peer_mib=$(( $(cat "$work/peer-peak") / 1024 ))

  ratio=$(python3 -c "print(f'{$sym_s/$peer_s:.2f}')")
  row "$k" "whole-kernel cold index ($nko modules, $used debug files) / the batch ($nfun functions)" \
    "$(printf '%.1f s' "$sym_s")" "$(printf '%.1f s' "$peer_s")" "$ratio" "<= 0.25" \
    "$(python3 -c "print('yes' if $sym_s <= 0.25 * $peer_s else 'no')")"
  row "$k" "peak anonymous memory of one process (symdex: RssAnon; peer: peak RSS)" \
    "$sym_anon MiB" "$peer_mib MiB" "$(python3 -c "print(f'{$sym_anon/max($peer_mib,1):.3f}')")" "<= 128 MiB" \
    "$(python3 -c "print('yes' if $sym_anon <= 128 else 'no')")"
done

{
  echo "Whole flavours, $(date -u +%Y-%m-%d), $(nproc) cores ($(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)), $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?'): \`tests/bench/flavour_index.sh$([ "$KERNELS" != debian-6.1-amd64-generic ] && echo " --kernels $KERNELS")\`"
  echo
  echo "| kernel | measure | symdex | llvm-symbolizer-14 | ratio | goal | met |"
  echo "|---|---|---|---|---|---|---|"
  printf '%s\n' "${rows[@]}"
} | tee "${OUT:-/dev/null}"
exit "$failed"
