#!/usr/bin/env bash
# Builds the libFuzzer targets (clang-14, ASan+UBSan) and runs each for a short time from its
# seed corpus. A crash fails the run and leaves the reproducer in build-fuzz/crashes/.
#   scripts/fuzz-smoke.sh [SECONDS_PER_TARGET]   (default 20)
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-20}
cmake --preset fuzz >/dev/null
# Only the fuzzers (the daemon, CLI and test binaries are built and tested by the other presets).
targets=()
for seeds in tests/fuzz/corpus/*/ tests/jit/corpus/*/; do targets+=("$(basename "$seeds")_fuzzer"); done
cmake --build --preset fuzz --target "${targets[@]}"
mkdir -p build-fuzz/crashes
for seeds in tests/fuzz/corpus/*/ tests/jit/corpus/*/; do
  name=$(basename "$seeds")
  work=build-fuzz/corpus/$name
  mkdir -p "$work"
  echo "fuzz: ${name}_fuzzer for ${secs}s"
  log=build-fuzz/$name.log
  if ! build-fuzz/bin/"${name}"_fuzzer -max_total_time="$secs" \
       -artifact_prefix=build-fuzz/crashes/"$name"- "$work" "$seeds" >"$log" 2>&1; then
    tail -n 40 "$log"
    echo "fuzz: ${name}_fuzzer failed; reproducer in build-fuzz/crashes/"
    exit 1
  fi
  grep -E '^Done' "$log"
done
