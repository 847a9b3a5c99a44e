#!/usr/bin/env bash
# Indexes this machine's own /proc/kallsyms and checks symdex against it. Exits 77 (ctest:
# skipped) when the kernel hides addresses from this process, saying so.
#   host_kallsyms.sh SYMDEX_BIN
set -euo pipefail
unset DEBUGINFOD_URLS  # hermetic: debug files come from the corpus, never the network
SYMDEX=$1
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
if [ ! -r /proc/kallsyms ] || ! awk '$1 !~ /^0+$/ {found=1; exit} END {exit !found}' /proc/kallsyms; then
  echo "SKIP: /proc/kallsyms unreadable or all zeros here (kptr_restrict / no CAP_SYSLOG)"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export SYMDEX_DB=$work/index.db
cp /proc/kallsyms "$work/kallsyms.snapshot"
"$SYMDEX" index
"$SYMDEX" status --json >"$work/status.json"
"$SYMDEX" dups --all-types --json >"$work/dups.json"

total=$(wc -l <"$work/kallsyms.snapshot")
text=$(awk '$2=="t"||$2=="T"' "$work/kallsyms.snapshot" | wc -l)
# Allow for symbols that appear/vanish between the snapshot and the index (module loads, BPF).
got_total=$(jq_num 'd["targets"][0]["vmlinux_symbols"] + d["targets"][0]["module_symbols"]' <"$work/status.json")
check_eq "symbols = /proc/kallsyms lines (minus exact duplicate lines)" \
  "$(sort -u "$work/kallsyms.snapshot" | wc -l)" "$got_total"
check_eq "text symbols = t/T lines" "$(awk '$2=="t"||$2=="T"' "$work/kallsyms.snapshot" | sort -u | wc -l)" \
  "$(jq_num 'd["targets"][0]["text_symbols"]' <"$work/status.json")"
# Pick the most duplicated text name on this host and compare instance counts.
name=$(awk '($2=="t"||$2=="T") && $3 !~ /^__pfx_|^__cfi_/ {print $3}' "$work/kallsyms.snapshot" | sort | uniq -c |
  sort -rn | awk 'NR==1{print $2}')
"$SYMDEX" which "$name" --exact --json >"$work/which.json"
check_eq "which $name (all types)" "$(awk -v n="$name" '$3==n' "$work/kallsyms.snapshot" | sort -u | wc -l)" \
  "$(jq_num 'd["count"]' <"$work/which.json")"
text_addr=$(awk '$3=="_text" && NF==3 {print $1; exit}' "$work/kallsyms.snapshot")
check_eq "_text address" "0x$text_addr" "$(jq_num 'd["targets"][0]["text_addr"]' <"$work/status.json")"
echo "host: $total kallsyms lines, $text text; most duplicated text name: $name"
exit $fail
