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

# A real `perf record -g` of this host, its `perf script` decoded. Every kernel frame
# must be answered at the address perf printed, with the name perf printed (both from this
# kallsyms): the address decides among duplicated names.
# (The workload's own samples, not the whole machine's: what else runs on a busy machine would
# add samples without end.)
if command -v perf >/dev/null && perf record -q -g -e cpu-clock -o "$work/perf.data" -- \
     sh -c 'for i in $(seq 200); do cat /proc/self/status >/dev/null; ls / >/dev/null; done' 2>"$work/perf.err"; then
  perf script -i "$work/perf.data" -F comm,pid,tid,time,event,ip,sym,symoff,dso >"$work/perf.txt" 2>/dev/null
  rc=0
  "$SYMDEX" --json decode "$work/perf.txt" >"$work/perf.json" || rc=$?
  python3 - "$work/perf.txt" "$work/perf.json" "$work/kallsyms.snapshot" <<'PY' || fail=1
import bisect, collections, json, sys
lines = open(sys.argv[1]).read().split("\n")
r = json.load(open(sys.argv[2]))
at = collections.defaultdict(set)  # kallsyms: the names at each address (aliases)
for ln in open(sys.argv[3]):
    p = ln.split()
    if len(p) >= 3 and p[1] in "tTwW":
        at[int(p[0], 16)].add(p[2])
starts = sorted(at)
def names_holding(addr):
    i = bisect.bisect_right(starts, addr) - 1
    return at[starts[i]] if i >= 0 else set()
kernel = sum(1 for ln in lines if ln.rstrip().endswith("([kernel.kallsyms])"))
bad = []
for f in r["frames"]:
    p = lines[f["line"] - 1].split()
    printed, (name, off) = int(p[0], 16), p[1].rsplit("+", 1)
    # The same name, or another name kallsyms gives the same code (__x64_sys_vfork = __do_sys_vfork),
    # or for a return address the function holding the call (one byte back: a noreturn call's
    # return address is the next symbol's start, which perf names).
    same = (f.get("symbol") == name or f.get("symbol") in at.get(printed - int(off, 16), set()) or
            f.get("symbol") in names_holding(printed - 1))
    if f.get("target_address") != hex(printed) or not same:
        bad.append(f"{lines[f['line'] - 1].strip()} -> {f.get('symbol')} {f.get('target_address')} {f.get('note', '')}")
print(f"perf script: {kernel} [kernel.kallsyms] frames, {len(r['frames'])} decoded: {r['pinned']} pinned, "
      f"{r['ambiguous']} ambiguous, {r['unanswered']} not answered; {len(bad)} not at perf's address and name")
for b in bad[:10]:
    print("  " + b)
sys.exit(1 if bad or kernel == 0 or len(r["frames"]) < kernel else 0)
PY
  # The same samples as a pprof profile: `symdex pprof` names every kernel location as perf did,
  # and Go's own pprof reads the result.
  python3 "$here/perf_to_pprof.py" "$work/perf.txt" "$work/perf.pb"
  if "$SYMDEX" pprof "$work/perf.pb" -o "$work/perf.sym.pb.gz" && command -v go >/dev/null; then
    HOME=$work GOCACHE=$work/gocache go tool pprof -symbolize=none -raw "$work/perf.sym.pb.gz" >"$work/perf.raw" ||
      fail=1
    python3 - "$work/perf.txt" "$work/perf.raw" "$work/kallsyms.snapshot" <<'PY' || fail=1
import bisect, collections, re, sys
at = collections.defaultdict(set)  # kallsyms: the names at each address
for ln in open(sys.argv[3]):
    p = ln.split()
    if len(p) >= 3 and p[1] in "tTwW":
        at[int(p[0], 16)].add(p[2])
starts = sorted(at)
def holding(addr):
    i = bisect.bisect_right(starts, addr) - 1
    return at[starts[i]] if i >= 0 else set()
perf = {}
for ln in open(sys.argv[1]):
    p = ln.split()
    if len(p) >= 3 and p[-1] == "([kernel.kallsyms])":
        perf[int(p[0], 16)] = p[1].rsplit("+", 1)[0]
got, section = {}, None
for ln in open(sys.argv[2]):
    if not ln.startswith(" "):
        section = ln.strip()
        continue
    m = re.match(r"^\s+\d+: 0x([0-9a-f]+) M=\d+ (\S+)", ln)
    if section == "Locations" and m:
        got[int(m.group(1), 16)] = m.group(2)
# symdex names a duplicated copy by its canonical spec (name@...); a return address by the function
# holding its call (one byte back); either name of an alias.
base = {a: re.split(r"[@#]", re.sub(r"^[A-Za-z0-9_]+:(?=[A-Za-z_])", "", n))[0] for a, n in got.items()}
named = [a for a in perf if a in base and (base[a] == perf[a] or base[a] in holding(a) | holding(a - 1))]
print(f"pprof: {len(perf)} distinct kernel addresses in perf's samples; symdex's profile, as go tool pprof reads "
      f"it, names {len(named)} of them as perf and kallsyms do")
for a in [a for a in perf if a not in named][:5]:
    print(f"  {a:#x}: perf {perf[a]}, symdex {got.get(a)}")
sys.exit(0 if perf and len(named) == len(perf) else 1)
PY
  else
    echo "pprof: symdex pprof failed, or no go tool pprof to read its output"
    fail=1
  fi
else
  echo "perf: SKIP (no perf, or it cannot record kernel callchains here: $(tail -1 "$work/perf.err" 2>/dev/null))"
fi
exit $fail
