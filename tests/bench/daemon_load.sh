#!/usr/bin/env bash
# Daemon load benchmark: symdexd serving the Debian cloud kernel (vmlinux + 1,121 modules, DWARF
# from the -dbg package) on a unix socket, loaded by build/bin/daemon_load (tests/bench/load/).
#   tests/bench/daemon_load.sh
# Environment:
#   SECONDS_PER_RPC=30   length of each timed run        CLIENTS=16   concurrent clients (own connection each)
#   RATES="10000 20000"  offered loads (calls/s) of the open-loop Resolve runs ("" skips them)
#   SYMDEX SYMDEXD DAEMON_LOAD   binaries (default build/bin/...)
#   DAEMON_CPUS / CLIENT_CPUS    taskset CPU lists; by default, with >= 4 CPUs, the daemon gets 0-1
#                                and the load generator the rest; with fewer, nothing is pinned and
#                                both share the machine (said in the output)
#   FLOOR_ROUNDS=2       Health/Resolve pairs timed against floor_server (step 5); FLOOR_SERVER its binary
#   KEEP=1               keep the work dir (index, inputs, JSON results, daemon log)
# Steps: (1) corpus + index (as tests/bench/index_dwarf.sh's "vmlinux + all modules" run);
# (2) inputs from the index via the CLI; (3) symdexd --no-index-live --modules-poll 0;
# (4) symbolize-all (2 passes: the daemon's first pass is the first Symbolize it ever serves) vs
#     llvm-symbolizer-14 on the same 46k vmlinux text-symbol addresses, then timed runs of
#     grpc.health.v1.Health/Check (the transport ceiling), Which, Resolve (closed loop over all
#     canonical specs, over a warmed 4,096-spec working set, over duplicated names' specs, over
#     ambiguous names; open loop at each of RATES), Symbolize (batch 64), each for SECONDS_PER_RPC with CLIENTS clients;
# (5) the floor: floor_server (tests/bench/load) replays symdexd's answers to the warmed specs with
#     gRPC alone, Health/Check and Resolve timed against it as above (FLOOR_ROUNDS=2 pairs);
# (6) SIGTERM, expect exit 0. Prints a summary table; exits 1 if a check failed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
SYMDEX=${SYMDEX:-$top/build/bin/symdex}
SYMDEXD=${SYMDEXD:-$top/build/bin/symdexd}
DAEMON_LOAD=${DAEMON_LOAD:-$top/build/bin/daemon_load}
SECS=${SECONDS_PER_RPC:-30}
CLIENTS=${CLIENTS:-16}
RATES=${RATES-10000 20000}
for b in "$SYMDEX" "$SYMDEXD" "$DAEMON_LOAD"; do
  [ -x "$b" ] || { echo "daemon_load.sh: $b not built (cmake --build build)" >&2; exit 2; }
done
command -v llvm-symbolizer-14 >/dev/null || { echo "daemon_load.sh: llvm-symbolizer-14 missing" >&2; exit 2; }
# shellcheck source=tests/bench/lib.sh
. "$here/lib.sh"

work=$(mktemp -d)
daemon_pid=
floor_pid=
cleanup() {
  if [ -n "$daemon_pid" ] && kill -0 "$daemon_pid" 2>/dev/null; then kill -KILL "$daemon_pid" 2>/dev/null || true; fi
  if [ -n "$floor_pid" ] && kill -0 "$floor_pid" 2>/dev/null; then kill -KILL "$floor_pid" 2>/dev/null || true; fi
  if [ "${KEEP:-0}" = 1 ]; then echo "work dir kept: $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT
failed=0
note_fail() { echo "FAIL: $*" >&2; echo "$*" >>"$work/failures"; failed=1; }

# --- (1) corpus and index ----------------------------------------------------------------------
bench_corpus
cat "$VML" "$MAP" >/dev/null  # page cache warm for everyone (as index_dwarf.sh)
echo "== indexing $KREL (System.map + $MODS + $DEBUG_DIR)" >&2
bench_index "$SYMDEX" "$work/idx.db" >"$work/index.json"
TARGET=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["target"])' <"$work/index.json")

