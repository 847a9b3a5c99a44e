#!/usr/bin/env bash
# The Python client example (examples/python/symdex_client.py) against a real symdexd serving an
# index of a miniature kernel built here, every answer checked against the CLI on the same index.
#   python_client.sh SYMDEX_BIN SYMDEXD_BIN SOURCE_DIR
# Exits 77 (ctest: skipped) only when no python3 with grpc + protobuf is installed.
set -euo pipefail
unset DEBUGINFOD_URLS  # hermetic
SYMDEX=$1
SYMDEXD=$2
SRC=$3
CLIENT=$SRC/examples/python/symdex_client.py

# Debian's python3-grpcio/python3-protobuf belong to /usr/bin/python3; a python3 earlier on PATH
# (pyenv, venv) usually lacks them.
PY=""
for p in ${SYMDEX_PYTHON:-} /usr/bin/python3 python3; do
  if "$p" -c 'import grpc, google.protobuf' 2>/dev/null; then PY=$p; break; fi
done
if [ -z "$PY" ]; then
  echo "SKIP: no python3 with grpc and protobuf (apt-get install python3-grpcio python3-protobuf)"
  exit 77
fi
[ -x "$SYMDEXD" ] || { echo "FAIL: $SYMDEXD not built"; exit 1; }

work=$(mktemp -d)
daemon=""
# shellcheck disable=SC2317  # run by the EXIT trap
cleanup() {
  if [ -n "$daemon" ] && kill -0 "$daemon" 2>/dev/null; then kill -KILL "$daemon"; fi
  rm -rf "$work"
}
trap cleanup EXIT
fail=0
check() {  # check WHAT COMMAND...: runs a Python assertion script; prints ok/FAIL
  local what=$1; shift
  if out=$("$@" 2>&1); then
    printf 'ok    %-55s %s\n' "$what" "$out"
  else
    printf 'FAIL  %-55s\n%s\n' "$what" "$out"
    fail=1
  fi
}

# 1. Stubs, exactly as examples/python/README.md says.
stubs=$work/gen
mkdir -p "$stubs"
protoc --python_out="$stubs" --grpc_out="$stubs" --plugin=protoc-gen-grpc=/usr/bin/grpc_python_plugin \
  -I "$SRC/proto" "$SRC/proto/symdex/v1/symdex.proto" "$SRC/proto/google/rpc/status.proto"

# 2. The miniature kernel of tests/unit/kernel_fixture.cc: name_show in two files (one with a
# .cold split), linked as a vmlinux (with _text) and as a module; System.map from nm, debug files
# in a debug dir, the module stripped as a distribution ships it.
kernel=$work/kernel
R=6.1.0-99-fixture
src=$kernel/build/reproducible-path/linux
mkdir -p "$src/include/linux" "$src/drivers/a" "$src/drivers/b" "$kernel/obj"
cat >"$src/include/linux/common.h" <<'EOF'
static inline int hdr_helper(int x)
{
	return x * 3 + 1;
}
EOF
cat >"$src/drivers/a/a.c" <<'EOF'
#include "../../include/linux/common.h"
int (*a_ptr)(int) = hdr_helper;
__attribute__((cold, noinline)) void cold_report(int x);
__attribute__((noinline)) static int name_show(int x)
{
	if (__builtin_expect(x < 0, 0))
		cold_report(x);
	return x + 1;
}
int a_entry(int x) { return name_show(x) + a_ptr(x) + hdr_helper(x); }
EOF
cat >"$src/drivers/b/b.c" <<'EOF'
#include "../../include/linux/common.h"
int (*b_ptr)(int) = hdr_helper;

__attribute__((noinline)) static int name_show(int x)
{
	return x * 2;
}
int b_entry(int x) { return name_show(x) + b_ptr(x) + hdr_helper(x); }
__attribute__((cold, noinline)) void cold_report(int x) { b_ptr = 0; }
EOF
(cd "$src" && gcc -g -O2 -c drivers/a/a.c -o "$kernel/obj/a.o" && gcc -g -O2 -c drivers/b/b.c -o "$kernel/obj/b.o")
gcc -no-pie -nostartfiles -Wl,-e,a_entry -Wl,--build-id '-Wl,--defsym=_text=ADDR(.text)' -Wl,-u,_etext \
  "$kernel/obj/a.o" "$kernel/obj/b.o" -o "$kernel/vmlinux"
