#!/usr/bin/env bash
# The whole test suite, from a fresh Debian 12 machine: dependencies, build, unit + CLI +
# integration tests (the integration tests download Debian's amd64 and arm64 cloud kernel
# packages once (6.1, and arm64 6.12), ~1 GB, into ~/.cache/symdex-corpus), the same suite under ASan+UBSan (less the tests that index
# the whole Debian kernel), and a short run of every fuzzer (10 s each; SYMDEX_FUZZ_SECONDS).
#   scripts/test.sh            everything (what CI runs)
#   SYMDEX_QUICK=1 scripts/test.sh   the default build's tests only
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup-deps.sh
# Two tests at a time: most of a test's time is spent waiting on processes, and the qemu guest
# (TCG) keeps one core busy. No test measures time or waits for a guessed while (latency figures
# are tests/bench/'s), so none needs the machine to itself; scripts/test-busy.sh runs this with
# two CPU hogs beside it. Tests that read the Debian corpus share one fetch (ctest fixture).
# A failed test's own words last: a log viewer that keeps the head and tail of a long run still
# shows why each test failed (the last lines of its output, from ctest's log).
run_ctest() {
  local dir=$1
  shift
  ctest "$@" && return 0
  local rc=$? t
  local log="$dir/Testing/Temporary/LastTest.log" failed="$dir/Testing/Temporary/LastTestsFailed.log"
  if [ -r "$failed" ] && [ -r "$log" ]; then
    while IFS=: read -r _ t; do
      echo "== the end of $t's output =="
      awk -v t="$t" '$0 ~ "^[0-9]+/[0-9]+ Test: " && $3 == t {on = 1; n = 0; next}
        on && /^<end of output>$/ {on = 0}
        on {line[n++] = $0}
        END {for (i = (n > 40 ? n - 40 : 0); i < n; i++) print line[i]}' "$log"
    done < "$failed"
  fi
  return $rc
}
cmake --preset default >/dev/null
cmake --build --preset default
run_ctest build --preset default --parallel 2
if [ "${SYMDEX_QUICK:-0}" = 1 ]; then exit 0; fi
echo "== ASan + UBSan (clang-14; the same build holds the fuzzers) =="
cmake --preset asan >/dev/null
cmake --build --preset asan
# Left out here, run in the default build only: the tests that index the whole Debian kernel (by
# label, which also replaces the preset's name filter); the checks of the source tree, which run
# no program of this build but --help (label lint); and the embedded-against-daemon identity test
# of every CLI command, whose daemon paths the other daemon and hardening tests run sanitized
# (two processes per command: about a quarter of this run's time under ASan).
run_ctest build-asan --preset asan -LE '^(corpus|lint)$' -E '^DaemonTest\.CliOutputIsIdenticalEmbeddedAndThroughTheDaemon$' \
  --parallel 2
echo "== fuzzers =="
scripts/fuzz-smoke.sh "${SYMDEX_FUZZ_SECONDS:-10}"
echo "== all tests passed =="
