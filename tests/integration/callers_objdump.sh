#!/usr/bin/env bash
# `symdex callers` against objdump's direct branches (compare_callers_objdump.py) on Debian's 6.1
# cloud kernels, x86-64 and arm64, offline: System.map, every module and the debug package indexed,
# then a sample of duplicated-name copies in vmlinux and in modules, each copy's call sites and
# their kinds exactly objdump's. SYMDEX_CALLERS_SAMPLE (default 25) copies of each kind per
# architecture; tests/bench/callers.sh runs every duplicated copy.
#   callers_objdump.sh SYMDEX_BIN
set -euo pipefail
unset DEBUGINFOD_URLS
SYMDEX=$1
here=$(cd "$(dirname "$0")" && pwd)
sample=${SYMDEX_CALLERS_SAMPLE:-25}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0
checked=0
for arch in amd64 arm64; do
  dbg=$(SYMDEX_KERNEL_ARCH=$arch "$here/../corpus/fetch-debian-kernel.sh" dbg) || { echo "SKIP $arch: no corpus"; continue; }
  img=$(SYMDEX_KERNEL_ARCH=$arch "$here/../corpus/fetch-debian-kernel.sh" image) || { echo "SKIP $arch: no corpus"; continue; }
  eval "$img"
  mods=$ROOT/lib/modules/$KREL
  eval "$dbg"
  objdump=objdump
  [ "$arch" = arm64 ] && objdump=aarch64-linux-gnu-objdump
  command -v "$objdump" >/dev/null || { echo "SKIP $arch: no $objdump"; continue; }
  export SYMDEX_DB=$work/$arch.db
  "$SYMDEX" index -q --system-map "$ROOT/usr/lib/debug/boot/System.map-$KREL" --modules-dir "$mods" \
    --debug-dir "$ROOT/usr/lib/debug" --name "$arch" >/dev/null 2>&1
  echo "== $KREL"
  "$here/compare_callers_objdump.py" "$SYMDEX" --debug-root "$ROOT" --objdump "$objdump" --sample "$sample" \
    --seed "${SYMDEX_CALLERS_SEED:-4}" || fail=1
  checked=$((checked + 1))
done
[ "$checked" -gt 0 ] || { echo "SKIP: no corpus"; exit 77; }
exit $fail
