#!/usr/bin/env bash
# Corner cases of duplicated names on the real Debian cloud kernel (tests/corpus/fetch-debian-kernel.sh):
#  1. an offline index over a renamed, symlinked layout (System.map called `map`, modules under
#     `mods/`, debug files under DIR/lib/modules/<another name>/) still learns the release from
#     the modules' vermagic and finds vmlinux's and every module's debug file;
#  2. `kallsyms --aliases` lists exactly the alias lines kas_alias's rule gives (names counted
#     over every symbol type of vmlinux and the modules, computed here with nm), including the
#     functions named like a variable (watchdog, kern_path, ...).
#   corners.sh SYMDEX_BIN        (exit 77: the corpus is not there and cannot be fetched)
set -euo pipefail
unset DEBUGINFOD_URLS  # hermetic: debug files come from the corpus, never the network
SYMDEX=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")  # absolute: the index runs from the layout dir
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"

dbg_env=$("$here/../corpus/fetch-debian-kernel.sh" dbg) || { echo "SKIP: no Debian kernel corpus"; exit 77; }
eval "$dbg_env"
DBG=$ROOT
img_env=$("$here/../corpus/fetch-debian-kernel.sh" image) || { echo "SKIP: no Debian kernel corpus"; exit 77; }
eval "$img_env"
IMG=$ROOT
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export SYMDEX_DB=$work/index.db

# --- 1. the renamed layout: nothing in a path names the release ------------------------------
ln -s "$DBG/usr/lib/debug/boot/System.map-$KREL" "$work/map"
ln -s "$IMG/lib/modules/$KREL" "$work/mods"
ln -s "$IMG/boot/config-$KREL" "$work/config"  # found beside the map: probe verdicts know the config
mkdir -p "$work/dbg/lib/modules"
ln -s "$DBG/usr/lib/debug/lib/modules/$KREL" "$work/dbg/lib/modules/other-name"
nko=$(find -L "$work/mods" -name '*.ko*' | wc -l)
(cd "$work" && "$SYMDEX" index --json --system-map ./map --modules-dir ./mods --debug-dir ./dbg) >"$work/index.json"
"$SYMDEX" status --json >"$work/status.json"
check_eq "release (from the modules' vermagic)" "$KREL" "$(jq_num 'd["release"]' <"$work/index.json")"
check_eq "target named after it" "$KREL" "$(jq_num 'd["targets"][0]["name"]' <"$work/status.json")"
check_eq "modules indexed" "$nko" "$(jq_num 'd["targets"][0]["modules"]' <"$work/status.json")"
check_eq "debug files used (vmlinux + every module)" "$((nko + 1))" \
  "$(jq_num 'sum(1 for x in d["targets"][0]["debuginfo"] if x["status"]=="used")' <"$work/status.json")"
check_eq "vmlinux's debug file (under the renamed dir, its banner naming the release)" \
  "./dbg/lib/modules/other-name/vmlinux" \
  "$(jq_num '[x["path"] for x in d["targets"][0]["debuginfo"] if x["module"]=="vmlinux"][0]' <"$work/status.json")"
check_eq "module debug files outside dbg/lib/modules/other-name/" "0" \
  "$(jq_num 'sum(1 for x in d["targets"][0]["debuginfo"] if x["module"]!="vmlinux" and not x["path"].startswith("./dbg/lib/modules/other-name/"))' <"$work/status.json")"
check_eq "module debug files whose build-ID is not the module's" "0" \
  "$(jq_num 'sum(1 for x in d["targets"][0]["debuginfo"] if x["module"]!="vmlinux" and not x["detail"].endswith(": used"))' <"$work/status.json")"
check_eq "warnings" "0" "$(jq_num 'len(d.get("warnings", []))' <"$work/index.json")"

# --- probe verdicts on the whole kernel: three refusals, and the copies
# of t_start / s_next ftrace lists (what the booted 6.1 kernel lists: 1 of 6, 2 of 4) ----------
verdicts() {  # NAME -> "kind,kind,..." of its instances (exact name), and how many ftrace lists
  "$SYMDEX" --json which --exact "$1" | python3 -c '
import json, sys
d = json.load(sys.stdin)["instances"]
print(",".join(sorted(set(i["verdict"]["kind"] for i in d))), sum(i["verdict"]["ftrace"] for i in d))'
}
check_eq "profile_open (kernel/trace/, no fentry)" "no-fentry 0" "$(verdicts profile_open)"
check_eq "cpu_cpu_mask (header inline)" "no-fentry 0" "$(verdicts cpu_cpu_mask)"
check_eq "parse_no_stealacc (__init)" "init 0" "$(verdicts parse_no_stealacc)"
check_eq "t_start: copies ftrace lists" "no-fentry,traceable 1" "$(verdicts t_start)"
check_eq "s_next: copies ftrace lists" "no-fentry,traceable 2" "$(verdicts s_next)"
check_eq "kprobe on profile_open@trace_kprobe.c refused (exit 4)" "4" \
  "$("$SYMDEX" kprobe -n profile_open@trace_kprobe.c >/dev/null 2>&1; echo $?)"

