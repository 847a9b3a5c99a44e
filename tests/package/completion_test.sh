#!/usr/bin/env bash
# The bash completion (packaging/completion/symdex) run as bash-completion runs it, against the
# programs of this build: every verb `symdex --help` lists is offered, a verb's own options come
# from its --help, a file option completes paths.
#   completion_test.sh SYMDEX_BIN
set -uo pipefail
symdex=$(readlink -f "$1")
here=$(cd "$(dirname "$0")" && pwd)
[ -r /usr/share/bash-completion/bash_completion ] || { echo "SKIP: bash-completion is not installed"; exit 77; }
# shellcheck disable=SC1091
. /usr/share/bash-completion/bash_completion
# shellcheck source=packaging/completion/symdex
. "$here/../../packaging/completion/symdex"
fail=0
complete_line() {  # complete_line WORD...: what _symdex offers for the last word
  COMP_WORDS=("$symdex" "$@")
  COMP_CWORD=$#
  COMP_LINE="${COMP_WORDS[*]}"
  COMP_POINT=${#COMP_LINE}
  COMPREPLY=()
  _symdex
  printf '%s\n' "${COMPREPLY[@]}" | sort
}
expect() {  # expect WHAT WANT... -- GOT: every WANT among GOT's lines
  local what=$1
  shift
  local want=() w
  while [ "$1" != -- ]; do want+=("$1"); shift; done
  shift
  for w in "${want[@]}"; do
    if ! grep -qx -- "$w" <<<"$1"; then
      echo "FAIL  $what: '$w' not offered (got: $(tr '\n' ' ' <<<"$1"))"
      fail=1
      return
    fi
  done
  echo "ok    $what"
}
verbs=$("$symdex" --help | awk '/^Subcommands:/ {on = 1; next} on && /^  [a-z]/ {print $1} on && /^$/ {on = 0}')
[ "$(wc -l <<<"$verbs")" -ge 15 ] || { echo "FAIL  symdex --help lists $(wc -l <<<"$verbs") verbs"; exit 1; }
# shellcheck disable=SC2086  # the verbs, one word each
expect "every verb symdex --help lists" $verbs -- "$(complete_line "")"
expect "verbs by prefix" inlined index -- "$(complete_line in)"
expect "kprobe's own options" --inlined --rel-line --format -- "$(complete_line kprobe --)"
expect "global options" --db --json --connect -- "$(complete_line --)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
touch "$tmp/index.db"
expect "--db completes a path" "$tmp/index.db" -- "$(complete_line --db "$tmp/ind")"
exit $fail
