#!/usr/bin/env bash
# `symdex callers` on every duplicated-name copy of Debian's 6.1 cloud kernels (x86-64 and arm64,
# vmlinux and modules) against objdump's direct branches: how many copies and call sites agree,
# and the time symdex's calls took beside objdump's disassembly of the same files.
#   tests/bench/callers.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$here/../..
cmake --build --preset programs >/dev/null
SYMDEX_CALLERS_SAMPLE=100000 "$root/tests/integration/callers_objdump.sh" "$root/build/bin/symdex"
