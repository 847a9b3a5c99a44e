#!/usr/bin/env bash
# symdex's speed and memory against its peers, every ratio from one run, per kernel:
#
#   tests/bench/performance.sh [--kernels K1,K2,...] [--runs N] [--out FILE] [SYMDEX_BIN]
#
# Kernels: those of tests/bench/kernels.sh (default: debian-6.1-amd64, debian-6.1-arm64,
# debian-6.12-amd64). The peer is llvm-symbolizer-14 on the same debug file, timed in the same run:
# each of --runs (default 5) times the peer and symdex back to back, the figures are medians and
# each ratio the median of the runs' own ratios (page cache warm for everyone):
#   - whole-kernel cold index: `symdex index` of System.map + every module + every debug file into a
#     new database (wall, the median of --runs; peak RSS of the largest process, /usr/bin/time %M,
#     the highest of the runs) against the llvm-symbolizer batch over vmlinux's text-symbol
#     addresses (its wall and peak RSS). Goal: <= 2x the batch, <= 200 MiB. The kernel
#     double-amd64 (tests/bench/kernels.sh: Debian 6.1 with twice the modules) gets these two rows
#     only: what grows with the kernel.
#   - `symdex addr -` over those addresses from a new process, on that whole-kernel index. Goal >= 10x.
#   - by build-ID, warm: 10,000 of them, `symdex addr --build-id ID -` (text, then --json) from a
#     new process on an index made by `symdex index --build-id` against llvm-symbolizer on the
#     debug file. Goal >= 20x.
#   - the daemon at its floor (the first kernel only; --daemon-seconds 0 skips it): symdexd serving
#     the whole-kernel index on a unix socket, Resolve over 4,096 canonical specs and Which over
#     4,096 names, warmed, 16 clients (build/bin/daemon_load), against tests/bench/load/floor_server
#     replaying symdexd's own answers to the same requests with gRPC alone; --daemon-rounds (5) pairs
#     of --daemon-seconds (10) runs, symdexd and the floor back to back; the ratio is the median of
#     the rounds' ratios. Goal: calls/s >= 0.95x the floor's, p99 <= 1.2x. Health/Check (the no-op
#     call) of each is reported.
# Prints one markdown table and writes it to --out. Corpora as tests/bench/kernel_matrix.sh.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$here/../..
KERNELS=debian-6.1-amd64,debian-6.1-arm64,debian-6.12-amd64
RUNS=5
OUT=
DAEMON_SECONDS=10
DAEMON_ROUNDS=5
while [ $# -gt 0 ]; do
  case $1 in
    --kernels) KERNELS=$2; shift 2 ;;
    --runs) RUNS=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --daemon-seconds) DAEMON_SECONDS=$2; shift 2 ;;
    --daemon-rounds) DAEMON_ROUNDS=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "performance: unknown option $1" >&2; exit 2 ;;
    *) break ;;
  esac
