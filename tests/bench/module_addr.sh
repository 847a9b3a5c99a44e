#!/usr/bin/env bash
# Benchmark for module addresses: every function symbol in the .text section of
# every module debug file of the Debian cloud kernel (~1,100 .ko files), placed as a machine would
# have loaded them (a /sys/module capture with each module's .text base and build-ID note, written
# here; each .text page-aligned after the previous one, as in the kernel's module area), symbolized by
#   - llvm-symbolizer-14, one process over "CODE FILE.ko OFFSET" lines (the peer tool: it reads
#     each relocatable .ko's DWARF as it meets it; offsets are into .text)
#   - symdexd, cold (started for the run, nothing cached), asked through `symdex --connect
#     frames --modules-from CAPTURE -` with the module maps `symdex index` leaves
#   - the same without the maps (libdwfl's relocated DWARF, what symdex did before)
#   - `symdex --local frames` (embedded, no daemon) with the maps
# each RUNS times; prints medians and the ratios llvm / symdex. Checks that the map and libdwfl
# answers are byte-identical, and counts leaf frames that agree with eu-addr2line's.
# Page cache warm for all: CPU, not disk.
#   tests/bench/module_addr.sh [build/bin] [RUNS=3]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
BIN=$(readlink -f "${1:-$here/../../build/bin}")
RUNS=${2:-3}
# shellcheck source=tests/bench/lib.sh
. "$here/lib.sh"
command -v llvm-symbolizer-14 >/dev/null || { echo "module_addr.sh: llvm-symbolizer-14 missing" >&2; exit 2; }
bench_corpus  # KREL, MAP, VML, MODS, DEBUG_DIR
work=$(mktemp -d)
daemon=
cleanup() {
  [ -n "$daemon" ] && kill "$daemon" 2>/dev/null && wait "$daemon" 2>/dev/null
  [ -n "${KEEP:-}" ] || rm -rf "$work"; echo "work: $work" >&2
}
trap cleanup EXIT

echo "== indexing $KREL (System.map + modules + -dbg DWARF; builds the address maps)" >&2
bench_index "$BIN/symdex" "$work/i.db" >"$work/index.json"
maps=$work/i.db-addrmaps
"$BIN/symdex" --db "$work/i.db" --json status >"$work/status.json"

echo "== the /sys/module capture and the inputs" >&2
/usr/bin/python3 - "$work" <<'PY'
import json, os, subprocess, sys
work = sys.argv[1]
t = json.load(open(f"{work}/status.json"))["targets"][0]
mods = sorted((d["module"], d["path"]) for d in t["debuginfo"] if d["module"] != "vmlinux" and d.get("path"))
base = 0xffffffffc0000000
frames, llvm = [], []
for name, path in mods:
    out = subprocess.run(["readelf", "-SsW", path], capture_output=True, text=True, check=True).stdout
    text_ndx = None
    for line in out.splitlines():
        p = line.replace("[", " ").replace("]", " ").split()
        if len(p) > 5 and p[0].isdigit() and p[1] == ".text" and p[2] == "PROGBITS":
            text_ndx, text_size = p[0], int(p[5], 16)
    if text_ndx is None:
        continue
    offs = set()
    for line in out.splitlines():
        p = line.split()
        # Num: Value Size Type Bind Vis Ndx Name
        if len(p) >= 8 and p[0].endswith(":") and p[3] == "FUNC" and p[6] == text_ndx:
            offs.add(int(p[1], 16))
    if not offs:
        continue
    d = f"{work}/sys/module/{name}"
    os.makedirs(f"{d}/sections")
    os.makedirs(f"{d}/notes")
    open(f"{d}/sections/.text", "w").write(f"0x{base:016x}\n")
    subprocess.run(["objcopy", "-O", "binary", "--only-section=.note.gnu.build-id", path,
                    f"{d}/notes/.note.gnu.build-id"], check=True)
    for o in sorted(offs):
        frames.append(f"0x{base + o:x}")
        llvm.append(f"CODE {path} 0x{o:x}")
    base += (text_size + 0x1fff) & ~0xfff  # page-aligned, a guard page between modules
