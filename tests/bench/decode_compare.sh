#!/usr/bin/env bash
# `symdex decode` side by side with the kernel's own scripts/decode_stacktrace.sh, on
# real stack traces: the qemu e2e test boots the Debian cloud kernel, runs the function tracer over
# every copy of 150 duplicated names with a stack per call and each frame's address (the truth),
# and keeps its work dir; both tools then decode the same text with the addresses cut out.
#   tests/bench/decode_compare.sh [build/bin/symdex] [E2E_WORK_DIR]
# With an E2E_WORK_DIR from an earlier run (SYMDEX_E2E_WORK=DIR ctest -R qemu_kprobes), the guest is
# not booted again. decode_stacktrace.sh comes from Debian's linux-source-6.1 (downloaded once,
# ~140 MB, cached in ~/.cache/symdex-bench).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
SYMDEX=$(realpath "${1:-$here/../../build/bin/symdex}")
WORK=${2:-}
# shellcheck source=tests/bench/lib.sh
. "$here/lib.sh"
bench_corpus  # KREL, DBG
cache=${XDG_CACHE_HOME:-$HOME/.cache}/symdex-bench
script=$cache/linux-source-6.1/scripts/decode_stacktrace.sh
if [ ! -x "$script" ]; then
  mkdir -p "$cache"
  (cd "$cache" && apt-get download linux-source-6.1 >&2)
  deb=$(ls "$cache"/linux-source-6.1_*.deb | tail -1)
  dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$cache" --wildcards './usr/src/linux-source-6.1.tar.xz'
  tar -xJf "$cache/usr/src/linux-source-6.1.tar.xz" -C "$cache" linux-source-6.1/scripts/decode_stacktrace.sh
  rm -f "$cache/usr/src/linux-source-6.1.tar.xz"
fi
if [ -z "$WORK" ]; then
  WORK=$(mktemp -d)
  echo "== booting the guest for its stack traces (qemu e2e, work dir $WORK)" >&2
  SYMDEX_E2E_WORK=$WORK SYMDEX_E2E_FLEET=0 "$here/../e2e/qemu_kprobes.sh" "$SYMDEX" >"$WORK.e2e.log" 2>&1 ||
    { tail -30 "$WORK.e2e.log" >&2; exit 1; }
fi
python3 "$here/decode_compare.py" --work "$WORK" --symdex "$SYMDEX" --script "$script" --dbg-root "$DBG" --krel "$KREL"