# --- (2) inputs --------------------------------------------------------------------------------
# addrs: the vmlinux text-symbol addresses index_dwarf.sh gives llvm-symbolizer (46,390 here).
awk '$2=="t"||$2=="T"{print "0x"$1}' "$MAP" | sort -u >"$work/addrs.txt"
# Canonical specs (every text symbol; resolve round-trips them to the same symbol), the subset whose
# name is duplicated (the disambiguating path), distinct names for Which, and the duplicated names
# themselves (Resolve answers ABORTED with every candidate). Shuffled with a fixed seed.
"$SYMDEX" --db "$work/idx.db" symbols --canonical --json -t "$TARGET" >"$work/canonical.json"
python3 - "$work" <<'EOF'
import collections, json, random, sys
w = sys.argv[1]
syms = json.load(open(w + '/canonical.json'))['symbols']
count = collections.Counter(s['name'] for s in syms)
rnd = random.Random(1)
def write(name, items):
    items = list(items)
    rnd.shuffle(items)
    open(f'{w}/{name}.txt', 'w').write(''.join(i + '\n' for i in items))
write('specs_all', sorted({s['canonical'] for s in syms}))
write('specs_dups', sorted({s['canonical'] for s in syms if count[s['name']] > 1}))
write('names', sorted(count))
write('ambiguous', sorted(n for n, c in count.items() if c > 1))
EOF
rm -f "$work/canonical.json"
for f in addrs specs_all specs_dups names ambiguous; do printf '  %-12s %7d lines\n' "$f" "$(wc -l <"$work/$f.txt")" >&2; done

