#!/usr/bin/env bash
# Indexes the real Debian 12 cloud kernel offline (System.map from the -dbg package, since the
# image package ships a placeholder; modules from the image package) and checks symdex's
# counts against binutils nm run over the same files.
#   debian_kernel.sh SYMDEX_BIN
set -euo pipefail
unset DEBUGINFOD_URLS  # hermetic: debug files come from the corpus, never the network
SYMDEX=$1
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"

eval "$("$here/../corpus/fetch-debian-kernel.sh" dbg)"
DBG=$ROOT
eval "$("$here/../corpus/fetch-debian-kernel.sh" image)"
IMG=$ROOT
MAP=$DBG/usr/lib/debug/boot/System.map-$KREL
MODS=$IMG/lib/modules/$KREL
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export SYMDEX_DB=$work/index.db

nko=$(find "$MODS" -name '*.ko*' | wc -l)
echo "kernel $KREL: $(wc -l <"$MAP") System.map lines, $nko module files"
start=$(date +%s.%N)
# Peak RSS of the whole run as /usr/bin/time reports it (the largest of symdex and its DWARF
# workers, file-backed pages included): a cold whole-kernel index is bounded to 300 MB.
/usr/bin/time -f %M -o "$work/peak_kb" \
  "$SYMDEX" index --system-map "$MAP" --modules-dir "$MODS" --debug-dir "$DBG/usr/lib/debug" --name debian \
  >"$work/index.out"
end=$(date +%s.%N)
cat "$work/index.out"
echo "index time: $(python3 -c "print(f'{$end-$start:.2f}')") s, peak RSS $(( $(cat "$work/peak_kb") / 1024 )) MB"

# --- independent counts with nm ------------------------------------------------------------
# kas_alias's filter list (scripts/kas_alias v7), as grep -E patterns.
cat >"$work/noise" <<'PAT'
^__compound_literal\.[0-9]+$
^__[wm]*key\.[0-9]+$
^_*TRACE_SYSTEM.*$
^__already_done\.[0-9]+$
^__msg\.[0-9]+$
^__func__\.[0-9]+$
^CSWTCH\.[0-9]+$
^_rs\.[0-9]+$
^___tp_str\.[0-9]+$
^__flags\.[0-9]+$
^___done\.[0-9]+$
^__print_once\.[0-9]+$
^___once_key\.[0-9]+$
^__pfx_.*$
^__cfi_.*$
^\.LC[0-9]+$
^\.L[0-9]+.[0-9]+$
^__UNIQUE_ID_.*$
^symbols\.[0-9]+$
^_note_[0-9]+$
PAT
awk '$2=="t"||$2=="T"{print $3}' "$MAP" >"$work/vmlinux.text"
find "$MODS" -name '*.ko' -print0 | xargs -0 nm --format=sysv 2>/dev/null |
  awk -F'|' 'NF>=7{n=$1;c=$3;s=$7;gsub(/ /,"",n);gsub(/ /,"",c);gsub(/ /,"",s);
             if(c=="t"||c=="T") print n "\t" s}' >"$work/modules.text"
dupcount() { sort | uniq -c | awk '$1>1{d++; n+=$1} END{print d+0, n+0}'; }
read -r nm_names nm_syms < <({ cat "$work/vmlinux.text"; cut -f1 "$work/modules.text"; } |
  grep -Evf "$work/noise" | dupcount)
read -r nm_noinit_names nm_noinit_syms < <({ cat "$work/vmlinux.text";
  awk -F'\t' '$2 !~ /^\.(init|exit)/ {print $1}' "$work/modules.text"; } | grep -Evf "$work/noise" | dupcount)
read -r nm_vml_names _ < <(grep -Evf "$work/noise" "$work/vmlinux.text" | dupcount)
nm_text=$(( $(wc -l <"$work/vmlinux.text") + $(wc -l <"$work/modules.text") ))
nm_name_show=$({ cat "$work/vmlinux.text"; cut -f1 "$work/modules.text"; } | grep -cx 'name_show')

