#!/usr/bin/env bash
# Probe verdicts over the whole Debian cloud kernel (vmlinux + every module): counts per verdict,
# per owner, what kprobe events accept and what ftrace lists, and the causes symdex gives for
# functions without an fentry call; and what the verdict step costs in a cached re-index.
#
#   tests/bench/verdicts.sh [build/bin/symdex]
#
# Env: SYMDEX_BENCH_DB  reuse this index (its debug files cached: the re-index parses no DWARF);
#      default a fresh one in a temp dir (a cold index of the whole kernel first: minutes).
# The booted-kernel check of the same verdicts is tests/e2e/qemu_kprobes.sh.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
SYMDEX=${1:-$here/../../build/bin/symdex}
bench_corpus
CONFIG=$IMG/boot/config-$KREL
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
DB=${SYMDEX_BENCH_DB:-$work/index.db}
if [ ! -e "$DB" ]; then
  echo "cold index of $KREL (vmlinux + modules, DWARF) into $DB ..." >&2
  bench_index "$SYMDEX" "$DB" --kernel-config "$CONFIG" --no-addr-map >/dev/null
fi
t0=$(now)
bench_index "$SYMDEX" "$DB" --kernel-config "$CONFIG" --no-addr-map >"$work/index.json"
t1=$(now)
"$SYMDEX" --db "$DB" --json symbols --all-types >"$work/symbols.json"
python3 - "$work/symbols.json" "$work/index.json" "$(echo "$t1 - $t0" | bc)" "$KREL" <<'PY'
import collections, json, sys
syms = json.load(open(sys.argv[1]))["symbols"]
idx = json.load(open(sys.argv[2]))
kinds = ["traceable", "no-fentry", "init", "blacklisted", "unknown"]
count = collections.Counter(); kprobe = collections.Counter(); ftrace = collections.Counter()
cause = collections.Counter()
for i in syms:
    if i["type"] not in ("t", "T", "w", "W"):
        continue
    o = "vmlinux" if i["module"] == "vmlinux" else "modules"
    v = i["verdict"]
    count[(o, v["kind"])] += 1
    kprobe[o] += v["kprobe"]
    ftrace[o] += v["ftrace"]
    if v["kind"] == "no-fentry":
        r = v["reason"]
        c = ("unit without fentry" if "compilation unit" in r else "inline/header" if "inline" in r
             else "__exit" if "__exit" in r else "noinstr" if "noinstr" in r else "notrace/asm")
        cause[(o, c)] += 1
print(f"probe verdicts, Debian {sys.argv[4]} (code symbols t/T/w/W)")
print(f"{'':<9}" + "".join(f"{k:>12}" for k in kinds) + f"{'kprobe ok':>12}{'ftrace':>10}")
for o in ("vmlinux", "modules"):
    print(f"{o:<9}" + "".join(f"{count[(o, k)]:>12,}" for k in kinds) + f"{kprobe[o]:>12,}{ftrace[o]:>10,}")
print("no-fentry causes:")
for o in ("vmlinux", "modules"):
    print(f"  {o}: " + ", ".join(f"{c} {n:,}" for (oo, c), n in sorted(cause.items()) if oo == o))
print(f"cached re-index (DWARF reused; fentry/blacklist/init tables of {idx.get('probe_tables_read')} files "
      f"read): {float(sys.argv[3]):.2f} s")
PY