done
SYMDEX=$(realpath "${1:-$root/build/bin/symdex}")
unset DEBUGINFOD_URLS SYMDEX_DB
command -v llvm-symbolizer-14 >/dev/null || { echo "performance: needs llvm-symbolizer-14 (apt-get install llvm-14)" >&2; exit 2; }
bin=$(dirname "$SYMDEX")
work=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done; rm -rf "$work"' EXIT
CACHE=${SYMDEX_CORPUS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/symdex-corpus}
log() { printf '[performance] %s\n' "$*" >&2; }
# shellcheck source=tests/bench/kernels.sh
. "$here/kernels.sh"
now() { date +%s.%N; }
# pair_medians FILE PEER_COL SYM_COL sym/peer|peer/sym -> "peer_median sym_median ratio_median":
# each line one run of the peer and of symdex back to back; the ratio is the median of the runs'.
pair_medians() {
  awk -v p="$2" -v s="$3" -v d="$4" '{pp[NR]=$p; ss[NR]=$s; rr[NR]=(d=="sym/peer") ? $s/$p : $p/$s}
    function med(a, n,  i, j, t) { for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
      return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
    END { n = NR; printf "%s %s %s\n", med(pp, n), med(ss, n), med(rr, n) }' "$1"
}
median() { sort -n | awk '{a[NR]=$1} END{print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
rows=()
row() {  # row KERNEL MEASURE SYMDEX PEER RATIO GOAL MET
  rows+=("| $1 | $2 | $3 | $4 | $5 | $6 | $7 |")
  printf '  %-18s %-52s %-22s %-14s %-8s %-8s %s\n' "$@" >&2
}
met() { python3 -c "import sys; print('yes' if $1 else 'no')"; }
timed() {  # timed IN OUT CMD... -> seconds (symdex addr exits 1 for an address in no function)
  local in=$1 out=$2 s e
  shift 2
  s=$(now); "$@" <"$in" >"$out" || [ $? = 1 ]; e=$(now)
  echo "$e - $s" | bc
}
peak_mib() { echo $(($(cat "$1") / 1024)); }
warm() {  # the page cache warm for every reader alike
  cat "$VML" "$MAP" >/dev/null
  find -L "$DBG/usr/lib/debug/lib/modules" "$MODS" -type f -print0 2>/dev/null | xargs -0 cat >/dev/null 2>&1 || true
}
index_whole() {  # index_whole DB NAME [MAP MODS DEBUG_DIR] -> prints "seconds peak_kib"
  local db=$1 name=$2 s e
  rm -rf "$db"*
  s=$(now)
  /usr/bin/time -f %M -o "$work/peak" "$SYMDEX" --db "$db" index -q --json --system-map "${3:-$MAP}" \
    --modules-dir "${4:-$MODS}" --debug-dir "${5:-$DBG/usr/lib/debug}" --name "$name" >"$work/index.json" \
    2>"$work/index.err" || { cat "$work/index.err" >&2; return 1; }
  e=$(now)
  echo "$(echo "$e - $s" | bc) $(cat "$work/peak")"
}

# daemon_pairs K DB: symdexd on DB against floor_server, Resolve and Which (see the header).
daemon_pairs() {
  local k=$1 db=$2 target i srv rpc
  for b in symdexd daemon_load floor_server; do
    [ -x "$bin/$b" ] || { log "$bin/$b not built: no daemon figures"; return 0; }
  done
  target=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["target"])' <"$work/index.json")
  "$SYMDEX" --db "$db" symbols --canonical --json -t "$target" | python3 -c '
import json, random, sys
syms = json.load(sys.stdin)["symbols"]
rnd = random.Random(1)
specs, names = sorted({s["canonical"] for s in syms}), sorted({s["name"] for s in syms})
rnd.shuffle(specs); rnd.shuffle(names)
open(sys.argv[1], "w").write("".join(x + "\n" for x in specs[:4096]))
open(sys.argv[2], "w").write("".join(x + "\n" for x in names[:4096]))' "$work/specs" "$work/names"
  "$bin/symdexd" --listen "unix:$work/d.sock" --db "$db" --no-index-live --modules-poll 0 >"$work/symdexd.log" 2>&1 &
  pids+=($!)
  for i in $(seq 600); do [ -S "$work/d.sock" ] && break; sleep 0.1; done
  "$bin/floor_server" --listen "unix:$work/f.sock" --upstream "unix:$work/d.sock" --target "$target" \
    --inputs "$work/specs" --which-inputs "$work/names" >"$work/floor.log" 2>&1 &
  pids+=($!)
  for i in $(seq 600); do [ -S "$work/f.sock" ] && break; sleep 0.1; done
  [ -S "$work/d.sock" ] && [ -S "$work/f.sock" ] || { log "symdexd or floor_server did not start"; cat "$work/symdexd.log" "$work/floor.log" >&2; return 1; }
  load() {  # load SERVER RPC ROUND [INPUTS]
    local in=()
    [ -n "${4:-}" ] && in=(--inputs "$4")
    "$bin/daemon_load" --connect "unix:$work/$1.sock" --target "$target" --rpc "$2" --clients 16 \
      --seconds "$DAEMON_SECONDS" --warmup 2 "${in[@]}" --json >"$work/load-$1-$2-$3.json" 2>/dev/null
  }
  for i in $(seq "$DAEMON_ROUNDS"); do
    log "daemon round $i of $DAEMON_ROUNDS"
    for srv in d f; do
      load "$srv" health "$i"
      load "$srv" resolve "$i" "$work/specs"
      load "$srv" which "$i" "$work/names"
    done
  done
  kill -TERM "${pids[@]}" 2>/dev/null || true
  wait "${pids[@]}" 2>/dev/null || true
  pids=()
  for rpc in health resolve which; do
    # Medians of symdexd's and the floor's figures, and of the per-round ratios (each round's pair
    # ran back to back: the ratio does not carry the machine's drift between rounds).
    read -r dq fq rq dp fp rp < <(python3 - "$work" "$rpc" "$DAEMON_ROUNDS" <<'PY'
import json, statistics, sys
w, rpc, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
runs = {s: [json.load(open(f"{w}/load-{s}-{rpc}-{i}.json")) for i in range(1, n + 1)] for s in "df"}
q = {s: [r["qps"] for r in runs[s]] for s in "df"}
p = {s: [r["latency_us"]["p99"] for r in runs[s]] for s in "df"}
med = statistics.median
print(med(q["d"]), med(q["f"]), med(a / b for a, b in zip(q["d"], q["f"])),
      med(p["d"]), med(p["f"]), med(a / b for a, b in zip(p["d"], p["f"])))
PY
)
    local what=$rpc goal_q=">= 0.95" goal_p="<= 1.2" mq mp
    case $rpc in
      health) what="Health/Check (the no-op call)" goal_q=- goal_p=- ;;
      resolve) what="Resolve (4,096 canonical specs, warmed)" ;;
      which) what="Which (4,096 names, warmed)" ;;
    esac
    r=$rq; mq=-; [ "$goal_q" = - ] || mq=$(met "$r >= 0.95")
    row "$k" "symdexd $what: calls/s / floor_server" "$(printf '%.0f/s' "$dq")" "$(printf '%.0f/s' "$fq")" \
      "$(printf '%.2f' "$r")" "$goal_q" "$mq"
    r=$rp; mp=-; [ "$goal_p" = - ] || mp=$(met "$r <= 1.2")
    row "$k" "symdexd $what: p99 / floor_server" "$(printf '%.0f us' "$dp")" "$(printf '%.0f us' "$fp")" \
      "$(printf '%.2f' "$r")" "$goal_p" "$mp"
  done
}