"$SYMDEX" dups --json >"$work/dups.json"
"$SYMDEX" dups --with-init --json >"$work/dups-init.json"
"$SYMDEX" status --json >"$work/status.json"
"$SYMDEX" which name_show --exact --json >"$work/which.json"

check_eq "cold whole-kernel index peak RSS <= 300 MB" "yes" \
  "$([ "$(cat "$work/peak_kb")" -le $((300 * 1024)) ] && echo yes || echo "no ($(( $(cat "$work/peak_kb") / 1024 )) MB)")"
check_eq "modules indexed (all module files)" "$nko" "$(jq_num 'd["targets"][0]["modules"]' <"$work/status.json")"
check_eq "text symbols (System.map t/T + nm t/T over modules)" "$nm_text" \
  "$(jq_num 'd["targets"][0]["text_symbols"]' <"$work/status.json")"
check_eq "duplicated text names incl. module init/exit (plain nm)" "$nm_names" "$(jq_num 'd["names"]' <"$work/dups-init.json")"
check_eq "text symbols carrying them" "$nm_syms" "$(jq_num 'd["symbols"]' <"$work/dups-init.json")"
check_eq "names duplicated inside vmlinux alone" "$nm_vml_names" \
  "$(jq_num 'd["names_duplicated_within_vmlinux"]' <"$work/dups.json")"
check_eq "duplicated text names, kas_alias rules (default)" "$nm_noinit_names" "$(jq_num 'd["names"]' <"$work/dups.json")"
check_eq "text symbols carrying them" "$nm_noinit_syms" "$(jq_num 'd["symbols"]' <"$work/dups.json")"
check_eq "which name_show --exact (text instances)" "$nm_name_show" \
  "$(jq_num 'sum(1 for i in d["instances"] if i["type"] in "tT")' <"$work/which.json")"
check_eq "file errors" "0" \
  "$(jq_num 'sum(1 for f in d["targets"][0]["files"] if f["status"]=="error")' <"$work/status.json")"
# --- debug info --------------------------------------------------------------------------
check_eq "debug files used (vmlinux + every module)" "$((nko + 1))" \
  "$(jq_num 'sum(1 for x in d["targets"][0]["debuginfo"] if x["status"]=="used")' <"$work/status.json")"
check_eq "duplicated-name instances without DWARF" "0" \
  "$(jq_num 'sum(1 for g in d["duplicates"] for i in g["instances"] if not i["dwarf"])' <"$work/dups.json")"
check_eq "duplicated names whose instances share (CU, file:line)" "0" \
  "$(jq_num 'sum(1 for g in d["duplicates"] if len({(i["dwarf"]["cu"], i["dwarf"]["file"], i["dwarf"]["line"]) for i in g["instances"]}) != len(g["instances"]))' <"$work/dups.json")"
# kas_alias's own example: name_show in drivers/pnp/card.c at line 186.
check_eq "name_show@drivers/pnp/card.c entry line" "186" \
  "$(jq_num '[i["dwarf"]["line"] for i in d["instances"] if i["dwarf"] and i["dwarf"]["file"]=="drivers/pnp/card.c"][0]' <"$work/which.json")"
# A CONFIG_KALLSYMS_LINEINFO trace: each vmlinux name_show as a return address 0x11 bytes in,
# annotated with the file:line symdex gives one byte back (the call). Every name_show has a
# twin of its size, so the annotation alone must pin each to its own copy.
python3 - "$SYMDEX" "$work" >"$work/lineinfo.out" <<'PY' || fail=1
import json, subprocess, sys
symdex, work = sys.argv[1], sys.argv[2]
insts = [i for i in json.load(open(f"{work}/which.json"))["instances"]
         if i["type"] in "tT" and i.get("module", "vmlinux") in ("", "vmlinux") and (i.get("size") or 0) > 0x20]
