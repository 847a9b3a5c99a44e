#!/usr/bin/env bash
# End-to-end test of issue 4 item 7: boot the Debian cloud kernel matching the corpus' -dbg
# package under qemu (TCG), index the live guest with symdex and the host's debug files, and
# place kprobes from 'symdex kprobe NAME@FILE:LINE' on duplicated names inside the same guest.
#
#   tests/e2e/qemu_kprobes.sh SYMDEX_BIN
#
# Exit: 0 pass, 1 fail, 77 skip (no qemu / busybox-static / python3 / corpus not fetchable).
# Env:  SYMDEX_E2E_USE_PROBE_FIELD=1 (probe lines from 'symdex dups' instead of 'symdex kprobe'),
#       SYMDEX_E2E_KEEP=1, SYMDEX_E2E_VERBOSE=1, SYMDEX_E2E_TIMEOUT=SECONDS (guest session, 480),
#       SYMDEX_E2E_WORK=DIR (the work dir, kept; tests/bench/decode_compare.sh reads it),
#       SYMDEX_E2E_FLEET=0 (skip the fleet replica check).
# Needs: qemu-system-x86 busybox-static python3 (cpio is not needed: the driver writes newc).
set -euo pipefail
unset DEBUGINFOD_URLS  # hermetic: debug files come from the corpus
[ $# -eq 1 ] || { echo "usage: $0 SYMDEX_BIN" >&2; exit 2; }
SYMDEX=$(realpath "$1")
here=$(cd "$(dirname "$0")" && pwd)
skip() { echo "SKIP: $*"; exit 77; }

[ -x "$SYMDEX" ] || { echo "FAIL: $SYMDEX is not executable" >&2; exit 1; }
command -v qemu-system-x86_64 >/dev/null || skip "qemu-system-x86_64 not installed (apt-get install qemu-system-x86)"
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3) || skip "python3 not installed"
BUSYBOX=${SYMDEX_E2E_BUSYBOX:-/bin/busybox}
[ -x "$BUSYBOX" ] || skip "$BUSYBOX missing (apt-get install busybox-static)"

fetch() {
  local out
  out=$("$here/../corpus/fetch-debian-kernel.sh" "$1") || skip "corpus '$1' unavailable (fetch-debian-kernel.sh $1 failed)"
  eval "$out"
}
fetch dbg;   DBG=$ROOT
fetch image; IMG=$ROOT

exec "$PY" "$here/qemu_kprobes.py" --symdex "$SYMDEX" --image-root "$IMG" --dbg-root "$DBG" \
  --krel "$KREL" --busybox "$BUSYBOX" ${SYMDEX_E2E_WORK:+--work "$SYMDEX_E2E_WORK"}
