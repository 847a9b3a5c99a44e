#!/usr/bin/env bash
# End-to-end test: boot the Debian cloud kernel matching the corpus' -dbg package under qemu
# (TCG), index the live guest with symdex and the host's debug files, and place kprobes from
# 'symdex kprobe NAME@FILE:LINE' on duplicated names inside the same guest; then judge symdex's
# probe verdicts, decode the guest's stack traces and ask a fleet replica for its frames.
#
#   tests/e2e/qemu_kprobes.sh [--arch x86_64|arm64] SYMDEX_BIN
#
# --arch: the guest's architecture (default x86_64): Debian's amd64 or arm64 cloud kernel, the
# latter booted by qemu-system-aarch64 -M virt on any host.
# Exit: 0 pass, 1 fail, 77 skip (no qemu / busybox-static / python3 / corpus not fetchable).
# Env:  SYMDEX_E2E_USE_PROBE_FIELD=1 (probe lines from 'symdex dups' instead of 'symdex kprobe'),
#       SYMDEX_E2E_KEEP=1, SYMDEX_E2E_VERBOSE=1, SYMDEX_E2E_TIMEOUT=SECONDS (guest session, 480),
#       SYMDEX_E2E_WORK=DIR (the work dir, kept; tests/bench/decode_compare.sh reads it),
#       SYMDEX_KERNEL_META=linux-image-6.12-cloud-amd64 (another Debian kernel),
#       SYMDEX_KERNEL_BUILD=clang (x86_64: tests/corpus/build-clang-kernel.sh's clang-built kernel),
#       SYMDEX_E2E_FLEET=0 (skip the fleet replica check), SYMDEX_E2E_FLEET_STRICT=0 (only
#       symbol, module, offset and inline chain as the live index's; by default every field), SYMDEX_E2E_BUSYBOX=PATH (x86_64:
#       default /bin/busybox; arm64: busybox-static:arm64, fetched into the corpus cache).
# Needs: qemu-system-x86 (x86_64) or qemu-system-arm (arm64), busybox-static (x86_64), python3
# (cpio is not needed: the driver writes newc); arm64 also llvm-14 (llvm-symbolizer).
set -euo pipefail
unset DEBUGINFOD_URLS  # hermetic: debug files come from the corpus
ARCH=x86_64
if [ "${1:-}" = --arch ]; then ARCH=${2:-}; shift 2 || true; fi
[ $# -eq 1 ] || { echo "usage: $0 [--arch x86_64|arm64] SYMDEX_BIN" >&2; exit 2; }
SYMDEX=$(realpath "$1")
here=$(cd "$(dirname "$0")" && pwd)
skip() { echo "SKIP: $*"; exit 77; }

case $ARCH in
  x86_64) DEB_ARCH=amd64 QEMU=qemu-system-x86_64 QEMU_PKG=qemu-system-x86 ;;
  arm64)  DEB_ARCH=arm64 QEMU=qemu-system-aarch64 QEMU_PKG=qemu-system-arm ;;
  *) echo "$0: --arch x86_64 or arm64, not '$ARCH'" >&2; exit 2 ;;
esac

[ -x "$SYMDEX" ] || { echo "FAIL: $SYMDEX is not executable" >&2; exit 1; }
command -v "$QEMU" >/dev/null || skip "$QEMU not installed (apt-get install $QEMU_PKG)"
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3) || skip "python3 not installed"

fetch() {
  local out
  out=$(SYMDEX_KERNEL_ARCH=$DEB_ARCH "$here/../corpus/fetch-debian-kernel.sh" "$1") ||
    skip "corpus '$1' ($DEB_ARCH) unavailable (SYMDEX_KERNEL_ARCH=$DEB_ARCH fetch-debian-kernel.sh $1 failed)"
  eval "$out"
}
if [ "$ARCH" = x86_64 ]; then
  BUSYBOX=${SYMDEX_E2E_BUSYBOX:-/bin/busybox}
  [ -x "$BUSYBOX" ] || skip "$BUSYBOX missing (apt-get install busybox-static)"
else
  # The guest's busybox is another architecture's program: from the archive, like the kernel.
  if [ -n "${SYMDEX_E2E_BUSYBOX:-}" ]; then BUSYBOX=$SYMDEX_E2E_BUSYBOX
  else fetch busybox; BUSYBOX=$ROOT/bin/busybox
  fi
  command -v llvm-symbolizer-14 >/dev/null || skip "llvm-symbolizer-14 not installed (apt-get install llvm-14)"
fi
if [ "${SYMDEX_KERNEL_BUILD:-}" = clang ]; then
  # linux-source-6.1 built with clang (LLVM=1, DWARF 5), laid out as Debian's packages.
  [ "$ARCH" = x86_64 ] || { echo "$0: the clang kernel is built for x86_64" >&2; exit 2; }
  out=$("$here/../corpus/build-clang-kernel.sh") || skip "the clang kernel could not be built (tests/corpus/build-clang-kernel.sh)"
  eval "$out"
  DBG=$DBG_ROOT IMG=$IMAGE_ROOT
else
  fetch dbg;   DBG=$ROOT
  fetch image; IMG=$ROOT
fi

exec "$PY" "$here/qemu_kprobes.py" --arch "$ARCH" --symdex "$SYMDEX" --image-root "$IMG" --dbg-root "$DBG" \
  --krel "$KREL" --busybox "$BUSYBOX" ${SYMDEX_E2E_WORK:+--work "$SYMDEX_E2E_WORK"}