pinned = 0
for i in insts:
    a = int(i["address"], 16)
    leaf = json.loads(subprocess.run([symdex, "--json", "addr", hex(a + 0x10)], capture_output=True, text=True,
                                     check=True).stdout)["results"][0]["frames"][0]
    log = f"{work}/lineinfo.txt"
    with open(log, "w") as f:
        f.write(f"Call Trace:\n <TASK>\n name_show+0x11/{i['size']:#x} ({leaf['file']}:{leaf['line']})\n </TASK>\n")
    r = subprocess.run([symdex, "--json", "decode", log], capture_output=True, text=True)
    fr = json.loads(r.stdout)["frames"][0]
    ok = r.returncode == 0 and fr.get("target_address") == hex(a + 0x11)
    pinned += ok
    if not ok:
        print(f"  {i['address']} {leaf['file']}:{leaf['line']}: {fr.get('target_address')} {fr.get('note')}",
              file=sys.stderr)
print(f"{pinned}/{len(insts)}")
PY
check_eq "LINEINFO-annotated name_show frames pinned by the annotation alone" \
  "$(jq_num 'sum(1 for i in d["instances"] if i["type"] in "tT" and i.get("module", "vmlinux") in ("", "vmlinux") and (i.get("size") or 0) > 0x20)' <"$work/which.json")/$(jq_num 'sum(1 for i in d["instances"] if i["type"] in "tT" and i.get("module", "vmlinux") in ("", "vmlinux") and (i.get("size") or 0) > 0x20)' <"$work/which.json")" \
  "$(cat "$work/lineinfo.out")"
echo "--- entry lines vs llvm-symbolizer-14 (acceptance: >= 99.5%)"
"$here/compare_llvm_symbolizer.py" "$SYMDEX" "$DBG/usr/lib/debug/boot/vmlinux-$KREL" --min-agree 99.5 --show 3 || fail=1
echo "--- symdex addr vs llvm-symbolizer-14 on 5000 random vmlinux text addresses (acceptance: >= 99.5%)"
"$here/compare_addr_llvm.py" "$SYMDEX" "$DBG/usr/lib/debug/boot/vmlinux-$KREL" "$MAP" --count 5000 --min-agree 99.5 \
  --show 3 || fail=1
echo "--- symdex pprof: a profile of 3000 vmlinux text addresses, read back by go tool pprof, vs llvm-symbolizer-14"
"$here/compare_pprof.py" "$SYMDEX" "$DBG/usr/lib/debug/boot/vmlinux-$KREL" "$MAP" --target debian --count 3000 \
  --min-agree 99.5 --show 3 || fail=1
# The vmlinux address map answers exactly as the libdw walk: every text-symbol address, the
# byte after it, and 20,000 seeded random addresses in vmlinux text, with and without the map.
check_eq "address maps (vmlinux and every module) under $SYMDEX_DB-addrmaps" "$((nko + 1))" \
  "$(find "$SYMDEX_DB-addrmaps" -name '*.addrmap' | wc -l)"
/usr/bin/python3 - "$MAP" >"$work/map-addrs" <<'PY'
import random, sys
text = sorted(int(l.split()[0], 16) for l in open(sys.argv[1]) if l.split()[1] in ('t', 'T'))
rnd = random.Random(7)
out = [a + d for a in text for d in (0, 1)] + [rnd.randrange(text[0], text[-1]) for _ in range(20000)]
print('\n'.join(hex(a) for a in out))
PY
# (exit 1: the random ones past _etext, in rodata/data, are in no function)
"$SYMDEX" addr - <"$work/map-addrs" >"$work/with-map.out" || true
mv "$SYMDEX_DB-addrmaps" "$SYMDEX_DB-addrmaps.off"
"$SYMDEX" addr - <"$work/map-addrs" >"$work/libdw.out" || true
mv "$SYMDEX_DB-addrmaps.off" "$SYMDEX_DB-addrmaps"
check_eq "addresses answered differently by the address map and by libdw (of $(wc -l <"$work/map-addrs"))" "0" \
  "$(diff "$work/with-map.out" "$work/libdw.out" | grep -c '^<' || true)"