# --- (3) the daemon ----------------------------------------------------------------------------
ncpu=$(nproc)
if [ -z "${DAEMON_CPUS+x}" ] && [ "$ncpu" -ge 4 ]; then DAEMON_CPUS=0-1; CLIENT_CPUS=${CLIENT_CPUS:-2-$((ncpu - 1))}; fi
dpin=(); cpin=()
[ -n "${DAEMON_CPUS:-}" ] && dpin=(taskset -c "$DAEMON_CPUS")
[ -n "${CLIENT_CPUS:-}" ] && cpin=(taskset -c "$CLIENT_CPUS")
if [ ${#dpin[@]} -eq 0 ]; then
  placement="not pinned: daemon and load generator share all $ncpu CPUs"
else
  placement="daemon on CPUs ${DAEMON_CPUS}, load generator on ${CLIENT_CPUS:-all}"
fi
sock=$work/symdexd.sock
echo "== starting symdexd ($placement)" >&2
t_start=$(now)
"${dpin[@]}" "$SYMDEXD" --listen "unix:$sock" --db "$work/idx.db" --no-index-live --modules-poll 0 \
  >"$work/symdexd.log" 2>&1 &
daemon_pid=$!
for _ in $(seq 600); do
  [ -S "$sock" ] && break
  kill -0 "$daemon_pid" 2>/dev/null || break
  sleep 0.1
done
if ! [ -S "$sock" ]; then
  echo "symdexd did not create $sock (alive: $(kill -0 "$daemon_pid" 2>/dev/null && echo yes || echo no)); log:" >&2
  tail -n 30 "$work/symdexd.log" >&2
  exit 1
fi
t_ready=$(now)
# The server a run measures: symdexd, or floor_server for the floor runs (srv_pid/srv_sock set).
srv_pid=$daemon_pid srv_sock=$sock srv_name=symdexd
status_kb() { awk -v k="$1:" '$1==k{print $2}' "/proc/$srv_pid/status"; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$srv_pid/stat"; }
sys_busy_ticks() { awk '$1=="cpu"{print $2 + $3 + $4 + $7 + $8 + $9}' /proc/stat; }  # all CPUs, not idle/iowait
tck=$(getconf CLK_TCK)
mem() {  # VmRSS VmHWM RssAnon RssFile (kB) and thread count of the server now
  echo "$(status_kb VmRSS) $(status_kb VmHWM) $(status_kb RssAnon) $(status_kb RssFile) $(status_kb Threads)"
}
mem >"$work/idle.mem"

# run NAME daemon_load-args...: JSON to $work/NAME.json, the human table to stderr, daemon CPU noted.
run() {
  local name=$1 c0 c1 b0 b1 t0 t1 rc=0
  shift
  echo "== $name" >&2
  c0=$(cpu_ticks); b0=$(sys_busy_ticks); t0=$(now)
  "${cpin[@]}" "$DAEMON_LOAD" --connect "unix:$srv_sock" --target "$TARGET" --json "$@" >"$work/$name.json" || rc=$?
  c1=$(cpu_ticks); b1=$(sys_busy_ticks); t1=$(now)
  echo "$(( c1 - c0 )) $tck $t0 $t1 $(( b1 - b0 ))" >"$work/$name.cpu"
  mem >"$work/$name.mem"
  printf '  %s CPU: %.2f cores busy\n' "$srv_name" "$(echo "($c1 - $c0) / $tck / ($t1 - $t0)" | bc -l)" >&2
  [ "$rc" -eq 0 ] || note_fail "$name: daemon_load exited $rc (see its status line above)"
  kill -0 "$srv_pid" 2>/dev/null || { note_fail "$srv_name died during $name"; tail -n 30 "$work/$srv_name.log" >&2; exit 1; }
}

# --- (4) the runs ------------------------------------------------------------------------------
echo "load average before the runs: $(cut -d' ' -f1-3 /proc/loadavg) ($ncpu CPUs)" >"$work/loadavg"
# First: the 46k addresses through the daemon, before any other Symbolize warms it.
run symbolize_all --rpc symbolize-all --inputs "$work/addrs.txt" --batch 1024 --passes 2
# The same over one SymbolizeStream, batches pipelined (how a streaming frontend sends them).
run symbolize_stream --rpc symbolize-all --inputs "$work/addrs.txt" --batch 1024 --passes 2 --stream
echo "== llvm-symbolizer-14 --obj=vmlinux (same addresses, fresh process)" >&2
vml_cached=$(fincore -nb -o RES,SIZE "$VML" 2>/dev/null | awk '{printf "%d of %d MB", $1/1048576, $2/1048576}' || echo "?")
s=$(now); llvm-symbolizer-14 --obj="$VML" <"$work/addrs.txt" >"$work/llvm.out"; e=$(now)
llvm_s=$(echo "$e - $s" | bc)
echo "  $llvm_s s ($(grep -c . "$work/llvm.out") output lines); vmlinux in page cache: $vml_cached" >&2

run health --rpc health --clients "$CLIENTS" --seconds "$SECS"
run which --rpc which --clients "$CLIENTS" --seconds "$SECS" --inputs "$work/names.txt"
run resolve --rpc resolve --clients "$CLIENTS" --seconds "$SECS" --inputs "$work/specs_all.txt" --check-canonical
# The same on a 4,096-spec working set after a 5 s warm-up: what the daemon's caches make of a
# workload that repeats (the run above touches each of the ~110k specs about once).
head -n 4096 "$work/specs_all.txt" >"$work/specs_hot.txt"
run resolve_hot --rpc resolve --clients "$CLIENTS" --seconds "$SECS" --warmup 5 --inputs "$work/specs_hot.txt" --check-canonical
run resolve_dups --rpc resolve --clients "$CLIENTS" --seconds "$SECS" --inputs "$work/specs_dups.txt" --check-canonical
# Ambiguity details (every candidate) ride in trailing metadata: raise the client's 8 KiB default,
# as the CLI does (server/api/convert.h kMaxStatusDetailsBytes).
run resolve_ambiguous --rpc resolve --clients "$CLIENTS" --seconds "$SECS" --inputs "$work/ambiguous.txt" --max-metadata-kb 1024
for r in $RATES; do
  run "resolve_rate_$r" --rpc resolve --clients "$CLIENTS" --seconds "$SECS" --inputs "$work/specs_all.txt" --rate "$r"
done
run symbolize --rpc symbolize --clients "$CLIENTS" --seconds "$SECS" --inputs "$work/addrs.txt" --batch 64

# The floor: symdexd's own answers to the warmed 4,096 specs, served by gRPC
# alone (floor_server: no symdex code per call), Health/Check then Resolve, FLOOR_ROUNDS times.
# What Resolve / Health reaches there bounds what any daemon giving these answers can reach here.
FLOOR_SERVER=${FLOOR_SERVER:-$top/build/bin/floor_server}
if [ -x "$FLOOR_SERVER" ]; then
  echo "== floor_server (symdexd's answers, gRPC alone)" >&2
  fsock=$work/floor.sock
  "${dpin[@]}" "$FLOOR_SERVER" --listen "unix:$fsock" --upstream "unix:$sock" --target "$TARGET" \
    --inputs "$work/specs_hot.txt" >"$work/floor_server.log" 2>&1 &
  floor_pid=$!
  for _ in $(seq 300); do [ -S "$fsock" ] || { kill -0 "$floor_pid" 2>/dev/null && sleep 0.1 && continue; }; break; done
  if [ -S "$fsock" ]; then
    srv_pid=$floor_pid srv_sock=$fsock srv_name=floor_server
    for i in $(seq "${FLOOR_ROUNDS:-2}"); do
      run "floor_health_$i" --rpc health --clients "$CLIENTS" --seconds "$SECS"
      run "floor_resolve_$i" --rpc resolve --clients "$CLIENTS" --seconds "$SECS" --inputs "$work/specs_hot.txt"
    done
    srv_pid=$daemon_pid srv_sock=$sock srv_name=symdexd
  else
    note_fail "floor_server did not start; log: $(tail -n 3 "$work/floor_server.log")"
  fi
  kill -TERM "$floor_pid" 2>/dev/null || true
  wait "$floor_pid" 2>/dev/null || true
  floor_pid=
else
  echo "== $FLOOR_SERVER not built: no floor runs" >&2
fi

# --- (6) SIGTERM -------------------------------------------------------------------------------
kill -TERM "$daemon_pid"
s=$(now); drc=0
for _ in $(seq 300); do kill -0 "$daemon_pid" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$daemon_pid" 2>/dev/null; then
  note_fail "symdexd still running 30 s after SIGTERM; killing it"
  kill -KILL "$daemon_pid"
fi
wait "$daemon_pid" || drc=$?
e=$(now)
daemon_pid=
[ "$drc" -eq 0 ] || { note_fail "symdexd exited $drc after SIGTERM"; tail -n 20 "$work/symdexd.log" >&2; }
echo "$drc $(echo "$e - $s" | bc)" >"$work/term"

# --- summary -----------------------------------------------------------------------------------
python3 - "$work" "$KREL" "$ncpu" "$placement" "$llvm_s" "$vml_cached" "$(echo "$t_ready - $t_start" | bc)" "$RATES" <<'EOF'
import json, os, sys
w, krel, ncpu, placement, llvm_s, cached, startup, rates = sys.argv[1:]
llvm_s = float(llvm_s)
def load(n):
    p = f'{w}/{n}.json'
    if not os.path.exists(p) or not os.path.getsize(p):
        return None
    return json.load(open(p))
def mem(n):  # MB: VmRSS VmHWM RssAnon RssFile, threads
    v = open(f'{w}/{n}.mem').read().split()
    return [int(x) // 1024 for x in v[:4]] + [int(v[4])]
def cpu(n):  # (daemon cores busy, whole machine cores busy) over the run
    ticks, tck, t0, t1, busy = open(f'{w}/{n}.cpu').read().split()
    wall = float(t1) - float(t0)
    return int(ticks) / int(tck) / wall, int(busy) / int(tck) / wall, int(ticks) / int(tck)
idx = json.load(open(f'{w}/index.json'))
print(f"\nsymdexd load benchmark: kernel {krel} ({idx['symbols']} symbols, {idx['modules']} modules, "
      f"{idx['text_symbols_with_dwarf']} text symbols with DWARF), {ncpu} CPUs, {placement}")
print(open(f'{w}/loadavg').read().strip() + f"; daemon socket up {float(startup):.2f} s after exec")
print()
print(f"{'run':<34} {'calls/s':>9} {'OK/s':>9} {'p50 us':>8} {'p90 us':>8} {'p99 us':>8} {'p99.9':>8} {'max us':>8}"
      f" {'daemon':>6} {'client':>6} {'other':>6} {'us/call':>7} {'RSS MB':>6}  status codes")
rows = [('health', 'Health/Check (transport ceiling)'), ('which', 'Which (distinct names)'),
        ('resolve', 'Resolve (all canonical specs)'), ('resolve_hot', 'Resolve (4096 specs, warmed)'), ('resolve_dups', 'Resolve (dup-name canonical specs)'),
        ('resolve_ambiguous', 'Resolve (ambiguous names)')]
rows += [(f'resolve_rate_{r}', f'Resolve open loop @{r}/s') for r in rates.split()]
rows += [('symbolize', 'Symbolize (batch 64)')]
for key, label in rows:
    r = load(key)
    if r is None:
        if os.path.exists(f'{w}/{key}.cpu'):
            print(f"{label:<34} no result (daemon_load printed no JSON)")
        continue
    l = r['latency_us']
    codes = ' '.join(f'{k}={v}' for k, v in r['codes'].items())
    ccores = r['client_cpu_s'] / r['client_wall_s'] if r['client_wall_s'] else 0
    dcores, busy, dsecs = cpu(key)
    all_calls = r['calls'] + r.get('warmup_calls', 0)  # the daemon's CPU was sampled over both
    per_call = dsecs / all_calls * 1e6 if all_calls else 0
    other = max(0.0, busy - dcores - ccores)
    print(f"{label:<34} {r['qps']:>9.0f} {r['ok_qps']:>9.0f} {l['p50']:>8.0f} {l['p90']:>8.0f} {l['p99']:>8.0f}"
          f" {l['p999']:>8.0f} {l['max']:>8.0f} {dcores:>6.2f} {ccores:>6.2f} {other:>6.2f} {per_call:>7.0f} {mem(key)[0]:>6}  {codes}")
    extra = []
    if key == 'symbolize':
        extra.append(f"{r['items_per_s']:.0f} addresses/s, daemon CPU {dsecs / r['items'] * 1e6 if r['items'] else 0:.1f} us/address;"
                     f" {r['empty']} results without a symbol, {r['no_frames']} without frames")
    if 'canonical_mismatch' in r and key.startswith('resolve') and key not in ('resolve_ambiguous',):
        if r['canonical_mismatch']:
            extra.append(f"{r['canonical_mismatch']} OK answers whose canonical spec != the spec sent")
    for c, m in r.get('first_errors', {}).items():
        if key == 'resolve_ambiguous' and c == 'ABORTED':
            continue
        extra.append(f"first {c} (input '{r.get('first_error_inputs', {}).get(c, '?')[:60]}'): {m[:140]}")
    if r.get('unsent'):
        extra.append(f"{r['unsent']} calls due were never sent: the daemon fell behind the offered rate")
    for e in extra:
        print(f"{'':<36}{e}")
print("  daemon/client/other: CPU cores kept busy during the run by symdexd, daemon_load and everything else"
      " on the machine;\n  us/call: the daemon's CPU time per call (less sensitive to contention: 2 dedicated cores allow at most"
      " 2e6 / us/call calls/s);\n  RSS MB: the daemon's VmRSS after the run. Closed loop: each client sends when its"
      " last call returned,\n  so mean latency = clients / calls/s (Little's law). Open loop: calls are due on a"
      " fixed schedule and latency\n  counts from the due time, so a daemon that falls behind shows it as queueing.")
# Resolve and Which against the no-op call, same client, same run.
h = load('health')
if h and h['qps']:
    print("\nagainst Health/Check (the goal: >= 0.9x its calls/s, p99 <= 1.5x its p99):")
    for key, label in [('which', 'Which (distinct names)'), ('resolve_hot', 'Resolve (4096 specs, warmed)'),
                       ('resolve_dups', 'Resolve (dup-name canonical specs)'), ('resolve', 'Resolve (all canonical specs)')]:
        r = load(key)
        if not r:
            continue
        q = r['qps'] / h['qps']
        p = r['latency_us']['p99'] / h['latency_us']['p99'] if h['latency_us']['p99'] else 0
        ok = 'met' if q >= 0.9 and p <= 1.5 else 'not met'
        print(f"  {label:<34} calls/s {q:4.2f}x   p99 {p:4.2f}x   ({ok})")
    floor = [(load(f'floor_health_{i}'), load(f'floor_resolve_{i}')) for i in range(1, 100)
             if os.path.exists(f'{w}/floor_resolve_{i}.json')]
    floor = [(fh, fr) for fh, fr in floor if fh and fr and fh['qps']]
    if floor:
        print("the floor: symdexd's answers to the same 4,096 specs served by gRPC alone (floor_server: no symdex"
              " code per call),\nResolve against its own Health/Check, each round a pair of back-to-back runs:")
        for i, (fh, fr) in enumerate(floor, 1):
            q = fr['qps'] / fh['qps']
            p = fr['latency_us']['p99'] / fh['latency_us']['p99'] if fh['latency_us']['p99'] else 0
            print(f"  round {i}: Health {fh['qps']:7.0f}/s, Resolve {fr['qps']:7.0f}/s   calls/s {q:4.2f}x   p99 {p:4.2f}x")
        print("  (symdexd's Resolve cannot go above this ratio on this machine with this client without changing"
              " the answer)")
print()
for key, how in [('symbolize_all', 'unary Symbolize calls, one after another'),
                 ('symbolize_stream', 'one SymbolizeStream, batches pipelined')]:
  sa = load(key)
  if not sa:
    continue
  n = sa['addresses']
  print(f"symbolize {n} vmlinux text-symbol addresses (batches of {sa['batch']}, one client, {how}) vs llvm-symbolizer-14:")
  print(f"  llvm-symbolizer-14 --obj=vmlinux, fresh process:  {llvm_s:8.3f} s   (vmlinux in page cache: {cached}; warm, not a disk-cold run)")
  for p in sa['passes']:
      ratio = llvm_s / p['wall_s'] if p['wall_s'] else 0
      which = ('first pass (first Symbolize the daemon serves)' if key == 'symbolize_all' else 'pass 1 (daemon warm)') if p['pass'] == 1 else f"pass {p['pass']}"
      print(f"  symdexd {which:<46} {p['wall_s']:8.3f} s   {ratio:6.1f}x   "
            f"({p['with_symbol']} with a symbol, {p['with_frames']} with frames, {p['failed_calls']} failed calls"
            + (f"; {p['first_error'][:120]}" if p['first_error'] else '') + ")")
print()
print("daemon memory (MB; RssFile is mostly the mmapped debug files, RssAnon the heap):")
for key, label in [('idle', 'idle after start'), ('symbolize_all', 'after symbolize-all'), ('symbolize', 'after all runs')]:
    if os.path.exists(f'{w}/{key}.mem'):
        rss, hwm, anon, file, threads = mem(key)
        print(f"  {label:<20} VmRSS {rss:5}  VmHWM {hwm:5}  (RssAnon {anon:5}, RssFile {file:5}; {threads} threads)")
if os.path.exists(f'{w}/term'):
    rc, secs = open(f'{w}/term').read().split()
    print(f"SIGTERM: exit status {rc} after {float(secs):.2f} s")
if os.path.exists(f'{w}/failures'):
    print("FAILED CHECKS:\n  " + open(f'{w}/failures').read().strip().replace('\n', '\n  '))
EOF
exit "$failed"
