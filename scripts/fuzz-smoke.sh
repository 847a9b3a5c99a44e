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
fuzz_one() {  # fuzz_one SEED_DIR: one target for $secs; its log's last lines on a failure
  local name work log
  name=$(basename "$1")
  work=build-asan/corpus/$name
  log=build-asan/$name.log
  mkdir -p "$work"
  if ! build-asan/bin/"${name}"_fuzzer -max_total_time="$secs" \
       -artifact_prefix=build-asan/crashes/"$name"- "$work" "$1" >"$log" 2>&1; then
    tail -n 40 "$log"
    echo "fuzz: ${name}_fuzzer failed; reproducer in build-asan/crashes/"
    return 1
  fi
  echo "fuzz: ${name}_fuzzer for ${secs}s: $(grep -E '^Done' "$log")"
}
# As many targets at a time as there are cores (each is one process on one core).
jobs=$(nproc)
fail=0
running=0
for seeds in tests/fuzz/corpus/*/ tests/jit/corpus/*/; do
  if [ "$running" -ge "$jobs" ]; then
    wait -n || fail=1
    running=$((running - 1))
  fi
  fuzz_one "$seeds" &
  running=$((running + 1))
done
while [ "$running" -gt 0 ]; do
  wait -n || fail=1
  running=$((running - 1))
done
exit $fail