open(f"{work}/frames", "w").write("\n".join(frames) + "\n")
open(f"{work}/llvm.in", "w").write("\n".join(llvm) + "\n")
print(len(mods), len(frames), file=open(f"{work}/counts", "w"))
PY
read -r n_mods n_addrs <"$work/counts"
find "$DEBUG_DIR/lib/modules" -name '*.ko' -print0 | xargs -0 cat >/dev/null
cat "$maps"/* "$work/i.db" >/dev/null

start_daemon() {
  rm -f "$work/s.sock"
  "$BIN/symdexd" --db "$work/i.db" --listen "unix:$work/s.sock" --no-index-live --modules-poll 0 \
    >"$work/d.log" 2>&1 &
  daemon=$!
  for _ in $(seq 200); do
    "$BIN/symdex" --connect "unix:$work/s.sock" status >/dev/null 2>&1 && return
    sleep 0.05
  done
  echo "module_addr.sh: symdexd did not start" >&2
  cat "$work/d.log" >&2
  exit 1
}
stop_daemon() { kill "$daemon"; wait "$daemon" 2>/dev/null || true; daemon=; }
frames() {  # frames OUT ARGS...: the module addresses, answered (exit 1/2: some frames not found)
  local out=$1
  shift
  "$BIN/symdex" "$@" frames --kaslr-offset 0 --modules-from "$work/sys/module" - <"$work/frames" >"$out" || [ $? -le 2 ]
}
timed() {  # timed CMD...: seconds
  local s e
  s=$(now); "$@"; e=$(now)
  echo "$e - $s" | bc
}
for i in $(seq "$RUNS"); do
  echo "== run $i/$RUNS" >&2
  timed sh -c "llvm-symbolizer-14 --functions=linkage <'$work/llvm.in' >'$work/llvm.out'" >>"$work/t_llvm"
  start_daemon
  timed frames "$work/map.out" --connect "unix:$work/s.sock" >>"$work/t_map"
  stop_daemon
  mv "$maps" "$maps.off"
  start_daemon
  timed frames "$work/dwfl.out" --connect "unix:$work/s.sock" >>"$work/t_dwfl"
  stop_daemon
  mv "$maps.off" "$maps"
  timed frames "$work/local.out" --local --db "$work/i.db" >>"$work/t_local"
done
cmp -s "$work/map.out" "$work/dwfl.out" ||
  { echo "module_addr.sh: map and libdwfl answers differ" >&2; diff "$work/map.out" "$work/dwfl.out" | head >&2; exit 1; }
cmp -s "$work/map.out" "$work/local.out" ||
  { echo "module_addr.sh: daemon and embedded answers differ" >&2; exit 1; }
# Correctness against elfutils' own tool, which takes section-relative offsets of a relocatable
# file (llvm-symbolizer cannot: every section of a .ko sits at address 0, so an offset matches
# code in .text, .init.text and .exit.text alike and it answers from whichever it meets first).
# The leaf frame's function and line against `eu-addr2line -f -i -j .text` (per module).
agree=$("$BIN/symdex" --local --db "$work/i.db" --json frames --kaslr-offset 0 --modules-from "$work/sys/module" - \
  <"$work/frames" 2>/dev/null | /usr/bin/python3 -c '
import collections, json, subprocess, sys
res = json.load(sys.stdin)["results"]
by_mod = collections.OrderedDict()
for line in open(sys.argv[1]):
    _, path, off = line.split()
    by_mod.setdefault(path, []).append(off)
eu = []
for path, offs in by_mod.items():
    # Without -i: one (function, file:line) pair per address, the leaf.
    leaf = subprocess.run(["eu-addr2line", "-f", "-j", ".text", "-e", path] + offs,
                          capture_output=True, text=True).stdout.splitlines()
    for k in range(0, len(leaf) - 1, 2):
        eu.append((leaf[k], leaf[k + 1]))
same_line = same_fn = 0
for r, (fn, where) in zip(res, eu):
    f = (r.get("frames") or [{}])[0]
    line = where.rsplit(":", 2)
    eu_line = int(line[1]) if len(line) >= 2 and line[1].isdigit() else 0
    same_line += f.get("line", 0) == eu_line
    # eu-addr2line prints "f inlined at FILE:L in g" for inlined code and the DWARF name where
    # symdex names the outermost frame by its symbol (f.constprop.0, f.part.0, f.cold).
    eu_fn = fn.split(" ")[0]
    same_fn += eu_fn == "??" or (f.get("function") or "").split(".")[0] == eu_fn.split(".")[0]
print(len(eu), same_line, same_fn)' "$work/llvm.in" || true)
read -r eu_n eu_line eu_fn <<<"${agree:-0 0 0}"

ll=$(median <"$work/t_llvm"); mp=$(median <"$work/t_map"); dw=$(median <"$work/t_dwfl"); lo=$(median <"$work/t_local")
maps_mb=$(( $(du -sk "$maps" | cut -f1) / 1024 ))
map_s=$(/usr/bin/python3 -c "import json,sys; print(json.load(sys.stdin)['addr_map_seconds'])" <"$work/index.json")
echo "kernel $KREL: $n_addrs function addresses in the .text of $n_mods modules, $(nproc) cores, median of $RUNS runs"
printf '  llvm-symbolizer-14 over the .ko files:          %7.2f s\n' "$ll"
printf '  symdexd, cold, module address maps:             %7.2f s\n' "$mp"
printf '  symdexd, cold, no maps (libdwfl):               %7.2f s\n' "$dw"
printf '  symdex --local (embedded), module address maps: %7.2f s\n' "$lo"
printf '  address maps: %d MB for vmlinux + %d modules, built by symdex index in %.2f s\n' "$maps_mb" "$n_mods" "$map_s"
printf '  ratio llvm-symbolizer / symdexd with maps:   %5.1fx (target >= 10x)\n' "$(echo "$ll / $mp" | bc -l)"
printf '  ratio llvm-symbolizer / symdexd, libdwfl:    %5.1fx\n' "$(echo "$ll / $dw" | bc -l)"
printf '  ratio llvm-symbolizer / symdex --local:      %5.1fx\n' "$(echo "$ll / $lo" | bc -l)"
echo "  against eu-addr2line -f -j .text ($eu_n answers): same leaf line $eu_line, same leaf function $eu_fn"
