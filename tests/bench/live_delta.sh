#!/usr/bin/env bash
# Live module tracking in symdexd: what one module load costs as a delta (only that module's
# rows replaced: indexer::UpdateModules) against a whole re-index of the live target (SIGHUP).
# The live host is synthetic but full-sized: this machine's /proc/kallsyms (or, where addresses
# are hidden, a generated one of the same size) plus MODULES fake modules of SYMS_PER_MODULE
# text symbols each, listed in proc/modules; no debug info (the DWARF of a new module is parsed
# once per build-ID either way, so it is left out of both).
#   tests/bench/live_delta.sh [RUNS=5]     env: MODULES=60 SYMS_PER_MODULE=300
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
SYMDEXD=${SYMDEXD:-$top/build/bin/symdexd}
RUNS=${1:-5}
MODULES=${MODULES:-60}
PER=${SYMS_PER_MODULE:-300}
work=$(mktemp -d)
pid=
cleanup() { [ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
root=$work/root
mkdir -p "$root/proc/sys/kernel" "$root/sys/kernel"
echo "6.1.0-bench" >"$root/proc/sys/kernel/osrelease"
if head -1 /proc/kallsyms | grep -qv '^0*[[:space:]]'; then
  grep -v '\[' /proc/kallsyms >"$root/proc/kallsyms.base"
else  # addresses hidden: a vmlinux-sized symbol list of our own
  python3 -c 'print("\n".join(f"{0xffffffff81000000 + i * 64:016x} t fn_{i}" for i in range(120000)))' \
    >"$root/proc/kallsyms.base"
fi
# MODULES modules at 0xffffffffc0000000 + k * 1 MiB; proc/modules lists them (name size refs deps state addr).
write_modules() {  # write_modules SHIFT: module 0's base moves by SHIFT bytes (a reload elsewhere)
  python3 - "$root/proc" "$MODULES" "$PER" "$1" <<'PY'
import os, sys
proc, n, per, shift = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
base = lambda k: 0xffffffffc0000000 + k * (1 << 20) + (shift if k == 0 else 0)
with open(proc + "/kallsyms.base") as f, open(proc + "/kallsyms.new", "w") as out:
    out.write(f.read())
    for k in range(n):
        out.write("".join(f"{base(k) + i * 64:016x} t mfn_{k}_{i}\t[mod{k}]\n" for i in range(per)))
with open(proc + "/modules.new", "w") as out:
    out.write("".join(f"mod{k} {per * 64} 0 - Live 0x{base(k):016x}\n" for k in range(n)))
os.rename(proc + "/kallsyms.new", proc + "/kallsyms")
os.rename(proc + "/modules.new", proc + "/modules")
PY
}
write_modules 0
nsyms=$(wc -l <"$root/proc/kallsyms")
"$SYMDEXD" --listen "unix:$work/s.sock" --db "$work/i.db" --sysroot "$root" --index-live --modules-poll 0.2 \
  --no-debuginfod --metrics-listen "" >"$work/log" 2>&1 &
pid=$!
wait_lines() {  # wait_lines N: until the log has N "indexed the live host" lines
  for _ in $(seq 600); do
    [ "$(grep -c 'indexed the live host' "$work/log" || true)" -ge "$1" ] && return 0
    sleep 0.1
  done
  echo "live_delta.sh: the daemon did not index (log below)" >&2; cat "$work/log" >&2; exit 1
}
wait_lines 1
n=1
for i in $(seq "$RUNS"); do
  write_modules $((i * 4096)); n=$((n + 1)); wait_lines $n    # mod0 moved: a delta
  kill -HUP "$pid"; n=$((n + 1)); wait_lines $n               # SIGHUP: the whole target
done
kill -TERM "$pid"; wait "$pid" || true; pid=
secs() { sed -n 's/.*, \([0-9.]*\) s (read \([0-9.]*\) s, store \([0-9.]*\) s).*/\1 \2 \3/p'; }
grep 'indexed the live host (modules changed' "$work/log" | secs >"$work/delta"
grep 'indexed the live host (SIGHUP' "$work/log" | secs >"$work/full"
med() { awk -v c="$1" '{print $c}' "$2" | sort -n | awk '{a[NR]=$1} END{print (NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2}'; }
echo "live target: $nsyms kallsyms lines ($MODULES modules x $PER symbols), $(nproc) cores, median of $RUNS"
printf '  one module moved, delta (UpdateModules):  %6.3f s  (read kallsyms etc. %6.3f s, store %6.3f s)\n' \
  "$(med 1 "$work/delta")" "$(med 2 "$work/delta")" "$(med 3 "$work/delta")"
printf '  whole live target (SIGHUP):               %6.3f s  (read kallsyms etc. %6.3f s, store %6.3f s)\n' \
  "$(med 1 "$work/full")" "$(med 2 "$work/full")" "$(med 3 "$work/full")"
grep -q 'replaced modules mod0' "$work/log" || { echo "live_delta.sh: no delta update in the log" >&2; exit 1; }
