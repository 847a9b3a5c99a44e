#!/usr/bin/env bash
# The whole test suite, from a fresh Debian 12 machine: dependencies, build, unit + CLI +
# integration tests (the integration tests download the Debian cloud kernel packages once,
# ~310 MB, into ~/.cache/symdex-corpus), the same suite under ASan+UBSan (less the long corpus comparison), and a short run of
# every fuzzer (10 s each; SYMDEX_FUZZ_SECONDS).
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
# The short, self-contained unit and CLI tests two at a time (sanitized CLI processes start in
# 0.3 s: most of their time); the tests that time things — the daemon, hardening and fleet
# suites, the metrics endpoint's deadlines — one at a time.
serial='^Metrics'
ctest --preset asan -L '^(unit|cli|lint)$' -E "$serial" --parallel 2
ctest --preset asan -LE '^(unit|cli|lint)$'
ctest --preset asan -R "$serial"
echo "== fuzzers =="
scripts/fuzz-smoke.sh "${SYMDEX_FUZZ_SECONDS:-10}"
echo "== all tests passed =="
