#!/usr/bin/env bash
# Probe arguments by name against perf probe (the oracle: `perf probe -k VMLINUX -D`), on
# Debian's 6.1 cloud kernels, x86-64 and arm64 (read on this machine), offline:
#   - the forms people know: a member chain to a string, a size, a struct field through an
#     anonymous union, a pnp copy of the duplicated name_show by FILE (perf's FUNC@FILE);
#   - `$params` of a sample of functions with a unique name, fetch arg for fetch arg, and
#     `symdex vars` against `perf probe -V` (the variables available at the entry, their types);
#   - lines of a function's body (`--rel-line N` against perf's FUNC:RLN): every place, with
#     `$vars` at each;
#   - the places a function was inlined (`--inlined` against perf's FUNC, which probes them too):
#     each place both give, fetch arg for fetch arg;
#   - the same arguments in bpftrace's and libbpf's forms, taken by bpftrace and by clang -target
#     bpf against the kernel's own BTF (check_tracer_fetches.sh);
#   - what must be refused: an unknown variable or member, '.' on a pointer, a string of an int
#     (exit 2), a variable in a return probe; a named argument of a copy without DWARF; a line
#     outside the copy, a line with -r or with +OFFSET; --inlined with a variable no copy has,
#     a file no copy is declared in, -r; +OFFSET inside an instruction (x86-64: against objdump's
#     instruction starts, check_insn_boundaries.py).
# SYMDEX_PROBE_SAMPLE (default 8) sets the sample, SYMDEX_PROBE_VARS (default 2) how many of
# them vars is checked on; tests/bench/probe_args.sh runs a large one (CI time: perf reads the
# DWARF for seconds per run).
#   probe_args_perf.sh SYMDEX_BIN
set -euo pipefail
unset DEBUGINFOD_URLS
SYMDEX=$1
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
command -v perf >/dev/null || { echo "SKIP: perf (linux-perf) is not installed"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
sample=${SYMDEX_PROBE_SAMPLE:-8}
vars=${SYMDEX_PROBE_VARS:-2}

one_arch() {  # one_arch DEBIAN_ARCH
  local out
  out=$(SYMDEX_KERNEL_ARCH=$1 "$here/../corpus/fetch-debian-kernel.sh" dbg) || { echo "SKIP $1: no corpus"; return 0; }
  eval "$out"
  local vml=$ROOT/usr/lib/debug/boot/vmlinux-$KREL
  export SYMDEX_DB=$work/$1.db
  "$SYMDEX" index -q --system-map "$ROOT/usr/lib/debug/boot/System.map-$KREL" --debug-dir "$ROOT/usr/lib/debug" \
    --name "$1" >/dev/null 2>&1
  echo "== $KREL"
  "$here/compare_perf_probe.py" "$SYMDEX" "$vml" \
    --probe 'vfs_read file->f_path.dentry->d_name.name:string count' \
    --probe 'tcp_sendmsg size sk->__sk_common.skc_family' \
    --probe 'name_show@drivers/pnp/card.c dmdev->kobj.name:string' \
    --probe 'do_sys_openat2 dfd filename:string how->flags' \
    --probe 'vfs_read%return $retval' || fail=1
  "$here/compare_perf_probe.py" "$SYMDEX" "$vml" \
    --probe 'tcp_sendmsg:5 size' --probe 'vfs_read:11 count file->f_path.dentry->d_name.name:string' || fail=1
  "$here/compare_perf_probe.py" "$SYMDEX" "$vml" --sample "$sample" --seed 7 --vars "$vars" || fail=1
  "$here/compare_perf_probe.py" "$SYMDEX" "$vml" --sample "$((2 * sample))" --seed 5 --lines || fail=1
  "$here/compare_perf_inlined.py" "$SYMDEX" "$vml" --name 'file_ppos file->f_path.dentry->d_name.name:string' \
    --name 'cpumask_weight srcp' --sample 4 --seed 3 || fail=1
  "$here/check_tracer_fetches.sh" "$SYMDEX" "$vml" "$1" || fail=1
  local rc
  set +e
  "$SYMDEX" kprobe -n vfs_read nosuch >/dev/null 2>"$work/err"; rc=$?
  check_eq "$1: an unknown variable: exit 2" "2 1" "$rc $(grep -c "no variable 'nosuch'" "$work/err")"
  "$SYMDEX" kprobe -n vfs_read 'file->nosuch' >/dev/null 2>"$work/err"; rc=$?
  check_eq "$1: a member the type lacks: exit 2" "2 1" "$rc $(grep -c "has no member 'nosuch'" "$work/err")"
  "$SYMDEX" kprobe -n vfs_read 'file.f_mode' >/dev/null 2>"$work/err"; rc=$?
  check_eq "$1: '.' on a pointer: exit 2" "2 1" "$rc $(grep -c "use '->f_mode'" "$work/err")"
  "$SYMDEX" kprobe -n vfs_read 'count:string' >/dev/null 2>"$work/err"; rc=$?
  check_eq "$1: a string of what is no char pointer: exit 2" "2 1" "$rc $(grep -c "not a char pointer" "$work/err")"
  "$SYMDEX" kprobe -n -r vfs_read count >/dev/null 2>"$work/err"; rc=$?
  check_eq "$1: a variable in a return probe: exit 2" "2 1" "$rc $(grep -c 'fetches \$retval only' "$work/err")"
  "$SYMDEX" kprobe -n --rel-line 400 vfs_read count >/dev/null 2>"$work/err"; rc=$?
  check_eq "$1: a line outside the copy: exit 2" "2 1" "$rc $(grep -c 'is outside this copy' "$work/err")"
  "$SYMDEX" kprobe -n --line 461 -r vfs_read >/dev/null 2>"$work/err"; rc=$?
  check_eq "$1: a line in a return probe: exit 2" "2 1" "$rc $(grep -c 'not at a line' "$work/err")"
  "$SYMDEX" kprobe -n --line 461 vfs_read+4 >/dev/null 2>"$work/err"; rc=$?
  check_eq "$1: a line and +OFFSET: exit 2" "2 1" "$rc $(grep -c 'give one of them' "$work/err")"
  "$SYMDEX" kprobe -n --inlined file_ppos nosuch >/dev/null 2>"$work/err"; rc=$?
  check_eq "$1: --inlined, a variable the function does not have: exit 2" "2 1" \
    "$rc $(grep -c "no variable 'nosuch' in scope in file_ppos" "$work/err")"
  "$SYMDEX" kprobe -n --inlined 'file_ppos@fs/nosuch.c' >/dev/null 2>"$work/err"; rc=$?
  check_eq "$1: --inlined, a file no copy is declared in: exit 1" "1 1" "$rc $(grep -c "declared in fs/nosuch.c" "$work/err")"
  "$SYMDEX" kprobe -n --inlined 'file_ppos@fs/read_write.c' >"$work/out" 2>/dev/null; rc=$?
  check_eq "$1: --inlined NAME@FILE: its four places" "0 4" "$rc $(grep -c '^p:symdex/file_ppos' "$work/out")"
  "$SYMDEX" kprobe -n --inlined -r file_ppos >/dev/null 2>"$work/err"; rc=$?
  check_eq "$1: --inlined with -r: exit 2" "2 1" "$rc $(grep -c 'no -r' "$work/err")"
  if [ "$1" = arm64 ]; then  # fixed-size instructions: an offset inside one is refused
    "$SYMDEX" kprobe -n vfs_read+6 >/dev/null 2>"$work/err"; rc=$?
    check_eq "$1: +OFFSET inside an instruction: exit 2, the starts around it" "2 1" \
      "$rc $(grep -c 'inside an instruction.*probe at +4 or +8' "$work/err")"
  else  # decoded from the function's start, against objdump's instruction starts
    "$here/check_insn_boundaries.py" "$SYMDEX" "$vml" --sample 10 --seed 3 || fail=1
  fi
  "$SYMDEX" kprobe -n vfs_read '%di' 'x=+8(%si):u32' >"$work/out" 2>&1; rc=$?
  check_eq "$1: kprobe_events' own fetch args pass as written" "0 1" "$rc $(grep -c ' %di x=+8(%si):u32$' "$work/out")"
  set -e
}
one_arch amd64
one_arch arm64
exit $fail