# No answer is better than a wrong one: past the kernel (no module there: offline) and past
# _etext are in no function, never "last_symbol+huge".
set +e
"$SYMDEX" addr 0xffffffffc0000000 0xffffffff82a00000 >"$work/outside.out"
outside_rc=$?
set -e
check_eq "addr past vmlinux and past _etext: exit code" "1" "$outside_rc"
check_eq "... 0xffffffffc0000000 is not in vmlinux" "1" \
  "$(grep -c '^0xffffffffc0000000: ?? (not in vmlinux' "$work/outside.out" || true)"
check_eq "... 0xffffffff82a00000 is after _etext" "1" \
  "$(grep -c '^0xffffffff82a00000: ?? (in vmlinux but in no function: after _etext' "$work/outside.out" || true)"
# A System.map truncated at a line boundary (as the tester's: 45,074 lines) is refused and the
# index kept; so is a complete-looking one with half the symbols.
vml_syms=$(jq_num 'd["targets"][0]["vmlinux_symbols"]' <"$work/status.json")
head -n 45074 "$MAP" >"$work/System.map-cut"
{ head -n 45000 "$MAP"; tail -n 10 "$MAP"; } >"$work/System.map-half"
for f in cut half; do
  set +e
  "$SYMDEX" index --system-map "$work/System.map-$f" --name debian --no-debuginfo >/dev/null 2>"$work/$f.err"
  rc=$?
  set -e
  check_eq "index of System.map-$f: exit code" "3" "$rc"
  check_eq "... the index is kept (vmlinux symbols)" "$vml_syms" \
    "$("$SYMDEX" status --json | jq_num 'd["targets"][0]["vmlinux_symbols"]')"
done
check_eq "System.map-cut: says _end is missing" "1" "$(grep -c 'has no _end, which every System.map has' "$work/cut.err" || true)"
check_eq "System.map-half: says how many fewer" "1" \
  "$(grep -c "has [0-9]* vmlinux symbols, the current index of target debian has $vml_syms ([0-9]*% fewer)" "$work/half.err" || true)"
# `lines` for a module-only source on an offline target: found in the module, no addresses there.
set +e
"$SYMDEX" lines drivers/uio/uio.c:500 >"$work/lines.out" 2>"$work/lines.err"
lines_rc=$?
set -e
check_eq "lines drivers/uio/uio.c:500 (offline: module code has no address) exit code" "1" "$lines_rc"
check_eq "... and says which module has it" "1" "$(grep -c 'has code in uio,' "$work/lines.err" || true)"
# A second run finds every debug file cached by build-ID.
"$SYMDEX" index --json --system-map "$MAP" --modules-dir "$MODS" --debug-dir "$DBG/usr/lib/debug" --name debian \
  >"$work/reindex.json"
check_eq "debug files re-parsed on the second run" "0" "$(jq_num 'd["debug_files"]["indexed"]' <"$work/reindex.json")"
check_eq "debug files cached on the second run" "$((nko + 1))" "$(jq_num 'd["debug_files"]["cached"]' <"$work/reindex.json")"
check_eq "address maps rebuilt on the second run" "0" "$(jq_num 'd["addr_maps"]["built"]' <"$work/reindex.json")"

# Round trip: every text symbol's canonical spec resolves back to exactly that symbol.
"$SYMDEX" symbols --canonical >"$work/canonical.tsv"
cut -f1 "$work/canonical.tsv" | "$SYMDEX" resolve --json - >"$work/roundtrip.json" || true
check_eq "canonical specs that do not resolve back to their symbol" "0" "$(roundtrip_mismatches "$work")"
check_eq "text symbols with a canonical spec" "$nm_text" "$(wc -l <"$work/canonical.tsv")"

# Every vmlinux instance of a duplicated name gets a _text+N probe; every module one a MOD:sym,
# an address, or (offline, name repeated inside its module) nothing.
check_eq "vmlinux dup instances without a _text+N probe" "0" \
  "$(jq_num 'sum(1 for g in d["duplicates"] for i in g["instances"] if i["module"]=="vmlinux" and not i["probe"].startswith("_text+"))' <"$work/dups.json")"
exit $fail