IFS=, read -r -a list <<<"$KERNELS"
daemon_done=0
for k in "${list[@]}"; do
  log "== $k"
  kernel "$k"
  warm
  awk '$2=="t"||$2=="T"{print "0x"$1}' "$MAP" | sort -u >"$work/addrs"
  awk '$2=="t"||$2=="T"{print "0x"$1}' "$MAP" | sort -u | shuf -n 10000 --random-source=<(yes) >"$work/addrs10k"
  n=$(wc -l <"$work/addrs")
  nko=$(find "$MODS" -name '*.ko*' | wc -l)

  # Whole kernel, cold, then `addr -` on the index just made, each run beside a run of the peer's
  # batch over every text address: a new database each run, the highest peak; each ratio the
  # median of the runs' own ratios (a run's pair shares the machine's load of the moment).
  for i in $(seq "$RUNS"); do
    p=$(timed "$work/addrs" "$work/llvm.out" /usr/bin/time -f %M -o "$work/peer-peak" llvm-symbolizer-14 --obj="$PEER_VML")
    read -r w peak < <(index_whole "$work/w.db" "$k")
    a=-
    [ "$k" = double-amd64 ] || a=$(timed "$work/addrs" "$work/addr.out" "$SYMDEX" --db "$work/w.db" addr -)
    echo "$p $w $a $peak $(cat "$work/peer-peak")" >>"$work/whole-$k"
  done
  read -r llvm whole rw <<<"$(pair_medians "$work/whole-$k" 1 2 sym/peer)"
  awk '{print $4}' "$work/whole-$k" | sort -n | tail -1 >"$work/peak"
  awk '{print $5}' "$work/whole-$k" | sort -n | tail -1 >"$work/peer-peak"
  row "$k" "whole-kernel cold index ($nko modules) / llvm batch ($n)" "$(printf '%.2f s' "$whole")" \
    "$(printf '%.2f s' "$llvm")" "$(printf '%.2f' "$rw")" "<= 2" "$(met "$rw <= 2")"
  row "$k" "whole-kernel cold index: peak RSS / llvm batch's" "$(peak_mib "$work/peak") MiB" \
    "$(peak_mib "$work/peer-peak") MiB" "$(awk -v s="$(cat "$work/peak")" -v p="$(cat "$work/peer-peak")" 'BEGIN { printf "%.2f", s / p }')" \
    "<= 200 MiB" "$(met "$(peak_mib "$work/peak") <= 200")"
  [ "$k" = double-amd64 ] && continue
  if [ "$daemon_done" = 0 ] && [ "$DAEMON_SECONDS" != 0 ]; then
    daemon_pairs "$k" "$work/w.db"
    daemon_done=1
  fi

  # addr over every text address on the whole-kernel index, from a new process (timed above).
  read -r _ t r <<<"$(pair_medians "$work/whole-$k" 1 3 peer/sym)"
  row "$k" "addr - ($n addresses), whole-kernel index" "$(printf '%.3f s' "$t")" "$(printf '%.2f s' "$llvm")" \
    "$(printf '%.1f' "$r")" ">= 10" "$(met "$r >= 10")"

  # By build-ID, warm, 10,000 addresses from a new process, text and --json, each run beside a
  # run of the peer over the same 10,000.
  bid=$(readelf -n "$VML" | awk '/Build ID/ {print $3; exit}')
  rm -rf "$work/b.db"*
  "$SYMDEX" --db "$work/b.db" index -q --build-id "$bid" --debug-dir "$DBG/usr/lib/debug" --no-debuginfod >/dev/null
  "$SYMDEX" --db "$work/b.db" addr --build-id "$bid" - <"$work/addrs10k" >/dev/null || true  # first touch
  for i in $(seq "$RUNS"); do
    echo "$(timed "$work/addrs10k" "$work/llvm10k.out" llvm-symbolizer-14 --obj="$PEER_VML")" \
      "$(timed "$work/addrs10k" "$work/b.out" "$SYMDEX" --db "$work/b.db" addr --build-id "$bid" -)" \
      "$(timed "$work/addrs10k" "$work/b.json" "$SYMDEX" --db "$work/b.db" --json addr --build-id "$bid" -)"
  done >"$work/bid-$k"
  read -r llvm10k t r <<<"$(pair_medians "$work/bid-$k" 1 2 peer/sym)"
  row "$k" "addr --build-id - (10,000 addresses), warm" "$(printf '%.3f s' "$t")" "$(printf '%.2f s' "$llvm10k")" \
    "$(printf '%.1f' "$r")" ">= 20" "$(met "$r >= 20")"
  read -r llvm10k t r <<<"$(pair_medians "$work/bid-$k" 1 3 peer/sym)"
  row "$k" "addr --json --build-id - (10,000 addresses), warm" "$(printf '%.3f s' "$t")" \
    "$(printf '%.2f s' "$llvm10k")" "$(printf '%.1f' "$r")" ">= 20" "$(met "$r >= 20")"
  # The answers name the function llvm-symbolizer names (the outermost frame's, clone suffixes
  # aside), where both name one: not at __pfx_/__cfi_ padding, which symdex reports as padding
  # before its function and llvm-symbolizer as the end of the function before.
  read -r same of < <(python3 - "$work/llvm10k.out" "$work/b.json" <<'PY'
import json, sys
blocks = open(sys.argv[1]).read().strip().split("\n\n")
res = json.load(open(sys.argv[2]))["results"]
pairs = [(b, r) for b, r in zip(blocks, res) if not r.get("symbol", "").startswith(("__pfx_", "__cfi_"))]
print(sum(1 for b, r in pairs if r.get("frames") and
          r["frames"][-1]["function"].split(".")[0] == b.split("\n")[-2].split(".")[0]), len(pairs))
PY
)
  row "$k" "  ... same outermost function as llvm-symbolizer (padding aside)" "$same" "$of" \
    "$(awk -v s="$same" -v n="$of" 'BEGIN { printf "%.2f%%", 100 * s / n }')" ">= 99%" "$(met "$same >= 0.99 * $of")"
done

{
  echo "Performance, $(date -u +%Y-%m-%d), $(nproc) cores ($(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)), $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?'): \`tests/bench/performance.sh --kernels $KERNELS --runs $RUNS\`"
  echo
  echo "| kernel | measure | symdex | peer | ratio | goal | met |"
  echo "|---|---|---|---|---|---|---|"
  printf '%s\n' "${rows[@]}"
} | tee "${OUT:-/dev/null}"