ld -r --build-id "$kernel/obj/a.o" "$kernel/obj/b.o" -o "$kernel/fake_mod.ko"
printf 'name=fake_mod\0' >"$kernel/modinfo"
objcopy --add-section .modinfo="$kernel/modinfo" "$kernel/fake_mod.ko"
mkdir -p "$kernel/boot" "$kernel/modules/kernel" "$kernel/debug/boot" "$kernel/debug/lib/modules/$R"
nm -n --defined-only "$kernel/vmlinux" >"$kernel/boot/System.map-$R"
objcopy --strip-debug "$kernel/fake_mod.ko" "$kernel/modules/kernel/fake_mod.ko"
cp "$kernel/vmlinux" "$kernel/debug/boot/vmlinux-$R"
cp "$kernel/fake_mod.ko" "$kernel/debug/lib/modules/$R/fake_mod.ko"

db=$work/index.db
cli() { "$SYMDEX" --db "$db" "$@"; }
cli index --system-map "$kernel/boot/System.map-$R" --modules-dir "$kernel/modules" \
  --debug-dir "$kernel/debug" --no-debuginfod

# 3. The daemon on a unix socket in the work dir.
sock=$work/s.sock
"$SYMDEXD" --listen "unix:$sock" --db "$db" --no-index-live --modules-poll 0 2>"$work/daemon.log" &
daemon=$!
for _ in $(seq 1 300); do
  [ -S "$sock" ] && break
  kill -0 "$daemon" 2>/dev/null || { echo "FAIL: symdexd exited before listening:"; cat "$work/daemon.log"; exit 1; }
  sleep 0.1
done
[ -S "$sock" ] || { echo "FAIL: no socket $sock after 30s:"; cat "$work/daemon.log"; exit 1; }

