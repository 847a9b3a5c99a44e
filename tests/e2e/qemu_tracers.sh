#!/usr/bin/env bash
# The tracers (perf, bpftrace, libbpf) attach what `symdex kprobe --format F` prints, in a booted Debian
# cloud kernel with a Debian 12 root (tests/e2e/qemu_tracers.py says how each form is judged).
#   tests/e2e/qemu_tracers.sh build/bin/symdex
# x86_64 only so far. ~6 min on 2 cores (perf probe reads vmlinux's DWARF under TCG).
# Exit: 0 pass, 1 fail, 77 skip (not root: the root is made with chroot; no qemu, busybox-static,
# mkfs.ext4 or corpus).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
SYMDEX=$(realpath "${1:?usage: $0 SYMDEX}")
skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "needs root (the tracers' root is made with debootstrap and chroot)"
command -v qemu-system-x86_64 >/dev/null || skip "qemu-system-x86_64 not installed"
command -v mkfs.ext4 >/dev/null || skip "mkfs.ext4 not installed (e2fsprogs)"
[ -x /bin/busybox ] || skip "/bin/busybox missing (apt-get install busybox-static)"
fetch() {
  local out
  out=$("$here/../corpus/fetch-debian-kernel.sh" "$1") || skip "corpus '$1' unavailable"
  eval "$out"
}
fetch dbg; DBG=$ROOT
fetch image; IMG=$ROOT
TAR=$("$here/tracers-root.sh" amd64) || skip "the tracers' Debian root could not be made (tests/e2e/tracers-root.sh)"
exec python3 "$here/qemu_tracers.py" --symdex "$SYMDEX" --image-root "$IMG" --dbg-root "$DBG" --krel "$KREL" \
  --busybox /bin/busybox --root-tar "$TAR" ${SYMDEX_E2E_WORK:+--work "$SYMDEX_E2E_WORK"}
