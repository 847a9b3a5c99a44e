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
# Two tests at a time (a sanitized CLI process takes 0.3 s just to start: most of these tests'
# time is spent waiting on processes), except those that measure time — the hardening, fleet,
# metrics-endpoint and slow-debuginfod tests — which run alone afterwards. (-LE/-E given here
# replace the preset's name filter, so the corpus tests it leaves out are left out by label.)
timed='^(Metrics|FleetDaemonTest)'
ctest --preset asan -LE '^(hardening|fleet|corpus)$' -E "$timed" --parallel 2
ctest --preset asan -L '^(hardening|fleet)$'
ctest --preset asan -R "$timed"
echo "== fuzzers =="
scripts/fuzz-smoke.sh "${SYMDEX_FUZZ_SECONDS:-10}"
echo "== all tests passed =="
