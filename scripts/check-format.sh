#!/usr/bin/env bash
# Every C++ source of the project against .clang-format (clang-format-14, as Debian 12 ships it).
#   scripts/check-format.sh         list the files that differ (exit 1 if any)
#   scripts/check-format.sh --fix   rewrite them
set -euo pipefail
cd "$(dirname "$0")/.."
CF=${CLANG_FORMAT:-clang-format-14}
command -v "$CF" >/dev/null || { echo "check-format: $CF not found (apt-get install clang-format-14)" >&2; exit 3; }
mapfile -t files < <(git ls-files -- '*.cc' '*.h' 2>/dev/null || find client server tests examples -name '*.cc' -o -name '*.h')
if [ "${1:-}" = --fix ]; then
  "$CF" -i "${files[@]}"
  exit 0
fi
bad=0
for f in "${files[@]}"; do
  if ! "$CF" --dry-run --Werror "$f" >/dev/null 2>&1; then
    echo "check-format: $f differs from .clang-format (scripts/check-format.sh --fix)"
    bad=$((bad + 1))
  fi
done
echo "check-format: ${#files[@]} files, $bad differ"
[ "$bad" = 0 ]
