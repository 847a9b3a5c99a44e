#!/usr/bin/env bash
# Where several symbols share an address (assembly labels, syscall wrappers, weak aliases),
# `symdex addr` names the one the debug vmlinux's ELF symbol table ranks first (sized,
# STT_FUNC, global), as llvm-symbolizer does: on the real Debian kernel, offline (System.map +
# debug vmlinux) and as a live host (kallsyms made from the System.map, KASLR-slid), through
# the batch table (addr -), the per-address query (resolve) and the daemon.
#   alias_llvm.sh SYMDEX_BIN
set -euo pipefail
unset DEBUGINFOD_URLS
SYMDEX=$1
SYMDEXD=$(dirname "$SYMDEX")/symdexd
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
command -v llvm-symbolizer-14 >/dev/null && command -v llvm-objcopy-14 >/dev/null || {
  echo "SKIP: llvm-symbolizer-14/llvm-objcopy-14 not installed"
  exit 77
}

eval "$("$here/../corpus/fetch-debian-kernel.sh" dbg)"
DBG=$ROOT/usr/lib/debug
MAP=$DBG/boot/System.map-$KREL
VMLINUX=$DBG/boot/vmlinux-$KREL
work=$(mktemp -d)
daemon=
trap '[ -n "$daemon" ] && kill "$daemon" 2>/dev/null; rm -rf "$work"' EXIT
llvm-objcopy-14 --strip-debug "$VMLINUX" "$work/vmlinux.nodebug"  # llvm then answers from .symtab
SLIDE=0x2a000000

# A live host's view of the same kernel: kallsyms from the System.map, slid; its build-ID note.
S=$work/sysroot
mkdir -p "$S/proc/sys/kernel" "$S/sys/kernel" "$S/sys/module"
python3 - "$MAP" $((SLIDE)) >"$S/proc/kallsyms" <<'PY'
import sys
slide = int(sys.argv[2])
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) >= 3 and f[1] not in 'aA':
        print(f'{(int(f[0], 16) + slide) % (1 << 64):016x} {f[1]} {f[2]}')
PY
: >"$S/proc/modules"
echo "$KREL" >"$S/proc/sys/kernel/osrelease"
echo 0 >"$S/proc/sys/kernel/kptr_restrict"
objcopy -O binary --only-section=.notes "$VMLINUX" "$S/sys/kernel/notes"

addr_of() { awk -v n="$1" '$3 == n { print $1; exit }' "$MAP"; }
# name_at SLIDE NAME: what `symdex addr` (batch), `symdex resolve` (one address) say at NAME's address.
name_at() {
  local a
  a=$(printf '0x%x' $((0x$(addr_of "$2") + $1)))
  echo "$a" | "$SYMDEX" addr --json - | jq_num 'd["results"][0].get("symbol", "")'
  "$SYMDEX" resolve --json "$a" | jq_num 'd["results"][0]["instance"]["name"]'
}

for mode in offline live; do
  export SYMDEX_DB=$work/$mode.db
  if [ $mode = offline ]; then
    slide=0
    "$SYMDEX" index -q --system-map "$MAP" --debug-dir "$DBG" --name debian
  else
    slide=$((SLIDE))
    "$SYMDEX" index -q --sysroot "$S" --debug-dir "$DBG" --name live
  fi
  # Three pairs of symbols sharing a name and address, and a size-0 STT_FUNC beside a sized one.
  check_eq "$mode: _sinittext's address" "early_idt_handler_array early_idt_handler_array" \
    "$(name_at $slide _sinittext | xargs)"
  check_eq "$mode: __irqentry_text_end's address" "common_interrupt_return common_interrupt_return" \
    "$(name_at $slide __irqentry_text_end | xargs)"
  check_eq "$mode: __do_sys_ni_syscall's address" "__x64_sys_ni_syscall __x64_sys_ni_syscall" \
    "$(name_at $slide __do_sys_ni_syscall | xargs)"
  check_eq "$mode: ftrace_ops_list_func's address" "arch_ftrace_ops_list_func arch_ftrace_ops_list_func" \
    "$(name_at $slide ftrace_ops_list_func | xargs)"
  # Every address where 2+ code symbols start: never a smaller symbol than llvm-symbolizer's.
  if python3 "$here/compare_alias_llvm.py" "$SYMDEX" "$work/vmlinux.nodebug" "$MAP" --slide $slide \
    >"$work/sweep.$mode"; then r=0; else r=$?; fi
  sed 's/^/      /' "$work/sweep.$mode"
  check_eq "$mode: shared addresses where symdex names a smaller symbol than llvm" 0 "$r"
done

# The daemon answers from the same index with the same rule.
if [ -x "$SYMDEXD" ]; then
  "$SYMDEXD" --db "$work/offline.db" --listen "unix:$work/d.sock" --no-index-live --no-debuginfod \
    >"$work/d.log" 2>&1 &
  daemon=$!
  for _ in $(seq 1200); do [ -S "$work/d.sock" ] && break; sleep 0.1; done  # a ceiling, not a wait
  if [ ! -S "$work/d.sock" ]; then
    echo "FAIL  symdexd did not listen within 120 s: $(tail -n 5 "$work/d.log")"
    exit 1
  fi
  unset SYMDEX_DB
  check_eq "daemon: __do_sys_ni_syscall's address" "__x64_sys_ni_syscall" \
    "$(echo "0x$(addr_of __do_sys_ni_syscall)" | "$SYMDEX" --connect "unix:$work/d.sock" addr --json - |
      jq_num 'd["results"][0].get("symbol", "")')"
fi
exit $fail
