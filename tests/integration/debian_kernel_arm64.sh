#!/usr/bin/env bash
# Debian 12's arm64 cloud kernel, indexed offline on this (x86-64) machine — System.map from the
# -dbg package, modules from the image package, DWARF from the -dbg package — and by build-ID,
# checked against llvm-symbolizer-14 (which reads AArch64) and the kernel's own rules:
#   - System.map lines the kernel's kallsyms leaves out are left out and counted, not refused;
#   - every text symbol's entry line equals llvm-symbolizer's at the function's first instruction
#     (after the patchable-entry NOPs), all of them for duplicated names;
#   - random addresses in vmlinux text: function, file, line and inline chain as llvm-symbolizer,
#     through `symdex addr` and through `symdex pprof --kaslr-offset` (read back by go tool pprof);
#   - every canonical spec resolves back to its symbol; vmlinux probes are _stext+N (no _text in
#     an arm64 kallsyms);
#   - verdicts from arm64's tables: ftrace sites from .rela.dyn and __patchable_function_entries,
#     its blacklist areas (.idmap.text, ...);
#   - the kernel indexed by its build-ID answers as the one indexed from its System.map.
#   debian_kernel_arm64.sh SYMDEX_BIN
set -euo pipefail
unset DEBUGINFOD_URLS  # hermetic: debug files come from the corpus, never the network
SYMDEX=$1
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"

fetch() {
  local out
  out=$(SYMDEX_KERNEL_ARCH=arm64 "$here/../corpus/fetch-debian-kernel.sh" "$1") ||
    { echo "SKIP: the arm64 kernel's '$1' package cannot be fetched (dpkg --add-architecture arm64 needs root)"; exit 77; }
  eval "$out"
}
fetch dbg
DBG=$ROOT
fetch image
IMG=$ROOT
MAP=$DBG/usr/lib/debug/boot/System.map-$KREL
VML=$DBG/usr/lib/debug/boot/vmlinux-$KREL
MODS=$IMG/lib/modules/$KREL
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export SYMDEX_DB=$work/index.db

nko=$(find "$MODS" -name '*.ko*' | wc -l)
echo "kernel $KREL (arm64): $(wc -l <"$MAP") System.map lines, $nko module files"
/usr/bin/time -f %M -o "$work/peak_kb" \
  "$SYMDEX" index --system-map "$MAP" --modules-dir "$MODS" --debug-dir "$DBG/usr/lib/debug" \
  --kernel-config "$IMG/boot/config-$KREL" --name arm64 >"$work/index.out"
cat "$work/index.out"
echo "peak RSS $(($(cat "$work/peak_kb") / 1024)) MB"
"$SYMDEX" status --json >"$work/status.json"
"$SYMDEX" dups --json >"$work/dups.json"
"$SYMDEX" which name_show --exact --json >"$work/which.json"

# --- what the kernel keeps of System.map ------------------------------------------------------
check_eq "the System.map's hypervisor local labels are left out, counted (not the file refused)" "1" \
  "$(jq_num 'sum(1 for f in d["targets"][0]["files"] if f["role"]=="system-map" and any("__kvm_nvhe_.L" in x["rule"] for x in f["dropped"]))' \
    <"$work/status.json")"
check_eq "module mapping symbols (\$x, \$d) in the index" "0" \
  "$("$SYMDEX" symbols --all-types --json | jq_num 'sum(1 for s in d["symbols"] if s["name"].startswith("$"))')"
check_eq "probe anchor" "_stext" "$(jq_num 'd["targets"][0]["text_anchor"]' <"$work/status.json")"
check_eq "debug files used (vmlinux + every module)" "$((nko + 1))" \
  "$(jq_num 'sum(1 for x in d["targets"][0]["debuginfo"] if x["status"]=="used")' <"$work/status.json")"

# --- DWARF across the patchable entry ---------------------------------------------------------
check_eq "duplicated-name instances without DWARF (a function, or assembly's line)" "0" \
  "$(jq_num 'sum(1 for g in d["duplicates"] for i in g["instances"] if not (i["dwarf"] and i["dwarf"]["line"]))' \
    <"$work/dups.json")"
check_eq "name_show@drivers/pnp/card.c entry line" "186" \
  "$(jq_num '[i["dwarf"]["line"] for i in d["instances"] if i["dwarf"] and i["dwarf"]["file"]=="drivers/pnp/card.c"][0]' \
    <"$work/which.json")"