client() {  # client NAME ARGS...: output in $work/NAME.out, exit code in $work/NAME.rc
  local name=$1; shift
  set +e
  "$PY" "$CLIENT" --connect "unix:$sock" --stubs "$stubs" "$@" >"$work/$name.out" 2>"$work/$name.err"
  echo $? >"$work/$name.rc"
  set -e
  echo "--- symdex_client.py $* (exit $(cat "$work/$name.rc"))"
  cat "$work/$name.out" "$work/$name.err"
}
client targets targets
client which which name_show --exact
client ambiguous resolve name_show
client unique resolve vmlinux:name_show@b.c
cli which name_show --exact --json >"$work/which.json"
addrs=$("$PY" -c 'import json,sys
print(" ".join(hex(int(i["address"], 16) + 1) for i in json.load(sys.stdin)["instances"] if i["address"]))' <"$work/which.json")
# shellcheck disable=SC2086
client symbolize symbolize $addrs
client probe probe vmlinux:name_show@b.c
client probe_args probe -r --group grp --event ev vmlinux:name_show@a.c 'arg1=%di:x64'
client probe_dup probe fake_mod:name_show@a.c
client demo demo name_show

# The CLI's answers on the same index, the reference.
cli status --json >"$work/status.json"
cli resolve name_show --json >"$work/resolve.json" || true
cli resolve vmlinux:name_show@b.c --json >"$work/unique.json"
# shellcheck disable=SC2086
cli addr $addrs --json >"$work/addr.json"
cli kprobe -n vmlinux:name_show@b.c >"$work/kprobe.txt"
cli kprobe -n -r -e grp/ev vmlinux:name_show@a.c 'arg1=%di:x64' >"$work/kprobe_args.txt"

echo "--- checks"
check "ListTargets = symdex status" "$PY" - "$work" <<'EOF'
import json, re, sys
w = sys.argv[1]
t = json.load(open(f"{w}/status.json"))["targets"][0]
lines = [l for l in open(f"{w}/targets.out").read().splitlines() if l.startswith("target ")]
want = (f"target {t['name']}  {t['kind']}  release {t['release']}  {t['vmlinux_symbols'] + t['module_symbols']} symbols  "
        f"{t['modules']} modules  generation {t['generation']}")
assert lines == [want], (lines, want)
assert open(f"{w}/targets.rc").read().strip() == "0"
print(t["name"])
EOF
check "Which name_show --exact = symdex which" "$PY" - "$work" <<'EOF'
import json, sys
w = sys.argv[1]
d = json.load(open(f"{w}/which.json"))
def where(i):
    return hex(int(i["address"], 16)) if i["address"] else f"{i['section']}+{i['section_offset']:#x}"
want = sorted((i["name"], i["module"], where(i), i["probe"] or "-", f"{i['dwarf']['file']}:{i['dwarf']['line']}")
              for i in d["instances"])
out = open(f"{w}/which.out").read().splitlines()
assert out[0].startswith(f"name_show: {d['count']} instances"), out[0]
got = sorted(tuple(l.split()) for l in out[1:])
assert got == want, (got, want)
assert d["count"] >= 4  # two files x (vmlinux, module)
print(f"{d['count']} instances")
EOF
check "Resolve name_show: ABORTED + Ambiguity = symdex resolve" "$PY" - "$work" <<'EOF'
import json, sys
w = sys.argv[1]
cands = json.load(open(f"{w}/resolve.json"))["results"][0]["candidates"]
want = [c["canonical"] for c in cands]
out = open(f"{w}/ambiguous.out").read().splitlines()
assert out[0] == f"name_show is ambiguous: {len(want)} candidates", out[0]
got = [l.split()[0] for l in out[1:]]
assert sorted(got) == sorted(want), (got, want)
assert open(f"{w}/ambiguous.rc").read().strip() == "2"
assert "ABORTED" in open(f"{w}/ambiguous.err").read()
print(" ".join(got))
EOF
check "Resolve vmlinux:name_show@b.c = symdex resolve" "$PY" - "$work" <<'EOF'
import json, sys
w = sys.argv[1]
i = json.load(open(f"{w}/unique.json"))["results"][0]["instance"]
want = (f"vmlinux:name_show@b.c -> {i['canonical']}  {hex(int(i['address'], 16))}  {i['probe']}  "
        f"{i['dwarf']['file']}:{i['dwarf']['line']}")
got = open(f"{w}/unique.out").read().strip()
assert got == want, (got, want)
print(got)
EOF
check "Symbolize batch = symdex addr" "$PY" - "$work" <<'EOF'
import json, sys
w = sys.argv[1]
want = []
for r in json.load(open(f"{w}/addr.json"))["results"]:
    want.append(f"{hex(int(r['address'], 16))}: {r['symbol']}+{r['offset']:#x} [{r['module']}]")
    for n, f in enumerate(r["frames"]):
        want.append(f"    {'(inlined by) ' if n else ''}{f['function']} at {f['file']}:{f['line']}:{f['column']}")
got = [l for l in open(f"{w}/symbolize.out").read().splitlines() if not l.startswith("    note: ")]
assert got == want, (got, want)
assert len(want) >= 4
print(f"{sum(1 for l in want if not l.startswith(' '))} addresses")
EOF
check "ProbeDefinition = symdex kprobe -n" "$PY" - "$work" <<'EOF'
import sys
w = sys.argv[1]
for name, ref in (("probe", "kprobe"), ("probe_args", "kprobe_args")):
    got = open(f"{w}/{name}.out").read().splitlines()[0]
    want = open(f"{w}/{ref}.txt").read().strip()
    assert got == want, (got, want)
    assert open(f"{w}/{name}.rc").read().strip() == "0"
    print(got, end="; ")
EOF
check "ProbeDefinition of a module copy: FAILED_PRECONDITION" "$PY" - "$work" <<'EOF'
import sys
w = sys.argv[1]
err = open(f"{w}/probe_dup.err").read()
assert "FAILED_PRECONDITION" in err, err
assert open(f"{w}/probe_dup.rc").read().strip() == "3"
print(err.strip().splitlines()[0][:80])
EOF
check "demo runs every call" "$PY" - "$work" <<'EOF'
import sys
w = sys.argv[1]
out = open(f"{w}/demo.out").read()
for h in ("== ListTargets", "== Which name_show", "== Resolve name_show", "== Symbolize", "== ProbeDefinition"):
    assert h in out, h
assert open(f"{w}/kprobe.txt").read().strip() in out
assert open(f"{w}/demo.rc").read().strip() == "0"
print(f"{len(out.splitlines())} lines")
EOF

# 4. SIGTERM: drain and exit 0; every log line in the documented form.
kill -TERM "$daemon"
set +e
for _ in $(seq 1 300); do kill -0 "$daemon" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$daemon" 2>/dev/null; then
  echo "FAIL: symdexd still running 30s after SIGTERM; killing it"
  kill -KILL "$daemon"
fi
wait "$daemon"
rc=$?
set -e
daemon=""
echo "--- symdexd stderr"
cat "$work/daemon.log"
check "symdexd exits 0 on SIGTERM" test "$rc" -eq 0
check "symdexd log lines are 'symdexd: LEVEL: message'" \
  "$PY" -c 'import re, sys
lines = open(sys.argv[1]).read().splitlines()
bad = [l for l in lines if not re.match(r"symdexd: (debug|info|warn|error): \S", l)]
assert lines and not bad, bad
print(f"{len(lines)} lines")' "$work/daemon.log"
exit $fail