# --- 2. kallsyms --aliases against kas_alias's rule, recomputed from nm ----------------------
# kas_alias counts every symbol nm prints (vmlinux: System.map; modules: nm of each .ko),
# and aliases a t/T symbol whose name occurs more than once and is not on its filter list.
# Offline, kallsyms lists vmlinux symbols only, so those are the alias lines expected.
awk '{print "vmlinux\t" $2 "\t" $3}' "$DBG/usr/lib/debug/boot/System.map-$KREL" >"$work/all.tsv"
find -L "$work/mods" -name '*.ko' -print0 | xargs -0 nm --format=sysv 2>/dev/null |
  awk -F'|' 'NF>=7{n=$1;c=$3;gsub(/ /,"",n);gsub(/ /,"",c); if(c!="U" && c!="w" && c!="v") print "module\t" c "\t" n}' \
    >>"$work/all.tsv"
/usr/bin/python3 - "$work/all.tsv" >"$work/expected" <<'PY'
import collections, re, sys
noise = re.compile("|".join([
    r"__compound_literal\.[0-9]+", r"__[wm]*key\.[0-9]+", r"_*TRACE_SYSTEM.*", r"__already_done\.[0-9]+",
    r"__msg\.[0-9]+", r"__func__\.[0-9]+", r"CSWTCH\.[0-9]+", r"_rs\.[0-9]+", r"___tp_str\.[0-9]+",
    r"__flags\.[0-9]+", r"___done\.[0-9]+", r"__print_once\.[0-9]+", r"___once_key\.[0-9]+", r"__pfx_.*",
    r"__cfi_.*", r"\.LC[0-9]+", r"\.L[0-9]+.[0-9]+", r"__UNIQUE_ID_.*", r"symbols\.[0-9]+", r"_note_[0-9]+"]))
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
count = collections.Counter(r[2] for r in rows)
for who, t, name in rows:
    if who == "vmlinux" and t in "tT" and count[name] > 1 and not noise.fullmatch(name):
        print(name)
PY
"$SYMDEX" kallsyms --aliases >"$work/kallsyms" 2>"$work/kallsyms.err"
{ grep '@' "$work/kallsyms" || true; } | awk '{print $3}' | sed 's/@.*//' | sort >"$work/got"
sort -o "$work/expected" "$work/expected"
check_eq "alias lines (kas_alias's rule, from nm: $(wc -l <"$work/expected"))" "$(wc -l <"$work/expected")" \
  "$(wc -l <"$work/got")"
check_eq "names aliased differently from kas_alias's rule" "0" "$(diff "$work/expected" "$work/got" | grep -c '^[<>]' || true)"
# The names symdex missed before: a function sharing its name with only data.
for n in watchdog verbose event_function set_root kern_path sysrq_handler pt_regs_offset; do
  awk -v n="$n" '$3==n && $2 ~ /^[tT]$/ {t=1} $3==n && $2 !~ /^[tT]$/ {o=1} END {exit !(t && o)}' \
    "$DBG/usr/lib/debug/boot/System.map-$KREL" || { echo "note: $n is not text + data in $KREL"; continue; }
  check_eq "$n (text + data): alias line" "1" "$(grep -c " $n@[A-Za-z0-9_]*_[0-9]*\$" "$work/kallsyms" || true)"
done
# --- the same kernel known only by its vmlinux build-ID: found by
# build-ID under the renamed debug dir, symbols from its .symtab: the same vmlinux text symbols,
# each with the same source line, as the System.map target ------------------------------------
bid=$(readelf -n "$DBG/usr/lib/debug/boot/vmlinux-$KREL" | awk '/Build ID/ {print $3}')
(cd "$work" && "$SYMDEX" index -q --build-id "$bid" --debug-dir ./dbg --no-debuginfod --no-addr-map)
"$SYMDEX" symbols -t "$KREL" -m vmlinux | sort >"$work/by-map.tsv"
"$SYMDEX" symbols -t "$bid" -m vmlinux | sort >"$work/by-id.tsv"
check_eq "build-ID target: vmlinux text symbols as from System.map" "$(wc -l <"$work/by-map.tsv") 0" \
  "$(wc -l <"$work/by-id.tsv") $(diff "$work/by-map.tsv" "$work/by-id.tsv" | grep -c '^[<>]' || true)"
check_eq "build-ID target: release from its linux_banner" "$KREL" \
  "$("$SYMDEX" --json status | python3 -c "import json,sys; print([t['release'] for t in json.load(sys.stdin)['targets'] if t['name'] == '$bid'][0])")"

exit $fail