echo "--- entry lines vs llvm-symbolizer-14 (all text symbols >= 99.9%, duplicated names 100%)"
"$here/compare_llvm_symbolizer.py" "$SYMDEX" "$VML" --min-agree 99.9 --dups-min-agree 100 --show 3 || fail=1
echo "--- symdex addr vs llvm-symbolizer-14 on 20000 random vmlinux text addresses (>= 99.9%)"
"$here/compare_addr_llvm.py" "$SYMDEX" "$VML" "$MAP" --count 20000 --min-agree 99.9 --show 3 || fail=1
# A profile as a KASLR host's profiler records it (0x3324e5000000: the offset one boot of the
# qemu guest had), symbolized with that offset and read back by Go's pprof.
echo "--- symdex pprof --kaslr-offset: 3000 vmlinux text addresses, read by go tool pprof, vs llvm-symbolizer-14 (>= 99.9%)"
"$here/compare_pprof.py" "$SYMDEX" "$VML" "$MAP" --target arm64 --kaslr-offset 0x3324e5000000 --count 3000 \
  --min-agree 99.9 --show 3 || fail=1

# --- probes -----------------------------------------------------------------------------------
check_eq "vmlinux duplicated-name instances without an _stext+N probe" "0" \
  "$(jq_num 'sum(1 for g in d["duplicates"] for i in g["instances"] if i["module"]=="vmlinux" and not i["probe"].startswith("_stext+"))' \
    <"$work/dups.json")"
verdict() {  # verdict NAME: the verdict of NAME's first vmlinux instance
  "$SYMDEX" which "$1" --exact --json | jq_num '[i["verdict"]["kind"] for i in d["instances"] if i["module"]=="vmlinux"][0]'
}
check_eq "name_show (an ftrace site: its two NOPs)" "traceable" "$(verdict name_show)"
check_eq "profile_open (kernel/trace/: no ftrace site)" "no-fentry" "$(verdict profile_open)"
check_eq "brk_handler (NOKPROBE_SYMBOL: the blacklist table's address from .rela.dyn)" "blacklisted" "$(verdict brk_handler)"
check_eq "__cpu_setup (.idmap.text: arm64's blacklist area)" "blacklisted" "$(verdict __cpu_setup)"
check_eq "uio:name_show (its module's __patchable_function_entries)" "traceable" \
  "$("$SYMDEX" which name_show --exact --json | jq_num '[i["verdict"]["kind"] for i in d["instances"] if i["module"]=="uio"][0]')"
check_eq "_stext+N of name_show@drivers/pnp/card.c resolves back to it" "drivers/pnp/card.c" \
  "$("$SYMDEX" resolve --json "$(jq_num '[i["probe"] for i in d["instances"] if i["dwarf"] and i["dwarf"]["file"]=="drivers/pnp/card.c"][0]' <"$work/which.json")" |
    jq_num 'd["results"][0]["instance"]["dwarf"]["file"]')"

# Round trip: every text symbol's canonical spec resolves back to exactly that symbol.
"$SYMDEX" symbols --canonical >"$work/canonical.tsv"
cut -f1 "$work/canonical.tsv" | "$SYMDEX" resolve --json - >"$work/roundtrip.json" || true
check_eq "canonical specs that do not resolve back to their symbol (of $(wc -l <"$work/canonical.tsv"))" "0" \
  "$(roundtrip_mismatches "$work")"

# --- by build-ID: the vmlinux's own symbol table, as the kernel keeps it -------------------------
bid=$(jq_num '[x["build_id"] for x in d["targets"][0]["debuginfo"] if x["module"]=="vmlinux"][0]' <"$work/status.json")
"$SYMDEX" --db "$work/bid.db" index -q --build-id "$bid" --debug-dir "$DBG/usr/lib/debug" \
  --kernel-config "$IMG/boot/config-$KREL" --no-debuginfod
# The same vmlinux instances, probes, verdicts and lines (sizes are exact from the symbol table,
# and the build-ID target has no modules: those differ).
vml_answers() {  # vml_answers [--db DB]: each vmlinux instance of a few names, one line each
  for n in name_show profile_open brk_handler __cpu_setup type_show; do
    "$SYMDEX" "$@" which "$n" --exact --json | /usr/bin/python3 -c '
import json, sys
for i in json.load(sys.stdin)["instances"]:
    if i["module"] == "vmlinux":
        w = i["dwarf"] or {}
        print(i["name"], i["address"], i["probe"], i["verdict"]["kind"], "%s:%s" % (w.get("file"), w.get("line")))'
  done
}
vml_answers >"$work/offline.out"
vml_answers --db "$work/bid.db" >"$work/bid.out"
check_eq "vmlinux answers by build-ID as from the System.map ($(wc -l <"$work/offline.out") instances)" "same" \
  "$(cmp -s "$work/offline.out" "$work/bid.out" && echo same || diff "$work/offline.out" "$work/bid.out" | head -5)"
check_eq "... and its kprobe" "$("$SYMDEX" kprobe -n name_show@drivers/pnp/card.c)" \
  "$("$SYMDEX" --db "$work/bid.db" kprobe -n name_show@drivers/pnp/card.c)"
exit $fail
