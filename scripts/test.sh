#!/usr/bin/env bash
# The whole test suite, from a fresh Debian 12 machine: dependencies, build, unit + CLI +
# integration tests (the integration tests download the Debian cloud kernel packages once,
# ~310 MB, into ~/.cache/symdex-corpus), the same suite under ASan+UBSan (less the tests that index
# the whole Debian kernel), and a short run of every fuzzer (10 s each; SYMDEX_FUZZ_SECONDS).
#   scripts/test.sh            everything (what CI runs)
#   SYMDEX_QUICK=1 scripts/test.sh   the default build's tests only
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup-deps.sh
# Tests that measure time (latency percentiles, deadlines, fail-over within a budget) run alone;
# the rest two at a time — most of their time is spent waiting on processes, and the qemu guest
# (TCG) keeps one core busy. Tests that read the Debian corpus share one fetch (ctest fixture).
timed='^(Metrics|FleetDaemonTest|HardeningTest|FairPoolTest|LimiterTest|fleet_)'
cmake --preset default >/dev/null
cmake --build --preset default
ctest --preset default -E "$timed" --parallel 2
ctest --preset default -R "$timed"
if [ "${SYMDEX_QUICK:-0}" = 1 ]; then exit 0; fi
echo "== ASan + UBSan (clang-14; the same build holds the fuzzers) =="
cmake --preset asan >/dev/null
cmake --build --preset asan
# (-E given here replaces the preset's name filter, so the corpus tests it leaves out are left
# out by label.)
ctest --preset asan -LE '^corpus$' -E "$timed" --parallel 2
ctest --preset asan -R "$timed"
echo "== fuzzers =="
scripts/fuzz-smoke.sh "${SYMDEX_FUZZ_SECONDS:-10}"
echo "== all tests passed =="
