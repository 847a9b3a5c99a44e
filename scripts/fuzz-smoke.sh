#!/usr/bin/env bash
# Builds the libFuzzer targets (the `asan` preset: clang-14, ASan+UBSan, the same build the
# sanitized test suite runs) and runs each for a short time from its seed corpus. A crash fails the
# run and leaves the reproducer in build-asan/crashes/.
#   scripts/fuzz-smoke.sh [SECONDS_PER_TARGET]   (default 20)
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-20}
cmake --preset asan >/dev/null
targets=()
for seeds in tests/fuzz/corpus/*/ tests/jit/corpus/*/; do targets+=("$(basename "$seeds")_fuzzer"); done
cmake --build --preset asan --target "${targets[@]}"
mkdir -p build-asan/crashes
for seeds in tests/fuzz/corpus/*/ tests/jit/corpus/*/; do
  name=$(basename "$seeds")
  work=build-asan/corpus/$name
  mkdir -p "$work"
  echo "fuzz: ${name}_fuzzer for ${secs}s"
  log=build-asan/$name.log
  if ! build-asan/bin/"${name}"_fuzzer -max_total_time="$secs" \
       -artifact_prefix=build-asan/crashes/"$name"- "$work" "$seeds" >"$log" 2>&1; then
    tail -n 40 "$log"
    echo "fuzz: ${name}_fuzzer failed; reproducer in build-asan/crashes/"
    exit 1
  fi
  grep -E '^Done' "$log"
done
