#!/usr/bin/env bash
# The whole test suite, from a fresh Debian 12 machine: dependencies, build, unit + CLI +
# integration tests (the integration tests download the Debian cloud kernel packages once,
# ~310 MB, into ~/.cache/symdex-corpus), the same suite under ASan+UBSan (less the long corpus comparison), and a short run of
# every fuzzer.
#   scripts/test.sh            everything (what CI runs)
#   SYMDEX_QUICK=1 scripts/test.sh   the default build's tests only
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup-deps.sh
cmake --workflow --preset test
if [ "${SYMDEX_QUICK:-0}" = 1 ]; then exit 0; fi
echo "== ASan + UBSan =="
cmake --preset asan >/dev/null
cmake --build --preset asan
ctest --preset asan
echo "== fuzzers =="
scripts/fuzz-smoke.sh "${SYMDEX_FUZZ_SECONDS:-20}"
echo "== all tests passed =="
