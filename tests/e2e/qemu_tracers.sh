#!/usr/bin/env bash
# The tracers (perf, bpftrace, libbpf, cilium/ebpf) attach what `symdex kprobe --format F` prints, and fentry
# by name what `which --fentry` says, in a booted Debian cloud kernel with a Debian 12 root
# (tests/e2e/qemu_tracers.py says how each is judged).
#   tests/e2e/qemu_tracers.sh [--arch x86_64|arm64] build/bin/symdex
# x86_64: ~10 min on 2 cores with eight names (perf probe reads vmlinux's DWARF under TCG). arm64: Debian's arm64
# cloud kernel under qemu-system-aarch64 -M virt (SYMDEX_KERNEL_META=linux-image-6.12-cloud-arm64
# for 6.12), its root made by mmdebstrap under qemu-user, the loaders cross-built (gcc-aarch64-
# linux-gnu against the root's libbpf, GOARCH=arm64); slower (everything in the guest is emulated).
# Env: SYMDEX_TRACERS_NAMES (names judged, default 12), SYMDEX_TRACERS_JUDGES (the tools, default
# all: perf,perf-args,bpftrace,libbpf,cilium,kprobe_multi,fentry), SYMDEX_E2E_WORK (work dir, kept).
# Exit: 0 pass, 1 fail, 77 skip (not root: the root is made with chroot; no qemu, busybox-static,
# mkfs.ext4 or corpus).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
ARCH=x86_64
if [ "${1:-}" = --arch ]; then ARCH=${2:-}; shift 2 || true; fi
SYMDEX=$(realpath "${1:?usage: $0 [--arch x86_64|arm64] SYMDEX}")
skip() { echo "SKIP: $*"; exit 77; }
case $ARCH in
  x86_64) DEB_ARCH=amd64 QEMU=qemu-system-x86_64 ;;
  arm64) DEB_ARCH=arm64 QEMU=qemu-system-aarch64 ;;
  *) echo "$0: --arch x86_64 or arm64, not '$ARCH'" >&2; exit 2 ;;
esac
[ "$(id -u)" = 0 ] || skip "needs root (the tracers' root is made with debootstrap and chroot)"
command -v "$QEMU" >/dev/null || skip "$QEMU not installed"
command -v mkfs.ext4 >/dev/null || skip "mkfs.ext4 not installed (e2fsprogs)"
fetch() {
  local out
  out=$(SYMDEX_KERNEL_ARCH=$DEB_ARCH "$here/../corpus/fetch-debian-kernel.sh" "$1") || skip "corpus '$1' ($DEB_ARCH) unavailable"
  eval "$out"
}
if [ "$ARCH" = x86_64 ]; then
  BUSYBOX=/bin/busybox
  [ -x "$BUSYBOX" ] || skip "/bin/busybox missing (apt-get install busybox-static)"
else
  command -v aarch64-linux-gnu-gcc >/dev/null || skip "aarch64-linux-gnu-gcc missing (gcc-aarch64-linux-gnu)"
  fetch busybox; BUSYBOX=$ROOT/bin/busybox
fi
fetch dbg; DBG=$ROOT
fetch image; IMG=$ROOT
TAR=$("$here/tracers-root.sh" "$DEB_ARCH") || skip "the tracers' Debian root could not be made (tests/e2e/tracers-root.sh $DEB_ARCH)"
exec python3 "$here/qemu_tracers.py" --arch "$ARCH" --symdex "$SYMDEX" --image-root "$IMG" --dbg-root "$DBG" \
  --krel "$KREL" --busybox "$BUSYBOX" --root-tar "$TAR" ${SYMDEX_E2E_WORK:+--work "$SYMDEX_E2E_WORK"}
